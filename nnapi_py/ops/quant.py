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
    np.clip(v, lo, hi, out=v)
    out[...] = v


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
    """out[...] = table[byte of a]: one gather written into out."""
    np.take(table, as_bytes(a), out=out, mode="wrap")


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


def unary_table(in_dtype, in_scale, in_zp, out_dtype, out_scale, out_zp, real_fn):
    """256-entry table: requantize real_fn(dequantized input code) to the output's parameters."""
    real = real_fn((byte_codes(in_dtype) - in_zp).astype(np.float64) * in_scale)
    tab = np.empty(256, out_dtype)
    requantize_into(tab, real, out_scale, out_zp)
    return tab
