"""Index lookups: GATHER, EMBEDDING_LOOKUP, HASHTABLE_LOOKUP.

Out-of-range indices are a value error: BAD_DATA when the indices are constants (found at
Model_finish or compilation), OP_FAILED when they arrive with an execution.
HASHTABLE_LOOKUP finds each lookup value in the ascending Keys with a binary search; a
miss yields a slice of zero bytes and a 0 in Hits (QUANT8_ASYMM, scale 1, zeroPoint 0).
"""
import numpy as np

from .. import constants as C
from .base import Op, register, resolve_axis, value_error
from .common import Region, kept, require_present, small

F16, F32, I32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32, C.TENSOR_INT32
Q8, Q8S = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED


def check_indices(name, what, idx, size, at_runtime):
    """All values of idx in [0, size); value error naming the first offender."""
    if idx.size == 0 or (idx.min() >= 0 and idx.max() < size):
        return
    bad = (idx < 0) | (idx >= size)
    v = int(idx.reshape(-1)[np.argmax(bad.reshape(-1))])
    raise value_error(f"{name}: {what} value {v} is out of range [0, {size})", at_runtime)


def constant_indices_ok(sig, idx_pos, what, size):
    """At Model_finish: constant indices checked against a known dimension."""
    v = sig.ins[idx_pos].value
    if v is None or not size:
        return
    v = np.asarray(v)
    if v.size and (v.min() < 0 or v.max() >= size):
        bad = v.reshape(-1)[np.argmax(((v < 0) | (v >= size)).reshape(-1))]
        sig.fail(f"input {idx_pos} ({what}) value {int(bad)} is out of range [0, {size})")


@register
class Gather(Op):
    name = "GATHER"
    type_levels = {F16: 3, F32: 3, I32: 3, Q8: 3, Q8S: 4}

    roles = ("input", "axis", "indices")

    def validate(self, sig):
        sig.count(3, 1)
        sig.all_present(self.roles)
        t = sig.types("input", 0, self.type_levels, "input")
        sig.types("input", 1, (C.INT32,), "axis")
        sig.types("input", 2, (I32,), "indices")
        sig.same_type("output", 0, t, "output")
        sig.rank_between("input", 0, 1, None, "input")
        sig.same_quant("output", 0, sig.ins[0])
        axis, d = sig.scalar_value(1), sig.ins[0].dims
        if axis is not None and d is not None:
            r = len(d)
            if not -r <= axis < r:
                sig.fail(f"input 1 (axis) {axis} is out of range [{-r}, {r}) for input 0 of rank {r}")
            constant_indices_ok(sig, 2, "indices", d[axis + r if axis < 0 else axis])
        return self.type_levels[t]

    def infer(self, ins):
        require_present(self.name, ins, self.roles)
        dims = tuple(ins[0].dims)
        axis = resolve_axis(self.name, ins[1].value, len(dims))
        return [dims[:axis] + tuple(ins[2].dims) + dims[axis + 1:]]

    def build(self, ins, outs):
        dims = tuple(ins[0].dims)
        axis = resolve_axis(self.name, ins[1].value, len(dims))
        size = dims[axis]
        if ins[2].value is not None:     # constant indices: BAD_DATA at compilation
            check_indices(self.name, "indices", np.asarray(ins[2].value), size, at_runtime=False)
        name = self.name
        const = ins[2].value
        few = ins[2].dims is not None and int(np.prod(ins[2].dims)) <= 16
        if tuple(ins[2].dims or ()) == (1,) and small(ins[0], outs[0]):
            return _one_index(ins, axis, size, name)

        def k(i, o):
            idx = i[2]
            if idx is not const:            # constant indices were checked at compilation
                if few:                     # a few indices (a loop counter): checked as Python ints
                    for v in idx.reshape(-1).tolist():
                        if not 0 <= v < size:
                            check_indices(name, "indices", idx, size, at_runtime=True)
                else:
                    check_indices(name, "indices", idx, size, at_runtime=True)
            i[0].take(idx, axis=axis, out=o[0], mode="clip")
        return k


def _one_index(ins, axis, size, name):
    """GATHER of small tensors by one index (a loop counter, a constant): the input's slice
    [v:v+1] along the axis assigned to the output (of that shape: the index tensor is [1]);
    a constant index's slice a view kept (common.Region), a kept input's slices kept per index
    as they are met (a GRU loop's frames: about 0.6 us less a step).  An index out of range fails as in
    the general kernel."""
    const = ins[2].value
    pre = (slice(None),) * axis
    # (a kept input: a plan temporary or own array, {index: its slice's view}), id() of the last
    # input: the views of an input given twice in a row (a loop's input-only table) are kept
    # (one tuple: threads sharing the kernel read a consistent pair)
    state = [(None, None), None]

    def k(i, o):
        idx, x = i[2], i[0]
        v = idx.item()
        if not 0 <= v < size:
            check_indices(name, "indices", idx, size, at_runtime=True)
        p = state[0]
        if p[0] is x:
            r = p[1].get(v)
            if r is None:
                r = p[1][v] = x[pre + (slice(v, v + 1),)]
            o[0][...] = r
            return
        o[0][...] = x[pre + (slice(v, v + 1),)]
        n = id(x)
        if state[1] != n:
            state[1] = n
        elif kept(x):
            state[0] = (x, {})

    def direct(i, o):
        """k on arrays bound for good (Plan.direct_steps), a kept input's slices kept here;
        None for an input that may not be kept (a caller's)."""
        idx, x, z = i[2], i[0], o[0]
        if not kept(x):
            return None
        item, views = idx.item, {}

        def run():
            v = item()
            r = views.get(v)
            if r is None:
                if not 0 <= v < size:
                    check_indices(name, "indices", idx, size, at_runtime=True)
                r = views[v] = x[pre + (slice(v, v + 1),)]
            z[...] = r
        return run, ()
    k.direct = direct
    if const is None or ins[0].value is not None:           # not a constant of a static build
        return k
    v = int(np.asarray(const).reshape(-1)[0])               # checked at compilation
    src = Region(pre + (slice(v, v + 1),))

    def kc(i, o):
        if i[2] is not const:
            return k(i, o)
        o[0][...] = src(i[0])
    return kc


@register
class EmbeddingLookup(Op):
    name = "EMBEDDING_LOOKUP"
    type_levels = {F32: 1, I32: 3, Q8: 3, F16: 4, Q8S: 4}

    roles = ("lookups", "values")

    def validate(self, sig):
        sig.count(2, 1)
        sig.all_present(self.roles)
        sig.types("input", 0, (I32,), "lookups")
        t = sig.types("input", 1, self.type_levels, "values")
        sig.same_type("output", 0, t, "output", "input 1")
        sig.rank_between("input", 0, 1, 1, "lookups")
        sig.rank_between("input", 1, 2, None, "values")
        sig.same_quant("output", 0, sig.ins[1], "input 1")
        d = sig.ins[1].dims
        if d:
            constant_indices_ok(sig, 0, "lookups", d[0])
        return self.type_levels[t]

    def infer(self, ins):
        require_present(self.name, ins, self.roles)
        return [tuple(ins[0].dims[:1]) + tuple(ins[1].dims[1:])]

    def build(self, ins, outs):
        rows = ins[1].dims[0]
        if ins[0].value is not None:
            check_indices(self.name, "lookups", np.asarray(ins[0].value), rows, at_runtime=False)
        name = self.name

        def k(i, o):
            look = i[0]
            check_indices(name, "lookups", look, rows, at_runtime=True)
            np.take(i[1], look, axis=0, out=o[0], mode="clip")
        return k


@register
class HashtableLookup(Op):
    name = "HASHTABLE_LOOKUP"
    type_levels = {F32: 1, I32: 1, Q8: 1}

    roles = ("lookups", "keys", "values")

    def validate(self, sig):
        sig.count(3, 2)
        sig.all_present(self.roles)
        sig.types("input", 0, (I32,), "lookups")
        sig.types("input", 1, (I32,), "keys")
        t = sig.types("input", 2, self.type_levels, "values")
        sig.same_type("output", 0, t, "output", "input 2")
        sig.types("output", 1, (Q8,), "hits")
        sig.rank_between("input", 0, 1, 1, "lookups")
        sig.rank_between("input", 1, 1, 1, "keys")
        sig.rank_between("input", 2, 2, None, "values")
        sig.same_quant("output", 0, sig.ins[2], "input 2")
        h = sig.outs[1]
        if h.scale != 1.0 or h.zp != 0:
            sig.fail(f"output 1 (hits) must have scale 1.0 and zeroPoint 0, got {h.scale} and {h.zp}")
        kd, vd = sig.ins[1].dims, sig.ins[2].dims
        if kd and vd and kd[0] and vd[0] and kd[0] != vd[0]:
            sig.fail(f"input 1 (keys) has {kd[0]} entries but input 2 (values) has {vd[0]} rows")
        keys = sig.ins[1].value
        if keys is not None and not _sorted(np.asarray(keys)):
            sig.fail("input 1 (keys) must be sorted in ascending order")
        return self.type_levels[t]

    def infer(self, ins):
        require_present(self.name, ins, self.roles)
        n, rows = ins[1].dims[0], ins[2].dims[0]
        if n != rows:
            raise value_error(f"{self.name}: input 1 (keys) has {n} entries but input 2 (values) has {rows} rows",
                              at_runtime=False)
        k = ins[0].dims[0]
        return [(k,) + tuple(ins[2].dims[1:]), (k,)]

    def build(self, ins, outs):
        n = ins[1].dims[0]
        if ins[1].value is not None and not _sorted(np.asarray(ins[1].value)):
            raise value_error(f"{self.name}: input 1 (keys) must be sorted in ascending order", at_runtime=False)
        name = self.name

        def k(i, o):
            look, keys = i[0], i[1]
            out, hits = o[0], o[1]
            if n == 0:
                out.fill(0)
                hits.fill(0)
                return
            if not _sorted(keys):
                raise value_error(f"{name}: input 1 (keys) must be sorted in ascending order", at_runtime=True)
            pos = np.searchsorted(keys, look)
            np.minimum(pos, n - 1, out=pos)
            hit = keys[pos] == look
            np.take(i[2], pos, axis=0, out=out, mode="clip")
            miss = ~hit
            if miss.any():
                out[miss] = 0
            hits[...] = hit
        return k


def _sorted(keys):
    return keys.size < 2 or not bool(np.any(keys[1:] < keys[:-1]))
