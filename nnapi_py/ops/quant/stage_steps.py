"""OutputStage's step table for small calls (a streaming model's one-pixel layers): each
channel's output steps found once by bisection with the exact evaluation, then one searchsorted
and one lookup per call instead of the evaluation's passes.  OutputStage.__call__ takes it for
calls on at most _SMALL_VALUES values of a stage of at most _SMALL_STEPS steps, from the third
call (or at once after prepare_small)."""
import numpy as np


_SMALL_VALUES = SMALL_VALUES = 128   # OutputStage calls on at most this many values use the step table
_SMALL_STEPS = 1 << 15   # ... with at most this many steps (8-bit outputs, <= 128 channels: the
                         # table takes about 4 ms to make for 64 channels)


class StepTable:
    """OutputStage's step table: prepare_small, small_table, _small, _step_table."""

    def prepare_small(self, n_values):
        """A stage kept for a layer whose outputs are n_values values: make the step table of
        _small now (at compilation: about 4 ms for 64 channels) rather than in the middle of
        the third execution."""
        if n_values <= _SMALL_VALUES and (self.hi - self.lo) * self.nch <= _SMALL_STEPS \
                and self._steps is None:
            self._steps = self._step_table()

    def small_table(self, dtype):
        """(sorted steps, per-channel key offsets, output value of each table position as dtype)
        of _small: output = values[steps.searchsorted(acc + offsets, side="right")] (see
        _small); None when this stage has no step table."""
        t = self._steps
        if t is None:
            return None
        steps, offs, values = t
        lut = values.get(np.dtype(dtype))
        if lut is None:
            lut = values[np.dtype(dtype)] = values[None].astype(dtype)
        return steps, offs, lut

    def _small(self, acc, out):
        """A few values (a streaming model's one-pixel layers): the output of channel c is
        lo + the number of its steps t[c, y] <= acc, where t[c, y] is the least accumulator
        whose output is >= y (the requantization is non-decreasing in acc), found once by
        bisection with the exact evaluation itself (_passes).  One searchsorted over all
        channels' steps (channel c's shifted by c * width and led by a sentinel, so the table
        is sorted and each position names one output value) and one lookup of the output
        value replace the evaluation's ten numpy passes, each of which costs its call
        overhead on a small array: 8.7 -> 4 us for 64 values."""
        if self._steps is None:
            self._steps = self._step_table()
        steps, offs, lut = self.small_table(out.dtype)
        key = acc + offs                                 # float64, exact: |key| < 2**46
        idx = steps.searchsorted(key.ravel(), side="right")
        if out.flags.c_contiguous:
            lut.take(idx, out=out.reshape(-1))
        else:
            out[...] = lut.take(idx).reshape(out.shape)

    def _step_table(self):
        n, c, amax = self.hi - self.lo, self.nch, self.amax
        y = np.arange(self.lo + 1, self.hi + 1, dtype=np.int64)[:, None]     # [n, 1]
        below = np.full((n, c), -amax - 1, np.int64)     # outputs < y there (or below the range)
        at = np.full((n, c), amax + 1, np.int64)         # outputs >= y there (or above it)
        got = np.empty((n, c), np.int64)
        # first guesses from the real arithmetic, (y - zp - 1/2) / real - bias, checked by the
        # exact evaluation: where both ends hold, bisection starts from 32 values instead of
        # the whole accumulator range (a few passes instead of about 32)
        with np.errstate(all="ignore"):
            guess = (y - self.zp - 0.5) / self._reals - self._bias
        ok = np.isfinite(guess) & (np.abs(guess) < amax)
        g = np.where(ok, guess, 0).astype(np.int64)
        lo_g, hi_g = np.clip(g - 16, -amax, amax), np.clip(g + 16, -amax, amax)
        self._passes(lo_g.astype(np.float64), got)
        ok &= got < y
        self._passes(hi_g.astype(np.float64), got)
        ok &= got >= y
        np.copyto(below, lo_g, where=ok)
        np.copyto(at, hi_g, where=ok)
        # outputs the range never reaches, or always exceeds: closed at once
        ends = np.empty((2, c), np.int64)
        self._passes(np.array([[-amax] * c, [amax] * c], np.float64), ends)
        never = y > ends[1]                              # even acc = amax stays below y
        always = y <= ends[0]                            # even acc = -amax reaches y
        np.copyto(below, amax, where=never)
        np.copyto(at, -amax, where=always)
        np.copyto(below, -amax - 1, where=always)
        while True:
            open_ = at - below > 1
            if not open_.any():
                break
            mid = (below + at) >> 1
            self._passes(mid.astype(np.float64), got)
            ge = got >= y
            np.copyto(at, mid, where=ge & open_)
            np.copyto(below, mid, where=~ge & open_)
        width = 2 * amax + 6
        shift = np.arange(c, dtype=np.int64) * width
        # per channel: a sentinel below any of its keys, then its n steps; position
        # c * (n + 1) + 1 + k (k steps <= key) holds output lo + k
        block = np.vstack([np.full((1, c), -amax - 2, np.int64), at]) + shift      # [n + 1, c]
        steps = block.T.reshape(-1).astype(np.float64)                             # sorted
        values = np.empty(c * (n + 1) + 1, np.int64)
        values[0] = self.lo                              # (no key is below channel 0's sentinel)
        values[1:] = np.tile(np.arange(self.lo, self.hi + 1, dtype=np.int64), c)
        return steps, shift.astype(np.float64), {None: values}
