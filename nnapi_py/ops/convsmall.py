"""Shared layer of the convolutions: the small-tensor kernels (a few output pixels or a one-pixel
filter window, float and quantized), which skip the row blocking of im2col.py.
"""
import numpy as np

from .base import kept_array
from . import quant as Q
from .common import Scratch
from .im2col import _patch_index


def _small_direct_conv(res, pk, bias, dims, pads, geom, o):
    """The small quantized CONV_2D in quant.DirectProduct's form (quant.direct_columns: the
    requantization folded into the product exactly, with the negative side's correction as a
    second block of columns where the stage has one): the input cast into a float64 row that
    ends with the padding's value (the input zero point) and a one, every patch of it gathered
    into a kept block by one take (a 1x1 convolution without padding or stride: the row's
    values are the patches, no gather), one product into a kept block, the clamp stored into
    bytes, and the int8 top-bit flip or the sum of the two blocks' bytes: 4-5 numpy calls.
    None where the stage has no such form."""
    n, h, w, c = dims
    kh, kw, (sh, sw), (dh, dw), oh, ow = geom
    qs = res.stages.qs
    zx = res.zp
    st = qs.stage(bias, pk.bound, pk.ch_bound())
    form = Q.direct_columns(pk.mat, zx, st, qs.out.dtype)
    if form is None or Q._CLIP_UFUNC is None:
        return None
    wd, low, high, combine = form
    kdim, nb = wd.shape[0] - 1, wd.shape[1]
    wd = Q.aligned(wd.reshape(kdim + 1, nb * o))     # (a cache line: the product's gemm runs faster)
    signed = qs.out.dtype == np.int8
    hwc, npix = h * w * c, oh * ow
    plain = (kh, kw, sh, sw) == (1, 1, 1, 1) and not any(pads)     # the input is the patches
    if not plain:
        idx = _patch_index(dims, pads, geom, hwc, hwc + 1)          # [npix, kdim + 1] in one image
        idx = np.ascontiguousarray((idx[None] + (np.arange(n) * (hwc + 2))[:, None, None])
                                   .reshape(n * npix, kdim + 1))

    def new():
        cols = Q.aligned_empty((n * npix, kdim + 1), np.float64)
        cols[...] = 1                                       # the last column: the bias row's one
        if plain:
            xa, xin = cols, cols[:, :kdim].reshape(n, h, w, c)
        else:
            xa = Q.aligned_empty((n, hwc + 2), np.float64)
            xa[:, hwc], xa[:, hwc + 1] = zx, 1              # the padding's value, the one
            xin = xa[:, :hwc].reshape(n, h, w, c)
        z = Q.aligned_empty((n * npix, nb * o), np.float64)
        b = np.empty((n * npix, nb * o), np.uint8)
        v = b.view(np.int8) if signed else b
        return [xa.reshape(-1), xin, cols, z, b, v[:, :o], v[:, o:], None, None, z]

    # (two blocks stay side by side: a block-major product, [2, rows, O] by two np.dot or one
    # matmul, costs about what it saves in the blocks' byte sum)
    return _direct_run(new, None if plain else idx, None, wd, combine, (low, high), (low, high), n * npix, o)


def _small_quant_conv(res, pk, bias, dims, pads, geom, o):
    """The quantized CONV_2D of a small image with a constant filter and bias (the small-tensor
    path, common.SMALL): every patch gathered by one advanced index from the input's values in
    the product's dtype (centred by the zero point or not, as the general kernel: res.centring),
    followed by the padding's value and, where the GEMM adds the bias (res.augmented), a one;
    one product; the general kernel's epilogue (OutputStage).  The same exact integer sums, so
    the same bytes, in 4 numpy calls before the epilogue instead of a copy per patch block."""
    n, h, w, c = dims
    pt, pl = pads
    kh, kw, (sh, sw), (dh, dw), oh, ow = geom
    direct = _small_direct_conv(res, pk, bias, dims, pads, geom, o)
    if direct is not None:
        return direct
    zx, fill = res.centring(pk, bias)
    aug = res.augmented(pk, bias)
    mat = (aug if aug is not None else pk).mat
    epi = res.epilogue(pk, bias)
    dt = pk.dtype
    hwc = h * w * c
    oy, ox, ky, kx, ci = np.ix_(np.arange(oh), np.arange(ow), np.arange(kh), np.arange(kw), np.arange(c))
    iy, ix = oy * sh + ky * dh - pt, ox * sw + kx * dw - pl
    inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    idx = np.where(inside, (iy * w + ix) * c + ci, hwc).reshape(oh * ow, kh * kw * c)
    if aug is not None:                 # the ones column of the bias row
        idx = np.hstack([idx, np.full((oh * ow, 1), hwc + 1)])
    idx = np.ascontiguousarray(idx, np.intp)
    pad = dt(fill if not zx else 0)     # the padding's value in the product's domain
    zxv = dt(zx)
    scratch = Scratch()

    def init(a):
        a[:, hwc] = pad
        a[:, hwc + 1] = 1

    def run(x, out):
        bufs = scratch.take()
        try:
            xa = bufs.array("xa", (n, hwc + 2), dt, init=init)
            v = xa[:, :hwc]
            if zx:
                np.subtract(x.reshape(n, hwc), zxv, out=v)
            else:
                np.copyto(v, x.reshape(n, hwc), casting="unsafe")
            acc = np.matmul(xa[:, idx], mat)            # [n, OH*OW, O]
            epi(acc.reshape(n, oh, ow, o), out, False)
        finally:
            scratch.give(bufs)
    return run


DW_MATMUL_ROWS = 4     # _small_quant_dw: from this many output pixels, one batched matmul per channel


def _small_quant_dw(res, taps, bias, dims, pads, geom, m):
    """The quantized DEPTHWISE_CONV_2D of a small image (the small-tensor path, common.SMALL)
    with a constant filter and bias, in quant.DirectProduct's form (quant.direct_columns: the
    requantization folded into the product exactly, the negative side's correction as a second
    block where the stage has one): the input cast into a float64 row followed by a channel row
    of the padding's value (the input zero point) and one of ones; every output pixel's taps of
    every channel gathered from it by one take (the last tap the ones): from DW_MATMUL_ROWS
    output pixels channel-major [channels, pixels, taps + 1] and one batched matmul with each
    channel's weights [taps + 1, blocks], else [pixels, taps + 1, channels] and one einsum with
    the weights [taps + 1, blocks, channels]; the clamp in place and its cast into bytes; the
    int8 top-bit flip or the two blocks' byte sum: 6 numpy calls, the same exact sums as the
    general kernel.  taps: [KH*KW, O] centred; m: the depth multiplier (output
    channel o reads input channel o // m).  None where the stage has no such form."""
    n, h, w, c = dims
    pt, pl = pads
    kh, kw, (sh, sw), (dh, dw), oh, ow = geom
    o = taps.shape[1]
    qs = res.stages.qs
    zx = res.zp
    pk = res.stages.packed.val
    st = qs.stage(bias, pk.bound, pk.ch_bound())
    form = Q.direct_columns(taps, zx, st, qs.out.dtype)
    if form is None or Q._CLIP_UFUNC is None:
        return None
    wd, low, high, combine = form                   # [T + 1, B, O]
    nb, t = wd.shape[1], kh * kw
    hwc, npix = h * w * c, oh * ow
    row = hwc + 2 * c                               # image, padding row, ones row
    oy, ox, ky, kx, oc = np.ix_(np.arange(oh), np.arange(ow), np.arange(kh), np.arange(kw), np.arange(o))
    iy, ix = oy * sh + ky * dh - pt, ox * sw + kx * dw - pl
    ci = oc // m
    inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    idx = np.where(inside, (iy * w + ix) * c + ci, hwc + ci).reshape(npix, t, o)
    ones = np.broadcast_to(hwc + c + np.arange(o) // m, (npix, 1, o))
    idx = np.concatenate([idx, ones], axis=1)                                   # [npix, T + 1, O]
    idx = np.ascontiguousarray((idx[None] + (np.arange(n) * row)[:, None, None, None])
                               .reshape(n * npix, t + 1, o), np.intp)
    low, high = low.reshape(nb, o), high.reshape(nb, o)
    signed = qs.out.dtype == np.int8
    rows = n * npix
    if rows >= DW_MATMUL_ROWS:
        # channel-major: each channel's [rows, T + 1] columns by its [T + 1, blocks] weights, one
        # batched matmul ([O, rows, blocks]; the einsum over [rows, T + 1, O] took 3-7 times as
        # long from 16 rows up), cast into block-major bytes [blocks, rows, O] (their sum or
        # flip over contiguous runs)
        idx = np.ascontiguousarray(idx.transpose(2, 0, 1))                    # [O, rows, T + 1]
        w_ = Q.aligned(wd.transpose(2, 0, 1))                                   # [O, T + 1, B]
        bounds = (low.T[:, None, :], high.T[:, None, :])                         # per [O, 1, B]

        def new():
            xa = Q.aligned_empty((n, row), np.float64)
            xa[:, hwc:hwc + c], xa[:, hwc + c:] = zx, 1
            cols = Q.aligned_empty((o, rows, t + 1), np.float64)
            z = Q.aligned_empty((o, rows, nb), np.float64)
            b = np.empty((nb, rows, o), np.uint8)
            v = b.view(np.int8) if signed else b
            zb = z.transpose(2, 1, 0)                       # the product in the bytes' layout
            return [xa.reshape(-1), xa[:, :hwc].reshape(n, h, w, c), cols, z, b, v[0], v[-1], None, None,
                    zb if combine == "add" else zb[0]]

        return _direct_run(new, idx, "matmul", w_, combine, bounds, bounds, rows, o)
    # two blocks: block-major [2, rows, O], so that their bytes are summed as two contiguous runs
    # (side by side, the strided halves took 3 times as long; the einsum writes either order)
    sub = "ptc,tkc->kpc" if nb > 1 else "ptc,tc->pc"
    w_ = Q.aligned(wd if nb > 1 else wd[:, 0])

    def new():
        xa = Q.aligned_empty((n, row), np.float64)
        xa[:, hwc:hwc + c], xa[:, hwc + c:] = zx, 1
        cols = Q.aligned_empty((rows, t + 1, o), np.float64)
        z = Q.aligned_empty((nb, rows, o) if nb > 1 else (rows, o), np.float64)
        b = np.empty((nb, rows, o), np.uint8)
        v = b.view(np.int8) if signed else b
        return [xa.reshape(-1), xa[:, :hwc].reshape(n, h, w, c), cols, z, b.reshape(z.shape), v[0], v[-1],
                None, None, z]

    blocks = (low.reshape(nb, 1, o), high.reshape(nb, 1, o)) if nb > 1 else (low[0], high[0])
    return _direct_run(new, idx, sub, w_, combine, (low[0], high[0]), blocks, rows, o)


def _direct_run(new, idx, sub, w, combine, store, blocks, rows, o):
    """run(x, out) of the small direct kernels (CONV_2D's and DEPTHWISE_CONV_2D's), or None where
    the input's view would not be written in place.  Each run takes a frame of kept work arrays
    from a pool (new() makes one: [the flat input row, its image view, the columns, the product,
    the bytes, the first and last blocks' bytes, the output last written, its rows view, the
    product seen in the layout of the bytes (or of the output's rows, "store")]), copies the
    input in, gathers the columns with one take by idx (None: the row is the columns), makes
    one product (np.dot with w, sub "matmul": np.matmul with w, else einsum `sub` with w),
    clamps it in place (store / blocks: the bounds, broadcast to the product) and casts it into
    the output's rows ("store") or into the blocks' bytes followed by the int8 top-bit flip or
    the two blocks' wrapping byte sum."""
    if combine == "flip":       # the clamp, store and flip by one take (quant.flip_table)
        tab = Q.flip_table(*blocks)
        make = new

        def new():
            f = make()
            f[4] = np.empty((rows, o), np.intp)     # the truncated product: the table's indices
            return f
    first = new()
    if not np.shares_memory(first[1], first[0]):
        return None
    pool = [first]
    pop, push = pool.pop, pool.append
    clip, copyto, dot, ein, add = Q._CLIP_UFUNC, np.copyto, np.dot, Q.c_einsum, np.add
    matmul = np.matmul
    # the clamp's bounds and the flip as operands of the whole block, so that each ufunc runs
    # one loop over it: a 0-d array where uniform (every block but the two-term form's), else
    # spread over every row -- broadcast per channel along the rows, a 64-row 4-channel
    # layer's clamp ran 64 inner loops of 4 values (helia_tiny_cnn's 3x3 CONV_2D)
    if combine == "store":
        slo, shi = (_whole(b, first[3].shape) for b in store)
    elif combine == "flip":
        take = tab.take
    else:
        blo, bhi = (_whole(b, first[3].shape) for b in blocks)

    def run(x, out):
        try:
            f = pop()
        except IndexError:
            f = new()
        copyto(f[1], x, casting="unsafe")
        if idx is not None:
            f[0].take(idx, None, f[2], "clip")
        if sub is None:
            dot(f[2], w, out=f[3])
        elif sub == "matmul":
            matmul(f[2], w, out=f[3])
        else:
            ein(sub, f[2], w, out=f[3])
        if out is f[7]:
            r = f[8]
        elif out.flags.c_contiguous:
            r = out.reshape(rows, o)
            if kept_array(out):
                f[7], f[8] = out, r
        else:                       # (a strided output: through a contiguous block)
            r = np.empty((rows, o), out.dtype)
        # the clamp in place, then the cast by copyto: a ufunc's casting output runs through
        # buffers (256 values: 2.9 against 1.2 + 0.9 us)
        if combine == "store":
            clip(f[3], slo, shi, out=f[3])
            copyto(r, f[9], casting="unsafe")
        elif combine == "flip":     # truncated to the table's indices, its take (mode clip)
            copyto(f[4], f[9], casting="unsafe")
            take(f[4], None, r, "clip")
        else:                       # the two blocks' bytes: their wrapping sum
            clip(f[3], blo, bhi, out=f[3])
            copyto(f[4], f[9], casting="unsafe")
            add(f[5], f[6], out=r)
        if not out.flags.c_contiguous:
            out[...] = r.reshape(out.shape)
        push(f)
    return run


def _whole(a, shape):
    """An operand of a block of `shape` holding a broadcast along its rows: a 0-d array where
    every value is the same, else the values spread over the whole block (C-contiguous)."""
    a = np.asarray(a)
    if a.size and (a == a.flat[0]).all():
        return np.array(a.flat[0], a.dtype)
    return np.ascontiguousarray(np.broadcast_to(a, shape))
