"""Image resizing: RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR.

Inputs: 0 the 4-D image; 1 = output WIDTH, 2 = output HEIGHT, either INT32 sizes or scale
factors (FLOAT16 for a TENSOR_FLOAT16 image, FLOAT32 otherwise; new = floor(size * scale)
computed in float32); 3 the NCHW flag (optional for BILINEAR, required for
NEAREST_NEIGHBOR); 4 align_corners and 5 half_pixel_centers (optional, FL4).

Both follow the reference (TFLite) kernels bit for bit where it matters: source coordinates
are computed in float32 with the same expressions, BILINEAR accumulates the four weighted
taps in the reference order in float32 and, for quantized images, adds 0.5 and truncates;
NEAREST_NEIGHBOR floors (or rounds half away from zero with align_corners).  Coordinates and
weights are computed once per shape in build(); a kernel is a few gathers and multiplies.
BILINEAR weights the two source rows first (a * (1 - dy), b * dy: the reference's first
products, on the smaller [N, OH, W, C] arrays), then gathers columns into whole output rows
and multiplies by the column weights tiled along the row (long inner loops), into the output
itself when it is contiguous float32; its work arrays are kept from run to run.
"""
import numpy as np

from .. import constants as C
from .base import Op, register, tname, value_error
from . import quant as Q
from .common import (Scratch, check_rank4, check_scalar_type, scalar_of, nchw_flag, nhwc_kernel,
                     zero_sized_const_level)

F16, F32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32
Q8, Q8S = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED
f32 = np.float32


class _Resize(Op):
    allow_zero_sized = True
    min_inputs = 3

    def validate(self, sig):
        n = len(sig.ins)
        sig.count(tuple(range(self.min_inputs, 7)), 1)
        t = sig.types("input", 0, self.type_levels)
        level = self.type_levels[t]
        st = sig.ins[1].type
        if st == C.INT32:
            pass
        else:
            want = C.FLOAT16 if t == F16 else C.FLOAT32
            if st != want:
                sig.fail(f"input 1 (output width or width scale) has type {tname(st)}, expected INT32 "
                         f"or {tname(want)} for a {tname(t)} input")
            level = max(level, 3)
        sig.same_type("input", 2, st, "output height or height scale", ref="input 1")
        for k, what in ((3, "NCHW layout flag"), (4, "align_corners"), (5, "half_pixel_centers")):
            if k < n:
                check_scalar_type(sig, k, C.BOOL, what)
        if n == 4:
            level = max(level, 3)
        elif n > 4:
            level = max(level, 4)
        sig.same_type("output", 0, t)
        check_rank4(sig, "input", 0)
        check_rank4(sig, "output", 0)
        sig.same_quant("output", 0, sig.ins[0])
        for k, what in ((1, "width"), (2, "height")):
            v = scalar_of(sig.ins[k])
            if v is None:
                continue
            if st == C.INT32 and v <= 0:
                sig.fail(f"input {k} (output {what}) must be > 0, got {v}")
            if st != C.INT32 and not v > 0:
                sig.fail(f"input {k} ({what} scale) must be > 0, got {v}")
        align = scalar_of(sig.ins[4]) if n > 4 else None
        half = scalar_of(sig.ins[5]) if n > 5 else None
        if align and half:
            sig.fail("input 5 (half_pixel_centers) is true, so input 4 (align_corners) must be false")
        return zero_sized_const_level(sig, level)

    # ---- shapes ----------------------------------------------------------------------------
    def params(self, ins):
        nchw = nchw_flag(ins, 3)
        align = nchw_flag(ins, 4)
        half = nchw_flag(ins, 5)
        if align and half:
            raise value_error(f"{self.name}: align_corners and half_pixel_centers cannot both be true", False)
        d = ins[0].dims
        if d is None or len(d) != 4:
            raise value_error(f"{self.name}: input 0 must be a 4-D tensor, got dimensions {d}", False)
        nb, h, w, c = (d[0], d[2], d[3], d[1]) if nchw else d
        if h == 0 or w == 0:
            raise value_error(f"{self.name}: input height and width must be non-zero (only zero batches are "
                              f"supported), got {list(d)}", False)
        vw, vh = scalar_of(ins[1]), scalar_of(ins[2])
        if vw is None or vh is None:
            raise value_error(f"{self.name}: the output size / scale inputs must have values", False)
        if ins[1].type == C.INT32:
            ow, oh = int(vw), int(vh)
        else:
            # reference: floor(float(in_size) * float(scale)) in float32
            with np.errstate(all="ignore"):
                fw, fh = np.floor(f32(w) * f32(vw)), np.floor(f32(h) * f32(vh))
            if not (np.isfinite(fw) and np.isfinite(fh)) or max(fw, fh) >= 2 ** 31:
                raise value_error(f"{self.name}: the scales {vw} x {vh} give an output size that is not a finite "
                                  f"32-bit number", False)
            ow, oh = int(fw), int(fh)
        if ow <= 0 or oh <= 0:
            raise value_error(f"{self.name}: output height and width must be > 0, got {oh}x{ow}", False)
        return nchw, align, half, (nb, h, w, c), (oh, ow)

    def infer(self, ins):
        nchw, _, _, (nb, h, w, c), (oh, ow) = self.params(ins)
        return [(nb, c, oh, ow) if nchw else (nb, oh, ow, c)]

    def build(self, ins, outs):
        nchw, align, half, (nb, h, w, c), (oh, ow) = self.params(ins)
        if nb * c * oh * ow == 0:         # nothing to write: no per-axis tables (of a 1 << 28 size)
            return lambda i, o: None
        core = self.make(ins[0].type, align, half, h, w, oh, ow)
        return nhwc_kernel(core, nchw)


def _scale(in_size, out_size, align):
    if align and out_size > 1:
        return f32(in_size - 1) / f32(out_size - 1)
    return f32(in_size) / f32(out_size)


@register
class ResizeBilinear(_Resize):
    name = "RESIZE_BILINEAR"
    type_levels = {F32: 1, F16: 3, Q8: 3, Q8S: 4}
    min_inputs = 3

    @staticmethod
    def _axis(in_size, out_size, align, half):
        """Reference ComputeInterpolationValues for every output index: (lo, hi, frac)."""
        scale = _scale(in_size, out_size, align)
        v = np.arange(out_size, dtype=f32)
        if half:
            src = (v + f32(0.5)) * scale - f32(0.5)
        else:
            src = v * scale
        lo = np.maximum(np.floor(src).astype(np.int64), 0)
        hi = np.minimum(np.ceil(src).astype(np.int64), in_size - 1)
        frac = (src - lo.astype(f32)).astype(f32)          # input_y - y0 (may be < 0 with half pixels)
        return lo, hi, frac

    def make(self, t, align, half, h, w, oh, ow):
        y0, y1, dy = self._axis(h, oh, align, half)
        x0, x1, dx = self._axis(w, ow, align, half)
        wy1 = dy[:, None, None]                  # (OH, 1, 1) against (N, OH, W, C)
        wy0 = (f32(1) - dy)[:, None, None]
        quant = t in (Q8, Q8S)
        if quant:
            lo, hi = Q.qrange(t)
        scratch = Scratch()
        tiled = {}

        def core(x, y):
            n, c = x.shape[0], x.shape[3]
            wx = tiled.get(c)
            if wx is None:                       # column weights along a whole output row
                wx = tiled[c] = (np.repeat(f32(1) - dx, c), np.repeat(dx, c))
            wx0, wx1 = wx
            bufs = scratch.take()
            try:
                if x.dtype != f32:
                    xf = bufs.array("x", x.shape, f32)
                    xf[...] = x
                    x = xf
                # reference order: a*(1-dy)*(1-dx) + b*dy*(1-dx) + c*(1-dy)*dx + d*dy*dx
                a = bufs.array("rows0", (n, oh, w, c), f32)
                b = bufs.array("rows1", (n, oh, w, c), f32)
                np.take(x, y0, axis=1, out=a, mode="clip")     # in range; "raise" would buffer out
                a *= wy0
                np.take(x, y1, axis=1, out=b, mode="clip")
                b *= wy1
                a, b = a.reshape(n * oh, w, c), b.reshape(n * oh, w, c)
                direct = (not quant) and y.dtype == f32 and y.flags.c_contiguous
                acc = y.reshape(n * oh, ow * c) if direct else bufs.array("acc", (n * oh, ow * c), f32)
                tmp = bufs.array("tmp", (n * oh, ow * c), f32)
                acc3, tmp3 = acc.reshape(n * oh, ow, c), tmp.reshape(n * oh, ow, c)
                np.take(a, x0, axis=1, out=acc3, mode="clip")
                acc *= wx0
                for src, cols, wgt in ((b, x0, wx0), (a, x1, wx1), (b, x1, wx1)):
                    np.take(src, cols, axis=1, out=tmp3, mode="clip")
                    tmp *= wgt
                    acc += tmp
                if quant:
                    acc += f32(0.5)
                    np.trunc(acc, out=acc)      # static_cast<T>: toward zero
                    Q.clip_inplace(acc, lo, hi)
                if not direct:
                    y[...] = acc.reshape(y.shape)
            finally:
                scratch.give(bufs)
        return core


@register
class ResizeNearestNeighbor(_Resize):
    name = "RESIZE_NEAREST_NEIGHBOR"
    type_levels = {F32: 3, F16: 3, Q8: 3, Q8S: 4}
    min_inputs = 4

    @staticmethod
    def _axis(in_size, out_size, align, half):
        """Reference GetNearestNeighbor for every output index."""
        scale = _scale(in_size, out_size, align)
        offset = f32(0.5) if half else f32(0)
        v = (np.arange(out_size, dtype=f32) + offset) * scale
        if align:
            r = Q.round_half_away(v)             # std::round (in float32)
        else:
            r = np.floor(v)
        idx = np.minimum(r.astype(np.int64), in_size - 1)
        if half:
            idx = np.maximum(idx, 0)
        return idx

    def make(self, t, align, half, h, w, oh, ow):
        iy = self._axis(h, oh, align, half)
        ix = self._axis(w, ow, align, half)
        scratch = Scratch()

        def core(x, y):
            # rows, then columns: two takes (indices in range: mode "clip" does not buffer the
            # output as "raise" does), about 3x faster than one 2-D fancy index
            bufs = scratch.take()
            try:
                rows = bufs.array("rows", (x.shape[0], oh, w, x.shape[3]), x.dtype)
                np.take(x, iy, axis=1, out=rows, mode="clip")
                np.take(rows, ix, axis=2, out=y, mode="clip")
            finally:
                scratch.give(bufs)
        return core

