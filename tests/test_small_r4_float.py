"""Issue 41, fourth round: the lean float32 CONV_2D and DEPTHWISE_CONV_2D kernels (conv.py's
_lean_float_conv, depthwise_conv.py's _lean_float_dw: the general kernel's products without its
per-run setup) give the bytes of the general kernels, which the same model gets compiled with
common.SMALL = 0.  Random geometries (1x1 layers with O >= 2 C, whose bias is in the GEMM, and
O < 2 C, whose bias rows follow it; strided 1x1; k x k filters with explicit and implicit
padding, strides, dilation), every fused activation, constant biases random and zero (the
plan's bias folding leaves zero biases, which the general kernel skips), inputs with NaN, inf
and -0.0; several runs of one compilation, with the input arrays and the output arrays the
kernel keeps views of changing between runs."""
import numpy as np
import pytest

import nnapi_py as nn
from nnapi_py.ops import conv, depthwise_conv
from test_small_quant import _compiled

SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30, -1e30, 3.0], np.float32)


def _floats(rng, shape, specials=True):
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    if specials:
        flat = x.reshape(-1)
        k = min(flat.size, int(rng.integers(0, 4)))
        flat[rng.choice(flat.size, k, replace=False)] = rng.choice(SPECIALS, k)
    return x


def _same_runs(lean, general, feeds):
    el, eg = lean.execution(reusable=True), general.execution(reusable=True)
    for f in feeds:
        for a, b in ((lean.run(f), general.run(f)), (el.run(f), eg.run(f))):
            for k in a:
                x, y = np.asarray(a[k]), np.asarray(b[k])
                assert x.dtype == y.dtype and x.shape == y.shape, k
                assert x.tobytes() == y.tobytes(), f"{k}: lean {x.ravel()[:6]} general {y.ravel()[:6]}"


def _bias(rng, o, seed):
    if seed % 4 == 1:
        return np.zeros(o, np.float32)
    return _floats(rng, (o,), specials=False)


def _counted(monkeypatch, module, name, raw=False):
    """Calls of module.name recorded: its result (raw) or whether it made a kernel."""
    made = []
    fn = getattr(module, name)

    def wrapped(*a):
        r = fn(*a)
        made.append(r if raw else r is not None)
        return r
    monkeypatch.setattr(module, name, wrapped)
    return made


@pytest.mark.parametrize("seed", range(48))
def test_lean_conv_same_bytes(seed, monkeypatch):
    made = _counted(monkeypatch, conv, "_lean_float_conv")
    rng = np.random.default_rng(4100 + seed)
    kind = seed % 4                 # 0: 1x1 O >= 2C, 1: 1x1 O < 2C, 2: strided 1x1, 3: k x k
    h, w = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    c = int(rng.integers(1, 24))
    o = int(rng.integers(2 * c, 2 * c + 20)) if kind == 0 else int(rng.integers(1, max(2, 2 * c)))
    kh, kw = (1, 1) if kind < 3 else (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    sh, sw = (1, 1) if kind < 2 else (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    d = 1 + (kind == 3 and seed % 3 == 0)
    fuse = seed % 4 if seed % 8 < 4 else (seed // 8) % 4
    wv = _floats(rng, (o, kh, kw, c), specials=False)
    bv = _bias(rng, o, seed)
    explicit = kind == 3 and seed % 2 == 0
    if explicit:
        pads = [int(v) for v in rng.integers(0, 3, 4)]
        if h + pads[2] + pads[3] < (kh - 1) * d + 1 or w + pads[0] + pads[1] < (kw - 1) * d + 1:
            pads = [kw * d, kw * d, kh * d, kh * d]
    scheme = 1 if kind == 3 or seed % 3 else 2          # SAME / VALID

    def build():
        m = nn.Model()
        x = m.input("x", nn.float32, (1, h, w, c))
        args = (pads if explicit else [scheme]) + [sw, sh, fuse, False, d, d]
        m.output(m.op("CONV_2D", x, m.constant(wv), m.constant(bv), *args, outputs=[nn.float32]), "y")
        return m
    lean, general = _compiled(build)
    assert made[0] and not made[1:], made            # taken on the small path only
    _same_runs(lean, general, [{"x": _floats(rng, (1, h, w, c))} for _ in range(3)])


@pytest.mark.parametrize("seed", range(32))
def test_lean_depthwise_same_bytes(seed, monkeypatch):
    made = _counted(monkeypatch, depthwise_conv, "_lean_float_dw")
    rng = np.random.default_rng(4200 + seed)
    h, w, c = int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 40))
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sh = int(rng.integers(1, 3))
    d = 1 + (seed % 5 == 4)
    fuse = seed % 4
    wv = _floats(rng, (1, kh, kw, c), specials=False)
    bv = _bias(rng, c, seed)
    scheme = 1 if seed % 3 else 2
    if scheme == 2 and ((kh - 1) * d + 1 > h or (kw - 1) * d + 1 > w):
        scheme = 1

    def build():
        m = nn.Model()
        x = m.input("x", nn.float32, (1, h, w, c))
        m.output(m.op("DEPTHWISE_CONV_2D", x, m.constant(wv), m.constant(bv), scheme, 1, sh, 1, fuse, False,
                      d, d, outputs=[nn.float32]), "y")
        return m
    lean, general = _compiled(build)
    assert made == [True], made
    _same_runs(lean, general, [{"x": _floats(rng, (1, h, w, c))} for _ in range(3)])


def test_lean_kernels_not_taken_where_the_general_kernel_differs(monkeypatch):
    """A batch of two (the general kernel's GEMM per image), a depth multiplier, a width stride,
    a filter given at execution: the general kernel runs, and the results agree with it."""
    made_c = _counted(monkeypatch, conv, "_lean_float_conv")
    made_d = _counted(monkeypatch, depthwise_conv, "_lean_float_dw")
    rng = np.random.default_rng(7)
    wv, bv = _floats(rng, (8, 3, 3, 4), False), _floats(rng, (8,), False)
    dv = _floats(rng, (1, 3, 3, 8), False)

    def build():
        m = nn.Model()
        x = m.input("x", nn.float32, (2, 5, 5, 4))
        x1 = m.input("x1", nn.float32, (1, 5, 5, 4))
        wi = m.input("w", nn.float32, (8, 3, 3, 4))
        m.output(m.op("CONV_2D", x, m.constant(wv), m.constant(bv), 1, 1, 1, 0, outputs=[nn.float32]), "a")
        m.output(m.op("CONV_2D", x1, wi, m.constant(bv), 1, 1, 1, 0, outputs=[nn.float32]), "b")
        m.output(m.op("DEPTHWISE_CONV_2D", x1, m.constant(dv), m.constant(bv), 1, 1, 1, 2, 0,
                      outputs=[nn.float32]), "c")
        m.output(m.op("DEPTHWISE_CONV_2D", x1, m.constant(dv[..., :4]), m.constant(bv[:4]), 1, 2, 1, 1, 0,
                      outputs=[nn.float32]), "d")
        return m
    lean, general = _compiled(build)
    assert not any(made_c) and not any(made_d), (made_c, made_d)
    _same_runs(lean, general, [{"x": _floats(rng, (2, 5, 5, 4)), "x1": _floats(rng, (1, 5, 5, 4)), "w": wv}])


@pytest.mark.parametrize("seed", range(8))
def test_prelu_rows_views_follow_new_arrays(seed):
    """PRELU with a constant alpha (all below 1; one channel above 1, fixed up on its own) on a
    plan temporary and into a model output, several runs of one reusable execution and of plain
    runs: the row views the kernel keeps show each run's arrays (x >= 0 ? x : x * alpha)."""
    rng = np.random.default_rng(4300 + seed)
    shape = (1, int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 70)))
    alpha = rng.uniform(-0.9, 0.95, (1, 1, shape[3])).astype(np.float32)
    if seed % 2:
        alpha[..., 0] = 1.5
    one = np.ones(shape, np.float32)
    m = nn.Model()
    x = m.input("x", nn.float32, shape)
    t = m.op("ADD", x, m.constant(one), 0, outputs=[nn.float32])
    m.output(m.op("PRELU", t, m.constant(alpha), outputs=[nn.float32]), "y")
    c = m.compile()
    e = c.execution(reusable=True)
    for _ in range(3):
        xv = _floats(rng, shape, specials=False)
        tv = xv + one
        want = np.where(tv >= 0, tv, tv * alpha)
        for got in (e.run({"x": xv})["y"], c.run({"x": xv})["y"]):
            assert np.asarray(got).tobytes() == want.astype(np.float32).tobytes()


def _pointwise_same(rng, shape, wv, bv, fuse, runs):
    """A 1x1 stride-1 VALID CONV_2D of the input shape: the lean and general compilations agree
    in bytes over `runs` random inputs."""
    def build():
        m = nn.Model()
        x = m.input("x", nn.float32, shape)
        m.output(m.op("CONV_2D", x, m.constant(wv), m.constant(bv), 2, 1, 1, fuse, outputs=[nn.float32]), "y")
        return m
    lean, general = _compiled(build)
    _same_runs(lean, general, [{"x": _floats(rng, shape)} for _ in range(runs)])


@pytest.mark.parametrize("hw", [(1, 1), (2, 2), (4, 4), (8, 8)])
def test_small_pointwise_bias_in_product(hw, monkeypatch):
    """A 1x1 layer with O < 2 C of at most 64 pixels and a non-zero bias takes the bias inside
    the GEMM where the check at build finds the separate add's bits (here it does), and gives
    the general kernel's bytes, activations and special inputs included."""
    made = _counted(monkeypatch, conv, "_bias_in_product_same", raw=True)
    rng = np.random.default_rng(hw[0])
    h, w = hw
    c, o = 128, 64
    wv, bv = _floats(rng, (o, 1, 1, c), False), _floats(rng, (o,), False)
    for fuse in (0, 1, 3):
        _pointwise_same(rng, (1, h, w, c), wv, bv, fuse, 3)
    assert made == [True, True, True], made


@pytest.mark.parametrize("seed", range(16))
def test_lean_conv_wide_images_same_bytes(seed, monkeypatch):
    """Images of 32 to 48 columns: a narrow input's k x k filter (the transposed gather of a
    three-channel stem, width dilation included) and 1x1 layers whose product runs in blocks of
    pixels (_pixel_blocks, where its check finds the whole product's bits): the general kernel's
    bytes, every activation, zero and random biases."""
    made = _counted(monkeypatch, conv, "_lean_float_conv")
    blocked = _counted(monkeypatch, conv, "_pixel_blocks", raw=True)
    rng = np.random.default_rng(4400 + seed)
    h, w = int(rng.integers(8, 33)), int(rng.integers(32, 49))
    stem = seed % 2 == 0
    if stem:
        c, o = int(rng.integers(1, 4)), int(rng.integers(8, 65))
        kh, kw = 3, int(rng.integers(1, 4))
        s, d = 1 + seed % 4 // 2, 1 + (seed % 8 == 6)
    else:
        c, o = [8, 16, 32, 24][seed // 2 % 4], int(rng.integers(8, 65))     # blocks of 128+ pixels
        kh = kw = 1
        s, d = 1, 1
    fuse = seed // 2 % 4
    wv, bv = _floats(rng, (o, kh, kw, c), False), _bias(rng, o, seed // 2)

    def build():
        m = nn.Model()
        x = m.input("x", nn.float32, (1, h, w, c))
        m.output(m.op("CONV_2D", x, m.constant(wv), m.constant(bv), 1, s, s, fuse, False, d, d,
                      outputs=[nn.float32]), "y")
        return m
    lean, general = _compiled(build)
    assert made[0], made
    _same_runs(lean, general, [{"x": _floats(rng, (1, h, w, c))} for _ in range(2)])
    if not stem:
        assert blocked and blocked[0] is not None, blocked    # taken: its check held


@pytest.mark.parametrize("c,o,fuse,zero", [(32, 32, 0, False), (32, 64, 1, False), (16, 32, 3, True), (33, 40, 2, False)])
def test_lean_pointwise_beyond_the_small_limit(c, o, fuse, zero, monkeypatch):
    """A 1x1 stride-1 layer without padding of more than LEAN_FLOAT x common.SMALL outputs (one
    GEMM in the general kernel too) takes the lean kernel, its product in blocks with each
    block's bias and activation: the general kernel's bytes."""
    made = _counted(monkeypatch, conv, "_lean_float_conv")
    rng = np.random.default_rng(c * o + fuse)
    h, w = 96, 96
    assert h * w * o > conv.LEAN_FLOAT * 4096
    wv = _floats(rng, (o, 1, 1, c), False)
    bv = np.zeros(o, np.float32) if zero else _floats(rng, (o,), False)
    _pointwise_same(rng, (1, h, w, c), wv, bv, fuse, 2)
    assert made == [True], made
