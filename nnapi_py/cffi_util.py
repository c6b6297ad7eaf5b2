"""Raw memory access: numpy views of caller memory without copying."""
import numpy as np

ffi = None
_cast = _buffer = None
_frombuffer = np.frombuffer


def use_ffi(the_ffi=None):
    """Use the embedded module's FFI (no parser import at start-up) or a fresh one."""
    global ffi, _cast, _buffer
    if the_ffi is None:
        import cffi
        the_ffi = cffi.FFI()
    ffi, _cast, _buffer = the_ffi, the_ffi.cast, the_ffi.buffer


def _ensure():
    if ffi is None:
        use_ffi()


def view_bytes(addr, length):
    """A writable memoryview of `length` bytes at address `addr` (caller memory, no copy)."""
    _ensure()
    return memoryview(_buffer(_cast("char *", addr), length))


_views = {}


def view_array(addr, nbytes, dtype, shape):
    """A numpy array of dtype/shape over caller memory at addr (the first nbytes bytes).

    Views are cached by (addr, nbytes, dtype, shape): a view owns nothing, so a cached one
    is exactly what a new one would be, and callers that reuse their buffers (the common
    case) skip building it again.
    """
    key = (addr, nbytes, dtype, shape)
    a = _views.get(key)
    if a is not None:
        return a
    if nbytes == 0:
        return np.empty(shape, dtype)
    _ensure()
    a = _frombuffer(_buffer(_cast("char *", addr), nbytes), dtype)
    if len(shape) != 1:
        a = a.reshape(shape)
    if len(_views) >= 256:
        _views.clear()
    _views[key] = a
    return a


def copy_bytes(addr, length):
    _ensure()
    return _buffer(_cast("char *", addr), length)[:]
