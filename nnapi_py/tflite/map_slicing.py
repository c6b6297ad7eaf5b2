"""Gathering, slicing, splitting, top-k and arg-max / arg-min."""
from __future__ import annotations

import numpy as np

from .base import F16, F32, I8, I32, NEVER, U8, Rule, Unmapped, axis_in, maps, not_constant, not_of_type, option

_FLOAT_OR_QUANT8 = Rule(NEVER, "input type other than float / uint8 / int8", not_of_type(F32, F16, U8, I8))


@maps("GATHER", level=3, rules=[
    Rule(NEVER, "input type other than float / int32 / uint8 / int8", not_of_type(F32, F16, I32, U8, I8)),
    Rule(NEVER, "non-int32 positions", not_of_type(I32, which=1)),
    Rule(NEVER, "scalar positions", lambda c, n: c.tensors[n.ins[1]].shape == (), beyond=True),
    Rule(NEVER, "batch_dims", lambda c, n: (lambda o: o is not None and o.BatchDims() != 0)(n.options("GatherOptions")))])
def gather(ctx, node):
    """GATHER; a scalar position (beyond the delegate) is gathered as a vector of one (a computed
    scalar is [1] in NNAPI), and the axis of size one removed by a RESHAPE."""
    o = node.options("GatherOptions")
    x = ctx.tensors[node.ins[0]]
    axis = axis_in(o.Axis(), len(x.shape)) if o else 0
    pos = ctx.tensors[node.ins[1]]
    if pos.shape != ():
        return ctx.emit("GATHER", [ctx.operand(node.ins[0]), axis, ctx.operand(node.ins[1])], node.outs[0])
    # a computed scalar is [1] on the NNAPI side (NNAPI has no rank 0; the delegate declares scalars [1])
    p = ctx.ivec([int(pos.value.reshape(-1)[0])]) if pos.value is not None else ctx.operand(node.ins[1])
    out = ctx.tensors[node.outs[0]]
    shape = tuple(x.shape[:axis]) + (1,) + tuple(x.shape[axis + 1:])
    if not out.shape:
        ctx.emit("GATHER", [ctx.operand(node.ins[0]), axis, p], node.outs[0])
        return "GATHER"
    g = ctx.op("GATHER", ctx.operand(node.ins[0]), axis, p, outputs=[(ctx.type(out), shape)])
    ctx.emit("RESHAPE", [g, ctx.ivec(out.shape)], node.outs[0])
    return "GATHER + RESHAPE"


@maps("SLICE", level=3, rules=[
    Rule(NEVER, "input type other than float32 / int32 / uint8 / int8", not_of_type(F32, F16, I32, U8, I8)),
    Rule(NEVER, "non-int32 begin / size", lambda c, n: any(c.tensors[k].dtype != I32 for k in n.ins[1:3]))])
def slice_(ctx, node):
    x = ctx.tensors[node.ins[0]]
    args = [ctx.operand(node.ins[0])]
    size = ctx.tensors[node.ins[2]].value
    for k in node.ins[1:3]:
        args.append(ctx.operand(k))
    if size is not None and np.any(size < 0):   # -1: to the end (NNAPI wants the count)
        begin = ctx.const(node.ins[1], "begin").reshape(-1)
        args[2] = ctx.ivec([x.shape[i] - int(begin[i]) if s < 0 else int(s) for i, s in enumerate(size.reshape(-1))])
    return ctx.emit("SLICE", args, node.outs[0])


@maps("STRIDED_SLICE", level=2, rules=[
    _FLOAT_OR_QUANT8,
    Rule(NEVER, "ellipsis / new-axis masks",
         lambda c, n: (lambda o: o is not None and bool(o.EllipsisMask() or o.NewAxisMask()))(
             n.options("StridedSliceOptions"))),
    Rule(NEVER, "computed begin / end / strides", lambda c, n: any(c.tensors[k].value is None for k in n.ins[1:4]))])
def strided_slice(ctx, node):
    """STRIDED_SLICE; where a shrink axis is set TFLite takes the one element at begin whatever
    end says (NNAPI checks end): end becomes begin + 1 there (negative begins resolved with the
    static shape); offset=True (end relative to begin) is resolved the same way."""
    o = node.options("StridedSliceOptions")
    x = ctx.tensors[node.ins[0]]
    begin, end, strides = (ctx.const(k, what).astype(np.int64).reshape(-1)
                           for k, what in ((node.ins[1], "begin"), (node.ins[2], "end"), (node.ins[3], "strides")))
    masks = [o.BeginMask(), o.EndMask(), o.ShrinkAxisMask()] if o else [0, 0, 0]
    begin, end = begin.copy(), end.copy()
    for i in range(len(begin)):
        if o is not None and o.Offset():
            end[i] = begin[i] + end[i]
        if masks[2] >> i & 1:
            b = int(begin[i]) % x.shape[i] if i < len(x.shape) and x.shape[i] else int(begin[i])
            begin[i], end[i] = b, b + 1
            masks[0] &= ~(1 << i)
            masks[1] &= ~(1 << i)
    vec = [ctx.ivec(a.astype(np.int32)) for a in (begin, end, strides)]
    return ctx.emit("STRIDED_SLICE", [ctx.operand(node.ins[0])] + vec + masks, node.outs[0])


@maps("SPLIT", level=3, rules=[
    Rule(NEVER, "input type other than float32 / uint8 / int8 / int32", not_of_type(F32, F16, U8, I8, I32, which=1)),
    Rule(4, "int8 input", lambda c, n: c.tensors[n.ins[1]].dtype == I8),
    Rule(NEVER, "a computed axis", not_constant(0))])
def split(ctx, node):
    """TFLite (axis, input) -> NNAPI SPLIT(input, axis, num_splits)."""
    x = ctx.tensors[node.ins[1]]
    axis = axis_in(ctx.scalar(node.ins[0], "the axis"), len(x.shape))
    outs = ctx.op("SPLIT", ctx.operand(node.ins[1]), axis, len(node.outs),
                  outputs=[ctx.out(k) for k in node.outs], names=[ctx.tensors[k].name for k in node.outs])
    for k, o in zip(node.outs, outs if isinstance(outs, tuple) else (outs,)):
        ctx.bind(k, o)
    return "SPLIT"


def _split_sizes(ctx, node):
    sizes = [int(v) for v in ctx.const(node.ins[1], "size_splits").reshape(-1)]
    axis = int(ctx.const(node.ins[2], "axis").reshape(-1)[0])
    x = ctx.tensors[node.ins[0]]
    axis = axis_in(axis, len(x.shape))
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[axis] - sum(s for s in sizes if s != -1)
    return sizes, axis


@maps("SPLIT_V", level=3, rules=[
    Rule(4, "SPLIT_V (lowered to SLICEs)", beyond=True),
    Rule(NEVER, "input type other than float32 / uint8 / int8 / int32", not_of_type(F32, F16, U8, I8, I32)),
    Rule(NEVER, "computed size_splits or axis", lambda c, n: not_constant(1)(c, n) or not_constant(2)(c, n)),
    Rule(NEVER, "a zero split size", lambda c, n: 0 in _split_sizes(c, n)[0])])
def split_v(ctx, node):
    sizes, axis = _split_sizes(ctx, node)
    x = ctx.tensors[node.ins[0]]
    start = 0
    for o, n in zip(node.outs, sizes):       # the delegate's lowering: one SLICE per piece
        begin = [0] * len(x.shape)
        size = list(x.shape)
        begin[axis], size[axis] = start, n
        ctx.emit("SLICE", [ctx.operand(node.ins[0]), ctx.ivec(begin), ctx.ivec(size)], o)
        start += n
    return f"{len(node.outs)} x SLICE"


@maps("TOPK_V2", level=3, rules=[
    Rule(NEVER, "input type other than float32 / int32 / uint8 / int8", not_of_type(F32, F16, I32, U8, I8)),
    Rule(NEVER, "a computed k", not_constant(1))])
def topk_v2(ctx, node):
    k = int(ctx.scalar(node.ins[1], "k"))
    outs = ctx.op("TOPK_V2", ctx.operand(node.ins[0]), k, outputs=[ctx.out(j) for j in node.outs[:2]],
                  names=[ctx.tensors[j].name for j in node.outs[:2]])
    for j, o in zip(node.outs, outs):
        ctx.bind(j, o)
    return "TOPK_V2"


def _arg(cls):
    return [Rule(NEVER, "input type other than float / int32 / uint8 / int8", not_of_type(F16, F32, I32, U8, I8)),
            Rule(NEVER, "a computed axis", not_constant(1)),
            Rule(NEVER, "an int64 output (NNAPI's is int32)", option(cls, "OutputType", lambda t: t != 2))]


@maps("ARG_MAX", level=3, rules=_arg("ArgMaxOptions"))
def arg_max(ctx, node):
    return _argmaxmin("ARGMAX", ctx, node)


@maps("ARG_MIN", level=3, rules=_arg("ArgMinOptions"))
def arg_min(ctx, node):
    return _argmaxmin("ARGMIN", ctx, node)


def _argmaxmin(nnapi_op, ctx, node):
    x = ctx.tensors[node.ins[0]]
    axis = int(ctx.scalar(node.ins[1], "the axis"))
    if not -len(x.shape) <= axis < len(x.shape):
        raise Unmapped(f"axis {axis} out of range")
    return ctx.emit(nnapi_op, [ctx.operand(node.ins[0]), axis % len(x.shape)], node.outs[0])
