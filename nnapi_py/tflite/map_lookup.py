"""Lookups and hashing: EMBEDDING_LOOKUP, HASHTABLE_LOOKUP, LSH_PROJECTION."""
from __future__ import annotations

import numpy as np

from .. import nn
from .base import F32, NEVER, Rule, maps, not_of_type, option


@maps("EMBEDDING_LOOKUP", rules=[Rule(NEVER, "non-float32 values", not_of_type(F32, which=1))])
def embedding_lookup(ctx, node):
    return ctx.emit("EMBEDDING_LOOKUP", [ctx.operand(node.ins[0]), ctx.operand(node.ins[1])], node.outs[0])


@maps("HASHTABLE_LOOKUP", rules=[Rule(NEVER, "non-float32 output", not_of_type(F32, out=True))])
def hashtable_lookup(ctx, node):
    """Outputs: the values found and the hits (uint8 0 / 1: NNAPI's TENSOR_QUANT8_ASYMM, scale 1)."""
    out, hits = node.outs[0], node.outs[1]
    o, h = ctx.op("HASHTABLE_LOOKUP", *[ctx.operand(k) for k in node.ins[:3]],
                  outputs=[ctx.out(out), (nn.quant8_asymm(1.0, 0), ctx.tensors[hits].shape)],
                  names=[ctx.tensors[out].name, ctx.tensors[hits].name])
    ctx.bind(out, o)
    ctx.bind(hits, h)
    return "HASHTABLE_LOOKUP"


_SPARSE = 1                                     # LSHProjectionType SPARSE (DENSE 2)


@maps("LSH_PROJECTION", rules=[
    Rule(3, "sparse projection", option("LSHProjectionOptions", "Type", lambda t: t == _SPARSE)),
    Rule(NEVER, "sparse projection with weights",
         lambda c, n: (lambda o: o is not None and o.Type() == _SPARSE)(n.options("LSHProjectionOptions"))
         and len(n.ins) > 2 and n.ins[2] >= 0)])
def lsh_projection(ctx, node):
    """TFLite (hash, input[, weight]) -> NNAPI (hash, lookup, weight, type); NNAPI's sparse type is 3."""
    o = node.options("LSHProjectionOptions")
    kind = int(o.Type()) if o else 2
    x = ctx.tensors[node.ins[1]]
    if len(node.ins) > 2 and node.ins[2] >= 0:
        weight = ctx.operand(node.ins[2])
    else:
        weight = ctx.constant(np.ones(x.shape[0], np.float32))
    return ctx.emit("LSH_PROJECTION", [ctx.operand(node.ins[0]), ctx.operand(node.ins[1]), weight,
                                       3 if kind == _SPARSE else kind], node.outs[0])
