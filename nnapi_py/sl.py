"""The NNAPI Support Library: the Python side of the table's own functions and the diagnostics.

``ANeuralNetworks_getSLDriverImpl()`` (build_ffi.py, include/NeuralNetworksSupportLibraryImpl.h)
returns a table whose ANeuralNetworks* slots are the library's exported functions; the rest
arrive here: the SL_ functions (caching from fds, cache files needed, performance figures,
vendor extensions) and the six extension functions of the table, all checked as Android's
runtime checks them (it has no extension either: BAD_DATA where it would look one up).

Diagnostics: once a client registers callbacks (SL_ANeuralNetworksDiagnostic_registerCallbacks)
every Compilation_finish and every computation (compute, burstCompute, startCompute,
startComputeWithDependencies) is reported with the values Android's runtime reports
(runtime/Telemetry.cpp).  The ABI layer calls finish() / watch() only while ACTIVE is true: with
no callback registered the cost is that one check.

Runtime-objects layer: imports execution/model/devices; only _capi imports this module.
"""
import itertools
import os
import threading
import time
import weakref

from . import constants as C
from . import devices as devices_mod
from .errors import NNError, bad_data, bad_state, null
from .execution import Execution, COMPUTATION, PREPARATION, UINT64_MAX
from .model import TEMP, SUBGRAPH

ACTIVE = False          # a diagnostic callback is registered: the one check the ABI layer makes

# ANeuralNetworksDiagnosticExecutionMode
ASYNC, SYNC, BURST, ASYNC_WITH_DEPS = 1, 2, 3, 4
# ANeuralNetworksDiagnosticDataClass
UNKNOWN, OTHER, FLOAT32, FLOAT16, QUANT, MIXED = range(6)

# What every device asks for to cache one compilation through fds: one model file (the
# prepared plan) and one data file (its constants).  0/0 would mean "no caching through fds".
CACHE_FILES_NEEDED = (1, 1)
MAX_CACHE_FILES = 32    # Android's limit per kind (kMaxNumberOfCacheFiles)

_QUANT_TYPES = frozenset((C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT16_SYMM, C.TENSOR_QUANT8_SYMM_PER_CHANNEL,
                          C.TENSOR_QUANT16_ASYMM, C.TENSOR_QUANT8_SYMM, C.TENSOR_QUANT8_ASYMM_SIGNED))
_CLASS_OF = {C.TENSOR_FLOAT32: FLOAT32, C.TENSOR_FLOAT16: FLOAT16, **{t: QUANT for t in _QUANT_TYPES}}
_CONTROL_FLOW = frozenset((C.OPERATION_CODES["IF"], C.OPERATION_CODES["WHILE"]))
# SL_ANeuralNetworksPerformanceInfoCode -> the device's performance class (devices.Device.cost)
_PERF_KIND = {0: "relaxed", 1: "relaxed", 2: "if", 3: "while"}

ffi = lib = None
_comp = _device = _model = _exec = None      # the ABI layer's handle getters (install)


# ---------------------------------------------------------------------------- caching
def record_cache_fds(compilation, model_fds, data_fds, token):
    """Keep the (duplicated) cache fds and token of SL_ANeuralNetworksCompilation_setCachingFromFds
    on the compilation: ``compilation.cache_fds = (model_fds, data_fds, token)``.  The fds belong
    to the compilation (closed when it goes, or when another call replaces them); what the
    compilation cache does with them is compilation.py's business."""
    old = compilation.__dict__.get("_cache_fds_closer")
    if old is not None:
        old()
    compilation.cache_fds = (tuple(model_fds), tuple(data_fds), bytes(token))
    compilation._cache_fds_closer = weakref.finalize(compilation, _close_all, tuple(model_fds) + tuple(data_fds))


def _close_all(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def setCachingFromFds(h, model_fds, n_model, data_fds, n_data, token):
    if not h:
        raise null("compilation is NULL")
    if n_model and not model_fds:
        raise null(f"modelCacheFds is NULL but numModelCacheFiles is {n_model}")
    if n_data and not data_fds:
        raise null(f"dataCacheFds is NULL but numDataCacheFiles is {n_data}")
    if not token:
        raise null("token is NULL")
    c = _comp(h)
    if c.finished:
        raise bad_state("the compilation has been finished and can no longer be modified")
    for what, n in (("numModelCacheFiles", n_model), ("numDataCacheFiles", n_data)):
        if n > MAX_CACHE_FILES:
            raise bad_data(f"{what} {n} is more than {MAX_CACHE_FILES} (Android's limit)")
    dups = []
    try:
        for what, arr, n in (("model", model_fds, n_model), ("data", data_fds, n_data)):
            for k in range(n):
                fd = arr[k]
                try:
                    dups.append(os.dup(fd))
                except OSError as e:
                    raise bad_data(f"cannot duplicate {what} cache fd {fd} (index {k}): {e.strerror}") from None
    except BaseException:
        _close_all(dups)
        raise
    record_cache_fds(c, dups[:n_model], dups[n_model:], ffi.buffer(token, C.BYTE_SIZE_OF_CACHE_TOKEN)[:])
    return 0


def getNumberOfCacheFilesNeeded(dev, n_model, n_data):
    if n_model:
        n_model[0] = 0
    if n_data:
        n_data[0] = 0
    if not dev:
        raise null("device is NULL")
    if not n_model or not n_data:
        raise null("numModelCacheFiles or numDataCacheFiles is NULL")
    _device(dev)
    n_model[0], n_data[0] = CACHE_FILES_NEEDED
    return 0


# ------------------------------------------------------------------------ performance
def _figures(device, cls):
    """(execTime, powerUsage) of `device` for a performance class, as Device.cost reads them."""
    p = device.performance
    return p.get(cls, p.get("float32", (1.0, 1.0)))


def operand_performance(device):
    """[(operand type, execTime, powerUsage)] for every non-OEM operand type."""
    rows = []
    for t in sorted(C.TYPE_NAMES):
        if t in (C.OEM_SCALAR, C.TENSOR_OEM_BYTE):
            continue
        rows.append((t,) + tuple(_figures(device, "quant8" if t in _QUANT_TYPES else "float32")))
    return rows


def getPerformanceInfo(dev, kind, out):
    if out:
        out.execTime = out.powerUsage = 0.0
    if not dev:
        raise null("device is NULL")
    if not out:
        raise null("performanceInfo is NULL")
    d = _device(dev)
    if kind not in _PERF_KIND:
        raise bad_data(f"unknown performanceInfoKind {kind} (expected 0 RELAXED_SCALAR, 1 RELAXED_TENSOR, 2 IF, 3 WHILE)")
    out.execTime, out.powerUsage = _figures(d, _PERF_KIND[kind])
    return 0


def _operand_performance(dev, context, callback, types, perf, cap, count):
    if not dev or not context or not callback:
        raise null("device, context or callback is NULL")
    if not count:
        raise null("count is NULL")
    rows = operand_performance(_device(dev))[:cap]
    for k, (t, e, p) in enumerate(rows):
        types[k] = t
        perf[2 * k], perf[2 * k + 1] = e, p
    count[0] = len(rows)
    return 0


# ------------------------------------------------------------------ vendor extensions
def getVendorExtensionCount(dev, out):
    if out:
        out[0] = 0
    if not dev:
        raise null("device is NULL")
    if not out:
        raise null("vendorExtensionCount is NULL")
    _device(dev)
    return 0


def _no_extension(index):
    return bad_data(f"vendor extension index {index} is out of range: the device has no vendor extension")


def getVendorExtensionName(dev, index, out):
    if out:
        out[0] = ffi.NULL
    if not dev:
        raise null("device is NULL")
    if not out:
        raise null("extensionName is NULL")
    _device(dev)
    raise _no_extension(index)


def _extension_operand_types(dev, index, context, callback):
    if not dev or not context or not callback:
        raise null("device, context or callback is NULL")
    _device(dev)
    raise _no_extension(index)


def _unknown_extension(name):
    return bad_data(f"no vendor extension named {ffi.string(name).decode(errors='replace')!r} "
                    f"exists (nnapi_py's devices have none)")


def Device_getExtensionSupport(dev, name, out):
    if not dev or not name or not out:
        raise null("device, extensionName or isExtensionSupported is NULL")
    _device(dev)
    out[0] = False
    return 0


def Model_getExtensionOperandType(h, name, code, out):
    if not h or not name or not out:
        raise null("model, extensionName or type is NULL")
    _model(h)
    raise _unknown_extension(name)


Model_getExtensionOperationType = Model_getExtensionOperandType


def Model_setOperandExtensionData(h, index, data, length):
    if not h or (not data and length):
        raise null("model is NULL, or data is NULL with a length")
    m = _model(h)
    if m.finished:
        raise bad_state("the model has been finished and can no longer be modified")
    if not 0 <= index < len(m.types):
        raise bad_data(f"operand index {index} is out of range ({len(m.types)} operands)")
    raise bad_data(f"operand {index} has a base operand type ({C.TYPE_NAMES.get(m.types[index], m.types[index])}), "
                   f"not an extension type: it takes no extension data")


def _one_device_only(what):
    return bad_data(f"{what} needs a compilation created by ANeuralNetworksCompilation_createForDevices "
                    f"with exactly one device")


def Compilation_addExtensionAttribute(h, name, code, data, length):
    if not h or not name or (not data and length):
        raise null("compilation or extensionName is NULL, or data is NULL with a length")
    c = _comp(h)
    if c.finished:
        raise bad_state("the compilation has been finished and can no longer be modified")
    if not c.single_device:
        raise _one_device_only("ANeuralNetworksCompilation_addExtensionAttribute")
    raise _unknown_extension(name)


def Execution_addExtensionAttribute(h, name, code, data, length):
    if not h or not name or (not data and length):
        raise null("execution or extensionName is NULL, or data is NULL with a length")
    ex = _exec(h)
    if not ex.compilation.single_device:
        raise _one_device_only("ANeuralNetworksExecution_addExtensionAttribute")
    if ex.state != PREPARATION:
        raise bad_state("the execution has already started")
    raise _unknown_extension(name)


# ------------------------------------------------------------------------ diagnostics
_lock = threading.Lock()
_sessions = itertools.count(1)


def _diagnostics(on):
    global ACTIVE
    ACTIVE = bool(on)


def data_class(model, indexes):
    """Android's evalDataClass folded over the model's inputs (or outputs)."""
    result = UNKNOWN
    for i in indexes:
        cls = _CLASS_OF.get(model.types[i], OTHER)
        if cls == OTHER:
            result = OTHER if result == UNKNOWN else result
        elif result in (UNKNOWN, OTHER):
            result = cls
        elif cls != result:
            result = MIXED
    return result


def _models(model):
    """The model and every model it references (IF / WHILE branches and bodies), once each."""
    seen, todo = [], [model]
    while todo:
        m = todo.pop()
        if any(m is s for s in seen):
            continue
        seen.append(m)
        todo += [m.values[i] for i, life in enumerate(m.life) if life == SUBGRAPH and i in m.values]
    return seen


def arch_hash(model):
    """32 bytes: SHA-256 of the model's structure (operand types, shapes, quantization,
    lifetimes, operations, inputs and outputs, referenced models), not of its weights."""
    import hashlib      # here, not at start-up: it loads OpenSSL (cold start, valgrind noise)
    h = hashlib.sha256()
    for m in _models(model):
        h.update(repr((m.relaxed, m.types, m.dims, m.scales, m.zps, m.life,
                       [(op.code, op.ins, op.outs) for op in m.operations], m.inputs, m.outputs)).encode())
    return h.digest()


def device_ids(c):
    """Android's form: "name=version" of the compilation's devices, sorted, comma-separated."""
    devs = c.devices if c.devices is not None else devices_mod.CONFIG.devices
    return ",".join(sorted(f"{d.name}={d.version}" for d in devs))


def _dynamic(model):
    for m in _models(model):
        for i, life in enumerate(m.life):
            if life == TEMP and m.types[i] in C.TENSOR_TYPES and (m.dims[i] is None or 0 in m.dims[i]):
                return True
    return False


def _facts(c):
    """What does not change for a compilation: (session id, hash, device ids as a C string,
    input class, output class, control flow, dynamic tensors); made once, on first report."""
    f = c.__dict__.get("_sl_facts")
    if f is None:
        with _lock:
            f = c.__dict__.get("_sl_facts")
            if f is None:
                m = c.model
                f = (next(_sessions), arch_hash(m), ffi.new("char[]", device_ids(c).encode()),
                     data_class(m, m.inputs), data_class(m, m.outputs),
                     any(op.code in _CONTROL_FLOW for mm in _models(m) for op in mm.operations), _dynamic(m))
                c._sl_facts = f
    return f


def _info(c):
    session, digest, ids, in_class, out_class, control_flow, dynamic = _facts(c)
    info = ffi.new("nnpy_diag *")
    info.session = session
    info.version = C.FEATURE_LEVEL_CODE[devices_mod.CONFIG.level]
    ffi.memmove(info.hash, digest, 32)
    info.devices = ids
    info.in_class, info.out_class = in_class, out_class
    info.caching = c.cache_dir is not None or getattr(c, "cache_fds", None) is not None
    info.control_flow, info.dynamic = control_flow, dynamic
    return info, ids


def _report_compilation(c, code, ns):
    info, keep = _info(c)
    info.error = code
    info.compile_ns = ns
    lib.nnpy_diag_fire(0, info)


def finish(c):
    """Compilation_finish while diagnostics are on: timed and reported, success or failure."""
    t0 = time.perf_counter_ns()
    code = C.OP_FAILED
    try:
        c.finish()
        code = C.NO_ERROR
    except NNError as e:
        code = e.code
        raise
    except MemoryError:
        code = C.OUT_OF_MEMORY
        raise
    finally:
        try:
            _report_compilation(c, code, max(time.perf_counter_ns() - t0, 1))
        except Exception:
            pass
    return 0


def _report_execution(ex, mode, status, t0):
    info, keep = _info(ex.compilation)
    info.mode = mode
    info.error = status
    # as Android: the runtime's time from the call to the end of the computation (not for
    # startComputeWithDependencies: waiting may end much later); driver and hardware times
    # only with setMeasureTiming, from what Execution_getDuration reports
    info.runtime_ns = UINT64_MAX if mode == ASYNC_WITH_DEPS else max(time.perf_counter_ns() - t0, 1)
    d = ex.durations if ex.measure and status == C.NO_ERROR else None
    info.driver_ns = d[1] if d else UINT64_MAX
    info.hardware_ns = d[0] if d else UINT64_MAX
    lib.nnpy_diag_fire(1, info)


def watch(ex, mode):
    """Report the computation of `ex` the caller starts next (in `mode`) when it has run."""
    if ex.state == COMPUTATION:
        return              # a computation is in flight: the call will be refused
    t0 = time.perf_counter_ns()

    def run(deps=(), fenced=False):
        ex.__dict__.pop("run", None)
        status = Execution.run(ex, deps, fenced)
        if ACTIVE:
            try:
                _report_execution(ex, mode, status, t0)
            except Exception:
                pass
        return status
    ex.run = run


# ---------------------------------------------------------------------------- install
def install(the_ffi, the_lib, comp, device, model, execution, onerror_for):
    """Attach the table's Python functions (called by _capi.install with its handle getters)."""
    global ffi, lib, _comp, _device, _model, _exec
    ffi, lib = the_ffi, the_lib
    _comp, _device, _model, _exec = comp, device, model, execution
    for cname, fn in (("SL_ANeuralNetworksCompilation_setCachingFromFds", setCachingFromFds),
                      ("SL_ANeuralNetworksDevice_getNumberOfCacheFilesNeeded", getNumberOfCacheFilesNeeded),
                      ("SL_ANeuralNetworksDevice_getPerformanceInfo", getPerformanceInfo),
                      ("SL_ANeuralNetworksDevice_getVendorExtensionCount", getVendorExtensionCount),
                      ("SL_ANeuralNetworksDevice_getVendorExtensionName", getVendorExtensionName),
                      ("ANeuralNetworksDevice_getExtensionSupport", Device_getExtensionSupport),
                      ("ANeuralNetworksModel_getExtensionOperandType", Model_getExtensionOperandType),
                      ("ANeuralNetworksModel_getExtensionOperationType", Model_getExtensionOperationType),
                      ("ANeuralNetworksModel_setOperandExtensionData", Model_setOperandExtensionData),
                      ("ANeuralNetworksCompilation_addExtensionAttribute", Compilation_addExtensionAttribute),
                      ("ANeuralNetworksExecution_addExtensionAttribute", Execution_addExtensionAttribute)):
        ffi.def_extern(name="_nnpy_" + cname, error=C.OP_FAILED, onerror=onerror_for(cname))(fn)
    for ext, cname, fn in (
            ("_nnpy_sl_operand_performance", "SL_ANeuralNetworksDevice_forEachOperandPerformanceInfo",
             _operand_performance),
            ("_nnpy_sl_extension_operand_types", "SL_ANeuralNetworksDevice_forEachVendorExtensionOperandTypeInformation",
             _extension_operand_types)):
        ffi.def_extern(name=ext, error=C.OP_FAILED, onerror=onerror_for(cname))(fn)
    ffi.def_extern(name="_nnpy_sl_diagnostics", onerror=lambda *a: None)(_diagnostics)
