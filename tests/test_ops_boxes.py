"""Box-decoding detection operations through the C library: AXIS_ALIGNED_BBOX_TRANSFORM,
GENERATE_PROPOSALS, DETECTION_POSTPROCESSING, HEATMAP_MAX_KEYPOINT, and an SSD-style
detection head (anchors, box decoding, DETECTION_POSTPROCESSING) against plain numpy.

The references below are literal loop transcriptions of the documented semantics (hard NMS
walks the candidate list and swaps dropped entries to the end, as Android's reference does,
so ties are checked too).  The CTS vectors cover the common cases; these tests cover the
corners: no detections, everything suppressed, score ties, degenerate boxes, zero boxes,
quantized boxes, run-time failures and validation reasons.
"""
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nnhelp  # noqa: E402
from nnhelp import T, Opd, lib, run_op, run_graph, zero_batch, expect_fail  # noqa: E402

pytestmark = pytest.mark.skipif(lib is None, reason="library not built")

BAD_DATA, OP_FAILED = 4, 5
f32 = np.float32
rng = np.random.default_rng(7)


def ok(res):
    code, out = res
    assert code == 0, out
    return out


def q16a(dims, data=None, const=False, zp=0):
    return Opd("TENSOR_QUANT16_ASYMM", dims, data, 0.125, zp, const)


def q16s(dims, data=None, const=False):
    return Opd("TENSOR_QUANT16_SYMM", dims, data, 0.125, 0, const)


# ---- references (loops; test-only) ------------------------------------------------------------
def ref_iou(a, b):
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    w = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    h = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    inter = w * h
    return inter / (area_a + area_b - inter)


def ref_hard_nms(cands, score, box, iou_th, limit):
    """cands: list of ids; score(id), box(id).  Returns ids in selection order."""
    sel = list(cands)
    start, end = 0, len(sel)
    if limit < 0:
        limit = len(sel)
    while start < end and start < limit:
        j = max(range(start, end), key=lambda k: (score(sel[k]), -k))   # first maximum
        sel[start], sel[j] = sel[j], sel[start]
        i = start + 1
        while i < end:
            if ref_iou(box(sel[i]), box(sel[start])) >= iou_th:
                end -= 1
                sel[i], sel[end] = sel[end], sel[i]
            else:
                i += 1
        start += 1
    return sel[:start]


def ref_transform(roi, d, img_h, img_w):
    w, h = roi[2] - roi[0], roi[3] - roi[1]
    cx, cy = (roi[0] + roi[2]) / 2, (roi[1] + roi[3]) / 2
    nw, nh = math.exp(d[2]) * w, math.exp(d[3]) * h
    ncx, ncy = cx + d[0] * w, cy + d[1] * h
    box = [ncx - nw / 2, ncy - nh / 2, ncx + nw / 2, ncy + nh / 2]
    lims = [img_w, img_h, img_w, img_h]
    return [min(max(v, 0.0), lim) for v, lim in zip(box, lims)]


def random_boxes(n, size=20.0):
    xy = rng.uniform(0, size * 0.7, (n, 2))
    wh = rng.uniform(0.5, size * 0.4, (n, 2))
    return np.concatenate([xy, xy + wh], axis=1).astype(f32)


# ---- AXIS_ALIGNED_BBOX_TRANSFORM ------------------------------------------------------------------
def aabbt_ops(rois, deltas, bids, image, t="f32"):
    n, c4 = len(rois), (deltas.shape[1] if len(deltas) else 8)
    if t == "f32":
        ins = [T.f32([n, 4], rois), T.f32([n, c4], deltas), T.i32t([n], bids), T.f32([len(image), 2], image)]
        out = T.f32([n, c4])
    elif t == "f16":
        ins = [T.f16([n, 4], rois), T.f16([n, c4], deltas), T.i32t([n], bids), T.f16([len(image), 2], image)]
        out = T.f16([n, c4])
    else:
        mk = T.q8 if t == "q8" else T.q8s
        ins = [q16a([n, 4], rois), mk([n, c4], deltas, 0.05, 128 if t == "q8" else 0), T.i32t([n], bids),
               q16a([len(image), 2], image)]
        out = q16a([n, c4])
    return ins, [out]


def test_bbox_transform_float32_matches_reference():
    n, ncls = 7, 3
    rois = random_boxes(n)
    deltas = rng.normal(0, 0.5, (n, 4 * ncls)).astype(f32)
    bids = np.array([0, 0, 1, 1, 1, 0, 1], np.int32)
    image = np.array([[16, 18], [30, 25]], f32)
    out = ok(run_op("AXIS_ALIGNED_BBOX_TRANSFORM", *aabbt_ops(rois, deltas, bids, image)))[0]
    for r in range(n):
        for c in range(ncls):
            want = ref_transform(rois[r], deltas[r, 4 * c:4 * c + 4], *image[bids[r]])
            np.testing.assert_allclose(out[r, 4 * c:4 * c + 4], want, rtol=1e-5, atol=1e-5)
    assert out.min() >= 0 and (out[:, 0::2] <= image[bids, 1][:, None]).all()


@pytest.mark.parametrize("t", ["q8", "q8s"])
def test_bbox_transform_quantized_boxes(t):
    n = 4
    rois = rng.integers(0, 80, (n, 2))
    rois = np.concatenate([rois, rois + rng.integers(0, 40, (n, 2))], 1).astype(np.uint16)   # 1/8 units
    lo, hi = (0, 256) if t == "q8" else (-128, 128)
    deltas = rng.integers(lo, hi, (n, 8)).astype(np.uint8 if t == "q8" else np.int8)
    image = np.array([[128, 160]], np.uint16)
    out = ok(run_op("AXIS_ALIGNED_BBOX_TRANSFORM", *aabbt_ops(rois, deltas, np.zeros(n, np.int32), image, t)))[0]
    zp = 128 if t == "q8" else 0
    for r in range(n):
        for c in range(2):
            d = (deltas[r, 4 * c:4 * c + 4].astype(float) - zp) * 0.05
            want = ref_transform(rois[r] * 0.125, d, 16.0, 20.0)
            got = out[r, 4 * c:4 * c + 4].astype(float)
            assert np.abs(got - np.round(np.array(want) / 0.125)).max() <= 1


def test_bbox_transform_degenerate_and_zero_boxes():
    rois = np.array([[3, 3, 3, 3], [1, 2, 5, 2]], f32)           # zero width / height are valid
    deltas = np.array([[0.1, 0.1, 1.0, 1.0], [0, 0, 0, 0]], f32)
    out = ok(run_op("AXIS_ALIGNED_BBOX_TRANSFORM", *aabbt_ops(rois, deltas, np.zeros(2, np.int32),
                                                              np.array([[10, 10]], f32))))[0]
    np.testing.assert_allclose(out, [[3, 3, 3, 3], [1, 2, 5, 2]], atol=1e-6)
    ins, outs = aabbt_ops(np.zeros((1, 4), f32), np.zeros((1, 8), f32), np.zeros(1, np.int32),
                          np.array([[10, 10]], f32))
    ins[0], ins[1], ins[2] = zero_batch(ins[0]), zero_batch(ins[1]), zero_batch(ins[2])
    out = ok(run_op("AXIS_ALIGNED_BBOX_TRANSFORM", ins, [T.f32([0, 0])]))[0]
    assert out.shape == (0, 8)


def test_bbox_transform_runtime_failures():
    image = np.array([[10, 10]], f32)
    res = run_op("AXIS_ALIGNED_BBOX_TRANSFORM", *aabbt_ops(np.array([[5, 0, 1, 1]], f32), np.zeros((1, 4), f32),
                                                           np.zeros(1, np.int32), image))
    expect_fail(res, OP_FAILED, "AXIS_ALIGNED_BBOX_TRANSFORM", "x1 <= x2")
    res = run_op("AXIS_ALIGNED_BBOX_TRANSFORM", *aabbt_ops(np.array([[0, 0, 1, 1]], f32), np.zeros((1, 4), f32),
                                                           np.array([3], np.int32), image))
    expect_fail(res, OP_FAILED, "input 2 (batch index)", "is 3")


@pytest.mark.strict_mode
def test_bbox_transform_validation():
    ins, outs = aabbt_ops(random_boxes(2), np.zeros((2, 8), f32), np.zeros(2, np.int32), np.array([[9, 9]], f32))
    add = nnhelp.add_op_code
    assert add("AXIS_ALIGNED_BBOX_TRANSFORM", ins, outs) == (0, "")
    expect_fail(add("AXIS_ALIGNED_BBOX_TRANSFORM", ins[:3], outs), BAD_DATA, "inputs")
    bad = list(ins)
    bad[1] = T.f32([2, 6])
    expect_fail(add("AXIS_ALIGNED_BBOX_TRANSFORM", bad, outs), BAD_DATA, "input 1 (deltas)", "4 * the number")
    bad = list(ins)
    bad[3] = T.f16([1, 2])
    expect_fail(add("AXIS_ALIGNED_BBOX_TRANSFORM", bad, outs), BAD_DATA, "input 3 (image info)", "TENSOR_FLOAT32")
    qi, qo = aabbt_ops(np.zeros((2, 4), np.uint16), np.zeros((2, 8), np.uint8), np.zeros(2, np.int32),
                       np.array([[9, 9]], np.uint16), "q8")
    assert add("AXIS_ALIGNED_BBOX_TRANSFORM", qi, qo) == (0, "")
    bad = list(qi)
    bad[0] = Opd("TENSOR_QUANT16_ASYMM", [2, 4], None, 0.25, 0)
    expect_fail(add("AXIS_ALIGNED_BBOX_TRANSFORM", bad, qo), BAD_DATA, "input 0 (boxes", "0.125")
    bad = list(qi)
    bad[1] = T.f32([2, 8])
    expect_fail(add("AXIS_ALIGNED_BBOX_TRANSFORM", bad, qo), BAD_DATA, "input 1 (deltas)", "TENSOR_QUANT8_ASYMM")
    bad = list(ins)
    bad[2] = Opd("TENSOR_INT32", [2], None, 0.0, 0, const=None)
    bad[2].const = False
    assert add("AXIS_ALIGNED_BBOX_TRANSFORM", bad, outs) == (0, "")
    bad[2] = Opd("TENSOR_INT32", [2], None)
    bad[2].type = 5   # batch index of the wrong type
    bad[2].scale = 1.0
    expect_fail(add("AXIS_ALIGNED_BBOX_TRANSFORM", bad, outs), BAD_DATA, "input 2 (batch index)", "TENSOR_INT32")


# ---- GENERATE_PROPOSALS ---------------------------------------------------------------------------
def ref_proposals(scores, deltas, anchors, image, hs, ws, pre, post, iou_th, min_size):
    """NHWC scores (B, H, W, A), deltas (B, H, W, 4A) -> list of (score, box, batch)."""
    b, h, w, a = scores.shape
    res = []
    for k in range(b):
        rois, sc = [], []
        for y in range(h):
            for x in range(w):
                for j in range(a):
                    an = anchors[j] + np.array([x * ws, y * hs, x * ws, y * hs])
                    rois.append(ref_transform(an, deltas[k, y, x, 4 * j:4 * j + 4], image[k][0], image[k][1]))
                    sc.append(float(scores[k, y, x, j]))
        ids = list(range(len(sc)))
        if 0 < pre < len(ids):
            ids = sorted(ids, key=lambda i: -sc[i])[:pre]
        ids = [i for i in ids
               if rois[i][2] - rois[i][0] > min_size and rois[i][3] - rois[i][1] > min_size
               and rois[i][0] + (rois[i][2] - rois[i][0]) / 2 < image[k][1]
               and rois[i][1] + (rois[i][3] - rois[i][1]) / 2 < image[k][0]]
        for i in ref_hard_nms(ids, lambda i: sc[i], lambda i: rois[i], iou_th, post if post > 0 else -1):
            res.append((sc[i], rois[i], k))
    return res


def gp_ops(scores, deltas, anchors, image, params, nchw=False, t="f32"):
    hs, ws, pre, post, iou_th, min_size = params
    s, d = (scores.transpose(0, 3, 1, 2), deltas.transpose(0, 3, 1, 2)) if nchw else (scores, deltas)
    if t == "f32":
        ins = [T.f32(s.shape, s), T.f32(d.shape, d), T.f32(anchors.shape, anchors), T.f32(image.shape, image)]
        fs, outs = T.f32s, [T.f32([0]), T.f32([0, 4]), T.i32t([0])]
    else:
        ins = [T.q8(s.shape, s, 0.01, 100), T.q8(d.shape, d, 0.05, 128), q16s(anchors.shape, anchors),
               q16a(image.shape, image)]
        fs, outs = T.f32s, [T.q8([0], None, 0.01, 100), q16a([0, 4]), T.i32t([0])]
    ins += [fs(hs), fs(ws), T.i32(pre), T.i32(post), fs(iou_th), fs(min_size), T.b(nchw)]
    return ins, outs


def gp_case(b=2, h=4, w=3, a=3):
    scores = rng.uniform(0, 1, (b, h, w, a)).astype(f32)
    deltas = rng.normal(0, 0.3, (b, h, w, 4 * a)).astype(f32)
    anchors = np.array([[0, 0, 8, 8], [0, 0, 16, 8], [-2, -2, 6, 12]][:a], f32)
    image = np.array([[32, 28], [24, 30]][:b], f32)
    return scores, deltas, anchors, image


def check_proposals(out, want):
    assert out[0].shape == (len(want),)
    np.testing.assert_allclose(out[0], [s for s, _, _ in want], rtol=1e-6)
    np.testing.assert_allclose(out[1], np.array([bx for _, bx, _ in want]).reshape(-1, 4), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(out[2], [k for _, _, k in want])


@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("pre,post", [(-1, -1), (10, 4), (0, 2), (5, 0)])
def test_generate_proposals_matches_reference(nchw, pre, post):
    scores, deltas, anchors, image = gp_case()
    params = (8.0, 8.0, pre, post, 0.4, 1.0)
    out = ok(run_op("GENERATE_PROPOSALS", *gp_ops(scores, deltas, anchors, image, params, nchw)))
    check_proposals(out, ref_proposals(scores, deltas, anchors, image, *params))


def test_generate_proposals_ties_keep_the_first_box():
    scores, deltas, anchors, image = gp_case(b=1)
    scores[:] = 0.5                                      # every score equal
    deltas[:] = 0
    params = (1.0, 1.0, -1, -1, 0.3, 0.0)
    out = ok(run_op("GENERATE_PROPOSALS", *gp_ops(scores, deltas, anchors, image, params)))
    check_proposals(out, ref_proposals(scores, deltas, anchors, image, *params))


def test_generate_proposals_everything_filtered_gives_zero_rows():
    scores, deltas, anchors, image = gp_case()
    params = (8.0, 8.0, -1, -1, 0.4, 1000.0)              # min_size larger than any box
    out = ok(run_op("GENERATE_PROPOSALS", *gp_ops(scores, deltas, anchors, image, params)))
    assert [o.shape for o in out] == [(0,), (0, 4), (0,)]


def test_generate_proposals_quantized():
    b, h, w, a = 1, 3, 3, 2
    scores = rng.integers(0, 256, (b, h, w, a)).astype(np.uint8)
    deltas = rng.integers(100, 156, (b, h, w, 4 * a)).astype(np.uint8)
    anchors = np.array([[0, 0, 64, 64], [0, 0, 128, 64]], np.int16)
    image = np.array([[256, 256]], np.uint16)
    params = (8.0, 8.0, -1, -1, 0.5, 1.0)
    out = ok(run_op("GENERATE_PROPOSALS", *gp_ops(scores, deltas, anchors, image, params, t="q8")))
    want = ref_proposals((scores.astype(f32) - 100) * f32(0.01), (deltas.astype(f32) - 128) * f32(0.05),
                         anchors * 0.125, image * 0.125, *params)
    assert out[0].shape == (len(want),)
    np.testing.assert_array_equal(out[0], [round(s / 0.01) + 100 for s, _, _ in want])
    assert np.abs(out[1].astype(float) - np.array([bx for _, bx, _ in want]) / 0.125).max() <= 1


@pytest.mark.strict_mode
def test_generate_proposals_validation_and_failures():
    scores, deltas, anchors, image = gp_case()
    params = (8.0, 8.0, -1, -1, 0.4, 1.0)
    ins, outs = gp_ops(scores, deltas, anchors, image, params)
    add = nnhelp.add_op_code
    assert add("GENERATE_PROPOSALS", ins, outs) == (0, "")
    bad = list(ins)
    bad[4] = T.f32s(0.0)
    expect_fail(add("GENERATE_PROPOSALS", bad, outs), BAD_DATA, "input 4 (height stride)", "> 0")
    bad = list(ins)
    bad[10] = T.i32(0)
    expect_fail(add("GENERATE_PROPOSALS", bad, outs), BAD_DATA, "input 10 (NCHW layout flag)", "BOOL")
    bad = list(ins)
    bad[1] = T.f32([2, 4, 3, 8])
    expect_fail(add("GENERATE_PROPOSALS", bad, outs), BAD_DATA, "input 1 (deltas)", "[2, 4, 3, 12]")
    qi, qo = gp_ops(np.zeros((1, 2, 2, 1), np.uint8), np.zeros((1, 2, 2, 4), np.uint8),
                    np.zeros((1, 4), np.int16), np.zeros((1, 2), np.uint16), params, t="q8")
    assert add("GENERATE_PROPOSALS", qi, qo) == (0, "")
    bad = list(qi)
    bad[2] = q16a([1, 4])
    expect_fail(add("GENERATE_PROPOSALS", bad, qo), BAD_DATA, "input 2 (anchors)", "TENSOR_QUANT16_SYMM")
    anchors_bad = anchors.copy()
    anchors_bad[0] = [5, 0, 1, 4]
    res = run_op("GENERATE_PROPOSALS", *gp_ops(scores, deltas, anchors_bad, image, params))
    expect_fail(res, OP_FAILED, "input 2 (anchors)", "x1 <= x2")


# ---- DETECTION_POSTPROCESSING ---------------------------------------------------------------------
def decode_ref(deltas, anchors, scales):
    sy, sx, sh, sw = scales
    boxes = []
    for d, (ay, ax, ah, aw) in zip(deltas, anchors):
        yc, xc = ay + ah * d[0] / sy, ax + aw * d[1] / sx
        hh, wh = ah * math.exp(d[2] / sh) / 2, aw * math.exp(d[3] / sw) / 2
        boxes.append([yc - hh, xc - wh, yc + hh, xc + wh])
    return boxes


def ref_postprocess(scores, deltas, anchors, scales, regular, max_det, max_cls, per_cls, score_th, iou_th, bg):
    """One image: list of (score, box, class)."""
    na, nc = scores.shape
    boxes = decode_ref(deltas, anchors, scales)
    shift = 0 if bg else 1
    if regular:
        sel = []
        for c in range(1, nc):
            cands = [a for a in range(na) if scores[a, c] > score_th]
            for a in ref_hard_nms(cands, lambda a: scores[a, c], lambda a: boxes[a], iou_th, per_cls):
                sel.append((float(scores[a, c]), a, c))
        sel = sorted(sel, key=lambda t: -t[0])[:max_det]                       # stable
        return [(s, boxes[a], c - shift) for s, a, c in sel]
    best = [max(scores[a, 1:]) for a in range(na)]
    cands = [a for a in range(na) if best[a] > score_th]
    res = []
    for a in ref_hard_nms(cands, lambda a: best[a], lambda a: boxes[a], iou_th, max_det):
        order = sorted(range(1, nc), key=lambda c: -scores[a, c])[:min(nc - 1, max_cls)]
        res += [(float(scores[a, c]), boxes[a], c - shift) for c in order]
    return res


def dp_ops(scores, deltas, anchors, p, t="f32"):
    b, na, nc = scores.shape
    mk, fs = (T.f32, T.f32s) if t == "f32" else (T.f16, T.f16s)
    ins = [mk(list(scores.shape), scores), mk(list(deltas.shape), deltas), mk([na, 4], anchors, const=True),
           fs(p["scales"][0]), fs(p["scales"][1]), fs(p["scales"][2]), fs(p["scales"][3]), T.b(p["regular"]),
           T.i32(p["max_det"]), T.i32(p["max_cls"]), T.i32(p["per_cls"]), fs(p["score_th"]), fs(p["iou_th"]),
           T.b(p["bg"])]
    outs = [mk([0, 0]), mk([0, 0, 0]), T.i32t([0, 0]), T.i32t([0])]
    return ins, outs


def dp_params(**kw):
    p = dict(scales=(10.0, 10.0, 5.0, 5.0), regular=True, max_det=5, max_cls=2, per_cls=3, score_th=0.3,
             iou_th=0.5, bg=False)
    p.update(kw)
    return p


def check_postprocess(out, scores, deltas, anchors, p):
    b = scores.shape[0]
    n_out = p["max_det"] * (1 if p["regular"] else p["max_cls"])
    assert [o.shape for o in out] == [(b, n_out), (b, n_out, 4), (b, n_out), (b,)]
    for k in range(b):
        want = ref_postprocess(scores[k], deltas[k], anchors, p["scales"], p["regular"], p["max_det"],
                               p["max_cls"], p["per_cls"], p["score_th"], p["iou_th"], p["bg"])
        n = len(want)
        assert out[3][k] == n
        np.testing.assert_allclose(out[0][k, :n], [s for s, _, _ in want], rtol=1e-6)
        np.testing.assert_allclose(out[1][k, :n], np.array([bx for _, bx, _ in want]).reshape(n, 4),
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(out[2][k, :n], [c for _, _, c in want])
        assert not out[0][k, n:].any() and not out[1][k, n:].any() and not out[2][k, n:].any()


def anchor_grid(n):
    cy = rng.uniform(0.1, 0.9, n)
    cx = rng.uniform(0.1, 0.9, n)
    return np.stack([cy, cx, rng.uniform(0.1, 0.4, n), rng.uniform(0.1, 0.4, n)], 1).astype(f32)


@pytest.mark.parametrize("regular", [True, False])
@pytest.mark.parametrize("bg", [False, True])
def test_postprocess_matches_reference(regular, bg):
    b, na, nc = 2, 12, 4
    scores = (rng.integers(0, 10, (b, na, nc)) / 10).astype(f32)      # coarse: many ties
    deltas = rng.normal(0, 1, (b, na, 5)).astype(f32)                  # 5th value ignored
    anchors = anchor_grid(na)
    p = dp_params(regular=regular, bg=bg)
    out = ok(run_op("DETECTION_POSTPROCESSING", *dp_ops(scores, deltas, anchors, p)))
    check_postprocess(out, scores, deltas, anchors, p)


def test_postprocess_no_detections():
    scores = np.full((1, 6, 3), 0.1, f32)
    deltas = np.zeros((1, 6, 4), f32)
    anchors = anchor_grid(6)
    for regular in (True, False):
        p = dp_params(regular=regular, score_th=0.5)
        out = ok(run_op("DETECTION_POSTPROCESSING", *dp_ops(scores, deltas, anchors, p)))
        assert out[3][0] == 0 and not out[0].any() and not out[1].any()


def test_postprocess_identical_boxes_are_suppressed_to_one():
    anchors = np.tile(np.array([[0.5, 0.5, 0.2, 0.2]], f32), (5, 1))
    scores = np.zeros((1, 5, 2), f32)
    scores[0, :, 1] = [0.6, 0.9, 0.9, 0.7, 0.8]                      # a tie at the top
    p = dp_params(per_cls=5, max_det=5)
    out = ok(run_op("DETECTION_POSTPROCESSING", *dp_ops(scores, np.zeros((1, 5, 4), f32), anchors, p)))
    assert out[3][0] == 1 and out[0][0, 0] == np.float32(0.9)
    check_postprocess(out, scores, np.zeros((1, 5, 4), f32), anchors, p)


def _per_class_loop(scores, boxes, score_th, iou_th, limit):
    """Every class through hard_nms (the reference's own walk), one class after another."""
    from nnapi_py.ops.nms import hard_nms
    out = []
    for c in range(scores.shape[1]):
        cand = np.flatnonzero(scores[:, c] > score_th)
        out.append(cand[hard_nms(scores[cand, c], boxes[cand], iou_th, limit)].tolist())
    return out


@pytest.mark.parametrize("levels", [0, 4, 50])            # 0: float scores, else that many values
@pytest.mark.parametrize("limit", [1, 3, 40, -1])
def test_per_class_hard_nms_is_the_class_by_class_walk(levels, limit):
    """Regular-mode DETECTION_POSTPROCESSING's all-classes NMS keeps, per class, exactly what
    hard_nms keeps (same anchors, same order): distinct scores (the sorted walk), coarse
    scores (ties: the reference's swaps decide), the block boundary (33+ candidates), NaN
    boxes and scores, identical boxes."""
    from nnapi_py.ops.nms import per_class_hard_nms
    r = np.random.default_rng(levels * 100 + limit + 5)
    for na, ncls in ((1, 1), (5, 3), (40, 7), (300, 12)):
        scores = r.uniform(0, 1, (na, ncls)).astype(f32)
        if levels:
            scores = (np.floor(scores * levels) / levels).astype(f32)
        c = r.uniform(0.2, 0.8, (na, 2))
        s = r.uniform(0.02, 0.3, (na, 2))
        boxes = np.concatenate([c - s, c + s], 1).astype(f32)
        if na > 4:
            boxes[3] = boxes[1]                                  # identical boxes
            boxes[4, 0] = np.nan
            scores[2, 0] = np.nan
        for th in (0.3, 0.6):
            kept, nk = per_class_hard_nms(scores, boxes, f32(0.1), f32(th), limit)
            got = [kept[k, :nk[k]].tolist() for k in range(ncls)]
            assert got == _per_class_loop(scores, boxes, f32(0.1), f32(th), limit)


def test_postprocess_regular_ssd_sized_matches_reference():
    """A larger regular-mode head (200 anchors, 6 classes, some coarse scores) against the
    scalar reference."""
    b, na, nc = 1, 200, 7
    scores = rng.uniform(0, 1, (b, na, nc)).astype(f32)
    scores[..., 3] = np.floor(scores[..., 3] * 8) / 8                  # one class with ties
    deltas = rng.normal(0, 0.5, (b, na, 4)).astype(f32)
    anchors = anchor_grid(na)
    p = dp_params(max_det=60, per_cls=25, score_th=0.2, iou_th=0.4)
    out = ok(run_op("DETECTION_POSTPROCESSING", *dp_ops(scores, deltas, anchors, p)))
    check_postprocess(out, scores, deltas, anchors, p)


def test_postprocess_float16():
    scores = (rng.integers(0, 10, (1, 8, 3)) / 10).astype(np.float16)
    deltas = rng.normal(0, 1, (1, 8, 4)).astype(np.float16)
    anchors = anchor_grid(8).astype(np.float16)
    p = dp_params()
    out = ok(run_op("DETECTION_POSTPROCESSING", *dp_ops(scores, deltas, anchors, p, t="f16")))
    assert out[0].dtype == np.float16 and out[3][0] > 0


@pytest.mark.strict_mode
def test_postprocess_validation():
    scores = np.zeros((1, 4, 3), f32)
    ins, outs = dp_ops(scores, np.zeros((1, 4, 4), f32), anchor_grid(4), dp_params())
    add = nnhelp.add_op_code
    assert add("DETECTION_POSTPROCESSING", ins, outs) == (0, "")
    for k, v, words in ((8, T.i32(0), ("input 8 (max_num_detections)", "> 0")),
                        (3, T.f32s(0.0), ("input 3 (y scale)", "> 0")),
                        (11, T.f32s(-1.0), ("input 11 (score threshold)", ">= 0")),
                        (10, T.i32(0), ("input 10 (max detections per class)", "true")),
                        (12, T.f16s(0.5), ("input 12 (iou threshold)", "FLOAT32"))):
        bad = list(ins)
        bad[k] = v
        expect_fail(add("DETECTION_POSTPROCESSING", bad, outs), BAD_DATA, "DETECTION_POSTPROCESSING", *words)
    bad = list(ins)
    bad[7], bad[9] = T.b(False), T.i32(0)
    expect_fail(add("DETECTION_POSTPROCESSING", bad, outs), BAD_DATA, "input 9 (max classes per detection)")
    bad = list(ins)
    bad[0] = T.f32([1, 4, 1])
    expect_fail(add("DETECTION_POSTPROCESSING", bad, outs), BAD_DATA, "at least 2 classes")
    bad = list(ins)
    bad[1] = T.f32([1, 4, 3])
    expect_fail(add("DETECTION_POSTPROCESSING", bad, outs), BAD_DATA, "input 1 (deltas)", "at least 4")
    bad = list(ins)
    bad[0] = T.q8([1, 4, 3], None, 0.1, 0)
    expect_fail(add("DETECTION_POSTPROCESSING", bad, outs), BAD_DATA, "input 0 (scores)", "TENSOR_FLOAT32")


def test_ssd_head_matches_numpy():
    """An SSD-style head: class logits -> LOGISTIC, box regression and generated anchors ->
    DETECTION_POSTPROCESSING (regular NMS), compared with a straightforward numpy pipeline."""
    grid, ratios, nc = 4, (1.0, 2.0, 0.5), 4
    anchors = []
    for y in range(grid):
        for x in range(grid):
            for r in ratios:
                s = 0.3
                anchors.append([(y + 0.5) / grid, (x + 0.5) / grid, s / math.sqrt(r), s * math.sqrt(r)])
    anchors = np.array(anchors, f32)
    na = len(anchors)
    logits = rng.normal(-1.5, 2.0, (1, na, nc)).astype(f32)
    regression = rng.normal(0, 0.8, (1, na, 4)).astype(f32)
    fs = T.f32s
    operands = [T.f32([1, na, nc], logits), T.f32([1, na, nc]), T.f32([1, na, 4], regression),
                T.f32([na, 4], anchors, const=True),
                fs(10.0), fs(10.0), fs(5.0), fs(5.0), T.b(True), T.i32(10), T.i32(1), T.i32(5), fs(0.5),
                fs(0.45), T.b(False),
                T.f32([1, 10]), T.f32([1, 10, 4]), T.i32t([1, 10]), T.i32t([1])]
    ops = [("LOGISTIC", [0], [1]), ("DETECTION_POSTPROCESSING", [1, 2, 3] + list(range(4, 15)), [15, 16, 17, 18])]
    code, out = run_graph(operands, ops, inputs=[0, 2], outputs=[15, 16, 17, 18])
    assert code == 0, out
    scores_np = 1 / (1 + np.exp(-logits[0].astype(np.float64)))
    # plain numpy reference: decode every anchor, per-class greedy NMS, best overall
    d = regression[0].astype(np.float64)
    yc = anchors[:, 0] + d[:, 0] / 10 * anchors[:, 2]
    xc = anchors[:, 1] + d[:, 1] / 10 * anchors[:, 3]
    h = anchors[:, 2] * np.exp(d[:, 2] / 5)
    w = anchors[:, 3] * np.exp(d[:, 3] / 5)
    boxes = np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], 1)
    dets = []
    for c in range(1, nc):
        order = [a for a in np.argsort(-scores_np[:, c], kind="stable") if scores_np[a, c] > 0.5]
        kept = []
        for a in order:
            if len(kept) == 5:
                break
            if all(ref_iou(boxes[a], boxes[k]) < 0.45 for k in kept):
                kept.append(a)
        dets += [(scores_np[a, c], a, c - 1) for a in kept]
    dets = sorted(dets, key=lambda t: -t[0])[:10]
    n = len(dets)
    assert n > 0 and out[3][0] == n
    np.testing.assert_allclose(out[0][0, :n], [s for s, _, _ in dets], rtol=1e-5)
    np.testing.assert_array_equal(out[2][0, :n], [c for _, _, c in dets])
    np.testing.assert_allclose(out[1][0, :n], boxes[[a for _, a, _ in dets]], rtol=1e-4, atol=1e-5)


# ---- HEATMAP_MAX_KEYPOINT -------------------------------------------------------------------------
def ref_heatmap(hm, boxes, atol=1e-5, rtol=1e-5):
    """NHWC heatmaps (N, S, S, K) -> scores (N, K), keypoints (N, K, 2); loops, float64."""
    n, s, _, k = hm.shape
    scores, kps = np.zeros((n, k)), np.zeros((n, k, 2))
    for i in range(n):
        for j in range(k):
            flat = hm[i, :, :, j].reshape(-1)
            mi = int(np.argmax(flat))
            mh, mw = divmod(mi, s)
            g = np.zeros((3, 3))
            for dh in (-1, 0, 1):
                for dw in (-1, 0, 1):
                    hh, ww = mh + dh, mw + dw
                    hh = 1 if hh < 0 else (s - 2 if hh >= s else hh)
                    ww = 1 if ww < 0 else (s - 2 if ww >= s else ww)
                    g[dh + 1, dw + 1] = hm[i, hh, ww, j]
            b = np.array([-(g[1, 2] - g[1, 0]) / 2, -(g[2, 1] - g[0, 1]) / 2])
            a = np.array([[g[1, 0] - 2 * g[1, 1] + g[1, 2], (g[2, 2] - g[2, 0] - g[0, 2] + g[0, 0]) / 4], [0, 0]])
            a[1, 0] = a[0, 1]
            a[1, 1] = g[0, 1] - 2 * g[1, 1] + g[2, 1]
            det = a[0, 0] * a[1, 1] - a[0, 1] * a[1, 0]
            delta, score = np.zeros(2), flat[mi]
            if not abs(det) < atol + rtol * a[0, 0] * a[1, 1]:
                delta = np.array([a[1, 1] * b[0] - a[0, 1] * b[1], a[0, 0] * b[1] - a[1, 0] * b[0]]) / det
                if np.abs(delta).max() > 1.5:
                    delta *= 1.5 / np.abs(delta).max()
                score = g[1, 1] - b @ delta + delta @ a @ delta / 2
            x1, y1, x2, y2 = boxes[i]
            scores[i, j] = score
            kps[i, j] = [(mw + delta[0] + 0.5) / s * (x2 - x1) + x1, (mh + delta[1] + 0.5) / s * (y2 - y1) + y1]
    return scores, kps


def hm_ops(hm, boxes, nchw=False, t="f32"):
    h = hm.transpose(0, 3, 1, 2) if nchw else hm
    n, k = hm.shape[0], hm.shape[3]
    if t == "f32":
        return [T.f32(h.shape, h), T.f32([n, 4], boxes), T.b(nchw)], [T.f32([n, k]), T.f32([n, k, 2])]
    return ([T.q8(h.shape, h, 0.01, 0), q16a([n, 4], boxes), T.b(nchw)],
            [T.q8([n, k], None, 0.02, 10), q16a([n, k, 2])])


@pytest.mark.parametrize("nchw", [False, True])
def test_heatmap_matches_reference(nchw):
    hm = rng.normal(0, 1, (3, 6, 6, 4)).astype(f32)
    hm[0, 0, 0, 0] = 9.0                       # maximum on the border: neighbours reflect
    hm[1, 5, 2, 1] = 9.0
    boxes = random_boxes(3)
    out = ok(run_op("HEATMAP_MAX_KEYPOINT", *hm_ops(hm, boxes, nchw)))
    sc, kp = ref_heatmap(hm.astype(np.float64), boxes.astype(np.float64))
    np.testing.assert_allclose(out[0], sc, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out[1], kp, rtol=1e-4, atol=1e-4)


def test_heatmap_flat_map_keeps_the_first_maximum():
    hm = np.ones((1, 4, 4, 2), f32)                  # singular fit: no refinement
    boxes = np.array([[0, 0, 8, 8]], f32)
    out = ok(run_op("HEATMAP_MAX_KEYPOINT", *hm_ops(hm, boxes)))
    np.testing.assert_allclose(out[0], [[1, 1]])
    np.testing.assert_allclose(out[1], [[[1, 1], [1, 1]]])      # cell (0, 0) centre: 0.5 / 4 * 8


def test_heatmap_quantized():
    hm = rng.integers(0, 256, (2, 5, 5, 3)).astype(np.uint8)
    boxes = np.array([[0, 0, 80, 64], [8, 16, 72, 96]], np.uint16)
    out = ok(run_op("HEATMAP_MAX_KEYPOINT", *hm_ops(hm, boxes, t="q8")))
    sc, kp = ref_heatmap(hm.astype(np.float64) * 0.01, boxes * 0.125)
    assert np.abs(out[0].astype(float) - (np.round(sc / 0.02) + 10)).max() <= 1
    assert np.abs(out[1].astype(float) - kp / 0.125).max() <= 1


@pytest.mark.strict_mode
def test_heatmap_validation():
    ins, outs = hm_ops(np.zeros((1, 4, 4, 2), f32), np.zeros((1, 4), f32))
    add = nnhelp.add_op_code
    assert add("HEATMAP_MAX_KEYPOINT", ins, outs) == (0, "")
    bad = list(ins)
    bad[1] = T.f16([1, 4])
    expect_fail(add("HEATMAP_MAX_KEYPOINT", bad, outs), BAD_DATA, "input 1 (boxes)", "TENSOR_FLOAT32")
    bad = list(ins)
    bad[0] = T.f32([1, 4, 4])
    expect_fail(add("HEATMAP_MAX_KEYPOINT", bad, outs), BAD_DATA, "input 0 (heatmaps)", "4-D")
    res = run_op("HEATMAP_MAX_KEYPOINT", [T.f32([1, 1, 1, 2], np.zeros((1, 1, 1, 2), f32)),
                                          T.f32([1, 4], np.zeros((1, 4), f32)), T.b(False)], outs)
    expect_fail(res, BAD_DATA, "at least 2")
    res = run_op("HEATMAP_MAX_KEYPOINT", [T.f32([1, 4, 3, 2], np.zeros((1, 4, 3, 2), f32)),
                                          T.f32([1, 4], np.zeros((1, 4), f32)), T.b(False)], outs)
    expect_fail(res, BAD_DATA, "square")
    res = run_op("HEATMAP_MAX_KEYPOINT", *hm_ops(np.zeros((1, 4, 4, 2), f32), np.array([[4, 0, 1, 1]], f32)))
    expect_fail(res, OP_FAILED, "x1 <= x2")
