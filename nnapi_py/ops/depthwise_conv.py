"""DEPTHWISE_CONV_2D (shared conv machinery: convgeom.py, convquant.py, convsmall.py).

* DEPTHWISE_CONV_2D: the sum over the KH*KW taps as one einsum over whole output rows: the
  weights are tiled along a whole output row at build(), the input is a strided view
  [N, OH, KH, KW, OW*C] of the padded input (no copy), so the sum runs with a long contiguous
  inner loop in a single pass writing the output; a width stride is handled by splitting the
  padded input into width phases (a strided tap becomes a contiguous slice, one einsum per
  phase); a depth multiplier repeats the input channels once.  (Width stride and width
  dilation both > 1: per-tap multiply-add passes over blocks of rows.)
"""
import numpy as np

from .. import constants as C
from .base import kept_array, register, value_error
from . import quant as Q
from .padding import strided_view
from . import common
from .common import F32, FLOATS, Scratch
from .convgeom import ConvBase, _SigLike, _int, prepare_planes
from .convquant import _Output, _packed_filter
from .convsmall import _small_quant_dw
from .im2col import _one_pixel


_einsum = Q.c_einsum

LEAN_FLOAT = 64         # float32 layers up to this many x common.SMALL output values: the lean kernel


# ---- DEPTHWISE_CONV_2D --------------------------------------------------------------------------
@register
class DepthwiseConv2D(ConvBase):
    name = "DEPTHWISE_CONV_2D"
    extra_name = "depth multiplier"
    channel_dim = 3
    out_axis = 3

    def layout_of(self, sig):
        return self.dilated_layout(sig, 1)

    def check_dims(self, sig, L):
        w = sig.ins[1]
        if w.rank == 4 and w.dims[0] not in (0, 1):
            sig.fail(f"input 1 (filter) must have shape [1, height, width, depth_out], "
                     f"got dimension 0 = {w.dims[0]}")
        super().check_dims(sig, L)

    def channel_rule(self, cin, wd, sig, L):
        m = sig.scalar_value(L.extra)
        if m is None or m < 1 or not cin or not wd[3]:
            return None
        if wd[3] != cin * m:
            return (f"input 1 (filter) depth_out {wd[3]} must equal input depth × depth multiplier "
                    f"({cin} × {m})")
        return None

    def _mult(self, ins, L, c, wd):
        if int(wd[0]) != 1:
            raise value_error(f"{self.name}: filter dimension 0 must be 1, got {wd[0]}", False)
        m = _int(ins[L.extra])
        if m < 1:
            raise value_error(f"{self.name}: depth multiplier must be >= 1, got {m}", False)
        if int(wd[3]) != c * m:
            raise value_error(f"{self.name}: filter depth_out {wd[3]} must equal input depth × depth "
                              f"multiplier ({c} × {m})", False)
        return m

    def filter_geometry(self, ins, L, c):
        _, kh, kw, o = (int(d) for d in ins[1].dims)
        self._mult(ins, L, c, ins[1].dims)
        return o, kh, kw

    def bias_to_pass_on(self, ins):
        try:
            L = self.layout_of(_SigLike(self, ins))
            fuse = _int(ins[L.fuse])
            nchw = self.nchw(ins, L)
        except Exception:           # an unexpected signature: validation has the say
            return None
        b = ins[2]
        if ins[0].type != F32 or b.type != F32 or b.value is None or fuse != C.FUSED_NONE \
                or np.ndim(b.value) != 1 or not np.isfinite(b.value).all():
            return None
        return 2, nchw

    def build(self, ins, outs):
        L = self.layout_of(_SigLike(self, ins))
        nchw, (n, h, w, c), pads, (sh, sw), (dh, dw), fuse = self.params(ins, L)
        wi = ins[1]
        _, kh, kw, o = (int(d) for d in wi.dims)
        m = self._mult(ins, L, c, wi.dims)
        oh, ow = self.out_hw(h, w, kh, kw, pads, (sh, sw), (dh, dw))
        quant = ins[0].type not in FLOATS

        def arrange(wf, dtype):
            # one row of weights per tap, tiled along a whole output row: [KH*KW, OW*O]
            return np.ascontiguousarray(np.tile(wf.reshape(kh * kw, o).astype(dtype), (1, ow)))

        packed = _packed_filter(ins, o, True, arrange)
        whole = m == 1 and _one_pixel(nchw, n, h, w, kh, kw, pads, (dh, dw), packed)
        res = _Output(ins, outs, fuse, packed, one_pixel=True if whole else None, fold=True)
        pt, pb, pl, pr = pads
        row = ow * o
        geom = (n, oh, ow, o, kh, kw, sh, sw, dh, dw)
        scratch = Scratch()

        one = res.one
        one = getattr(one, "run", one)      # a DirectProduct's closure, called without its method
        bias_const = ins[2].value
        filter_src = packed.src
        pk0 = packed.val
        if quant and one is None and pk0 is not None and bias_const is not None and not nchw \
                and common.small(ins[0], outs[0]) and 0 < n * oh * ow * kh * kw * o <= 4 * common.SMALL:
            one = _small_quant_dw(res, pk0.mat[:, :o], bias_const, (n, h, w, c), (pt, pl),
                                  (kh, kw, (sh, sw), (dh, dw), oh, ow), m)
        lean = None
        if not quant and ins[0].type == F32 and pk0 is not None and bias_const is not None and m == 1 \
                and sw == 1 and not nchw and 0 < n * oh * ow * o <= LEAN_FLOAT * common.SMALL:
            lean = _lean_float_dw(res.epilogue(pk0, bias_const), pk0.mat.reshape(kh, kw, row),
                                  (n, h, w, c), pads, geom)

        def kernel(i, oarr):
            out = oarr[0]
            if lean is not None and i[1] is filter_src and i[2] is bias_const and lean(i[0], out):
                return
            if one is not None and i[1] is filter_src and i[2] is bias_const:
                one(i[0], out)
                return
            if out.size == 0:
                return
            bufs = scratch.take()
            try:
                run(i, out, bufs)
            finally:
                scratch.give(bufs)

        def run(i, out, bufs):
            pk = packed.get(i[1])
            on = out.transpose(0, 2, 3, 1) if nchw else out
            # width phases: with stride sw the columns x0, x0+sw, ... of phase x0 % sw are adjacent;
            # with a depth multiplier m input channel k feeds outputs k*m .. k*m+m-1
            zx, fill = res.centring(pk, i[2])
            planes = prepare_planes(i[0], nchw, (pt, pb, pl, pr), pk.dtype, zx, sw, m, bufs, fill)
            epi = res.epilogue(pk, i[2])
            direct = (not quant) and on.dtype == pk.dtype and on.flags.c_contiguous
            taps = pk.mat
            if sw == 1 or dw == 1:
                _dw_rows_einsum(planes, taps.reshape(kh, kw, row), geom, on, direct, epi, bufs, pk.phases)
                return
            rows = min(oh, max(1, (1 << 20) // (row * pk.dtype().itemsize)))
            tmp = bufs.array("tmp", (rows, row), pk.dtype)
            accb = None if direct else bufs.array("acc", (rows, row), pk.dtype)
            for b in range(planes[0].shape[0]):
                for r0 in range(0, oh, rows):
                    r1 = min(oh, r0 + rows)
                    nr = r1 - r0
                    dst = on[b, r0:r1]
                    acc = dst.reshape(nr, row) if direct else accb[:nr]
                    t5 = tmp[:nr]
                    t = 0
                    for ky in range(kh):
                        y0 = r0 * sh + ky * dh
                        ys = slice(y0, y0 + (nr - 1) * sh + 1, sh)
                        for kx in range(kw):
                            x0 = kx * dw
                            c0 = x0 // sw
                            xs = planes[x0 % sw][b, ys, c0:c0 + ow].reshape(nr, row)
                            if t == 0:
                                np.multiply(xs, taps[0], out=acc)
                            else:
                                np.multiply(xs, taps[t], out=t5)
                                acc += t5
                            t += 1
                    epi(acc.reshape(nr, ow, o), dst, direct)
        return kernel


def _lean_float_dw(epi, taps, dims, pads, geom):
    """The float32 DEPTHWISE_CONV_2D of a constant filter and bias, width stride 1, NHWC, no
    depth multiplier, up to LEAN_FLOAT x common.SMALL output values: _dw_rows_einsum's one
    einsum, bias rows and activation without the general kernel's per-run setup (the padded
    input and its strided view kept per work set, the output's view kept as common.Reshaped
    keeps it; 2x2x64, 3x3: 17 -> 7 us a run).  The same arithmetic, so the same bits.
    Returns run(x, out) -> False where it does not apply (an output that cannot be viewed as
    rows, an unpadded input not C-contiguous): the general kernel runs."""
    n, h, w, c = dims
    pt, pb, pl, pr = pads
    _, oh, ow, o, kh, kw, sh, _, dh, dw = geom
    row = ow * o
    brow = None if epi.bias is None else np.tile(np.asarray(epi.bias, np.float32), ow)
    act = common.float_clamp(epi.fuse, np.float32)
    padded = bool(pt or pb or pl or pr)
    pshape = (n, h + pt + pb, w + pl + pr, c)
    vshape = (n, oh, kh, kw, row)
    rows_of = common.Reshaped((n, oh, row), out=True)
    scratch = Scratch()

    def view(a):
        st = a.strides
        return strided_view(a, vshape, (st[0], st[1] * sh, st[1] * dh, st[2] * dw, a.itemsize))

    def kept(bufs):
        xp = bufs.array("lean padded", pshape, np.float32, zero=True)     # the zero border, made once
        t = bufs["lean"] = (xp[:, pt:pt + h, pl:pl + w], view(xp))
        return t

    def run(x, out):
        try:
            acc = rows_of(out)
        except AttributeError:
            return False
        if padded:
            bufs = scratch.take()
            try:
                inner, xv = bufs.get("lean") or kept(bufs)
                inner[...] = x
                _einsum("nrijp,ijp->nrp", xv, taps, out=acc)
            finally:
                scratch.give(bufs)
        else:
            if not x.flags.c_contiguous or x.dtype != np.float32:
                return False
            _einsum("nrijp,ijp->nrp", view(x), taps, out=acc)
        if brow is not None:
            np.add(acc, brow, out=acc)
        if act is not None:
            act(acc)
        return True
    return run


def _dw_rows_einsum(planes, taps, geom, on, direct, epi, bufs, pk_phases):
    """Depthwise sum over the taps as one einsum per width phase, over whole output rows.

    With the input channels last, the KW taps of one filter row read the same padded input
    row at offsets of one column (C values), and an output row is OW*C contiguous values: a
    strided view X[n, r, ky, kx, p] = plane[n, r*sh + ky*dh, kx*step + p] (p along the row, no
    copy) and the taps tiled along the row, W[ky, kx, p], give out[n, r, p] = sum X * W with a
    long contiguous inner loop and a single pass writing the output (numpy's per-tap
    multiply-add needs two passes per tap).  With a stride sw > 1 the taps of one width phase
    share a plane (prepare_planes) and the phases' sums are added.  Exact for centred integers."""
    n, oh, ow, o, kh, kw, sh, sw, dh, dw = geom
    row = ow * o
    acc = on.reshape(n, oh, row) if direct else bufs.array("acc", (n, oh, row), planes[0].dtype)
    first = True
    for q in range(min(sw, kw)):         # phases without a tap add nothing
        kxs = list(range(kw)) if sw == 1 else [kx for kx in range(q, kw, sw)]
        if not kxs:
            continue
        plane = planes[(kxs[0] * dw) % sw]
        seen = bufs.get(("view", q))
        if seen is not None and seen[0] is plane:         # a kept plane: its view too
            x = seen[1]
        else:
            # p runs along a whole output row (OW*O values over the width and channel axes): it
            # steps one item, as a C-contiguous plane holds them.  Not the channel axis's stride:
            # with one channel that is whatever the array had there (an NCHW input seen as NHWC
            # keeps its channel stride, H*W items), and a run over it leaves the buffer.
            st = plane.strides
            step = dw if sw == 1 else 1                   # plane columns between the phase's taps
            x = strided_view(plane, (n, oh, kh, len(kxs), row),
                             (st[0], st[1] * sh, st[1] * dh, st[2] * step, plane.itemsize))
            if kept_array(plane):                          # ours or a plan temporary, never a caller's
                bufs[("view", q)] = (plane, x)
        w = taps
        if sw > 1:              # a phase's taps, made contiguous once (einsum: 98 -> 84 us)
            w = pk_phases.get((sw, q))
            if w is None:
                w = pk_phases[(sw, q)] = np.ascontiguousarray(taps[:, q::sw])
        if first:
            _einsum("nrijp,ijp->nrp", x, w, out=acc)
            first = False
        else:
            part = bufs.array("phase", acc.shape, acc.dtype)
            _einsum("nrijp,ijp->nrp", x, w, out=part)
            acc += part
    epi(acc.reshape(n, oh, ow, o), on, direct)
