"""LSTM, UNIDIRECTIONAL_SEQUENCE_LSTM and BIDIRECTIONAL_SEQUENCE_LSTM through the C library
against a plain numpy transcription of the documented cell: every combination of CIFG,
peephole, projection (with and without bias) and layer normalization, clipping, batch 1 vs n,
time-major vs batch-major, zero state, omitted optional inputs (NO_VALUE constants and
omitted model inputs), state outputs, and validation reasons."""
import itertools

import numpy as np
import pytest

import nnhelp
from nnhelp import BAD_DATA, OP_FAILED, T, Opd, expect_fail, run_op, with_input

pytestmark = nnhelp.needs_library
f32 = np.float32
rng = np.random.default_rng(5)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def act(x, code):
    return {0: x, 1: np.maximum(x, 0), 3: np.clip(x, 0, 6), 4: np.tanh(x), 6: sigmoid(x)}[code]


def norm(x):
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(np.where(var == 0, 1e-8, var))


def ref_step(p, x, h, c, a=4, cell_clip=0.0, proj_clip=0.0):
    """p: dict of float64 weights (None when absent), x [B, I], h [B, O], c [B, U]."""
    def gate(name, peep_c):
        v = x @ p["wx" + name].T + h @ p["wh" + name].T
        if p["peep"] and peep_c is not None:
            v = v + peep_c * p["wc" + name]
        if p["ln"]:
            return norm(v) * p["ln" + name] + p["b" + name]
        return v + p["b" + name]
    f = sigmoid(gate("f", c))
    i = 1 - f if p["cifg"] else sigmoid(gate("i", c))
    g = act(gate("c", None), a)
    c2 = f * c + i * g
    if cell_clip > 0:
        c2 = np.clip(c2, -cell_clip, cell_clip)
    o = sigmoid(gate("o", c2))
    hc = o * act(c2, a)
    if p["proj"]:
        hc = hc @ p["wp"].T + (p["bp"] if p["bp"] is not None else 0)
        if proj_clip > 0:
            hc = np.clip(hc, -proj_clip, proj_clip)
    return hc, c2


def make_params(n_in, u, o, cifg, peep, proj, ln, proj_bias=True):
    r = lambda *s: rng.normal(0, 0.4, s).astype(f32)   # noqa: E731
    p = {"cifg": cifg, "peep": peep, "proj": proj, "ln": ln, "bp": None}
    for g in "ifco":
        p["wx" + g], p["wh" + g], p["b" + g] = r(u, n_in), r(u, o), r(u)
        p["wc" + g], p["ln" + g] = r(u), r(u) + 1
    if proj:
        p["wp"] = r(o, u)
        p["bp"] = r(o) if proj_bias else None
    return p


def none():
    return Opd(3, [], None, const=True)          # NO_VALUE


def cell_operands(p, batch, h, c):
    """Inputs 1..19 of LSTM / UNIDIRECTIONAL_SEQUENCE_LSTM."""
    w = lambda a: T.f32(list(a.shape), a, True)   # noqa: E731
    ins = [none() if p["cifg"] else w(p["wxi"]), w(p["wxf"]), w(p["wxc"]), w(p["wxo"]),
           none() if p["cifg"] else w(p["whi"]), w(p["whf"]), w(p["whc"]), w(p["who"])]
    ins += [w(p["wci"]) if p["peep"] and not p["cifg"] else none(),
            w(p["wcf"]) if p["peep"] else none(), w(p["wco"]) if p["peep"] else none()]
    ins += [none() if p["cifg"] else w(p["bi"]), w(p["bf"]), w(p["bc"]), w(p["bo"])]
    ins += [w(p["wp"]) if p["proj"] else none(), w(p["bp"]) if p["proj"] and p["bp"] is not None else none()]
    ins += [T.f32(list(h.shape), h), T.f32(list(c.shape), c)]
    return ins


def ln_operands(p):
    w = lambda a: T.f32(list(a.shape), a, True)   # noqa: E731
    if not p["ln"]:
        return [none(), none(), none(), none()]
    return [none() if p["cifg"] else w(p["lni"]), w(p["lnf"]), w(p["lnc"]), w(p["lno"])]


COMBOS = list(itertools.product([False, True], repeat=4))      # cifg, peephole, projection, layer norm


@pytest.mark.parametrize("cifg,peep,proj,ln", COMBOS)
def test_lstm_step_every_combination(cifg, peep, proj, ln):
    batch, n_in, u = 2, 3, 4
    o = 2 if proj else u
    p = make_params(n_in, u, o, cifg, peep, proj, ln)
    x = rng.normal(0, 1, (batch, n_in)).astype(f32)
    h = rng.normal(0, 0.5, (batch, o)).astype(f32)
    c = rng.normal(0, 0.5, (batch, u)).astype(f32)
    ins = [T.f32([batch, n_in], x)] + cell_operands(p, batch, h, c) + [T.i32(4), T.f32s(0.0), T.f32s(0.0)]
    if ln:
        ins += ln_operands(p)
    outs = [T.f32([batch, u * (3 if cifg else 4)]), T.f32([batch, o]), T.f32([batch, u]), T.f32([batch, o])]
    out = ok(run_op("LSTM", ins, outs))
    want_h, want_c = ref_step(p, x.astype(np.float64), h, c)
    np.testing.assert_allclose(out[3], want_h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1], want_h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[2], want_c, rtol=1e-5, atol=1e-5)


def ok(res):
    code, out = res
    assert code == 0, out
    return out


@pytest.mark.parametrize("time_major", [True, False])
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("clip", [0.0, 0.5])
def test_unidirectional_lstm_sequence(time_major, batch, clip):
    steps, n_in, u, o = 5, 3, 6, 4
    p = make_params(n_in, u, o, cifg=False, peep=True, proj=True, ln=False)
    x = rng.normal(0, 1, (steps, batch, n_in)).astype(f32)
    h0, c0 = np.zeros((batch, o), f32), np.zeros((batch, u), f32)            # zero state
    xin = x if time_major else x.swapaxes(0, 1).copy()
    ins = [T.f32(list(xin.shape), xin)] + cell_operands(p, batch, h0, c0)
    ins += [T.i32(4), T.f32s(clip), T.f32s(clip), T.b(time_major)] + ln_operands(p)
    out_shape = [steps, batch, o] if time_major else [batch, steps, o]
    out = ok(run_op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [T.f32(out_shape), T.f32([batch, o]), T.f32([batch, u])]))
    h, c = h0.astype(np.float64), c0.astype(np.float64)
    want = []
    for t in range(steps):
        h, c = ref_step(p, x[t].astype(np.float64), h, c, 4, clip, clip)
        want.append(h)
    got = out[0] if time_major else out[0].swapaxes(0, 1)
    np.testing.assert_allclose(got, np.array(want), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1], h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[2], c, rtol=1e-5, atol=1e-5)


def test_unidirectional_lstm_optional_weights_as_omitted_model_inputs():
    """Optional tensors given as model inputs and omitted at execution (as the CTS does)."""
    steps, batch, n_in, u = 3, 2, 3, 4
    p = make_params(n_in, u, u, cifg=True, peep=False, proj=False, ln=False)
    x = rng.normal(0, 1, (steps, batch, n_in)).astype(f32)
    h0, c0 = np.zeros((batch, u), f32), np.zeros((batch, u), f32)
    ins = [T.f32(list(x.shape), x)] + cell_operands(p, batch, h0, c0)
    for k in (1, 5, 9, 10, 11, 12, 16, 17):
        ins[k] = Opd(3, [0], None)                        # model input, omitted at execution
    ins += [T.i32(4), T.f32s(0.0), T.f32s(0.0), T.b(True)] + ln_operands(p)
    out = ok(run_op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [T.f32([steps, batch, u])]))
    h, c = h0.astype(np.float64), c0.astype(np.float64)
    for t in range(steps):
        h, c = ref_step(p, x[t].astype(np.float64), h, c)
    np.testing.assert_allclose(out[0][-1], h, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("merge", [False, True])
def test_bidirectional_lstm(merge):
    steps, batch, n_in, u = 4, 2, 3, 5
    fw = make_params(n_in, u, u, cifg=False, peep=False, proj=False, ln=False)
    bw = make_params(n_in, u, u, cifg=True, peep=True, proj=False, ln=False)
    x = rng.normal(0, 1, (steps, batch, n_in)).astype(f32)
    z = np.zeros((batch, u), f32)
    fw_ops, bw_ops = cell_operands(fw, batch, z, z), cell_operands(bw, batch, z, z)
    ins = [T.f32(list(x.shape), x)] + fw_ops[:17] + bw_ops[:17] + fw_ops[17:] + bw_ops[17:]
    ins += [none() for _ in range(9)]                                         # no aux input
    ins += [T.i32(4), T.f32s(0.0), T.f32s(0.0), T.b(merge), T.b(True)] + [none() for _ in range(8)]
    outs = [T.f32([steps, batch, 2 * u])] if merge else [T.f32([steps, batch, u]), T.f32([steps, batch, u])]
    out = ok(run_op("BIDIRECTIONAL_SEQUENCE_LSTM", ins, outs))
    h, c = z.astype(np.float64), z.astype(np.float64)
    want_f = []
    for t in range(steps):
        h, c = ref_step(fw, x[t].astype(np.float64), h, c)
        want_f.append(h)
    h, c = z.astype(np.float64), z.astype(np.float64)
    want_b = [None] * steps
    for t in range(steps - 1, -1, -1):
        h, c = ref_step(bw, x[t].astype(np.float64), h, c)
        want_b[t] = h
    got_f, got_b = (out[0][..., :u], out[0][..., u:]) if merge else (out[0], out[1])
    np.testing.assert_allclose(got_f, np.array(want_f), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_b, np.array(want_b), rtol=1e-5, atol=1e-5)


@pytest.mark.strict_mode
def test_lstm_validation_and_runtime_reasons():
    batch, n_in, u = 1, 3, 4
    p = make_params(n_in, u, u, cifg=False, peep=False, proj=False, ln=False)
    z = np.zeros((batch, u), f32)
    x = np.zeros((batch, n_in), f32)
    ins = [T.f32([batch, n_in], x)] + cell_operands(p, batch, z, z) + [T.i32(4), T.f32s(0.0), T.f32s(0.0)]
    outs = [T.f32([batch, 4 * u]), T.f32([batch, u]), T.f32([batch, u]), T.f32([batch, u])]
    add = nnhelp.add_op_code
    assert add("LSTM", ins, outs) == (0, "")
    expect_fail(add("LSTM", with_input(ins, 20, T.i32(2)), outs), BAD_DATA, "input 20 (activation)", "got 2")
    expect_fail(add("LSTM", with_input(ins, 21, T.f32s(-1.0)), outs), BAD_DATA, "input 21 (cell clip)", ">= 0")
    expect_fail(add("LSTM", with_input(ins, 2, none()), outs), BAD_DATA, "input 2", "omitted")
    expect_fail(add("LSTM", ins[:22], outs), BAD_DATA, "23 or 27 inputs")
    # recurrent-to-input without input-to-input
    expect_fail(run_op("LSTM", with_input(ins, 5, none()), outs), OP_FAILED, "CIFG")
