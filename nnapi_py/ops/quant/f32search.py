"""Searches for least float32 constants: _walk_to_least (an element-wise walk by ulps to the
least value a monotonic condition holds at; PairAffine's constant too) and ConstantSearch,
OutputStage.prepare_f32's second search (the multiplier nudged by up to _M_ULPS ulps, and for
each the one constant that can pass, found exactly).

Tuning constants (_M_NUDGES, _K_WALK, _CRITICAL_ROWS) are read here at call time: a test that
changes them patches this module, not the package."""
import numpy as np


# prepare_f32's second search (OutputStage._search_constants): the multiplier nudged by 0, 1,
# -1, ... _M_ULPS ulps (4: over the three quantized CNNs of the corpus, 16 proves a few more
# channels for twice the compilation time); the constant's walk to the least one passing the
# steps, at most _K_WALK ulps each way, over the _CRITICAL_ROWS steps that set it
_M_ULPS = 4
_M_NUDGES = [0] + [s * d for d in range(1, _M_ULPS + 1) for s in (1, -1)]
_K_WALK = 8
_CRITICAL_ROWS = 8


def _walk_to_least(c, holds, walk):
    """Each element of c (float32) moved up an ulp at a time until holds(c) is true there (at
    most walk steps), then down while holds still is: its least float32 value that holds,
    where that lies within the walk of the start (elsewhere c is left where the walk ends;
    the callers' checks decide).  holds must be non-decreasing in c, element by element."""
    inf = np.float32(np.inf)
    for _ in range(walk):
        low = ~holds(c)
        if not low.any():
            break
        c = np.where(low, np.nextafter(c, inf), c)
    for _ in range(walk):
        d = np.nextafter(c, -inf)
        still = holds(d)
        if not still.any():
            break
        c = np.where(still, d, c)
    return c


class ConstantSearch:
    """OutputStage's _search_constants (prepare_f32's second search)."""

    def _search_constants(self, todo, m0, k0, kb0, below, at, need_below, need_at, y, off_f, neg, scaled, f32):
        """prepare_f32's second search, for the channels todo that no nudged candidate passed:
        the multiplier m0 nudged by up to _M_ULPS ulps each way, and for each the exact
        constant.  The float32 value fl(p + fl(c + off)) is non-decreasing in the constant c,
        so each step's condition at t_y (value >= y) holds for every c from a least one on,
        and the condition at t_y - 1 (value < y) for every c below a bound: the least c of the
        first kind over all steps is the one constant that can pass, if any does.  With the
        negative side's correction in two terms the steps above zp depend on k alone and those
        at or below it on kb alone (the other term is clamped to zp there), so each side has
        its own least constant; in the scaled one-term form (scaled) both sides depend on k, a
        step y at or below zp reached where u >= y + 2**-e.  Each candidate is then checked at
        every step as the first search checks it (f32).  Returns (channels found, their m, k,
        kb)."""
        inf = np.float32(np.inf)
        yb = y + off_f                                       # [n, 1]
        upper = (y[:, 0] > self.zp) if neg and not scaled else np.ones(len(y), bool)
        sides = [(upper, 0)] + ([(~upper, 1)] if neg and not scaled else [])
        ythr = np.broadcast_to(yb, (len(y), len(todo)))          # each step's threshold
        if scaled:                                               # below zp: u >= y + 2**-e
            ythr = ythr + np.where(y <= self.zp, kb0[todo][None].astype(np.float64), 0.0)
        # every multiplier candidate at once: [D, steps, channels] (D = len(_M_NUDGES))
        dms = np.asarray(_M_NUDGES, np.int32)
        mm = (m0.view(np.int32)[todo][None] + dms[:, None]).view(np.float32)      # m > 0: ulps away
        pa = np.where(need_at[:, todo][None], at[:, todo][None] * mm[:, None], inf)
        pb = np.where(need_below[:, todo][None], below[:, todo][None] * mm[:, None], -inf)
        shape = (len(dms), len(todo))
        consts = [np.broadcast_to(k0[todo], shape).copy(), np.broadcast_to(kb0[todo], shape).copy()]
        ok = np.ones(shape, bool)
        for rows, side in sides:
            if not rows.any():
                continue
            # the least constant over a side's steps is set by the few steps where y - p is
            # largest: the walk runs on those _CRITICAL_ROWS (per candidate), the check of the
            # constant found on every step
            p = pa[:, rows]
            yr = np.broadcast_to(ythr[rows][None], p.shape)
            if p.shape[1] > _CRITICAL_ROWS:
                sel = np.argpartition(p - yr, _CRITICAL_ROWS, axis=1)[:, :_CRITICAL_ROWS]
                p, yr = np.take_along_axis(p, sel, 1), np.take_along_axis(yr, sel, 1)
            c = (yr - p - off_f).astype(np.float32)              # about the least, then exact
            c[~np.isfinite(c)] = -inf                            # no accumulator reaches this step
            c = _walk_to_least(c, lambda cc: (p + (cc + off_f)) >= yr, _K_WALK)
            least = c.max(axis=1)
            consts[side] = np.where(np.isfinite(least), least, consts[side]).astype(np.float32)
            ok &= ~np.any((pb[:, rows] + (consts[side] + off_f)[:, None]) >= ythr[rows][None], axis=1)
        # each channel takes the first candidate (in _M_NUDGES order) that passes every step
        di, ci = np.nonzero(ok)
        if len(di):
            kk, kb = consts[0][di, ci], consts[1][di, ci]
            fine = ((f32(pb[di, :, ci].T, kk, kb) < yb) & (f32(pa[di, :, ci].T, kk, kb) >= yb)).all(axis=0)
            passed = np.zeros(shape, bool)
            passed[di[fine], ci[fine]] = True
            has = passed.any(axis=0)
            first = np.argmax(passed, axis=0)[has]
            cols = np.flatnonzero(has)
            return todo[cols], mm[first, cols], consts[0][first, cols], consts[1][first, cols]
        e = np.zeros(0, np.float32)
        return np.zeros(0, np.int64), e, e, e
