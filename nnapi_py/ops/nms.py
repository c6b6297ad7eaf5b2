"""Shared layer of the detection operations: non-maximum suppression (box_nms.py, proposals.py,
detection.py).

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

DETECTION_POSTPROCESSING in regular mode runs the reference's hard NMS of every class at once
(per_class_hard_nms: with distinct scores the reference's walk is the greedy walk down the
sorted candidates; a class whose walk meets equal scores is redone by the reference's own walk,
whose candidate-list swaps decide ties).
"""
import numpy as np

from .boxes import f32


# ---- BOX_WITH_NMS_LIMIT ----------------------------------------------------------------------
NMS_HARD, NMS_LINEAR, NMS_GAUSSIAN = 0, 1, 2


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
