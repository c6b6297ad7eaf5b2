"""Reductions."""
from __future__ import annotations

import numpy as np

from .base import maps


@maps("MEAN")
def mean(ctx, node):
    o = node.options("ReducerOptions")
    axes = ctx.const(node.ins[1], "the axes").astype(np.int32).reshape(-1)
    keep = int(bool(o.KeepDims())) if o else 0
    return ctx.emit("MEAN", [ctx.operand(node.ins[0]), ctx.ivec(axes), keep], node.outs[0])
