"""Elementwise arithmetic, comparisons, logic and unary math."""
from __future__ import annotations

import math

import numpy as np

from .. import nn
from .base import (BOOL, F32, FLOAT, I8, I32, INT32, NEVER, QUANTIZED, U8, Rule, all_of, fuse_code, maps,
                   not_of_type, of_type, option, rank_above)

_OPTIONS = {"ADD": "AddOptions", "MUL": "MulOptions", "SUB": "SubOptions", "DIV": "DivOptions"}
_RANK4 = Rule(NEVER, "input rank above 4", lambda c, n: len(c.tensors[n.ins[0]].shape) > 4
              or len(c.tensors[n.ins[1]].shape) > 4)


def _int32_activation(name):
    return Rule(NEVER, "int32 with a fused activation", all_of(of_type(I32), option(_OPTIONS[name],
                                                                                    "FusedActivationFunction")))


def _arithmetic(ctx, node):
    fuse = fuse_code(node.options(_OPTIONS[node.name]))
    return ctx.emit(node.name, [ctx.operand(node.ins[0]), ctx.operand(node.ins[1]), fuse], node.outs[0])


@maps("ADD", rules=[INT32, _int32_activation("ADD"), _RANK4])
def add(ctx, node):
    return _arithmetic(ctx, node)


@maps("MUL", rules=[INT32, _int32_activation("MUL"), _RANK4])
def mul(ctx, node):
    return _arithmetic(ctx, node)


@maps("SUB", level=2, rules=[QUANTIZED, INT32, _int32_activation("SUB"), _RANK4])
def sub(ctx, node):
    return _arithmetic(ctx, node)


@maps("DIV", level=2, rules=[Rule(NEVER, "non-float32 input", not_of_type(F32)), _RANK4])
def div(ctx, node):
    return _arithmetic(ctx, node)


_FLOAT_ONLY = Rule(NEVER, "non-float input", not_of_type(*FLOAT))


@maps("MAXIMUM", "MINIMUM", level=3, rules=[
    Rule(NEVER, "input type other than float32 / uint8 / int8 / int32", not_of_type(F32, U8, I8, I32)),
    Rule(NEVER, "a scalar input that is not constant",
         lambda c, n: any(c.tensors[k].shape == () and c.tensors[k].value is None for k in n.ins[:2]), beyond=True)])
def min_max(ctx, node):
    return ctx.emit(node.name, [ctx.operand(node.ins[0]), ctx.operand(node.ins[1])], node.outs[0])


@maps("POW", level=3, rules=[_FLOAT_ONLY])
def pow_(ctx, node):
    return ctx.emit("POW", [ctx.operand(node.ins[0]), ctx.operand(node.ins[1])], node.outs[0])


@maps("EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL", level=3, rules=[
    Rule(NEVER, "input type other than float32 / uint8 / int8 / bool / int32", not_of_type(F32, U8, I8, BOOL, I32))])
def comparison(ctx, node):
    return ctx.emit(node.name, [ctx.operand(node.ins[0]), ctx.operand(node.ins[1])], node.outs[0])


@maps("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", level=3, rules=[Rule(NEVER, "non-bool input", not_of_type(BOOL))])
def logical(ctx, node):
    return ctx.emit(node.name, [ctx.operand(k) for k in node.ins], node.outs[0])


@maps("ABS", "EXP", "LOG", "SQRT", "SIN", level=3, rules=[_FLOAT_ONLY])
def unary(ctx, node):
    return ctx.emit(node.name, [ctx.operand(node.ins[0])], node.outs[0])


@maps("RSQRT", level=3, rules=[Rule(7, "quantized input", of_type(U8, I8))])
def rsqrt(ctx, node):
    return ctx.emit("RSQRT", [ctx.operand(node.ins[0])], node.outs[0])


@maps("NEG", level=3, rules=[Rule(NEVER, "input type other than float32 / int32", not_of_type(F32, I32))])
def neg(ctx, node):
    return ctx.emit("NEG", [ctx.operand(node.ins[0])], node.outs[0])


@maps("SQUARE", level=3, delegate=False, rules=[Rule(NEVER, "non-float input", not_of_type(*FLOAT))])
def square(ctx, node):
    """x * x (TFLite's SQUARE; not a delegate builtin)."""
    x = ctx.operand(node.ins[0])
    return ctx.emit("MUL", [x, x, 0], node.outs[0])


@maps("FLOOR_DIV", level=2, delegate=False, rules=[Rule(NEVER, "non-float input", not_of_type(*FLOAT))])
def floor_div(ctx, node):
    """floor(a / b) for floats: DIV + FLOOR (not a delegate builtin)."""
    d = ctx.op("DIV", ctx.operand(node.ins[0]), ctx.operand(node.ins[1]), 0, outputs=[ctx.out(node.outs[0])])
    ctx.emit("FLOOR", [d], node.outs[0])
    return "DIV + FLOOR"


@maps("FLOOR")
def floor(ctx, node):
    return ctx.emit("FLOOR", [ctx.operand(node.ins[0])], node.outs[0])


@maps("COS", level=3, rules=[_FLOAT_ONLY])
def cos(ctx, node):
    """cos(x) = sin(pi/2 - x): SUB from a constant, then SIN (the delegate's lowering)."""
    x = ctx.tensors[node.ins[0]]
    half_pi = ctx.constant(np.full((1,), math.pi / 2, x.dtype), ctx.type(x))
    d = ctx.op("SUB", half_pi, ctx.operand(node.ins[0]), 0, outputs=[ctx.out(node.outs[0])])
    ctx.emit("SIN", [d], node.outs[0])
    return "SUB + SIN"


@maps("SQUARED_DIFFERENCE", level=2, rules=[
    Rule(3, "uint8 input", of_type(U8)), Rule(4, "int8 / int32 input", of_type(I8, I32)),
    Rule(NEVER, "input rank above 4", rank_above(4))])
def squared_difference(ctx, node):
    """(a - b)^2 as SUB then MUL, as the delegate lowers it (a quantized difference gets the
    delegate's intermediate scale 2 sqrt(max output) / 254)."""
    out = ctx.tensors[node.outs[0]]
    a = ctx.tensors[node.ins[0]]
    typ = ctx.out(node.outs[0])
    if a.dtype in (U8, I8):
        hi = (255 if a.dtype == U8 else 127) - out.zp
        scale = 2.0 * math.sqrt(hi * out.scale) / 254.0
        typ = ((nn.quant8_asymm(scale, 128) if a.dtype == U8 else nn.quant8_asymm_signed(scale, 0)), out.shape)
    d = ctx.op("SUB", ctx.operand(node.ins[0]), ctx.operand(node.ins[1]), 0, outputs=[typ])
    ctx.emit("MUL", [d, d, 0], node.outs[0])
    return "SUB + MUL"


@maps("SELECT", level=3, rules=[
    Rule(NEVER, "value type other than float32 / int32 / uint8 / int8", not_of_type(F32, I32, U8, I8, which=1)),
    Rule(NEVER, "condition and values of different shapes",
         lambda c, n: len({tuple(c.tensors[k].shape) for k in n.ins}) > 1, beyond=True)])
def select(ctx, node):
    return _select(ctx, node)


@maps("SELECT_V2", level=3, delegate=False)
def select_v2(ctx, node):
    return _select(ctx, node)


def _select(ctx, node):
    """SELECT with broadcasting: each operand first BROADCAST (as TILE of a RESHAPE) to the
    output shape when it differs."""
    out = ctx.tensors[node.outs[0]]
    args = []
    for k in node.ins:
        t = ctx.tensors[k]
        o = ctx.operand(k)
        if tuple(t.shape) != tuple(out.shape) and t.dtype == BOOL:     # (no RESHAPE / TILE of BOOL8)
            false = ctx.constant(np.zeros(out.shape, np.bool_), nn.bool8)
            o = ctx.op("LOGICAL_OR", o, false, outputs=[(nn.bool8, tuple(out.shape))])
        elif tuple(t.shape) != tuple(out.shape):
            shape = [1] * (len(out.shape) - len(t.shape)) + list(t.shape)
            o = ctx.op("RESHAPE", o, ctx.ivec(shape), outputs=[(ctx.type(t), tuple(shape))])
            reps = [a // b if b else 1 for a, b in zip(out.shape, shape)]
            o = ctx.op("TILE", o, ctx.ivec(reps), outputs=[(ctx.type(t), tuple(out.shape))])
        args.append(o)
    ctx.emit("SELECT", args, node.outs[0])
    return "SELECT" if all(tuple(ctx.tensors[k].shape) == tuple(out.shape) for k in node.ins) else \
        "SELECT (operands broadcast: RESHAPE + TILE, a condition LOGICAL_OR)"

