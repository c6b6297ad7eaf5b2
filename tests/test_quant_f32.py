"""OutputStage's float32 requantization (quant.OutputStage.prepare_f32 / consume): where it is
taken, its results equal the reference's bit for bit -- against the stage's own exact passes
on every accumulator around every output step, on random and extreme accumulators up to the
float32-exact bound 2**24, and against the scalar reference (tests/qref.py) -- and layers
using it (convolution, depthwise, fully connected at the edge of the float32 bound) give the
reference's outputs."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qref import quantize_multiplier, mul_q  # noqa: E402
from nnapi_py.ops import quant as Q  # noqa: E402
from nnapi_py.ops.quant import f32search, stage_f32  # noqa: E402  (tuning constants are patched where they are read)

rng = np.random.default_rng(28)


def scalar_ref(acc, bias, real, zp, lo, hi):
    q, shift = quantize_multiplier(real)
    return max(lo, min(hi, mul_q(int(acc) + int(bias), q, shift) + zp))


def stages():
    """(stage, reals, bias, zp, lo, hi, dtype): per-tensor and per-channel, uint8 and int8,
    ReLU-type and linear clamps, small to large multipliers, accumulator bounds up to 2**24 - 1."""
    out = []
    for k in range(24):
        dt = np.uint8 if k % 2 else np.int8
        lo_t, hi_t = (0, 255) if dt == np.uint8 else (-128, 127)
        nch = (1, 7, 96)[k % 3]
        if k % 4 < 2:
            reals = float(10 ** rng.uniform(-4.5, -0.5))
        else:
            reals = 10 ** rng.uniform(-4.5, -0.5, nch)
        zp = int(rng.integers(lo_t, hi_t + 1))
        relu = k % 6 < 4
        lo, hi = (max(zp, lo_t), hi_t) if relu else (lo_t, hi_t)
        if k % 5 == 0:
            hi = min(hi_t, lo + 6 * 20)                              # a ReLU6-like upper clamp
        bias = rng.integers(-20000, 20000, nch)
        bound = (1 << 24) - 1 if k % 3 == 0 else int(rng.integers(1000, 1 << 24))
        st = Q.OutputStage(reals, zp, lo, hi, bias=bias, acc_bound=bound)
        out.append((st, np.broadcast_to(reals, (nch,)), bias, zp, lo, hi, dt, bound))
    return out


STAGES = stages()


def exact(st, acc, dt):
    want = np.empty(acc.shape, dt)
    st._passes(acc.astype(np.float64), want)
    return want


def fast(st, acc, dt, rows=4):
    """consume() on a copy of acc laid out [rows, -1, C] (the convolution's blocks)."""
    a = np.ascontiguousarray(acc, np.float32).reshape(rows, -1, acc.shape[-1])
    got = np.empty(a.shape, dt)
    st.consume(a.copy(), got)
    return got.reshape(acc.shape)


def test_prepare_f32_is_taken_for_relu_layers():
    """The usual ReLU / ReLU6 layer (per-tensor multiplier, bias per channel) gets the float32
    path; so do most per-channel ones."""
    took = [st.prepare_f32(dt) for st, _, _, _, lo, _, dt, _ in STAGES if st.mode == "float" and not st.need_neg]
    assert sum(took) >= len(took) // 2 and took
    st = Q.OutputStage(0.01, 0, 0, 120, bias=np.arange(-48, 48) * 7, acc_bound=3_000_000)
    assert st.prepare_f32(np.uint8)


@pytest.mark.parametrize("case", range(len(STAGES)))
def test_f32_requantization_equals_the_reference(case):
    st, reals, bias, zp, lo, hi, dt, bound = STAGES[case]
    if not st.prepare_f32(dt):
        pytest.skip("float32 path not proven for this stage (the float64 one stays)")
    nch = len(reals)
    amax = bound + 1
    # every accumulator within 4 of every step of every channel
    y = np.arange(lo + 1, hi + 1)[:, None]
    steps = np.ceil((y - zp) / reals - bias).astype(np.int64)                  # [n, nch]
    near = (steps[None] + np.arange(-4, 5)[:, None, None]).reshape(-1, nch)
    near = np.clip(near, -amax, amax)
    # random ones, the bound itself, zero, and around the saturation points
    wide = rng.integers(-amax, amax + 1, (4096, nch))
    ends = np.array([[-amax] * nch, [amax] * nch, [0] * nch, [amax - 1] * nch, [-amax + 1] * nch])
    for acc in (near, wide, ends):
        acc = acc[: (acc.shape[0] // 4) * 4] if acc.shape[0] >= 4 else np.repeat(acc, 4, 0)
        np.testing.assert_array_equal(fast(st, acc, dt), exact(st, acc, dt))
    # the scalar reference on a sample of the step neighbourhoods
    pick = rng.integers(0, near.shape[0], 64)
    for r in pick:
        for c in rng.integers(0, nch, 3):
            a = int(near[r, c])
            got = fast(st, np.full((4, nch), a), dt)[0, c]
            assert got == scalar_ref(a, bias[c], float(reals[c]), zp, lo, hi), (a, c)


def test_f32_exhaustive_per_tensor():
    """Every accumulator of [-2**20, 2**20] through per-tensor stages of both output types, with
    and without a ReLU-type clamp."""
    acc = np.arange(-(1 << 20), 1 << 20, dtype=np.int64).reshape(-1, 1)
    for dt, zp, lo, hi, real in ((np.uint8, 3, 3, 255, 0.0007), (np.int8, -5, -5, 127, 0.0007),
                                 (np.uint8, 0, 0, 120, 0.0007),
                                 # no activation, zero point inside the range: the reference's
                                 # negative-side correction (the float32 form's second term)
                                 (np.uint8, 100, 0, 255, 0.02), (np.int8, 3, -128, 127, 0.03)):
        st = Q.OutputStage(real, zp, lo, hi, bias=[1234], acc_bound=(1 << 24) - 1)
        assert st.prepare_f32(dt)
        assert (st.f32[2] is not None) == (lo < zp)
        np.testing.assert_array_equal(fast(st, acc, dt), exact(st, acc, dt))


def test_f32_not_taken_beyond_the_float32_bound():
    st = Q.OutputStage(0.001, 0, 0, 255, bias=[0], acc_bound=1 << 24)
    assert not st.prepare_f32(np.uint8) and not st.f32


def test_consume_on_float64_or_small_arrays_uses_the_exact_passes():
    st = Q.OutputStage(0.01, 0, 0, 255, bias=np.arange(8), acc_bound=100000)
    assert st.prepare_f32(np.uint8)
    acc = rng.integers(-100000, 100000, (64, 8))
    for a in (acc.astype(np.float64), acc[:2].astype(np.float32)):
        got = np.empty(a.shape, np.uint8)
        st.consume(a.copy(), got)
        np.testing.assert_array_equal(got, exact(st, a, np.uint8))


# ---- layers at the edge of the float32 bound -------------------------------------------------
def _conv_ref(x, w, b, zx, zw, real, zo, lo, hi):
    """NHWC VALID 1x1 convolution in exact integers, then the scalar reference."""
    acc = np.einsum("nhwc,oc->nhwo", x.astype(np.int64) - zx, w.reshape(w.shape[0], -1).astype(np.int64) - zw) + b
    q, shift = quantize_multiplier(real)
    f = np.vectorize(lambda a: max(lo, min(hi, mul_q(int(a), q, shift) + zo)))
    return f(acc)


@pytest.mark.parametrize("k_in,extreme", [(1023, True), (1025, True), (1000, False)])
def test_conv_near_the_float32_bound(k_in, extreme):
    """A 1x1 convolution (input and filter zero points 128) whose bound max|x - zx| * max
    sum|w - zw| = 128 * 128 * K is just below 2**24 (K = 1023: float32 products and, the layer
    being a ReLU one, the float32 requantization) or just above (K = 1025: float64); one
    channel's weights all 0 and one pixel all 0 (x - zx = w - zw = -128: the accumulator at the
    bound itself), one pixel all 255; against the exact integer reference."""
    import nnapi_py as nn
    from nnapi_py import constants as C
    o = 24
    span = (112, 144) if extreme else (0, 256)       # near the zero points: values mid-range
    w = rng.integers(*span, (o, k_in)).astype(np.uint8)
    x = rng.integers(*span, (1, 16, 16, k_in)).astype(np.uint8)
    w[3] = 0
    x[0, 0, 0] = 0
    x[0, 0, 1] = 255
    w = w.reshape(o, 1, 1, k_in)
    b = rng.integers(-1000, 1000, o).astype(np.int32)
    sx, sw_ = 0.02, 0.003
    so = float(sx * sw_ / (0.03 if extreme else 0.001))   # 0.03: the float32 rounding is proven for it
    m = nn.Model()
    xi = m.input("x", nn.quant8_asymm(sx, 128), x.shape)
    wi = m.constant(w, nn.quant8_asymm(sw_, 128))
    bi = m.constant(b, nn.OperandType(C.TENSOR_INT32, float(np.float32(sx) * np.float32(sw_)), 0))
    y = m.op("CONV_2D", xi, wi, bi, 0, 0, 0, 0, 1, 1, 1,
             outputs=[(nn.quant8_asymm(so, 100), (1, 16, 16, o))])
    m.output(y, "y")
    got = m.compile().run({"x": x})["y"]
    real = float(np.float32(sx) * np.float32(sw_)) / so
    want = _conv_ref(x, w, b, 128, 128, real, 100, 100, 255)      # RELU: lo = zp = 100
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(want)) > 10 and want.max() == 255 and want.min() == 100


def _fc_check(x, w, b, zx, so, zo, fuse):
    """FULLY_CONNECTED (input scale 0.05, zero point zx; weights scale 0.01, zero point 128;
    output scale so, zero point zo) run through the library against the exact integer
    reference (fuse: 0 none, 1 RELU); returns the reference output."""
    import nnapi_py as nn
    from nnapi_py import constants as C
    sx, sw_ = 0.05, 0.01
    m = nn.Model()
    xi = m.input("x", nn.quant8_asymm(sx, zx), x.shape)
    wi = m.constant(w, nn.quant8_asymm(sw_, 128))
    bi = m.constant(b, nn.OperandType(C.TENSOR_INT32, float(np.float32(sx) * np.float32(sw_)), 0))
    y = m.op("FULLY_CONNECTED", xi, wi, bi, fuse, outputs=[(nn.quant8_asymm(so, zo), (x.shape[0], w.shape[0]))])
    m.output(y, "y")
    got = m.compile().run({"x": x})["y"]
    acc = (x.astype(np.int64) - zx) @ (w.astype(np.int64) - 128).T + b
    q, shift = quantize_multiplier(float(np.float32(sx) * np.float32(sw_)) / so)
    lo = zo if fuse == 1 else 0
    want = np.vectorize(lambda a: max(lo, min(255, mul_q(int(a), q, shift) + zo)))(acc)
    np.testing.assert_array_equal(got, want)
    return want


@pytest.mark.parametrize("rows", [1, 3])
def test_fully_connected_long_row(rows):
    """FULLY_CONNECTED with one row of 400 units (a classifier's last layer: the float32 product
    and requantization instead of quant.TableProduct) and with three rows, against the exact
    integer reference."""
    k, n = 300, 400
    x = rng.integers(0, 256, (rows, k)).astype(np.uint8)
    w = rng.integers(100, 156, (n, k)).astype(np.uint8)
    b = rng.integers(-3000, 3000, n).astype(np.int32)
    want = _fc_check(x, w, b, 7, 0.2, 20, 1)
    assert len(np.unique(want)) > 50


def test_exact_splits_bounds():
    """Each chunk's bound is below 2**24 and the next row would reach it (greedy), the chunks
    cover K in order."""
    w = rng.integers(0, 256, (3000, 40)).astype(np.float64)
    sp = Q.exact_splits(w, 255)
    assert sp[0][0] == 0 and sp[-1][1] == 3000 and all(a[1] == b[0] for a, b in zip(sp, sp[1:]))
    for k0, k1 in sp:
        assert 255 * w[k0:k1].sum(0).max() < 2 ** 24
        if k1 < 3000:
            assert 255 * w[k0:k1 + 1].sum(0).max() >= 2 ** 24
    assert Q.exact_splits(np.full((10, 2), 2.0 ** 24), 1) is None


@pytest.mark.parametrize("rows", [1, 5])
@pytest.mark.parametrize("k", [515, 514, 1600])
def test_fully_connected_k_split(rows, k):
    """FULLY_CONNECTED whose bound is at 2**24 or above (weights 0 or 255 around zero point
    128 -> |w - zw| 127..128; x - zx up to 255): K split into float32 chunks added in float64
    (515 rows: the first K whose bound 255 * 128 * K reaches 2**24; 514: just below, one chunk),
    against the exact integer reference, with the extreme accumulators (every product at its
    maximum) included."""
    from nnapi_py import constants as C
    from nnapi_py.ops.dense import QuantGemm
    n = 300
    w = rng.choice(np.array([0, 255], np.uint8), (n, k))
    w[0] = 0                                        # w - zw = -128 throughout
    x = rng.integers(0, 256, (rows, k)).astype(np.uint8)
    x[0] = 255                                      # x - zx = 255: acc = -255 * 128 * K
    g = QuantGemm(w, 128, C.TENSOR_QUANT8_ASYMM, 0)
    assert g.dtype == np.float32 and (g.splits is None) == (k == 514)
    b = rng.integers(-3000, 3000, n).astype(np.int32)
    want = _fc_check(x, w, b, 0, 40.0, 128, 0)
    assert want[0, 0] == 0 and len(np.unique(want)) > 20


@pytest.mark.parametrize("stride", [1, 2])
def test_conv_1x1_cast_block_by_block(stride):
    """A quantized 1x1 convolution without padding casts and centres its input block by block
    (input zero point 77, strides 1 and 2, 40 rows: several blocks), against the exact
    integer reference."""
    import nnapi_py as nn
    from nnapi_py import constants as C
    h, c, o = 40, 96, 40
    x = rng.integers(0, 256, (1, h, h, c)).astype(np.uint8)
    w = rng.integers(0, 256, (o, 1, 1, c)).astype(np.uint8)
    b = rng.integers(-3000, 3000, o).astype(np.int32)
    sx, sw_, so = 0.05, 0.01, 0.5
    oh = (h - 1) // stride + 1
    m = nn.Model()
    xi = m.input("x", nn.quant8_asymm(sx, 77), x.shape)
    wi = m.constant(w, nn.quant8_asymm(sw_, 130))
    bi = m.constant(b, nn.OperandType(C.TENSOR_INT32, float(np.float32(sx) * np.float32(sw_)), 0))
    y = m.op("CONV_2D", xi, wi, bi, 0, 0, 0, 0, stride, stride, 0,
             outputs=[(nn.quant8_asymm(so, 120), (1, oh, oh, o))])
    m.output(y, "y")
    got = m.compile().run({"x": x})["y"]
    real = float(np.float32(sx) * np.float32(sw_)) / so
    want = _conv_ref(x[:, ::stride, ::stride], w, b, 77, 130, real, 120, 0, 255)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(want)) > 50


@pytest.mark.parametrize("windows", ["narrow only", "wide only", "narrow misses"])
def test_prepare_f32_same_proof_whichever_window_finds_the_steps(monkeypatch, windows):
    """prepare_f32 looks for each exact output step in a narrow window around the line's guess
    (moved up by one on the corrected negative side; its first two points without the correction)
    and falls back to a wide window where the narrow one misses a step.  The proof -- taken or not, the float32 constants, the channels
    left to the exact fix-up -- is the same with the narrow window alone (it finds every step
    of these stages), the wide one alone, or a narrow one placed where it always misses."""
    def proofs(wins):
        monkeypatch.setattr(stage_f32, "_STEP_WINDOWS", wins)
        res = []
        for _, reals, bias, zp, lo, hi, dt, bound in STAGES:
            st = Q.OutputStage(reals, zp, lo, hi, bias=bias, acc_bound=bound)
            ok = st.prepare_f32(dt)
            consts = tuple(np.asarray(a).tobytes() for a in st.f32 if a is not None) if ok else None
            fix = None if st.f32_fix is None else tuple(st.f32_fix[0])
            res.append((ok, consts, fix))
        return res

    narrow, wide = stage_f32._STEP_WINDOWS
    other = {"narrow only": (narrow, narrow), "wide only": (wide, wide),
             "narrow misses": (np.array([40.0, 41.0, 42.0]), wide)}[windows]
    default = proofs((narrow, wide))
    assert proofs(other) == default
    assert sum(ok for ok, _, _ in default) >= 8
    # without the second search (_search_constants) more channels are left to the fix-up:
    # the same there too, with stages that have them
    monkeypatch.setattr(f32search, "_M_NUDGES", [])
    first_only = proofs((narrow, wide))
    assert proofs(other) == first_only
    assert sum(ok for ok, _, _ in first_only) >= 8 and sum(fix is not None for _, _, fix in first_only) >= 2


def test_prepare_f32_nudged_constants_are_exact():
    """Where the float32 constants themselves miss some step, prepare_f32 takes nudged ones (the
    first of 0, +1, -1, +2, ... ulps on the constant, with the multiplier as is or one ulp up
    or down, that passes every step), channel by channel: per-channel int8 stages proven that
    way give the reference's outputs at every accumulator next to every step."""
    taken = nudged = 0
    for _ in range(40):
        nch = 64
        reals = 10 ** rng.uniform(-2.6, -1.0, nch)
        zp = int(rng.integers(-20, 20))
        st = Q.OutputStage(reals, zp, -128, 127, bias=rng.integers(-5000, 5000, nch), acc_bound=300000)
        if not st.prepare_f32(np.int8):
            continue
        taken += 1
        q, K, _ = st._line
        nudged += int(np.any(np.broadcast_to(st.f32[1], (nch,)) != K.astype(np.float32))
                      or np.any(np.broadcast_to(st.f32[0], (nch,)) != q.astype(np.float32)))
        y = np.arange(-127, 128)[:, None]
        steps = np.ceil((y - zp) / reals - st._bias).astype(np.int64)
        near = np.clip((steps[None] + np.arange(-3, 4)[:, None, None]).reshape(-1, nch), -300000, 300000)
        acc = near[: (near.shape[0] // 4) * 4]
        np.testing.assert_array_equal(fast(st, acc, np.int8), exact(st, acc, np.int8))
    assert taken >= 10 and nudged >= 5


def test_quantize_multipliers_equal_the_scalar_function():
    """The array form of quantize_multiplier (OutputStage's per-channel multipliers) gives the
    scalar function's (q, shift) everywhere: zero, below 2**-32 (zero), mantissas that round
    up to 2**31 (carried into the shift), powers of two, random reals over 20 decades."""
    edge = [0.0, 2.0 ** -40, 2.0 ** -32, 2.0 ** -31.5, 2.0 ** -31, 1.0 - 2.0 ** -34, 0.5 - 2.0 ** -35,
            1.0, 0.5, 0.25 * (1 + 2.0 ** -31), 3.0, 1e6]
    reals = np.concatenate([edge, 10 ** rng.uniform(-12, 8, 4000)])
    q, shift = Q.quantize_multipliers(reals)
    want = [quantize_multiplier(float(r)) for r in reals]
    assert [(int(a), int(b)) for a, b in zip(q, shift)] == want
    with pytest.raises((OverflowError, ValueError)):
        Q.quantize_multipliers(np.array([0.1, np.inf]))


def test_output_stage_large_biases_against_the_scalar_reference():
    """Biases up to 2**30 make b q reach 2**61, beyond float64's exact range: channel by
    channel the stage's conditions (exact float64 constants, constant channels, else the int64
    or general evaluation) must still give the scalar reference's outputs (Python ints)."""
    modes = set()
    for trial in range(60):
        nch = 5
        reals = 10 ** rng.uniform(-7, -0.5, nch)
        bias = rng.integers(-(1 << 30), 1 << 30, nch) // (1 << int(rng.integers(0, 28)))
        zp = int(rng.integers(-128, 128))
        lo, hi = (-128, 127) if trial % 2 else (max(zp, -128), 127)
        st = Q.OutputStage(reals, zp, lo, hi, bias=bias, acc_bound=1 << 20)
        modes.add(st.mode)
        acc = rng.integers(-(1 << 20), 1 << 20, (16, nch))
        got = np.empty(acc.shape, np.int64)
        st(acc.astype(np.float64), got)
        for r in range(0, 16, 3):
            for c in range(nch):
                assert got[r, c] == scalar_ref(acc[r, c], bias[c], float(reals[c]), zp, lo, hi), (trial, r, c)
    assert "float" in modes


@pytest.mark.parametrize("h,o", [(3, 256), (4, 128), (5, 300), (3, 64), (8, 192), (9, 128)])
def test_conv_few_patches_wide_filter(monkeypatch, h, o):
    """A quantized 1x1 convolution on a small map (9 to 81 patches) with many output
    channels: up to 64 patches by at least 128 channels, the product runs transposed
    (conv._product), the filter held once (its matrix a view of the transposed copy);
    against the exact integer reference either way."""
    import nnapi_py as nn
    from nnapi_py import constants as C
    from nnapi_py.ops import convquant as CV
    held = []
    orig = CV._Packed.transposed_only

    def spy(self):
        orig(self)
        held.append(self)
    monkeypatch.setattr(CV._Packed, "transposed_only", spy)
    c = 200
    x = rng.integers(0, 256, (1, h, h, c)).astype(np.uint8)
    w = rng.integers(0, 256, (o, 1, 1, c)).astype(np.uint8)
    b = rng.integers(-3000, 3000, o).astype(np.int32)
    sx, sw_, so = 0.05, 0.01, 0.6
    m = nn.Model()
    xi = m.input("x", nn.quant8_asymm(sx, 90), x.shape)
    wi = m.constant(w, nn.quant8_asymm(sw_, 120))
    bi = m.constant(b, nn.OperandType(C.TENSOR_INT32, float(np.float32(sx) * np.float32(sw_)), 0))
    y = m.op("CONV_2D", xi, wi, bi, 0, 0, 0, 0, 1, 1, 0, outputs=[(nn.quant8_asymm(so, 110), (1, h, h, o))])
    m.output(y, "y")
    got = m.compile().run({"x": x})["y"]
    real = float(np.float32(sx) * np.float32(sw_)) / so
    want = _conv_ref(x, w, b, 90, 120, real, 110, 0, 255)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(want)) > 30
    few = h * h <= 64 and o >= 128
    assert (h * h <= CV._FEW_ROWS and o >= CV._WIDE_O) == few
    assert len(held) == few
    for pk in held:
        assert pk.mat_t.flags.c_contiguous and np.shares_memory(pk.mat, pk.mat_t)


def test_prepare_f32_second_search_proves_more_and_stays_exact(monkeypatch):
    """Channels that none of the 21 nudged candidates passes get the second search
    (OutputStage._search_constants: the multiplier up to _M_ULPS ulps away, and for each the
    least constant that passes every step at t_y, checked at every step): it proves some of
    them -- fewer channels left to the exact fix-up, or a stage that keeps float32 at all --
    and every stage proven gives the reference's outputs at every accumulator of its bound."""
    amax = 1 << 16
    acc = np.arange(-amax, amax + 1, dtype=np.int64)
    acc = acc[: (len(acc) // 4) * 4]
    rescued = 0
    for seed in range(16):
        r = np.random.default_rng(seed)
        nch = 24
        reals = 10 ** r.uniform(-3.0, -1.5, nch)
        zp = int(r.integers(-20, 20))
        lo = -128 if seed % 2 else zp                   # odd seeds: the corrected negative side
        bias = r.integers(-60000, 60000, nch)

        def left(st):                                   # channels not proven in float32
            if not st.prepare_f32(np.int8):
                return nch
            return 0 if st.f32_fix is None else len(st.f32_fix[0])
        monkeypatch.setattr(f32search, "_M_NUDGES", [])
        before = left(Q.OutputStage(reals, zp, lo, 127, bias=bias, acc_bound=amax - 1))
        monkeypatch.undo()
        st = Q.OutputStage(reals, zp, lo, 127, bias=bias, acc_bound=amax - 1)
        after = left(st)
        assert after <= before
        rescued += before - after
        if after < nch:
            a = np.repeat(acc[:, None], nch, 1)
            np.testing.assert_array_equal(fast(st, a, np.int8), exact(st, a, np.int8))
    assert rescued >= 10


def test_conv_prefers_the_stage_without_fix_up_to_the_folded_one(monkeypatch):
    """Folding the input zero point into the bias (b - zx sum w) saves a pass centring the
    input but makes the constants larger, and float32 rounds acc * m + k more coarsely there:
    where the folded stage leaves channels to the exact fix-up and the unfolded one needs
    none, a layer takes the unfolded one (conv._CLEAN_OVER_FOLDED; tried where at most one
    channel in conv._CLEAN_TRY_SHARE is left to the fix-up).  Per-channel int8 1x1 convolutions
    (input zero point -128, 192 channels, one with a smaller multiplier, ReLU) give the exact
    reference either way, and some layers switch."""
    import nnapi_py as nn
    from nnapi_py import constants as C
    from nnapi_py.ops import convquant as CV
    chosen = []
    orig = CV._StageCache.__init__

    def spy(self, *a, **kw):
        orig(self, *a, **kw)
        if self.const is not None:
            chosen.append((self.folded, self.const.f32_fix is not None))
    monkeypatch.setattr(CV._StageCache, "__init__", spy)
    switched = 0
    for seed in range(8):
        r = np.random.default_rng(100 + seed)
        h, c, o = 6, 64, 192
        x = r.integers(-128, 128, (1, h, h, c)).astype(np.int8)
        w = r.integers(-127, 128, (o, 1, 1, c)).astype(np.int8)
        sx, so = 0.05, 0.4
        scales = (10 ** r.uniform(-2.6, -1.6, o) * so / sx).astype(np.float32)
        scales[r.integers(0, o)] *= 0.4                 # one channel with a smaller multiplier
        b = r.integers(-20000, 20000, o).astype(np.int32)
        outs = {}
        for clean in (False, True):
            monkeypatch.setattr(CV, "_CLEAN_OVER_FOLDED", clean)
            chosen.clear()
            m = nn.Model()
            xi = m.input("x", nn.quant8_asymm_signed(sx, -128), x.shape)
            wi = m.constant(w, nn.quant8_symm_per_channel(scales, 0))
            bi = m.constant(b, nn.OperandType(C.TENSOR_INT32, 0.0, 0))
            y = m.op("CONV_2D", xi, wi, bi, 0, 0, 0, 0, 1, 1, 1,
                     outputs=[(nn.quant8_asymm_signed(so, -3), (1, h, h, o))])
            m.output(y, "y")
            outs[clean] = (m.compile().run({"x": x})["y"], list(chosen))
        (a, pa), (b_, pb) = outs[False], outs[True]
        np.testing.assert_array_equal(a, b_)
        reals = (np.float32(sx) * scales).astype(np.float64) / float(np.float32(so))
        want = np.empty_like(a)
        for k in range(o):
            want[..., k] = _conv_ref(x.astype(np.int64), w[k:k + 1].astype(np.int64), b[k:k + 1], -128, 0,
                                     float(reals[k]), -3, -3, 127)[..., 0]
        np.testing.assert_array_equal(b_, want)
        switched += any(f and fix for f, fix in pa) and not any(f and fix for f, fix in pb)
    assert switched >= 2


def test_f32_negative_side_in_one_scaled_term(monkeypatch):
    """A layer without activation whose zero point lies inside its range (the reference rounds
    z - 2**-e below zp + 1/2) takes the one-term form at 2**e times the scale
    (OutputStage._f32_all with _scaled_consts: v = acc M + K, v -= [v < T], v *= 2**-e) where every 2**-e is at
    least 2**-_NEG_MAX_E, else the two clamped terms: both give the reference's outputs at every
    accumulator next to every step and at random ones, per tensor and per channel."""
    taken = {True: 0, False: 0}
    for seed in range(24):
        r = np.random.default_rng(300 + seed)
        nch = (1, 16)[seed % 2]
        dt = (np.uint8, np.int8)[(seed // 2) % 2]
        lo_t, hi_t = (0, 255) if dt == np.uint8 else (-128, 127)
        zp = int(r.integers(lo_t + 20, hi_t - 20))
        reals = 10 ** r.uniform(-2.5, -1.0, nch)
        bias = r.integers(-30000, 30000, nch)
        amax = int(r.integers(20000, 1 << 21))
        for scaled in (True, False):
            monkeypatch.setattr(stage_f32, "_NEG_SCALED", scaled)
            st = Q.OutputStage(reals, zp, lo_t, hi_t, bias=bias, acc_bound=amax - 1)
            if not st.prepare_f32(dt):
                continue
            assert st.f32_scaled == scaled and st.f32[2] is not None
            taken[scaled] += 1
            y = np.arange(lo_t + 1, hi_t + 1)[:, None]
            steps = np.ceil((y - zp) / reals - bias).astype(np.int64)
            near = np.clip((steps[None] + np.arange(-3, 4)[:, None, None]).reshape(-1, nch), -amax, amax)
            wide = r.integers(-amax, amax + 1, (4096, nch))
            for acc in (near, wide):
                acc = acc[: (acc.shape[0] // 4) * 4]
                np.testing.assert_array_equal(fast(st, acc, dt), exact(st, acc, dt))
    assert taken[True] >= 12 and taken[False] >= 12
    # a correction below 2**-_NEG_MAX_E (a multiplier under about 2**-15) keeps the two terms
    st = Q.OutputStage(2.0 ** -16.5, 3, -128, 127, bias=[0], acc_bound=(1 << 23))
    if st.prepare_f32(np.int8):
        assert not st.f32_scaled


def test_pair_affine_equals_the_pair_table_wherever_proven():
    """Q.PairAffine (quantized ADD / SUB on large tensors): for random scales, zero points and
    clamps, uint8 and int8, a proven form gives the pair table's byte for every one of the
    65536 pairs through its own kernel (work buffers, the int8 flip); most cases prove."""
    from nnapi_py.ops import elementwise as E
    from nnapi_py import constants as C

    class Info:
        def __init__(self, t, s, z):
            self.type, self.scale, self.zp = t, float(np.float32(s)), z
    r = np.random.default_rng(2828)
    proven = 0
    cases = 60
    for k in range(cases):
        t = (C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED)[k % 2]
        dt = C.DTYPES[t]
        lo, hi = (0, 255) if k % 2 == 0 else (-128, 127)
        so = float(10 ** r.uniform(-3, 0))
        sa = so * float(10 ** r.uniform(-1, 1))
        sb = sa if k % 5 == 0 else so * float(10 ** r.uniform(-1, 1))
        a, b, o = (Info(t, s, int(z)) for s, z in zip((sa, sb, so), r.integers(lo, hi + 1, 3)))
        sub = k % 3 == 0
        table = E._add_sub_table(a, b, o, k % 4, negate_second=sub)
        rb = b.scale / o.scale
        form = Q.PairAffine.prove(table, dt, dt, a.scale / o.scale, -rb if sub else rb, dt)
        if form is None:
            continue
        proven += 1
        x = np.repeat(np.arange(256, dtype=np.uint8), 256).view(dt).reshape(256, 256)
        y = np.tile(np.arange(256, dtype=np.uint8), 256).view(dt).reshape(256, 256)
        got = np.empty((256, 256), dt)
        form(x, y, got)
        np.testing.assert_array_equal(got.ravel(), table, err_msg=str(k))
    assert proven >= cases * 3 // 4, proven


def test_pair_affine_refuses_multipliers_float32_cannot_hold():
    """Scales a model may carry (the fuzzer's extremes) give no float form and no warning."""
    import warnings
    table = np.arange(65536, dtype=np.int64).astype(np.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for ra, rb in ((1e40, 1.0), (1e-45, 1.0), (1.0, -1e38), (3e38, 3e38), (float("nan"), 1.0),
                       (1e7, 1e7), (float("inf"), 1.0)):
            assert Q.PairAffine.prove(table, np.uint8, np.uint8, ra, rb, np.uint8) is None


def _conv_ref_padded(x, w, b, zx, zw, real, zo, lo, hi, stride, pad):
    """NHWC convolution with explicit padding (the padding holds zx) in exact integers, then
    the scalar reference per value."""
    xp = np.pad(x.astype(np.int64) - zx, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    o, kh, kw, c = w.shape
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::stride, ::stride]
    acc = np.einsum("nhwcij,oijc->nhwo", win, w.astype(np.int64) - zw) + b
    q, shift = quantize_multiplier(real)
    f = np.vectorize(lambda a: max(lo, min(hi, mul_q(int(a), q, shift) + zo)))
    return f(acc)


@pytest.mark.parametrize("path", ["1x1 blocks", "1x1 few pixels", "1x1 stride 2", "3x3 im2col",
                                  "3-channel stem", "float64 product", "centred blocks", "centred few pixels",
                                  "float64 stage"])
@pytest.mark.parametrize("zx", [0, 77])
def test_conv_bias_summed_by_the_gemm(monkeypatch, path, zx):
    """A per-tensor quantized CONV_2D with constant filter and bias adds the bias inside its
    GEMM (a row of the filter against a column of ones in the patches), so that its output
    stage has one multiplier and one constant for all channels (conv._StageCache._in_product).
    On every path of the GEMM (1x1 in several row blocks, cast and centred block by block; a
    few pixels in one GEMM; 1x1 stride 2; 3x3 im2col with padding; a 3-channel stem gathered
    transposed; a float64 product beyond the float32 bound; a multiplier float32 cannot place,
    whose stage stays on float64) and with the input zero point folded into that bias or the
    input centred, the outputs equal the exact integer reference, and the layer did take that
    form."""
    import nnapi_py as nn
    from nnapi_py import constants as C
    from nnapi_py.ops import convquant as CV
    taken = []
    orig = CV._StageCache._in_product

    def spy(self, *a, **kw):
        r = orig(self, *a, **kw)
        taken.append(None if r is None else (r[1].dtype, r[2]))
        return r
    monkeypatch.setattr(CV._StageCache, "_in_product", spy)
    h, c, o, k, stride, pad, wspan, so = {
        "1x1 blocks": (64, 96, 96, 1, 1, 0, (100, 156), 0.6),
        "1x1 few pixels": (4, 32, 64, 1, 1, 0, (100, 156), 0.3),
        "1x1 stride 2": (30, 40, 48, 1, 2, 0, (100, 156), 0.3),
        "3x3 im2col": (20, 16, 24, 3, 1, 1, (100, 156), 0.4),
        "3-channel stem": (65, 3, 16, 3, 2, 1, (0, 256), 0.2),
        "float64 product": (6, 1600, 40, 1, 1, 0, (0, 256), 8.0),
        "centred blocks": (24, 1250, 24, 1, 1, 0, (0, 256), 2.0),
        "centred few pixels": (2, 1250, 24, 1, 1, 0, (0, 256), 2.0),
        "float64 stage": (12, 800, 24, 1, 1, 0, (0, 256), 8.0)}[path]
    x = rng.integers(0, 256, (1, h, h, c)).astype(np.uint8)
    w = rng.integers(*wspan, (o, k, k, c)).astype(np.uint8)
    b = rng.integers(-3000, 3000, o).astype(np.int32)
    sx, sw_ = 0.05, 0.01
    oh = (h + 2 * pad - k) // stride + 1
    m = nn.Model()
    xi = m.input("x", nn.quant8_asymm(sx, zx), x.shape)
    wi = m.constant(w, nn.quant8_asymm(sw_, 128))
    bi = m.constant(b, nn.OperandType(C.TENSOR_INT32, float(np.float32(sx) * np.float32(sw_)), 0))
    y = m.op("CONV_2D", xi, wi, bi, pad, pad, pad, pad, stride, stride, 0,
             outputs=[(nn.quant8_asymm(so, 120), (1, oh, oh, o))])
    m.output(y, "y")
    got = m.compile().run({"x": x})["y"]
    real = float(np.float32(sx) * np.float32(sw_)) / so
    want = _conv_ref_padded(x, w, b, zx, 128, real, 120, 0, 255, stride, pad)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(want)) > 20
    # "centred": 255 max sum|w| is beyond 2**24 but 178 max sum|w| + max|b| is not, so with
    # zx = 77 the bias stays unfolded and the input is centred (zx = 0: a float64 product)
    centred = path.startswith("centred")
    wide = path == "float64 product" or (centred and not zx)
    if path == "float64 stage":     # a multiplier float32 cannot place (6e-5): no float32 form
        # either way, so the bias still goes into the GEMM, for the float64 evaluation
        assert taken == [None, (np.float32, True)]
        return
    assert taken == [(np.float64 if wide else np.float32, not (centred and zx))]


def test_prepare_f32_per_channel_bounds():
    """A per-channel stage given each channel's own accumulator bound (ch_bound: the layer's
    max |x| times that channel's sum of |w|) proves each channel over its own range only: no
    more channels are left to the exact fix-up or to float64 than with the one bound for all,
    most stages fewer, and every stage proven gives the reference's outputs at every
    accumulator next to every step inside each channel's range, at random ones and at its
    ends."""
    gained = 0
    for seed in range(12):
        r = np.random.default_rng(700 + seed)
        nch = 24
        reals = 10 ** r.uniform(-3.5, -2.0, nch)
        zp = int(r.integers(-20, 20))
        lo = -128 if seed % 2 else zp                   # odd seeds: the corrected negative side
        bias = r.integers(-60000, 60000, nch)
        ch = (2.0 ** r.uniform(10, 21, nch)).astype(np.int64)    # the channels' own bounds
        amax = int(ch.max())

        def left(st):
            if not st.prepare_f32(np.int8):
                return nch
            return 0 if st.f32_fix is None else len(st.f32_fix[0])
        one = left(Q.OutputStage(reals, zp, lo, 127, bias=bias, acc_bound=amax))
        st = Q.OutputStage(reals, zp, lo, 127, bias=bias, acc_bound=amax, ch_bound=ch)
        own = left(st)
        assert own <= one
        gained += one - own
        if own == nch:
            continue
        y = np.arange(lo + 1, 128)[:, None]
        steps = np.ceil((y - zp) / reals - bias).astype(np.int64)
        near = np.clip((steps[None] + np.arange(-4, 5)[:, None, None]).reshape(-1, nch), -ch, ch)
        wide = np.round(r.uniform(-1, 1, (4096, nch)) * ch).astype(np.int64)
        ends = np.stack([-ch, ch, ch - 1, 1 - ch, np.zeros(nch, np.int64)] * 4)
        for acc in (near, wide, ends):
            acc = acc[: (acc.shape[0] // 4) * 4]
            np.testing.assert_array_equal(fast(st, acc, np.int8), exact(st, acc, np.int8))
    assert gained >= 20


def test_conv_per_channel_bounds_at_the_extremes(monkeypatch):
    """Per-channel int8 convolutions whose channels' sums of |w| differ (conv._CH_BOUND: each
    channel's stage proven over its own range): inputs at the extremes of the input type (the
    accumulators at the channels' bounds), random ones, and a padded 3x3 layer give the
    integer reference, the same bytes as with the one bound for all channels."""
    import nnapi_py as nn
    from nnapi_py import constants as C
    from nnapi_py.ops import convquant as CV
    bounds = []
    orig = Q.OutputStage.__init__

    def spy(self, *a, **kw):
        orig(self, *a, **kw)
        bounds.append(self.amax_ch)
    monkeypatch.setattr(Q.OutputStage, "__init__", spy)
    for seed in range(4):
        r = np.random.default_rng(900 + seed)
        h, c, o, k = 5, 48, 32, (1, 3)[seed % 2]
        w = r.integers(-127, 128, (o, k, k, c))
        w = (w * r.uniform(0.05, 1.0, (o, 1, 1, 1))).astype(np.int8)   # sums of |w| 20x apart
        sx, so = 0.05, 0.3
        scales = (10 ** r.uniform(-2.8, -1.8, o) * so / sx).astype(np.float32)
        b = r.integers(-20000, 20000, o).astype(np.int32)
        xs = [np.full((1, h, h, c), 127, np.int8), np.full((1, h, h, c), -128, np.int8),
              r.integers(-128, 128, (1, h, h, c)).astype(np.int8)]
        outs = {}
        for on in (False, True):
            monkeypatch.setattr(CV, "_CH_BOUND", on)
            bounds.clear()
            m = nn.Model()
            xi = m.input("x", nn.quant8_asymm_signed(sx, 5), (1, h, h, c))
            wi = m.constant(w, nn.quant8_symm_per_channel(scales, 0))
            bi = m.constant(b, nn.OperandType(C.TENSOR_INT32, 0.0, 0))
            pad = k // 2
            y = m.op("CONV_2D", xi, wi, bi, pad, pad, pad, pad, 1, 1, 0,
                     outputs=[(nn.quant8_asymm_signed(so, -3), (1, h, h, o))])
            m.output(y, "y")
            comp = m.compile()
            assert any(bd is not None for bd in bounds) == on
            outs[on] = [comp.run({"x": x})["y"] for x in xs]
        reals = (np.float32(sx) * scales).astype(np.float64) / float(np.float32(so))
        for x, got, base in zip(xs, outs[True], outs[False]):
            np.testing.assert_array_equal(got, base)
            xp = np.pad(x.astype(np.int64) - 5, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
            acc = np.zeros((1, h, h, o), np.int64)
            for dy in range(k):
                for dx in range(k):
                    acc += np.einsum("nhwc,oc->nhwo", xp[:, dy:dy + h, dx:dx + h], w[:, dy, dx].astype(np.int64))
            want = np.empty_like(got)
            for q in range(o):
                ref = np.vectorize(lambda a: scalar_ref(a, b[q], float(reals[q]), -3, -128, 127))
                want[..., q] = ref(acc[..., q])
            np.testing.assert_array_equal(got, want)
