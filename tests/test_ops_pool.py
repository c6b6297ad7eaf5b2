"""Pooling, resizing and spatial data movement through the C library (cffi ABI mode):
AVERAGE_POOL_2D, L2_POOL_2D, MAX_POOL_2D, RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR,
DEPTH_TO_SPACE, SPACE_TO_DEPTH, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, CHANNEL_SHUFFLE.

Results are compared with straightforward (loop-based, test-only) re-implementations of the
reference semantics; the CTS vectors cover the common cases, these tests cover the corners
(padding-only edges, rounding ties, extreme quantization, NaN/inf, zero batches, run-time
parameter values, validation reasons).
"""
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nnhelp  # noqa: E402
from nnhelp import T, Opd, lib, run_op, zero_batch, expect_ok as ok, expect_fail as fails  # noqa: E402

pytestmark = pytest.mark.skipif(lib is None, reason="library not built")

BAD_DATA, OP_FAILED = 4, 5
SAME, VALID = 1, 2
rng = np.random.default_rng(1234)


def to_nchw(a):
    return np.ascontiguousarray(np.asarray(a).transpose(0, 3, 1, 2))


def quant_opd(t, dims, data, scale, zp):
    return T.q8(dims, data, scale, zp) if t == "q8" else T.q8s(dims, data, scale, zp)


# ---- reference re-implementations (loops; test-only) ----------------------------------------
def ref_pool(kind, x, pads, strides, filt, fuse=0, quant=None):
    """x NHWC numpy; pads (l, r, t, b); strides (w, h); filt (w, h); quant (lo, hi) int range."""
    pl, pr, pt, pb = pads
    sw, sh = strides
    fw, fh = filt
    n, h, w, c = x.shape
    oh = (h - fh + pt + pb + sh) // sh
    ow = (w - fw + pl + pr + sw) // sw
    out = np.zeros((n, oh, ow, c), np.float64)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - pt, j * sw - pl
            win = x[:, max(r0, 0):min(r0 + fh, h), max(c0, 0):min(c0 + fw, w), :].astype(np.float64)
            cnt = win.shape[1] * win.shape[2]
            if kind == "max":
                v = win.max(axis=(1, 2))
            elif kind == "l2":
                v = np.sqrt((win ** 2).sum(axis=(1, 2)) / cnt)
            elif quant is not None:
                s = win.sum(axis=(1, 2))
                v = np.sign(s) * np.floor((np.abs(s) + cnt // 2) / cnt)
            else:
                v = win.sum(axis=(1, 2)) / cnt
            out[:, i, j, :] = v
    if quant is not None:
        return np.clip(out, *quant)
    return {0: out, 1: np.maximum(out, 0), 2: np.clip(out, -1, 1), 3: np.clip(out, 0, 6)}[fuse]


def pool_inputs(x_opd, pads=None, scheme=None, strides=(1, 1), filt=(2, 2), fuse=0, nchw=None):
    ins = [x_opd]
    if pads is not None:
        ins += [T.i32(v) for v in pads]
    else:
        ins.append(T.i32(scheme))
    ins += [T.i32(strides[0]), T.i32(strides[1]), T.i32(filt[0]), T.i32(filt[1]), T.i32(fuse)]
    if nchw is not None:
        ins.append(T.b(nchw))
    return ins


def same_pads(h, w, strides, filt):
    def one(size, s, f):
        out = (size + s - 1) // s
        total = max(0, (out - 1) * s + f - size)
        return total // 2, total - total // 2
    l, r = one(w, strides[0], filt[0])
    t, b = one(h, strides[1], filt[1])
    return l, r, t, b


def ref_bilinear(x, oh, ow, align=False, half=False, quant=False):
    n, h, w, c = x.shape
    xf = x.astype(np.float32)
    out = np.zeros((n, oh, ow, c), np.float32)

    def scale(i, o):
        return np.float32(i - 1) / np.float32(o - 1) if align and o > 1 else np.float32(i) / np.float32(o)
    hs, ws = scale(h, oh), scale(w, ow)
    for yy in range(oh):
        iy = (np.float32(yy) + np.float32(.5)) * hs - np.float32(.5) if half else np.float32(yy) * hs
        y0, y1 = max(int(math.floor(iy)), 0), min(int(math.ceil(iy)), h - 1)
        dy = np.float32(iy - np.float32(y0))
        for xx in range(ow):
            ix = (np.float32(xx) + np.float32(.5)) * ws - np.float32(.5) if half else np.float32(xx) * ws
            x0, x1 = max(int(math.floor(ix)), 0), min(int(math.ceil(ix)), w - 1)
            dx = np.float32(ix - np.float32(x0))
            one = np.float32(1)
            v = (xf[:, y0, x0] * (one - dy) * (one - dx) + xf[:, y1, x0] * dy * (one - dx)
                 + xf[:, y0, x1] * (one - dy) * dx + xf[:, y1, x1] * dy * dx)
            out[:, yy, xx] = v
    if quant:
        return np.trunc(out + np.float32(0.5))
    return out


def ref_nearest(x, oh, ow, align=False, half=False):
    n, h, w, c = x.shape

    def idx(o, insz, osz):
        s = np.float32(insz - 1) / np.float32(osz - 1) if align and osz > 1 else np.float32(insz) / np.float32(osz)
        v = (np.float32(o) + np.float32(0.5 if half else 0)) * s
        r = int(math.floor(v + 0.5)) if align else int(math.floor(v))
        r = min(r, insz - 1)
        return max(r, 0) if half else r
    out = np.zeros((n, oh, ow, c), x.dtype)
    for yy in range(oh):
        for xx in range(ow):
            out[:, yy, xx] = x[:, idx(yy, h, oh), idx(xx, w, ow)]
    return out


# ============================================================================================
# pooling
# ============================================================================================
POOL_OPS = {"avg": "AVERAGE_POOL_2D", "l2": "L2_POOL_2D", "max": "MAX_POOL_2D"}


@pytest.mark.parametrize("kind", ["avg", "l2", "max"])
@pytest.mark.parametrize("nchw", [None, False, True])
@pytest.mark.parametrize("geom", [
    # (input NHWC, pads l r t b, strides w h, filter w h)
    ((1, 5, 6, 3), (1, 1, 1, 1), (1, 1), (3, 3)),
    ((2, 7, 5, 2), (0, 2, 1, 0), (2, 3), (3, 2)),
    ((1, 4, 4, 1), (2, 2, 2, 2), (3, 3), (3, 3)),     # stride == filter, pads 2 of 3
    ((1, 3, 8, 4), (0, 0, 0, 0), (4, 1), (1, 3)),     # stride > filter along W
    ((1, 6, 6, 2), (0, 0, 0, 0), (1, 1), (6, 6)),     # global window
    ((3, 2, 2, 5), (1, 1, 1, 1), (1, 1), (2, 2)),
])
def test_pool_float_explicit(kind, nchw, geom):
    shape, pads, strides, filt = geom
    x = rng.standard_normal(shape).astype(np.float32)
    exp = ref_pool(kind, x, pads, strides, filt)
    xin = to_nchw(x) if nchw else x
    dims_in = list(xin.shape)
    out_shape = list(exp.shape) if not nchw else list(to_nchw(exp).shape)
    res = ok(run_op(POOL_OPS[kind], pool_inputs(T.f32(dims_in, xin), pads, None, strides, filt, 0, nchw),
                    [T.f32(out_shape)]))[0]
    got = res.transpose(0, 2, 3, 1) if nchw else res
    np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["avg", "l2", "max"])
@pytest.mark.parametrize("scheme", [SAME, VALID])
@pytest.mark.parametrize("geom", [((1, 7, 7, 3), (2, 2), (3, 3)), ((2, 5, 8, 2), (3, 2), (2, 4)),
                                  ((1, 1, 1, 4), (2, 2), (3, 3)), ((1, 9, 4, 1), (1, 4), (1, 5))])
def test_pool_implicit(kind, scheme, geom):
    shape, strides, filt = geom
    n, h, w, c = shape
    if scheme == VALID and (filt[0] > w or filt[1] > h):
        pytest.skip("filter larger than the input with VALID padding")
    x = rng.standard_normal(shape).astype(np.float32)
    pads = same_pads(h, w, strides, filt) if scheme == SAME else (0, 0, 0, 0)
    exp = ref_pool(kind, x, pads, strides, filt)
    res = ok(run_op(POOL_OPS[kind], pool_inputs(T.f32(list(shape), x), None, scheme, strides, filt),
                    [T.f32([0, 0, 0, 0])]))[0]
    np.testing.assert_allclose(res, exp, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["avg", "l2", "max"])
@pytest.mark.parametrize("fuse", [0, 1, 2, 3])
def test_pool_float16_and_activation(kind, fuse):
    x = (rng.standard_normal((1, 6, 5, 3)) * 4).astype(np.float16)
    pads, strides, filt = (1, 0, 0, 1), (2, 1), (2, 3)
    exp = ref_pool(kind, x.astype(np.float32), pads, strides, filt, fuse)
    res = ok(run_op(POOL_OPS[kind], pool_inputs(T.f16([1, 6, 5, 3], x), pads, None, strides, filt, fuse),
                    [T.f16(list(exp.shape))]))[0]
    assert res.dtype == np.float16
    np.testing.assert_allclose(res.astype(np.float32), exp, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("t", ["q8", "q8s"])
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("fuse", [0, 1, 3])
def test_pool_quant(kind, t, nchw, fuse):
    lo, hi = (0, 255) if t == "q8" else (-128, 127)
    dt = np.uint8 if t == "q8" else np.int8
    x = rng.integers(lo, hi + 1, (2, 6, 7, 3)).astype(dt)
    scale, zp = 0.25, (100 if t == "q8" else -7)
    pads, strides, filt = (1, 2, 2, 1), (2, 2), (3, 3)
    qlo, qhi = lo, hi
    if fuse == 1:
        qlo = max(lo, zp)
    if fuse == 3:
        qlo, qhi = max(lo, zp), min(hi, zp + 24)
    exp = ref_pool(kind, x, pads, strides, filt, quant=(qlo, qhi)).astype(dt)
    xin = to_nchw(x) if nchw else x
    out_dims = list(to_nchw(exp).shape if nchw else exp.shape)
    res = ok(run_op(POOL_OPS[kind], pool_inputs(quant_opd(t, list(xin.shape), xin, scale, zp), pads, None,
                                                strides, filt, fuse, nchw),
                    [quant_opd(t, out_dims, None, scale, zp)]))[0]
    got = res.transpose(0, 2, 3, 1) if nchw else res
    np.testing.assert_array_equal(got, exp)


def test_avg_pool_quant_rounding_ties():
    # int8: sums -3 and 3 over 2 cells -> -1.5 -> -2 and 1.5 -> 2 (half away from zero); -1 over 2 -> -1
    x = np.array([-1, -2, 1, 2, 0, -1, 5, 5], np.int8).reshape(1, 1, 8, 1)
    res = ok(run_op("AVERAGE_POOL_2D", pool_inputs(T.q8s([1, 1, 8, 1], x, 0.5, 0), (0, 0, 0, 0), None, (2, 1),
                                                   (2, 1)), [T.q8s([1, 1, 4, 1], None, 0.5, 0)]))[0]
    np.testing.assert_array_equal(res.reshape(-1), [-2, 2, -1, 5])
    # uint8 raw values (zero point not subtracted before averaging): 1,2 -> 1.5 -> 2; 3 cells 1,1,2 -> 1
    x = np.array([1, 2, 1, 1, 2, 9], np.uint8).reshape(1, 1, 6, 1)
    res = ok(run_op("AVERAGE_POOL_2D", pool_inputs(T.q8([1, 1, 6, 1], x, 1.0, 200), (0, 0, 0, 0), None, (2, 1),
                                                   (2, 1)), [T.q8([1, 1, 3, 1], None, 1.0, 200)]))[0]
    np.testing.assert_array_equal(res.reshape(-1), [2, 1, 6])


def test_avg_pool_counts_only_valid_cells():
    # 2x2 of ones, 3x3 filter with padding 1 everywhere: every window sees only ones -> 1
    x = np.ones((1, 2, 2, 1), np.float32)
    res = ok(run_op("AVERAGE_POOL_2D", pool_inputs(T.f32([1, 2, 2, 1], x), (1, 1, 1, 1), None, (1, 1), (3, 3)),
                    [T.f32([1, 2, 2, 1])]))[0]
    np.testing.assert_array_equal(res, np.ones((1, 2, 2, 1)))
    # uint8 with zero point 128: padding must not pull the average toward 0 or toward the zero point
    xq = np.full((1, 2, 2, 1), 7, np.uint8)
    res = ok(run_op("AVERAGE_POOL_2D", pool_inputs(T.q8([1, 2, 2, 1], xq, 1.0, 128), (1, 1, 1, 1), None, (1, 1),
                                                   (3, 3)), [T.q8([1, 2, 2, 1], None, 1.0, 128)]))[0]
    np.testing.assert_array_equal(res, xq)


def test_quant_extreme_parameters():
    # a tiny scale makes RELU6 clamp at the top of the range; a huge scale pins RELU1 to zp +- 0
    x = np.array([0, 10, 200, 255], np.uint8).reshape(1, 2, 2, 1)
    res = ok(run_op("MAX_POOL_2D", pool_inputs(T.q8([1, 2, 2, 1], x, 1e-6, 0), (0, 0, 0, 0), None, (1, 1),
                                               (1, 1), 3), [T.q8([1, 2, 2, 1], None, 1e-6, 0)]))[0]
    np.testing.assert_array_equal(res.reshape(-1), [0, 10, 200, 255])
    res = ok(run_op("MAX_POOL_2D", pool_inputs(T.q8([1, 2, 2, 1], x, 1e6, 128), (0, 0, 0, 0), None, (1, 1),
                                               (1, 1), 2), [T.q8([1, 2, 2, 1], None, 1e6, 128)]))[0]
    np.testing.assert_array_equal(res.reshape(-1), [128, 128, 128, 128])
    # int8 extremes, 4-cell average of -128s stays -128 and of 127s stays 127
    x = np.array([-128, -128, 127, 127, -128, -128, 127, 127], np.int8).reshape(1, 2, 4, 1)
    res = ok(run_op("AVERAGE_POOL_2D", pool_inputs(T.q8s([1, 2, 4, 1], x, 1e-3, -128), (0, 0, 0, 0), None,
                                                   (2, 2), (2, 2)), [T.q8s([1, 1, 2, 1], None, 1e-3, -128)]))[0]
    np.testing.assert_array_equal(res.reshape(-1), [-128, 127])


def test_pool_nan_inf():
    # 2x4 input, 2x2 windows with stride 2: window 0 holds +inf, window 1 holds a NaN
    x = np.array([[1, np.inf, 2, np.nan], [3, -np.inf, 5, 6]], np.float32).reshape(1, 2, 4, 1)

    def run(op):
        return ok(run_op(op, pool_inputs(T.f32([1, 2, 4, 1], x), (0, 0, 0, 0), None, (2, 2), (2, 2)),
                         [T.f32([1, 1, 2, 1])]))[0].reshape(-1)
    mx = run("MAX_POOL_2D")
    assert mx[0] == np.inf and np.isnan(mx[1])      # NaN propagates (IEEE), inf wins the max
    av = run("AVERAGE_POOL_2D")
    assert np.isnan(av[0]) and np.isnan(av[1])      # inf + -inf and NaN
    l2 = run("L2_POOL_2D")
    assert l2[0] == np.inf and np.isnan(l2[1])
    y = np.array([np.inf, 1, 1, 1], np.float32).reshape(1, 2, 2, 1)
    av = ok(run_op("AVERAGE_POOL_2D", pool_inputs(T.f32([1, 2, 2, 1], y), (0, 0, 0, 0), None, (1, 1), (2, 2)),
                   [T.f32([1, 1, 1, 1])]))[0]
    assert av.reshape(-1)[0] == np.inf
    # all -inf window: the max is -inf (not the lowest finite float)
    z = np.full((1, 2, 2, 1), -np.inf, np.float32)
    mx = ok(run_op("MAX_POOL_2D", pool_inputs(T.f32([1, 2, 2, 1], z), (0, 0, 0, 0), None, (1, 1), (2, 2)),
                   [T.f32([1, 1, 1, 1])]))[0]
    assert mx.reshape(-1)[0] == -np.inf


def test_global_average_pool_mobilenet_shape():
    x = rng.standard_normal((1, 7, 7, 1280)).astype(np.float32)
    res = ok(run_op("AVERAGE_POOL_2D", pool_inputs(T.f32([1, 7, 7, 1280], x), None, VALID, (1, 1), (7, 7)),
                    [T.f32([1, 1, 1, 1280])]))[0]
    np.testing.assert_allclose(res.reshape(-1), x.mean(axis=(1, 2)).reshape(-1), rtol=1e-5, atol=1e-6)


def test_pool_dynamic_output_shape():
    x = rng.standard_normal((2, 9, 9, 3)).astype(np.float32)
    res = ok(run_op("MAX_POOL_2D", pool_inputs(T.f32([2, 9, 9, 3], x), None, SAME, (2, 2), (3, 3)),
                    [T.f32([0, 0, 0, 0])]))[0]
    assert res.shape == (2, 5, 5, 3)


def test_pool_input_dims_resolved_at_execution():
    x = rng.standard_normal((3, 4, 4, 2)).astype(np.float32)
    res = ok(run_op("AVERAGE_POOL_2D", pool_inputs(Opd("TENSOR_FLOAT32", [0, 4, 4, 0], x), None, VALID,
                                                   (2, 2), (2, 2)), [T.f32([0, 2, 2, 0])]))[0]
    np.testing.assert_allclose(res, ref_pool("avg", x, (0, 0, 0, 0), (2, 2), (2, 2)), rtol=1e-6)


def _needs_zero_slice():
    x = T.f32([2, 2, 2, 1], np.zeros(8))
    code, msg = run_op("SLICE", [x, T.i32t([4], [0, 0, 0, 0], const=True), T.i32t([4], [0, 2, 2, 1], const=True)],
                       [T.f32([0, 2, 2, 1])])
    if code != 0:
        pytest.skip(f"SLICE cannot produce a zero-sized tensor here: {msg}")


@pytest.mark.parametrize("kind", ["avg", "l2", "max"])
@pytest.mark.parametrize("nchw", [False, True])
def test_pool_zero_batches(kind, nchw):
    _needs_zero_slice()
    x = T.f32([2, 4, 4, 3], rng.standard_normal(96))
    extra = pool_inputs(None, (0, 0, 0, 0), None, (2, 2), (2, 2), nchw=nchw)[1:]
    res = ok(run_op(POOL_OPS[kind], [zero_batch(x)] + extra, [T.f32([0, 0, 0, 0])]))[0]
    assert res.shape == ((0, 4, 2, 1) if nchw else (0, 2, 2, 3))


@pytest.mark.parametrize("t", ["q8", "q8s"])
def test_pool_zero_batches_quant(t):
    _needs_zero_slice()
    x = quant_opd(t, [2, 4, 4, 3], rng.integers(0, 100, 96), 0.5, 3)
    for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        extra = pool_inputs(None, None, SAME, (1, 1), (3, 3), fuse=1)[1:]
        res = ok(run_op(op, [zero_batch(x)] + extra, [quant_opd(t, [0, 0, 0, 0], None, 0.5, 3)]))[0]
        assert res.shape == (0, 4, 4, 3)


@pytest.mark.parametrize("op", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
@pytest.mark.parametrize("nchw", [False, True])
def test_resize_zero_batches(op, nchw):
    _needs_zero_slice()
    x = T.q8([2, 4, 4, 3], rng.integers(0, 255, 96), 0.5, 3)
    res = ok(run_op(op, [zero_batch(x), T.i32(3), T.i32(5), T.b(nchw)], [T.q8([0, 0, 0, 0], None, 0.5, 3)]))[0]
    assert res.shape == ((0, 4, 5, 3) if nchw else (0, 5, 3, 3))


def test_omitted_layout_flag_means_nhwc():
    x = rng.standard_normal((1, 4, 4, 2)).astype(np.float32)
    omitted = Opd("BOOL", (), None, const=True)
    res = ok(run_op("MAX_POOL_2D", pool_inputs(T.f32([1, 4, 4, 2], x), None, VALID, (2, 2), (2, 2)) + [omitted],
                    [T.f32([0, 0, 0, 0])]))[0]
    np.testing.assert_array_equal(res, ref_pool("max", x, (0, 0, 0, 0), (2, 2), (2, 2)))
    res = ok(run_op("DEPTH_TO_SPACE", [T.f32([1, 4, 4, 2], x), T.i32(1), omitted], [T.f32([0, 0, 0, 0])]))[0]
    np.testing.assert_array_equal(res, x)


# ---- pooling validation ----------------------------------------------------------------------
def _x():
    return T.f32([1, 4, 4, 1], np.zeros(16))


@pytest.mark.strict_mode
@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "L2_POOL_2D", "MAX_POOL_2D"])
def test_pool_validation(op):
    out = [T.f32([1, 4, 4, 1])]
    ins = pool_inputs(_x(), (0, 0, 0, 0), None, (1, 1), (1, 1))
    fails(nnhelp.add_op_code(op, ins[:9], out), BAD_DATA, op, "inputs")            # 9 inputs
    fails(nnhelp.add_op_code(op, ins[:6], out), BAD_DATA, op, "inputs")            # 6 inputs
    bad = list(ins)
    bad[5] = T.f32s(1.0)
    fails(nnhelp.add_op_code(op, bad, out), BAD_DATA, op, "input 5 (stride_width)", "INT32")
    bad = list(ins)
    bad[6] = T.i32(0)
    fails(nnhelp.add_op_code(op, bad, out), BAD_DATA, op, "stride_height", "> 0")
    bad = list(ins)
    bad[1] = T.i32(-1)
    fails(nnhelp.add_op_code(op, bad, out), BAD_DATA, op, "padding_left", ">= 0")
    bad = pool_inputs(_x(), (0, 3, 0, 0), None, (1, 1), (3, 3))
    fails(nnhelp.add_op_code(op, bad, out), BAD_DATA, op, "padding_right", "filter_width")
    bad = list(ins)
    bad[9] = T.i32(4)
    fails(nnhelp.add_op_code(op, bad, out), BAD_DATA, op, "FuseCode")
    fails(nnhelp.add_op_code(op, ins + [T.i32(0)], out), BAD_DATA, op, "NCHW", "BOOL")
    fails(nnhelp.add_op_code(op, pool_inputs(_x(), None, 3, (1, 1), (1, 1)), out), BAD_DATA, op, "PaddingCode")
    fails(nnhelp.add_op_code(op, pool_inputs(T.f32([4, 4, 1], np.zeros(16)), None, SAME, (1, 1), (1, 1)),
                             [T.f32([4, 4, 1])]), BAD_DATA, op, "4-D")
    fails(nnhelp.add_op_code(op, pool_inputs(T.i32t([1, 4, 4, 1], np.zeros(16)), None, SAME, (1, 1), (1, 1)),
                             [T.i32t([1, 4, 4, 1])]), BAD_DATA, op, "TENSOR_INT32")
    fails(nnhelp.add_op_code(op, ins, [T.f16([1, 4, 4, 1])]), BAD_DATA, op, "output 0")
    # the filter must fit the padded input (value check once dimensions are known)
    fails(run_op(op, pool_inputs(_x(), None, VALID, (1, 1), (5, 5)), [T.f32([0, 0, 0, 0])]), BAD_DATA,
          op, "does not fit")


@pytest.mark.strict_mode
def test_l2_pool_rejects_quant_and_quant_rules():
    fails(nnhelp.add_op_code("L2_POOL_2D", pool_inputs(T.q8([1, 2, 2, 1], np.zeros(4), 1.0, 0), None, SAME),
                             [T.q8([1, 2, 2, 1], None, 1.0, 0)]), BAD_DATA, "L2_POOL_2D", "TENSOR_QUANT8_ASYMM")
    for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        fails(nnhelp.add_op_code(op, pool_inputs(T.q8([1, 2, 2, 1], np.zeros(4), 1.0, 0), None, SAME),
                                 [T.q8([1, 2, 2, 1], None, 0.5, 0)]), BAD_DATA, op, "scale and zeroPoint")
        fails(nnhelp.add_op_code(op, pool_inputs(T.q8s([1, 2, 2, 1], np.zeros(4), 1.0, 0), None, SAME),
                                 [T.q8s([1, 2, 2, 1], None, 1.0, 1)]), BAD_DATA, op, "scale and zeroPoint")


def test_pool_runtime_scalar_parameters():
    # stride given as a model input: its value is checked at execution (OP_FAILED)
    x = rng.standard_normal((1, 4, 4, 1)).astype(np.float32)
    stride = Opd("INT32", (), 2, const=False)
    ins = [T.f32([1, 4, 4, 1], x), T.i32(VALID), stride, T.i32(2), T.i32(2), T.i32(2), T.i32(0)]
    res = ok(run_op("MAX_POOL_2D", ins, [T.f32([0, 0, 0, 0])]))[0]
    np.testing.assert_array_equal(res, ref_pool("max", x, (0, 0, 0, 0), (2, 2), (2, 2)))
    ins[2] = Opd("INT32", (), 0, const=False)
    fails(run_op("MAX_POOL_2D", ins, [T.f32([0, 0, 0, 0])]), OP_FAILED, "MAX_POOL_2D", "stride_width")


# ============================================================================================
# resize
# ============================================================================================
@pytest.mark.parametrize("mode", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("size", [(3, 5), (8, 9), (1, 1), (2, 7), (4, 4)])
@pytest.mark.parametrize("nchw", [False, True])
def test_resize_bilinear_float(mode, size, nchw):
    align, half = mode
    x = rng.standard_normal((2, 4, 3, 2)).astype(np.float32)
    oh, ow = size
    exp = ref_bilinear(x, oh, ow, align, half)
    xin = to_nchw(x) if nchw else x
    ins = [T.f32(list(xin.shape), xin), T.i32(ow), T.i32(oh), T.b(nchw), T.b(align), T.b(half)]
    res = ok(run_op("RESIZE_BILINEAR", ins, [T.f32([0, 0, 0, 0])]))[0]
    got = res.transpose(0, 2, 3, 1) if nchw else res
    np.testing.assert_allclose(got, exp, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("t", ["q8", "q8s"])
@pytest.mark.parametrize("mode", [(False, False), (True, False), (False, True)])
def test_resize_bilinear_quant(t, mode):
    align, half = mode
    lo, hi = (0, 255) if t == "q8" else (-128, 127)
    dt = np.uint8 if t == "q8" else np.int8
    x = rng.integers(lo, hi + 1, (1, 3, 4, 2)).astype(dt)
    exp = ref_bilinear(x, 7, 5, align, half, quant=True)
    ins = [quant_opd(t, [1, 3, 4, 2], x, 0.1, 5), T.i32(5), T.i32(7), T.b(False), T.b(align), T.b(half)]
    res = ok(run_op("RESIZE_BILINEAR", ins, [quant_opd(t, [1, 7, 5, 2], None, 0.1, 5)]))[0]
    np.testing.assert_array_equal(res.astype(np.int32), exp.astype(np.int32))


def test_resize_bilinear_int8_truncates_toward_zero():
    # reference: static_cast<int8_t>(value + 0.5): -1.5 + 0.5 = -1.0 -> -1, -0.75 + 0.5 -> 0
    x = np.array([-2, -1], np.int8).reshape(1, 1, 2, 1)
    ins = [T.q8s([1, 1, 2, 1], x, 1.0, 0), T.i32(4), T.i32(1)]
    res = ok(run_op("RESIZE_BILINEAR", ins, [T.q8s([1, 1, 4, 1], None, 1.0, 0)]))[0]
    np.testing.assert_array_equal(res.reshape(-1), np.trunc(ref_bilinear(x, 1, 4, quant=True)).reshape(-1))
    np.testing.assert_array_equal(res.reshape(-1), [-1, -1, 0, 0])


def test_resize_by_scale_float16_and_float32():
    x = rng.standard_normal((1, 3, 5, 1)).astype(np.float16)
    # new size = floor(size * scale) in float32: 3 * 1.7 = 5.1 -> 5, 5 * 0.5 = 2.5 -> 2
    ins = [T.f16([1, 3, 5, 1], x), T.f16s(0.5), T.f16s(1.7)]
    res = ok(run_op("RESIZE_BILINEAR", ins, [T.f16([0, 0, 0, 0])]))[0]
    assert res.shape == (1, 5, 2, 1) and res.dtype == np.float16
    np.testing.assert_allclose(res.astype(np.float32), ref_bilinear(x, 5, 2), rtol=2e-3, atol=2e-3)
    xf = x.astype(np.float32)
    ins = [T.f32([1, 3, 5, 1], xf), T.f32s(2.0), T.f32s(1.0), T.b(False)]
    res = ok(run_op("RESIZE_NEAREST_NEIGHBOR", ins, [T.f32([0, 0, 0, 0])]))[0]
    np.testing.assert_array_equal(res, ref_nearest(xf, 3, 10))
    # scale types must follow the input type
    fails(nnhelp.add_op_code("RESIZE_BILINEAR", [T.f16([1, 3, 5, 1], x), T.f32s(0.5), T.f32s(0.5)],
                             [T.f16([1, 1, 2, 1])]), BAD_DATA, "RESIZE_BILINEAR", "FLOAT16")
    fails(nnhelp.add_op_code("RESIZE_BILINEAR", [T.f32([1, 3, 5, 1], xf), T.f16s(0.5), T.f16s(0.5)],
                             [T.f32([1, 1, 2, 1])]), BAD_DATA, "RESIZE_BILINEAR", "FLOAT32")
    fails(nnhelp.add_op_code("RESIZE_BILINEAR", [T.f32([1, 3, 5, 1], xf), T.f32s(0.5), T.i32(2)],
                             [T.f32([1, 1, 2, 1])]), BAD_DATA, "RESIZE_BILINEAR", "input 2")
    # a scale that makes the output empty is a value error
    fails(run_op("RESIZE_BILINEAR", [T.f32([1, 3, 5, 1], xf), T.f32s(0.1), T.f32s(1.0)], [T.f32([0, 0, 0, 0])]),
          BAD_DATA, "RESIZE_BILINEAR", "> 0")


@pytest.mark.parametrize("t", ["f32", "f16", "q8", "q8s"])
@pytest.mark.parametrize("mode", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("size", [(5, 7), (2, 1), (1, 3), (8, 8)])
def test_resize_nearest(t, mode, size):
    align, half = mode
    oh, ow = size
    if t in ("f32", "f16"):
        x = rng.standard_normal((2, 4, 4, 3)).astype(np.float32 if t == "f32" else np.float16)
        opd = (T.f32 if t == "f32" else T.f16)([2, 4, 4, 3], x)
        out = (T.f32 if t == "f32" else T.f16)([0, 0, 0, 0])
    else:
        x = rng.integers(0, 100, (2, 4, 4, 3)).astype(np.uint8 if t == "q8" else np.int8)
        opd, out = quant_opd(t, [2, 4, 4, 3], x, 0.3, 1), quant_opd(t, [0, 0, 0, 0], None, 0.3, 1)
    ins = [opd, T.i32(ow), T.i32(oh), T.b(False), T.b(align), T.b(half)]
    res = ok(run_op("RESIZE_NEAREST_NEIGHBOR", ins, [out]))[0]
    np.testing.assert_array_equal(res, ref_nearest(x, oh, ow, align, half))


def test_resize_nearest_nchw():
    x = rng.standard_normal((1, 3, 4, 2)).astype(np.float32)
    exp = ref_nearest(x, 6, 3)
    ins = [T.f32([1, 2, 3, 4], to_nchw(x)), T.i32(3), T.i32(6), T.b(True)]
    res = ok(run_op("RESIZE_NEAREST_NEIGHBOR", ins, [T.f32([1, 2, 6, 3])]))[0]
    np.testing.assert_array_equal(res.transpose(0, 2, 3, 1), exp)


@pytest.mark.strict_mode
def test_resize_validation():
    x = T.f32([1, 2, 2, 1], np.zeros(4))
    out = [T.f32([1, 3, 3, 1])]
    # the layout flag is required for NEAREST_NEIGHBOR, optional for BILINEAR
    fails(nnhelp.add_op_code("RESIZE_NEAREST_NEIGHBOR", [x, T.i32(3), T.i32(3)], out), BAD_DATA,
          "RESIZE_NEAREST_NEIGHBOR", "inputs")
    assert nnhelp.add_op_code("RESIZE_BILINEAR", [x, T.i32(3), T.i32(3)], out)[0] == 0
    for op in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"):
        fails(nnhelp.add_op_code(op, [x, T.i32(3), T.i32(3), T.b(False), T.b(True), T.b(True)], out),
              BAD_DATA, op, "align_corners")
        fails(nnhelp.add_op_code(op, [x, T.i32(3), T.i32(3), T.b(False), T.i32(1)], out), BAD_DATA, op,
              "input 4 (align_corners)", "BOOL")
        fails(nnhelp.add_op_code(op, [x, T.i32(0), T.i32(3), T.b(False)], out), BAD_DATA, op, "input 1", "> 0")
        fails(nnhelp.add_op_code(op, [x, T.i32(3), T.i32(3), T.b(False), T.b(False), T.b(False), T.b(False)],
                                 out), BAD_DATA, op, "inputs")
        fails(nnhelp.add_op_code(op, [T.q8([1, 2, 2, 1], np.zeros(4), 0.5, 1), T.i32(3), T.i32(3), T.b(False)],
                                 [T.q8([1, 3, 3, 1], None, 0.5, 2)]), BAD_DATA, op, "scale and zeroPoint")
        fails(nnhelp.add_op_code(op, [T.f32([2, 2, 1], np.zeros(4)), T.i32(3), T.i32(3), T.b(False)],
                                 [T.f32([3, 3, 1])]), BAD_DATA, op, "4-D")
    # the declared output shape must agree with the requested size
    fails(run_op("RESIZE_BILINEAR", [x, T.i32(3), T.i32(4)], out), BAD_DATA, "RESIZE_BILINEAR", "conflicts")


# ============================================================================================
# spatial data movement
# ============================================================================================
def ref_depth_to_space(x, bs):
    n, h, w, c = x.shape
    co = c // (bs * bs)
    out = np.zeros((n, h * bs, w * bs, co), x.dtype)
    for i in range(bs):
        for j in range(bs):
            out[:, i::bs, j::bs, :] = x[:, :, :, (i * bs + j) * co:(i * bs + j + 1) * co]
    return out


@pytest.mark.parametrize("nchw", [None, False, True])
@pytest.mark.parametrize("bs", [1, 2, 3])
@pytest.mark.parametrize("t", ["f32", "f16", "q8", "q8s"])
def test_depth_space_roundtrip(nchw, bs, t):
    n, h, w, co = 2, 2, 3, 2
    c = co * bs * bs
    if t in ("q8", "q8s"):
        x = rng.integers(0, 120, (n, h, w, c)).astype(np.uint8 if t == "q8" else np.int8)

        def mk(dims, data=None):
            return quant_opd(t, dims, data, 0.5, 3)
    else:
        x = rng.standard_normal((n, h, w, c)).astype(np.float32 if t == "f32" else np.float16)

        def mk(dims, data=None):
            return (T.f32 if t == "f32" else T.f16)(dims, data)
    exp = ref_depth_to_space(x, bs)
    xin = to_nchw(x) if nchw else x
    extra = [T.b(nchw)] if nchw is not None else []
    res = ok(run_op("DEPTH_TO_SPACE", [mk(list(xin.shape), xin), T.i32(bs)] + extra, [mk([0, 0, 0, 0])]))[0]
    got = res.transpose(0, 2, 3, 1) if nchw else res
    np.testing.assert_array_equal(got, exp)
    back = ok(run_op("SPACE_TO_DEPTH", [mk(list(res.shape), np.ascontiguousarray(res)), T.i32(bs)] + extra,
                     [mk([0, 0, 0, 0])]))[0]
    np.testing.assert_array_equal(back, xin)


@pytest.mark.strict_mode
def test_depth_space_validation():
    x = T.f32([1, 2, 2, 8], np.zeros(32))
    fails(nnhelp.add_op_code("DEPTH_TO_SPACE", [x, T.i32(0)], [T.f32([0, 0, 0, 0])]), BAD_DATA,
          "DEPTH_TO_SPACE", "block_size", ">= 1")
    fails(run_op("DEPTH_TO_SPACE", [x, T.i32(3)], [T.f32([0, 0, 0, 0])]), BAD_DATA, "DEPTH_TO_SPACE",
          "divisible")
    fails(run_op("SPACE_TO_DEPTH", [T.f32([1, 3, 2, 1], np.zeros(6)), T.i32(2)], [T.f32([0, 0, 0, 0])]),
          BAD_DATA, "SPACE_TO_DEPTH", "divisible")
    fails(nnhelp.add_op_code("SPACE_TO_DEPTH", [x, T.i32(2), T.i32(1)], [T.f32([0, 0, 0, 0])]), BAD_DATA,
          "SPACE_TO_DEPTH", "input 2", "BOOL")
    fails(nnhelp.add_op_code("SPACE_TO_DEPTH", [x, T.f32s(2.0)], [T.f32([0, 0, 0, 0])]), BAD_DATA,
          "SPACE_TO_DEPTH", "input 1 (block_size)")
    fails(nnhelp.add_op_code("DEPTH_TO_SPACE", [T.q8([1, 2, 2, 4], np.zeros(16), 0.5, 0), T.i32(2)],
                             [T.q8([1, 4, 4, 1], None, 0.5, 1)]), BAD_DATA, "DEPTH_TO_SPACE", "zeroPoint")
    fails(nnhelp.add_op_code("DEPTH_TO_SPACE", [T.f32([2, 2, 4], np.zeros(16)), T.i32(2)],
                             [T.f32([4, 4, 1])]), BAD_DATA, "DEPTH_TO_SPACE", "4-D")


def ref_space_to_batch(x, bh, bw, pads, pad_value):
    (pt, pb), (pl, pr) = pads
    n, h, w, c = x.shape
    p = np.full((n, h + pt + pb, w + pl + pr, c), pad_value, x.dtype)
    p[:, pt:pt + h, pl:pl + w] = x
    oh, ow = p.shape[1] // bh, p.shape[2] // bw
    out = np.zeros((n * bh * bw, oh, ow, c), x.dtype)
    for i in range(bh):
        for j in range(bw):
            for b in range(n):
                out[(i * bw + j) * n + b] = p[b, i::bh, j::bw]
    return out


@pytest.mark.parametrize("nchw", [None, False, True])
@pytest.mark.parametrize("hw,block,pads", [((4, 6), (2, 2), ((0, 0), (0, 0))), ((3, 5), (3, 2), ((1, 2), (0, 1))),
                                           ((3, 5), (1, 4), ((2, 0), (3, 0)))])
@pytest.mark.parametrize("t", ["f32", "q8", "q8s"])
def test_space_batch_roundtrip(nchw, hw, block, pads, t):
    bh, bw = block
    n, c = 2, 2
    h, w = hw
    if t == "f32":
        x = rng.standard_normal((n, h, w, c)).astype(np.float32)
        pad_value, mk = 0, (lambda d, v=None: T.f32(d, v))
    else:
        zp = 9 if t == "q8" else -5
        x = rng.integers(0, 100, (n, h, w, c)).astype(np.uint8 if t == "q8" else np.int8)
        pad_value, mk = zp, (lambda d, v=None: quant_opd(t, d, v, 0.5, zp))
    exp = ref_space_to_batch(x, bh, bw, pads, pad_value)
    xin = to_nchw(x) if nchw else x
    extra = [T.b(nchw)] if nchw is not None else []
    ins = [mk(list(xin.shape), xin), T.i32t([2], list(block), const=True),
           T.i32t([2, 2], np.array(pads).reshape(-1), const=True)] + extra
    res = ok(run_op("SPACE_TO_BATCH_ND", ins, [mk([0, 0, 0, 0])]))[0]
    got = res.transpose(0, 2, 3, 1) if nchw else res
    np.testing.assert_array_equal(got, exp)
    if pads == ((0, 0), (0, 0)):
        back = ok(run_op("BATCH_TO_SPACE_ND", [mk(list(res.shape), np.ascontiguousarray(res)),
                                               T.i32t([2], list(block), const=True)] + extra,
                         [mk([0, 0, 0, 0])]))[0]
        np.testing.assert_array_equal(back, xin)


def test_space_batch_runtime_values():
    # block shape and paddings given as model inputs: shapes resolved, values checked at execution
    x = rng.standard_normal((1, 4, 4, 1)).astype(np.float32)
    ins = [T.f32([1, 4, 4, 1], x), T.i32t([2], [2, 2]), T.i32t([2, 2], [0, 0, 0, 0])]
    res = ok(run_op("SPACE_TO_BATCH_ND", ins, [T.f32([0, 0, 0, 0])]))[0]
    np.testing.assert_array_equal(res, ref_space_to_batch(x, 2, 2, ((0, 0), (0, 0)), 0))
    ins[1] = T.i32t([2], [0, 2])
    fails(run_op("SPACE_TO_BATCH_ND", ins, [T.f32([0, 0, 0, 0])]), OP_FAILED, "SPACE_TO_BATCH_ND", ">= 1")
    ins[1] = T.i32t([2], [3, 2])
    fails(run_op("SPACE_TO_BATCH_ND", ins, [T.f32([0, 0, 0, 0])]), OP_FAILED, "SPACE_TO_BATCH_ND", "divisible")
    ins[1], ins[2] = T.i32t([2], [2, 2]), T.i32t([2, 2], [0, -1, 0, 0])
    fails(run_op("SPACE_TO_BATCH_ND", ins, [T.f32([0, 0, 0, 0])]), OP_FAILED, "SPACE_TO_BATCH_ND", ">= 0")
    bts = [T.f32([4, 2, 2, 1], np.arange(16)), T.i32t([2], [3, 1])]
    fails(run_op("BATCH_TO_SPACE_ND", bts, [T.f32([0, 0, 0, 0])]), OP_FAILED, "BATCH_TO_SPACE_ND", "divisible")


@pytest.mark.strict_mode
def test_space_batch_validation():
    x = T.f32([1, 4, 4, 1], np.zeros(16))
    out = [T.f32([0, 0, 0, 0])]
    blk = T.i32t([2], [2, 2], const=True)
    pads = T.i32t([2, 2], [0, 0, 0, 0], const=True)
    fails(nnhelp.add_op_code("SPACE_TO_BATCH_ND", [x, T.i32t([2], [0, 2], const=True), pads], out), BAD_DATA,
          "SPACE_TO_BATCH_ND", "block_shape", ">= 1")
    fails(nnhelp.add_op_code("SPACE_TO_BATCH_ND", [x, blk, T.i32t([2, 2], [0, 0, -1, 0], const=True)], out),
          BAD_DATA, "SPACE_TO_BATCH_ND", "paddings", ">= 0")
    fails(nnhelp.add_op_code("SPACE_TO_BATCH_ND", [x, T.i32t([3], [1, 2, 2], const=True), pads], out), BAD_DATA,
          "SPACE_TO_BATCH_ND", "block_shape", "[2]")
    fails(nnhelp.add_op_code("SPACE_TO_BATCH_ND", [x, blk, T.i32t([2, 3], np.zeros(6), const=True)], out),
          BAD_DATA, "SPACE_TO_BATCH_ND", "paddings", "[2, 2]")
    fails(nnhelp.add_op_code("SPACE_TO_BATCH_ND", [x, blk], out), BAD_DATA, "SPACE_TO_BATCH_ND", "inputs")
    fails(nnhelp.add_op_code("BATCH_TO_SPACE_ND", [x, T.f32([2], [2, 2], const=True)], out), BAD_DATA,
          "BATCH_TO_SPACE_ND", "TENSOR_INT32")
    fails(nnhelp.add_op_code("BATCH_TO_SPACE_ND", [x, blk, T.i32(1)], out), BAD_DATA, "BATCH_TO_SPACE_ND",
          "BOOL")
    fails(nnhelp.add_op_code("BATCH_TO_SPACE_ND", [T.q8([4, 1, 1, 1], np.zeros(4), 1.0, 2), blk],
                             [T.q8([1, 2, 2, 1], None, 1.0, 3)]), BAD_DATA, "BATCH_TO_SPACE_ND", "zeroPoint")


def ref_shuffle(x, g, axis):
    c = x.shape[axis]
    gs = c // g
    idx = [(k % g) * gs + k // g for k in range(c)]   # output k*g + g' <- input g'*gs + k
    return np.take(x, idx, axis=axis)


@pytest.mark.parametrize("shape,axis", [((6,), 0), ((3, 6), -1), ((6, 3), 0), ((2, 12, 2), 1),
                                        ((1, 2, 3, 8), 3), ((1, 2, 3, 8), -1), ((4, 2, 3, 1), 0)])
@pytest.mark.parametrize("t", ["f32", "f16", "q8", "q8s"])
def test_channel_shuffle(shape, axis, t):
    c = shape[axis]
    g = 2 if c % 2 == 0 else 1
    if t in ("q8", "q8s"):
        x = rng.integers(0, 100, shape).astype(np.uint8 if t == "q8" else np.int8)

        def mk(d, v=None):
            return quant_opd(t, d, v, 0.5, 3)
    else:
        x = rng.standard_normal(shape).astype(np.float32 if t == "f32" else np.float16)

        def mk(d, v=None):
            return (T.f32 if t == "f32" else T.f16)(d, v)
    res = ok(run_op("CHANNEL_SHUFFLE", [mk(list(shape), x), T.i32(g), T.i32(axis)], [mk(list(shape))]))[0]
    np.testing.assert_array_equal(res, ref_shuffle(x, g, axis))


def test_channel_shuffle_groups_3():
    x = np.arange(12, dtype=np.float32).reshape(1, 12)
    res = ok(run_op("CHANNEL_SHUFFLE", [T.f32([1, 12], x), T.i32(3), T.i32(1)], [T.f32([1, 12])]))[0]
    np.testing.assert_array_equal(res.reshape(-1), [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11])


@pytest.mark.strict_mode
def test_channel_shuffle_validation():
    x = T.f32([2, 6], np.zeros(12))
    out = [T.f32([2, 6])]
    fails(nnhelp.add_op_code("CHANNEL_SHUFFLE", [x, T.i32(4), T.i32(1)], out), BAD_DATA, "CHANNEL_SHUFFLE",
          "divisible")
    fails(nnhelp.add_op_code("CHANNEL_SHUFFLE", [x, T.i32(0), T.i32(1)], out), BAD_DATA, "CHANNEL_SHUFFLE",
          "num_groups", "> 0")
    fails(nnhelp.add_op_code("CHANNEL_SHUFFLE", [x, T.i32(2), T.i32(2)], out), BAD_DATA, "CHANNEL_SHUFFLE",
          "axis", "[-2, 2)")
    fails(nnhelp.add_op_code("CHANNEL_SHUFFLE", [x, T.i32(2), T.i32(-3)], out), BAD_DATA, "CHANNEL_SHUFFLE",
          "axis")
    fails(nnhelp.add_op_code("CHANNEL_SHUFFLE", [T.f32([1, 1, 1, 1, 2], np.zeros(2)), T.i32(2), T.i32(4)],
                             [T.f32([1, 1, 1, 1, 2])]), BAD_DATA, "CHANNEL_SHUFFLE", "rank 5")
    fails(nnhelp.add_op_code("CHANNEL_SHUFFLE", [x, T.i32(2)], out), BAD_DATA, "CHANNEL_SHUFFLE", "inputs")
    fails(nnhelp.add_op_code("CHANNEL_SHUFFLE", [T.i32t([2, 6], np.zeros(12)), T.i32(2), T.i32(1)],
                             [T.i32t([2, 6])]), BAD_DATA, "CHANNEL_SHUFFLE", "TENSOR_INT32")
    # divisibility of a dimension known only at execution
    fails(run_op("CHANNEL_SHUFFLE", [Opd("TENSOR_FLOAT32", [2, 0], np.zeros((2, 5))), T.i32(2), T.i32(1)],
                 [T.f32([0, 0])]), OP_FAILED, "CHANNEL_SHUFFLE", "divisible")


def test_relaxed_float32_pool_and_resize():
    x = rng.standard_normal((1, 4, 4, 2)).astype(np.float32)
    res = ok(run_op("AVERAGE_POOL_2D", pool_inputs(T.f32([1, 4, 4, 2], x), None, SAME, (2, 2), (2, 2)),
                    [T.f32([1, 2, 2, 2])], relaxed=True))[0]
    np.testing.assert_allclose(res, ref_pool("avg", x, (0, 0, 0, 0), (2, 2), (2, 2)), rtol=5e-3, atol=5e-3)


def test_quant_activation_range_rounds_half_away_from_zero():
    x = np.array([0, 1, 2, 3], np.uint8).reshape(1, 2, 2, 1)
    res = ok(run_op("MAX_POOL_2D", pool_inputs(T.q8([1, 2, 2, 1], x, 12.0, 0), (0, 0, 0, 0), None, (1, 1),
                                               (1, 1), 3), [T.q8([1, 2, 2, 1], None, 12.0, 0)]))[0]
    np.testing.assert_array_equal(res.reshape(-1), [0, 1, 1, 1])
