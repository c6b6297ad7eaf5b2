"""Clamps of the kernels, float and quantized: the clip ufunc called directly (clip_inplace,
relu_into, negpart_into, clamp_into), the fused RELU / RELU1 / RELU6 in float
(float_activation, apply_float_activation) and in a quantized output's integer domain
(activation_range), the integer range of a quantized type (qrange, qrange_of_dtype) and the
clamped store of an accumulator (store).

Tuning constants (_FMAX_UPTO, _FMAX_FMIN_UPTO) are read here at call time: a test that
changes them patches this module, not the package."""
import math

import numpy as np

from ... import constants as C


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


def qrange_of_dtype(dt):
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


def store(out, acc, lo, hi):
    """Clamp an integer accumulator to [lo, hi] and write it into out."""
    clip_inplace(acc, lo, hi)
    out[...] = acc
