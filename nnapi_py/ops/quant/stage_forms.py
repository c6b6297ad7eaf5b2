"""OutputStage's three exact evaluations (see stage.OutputStage), chosen once at construction:
"float" (_try_float, _float: float64, exact for the values that matter), "int64" (_try_int64,
the int64 branch of _passes: one common denominator for all channels) and "general" (_general:
the reference's two steps literally)."""
import numpy as np

from .clamp import clip_inplace
from .fixedpoint import INT32_MAX, INT32_MIN, multiply_by_quantized_multiplier


class StageForms:
    """OutputStage's exact evaluations: _passes(acc, out) runs the one chosen (self.mode)."""

    def _try_int64(self, q, left, right, bias_l, amax):
        E = max(right)
        if any(left) or (E > 0 and min(right) == 0):
            return False
        # common denominator 2**(31+E): numerator and denominator of channel c scaled by 2**(E-e)
        S = 31 + E
        K, qq, corr = [], [], []
        for c in range(len(q)):
            m = E - right[c]
            qc = q[c] << m
            k = (bias_l[c] * q[c] + (1 << 30)) << m
            if E > 0:
                k += 1 << (30 + E)
            k += self.zp << S
            if (amax + abs(bias_l[c])) * qc + abs(k) + (abs(self.zp) + 2) * (1 << S) >= (1 << 62):
                return False
            K.append(k)
            qq.append(qc)
            corr.append(1 << m)
        self.mode = "int64"
        self.q = self._arr(qq)
        self.K = self._arr(K)
        self.E = np.int64(E)
        # x*q + 2**30 < 0  <=>  p < 2**(30+E) + zp * 2**S  <=>  (p >> 31) < thr
        self.thr = np.int64(((1 << (30 + E)) + (self.zp << S)) >> 31) if E > 0 else None
        self.need_neg = self.thr is not None and self.lo < self.zp
        # the [.. < 0] term is 2**31 before scaling, 2**(31+m) after: 2**m once shifted by 31
        self.corr = None if all(v == 1 for v in corr) else self._arr(corr)
        self.nvec = max((len(a) for a in (self.q, self.K, self.corr) if isinstance(a, np.ndarray)),
                        default=0)
        return True

    def _try_float(self, q_a, left_a, right_a, bias_l, bq):
        """float64 variant (5 passes instead of 8): with S = 31 + e,
            z = acc * (q 2**-S) + (bias q + 2**30 + [e>0] 2**(30+e)) 2**-S + zp,
            reference = floor(z - [e>0][z < zp + 1/2] 2**-e)   (then clamped);
        _float computes z + off (off: 0, or 128 for an int8 store) as one product P 2**-S (P =
        acc q) plus the constant K + off = k 2**-S + zp + off (k = bias q + 2**30 + [e>0]
        2**(30+e)).  Per channel either
          constant: every accumulator of the bound (|acc| <= amax) gives the same clamped
                output c (the reference is non-decreasing in acc: its clamped values at -amax
                and amax, exact integers, are equal): the channel computes 0 * acc + c + 1/2
                (a multiplier far below one output step over the whole accumulator range, often
                beside a bias that saturates it: per-channel models have such channels), or
          with R = 2**(53-S) and V = max(|lo + off|, |hi + off| + 1) over the offsets (0, and
                128 where the clamp range allows an int8 output), R >= V and K + off exact (|k|
                + |zp + off| 2**S < 2**53): a product below 2**53 is exact, and so is its sum
                with K + off wherever that sum is below R in magnitude (a multiple of 2**-S:
                representable), which covers [lo + off, hi + off + 1), every value whose floor
                is kept; a sum beyond R rounds to R or beyond (rounding is monotonic, R is a
                float) and clamps as the exact value does.  A product of 2**53 or more
                (possible only when amax q >= 2**53) rounds to at least R in magnitude, so the
                sum lies beyond R - |K + off|: then R - |K + off| >= V is required too.
        This holds for any bias and accumulator with e <= 10, and up to e = 14 (a uint8
        output) where the accumulator bound or the constant allows."""
        if left_a.any() or max(abs(self.lo), abs(self.hi)) >= (1 << 9) or abs(self.zp) >= (1 << 9):
            return False
        amax = self.amax
        # the store offsets _float may use: 128 only for an int8 output, which a clamp range
        # inside [-128, 127] allows; 0 for the others.  Exactness is needed for the values
        # whose floor is kept, [lo + off, hi + off + 1)
        offs = (0, 128) if -128 <= self.lo and self.hi <= 127 else (0,)
        vmax = max(max(abs(self.lo + off), abs(self.hi + off) + 1) for off in offs)
        # per channel, exact integers (int64, or Python ints as bq): k = b q + 2**30 + [e>0]
        # 2**(30+e) (e <= 31), S = 31 + e, R = 2**(53-S)
        e = right_a
        S = 31 + e
        k = bq + (1 << 30) + np.where(e > 0, np.left_shift(np.int64(1), 30 + e), 0)
        ak = np.abs(k)
        exact = ak < (1 << 53)
        for off in offs:                # |k| + |zp + off| 2**S < 2**53
            t = abs(self.zp + off)
            if t:
                exact &= (S < 53) & ((np.left_shift(t, np.minimum(S, 52)) < (1 << 53) - ak))
        r = np.ldexp(1.0, 53 - S)
        kS = np.asarray(k, np.float64) * np.ldexp(1.0, -S)                # k / 2**S
        far = r - np.max([np.abs(kS + self.zp + off) for off in offs], axis=0) >= vmax
        ok = exact & (r >= vmax) & ((amax * q_a < (1 << 53)) | far)
        mf = np.where(ok, q_a * np.ldexp(1.0, -S), 0.0)  # exact: a 31-bit integer times a power of two
        kf = kS + self.zp                                  # exact where ok: |k| + |zp| 2**S < 2**53
        dl = np.where(ok & (e > 0), np.ldexp(1.0, -e), 0.0)
        for c in np.flatnonzero(~ok):
            b = bias_l[c]
            if not INT32_MIN <= b - amax <= b + amax <= INT32_MAX:
                return False
            ends = multiply_by_quantized_multiplier(np.array([b - amax, b + amax]), int(q_a[c]), -int(e[c])) + self.zp
            low, high = (min(max(int(v), self.lo), self.hi) for v in ends)
            if low != high:
                return False
            kf[c] = low + 0.5                   # constant: z = c + 1/2 for every accumulator
        self.mode = "float"

        def arr(v):
            return np.float64(v[0]) if np.all(v == v[0]) else np.asarray(v, np.float64)
        self.q, self.K, self.corr = arr(mf), arr(kf), arr(dl)
        self.thr = np.float64(self.zp + 0.5)
        self.need_neg = self.lo < self.zp and bool(np.any(dl))
        self.nvec = max((len(a) for a in (self.q, self.K, self.corr) if isinstance(a, np.ndarray)),
                        default=0)
        return True

    def _float_consts(self, off):
        """(q, K, thr, inv, corr) for _float with output offset off.  When the [z < zp + 1/2]
        correction is needed and every channel has e > 0, q, K and thr are scaled by 2**e (exact:
        powers of two), so the correction subtracts the comparison's 0/1 directly and inv =
        2**-e scales back afterwards (two cheap passes instead of a masked multiply); otherwise
        inv is None and corr (2**-e per channel) is subtracted where the comparison holds."""
        q, K, corr = self.q, self.K, self.corr
        K = K + off
        thr = self.thr + off
        inv = None
        if self.need_neg and np.all(np.asarray(corr) > 0):
            inv = corr
            q, K, thr = q / corr, K / corr, thr / corr
            corr = None
        return q, K, thr, inv, corr

    def _float(self, acc, out):
        """Cast to float64, multiply, add, [correct], clamp, store.  For an 8-bit output the
        floor is the store's own truncation: after the clamp every value is >= 0 (uint8), or
        is made so by an offset of 128 folded into the constant and removed afterwards by
        flipping the top bit of each byte (int8: (v + 128) ^ 0x80 is v's two's complement
        byte).  Other outputs floor explicitly."""
        dt = out.dtype
        off = 0 if dt == np.uint8 else 128 if dt == np.int8 else None
        a, tile = acc, None
        if self.nvec and acc.ndim >= 3 and acc.shape[-2] > 1:
            tile = acc.shape[-2]
            a = acc.reshape(-1, tile * self.nvec)
        q, K, thr, inv, corr = self._tiled(("float", off or 0), tile, lambda: self._float_consts(off or 0))
        v = a.astype(np.float64)         # then *= q: faster than one mixed-type multiply
        v *= q
        v += K
        if self.need_neg:
            neg = v < thr
            if inv is not None:
                v -= neg
                v *= inv
            else:
                v -= neg * corr
        if off is None:
            np.floor(v, out=v)
            clip_inplace(v, self.lo, self.hi)
            out[...] = v.reshape(out.shape)
            return
        clip_inplace(v, self.lo + off, self.hi + off)
        if not off:
            out[...] = v.reshape(out.shape)          # v >= 0: truncation is the floor
            return
        b = out.view(np.uint8)
        b[...] = v.reshape(out.shape)
        b ^= 0x80

    def _passes(self, acc, out):
        if self.mode == "float":
            return self._float(acc, out)
        if self.mode == "general":
            return self._general(acc, out)
        if acc.dtype == np.int64 and acc.flags.c_contiguous:
            p = acc
        elif acc.dtype == np.float32:                    # exact below 2**24: faster than one cast
            p = acc.astype(np.int32, order="C").astype(np.int64)
        else:                       # C order: the tiled view below must be p itself, not a copy
            p = acc.astype(np.int64, order="C")
        q, K, corr = self.q, self.K, self.corr
        v = p
        if self.nvec and p.ndim >= 3 and p.shape[-2] > 1:
            # per-channel vectors tiled along whole rows: long contiguous inner loops
            tile = p.shape[-2]
            v = p.reshape(-1, tile * self.nvec)
            q, K, corr = self._tiled("int64", tile, lambda: (self.q, self.K, self.corr))
        v *= q
        v += K
        v >>= 31
        if self.need_neg:
            neg = v < self.thr
            if corr is None:
                v -= neg.view(np.uint8)
            else:
                d = neg.astype(np.int64)
                d *= corr
                v -= d
        if self.E:
            v >>= self.E
        clip_inplace(p, self.lo, self.hi)
        if out.shape != p.shape:
            p = p.reshape(out.shape)
        out[...] = p

    def _general(self, acc, out):
        x = np.asarray(acc).astype(np.int64) + self.bias_arr
        if self.any_left:
            x <<= self.left
            np.clip(x, INT32_MIN, INT32_MAX, out=x)
        x *= self.q
        x += 1 << 30
        x >>= 31                                   # SRDHM (q >= 0): floor((x*q + 2**30) / 2**31)
        if self.any_right:                         # RDBPOT: floor((r + 2**(e-1) - [r<0]) / 2**e)
            x += self.half - (x < 0) * self.has_right
            x >>= self.right
        x += self.zp
        clip_inplace(x, self.lo, self.hi)
        out[...] = x.reshape(out.shape)
