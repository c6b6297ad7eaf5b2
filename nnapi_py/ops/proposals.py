"""AXIS_ALIGNED_BBOX_TRANSFORM and GENERATE_PROPOSALS.

Box decoding: boxes.bbox_transform; the proposals' NMS: nms.hard_nms.
"""
import numpy as np

from .. import constants as C
from .base import Op, register, value_error
from . import quant as Q
from .common import check_present, check_scalar_type
from .boxes import (
    BOX_SCALE, F16, F32, I32, Q16A, Q16S, Q8S, QUANT8, TYPE_LEVELS, _check_box_type, _check_corners,
    _check_dims, _check_type, _dim, _float_scalar, _real, _runtime_fail, _write_boxes, bbox_transform,
    check_ranks, f32, input_dims, scalar_of_value)
from .nms import hard_nms


# ---- AXIS_ALIGNED_BBOX_TRANSFORM ------------------------------------------------------------------
@register
class AxisAlignedBboxTransform(Op):
    """Refine [x1, y1, x2, y2] boxes by per-class [dx, dy, dw, dh] deltas, clipped to each
    box's image: out = corners(center + d_xy * size, exp(d_wh) * size)."""
    name = "AXIS_ALIGNED_BBOX_TRANSFORM"
    ranks = (("input", 0, 2, "boxes"), ("input", 1, 2, "deltas"),
             ("input", 2, 1, "batch index"), ("input", 3, 2, "image info"),
             ("output", 0, 2, "boxes"))     # (where, index, rank, what)
    allow_zero_sized = True            # zero boxes give zero rows
    optional_inputs = ()

    def validate(self, sig):
        sig.count(4, 1)
        check_present(sig)
        t = sig.types("input", 0, {F32: 3, F16: 3, Q16A: 3}, "boxes")
        level = 3
        if t == Q16A:
            dt = sig.types("input", 1, QUANT8, "deltas")
            level = 4 if dt == Q8S else 3
            _check_type(sig, "input", 3, Q16A, "image info")
            for where, idx, what in (("input", 0, "boxes"), ("input", 3, "image info"), ("output", 0, "boxes")):
                o = sig.operand(where, idx)
                if o.scale != BOX_SCALE or o.zp != 0:
                    with sig.at_execution():
                        sig.fail(f"{where} {idx} ({what}, TENSOR_QUANT16_ASYMM) must have scale 0.125 and "
                                 f"zeroPoint 0, got {o.scale} and {o.zp}")
        else:
            sig.same_type("input", 1, t, "deltas")
            sig.same_type("input", 3, t, "image info")
        _check_type(sig, "input", 2, I32, "batch index")
        sig.same_type("output", 0, t)
        with sig.at_execution():    # Android checks shapes and values when it prepares the operation
            check_ranks(sig, self.ranks)
            b, d = sig.ins[0], sig.ins[1]
            if _dim(b, 1) not in (0, 4):
                sig.fail(f"input 0 (boxes) dimension 1 is {_dim(b, 1)}, expected 4")
            if _dim(d, 1) % 4:
                sig.fail(f"input 1 (deltas) dimension 1 is {_dim(d, 1)}, expected 4 * the number of classes")
            if _dim(sig.ins[3], 1) not in (0, 2):
                sig.fail(f"input 3 (image info) dimension 1 is {_dim(sig.ins[3], 1)}, expected 2 ([height, width])")
        return level

    def infer(self, ins):
        def fail(m):
            raise value_error(f"{self.name}: {m}", at_runtime=False)
        r, d, bi, info = input_dims(fail, ins, self.ranks)
        n = r[0]
        if r[1] != 4:
            fail(f"input 0 (boxes) must have shape [num_rois, 4], got {list(r)}")
        if d[1] == 0 or d[1] % 4:
            fail(f"input 1 (deltas) dimension 1 is {d[1]}, expected 4 * the number of classes (> 0)")
        _check_dims(fail, d, (n, d[1]), "input 1 (deltas)")
        _check_dims(fail, bi, (n,), "input 2 (batch index)")
        if info[0] == 0 or info[1] != 2:
            fail(f"input 3 (image info) must have shape [batches, 2] with at least one batch, got {list(info)}")
        return [(n, d[1])]

    def build(self, ins, outs):
        fail = _runtime_fail(self.name)
        infos, t_out = ins, outs[0].type

        def kernel(i, o):
            if o[0].size == 0:
                return
            rois = _real(i[0], infos[0])
            n = rois.shape[0]
            deltas = _real(i[1], infos[1]).reshape(n, -1, 4)
            bids = np.asarray(i[2]).astype(np.int64)
            image = _real(i[3], infos[3])
            bad = np.flatnonzero((bids < 0) | (bids >= image.shape[0]))
            if bad.size:
                fail(f"input 2 (batch index) entry {int(bad[0])} is {int(bids[bad[0]])}, "
                     f"expected 0..{image.shape[0] - 1} (the rows of input 3)")
            _check_corners(fail, rois, "input 0 (boxes)")
            res = bbox_transform(rois, deltas, image[bids, 0], image[bids, 1])
            _write_boxes(o[0], res.reshape(n, -1), t_out)
        return kernel


# ---- GENERATE_PROPOSALS -----------------------------------------------------------------------------
GP_NAMES = ("scores", "deltas", "anchors", "image info", "height stride", "width stride", "pre-NMS top n",
            "post-NMS top n", "iou threshold", "min size", "NCHW layout flag")


@register
class GenerateProposals(Op):
    """Anchors shifted over the feature map, refined by the deltas, clipped; the pre_nms_top_n
    best by score kept, boxes no larger than min_size or centred outside the image dropped,
    then hard NMS keeps up to post_nms_top_n per image (non-positive: no limit, as the
    documentation says).  Output rows are grouped by image, in NMS selection order."""
    name = "GENERATE_PROPOSALS"
    ranks = (("input", 0, 4, "scores"), ("input", 1, 4, "deltas"),
             ("input", 2, 2, "anchors"), ("input", 3, 2, "image info"),
             ("output", 0, 1, "scores"), ("output", 1, 2, "boxes"),
             ("output", 2, 1, "batch index"))     # (where, index, rank, what)
    value_inputs = (0, 1, 2, 3)        # the number of proposals depends on the data
    allow_zero_sized = False
    optional_inputs = ()

    def __init__(self):
        self._memo = None

    def validate(self, sig):
        sig.count(11, 3)
        check_present(sig)
        t = sig.types("input", 0, TYPE_LEVELS, "scores")
        sig.same_type("input", 1, t, "deltas")
        if t in QUANT8:
            _check_type(sig, "input", 2, Q16S, "anchors")
            if sig.ins[2].scale != BOX_SCALE:
                with sig.at_execution():
                    sig.fail(f"input 2 (anchors, TENSOR_QUANT16_SYMM) must have scale 0.125, got {sig.ins[2].scale}")
            _check_box_type(sig, sig.ins[3], "input 3 (image info)", t)
            _check_box_type(sig, sig.outs[1], "output 1 (boxes)", t)
            sig.same_quant("output", 0, sig.ins[0])
        else:
            sig.same_type("input", 2, t, "anchors")
            sig.same_type("input", 3, t, "image info")
            sig.same_type("output", 1, t, "boxes")
        fs = _float_scalar(t)
        for k in (4, 5, 8, 9):
            check_scalar_type(sig, k, fs, GP_NAMES[k])
        for k in (6, 7):
            check_scalar_type(sig, k, C.INT32, GP_NAMES[k])
        check_scalar_type(sig, 10, C.BOOL, GP_NAMES[10])
        sig.same_type("output", 0, t)
        _check_type(sig, "output", 2, I32, "batch index")
        with sig.at_execution():    # Android checks shapes and values when it prepares the operation
            check_ranks(sig, self.ranks)
            for k in (4, 5):
                v = sig.scalar_value(k)
                if v is not None and not v > 0:
                    sig.fail(f"input {k} ({GP_NAMES[k]}) must be > 0, got {v}")
            nchw = sig.scalar_value(10)
            s, d = sig.ins[0].dims, sig.ins[1].dims
            if nchw is not None and s and d and len(s) == 4 and len(d) == 4:
                b, h, w, na = (s[0], s[2], s[3], s[1]) if nchw else s
                want = (b, 4 * na, h, w) if nchw else (b, h, w, 4 * na)
                if any(x and y and x != y for x, y in zip(d, want)):
                    sig.fail(f"input 1 (deltas) has shape {list(d)}, expected {list(want)} "
                             f"(input 0's batches and positions, 4 values per anchor)")
        return TYPE_LEVELS[t]

    def _shapes(self, ins, nchw):
        def fail(m):
            raise value_error(f"{self.name}: {m}", at_runtime=False)
        s, d, a, info = input_dims(fail, ins, self.ranks)
        b, h, w, na = (s[0], s[2], s[3], s[1]) if nchw else s
        want = (b, 4 * na, h, w) if nchw else (b, h, w, 4 * na)
        _check_dims(fail, d, want, "input 1 (deltas)")
        _check_dims(fail, a, (na, 4), "input 2 (anchors)")
        _check_dims(fail, info, (b, 2), "input 3 (image info)")
        if 0 in s:
            fail(f"input 0 (scores) has a zero-sized dimension {list(s)}, which this operation does not support")
        return b, h, w, na

    def _select(self, ins, arrays):
        arrays = [np.asarray(x) for x in arrays]
        params = tuple(scalar_of_value(x) for x in arrays[4:])
        key = (tuple(x.shape for x in arrays[:4]), tuple(x.tobytes() for x in arrays[:4]), params,
               tuple((i.type, i.scale, i.zp) for i in ins[:4]))
        memo = self._memo
        if memo is not None and memo[0] == key:
            return memo[1]
        hs, ws, pre, post, iou_th, min_size, nchw = params
        nchw = bool(nchw)
        b, h, w, na = self._shapes(ins, nchw)
        scores = _real(arrays[0], ins[0])
        deltas = _real(arrays[1], ins[1])
        if nchw:
            scores, deltas = scores.transpose(0, 2, 3, 1), deltas.transpose(0, 2, 3, 1)
        anchors = _real(arrays[2], ins[2])
        image = _real(arrays[3], ins[3])
        fail = _runtime_fail(self.name)
        _check_corners(fail, anchors, "input 2 (anchors)")
        shift_w = np.arange(w, dtype=f32) * f32(ws)
        shift_h = np.arange(h, dtype=f32) * f32(hs)
        shifts = np.empty((h, w, 4), f32)
        shifts[..., 0] = shift_w[None, :]
        shifts[..., 1] = shift_h[:, None]
        shifts[..., 2] = shift_w[None, :]
        shifts[..., 3] = shift_h[:, None]
        rois = (anchors[None, None, :, :] + shifts[:, :, None, :]).reshape(-1, 4)
        m = rois.shape[0]
        half = f32(2)
        min_size = f32(min_size)
        out_rows, out_batch, out_boxes = [], [], []
        for k in range(b):
            hk, wk = image[k, 0], image[k, 1]
            boxes = bbox_transform(rois, deltas[k].reshape(m, 1, 4), np.full(m, hk, f32),
                                   np.full(m, wk, f32))[:, 0]
            sc = scores[k].reshape(m)
            sel = np.arange(m)
            if 0 < pre < m:
                sel = np.argsort(-sc, kind="stable")[:pre]
            bx = boxes[sel]
            bw, bh = bx[:, 2] - bx[:, 0], bx[:, 3] - bx[:, 1]
            with np.errstate(all="ignore"):
                keep = (bw > min_size) & (bh > min_size) & (bx[:, 0] + bw / half < wk) & (bx[:, 1] + bh / half < hk)
            sel = sel[keep]
            kept = sel[hard_nms(sc[sel], boxes[sel], iou_th, post if post > 0 else -1)]
            out_rows.append(sc[kept])
            out_boxes.append(boxes[kept])
            out_batch.append(np.full(kept.shape[0], k, np.int32))
        res = (np.concatenate(out_rows), np.concatenate(out_boxes).reshape(-1, 4), np.concatenate(out_batch))
        self._memo = (key, res)
        return res

    def infer(self, ins):
        sc, _, _ = self._select(ins, [i.value for i in ins])
        n = sc.shape[0]
        return [(n,), (n, 4), (n,)]

    def build(self, ins, outs):
        infos = ins
        t, t_box = ins[0].type, outs[1].type
        out_scale, out_zp = outs[0].scale, outs[0].zp

        def kernel(i, o):
            sc, boxes, batch = self._select(infos, i)
            if o[0].shape[0] != sc.shape[0]:
                raise value_error(f"{self.name}: output size {o[0].shape[0]} does not match the "
                                  f"{sc.shape[0]} proposals", at_runtime=True)
            if not sc.shape[0]:
                return
            if t in QUANT8:
                Q.requantize_into(o[0], sc, out_scale, out_zp)
            else:
                o[0][...] = sc
            _write_boxes(o[1], boxes, t_box)
            o[2][...] = batch
        return kernel
