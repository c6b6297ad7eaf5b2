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
