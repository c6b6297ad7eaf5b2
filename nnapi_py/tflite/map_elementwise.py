"""Elementwise arithmetic, comparisons, logic and unary math."""
from __future__ import annotations

from .base import fuse_code, maps

_BINARY_OPTIONS = {"ADD": "AddOptions", "MUL": "MulOptions", "SUB": "SubOptions", "DIV": "DivOptions"}


@maps(*_BINARY_OPTIONS)
def arithmetic(ctx, node):
    fuse = fuse_code(node.options(_BINARY_OPTIONS[node.name]))
    return ctx.emit(node.name, [ctx.operand(node.ins[0]), ctx.operand(node.ins[1]), fuse], node.outs[0])


@maps("MAXIMUM", "MINIMUM", "POW", "EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL",
      "LOGICAL_AND", "LOGICAL_OR")
def plain_binary(ctx, node):
    return ctx.emit(node.name, [ctx.operand(node.ins[0]), ctx.operand(node.ins[1])], node.outs[0])


@maps("ABS", "EXP", "LOG", "SQRT", "RSQRT", "SIN", "NEG", "FLOOR", "LOGICAL_NOT")
def unary(ctx, node):
    return ctx.emit(node.name, [ctx.operand(node.ins[0])], node.outs[0])


@maps("SQUARED_DIFFERENCE")
def squared_difference(ctx, node):
    """(a - b)^2 as SUB then MUL, as the delegate lowers it."""
    out = node.outs[0]
    d = ctx.op("SUB", ctx.operand(node.ins[0]), ctx.operand(node.ins[1]), 0, outputs=[ctx.out(out)])
    ctx.emit("MUL", [d, d, 0], out)
    return "SUB + MUL"


@maps("SELECT", "SELECT_V2", delegate=False)
def select(ctx, node):
    """SELECT with broadcasting: each operand first BROADCAST (as TILE of a RESHAPE) to the
    output shape when it differs."""
    out = ctx.tensors[node.outs[0]]
    args = []
    for k in node.ins:
        t = ctx.tensors[k]
        o = ctx.operand(k)
        if tuple(t.shape) != tuple(out.shape):
            shape = [1] * (len(out.shape) - len(t.shape)) + list(t.shape)
            o = ctx.op("RESHAPE", o, ctx.ivec(shape), outputs=[(ctx.type(t), tuple(shape))])
            reps = [a // b if b else 1 for a, b in zip(out.shape, shape)]
            o = ctx.op("TILE", o, ctx.ivec(reps), outputs=[(ctx.type(t), tuple(out.shape))])
        args.append(o)
    ctx.emit("SELECT", args, node.outs[0])
    return "SELECT (operands broadcast with RESHAPE + TILE)"

