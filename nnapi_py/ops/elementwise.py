"""Element-wise binary arithmetic with NNAPI broadcasting: ADD, MUL.

Shared machinery (Binary) is meant to be reused by SUB, DIV, MAXIMUM, ... : a subclass
declares its type table and provides float/int/quant kernels.
"""
import numpy as np

from .. import constants as C
from ..errors import NNError
from .base import Op, register, value_error
from . import quant as Q

F16, F32, I32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32, C.TENSOR_INT32
Q8, Q8S = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED


def broadcast_shape(name, a, b, at_runtime=False):
    """NNAPI broadcasting: trailing dims; equal or 1; 0 only with 0 or 1 (gives 0)."""
    try:
        return tuple(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        raise value_error(f"{name}: input shapes {list(a)} and {list(b)} are not broadcast-compatible",
                          at_runtime) from None


def check_fuse(sig, idx, int_type=False):
    f = sig.scalar_value(idx)
    if f is None:
        return
    if f not in (0, 1, 2, 3):
        sig.fail(f"input {idx} (fused activation) must be a FuseCode 0..3, got {f}")
    if int_type and f != 0:
        sig.fail(f"input {idx}: for TENSOR_INT32 the fused activation must be NONE (0), got {f}")


class Binary(Op):
    """Two tensors + FuseCode -> one tensor of input0's type, NNAPI broadcasting."""
    type_levels = {F32: 1, Q8: 1, F16: 3, Q8S: 4, I32: 4}
    allow_zero_sized = True

    def validate(self, sig):
        sig.count(3, 1)
        t = sig.types("input", 0, self.type_levels)
        sig.same_type("input", 1, t)
        sig.types("input", 2, (C.INT32,))
        sig.same_type("output", 0, t)
        sig.rank_between("input", 0, 1, 4)
        sig.rank_between("input", 1, 1, 4)
        check_fuse(sig, 2, t == I32)
        self.check_quant(sig, t)
        level = self.type_levels[t]
        if any(i.dims is not None and 0 in i.dims and i.value is not None for i in sig.ins[:2]):
            level = max(level, 3)
        return level

    def check_quant(self, sig, t):
        pass

    def infer(self, ins):
        return [broadcast_shape(self.name, ins[0].dims, ins[1].dims)]

    def build(self, ins, outs):
        t = ins[0].type
        fuse = int(ins[2].value) if ins[2].value is not None else None
        if fuse is None:
            raise NNError(C.BAD_DATA, f"{self.name}: the fused activation must be given")
        if t in (F32, F16, I32):
            return self.float_kernel(fuse)
        return self.quant_kernel(ins[0], ins[1], outs[0], fuse)

    def float_kernel(self, fuse):
        ufunc = self.ufunc
        if fuse == C.FUSED_NONE:
            def k(i, o):
                ufunc(i[0], i[1], out=o[0])
        else:
            act = Q.apply_float_activation

            def k(i, o):
                ufunc(i[0], i[1], out=o[0])
                act(o[0], fuse)
        return k


@register
class Add(Binary):
    name = "ADD"
    ufunc = staticmethod(np.add)

    def quant_kernel(self, a, b, out, fuse):
        # reference: both inputs rescaled to a common 2*max(scale) domain with 20 bits of
        # headroom, summed, then rescaled to the output scale
        left_shift = 20
        twice_max = 2.0 * max(a.scale, b.scale)
        m1 = Q.Requant(a.scale / twice_max)
        m2 = Q.Requant(b.scale / twice_max)
        mo = Q.Requant(twice_max / ((1 << left_shift) * out.scale))
        za, zb, zo = a.zp, b.zp, out.zp
        lo, hi = Q.activation_range(fuse, out.scale, out.zp, out.type)

        def k(i, o):
            x = (i[0].astype(np.int64) - za) << left_shift
            y = (i[1].astype(np.int64) - zb) << left_shift
            acc = mo(m1(x) + m2(y)) + zo
            Q.store(o[0], acc, lo, hi)
        return k


@register
class Mul(Binary):
    name = "MUL"
    ufunc = staticmethod(np.multiply)

    def check_quant(self, sig, t):
        if t in (Q8, Q8S):
            a, b, o = sig.ins[0], sig.ins[1], sig.outs[0]
            if not o.scale > a.scale * b.scale:
                sig.fail(f"output scale {o.scale} must be greater than input0 scale × input1 scale "
                         f"({a.scale} × {b.scale})")

    def quant_kernel(self, a, b, out, fuse):
        m = Q.Requant(a.scale * b.scale / out.scale)
        za, zb, zo = a.zp, b.zp, out.zp
        lo, hi = Q.activation_range(fuse, out.scale, out.zp, out.type)

        def k(i, o):
            acc = m((i[0].astype(np.int64) - za) * (i[1].astype(np.int64) - zb)) + zo
            Q.store(o[0], acc, lo, hi)
        return k
