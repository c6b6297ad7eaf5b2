"""Shape and layout: reshape, concatenation, pack / unpack, transpose, padding, depth-to-space,
resizing; SHAPE and RANGE (folded at load when their inputs are known, see fold.py)."""
from __future__ import annotations

import numpy as np

from .base import Unmapped, maps


@maps("RESHAPE")
def reshape(ctx, node):
    return ctx.emit("RESHAPE", [ctx.operand(node.ins[0]), ctx.ivec(ctx.tensors[node.outs[0]].shape)], node.outs[0])


@maps("CONCATENATION")
def concatenation(ctx, node):
    o = node.options("ConcatenationOptions")
    fuse = o.FusedActivationFunction()
    if fuse not in (0, 1, 3):
        raise Unmapped("fused activation not supported by NNAPI")
    args = [ctx.operand(i) for i in node.ins] + [int(o.Axis())]
    if fuse == 0:
        return ctx.emit("CONCATENATION", args, node.outs[0])
    tmp = ctx.op("CONCATENATION", *args, outputs=[ctx.out(node.outs[0])])
    act = "RELU" if fuse == 1 else "RELU6"
    ctx.emit(act, [tmp], node.outs[0])
    return f"CONCATENATION + {act}"


@maps("PACK")
def pack(ctx, node):
    """Stack along a new axis: each input RESHAPEd to have that axis of size 1, then CONCATENATION
    (the delegate's lowering where NNAPI's PACK, feature level 6, is not available)."""
    o = node.options("PackOptions")
    out = ctx.tensors[node.outs[0]]
    axis = o.Axis() % len(out.shape)
    pieces = []
    for k in node.ins:
        shape = list(ctx.tensors[k].shape)
        shape.insert(axis, 1)
        pieces.append(ctx.op("RESHAPE", ctx.operand(k), ctx.ivec(shape),
                             outputs=[(ctx.type(ctx.tensors[k]), tuple(shape))]))
    ctx.emit("CONCATENATION", pieces + [int(axis)], node.outs[0])
    return f"{len(node.ins)} x RESHAPE + CONCATENATION"


@maps("UNPACK")
def unpack(ctx, node):
    """Split along an axis into its slices, each with the axis removed: SPLIT + RESHAPE."""
    o = node.options("UnpackOptions")
    x = ctx.tensors[node.ins[0]]
    axis = o.Axis() % len(x.shape)
    piece_shape = list(x.shape)
    piece_shape[axis] = 1
    parts = ctx.op("SPLIT", ctx.operand(node.ins[0]), int(axis), len(node.outs),
                   outputs=[(ctx.type(x), tuple(piece_shape))] * len(node.outs))
    parts = parts if isinstance(parts, tuple) else (parts,)
    for p, k in zip(parts, node.outs):
        ctx.emit("RESHAPE", [p, ctx.ivec(ctx.tensors[k].shape)], k)
    return "SPLIT + RESHAPE"


@maps("TRANSPOSE")
def transpose(ctx, node):
    perm = ctx.const(node.ins[1], "the permutation").astype(np.int32).reshape(-1)
    return ctx.emit("TRANSPOSE", [ctx.operand(node.ins[0]), ctx.ivec(perm)], node.outs[0])


@maps("PAD")
def pad(ctx, node):
    pads = ctx.const(node.ins[1], "paddings")
    return ctx.emit("PAD", [ctx.operand(node.ins[0]), ctx.constant(pads.astype(np.int32))], node.outs[0])


@maps("DEPTH_TO_SPACE")
def depth_to_space(ctx, node):
    o = node.options("DepthToSpaceOptions")
    return ctx.emit("DEPTH_TO_SPACE", [ctx.operand(node.ins[0]), o.BlockSize()], node.outs[0])


@maps("RESIZE_BILINEAR")
def resize_bilinear(ctx, node):
    o = node.options("ResizeBilinearOptions")
    h, w = (int(v) for v in ctx.const(node.ins[1], "the output size").reshape(-1)[:2])
    align = bool(o.AlignCorners()) if o else False
    half = bool(o.HalfPixelCenters()) if o else False
    args = [ctx.operand(node.ins[0]), w, h]
    if align or half:
        args += [False, align, half]
    return ctx.emit("RESIZE_BILINEAR", args, node.outs[0])


@maps("SHAPE", delegate=False)
def shape(ctx, node):
    raise Unmapped("the input shape is not static")


@maps("RANGE", delegate=False)
def range_(ctx, node):
    raise Unmapped("start / limit / delta must be constant")
