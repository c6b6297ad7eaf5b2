"""Normalizations: L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION, INSTANCE_NORMALIZATION.

L2_NORMALIZATION and INSTANCE_NORMALIZATION accumulate in float64 and round once into the
output's type (float16 included); LOCAL_RESPONSE_NORMALIZATION computes in float32 like the
reference (window sums by shifted adds for radius <= 16, else from a float64 running sum).
Quantized L2_NORMALIZATION works on the integer offsets from the zero point (the input scale
cancels out, as in the reference) and requantizes x / ||x|| to the fixed output scale 1/128
with round-half-away; an all-zero vector gives the output zero point ("logical zero", FL4).
"""
import numpy as np

from .. import constants as C
from .base import Op, register, value_error
from .common import (F16, F32, Q8, Q8S, FLOATS, QUANT8, check_scalar, float_kernel, optional_axis,
                         optional_axis_level, same_shape_signature, scalar_for)
from .quant import requantize_into


def _axis(name, ins, idx):
    rank = len(ins[0].dims)
    if rank > 4:
        raise value_error(f"{name}: input 0 has rank {rank}, expected at most 4", at_runtime=False)
    return optional_axis(name, ins, idx)


def _scalar_values(name, ins, roles):
    """Values of the scalar inputs (index, role) in roles; each must be known."""
    vals = []
    for k, what in roles:
        if ins[k].value is None:
            raise value_error(f"{name}: input {k} ({what}) has no value", at_runtime=False)
        vals.append(ins[k].value.item())
    return vals


class _AxisNormalization(Op):
    """Output shaped as input 0 (rank at most 4), normalized along the optional axis input."""
    axis_input = None

    def infer(self, ins):
        _axis(self.name, ins, self.axis_input)
        return [ins[0].dims]


@register
class L2Normalization(_AxisNormalization):
    name = "L2_NORMALIZATION"
    axis_input = 1
    optional_inputs = (1,)
    type_levels = {F32: 1, F16: 3, Q8: 3, Q8S: 4}
    allow_zero_sized = True

    def validate(self, sig):
        t = same_shape_signature(sig, (1, 2), self.type_levels)
        sig.rank_between("input", 0, 1, 4)
        if t in QUANT8:
            sig.fixed_quant(0, 1.0 / 128, 128 if t == Q8 else 0)
        return optional_axis_level(sig, 2, 1, self.type_levels[t], (4,))

    def build(self, ins, outs):
        axis = _axis(self.name, ins, self.axis_input)
        if ins[0].type in FLOATS:
            eps = 1e-6          # the reference divides by max(||x||, 1e-6)

            def l2(x, out):
                if x.size == 0:
                    return
                x64 = x.astype(np.float64)
                norm = np.sqrt(np.square(x64).sum(axis=axis, keepdims=True))
                np.maximum(norm, eps, out=norm)
                x64 /= norm
                out[...] = x64
            return float_kernel(l2, outs[0].dtype)
        zi, zo = ins[0].zp, outs[0].zp

        def k(i, o):
            if i[0].size == 0:
                return
            v = i[0].astype(np.int64) - zi
            ss = np.square(v).sum(axis=axis, keepdims=True)
            inv = np.zeros(ss.shape, np.float64)
            np.divide(1.0, np.sqrt(ss), out=inv, where=ss > 0)
            requantize_into(o[0], v * inv, 1.0 / 128, zo)
        return k


@register
class LocalResponseNormalization(_AxisNormalization):
    name = "LOCAL_RESPONSE_NORMALIZATION"
    axis_input = 5
    optional_inputs = (5,)
    type_levels = {F32: 1, F16: 3}

    def validate(self, sig):
        t = same_shape_signature(sig, (5, 6), self.type_levels)
        sig.rank_between("input", 0, 1, 4)
        sig.types("input", 1, (C.INT32,), "radius")
        st = scalar_for(t)
        for k, what in ((2, "bias"), (3, "alpha"), (4, "beta")):
            check_scalar(sig, k, what, st, t)
        r = sig.scalar_value(1)
        if r is not None and r < 0:
            sig.fail(f"input 1 (radius) must be >= 0, got {r}")
        b = sig.scalar_value(2)
        if b is not None and b == 0:
            sig.fail("input 2 (bias) must not be zero")
        return optional_axis_level(sig, 6, 5, self.type_levels[t], (4,))

    def build(self, ins, outs):
        axis = _axis(self.name, ins, self.axis_input)
        vals = _scalar_values(self.name, ins, ((1, "radius"), (2, "bias"), (3, "alpha"), (4, "beta")))
        radius, bias, alpha, beta = int(vals[0]), float(vals[1]), float(vals[2]), float(vals[3])
        if radius < 0:
            raise value_error(f"{self.name}: input 1 (radius) must be >= 0, got {radius}", at_runtime=False)
        if bias == 0:
            raise value_error(f"{self.name}: input 2 (bias) must not be zero", at_runtime=False)
        n = ins[0].dims[axis]
        taps = min(radius, max(n - 1, 0))
        if taps > 16:
            # long windows: differences of a float64 running sum along the axis
            idx = np.arange(n)
            hi = np.minimum(idx + radius + 1, n)
            lo = np.maximum(idx - radius, 0)

            def window(sq):
                cs = np.zeros(sq.shape[:-1] + (n + 1,), np.float64)
                np.cumsum(sq, axis=-1, dtype=np.float64, out=cs[..., 1:])
                return (cs[..., hi] - cs[..., lo]).astype(np.float32)
        else:
            # short windows: add the neighbours at distance 1..radius (a few shifted slices)
            def window(sq):
                win = sq.copy()
                for d in range(1, taps + 1):
                    win[..., d:] += sq[..., :-d]
                    win[..., :-d] += sq[..., d:]
                return win
        a32, b32, nb32 = np.float32(alpha), np.float32(bias), np.float32(-beta)

        def lrn(x, out):
            # out = x * (bias + alpha * sum(x[i-r .. i+r]^2)) ** -beta, in float32 like the reference
            if x.size == 0:
                return
            xm = np.moveaxis(x, axis, -1)
            win = window(np.square(xm))
            win *= a32
            win += b32
            np.power(win, nb32, out=win)
            win *= xm
            np.moveaxis(out, axis, -1)[...] = win
        return float_kernel(lrn, outs[0].dtype)


@register
class InstanceNormalization(Op):
    name = "INSTANCE_NORMALIZATION"
    type_levels = {F32: 3, F16: 3}

    def validate(self, sig):
        t = same_shape_signature(sig, 5, self.type_levels)
        sig.rank_between("input", 0, 4, 4)
        st = scalar_for(t)
        for k, what in ((1, "gamma"), (2, "beta"), (3, "epsilon")):
            check_scalar(sig, k, what, st, t)
        check_scalar(sig, 4, "layout", C.BOOL, t)
        return self.type_levels[t]

    def infer(self, ins):
        if len(ins[0].dims) != 4:
            raise value_error(f"{self.name}: input 0 has rank {len(ins[0].dims)}, expected 4", at_runtime=False)
        return [ins[0].dims]

    def build(self, ins, outs):
        vals = _scalar_values(self.name, ins, ((1, "gamma"), (2, "beta"), (3, "epsilon"), (4, "layout")))
        gamma, beta, eps = float(vals[0]), float(vals[1]), float(vals[2])
        axes = (2, 3) if vals[3] else (1, 2)

        def inorm(x, out):
            if x.size == 0:
                return
            x64 = x.astype(np.float64)
            x64 -= x64.mean(axis=axes, keepdims=True)
            var = np.square(x64).mean(axis=axes, keepdims=True)
            var += eps
            np.sqrt(var, out=var)
            np.divide(gamma, var, out=var)
            x64 *= var
            x64 += beta
            out[...] = x64
        return float_kernel(inorm, outs[0].dtype)
