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
from typing import Dict, List, Optional, Sequence

import numpy as np

from . import nn

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
    __slots__ = ("index", "name", "dtype", "shape", "scale", "zp", "value", "operand")

    def __init__(self, index, name, dtype, shape, scale, zp, value):
        self.index, self.name, self.dtype, self.shape = index, name, dtype, shape
        self.scale, self.zp, self.value, self.operand = scale, zp, value, None


class TfliteModel:
    """A .tflite subgraph mapped to one compiled NNAPI model."""

    def __init__(self, path: str, compile_options: Optional[dict] = None):
        import tflite
        self.path = path
        buf = open(path, "rb").read()
        self._m = tflite.Model.GetRootAsModel(buf, 0)
        self._g = self._m.Subgraphs(0)
        self._names = _builtin_names()
        self.mapping: List[tuple] = []          # (operator index, builtin, NNAPI operations or reason)
        self.tensors = [self._tensor(k) for k in range(self._g.TensorsLength())]
        self.nn_model = nn.Model(os.path.basename(path))
        self._build()
        self.compilation = self.nn_model.compile(**(compile_options or {}))
        self.input_names = [self.tensors[i].name for i in self._inputs]
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
        scale, zp = 0.0, 0
        q = t.Quantization()
        if q is not None and q.ScaleLength():
            scale, zp = float(q.Scale(0)), int(q.ZeroPoint(0)) if q.ZeroPointLength() else 0
        name = t.Name().decode(errors="replace") if t.Name() else f"t{k}"
        return _Tensor(k, name, dtype, shape, scale, zp, value)

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
            return nn.int32
        if t.dtype == np.uint8:
            return nn.quant8_asymm(t.scale, t.zp)
        if t.dtype == np.int8:
            return nn.quant8_asymm_signed(t.scale, t.zp)
        raise _Unmapped(f"tensor {t.name!r} of type {t.dtype} has no NNAPI operand type here")

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
        for i in self._inputs:
            t = self.tensors[i]
            t.operand = self.nn_model.input(t.name, self._type(t), t.shape)
        unmapped = []
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

    def _map_DENSIFY(self, op, ins, outs):
        src = self.tensors[ins[0]]
        dense = _densify(self._g.Tensors(ins[0]), src, self.tensors[outs[0]].shape)
        if dense is None:
            raise _Unmapped("only constant sparse tensors are densified")
        return self._fold(outs[0], dense)

    # -- running
    def run(self, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Inputs in the model's input order -> outputs in its output order."""
        res = self.compilation.run({n: a for n, a in zip(self.input_names, inputs)})
        return [res[n] for n in self.output_names]

    def report(self) -> str:
        lines = [f"{os.path.basename(self.path)}: {len(self.mapping)} operators"]
        for k, name, done in self.mapping:
            lines.append(f"  {k:>4}  {name:<24} -> {done}")
        return "\n".join(lines)


class _Unmapped(Exception):
    pass


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
    """Parse, map and compile a .tflite model (raises LoadError listing unmapped operators)."""
    return TfliteModel(path, compile_options)
