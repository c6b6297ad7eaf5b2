"""Result codes as exceptions, and the per-thread "last error" every entry point records.

Every failure inside the runtime raises NNError(code, reason); the C ABI layer turns it
into the return code and stores the one-line reason for the calling thread, where
``nnapi_py_last_error()`` (C) or ``nnapi_py.last_error()`` (Python) can read it.
NNAPI_PY_TRACE=errors prints every non-zero result to stderr; NNAPI_PY_TRACE=calls
prints every call as well.
"""
import os
import re
import sys
import threading

from . import constants as C


class NNError(Exception):
    def __init__(self, code, reason):
        super().__init__(reason)
        self.code = code
        self.reason = reason


def bad_data(reason):
    return NNError(C.BAD_DATA, reason)


def bad_state(reason):
    return NNError(C.BAD_STATE, reason)


def null(reason):
    return NNError(C.UNEXPECTED_NULL, reason)


def op_failed(reason):
    return NNError(C.OP_FAILED, reason)


# ---- settings (NNAPI_PY_* environment variables) ---------------------------------------------------
# A malformed value is said once per process on stderr, naming the variable, the value and the
# accepted form, and the documented fallback applies (docs: README "Settings").
_said = set()


def say_once(line):
    """Write `line` (no newline) on stderr once per process, prefixed "nnapi_py: "."""
    if line in _said:
        return
    _said.add(line)
    sys.stderr.write(f"nnapi_py: {line}\n")
    sys.stderr.flush()


def bad_setting(var, value, expected, fallback=""):
    """A malformed NNAPI_PY_* value: "nnapi_py: ignoring VAR='value': expected FORM[; FALLBACK]"."""
    say_once(f"ignoring {var}={value!r}: expected {expected}" + (f"; {fallback}" if fallback else ""))


FLAG_ON = ("1", "true", "yes", "on")
FLAG_OFF = ("", "0", "false", "no", "off")
FLAG_FORM = "1 or 0 (also true/false, yes/no, on/off)"


def flag(var, value=None):
    """An on/off setting: 1/true/yes/on, or 0/false/no/off/empty (any case); another value is
    said once and the setting stays off (its default)."""
    raw = os.environ.get(var, "") if value is None else value
    v = raw.strip().lower()
    if v in FLAG_ON:
        return True
    if v not in FLAG_OFF:
        bad_setting(var, raw, FLAG_FORM, "it stays off")
    return False


# NNAPI_PY_STRICT=1: every case where we follow Android's runtime because it is more lenient
# than the NDK text (docs/decisions.md, "Leniencies") becomes the error the NDK text asks for.
# (read when such a case happens, so a Python host can also switch it on later)
_strict_seen = ["", False]          # (the value last read, its meaning)


def strict():
    raw = os.environ.get("NNAPI_PY_STRICT", "")
    seen = _strict_seen
    if raw != seen[0]:
        seen[:] = [raw, flag("NNAPI_PY_STRICT", raw)]
    return seen[1]


def lenient(rule, reason):
    """A call the NDK text forbids but Android 14's runtime accepts (and real clients rely on).
    Accepted, unless NNAPI_PY_STRICT=1; `rule` names the leniency as docs/decisions.md lists it."""
    if strict():
        raise bad_data(f"{reason} [NNAPI_PY_STRICT=1: {rule}]")
    if TRACE_ERRORS:
        sys.stderr.write(f"nnapi_py: accepted as Android does ({rule}): {reason}\n")
        sys.stderr.flush()


_trace = os.environ.get("NNAPI_PY_TRACE", "").strip().lower()
TRACE_ERRORS = _trace in ("1", "errors", "error", "calls", "all")
TRACE_CALLS = _trace in ("calls", "all")
# every value some part of nnapi_py reads (devices.py: devices, calls, all); another is said once
TRACE_VALUES = ("", "0", "1", "errors", "error", "calls", "devices", "all")
if _trace not in TRACE_VALUES:
    bad_setting("NNAPI_PY_TRACE", os.environ["NNAPI_PY_TRACE"], "errors (or 1), calls, devices or all")

strict()        # a malformed NNAPI_PY_STRICT is said at start-up (it is read again where it matters)

# last error per OS thread (threading.get_ident is stable for a C thread across calls)
_last = {}
_get_ident = threading.get_ident


_INNER = re.compile(r"ANeuralNetworks\w+: ")


def set_last(func, code, reason):
    """Record a failed call's code and reason for this thread; the reason names the function
    (prefixed here, the one place every reason passes, unless it already starts with it).  A
    reason passed on from an inner step recorded under another function (the computation of a
    burstCompute or of an Event_wait) names only the function the client called."""
    if not reason.startswith(func):
        m = _INNER.match(reason)
        if m:
            reason = reason[m.end():]
        _last[_get_ident()] = (code, f"{func}: {reason}")
    else:
        _last[_get_ident()] = (code, reason)
    if TRACE_ERRORS:
        sys.stderr.write(f"nnapi_py: {func} -> {C.RESULT_NAMES.get(code, code)}: {reason}\n")
        sys.stderr.flush()


def clear_last():
    _last.pop(_get_ident(), None)


def last_error():
    """(code, reason) of the calling thread's most recent failed call, or (0, '')."""
    return _last.get(_get_ident(), (0, ""))
