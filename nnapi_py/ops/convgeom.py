"""Shared layer of the convolutions (ops/conv.py, depthwise_conv.py, transpose_conv.py): ConvBase.

All four share one signature parser (explicit / implicit padding variants, optional layout
and dilation inputs), one type-configuration check (float32, float16, quant8 asymm and
signed, per-channel quantized filters) and one input preparation (NHWC view, centring of
quantized values, zero padding).  The arithmetic:
The conv shape rule (ConvBase.infer), the layout and the input preparation live here;
the quantized product in convquant.py, the patch gathering in im2col.py, the small-tensor kernels
in convsmall.py.
"""
import numpy as np

from .. import constants as C
from .base import Op, tname, value_error
from .padding import implicit_padding, out_size
from .quant import scale_product
from .common import F16, F32, I32, Q8, Q8S, QPC, FLOATS, check_bias_quant, copy_pixels


BOOL, INT32 = C.BOOL, C.INT32


_BLOCK_BYTES = 1 << 20          # working-set target of one block of output rows


# ---- signature ---------------------------------------------------------------------------------
class Layout:
    """Which input index plays which role in one signature variant."""
    __slots__ = ("explicit", "pads", "scheme", "stride", "extra", "fuse", "layout", "dil", "oshape")

    def __init__(self, explicit, pads=None, scheme=None, stride=None, extra=None, fuse=None,
                 layout=None, dil=None, oshape=None):
        self.explicit = explicit
        self.pads = pads          # (left, right, top, bottom)
        self.scheme = scheme
        self.stride = stride      # (width, height)
        self.extra = extra        # depth multiplier / number of groups
        self.fuse = fuse
        self.layout = layout
        self.dil = dil            # (width, height)
        self.oshape = oshape      # TRANSPOSE_CONV_2D implicit: output shape tensor


def _int(info):
    v = info.value
    return None if v is None else int(v)


class ConvBase(Op):
    """Shared validation and shape logic; subclasses define the layout of their inputs,
    the filter geometry and the kernels."""
    extra_name = None            # "depth multiplier" / "number of groups"
    layout_required = False
    channel_dim = 0              # per-channel quantization axis of the filter
    base_level = 1

    def fuse_input(self, ins):
        try:
            return self.layout_of(_SigLike(self, ins)).fuse
        except Exception:           # an unexpected signature: no folding, validation has the say
            return None

    # -- variants --
    def layout_of(self, sig_or_ins):
        raise NotImplementedError

    def _fail_count(self, sig, counts):
        sig.fail(f"expected {' or '.join(map(str, counts))} inputs, got {len(sig.ins)}")

    def dilated_layout(self, sig, e):
        """The signatures of CONV_2D (e = 0) and DEPTHWISE_CONV_2D (e = 1: the depth multiplier
        after the strides): explicit or implicit padding, then an optional layout flag and an
        optional pair of dilation factors."""
        ins = sig.ins
        n = len(ins)
        counts = (7 + e, 8 + e, 10 + e, 11 + e, 13 + e)
        if n >= 10 + e and ins[7 + e].type == INT32:
            if n not in (10 + e, 11 + e, 13 + e):
                if n == 12 + e:
                    sig.fail(f"explicit padding: got {12 + e} inputs; the dilation factors (inputs {11 + e} "
                             f"and {12 + e}) must be given as a pair")
                self._fail_count(sig, counts)
            return Layout(True, pads=(3, 4, 5, 6), stride=(7, 8), extra=9 if e else None, fuse=9 + e,
                          layout=10 + e if n >= 11 + e else None, dil=(11 + e, 12 + e) if n == 13 + e else None)
        if n not in (7 + e, 8 + e, 10 + e):
            if n == 9 + e:
                sig.fail(f"implicit padding: got {9 + e} inputs; the dilation factors (inputs {8 + e} and {9 + e}) "
                         "must be given as a pair")
            self._fail_count(sig, counts)
        return Layout(False, scheme=3, stride=(4, 5), extra=6 if e else None, fuse=6 + e,
                      layout=7 + e if n >= 8 + e else None, dil=(8 + e, 9 + e) if n == 10 + e else None)

    # -- validation --
    def validate(self, sig):
        if len(sig.outs) != 1:
            sig.fail(f"expected 1 output, got {len(sig.outs)}")
        L = self.layout_of(sig)
        x, w = sig.ins[0], sig.ins[1]
        level = self.base_level
        t = x.type
        levels = self.type_levels()
        sig.types("input", 0, levels)
        level = max(level, levels[t])
        sig.present(1, "filter")
        sig.present(2, "bias")
        if t in FLOATS:
            sig.same_type("input", 1, t, "filter")
            sig.same_type("input", 2, t, "bias")
        else:
            if w.type not in (t, QPC):
                sig.fail(f"input 1 (filter) has type {tname(w.type)}, expected {tname(t)} or "
                         f"TENSOR_QUANT8_SYMM_PER_CHANNEL for a {tname(t)} input")
            if w.type == QPC:
                level = max(level, 3)
                if w.channel is not None and w.channel.dim != self.channel_dim:
                    sig.fail(f"input 1 (filter): per-channel quantization must use channelDim "
                             f"{self.channel_dim}, got {w.channel.dim}")
            check_bias_quant(sig, 2, x, w)
        sig.same_type("output", 0, t)
        o = sig.outs[0]
        if t == Q8 and w.type == Q8 and not o.scale > scale_product(x.scale, w.scale):
            level = max(level, 3)   # before FL3: output_scale > input_scale * filter_scale
        sig.rank_between("input", 0, 4, 4, "input")
        sig.rank_between("input", 1, 4, 4, "filter")
        sig.rank_between("input", 2, 1, 1, "bias")
        sig.rank_between("output", 0, 4, 4, "output")
        # scalar parameters
        idx = []
        if L.pads:
            idx += [(k, "padding") for k in L.pads]
        if L.scheme is not None:
            idx.append((L.scheme, "padding scheme"))
        idx += [(k, "stride") for k in L.stride]
        if L.extra is not None:
            idx.append((L.extra, self.extra_name))
        if L.dil:
            idx += [(k, "dilation factor") for k in L.dil]
        for k, what in idx:
            sig.types("input", k, (INT32,), what)
            sig.present(k, what)
        sig.fuse(L.fuse)
        sig.present(L.fuse, "fused activation")
        if L.layout is not None:
            sig.types("input", L.layout, (BOOL,), "NCHW layout flag")
            sig.present(L.layout, "NCHW layout flag")
            if not self.layout_required:
                level = max(level, 3)
        if L.dil:
            level = max(level, 3)
        if L.oshape is not None:
            s = sig.ins[L.oshape]
            sig.types("input", L.oshape, (I32,), "output shape")
            sig.rank_between("input", L.oshape, 1, 1, "output shape")
            if s.rank == 1 and s.dims[0] not in (0, 4):
                sig.fail(f"input {L.oshape} (output shape) has {s.dims[0]} elements, expected 4")
        # values, when known
        for k, what in idx:
            v = sig.scalar_value(k)
            if v is None:
                continue
            if what == "padding" and v < 0:
                sig.fail(f"input {k} (padding) must be >= 0, got {v}")
            if what in ("stride", "dilation factor", "depth multiplier", "number of groups") and v < 1:
                sig.fail(f"input {k} ({what}) must be >= 1, got {v}")
            if what == "padding scheme" and v not in (C.PADDING_SAME, C.PADDING_VALID):
                sig.fail(f"input {k} (padding scheme) must be a PaddingCode (1 SAME, 2 VALID), got {v}")
        if L.oshape is not None and sig.ins[L.oshape].value is not None:
            v = np.asarray(sig.ins[L.oshape].value).reshape(-1)
            if v.size != 4:
                sig.fail(f"input {L.oshape} (output shape) has {v.size} elements, expected 4")
            if (v < 0).any():
                sig.fail(f"input {L.oshape} (output shape) has negative entries {v.tolist()}")
        self.check_dims(sig, L)
        return level

    def type_levels(self):
        b = self.base_level
        return {F32: b, Q8: b, F16: 3, Q8S: 4}

    def nchw(self, ins, L):
        return L.layout is not None and bool(ins[L.layout].value)

    def check_dims(self, sig, L):
        """Static consistency of known dimensions (the layout value may be unknown)."""
        x, w, b = sig.ins[0], sig.ins[1], sig.ins[2]
        if b.rank == 1 and b.dims[0] and w.rank == 4:
            o = w.dims[self.out_axis]
            if o and o != b.dims[0]:
                sig.fail(f"input 2 (bias) has {b.dims[0]} elements, expected {o} "
                         f"(filter dimension {self.out_axis})")
        if w.channel is not None and w.rank == 4 and w.dims[self.out_axis] \
                and len(w.channel.scales) != w.dims[self.out_axis]:
            sig.fail(f"input 1 (filter): {len(w.channel.scales)} per-channel scales for "
                     f"{w.dims[self.out_axis]} output channels")
        lay = sig.ins[L.layout] if L.layout is not None else None
        if x.rank == 4 and w.rank == 4 and (lay is None or lay.value is not None):
            nchw = lay is not None and bool(lay.value)
            cin = x.dims[1] if nchw else x.dims[3]
            msg = self.channel_rule(cin, w.dims, sig, L)
            if msg:
                sig.fail(msg)

    def channel_rule(self, cin, wdims, sig, L):
        return None

    # -- geometry --
    def params(self, ins, L):
        """(nchw, (n, h, w, c), (pt, pb, pl, pr), (sh, sw), (dh, dw), fuse), implicit padding
        resolved; value errors for out-of-range parameters."""
        nchw = self.nchw(ins, L)
        x = ins[0].dims
        n, h, w_, c = (x[0], x[2], x[3], x[1]) if nchw else tuple(x)
        kh, kw = int(ins[1].dims[1]), int(ins[1].dims[2])
        sw, sh = _int(ins[L.stride[0]]), _int(ins[L.stride[1]])
        dw, dh = (_int(ins[L.dil[0]]), _int(ins[L.dil[1]])) if L.dil else (1, 1)
        for v, what in ((sw, "stride"), (sh, "stride"), (dw, "dilation factor"), (dh, "dilation factor")):
            if v < 1:
                raise value_error(f"{self.name}: {what} must be >= 1, got {v}", False)
        if L.explicit:
            pl, pr, pt, pb = (_int(ins[k]) for k in L.pads)
            if min(pl, pr, pt, pb) < 0:
                raise value_error(f"{self.name}: paddings must be >= 0, got {[pl, pr, pt, pb]}", False)
        else:
            scheme = _int(ins[L.scheme])
            if scheme not in (C.PADDING_SAME, C.PADDING_VALID):
                raise value_error(f"{self.name}: padding scheme must be 1 (SAME) or 2 (VALID), got {scheme}",
                                  False)
            pt, pb = implicit_padding(scheme, int(h), sh, kh, dh)
            pl, pr = implicit_padding(scheme, int(w_), sw, kw, dw)
        fuse = _int(ins[L.fuse])
        if fuse not in (0, 1, 2, 3):
            raise value_error(f"{self.name}: fused activation must be 0..3, got {fuse}", False)
        return nchw, (int(n), int(h), int(w_), int(c)), (pt, pb, pl, pr), (sh, sw), (dh, dw), fuse

    def out_hw(self, h, w, kh, kw, pads, strides, dil):
        pt, pb, pl, pr = pads
        oh = out_size(h, kh, strides[0], pt, pb, dil[0])
        ow = out_size(w, kw, strides[1], pl, pr, dil[1])
        if oh < 1 or ow < 1:
            raise value_error(f"{self.name}: the {kh}x{kw} filter (dilation {dil[0]}x{dil[1]}) does not fit the "
                              f"{h}x{w} input with paddings {list(pads)} (output would be {oh}x{ow})", False)
        return oh, ow

    def infer(self, ins):
        """Output shape of CONV_2D, GROUPED_CONV_2D and DEPTHWISE_CONV_2D; filter_geometry()
        checks the filter against the input depth and gives (out channels, kh, kw)."""
        L = self.layout_of(_SigLike(self, ins))
        self.check_zero_sized(ins)
        nchw, (n, h, w, c), pads, strides, dil, fuse = self.params(ins, L)
        o, kh, kw = self.filter_geometry(ins, L, c)
        if int(ins[2].dims[0]) != o:
            raise value_error(f"{self.name}: bias has {ins[2].dims[0]} elements, expected {o}", False)
        oh, ow = self.out_hw(h, w, kh, kw, pads, strides, dil)
        return [_layout_dims(n, oh, ow, o, nchw)]

    def check_zero_sized(self, ins):
        if not self.allow_zero_sized and any(d == 0 for d in ins[0].dims):
            raise value_error(f"{self.name}: zero-sized input {list(ins[0].dims)} is not supported", False)


def _layout_dims(n, h, w, c, nchw):
    return (n, c, h, w) if nchw else (n, h, w, c)


# ---- input preparation ---------------------------------------------------------------------------
def prepare_input(x, nchw, pads, dtype, zp, bufs=None, fill=0):
    """NHWC array of dtype (centred by zp), padded by pads = (top, bottom, left, right) with
    fill (0; a quantized input kept uncentred, its zero point folded into the bias: the zero
    point itself, the value that stands for 0.0).

    Returns the input itself when nothing needs to change (float32 NHWC, no padding).  With
    bufs (a Scratch set) the padded array is the kernel's own, filled when first made, so
    only its interior is written."""
    xn = x.transpose(0, 2, 3, 1) if nchw else x
    pt, pb, pl, pr = pads
    if not (pt or pb or pl or pr) and xn.dtype == dtype and not zp and xn.flags.c_contiguous:
        return xn
    n, h, w, c = xn.shape
    shape = (n, h + pt + pb, w + pl + pr, c)
    if bufs is not None:
        xp = _border_array(bufs, "padded", shape, dtype, fill)  # border filled since made
    else:
        xp = np.empty(shape, dtype)
        if pt:
            xp[:, :pt] = fill
        if pb:
            xp[:, pt + h:] = fill
        if pl:
            xp[:, pt:pt + h, :pl] = fill
        if pr:
            xp[:, pt:pt + h, pl + w:] = fill
    inner = xp[:, pt:pt + h, pl:pl + w] if (pt or pb or pl or pr) else xp
    inner[...] = xn
    if zp:                          # cast, then subtract: faster than one mixed-type subtract
        np.subtract(inner, dtype(zp), out=inner)
    return xp


def prepare_planes(x, nchw, pads, dtype, zp, sw, repeat=1, bufs=None, fill=0):
    """Like prepare_input, but split by width phase for a stride sw: plane p holds the padded
    columns p, p + sw, p + 2 sw, ... (contiguous), so that a strided tap is a contiguous slice.
    repeat > 1 repeats every channel (depth multiplier).  One pass over the input.  With bufs
    the planes are the kernel's own (border of fill made once)."""
    if sw == 1 and repeat == 1:
        return [prepare_input(x, nchw, pads, dtype, zp, bufs, fill)]
    xn = x.transpose(0, 2, 3, 1) if nchw else x
    if repeat > 1:
        xn = np.repeat(xn, repeat, axis=3)
    pt, pb, pl, pr = pads
    n, h, w, c = xn.shape
    wp = w + pl + pr
    planes = []
    for p in range(min(sw, wp)):         # a phase past the padded width has no column (stride 1 << 28)
        cols = len(range(p, wp, sw))
        shape = (n, h + pt + pb, cols, c)
        pl_ = np.full(shape, fill, dtype) if bufs is None else _border_array(bufs, ("plane", p), shape, dtype, fill)
        k0 = max(0, -(-(pl - p) // sw))              # first plane column inside the input
        k1 = min(cols, -(-(pl + w - p) // sw))       # one past the last
        if k1 > k0:
            src = xn[:, :, p + k0 * sw - pl::sw][:, :, :k1 - k0]
            dst = pl_[:, pt:pt + h, k0:k1]
            copy_pixels(dst, src)               # 96x96x16: 28 -> 14 us a plane
            if zp:
                np.subtract(dst, dtype(zp), out=dst)
        planes.append(pl_)
    return planes


def _border_array(bufs, key, shape, dtype, fill):
    """A kept padded-input buffer whose border (never written after) holds fill."""
    if not fill:
        return bufs.array(key, shape, dtype, zero=True)
    return bufs.array((key, fill), shape, dtype, init=lambda a: a.fill(fill))


def _rows_per_block(row_bytes):
    return max(1, _BLOCK_BYTES // max(1, row_bytes))


class _SigLike:
    """Lets layout_of() run on build/infer Infos (a count failure there cannot happen:
    addOperation validated the same operands)."""
    __slots__ = ("op", "ins")

    def __init__(self, op, ins):
        self.op = op
        self.ins = ins

    def fail(self, msg):
        raise value_error(f"{self.op.name}: {msg}", False)
