"""Exact integer products through float BLAS (the convolutions through convquant.py, dense.py): sums of integers are exact
in float32 below 2**24 and in float64 below 2**53.  exact_dtype picks the BLAS dtype from a
bound of the partial sums (centered_max: the largest centred input), exact_splits splits a
product along K so that each part's float32 sums stay exact; scale_product is the reference's
float32 input_scale * filter_scale."""
import numpy as np

from .clamp import qrange


_EXACT_F32 = float(1 << 24)      # integers below this are exact float32 sums


def scale_product(a, b):
    """input_scale * filter_scale as the reference computes it (float32 product)."""
    return float(np.float32(a) * np.float32(b))


def centered_max(type_code, zp):
    """Largest |x - zp| over the integer range of a quant8 type."""
    lo, hi = qrange(type_code)
    return max(hi - zp, zp - lo)


def exact_dtype(bound):
    """BLAS dtype whose sums of integer products are exact when every partial sum is bounded
    by `bound`: float32 below 2**24, else float64 (exact below 2**53, far beyond any quant8
    layer: 255 * 255 * K < 2**53 for K < 10**11)."""
    return np.float32 if bound < _EXACT_F32 else np.float64


def exact_splits(abs_w, cmax, most=8):
    """Chunks [(k0, k1), ...] of the K rows of abs_w ([K, N], |centred weights|) such that
    cmax * max_n sum_{k0 <= k < k1} abs_w[k, n] < 2**24 for each: every partial sum of a chunk's
    float32 product is then an exact integer (the K-split of a product whose whole bound is
    2**24 or more).  Greedy from the first row; None when one row alone is too large or more
    than `most` chunks would be needed."""
    k = abs_w.shape[0]
    cs = np.cumsum(np.vstack([np.zeros((1, abs_w.shape[1])), abs_w]), axis=0)      # [K + 1, N]
    limit = _EXACT_F32 / max(cmax, 1)
    out, k0 = [], 0
    while k0 < k:
        reach = (cs[k0 + 1:] - cs[k0]).max(axis=1)           # non-decreasing in the chunk's end
        k1 = k0 + int(np.searchsorted(reach, limit, side="left"))    # rows with reach < limit
        if k1 == k0 or len(out) == most:
            return None
        out.append((k0, k1))
        k0 = k1
    return out
