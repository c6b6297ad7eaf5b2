"""Compile-time folding of a standalone RELU / RELU1 / RELU6 into the operation producing its
input (nnapi_py/plan.py, Plan._fold_activations): the same numbers as running both, and no
folding where it would change what a client sees."""
import numpy as np
import pytest

import nnapi_py as nn
from nnapi_py import plan as P

RNG = np.random.default_rng(11)
ACT = {"RELU": lambda v: np.maximum(v, 0), "RELU1": lambda v: np.clip(v, -1, 1),
       "RELU6": lambda v: np.clip(v, 0, 6)}


@pytest.fixture
def folds(monkeypatch):
    """The number of activations each compiled plan folded, in compilation order."""
    seen = []
    orig = P.Plan._fold_activations

    def spy(self, *args):
        n = orig(self, *args)
        seen.append(n)
        return n
    monkeypatch.setattr(P.Plan, "_fold_activations", spy)
    return seen


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
