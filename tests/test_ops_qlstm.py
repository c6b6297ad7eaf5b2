"""Quantized LSTMs through the C library: QUANTIZED_16BIT_LSTM and QUANTIZED_LSTM, plus the
16-bit fixed-point functions they share (ops/quant.py).

The conformance vectors pin the arithmetic bit for bit; these tests cover what they do not:
the fixed-point sigmoid/tanh over their whole input range, batch rows being independent
(batch 1 vs n), zero state, saturation, omitted optional inputs, and validation reasons."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nnhelp  # noqa: E402
from nnhelp import Opd, T, lib, run_op, expect_fail  # noqa: E402
from nnapi_py.ops import quant as Q  # noqa: E402

pytestmark = pytest.mark.skipif(lib is None, reason="library not built")
BAD_DATA = 4
rng = np.random.default_rng(3)


def ok(res):
    code, out = res
    assert code == 0, out
    return out


# ---- fixed point ---------------------------------------------------------------------------------
@pytest.mark.parametrize("int_bits", [0, 3, 4, 5])
def test_fixed_point_sigmoid_and_tanh_track_the_real_functions(int_bits):
    raw = np.arange(-32768, 32768, 7)
    real = raw / 2.0 ** (15 - int_bits)
    sig = Q.logistic16(raw, int_bits) / 32768
    tan = Q.tanh16(raw, int_bits) / 32768
    assert np.abs(sig - 1 / (1 + np.exp(-real))).max() < 5e-4
    assert np.abs(tan - np.tanh(real)).max() < 5e-4
    assert Q.logistic16(np.array([0]), int_bits)[0] == 16384 and Q.tanh16(np.array([0]), int_bits)[0] == 0


def test_saturating_helpers():
    assert Q.srdhm16(np.array([-32768]), np.array([-32768]))[0] == 32767
    assert Q.rescale16(np.array([20000]), 1)[0] == 32767 and Q.rescale16(np.array([-20000]), 1)[0] == -32768
    assert Q.wrap16(np.array([32767 + 1]))[0] == -32768


# ---- QUANTIZED_16BIT_LSTM ------------------------------------------------------------------------
def q16_ops(x, h, c, w, b):
    """x [B, I] uint8, h [B, O] uint8, c [B, O] int16; w: 8 uint8 matrices; b: 4 int32 vectors."""
    bsz, n_in = x.shape
    u = h.shape[1]
    ws = 0.0075
    ins = [T.q8([bsz, n_in], x, 1 / 128, 128)]
    ins += [T.q8([u, n_in if k < 4 else u], w[k], ws, 120, const=True) for k in range(8)]
    ins += [Opd("TENSOR_INT32", [u], b[k], ws / 128, 0, const=True) for k in range(4)]
    ins += [Opd("TENSOR_QUANT16_SYMM", [bsz, u], c, 1 / 2048, 0), T.q8([bsz, u], h, 1 / 128, 128)]
    outs = [Opd("TENSOR_QUANT16_SYMM", [bsz, u], None, 1 / 2048, 0), T.q8([bsz, u], None, 1 / 128, 128)]
    return ins, outs


def q16_case(bsz=3, n_in=3, u=4):
    w = [rng.integers(0, 256, (u, n_in if k < 4 else u)).astype(np.uint8) for k in range(8)]
    b = [rng.integers(-20000, 20000, u).astype(np.int32) for _ in range(4)]
    x = rng.integers(0, 256, (bsz, n_in)).astype(np.uint8)
    h = rng.integers(0, 256, (bsz, u)).astype(np.uint8)
    c = rng.integers(-8000, 8000, (bsz, u)).astype(np.int16)
    return x, h, c, w, b


def test_q16_lstm_batch_rows_are_independent():
    x, h, c, w, b = q16_case()
    full = ok(run_op("QUANTIZED_16BIT_LSTM", *q16_ops(x, h, c, w, b)))
    for r in range(3):
        one = ok(run_op("QUANTIZED_16BIT_LSTM", *q16_ops(x[r:r + 1], h[r:r + 1], c[r:r + 1], w, b)))
        np.testing.assert_array_equal(one[0][0], full[0][r])
        np.testing.assert_array_equal(one[1][0], full[1][r])


def test_q16_lstm_zero_state_and_saturation():
    x, h, c, w, b = q16_case(bsz=1)
    zero = ok(run_op("QUANTIZED_16BIT_LSTM", *q16_ops(x, np.full_like(h, 128), np.zeros_like(c), w, b)))
    assert zero[1].dtype == np.uint8 and zero[0].dtype == np.int16
    big = [np.full(4, 2 ** 30, np.int32)] * 4                      # gates saturate
    out = ok(run_op("QUANTIZED_16BIT_LSTM", *q16_ops(x, h, c, w, big)))
    assert out[1].min() >= 0 and out[1].max() <= 255


@pytest.mark.strict_mode
def test_q16_lstm_validation():
    x, h, c, w, b = q16_case(bsz=1)
    ins, outs = q16_ops(x, h, c, w, b)
    add = nnhelp.add_op_code
    assert add("QUANTIZED_16BIT_LSTM", ins, outs) == (0, "")
    bad = list(ins)
    bad[0] = T.q8([1, 3], x, 1 / 64, 128)
    expect_fail(add("QUANTIZED_16BIT_LSTM", bad, outs), BAD_DATA, "input 0 (input)", "1/128")
    bad = list(ins)
    bad[3] = T.q8([4, 3], w[2], 0.5, 120, const=True)
    expect_fail(add("QUANTIZED_16BIT_LSTM", bad, outs), BAD_DATA, "input 3", "scale and zeroPoint of input 1")
    bad = list(ins)
    bad[13] = Opd("TENSOR_QUANT16_SYMM", [1, 4], c, 1 / 1024, 0)
    expect_fail(add("QUANTIZED_16BIT_LSTM", bad, outs), BAD_DATA, "input 13", "1/2048")


# ---- QUANTIZED_LSTM ------------------------------------------------------------------------------
def ql_ops(x, h, c, p, cifg=False, ln=True, proj=False):
    bsz, n_in = x.shape
    u = c.shape[1]
    o = h.shape[1]
    none = lambda: Opd(3, [], None, const=True)    # noqa: E731
    w8 = lambda a, s: Opd("TENSOR_QUANT8_SYMM", list(a.shape), a, s, 0, const=True)   # noqa: E731
    ins = [T.q8s([bsz, n_in], x, 0.0078125, 0)]
    ins += [none() if cifg and k == 0 else w8(p["wx"][k], 0.05) for k in range(4)]
    ins += [none() if cifg and k == 0 else w8(p["wh"][k], 0.05) for k in range(4)]
    ins += [none(), none(), none()]                                                   # no peephole
    ins += [none() if cifg and k == 0 else Opd("TENSOR_INT32", [u], p["b"][k], 0.0, 0, const=True)
            for k in range(4)]
    ins += [w8(p["wp"], 0.05) if proj else none(), none()]
    ins += [T.q8s([bsz, o], h, 0.0078125, 0), Opd("TENSOR_QUANT16_SYMM", [bsz, u], c, 2.0 ** -11, 0)]
    ins += [none() if (cifg and k == 0) or not ln else
            Opd("TENSOR_QUANT16_SYMM", [u], p["ln"][k], 1 / 1024, 0, const=True) for k in range(4)]
    ins += [T.f32s(0.0), T.f32s(0.0)] + [T.f32s(0.007) for _ in range(4)] + [T.i32(0), T.f32s(0.007)]
    outs = [T.q8s([bsz, o], None, 0.0078125, 0), Opd("TENSOR_QUANT16_SYMM", [bsz, u], None, 2.0 ** -11, 0),
            T.q8s([bsz, o], None, 0.0078125, 0)]
    return ins, outs


def ql_case(bsz=3, n_in=5, u=4, o=4):
    r8 = lambda *s: rng.integers(-127, 128, s).astype(np.int8)   # noqa: E731
    p = {"wx": [r8(u, n_in) for _ in range(4)], "wh": [r8(u, o) for _ in range(4)],
         "b": [rng.integers(-500, 500, u).astype(np.int32) for _ in range(4)],
         "ln": [rng.integers(500, 1500, u).astype(np.int16) for _ in range(4)], "wp": r8(o, u)}
    return r8(bsz, n_in), r8(bsz, o), rng.integers(-3000, 3000, (bsz, u)).astype(np.int16), p


@pytest.mark.parametrize("cifg,ln,proj", [(False, True, False), (True, True, False), (False, True, True),
                                          (False, False, False)])
def test_quantized_lstm_batch_rows_are_independent(cifg, ln, proj):
    x, h, c, p = ql_case()
    full = ok(run_op("QUANTIZED_LSTM", *ql_ops(x, h, c, p, cifg, ln, proj)))
    np.testing.assert_array_equal(full[0], full[2])                 # output state == output
    for r in range(3):
        one = ok(run_op("QUANTIZED_LSTM", *ql_ops(x[r:r + 1], h[r:r + 1], c[r:r + 1], p, cifg, ln, proj)))
        np.testing.assert_array_equal(one[1][0], full[1][r])
        np.testing.assert_array_equal(one[2][0], full[2][r])


@pytest.mark.strict_mode
def test_quantized_lstm_validation():
    x, h, c, p = ql_case(bsz=1)
    ins, outs = ql_ops(x, h, c, p)
    add = nnhelp.add_op_code
    assert add("QUANTIZED_LSTM", ins, outs) == (0, "")
    bad = list(ins)
    bad[19] = Opd("TENSOR_QUANT16_SYMM", [1, 4], c, 0.003, 0)
    expect_fail(add("QUANTIZED_LSTM", bad, outs), BAD_DATA, "input 19", "power of two")
    bad = list(ins)
    bad[2] = Opd(3, [], None, const=True)
    expect_fail(add("QUANTIZED_LSTM", bad, outs), BAD_DATA, "input 2", "omitted")
    expect_fail(add("QUANTIZED_LSTM", ins[:31], outs), BAD_DATA, "32 inputs")
