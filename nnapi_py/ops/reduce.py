"""Reductions: MEAN, REDUCE_ALL/ANY/MAX/MIN/PROD/SUM, ARGMAX/ARGMIN and TOPK_V2.

Semantics follow NNAPI's reference CPU implementation:

* the axes tensor of MEAN / REDUCE_* is a 1-D TENSOR_INT32 whose values shape the output
  (negative axes count from the end, duplicates count once); the reduced dimensions are
  dropped (or kept with length 1) and a result without dimensions has shape [1];
* REDUCE_MAX/MIN start from the type's lowest/highest value and combine with
  ``std::max``/``std::min``, so NaN elements never win (np.fmax/np.fmin with ``initial``);
* quantized MEAN keeps the input's scale and zeroPoint: the raw values are summed in
  integers and divided by the element count, truncating toward zero;
* float16 MEAN/SUM/PROD accumulate in float32 and round once; REDUCE_PROD of a slice holding
  a zero is +0 even next to inf or NaN (the reference short-cuts zero factors);
* ARGMAX/ARGMIN return the first index of the extreme value (strict comparison from
  index 0, so NaN elements are skipped unless they come first);
* TOPK_V2 orders each last-dimension row by (value, index) descending, i.e. equal values
  come with the larger index first, as the specification says.
"""
import numpy as np

from .. import constants as C
from .base import Op, kept_array, register, register_variants, resolve_axis, value_error
from .common import Reshaped, require_present, small  # noqa: F401

F16, F32, I32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32, C.TENSOR_INT32
Q8, Q8S, B8 = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED, C.TENSOR_BOOL8
QUANT8 = (Q8, Q8S)
FLOATS = (F16, F32)


# ---- helpers shared by the operations of this family (and gather.py) ------------------------
def quiet(kernel):
    """A float kernel whose inf/NaN are results: as it is, since kernels run with numpy's
    floating-point warnings silenced by the execution (an np.errstate per call cost about
    1.5 us)."""
    return kernel


def out_view(o, shape):
    """A view of output array o with another shape of the same size (never a copy)."""
    v = o.view()
    v.shape = shape
    return v


class _OutViews:
    """out_view(o, shape) kept for the last output array given when views of it may be kept
    (a plan temporary or a kernel's own array, base.kept_array): a run on the same output
    makes no view.  (array, view) is one tuple: threads sharing the kernel read a consistent pair."""
    __slots__ = ("shape", "pair")

    def __init__(self, shape):
        self.shape = shape
        self.pair = (None, None)

    def __call__(self, o):
        p = self.pair
        if p[0] is o:
            return p[1]
        v = out_view(o, self.shape)
        if kept_array(o):
            self.pair = (o, v)
        return v


# ---- MEAN and REDUCE_* -----------------------------------------------------------------------

class _Reduce(Op):
    """input0, axes (1-D TENSOR_INT32), keep_dims -> output of input0's type."""
    value_inputs = (1,)
    type_levels = {}
    keep_type = C.BOOL
    same_quant = False      # quantized output must keep input0's scale/zeroPoint
    roles = ("input", "axes", "keep_dims")

    def validate(self, sig):
        sig.count(3, 1)
        sig.all_present(self.roles)
        t = sig.types("input", 0, self.type_levels, "input")
        sig.types("input", 1, (I32,), "axes")
        sig.types("input", 2, (self.keep_type,), "keep_dims")
        sig.same_type("output", 0, t, "output")
        sig.rank_between("input", 0, 1, 4, "input")
        sig.rank_between("input", 1, 1, 1, "axes")
        if self.same_quant:
            sig.same_quant("output", 0, sig.ins[0])
        axes, rank = sig.ins[1].value, sig.ins[0].rank
        if axes is not None and rank is not None:
            for a in np.asarray(axes).reshape(-1):
                if not -rank <= int(a) < rank:
                    sig.fail(f"input 1 (axes): axis {int(a)} is out of range [{-rank}, {rank}) "
                             f"for input 0 of rank {rank}")
        return self.type_levels[t]

    def keep(self, v):
        return bool(v)

    def plan_axes(self, ins):
        """(sorted unique axes, keep_dims, output dims, keep-dims shape)."""
        require_present(self.name, ins, self.roles)
        dims = tuple(ins[0].dims)
        rank = len(dims)
        axes = sorted({resolve_axis(self.name, a, rank) for a in np.asarray(ins[1].value).reshape(-1)})
        keep = self.keep(ins[2].value)
        kshape = tuple(1 if d in axes else n for d, n in enumerate(dims))
        if keep:
            out = kshape
        else:
            out = tuple(n for d, n in enumerate(dims) if d not in axes) or (1,)
        return tuple(axes), keep, out, kshape

    def infer(self, ins):
        return [self.plan_axes(ins)[2]]

    def build(self, ins, outs):
        axes, _keep, _out, kshape = self.plan_axes(ins)
        inp = ins[0]
        count = 1
        for a in axes:
            count *= inp.dims[a]
        if count and small(inp, outs[0]) and 0 not in inp.dims:
            k = self.lean_kernel(inp, axes, kshape, tuple(outs[0].dims), count)
            if k is not None:
                return k
        return self.kernel(inp, axes, kshape)

    def lean_kernel(self, inp, axes, kshape, out, count):
        """The small-tensor kernel (common.small), or None: the general one then.  out: the
        output's shape; count: the elements reduced into each output element (> 0)."""
        return None


@register
class Mean(_Reduce):
    name = "MEAN"
    type_levels = {F32: 2, Q8: 2, F16: 3, Q8S: 4}
    keep_type = C.INT32
    same_quant = True

    def keep(self, v):
        return int(v) > 0          # "if positive"

    def lean_kernel(self, inp, axes, kshape, out, count):
        """float32: the sum into a new array of the reduced shape (the general kernel's
        reduction, so its summation order), divided into the output: two numpy calls and
        none in place (an in-place ufunc on one element costs 0.5 us more).  (Even one element
        per output is summed: numpy's sum starts from +0.0, so -0.0 gives +0.0.)"""
        if inp.type != F32:
            return None
        add, div, c = np.add.reduce, np.divide, np.array(count, np.float32)
        if out == kshape:
            def k(i, o):
                div(add(i[0], axes, None, None, True), c, out=o[0])
            return k
        if out == tuple(n for d, n in enumerate(inp.dims) if d not in axes):
            def k(i, o):
                div(add(i[0], axes), c, out=o[0])
            return k
        view = Reshaped(kshape, out=True)

        def k(i, o):
            div(add(i[0], axes, None, None, True), c, out=view(o[0]))
        return k

    def kernel(self, inp, axes, kshape):
        count = 1
        for a in axes:
            count *= inp.dims[a]
        t = inp.type
        if count == 0:             # the reference leaves the zero-initialised output
            def k(i, o):
                o[0].fill(0)
            return k
        if t == F32:
            views = _OutViews(kshape)
            add, div, c = np.add.reduce, np.divide, np.float32(count)

            def k(i, o):
                v = views(o[0])
                add(i[0], axis=axes, keepdims=True, out=v)
                div(v, c, out=v)
        elif t == F16:
            @quiet
            def k(i, o):
                s = np.add.reduce(i[0], axis=axes, dtype=np.float32, keepdims=True)
                s /= np.float32(count)
                out_view(o[0], kshape)[...] = s
        else:
            def k(i, o):
                s = np.add.reduce(i[0], axis=axes, dtype=np.int64, keepdims=True)
                q = np.abs(s) // count                 # C division: truncation toward zero
                np.negative(q, out=q, where=s < 0)
                out_view(o[0], kshape)[...] = q
        return k


class _ExtremeReduce(_Reduce):
    type_levels = {F32: 3, F16: 3, Q8: 3, Q8S: 4}
    same_quant = True
    float_ufunc = None     # NaN-skipping ufunc for floats
    int_ufunc = None
    identity = None        # "min" or "max": the type's limit that starts the reduction

    def kernel(self, inp, axes, kshape):
        dt = inp.dtype
        if inp.type in FLOATS:
            uf, init = self.float_ufunc, getattr(np.finfo(dt), self.identity)
        else:
            uf, init = self.int_ufunc, getattr(np.iinfo(dt), self.identity)
        init = dt.type(init)

        def k(i, o):
            uf.reduce(i[0], axis=axes, keepdims=True, initial=init, out=out_view(o[0], kshape))
        return k


register_variants(_ExtremeReduce, globals(), [
    ("ReduceMax", dict(name="REDUCE_MAX", float_ufunc=np.fmax, int_ufunc=np.maximum, identity="min")),
    ("ReduceMin", dict(name="REDUCE_MIN", float_ufunc=np.fmin, int_ufunc=np.minimum, identity="max")),
])


class _ArithReduce(_Reduce):
    type_levels = {F32: 3, F16: 3}
    ufunc = None

    def kernel(self, inp, axes, kshape):
        uf = self.ufunc
        if inp.type == F32:
            def k(i, o):
                uf.reduce(i[0], axis=axes, keepdims=True, out=out_view(o[0], kshape))
        else:
            def k(i, o):
                out_view(o[0], kshape)[...] = uf.reduce(i[0], axis=axes, dtype=np.float32, keepdims=True)
        return quiet(k)


@register
class ReduceSum(_ArithReduce):
    name = "REDUCE_SUM"
    ufunc = np.add


@register
class ReduceProd(_ArithReduce):
    name = "REDUCE_PROD"
    ufunc = np.multiply

    def kernel(self, inp, axes, kshape):
        # the reference multiplies with "a == 0 || b == 0 -> 0": any zero element gives +0
        # even next to inf or NaN.  Such a slice's plain product is 0, -0 or NaN, so only
        # those outputs need a second look.
        base = super().kernel(inp, axes, kshape)

        def k(i, o):
            base(i, o)
            v = out_view(o[0], kshape)
            suspect = (v == 0) | np.isnan(v)
            if suspect.any():
                z = np.any(i[0] == 0, axis=axes, keepdims=True)
                v[z & suspect] = 0
        return k


class _LogicalReduce(_Reduce):
    type_levels = {B8: 3}
    func = None

    def kernel(self, inp, axes, kshape):
        f = self.func

        views = _OutViews(kshape)
        # np.all / np.any are their ufunc's reduce behind Python wrappers (about 3 us a call)
        red = self.ufunc.reduce

        def k(i, o):
            # any non-zero byte is true: look at the raw bytes
            red(i[0].view(np.uint8), axis=axes, keepdims=True, out=views(o[0]))
        return k

    def lean_kernel(self, inp, axes, kshape, out, count):
        """One element per output: whether its byte is non-zero (np.not_equal; the reduction
        of one element is that element as a bool), one numpy call.  Else the general kernel's
        reduction with the byte view of the input and the output's view kept (common.Reshaped)."""
        if count == 1:
            look, zero = Reshaped(out, dtype=np.uint8), np.zeros((), np.uint8)
            ne = np.not_equal

            def k(i, o):
                ne(look(i[0]), zero, out=o[0])
            return k
        look, red = Reshaped(inp.dims, dtype=np.uint8), self.ufunc.reduce
        if out == kshape:
            def k(i, o):
                red(look(i[0]), axes, None, o[0], True)
            return k
        view = Reshaped(kshape, out=True)

        def k(i, o):
            red(look(i[0]), axes, None, view(o[0]), True)
        return k


register_variants(_LogicalReduce, globals(), [
    ("ReduceAll", dict(name="REDUCE_ALL", func=staticmethod(np.all), ufunc=np.logical_and)),
    ("ReduceAny", dict(name="REDUCE_ANY", func=staticmethod(np.any), ufunc=np.logical_or)),
])


# ---- ARGMAX / ARGMIN -------------------------------------------------------------------------

def _tensor_and_int(op, sig, n_outputs):
    """ARGMAX/ARGMIN and TOPK_V2: input 0 a tensor of op.type_levels, input 1 an INT32 scalar (op.roles
    names both), n_outputs outputs; returns input 0's type."""
    sig.count(2, n_outputs)
    sig.all_present(op.roles)
    t = sig.types("input", 0, op.type_levels, "input")
    sig.types("input", 1, (C.INT32,), op.roles[1])
    return t


class _ArgMinMax(Op):
    type_levels = {F16: 3, F32: 3, I32: 3, Q8: 3, Q8S: 4}
    func = None
    nan_fill = 0.0
    roles = ("input", "axis")

    def validate(self, sig):
        t = _tensor_and_int(self, sig, 1)
        sig.types("output", 0, (I32,), "output")
        sig.rank_between("input", 0, 1, None, "input")
        axis, rank = sig.scalar_value(1), sig.ins[0].rank
        if axis is not None and rank is not None and not -rank <= axis < rank:
            sig.fail(f"input 1 (axis) {axis} is out of range [{-rank}, {rank}) for input 0 of rank {rank}")
        return self.type_levels[t]

    def infer(self, ins):
        require_present(self.name, ins, self.roles)
        dims = tuple(ins[0].dims)
        axis = resolve_axis(self.name, ins[1].value, len(dims))
        if 0 in dims:
            raise value_error(f"{self.name}: input 0 must be non-empty, got dimensions {list(dims)}",
                              at_runtime=True)
        return [dims[:axis] + dims[axis + 1:] or (1,)]

    def build(self, ins, outs):
        axis = resolve_axis(self.name, ins[1].value, len(ins[0].dims))
        oshape = tuple(outs[0].dims)
        f = self.func
        if ins[0].type in FLOATS:
            fill = ins[0].dtype.type(self.nan_fill)

            def k(i, o):
                x = i[0]
                if np.isnan(x.max()):          # one pass; NaN propagates through max
                    nan = np.isnan(x)
                    # the reference scans with a strict comparison from element 0: NaN never
                    # replaces the running extreme, and wins only when it is element 0
                    r = np.where(np.take(nan, 0, axis=axis), 0, f(np.where(nan, fill, x), axis=axis))
                else:
                    r = f(x, axis=axis)
                o[0][...] = r.reshape(oshape)
        else:
            def k(i, o):
                o[0][...] = f(i[0], axis=axis).reshape(oshape)
        return k


register_variants(_ArgMinMax, globals(), [
    ("ArgMax", dict(name="ARGMAX", func=staticmethod(np.argmax), nan_fill=-np.inf)),
    ("ArgMin", dict(name="ARGMIN", func=staticmethod(np.argmin), nan_fill=np.inf)),
])


# ---- TOPK_V2 ---------------------------------------------------------------------------------

def _ordinal(x):
    """Order-preserving int64 image of x (floats through their bit patterns; -0.0 == 0.0)."""
    if x.dtype.kind == "f":
        bits = x.view(np.int16 if x.dtype.itemsize == 2 else np.int32).astype(np.int64)
        mag = np.int64((1 << (8 * x.dtype.itemsize - 1)) - 1)
        return np.where(bits < 0, -(bits & mag), bits)
    return x.astype(np.int64)


@register
class TopKV2(Op):
    name = "TOPK_V2"
    type_levels = {F16: 3, F32: 3, I32: 3, Q8: 3, Q8S: 4}
    roles = ("input", "k")

    def validate(self, sig):
        t = _tensor_and_int(self, sig, 2)
        sig.same_type("output", 0, t, "values")
        sig.types("output", 1, (I32,), "indices")
        sig.rank_between("input", 0, 1, None, "input")
        sig.same_quant("output", 0, sig.ins[0])
        k = sig.scalar_value(1)
        if k is not None:
            if k < 1:
                sig.fail(f"input 1 (k) must be at least 1, got {k}")
            d = sig.ins[0].dims
            if d and d[-1] and k > d[-1]:
                sig.fail(f"input 1 (k) {k} exceeds the last dimension of input 0 ({d[-1]})")
        return self.type_levels[t]

    def infer(self, ins):
        require_present(self.name, ins, self.roles)
        dims = tuple(ins[0].dims)
        k = int(ins[1].value)
        if not 1 <= k <= dims[-1]:
            raise value_error(f"{self.name}: k = {k} must be in [1, {dims[-1]}] (the last dimension of input 0)",
                              at_runtime=False)
        out = dims[:-1] + (k,)
        return [out, out]

    def build(self, ins, outs):
        n = ins[0].dims[-1]
        k = int(ins[1].value)
        nn = np.int64(n)

        def kern(i, o):
            x = i[0]
            if x.size == 0:
                return
            # unique keys: (value, index) descending == key ascending
            key = _ordinal(x)
            key *= -nn
            key -= np.arange(n, dtype=np.int64)
            if k < n:
                key = np.partition(key, k - 1, axis=-1)[..., :k]
            key.sort(axis=-1)
            idx = (-key) % nn
            o[1][...] = idx
            o[0][...] = np.take_along_axis(x, idx, axis=-1)
        return kern
