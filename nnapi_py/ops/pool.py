"""2-D pooling: AVERAGE_POOL_2D, L2_POOL_2D, MAX_POOL_2D.

Inputs: explicit padding (10 or 11 inputs) or implicit SAME/VALID padding (7 or 8), the
optional trailing BOOL selecting NCHW.  The reference semantics (TFLite kernels):

* windows are clipped to the input: padded cells never take part, AVERAGE and L2 divide by
  the number of *valid* cells of each window;
* quantized AVERAGE sums the raw quantized values in int32 and divides by the count,
  rounding half away from zero; MAX takes the raw maximum; the output keeps the input's
  scale and zeroPoint, then the fused activation clamps in the quantized domain;
* float16 is computed in float32 (MAX exactly in float16) and rounded once.

Reductions are separable: a window reduction is a reduction along W followed by one along
H.  Each pass is a short loop over the filter taps (never over pixels) applying one
vectorised ufunc to a strided slice of the whole tensor; a tap's slice is clipped to the
output positions whose input cell is inside the image, which implements padding without
materialising a padded copy; the slices of both passes are worked out once per layer
(_Geometry._program: a 4x4x32 max pool 7 -> 4 us).  A pool with a single output position
(global pooling, e.g. MobileNet's 7x7 average pool) is one reduction of the valid window.
"""
import numpy as np

from .. import constants as C
from .base import Op, kept_array, register, value_error
from .padding import implicit_padding, out_size
from . import quant as Q
from . import common
from .common import (check_layout, check_rank4, check_scalar_type, nchw_flag, nhwc_kernel, scalar_of,
                      zero_sized_const_level)

F16, F32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32
Q8, Q8S = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED

EXPLICIT_NAMES = ("padding_left", "padding_right", "padding_top", "padding_bottom",
                  "stride_width", "stride_height", "filter_width", "filter_height", "fused activation")
IMPLICIT_NAMES = ("padding scheme", "stride_width", "stride_height", "filter_width", "filter_height",
                  "fused activation")


class PoolParams:
    __slots__ = ("pl", "pr", "pt", "pb", "sw", "sh", "fw", "fh", "fuse", "nchw")


EXPLICIT_INDEX = {"pl": 1, "pr": 2, "pt": 3, "pb": 4, "sw": 5, "sh": 6, "fw": 7, "fh": 8}
IMPLICIT_INDEX = {"sw": 2, "sh": 3, "fw": 4, "fh": 5}
LONG = {"pl": "padding_left", "pr": "padding_right", "pt": "padding_top", "pb": "padding_bottom",
        "sw": "stride_width", "sh": "stride_height", "fw": "filter_width", "fh": "filter_height"}


def _check_ranges(fail, p, explicit, implicit_pads=False):
    """Parameter ranges (reference prepare()); fail(msg) raises.  implicit_pads: the
    paddings were computed from a PaddingCode (named as such in messages)."""
    index = EXPLICIT_INDEX if explicit else IMPLICIT_INDEX

    def name(k):
        if k in index:
            return f"input {index[k]} ({LONG[k]})"
        return f"computed {LONG[k]}" if implicit_pads else LONG[k]
    if explicit:
        for k in ("pl", "pr", "pt", "pb"):
            v = getattr(p, k)
            if v is not None and v < 0:
                fail(f"{name(k)} must be >= 0, got {v}")
    for k in ("sw", "sh", "fw", "fh"):
        v = getattr(p, k)
        if v is not None and v <= 0:
            fail(f"{name(k)} must be > 0, got {v}")
    if explicit or implicit_pads:
        for pk, fk in (("pl", "fw"), ("pr", "fw"), ("pt", "fh"), ("pb", "fh")):
            pad, f = getattr(p, pk), getattr(p, fk)
            if pad is not None and f is not None and f > 0 and pad >= f:
                fail(f"{name(pk)} ({pad}) must be smaller than {name(fk)} ({f}): "
                     f"a window would cover only padding")


def _raw_params(ins):
    """PoolParams from the scalar inputs (values may be None in validate); padding scheme."""
    n = len(ins)
    p = PoolParams()
    v = [scalar_of(i) for i in ins[1:]]
    if n >= 10:
        p.pl, p.pr, p.pt, p.pb, p.sw, p.sh, p.fw, p.fh, p.fuse = v[:9]
        scheme = None
    else:
        scheme, p.sw, p.sh, p.fw, p.fh, p.fuse = v[:6]
        p.pl = p.pr = p.pt = p.pb = None
    p.nchw = nchw_flag(ins, n - 1) if n in (8, 11) else False
    return p, scheme


class Pool2D(Op):
    type_levels = {F32: 1, Q8: 1, F16: 3, Q8S: 4}
    allow_zero_sized = True

    # ---- validation ------------------------------------------------------------------------
    def validate(self, sig):
        sig.count((7, 8, 10, 11), 1)
        n = len(sig.ins)
        t = sig.types("input", 0, self.type_levels)
        level = self.type_levels[t]
        explicit = n >= 10
        names = EXPLICIT_NAMES if explicit else IMPLICIT_NAMES
        for k, nm in enumerate(names, start=1):
            check_scalar_type(sig, k, C.INT32, nm)
        if n in (8, 11):
            level = check_layout(sig, n - 1, level)
        sig.same_type("output", 0, t)
        check_rank4(sig, "input", 0)
        check_rank4(sig, "output", 0)
        sig.same_quant("output", 0, sig.ins[0])
        p, scheme = _raw_params(sig.ins)
        if not explicit and scheme is not None and scheme not in (C.PADDING_SAME, C.PADDING_VALID):
            sig.fail(f"input 1 (padding scheme) must be a PaddingCode (1 = SAME, 2 = VALID), got {scheme}")
        sig.fuse(9 if explicit else 6)
        _check_ranges(sig.fail, p, explicit)
        return zero_sized_const_level(sig, level)

    # ---- shapes ----------------------------------------------------------------------------
    def params(self, ins):
        """Complete parameters (implicit padding resolved) and the NHWC geometry."""
        p, scheme = _raw_params(ins)
        explicit = len(ins) >= 10

        def fail(m):
            raise value_error(f"{self.name}: {m}", False)
        for nm in (("pl", "pr", "pt", "pb") if explicit else ()) + ("sw", "sh", "fw", "fh", "fuse"):
            if getattr(p, nm) is None:
                fail("all scalar parameters must have values")
        if p.fuse not in (0, 1, 2, 3):
            fail(f"fused activation must be a FuseCode 0..3, got {p.fuse}")
        d = ins[0].dims
        if d is None or len(d) != 4:
            fail(f"input 0 must be a 4-D tensor, got dimensions {d}")
        n, h, w, c = (d[0], d[2], d[3], d[1]) if p.nchw else d
        if not explicit:
            if scheme not in (C.PADDING_SAME, C.PADDING_VALID):
                fail(f"padding scheme must be a PaddingCode (1 = SAME, 2 = VALID), got {scheme}")
            _check_ranges(fail, p, False)
            p.pl, p.pr = implicit_padding(scheme, w, p.sw, p.fw)
            p.pt, p.pb = implicit_padding(scheme, h, p.sh, p.fh)
            _check_ranges(fail, p, False, implicit_pads=True)
        else:
            _check_ranges(fail, p, True)
        if h == 0 or w == 0:
            fail(f"input height and width must be non-zero (only zero batches are supported), got {list(d)}")
        oh = out_size(h, p.fh, p.sh, p.pt, p.pb)
        ow = out_size(w, p.fw, p.sw, p.pl, p.pr)
        if oh <= 0 or ow <= 0:
            fail(f"the {p.fh}x{p.fw} filter does not fit the padded {h}x{w} input "
                 f"(output would be {oh}x{ow})")
        return p, (n, h, w, c), (oh, ow)

    def infer(self, ins):
        p, (n, h, w, c), (oh, ow) = self.params(ins)
        return [(n, c, oh, ow) if p.nchw else (n, oh, ow, c)]

    # ---- kernels ---------------------------------------------------------------------------
    def build(self, ins, outs):
        p, (n, h, w, c), (oh, ow) = self.params(ins)
        geo = _Geometry(p, h, w, oh, ow)
        t = ins[0].type
        if t in (Q8, Q8S):
            lo, hi = Q.activation_range(p.fuse, outs[0].scale, outs[0].zp, t)
        else:
            lo = hi = None
        core = self.make(geo, t, p.fuse, lo, hi)
        return nhwc_kernel(core, p.nchw)


class _Geometry:
    """Per-axis tap tables: for tap k, the output range [o0, o1) whose input index
    o * stride + k - pad_before lies inside the image, and that range's first input index."""

    def __init__(self, p, h, w, oh, ow):
        self.h, self.w, self.oh, self.ow = h, w, oh, ow
        self.rows = self._taps(h, oh, p.fh, p.sh, p.pt)
        self.cols = self._taps(w, ow, p.fw, p.sw, p.pl)
        self.sh, self.sw = p.sh, p.sw
        # single output position: the valid window of the input
        self.single = oh == 1 and ow == 1
        self.win = (slice(max(0, -p.pt), min(h, p.fh - p.pt)), slice(max(0, -p.pl), min(w, p.fw - p.pl)))
        # window cell counts (valid cells only), shape (oh, ow, 1)
        ch = np.zeros(oh, np.int64)
        for o0, o1, _ in self.rows:
            ch[o0:o1] += 1
        cw = np.zeros(ow, np.int64)
        for o0, o1, _ in self.cols:
            cw[o0:o1] += 1
        self.count = (ch[:, None] * cw[None, :])[:, :, None]
        self._progs = {}            # (exact, same dtype) -> the two passes' steps (_program)

    @staticmethod
    def _taps(size, out, k, s, pad):
        taps = []
        ks = range(k)
        if k > size:        # only taps some output reads inside the image: at most out * size of them,
            ks = set()      # however wide the filter (a window of 1 << 28 with a stride as large)
            for o in range(out):
                ks.update(range(max(0, pad - o * s), min(k, pad - o * s + size)))
            ks = sorted(ks)
        for t in ks:
            o0 = max(0, -((t - pad) // s))             # ceil((pad - t) / s)
            o1 = min(out, (size - 1 - t + pad) // s + 1)
            if o1 > o0:
                taps.append((o0, o1, o0 * s + t - pad))
        return taps

    @staticmethod
    def _program(taps, axis, stride, out, pair):
        """The passes of one reduction along axis (1 or 2), made once per geometry: dst[o] =
        ufunc-reduce over taps of src[o * stride + tap - pad].  A tap covering every output
        position initialises dst by a copy (pair: same dtypes and an order-free ufunc, two
        such taps by one ufunc pass); else dst is filled.  Steps (kind, dst index, src index,
        second src index): 0 fill, 1 copy, 2 ufunc of two src slices, 3 ufunc into a dst
        segment."""
        def sl(lo, hi, step=1):
            s = slice(lo, hi, step)
            return (slice(None), s) if axis == 1 else (slice(None), slice(None), s)
        full = [k for k, (o0, o1, _) in enumerate(taps) if o0 == 0 and o1 == out]
        prog = []
        if not full:
            done = ()
            prog.append((0, None, None, None))
        elif len(full) == 1 or not pair:
            done = (full[0],)
            i0 = taps[full[0]][2]
            prog.append((1, None, sl(i0, i0 + (out - 1) * stride + 1, stride), None))
        else:                       # two taps covering every output: one pass, no copy first
            done = full[:2]
            i0, i1 = taps[full[0]][2], taps[full[1]][2]
            prog.append((2, None, sl(i0, i0 + (out - 1) * stride + 1, stride),
                         sl(i1, i1 + (out - 1) * stride + 1, stride)))
        for k, (o0, o1, i0) in enumerate(taps):
            if k not in done:
                prog.append((3, sl(o0, o1), sl(i0, i0 + (o1 - o0 - 1) * stride + 1, stride), None))
        return tuple(prog)

    @staticmethod
    def _run(prog, dst, src, ufunc, init):
        for kind, d, s, s2 in prog:
            if kind == 3:
                seg = dst[d]
                ufunc(seg, src[s], out=seg)
            elif kind == 2:
                ufunc(src[s], src[s2], out=dst)
            elif kind == 1:
                np.copyto(dst, src[s], casting="unsafe")
            else:
                dst.fill(init)

    def reduce(self, x, ufunc, init, acc_dtype, out=None, exact=False):
        """ufunc-reduce every window of the NHWC array x; returns (N, OH, OW, C) (in out when
        given: it may be the caller's buffer or a transposed view of it).  exact: the ufunc
        gives the same values in any order (maximum), so the passes may be reordered."""
        n, c = x.shape[0], x.shape[3]
        if self.single:
            r = ufunc.reduce(x[:, self.win[0], self.win[1], :], axis=(1, 2), dtype=acc_dtype, keepdims=True)
            if out is not None:
                out[...] = r
                return out
            return r
        b = out if out is not None and out.dtype == acc_dtype else np.empty((n, self.oh, self.ow, c), acc_dtype)
        key = (exact, x.dtype == acc_dtype)
        progs = self._progs.get(key)
        if progs is None:
            if exact:       # max / min: along H first reads whole contiguous rows, and the
                            # second pass runs over half as much
                progs = (self._program(self.rows, 1, self.sh, self.oh, key[1]),
                         self._program(self.cols, 2, self.sw, self.ow, True))
            else:
                progs = (self._program(self.cols, 2, self.sw, self.ow, False),
                         self._program(self.rows, 1, self.sh, self.oh, False))
            self._progs[key] = progs
        a = np.empty((n, self.oh, self.w, c) if exact else (n, self.h, self.ow, c), acc_dtype)
        self._run(progs[0], a, x, ufunc, init)
        self._run(progs[1], b, a, ufunc, init)
        if out is not None and b is not out:
            out[...] = b
            return out
        return b


def _rounded_average(s, y, half, cnt, signed, lo, hi):
    """y = clamp((|s| + count // 2) // count with the sign of s): the reference's integer average
    of the window sums s (float, exact integers; overwritten), rounded half away from zero, as
    trunc((s + copysign(half, s)) / count) -- the float division is exact enough for the
    rounding (numerator < 2**24 in float32, 2**53 in float64) and negating a sum negates its
    quotient exactly -- then clamped to [lo, hi] and stored into y."""
    s += np.copysign(half, s) if signed else half
    s /= cnt
    np.trunc(s, out=s)
    clip = Q._CLIP_UFUNC
    if clip is not None:
        clip(s, lo, hi, out=y, casting="unsafe")
    else:
        np.clip(s, lo, hi, out=s)
        y[...] = s


def _small_quant_average(geo, cnt, half, signed, lo, hi):
    """Quantized AVERAGE_POOL_2D of a small image (the small-tensor path, common.SMALL): the window
    sums as one product of the input's pixels with the [OH*OW, H*W] window matrix made here (0 / 1
    entries: integer sums below 2**24, exact in float32, the values geo.reduce adds pass by
    pass), then the general kernel's rounding (_rounded_average)."""
    p = np.zeros((geo.oh, geo.ow, geo.h, geo.w), np.float32)
    for r0, r1, i0 in geo.rows:
        for c0, c1, j0 in geo.cols:
            for o in range(r0, r1):
                for q in range(c0, c1):
                    p[o, q, i0 + (o - r0) * geo.sh, j0 + (q - c0) * geo.sw] = 1
    p = p.reshape(geo.oh * geo.ow, geo.h * geo.w)
    hw, shape = geo.h * geo.w, (geo.oh, geo.ow)

    def core(x, y):
        n, c = x.shape[0], x.shape[3]
        s = np.matmul(p, x.reshape(n, hw, c)).reshape((n,) + shape + (c,))
        _rounded_average(s, y, half, cnt, signed, lo, hi)
    return core


AVERAGE_LUT_MAX = 1 << 16     # _small_quant_average_lut: most table entries (every window size's sums)


def _small_quant_average_lut(geo, counts, dtype, lo, hi):
    """Quantized AVERAGE_POOL_2D of a small image whose window sums' tables are small: the
    output byte of every possible window sum, per window size cnt (sums cnt * qmin ..
    cnt * qmax), is the reference's integer average (|s| + cnt // 2) // cnt with the sign of s,
    clamped to [lo, hi], made here; a run is 4 numpy calls: the input cast into a float32
    column block [H*W + 1, N, C] whose last row is ones, one product with the window matrix
    whose last column is each output position's table offset (exact integers below 2**24),
    the cast to indices, and the table's take into the output.  None where the tables would
    exceed AVERAGE_LUT_MAX entries."""
    info = np.iinfo(dtype)
    qmin, qmax = int(info.min), int(info.max)
    base, parts, size = {}, [], 0
    for cnt in sorted({int(v) for v in counts.ravel()}):
        sums = np.arange(cnt * qmin, cnt * qmax + 1, dtype=np.int64)
        avg = np.sign(sums) * ((np.abs(sums) + cnt // 2) // cnt)
        parts.append(np.clip(avg, lo, hi).astype(dtype))
        base[cnt] = size - cnt * qmin
        size += len(sums)
        if size > AVERAGE_LUT_MAX:
            return None
    lut = np.concatenate(parts)
    oh, ow, h, w = geo.oh, geo.ow, geo.h, geo.w
    hw, npos = h * w, oh * ow
    p = np.zeros((oh, ow, hw + 1), np.float32)
    win = p[:, :, :hw].reshape(oh, ow, h, w)
    for r0, r1, i0 in geo.rows:
        for c0, c1, j0 in geo.cols:
            for o in range(r0, r1):
                for q in range(c0, c1):
                    win[o, q, i0 + (o - r0) * geo.sh, j0 + (q - c0) * geo.sw] = 1
    p[:, :, hw] = [[base[int(v)] for v in row] for row in counts.reshape(oh, ow)]
    p = Q.aligned(p.reshape(npos, hw + 1))       # (a cache line: the gemm runs faster)
    take, dot, copyto = lut.take, np.dot, np.copyto
    frames = {}                 # batch size -> the pool of work arrays for it

    def new(n, c):
        xa = Q.aligned_empty((hw + 1, n, c), np.float32)
        xa[...] = 1
        s = Q.aligned_empty((npos, n * c), np.float32)
        idx = np.empty((n, npos, c), np.intp)
        # [input view (N, H, W, C), the column block 2-D, sums, sums seen (N, positions, C),
        #  indices, last output, its (N, positions, C) view]
        return [xa[:hw].reshape(h, w, n, c).transpose(2, 0, 1, 3), xa.reshape(hw + 1, n * c), s,
                s.reshape(npos, n, c).transpose(1, 0, 2), idx, None, None]

    def core(x, y):
        n, c = x.shape[0], x.shape[3]
        if n == 0:
            return
        pool = frames.get(n)
        if pool is None:
            pool = frames[n] = []
        try:
            f = pool.pop()
        except IndexError:
            f = new(n, c)
        copyto(f[0], x)
        dot(p, f[1], out=f[2])
        copyto(f[4], f[3], casting="unsafe")
        if y is f[5]:
            take(f[4], None, f[6], "clip")
        elif y.flags.c_contiguous:
            v = y.reshape(n, npos, c)
            take(f[4], None, v, "clip")
            if kept_array(y):
                f[5], f[6] = y, v
        else:                   # (an NCHW output seen as NHWC)
            y[...] = take(f[4]).reshape(y.shape)
        pool.append(f)
    return core


@register
class AveragePool2D(Pool2D):
    name = "AVERAGE_POOL_2D"

    def make(self, geo, t, fuse, lo, hi):
        if t in (Q8, Q8S):
            # integer sums accumulated in float (exact: |sum| + count/2 < 2**24 in float32),
            # then (|sum| + count//2) // count with the sign of the sum: half away from zero.
            # The float division is exact enough for the floor (numerator < 2**24 resp. 2**53).
            acc = np.float32 if int(geo.count.max()) < 65000 else np.float64
            cnt = geo.count.astype(acc)
            half = (geo.count // 2).astype(acc)
            signed = t == Q8S
            if acc == np.float32 and geo.h * geo.w * geo.oh * geo.ow <= common.SMALL:
                core = _small_quant_average_lut(geo, geo.count, C.DTYPES[t], lo, hi)
                return core or _small_quant_average(geo, cnt, half, signed, lo, hi)

            def core(x, y):
                _rounded_average(geo.reduce(x, np.add, 0, acc), y, half, cnt, signed, lo, hi)
            return core
        cnt = geo.count.astype(np.float32)
        if t == F32:
            def core(x, y):
                s = geo.reduce(x, np.add, 0, np.float32)
                np.divide(s, cnt, out=y)
                Q.apply_float_activation(y, fuse)
            return core

        def core(x, y):                                  # float16: in float32, rounded once
            s = geo.reduce(x.astype(np.float32), np.add, 0, np.float32)
            s /= cnt
            Q.apply_float_activation(s, fuse)
            y[...] = s
        return core


@register
class L2Pool2D(Pool2D):
    name = "L2_POOL_2D"
    type_levels = {F32: 1, F16: 3}

    def make(self, geo, t, fuse, lo, hi):
        cnt = geo.count.astype(np.float32)

        def core(x, y):
            x = x.astype(np.float32)
            np.multiply(x, x, out=x)
            s = geo.reduce(x, np.add, 0, np.float32)
            s /= cnt
            np.sqrt(s, out=s)
            Q.apply_float_activation(s, fuse)
            y[...] = s
        return core


@register
class MaxPool2D(Pool2D):
    name = "MAX_POOL_2D"

    def make(self, geo, t, fuse, lo, hi):
        if t in (Q8, Q8S):
            dt = C.DTYPES[t]
            init = np.iinfo(dt).min

            def core(x, y):
                geo.reduce(x, np.maximum, init, dt, out=y, exact=True)
                np.clip(y, lo, hi, out=y)
            return core
        dt = C.DTYPES[t]

        def core(x, y):                                  # exact in float16 as well
            geo.reduce(x, np.maximum, -np.inf, dt, out=y, exact=True)
            Q.apply_float_activation(y, fuse)
        return core
