"""Quantized LSTM cells: QUANTIZED_16BIT_LSTM (and QUANTIZED_LSTM when implemented).

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


@register
class Quantized16BitLstm(Op):
    name = "QUANTIZED_16BIT_LSTM"
    optional_inputs = ()

    def validate(self, sig):
        sig.count(15, 2)
        check_present(sig)
        for k in (0, 14):
            sig.types("input", k, (Q8,), ROLES[k])
            o = sig.ins[k]
            if o.scale != 1 / 128 or o.zp != 128:
                sig.fail(f"input {k} ({ROLES[k]}) must have scale 1/128 and zeroPoint 128, got {o.scale} and {o.zp}")
        w = sig.ins[1]
        for k in range(1, 9):
            sig.types("input", k, (Q8,), ROLES[k])
            if k > 1 and (sig.ins[k].scale != w.scale or sig.ins[k].zp != w.zp):
                sig.fail(f"input {k} ({ROLES[k]}) must have the scale and zeroPoint of input 1 "
                         f"({w.scale}, {w.zp}), got {sig.ins[k].scale} and {sig.ins[k].zp}")
        for k in range(9, 13):
            sig.types("input", k, (I32,), ROLES[k])
            b = sig.ins[k]
            if b.zp != 0 or abs(b.scale - w.scale / 128) > 1e-6 * w.scale / 128:
                sig.fail(f"input {k} ({ROLES[k]}) must have zeroPoint 0 and scale input 1's scale / 128 "
                         f"({w.scale / 128}), got {b.scale} and {b.zp}")
        sig.types("input", 13, (Q16S,), ROLES[13])
        if sig.ins[13].scale != 1 / 2048 or sig.ins[13].zp != 0:
            sig.fail(f"input 13 (previous cell state) must have scale 1/2048 (4 integer bits) and zeroPoint 0, "
                     f"got {sig.ins[13].scale} and {sig.ins[13].zp}")
        sig.types("output", 0, (Q16S,), "cell state")
        sig.types("output", 1, (Q8,), "output")
        sig.same_quant("output", 0, sig.ins[13], ref="input 13 (previous cell state)")
        sig.same_quant("output", 1, sig.ins[14], ref="input 14 (previous output)")
        return 3

    def _dims(self, ins):
        def fail(m):
            raise value_error(f"{self.name}: {m}", at_runtime=False)
        d = ins[0].dims
        if d is None or len(d) != 2:
            fail(f"input 0 (input) must be a 2-D tensor, got {d}")
        b, n_in = d
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
