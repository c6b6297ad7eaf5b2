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
from .convgeom import ConvBase, Layout, _SigLike, _int, _rows_per_block, prepare_input
from .convquant import _BIAS_IN_PRODUCT, _FEW_ROWS, _Output, _WIDE_O, _packed_filter
from .convsmall import _small_quant_conv
from .im2col import _NARROW_RUN, _RUN_BYTES, _conv_blocks, _one_pixel
from .padding import window_view
from . import quant as Q


LEAN_FLOAT = 64         # float32 layers up to this many x common.SMALL output values: the lean kernel
LEAN_POINTWISE = 4096   # (a 1x1 stride-1 layer without padding, one GEMM in both: up to this many)
_SMALL_PRODUCT = 10 ** 6  # multiply-adds of a product OpenBLAS runs without packing (_pixel_blocks)
_BLOCK_MIN = 128        # pixels of a block at the least
_BLOCK_EPILOGUE = True  # a product in blocks adds the bias and activation block by block
_AUG_PIXELS = 64        # a 1x1 layer with O < 2 C of at most this many pixels: the bias in the GEMM
                        # where it gives the same bits (4 x 128 -> 64: 5.3 -> 3.6 us; none from 256)


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
    pointwise = (kh, kw) == (1, 1) and strides == (1, 1) and not any(pads) and (h, w) == (oh, ow)
    if not res.quant and ins[0].type == F32 and pk0 is not None and bias_const is not None and groups == 1 \
            and not nchw and n == 1 and 0 < oh * ow * o <= (LEAN_POINTWISE if pointwise else LEAN_FLOAT) * common.SMALL:
        lean = _lean_float_conv(res, pk0, bias_const, (n, h, w, c), pads, geom, o)

    def kernel(i, oarr):
        if lean is not None and i[1] is filter_src and i[2] is bias_const and lean(i[0], oarr[0]) is not False:
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


def _lean_float_conv(res, pk, bias, dims, pads, geom, o):
    """The float32 CONV_2D of one image with a constant filter and bias, up to LEAN_FLOAT x
    common.SMALL output values, as im2col._conv_blocks computes it in one block of rows, without
    its per-run setup: the work arrays (padded input, its window view, the patch block with its
    column of ones) kept per work set, the output's view kept as common.Reshaped keeps it, and
    the very products of the general kernel: a 1x1 layer with O >= 2 C (or any other filter)
    the patches with a ones column times the filter with the bias row (the bias inside the
    GEMM), then the activation; a 1x1 layer with O < 2 C the input (or its strided copy) times
    the filter, then the bias rows and the activation; a narrow input (a three-channel stem,
    _conv_blocks_transposed) its patches gathered transposed, the GEMM reading them as their
    transpose.  The same arithmetic, so the same bits (2x2x64 -> 128: 12 -> 4 us a run, with
    np.dot where common.product_for finds matmul's bits).  A large product runs in blocks of pixels
    where _pixel_blocks finds the whole product's bits (32x32 pixels x 33 -> 64: 86 -> 67 us).
    None where _conv_blocks would take several row blocks; run(x, out) returns False for an
    output that cannot be viewed as rows (the general kernel runs)."""
    _, h, w, c = dims
    pt, pb, pl, pr = pads
    kh, kw, (sh, sw), (dh, dw), oh, ow = geom
    npix, kdim = oh * ow, kh * kw * c
    one_by_one = (kh, kw) == (1, 1)
    padded = bool(pt or pb or pl or pr)
    transposed = False
    if one_by_one:
        with_ones = o >= 2 * c
        plain = not with_ones and (sh, sw) == (1, 1) and (h, w) == (oh, ow) and not padded
    else:
        with_ones = True
        plain = False
        if kw * c < _NARROW_RUN and ow >= 2 * _NARROW_RUN:
            if dw == 1 and kw * c * 4 >= _RUN_BYTES:
                return None             # _conv_blocks' choice follows the input's layout here
            transposed = True           # its _conv_blocks_transposed
    k = c if one_by_one else kdim
    if not (one_by_one and (with_ones or plain)) and min(oh, _rows_per_block(ow * (k + o) * 4)) < oh:
        return None                     # several row blocks (a 1x1 layer's one GEMM has none)
    mat = res.augmented(pk, bias).mat if with_ones else pk.mat
    epi = None if with_ones else res.epilogue(pk, bias)
    brow = None if epi is None or epi.bias is None else np.tile(np.asarray(epi.bias, np.float32), ow)
    if plain and brow is not None and npix <= _AUG_PIXELS:
        aug = res.augmented(pk, bias).mat
        if _bias_in_product_same(pk.mat, aug, npix):
            with_ones, plain, mat, brow = True, False, aug, None
    act = common.float_clamp(res.fuse, np.float32)
    pshape = (1, h + pt + pb, w + pl + pr, c)
    direct = one_by_one and (sh, sw) == (1, 1) and (h, w) == (oh, ow) and not padded     # x is the patches
    kk = k + 1 if with_ones else k
    product = np.matmul if transposed or npix * kk * o > _SMALL_PRODUCT else common.product_for(mat, npix)
    blocks = _pixel_blocks(mat, npix, kk, transposed)
    if blocks is not None:
        blocks, product = blocks
    pixels_of = common.Reshaped((npix, o), out=True)
    rows_of = common.Reshaped((oh, ow * o), out=True)
    x_of = common.Reshaped((npix, c))
    scratch = Scratch()

    def patches(a):
        """The layer's patches of a (the padded input) as [OH, OW, KH, KW, C] or, 1x1, [1, OH, OW, C]
        (transposed: [KH, KW, C, OH, OW])."""
        if one_by_one:
            return a[:, ::sh, ::sw][:, :oh, :ow]
        v = window_view(a, kh, kw, sh, sw, dh, dw, oh, ow)[0]
        return v.transpose(2, 3, 4, 0, 1) if transposed else v

    def kept(bufs):
        """The work set's arrays, made once (through _Buffers.array: its size limit and message)."""
        if transposed:
            t = bufs.array("lean colsT", (kk, npix), np.float32, init=_ones_last_row)
            cols, dst = t.T, t[:k].reshape(kh, kw, c, oh, ow)
        else:
            cols = bufs.array("lean cols", (npix, kk), np.float32, init=_ones_last_column if with_ones else None)
            dst = cols[:, :k].reshape((1, oh, ow, c) if one_by_one else (oh, ow, kh, kw, c))     # a view
        xp = bufs.array("lean padded", pshape, np.float32, zero=True) if padded else None     # zero border
        inner = xp[:, pt:pt + h, pl:pl + w] if padded else None
        t = bufs["lean"] = (cols, inner, None if xp is None else patches(xp), dst)
        return t

    in_blocks = blocks is not None and _BLOCK_EPILOGUE
    bpix = None if not in_blocks or brow is None else np.tile(brow[:o], (blocks[0][1], 1))   # [block, O]
    bact = act if in_blocks else None

    def multiply(cols, o2):
        """The product into o2, by blocks of pixels with each block's bias and activation while
        it is in cache (96x96 pixels, 32 -> 32: 530 -> 450 us)."""
        if blocks is None:
            product(cols, mat, out=o2)
            return
        for a, b in blocks:
            ob = o2[a:b]
            product(cols[a:b], mat, out=ob)
            if bpix is not None:
                np.add(ob, bpix[:b - a], out=ob)
            if bact is not None:
                bact(ob)

    def run(x, out):
        try:
            o2 = pixels_of(out)
        except AttributeError:
            return False
        if plain:
            if x.dtype != np.float32 or not x.flags.c_contiguous:
                return False
            multiply(x_of(x), o2)
        else:
            bufs = scratch.take()
            try:
                cols, inner, win, dst = bufs.get("lean") or kept(bufs)
                if direct:
                    dst[...] = x
                elif inner is not None:
                    inner[...] = x
                    dst[...] = win
                else:
                    dst[...] = patches(x)
                multiply(cols, o2)
            finally:
                scratch.give(bufs)
        if in_blocks:
            return True
        if brow is not None:
            rows = rows_of(out)
            np.add(rows, brow, out=rows)
        if act is not None:
            act(o2)
        return True
    return run


def _pixel_blocks(mat, rows, k, transposed):
    """(blocks of pixels [(first, end)], their product) for the product [rows, k] @ mat that
    the general kernel makes with one np.matmul, or None (one product).  OpenBLAS multiplies a
    product of at most about 10^6 multiply-adds without packing its operands (its small-matrix
    kernel on AVX-512 machines), much faster for the thin products of convolutions: a larger
    product runs as blocks of at least _BLOCK_MIN pixels under that size where a check on random
    patches finds the whole product's bits (the sums run over k in the same order either way),
    each block by np.dot where common.product_for finds matmul's bits for it.  Alone, in one process:
    1024 x 33 @ 33 x 64 86 -> 67 us, 1024 x 64 @ 64 x 32 78 -> 68, 4096 x 16 @ 16 x 32 128 -> 86,
    9216 x 32 @ 32 x 32 767 -> 391, 12544 x 16 @ 16 x 96 2050 -> 1405; blocks under _BLOCK_MIN
    pixels lose (1024 x 129 @ 129 x 128 by 32: 346 -> 474), so they are not made."""
    n = mat.shape[1]
    size = 1
    while size * 2 * n * k <= _SMALL_PRODUCT and size * 2 < rows:
        size *= 2
    if size < _BLOCK_MIN or size >= rows:
        return None
    blocks = [(a, min(rows, a + size)) for a in range(0, rows, size)]
    product = np.matmul if transposed else common.product_for(mat, size)
    rng = np.random.default_rng(rows)
    whole, part = np.empty((rows, n), np.float32), np.empty((rows, n), np.float32)
    for _ in range(2):
        x = rng.standard_normal((k, rows) if transposed else (rows, k)).astype(np.float32)
        x = x.T if transposed else x
        np.matmul(x, mat, out=whole)
        for a, b in blocks:
            product(x[a:b], mat, out=part[a:b])
        if whole.tobytes() != part.tobytes():
            return None
    return blocks, product


def _ones_last_column(a):
    a[:, -1] = 1


def _ones_last_row(a):
    a[-1] = 1


def _bias_in_product_same(mat, aug, rows):
    """True where [x, 1] @ [mat; bias] gives the bits of (x @ mat) + bias for `rows` rows (the
    GEMM's sum adds the bias row last, one rounding, as the separate add does: checked on
    random rows, since a routine taking the terms in another order would round otherwise)."""
    rng = np.random.default_rng(rows)
    k = mat.shape[0]
    for _ in range(2):
        x = rng.standard_normal((rows, k)).astype(np.float32)
        xa = np.ones((rows, k + 1), np.float32)
        xa[:, :k] = x
        a = np.matmul(x, mat)
        a += aug[k]
        if a.tobytes() != np.matmul(xa, aug).tobytes():
            return False
    return True


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
