"""Issue 41's small-tensor path: the lean kernel variants an operation takes when its tensors
have at most common.SMALL elements give the bits of the general variants (which the same
shapes get with SMALL set to 0 before compiling), float and quantized, over random shapes
and parameters; the WHILE body's flat run (Plan.run_static) gives the results of the
per-operation one; and loose ceilings on the per-execution cost beyond the kernels."""
import time

import numpy as np
import pytest

import nnapi_py as nn
from nnapi_py.ops import common

RNG_SEEDS = range(6)


def _both(build, feed):
    """Outputs of the model build() makes, compiled with the small path and without it."""
    outs = []
    for small in (common.SMALL, 0):
        saved = common.SMALL
        common.SMALL = small
        try:
            m = build()
            c = m.compile()
        finally:
            common.SMALL = saved
        outs.append(c.run(feed))
    return outs


def _same(a, b):
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        assert x.dtype == y.dtype and x.shape == y.shape, k
        assert x.tobytes() == y.tobytes(), f"{k}: small path {x.ravel()[:8]} general {y.ravel()[:8]}"


def _shape(rng, rank, most=6):
    return tuple(int(v) for v in rng.integers(1, most, rank))


@pytest.mark.parametrize("seed", RNG_SEEDS)
@pytest.mark.parametrize("fuse", [0, 1, 2, 3])
def test_fully_connected_float(seed, fuse):
    rng = np.random.default_rng(seed * 7 + fuse)
    size, units, batch = int(rng.integers(1, 40)), int(rng.integers(1, 40)), int(rng.integers(1, 4))
    rank = int(rng.integers(2, 5))
    shape = (batch, size) if rank == 2 else (batch,) + (1,) * (rank - 2) + (size,)
    w = rng.standard_normal((units, size)).astype(np.float32)
    b = rng.standard_normal(units).astype(np.float32)
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    x.ravel()[0] = np.nan if seed == 3 else x.ravel()[0]

    def build():
        m = nn.Model()
        xi = m.input("x", nn.float32, shape)
        m.output(m.op("FULLY_CONNECTED", xi, w, b, fuse, outputs=[(nn.float32, (batch, units))]), "y")
        return m
    _same(*_both(build, {"x": x}))


def _qtype(rng, signed):
    scale = float(rng.uniform(0.01, 0.2))
    zp = int(rng.integers(-20, 20)) if signed else int(rng.integers(100, 156))
    return (nn.quant8_asymm_signed if signed else nn.quant8_asymm)(scale, zp)


def _qvalues(rng, shape, signed):
    return rng.integers(-128, 128, shape).astype(np.int8) if signed else \
        rng.integers(0, 256, shape).astype(np.uint8)


@pytest.mark.parametrize("seed", RNG_SEEDS)
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "EQUAL", "GREATER", "LESS_EQUAL"])
@pytest.mark.parametrize("signed", [False, True])
def test_quantized_pair_tables(seed, op, signed):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 5))
    sa = _shape(rng, rank)
    sb = tuple(1 if rng.random() < 0.3 else d for d in sa)[int(rng.integers(0, rank)):]    # broadcast
    sb = sb or (1,)
    ta, tb, to = _qtype(rng, signed), _qtype(rng, signed), _qtype(rng, signed)
    if op == "MUL":
        to = (nn.quant8_asymm_signed if signed else nn.quant8_asymm)(ta.scale * tb.scale * 1.5, to.zero_point)
    out_shape = tuple(np.broadcast_shapes(sa, sb))
    fuse = int(rng.integers(0, 4))
    a, b = _qvalues(rng, sa, signed), _qvalues(rng, sb, signed)

    def build():
        m = nn.Model()
        x, y = m.input("a", ta, sa), m.input("b", tb, sb)
        if op in ("ADD", "SUB", "MUL"):
            r = m.op(op, x, y, fuse, outputs=[(to, out_shape)])
        elif op in ("MAXIMUM", "MINIMUM"):
            r = m.op(op, x, y, outputs=[(to, out_shape)])
        else:
            r = m.op(op, x, y, outputs=[(nn.bool8, out_shape)])
        m.output(r, "y")
        return m
    _same(*_both(build, {"a": a, "b": b}))


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_reduce_any_all_mean(seed):
    """REDUCE_ANY / REDUCE_ALL call their ufunc's reduce (np.any / np.all without the Python
    wrappers); MEAN keeps its output views: against numpy."""
    rng = np.random.default_rng(seed)
    shape = _shape(rng, 3)
    axes = np.array(sorted(set(int(v) for v in rng.integers(0, 3, 2))), np.int32)
    x = (rng.random(shape) < 0.3).astype(np.bool_)
    f = rng.standard_normal(shape).astype(np.float32)
    m = nn.Model()
    xi, fi = m.input("x", nn.bool8, shape), m.input("f", nn.float32, shape)
    for name in ("REDUCE_ANY", "REDUCE_ALL"):
        m.output(m.op(name, xi, axes, True, outputs=[(nn.bool8, None)]), name)
    m.output(m.op("MEAN", fi, axes, 1), "MEAN")
    c = m.compile()
    e = c.execution(reusable=True)
    for _ in range(2):                  # a second run on the kept output views
        got = e.run({"x": x, "f": f})
        assert np.array_equal(got["REDUCE_ANY"].reshape(-1), np.any(x, axis=tuple(axes)).reshape(-1))
        assert np.array_equal(got["REDUCE_ALL"].reshape(-1), np.all(x, axis=tuple(axes)).reshape(-1))
        want = np.add.reduce(f, axis=tuple(axes), keepdims=True) / np.float32(np.prod([shape[a] for a in axes]))
        assert got["MEAN"].tobytes() == want.astype(np.float32).tobytes()


def test_gather_few_indices_checked():
    """A few non-constant indices are checked as Python ints: in range they gather, out of range
    the computation fails (OP_FAILED) naming the value."""
    m = nn.Model()
    x = m.input("x", nn.float32, (5, 3))
    idx = m.input("i", nn.int32, (2,))
    m.output(m.op("GATHER", x, 0, idx, outputs=[(nn.float32, (2, 3))]), "y")
    c = m.compile()
    xv = np.arange(15, dtype=np.float32).reshape(5, 3)
    assert np.array_equal(c.run({"x": xv, "i": np.array([4, 1], np.int32)})["y"], xv[[4, 1]])
    with pytest.raises(nn.NNAPIError, match="value 5 is out of range"):
        c.run({"x": xv, "i": np.array([0, 5], np.int32)})


def _counter_loop(n_iter):
    """WHILE i < n: (i + 1, acc * 0.5 + x) -- a body of small float operations."""
    cond = nn.Model("cond")
    i, acc, x = cond.input("i", nn.int32, (1,)), cond.input("acc", nn.float32, (2, 3)), cond.input("x", nn.float32, (2, 3))
    cond.output(cond.op("LESS", i, np.array([n_iter], np.int32), outputs=[(nn.bool8, (1,))]), "c")
    body = nn.Model("body")
    bi, bacc, bx = body.input("i", nn.int32, (1,)), body.input("acc", nn.float32, (2, 3)), body.input("x", nn.float32, (2, 3))
    body.output(body.op("ADD", bi, np.array([1], np.int32), 0, outputs=[(nn.int32, (1,))]), "i2")
    half = body.op("MUL", bacc, np.full((2, 3), 0.5, np.float32), 0, outputs=[(nn.float32, (2, 3))])
    body.output(body.op("ADD", half, bx, 1, outputs=[(nn.float32, (2, 3))]), "acc2")
    m = nn.Model()
    i0, a0, x0 = m.input("i", nn.int32, (1,)), m.input("acc", nn.float32, (2, 3)), m.input("x", nn.float32, (2, 3))
    r = m.op("WHILE", cond, body, i0, a0, x0, outputs=[(nn.int32, (1,)), (nn.float32, (2, 3))])
    m.output(r[0], "i_out")
    m.output(r[1], "acc_out")
    return m


def test_while_body_flat_run_matches_reference():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    got = _counter_loop(7).compile().run({"i": np.array([0], np.int32), "acc": np.zeros((2, 3), np.float32), "x": x})
    acc = np.zeros((2, 3), np.float32)
    for _ in range(7):
        acc = np.maximum(acc * np.float32(0.5) + x, 0)
    assert got["i_out"].tolist() == [7]
    assert got["acc_out"].tobytes() == acc.astype(np.float32).tobytes()


def test_while_flat_run_same_as_per_operation_run(monkeypatch):
    """The loop's sub-plans run flat (their bound steps: Plan.run_direct; run_static for the
    outer plan); the same loop with that disabled runs them operation by operation
    (run_dynamic): the same bytes."""
    from nnapi_py.plan import Plan
    rng = np.random.default_rng(2)
    feed = {"i": np.array([0], np.int32), "acc": rng.standard_normal((2, 3)).astype(np.float32),
            "x": rng.standard_normal((2, 3)).astype(np.float32)}
    c = _counter_loop(5).compile()
    flat = c.run(feed)
    calls = []

    def recording(name):
        real = getattr(Plan, name)

        def record(self, *a, **k):
            calls.append(self)
            return real(self, *a, **k)
        monkeypatch.setattr(Plan, name, record)
    for name in ("run_static", "run_direct"):
        recording(name)
    c.run(feed)
    from nnapi_py import _capi, ffi
    outer_flat = _capi._H[int(ffi.cast("uintptr_t", c.handle))].plan
    assert any(p is not outer_flat for p in calls), "the WHILE sub-plans did not take the flat run"
    from nnapi_py.ops import control
    monkeypatch.setattr(control, "FLAT", False)
    calls.clear()
    slow_c = _counter_loop(5).compile()
    slow = slow_c.run(feed)
    # the outer plan (its shapes known) is static, the WHILE one of its steps; the sub-plans
    # ran operation by operation
    outer = _capi._H[int(ffi.cast("uintptr_t", slow_c.handle))].plan
    assert outer.static and outer.has_control
    assert all(p is outer for p in calls), "a WHILE sub-plan ran flat with control.FLAT off"
    _same(flat, slow)


def _cpu_us(fn, n=300, batches=7):
    v = []
    for _ in range(batches):
        t0 = time.thread_time()
        for _ in range(n):
            fn()
        v.append((time.thread_time() - t0) / n * 1e6)
    return sorted(v)[len(v) // 2]


def test_execution_overhead_ceiling():
    """The cost of an execution beyond its kernels (a reusable execution of 16 small ADDs, every
    kernel replaced by a no-op), through the C ABI and the Python API: a loose ceiling, 4x issue
    41's 10 us + 0.5 us an operation (CPU time; this machine's slow moments)."""
    from nnapi_py import ffi, lib, _capi
    m = nn.Model()
    x = m.input("x", nn.float32, (1, 16))
    y = x
    for _ in range(16):
        y = m.op("ADD", y, np.full((1, 16), 0.5, np.float32), 0, outputs=[(nn.float32, (1, 16))])
    m.output(y, "y")
    e = m.compile().execution(reusable=True)
    e.run({"x": np.zeros((1, 16), np.float32)})
    ex = _capi._H[int(ffi.cast("uintptr_t", e.handle))]
    for ab in ex.plan._arenas:
        ab[1][:] = [(lambda i, o: None, ia, oa) for _, ia, oa in ab[1]]
    h = e.handle
    limit = 4 * (10 + 0.5 * 16)
    c_us = _cpu_us(lambda: lib.ANeuralNetworksExecution_compute(h))
    py_us = _cpu_us(lambda: e.run(copy=False))
    assert c_us < limit, f"compute beyond kernels {c_us:.1f} us"
    assert py_us < limit, f"Execution.run beyond kernels {py_us:.1f} us"


@pytest.mark.parametrize("seed", RNG_SEEDS)
@pytest.mark.parametrize("signed", [False, True])
def test_quantized_average_pool(seed, signed):
    """The small image's window sums as one product with the window matrix: the general kernel's
    bytes, padding (windows with fewer cells), strides, activations, NCHW."""
    rng = np.random.default_rng(seed + 100 * signed)
    n, h, w, c = 1 + seed % 2, int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 5))
    fh, fw = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
    sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    pad = int(rng.integers(1, 3))                     # 1 SAME, 2 VALID
    fuse = int(rng.integers(0, 4))
    nchw = bool(seed % 3 == 0)
    t = _qtype(rng, signed)
    shape = (n, c, h, w) if nchw else (n, h, w, c)
    x = _qvalues(rng, shape, signed)

    def build():
        m = nn.Model()
        xi = m.input("x", t, shape)
        m.output(m.op("AVERAGE_POOL_2D", xi, pad, sw, sh, fw, fh, fuse, nchw, outputs=[t]), "y")
        return m
    _same(*_both(build, {"x": x}))


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("signed", [False, True])
def test_quantized_conv2d(seed, signed):
    """A small quantized CONV_2D with constant filter and bias: patches gathered by one index and
    one product (the small path) against the general im2col kernel: padding, strides, dilation,
    activations, per-tensor and per-channel filters, zero points."""
    rng = np.random.default_rng(seed + 50 * signed)
    n, h, w, c, o = 1 + seed % 2, int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 4)), \
        int(rng.integers(1, 6))
    kh, kw = int(rng.integers(1, min(h, 3) + 1)), int(rng.integers(1, min(w, 3) + 1))
    t = _qtype(rng, signed)
    per_channel = signed and seed % 2 == 0
    if per_channel:
        scales = rng.uniform(0.005, 0.05, o).astype(np.float32)
        wt = nn.quant8_symm_per_channel(scales.tolist(), 0)
        wv = rng.integers(-127, 128, (o, kh, kw, c)).astype(np.int8)
        bscale = [float(np.float32(t.scale) * s) for s in scales]
        bias = rng.integers(-2000, 2000, o).astype(np.int32)
    else:
        wt = _qtype(rng, signed)
        wv = _qvalues(rng, (o, kh, kw, c), signed)
        bscale = float(np.float32(t.scale) * np.float32(wt.scale))
        bias = rng.integers(-2000, 2000, o).astype(np.int32)
    ot = (nn.quant8_asymm_signed if signed else nn.quant8_asymm)(float(rng.uniform(0.05, 0.5)),
                                                                 int(rng.integers(-10, 10)) if signed else 128)
    pad, sw, sh, fuse = int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(0, 4))
    x = _qvalues(rng, (n, h, w, c), signed)

    def build():
        m = nn.Model()
        xi = m.input("x", t, (n, h, w, c))
        wi = m.constant(wv, wt)
        bi = m.constant(bias, nn.OperandType(nn.int32.code, 0.0 if per_channel else bscale, 0)) \
            if hasattr(nn, "OperandType") else bias
        m.output(m.op("CONV_2D", xi, wi, bi, pad, sw, sh, fuse, outputs=[ot]), "y")
        return m
    _same(*_both(build, {"x": x}))


@pytest.mark.parametrize("seed", RNG_SEEDS)
@pytest.mark.parametrize("signed", [False, True])
def test_quantized_softmax(seed, signed):
    rng = np.random.default_rng(seed + 7 * signed)
    rank = int(rng.integers(1, 5))
    shape = _shape(rng, rank, 9)
    t = _qtype(rng, signed)
    ot = (nn.quant8_asymm_signed if signed else nn.quant8_asymm)(1.0 / 256, -128 if signed else 0)
    beta = float(rng.uniform(0.1, 3.0))
    axis = int(rng.integers(-rank, rank))
    x = _qvalues(rng, shape, signed)

    def build():
        m = nn.Model()
        xi = m.input("x", t, shape)
        m.output(m.op("SOFTMAX", xi, beta, axis, outputs=[ot]), "y")
        return m
    _same(*_both(build, {"x": x}))


# ---- issue 41, part 3: one-row products, small convolutions, table activations --------------------
def _vs_general(build, feed, monkeypatch):
    """Outputs of build()'s model compiled as is and with every lean path off: common.SMALL 0 and
    no quant.DirectProduct / TableProduct, so one-pixel layers and one-row FULLY_CONNECTED take
    the general kernels (im2col or depthwise einsum, QuantGemm, then the OutputStage)."""
    from nnapi_py.ops import quant as Q
    lean = build().compile().run(feed)
    with monkeypatch.context() as mp:
        mp.setattr(common, "SMALL", 0)
        mp.setattr(Q.DirectProduct, "for_stage", classmethod(lambda cls, *a, **k: None))
        mp.setattr(Q.TableProduct, "for_stage", classmethod(lambda cls, *a, **k: None))
        general = build().compile().run(feed)
    return lean, general


def _layer_vs_general(op, t, shape, weights, bias, params, out, xs, monkeypatch):
    """op on an input of type t and `shape`, constant weights and bias ((values, type) each), then
    the scalar params, one output `out` (type, shape): for each x of xs, the lean kernels' bytes
    are the general ones' (_vs_general)."""
    (wv, wt), (bv, bt) = weights, bias

    def build():
        m = nn.Model()
        xi = m.input("x", t, shape)
        m.output(m.op(op, xi, m.constant(wv, wt), m.constant(bv, bt), *params, outputs=[out]), "y")
        return m
    for x in xs:
        _same(*_vs_general(build, {"x": x}, monkeypatch))


def _filter_and_bias(rng, t, signed, per_channel, shape, o):
    """A quantized filter of `shape` with o output channels along `axis` (per channel: the last
    axis for depthwise filters [1, KH, KW, O], the first for CONV_2D's) and its bias."""
    import nnapi_py as nn_
    axis = 3 if shape[0] == 1 and shape[-1] == o and len(shape) == 4 else 0
    if per_channel:
        scales = rng.uniform(0.002, 0.05, o).astype(np.float32)
        wt = nn_.quant8_symm_per_channel(scales.tolist(), axis)
        wv = rng.integers(-127, 128, shape).astype(np.int8)
        bt = nn_.OperandType(nn_.int32.code, 0.0, 0)
    else:
        wt = _qtype(rng, signed)
        wv = _qvalues(rng, shape, signed)
        bt = nn_.OperandType(nn_.int32.code, float(np.float32(t.scale) * np.float32(wt.scale)), 0)
    bias = rng.integers(-3000, 3000, o).astype(np.int32)
    return wt, wv, bt, bias


def _out_type(rng, signed):
    # a zero point inside the range, so that no activation (lo < zp) needs the negative side's
    # correction and the ReLUs clamp at it
    return (nn.quant8_asymm_signed if signed else nn.quant8_asymm)(
        float(rng.uniform(0.02, 0.4)), int(rng.integers(-100, 100)) if signed else int(rng.integers(20, 230)))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("signed", [False, True])
def test_quantized_depthwise_one_pixel(seed, signed, monkeypatch):
    """A depthwise layer whose one output pixel reads its whole input (a streaming step) runs
    quant.DirectProduct -- one term, or two where the stage corrects its negative side (no
    activation) -- the general kernel's bytes: per-tensor and per-channel filters, zero
    points, activations, filter shapes 1xT and KxK."""
    rng = np.random.default_rng(300 + seed + 20 * signed)
    kh, kw = (int(rng.integers(1, 22)), 1) if seed % 2 else (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    c = int(rng.integers(1, 70))
    t = _qtype(rng, signed)
    per_channel = signed and seed % 3 != 0
    wt, wv, bt, bias = _filter_and_bias(rng, t, signed, per_channel, (1, kh, kw, c), c)
    ot = _out_type(rng, signed)
    fuse = [0, 1, 2, 3][seed % 4]
    xs = [_qvalues(rng, (1, kh, kw, c), signed) for _ in range(3)]
    _layer_vs_general("DEPTHWISE_CONV_2D", t, (1, kh, kw, c), (wv, wt), (bias, bt), (2, 1, 1, 1, fuse),
                      (ot, (1, 1, 1, c)), xs, monkeypatch)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("signed", [False, True])
def test_quantized_conv2d_one_pixel(seed, signed, monkeypatch):
    """A CONV_2D whose one output pixel reads its whole input (a pointwise layer of a streaming
    model: 1x1xC -> O, or KxK) runs quant.DirectProduct: the general kernel's bytes."""
    rng = np.random.default_rng(400 + seed + 20 * signed)
    kh, kw = (1, 1) if seed % 2 else (int(rng.integers(1, 6)), 1)
    c, o = int(rng.integers(1, 70)), int(rng.integers(1, 70))
    t = _qtype(rng, signed)
    wt, wv, bt, bias = _filter_and_bias(rng, t, signed, signed and seed % 3 != 0, (o, kh, kw, c), o)
    ot = _out_type(rng, signed)
    fuse = [0, 1, 2, 3][seed % 4]
    xs = [_qvalues(rng, (1, kh, kw, c), signed) for _ in range(3)]
    _layer_vs_general("CONV_2D", t, (1, kh, kw, c), (wv, wt), (bias, bt), (2, 1, 1, fuse), (ot, (1, 1, 1, o)),
                      xs, monkeypatch)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("signed", [False, True])
def test_quantized_fully_connected_one_row(seed, signed, monkeypatch):
    """A one-row quantized FULLY_CONNECTED (a classifier's step, 1xK -> units) runs
    quant.DirectProduct: the general kernel's bytes, rank-4 inputs flattened, activations."""
    rng = np.random.default_rng(500 + seed + 20 * signed)
    size, units = int(rng.integers(1, 400)), int(rng.integers(1, 40))
    shape = (1, size) if seed % 2 else (1, 1, 1, size)
    t = _qtype(rng, signed)
    wt = _qtype(rng, signed)
    wv = _qvalues(rng, (units, size), signed)
    bt = nn.OperandType(nn.int32.code, float(np.float32(t.scale) * np.float32(wt.scale)), 0)
    bias = rng.integers(-3000, 3000, units).astype(np.int32)
    ot = _out_type(rng, signed)
    ot = (nn.quant8_asymm_signed if signed else nn.quant8_asymm)(ot.scale * 4, ot.zero_point)
    fuse = [0, 1, 2, 3][seed % 4]
    xs = [_qvalues(rng, shape, signed) for _ in range(3)]
    _layer_vs_general("FULLY_CONNECTED", t, shape, (wv, wt), (bias, bt), (fuse,), (ot, (1, units)), xs, monkeypatch)


def test_one_row_products_take_both_direct_forms():
    """The layers above reach both of quant.DirectProduct's forms: the one-term clamp (a ReLU at
    the zero point, or a stage without the correction) and the two-term sum (no activation)."""
    from nnapi_py.ops import quant as Q
    rng = np.random.default_rng(9)
    seen = set()
    for relu in (True, False):
        for dt in (np.int8, np.uint8):
            lo, hi = (-128, 127) if dt == np.int8 else (0, 255)
            zp = int(rng.integers(lo + 30, hi - 30))
            st = Q.OutputStage(rng.uniform(1e-4, 2e-3, 16), zp, zp if relu else lo, hi,
                               bias=rng.integers(-2000, 2000, 16), acc_bound=9 * 255 * 127)
            dp = Q.DirectProduct.for_stage(rng.integers(-127, 128, (9, 16)), 3, st, dt, True)
            seen.add(dp.combine)
    assert seen == {"store", "flip", "add"}


@pytest.mark.parametrize("seed", range(18))
@pytest.mark.parametrize("signed", [False, True])
def test_quantized_conv2d_small_image(seed, signed, monkeypatch):
    """The small image's CONV_2D in quant.DirectProduct's form (one gather by take, one product,
    clamp into bytes, flip or two-term sum; 1x1 without padding or stride: no gather) against
    the general im2col kernel: explicit and implicit padding, strides, dilation, batches,
    activations with and without the negative side's correction, per-channel filters."""
    rng = np.random.default_rng(600 + seed + 30 * signed)
    n, h, w, c, o = 1 + seed % 2, int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 5)), \
        int(rng.integers(1, 9))
    plain = seed % 4 == 0
    kh, kw = (1, 1) if plain else (int(rng.integers(1, min(h, 3) + 1)), int(rng.integers(1, min(w, 3) + 1)))
    t = _qtype(rng, signed)
    wt, wv, bt, bias = _filter_and_bias(rng, t, signed, signed and seed % 3 != 0, (o, kh, kw, c), o)
    ot = _out_type(rng, signed)
    fuse = [0, 1, 2, 3, 0][seed % 5]
    if plain:
        params = (0, 0, 0, 0, 1, 1, fuse)
    elif seed % 3 == 0:         # explicit padding, dilation
        pads = tuple(int(v) for v in rng.integers(0, 2, 4))
        dh = int(rng.integers(1, 3)) if h >= 2 * kh else 1
        dw = int(rng.integers(1, 3)) if w >= 2 * kw else 1
        params = pads + (int(rng.integers(1, 3)), int(rng.integers(1, 3)), fuse, False, dw, dh)
    else:
        params = (int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 3)), fuse)
    x = _qvalues(rng, (n, h, w, c), signed)

    def build():
        m = nn.Model()
        xi = m.input("x", t, (n, h, w, c))
        m.output(m.op("CONV_2D", xi, m.constant(wv, wt), m.constant(bias, bt), *params, outputs=[ot]), "y")
        return m
    _same(*_vs_general(build, {"x": x}, monkeypatch))


@pytest.mark.parametrize("seed", RNG_SEEDS)
@pytest.mark.parametrize("op", ["LOGISTIC", "TANH", "HARD_SWISH"])
@pytest.mark.parametrize("signed", [False, True])
def test_quantized_table_activations(seed, op, signed):
    """LOGISTIC / TANH / HARD_SWISH of a small quantized tensor: the table's take with the
    input's values as indices (int8: mode wrap, the byte pattern) -- the general lookup's bytes,
    every one of the 256 codes included."""
    rng = np.random.default_rng(700 + seed + 10 * signed)
    shape = (256,) if seed == 0 else _shape(rng, int(rng.integers(1, 5)))
    t = _qtype(rng, signed)
    if op == "LOGISTIC":
        ot = (nn.quant8_asymm_signed if signed else nn.quant8_asymm)(1.0 / 256, -128 if signed else 0)
    elif op == "TANH":
        ot = (nn.quant8_asymm_signed if signed else nn.quant8_asymm)(1.0 / 128, 0 if signed else 128)
    else:
        ot = _qtype(rng, signed)
    x = (np.arange(256).astype(np.uint8).view(np.int8 if signed else np.uint8).copy() if seed == 0
         else _qvalues(rng, shape, signed))

    def build():
        m = nn.Model()
        xi = m.input("x", t, shape)
        m.output(m.op(op, xi, outputs=[(ot, shape)]), "y")
        return m
    _same(*_both(build, {"x": x}))


@pytest.mark.parametrize("seed", RNG_SEEDS)
@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
def test_float_logistic_tanh(seed, op):
    """float32 LOGISTIC / TANH of a small tensor: the general kernel's ufunc calls bound once --
    its bits, with large, tiny, infinite and NaN inputs."""
    rng = np.random.default_rng(800 + seed)
    shape = _shape(rng, int(rng.integers(1, 5)))
    x = (rng.standard_normal(shape) * 10 ** rng.uniform(-3, 2)).astype(np.float32)
    x.ravel()[: 4] = [np.inf, -np.inf, np.nan, 100.0][: x.size]

    def build():
        m = nn.Model()
        xi = m.input("x", nn.float32, shape)
        m.output(m.op(op, xi, outputs=[(nn.float32, shape)]), "y")
        return m
    _same(*_both(build, {"x": x}))


@pytest.mark.parametrize("seed", range(18))
@pytest.mark.parametrize("signed", [False, True])
def test_quantized_depthwise_small_image(seed, signed, monkeypatch):
    """The small image's DEPTHWISE_CONV_2D in quant.DirectProduct's form (one take of every
    pixel's taps per channel, one einsum, clamp into bytes, flip or two-term sum) against the
    general kernel: explicit and implicit padding, strides, dilation, depth multipliers,
    batches, activations with and without the negative side's correction, per-channel filters;
    NCHW takes the general kernel (the same bytes either way)."""
    rng = np.random.default_rng(900 + seed + 30 * signed)
    n, h, w, c = 1 + seed % 2, int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 6))
    mult = int(rng.integers(1, 3)) if seed % 3 == 1 else 1
    o = c * mult
    kh, kw = int(rng.integers(1, min(h, 3) + 1)), int(rng.integers(1, min(w, 3) + 1))
    t = _qtype(rng, signed)
    wt, wv, bt, bias = _filter_and_bias(rng, t, signed, signed and seed % 3 != 0, (1, kh, kw, o), o)
    ot = _out_type(rng, signed)
    fuse = [0, 1, 2, 3, 0][seed % 5]
    nchw = seed % 6 == 5
    if seed % 3 == 0:           # explicit padding, dilation
        pads = tuple(int(v) for v in rng.integers(0, 2, 4))
        dh = int(rng.integers(1, 3)) if h >= 2 * kh else 1
        dw = int(rng.integers(1, 3)) if w >= 2 * kw else 1
        params = pads + (int(rng.integers(1, 3)), int(rng.integers(1, 3)), mult, fuse, nchw, dw, dh)
    else:
        params = (int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 3)), mult, fuse, nchw)
    shape = (n, c, h, w) if nchw else (n, h, w, c)
    x = _qvalues(rng, shape, signed)

    def build():
        m = nn.Model()
        xi = m.input("x", t, shape)
        m.output(m.op("DEPTHWISE_CONV_2D", xi, m.constant(wv, wt), m.constant(bias, bt), *params, outputs=[ot]),
                 "y")
        return m
    _same(*_vs_general(build, {"x": x}, monkeypatch))


# ---- issue 41, part 4: QUANTIZE of a small float tensor, the quantized average's rounding -----------
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("signed", [False, True])
def test_quantize_small_float(seed, signed):
    """QUANTIZE of a small float32 / float16 tensor (several values: the lean kernel's clamp through
    np.maximum / np.fmin) gives the general kernel's bytes: ties of the quotient (half away from
    zero), values beyond the range, +-inf and NaN (the largest code, as std::min(hi, NaN))."""
    rng = np.random.default_rng(seed + 50 * signed)
    dt = np.float16 if seed % 4 == 3 else np.float32
    shape = _shape(rng, int(rng.integers(1, 5)))
    if int(np.prod(shape)) < 2:
        shape = shape[:-1] + (2,)
    t = _qtype(rng, signed)
    x = rng.uniform(-300, 300, shape) * t.scale
    flat = x.reshape(-1)
    k = rng.integers(0, flat.size, 4)
    flat[k[0]] = (int(rng.integers(-50, 50)) + 0.5) * t.scale     # a tie
    flat[k[1]] = rng.choice([np.inf, -np.inf, np.nan, 1e30])
    flat[k[2]] = -0.0
    x = x.astype(dt)
    ft = nn.float16 if dt == np.float16 else nn.float32

    def build():
        m = nn.Model()
        xi = m.input("x", ft, shape)
        m.output(m.op("QUANTIZE", xi, outputs=[t]), "y")
        return m
    with np.errstate(all="ignore"):
        _same(*_both(build, {"x": x}))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("signed", [False, True])
def test_quantized_average_pool_rounding_reference(seed, signed):
    """Both quantized AVERAGE_POOL_2D kernels (the small image's window matrix, the general passes)
    against the reference's integer arithmetic: (|sum| + count // 2) // count with the sum's sign,
    windows clipped to the image (VALID and SAME padding), no activation."""
    rng = np.random.default_rng(seed + 7 * signed)
    h, w, c = int(rng.integers(2, 7)), int(rng.integers(2, 7)), int(rng.integers(1, 4))
    fh, fw = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
    s = int(rng.integers(1, 3))
    t = _qtype(rng, signed)
    x = _qvalues(rng, (1, h, w, c), signed)
    # the reference, SAME padding: windows clipped to the image
    oh, ow = -(-h // s), -(-w // s)
    pt, pl = max((oh - 1) * s + fh - h, 0) // 2, max((ow - 1) * s + fw - w, 0) // 2
    want = np.empty((1, oh, ow, c), np.int64)
    xi = x.astype(np.int64)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * s - pt, j * s - pl
            win = xi[0, max(r0, 0):min(r0 + fh, h), max(c0, 0):min(c0 + fw, w)]
            tot, cnt = win.sum(axis=(0, 1)), win.shape[0] * win.shape[1]
            want[0, i, j] = np.sign(tot) * ((np.abs(tot) + cnt // 2) // cnt)
    lo, hi = (-128, 127) if signed else (0, 255)

    def build():
        m = nn.Model()
        xin = m.input("x", t, (1, h, w, c))
        m.output(m.op("AVERAGE_POOL_2D", xin, 1, s, s, fw, fh, 0, outputs=[t]), "y")
        return m
    for got in _both(build, {"x": x}):
        np.testing.assert_array_equal(got["y"], np.clip(want, lo, hi))


def test_small_fc_product_takes_dot_only_where_its_bits_are_matmuls(monkeypatch):
    """The small float32 FULLY_CONNECTED multiplies with np.dot (1 us cheaper a call) only where
    a check at build finds np.matmul's bits; where they differ it keeps np.matmul."""
    from nnapi_py.ops import common
    wt = np.random.default_rng(3).standard_normal((16, 8)).astype(np.float32)
    assert common.product_for(wt, 1) is np.dot
    real = np.dot

    def other_order(a, b, out=None):            # a BLAS routine summing another way round
        r = real(a, b, out=out)
        r += np.float32(1e-3)
        return r
    monkeypatch.setattr(np, "dot", other_order)
    assert common.product_for(wt, 1) is np.matmul


@pytest.mark.parametrize("fuse", [0, 1, 2, 3])
def test_one_value_fc_and_logistic(fuse):
    """One output value: FULLY_CONNECTED to [1, 1] and LOGISTIC of one value make the general
    kernels' steps with none in place (FC: new arrays, then the output; LOGISTIC: numpy float32
    scalars): the same bits, over random, huge, tiny, infinite and NaN values."""
    rng = np.random.default_rng(31 + fuse)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 88.7, -88.7, 104.0, -104.0, 3e38, -3e38]
    values = list((rng.standard_normal(40) * 10 ** rng.uniform(-3, 2.5, 40)).astype(np.float32)) + specials
    size = 7
    w = rng.standard_normal((1, size)).astype(np.float32)
    b = rng.standard_normal(1).astype(np.float32)

    def build():
        m = nn.Model()
        xi = m.input("x", nn.float32, (1, size))
        y = m.op("FULLY_CONNECTED", xi, w, b, fuse, outputs=[(nn.float32, (1, 1))])
        m.output(y, "fc")
        s = m.input("s", nn.float32, (1, 1))
        m.output(m.op("LOGISTIC", s, outputs=[(nn.float32, (1, 1))]), "sig")
        return m
    for v in values:
        with np.errstate(over="ignore"):        # 3e38 times a draw above 1: inf, as meant
            x = (rng.standard_normal((1, size)) * abs(float(v)) if np.isfinite(v) else
                 np.full((1, size), v)).astype(np.float32)
        _same(*_both(build, {"x": x, "s": np.full((1, 1), v, np.float32)}))
