"""The 16-bit fixed point of the quantized LSTMs (gemmlowp's FixedPoint<int16_t, k>: wrap16,
sat16, srdhm16, rescale16, exp_on_negative16, logistic16, tanh16) and the 32-bit helpers of the
integer LSTM's layer normalization (inv_sqrt_multiplier, int_layer_norm)."""
import numpy as np

from .fixedpoint import INT32_MAX, INT32_MIN, _rdbpot, multiply_by_quantized_multiplier


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
