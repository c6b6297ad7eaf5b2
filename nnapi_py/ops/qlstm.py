"""Quantized LSTM cells: QUANTIZED_16BIT_LSTM and QUANTIZED_LSTM.

QUANTIZED_16BIT_LSTM, integer-only as the reference computes it:
  * [x, h] (uint8, zero point 128) times the four gates' weights (uint8, shared zero point),
    plus the int32 bias, rescaled by 4096 * bias_scale to Q3.12 int16 gate inputs;
  * gates with gemmlowp's 16-bit fixed-point logistic / tanh (ops/quant.py);
  * cell state Q4.11 int16: c' = sat(rescale(i * g) + f * c); output
    h = 128 + clamp(round((o * tanh(c')) / 256), -128, 127).
The four weight matrices are packed once into one [input + output, 4 * units] matrix and each
step is one integer matrix product (exact in float64 BLAS for these sizes).  The packing is the
reference's: each gate row holds the recurrent weights first and the input weights after them,
and it meets the concatenation [input, previous output] -- Android's runtime pairs them this way
and the conformance vectors (and TFLite's delegate, which splits its weights to match) depend on it.
"""
import numpy as np

from .. import constants as C
from .base import Op, register, value_error
from . import quant as Q
from .common import check_present

Q8, I32, Q16S = C.TENSOR_QUANT8_ASYMM, C.TENSOR_INT32, C.TENSOR_QUANT16_SYMM
ROLES = ("input", "input-to-input weights", "input-to-forget weights", "input-to-cell weights",
         "input-to-output weights", "recurrent-to-input weights", "recurrent-to-forget weights",
         "recurrent-to-cell weights", "recurrent-to-output weights", "input gate bias", "forget gate bias",
         "cell gate bias", "output gate bias", "previous cell state", "previous output")


def _input_matrix(name, ins):
    """Input 0's dimensions (batch, input size): a 2-D tensor in both quantized LSTMs."""
    d = ins[0].dims
    if d is None or len(d) != 2:
        raise value_error(f"{name}: input 0 (input) must be a 2-D tensor, got {d}", at_runtime=False)
    return d


@register
class Quantized16BitLstm(Op):
    name = "QUANTIZED_16BIT_LSTM"
    optional_inputs = ()

    def validate(self, sig):
        sig.count(15, 2)
        check_present(sig)
        for k in (0, 14):
            sig.types("input", k, (Q8,), ROLES[k])
        for k in range(1, 9):
            sig.types("input", k, (Q8,), ROLES[k])
        for k in range(9, 13):
            sig.types("input", k, (I32,), ROLES[k])
        sig.types("input", 13, (Q16S,), ROLES[13])
        sig.types("output", 0, (Q16S,), "cell state")
        sig.types("output", 1, (Q8,), "output")
        w = sig.ins[1]
        with sig.at_execution():        # Android's prepare checks the quantization
            for k in (0, 14):
                o = sig.ins[k]
                if o.scale != 1 / 128 or o.zp != 128:
                    sig.fail(f"input {k} ({ROLES[k]}) must have scale 1/128 and zeroPoint 128, "
                             f"got {o.scale} and {o.zp}")
            for k in range(2, 9):
                if sig.ins[k].scale != w.scale or sig.ins[k].zp != w.zp:
                    sig.fail(f"input {k} ({ROLES[k]}) must have the scale and zeroPoint of input 1 "
                             f"({w.scale}, {w.zp}), got {sig.ins[k].scale} and {sig.ins[k].zp}")
            for k in range(9, 13):
                b = sig.ins[k]
                if b.zp != 0 or abs(b.scale - w.scale / 128) > 1e-6 * w.scale / 128:
                    sig.fail(f"input {k} ({ROLES[k]}) must have zeroPoint 0 and scale input 1's scale / 128 "
                             f"({w.scale / 128}), got {b.scale} and {b.zp}")
            if sig.ins[13].scale != 1 / 2048 or sig.ins[13].zp != 0:
                sig.fail(f"input 13 (previous cell state) must have scale 1/2048 (4 integer bits) and "
                         f"zeroPoint 0, got {sig.ins[13].scale} and {sig.ins[13].zp}")
        sig.same_quant("output", 0, sig.ins[13], ref="input 13 (previous cell state)")
        sig.same_quant("output", 1, sig.ins[14], ref="input 14 (previous output)")
        return 3

    def _dims(self, ins):
        def fail(m):
            raise value_error(f"{self.name}: {m}", at_runtime=False)
        b, n_in = _input_matrix(self.name, ins)
        h = ins[14].dims
        if h is None or len(h) != 2 or h[0] != b:
            fail(f"input 14 (previous output) must have shape [{b}, output size], got {h}")
        u = h[1]
        for k in range(1, 9):
            want = (u, n_in if k <= 4 else u)
            if tuple(ins[k].dims or ()) != want:
                fail(f"input {k} ({ROLES[k]}) has shape {list(ins[k].dims or ())}, expected {list(want)}")
        for k in range(9, 13):
            if tuple(ins[k].dims or ()) != (u,):
                fail(f"input {k} ({ROLES[k]}) has shape {list(ins[k].dims or ())}, expected [{u}]")
        if tuple(ins[13].dims or ()) != (b, u):
            fail(f"input 13 (previous cell state) has shape {list(ins[13].dims or ())}, expected [{b}, {u}]")
        return b, n_in, u

    def infer(self, ins):
        b, _, u = self._dims(ins)
        return [(b, u), (b, u)]

    def build(self, ins, outs):
        b, n_in, u = self._dims(ins)
        wzp = ins[1].zp
        q, shift = Q.quantize_multiplier(4096 * ins[9].scale)
        gate_order = (0, 2, 1, 3)        # the reference's rows: input, cell (modulation), forget, output

        def pack(a):
            w = [np.concatenate([np.asarray(a[5 + g], np.int64), np.asarray(a[1 + g], np.int64)], axis=1)
                 for g in gate_order]
            return (np.concatenate(w, axis=0) - wzp).T.astype(np.float64)        # [in + out, 4u]

        def packed_bias(a):
            return np.concatenate([np.asarray(a[9 + g], np.int64) for g in gate_order])

        const = all(ins[k].value is not None for k in range(1, 13))
        fixed = (pack([i.value for i in ins]), packed_bias([i.value for i in ins])) if const else None

        def kernel(i, o):
            w, bias = fixed if fixed is not None else (pack(i), packed_bias(i))
            xh = np.concatenate([np.asarray(i[0], np.int64), np.asarray(i[14], np.int64)], axis=1) - 128
            acc = (xh.astype(np.float64) @ w).astype(np.int64) + bias      # exact: |sum| < 2**53
            acc = Q.sat16(Q.multiply_by_quantized_multiplier(acc, q, shift))
            gi, gc, gf, go = (acc[:, k * u:(k + 1) * u] for k in range(4))
            ig = Q.logistic16(gi, 3)
            mg = Q.tanh16(gc, 3)
            fg = Q.logistic16(gf, 3)
            og = Q.logistic16(go, 3)
            c_prev = np.asarray(i[13], np.int64)
            c = Q.sat16(Q.rescale16(Q.srdhm16(ig, mg), -4) + Q.srdhm16(fg, c_prev))
            h = Q.srdhm16(og, Q.tanh16(Q.rescale16(c, 1), 3))
            o[0][...] = c
            o[1][...] = np.clip(Q.rdbpot(h, 8), -128, 127) + 128
        return kernel


# ---- QUANTIZED_LSTM (feature level 4) -------------------------------------------------------------
Q8S, Q8SY = C.TENSOR_QUANT8_ASYMM_SIGNED, C.TENSOR_QUANT8_SYMM
f32 = np.float32
QL_TYPES = {0: Q8S, **{k: Q8SY for k in range(1, 9)}, **{k: Q16S for k in (9, 10, 11)},
            **{k: I32 for k in range(12, 16)}, 16: Q8SY, 17: I32, 18: Q8S, 19: Q16S,
            **{k: Q16S for k in range(20, 24)}}
QL_OPTIONAL = (1, 5, 9, 10, 11, 12, 16, 17, 20, 21, 22, 23, 24, 25)


def _given(a):
    return a is not None and np.size(a) > 0


def _log2_exact(x):
    """CheckedLog2: the rounded log2 of x and whether x is (nearly) a power of two."""
    v = float(np.float32(np.log(np.float32(x))) * np.float32(1.0 / np.log(2.0)))
    r = round(v)
    return int(r), abs(v - r) < 1e-3


def _matmul_acc(x, w, bias_eff, q, shift, out_zp, acc, lo, hi):
    """MatrixBatchVectorMultiplyAccumulate: acc + requant(bias + x W') + zp, saturated."""
    s = (np.asarray(x, np.float64) @ np.asarray(w, np.float64).T).astype(np.int64) + bias_eff
    return np.clip(Q.multiply_by_quantized_multiplier(s, q, shift) + out_zp + acc, lo, hi)


@register
class QuantizedLstm(Op):
    """QUANTIZED_LSTM: Android's integer LSTM step (int8 inputs and weights, int16 gates and
    cell state; gemmlowp fixed-point sigmoid / tanh; integer layer normalization), transcribed
    operation for operation (ops/quant.py holds the arithmetic)."""
    name = "QUANTIZED_LSTM"
    optional_inputs = QL_OPTIONAL

    def validate(self, sig):
        if len(sig.ins) != 32 or len(sig.outs) != 3:
            sig.fail(f"expected 32 inputs and 3 outputs, got {len(sig.ins)} and {len(sig.outs)}")
        for k in range(32):
            if k not in QL_OPTIONAL:
                sig.present(k)
        for k, t in QL_TYPES.items():
            if not sig.ins[k].omitted:
                sig.types("input", k, (t,))
        for k in (24, 25, 26, 27, 28, 29, 31):
            if not sig.ins[k].omitted:
                sig.types("input", k, (C.FLOAT32,))
        sig.types("input", 30, (C.INT32,), "hidden state zero point")
        sig.types("output", 0, (Q8S,), "output state")
        sig.types("output", 1, (Q16S,), "cell state")
        sig.types("output", 2, (Q8S,), "output")
        with sig.at_execution():        # Android's prepare checks values and quantization
            for k, what in ((26, "input gate intermediate scale"), (27, "forget gate intermediate scale"),
                            (28, "cell gate intermediate scale"), (29, "output gate intermediate scale"),
                            (31, "hidden state scale")):
                v = sig.scalar_value(k)
                if v is not None and not (np.isfinite(v) and v > 0):
                    sig.fail(f"input {k} ({what}) must be a finite number > 0, got {v}")
            for k, what in ((24, "cell clip"), (25, "projection clip")):
                v = None if sig.ins[k].omitted else sig.scalar_value(k)
                if v is not None and not (np.isfinite(v) and v >= 0):
                    sig.fail(f"input {k} ({what}) must be a finite number >= 0, got {v}")
            cs = sig.ins[19]
            if cs.scale:
                shift, exact = _log2_exact(cs.scale)
                if not exact or shift > -9:
                    sig.fail(f"input 19 (previous cell state) scale must be a power of two at most 2**-9, "
                             f"got {cs.scale}")
        return 4

    def infer(self, ins):
        b = _input_matrix(self.name, ins)[0]
        u = (ins[4].dims or (0,))[0]
        o = (ins[8].dims or (0, 0))[1] if ins[8].dims and len(ins[8].dims) == 2 else 0
        if not u or not o:
            raise value_error(f"{self.name}: inputs 4 and 8 (input-to-output and recurrent-to-output weights) "
                              f"must be 2-D", at_runtime=False)
        return [(b, o), (b, u), (b, o)]

    def build(self, ins, outs):
        def sv(k, default=0.0):
            return default if ins[k].omitted or ins[k].value is None else float(ins[k].value)
        inter = [f32(sv(k)) for k in (26, 27, 28, 29)]
        hidden_zp, hidden_scale = int(ins[30].value), f32(sv(31))
        if not (np.isfinite(hidden_scale) and hidden_scale > 0):      # given as a model input
            raise value_error(f"{self.name}: input 31 (hidden state scale) must be finite and > 0, got "
                              f"{hidden_scale}", at_runtime=True)
        cell_clip, proj_clip = f32(sv(24)), f32(sv(25))
        xs, hs, cs = f32(ins[0].scale), f32(ins[18].scale), ins[19].scale
        cell_shift, _ = _log2_exact(cs)
        x_zp, h_zp = ins[0].zp, ins[18].zp
        infos = ins
        name = self.name

        def scale_of(k):
            return f32(infos[k].scale)

        def mult(real):
            real = float(f32(real))
            if not (np.isfinite(real) and real >= 0):
                raise value_error(f"{name}: the operand scales give a rescaling factor of {real}, which is not a "
                                  f"finite non-negative number", at_runtime=True)
            return Q.quantize_multiplier(real)

        def check(i):
            """Shapes of the present tensors (optional ones are known only now)."""
            x, h, c = np.shape(i[0]), np.shape(i[18]), np.shape(i[19])
            if len(x) != 2 or len(h) != 2 or len(c) != 2 or not (x[0] == h[0] == c[0]):
                raise value_error(f"{name}: inputs 0, 18, 19 must be [batch, input], [batch, output], "
                                  f"[batch, units], got {list(x)}, {list(h)}, {list(c)}", at_runtime=True)
            n_in, n_out, u = x[1], h[1], c[1]
            want = {**{k: (u, n_in) for k in range(1, 5)}, **{k: (u, n_out) for k in range(5, 9)},
                    **{k: (u,) for k in (9, 10, 11, 12, 13, 14, 15, 20, 21, 22, 23)}, 16: (n_out, u), 17: (n_out,)}
            for k, shape in want.items():
                if k < len(i) and _given(i[k]) and tuple(np.shape(i[k])) != shape:
                    raise value_error(f"{name}: input {k} has shape {list(np.shape(i[k]))}, expected {list(shape)}",
                                      at_runtime=True)
            if not _given(i[16]) and n_out != u:
                raise value_error(f"{name}: without projection the output size ({n_out}) must equal the number "
                                  f"of units ({u})", at_runtime=True)
            if _given(i[1]) != _given(i[5]):
                raise value_error(f"{name}: inputs 1 and 5 (input-to-input and recurrent-to-input weights) must "
                                  f"both be given or both omitted (CIFG)", at_runtime=True)

        def kernel(i, o):
            check(i)
            x = np.asarray(i[0], np.int64)
            h = np.asarray(i[18], np.int64)
            c_prev = np.asarray(i[19], np.int64)
            cifg = not _given(i[1])
            batch, units = c_prev.shape
            lo16, hi16 = Q.I16_MIN, Q.I16_MAX

            def gate(g, state):     # g: 0 input, 1 forget, 2 cell, 3 output; state: the peephole's cell
                wx, wh, it = i[1 + g], i[5 + g], inter[g]
                ax = mult(scale_of(1 + g) * xs / it)
                ah = mult(scale_of(5 + g) * hs / it)
                bx = -x_zp * np.asarray(wx, np.int64).sum(axis=1)
                bh = -h_zp * np.asarray(wh, np.int64).sum(axis=1)
                acc = _matmul_acc(x, wx, bx, ax[0], ax[1], 0, 0, lo16, hi16)
                acc = _matmul_acc(h, wh, bh, ah[0], ah[1], 0, acc, lo16, hi16)
                if g != 2 and _given(i[9 + (g if g < 2 else 2)]):
                    peep = np.asarray(i[9 + (g if g < 2 else 2)], np.int64)
                    pq = mult(float(np.float64(2.0 ** cell_shift) * float(scale_of(9 + (g if g < 2 else 2))) / float(it)))
                    acc = np.clip(Q.multiply_by_quantized_multiplier(peep * state, pq[0], pq[1]) + acc, lo16, hi16)
                ln = i[20 + g] if len(i) > 20 + g else None
                if _given(ln):
                    lq = Q.quantize_multiplier(float(infos[20 + g].scale))
                    limit = min(1, int(10000 * float(f32(infos[20 + g].scale))))
                    acc = Q.int_layer_norm(acc, ln, i[12 + g] if _given(i[12 + g]) else None, lq[0], lq[1], limit)
                return acc

            f = Q.logistic16(gate(1, c_prev), 3)
            g = Q.tanh16(gate(2, c_prev), 3)
            ig = Q.wrap16(32767 - f) if cifg else Q.logistic16(gate(0, c_prev), 3)
            c = Q.sat16(Q.wrap16(Q.rdbpot(f * c_prev, 15)) + Q.wrap16(Q.rdbpot(ig * g, 30 + cell_shift)))
            if cell_clip > 0:
                qclip = int(min(max(f32(cell_clip / f32(cs)), f32(-32768)), f32(32767)))
                if qclip > 0:
                    c = np.clip(c, -qclip, qclip)
            og = Q.logistic16(gate(3, c), 3)
            t = Q.tanh16(c, 15 + cell_shift)
            hq = mult(float(np.float32(2.0 ** -15 / float(hidden_scale) * 2.0 ** -15)))
            hid = np.clip(Q.multiply_by_quantized_multiplier(og * t, hq[0], hq[1]) - hidden_zp, -128, 127)
            if _given(i[16]):
                wp = np.asarray(i[16], np.int64)
                bp = hidden_zp * wp.sum(axis=1) + (np.asarray(i[17], np.int64) if _given(i[17]) else 0)
                pq = mult(scale_of(16) * hidden_scale / hs)
                out = _matmul_acc(hid, wp, bp, pq[0], pq[1], h_zp, 0, -128, 127)
                if proj_clip > 0:
                    qp = int(min(max(f32(proj_clip / scale_of(16)), f32(-128)), f32(127)))
                    if qp > 0:
                        out = np.clip(out, -qp, qp)
            else:
                if hid.shape[1] != o[2].shape[1]:
                    raise value_error(f"{name}: without projection the output size must equal the number "
                                      f"of units ({units})", at_runtime=True)
                out = hid
            o[1][...] = c
            o[0][...] = out
            o[2][...] = out
        return kernel
