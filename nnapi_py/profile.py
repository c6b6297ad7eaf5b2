"""NNAPI_PY_PROFILE=1: time per operation type, printed to stderr when the process exits.

Kernels are timed where the plan runs them (static and dynamic plans); the table shows, per
operation type, the number of kernel runs, the total and mean time and the share of all
kernel time; a second table shows the kernels that took the most time, each named by its
operation and its first input's and output's shapes (one line per distinct kernel shape).
NNAPI_PY_PROFILE=FILE writes the tables to FILE instead.  Off (the default),
the plan runs untimed: nothing is measured and nothing is paid.
"""
import os
import sys
import threading
import time

ENABLED = bool(os.environ.get("NNAPI_PY_PROFILE"))
_lock = threading.Lock()
_totals = {}        # operation name -> [runs, seconds]
_kernels = {}       # "NAME [in dims] -> [out dims]" -> [runs, seconds]
TOP_KERNELS = 25
_reported = [False]
_notes = []         # compilation cache events (hit / miss / stale / corrupt, with the reason)
MAX_NOTES = 50


def note(text):
    """An event the report lists (the compilation cache's); also said at once under NNAPI_PY_TRACE."""
    from .errors import TRACE_VALUES
    trace = os.environ.get("NNAPI_PY_TRACE", "").strip().lower()
    if trace and trace != "0" and trace in TRACE_VALUES:
        sys.stderr.write(f"nnapi_py: {text}\n")
        sys.stderr.flush()
    if ENABLED:
        with _lock:
            _notes.append(text)
            del _notes[:-MAX_NOTES]


def kernel_label(name, ins, outs):
    """How a kernel is named in the per-kernel table: operation, first input and output shapes."""
    def dims(infos):
        for inf in infos:
            if inf is not None and getattr(inf, "dims", None) is not None and len(inf.dims):
                return "x".join(str(int(d)) for d in inf.dims)
        return "scalar"
    return f"{name} {dims(ins)} -> {dims(outs)}"


def timed(name, kern, label=None):
    """kern wrapped to add its run time to `name` and to its kernel `label` (only used when
    ENABLED)."""
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
                if label is not None:
                    rec = _kernels.setdefault(label, [0, 0.0])
                    rec[0] += 1
                    rec[1] += dt
    return run


def table():
    with _lock:
        items = sorted(_totals.items(), key=lambda kv: -kv[1][1])
        kitems = sorted(_kernels.items(), key=lambda kv: -kv[1][1])
    total = sum(s for _, (_, s) in items) or 1e-12
    lines = [f"{'operation':<32}{'runs':>10}{'total ms':>12}{'mean us':>12}{'share':>8}"]
    for name, (n, s) in items:
        lines.append(f"{name:<32}{n:>10}{s * 1e3:>12.3f}{s / n * 1e6:>12.1f}{s / total:>8.1%}")
    lines.append(f"{'all kernels':<32}{sum(n for _, (n, _) in items):>10}{total * 1e3:>12.3f}")
    if kitems:
        w = max(32, min(64, max(len(k) for k, _ in kitems[:TOP_KERNELS]) + 2))
        lines.append("")
        lines.append(f"{'kernel (top ' + str(min(TOP_KERNELS, len(kitems))) + ' by time)':<{w}}"
                     f"{'runs':>10}{'total ms':>12}{'mean us':>12}{'share':>8}")
        for name, (n, s) in kitems[:TOP_KERNELS]:
            lines.append(f"{name:<{w}}{n:>10}{s * 1e3:>12.3f}{s / n * 1e6:>12.1f}{s / total:>8.1%}")
    return "\n".join(lines)


def report():
    """Print (or write) the table once, at exit."""
    if not ENABLED or _reported[0] or not (_totals or _notes):
        return
    _reported[0] = True
    text = "nnapi_py profile (NNAPI_PY_PROFILE):\n" + table() + "\n"
    if _notes:
        text += "".join(f"{n}\n" for n in _notes)
    where = os.environ.get("NNAPI_PY_PROFILE", "")
    if where not in ("1", "yes", "true", "on"):
        try:
            with open(where, "w") as f:
                f.write(text)
            return
        except OSError:
            pass
    sys.stderr.write(text)
