"""Activations and normalising functions."""
from __future__ import annotations

import numpy as np

from .. import nn
from .base import F32, FLOAT, I8, NEVER, U8, Rule, Unmapped, maps, not_of_type, of_type, option, rank_above

_FLOAT_OR_QUANT8 = Rule(NEVER, "input type other than float / uint8 / int8", not_of_type(np.float32, np.float16, U8, I8))


@maps("RELU", "RELU6", "LOGISTIC", rules=[_FLOAT_OR_QUANT8])
def activation(ctx, node):
    return ctx.emit(node.name, [ctx.operand(node.ins[0])], node.outs[0])


@maps("TANH", rules=[Rule(3, "quantized input", of_type(U8, I8)), _FLOAT_OR_QUANT8])
def tanh(ctx, node):
    return ctx.emit("TANH", [ctx.operand(node.ins[0])], node.outs[0])


@maps("RELU_N1_TO_1", rules=[_FLOAT_OR_QUANT8])
def relu_n1_to_1(ctx, node):
    return ctx.emit("RELU1", [ctx.operand(node.ins[0])], node.outs[0])


@maps("HARD_SWISH", rules=[_FLOAT_OR_QUANT8, Rule(4, "quantized HARD_SWISH (below, only float is decomposed)",
                                                   of_type(U8, I8))])
def hard_swish(ctx, node):
    """HARD_SWISH (feature level 4); below, as the delegate does for older releases, in basic
    operations: x * RELU6(x + 3) / 6."""
    if ctx.level >= 4:
        return ctx.emit("HARD_SWISH", [ctx.operand(node.ins[0])], node.outs[0])
    x = ctx.tensors[node.ins[0]]
    typ = ctx.out(node.outs[0])
    three = ctx.constant(np.full((1,), 3, x.dtype), ctx.type(x))
    sixth = ctx.constant(np.full((1,), 1 / 6, x.dtype), ctx.type(x))
    r = ctx.op("RELU6", ctx.op("ADD", ctx.operand(node.ins[0]), three, 0, outputs=[typ]), outputs=[typ])
    p = ctx.op("MUL", ctx.operand(node.ins[0]), r, 0, outputs=[typ])
    ctx.emit("MUL", [p, sixth, 0], node.outs[0])
    return "ADD + RELU6 + MUL + MUL"


@maps("ELU", level=4, rules=[Rule(NEVER, "non-float32 input", not_of_type(F32))])
def elu(ctx, node):
    x = ctx.tensors[node.ins[0]]
    return ctx.emit("ELU", [ctx.operand(node.ins[0]), np.array(1.0, x.dtype).item()], node.outs[0])


@maps("PRELU", level=3, rules=[Rule(NEVER, "input type other than float32 / uint8 / int8",
                                    not_of_type(F32, U8, I8))])
def prelu(ctx, node):
    return ctx.emit("PRELU", [ctx.operand(node.ins[0]), ctx.operand(node.ins[1])], node.outs[0])


@maps("LEAKY_RELU", level=3, rules=[Rule(NEVER, "input type other than float32 / uint8 / int8",
                                         not_of_type(F32, U8, I8))])
def leaky_relu(ctx, node):
    """PRELU with a constant slope (NNAPI has no LEAKY_RELU); quantized: the slope is the
    quantized value 1 with scale alpha, as the delegate writes it."""
    o = node.options("LeakyReluOptions")
    x = ctx.tensors[node.ins[0]]
    alpha = float(o.Alpha()) if o else 0.2
    if x.dtype in FLOAT:
        a = ctx.constant(np.array([alpha], x.dtype), ctx.type(x))
    elif alpha <= 0:
        raise Unmapped("a quantized LEAKY_RELU with a slope <= 0")
    else:
        typ = nn.quant8_asymm(alpha, 0) if x.dtype == U8 else nn.quant8_asymm_signed(alpha, 0)
        a = ctx.constant(np.array([1], x.dtype), typ)
    return ctx.emit("PRELU", [ctx.operand(node.ins[0]), a], node.outs[0])


@maps("SOFTMAX", rules=[_FLOAT_OR_QUANT8, Rule(NEVER, "input rank above 4", rank_above(4)),
                        Rule(3, "input rank other than 2 or 4",
                             lambda c, n: len(c.tensors[n.ins[0]].shape) not in (2, 4))])
def softmax(ctx, node):
    o = node.options("SoftmaxOptions")
    return ctx.emit("SOFTMAX", [ctx.operand(node.ins[0]), float(o.Beta()) if o else 1.0], node.outs[0])


@maps("LOG_SOFTMAX", level=3, rules=[Rule(NEVER, "non-float32 input", not_of_type(F32))])
def log_softmax(ctx, node):
    return ctx.emit("LOG_SOFTMAX", [ctx.operand(node.ins[0]), 1.0, -1], node.outs[0])


@maps("L2_NORMALIZATION", rules=[
    Rule(NEVER, "a fused activation", option("L2NormOptions", "FusedActivationFunction")),
    Rule(3, "non-float input", not_of_type(F32)),
    Rule(3, "input rank other than 4", lambda c, n: len(c.tensors[n.ins[0]].shape) != 4)])
def l2_normalization(ctx, node):
    return ctx.emit("L2_NORMALIZATION", [ctx.operand(node.ins[0])], node.outs[0])


@maps("LOCAL_RESPONSE_NORMALIZATION")
def local_response_normalization(ctx, node):
    o = node.options("LocalResponseNormalizationOptions")
    return ctx.emit("LOCAL_RESPONSE_NORMALIZATION", [ctx.operand(node.ins[0]), int(o.Radius()), float(o.Bias()),
                                                     float(o.Alpha()), float(o.Beta())], node.outs[0])
