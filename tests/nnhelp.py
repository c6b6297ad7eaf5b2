"""Test helper: drive the built libneuralnetworks.so through its C ABI (cffi ABI mode).

    from nnhelp import lib, ffi, T, run_op, last_error
    code, outs = run_op("ADD", [T.f32([2], [1, 2]), T.f32([2], [3, 4]), T.i32(0)], [T.f32([2])])

Operands: ``Opd(type, dims, data=None, scale=0, zp=0, const=False, channel=None)``; inputs
with ``const=True`` (all scalars by default) become constants, the others model inputs.

* ``run_op`` -- one operation (zero-sized inputs are made inside the graph; ``runs=`` executes
  one compilation several times); ``run_graph`` -- several operations; ``add_op_code`` --
  only up to addOperation; ``build_model``/``build_graph`` -- a finished model to drive by hand.
* ``expect_ok``/``expect_fail`` check a ``(code, result or message)`` pair; ``op_ok``/``op_fails``
  run one operation and check it.
"""
import os
import sys
import threading

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB_PATH = os.environ.get("NNAPI_PY_LIB", os.path.join(ROOT, "build", "lib", "libneuralnetworks.so"))

if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from nnapi_py.cdef import declared_ffi, resolve_all  # noqa: E402

ffi, _ = declared_ffi()
# every name resolved now: cffi's lazy first lookup takes a non-reentrant lock, which a
# finalizer calling the library during that lookup would wait on forever (cdef.resolve_all)
lib = resolve_all(ffi.dlopen(LIB_PATH)) if os.path.exists(LIB_PATH) else None

TYPES = {"FLOAT32": 0, "INT32": 1, "UINT32": 2, "TENSOR_FLOAT32": 3, "TENSOR_INT32": 4,
         "TENSOR_QUANT8_ASYMM": 5, "BOOL": 6, "TENSOR_QUANT16_SYMM": 7, "TENSOR_FLOAT16": 8,
         "TENSOR_BOOL8": 9, "FLOAT16": 10, "TENSOR_QUANT8_SYMM_PER_CHANNEL": 11,
         "TENSOR_QUANT16_ASYMM": 12, "TENSOR_QUANT8_SYMM": 13, "TENSOR_QUANT8_ASYMM_SIGNED": 14,
         "MODEL": 15}
DTYPES = {0: np.float32, 1: np.int32, 2: np.uint32, 3: np.float32, 4: np.int32, 5: np.uint8,
          6: np.uint8, 7: np.int16, 8: np.float16, 9: np.uint8, 10: np.float16, 11: np.int8,
          12: np.uint16, 13: np.int8, 14: np.int8}
SCALARS = {0, 1, 2, 6, 10, 15}
BAD_DATA, OP_FAILED = 4, 5

# pytestmark of a module that needs the built library
needs_library = pytest.mark.skipif(lib is None, reason="library not built (make lib)")


def op_code(name):
    from nnapi_py import constants as C   # noqa: E402  (pure constants, no runtime)
    return C.OPERATION_CODES[name]


def last_error():
    return ffi.string(lib.nnapi_py_last_error()).decode()


class Opd:
    def __init__(self, type, dims=(), data=None, scale=0.0, zp=0, const=None, channel=None):
        self.type = TYPES[type] if isinstance(type, str) else type
        self.dims = list(dims)
        self.data = data
        self.scale = scale
        self.zp = zp
        self.const = (self.type in SCALARS) if const is None else const
        self.channel = channel     # (channelDim, [scales])

    def array(self):
        if self.data is None:
            return None
        a = np.asarray(self.data, dtype=DTYPES[self.type])
        # only fully specified dims reshape: data for dims with 0 (unknown) keeps its own shape
        return a.reshape(self.dims) if self.dims and all(self.dims) and a.size == int(np.prod(self.dims)) else a


class T:
    """Shorthands: T.f32([2, 3], data), T.q8([4], data, scale, zp), T.i32(3) (scalar)."""
    @staticmethod
    def f32(dims, data=None, const=False): return Opd(3, dims, data, const=const)
    @staticmethod
    def f16(dims, data=None, const=False): return Opd(8, dims, data, const=const)
    @staticmethod
    def i32t(dims, data=None, const=False): return Opd(4, dims, data, const=const)
    @staticmethod
    def q8(dims, data=None, scale=1.0, zp=0, const=False): return Opd(5, dims, data, scale, zp, const)
    @staticmethod
    def q8s(dims, data=None, scale=1.0, zp=0, const=False): return Opd(14, dims, data, scale, zp, const)
    @staticmethod
    def bool8(dims, data=None, const=False): return Opd(9, dims, data, const=const)
    @staticmethod
    def i32(v): return Opd(1, (), v)
    @staticmethod
    def f32s(v): return Opd(0, (), v)
    @staticmethod
    def f16s(v): return Opd(10, (), v)
    @staticmethod
    def b(v): return Opd(6, (), v)


def _check(rc, what):
    if rc != 0:
        raise NNCallError(rc, f"{what} -> {rc}: {last_error()}")


class NNCallError(Exception):
    def __init__(self, code, msg):
        super().__init__(msg)
        self.code = code


def _add_operands(model, operands, constants, keep):
    for k, o in enumerate(operands):
        dims = ffi.new("uint32_t[]", o.dims) if o.dims else ffi.NULL
        keep.append(dims)
        t = ffi.new("ANeuralNetworksOperandType*", {"type": o.type, "dimensionCount": len(o.dims),
                                                    "dimensions": dims, "scale": o.scale, "zeroPoint": o.zp})
        _check(lib.ANeuralNetworksModel_addOperand(model, t), f"addOperand {k}")
        if o.channel is not None:
            sc = ffi.new("float[]", list(o.channel[1]))
            keep.append(sc)
            p = ffi.new("ANeuralNetworksSymmPerChannelQuantParams*",
                        {"channelDim": o.channel[0], "scaleCount": len(o.channel[1]), "scales": sc})
            _check(lib.ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(model, k, p), "perChannel")
    for k in constants:
        a = operands[k].array()
        if a is None:
            _check(lib.ANeuralNetworksModel_setOperandValue(model, k, ffi.NULL, 0), f"omit {k}")
        else:
            a = np.ascontiguousarray(a)
            keep.append(a)
            _check(lib.ANeuralNetworksModel_setOperandValue(model, k, ffi.from_buffer(a), a.nbytes),
                   f"setOperandValue {k}")


def new_model(operands=()):
    """A new model, not finished, with the Opd operands added (no values set); returns (model,
    keepalive).  The caller frees the model.  Raises NNCallError."""
    mp = ffi.new("ANeuralNetworksModel**")
    _check(lib.ANeuralNetworksModel_create(mp), "Model_create")
    keep = []
    try:
        _add_operands(mp[0], list(operands), [], keep)
    except BaseException:
        lib.ANeuralNetworksModel_free(mp[0])
        raise
    return mp[0], keep


def graph_io(operands, operations, inputs=None, outputs=None):
    """Default model inputs (non-constant operands no operation writes) and outputs (written
    operands no operation reads), in operand order."""
    written = {o for _, _, outs in operations for o in outs}
    read = {i for _, ins, _ in operations for i in ins}
    if inputs is None:
        inputs = [k for k, o in enumerate(operands) if not o.const and k not in written]
    if outputs is None:
        outputs = [k for k in sorted(written) if k not in read]
    return list(inputs), list(outputs)


def build_graph(operands, operations, inputs=None, outputs=None, relaxed=False):
    """Build and finish a model of several operations; returns (model, keepalive, inputs, outputs).

    operands: Opd list -- constants (const=True, neither a model input nor written by an
    operation) get their data as value (data None: omitted); operations: [(name or code,
    [in idx], [out idx])]; inputs/outputs: operand indices (default: see graph_io).
    Raises NNCallError."""
    inputs, outputs = graph_io(operands, operations, inputs, outputs)
    keep = []
    mp = ffi.new("ANeuralNetworksModel**")
    _check(lib.ANeuralNetworksModel_create(mp), "Model_create")
    model = mp[0]
    try:
        written = {o for _, _, outs in operations for o in outs}
        constants = [k for k, o in enumerate(operands) if o.const and k not in inputs and k not in written]
        _add_operands(model, operands, constants, keep)
        for name, ins, outs in operations:
            code = op_code(name) if isinstance(name, str) else name
            _check(lib.ANeuralNetworksModel_addOperation(model, code, len(ins), ffi.new("uint32_t[]", list(ins)),
                                                         len(outs), ffi.new("uint32_t[]", list(outs))),
                   "addOperation")
        _check(lib.ANeuralNetworksModel_identifyInputsAndOutputs(
            model, len(inputs), ffi.new("uint32_t[]", inputs), len(outputs), ffi.new("uint32_t[]", outputs)),
            "identifyInputsAndOutputs")
        if relaxed:
            _check(lib.ANeuralNetworksModel_relaxComputationFloat32toFloat16(model, True), "relax")
        _check(lib.ANeuralNetworksModel_finish(model), "Model_finish")
    except BaseException:
        lib.ANeuralNetworksModel_free(model)
        raise
    return model, keep, inputs, outputs


def _op_operations(op, inputs, outputs):
    n = len(inputs)
    return [(op, list(range(n)), list(range(n, n + len(outputs))))]


def build_model(op, inputs, outputs, relaxed=False):
    """Build and finish a one-operation model; returns (model, keepalive, model input indices).
    Raises NNCallError."""
    model, keep, model_ins, _ = build_graph(list(inputs) + list(outputs), _op_operations(op, inputs, outputs),
                                            [k for k, o in enumerate(inputs) if not o.const],
                                            None, relaxed)
    return model, keep, model_ins


def _execute(comp, operands, inputs, outputs, feeds, out_elems, keep):
    """One execution of a finished compilation; returns the outputs. Raises NNCallError."""
    ex = ffi.new("ANeuralNetworksExecution**")
    _check(lib.ANeuralNetworksExecution_create(comp, ex), "Execution_create")
    try:
        for pos, (k, a) in enumerate(zip(inputs, feeds)):
            o = operands[k]
            if a is None:
                _check(lib.ANeuralNetworksExecution_setInput(ex[0], pos, ffi.NULL, ffi.NULL, 0), f"setInput {pos}")
                continue
            a = np.ascontiguousarray(a, dtype=DTYPES[o.type])
            keep.append(a)
            t = ffi.NULL
            if o.type not in SCALARS and (not o.dims or 0 in o.dims):
                dims = ffi.new("uint32_t[]", list(a.shape))
                keep.append(dims)
                t = ffi.new("ANeuralNetworksOperandType*", {"type": o.type, "dimensionCount": a.ndim,
                                                            "dimensions": dims, "scale": o.scale,
                                                            "zeroPoint": o.zp})
            _check(lib.ANeuralNetworksExecution_setInput(ex[0], pos, t, ffi.from_buffer(a), a.nbytes),
                   f"setInput {pos}")
        bufs = []
        for pos, k in enumerate(outputs):
            o = operands[k]
            if o.type in SCALARS:
                n = 1
            elif o.dims and all(o.dims):
                n = int(np.prod(o.dims))
            else:
                n = out_elems[pos] if isinstance(out_elems, (list, tuple)) else out_elems or 1 << 16
            b = np.zeros(max(n, 1), DTYPES[o.type])
            bufs.append(b)
            _check(lib.ANeuralNetworksExecution_setOutput(ex[0], pos, ffi.NULL, ffi.from_buffer(b) if n else ffi.NULL,
                                                          n * b.itemsize), f"setOutput {pos}")
        _check(lib.ANeuralNetworksExecution_compute(ex[0]), "compute")
        results = []
        for pos, k in enumerate(outputs):
            if operands[k].type in SCALARS:
                results.append(bufs[pos][0])
                continue
            r = ffi.new("uint32_t*")
            _check(lib.ANeuralNetworksExecution_getOutputOperandRank(ex[0], pos, r), "getOutputOperandRank")
            d = ffi.new("uint32_t[]", max(r[0], 1))
            _check(lib.ANeuralNetworksExecution_getOutputOperandDimensions(ex[0], pos, d),
                   "getOutputOperandDimensions")
            shape = [d[i] for i in range(r[0])]
            results.append(bufs[pos][:int(np.prod(shape))].reshape(shape))
        return results
    finally:
        lib.ANeuralNetworksExecution_free(ex[0])


def run_graph(operands, operations, inputs=None, outputs=None, feeds=None, runs=None, relaxed=False,
              out_elems=None):
    """Build, compile and compute a model of several operations (see build_graph).

    feeds: arrays for the model inputs (default: the input operands' data; None = omitted).
    Output buffers: exactly the operand size when its dims are fully specified, otherwise
    out_elems elements (an int, or one per output; default 1<<16; 0 = a NULL buffer).
    Returns (0, [outputs shaped as the execution reports]) or (code, message) from the first
    failing call.  With runs (a list of feeds lists) the model is compiled once and executed
    once per feeds list: (0, [(code, outputs or message) per run]), or (code, message) when
    the model or the compilation fails.
    """
    try:
        model, keep, inputs, outputs = build_graph(operands, operations, inputs, outputs, relaxed)
    except NNCallError as e:
        return e.code, str(e)
    comp = ffi.new("ANeuralNetworksCompilation**")
    try:
        _check(lib.ANeuralNetworksCompilation_create(model, comp), "Compilation_create")
        _check(lib.ANeuralNetworksCompilation_finish(comp[0]), "Compilation_finish")
        results = []
        for feed in ([feeds] if runs is None else runs):
            if feed is None:
                feed = [operands[k].array() for k in inputs]
            try:
                results.append((0, _execute(comp[0], operands, inputs, outputs, feed, out_elems, keep)))
            except NNCallError as e:
                results.append((e.code, str(e)))
        return results[0] if runs is None else (0, results)
    except NNCallError as e:
        return e.code, str(e)
    finally:
        lib.ANeuralNetworksCompilation_free(comp[0])
        lib.ANeuralNetworksModel_free(model)


def zero_batch(o):
    """o with its first dimension cut to 0 (data: an empty array): run_op makes it in the graph."""
    dims = [0] + list(o.dims[1:])
    return Opd(o.type, dims, np.zeros(dims, DTYPES[o.type]), o.scale, o.zp, False, o.channel)


def run_op(op, inputs, outputs, relaxed=False, out_dims=None, runs=None):
    """Build, compile and compute one operation.

    Returns (0, [output arrays]) on success or (code, message) on the first failing call.
    Output arrays have the shape reported by the execution (dynamic shapes work when an
    output's dims contain 0: pass out_dims=[elements...] to size its buffer, default 1<<16).
    Non-constant inputs are model inputs (data None: omitted).  A zero-sized one (data with
    0 elements, see zero_batch) cannot be a model input in NNAPI: it is made inside the graph,
    SLICEd from a model input of the same shape with 1 for each 0; the operand keeps its
    declared dims.  runs: as in run_graph, one feeds list per execution for the non-constant
    inputs in order.
    """
    operands = list(inputs) + list(outputs)
    operations = _op_operations(op, inputs, outputs)
    model_ins, sources = [], {}
    for k, o in enumerate(inputs):
        if o.const:
            continue
        a = o.array()
        if a is not None and a.size == 0:
            if o.type not in (3, 4, 5, 8, 14):
                raise ValueError(f"input {k}: SLICE cannot make a zero-sized tensor of type {o.type}")
            src = np.zeros([d or 1 for d in a.shape], DTYPES[o.type])
            sources[len(model_ins)] = src
            s = len(operands)
            operands += [Opd(o.type, src.shape, src, o.scale, o.zp, False),
                         Opd(4, [a.ndim], [0] * a.ndim, const=True), Opd(4, [a.ndim], list(a.shape), const=True)]
            operations.insert(0, ("SLICE", [s, s + 1, s + 2], [k]))
            k = s
        model_ins.append(k)
    if runs is not None and sources:
        runs = [[sources.get(pos, a) for pos, a in enumerate(feed)] for feed in runs]
    return run_graph(operands, operations, model_ins, None, None, runs, relaxed, out_dims)


def add_op_code(op, inputs, outputs):
    """Only build the model up to addOperation; returns (code, message)."""
    try:
        model, keep, _ = build_model(op, inputs, outputs)
    except NNCallError as e:
        return e.code, str(e)
    lib.ANeuralNetworksModel_free(model)
    return 0, ""


AT_EXECUTION = "checked at execution, as Android does"


def expect_ok(code_res):
    """(0, result) -> result; anything else fails the test with the message."""
    code, res = code_res
    assert code == 0, res
    return res


def expect_fail(code_res, code, *words):
    """(code, message) with every word in the message; returns the message.

    BAD_DATA (4) also matches a rule Android 14 checks only at execution: OP_FAILED at
    compute, "checked at execution, as Android does" (the default mode), with the same words.
    Under NNAPI_PY_STRICT=1 such rules fail early with BAD_DATA, which is what the tests
    marked strict_mode assert (and the whole suite run with NNAPI_PY_STRICT=1);
    fails_at_execution / op_fails_at_execution assert both points explicitly."""
    got, msg = code_res
    if code == 4 and got == 5 and AT_EXECUTION in msg and msg.startswith("compute ->"):
        got = 4
    assert got == code, f"expected {code}, got {got}: {msg}"
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


def fails_at_execution(run, *words, strict_stage=None):
    """A rule Android 14 checks only when its driver prepares the operation: run() (a call
    like run_op or run_graph, returning (code, message)) fails at compute with OP_FAILED,
    the reason naming every word and saying so; under NNAPI_PY_STRICT=1 it fails at an
    earlier call (strict_stage, e.g. "addOperation", when given) with BAD_DATA and the same
    words.  Both modes are run whatever the environment; returns the two messages."""
    old = os.environ.get("NNAPI_PY_STRICT")
    try:
        os.environ["NNAPI_PY_STRICT"] = "0"
        msg = expect_fail(run(), 5, "compute ->", AT_EXECUTION, *words)
        os.environ["NNAPI_PY_STRICT"] = "1"
        strict_msg = expect_fail(run(), 4, *words)
        assert "compute ->" not in strict_msg, strict_msg
        if strict_stage:
            assert strict_msg.startswith(strict_stage), strict_msg
    finally:
        if old is None:
            os.environ.pop("NNAPI_PY_STRICT", None)
        else:
            os.environ["NNAPI_PY_STRICT"] = old
    return msg, strict_msg


def op_fails_at_execution(op, inputs, outputs, *words, strict_stage=None):
    """fails_at_execution for one operation (run_op)."""
    return fails_at_execution(lambda: run_op(op, inputs, outputs), *words, strict_stage=strict_stage)


def op_ok(op, inputs, outputs, **kw):
    """run_op that must succeed: returns its outputs."""
    return expect_ok(run_op(op, inputs, outputs, **kw))


def op_fails(op, inputs, outputs, *words, code=4):
    """run_op that must fail with code (default BAD_DATA) and every word in the message.

    A BAD_DATA rule that Android 14 checks only at execution (the result is OP_FAILED at
    compute, "checked at execution, as Android does") is checked in both modes instead:
    that by default, and BAD_DATA before compute under NNAPI_PY_STRICT=1 (fails_at_execution)."""
    got = run_op(op, inputs, outputs)
    if code == 4 and got[0] == 5 and AT_EXECUTION in got[1]:
        return fails_at_execution(lambda: run_op(op, inputs, outputs), *words)[0]
    return expect_fail(got, code, *words)


def with_input(inputs, k, operand):
    """A copy of the operand list `inputs` with entry k replaced by `operand`."""
    out = list(inputs)
    out[k] = operand
    return out


def in_threads(work, n=4):
    """work(k) for k in range(n), in n threads at once; returns when every one has finished."""
    threads = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
