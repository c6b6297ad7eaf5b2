"""Load-time folding: a node whose outputs are known when the model is loaded is evaluated here
with numpy and its outputs become constants; it never reaches NNAPI.  This is constant
evaluation on load (shapes, index arithmetic, weight formats), not a kernel engine: it runs
once per model, on constants only.

FOLDS maps a builtin to fold(ctx, node) -> [numpy value per output] or None (cannot fold this
node: it is then mapped).  The loader (model.py) tries the fold before the mapping, node by
node in order, so folded values feed later folds.
"""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np

FOLDS: Dict[str, Callable] = {}


def folds(*names):
    def deco(fn):
        for n in names:
            FOLDS[n] = fn
        return fn
    return deco


def values(ctx, node):
    """The constant values of the node's inputs (None for an absent optional input), or None
    when one is not constant."""
    out = []
    for k in node.ins:
        if k < 0:
            out.append(None)
            continue
        v = ctx.tensors[k].value
        if v is None or ctx.tensors[k].sparsity is not None:
            return None
        out.append(v)
    return out


def out_dtype(ctx, node, i=0):
    return ctx.tensors[node.outs[i]].dtype


@folds("SHAPE")
def _shape(ctx, node):
    x = ctx.tensors[node.ins[0]]
    if not x.shape or 0 in x.shape or -1 in x.signature:
        return None
    return [np.array(x.shape, out_dtype(ctx, node) or np.int32)]


@folds("RANGE")
def _range(ctx, node):
    v = values(ctx, node)
    if v is None:
        return None
    start, limit, delta = (a.reshape(-1)[0] for a in v)
    return [np.arange(start, limit, delta).astype(out_dtype(ctx, node))]


@folds("CAST")
def _cast(ctx, node):
    v = values(ctx, node)
    if v is None or out_dtype(ctx, node) is None:
        return None
    return [v[0].astype(out_dtype(ctx, node))]


@folds("DEQUANTIZE")
def _dequantize(ctx, node):
    src = ctx.tensors[node.ins[0]]
    if src.value is None or src.sparsity is not None:
        return None
    if src.dtype == np.float16:
        return [src.value.astype(np.float32)]
    if src.dtype in (np.uint8, np.int8):
        return [((src.value.astype(np.float32) - src.zp) * src.scale).astype(np.float32)]
    return None


@folds("DENSIFY")
def _densify(ctx, node):
    src = ctx.tensors[node.ins[0]]
    if src.sparsity is None or src.value is None:
        return None
    return [densify(src.sparsity, src.value, ctx.tensors[node.outs[0]].shape)]


def densify(sp, stored, shape):
    """A constant sparse tensor (TFLite SparsityParameters: traversal order, block map, DENSE /
    SPARSE_CSR dimensions) expanded to its dense float32 value."""
    order = sp["order"] or list(range(len(shape)))
    block_map = sp["block_map"]
    dims = sp["dims"]
    n_dims = len(order)
    orig_rank = len(shape)
    block_size = [dims[orig_rank + i][1] for i in range(len(block_map))]
    dense = np.zeros(shape, np.float32)
    vals = stored.reshape(-1).astype(np.float32)
    pos = [0]

    def walk(level, prev, idx):
        if level == n_dims:
            full = [0] * orig_rank
            for lv in range(n_dims):
                dim = order[lv]
                if dim < orig_rank:
                    full[dim] += idx[lv] * (block_size[block_map.index(dim)] if dim in block_map else 1)
                else:
                    full[block_map[dim - orig_rank]] += idx[lv]
            dense[tuple(full)] = vals[pos[0]]
            pos[0] += 1
            return
        kind, size, seg, ind = dims[level]
        if kind == "dense":
            for i in range(size):
                walk(level + 1, prev * size + i, idx + [i])
        else:
            for j in range(int(seg[prev]), int(seg[prev + 1])):
                walk(level + 1, j, idx + [int(ind[j])])

    walk(0, 0, [])
    return dense
