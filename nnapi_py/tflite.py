"""Run .tflite models through NNAPI on Linux (first part of the importer: float CNN builtins).

    import nnapi_py.tflite as T
    m = T.load("face_detection_short_range.tflite")   # parse, map, Model_finish + Compilation_finish
    outs = m.run([x])                                  # numpy inputs in the model's order -> outputs
    print(m.report())                                  # per builtin: which NNAPI operation(s), or why not

The flatbuffer is read with the `tflite` package (the official schema's generated Python code,
packaged on PyPI: maintained with the schema, no hand-written parsing). Every NNAPI model is
built through the C library with the Python API (nnapi_py.nn), exactly as a client would.
Mapping follows what TFLite's NNAPI delegate does for these builtins: options become scalar
operands, fused activations become FuseCodes (or a separate activation where NNAPI has no
fused form), SAME/VALID padding becomes the implicit padding code, float16 weights behind
DEQUANTIZE are folded to float32 constants, and constant-only subgraphs are folded on load.

Mapped so far: ADD, MUL, SUB, CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, MAX_POOL_2D,
AVERAGE_POOL_2D, RELU, RELU6, LOGISTIC, TANH, PRELU, PAD, RESHAPE, CONCATENATION,
RESIZE_BILINEAR, DEPTH_TO_SPACE, SOFTMAX, DEQUANTIZE (constant float16). Anything else makes
`load` fail with one error listing every unmapped operator with its index and the reason.
"""
from __future__ import annotations

import os
import threading
from typing import Dict, List, Optional, Sequence

import numpy as np

from . import nn, require

__all__ = ["load", "LoadError", "TfliteModel"]


class LoadError(Exception):
    """The model cannot be mapped: `unmapped` lists (operator index, builtin, reason)."""

    def __init__(self, path, unmapped):
        self.unmapped = unmapped
        lines = "\n".join(f"  operator {k}: {name}: {why}" for k, name, why in unmapped)
        super().__init__(f"{os.path.basename(path)}: {len(unmapped)} operator(s) cannot run through NNAPI:\n{lines}")


_DTYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_, 9: np.int8, 7: np.int16}
_FUSE = {0: 0, 1: 1, 2: 2, 3: 3}          # NONE, RELU, RELU_N1_TO_1, RELU6
_PADDING = {0: 1, 1: 2}                    # TFLite SAME/VALID -> NNAPI PADDING_SAME/VALID


def _builtin_names():
    import tflite
    return {v: k for k, v in tflite.BuiltinOperator.__dict__.items() if not k.startswith("_")}


def _options(op, cls_name):
    import tflite
    table = op.BuiltinOptions()
    if table is None:
        return None
    opt = getattr(tflite, cls_name)()
    opt.Init(table.Bytes, table.Pos)
    return opt


class _Tensor:
    __slots__ = ("index", "name", "dtype", "shape", "scale", "zp", "value", "operand", "scales", "qdim")

    def __init__(self, index, name, dtype, shape, scale, zp, value, scales=None, qdim=0):
        self.index, self.name, self.dtype, self.shape = index, name, dtype, shape
        self.scale, self.zp, self.value, self.operand = scale, zp, value, None
        self.scales, self.qdim = scales, qdim        # per-channel quantization (int8 weights, int32 bias)


class TfliteModel:
    """A .tflite subgraph mapped to one compiled NNAPI model."""

    def __init__(self, path: str, compile_options: Optional[dict] = None):
        tflite = require("tflite", "tflite", "the .tflite importer (its flatbuffer parser)")
        self.path = path
        buf = open(path, "rb").read()
        self._m = tflite.Model.GetRootAsModel(buf, 0)
        self._g = self._m.Subgraphs(0)
        self._names = _builtin_names()
        self.mapping: List[tuple] = []          # (operator index, builtin, NNAPI operations or reason)
        self.tensors = [self._tensor(k) for k in range(self._g.TensorsLength())]
        options = dict(compile_options or {})        # allow_fp16: TFLite's option, the model relaxed
        self.nn_model = nn.Model(os.path.basename(path), relaxed=bool(options.pop("allow_fp16", False)))
        self._build()
        self.compilation = self.nn_model.compile(**options)
        self._pair = None                       # _StatePair of reusable executions (False: not available)
        self._exec_lock = threading.Lock()
        self.input_names = [self.tensors[i].name for i in self._inputs]
        self.reset()
        self.output_names = [self.tensors[i].name for i in self._outputs]

    # -- parsing
    def _tensor(self, k):
        t = self._g.Tensors(k)
        dtype = _DTYPES.get(t.Type())
        shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
        value = None
        b = self._m.Buffers(t.Buffer())
        if b is not None and b.DataLength() and dtype is not None:
            value = np.frombuffer(b.DataAsNumpy().tobytes(), dtype)
            if t.Sparsity() is None:          # a sparse tensor's buffer holds only its stored values
                value = value.reshape(shape)
        scale, zp, scales, qdim = 0.0, 0, None, 0
        q = t.Quantization()
        if q is not None and q.ScaleLength():
            scale, zp = float(q.Scale(0)), int(q.ZeroPoint(0)) if q.ZeroPointLength() else 0
            if q.ScaleLength() > 1:
                scales, qdim = [float(s) for s in q.ScaleAsNumpy()], int(q.QuantizedDimension())
        name = t.Name().decode(errors="replace") if t.Name() else f"t{k}"
        return _Tensor(k, name, dtype, shape, scale, zp, value, scales, qdim)

    def _code(self, op):
        code = self._m.OperatorCodes(op.OpcodeIndex())
        b = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        return self._names.get(b, str(b))

    # -- operands
    def _type(self, t: _Tensor) -> nn.OperandType:
        if t.dtype == np.float32:
            return nn.float32
        if t.dtype == np.float16:
            return nn.float16
        if t.dtype == np.int32:
            # a bias of a per-channel filter has scale 0 in NNAPI (its scales are input x filter)
            return nn.OperandType(nn.int32.code, 0.0 if t.scales else t.scale, 0)
        if t.dtype == np.bool_:
            return nn.bool8
        if t.dtype == np.uint8:
            return nn.quant8_asymm(t.scale, t.zp)
        if t.dtype == np.int8:
            if t.scales is not None or (t.value is not None and t.zp == 0 and self._is_weight(t)):
                return nn.quant8_symm_per_channel(t.scales or [t.scale] * t.shape[t.qdim], t.qdim)
            return nn.quant8_asymm_signed(t.scale, t.zp)
        raise _Unmapped(f"tensor {t.name!r} of type {t.dtype} has no NNAPI operand type here")

    def _is_weight(self, t):
        """A constant int8 tensor used as a convolution / fully-connected filter."""
        return t.index in self._filters

    def _operand(self, k):
        t = self.tensors[k]
        if t.operand is None:
            if t.value is None:
                raise _Unmapped(f"tensor {t.name!r} is used before any operator produces it")
            t.operand = self.nn_model.constant(np.ascontiguousarray(t.value), self._type(t), name=t.name)
        return t.operand

    def _out(self, k):
        t = self.tensors[k]
        return (self._type(t), t.shape)

    # -- mapping
    def _build(self):
        g = self._g
        self._inputs = [int(i) for i in g.InputsAsNumpy()]
        self._outputs = [int(i) for i in g.OutputsAsNumpy()]
        self._filters = set()
        self._handles = {}                  # resource tensor -> variable name
        self._state_in: Dict[str, int] = {}     # variable -> tensor read (a model input)
        self._state_out: Dict[str, int] = {}    # variable -> tensor assigned (a model output)
        self.initial_state = self._init_state()
        for k in range(g.OperatorsLength()):
            op = g.Operators(k)
            if self._code(op) in ("CONV_2D", "DEPTHWISE_CONV_2D") and op.InputsLength() > 1:
                self._filters.add(int(op.Inputs(1)))
        unmapped = []
        for i in self._inputs:
            t = self.tensors[i]
            try:
                t.operand = self.nn_model.input(t.name, self._type(t), t.shape)
            except _Unmapped as e:
                unmapped.append((-1, "model input", str(e)))
        for k in range(g.OperatorsLength()):
            op = g.Operators(k)
            name = self._code(op)
            ins = [int(i) for i in op.InputsAsNumpy()] if op.InputsLength() else []
            outs = [int(i) for i in op.OutputsAsNumpy()] if op.OutputsLength() else []
            if name == "CUSTOM":
                code = self._m.OperatorCodes(op.OpcodeIndex()).CustomCode()
                name = "CUSTOM_" + (code.decode(errors="replace") if code else "?")
            fn = getattr(self, "_map_" + name, None)
            if fn is None:
                unmapped.append((k, name, "no NNAPI mapping for this builtin yet"))
                self.mapping.append((k, name, "unmapped"))
                continue
            try:
                done = fn(op, ins, outs)
                self.mapping.append((k, name, done))
            except _Unmapped as e:
                unmapped.append((k, name, str(e)))
                self.mapping.append((k, name, f"unmapped: {e}"))
        if unmapped:
            raise LoadError(self.path, unmapped)
        for i in self._outputs:
            self.nn_model.output(self._operand(i), self.tensors[i].name)
        for var, k in self._state_out.items():
            self.nn_model.output(self._operand(k), "state:" + var)

    def _emit(self, nnapi_op, ins, out_k, fuse=0, extra=()):
        """One NNAPI operation producing tensor out_k; a fused activation NNAPI lacks is a
        separate operation."""
        o = self.nn_model.op(nnapi_op, *ins, *extra, outputs=[self._out(out_k)], names=[self.tensors[out_k].name])
        self.tensors[out_k].operand = o
        return nnapi_op

    def _fold(self, out_k, value):
        self.tensors[out_k].value = value
        return "folded at load"

    # each _map_<BUILTIN>(op, ins, outs) returns the NNAPI operation(s) it became
    def _map_DEQUANTIZE(self, op, ins, outs):
        src = self.tensors[ins[0]]
        if src.value is not None and src.dtype == np.float16:
            return self._fold(outs[0], src.value.astype(np.float32))
        if src.value is not None and src.dtype in (np.uint8, np.int8):
            return self._fold(outs[0], ((src.value.astype(np.float32) - src.zp) * src.scale).astype(np.float32))
        return self._emit("DEQUANTIZE", [self._operand(ins[0])], outs[0])

    def _binary(self, nnapi_op, cls, op, ins, outs):
        o = _options(op, cls)
        fuse = _FUSE.get(o.FusedActivationFunction() if o else 0)
        if fuse is None:
            raise _Unmapped("fused activation not supported by NNAPI")
        return self._emit(nnapi_op, [self._operand(ins[0]), self._operand(ins[1]), fuse], outs[0])

    def _map_ADD(self, op, ins, outs):
        return self._binary("ADD", "AddOptions", op, ins, outs)

    def _map_MUL(self, op, ins, outs):
        return self._binary("MUL", "MulOptions", op, ins, outs)

    def _map_SUB(self, op, ins, outs):
        return self._binary("SUB", "SubOptions", op, ins, outs)

    def _bias(self, ins, n_out, like):
        if len(ins) > 2 and ins[2] >= 0:
            return self._operand(ins[2])
        return self.nn_model.constant(np.zeros(n_out, np.float32), nn.float32)

    def _map_CONV_2D(self, op, ins, outs):
        o = _options(op, "Conv2DOptions")
        w = self.tensors[ins[1]]
        fuse = _FUSE.get(o.FusedActivationFunction())
        if fuse is None:
            raise _Unmapped("fused activation not supported by NNAPI")
        args = [self._operand(ins[0]), self._operand(ins[1]), self._bias(ins, w.shape[0], w),
                _PADDING[o.Padding()], o.StrideW(), o.StrideH(), fuse]
        if o.DilationWFactor() != 1 or o.DilationHFactor() != 1:
            args += [False, o.DilationWFactor(), o.DilationHFactor()]
        return self._emit("CONV_2D", args, outs[0])

    def _map_DEPTHWISE_CONV_2D(self, op, ins, outs):
        o = _options(op, "DepthwiseConv2DOptions")
        w = self.tensors[ins[1]]
        fuse = _FUSE.get(o.FusedActivationFunction())
        if fuse is None:
            raise _Unmapped("fused activation not supported by NNAPI")
        x = self.tensors[ins[0]]
        mult = max(1, w.shape[3] // max(1, x.shape[3])) if len(x.shape) == 4 else o.DepthMultiplier()
        args = [self._operand(ins[0]), self._operand(ins[1]), self._bias(ins, w.shape[3], w),
                _PADDING[o.Padding()], o.StrideW(), o.StrideH(), mult, fuse]
        if o.DilationWFactor() != 1 or o.DilationHFactor() != 1:
            args += [False, o.DilationWFactor(), o.DilationHFactor()]
        return self._emit("DEPTHWISE_CONV_2D", args, outs[0])

    def _map_FULLY_CONNECTED(self, op, ins, outs):
        o = _options(op, "FullyConnectedOptions")
        fuse = _FUSE.get(o.FusedActivationFunction() if o else 0)
        if fuse is None:
            raise _Unmapped("fused activation not supported by NNAPI")
        w = self.tensors[ins[1]]
        return self._emit("FULLY_CONNECTED", [self._operand(ins[0]), self._operand(ins[1]),
                                              self._bias(ins, w.shape[0], w), fuse], outs[0])

    def _pool(self, nnapi_op, op, ins, outs):
        o = _options(op, "Pool2DOptions")
        fuse = _FUSE.get(o.FusedActivationFunction())
        if fuse is None:
            raise _Unmapped("fused activation not supported by NNAPI")
        return self._emit(nnapi_op, [self._operand(ins[0]), _PADDING[o.Padding()], o.StrideW(), o.StrideH(),
                                     o.FilterWidth(), o.FilterHeight(), fuse], outs[0])

    def _map_MAX_POOL_2D(self, op, ins, outs):
        return self._pool("MAX_POOL_2D", op, ins, outs)

    def _map_AVERAGE_POOL_2D(self, op, ins, outs):
        return self._pool("AVERAGE_POOL_2D", op, ins, outs)

    def _unary(self, nnapi_op, ins, outs):
        return self._emit(nnapi_op, [self._operand(ins[0])], outs[0])

    def _map_RELU(self, op, ins, outs):
        return self._unary("RELU", ins, outs)

    def _map_RELU6(self, op, ins, outs):
        return self._unary("RELU6", ins, outs)

    def _map_LOGISTIC(self, op, ins, outs):
        return self._unary("LOGISTIC", ins, outs)

    def _map_TANH(self, op, ins, outs):
        return self._unary("TANH", ins, outs)

    def _map_PRELU(self, op, ins, outs):
        return self._emit("PRELU", [self._operand(ins[0]), self._operand(ins[1])], outs[0])

    def _map_PAD(self, op, ins, outs):
        pads = self.tensors[ins[1]]
        if pads.value is None:
            raise _Unmapped("paddings must be constant")
        return self._emit("PAD", [self._operand(ins[0]),
                                  self.nn_model.constant(pads.value.astype(np.int32), nn.int32)], outs[0])

    def _map_RESHAPE(self, op, ins, outs):
        shape = np.array(self.tensors[outs[0]].shape, np.int32)
        return self._emit("RESHAPE", [self._operand(ins[0]), self.nn_model.constant(shape, nn.int32)], outs[0])

    def _map_CONCATENATION(self, op, ins, outs):
        o = _options(op, "ConcatenationOptions")
        fuse = o.FusedActivationFunction()
        if fuse not in (0, 1, 3):
            raise _Unmapped("fused activation not supported by NNAPI")
        axis = o.Axis()
        args = [self._operand(i) for i in ins] + [int(axis)]
        if fuse == 0:
            return self._emit("CONCATENATION", args, outs[0])
        t = self.tensors[outs[0]]
        tmp = self.nn_model.op("CONCATENATION", *args, outputs=[self._out(outs[0])])
        act = "RELU" if fuse == 1 else "RELU6"
        t.operand = self.nn_model.op(act, tmp, outputs=[self._out(outs[0])], names=[t.name])
        return f"CONCATENATION + {act}"

    def _map_RESIZE_BILINEAR(self, op, ins, outs):
        o = _options(op, "ResizeBilinearOptions")
        size = self.tensors[ins[1]]
        if size.value is None:
            raise _Unmapped("the output size must be constant")
        h, w = (int(v) for v in size.value.reshape(-1)[:2])
        align = bool(o.AlignCorners()) if o else False
        half = bool(o.HalfPixelCenters()) if o else False
        args = [self._operand(ins[0]), w, h]
        if align or half:
            args += [False, align, half]
        return self._emit("RESIZE_BILINEAR", args, outs[0])

    def _map_DEPTH_TO_SPACE(self, op, ins, outs):
        o = _options(op, "DepthToSpaceOptions")
        return self._emit("DEPTH_TO_SPACE", [self._operand(ins[0]), o.BlockSize()], outs[0])

    def _map_SOFTMAX(self, op, ins, outs):
        o = _options(op, "SoftmaxOptions")
        return self._emit("SOFTMAX", [self._operand(ins[0]), float(o.Beta()) if o else 1.0], outs[0])

    def _const(self, k, what):
        v = self.tensors[k].value
        if v is None:
            raise _Unmapped(f"{what} must be constant")
        return v

    def _map_MEAN(self, op, ins, outs):
        o = _options(op, "ReducerOptions")
        axes = self._const(ins[1], "the axes").astype(np.int32).reshape(-1)
        keep = int(bool(o.KeepDims())) if o else 0
        return self._emit("MEAN", [self._operand(ins[0]), self.nn_model.constant(axes, nn.int32), keep], outs[0])

    def _map_STRIDED_SLICE(self, op, ins, outs):
        o = _options(op, "StridedSliceOptions")
        if o and (o.EllipsisMask() or o.NewAxisMask() or o.Offset()):
            raise _Unmapped("ellipsis / new-axis masks and offset have no NNAPI form")
        vec = [self.nn_model.constant(self._const(k, what).astype(np.int32).reshape(-1), nn.int32)
               for k, what in ((ins[1], "begin"), (ins[2], "end"), (ins[3], "strides"))]
        masks = [o.BeginMask(), o.EndMask(), o.ShrinkAxisMask()] if o else [0, 0, 0]
        return self._emit("STRIDED_SLICE", [self._operand(ins[0])] + vec + masks, outs[0])

    def _map_HARD_SWISH(self, op, ins, outs):
        return self._unary("HARD_SWISH", ins, outs)

    def _map_CUSTOM_Convolution2DTransposeBias(self, op, ins, outs):
        """MediaPipe's transposed convolution with bias: options are a TfLiteTransposeConvParams
        struct (padding, stride_width, stride_height) -> TRANSPOSE_CONV_2D, implicit padding."""
        raw = op.CustomOptionsAsNumpy().tobytes() if op.CustomOptionsLength() else b""
        if len(raw) < 12:
            raise _Unmapped("custom options (padding, strides) missing")
        padding, sw, sh = np.frombuffer(raw[:12], np.int32)
        w = self.tensors[ins[1]]
        out = self.tensors[outs[0]]
        shape = self.nn_model.constant(np.array(out.shape, np.int32), nn.int32)
        pad = {1: 1, 2: 2}.get(int(padding), 1)       # TfLitePadding: 1 SAME, 2 VALID
        return self._emit("TRANSPOSE_CONV_2D", [self._operand(ins[0]), self._operand(ins[1]),
                                                self._bias(ins, w.shape[0], w), shape, pad, int(sw), int(sh), 0,
                                                False], outs[0])

    # -- resource variables (streaming models): carried by run() as state inputs / outputs
    def _init_state(self):
        """Variables' initial values from the init subgraph(s) CALL_ONCE runs (constant assignments)."""
        import tflite
        state = {}
        for s in range(1, self._m.SubgraphsLength()):
            g = self._m.Subgraphs(s)
            handles = {}
            for k in range(g.OperatorsLength()):
                op = g.Operators(k)
                name = self._code(op)
                if name == "VAR_HANDLE":
                    o = _options(op, "VarHandleOptions")
                    handles[int(op.Outputs(0))] = (o.SharedName() or b"").decode()
                elif name == "ASSIGN_VARIABLE":
                    t = g.Tensors(int(op.Inputs(1)))
                    b = self._m.Buffers(t.Buffer())
                    dtype = _DTYPES.get(t.Type())
                    if b is not None and b.DataLength() and dtype is not None:
                        shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
                        state[handles.get(int(op.Inputs(0)), "?")] = np.frombuffer(
                            b.DataAsNumpy().tobytes(), dtype).reshape(shape).copy()
        del tflite
        return state

    def _map_CALL_ONCE(self, op, ins, outs):
        return "initial variable values, applied by run()"

    def _map_VAR_HANDLE(self, op, ins, outs):
        o = _options(op, "VarHandleOptions")
        self._handles[outs[0]] = (o.SharedName() or b"").decode() or f"var{outs[0]}"
        return "state variable " + self._handles[outs[0]]

    def _map_READ_VARIABLE(self, op, ins, outs):
        var = self._handles.get(ins[0])
        if var is None:
            raise _Unmapped("reads a resource no VAR_HANDLE produced")
        t = self.tensors[outs[0]]
        t.operand = self.nn_model.input("state:" + var, self._type(t), t.shape)
        self._state_in[var] = outs[0]
        if var not in self.initial_state:
            self.initial_state[var] = np.zeros(t.shape, t.dtype) + (t.zp if t.dtype in (np.int8, np.uint8) else 0)
        return "model input state:" + var

    def _map_ASSIGN_VARIABLE(self, op, ins, outs):
        var = self._handles.get(ins[0])
        if var is None:
            raise _Unmapped("assigns a resource no VAR_HANDLE produced")
        self._state_out[var] = ins[1]
        return "model output state:" + var

    def _map_SPLIT_V(self, op, ins, outs):
        sizes = [int(v) for v in self._const(ins[1], "size_splits").reshape(-1)]
        axis = int(self._const(ins[2], "axis").reshape(-1)[0])
        x = self.tensors[ins[0]]
        axis %= len(x.shape)
        if -1 in sizes:
            sizes[sizes.index(-1)] = x.shape[axis] - sum(s for s in sizes if s != -1)
        start = 0
        for o, n in zip(outs, sizes):           # the delegate's lowering: one SLICE per piece
            begin = [0] * len(x.shape)
            size = list(x.shape)
            begin[axis], size[axis] = start, n
            self._emit("SLICE", [self._operand(ins[0]), self.nn_model.constant(np.array(begin, np.int32), nn.int32),
                                 self.nn_model.constant(np.array(size, np.int32), nn.int32)], o)
            start += n
        return f"{len(outs)} x SLICE"

    def _map_QUANTIZE(self, op, ins, outs):
        src = self.tensors[ins[0]]
        if src.dtype in (np.float32, np.float16):
            return self._emit("QUANTIZE", [self._operand(ins[0])], outs[0])
        # requantization (int8 -> uint8, ...): through float, exact when only the zero point moves
        t = self.tensors[outs[0]]
        f = self.nn_model.op("DEQUANTIZE", self._operand(ins[0]), outputs=[(nn.float32, src.shape)])
        t.operand = self.nn_model.op("QUANTIZE", f, outputs=[self._out(outs[0])], names=[t.name])
        return "DEQUANTIZE + QUANTIZE"

    # -- the delegate's lowerings and load-time folding
    def _map_SQUARED_DIFFERENCE(self, op, ins, outs):
        """(a - b)^2 as SUB then MUL, as the delegate lowers it."""
        t = self.tensors[outs[0]]
        d = self.nn_model.op("SUB", self._operand(ins[0]), self._operand(ins[1]), 0, outputs=[self._out(outs[0])])
        t.operand = self.nn_model.op("MUL", d, d, 0, outputs=[self._out(outs[0])], names=[t.name])
        return "SUB + MUL"

    def _map_PACK(self, op, ins, outs):
        """Stack along a new axis: each input RESHAPEd to have that axis of size 1, then CONCATENATION
        (the delegate's lowering where NNAPI's PACK, feature level 6, is not available)."""
        o = _options(op, "PackOptions")
        out = self.tensors[outs[0]]
        axis = o.Axis() % len(out.shape)
        pieces = []
        for k in ins:
            shape = list(self.tensors[k].shape)
            shape.insert(axis, 1)
            pieces.append(self.nn_model.op("RESHAPE", self._operand(k),
                                           self.nn_model.constant(np.array(shape, np.int32), nn.int32),
                                           outputs=[(self._type(self.tensors[k]), tuple(shape))]))
        out.operand = self.nn_model.op("CONCATENATION", *pieces, int(axis), outputs=[self._out(outs[0])],
                                       names=[out.name])
        return f"{len(ins)} x RESHAPE + CONCATENATION"

    def _map_UNPACK(self, op, ins, outs):
        """Split along an axis into its slices, each with the axis removed: SPLIT + RESHAPE."""
        o = _options(op, "UnpackOptions")
        x = self.tensors[ins[0]]
        axis = o.Axis() % len(x.shape)
        piece_shape = list(x.shape)
        piece_shape[axis] = 1
        parts = self.nn_model.op("SPLIT", self._operand(ins[0]), int(axis), len(outs),
                                 outputs=[(self._type(x), tuple(piece_shape))] * len(outs))
        parts = parts if isinstance(parts, tuple) else (parts,)
        for p, k in zip(parts, outs):
            self._emit("RESHAPE", [p, self.nn_model.constant(np.array(self.tensors[k].shape, np.int32), nn.int32)], k)
        return "SPLIT + RESHAPE"

    def _map_SELECT_V2(self, op, ins, outs):
        """SELECT with broadcasting: each operand first BROADCAST (as TILE of a RESHAPE) to the
        output shape when it differs."""
        out = self.tensors[outs[0]]
        args = []
        for k in ins:
            t = self.tensors[k]
            o = self._operand(k)
            if tuple(t.shape) != tuple(out.shape):
                shape = [1] * (len(out.shape) - len(t.shape)) + list(t.shape)
                o = self.nn_model.op("RESHAPE", o, self.nn_model.constant(np.array(shape, np.int32), nn.int32),
                                     outputs=[(self._type(t), tuple(shape))])
                reps = [a // b if b else 1 for a, b in zip(out.shape, shape)]
                o = self.nn_model.op("TILE", o, self.nn_model.constant(np.array(reps, np.int32), nn.int32),
                                     outputs=[(self._type(t), tuple(out.shape))])
            args.append(o)
        self._emit("SELECT", args, outs[0])
        return "SELECT (operands broadcast with RESHAPE + TILE)"

    def _map_SELECT(self, op, ins, outs):
        return self._map_SELECT_V2(op, ins, outs)

    def _map_SHAPE(self, op, ins, outs):
        x = self.tensors[ins[0]]
        if not x.shape or 0 in x.shape:
            raise _Unmapped("the input shape is not static")
        return self._fold(outs[0], np.array(x.shape, self.tensors[outs[0]].dtype or np.int32))

    def _map_RANGE(self, op, ins, outs):
        start, limit, delta = (self._const(k, "start / limit / delta").reshape(-1)[0] for k in ins)
        return self._fold(outs[0], np.arange(start, limit, delta).astype(self.tensors[outs[0]].dtype))

    def _map_CAST(self, op, ins, outs):
        src, dst = self.tensors[ins[0]], self.tensors[outs[0]]
        if src.value is not None and dst.dtype is not None:
            return self._fold(outs[0], src.value.astype(dst.dtype))
        return self._emit("CAST", [self._operand(ins[0])], outs[0])

    def _map_LEAKY_RELU(self, op, ins, outs):
        """PRELU with a constant slope (NNAPI has no LEAKY_RELU)."""
        o = _options(op, "LeakyReluOptions")
        x = self.tensors[ins[0]]
        alpha = self.nn_model.constant(np.array([o.Alpha()], np.float32).astype(x.dtype), self._type(x))
        return self._emit("PRELU", [self._operand(ins[0]), alpha], outs[0])

    def _plain_binary(self, nnapi_op, op, ins, outs):
        return self._emit(nnapi_op, [self._operand(ins[0]), self._operand(ins[1])], outs[0])

    def _map_TRANSPOSE(self, op, ins, outs):
        perm = self._const(ins[1], "the permutation").astype(np.int32).reshape(-1)
        return self._emit("TRANSPOSE", [self._operand(ins[0]), self.nn_model.constant(perm, nn.int32)], outs[0])

    def _map_GATHER(self, op, ins, outs):
        o = _options(op, "GatherOptions")
        return self._emit("GATHER", [self._operand(ins[0]), int(o.Axis()) if o else 0, self._operand(ins[1])], outs[0])

    def _map_SLICE(self, op, ins, outs):
        return self._emit("SLICE", [self._operand(ins[0]), self._operand(ins[1]), self._operand(ins[2])], outs[0])

    def _map_DIV(self, op, ins, outs):
        return self._binary("DIV", "DivOptions", op, ins, outs)

    def _map_DENSIFY(self, op, ins, outs):
        src = self.tensors[ins[0]]
        dense = _densify(self._g.Tensors(ins[0]), src, self.tensors[outs[0]].shape)
        if dense is None:
            raise _Unmapped("only constant sparse tensors are densified")
        return self._fold(outs[0], dense)

    # -- running
    def run(self, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Inputs in the model's input order -> outputs in its output order.  A streaming model's
        variables are carried from one call to the next (reset() starts over)."""
        feed = {n: a for n, a in zip(self.input_names, inputs)}
        res = self._run_reusable(feed)
        if res is not None:
            return res
        state = self.state
        for var in self._state_in:
            feed["state:" + var] = state[var]
        res = self.compilation.run(feed)
        self.state = {**state, **{var: res["state:" + var] for var in self._state_out}}
        return [res[n] for n in self.output_names]

    def _run_reusable(self, feed):
        """The outputs of a run on the model's pair of reusable executions (_StatePair), bound on
        the first calls, then only input values copied in and no state copied at all.  None --
        the caller makes a fresh execution -- when the runtime has no reusable executions
        (feature level < 5), when another thread is using them, or when the input shapes differ
        from the bound ones."""
        if self._pair is False or not self._exec_lock.acquire(blocking=False):
            return None
        try:
            p = self._pair
            if p is None:
                try:
                    p = _StatePair(self)
                except nn.NNAPIError:
                    self._pair = False
                    return None
                self._pair = p
            try:
                return p.run(feed)
            except ValueError:              # other shapes than the bound ones
                return None
        finally:
            self._exec_lock.release()

    @property
    def state(self) -> Dict[str, np.ndarray]:
        """The variables' current values (copies)."""
        p = self._pair
        return p.values() if p else {k: v.copy() for k, v in self._state.items()}

    @state.setter
    def state(self, values: Dict[str, np.ndarray]) -> None:
        p = self._pair
        if p:
            p.load(values)
        else:
            self._state = {k: np.array(v) for k, v in values.items()}

    def reset(self) -> None:
        """Variables back to their initial values."""
        self.state = self.initial_state

    def report(self) -> str:
        lines = [f"{os.path.basename(self.path)}: {len(self.mapping)} operators"]
        for k, name, done in self.mapping:
            lines.append(f"  {k:>4}  {name:<24} -> {done}")
        return "\n".join(lines)


class _StatePair:
    """Two reusable executions of a streaming model whose state buffers alternate: execution 0
    reads the variables from buffer set 0 and writes their next values into set 1, execution 1
    the other way round, so a step copies its real inputs in and its real outputs out but no
    state (a wake-word model carries a few dozen variable tensors: copying each in and out
    through one execution cost about a fifth of a step).  A variable only read is one array
    both read; one only assigned is an output kept per execution (copied into the array both
    read where it is also read but its input and output operands differ in type or shape)."""

    def __init__(self, model):
        comp = model.compilation
        self.execs = [comp.execution(reusable=True), comp.execution(reusable=True)]
        self.names = list(model.output_names)
        self.ins, self.outs = list(model._state_in), list(model._state_out)
        tin = {o.name: o for o in model.nn_model.inputs}
        tout = {o.name: o for o in model.nn_model.outputs}
        cur = model._state
        self.bufs = [{}, {}]
        for v in self.ins:
            i = tin["state:" + v]
            a = np.array(cur[v], dtype=i.type.dtype)
            o = tout.get("state:" + v)
            alternate = o is not None and o.type.dtype == i.type.dtype and tuple(o.dims or ()) == a.shape
            self.bufs[0][v] = a
            self.bufs[1][v] = a.copy() if alternate else a      # only read: one array for both
        self.paired = {v for v in self.outs if v in self.bufs[0] and self.bufs[1][v] is not self.bufs[0][v]}
        self.k = 0                          # the execution to run next (it reads bufs[k])
        self.bound = [False, False]
        self.last = {}                      # variables assigned but not alternated: latest values

    def run(self, feed):
        k = self.k
        ex = self.execs[k]
        if self.bound[k]:
            res = ex.run(feed, copy=False)
        else:                               # first run of this execution: bind the state buffers
            ex.bind({"state:" + v: self.bufs[k][v] for v in self.ins},
                    {"state:" + v: self.bufs[1 - k][v] for v in self.paired})
            res = ex.run(feed, copy=False)  # the real inputs: the execution's own copies
            self.bound[k] = True
        for v in self.outs:
            if v not in self.paired:
                self.last[v] = res["state:" + v]
                if v in self.bufs[0]:       # read too, but of another dtype / shape: copied
                    self.bufs[0][v][...] = self.last[v]
        self.k = 1 - k
        return [res[n].copy() for n in self.names]

    def values(self):
        vals = {v: a.copy() for v, a in self.bufs[self.k].items()}
        vals.update({v: a.copy() for v, a in self.last.items()})
        return vals

    def load(self, values):
        """The variables set to values (reset(), or an assignment to TfliteModel.state)."""
        self.last = {}
        for v, a in values.items():
            if v in self.bufs[self.k]:
                self.bufs[self.k][v][...] = a
            elif v in self.outs:
                self.last[v] = np.array(a)


class _Unmapped(Exception):
    pass


for _name in ("ABS", "EXP", "LOG", "SQRT", "RSQRT", "SIN", "NEG", "FLOOR", "LOGICAL_NOT", "ELU"):
    setattr(TfliteModel, "_map_" + _name, (lambda n: lambda self, op, ins, outs: self._unary(n, ins, outs))(_name))
for _name in ("MAXIMUM", "MINIMUM", "POW", "EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL",
              "LOGICAL_AND", "LOGICAL_OR"):
    setattr(TfliteModel, "_map_" + _name,
            (lambda n: lambda self, op, ins, outs: self._plain_binary(n, op, ins, outs))(_name))
TfliteModel._map_RELU_N1_TO_1 = lambda self, op, ins, outs: self._unary("RELU1", ins, outs)


def _densify(tensor, info, shape):
    """A constant sparse tensor (TFLite SparsityParameters: traversal order, block map, DENSE /
    SPARSE_CSR dimensions) expanded to its dense float32 value, or None when not constant."""
    sp = tensor.Sparsity()
    if sp is None or info.value is None:
        return None
    import tflite
    order = list(sp.TraversalOrderAsNumpy()) if sp.TraversalOrderLength() else list(range(len(shape)))
    block_map = list(sp.BlockMapAsNumpy()) if sp.BlockMapLength() else []
    n_dims = len(order)
    dims = []
    for k in range(sp.DimMetadataLength()):
        d = sp.DimMetadata(k)
        if d.Format() == tflite.DimensionType.DENSE:
            dims.append(("dense", d.DenseSize(), None, None))
        else:
            def vec(union_type, table):
                if table is None:
                    return None
                cls = {tflite.SparseIndexVector.Int32Vector: tflite.Int32Vector,
                       tflite.SparseIndexVector.Uint16Vector: tflite.Uint16Vector,
                       tflite.SparseIndexVector.Uint8Vector: tflite.Uint8Vector}[union_type]
                v = cls()
                v.Init(table.Bytes, table.Pos)
                return v.ValuesAsNumpy()
            dims.append(("csr", None, vec(d.ArraySegmentsType(), d.ArraySegments()),
                         vec(d.ArrayIndicesType(), d.ArrayIndices())))
    # block sizes: the dense sizes of the trailing block dimensions
    orig_rank = len(shape)
    block_size = [dims[orig_rank + i][1] for i in range(len(block_map))]
    dense = np.zeros(shape, np.float32)
    values = info.value.reshape(-1).astype(np.float32)
    pos = [0]

    def walk(level, prev, idx):
        if level == n_dims:
            full = [0] * orig_rank
            for lv in range(n_dims):
                dim = order[lv]
                if dim < orig_rank:
                    full[dim] += idx[lv] * (block_size[block_map.index(dim)] if dim in block_map else 1)
                else:
                    full[block_map[dim - orig_rank]] += idx[lv]
            dense[tuple(full)] = values[pos[0]]
            pos[0] += 1
            return
        kind, size, seg, ind = dims[level]
        if kind == "dense":
            for i in range(size):
                walk(level + 1, prev * size + i, idx + [i])
        else:
            for j in range(int(seg[prev]), int(seg[prev + 1])):
                walk(level + 1, j, idx + [int(ind[j])])

    walk(0, 0, [])
    return dense


def load(path: str, **compile_options) -> TfliteModel:
    """Parse, map and compile a .tflite model (raises LoadError listing unmapped operators).
    compile_options: nn.Model.compile's, and allow_fp16=True (relaxComputationFloat32toFloat16)."""
    return TfliteModel(path, compile_options)
