"""Activations, normalizations and conversions through the C library: the corners the
conformance vectors do not reach.

RELU RELU1 RELU6 LOGISTIC TANH ELU HARD_SWISH PRELU SOFTMAX LOG_SOFTMAX (ops/activation.py)
L2_NORMALIZATION LOCAL_RESPONSE_NORMALIZATION INSTANCE_NORMALIZATION (ops/normalization.py)
QUANTIZE DEQUANTIZE CAST (ops/convert.py)

Every test builds a one-operation model and runs it through libneuralnetworks.so (cffi ABI
mode, tests/nnhelp.py).  Zero-sized tensors cannot be model inputs in NNAPI (a 0 dimension
means "unspecified"), so the zero-sized kernels are also exercised in-process at the end.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nnhelp import T, Opd, add_op_code, op_ok as ok, op_fails as fails  # noqa: E402
from qref import quantize_multiplier, mul_q  # noqa: E402

pytestmark = pytest.mark.skipif(
    __import__("nnhelp").lib is None, reason="build/lib/libneuralnetworks.so missing: run `make lib`")

BAD_DATA, OP_FAILED = 4, 5
FLOAT32, INT32 = 0, 1
F32, I32T, Q8, F16, BOOL8, Q16S, PERCH, Q16A, Q8SYMM, Q8S = 3, 4, 5, 8, 9, 7, 11, 12, 13, 14


def add_fails(op, ins, outs, *words):
    """The failure must already happen at ANeuralNetworksModel_addOperation."""
    code, msg = add_op_code(op, ins, outs)
    assert code == BAD_DATA, f"expected BAD_DATA at addOperation, got {code}: {msg}"
    assert "addOperation" in msg, msg
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"


def rha(x):
    """Round half away from zero (std::round)."""
    x = np.asarray(x, np.float64)
    return np.trunc(x + np.copysign(0.5, x))


def requant(real, scale, zp, lo, hi):
    return np.clip(rha(np.asarray(real, np.float64) / scale) + zp, lo, hi).astype(np.int64)


# ---- RELU family ------------------------------------------------------------------------------
def test_relu_family_float_nan_inf():
    x = [-np.inf, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 5.0, 7.0, np.inf, np.nan, -0.0]
    # the reference clamps with std::max(lo, x) / std::min(x, hi): NaN becomes the lower bound
    want = {"RELU": [0, 0, 0, 0, 0, .5, 1, 5, 7, np.inf, 0, 0],
            "RELU1": [-1, -1, -1, -.5, 0, .5, 1, 1, 1, 1, -1, 0],
            "RELU6": [0, 0, 0, 0, 0, .5, 1, 5, 6, 6, 0, 0]}
    for op, w in want.items():
        (r,) = ok(op, [T.f32([12], x)], [T.f32([12])])
        np.testing.assert_array_equal(r, np.array(w, np.float32))
        (r,) = ok(op, [T.f16([3, 4], x)], [T.f16([3, 4])])
        np.testing.assert_array_equal(r.ravel(), np.array(w, np.float16))


def test_relu1_quant_bounds_round_half_away():
    # scale 0.4: -1/0.4 = -2.5 and 1/0.4 = 2.5 round away from zero -> codes 125 and 131
    x = [0, 120, 124, 125, 126, 130, 131, 132, 255]
    (r,) = ok("RELU1", [T.q8([9], x, 0.4, 128)], [T.q8([9], None, 0.4, 128)])
    assert r.tolist() == [125, 125, 125, 125, 126, 130, 131, 131, 131]
    (r,) = ok("RELU6", [T.q8s([4], [-128, -3, 10, 127], 0.5, -3)], [T.q8s([4], None, 0.5, -3)])
    assert r.tolist() == [-3, -3, 9, 9]          # 6 / 0.5 + (-3) = 9
    (r,) = ok("RELU", [T.q8s([3], [-128, 0, 127], 1.0, -128)], [T.q8s([3], None, 1.0, -128)])
    assert r.tolist() == [-128, 0, 127]


@pytest.mark.strict_mode
def test_relu_validation():
    add_fails("RELU", [T.q8([2], None, 0.5, 1)], [T.q8([2], None, 0.5, 2)], "RELU", "zeroPoint")
    add_fails("RELU", [T.f32([2])], [T.f16([2])], "RELU", "output 0")
    add_fails("RELU6", [T.f32([1, 1, 1, 1, 2])], [T.f32([1, 1, 1, 1, 2])], "RELU6", "rank 5")
    add_fails("RELU1", [T.i32t([2])], [T.i32t([2])], "RELU1", "TENSOR_INT32")
    add_fails("RELU", [T.f32([2]), T.f32([2])], [T.f32([2])], "RELU", "inputs")
    add_fails("RELU", [T.f32([2, 3])], [T.f32([3, 2])], "RELU", "dimension 0")


def test_relu_dynamic_output_shape():
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    (r,) = ok("RELU", [T.f32([2, 3], x)], [T.f32([0, 0])], out_dims=[6])
    assert r.shape == (2, 3)
    np.testing.assert_array_equal(r, np.maximum(x, 0))


# ---- LOGISTIC / TANH ------------------------------------------------------------------------
def test_logistic_tanh_float_extremes():
    x = np.array([-1e4, -100, -1, 0, 1, 100, 1e4, np.inf, -np.inf], np.float32)
    (r,) = ok("LOGISTIC", [T.f32([9], x)], [T.f32([9])])
    with np.errstate(over="ignore"):
        want = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(r, want, rtol=1e-6, atol=1e-30)
    (r,) = ok("TANH", [T.f16([9], x)], [T.f16([9])])
    np.testing.assert_allclose(r.astype(np.float64), np.tanh(x.astype(np.float16).astype(np.float64)),
                               atol=1e-3)


@pytest.mark.parametrize("scale,zp", [(1 / 16, 128), (1.0, 0), (0.0001, 255), (100.0, 3)])
def test_logistic_quant_all_codes(scale, zp):
    codes = np.arange(256)
    (r,) = ok("LOGISTIC", [T.q8([256], codes, scale, zp)], [T.q8([256], None, 1 / 256, 0)])
    want = requant(1 / (1 + np.exp(-(codes - zp) * np.float64(np.float32(scale)))), 1 / 256, 0, 0, 255)
    assert np.abs(r.astype(np.int64) - want).max() == 0
    # signed: zero point -128
    sc = np.arange(-128, 128)
    (r,) = ok("LOGISTIC", [T.q8s([256], sc, scale, zp - 128)], [T.q8s([256], None, 1 / 256, -128)])
    want = requant(1 / (1 + np.exp(-(sc - zp + 128) * np.float64(np.float32(scale)))), 1 / 256, -128, -128, 127)
    assert np.abs(r.astype(np.int64) - want).max() == 0


@pytest.mark.parametrize("n", [4096, 20001, 65536])
def test_logistic_tanh_quant_large_tensors_look_up_byte_pairs(n):
    """From Q.PAIR_LOOKUP_MIN values the 8-bit lookup reads two input bytes at once
    (Q.ByteLookup): every code at every position parity, an odd count (the last value alone),
    against the reference."""
    from nnapi_py.ops import quant as Q
    assert n >= Q.PAIR_LOOKUP_MIN
    rng = np.random.default_rng(n)
    codes = rng.integers(0, 256, n)
    codes[:512] = np.concatenate([np.arange(256), np.arange(256)[::-1]])     # each code, both parities
    (r,) = ok("LOGISTIC", [T.q8([n], codes, 1 / 16, 128)], [T.q8([n], None, 1 / 256, 0)])
    want = requant(1 / (1 + np.exp(-(codes - 128) * np.float64(np.float32(1 / 16)))), 1 / 256, 0, 0, 255)
    assert np.abs(r.astype(np.int64) - want).max() == 0
    sc = codes - 128
    (r,) = ok("TANH", [T.q8s([n], sc, 0.05, 0)], [T.q8s([n], None, 1 / 128, 0)])
    want = requant(np.tanh(sc * np.float64(np.float32(0.05))), 1 / 128, 0, -128, 127)
    assert np.abs(r.astype(np.int64) - want).max() == 0


def test_tanh_quant_signed_and_unsigned():
    codes = np.arange(256)
    (r,) = ok("TANH", [T.q8([256], codes, 0.05, 100)], [T.q8([256], None, 1 / 128, 128)])
    want = requant(np.tanh((codes - 100) * np.float64(np.float32(0.05))), 1 / 128, 128, 0, 255)
    assert np.abs(r.astype(np.int64) - want).max() == 0
    sc = np.arange(-128, 128)
    (r,) = ok("TANH", [T.q8s([256], sc, 0.05, 0)], [T.q8s([256], None, 1 / 128, 0)])
    want = requant(np.tanh(sc * np.float64(np.float32(0.05))), 1 / 128, 0, -128, 127)
    assert np.abs(r.astype(np.int64) - want).max() == 0


@pytest.mark.strict_mode
def test_fixed_output_quant_validation():
    add_fails("LOGISTIC", [T.q8([2], None, 0.5, 0)], [T.q8([2], None, 1 / 128, 0)], "LOGISTIC", "scale 0.00390625")
    add_fails("LOGISTIC", [T.q8s([2], None, 0.5, 0)], [T.q8s([2], None, 1 / 256, 0)], "LOGISTIC", "-128")
    add_fails("TANH", [T.q8([2], None, 0.5, 0)], [T.q8([2], None, 1 / 128, 0)], "TANH", "zeroPoint 128")
    add_fails("TANH", [T.q8s([2], None, 0.5, 0)], [T.q8s([2], None, 1 / 256, 0)], "TANH", "scale 0.0078125")
    add_fails("SOFTMAX", [T.q8([1, 2], None, 0.5, 0), T.f32s(1.0)], [T.q8([1, 2], None, 1 / 128, 0)],
              "SOFTMAX", "scale 0.00390625")
    add_fails("L2_NORMALIZATION", [T.q8s([1, 2], None, 0.5, 0)], [T.q8s([1, 2], None, 1 / 128, 5)],
              "L2_NORMALIZATION", "zeroPoint 0")


# ---- HARD_SWISH / ELU -----------------------------------------------------------------------
def test_hard_swish_float():
    x = np.linspace(-5, 5, 41).astype(np.float32)
    (r,) = ok("HARD_SWISH", [T.f32([41], x)], [T.f32([41])])
    np.testing.assert_allclose(r, x * np.clip(x + 3, 0, 6) / 6, rtol=1e-6, atol=1e-7)
    (r,) = ok("HARD_SWISH", [T.f32([1, 1, 1, 1, 1, 41], x)], [T.f32([1, 1, 1, 1, 1, 41])])  # any rank
    assert r.shape == (1, 1, 1, 1, 1, 41)


@pytest.mark.parametrize("t,lo,hi", [(Q8, 0, 255), (Q8S, -128, 127)])
def test_hard_swish_quant_different_output_params(t, lo, hi):
    codes = np.arange(lo, hi + 1)
    si, zi, so, zo = 0.05, lo + 100, 0.02, lo + 30
    (r,) = ok("HARD_SWISH", [Opd(t, [256], codes, si, zi)], [Opd(t, [256], None, so, zo)])
    v = (codes - zi) * np.float64(np.float32(si))
    want = requant(v * np.clip(v + 3, 0, 6) / 6, np.float32(so), zo, lo, hi)
    assert np.abs(r.astype(np.int64) - want).max() == 0


def test_elu():
    x = np.array([-10, -1, -0.1, 0, 0.1, 1, 10], np.float32)
    (r,) = ok("ELU", [T.f32([7], x), T.f32s(0.5)], [T.f32([7])])
    np.testing.assert_allclose(r, np.where(x > 0, x, 0.5 * np.expm1(x)), rtol=1e-6, atol=1e-7)
    (r,) = ok("ELU", [T.f16([7], x), T.f16s(2.0)], [T.f16([7])])
    np.testing.assert_allclose(r.astype(np.float64), np.where(x > 0, x, 2 * np.expm1(x)), rtol=2e-3, atol=1e-3)
    add_fails("ELU", [T.f32([7]), T.f16s(2.0)], [T.f32([7])], "ELU", "alpha", "FLOAT32")
    add_fails("ELU", [T.q8([7], None, 1.0, 0), T.f32s(2.0)], [T.q8([7], None, 1.0, 0)], "ELU")


# ---- PRELU ----------------------------------------------------------------------------------
@pytest.mark.strict_mode
def test_prelu_broadcast_shapes():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 1, 2)).astype(np.float32)
    a = rng.standard_normal((5, 4, 3, 1)).astype(np.float32)
    (r,) = ok("PRELU", [T.f32([4, 1, 2], x), T.f32([5, 4, 3, 1], a)], [T.f32([0, 0, 0, 0])], out_dims=[120])
    assert r.shape == (5, 4, 3, 2)
    np.testing.assert_array_equal(r, np.where(x >= 0, x, x * a))
    # non-finite alpha: x >= 0 keeps x exactly (no 0 * inf), as in the reference
    (r,) = ok("PRELU", [T.f32([5], [0, 1, -1, -2, np.nan]), T.f32([5], [np.inf, np.inf, np.inf, 2, 1])],
              [T.f32([5])])
    np.testing.assert_array_equal(r, [0, 1, -np.inf, -4, np.nan])
    (r,) = ok("PRELU", [T.f32([2, 2], [[0, -1], [3, -3]]), T.f32([2], [1.5, -0.5])], [T.f32([2, 2])])
    np.testing.assert_array_equal(r, [[0, 0.5], [3, 1.5]])
    add_fails("PRELU", [T.f32([4, 2]), T.f32([3])], [T.f32([4, 2])], "PRELU", "broadcast")
    add_fails("PRELU", [T.f32([4, 2]), T.f16([2])], [T.f32([4, 2])], "PRELU", "alpha")
    add_fails("PRELU", [T.f32([4, 2]), T.f32([2])], [T.f32([4, 3])], "PRELU", "output 0")


def _prelu_ref(x, a, si, zi, sa, za, so, zo, lo, hi):
    """The reference (qref's scalar transcription): two fixed-point multipliers, round half away."""
    qp, sp = quantize_multiplier(float(np.float32(si)) / float(np.float32(so)))
    qn, sn = quantize_multiplier(float(np.float32(si)) * float(np.float32(sa)) / float(np.float32(so)))
    out = []
    for xv, av in zip(x, a):
        v = int(xv) - zi
        r = mul_q(v, qp, sp) if v >= 0 else mul_q(v * (int(av) - za), qn, sn)
        out.append(min(max(r + zo, lo), hi))
    return out


@pytest.mark.parametrize("t,lo,hi", [(Q8, 0, 255), (Q8S, -128, 127)])
def test_prelu_quant_bit_exact(t, lo, hi):
    rng = np.random.default_rng(7)
    x = rng.integers(lo, hi + 1, 64)
    a = rng.integers(lo, hi + 1, 64)
    for si, zi, sa, za, so, zo in [(0.5, lo + 120, 0.01, lo + 50, 0.25, lo + 128),
                                   (0.02, lo, 0.3, hi, 1.5, hi - 3),
                                   (3.0, lo + 7, 0.001, lo + 200, 0.01, lo + 1)]:
        (r,) = ok("PRELU", [Opd(t, [64], x, si, zi), Opd(t, [64], a, sa, za)], [Opd(t, [64], None, so, zo)])
        assert r.tolist() == _prelu_ref(x, a, si, zi, sa, za, so, zo, lo, hi)


# ---- SOFTMAX / LOG_SOFTMAX ------------------------------------------------------------------
def _softmax(x, beta, axis):
    x = np.asarray(x, np.float64)
    e = np.exp((x - x.max(axis=axis, keepdims=True)) * beta)
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_softmax_float_axes(axis):
    rng = np.random.default_rng(axis + 10)
    x = (rng.standard_normal((3, 4, 5)) * 10).astype(np.float32)
    (r,) = ok("SOFTMAX", [T.f32([3, 4, 5], x), T.f32s(0.7), T.i32(axis)], [T.f32([3, 4, 5])])
    np.testing.assert_allclose(r, _softmax(x, 0.7, axis), rtol=1e-5, atol=1e-7)


def test_softmax_float_large_values_and_default_axis():
    x = np.array([[1e30, 1e30, -1e30], [3e38, -3e38, 0]], np.float32)
    (r,) = ok("SOFTMAX", [T.f32([2, 3], x), T.f32s(1.0)], [T.f32([2, 3])])
    np.testing.assert_allclose(r, [[0.5, 0.5, 0], [1, 0, 0]])
    # optional axis omitted through NO_VALUE: default -1
    (r,) = ok("SOFTMAX", [T.f32([2, 3], x), T.f32s(1.0), Opd(INT32, (), None, const=True)], [T.f32([2, 3])])
    np.testing.assert_allclose(r, [[0.5, 0.5, 0], [1, 0, 0]])


def test_softmax_float16_tiny_beta():
    x = np.array([1, 2, 3, 4], np.float16)
    (r,) = ok("SOFTMAX", [T.f16([1, 4], x), T.f16s(1e-6)], [T.f16([1, 4])])
    np.testing.assert_allclose(r.astype(np.float64), [[0.25] * 4], atol=1e-3)


@pytest.mark.parametrize("t,zo,hi", [(Q8, 0, 255), (Q8S, -128, 127)])
def test_softmax_quant(t, zo, hi):
    # a single element per row: p = 1 -> 256 saturates to the largest code
    (r,) = ok("SOFTMAX", [Opd(t, [3, 1], [0, 50, 100], 0.1, 0 if t == Q8 else -128), T.f32s(1.0)],
              [Opd(t, [3, 1], None, 1 / 256, zo)])
    assert r.ravel().tolist() == [hi] * 3
    # equal entries: exactly 256 / n
    (r,) = ok("SOFTMAX", [Opd(t, [2, 4], [9] * 8, 0.1, 0), T.f32s(1.0)], [Opd(t, [2, 4], None, 1 / 256, zo)])
    assert r.ravel().tolist() == [64 + zo] * 8
    # random rows along axis 0, several betas: the float64 formula, round half away
    rng = np.random.default_rng(3)
    lo = 0 if t == Q8 else -128
    x = rng.integers(lo, lo + 256, (6, 5))
    for beta, scale in ((1.0, 0.05), (0.3, 1.0), (1e-5, 0.5), (20.0, 0.25)):
        (r,) = ok("SOFTMAX", [Opd(t, [6, 5], x, scale, lo + 10), T.f32s(beta), T.i32(0)],
                  [Opd(t, [6, 5], None, 1 / 256, zo)])
        want = requant(_softmax(x * np.float64(np.float32(scale)), float(np.float32(beta)), 0), 1 / 256, zo, lo, hi)
        assert np.abs(r.astype(np.int64) - want).max() <= 1


@pytest.mark.strict_mode
def test_softmax_validation():
    add_fails("SOFTMAX", [T.f32([2, 3]), T.f16s(1.0)], [T.f32([2, 3])], "SOFTMAX", "beta", "FLOAT32")
    add_fails("SOFTMAX", [T.f16([2, 3]), T.f32s(1.0)], [T.f16([2, 3])], "SOFTMAX", "beta", "FLOAT16")
    add_fails("SOFTMAX", [T.f32([1, 1, 1, 1, 3]), T.f32s(1.0)], [T.f32([1, 1, 1, 1, 3])], "SOFTMAX", "rank 5")
    # constant values are known at Model_finish: value rules fail there
    fails("SOFTMAX", [T.f32([2, 3]), T.f32s(1.0), T.i32(2)], [T.f32([2, 3])], "SOFTMAX", "axis", "[-2, 2)",
          "Model_finish")
    add_fails("SOFTMAX", [T.f32([2, 3]), T.f32s(1.0), T.f32s(1.0)], [T.f32([2, 3])], "SOFTMAX", "axis", "INT32")
    add_fails("SOFTMAX", [T.f32([2, 3]), T.f32s(1.0), T.i32(0), T.i32(0)], [T.f32([2, 3])], "SOFTMAX", "inputs")
    add_fails("SOFTMAX", [T.f32([2, 3])], [T.f32([2, 3])], "SOFTMAX", "inputs")
    # beta <= 0 is a value rule: a constant is rejected at Model_finish
    fails("SOFTMAX", [T.f32([2, 3]), T.f32s(0.0)], [T.f32([2, 3])], "SOFTMAX", "beta", "positive", "Model_finish")
    fails("SOFTMAX", [T.f32([2, 3]), T.f32s(-1.0)], [T.f32([2, 3])], "positive")


def test_softmax_runtime_scalars():
    """beta and axis given as model inputs: checked when the values arrive (OP_FAILED)."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (r,) = ok("SOFTMAX", [T.f32([2, 3], x), Opd(FLOAT32, (), 2.0, const=False), Opd(INT32, (), 0, const=False)],
              [T.f32([2, 3])])
    np.testing.assert_allclose(r, _softmax(x, 2.0, 0), rtol=1e-6)
    fails("SOFTMAX", [T.f32([2, 3], x), Opd(FLOAT32, (), -2.0, const=False)], [T.f32([2, 3])],
          "SOFTMAX", "positive", code=OP_FAILED)
    fails("SOFTMAX", [T.f32([2, 3], x), T.f32s(1.0), Opd(INT32, (), 5, const=False)], [T.f32([2, 3])],
          "SOFTMAX", "axis 5", code=OP_FAILED)


@pytest.mark.strict_mode
def test_log_softmax():
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 3, 4)) * 5).astype(np.float32)
    for axis in (-1, 0, 1):
        (r,) = ok("LOG_SOFTMAX", [T.f32([2, 3, 4], x), T.f32s(1.5), T.i32(axis)], [T.f32([2, 3, 4])])
        np.testing.assert_allclose(r, np.log(_softmax(x, 1.5, axis)), rtol=1e-5, atol=1e-5)
    (r,) = ok("LOG_SOFTMAX", [T.f32([1, 1, 1, 1, 1, 3], [1, 2, 3]), T.f32s(1.0), T.i32(5)],
              [T.f32([1, 1, 1, 1, 1, 3])])
    np.testing.assert_allclose(r.ravel(), np.log(_softmax([1, 2, 3], 1, 0)), rtol=1e-6)
    add_fails("LOG_SOFTMAX", [T.f32([2, 3]), T.f32s(1.0)], [T.f32([2, 3])], "LOG_SOFTMAX", "inputs")
    add_fails("LOG_SOFTMAX", [T.q8([2, 3], None, 1.0, 0), T.f32s(1.0), T.i32(0)], [T.q8([2, 3], None, 1.0, 0)],
              "LOG_SOFTMAX", "TENSOR_QUANT8_ASYMM")
    fails("LOG_SOFTMAX", [T.f32([2, 3]), T.f32s(1.0), T.i32(-3)], [T.f32([2, 3])],
          "LOG_SOFTMAX", "axis", "Model_finish")


# ---- L2 / LRN / INSTANCE_NORMALIZATION -------------------------------------------------------
def test_l2_normalization_float_and_zeros():
    x = np.array([[3, 4, 0], [0, 0, 0], [1e-8, 0, 0]], np.float32)
    (r,) = ok("L2_NORMALIZATION", [T.f32([3, 3], x)], [T.f32([3, 3])])
    # all-zero rows give zero; tiny rows are divided by max(norm, 1e-6)
    np.testing.assert_allclose(r, [[0.6, 0.8, 0], [0, 0, 0], [0.01, 0, 0]], rtol=1e-6)
    (r,) = ok("L2_NORMALIZATION", [T.f32([3, 3], x), T.i32(0)], [T.f32([3, 3])])
    np.testing.assert_allclose(r[:, 0], x[:, 0] / np.linalg.norm(x[:, 0]), rtol=1e-6)


def test_l2_normalization_quant():
    x = np.array([[128, 128, 128], [131, 132, 128], [0, 255, 128], [129, 128, 128]])
    (r,) = ok("L2_NORMALIZATION", [T.q8([4, 3], x, 0.3, 128)], [T.q8([4, 3], None, 1 / 128, 128)])
    v = x - 128.0
    n = np.linalg.norm(v, axis=1, keepdims=True)
    want = requant(np.divide(v, n, out=np.zeros_like(v), where=n > 0), 1 / 128, 128, 0, 255)
    assert r.tolist() == want.tolist()
    assert r[0].tolist() == [128, 128, 128]         # zeros: logical zero
    (r,) = ok("L2_NORMALIZATION", [T.q8s([2, 2], [[0, 0], [-3, 4]], 0.3, 0)], [T.q8s([2, 2], None, 1 / 128, 0)])
    assert r.tolist() == [[0, 0], [-77, 102]]       # -0.6*128 = -76.8, 0.8*128 = 102.4


@pytest.mark.strict_mode
def test_l2_lrn_validation():
    fails("L2_NORMALIZATION", [T.f32([2, 3]), T.i32(3)], [T.f32([2, 3])], "L2_NORMALIZATION", "axis", "Model_finish")
    add_fails("L2_NORMALIZATION", [T.i32t([2, 3])], [T.i32t([2, 3])], "L2_NORMALIZATION")
    lrn = lambda *extra: [T.f32([1, 1, 1, 4]), T.i32(1), T.f32s(1.0), T.f32s(1.0), T.f32s(0.5)] + list(extra)
    fails("LOCAL_RESPONSE_NORMALIZATION", lrn(T.i32(4)), [T.f32([1, 1, 1, 4])], "axis", "Model_finish")
    add_fails("LOCAL_RESPONSE_NORMALIZATION", [T.f32([1, 1, 1, 4]), T.i32(1), T.f16s(1.0), T.f32s(1.0),
                                               T.f32s(0.5)], [T.f32([1, 1, 1, 4])], "bias", "FLOAT32")
    add_fails("LOCAL_RESPONSE_NORMALIZATION", [T.q8([1, 4], None, 1.0, 0), T.i32(1), T.f32s(1.0), T.f32s(1.0),
                                               T.f32s(0.5)], [T.q8([1, 4], None, 1.0, 0)], "TENSOR_QUANT8_ASYMM")
    fails("LOCAL_RESPONSE_NORMALIZATION", [T.f32([1, 4], [1, 2, 3, 4]), T.i32(-1), T.f32s(1.0), T.f32s(1.0),
                                           T.f32s(0.5)], [T.f32([1, 4])], "radius", ">= 0")
    fails("LOCAL_RESPONSE_NORMALIZATION", [T.f32([1, 4], [1, 2, 3, 4]), T.i32(1), T.f32s(0.0), T.f32s(1.0),
                                           T.f32s(0.5)], [T.f32([1, 4])], "bias", "zero")


def _lrn(x, r, bias, alpha, beta, axis):
    x = np.moveaxis(np.asarray(x, np.float64), axis, -1)
    n = x.shape[-1]
    out = np.empty_like(x)
    for i in range(n):
        s = np.square(x[..., max(0, i - r):min(n, i + r + 1)]).sum(-1)
        out[..., i] = x[..., i] * (bias + alpha * s) ** -beta
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("radius", [0, 1, 3, 20, 40])
def test_lrn_radii_and_axes(radius):
    rng = np.random.default_rng(radius)
    x = rng.standard_normal((2, 3, 30)).astype(np.float32)
    for axis in (-1, 1):
        (r,) = ok("LOCAL_RESPONSE_NORMALIZATION", [T.f32([2, 3, 30], x), T.i32(radius), T.f32s(1.5),
                                                   T.f32s(0.3), T.f32s(0.75), T.i32(axis)], [T.f32([2, 3, 30])])
        np.testing.assert_allclose(r, _lrn(x, radius, 1.5, 0.3, 0.75, axis), rtol=2e-6, atol=1e-7)


def test_instance_normalization_layouts():
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((2, 3, 4, 5)) * 3 + 1).astype(np.float32)
    m = x.mean(axis=(1, 2), keepdims=True, dtype=np.float64)
    v = x.var(axis=(1, 2), keepdims=True, dtype=np.float64)
    want = (x - m) * 2.0 / np.sqrt(v + 1e-3) + 0.5
    args = [T.f32s(2.0), T.f32s(0.5), T.f32s(1e-3)]
    (r,) = ok("INSTANCE_NORMALIZATION", [T.f32([2, 3, 4, 5], x)] + args + [T.b(False)], [T.f32([2, 3, 4, 5])])
    np.testing.assert_allclose(r, want, rtol=1e-5, atol=1e-5)
    xc = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    (r,) = ok("INSTANCE_NORMALIZATION", [T.f32([2, 5, 3, 4], xc)] + args + [T.b(True)], [T.f32([2, 5, 3, 4])])
    np.testing.assert_allclose(r, want.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)
    # constant planes: variance 0 -> beta
    (r,) = ok("INSTANCE_NORMALIZATION", [T.f16([1, 2, 2, 1], [7, 7, 7, 7]), T.f16s(2.0), T.f16s(0.5),
                                         T.f16s(1e-3), T.b(False)], [T.f16([1, 2, 2, 1])])
    assert r.ravel().tolist() == [0.5] * 4
    add_fails("INSTANCE_NORMALIZATION", [T.f32([2, 3, 4])] + args + [T.b(False)], [T.f32([2, 3, 4])], "rank 3")
    add_fails("INSTANCE_NORMALIZATION", [T.f32([2, 3, 4, 5])] + args + [T.i32(0)], [T.f32([2, 3, 4, 5])],
              "layout", "BOOL")
    add_fails("INSTANCE_NORMALIZATION", [T.f32([2, 3, 4, 5])] + args, [T.f32([2, 3, 4, 5])], "inputs")


# ---- QUANTIZE / DEQUANTIZE / CAST ------------------------------------------------------------
def test_quantize_rounding_and_saturation():
    x = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1000, -1000, np.inf, -np.inf, np.nan, 0.49999997]
    (r,) = ok("QUANTIZE", [T.f32([12], x)], [T.q8([12], None, 1.0, 10)])
    # std::round is half away from zero; NaN -> largest code (std::min(255, NaN) = 255)
    assert r.tolist() == [7, 8, 9, 11, 12, 13, 255, 0, 255, 0, 255, 10]
    (r,) = ok("QUANTIZE", [T.f16([12], x)], [T.q8s([12], None, 0.5, -1)])
    assert r.tolist() == [-6, -4, -2, 0, 2, 4, 127, -128, 127, -128, 127, 0]
    add_fails("QUANTIZE", [T.f32([2])], [T.i32t([2])], "QUANTIZE", "output 0")
    add_fails("QUANTIZE", [T.q8([2], None, 1.0, 0)], [T.q8([2], None, 1.0, 0)], "QUANTIZE", "input 0")


@pytest.mark.parametrize("out", ["f32", "f16"])
def test_dequantize_every_code(out):
    """Every 8-bit code of each type: (q - zp) * scale in float32 (the table the kernel
    gathers from), rounded once to float16 for a float16 output, in one and in many values."""
    mk = T.f32 if out == "f32" else T.f16
    dt = np.float32 if out == "f32" else np.float16
    for opd, codes, scale, zp in (
            (lambda d, x: T.q8(d, x, 0.037, 131), np.arange(256), 0.037, 131),
            (lambda d, x: T.q8s(d, x, 1.5e-3, -7), np.arange(-128, 128), 1.5e-3, -7),
            (lambda d, x: Opd(Q8SYMM, d, x, 0.3, 0), np.arange(-128, 128), 0.3, 0)):
        want = ((codes - zp).astype(np.float32) * np.float32(scale)).astype(dt)
        (r,) = ok("DEQUANTIZE", [opd([16, 16], codes.reshape(16, 16))], [mk([16, 16])])
        np.testing.assert_array_equal(r.reshape(-1), want)
        (r,) = ok("DEQUANTIZE", [opd([1], codes[:1])], [mk([1])])
        np.testing.assert_array_equal(r, want[:1])


def test_dequantize_types():
    (r,) = ok("DEQUANTIZE", [T.q8([4], [0, 1, 128, 255], 0.5, 128)], [T.f32([4])])
    assert r.tolist() == [-64, -63.5, 0, 63.5]
    (r,) = ok("DEQUANTIZE", [T.q8s([3], [-128, 0, 127], 0.25, -1)], [T.f16([3])])
    assert r.tolist() == [-31.75, 0.25, 32.0]
    (r,) = ok("DEQUANTIZE", [Opd(Q8SYMM, [3], [-128, 0, 127], 2.0, 0)], [T.f32([3])])
    assert r.tolist() == [-256, 0, 254]
    x = np.array([[1, -2, 3], [4, 5, -6]], np.int8)
    (r,) = ok("DEQUANTIZE", [Opd(PERCH, [2, 3], x, channel=(1, [0.5, 2.0, 0.25]))], [T.f32([2, 3])])
    np.testing.assert_array_equal(r, x * np.array([0.5, 2.0, 0.25], np.float32))
    (r,) = ok("DEQUANTIZE", [Opd(PERCH, [2, 3], x, channel=(0, [0.5, 3.0]))], [T.f16([2, 3])])
    np.testing.assert_array_equal(r, (x * np.array([[0.5], [3.0]])).astype(np.float16))
    add_fails("DEQUANTIZE", [T.q8([2], None, 1.0, 0)], [T.i32t([2])], "DEQUANTIZE", "output 0")
    add_fails("DEQUANTIZE", [T.f32([2])], [T.f32([2])], "DEQUANTIZE", "input 0")
    add_fails("DEQUANTIZE", [T.q8([1, 1, 1, 1, 2], None, 1.0, 0)], [T.f32([1, 1, 1, 1, 2])], "rank 5")


def test_cast_saturation_and_truncation():
    x = [-300.7, -1.5, -0.5, 0.0, 0.9, 2.7, 254.9, 255.5, 1e10, -1e10, np.nan, np.inf]
    (r,) = ok("CAST", [T.f32([12], x)], [T.q8([12], None, 7.0, 3)])      # scale/zeroPoint ignored
    assert r.tolist() == [0, 0, 0, 0, 0, 2, 254, 255, 255, 0, 0, 255]
    (r,) = ok("CAST", [T.f32([12], x)], [T.i32t([12])])
    assert r.tolist() == [-300, -1, 0, 0, 0, 2, 254, 255, 2 ** 31 - 1, -2 ** 31, 0, 2 ** 31 - 1]
    (r,) = ok("CAST", [T.f16([4], [-2.5, 3.75, 300, -1])], [T.q8([4], None, 1.0, 0)])
    assert r.tolist() == [0, 3, 255, 0]
    (r,) = ok("CAST", [T.i32t([4], [-5, 256, 100000, 2 ** 31 - 1])], [T.q8([4], None, 1.0, 0)])
    assert r.tolist() == [0, 255, 255, 255]
    (r,) = ok("CAST", [T.i32t([3], [70000, 2049, -3])], [T.f16([3])])
    assert r.tolist() == [np.inf, 2048, -3]
    (r,) = ok("CAST", [T.q8([3], [0, 7, 255], 0.1, 9)], [T.f32([3])])
    assert r.tolist() == [0, 7, 255]
    (r,) = ok("CAST", [T.i32t([2], [16777217, -7])], [T.f32([2])])
    assert r.tolist() == [16777216, -7]


@pytest.mark.strict_mode
def test_cast_type_pairs():
    for t in (BOOL8, Q16A, Q16S, Q8S, Q8SYMM):
        scale = 0.0 if t == BOOL8 else 0.5
        data = [1, 0, 1] if t == BOOL8 else [1, 2, 3]
        (r,) = ok("CAST", [Opd(t, [3], data, scale)], [Opd(t, [3], None, scale * 2)])
        assert r.tolist() == data
    for a, b in ((Q8S, F32), (F32, Q8S), (BOOL8, I32T), (Q16A, Q16S), (F32, BOOL8)):
        sa = 0.5 if a in (Q8S, Q16A, Q16S) else 0.0
        sb = 0.5 if b in (Q8S, Q16A, Q16S) else 0.0
        add_fails("CAST", [Opd(a, [3], None, sa)], [Opd(b, [3], None, sb)], "CAST", "not supported")
    add_fails("CAST", [T.f32([2, 3])], [T.f32([6])], "CAST", "rank 1")


# ---- zero-sized tensors (in-process: they only arise as outputs of other operations) ---------
def test_zero_sized_kernels():
    from nnapi_py import constants as C
    from nnapi_py.ops import registry  # noqa: F401  (registers the operations)
    from nnapi_py.ops.base import Info, OPS

    def S(t, v):
        return Info(t, (), value=np.array(v, C.DTYPES[t])[()])
    shape = (0, 2, 2, 1)
    cases = [
        ("RELU", [Info(F32, shape)], Info(F32, shape)),
        ("RELU6", [Info(Q8, shape, 0.5, 3)], Info(Q8, shape, 0.5, 3)),
        ("LOGISTIC", [Info(Q8S, shape, 0.5, 3)], Info(Q8S, shape, 1 / 256, -128)),
        ("TANH", [Info(F16, shape)], Info(F16, shape)),
        ("HARD_SWISH", [Info(F32, shape)], Info(F32, shape)),
        ("ELU", [Info(F32, shape), S(FLOAT32, 1.0)], Info(F32, shape)),
        ("SOFTMAX", [Info(F32, shape), S(FLOAT32, 1.0)], Info(F32, shape)),
        ("SOFTMAX", [Info(Q8, shape, 0.5, 0), S(FLOAT32, 1.0), S(INT32, 0)], Info(Q8, shape, 1 / 256, 0)),
        ("L2_NORMALIZATION", [Info(Q8, shape, 0.5, 0)], Info(Q8, shape, 1 / 128, 128)),
        ("L2_NORMALIZATION", [Info(F32, shape)], Info(F32, shape)),
        ("QUANTIZE", [Info(F32, shape)], Info(Q8, shape, 0.5, 1)),
        ("DEQUANTIZE", [Info(Q8, shape, 0.5, 1)], Info(F16, shape)),
        ("PRELU", [Info(F32, shape), Info(F32, (1,))], Info(F32, shape)),
        ("PRELU", [Info(Q8, shape, 0.5, 1), Info(Q8, (1,), 0.5, 1)], Info(Q8, shape, 0.5, 1)),
        ("CAST", [Info(F32, shape)], Info(Q8, shape, 1.0, 0)),
    ]
    for name, ins, out in cases:
        op = OPS[C.OPERATION_CODES[name]]
        assert op.allow_zero_sized or name in ("PRELU", "CAST"), name   # not documented, still works
        (dims,) = op.infer(ins)
        assert tuple(dims) == shape, name
        k = op.build(ins, [out.with_dims(dims)])
        o = np.empty(shape, out.dtype)
        arrays = [np.empty(i.dims, i.dtype) if i.dims else i.value for i in ins]
        k(arrays, [o])
        assert o.shape == shape
    # a zero-sized dimension that is not the softmax axis, and an empty axis itself
    op = OPS[C.OPERATION_CODES["SOFTMAX"]]
    for shp, axis in (((2, 0, 3), -1), ((2, 3, 0), -1)):
        ins = [Info(F32, shp), S(FLOAT32, 1.0), S(INT32, axis)]
        k = op.build(ins, [Info(F32, shp)])
        k([np.empty(shp, np.float32), ins[1].value, ins[2].value], [np.empty(shp, np.float32)])


@pytest.mark.parametrize("xs,as_", [((1, 5, 7, 16), (1, 1, 16)), ((2, 3, 4), (4,)), ((3, 300), (1, 300)),
                                    ((2, 3, 4, 5), (3, 1, 1)), ((4, 6), (1,)), ((1, 5, 7, 16), (7, 16)),
                                    ((1, 64, 64, 16), (1, 1, 16))])       # rows tiled to 8192
@pytest.mark.parametrize("kind", ["below_1", "above_1", "negative", "mixed", "with_zero",
                                  "mostly_below_1", "mostly_above_1"])
def test_prelu_constant_alpha_matches_definition_with_inf_nan(xs, as_, kind):
    """The row-tiled max/min kernel (constant alpha all <= 1 or all >= 1, or per channel
    mostly on one side with the other channels fixed up) and the general one all give
    x >= 0 ? x : x * alpha, also for +-inf and NaN inputs."""
    import nnapi_py as nn
    rng = np.random.default_rng(abs(hash((xs, as_, kind))) % 2**32)
    lo, hi = {"below_1": (0.05, 1), "above_1": (1, 3), "negative": (-2, -0.1), "mixed": (-2, 3),
              "with_zero": (0, 0.5)}.get(kind, (0, 1))
    a = rng.uniform(lo, hi, as_).astype(np.float32)
    if kind == "with_zero":
        a.flat[0] = 0
    if kind in ("mostly_below_1", "mostly_above_1"):       # one channel in eight on the other side
        a = rng.uniform(-0.9, 0.95, as_).astype(np.float32) if kind == "mostly_below_1" else \
            rng.uniform(1.05, 2.5, as_).astype(np.float32)
        a.reshape(-1)[::8] = 1.3 if kind == "mostly_below_1" else -0.4
    x = (rng.standard_normal(xs) * 3).astype(np.float32)
    x.flat[:3] = [np.inf, -np.inf, np.nan]
    m = nn.Model()
    xi = m.input("x", nn.float32, xs)
    m.output(m.op("PRELU", xi, a), "y")
    y = m.compile().run({"x": x})["y"]
    with np.errstate(all="ignore"):
        ref = np.where(x >= 0, x, x * a)
    assert np.array_equal(y, ref, equal_nan=True)


def test_prelu_mixed_alpha_rows_kernel_keeps_work_array_between_runs():
    """Constant alpha with values both below and above 1 (the four-pass kernel): several runs
    of one compilation give the definition's numbers every time."""
    import nnapi_py as nn
    rng = np.random.default_rng(7)
    a = rng.uniform(-1.5, 3.0, (1, 1, 32)).astype(np.float32)
    m = nn.Model()
    xi = m.input("x", nn.float32, (1, 9, 11, 32))
    m.output(m.op("PRELU", xi, a), "y")
    c = m.compile()
    for _ in range(3):
        x = (rng.standard_normal((1, 9, 11, 32)) * 3).astype(np.float32)
        assert np.array_equal(c.run({"x": x})["y"], np.where(x >= 0, x, x * a))


def test_quantize_matches_round_half_away_on_ties_and_extremes():
    """QUANTIZE rounds the float32 quotient x / scale half away from zero (std::round) with a
    float64 add-and-truncate: the same codes as quant.round_half_away for ties, the values
    just beside them, and float32 magnitudes up to the largest finite one."""
    from nnapi_py.ops.quant import round_half_away
    rng = np.random.default_rng(7)
    ties = np.arange(-300, 300, dtype=np.float32) + np.float32(0.5)
    near = np.concatenate([np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))])
    big = (rng.standard_normal(200) * 10.0 ** rng.integers(0, 38, 200)).astype(np.float32)
    x = np.concatenate([ties, near, big, np.float32([3.4028235e38, -3.4028235e38, 0.49999997, -0.49999997])])
    for scale, zp, t, lo, hi in ((1.0, 3, T.q8, 0, 255), (0.75, -5, T.q8s, -128, 127)):
        (r,) = ok("QUANTIZE", [T.f32([x.size], x)], [t([x.size], None, scale, zp)])
        with np.errstate(all="ignore"):         # max float / 0.75 is inf, as in the kernel
            want = np.clip(round_half_away(np.divide(x, np.float32(scale), dtype=np.float32)) + zp, lo, hi)
        np.testing.assert_array_equal(r, want)


def test_quantize_one_value_takes_the_same_rounding():
    """A one-value QUANTIZE (a streaming model's step input) runs in scalar arithmetic: the
    same codes as the vector path for ties, NaN, infinities, float16 inputs and saturation."""
    xs = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1000, -1000, np.inf, -np.inf, np.nan, 0.49999997,
          -0.49999997, 3.4028235e38, 1e-45, 126.5, -128.5]
    for t, dt, scale, zp in ((T.q8, np.float32, 1.0, 10), (T.q8s, np.float16, 0.5, -1),
                             (T.q8s, np.float32, 0.75, 3)):
        mk = T.f32 if dt == np.float32 else T.f16
        with np.errstate(all="ignore"):                 # 3.4e38 is inf in float16
            x = np.array(xs, dt)
        (want,) = ok("QUANTIZE", [mk([x.size], x)], [t([x.size], None, scale, zp)])
        for v, w in zip(x, want):
            (got,) = ok("QUANTIZE", [mk([1], np.array([v], dt))], [t([1], None, scale, zp)])
            assert got.tolist() == [w], (v, got, w)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_clamp_into_small_and_large_tensors_agree(dt, monkeypatch):
    """quant.clamp_into takes np.fmax / np.fmin on small tensors (_FMAX_UPTO, _FMAX_FMIN_UPTO)
    and the clip ufunc plus a NaN fix-up on large ones: the same values either way (NaN ->
    the lower bound, infinities clamped), at sizes on both sides of each limit."""
    from nnapi_py.ops import quant as Q
    from nnapi_py.ops.quant import clamp        # where the limits are read
    r = np.random.default_rng(5)
    for n in (1, 7, clamp._FMAX_FMIN_UPTO, clamp._FMAX_FMIN_UPTO + 1, clamp._FMAX_UPTO, clamp._FMAX_UPTO + 1, 20000):
        x = (r.standard_normal(n) * 8).astype(dt)
        x[r.integers(0, n, max(1, n // 50))] = np.nan
        x[r.integers(0, n, max(1, n // 50))] = np.inf
        x[r.integers(0, n, max(1, n // 50))] = -np.inf
        for lo, hi in ((0.0, None), (0.0, 6.0), (-1.0, 1.0)):
            got = np.empty_like(x)
            Q.clamp_into(x, lo, hi, got)
            want = np.where(np.isnan(x), lo, np.minimum(np.maximum(x, lo), np.inf if hi is None else hi))
            np.testing.assert_array_equal(got, want.astype(dt))
            monkeypatch.setattr(clamp, "_FMAX_UPTO", -1)      # the clip path on the same data
            monkeypatch.setattr(clamp, "_FMAX_FMIN_UPTO", -1)
            other = np.empty_like(x)
            Q.clamp_into(x, lo, hi, other)
            monkeypatch.undo()
            np.testing.assert_array_equal(other, got)
