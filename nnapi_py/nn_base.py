"""The Python API's base: library access (calls and deferred frees), NNAPIError, operand types
and shared memories (nnapi_py/nn.py is the public module)."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from . import constants as C
from .nn_checks import _as_int, _said, _scale, _zero_point


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

