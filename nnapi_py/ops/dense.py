"""Dense layers: FULLY_CONNECTED, BATCH_MATMUL.

This module also holds the helpers the convolution family (conv.py) shares with the dense
layers:

* ``OutputStage`` -- the requantization of int32 accumulators to a quant8 output with the
  reference rounding of quant.py, vectorised and per-channel capable, in five float64 passes
  in the usual case (rounding constants, bias and output zero point folded into one term);
* ``exact_dtype`` -- whether an integer-valued product can be computed exactly by float32
  BLAS or needs float64;
* ``Derived`` -- a value derived from an operand (e.g. a packed filter), computed once at
  build time when the operand is a constant and recomputed per call otherwise;
* the validation helpers for fused activations and biases of quantized layers.
"""
import numpy as np

from .. import constants as C
from .base import Op, register, value_error
from . import quant as Q

F16, F32, I32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32, C.TENSOR_INT32
Q8, Q8S = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED
QPC = C.TENSOR_QUANT8_SYMM_PER_CHANNEL
FLOATS = (F32, F16)

_EXACT_F32 = float(1 << 24)      # integers below this are exact float32 sums


def tname(t):
    return C.TYPE_NAMES.get(t, str(t))


# ---- validation helpers ------------------------------------------------------------------------
def check_fuse(sig, idx):
    """Input idx must be an INT32 FuseCode (value checked once known)."""
    if sig.ins[idx].type != C.INT32:
        sig.fail(f"input {idx} (fused activation) has type {tname(sig.ins[idx].type)}, expected INT32")
    f = sig.scalar_value(idx)
    if f is not None and f not in (0, 1, 2, 3):
        sig.fail(f"input {idx} (fused activation) must be a FuseCode 0..3, got {f}")


def check_rank(sig, where, idx, rank, what):
    ops = sig.ins if where == "input" else sig.outs
    r = ops[idx].rank
    if r is not None and r != 0 and r != rank:
        sig.fail(f"{where} {idx} ({what}) has rank {r}, expected {rank}")


def scale_product(a, b):
    """input_scale * filter_scale as the reference computes it (float32 product)."""
    return float(np.float32(a) * np.float32(b))


def check_bias_quant(sig, bias_idx, inp, filt, what="filter"):
    """Bias of a quantized layer: TENSOR_INT32, zeroPoint 0, scale in.scale * filter.scale
    (0 for a per-channel filter)."""
    b = sig.ins[bias_idx]
    if b.type != I32:
        sig.fail(f"input {bias_idx} (bias) has type {tname(b.type)}, expected TENSOR_INT32 "
                 f"for a {tname(inp.type)} input")
    if b.zp != 0:
        sig.fail(f"input {bias_idx} (bias) must have zeroPoint 0, got {b.zp}")
    if filt.type == QPC:
        if b.scale != 0.0:
            sig.fail(f"input {bias_idx} (bias) must have scale 0 with a per-channel quantized {what} "
                     f"(its scales are input scale × {what} scales), got {b.scale}")
        return
    want = scale_product(inp.scale, filt.scale)
    if not abs(b.scale - want) <= 1e-6 * min(b.scale, want):
        sig.fail(f"input {bias_idx} (bias) scale {b.scale} must equal input scale × {what} scale "
                 f"({inp.scale} × {filt.scale} = {want})")


def fuse_value(ins, idx):
    return int(ins[idx].value)


def num_elements(dims):
    n = 1
    for d in dims:
        n *= int(d)
    return n


# ---- constants prepared once ---------------------------------------------------------------------
class Derived:
    """fn(array) computed once from a constant operand, per call from a non-constant one.

    At build time ``Info.value`` is set for constants; in the dynamic path the runtime also
    passes the current input arrays as values, so the result is only reused when the kernel
    receives the very same array object again (constants are the same object every run)."""
    __slots__ = ("src", "val", "fn")

    def __init__(self, value, fn):
        self.fn = fn
        self.src = value
        self.val = None if value is None else fn(value)

    def get(self, a):
        if a is self.src and self.val is not None:
            return self.val
        return self.fn(a)


# ---- exact integer products via BLAS ---------------------------------------------------------
def centered_max(type_code, zp):
    """Largest |x - zp| over the integer range of a quant8 type."""
    lo, hi = Q.qrange(type_code)
    return max(hi - zp, zp - lo)


def exact_dtype(bound):
    """BLAS dtype whose sums of integer products are exact when every partial sum is bounded
    by `bound`: float32 below 2**24, else float64 (exact below 2**53, far beyond any quant8
    layer: 255 * 255 * K < 2**53 for K < 10**11)."""
    return np.float32 if bound < _EXACT_F32 else np.float64


# ---- requantization ------------------------------------------------------------------------------
class OutputStage:
    """int32 accumulators -> quant8 output, bit-exact with quant.multiply_by_quantized_multiplier
    (the reference's fixed-point requantization), vectorised, per-tensor or per-channel.

    With (q, shift) = quant.quantize_multiplier(real), left = max(shift, 0), e = max(-shift, 0):
        reference(x) = RDBPOT(SRDHM(x << left, q), e)
    SRDHM(x, q) = floor((x*q + 2**30) / 2**31) for q >= 0, and RDBPOT(r, e) =
    floor((r + 2**(e-1) - [r < 0]) / 2**e); nested floor divisions by powers of two give
        reference(x) = floor((x*q + 2**30 + [e>0] (2**(30+e) - [x*q + 2**30 < 0] 2**31)) / 2**(31+e)).
    The bias (x = acc + bias) and the output zero point are folded into the additive constant.
    Three evaluations, chosen once:
      "float"   float64, exact for the values that matter (see _try_float): multiply, add,
                floor, clamp, store -- the usual case;
      "int64"   the formula above in int64 with one common denominator 2**(31+E) for all
                channels: cast, multiply, add, >> 31, [< 0] correction, >> E, clamp, store;
      "general" the two reference steps literally, per-channel vectors (multipliers > 1,
                multipliers >= 1/2 mixed with smaller ones, int64 headroom exceeded).
    The [.. < 0] correction only changes results <= zp, so it is skipped when the lower clamp is
    >= zp (ReLU, ReLU6).  Per-channel vectors are tiled along whole output rows (numpy's inner
    loops are slow on a short broadcast axis).  acc_bound bounds |acc| for the int64 headroom
    check (default: the int32 range).
    """

    def __init__(self, reals, zp, lo, hi, bias=None, acc_bound=None):
        reals = np.atleast_1d(np.asarray(reals, np.float64))
        bias = None if bias is None else np.atleast_1d(np.asarray(bias, np.int64))
        nch = max(len(reals), 1 if bias is None else len(bias))
        reals = np.broadcast_to(reals, (nch,))
        bias_l = [0] * nch if bias is None else [int(v) for v in np.broadcast_to(bias, (nch,))]
        q, left, right = [], [], []
        for r in reals:
            qq, s = Q.quantize_multiplier(float(r))
            q.append(int(qq))
            left.append(max(s, 0))
            right.append(max(-s, 0))
        self.lo, self.hi, self.zp = int(lo), int(hi), int(zp)
        self._tiles = {}
        amax = (1 << 31) if acc_bound is None else int(acc_bound) + 1
        if self._try_float(q, left, right, bias_l):
            return
        if not self._try_int64(q, left, right, bias_l, amax):
            self.mode = "general"
            self.bias_arr = self._arr(bias_l)
            self.q = self._arr(q)
            self.left = self._arr(left)
            self.right = self._arr(right)
            self.any_left = any(left)
            self.any_right = any(right)
            self.half = self._arr([(1 << (e - 1)) if e > 0 else 0 for e in right])
            self.has_right = self._arr([1 if e > 0 else 0 for e in right])

    def _try_int64(self, q, left, right, bias_l, amax):
        E = max(right)
        if any(left) or (E > 0 and min(right) == 0):
            return False
        # common denominator 2**(31+E): numerator and denominator of channel c scaled by 2**(E-e)
        S = 31 + E
        K, qq, corr = [], [], []
        for c in range(len(q)):
            m = E - right[c]
            qc = q[c] << m
            k = (bias_l[c] * q[c] + (1 << 30)) << m
            if E > 0:
                k += 1 << (30 + E)
            k += self.zp << S
            if (amax + abs(bias_l[c])) * qc + abs(k) + (abs(self.zp) + 2) * (1 << S) >= (1 << 62):
                return False
            K.append(k)
            qq.append(qc)
            corr.append(1 << m)
        self.mode = "int64"
        self.q = self._arr(qq)
        self.K = self._arr(K)
        self.E = np.int64(E)
        # x*q + 2**30 < 0  <=>  p < 2**(30+E) + zp * 2**S  <=>  (p >> 31) < thr
        self.thr = np.int64(((1 << (30 + E)) + (self.zp << S)) >> 31) if E > 0 else None
        self.need_neg = self.thr is not None and self.lo < self.zp
        # the [.. < 0] term is 2**31 before scaling, 2**(31+m) after: 2**m once shifted by 31
        self.corr = None if all(v == 1 for v in corr) else self._arr(corr)
        self.nvec = max((len(a) for a in (self.q, self.K, self.corr) if isinstance(a, np.ndarray)),
                        default=0)
        return True

    def _try_float(self, q, left, right, bias_l):
        """float64 variant (5 passes instead of 8): with S = 31 + e,
            z = acc * (q 2**-S) + (bias q + 2**30 + [e>0] 2**(30+e)) 2**-S + zp,
            reference = floor(z - [e>0][z < zp + 1/2] 2**-e)   (then clamped).
        Exactness: q 2**-S is exact; acc * q 2**-S is exact while |acc q| < 2**53, i.e. while
        |product| < R = 2**(22-e); the constant is exact (|K| < R/4 is required) and so is the
        sum while it stays below R (resolution 2**-S).  With e <= 10, R >= 2**12: every z that
        can land inside a quant8 clamp range (|z| < 2**9) is computed exactly, and any product
        beyond R (possibly rounded; rounding is monotonic) gives |z| > 3R/4 > 2**9 on the same
        side as the exact value, so it clamps identically.  No bound on acc is needed."""
        if any(left) or max(right) > 10 or max(abs(self.lo), abs(self.hi)) >= (1 << 9) \
                or abs(self.zp) >= (1 << 9):
            return False
        mf, kf, dl = [], [], []
        for c in range(len(q)):
            e = right[c]
            s = 31 + e
            k = bias_l[c] * q[c] + (1 << 30) + ((1 << (30 + e)) if e > 0 else 0)
            if abs(k) >= (1 << 52) or abs(k) / 2.0 ** s + abs(self.zp) >= 2.0 ** (20 - e):
                return False
            mf.append(q[c] / 2.0 ** s)        # exact: a 31-bit integer times a power of two
            kf.append(k / 2.0 ** s + self.zp)  # exact: |k| < 2**52 and the zp shift fits
            dl.append(2.0 ** -e if e > 0 else 0.0)
        self.mode = "float"

        def arr(v):
            return np.float64(v[0]) if all(x == v[0] for x in v) else np.asarray(v, np.float64)
        self.q, self.K, self.corr = arr(mf), arr(kf), arr(dl)
        self.thr = np.float64(self.zp + 0.5)
        self.need_neg = self.lo < self.zp and any(dl)
        self.nvec = max((len(a) for a in (self.q, self.K, self.corr) if isinstance(a, np.ndarray)),
                        default=0)
        return True

    def _float(self, acc, out):
        q, K, corr = self.q, self.K, self.corr
        z = acc.astype(np.float64)
        v = z
        if self.nvec and z.ndim >= 3 and z.shape[-2] > 1:
            tile = z.shape[-2]
            v = z.reshape(-1, tile * self.nvec)
            q, K, corr = self._tiled(tile)
        v *= q
        v += K
        if self.need_neg:
            neg = v < self.thr
            if isinstance(corr, np.ndarray):
                v -= neg * corr
            else:
                v -= neg * float(corr)
        np.floor(v, out=v)
        np.clip(z, self.lo, self.hi, out=z)
        out[...] = z.reshape(out.shape) if out.shape != z.shape else z

    @staticmethod
    def _arr(v):
        if all(x == v[0] for x in v):
            return np.int64(v[0])
        return np.asarray(v, np.int64)

    def __call__(self, acc, out):
        """acc: integer-valued array (int or exact float), channels last, shaped like out
        (or reshapeable to it); writes the clamped quantized result into out."""
        if self.mode == "float":
            return self._float(acc, out)
        if self.mode == "general":
            return self._general(acc, out)
        if acc.dtype == np.int64 and acc.flags.c_contiguous:
            p = acc
        elif acc.dtype == np.float32:
            p = acc.astype(np.int32).astype(np.int64)    # exact below 2**24: faster than one cast
        else:
            p = acc.astype(np.int64)
        q, K, corr = self.q, self.K, self.corr
        v = p
        if self.nvec and p.ndim >= 3 and p.shape[-2] > 1:
            # per-channel vectors tiled along whole rows: long contiguous inner loops
            tile = p.shape[-2]
            v = p.reshape(-1, tile * self.nvec)
            q, K, corr = self._tiled(tile)
        v *= q
        v += K
        v >>= 31
        if self.need_neg:
            neg = v < self.thr
            if corr is None:
                v -= neg.view(np.uint8)
            else:
                d = neg.astype(np.int64)
                d *= corr
                v -= d
        if self.E:
            v >>= self.E
        np.clip(p, self.lo, self.hi, out=p)
        if out.shape != p.shape:
            p = p.reshape(out.shape)
        out[...] = p

    def _tiled(self, tile):
        t = self._tiles.get(tile)
        if t is None:
            def tl(a):
                return np.tile(a, tile) if isinstance(a, np.ndarray) else a
            t = (tl(self.q), tl(self.K), tl(self.corr))
            if len(self._tiles) < 8:
                self._tiles[tile] = t
        return t

    def _general(self, acc, out):
        x = np.asarray(acc).astype(np.int64) + self.bias_arr
        if self.any_left:
            x <<= self.left
            np.clip(x, Q.INT32_MIN, Q.INT32_MAX, out=x)
        x *= self.q
        x += 1 << 30
        x >>= 31                                   # SRDHM (q >= 0): floor((x*q + 2**30) / 2**31)
        if self.any_right:                         # RDBPOT: floor((r + 2**(e-1) - [r<0]) / 2**e)
            x += self.half - (x < 0) * self.has_right
            x >>= self.right
        x += self.zp
        np.clip(x, self.lo, self.hi, out=x)
        out[...] = x.reshape(out.shape)


# ---- quantized GEMM -----------------------------------------------------------------------------
class QuantGemm:
    """acc[b, n] = sum_k (x[b, k] - zx) * (w[n, k] - zw), exact, via BLAS.

    The weights are prepared once: centred, transposed to [K, N], in the narrowest dtype whose
    sums are exact for the bound max|x - zx| * max_n sum_k |w[n, k] - zw|."""

    def __init__(self, w2d, w_zp, x_type, x_zp):
        wc = w2d.astype(np.float64) - w_zp
        colsum = float(np.abs(wc).sum(axis=1).max()) if wc.size else 0.0
        self.bound = centered_max(x_type, x_zp) * colsum
        self.dtype = exact_dtype(self.bound)
        self.wt = np.ascontiguousarray(wc.T, dtype=self.dtype)       # [K, N]
        self.x_zp = x_zp

    def __call__(self, x2d):
        xc = x2d.astype(self.dtype)
        if self.x_zp:
            xc -= self.dtype(self.x_zp)
        return np.matmul(xc, self.wt)


# ---- FULLY_CONNECTED ------------------------------------------------------------------------------
@register
class FullyConnected(Op):
    name = "FULLY_CONNECTED"
    allow_zero_sized = True
    type_levels = {F32: 1, Q8: 1, F16: 3, Q8S: 4}

    def validate(self, sig):
        sig.count(4, 1)
        t = sig.types("input", 0, self.type_levels)
        level = self.type_levels[t]
        x, w, b = sig.ins[0], sig.ins[1], sig.ins[2]
        if w.type != t:
            sig.fail(f"input 1 (weights) has type {tname(w.type)}, expected {tname(t)} (same as input 0)")
        if t in FLOATS:
            if b.type != t:
                sig.fail(f"input 2 (bias) has type {tname(b.type)}, expected {tname(t)} (same as input 0)")
        else:
            check_bias_quant(sig, 2, x, w, "weights")
        check_fuse(sig, 3)
        sig.same_type("output", 0, t)
        if x.rank is not None and x.rank != 0 and not 2 <= x.rank <= 4:
            sig.fail(f"input 0 has rank {x.rank}, expected 2..4")
        check_rank(sig, "input", 1, 2, "weights")
        check_rank(sig, "input", 2, 1, "bias")
        check_rank(sig, "output", 0, 2, "output")
        for k, what in ((1, "weights"), (2, "bias")):
            if sig.ins[k].omitted:
                sig.fail(f"input {k} ({what}) is required and cannot be omitted")
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

        const_stage = None
        if w.value is not None and ins[2].value is not None:
            const_stage = stage_for(gemm.val, ins[2].value)

        def k(i, o):
            g = gemm.get(i[1])
            st = const_stage if (const_stage is not None and g is gemm.val and i[2] is ins[2].value) \
                else stage_for(g, i[2])
            acc = g(i[0].reshape(-1, size))
            st(acc, o[0])
        return k


# ---- BATCH_MATMUL ---------------------------------------------------------------------------------
@register
class BatchMatmul(Op):
    name = "BATCH_MATMUL"
    type_levels = {F32: 6, F16: 6, Q8S: 6, I32: 6}

    def validate(self, sig):
        sig.count((2, 3, 4), 1)
        t = sig.types("input", 0, self.type_levels)
        a, b = sig.ins[0], sig.ins[1]
        if b.type != t:
            sig.fail(f"input 1 has type {tname(b.type)}, expected {tname(t)} (same as input 0)")
        sig.same_type("output", 0, t)
        for k in (2, 3):
            if k < len(sig.ins) and sig.ins[k].type != C.BOOL:
                sig.fail(f"input {k} (adj_{'x' if k == 2 else 'y'}) has type {tname(sig.ins[k].type)}, "
                         f"expected BOOL")
        for where, ops in (("input", sig.ins[:2]), ("output", sig.outs)):
            for k, o in enumerate(ops):
                if o.rank is not None and o.rank != 0 and not 2 <= o.rank <= 4:
                    sig.fail(f"{where} {k} has rank {o.rank}, expected 2..4")
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
