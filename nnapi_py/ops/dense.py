"""Dense layers: FULLY_CONNECTED, BATCH_MATMUL.

Quantized products go through the shared layer: ``quant.OutputStage`` (the requantization of
int32 accumulators), ``quant.exact_dtype`` / ``centered_max`` / ``scale_product`` (ops/quant/);
``Derived`` (a value packed once from a constant operand) is in common.py.
"""
import numpy as np

from .. import constants as C
from .base import Op, register, value_error
from . import quant as Q
from .quant import OutputStage, centered_max, exact_dtype, scale_product
from . import common
from .common import check_bias_quant, Derived, small

F16, F32, I32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32, C.TENSOR_INT32
Q8, Q8S = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED
QPC = C.TENSOR_QUANT8_SYMM_PER_CHANNEL
FLOATS = (F32, F16)

# ---- validation helpers ------------------------------------------------------------------------
def fuse_value(ins, idx):
    return int(ins[idx].value)


def num_elements(dims):
    n = 1
    for d in dims:
        n *= int(d)
    return n


# ---- constants prepared once ---------------------------------------------------------------------
# ---- quantized GEMM -----------------------------------------------------------------------------
class QuantGemm:
    """acc[b, n] = sum_k (x[b, k] - zx) * (w[n, k] - zw), exact, via BLAS.

    The weights are prepared once: centred, transposed to [K, N], in float32 when the bound
    max|x - zx| * max_n sum_k |w[n, k] - zw| keeps every partial sum below 2**24.  Above it
    K is split (quant.exact_splits) into chunks whose own bounds stay below 2**24: one float32
    product per chunk, exact, the chunks added in float64 (exact below 2**53), instead of one
    float64 product reading twice the bytes of weights."""

    def __init__(self, w2d, w_zp, x_type, x_zp):
        wc = w2d.astype(np.float64) - w_zp
        colsum = float(np.abs(wc).sum(axis=1).max()) if wc.size else 0.0
        cmax = centered_max(x_type, x_zp)
        self.bound = cmax * colsum
        self.dtype = exact_dtype(self.bound)
        self.splits = None
        if self.dtype != np.float32:
            self.splits = Q.exact_splits(np.abs(wc).T, cmax)
            if self.splits is not None:
                self.dtype = np.float32
        self.wt = np.ascontiguousarray(wc.T, dtype=self.dtype)       # [K, N]
        self.x_zp = x_zp

    def __call__(self, x2d):
        xc = x2d.astype(self.dtype)
        if self.x_zp:
            xc -= self.dtype(self.x_zp)
        if self.splits is None:
            return np.matmul(xc, self.wt)
        (k0, k1), rest = self.splits[0], self.splits[1:]
        acc = np.matmul(xc[:, k0:k1], self.wt[k0:k1]).astype(np.float64)
        for k0, k1 in rest:
            acc += np.matmul(xc[:, k0:k1], self.wt[k0:k1])
        return acc


# ---- FULLY_CONNECTED ------------------------------------------------------------------------------
def _small_float_fc(ins, outs, fuse, size):
    """The lean float32 FULLY_CONNECTED of small tensors with constant weights and bias: the
    general kernel's numpy calls (product into the output, bias added in place, activation)
    with everything else done here, so the same bits in 2-3 calls.  The bias and the
    activation's bounds are kept as arrays of the output's shape (the same float32 values the
    general kernel's broadcast row and scalars take): no broadcast and no scalar converted
    per call."""
    wt = np.ascontiguousarray(np.asarray(ins[1].value).T, dtype=np.float32)
    shape = (int(outs[0].dims[0]), int(outs[0].dims[1]))
    bias = np.ascontiguousarray(np.broadcast_to(np.asarray(ins[2].value, np.float32), shape))
    flat = tuple(ins[0].dims) != shape[:1] + (size,)
    bounds = {C.FUSED_RELU: (0, np.inf), C.FUSED_RELU1: (-1, 1), C.FUSED_RELU6: (0, 6)}.get(fuse)
    clip = Q._CLIP_UFUNC
    if bounds is not None and clip is not None:
        lo, hi = (np.full(shape, v, np.float32) for v in bounds)
        act = None
    else:
        act = _bound_activation(fuse)
        clip = None
    matmul, add = common.product_for(wt, shape[0]), np.add
    if shape == (1, 1) and act is None:
        # one output value: the same calls with none in place (numpy's in-place ufunc on a
        # one-element array costs about 1 us more a call): the product and the sum into new
        # arrays, the last step into the output
        if clip is not None:
            def k1(i, o):
                x = i[0].reshape(-1, size) if flat else i[0]
                clip(add(matmul(x, wt), bias), lo, hi, out=o[0])
        else:
            def k1(i, o):
                x = i[0].reshape(-1, size) if flat else i[0]
                add(matmul(x, wt), bias, out=o[0])
        return k1

    def k(i, o):                      # (outputs passed positionally: a keyword costs about 0.1 us)
        out = o[0]
        x = i[0].reshape(-1, size) if flat else i[0]
        if out.flags.c_contiguous:
            matmul(x, wt, out)
        else:
            out[...] = matmul(x, wt)
        add(out, bias, out)
        if clip is not None:
            clip(out, lo, hi, out)
        elif act is not None:
            act(out)

    def direct(i, o):
        """k's calls on arrays bound for good (Plan.direct_steps): the input's rows and the
        output's layout settled once; None where the rows are not a view of the input or the
        output is not contiguous."""
        out, a = o[0], i[0]
        x = a.reshape(-1, size) if flat else a
        if not out.flags.c_contiguous or x is not a and not (x.base is a or a.base is not None and x.base is a.base):
            return None
        if clip is not None:
            def run():
                matmul(x, wt, out)
                add(out, bias, out)
                clip(out, lo, hi, out)
        elif act is not None:
            def run():
                matmul(x, wt, out)
                add(out, bias, out)
                act(out)
        else:
            def run():
                matmul(x, wt, out)
                add(out, bias, out)
        return run, ()
    k.direct = direct
    return k


def _bound_activation(fuse):
    """fn(a): quant.apply_float_activation(a, fuse) on float32 a, the same ufunc call bound
    once (None for FUSED_NONE)."""
    if fuse == C.FUSED_RELU:
        if Q._CLIP_UFUNC is not None:
            clip, top = Q._CLIP_UFUNC, Q._CLIP_FAST[np.dtype(np.float32)]
            return lambda a: clip(a, 0, top, out=a)
        return lambda a: np.maximum(a, 0, out=a)
    if fuse == C.FUSED_RELU1:
        return lambda a: Q.clip_inplace(a, -1, 1)
    if fuse == C.FUSED_RELU6:
        return lambda a: Q.clip_inplace(a, 0, 6)
    return None


@register
class FullyConnected(Op):
    name = "FULLY_CONNECTED"
    allow_zero_sized = True
    type_levels = {F32: 1, Q8: 1, F16: 3, Q8S: 4}

    def fuse_input(self, ins):
        return 3 if len(ins) > 3 else None

    def validate(self, sig):
        sig.count(4, 1)
        t = sig.types("input", 0, self.type_levels)
        level = self.type_levels[t]
        x, w, b = sig.ins[0], sig.ins[1], sig.ins[2]
        sig.same_type("input", 1, t, "weights")
        if t in FLOATS:
            sig.same_type("input", 2, t, "bias")
        else:
            check_bias_quant(sig, 2, x, w, "weights")
        sig.fuse(3)
        sig.same_type("output", 0, t)
        sig.rank_between("input", 0, 2, 4)
        sig.rank_between("input", 1, 2, 2, "weights")
        sig.rank_between("input", 2, 1, 1, "bias")
        sig.rank_between("output", 0, 2, 2, "output")
        sig.present(1, "weights")
        sig.present(2, "bias")
        if w.rank == 2 and b.rank == 1 and w.dims[0] and b.dims[0] and w.dims[0] != b.dims[0]:
            sig.fail(f"input 2 (bias) has {b.dims[0]} elements but the weights have {w.dims[0]} units")
        if w.rank == 2 and x.rank and x.known and w.dims[1]:
            n = num_elements(x.dims)
            if n % w.dims[1]:
                sig.fail(f"input 0 has {n} elements, not a multiple of input_size {w.dims[1]} "
                         f"(weights dimension 1)")
        o = sig.outs[0]
        if t == Q8 and not o.scale > scale_product(x.scale, w.scale):
            level = max(level, 3)     # output_scale > input_scale * weights_scale before FL3
        return level

    def infer(self, ins):
        x, w, b = ins[0], ins[1], ins[2]
        units, size = int(w.dims[0]), int(w.dims[1])
        if size == 0 or units == 0:
            raise value_error(f"{self.name}: weights dimensions {list(w.dims)} must be positive", False)
        if int(b.dims[0]) != units:
            raise value_error(f"{self.name}: bias has {b.dims[0]} elements, expected {units} (weights units)",
                              False)
        n = num_elements(x.dims)
        if n % size:
            raise value_error(f"{self.name}: input 0 has {n} elements, not a multiple of input_size {size}",
                              False)
        return [(n // size, units)]

    def build(self, ins, outs):
        t = ins[0].type
        fuse = fuse_value(ins, 3)
        units, size = int(ins[1].dims[0]), int(ins[1].dims[1])
        if t == F32 and ins[1].value is not None and ins[2].value is not None and small(ins[0], outs[0]):
            return _small_float_fc(ins, outs, fuse, size)
        if t in FLOATS:
            wt = Derived(ins[1].value, lambda w: np.ascontiguousarray(w.T, dtype=np.float32))
            bias = Derived(ins[2].value, lambda b: b.astype(np.float32))
            act = Q.apply_float_activation
            direct = t == F32

            def k(i, o):
                out = o[0]
                x2 = i[0].reshape(-1, size)
                inplace = direct and out.flags.c_contiguous
                if inplace:
                    acc = out.reshape(-1, units)
                    np.matmul(x2, wt.get(i[1]), out=acc)
                else:
                    acc = np.matmul(x2.astype(np.float32, copy=False), wt.get(i[1]))
                acc += bias.get(i[2])
                act(acc, fuse)
                if not inplace:
                    out[...] = acc.reshape(out.shape)
            return k

        x, w, out = ins[0], ins[1], outs[0]
        real = scale_product(x.scale, w.scale) / out.scale
        lo, hi = Q.activation_range(fuse, out.scale, out.zp, out.type)

        def prep(wv):
            return QuantGemm(wv, w.zp, t, x.zp)

        gemm = Derived(w.value, prep)

        def stage_for(g, bv):
            return OutputStage(real, out.zp, lo, hi, bias=bv, acc_bound=g.bound)

        const_stage = one_row = None
        if w.value is not None and ins[2].value is not None:
            const_stage = stage_for(gemm.val, ins[2].value)
            if gemm.val.dtype == np.float32:
                const_stage.prepare_f32(out.dtype)
            if out.dims is not None and all(out.dims):
                # one row (a streaming step): quant.DirectProduct, else TableProduct, unless the
                # row is long and its product runs in float32 (a classifier's last layer: half
                # the bytes of weights of their float64 product; 1280 -> 1000 units: 0.53 -> 0.3 ms)
                long_f32 = units > 2 * Q.SMALL_VALUES and (const_stage.f32 or gemm.val.splits)
                if int(out.dims[0]) == 1 and not long_f32:
                    one_row = Q.DirectProduct.for_stage(gemm.val.wt, x.zp, const_stage, out.dtype) \
                        or Q.TableProduct.for_stage(gemm.val.wt, x.zp, const_stage, out.dtype)
                if one_row is None:                # (its table form made the step table itself)
                    const_stage.prepare_small(int(np.prod(out.dims)))
                one_row = getattr(one_row, "run", one_row)      # a DirectProduct's closure

        wsrc, bsrc = w.value, ins[2].value

        def k(i, o):
            if one_row is not None and i[1] is wsrc and i[2] is bsrc and i[0].size == size:
                one_row(i[0], o[0])
                return
            g = gemm.get(i[1])
            const = const_stage is not None and g is gemm.val and i[2] is bsrc
            st = const_stage if const else stage_for(g, i[2])
            acc = g(i[0].reshape(-1, size))
            st.consume(acc, o[0])                   # acc: a fresh product
        return k


# ---- BATCH_MATMUL ---------------------------------------------------------------------------------
@register
class BatchMatmul(Op):
    name = "BATCH_MATMUL"
    optional_inputs = (2, 3)
    type_levels = {F32: 6, F16: 6, Q8S: 6, I32: 6}

    def validate(self, sig):
        sig.count((2, 3, 4), 1)
        t = sig.types("input", 0, self.type_levels)
        a, b = sig.ins[0], sig.ins[1]
        sig.same_type("input", 1, t)
        sig.same_type("output", 0, t)
        for k in (2, 3):
            if k < len(sig.ins):
                sig.types("input", k, (C.BOOL,), f"adj_{'x' if k == 2 else 'y'}")
        for where, k in (("input", 0), ("input", 1), ("output", 0)):
            sig.rank_between(where, k, 2, 4)
        if a.rank and b.rank:
            if a.rank != b.rank:
                sig.fail(f"inputs 0 and 1 must have the same rank, got {a.rank} and {b.rank}")
            for d, (u, v) in enumerate(zip(a.dims[:-2], b.dims[:-2])):
                if u and v and u != v:
                    sig.fail(f"batch dimension {d} differs: {u} (input 0) vs {v} (input 1)")
            ax, ay = self._adj(sig.ins, 2), self._adj(sig.ins, 3)
            if ax is not None and ay is not None:
                kx = a.dims[-2] if ax else a.dims[-1]
                ky = b.dims[-1] if ay else b.dims[-2]
                if kx and ky and kx != ky:
                    sig.fail(f"inner dimensions differ: {kx} (input 0{' adjointed' if ax else ''}) vs "
                             f"{ky} (input 1{' adjointed' if ay else ''})")
        o = sig.outs[0]
        if a.rank and o.rank and o.rank != a.rank:
            sig.fail(f"output 0 has rank {o.rank}, expected {a.rank} (rank of the inputs)")
        return 6

    @staticmethod
    def _adj(ins, k):
        if k >= len(ins) or ins[k].omitted:
            return False
        v = ins[k].value
        return None if v is None else bool(v)

    def infer(self, ins):
        a, b = ins[0].dims, ins[1].dims
        ax, ay = self._adj(ins, 2), self._adj(ins, 3)
        if len(a) != len(b) or tuple(a[:-2]) != tuple(b[:-2]):
            raise value_error(f"{self.name}: inputs {list(a)} and {list(b)} must have the same rank "
                              f"and batch dimensions", False)
        r, kx = (a[-1], a[-2]) if ax else (a[-2], a[-1])
        ky, c = (b[-1], b[-2]) if ay else (b[-2], b[-1])
        if kx != ky:
            raise value_error(f"{self.name}: inner dimensions differ: {kx} vs {ky} (shapes {list(a)}, "
                              f"{list(b)}, adj_x={ax}, adj_y={ay})", False)
        return [tuple(a[:-2]) + (r, c)]

    def build(self, ins, outs):
        t = ins[0].type
        ax, ay = self._adj(ins, 2), self._adj(ins, 3)
        k_dim = int(ins[0].dims[-2] if ax else ins[0].dims[-1])

        def operands(i):
            x, y = i[0], i[1]
            if ax:
                x = np.swapaxes(x, -1, -2)
            if ay:
                y = np.swapaxes(y, -1, -2)
            return x, y

        if t in FLOATS:
            direct = t == F32

            def k(i, o):
                x, y = operands(i)
                if direct and o[0].flags.c_contiguous:
                    np.matmul(x, y, out=o[0])
                else:
                    o[0][...] = np.matmul(x.astype(np.float32), y.astype(np.float32))
            return k

        if t == I32:
            def k(i, o):
                x, y = operands(i)
                mx = int(np.abs(x).max(initial=0))
                my = int(np.abs(y).max(initial=0))
                if mx * my * max(k_dim, 1) < (1 << 53):
                    r = np.matmul(x.astype(np.float64), y.astype(np.float64))
                    o[0][...] = r.astype(np.int64).astype(np.int32)     # exact; int32 wrap-around
                else:
                    o[0][...] = np.matmul(x.astype(np.int64), y.astype(np.int64)).astype(np.int32)
            return k

        xa, ya, out = ins[0], ins[1], outs[0]
        real = scale_product(xa.scale, ya.scale) / out.scale
        lo, hi = Q.qrange(out.type)
        bound = centered_max(t, xa.zp) * centered_max(t, ya.zp) * max(k_dim, 1)
        dt = exact_dtype(bound)
        stage = OutputStage(real, out.zp, lo, hi, acc_bound=bound)
        za, zb = dt(xa.zp), dt(ya.zp)

        def k(i, o):
            x, y = operands(i)
            xc = x.astype(dt)
            xc -= za
            yc = y.astype(dt)
            yc -= zb
            stage(np.matmul(xc, yc), o[0])
        return k
