"""Reductions."""
from __future__ import annotations

import numpy as np

from .. import nn
from .base import F32, I8, NEVER, QUANTIZED, U8, Rule, maps, not_constant, not_of_type, rank_above

_SCALAR_OUT = Rule(NEVER, "a scalar output", lambda c, n: c.tensors[n.outs[0]].shape == ())
_AXES = Rule(NEVER, "computed axes", not_constant(1))


def _axes(ctx, node):
    x = ctx.tensors[node.ins[0]]
    axes = ctx.const(node.ins[1], "the axes").astype(np.int64).reshape(-1)
    return ctx.ivec(sorted({int(a) % max(1, len(x.shape)) for a in axes}))


def _keep(node):
    o = node.options("ReducerOptions")
    return bool(o.KeepDims()) if o else False


@maps("MEAN", level=2, rules=[
    Rule(NEVER, "input type other than float32 / uint8 / int8", not_of_type(F32, U8, I8)),
    QUANTIZED, _SCALAR_OUT, Rule(NEVER, "input rank above 4", rank_above(4)), _AXES])
def mean(ctx, node):
    """NNAPI MEAN keeps the input's scale and zero point: a quantized MEAN whose output has others
    writes an intermediate with the input's and requantizes it by an ADD of a zero (TFLite's
    delegate: IsMeanWithDifferentInputOutputQuantization, AppendRequantize)."""
    x, y = ctx.tensors[node.ins[0]], ctx.tensors[node.outs[0]]
    args = [ctx.operand(node.ins[0]), _axes(ctx, node), int(_keep(node))]
    if x.dtype not in (U8, I8) or (x.scale == y.scale and x.zp == y.zp):
        return ctx.emit("MEAN", args, node.outs[0])
    q = nn.quant8_asymm if x.dtype == U8 else nn.quant8_asymm_signed
    mid = ctx.op("MEAN", *args, outputs=[(q(x.scale, x.zp), y.shape or (1,))])
    zero = ctx.constant(np.zeros(1, x.dtype), q(1.0, 0))
    ctx.emit("ADD", [mid, zero, 0], node.outs[0])
    return "MEAN + ADD (requantized to the output's scale, as the delegate does)"


_REDUCE = {"SUM": "REDUCE_SUM", "REDUCE_PROD": "REDUCE_PROD", "REDUCE_MAX": "REDUCE_MAX",
           "REDUCE_MIN": "REDUCE_MIN", "REDUCE_ANY": "REDUCE_ANY", "REDUCE_ALL": "REDUCE_ALL"}


def _reduce(ctx, node):
    return ctx.emit(_REDUCE[node.name], [ctx.operand(node.ins[0]), _axes(ctx, node), _keep(node)], node.outs[0])


@maps("SUM", "REDUCE_PROD", level=3, rules=[_SCALAR_OUT, _AXES,
                                            Rule(NEVER, "non-float32 input", not_of_type(F32, np.float16))])
def reduce_sum_prod(ctx, node):
    return _reduce(ctx, node)


@maps("REDUCE_MAX", "REDUCE_MIN", level=3, rules=[
    Rule(NEVER, "input type other than float32 / uint8 / int8", not_of_type(F32, np.float16, U8, I8)),
    Rule(NEVER, "a scalar input", lambda c, n: c.tensors[n.ins[0]].shape == ()), _AXES])
def reduce_max_min(ctx, node):
    return _reduce(ctx, node)


@maps("REDUCE_ANY", level=3, rules=[_SCALAR_OUT, _AXES])
def reduce_any(ctx, node):
    return _reduce(ctx, node)


@maps("REDUCE_ALL", level=3, delegate=False, rules=[_AXES])
def reduce_all(ctx, node):
    """NNAPI's REDUCE_ALL (not a delegate builtin)."""
    return _reduce(ctx, node)
