"""Recurrent and sampling operations through the C library: RNN, UNIDIRECTIONAL_SEQUENCE_RNN,
BIDIRECTIONAL_SEQUENCE_RNN, SVDF, LSH_PROJECTION, RANDOM_MULTINOMIAL, OEM_OPERATION.

References are plain numpy loops written from the documented formulas.  The conformance
vectors cover the standard shapes; these tests cover the corners: batch 1 vs n, time-major
vs batch-major, zero initial state, omitted optional inputs (bias, aux inputs, weights),
state outputs, chaining steps through the state, and validation reasons."""
import numpy as np
import pytest

import nnhelp
from nnhelp import BAD_DATA, T, Opd, expect_fail, run_op, with_input
from nnhelp import expect_ok as ok

pytestmark = nnhelp.needs_library
f32 = np.float32
rng = np.random.default_rng(11)


def act(v, fuse):
    return {0: v, 1: np.maximum(v, 0), 2: np.clip(v, -1, 1), 3: np.clip(v, 0, 6)}[fuse]


def ref_seq(x, w, r, b, h, fuse, aux=None, aw=None, reverse=False):
    """x (T, B, I) time-major; returns (outputs (T, B, U), last state)."""
    outs = np.zeros((x.shape[0], x.shape[1], w.shape[0]))
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    for t in steps:
        v = x[t] @ w.T + h @ r.T + b
        if aux is not None:
            v = v + aux[t] @ aw.T
        h = act(v, fuse)
        outs[t] = h
    return outs, h


def weights(u, i):
    return (rng.normal(0, 0.4, (u, i)).astype(f32), rng.normal(0, 0.3, (u, u)).astype(f32),
            rng.normal(0, 0.2, u).astype(f32))


# ---- RNN -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("fuse", [0, 1, 3])
def test_rnn_step_matches_reference(batch, fuse):
    w, r, b = weights(5, 4)
    x = rng.normal(0, 1, (batch, 4)).astype(f32)
    h = rng.normal(0, 1, (batch, 5)).astype(f32)
    out = ok(run_op("RNN", [T.f32([batch, 4], x), T.f32([5, 4], w, True), T.f32([5, 5], r, True),
                            T.f32([5], b, True), T.f32([batch, 5], h), T.i32(fuse)],
                    [T.f32([batch, 5]), T.f32([batch, 5])]))
    want = act(x @ w.T + h @ r.T + b, fuse)
    np.testing.assert_allclose(out[0], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1], want, rtol=1e-5, atol=1e-6)


@pytest.mark.strict_mode
def test_rnn_validation():
    w, r, b = weights(5, 4)
    ins = [T.f32([2, 4]), T.f32([5, 4], w, True), T.f32([5, 5], r, True), T.f32([5], b, True), T.f32([2, 5]),
           T.i32(1)]
    outs = [T.f32([2, 5]), T.f32([2, 5])]
    add = nnhelp.add_op_code
    assert add("RNN", ins, outs) == (0, "")
    expect_fail(add("RNN", with_input(ins, 5, T.i32(7)), outs), BAD_DATA, "input 5 (fused activation)", "got 7")
    expect_fail(add("RNN", with_input(ins, 3, T.f16([5])), outs), BAD_DATA, "input 3 (bias)", "TENSOR_FLOAT32")
    expect_fail(run_op("RNN", with_input(ins, 1, T.f32([5, 3], np.zeros((5, 3), f32), True)), outs), BAD_DATA,
                "input 1 (weights) dimension 1")


# ---- UNIDIRECTIONAL_SEQUENCE_RNN ---------------------------------------------------------------------
@pytest.mark.parametrize("time_major", [0, 1])
@pytest.mark.parametrize("batch", [1, 2])
def test_unidirectional_rnn_matches_reference(time_major, batch):
    steps, w, (r, b) = 4, *((lambda t: (t[0], t[1:]))(weights(6, 3)))
    x = rng.normal(0, 1, (steps, batch, 3)).astype(f32)
    h0 = np.zeros((batch, 6), f32)                                           # zero state
    xin = x if time_major else x.swapaxes(0, 1).copy()
    shape = list(xin.shape)
    out_shape = [steps, batch, 6] if time_major else [batch, steps, 6]
    out = ok(run_op("UNIDIRECTIONAL_SEQUENCE_RNN",
                    [T.f32(shape, xin), T.f32([6, 3], w, True), T.f32([6, 6], r, True), T.f32([6], b, True),
                     T.f32([batch, 6], h0), T.i32(2), T.i32(time_major)],
                    [T.f32(out_shape), T.f32([batch, 6])]))
    want, last = ref_seq(x.astype(np.float64), w, r, b, h0, 2)
    got = out[0] if time_major else out[0].swapaxes(0, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1], last, rtol=1e-5, atol=1e-5)


@pytest.mark.strict_mode
def test_unidirectional_rnn_time_major_must_be_0_or_1():
    w, r, b = weights(2, 2)
    ins = [T.f32([3, 1, 2]), T.f32([2, 2], w, True), T.f32([2, 2], r, True), T.f32([2], b, True),
           T.f32([1, 2]), T.i32(0), T.i32(2)]
    expect_fail(nnhelp.add_op_code("UNIDIRECTIONAL_SEQUENCE_RNN", ins, [T.f32([3, 1, 2])]), BAD_DATA,
                "input 6 (time major)", "0 or 1")


# ---- BIDIRECTIONAL_SEQUENCE_RNN ----------------------------------------------------------------------
def bidi_case(mode, merge, states, time_major=True, batch=2, steps=3):
    fw, bw = weights(4, 3), weights(5, 3)
    x = rng.normal(0, 1, (steps, batch, 3)).astype(f32)
    aux = rng.normal(0, 1, (steps, batch, 3)).astype(f32)
    afw = rng.normal(0, 0.4, (4, 3)).astype(f32)
    abw = rng.normal(0, 0.4, (5, 3)).astype(f32)
    h = [rng.normal(0, 0.5, (batch, 4)).astype(f32), rng.normal(0, 0.5, (batch, 5)).astype(f32)]
    seq = (lambda a: a) if time_major else (lambda a: a.swapaxes(0, 1).copy())
    none = Opd(3, [], None, const=True)                                          # NO_VALUE
    ins = [T.f32(list(seq(x).shape), seq(x)),
           T.f32([4, 3], fw[0], True), T.f32([4, 4], fw[1], True), T.f32([4], fw[2], True), T.f32([batch, 4], h[0]),
           T.f32([5, 3], bw[0], True), T.f32([5, 5], bw[1], True), T.f32([5], bw[2], True), T.f32([batch, 5], h[1]),
           T.f32(list(seq(aux).shape), seq(aux)) if mode != "none" else none,
           T.f32([4, 3], afw, True) if mode == "cross" else none,
           T.f32([5, 3], abw, True) if mode == "cross" else none,
           T.i32(1), T.b(time_major), T.b(merge)]
    s = (lambda u: [steps, batch, u]) if time_major else (lambda u: [batch, steps, u])
    outs = [T.f32(s(9))] if merge else [T.f32(s(4)), T.f32(s(5))]
    if states:
        outs += [T.f32([batch, 4]), T.f32([batch, 5])]
    x64 = x.astype(np.float64)
    if mode == "cross":
        f, hf = ref_seq(x64, *fw, h[0], 1, aux, afw)
        b, hb = ref_seq(x64, *bw, h[1], 1, aux, abw, reverse=True)
    else:
        f, hf = ref_seq(x64, *fw, h[0], 1)
        b, hb = ref_seq(aux.astype(np.float64) if mode == "parallel" else x64, *bw, h[1], 1, reverse=True)
    return ins, outs, (f, b, hf, hb)


@pytest.mark.parametrize("mode", ["none", "cross", "parallel"])
@pytest.mark.parametrize("merge", [False, True])
@pytest.mark.parametrize("time_major", [True, False])
def test_bidirectional_rnn_matches_reference(mode, merge, time_major):
    ins, outs, (f, b, hf, hb) = bidi_case(mode, merge, states=True, time_major=time_major)
    out = ok(run_op("BIDIRECTIONAL_SEQUENCE_RNN", ins, outs))
    seq = (lambda a: a) if time_major else (lambda a: a.swapaxes(0, 1))
    if merge:
        np.testing.assert_allclose(seq(out[0]), np.concatenate([f, b], axis=2), rtol=1e-5, atol=1e-5)
        st = out[1:]
    else:
        np.testing.assert_allclose(seq(out[0]), f, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(seq(out[1]), b, rtol=1e-5, atol=1e-5)
        st = out[2:]
    np.testing.assert_allclose(st[0], hf, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(st[1], hb, rtol=1e-5, atol=1e-5)


def test_bidirectional_rnn_without_state_outputs():
    ins, outs, (f, b, _, _) = bidi_case("none", False, states=False, batch=1)
    out = ok(run_op("BIDIRECTIONAL_SEQUENCE_RNN", ins, outs))
    np.testing.assert_allclose(out[1], b, rtol=1e-5, atol=1e-5)


@pytest.mark.strict_mode
def test_bidirectional_rnn_validation():
    ins, outs, _ = bidi_case("cross", False, states=False)
    add = nnhelp.add_op_code
    assert add("BIDIRECTIONAL_SEQUENCE_RNN", ins, outs) == (0, "")
    omitted = Opd(3, [], None, const=True)
    expect_fail(add("BIDIRECTIONAL_SEQUENCE_RNN", with_input(ins, 11, omitted), outs), BAD_DATA,   # one aux weight only
                "inputs 9-11", "cross linking")
    expect_fail(add("BIDIRECTIONAL_SEQUENCE_RNN", ins, outs[:1]), BAD_DATA, "expected 2 or 4 outputs")
    expect_fail(add("BIDIRECTIONAL_SEQUENCE_RNN", with_input(ins, 3, omitted), outs), BAD_DATA,
                "input 3 (forward bias)", "omitted")


# ---- SVDF -------------------------------------------------------------------------------------------
def ref_svdf(x, wf, wt, bias, state, rank, fuse):
    """state (B, F * M) -> (new state, output); the memory layout of Android's runtime."""
    b, f, m = x.shape[0], wf.shape[0], wt.shape[1]
    mem = state.reshape(b, f, m).astype(np.float64).copy()
    mem[:, :, m - 1] = x @ wf.T
    per_filter = (mem * wt[None]).sum(axis=2)
    y = per_filter.reshape(b, f // rank, rank).sum(axis=2)
    if bias is not None:
        y = y + bias
    new = np.zeros_like(mem)
    new[:, :, :m - 1] = mem[:, :, 1:]
    return new.reshape(b, f * m), act(y, fuse)


@pytest.mark.parametrize("rank", [1, 2])
@pytest.mark.parametrize("with_bias", [False, True])
def test_svdf_two_steps_through_the_state(rank, with_bias):
    batch, n_in, units, mem = 2, 3, 4, 5
    f = units * rank
    wf = rng.normal(0, 0.5, (f, n_in)).astype(f32)
    wt = rng.normal(0, 0.5, (f, mem)).astype(f32)
    bias = rng.normal(0, 0.5, units).astype(f32) if with_bias else None
    state = np.zeros((batch, f * mem), f32)
    for step in range(2):
        x = rng.normal(0, 1, (batch, n_in)).astype(f32)
        ins = [T.f32([batch, n_in], x), T.f32([f, n_in], wf, True), T.f32([f, mem], wt, True),
               T.f32([units], bias, True) if with_bias else Opd(3, [], None, const=True),
               T.f32([batch, f * mem], state), T.i32(rank), T.i32(1)]
        out = ok(run_op("SVDF", ins, [T.f32([batch, f * mem]), T.f32([batch, units])]))
        want_state, want = ref_svdf(x, wf, wt, bias, state, rank, 1)
        np.testing.assert_allclose(out[1], want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out[0], want_state, rtol=1e-5, atol=1e-5)
        state = out[0].astype(f32)


@pytest.mark.strict_mode
def test_svdf_validation():
    wf, wt = np.zeros((4, 3), f32), np.zeros((4, 5), f32)
    ins = [T.f32([2, 3]), T.f32([4, 3], wf, True), T.f32([4, 5], wt, True), Opd(3, [], None, const=True),
           T.f32([2, 20]), T.i32(3), T.i32(0)]
    outs = [T.f32([2, 20]), T.f32([2, 4])]
    expect_fail(run_op("SVDF", ins, outs), BAD_DATA, "multiple of input 5 (rank)")
    expect_fail(nnhelp.add_op_code("SVDF", with_input(ins, 5, T.i32(0)), outs), BAD_DATA, "input 5 (rank)", "> 0")


# ---- LSH_PROJECTION ---------------------------------------------------------------------------------
def test_fingerprint64_known_values():
    from nnapi_py.ops.sampling import fingerprint64
    want = {0: 0x9ae16a3b2f90404f, 3: 0x40b4412e33eefd64, 7: 0x4fef0b39c12aa9a4, 12: 0x7e11fa045e761bc,
            20: 0x7dab3f979fd30094, 40: 0xb3987ba065f59b3a, 100: 0x9e17c36fe4a61b08, 300: 0xdfbced116079af13}
    for n, h in want.items():
        key = np.array([[(i * 7 + 3) % 256 for i in range(n)]], np.uint8).reshape(1, n)
        assert int(fingerprint64(key)[0]) == h, n


def lsh(kind, x, weights=None, hashes=None, xtype=4):
    hashes = np.array([[0.123, 0.456], [-0.321, -0.654], [1.234, 5.678], [-4.321, -8.765]], f32) \
        if hashes is None else hashes
    w = T.f32([len(weights)], weights) if weights is not None else Opd(3, [], None, const=True)
    n_out = hashes.size if kind == 2 else hashes.shape[0]
    return ok(run_op("LSH_PROJECTION", [T.f32(list(hashes.shape), hashes, True),
                                        Opd(xtype, list(x.shape), x), w, T.i32(kind)], [T.i32t([n_out])]))[0]


def test_lsh_sparse_is_the_dense_bits_packed():
    x = np.array([[12345, 54321], [67890, 9876], [-12345678, -87654321]], np.int32)
    dense = lsh(2, x).reshape(4, 2)
    packed = dense[:, 0] * 2 + dense[:, 1]
    np.testing.assert_array_equal(lsh(1, x), packed)                                   # deprecated: no offset
    np.testing.assert_array_equal(lsh(3, x), packed + np.arange(4) * 4)                 # offset k << num_bits


def test_lsh_omitted_weights_count_as_one():
    x = rng.integers(-1000, 1000, (5, 3)).astype(np.int32)
    np.testing.assert_array_equal(lsh(2, x), lsh(2, x, np.ones(5, f32)))


@pytest.mark.strict_mode
def test_lsh_float_and_quant_inputs_and_validation():
    xf = rng.normal(0, 1, (3, 4)).astype(f32)
    assert set(lsh(2, xf, np.ones(3, f32), xtype=3).tolist()) <= {0, 1}
    xq = rng.integers(0, 255, (3, 4)).astype(np.uint8)
    ins = [T.f32([4, 2], np.zeros((4, 2), f32), True), T.q8([3, 4], xq, 0.5, 0), Opd(3, [], None, const=True),
           T.i32(2)]
    assert ok(run_op("LSH_PROJECTION", ins, [T.i32t([8])]))[0].shape == (8,)
    expect_fail(nnhelp.add_op_code("LSH_PROJECTION", with_input(ins, 3, T.i32(4)), [T.i32t([8])]), BAD_DATA,
                "input 3 (projection type)")
    wide = T.f32([2, 40], np.zeros((2, 40), f32), True)
    expect_fail(nnhelp.add_op_code("LSH_PROJECTION", with_input(ins, 0, wide), [T.i32t([2])]), BAD_DATA, "at most 32")


# ---- RANDOM_MULTINOMIAL ----------------------------------------------------------------------------
def multinomial(logits, n, seeds):
    return ok(run_op("RANDOM_MULTINOMIAL", [T.f32(list(logits.shape), logits), T.i32(n),
                                            T.i32t([2], seeds, True)], [T.i32t([logits.shape[0], n])]))[0]


def test_multinomial_is_deterministic_per_seed_and_follows_the_distribution():
    logits = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.0, 0.5]], f32) + 1e-30).astype(f32)
    logits[1, 1] = -np.inf                                          # impossible class
    a = multinomial(logits, 4000, [37, 42])
    b = multinomial(logits, 4000, [37, 42])
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, multinomial(logits, 4000, [1, 2]))
    freq = np.array([np.bincount(a[0], minlength=3), np.bincount(a[1], minlength=3)]) / 4000
    np.testing.assert_allclose(freq[0], [0.1, 0.2, 0.7], atol=0.03)
    assert freq[1, 1] == 0 and abs(freq[1, 0] - 0.5) < 0.04


@pytest.mark.strict_mode
def test_multinomial_validation():
    ins = [T.f32([1, 3]), T.i32(0), T.i32t([2], [1, 2], True)]
    expect_fail(nnhelp.add_op_code("RANDOM_MULTINOMIAL", ins, [T.i32t([1, 0])]), BAD_DATA, "input 1", "> 0")


@pytest.mark.strict_mode
def test_oem_operation_says_why():
    msg = expect_fail(nnhelp.add_op_code(10000, [T.f32([1], [1.0])], [T.f32([1])]), BAD_DATA, "OEM_OPERATION")
    assert "deprecated" in msg and "extension" in msg
