"""Convolutions, fully-connected layers, batched matrix products and pooling."""
from __future__ import annotations

import numpy as np

from .. import nn
from .base import (F32, FLOAT, I8, I32, NEVER, PADDING, U8, Rule, Unmapped, fuse_code, hybrid, maps, not_constant,
                   not_of_type, of_type, option)

_HYBRID = Rule(3, "int8 weights with float activations (hybrid)", hybrid)
_PER_CHANNEL = nn.quant8_symm_per_channel([1.0]).code


def _unrestricted_scales(c, n):
    """uint8 with input scale x filter scale >= output scale (ExpectIsRestrictedScalesCompliant)."""
    x, w, y = c.tensors[n.ins[0]], c.tensors[n.ins[1]], c.tensors[n.outs[0]]
    return x.dtype == U8 and w.dtype == U8 and x.scale * w.scale >= y.scale


# below feature level 3 the delegate takes only float or uint8 convolutions, with restricted scales
_CONV_BEFORE_3 = [Rule(3, "int8 input", lambda c, n: c.tensors[n.ins[0]].dtype == I8),
                  Rule(3, "uint8 with input scale x filter scale >= output scale", _unrestricted_scales)]


def _dilation(o):
    if o.DilationWFactor() != 1 or o.DilationHFactor() != 1:
        return [False, o.DilationWFactor(), o.DilationHFactor()]
    return []


def _dilated(cls):
    return lambda c, n: (lambda o: o is not None and (o.DilationWFactor() != 1 or o.DilationHFactor() != 1))(
        n.options(cls))


def _grouped(ctx, node):
    x, w = ctx.tensors[node.ins[0]], ctx.tensors[node.ins[1]]
    return len(x.shape) == 4 and len(w.shape) == 4 and x.shape[3] != w.shape[3]


def _per_channel(ctx, node):
    return ctx.tensors[node.ins[1]].scales is not None


def _no_bias(ctx, node):
    return len(node.ins) < 3 or node.ins[2] < 0


def _repeated_scale(ctx, w):
    """A per-tensor int8 filter the importer types per-channel (its one scale repeated)."""
    return w.dtype == I8 and w.scales is None and w.value is not None and ctx.type(w).code == _PER_CHANNEL


def _filter(ctx, node, channels=0):
    """The filter operand: dequantized to float32 in a hybrid node; a per-tensor int8 filter
    typed per-channel along `channels` (0: CONV_2D's OHWI, 3: DEPTHWISE_CONV_2D's 1HWO)."""
    if hybrid(ctx, node):
        return ctx.float_weight(node.ins[1])
    w = ctx.tensors[node.ins[1]]
    if channels and _repeated_scale(ctx, w):
        return ctx.constant(np.ascontiguousarray(w.value), nn.quant8_symm_per_channel([w.scale] * w.shape[channels],
                                                                                      channels))
    return ctx.operand(node.ins[1])


def _bias(ctx, node, n_out):
    x, w = ctx.tensors[node.ins[0]], ctx.tensors[node.ins[1]]
    if not _no_bias(ctx, node):
        if hybrid(ctx, node):
            return ctx.float_weight(node.ins[2])
        b = ctx.tensors[node.ins[2]]
        if b.scales is None and b.value is not None and _repeated_scale(ctx, w):
            # NNAPI wants the bias of a per-channel filter with scale 0 (each channel's scale is
            # input x filter scale: here the bias's own scale)
            return ctx.constant(np.ascontiguousarray(b.value), nn.OperandType(nn.int32.code, 0.0, 0))
        return ctx.operand(node.ins[2])
    if x.dtype in FLOAT:
        return ctx.constant(np.zeros(n_out, x.dtype), ctx.type(x))
    scale = x.scale * (w.scales[0] if w.scales else w.scale)
    return ctx.constant(np.zeros(n_out, np.int32), nn.OperandType(nn.int32.code, 0.0 if w.scales else scale, 0))


@maps("CONV_2D", rules=_CONV_BEFORE_3 + [
    _HYBRID, Rule(3, "per-channel quantized filter", _per_channel),
    Rule(3, "dilation", _dilated("Conv2DOptions")), Rule(3, "grouped convolution", _grouped),
    Rule(NEVER, "an omitted bias", _no_bias, beyond=True)])
def conv_2d(ctx, node):
    o = node.options("Conv2DOptions")
    w = ctx.tensors[node.ins[1]]
    fuse = fuse_code(o)
    args = [ctx.operand(node.ins[0]), _filter(ctx, node), _bias(ctx, node, w.shape[0]),
            PADDING[o.Padding()], o.StrideW(), o.StrideH()]
    if _grouped(ctx, node):
        if _dilation(o):
            raise Unmapped("a dilated grouped convolution has no NNAPI form")
        groups = ctx.tensors[node.ins[0]].shape[3] // w.shape[3]
        ctx.emit("GROUPED_CONV_2D", args + [groups, fuse, False], node.outs[0])
        return "GROUPED_CONV_2D"
    ctx.emit("CONV_2D", args + [fuse] + _dilation(o), node.outs[0])
    return "DEQUANTIZE + CONV_2D" if hybrid(ctx, node) else "CONV_2D"


@maps("DEPTHWISE_CONV_2D", rules=_CONV_BEFORE_3 + [
    Rule(3, "dilation", _dilated("DepthwiseConv2DOptions")),
    Rule(3, "int8 weights with float activations (hybrid: NNAPI DEQUANTIZE of the weights)", hybrid),
    Rule(NEVER, "int8 weights with float activations (hybrid)", hybrid, beyond=True),
    Rule(NEVER, "an omitted bias", _no_bias, beyond=True)])
def depthwise_conv_2d(ctx, node):
    o = node.options("DepthwiseConv2DOptions")
    w = ctx.tensors[node.ins[1]]
    fuse = fuse_code(o)
    x = ctx.tensors[node.ins[0]]
    mult = max(1, w.shape[3] // max(1, x.shape[3])) if len(x.shape) == 4 else o.DepthMultiplier()
    args = [ctx.operand(node.ins[0]), _filter(ctx, node, 3), _bias(ctx, node, w.shape[3]),
            PADDING[o.Padding()], o.StrideW(), o.StrideH(), mult, fuse]
    ctx.emit("DEPTHWISE_CONV_2D", args + _dilation(o), node.outs[0])
    return "DEQUANTIZE + DEPTHWISE_CONV_2D" if hybrid(ctx, node) else "DEPTHWISE_CONV_2D"


@maps("FULLY_CONNECTED", rules=_CONV_BEFORE_3 + [
    _HYBRID, Rule(NEVER, "int16 output", of_type(np.int16, out=True)),
    Rule(4, "keep_num_dims", option("FullyConnectedOptions", "KeepNumDims"))])
def fully_connected(ctx, node):
    o = node.options("FullyConnectedOptions")
    fuse = fuse_code(o)
    w = ctx.tensors[node.ins[1]]
    out = ctx.tensors[node.outs[0]]
    args = [ctx.operand(node.ins[0]), _filter(ctx, node), _bias(ctx, node, w.shape[0]), fuse]
    what = "DEQUANTIZE + FULLY_CONNECTED" if hybrid(ctx, node) else "FULLY_CONNECTED"
    if len(out.shape) == 2:
        ctx.emit("FULLY_CONNECTED", args, node.outs[0])
        return what
    flat = (int(np.prod(out.shape[:-1])), out.shape[-1])     # keep_num_dims: NNAPI's output is 2-D
    y = ctx.op("FULLY_CONNECTED", *args, outputs=[(ctx.type(out), flat)])
    ctx.emit("RESHAPE", [y, ctx.ivec(out.shape)], node.outs[0])
    return what + " + RESHAPE"


@maps("TRANSPOSE_CONV", level=3, rules=[
    Rule(NEVER, "a computed output shape or filter", lambda c, n: not_constant(0)(c, n) or not_constant(1)(c, n))])
def transpose_conv(ctx, node):
    """TFLite inputs (output_shape, filter, input[, bias]) -> TRANSPOSE_CONV_2D (input, filter,
    bias, output_shape, implicit padding, strides, activation, NHWC)."""
    o = node.options("TransposeConvOptions")
    w = ctx.tensors[node.ins[1]]
    x = ctx.tensors[node.ins[2]]
    fuse = fuse_code(o) if o is not None and hasattr(o, "FusedActivationFunction") else 0
    # int8 input: NNAPI wants a per-channel filter (a per-tensor scale repeated, as the delegate's
    # NN_TENSOR_FLAG_FORCE_PER_CHANNEL), whose bias has scale 0
    per_channel = x.dtype == I8 and w.dtype == I8
    if per_channel and w.scales is None:
        if w.zp:
            raise Unmapped("an int8 filter with a zero point")
        w_op = ctx.constant(np.ascontiguousarray(w.value), nn.quant8_symm_per_channel([w.scale] * w.shape[0], 0))
    else:
        w_op = ctx.operand(node.ins[1])
    if len(node.ins) > 3 and node.ins[3] >= 0:
        bias = ctx.constant(np.ascontiguousarray(ctx.const(node.ins[3], "the bias")),
                            nn.OperandType(nn.int32.code, 0.0, 0)) if per_channel else ctx.operand(node.ins[3])
    elif x.dtype in FLOAT:
        bias = ctx.constant(np.zeros(w.shape[0], x.dtype), ctx.type(x))
    else:
        scale = 0.0 if per_channel or w.scales else x.scale * w.scale
        bias = ctx.constant(np.zeros(w.shape[0], np.int32), nn.OperandType(nn.int32.code, scale, 0))
    shape = ctx.ivec(ctx.const(node.ins[0], "the output shape"))
    return ctx.emit("TRANSPOSE_CONV_2D", [ctx.operand(node.ins[2]), w_op, bias, shape, PADDING[o.Padding()],
                                          o.StrideW(), o.StrideH(), fuse, False], node.outs[0])


def _broadcast(c, n):
    a, b = c.tensors[n.ins[0]].shape, c.tensors[n.ins[1]].shape
    return len(a) != len(b) or tuple(a[:-2]) != tuple(b[:-2])


def _fc_form(c, n):
    """BATCH_MATMUL of a float input by a constant matrix (batch dimensions of 1 aside), lhs not
    transposed: FULLY_CONNECTED with the matrix as weights, at every level (beyond the delegate)."""
    x, w = c.tensors[n.ins[0]], c.tensors[n.ins[1]]
    o = n.options("BatchMatMulOptions")
    return (x.dtype in FLOAT and w.dtype == x.dtype and w.value is not None and len(w.shape) >= 2
            and all(d == 1 for d in w.shape[:-2]) and not (o is not None and o.AdjX()))


def _rank_2_to_4(c, n):
    return 2 <= len(c.tensors[n.ins[0]].shape) <= 4


def _native(c, n):
    return not _fc_form(c, n) or (c.level >= 6 and not _broadcast(c, n))


@maps("BATCH_MATMUL", rules=[
    Rule(6, "NNAPI's BATCH_MATMUL", _native),
    Rule(6, "NNAPI's BATCH_MATMUL (lowered to FULLY_CONNECTED, constant matrix)", lambda c, n: not _native(c, n),
         beyond=True),
    Rule(NEVER, "input type other than float32 / int32 / int8", not_of_type(F32, I32, I8)),
    Rule(NEVER, "inputs of different types (hybrid)",
         lambda c, n: c.tensors[n.ins[0]].dtype != c.tensors[n.ins[1]].dtype),
    Rule(NEVER, "input rank outside 2..4", lambda c, n: _native(c, n) and not _rank_2_to_4(c, n)),
    Rule(NEVER, "input rank outside 2..4 (lowered to FULLY_CONNECTED)",
         lambda c, n: not _native(c, n) and not _rank_2_to_4(c, n), beyond=True),
    Rule(NEVER, "broadcast batch dimensions", lambda c, n: _native(c, n) and _broadcast(c, n)),
    Rule(NEVER, "broadcast batch dimensions (lowered to FULLY_CONNECTED)",
         lambda c, n: not _native(c, n) and _broadcast(c, n), beyond=True)])
def batch_matmul(ctx, node):
    o = node.options("BatchMatMulOptions")
    adj_x, adj_y = (bool(o.AdjX()), bool(o.AdjY())) if o else (False, False)
    if _native(ctx, node):
        if _broadcast(ctx, node):
            raise Unmapped("broadcast batch dimensions")
        return ctx.emit("BATCH_MATMUL", [ctx.operand(node.ins[0]), ctx.operand(node.ins[1]), adj_x, adj_y],
                        node.outs[0])
    x, w, out = ctx.tensors[node.ins[0]], ctx.tensors[node.ins[1]], ctx.tensors[node.outs[0]]
    m = w.value.reshape(w.shape[-2:])
    weights = np.ascontiguousarray(m if adj_y else m.T)         # FULLY_CONNECTED weights: [units, depth]
    units, depth = weights.shape
    rows = int(np.prod(x.shape[:-1]))
    flat = ctx.op("RESHAPE", ctx.operand(node.ins[0]), ctx.ivec([rows, depth]), outputs=[(ctx.type(x), (rows, depth))])
    y = ctx.op("FULLY_CONNECTED", flat, ctx.constant(weights, ctx.type(w)),
               ctx.constant(np.zeros(units, x.dtype), ctx.type(x)), 0, outputs=[(ctx.type(out), (rows, units))])
    ctx.emit("RESHAPE", [y, ctx.ivec(out.shape)], node.outs[0])
    return "RESHAPE + FULLY_CONNECTED + RESHAPE"


_FLOAT_OR_QUANT8 = Rule(NEVER, "input type other than float / uint8 / int8",
                        not_of_type(np.float32, np.float16, U8, I8))


def _pool(nnapi_op, ctx, node):
    o = node.options("Pool2DOptions")
    fuse = fuse_code(o)
    return ctx.emit(nnapi_op, [ctx.operand(node.ins[0]), PADDING[o.Padding()], o.StrideW(), o.StrideH(),
                               o.FilterWidth(), o.FilterHeight(), fuse], node.outs[0])


@maps("MAX_POOL_2D", rules=[_FLOAT_OR_QUANT8])
def max_pool_2d(ctx, node):
    return _pool("MAX_POOL_2D", ctx, node)


@maps("AVERAGE_POOL_2D", rules=[_FLOAT_OR_QUANT8, Rule(
    NEVER, "a quantized filter window above 256 elements (the reference CPU path would overflow)",
    lambda c, n: c.tensors[n.ins[0]].dtype in (U8, I8) and (lambda o: o.FilterWidth() * o.FilterHeight() > 256)(
        n.options("Pool2DOptions")), beyond=True)])
def average_pool_2d(ctx, node):
    return _pool("AVERAGE_POOL_2D", ctx, node)


@maps("L2_POOL_2D", rules=[Rule(NEVER, "non-float input", not_of_type(*FLOAT)),
                           Rule(3, "a fused activation", option("Pool2DOptions", "FusedActivationFunction"))])
def l2_pool_2d(ctx, node):
    return _pool("L2_POOL_2D", ctx, node)
