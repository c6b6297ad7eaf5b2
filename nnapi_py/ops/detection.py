"""Object-detection operations: BOX_WITH_NMS_LIMIT, ROI_ALIGN, ROI_POOLING, AXIS_ALIGNED_BBOX_TRANSFORM,
GENERATE_PROPOSALS, DETECTION_POSTPROCESSING, HEATMAP_MAX_KEYPOINT.

Boxes are [x1, y1, x2, y2] rows.  Box tensors follow the score / feature-map type for
floats; with 8-bit quantized data they are TENSOR_QUANT16_ASYMM with scale 0.125 and
zeroPoint 0 (the reference requires that for the signed variant too, whatever the header
text says about zeroPoint -128, which QUANT16_ASYMM cannot even hold).

BOX_WITH_NMS_LIMIT (the reference semantics, reproduced decision for decision):

* rows are grouped into batches by runs of equal batch index (input 2); class 0 is the
  background and never selected; a box enters its class's candidate list when its score is
  strictly greater than score_threshold;
* per class, repeatedly: the candidate with the highest current score (the first one in the
  candidate list on ties) is selected and swapped to the front; every remaining candidate's
  score is multiplied by the kernel of its IoU with the selected box (hard: 1 if IoU <
  iou_threshold else 0; linear: 1 or 1 - IoU; gaussian: exp(-IoU^2 / sigma)) and dropped
  when it falls below nms_score_threshold, a dropped candidate being swapped with the last
  live one (this reordering decides later ties, so it is reproduced exactly);
  max_num_detections (when >= 0) limits both each class and the whole image;
* per image the selections are ordered by score (stable), cut to max_num_detections, and
  reordered by class, then score; output scores are the *updated* scores; output boxes are
  copies of the input rows; all arithmetic is float32 (float16 / quantized inputs are
  converted first, quantized output scores are round(score / scale + zeroPoint)).

The number of output boxes depends on the input values: inputs 0-2 are value inputs, the
shape rule runs the selection (memoised, so the kernel does not redo it).

DETECTION_POSTPROCESSING in regular mode runs the reference's hard NMS of every class at once
(per_class_hard_nms: with distinct scores the reference's walk is the greedy walk down the
sorted candidates; a class whose walk meets equal scores is redone by the reference's own walk,
whose candidate-list swaps decide ties).

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

F16, F32, I32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32, C.TENSOR_INT32
Q8, Q8S, Q16A = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED, C.TENSOR_QUANT16_ASYMM
TYPE_LEVELS = {F32: 3, F16: 3, Q8: 3, Q8S: 4}
QUANT8 = (Q8, Q8S)
BOX_SCALE = 0.125
f32 = np.float32


def tname(t):
    return C.TYPE_NAMES.get(t, str(t))


# ---- shared validation helpers --------------------------------------------------------------
def _float_scalar(t):
    """Scalar type of float parameters: FLOAT16 with TENSOR_FLOAT16 data, FLOAT32 otherwise."""
    return C.FLOAT16 if t == F16 else C.FLOAT32


def _check_box_type(sig, info, label, t):
    """A box tensor for data of type t: same float type, or QUANT16_ASYMM (0.125, 0; its
    quantization is checked when the operation is prepared, at execution)."""
    if t in QUANT8:
        if info.type != Q16A:
            sig.fail(f"{label} has type {tname(info.type)}, expected TENSOR_QUANT16_ASYMM for {tname(t)} data")
        if info.scale != BOX_SCALE or info.zp != 0:
            with sig.at_execution():
                sig.fail(f"{label} (TENSOR_QUANT16_ASYMM boxes) must have scale 0.125 and zeroPoint 0, "
                         f"got {info.scale} and {info.zp}")
    elif info.type != t:
        sig.fail(f"{label} has type {tname(info.type)}, expected {tname(t)} (the type of input 0)")


def _check_type(sig, where, idx, t, what):
    ops = sig.ins if where == "input" else sig.outs
    if ops[idx].type != t:
        sig.fail(f"{where} {idx} ({what}) has type {tname(ops[idx].type)}, expected {tname(t)}")


def _check_rank(sig, where, idx, rank, what):
    ops = sig.ins if where == "input" else sig.outs
    r = ops[idx].rank
    if r is not None and r != 0 and r != rank:
        sig.fail(f"{where} {idx} ({what}) must be a {rank}-D tensor, got rank {r}")


def _dim(info, k):
    """Declared dimension k (0 = unknown) of an operand whose rank may be unknown."""
    d = info.dims
    return d[k] if d and len(d) > k else 0


def _rank_of(fail, info, rank, label):
    d = info.dims
    if d is None or len(d) != rank:
        fail(f"{label} must be a {rank}-D tensor, got dimensions {None if d is None else list(d)}")
    return d


def _real_boxes(a, t):
    """Box values -> float32 array of real coordinates (quantized: q * 0.125)."""
    a = np.asarray(a)
    if t in QUANT8:
        return a.astype(f32) * f32(BOX_SCALE)
    return a.astype(f32)


# ---- BOX_WITH_NMS_LIMIT ----------------------------------------------------------------------
NMS_HARD, NMS_LINEAR, NMS_GAUSSIAN = 0, 1, 2
NMS_NAMES = ("scores", "boxes", "batch index", "score_threshold", "max_num_detections", "nms kernel",
             "iou_threshold", "sigma", "nms_score_threshold")


def _iou(boxes, box):
    """IoU of each row of boxes (k, 4) with box (4,), float32 in the reference's order (any
    two broadcasting [..., 4] arrays: (m, 1, 4) against (1, m, 4) gives every pair)."""
    area1 = (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])
    area2 = (box[..., 2] - box[..., 0]) * (box[..., 3] - box[..., 1])
    w = np.minimum(boxes[..., 2], box[..., 2]) - np.maximum(boxes[..., 0], box[..., 0])
    h = np.minimum(boxes[..., 3], box[..., 3]) - np.maximum(boxes[..., 1], box[..., 1])
    np.maximum(w, 0, out=w)
    np.maximum(h, 0, out=h)
    inter = w * h
    return inter / (area1 + area2 - inter)


def _nms_kernel(kind, iou_th, sigma):
    """Score multiplier as a function of the IoU array (float32)."""
    one = f32(1)
    if kind == NMS_HARD:
        return lambda iou: np.where(iou < iou_th, one, f32(0))
    if kind == NMS_LINEAR:
        return lambda iou: np.where(iou < iou_th, one, one - iou)
    return lambda iou: np.exp(f32(-1) * iou * iou / sigma)


def _select_class(scores, boxes, limit, kernel, nms_th, hard_iou=None):
    """Soft/hard NMS of one class.  scores (m,) float32 (updated in place), boxes (m, 4).
    Returns the candidate positions in selection order.

    With hard_iou (GENERATE_PROPOSALS, DETECTION_POSTPROCESSING: the reference's plain hard
    NMS) a candidate is dropped when its IoU with the selected box is >= hard_iou and scores
    are left as they are; kernel and nms_th are then unused."""
    m = scores.shape[0]
    order = np.arange(m)
    start, end = 0, m
    while start < end and start < limit:
        live = scores[order[start:end]]
        j = int(np.argmax(live))
        if live[j] != live[j]:       # NaN: std::max_element keeps a NaN first element, else skips NaNs
            j = 0 if live[0] != live[0] else int(np.nanargmax(live))
        j += start
        order[start], order[j] = order[j], order[start]
        rest = order[start + 1:end]
        if rest.size:
            iou = _iou(boxes[rest], boxes[order[start]])
            if hard_iou is None:
                s = scores[rest] * kernel(iou)
                scores[rest] = s
                gone = s < nms_th
            else:
                gone = iou >= hard_iou
            if gone.any():
                # The reference walks the list and swaps each dropped candidate with the last
                # live one: the first k positions end up holding the live candidates that were
                # there, the holes filled by the live ones from behind, last first.
                k = rest.size - int(np.count_nonzero(gone))
                live = rest[:k].copy()
                holes = np.flatnonzero(gone[:k])
                tail = np.flatnonzero(~gone[k:])[::-1] + k
                live[holes] = rest[tail]
                order[start + 1:start + 1 + k] = live
                end = start + 1 + k
        start += 1
    return order[:start]


class NmsResult:
    __slots__ = ("rows", "classes", "scores", "batches")

    def __init__(self, rows, classes, scores, batches):
        self.rows, self.classes, self.scores, self.batches = rows, classes, scores, batches

    def __len__(self):
        return self.rows.shape[0]


def box_with_nms_limit(scores, boxes, batches, score_th, max_det, kind, iou_th, sigma, nms_th):
    """scores (R, C) float32, boxes (R, C, 4) float32, batches (R,) int -> NmsResult."""
    nrois, ncls = scores.shape
    rows_out, cls_out, sc_out, b_out = [], [], [], []
    if nrois:
        kernel = _nms_kernel(kind, iou_th, sigma)
        limit = nrois if max_det < 0 else max_det
        cut = np.flatnonzero(batches[1:] != batches[:-1]) + 1
        starts = np.concatenate(([0], cut))
        ends = np.concatenate((cut, [nrois]))
        with np.errstate(all="ignore"):
            for r0, r1 in zip(starts.tolist(), ends.tolist()):
                rows, classes, sc = [], [], []
                for c in range(1, ncls):
                    cand = np.flatnonzero(scores[r0:r1, c] > score_th)
                    if not cand.size:
                        continue
                    s = scores[r0:r1, c][cand]          # a copy: updated by the selection
                    keep = _select_class(s, boxes[r0:r1, c][cand], limit, kernel, nms_th)
                    rows.append(cand[keep] + r0)
                    classes.append(np.full(keep.shape[0], c, np.int64))
                    sc.append(s[keep])
                if not rows:
                    continue
                rows, classes, sc = np.concatenate(rows), np.concatenate(classes), np.concatenate(sc)
                by_score = np.argsort(-sc, kind="stable")
                if max_det >= 0:
                    by_score = by_score[:max_det]
                rows, classes, sc = rows[by_score], classes[by_score], sc[by_score]
                by_class = np.lexsort((-sc, classes))
                rows_out.append(rows[by_class])
                cls_out.append(classes[by_class])
                sc_out.append(sc[by_class])
                b_out.append(np.full(by_class.shape[0], batches[r0], np.int64))
    if not rows_out:
        e = np.zeros(0, np.int64)
        return NmsResult(e, e, np.zeros(0, f32), e)
    return NmsResult(np.concatenate(rows_out), np.concatenate(cls_out), np.concatenate(sc_out),
                     np.concatenate(b_out))


@register
class BoxWithNmsLimit(Op):
    name = "BOX_WITH_NMS_LIMIT"
    value_inputs = (0, 1, 2)       # the number of output boxes depends on scores, boxes, batches
    allow_zero_sized = True
    optional_inputs = ()

    def __init__(self):
        self._memo = None          # (key, NmsResult) of the last selection

    def validate(self, sig):
        sig.count(9, 4)
        check_present(sig)
        t = sig.types("input", 0, TYPE_LEVELS)
        _check_box_type(sig, sig.ins[1], "input 1 (boxes)", t)
        _check_type(sig, "input", 2, I32, "batch index")
        fs = _float_scalar(t)
        for k in (3, 6, 7, 8):
            check_scalar_type(sig, k, fs, NMS_NAMES[k])
        for k in (4, 5):
            check_scalar_type(sig, k, C.INT32, NMS_NAMES[k])
        sig.same_type("output", 0, t)
        sig.same_quant("output", 0, sig.ins[0])
        _check_box_type(sig, sig.outs[1], "output 1 (boxes)", t)
        _check_type(sig, "output", 2, I32, "classes")
        _check_type(sig, "output", 3, I32, "batch index")
        with sig.at_execution():    # Android checks shapes and values when it prepares the operation
            for where, idx, rank, what in (("input", 0, 2, "scores"), ("input", 1, 2, "boxes"),
                                           ("input", 2, 1, "batch index"), ("output", 0, 1, "scores"),
                                           ("output", 1, 2, "boxes"), ("output", 2, 1, "classes"),
                                           ("output", 3, 1, "batch index")):
                _check_rank(sig, where, idx, rank, what)
            s, b, bi = sig.ins[0], sig.ins[1], sig.ins[2]
            n, ncls = _dim(s, 0), _dim(s, 1)
            if ncls == 1:
                sig.fail("input 0 (scores) must have at least 2 classes (class 0 is the background), got 1")
            if n and _dim(b, 0) and _dim(b, 0) != n:
                sig.fail(f"input 1 (boxes) has {_dim(b, 0)} rows, expected {n} (the rows of input 0)")
            if ncls and _dim(b, 1) and _dim(b, 1) != 4 * ncls:
                sig.fail(f"input 1 (boxes) dimension 1 is {_dim(b, 1)}, expected 4 * {ncls} classes = {4 * ncls}")
            if n and _dim(bi, 0) and _dim(bi, 0) != n:
                sig.fail(f"input 2 (batch index) has {_dim(bi, 0)} entries, expected {n} (the rows of input 0)")
            if _dim(sig.outs[1], 1) not in (0, 4):
                sig.fail(f"output 1 (boxes) dimension 1 is {_dim(sig.outs[1], 1)}, expected 4")
            kind = sig.scalar_value(5)
            if kind is not None and kind not in (NMS_HARD, NMS_LINEAR, NMS_GAUSSIAN):
                sig.fail(f"input 5 (nms kernel) must be 0 (hard), 1 (linear) or 2 (gaussian), got {kind}")
        return TYPE_LEVELS[t]

    # ---- the selection (shape rule and kernel) ----------------------------------------------
    def _fail(self, msg):
        raise value_error(f"{self.name}: {msg}", at_runtime=False)

    def _check_shapes(self, ins):
        s = _rank_of(self._fail, ins[0], 2, "input 0 (scores)")
        b = _rank_of(self._fail, ins[1], 2, "input 1 (boxes)")
        bi = _rank_of(self._fail, ins[2], 1, "input 2 (batch index)")
        n, ncls = s
        if ncls < 2:
            self._fail(f"input 0 (scores) must have at least 2 classes (class 0 is the background), got {ncls}")
        if b[0] != n or b[1] != 4 * ncls:
            self._fail(f"input 1 (boxes) has shape {list(b)}, expected [{n}, {4 * ncls}] "
                       f"([rows of input 0, 4 * classes])")
        if bi[0] != n:
            self._fail(f"input 2 (batch index) has {bi[0]} entries, expected {n} (the rows of input 0)")
        return n, ncls

    def _select(self, ins, arrays):
        """arrays: the 9 input values.  Memoised on the input bytes and parameters."""
        t = ins[0].type
        sc, bx, bi = (np.asarray(a) for a in arrays[:3])
        params = tuple(scalar_of_value(a) for a in arrays[3:])
        key = (t, ins[0].scale, ins[0].zp, sc.shape, bx.shape, bi.shape, sc.tobytes(), bx.tobytes(),
               bi.tobytes(), params)
        memo = self._memo
        if memo is not None and memo[0] == key:
            return memo[1]
        n, ncls = self._check_shapes(ins)
        score_th, max_det, kind, iou_th, sigma, nms_th = params
        if kind not in (NMS_HARD, NMS_LINEAR, NMS_GAUSSIAN):
            self._fail(f"input 5 (nms kernel) must be 0 (hard), 1 (linear) or 2 (gaussian), got {kind}")
        if t in QUANT8:
            scores = Q.dequantize(sc, ins[0].scale, ins[0].zp)
        else:
            scores = sc.astype(f32)
        boxes = _real_boxes(bx, t).reshape(n, ncls, 4)
        bad = (boxes[..., 0] > boxes[..., 2]) | (boxes[..., 1] > boxes[..., 3])
        if bad.any():
            r, c = np.argwhere(bad)[0]
            self._fail(f"input 1 (boxes): box {c} of row {r} is {boxes[r, c].tolist()}, "
                       f"a box needs x1 <= x2 and y1 <= y2")
        res = box_with_nms_limit(scores, boxes, bi.astype(np.int64), f32(score_th), int(max_det), int(kind),
                                 f32(iou_th), f32(sigma), f32(nms_th))
        self._memo = (key, res)
        return res

    def infer(self, ins):
        res = self._select(ins, [i.value for i in ins])
        n = len(res)
        return [(n,), (n, 4), (n,), (n,)]

    def build(self, ins, outs):
        t = ins[0].type
        infos = ins
        out_scale, out_zp = outs[0].scale, outs[0].zp

        def kernel(i, o):
            res = self._select(infos, i)
            n = len(res)
            if o[0].shape[0] != n:        # cannot happen: the shapes came from the same selection
                raise value_error(f"{self.name}: output size {o[0].shape[0]} does not match the "
                                  f"{n} selected boxes", at_runtime=True)
            if not n:
                return
            if t in QUANT8:
                v = res.scores / f32(out_scale) + f32(out_zp)
                Q.quantize_to(o[0], Q.round_half_away(v), 1.0, 0)
            else:
                o[0][...] = res.scores
            ncls = i[0].shape[1]
            o[1][...] = np.asarray(i[1]).reshape(-1, ncls, 4)[res.rows, res.classes]
            o[2][...] = res.classes
            o[3][...] = res.batches
        return kernel


def scalar_of_value(v):
    """A scalar input value (numpy scalar / 0-d or 1-element array) as a Python number."""
    return np.asarray(v).reshape(-1)[0].item()


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


# ---- shared by the box-decoding operations ------------------------------------------------------
Q16S = C.TENSOR_QUANT16_SYMM


_SMALL_NMS = 64          # up to this many candidates: all IoUs at once, then plain Python


def hard_nms(scores, boxes, iou_th, limit):
    """The reference's plain hard NMS of one set of candidates: positions of the kept rows of
    scores (m,) / boxes (m, 4) float32 in selection order; limit < 0 means no limit."""
    m = scores.shape[0]
    if not m:
        return np.zeros(0, np.int64)
    scores = scores.astype(f32)
    limit = m if limit < 0 else limit
    with np.errstate(all="ignore"):
        if m <= _SMALL_NMS and not np.isnan(scores).any():
            return _hard_nms_small(scores, boxes, f32(iou_th), limit)
        return _select_class(scores, boxes, limit, None, None, hard_iou=f32(iou_th))


def _hard_nms_small(scores, boxes, th, limit):
    """_select_class's hard NMS step for step -- the same candidate order (the first maximum
    of the live list wins; a dropped candidate's place is taken by the last live one) -- with
    every IoU computed up front by one broadcast _iou call and the
    walk over a few dozen candidates in plain Python instead of a dozen numpy calls per kept
    box: regular-mode DETECTION_POSTPROCESSING runs it once per class."""
    b = boxes.astype(f32)
    gone_with = (_iou(b[:, None, :], b[None, :, :]) >= th).tolist()   # [candidate][kept box]
    s = scores.tolist()
    m = len(s)
    order = list(range(m))
    start, end = 0, m
    while start < end and start < limit:
        j, best = start, s[order[start]]
        for q in range(start + 1, end):
            if s[order[q]] > best:
                j, best = q, s[order[q]]
        order[start], order[j] = order[j], order[start]
        kept = order[start]
        rest = order[start + 1:end]
        gone = [gone_with[c][kept] for c in rest]
        if any(gone):
            k = len(rest) - sum(gone)
            live = rest[:k]
            tail = [q for q in range(len(rest) - 1, k - 1, -1) if not gone[q]]
            holes = [q for q in range(k) if gone[q]]
            for hq, tq in zip(holes, tail):
                live[hq] = rest[tq]
            order[start + 1:start + 1 + k] = live
            end = start + 1 + k
        start += 1
    return np.asarray(order[:start], np.int64)


_NMS_BLOCK = 32          # sorted candidates per class decided per step of per_class_hard_nms


def per_class_hard_nms(scores, boxes, score_th, iou_th, limit):
    """hard_nms of every class of scores (na, C) against the shared boxes (na, 4), all classes at
    once: (kept anchors (C, L), kept count per class (C,)), each row in selection order.

    With distinct scores the reference's selection is the greedy walk down the candidates
    sorted by score (a candidate is kept unless a kept one's IoU with it is >= iou_th); its
    ties are broken by the order of its candidate list, which its swaps permute, so a class
    whose walk meets two equal scores (up to the candidate after its last kept one) is redone
    by hard_nms itself.  The walk decides _NMS_BLOCK sorted positions of every unfinished
    class per step: one IoU product of the block against the class's kept boxes and within
    the block, then a loop over the block's positions of a few numpy calls on [classes,
    block] arrays.  IoUs are _iou's float32 values (symmetric bit for bit)."""
    na, ncls = scores.shape
    lim = na if limit < 0 else limit
    key = np.where(scores > score_th, scores, f32(-np.inf)).T           # [C, na]
    m = np.count_nonzero(scores > score_th, axis=0)
    order = np.argsort(-key, axis=1, kind="stable")
    b = boxes.astype(f32)
    y0, x0, y1, x1 = (np.ascontiguousarray(b[:, k]) for k in range(4))
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    th = f32(iou_th)

    def iou_ge(a, o):
        """IoU(a, o) >= th for anchor index arrays broadcasting together (_iou's arithmetic)."""
        w = np.minimum(y1[a], y1[o]) - np.maximum(y0[a], y0[o])
        h = np.minimum(x1[a], x1[o]) - np.maximum(x0[a], x0[o])
        np.maximum(w, 0, out=w)
        np.maximum(h, 0, out=h)
        inter = w * h
        return inter / (area[a] + area[o] - inter) >= th

    L = max(0, min(lim, int(m.max()) if ncls else 0))
    kept = np.zeros((ncls, max(L, 1)), np.int64)
    nk = np.zeros(ncls, np.int64)
    last = np.full(ncls, -1, np.int64)              # sorted position of the last kept candidate
    rows = np.flatnonzero(m > 0) if L else np.zeros(0, np.int64)
    p0 = 0
    while rows.size:
        w_ = min(_NMS_BLOCK, int(m[rows].max()) - p0)
        a = order[rows, p0:p0 + w_]                                     # [R, W]
        pos = p0 + np.arange(w_)
        valid = pos < m[rows, None]
        supp = iou_ge(a[:, :, None], a[:, None, :])                     # [R, W, W]
        k = nk[rows]
        kmax = int(k.max())
        if kmax:
            kb = kept[rows, :kmax]
            hit = iou_ge(a[:, :, None], kb[:, None, :])                 # [R, W, kmax]
            hit &= (np.arange(kmax) < k[:, None])[:, None, :]
            free = ~hit.any(2) & valid
        else:
            free = valid.copy()
        ridx = np.arange(rows.size)
        for j in range(w_):
            keep = free[:, j] & (k < L)
            r = ridx[keep]
            if r.size:
                free[r] &= ~supp[r, j]
                kept[rows[r], k[r]] = a[r, j]
                last[rows[r]] = p0 + j
                k[r] += 1
        nk[rows] = k
        p0 += w_
        rows = rows[(k < L) & (p0 < m[rows])]
    # classes whose walk met a tie: the first equal neighbours at or before the candidate after
    # the last kept one (the whole candidate list when the limit was not reached)
    end = np.where(nk >= L, last + 1, m - 1)
    srt = np.take_along_axis(key, order, 1)
    eq = srt[:, 1:] == srt[:, :-1]
    first = np.argmax(eq, axis=1) if na > 1 else np.zeros(ncls, np.int64)
    tied = np.flatnonzero(eq.any(1) & (first + 1 <= end) & (m > 1)) if na > 1 else np.zeros(0, np.int64)
    for c in tied.tolist():          # rare with float scores: the reference's own walk
        cand = np.flatnonzero(scores[:, c] > score_th)
        keep = cand[hard_nms(scores[cand, c], boxes[cand], iou_th, limit)]
        if keep.size > kept.shape[1]:
            kept = np.concatenate([kept, np.zeros((ncls, keep.size - kept.shape[1]), np.int64)], 1)
        kept[c, :keep.size] = keep
        nk[c] = keep.size
    return kept, nk


def _real(a, info):
    """Tensor values -> float32 real values (quantized types through their scale / zeroPoint)."""
    a = np.asarray(a)
    if a.dtype.kind in "iu" and info.type != I32:
        return Q.dequantize(a, info.scale, info.zp)
    return a.astype(f32)


def bbox_transform(rois, deltas, height, width):
    """Apply [dx, dy, dw, dh] deltas to [x1, y1, x2, y2] boxes and clip to the image.

    rois (R, 4), deltas (R, C, 4), height / width (R,) image size per row -> (R, C, 4) float32,
    in the reference's float32 order of operations."""
    two = f32(2)
    w = (rois[:, 2] - rois[:, 0])[:, None]
    h = (rois[:, 3] - rois[:, 1])[:, None]
    cx = ((rois[:, 0] + rois[:, 2]) / two)[:, None]
    cy = ((rois[:, 1] + rois[:, 3]) / two)[:, None]
    with np.errstate(all="ignore"):
        nw = np.exp(deltas[..., 2]) * w
        nh = np.exp(deltas[..., 3]) * h
        ncx = cx + deltas[..., 0] * w
        ncy = cy + deltas[..., 1] * h
        out = np.empty(deltas.shape, f32)
        out[..., 0] = ncx - nw / two
        out[..., 1] = ncy - nh / two
        out[..., 2] = ncx + nw / two
        out[..., 3] = ncy + nh / two
    zero = f32(0)
    for k, lim in ((0, width), (1, height), (2, width), (3, height)):
        np.minimum(np.maximum(out[..., k], zero), lim[:, None], out=out[..., k])
    return out


def _check_corners(fail, boxes, what):
    """Each row [x1, y1, x2, y2] needs x1 <= x2 and y1 <= y2 (the reference rejects others)."""
    bad = np.flatnonzero(~((boxes[:, 0] <= boxes[:, 2]) & (boxes[:, 1] <= boxes[:, 3])))
    if bad.size:
        fail(f"{what}: box {int(bad[0])} is {boxes[bad[0]].tolist()}, a box needs x1 <= x2 and y1 <= y2")


def _write_boxes(out, real, t_out):
    """Real box coordinates into a float output or a TENSOR_QUANT16_ASYMM (0.125, 0) one."""
    if t_out == Q16A:
        Q.requantize_into(out, real, BOX_SCALE, 0)
    else:
        out[...] = real


def _runtime_fail(name):
    def fail(msg):
        raise value_error(f"{name}: {msg}", at_runtime=True)
    return fail


def _check_dims(fail, got, want, what):
    if tuple(got) != tuple(want):
        fail(f"{what} has shape {list(got)}, expected {list(want)}")


# ---- AXIS_ALIGNED_BBOX_TRANSFORM ------------------------------------------------------------------
@register
class AxisAlignedBboxTransform(Op):
    """Refine [x1, y1, x2, y2] boxes by per-class [dx, dy, dw, dh] deltas, clipped to each
    box's image: out = corners(center + d_xy * size, exp(d_wh) * size)."""
    name = "AXIS_ALIGNED_BBOX_TRANSFORM"
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
            for where, idx, rank, what in (("input", 0, 2, "boxes"), ("input", 1, 2, "deltas"),
                                           ("input", 2, 1, "batch index"), ("input", 3, 2, "image info"),
                                           ("output", 0, 2, "boxes")):
                _check_rank(sig, where, idx, rank, what)
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
        r = _rank_of(fail, ins[0], 2, "input 0 (boxes)")
        d = _rank_of(fail, ins[1], 2, "input 1 (deltas)")
        bi = _rank_of(fail, ins[2], 1, "input 2 (batch index)")
        info = _rank_of(fail, ins[3], 2, "input 3 (image info)")
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
            for where, idx, rank, what in (("input", 0, 4, "scores"), ("input", 1, 4, "deltas"),
                                           ("input", 2, 2, "anchors"), ("input", 3, 2, "image info"),
                                           ("output", 0, 1, "scores"), ("output", 1, 2, "boxes"),
                                           ("output", 2, 1, "batch index")):
                _check_rank(sig, where, idx, rank, what)
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
        s = _rank_of(fail, ins[0], 4, "input 0 (scores)")
        d = _rank_of(fail, ins[1], 4, "input 1 (deltas)")
        a = _rank_of(fail, ins[2], 2, "input 2 (anchors)")
        info = _rank_of(fail, ins[3], 2, "input 3 (image info)")
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
            for where, idx, rank, what in (("input", 0, 3, "scores"), ("input", 1, 3, "deltas"),
                                           ("input", 2, 2, "anchors"), ("output", 0, 2, "scores"),
                                           ("output", 1, 3, "boxes"), ("output", 2, 2, "classes"),
                                           ("output", 3, 1, "number of detections")):
                _check_rank(sig, where, idx, rank, what)
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
        s = _rank_of(fail, ins[0], 3, "input 0 (scores)")
        d = _rank_of(fail, ins[1], 3, "input 1 (deltas)")
        a = _rank_of(fail, ins[2], 2, "input 2 (anchors)")
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
            for where, idx, rank, what in (("input", 0, 4, "heatmaps"), ("input", 1, 2, "boxes"),
                                           ("output", 0, 2, "scores"), ("output", 1, 3, "keypoints")):
                _check_rank(sig, where, idx, rank, what)
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
