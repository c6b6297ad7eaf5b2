"""Raw memory access: numpy views of caller memory without copying."""
import cffi
import numpy as np

ffi = cffi.FFI()
_cast = ffi.cast
_buffer = ffi.buffer
_frombuffer = np.frombuffer


def view_bytes(addr, length):
    """A writable memoryview of `length` bytes at address `addr` (caller memory, no copy)."""
    return memoryview(_buffer(_cast("char *", addr), length))


def view_array(addr, nbytes, dtype, shape):
    """A numpy array of dtype/shape over caller memory at addr (the first nbytes bytes)."""
    if nbytes == 0:
        return np.empty(shape, dtype)
    a = _frombuffer(_buffer(_cast("char *", addr), nbytes), dtype)
    return a.reshape(shape) if len(shape) != 1 else a


def copy_bytes(addr, length):
    return _buffer(_cast("char *", addr), length)[:]
