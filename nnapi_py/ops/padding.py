"""Shared by the convolution, pooling and resize families: implicit padding and layouts."""
import numpy as np

from .. import constants as C


def implicit_padding(scheme, in_size, stride, filter_size, dilation=1):
    """PaddingCode SAME/VALID -> (pad_before, pad_after) along one spatial axis (NNAPI rule)."""
    if scheme == C.PADDING_SAME:
        out = (in_size + stride - 1) // stride
        eff = (filter_size - 1) * dilation + 1
        needed = (out - 1) * stride + eff
        total = max(0, needed - in_size)
        return total // 2, (total + 1) // 2
    return 0, 0


def out_size(in_size, filter_size, stride, pad_before, pad_after, dilation=1):
    """Output extent of a strided window along one axis with explicit padding."""
    eff = (filter_size - 1) * dilation + 1
    return (in_size - eff + pad_before + pad_after + stride) // stride


def to_nhwc(a, nchw):
    """A view of a 4-D NCHW array as NHWC (no copy) when nchw is true."""
    return a.transpose(0, 2, 3, 1) if nchw else a


def nhwc_dims(dims, nchw):
    """(N, H, W, C) from declared dims in either layout."""
    if nchw:
        n, c, h, w = dims
        return n, h, w, c
    return tuple(dims)


def layout_dims(n, h, w, c, nchw):
    return (n, c, h, w) if nchw else (n, h, w, c)


def strided_view(a, shape, strides):
    """Read-only view of a with this shape and these byte strides from its start (no copy).
    Over a C-contiguous array's buffer np.ndarray makes it in about 0.7 us; as_strided (used
    for other arrays) goes through __array_interface__ and takes about 3 us, which small
    layers pay every run."""
    if a.flags.c_contiguous:
        v = np.ndarray(shape, a.dtype, buffer=a, strides=strides)
        v.flags.writeable = False
        return v
    return np.lib.stride_tricks.as_strided(a, shape, strides, writeable=False)


def window_view(x, kh, kw, sh, sw, dh=1, dw=1, oh=None, ow=None):
    """Strided view [N, OH, OW, KH, KW, C] of a padded NHWC array (no copy); oh/ow: at most
    that many output rows/columns."""
    n, h, w, c = x.shape
    fh = (h - (kh - 1) * dh - 1) // sh + 1
    fw = (w - (kw - 1) * dw - 1) // sw + 1
    fh = max(fh if oh is None else min(fh, oh), 0)
    fw = max(fw if ow is None else min(fw, ow), 0)
    s = x.strides
    return strided_view(x, (n, fh, fw, kh, kw, c),
                        (s[0], s[1] * sh, s[2] * sw, s[1] * dh, s[2] * dw, s[3]))
