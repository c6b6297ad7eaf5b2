"""Activations and normalising functions."""
from __future__ import annotations

import numpy as np

from .base import maps


@maps("RELU", "RELU6", "LOGISTIC", "TANH", "HARD_SWISH", "ELU")
def activation(ctx, node):
    return ctx.emit(node.name, [ctx.operand(node.ins[0])], node.outs[0])


@maps("RELU_N1_TO_1")
def relu_n1_to_1(ctx, node):
    return ctx.emit("RELU1", [ctx.operand(node.ins[0])], node.outs[0])


@maps("PRELU")
def prelu(ctx, node):
    return ctx.emit("PRELU", [ctx.operand(node.ins[0]), ctx.operand(node.ins[1])], node.outs[0])


@maps("LEAKY_RELU")
def leaky_relu(ctx, node):
    """PRELU with a constant slope (NNAPI has no LEAKY_RELU)."""
    o = node.options("LeakyReluOptions")
    x = ctx.tensors[node.ins[0]]
    alpha = ctx.constant(np.array([o.Alpha()], np.float32).astype(x.dtype), ctx.type(x))
    return ctx.emit("PRELU", [ctx.operand(node.ins[0]), alpha], node.outs[0])


@maps("SOFTMAX")
def softmax(ctx, node):
    o = node.options("SoftmaxOptions")
    return ctx.emit("SOFTMAX", [ctx.operand(node.ins[0]), float(o.Beta()) if o else 1.0], node.outs[0])
