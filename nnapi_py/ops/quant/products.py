"""One-row quantized products with constant weights and bias, requantized in a few numpy calls
(a streaming model's step: a convolution whose one output pixel reads its whole input, a
depthwise one, a one-row FULLY_CONNECTED): TableProduct (an exact affine form, _exact_affine,
or the stage's step table) and DirectProduct (the exact float64 forms of direct_columns)."""
import threading

import numpy as np

from ..base import kept_array
from .clamp import _CLIP_UFUNC
from .work import aligned, aligned_empty


# numpy's C einsum without the Python wrapper's argument handling (about 0.8 us a call)
c_einsum = getattr(getattr(getattr(np, "_core", None), "multiarray", None), "c_einsum", np.einsum)


def _exact_affine(taps, zx, stage, out_dtype):
    """(weights [K + 1, C], low [C], high [C], flip [C] or None) of TableProduct's direct form,
    or None where it is not exact.  With the stage in its "float" form without the negative
    correction (OutputStage._try_float: out = clamp(floor(acc * q + K)), q and K per channel,
    exact for every value that can land in the clamp range), z = x . [taps * q; K + off -
    zx * colsum(taps) * q] over the raw input x is acc * q + K + off itself, computed exactly
    when every partial sum is: all terms are multiples of the finer of the two constants'
    binary units, so a bound on the sum of their absolute values below 2**53 units (|x| <= 255)
    makes any summation order (BLAS, FMA) exact.  off = 128 for int8 outputs: after the clamp
    z >= 0, the byte store's truncation is the floor, and flipping the top bit makes the int8
    value (OutputStage._float's own trick)."""
    from fractions import Fraction
    dt = np.dtype(out_dtype)
    if stage.mode != "float" or stage.need_neg or dt.type not in (np.uint8, np.int8):
        return None
    t = np.asarray(taps, np.float64)
    if t.ndim != 2 or not np.all(np.isfinite(t)) or np.any(t != np.rint(t)) or np.abs(t).max(initial=0) > 1 << 16:
        return None
    c = t.shape[1]
    off = 128 if dt.type is np.int8 else 0
    q = np.broadcast_to(np.asarray(stage.q, np.float64), (c,))
    K = np.broadcast_to(np.asarray(stage.K, np.float64), (c,))
    ti = t.astype(np.int64)
    colsum, abssum = ti.sum(0), np.abs(ti).sum(0)
    last = []
    for j in range(c):
        qf = Fraction(float(q[j]))
        lf = Fraction(float(K[j])) + off - int(zx) * int(colsum[j]) * qf
        unit = Fraction(1, max(qf.denominator, lf.denominator))       # both powers of two
        if (255 * int(abssum[j]) * qf + abs(lf)) / unit >= 1 << 53 or Fraction(float(lf)) != lf:
            return None
        last.append(float(lf))
    w = np.ascontiguousarray(np.vstack([t * q, np.asarray(last)[None]]))   # taps * q: exact
    low = np.full(c, float(stage.lo + off))
    high = np.full(c, float(stage.hi + off))
    return w, low, high, (np.full(c, 0x80, np.uint8) if off else None)


class TableProduct:
    """The requantized output of a small quantized product in 5 numpy calls or fewer: a layer
    with one output row (a convolution whose one output pixel reads its whole input, a
    depthwise one, a one-row FULLY_CONNECTED: a streaming model's step) with constant weights
    and bias.  One float64 product of the raw input with a matrix made at compilation gives,
    per channel, either
      direct  the requantized value itself, acc * q + K (+128 for int8), exactly
              (_exact_affine; the stage's "float" form without its negative correction): then
              clamp, byte store, [top-bit flip];
      table   the accumulator plus the step table's channel offsets ([centred weights; offsets
              - zx * the weights' column sums], integers below 2**53): then one searchsorted
              and one lookup in the stage's step table (OutputStage._small).
    The direct form keeps no table: a model's step tables (128 KB a 64-channel layer) do not
    stay in cache from one step to the next, so the table form was 4.1 us a 1x1x1x64 layer in
    a running model against 3.3 us alone, and took some 50 steps to warm up.
    taps: [K, O] (out[o] = sum_k x[k] taps[k, o]) or, depthwise, [T, C] (out[c] = sum_t
    x[t, c] taps[t, c]).
    Each thread keeps its own float64 input row (with its ones entry), a view of it in the
    input's shape, the product's output row, and a flat (byte) view of the last output it was
    given when that may be kept (base.kept_array), so a call has no Python work around its numpy
    calls beyond a few attribute reads."""

    def __init__(self, taps, zx, table=None, depthwise=False, direct=None):
        t = np.asarray(taps, np.float64)
        self.depthwise, self.k, self.c = depthwise, t.shape[0], t.shape[1]
        if direct is not None:
            self.w, self.low, self.high, self.flip = direct
            self.w = aligned(self.w)
            self.steps = self.lut = None
        else:
            steps, offs, lut = table
            last = np.broadcast_to(np.asarray(offs, np.float64), (t.shape[1],)) - zx * t.sum(0)
            self.w = aligned(np.vstack([t, last[None]]))
            self.steps, self.lut = steps, lut
        self._local = threading.local()     # per thread: (input shape, row, input view, out, flat out, z)

    @classmethod
    def for_stage(cls, taps, zx, stage, out_dtype, depthwise=False):
        """One for this constant stage, or None when it has neither form.  The table form has
        the stage make its step table now (at compilation); the direct form needs none."""
        if stage is None:
            return None
        direct = _exact_affine(taps, zx, stage, out_dtype)
        if direct is not None:
            return cls(taps, zx, None, depthwise, direct)
        stage.prepare_small(np.shape(taps)[1])
        table = stage.small_table(out_dtype)
        return None if table is None else cls(taps, zx, table, depthwise)

    @property
    def direct(self):
        return self.steps is None

    def _row(self, shape):
        """A thread's float64 input row: [k + 1] (or [k + 1, C] depthwise) with a last entry
        (row) of ones, and a view of its first k entries in the input's shape."""
        k = self.k
        xa = aligned_empty((k + 1, self.c) if self.depthwise else (k + 1,), np.float64)
        xa[...] = 1
        return xa, xa[:k].reshape(shape)

    def _flat(self, out):
        """The flat view the result is stored through (bytes in the direct form), or None."""
        if not out.flags.c_contiguous:
            return None
        return out.reshape(-1).view(np.uint8) if self.steps is None else out.reshape(-1)

    def __call__(self, x, out):
        """x: the layer's raw input (k values, or [T, C] depthwise, in any shape of that size);
        out: its output."""
        loc = self._local
        try:
            shape, xa, xin, last, flat, z = loc.bufs
        except AttributeError:
            shape = last = flat = None
            z = np.empty(self.c, np.float64)
        if x.shape != shape:
            shape = x.shape
            xa, xin = self._row(shape)
            loc.bufs = (shape, xa, xin, last, flat, z)
        np.copyto(xin, x)
        if self.depthwise:
            c_einsum("tc,tc->c", xa, self.w, out=z)
        else:
            np.dot(xa, self.w, out=z)
        if out is not last:
            flat = self._flat(out)
            loc.bufs = (shape, xa, xin, out if kept_array(out) else None, flat, z)
        if self.steps is None:
            b = flat if flat is not None else np.empty(self.c, np.uint8)
            if _CLIP_UFUNC is not None:     # the clamp stored into the bytes (the store's own cast)
                _CLIP_UFUNC(z, self.low, self.high, out=b, casting="unsafe")
            else:
                np.clip(z, self.low, self.high, out=z)
                b[...] = z
            if self.flip is not None:
                np.bitwise_xor(b, self.flip, out=b)
            if flat is None:
                out[...] = b.view(out.dtype).reshape(out.shape)
            return
        idx = self.steps.searchsorted(z, side="right")
        if flat is not None:
            self.lut.take(idx, out=flat)
        else:
            out[...] = self.lut.take(idx).reshape(out.shape)


def _exact_block(t, zx, q, extra):
    """Last row of one block of DirectProduct's weights, or None where inexact: per channel j,
    z_j = x . [t[:, j] q_j; extra_j - zx colsum_j q_j] (x the raw input, |x| <= 255, with a
    last entry of 1) is computed exactly in float64 in any summation order when every term is
    a multiple of the finer of q_j's and the constant's binary units and the sum of their
    magnitudes stays below 2**53 of those units (_exact_affine's argument); extra: Fractions."""
    from fractions import Fraction
    ti = t.astype(np.int64)
    colsum, abssum = ti.sum(0), np.abs(ti).sum(0)
    last = []
    for j in range(t.shape[1]):
        qf = Fraction(float(q[j]))
        lf = extra[j] - int(zx) * int(colsum[j]) * qf
        unit = Fraction(1, max(qf.denominator, lf.denominator))
        if (255 * int(abssum[j]) * qf + abs(lf)) / unit >= 1 << 53 or Fraction(float(lf)) != lf:
            return None
        last.append(float(lf))
    return np.asarray(last, np.float64)


def direct_columns(taps, zx, stage, out_dtype):
    """DirectProduct's form of a constant stage, or None: (weights [K + 1, B, C] float64,
    low [B * C], high [B * C], combine).  With the stage in its "float" form
    (OutputStage._try_float: z = acc q + K per channel, q and K exact float64, the reference
    is clamp(floor(z - [z < zp + 1/2] d)), d = 2**-e <= 1/2 or 0), every block b computes
    z + c_b exactly from the raw input (_exact_block) and clamps it to byte bounds, so the
    byte store's truncation is the floor:
      B = 1, no negative correction (d = 0 or lo >= zp): the output byte is clamp(floor(z) +
              off, lo + off, hi + off) -- off = 0, "store" (uint8), or 128 with the top bit
              flipped after, "flip" (int8): TableProduct's direct form;
      B = 2, the negative side corrected ("add"): out = clamp(floor(z), zp, hi) +
              clamp(floor(z - d), lo, zp) - zp (for z >= zp + 1/2 the second term is zp, as
              z - d >= zp; below it the first is zp, as floor(z) <= zp: OutputStage
              .prepare_f32's two-term form, exact here), the terms stored as the bytes
              t1 + a and t2 - zp + b with a + b = 0 mod 256 (both in [0, 255]), whose
              wrapping byte sum is the output's byte (two's complement for int8).
    None where the stage is not in that float form, lo <= zp <= hi fails with a correction,
    or a block is inexact."""
    from fractions import Fraction
    dt = np.dtype(out_dtype)
    if stage.mode != "float" or dt.type not in (np.uint8, np.int8):
        return None
    t = np.asarray(taps, np.float64)
    if t.ndim != 2 or not np.all(np.isfinite(t)) or np.any(t != np.rint(t)) or np.abs(t).max(initial=0) > 1 << 16:
        return None
    c = t.shape[1]
    q = np.broadcast_to(np.asarray(stage.q, np.float64), (c,))
    K = [Fraction(float(v)) for v in np.broadcast_to(np.asarray(stage.K, np.float64), (c,))]
    lo, hi, zp = stage.lo, stage.hi, stage.zp
    signed = dt.type is np.int8
    if not stage.need_neg:
        off = 128 if signed else 0
        blocks = [([k + off for k in K], lo + off, hi + off)]
        combine = "flip" if signed else "store"
    else:
        if not lo <= zp <= hi:
            return None
        d = np.broadcast_to(np.asarray(stage.corr, np.float64), (c,))
        if np.any((d != 0) & (d > 0.5)):
            return None
        a = max(1, -zp) if signed else -zp     # a + b = 0 mod 256, both terms' bytes in [0, 255]
        b = (256 - a) if signed else zp
        if not (0 <= zp + a and hi + a <= 255 and 0 <= lo - zp + b and b <= 255 and (a + b) % 256 == 0):
            return None
        blocks = [([k + a for k in K], zp + a, hi + a),
                  ([k - Fraction(float(dj)) - zp + b for k, dj in zip(K, d)], lo - zp + b, b)]
        combine = "add"
    w = np.empty((t.shape[0] + 1, len(blocks), c), np.float64)
    low, high = [], []
    for j, (extra, lo_b, hi_b) in enumerate(blocks):
        last = _exact_block(t, zx, q, extra)
        if last is None:
            return None
        w[:-1, j] = t * q                      # exact: a 17-bit integer times a 31-bit mantissa
        w[-1, j] = last
        low.append(np.full(c, float(lo_b)))
        high.append(np.full(c, float(hi_b)))
    return w, np.concatenate(low), np.concatenate(high), combine


def flip_table(low, high):
    """The int8 output of direct_columns' "flip" form by its byte index: entry i (0 <= i < 256)
    is clamp(i, low, high) - 128 (low, high: the form's uniform bounds, the clamp range plus
    128).  Its take with mode "clip" of the product truncated to an integer (the cast) is the
    clamp, the store and the top-bit flip in one call: v >= low truncates to floor(v); any v
    below low (-1 < v < 0 included, truncated to 0) takes entry 0, clamp(0, low, high) =
    low, and any v beyond 255 entry 255 = high.  2 numpy calls instead of 3."""
    lo, hi = float(np.min(low)), float(np.max(high))
    if float(np.max(low)) != lo or float(np.min(high)) != hi or not 0 <= lo <= hi <= 255:
        raise ValueError("flip_table: the bounds are not uniform byte values")
    return (np.clip(np.arange(256), int(lo), int(hi)) - 128).astype(np.int8)


DIRECT_TWO_MAX = 1 << 17       # DirectProduct: most float64 weights of its two-term form (1 MB)


class DirectProduct:
    """The requantized output of a small quantized product whose weights and bias are
    constant -- one output row: a convolution whose one output pixel reads its whole input, a
    depthwise one, a one-row FULLY_CONNECTED (a streaming model's step) -- in 4 numpy calls:
    the raw input cast into a float64 row (with a last entry of one), one exact float64
    product with the weights of direct_columns (np.dot, or the depthwise einsum), the clamp
    stored into bytes, and one byte pass (the int8 top-bit flip, or the sum of the two terms
    of the negative side's correction); a uint8 output without the correction: 3.  No step
    table (a 64-channel layer's 128 KB, which falls out of the cache between a running
    model's steps): the depthwise layers of the wake-word models, whose stages correct their
    negative side (no activation), took quant.TableProduct's table form.
    taps: [K, O] (out[o] = sum_k x[k] taps[k, o]) or, depthwise, [T, C] (out[c] = sum_t
    x[t, c] taps[t, c]), centred integers; zx: the input zero point.  Run as
    run(x, out): x the raw input (K values, or T * C depthwise, in any shape of that size),
    out the output (any layout).  Buffers come from a pool (one set per concurrent call);
    each set keeps a flat view of the last output it wrote when that output may be kept
    (base.kept_array)."""

    def __init__(self, form, k, depthwise, signed):
        w, low, high, combine = form
        self.signed = signed
        nb, c = w.shape[1], w.shape[2]
        self.depthwise, self.k, self.c, self.blocks, self.combine = depthwise, k, c, nb, combine
        if not depthwise:
            w = aligned(w.reshape(k + 1, nb * c))       # (a cache line: gemv twice as fast)
        else:
            # the taps' terms (t q, the same in every block) and each block's constant row
            w = (aligned(w[:-1, 0]), np.ascontiguousarray(w[-1]))
        self.w = w
        self.low, self.high = low, high
        self.run = self._make_run()

    @classmethod
    def for_stage(cls, taps, zx, stage, out_dtype, depthwise=False):
        """One for this constant stage, or None where direct_columns has no form, or where its
        two-term form would have more than DIRECT_TWO_MAX weights (a large layer keeps
        TableProduct: one block of weights and a step table, as before).  (A layer of one or a
        few channels, whose step table would stay in cache, takes it too: alone its table
        lookup costs a little less than the two blocks' clamp and sum, but in a running
        wake-word model the calls it shares with the depthwise layers are the warm ones: its
        one-row FULLY_CONNECTED layers of one unit measured no slower this way, CPU time in one
        process, alternating.)"""
        if stage is None or _CLIP_UFUNC is None:
            return None
        k, c = np.shape(taps)
        if stage.mode == "float" and stage.need_neg and 2 * (k + 1) * c > DIRECT_TWO_MAX:
            return None
        form = direct_columns(taps, zx, stage, out_dtype)
        return None if form is None else cls(form, np.shape(taps)[0], depthwise,
                                                  np.dtype(out_dtype).type is np.int8)

    def __call__(self, x, out):
        self.run(x, out)

    def _make_run(self):
        k, c, nb, depthwise, combine = self.k, self.c, self.blocks, self.depthwise, self.combine
        low, high = self.low, self.high
        pool = []
        pop, push = pool.pop, pool.append
        copyto, dot, mul, clip, add = np.copyto, np.dot, np.multiply, _CLIP_UFUNC, np.add
        mode = {"store": 0, "flip": 1, "add": 2 if self.signed else 3}[combine]
        if mode == 1:
            tab = flip_table(low, high)
            take = tab.take
        if depthwise:
            # the products x[t, c] * (taps q)[t, c] in place over the cast input, then every
            # block's sum over t plus its constant by one np.dot with a [blocks, T + blocks]
            # matrix of ones and zeros (for one block a vector: gemv): the same exact terms as
            # direct_columns' weights (their sum exact in any order), where an einsum over
            # [T + 1, blocks, C] cost about twice as much (its ~3 us call floor)
            tq, consts = self.w
            sel = np.zeros((nb, k + nb), np.float64)
            sel[:, :k] = 1
            sel[np.arange(nb), k + np.arange(nb)] = 1
            w = sel[0] if nb == 1 else sel
        else:
            w = self.w

        def new(shape):
            if depthwise:
                xa = aligned_empty((k + nb, c), np.float64)
                xa[k:] = consts
            else:
                xa = aligned_empty(k + 1, np.float64)
                xa[k] = 1
            z = aligned_empty(nb * c, np.float64)
            b = np.empty(nb * c, np.intp if mode == 1 else np.uint8)
            # [input shape, row, its view in that shape, product, flat product, bytes (the
            #  flip's table indices), the two halves as int8 and as uint8, last output, its flat
            #  view, the taps' rows]
            return [shape, xa, xa[:k].reshape(shape), z.reshape(nb, c) if depthwise and nb > 1 else z, z, b,
                    b[:c].view(np.int8), b[c:].view(np.int8), b[:c], b[c:], None, None, xa[:k]]

        def run(x, out):
            try:
                f = pop()
            except IndexError:
                f = new(x.shape)
            if x.shape != f[0]:
                f[0], f[2] = x.shape, f[1][:k].reshape(x.shape)
            copyto(f[2], x)
            if depthwise:
                mul(f[12], tq, out=f[12])
                dot(w, f[1], out=f[3])
            else:
                dot(f[1], w, out=f[3])
            if out is f[10]:
                o = f[11]
            elif out.flags.c_contiguous:
                o = out.reshape(-1)
                if kept_array(out):
                    f[10], f[11] = out, o
            else:
                o = None
            r = o if o is not None else np.empty(c, out.dtype)
            if mode == 1:                   # int8, one term: v + 128 truncated, its clamp's table
                copyto(f[5], f[4], casting="unsafe")
                take(f[5], None, r, "clip")
            elif mode == 0:                 # uint8, one term: the clamp stored into the output
                clip(f[4], low, high, out=f[4])
                copyto(r, f[4], casting="unsafe")
            else:
                clip(f[4], low, high, out=f[4])
                copyto(f[5], f[4], casting="unsafe")
                if mode == 2:               # int8, two terms: their wrapping byte sum
                    add(f[6], f[7], out=r)
                else:                       # uint8, two terms
                    add(f[8], f[9], out=r)
            if o is None:                   # (a strided output: through a contiguous row)
                out[...] = r.reshape(out.shape)
            push(f)
        return run
