"""Element-wise functions of one tensor: ABS, NEG, EXP, LOG, SIN, SQRT, RSQRT, FLOOR.

The output has the input's type and shape.  Float16 is computed in float32 and rounded
once (numpy's half-precision loops do exactly that), as the reference does.  Quantized
RSQRT (FL7) maps each of the 256 input bytes through the reference formula once in
build(): dequantize in float32, 1 / sqrt(x) in float32, divide by the output scale,
round half away from zero, add the zero point, clamp (x <= 0 gives the type's maximum).
"""
import numpy as np

from .. import constants as C
from .base import Op, register, register_variants, value_error
from .common import check_present, dequant_table, small, QUANT8
from .quant import qrange, round_half_away, take

F16, F32, I32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32, C.TENSOR_INT32
Q8, Q8S = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED


class Unary(Op):
    """One tensor -> one tensor of the same type and shape."""
    type_levels = {F32: 3, F16: 3}
    max_rank = None
    ufunc = None
    quiet = False          # silence numpy's floating-point warnings (domain errors -> NaN/inf)

    def validate(self, sig):
        sig.count(1, 1)
        t = sig.types("input", 0, self.type_levels)
        sig.same_type("output", 0, t)
        check_present(sig)
        if self.max_rank is not None:
            sig.rank_between("input", 0, 1, self.max_rank)
        if t in QUANT8:
            self.check_quant(sig)
        return self.type_levels[t]

    def check_quant(self, sig):
        sig.same_quant("output", 0, sig.ins[0])

    def infer(self, ins):
        if self.max_rank is not None and len(ins[0].dims) > self.max_rank:
            raise value_error(f"{self.name}: input 0 has rank {len(ins[0].dims)}, expected at most "
                              f"{self.max_rank}", at_runtime=False)
        return [ins[0].dims]

    def build(self, ins, outs):
        f = self.ufunc
        # (quiet ufuncs: inf/NaN results; numpy's warnings are silenced where kernels run)
        def k(i, o):
            f(i[0], out=o[0])
        return k


register_variants(Unary, globals(), [
    # ABS: INT32_MIN stays INT32_MIN (two's complement)
    ("Abs", dict(name="ABS", type_levels={F32: 3, F16: 3, I32: 4}, ufunc=staticmethod(np.absolute))),
    ("Neg", dict(name="NEG", type_levels={F32: 3, F16: 3, I32: 3}, ufunc=staticmethod(np.negative))),
    ("Exp", dict(name="EXP", ufunc=staticmethod(np.exp), quiet=True)),
    ("Log", dict(name="LOG", ufunc=staticmethod(np.log), quiet=True)),
    ("Sin", dict(name="SIN", ufunc=staticmethod(np.sin), quiet=True)),
    ("Sqrt", dict(name="SQRT", ufunc=staticmethod(np.sqrt), quiet=True)),
    ("Floor", dict(name="FLOOR", type_levels={F32: 1, F16: 3}, max_rank=4, ufunc=staticmethod(np.floor))),
])


def _rsqrt_float(x, out):
    np.sqrt(x, out=out)
    np.divide(np.float32(1.0), out, out=out)


@register
class Rsqrt(Unary):
    name = "RSQRT"
    type_levels = {F32: 3, F16: 3, Q8: 7, Q8S: 7}

    def check_quant(self, sig):
        pass       # the output's scale and zeroPoint may differ from the input's

    def build(self, ins, outs):
        t = ins[0].type
        if t in QUANT8:
            table = rsqrt_table(ins[0], outs[0])

            def k(i, o):
                take(table, i[0], o[0])
            return k
        if t == F16:
            # 1 / sqrt(x) in float32, rounded to half once
            def k(i, o):
                o[0][...] = np.float32(1.0) / np.sqrt(i[0], dtype=np.float32)
            return k
        if small(*ins, *outs):
            # the square roots into a new array, divided into the output: no ufunc in place
            # (about 0.5 us more on one element) and the 1 a prepared 0-d array
            one, sqrt, div = np.ones((), np.float32), np.sqrt, np.divide

            def k(i, o):
                div(one, sqrt(i[0]), out=o[0])
            return k

        def k(i, o):
            _rsqrt_float(i[0], o[0])
        return k


def rsqrt_table(src, dst):
    """Byte -> quantized 1/sqrt of its real value, the reference's float32 arithmetic."""
    x = dequant_table(src)
    with np.errstate(all="ignore"):
        r = np.float32(1.0) / np.sqrt(x)
        r = r / np.float32(dst.scale)
        r = round_half_away(r.astype(np.float64)) + dst.zp      # inf stays inf, NaN NaN
    lo, hi = qrange(dst.type)
    r = np.where(np.isnan(r), hi, r)          # x < 0: NaN, which the reference clamps to max
    return np.clip(r, lo, hi).astype(C.DTYPES[dst.type])
