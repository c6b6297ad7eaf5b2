"""Convolutions CONV_2D and GROUPED_CONV_2D (the other two: depthwise_conv.py, transpose_conv.py).

* CONV_2D / GROUPED_CONV_2D: im2col built from a strided window view (padding.window_view),
  a block of output rows at a time so that the patch matrix stays in cache, times the filter
  pre-packed at build() as a [KH*KW*C, O] matrix (GROUPED: a batch of per-group matrices);
  a 1x1 stride-1 convolution is a single matmul on the input itself.  The copy moves a
  filter row's run of KW*C input values as one item where that run is 12-64 floats, and
  gathers the patches transposed for shorter runs (a 3x3 three-channel stem).
"""
import numpy as np

from .base import register, value_error
from . import common
from .common import F32, Scratch
from .convgeom import ConvBase, Layout, _SigLike, _int, prepare_input
from .convquant import _BIAS_IN_PRODUCT, _FEW_ROWS, _Output, _WIDE_O, _packed_filter
from .convsmall import _small_quant_conv
from .im2col import _conv_blocks, _one_pixel


def _conv_like_build(op, ins, outs, L, groups_of=None):
    """build() shared by CONV_2D and GROUPED_CONV_2D."""
    nchw, (n, h, w, c), pads, strides, dil, fuse = op.params(ins, L)
    pt, pb, pl, pr = pads
    wi = ins[1]
    o, kh, kw, cg = (int(d) for d in wi.dims)
    oh, ow = op.out_hw(h, w, kh, kw, pads, strides, dil)
    groups = 1 if groups_of is None else groups_of
    og = o // groups
    geom = (kh, kw, strides, dil, oh, ow)

    def arrange(wf, dtype):
        if groups == 1:
            return np.ascontiguousarray(wf.reshape(o, -1).T, dtype=dtype)               # [KH*KW*C, O]
        return np.ascontiguousarray(wf.reshape(groups, og, -1).transpose(0, 2, 1), dtype=dtype)

    packed = _packed_filter(ins, o, False, arrange)
    whole = groups == 1 and _one_pixel(nchw, n, h, w, kh, kw, pads, dil, packed)
    res = _Output(ins, outs, fuse, packed, one_pixel=False if whole else None, fold=True,
                  in_product=groups == 1 and _BIAS_IN_PRODUCT)
    scratch = Scratch()
    one = res.one
    one = getattr(one, "run", one)      # a DirectProduct's closure, called without its method
    bias_const = ins[2].value
    pk0 = packed.val
    if res.quant and one is None and pk0 is not None and groups == 1 and n * oh * ow <= _FEW_ROWS \
            and o >= _WIDE_O and pk0.bound:
        aug0 = res.augmented(pk0, bias_const)
        if aug0 is not None:        # the bias row's matrix is the one multiplied: pk0.mat views it
            aug0.transposed_only()
            pk0.mat = aug0.mat[:-1]
        else:
            pk0.transposed_only()

    filter_src = packed.src
    raw = res.quant and groups == 1 and (kh, kw) == (1, 1) and not nchw and not any(pads)
    lean = None
    if res.quant and one is None and pk0 is not None and bias_const is not None and groups == 1 and not nchw \
            and common.small(ins[0], outs[0]) and 0 < n * oh * ow * kh * kw * c <= 16 * common.SMALL \
            and kh * kw * c * o <= 16 * common.SMALL:
        # (a small filter too: a large one's product is the general kernel's, in its narrower
        # dtype and, for a few patches, with the filter first; quant.direct_columns' is float64)
        lean = _small_quant_conv(res, pk0, bias_const, (n, h, w, c), (pt, pl), geom, o)

    def kernel(i, oarr):
        if lean is not None and i[1] is filter_src and i[2] is bias_const:
            lean(i[0], oarr[0])
            return
        out = oarr[0]
        if one is not None and i[1] is filter_src and i[2] is bias_const:
            one(i[0], out)
            return
        pk = packed.get(i[1])
        if out.size == 0:
            return
        on = out.transpose(0, 2, 3, 1) if nchw else out
        bufs = scratch.take()
        zx, fill = res.centring(pk, i[2])
        try:
            if raw:                 # cast and centred block by block inside _conv_blocks
                _conv_blocks(i[0], pk, geom, on, res.epilogue(pk, i[2]), 1, bufs, res.augmented(pk, i[2]), zx)
                return
            xp = prepare_input(i[0], nchw, (pt, pb, pl, pr), pk.dtype, zx, bufs, fill)
            aug = res.augmented(pk, i[2]) if groups == 1 else None
            _conv_blocks(xp, pk, geom, on, res.epilogue(pk, i[2]), groups, bufs, aug)
        finally:
            scratch.give(bufs)
    return kernel


# ---- CONV_2D ------------------------------------------------------------------------------------
@register
class Conv2D(ConvBase):
    name = "CONV_2D"
    allow_zero_sized = True
    out_axis = 0

    def layout_of(self, sig):
        return self.dilated_layout(sig, 0)

    def channel_rule(self, cin, wd, sig, L):
        if cin and wd[3] and cin != wd[3]:
            return (f"input 1 (filter) depth {wd[3]} does not match the input depth {cin}")
        return None

    def filter_geometry(self, ins, L, c):
        o, kh, kw, ci = (int(d) for d in ins[1].dims)
        if ci != c:
            raise value_error(f"{self.name}: filter depth {ci} does not match the input depth {c}", False)
        return o, kh, kw

    def absorb_bias(self, ins, bias, nchw):
        """A 1x1 convolution without padding: W (x + b) + c = W x + (W b + c) at every pixel,
        so the new bias is W b + c (float64, rounded once)."""
        try:
            L = self.layout_of(_SigLike(self, ins))
            if self.nchw(ins, L) != nchw:
                return None
            pads = [_int(ins[k]) for k in L.pads] if L.explicit else [0]
        except Exception:
            return None
        w, c = ins[1], ins[2]
        if ins[0].type != F32 or w.type != F32 or c.type != F32 or w.value is None or c.value is None \
                or np.ndim(w.value) != 4 or w.value.shape[1:3] != (1, 1) or any(p != 0 for p in pads) \
                or w.value.shape[3] != len(bias) or not np.isfinite(w.value).all():
            return None
        wm = np.asarray(w.value, np.float64).reshape(w.value.shape[0], -1)
        return (wm @ np.asarray(bias, np.float64) + np.asarray(c.value, np.float64)).astype(np.float32)

    def build(self, ins, outs):
        L = self.layout_of(_SigLike(self, ins))
        return _conv_like_build(self, ins, outs, L)


# ---- GROUPED_CONV_2D ---------------------------------------------------------------------------
@register
class GroupedConv2D(ConvBase):
    name = "GROUPED_CONV_2D"
    extra_name = "number of groups"
    layout_required = True
    base_level = 3
    out_axis = 0

    def layout_of(self, sig):
        n = len(sig.ins)
        if n == 12:
            return Layout(True, pads=(3, 4, 5, 6), stride=(7, 8), extra=9, fuse=10, layout=11)
        if n == 9:
            return Layout(False, scheme=3, stride=(4, 5), extra=6, fuse=7, layout=8)
        self._fail_count(sig, (9, 12))

    def channel_rule(self, cin, wd, sig, L):
        g = sig.scalar_value(L.extra)
        if g is None or g < 1:
            return None
        if wd[0] and wd[0] % g:
            return f"input 1 (filter) has {wd[0]} output channels, not divisible by {g} groups"
        if cin and wd[3] and cin != g * wd[3]:
            return (f"input 0 depth {cin} must equal groups × filter depth ({g} × {wd[3]})")
        return None

    def _groups(self, ins, L, c, wd):
        g = _int(ins[L.extra])
        if g < 1:
            raise value_error(f"{self.name}: number of groups must be >= 1, got {g}", False)
        if int(wd[0]) % g:
            raise value_error(f"{self.name}: {wd[0]} output channels are not divisible by {g} groups", False)
        if c != g * int(wd[3]):
            raise value_error(f"{self.name}: input depth {c} must equal groups × filter depth "
                              f"({g} × {wd[3]})", False)
        return g

    def filter_geometry(self, ins, L, c):
        o, kh, kw, _ = (int(d) for d in ins[1].dims)
        self._groups(ins, L, c, ins[1].dims)
        return o, kh, kw

    def build(self, ins, outs):
        L = self.layout_of(_SigLike(self, ins))
        nchw = self.nchw(ins, L)
        c = int(ins[0].dims[1] if nchw else ins[0].dims[3])
        g = self._groups(ins, L, c, ins[1].dims)
        return _conv_like_build(self, ins, outs, L, groups_of=g)
