"""The Python API's argument checking (issue 40): shapes, dtypes and every public argument, each
refused with a TypeError / ValueError naming the argument, the value and what is accepted.  No
library call here (nnapi_py/nn.py is the public module; docs/python_api.md, "Inputs and outputs")."""
from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import constants as C

if TYPE_CHECKING:
    from .nn_model import Operand


def _scale(v: Any, what: str) -> float:
    """A quantization scale: a real number (its range -- positive, finite -- is the library's
    check, with Android's reason)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{_said(what, v)}: expected a number (a positive float)")
    return float(v)


def _zero_point(v: Any, what: str) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        if isinstance(v, (float, np.floating)) and float(v).is_integer():
            return int(v)
        raise TypeError(f"{_said(what, v)}: expected an integer")
    return int(v)


_PREFERENCES = {"low_power": C.PREFER_LOW_POWER, "fast_single_answer": C.PREFER_FAST_SINGLE_ANSWER,
                "sustained_speed": C.PREFER_SUSTAINED_SPEED}
_PRIORITIES = {"low": 90, "medium": 100, "high": 110}


# the exact ranges a Python int (integer types) or float (float types: finite values up to the
# largest, so none overflows) converts to without loss, for _as_dtype's scalar shortcut
_SCALAR_RANGES = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
                  for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64)}
_SCALAR_RANGES.update({np.dtype(t): (-float(np.finfo(t).max), float(np.finfo(t).max))
                       for t in (np.float16, np.float32, np.float64)})


def _as_dtype(value: Any, dtype: np.dtype, what: str) -> np.ndarray:
    """value as an array of dtype, refusing a conversion that changes what a value means.
    Allowed: bool -> integer -> float and a narrower float (float64 -> float32 / float16: values
    rounded to the nearest, as numpy's "same_kind" casts) when no finite value becomes inf, an
    integer -> float where every value is exact in the float type (|v| <= 2**24 for float32),
    and integer -> integer of either signedness when every value fits (a Python list of ints is
    int64, of floats float64).  Refused, a ValueError naming both dtypes (or the value): float ->
    integer or bool, a value out of range or inexact, complex, strings, objects."""
    dtype = np.dtype(dtype)
    if type(value) in (int, float):     # a Python scalar (every scalar operand): its bounds
        fast = _SCALAR_RANGES.get(dtype)  # checked directly (the general path below: ~6 us)
        if fast is not None and ((dtype.kind != "f" or -2048 <= value <= 2048) if type(value) is int
                                 else dtype.kind == "f") and \
                (fast[0] <= value <= fast[1] or value != value or (dtype.kind == "f" and math.isinf(value))):
            return np.array(value, dtype)
    a = value if isinstance(value, np.ndarray) else np.asarray(value)
    if a.dtype == dtype:
        return a
    if a.dtype.kind in "iu" and dtype.kind in "iu":
        if a.size:
            info, lo, hi = np.iinfo(dtype), a.min(), a.max()
            if lo < info.min or hi > info.max:
                bad = lo if lo < info.min else hi
                raise ValueError(f"{what}: {bad} does not fit {dtype} ({info.min}..{info.max})")
        return a.astype(dtype)
    if not np.can_cast(a.dtype, dtype, casting="same_kind"):
        how = f"np.round(x).astype(np.{dtype})" if a.dtype.kind == "f" and dtype.kind in "iub" else \
            f"x.astype(np.{dtype}) where that is meant"
        raise ValueError(f"{what}: {a.dtype} values do not convert to {dtype} without loss (converted: bool -> "
                         f"integer -> float where exact, a narrower float, integers that fit); convert them "
                         f"yourself, e.g. {how}")
    try:
        with np.errstate(over="raise", invalid="raise"):
            out = a.astype(dtype)
    except FloatingPointError:
        raise ValueError(f"{what}: a value overflows {dtype} (largest {np.finfo(dtype).max:g})") from None
    if a.dtype.kind in "iu" and dtype.kind == "f" and a.size:
        if np.isinf(out).any():
            raise ValueError(f"{what}: a value overflows {dtype} (largest {np.finfo(dtype).max:g})")
        back = out.astype(a.dtype) if np.isfinite(out).all() else None
        if back is None or not np.array_equal(back, a):
            bad = a.reshape(-1)[np.flatnonzero(back.reshape(-1) != a.reshape(-1))[0]] if back is not None else "?"
            raise ValueError(f"{what}: {a.dtype} value {bad} is not exact in {dtype} (it would become "
                             f"{dtype.type(bad) if back is not None else 'inf'}); convert it yourself if "
                             f"rounding is meant")
    return out


def _operation(operation: Union[str, int]) -> Tuple[str, int]:
    """(name, code) of an operation given by name or code; a ValueError that lists close names
    and where the full list is for an unknown one."""
    where = "nnapi_py.constants.OPERATION_NAMES or docs/operations.md lists all of them"
    if isinstance(operation, str):
        key = operation.strip().upper()
        if key == "OEM_OPERATION":
            return key, C.OEM_OPERATION
        if key in C.OPERATION_CODES:
            return key, C.OPERATION_CODES[key]
        import difflib
        close = difflib.get_close_matches(key, C.OPERATION_NAMES, n=4, cutoff=0.5)
        close += [n for n in C.OPERATION_NAMES if key and key in n and n not in close][:4 - len(close)]
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise ValueError(f"no NNAPI operation named {operation!r}: {hint}({where})")
    if isinstance(operation, (int, np.integer)) and not isinstance(operation, bool):
        code = int(operation)
        if 0 <= code < len(C.OPERATION_NAMES):
            return C.OPERATION_NAMES[code], code
        if code == C.OEM_OPERATION:
            return "OEM_OPERATION", code
        raise ValueError(f"no NNAPI operation has code {code}: codes are 0..{len(C.OPERATION_NAMES) - 1} "
                         f"(and OEM_OPERATION {C.OEM_OPERATION}); {where}")
    raise TypeError(f"an operation is a name or a code, not {type(operation).__name__}")


def _writable_target(b: Any, o: "Operand", what: str) -> np.ndarray:
    """A caller's array the library is to write an output into (or read a bound input from and
    write later values into) in place: of the operand's dtype, C-contiguous and writeable."""
    if not (isinstance(b, np.ndarray) and b.dtype == o.type.dtype and b.flags.c_contiguous and b.flags.writeable):
        got = f"{b.dtype}{list(b.shape)}" + ("" if b.flags.c_contiguous else ", not C-contiguous") + \
            ("" if b.flags.writeable else ", read-only") if isinstance(b, np.ndarray) else type(b).__name__
        raise ValueError(f"{what} {o.name!r}: needs a C-contiguous, writeable {o.type.dtype} numpy array to use in "
                         f"place (got {got})")
    return b


class UnknownNameError(KeyError, ValueError):
    """A name run() / bind() does not know (an input or output the model lacks): a KeyError
    (as a dict lookup) and a ValueError (as any other wrong argument), with a plain message."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


def _shape(shape: Any, what: str) -> Tuple[int, ...]:
    """A shape as a tuple of ints 0..2**32-1 (0: given at execution); an int n is (n,)."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        shape = (shape,)
    if isinstance(shape, (str, bytes)) or not isinstance(shape, (Sequence, np.ndarray)):
        raise TypeError(f"{_said(what, shape)}: expected a sequence of dimensions, e.g. (1, 224, 224, 3) (0: a "
                        f"dimension given at execution)")
    out = []
    for d in shape:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{_said(what, tuple(shape))}: dimension {d!r} is not an integer")
        if not 0 <= d <= 0xFFFFFFFF:
            raise ValueError(f"{_said(what, tuple(shape))}: dimension {int(d)} is out of range (0..4294967295; 0, not "
                             f"-1, marks a dimension given at execution)")
        out.append(int(d))
    return tuple(out)


def _said(what: str, v: Any) -> str:
    """How a message names an argument: "timeout_ns=-1", "Memory(size=0)"."""
    return f"{what}={v!r}" + ")" * (what.count("(") - what.count(")"))


def _as_int(v: Any, what: str, lo: int, hi: int, accepted: str = "") -> int:
    """An integer argument in lo..hi (a bool or a float is refused: a TypeError naming it);
    `accepted` says what is (default "an integer in lo..hi")."""
    accepted = accepted or f"an integer in {lo}..{hi}"
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{_said(what, v)}: expected {accepted}")
    if not lo <= v <= hi:
        raise ValueError(f"{_said(what, int(v))}: out of range; expected {accepted}")
    return int(v)


def _as_bool(v: Any, what: str) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{_said(what, v)}: expected True or False")
    return bool(v)


def _as_name(v: Any, what: str) -> str:
    if not isinstance(v, str) or not v:
        raise TypeError(f"{_said(what, v)}: expected a non-empty str")
    return v


def _shape_text(dims: Sequence[int]) -> str:
    """(2, 3) or, with dimensions given at execution, (?, 3)."""
    inner = ", ".join("?" if d == 0 else str(d) for d in dims)
    return f"({inner},)" if len(dims) == 1 else f"({inner})"


_KNOWN_DIMS: Dict[tuple, tuple] = {}     # declared dims with 0s -> ((position, size) of each known one)


def _fits(dims: Tuple[int, ...], shape: Tuple[int, ...]) -> bool:
    """An array of `shape` fits a tensor declared `dims` with 0s (any size there): the run()
    path for dynamic inputs, a few tenths of a microsecond."""
    if len(shape) != len(dims):
        return False
    known = _KNOWN_DIMS.get(dims)
    if known is None:
        known = tuple((k, d) for k, d in enumerate(dims) if d)
        if len(_KNOWN_DIMS) < 4096:
            _KNOWN_DIMS[dims] = known
    for k, d in known:
        if shape[k] != d:
            return False
    return True


def _shape_error(o: "Operand", shape: Tuple[int, ...], what: str) -> Optional[str]:
    """None if an array of `shape` fits operand o (its declared dimensions; 0 = any size, no
    dimensions on a tensor = any rank), else the one-line message: the input, both shapes and
    the fix.  Called only when shape != o.dims (the common case costs a tuple comparison)."""
    dims = o.dims
    if o.type.is_scalar:
        return None if shape == () else (f"{what} {o.name!r}: an array of shape {shape} was given for a scalar "
                                         f"({o.type.name}); pass a number or a 0-d array")
    if not dims or _fits(dims, shape):
        return None
    want = _shape_text(dims)
    n, m = math.prod(shape), math.prod(dims)
    if all(dims) and n == m:
        perm = None
        if len(shape) == len(dims) and sorted(shape) == sorted(dims):
            free = list(range(len(shape)))
            perm = []
            for d in dims:
                k = next(k for k in free if shape[k] == d)
                free.remove(k)
                perm.append(k)
        if perm:
            fix = ("a.T" if perm == [1, 0] else f"a.transpose{tuple(perm)}")
            fix = f"transpose or reshape it yourself ({fix} / a.reshape{tuple(dims)})"
        else:
            fix = f"reshape it yourself (a.reshape{tuple(dims)})"
    elif all(dims):
        fix = f"it holds {n} value{'s' if n != 1 else ''} where the model's {what} holds {m}: pass an array of shape {tuple(dims)}"
    else:
        known = [f"dimension {k} = {d}" for k, d in enumerate(dims) if d]
        fix = f"pass an array of rank {len(dims)}{' with ' + ', '.join(known) if known else ''} ('?': any size)"
    return f"{what} {o.name!r}: array shape {shape} does not match the model's {want}; {fix}"


_UINT64_MAX = (1 << 64) - 1


def _timeout(v: Any, what: str) -> Optional[int]:
    if v is None:
        return None
    return _as_int(v, what, 0, _UINT64_MAX, "an integer number of nanoseconds, 0..2**64-1 (None: no timeout)")


def _setting(v: Any, what: str, table: Mapping[str, int], hi: int) -> int:
    """A setting given by name (a key of table) or by its code (one of table's values; a number
    past 0..hi is out of range)."""
    names, codes = ", ".join(map(repr, table)), ", ".join(map(str, table.values()))
    if isinstance(v, str):
        if v not in table:
            raise ValueError(f"{what}={v!r}: one of {names} (or their codes {codes})")
        return table[v]
    v = _as_int(v, what, 0, hi, f"one of {names} or their codes {codes}")
    if v not in table.values():
        raise ValueError(f"{what}={v}: one of {names} or their codes {codes}")
    return v


def _compile_args(preference, devices, priority, timeout_ns, cache_dir, token):
    """Model.compile's arguments checked and normalised before anything is made: a TypeError or
    ValueError naming the argument, the value and what is accepted."""
    preference = _setting(preference, "preference", _PREFERENCES, 2)
    if devices is not None:
        if isinstance(devices, str):
            devices = [devices]             # one device by name
        elif not isinstance(devices, Iterable) or isinstance(devices, (bytes, Mapping)):
            raise TypeError(f"devices={devices!r}: expected a device name or a list of them "
                            f"(nn.device_names() lists them)")
        devices = list(devices)
        for d in devices:
            if not isinstance(d, str):
                raise TypeError(f"devices={devices!r}: {d!r} is not a device name (a str)")
        if not devices:
            raise ValueError("devices=[]: name at least one device (or leave devices out: every device)")
        if len(set(devices)) != len(devices):
            raise ValueError(f"devices={devices!r}: a device is named twice")
    if priority is not None:
        priority = _setting(priority, "priority", _PRIORITIES, 1 << 31)
    timeout_ns = _timeout(timeout_ns, "timeout_ns")
    if cache_dir is not None:
        if not isinstance(cache_dir, (str, os.PathLike)):
            raise TypeError(f"cache_dir={cache_dir!r}: expected a directory path (str or os.PathLike)")
        cache_dir = os.fspath(cache_dir)
        if isinstance(cache_dir, bytes):
            cache_dir = os.fsdecode(cache_dir)
        if not cache_dir:
            raise ValueError("cache_dir='': name a directory (a missing or unwritable one compiles without "
                             "caching, as on Android; the compilation's status says so)")
    if token is not None:
        if cache_dir is None:
            raise ValueError("token= is the caching token: it goes with cache_dir=")
        if not isinstance(token, (bytes, bytearray, memoryview)):
            raise TypeError(f"token={token!r}: expected 32 bytes (default: Model.cache_token())")
        token = bytes(token)
        if len(token) != 32:
            raise ValueError(f"token: {len(token)} bytes given, a caching token has 32 (ANEURALNETWORKS_BYTE_SIZE_"
                             f"OF_CACHE_TOKEN)")
    return preference, devices, priority, timeout_ns, cache_dir, token



def _named(cache: Dict[str, frozenset], values, operands, kind: str) -> Dict[str, Any]:
    """{name: value} from a dict or a list in model order; an unknown name is an
    UnknownNameError (a KeyError and a ValueError) listing the model's names.  cache: the
    execution's {kind: the model's names}, filled on first use."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        if not isinstance(values, (list, tuple)):
            raise TypeError(f"{kind}s: a {'numpy array' if isinstance(values, np.ndarray) else type(values).__name__} "
                            f"was given; expected a dict {{name: array}} or a list of arrays in the model's {kind} "
                            f"order {[o.name for o in operands]}")
        if len(values) > len(operands):
            raise ValueError(f"{len(values)} {kind}s given, the model has {len(operands)}: "
                             f"{[o.name for o in operands]}")
        return {o.name: v for o, v in zip(operands, values)}
    names = cache.get(kind)
    if names is None:
        names = cache[kind] = frozenset(o.name for o in operands)
    if not values.keys() <= names:
        unknown = sorted(map(str, set(values) - names))
        raise UnknownNameError(f"no model {kind} named {', '.join(map(repr, unknown))} (the model's {kind}s: "
                               f"{[o.name for o in operands]})")
    return values


def _check_output_arrays(outputs: Mapping[str, Any], by_name: Mapping[str, Any]) -> None:
    """The caller's output arrays before anything runs (by_name: the model's output operands by
    name): the operand's dtype, C-contiguous and writeable, and the operand's shape where it is
    known (0s: any size there)."""
    for name, b in outputs.items():
        o = by_name[name]
        _writable_target(b, o, "output")
        if b.shape != o.dims:
            problem = _shape_error(o, b.shape, "output")
            if problem:
                raise ValueError(problem.split("; ")[0] + f"; pass an array of shape {_shape_text(o.dims)} "
                                 f"(or none: run() returns the result)")
