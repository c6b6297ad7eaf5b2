"""Gathering, slicing and splitting."""
from __future__ import annotations

import numpy as np

from .base import Unmapped, maps


@maps("GATHER")
def gather(ctx, node):
    o = node.options("GatherOptions")
    return ctx.emit("GATHER", [ctx.operand(node.ins[0]), int(o.Axis()) if o else 0, ctx.operand(node.ins[1])],
                    node.outs[0])


@maps("SLICE")
def slice_(ctx, node):
    return ctx.emit("SLICE", [ctx.operand(k) for k in node.ins[:3]], node.outs[0])


@maps("STRIDED_SLICE")
def strided_slice(ctx, node):
    o = node.options("StridedSliceOptions")
    if o and (o.EllipsisMask() or o.NewAxisMask() or o.Offset()):
        raise Unmapped("ellipsis / new-axis masks and offset have no NNAPI form")
    vec = [ctx.ivec(ctx.const(k, what).astype(np.int32))
           for k, what in ((node.ins[1], "begin"), (node.ins[2], "end"), (node.ins[3], "strides"))]
    masks = [o.BeginMask(), o.EndMask(), o.ShrinkAxisMask()] if o else [0, 0, 0]
    return ctx.emit("STRIDED_SLICE", [ctx.operand(node.ins[0])] + vec + masks, node.outs[0])


@maps("SPLIT_V")
def split_v(ctx, node):
    sizes = [int(v) for v in ctx.const(node.ins[1], "size_splits").reshape(-1)]
    axis = int(ctx.const(node.ins[2], "axis").reshape(-1)[0])
    x = ctx.tensors[node.ins[0]]
    axis %= len(x.shape)
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[axis] - sum(s for s in sizes if s != -1)
    start = 0
    for o, n in zip(node.outs, sizes):       # the delegate's lowering: one SLICE per piece
        begin = [0] * len(x.shape)
        size = list(x.shape)
        begin[axis], size[axis] = start, n
        ctx.emit("SLICE", [ctx.operand(node.ins[0]), ctx.ivec(begin), ctx.ivec(size)], o)
        start += n
    return f"{len(node.outs)} x SLICE"
