"""The Pythonic API: build, compile and run NNAPI models from numpy.

Every call goes through the exported ``ANeuralNetworks*`` functions of the same C library a C
client links (``from nnapi_py import ffi, lib``); this module only keeps Python-side
bookkeeping (operand types, names, the graph for inspection).

    import numpy as np, nnapi_py as nn
    m = nn.Model()
    x = m.input("x", nn.float32, (1, 4))
    w = m.constant(np.array([[10, 20, 30, 40]], np.float32))
    y = m.op("ADD", x, w, 0)
    m.output(y, "y")
    c = m.compile(preference="fast_single_answer")
    out = c.run({"x": np.arange(4, dtype=np.float32).reshape(1, 4)})     # {"y": array}
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import constants as C
from . import describe as _describe

__all__ = ["NNAPIError", "OperandType", "Model", "Operand", "Compilation", "Execution", "Burst", "Memory",
           "float32", "float16", "int32", "uint32", "bool8", "quant8_asymm", "quant8_asymm_signed",
           "quant8_symm", "quant16_symm", "quant16_asymm", "quant8_symm_per_channel", "device_names",
           "feature_level"]


_PENDING_FREES: List[Tuple[str, Any]] = []


def _release(fn: str, handle) -> None:
    """Called from __del__: queue the handle's *_free call.  A finalizer may run inside a
    library call (the runtime shares this interpreter and the garbage collector runs anywhere),
    where calling back into the library would re-enter it; queued frees run at the next API call."""
    if handle is not None:
        _PENDING_FREES.append((fn, handle))


_LIB: list = []


def _api():
    if not _LIB:
        from . import ffi, lib
        _LIB[:] = [ffi, lib]
    ffi, lib = _LIB
    while _PENDING_FREES:
        fn, h = _PENDING_FREES.pop()
        getattr(lib, fn)(h)
    return ffi, lib


# ---- errors ---------------------------------------------------------------------------------------
class NNAPIError(Exception):
    """A call of the library returned a non-zero result code.

    ``code`` (int), ``code_name`` (e.g. "BAD_DATA"), ``reason`` (the library's one-line reason),
    ``call`` (the ANeuralNetworks* function)."""

    def __init__(self, code: int, reason: str, call: str = ""):
        self.code = code
        self.code_name = C.RESULT_NAMES.get(code, str(code))
        self.reason = reason
        self.call = call
        said = reason.split(": ", 1)[1] if call and reason.startswith(call.split("(")[0] + ": ") else reason
        super().__init__(f"{call}: {self.code_name}: {said}" if call else f"{self.code_name}: {reason}")


def _check(rc: int, call: str) -> None:
    if rc != 0:
        ffi, lib = _api()
        raise NNAPIError(rc, ffi.string(lib.nnapi_py_last_error()).decode(errors="replace"), call)


# ---- operand types ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class OperandType:
    """An NNAPI operand type: code, and quantization (scale, zero point, per-channel scales)."""
    code: int
    scale: float = 0.0
    zero_point: int = 0
    channel_scales: Optional[Tuple[float, ...]] = None
    channel_dim: int = 0

    @property
    def name(self) -> str:
        return C.TYPE_NAMES.get(self.code, str(self.code))

    @property
    def dtype(self) -> np.dtype:
        return C.DTYPES[self.code]

    @property
    def is_scalar(self) -> bool:
        return self.code in C.SCALAR_TYPES

    def __repr__(self):
        q = f", scale={self.scale:g}, zero_point={self.zero_point}" if self.scale or self.zero_point else ""
        return f"nn.{self.name.lower()}{q}"


float32 = OperandType(C.TENSOR_FLOAT32)
float16 = OperandType(C.TENSOR_FLOAT16)
int32 = OperandType(C.TENSOR_INT32)
bool8 = OperandType(C.TENSOR_BOOL8)
uint32 = OperandType(C.UINT32)
scalar_float32, scalar_float16 = OperandType(C.FLOAT32), OperandType(C.FLOAT16)
scalar_int32, scalar_bool = OperandType(C.INT32), OperandType(C.BOOL)


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


def quant8_asymm(scale: float, zero_point: int) -> OperandType:
    return OperandType(C.TENSOR_QUANT8_ASYMM, _scale(scale, "quant8_asymm(scale"),
                       _zero_point(zero_point, "quant8_asymm(zero_point"))


def quant8_asymm_signed(scale: float, zero_point: int) -> OperandType:
    return OperandType(C.TENSOR_QUANT8_ASYMM_SIGNED, _scale(scale, "quant8_asymm_signed(scale"),
                       _zero_point(zero_point, "quant8_asymm_signed(zero_point"))


def quant8_symm(scale: float) -> OperandType:
    return OperandType(C.TENSOR_QUANT8_SYMM, _scale(scale, "quant8_symm(scale"), 0)


def quant16_symm(scale: float) -> OperandType:
    return OperandType(C.TENSOR_QUANT16_SYMM, _scale(scale, "quant16_symm(scale"), 0)


def quant16_asymm(scale: float, zero_point: int) -> OperandType:
    return OperandType(C.TENSOR_QUANT16_ASYMM, _scale(scale, "quant16_asymm(scale"),
                       _zero_point(zero_point, "quant16_asymm(zero_point"))


def quant8_symm_per_channel(scales: Sequence[float], channel_dim: int = 0) -> OperandType:
    if isinstance(scales, (str, bytes)) or not isinstance(scales, (Sequence, np.ndarray)):
        raise TypeError(f"quant8_symm_per_channel(scales={scales!r}): expected a sequence of numbers, one per channel")
    return OperandType(C.TENSOR_QUANT8_SYMM_PER_CHANNEL, 0.0, 0,
                       tuple(_scale(s, "quant8_symm_per_channel(scales[...]") for s in scales),
                       _as_int(channel_dim, "quant8_symm_per_channel(channel_dim", 0, 0xFFFFFFFF))


_DTYPE_TYPES = {np.dtype(np.float32): float32, np.dtype(np.float16): float16, np.dtype(np.int32): int32,
                np.dtype(np.bool_): bool8}
_PREFERENCES = {"low_power": C.PREFER_LOW_POWER, "fast_single_answer": C.PREFER_FAST_SINGLE_ANSWER,
                "sustained_speed": C.PREFER_SUSTAINED_SPEED}
_PRIORITIES = {"low": 90, "medium": 100, "high": 110}
_MODES = ("sync", "async", "burst")
_DURATIONS = {"on_hardware": 0, "in_driver": 1, "fenced_on_hardware": 2, "fenced_in_driver": 3}

# output types that differ from "the type and quantization of the first tensor input"
_BOOL_OUT = {"EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL", "LOGICAL_AND",
             "LOGICAL_OR", "LOGICAL_NOT", "REDUCE_ALL", "REDUCE_ANY"}
_INT_OUT = {"ARGMAX", "ARGMIN"}


# the exact ranges a Python int (integer types) or float (float types: finite values up to the
# largest, so none overflows) converts to without loss, for _as_dtype's scalar shortcut
_SCALAR_RANGES = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
                  for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64)}
_SCALAR_RANGES.update({np.dtype(t): (-float(np.finfo(t).max), float(np.finfo(t).max))
                       for t in (np.float16, np.float32, np.float64)})


# Model._add: the ANeuralNetworksOperandType (and its dimensions) of each (code, dims, scale,
# zero point) met, made once: the library reads it during the call only
_OPERAND_TYPES: Dict[tuple, tuple] = {}


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


_TYPE_WORDS = {"float32": float32, "float16": float16, "int32": int32, "bool": bool8, "bool8": bool8}
_TYPE_FORMS = ("an nn type (nn.float32, nn.float16, nn.int32, nn.bool8, nn.quant8_asymm(scale, zero_point), ...), "
               "or one of the names 'float32', 'float16', 'int32', 'bool' or the numpy dtypes of those")


def _operand_type(t: Any, what: str) -> OperandType:
    """An OperandType from what a user may write: an OperandType, or a dtype name / numpy dtype
    where it names one tensor type (float32, float16, int32, bool); a TypeError naming the
    accepted forms otherwise (uint8 / int8 / int16 are quantized types: they need a scale)."""
    if isinstance(t, OperandType):
        return t
    key = None
    if isinstance(t, str):
        key = t.strip().lower()
    elif isinstance(t, (np.dtype, type)) and not isinstance(t, OperandType):
        try:
            key = np.dtype(t).name
        except TypeError:
            key = None
    if key in _TYPE_WORDS:
        return _TYPE_WORDS[key]
    hint = ""
    if key in ("uint8", "int8", "int16", "uint16"):
        hint = (f" ({key} tensors are quantized in NNAPI: give the scale and zero point, e.g. "
                f"nn.{'quant8_asymm' if key == 'uint8' else 'quant8_asymm_signed' if key == 'int8' else 'quant16_symm' if key == 'int16' else 'quant16_asymm'}(...))")
    elif key in ("float64", "int64", "uint32", "uint64"):
        hint = f" (NNAPI has no {key} tensors)"
    raise TypeError(f"{_said(what, t)}: expected {_TYPE_FORMS}{hint}")


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


# ---- memory -----------------------------------------------------------------------------------------
class Memory:
    """An ANeuralNetworksMemory over a file descriptor (``Memory.from_fd``) or holding a copy of a
    numpy array (``Memory(array)``: a private temporary file, mapped read/write)."""

    def __init__(self, array: Optional[np.ndarray] = None, *, size: Optional[int] = None):
        ffi, lib = _api()
        if (array is None) == (size is None):
            raise TypeError("Memory: give an array (Memory(array): a copy of it) or a size in bytes "
                            "(Memory(size=N)), not " + ("both" if array is not None else "neither was given"))
        if size is not None:
            size = _as_int(size, "Memory(size", 1, (1 << 63) - 1, "a number of bytes >= 1")
        elif not isinstance(array, np.ndarray):
            raise TypeError(f"Memory(array={type(array).__name__}): expected a numpy array")
        elif array.size == 0 or array.dtype.hasobject:
            raise ValueError(f"Memory(array): {'an empty' if array.size == 0 else 'an object'} array cannot be shared "
                             f"(a Memory holds at least one byte of plain values)")
        data = None if array is None else np.ascontiguousarray(array)
        n = data.nbytes if data is not None else size
        fd, path = tempfile.mkstemp(prefix="nnapi_py-mem-")
        os.unlink(path)
        try:
            os.ftruncate(fd, n)
            if data is not None:
                os.pwrite(fd, data.tobytes(), 0)
            self._init(n, 3, fd, 0)
        finally:
            os.close(fd)                  # the library keeps its own duplicate
        self.dtype = None if data is None else data.dtype
        self.shape = None if data is None else data.shape

    @classmethod
    def from_fd(cls, fd: int, size: int, prot: int = 3, offset: int = 0) -> "Memory":
        """A Memory over `size` bytes of the file open as `fd` from `offset` (prot: PROT_READ 1 |
        PROT_WRITE 2; the library keeps its own duplicate of fd)."""
        _as_int(fd, "Memory.from_fd(fd", 0, (1 << 31) - 1, "an open file descriptor (an integer >= 0)")
        _as_int(size, "Memory.from_fd(size", 1, (1 << 63) - 1, "a number of bytes >= 1")
        _as_int(prot, "Memory.from_fd(prot", 1, 3, "PROT_READ 1, PROT_WRITE 2 or both 3")
        _as_int(offset, "Memory.from_fd(offset", 0, (1 << 63) - 1, "a number of bytes >= 0")
        m = cls.__new__(cls)
        m._init(size, prot, fd, offset)
        m.dtype = m.shape = None
        return m

    def _init(self, size, prot, fd, offset):
        ffi, lib = _api()
        p = ffi.new("ANeuralNetworksMemory**")
        _check(lib.ANeuralNetworksMemory_createFromFd(size, prot, fd, offset, p), "ANeuralNetworksMemory_createFromFd")
        self.handle, self.size = p[0], size

    def free(self) -> None:
        if getattr(self, "handle", None) is not None:
            _api()[1].ANeuralNetworksMemory_free(self.handle)
            self.handle = None

    def __del__(self):
        _release("ANeuralNetworksMemory_free", getattr(self, "handle", None))


# ---- model --------------------------------------------------------------------------------------------
class Operand:
    """One operand of a Model (returned by input / constant / op)."""
    __slots__ = ("model", "index", "type", "dims", "name", "fit")

    def __init__(self, model: "Model", index: int, type: OperandType, dims: Tuple[int, ...], name: str):
        self.model, self.index, self.type, self.dims, self.name = model, index, type, dims, name
        self.fit = dims         # the last array shape accepted for it (run(): one comparison next time)

    def __repr__(self):
        return f"<operand {self.index} {self.name!r} {self.type.name} {list(self.dims)}>"


OperandLike = Union[Operand, int, float, bool, np.ndarray, "Model"]


class Model:
    """An ANeuralNetworksModel being built; ``compile()`` finishes it."""

    def __init__(self, name: str = "model", *, relaxed: bool = False):
        _as_name(name, "Model(name")
        relaxed = _as_bool(relaxed, "Model(relaxed")
        ffi, lib = _api()
        p = ffi.new("ANeuralNetworksModel**")
        _check(lib.ANeuralNetworksModel_create(p), "ANeuralNetworksModel_create")
        self.handle, self.name, self.relaxed = p[0], name, relaxed
        self.operands: List[Operand] = []
        self.operations: List[Tuple[str, List[int], List[int]]] = []
        self.inputs: List[Operand] = []
        self.outputs: List[Operand] = []
        self.values: Dict[int, Any] = {}
        self._keep: List[Any] = []
        self.finished = False

    # -- operands
    def _add(self, t: OperandType, dims: Sequence[int], name: str) -> Operand:
        ffi, lib = _api()
        dims = tuple(int(d) for d in dims)
        key = (t.code, dims, t.scale, t.zero_point)
        ot = _OPERAND_TYPES.get(key)
        if ot is None:                  # read-only once made: one per type and shape (~2 us)
            d = ffi.new("uint32_t[]", dims) if dims else ffi.NULL
            ot = (ffi.new("ANeuralNetworksOperandType*", {"type": t.code, "dimensionCount": len(dims),
                                                          "dimensions": d, "scale": t.scale,
                                                          "zeroPoint": t.zero_point}), d)
            if len(_OPERAND_TYPES) < 1024:
                _OPERAND_TYPES[key] = ot
        _check(lib.ANeuralNetworksModel_addOperand(self.handle, ot[0]), "ANeuralNetworksModel_addOperand")
        o = Operand(self, len(self.operands), t, dims, name or f"t{len(self.operands)}")
        self.operands.append(o)
        if t.channel_scales is not None:
            sc = ffi.new("float[]", list(t.channel_scales))
            prm = ffi.new("ANeuralNetworksSymmPerChannelQuantParams*",
                          {"channelDim": t.channel_dim, "scaleCount": len(t.channel_scales), "scales": sc})
            _check(lib.ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(self.handle, o.index, prm),
                   "ANeuralNetworksModel_setOperandSymmPerChannelQuantParams")
        return o

    def input(self, name: str, type: OperandType, shape: Sequence[int]) -> Operand:
        """A model input; 0 in shape means a dimension given at execution time.  type: an nn
        type, or 'float32' / 'float16' / 'int32' / 'bool' (or those numpy dtypes)."""
        _as_name(name, "input(name")
        type = _operand_type(type, "input(type")
        shape = _shape(shape, f"input({name!r}, shape")
        if any(i.name == name for i in self.inputs):
            raise ValueError(f"the model already has an input named {name!r} (input names must be unique)")
        o = self._add(type, shape, name)
        self.inputs.append(o)
        return o

    def constant(self, value: Any, type: Optional[OperandType] = None, name: str = "") -> Operand:
        """A constant from a numpy array / Python number (copied when <= 128 bytes, otherwise
        referenced: this Model keeps the array alive), or a (Memory, offset, length) triple."""
        ffi, lib = _api()
        if not isinstance(name, str):
            raise TypeError(f"constant(name={name!r}): expected a str")
        if type is not None:
            type = _operand_type(type, "constant(type")
        if isinstance(value, tuple) and value and isinstance(value[0], Memory):
            if len(value) != 3:
                raise ValueError(f"constant(value): a constant in a Memory is (memory, offset, length), "
                                 f"{len(value)} items were given")
            mem, offset, length = value
            _as_int(offset, "constant(value) offset", 0, mem.size)
            _as_int(length, "constant(value) length", 1, mem.size)
            if type is None:
                raise ValueError("a constant in a Memory needs its type")
            o = self._add(type, (length // max(type.dtype.itemsize, 1),), name)
            _check(lib.ANeuralNetworksModel_setOperandValueFromMemory(self.handle, o.index, mem.handle, offset, length),
                   "ANeuralNetworksModel_setOperandValueFromMemory")
            self._keep.append(mem)
            return o
        if value is None or isinstance(value, (str, bytes, Operand, Model, Memory)):
            raise TypeError(f"constant(value={value!r}): expected a numpy array, a number, a list of numbers, "
                            f"or a (Memory, offset, length) triple")
        a = np.asarray(value)
        if type is None:
            type = _DTYPE_TYPES.get(a.dtype)
            if type is None:
                raise ValueError(f"give the operand type of a {a.dtype} constant (e.g. nn.quant8_asymm(scale, zp))")
            if a.ndim == 0:
                type = {C.TENSOR_FLOAT32: scalar_float32, C.TENSOR_FLOAT16: scalar_float16,
                        C.TENSOR_INT32: scalar_int32, C.TENSOR_BOOL8: scalar_bool}[type.code]
        a = np.array(_as_dtype(a, type.dtype, f"constant {name or len(self.operands)}"), order="C")  # a private copy
        if type.is_scalar:
            a = a.reshape(())
        o = self._add(type, () if type.is_scalar else a.shape, name)
        self._keep.append(a)
        self.values[o.index] = a
        _check(lib.ANeuralNetworksModel_setOperandValue(self.handle, o.index, ffi.from_buffer(a), a.nbytes),
               "ANeuralNetworksModel_setOperandValue")
        return o

    def omitted(self, type: OperandType = float32) -> Operand:
        """An omitted optional input (no value)."""
        type = _operand_type(type, "omitted(type")
        ffi, lib = _api()
        o = self._add(type, (), "omitted")
        _check(lib.ANeuralNetworksModel_setOperandValue(self.handle, o.index, ffi.NULL, 0),
               "ANeuralNetworksModel_setOperandValue")
        return o

    def _operand(self, v: OperandLike, float_scalar: OperandType) -> Operand:
        if isinstance(v, Operand):
            if v.model is not self:
                raise ValueError(f"{v!r} belongs to another model")
            return v
        if isinstance(v, Model):
            ffi, lib = _api()
            v._finish()
            o = self._add(OperandType(C.MODEL), (), v.name)
            _check(lib.ANeuralNetworksModel_setOperandValueFromModel(self.handle, o.index, v.handle),
                   "ANeuralNetworksModel_setOperandValueFromModel")
            self._keep.append(v)
            return o
        if isinstance(v, (bool, np.bool_)):
            return self.constant(np.array(v, np.bool_), scalar_bool)
        if isinstance(v, (int, np.integer)):
            return self.constant(_as_dtype(v, np.int32, f"scalar {v}"), scalar_int32)
        if isinstance(v, (float, np.floating)):
            return self.constant(_as_dtype(v, float_scalar.dtype, f"scalar {v}"), float_scalar)
        if v is None or isinstance(v, (str, bytes, dict, set, OperandType)):
            raise TypeError(f"{v!r} is not an operand: give an Operand of this model, a number, a numpy array "
                            f"(a constant), a Model (IF / WHILE) or m.omitted() for an omitted input")
        return self.constant(v)

    def op(self, operation: Union[str, int], *inputs: OperandLike,
           outputs: Optional[Sequence[Union[OperandType, Tuple[OperandType, Sequence[int]]]]] = None,
           names: Sequence[str] = ()) -> Union[Operand, Tuple[Operand, ...]]:
        """Add an operation (by name, e.g. "CONV_2D", or code).  Python numbers become scalar
        operands (int: INT32, float: FLOAT32 or FLOAT16 next to float16 tensors, bool: BOOL);
        numpy arrays become constants; a Model becomes a subgraph operand (IF, WHILE).

        outputs: types (or (type, shape) pairs) of the results; by default one output of the
        first tensor input's type and quantization (BOOL8 for comparisons, INT32 for
        ARGMAX/ARGMIN, the branch/body outputs for IF/WHILE), with its shape left to the
        runtime's shape rules.  Returns an Operand, or a tuple of them."""
        ffi, lib = _api()
        name, code = _operation(operation)
        if isinstance(names, str):
            names = (names,)
        for nm in names:
            if not isinstance(nm, str):
                raise TypeError(f"{name}: names={names!r}: expected a str or a sequence of str")
        if outputs is not None:
            if isinstance(outputs, (OperandType, str)) or not isinstance(outputs, Sequence):
                raise TypeError(f"{name}: outputs={outputs!r}: expected a list of types or (type, shape) pairs, "
                                f"e.g. outputs=[nn.float32] or [(nn.float32, (1, 4))]")
            outputs = [(_operand_type(o[0], f"{name}: outputs[{k}] type"),
                        _shape(o[1], f"{name}: outputs[{k}] shape") if o[1] is not None else None)
                       if isinstance(o, tuple) and len(o) == 2 else _operand_type(o, f"{name}: outputs[{k}]")
                       for k, o in enumerate(outputs)]
        first = next((v for v in inputs if isinstance(v, Operand) and not v.type.is_scalar), None)
        fs = scalar_float16 if first is not None and first.type.code == C.TENSOR_FLOAT16 else scalar_float32
        ins = [self._operand(v, fs) for v in inputs]
        if outputs is None:
            outputs = self._default_outputs(name, ins, first)
        outs = []
        for k, spec in enumerate(outputs):
            t, shape = spec if isinstance(spec, tuple) else (spec, None)
            if shape is None:
                shape = (0,) * len(first.dims) if first is not None and first.dims else ()
                if name in ("IF", "WHILE") or (first is not None and not first.dims):
                    shape = ()
            outs.append(self._add(t, shape, names[k] if k < len(names) else f"{name.lower()}_{len(self.operands)}"))
        ii, oo = [o.index for o in ins], [o.index for o in outs]
        _check(lib.ANeuralNetworksModel_addOperation(self.handle, code, len(ii), ffi.new("uint32_t[]", ii),
                                                     len(oo), ffi.new("uint32_t[]", oo)),
               f"ANeuralNetworksModel_addOperation({name})")
        self.operations.append((name, ii, oo))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _default_outputs(self, name, ins, first):
        if name in ("IF", "WHILE"):
            sub = next(v for v in self._keep[::-1] if isinstance(v, Model) and
                       any(o.type.code == C.MODEL for o in ins))
            return [o.type for o in sub.outputs]
        if first is None:
            raise ValueError(f"{name}: give the output types (outputs=[...])")
        t = first.type
        if name in _BOOL_OUT:
            t = bool8
        elif name in _INT_OUT:
            t = int32
        return [t]

    def output(self, operand: Operand, name: Optional[str] = None) -> Operand:
        """Make `operand` a model output (named `name`, by default its own name)."""
        if not isinstance(operand, Operand):
            raise TypeError(f"output(operand={operand!r}): expected an Operand of this model (what input() or op() "
                            f"returned)")
        if operand.model is not self:
            raise ValueError(f"output({operand!r}): the operand belongs to another model")
        if name is not None:
            _as_name(name, "output(name")
        if any(o.name == (name or operand.name) for o in self.outputs):
            raise ValueError(f"the model already has an output named {name or operand.name!r} "
                             f"(output names must be unique)")
        if name:
            operand.name = name
        self.outputs.append(operand)
        return operand

    def _finish(self) -> None:
        if self.finished:
            return
        ffi, lib = _api()
        if self.relaxed:
            _check(lib.ANeuralNetworksModel_relaxComputationFloat32toFloat16(self.handle, True),
                   "ANeuralNetworksModel_relaxComputationFloat32toFloat16")
        ins = ffi.new("uint32_t[]", [o.index for o in self.inputs] or [0])
        outs = ffi.new("uint32_t[]", [o.index for o in self.outputs] or [0])
        _check(lib.ANeuralNetworksModel_identifyInputsAndOutputs(self.handle, len(self.inputs), ins,
                                                                 len(self.outputs), outs),
               "ANeuralNetworksModel_identifyInputsAndOutputs")
        _check(lib.ANeuralNetworksModel_finish(self.handle), "ANeuralNetworksModel_finish")
        self.finished = True

    def compile(self, *, preference: Union[str, int] = "fast_single_answer", devices: Optional[Iterable[str]] = None,
                priority: Union[str, int, None] = None, timeout_ns: Optional[int] = None,
                cache_dir: Optional[str] = None, token: Optional[bytes] = None) -> "Compilation":
        """Finish the model and compile it (preference "low_power" / "fast_single_answer" /
        "sustained_speed"; devices: device names for createForDevices; priority "low" /
        "medium" / "high"; timeout_ns; cache_dir + 32-byte token for setCaching: the library
        stores the compiled plan there and a later compilation of the same model with the same
        token loads it; the token defaults to cache_token(), a hash of the model's content)."""
        preference, devices, priority, timeout_ns, cache_dir, token = _compile_args(
            preference, devices, priority, timeout_ns, cache_dir, token)
        self._finish()
        if cache_dir is not None and token is None:
            token = self.cache_token()
        return Compilation(self, preference, devices, priority, timeout_ns, cache_dir, token)

    def cache_token(self) -> bytes:
        """The 32-byte caching token compile(cache_dir=...) uses by default: SHA-256 of the
        model's operands, operations, inputs, outputs, relax flag and constant values (the
        library's own key checks the content again, so this only names the cache entry)."""
        h = hashlib.sha256()
        h.update(repr((self.relaxed, [(o.type.code, o.dims, o.type.scale, o.type.zero_point, o.type.channel_dim,
                                       None if o.type.channel_scales is None else list(o.type.channel_scales))
                                      for o in self.operands],
                       self.operations, [o.index for o in self.inputs], [o.index for o in self.outputs])).encode())
        for i in sorted(self.values):
            h.update(b"%d:" % i)
            h.update(np.ascontiguousarray(self.values[i]).tobytes())
        for v in self._keep:
            if isinstance(v, Model):
                h.update(v.cache_token())
        return h.digest()

    # -- inspection
    def to_dict(self) -> dict:
        return _describe.model_dict(
            [(o.type.code, list(o.dims), o.type.scale, o.type.zero_point, o.name) for o in self.operands],
            self.operations, [o.index for o in self.inputs], [o.index for o in self.outputs],
            {k: v for k, v in self.values.items()})

    def summary(self) -> str:
        return _describe.summary(self.to_dict())

    def to_json(self) -> str:
        return _describe.to_json(self.to_dict())

    def to_dot(self) -> str:
        return _describe.to_dot(self.to_dict())

    def to_svg(self) -> str:
        """SVG rendering of to_dot() (needs Graphviz's `dot` on PATH)."""
        return _describe.render_svg(self.to_dot())

    def __del__(self):
        _release("ANeuralNetworksModel_free", getattr(self, "handle", None))


# ---- compilation and execution -----------------------------------------------------------------------
_UINT64_MAX = (1 << 64) - 1


def _timeout(v: Any, what: str) -> Optional[int]:
    if v is None:
        return None
    return _as_int(v, what, 0, _UINT64_MAX, "an integer number of nanoseconds, 0..2**64-1 (None: no timeout)")


def _compile_args(preference, devices, priority, timeout_ns, cache_dir, token):
    """Model.compile's arguments checked and normalised before anything is made: a TypeError or
    ValueError naming the argument, the value and what is accepted."""
    names = ", ".join(map(repr, _PREFERENCES))
    if isinstance(preference, str):
        if preference not in _PREFERENCES:
            raise ValueError(f"preference={preference!r}: one of {names} (or their codes 0, 1, 2)")
        preference = _PREFERENCES[preference]
    else:
        preference = _as_int(preference, "preference", 0, 2, f"one of {names} or their codes 0, 1, 2")
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
        pn = ", ".join(map(repr, _PRIORITIES))
        if isinstance(priority, str):
            if priority not in _PRIORITIES:
                raise ValueError(f"priority={priority!r}: one of {pn} (or their codes 90, 100, 110)")
            priority = _PRIORITIES[priority]
        else:
            priority = _as_int(priority, "priority", 0, 1 << 31, f"one of {pn} or their codes 90, 100, 110")
            if priority not in _PRIORITIES.values():
                raise ValueError(f"priority={priority}: one of {pn} or their codes 90, 100, 110")
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


def _device_handles(names):
    ffi, lib = _api()
    n = ffi.new("uint32_t*")
    _check(lib.ANeuralNetworks_getDeviceCount(n), "ANeuralNetworks_getDeviceCount")
    found = {}
    for k in range(n[0]):
        d = ffi.new("ANeuralNetworksDevice**")
        _check(lib.ANeuralNetworks_getDevice(k, d), "ANeuralNetworks_getDevice")
        s = ffi.new("char**")
        _check(lib.ANeuralNetworksDevice_getName(d[0], s), "ANeuralNetworksDevice_getName")
        found[ffi.string(s[0]).decode()] = d[0]
    missing = [x for x in names if x not in found]
    if missing:
        raise ValueError(f"devices: no device named {', '.join(map(repr, missing))} (the devices: {sorted(found)}; "
                         f"NNAPI_PY_DEVICES or nn.emulated(devices=...) sets them)")
    return [found[x] for x in names]


def device_names() -> List[str]:
    """Names of the devices the library shows (see NNAPI_PY_DEVICES)."""
    ffi, lib = _api()
    n = ffi.new("uint32_t*")
    _check(lib.ANeuralNetworks_getDeviceCount(n), "ANeuralNetworks_getDeviceCount")
    out = []
    for k in range(n[0]):
        d = ffi.new("ANeuralNetworksDevice**")
        _check(lib.ANeuralNetworks_getDevice(k, d), "ANeuralNetworks_getDevice")
        s = ffi.new("char**")
        _check(lib.ANeuralNetworksDevice_getName(d[0], s), "ANeuralNetworksDevice_getName")
        out.append(ffi.string(s[0]).decode())
    return out


def feature_level() -> int:
    return int(_api()[1].ANeuralNetworks_getRuntimeFeatureLevel())


class Compilation:
    def __init__(self, model, preference, devices, priority, timeout_ns, cache_dir, token):
        ffi, lib = _api()
        self.model = model
        p = ffi.new("ANeuralNetworksCompilation**")
        if devices is not None:
            hs = _device_handles(list(devices))
            arr = ffi.new("ANeuralNetworksDevice*[]", hs)
            _check(lib.ANeuralNetworksCompilation_createForDevices(model.handle, arr, len(hs), p),
                   "ANeuralNetworksCompilation_createForDevices")
        else:
            _check(lib.ANeuralNetworksCompilation_create(model.handle, p), "ANeuralNetworksCompilation_create")
        self.handle = p[0]
        _check(lib.ANeuralNetworksCompilation_setPreference(self.handle, preference),
               "ANeuralNetworksCompilation_setPreference")
        if priority is not None:
            _check(lib.ANeuralNetworksCompilation_setPriority(self.handle, priority),
                   "ANeuralNetworksCompilation_setPriority")
        if timeout_ns is not None:
            _check(lib.ANeuralNetworksCompilation_setTimeout(self.handle, timeout_ns),
                   "ANeuralNetworksCompilation_setTimeout")
        if cache_dir is not None:
            tok = ffi.new("uint8_t[]", bytes(token or b"\0" * 32))
            _check(lib.ANeuralNetworksCompilation_setCaching(self.handle, cache_dir.encode(), tok),
                   "ANeuralNetworksCompilation_setCaching")
        _check(lib.ANeuralNetworksCompilation_finish(self.handle), "ANeuralNetworksCompilation_finish")

    def execution(self, *, reusable: bool = False, timeout_ns: Optional[int] = None,
                  measure_timing: bool = False) -> "Execution":
        """A new execution (reusable=True: run it again and again; timeout_ns; measure_timing=True:
        Execution.duration() afterwards)."""
        return Execution(self, _as_bool(reusable, "execution(reusable"), _timeout(timeout_ns, "execution(timeout_ns"),
                         _as_bool(measure_timing, "execution(measure_timing"))

    def run(self, inputs: Union[Mapping[str, Any], Sequence[Any]], outputs: Optional[Mapping[str, np.ndarray]] = None
            ) -> Dict[str, np.ndarray]:
        """One synchronous execution: {input name: array} (or a list in input order) ->
        {output name: array}; dynamic output shapes come back as the execution reports them."""
        return Execution(self, False, None, False).run(inputs, outputs)

    def run_async(self, inputs, outputs=None) -> Dict[str, np.ndarray]:
        """startCompute + Event_wait."""
        return Execution(self, False, None, False).run(inputs, outputs, mode="async")

    def burst(self) -> "Burst":
        return Burst(self)

    def __del__(self):
        _release("ANeuralNetworksCompilation_free", getattr(self, "handle", None))


class Burst:
    """A burst object: run(inputs) executes through ANeuralNetworksExecution_burstCompute."""

    def __init__(self, compilation: Compilation):
        if not isinstance(compilation, Compilation):
            raise TypeError(f"Burst(compilation={compilation!r}): expected a Compilation (Model.compile())")
        ffi, lib = _api()
        p = ffi.new("ANeuralNetworksBurst**")
        _check(lib.ANeuralNetworksBurst_create(compilation.handle, p), "ANeuralNetworksBurst_create")
        self.handle, self.compilation = p[0], compilation

    def run(self, inputs, outputs=None) -> Dict[str, np.ndarray]:
        return Execution(self.compilation, False, None, False).run(inputs, outputs, mode="burst", burst=self)

    def __del__(self):
        _release("ANeuralNetworksBurst_free", getattr(self, "handle", None))


def _max_elements(o: Operand, given: Dict[str, np.ndarray]) -> int:
    if o.dims and all(o.dims):
        return int(np.prod(o.dims))
    biggest = max([a.size for a in given.values()] + [1])
    return max(biggest * 16, 1 << 16)


class Execution:
    """One ANeuralNetworksExecution (reusable=True: run it again and again).

    ``run(inputs, outputs)`` never writes into an array you own unless you asked it to: a
    reusable execution keeps its own copies of the inputs (a later ``run(new_inputs)`` copies the
    new values into them) and its own output buffers (outputs passed to ``run`` receive that
    run's results, and nothing later).  ``bind(inputs, outputs)`` before the first run binds your
    arrays zero-copy instead: the library reads those inputs and writes those outputs in place at
    every run, so changing a bound input in place and calling ``run()`` feeds new data without a
    copy (``run(new_values)`` then writes the new values into your bound array)."""

    _direct: frozenset = frozenset()    # outputs the library writes into the caller's arrays (_bind)
    _out_by_name: Optional[Dict[str, Operand]] = None

    def __init__(self, compilation: Compilation, reusable=False, timeout_ns=None, measure_timing=False):
        ffi, lib = _api()
        p = ffi.new("ANeuralNetworksExecution**")
        _check(lib.ANeuralNetworksExecution_create(compilation.handle, p), "ANeuralNetworksExecution_create")
        self.handle, self.compilation, self.model = p[0], compilation, compilation.model
        self.reusable = bool(reusable)
        self._names: Dict[str, frozenset] = {}     # "input" / "output" -> the model's names (checked per run)
        self._bound = None
        self._pinned: Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]] = ({}, {})   # bind(): the caller's arrays
        self._fixed = None          # {name: view of its buffer} of the fully specified outputs (made
        #                             once; with every output fixed, also run(copy=False)'s result)
        self._scratch = (ffi.new("uint32_t*"), ffi.new("uint32_t[]", 32))    # rank / dimensions
        if reusable:
            _check(lib.ANeuralNetworksExecution_setReusable(self.handle, True), "ANeuralNetworksExecution_setReusable")
        if timeout_ns is not None:
            _check(lib.ANeuralNetworksExecution_setTimeout(self.handle, int(timeout_ns)),
                   "ANeuralNetworksExecution_setTimeout")
        if measure_timing:
            _check(lib.ANeuralNetworksExecution_setMeasureTiming(self.handle, True),
                   "ANeuralNetworksExecution_setMeasureTiming")

    def _named(self, values, operands, kind: str) -> Dict[str, Any]:
        """{name: value} from a dict or a list in model order; an unknown name is an
        UnknownNameError (a KeyError and a ValueError) listing the model's names."""
        if values is None:
            return {}
        if not isinstance(values, Mapping):
            if not isinstance(values, (list, tuple)):
                raise TypeError(f"{kind}s: a {'numpy array' if isinstance(values, np.ndarray) else type(values).__name__} was given; expected a dict {{name: array}} "
                                f"or a list of arrays in the model's {kind} order {[o.name for o in operands]}")
            if len(values) > len(operands):
                raise ValueError(f"{len(values)} {kind}s given, the model has {len(operands)}: "
                                 f"{[o.name for o in operands]}")
            return {o.name: v for o, v in zip(operands, values)}
        names = self._names.get(kind)
        if names is None:
            names = self._names[kind] = frozenset(o.name for o in operands)
        if not values.keys() <= names:
            unknown = sorted(map(str, set(values) - names))
            raise UnknownNameError(f"no model {kind} named {', '.join(map(repr, unknown))} (the model's {kind}s: "
                                   f"{[o.name for o in operands]})")
        return values

    def bind(self, inputs=None, outputs=None) -> "Execution":
        """Bind your own arrays zero-copy (before the first run): every run reads these inputs and
        writes these outputs in place.  Each must already have the operand's dtype and be
        C-contiguous and writeable; inputs not bound here are passed to run() as usual."""
        if self._bound is not None:
            raise ValueError("bind() comes before the execution's first run (its buffers are bound by then)")
        m = self.model
        ins, outs = self._named(inputs, m.inputs, "input"), self._named(outputs, m.outputs, "output")
        by_name = {o.name: o for o in m.inputs + m.outputs}
        for what, given, pinned in (("input", ins, self._pinned[0]), ("output", outs, self._pinned[1])):
            for name, a in given.items():
                o = by_name[name]
                a = _writable_target(a, o, f"bind: {what}")
                if a.shape != o.dims:
                    problem = _shape_error(o, a.shape, f"bind: {what}")
                    if problem:
                        raise ValueError(problem)
                pinned[name] = a
        return self

    def _bind(self, inputs, outputs):
        """The first run: setInput / setOutput for every operand.  Inputs bound with bind() as
        they are; others zero-copy only for a one-shot execution (nothing is written into them),
        private copies for a reusable one.  Outputs: bind()'s as they are; run()'s directly for a
        one-shot execution, else execution-owned buffers the results are copied from."""
        ffi, lib = _api()
        m = self.model
        pinned_in, pinned_out = self._pinned
        keep, arrays = [], {}
        for k, o in enumerate(m.inputs):
            v = inputs.get(o.name)
            if o.name in pinned_in:
                a = pinned_in[o.name]
                if v is not None:
                    v = _as_dtype(v, a.dtype, f"input {o.name!r}")
                    if v.shape != a.shape:
                        raise ValueError(f"input {o.name!r}: array shape {v.shape} differs from the bound array's "
                                         f"{a.shape} (run() copies new values into it: same shape)")
                    a[...] = v
            elif v is None:
                rc = lib.ANeuralNetworksExecution_setInput(self.handle, k, ffi.NULL, ffi.NULL, 0)
                if rc:
                    reason = ffi.string(lib.nnapi_py_last_error()).decode(errors="replace")
                    if "omits the input" not in reason:
                        _check(rc, "ANeuralNetworksExecution_setInput")
                    why = reason.split(", but ", 1)[-1] if ", but " in reason else reason
                    raise ValueError(f"input {o.name!r} is missing: give it to run() (the model's inputs: "
                                     f"{[i.name for i in m.inputs]}); only an input that feeds an optional "
                                     f"operand may be left out, and this one {why.replace('it feeds', 'feeds')}")
                continue
            elif isinstance(v, Memory):
                self._memory_input(k, o, v)
                continue
            else:
                a = _as_dtype(v, o.type.dtype, f"input {o.name!r}")
                shape = a.shape
                if shape != o.fit:              # the declared shape, or the last one accepted
                    problem = _shape_error(o, shape, "input")
                    if problem:
                        raise ValueError(problem)
                    o.fit = shape
                if self.reusable or a is v and not a.flags.writeable:
                    a = np.array(a, order="C")              # its own copy: later runs write into it
                else:
                    a = np.ascontiguousarray(a)
            keep.append(a)
            arrays[o.name] = a
            t = ffi.NULL
            if o.dims and not all(o.dims):
                d = ffi.new("uint32_t[]", a.shape)
                keep.append(d)
                t = ffi.new("ANeuralNetworksOperandType*", {"type": o.type.code, "dimensionCount": a.ndim,
                                                            "dimensions": d, "scale": o.type.scale,
                                                            "zeroPoint": o.type.zero_point})
                keep.append(t)
            _check(lib.ANeuralNetworksExecution_setInput(self.handle, k, t, ffi.from_buffer(a), a.nbytes),
                   "ANeuralNetworksExecution_setInput")
        bufs = {}
        direct = None
        for k, o in enumerate(m.outputs):
            b = pinned_out.get(o.name)
            if b is None and not self.reusable:
                b = outputs.get(o.name)
                if b is not None:           # written in place when its shape is known to be the result's
                    b = _writable_target(b, o, "output")
                    if not (o.dims and all(o.dims)):
                        b = np.empty(max(_max_elements(o, arrays), b.size), o.type.dtype)
                    else:
                        direct = (direct or set()) | {o.name}
            if b is None:
                b = np.empty(_max_elements(o, arrays), o.type.dtype)
            keep.append(b)
            bufs[o.name] = b.reshape(-1)
            _check(lib.ANeuralNetworksExecution_setOutput(self.handle, k, ffi.NULL, ffi.from_buffer(b), b.nbytes),
                   "ANeuralNetworksExecution_setOutput")
        self._bound = (keep, bufs, arrays)
        if direct:
            self._direct = direct

    def _memory_input(self, k: int, o: Operand, mem: "Memory") -> None:
        """setInputFromMemory for the whole of `mem`, its dtype, shape or size checked against
        the operand first (a Memory made from an array knows its dtype and shape)."""
        ffi, lib = _api()
        t = ffi.NULL
        if mem.dtype is not None:
            if mem.dtype != o.type.dtype:
                raise ValueError(f"input {o.name!r}: the Memory holds {mem.dtype} values, the model's input is "
                                 f"{o.type.dtype} ({o.type.name})")
            if mem.shape != o.dims:
                problem = _shape_error(o, mem.shape, "input")
                if problem:
                    raise ValueError(problem + " (the Memory's array)")
                if o.dims != () or not o.type.is_scalar:
                    d = ffi.new("uint32_t[]", mem.shape)
                    t = ffi.new("ANeuralNetworksOperandType*", {"type": o.type.code, "dimensionCount": len(mem.shape),
                                                                "dimensions": d, "scale": o.type.scale,
                                                                "zeroPoint": o.type.zero_point})
                    self._keep_types = getattr(self, "_keep_types", ()) + (d, t)
        elif o.dims and all(o.dims) or o.type.is_scalar:
            need = math.prod(o.dims) * o.type.dtype.itemsize
            if mem.size != need:
                raise ValueError(f"input {o.name!r}: the Memory holds {mem.size} bytes, the model's input "
                                 f"{_shape_text(o.dims)} {o.type.dtype} takes {need}")
        else:
            raise ValueError(f"input {o.name!r} has dimensions given at execution {_shape_text(o.dims)}: a Memory "
                             f"from Memory.from_fd() has no shape; make it with Memory(array) or pass the array")
        _check(lib.ANeuralNetworksExecution_setInputFromMemory(self.handle, k, t, mem.handle, 0, mem.size),
               "ANeuralNetworksExecution_setInputFromMemory")

    def run(self, inputs=None, outputs=None, mode: str = "sync", burst: Optional[Burst] = None,
            copy: bool = True) -> Dict[str, np.ndarray]:
        """Compute; mode "sync", "async" or "burst".  inputs: {name: array} or a list in input
        order; outputs: {name: array} to receive this run's results.  A reusable execution's
        later runs copy new input values into its buffers (same shapes).  copy=False returns the
        execution's output buffers themselves (views the next run overwrites; with fixed output
        shapes the same dict every run: do not change it).  See the class for bind().

        An input array has the operand's declared shape (a 0 there: any size, given by the array;
        a scalar: a number or a 0-d array); it is never reshaped or broadcast.  Its dtype converts
        to the operand's only where no value changes meaning (_as_dtype).  An output array given
        has the result's shape and the operand's dtype, C-contiguous and writeable.  Each is
        otherwise a ValueError naming it, both shapes (or dtypes) and the fix."""
        ffi, lib = _api()
        m = self.model
        inputs = self._named(inputs, m.inputs, "input")
        outputs = self._named(outputs, m.outputs, "output")
        if mode != "sync":
            if mode not in _MODES:
                raise ValueError(f"mode={mode!r}: one of {', '.join(map(repr, _MODES))}")
            if mode == "burst" and not isinstance(burst, Burst):
                raise TypeError(f"burst={burst!r}: mode 'burst' needs the Burst to run on (compilation.burst())")
        copy_out = outputs
        if outputs:
            self._check_output_arrays(outputs)
        if self._bound is None:
            self._bind(inputs, outputs)
            if not self.reusable:               # bound directly (or pinned), but for dynamic shapes
                copy_out = {k: v for k, v in outputs.items() if k not in self._direct} if outputs else outputs
        elif inputs and self.reusable:      # a one-shot execution's second run fails below (BAD_STATE)
            bound = self._bound[2]
            for name, v in inputs.items():
                if name not in bound:
                    raise UnknownNameError(f"input {name!r} was not bound by the first run (a Memory or omitted): a "
                                           f"reusable execution keeps its inputs; create a new execution")
                a = _as_dtype(v, bound[name].dtype, f"input {name!r}")
                if a.shape != bound[name].shape:
                    raise ValueError(f"input {name!r}: shape {a.shape} differs from the bound {bound[name].shape} "
                                     f"(a reusable execution keeps its shapes; create a new execution)")
                bound[name][...] = a
        if mode == "async":
            ev = ffi.new("ANeuralNetworksEvent**")
            _check(lib.ANeuralNetworksExecution_startCompute(self.handle, ev), "ANeuralNetworksExecution_startCompute")
            try:
                _check(lib.ANeuralNetworksEvent_wait(ev[0]), "ANeuralNetworksEvent_wait")
            finally:
                lib.ANeuralNetworksEvent_free(ev[0])
        elif mode == "burst":
            _check(lib.ANeuralNetworksExecution_burstCompute(self.handle, burst.handle),
                   "ANeuralNetworksExecution_burstCompute")
        else:
            _check(lib.ANeuralNetworksExecution_compute(self.handle), "ANeuralNetworksExecution_compute")
        bufs = self._bound[1]
        fixed = self._fixed
        if fixed is None:                       # fully specified outputs: their views, made once
            fixed = self._fixed = {o.name: bufs[o.name][:math.prod(o.dims)].reshape(o.dims)
                                   for o in m.outputs if o.dims and all(o.dims)}
        if not copy and not copy_out and len(fixed) == len(m.outputs):
            return fixed                        # fixed shapes: the same views every run
        result = {}
        r, d = self._scratch
        for k, o in enumerate(m.outputs):
            v = fixed.get(o.name)
            if v is not None:                   # the shape cannot change: no query
                shape = o.dims
            else:
                rc = lib.ANeuralNetworksExecution_getOutputOperandRank(self.handle, k, r)
                if rc:
                    _check(rc, "ANeuralNetworksExecution_getOutputOperandRank")
                shape = ()
                if r[0]:
                    if r[0] > 32:
                        d = ffi.new("uint32_t[]", r[0])
                    rc = lib.ANeuralNetworksExecution_getOutputOperandDimensions(self.handle, k, d)
                    if rc:
                        _check(rc, "ANeuralNetworksExecution_getOutputOperandDimensions")
                    shape = tuple(d[0:r[0]])
                v = bufs[o.name][:math.prod(shape)].reshape(shape)
            dst = copy_out.get(o.name) if copy_out else None
            if dst is not None:                 # this run's result into the caller's array
                if dst.shape != tuple(shape):
                    raise ValueError(f"output {o.name!r}: array shape {dst.shape} does not match the result's "
                                     f"{tuple(shape)}; pass an array of that shape (or none: run() returns the "
                                     f"result)")
                dst[...] = v
                v = dst
            result[o.name] = v.copy() if copy else v
        return result

    def _check_output_arrays(self, outputs: Mapping[str, Any]) -> None:
        """The caller's output arrays before anything runs: the operand's dtype, C-contiguous and
        writeable, and the operand's shape where it is known (0s: any size there)."""
        by_name = self._out_by_name
        if by_name is None:
            by_name = self._out_by_name = {o.name: o for o in self.model.outputs}
        for name, b in outputs.items():
            o = by_name[name]
            _writable_target(b, o, "output")
            if b.shape != o.dims:
                problem = _shape_error(o, b.shape, "output")
                if problem:
                    raise ValueError(problem.split("; ")[0] + f"; pass an array of shape {_shape_text(o.dims)} "
                                     f"(or none: run() returns the result)")

    def duration(self, kind: int = 0) -> int:
        """getDuration (after measure_timing=True): nanoseconds (UINT64_MAX when unavailable).
        kind: 0 on hardware, 1 in driver, 2 fenced on hardware, 3 fenced in driver (or those names)."""
        if isinstance(kind, str) and kind in _DURATIONS:
            kind = _DURATIONS[kind]
        else:
            kind = _as_int(kind, "duration(kind", 0, 3, f"0..3 or one of {', '.join(map(repr, _DURATIONS))}")
        ffi, lib = _api()
        d = ffi.new("uint64_t*")
        _check(lib.ANeuralNetworksExecution_getDuration(self.handle, kind, d), "ANeuralNetworksExecution_getDuration")
        return int(d[0])

    def __del__(self):
        _release("ANeuralNetworksExecution_free", getattr(self, "handle", None))


# ---- device settings (NNAPI_PY_FEATURE_LEVEL / NNAPI_PY_DEVICES / NNAPI_PY_FAULTS) -------------------
@contextlib.contextmanager
def emulated(feature_level: Optional[int] = None, devices: Optional[str] = None, faults: Optional[str] = None):
    """Within the block, the library behaves as the given Android release / shows the given
    virtual devices / injects the given faults (the same settings as the environment variables,
    see README "Testing your client's code paths")."""
    from . import devices as _devices
    with _devices.emulated(feature_level=feature_level, devices=devices, faults=faults):
        yield
