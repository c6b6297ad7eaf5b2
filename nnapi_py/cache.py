"""The compilation cache (ANeuralNetworksCompilation_setCaching, the SL's setCachingFromFds, the
Python API's compile(cache_dir=...), `python -m nnapi_py run --cache DIR`).

What Compilation_finish spends its time on is building the kernels (FaceNet uint8: 2.3 s of its
2.4 s; the float32 proofs of the quantized output stages, packed filters, step tables), so the
cache stores the finished Plan itself: order, shapes, shared temporaries, folded constants and
every kernel with the arrays it prepared.  Kernels are closures of the ops modules; they are
written by reference to their code (module, qualified name, first line: the code object of the
library that wrote them, found again in the same library) plus the values they close over, so
nothing in a cache file is code.  The model's own constants are not written: they are
references to the live model's values (the same objects, as a fresh compilation holds).

File: one per (directory, token), ``nnapi_py-<token hex>.bin``::

    magic "NNPYCAC1" | format u32 | model digest 32 | library digest 32 | options digest 32 |
    payload length u64 | CRC-32 of header and payload u32 | zeros to 64 bytes | payload

The three digests are the key (model content; library version and sources; devices,
preference, priority, feature level and the settings that shape a plan).  A file is loaded only
when its magic, format, key, length and checksum all match, and only then unpickled (by an
Unpickler that finds only this library's and numpy's classes and this module's helpers).
Anything else is a miss with its reason: the compilation is made afresh and the file rewritten
(temporary file in the same directory, then os.replace, so concurrent writers never leave a
torn file).  Failing to write (an unwritable directory, a full disk) costs nothing but the
entry.

Runtime-objects layer: compilation.py imports this module; kernels and ops never do.
"""
import copyreg
import hashlib
import io
import os
import pickle
import struct
import sys
import tempfile
import threading
import types
import zlib

import numpy as np

from . import __version__
from . import constants as C

MAGIC = b"NNPYCAC1"
FORMAT = 1
_HEADER = struct.Struct("<8sI32s32s32sQI")
HEADER_SIZE = _HEADER.size
_PROTOCOL = 5


# ------------------------------------------------------------------------------ the key
_library = []


def library_digest():
    """nnapi_py.__version__, the Python and numpy versions and a hash of the runtime's own source
    files (every .py of the package, in path order): a changed library never reads an entry an
    older one wrote.  Computed once per process."""
    if not _library:
        root = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.blake2b(digest_size=32)
        h.update(f"nnapi_py {version()} python {sys.version} numpy {np.__version__}".encode())
        for d, subdirs, files in os.walk(root):
            subdirs[:] = sorted(s for s in subdirs if s != "__pycache__")
            for f in sorted(files):
                if f.endswith(".py"):
                    p = os.path.join(d, f)
                    h.update(os.path.relpath(p, root).encode() + b"\0")
                    with open(p, "rb") as fh:
                        h.update(fh.read())
        _library.append(h.digest())
    return _library[0]


def version():
    """The version component of the library digest (tests replace it to simulate an upgrade)."""
    return __version__


def model_digest(model):
    """The model's content: operands (types, dimensions, scales, zero points, per-channel
    parameters, lifetimes), operations, inputs and outputs, the relax flag, every constant's
    bytes, and the same of every model it references (IF / WHILE)."""
    h = hashlib.sha256()
    seen = {}

    def add(m):
        if id(m) in seen:
            h.update(b"model %d" % seen[id(m)])
            return
        seen[id(m)] = len(seen)
        h.update(repr((m.relaxed, m.types, m.dims, m.scales, m.zps, m.life, m.inputs, m.outputs,
                       [(op.code, op.ins, op.outs) for op in m.operations],
                       [(o.code, o.ins, o.outs) for o in (m.order or ())])).encode())
        for i in sorted(m.channel):
            ch = m.channel[i]
            h.update(repr((i, ch.dim)).encode())
            h.update(np.ascontiguousarray(ch.scales).tobytes())
        for i, life in enumerate(m.life):
            v = m.values.get(i)
            if hasattr(v, "life"):                  # a referenced Model
                h.update(b"sub %d" % i)
                add(v)
            elif v is not None:
                h.update(b"const %d %d" % (i, life))
                h.update(m.constant_bytes(i))
    add(model)
    return h.digest()


def key(compilation, fp16_indices):
    """(model digest, library digest, options digest) of a compilation being finished."""
    from . import devices as devices_mod
    return (model_digest(compilation.model), library_digest(),
            options_digest(compilation, fp16_indices, devices_mod.CONFIG.level))


def options_digest(compilation, fp16_indices, level):
    """What else shapes the plan: the compilation's devices, preference and priority, the
    configured devices and faults, the float16 partitions, the feature level, NNAPI_PY_STRICT,
    NNAPI_PY_MAX_TENSOR_BYTES and NNAPI_PY_PROFILE (timed kernels)."""
    from . import devices as devices_mod, profiling
    from .errors import strict
    from .ops.base import MAX_TENSOR_BYTES
    config = devices_mod.CONFIG

    def dev(d):
        return (d.name, d.type, d.level, d.version, getattr(d, "numerics", None))
    chosen = None if compilation.devices is None else [dev(d) for d in compilation.devices]
    text = repr((chosen, compilation.preference, compilation.priority, level,
                 [dev(d) for d in config.devices], [f.text() for f in config.faults],
                 sorted(fp16_indices), strict(), MAX_TENSOR_BYTES, bool(profiling.ENABLED)))
    return hashlib.blake2b(text.encode(), digest_size=32).digest()


# ------------------------------------------------------------------------------ pickling kernels
_tables = {}            # module name -> ({code: key}, {key: code})
_tables_lock = threading.Lock()
_SAFE_MODULES = ("nnapi_py.ops.", "nnapi_py.plan", "nnapi_py.profiling", "nnapi_py.cache", "nnapi_py.model",
                 "nnapi_py.blas", "nnapi_py.constants", "nnapi_py.errors", "nnapi_py.operand",
                 "nnapi_py.event")


def _safe_module(name):
    return any(name == m.rstrip(".") or name.startswith(m) for m in _SAFE_MODULES) \
        and not name.startswith("nnapi_py.ops.registry_")


def _code_table(modname):
    """Every code object of a module (functions, methods, nested functions and lambdas),
    keyed by (qualified name, first line, occurrence)."""
    with _tables_lock:
        t = _tables.get(modname)
        if t is not None:
            return t
        mod = sys.modules[modname]
        by_code, by_key = {}, {}
        seen_objs = set()

        def walk_code(code):
            if code in by_code:
                return
            k = (code.co_qualname, code.co_firstlineno)
            n = 0
            while (k + (n,)) in by_key:
                n += 1
            by_code[code] = k + (n,)
            by_key[k + (n,)] = code
            for c in code.co_consts:
                if isinstance(c, types.CodeType):
                    walk_code(c)

        def walk(obj):
            if id(obj) in seen_objs:
                return
            seen_objs.add(id(obj))
            if isinstance(obj, (staticmethod, classmethod)):
                obj = obj.__func__
            if isinstance(obj, property):
                for f in (obj.fget, obj.fset, obj.fdel):
                    if f is not None:
                        walk(f)
                return
            if isinstance(obj, types.FunctionType):
                if obj.__module__ == modname:
                    walk_code(obj.__code__)
                w = getattr(obj, "__wrapped__", None)
                if w is not None:
                    walk(w)
            elif isinstance(obj, type) and obj.__module__ == modname:
                for v in list(vars(obj).values()):
                    walk(v)
        for v in list(vars(mod).values()):
            walk(v)
        _tables[modname] = t = (by_code, by_key)
        return t


def _make_function(modname, key, ncells):
    if not _safe_module(modname):
        raise pickle.UnpicklingError(f"function of module {modname!r}")
    code = _code_table(modname)[1].get(tuple(key))
    if code is None:
        raise pickle.UnpicklingError(f"no code {key} in {modname}")
    cells = tuple(types.CellType() for _ in range(ncells)) or None
    return types.FunctionType(code, sys.modules[modname].__dict__, code.co_name, None, cells)


_EMPTY = object.__new__(type("_EmptyCell", (), {}))


def _fill_function(f, state):
    defaults, kwdefaults, contents, fdict = state
    f.__defaults__ = defaults
    f.__kwdefaults__ = kwdefaults
    for cell, v in zip(f.__closure__ or (), contents):
        if v is not _EMPTY:
            cell.cell_contents = v
    if fdict:
        f.__dict__.update(fdict)
    return f


def _view(root, offset, shape, strides, dtype, writeable):
    a = np.ndarray(shape, dtype, buffer=root, offset=offset, strides=strides)
    if not writeable:
        a.flags.writeable = False
    return a


def _bound_method(obj, name):
    if name.startswith("__") and name.endswith("__"):
        raise pickle.UnpicklingError(f"bound method {name!r}")
    return getattr(obj, name)


def _new_lock():
    return threading.Lock()


def _new_rlock():
    return threading.RLock()


def _new_local():
    return threading.local()


_LOCK_TYPES = (type(threading.Lock()),)
_RLOCK_TYPES = (type(threading.RLock()),)


class _Pickler(pickle.Pickler):
    def __init__(self, f, live, buffer_callback=None):
        super().__init__(f, protocol=_PROTOCOL, buffer_callback=buffer_callback)
        self.live = live                # {id(object): persistent id} (the model and its values)
        self.rebuild = {}               # {id(kernel): node index} of kernels written as "rebuild"

    def persistent_id(self, obj):
        k = self.live.get(id(obj))
        if k is not None:
            return k
        k = self.rebuild.get(id(obj))
        if k is not None:
            return ("rebuild", k)
        return None

    def reducer_override(self, obj):
        t = type(obj)
        if t is types.FunctionType:
            modname = obj.__module__
            try:                        # a module-level function: by reference, as pickle does
                o = sys.modules[modname]
                for part in obj.__qualname__.split("."):
                    o = getattr(o, part)
                if o is obj:
                    return NotImplemented
            except (KeyError, AttributeError):
                pass
            if not _safe_module(modname or ""):
                raise pickle.PicklingError(f"function {obj.__qualname__} of module {modname}")
            key = _code_table(modname)[0].get(obj.__code__)
            if key is None:
                raise pickle.PicklingError(f"no code for {obj.__qualname__} in {modname}")
            cells = obj.__closure__ or ()
            contents = []
            for c in cells:
                try:
                    contents.append(c.cell_contents)
                except ValueError:
                    contents.append(_EMPTY)
            return (_make_function, (modname, key, len(cells)),
                    (obj.__defaults__, obj.__kwdefaults__, tuple(contents), obj.__dict__ or None),
                    None, None, _fill_function)
        if t is np.ndarray and obj.base is not None and obj.size and not obj.dtype.hasobject:
            root, b = obj, obj.base     # a view: of its root array (written once), as it was
            while isinstance(b, np.ndarray):
                root = b
                if id(b) in self.live:
                    break
                b = b.base
            if root is not obj and type(root) is np.ndarray and (id(root) in self.live or root.flags.c_contiguous):
                return (_view, (root, obj.ctypes.data - root.ctypes.data, obj.shape, obj.strides, obj.dtype,
                                obj.flags.writeable))
            return NotImplemented
        if t is types.MethodType:
            return (_bound_method, (obj.__self__, obj.__func__.__name__))
        if t is types.BuiltinMethodType and not isinstance(obj.__self__, (types.ModuleType, type(None))):
            # a C method bound to its object (np.add.reduce, an array's take): pickle writes it as
            # builtins.getattr, which a cache file may not name; the same by _bound_method
            return (_bound_method, (obj.__self__, obj.__name__))
        if t is _EmptyCellType:
            return (_empty_cell, ())
        if isinstance(obj, _LOCK_TYPES):
            return (_new_lock, ())
        if isinstance(obj, _RLOCK_TYPES):
            return (_new_rlock, ())
        if t is threading.local:
            return (_new_local, ())
        return NotImplemented


_EmptyCellType = type(_EMPTY)


def _empty_cell():
    return _EMPTY


_NUMPY_NAMES = frozenset(("_reconstruct", "scalar", "_frombuffer", "dtype", "ndarray", "_ufunc_reconstruct"))
# numpy functions a cache file may not name: file and pickle I/O, memory maps, foreign code
_NUMPY_DENIED = frozenset(("load", "save", "savez", "savez_compressed", "loadtxt", "savetxt", "genfromtxt",
                           "fromfile", "memmap", "fromregex", "DataSource", "open_memmap", "recfromtxt",
                           "recfromcsv", "ctypeslib", "lookfor", "source", "info",
                           "show_config", "show_runtime", "get_include", "set_printoptions", "seterrcall",
                           "setbufsize", "set_string_function", "vectorize", "frompyfunc", "piecewise",
                           "apply_along_axis", "apply_over_axes"))
_NUMPY_DENIED_MODULES = ("numpy.lib.npyio", "numpy.lib._npyio", "numpy.lib.format", "numpy.lib._datasource",
                         "numpy.lib.format", "numpy.ctypeslib", "numpy.f2py", "numpy.testing", "numpy.distutils",
                         "numpy._utils", "numpy.lib._utils", "numpy.lib.utils", "numpy._pytesttester")
_BUILTINS = frozenset(("slice", "frozenset", "set", "complex", "range", "bytearray", "bytes", "tuple", "list",
                       "dict", "int", "float", "bool", "str", "object", "type", "NotImplemented", "Ellipsis"))


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, live, buffers=()):
        super().__init__(f, buffers=buffers)
        self.live = live
        self.rebuild = []

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and pid and pid[0] == "rebuild":
            self.rebuild.append(pid[1])
            return _REBUILD
        try:
            return self.live[pid]
        except (KeyError, TypeError):
            raise pickle.UnpicklingError(f"unknown reference {pid!r}") from None

    def find_class(self, module, name):
        if module == "builtins" and name in _BUILTINS or module == "copyreg" and name == "_reconstructor":
            return super().find_class(module, name)
        if module == "numpy" or module.startswith("numpy."):
            obj = super().find_class(module, name)
            if name in _NUMPY_NAMES or isinstance(obj, (type, np.ufunc)):
                return obj
            if callable(obj) and name not in _NUMPY_DENIED and not any(
                    str(getattr(obj, "__module__", "")).startswith(m) for m in _NUMPY_DENIED_MODULES):
                return obj              # numpy's functions a kernel keeps (np.any, ...), not its I/O
        elif _safe_module(module):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a cache file")


_REBUILD = object.__new__(type("_Rebuild", (), {}))


def dumps(obj, live, rebuild=None, buffers=None):
    """(pickle bytes) of obj; with a list as buffers, arrays' data go there (out of band)."""
    f = io.BytesIO()
    p = _Pickler(f, live, None if buffers is None else buffers.append)
    if rebuild:
        p.rebuild.update(rebuild)
    p.dump(obj)
    return f.getvalue()


def loads(data, live, buffers=()):
    u = _Unpickler(io.BytesIO(data), live, buffers)
    obj = u.load()
    return obj, u.rebuild


# ------------------------------------------------------------------------------ the file
_ALIGN = 64
_PAYLOAD_AT = -(-HEADER_SIZE // _ALIGN) * _ALIGN     # the payload starts 64-byte aligned


def _pad(n):
    return -n % _ALIGN


def entry_name(token):
    return f"nnapi_py-{bytes(token).hex()}.bin"


def pack(key, stream, buffers):
    """The file's bytes as a list of parts: header, padding, payload.  Payload: pickle length
    u64, buffer count u64, (offset, length) u64 pairs, the pickle, then every buffer at a
    64-byte aligned offset (so arrays read back are aligned as numpy's own)."""
    raws = [b.raw() for b in buffers]
    table_len = 16 + 16 * len(raws)
    at = table_len + len(stream)
    offsets = []
    body = [None, stream]
    for r in raws:
        gap = _pad(at)
        if gap:
            body.append(bytes(gap))
        at += gap
        offsets.append((at, r.nbytes))
        body.append(r)
        at += r.nbytes
    body[0] = struct.pack(f"<QQ{2 * len(raws)}Q", len(stream), len(raws), *[x for o in offsets for x in o])
    crc = zlib.crc32(_HEADER.pack(MAGIC, FORMAT, *key, at, 0)[:-4])
    for part in body:
        crc = zlib.crc32(part, crc)
    header = _HEADER.pack(MAGIC, FORMAT, *key, at, crc)
    return [header, bytes(_PAYLOAD_AT - HEADER_SIZE)] + body


class Miss(Exception):
    """Why a cache file was not used: kind ("miss", "stale", "corrupt", "foreign") and reason."""

    def __init__(self, kind, reason):
        super().__init__(f"{kind} ({reason})")
        self.kind, self.reason = kind, reason


_KEY_NAMES = ("a different model", "a different library version", "different devices or options")


def read_entry(f, key):
    """(pickle memoryview, buffer memoryviews) of the FileReader / FdReader f if it is an entry for key, else
    raise Miss.  The whole file is read into one 64-byte aligned buffer (the arrays' memory)."""
    head = f.read(_PAYLOAD_AT)
    if not head:
        raise Miss("miss", "empty file")
    if len(head) < HEADER_SIZE:
        raise Miss("corrupt" if head[:len(MAGIC)] == MAGIC[:len(head)] and head else "foreign",
                   f"{len(head)} bytes, shorter than the header")
    magic, fmt, md, ld, od, length, crc = _HEADER.unpack_from(head)
    if magic != MAGIC:
        raise Miss("foreign", "not a cache file of this library")
    if fmt != FORMAT:
        raise Miss("stale", f"format {fmt}, this library writes {FORMAT}")
    for k, (got, want) in enumerate(zip((md, ld, od), key)):
        if got != want:
            raise Miss("stale", f"written for {_KEY_NAMES[k]}")
    if len(head) == _PAYLOAD_AT and any(head[HEADER_SIZE:]):
        raise Miss("corrupt", "damaged header padding")
    size = f.size()
    if size != _PAYLOAD_AT + length:
        raise Miss("corrupt", f"truncated: {size} bytes, the header says {_PAYLOAD_AT + length}"
                   if size < _PAYLOAD_AT + length else f"{size} bytes, longer than the header says")
    try:
        base = np.empty(length + _ALIGN, np.uint8)
    except MemoryError:
        raise Miss("miss", f"not enough memory to read {length} bytes") from None
    off = -base.ctypes.data % _ALIGN
    buf = base[off:off + length]
    got = f.readinto(memoryview(buf)) if len(head) == _PAYLOAD_AT else 0
    if got != length:
        raise Miss("corrupt", f"truncated: {got} of {length} payload bytes")
    if f.read(1):
        raise Miss("corrupt", "longer than its header says")
    if zlib.crc32(buf, zlib.crc32(head[:HEADER_SIZE - 4])) != crc:
        raise Miss("corrupt", "checksum mismatch")
    mv = memoryview(buf)
    try:
        n_stream, n_buf = struct.unpack_from("<QQ", buf)
        table = struct.unpack_from(f"<{2 * n_buf}Q", buf, 16)
        start = 16 + 16 * n_buf
        if start + n_stream > length or any(table[2 * k] + table[2 * k + 1] > length for k in range(n_buf)):
            raise ValueError("offsets past the payload")
    except (struct.error, ValueError, MemoryError) as e:
        raise Miss("corrupt", f"bad table: {e}") from None
    return mv[start:start + n_stream], [mv[table[2 * k]:table[2 * k] + table[2 * k + 1]] for k in range(n_buf)]


def write_entry(path, parts):
    """Write the parts to a temporary file in path's directory, then os.replace it over path:
    a reader sees the old file or the new one, never a torn one.  Raises OSError."""
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".nnapi_py-", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            for part in parts:
                f.write(part)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_fd(fd, parts):
    """The SL's cache fds: the entry written in place (the client owns the file and its locking)."""
    os.ftruncate(fd, 0)
    at = 0
    for part in parts:
        mv = memoryview(part).cast("B")
        while mv:
            n = os.pwrite(fd, mv, at)
            at += n
            mv = mv[n:]


class FileReader:
    """A file opened for read_entry."""

    def __init__(self, f):
        self.f = f
        self.read, self.readinto = f.read, f.readinto

    def size(self):
        return os.fstat(self.f.fileno()).st_size


class FdReader:
    """read / readinto at increasing offsets of an fd (pread: the fd's own offset is not used)."""

    def __init__(self, fd):
        self.fd, self.at = fd, 0

    def size(self):
        return os.fstat(self.fd).st_size

    def read(self, n):
        out = os.pread(self.fd, n, self.at)
        self.at += len(out)
        return out

    def readinto(self, buf):
        mv = memoryview(buf).cast("B")
        total = 0
        while total < len(mv):
            chunk = os.preadv(self.fd, [mv[total:]], self.at)
            if chunk <= 0:
                break
            total += chunk
            self.at += chunk
        return total


# ------------------------------------------------------------------------------ plans
def _live(model, infos):
    """{persistent id: object} of what a cache file refers to instead of holding: the model, the
    values of its constants (as the plan's infos hold them) and the registry's operations."""
    from .ops import registry
    live = {"model": model}
    for i in range(len(model.types)):
        v = infos[i].value
        if v is not None and (isinstance(v, np.ndarray) or hasattr(v, "life")):
            live[("v", i)] = v
    for code, op in registry.OPS.items():
        live[("op", code)] = op
    return live


def plan_parts(plan, key):
    """The file's parts for plan (raises pickle.PicklingError and the like when it cannot be
    written).  A kernel that cannot be written (an object no reducer knows) is marked to be
    built again when the plan is loaded."""
    live = {id(v): k for k, v in _live(plan.model, plan.infos).items()}
    buffers = []
    try:
        stream = dumps(plan, live, None, buffers)
    except Exception:
        rebuild = {}
        for k, node in enumerate(plan.nodes):
            if node.kernel is not None:
                try:
                    dumps(node.kernel, live)
                except Exception:
                    rebuild[id(node.kernel)] = k
        if not rebuild:
            raise
        buffers = []
        stream = dumps(plan, live, rebuild, buffers)
    return pack(key, stream, buffers)


def plan_from(stream, buffers, model, fp16):
    """The plan a file holds, for model (its constants, operations), kernels marked to be
    rebuilt built now."""
    from .plan import Plan
    from .plan_run import control_step
    infos = [model.info(i, with_value=True) for i in range(len(model.types))]
    try:
        plan, rebuild = loads(stream, _live(model, infos), buffers)
    except Exception as e:          # a reference the file makes that this model has not
        raise Miss("corrupt", f"cannot read the plan: {type(e).__name__}: {e}") from None
    if not isinstance(plan, Plan) or plan.model is not model:
        raise Miss("corrupt", "not a plan of this model")
    plan.fp16 = frozenset(fp16)
    for k in rebuild:
        node = plan.nodes[k]
        if node.op.control:
            node.kernel = control_step(node, plan.infos, dict(plan.shapes))
        else:
            ins = [plan._info_with(plan.infos[i], plan.shapes.get(i)) for i in node.ins]
            node.kernel = plan._prepare(node, ins, plan.infos, dict(plan.shapes))
    if rebuild and plan.steps is not None:
        plan.steps = plan.static_steps()    # (nodes handed on as views have no step)
    return plan
