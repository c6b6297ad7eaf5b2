"""Shape and layout: reshape, squeeze / expand, concatenation, pack / unpack, tile, transpose,
padding, reverse, space <-> depth / batch, resizing, fill; SHAPE and RANGE (folded at load
when their inputs are known, see fold.py)."""
from __future__ import annotations

import numpy as np

from .. import nn
from .base import (F16, F32, FLOAT, I8, I32, NEVER, U8, Rule, Unmapped, axis_in, maps, not_constant, not_of_type,
                   of_type, option, rank_above)

_FLOAT_OR_QUANT8 = Rule(NEVER, "input type other than float / uint8 / int8", not_of_type(F32, F16, U8, I8))


def _one_bool(c, n):
    x = c.tensors[n.ins[0]]
    return x.dtype == np.bool_ and int(np.prod(x.shape)) == 1


@maps("RESHAPE", rules=[Rule(6, "int32 tensors", of_type(I32)),
                        Rule(NEVER, "bool tensors", lambda c, n: of_type(np.bool_)(c, n) and not _one_bool(c, n)),
                        Rule(NEVER, "a bool of one element (as REDUCE_ANY, LOGICAL_OR)", _one_bool, beyond=True),
                        Rule(NEVER, "input or output rank above 4",
                             lambda c, n: rank_above(4)(c, n) or rank_above(4, out=True)(c, n)),
                        Rule(NEVER, "a computed new shape", lambda c, n: len(n.ins) > 1 and n.ins[1] >= 0
                             and c.tensors[n.ins[1]].value is None, beyond=True)])
def reshape(ctx, node):
    """RESHAPE to the output's static shape (a scalar is [1] in NNAPI, as the delegate declares it).
    A bool of one element (an IF condition), which NNAPI cannot RESHAPE: REDUCE_ANY over every axis
    gives [1], a LOGICAL_OR with False of the output shape broadcasts it to a higher rank."""
    out = ctx.tensors[node.outs[0]]
    if _one_bool(ctx, node):
        x = ctx.tensors[node.ins[0]]
        src = ctx.operand(node.ins[0])
        if len(x.shape) > 1:
            src = ctx.op("REDUCE_ANY", src, ctx.ivec(range(len(x.shape))), False, outputs=[(nn.bool8, (1,))])
        false = ctx.constant(np.zeros(out.shape if len(out.shape) > 1 else (1,), np.bool_), nn.bool8)
        ctx.emit("LOGICAL_OR", [src, false], node.outs[0])
        return "LOGICAL_OR" if len(x.shape) <= 1 else "REDUCE_ANY + LOGICAL_OR"
    return ctx.emit("RESHAPE", [ctx.operand(node.ins[0]), ctx.ivec(ctx.tensors[node.outs[0]].shape or [1])],
                    node.outs[0])


@maps("SQUEEZE", level=2, rules=[Rule(3, "squeezing every size-1 dimension (no squeeze_dims)",
                                      lambda c, n: not (n.options("SqueezeOptions") and
                                                        n.options("SqueezeOptions").SqueezeDimsLength()))])
def squeeze(ctx, node):
    o = node.options("SqueezeOptions")
    x = ctx.tensors[node.ins[0]]
    dims = [axis_in(d, len(x.shape), "squeeze dimension") for d in o.SqueezeDimsAsNumpy()] \
        if o is not None and o.SqueezeDimsLength() \
        else [i for i, d in enumerate(x.shape) if d == 1]
    if not dims:                                # nothing to squeeze: NNAPI wants a non-empty list here
        return ctx.emit("RESHAPE", [ctx.operand(node.ins[0]), ctx.ivec(ctx.tensors[node.outs[0]].shape)],
                        node.outs[0])
    return ctx.emit("SQUEEZE", [ctx.operand(node.ins[0]), ctx.ivec(dims)], node.outs[0])


@maps("EXPAND_DIMS", level=3, rules=[
    Rule(NEVER, "input type other than float / int32 / uint8 / int8", not_of_type(F32, F16, I32, U8, I8)),
    Rule(NEVER, "a computed axis", not_constant(1))])
def expand_dims(ctx, node):
    return ctx.emit("EXPAND_DIMS", [ctx.operand(node.ins[0]), int(ctx.scalar(node.ins[1], "the axis"))],
                    node.outs[0])


@maps("CONCATENATION", rules=[
    Rule(NEVER, "a fused activation", option("ConcatenationOptions", "FusedActivationFunction"), beyond=True),
    Rule(NEVER, "input rank above 4", rank_above(4)),
    Rule(NEVER, "input type other than float / uint8 / int8", not_of_type(F16, F32, U8, I8)),
    Rule(3, "uint8 inputs of different scales or zero points",
         lambda c, n: c.tensors[n.ins[0]].dtype == U8 and len({(c.tensors[k].scale, c.tensors[k].zp)
                                                              for k in n.ins}) > 1)])
def concatenation(ctx, node):
    o = node.options("ConcatenationOptions")
    fuse = o.FusedActivationFunction()
    if fuse not in (0, 1, 3):
        raise Unmapped("fused activation not supported by NNAPI")
    axis = int(o.Axis()) % max(1, len(ctx.tensors[node.outs[0]].shape))
    ins = [i for i in node.ins if 0 not in ctx.tensors[i].shape] or node.ins[:1]   # empty pieces add nothing
    args = [ctx.operand(i) for i in ins] + [axis]
    if fuse == 0:
        return ctx.emit("CONCATENATION", args, node.outs[0])
    tmp = ctx.op("CONCATENATION", *args, outputs=[ctx.out(node.outs[0])])
    act = "RELU" if fuse == 1 else "RELU6"
    ctx.emit(act, [tmp], node.outs[0])
    return f"CONCATENATION + {act}"


def _pack_axis_last(c, n):
    o = n.options("PackOptions")
    return o is not None and (o.Axis() == -1 or o.Axis() == len(c.tensors[n.ins[0]].shape))


@maps("PACK", rules=[
    Rule(4, "PACK (before feature level 6 lowered to RESHAPE + CONCATENATION)", beyond=True),
    Rule(6, "int32 / uint8 input", of_type(I32, U8), beyond=True),
    Rule(6, "packing along the last axis", _pack_axis_last, beyond=True)])
def pack(ctx, node):
    """Stack along a new axis: PACK at feature level 6; below, each input RESHAPEd to have that
    axis of size 1, then CONCATENATION (the delegate's lowering without NNAPI's PACK)."""
    o = node.options("PackOptions")
    out = ctx.tensors[node.outs[0]]
    axis = axis_in(o.Axis(), len(out.shape))
    if ctx.level >= 6:
        return ctx.emit("PACK", [int(axis)] + [ctx.operand(k) for k in node.ins], node.outs[0])
    pieces = []
    for k in node.ins:
        shape = list(ctx.tensors[k].shape)
        shape.insert(axis, 1)
        pieces.append(ctx.op("RESHAPE", ctx.operand(k), ctx.ivec(shape),
                             outputs=[(ctx.type(ctx.tensors[k]), tuple(shape))]))
    ctx.emit("CONCATENATION", pieces + [int(axis)], node.outs[0])
    return f"{len(node.ins)} x RESHAPE + CONCATENATION"


def _unpack_axis_last(c, n):
    o = n.options("UnpackOptions")
    return o is not None and (o.Axis() == -1 or o.Axis() == len(c.tensors[n.ins[0]].shape) - 1)


@maps("UNPACK", level=3, rules=[
    Rule(4, "UNPACK (lowered to SPLIT + RESHAPE)", beyond=True),
    Rule(NEVER, "input type other than float32 / uint8 / int8", not_of_type(F32, U8, I8), beyond=True),
    Rule(NEVER, "a rank-1 input or rank above 4", lambda c, n: not 1 < len(c.tensors[n.ins[0]].shape) <= 4,
         beyond=True),
    Rule(NEVER, "unpacking along the last axis", _unpack_axis_last, beyond=True)])
def unpack(ctx, node):
    """Split along an axis into its slices, each with the axis removed: SPLIT + RESHAPE."""
    o = node.options("UnpackOptions")
    x = ctx.tensors[node.ins[0]]
    axis = axis_in(o.Axis(), len(x.shape))
    piece_shape = list(x.shape)
    piece_shape[axis] = 1
    parts = ctx.op("SPLIT", ctx.operand(node.ins[0]), int(axis), len(node.outs),
                   outputs=[(ctx.type(x), tuple(piece_shape))] * len(node.outs))
    parts = parts if isinstance(parts, tuple) else (parts,)
    for p, k in zip(parts, node.outs):
        ctx.emit("RESHAPE", [p, ctx.ivec(ctx.tensors[k].shape)], k)
    return "SPLIT + RESHAPE"


@maps("TILE", level=3, rules=[
    Rule(NEVER, "input type other than float32 / int8 / uint8 / int32", not_of_type(F32, I8, U8, I32)),
    Rule(NEVER, "non-int32 multipliers", not_of_type(I32, which=1))])
def tile(ctx, node):
    return ctx.emit("TILE", [ctx.operand(node.ins[0]), ctx.operand(node.ins[1])], node.outs[0])


@maps("BROADCAST_TO", level=3, delegate=False, rules=[
    Rule(NEVER, "input type other than float32 / int8 / uint8 / int32", not_of_type(F32, F16, I8, U8, I32))])
def broadcast_to(ctx, node):
    """BROADCAST_TO (not a delegate builtin): RESHAPE to the output's rank, then TILE."""
    x, out = ctx.tensors[node.ins[0]], ctx.tensors[node.outs[0]]
    shape = [1] * (len(out.shape) - len(x.shape)) + list(x.shape)
    src = ctx.operand(node.ins[0])
    if tuple(shape) != tuple(x.shape):
        src = ctx.op("RESHAPE", src, ctx.ivec(shape), outputs=[(ctx.type(x), tuple(shape))])
    reps = [o // s if s else 1 for o, s in zip(out.shape, shape)]
    ctx.emit("TILE", [src, ctx.ivec(reps)], node.outs[0])
    return "TILE" if tuple(shape) == tuple(x.shape) else "RESHAPE + TILE"


@maps("TRANSPOSE", level=2, rules=[Rule(NEVER, "a computed permutation", not_constant(1))])
def transpose(ctx, node):
    perm = ctx.const(node.ins[1], "the permutation").astype(np.int32).reshape(-1)
    return ctx.emit("TRANSPOSE", [ctx.operand(node.ins[0]), ctx.ivec(perm)], node.outs[0])


def _empty_input(c, n):
    return 0 in c.tensors[n.ins[0]].shape


def _pad_value(c, n):
    return len(n.ins) > 2 and n.ins[2] >= 0


@maps("PAD", "PADV2", level=2, rules=[
    _FLOAT_OR_QUANT8, Rule(NEVER, "an input with no elements", _empty_input),
    Rule(3, "an explicit padding value (PAD_V2)", _pad_value),
    Rule(3, "non-float32 input", lambda c, n: not _pad_value(c, n) and c.tensors[n.ins[0]].dtype != F32)])
def pad(ctx, node):
    x = ctx.tensors[node.ins[0]]
    pads = ctx.const(node.ins[1], "paddings").astype(np.int32)
    args = [ctx.operand(node.ins[0]), ctx.constant(np.ascontiguousarray(pads))]
    if not _pad_value(ctx, node):
        return ctx.emit("PAD", args, node.outs[0])
    v = ctx.scalar(node.ins[2], "the padding value")
    if x.dtype in FLOAT:
        return ctx.emit("PAD_V2", args + [float(v)], node.outs[0])
    return ctx.emit("PAD_V2", args + [int(v)], node.outs[0])      # a quantized value: INT32 scalar


def _gather_chain(ctx, node, indices):
    """Below feature level 7 (no MIRROR_PAD / REVERSE): one GATHER (feature level 3) per axis
    with constant indices -- {axis: index vector} -- beyond the delegate."""
    x = ctx.tensors[node.ins[0]]
    cur, shape = ctx.operand(node.ins[0]), list(x.shape)
    axes = sorted(indices)
    for i, axis in enumerate(axes):
        shape[axis] = len(indices[axis])
        args = [cur, axis, ctx.ivec(indices[axis])]
        if i == len(axes) - 1:
            ctx.emit("GATHER", args, node.outs[0])
        else:
            cur = ctx.op("GATHER", *args, outputs=[(ctx.type(x), tuple(shape))])
    return " + ".join(["GATHER"] * len(axes))


_BELOW_7 = Rule(7, "the NNAPI operation (below, nnapi_py gathers with constant indices)", beyond=True)


@maps("MIRROR_PAD", level=3, rules=[
    _BELOW_7,
    Rule(NEVER, "input type other than float32 / uint8 / int8 / int32", not_of_type(F32, F16, U8, I8, I32)),
    Rule(NEVER, "an input with no elements", _empty_input)])
def mirror_pad(ctx, node):
    """MIRROR_PAD (feature level 7); below, a GATHER per padded axis of the reflected indices."""
    o = node.options("MirrorPadOptions")
    mode = int(o.Mode()) if o else 0                # TFLite REFLECT 0, SYMMETRIC 1 = NNAPI's codes
    pads = ctx.const(node.ins[1], "paddings").astype(np.int32)
    if ctx.level >= 7:
        return ctx.emit("MIRROR_PAD", [ctx.operand(node.ins[0]), ctx.constant(np.ascontiguousarray(pads)), mode],
                        node.outs[0])
    x = ctx.tensors[node.ins[0]]
    idx = {}
    for axis, (before, after) in enumerate(pads.reshape(-1, 2)):
        if before or after:
            n = x.shape[axis]
            i = np.arange(-int(before), n + int(after))
            period = 2 * n - (2 if mode == 0 else 0)            # reflect excludes the edge, symmetric repeats it
            i = np.mod(i, max(period, 1))
            i = np.where(i >= n, period - i - (0 if mode == 0 else 1), i)
            idx[axis] = i
    if not idx:
        return ctx.emit("RESHAPE", [ctx.operand(node.ins[0]), ctx.ivec(x.shape)], node.outs[0])
    return _gather_chain(ctx, node, idx)


@maps("REVERSE_V2", level=3, rules=[
    _BELOW_7,
    Rule(NEVER, "input type other than float32 / uint8 / int8 / int32", not_of_type(F32, F16, U8, I8, I32))])
def reverse_v2(ctx, node):
    """REVERSE (feature level 7; one axis per operation: several axes become a chain); below, a
    GATHER of the reversed indices per axis."""
    x = ctx.tensors[node.ins[0]]
    axes = sorted({axis_in(a, len(x.shape)) for a in ctx.const(node.ins[1], "the axes").reshape(-1)})
    if not axes:
        raise Unmapped("no axis to reverse")
    if ctx.level < 7:
        return _gather_chain(ctx, node, {a: np.arange(x.shape[a])[::-1] for a in axes})
    cur = ctx.operand(node.ins[0])
    for a in axes[:-1]:
        cur = ctx.op("REVERSE", cur, ctx.ivec([a]), outputs=[(ctx.type(x), x.shape)])
    ctx.emit("REVERSE", [cur, ctx.ivec([axes[-1]])], node.outs[0])
    return " + ".join(["REVERSE"] * len(axes))


@maps("SPACE_TO_DEPTH", rules=[Rule(NEVER, "input type other than float32 / uint8 / int8",
                                    not_of_type(F32, F16, U8, I8))])
def space_to_depth(ctx, node):
    o = node.options("SpaceToDepthOptions")
    return ctx.emit("SPACE_TO_DEPTH", [ctx.operand(node.ins[0]), int(o.BlockSize())], node.outs[0])


@maps("DEPTH_TO_SPACE", rules=[Rule(NEVER, "input type other than float32 / uint8 / int8",
                                    not_of_type(F32, F16, U8, I8))])
def depth_to_space(ctx, node):
    o = node.options("DepthToSpaceOptions")
    return ctx.emit("DEPTH_TO_SPACE", [ctx.operand(node.ins[0]), o.BlockSize()], node.outs[0])


@maps("SPACE_TO_BATCH_ND", level=2)
def space_to_batch_nd(ctx, node):
    return ctx.emit("SPACE_TO_BATCH_ND", [ctx.operand(k) for k in node.ins[:3]], node.outs[0])


def _crops(c, n):
    v = c.tensors[n.ins[2]].value
    return v is None or bool(np.any(v))


@maps("BATCH_TO_SPACE_ND", level=2, rules=[Rule(NEVER, "non-zero crops", _crops, beyond=True)])
def batch_to_space_nd(ctx, node):
    """BATCH_TO_SPACE_ND; crops (NNAPI has none) become a STRIDED_SLICE of its result (feature
    level 2, like BATCH_TO_SPACE_ND)."""
    crops = ctx.const(node.ins[2], "the crops").astype(np.int64).reshape(-1, 2)
    if not np.any(crops):
        return ctx.emit("BATCH_TO_SPACE_ND", [ctx.operand(node.ins[0]), ctx.operand(node.ins[1])], node.outs[0])
    out = ctx.tensors[node.outs[0]]
    full = list(out.shape)
    for i, (a, b) in enumerate(crops):
        full[1 + i] += int(a + b)
    y = ctx.op("BATCH_TO_SPACE_ND", ctx.operand(node.ins[0]), ctx.operand(node.ins[1]),
               outputs=[(ctx.type(out), tuple(full))])
    begin = [0] + [int(a) for a, _ in crops] + [0] * (len(full) - 1 - len(crops))
    end = [b + n for b, n in zip(begin, out.shape)]
    ctx.emit("STRIDED_SLICE", [y, ctx.ivec(begin), ctx.ivec(end), ctx.ivec([1] * len(end)), 0, 0, 0], node.outs[0])
    return "BATCH_TO_SPACE_ND + STRIDED_SLICE"


def _resize_rules(cls, level):
    return [Rule(NEVER, "input rank other than 4", lambda c, n: len(c.tensors[n.ins[0]].shape) != 4),
            _FLOAT_OR_QUANT8, Rule(NEVER, "a computed size", not_constant(1)),
            Rule(4, "align_corners / half_pixel_centers",
                 lambda c, n: (lambda o: o is not None and (o.AlignCorners() or o.HalfPixelCenters()))(n.options(cls))),
            Rule(3, "output width different from height",
                 lambda c, n: c.tensors[n.outs[0]].shape[1] != c.tensors[n.outs[0]].shape[2]),
            Rule(3, "non-float32 input", not_of_type(F32))][:(6 if level == 1 else 4)]


def _resize(nnapi_op, cls, ctx, node):
    o = node.options(cls)
    h, w = (int(v) for v in ctx.const(node.ins[1], "the output size").reshape(-1)[:2])
    align = bool(o.AlignCorners()) if o else False
    half = bool(o.HalfPixelCenters()) if o else False
    args = [ctx.operand(node.ins[0]), w, h]
    if align or half or nnapi_op == "RESIZE_NEAREST_NEIGHBOR":
        args += [False]
    if align or half:
        args += [align, half]
    return ctx.emit(nnapi_op, args, node.outs[0])


@maps("RESIZE_BILINEAR", rules=_resize_rules("ResizeBilinearOptions", 1))
def resize_bilinear(ctx, node):
    return _resize("RESIZE_BILINEAR", "ResizeBilinearOptions", ctx, node)


@maps("RESIZE_NEAREST_NEIGHBOR", level=3, rules=_resize_rules("ResizeNearestNeighborOptions", 3))
def resize_nearest_neighbor(ctx, node):
    return _resize("RESIZE_NEAREST_NEIGHBOR", "ResizeNearestNeighborOptions", ctx, node)


@maps("FILL", level=4, rules=[Rule(NEVER, "computed dimensions", not_constant(0)),
                              Rule(NEVER, "value type other than float32 / int32 / int64",
                                   not_of_type(F32, I32, np.int64, which=1))])
def fill(ctx, node):
    """FILL (folded at load when the value is constant too, see fold.py)."""
    dims = ctx.const(node.ins[0], "the dimensions").astype(np.int32).reshape(-1)
    v = ctx.tensors[node.ins[1]]
    if v.value is None:
        raise Unmapped("a computed fill value (NNAPI takes a scalar operand)")
    val = v.value.reshape(-1)[0]
    val = float(val) if v.dtype in FLOAT else int(val)
    return ctx.emit("FILL", [ctx.ivec(dims), val], node.outs[0])


@maps("SHAPE", delegate=False)
def shape(ctx, node):
    raise Unmapped("the input shape is not static")


@maps("RANGE", delegate=False)
def range_(ctx, node):
    raise Unmapped("start / limit / delta must be constant")

