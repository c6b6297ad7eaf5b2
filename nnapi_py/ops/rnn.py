"""Basic recurrent layers: RNN, UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN, SVDF.

Every layer computes in float32 (float16 operands are widened once and the results rounded
once).  Kernels loop over time steps only: the input contribution of every step is one
matrix product before the loop (weights transposed and packed once when they are
constants), each step is one matrix product with the recurrent weights over the whole batch.

state_t = act(x_t W' + aux_t A' + state_{t-1} R' + bias), act a FuseCode (NONE, RELU, RELU1,
RELU6).  BIDIRECTIONAL_SEQUENCE_RNN's auxiliary input follows the documented linking modes:
no aux input; aux input with aux weights (cross linking: both directions add aux_t A'); aux
input without aux weights (parallel linking, feature level 4: the backward cell reads the aux
input instead of the input).  Which mode a run uses is decided when the run starts, because
the aux operands may be model inputs given as omitted.

SVDF (rank-constrained filtering): the state holds, per batch and filter, the last
memory_size feature activations; each step pushes W_feature x into it, filters it with
W_time, sums each unit's `rank` filters, adds the bias, applies the activation, and shifts
the memory by one (the state layout [batch, memory_size * num_filters] of Android's runtime).
"""
import numpy as np

from .. import constants as C
from .base import Op, register, value_error
from . import quant as Q
from .common import Derived, check_merge_outputs, check_present

F16, F32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32
f32 = np.float32
FUSES = (C.FUSED_NONE, C.FUSED_RELU, C.FUSED_RELU1, C.FUSED_RELU6)


# ---- shared helpers ---------------------------------------------------------------------------------
def _f32(a):
    a = np.asarray(a)
    return a if a.dtype == f32 else a.astype(f32)


def _packed_t(info):
    """A [units, k] weight as a contiguous float32 [k, units] matrix, packed once for a constant."""
    return Derived(info.value, lambda w: np.ascontiguousarray(_f32(w).T))


def _bias(info):
    return Derived(info.value, _f32)


def _fail(name, msg):
    raise value_error(f"{name}: {msg}", at_runtime=False)


def _dims(name, info, rank, what):
    d = info.dims
    if d is None or len(d) != rank:
        _fail(name, f"{what} must be a {rank}-D tensor, got dimensions {None if d is None else list(d)}")
    return tuple(d)


def _expect(name, got, want, what):
    if tuple(got) != tuple(want):
        _fail(name, f"{what} has shape {list(got)}, expected {list(want)}")


def _check_same_float(sig, idxs, t, roles):
    for k in idxs:
        if k < len(sig.ins) and not sig.ins[k].omitted:
            sig.same_type("input", k, t, roles.get(k))


def _check_fuse(sig, idx):
    sig.types("input", idx, (C.INT32,), "fused activation")
    v = sig.scalar_value(idx)
    if v is not None and v not in FUSES:
        sig.fail(f"input {idx} (fused activation) must be 0 (NONE), 1 (RELU), 2 (RELU1) or 3 (RELU6), got {v}")


def _rank_known(sig, where, idx, rank, what):
    o = sig.operand(where, idx)
    if o.dims is not None and len(o.dims) not in (0, rank) and not (where == "input" and 0 in o.dims):
        sig.fail(f"{where} {idx} ({what}) must be a {rank}-D tensor, got rank {len(o.dims)}")


def run_cell(xw, h0, rt, fuse, out, reverse=False):
    """The recurrence over precomputed input terms xw (T, B, U) float32: h = act(xw_t + h R').

    Writes each step into out[t] (any float view of shape (T, B, U)); returns the last state."""
    h = h0
    steps = range(xw.shape[0] - 1, -1, -1) if reverse else range(xw.shape[0])
    for t in steps:
        v = xw[t] + h @ rt
        Q.apply_float_activation(v, fuse)
        out[t] = v
        h = v
    return h


# ---- RNN -----------------------------------------------------------------------------------------------
RNN_ROLES = {0: "input", 1: "weights", 2: "recurrent weights", 3: "bias", 4: "hidden state"}


@register
class Rnn(Op):
    name = "RNN"
    optional_inputs = ()

    def validate(self, sig):
        sig.count(6, 2)
        check_present(sig)
        t = sig.types("input", 0, {F32: 1, F16: 3}, "input")
        _check_same_float(sig, range(1, 5), t, RNN_ROLES)
        _check_fuse(sig, 5)
        sig.same_type("output", 0, t, "hidden state")
        sig.same_type("output", 1, t, "output")
        for where, idx, rank, what in (("input", 0, 2, "input"), ("input", 1, 2, "weights"),
                                       ("input", 2, 2, "recurrent weights"), ("input", 3, 1, "bias"),
                                       ("input", 4, 2, "hidden state"), ("output", 0, 2, "hidden state"),
                                       ("output", 1, 2, "output")):
            _rank_known(sig, where, idx, rank, what)
        return 1 if t == F32 else 3

    def infer(self, ins):
        n = self.name
        b, i = _dims(n, ins[0], 2, "input 0 (input)")
        u, i2 = _dims(n, ins[1], 2, "input 1 (weights)")
        _expect(n, (i2,), (i,), "input 1 (weights) dimension 1 (input size)")
        _expect(n, _dims(n, ins[2], 2, "input 2 (recurrent weights)"), (u, u), "input 2 (recurrent weights)")
        _expect(n, _dims(n, ins[3], 1, "input 3 (bias)"), (u,), "input 3 (bias)")
        _expect(n, _dims(n, ins[4], 2, "input 4 (hidden state)"), (b, u), "input 4 (hidden state)")
        return [(b, u), (b, u)]

    def build(self, ins, outs):
        w, r, bias = _packed_t(ins[1]), _packed_t(ins[2]), _bias(ins[3])
        fuse = int(ins[5].value)

        def kernel(i, o):
            v = _f32(i[0]) @ w.get(i[1])
            v += _f32(i[4]) @ r.get(i[2])
            v += bias.get(i[3])
            Q.apply_float_activation(v, fuse)
            o[0][...] = v
            o[1][...] = v
        return kernel


# ---- UNIDIRECTIONAL_SEQUENCE_RNN ---------------------------------------------------------------------
@register
class UnidirectionalSequenceRnn(Op):
    name = "UNIDIRECTIONAL_SEQUENCE_RNN"
    optional_inputs = ()

    def validate(self, sig):
        sig.count(7, len(sig.outs))
        if len(sig.outs) not in (1, 2):
            sig.fail(f"expected 1 or 2 outputs (output, and the final hidden state since feature level 4), "
                     f"got {len(sig.outs)}")
        check_present(sig)
        t = sig.types("input", 0, {F32: 3, F16: 3}, "input")
        _check_same_float(sig, range(1, 5), t, RNN_ROLES)
        _check_fuse(sig, 5)
        sig.types("input", 6, (C.INT32,), "time major")
        tm = sig.scalar_value(6)
        if tm is not None and tm not in (0, 1):
            sig.fail(f"input 6 (time major) must be 0 or 1, got {tm}")
        for k in range(len(sig.outs)):
            sig.same_type("output", k, t)
        for where, idx, rank, what in (("input", 0, 3, "input"), ("input", 1, 2, "weights"),
                                       ("input", 2, 2, "recurrent weights"), ("input", 3, 1, "bias"),
                                       ("input", 4, 2, "hidden state"), ("output", 0, 3, "output")):
            _rank_known(sig, where, idx, rank, what)
        return 4 if len(sig.outs) == 2 else 3

    def infer(self, ins):
        """Both shapes (sequence output, final state); the plan takes as many as the node has."""
        n = self.name
        d = _dims(n, ins[0], 3, "input 0 (input)")
        tm = bool(ins[6].value)
        steps, b, i = d if tm else (d[1], d[0], d[2])
        u, i2 = _dims(n, ins[1], 2, "input 1 (weights)")
        _expect(n, (i2,), (i,), "input 1 (weights) dimension 1 (input size)")
        _expect(n, _dims(n, ins[2], 2, "input 2 (recurrent weights)"), (u, u), "input 2 (recurrent weights)")
        _expect(n, _dims(n, ins[3], 1, "input 3 (bias)"), (u,), "input 3 (bias)")
        _expect(n, _dims(n, ins[4], 2, "input 4 (hidden state)"), (b, u), "input 4 (hidden state)")
        return [(steps, b, u) if tm else (b, steps, u), (b, u)]

    def build(self, ins, outs):
        w, r, bias = _packed_t(ins[1]), _packed_t(ins[2]), _bias(ins[3])
        fuse, tm = int(ins[5].value), bool(ins[6].value)

        def kernel(i, o):
            x = _f32(i[0])
            if not tm:
                x = x.swapaxes(0, 1)
            steps, b, n_in = x.shape
            xw = (x.reshape(steps * b, n_in) @ w.get(i[1])).reshape(steps, b, -1)
            xw += bias.get(i[3])
            y = o[0] if tm else o[0].swapaxes(0, 1)
            h = run_cell(xw, _f32(i[4]), r.get(i[2]), fuse, y)
            if len(o) > 1:
                o[1][...] = h
        return kernel


# ---- BIDIRECTIONAL_SEQUENCE_RNN ----------------------------------------------------------------------
BIDI_ROLES = {0: "input", 1: "forward weights", 2: "forward recurrent weights", 3: "forward bias",
              4: "forward hidden state", 5: "backward weights", 6: "backward recurrent weights",
              7: "backward bias", 8: "backward hidden state", 9: "aux input", 10: "forward aux weights",
              11: "backward aux weights"}


def _present(info):
    """An optional operand that is given: not NO_VALUE and not declared with a zero-sized shape."""
    return not info.omitted and not (info.dims is not None and 0 in info.dims and info.value is None
                                     and len(info.dims) != 3)


@register
class BidirectionalSequenceRnn(Op):
    name = "BIDIRECTIONAL_SEQUENCE_RNN"
    optional_inputs = (9, 10, 11)

    def validate(self, sig):
        if len(sig.ins) != 15:
            sig.fail(f"expected 15 inputs, got {len(sig.ins)}")
        for k in range(15):
            if k not in self.optional_inputs:
                sig.present(k, BIDI_ROLES.get(k))
        t = sig.types("input", 0, {F32: 3, F16: 3}, "input")
        _check_same_float(sig, range(1, 12), t, BIDI_ROLES)
        _check_fuse(sig, 12)
        sig.types("input", 13, (C.BOOL,), "time major")
        sig.types("input", 14, (C.BOOL,), "merge outputs")
        merge = sig.scalar_value(14)
        n_out = len(sig.outs)
        allowed = (1, 3) if merge else (2, 4) if merge is not None else (1, 2, 3, 4)
        if n_out not in allowed:
            sig.fail(f"expected {' or '.join(map(str, allowed))} outputs with input 14 (merge outputs) "
                     f"{'true' if merge else 'false'}, got {n_out}")
        for k in range(n_out):
            sig.same_type("output", k, t)
        for where, idx, rank, what in (("input", 0, 3, "input"), ("input", 1, 2, "forward weights"),
                                       ("input", 2, 2, "forward recurrent weights"), ("input", 3, 1, "forward bias"),
                                       ("input", 4, 2, "forward hidden state"), ("input", 5, 2, "backward weights"),
                                       ("input", 6, 2, "backward recurrent weights"),
                                       ("input", 7, 1, "backward bias"), ("input", 8, 2, "backward hidden state")):
            _rank_known(sig, where, idx, rank, what)
        aux = [_present(sig.ins[k]) for k in (9, 10, 11)]
        level = 3
        if aux[1] != aux[2] or (aux[1] and not aux[0]):
            sig.fail("inputs 9-11 (aux input, forward and backward aux weights): give none, all three "
                     "(cross linking) or only the aux input (parallel linking)")
        if aux[0] and not aux[1]:
            level = 4                      # parallel linking
        if n_out >= 3:
            level = 4                      # final hidden states as outputs
        return level

    def infer(self, ins):
        n = self.name
        d = _dims(n, ins[0], 3, "input 0 (input)")
        tm, merge = bool(ins[13].value), bool(ins[14].value)
        steps, b, i = d if tm else (d[1], d[0], d[2])
        units = []
        for base, side in ((1, "forward"), (5, "backward")):
            u, i2 = _dims(n, ins[base], 2, f"input {base} ({side} weights)")
            _expect(n, (i2,), (i,), f"input {base} ({side} weights) dimension 1 (input size)")
            _expect(n, _dims(n, ins[base + 1], 2, f"input {base + 1} ({side} recurrent weights)"), (u, u),
                    f"input {base + 1} ({side} recurrent weights)")
            _expect(n, _dims(n, ins[base + 2], 1, f"input {base + 2} ({side} bias)"), (u,),
                    f"input {base + 2} ({side} bias)")
            _expect(n, _dims(n, ins[base + 3], 2, f"input {base + 3} ({side} hidden state)"), (b, u),
                    f"input {base + 3} ({side} hidden state)")
            units.append(u)
        uf, ub = units
        seq = (lambda u: (steps, b, u)) if tm else (lambda u: (b, steps, u))
        if merge:
            return [seq(uf + ub), (b, uf), (b, ub)]
        return [seq(uf), seq(ub), (b, uf), (b, ub)]

    def build(self, ins, outs):
        wf, rf, bf = _packed_t(ins[1]), _packed_t(ins[2]), _bias(ins[3])
        wb, rb, bb = _packed_t(ins[5]), _packed_t(ins[6]), _bias(ins[7])
        af, ab = _packed_t(ins[10]), _packed_t(ins[11])
        fuse, tm, merge = int(ins[12].value), bool(ins[13].value), bool(ins[14].value)
        name = self.name
        check_merge_outputs(name, "input 14 (merge outputs)", merge, len(outs), 2)

        def seq(a):
            return a if tm else a.swapaxes(0, 1)

        def project(x, w, what, src, units=None):
            steps, b, k = x.shape
            if w.ndim != 2 or w.shape[0] != k or units not in (None, w.shape[1]):   # the aux operands
                want = "units" if units is None else units                        # are known per run
                raise value_error(f"{name}: {what} has shape {list(w.T.shape)}, expected [{want}, {k}] "
                                  f"({k}: the size of {src})", at_runtime=True)
            return (x.reshape(steps * b, k) @ w).reshape(steps, b, -1)

        def kernel(i, o):
            x = seq(_f32(i[0]))
            has_aux, has_fw_w, has_bw_w = (i[k] is not None and np.size(i[k]) > 0 for k in (9, 10, 11))
            if has_fw_w != has_bw_w or (has_fw_w and not has_aux):
                raise value_error(f"{name}: inputs 9-11 (aux input, forward and backward aux weights): give "
                                  f"none, all three (cross linking) or only the aux input (parallel linking)",
                                  at_runtime=True)
            if has_aux and np.ndim(i[9]) != 3:
                raise value_error(f"{name}: input 9 (aux input) must be a 3-D tensor, got dimensions "
                                  f"{list(np.shape(i[9]))}", at_runtime=True)
            aux = seq(_f32(i[9])) if has_aux else None
            if aux is not None and aux.shape[:2] != x.shape[:2]:
                raise value_error(f"{name}: input 9 (aux input) has {list(aux.shape[:2])} time steps and batches, "
                                  f"expected {list(x.shape[:2])} (those of input 0)", at_runtime=True)
            xf = project(x, wf.get(i[1]), "input 1 (forward weights)", "input 0")
            parallel = has_aux and not has_fw_w
            xb = project(aux if parallel else x, wb.get(i[5]), "input 5 (backward weights)",
                         "input 9 (aux input)" if parallel else "input 0")
            if has_fw_w:
                xf += project(aux, af.get(i[10]), "input 10 (forward aux weights)", "input 9 (aux input)",
                              xf.shape[2])
                xb += project(aux, ab.get(i[11]), "input 11 (backward aux weights)", "input 9 (aux input)",
                              xb.shape[2])
            xf += bf.get(i[3])
            xb += bb.get(i[7])
            uf = xf.shape[2]
            if merge:
                y = seq(o[0])
                yf, yb = y[..., :uf], y[..., uf:]
                states = o[1:]
            else:
                yf, yb = seq(o[0]), seq(o[1])
                states = o[2:]
            hf = run_cell(xf, _f32(i[4]), rf.get(i[2]), fuse, yf)
            hb = run_cell(xb, _f32(i[8]), rb.get(i[6]), fuse, yb, reverse=True)
            if states:
                states[0][...] = hf
                states[1][...] = hb
        return kernel


# ---- SVDF ----------------------------------------------------------------------------------------------
@register
class Svdf(Op):
    name = "SVDF"
    optional_inputs = (3,)

    def validate(self, sig):
        sig.count(7, 2)
        roles = {0: "input", 1: "feature weights", 2: "time weights", 3: "bias", 4: "state", 5: "rank",
                 6: "fused activation"}
        for k in (0, 1, 2, 4, 5, 6):
            sig.present(k, roles[k])
        t = sig.types("input", 0, {F32: 1, F16: 3}, "input")
        _check_same_float(sig, (1, 2, 3, 4), t, roles)
        sig.types("input", 5, (C.INT32,), "rank")
        _check_fuse(sig, 6)
        rank = sig.scalar_value(5)
        if rank is not None and rank <= 0:
            sig.fail(f"input 5 (rank) must be > 0, got {rank}")
        sig.same_type("output", 0, t, "state")
        sig.same_type("output", 1, t, "output")
        for where, idx, r, what in (("input", 0, 2, "input"), ("input", 1, 2, "feature weights"),
                                    ("input", 2, 2, "time weights"), ("input", 4, 2, "state"),
                                    ("output", 0, 2, "state"), ("output", 1, 2, "output")):
            _rank_known(sig, where, idx, r, what)
        if not sig.ins[3].omitted:
            _rank_known(sig, "input", 3, 1, "bias")
        return 1 if t == F32 else 3

    def _geometry(self, ins):
        n = self.name
        b, i = _dims(n, ins[0], 2, "input 0 (input)")
        f, i2 = _dims(n, ins[1], 2, "input 1 (feature weights)")
        _expect(n, (i2,), (i,), "input 1 (feature weights) dimension 1 (input size)")
        f2, m = _dims(n, ins[2], 2, "input 2 (time weights)")
        _expect(n, (f2,), (f,), "input 2 (time weights) dimension 0 (number of filters)")
        rank = int(ins[5].value)
        if rank <= 0 or f % rank:
            _fail(n, f"the number of filters ({f}) must be a multiple of input 5 (rank) = {rank}")
        u = f // rank
        if not ins[3].omitted and ins[3].dims is not None and ins[3].dims != (0,):
            _expect(n, _dims(n, ins[3], 1, "input 3 (bias)"), (u,), "input 3 (bias)")
        _expect(n, _dims(n, ins[4], 2, "input 4 (state)"), (b, m * f), "input 4 (state)")
        return b, f, m, u, rank

    def infer(self, ins):
        b, f, m, u, _ = self._geometry(ins)
        return [(b, m * f), (b, u)]

    def build(self, ins, outs):
        b, f, m, u, rank = self._geometry(ins)
        wf = _packed_t(ins[1])
        wt = Derived(ins[2].value, _f32)
        bias = _bias(ins[3])
        fuse = int(ins[6].value)

        def kernel(i, o):
            state = _f32(i[4]).reshape(b, f, m)
            mem = np.empty((b, f, m), f32)
            mem[:, :, :m - 1] = state[:, :, :m - 1]     # the memory (already shifted by the last step)
            mem[:, :, m - 1] = _f32(i[0]) @ wf.get(i[1])
            per_filter = np.einsum("bfm,fm->bf", mem, wt.get(i[2]))
            y = per_filter.reshape(b, u, rank).sum(axis=2)
            if i[3] is not None and np.size(i[3]):
                y += bias.get(i[3])
            Q.apply_float_activation(y, fuse)
            o[1][...] = y
            new = np.zeros((b, f, m), f32)
            new[:, :, :m - 1] = mem[:, :, 1:]
            o[0][...] = new.reshape(b, f * m)
        return kernel
