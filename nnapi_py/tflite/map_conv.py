"""Convolutions, fully-connected layers and pooling."""
from __future__ import annotations

from .base import PADDING, fuse_code, maps


def _dilation(o):
    if o.DilationWFactor() != 1 or o.DilationHFactor() != 1:
        return [False, o.DilationWFactor(), o.DilationHFactor()]
    return []


@maps("CONV_2D")
def conv_2d(ctx, node):
    o = node.options("Conv2DOptions")
    w = ctx.tensors[node.ins[1]]
    fuse = fuse_code(o)
    args = [ctx.operand(node.ins[0]), ctx.operand(node.ins[1]), ctx.bias(node, w.shape[0]),
            PADDING[o.Padding()], o.StrideW(), o.StrideH(), fuse]
    return ctx.emit("CONV_2D", args + _dilation(o), node.outs[0])


@maps("DEPTHWISE_CONV_2D")
def depthwise_conv_2d(ctx, node):
    o = node.options("DepthwiseConv2DOptions")
    w = ctx.tensors[node.ins[1]]
    fuse = fuse_code(o)
    x = ctx.tensors[node.ins[0]]
    mult = max(1, w.shape[3] // max(1, x.shape[3])) if len(x.shape) == 4 else o.DepthMultiplier()
    args = [ctx.operand(node.ins[0]), ctx.operand(node.ins[1]), ctx.bias(node, w.shape[3]),
            PADDING[o.Padding()], o.StrideW(), o.StrideH(), mult, fuse]
    return ctx.emit("DEPTHWISE_CONV_2D", args + _dilation(o), node.outs[0])


@maps("FULLY_CONNECTED")
def fully_connected(ctx, node):
    o = node.options("FullyConnectedOptions")
    fuse = fuse_code(o)
    w = ctx.tensors[node.ins[1]]
    return ctx.emit("FULLY_CONNECTED", [ctx.operand(node.ins[0]), ctx.operand(node.ins[1]),
                                        ctx.bias(node, w.shape[0]), fuse], node.outs[0])


def _pool(nnapi_op, ctx, node):
    o = node.options("Pool2DOptions")
    fuse = fuse_code(o)
    return ctx.emit(nnapi_op, [ctx.operand(node.ins[0]), PADDING[o.Padding()], o.StrideW(), o.StrideH(),
                               o.FilterWidth(), o.FilterHeight(), fuse], node.outs[0])


@maps("MAX_POOL_2D")
def max_pool_2d(ctx, node):
    return _pool("MAX_POOL_2D", ctx, node)


@maps("AVERAGE_POOL_2D")
def average_pool_2d(ctx, node):
    return _pool("AVERAGE_POOL_2D", ctx, node)
