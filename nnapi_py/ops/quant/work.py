"""Work arrays of each thread, reused from call to call by the shared layer's kernels
(OutputStage's float32 form, PairAffine): their contents live only within one call."""
import math
import threading

import numpy as np


_WORK = threading.local()


def _work(key, shape):
    """A work array of this thread's, reused from call to call (by any kernel: its contents
    live only within one call)."""
    d = getattr(_WORK, "d", None)
    if d is None:
        d = _WORK.d = {}
    n = math.prod(shape)
    a = d.get(key)
    if a is None or a.size < n:
        a = d[key] = np.empty(n, key[1])
    return a[:n].reshape(shape)


CACHE_LINE = 64


def aligned_empty(shape, dtype):
    """An uninitialised array whose data starts on a 64-byte boundary (a cache line).  OpenBLAS's
    gemv on the small constant matrices of the one-row products runs at about half the speed
    when the matrix starts at numpy's usual 16-byte boundary (x [201] . W [201, 64] float64:
    2.4 us aligned against 5-6.5 us)."""
    dt = np.dtype(dtype)
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    nbytes = math.prod(shape) * dt.itemsize
    buf = np.empty(nbytes + CACHE_LINE, np.uint8)
    off = -buf.ctypes.data % CACHE_LINE
    return buf[off:off + nbytes].view(dt).reshape(shape)


def aligned(a, dtype=None):
    """A C-contiguous copy of a (in dtype, default a's) starting on a cache line (aligned_empty)."""
    a = np.asarray(a)
    out = aligned_empty(a.shape, a.dtype if dtype is None else dtype)
    out[...] = a
    return out
