"""OutputStage's float32 form: a stage kept for float32 accumulators (exact integers below
2**24) and 8-bit outputs proven, once, to give the reference's result for every accumulator as
one float32 multiply, add and clamp per value (Float32Proof.prepare_f32), and evaluated that
way (Float32Run.consume).

Tuning constants (_STEP_WINDOWS, _NEG_SCALED, _NEG_MAX_E, _PROBE_CHANNELS) are read here at
call time: a test that changes them patches this module, not the package."""
import numpy as np

from .clamp import clip_inplace, qrange_of_dtype
from .exact import _EXACT_F32
from .stage_steps import _SMALL_VALUES
from .work import _work


# prepare_f32's windows around the line's guess of each step: the narrow one finds every step
# of the corpus's models (the guess is exact, or 1-2 low on the corrected side, which the guess
# adds; without the correction its first two points); the wide one is taken only where the
# narrow one misses a step
_STEP_WINDOWS = (np.arange(-1, 2, dtype=np.float64), np.arange(-4, 5, dtype=np.float64))
# the corrected negative side in one float32 term (prepare_f32, _f32_all) where 2**-e >= 2**-_NEG_MAX_E
_NEG_SCALED = True
_NEG_MAX_E = 14
_PROBE_CHANNELS = 64            # prepare_f32 on stages of more channels: a sample of this many first


class Float32Run:
    """The float32 form prepare_f32 proved, run: consume, _f32, _f32_all, _scaled_consts."""

    def consume(self, acc, out):
        """__call__ for an accumulator the caller gives up (its values may be overwritten):
        float32 accumulators of a stage prepare_f32 proved take its float32 evaluation."""
        f = self.f32
        if f and acc.dtype == np.float32 and acc.size > _SMALL_VALUES and out.dtype.itemsize == 1 \
                and acc.flags.c_contiguous:
            return self._f32(acc, out, f)
        return self(acc, out)

    def _f32(self, acc, out, f):
        fix = self.f32_fix
        if fix is not None and acc.shape[-1] == self.nch:
            chans, exact = fix
            part = np.ascontiguousarray(acc[..., chans])    # a copy: acc is overwritten below
            self._f32_all(acc, out, f)
            got = np.empty(part.shape, out.dtype)
            exact(part, got)
            out[..., chans] = got
            return
        if fix is not None:
            return self(acc, out)
        self._f32_all(acc, out, f)

    def _f32_all(self, acc, out, f):
        """The float32 form prepare_f32 proved (f = (m, k, kb)): per-channel constants tiled
        along whole output rows; kb None: one term; kb with f32_scaled: the corrected negative
        side in one term at 2**e times the scale (_scaled_consts); else two clamped terms."""
        m, k, kb = f
        off = 128 if out.dtype == np.int8 else 0
        v, tile = acc, None
        if any(isinstance(a, np.ndarray) for a in f):
            tile = acc.shape[-2] if acc.ndim >= 3 and acc.shape[-2] > 1 else None
            v = acc.reshape(-1, (tile or 1) * self.nch)
        lo, hi = np.float32(self.lo + off), np.float32(self.hi + off)
        b = out.view(np.uint8)
        if kb is not None and self.f32_scaled:
            # v = acc M + K, v -= [v < T] (the reference's z - 2**-e below zp + 1/2; exact:
            # v - 1 is a float32 there), v *= 2**-e: one term instead of two clamped ones
            # and their byte sum
            M, K, T, inv = self._tiled(("f32s", off), tile, lambda: self._scaled_consts(f, off))
            np.multiply(v, M, out=v)
            np.add(v, K, out=v)
            below = _work(("f32s", np.bool_), v.shape)
            np.less(v, T, out=below)
            np.subtract(v, below, out=v)
            np.multiply(v, inv, out=v)
            clip_inplace(v, lo, hi)
            b[...] = v.reshape(out.shape)
        else:
            m, k, kb = self._tiled(("f32", off), tile, lambda: (
                m, k + np.float32(off), None if kb is None else kb + np.float32(off)))
            np.multiply(v, m, out=v)
            if kb is None:
                np.add(v, k, out=v)
                clip_inplace(v, lo, hi)
                b[...] = v.reshape(out.shape)
            else:                           # the negative side's second term (prepare_f32)
                w = _work(("f32w", np.float32), v.shape)
                np.add(v, kb, out=w)
                np.add(v, k, out=v)
                z = np.float32(self.zp + off)
                clip_inplace(v, z, hi)
                clip_inplace(w, lo, z)
                b[...] = v.reshape(out.shape)
                w8 = _work(("f32w", np.uint8), v.shape)
                w8[...] = w
                b += w8.reshape(out.shape)  # uint8 wraps: the true sum - zp is in range
                b -= np.uint8((self.zp + off) & 0xFF)
        if off:
            b ^= 0x80

    def _scaled_consts(self, f, off):
        """(M, K, T, inv) of _f32_all's scaled form: with s = 2**e per channel (1 where there
        is no correction), M = m s, K = (k + off) s, T = (zp + off + 1/2) s (-inf: none),
        inv = 1/s; every product by s exact (powers of two)."""
        m, k, d = (np.asarray(a, np.float32) for a in f)        # 0-d where one for all channels
        has = d > 0
        sc = np.where(has, np.float32(1) / np.where(has, d, np.float32(1)), np.float32(1))
        t = np.where(has, np.float32(self.zp + off + 0.5) * sc, -np.inf)

        def as_f32(a):                          # a scalar stays a scalar, a vector a vector
            a = np.asarray(a, np.float32)
            return np.float32(a) if a.ndim == 0 else a
        return as_f32(m * sc), as_f32((k + np.float32(off)) * sc), as_f32(t), as_f32(np.float32(1) / sc)


class Float32Proof:
    """prepare_f32: the proof of the float32 form, per channel (the second search of the
    channels its nudged candidates leave is ConstantSearch's)."""

    def prepare_f32(self, out_dtype):
        """Try to prove, for a stage kept for float32 accumulators and 8-bit outputs (|acc| <=
        amax <= 2**24: exact float32 integers), that clamp(acc * m + k) in float32 -- one
        multiply, one add, one clamp, the store's truncation (int8: offset 128 and a flipped top
        bit, as _float) -- gives the reference's result for every accumulator, per channel with
        m the float32 multiplier or a neighbour and k the float32 constant or a neighbour.
        Both evaluations are non-decreasing step functions of acc (the multiplier is >= 0;
        float32 rounding is monotonic), so they agree everywhere when the float32 one agrees on
        both sides of each of the reference's steps: for every output y in (lo, hi] the least
        accumulator t_y whose output is >= y (found exactly: the real-arithmetic guess, then the
        reference evaluated at the guess and its neighbours, _STEP_WINDOWS) must give >= y and
        t_y - 1 < y (ends beyond +-amax: only the side inside).  2 (hi - lo) points per channel
        and candidate; a channel that failed a candidate is first tried at the step where it
        failed (compilation: EfficientNet-Lite0's proofs 1.9-2.4 -> 0.9-1.1 s, the same stages
        and constants).  Where the reference corrects its negative side (no activation, lo < zp:
        z < zp + 1/2 rounds z - 2**-e), the float32 form is clamp(u, zp, hi) + clamp(u - 2**-e,
        lo, zp) - zp (u = acc m + k; each clamp truncated; the sum of two non-decreasing terms).
        Channels that none of the 21 candidates passes get a second search
        (_search_constants: the multiplier up to _M_ULPS ulps away, and for each the one
        constant that can pass, found exactly); the last few are evaluated exactly after the
        float32 pass (f32_fix).  It holds when float32's rounding of acc * m stays well inside
        one step (multipliers not much below 0.01); otherwise the float64 evaluation stays.
        The corrected negative side is first proven in the one-term scaled form (_f32_all,
        one constant k for both sides); where that leaves channels to the fix-up or fails, the
        two-term form (its own kb for the lower side: one constant more to fit) is proven too
        and the one with fewer channels left taken."""
        if self._line is None or self.amax > _EXACT_F32 or self.f32 is not None:
            return bool(self.f32)
        ok = self._prove_f32(out_dtype, _NEG_SCALED)
        if not self._tried_scaled or (ok and self.f32_fix is None):
            return ok
        first = (ok, self.f32, self.f32_fix, self.f32_scaled)
        self.f32, self.f32_fix, self.f32_scaled = None, None, False
        ok2 = self._prove_f32(out_dtype, False)

        def left(okx, fix):
            return self.nch + 1 if not okx else (0 if fix is None else len(fix[0]))
        if left(ok2, self.f32_fix) < left(first[0], first[2]):
            return ok2
        ok, self.f32, self.f32_fix, self.f32_scaled = first
        return ok

    def _ch_bound(self, sel):
        return None if self.amax_ch is None else self.amax_ch[sel] - 1

    def _prove_f32(self, out_dtype, scaled_ok):
        """prepare_f32's proof, the corrected negative side in the scaled one-term form where
        scaled_ok (and every 2**-e allows it: self._tried_scaled), else in two terms."""
        self._tried_scaled = False
        self.f32 = False
        dt = np.dtype(out_dtype)
        if dt not in (np.dtype(np.uint8), np.dtype(np.int8)):
            return False
        off = 128 if dt == np.int8 else 0
        lo_, hi_ = qrange_of_dtype(dt)
        if not lo_ <= self.lo < self.hi <= hi_:
            return False
        nch = self.nch
        amax = self.amax if self.amax_ch is None else self.amax_ch
        q, K, d = self._line
        if not np.all(q > 0):
            return False
        if nch > 4 * _PROBE_CHANNELS:
            # many channels: the proof on an even sample of them first (a stage of 1792
            # channels that fails costs some 0.25 s of compilation; the sample about 1/20 of
            # that).  Only a speed decision: a stage the sample rejects keeps float64
            sel = np.unique(np.linspace(0, nch - 1, _PROBE_CHANNELS).astype(np.int64))
            probe = type(self)(self._reals[sel], self.zp, self.lo, self.hi,
                               bias=self._bias[sel].astype(np.int64), acc_bound=self.amax - 1,
                               ch_bound=self._ch_bound(sel))
            if not probe.prepare_f32(out_dtype):
                return False
        # the negative side's correction: z < zp + 1/2 rounds z - 2**-e instead of z; then
        # out = clamp(u, zp, hi) + clamp(u - 2**-e, lo, zp) - zp (each truncated; u = acc m + k):
        # above zp + 1/2 the second term is zp, below it the first one is
        neg = self.lo < self.zp and bool(np.any(d > 0))
        if neg and not self.zp <= self.hi:
            return False
        y = np.arange(self.lo + 1, self.hi + 1, dtype=np.float64)[:, None]          # [n, 1]
        guess = np.clip(np.ceil((y - K) / q), -amax - 8, amax + 8)                  # [n, nch]
        if neg:                 # the corrected side's steps lie 1 or 2 above the line's
            guess += y <= self.zp
        narrow, wide = _STEP_WINDOWS
        # a narrow window first (without the correction the guess is the step itself: two
        # points), a wide one where it misses
        for offsets in ((narrow if neg else narrow[:2]), wide):
            win = guess[None] + offsets[:, None, None]                              # [w, n, nch]
            np.clip(win, -amax, amax, out=win)
            ref = np.empty(win.shape, np.int64)
            self._passes(win.reshape(-1, nch), ref.reshape(-1, nch))
            ge = ref >= y[None]
            # the reference is non-decreasing along the window: the first point reaching y is
            # the count of those below it (argmax over the short first axis is slower)
            below_y = np.count_nonzero(~ge, axis=0)
            some = below_y < len(offsets)
            first = np.minimum(below_y, len(offsets) - 1)
            # a step inside the window (a point below it too), or beyond an end of the bound
            at_low = some & ((first > 0) | (win[0] <= -amax))
            if np.all(at_low | (~some & (win[-1] >= amax))):
                break
        else:
            return False
        t = np.take_along_axis(win, first[None], 0)[0]                              # exact steps
        t = np.where(some, t, amax + 1.0)
        below = np.clip(t - 1, -amax, amax).astype(np.float32)
        at = np.clip(t, -amax, amax).astype(np.float32)
        need_below = t - 1 >= -amax             # some accumulator lies below the step
        need_at = t <= amax                     # some accumulator reaches it
        lo_f, hi_f = np.float32(self.lo + off), np.float32(self.hi + off)
        yb = y + off
        # the corrected side as one term (_f32_all): u - 2**-e [u < zp + 1/2], computed at 2**e
        # times the scale (exact: powers of two) so that the correction subtracts the
        # comparison itself; kb then holds each channel's 2**-e (0: no correction).  Where
        # some 2**e u could reach 2**23 (e > _NEG_MAX_E) the two-term form stays
        scaled = neg and scaled_ok and bool(np.all(d[d > 0] >= 2.0 ** -_NEG_MAX_E))
        self._tried_scaled = scaled
        m0, k0 = q.astype(np.float32), K.astype(np.float32)
        kb0 = d.astype(np.float32) if scaled else (K - d).astype(np.float32)
        chosen_m, chosen_k, chosen_kb = m0.copy(), k0.copy(), kb0.copy()
        done = np.zeros(nch, bool)
        zp_f = np.float32(self.zp + off)
        off_f = np.float32(off)
        thr_f = np.float32(self.zp + off + 0.5)

        def f32(p, kk, kb):
            """_f32_all's values at products p = acc * m (float32), as compared with the
            steps: without the correction, v = p + (k + off), whose clamp and truncation
            (lo + off < y + off <= hi + off, an integer) keep v < y + off as it is; with it,
            scaled: v - 2**-e (kb) where v < zp + 1/2 (exact in float64, the value _f32_all
            computes at 2**e times the scale), else the clamped and truncated sum of both
            terms."""
            v = p + (kk + off_f)
            if not neg:
                return v
            if scaled:              # u - 2**-e where u < zp + 1/2: exact in float64
                return v - np.where(v < thr_f, np.asarray(kb, np.float64), 0.0)
            w = p + (kb + off_f)
            clip_inplace(v, zp_f, hi_f)
            clip_inplace(w, lo_f, zp_f)
            return np.floor(v) + np.floor(w) - zp_f

        def nudged(a):                  # a's candidates: a nudged by 0, 1, -1, 2, -2, 3, -3 ulps
            up, dn = [a], [a]
            for _ in range(3):
                up.append(np.nextafter(up[-1], np.float32(np.inf)))
                dn.append(np.nextafter(dn[-1], np.float32(-np.inf)))
            return np.stack([a, up[1], dn[1], up[2], dn[2], up[3], dn[3]])

        def full(pb, pa, kk, kb):       # per channel: passes every step? and the first failing one
            fine = (f32(pb, kk, kb) < yb) & (f32(pa, kk, kb) >= yb)
            return fine.all(axis=0), np.argmin(fine, axis=0)

        # per multiplier candidate (m0, then one ulp up, one down), the constant candidates in
        # order; each channel takes the first that passes.  A channel that failed a candidate
        # is tried first at the step it failed (most fail the next one there too): only those
        # passing that step are evaluated at every step
        bad_row = None                  # per open channel: a step its last candidate failed at
        todo = np.arange(nch)           # the open channels
        for dm in (0, 1, -1):
            mm = m0 if not dm else np.nextafter(m0, np.float32(dm * np.inf))
            t = todo
            whole = len(t) == nch       # all channels: no copies of the step tables
            bt, at_, mt = (below, at, mm) if whole else (below[:, t], at[:, t], mm[t])
            # the products, as _f32_all rounds them; where no accumulator lies below (at) a
            # step, -inf (+inf) instead: compared as passing
            pb = np.where(need_below if whole else need_below[:, t], bt * mt, np.float32(-np.inf))
            pa = np.where(need_at if whole else need_at[:, t], at_ * mt, np.float32(np.inf))
            kks = nudged(k0[t])
            kbs = np.broadcast_to(kb0[t], kks.shape) if scaled else nudged(kb0[t])
            open_ = np.ones(len(t), bool)
            js = range(7)
            if bad_row is None:         # the first candidate on every channel: most pass it
                ok, bad_row = full(pb, pa, kks[0], kbs[0])
                chosen_m[t[ok]], chosen_k[t[ok]], chosen_kb[t[ok]] = mt[ok], kks[0][ok], kbs[0][ok]
                open_ &= ~ok
                js = range(1, 7)
            if open_.any():
                cols = np.arange(len(t))
                quick = (f32(pb[bad_row, cols][None], kks, kbs) < yb[bad_row, 0]) & \
                    (f32(pa[bad_row, cols][None], kks, kbs) >= yb[bad_row, 0])        # [7, open]
                for j in js:
                    idx = np.flatnonzero(open_ & quick[j])
                    if not len(idx):
                        continue
                    ok, rows = full(pb[:, idx], pa[:, idx], kks[j, idx], kbs[j, idx])
                    bad_row[idx] = rows
                    won = idx[ok]
                    chosen_m[t[won]], chosen_k[t[won]], chosen_kb[t[won]] = mt[won], kks[j, won], kbs[j, won]
                    open_[won] = False
            done[t[~open_]] = True
            todo, bad_row = t[open_], bad_row[open_]
            if not len(todo):
                break
        if not done.all():
            with np.errstate(invalid="ignore", over="ignore"):
                won, cm, ck, ckb = self._search_constants(np.flatnonzero(~done), m0, k0, kb0, below, at, need_below,
                                                          need_at, y, off_f, neg, scaled, f32)
            chosen_m[won], chosen_k[won], chosen_kb[won] = cm, ck, ckb
            done[won] = True
        if not done.all():
            # a few channels where float32 cannot follow the reference's steps (a small
            # multiplier puts some step within float32's rounding of acc * m): the float32
            # pass runs on all channels and those are evaluated again exactly and overwritten
            bad = np.flatnonzero(~done)
            if nch < 4 or 4 * len(bad) > nch:
                return False
            self.f32_fix = (bad, type(self)(self._reals[bad], self.zp, self.lo, self.hi,
                                            bias=self._bias[bad].astype(np.int64), acc_bound=self.amax - 1,
                                            ch_bound=self._ch_bound(bad)))

        def arr(v):
            return v[0] if np.all(v == v[0]) else v
        self.f32 = (arr(chosen_m), arr(chosen_k), arr(chosen_kb) if neg else None)
        self.f32_scaled = scaled
        return True
