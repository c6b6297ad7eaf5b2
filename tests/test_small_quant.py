"""Issue 41's quantized kernels of the smallest tensors (a tiny classifier's SOFTMAX, a small
AVERAGE_POOL_2D, one-byte lookups, one-row products): each lean variant gives the bytes of the
general kernel (the same shapes compiled with common.SMALL = 0), over random data, shapes and
parameters, and the cases at its edges."""
import numpy as np
import pytest

import nnapi_py as nn
from nnapi_py.ops import common
from test_small_path import _qtype, _qvalues, _same


def _compiled(build):
    """build()'s model compiled with the small path and without it (common.SMALL = 0)."""
    cs = []
    for small in (common.SMALL, 0):
        saved = common.SMALL
        common.SMALL = small
        try:
            cs.append(build().compile())
        finally:
            common.SMALL = saved
    return cs


# ---- SOFTMAX of a few values (activation._tiny_quant_softmax) ----------------------------------
def _softmax_model(shape, t, beta, axis, signed):
    ot = (nn.quant8_asymm_signed if signed else nn.quant8_asymm)(1.0 / 256, -128 if signed else 0)

    def build():
        m = nn.Model()
        xi = m.input("x", t, shape)
        m.output(m.op("SOFTMAX", xi, beta, axis, outputs=[ot]), "y")
        return m
    return build


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("signed", [False, True])
def test_tiny_softmax_same_bytes(seed, signed, monkeypatch):
    """Shapes of at most 16 values, every axis (rows along the last axis or strided), betas from
    tiny to large (every exponential but the maximum's underflowing to 0), inputs random, all
    equal, or with a few values far below the rest; several runs of one compilation."""
    from nnapi_py.ops import activation
    made = []
    tiny = activation._tiny_quant_softmax
    monkeypatch.setattr(activation, "_tiny_quant_softmax", lambda *a: made.append(a) or tiny(*a))
    rng = np.random.default_rng(seed + 1000 * signed)
    rank = int(rng.integers(1, 5))
    while True:
        shape = tuple(int(v) for v in rng.integers(1, 5, rank))
        if int(np.prod(shape)) <= 16:
            break
    axis = int(rng.integers(-rank, rank))
    beta = float([1e-3, 0.05, 0.7, 1.0, 3.0, 40.0, 1e4][seed % 7])
    t = _qtype(rng, signed)
    build = _softmax_model(shape, t, beta, axis, signed)
    feeds = [_qvalues(rng, shape, signed) for _ in range(6)]
    feeds.append(np.full(shape, feeds[0].ravel()[0]))
    f = feeds[0].copy()
    f.ravel()[::2] = -128 if signed else 0
    feeds.append(f)
    lean, general = _compiled(build)
    assert len(made) == 1
    for x in feeds:
        x = x.astype(np.int8 if signed else np.uint8)
        _same(lean.run({"x": x}), general.run({"x": x}))


@pytest.mark.parametrize("signed", [False, True])
def test_tiny_softmax_every_difference(signed):
    """1x2 rows over every pair of codes (every difference max - x, both orders), a few input
    scales and betas: the bytes of the general kernel."""
    codes = np.arange(-128, 128) if signed else np.arange(256)
    dt = np.int8 if signed else np.uint8
    for scale, beta in ((0.02, 1.0), (0.1, 0.3), (1.0 / 256, 2.5)):
        t = (nn.quant8_asymm_signed if signed else nn.quant8_asymm)(scale, 0)
        build = _softmax_model((1, 2), t, beta, -1, signed)
        cs = _compiled(build)
        saved = common.SMALL
        common.SMALL = 0
        try:
            big = _softmax_model((256, 2), t, beta, -1, signed)().compile()   # the general kernel
        finally:
            common.SMALL = saved
        for a in codes[::5]:
            x = np.stack([np.full(256, a), codes], 1).astype(dt)
            want = big.run({"x": x})["y"]
            for r in range(0, 256, 37):
                got = cs[0].run({"x": x[r:r + 1]})["y"]
                assert got.tobytes() == want[r:r + 1].tobytes(), (a, r)


# ---- one-byte lookups (quant.small_lookup) ------------------------------------------------------
@pytest.mark.parametrize("shape", [(1,), (1, 1), (1, 1, 1, 1), (2, 3), (7,)])
@pytest.mark.parametrize("signed", [False, True])
def test_small_lookups_every_code(shape, signed):
    """DEQUANTIZE (float32 and float16), DEQUANTIZE -> QUANTIZE (the plan folds it into one
    lookup), LOGISTIC and TANH of one value or a few: every code, the general kernel's bytes."""
    rng = np.random.default_rng(len(shape) + 10 * signed)
    t = _qtype(rng, signed)
    t2 = _qtype(rng, not signed)
    ot = (nn.quant8_asymm_signed if signed else nn.quant8_asymm)(1.0 / 256, -128 if signed else 0)

    def build():
        m = nn.Model()
        xi = m.input("x", t, shape)
        m.output(m.op("DEQUANTIZE", xi, outputs=[(nn.float32, shape)]), "f32")
        m.output(m.op("DEQUANTIZE", xi, outputs=[(nn.float16, shape)]), "f16")
        m.output(m.op("QUANTIZE", m.op("DEQUANTIZE", xi, outputs=[(nn.float32, shape)]),
                      outputs=[(t2, shape)]), "q")
        m.output(m.op("LOGISTIC", xi, outputs=[(ot, shape)]), "logistic")
        m.output(m.op("TANH", xi, outputs=[((nn.quant8_asymm_signed if signed else nn.quant8_asymm)(
            1.0 / 128, 0 if signed else 128), shape)]), "tanh")
        return m
    codes = np.arange(-128, 128) if signed else np.arange(256)
    cs = _compiled(build)
    size = int(np.prod(shape))
    for k in range(0, 256, size):
        x = np.resize(np.roll(codes, -k), shape).astype(np.int8 if signed else np.uint8)
        _same(cs[0].run({"x": x}), cs[1].run({"x": x}))


# ---- AVERAGE_POOL_2D of a small image (pool._small_quant_average_lut) ----------------------------
@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("signed", [False, True])
def test_small_average_pool_tables(seed, signed, monkeypatch):
    """The window sums' table form against the general kernel's passes: padding (windows of
    several sizes, so several tables), strides, filters as large as the image, activations,
    batches, NCHW, inputs at the type's extremes; the form is taken (its tables are small)."""
    from nnapi_py.ops import pool
    made = []
    lut = pool._small_quant_average_lut
    monkeypatch.setattr(pool, "_small_quant_average_lut", lambda *a: made.append(a) or lut(*a))
    rng = np.random.default_rng(seed + 500 * signed)
    n, h, w, c = 1 + seed % 3, int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 6))
    fh, fw = int(rng.integers(1, min(h, 4) + 1)), int(rng.integers(1, min(w, 4) + 1))
    sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    fuse = int(rng.integers(0, 4))
    nchw = bool(seed % 4 == 1)
    t = _qtype(rng, signed)
    shape = (n, c, h, w) if nchw else (n, h, w, c)
    explicit = seed % 3 == 2
    if explicit:
        pads = [int(rng.integers(0, f)) for f in (fw, fw, fh, fh)]
        args = pads + [sw, sh, fw, fh, fuse, nchw]
    else:
        args = [int(rng.integers(1, 3)), sw, sh, fw, fh, fuse, nchw]

    def build():
        m = nn.Model()
        xi = m.input("x", t, shape)
        m.output(m.op("AVERAGE_POOL_2D", xi, *args, outputs=[t]), "y")
        return m
    lean, general = _compiled(build)
    assert made
    lo, hi = (-128, 127) if signed else (0, 255)
    for x in (_qvalues(rng, shape, signed), np.full(shape, lo), np.full(shape, hi), _qvalues(rng, shape, signed)):
        x = x.astype(np.int8 if signed else np.uint8)
        _same(lean.run({"x": x}), general.run({"x": x}))


# ---- DEPTHWISE_CONV_2D of a small image: both products (convsmall._small_quant_dw) ----------------
@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("rows", [1, 10 ** 9])
def test_small_depthwise_both_products(seed, signed, rows, monkeypatch):
    """The small image's depthwise layer by the channel-major batched matmul (DW_MATMUL_ROWS = 1)
    and by the einsum (DW_MATMUL_ROWS huge) against the general kernel: one to a few dozen
    output pixels, depth multipliers, padding, strides, dilation, activations (one term and the
    two-term form), per-tensor and per-channel filters, batches."""
    from nnapi_py.ops import convsmall
    from test_small_path import _filter_and_bias
    monkeypatch.setattr(convsmall, "DW_MATMUL_ROWS", rows)
    rng = np.random.default_rng(900 + seed + 40 * signed)
    n, h, w, c = 1 + seed % 2, int(rng.integers(1, 7)), int(rng.integers(1, 7)), int(rng.integers(1, 6))
    mult = [1, 2, 3][seed % 3]
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    t = _qtype(rng, signed)
    per_channel = signed and seed % 2 == 0
    wt, wv, bt, bias = _filter_and_bias(rng, t, signed, per_channel, (1, kh, kw, c * mult), c * mult)
    ot = (nn.quant8_asymm_signed if signed else nn.quant8_asymm)(
        float(rng.uniform(0.02, 0.4)), int(rng.integers(-100, 100)) if signed else int(rng.integers(20, 230)))
    fuse = [0, 1, 0, 3][seed % 4]
    pad, s, d = int(rng.integers(1, 3)), int(rng.integers(1, 3)), 1 + (seed % 5 == 4)
    if (kh - 1) * d + 1 > h or (kw - 1) * d + 1 > w:
        pad = 1                     # SAME: VALID would leave no output
    x = _qvalues(rng, (n, h, w, c), signed)

    def build():
        m = nn.Model()
        xi = m.input("x", t, (n, h, w, c))
        y = m.op("DEPTHWISE_CONV_2D", xi, m.constant(wv, wt), m.constant(bias, bt), pad, s, s, mult, fuse, False,
                 d, d, outputs=[ot])
        m.output(y, "y")
        return m
    lean, general = _compiled(build)
    for xv in (x, np.full_like(x, -128 if signed else 0), np.full_like(x, 127 if signed else 255)):
        _same(lean.run({"x": xv}), general.run({"x": xv}))
