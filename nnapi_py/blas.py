"""The BLAS threads numpy's products use: read them, and pin them for a benchmark.

A benchmark that times us beside LiteRT with one thread must run our numpy kernels with one
BLAS thread too.  Before numpy loads, the environment decides (``pin_environment``); once it
has loaded, threadpoolctl (when installed) or OpenBLAS's own ``set_num_threads`` does
(``limit``).  ``threads()`` reports what is in force: (library, threads), found by threadpoolctl
or by asking the OpenBLAS library loaded in this process.  Nothing here imports numpy.
"""
import ctypes
import os
import sys

ENV_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
_PREFIXES = ("", "scipy_")          # OpenBLAS as numpy's wheels build it: scipy_openblas*64_
_SUFFIXES = ("", "64_")


def pin_environment(n: int = 1) -> bool:
    """Set the BLAS thread variables not already set to n, for a numpy not loaded yet; returns
    False when numpy is already loaded (then use limit())."""
    if "numpy" in sys.modules:
        return False
    for var in ENV_VARS:
        os.environ.setdefault(var, str(n))
    return True


def _openblas():
    """(path, get, set) of the OpenBLAS loaded in this process, or None."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for pre in _PREFIXES:
            for suf in _SUFFIXES:
                get = getattr(lib, f"{pre}openblas_get_num_threads{suf}", None)
                put = getattr(lib, f"{pre}openblas_set_num_threads{suf}", None)
                if get is not None and put is not None:
                    get.restype, put.argtypes = ctypes.c_int, [ctypes.c_int]
                    return path, get, put
    return None


def threads():
    """[(library, threads)] of the BLAS libraries numpy loaded ([] when none is found)."""
    try:
        import threadpoolctl
    except ImportError:
        threadpoolctl = None
    if threadpoolctl is not None:
        return [(i.get("internal_api", "blas"), int(i["num_threads"]))
                for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"]
    found = _openblas()
    return [("openblas", int(found[1]()))] if found else []


def limit(n: int = 1) -> bool:
    """Pin the loaded BLAS to n threads now; False when no known BLAS could be pinned."""
    try:
        import threadpoolctl
    except ImportError:
        threadpoolctl = None
    if threadpoolctl is not None:
        threadpoolctl.threadpool_limits(n, user_api="blas")
        return True
    found = _openblas()
    if found is None:
        return False
    found[2](int(n))
    return True


def describe() -> str:
    """'openblas 1 thread' (or '… unknown' when no BLAS was found)."""
    t = threads()
    if not t:
        return "BLAS threads unknown (no OpenBLAS found; install threadpoolctl to see others)"
    return ", ".join(f"{lib} {n} thread{'s' if n != 1 else ''}" for lib, n in t)
