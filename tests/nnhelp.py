"""Test helper: drive the built libneuralnetworks.so through its C ABI (cffi ABI mode).

    from nnhelp import lib, ffi, T, run_op, last_error
    code, outs = run_op("ADD", [T.f32([2], [1, 2]), T.f32([2], [3, 4]), T.i32(0)], [T.f32([2])])

Operands: ``Opd(type, dims, data=None, scale=0, zp=0, const=False, channel=None)``; inputs
with ``const=True`` (all scalars by default) become constants, the others model inputs.
"""
import os
import re

import cffi
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB_PATH = os.environ.get("NNAPI_PY_LIB", os.path.join(ROOT, "build", "lib", "libneuralnetworks.so"))


def _cdef_from_header(path):
    with open(path) as f:
        src = f.read()
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    lines = [ln for ln in src.splitlines()
             if not ln.lstrip().startswith("#") and 'extern "C"' not in ln and ln.strip() != "}"]
    return "\n".join(lines)


ffi = cffi.FFI()
ffi.cdef(_cdef_from_header(os.path.join(ROOT, "include", "android", "NeuralNetworks.h")))
ffi.cdef("const char* nnapi_py_last_error(void); int nnapi_py_last_error_code(void);")
lib = ffi.dlopen(LIB_PATH) if os.path.exists(LIB_PATH) else None

TYPES = {"FLOAT32": 0, "INT32": 1, "UINT32": 2, "TENSOR_FLOAT32": 3, "TENSOR_INT32": 4,
         "TENSOR_QUANT8_ASYMM": 5, "BOOL": 6, "TENSOR_QUANT16_SYMM": 7, "TENSOR_FLOAT16": 8,
         "TENSOR_BOOL8": 9, "FLOAT16": 10, "TENSOR_QUANT8_SYMM_PER_CHANNEL": 11,
         "TENSOR_QUANT16_ASYMM": 12, "TENSOR_QUANT8_SYMM": 13, "TENSOR_QUANT8_ASYMM_SIGNED": 14,
         "MODEL": 15}
DTYPES = {0: np.float32, 1: np.int32, 2: np.uint32, 3: np.float32, 4: np.int32, 5: np.uint8,
          6: np.uint8, 7: np.int16, 8: np.float16, 9: np.uint8, 10: np.float16, 11: np.int8,
          12: np.uint16, 13: np.int8, 14: np.int8}
SCALARS = {0, 1, 2, 6, 10, 15}


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
        return a.reshape(self.dims) if self.dims and a.size == int(np.prod(self.dims)) else a


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


def build_model(op, inputs, outputs, relaxed=False):
    """Build and finish a one-operation model; returns (model, keepalive). Raises NNCallError."""
    keep = []
    mp = ffi.new("ANeuralNetworksModel**")
    _check(lib.ANeuralNetworksModel_create(mp), "Model_create")
    model = mp[0]
    ins, model_ins = [], []
    try:
        for k, o in enumerate(list(inputs) + list(outputs)):
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
        for k, o in enumerate(inputs):
            if o.const:
                a = o.array()
                if a is None:
                    _check(lib.ANeuralNetworksModel_setOperandValue(model, k, ffi.NULL, 0), f"omit {k}")
                else:
                    a = np.ascontiguousarray(a)
                    keep.append(a)
                    _check(lib.ANeuralNetworksModel_setOperandValue(model, k, ffi.from_buffer(a), a.nbytes),
                           f"setOperandValue {k}")
            else:
                model_ins.append(k)
            ins.append(k)
        outs = list(range(len(inputs), len(inputs) + len(outputs)))
        code = op_code(op) if isinstance(op, str) else op
        _check(lib.ANeuralNetworksModel_addOperation(model, code, len(ins), ffi.new("uint32_t[]", ins),
                                                     len(outs), ffi.new("uint32_t[]", outs)), "addOperation")
        _check(lib.ANeuralNetworksModel_identifyInputsAndOutputs(
            model, len(model_ins), ffi.new("uint32_t[]", model_ins), len(outs), ffi.new("uint32_t[]", outs)),
            "identifyInputsAndOutputs")
        if relaxed:
            _check(lib.ANeuralNetworksModel_relaxComputationFloat32toFloat16(model, True), "relax")
        _check(lib.ANeuralNetworksModel_finish(model), "Model_finish")
    except BaseException:
        lib.ANeuralNetworksModel_free(model)
        raise
    return model, keep, model_ins


def run_op(op, inputs, outputs, relaxed=False, out_dims=None):
    """Build, compile and compute one operation.

    Returns (0, [output arrays]) on success or (code, message) on the first failing call.
    Output arrays have the shape reported by the execution (dynamic shapes work when an
    output's dims contain 0: pass out_dims=[elements...] to size its buffer, default 1<<16).
    """
    try:
        model, keep, model_ins = build_model(op, inputs, outputs, relaxed)
    except NNCallError as e:
        return e.code, str(e)
    comp = ffi.new("ANeuralNetworksCompilation**")
    ex = ffi.new("ANeuralNetworksExecution**")
    try:
        _check(lib.ANeuralNetworksCompilation_create(model, comp), "Compilation_create")
        _check(lib.ANeuralNetworksCompilation_finish(comp[0]), "Compilation_finish")
        _check(lib.ANeuralNetworksExecution_create(comp[0], ex), "Execution_create")
        for pos, k in enumerate(model_ins):
            a = inputs[k].array()
            if a is None or a.size == 0:
                _check(lib.ANeuralNetworksExecution_setInput(ex[0], pos, ffi.NULL, ffi.NULL, 0), f"setInput {pos}")
                continue
            a = np.ascontiguousarray(a)
            keep.append(a)
            t = ffi.NULL
            if any(d == 0 for d in inputs[k].dims) or not inputs[k].dims and inputs[k].type not in SCALARS:
                dims = ffi.new("uint32_t[]", list(a.shape))
                keep.append(dims)
                t = ffi.new("ANeuralNetworksOperandType*", {"type": inputs[k].type, "dimensionCount": a.ndim,
                                                            "dimensions": dims, "scale": inputs[k].scale,
                                                            "zeroPoint": inputs[k].zp})
            _check(lib.ANeuralNetworksExecution_setInput(ex[0], pos, t, ffi.from_buffer(a), a.nbytes),
                   f"setInput {pos}")
        bufs = []
        for k, o in enumerate(outputs):
            dt = DTYPES[o.type]
            if o.dims and all(o.dims):
                n = int(np.prod(o.dims))
            elif o.type in SCALARS:
                n = 1
            else:
                n = (out_dims[k] if out_dims else 1 << 16)
            b = np.zeros(max(n, 1), dt)
            bufs.append(b)
            _check(lib.ANeuralNetworksExecution_setOutput(ex[0], k, ffi.NULL, ffi.from_buffer(b),
                                                          n * b.itemsize), f"setOutput {k}")
        _check(lib.ANeuralNetworksExecution_compute(ex[0]), "compute")
        results = []
        for k, o in enumerate(outputs):
            if o.type in SCALARS:
                results.append(bufs[k][0])
                continue
            r = ffi.new("uint32_t*")
            _check(lib.ANeuralNetworksExecution_getOutputOperandRank(ex[0], k, r), "getOutputOperandRank")
            d = ffi.new("uint32_t[]", max(r[0], 1))
            _check(lib.ANeuralNetworksExecution_getOutputOperandDimensions(ex[0], k, d), "getOutputOperandDimensions")
            shape = [d[i] for i in range(r[0])]
            results.append(bufs[k][:int(np.prod(shape))].reshape(shape))
        return 0, results
    except NNCallError as e:
        return e.code, str(e)
    finally:
        lib.ANeuralNetworksExecution_free(ex[0])
        lib.ANeuralNetworksCompilation_free(comp[0])
        lib.ANeuralNetworksModel_free(model)


def add_op_code(op, inputs, outputs):
    """Only build the model up to addOperation; returns (code, message)."""
    try:
        model, keep, _ = build_model(op, inputs, outputs)
    except NNCallError as e:
        return e.code, str(e)
    lib.ANeuralNetworksModel_free(model)
    return 0, ""
