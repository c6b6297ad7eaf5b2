"""NNAPI_PY_PROFILE=1: time per operation type, printed to stderr when the process exits.

Kernels are timed where the plan runs them (static and dynamic plans); the table shows, per
operation type, the number of kernel runs, the total and mean time and the share of all
kernel time.  NNAPI_PY_PROFILE=FILE writes the table to FILE instead.  Off (the default),
the plan runs untimed: nothing is measured and nothing is paid.
"""
import os
import sys
import threading
import time

ENABLED = bool(os.environ.get("NNAPI_PY_PROFILE"))
_lock = threading.Lock()
_totals = {}        # operation name -> [runs, seconds]
_reported = [False]


def timed(name, kern):
    """kern wrapped to add its run time to `name` (only used when ENABLED)."""
    def run(i, o):
        t0 = time.perf_counter()
        try:
            kern(i, o)
        finally:
            dt = time.perf_counter() - t0
            with _lock:
                rec = _totals.setdefault(name, [0, 0.0])
                rec[0] += 1
                rec[1] += dt
    return run


def table():
    with _lock:
        items = sorted(_totals.items(), key=lambda kv: -kv[1][1])
    total = sum(s for _, (_, s) in items) or 1e-12
    lines = [f"{'operation':<32}{'runs':>10}{'total ms':>12}{'mean us':>12}{'share':>8}"]
    for name, (n, s) in items:
        lines.append(f"{name:<32}{n:>10}{s * 1e3:>12.3f}{s / n * 1e6:>12.1f}{s / total:>8.1%}")
    lines.append(f"{'all kernels':<32}{sum(n for _, (n, _) in items):>10}{total * 1e3:>12.3f}")
    return "\n".join(lines)


def report():
    """Print (or write) the table once, at exit."""
    if not ENABLED or _reported[0] or not _totals:
        return
    _reported[0] = True
    text = "nnapi_py profile (NNAPI_PY_PROFILE):\n" + table() + "\n"
    where = os.environ.get("NNAPI_PY_PROFILE", "")
    if where not in ("1", "yes", "true", "on"):
        try:
            with open(where, "w") as f:
                f.write(text)
            return
        except OSError:
            pass
    sys.stderr.write(text)
