"""gemmlowp-style 32-bit fixed point: the reference's requantization and rounding.

NNAPI's reference CPU implementation (like TFLite's) requantizes with 32-bit fixed-point
multipliers: a real multiplier M is written as q * 2**shift with q a Q31 integer in
[2**30, 2**31), and x * M is computed as

    RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x << max(shift, 0), q), max(-shift, 0))

where the doubling high multiply rounds half away from zero ((a*b + 2**30) >> 31 with a
nudge for negatives, truncated toward zero) and the power-of-two division rounds half away
from zero.  The functions below do exactly that on int64 numpy arrays, vectorised
(quantize_multiplier(s), _srdhm, _rdbpot, multiply_by_quantized_multiplier, Requant).

Also here: the exact std::round (round_half_away) and the float <-> quantized conversions built
on it (requantize_into / quantize_to, quantize_value, dequantize)."""
import math

import numpy as np

from .clamp import clip_inplace, qrange_of_dtype


INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


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


def dequantize(a, scale, zp):
    """Quantized integer array -> float32 real values."""
    return (a.astype(np.float32) - np.float32(zp)) * np.float32(scale)
