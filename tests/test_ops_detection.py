"""Detection operations through the C library (cffi ABI mode): BOX_WITH_NMS_LIMIT, ROI_ALIGN,
ROI_POOLING.

Results are compared with literal loop-based re-implementations of the reference semantics
written for these tests (the NMS one walks and swaps the candidate list exactly as the
reference does, so tie-breaking is checked too).  The CTS vectors cover the common cases;
these tests cover the corners: zero selected boxes, everything below the threshold, score
ties, per-class and per-image limits, several batches, soft-NMS score updates, zero regions
flowing into ROI_ALIGN, edge sampling, run-time failures and validation reasons.
"""
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nnhelp  # noqa: E402
from nnhelp import T, Opd, ffi, lib, run_op, last_error  # noqa: E402

pytestmark = pytest.mark.skipif(lib is None, reason="library not built")

BAD_DATA, OP_FAILED = 4, 5
rng = np.random.default_rng(2024)
f32 = np.float32


def ok(res):
    code, out = res
    assert code == 0, out
    return out


def fails(res, code, *words):
    c, msg = res
    assert c == code, f"expected {code}, got {c}: {msg}"
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


def q16(dims, data, const=False):
    return Opd("TENSOR_QUANT16_ASYMM", dims, data, 0.125, 0, const)


def run_graph(operands, operations):
    """Several operations in one model.  Non-constant operands no operation writes are model
    inputs, written operands no operation reads are model outputs (all sized dynamically)."""
    written = {o for _, _, outs in operations for o in outs}
    read = {i for _, ins, _ in operations for i in ins}
    model_ins = [k for k, o in enumerate(operands) if not o.const and k not in written]
    model_outs = [k for k in sorted(written) if k not in read]
    keep = []
    mp = ffi.new("ANeuralNetworksModel**")
    assert lib.ANeuralNetworksModel_create(mp) == 0
    model = mp[0]
    comp = ffi.new("ANeuralNetworksCompilation**")
    ex = ffi.new("ANeuralNetworksExecution**")

    def check(rc, what):
        if rc != 0:
            raise nnhelp.NNCallError(rc, f"{what} -> {rc}: {last_error()}")
    try:
        for k, o in enumerate(operands):
            dims = ffi.new("uint32_t[]", o.dims) if o.dims else ffi.NULL
            keep.append(dims)
            t = ffi.new("ANeuralNetworksOperandType*", {"type": o.type, "dimensionCount": len(o.dims),
                                                        "dimensions": dims, "scale": o.scale, "zeroPoint": o.zp})
            check(lib.ANeuralNetworksModel_addOperand(model, t), f"addOperand {k}")
        for k, o in enumerate(operands):
            if o.const:
                a = np.ascontiguousarray(o.array())
                keep.append(a)
                check(lib.ANeuralNetworksModel_setOperandValue(model, k, ffi.from_buffer(a), a.nbytes), f"value {k}")
        for name, ins, outs in operations:
            check(lib.ANeuralNetworksModel_addOperation(model, nnhelp.op_code(name), len(ins),
                                                        ffi.new("uint32_t[]", ins), len(outs),
                                                        ffi.new("uint32_t[]", outs)), f"addOperation {name}")
        check(lib.ANeuralNetworksModel_identifyInputsAndOutputs(
            model, len(model_ins), ffi.new("uint32_t[]", model_ins), len(model_outs),
            ffi.new("uint32_t[]", model_outs)), "identify")
        check(lib.ANeuralNetworksModel_finish(model), "finish")
        check(lib.ANeuralNetworksCompilation_create(model, comp), "Compilation_create")
        check(lib.ANeuralNetworksCompilation_finish(comp[0]), "Compilation_finish")
        check(lib.ANeuralNetworksExecution_create(comp[0], ex), "Execution_create")
        for pos, k in enumerate(model_ins):
            a = np.ascontiguousarray(operands[k].array())
            keep.append(a)
            check(lib.ANeuralNetworksExecution_setInput(ex[0], pos, ffi.NULL, ffi.from_buffer(a), a.nbytes),
                  f"setInput {pos}")
        bufs = []
        for pos, k in enumerate(model_outs):
            b = np.zeros(1 << 12, nnhelp.DTYPES[operands[k].type])
            bufs.append(b)
            check(lib.ANeuralNetworksExecution_setOutput(ex[0], pos, ffi.NULL, ffi.from_buffer(b), b.nbytes),
                  f"setOutput {pos}")
        check(lib.ANeuralNetworksExecution_compute(ex[0]), "compute")
        res = []
        for pos in range(len(model_outs)):
            r = ffi.new("uint32_t*")
            check(lib.ANeuralNetworksExecution_getOutputOperandRank(ex[0], pos, r), "rank")
            d = ffi.new("uint32_t[]", max(r[0], 1))
            check(lib.ANeuralNetworksExecution_getOutputOperandDimensions(ex[0], pos, d), "dims")
            shape = [d[i] for i in range(r[0])]
            res.append(bufs[pos][:int(np.prod(shape))].reshape(shape))
        return 0, res
    except nnhelp.NNCallError as e:
        return e.code, str(e)
    finally:
        lib.ANeuralNetworksExecution_free(ex[0])
        lib.ANeuralNetworksCompilation_free(comp[0])
        lib.ANeuralNetworksModel_free(model)


# ---- reference re-implementations (loops; test-only) ----------------------------------------
def ref_iou(a, b):
    area_a = f32((a[2] - a[0]) * (a[3] - a[1]))
    area_b = f32((b[2] - b[0]) * (b[3] - b[1]))
    w = f32(max(f32(min(a[2], b[2]) - max(a[0], b[0])), f32(0)))
    h = f32(max(f32(min(a[3], b[3]) - max(a[1], b[1])), f32(0)))
    inter = f32(w * h)
    return f32(inter / f32(f32(area_a + area_b) - inter))


def ref_nms(scores, boxes, batches, score_th, max_det, kind, iou_th, sigma, nms_th):
    """scores (R, C) float32, boxes (R, C*4) float32 -> list of (row, class, score, batch)."""
    scores = np.array(scores, f32)
    nrois, ncls = scores.shape
    boxes = np.asarray(boxes, f32).reshape(nrois, ncls, 4)
    score_th, iou_th, sigma, nms_th = f32(score_th), f32(iou_th), f32(sigma), f32(nms_th)

    def mult(iou):
        if kind == 0:
            return f32(1) if iou < iou_th else f32(0)
        if kind == 1:
            return f32(1) if iou < iou_th else f32(1) - iou
        return f32(np.exp(f32(-1) * iou * iou / sigma))
    out = []
    r0 = 0
    while r0 < nrois:
        r1 = r0
        while r1 < nrois and batches[r1] == batches[r0]:
            r1 += 1
        sel = []                                     # (row, class, score)
        for c in range(1, ncls):
            lst = [r for r in range(r0, r1) if scores[r, c] > score_th]
            limit = len(lst) if max_det < 0 else max_det
            start, end, taken = 0, len(lst), 0
            while start < end and taken < limit:
                best = start
                for k in range(start + 1, end):
                    if scores[lst[k], c] > scores[lst[best], c]:
                        best = k
                lst[start], lst[best] = lst[best], lst[start]
                k = start + 1
                while k < end:
                    r = lst[k]
                    scores[r, c] = f32(scores[r, c] * mult(ref_iou(boxes[r, c], boxes[lst[start], c])))
                    if scores[r, c] < nms_th:
                        end -= 1
                        lst[k], lst[end] = lst[end], lst[k]
                    else:
                        k += 1
                start += 1
                taken += 1
            sel += [(r, c, scores[r, c]) for r in lst[:start]]
        sel.sort(key=lambda e: -e[2])                 # stable
        if max_det >= 0:
            sel = sel[:max_det]
        sel.sort(key=lambda e: (e[1], -e[2]))
        out += [(r, c, s, batches[r0]) for r, c, s in sel]
        r0 = r1
    return out


def ref_roi_align(x, rois, bids, oh, ow, hr, wr, sh, sw, quant=None):
    """x NHWC; rois real coordinates (float32); quant = (in_scale, in_zp, out_scale, out_zp, lo, hi)."""
    n, h, w, c = x.shape
    out = np.zeros((len(rois), oh, ow, c), np.float64)
    hs, ws = f32(1) / f32(hr), f32(1) / f32(wr)
    for r, (roi, b) in enumerate(zip(rois, bids)):
        x1, y1, x2, y2 = (f32(roi[0]) * ws, f32(roi[1]) * hs, f32(roi[2]) * ws, f32(roi[3]) * hs)
        step_w = f32(max(f32(x2 - x1), f32(1)) / f32(ow))
        step_h = f32(max(f32(y2 - y1), f32(1)) / f32(oh))
        gw = sw if sw > 0 else int(math.ceil(step_w))
        gh = sh if sh > 0 else int(math.ceil(step_h))
        bw, bh = f32(step_w / f32(gw)), f32(step_h / f32(gh))
        for i in range(oh):
            for j in range(ow):
                acc = np.zeros(c, np.float64)
                for yi in range(gh):
                    for xi in range(gw):
                        yy = f32(f32(f32(step_h * f32(i)) + y1) + f32(bh / f32(2))) + f32(bh * f32(yi))
                        xx = f32(f32(f32(step_w * f32(j)) + x1) + f32(bw / f32(2))) + f32(bw * f32(xi))
                        ya, xa = int(math.floor(yy)), int(math.floor(xx))
                        dy, dx = f32(yy - f32(ya)), f32(xx - f32(xa))
                        yb, xb = ya + 1, xa + 1
                        if ya >= h - 1:
                            ya = yb = h - 1
                            dy = f32(0)
                        if xa >= w - 1:
                            xa = xb = w - 1
                            dx = f32(0)
                        wts = [f32((1 - dx) * (1 - dy)), f32(dx * (1 - dy)), f32((1 - dx) * dy), f32(dx * dy)]
                        pts = [(ya, xa), (ya, xb), (yb, xa), (yb, xb)]
                        for wt, (py, px) in zip(wts, pts):
                            if quant:
                                wq = math.floor(float(wt) * 255 + 0.5)
                                acc += wq * (x[b, py, px].astype(np.float64) - quant[1])
                            else:
                                acc += float(wt) * x[b, py, px].astype(np.float64)
                if quant:
                    v = acc * quant[0] / 255 / quant[2] / (gh * gw)
                    out[r, i, j] = np.clip(np.floor(v + 0.5) + quant[3], quant[4], quant[5])
                else:
                    out[r, i, j] = acc / (gh * gw)
    return out


def ref_roi_pool(x, rois, bids, oh, ow, hr, wr, empty=0):
    n, h, w, c = x.shape
    out = np.zeros((len(rois), oh, ow, c), x.dtype)
    hs, ws = f32(1) / f32(hr), f32(1) / f32(wr)

    def rnd(v):
        return int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)
    for r, (roi, b) in enumerate(zip(rois, bids)):
        x1, y1 = rnd(f32(roi[0]) * ws), rnd(f32(roi[1]) * hs)
        x2, y2 = rnd(f32(roi[2]) * ws), rnd(f32(roi[3]) * hs)
        step_w = f32(max(x2 - x1 + 1, 1)) / f32(ow)
        step_h = f32(max(y2 - y1 + 1, 1)) / f32(oh)
        for i in range(oh):
            for j in range(ow):
                h0 = min(int(math.floor(f32(step_h * f32(i)) + f32(y1))), h)
                h1 = min(int(math.ceil(f32(step_h * f32(i + 1)) + f32(y1))), h)
                w0 = min(int(math.floor(f32(step_w * f32(j)) + f32(x1))), w)
                w1 = min(int(math.ceil(f32(step_w * f32(j + 1)) + f32(x1))), w)
                if h1 > h0 and w1 > w0:
                    out[r, i, j] = x[b, h0:h1, w0:w1].max(axis=(0, 1))
                else:
                    out[r, i, j] = empty
    return out


# ---- BOX_WITH_NMS_LIMIT ---------------------------------------------------------------------
def nms_ops(scores, boxes, batches, params, stype="f32", sq=(0.0, 0), const=False):
    """Operands of one BOX_WITH_NMS_LIMIT; params = (score_th, max_det, kind, iou_th, sigma, nms_th)."""
    score_th, max_det, kind, iou_th, sigma, nms_th = params
    n = len(scores)
    ncls = len(scores[0]) if n else 2
    if stype == "f32":
        s, b = T.f32([n, ncls], scores, const), T.f32([n, 4 * ncls], boxes, const)
        fs, so, bo = T.f32s, T.f32([0]), T.f32([0, 4])
    elif stype == "f16":
        s, b = T.f16([n, ncls], scores, const), T.f16([n, 4 * ncls], boxes, const)
        fs, so, bo = T.f16s, T.f16([0]), T.f16([0, 4])
    else:
        mk = T.q8 if stype == "q8" else T.q8s
        s, b = mk([n, ncls], scores, sq[0], sq[1], const), q16([n, 4 * ncls], boxes, const)
        fs, so, bo = T.f32s, mk([0], None, sq[0], sq[1]), q16([0, 4], None)
    ins = [s, b, T.i32t([n], batches, const), fs(score_th), T.i32(max_det), T.i32(kind), fs(iou_th),
           fs(sigma), fs(nms_th)]
    outs = [so, bo, T.i32t([0]), T.i32t([0])]
    return ins, outs


def run_nms(scores, boxes, batches, params, **kw):
    ins, outs = nms_ops(scores, boxes, batches, params, **kw)
    return run_op("BOX_WITH_NMS_LIMIT", ins, outs)


def check_nms(scores, boxes, batches, params, **kw):
    out = ok(run_nms(scores, boxes, batches, params, **kw))
    want = ref_nms(scores, boxes, batches, *params)
    n = len(want)
    assert [list(o.shape) for o in out] == [[n], [n, 4], [n], [n]]
    ncls = len(scores[0])
    bx = np.asarray(boxes, f32).reshape(len(scores), ncls, 4)
    np.testing.assert_array_equal(out[2], [c for _, c, _, _ in want])
    np.testing.assert_array_equal(out[3], [b for _, _, _, b in want])
    np.testing.assert_array_equal(out[1], np.array([bx[r, c] for r, c, _, _ in want]).reshape(n, 4))
    np.testing.assert_allclose(out[0], [s for _, _, s, _ in want], rtol=1e-6, atol=1e-7)
    return out


def random_case(nrois, ncls, nbatch=1, grid=True):
    """Scores on a coarse grid (many ties) and boxes on an integer grid (overlaps, equal IoUs)."""
    scores = (rng.integers(0, 20, (nrois, ncls)) / 20).astype(f32)
    xy = rng.integers(0, 8, (nrois, ncls, 2))
    wh = rng.integers(1, 6, (nrois, ncls, 2))      # no empty boxes: IoU 0/0 would be NaN
    boxes = np.concatenate([xy, xy + wh], axis=2).astype(f32).reshape(nrois, ncls * 4)
    batches = np.sort(rng.integers(0, nbatch, nrois)).astype(np.int32)
    return scores, boxes, batches


@pytest.mark.parametrize("kind", [0, 1, 2])
@pytest.mark.parametrize("max_det", [-1, 0, 1, 3, 7])
def test_nms_random_matches_reference(kind, max_det):
    for _ in range(3):
        scores, boxes, batches = random_case(int(rng.integers(1, 25)), int(rng.integers(2, 5)), 3)
        check_nms(scores, boxes, batches, (0.2, max_det, kind, 0.35, 0.6, 0.25))


@pytest.mark.parametrize("nms_th", [0.0, -1.0])
def test_nms_hard_keeps_zeroed_boxes_when_nms_threshold_allows(nms_th):
    # hard NMS multiplies overlapped scores by 0; they survive when 0 >= nms_score_threshold
    scores = [[0, 0.9], [0, 0.8]]
    boxes = [[0, 0, 1, 1, 0, 0, 10, 10], [0, 0, 1, 1, 0, 0, 10, 10]]
    out = check_nms(scores, boxes, [0, 0], (0.1, -1, 0, 0.5, 1.0, nms_th))
    np.testing.assert_array_equal(out[0], np.array([0.9, 0.0], f32))


def test_nms_all_scores_below_threshold_gives_zero_boxes():
    scores = [[0.9, 0.1, 0.2], [0.9, 0.3, 0.05]]
    boxes = np.tile([0, 0, 4, 4], (2, 3)).astype(f32)
    out = ok(run_nms(scores, boxes, [0, 0], (0.3, -1, 0, 0.5, 1.0, 0.1)))   # 0.3 is not > 0.3
    assert [list(o.shape) for o in out] == [[0], [0, 4], [0], [0]]


def test_nms_background_class_is_never_selected():
    scores = [[0.99, 0.5], [0.98, 0.4]]
    boxes = [[0, 0, 1, 1, 0, 0, 1, 1], [5, 5, 6, 6, 5, 5, 6, 6]]
    out = check_nms(scores, boxes, [0, 0], (0.0, -1, 0, 0.5, 1.0, 0.0))
    np.testing.assert_array_equal(out[2], [1, 1])


def test_nms_tie_follows_the_reference_swap_order():
    # class 1: A 0.9; B 0.5 overlaps A and is dropped, which swaps the last candidate D into
    # B's place: the live list becomes [D, C] so D (not C) wins the 0.5 tie and comes first.
    scores = [[0, 0.9], [0, 0.5], [0, 0.5], [0, 0.5]]
    boxes = [[0] * 4 + [0, 0, 10, 10], [0] * 4 + [0, 0, 10, 9],
             [0] * 4 + [20, 20, 30, 30], [0] * 4 + [40, 40, 50, 50]]
    out = check_nms(scores, boxes, [0] * 4, (0.1, -1, 0, 0.5, 1.0, 0.1))
    np.testing.assert_array_equal(out[1], [[0, 0, 10, 10], [40, 40, 50, 50], [20, 20, 30, 30]])


def test_nms_per_class_and_per_image_limits():
    # two classes with equal scores: the image limit keeps the earlier class on ties
    scores = [[0, 0.8, 0.8], [0, 0.7, 0.8], [0, 0.6, 0.9]]
    boxes = np.array([[0, 0, 1, 1] * 3, [2, 2, 3, 3] * 3, [4, 4, 5, 5] * 3], f32)
    out = check_nms(scores, boxes, [0, 0, 0], (0.1, 2, 0, 0.5, 1.0, 0.1))
    np.testing.assert_array_equal(out[2], [1, 2])
    np.testing.assert_allclose(out[0], [0.8, 0.9])
    out = check_nms(scores, boxes, [0, 0, 0], (0.1, 3, 0, 0.5, 1.0, 0.1))
    np.testing.assert_array_equal(out[2], [1, 2, 2])


def test_nms_soft_kernels_update_scores():
    scores = [[0, 0.9], [0, 0.8]]
    boxes = [[0, 0, 0, 0, 0, 0, 10, 10], [0, 0, 0, 0, 0, 0, 10, 5]]      # IoU 0.5
    out = check_nms(scores, boxes, [0, 0], (0.1, -1, 1, 0.3, 1.0, 0.1))  # linear: 0.8 * 0.5
    np.testing.assert_allclose(out[0], [0.9, 0.4], rtol=1e-6)
    out = check_nms(scores, boxes, [0, 0], (0.1, -1, 2, 0.3, 0.5, 0.1))  # gaussian: exp(-0.25/0.5)
    np.testing.assert_allclose(out[0], [0.9, 0.8 * math.exp(-0.5)], rtol=1e-6)
    out = check_nms(scores, boxes, [0, 0], (0.1, -1, 1, 0.3, 1.0, 0.5))  # 0.4 < 0.5: dropped
    np.testing.assert_allclose(out[0], [0.9])


def test_nms_batches_are_runs_of_equal_index():
    scores, boxes, _ = random_case(9, 3)
    batches = np.array([3, 3, 0, 0, 0, 7, 3, 3, 3], np.int32)     # not sorted: four runs
    out = check_nms(scores, boxes, batches, (0.0, -1, 0, 0.5, 1.0, 0.0))
    assert set(out[3].tolist()) <= {0, 3, 7}


@pytest.mark.parametrize("stype,sq", [("q8", (0.01, 0)), ("q8", (0.02, 128)), ("q8s", (0.01, -128)),
                                      ("q8s", (0.05, 3))])
def test_nms_quantized(stype, sq):
    for kind in (0, 1, 2):
        scores, boxes, batches = random_case(12, 3, 2)
        lo, hi = (0, 255) if stype == "q8" else (-128, 127)
        qs = np.clip(np.round(scores / sq[0]) + sq[1], lo, hi).astype(np.int64)
        qb = (boxes * 8).astype(np.int64)
        real = ((qs - sq[1]) * f32(sq[0])).astype(f32)
        params = (0.15, 5, kind, 0.4, 0.5, 0.2)
        out = ok(run_nms(qs.tolist(), qb.tolist(), batches, params, stype=stype, sq=sq))
        want = ref_nms(real, qb.astype(f32) * f32(0.125), batches, *params)
        np.testing.assert_array_equal(out[2], [c for _, c, _, _ in want])
        np.testing.assert_array_equal(out[1], np.array([qb.reshape(12, 3, 4)[r, c] for r, c, _, _ in want])
                                      .reshape(len(want), 4))
        expect = [min(max(math.floor(abs(float(f32(s / f32(sq[0])) + f32(sq[1]))) + 0.5)
                               * (1 if float(f32(s / f32(sq[0])) + f32(sq[1])) >= 0 else -1), lo), hi)
                  for _, _, s, _ in want]
        np.testing.assert_array_equal(out[0], expect)


def test_nms_float16():
    scores, boxes, batches = random_case(10, 3, 2)
    params = (0.2, -1, 1, 0.4, 0.5, 0.2)
    out = ok(run_nms(scores, boxes, batches, params, stype="f16"))
    want = ref_nms(scores.astype(np.float16).astype(f32), boxes.astype(np.float16).astype(f32), batches,
                   *(float(np.float16(p)) if isinstance(p, float) else p for p in params))
    np.testing.assert_array_equal(out[2], [c for _, c, _, _ in want])
    np.testing.assert_allclose(out[0].astype(f32), [s for _, _, s, _ in want], rtol=2e-3)


def test_nms_constant_inputs_are_resolved_at_compile_time():
    scores, boxes, batches = random_case(8, 3, 2)
    params = (0.2, -1, 0, 0.4, 0.5, 0.2)
    ins, outs = nms_ops(scores, boxes, batches, params, const=True)
    ins[0] = T.f32([8, 3], scores)          # one model input keeps the model runnable
    want = ref_nms(scores, boxes, batches, *params)
    out = ok(run_op("BOX_WITH_NMS_LIMIT", ins, outs))
    assert out[0].shape == (len(want),)


def test_nms_invalid_box_fails_at_execution():
    scores = [[0, 0.9], [0, 0.8]]
    boxes = [[0, 0, 1, 1, 5, 0, 4, 1], [0, 0, 1, 1, 0, 0, 1, 1]]             # x1 > x2
    fails(run_nms(scores, boxes, [0, 0], (0.1, -1, 0, 0.5, 1.0, 0.1)), OP_FAILED,
          "BOX_WITH_NMS_LIMIT", "x1 <= x2")


@pytest.mark.strict_mode
def test_nms_validation():
    scores, boxes, batches = random_case(4, 3)
    params = (0.2, -1, 0, 0.4, 0.5, 0.2)
    ins, outs = nms_ops(scores, boxes, batches, params)
    add = nnhelp.add_op_code
    assert add("BOX_WITH_NMS_LIMIT", ins, outs) == (0, "")
    fails(add("BOX_WITH_NMS_LIMIT", ins[:8], outs), BAD_DATA, "BOX_WITH_NMS_LIMIT", "inputs")
    fails(add("BOX_WITH_NMS_LIMIT", ins, outs[:3]), BAD_DATA, "BOX_WITH_NMS_LIMIT", "outputs")
    bad = list(ins)
    bad[5] = T.i32(3)
    fails(add("BOX_WITH_NMS_LIMIT", bad, outs), BAD_DATA, "input 5 (nms kernel)")
    bad = list(ins)
    bad[3] = T.f16s(0.2)
    fails(add("BOX_WITH_NMS_LIMIT", bad, outs), BAD_DATA, "input 3 (score_threshold)", "FLOAT32")
    bad = list(ins)
    bad[2] = T.f32([4], batches)
    fails(add("BOX_WITH_NMS_LIMIT", bad, outs), BAD_DATA, "input 2 (batch index)", "TENSOR_INT32")
    bad = list(ins)
    bad[1] = T.f32([4, 8])
    fails(add("BOX_WITH_NMS_LIMIT", bad, outs), BAD_DATA, "input 1 (boxes)", "4 * 3")
    bad = list(ins)
    bad[0], bad[1] = T.f32([4, 1]), T.f32([4, 4])
    fails(add("BOX_WITH_NMS_LIMIT", bad, outs), BAD_DATA, "at least 2 classes")
    fails(add("BOX_WITH_NMS_LIMIT", ins, [outs[0], outs[1], T.f32([0]), outs[3]]), BAD_DATA,
          "output 2 (classes)")
    # quantized: boxes must be QUANT16_ASYMM with scale 0.125 and zero point 0
    qi, qo = nms_ops([[1, 2, 3]] * 4, [[0] * 12] * 4, [0] * 4, params, stype="q8", sq=(0.01, 0))
    assert add("BOX_WITH_NMS_LIMIT", qi, qo) == (0, "")
    bad = list(qi)
    bad[1] = Opd("TENSOR_QUANT16_ASYMM", [4, 12], None, 0.25, 0)
    fails(add("BOX_WITH_NMS_LIMIT", bad, qo), BAD_DATA, "input 1 (boxes)", "0.125")
    bad[1] = T.f32([4, 12])
    fails(add("BOX_WITH_NMS_LIMIT", bad, qo), BAD_DATA, "input 1 (boxes)", "TENSOR_QUANT16_ASYMM")
    fails(add("BOX_WITH_NMS_LIMIT", qi, [T.q8([0], None, 0.02, 0)] + qo[1:]), BAD_DATA,
          "output 0", "scale and zeroPoint")
    fails(add("BOX_WITH_NMS_LIMIT", qi, [qo[0], Opd("TENSOR_QUANT16_ASYMM", [0, 4], None, 0.125, 1)]
              + qo[2:]), BAD_DATA, "output 1 (boxes)", "zeroPoint 0")
    # float16 needs FLOAT16 scalars
    hi, ho = nms_ops(scores, boxes, batches, params, stype="f16")
    assert add("BOX_WITH_NMS_LIMIT", hi, ho) == (0, "")
    bad = list(hi)
    bad[8] = T.f32s(0.2)
    fails(add("BOX_WITH_NMS_LIMIT", bad, ho), BAD_DATA, "input 8 (nms_score_threshold)", "FLOAT16")


# ---- ROI_ALIGN ------------------------------------------------------------------------------
def roi_align_ops(x, rois, bids, oh, ow, hr, wr, sh, sw, nchw=False, t="f32", q=None, rq=False):
    """q = (in_scale, in_zp, out_scale, out_zp); rois given in real units (quantized: q16)."""
    xd = np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if nchw else x
    n, h, w, c = x.shape
    R = len(rois)
    od = [R, c, oh, ow] if nchw else [R, oh, ow, c]
    if t in ("f32", "f16"):
        mk = T.f32 if t == "f32" else T.f16
        xi, ri, fs = mk(list(xd.shape), xd), mk([R, 4], rois), (T.f32s if t == "f32" else T.f16s)
        out = mk(od)
    else:
        mk = T.q8 if t == "q8" else T.q8s
        xi = mk(list(xd.shape), xd, q[0], q[1])
        ri = q16([R, 4], np.round(np.asarray(rois) * 8).astype(np.int64))
        fs = T.f32s
        out = mk(od, None, q[2], q[3])
    ins = [xi, ri, T.i32t([R], bids), T.i32(oh), T.i32(ow), fs(hr), fs(wr), T.i32(sh), T.i32(sw), T.b(nchw)]
    return ins, [out]


def random_rois(R, h, w, hr, wr):
    """Regions inside an image of (h * hr) x (w * wr) on a 1/8 grid (exact in QUANT16)."""
    H, W = h * hr, w * wr
    x = np.sort(rng.integers(0, int(W * 8) + 1, (R, 2)), axis=1) / 8
    y = np.sort(rng.integers(0, int(H * 8) + 1, (R, 2)), axis=1) / 8
    return np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], 1).astype(f32)


@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("sh,sw", [(0, 0), (2, 1), (1, 3)])
def test_roi_align_float32_matches_reference(nchw, sh, sw):
    n, h, w, c = 2, 5, 7, 3
    x = rng.standard_normal((n, h, w, c)).astype(f32)
    hr, wr = 2.0, 1.5
    rois = random_rois(6, h, w, hr, wr)
    rois[0] = [0, 0, w * wr, h * hr]                # the whole image: edge samples clamp
    rois[1] = [3, 3, 3, 3]                         # a point: the region grows to 1 x 1
    bids = np.array([0, 1, 1, 0, 1, 0], np.int32)
    ins, outs = roi_align_ops(x, rois, bids, 3, 4, hr, wr, sh, sw, nchw)
    out = ok(run_op("ROI_ALIGN", ins, outs))[0]
    if nchw:
        out = out.transpose(0, 2, 3, 1)
    want = ref_roi_align(x, rois, bids, 3, 4, hr, wr, sh, sw)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("t,q", [("q8", (0.1, 128, 0.05, 100)), ("q8s", (0.25, -3, 0.5, 10)),
                                 ("q8", (0.04, 0, 0.04, 0))])
def test_roi_align_quantized_matches_reference(t, q):
    n, h, w, c = 1, 6, 6, 2
    lo, hi = (0, 255) if t == "q8" else (-128, 127)
    xq = rng.integers(lo, hi + 1, (n, h, w, c))
    rois = random_rois(5, h, w, 2.0, 2.0)
    bids = np.zeros(5, np.int32)
    for nchw in (False, True):
        ins, outs = roi_align_ops(xq, rois, bids, 2, 3, 2.0, 2.0, 0, 2, nchw, t, q)
        out = ok(run_op("ROI_ALIGN", ins, outs))[0]
        if nchw:
            out = out.transpose(0, 2, 3, 1)
        want = ref_roi_align(xq, rois, bids, 2, 3, 2.0, 2.0, 0, 2, quant=(q[0], q[1], q[2], q[3], lo, hi))
        np.testing.assert_allclose(out, want, atol=1)


def test_roi_align_float16():
    x = rng.standard_normal((1, 4, 4, 2)).astype(np.float16)
    rois = random_rois(3, 4, 4, 1.0, 1.0)
    ins, outs = roi_align_ops(x, rois, np.zeros(3, np.int32), 2, 2, 1.0, 1.0, 2, 2, t="f16")
    out = ok(run_op("ROI_ALIGN", ins, outs))[0]
    want = ref_roi_align(x.astype(f32), rois, [0, 0, 0], 2, 2, 1.0, 1.0, 2, 2)
    np.testing.assert_allclose(out.astype(f32), want, rtol=5 * 2 ** -10, atol=5 * 2 ** -10)


def test_roi_align_runtime_failures():
    x = np.ones((2, 4, 4, 1), f32)
    ins, outs = roi_align_ops(x, [[0, 0, 2, 2]], [2], 2, 2, 1.0, 1.0, 0, 0)
    fails(run_op("ROI_ALIGN", ins, outs), OP_FAILED, "ROI_ALIGN", "batch index", "0..1")
    ins, outs = roi_align_ops(x, [[0, 0, 5, 2]], [0], 2, 2, 1.0, 1.0, 0, 0)
    fails(run_op("ROI_ALIGN", ins, outs), OP_FAILED, "ROI_ALIGN", "outside")
    ins, outs = roi_align_ops(x, [[3, 0, 2, 2]], [0], 2, 2, 1.0, 1.0, 0, 0)
    fails(run_op("ROI_ALIGN", ins, outs), OP_FAILED, "ROI_ALIGN", "x1 <= x2")
    ins, outs = roi_align_ops(x, [[-1, 0, 2, 2]], [0], 2, 2, 1.0, 1.0, 0, 0)
    fails(run_op("ROI_ALIGN", ins, outs), OP_FAILED, "ROI_ALIGN", ">= 0")


def test_roi_align_quantized_multiplier_must_be_below_one():
    x = np.full((1, 4, 4, 1), 3)
    ins, outs = roi_align_ops(x, [[0, 0, 2, 2]], [0], 1, 1, 1.0, 1.0, 1, 1, t="q8", q=(1.0, 0, 0.001, 0))
    fails(run_op("ROI_ALIGN", ins, outs), OP_FAILED, "ROI_ALIGN", "multiplier")


@pytest.mark.strict_mode
def test_roi_align_validation():
    x = np.ones((1, 4, 4, 1), f32)
    ins, outs = roi_align_ops(x, [[0, 0, 2, 2]], [0], 2, 2, 1.0, 1.0, 0, 0)
    add = nnhelp.add_op_code
    assert add("ROI_ALIGN", ins, outs) == (0, "")
    fails(add("ROI_ALIGN", ins[:9], outs), BAD_DATA, "ROI_ALIGN", "inputs")
    for k, v, words in ((3, T.i32(0), ("input 3 (output height)", "> 0")),
                        (6, T.f32s(0.0), ("input 6 (width ratio)", "> 0")),
                        (7, T.i32(-1), ("input 7 (height sampling ratio)", ">= 0")),
                        (9, T.i32(0), ("input 9 (NCHW layout flag)", "BOOL")),
                        (5, T.f16s(1.0), ("input 5 (height ratio)", "FLOAT32")),
                        (1, T.f32([1, 5]), ("input 1 (regions of interest)", "expected 4")),
                        (2, T.i32t([2]), ("input 2 (batch index)", "expected 1")),
                        (0, T.f32([1, 4, 4]), ("input 0", "4-D"))):
        bad = list(ins)
        bad[k] = v
        fails(add("ROI_ALIGN", bad, outs), BAD_DATA, "ROI_ALIGN", *words)
    qi, qo = roi_align_ops(np.ones((1, 4, 4, 1), np.int64), [[0, 0, 2, 2]], [0], 2, 2, 1.0, 1.0, 0, 0,
                           t="q8s", q=(0.5, 0, 0.25, 3))
    assert add("ROI_ALIGN", qi, qo) == (0, "")            # the output quantization may differ
    bad = list(qi)
    bad[1] = Opd("TENSOR_QUANT16_ASYMM", [1, 4], None, 0.125, 7)
    fails(add("ROI_ALIGN", bad, qo), BAD_DATA, "input 1 (regions of interest)", "zeroPoint 0")
    fails(add("ROI_ALIGN", qi, [T.q8([1, 2, 2, 1], None, 0.5, 0)]), BAD_DATA, "output 0")


def test_zero_boxes_flow_into_roi_align():
    """BOX_WITH_NMS_LIMIT selects nothing; ROI_ALIGN then runs on zero regions (as the CTS
    zero-sized tests do), with the selection computed at execution (model inputs)."""
    for nchw in (False, True):
        ops_ = [T.f32([1, 2], [0.9, 0.1]), T.f32([1, 8], [1, 1, 10, 10, 0, 0, 10, 10]), T.i32t([1], [0]),
                T.f32s(0.3), T.i32(-1), T.i32(0), T.f32s(0.4), T.f32s(1.0), T.f32s(0.3),
                T.f32([0]), T.f32([0, 4]), T.i32t([0]), T.i32t([0]),
                T.f32([1, 2, 2, 1] if nchw else [1, 1, 2, 2], [1, 2, 3, 4]),
                T.i32(2), T.i32(2), T.f32s(2.0), T.f32s(2.0), T.i32(4), T.i32(4), T.b(nchw),
                T.f32([0, 0, 0, 0])]
        code, out = run_graph(ops_, [("BOX_WITH_NMS_LIMIT", [0, 1, 2, 3, 4, 5, 6, 7, 8], [9, 10, 11, 12]),
                                     ("ROI_ALIGN", [13, 10, 12, 14, 15, 16, 17, 18, 19, 20], [21])])
        assert code == 0, out
        assert list(out[0].shape) == [0] and list(out[1].shape) == [0]
        assert list(out[2].shape) == ([0, 2, 2, 2] if nchw else [0, 2, 2, 2])


def test_selected_boxes_flow_into_roi_align():
    ops_ = [T.f32([2, 2], [0.1, 0.9, 0.2, 0.8]), T.f32([2, 8], [0, 0, 1, 1, 0, 0, 4, 4, 0, 0, 1, 1, 2, 2, 8, 8]),
            T.i32t([2], [0, 0]), T.f32s(0.3), T.i32(-1), T.i32(0), T.f32s(0.4), T.f32s(1.0), T.f32s(0.3),
            T.f32([0]), T.f32([0, 4]), T.i32t([0]), T.i32t([0]),
            T.f32([1, 4, 4, 1], np.arange(16)), T.i32(2), T.i32(2), T.f32s(2.0), T.f32s(2.0),
            T.i32(0), T.i32(0), T.b(False), T.f32([0, 0, 0, 0])]
    out = ok(run_graph(ops_, [("BOX_WITH_NMS_LIMIT", [0, 1, 2, 3, 4, 5, 6, 7, 8], [9, 10, 11, 12]),
                              ("ROI_ALIGN", [13, 10, 12, 14, 15, 16, 17, 18, 19, 20], [21])]))
    want = ref_roi_align(np.arange(16, dtype=f32).reshape(1, 4, 4, 1), [[0, 0, 4, 4], [2, 2, 8, 8]],
                         [0, 0], 2, 2, 2.0, 2.0, 0, 0)
    np.testing.assert_allclose(out[2], want, rtol=1e-6)


# ---- ROI_POOLING ----------------------------------------------------------------------------
def roi_pool_ops(x, rois, bids, oh, ow, hr, wr, nchw=False, t="f32", q=None):
    ins, outs = roi_align_ops(x, rois, bids, oh, ow, hr, wr, 0, 0, nchw, t,
                              None if q is None else (q[0], q[1], q[0], q[1]))
    return ins[:7] + [ins[9]], outs


@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("t", ["f32", "f16", "q8", "q8s"])
def test_roi_pooling_matches_reference(nchw, t):
    n, h, w, c = 2, 6, 5, 2
    if t in ("q8", "q8s"):
        lo, hi = (0, 255) if t == "q8" else (-128, 127)
        x = rng.integers(lo, hi + 1, (n, h, w, c))
        q = (0.5, 7 if t == "q8" else -7)
    else:
        x = rng.standard_normal((n, h, w, c)).astype(np.float16 if t == "f16" else f32)
        q = None
    hr, wr = 2.0, 0.5
    rois = random_rois(7, h, w, hr, wr)
    rois[0] = [0, 0, w * wr, h * hr]
    bids = rng.integers(0, n, 7).astype(np.int32)
    ins, outs = roi_pool_ops(x, rois, bids, 3, 2, hr, wr, nchw, t, q)
    out = ok(run_op("ROI_POOLING", ins, outs))[0]
    if nchw:
        out = out.transpose(0, 2, 3, 1)
    want = ref_roi_pool(x, rois, bids, 3, 2, hr, wr, empty=q[1] if q else 0)
    np.testing.assert_array_equal(out, want)


@pytest.mark.strict_mode
def test_roi_pooling_validation():
    x = np.ones((1, 4, 4, 1), np.int64)
    qi, qo = roi_pool_ops(x, [[0, 0, 2, 2]], [0], 2, 2, 1.0, 1.0, t="q8", q=(0.5, 3))
    add = nnhelp.add_op_code
    assert add("ROI_POOLING", qi, qo) == (0, "")
    fails(add("ROI_POOLING", qi, [T.q8([1, 2, 2, 1], None, 0.25, 3)]), BAD_DATA, "ROI_POOLING", "output 0",
          "scale and zeroPoint")
    fails(add("ROI_POOLING", qi[:7], qo), BAD_DATA, "ROI_POOLING", "inputs")
    bad = list(qi)
    bad[4] = T.i32(-2)
    fails(add("ROI_POOLING", bad, qo), BAD_DATA, "input 4 (output width)", "> 0")


def test_roi_pooling_rejects_zero_regions():
    """Unlike ROI_ALIGN, the reference ROI_POOLING does not accept zero-sized inputs."""
    ops_ = [T.f32([1, 2], [0.9, 0.1]), T.f32([1, 8], [1, 1, 10, 10, 0, 0, 10, 10]), T.i32t([1], [0]),
            T.f32s(0.3), T.i32(-1), T.i32(0), T.f32s(0.4), T.f32s(1.0), T.f32s(0.3),
            T.f32([0]), T.f32([0, 4]), T.i32t([0]), T.i32t([0]),
            T.f32([1, 2, 2, 1], [1, 2, 3, 4]), T.i32(2), T.i32(2), T.f32s(2.0), T.f32s(2.0), T.b(False),
            T.f32([0, 0, 0, 0])]
    fails(run_graph(ops_, [("BOX_WITH_NMS_LIMIT", [0, 1, 2, 3, 4, 5, 6, 7, 8], [9, 10, 11, 12]),
                           ("ROI_POOLING", [13, 10, 12, 14, 15, 16, 17, 18], [19])]),
          OP_FAILED, "ROI_POOLING", "zero-sized")


def test_roi_align_nan_region_fails():
    x = np.ones((1, 4, 4, 1), f32)
    ins, outs = roi_align_ops(x, [[0, 0, np.nan, 2]], [0], 2, 2, 1.0, 1.0, 0, 0)
    fails(run_op("ROI_ALIGN", ins, outs), OP_FAILED, "ROI_ALIGN", "outside")


def test_small_hard_nms_walks_like_the_vectorised_one():
    """hard_nms's plain-Python walk for a few dozen candidates (all IoUs computed up front)
    keeps the same boxes in the same order as the step-by-step numpy one, ties included."""
    from nnapi_py.ops import nms as D
    rng = np.random.default_rng(17)
    for trial in range(300):
        m = int(rng.integers(1, D._SMALL_NMS + 1))
        scores = (rng.integers(0, 6, m) / 5).astype(np.float32) if trial % 2 else \
            rng.uniform(0, 1, m).astype(np.float32)
        xy = rng.uniform(0, 10, (m, 2)).astype(np.float32)
        wh = rng.uniform(0, 4, (m, 2)).astype(np.float32) * (trial % 5 != 0)   # some degenerate
        boxes = np.concatenate([xy, xy + wh], 1)
        th = np.float32(rng.choice([0.0, 0.3, 0.5, 0.9, 1.0]))
        limit = int(rng.choice([1, 3, m]))
        with np.errstate(all="ignore"):
            want = D._select_class(scores.copy(), boxes, limit, None, None, hard_iou=th)
            got = D._hard_nms_small(scores, boxes, th, limit)
        np.testing.assert_array_equal(got, want, err_msg=f"trial {trial}")
