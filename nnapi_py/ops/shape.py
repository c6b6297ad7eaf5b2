"""Shape and data-movement operations: RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE,
CONCATENATION, SPLIT, PACK, TILE, REVERSE, FILL, RANK.

None of these computes anything (except CONCATENATION of quant8 inputs whose scale or
zeroPoint differ from the output's, which requantizes): every kernel writes its output
with a single copy (slice assignment / np.copyto / a broadcast view), never a Python loop
over elements.

The validation helpers at the top are shared with slicing.py (SLICE, STRIDED_SLICE, PAD,
PAD_V2, MIRROR_PAD).  Value-dependent rules are checked in ``infer`` (raising
value_error: BAD_DATA at compilation when the values are constants, OP_FAILED at
execution otherwise); scalar parameters whose range only depends on the rank are also
checked in ``validate`` when the constant is known (at Model_finish).
"""
import numpy as np

from .. import constants as C
from .base import Op, register, tname
from .quant import ByteLookup, affine_requant_table
from .common import tensor_of, require_scalar, int_tensor, scalar_int, int_values, known_len, fail_value  # noqa: F401
from .base import PoolBuffer
from .common import n_elements, small

from .common import F16, F32, I32, Q8, Q8S, QUANT8, INT32, LEVELS_FL1, LEVELS_FL2, LEVELS_FL3_INT, LEVELS_FL3  # noqa: E402,F401


# ---- validation helpers --------------------------------------------------------------------
def axis_slice(axis, sl):
    """Index tuple selecting `sl` along `axis` and everything along the other axes."""
    return (slice(None),) * axis + (sl,)


def view_as(arr, shape):
    """A view of `arr` with a new shape (raises instead of silently copying)."""
    return np.reshape(arr, shape, copy=False)


class _Reshaping(Op):
    """RESHAPE, SQUEEZE, EXPAND_DIMS: the data unchanged, in the output's (inferred) shape."""

    def view_of(self, ins, outs):
        return [()]                     # all of input 0

    def build(self, ins, outs):
        shape = outs[0].dims

        return reshaped_copy(ins[0].dims, shape)


def reshaped_copy(in_dims, out_dims):
    """The kernel copying input 0 into output 0 of another shape, the same data in the same
    order: one assignment of the input's reshape (a view kept across runs saves under 0.2 us
    and costs 0.5 us where the arrays are new each call, a loop body's)."""
    def kernel(i, o):
        o[0][...] = i[0].reshape(out_dims)
    return kernel


# ---- RESHAPE -------------------------------------------------------------------------------
@register
class Reshape(_Reshaping):
    name = "RESHAPE"
    value_inputs = (1,)
    levels = {F32: 1, Q8: 1, F16: 3, Q8S: 4, I32: 6}

    def validate(self, sig):
        sig.count(2, 1)
        t = tensor_of(sig, 0, self.levels, "tensor")
        shp = int_tensor(sig, 1, "shape")
        sig.rank_between("input", 0, 1, 4)
        sig.like("output", 0, sig.ins[0])
        n = known_len(shp)
        orank = sig.outs[0].rank
        if n is not None and orank is not None and orank != n:
            sig.fail(f"output 0 has rank {orank} but the shape tensor (input 1) has {n} elements")
        vals = int_values(shp)
        if vals is not None:
            self._check_spec(vals, sig.fail)
        return self.levels[t]

    @staticmethod
    def _check_spec(vals, fail):
        if len(vals) == 0:
            fail("input 1 (shape) must have at least one element")
        if sum(1 for v in vals if v == -1) > 1:
            fail(f"input 1 (shape) {vals} has more than one -1 component")
        bad = [v for v in vals if v < -1]
        if bad:
            fail(f"input 1 (shape) {vals} has a negative component other than -1")

    def infer(self, ins):
        vals = int_values(ins[1])

        def fail(msg):
            raise fail_value(self.name, msg)

        self._check_spec(vals, fail)
        total = int(np.prod(ins[0].dims, dtype=np.int64))
        known = int(np.prod([v for v in vals if v != -1], dtype=np.int64))
        if -1 in vals:
            if known == 0:
                fail(f"input 1 (shape) {vals}: the -1 component cannot be inferred when another "
                     f"component is 0")
            if total % known:
                fail(f"input 1 (shape) {vals} is incompatible with the {total} elements of input 0 "
                     f"{list(ins[0].dims)}")
            vals = [total // known if v == -1 else v for v in vals]
        elif known != total:
            fail(f"input 1 (shape) {vals} has {known} elements but input 0 {list(ins[0].dims)} has {total}")
        return [tuple(vals)]


# ---- SQUEEZE -------------------------------------------------------------------------------
@register
class Squeeze(_Reshaping):
    name = "SQUEEZE"
    optional_inputs = (1,)
    value_inputs = (1,)
    levels = LEVELS_FL2

    def validate(self, sig):
        sig.count(2, 1)
        t = tensor_of(sig, 0, self.levels, "tensor")
        int_tensor(sig, 1, "axes", optional=True)
        sig.rank_between("input", 0, 1, 4)
        sig.like("output", 0, sig.ins[0])
        axes = int_values(sig.ins[1])
        r = sig.ins[0].rank
        if axes is not None and r is not None:
            for a in axes:
                if not -r <= a < r:
                    sig.fail(f"input 1 (axes) value {a} is out of range [{-r}, {r}) for rank {r}")
        return self.levels[t]

    def infer(self, ins):
        dims = ins[0].dims
        r = len(dims)
        axes = None if ins[1].omitted or ins[1].value is None else int_values(ins[1])
        if not axes:          # omitted or empty: squeeze every dimension of size 1
            drop = {k for k, d in enumerate(dims) if d == 1}
        else:
            drop = set()
            for a in axes:
                if not -r <= a < r:
                    raise fail_value(self.name, f"input 1 (axes) value {a} is out of range [{-r}, {r}) "
                                                f"for rank {r}")
                a = a + r if a < 0 else a
                if dims[a] != 1:
                    raise fail_value(self.name, f"cannot squeeze dimension {a} of input 0 {list(dims)}: "
                                                f"its size is {dims[a]}, not 1")
                drop.add(a)
        out = tuple(d for k, d in enumerate(dims) if k not in drop)
        return [out if out else (1,)]


# ---- EXPAND_DIMS ---------------------------------------------------------------------------
@register
class ExpandDims(_Reshaping):
    name = "EXPAND_DIMS"
    levels = LEVELS_FL3_INT

    def validate(self, sig):
        sig.count(2, 1)
        t = tensor_of(sig, 0, self.levels, "tensor")
        require_scalar(sig, 1, INT32, "axis")
        sig.rank_between("input", 0, 1)
        sig.like("output", 0, sig.ins[0])
        r = sig.ins[0].rank
        orank = sig.outs[0].rank
        if r is not None and orank is not None and orank != r + 1:
            sig.fail(f"output 0 has rank {orank}, expected {r + 1} (rank of input 0 plus one)")
        axis = scalar_int(sig.ins[1])
        if axis is not None and r is not None and not -(r + 1) <= axis < r + 1:
            sig.fail(f"input 1 (axis) {axis} is out of range [{-(r + 1)}, {r + 1})")
        return self.levels[t]

    def infer(self, ins):
        dims = ins[0].dims
        r = len(dims)
        axis = scalar_int(ins[1])
        if not -(r + 1) <= axis < r + 1:
            raise fail_value(self.name, f"input 1 (axis) {axis} is out of range [{-(r + 1)}, {r + 1})")
        if axis < 0:
            axis += r + 1
        return [tuple(dims[:axis]) + (1,) + tuple(dims[axis:])]


# ---- TRANSPOSE -----------------------------------------------------------------------------
@register
class Transpose(Op):
    name = "TRANSPOSE"
    optional_inputs = (1,)
    value_inputs = (1,)
    allow_zero_sized = True
    levels = LEVELS_FL2

    def validate(self, sig):
        sig.count(2, 1)
        t = tensor_of(sig, 0, self.levels, "tensor")
        perm = int_tensor(sig, 1, "perm", optional=True)
        sig.rank_between("input", 0, 1, 4)
        sig.like("output", 0, sig.ins[0])
        r = sig.ins[0].rank
        orank = sig.outs[0].rank
        if r is not None and orank is not None and orank != r:
            sig.fail(f"output 0 has rank {orank}, expected {r} (the rank of input 0)")
        if not perm.omitted:
            with sig.at_execution():        # Android's prepare checks perm against the input
                n = known_len(perm)
                if n is not None and r is not None and n != r:
                    sig.fail(f"input 1 (perm) has {n} elements, expected {r} (the rank of input 0)")
                vals = int_values(perm)
                if vals is not None and r is not None and len(vals) == r and sorted(vals) != list(range(r)):
                    sig.fail(f"input 1 (perm) {vals} is not a permutation of 0..{r - 1}")
        return self.levels[t]

    def _perm(self, ins):
        r = len(ins[0].dims)
        if ins[1].omitted or ins[1].value is None:
            return tuple(range(r - 1, -1, -1))
        vals = int_values(ins[1])
        if len(vals) != r:
            raise fail_value(self.name, f"input 1 (perm) has {len(vals)} elements, expected {r} "
                                        f"(the rank of input 0)")
        if sorted(vals) != list(range(r)):
            raise fail_value(self.name, f"input 1 (perm) {vals} is not a permutation of 0..{r - 1}")
        return tuple(vals)

    def infer(self, ins):
        dims = ins[0].dims
        return [tuple(dims[p] for p in self._perm(ins))]

    def build(self, ins, outs):
        perm = self._perm(ins)
        if small(ins[0], outs[0]) and n_elements(outs[0]):
            dims = ins[0].dims
            moved = [p for p in perm if dims[p] != 1]
            if moved == sorted(moved):      # only axes of length 1 move: the data's order stays
                return reshaped_copy(dims, outs[0].dims)

            def kernel(i, o):
                o[0][...] = i[0].transpose(perm)
            return kernel

        def kernel(i, o):
            np.copyto(o[0], i[0].transpose(perm))
        return kernel


# ---- CONCATENATION -------------------------------------------------------------------------
@register
class Concatenation(Op):
    name = "CONCATENATION"
    max_inputs = None
    allow_zero_sized = True
    levels = LEVELS_FL1

    def validate(self, sig):
        n = len(sig.ins)
        if n < 2:
            sig.fail(f"expected at least 2 inputs (one or more tensors, then the axis), got {n}")
        if len(sig.outs) != 1:
            sig.fail(f"expected 1 output, got {len(sig.outs)}")
        t = tensor_of(sig, 0, self.levels, "tensor 0")
        for k in range(1, n - 1):
            sig.present(k, f"tensor {k}")
            if sig.ins[k].type != t:
                sig.fail(f"input {k} has type {tname(sig.ins[k].type)}, expected {tname(t)} "
                         f"(all input tensors must have the type of input 0)")
        require_scalar(sig, n - 1, INT32, "axis")
        out = sig.outs[0]
        sig.same_type("output", 0, t)
        rank = None
        for k in range(n - 1):
            sig.rank_between("input", k, 1, 4)
            r = sig.ins[k].rank
            if r is not None:
                if rank is not None and r != rank:
                    sig.fail(f"input {k} has rank {r} but input 0 has rank {rank} (all input tensors must "
                             f"have the same rank)")
                rank = r
        sig.rank_between("output", 0, 1, 4)
        if rank is not None and out.rank is not None and out.rank != rank:
            sig.fail(f"output 0 has rank {out.rank}, expected {rank} (the rank of the inputs)")
        level = self.levels[t]
        if t == Q8 and any(x.scale != out.scale or x.zp != out.zp for x in sig.ins[:-1]):
            level = max(level, 3)    # requantizing concatenation appeared in FL3
        axis = scalar_int(sig.ins[n - 1])
        if axis is not None and rank is not None:
            if not -rank <= axis < rank:
                sig.fail(f"input {n - 1} (axis) {axis} is out of range [{-rank}, {rank})")
            a = axis + rank if axis < 0 else axis
            ref = None
            for k in range(n - 1):
                d = sig.ins[k].dims
                if d is None:
                    continue
                if ref is None:
                    ref = (k, d)
                    continue
                for j in range(rank):
                    if j != a and d[j] and ref[1][j] and d[j] != ref[1][j]:
                        sig.fail(f"input {k} dimension {j} is {d[j]} but input {ref[0]} has {ref[1][j]} "
                                 f"(only the axis {a} may differ)")
        return level

    def _axis(self, ins):
        rank = len(ins[0].dims)
        axis = scalar_int(ins[-1])
        if not -rank <= axis < rank:
            raise fail_value(self.name, f"input {len(ins) - 1} (axis) {axis} is out of range [{-rank}, {rank})")
        return axis + rank if axis < 0 else axis

    def infer(self, ins):
        a = self._axis(ins)
        first = ins[0].dims
        total = 0
        for k, x in enumerate(ins[:-1]):
            d = x.dims
            if len(d) != len(first):
                raise fail_value(self.name, f"input {k} has rank {len(d)} but input 0 has rank {len(first)}")
            for j in range(len(d)):
                if j != a and d[j] != first[j]:
                    raise fail_value(self.name, f"input {k} {list(d)} and input 0 {list(first)} differ in "
                                                f"dimension {j} (only the axis {a} may differ)")
            total += d[a]
        return [tuple(first[:a]) + (total,) + tuple(first[a + 1:])]

    def build(self, ins, outs):
        a = self._axis(ins)
        out = outs[0]
        tensors = ins[:-1]
        if out.type not in QUANT8 or all(x.scale == out.scale and x.zp == out.zp for x in tensors):
            def kernel(i, o):
                np.concatenate(i[:-1], axis=a, out=o[0])
            if small(*tensors, out) and n_elements(out):
                return _lean_concatenation(tensors, a, kernel)
            return kernel
        # requantize (the reference's float32 multiplier and bias, quant.affine_requant_table):
        # only 256 input values exist, so each input gets a lookup table built once here,
        # indexed by the raw byte
        steps = []
        start = 0
        for x in tensors:
            stop = start + x.dims[a]
            where = axis_slice(a, slice(start, stop))
            if x.scale == out.scale and x.zp == out.zp:
                steps.append((where, None))
            else:
                steps.append((where, ByteLookup(affine_requant_table(out.dtype, x.scale, x.zp, out.scale, out.zp))))
            start = stop

        def kernel(i, o):
            dst = o[0]
            for x, (where, look) in zip(i[:-1], steps):
                if look is None:
                    dst[where] = x
                    continue
                look(x, dst[where])         # byte pairs where the block is contiguous (axis 0, or batch 1 along axis 1)
        return kernel


KEEP_ROOT_MAX = 1 << 16     # _lean_concatenation: largest buffer of a caller's array it keeps alive


def _root_nbytes(a):
    """Bytes a keeps alive: 0 for a plan temporary, else the size of the buffer a views at its
    root (its own data, a cffi buffer's, bytes'...); unknown roots count as too large."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    root = a.base
    if root is None:
        return a.nbytes
    if type(root) is PoolBuffer:
        return 0
    try:
        return memoryview(root).nbytes
    except TypeError:
        return KEEP_ROOT_MAX + 1


def _lean_concatenation(tensors, a, general):
    """CONCATENATION of small tensors.  One non-empty input: a copy.  Where each input is one
    run of the output's bytes (the dimensions before the axis are 1) and the output is a plan
    temporary met again among the last two missed (a loop body's output alternates between two
    arrays), the memoryviews of its runs are kept (the last two learnt) and a
    run is one memoryview slice assignment per input (about 0.15 us each, against
    np.concatenate's 1.3-1.6), from the input's bytes: each input's place keeps the memoryviews
    of the last two arrays learnt there, an array met again among the last two missed there
    (their id()s: a plan's temporary, or a streaming model's state input, which alternates
    between two arrays); another array's memoryview is made then (about 0.55 us: a view of a
    model input made again each run).  Otherwise the general kernel.  At most 8 misses learn
    at each place and for the output (arrays new each call stop there).  The output is kept
    only where it is a plan temporary (no input's memory overlaps it), an input only where it
    is one too or views a buffer of at most KEEP_ROOT_MAX bytes (a caller's large array is not
    kept alive).  Kept arrays are live, so an identity test is with an array whose memory is
    the call's."""
    nonempty = [k for k, x in enumerate(tensors) if x.dims[a]]
    if len(nonempty) == 1:
        k0 = nonempty[0]

        def kernel(i, o):
            o[0][...] = i[k0]
        return kernel
    if not all(d == 1 for d in tensors[0].dims[:a]):
        return general
    runs, start = [], 0
    for k in nonempty:
        n = n_elements(tensors[k]) * tensors[k].dtype.itemsize
        runs.append((k, start, start + n))
        start += n
    ks = tuple(k for k, _, _ in runs)
    concatenate = np.concatenate
    cast_errors = (TypeError, ValueError, NotImplementedError)
    # the two outputs learnt last (output, (its runs' bytes...)), the learns left, the id()s of
    # the last two outputs missed
    state = [(None, None), (None, None), 8, None, None]
    # each input's place: [(array, its bytes), (array, its bytes) (the two learnt last: each a
    # tuple, read whole by a concurrent call), the id()s of the last two arrays missed, the
    # learns left]
    places = [[(None, None), (None, None), None, None, 8] for _ in ks]

    def miss(s, x):
        """(x, its bytes), made now; learnt at place s where x is one of the last two missed
        there."""
        e = (x, x.data.cast("B"))
        if s[4]:
            s[4] -= 1
            j = id(x)
            if j != s[2] and j != s[3]:
                s[2], s[3] = j, s[2]
            elif _root_nbytes(x) <= KEEP_ROOT_MAX:
                s[0], s[1] = e, s[0]
        return e

    def learn(z):
        """After a general run: the output's runs where it is one of the last two missed."""
        state[2] -= 1
        j = id(z)
        if j != state[3] and j != state[4]:
            state[3], state[4] = j, state[3]
        elif type(z.base) is PoolBuffer:
            try:
                out = z.data.cast("B")
                state[0], state[1] = (z, tuple(out[lo:hi] for _, lo, hi in runs)), state[0]
            except cast_errors:         # not C-contiguous
                state[2] = 0

    if len(ks) == 2:
        k0, k1 = ks
        p0, p1 = places

        def kernel(i, o):
            z = o[0]
            c = state[0]
            if c[0] is not z:
                c = state[1]
            if c[0] is z:
                x0, x1 = i[k0], i[k1]
                try:
                    e0 = p0[0]
                    if e0[0] is not x0:
                        e0 = p0[1]
                        if e0[0] is not x0:
                            e0 = miss(p0, x0)
                    e1 = p1[0]
                    if e1[0] is not x1:
                        e1 = p1[1]
                        if e1[0] is not x1:
                            e1 = miss(p1, x1)
                    d0, d1 = c[1]
                    d0[:] = e0[1]
                    d1[:] = e1[1]
                    return
                except cast_errors:
                    pass
            concatenate(i[:-1], axis=a, out=z)      # the general kernel (not called: 0.3 us)
            if state[2]:
                learn(z)
        return kernel

    def kernel(i, o):
        z = o[0]
        c = state[0]
        if c[0] is not z:
            c = state[1]
        if c[0] is z:
            try:
                for d, s, k in zip(c[1], places, ks):
                    x = i[k]
                    e = s[0]
                    if e[0] is not x:
                        e = s[1]
                        if e[0] is not x:
                            e = miss(s, x)
                    d[:] = e[1]
                return
            except cast_errors:
                pass
        general(i, o)
        if state[2]:
            learn(z)
    return kernel


# ---- SPLIT ---------------------------------------------------------------------------------
@register
class Split(Op):
    name = "SPLIT"
    max_outputs = None
    levels = LEVELS_FL3_INT

    def validate(self, sig):
        if len(sig.ins) != 3:
            sig.fail(f"expected 3 inputs, got {len(sig.ins)}")
        if len(sig.outs) < 1:
            sig.fail("expected at least 1 output (one per split)")
        t = tensor_of(sig, 0, self.levels, "tensor")
        require_scalar(sig, 1, INT32, "axis")
        require_scalar(sig, 2, INT32, "num_splits")
        sig.rank_between("input", 0, 1)
        r = sig.ins[0].rank
        for k in range(len(sig.outs)):
            sig.like("output", k, sig.ins[0])
            o = sig.outs[k].rank
            if r is not None and o is not None and o != r:
                sig.fail(f"output {k} has rank {o}, expected {r} (the rank of input 0)")
        axis = scalar_int(sig.ins[1])
        if axis is not None and r is not None and not -r <= axis < r:
            sig.fail(f"input 1 (axis) {axis} is out of range [{-r}, {r})")
        num = scalar_int(sig.ins[2])
        if num is not None:
            if num < 1:
                sig.fail(f"input 2 (num_splits) must be positive, got {num}")
            if num != len(sig.outs):
                sig.fail(f"input 2 (num_splits) is {num} but the operation has {len(sig.outs)} outputs")
        return self.levels[t]

    def _params(self, ins):
        dims = ins[0].dims
        r = len(dims)
        axis = scalar_int(ins[1])
        num = scalar_int(ins[2])
        if not -r <= axis < r:
            raise fail_value(self.name, f"input 1 (axis) {axis} is out of range [{-r}, {r})")
        if axis < 0:
            axis += r
        if num < 1:
            raise fail_value(self.name, f"input 2 (num_splits) must be positive, got {num}")
        if dims[axis] % num:
            raise fail_value(self.name, f"input 2 (num_splits) {num} does not evenly divide dimension "
                                        f"{axis} of input 0 {list(dims)}")
        return axis, num

    def infer(self, ins):
        axis, num = self._params(ins)
        d = list(ins[0].dims)
        d[axis] //= num
        return [tuple(d)] * num

    def view_of(self, ins, outs):
        axis, num = self._params(ins)
        size = ins[0].dims[axis] // num
        return [axis_slice(axis, slice(k * size, (k + 1) * size)) for k in range(num)]

    def build(self, ins, outs):
        where = self.view_of(ins, outs)

        def kernel(i, o):
            x = i[0]
            for dst, w in zip(o, where):
                dst[...] = x[w]
        return kernel


# ---- PACK ----------------------------------------------------------------------------------
@register
class Pack(Op):
    name = "PACK"
    validates_outputs = True     # its Android validate() checks the output rank and quantization
    levels = {F16: 6, F32: 6, Q8: 6, Q8S: 6, I32: 6}

    def validate(self, sig):
        n = len(sig.ins)
        if n < 2:
            sig.fail(f"expected at least 2 inputs (the axis, then one or more tensors), got {n}")
        if len(sig.outs) != 1:
            sig.fail(f"expected 1 output, got {len(sig.outs)}")
        require_scalar(sig, 0, INT32, "axis")
        t = tensor_of(sig, 1, self.levels, "tensor 1")
        first = sig.ins[1]
        for k in range(1, n):
            sig.present(k, f"tensor {k}")
            x = sig.ins[k]
            if x.type != t:
                sig.fail(f"input {k} has type {tname(x.type)}, expected {tname(t)} "
                         f"(all input tensors must have the type of input 1)")
            sig.same_quant("input", k, first, "input 1")
            sig.rank_between("input", k, 1)
            if x.rank is not None and first.rank is not None and x.rank != first.rank:
                sig.fail(f"input {k} has rank {x.rank} but input 1 has rank {first.rank}")
            if x.dims is not None and first.dims is not None:
                for j, (a, b) in enumerate(zip(x.dims, first.dims)):
                    if a and b and a != b:
                        sig.fail(f"input {k} dimension {j} is {a} but input 1 has {b} "
                                 f"(all input tensors must have the same shape)")
        sig.like("output", 0, first, ref="input 1")
        r = first.rank
        orank = sig.outs[0].rank
        if r is not None and orank is not None and orank != r + 1:
            sig.fail(f"output 0 has rank {orank}, expected {r + 1} (the rank of the inputs plus one)")
        axis = scalar_int(sig.ins[0])
        if axis is not None and r is not None and not 0 <= axis < r + 1:
            sig.fail(f"input 0 (axis) {axis} is out of range [0, {r + 1})")
        return 6

    def _axis(self, ins):
        r = len(ins[1].dims)
        axis = scalar_int(ins[0])
        if not 0 <= axis < r + 1:
            raise fail_value(self.name, f"input 0 (axis) {axis} is out of range [0, {r + 1})")
        return axis

    def infer(self, ins):
        axis = self._axis(ins)
        first = tuple(ins[1].dims)
        for k in range(2, len(ins)):
            if tuple(ins[k].dims) != first:
                raise fail_value(self.name, f"input {k} {list(ins[k].dims)} and input 1 {list(first)} differ "
                                            f"(all input tensors must have the same shape)")
        return [first[:axis] + (len(ins) - 1,) + first[axis:]]

    def build(self, ins, outs):
        axis = self._axis(ins)

        def kernel(i, o):
            np.stack(i[1:], axis=axis, out=o[0])
        return kernel


# ---- TILE ----------------------------------------------------------------------------------
@register
class Tile(Op):
    name = "TILE"
    value_inputs = (1,)
    levels = LEVELS_FL3_INT

    def validate(self, sig):
        sig.count(2, 1)
        t = tensor_of(sig, 0, self.levels, "tensor")
        mult = int_tensor(sig, 1, "multiples")
        sig.rank_between("input", 0, 1)
        sig.like("output", 0, sig.ins[0])
        r = sig.ins[0].rank
        orank = sig.outs[0].rank
        if r is not None and orank is not None and orank != r:
            sig.fail(f"output 0 has rank {orank}, expected {r} (the rank of input 0)")
        n = known_len(mult)
        if n is not None and r is not None and n != r:
            sig.fail(f"input 1 (multiples) has {n} elements, expected {r} (the rank of input 0)")
        vals = int_values(mult)
        if vals is not None and any(v < 0 for v in vals):
            sig.fail(f"input 1 (multiples) {vals} has a negative value")
        return self.levels[t]

    def _mult(self, ins):
        r = len(ins[0].dims)
        vals = int_values(ins[1])
        if len(vals) != r:
            raise fail_value(self.name, f"input 1 (multiples) has {len(vals)} elements, expected {r} "
                                        f"(the rank of input 0)")
        if any(v < 0 for v in vals):
            raise fail_value(self.name, f"input 1 (multiples) {vals} has a negative value")
        return vals

    def infer(self, ins):
        m = self._mult(ins)
        return [tuple(d * k for d, k in zip(ins[0].dims, m))]

    def build(self, ins, outs):
        m = self._mult(ins)
        dims = ins[0].dims
        # output viewed as (m0, d0, m1, d1, ...) receives the input broadcast over the m axes
        inter_out = tuple(v for pair in zip(m, dims) for v in pair)
        inter_in = tuple(v for d in dims for v in (1, d))

        def kernel(i, o):
            dst = o[0]
            if dst.size == 0:
                return
            try:
                view = view_as(dst, inter_out)
            except ValueError:
                dst[...] = np.tile(i[0], m)
                return
            view[...] = i[0].reshape(inter_in)
        return kernel


# ---- REVERSE -------------------------------------------------------------------------------
@register
class Reverse(Op):
    name = "REVERSE"
    validates_outputs = True     # its Android validate() checks the output rank and quantization
    levels = {F16: 7, F32: 7, Q8: 7, Q8S: 7, I32: 7}
    value_inputs = (1,)

    def validate(self, sig):
        sig.count(2, 1)
        tensor_of(sig, 0, self.levels, "tensor")
        ax = int_tensor(sig, 1, "axis")
        if ax.dims is not None and ax.dims[0] and ax.dims[0] != 1:
            sig.fail(f"input 1 (axis) must have shape [1], got {list(ax.dims)}")
        sig.rank_between("input", 0, 1, 8)
        sig.like("output", 0, sig.ins[0])
        r = sig.ins[0].rank
        orank = sig.outs[0].rank
        if r is not None and orank is not None and orank != r:
            sig.fail(f"output 0 has rank {orank}, expected {r} (the rank of input 0)")
        vals = int_values(ax)
        if vals is not None and r is not None and not 0 <= vals[0] < r:
            sig.fail(f"input 1 (axis) {vals[0]} is out of range [0, {r})")
        return 7

    def _axis(self, ins):
        r = len(ins[0].dims)
        vals = int_values(ins[1])
        if len(vals) != 1:
            raise fail_value(self.name, f"input 1 (axis) must have shape [1], got {len(vals)} elements")
        if not 0 <= vals[0] < r:
            raise fail_value(self.name, f"input 1 (axis) {vals[0]} is out of range [0, {r})")
        return vals[0]

    def infer(self, ins):
        self._axis(ins)
        return [tuple(ins[0].dims)]

    def build(self, ins, outs):
        axis = self._axis(ins)

        def kernel(i, o):
            np.copyto(o[0], np.flip(i[0], axis))
        return kernel


# ---- FILL ----------------------------------------------------------------------------------
@register
class Fill(Op):
    name = "FILL"
    value_inputs = (0,)
    value_types = {F16: C.FLOAT16, F32: C.FLOAT32, I32: C.INT32}

    def validate(self, sig):
        sig.count(2, 1)
        int_tensor(sig, 0, "dims")
        out = sig.outs[0]
        sig.types("output", 0, self.value_types)
        require_scalar(sig, 1, self.value_types[out.type], "value")
        sig.rank_between("output", 0, 1)
        n = known_len(sig.ins[0])
        if n is not None and out.rank is not None and out.rank != n:
            sig.fail(f"output 0 has rank {out.rank} but input 0 (dims) has {n} elements")
        vals = int_values(sig.ins[0])
        if vals is not None and any(v < 0 for v in vals):
            sig.fail(f"input 0 (dims) {vals} has a negative value")
        return 4

    def infer(self, ins):
        vals = int_values(ins[0])
        if not vals:
            raise fail_value(self.name, "input 0 (dims) must have at least one element")
        if any(v < 0 for v in vals):
            raise fail_value(self.name, f"input 0 (dims) {vals} has a negative value")
        return [tuple(vals)]

    def build(self, ins, outs):
        def kernel(i, o):
            o[0][...] = i[1]
        return kernel


# ---- RANK ----------------------------------------------------------------------------------
@register
class Rank(Op):
    name = "RANK"
    in_types = (F16, F32, I32, Q8, C.TENSOR_QUANT16_SYMM, C.TENSOR_BOOL8, C.TENSOR_QUANT8_SYMM_PER_CHANNEL,
                C.TENSOR_QUANT16_ASYMM, C.TENSOR_QUANT8_SYMM, Q8S)

    def validate(self, sig):
        sig.count(1, 1)
        tensor_of(sig, 0, self.in_types, "tensor")
        sig.rank_between("input", 0, 1)
        out = sig.outs[0]
        if out.type != INT32:
            sig.fail(f"output 0 has type {tname(out.type)}, expected INT32 (a scalar)")
        return 4

    def infer(self, ins):
        return [()]

    def build(self, ins, outs):
        r = len(ins[0].dims)

        def kernel(i, o):
            o[0][...] = r
        return kernel
