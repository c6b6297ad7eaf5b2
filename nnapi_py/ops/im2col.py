"""Shared layer of the convolutions: patch gathering (im2col) and the blocked GEMM over output rows.

* CONV_2D / GROUPED_CONV_2D: im2col built from a strided window view (padding.window_view),
  a block of output rows at a time so that the patch matrix stays in cache, times the filter
  pre-packed at build() as a [KH*KW*C, O] matrix (GROUPED: a batch of per-group matrices);
  a 1x1 stride-1 convolution is a single matmul on the input itself.  The copy moves a
  filter row's run of KW*C input values as one item where that run is 12-64 floats, and
  gathers the patches transposed for shorter runs (a 3x3 three-channel stem).
"""
import numpy as np

from .base import kept_array
from . import quant as Q
from .padding import window_view
from .convgeom import _rows_per_block
from .convquant import _product


_NARROW_RUN = 16                # KW*C below this (and no run view): patches gathered transposed
_RUN_BYTES = 48                 # filter-row runs of 48..256 bytes: im2col copies them as items
_RUN_MAX = 256


_SMALL_PREP = 4096              # 1x1 outputs of at most this many values: one GEMM, no row blocks


# ---- one output pixel of a quantized streaming step ----------------------------------------------
def _one_pixel(nchw, n, h, w, kh, kw, pads, dil, packed):
    """True for a layer whose single output pixel reads its whole input (input height x
    width = the filter's, no padding, batch 1, NHWC: a streaming model's step) with a
    constant filter: quantized, it gets a quant.DirectProduct or TableProduct (_Output.one).  The packed
    filter is [KH*KW*C, O] (convolution) or [KH*KW, C] (depthwise, one output column): the
    patch values of the one pixel in the input's own order."""
    return not (nchw or n != 1 or (h, w) != (kh, kw) or any(pads) or tuple(dil) != (1, 1)
                or packed.val is None)


# ---- im2col convolution core (CONV_2D, GROUPED_CONV_2D) ----------------------------------------
def _ones_last_row(a):
    """Scratch init: the last row of a work array is ones (the bias row's factor)."""
    a[-1] = 1


def _ones_last_column(a):
    """Scratch init: the last column of a work array is ones (the bias column's factor)."""
    a[:, -1] = 1


def _patch_block(bufs, aug, npix, k, dtype):
    """The kept patch block [npix, k], with a last column of ones when the GEMM adds the bias
    (aug)."""
    if aug is None:
        return bufs.array("cols", (npix, k), dtype)
    return bufs.array("cols+1", (npix, k + 1), dtype, init=_ones_last_column)


def _conv_blocks(xp, pk, geom, on, epi, groups, bufs, aug, raw_zp=None):
    """xp: padded NHWC input (compute dtype); pk.mat: [KH*KW*Cg, O] (groups == 1) or
    [G, KH*KW*Cg, Og]; on: NHWC view of the output.  Accumulators reach the epilogue as
    [rows, OW, O] blocks.  bufs (a Scratch set) holds the patch and accumulator blocks.
    aug (float, groups == 1): the filter matrix with the bias as an extra last row; the
    patches then get a column of ones, so the GEMM adds the bias (the last term of every sum,
    as the separate pass would) and the epilogue only applies the activation: one pass over
    the output fewer.  Used where the patches are copied anyway, or where copying the input
    costs less than a pass over the output (O >= 2 C).  Quantized, aug (_StageCache.aug) is
    taken on every path: the patches always get their column of ones and the GEMM (into the
    accumulator block) adds the bias; the raw 1x1 path then centres each block by raw_zp
    whole, its ones column first set to 1 + raw_zp (a few pixels take that block loop too).
    raw_zp (a quantized 1x1 layer without padding): xp is the raw NHWC input, each block of
    it is cast and centred by raw_zp into the patch block just before its GEMM, so the input's
    compute-dtype copy stays in cache instead of being written whole first (in-process, side
    by side: 56x56x144 -> 24 0.79 -> 0.77 ms, with an input zero point 0.88 -> 0.84 ms)."""
    kh, kw, (sh, sw), (dh, dw), oh, ow = geom
    n, _, _, c = xp.shape
    o = on.shape[3]
    mat = pk.mat
    direct = (not epi.quant) and on.dtype == pk.dtype and on.flags.c_contiguous
    if groups != 1 or not (direct or epi.quant):
        aug = None
    qaug = aug if epi.quant else None       # quantized: the bias row in the GEMM (always taken)
    if kh == 1 and kw == 1 and groups == 1:
        src = xp[:, ::sh, ::sw][:, :oh, :ow] if (sh > 1 or sw > 1 or xp.shape[1] != oh
                                                  or xp.shape[2] != ow) else xp
        if aug is not None and qaug is None and o >= 2 * c:
            npix = n * oh * ow
            xa = bufs.array("ones", (npix, c + 1), pk.dtype, init=_ones_last_column)
            xa[:, :c].reshape(src.shape)[...] = src
            np.matmul(xa, aug.mat, out=on.reshape(-1, o))                        # GEMM + bias
            Q.apply_float_activation(on, epi.fuse)
            return
        if src.flags.c_contiguous and direct:
            np.matmul(src.reshape(-1, c), mat, out=on.reshape(-1, o))     # one GEMM
            epi(on, on, True)
            return
        npix = n * oh * ow
        if npix * o <= _SMALL_PREP and src.flags.c_contiguous and raw_zp is None and qaug is None:
            acc = bufs.array("acc1", (npix, o), pk.dtype)                  # a few pixels: one GEMM
            _product(src.reshape(-1, c), pk, acc)
            epi(acc.reshape(on.shape), on, False)                      # on may be NCHW's view
            return
        rows = min(oh, _rows_per_block(ow * (c + o) * pk.dtype().itemsize))
        accb = None if direct else bufs.array("acc", (rows * ow, o), pk.dtype)
        zc = pk.dtype(raw_zp or 0)
        for b in range(n):
            for r0 in range(0, oh, rows):
                r1 = min(oh, r0 + rows)
                blk = src[b, r0:r1]
                if qaug is None and blk.flags.c_contiguous and raw_zp is None:
                    cols = blk.reshape(-1, c)
                else:
                    cols = _patch_block(bufs, qaug, rows * ow, c, pk.dtype)[:(r1 - r0) * ow]
                    cols[:, :c].reshape(blk.shape)[...] = blk
                    if zc:          # centred block by block (a ones column: 1 + zc - zc)
                        if qaug is not None:
                            cols[:, c] = 1 + zc
                        np.subtract(cols, zc, out=cols)
                dst = on[b, r0:r1]
                if direct:
                    np.matmul(cols, mat, out=dst.reshape(-1, o))
                    epi(dst, dst, True)
                else:
                    acc = accb[:(r1 - r0) * ow]
                    _product(cols, pk if qaug is None else qaug, acc)
                    epi(acc.reshape(r1 - r0, ow, o), dst, False)
        return
    seen = bufs.get("win")
    if seen is not None and seen[0] is xp:                          # a kept padded input: its view too
        win = seen[1]
    else:
        win = window_view(xp, kh, kw, sh, sw, dh, dw, oh, ow)      # [N, OH, OW, KH, KW, C]
        if kept_array(xp):                                         # ours or a plan temporary, never a caller's
            bufs["win"] = (xp, win)
    kdim = kh * kw * c
    rows = min(oh, _rows_per_block(ow * (kdim + o) * pk.dtype().itemsize))
    runs = _run_view(xp, win, bufs) if groups == 1 else None
    if runs is None and groups == 1 and kw * c < _NARROW_RUN and ow >= 2 * _NARROW_RUN:
        _conv_blocks_transposed(win, pk, on, epi, bufs, aug, rows, direct)
        return
    for b in range(n):
        for r0 in range(0, oh, rows):
            r1 = min(oh, r0 + rows)
            dst = on[b, r0:r1]
            if groups == 1:
                np_ = (r1 - r0) * ow
                cols = _patch_block(bufs, aug, rows * ow, kdim, pk.dtype)[:np_]
                _im2col(cols, kdim, win, runs, b, r0, r1)                       # im2col block
                if aug is not None and qaug is None:
                    np.matmul(cols, aug.mat, out=dst.reshape(-1, o))             # GEMM + bias
                    Q.apply_float_activation(dst, epi.fuse)
                elif direct:
                    np.matmul(cols, mat, out=dst.reshape(-1, o))
                    epi(dst, dst, True)
                else:
                    acc = bufs.array("acc", (rows * ow, o), pk.dtype)[:np_]
                    _product(cols, pk if qaug is None else qaug, acc)
                    epi(acc.reshape(r1 - r0, ow, o), dst, False)
            else:
                cg = c // groups
                # [P, KH, KW, G, Cg] -> [G, P, KH*KW*Cg]; one batched GEMM over the groups
                blk = win[b, r0:r1].reshape(-1, kh, kw, groups, cg)
                cols = np.ascontiguousarray(blk.transpose(3, 0, 1, 2, 4)).reshape(groups, -1, kh * kw * cg)
                res = np.matmul(cols, mat)                                  # [G, P, Og]
                acc = np.ascontiguousarray(res.transpose(1, 0, 2)).reshape(r1 - r0, ow, o)
                epi(acc, dst, False)


def _run_view(xp, win, bufs):
    """The window view [N, OH, OW, KH, KW, C] as [N, OH, OW, KH] void items of KW*C values,
    when a filter row reads one contiguous run of the input (no width dilation) of at most
    _RUN_BYTES .. _RUN_MAX (a 3-channel stem's 5x5 rows, 3x3 rows of 4 to 21 float
    channels): numpy's copy then steps once per run instead of once per value.  Measured
    (float32 layer, side by side): 128x128x3 5x5 stride 2 -> 24 channels 373 -> 322 us,
    96x96x8 3x3 -> 16 530 -> 470 us, 96x96x16 3x3 -> 16 886 -> 827 us; shorter runs (a 3x3
    three-channel stem) gain nothing over the transposed gather.  None when it does not apply."""
    n, oh, ow, kh, kw, c = win.shape
    s = win.strides
    isz = xp.itemsize
    if s[5] != isz or s[4] != c * isz or not _RUN_BYTES <= kw * c * isz <= _RUN_MAX \
            or not xp.flags.c_contiguous:
        return None
    seen = bufs.get("runs")
    if seen is not None and seen[0] is xp:
        return seen[1]
    v = np.ndarray((n, oh, ow, kh), np.dtype((np.void, kw * c * isz)), buffer=xp,
                   offset=0, strides=s[:4])
    v.flags.writeable = False
    if kept_array(xp):                                         # ours or a plan temporary, never a caller's
        bufs["runs"] = (xp, v)
    return v


def _im2col(cols, kdim, win, runs, b, r0, r1):
    """cols[:, :kdim] <- the patches of output rows r0..r1 of image b (im2col block)."""
    if runs is None:
        cols[:, :kdim].reshape((r1 - r0,) + win.shape[2:])[...] = win[b, r0:r1]
        return
    src = runs[b, r0:r1]
    cols[:, :kdim].view(src.dtype).reshape(src.shape)[...] = src


def _conv_blocks_transposed(win, pk, on, epi, bufs, aug, rows, direct):
    """_conv_blocks for a narrow input (KW*C below _NARROW_RUN values: a 3-channel image's
    stem).  The patches are gathered transposed, [KH*KW*C (+1), pixels]: numpy's copy then
    runs along a row of output pixels (one strided read each) instead of a run of KW*C
    values per pixel, and the GEMM reads the block as its transpose (BLAS takes either).
    Measured (float32, 3x3, stride 2, same numbers bit for bit): 192x192x3 -> 96x96x32
    471 -> 417 us, 192x192x3 -> 96x96x16 339 -> 274 us, 256x256x3 -> 128x128x8 525 -> 402 us."""
    n, oh, ow, kh, kw, c = win.shape
    o = on.shape[3]
    kdim = kh * kw * c
    mat = pk.mat if aug is None else aug.mat
    k = mat.shape[0]
    colsT = bufs.array("colsT", (k, rows * ow), pk.dtype, init=_ones_last_row if aug is not None else None)
    for b in range(n):
        for r0 in range(0, oh, rows):
            r1 = min(oh, r0 + rows)
            np_ = (r1 - r0) * ow
            blk = colsT[:, :np_]
            # [KH, KW, C, rows, OW] <- the window block [rows, OW, KH, KW, C]
            blk[:kdim].reshape(kh, kw, c, r1 - r0, ow)[...] = win[b, r0:r1].transpose(2, 3, 4, 0, 1)
            dst = on[b, r0:r1]
            if not direct:                  # quantized (or another output dtype): via acc
                acc = bufs.array("acc", (rows * ow, o), pk.dtype)[:np_]
                np.matmul(blk.T, mat, out=acc)
                epi(acc.reshape(r1 - r0, ow, o), dst, False)
                continue
            np.matmul(blk.T, mat, out=dst.reshape(-1, o))
            if aug is not None:
                Q.apply_float_activation(dst, epi.fuse)
            else:
                epi(dst, dst, True)


def _patch_index(dims, pads, geom, pad_slot, ones_slot=None):
    """[OH*OW, KH*KW*C (+1)] indices of every patch value in an NHWC image's flat values (the
    filter's (ky, kx, c) order); a position in the padding reads pad_slot; ones_slot: a last
    column reading that slot (the bias row's one)."""
    n, h, w, c = dims
    pt, pl = pads
    kh, kw, (sh, sw), (dh, dw), oh, ow = geom
    oy, ox, ky, kx, ci = np.ix_(np.arange(oh), np.arange(ow), np.arange(kh), np.arange(kw), np.arange(c))
    iy, ix = oy * sh + ky * dh - pt, ox * sw + kx * dw - pl
    inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    idx = np.where(inside, (iy * w + ix) * c + ci, pad_slot).reshape(oh * ow, kh * kw * c)
    if ones_slot is not None:
        idx = np.hstack([idx, np.full((oh * ow, 1), ones_slot)])
    return np.ascontiguousarray(idx, np.intp)
