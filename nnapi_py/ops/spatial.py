"""Data-movement operations on spatial layouts: DEPTH_TO_SPACE, SPACE_TO_DEPTH,
BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, CHANNEL_SHUFFLE.

Every kernel is one reshape/transpose of the input written into a reshaped *view* of the
output buffer (a single copy), working in the tensor's own layout (NHWC or NCHW) so that
no layout conversion is ever materialised.

The small helpers at the top (scalar reading, layout flag, 4-D checks) are shared with
pool.py and resize.py.
"""
import numpy as np

from .. import constants as C
from .base import Op, register, value_error
from .base import scalar as scalar_of       # the name used here and in pool.py, resize.py, detection.py
from .common import check_scalar_type, check_rank4, check_layout, nchw_flag, zero_sized_const_level, reject_zero_sized, nhwc_kernel  # noqa: F401

F16, F32, I32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32, C.TENSOR_INT32
Q8, Q8S = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED


# ---- helpers shared by pool.py / resize.py / spatial.py ------------------------------------
def store_reshaped(out, shape, src):
    """out.reshape(shape)[...] = src: one copy straight into the output buffer (a reshape of
    a C-contiguous array is a view); a non-contiguous output goes through a temporary."""
    if out.flags.c_contiguous:
        out.reshape(shape)[...] = src
    else:
        out[...] = np.ascontiguousarray(src).reshape(out.shape)


def transpose_kernel(src_shape, perm, dst_shape):
    """Kernel: the input reshaped to src_shape, transposed by perm, stored into the output
    reshaped to dst_shape (store_reshaped)."""
    def kernel(i, o):
        store_reshaped(o[0], dst_shape, i[0].reshape(src_shape).transpose(perm))
    return kernel


# ---- operations ---------------------------------------------------------------------------
class _Layout4D(Op):
    """Shared validation: input 0 a 4-D tensor, optional NCHW BOOL at layout_index."""
    type_levels = {F32: 1, Q8: 1, F16: 3, Q8S: 4}
    n_required = 2
    layout_index = 2

    def validate_common(self, sig):
        sig.count((self.n_required, self.n_required + 1), 1)
        t = sig.types("input", 0, self.type_levels)
        level = self.type_levels[t]
        sig.same_type("output", 0, t)
        check_rank4(sig, "input", 0)
        check_rank4(sig, "output", 0)
        sig.same_quant("output", 0, sig.ins[0])
        if len(sig.ins) > self.layout_index:
            level = check_layout(sig, self.layout_index, level)
        return level


class _BlockOp(_Layout4D):
    def validate(self, sig):
        level = self.validate_common(sig)
        check_scalar_type(sig, 1, C.INT32, "block_size")
        bs = scalar_of(sig.ins[1])
        if bs is not None and bs < 1:
            sig.fail(f"input 1 (block_size) must be >= 1, got {bs}")
        return level

    @staticmethod
    def params(ins):
        return int(scalar_of(ins[1])), nchw_flag(ins, 2)


@register
class DepthToSpace(_BlockOp):
    name = "DEPTH_TO_SPACE"
    optional_inputs = (2,)

    def infer(self, ins):
        reject_zero_sized(self.name, ins[0])
        bs, nchw = self.params(ins)
        if bs < 1:
            raise value_error(f"{self.name}: block_size must be >= 1, got {bs}", False)
        d = ins[0].dims
        n, h, w, c = (d[0], d[2], d[3], d[1]) if nchw else d
        if c % (bs * bs):
            raise value_error(f"{self.name}: input depth {c} is not divisible by block_size² ({bs}×{bs})", False)
        co = c // (bs * bs)
        return [(n, co, h * bs, w * bs) if nchw else (n, h * bs, w * bs, co)]

    def build(self, ins, outs):
        bs, nchw = self.params(ins)
        d = ins[0].dims
        if nchw:
            n, c, h, w = d
            co = c // (bs * bs)
            src_shape, perm, dst_shape = (n, bs, bs, co, h, w), (0, 3, 4, 1, 5, 2), (n, co, h, bs, w, bs)
        else:
            n, h, w, c = d
            co = c // (bs * bs)
            src_shape, perm, dst_shape = (n, h, w, bs, bs, co), (0, 1, 3, 2, 4, 5), (n, h, bs, w, bs, co)
        return transpose_kernel(src_shape, perm, dst_shape)


@register
class SpaceToDepth(_BlockOp):
    name = "SPACE_TO_DEPTH"
    optional_inputs = (2,)

    def infer(self, ins):
        reject_zero_sized(self.name, ins[0])
        bs, nchw = self.params(ins)
        if bs < 1:
            raise value_error(f"{self.name}: block_size must be >= 1, got {bs}", False)
        d = ins[0].dims
        n, h, w, c = (d[0], d[2], d[3], d[1]) if nchw else d
        if h % bs or w % bs:
            raise value_error(f"{self.name}: input height {h} and width {w} must both be divisible by "
                              f"block_size {bs}", False)
        co = c * bs * bs
        return [(n, co, h // bs, w // bs) if nchw else (n, h // bs, w // bs, co)]

    def build(self, ins, outs):
        bs, nchw = self.params(ins)
        d = ins[0].dims
        if nchw:
            n, c, h, w = d
            oh, ow = h // bs, w // bs
            src_shape, perm, dst_shape = (n, c, oh, bs, ow, bs), (0, 3, 5, 1, 2, 4), (n, bs, bs, c, oh, ow)
        else:
            n, h, w, c = d
            oh, ow = h // bs, w // bs
            src_shape, perm, dst_shape = (n, oh, bs, ow, bs, c), (0, 1, 3, 2, 4, 5), (n, oh, ow, bs, bs, c)
        return transpose_kernel(src_shape, perm, dst_shape)


def _check_int_tensor(sig, idx, what, shape):
    """TENSOR_INT32 input of the given shape (checked where known); returns its value or None."""
    inf = sig.ins[idx]
    sig.types("input", idx, (I32,), what)
    if inf.dims is not None and len(inf.dims) != 0:
        if len(inf.dims) != len(shape) or any(a and a != b for a, b in zip(inf.dims, shape)):
            with sig.at_execution():        # Android's prepare checks the shape
                sig.fail(f"input {idx} ({what}) must have shape {list(shape)}, got {list(inf.dims)}")
            return None
    return inf.value


def _int_tensor(name, info, what, shape):
    v = info.value
    if v is None:
        raise value_error(f"{name}: the value of {what} must be known", False)
    v = np.asarray(v)
    if v.shape != shape:
        raise value_error(f"{name}: {what} must have shape {list(shape)}, got {list(v.shape)}", False)
    return [int(x) for x in v.reshape(-1)]


def _check_block_shape(sig):
    """Input 1 (block_shape): a [2] TENSOR_INT32 of values >= 1 (where known)."""
    block = _check_int_tensor(sig, 1, "block_shape", (2,))
    if block is not None and np.size(block) and (np.asarray(block) < 1).any():
        with sig.at_execution():
                sig.fail(f"input 1 (block_shape) values must all be >= 1, got {np.asarray(block).tolist()}")


def _block_shape(name, ins):
    """(block height, block width) from input 1."""
    bh, bw = _int_tensor(name, ins[1], "input 1 (block_shape)", (2,))
    if bh < 1 or bw < 1:
        raise value_error(f"{name}: input 1 (block_shape) values must all be >= 1, got {[bh, bw]}", False)
    return bh, bw


@register
class BatchToSpaceND(_Layout4D):
    name = "BATCH_TO_SPACE_ND"
    optional_inputs = (2,)
    type_levels = {F32: 2, Q8: 2, F16: 3, Q8S: 4}
    value_inputs = (1,)

    def validate(self, sig):
        level = self.validate_common(sig)
        _check_block_shape(sig)
        return level

    def params(self, ins):
        bh, bw = _block_shape(self.name, ins)
        return bh, bw, nchw_flag(ins, 2)

    def infer(self, ins):
        reject_zero_sized(self.name, ins[0])
        bh, bw, nchw = self.params(ins)
        d = ins[0].dims
        nb, h, w, c = (d[0], d[2], d[3], d[1]) if nchw else d
        if nb % (bh * bw):
            raise value_error(f"{self.name}: input batch {nb} is not divisible by the block size product "
                              f"{bh}×{bw}", False)
        n = nb // (bh * bw)
        return [(n, c, h * bh, w * bw) if nchw else (n, h * bh, w * bw, c)]

    def build(self, ins, outs):
        bh, bw, nchw = self.params(ins)
        d = ins[0].dims
        if nchw:
            nb, c, h, w = d
            n = nb // (bh * bw)
            src_shape, perm, dst_shape = (bh, bw, n, c, h, w), (2, 3, 4, 0, 5, 1), (n, c, h, bh, w, bw)
        else:
            nb, h, w, c = d
            n = nb // (bh * bw)
            src_shape, perm, dst_shape = (bh, bw, n, h, w, c), (2, 3, 0, 4, 1, 5), (n, h, bh, w, bw, c)
        return transpose_kernel(src_shape, perm, dst_shape)


@register
class SpaceToBatchND(_Layout4D):
    name = "SPACE_TO_BATCH_ND"
    optional_inputs = (3,)
    type_levels = {F32: 2, Q8: 2, F16: 3, Q8S: 4}
    value_inputs = (1, 2)
    n_required = 3
    layout_index = 3

    def validate(self, sig):
        level = self.validate_common(sig)
        _check_block_shape(sig)
        pads = _check_int_tensor(sig, 2, "paddings", (2, 2))
        if pads is not None and np.size(pads) and (np.asarray(pads) < 0).any():
            with sig.at_execution():
                sig.fail(f"input 2 (paddings) values must all be >= 0, got {np.asarray(pads).tolist()}")
        return level

    def params(self, ins):
        bh, bw = _block_shape(self.name, ins)
        pads = _int_tensor(self.name, ins[2], "input 2 (paddings)", (2, 2))
        if min(pads) < 0:
            raise value_error(f"{self.name}: input 2 (paddings) values must all be >= 0, got "
                              f"{[pads[:2], pads[2:]]}", False)
        return bh, bw, pads, nchw_flag(ins, 3)

    def infer(self, ins):
        reject_zero_sized(self.name, ins[0])
        bh, bw, (pt, pb, pl, pr), nchw = self.params(ins)
        d = ins[0].dims
        n, h, w, c = (d[0], d[2], d[3], d[1]) if nchw else d
        hp, wp = h + pt + pb, w + pl + pr
        if hp % bh or wp % bw:
            raise value_error(f"{self.name}: padded height {hp} and width {wp} must be divisible by the "
                              f"block shape {bh}×{bw}", False)
        nb = n * bh * bw
        return [(nb, c, hp // bh, wp // bw) if nchw else (nb, hp // bh, wp // bw, c)]

    def build(self, ins, outs):
        bh, bw, (pt, pb, pl, pr), nchw = self.params(ins)
        d = ins[0].dims
        t = ins[0].type
        pad_value = ins[0].zp if t in (Q8, Q8S) else 0   # the logical zero
        dtype = ins[0].dtype
        padded = bool(pt or pb or pl or pr)
        if nchw:
            n, c, h, w = d
            hp, wp = h + pt + pb, w + pl + pr
            oh, ow = hp // bh, wp // bw
            pshape = (n, c, hp, wp)
            inner = (slice(None), slice(None), slice(pt, pt + h), slice(pl, pl + w))
            src_shape, perm, dst_shape = (n, c, oh, bh, ow, bw), (3, 5, 0, 1, 2, 4), (bh, bw, n, c, oh, ow)
        else:
            n, h, w, c = d
            hp, wp = h + pt + pb, w + pl + pr
            oh, ow = hp // bh, wp // bw
            pshape = (n, hp, wp, c)
            inner = (slice(None), slice(pt, pt + h), slice(pl, pl + w), slice(None))
            src_shape, perm, dst_shape = (n, oh, bh, ow, bw, c), (2, 4, 0, 1, 3, 5), (bh, bw, n, oh, ow, c)

        def kernel(i, o):
            x = i[0]
            if padded:
                p = np.full(pshape, pad_value, dtype)
                p[inner] = x
                x = p
            store_reshaped(o[0], dst_shape, x.reshape(src_shape).transpose(perm))
        return kernel


@register
class ChannelShuffle(Op):
    name = "CHANNEL_SHUFFLE"
    type_levels = {F32: 3, Q8: 3, F16: 3, Q8S: 4}

    def validate(self, sig):
        sig.count(3, 1)
        t = sig.types("input", 0, self.type_levels)
        sig.same_type("output", 0, t)
        check_scalar_type(sig, 1, C.INT32, "num_groups")
        check_scalar_type(sig, 2, C.INT32, "axis")
        sig.rank_between("input", 0, 1, 4)
        r = sig.ins[0].rank
        ro = sig.outs[0].rank
        if r and ro and ro != r:
            sig.fail(f"output 0 has rank {ro}, expected the rank of input 0 ({r})")
        sig.same_quant("output", 0, sig.ins[0])
        g = scalar_of(sig.ins[1])
        if g is not None and g <= 0:
            sig.fail(f"input 1 (num_groups) must be > 0, got {g}")
        axis = scalar_of(sig.ins[2])
        if axis is not None and r:
            if not -r <= axis < r:
                sig.fail(f"input 2 (axis) must be in [-{r}, {r}) for a rank-{r} input, got {axis}")
            d = sig.ins[0].dims[axis]
            if g is not None and g > 0 and d and d % g:
                sig.fail(f"input 0 dimension {axis % r} ({d}) is not divisible by num_groups {g}")
        return self.type_levels[t]

    def params(self, ins):
        d = ins[0].dims
        r = len(d)
        g, axis = int(scalar_of(ins[1])), int(scalar_of(ins[2]))
        if r == 0:
            raise value_error(f"{self.name}: input 0 must have rank 1..4, got a scalar", False)
        if not -r <= axis < r:
            raise value_error(f"{self.name}: input 2 (axis) must be in [-{r}, {r}), got {axis}", False)
        axis %= r
        if g <= 0:
            raise value_error(f"{self.name}: input 1 (num_groups) must be > 0, got {g}", False)
        if d[axis] % g:
            raise value_error(f"{self.name}: input 0 dimension {axis} ({d[axis]}) is not divisible by "
                              f"num_groups {g}", False)
        return g, axis

    def infer(self, ins):
        reject_zero_sized(self.name, ins[0])
        self.params(ins)
        return [tuple(ins[0].dims)]

    def build(self, ins, outs):
        g, axis = self.params(ins)
        d = tuple(ins[0].dims)
        pre, post = d[:axis], d[axis + 1:]
        gs = d[axis] // g
        src_shape = pre + (g, gs) + post
        dst_shape = pre + (gs, g) + post
        perm = tuple(range(axis)) + (axis + 1, axis) + tuple(range(axis + 2, len(d) + 1))
        return transpose_kernel(src_shape, perm, dst_shape)
