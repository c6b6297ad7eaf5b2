"""Object-detection operations: BOX_WITH_NMS_LIMIT, ROI_ALIGN, ROI_POOLING.

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


def _check_box_type(fail, info, label, t):
    """A box tensor for data of type t: same float type, or QUANT16_ASYMM (0.125, 0)."""
    if t in QUANT8:
        if info.type != Q16A:
            fail(f"{label} has type {tname(info.type)}, expected TENSOR_QUANT16_ASYMM for {tname(t)} data")
        if info.scale != BOX_SCALE or info.zp != 0:
            fail(f"{label} (TENSOR_QUANT16_ASYMM boxes) must have scale 0.125 and zeroPoint 0, "
                 f"got {info.scale} and {info.zp}")
    elif info.type != t:
        fail(f"{label} has type {tname(info.type)}, expected {tname(t)} (the type of input 0)")


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
    """IoU of each row of boxes (k, 4) with box (4,), float32 in the reference's order."""
    area1 = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    area2 = (box[2] - box[0]) * (box[3] - box[1])
    w = np.minimum(boxes[:, 2], box[2]) - np.maximum(boxes[:, 0], box[0])
    h = np.minimum(boxes[:, 3], box[3]) - np.maximum(boxes[:, 1], box[1])
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


def _select_class(scores, boxes, limit, kernel, nms_th):
    """Soft/hard NMS of one class.  scores (m,) float32 (updated in place), boxes (m, 4).
    Returns the candidate positions in selection order."""
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
            s = scores[rest] * kernel(_iou(boxes[rest], boxes[order[start]]))
            scores[rest] = s
            gone = s < nms_th
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
        _check_box_type(sig.fail, sig.ins[1], "input 1 (boxes)", t)
        _check_type(sig, "input", 2, I32, "batch index")
        fs = _float_scalar(t)
        for k in (3, 6, 7, 8):
            check_scalar_type(sig, k, fs, NMS_NAMES[k])
        for k in (4, 5):
            check_scalar_type(sig, k, C.INT32, NMS_NAMES[k])
        sig.same_type("output", 0, t)
        sig.same_quant("output", 0, sig.ins[0])
        _check_box_type(sig.fail, sig.outs[1], "output 1 (boxes)", t)
        _check_type(sig, "output", 2, I32, "classes")
        _check_type(sig, "output", 3, I32, "batch index")
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
        _check_box_type(sig.fail, sig.ins[1], "input 1 (regions of interest)", t)
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
