"""NNAPI_PY_PROFILE=1: time per operation type, printed to stderr when the process exits.

Kernels are timed where the plan runs them (static and dynamic plans); the table shows, per
operation type, the number of kernel runs, the total and mean time and the share of all
kernel time; a second table shows the kernels that took the most time, each named by its
operation and its first input's and output's shapes (one line per distinct kernel shape).
NNAPI_PY_PROFILE=FILE writes the tables to FILE instead (a path with a '/' or another
name than the on/off words; its directory must exist: otherwise the report goes to stderr, said
once at start-up).  Off (the default, also 0/false/no/off), the plan runs untimed: nothing is
measured and nothing is paid.
"""
import os
import sys
import threading
import time

from .errors import FLAG_OFF, FLAG_ON, bad_setting


def _setting():
    """(enabled, file or None) from NNAPI_PY_PROFILE; a file whose directory is missing or not
    writable is said once and the report goes to stderr."""
    raw = os.environ.get("NNAPI_PY_PROFILE", "")
    v = raw.strip()
    if v.lower() in FLAG_OFF:
        return False, None
    if v.lower() in FLAG_ON:
        return True, None
    where = os.path.dirname(os.path.abspath(v))
    problem = None
    if os.path.isdir(v):
        problem = "it is a directory"
    elif not os.path.isdir(where):
        problem = f"no directory {where}"
    elif not os.access(where, os.W_OK) or (os.path.exists(v) and not os.access(v, os.W_OK)):
        problem = "not writable"
    if problem:
        bad_setting("NNAPI_PY_PROFILE", raw, f"1 (the report on stderr) or a file to write it to ({problem})",
                    "the report goes to stderr")
        return True, None
    return True, v


ENABLED, FILE = _setting()
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
    if FILE:
        try:
            with open(FILE, "w") as f:
                f.write(text)
            return
        except OSError as e:
            text = f"nnapi_py: NNAPI_PY_PROFILE={FILE!r}: cannot write the report ({e.strerror}): here it is\n" + text
    sys.stderr.write(text)
