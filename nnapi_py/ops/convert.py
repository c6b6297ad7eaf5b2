"""Type conversions: QUANTIZE, DEQUANTIZE, CAST.

QUANTIZE follows the reference formula literally: q = clamp(round(x / scale) + zeroPoint)
with the division in float32 (a float16 input is promoted to float32 first) and std::round
(half away from zero).  Like the reference's std::max(lo, std::min(hi, v)), NaN becomes the
largest code and +-inf saturate.

DEQUANTIZE computes (x - zeroPoint) * scale in float32 (per-channel: x * scale[c]) and rounds
once to float16 when the output is float16.

CAST ignores scale and zeroPoint.  Conversions to TENSOR_QUANT8_ASYMM saturate to [0, 255]
and truncate toward zero (the reference clamps, then static_casts); float -> TENSOR_INT32
truncates toward zero and saturates to the int32 range; NaN converts to 0 for integer
destinations (undefined in C, 0 on the reference's ARM targets); conversions to float
round to nearest.
"""
import math

import numpy as np

from .. import constants as C
from .base import Op, register, tname, value_error
from . import quant as Q
from . import common
from .common import Scratch, check_same_shape

F16, F32, I32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32, C.TENSOR_INT32
Q8, Q8S = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED
Q8SYMM, PERCH = C.TENSOR_QUANT8_SYMM, C.TENSOR_QUANT8_SYMM_PER_CHANNEL
BOOL8, Q16S, Q16A = C.TENSOR_BOOL8, C.TENSOR_QUANT16_SYMM, C.TENSOR_QUANT16_ASYMM


def _lookup(table, inp):
    """Kernel: the output is table[byte of the 8-bit input inp] (a 256-entry table): on a small
    tensor (common.SMALL) quant.small_lookup's one call, else quant.ByteLookup."""
    if common.small(inp):
        return Q.small_lookup(table, inp.dtype, common.n_elements(inp))
    look = Q.ByteLookup(table)

    def k(i, o):
        look(i[0], o[0])
    return k


def _same_shape(ins):
    return [ins[0].dims]


class _Conversion(Op):
    """QUANTIZE and DEQUANTIZE: one input, one output of its shape, each of a type of its table
    (in_levels, out_levels: type -> feature level); check_rank(sig) the operation's own rule."""
    allow_zero_sized = True
    in_levels: dict = {}
    out_levels: dict = {}

    def check_rank(self, sig):
        raise NotImplementedError

    def validate(self, sig):
        sig.count(1, 1)
        ti = sig.types("input", 0, self.in_levels)
        to = sig.types("output", 0, self.out_levels)
        check_same_shape(sig)
        self.check_rank(sig)
        return max(self.in_levels[ti], self.out_levels[to])


@register
class Quantize(_Conversion):
    name = "QUANTIZE"
    in_levels = {F32: 3, F16: 3}
    out_levels = {Q8: 3, Q8S: 4}

    def check_rank(self, sig):
        if sig.ins[0].rank == 0:
            sig.fail("input 0 must have rank >= 1")

    def infer(self, ins):
        return _same_shape(ins)

    def build(self, ins, outs):
        scale = np.float32(outs[0].scale)
        zp = np.float32(outs[0].zp)
        zpi = int(outs[0].zp)
        lo, hi = Q.qrange(outs[0].type)
        scratch = Scratch()

        def vector(x, out, bufs):
            # std::round(x / scale) on the float32 quotient: in float64, v + copysign(0.5, v)
            # is exact for every float32 v (at most 24 significant bits; from 2**52 on, float32
            # values are even integers and the tie rounds back to them), so truncating it
            # rounds half away from zero exactly -- 4 numpy calls instead of round_half_away's 7.
            # Kept work arrays: a fresh 1.2 MB temporary per run pays its page faults
            # (224x224x3: 2.45 -> 0.68 ms with the clip ufunc, 3x faster than fmin and fmax)
            v = bufs.array("v", x.shape, np.float64)
            w = bufs.array("w", x.shape, np.float64)
            np.divide(x, scale, out=v, dtype=np.float32)           # the float32 quotient, widened
            np.copysign(0.5, v, out=w)
            v += w
            np.trunc(v, out=v)
            v += zp
            Q.clip_inplace(v, lo, hi)
            total = v.sum()
            if total != total:             # NaN -> hi, as std::min(hi, NaN) in the reference
                np.copyto(v, hi, where=np.isnan(v))
            out[...] = v

        if ins[0].type in (Q8, Q8S):
            # an 8-bit input: the plan folded DEQUANTIZE -> QUANTIZE (Plan._fold_requantize) into
            # this operation; each code's result is computed once, by the same float path on
            # the value DEQUANTIZE gives it, and looked up: the same bytes
            table = np.empty(256, C.DTYPES[outs[0].type])
            with np.errstate(all="ignore"):
                codes = Q.dequant_table(ins[0].type, ins[0].scale, ins[0].zp).astype(np.float32)
            bufs = scratch.take()
            vector(codes, table, bufs)
            scratch.give(bufs)
            return _lookup(table, ins[0])

        if common.small(ins[0]) and common.n_elements(ins[0]) > 1:
            return _small_quantize(tuple(ins[0].dims), scale, zp, lo, hi)

        def k(i, o):
            # One value (a streaming step's input): the same in Python scalars (13.5 -> 2.8 us)
            x = i[0]
            if x.size == 1:
                q = float(np.float32(x.reshape(-1)[0]) / scale)     # the same float32 quotient
                if q != q:
                    r = hi                                          # NaN, as below
                else:
                    v = q + math.copysign(0.5, q)                   # exact, as below
                    r = min(max(math.trunc(v) + zpi, lo), hi) if abs(v) < 1e15 else (hi if v > 0 else lo)
                o[0][...] = r
                return
            bufs = scratch.take()
            try:
                vector(x, o[0], bufs)
            finally:
                scratch.give(bufs)
        return k


def _small_quantize(shape, scale, zp, lo, hi):
    """QUANTIZE of a small float tensor (common.SMALL): the general kernel's float64 steps on
    work arrays made here, and its clamp and NaN fix-up as two calls: np.maximum keeps a NaN,
    np.fmin turns it into hi (std::min(hi, NaN) of the reference) and stores into the output
    (values in [lo, hi]: the integer cast is exact) -- 7 numpy calls instead of 10 and no
    work-array bookkeeping; the same bytes."""
    v = np.empty(shape, np.float64)
    w = np.empty(shape, np.float64)
    lo, hi = float(lo), float(hi)

    def k(i, o):
        np.divide(i[0], scale, out=v, dtype=np.float32)           # the float32 quotient, widened
        np.copysign(0.5, v, out=w)
        np.add(v, w, out=v)
        np.trunc(v, out=v)                  # half away from zero, as the general kernel
        np.add(v, zp, out=v)
        np.maximum(v, lo, out=v)
        np.fmin(v, hi, out=o[0], casting="unsafe")
    return k


@register
class Dequantize(_Conversion):
    name = "DEQUANTIZE"
    in_levels = {Q8: 1, Q8SYMM: 3, PERCH: 3, Q8S: 4}
    out_levels = {F32: 1, F16: 3}

    def check_rank(self, sig):
        sig.rank_between("input", 0, 1, 4)

    def infer(self, ins):
        d = ins[0].dims
        if len(d) > 4:
            raise value_error(f"{self.name}: input 0 has rank {len(d)}, expected at most 4", at_runtime=False)
        return [d]

    def build(self, ins, outs):
        inp = ins[0]
        if inp.type == PERCH:
            ch = inp.channel
            if ch is None:
                raise value_error(f"{self.name}: input 0 has no per-channel quantization parameters",
                                  at_runtime=False)
            shape = [1] * len(inp.dims)
            shape[ch.dim] = len(ch.scales)
            scales = np.asarray(ch.scales, np.float32).reshape(shape)

            def k(i, o):
                o[0][...] = i[0].astype(np.float32) * scales
            return k
        # every 8-bit code's value, (q - zp) * scale in float32 (then rounded to float16 for a
        # float16 output), gathered by the input's bytes: one numpy call (a one-value
        # DEQUANTIZE in a streaming model 4.0 -> 2.1 us; 2 passes fewer on large tensors)
        with np.errstate(all="ignore"):
            table = Q.dequant_table(inp.type, inp.scale, inp.zp).astype(outs[0].dtype)
        return _lookup(table, inp)


# CAST: FL3 any-to-any among these; FL4 identity casts for the others
_CAST_ANY = (F16, F32, I32, Q8)
_CAST_IDENTITY = (BOOL8, Q16A, Q16S, Q8S, Q8SYMM)


def _to_int(x, lo, hi):
    """float -> integer: truncate toward zero, saturate to [lo, hi], NaN -> 0 (float64 bounds)."""
    v = np.clip(x.astype(np.float64), lo, hi)
    np.nan_to_num(v, copy=False, nan=0.0)
    return v


@register
class Cast(Op):
    name = "CAST"

    def validate(self, sig):
        sig.count(1, 1)
        ti, to = sig.ins[0].type, sig.outs[0].type
        check_same_shape(sig)
        if sig.ins[0].rank == 0:
            sig.fail("input 0 must have rank >= 1")
        if ti in _CAST_ANY and to in _CAST_ANY:
            return 3
        if ti == to and ti in _CAST_IDENTITY:
            return 4
        sig.fail(f"casting {tname(ti)} to {tname(to)} is not supported (any pair among TENSOR_FLOAT16, "
                 f"TENSOR_FLOAT32, TENSOR_INT32, TENSOR_QUANT8_ASYMM; identity casts for TENSOR_BOOL8, "
                 f"TENSOR_QUANT16_ASYMM, TENSOR_QUANT16_SYMM, TENSOR_QUANT8_ASYMM_SIGNED, TENSOR_QUANT8_SYMM)")

    def infer(self, ins):
        return _same_shape(ins)

    def build(self, ins, outs):
        ti, to = ins[0].type, outs[0].type
        float_in = ti in (F16, F32)
        if ti == to or to in (F16, F32) or (to == I32 and not float_in):
            # exact copies, integer widening, and rounding-to-nearest float conversions
            def k(i, o):
                o[0][...] = i[0]
            return k
        if to == Q8:
            if float_in:
                def k(i, o):
                    o[0][...] = _to_int(i[0], 0, 255)
            else:                      # int32 -> uint8 saturating
                def k(i, o):
                    np.clip(i[0], 0, 255, out=o[0], casting="unsafe")
            return k
        # float -> int32: truncating cast; the rare NaN / out-of-range values fixed afterwards
        def k(i, o):
            x = i[0]
            with np.errstate(all="ignore"):
                o[0][...] = x
                bad = ~(np.abs(x) < np.float32(2.0 ** 31))
            if bad.any():
                xb = x[bad]
                o[0][bad] = np.where(xb > 0, Q.INT32_MAX, np.where(xb < 0, Q.INT32_MIN, 0))
        return k
