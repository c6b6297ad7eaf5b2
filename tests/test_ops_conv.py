"""Convolutions and dense layers through the C library: the corners the conformance vectors
do not reach.

CONV_2D GROUPED_CONV_2D DEPTHWISE_CONV_2D TRANSPOSE_CONV_2D (nnapi_py/ops/conv.py, depthwise_conv.py,
transpose_conv.py over the shared convgeom.py, convquant.py, im2col.py, convsmall.py),
FULLY_CONNECTED BATCH_MATMUL (nnapi_py/ops/dense.py).

Float results are compared with straightforward references written here (a loop over the
filter taps, einsum over the rest, in float64).  Quantized results are compared bit for bit
with the integer sums of those references requantized by a scalar transcription of the
reference arithmetic (fixed-point multiplier, rounding half away from zero).
"""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from nnhelp import T, Opd, lib, expect_ok, op_ok as ok, op_fails as fails  # noqa: E402
from qref import quantize_multiplier, mul_q, act_range  # noqa: E402

pytestmark = pytest.mark.skipif(lib is None, reason="build/lib/libneuralnetworks.so missing: run `make lib`")

BAD_DATA, OP_FAILED = 4, 5
F32, I32T, Q8, F16, Q8S, QPC = 3, 4, 5, 8, 14, 11
RNG = np.random.default_rng(1234)


def i32s(*vals):
    return [T.i32(v) for v in vals]


# ---- reference requantization (qref: the scalar transcription of the reference arithmetic) ----
def requant_ref(acc, reals, zp, lo, hi):
    """acc: int array [..., C]; reals: scalar or per-channel multipliers."""
    acc = np.asarray(acc, np.int64)
    reals = np.broadcast_to(np.asarray(reals, np.float64), (acc.shape[-1],))
    out = np.empty(acc.shape, np.int64)
    flat, of = acc.reshape(-1, acc.shape[-1]), out.reshape(-1, acc.shape[-1])
    for c in range(acc.shape[-1]):
        q, s = quantize_multiplier(float(reals[c]))
        of[:, c] = [min(hi, max(lo, mul_q(int(v), q, s) + zp)) for v in flat[:, c]]
    return out


def prod32(a, b):
    return float(np.float32(a) * np.float32(b))


# ---- float references -------------------------------------------------------------------------
def pad_nhwc(x, pads, value=0):
    t, b, l, r = pads
    return np.pad(x, ((0, 0), (t, b), (l, r), (0, 0)), constant_values=value)


def conv_ref(x, w, bias, strides, pads, dil=(1, 1), groups=1):
    """x NHWC, w [O, KH, KW, Cg]; float64 or int64 (exact) result."""
    sh, sw = strides
    dh, dw = dil
    xp = pad_nhwc(x, pads)
    n, hp, wp, c = xp.shape
    o, kh, kw, cg = w.shape
    oh = (hp - (kh - 1) * dh - 1) // sh + 1
    ow = (wp - (kw - 1) * dw - 1) // sw + 1
    og = o // groups
    out = np.zeros((n, oh, ow, o), np.result_type(x, w))
    for g in range(groups):
        for ky in range(kh):
            for kx in range(kw):
                xs = xp[:, ky * dh:ky * dh + (oh - 1) * sh + 1:sh, kx * dw:kx * dw + (ow - 1) * sw + 1:sw,
                        g * cg:(g + 1) * cg]
                out[..., g * og:(g + 1) * og] += np.einsum("nhwc,oc->nhwo", xs, w[g * og:(g + 1) * og, ky, kx])
    return out + bias


def dw_ref(x, w, bias, strides, pads, mult, dil=(1, 1)):
    """w [1, KH, KW, C*mult]."""
    xr = np.repeat(x, mult, axis=3)
    sh, sw = strides
    dh, dw = dil
    xp = pad_nhwc(xr, pads)
    _, kh, kw, o = w.shape
    oh = (xp.shape[1] - (kh - 1) * dh - 1) // sh + 1
    ow = (xp.shape[2] - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((x.shape[0], oh, ow, o), np.result_type(x, w))
    for ky in range(kh):
        for kx in range(kw):
            out += xp[:, ky * dh:ky * dh + (oh - 1) * sh + 1:sh, kx * dw:kx * dw + (ow - 1) * sw + 1:sw] * w[0, ky, kx]
    return out + bias


def tconv_ref(x, w, bias, strides, pads, out_hw):
    """Transposed convolution by scattering every input pixel; pads = (top, left) (may be 0)."""
    sh, sw = strides
    pt, pl = pads
    n, h, wd, c = x.shape
    o, kh, kw, _ = w.shape
    oh, ow = out_hw
    out = np.zeros((n, oh, ow, o), np.result_type(x, w))
    for iy in range(h):
        for ix in range(wd):
            for ky in range(kh):
                for kx in range(kw):
                    y, xx = iy * sh + ky - pt, ix * sw + kx - pl
                    if 0 <= y < oh and 0 <= xx < ow:
                        out[:, y, xx] += x[:, iy, ix] @ w[:, ky, kx].T
    return out + bias


def act_float(v, fuse):
    if fuse == 1:
        return np.maximum(v, 0)
    if fuse == 2:
        return np.clip(v, -1, 1)
    if fuse == 3:
        return np.clip(v, 0, 6)
    return v


def to_nchw(a):
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2))


def from_nchw(a):
    return a.transpose(0, 2, 3, 1)


# =================================================================================================
# OutputStage (the vectorised requantization) against quant.py
# =================================================================================================
def test_output_stage_matches_quant_py():
    from nnapi_py.ops import quant as Q
    rng = np.random.default_rng(7)
    modes = set()
    for trial in range(600):
        nch = int(rng.integers(1, 5))
        reals = np.exp(rng.uniform(np.log(1e-8), np.log(4.0), nch))
        if trial % 4 == 0:
            reals = 2.0 ** -rng.integers(0, 16, nch).astype(float)      # q == 2**30: exact ties
        if trial % 5 == 0:
            reals[:] = reals[0]
        zp = int(rng.integers(-128, 256))
        lo = int(rng.integers(-128, 100))
        hi = lo + int(rng.integers(1, 300))
        if trial % 3 == 0:
            lo = max(lo, zp)
        bias = rng.integers(-2 ** 20, 2 ** 20, nch) if trial % 2 else None
        bnd = int(10 ** rng.uniform(1, 9))
        acc = rng.integers(-bnd, bnd + 1, (3, 4, nch)).astype(np.float64)
        acc.reshape(-1, nch)[:6] = np.array([-3, -2, -1, 0, 1, 2])[:, None]
        st = Q.OutputStage(reals, zp, lo, hi, bias=bias, acc_bound=bnd)
        modes.add(st.mode)
        out = np.empty(acc.shape, np.int64)
        st(acc, out)
        x = acc.astype(np.int64) + (0 if bias is None else bias)
        ref = np.stack([Q.Requant(float(reals[c]))(x[..., c]) for c in range(nch)], -1)
        np.testing.assert_array_equal(out, np.clip(ref + zp, lo, hi), err_msg=f"mode {st.mode} reals {reals}")
    assert modes == {"float", "int64", "general"}


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_output_stage_8bit_stores_match_quant_py(dtype):
    """The 8-bit stores of the float mode (truncation as the floor, int8 through an offset of
    128 and a flipped top bit, the [z < zp + 1/2] correction in the 2**e-scaled domain or per
    channel where some channels have e = 0), per-channel vectors tiled along rows."""
    from nnapi_py.ops import quant as Q
    rng = np.random.default_rng(3 if dtype == np.uint8 else 4)
    lo0, hi0 = (0, 255) if dtype == np.uint8 else (-128, 127)
    seen = set()
    for trial in range(400):
        nch = int(rng.choice([1, 3, 8]))
        reals = rng.uniform(1e-5, 0.49, nch) if trial % 4 else rng.uniform(1e-5, 0.99, nch)
        if nch > 1 and trial % 5 == 0:
            reals[:] = reals[0]
        zp = int(rng.integers(lo0, hi0 + 1))
        lo, hi = (lo0, hi0) if trial % 2 else sorted(int(v) for v in rng.integers(lo0, hi0 + 1, 2))
        if trial % 7 == 0:
            lo = max(lo, zp)
        bias = rng.integers(-5000, 5000, nch) if trial % 3 else None
        st = Q.OutputStage(reals, zp, lo, hi, bias=bias, acc_bound=1 << 20)
        acc = rng.integers(-(1 << 18), 1 << 18, (2, 3, int(rng.integers(1, 5)), nch))
        acc.reshape(-1, nch)[:5] = np.array([-2, -1, 0, 1, 2])[:, None]
        x = acc + (0 if bias is None else bias)
        ref = np.clip(np.stack([Q.Requant(float(reals[c]))(x[..., c]) for c in range(nch)], -1) + zp, lo, hi)
        for a in (acc.astype(np.float32), acc.astype(np.int32)):
            out = np.empty(acc.shape, dtype)
            st(a, out)
            np.testing.assert_array_equal(out.astype(np.int64), ref, err_msg=f"mode {st.mode} reals {reals}")
        seen.add((st.mode, st.need_neg))
    assert ("float", True) in seen and ("float", False) in seen


def test_output_stage_small_calls_use_exact_step_table():
    """A stage called again on a few values (streaming models' one-pixel layers) looks its
    outputs up in a table of the accumulators where each channel's output steps up, found by
    bisection with the passes themselves: the same numbers as the reference formula in every
    mode, at every step and its neighbours, at the accumulator bounds, for uint8/int8/int64
    outputs; larger calls keep the passes."""
    from nnapi_py.ops import quant as Q
    rng = np.random.default_rng(11)
    modes = set()
    for trial in range(120):
        nch = int(rng.choice([1, 2, 5, 32]))
        reals = np.exp(rng.uniform(np.log(1e-6), np.log(0.9), nch))
        if trial % 6 == 0:
            reals = np.exp(rng.uniform(np.log(1.0), np.log(3.0), nch))      # multipliers > 1
        if trial % 4 == 1:
            reals = 2.0 ** -rng.integers(0, 12, nch).astype(float)           # exact ties
        dtype = (np.uint8, np.int8, np.int64)[trial % 3]
        lo0, hi0 = {np.uint8: (0, 255), np.int8: (-128, 127), np.int64: (-128, 127)}[dtype]
        zp = int(rng.integers(lo0, hi0 + 1))
        lo, hi = (lo0, hi0) if trial % 2 else sorted(int(v) for v in rng.integers(lo0, hi0 + 1, 2))
        bias = rng.integers(-3000, 3000, nch) if trial % 3 else None
        bnd = int(10 ** rng.uniform(2, 7))
        st = Q.OutputStage(reals, zp, lo, hi, bias=bias, acc_bound=bnd)
        modes.add(st.mode)

        def ref(acc):
            x = acc.astype(np.int64) + (0 if bias is None else bias)
            r = np.stack([Q.Requant(float(reals[c]))(x[..., c]) for c in range(nch)], -1)
            return np.clip(r + zp, lo, hi)
        acc = rng.integers(-bnd, bnd + 1, (1, 1, max(1, 64 // nch), nch))
        acc.reshape(-1, nch)[:2] = np.array([-bnd, bnd])[:, None]
        for _ in range(3):                  # the third call of a stage makes its table
            out = np.empty(acc.shape, dtype)
            st(acc.astype(np.float32) if bnd < 1 << 24 else acc.astype(np.float64), out)
            np.testing.assert_array_equal(out.astype(np.int64), ref(acc), err_msg=f"mode {st.mode}")
        assert st._steps is not None
        steps = st._steps[0].reshape(nch, -1) - st._steps[1][:, None]        # per channel
        near = np.concatenate([steps - 1, steps, steps + 1], 1).T            # [3 * steps, nch]
        near = np.clip(near, -bnd, bnd)
        out = np.empty(near.shape, dtype)
        st._small(near, out)
        np.testing.assert_array_equal(out.astype(np.int64), ref(near), err_msg=f"mode {st.mode}")
        big = rng.integers(-bnd, bnd + 1, (4, 8, 8, nch))            # beyond the small size: passes
        out = np.empty(big.shape, dtype)
        st(big.astype(np.float64), out)
        np.testing.assert_array_equal(out.astype(np.int64), ref(big))
    assert modes == {"float", "int64", "general"}


@pytest.mark.parametrize("form", ["table", "direct"])
def test_small_quantized_layers_make_their_step_tables_at_compilation(monkeypatch, form):
    """A one-pixel quantized layer with constant weights and bias builds its step table when
    it is compiled (not in the middle of a later execution), and its runs match the
    reference requantization.  Its stage corrects the negative side (no activation):
    quant.DirectProduct's two-term form takes it and needs no step table at all; without
    that form ("table") quant.TableProduct's table form does."""
    import nnapi_py as nn
    from nnapi_py.ops import quant as Q
    if form == "table":
        monkeypatch.setattr(Q.DirectProduct, "for_stage", classmethod(lambda cls, *a, **k: None))
    want = [8] if form == "table" else []
    made = []
    orig = Q.OutputStage._step_table

    def spy(self):
        made.append(self.nch)
        return orig(self)
    monkeypatch.setattr(Q.OutputStage, "_step_table", spy)
    rng = np.random.default_rng(21)
    w = rng.integers(-127, 128, (8, 1, 1, 16)).astype(np.int8)
    scales = (0.002 + rng.random(8) * 0.01).astype(np.float32)
    bias = rng.integers(-3000, 3000, 8).astype(np.int32)
    m = nn.Model()
    x = m.input("x", nn.quant8_asymm_signed(0.05, -3), (1, 1, 1, 16))
    wq = m.constant(w, nn.quant8_symm_per_channel(scales, 0))
    bq = m.constant(bias, nn.OperandType(nn.C.TENSOR_INT32, 0.0, 0))
    y = m.op("CONV_2D", x, wq, bq, 0, 0, 0, 0, 1, 1, 0,
             outputs=[(nn.quant8_asymm_signed(0.1, 4), (1, 1, 1, 8))])
    m.output(y, "y")
    comp = m.compile()
    assert made == want
    reals = (np.float32(0.05) * scales).astype(np.float64) / 0.1
    for _ in range(4):
        xv = rng.integers(-128, 128, (1, 1, 1, 16)).astype(np.int8)
        got = comp.run({"x": xv})["y"]
        acc = (xv.astype(np.int64) + 3).reshape(16) @ w.reshape(8, 16).T.astype(np.int64) + bias
        ref = np.clip([Q.Requant(float(reals[c]))(np.array([acc[c]]))[0] for c in range(8)] + np.int64(4), -128, 127)
        np.testing.assert_array_equal(got.reshape(8), ref)
    assert made == want


# =================================================================================================
# FULLY_CONNECTED
# =================================================================================================
def test_fc_float_rank4_input_is_flattened():
    x = RNG.standard_normal((2, 2, 1, 3)).astype(np.float32)
    w = RNG.standard_normal((4, 6)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    (out,) = ok("FULLY_CONNECTED", [T.f32([2, 2, 1, 3], x), T.f32([4, 6], w, True), T.f32([4], b, True),
                                    T.i32(1)], [T.f32([2, 4])])
    np.testing.assert_allclose(out, np.maximum(x.reshape(2, 6) @ w.T + b, 0), rtol=1e-5, atol=1e-5)


def test_fc_dynamic_output_shape_and_batch_from_elements():
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    w = RNG.standard_normal((5, 4)).astype(np.float32)
    (out,) = ok("FULLY_CONNECTED", [T.f32([3, 8], x), T.f32([5, 4], w, True), T.f32([5], np.zeros(5), True),
                                    T.i32(0)], [T.f32([0, 0])])
    assert out.shape == (6, 5)
    np.testing.assert_allclose(out, x.reshape(6, 4) @ w.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [3, 1])          # 1: one row, quant.TableProduct
@pytest.mark.parametrize("fuse", [0, 1, 2, 3])
@pytest.mark.parametrize("signed", [False, True])
def test_fc_quant_bit_exact(fuse, signed, rows):
    t, lo, hi = (Q8S, -128, 127) if signed else (Q8, 0, 255)
    zx, zw, zo = (-5, 3, 7) if signed else (130, 121, 100)
    sx, sw, so = 0.02, 0.011, 0.05
    x = RNG.integers(lo, hi + 1, (rows, 20))
    w = RNG.integers(lo, hi + 1, (6, 20))
    b = RNG.integers(-3000, 3000, 6)
    ins = [Opd(t, [rows, 20], x, sx, zx), Opd(t, [6, 20], w, sw, zw, const=True),
           Opd(I32T, [6], b, prod32(sx, sw), 0, const=True), T.i32(fuse)]
    (out,) = ok("FULLY_CONNECTED", ins, [Opd(t, [rows, 6], None, so, zo)])
    acc = (x - zx) @ (w - zw).T + b
    lo2, hi2 = act_range(fuse, so, zo, lo, hi)
    np.testing.assert_array_equal(out, requant_ref(acc, prod32(sx, sw) / so, zo, lo2, hi2))


def test_fc_quant_large_input_size_uses_exact_sums():
    # 4096 inputs at the extremes: partial sums beyond 2**24 force the float64 path
    k = 4096
    x = np.full((2, k), 255)
    x[1, ::2] = 0
    w = np.full((3, k), 255)
    w[2] = 0
    ins = [Opd(Q8, [2, k], x, 0.5, 0), Opd(Q8, [3, k], w, 0.5, 0, const=True),
           Opd(I32T, [3], [0, 1, -1], 0.25, 0, const=True), T.i32(0)]
    (out,) = ok("FULLY_CONNECTED", ins, [Opd(Q8, [2, 3], None, 4.0e6, 3)])
    acc = x.astype(np.int64) @ w.T.astype(np.int64) + np.array([0, 1, -1])
    np.testing.assert_array_equal(out, requant_ref(acc, 0.25 / 4.0e6, 3, 0, 255))


def test_fc_float16_and_relaxed():
    x = RNG.standard_normal((2, 5)).astype(np.float16)
    w = RNG.standard_normal((3, 5)).astype(np.float16)
    b = RNG.standard_normal(3).astype(np.float16)
    (out,) = ok("FULLY_CONNECTED", [T.f16([2, 5], x), T.f16([3, 5], w, True), T.f16([3], b, True), T.i32(3)],
                [T.f16([2, 3])])
    ref = np.clip(x.astype(np.float32) @ w.astype(np.float32).T + b.astype(np.float32), 0, 6)
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=5e-3, atol=5e-3)
    x32 = RNG.standard_normal((2, 5)).astype(np.float32)
    (out,) = ok("FULLY_CONNECTED", [T.f32([2, 5], x32), T.f32([3, 5], w.astype(np.float32), True),
                                    T.f32([3], b.astype(np.float32), True), T.i32(0)], [T.f32([2, 3])],
                relaxed=True)
    np.testing.assert_allclose(out, x32 @ w.astype(np.float32).T + b.astype(np.float32), rtol=5e-3, atol=5e-3)


def test_fc_nan_and_inf_propagate():
    x = np.array([[np.nan, 1.0], [np.inf, 0.0], [1.0, 2.0]], np.float32)
    w = np.array([[1.0, 1.0], [0.0, 1.0]], np.float32)
    (out,) = ok("FULLY_CONNECTED", [T.f32([3, 2], x), T.f32([2, 2], w, True), T.f32([2], [0, 0], True),
                                    T.i32(3)], [T.f32([3, 2])])
    with np.errstate(invalid="ignore"):
        ref = np.clip(x @ w.T, 0, 6)          # NaN stays NaN through the clamp, +inf -> 6
    assert np.isnan(out[0]).all() and out[1, 0] == 6.0 and np.isnan(out[1, 1])
    np.testing.assert_array_equal(out, ref)


def test_fc_weights_as_model_input_are_read_every_execution():
    ins = [T.f32([1, 3]), T.f32([2, 3]), T.f32([2], [0.5, -0.5], const=True), T.i32(0)]
    xv = np.array([[1, 2, 3]], np.float32)
    w1 = np.array([[1, 0, 0], [0, 1, 0]], np.float32)
    w2 = np.array([[0, 0, 1], [1, 1, 1]], np.float32)
    res = [expect_ok(run) for run in ok("FULLY_CONNECTED", ins, [T.f32([1, 2])], runs=[[xv, w1], [xv, w2]])]
    assert res[0][0].tolist() == [[1.5, 1.5]]
    assert res[1][0].tolist() == [[3.5, 5.5]]


def test_fc_zero_batch():
    xs = T.f32([0, 0], np.zeros((0, 4)))       # zero-sized: made by a SLICE inside the graph
    w = T.f32([3, 4], RNG.standard_normal((3, 4)), const=True)
    res = ok("FULLY_CONNECTED", [xs, w, T.f32([3], [0, 0, 0], const=True), T.i32(0)], [T.f32([0, 0])])
    assert res[0].shape == (0, 3)


def test_fc_lower_output_scale_needs_feature_level_3_but_is_accepted():
    x = np.array([[10, 20]])
    ins = [Opd(Q8, [1, 2], x, 0.5, 0), Opd(Q8, [1, 2], [[2, 2]], 0.5, 0, const=True),
           Opd(I32T, [1], [0], 0.25, 0, const=True), T.i32(0)]
    (out,) = ok("FULLY_CONNECTED", ins, [Opd(Q8, [1, 1], None, 0.2, 0)])   # 0.2 < 0.5 * 0.5
    assert out.tolist() == [[min(255, round(60 * 0.25 / 0.2))]]


def test_fc_relu1_clamp_rounds_half_away_from_zero():
    # out scale 2: RELU1 range is zp + round(-1/2) .. zp + round(1/2) = 127 .. 129 in the reference
    ins = [Opd(Q8, [1, 1], [[8]], 1.0, 10), Opd(Q8, [1, 1], [[1]], 1.0, 0, const=True),
           Opd(I32T, [1], [0], 1.0, 0, const=True), T.i32(2)]
    (out,) = ok("FULLY_CONNECTED", ins, [Opd(Q8, [1, 1], None, 2.0, 128)])
    assert out.tolist() == [[127]]


@pytest.mark.parametrize("case, words", [
    ("bias_type", ["input 2 (bias)", "TENSOR_INT32"]),
    ("bias_scale", ["input 2 (bias) scale", "input scale × weights scale"]),
    ("rank1", ["input 0 has rank 1", "2..4"]),
    ("rank5", ["input 0 has rank 5"]),
    ("weights_rank", ["input 1 (weights) has rank 3"]),
    ("bias_len", ["input 2 (bias) has 3 elements", "4 units"]),
    ("not_multiple", ["not a multiple of input_size 4"]),
    ("fuse", ["FuseCode", "got 7"]),
    ("weights_type", ["input 1 (weights)", "TENSOR_FLOAT32"]),
    ("count", ["expected 4 inputs"]),
])
@pytest.mark.strict_mode
def test_fc_validation(case, words):
    xq = Opd(Q8, [2, 4], None, 0.5, 0)
    wq = Opd(Q8, [4, 4], np.zeros((4, 4)), 0.5, 0, const=True)
    oq = Opd(Q8, [2, 4], None, 1.0, 0)
    x, w, b, o = T.f32([2, 4]), T.f32([4, 4], np.zeros((4, 4)), True), T.f32([4], np.zeros(4), True), T.f32([2, 4])
    ins = {"bias_type": [xq, wq, T.f32([4], np.zeros(4), True), T.i32(0)],
           "bias_scale": [xq, wq, Opd(I32T, [4], np.zeros(4), 0.3, 0, const=True), T.i32(0)],
           "rank1": [T.f32([8]), w, b, T.i32(0)],
           "rank5": [T.f32([1, 1, 1, 2, 4]), w, b, T.i32(0)],
           "weights_rank": [x, T.f32([4, 4, 1], np.zeros((4, 4, 1)), True), b, T.i32(0)],
           "bias_len": [x, w, T.f32([3], np.zeros(3), True), T.i32(0)],
           "not_multiple": [T.f32([3, 3]), w, b, T.i32(0)],
           "fuse": [x, w, b, T.i32(7)],
           "weights_type": [x, Opd(Q8, [4, 4], np.zeros((4, 4)), 0.5, 0, const=True), b, T.i32(0)],
           "count": [x, w, b],
           }[case]
    out = oq if case in ("bias_type", "bias_scale") else o
    msg = fails("FULLY_CONNECTED", ins, [out], *words)
    assert msg.count("FULLY_CONNECTED") >= 1


# =================================================================================================
# CONV_2D
# =================================================================================================
CONV_CASES = [
    # (n, h, w, c, o, kh, kw, strides(h, w), pads(t, b, l, r) or scheme, dil(h, w), nchw, fuse)
    (1, 5, 6, 3, 4, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), False, 0),
    (2, 7, 5, 2, 3, 3, 2, (2, 1), (0, 2, 1, 0), (1, 1), False, 1),
    (1, 9, 9, 2, 2, 3, 3, (1, 2), "SAME", (2, 3), False, 3),
    (1, 8, 7, 3, 5, 1, 1, (1, 1), "VALID", (1, 1), False, 2),     # 1x1: one GEMM
    (1, 8, 7, 3, 5, 1, 1, (2, 3), "SAME", (1, 1), True, 0),       # strided 1x1, NCHW
    (3, 6, 6, 4, 2, 2, 3, (1, 1), "VALID", (1, 1), True, 3),
    (1, 4, 4, 2, 3, 5, 5, (1, 1), "SAME", (1, 1), False, 0),      # filter larger than input (SAME)
    (2, 6, 5, 4, 12, 1, 1, (1, 1), "VALID", (1, 1), False, 3),    # expanding 1x1: bias in the GEMM
    (1, 7, 7, 3, 8, 1, 1, (2, 2), "SAME", (1, 1), False, 1),      # ... strided
    (2, 6, 6, 3, 4, 3, 3, (2, 2), "SAME", (1, 1), True, 3),       # NCHW output: bias pass kept
]
# narrow inputs (KW*C < 16) with output rows of >= 32 pixels: the patches are gathered
# transposed (an image stem); the last case has several row blocks (the last one partial)
NARROW_CASES = [
    (2, 70, 66, 3, 8, 3, 3, (2, 2), "SAME", (1, 1), False, 1),
    (1, 21, 70, 2, 5, 3, 3, (1, 1), (1, 1, 1, 1), (1, 2), True, 3),
    (1, 12, 40, 1, 7, 5, 5, (1, 1), "VALID", (1, 1), False, 0),
    (1, 46, 68, 3, 8, 7, 5, (1, 1), "VALID", (1, 1), False, 3),       # 40 rows: blocks of 36 and 4
]
# a filter row reads one contiguous run of 12 to 64 values (no width dilation): im2col copies
# each run as one void item (a 5x5 three-channel stem, 3x3 over 8-21 channels); with no
# padding the runs are a view of the caller's own input
RUN_CASES = [
    (1, 20, 36, 3, 6, 5, 5, (2, 2), "SAME", (1, 1), False, 1),
    (2, 9, 10, 16, 5, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), True, 0),
    (1, 8, 8, 8, 4, 3, 3, (1, 1), "VALID", (1, 1), False, 3),
    (1, 12, 12, 8, 4, 3, 3, (1, 1), "SAME", (2, 1), False, 0),
    (1, 7, 9, 21, 3, 3, 3, (2, 1), "SAME", (1, 1), False, 2),
]
# one output pixel reading the whole input (a streaming step): quantized, the fused path
# (quant.TableProduct: one float64 product with the raw input, then a clamp or the stage's step table);
# the NCHW case takes the usual path
ONE_PIXEL_CASES = [
    (1, 1, 1, 64, 64, 1, 1, (1, 1), "VALID", (1, 1), False, 0),
    (1, 5, 1, 40, 32, 5, 1, (1, 1), "VALID", (1, 1), False, 1),
    (1, 3, 3, 8, 5, 3, 3, (2, 2), (0, 0, 0, 0), (1, 1), False, 3),
    (1, 3, 3, 8, 5, 3, 3, (1, 1), "VALID", (1, 1), True, 0),
]
# a few pixels through a 1x1 filter: one GEMM into a kept accumulator, NHWC and NCHW outputs
CONV_CASES += [(2, 3, 2, 5, 7, 1, 1, (1, 1), "VALID", (1, 1), True, 0),
               (1, 1, 1, 64, 64, 1, 1, (1, 1), "VALID", (1, 1), False, 1)]
CONV_CASES += NARROW_CASES + RUN_CASES + ONE_PIXEL_CASES


def _implicit_pads(scheme, h, w, kh, kw, strides, dil):
    def one(n, k, s, d):
        if scheme == "VALID":
            return 0, 0
        out = (n + s - 1) // s
        tot = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
        return tot // 2, tot - tot // 2
    t, b = one(h, kh, strides[0], dil[0])
    l, r = one(w, kw, strides[1], dil[1])
    return t, b, l, r


def _conv_inputs(x_opd, w_opd, b_opd, pads, strides, dil, nchw, fuse, extra=None):
    if isinstance(pads, str):
        p = i32s({"SAME": 1, "VALID": 2}[pads], strides[1], strides[0])
    else:
        t, b, l, r = pads
        p = i32s(l, r, t, b, strides[1], strides[0])
    tail = [T.i32(fuse)]
    if nchw or dil != (1, 1):
        tail.append(T.b(nchw))
    if dil != (1, 1):
        tail += i32s(dil[1], dil[0])
    return [x_opd, w_opd, b_opd] + p + ([] if extra is None else [T.i32(extra)]) + tail


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_float_against_reference(case):
    n, h, w, c, o, kh, kw, strides, pads, dil, nchw, fuse = case
    x = RNG.standard_normal((n, h, w, c)).astype(np.float32)
    wt = RNG.standard_normal((o, kh, kw, c)).astype(np.float32)
    b = RNG.standard_normal(o).astype(np.float32)
    p = _implicit_pads(pads, h, w, kh, kw, strides, dil) if isinstance(pads, str) else pads
    ref = act_float(conv_ref(x.astype(np.float64), wt.astype(np.float64), b, strides, p, dil), fuse)
    xin = to_nchw(x) if nchw else x
    ins = _conv_inputs(T.f32(list(xin.shape), xin), T.f32([o, kh, kw, c], wt, True), T.f32([o], b, True),
                       pads, strides, dil, nchw, fuse)
    (out,) = ok("CONV_2D", ins, [T.f32([0, 0, 0, 0])])
    got = from_nchw(out) if nchw else out
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["q8", "q8s", "pc", "pc_signed"])
@pytest.mark.parametrize("case", CONV_CASES[:3] + CONV_CASES[4:6] + NARROW_CASES + RUN_CASES + ONE_PIXEL_CASES)
def test_conv2d_quant_bit_exact(kind, case):
    n, h, w, c, o, kh, kw, strides, pads, dil, nchw, fuse = case
    signed = kind in ("q8s", "pc_signed")
    t, lo, hi = (Q8S, -128, 127) if signed else (Q8, 0, 255)
    zx, zo = (-20, 5) if signed else (120, 131)
    sx, so = 0.03, 0.07
    x = RNG.integers(lo, hi + 1, (n, h, w, c))
    if kind.startswith("pc"):
        wt = RNG.integers(-127, 128, (o, kh, kw, c))
        scales = (0.002 + RNG.random(o) * 0.02).astype(np.float32)
        w_opd = Opd(QPC, [o, kh, kw, c], wt, const=True, channel=(0, scales))
        reals = (np.float32(sx) * scales).astype(np.float64) / so
        b_opd_scale = 0.0
        wc = wt
    else:
        zw = -3 if signed else 118
        sw = 0.013
        wt = RNG.integers(lo, hi + 1, (o, kh, kw, c))
        w_opd = Opd(t, [o, kh, kw, c], wt, sw, zw, const=True)
        reals = prod32(sx, sw) / so
        b_opd_scale = prod32(sx, sw)
        wc = wt - zw
    b = RNG.integers(-5000, 5000, o)
    p = _implicit_pads(pads, h, w, kh, kw, strides, dil) if isinstance(pads, str) else pads
    acc = conv_ref((x - zx).astype(np.int64), wc.astype(np.int64), b, strides, p, dil)
    ref = requant_ref(acc, reals, zo, *act_range(fuse, so, zo, lo, hi))
    xin = to_nchw(x) if nchw else x
    ins = _conv_inputs(Opd(t, list(xin.shape), xin, sx, zx), w_opd, Opd(I32T, [o], b, b_opd_scale, 0, const=True),
                       pads, strides, dil, nchw, fuse)
    (out,) = ok("CONV_2D", ins, [Opd(t, [0, 0, 0, 0], None, so, zo)])
    got = from_nchw(out) if nchw else out
    np.testing.assert_array_equal(got, ref)


def test_conv2d_float16():
    x = RNG.standard_normal((1, 5, 5, 3)).astype(np.float16)
    wt = RNG.standard_normal((2, 3, 3, 3)).astype(np.float16)
    b = RNG.standard_normal(2).astype(np.float16)
    ins = _conv_inputs(T.f16([1, 5, 5, 3], x), T.f16([2, 3, 3, 3], wt, True), T.f16([2], b, True),
                       "SAME", (1, 1), (1, 1), False, 0)
    (out,) = ok("CONV_2D", ins, [T.f16([1, 5, 5, 2])])
    ref = conv_ref(x.astype(np.float64), wt.astype(np.float64), b.astype(np.float64), (1, 1), (1, 1, 1, 1))
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=5e-3, atol=1e-2)


def test_conv2d_filter_as_model_input_quant_per_tensor():
    ins = [Opd(Q8, [1, 3, 3, 2], None, 0.5, 10), Opd(Q8, [2, 2, 2, 2], None, 0.25, 100),
           Opd(I32T, [2], [3, -3], 0.125, 0, const=True)] + i32s(2, 1, 1, 0)   # VALID, strides 1, 1, no act.
    xv = RNG.integers(0, 256, (1, 3, 3, 2)).astype(np.uint8)
    outs = []
    feeds = []
    for _ in range(2):
        wv = RNG.integers(0, 256, (2, 2, 2, 2)).astype(np.uint8)
        feeds.append([xv, wv])
        acc = conv_ref(xv.astype(np.int64) - 10, wv.astype(np.int64) - 100, np.array([3, -3]), (1, 1), (0, 0, 0, 0))
        outs.append(requant_ref(acc, 0.125 / 1.0, 50, 0, 255))
    res = [expect_ok(run) for run in ok("CONV_2D", ins, [Opd(Q8, [1, 2, 2, 2], None, 1.0, 50)], runs=feeds)]
    for got, want in zip(res, outs):
        np.testing.assert_array_equal(got[0], want)


def test_conv2d_nan_propagates():
    x = np.ones((1, 3, 3, 1), np.float32)
    x[0, 1, 1, 0] = np.nan
    ins = _conv_inputs(T.f32([1, 3, 3, 1], x), T.f32([1, 1, 1, 1], [[[[2.0]]]], True), T.f32([1], [0.0], True),
                       "VALID", (1, 1), (1, 1), False, 1)
    (out,) = ok("CONV_2D", ins, [T.f32([1, 3, 3, 1])])
    assert np.isnan(out[0, 1, 1, 0]) and np.nansum(out) == 16.0


def test_conv2d_zero_batch():
    xs = T.f32([0, 0, 0, 0], np.zeros((0, 3, 3, 1)))       # zero-sized: made by a SLICE inside the graph
    ins = [xs, T.f32([2, 2, 2, 1], np.ones((2, 2, 2, 1)), const=True), T.f32([2], [0, 0], const=True)]
    res = ok("CONV_2D", ins + i32s(2, 1, 1, 0), [T.f32([0, 0, 0, 0])])
    assert res[0].shape == (0, 2, 2, 2)


@pytest.mark.parametrize("case, words", [
    ("one_dilation_explicit", ["12 inputs", "pair"]),
    ("one_dilation_implicit", ["9 inputs", "pair"]),
    ("channel_dim", ["channelDim 0", "got 1"]),
    ("pc_bias_scale", ["bias) must have scale 0"]),
    ("bias_scale", ["bias) scale"]),
    ("depth", ["filter) depth 3 does not match the input depth 2"]),
    ("scheme", ["PaddingCode", "got 3"]),
    ("neg_pad", ["padding) must be >= 0", "-1"]),
    ("stride0", ["stride) must be >= 1"]),
    ("rank3", ["input 0 (input) has rank 3"]),
    ("layout_type", ["NCHW layout flag", "BOOL"]),
    ("filter_type", ["input 1 (filter)", "TENSOR_FLOAT32"]),
    ("bias_len", ["bias) has 2 elements, expected 3"]),
])
@pytest.mark.strict_mode
def test_conv2d_validation(case, words):
    x, w, b = T.f32([1, 4, 4, 2]), T.f32([3, 2, 2, 2], np.zeros((3, 2, 2, 2)), True), T.f32([3], np.zeros(3), True)
    o = T.f32([0, 0, 0, 0])
    xq, oq = Opd(Q8, [1, 4, 4, 2], None, 0.5, 0), Opd(Q8, [0, 0, 0, 0], None, 1.0, 0)
    wpc1 = Opd(QPC, [3, 2, 2, 2], np.zeros((3, 2, 2, 2)), const=True, channel=(1, [0.1, 0.1]))
    wpc = Opd(QPC, [3, 2, 2, 2], np.zeros((3, 2, 2, 2)), const=True, channel=(0, [0.1, 0.1, 0.1]))
    bq0 = Opd(I32T, [3], np.zeros(3), 0.0, 0, const=True)
    ins = {
        "one_dilation_explicit": [x, w, b] + i32s(0, 0, 0, 0, 1, 1, 0) + [T.b(False), T.i32(1)],
        "one_dilation_implicit": [x, w, b] + i32s(1, 1, 1, 0) + [T.b(False), T.i32(1)],
        "channel_dim": [xq, wpc1, bq0] + i32s(1, 1, 1, 0),
        "pc_bias_scale": [xq, wpc, Opd(I32T, [3], np.zeros(3), 0.05, 0, const=True)] + i32s(1, 1, 1, 0),
        "bias_scale": [xq, Opd(Q8, [3, 2, 2, 2], np.zeros((3, 2, 2, 2)), 0.5, 0, const=True),
                       Opd(I32T, [3], np.zeros(3), 0.5, 0, const=True)] + i32s(1, 1, 1, 0),
        "depth": [x, T.f32([3, 2, 2, 3], np.zeros((3, 2, 2, 3)), True), b] + i32s(1, 1, 1, 0),
        "scheme": [x, w, b] + i32s(3, 1, 1, 0),
        "neg_pad": [x, w, b] + i32s(-1, 0, 0, 0, 1, 1, 0),
        "stride0": [x, w, b] + i32s(1, 0, 1, 0),
        "rank3": [T.f32([4, 4, 2]), w, b] + i32s(1, 1, 1, 0),
        "layout_type": [x, w, b] + i32s(0, 0, 0, 0, 1, 1, 0) + [T.i32(0)],
        "filter_type": [x, Opd(Q8, [3, 2, 2, 2], np.zeros((3, 2, 2, 2)), 0.5, 0, const=True), b] + i32s(1, 1, 1, 0),
        "bias_len": [x, w, T.f32([2], np.zeros(2), True)] + i32s(1, 1, 1, 0),
    }[case]
    out = oq if case in ("channel_dim", "pc_bias_scale", "bias_scale") else o
    fails("CONV_2D", ins, [out], "CONV_2D", *words)


@pytest.mark.strict_mode
def test_conv2d_filter_too_large_for_input_fails_at_compilation():
    ins = [T.f32([1, 2, 2, 1]), T.f32([1, 3, 3, 1], np.ones((1, 3, 3, 1)), True), T.f32([1], [0.0], True)] \
        + i32s(2, 1, 1, 0)
    fails("CONV_2D", ins, [T.f32([0, 0, 0, 0])], "does not fit")


# =================================================================================================
# DEPTHWISE_CONV_2D
# =================================================================================================
DW_CASES = [
    # (n, h, w, c, mult, kh, kw, strides, pads, dil, nchw, fuse)
    (1, 6, 6, 3, 1, 3, 3, (1, 1), "SAME", (1, 1), False, 3),
    (2, 7, 8, 2, 3, 3, 2, (2, 2), (1, 0, 0, 1), (1, 1), False, 0),
    (1, 9, 9, 4, 2, 3, 3, (1, 3), "VALID", (2, 2), True, 1),
    (1, 5, 9, 2, 1, 2, 2, (3, 2), "SAME", (1, 1), True, 2),
    # 64 channels and more: the float kernel's einsum path (NHWC), and NCHW / multiplier fallbacks
    (2, 9, 7, 64, 1, 3, 3, (1, 1), "SAME", (1, 1), False, 3),
    (1, 11, 10, 96, 1, 3, 3, (2, 2), "SAME", (1, 1), False, 1),
    (1, 12, 12, 80, 1, 3, 2, (1, 2), (2, 1, 0, 3), (2, 3), False, 0),
    (1, 8, 8, 72, 1, 3, 3, (2, 1), "VALID", (1, 1), True, 3),
    (1, 6, 7, 32, 2, 3, 3, (1, 1), "SAME", (1, 1), False, 2),
    # stride 2 in width, float NHWC: the width phases copied as whole pixels (void items)
    (2, 13, 14, 16, 1, 3, 3, (2, 2), "SAME", (1, 1), False, 1),
    (1, 10, 11, 64, 1, 3, 3, (1, 2), (1, 1, 1, 1), (1, 1), False, 0),
    # dilation with a stride of 1 in one direction (the einsum's tap step), 5x5 filters
    (2, 10, 11, 8, 1, 3, 3, (2, 1), "SAME", (2, 2), False, 3),
    (1, 10, 11, 8, 1, 3, 3, (1, 2), "SAME", (2, 2), False, 0),
    (1, 13, 9, 24, 1, 5, 5, (2, 2), "SAME", (1, 1), False, 1),
    (1, 1, 17, 32, 1, 1, 17, (1, 1), "VALID", (1, 1), False, 0),
    # issue 42: NCHW with one channel, output above 1x1 (the input seen as NHWC is contiguous but
    # keeps the channel axis's NCHW stride; the einsum's row view must step one item)
    (1, 3, 3, 1, 1, 1, 1, (1, 1), "VALID", (1, 1), True, 0),
    (2, 5, 4, 1, 1, 3, 3, (1, 1), "SAME", (1, 1), True, 1),
    (2, 4, 6, 1, 3, 2, 2, (1, 1), "SAME", (3, 4), True, 0),
    # one output pixel reading the whole input (quantized: quant.TableProduct)
    (1, 5, 1, 32, 1, 5, 1, (1, 1), "VALID", (1, 1), False, 0),
    (1, 21, 1, 64, 1, 21, 1, (1, 1), "VALID", (1, 1), False, 1),
    (1, 3, 3, 8, 1, 3, 3, (2, 2), (0, 0, 0, 0), (1, 1), False, 3),
]


@pytest.mark.parametrize("case", DW_CASES)
def test_depthwise_float_against_reference(case):
    n, h, w, c, m, kh, kw, strides, pads, dil, nchw, fuse = case
    o = c * m
    x = RNG.standard_normal((n, h, w, c)).astype(np.float32)
    wt = RNG.standard_normal((1, kh, kw, o)).astype(np.float32)
    b = RNG.standard_normal(o).astype(np.float32)
    p = _implicit_pads(pads, h, w, kh, kw, strides, dil) if isinstance(pads, str) else pads
    ref = act_float(dw_ref(x.astype(np.float64), wt.astype(np.float64), b, strides, p, m, dil), fuse)
    xin = to_nchw(x) if nchw else x
    ins = _conv_inputs(T.f32(list(xin.shape), xin), T.f32([1, kh, kw, o], wt, True), T.f32([o], b, True),
                       pads, strides, dil, nchw, fuse, extra=m)
    (out,) = ok("DEPTHWISE_CONV_2D", ins, [T.f32([0, 0, 0, 0])])
    got = from_nchw(out) if nchw else out
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["q8", "pc_signed"])
@pytest.mark.parametrize("case", DW_CASES)
def test_depthwise_quant_bit_exact(kind, case):
    n, h, w, c, m, kh, kw, strides, pads, dil, nchw, fuse = case
    o = c * m
    signed = kind == "pc_signed"
    t, lo, hi = (Q8S, -128, 127) if signed else (Q8, 0, 255)
    zx, zo, sx, so = (7, -9, 0.04, 0.02) if signed else (99, 140, 0.04, 0.02)
    x = RNG.integers(lo, hi + 1, (n, h, w, c))
    if signed:
        wt = RNG.integers(-127, 128, (1, kh, kw, o))
        scales = (0.001 + RNG.random(o) * 0.05).astype(np.float32)
        w_opd = Opd(QPC, [1, kh, kw, o], wt, const=True, channel=(3, scales))
        reals = (np.float32(sx) * scales).astype(np.float64) / so
        bscale, wc = 0.0, wt
    else:
        wt = RNG.integers(0, 256, (1, kh, kw, o))
        w_opd = Opd(Q8, [1, kh, kw, o], wt, 0.009, 133, const=True)
        reals = prod32(sx, 0.009) / so
        bscale, wc = prod32(sx, 0.009), wt - 133
    b = RNG.integers(-2000, 2000, o)
    p = _implicit_pads(pads, h, w, kh, kw, strides, dil) if isinstance(pads, str) else pads
    acc = dw_ref((x - zx).astype(np.int64), wc.astype(np.int64), b, strides, p, m, dil)
    ref = requant_ref(acc, reals, zo, *act_range(fuse, so, zo, lo, hi))
    xin = to_nchw(x) if nchw else x
    ins = _conv_inputs(Opd(t, list(xin.shape), xin, sx, zx), w_opd, Opd(I32T, [o], b, bscale, 0, const=True),
                       pads, strides, dil, nchw, fuse, extra=m)
    (out,) = ok("DEPTHWISE_CONV_2D", ins, [Opd(t, [0, 0, 0, 0], None, so, zo)])
    got = from_nchw(out) if nchw else out
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("case, words", [
    ("filter_dim0", ["shape [1, height, width, depth_out]", "got dimension 0 = 2"]),
    ("mult", ["depth_out 4 must equal input depth × depth multiplier (2 × 3)"]),
    ("channel_dim", ["channelDim 3", "got 0"]),
    ("one_dilation", ["13 inputs", "pair"]),
    ("mult0", ["depth multiplier) must be >= 1"]),
])
@pytest.mark.strict_mode
def test_depthwise_validation(case, words):
    x = T.f32([1, 4, 4, 2])
    w = T.f32([1, 2, 2, 4], np.zeros((1, 2, 2, 4)), True)
    b = T.f32([4], np.zeros(4), True)
    ins = {
        "filter_dim0": [x, T.f32([2, 2, 2, 4], np.zeros((2, 2, 2, 4)), True), b] + i32s(1, 1, 1, 2, 0),
        "mult": [x, w, b] + i32s(1, 1, 1, 3, 0),
        "channel_dim": [Opd(Q8, [1, 4, 4, 2], None, 0.5, 0),
                        Opd(QPC, [1, 2, 2, 4], np.zeros((1, 2, 2, 4)), const=True, channel=(0, [0.1])),
                        Opd(I32T, [4], np.zeros(4), 0.0, 0, const=True)] + i32s(1, 1, 1, 2, 0),
        "one_dilation": [x, w, b] + i32s(0, 0, 0, 0, 1, 1, 2, 0) + [T.b(False), T.i32(1)],
        "mult0": [x, w, b] + i32s(1, 1, 1, 0, 0),
    }[case]
    out = Opd(Q8, [0, 0, 0, 0], None, 1.0, 0) if case == "channel_dim" else T.f32([0, 0, 0, 0])
    fails("DEPTHWISE_CONV_2D", ins, [out], "DEPTHWISE_CONV_2D", *words)


# =================================================================================================
# GROUPED_CONV_2D
# =================================================================================================
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("pads", ["SAME", (1, 0, 2, 1)])
def test_grouped_conv_float_and_quant(nchw, pads):
    n, h, w, groups, cg, og, kh, kw, strides = 2, 6, 5, 3, 2, 2, 3, 2, (2, 1)
    c, o = groups * cg, groups * og
    x = RNG.standard_normal((n, h, w, c)).astype(np.float32)
    wt = RNG.standard_normal((o, kh, kw, cg)).astype(np.float32)
    b = RNG.standard_normal(o).astype(np.float32)
    p = _implicit_pads(pads, h, w, kh, kw, strides, (1, 1)) if isinstance(pads, str) else pads
    ref = act_float(conv_ref(x.astype(np.float64), wt.astype(np.float64), b, strides, p, groups=groups), 1)
    xin = to_nchw(x) if nchw else x

    def ins_for(xo, wo, bo):
        base = [xo, wo, bo]
        if isinstance(pads, str):
            base += i32s(1, strides[1], strides[0])
        else:
            t, bb, l, r = pads
            base += i32s(l, r, t, bb, strides[1], strides[0])
        return base + [T.i32(groups), T.i32(1), T.b(nchw)]

    (out,) = ok("GROUPED_CONV_2D", ins_for(T.f32(list(xin.shape), xin), T.f32([o, kh, kw, cg], wt, True),
                                           T.f32([o], b, True)), [T.f32([0, 0, 0, 0])])
    np.testing.assert_allclose(from_nchw(out) if nchw else out, ref, rtol=1e-4, atol=1e-4)
    # per-channel quantized
    xq = RNG.integers(0, 256, (n, h, w, c))
    wq = RNG.integers(-127, 128, (o, kh, kw, cg))
    scales = (0.003 + RNG.random(o) * 0.01).astype(np.float32)
    bq = RNG.integers(-500, 500, o)
    acc = conv_ref((xq - 77).astype(np.int64), wq.astype(np.int64), bq, strides, p, groups=groups)
    ref = requant_ref(acc, (np.float32(0.05) * scales).astype(np.float64) / 0.1, 60, *act_range(1, 0.1, 60, 0, 255))
    xqin = to_nchw(xq) if nchw else xq
    (out,) = ok("GROUPED_CONV_2D", ins_for(Opd(Q8, list(xqin.shape), xqin, 0.05, 77),
                                           Opd(QPC, [o, kh, kw, cg], wq, const=True, channel=(0, scales)),
                                           Opd(I32T, [o], bq, 0.0, 0, const=True)),
                [Opd(Q8, [0, 0, 0, 0], None, 0.1, 60)])
    np.testing.assert_array_equal(from_nchw(out) if nchw else out, ref)


@pytest.mark.parametrize("case, words", [
    ("groups_out", ["4 output channels, not divisible by 3 groups"]),
    ("groups_in", ["input 0 depth 6 must equal groups × filter depth (3 × 1)"]),
    ("no_layout", ["expected 9 or 12 inputs, got 8"]),
])
@pytest.mark.strict_mode
def test_grouped_conv_validation(case, words):
    x = T.f32([1, 4, 4, 6])
    if case == "groups_out":
        ins = [x, T.f32([4, 1, 1, 2], np.zeros((4, 1, 1, 2)), True), T.f32([4], np.zeros(4), True)] \
            + i32s(1, 1, 1, 3, 0) + [T.b(False)]
    elif case == "groups_in":
        ins = [x, T.f32([3, 1, 1, 1], np.zeros((3, 1, 1, 1)), True), T.f32([3], np.zeros(3), True)] \
            + i32s(1, 1, 1, 3, 0) + [T.b(False)]
    else:
        ins = [x, T.f32([3, 1, 1, 2], np.zeros((3, 1, 1, 2)), True), T.f32([3], np.zeros(3), True)] \
            + i32s(1, 1, 1, 3, 0)
    fails("GROUPED_CONV_2D", ins, [T.f32([0, 0, 0, 0])], "GROUPED_CONV_2D", *words)


# =================================================================================================
# TRANSPOSE_CONV_2D
# =================================================================================================
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("variant", ["explicit", "same_crop", "same_extend", "valid"])
def test_transpose_conv_float(nchw, variant):
    n, h, w, c, o, kh, kw, strides = 2, 3, 4, 2, 3, 3, 2, (2, 3)
    full_h, full_w = (h - 1) * strides[0] + kh, (w - 1) * strides[1] + kw
    x = RNG.standard_normal((n, h, w, c)).astype(np.float32)
    wt = RNG.standard_normal((o, kh, kw, c)).astype(np.float32)
    b = RNG.standard_normal(o).astype(np.float32)
    xin = to_nchw(x) if nchw else x
    base = [T.f32(list(xin.shape), xin), T.f32([o, kh, kw, c], wt, True), T.f32([o], b, True)]
    tail = [T.i32(0), T.b(nchw)]
    if variant == "explicit":
        pt, pb, pl, pr = 1, 2, 0, 1
        ins = base + i32s(pl, pr, pt, pb, strides[1], strides[0]) + tail
        out_hw, p = (full_h - pt - pb, full_w - pl - pr), (pt, pl)
    else:
        want = {"same_crop": (full_h - 3, full_w - 2), "same_extend": (full_h + 3, full_w + 1),
                "valid": (5, 5)}[variant]
        shape = [n, o, *want] if nchw else [n, *want, o]
        scheme = 2 if variant == "valid" else 1
        ins = base + [T.i32t([4], shape, True)] + i32s(scheme, strides[1], strides[0]) + tail
        if variant == "valid":
            out_hw, p = (full_h, full_w), (0, 0)
        else:
            th, tw = full_h - want[0], full_w - want[1]
            out_hw, p = want, (max(th, 0) // 2, max(tw, 0) // 2)
    ref = tconv_ref(x.astype(np.float64), wt.astype(np.float64), b, strides, p, out_hw)
    (out,) = ok("TRANSPOSE_CONV_2D", ins, [T.f32([0, 0, 0, 0])])
    np.testing.assert_allclose(from_nchw(out) if nchw else out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("signed", [False, True])
def test_transpose_conv_quant_per_channel_bit_exact(signed):
    n, h, w, c, o, kh, kw, strides = 1, 3, 3, 3, 2, 3, 3, (2, 2)
    t, lo, hi = (Q8S, -128, 127) if signed else (Q8, 0, 255)
    zx, zo = (-3, 10) if signed else (128, 100)
    x = RNG.integers(lo, hi + 1, (n, h, w, c))
    wt = RNG.integers(-127, 128, (o, kh, kw, c))
    scales = np.array([0.004, 0.0075], np.float32)
    b = np.array([1000, -1000])
    pt, pb, pl, pr = 1, 1, 0, 2
    out_hw = ((h - 1) * 2 + kh - pt - pb, (w - 1) * 2 + kw - pl - pr)
    acc = tconv_ref((x - zx).astype(np.int64), wt.astype(np.int64), b, strides, (pt, pl), out_hw)
    ref = requant_ref(acc, (np.float32(0.1) * scales).astype(np.float64) / 0.2, zo, lo, hi)
    ins = [Opd(t, [n, h, w, c], x, 0.1, zx), Opd(QPC, [o, kh, kw, c], wt, const=True, channel=(0, scales)),
           Opd(I32T, [o], b, 0.0, 0, const=True)] + i32s(pl, pr, pt, pb, 2, 2, 0) + [T.b(False)]
    (out,) = ok("TRANSPOSE_CONV_2D", ins, [Opd(t, [0, 0, 0, 0], None, 0.2, zo)])
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("case, words", [
    ("count", ["expected 9 or 11 inputs, got 10"]),
    ("shape_len", ["output shape) has 3 elements, expected 4"]),
    ("shape_type", ["output shape) has type TENSOR_FLOAT32"]),
    ("too_much_padding", ["leave no output"]),
])
@pytest.mark.strict_mode
def test_transpose_conv_validation(case, words):
    x = T.f32([1, 2, 2, 1])
    w = T.f32([1, 3, 3, 1], np.ones((1, 3, 3, 1)), True)
    b = T.f32([1], [0.0], True)
    ins = {
        "count": [x, w, b] + i32s(0, 0, 0, 0, 1, 1) + [T.b(False)],
        "shape_len": [x, w, b, T.i32t([3], [1, 4, 4], True)] + i32s(1, 1, 1, 0) + [T.b(False)],
        "shape_type": [x, w, b, T.f32([4], [1, 4, 4, 1], True)] + i32s(1, 1, 1, 0) + [T.b(False)],
        "too_much_padding": [x, w, b] + i32s(2, 2, 2, 2, 1, 1, 0) + [T.b(False)],
    }[case]
    fails("TRANSPOSE_CONV_2D", ins, [T.f32([0, 0, 0, 0])], "TRANSPOSE_CONV_2D", *words)


# =================================================================================================
# BATCH_MATMUL
# =================================================================================================
@pytest.mark.parametrize("adj", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_batch_matmul_float(adj, batch):
    ax, ay = adj
    a = RNG.standard_normal(batch + ((4, 3) if ax else (3, 4))).astype(np.float32)
    b = RNG.standard_normal(batch + ((5, 4) if ay else (4, 5))).astype(np.float32)
    (out,) = ok("BATCH_MATMUL", [T.f32(list(a.shape), a), T.f32(list(b.shape), b), T.b(ax), T.b(ay)],
                [T.f32([0] * (len(batch) + 2))])
    ref = (np.swapaxes(a, -1, -2) if ax else a) @ (np.swapaxes(b, -1, -2) if ay else b)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_batch_matmul_two_inputs_only_and_float16():
    a = RNG.standard_normal((2, 3)).astype(np.float16)
    b = RNG.standard_normal((3, 2)).astype(np.float16)
    (out,) = ok("BATCH_MATMUL", [T.f16([2, 3], a), T.f16([3, 2], b)], [T.f16([2, 2])])
    np.testing.assert_allclose(out.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32),
                               rtol=5e-3, atol=5e-3)


def test_batch_matmul_int32_exact_and_wraps():
    a = np.array([[[2 ** 20, 3], [-7, 2 ** 30]]], np.int64)
    b = np.array([[[2 ** 15, 1], [5, -2 ** 10]]], np.int64)
    (out,) = ok("BATCH_MATMUL", [T.i32t([1, 2, 2], a), T.i32t([1, 2, 2], b), T.b(False), T.b(False)],
                [T.i32t([1, 2, 2])])
    ref = (a @ b).astype(np.int64)
    ref = ((ref + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)
    np.testing.assert_array_equal(out, ref)


def test_batch_matmul_quant8_signed_bit_exact():
    a = RNG.integers(-128, 128, (2, 3, 40))
    b = RNG.integers(-128, 128, (2, 40, 2))
    ins = [Opd(Q8S, [2, 3, 40], a, 0.05, -7), Opd(Q8S, [2, 40, 2], b, 0.02, 12), T.b(False), T.b(False)]
    (out,) = ok("BATCH_MATMUL", ins, [Opd(Q8S, [2, 3, 2], None, 0.3, 4)])
    acc = (a - (-7)) @ (b - 12)
    np.testing.assert_array_equal(out, requant_ref(acc, prod32(0.05, 0.02) / 0.3, 4, -128, 127))


@pytest.mark.parametrize("case, words", [
    ("rank", ["same rank, got 3 and 2"]),
    ("inner", ["inner dimensions differ: 4 (input 0) vs 3 (input 1)"]),
    ("batch", ["batch dimension 0 differs"]),
    ("type", ["TENSOR_QUANT8_ASYMM"]),
    ("adj_type", ["adj_x", "BOOL"]),
    ("rank5", ["rank 5, expected 2..4"]),
])
@pytest.mark.strict_mode
def test_batch_matmul_validation(case, words):
    f = T.f32
    ins = {
        "rank": [f([2, 3, 4]), f([4, 5]), T.b(False), T.b(False)],
        "inner": [f([3, 4]), f([3, 5]), T.b(False), T.b(False)],
        "batch": [f([2, 3, 4]), f([3, 4, 5]), T.b(False), T.b(False)],
        "type": [Opd(Q8, [2, 2], None, 0.5, 0), Opd(Q8, [2, 2], None, 0.5, 0), T.b(False), T.b(False)],
        "adj_type": [f([3, 4]), f([4, 5]), T.i32(0), T.b(False)],
        "rank5": [f([1, 1, 1, 3, 4]), f([1, 1, 1, 4, 5]), T.b(False), T.b(False)],
    }[case]
    out = Opd(Q8, [0, 0], None, 1.0, 0) if case == "type" else f([0] * (len(ins[0].dims)))
    fails("BATCH_MATMUL", ins, [out], "BATCH_MATMUL", *words)


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D"])
@pytest.mark.parametrize("quant", [False, True])
@pytest.mark.parametrize("filter_const", [False, True])
def test_filter_and_bias_given_at_execution_change_between_runs(op, quant, filter_const):
    """A bias (and filter) that are not constants -- the bias made by an operation, so the
    same temporary array holds it every run: every run of one compilation uses the values
    of that run (nothing prepared from them is kept between runs)."""
    import nnapi_py as nn
    rng = np.random.default_rng(21)
    shape_w = (4, 3, 3, 4) if op == "CONV_2D" else (1, 3, 3, 4)
    wv = (rng.integers(120, 136, shape_w).astype(np.uint8) if quant
          else rng.standard_normal(shape_w).astype(np.float32))
    m = nn.Model()
    if quant:
        x = m.input("x", nn.quant8_asymm(0.5, 120), (1, 5, 5, 4))
        tw = nn.quant8_asymm(0.25, 128)
        tb = nn.OperandType(nn.int32.code, scale=0.125)                  # 0.5 * 0.25
        b_in = m.input("b", tb, (4,))
        b = m.op("SUB", b_in, m.constant(np.zeros(4, np.int32), tb), 0)  # a temporary
    else:
        x = m.input("x", nn.float32, (1, 5, 5, 4))
        tw = nn.float32
        b_in = m.input("b", nn.float32, (4,))
        b = m.op("ADD", b_in, np.zeros(4, np.float32), 0)                 # a temporary
    w = m.constant(wv, tw) if filter_const else m.input("w", tw, shape_w)
    args = (x, w, b, 1, 1, 1, 0) if op == "CONV_2D" else (x, w, b, 1, 1, 1, 1, 0)
    m.output(m.op(op, *args), "y")
    c = m.compile()
    xv = (rng.integers(100, 140, (1, 5, 5, 4)).astype(np.uint8) if quant
          else rng.standard_normal((1, 5, 5, 4)).astype(np.float32))
    outs = []
    for k in range(3):
        feeds = {"x": xv, "b": np.full(4, 8 * k, np.int32) if quant else np.full(4, float(k), np.float32)}
        if not filter_const:
            feeds["w"] = wv
        outs.append(c.run(feeds)["y"].astype(np.float64))
    step = 2.0 if quant else 1.0           # bias k (real) moves the output by k / output scale
    for k in (1, 2):
        ok = (outs[k] < 255) & (outs[0] > 0) if quant else np.ones(outs[0].shape, bool)
        assert ok.sum() > outs[0].size // 2
        np.testing.assert_allclose((outs[k] - outs[0])[ok], k * step, atol=1.0 if quant else 1e-5)


def _spy_one_row_products(monkeypatch, calls):
    """Record the depthwise flag of every quant.DirectProduct / TableProduct run."""
    import nnapi_py.ops.quant as Q
    orig = Q.TableProduct.__call__

    def spy(self, x, out):
        calls.append(self.depthwise)
        return orig(self, x, out)
    monkeypatch.setattr(Q.TableProduct, "__call__", spy)
    make = Q.DirectProduct._make_run

    def make_spy(self):
        run = make(self)

        def traced(x, out):
            calls.append(self.depthwise)
            run(x, out)
        return traced
    monkeypatch.setattr(Q.DirectProduct, "_make_run", make_spy)


def test_one_pixel_quantized_layers_take_the_fused_path(monkeypatch):
    """The NHWC one-pixel quantized cases above and a one-row quantized FULLY_CONNECTED run
    quant.DirectProduct or TableProduct (and still match the reference, checked by the
    bit-exact tests); the NCHW one, float layers and a three-row FULLY_CONNECTED do not."""
    calls = []
    _spy_one_row_products(monkeypatch, calls)
    for case in ONE_PIXEL_CASES:
        test_conv2d_quant_bit_exact("pc_signed", case)
    for case in DW_CASES[-3:]:
        test_depthwise_quant_bit_exact("q8", case)
        test_depthwise_float_against_reference(case)
    test_fc_quant_bit_exact(1, True, 1)
    test_fc_quant_bit_exact(1, True, 3)
    assert calls == [False] * 3 + [True] * 3 + [False]


@pytest.mark.parametrize("direct", [True, False])
def test_one_pixel_step_table_only_for_the_table_form(monkeypatch, direct):
    """A one-pixel layer's stage gets its step table at compilation only when it takes
    quant.TableProduct's table form; quant.DirectProduct and TableProduct's direct form need
    none.  The layers above take DirectProduct (one term and, where the stage corrects its
    negative side, two); without DirectProduct (direct=False) they take both of
    TableProduct's forms (conv, depthwise and FULLY_CONNECTED)."""
    import nnapi_py.ops.quant as Q
    made = []
    orig = Q.TableProduct.for_stage.__func__

    def spy(cls, taps, zx, stage, out_dtype, depthwise=False):
        tp = orig(cls, taps, zx, stage, out_dtype, depthwise)
        made.append((tp, stage))
        return tp
    monkeypatch.setattr(Q.TableProduct, "for_stage", classmethod(spy))
    dorig = Q.DirectProduct.for_stage.__func__

    def dspy(cls, taps, zx, stage, out_dtype, depthwise=False):
        dp = dorig(cls, taps, zx, stage, out_dtype, depthwise) if direct else None
        if dp is not None:
            made.append((dp, stage))
        return dp
    monkeypatch.setattr(Q.DirectProduct, "for_stage", classmethod(dspy))
    for case in ONE_PIXEL_CASES:
        test_conv2d_quant_bit_exact("pc_signed", case)
    for case in DW_CASES[-3:]:
        test_depthwise_quant_bit_exact("q8", case)
    test_fc_quant_bit_exact(1, True, 1)
    forms = [getattr(p, "combine", None) or p.direct for p, _ in made if p is not None]
    if direct:
        assert "add" in forms and ("flip" in forms or "store" in forms)
    else:
        assert True in forms and False in forms
    for p, stage in made:
        if p is not None:
            assert (stage._steps is None) == (isinstance(p, Q.DirectProduct) or p.direct)


def test_table_product_threads_shapes_and_caller_outputs():
    """quant.TableProduct keeps a float64 input row per thread and a flat view of the last
    output only when that output may be kept (its own or a plan temporary): 4 threads calling
    one instance at once, inputs of two shapes of the same size, outputs that are plan-like
    arrays and caller memory, all give the outputs of the full evaluation (the OutputStage on
    the integer accumulator), and a caller's array is never kept."""
    import threading
    import nnapi_py.ops.quant as Q
    rng = np.random.default_rng(7)
    for depthwise in (False, True):
        k, c = (5, 24) if depthwise else (48, 24)
        taps = rng.integers(-127, 128, (k, c))
        bias = rng.integers(-2000, 2000, c)
        zx = -3
        st = Q.OutputStage(rng.uniform(2e-4, 8e-4, c), 4, -128, 127, bias=bias,
                           acc_bound=k * c * 255 * 127)
        st.prepare_small(c)
        tp = Q.TableProduct.for_stage(taps, zx, st, np.int8, depthwise)
        assert tp is not None
        shapes = [(1, k, 1, c), (1, 1, k, c)] if depthwise else [(1, 1, 1, k), (1, k)]

        def expected(x):
            xc = x.reshape(k, c) if depthwise else x.reshape(k)
            acc = ((xc.astype(np.int64) - zx) * taps).sum(0) if depthwise else (xc.astype(np.int64) - zx) @ taps
            ref = np.empty((1, c), np.int8)
            st._passes(acc.reshape(1, c).astype(np.float64), ref)
            return ref.reshape(-1)
        errors = []

        def work(seed):
            r = np.random.default_rng(seed)
            own = np.empty((1, 1, 1, c), np.int8)                    # owns its data: kept
            for step in range(200):
                x = r.integers(-128, 128, shapes[step % 2]).astype(np.int8)
                caller = np.frombuffer(bytearray(c), np.int8)          # caller memory: never kept
                out = own if step % 3 else caller
                tp(x, out)
                if not np.array_equal(out.reshape(-1), expected(x)):
                    errors.append((seed, step))
                last = tp._local.bufs[3]
                if last is not None and last is not own:
                    errors.append((seed, step, "kept a caller's array"))
        threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []



@pytest.mark.parametrize("depthwise", [False, True])
@pytest.mark.parametrize("signed", [False, True])
def test_table_product_direct_form_is_exact(depthwise, signed):
    """quant.TableProduct's direct form (the requantized value as one exact float64 product,
    then clamp and byte store) where the stage is in its float form without the negative
    correction (a ReLU-type clamp at or above the zero point), its table form otherwise, and
    the table form where the exactness bound fails (many large weights): every form gives
    the stage's own evaluation of the integer accumulator, on random and extreme inputs."""
    import nnapi_py.ops.quant as Q
    rng = np.random.default_rng(11 + depthwise + 2 * signed)
    dt = np.int8 if signed else np.uint8
    qlo, qhi = (-128, 127) if signed else (0, 255)
    for big in (False, True):
        k, c = ((17, 32) if depthwise else (64, 48)) if not big else ((600, 8) if depthwise else (600, 8))
        taps = rng.integers(-127, 128, (k, c)) if not big else np.where(rng.random((k, c)) < 0.5, -127, 127)
        zx = int(rng.integers(qlo, qhi + 1))
        for relu in (True, False):
            zp = int(rng.integers(qlo + 20, qhi - 20))
            lo = zp if relu else qlo
            reals = rng.uniform(1e-3, 3e-3, c) if big else rng.uniform(1e-4, 3e-3, c)
            bias = rng.integers(-5000, 5000, c)
            st = Q.OutputStage(reals, zp, lo, qhi, bias=bias, acc_bound=k * 255 * 127)
            st.prepare_small(c)
            tp = Q.TableProduct.for_stage(taps, zx, st, dt, depthwise)
            assert tp is not None
            assert tp.direct == (st.mode == "float" and not st.need_neg and not big)
            if big and relu:            # the exactness bound, not the stage's form, rules it out
                assert st.mode == "float" and not st.need_neg
            shape = (1, k, 1, c) if depthwise else (1, k)
            xs = [rng.integers(qlo, qhi + 1, shape) for _ in range(60)]
            xs += [np.full(shape, v) for v in (qlo, qhi, zx)]
            xs += [np.where(np.sign(taps.reshape(shape) if depthwise else rng.random(shape) - 0.5) > 0, qhi, qlo)]
            for x in xs:
                x = x.astype(dt)
                xc = x.astype(np.int64).reshape(k, -1) - zx
                acc = (xc * taps).sum(0) if depthwise else xc[:, 0] @ taps
                ref = np.empty((1, c), dt)
                st._passes(acc.reshape(1, c).astype(np.float64), ref)
                out = np.empty((1, 1, 1, c), dt)
                tp(x, out)
                np.testing.assert_array_equal(out.reshape(-1), ref.reshape(-1))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_output_stage_float_mode_with_small_and_dead_channels(dtype):
    """Per-channel stages as real int8 / uint8 models have them: multipliers of 1e-9 to 5e-9 (a
    constant channel: every accumulator of the bound gives one output) beside 2e-4 to 0.1,
    accumulator bounds up to 2**24, int8's zero point -128: the float64 mode is taken
    (OutputStage._try_float: constant, exact or clamped channels; biases of up to 2**30 pin some channels to an end of the clamp
    range) and gives the reference's numbers at the steps of every channel, at the bounds and at
    random accumulators."""
    from nnapi_py.ops import quant as Q
    rng = np.random.default_rng(11 if dtype == np.uint8 else 12)
    lo0, hi0 = (0, 255) if dtype == np.uint8 else (-128, 127)
    dead_seen = 0
    for trial in range(60):
        nch = int(rng.choice([3, 16, 64]))
        reals = 10 ** rng.uniform(-3.7, -1, nch)
        reals[rng.random(nch) < 0.25] = 10 ** rng.uniform(-9, -8.3)      # dead channels
        zp = lo0 if trial % 2 else int(rng.integers(lo0, hi0 + 1))
        lo, hi = (max(zp, lo0), hi0) if trial % 3 else (lo0, hi0)
        bias = rng.integers(-40000, 40000, nch)
        sat = rng.random(nch) < 0.2                 # a bias that pins the channel to a clamp end
        reals[sat] = 10 ** rng.uniform(-6, -5, sat.sum())
        bias[sat] = rng.choice([-1, 1], sat.sum()) * (1 << 30)
        bnd = int(rng.integers(1 << 16, 1 << 24))
        st = Q.OutputStage(reals, zp, lo, hi, bias=bias, acc_bound=bnd)
        assert st.mode == "float", (reals, bnd)
        dead_seen += int(np.sum(np.asarray(st.q) == 0)) if isinstance(st.q, np.ndarray) else 0
        y = np.arange(lo + 1, hi + 1)[:, None]
        with np.errstate(over="ignore"):
            steps = np.clip(np.ceil((y - zp) / reals - bias), -bnd, bnd).astype(np.int64)
        near = (steps[None] + np.arange(-2, 3)[:, None, None]).reshape(-1, nch)
        wide = rng.integers(-bnd, bnd + 1, (512, nch))
        ends = np.array([[-bnd] * nch, [bnd] * nch, [0] * nch])
        acc = np.clip(np.concatenate([near, wide, ends]), -bnd, bnd)
        x = acc + bias
        ref = np.clip(np.stack([Q.Requant(float(reals[c]))(x[:, c]) for c in range(nch)], -1) + zp, lo, hi)
        for a in (acc.astype(np.float32) if bnd < (1 << 24) else acc.astype(np.float64), acc.astype(np.int32)):
            out = np.empty(acc.shape, dtype)
            st(a, out)
            np.testing.assert_array_equal(out.astype(np.int64), ref, err_msg=f"reals {reals} bound {bnd}")
    assert dead_seen >= 100


def test_output_stage_takes_non_contiguous_accumulators():
    """Every mode gives the same numbers for a strided (non-C-ordered) accumulator as for its
    contiguous copy (the int64 mode's per-row tiling once worked on a copy of a strided input)."""
    from nnapi_py.ops import quant as Q
    rng = np.random.default_rng(9)
    seen = set()
    for reals in (rng.uniform(1e-3, 0.2, 6), 2.0 ** -rng.integers(15, 17, 6) * 1.3, rng.uniform(0.6, 3.0, 6)):
        st = Q.OutputStage(reals, 3, -128, 127, bias=rng.integers(-999, 999, 6), acc_bound=1 << 22)
        seen.add(st.mode)
        acc = rng.integers(-(1 << 22), 1 << 22, (6, 5, 4)).astype(np.float32).transpose(1, 2, 0)
        for a in (acc, acc.astype(np.int32), acc.astype(np.float64)):
            got, want = np.empty(a.shape, np.int8), np.empty(a.shape, np.int8)
            st(a, got)
            st(np.ascontiguousarray(a), want)
            np.testing.assert_array_equal(got, want, err_msg=st.mode)
    assert seen == {"float", "int64", "general"}


def test_output_stage_float_mode_at_the_exactness_edge():
    """Multipliers of 2**-15 .. 2**-13 (right shifts of 13 and 14): the float64 mode covers a
    uint8 output's whole range [0, 255] (an offset of 0: R = 2**(53-45) = 256 is enough) and
    an int8 one up to its bound; every step of the range and the bound's ends give the
    reference's numbers."""
    from nnapi_py.ops import quant as Q
    rng = np.random.default_rng(21)
    cases = [(float(2.0 ** -rng.uniform(13.05, 14.95)), zp, lo, hi, dt)
             for _ in range(6)
             for zp, lo, hi, dt in ((0, 0, 255, np.uint8), (37, 0, 255, np.uint8), (-128, -128, 127, np.int8),
                                    (-5, -5, 127, np.int8))]
    taken = 0
    for real, zp, lo, hi, dt in cases:
        bnd = int(rng.integers(1 << 18, 1 << 21))
        bias = int(rng.integers(-30000, 30000))
        st = Q.OutputStage(real, zp, lo, hi, bias=[bias], acc_bound=bnd)
        if dt == np.uint8 and lo == 0 and hi == 255:
            assert st.mode == "float", (real, zp, bnd)
        taken += st.mode == "float"
        y = np.arange(lo + 1, hi + 1)
        steps = np.ceil((y - zp) / real - bias).astype(np.int64)
        acc = np.clip(np.concatenate([(steps[:, None] + np.arange(-3, 4)).ravel(),
                                      rng.integers(-bnd, bnd + 1, 2000), [-bnd, bnd, 0]]), -bnd, bnd)
        ref = np.clip(Q.Requant(real)(acc + bias) + zp, lo, hi)
        for a in (acc.astype(np.float32), acc.astype(np.int32)):
            out = np.empty((len(acc), 1), dt)
            st(a.reshape(-1, 1), out)
            np.testing.assert_array_equal(out[:, 0].astype(np.int64), ref, err_msg=f"{st.mode} {real} {zp} {bnd}")
    assert taken >= 12
