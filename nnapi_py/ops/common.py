"""Shared checks and helpers of the operation modules.

Operation modules import this module, ``base`` and ``quant`` -- never a sibling operation
module: whatever two operation families share lives here (or in ``padding``, the shared
window/padding geometry).
"""
import numpy as np

from .. import constants as C
from .base import PoolBuffer, resolve_axis, scalar, tname, value_error, MAX_TENSOR_BYTES
from .base import scalar as scalar_of       # a known scalar operand's value (None when unknown)
from . import quant as Q
from .quant import scale_product

F16, F32, I32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32, C.TENSOR_INT32
Q8, Q8S = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED
QPC = C.TENSOR_QUANT8_SYMM_PER_CHANNEL
FLOATS = (F32, F16)
QUANT8 = (Q8, Q8S)
INT32 = C.INT32
# type -> feature level tables shared by the shape and slicing families
LEVELS_FL1 = {F32: 1, Q8: 1, F16: 3, Q8S: 4}                 # RESHAPE (+I32 at 6), CONCATENATION
LEVELS_FL2 = {F32: 2, Q8: 2, F16: 3, Q8S: 4}                 # SQUEEZE, TRANSPOSE, STRIDED_SLICE, PAD
LEVELS_FL3_INT = {F16: 3, F32: 3, I32: 3, Q8: 3, Q8S: 4}     # EXPAND_DIMS, SPLIT, TILE, SLICE
LEVELS_FL3 = {F16: 3, F32: 3, Q8: 3, Q8S: 4}                 # PAD_V2


# ---- the small-tensor path (issue 41) ---------------------------------------------------------
# An operation whose tensors all have at most SMALL elements (shapes known when build() runs:
# at compilation for a static plan, per input-shape signature otherwise) gets its lean kernel
# variant: everything that depends only on constants and shapes is prepared in build()
# (converted constants, requantization multipliers and tables, reshaped views, bound ufuncs),
# and a run makes the fewest numpy calls that give the bits the general variant gives.  At
# these sizes a numpy call's fixed cost (about 1 us) is the whole cost, so the count of calls
# is what a lean variant minimises; the general variants stay for larger tensors, where
# passes over memory matter.  tests/test_small_path.py checks both variants bit for bit.
SMALL = 4096


def n_elements(info):
    """Number of elements of a tensor Info with known dimensions (None when unknown)."""
    d = getattr(info, "dims", None)
    if d is None:
        return None
    n = 1
    for x in d:
        if not x:
            return None if x is None else 0
        n *= int(x)
    return n


def small(*infos):
    """True when every tensor Info given (None entries ignored) has known dimensions and at
    most SMALL elements: the operation takes its lean kernel variant."""
    for inf in infos:
        if inf is None or getattr(inf, "omitted", False):
            continue
        n = n_elements(inf)
        if n is None or n > SMALL:
            return False
    return True


class Reshaped:
    """A kernel's array seen in another shape of the same size, for the small-tensor path (a
    reshape costs about 0.4 us a call, numpy's broadcasting of a [1, 1] or [32] operand against
    [1, 32] about 1 us over a same-shape call): the view of an array given twice in a row is
    kept when views of it may be kept (kept(): a plan temporary or a kernel's own array), so
    later runs on the same array make none; arrays new every call (a dynamic plan, a loop
    body's) cost one id() over the plain view.  `const` (a constant operand's array known at
    build, given only when it is one: never a caller's array) is viewed once; the run passes
    that very array.  Only views are kept: a kept one always shows the array's current
    values (an input that cannot be viewed so is reshaped into a copy each call).  `out`: the
    array is an output, whose view must share its memory (a copy would lose the writes:
    raises).  `dtype`: the view's dtype, of the array's item size (TENSOR_BOOL8 data as uint8
    bytes).  (array, view) is one tuple: threads sharing the kernel read a consistent pair."""
    __slots__ = ("shape", "pair", "out", "dtype", "seen")

    def __init__(self, shape, const=None, out=False, dtype=None):
        self.shape = tuple(shape)
        self.out = out
        self.dtype = dtype
        self.pair = (None, None)
        self.seen = None        # id() of the array of the last call that made a view
        if isinstance(const, np.ndarray):
            self.pair = (const, (const if dtype is None else const.view(dtype)).reshape(self.shape))

    def __call__(self, a):
        p = self.pair
        if p[0] is a:
            return p[1]
        i = id(a)
        if self.seen != i:              # an array not seen last call: its plain reshape
            self.seen = i
            if self.out:
                v = a.view() if self.dtype is None else a.view(self.dtype)
                v.shape = self.shape    # raises rather than copy
                return v
            return (a if self.dtype is None else a.view(self.dtype)).reshape(self.shape)
        v = a.view() if self.dtype is None else a.view(self.dtype)
        try:
            v.shape = self.shape
        except AttributeError:          # not viewable in that shape (a strided input): a copy, not kept
            if self.out:
                raise
            return v.reshape(self.shape)
        if kept(a):
            self.pair = (a, v)
        return v


def region_copy(where, shape):
    """For a small-tensor kernel o[0][...] = i[0][where] (reshaped to `shape` when it is not
    None): (state, miss).  state[0] is (a kept input, its region's view) and the kernel runs

        p = state[0]
        if p[0] is x: o[0][...] = p[1]      (the index and reshape, about 0.5 us, gone)
        else: miss(x, o[0])

    miss makes the plain copy and keeps the view of an input given twice in a row that may be
    kept (kept()): another input costs one id() over the plain copy (a loop body's arrays,
    new each call)."""
    state = [(None, None), None]        # (kept input, its region's view), id() of the last input

    def miss(x, z):
        v = x[where]
        if shape is not None:
            v = v.reshape(shape)        # a copy where the region cannot be viewed so
        z[...] = v
        n = id(x)
        if state[1] != n:
            state[1] = n
        elif kept(x) and v.base is not None and (v.base is x or v.base is x.base):
            state[0] = (x, v)
    return state, miss


def lean_operand(info, shape, const_ok, dtype=None):
    """How the small-tensor path hands an elementwise operand (Info) to a ufunc whose output
    has `shape`: None when it is passed as it is (its shape is the output's, or it is truly
    broadcast), else a Reshaped to the output's shape (the same elements with fewer leading
    1s) or to a 0-d view (one element).  The elements are the ones numpy's broadcasting
    pairs, so results are the same bits.  const_ok: info.value, when set, is a constant
    (a static build: some other operand of the operation has no value).  dtype: the ufunc
    takes the data in that dtype (Reshaped's; then never None)."""
    dims = tuple(info.dims)
    shape = tuple(shape)
    const = info.value if const_ok else None
    if dims == shape:
        return None if dtype is None else Reshaped(dims, const, dtype=dtype)
    n, total = n_elements(info), 1
    for d in shape:
        total *= int(d)
    if n == 1:
        return Reshaped((), const, dtype=dtype)
    if n == total and n:
        return Reshaped(shape, const, dtype=dtype)
    return None if dtype is None else Reshaped(dims, const, dtype=dtype)


class Region(Reshaped):
    """arr[where] of a kernel's array, in `shape` (None: as indexed), kept as Reshaped keeps its
    views: a small tensor's copy is then one numpy assignment (about 0.5 us) instead of an
    index, a reshape and the assignment.  where must select a view (basic indexing); in a
    shape it cannot be viewed in, the region is copied each call (an input's) or raises (an
    output's: `out`)."""
    __slots__ = ("where",)

    def __init__(self, where, shape=None, out=False):
        super().__init__(() if shape is None else shape, out=out)
        self.where = where
        if shape is None:
            self.shape = None

    def __call__(self, a):
        p = self.pair
        if p[0] is a:
            return p[1]
        v = a[self.where]
        if self.shape is not None and v.shape != self.shape:
            try:
                v.shape = self.shape
            except AttributeError:      # an input's strided region: a copy, not kept
                if self.out:
                    raise
                return v.reshape(self.shape)
        i = id(a)
        if self.seen != i:
            self.seen = i
        elif kept(a):
            self.pair = (a, v)
        return v


def kept(a):
    """base.kept_array(a), the usual answers first (a plan temporary, a view of caller memory)
    without making a.flags (about 0.2 us)."""
    b = a.base
    if type(b) is PoolBuffer:
        return True
    return b is None and a.flags.owndata


_CLIP = getattr(getattr(getattr(np, "_core", None), "umath", None), "clip", None)


def float_clamp(fuse, dtype):
    """quant.apply_float_activation(out, fuse) as fn(out), its bounds prepared as 0-d arrays
    of the dtype (a Python number is converted on every call, about 2 us for the clip ufunc's
    two): the same ufunc on the same values, so the same bits.  None for FUSED_NONE."""
    if fuse == C.FUSED_NONE:
        return None
    if np.dtype(dtype) != np.float32 or _CLIP is None:
        def act(out):
            Q.apply_float_activation(out, fuse)
        return act
    lo, hi = {C.FUSED_RELU: (0.0, np.inf), C.FUSED_RELU1: (-1.0, 1.0), C.FUSED_RELU6: (0.0, 6.0)}[fuse]
    lo, hi, clip = np.array(lo, np.float32), np.array(hi, np.float32), _CLIP

    def act(out):
        clip(out, lo, hi, out=out)
    return act


# ---- from the elementwise family


def broadcast_shape(name, a, b, at_runtime=False):
    """NNAPI broadcasting: trailing dims; equal or 1; 0 only with 0 or 1 (gives 0)."""
    try:
        return tuple(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        raise value_error(f"{name}: input shapes {list(a)} and {list(b)} are not broadcast-compatible "
                          f"(trailing dimensions must be equal or 1)", at_runtime) from None


def check_present(sig, n=None):
    """Every input of these operations is required: none may be omitted (NO_VALUE)."""
    sig.all_present(n=n)


def dequant_table(inf):
    """float32 real value of every byte of an 8-bit operand (quant.dequant_table of an Info)."""
    return Q.dequant_table(inf.type, inf.scale, inf.zp)


# ---- from the activation family


def scalar_for(tensor_type):
    """Scalar operand type that goes with a float tensor (FLOAT16 for TENSOR_FLOAT16)."""
    return C.FLOAT16 if tensor_type == F16 else C.FLOAT32


def check_scalar(sig, idx, what, expected, for_type):
    """Required scalar parameter of type `expected` (the one that goes with for_type)."""
    t = sig.ins[idx].type
    if t != expected:
        sig.fail(f"input {idx} ({what}) has type {tname(t)}, expected {tname(expected)} "
                 f"for a {tname(for_type)} input 0")
    sig.present(idx, what)


def same_shape_signature(sig, n_in, levels):
    """n_in inputs (int or allowed counts), one output of input 0's type and shape; input 0's
    type in `levels`, which is returned."""
    sig.count(n_in, 1)
    t = sig.types("input", 0, levels)
    sig.same_type("output", 0, t)
    check_same_shape(sig)
    return t


def check_axis_input(sig, idx, rank_idx=0):
    """An INT32 axis scalar: type, and range [-n, n) when both value and rank are known."""
    sig.types("input", idx, (C.INT32,), "axis")
    a = sig.scalar_value(idx)
    r = sig.ins[rank_idx].rank
    if a is not None and r:
        if not -r <= a < r:
            sig.fail(f"input {idx} (axis) is {a}, must be in [-{r}, {r}) for input {rank_idx} of rank {r}")


def check_same_shape(sig, out_idx=0):
    """Output declared with a rank / specified dimensions that contradict input 0's shape."""
    a, b = sig.ins[0].dims, sig.outs[out_idx].dims
    if a is None or b is None:
        return
    if len(a) != len(b):
        sig.fail(f"output {out_idx} has rank {len(b)}, expected {len(a)} (the shape of input 0)")
    for k, (x, y) in enumerate(zip(a, b)):
        if x and y and x != y:
            sig.fail(f"output {out_idx} dimension {k} is {y}, expected {x} (the shape of input 0)")


def optional_axis(name, ins, idx):
    """The axis given by optional input idx (absent or omitted: -1), resolved for input 0."""
    return resolve_axis(name, int(scalar(ins[idx] if len(ins) > idx else None, -1)), len(ins[0].dims))


def optional_axis_level(sig, n_with_axis, axis_idx, level, default_ranks):
    """Level of an optional trailing axis input: present -> FL3 (its value checked); absent
    with an input rank outside default_ranks (those the operation had before FL3) -> FL3."""
    if len(sig.ins) == n_with_axis:
        if not sig.ins[axis_idx].omitted:
            check_axis_input(sig, axis_idx)
        return max(level, 3)
    if sig.ins[0].rank not in (None,) + tuple(default_ranks):
        return max(level, 3)
    return level


def float_kernel(fn, out_dtype):
    """Kernel for a float op given as fn(x, out): x float32 (a float16 input is converted),
    out a float32 array to fill.  float32 outputs are filled in place; float16 outputs get a
    float32 scratch and are rounded once.  inf/NaN are legitimate values: kernels run with
    numpy's floating-point warnings silenced by the execution (Execution.run, once per
    computation; constant folding likewise), so no np.errstate here (about 1.5 us a call)."""
    if out_dtype == np.float32:
        def k(i, o):
            x = i[0]
            if x.dtype != np.float32:
                x = x.astype(np.float32)
            fn(x, o[0])
    else:
        def k(i, o):
            tmp = np.empty(o[0].shape, np.float32)
            fn(i[0].astype(np.float32), tmp)
            o[0][...] = tmp
    return k


# ---- from the dense family


def check_bias_quant(sig, bias_idx, inp, filt, what="filter"):
    """Bias of a quantized layer: TENSOR_INT32, zeroPoint 0, scale in.scale * filter.scale
    (0 for a per-channel filter)."""
    b = sig.ins[bias_idx]
    if b.type != I32:
        sig.fail(f"input {bias_idx} (bias) has type {tname(b.type)}, expected TENSOR_INT32 "
                 f"for a {tname(inp.type)} input")
    with sig.at_execution():            # Android's prepare checks the bias quantization
        if b.zp != 0:
            sig.fail(f"input {bias_idx} (bias) must have zeroPoint 0, got {b.zp}")
        if filt.type == QPC:
            if b.scale != 0.0:
                sig.fail(f"input {bias_idx} (bias) must have scale 0 with a per-channel quantized {what} "
                         f"(its scales are input scale × {what} scales), got {b.scale}")
            return
        want = scale_product(inp.scale, filt.scale)
        if not abs(b.scale - want) <= 1e-6 * min(b.scale, want):
            sig.fail(f"input {bias_idx} (bias) scale {b.scale} must equal input scale × {what} scale "
                     f"({inp.scale} × {filt.scale} = {want})")


_PIXEL_BYTES = 128      # longest run of values copied as one void item (longer runs: numpy's own
                        # copy loop is as fast, 16x16x48 and 24x24x64 channel slices faster)


def _pixel_items(a, ok):
    """a's last axis as one void item per position, when it is contiguous, short and not the
    whole array's contiguous run (ok: the caller's other conditions); else None."""
    if not ok or a.ndim == 0 or a.shape[-1] < 2 or a.strides[-1] != a.itemsize \
            or a.shape[-1] * a.itemsize > _PIXEL_BYTES or a.flags.c_contiguous:
        return None
    return a.view(np.dtype((np.void, a.shape[-1] * a.itemsize)))


def copy_pixels(dst, src):
    """dst[...] = src for two arrays of one dtype and shape: where the last axis (channels)
    is a short contiguous run inside a strided array (a padded or phase-split interior, a
    channel slice), it is copied as one void item per position, so numpy's copy loop steps
    once per pixel instead of once per run of values (2x faster for 8-32 float channels)."""
    if dst.ndim and 2 <= dst.shape[-1] and dst.shape[-1] * dst.itemsize <= _PIXEL_BYTES:
        v = _pixel_items(dst, dst.dtype == src.dtype and dst.shape == src.shape
                         and src.strides[-1] == src.itemsize)
        if v is not None:
            v[...] = src.view(v.dtype)
            return
    dst[...] = src


_FILLS = {}             # (dtype, run length, value bytes) -> the void item of that run
_FILL_ITEMS = 2048      # fewer positions: numpy's own fill is as fast (16x16 pixels: 1.1 us)


def fill_pixels(dst, value):
    """dst[...] = value, as copy_pixels does for a strided channel slice of at least
    _FILL_ITEMS positions (96x96 pixels, 16 channels: 36 -> 27 us); the void item of a run of
    value is made once."""
    v = _pixel_items(dst, dst.size >= _FILL_ITEMS * dst.shape[-1] if dst.ndim else False)
    if v is None:
        dst[...] = value
        return
    val = np.asarray(value, dst.dtype)
    key = (dst.dtype.str, dst.shape[-1], val.tobytes())
    item = _FILLS.get(key)
    if item is None:
        if len(_FILLS) > 256:
            _FILLS.clear()
        item = _FILLS[key] = np.full(dst.shape[-1], val, dst.dtype).view(v.dtype)[0]
    v[...] = item


def row_repeats(n, total, want=8192):
    """Repeats of a row of n values along an array of total values (total % n == 0) so that
    rows have at least `want` values: numpy adds or multiplies a shorter broadcast row at up
    to twice the cost (96 rows of 1536: 33 -> 19 us; mediapipe face_landmark's 96x96x16
    PRELU 75 -> 65 us).  The smallest such divisor of total // n, at most 4 * want / n;
    else 1."""
    if n >= want or total % n or total < 8 * want:     # small arrays: no measurable gain
        return 1
    m = total // n
    need = -(-want // n)
    for r in range(need, min(m, 4 * need) + 1):
        if m % r == 0:
            return r
    return 1


class Derived:
    """fn(array) computed once from a constant operand, per call from a non-constant one.

    At build time ``Info.value`` is set for constants; in the dynamic path the runtime also
    passes the current input arrays as values, so the result is only reused when the kernel
    receives the very same array object again (constants are the same object every run)."""
    __slots__ = ("src", "val", "fn")

    def __init__(self, value, fn):
        self.fn = fn
        self.src = value
        self.val = None if value is None else fn(value)

    def get(self, a):
        if a is self.src and self.val is not None:
            return self.val
        return self.fn(a)


class Scratch:
    """Work buffers a kernel keeps from run to run.

    A large temporary made afresh each run comes from a new mmap and costs a page fault per
    4 KiB on first touch (about 3 ms per MobileNet inference); a kernel instead takes a set of
    buffers at the start of a run (``take``) and gives it back at the end (``give``).
    Concurrent runs of one kernel (one compilation executed from several threads) take
    different sets, so no buffer is ever shared between two runs.  A buffer made with
    ``zero=True`` is zero-filled once, when it is made: callers that write only its interior
    (padded inputs) keep the zero border without clearing it again."""
    __slots__ = ("_free",)

    def __init__(self):
        self._free = []

    def take(self):
        try:
            return self._free.pop()
        except IndexError:
            return _Buffers()

    def give(self, bufs):
        if len(self._free) < 8:
            self._free.append(bufs)


class _Buffers(dict):
    __slots__ = ()

    def array(self, key, shape, dtype, zero=False, init=None):
        """The buffer `key` of this shape and dtype; init(a) runs once, when it is made."""
        a = dict.get(self, key)
        if a is None or a.shape != shape or a.dtype != dtype:
            n = np.dtype(dtype).itemsize
            for d in shape:
                n *= int(d)
            if n > MAX_TENSOR_BYTES:     # e.g. an input padded by parameters of 2^31 - 1
                raise MemoryError(f"a working buffer of shape {list(shape)} needs {n} bytes, more than one "
                                  f"tensor may take ({MAX_TENSOR_BYTES} bytes, NNAPI_PY_MAX_TENSOR_BYTES)")
            a = np.zeros(shape, dtype) if zero else np.empty(shape, dtype)
            if init is not None:
                init(a)
            self[key] = a
        return a


# ---- from the spatial family


def check_scalar_type(sig, idx, t, what):
    """Input idx (role what) has scalar type t."""
    sig.types("input", idx, (t,), what)


def check_rank4(sig, where, idx):
    """A 4-D tensor (when its rank is known)."""
    sig.rank_between(where, idx, 4, 4)


def check_layout(sig, idx, level):
    """Optional/required trailing NCHW BOOL at input idx; returns the level it needs."""
    check_scalar_type(sig, idx, C.BOOL, "NCHW layout flag")
    return max(level, 3)


def nchw_flag(ins, idx):
    """Value of the NCHW flag at ins[idx] (False when absent or omitted)."""
    if idx >= len(ins) or ins[idx].omitted:
        return False
    v = scalar_of(ins[idx])
    return bool(v) if v is not None else False


def zero_sized_const_level(sig, level):
    """A constant zero-sized tensor operand needs FL3."""
    for i in sig.ins:
        if i.value is not None and i.dims and 0 in tuple(np.shape(i.value)) and i.type in C.TENSOR_TYPES:
            return max(level, 3)
    return level


def reject_zero_sized(name, info, what="input 0"):
    """Operations the reference does not allow zero-sized inputs for."""
    if info.dims is not None and 0 in info.dims:
        raise value_error(f"{name}: {what} has a zero-sized dimension {list(info.dims)}, "
                          f"which this operation does not support", at_runtime=False)


def nhwc_kernel(core, nchw):
    """Kernel running core(x, y) on NHWC arrays: an NCHW input and output are passed as
    transposed views (no copy)."""
    def kernel(i, o):
        x, y = i[0], o[0]
        if nchw:
            x, y = x.transpose(0, 2, 3, 1), y.transpose(0, 2, 3, 1)
        core(x, y)
    return kernel


# ---- from the shape family


def tensor_of(sig, idx, levels, what):
    """Input idx must be present and have one of the types of `levels` (type -> feature level)."""
    sig.present(idx, what)
    return sig.types("input", idx, levels, what)


def require_scalar(sig, idx, t, what):
    """Input idx must be present and have the scalar type t."""
    sig.present(idx, what)
    sig.types("input", idx, (t,), what)


def int_tensor(sig, idx, what, rank=1, optional=False):
    """Input idx must be a TENSOR_INT32 of the given rank (when the rank is known; rank None:
    any)."""
    if not optional:
        sig.present(idx, what)
    inf = sig.ins[idx]
    sig.types("input", idx, (I32,), what)
    if rank is not None and inf.rank is not None and inf.rank != rank:
        sig.fail(f"input {idx} ({what}) must be a {rank}-D tensor, got rank {inf.rank}")
    return inf


def scalar_int(inf):
    """Python int of a known INT32 scalar operand, else None."""
    v = scalar(inf)
    return None if v is None else int(v)


def int_values(inf):
    """List of Python ints of a known TENSOR_INT32 operand, else None."""
    if inf.value is None or inf.omitted:
        return None
    return [int(x) for x in np.asarray(inf.value).reshape(-1)]


def known_len(inf):
    """Length of a 1-D operand when known (dims known), else None."""
    if inf.dims is None or len(inf.dims) != 1 or not inf.dims[0]:
        return None
    return inf.dims[0]


def fail_value(op, msg):
    """Value-dependent error raised from infer()."""
    return value_error(f"{op}: {msg}", at_runtime=False)


# ---- from the reduce family


def require_present(name, ins, what):
    """The same at execution: an input given as NULL (omitted) is an error."""
    for k, inf in enumerate(ins):
        if inf.omitted:
            raise value_error(f"{name}: input {k} ({what[k]}) was omitted; it is not optional", at_runtime=True)


# ---- from the bidirectional sequence operations (lstm, rnn)


def check_merge_outputs(name, merge_input, merge, n_outs, n_states):
    """merge_outputs given as a model input: one output sequence (merged) or two, each count optionally
    followed by the n_states state outputs."""
    n = 1 if merge else 2
    if n_outs not in (n, n + n_states):
        raise value_error(f"{name}: {merge_input} is {'true' if merge else 'false'}, which needs "
                          f"{n} or {n + n_states} outputs; the operation has {n_outs}", at_runtime=True)


def product_for(mat, rows):
    """np.dot where it gives np.matmul's bits for [rows, K] @ mat (both reach the same BLAS
    routine for these shapes: checked here on random rows, since a routine taken the other way
    round would sum in another order), else np.matmul.  np.dot's call costs about 1-1.4 us less
    (1x16 @ 16x16: 2.4 -> 1.4 us; 4x65 @ 65x128: 3.5 -> 2.2 us).  Shared by the small float
    FULLY_CONNECTED and the lean float convolutions."""
    rng = np.random.default_rng(mat.shape[0])
    for _ in range(2):
        x = rng.standard_normal((rows, mat.shape[0])).astype(np.float32)
        a, b = np.empty((rows, mat.shape[1]), np.float32), np.empty((rows, mat.shape[1]), np.float32)
        np.matmul(x, mat, out=a)
        np.dot(x, mat, out=b)
        if a.tobytes() != b.tobytes():
            return np.matmul
    return np.dot
