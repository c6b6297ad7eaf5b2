"""Slicing and padding: SLICE, STRIDED_SLICE, PAD, PAD_V2, MIRROR_PAD.

Slices are numpy views copied once into the output.  Padding writes the input into the
interior of the output once and then fills each border slab exactly once (a constant for
PAD/PAD_V2, a mirrored region of the already written output for MIRROR_PAD), one axis at
a time, so no output element is written twice.
"""
import numpy as np

from .. import constants as C
from .base import Op, register, tname
from .common import (F16, F32, I32, Q8, Q8S, QUANT8, INT32, LEVELS_FL2, LEVELS_FL3, LEVELS_FL3_INT,
                    tensor_of, require_scalar, int_tensor, scalar_int, int_values, known_len, fail_value,
                    copy_pixels, fill_pixels)
from .common import n_elements, region_copy, small


def _same_rank_output(sig, what="input 0"):
    r = sig.ins[0].rank
    orank = sig.outs[0].rank
    if r is not None and orank is not None and orank != r:
        sig.fail(f"output 0 has rank {orank}, expected {r} (the rank of {what})")


def _vector_len(sig, idx, what):
    """A 1-D parameter tensor must have rank(input 0) elements (when both are known; Android
    checks it when it prepares the operation)."""
    n = known_len(sig.ins[idx])
    r = sig.ins[0].rank
    if n is not None and r is not None and n != r:
        with sig.prepare_rule():
            sig.fail(f"input {idx} ({what}) has {n} elements, expected {r} (the rank of input 0)")


# ---- SLICE ---------------------------------------------------------------------------------
@register
class Slice(Op):
    name = "SLICE"
    value_inputs = (1, 2)
    allow_zero_sized = True
    levels = LEVELS_FL3_INT

    def validate(self, sig):
        sig.count(3, 1)
        t = tensor_of(sig, 0, self.levels, "tensor")
        int_tensor(sig, 1, "begin")
        int_tensor(sig, 2, "size")
        sig.rank_between("input", 0, 1)
        sig.like("output", 0, sig.ins[0])
        _same_rank_output(sig)
        _vector_len(sig, 1, "begin")
        _vector_len(sig, 2, "size")
        return self.levels[t]

    def _region(self, ins):
        dims = ins[0].dims
        r = len(dims)
        begin = int_values(ins[1])
        size = int_values(ins[2])
        for what, v in (("begin", begin), ("size", size)):
            if len(v) != r:
                raise fail_value(self.name, f"input {1 if what == 'begin' else 2} ({what}) has {len(v)} "
                                            f"elements, expected {r} (the rank of input 0)")
        region = []
        for k in range(r):
            b, s, d = begin[k], size[k], dims[k]
            if not 0 <= b <= d:
                raise fail_value(self.name, f"input 1 (begin) value {b} for dimension {k} is out of range "
                                            f"[0, {d}] (input 0 is {list(dims)})")
            if s == -1:
                s = d - b
            elif s < 0:
                raise fail_value(self.name, f"input 2 (size) value {s} for dimension {k} must be -1 or "
                                            f"non-negative")
            if b + s > d:
                raise fail_value(self.name, f"begin {b} + size {s} exceeds dimension {k} of input 0 "
                                            f"{list(dims)}")
            region.append((b, s))
        return region

    def infer(self, ins):
        return [tuple(s for _, s in self._region(ins))]

    def view_of(self, ins, outs):
        return [tuple(slice(b, b + s) for b, s in self._region(ins))]

    def build(self, ins, outs):
        return _region_kernel(ins, outs, self.view_of(ins, outs)[0], None)


# ---- STRIDED_SLICE -------------------------------------------------------------------------
def _clamp_begin_end(index, dim, positive):
    """The reference's ClampedIndex: an index clamped into the walkable range."""
    if positive:
        if index >= dim:
            return dim
        index = min(max(index, -dim), dim)
        return index % dim if dim else 0
    if index < -dim:
        return -1
    index = min(max(index, -dim), dim - 1)
    return index % dim if dim else -1


@register
class StridedSlice(Op):
    name = "STRIDED_SLICE"
    value_inputs = (1, 2, 3)
    levels = LEVELS_FL2

    def validate(self, sig):
        sig.count(7, 1)
        t = tensor_of(sig, 0, self.levels, "tensor")
        for k, what in ((1, "begin"), (2, "end"), (3, "strides")):
            int_tensor(sig, k, what)
            _vector_len(sig, k, what)
        for k, what in ((4, "begin_mask"), (5, "end_mask"), (6, "shrink_axis_mask")):
            require_scalar(sig, k, INT32, what)
        sig.rank_between("input", 0, 1, 4)
        sig.like("output", 0, sig.ins[0])
        strides = int_values(sig.ins[3])
        if strides is not None and 0 in strides:
            with sig.at_execution():
                    sig.fail(f"input 3 (strides) {strides} has a zero entry (strides must be non-zero)")
        r = sig.ins[0].rank
        shrink = scalar_int(sig.ins[6])
        orank = sig.outs[0].rank
        if r is not None and shrink is not None and orank is not None:
            kept = sum(1 for k in range(r) if not shrink & (1 << k))
            if orank != max(kept, 1):
                sig.fail(f"output 0 has rank {orank}, expected {max(kept, 1)} (rank {r} of input 0 minus the "
                         f"{r - kept} axes of shrink_axis_mask {shrink})")
        return self.levels[t]

    def _plan(self, ins):
        """Per axis (start, count, step, keep)."""
        dims = ins[0].dims
        r = len(dims)
        begin, end, strides = (int_values(ins[k]) for k in (1, 2, 3))
        for k, (what, v) in enumerate((("begin", begin), ("end", end), ("strides", strides)), 1):
            if len(v) != r:
                raise fail_value(self.name, f"input {k} ({what}) has {len(v)} elements, expected {r} "
                                            f"(the rank of input 0)")
        bmask, emask, shrink = (scalar_int(ins[k]) for k in (4, 5, 6))
        plan = []
        for k in range(r):
            d, s = dims[k], strides[k]
            if s == 0:
                raise fail_value(self.name, f"input 3 (strides) {strides} has a zero entry "
                                            f"(strides must be non-zero)")
            pos = s > 0
            if bmask & (1 << k):
                b = 0 if pos else d - 1
            else:
                b = _clamp_begin_end(begin[k], d, pos)
            if emask & (1 << k):
                e = d if pos else -1
            else:
                e = _clamp_begin_end(end[k], d, pos)
            n = max(-((e - b) // -s), 0)       # ceil((e - b) / s), never negative
            keep = not shrink & (1 << k)
            if not keep:
                if not pos:
                    raise fail_value(self.name, f"dimension {k} is in shrink_axis_mask {shrink} but its stride "
                                                f"{s} is negative (shrinking needs a positive stride)")
                if n != 1:
                    raise fail_value(self.name, f"dimension {k} is in shrink_axis_mask {shrink} but begin "
                                                f"{begin[k]}, end {end[k]}, stride {s} select {n} elements, "
                                                f"not 1")
            plan.append((b, n, s, keep))
        return plan

    def infer(self, ins):
        out = tuple(n for b, n, s, keep in self._plan(ins) if keep)
        return [out if out else (1,)]

    def view_of(self, ins, outs):
        where = []
        for b, n, s, keep in self._plan(ins):
            if n == 0:
                where.append(slice(0, 0))
                continue
            stop = b + s * (n - 1) + (1 if s > 0 else -1)
            where.append(slice(b, stop if stop >= 0 else None, s))
        return [tuple(where)]

    def build(self, ins, outs):
        return _region_kernel(ins, outs, self.view_of(ins, outs)[0], outs[0].dims)


def _region_kernel(ins, outs, where, shape):
    """SLICE / STRIDED_SLICE: out = in[where] (reshaped to `shape` unless None).  Small tensors
    (common.small) copy through common.region_copy: the input region's view kept from run to
    run where the input is (not an index, a reshape and the assignment).  (Between two plan
    temporaries a contiguous region is a view the plan hands on, no kernel: the kernel runs for
    a model's input or output, or a strided region.)"""
    if small(ins[0], outs[0]) and n_elements(outs[0]):
        state, miss = region_copy(where, shape)

        def kernel(i, o):
            x, p = i[0], state[0]
            if p[0] is x:
                o[0][...] = p[1]
            else:
                miss(x, o[0])
        return kernel
    if shape is None:
        def kernel(i, o):
            o[0][...] = i[0][where]
        return kernel

    def kernel(i, o):
        o[0][...] = i[0][where].reshape(shape)
    return kernel


# ---- PAD / PAD_V2 --------------------------------------------------------------------------
def _paddings_tensor(sig, idx=1):
    """The paddings: TENSOR_INT32 now; its shape [rank of input 0, 2] when the operation is
    prepared (MIRROR_PAD's Android validate checks it at once); values >= 0 at execution."""
    p = int_tensor(sig, idx, "paddings", rank=None)
    r = sig.ins[0].rank
    with sig.prepare_rule():
        if p.rank is not None and p.rank != 2:
            sig.fail(f"input {idx} (paddings) must be a 2-D tensor, got rank {p.rank}")
        if p.dims is not None and len(p.dims) == 2:
            a, b = p.dims
            if (b and b != 2) or (a and r is not None and a != r):
                sig.fail(f"input {idx} (paddings) has shape {list(p.dims)}, expected "
                         f"[{r if r is not None else 'rank'}, 2]")
    vals = int_values(p)
    if vals is not None and any(v < 0 for v in vals):
        with sig.at_execution():
            sig.fail(f"input {idx} (paddings) {vals} has a negative value (paddings must be >= 0)")


def _paddings(op, ins):
    dims = ins[0].dims
    r = len(dims)
    p = np.asarray(ins[1].value)
    if p.shape != (r, 2):
        raise fail_value(op, f"input 1 (paddings) has shape {list(p.shape)}, expected [{r}, 2]")
    pads = [(int(a), int(b)) for a, b in p.reshape(r, 2)]
    if any(a < 0 or b < 0 for a, b in pads):
        raise fail_value(op, f"input 1 (paddings) {[list(x) for x in pads]} has a negative value "
                             f"(paddings must be >= 0)")
    return pads


def _border_slabs(dims, pads):
    """Index tuples covering every border element of the padded output exactly once.

    Slab for axis k: full output extent on axes < k, the 'before' or 'after' band on axis k,
    interior on axes > k.  Yields (k, side, index) with side 0 = before, 1 = after.
    """
    r = len(dims)
    interior = [slice(a, a + d) for (a, _), d in zip(pads, dims)]
    for k in range(r):
        a, b = pads[k]
        head = (slice(None),) * k
        tail = tuple(interior[k + 1:])
        if a:
            yield k, 0, head + (slice(0, a),) + tail
        if b:
            start = a + dims[k]
            yield k, 1, head + (slice(start, start + b),) + tail


def _constant_pad_kernel(dims, pads, value_of):
    """kernel writing input into the interior and value_of(i) into the borders."""
    interior = tuple(slice(a, a + d) for (a, _), d in zip(pads, dims))
    slabs = [w for _, _, w in _border_slabs(dims, pads)]

    def kernel(i, o):
        dst = o[0]
        copy_pixels(dst[interior], i[0])        # channel pads: whole pixels at once
        v = value_of(i)
        for w in slabs:
            fill_pixels(dst[w], v)
    return kernel


@register
class Pad(Op):
    name = "PAD"
    value_inputs = (1,)
    levels = LEVELS_FL2

    def validate(self, sig):
        sig.count(2, 1)
        t = tensor_of(sig, 0, self.levels, "tensor")
        _paddings_tensor(sig)
        sig.rank_between("input", 0, 1, 4)
        sig.like("output", 0, sig.ins[0])
        _same_rank_output(sig)
        level = self.levels[t]
        if t == Q8 and sig.ins[0].zp != 0:
            level = max(level, 3)    # padding with a non-zero zeroPoint is defined since FL3
        return level

    def infer(self, ins):
        pads = _paddings(self.name, ins)
        return [tuple(a + d + b for (a, b), d in zip(pads, ins[0].dims))]

    def build(self, ins, outs):
        pads = _paddings(self.name, ins)
        inp = ins[0]
        # quant8 pads with the logical zero, i.e. the zeroPoint
        v = inp.dtype.type(inp.zp if inp.type in QUANT8 else 0)
        return _constant_pad_kernel(inp.dims, pads, lambda i: v)


@register
class PadV2(Op):
    name = "PAD_V2"
    value_inputs = (1,)
    levels = LEVELS_FL3
    value_types = {F16: C.FLOAT16, F32: C.FLOAT32, Q8: C.INT32, Q8S: C.INT32}

    def validate(self, sig):
        sig.count(3, 1)
        t = tensor_of(sig, 0, self.levels, "tensor")
        _paddings_tensor(sig)
        require_scalar(sig, 2, self.value_types[t], "pad value")
        sig.rank_between("input", 0, 1, 4)
        sig.like("output", 0, sig.ins[0])
        _same_rank_output(sig)
        if t in QUANT8:
            v = scalar_int(sig.ins[2])
            info = np.iinfo(sig.ins[0].dtype)
            if v is not None and not info.min <= v <= info.max:
                sig.fail(f"input 2 (pad value) {v} is outside the range [{info.min}, {info.max}] of "
                         f"{tname(t)}")
        return self.levels[t]

    def _check_value(self, ins):
        inp = ins[0]
        if inp.type in QUANT8:
            v = scalar_int(ins[2])
            info = np.iinfo(inp.dtype)
            if not info.min <= v <= info.max:
                raise fail_value(self.name, f"input 2 (pad value) {v} is outside the range "
                                            f"[{info.min}, {info.max}] of {tname(inp.type)}")

    def infer(self, ins):
        pads = _paddings(self.name, ins)
        self._check_value(ins)
        return [tuple(a + d + b for (a, b), d in zip(pads, ins[0].dims))]

    def build(self, ins, outs):
        pads = _paddings(self.name, ins)
        self._check_value(ins)
        inp = ins[0]
        if inp.type in QUANT8:
            # the pad value is in the quantized domain of input 0 (same scale and zeroPoint)
            v = inp.dtype.type(scalar_int(ins[2]))
            return _constant_pad_kernel(inp.dims, pads, lambda i: v)
        return _constant_pad_kernel(inp.dims, pads, lambda i: i[2])


# ---- MIRROR_PAD ----------------------------------------------------------------------------
@register
class MirrorPad(Op):
    name = "MIRROR_PAD"
    validates_outputs = True     # its Android validate() checks the output rank and quantization
    value_inputs = (1,)
    levels = {F16: 7, F32: 7, Q8: 7, Q8S: 7, I32: 7}
    REFLECT, SYMMETRIC = 0, 1

    def validate(self, sig):
        sig.count(3, 1)
        tensor_of(sig, 0, self.levels, "tensor")
        _paddings_tensor(sig)
        require_scalar(sig, 2, INT32, "mode")
        sig.rank_between("input", 0, 1)
        sig.like("output", 0, sig.ins[0])
        _same_rank_output(sig)
        mode = scalar_int(sig.ins[2])
        if mode is not None and mode not in (0, 1):
            sig.fail(f"input 2 (mode) must be 0 (REFLECT) or 1 (SYMMETRIC), got {mode}")
        return 7

    def _pads(self, ins):
        pads = _paddings(self.name, ins)
        mode = scalar_int(ins[2])
        if mode not in (0, 1):
            raise fail_value(self.name, f"input 2 (mode) must be 0 (REFLECT) or 1 (SYMMETRIC), got {mode}")
        for k, ((a, b), d) in enumerate(zip(pads, ins[0].dims)):
            limit = d - 1 if mode == self.REFLECT else d
            if a > limit or b > limit:
                rule = "less than" if mode == self.REFLECT else "at most"
                raise fail_value(self.name, f"paddings [{a}, {b}] of dimension {k} must be {rule} its size {d} "
                                            f"in {'REFLECT' if mode == self.REFLECT else 'SYMMETRIC'} mode")
        return pads, mode

    def infer(self, ins):
        pads, _ = self._pads(ins)
        return [tuple(a + d + b for (a, b), d in zip(pads, ins[0].dims))]

    def build(self, ins, outs):
        pads, mode = self._pads(ins)
        dims = ins[0].dims
        interior = tuple(slice(a, a + d) for (a, _), d in zip(pads, dims))
        # for each border slab, the mirrored source region (already written) along axis k
        off = 1 if mode == self.REFLECT else 0
        moves = []
        for k, side, w in _border_slabs(dims, pads):
            a, b = pads[k]
            if side == 0:
                # output j in [0, a) <- output 2a - j - (1 - off)
                top = 2 * a - 1 + off
                src = slice(top, top - a if top - a >= 0 else None, -1)
            else:
                e = a + dims[k]
                top = e - 1 - off
                src = slice(top, top - b if top - b >= 0 else None, -1)
            moves.append((w, w[:k] + (src,) + w[k + 1:]))

        def kernel(i, o):
            dst = o[0]
            dst[interior] = i[0]
            for w, src in moves:
                dst[w] = dst[src]
        return kernel
