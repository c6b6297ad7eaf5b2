"""Test-only scalar transcription of the reference quantized arithmetic (plain Python ints),
to check the vectorised kernels of nnapi_py/ops/quant.py against.

    q, shift = quantize_multiplier(real)            # QuantizeMultiplier
    y = mul_q(x, q, shift)                          # MultiplyByQuantizedMultiplier
    lo, hi = act_range(fuse, scale, zp, lo, hi)     # CalculateActivationRangeQuantized
"""
import math

import numpy as np


def quantize_multiplier(d):
    """QuantizeMultiplier: d = q * 2**(shift - 31), q in [2**30, 2**31), std::round."""
    if d == 0:
        return 0, 0
    m, e = math.frexp(d)
    q = int(math.floor(m * (1 << 31) + 0.5))
    if q == 1 << 31:
        q //= 2
        e += 1
    if e < -31:
        return 0, 0
    return q, e


def srdhm(a, b):
    """SaturatingRoundingDoublingHighMul."""
    if a == b == -(1 << 31):
        return (1 << 31) - 1
    ab = a * b
    s = ab + ((1 << 30) if ab >= 0 else 1 - (1 << 30))
    return s // (1 << 31) if s >= 0 else -((-s) // (1 << 31))


def rdbpot(x, e):
    """RoundingDivideByPOT."""
    mask = (1 << e) - 1
    return (x >> e) + (1 if (x & mask) > (mask >> 1) + (1 if x < 0 else 0) else 0)


def mul_q(x, q, shift):
    """MultiplyByQuantizedMultiplier (the left-shifted value saturated to int32)."""
    x = x * (1 << max(shift, 0))
    x = max(-(1 << 31), min((1 << 31) - 1, x))
    return rdbpot(srdhm(x, q), max(-shift, 0))


def round_half_away(x):
    """std::round."""
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def act_range(fuse, scale, zp, lo, hi):
    """The quantized [lo, hi] of a fused activation (0 none, 1 RELU, 2 RELU1, 3 RELU6)."""
    def q(v):                     # std::round(float(v) / float(scale))
        return zp + round_half_away(float(np.float32(v) / np.float32(scale)))
    if fuse == 1:
        lo = max(lo, q(0.0))
    elif fuse == 2:
        lo, hi = max(lo, q(-1.0)), min(hi, q(1.0))
    elif fuse == 3:
        lo, hi = max(lo, q(0.0)), min(hi, q(6.0))
    return lo, hi
