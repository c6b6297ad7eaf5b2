"""The C ABI layer: argument decoding and the handle table.

build_ffi.py generates, for each of the 69 NNAPI functions, an exported C function that
forwards to ``_nnpy_<name>``; ``install()`` attaches the Python function of the same name
(without the ANeuralNetworks prefix) defined here.  Conventions of the lowered arguments:
handles and raw buffers arrive as integers (uintptr_t), handle out-parameters as
``uintptr_t*``, an ANeuralNetworksOperandType* as (ptr, code, count, d0..d3, dims_ptr,
scale, zeroPoint).  Every NNError becomes its result code with the reason recorded for the
calling thread; any other exception becomes ANEURALNETWORKS_OP_FAILED.  Nothing here may
crash the process.
"""
import itertools
import struct
import sys
import threading

import numpy as np

from . import constants as C
from .errors import NNError, bad_data, null, set_last, last_error, TRACE_CALLS
from .model import Model
from .compilation import Compilation, Burst
from .execution import Execution
from .memory import Memory, DescMemory, MemoryDesc, copy as memory_copy
from .event import Event, FenceEvent
from .ops import registry
from .cffi_util import copy_bytes, use_ffi
from . import devices as devices_mod
from .devices import Device
from . import sl

ffi = None   # set by install(): the embedded module's FFI
_lib = None  # and its lib (C helpers of build_ffi.py)

# ---------------------------------------------------------------------------------- handles
_H = {}                       # handle value -> object
_seq = itertools.count(1)
_KIND_NAMES = {Model: "ANeuralNetworksModel", Compilation: "ANeuralNetworksCompilation",
               Execution: "ANeuralNetworksExecution", Memory: "ANeuralNetworksMemory",
               DescMemory: "ANeuralNetworksMemory", MemoryDesc: "ANeuralNetworksMemoryDesc",
               Burst: "ANeuralNetworksBurst", Event: "ANeuralNetworksEvent",
               FenceEvent: "ANeuralNetworksEvent"}


_KIND_NAMES[Device] = "ANeuralNetworksDevice"
_DEVICE_HANDLES = {}           # device name -> handle, stable for the life of the process


def _publish_devices(config):
    """Give every device of `config` its handle (a device keeps its handle across configure())."""
    for h in [h for h, o in _H.items() if o.__class__ is Device]:
        del _H[h]
    for d in config.devices:
        h = _DEVICE_HANDLES.setdefault(d.name, 0x6e6e0010 + (len(_DEVICE_HANDLES) << 4))
        _H[h] = d
        d.handle = h


_publish_devices(devices_mod.CONFIG)


def new_handle(obj):
    # distinct, never reused, 16-byte aligned, never a small integer
    h = 0x7a0000000000 + (next(_seq) << 4)
    _H[h] = obj
    return h


def _bad_handle(h, want):
    if h == 0:
        return null(f"{want} is NULL")
    o = _H.get(h)
    if o is None:
        return bad_data(f"{want} {h:#x} is not a live handle (freed, never created or not from this library)")
    return bad_data(f"{want} {h:#x} is an {_KIND_NAMES.get(type(o), type(o).__name__)}, not an {want}")


def _handle_getter(want, *classes):
    """h -> the live object behind handle h if it is one of `classes`, else the error naming
    what the argument should have been (`want`)."""
    def get(h):
        o = _H.get(h)
        if o.__class__ in classes:
            return o
        raise _bad_handle(h, want)
    return get


_model = _handle_getter("ANeuralNetworksModel", Model)
_comp = _handle_getter("ANeuralNetworksCompilation", Compilation)
_exec = _handle_getter("ANeuralNetworksExecution", Execution)
_memory = _handle_getter("ANeuralNetworksMemory", Memory, DescMemory)
_desc = _handle_getter("ANeuralNetworksMemoryDesc", MemoryDesc)
_burst = _handle_getter("ANeuralNetworksBurst", Burst)
_event = _handle_getter("ANeuralNetworksEvent", Event, FenceEvent)
_device = _handle_getter("ANeuralNetworksDevice", Device)


def _forward(get, method):
    """An entry point whose whole work is `method` of the object behind handle h, given the one
    argument the C call passes (its result code: 0, or the NNError it raises)."""
    def entry(h, arg):
        method(get(h), arg)
        return 0
    return entry


def _free(*classes):
    """An entry point freeing a handle of one of `classes` (any other value: nothing, as Android
    ignores it)."""
    def free(h):
        if _H.get(h).__class__ in classes:
            del _H[h]
    return free


def _out(p, what):
    if not p:
        raise null(f"{what} is NULL")


def _create(out, what, factory):
    _out(out, what)
    out[0] = 0
    obj = factory()
    out[0] = new_handle(obj)
    return 0


def _devices(devices, num):
    if not devices:
        raise null("devices is NULL")
    if num == 0:
        raise bad_data("numDevices is 0: at least one device is needed")
    if num > len(devices_mod.CONFIG.devices):      # read as one array: any length costs milliseconds
        if not np.frombuffer(ffi.buffer(ffi.cast("char *", devices), num * ffi.sizeof("void *")), np.uintp).all():
            raise null("the device list contains NULL")
        raise bad_data(f"numDevices {num} is more than there are devices ({len(devices_mod.CONFIG.devices)}): "
                       f"the list repeats a device or holds something else")
    hs = [devices[i] for i in range(num)]
    if 0 in hs:
        raise null("the device list contains NULL")
    devs = [_device(h) for h in hs]
    if len(set(hs)) != len(hs):
        raise bad_data("the device list contains a device twice")
    return devs


def _dims(count, d0, d1, d2, d3, dims):
    """The dimensions of an unpacked ANeuralNetworksOperandType (the first four arrive as
    arguments, more are read through the pointer)."""
    if count == 0:
        if dims:
            raise bad_data("dimensionCount is 0 but dimensions is not NULL")
        return ()
    if not dims:
        raise bad_data(f"dimensionCount is {count} but dimensions is NULL")
    if count <= 4:
        return (d0, d1, d2, d3)[:count]
    _rank(count)
    return tuple(ffi.unpack(ffi.cast("uint32_t *", dims), count))


def _type_desc(ptr, code, count, d0, d1, d2, d3, dims):
    """Decode an unpacked ANeuralNetworksOperandType (None when the pointer was NULL)."""
    if not ptr:
        return None
    return code, _dims(count, d0, d1, d2, d3, dims)


def _u32_list(ptr, n, what):
    if not ptr:
        raise null(f"{what} is NULL")
    return ffi.unpack(ptr, n) if n else []


def _rank(count):
    if count > C.MAX_RANK:
        raise bad_data(f"dimensionCount {count} is more than this implementation supports ({C.MAX_RANK})")


# ------------------------------------------------------------------------------- Model
def Model_create(out):
    return _create(out, "model", Model)


def Model_free(h):
    o = _H.get(h)
    if o.__class__ is Model:
        if _lib is not None:
            _lib.nnpy_stop_batching(h)
        del _H[h]


_SCALARS = C.SCALAR_TYPES


# the C batch accepts every operand type code 0..15 (TYPE_LEVEL up to 4): below that emulated
# level, operands take the Python path, where addOperand rejects types the level lacks
_BATCH_LEVEL = max(C.TYPE_LEVEL[t] for t in range(16))
_REC = None   # numpy dtype of the C-side operand batch records (set by install)
_REC_STRUCT = struct.Struct("<iI4Ifi")   # the same record for struct (nnpy_opnd: 32 bytes)
_FEW_RECORDS = 32


def _flush_operands(h, records, count):
    """Operands batched on the C side (already past the stateless type checks)."""
    m = _H.get(h)
    if m.__class__ is not Model or m.finished:
        return
    raw = ffi.buffer(ffi.cast("char *", records), count * _REC.itemsize)
    if count <= _FEW_RECORDS:       # a model built op by op flushes one or two at a time:
        recs = [(r[0], r[1], r[2:6], r[6], r[7]) for r in _REC_STRUCT.iter_unpack(raw)]   # ~1 us
    else:                           # (numpy's field columns cost ~10 us, any count)
        a = np.frombuffer(raw, _REC).copy()
        recs = zip(a["type"].tolist(), a["count"].tolist(), a["d"].tolist(), a["scale"].tolist(), a["zp"].tolist())
    for code, n, d, scale, zp in recs:
        m.types.append(code)
        m.dims.append(tuple(d[:n]) if n else (() if code in _SCALARS else None))
        m.scales.append(scale)
        m.zps.append(zp)
        m.life.append(0)


def Model_addOperand(h, tp, code, count, d0, d1, d2, d3, dims, scale, zp):
    m = _model(h)
    if not tp:
        raise null("type is NULL")
    d = _dims(count, d0, d1, d2, d3, dims)
    m.add_operand(code, d if count or code in _SCALARS else None, scale, zp)     # no dimensions: unknown rank
    if _lib is not None and not m.finished and devices_mod.CONFIG.level >= _BATCH_LEVEL and not TRACE_CALLS:
        _lib.nnpy_batch_operands_for(h)       # the next operands of this model go through C
        # (not while tracing calls: then every addOperand reaches here and is shown)
    return 0


def Model_setOperandValue(h, index, buf, length):
    m = _model(h)
    if not buf:
        if length:
            raise null(f"buffer is NULL but length is {length}")
        m.set_value(index, None)
        return 0
    if length > 0xFFFFFFFF:
        raise bad_data(f"length {length} is too large")
    if 0 <= index < len(m.types) and length <= C.MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES:
        m.set_value(index, copy_bytes(buf, length))       # copied now (<= 128 bytes)
    else:
        m.set_value(index, (buf, length))                 # referenced: caller keeps it alive
    return 0


def Model_setOperandValueFromMemory(h, index, mem, offset, length):
    m = _model(h)
    if mem == 0:
        raise null("memory is NULL")
    m.set_value_from_memory(index, _memory(mem), offset, length)
    return 0


def Model_setOperandValueFromModel(h, index, value):
    m = _model(h)
    if value == 0:
        raise null("value model is NULL")
    m.set_value_from_model(index, _model(value))
    return 0


def Model_setOperandSymmPerChannelQuantParams(h, index, cq):
    m = _model(h)
    if not cq:
        raise null("channelQuant is NULL")
    n = cq.scaleCount
    if n and not cq.scales:
        raise bad_data("channelQuant->scales is NULL but scaleCount is not 0")
    scales = np.frombuffer(ffi.buffer(cq.scales, 4 * n), np.float32).copy() if n else np.zeros(0, np.float32)
    m.set_channel_quant(index, cq.channelDim, scales)
    return 0


def Model_addOperation(h, code, nin, ins, nout, outs):
    m = _model(h)
    if not ins:
        raise null("inputs is NULL")
    if not outs:
        raise null("outputs is NULL")
    m.check_operation_counts(code, nin, nout)
    m.add_operation(code, _u32_list(ins, nin, "inputs"), _u32_list(outs, nout, "outputs"))
    return 0


def Model_identifyInputsAndOutputs(h, nin, ins, nout, outs):
    m = _model(h)
    if not ins:
        raise null("inputs is NULL")
    if not outs:
        raise null("outputs is NULL")
    m.check_io_counts(nin, nout)
    m.identify(_u32_list(ins, nin, "inputs"), _u32_list(outs, nout, "outputs"))
    return 0


Model_relaxComputationFloat32toFloat16 = _forward(_model, Model.relax)


def Model_finish(h):
    m = _model(h)
    if _lib is not None:
        _lib.nnpy_stop_batching(h)
    m.finish()
    return 0


def Model_getSupportedOperationsForDevices(h, devices, num, supported):
    m = _model(h)
    devs = _devices(devices, num)
    _out(supported, "supportedOps")
    if not m.finished or m.invalid:
        raise NNError(C.BAD_STATE, "the model must be finished first")
    for k, op in enumerate(m.operations):
        supported[k] = any(d.why_not(op, m) is None for d in devs)
    return 0


# ------------------------------------------------------------------------- Compilation
def _clear(out):
    if out:
        out[0] = 0


def Compilation_create(h, out):
    _clear(out)
    m = _model(h)
    return _create(out, "compilation", lambda: Compilation(m))


def Compilation_createForDevices(h, devices, num, out):
    _clear(out)
    m = _model(h)
    devs = _devices(devices, num)
    _out(out, "compilation")
    return _create(out, "compilation", lambda: Compilation(m, devs))


Compilation_free = _free(Compilation)
Compilation_setPreference = _forward(_comp, Compilation.set_preference)
Compilation_setPriority = _forward(_comp, Compilation.set_priority)
Compilation_setTimeout = _forward(_comp, Compilation.set_timeout)


def Compilation_setCaching(h, cache_dir, token):
    c = _comp(h)
    if not cache_dir:
        raise null("cacheDir is NULL")
    if not token:
        raise null("token is NULL")
    c.set_caching(ffi.string(cache_dir).decode(errors="surrogateescape"),
                  ffi.buffer(token, C.BYTE_SIZE_OF_CACHE_TOKEN)[:])
    return 0


def Compilation_finish(h):
    c = _comp(h)
    if sl.ACTIVE:
        return sl.finish(c)
    c.finish()
    return 0


def _preferred(is_input, what):
    """getPreferredMemory{Alignment,Padding}For{Input,Output}."""
    def preferred(h, index, out):
        c = _comp(h)
        _out(out, what)
        out[0] = c.preferred(is_input, index, what)
        return 0
    return preferred


Compilation_getPreferredMemoryAlignmentForInput = _preferred(True, "alignment")
Compilation_getPreferredMemoryAlignmentForOutput = _preferred(False, "alignment")
Compilation_getPreferredMemoryPaddingForInput = _preferred(True, "padding")
Compilation_getPreferredMemoryPaddingForOutput = _preferred(False, "padding")


# --------------------------------------------------------------------------- Execution
def Execution_create(h, out):
    _clear(out)
    c = _comp(h)
    return _create(out, "execution", lambda: Execution(c))


def Execution_free(h):
    o = _H.get(h)
    if o.__class__ is Execution:
        if o.state == 1:
            set_last("ANeuralNetworksExecution_free", C.BAD_STATE,
                     "ignored: the execution is still computing (free it after it completes)")
            return
        del _H[h]


def _io_type(tp, code, count, d0, d1, d2, d3, dims, scale, zp):
    """The ANeuralNetworksOperandType given to a setInput/setOutput call as set_io takes it
    (None: NULL, the model's type)."""
    td = _type_desc(tp, code, count, d0, d1, d2, d3, dims) if tp else None
    return td and (td[0], td[1], scale, zp)


def _setters(is_input):
    """setInput / setOutput (typed, untyped: no operand type, C's slim callback) and their
    FromMemory variants, for one direction."""
    def typed(h, index, tp, code, count, d0, d1, d2, d3, dims, scale, zp, buf, length):
        _exec(h).set_io(is_input, index, _io_type(tp, code, count, d0, d1, d2, d3, dims, scale, zp), buf, length)
        return 0

    def untyped(h, index, buf, length):
        ex = _H.get(h)
        # fast path: plain buffer of exactly the compiled size (the general rules are in set_io)
        if ex.__class__ is Execution and ex.state == 0 and buf and not ex.padding:
            plan = ex.plan
            lst, sizes, dims = (ex.ins, plan.in_bytes, plan.in_dims) if is_input else \
                (ex.outs, plan.out_bytes, plan.out_dims)
            if 0 <= index < len(lst) and lst[index] is None and sizes[index] == length:
                lst[index] = (buf, length, dims[index], None, 0, False)
                ex.any_set = True
                return 0
        _exec(h).set_io(is_input, index, None, buf, length)
        return 0

    def from_memory(h, index, tp, code, count, d0, d1, d2, d3, dims, scale, zp, mem, offset, length):
        ex = _exec(h)
        if mem == 0:
            raise null("memory is NULL")
        m = _memory(mem)
        ex.set_io(is_input, index, _io_type(tp, code, count, d0, d1, d2, d3, dims, scale, zp), 1, length, m, offset)
        return 0

    def from_memory_untyped(h, index, mem, offset, length):
        return from_memory(h, index, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0, mem, offset, length)
    return typed, untyped, from_memory, from_memory_untyped


(Execution_setInput, Execution_setInput_untyped, Execution_setInputFromMemory,
 Execution_setInputFromMemory_untyped) = _setters(True)
(Execution_setOutput, Execution_setOutput_untyped, Execution_setOutputFromMemory,
 Execution_setOutputFromMemory_untyped) = _setters(False)


Execution_setMeasureTiming = _forward(_exec, Execution.set_measure)
Execution_setTimeout = _forward(_exec, Execution.set_timeout)
Execution_setLoopTimeout = _forward(_exec, Execution.set_loop_timeout)
Execution_enableInputAndOutputPadding = _forward(_exec, Execution.enable_padding)
Execution_setReusable = _forward(_exec, Execution.set_reusable)


def Execution_compute(h):
    ex = _exec(h)
    if sl.ACTIVE:
        sl.watch(ex, sl.SYNC)
    status = ex.compute()
    return _failed(status) if status else 0


def _failed(status):
    """A computation's failure as the entry point's result (its reason: this thread's last)."""
    raise NNError(status, last_error()[1])


def Execution_burstCompute(h, b):
    ex = _exec(h)
    if b == 0:
        raise null("burst is NULL")
    burst = _burst(b)
    if burst.compilation is not ex.compilation:
        raise bad_data("the burst and the execution come from different compilations")
    if not burst.lock.acquire(False):
        raise NNError(C.BAD_STATE, "another computation is in flight on this burst")
    if sl.ACTIVE:
        sl.watch(ex, sl.BURST)
    try:
        status = ex.compute()
    finally:
        burst.lock.release()
    return _failed(status) if status else 0


def Execution_startCompute(h, out):
    _clear(out)
    ex = _exec(h)

    def start():
        if sl.ACTIVE:
            sl.watch(ex, sl.ASYNC)
        return ex.start()
    return _create(out, "event", start)


def _dependencies(deps, ndeps):
    """The distinct events of a dependency list; a long list is read as one array (any length
    costs milliseconds: every entry must be one of the few live events)."""
    if ndeps <= 64:
        hs = [deps[i] for i in range(ndeps)]
        if 0 in hs:
            raise null("the dependency list contains NULL")
        return [_event(d) for d in hs]
    a = np.frombuffer(ffi.buffer(ffi.cast("char *", deps), ndeps * ffi.sizeof("void *")), np.uintp)
    if not a.all():
        raise null("the dependency list contains NULL")
    live = np.array(sorted(h for h, o in list(_H.items()) if o.__class__ in (Event, FenceEvent)), np.uintp)
    pos = np.minimum(np.searchsorted(live, a), max(len(live) - 1, 0))
    found = live[pos] == a if len(live) else np.zeros(len(a), bool)
    if not found.all():
        raise _bad_handle(int(a[np.argmin(found)]), "ANeuralNetworksEvent")
    return [_H[int(h)] for h in live[np.bincount(pos, minlength=len(live)) > 0]]


def Execution_startComputeWithDependencies(h, deps, ndeps, duration, out):
    _clear(out)
    ex = _exec(h)
    if ndeps and not deps:
        raise null("dependencies is NULL")
    _out(out, "event")
    out[0] = 0
    evs = _dependencies(deps, ndeps)
    if duration and not ex.compilation.single_device:
        raise bad_data("a non-zero duration needs a compilation created by createForDevices with exactly one device")
    m = ex.model
    for k, io in enumerate(ex.outs):
        dims = m.dims[m.outputs[k]] if io is None or io[2] is None else io[2]
        if m.types[m.outputs[k]] not in _SCALARS and (dims is None or not all(dims)):
            raise bad_data(f"output {k} is not fully specified: dynamic output shapes cannot be used "
                           f"with startComputeWithDependencies")
    for e in evs:
        if e.failed():
            raise bad_data("a dependency event has already failed")
    if duration:
        ex.timeout = ex.timeout or duration
    if sl.ACTIVE:
        sl.watch(ex, sl.ASYNC_WITH_DEPS)
    ev = ex.start(evs, with_fence=True)
    out[0] = new_handle(ev)
    return 0


def Execution_getOutputOperandRank(h, index, out):
    ex = _exec(h)
    _out(out, "rank")
    rank, status = ex.output_rank(index)
    out[0] = rank
    return _too_small(index, status, f"rank {rank}") if status else 0


def _too_small(index, status, reported):
    """getOutputOperandRank / Dimensions after a computation whose output buffer was too small:
    the shape is reported, and the result is that status (OUTPUT_INSUFFICIENT_SIZE)."""
    raise NNError(status, f"output {index}: the buffer given was too small ({reported} reported)")


def Execution_getOutputOperandDimensions(h, index, out):
    ex = _exec(h)
    _out(out, "dimensions")
    dims, status = ex.output_dims(index)
    for k, d in enumerate(dims):
        out[k] = d
    return _too_small(index, status, f"dimensions {list(dims)}") if status else 0


def Execution_getDuration(h, code, out):
    ex = _exec(h)
    _out(out, "duration")
    out[0] = 0xFFFFFFFFFFFFFFFF
    out[0] = ex.duration(code)
    return 0


# ------------------------------------------------------------------------------ Burst
def Burst_create(h, out):
    _clear(out)
    c = _comp(h)
    return _create(out, "burst", lambda: Burst(c))


Burst_free = _free(Burst)


# ------------------------------------------------------------------------------ Event
def Event_wait(h):
    ev = _event(h)
    status = ev.wait()
    if status:
        raise NNError(status, getattr(ev, "reason", "") or last_error()[1] or
                      f"the computation failed ({C.RESULT_NAMES.get(status)})")
    return 0


def Event_free(h):
    o = _H.get(h)
    if o.__class__ is Event or o.__class__ is FenceEvent:
        if o.__class__ is Event:
            o.wait()
        del _H[h]
        o.close()


def Event_createFromSyncFenceFd(fd, out):
    return _create(out, "event", lambda: FenceEvent(fd))


def Event_getSyncFenceFd(h, out):
    # As Android 14: *syncFenceFd is -1 before the event is looked at, so every failure
    # (NULL, freed or wrong-kind event, an event not backed by a fence) leaves it -1.
    _out(out, "sync_fence_fd")
    out[0] = -1
    out[0] = _event(h).get_fd()
    return 0


# ----------------------------------------------------------------------------- Memory
def Memory_createFromFd(size, protect, fd, offset, out):
    return _create(out, "memory", lambda: Memory(size, protect, fd, offset))


def Memory_createFromAHardwareBuffer(ahwb, out):
    _clear(out)
    if ahwb == 0:
        raise null("ahwb is NULL")
    _out(out, "memory")
    out[0] = 0
    raise bad_data("AHardwareBuffer does not exist on Linux: use ANeuralNetworksMemory_createFromFd")


def Memory_createFromDesc(h, out):
    _clear(out)
    d = _desc(h)
    return _create(out, "memory", lambda: DescMemory(d))


def Memory_copy(src, dst):
    s = _memory(src)
    d = _memory(dst)
    memory_copy(s, d)
    return 0


# only the handle goes: models, executions and computations in flight that use the memory hold
# it, and it is released with the last of them (docs/decisions.md)
Memory_free = _free(Memory, DescMemory)


def MemoryDesc_create(out):
    return _create(out, "desc", MemoryDesc)


MemoryDesc_free = _free(MemoryDesc)


def _add_role(is_input):
    def add_role(h, c, index, freq):
        d = _desc(h)
        d.add_role(_comp(c), index, freq, is_input)
        return 0
    return add_role


MemoryDesc_addInputRole, MemoryDesc_addOutputRole = _add_role(True), _add_role(False)


def MemoryDesc_setDimensions(h, rank, dims):
    d = _desc(h)
    if rank and not dims:
        raise null("dimensions is NULL")
    _rank(rank)
    d.set_dimensions(tuple(ffi.unpack(dims, rank)) if rank else ())
    return 0


def MemoryDesc_finish(h):
    _desc(h).finish()
    return 0


# ----------------------------------------------------------------------------- Devices
def _getDeviceCount(out):
    _out(out, "numDevices")
    out[0] = len(devices_mod.CONFIG.devices)
    return 0


def _getDevice(index, out):
    _out(out, "device")
    devs = devices_mod.CONFIG.devices
    if not 0 <= index < len(devs):
        out[0] = 0
        raise bad_data(f"device index {index} is out of range ({len(devs)} device{'s' if len(devs) > 1 else ''})")
    out[0] = devs[index].handle
    return 0


def _c_text(d, attr, text):
    buf = getattr(d, attr)
    if buf is None:
        buf = ffi.new("char[]", text.encode())     # lives as long as the device
        setattr(d, attr, buf)
    return buf


def _device_property(what, value):
    """Device_get<what>: value(device) into *out."""
    def get(h, out):
        d = _device(h)
        _out(out, what)
        out[0] = value(d)
        return 0
    return get


Device_getName = _device_property("name", lambda d: _c_text(d, "name_c", d.name))
Device_getVersion = _device_property("version", lambda d: _c_text(d, "version_c", d.version))
Device_getType = _device_property("type", lambda d: d.type)
Device_getFeatureLevel = _device_property("featureLevel", lambda d: C.FEATURE_LEVEL_CODE[d.level])


def Device_wait(h):
    d = _device(h)
    if d.dead:
        raise NNError(C.DEAD_OBJECT, f"device {d.name} is no longer available (injected fault)")
    return 0


def _getDefaultLoopTimeout():
    return C.DEFAULT_LOOP_TIMEOUT_NS


def _getMaximumLoopTimeout():
    return C.MAXIMUM_LOOP_TIMEOUT_NS


def _getRuntimeFeatureLevel():
    return C.FEATURE_LEVEL_CODE[devices_mod.CONFIG.level]


# ------------------------------------------------------------------------------ extras
_err_text = {}


def _last_error_text():
    code, reason = last_error()
    buf = ffi.new("char[]", reason.encode("utf-8", "replace"))
    _err_text[threading.get_ident()] = buf       # alive until this thread's next call here
    return buf


def _last_error_code():
    return last_error()[0]


# ----------------------------------------------------------------------------- install
_VOID = {"Model_free", "Compilation_free", "Execution_free", "Burst_free", "Event_free",
         "Memory_free", "MemoryDesc_free"}


def _onerror_for(cname, void=False):
    def onerror(exc_type, exc, tb):
        if isinstance(exc, NNError):
            set_last(cname, exc.code, exc.reason)
            return None if void else exc.code
        if isinstance(exc, MemoryError) or (isinstance(exc, ValueError) and "too big" in str(exc)):
            set_last(cname, C.OUT_OF_MEMORY, "out of memory: the request needs more memory than this "
                                             "process can allocate")
            return None if void else C.OUT_OF_MEMORY
        try:
            set_last(cname, C.OP_FAILED, f"internal error: {exc_type.__name__}: {exc}")
            if TRACE_CALLS:
                import traceback
                traceback.print_exception(exc_type, exc, tb)
        except BaseException:
            pass
        return None if void else C.OP_FAILED
    return onerror


def _arg_text(a):
    """An argument as C would show it: pointers in hex (NULL), numbers as numbers."""
    if isinstance(a, ffi.CData):
        if a == ffi.NULL:
            return "NULL"
        try:
            return hex(int(ffi.cast("uintptr_t", a)))
        except TypeError:
            return repr(a)
    if isinstance(a, bool):
        return "true" if a else "false"
    if isinstance(a, float):
        return f"{a:g}"
    if isinstance(a, int) and a >= 1 << 32:
        return hex(a)                 # a handle or an address
    return str(a)


def _operand_type_text(args):
    """addOperand's unpacked ANeuralNetworksOperandType, as the C struct it came from."""
    h, _p, code, count, d0, d1, d2, d3, dims, scale, zp = args
    d = [d0, d1, d2, d3][:count] if count <= 4 else \
        list(ffi.unpack(ffi.cast("uint32_t *", dims), count)) if dims != ffi.NULL else []
    return (f"{_arg_text(h)}, {{.type={C.TYPE_NAMES.get(code, code)}, .dimensionCount={count}, "
            f".dimensions={d}, .scale={scale:g}, .zeroPoint={zp}}}")


def _traced(cname, fn):
    def wrapper(*args):
        r = fn(*args)
        if cname == "ANeuralNetworksModel_addOperand" and len(args) == 11:
            sys.stderr.write(f"nnapi_py: {cname}({_operand_type_text(args)}) -> {C.RESULT_NAMES.get(r, r)}\n")
            return r
        res = C.RESULT_NAMES.get(r, r) if isinstance(r, int) else r
        sys.stderr.write(f"nnapi_py: {cname}({', '.join(_arg_text(a) for a in args)}) -> {res}\n")
        return r
    return wrapper


def _not_at_level(cname, level, void):
    """What a function introduced after the emulated feature level does: the real library would
    lack the symbol; the closest honest behaviour is OP_FAILED with the reason (void: nothing)."""
    def stub(*args):
        if not void:
            try:
                devices_mod.check_level(level, cname)
            except NNError as e:
                raise NNError(C.OP_FAILED, e.reason) from None
    return stub


def _attach_all(config):
    """Attach every exported function's Python side (gated by the emulated feature level)."""
    g = globals()
    for name, fn in list(g.items()):
        if not callable(fn) or name.startswith("__") or "_" not in name:
            continue
        if not (name[0].isupper() or name.startswith("_get")):
            continue
        cname = "ANeuralNetworks" + name
        ext = cname
        if name.endswith("_untyped"):
            cname = cname[:-len("_untyped")]
        void = name in _VOID
        getter = name.startswith("_get") and name != "_getDevice" and name != "_getDeviceCount"
        level = C.FUNCTION_LEVEL.get(cname[len("ANeuralNetworks"):], 1)
        if level > config.level and not getter:
            fn = _not_at_level(cname, level, void)
        if TRACE_CALLS:
            fn = _traced(cname, fn)
        if void:
            ffi.def_extern(name="_nnpy_" + ext, onerror=_onerror_for(cname, True))(fn)
        elif getter:
            # (getRuntimeFeatureLevel and the loop timeouts keep answering below their level:
            # the emulated level and the documented constants; see docs/decisions.md)
            ffi.def_extern(name="_nnpy_" + ext)(fn)
        else:
            ffi.def_extern(name="_nnpy_" + ext, error=C.OP_FAILED, onerror=_onerror_for(cname))(fn)


def _reconfigured(config):
    _publish_devices(config)
    if ffi is not None:
        _attach_all(config)


def install(the_ffi, lib, so_path):
    global ffi, _lib, _REC
    ffi = the_ffi
    use_ffi(the_ffi)
    _lib = lib
    devices_mod.set_library_level(lib.nnpy_library_level())     # a feature-level-N library
    _publish_devices(devices_mod.CONFIG)
    _REC = np.dtype([("type", "<i4"), ("count", "<u4"), ("d", "<u4", (4,)), ("scale", "<f4"), ("zp", "<i4")])
    ffi.def_extern(name="_nnpy_flush_operands", onerror=_onerror_for("ANeuralNetworksModel_addOperand", True))(
        _flush_operands)
    _attach_all(devices_mod.CONFIG)
    devices_mod.on_change(_reconfigured)
    ffi.def_extern(name="_nnpy_last_error_text")(_last_error_text)
    from . import event
    ffi.def_extern(name="_nnpy_shutdown", onerror=lambda *a: None)(event.shutdown)
    if lib.nnpy_owns_interpreter():
        from . import execution
        np.seterr(all="ignore")
        execution.QUIET_NUMPY = True
    else:
        import atexit
        atexit.register(event.shutdown)       # Python host: before interpreter finalization
    ffi.def_extern(name="_nnpy_last_error_code")(_last_error_code)
    sl.install(ffi, lib, _comp, _device, _model, _exec, _onerror_for)   # the Support Library table
