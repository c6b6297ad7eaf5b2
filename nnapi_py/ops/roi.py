"""ROI_ALIGN and ROI_POOLING.

ROI_ALIGN: each output cell averages sampling points laid out evenly in its bin (sampling
ratio 0: ceil(bin size) points per axis, per region), each bilinearly interpolated, edge
points clamped.  Geometry and accumulation order follow the reference in float32;
quantized inputs use integer weights round(w * 255) and one fixed-point requantization per
region.  The kernel is vectorised over regions, bins and channels: regions are grouped by
sampling ratio and the Python loop runs over the (few) sampling points of a bin.

ROI_POOLING: region corners are rounded to integers, bins use floor(start) / ceil(end) and
each output is the maximum of its bin (an empty bin gives the input zeroPoint, 0 for floats).
Vectorised the same way: a loop over the offsets inside the largest bin.
"""
import numpy as np

from .. import constants as C
from .base import Op, register, value_error
from . import quant as Q
from .common import check_present, check_rank4, check_scalar_type, nchw_flag, reject_zero_sized, scalar_of
from .boxes import (
    BOX_SCALE, I32, QUANT8, TYPE_LEVELS, _check_box_type, _check_rank, _check_type, _dim, _float_scalar,
    _rank_of, _real_boxes, f32)


# ---- ROI_ALIGN / ROI_POOLING ------------------------------------------------------------------
class _RoiOp(Op):
    """Shared validation and shape rule.  Inputs: 0 feature map, 1 regions [R, 4], 2 batch
    index [R], 3/4 output height/width, 5/6 height/width ratio (image / feature map), ...,
    last: the (required) NCHW flag."""
    n_inputs = 10
    allow_zero_sized = True
    optional_inputs = ()
    same_output_quant = False
    extra_int = ()            # (index, what, minimum) of further INT32 scalars

    def validate(self, sig):
        sig.count(self.n_inputs, 1)
        check_present(sig)
        t = sig.types("input", 0, TYPE_LEVELS)
        _check_box_type(sig, sig.ins[1], "input 1 (regions of interest)", t)
        _check_type(sig, "input", 2, I32, "batch index")
        check_scalar_type(sig, 3, C.INT32, "output height")
        check_scalar_type(sig, 4, C.INT32, "output width")
        fs = _float_scalar(t)
        check_scalar_type(sig, 5, fs, "height ratio")
        check_scalar_type(sig, 6, fs, "width ratio")
        for k, what, _ in self.extra_int:
            check_scalar_type(sig, k, C.INT32, what)
        check_scalar_type(sig, self.n_inputs - 1, C.BOOL, "NCHW layout flag")
        sig.same_type("output", 0, t)
        if self.same_output_quant:
            sig.same_quant("output", 0, sig.ins[0])
        with sig.at_execution():    # Android checks shapes and values when it prepares the operation
            check_rank4(sig, "input", 0)
            check_rank4(sig, "output", 0)
            _check_rank(sig, "input", 1, 2, "regions of interest")
            _check_rank(sig, "input", 2, 1, "batch index")
            r = _dim(sig.ins[1], 0)
            if _dim(sig.ins[1], 1) not in (0, 4):
                sig.fail(f"input 1 (regions of interest) dimension 1 is {_dim(sig.ins[1], 1)}, expected 4")
            if r and _dim(sig.ins[2], 0) and _dim(sig.ins[2], 0) != r:
                sig.fail(f"input 2 (batch index) has {_dim(sig.ins[2], 0)} entries, expected {r} "
                         f"(the rows of input 1)")
            self._check_values(sig.fail, sig.ins)
        return TYPE_LEVELS[t]

    def _check_values(self, fail, ins):
        for k, what in ((3, "output height"), (4, "output width")):
            v = scalar_of(ins[k])
            if v is not None and v <= 0:
                fail(f"input {k} ({what}) must be > 0, got {v}")
        for k, what in ((5, "height ratio"), (6, "width ratio")):
            v = scalar_of(ins[k])
            if v is not None and not v > 0:
                fail(f"input {k} ({what}) must be > 0, got {v}")
        for k, what, lo in self.extra_int:
            v = scalar_of(ins[k])
            if v is not None and v < lo:
                fail(f"input {k} ({what}) must be >= {lo}, got {v}")

    def params(self, ins):
        def fail(m):
            raise value_error(f"{self.name}: {m}", at_runtime=False)
        for k in range(3, self.n_inputs):
            if scalar_of(ins[k]) is None:
                fail(f"input {k} must have a value")
        self._check_values(fail, ins)
        nchw = nchw_flag(ins, self.n_inputs - 1)
        d = _rank_of(fail, ins[0], 4, "input 0 (feature map)")
        n, h, w, c = (d[0], d[2], d[3], d[1]) if nchw else d
        if not (n and h and w and c):
            fail(f"input 0 (feature map) dimensions must all be non-zero (only the number of regions "
                 f"may be zero), got {list(d)}")
        rd = _rank_of(fail, ins[1], 2, "input 1 (regions of interest)")
        if rd[1] != 4:
            fail(f"input 1 (regions of interest) must have shape [num_rois, 4], got {list(rd)}")
        bd = _rank_of(fail, ins[2], 1, "input 2 (batch index)")
        if bd[0] != rd[0]:
            fail(f"input 2 (batch index) has {bd[0]} entries, expected {rd[0]} (the rows of input 1)")
        oh, ow = int(scalar_of(ins[3])), int(scalar_of(ins[4]))
        return nchw, (n, h, w, c), rd[0], oh, ow

    def infer(self, ins):
        nchw, (n, h, w, c), r, oh, ow = self.params(ins)
        return [(r, c, oh, ow) if nchw else (r, oh, ow, c)]

    def build(self, ins, outs):
        nchw, (n, h, w, c), r, oh, ow = self.params(ins)
        t = ins[0].type
        ratios = (f32(scalar_of(ins[5])), f32(scalar_of(ins[6])))
        core = self.make(ins, outs, t, (n, h, w, c), oh, ow, ratios)

        def kernel(i, o):
            x, y = i[0], o[0]
            if y.size == 0:
                return
            if nchw:
                x, y = x.transpose(0, 2, 3, 1), y.transpose(0, 2, 3, 1)
            core(x, np.asarray(i[1]), np.asarray(i[2]), y)
        return kernel

    def regions(self, rois, bids, t, n, h, w, ratios):
        """Real region corners in feature-map units (float32 (R,) arrays x1, y1, x2, y2) after
        the reference's checks (run-time failures)."""
        hs, ws = f32(1) / ratios[0], f32(1) / ratios[1]

        def fail(m):
            raise value_error(f"{self.name}: {m}", at_runtime=True)
        bad = np.flatnonzero((bids < 0) | (bids >= n))
        if bad.size:
            k = bad[0]
            fail(f"input 2 (batch index) entry {k} is {bids[k]}, expected 0..{n - 1}")
        if t in QUANT8 and not self.convert_quant_boxes:
            # ROI_ALIGN scales the raw value, then applies the box scale: q * (1 / ratio) * 0.125
            r = rois.astype(f32)
            x1, y1, x2, y2 = (r[:, 0] * ws * f32(BOX_SCALE), r[:, 1] * hs * f32(BOX_SCALE),
                              r[:, 2] * ws * f32(BOX_SCALE), r[:, 3] * hs * f32(BOX_SCALE))
        else:
            r = _real_boxes(rois, t)
            x1, y1, x2, y2 = r[:, 0] * ws, r[:, 1] * hs, r[:, 2] * ws, r[:, 3] * hs
            neg = np.flatnonzero((r < 0).any(axis=1))
            if neg.size:
                k = neg[0]
                fail(f"input 1 (regions of interest) row {k} is {rois[k].tolist()}: coordinates must be >= 0")
        out = np.flatnonzero(~((x1 <= w) & (x2 <= w) & (y1 <= h) & (y2 <= h)))     # NaN fails too
        if out.size:
            k = out[0]
            fail(f"input 1 (regions of interest) row {k} is {rois[k].tolist()}: it lies outside the "
                 f"{h}x{w} feature map")
        inv = np.flatnonzero((r[:, 0] > r[:, 2]) | (r[:, 1] > r[:, 3]))
        if inv.size:
            k = inv[0]
            fail(f"input 1 (regions of interest) row {k} is {rois[k].tolist()}: a region needs "
                 f"x1 <= x2 and y1 <= y2")
        return x1, y1, x2, y2

    convert_quant_boxes = False


# samples per output bin ROI_ALIGN computes (128x128): a bin's work is one vectorised pass per
# sample, so a sampling ratio of 1 << 28 would never finish (docs/decisions.md, "Limits")
MAX_ROI_SAMPLES = 1 << 14


@register
class RoiAlign(_RoiOp):
    name = "ROI_ALIGN"
    n_inputs = 10
    extra_int = ((7, "height sampling ratio", 0), (8, "width sampling ratio", 0))

    def make(self, ins, outs, t, dims, oh, ow, ratios):
        n, h, w, c = dims
        sr_h, sr_w = int(scalar_of(ins[7])), int(scalar_of(ins[8]))
        quant = t in QUANT8
        if quant:
            in_scale, in_zp = ins[0].scale, ins[0].zp
            out_scale, out_zp = outs[0].scale, outs[0].zp
            lo, hi = Q.qrange(t)
            w_unit = f32(1) / f32(255)
        iy = np.arange(oh, dtype=f32)
        ix = np.arange(ow, dtype=f32)

        def taps(pos, size):
            lo_i = np.floor(pos).astype(np.int64)
            frac = pos - lo_i.astype(f32)
            edge = lo_i >= size - 1
            lo_i[edge] = size - 1
            hi_i = np.where(edge, size - 1, lo_i + 1)
            frac[edge] = 0
            return lo_i, hi_i, frac

        def core(x, rois, bids, y):
            x1, y1, x2, y2 = self.regions(rois, bids, t, n, h, w, ratios)
            step_w = np.maximum(x2 - x1, f32(1)) / f32(ow)
            step_h = np.maximum(y2 - y1, f32(1)) / f32(oh)
            sw = np.full(step_w.shape, sr_w, np.int64) if sr_w > 0 else np.ceil(step_w).astype(np.int64)
            sh = np.full(step_h.shape, sr_h, np.int64) if sr_h > 0 else np.ceil(step_h).astype(np.int64)
            most = int(sh.max(initial=0)) * int(sw.max(initial=0))
            if most > MAX_ROI_SAMPLES:        # one pass per sample of a bin: the work a ratio asks for
                raise value_error(f"{self.name}: sampling ratios {sr_h}x{sr_w} ask {most} samples per output "
                                  f"bin, more than this implementation computes ({MAX_ROI_SAMPLES})", at_runtime=True)
            keys = sh * (int(sw.max()) + 1) + sw
            for key in np.unique(keys).tolist():
                g = np.flatnonzero(keys == key)
                gh, gw = int(sh[g[0]]), int(sw[g[0]])
                bin_h = step_h[g] / f32(gh)
                bin_w = step_w[g] / f32(gw)
                # bin starts (G, oh) / (G, ow) and the first sample's offset, as the reference
                h0 = step_h[g][:, None] * iy[None, :] + y1[g][:, None]
                w0 = step_w[g][:, None] * ix[None, :] + x1[g][:, None]
                h0 = h0 + (bin_h / f32(2))[:, None]
                w0 = w0 + (bin_w / f32(2))[:, None]
                b = bids[g].astype(np.int64)[:, None, None]
                xs = [taps(w0 + (bin_w * f32(k))[:, None], w) for k in range(gw)]
                acc = np.zeros((g.size, oh, ow, c), np.int64 if quant else f32)
                for ky in range(gh):
                    ya, yb, dy = taps(h0 + (bin_h * f32(ky))[:, None], h)
                    ya, yb = ya[:, :, None], yb[:, :, None]
                    dy1 = dy[:, :, None]
                    dy2 = f32(1) - dy1
                    for xa, xb, dx in xs:
                        xa, xb = xa[:, None, :], xb[:, None, :]
                        dx1 = dx[:, None, :]
                        dx2 = f32(1) - dx1
                        wts = (dx2 * dy2, dx1 * dy2, dx2 * dy1, dx1 * dy1)
                        vals = (x[b, ya, xa], x[b, ya, xb], x[b, yb, xa], x[b, yb, xb])
                        if quant:
                            s = None
                            for wt, v in zip(wts, vals):
                                wq = Q.round_half_away(wt / w_unit).astype(np.int64)[..., None]
                                term = wq * (v.astype(np.int64) - in_zp)
                                s = term if s is None else s + term
                            acc += s
                        else:
                            s = None
                            for wt, v in zip(wts, vals):
                                term = wt[..., None] * v.astype(f32)
                                s = term if s is None else s + term
                            acc += s
                count = gh * gw
                if quant:
                    real = float(f32(f32(f32(in_scale) * w_unit) / f32(out_scale)) / f32(count))
                    if not 0.0 <= real < 1.0:
                        raise value_error(f"{self.name}: the requantization multiplier input_scale / 255 / "
                                          f"output_scale / {count} sampling points = {real} must be < 1",
                                          at_runtime=True)
                    r = Q.Requant(real)(acc) + out_zp
                    np.clip(r, lo, hi, out=r)
                    y[g] = r
                else:
                    acc /= f32(count)
                    y[g] = acc
        return core


@register
class RoiPooling(_RoiOp):
    name = "ROI_POOLING"
    n_inputs = 8
    allow_zero_sized = False
    same_output_quant = True
    convert_quant_boxes = True

    def infer(self, ins):
        reject_zero_sized(self.name, ins[0])
        reject_zero_sized(self.name, ins[1], "input 1 (regions of interest)")
        return super().infer(ins)

    def make(self, ins, outs, t, dims, oh, ow, ratios):
        n, h, w, c = dims
        quant = t in QUANT8
        dt = C.DTYPES[t]
        fill = np.iinfo(dt).min if quant else -np.inf
        empty = ins[0].zp if quant else 0

        def edges(start, end, bins, size):
            """Integer bin limits [lo, hi) (R, bins) of the regions start..end (rounded corners):
            step = max(end - start + 1, 1) / bins, lo = floor(step * i + start), hi =
            ceil(step * (i + 1) + start), both clipped to the feature map."""
            step = np.maximum(end - start + 1, 1).astype(f32) / f32(bins)
            k = np.arange(bins + 1, dtype=f32)
            base = start.astype(f32)[:, None]
            lo = np.floor(step[:, None] * k[None, :-1] + base)
            hi = np.ceil(step[:, None] * k[None, 1:] + base)
            return np.minimum(lo.astype(np.int64), size), np.minimum(hi.astype(np.int64), size)

        def core(x, rois, bids, y):
            x1, y1, x2, y2 = self.regions(rois, bids, t, n, h, w, ratios)
            rx1, ry1, rx2, ry2 = (Q.round_half_away(v).astype(np.int64) for v in (x1, y1, x2, y2))
            hlo, hhi = edges(ry1, ry2, oh, h)
            wlo, whi = edges(rx1, rx2, ow, w)
            kh = int(max((hhi - hlo).max(), 0))
            kw = int(max((whi - wlo).max(), 0))
            b = bids.astype(np.int64)[:, None, None]
            acc = np.full((rois.shape[0], oh, ow, c), fill, dt if quant else f32)
            for u in range(kh):
                hy = hlo + u
                vy = hy < hhi
                hy = np.minimum(hy, h - 1)[:, :, None]
                for v in range(kw):
                    wx = wlo + v
                    vx = wx < whi
                    wx = np.minimum(wx, w - 1)[:, None, :]
                    val = x[b, hy, wx]
                    ok = (vy[:, :, None] & vx[:, None, :])[..., None]
                    np.fmax(acc, np.where(ok, val, fill), out=acc)
            nonempty = ((hhi > hlo)[:, :, None] & (whi > wlo)[:, None, :])[..., None]
            y[...] = np.where(nonempty, acc, empty)
        return core
