"""Compile-time folding of a standalone RELU / RELU1 / RELU6 into the operation producing its
input (nnapi_py/plan.py, Plan._fold_activations), of a depthwise bias into the 1x1
convolution reading it (Plan._fold_biases), and of DEQUANTIZE -> QUANTIZE into one lookup
(Plan._fold_requantize): the same numbers as running both (within float32 rounding for the
bias), and no folding where it would change what a client sees."""
import numpy as np
import pytest

import nnapi_py as nn
from nnapi_py import plan as P

RNG = np.random.default_rng(11)
ACT = {"RELU": lambda v: np.maximum(v, 0), "RELU1": lambda v: np.clip(v, -1, 1),
       "RELU6": lambda v: np.clip(v, 0, 6)}


def _counts(monkeypatch, method):
    """What Plan.<method> returned for each compiled plan, in compilation order."""
    seen = []
    orig = getattr(P.Plan, method)

    def spy(self, *args):
        n = orig(self, *args)
        seen.append(n)
        return n
    monkeypatch.setattr(P.Plan, method, spy)
    return seen


@pytest.fixture
def folds(monkeypatch):
    """The number of activations each compiled plan folded, in compilation order."""
    return _counts(monkeypatch, "_fold_activations")


def _special(x):
    x = x.copy()
    x.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return x


@pytest.mark.parametrize("act", ["RELU", "RELU1", "RELU6"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_add_then_activation(folds, act, dtype):
    t = nn.float32 if dtype == np.float32 else nn.float16
    m = nn.Model()
    a, b = m.input("a", t, (3, 5)), m.input("b", t, (3, 5))
    m.output(m.op(act, m.op("ADD", a, b, 0)), "y")
    x = _special((RNG.standard_normal((3, 5)) * 4).astype(dtype))
    z = (RNG.standard_normal((3, 5)) * 4).astype(dtype)
    y = m.compile().run({"a": x, "b": z})["y"]
    with np.errstate(all="ignore"):
        ref = ACT[act]((x + z).astype(dtype))
    assert folds == [1]
    np.testing.assert_array_equal(y, ref)


def test_conv_depthwise_fc_chains(folds):
    m = nn.Model()
    x = m.input("x", nn.float32, (1, 6, 6, 3))
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    c = m.op("RELU6", m.op("CONV_2D", x, w, b, 1, 1, 1, 0))                  # SAME, stride 1
    dw = RNG.standard_normal((1, 3, 3, 4)).astype(np.float32)
    d = m.op("RELU", m.op("DEPTHWISE_CONV_2D", c, dw, np.zeros(4, np.float32), 1, 1, 1, 1, 0))
    r = m.op("RESHAPE", d, np.array([1, 144], np.int32), outputs=[(nn.float32, (1, 144))])
    fw = RNG.standard_normal((5, 144)).astype(np.float32)
    fc = m.op("FULLY_CONNECTED", r, fw, np.zeros(5, np.float32), 0, outputs=[(nn.float32, (1, 5))])
    m.output(m.op("RELU1", fc), "y")
    xin = RNG.standard_normal((1, 6, 6, 3)).astype(np.float32)
    got = m.compile().run({"x": xin})["y"]
    assert folds == [3]

    # the same graph with every activation fused by the client instead: identical numbers
    m2 = nn.Model()
    x2 = m2.input("x", nn.float32, (1, 6, 6, 3))
    c2 = m2.op("CONV_2D", x2, w, b, 1, 1, 1, 3)
    d2 = m2.op("DEPTHWISE_CONV_2D", c2, dw, np.zeros(4, np.float32), 1, 1, 1, 1, 1)
    r2 = m2.op("RESHAPE", d2, np.array([1, 144], np.int32), outputs=[(nn.float32, (1, 144))])
    m2.output(m2.op("FULLY_CONNECTED", r2, fw, np.zeros(5, np.float32), 2, outputs=[(nn.float32, (1, 5))]), "y")
    np.testing.assert_array_equal(got, m2.compile().run({"x": xin})["y"])


def test_not_folded_where_the_intermediate_is_seen_or_shared(folds):
    m = nn.Model()
    a, b = m.input("a", nn.float32, (4,)), m.input("b", nn.float32, (4,))
    s = m.op("ADD", a, b, 0)
    m.output(s, "sum")                                  # a model output: must stay unclamped
    m.output(m.op("RELU", s), "relu")
    t = m.op("MUL", a, b, 0)                            # two consumers
    m.output(m.op("RELU6", t), "relu6")
    m.output(m.op("ADD", t, b, 0), "other")
    u = m.op("SUB", a, b, 1)                            # already fused: RELU6 after RELU stays
    m.output(m.op("RELU6", u), "both")
    x = np.array([-3, 2, 7, 0.5], np.float32)
    z = np.array([1, -8, 4, 0.25], np.float32)
    y = m.compile().run({"a": x, "b": z})
    assert folds == [0]
    np.testing.assert_array_equal(y["sum"], x + z)
    np.testing.assert_array_equal(y["relu"], np.maximum(x + z, 0))
    np.testing.assert_array_equal(y["relu6"], np.clip(x * z, 0, 6))
    np.testing.assert_array_equal(y["other"], x * z + z)
    np.testing.assert_array_equal(y["both"], np.clip(np.maximum(x - z, 0), 0, 6))


def test_quantized_activations_are_not_folded(folds):
    q = nn.quant8_asymm(0.5, 10)
    m = nn.Model()
    a, b = m.input("a", q, (4,)), m.input("b", q, (4,))
    m.output(m.op("RELU", m.op("ADD", a, b, 0)), "y")
    x = np.array([0, 5, 20, 200], np.uint8)
    y = m.compile().run({"a": x, "b": x})["y"]
    m2 = nn.Model()
    a2, b2 = m2.input("a", q, (4,)), m2.input("b", q, (4,))
    m2.output(m2.op("ADD", a2, b2, 0), "s")
    s = m2.compile().run({"a": x, "b": x})["s"]
    assert folds == [0, 0]
    np.testing.assert_array_equal(y, np.maximum(s, 10))     # RELU: clamp at the zero point


def test_dynamic_shapes_with_a_folded_activation(folds):
    m = nn.Model()
    a, b = m.input("a", nn.float32, (0, 3)), m.input("b", nn.float32, (0, 3))
    m.output(m.op("RELU6", m.op("ADD", a, b, 0)), "y")
    c = m.compile()
    for rows in (1, 4):
        x = (RNG.standard_normal((rows, 3)) * 5).astype(np.float32)
        np.testing.assert_array_equal(c.run({"a": x, "b": x})["y"], np.clip(x + x, 0, 6))
    assert folds == [1]


def test_strict_mode_folds_nothing_and_nan_becomes_the_bound(folds, monkeypatch):
    """Folded, a NaN stays NaN (the fused clamp); the standalone RELU family gives its lower
    bound (docs/decisions.md).  NNAPI_PY_STRICT=1 keeps the standalone operation."""
    monkeypatch.setenv("NNAPI_PY_STRICT", "1")
    for act, lo in (("RELU", 0), ("RELU1", -1), ("RELU6", 0)):
        m = nn.Model()
        a, b = m.input("a", nn.float32, (4,)), m.input("b", nn.float32, (4,))
        m.output(m.op(act, m.op("ADD", a, b, 0)), "y")
        y = m.compile().run({"a": np.array([np.nan, -5, 0.5, 9], np.float32),
                             "b": np.zeros(4, np.float32)})["y"]
        np.testing.assert_array_equal(y, ACT[act](np.array([lo, -5, 0.5, 9], np.float32)))
    assert folds == [0, 0, 0]


# ---- a depthwise bias passed on to the following 1x1 convolution (Plan._fold_biases) -------------
@pytest.fixture
def passed(monkeypatch):
    """The number of biases each compiled plan passed on, in compilation order."""
    return _counts(monkeypatch, "_fold_biases")


def _dw_then_conv(x_shape, k=3, stride=1, conv_args=(2, 1, 1, 0), fw=None, nchw=False, dw_fuse=0,
                  extra_reader=False, conv_bias=True):
    """x -> DEPTHWISE_CONV_2D (bias b, activation dw_fuse) -> CONV_2D (filter fw) -> y; the
    float64 reference of both; the model's constant biases (to check they are untouched)."""
    c = x_shape[1] if nchw else x_shape[3]
    dw = RNG.standard_normal((1, k, k, c)).astype(np.float32)
    b = (RNG.standard_normal(c) * 3).astype(np.float32)
    fw = RNG.standard_normal((5, 1, 1, c)).astype(np.float32) if fw is None else fw
    cb = RNG.standard_normal(fw.shape[0]).astype(np.float32) if conv_bias else np.zeros(fw.shape[0], np.float32)
    keep = (b.copy(), cb.copy())
    m = nn.Model()
    x = m.input("x", nn.float32, x_shape)
    tail = [True] if nchw else []
    d = m.op("DEPTHWISE_CONV_2D", x, dw, b, 1, stride, stride, 1, dw_fuse, *tail)
    m.output(m.op("CONV_2D", d, fw, cb, *conv_args, *tail), "y")
    if extra_reader:
        m.output(m.op("ADD", d, d, 0), "z")
    return m, (dw, b, fw, cb), keep


def _ref(xv, dw, b, fw, cb, stride, pads=(1, 1, 1, 1), nchw=False, dw_fuse=0, conv_stride=1):
    x = xv.transpose(0, 2, 3, 1) if nchw else xv
    x = x.astype(np.float64)
    n, h, w, c = x.shape
    k = dw.shape[1]
    xp = np.pad(x, [(0, 0), pads[:2], pads[2:], (0, 0)])
    oh, ow = (h + pads[0] + pads[1] - k) // stride + 1, (w + pads[2] + pads[3] - k) // stride + 1
    d = np.zeros((n, oh, ow, c))
    for i in range(k):
        for j in range(k):
            d += xp[:, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride] * dw[0, i, j]
    d += b
    if dw_fuse == 1:
        d = np.maximum(d, 0)
    d = d[:, ::conv_stride, ::conv_stride]
    y = d @ fw.reshape(fw.shape[0], -1).T.astype(np.float64) + cb
    return y.transpose(0, 3, 1, 2) if nchw else y


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_bias_passed_to_a_1x1_convolution(passed, stride):
    """The BlazeFace block (DEPTHWISE_CONV_2D without activation -> 1x1 CONV_2D): the
    depthwise bias moves into the convolution's (W b + c); the numbers stay within float32
    rounding of the reference, for new inputs on every run, and the model's constants are
    untouched."""
    m, (dw, b, fw, cb), keep = _dw_then_conv((1, 9, 9, 6), stride=stride)
    comp = m.compile()
    assert passed == [1]
    for _ in range(3):
        xv = RNG.standard_normal((1, 9, 9, 6)).astype(np.float32)
        y = comp.run({"x": xv})["y"]
        np.testing.assert_allclose(y, _ref(xv, dw, b, fw, cb, stride), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(b, keep[0])
    np.testing.assert_array_equal(cb, keep[1])


def test_depthwise_bias_passed_on_in_nchw_and_through_a_strided_explicit_1x1(passed):
    m, (dw, b, fw, cb), _ = _dw_then_conv((1, 6, 8, 8), conv_args=(0, 0, 0, 0, 2, 2, 0), nchw=True)
    xv = RNG.standard_normal((1, 6, 8, 8)).astype(np.float32)
    y = m.compile().run({"x": xv})["y"]
    assert passed == [1]
    np.testing.assert_allclose(y, _ref(xv, dw, b, fw, cb, 1, nchw=True, conv_stride=2), rtol=1e-5, atol=1e-5)


def test_depthwise_bias_kept_where_it_cannot_move(passed, monkeypatch):
    """Not passed on: an activation after the depthwise sum, a second reader of its output,
    a 3x3 (padded) convolution after it, explicit padding on the 1x1, or NNAPI_PY_STRICT=1;
    the results are the reference's in every case."""
    xv = RNG.standard_normal((1, 7, 7, 4)).astype(np.float32)
    m, (dw, b, fw, cb), _ = _dw_then_conv((1, 7, 7, 4), dw_fuse=1)
    np.testing.assert_allclose(m.compile().run({"x": xv})["y"], _ref(xv, dw, b, fw, cb, 1, dw_fuse=1),
                               rtol=1e-5, atol=1e-5)
    m, (dw, b, fw, cb), _ = _dw_then_conv((1, 7, 7, 4), extra_reader=True)
    np.testing.assert_allclose(m.compile().run({"x": xv})["y"], _ref(xv, dw, b, fw, cb, 1), rtol=1e-5, atol=1e-5)
    m, _, _ = _dw_then_conv((1, 7, 7, 4), fw=RNG.standard_normal((5, 3, 3, 4)).astype(np.float32),
                            conv_args=(1, 1, 1, 0))
    m.compile()
    m, _, _ = _dw_then_conv((1, 7, 7, 4), conv_args=(1, 0, 0, 0, 1, 1, 0))
    m.compile()
    monkeypatch.setenv("NNAPI_PY_STRICT", "1")
    m, (dw, b, fw, cb), _ = _dw_then_conv((1, 7, 7, 4))
    np.testing.assert_allclose(m.compile().run({"x": xv})["y"], _ref(xv, dw, b, fw, cb, 1), rtol=1e-5, atol=1e-5)
    assert passed == [0, 0, 0, 0, 0]



# ---- DEQUANTIZE -> QUANTIZE (Plan._fold_requantize) -------------------------------------------
@pytest.fixture
def requant(monkeypatch):
    """The number of DEQUANTIZE -> QUANTIZE pairs each compiled plan folded."""
    return _counts(monkeypatch, "_fold_requantize")


def _requant_model(src, dst, shape, seen=False):
    m = nn.Model()
    x = m.input("x", src, shape)
    f = m.op("DEQUANTIZE", x, outputs=[(nn.float32, shape)])
    m.output(m.op("QUANTIZE", f, outputs=[(dst, shape)]), "y")
    if seen:
        m.output(f, "f")                       # the float tensor is seen: no fold
    return m.compile()


@pytest.mark.parametrize("src,dst", [
    (nn.quant8_asymm(1 / 128, 128), nn.quant8_asymm_signed(1 / 128, 0)),        # uint8 -> int8 input
    (nn.quant8_asymm_signed(0.0235, -7), nn.quant8_asymm(0.047, 131)),         # int8 -> uint8, ties
    (nn.quant8_asymm(0.5, 3), nn.quant8_asymm_signed(0.25, 100)),               # saturating both ends
    (nn.quant8_asymm_signed(1.0, 0), nn.quant8_asymm_signed(2.0, 0))])         # every code a tie
def test_requantization_pair_folds_to_the_same_bytes(requant, src, dst):
    codes = np.arange(256, dtype=np.uint8).view(src.dtype).reshape(2, 8, 16)
    folded = _requant_model(src, dst, codes.shape).run({"x": codes})["y"]
    both = _requant_model(src, dst, codes.shape, seen=True).run({"x": codes})
    assert requant == [1, 0]
    np.testing.assert_array_equal(folded, both["y"])
    assert folded.dtype == np.dtype(dst.dtype)


def test_requantization_pair_in_a_larger_graph_and_dynamic_shapes(requant):
    """The fold inside a graph (the requantized tensor feeds another operation) and with an
    input whose shape is only known at execution (the dynamic plan builds the same kernel)."""
    src, dst = nn.quant8_asymm(0.02, 120), nn.quant8_asymm_signed(0.03, -5)
    for shape in ((4, 33), (0, 33)):
        m = nn.Model()
        x = m.input("x", src, shape)
        q = m.op("QUANTIZE", m.op("DEQUANTIZE", x, outputs=[(nn.float32, shape)]), outputs=[(dst, shape)])
        m.output(m.op("RELU", q), "y")
        v = RNG.integers(0, 256, (4, 33)).astype(np.uint8)
        y = m.compile().run({"x": v})["y"]
        deq = ((v.astype(np.int32) - 120) * np.float32(0.02)).astype(np.float32)     # DEQUANTIZE
        want = np.clip(np.clip(np.trunc(np.divide(deq, np.float32(0.03), dtype=np.float32).astype(np.float64)
                                        + np.copysign(0.5, deq)), -128 + 5, 127 + 5) - 5, -5, 127)
        np.testing.assert_array_equal(y.astype(np.int64), want.astype(np.int64))
    assert requant == [1, 1]
