"""OutputStage: the requantization of the int32 accumulators of the dense and convolution
layers (the reference's fixed-point multiply, per tensor or per channel), bit-exact and folded
into a few float64 / int64 / float32 passes.

The class is assembled from mixins, one concern each:
  stage.py        OutputStage: construction (which exact form), __call__, the tiled constants;
  stage_forms.py  StageForms: the three exact evaluations ("float", "int64", "general");
  stage_steps.py  StepTable: the step table of small calls (a streaming model's one-pixel layers);
  stage_f32.py    Float32Run, Float32Proof: the float32 form and its proof (prepare_f32);
  f32search.py    ConstantSearch: the proof's second search, exact least float32 constants."""
import numpy as np

from .f32search import ConstantSearch
from .fixedpoint import quantize_multipliers
from .stage_f32 import Float32Proof, Float32Run
from .stage_forms import StageForms
from .stage_steps import _SMALL_STEPS, _SMALL_VALUES, StepTable


class OutputStage(StageForms, StepTable, Float32Run, Float32Proof, ConstantSearch):
    """int32 accumulators -> quant8 output, bit-exact with quant.multiply_by_quantized_multiplier
    (the reference's fixed-point requantization), vectorised, per-tensor or per-channel.

    With (q, shift) = quant.quantize_multiplier(real), left = max(shift, 0), e = max(-shift, 0):
        reference(x) = RDBPOT(SRDHM(x << left, q), e)
    SRDHM(x, q) = floor((x*q + 2**30) / 2**31) for q >= 0, and RDBPOT(r, e) =
    floor((r + 2**(e-1) - [r < 0]) / 2**e); nested floor divisions by powers of two give
        reference(x) = floor((x*q + 2**30 + [e>0] (2**(30+e) - [x*q + 2**30 < 0] 2**31)) / 2**(31+e)).
    The bias (x = acc + bias) and the output zero point are folded into the additive constant.
    Three evaluations, chosen once:
      "float"   float64, exact for the values that matter (see _try_float): multiply, add,
                floor, clamp, store -- the usual case;
      "int64"   the formula above in int64 with one common denominator 2**(31+E) for all
                channels: cast, multiply, add, >> 31, [< 0] correction, >> E, clamp, store;
      "general" the two reference steps literally, per-channel vectors (multipliers > 1,
                multipliers >= 1/2 mixed with smaller ones, int64 headroom exceeded).
    The [.. < 0] correction only changes results <= zp, so it is skipped when the lower clamp is
    >= zp (ReLU, ReLU6).  Per-channel vectors are tiled along whole output rows (numpy's inner
    loops are slow on a short broadcast axis).  acc_bound bounds |acc| for the int64 headroom
    check (default: the int32 range); ch_bound (optional, per channel, each at most acc_bound)
    bounds each channel's own |acc|: prepare_f32 proves every channel over its own range only
    (a per-channel convolution's channels have sums of |w| several times apart: EfficientNet-
    Lite0's 112x112x16 projection then proves float32 where the one bound kept float64).
    """

    def __init__(self, reals, zp, lo, hi, bias=None, acc_bound=None, ch_bound=None):
        reals = np.atleast_1d(np.asarray(reals, np.float64))
        bias = None if bias is None else np.atleast_1d(np.asarray(bias, np.int64))
        nch = max(len(reals), 1 if bias is None else len(bias))
        reals = np.broadcast_to(reals, (nch,))
        bias_a = np.zeros(nch, np.int64) if bias is None else np.array(np.broadcast_to(bias, (nch,)))
        q_a, s_a = quantize_multipliers(reals)
        left_a, right_a = np.maximum(s_a, 0), np.maximum(-s_a, 0)
        q, left, right = q_a.tolist(), left_a.tolist(), right_a.tolist()
        bias_l = bias_a.tolist()
        self.lo, self.hi, self.zp = int(lo), int(hi), int(zp)
        self._tiles = {}
        amax = (1 << 31) if acc_bound is None else int(acc_bound) + 1
        self.nch, self.amax = nch, min(amax, 1 << 31)
        # per channel, the bound of its own accumulators (at most amax): prepare_f32 proves
        # each channel over its own range only
        self.amax_ch = None if ch_bound is None else np.minimum(
            np.broadcast_to(np.asarray(ch_bound, np.float64), (nch,)) + 1, float(self.amax))
        self._steps = None          # the step table of small calls (_small), made at the third
        self._calls = 0
        self._reals = np.array(reals, np.float64)      # for the step table's first guesses
        self._bias = bias_a.astype(np.float64)
        self.f32 = None             # prepare_f32: float32 (multiplier, constant) proven exact
        self.f32_fix = None         # (channels, their exact stage) the float32 pass leaves wrong
        self.f32_scaled = False     # prepare_f32: the corrected negative side as one scaled term
        self._tried_scaled = False
        # the real line each channel's rounding follows (no left shift): out ~ floor(acc m + k)
        # (and 2**-e, the negative side's correction, per channel); b q exact (q < 2**31: int64
        # for biases inside int32, else Python ints), rounded once to float64, divided by a
        # power of two (exact)
        wide = np.max(np.abs(bias_a), initial=0) >= (1 << 31)
        bq = (bias_a.astype(object) if wide else bias_a) * q_a
        scale = np.ldexp(1.0, -(31 + right_a))
        self._line = None if left_a.any() else (
            q_a * scale,
            np.asarray(bq, np.float64) * scale + 0.5 + np.where(right_a > 0, np.ldexp(1.0, -(1 + right_a)), 0.0)
            + self.zp,
            np.where(right_a > 0, np.ldexp(1.0, -right_a), 0.0))
        if self._try_float(q_a, left_a, right_a, bias_l, bq):
            return
        if not self._try_int64(q, left, right, bias_l, amax):
            self.mode = "general"
            self.bias_arr = self._arr(bias_l)
            self.q = self._arr(q)
            self.left = self._arr(left)
            self.right = self._arr(right)
            self.any_left = any(left)
            self.any_right = any(right)
            self.half = self._arr([(1 << (e - 1)) if e > 0 else 0 for e in right])
            self.has_right = self._arr([1 if e > 0 else 0 for e in right])

    def __call__(self, acc, out):
        """acc: integer-valued array (int or exact float), channels last, shaped like out
        (or reshapeable to it); writes the clamped quantized result into out."""
        if acc.size <= _SMALL_VALUES and (self.hi - self.lo) * self.nch <= _SMALL_STEPS \
                and (self.nch == 1 or acc.shape[-1] == self.nch):
            if self._steps is not None:
                return self._small(acc, out)
            self._calls += 1                # a stage used again (constant filter and bias)
            if self._calls > 2:
                return self._small(acc, out)
        return self._passes(acc, out)

    @staticmethod
    def _arr(v):
        if all(x == v[0] for x in v):
            return np.int64(v[0])
        return np.asarray(v, np.int64)

    def _tiled(self, kind, tile, make):
        """The constants make() returns, per-channel vectors tiled tile times along a row
        (tile None: as they are), kept per (kind, tile)."""
        key = (kind, tile)
        t = self._tiles.get(key)
        if t is None:
            t = tuple(np.tile(a, tile) if tile and isinstance(a, np.ndarray) else a for a in make())
            if len(self._tiles) < 16:
                self._tiles[key] = t
        return t
