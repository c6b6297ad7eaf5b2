"""Quantization, dequantization, casts and weight formats (constant cases fold at load: fold.py)."""
from __future__ import annotations

import numpy as np

from .base import F16, F32, FLOAT32, I8, I32, NEVER, U8, Rule, Unmapped, maps, not_of_type, of_type


def _int8_zp(c, n):
    t = c.tensors[n.ins[0]]
    return t.dtype == I8 and t.zp != 0


@maps("DEQUANTIZE", rules=[
    Rule(4, "a computed float16 input", lambda c, n: c.tensors[n.ins[0]].dtype == F16
         and c.tensors[n.ins[0]].value is None),
    Rule(3, "int8 input", of_type(I8)), Rule(4, "int8 input with a zero point", _int8_zp),
    Rule(NEVER, "input type other than uint8 / int8 / float16", not_of_type(U8, I8, F16))])
def dequantize(ctx, node):
    x = ctx.tensors[node.ins[0]]
    if x.dtype == F16:                          # float16 -> float32: NNAPI CAST
        return ctx.emit("CAST", [ctx.operand(node.ins[0])], node.outs[0])
    return ctx.emit("DEQUANTIZE", [ctx.operand(node.ins[0])], node.outs[0])


@maps("QUANTIZE", level=3, rules=[
    Rule(NEVER, "input type other than float32 / uint8 / int8", not_of_type(F32, F16, U8, I8)),
    Rule(4, "int8 output", of_type(I8, out=True))])
def quantize(ctx, node):
    src = ctx.tensors[node.ins[0]]
    if src.dtype in (np.float32, np.float16):
        return ctx.emit("QUANTIZE", [ctx.operand(node.ins[0])], node.outs[0])
    # requantization (int8 -> uint8, ...): DEQUANTIZE then QUANTIZE, as the delegate does
    f = ctx.op("DEQUANTIZE", ctx.operand(node.ins[0]), outputs=[(FLOAT32, src.shape)])
    ctx.emit("QUANTIZE", [f], node.outs[0])
    return "DEQUANTIZE + QUANTIZE"


_CAST_TYPES = (F32, I32, U8)


@maps("CAST", level=3, rules=[
    Rule(4, "int8 input or output", lambda c, n: c.tensors[n.ins[0]].dtype == I8 or c.tensors[n.outs[0]].dtype == I8),
    Rule(NEVER, "types other than float32 / int32 / uint8 / int8",
         lambda c, n: not_of_type(*_CAST_TYPES, I8)(c, n) or not_of_type(*_CAST_TYPES, I8, out=True)(c, n))])
def cast(ctx, node):
    return ctx.emit("CAST", [ctx.operand(node.ins[0])], node.outs[0])


@maps("DENSIFY", rules=[Rule(4, "DENSIFY of constant sparse weights (nnapi_py densifies at load)", beyond=True)])
def densify(ctx, node):
    raise Unmapped("only constant sparse tensors are densified")
