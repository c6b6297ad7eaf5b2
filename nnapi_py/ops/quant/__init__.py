"""Quantized arithmetic shared by every operation: one place, the reference rounding.

NNAPI's reference CPU implementation (like TFLite's) requantizes with 32-bit fixed-point
multipliers: a real multiplier M is written as q * 2**shift with q a Q31 integer in
[2**30, 2**31), and x * M is computed as

    RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x << max(shift, 0), q), max(-shift, 0))

where the doubling high multiply rounds half away from zero ((a*b + 2**30) >> 31 with a
nudge for negatives, truncated toward zero) and the power-of-two division rounds half away
from zero.  The functions below do exactly that on int64 numpy arrays, vectorised.

Also here: OutputStage (that requantization for the int32 accumulators of the dense and
convolution layers, per channel, folded into a few float64/int64 passes), exact_dtype /
centered_max (when integer products are exact in float32 BLAS), the exact std::round
(round_half_away) and the 256-entry tables of 8-bit operands.
"""
import math
import threading

import numpy as np

from ... import constants as C
from ..base import kept_array

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1

# np.clip on an ndarray calls the `clip` ufunc through two Python wrappers (about 1.5 us per
# call); kernels of small tensors (streaming models) clamp several times per operation
_CLIP_UFUNC = getattr(getattr(getattr(np, "_core", None), "umath", None), "clip", None)


def clip_inplace(a, lo, hi):
    """a clamped to [lo, hi] in place (NaN stays NaN).

    numpy's clip ufunc has vector loops for every dtype but float16, and is 3-4x faster than
    np.maximum / np.minimum with a scalar bound (whose broadcast operand takes a scalar loop);
    float16 is the other way round.  The ufunc is called directly (np.clip goes through two
    Python wrappers, about 1.5 us a call: streaming models clamp small tensors often)."""
    if a.dtype == np.float16:
        np.maximum(a, lo, out=a)
        np.minimum(a, hi, out=a)
    elif _CLIP_UFUNC is not None:
        _CLIP_UFUNC(a, lo, hi, out=a)
    else:
        np.clip(a, lo, hi, out=a)


def relu_into(x, out):
    """out = max(x, 0), NaN kept: the fused RELU (the reference's std::max(x, 0.f)).  Through
    the clip ufunc where it is fast (see clip_inplace)."""
    if x.dtype in _CLIP_FAST:
        _CLIP_UFUNC(x, 0, _CLIP_FAST[x.dtype], out=out)
    else:
        np.maximum(x, 0, out=out)


def negpart_into(x, out):
    """out = min(x, 0), NaN kept (see relu_into)."""
    if x.dtype in _CLIP_FAST:
        _CLIP_UFUNC(x, -_CLIP_FAST[x.dtype], 0, out=out)
    else:
        np.minimum(x, 0, out=out)


_FMAX_UPTO = 8192         # clamp_into: np.fmax on at most this many values (no upper bound) ...
_FMAX_FMIN_UPTO = 2048    # ... np.fmax and np.fmin on at most this many (both bounds)


def clamp_into(x, lo, hi, out):
    """out = std::min(std::max(lo, x), hi) as the reference's RELU/RELU1/RELU6 compute it:
    NaN becomes lo (hi None: no upper bound; -0.0 may stay -0.0 where the reference returns
    lo = +0.0, equal as numbers).  float32/float64: one clip pass, plus a
    minimum reduction that finds the NaNs clip keeps (2x faster than np.fmax / np.fmin with
    scalar bounds, see clip_inplace) -- except on small tensors, where np.fmax (and np.fmin)
    alone cost less than those three calls: up to _FMAX_UPTO values (RELU) or _FMAX_FMIN_UPTO
    (both bounds).  This machine: RELU on 16 values 1.2 against 4.3 us, on 4096 4.7 against
    7.5, on 16384 14.6 against 13.6; RELU6 on 1024 values 4.4 against 6.0, on 4096 9.4 against
    7.6.  np.fmax returns lo = +0.0 for -0.0, as the reference's std::max(lo, x) does."""
    if x.dtype in _CLIP_FAST and x.size > (_FMAX_UPTO if hi is None else _FMAX_FMIN_UPTO):
        _CLIP_UFUNC(x, lo, _CLIP_FAST[x.dtype] if hi is None else hi, out=out)
        if out.size and np.isnan(np.minimum.reduce(out, axis=None)):
            np.copyto(out, lo, where=np.isnan(out))
    else:
        np.fmax(x, x.dtype.type(lo), out=out)
        if hi is not None:
            np.fmin(out, x.dtype.type(hi), out=out)


_CLIP_FAST = {} if _CLIP_UFUNC is None else {np.dtype(np.float32): np.float32(np.inf),
                                              np.dtype(np.float64): np.inf}


def quantize_multiplier(real):
    """real >= 0 -> (q, shift) with real ~= q * 2**(shift - 31), q in [2**30, 2**31)."""
    if real == 0.0:
        return 0, 0
    m, e = math.frexp(real)            # real = m * 2**e, m in [0.5, 1)
    q = int(math.floor(m * (1 << 31) + 0.5))        # std::round: half away from zero
    if q == (1 << 31):
        q //= 2
        e += 1
    if e < -31:                         # too small to represent: multiplier 0
        return 0, 0
    return q, e


def quantize_multipliers(reals):
    """quantize_multiplier over an array of reals >= 0: (q, shift) as int64 arrays, the same
    values (frexp, then the mantissa times 2**31 rounded half up; 2**31 carried into the
    exponent; a real below 2**-32 or 0 gives (0, 0)).  Non-finite reals go through the scalar
    function (which refuses them as before)."""
    r = np.asarray(reals, np.float64)
    if not np.all(np.isfinite(r)):
        pairs = [quantize_multiplier(float(v)) for v in r.ravel()]
        return (np.array([p[0] for p in pairs], np.int64).reshape(r.shape),
                np.array([p[1] for p in pairs], np.int64).reshape(r.shape))
    m, e = np.frexp(r)
    q = np.floor(m * float(1 << 31) + 0.5).astype(np.int64)
    top = q == (1 << 31)
    q = np.where(top, q >> 1, q)
    e = np.where(top, e + 1, e).astype(np.int64)
    zero = (r == 0.0) | (e < -31)
    return np.where(zero, 0, q), np.where(zero, 0, e)


def _srdhm(a, q):
    """SaturatingRoundingDoublingHighMul of an int64 array (int32 range) by int q."""
    ab = a * np.int64(q)
    s = ab + np.int64(1 << 30)
    s += (ab >> 63) & np.int64(1 - (1 << 31))     # nudge 1 - 2**30 for a negative product
    s += (s >> 63) & np.int64((1 << 31) - 1)      # C's division truncates toward zero
    s >>= 31
    if q == INT32_MIN:
        s = np.where(a == INT32_MIN, INT32_MAX, s)
    return s


def _rdbpot(x, exponent):
    """RoundingDivideByPOT: x / 2**exponent rounded half away from zero."""
    if exponent <= 0:
        return x
    return (x + np.int64(1 << (exponent - 1)) + (x >> 63)) >> exponent


def multiply_by_quantized_multiplier(x, q, shift):
    """x (int array, int32 range) * (q, shift) from quantize_multiplier, reference rounding."""
    x = np.asarray(x, dtype=np.int64)
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    if left:
        x = x << left
        x = np.clip(x, INT32_MIN, INT32_MAX)
    return _rdbpot(_srdhm(x, q), right)


class Requant:
    """A real multiplier prepared once (at compile time)."""
    __slots__ = ("q", "shift", "real")

    def __init__(self, real):
        self.real = real
        self.q, self.shift = quantize_multiplier(real)

    def __call__(self, x):
        return multiply_by_quantized_multiplier(x, self.q, self.shift)


def qrange(type_code):
    """(min, max) integer range of a quantized tensor type."""
    dt = C.DTYPES[type_code]
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


def activation_range(fuse, scale, zp, type_code):
    """Integer clamp range for a fused activation in the output's quantized domain."""
    lo, hi = qrange(type_code)

    s = np.float32(scale)

    def q(v):                      # std::round(float(v) / scale): float32 division, half away
        r = float(np.float32(v) / s)
        return zp + int(math.copysign(math.floor(abs(r) + 0.5), r))

    if fuse == C.FUSED_RELU:
        lo = max(lo, q(0.0))
    elif fuse == C.FUSED_RELU1:
        lo, hi = max(lo, q(-1.0)), min(hi, q(1.0))
    elif fuse == C.FUSED_RELU6:
        lo, hi = max(lo, q(0.0)), min(hi, q(6.0))
    return lo, hi


def float_activation(fuse):
    """(lo, hi) float clamp for a fused activation, or None for FUSED_NONE."""
    return {C.FUSED_NONE: None, C.FUSED_RELU: (0.0, None), C.FUSED_RELU1: (-1.0, 1.0),
            C.FUSED_RELU6: (0.0, 6.0)}.get(fuse, "bad")


def apply_float_activation(out, fuse):
    """Clamp a float array in place."""
    if fuse == C.FUSED_RELU:
        relu_into(out, out)
    elif fuse == C.FUSED_RELU1:
        clip_inplace(out, -1, 1)
    elif fuse == C.FUSED_RELU6:
        clip_inplace(out, 0, 6)


def dequantize(a, scale, zp):
    """Quantized integer array -> float32 real values."""
    return (a.astype(np.float32) - np.float32(zp)) * np.float32(scale)


def qrange_of_dtype(dt):
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


def store(out, acc, lo, hi):
    """Clamp an integer accumulator to [lo, hi] and write it into out."""
    clip_inplace(acc, lo, hi)
    out[...] = acc


# ---- exact integer products via BLAS, requantization of accumulators (conv.py, dense.py) -------
_EXACT_F32 = float(1 << 24)      # integers below this are exact float32 sums


def scale_product(a, b):
    """input_scale * filter_scale as the reference computes it (float32 product)."""
    return float(np.float32(a) * np.float32(b))


def centered_max(type_code, zp):
    """Largest |x - zp| over the integer range of a quant8 type."""
    lo, hi = qrange(type_code)
    return max(hi - zp, zp - lo)


def exact_dtype(bound):
    """BLAS dtype whose sums of integer products are exact when every partial sum is bounded
    by `bound`: float32 below 2**24, else float64 (exact below 2**53, far beyond any quant8
    layer: 255 * 255 * K < 2**53 for K < 10**11)."""
    return np.float32 if bound < _EXACT_F32 else np.float64


_WORK = threading.local()


def _work(key, shape):
    """A work array of this thread's, reused from call to call (by any kernel: its contents
    live only within one call)."""
    d = getattr(_WORK, "d", None)
    if d is None:
        d = _WORK.d = {}
    n = math.prod(shape)
    a = d.get(key)
    if a is None or a.size < n:
        a = d[key] = np.empty(n, key[1])
    return a[:n].reshape(shape)


def exact_splits(abs_w, cmax, most=8):
    """Chunks [(k0, k1), ...] of the K rows of abs_w ([K, N], |centred weights|) such that
    cmax * max_n sum_{k0 <= k < k1} abs_w[k, n] < 2**24 for each: every partial sum of a chunk's
    float32 product is then an exact integer (the K-split of a product whose whole bound is
    2**24 or more).  Greedy from the first row; None when one row alone is too large or more
    than `most` chunks would be needed."""
    k = abs_w.shape[0]
    cs = np.cumsum(np.vstack([np.zeros((1, abs_w.shape[1])), abs_w]), axis=0)      # [K + 1, N]
    limit = _EXACT_F32 / max(cmax, 1)
    out, k0 = [], 0
    while k0 < k:
        reach = (cs[k0 + 1:] - cs[k0]).max(axis=1)           # non-decreasing in the chunk's end
        k1 = k0 + int(np.searchsorted(reach, limit, side="left"))    # rows with reach < limit
        if k1 == k0 or len(out) == most:
            return None
        out.append((k0, k1))
        k0 = k1
    return out


_SMALL_VALUES = SMALL_VALUES = 128   # OutputStage calls on at most this many values use the step table
_SMALL_STEPS = 1 << 15   # ... with at most this many steps (8-bit outputs, <= 128 channels: the
                         # table takes about 4 ms to make for 64 channels)


# prepare_f32's windows around the line's guess of each step: the narrow one finds every step
# of the corpus's models (the guess is exact, or 1-2 low on the corrected side, which the guess
# adds; without the correction its first two points); the wide one is taken only where the
# narrow one misses a step
_STEP_WINDOWS = (np.arange(-1, 2, dtype=np.float64), np.arange(-4, 5, dtype=np.float64))
# prepare_f32's second search (OutputStage._search_constants): the multiplier nudged by 0, 1,
# -1, ... _M_ULPS ulps (4: over the three quantized CNNs of the corpus, 16 proves a few more
# channels for twice the compilation time); the constant's walk to the least one passing the
# steps, at most _K_WALK ulps each way, over the _CRITICAL_ROWS steps that set it
_M_ULPS = 4
_M_NUDGES = [0] + [s * d for d in range(1, _M_ULPS + 1) for s in (1, -1)]
_K_WALK = 8
_CRITICAL_ROWS = 8
# the corrected negative side in one float32 term (prepare_f32, _f32_all) where 2**-e >= 2**-_NEG_MAX_E
_NEG_SCALED = True
_NEG_MAX_E = 14
_PROBE_CHANNELS = 64            # prepare_f32 on stages of more channels: a sample of this many first


def _walk_to_least(c, holds, walk):
    """Each element of c (float32) moved up an ulp at a time until holds(c) is true there (at
    most walk steps), then down while holds still is: its least float32 value that holds,
    where that lies within the walk of the start (elsewhere c is left where the walk ends;
    the callers' checks decide).  holds must be non-decreasing in c, element by element."""
    inf = np.float32(np.inf)
    for _ in range(walk):
        low = ~holds(c)
        if not low.any():
            break
        c = np.where(low, np.nextafter(c, inf), c)
    for _ in range(walk):
        d = np.nextafter(c, -inf)
        still = holds(d)
        if not still.any():
            break
        c = np.where(still, d, c)
    return c


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
    check (default: the int32 range); ch_bound (optional, per channel, each at most acc_bound)
    bounds each channel's own |acc|: prepare_f32 proves every channel over its own range only
    (a per-channel convolution's channels have sums of |w| several times apart: EfficientNet-
    Lite0's 112x112x16 projection then proves float32 where the one bound kept float64).
    """

    def __init__(self, reals, zp, lo, hi, bias=None, acc_bound=None, ch_bound=None):
        reals = np.atleast_1d(np.asarray(reals, np.float64))
        bias = None if bias is None else np.atleast_1d(np.asarray(bias, np.int64))
        nch = max(len(reals), 1 if bias is None else len(bias))
        reals = np.broadcast_to(reals, (nch,))
        bias_a = np.zeros(nch, np.int64) if bias is None else np.array(np.broadcast_to(bias, (nch,)))
        q_a, s_a = quantize_multipliers(reals)
        left_a, right_a = np.maximum(s_a, 0), np.maximum(-s_a, 0)
        q, left, right = q_a.tolist(), left_a.tolist(), right_a.tolist()
        bias_l = bias_a.tolist()
        self.lo, self.hi, self.zp = int(lo), int(hi), int(zp)
        self._tiles = {}
        amax = (1 << 31) if acc_bound is None else int(acc_bound) + 1
        self.nch, self.amax = nch, min(amax, 1 << 31)
        # per channel, the bound of its own accumulators (at most amax): prepare_f32 proves
        # each channel over its own range only
        self.amax_ch = None if ch_bound is None else np.minimum(
            np.broadcast_to(np.asarray(ch_bound, np.float64), (nch,)) + 1, float(self.amax))
        self._steps = None          # the step table of small calls (_small), made at the third
        self._calls = 0
        self._reals = np.array(reals, np.float64)      # for the step table's first guesses
        self._bias = bias_a.astype(np.float64)
        self.f32 = None             # prepare_f32: float32 (multiplier, constant) proven exact
        self.f32_fix = None         # (channels, their exact stage) the float32 pass leaves wrong
        self.f32_scaled = False     # prepare_f32: the corrected negative side as one scaled term
        self._tried_scaled = False
        # the real line each channel's rounding follows (no left shift): out ~ floor(acc m + k)
        # (and 2**-e, the negative side's correction, per channel); b q exact (q < 2**31: int64
        # for biases inside int32, else Python ints), rounded once to float64, divided by a
        # power of two (exact)
        wide = np.max(np.abs(bias_a), initial=0) >= (1 << 31)
        bq = (bias_a.astype(object) if wide else bias_a) * q_a
        scale = np.ldexp(1.0, -(31 + right_a))
        self._line = None if left_a.any() else (
            q_a * scale,
            np.asarray(bq, np.float64) * scale + 0.5 + np.where(right_a > 0, np.ldexp(1.0, -(1 + right_a)), 0.0)
            + self.zp,
            np.where(right_a > 0, np.ldexp(1.0, -right_a), 0.0))
        if self._try_float(q_a, left_a, right_a, bias_l, bq):
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

    def _try_float(self, q_a, left_a, right_a, bias_l, bq):
        """float64 variant (5 passes instead of 8): with S = 31 + e,
            z = acc * (q 2**-S) + (bias q + 2**30 + [e>0] 2**(30+e)) 2**-S + zp,
            reference = floor(z - [e>0][z < zp + 1/2] 2**-e)   (then clamped);
        _float computes z + off (off: 0, or 128 for an int8 store) as one product P 2**-S (P =
        acc q) plus the constant K + off = k 2**-S + zp + off (k = bias q + 2**30 + [e>0]
        2**(30+e)).  Per channel either
          constant: every accumulator of the bound (|acc| <= amax) gives the same clamped
                output c (the reference is non-decreasing in acc: its clamped values at -amax
                and amax, exact integers, are equal): the channel computes 0 * acc + c + 1/2
                (a multiplier far below one output step over the whole accumulator range, often
                beside a bias that saturates it: per-channel models have such channels), or
          with R = 2**(53-S) and V = max(|lo + off|, |hi + off| + 1) over the offsets (0, and
                128 where the clamp range allows an int8 output), R >= V and K + off exact (|k|
                + |zp + off| 2**S < 2**53): a product below 2**53 is exact, and so is its sum
                with K + off wherever that sum is below R in magnitude (a multiple of 2**-S:
                representable), which covers [lo + off, hi + off + 1), every value whose floor
                is kept; a sum beyond R rounds to R or beyond (rounding is monotonic, R is a
                float) and clamps as the exact value does.  A product of 2**53 or more
                (possible only when amax q >= 2**53) rounds to at least R in magnitude, so the
                sum lies beyond R - |K + off|: then R - |K + off| >= V is required too.
        This holds for any bias and accumulator with e <= 10, and up to e = 14 (a uint8
        output) where the accumulator bound or the constant allows."""
        if left_a.any() or max(abs(self.lo), abs(self.hi)) >= (1 << 9) or abs(self.zp) >= (1 << 9):
            return False
        amax = self.amax
        # the store offsets _float may use: 128 only for an int8 output, which a clamp range
        # inside [-128, 127] allows; 0 for the others.  Exactness is needed for the values
        # whose floor is kept, [lo + off, hi + off + 1)
        offs = (0, 128) if -128 <= self.lo and self.hi <= 127 else (0,)
        vmax = max(max(abs(self.lo + off), abs(self.hi + off) + 1) for off in offs)
        # per channel, exact integers (int64, or Python ints as bq): k = b q + 2**30 + [e>0]
        # 2**(30+e) (e <= 31), S = 31 + e, R = 2**(53-S)
        e = right_a
        S = 31 + e
        k = bq + (1 << 30) + np.where(e > 0, np.left_shift(np.int64(1), 30 + e), 0)
        ak = np.abs(k)
        exact = ak < (1 << 53)
        for off in offs:                # |k| + |zp + off| 2**S < 2**53
            t = abs(self.zp + off)
            if t:
                exact &= (S < 53) & ((np.left_shift(t, np.minimum(S, 52)) < (1 << 53) - ak))
        r = np.ldexp(1.0, 53 - S)
        kS = np.asarray(k, np.float64) * np.ldexp(1.0, -S)                # k / 2**S
        far = r - np.max([np.abs(kS + self.zp + off) for off in offs], axis=0) >= vmax
        ok = exact & (r >= vmax) & ((amax * q_a < (1 << 53)) | far)
        mf = np.where(ok, q_a * np.ldexp(1.0, -S), 0.0)  # exact: a 31-bit integer times a power of two
        kf = kS + self.zp                                  # exact where ok: |k| + |zp| 2**S < 2**53
        dl = np.where(ok & (e > 0), np.ldexp(1.0, -e), 0.0)
        for c in np.flatnonzero(~ok):
            b = bias_l[c]
            if not INT32_MIN <= b - amax <= b + amax <= INT32_MAX:
                return False
            ends = multiply_by_quantized_multiplier(np.array([b - amax, b + amax]), int(q_a[c]), -int(e[c])) + self.zp
            low, high = (min(max(int(v), self.lo), self.hi) for v in ends)
            if low != high:
                return False
            kf[c] = low + 0.5                   # constant: z = c + 1/2 for every accumulator
        self.mode = "float"

        def arr(v):
            return np.float64(v[0]) if np.all(v == v[0]) else np.asarray(v, np.float64)
        self.q, self.K, self.corr = arr(mf), arr(kf), arr(dl)
        self.thr = np.float64(self.zp + 0.5)
        self.need_neg = self.lo < self.zp and bool(np.any(dl))
        self.nvec = max((len(a) for a in (self.q, self.K, self.corr) if isinstance(a, np.ndarray)),
                        default=0)
        return True

    def _float_consts(self, off):
        """(q, K, thr, inv, corr) for _float with output offset off.  When the [z < zp + 1/2]
        correction is needed and every channel has e > 0, q, K and thr are scaled by 2**e (exact:
        powers of two), so the correction subtracts the comparison's 0/1 directly and inv =
        2**-e scales back afterwards (two cheap passes instead of a masked multiply); otherwise
        inv is None and corr (2**-e per channel) is subtracted where the comparison holds."""
        q, K, corr = self.q, self.K, self.corr
        K = K + off
        thr = self.thr + off
        inv = None
        if self.need_neg and np.all(np.asarray(corr) > 0):
            inv = corr
            q, K, thr = q / corr, K / corr, thr / corr
            corr = None
        return q, K, thr, inv, corr

    def _float(self, acc, out):
        """Cast to float64, multiply, add, [correct], clamp, store.  For an 8-bit output the
        floor is the store's own truncation: after the clamp every value is >= 0 (uint8), or
        is made so by an offset of 128 folded into the constant and removed afterwards by
        flipping the top bit of each byte (int8: (v + 128) ^ 0x80 is v's two's complement
        byte).  Other outputs floor explicitly."""
        dt = out.dtype
        off = 0 if dt == np.uint8 else 128 if dt == np.int8 else None
        a, tile = acc, None
        if self.nvec and acc.ndim >= 3 and acc.shape[-2] > 1:
            tile = acc.shape[-2]
            a = acc.reshape(-1, tile * self.nvec)
        q, K, thr, inv, corr = self._tiled(("float", off or 0), tile, lambda: self._float_consts(off or 0))
        v = a.astype(np.float64)         # then *= q: faster than one mixed-type multiply
        v *= q
        v += K
        if self.need_neg:
            neg = v < thr
            if inv is not None:
                v -= neg
                v *= inv
            else:
                v -= neg * corr
        if off is None:
            np.floor(v, out=v)
            clip_inplace(v, self.lo, self.hi)
            out[...] = v.reshape(out.shape)
            return
        clip_inplace(v, self.lo + off, self.hi + off)
        if not off:
            out[...] = v.reshape(out.shape)          # v >= 0: truncation is the floor
            return
        b = out.view(np.uint8)
        b[...] = v.reshape(out.shape)
        b ^= 0x80

    @staticmethod
    def _arr(v):
        if all(x == v[0] for x in v):
            return np.int64(v[0])
        return np.asarray(v, np.int64)

    def __call__(self, acc, out):
        """acc: integer-valued array (int or exact float), channels last, shaped like out
        (or reshapeable to it); writes the clamped quantized result into out."""
        if acc.size <= _SMALL_VALUES and (self.hi - self.lo) * self.nch <= _SMALL_STEPS \
                and (self.nch == 1 or acc.shape[-1] == self.nch):
            if self._steps is not None:
                return self._small(acc, out)
            self._calls += 1                # a stage used again (constant filter and bias)
            if self._calls > 2:
                return self._small(acc, out)
        return self._passes(acc, out)

    def prepare_small(self, n_values):
        """A stage kept for a layer whose outputs are n_values values: make the step table of
        _small now (at compilation: about 4 ms for 64 channels) rather than in the middle of
        the third execution."""
        if n_values <= _SMALL_VALUES and (self.hi - self.lo) * self.nch <= _SMALL_STEPS \
                and self._steps is None:
            self._steps = self._step_table()

    def prepare_f32(self, out_dtype):
        """Try to prove, for a stage kept for float32 accumulators and 8-bit outputs (|acc| <=
        amax <= 2**24: exact float32 integers), that clamp(acc * m + k) in float32 -- one
        multiply, one add, one clamp, the store's truncation (int8: offset 128 and a flipped top
        bit, as _float) -- gives the reference's result for every accumulator, per channel with
        m the float32 multiplier or a neighbour and k the float32 constant or a neighbour.
        Both evaluations are non-decreasing step functions of acc (the multiplier is >= 0;
        float32 rounding is monotonic), so they agree everywhere when the float32 one agrees on
        both sides of each of the reference's steps: for every output y in (lo, hi] the least
        accumulator t_y whose output is >= y (found exactly: the real-arithmetic guess, then the
        reference evaluated at the guess and its neighbours, _STEP_WINDOWS) must give >= y and
        t_y - 1 < y (ends beyond +-amax: only the side inside).  2 (hi - lo) points per channel
        and candidate; a channel that failed a candidate is first tried at the step where it
        failed (compilation: EfficientNet-Lite0's proofs 1.9-2.4 -> 0.9-1.1 s, the same stages
        and constants).  Where the reference corrects its negative side (no activation, lo < zp:
        z < zp + 1/2 rounds z - 2**-e), the float32 form is clamp(u, zp, hi) + clamp(u - 2**-e,
        lo, zp) - zp (u = acc m + k; each clamp truncated; the sum of two non-decreasing terms).
        Channels that none of the 21 candidates passes get a second search
        (_search_constants: the multiplier up to _M_ULPS ulps away, and for each the one
        constant that can pass, found exactly); the last few are evaluated exactly after the
        float32 pass (f32_fix).  It holds when float32's rounding of acc * m stays well inside
        one step (multipliers not much below 0.01); otherwise the float64 evaluation stays.
        The corrected negative side is first proven in the one-term scaled form (_f32_all,
        one constant k for both sides); where that leaves channels to the fix-up or fails, the
        two-term form (its own kb for the lower side: one constant more to fit) is proven too
        and the one with fewer channels left taken."""
        if self._line is None or self.amax > _EXACT_F32 or self.f32 is not None:
            return bool(self.f32)
        ok = self._prove_f32(out_dtype, _NEG_SCALED)
        if not self._tried_scaled or (ok and self.f32_fix is None):
            return ok
        first = (ok, self.f32, self.f32_fix, self.f32_scaled)
        self.f32, self.f32_fix, self.f32_scaled = None, None, False
        ok2 = self._prove_f32(out_dtype, False)

        def left(okx, fix):
            return self.nch + 1 if not okx else (0 if fix is None else len(fix[0]))
        if left(ok2, self.f32_fix) < left(first[0], first[2]):
            return ok2
        ok, self.f32, self.f32_fix, self.f32_scaled = first
        return ok

    def _ch_bound(self, sel):
        return None if self.amax_ch is None else self.amax_ch[sel] - 1

    def _prove_f32(self, out_dtype, scaled_ok):
        """prepare_f32's proof, the corrected negative side in the scaled one-term form where
        scaled_ok (and every 2**-e allows it: self._tried_scaled), else in two terms."""
        self._tried_scaled = False
        self.f32 = False
        dt = np.dtype(out_dtype)
        if dt not in (np.dtype(np.uint8), np.dtype(np.int8)):
            return False
        off = 128 if dt == np.int8 else 0
        lo_, hi_ = qrange_of_dtype(dt)
        if not lo_ <= self.lo < self.hi <= hi_:
            return False
        nch = self.nch
        amax = self.amax if self.amax_ch is None else self.amax_ch
        q, K, d = self._line
        if not np.all(q > 0):
            return False
        if nch > 4 * _PROBE_CHANNELS:
            # many channels: the proof on an even sample of them first (a stage of 1792
            # channels that fails costs some 0.25 s of compilation; the sample about 1/20 of
            # that).  Only a speed decision: a stage the sample rejects keeps float64
            sel = np.unique(np.linspace(0, nch - 1, _PROBE_CHANNELS).astype(np.int64))
            probe = OutputStage(self._reals[sel], self.zp, self.lo, self.hi,
                                bias=self._bias[sel].astype(np.int64), acc_bound=self.amax - 1,
                                ch_bound=self._ch_bound(sel))
            if not probe.prepare_f32(out_dtype):
                return False
        # the negative side's correction: z < zp + 1/2 rounds z - 2**-e instead of z; then
        # out = clamp(u, zp, hi) + clamp(u - 2**-e, lo, zp) - zp (each truncated; u = acc m + k):
        # above zp + 1/2 the second term is zp, below it the first one is
        neg = self.lo < self.zp and bool(np.any(d > 0))
        if neg and not self.zp <= self.hi:
            return False
        y = np.arange(self.lo + 1, self.hi + 1, dtype=np.float64)[:, None]          # [n, 1]
        guess = np.clip(np.ceil((y - K) / q), -amax - 8, amax + 8)                  # [n, nch]
        if neg:                 # the corrected side's steps lie 1 or 2 above the line's
            guess += y <= self.zp
        narrow, wide = _STEP_WINDOWS
        # a narrow window first (without the correction the guess is the step itself: two
        # points), a wide one where it misses
        for offsets in ((narrow if neg else narrow[:2]), wide):
            win = guess[None] + offsets[:, None, None]                              # [w, n, nch]
            np.clip(win, -amax, amax, out=win)
            ref = np.empty(win.shape, np.int64)
            self._passes(win.reshape(-1, nch), ref.reshape(-1, nch))
            ge = ref >= y[None]
            # the reference is non-decreasing along the window: the first point reaching y is
            # the count of those below it (argmax over the short first axis is slower)
            below_y = np.count_nonzero(~ge, axis=0)
            some = below_y < len(offsets)
            first = np.minimum(below_y, len(offsets) - 1)
            # a step inside the window (a point below it too), or beyond an end of the bound
            at_low = some & ((first > 0) | (win[0] <= -amax))
            if np.all(at_low | (~some & (win[-1] >= amax))):
                break
        else:
            return False
        t = np.take_along_axis(win, first[None], 0)[0]                              # exact steps
        t = np.where(some, t, amax + 1.0)
        below = np.clip(t - 1, -amax, amax).astype(np.float32)
        at = np.clip(t, -amax, amax).astype(np.float32)
        need_below = t - 1 >= -amax             # some accumulator lies below the step
        need_at = t <= amax                     # some accumulator reaches it
        lo_f, hi_f = np.float32(self.lo + off), np.float32(self.hi + off)
        yb = y + off
        # the corrected side as one term (_f32_all): u - 2**-e [u < zp + 1/2], computed at 2**e
        # times the scale (exact: powers of two) so that the correction subtracts the
        # comparison itself; kb then holds each channel's 2**-e (0: no correction).  Where
        # some 2**e u could reach 2**23 (e > _NEG_MAX_E) the two-term form stays
        scaled = neg and scaled_ok and bool(np.all(d[d > 0] >= 2.0 ** -_NEG_MAX_E))
        self._tried_scaled = scaled
        m0, k0 = q.astype(np.float32), K.astype(np.float32)
        kb0 = d.astype(np.float32) if scaled else (K - d).astype(np.float32)
        chosen_m, chosen_k, chosen_kb = m0.copy(), k0.copy(), kb0.copy()
        done = np.zeros(nch, bool)
        zp_f = np.float32(self.zp + off)
        off_f = np.float32(off)
        thr_f = np.float32(self.zp + off + 0.5)

        def f32(p, kk, kb):
            """_f32_all's values at products p = acc * m (float32), as compared with the
            steps: without the correction, v = p + (k + off), whose clamp and truncation
            (lo + off < y + off <= hi + off, an integer) keep v < y + off as it is; with it,
            scaled: v - 2**-e (kb) where v < zp + 1/2 (exact in float64, the value _f32_all
            computes at 2**e times the scale), else the clamped and truncated sum of both
            terms."""
            v = p + (kk + off_f)
            if not neg:
                return v
            if scaled:              # u - 2**-e where u < zp + 1/2: exact in float64
                return v - np.where(v < thr_f, np.asarray(kb, np.float64), 0.0)
            w = p + (kb + off_f)
            clip_inplace(v, zp_f, hi_f)
            clip_inplace(w, lo_f, zp_f)
            return np.floor(v) + np.floor(w) - zp_f

        def nudged(a):                  # a's candidates: a nudged by 0, 1, -1, 2, -2, 3, -3 ulps
            up, dn = [a], [a]
            for _ in range(3):
                up.append(np.nextafter(up[-1], np.float32(np.inf)))
                dn.append(np.nextafter(dn[-1], np.float32(-np.inf)))
            return np.stack([a, up[1], dn[1], up[2], dn[2], up[3], dn[3]])

        def full(pb, pa, kk, kb):       # per channel: passes every step? and the first failing one
            fine = (f32(pb, kk, kb) < yb) & (f32(pa, kk, kb) >= yb)
            return fine.all(axis=0), np.argmin(fine, axis=0)

        # per multiplier candidate (m0, then one ulp up, one down), the constant candidates in
        # order; each channel takes the first that passes.  A channel that failed a candidate
        # is tried first at the step it failed (most fail the next one there too): only those
        # passing that step are evaluated at every step
        bad_row = None                  # per open channel: a step its last candidate failed at
        todo = np.arange(nch)           # the open channels
        for dm in (0, 1, -1):
            mm = m0 if not dm else np.nextafter(m0, np.float32(dm * np.inf))
            t = todo
            whole = len(t) == nch       # all channels: no copies of the step tables
            bt, at_, mt = (below, at, mm) if whole else (below[:, t], at[:, t], mm[t])
            # the products, as _f32_all rounds them; where no accumulator lies below (at) a
            # step, -inf (+inf) instead: compared as passing
            pb = np.where(need_below if whole else need_below[:, t], bt * mt, np.float32(-np.inf))
            pa = np.where(need_at if whole else need_at[:, t], at_ * mt, np.float32(np.inf))
            kks = nudged(k0[t])
            kbs = np.broadcast_to(kb0[t], kks.shape) if scaled else nudged(kb0[t])
            open_ = np.ones(len(t), bool)
            js = range(7)
            if bad_row is None:         # the first candidate on every channel: most pass it
                ok, bad_row = full(pb, pa, kks[0], kbs[0])
                chosen_m[t[ok]], chosen_k[t[ok]], chosen_kb[t[ok]] = mt[ok], kks[0][ok], kbs[0][ok]
                open_ &= ~ok
                js = range(1, 7)
            if open_.any():
                cols = np.arange(len(t))
                quick = (f32(pb[bad_row, cols][None], kks, kbs) < yb[bad_row, 0]) & \
                    (f32(pa[bad_row, cols][None], kks, kbs) >= yb[bad_row, 0])        # [7, open]
                for j in js:
                    idx = np.flatnonzero(open_ & quick[j])
                    if not len(idx):
                        continue
                    ok, rows = full(pb[:, idx], pa[:, idx], kks[j, idx], kbs[j, idx])
                    bad_row[idx] = rows
                    won = idx[ok]
                    chosen_m[t[won]], chosen_k[t[won]], chosen_kb[t[won]] = mt[won], kks[j, won], kbs[j, won]
                    open_[won] = False
            done[t[~open_]] = True
            todo, bad_row = t[open_], bad_row[open_]
            if not len(todo):
                break
        if not done.all():
            with np.errstate(invalid="ignore", over="ignore"):
                won, cm, ck, ckb = self._search_constants(np.flatnonzero(~done), m0, k0, kb0, below, at, need_below,
                                                          need_at, y, off_f, neg, scaled, f32)
            chosen_m[won], chosen_k[won], chosen_kb[won] = cm, ck, ckb
            done[won] = True
        if not done.all():
            # a few channels where float32 cannot follow the reference's steps (a small
            # multiplier puts some step within float32's rounding of acc * m): the float32
            # pass runs on all channels and those are evaluated again exactly and overwritten
            bad = np.flatnonzero(~done)
            if nch < 4 or 4 * len(bad) > nch:
                return False
            self.f32_fix = (bad, OutputStage(self._reals[bad], self.zp, self.lo, self.hi,
                                             bias=self._bias[bad].astype(np.int64), acc_bound=self.amax - 1,
                                             ch_bound=self._ch_bound(bad)))

        def arr(v):
            return v[0] if np.all(v == v[0]) else v
        self.f32 = (arr(chosen_m), arr(chosen_k), arr(chosen_kb) if neg else None)
        self.f32_scaled = scaled
        return True

    def _search_constants(self, todo, m0, k0, kb0, below, at, need_below, need_at, y, off_f, neg, scaled, f32):
        """prepare_f32's second search, for the channels todo that no nudged candidate passed:
        the multiplier m0 nudged by up to _M_ULPS ulps each way, and for each the exact
        constant.  The float32 value fl(p + fl(c + off)) is non-decreasing in the constant c,
        so each step's condition at t_y (value >= y) holds for every c from a least one on,
        and the condition at t_y - 1 (value < y) for every c below a bound: the least c of the
        first kind over all steps is the one constant that can pass, if any does.  With the
        negative side's correction in two terms the steps above zp depend on k alone and those
        at or below it on kb alone (the other term is clamped to zp there), so each side has
        its own least constant; in the scaled one-term form (scaled) both sides depend on k, a
        step y at or below zp reached where u >= y + 2**-e.  Each candidate is then checked at
        every step as the first search checks it (f32).  Returns (channels found, their m, k,
        kb)."""
        inf = np.float32(np.inf)
        yb = y + off_f                                       # [n, 1]
        upper = (y[:, 0] > self.zp) if neg and not scaled else np.ones(len(y), bool)
        sides = [(upper, 0)] + ([(~upper, 1)] if neg and not scaled else [])
        ythr = np.broadcast_to(yb, (len(y), len(todo)))          # each step's threshold
        if scaled:                                               # below zp: u >= y + 2**-e
            ythr = ythr + np.where(y <= self.zp, kb0[todo][None].astype(np.float64), 0.0)
        # every multiplier candidate at once: [D, steps, channels] (D = len(_M_NUDGES))
        dms = np.asarray(_M_NUDGES, np.int32)
        mm = (m0.view(np.int32)[todo][None] + dms[:, None]).view(np.float32)      # m > 0: ulps away
        pa = np.where(need_at[:, todo][None], at[:, todo][None] * mm[:, None], inf)
        pb = np.where(need_below[:, todo][None], below[:, todo][None] * mm[:, None], -inf)
        shape = (len(dms), len(todo))
        consts = [np.broadcast_to(k0[todo], shape).copy(), np.broadcast_to(kb0[todo], shape).copy()]
        ok = np.ones(shape, bool)
        for rows, side in sides:
            if not rows.any():
                continue
            # the least constant over a side's steps is set by the few steps where y - p is
            # largest: the walk runs on those _CRITICAL_ROWS (per candidate), the check of the
            # constant found on every step
            p = pa[:, rows]
            yr = np.broadcast_to(ythr[rows][None], p.shape)
            if p.shape[1] > _CRITICAL_ROWS:
                sel = np.argpartition(p - yr, _CRITICAL_ROWS, axis=1)[:, :_CRITICAL_ROWS]
                p, yr = np.take_along_axis(p, sel, 1), np.take_along_axis(yr, sel, 1)
            c = (yr - p - off_f).astype(np.float32)              # about the least, then exact
            c[~np.isfinite(c)] = -inf                            # no accumulator reaches this step
            c = _walk_to_least(c, lambda cc: (p + (cc + off_f)) >= yr, _K_WALK)
            least = c.max(axis=1)
            consts[side] = np.where(np.isfinite(least), least, consts[side]).astype(np.float32)
            ok &= ~np.any((pb[:, rows] + (consts[side] + off_f)[:, None]) >= ythr[rows][None], axis=1)
        # each channel takes the first candidate (in _M_NUDGES order) that passes every step
        di, ci = np.nonzero(ok)
        if len(di):
            kk, kb = consts[0][di, ci], consts[1][di, ci]
            fine = ((f32(pb[di, :, ci].T, kk, kb) < yb) & (f32(pa[di, :, ci].T, kk, kb) >= yb)).all(axis=0)
            passed = np.zeros(shape, bool)
            passed[di[fine], ci[fine]] = True
            has = passed.any(axis=0)
            first = np.argmax(passed, axis=0)[has]
            cols = np.flatnonzero(has)
            return todo[cols], mm[first, cols], consts[0][first, cols], consts[1][first, cols]
        e = np.zeros(0, np.float32)
        return np.zeros(0, np.int64), e, e, e

    def consume(self, acc, out):
        """__call__ for an accumulator the caller gives up (its values may be overwritten):
        float32 accumulators of a stage prepare_f32 proved take its float32 evaluation."""
        f = self.f32
        if f and acc.dtype == np.float32 and acc.size > _SMALL_VALUES and out.dtype.itemsize == 1 \
                and acc.flags.c_contiguous:
            return self._f32(acc, out, f)
        return self(acc, out)

    def _f32(self, acc, out, f):
        fix = self.f32_fix
        if fix is not None and acc.shape[-1] == self.nch:
            chans, exact = fix
            part = np.ascontiguousarray(acc[..., chans])    # a copy: acc is overwritten below
            self._f32_all(acc, out, f)
            got = np.empty(part.shape, out.dtype)
            exact(part, got)
            out[..., chans] = got
            return
        if fix is not None:
            return self(acc, out)
        self._f32_all(acc, out, f)

    def _f32_all(self, acc, out, f):
        """The float32 form prepare_f32 proved (f = (m, k, kb)): per-channel constants tiled
        along whole output rows; kb None: one term; kb with f32_scaled: the corrected negative
        side in one term at 2**e times the scale (_scaled_consts); else two clamped terms."""
        m, k, kb = f
        off = 128 if out.dtype == np.int8 else 0
        v, tile = acc, None
        if any(isinstance(a, np.ndarray) for a in f):
            tile = acc.shape[-2] if acc.ndim >= 3 and acc.shape[-2] > 1 else None
            v = acc.reshape(-1, (tile or 1) * self.nch)
        lo, hi = np.float32(self.lo + off), np.float32(self.hi + off)
        b = out.view(np.uint8)
        if kb is not None and self.f32_scaled:
            # v = acc M + K, v -= [v < T] (the reference's z - 2**-e below zp + 1/2; exact:
            # v - 1 is a float32 there), v *= 2**-e: one term instead of two clamped ones
            # and their byte sum
            M, K, T, inv = self._tiled(("f32s", off), tile, lambda: self._scaled_consts(f, off))
            np.multiply(v, M, out=v)
            np.add(v, K, out=v)
            below = _work(("f32s", np.bool_), v.shape)
            np.less(v, T, out=below)
            np.subtract(v, below, out=v)
            np.multiply(v, inv, out=v)
            clip_inplace(v, lo, hi)
            b[...] = v.reshape(out.shape)
        else:
            m, k, kb = self._tiled(("f32", off), tile, lambda: (
                m, k + np.float32(off), None if kb is None else kb + np.float32(off)))
            np.multiply(v, m, out=v)
            if kb is None:
                np.add(v, k, out=v)
                clip_inplace(v, lo, hi)
                b[...] = v.reshape(out.shape)
            else:                           # the negative side's second term (prepare_f32)
                w = _work(("f32w", np.float32), v.shape)
                np.add(v, kb, out=w)
                np.add(v, k, out=v)
                z = np.float32(self.zp + off)
                clip_inplace(v, z, hi)
                clip_inplace(w, lo, z)
                b[...] = v.reshape(out.shape)
                w8 = _work(("f32w", np.uint8), v.shape)
                w8[...] = w
                b += w8.reshape(out.shape)  # uint8 wraps: the true sum - zp is in range
                b -= np.uint8((self.zp + off) & 0xFF)
        if off:
            b ^= 0x80

    def _scaled_consts(self, f, off):
        """(M, K, T, inv) of _f32_all's scaled form: with s = 2**e per channel (1 where there
        is no correction), M = m s, K = (k + off) s, T = (zp + off + 1/2) s (-inf: none),
        inv = 1/s; every product by s exact (powers of two)."""
        m, k, d = (np.asarray(a, np.float32) for a in f)        # 0-d where one for all channels
        has = d > 0
        sc = np.where(has, np.float32(1) / np.where(has, d, np.float32(1)), np.float32(1))
        t = np.where(has, np.float32(self.zp + off + 0.5) * sc, -np.inf)

        def as_f32(a):                          # a scalar stays a scalar, a vector a vector
            a = np.asarray(a, np.float32)
            return np.float32(a) if a.ndim == 0 else a
        return as_f32(m * sc), as_f32((k + np.float32(off)) * sc), as_f32(t), as_f32(np.float32(1) / sc)

    def small_table(self, dtype):
        """(sorted steps, per-channel key offsets, output value of each table position as dtype)
        of _small: output = values[steps.searchsorted(acc + offsets, side="right")] (see
        _small); None when this stage has no step table."""
        t = self._steps
        if t is None:
            return None
        steps, offs, values = t
        lut = values.get(np.dtype(dtype))
        if lut is None:
            lut = values[np.dtype(dtype)] = values[None].astype(dtype)
        return steps, offs, lut

    def _small(self, acc, out):
        """A few values (a streaming model's one-pixel layers): the output of channel c is
        lo + the number of its steps t[c, y] <= acc, where t[c, y] is the least accumulator
        whose output is >= y (the requantization is non-decreasing in acc), found once by
        bisection with the exact evaluation itself (_passes).  One searchsorted over all
        channels' steps (channel c's shifted by c * width and led by a sentinel, so the table
        is sorted and each position names one output value) and one lookup of the output
        value replace the evaluation's ten numpy passes, each of which costs its call
        overhead on a small array: 8.7 -> 4 us for 64 values."""
        if self._steps is None:
            self._steps = self._step_table()
        steps, offs, lut = self.small_table(out.dtype)
        key = acc + offs                                 # float64, exact: |key| < 2**46
        idx = steps.searchsorted(key.ravel(), side="right")
        if out.flags.c_contiguous:
            lut.take(idx, out=out.reshape(-1))
        else:
            out[...] = lut.take(idx).reshape(out.shape)

    def _step_table(self):
        n, c, amax = self.hi - self.lo, self.nch, self.amax
        y = np.arange(self.lo + 1, self.hi + 1, dtype=np.int64)[:, None]     # [n, 1]
        below = np.full((n, c), -amax - 1, np.int64)     # outputs < y there (or below the range)
        at = np.full((n, c), amax + 1, np.int64)         # outputs >= y there (or above it)
        got = np.empty((n, c), np.int64)
        # first guesses from the real arithmetic, (y - zp - 1/2) / real - bias, checked by the
        # exact evaluation: where both ends hold, bisection starts from 32 values instead of
        # the whole accumulator range (a few passes instead of about 32)
        with np.errstate(all="ignore"):
            guess = (y - self.zp - 0.5) / self._reals - self._bias
        ok = np.isfinite(guess) & (np.abs(guess) < amax)
        g = np.where(ok, guess, 0).astype(np.int64)
        lo_g, hi_g = np.clip(g - 16, -amax, amax), np.clip(g + 16, -amax, amax)
        self._passes(lo_g.astype(np.float64), got)
        ok &= got < y
        self._passes(hi_g.astype(np.float64), got)
        ok &= got >= y
        np.copyto(below, lo_g, where=ok)
        np.copyto(at, hi_g, where=ok)
        # outputs the range never reaches, or always exceeds: closed at once
        ends = np.empty((2, c), np.int64)
        self._passes(np.array([[-amax] * c, [amax] * c], np.float64), ends)
        never = y > ends[1]                              # even acc = amax stays below y
        always = y <= ends[0]                            # even acc = -amax reaches y
        np.copyto(below, amax, where=never)
        np.copyto(at, -amax, where=always)
        np.copyto(below, -amax - 1, where=always)
        while True:
            open_ = at - below > 1
            if not open_.any():
                break
            mid = (below + at) >> 1
            self._passes(mid.astype(np.float64), got)
            ge = got >= y
            np.copyto(at, mid, where=ge & open_)
            np.copyto(below, mid, where=~ge & open_)
        width = 2 * amax + 6
        shift = np.arange(c, dtype=np.int64) * width
        # per channel: a sentinel below any of its keys, then its n steps; position
        # c * (n + 1) + 1 + k (k steps <= key) holds output lo + k
        block = np.vstack([np.full((1, c), -amax - 2, np.int64), at]) + shift      # [n + 1, c]
        steps = block.T.reshape(-1).astype(np.float64)                             # sorted
        values = np.empty(c * (n + 1) + 1, np.int64)
        values[0] = self.lo                              # (no key is below channel 0's sentinel)
        values[1:] = np.tile(np.arange(self.lo, self.hi + 1, dtype=np.int64), c)
        return steps, shift.astype(np.float64), {None: values}

    def _passes(self, acc, out):
        if self.mode == "float":
            return self._float(acc, out)
        if self.mode == "general":
            return self._general(acc, out)
        if acc.dtype == np.int64 and acc.flags.c_contiguous:
            p = acc
        elif acc.dtype == np.float32:                    # exact below 2**24: faster than one cast
            p = acc.astype(np.int32, order="C").astype(np.int64)
        else:                       # C order: the tiled view below must be p itself, not a copy
            p = acc.astype(np.int64, order="C")
        q, K, corr = self.q, self.K, self.corr
        v = p
        if self.nvec and p.ndim >= 3 and p.shape[-2] > 1:
            # per-channel vectors tiled along whole rows: long contiguous inner loops
            tile = p.shape[-2]
            v = p.reshape(-1, tile * self.nvec)
            q, K, corr = self._tiled("int64", tile, lambda: (self.q, self.K, self.corr))
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
        clip_inplace(p, self.lo, self.hi)
        if out.shape != p.shape:
            p = p.reshape(out.shape)
        out[...] = p

    def _tiled(self, kind, tile, make):
        """The constants make() returns, per-channel vectors tiled tile times along a row
        (tile None: as they are), kept per (kind, tile)."""
        key = (kind, tile)
        t = self._tiles.get(key)
        if t is None:
            t = tuple(np.tile(a, tile) if tile and isinstance(a, np.ndarray) else a for a in make())
            if len(self._tiles) < 16:
                self._tiles[key] = t
        return t

    def _general(self, acc, out):
        x = np.asarray(acc).astype(np.int64) + self.bias_arr
        if self.any_left:
            x <<= self.left
            np.clip(x, INT32_MIN, INT32_MAX, out=x)
        x *= self.q
        x += 1 << 30
        x >>= 31                                   # SRDHM (q >= 0): floor((x*q + 2**30) / 2**31)
        if self.any_right:                         # RDBPOT: floor((r + 2**(e-1) - [r<0]) / 2**e)
            x += self.half - (x < 0) * self.has_right
            x >>= self.right
        x += self.zp
        clip_inplace(x, self.lo, self.hi)
        out[...] = x.reshape(out.shape)


# numpy's C einsum without the Python wrapper's argument handling (about 0.8 us a call)
c_einsum = getattr(getattr(getattr(np, "_core", None), "multiarray", None), "c_einsum", np.einsum)


def _exact_affine(taps, zx, stage, out_dtype):
    """(weights [K + 1, C], low [C], high [C], flip [C] or None) of TableProduct's direct form,
    or None where it is not exact.  With the stage in its "float" form without the negative
    correction (OutputStage._try_float: out = clamp(floor(acc * q + K)), q and K per channel,
    exact for every value that can land in the clamp range), z = x . [taps * q; K + off -
    zx * colsum(taps) * q] over the raw input x is acc * q + K + off itself, computed exactly
    when every partial sum is: all terms are multiples of the finer of the two constants'
    binary units, so a bound on the sum of their absolute values below 2**53 units (|x| <= 255)
    makes any summation order (BLAS, FMA) exact.  off = 128 for int8 outputs: after the clamp
    z >= 0, the byte store's truncation is the floor, and flipping the top bit makes the int8
    value (OutputStage._float's own trick)."""
    from fractions import Fraction
    dt = np.dtype(out_dtype)
    if stage.mode != "float" or stage.need_neg or dt.type not in (np.uint8, np.int8):
        return None
    t = np.asarray(taps, np.float64)
    if t.ndim != 2 or not np.all(np.isfinite(t)) or np.any(t != np.rint(t)) or np.abs(t).max(initial=0) > 1 << 16:
        return None
    c = t.shape[1]
    off = 128 if dt.type is np.int8 else 0
    q = np.broadcast_to(np.asarray(stage.q, np.float64), (c,))
    K = np.broadcast_to(np.asarray(stage.K, np.float64), (c,))
    ti = t.astype(np.int64)
    colsum, abssum = ti.sum(0), np.abs(ti).sum(0)
    last = []
    for j in range(c):
        qf = Fraction(float(q[j]))
        lf = Fraction(float(K[j])) + off - int(zx) * int(colsum[j]) * qf
        unit = Fraction(1, max(qf.denominator, lf.denominator))       # both powers of two
        if (255 * int(abssum[j]) * qf + abs(lf)) / unit >= 1 << 53 or Fraction(float(lf)) != lf:
            return None
        last.append(float(lf))
    w = np.ascontiguousarray(np.vstack([t * q, np.asarray(last)[None]]))   # taps * q: exact
    low = np.full(c, float(stage.lo + off))
    high = np.full(c, float(stage.hi + off))
    return w, low, high, (np.full(c, 0x80, np.uint8) if off else None)


class TableProduct:
    """The requantized output of a small quantized product in 5 numpy calls or fewer: a layer
    with one output row (a convolution whose one output pixel reads its whole input, a
    depthwise one, a one-row FULLY_CONNECTED: a streaming model's step) with constant weights
    and bias.  One float64 product of the raw input with a matrix made at compilation gives,
    per channel, either
      direct  the requantized value itself, acc * q + K (+128 for int8), exactly
              (_exact_affine; the stage's "float" form without its negative correction): then
              clamp, byte store, [top-bit flip];
      table   the accumulator plus the step table's channel offsets ([centred weights; offsets
              - zx * the weights' column sums], integers below 2**53): then one searchsorted
              and one lookup in the stage's step table (OutputStage._small).
    The direct form keeps no table: a model's step tables (128 KB a 64-channel layer) do not
    stay in cache from one step to the next, so the table form was 4.1 us a 1x1x1x64 layer in
    a running model against 3.3 us alone, and took some 50 steps to warm up.
    taps: [K, O] (out[o] = sum_k x[k] taps[k, o]) or, depthwise, [T, C] (out[c] = sum_t
    x[t, c] taps[t, c]).
    Each thread keeps its own float64 input row (with its ones entry), a view of it in the
    input's shape, the product's output row, and a flat (byte) view of the last output it was
    given when that may be kept (base.kept_array), so a call has no Python work around its numpy
    calls beyond a few attribute reads."""

    def __init__(self, taps, zx, table=None, depthwise=False, direct=None):
        t = np.asarray(taps, np.float64)
        self.depthwise, self.k, self.c = depthwise, t.shape[0], t.shape[1]
        if direct is not None:
            self.w, self.low, self.high, self.flip = direct
            self.steps = self.lut = None
        else:
            steps, offs, lut = table
            last = np.broadcast_to(np.asarray(offs, np.float64), (t.shape[1],)) - zx * t.sum(0)
            self.w = np.ascontiguousarray(np.vstack([t, last[None]]))
            self.steps, self.lut = steps, lut
        self._local = threading.local()     # per thread: (input shape, row, input view, out, flat out, z)

    @classmethod
    def for_stage(cls, taps, zx, stage, out_dtype, depthwise=False):
        """One for this constant stage, or None when it has neither form.  The table form has
        the stage make its step table now (at compilation); the direct form needs none."""
        if stage is None:
            return None
        direct = _exact_affine(taps, zx, stage, out_dtype)
        if direct is not None:
            return cls(taps, zx, None, depthwise, direct)
        stage.prepare_small(np.shape(taps)[1])
        table = stage.small_table(out_dtype)
        return None if table is None else cls(taps, zx, table, depthwise)

    @property
    def direct(self):
        return self.steps is None

    def _row(self, shape):
        """A thread's float64 input row: [k + 1] (or [k + 1, C] depthwise) with a last entry
        (row) of ones, and a view of its first k entries in the input's shape."""
        k = self.k
        xa = np.ones((k + 1, self.c) if self.depthwise else (k + 1,), np.float64)
        return xa, xa[:k].reshape(shape)

    def _flat(self, out):
        """The flat view the result is stored through (bytes in the direct form), or None."""
        if not out.flags.c_contiguous:
            return None
        return out.reshape(-1).view(np.uint8) if self.steps is None else out.reshape(-1)

    def __call__(self, x, out):
        """x: the layer's raw input (k values, or [T, C] depthwise, in any shape of that size);
        out: its output."""
        loc = self._local
        try:
            shape, xa, xin, last, flat, z = loc.bufs
        except AttributeError:
            shape = last = flat = None
            z = np.empty(self.c, np.float64)
        if x.shape != shape:
            shape = x.shape
            xa, xin = self._row(shape)
            loc.bufs = (shape, xa, xin, last, flat, z)
        np.copyto(xin, x)
        if self.depthwise:
            c_einsum("tc,tc->c", xa, self.w, out=z)
        else:
            np.dot(xa, self.w, out=z)
        if out is not last:
            flat = self._flat(out)
            loc.bufs = (shape, xa, xin, out if kept_array(out) else None, flat, z)
        if self.steps is None:
            b = flat if flat is not None else np.empty(self.c, np.uint8)
            if _CLIP_UFUNC is not None:     # the clamp stored into the bytes (the store's own cast)
                _CLIP_UFUNC(z, self.low, self.high, out=b, casting="unsafe")
            else:
                np.clip(z, self.low, self.high, out=z)
                b[...] = z
            if self.flip is not None:
                np.bitwise_xor(b, self.flip, out=b)
            if flat is None:
                out[...] = b.view(out.dtype).reshape(out.shape)
            return
        idx = self.steps.searchsorted(z, side="right")
        if flat is not None:
            self.lut.take(idx, out=flat)
        else:
            out[...] = self.lut.take(idx).reshape(out.shape)


def _exact_block(t, zx, q, extra):
    """Last row of one block of DirectProduct's weights, or None where inexact: per channel j,
    z_j = x . [t[:, j] q_j; extra_j - zx colsum_j q_j] (x the raw input, |x| <= 255, with a
    last entry of 1) is computed exactly in float64 in any summation order when every term is
    a multiple of the finer of q_j's and the constant's binary units and the sum of their
    magnitudes stays below 2**53 of those units (_exact_affine's argument); extra: Fractions."""
    from fractions import Fraction
    ti = t.astype(np.int64)
    colsum, abssum = ti.sum(0), np.abs(ti).sum(0)
    last = []
    for j in range(t.shape[1]):
        qf = Fraction(float(q[j]))
        lf = extra[j] - int(zx) * int(colsum[j]) * qf
        unit = Fraction(1, max(qf.denominator, lf.denominator))
        if (255 * int(abssum[j]) * qf + abs(lf)) / unit >= 1 << 53 or Fraction(float(lf)) != lf:
            return None
        last.append(float(lf))
    return np.asarray(last, np.float64)


def direct_columns(taps, zx, stage, out_dtype):
    """DirectProduct's form of a constant stage, or None: (weights [K + 1, B, C] float64,
    low [B * C], high [B * C], combine).  With the stage in its "float" form
    (OutputStage._try_float: z = acc q + K per channel, q and K exact float64, the reference
    is clamp(floor(z - [z < zp + 1/2] d)), d = 2**-e <= 1/2 or 0), every block b computes
    z + c_b exactly from the raw input (_exact_block) and clamps it to byte bounds, so the
    byte store's truncation is the floor:
      B = 1, no negative correction (d = 0 or lo >= zp): the output byte is clamp(floor(z) +
              off, lo + off, hi + off) -- off = 0, "store" (uint8), or 128 with the top bit
              flipped after, "flip" (int8): TableProduct's direct form;
      B = 2, the negative side corrected ("add"): out = clamp(floor(z), zp, hi) +
              clamp(floor(z - d), lo, zp) - zp (for z >= zp + 1/2 the second term is zp, as
              z - d >= zp; below it the first is zp, as floor(z) <= zp: OutputStage
              .prepare_f32's two-term form, exact here), the terms stored as the bytes
              t1 + a and t2 - zp + b with a + b = 0 mod 256 (both in [0, 255]), whose
              wrapping byte sum is the output's byte (two's complement for int8).
    None where the stage is not in that float form, lo <= zp <= hi fails with a correction,
    or a block is inexact."""
    from fractions import Fraction
    dt = np.dtype(out_dtype)
    if stage.mode != "float" or dt.type not in (np.uint8, np.int8):
        return None
    t = np.asarray(taps, np.float64)
    if t.ndim != 2 or not np.all(np.isfinite(t)) or np.any(t != np.rint(t)) or np.abs(t).max(initial=0) > 1 << 16:
        return None
    c = t.shape[1]
    q = np.broadcast_to(np.asarray(stage.q, np.float64), (c,))
    K = [Fraction(float(v)) for v in np.broadcast_to(np.asarray(stage.K, np.float64), (c,))]
    lo, hi, zp = stage.lo, stage.hi, stage.zp
    signed = dt.type is np.int8
    if not stage.need_neg:
        off = 128 if signed else 0
        blocks = [([k + off for k in K], lo + off, hi + off)]
        combine = "flip" if signed else "store"
    else:
        if not lo <= zp <= hi:
            return None
        d = np.broadcast_to(np.asarray(stage.corr, np.float64), (c,))
        if np.any((d != 0) & (d > 0.5)):
            return None
        a = max(1, -zp) if signed else -zp     # a + b = 0 mod 256, both terms' bytes in [0, 255]
        b = (256 - a) if signed else zp
        if not (0 <= zp + a and hi + a <= 255 and 0 <= lo - zp + b and b <= 255 and (a + b) % 256 == 0):
            return None
        blocks = [([k + a for k in K], zp + a, hi + a),
                  ([k - Fraction(float(dj)) - zp + b for k, dj in zip(K, d)], lo - zp + b, b)]
        combine = "add"
    w = np.empty((t.shape[0] + 1, len(blocks), c), np.float64)
    low, high = [], []
    for j, (extra, lo_b, hi_b) in enumerate(blocks):
        last = _exact_block(t, zx, q, extra)
        if last is None:
            return None
        w[:-1, j] = t * q                      # exact: a 17-bit integer times a 31-bit mantissa
        w[-1, j] = last
        low.append(np.full(c, float(lo_b)))
        high.append(np.full(c, float(hi_b)))
    return w, np.concatenate(low), np.concatenate(high), combine


DIRECT_TWO_MAX = 1 << 17       # DirectProduct: most float64 weights of its two-term form (1 MB)


class DirectProduct:
    """The requantized output of a small quantized product whose weights and bias are
    constant -- one output row: a convolution whose one output pixel reads its whole input, a
    depthwise one, a one-row FULLY_CONNECTED (a streaming model's step) -- in 4 numpy calls:
    the raw input cast into a float64 row (with a last entry of one), one exact float64
    product with the weights of direct_columns (np.dot, or the depthwise einsum), the clamp
    stored into bytes, and one byte pass (the int8 top-bit flip, or the sum of the two terms
    of the negative side's correction); a uint8 output without the correction: 3.  No step
    table (a 64-channel layer's 128 KB, which falls out of the cache between a running
    model's steps): the depthwise layers of the wake-word models, whose stages correct their
    negative side (no activation), took quant.TableProduct's table form.
    taps: [K, O] (out[o] = sum_k x[k] taps[k, o]) or, depthwise, [T, C] (out[c] = sum_t
    x[t, c] taps[t, c]), centred integers; zx: the input zero point.  Run as
    run(x, out): x the raw input (K values, or T * C depthwise, in any shape of that size),
    out the output (any layout).  Buffers come from a pool (one set per concurrent call);
    each set keeps a flat view of the last output it wrote when that output may be kept
    (base.kept_array)."""

    def __init__(self, form, k, depthwise, signed):
        w, low, high, combine = form
        self.signed = signed
        nb, c = w.shape[1], w.shape[2]
        self.depthwise, self.k, self.c, self.blocks, self.combine = depthwise, k, c, nb, combine
        if not depthwise:
            w = w.reshape(k + 1, nb * c)
        elif nb == 1:
            w = w.reshape(k + 1, c)
        self.w = np.ascontiguousarray(w)
        self.low, self.high = low, high
        self.run = self._make_run()

    @classmethod
    def for_stage(cls, taps, zx, stage, out_dtype, depthwise=False):
        """One for this constant stage, or None where direct_columns has no form, or where its
        two-term form would have more than DIRECT_TWO_MAX weights (a large layer keeps
        TableProduct: one block of weights and a step table, as before).  (A layer of one or a
        few channels, whose step table would stay in cache, takes it too: alone its table
        lookup costs a little less than the two blocks' clamp and sum, but in a running
        wake-word model the calls it shares with the depthwise layers are the warm ones: its
        one-row FULLY_CONNECTED layers of one unit measured no slower this way, CPU time in one
        process, alternating.)"""
        if stage is None or _CLIP_UFUNC is None:
            return None
        k, c = np.shape(taps)
        if stage.mode == "float" and stage.need_neg and 2 * (k + 1) * c > DIRECT_TWO_MAX:
            return None
        form = direct_columns(taps, zx, stage, out_dtype)
        return None if form is None else cls(form, np.shape(taps)[0], depthwise,
                                                  np.dtype(out_dtype).type is np.int8)

    def __call__(self, x, out):
        self.run(x, out)

    def _make_run(self):
        k, c, nb, depthwise, combine = self.k, self.c, self.blocks, self.depthwise, self.combine
        w, low, high = self.w, self.low, self.high
        pool = []
        pop, push = pool.pop, pool.append
        copyto, dot, clip, add, xor = np.copyto, np.dot, _CLIP_UFUNC, np.add, np.bitwise_xor
        sub = "tc,tc->c" if nb == 1 else "tc,tkc->kc"
        flip = np.full(c, -128, np.int8)
        mode = {"store": 0, "flip": 1, "add": 2 if self.signed else 3}[combine]

        def new(shape):
            xa = np.ones((k + 1, c) if depthwise else (k + 1,), np.float64)
            z = np.empty((nb, c) if depthwise and nb > 1 else nb * c, np.float64)
            b = np.empty(nb * c, np.uint8)
            # [input shape, row, its view in that shape, product, flat product, bytes,
            #  the two halves as int8 and as uint8, last output, its flat view]
            return [shape, xa, xa[:k].reshape(shape), z, z.reshape(-1), b, b[:c].view(np.int8),
                    b[c:].view(np.int8), b[:c], b[c:], None, None]

        def run(x, out):
            try:
                f = pop()
            except IndexError:
                f = new(x.shape)
            if x.shape != f[0]:
                f[0], f[2] = x.shape, f[1][:k].reshape(x.shape)
            copyto(f[2], x)
            if depthwise:
                c_einsum(sub, f[1], w, out=f[3])
            else:
                dot(f[1], w, out=f[3])
            if out is f[10]:
                o = f[11]
            elif out.flags.c_contiguous:
                o = out.reshape(-1)
                if kept_array(out):
                    f[10], f[11] = out, o
            else:
                o = None
            r = o if o is not None else np.empty(c, out.dtype)
            if mode == 0:                   # uint8, one term: the clamp stored into the output
                clip(f[4], low, high, out=r, casting="unsafe")
            else:
                clip(f[4], low, high, out=f[5], casting="unsafe")
                if mode == 1:               # int8, one term: (v + 128) with its top bit flipped
                    xor(f[6], flip, out=r)
                elif mode == 2:             # int8, two terms: their wrapping byte sum
                    add(f[6], f[7], out=r)
                else:                       # uint8, two terms
                    add(f[8], f[9], out=r)
            if o is None:                   # (a strided output: through a contiguous row)
                out[...] = r.reshape(out.shape)
            push(f)
        return run


# ---- exact rounding and 256-entry tables (8-bit operands) -----------------------------------
def round_half_away(v):
    """std::round on a float array, exactly: trunc(v) + sign(v) where |v - trunc(v)| >= 0.5.

    (Adding copysign(0.5, v) before truncating is wrong for the largest float below 0.5,
    whose sum with 0.5 rounds up to 1.)  Returns a new array of v's float type."""
    v = np.asarray(v)
    if v.dtype.kind != "f":
        v = v.astype(np.float64)
    t = np.trunc(v)
    frac = np.subtract(v, t)
    np.abs(frac, out=frac)
    np.copysign(frac >= 0.5, v, out=frac)
    t += frac
    return t


def requantize_into(out, real, scale, zp):
    """out[...] = clamp(round_half_away(real / scale) + zp) to out's integer range (float64)."""
    lo, hi = qrange_of_dtype(out.dtype)
    v = round_half_away(np.divide(real, scale, dtype=np.float64))
    v += zp
    clip_inplace(v, lo, hi)
    out[...] = v


quantize_to = requantize_into      # float values -> quantized into out (the same arithmetic)


def quantize_value(v, scale, zp, dtype):
    """The reference's quantize(f) = zp + (int)std::round(f / scale) (float32 division), saturated."""
    q = float(round_half_away(np.array([np.float32(v) / np.float32(scale)]))[0]) + zp
    lo, hi = qrange_of_dtype(dtype)
    return int(min(max(q, lo), hi))


def byte_codes(dtype):
    """The 256 integer values of an 8-bit type ordered by bit pattern (index = x.view(uint8))."""
    c = np.arange(256, dtype=np.uint8)
    return c.view(np.dtype(dtype)).astype(np.int64)


def as_bytes(a):
    """The byte pattern of an 8-bit array (a view, no copy): the index into a 256-entry table."""
    return a.view(np.uint8)


def take(table, a, out):
    """out[...] = table[byte of a]: one gather written into out (mode "clip": every byte is a
    valid index of a 256-entry table, so no index is clipped; it skips "wrap"'s modulo)."""
    np.take(table, as_bytes(a), out=out, mode="clip")


PAIR_LOOKUP_MIN = 4096      # ByteLookup: values from which two bytes are looked up at once


class ByteLookup:
    """A kernel's out[...] = table[byte of a] for a 256-entry table (out any view).  numpy's gather costs
    about 2 ns an index whatever the table, so for an 8-bit output of at least
    PAIR_LOOKUP_MIN values (contiguous) the input is read as 16-bit indices
    into the table of every pair of bytes (65536 entries of 2 bytes, made at the first such
    call): half as many gathers, the same bytes (176K values: 242 -> 119 us)."""

    def __init__(self, table):
        self.table = table
        self._pairs = None

    def pairs(self):
        p = self._pairs
        if p is None:
            # entry r holds the output bytes of the two input bytes r is made of, in memory
            # order (so the byte order of the machine does not matter)
            both = np.arange(1 << 16, dtype=np.uint16).view(np.uint8)
            p = self._pairs = np.ascontiguousarray(self.table.view(np.uint8)[both]).view(np.uint16)
        return p

    def __call__(self, a, out):
        n = out.size
        if n >= PAIR_LOOKUP_MIN and self.table.itemsize == 1 and a.itemsize == 1 and a.size == n \
                and a.flags.c_contiguous and out.flags.c_contiguous:
            x, y = a.reshape(-1), out.reshape(-1)
            e = n - n % 2                               # an odd count: the last value alone
            np.take(self.pairs(), x[:e].view(np.uint16), out=y[:e].view(np.uint16), mode="clip")
            if e < n:
                take(self.table, x[e:], y[e:])
        elif out.flags.c_contiguous:
            take(self.table, a, out)
        else:                                           # a strided view of an output
            out[...] = self.table[as_bytes(a)]


# ---- a 256 x 256 pair table in float32 arithmetic (quantized ADD / SUB) -------------------------
_PAIR_NUDGES = 2            # PairAffine.prove: each multiplier nudged by up to this many ulps each way
_PAIR_WALK = 4              # ... and each pair's constant walked up to this many ulps to its least
PAIR_AFFINE_MIN = 8192      # outputs from which the float form beats the pair table's gather (in the
                            # CNNs, both forms timed on each call: 57K values 145 against 172 us,
                            # 9.4K 55 against 69 us)


class PairAffine:
    """out = table[a, b] for a table affine in the two inputs' values up to its rounding (the
    reference ADD / SUB): computed as float32 passes, clamp(fl(fl(fl(a A) + fl(b B)) + K)),
    truncated by the byte store (int8: an offset of 128 in K and the clamp, the top bit flipped
    after).  prove() finds the constants and checks them against every one of the 65536 pairs,
    with the numpy float32 operations __call__ runs in the same order: exact by construction,
    or None.  Its passes (a cast and a multiply per input, two adds, the clamp and the store)
    cost less than the pair index and numpy's gather (about 1.8 ns a value) on large tensors."""

    def __init__(self, a_mul, b_mul, k, lo, hi, off):
        self.A, self.B, self.K = a_mul, b_mul, k
        self.lo, self.hi, self.off = np.float32(lo), np.float32(hi), off

    @classmethod
    def prove(cls, table, da, db, ra, rb, out_dtype):
        """table: the 65536 outputs (index byte(a) << 8 | byte(b)); da, db: the inputs' dtypes;
        ra, rb: the real multipliers of their values (scale / output scale; negative for
        SUB's second input).  For each multiplier nudged by up to _PAIR_NUDGES ulps, K is the
        least float32 constant found (each pair's estimate t - u walked a few ulps) that lifts
        every pair to its output: the value is non-decreasing in K, so a smaller K only eases
        the pairs' upper bounds.  Whatever the search finds, the check on all pairs decides."""
        if not (2.0 ** -40 < abs(ra) < 2.0 ** 24 and 2.0 ** -40 < abs(rb) < 2.0 ** 24):
            return None             # (NaN too) a multiplier float32 cannot hold, or no table to fit
        with np.errstate(all="ignore"):
            return cls._prove(table, da, db, ra, rb, out_dtype)

    @classmethod
    def _prove(cls, table, da, db, ra, rb, out_dtype):
        f32 = np.float32
        off = 128 if np.dtype(out_dtype) == np.int8 else 0
        t = np.asarray(table).astype(np.int64).reshape(256, 256) + off
        lo, hi = int(t.min()), int(t.max())
        if lo == hi:
            return None
        xa = byte_codes(da).astype(f32)[:, None]
        xb = byte_codes(db).astype(f32)[None, :]
        tf = t.astype(f32)
        need_lo = t > lo                       # pairs whose value must reach t (t = lo: clamped up)
        for a_mul in cls._nudged(f32(ra)):
            pa = np.multiply(xa, a_mul)
            for b_mul in cls._nudged(f32(rb)):
                u = np.add(pa, np.multiply(xb, b_mul))          # [256, 256] float32
                k = cls._least_constant(u[need_lo], tf[need_lo])
                if k is None:
                    continue
                got = np.clip(np.add(u, k), f32(lo), f32(hi)).astype(np.uint8)     # the kernel's store
                if np.array_equal(got.astype(np.int64), t):
                    return cls(a_mul, b_mul, k, lo, hi, off)
        return None

    @staticmethod
    def _nudged(x):
        yield x
        for d in range(1, _PAIR_NUDGES + 1):
            for to in (np.inf, -np.inf):
                y = x
                for _ in range(d):
                    y = np.nextafter(y, np.float32(to))
                yield np.float32(y)

    @staticmethod
    def _least_constant(u, t):
        """The least float32 k with fl(u + k) >= t at every position (None: none found in
        a few ulps of the estimate t - u; prove's check decides in any case)."""
        if u.size == 0:
            return None
        k = _walk_to_least(np.subtract(t, u), lambda kk: np.add(u, kk) >= t, _PAIR_WALK)
        return np.float32(k.max())

    def __call__(self, a, b, out):
        """a, b: arrays of out's shape (8-bit); out: 8-bit."""
        fa = _work(("pair_a", np.float32), out.shape)
        fb = _work(("pair_b", np.float32), out.shape)
        np.copyto(fa, a, casting="unsafe")          # exact: 8-bit values
        np.multiply(fa, self.A, out=fa)
        np.copyto(fb, b, casting="unsafe")
        np.multiply(fb, self.B, out=fb)
        np.add(fa, fb, out=fa)
        np.add(fa, self.K, out=fa)
        clip_inplace(fa, self.lo, self.hi)
        o = out.view(np.uint8)
        o[...] = fa                                  # >= 0 after the clamp: truncation is the floor
        if self.off:
            o ^= 0x80


def dequant_table(type_code, scale, zp):
    """float32 real value of every byte of an 8-bit operand: (q - zp) * scale in float32."""
    return (byte_codes(C.DTYPES[type_code]) - zp).astype(np.float32) * np.float32(scale)


def requant_table(src_type, src_scale, src_zp, dst_type, dst_scale, dst_zp):
    """Byte -> value of dst's type: the reference requantize() (float32 dequantization,
    double division, clamp, round half away from zero)."""
    real = dequant_table(src_type, src_scale, src_zp).astype(np.float64)
    v = real / float(dst_scale) + dst_zp
    lo, hi = qrange(dst_type)
    v = np.clip(v, lo, hi)
    return round_half_away(v).astype(C.DTYPES[dst_type])


def affine_requant_table(dtype, src_scale, src_zp, dst_scale, dst_zp):
    """Byte -> value of the 8-bit type dtype: the reference's float32 requantization of
    CONCATENATION -- multiplier src_scale * (1 / dst_scale) and bias -src_zp * multiplier in
    float32, x * multiplier + bias rounded half away from zero, plus dst_zp, saturated;
    signed values go through the unsigned domain (+128) like the reference."""
    shift = 128 if np.dtype(dtype) == np.int8 else 0
    sc = np.float32(np.float32(src_scale) * (np.float32(1.0) / np.float32(dst_scale)))
    bias = np.float32(np.float32(-(src_zp + shift)) * sc)
    v = (byte_codes(dtype) + shift).astype(np.float32) * sc + bias
    r = round_half_away(v).astype(np.int64) + (dst_zp + shift)
    return (np.clip(r, 0, 255) - shift).astype(dtype)


def unary_table(in_dtype, in_scale, in_zp, out_dtype, out_scale, out_zp, real_fn):
    """256-entry table: requantize real_fn(dequantized input code) to the output's parameters."""
    real = real_fn((byte_codes(in_dtype) - in_zp).astype(np.float64) * in_scale)
    tab = np.empty(256, out_dtype)
    requantize_into(tab, real, out_scale, out_zp)
    return tab


# ---- 16-bit fixed point (gemmlowp's FixedPoint<int16_t, k>), for the quantized LSTMs -----------------
# Values are int64 arrays holding int16 raw values; k integer bits means raw / 2**(15 - k).
I16_MIN, I16_MAX = -32768, 32767


def wrap16(x):
    """int16 wrap-around of plain int16 addition / subtraction."""
    return ((x + 32768) & 0xFFFF) - 32768


def sat16(x):
    return np.clip(x, I16_MIN, I16_MAX)


def srdhm16(a, b):
    """SaturatingRoundingDoublingHighMul on int16: round(a * b / 2**15), ties away from zero."""
    ab = np.asarray(a, np.int64) * np.asarray(b, np.int64)
    s = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    r = np.where(s >= 0, s >> 15, -((-s) >> 15))        # C division truncates toward zero
    return np.where((np.asarray(a) == I16_MIN) & (np.asarray(b) == I16_MIN), I16_MAX, r)


def rdbpot(x, exponent):
    """RoundingDivideByPOT on an int64 array (ties away from zero)."""
    return _rdbpot(np.asarray(x, np.int64), exponent)


def rescale16(x, exponent):
    """SaturatingRoundingMultiplyByPOT<exponent> on int16 raw values."""
    if exponent > 0:
        return sat16(np.asarray(x, np.int64) << exponent)
    return rdbpot(x, -exponent)


def _const16(raw32):
    """A gemmlowp int32 fixed-point constant as its int16 counterpart (rounding shift by 16)."""
    return int(_rdbpot(np.array([raw32], np.int64), 16)[0])


def _half_sum16(a, b):
    s = np.asarray(a, np.int64) + b
    t = s + np.where(s >= 0, 1, -1)
    return np.where(t >= 0, t >> 1, -((-t) >> 1))


_EXP_C, _EXP_THIRD = _const16(1895147668), _const16(715827883)
_EXP_BARREL = [(e, _const16(m)) for e, m in ((-2, 1672461947), (-1, 1302514674), (0, 790015084),
                                            (1, 290630308), (2, 39332535), (3, 720401), (4, 242))]
_C48_17, _CN32_17 = _const16(1515870810), _const16(-1010580540)


def _exp_quarter16(a):
    """exp(a) for a in [-1/4, 0), Q0.15 in and out (Taylor series around -1/8)."""
    x = wrap16(a + (1 << 12))
    x2 = srdhm16(x, x)
    x3 = srdhm16(x2, x)
    x4 = srdhm16(x2, x2)
    t = wrap16(srdhm16(wrap16(rdbpot(x4, 2) + x3), _EXP_THIRD) + x2)
    return sat16(_EXP_C + srdhm16(_EXP_C, wrap16(x + rdbpot(t, 1))))


def exp_on_negative16(a, int_bits):
    """exp(a) for a <= 0 given with int_bits integer bits; result Q0.15."""
    a = np.asarray(a, np.int64)
    frac = 15 - int_bits
    quarter = 1 << (frac - 2)
    amq = wrap16((a & (quarter - 1)) - quarter)
    result = _exp_quarter16(rescale16(amq, int_bits))
    rem = wrap16(amq - a)
    for e, mult in _EXP_BARREL:
        if int_bits > e:
            result = np.where((rem & (1 << (frac + e))) != 0, srdhm16(result, mult), result)
    if int_bits > 5:
        result = np.where(a < _const16(-(1 << (36 - int_bits))), 0, result)
    return np.where(a == 0, I16_MAX, result)


def _newton_1_over_1_plus_x(hd):
    x = sat16(_C48_17 + srdhm16(hd, _CN32_17))
    for _ in range(3):
        one_minus = wrap16((1 << 13) - srdhm16(hd, x))
        x = sat16(x + rescale16(srdhm16(x, one_minus), 2))
    return x


def logistic16(a, int_bits):
    """gemmlowp logistic of FixedPoint<int16, int_bits> -> Q0.15."""
    a = np.asarray(a, np.int64)
    pos = a > 0
    absx = np.where(pos, a, wrap16(-a))
    e = exp_on_negative16(wrap16(-absx), int_bits)
    rp = rescale16(_newton_1_over_1_plus_x(_half_sum16(e, I16_MAX)), 1)
    rn = wrap16(I16_MAX - rp)
    return np.where(a == 0, 1 << 14, np.where(pos, rp, rn))


def tanh16(a, int_bits):
    """gemmlowp tanh of FixedPoint<int16, int_bits> -> Q0.15."""
    a = np.asarray(a, np.int64)
    neg = a < 0
    n = np.where(neg, a, wrap16(-a))
    e = exp_on_negative16(n, int_bits + 1)
    t = rescale16(wrap16(_newton_1_over_1_plus_x(_half_sum16(e, I16_MAX)) - (1 << 13)), 2)
    return np.where(a == 0, 0, np.where(neg, wrap16(-t), t))


# ---- 32-bit helpers of the integer LSTM (scalar Python ints, per batch row) -------------------------
def _srdhm32(a, b):
    if a == INT32_MIN and b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    s = ab + ((1 << 30) if ab >= 0 else 1 - (1 << 30))
    return s >> 31 if s >= 0 else -((-s) >> 31)


def _sat_pot32(x, e):
    return max(INT32_MIN, min(INT32_MAX, x << e)) if e > 0 else x


def inv_sqrt_multiplier(value, reverse_shift=-1):
    """GetInvSqrtQuantizedMultiplierExp: (multiplier, shift) with 1/sqrt(value) ~ multiplier * 2**shift."""
    if value <= 1:
        return INT32_MAX, 0
    shift = 11
    while value >= (1 << 29):
        value //= 4
        shift += 1
    lz = 32 - value.bit_length()
    pairs = (lz - 1) // 2 - 1
    shift -= pairs
    value <<= 2 * pairs
    half_input = int(_rdbpot(np.array([value >> 1], np.int64), 1)[0])     # F3
    half_three = (1 << 28) + (1 << 27)
    x = 1 << 28                                                         # F3 one
    for _ in range(5):
        x3 = _sat_pot32(_srdhm32(_srdhm32(x, x), x), 6)
        x = _sat_pot32(((_srdhm32(half_three, x) - _srdhm32(half_input, x3) + (1 << 31)) % (1 << 32)) - (1 << 31), 3)
    x = _srdhm32(x, 1518500250)
    if shift < 0:
        x <<= -shift
        shift = 0
    return x, shift * reverse_shift


def int_layer_norm(x, weights, bias, scale_q, scale_shift, variance_limit):
    """ApplyLayerNorm of the integer LSTM: x (batch, n) int16 values -> int16 values (int64 array)."""
    x = np.asarray(x, np.int64)
    n = x.shape[1]
    out = np.empty_like(x)
    w = np.asarray(weights, np.int64)
    b = np.asarray(bias, np.int64) if bias is not None else np.zeros(n, np.int64)
    for r in range(x.shape[0]):
        row = x[r]
        s, sq = int(row.sum()), int((row * row).sum())
        mean = (abs(s * 1024) // n) * (1 if s >= 0 else -1)                    # C division
        variance = sq * ((1 << 20) // n) - mean * mean
        v2 = (abs(variance) >> 20) * (1 if variance >= 0 else -1)
        if v2 < 1:
            v2 = variance_limit
        qa, qb = inv_sqrt_multiplier(v2, -1)
        rescaled = multiply_by_quantized_multiplier(1024 * row - mean, qa, qb)
        v3 = ((rescaled * w + b + (1 << 31)) % (1 << 32)) - (1 << 31)          # int32 arithmetic
        v4 = np.where(v3 > 0, (v3 + 512) // 1024, -((-(v3 - 512)) // 1024))
        out[r] = np.clip(multiply_by_quantized_multiplier(v4, scale_q, scale_shift + 12), I16_MIN, I16_MAX)
    return out
