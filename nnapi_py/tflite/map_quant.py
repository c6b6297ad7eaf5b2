"""Quantization, dequantization, casts and weight formats (constant cases fold at load: fold.py)."""
from __future__ import annotations

import numpy as np

from .base import FLOAT32, Unmapped, maps


@maps("DEQUANTIZE")
def dequantize(ctx, node):
    return ctx.emit("DEQUANTIZE", [ctx.operand(node.ins[0])], node.outs[0])


@maps("QUANTIZE")
def quantize(ctx, node):
    src = ctx.tensors[node.ins[0]]
    if src.dtype in (np.float32, np.float16):
        return ctx.emit("QUANTIZE", [ctx.operand(node.ins[0])], node.outs[0])
    # requantization (int8 -> uint8, ...): through float, exact when only the zero point moves
    f = ctx.op("DEQUANTIZE", ctx.operand(node.ins[0]), outputs=[(FLOAT32, src.shape)])
    ctx.emit("QUANTIZE", [f], node.outs[0])
    return "DEQUANTIZE + QUANTIZE"


@maps("CAST")
def cast(ctx, node):
    return ctx.emit("CAST", [ctx.operand(node.ins[0])], node.outs[0])


@maps("DENSIFY")
def densify(ctx, node):
    raise Unmapped("only constant sparse tensors are densified")
