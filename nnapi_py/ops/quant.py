"""Quantized arithmetic shared by every operation: one place, the reference rounding.

NNAPI's reference CPU implementation (like TFLite's) requantizes with 32-bit fixed-point
multipliers: a real multiplier M is written as q * 2**shift with q a Q31 integer in
[2**30, 2**31), and x * M is computed as

    RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x << max(shift, 0), q), max(-shift, 0))

where the doubling high multiply rounds half away from zero ((a*b + 2**30) >> 31 with a
nudge for negatives, truncated toward zero) and the power-of-two division rounds half away
from zero.  The functions below do exactly that on int64 numpy arrays, vectorised.
"""
import math

import numpy as np

from .. import constants as C

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
        np.maximum(out, 0, out=out)
    elif fuse == C.FUSED_RELU1:
        np.clip(out, -1, 1, out=out)
    elif fuse == C.FUSED_RELU6:
        np.clip(out, 0, 6, out=out)


def dequantize(a, scale, zp):
    """Quantized integer array -> float32 real values."""
    return (a.astype(np.float32) - np.float32(zp)) * np.float32(scale)


def quantize_to(out, real, scale, zp):
    """Float values -> quantized into `out` (round half away from zero, saturate)."""
    lo, hi = qrange_of_dtype(out.dtype)
    v = np.asarray(real, np.float64) / scale
    t = np.trunc(v)
    v = t + np.copysign(np.abs(v - t) >= 0.5, v) + zp      # exact half-away-from-zero
    np.clip(v, lo, hi, out=v)
    out[...] = v


def qrange_of_dtype(dt):
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


def store(out, acc, lo, hi):
    """Clamp an integer accumulator to [lo, hi] and write it into out."""
    np.clip(acc, lo, hi, out=acc)
    out[...] = acc
