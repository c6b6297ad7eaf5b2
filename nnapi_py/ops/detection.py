"""Detection post-processing: DETECTION_POSTPROCESSING (SSD) and HEATMAP_MAX_KEYPOINT.

The other detection operations: box_nms.py (BOX_WITH_NMS_LIMIT), roi.py (ROI_ALIGN, ROI_POOLING),
proposals.py (AXIS_ALIGNED_BBOX_TRANSFORM, GENERATE_PROPOSALS); shared: boxes.py, nms.py.

DETECTION_POSTPROCESSING in regular mode runs the reference's hard NMS of every class at once
(per_class_hard_nms: with distinct scores the reference's walk is the greedy walk down the
sorted candidates; a class whose walk meets equal scores is redone by the reference's own walk,
whose candidate-list swaps decide ties).
"""
import numpy as np

from .. import constants as C
from .base import Op, register, value_error
from . import quant as Q
from .common import check_present, check_scalar_type, nchw_flag, scalar_of
from .boxes import (
    F16, F32, I32, QUANT8, TYPE_LEVELS, _check_box_type, _check_corners, _check_dims, _check_type, _dim,
    _float_scalar, _rank_of, _real, _runtime_fail, _write_boxes, check_ranks, f32, input_dims)
from .nms import hard_nms, per_class_hard_nms


# ---- DETECTION_POSTPROCESSING -----------------------------------------------------------------------
DP_NAMES = ("scores", "deltas", "anchors", "y scale", "x scale", "h scale", "w scale", "use regular NMS",
            "max_num_detections", "max classes per detection", "max detections per class",
            "score threshold", "iou threshold", "include background")


@register
class DetectionPostprocessing(Op):
    """SSD post-processing (TFLite's TFLite_Detection_PostProcess): anchors [cy, cx, h, w]
    decoded with [dy, dx, dh, dw] / scales into [y1, x1, y2, x2]; then either regular NMS (per
    class, max_detections_per_class each, the best max_num_detections overall by score) or fast
    NMS (one NMS on each anchor's best non-background score, max_classes_per_detection best
    classes per kept anchor).  Outputs have their maximum size; output 3 counts the valid rows
    per image; the rest is zero."""
    name = "DETECTION_POSTPROCESSING"
    ranks = (("input", 0, 3, "scores"), ("input", 1, 3, "deltas"),
             ("input", 2, 2, "anchors"), ("output", 0, 2, "scores"),
             ("output", 1, 3, "boxes"), ("output", 2, 2, "classes"),
             ("output", 3, 1, "number of detections"))     # (where, index, rank, what)
    allow_zero_sized = False
    optional_inputs = ()

    def validate(self, sig):
        sig.count(14, 4)
        check_present(sig)
        t = sig.types("input", 0, {F32: 3, F16: 3}, "scores")
        sig.same_type("input", 1, t, "deltas")
        sig.same_type("input", 2, t, "anchors")
        fs = _float_scalar(t)
        for k in (3, 4, 5, 6, 11, 12):
            check_scalar_type(sig, k, fs, DP_NAMES[k])
        for k in (7, 13):
            check_scalar_type(sig, k, C.BOOL, DP_NAMES[k])
        for k in (8, 9, 10):
            check_scalar_type(sig, k, C.INT32, DP_NAMES[k])
        sig.same_type("output", 0, t, "scores")
        sig.same_type("output", 1, t, "boxes")
        _check_type(sig, "output", 2, I32, "classes")
        _check_type(sig, "output", 3, I32, "number of detections")
        with sig.at_execution():    # Android checks shapes and values when it prepares the operation
            check_ranks(sig, self.ranks)
            if _dim(sig.ins[0], 2) == 1:
                sig.fail("input 0 (scores) must have at least 2 classes (class 0 is the background), got 1")
            if 0 < _dim(sig.ins[1], 2) < 4:
                sig.fail(f"input 1 (deltas) dimension 2 is {_dim(sig.ins[1], 2)}, expected at least 4 ([dy, dx, dh, dw])")
            self._check_values(sig.fail, [sig.scalar_value(k) if k >= 3 else None for k in range(14)])
        return 3

    @staticmethod
    def _check_values(fail, v):
        for k in (3, 4, 5, 6):
            if v[k] is not None and not v[k] > 0:
                fail(f"input {k} ({DP_NAMES[k]}) must be > 0, got {v[k]}")
        for k in (11, 12):
            if v[k] is not None and not v[k] >= 0:
                fail(f"input {k} ({DP_NAMES[k]}) must be >= 0, got {v[k]}")
        if v[8] is not None and v[8] <= 0:
            fail(f"input 8 (max_num_detections) must be > 0, got {v[8]}")
        if v[7] is not None:
            k = 10 if v[7] else 9
            if v[k] is not None and v[k] <= 0:
                fail(f"input {k} ({DP_NAMES[k]}) must be > 0 when input 7 (use regular NMS) is "
                     f"{'true' if v[7] else 'false'}, got {v[k]}")

    def _params(self, ins):
        def fail(m):
            raise value_error(f"{self.name}: {m}", at_runtime=False)
        v = [None] * 3 + [scalar_of(ins[k]) for k in range(3, 14)]
        if any(x is None for x in v[3:]):
            fail("the scalar inputs 3..13 must have values")
        self._check_values(fail, v)
        s, d, a = input_dims(fail, ins, self.ranks)
        b, na, nc = s
        if nc < 2:
            fail(f"input 0 (scores) must have at least 2 classes (class 0 is the background), got {nc}")
        if d[0] != b or d[1] != na or d[2] < 4:
            fail(f"input 1 (deltas) has shape {list(d)}, expected [{b}, {na}, >= 4]")
        _check_dims(fail, a, (na, 4), "input 2 (anchors)")
        regular = bool(v[7])
        n_out = int(v[8]) * (1 if regular else int(v[9]))
        return v, b, na, nc, n_out

    def infer(self, ins):
        _, b, _, _, n = self._params(ins)
        return [(b, n), (b, n, 4), (b, n), (b,)]

    def build(self, ins, outs):
        v, b, na, nc, n_out = self._params(ins)
        sy, sx, sh, sw = (f32(x) for x in v[3:7])
        regular, max_det, max_cls, per_cls = bool(v[7]), int(v[8]), int(v[9]), int(v[10])
        score_th, iou_th = f32(v[11]), f32(v[12])
        label_shift = 0 if v[13] else 1
        n_cls_out = min(nc - 1, max_cls)
        half = f32(0.5)

        def decode(deltas, anchors):
            ay, ax, ah, aw = (anchors[:, k] for k in range(4))
            with np.errstate(all="ignore"):
                yc = ay + ah * deltas[..., 0] / sy
                xc = ax + aw * deltas[..., 1] / sx
                hh = ah * np.exp(deltas[..., 2] / sh) * half
                wh = aw * np.exp(deltas[..., 3] / sw) * half
            return np.stack((yc - hh, xc - wh, yc + hh, xc + wh), axis=-1)

        def kernel(i, o):
            scores = np.asarray(i[0]).astype(f32)
            boxes = decode(np.asarray(i[1]).astype(f32), np.asarray(i[2]).astype(f32))
            for a in o:
                a[...] = 0
            for k in range(b):
                sc = scores[k]
                if regular:         # every class's NMS at once, concatenated in class order
                    kept, nk = per_class_hard_nms(sc[:, 1:], boxes[k], score_th, iou_th, per_cls)
                    filled = np.arange(kept.shape[1]) < nk[:, None]
                    anc = kept[filled]
                    cls = np.nonzero(filled)[0] + 1
                    val = sc[anc, cls]
                    order = np.argsort(-val, kind="stable")[:max_det]
                    anc, cls, val = anc[order], cls[order], val[order]
                else:
                    best = sc[:, 1:].max(axis=1)
                    cand = np.flatnonzero(best > score_th)
                    sel = cand[hard_nms(best[cand], boxes[k, cand], iou_th, max_det)]
                    top = np.argsort(-sc[sel, 1:], axis=1, kind="stable")[:, :n_cls_out] + 1
                    anc = np.repeat(sel, n_cls_out)
                    cls = top.reshape(-1)
                    val = sc[anc, cls]
                n = anc.shape[0]
                o[0][k, :n] = val
                o[1][k, :n] = boxes[k, anc]
                o[2][k, :n] = cls - label_shift
                o[3][k] = n
        return kernel


# ---- HEATMAP_MAX_KEYPOINT ---------------------------------------------------------------------------
@register
class HeatmapMaxKeypoint(Op):
    """Per box and keypoint: the heatmap maximum refined by the quadratic (Taylor) fit of its
    3x3 neighbourhood (offset clamped to 1.5 cells), mapped into the box: score (N, K) and
    [x, y] (N, K, 2).  Border neighbours reflect (-1 -> 1, size -> size - 2)."""
    name = "HEATMAP_MAX_KEYPOINT"
    ranks = (("input", 0, 4, "heatmaps"), ("input", 1, 2, "boxes"),
             ("output", 0, 2, "scores"), ("output", 1, 3, "keypoints"))     # (where, index, rank, what)
    allow_zero_sized = False
    optional_inputs = ()

    def validate(self, sig):
        sig.count(3, 2)
        check_present(sig)
        t = sig.types("input", 0, TYPE_LEVELS, "heatmaps")
        _check_box_type(sig, sig.ins[1], "input 1 (boxes)", t)
        check_scalar_type(sig, 2, C.BOOL, "NCHW layout flag")
        sig.same_type("output", 0, t, "scores")
        _check_box_type(sig, sig.outs[1], "output 1 (keypoints)", t)
        with sig.at_execution():    # Android checks shapes and values when it prepares the operation
            check_ranks(sig, self.ranks)
        return TYPE_LEVELS[t]

    def _dims(self, ins):
        def fail(m):
            raise value_error(f"{self.name}: {m}", at_runtime=False)
        nchw = nchw_flag(ins, 2)
        d = _rank_of(fail, ins[0], 4, "input 0 (heatmaps)")
        n, h, w, k = (d[0], d[2], d[3], d[1]) if nchw else d
        if h != w:
            fail(f"input 0 (heatmaps) must be square, got height {h} and width {w}")
        if h < 2:
            fail(f"input 0 (heatmaps) size must be at least 2, got {h}")
        _check_dims(fail, _rank_of(fail, ins[1], 2, "input 1 (boxes)"), (n, 4), "input 1 (boxes)")
        return nchw, n, h, k

    def infer(self, ins):
        _, n, _, k = self._dims(ins)
        return [(n, k), (n, k, 2)]

    def build(self, ins, outs):
        nchw, n, size, k = self._dims(ins)
        infos, t = ins, ins[0].type
        t_box, out_scale, out_zp = outs[1].type, outs[0].scale, outs[0].zp
        tol = f32(1e-3) if t == F16 else f32(1e-5)
        fail = _runtime_fail(self.name)
        fsize = f32(size)

        def kernel(i, o):
            x = _real(i[0], infos[0])
            if nchw:
                x = x.transpose(0, 2, 3, 1)
            boxes = _real(i[1], infos[1])
            _check_corners(fail, boxes, "input 1 (boxes)")
            flat = x.reshape(n, size * size, k)
            clean = np.where(np.isnan(flat), f32(-np.inf), flat)
            idx = clean.argmax(axis=1)                                  # (n, k): first maximum
            best = np.maximum(np.take_along_axis(clean, idx[:, None, :], 1)[:, 0], f32(-3.4028234663852886e38))
            mh, mw = idx // size, idx % size
            bi = np.arange(n)[:, None]
            ki = np.arange(k)[None, :]

            def at(dh, dw):
                hh, ww = mh + dh, mw + dw
                hh = np.where(hh < 0, 1, np.where(hh >= size, size - 2, hh))
                ww = np.where(ww < 0, 1, np.where(ww >= size, size - 2, ww))
                return x[bi, hh, ww, ki]
            g = [[at(dh, dw) for dw in (-1, 0, 1)] for dh in (-1, 0, 1)]
            two, four = f32(2), f32(4)
            with np.errstate(all="ignore"):
                b0 = -(g[1][2] - g[1][0]) / two
                b1 = -(g[2][1] - g[0][1]) / two
                a00 = g[1][0] - two * g[1][1] + g[1][2]
                a01 = (g[2][2] - g[2][0] - g[0][2] + g[0][0]) / four
                a11 = g[0][1] - two * g[1][1] + g[2][1]
                cp1 = a00 * a11
                det = cp1 - a01 * a01
                solve = ~(np.abs(det) < (tol + tol * cp1))
                d0 = np.where(solve, (a11 * b0 - a01 * b1) / det, f32(0)).astype(f32)
                d1 = np.where(solve, (a00 * b1 - a01 * b0) / det, f32(0)).astype(f32)
                big = np.maximum(np.abs(d0), np.abs(d1))
                clamp = solve & ((np.abs(d0) > f32(1.5)) | (np.abs(d1) > f32(1.5)))
                scale = np.where(clamp, f32(1.5) / big, f32(1))
                d0 = np.where(clamp, d0 * scale, d0)
                d1 = np.where(clamp, d1 * scale, d1)
                fitted = g[1][1] - b0 * d0 - b1 * d1 + ((a00 * d0 + a01 * d1) * d0 + (a01 * d0 + a11 * d1) * d1) / two
                score = np.where(solve, fitted, best).astype(f32)
                wrel = (mw.astype(f32) + d0 + f32(0.5)) / fsize
                hrel = (mh.astype(f32) + d1 + f32(0.5)) / fsize
                x1, y1 = boxes[:, 0:1], boxes[:, 1:2]
                kp = np.stack((wrel * (boxes[:, 2:3] - x1) + x1, hrel * (boxes[:, 3:4] - y1) + y1), axis=-1)
            if t in QUANT8:
                Q.requantize_into(o[0], score, out_scale, out_zp)
            else:
                o[0][...] = score
            _write_boxes(o[1], kp, t_box)
        return kernel
