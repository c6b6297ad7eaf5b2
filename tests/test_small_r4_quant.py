"""Issue 41's fourth round on the quantized small kernels: the one-pixel depthwise product by
one multiply and one np.dot, the int8 one-term epilogue by one table take (quant.flip_table),
each against the general kernels' bytes (common.SMALL 0, no DirectProduct / TableProduct) on
the wake-word models' shapes, random and extreme inputs, and the epilogue against the clamp,
byte store and top-bit flip it replaces over the values at its edges."""
import numpy as np
import pytest

import nnapi_py as nn
from nnapi_py.ops import quant as Q
from test_small_path import _filter_and_bias, _layer_vs_general, _out_type, _qtype, _qvalues


def _edge_values(rng):
    """Products around every byte boundary, below and beyond the byte range, -0.0 and far ones."""
    base = np.arange(-3, 260, dtype=np.float64)
    near = np.concatenate([base, base + 0.5, base - 1e-9, base + 1e-9, base + 0.999999])
    far = np.array([-1e15, -2.0 ** 52, -300.5, -1.0, -0.75, -0.0, 0.0, 255.5, 256.0, 1e6, 2.0 ** 52, 1e15])
    return np.concatenate([near, far, rng.uniform(-400, 700, 2000)])


@pytest.mark.parametrize("bounds", [(0, 255), (128, 255), (0, 127), (10, 200), (127, 127), (0, 0), (255, 255)])
def test_flip_table_is_clamp_store_flip(bounds):
    """flip_table's take (mode clip) of the truncated product gives the bytes of the clamp, the
    byte store and the top-bit flip it replaces, for every boundary and beyond the byte range."""
    lo, hi = bounds
    rng = np.random.default_rng(lo * 7 + hi)
    z = _edge_values(rng)
    ref = np.empty(z.size, np.uint8)
    np.copyto(ref, np.clip(z, float(lo), float(hi)), casting="unsafe")
    ref = np.bitwise_xor(ref.view(np.int8), np.int8(-128))
    idx = np.empty(z.size, np.intp)
    np.copyto(idx, z, casting="unsafe")
    got = Q.flip_table(np.full(3, float(lo)), np.full(3, float(hi))).take(idx, None, None, "clip")
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, ref)


def test_flip_table_refuses_uneven_bounds():
    with pytest.raises(ValueError):
        Q.flip_table(np.array([0.0, 1.0]), np.array([255.0, 255.0]))
    with pytest.raises(ValueError):
        Q.flip_table(np.array([-1.0]), np.array([255.0]))


WAKE_DW = [(5, 32), (9, 64), (13, 64), (21, 64), (5, 30), (9, 60), (13, 60), (21, 60), (1, 1), (2, 3), (40, 7)]


@pytest.mark.parametrize("taps,c", WAKE_DW)
@pytest.mark.parametrize("fuse", [0, 1])
@pytest.mark.parametrize("signed", [True, False])
def test_depthwise_one_pixel_wake_word_shapes(taps, c, fuse, signed, monkeypatch):
    """The wake words' streaming depthwise layers (1xTx1xC -> 1x1x1xC; no activation: the
    two-term form, ReLU: one term) by DirectProduct's multiply and one dot: the general
    kernel's bytes, random, all-lowest and all-highest inputs, per-tensor and per-channel."""
    rng = np.random.default_rng(1000 + taps * 100 + c + 7 * fuse + signed)
    t = _qtype(rng, signed)
    per_channel = signed and c % 2 == 0
    wt, wv, bt, bias = _filter_and_bias(rng, t, signed, per_channel, (1, taps, 1, c), c)
    ot = _out_type(rng, signed)
    shape = (1, taps, 1, c)
    lo, hi = (-128, 127) if signed else (0, 255)
    dt = np.int8 if signed else np.uint8
    xs = [_qvalues(rng, shape, signed), np.full(shape, lo, dt), np.full(shape, hi, dt),
          rng.choice(np.array([lo, hi], dt), shape)]
    _layer_vs_general("DEPTHWISE_CONV_2D", t, shape, (wv, wt), (bias, bt), (0, 0, 0, 0, 1, 1, 1, fuse),
                      (ot, (1, 1, 1, c)), xs, monkeypatch)


WAKE_CONV = [((1, 1, 32), 64), ((1, 1, 64), 64), ((5, 1, 40), 32), ((1, 1, 60), 60), ((1, 1, 3), 1)]


@pytest.mark.parametrize("inp,o", WAKE_CONV)
@pytest.mark.parametrize("fuse", [1, 3, 0])
@pytest.mark.parametrize("signed", [True, False])
def test_conv_one_pixel_wake_word_shapes(inp, o, fuse, signed, monkeypatch):
    """The wake words' pointwise and first layers (one output pixel; ReLU: the int8 one-term
    form by flip_table's take): the general kernel's bytes, random and extreme inputs."""
    kh, kw, c = inp
    rng = np.random.default_rng(2000 + kh * 1000 + c * 10 + o + fuse + 50 * signed)
    t = _qtype(rng, signed)
    wt, wv, bt, bias = _filter_and_bias(rng, t, signed, signed, (o, kh, kw, c), o)
    ot = _out_type(rng, signed)
    shape = (1, kh, kw, c)
    lo, hi = (-128, 127) if signed else (0, 255)
    dt = np.int8 if signed else np.uint8
    xs = [_qvalues(rng, shape, signed), np.full(shape, lo, dt), np.full(shape, hi, dt)]
    _layer_vs_general("CONV_2D", t, shape, (wv, wt), (bias, bt), (2, 1, 1, fuse), (ot, (1, 1, 1, o)),
                      xs, monkeypatch)


@pytest.mark.parametrize("hwco", [(8, 8, 1, 4, 3), (4, 4, 4, 3, 1), (5, 3, 2, 6, 3), (2, 2, 1, 2, 1)])
@pytest.mark.parametrize("fuse", [1, 3])
def test_small_image_conv_flip_table(hwco, fuse, monkeypatch):
    """helia_tiny_cnn's small int8 CONV_2D layers with a ReLU (the one-term form of
    convsmall._direct_run by flip_table's take): the general kernel's bytes."""
    h, w, c, o, k = hwco
    rng = np.random.default_rng(3000 + h * 100 + c * 10 + o + k + fuse)
    t = _qtype(rng, True)
    wt, wv, bt, bias = _filter_and_bias(rng, t, True, True, (o, k, k, c), o)
    ot = _out_type(rng, True)
    shape = (1, h, w, c)
    xs = [_qvalues(rng, shape, True), np.full(shape, -128, np.int8), np.full(shape, 127, np.int8)]
    _layer_vs_general("CONV_2D", t, shape, (wv, wt), (bias, bt), (1, 1, 1, fuse), (ot, (1, h, w, o)),
                      xs, monkeypatch)


# ---- CONCATENATION of a streaming state (shape._lean_concatenation) ----------------------------
def _temporary(shape, dtype):
    """An array as the plan makes its temporaries: over a PoolBuffer."""
    from nnapi_py.ops.base import PoolBuffer
    dt = np.dtype(dtype)
    return np.ndarray(shape, dt, buffer=PoolBuffer((int(np.prod(shape)) * dt.itemsize,), np.uint8))


def _concat_kernel(shapes, axis, dtype):
    from types import SimpleNamespace
    from nnapi_py.ops.shape import _lean_concatenation
    tensors = [SimpleNamespace(dims=s, dtype=np.dtype(dtype)) for s in shapes]

    def general(i, o):
        np.concatenate(i[:-1], axis=axis, out=o[0])
    return _lean_concatenation(tensors, axis, general)


@pytest.mark.parametrize("shapes", [[(1, 20, 1, 64), (1, 1, 1, 64)], [(1, 2, 1, 40), (1, 3, 1, 40)],
                                    [(1, 4, 1, 3), (1, 1, 1, 3), (1, 2, 1, 3)]])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.float32])
def test_concatenation_of_alternating_state(shapes, dtype):
    """A streaming model's ring buffer: the state input alternates between two arrays (the
    importer's state pair), the new frame is a temporary, the output the same array; the
    contents change between calls.  Every call gives np.concatenate's bytes, whether the kept
    memoryviews (the two sets learnt) or the general kernel run it; a new state array or a new
    output is seen at once."""
    rng = np.random.default_rng(len(shapes) * 10 + np.dtype(dtype).itemsize)
    k = _concat_kernel(shapes, 1, dtype)
    out_shape = (1, sum(s[1] for s in shapes)) + shapes[0][2:]
    states = [np.zeros(shapes[0], dtype) for _ in range(2)]
    others = [_temporary(s, dtype) for s in shapes[1:]]
    z = _temporary(out_shape, dtype)
    for call in range(60):
        x0 = states[call % 2]
        if call == 25:
            x0 = np.zeros(shapes[0], dtype)         # a new state array
        if call == 30:
            z = _temporary(out_shape, dtype)         # a new output
        if call >= 40:                              # the frame a new view each call (of a model input)
            others = [np.array(y) for y in others]
        x0[...] = rng.integers(-100, 100, x0.shape)
        for y in others:
            y[...] = rng.integers(-100, 100, y.shape)
        k([x0, *others, np.int32(1)], [z])
        np.testing.assert_array_equal(z, np.concatenate([x0, *others], axis=1))


def test_concatenation_alternating_arenas():
    """A loop body run on two arenas by parity: output and inputs alternate between two sets of
    temporaries (both learnt), the values changing every call: np.concatenate's bytes."""
    rng = np.random.default_rng(77)
    k = _concat_kernel([(1, 3, 5), (1, 1, 5)], 1, np.float32)
    sets = [([_temporary((1, 3, 5), np.float32), _temporary((1, 1, 5), np.float32)],
             _temporary((1, 4, 5), np.float32)) for _ in range(2)]
    for call in range(30):
        xs, z = sets[call % 2]
        for x in xs:
            x[...] = rng.standard_normal(x.shape)
        k([*xs, np.int32(1)], [z])
        np.testing.assert_array_equal(z, np.concatenate(xs, axis=1))


def test_concatenation_read_only_and_new_arrays():
    """Read-only inputs are read through the kept views; a read-only output and arrays new each
    call take the general kernel (np.concatenate raises for the read-only output, as before)."""
    k = _concat_kernel([(1, 2, 1, 4), (1, 1, 1, 4)], 1, np.int8)
    a = [np.arange(8, dtype=np.int8).reshape(1, 2, 1, 4), np.arange(8, 16, dtype=np.int8).reshape(1, 2, 1, 4)]
    for x in a:
        x.flags.writeable = False
    b = np.full((1, 1, 1, 4), 7, np.int8)
    z = _temporary((1, 3, 1, 4), np.int8)
    for call in range(10):
        k([a[call % 2], b, np.int32(1)], [z])
        np.testing.assert_array_equal(z, np.concatenate([a[call % 2], b], axis=1))
    for call in range(12):
        x = np.full((1, 2, 1, 4), call, np.int8)
        y = np.full((1, 1, 1, 4), -call, np.int8)
        w = np.zeros((1, 3, 1, 4), np.int8)
        k([x, y, np.int32(1)], [w])
        np.testing.assert_array_equal(w, np.concatenate([x, y], axis=1))
    k2 = _concat_kernel([(1, 2, 1, 4), (1, 1, 1, 4)], 1, np.int8)
    zr = np.zeros((1, 3, 1, 4), np.int8)
    zr.flags.writeable = False
    for call in range(4):
        with pytest.raises(ValueError):
            k2([a[0], b, np.int32(1)], [zr])


def test_concatenation_keeps_no_large_caller_buffer():
    """A caller's array viewing a large buffer is never kept (the kept sets hold their arrays):
    the buffer is freed once the caller drops it, and every call is still np.concatenate's."""
    import gc
    import weakref
    k = _concat_kernel([(1, 2, 1, 4), (1, 1, 1, 4)], 1, np.int8)
    big = [np.zeros(1 << 20, np.int8) for _ in range(2)]
    refs = [weakref.ref(b) for b in big]
    xs = [b[:8].reshape(1, 2, 1, 4) for b in big]
    y = np.full((1, 1, 1, 4), 5, np.int8)
    z = _temporary((1, 3, 1, 4), np.int8)
    for call in range(12):
        xs[call % 2][...] = call
        k([xs[call % 2], y, np.int32(1)], [z])
        np.testing.assert_array_equal(z, np.concatenate([xs[call % 2], y], axis=1))
    del big, xs
    gc.collect()
    assert all(r() is None for r in refs)


# ---- one output unit (a classifier's last unit through DirectProduct) ------------------------
@pytest.mark.parametrize("size", [1, 5, 48, 300, 320, 960])
@pytest.mark.parametrize("fuse", [0, 1, 2, 3])
@pytest.mark.parametrize("signed", [True, False])
def test_fully_connected_one_unit(size, fuse, signed, monkeypatch):
    """A classifier's last unit (1xK -> 1x1, the wake words' 1x300 / 1x320 / 1x960 -> 1x1) by
    DirectProduct: the general kernel's byte, one and two terms (the int8 one term by
    flip_table), rank-2 and rank-4 inputs, random and extreme inputs."""
    rng = np.random.default_rng(4000 + size + 10 * fuse + signed)
    shape = (1, size) if fuse % 2 else (1, 1, 1, size)
    t = _qtype(rng, signed)
    wt = _qtype(rng, signed)
    wv = _qvalues(rng, (1, size), signed)
    bt = nn.OperandType(nn.int32.code, float(np.float32(t.scale) * np.float32(wt.scale)), 0)
    bias = rng.integers(-3000, 3000, 1).astype(np.int32)
    ot = _out_type(rng, signed)
    ot = (nn.quant8_asymm_signed if signed else nn.quant8_asymm)(ot.scale * 4, ot.zero_point)
    lo, hi = (-128, 127) if signed else (0, 255)
    dt = np.int8 if signed else np.uint8
    xs = [_qvalues(rng, shape, signed) for _ in range(4)] + [np.full(shape, lo, dt), np.full(shape, hi, dt)]
    _layer_vs_general("FULLY_CONNECTED", t, shape, (wv, wt), (bias, bt), (fuse,), (ot, (1, 1)), xs, monkeypatch)


@pytest.mark.parametrize("signed", [True, False])
def test_one_unit_into_a_temporary(signed, monkeypatch):
    """The one unit written into a plan temporary (its flat view kept) and read by the next
    operation, over many runs of one compilation: the general kernels' bytes each run."""
    rng = np.random.default_rng(4100 + signed)
    size = 64
    t, wt = _qtype(rng, signed), _qtype(rng, signed)
    wv = _qvalues(rng, (1, size), signed)
    bt = nn.OperandType(nn.int32.code, float(np.float32(t.scale) * np.float32(wt.scale)), 0)
    bias = rng.integers(-3000, 3000, 1).astype(np.int32)
    ot = _out_type(rng, signed)

    def build():
        m = nn.Model()
        x = m.input("x", t, (1, size))
        y = m.op("FULLY_CONNECTED", x, m.constant(wv, wt), m.constant(bias, bt), np.int32(0), outputs=[(ot, (1, 1))])
        m.output(m.op("RESHAPE", y, np.array([1], np.int32), outputs=[(ot, (1,))]), "y")
        m.output(m.op("FULLY_CONNECTED", x, m.constant(wv, wt), m.constant(bias, bt), np.int32(1),
                      outputs=[(ot, (1, 1))]), "r")
        return m
    from nnapi_py.ops import common
    lean = build().compile()
    with monkeypatch.context() as mp:
        mp.setattr(common, "SMALL", 0)
        mp.setattr(Q.DirectProduct, "for_stage", classmethod(lambda cls, *a, **k: None))
        mp.setattr(Q.TableProduct, "for_stage", classmethod(lambda cls, *a, **k: None))
        general = build().compile()
    for _ in range(20):
        x = _qvalues(rng, (1, size), signed)
        a, b = lean.run({"x": x}), general.run({"x": x})
        for key in ("y", "r"):
            assert np.asarray(a[key]).tobytes() == np.asarray(b[key]).tobytes()


@pytest.mark.parametrize("case", ["kept", "new_frame", "alternating", "three"])
def test_concatenation_lean_paths_taken(case, monkeypatch):
    """After a few calls the kept paths run without the general kernel (np.concatenate counted)
    -- an alternating state with a kept frame and output, a frame new each call, outputs
    alternating between two arrays, three inputs -- so the tests above check them."""
    calls = []
    real = np.concatenate

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(np, "concatenate", counted)
    shapes = [(1, 20, 1, 8), (1, 1, 1, 8)] + ([(1, 2, 1, 8)] if case == "three" else [])
    k = _concat_kernel(shapes, 1, np.int8)
    rng = np.random.default_rng(5)
    states = [np.zeros(shapes[0], np.int8) for _ in range(2)]
    others = [_temporary(s, np.int8) for s in shapes[1:]]
    total = sum(s[1] for s in shapes)
    zs = [_temporary((1, total, 1, 8), np.int8) for _ in range(2)]
    for c in range(30):
        if c == 20:
            calls.clear()
        if case == "new_frame":
            others = [np.array(y) for y in others]
        for x in [states[c % 2]] + others:
            x[...] = rng.integers(-128, 128, x.shape)
        z = zs[c % 2] if case == "alternating" else zs[0]
        k([states[c % 2], *others, np.int32(1)], [z])
        np.testing.assert_array_equal(z, real([states[c % 2], *others], axis=1))
    assert not calls


def test_concatenation_from_threads():
    """One kernel called from several threads at once, each with its own output, alternating
    state and frame (each thread its own arena): every call gives its own np.concatenate's
    bytes -- a call never takes another thread's kept bytes (each kept pair is read whole)."""
    import sys
    import threading
    shapes = [(1, 6, 1, 16), (1, 1, 1, 16)]
    k = _concat_kernel(shapes, 1, np.int8)
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        states = [np.zeros(shapes[0], np.int8) for _ in range(2)]
        frame = _temporary(shapes[1], np.int8)
        zs = [_temporary((1, 7, 1, 16), np.int8) for _ in range(2)]
        for c in range(400):
            x0 = states[c % 2]
            x1 = frame if seed % 2 else np.array(frame)
            x0[...] = rng.integers(-128, 128, x0.shape)
            x1[...] = rng.integers(-128, 128, x1.shape)
            z = zs[c % 2] if seed % 3 else zs[0]
            k([x0, x1, np.int32(1)], [z])
            if not np.array_equal(z, np.concatenate([x0, x1], axis=1)):
                errors.append((seed, c))
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors[:5]
