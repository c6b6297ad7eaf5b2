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
    """Register fold(ctx, node) -> [values] | None for builtins; the values are normalised to
    arrays of each output tensor's dtype and (static) shape."""
    def deco(fn):
        def run(ctx, node):
            try:
                vals = fn(ctx, node)
            except (ValueError, IndexError, TypeError, ZeroDivisionError, OverflowError):
                return None                         # not foldable here (the mapping decides)
            if vals is None:
                return None
            out = []
            for k, v in zip(node.outs, vals):
                t = ctx.tensors[k]
                a = np.asarray(v, t.dtype if t.dtype is not None else None)
                if a.size == int(np.prod(t.shape, dtype=np.int64)) and -1 not in t.signature:
                    a = a.reshape(t.shape)
                else:
                    t.shape = tuple(a.shape)       # the file's shape was a placeholder (dynamic)
                out.append(a if a.flags.c_contiguous else a.copy())   # (ascontiguousarray makes 0-d 1-d)
            return out
        run.__name__ = fn.__name__
        for n in names:
            FOLDS[n] = run
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


def _quantized(t):
    return t.dtype in (np.uint8, np.int8, np.int16) and (t.scale or t.scales)


def _same_quantization(ctx, node):
    """Data movement of quantized values is exact only when every tensor has one quantization."""
    ts = [ctx.tensors[k] for k in list(node.ins[:1]) + list(node.outs)]
    if not any(_quantized(t) for t in ts):
        return True
    return len({(t.scale, t.zp, tuple(t.scales or ())) for t in ts}) == 1


def _plain(ctx, node):
    """No quantized tensor among the node's inputs and outputs (arithmetic folds only these)."""
    return not any(_quantized(ctx.tensors[k]) for k in list(node.ins) + list(node.outs) if k >= 0)


def _when_constant(ok):
    """A decorator: fold(ctx, node, input values) runs when every input is constant and ok(ctx, node)."""
    def wrap(fn):
        def run(ctx, node):
            v = values(ctx, node)
            if v is None or not ok(ctx, node):
                return None
            return fn(ctx, node, v)
        return run
    return wrap


# pure data movement (reshape, slice, gather, ...): one quantization throughout
movement = _when_constant(_same_quantization)
# arithmetic on constants of plain (not quantized) types
arithmetic = _when_constant(_plain)


def _opts(node, cls):
    return node.options(cls)


_ACT = {0: lambda x: x, 1: lambda x: np.maximum(x, 0), 2: lambda x: np.clip(x, -1, 1), 3: lambda x: np.clip(x, 0, 6)}


def _activation(node, cls, y):
    o = _opts(node, cls)
    a = o.FusedActivationFunction() if o is not None and hasattr(o, "FusedActivationFunction") else 0
    f = _ACT.get(a)
    return None if f is None else f(y)


# -- shapes ---------------------------------------------------------------------------------------------
def _static(t):
    return -1 not in t.signature and 0 not in t.shape


@folds("SHAPE")
def _shape(ctx, node):
    x = ctx.tensors[node.ins[0]]
    if not _static(x) and x.value is None:
        return None
    shape = x.value.shape if x.value is not None else x.shape
    return [np.array(shape, out_dtype(ctx, node) or np.int32)]


@folds("RANK")
def _rank(ctx, node):
    x = ctx.tensors[node.ins[0]]
    if x.value is None and not _static(x):
        return None
    return [np.array(len(x.shape), np.int32)]


@folds("ZEROS_LIKE", "ONES_LIKE")
def _zeros_ones_like(ctx, node):
    x = ctx.tensors[node.ins[0]]
    if x.value is None and not _static(x):
        return None
    return [(np.zeros if node.name == "ZEROS_LIKE" else np.ones)(x.shape, x.dtype)]


@folds("FILL")
def _fill(ctx, node):
    v = values(ctx, node)
    if v is None:
        return None
    return [np.full([int(d) for d in v[0].reshape(-1)], v[1].reshape(-1)[0], out_dtype(ctx, node))]


def _by_vector(np_fn):
    """Data movement whose second input is an int vector: np_fn(x, [ints])."""
    @movement
    def run(ctx, node, v):
        return [np_fn(v[0], [int(d) for d in v[1].reshape(-1)])]
    return run


for _name, _fn in (("BROADCAST_TO", np.broadcast_to), ("TRANSPOSE", np.transpose), ("TILE", np.tile)):
    folds(_name)(_by_vector(_fn))


@folds("RESHAPE")
@movement
def _reshape(ctx, node, v):
    out = ctx.tensors[node.outs[0]]
    if _static(out) and out.shape != () or v[0].size == 1 and out.shape == ():
        return [v[0].reshape(out.shape)]
    if len(v) > 1 and v[1] is not None:
        return [v[0].reshape([int(d) for d in v[1].reshape(-1)])]
    o = _opts(node, "ReshapeOptions")
    if o is not None and o.NewShapeLength():
        return [v[0].reshape([int(d) for d in o.NewShapeAsNumpy()])]
    return [v[0].reshape(out.shape)]


@folds("SQUEEZE")
@movement
def _squeeze(ctx, node, v):
    o = _opts(node, "SqueezeOptions")
    dims = tuple(int(d) for d in o.SqueezeDimsAsNumpy()) if o is not None and o.SqueezeDimsLength() else None
    return [np.squeeze(v[0], axis=dims)]


@folds("EXPAND_DIMS")
@movement
def _expand_dims(ctx, node, v):
    return [np.expand_dims(v[0], int(v[1].reshape(-1)[0]))]


@folds("CONCATENATION")
def _concatenation(ctx, node):
    v = values(ctx, node)
    if v is None or not _same_quantization(ctx, node) or \
            any(_quantized(ctx.tensors[k]) and ctx.tensors[k].scale != ctx.tensors[node.outs[0]].scale for k in node.ins):
        return None
    o = _opts(node, "ConcatenationOptions")
    y = np.concatenate([np.asarray(a).reshape(ctx.tensors[k].shape) for a, k in zip(v, node.ins)], int(o.Axis()))
    if _plain(ctx, node):
        return [_activation(node, "ConcatenationOptions", y)]
    return None if o.FusedActivationFunction() else [y]


@folds("PACK")
def _pack(ctx, node):
    v = values(ctx, node)
    if v is None or not _same_quantization(ctx, node):
        return None
    o = _opts(node, "PackOptions")
    return [np.stack([np.asarray(a) for a in v], int(o.Axis()) if o else 0)]


@folds("UNPACK")
@movement
def _unpack(ctx, node, v):
    o = _opts(node, "UnpackOptions")
    axis = int(o.Axis()) if o else 0
    return [np.take(v[0], i, axis) for i in range(v[0].shape[axis])]


@folds("SPLIT")
def _split(ctx, node):
    v = values(ctx, node)
    x = ctx.tensors[node.ins[1]]
    if v is None or _quantized(x) and not all(ctx.tensors[k].scale == x.scale for k in node.outs):
        return None
    return np.split(v[1], len(node.outs), int(v[0].reshape(-1)[0]))


@folds("SPLIT_V")
@movement
def _split_v(ctx, node, v):
    sizes = [int(s) for s in v[1].reshape(-1)]
    axis = int(v[2].reshape(-1)[0]) % v[0].ndim
    if -1 in sizes:
        sizes[sizes.index(-1)] = v[0].shape[axis] - sum(s for s in sizes if s != -1)
    return np.split(v[0], np.cumsum(sizes)[:-1], axis)


@folds("SLICE")
@movement
def _slice(ctx, node, v):
    x, begin, size = v[0], v[1].reshape(-1), v[2].reshape(-1)
    idx = tuple(slice(int(b), x.shape[i] if s < 0 else int(b) + int(s)) for i, (b, s) in enumerate(zip(begin, size)))
    return [x[idx]]


@folds("STRIDED_SLICE")
@movement
def _strided_slice(ctx, node, v):
    return [strided_slice(v[0], v[1], v[2], v[3], _opts(node, "StridedSliceOptions"))]


def strided_slice(x, begin, end, strides, o):
    """TFLite STRIDED_SLICE on a numpy array (masks as TFLite defines them; shrink_axis takes the
    single element at begin whatever end says; offset: end is relative to begin)."""
    begin, end, strides = (np.asarray(a).reshape(-1).astype(np.int64) for a in (begin, end, strides))
    bm, em, sm = (o.BeginMask(), o.EndMask(), o.ShrinkAxisMask()) if o is not None else (0, 0, 0)
    ellipsis, new_axis = (o.EllipsisMask(), o.NewAxisMask()) if o is not None else (0, 0)
    offset = bool(o.Offset()) if o is not None and hasattr(o, "Offset") else False
    if ellipsis or new_axis:
        raise ValueError("ellipsis / new-axis masks")
    idx, shrink = [], []
    for i in range(x.ndim):
        if i >= len(begin):
            idx.append(slice(None))
            continue
        b, e, s = int(begin[i]), int(end[i]), int(strides[i])
        if offset:
            e = b + e
        if sm >> i & 1:
            idx.append(b % x.shape[i] if x.shape[i] else b)
            shrink.append(i)
            continue
        idx.append(slice(None if bm >> i & 1 else b, None if em >> i & 1 else e, s))
    return np.asarray(x[tuple(idx)])


@folds("GATHER")
@movement
def _gather(ctx, node, v):
    o = _opts(node, "GatherOptions")
    if o is not None and o.BatchDims():
        return None
    return [np.take(v[0], v[1].astype(np.int64), int(o.Axis()) if o else 0)]


@folds("GATHER_ND")
@movement
def _gather_nd(ctx, node, v):
    idx = v[1].astype(np.int64)
    return [v[0][tuple(np.moveaxis(idx, -1, 0))]]


@folds("REVERSE_V2")
@movement
def _reverse(ctx, node, v):
    return [np.flip(v[0], tuple(int(a) for a in v[1].reshape(-1)))]


@folds("SELECT", "SELECT_V2")
def _select(ctx, node):
    v = values(ctx, node)
    if v is None or not _same_quantization(ctx, type("N", (), {"ins": node.ins[1:], "outs": node.outs})()):
        return None
    return [np.where(v[0], v[1], v[2])]


# -- arithmetic on plain constants (int32 shape arithmetic, float constants) -------------------------
def _binary(np_fn, cls=None):
    @arithmetic
    def run(ctx, node, v):
        with np.errstate(all="ignore"):
            y = np_fn(np.asarray(v[0]), np.asarray(v[1]))
        return [_activation(node, cls, y) if cls else y]
    return run


def _int_div(a, b):
    """TFLite DIV on integers: C division (truncation toward zero)."""
    if a.dtype.kind in "iu":
        q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
        return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)
    return a / b


for _name, _fn, _cls in (("ADD", np.add, "AddOptions"), ("SUB", np.subtract, "SubOptions"),
                         ("MUL", np.multiply, "MulOptions"), ("DIV", _int_div, "DivOptions"),
                         ("FLOOR_DIV", lambda a, b: np.floor_divide(a, b) if a.dtype.kind in "iu"
                          else np.floor(a / b), None),
                         ("FLOOR_MOD", np.mod, None), ("MAXIMUM", np.maximum, None), ("MINIMUM", np.minimum, None),
                         ("POW", np.power, None), ("SQUARED_DIFFERENCE", lambda a, b: (a - b) * (a - b), None),
                         ("EQUAL", np.equal, None), ("NOT_EQUAL", np.not_equal, None), ("LESS", np.less, None),
                         ("LESS_EQUAL", np.less_equal, None), ("GREATER", np.greater, None),
                         ("GREATER_EQUAL", np.greater_equal, None), ("LOGICAL_AND", np.logical_and, None),
                         ("LOGICAL_OR", np.logical_or, None)):
    folds(_name)(_binary(_fn, _cls))


def _unary(np_fn):
    @arithmetic
    def run(ctx, node, v):
        with np.errstate(all="ignore"):
            return [np_fn(np.asarray(v[0]))]
    return run


for _name, _fn in (("NEG", np.negative), ("ABS", np.abs), ("FLOOR", np.floor), ("CEIL", np.ceil),
                   ("SQUARE", np.square), ("SQRT", np.sqrt), ("RSQRT", lambda a: 1 / np.sqrt(a)),
                   ("EXP", np.exp), ("LOG", np.log), ("SIN", np.sin), ("COS", np.cos),
                   ("LOGICAL_NOT", np.logical_not), ("RELU", lambda a: np.maximum(a, 0)),
                   ("RELU6", lambda a: np.clip(a, 0, 6)), ("ROUND", np.round)):
    folds(_name)(_unary(_fn))


def _reducer(np_fn, float_only=False):
    @arithmetic
    def run(ctx, node, v):
        x = np.asarray(v[0])
        if float_only and x.dtype.kind != "f":
            return None
        o = _opts(node, "ReducerOptions")
        axes = tuple(sorted({int(a) % max(1, x.ndim) for a in np.asarray(v[1]).reshape(-1)}))
        return [np_fn(x, axis=axes, keepdims=bool(o.KeepDims()) if o else False)]
    return run


for _name, _fn, _fo in (("SUM", np.sum, False), ("REDUCE_PROD", np.prod, False), ("REDUCE_MAX", np.max, False),
                        ("REDUCE_MIN", np.min, False), ("REDUCE_ANY", np.any, False), ("REDUCE_ALL", np.all, False),
                        ("MEAN", np.mean, True)):
    folds(_name)(_reducer(_fn, _fo))


@folds("ARG_MAX", "ARG_MIN")
@arithmetic
def _arg(ctx, node, v):
    f = np.argmax if node.name == "ARG_MAX" else np.argmin
    return [f(v[0], axis=int(v[1].reshape(-1)[0]))]


@folds("RANGE")
def _range(ctx, node):
    v = values(ctx, node)
    if v is None:
        return None
    start, limit, delta = (a.reshape(-1)[0] for a in v)
    return [np.arange(start, limit, delta).astype(out_dtype(ctx, node))]


@folds("CAST")
@arithmetic
def _cast(ctx, node, v):
    if out_dtype(ctx, node) is None:
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
