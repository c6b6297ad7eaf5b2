"""Convolutions: CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D, TRANSPOSE_CONV_2D.

All four share one signature parser (explicit / implicit padding variants, optional layout
and dilation inputs), one type-configuration check (float32, float16, quant8 asymm and
signed, per-channel quantized filters) and one input preparation (NHWC view, centring of
quantized values, zero padding).  The arithmetic:

* CONV_2D / GROUPED_CONV_2D: im2col built from a strided window view (padding.window_view),
  a block of output rows at a time so that the patch matrix stays in cache, times the filter
  pre-packed at build() as a [KH*KW*C, O] matrix (GROUPED: a batch of per-group matrices);
  a 1x1 stride-1 convolution is a single matmul on the input itself.  The copy moves a
  filter row's run of KW*C input values as one item where that run is 12-64 floats, and
  gathers the patches transposed for shorter runs (a 3x3 three-channel stem).
* DEPTHWISE_CONV_2D: the sum over the KH*KW taps as one einsum over whole output rows: the
  weights are tiled along a whole output row at build(), the input is a strided view
  [N, OH, KH, KW, OW*C] of the padded input (no copy), so the sum runs with a long contiguous
  inner loop in a single pass writing the output; a width stride is handled by splitting the
  padded input into width phases (a strided tap becomes a contiguous slice, one einsum per
  phase); a depth multiplier repeats the input channels once.  (Width stride and width
  dilation both > 1: per-tap multiply-add passes over blocks of rows.)
* TRANSPOSE_CONV_2D: one matmul input[N*H*W, C] x filter[C, KH*KW*O], then the taps are
  scatter-added with strided slices into the full output and the padding is cropped.

Quantized layers compute their integer sums exactly with BLAS on centred values (float32
when every partial sum provably stays below 2**24, else float64) and requantize with
quant.OutputStage (the reference rounding, per-channel multipliers vectorised); a constant
filter and bias with float32 sums get, at compilation, OutputStage.prepare_f32's float32
requantization wherever it is proven to give the reference's results (OutputStage.consume).
"""
import numpy as np

from .. import constants as C
from ..errors import strict
from .base import Op, kept_array, register, tname, value_error
from . import quant as Q
from .padding import implicit_padding, out_size, window_view, strided_view
from .quant import OutputStage, centered_max, exact_dtype, scale_product
from . import common
from .common import F16, F32, I32, Q8, Q8S, QPC, FLOATS, Derived, Scratch, check_bias_quant, copy_pixels, row_repeats

BOOL, INT32 = C.BOOL, C.INT32
_einsum = Q.c_einsum
_BLOCK_BYTES = 1 << 20          # working-set target of one block of output rows
_NARROW_RUN = 16                # KW*C below this (and no run view): patches gathered transposed
_RUN_BYTES = 48                 # filter-row runs of 48..256 bytes: im2col copies them as items
_RUN_MAX = 256
_FEW_ROWS = 64                  # _product: quantized GEMMs of at most this many patches ...
_WIDE_O = 128                   # ... by at least this many output channels run transposed
_CLEAN_OVER_FOLDED = True       # _StageCache: the unfolded stage where it needs no fix-up ...
_CLEAN_TRY_SHARE = 96           # ... tried where the folded one leaves at most 1 channel in this many
_CH_BOUND = True               # per-channel stages proven over each channel's own accumulator bound
_BIAS_IN_PRODUCT = True        # _StageCache: a per-tensor quantized layer's bias summed by its GEMM
_F64_IN_PRODUCT = True         # ... also where its stage stays on float64
_SMALL_PREP = 4096              # 1x1 outputs of at most this many values: one GEMM, no row blocks


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


def _filter_real_scales(x, w, out):
    """Per output channel (or scalar) requantization multipliers."""
    if w.type == QPC:
        s = np.float32(x.scale) * np.asarray(w.channel.scales, np.float32)
        return s.astype(np.float64) / float(out.scale)
    return scale_product(x.scale, w.scale) / float(out.scale)


class _Epilogue:
    """Writes a block of accumulators [..., OW, O] into the matching NHWC block of the output:
    float: + bias, activation, cast; quantized: OutputStage (bias folded in)."""

    def __init__(self, quant, fuse, stage=None, float_bias=None, tiled=None):
        self.quant = quant
        self.fuse = fuse
        self.stage = stage
        self.bias = float_bias
        self.tiled = {} if tiled is None else tiled     # row length -> bias tiled along a row

    def __call__(self, acc, dst, inplace):
        if self.quant:
            self.stage.consume(acc, dst)          # acc: the kernel's own work array
            return
        if self.bias is not None:
            key = acc.shape
            b = self.tiled.get(key)
            if b is None:           # bias along whole rows, a few rows long (row_repeats)
                ow, o = key[-2], key[-1]
                b = self.tiled[key] = np.tile(self.bias, ow * row_repeats(ow * o, acc.size))
            v = acc.reshape(-1, b.size)
            v += b
        Q.apply_float_activation(acc, self.fuse)
        if not inplace:
            dst[...] = acc.reshape(dst.shape)


# ---- per-op filter packing ----------------------------------------------------------------------
class _Packed:
    """A filter prepared for one op: matrix (or taps) in the compute dtype, and for quantized
    filters the bound of |partial sums| (to choose float32/float64 and check int64 headroom)."""
    __slots__ = ("mat", "dtype", "bound", "phases", "wsums", "mat_t", "cmax")

    def __init__(self, mat, dtype, bound, wsums=None, cmax=None):
        self.mat = mat
        self.dtype = dtype
        self.bound = bound
        self.phases = {}        # depthwise: (stride, phase) -> that phase's taps, contiguous
        self.wsums = wsums      # quantized: per output channel, (sum of w, sum of |w|), centred w
        self.mat_t = None       # _product: the matrix transposed, [O, K], made at first use
        self.cmax = cmax        # quantized: max |x - zx| of the input (bound = cmax max sum|w|)

    def ch_bound(self, cmax=None):
        """Per output channel, the bound of |sum x w| for inputs of at most cmax (default: the
        centred input's) in magnitude; None where unknown."""
        if self.wsums is None:
            return None
        cmax = self.cmax if cmax is None else cmax
        return None if cmax is None else float(cmax) * self.wsums[1]

    def transposed_only(self):
        """For a layer whose every product has at most _FEW_ROWS patches (_product then always
        runs with the transposed filter): mat_t made now and mat its view, so the filter is
        held once instead of twice (FaceNet's 8x8-map layers: some 40 MB)."""
        if self.mat_t is None:
            self.mat_t = np.ascontiguousarray(self.mat.T)
            self.mat = self.mat_t.T


def _product(cols, pk, out):
    """out[...] = cols @ pk.mat.  A quantized product of at most _FEW_ROWS patches by a wide
    filter (at least _WIDE_O output channels: the 1x1 convolutions of an 8x8 or smaller map)
    runs as (mat.T @ cols.T).T with the transposed filter kept: OpenBLAS repacks the whole
    filter for either form, but runs the few-row case faster with the filter as the first
    operand (in-process, alternating: FaceNet, whose 3x3-map layers have 9 patches by
    192-1792 channels, 3.4-7.5 % faster a run; raising the limit from 16 to 64 patches, its
    8x8-map layers, 3-4 % more; alone, 64 x 1792 by 192 channels 809 -> 579 us with filters
    out of cache, and no gain left at 289 patches; the exact integer sums are the same in any
    order).  Float filters keep one form (their sums' rounding follows the order)."""
    mat = pk.mat
    if cols.shape[0] <= _FEW_ROWS and mat.shape[1] >= _WIDE_O and pk.bound:
        mt = pk.mat_t
        if mt is None:
            mt = pk.mat_t = np.ascontiguousarray(mat.T)
        np.copyto(out, np.matmul(mt, cols.T).T)
    else:
        np.matmul(cols, mat, out=out)


def _center_filter(w, info):
    """Filter as float64 with its zero point removed (per-channel filters are symmetric)."""
    wf = w.astype(np.float64)
    if info.type in (Q8, Q8S) and info.zp:
        wf -= info.zp
    return wf


class _QuantSetup:
    """What a quantized kernel needs besides the filter: requantization multipliers (per
    channel for a per-channel filter) and the activation range of the output."""

    def __init__(self, ins, outs, fuse):
        x, w, out = ins[0], ins[1], outs[0]
        self.reals = _filter_real_scales(x, w, out)
        self.out = out
        self.lo, self.hi = Q.activation_range(fuse, out.scale, out.zp, out.type)

    def stage(self, bias, bound, ch_bound=None):
        return OutputStage(self.reals, self.out.zp, self.lo, self.hi, bias=bias, acc_bound=bound,
                           ch_bound=ch_bound if _CH_BOUND else None)


class _StageCache:
    """OutputStage for (packed filter, bias) -- prepared once when both are constants.  For a
    layer whose one output pixel reads its whole input (one_pixel: its depthwise flag) also
    the quant.DirectProduct of that stage (zx: the input zero point), or where it has none the
    quant.TableProduct; the stage's step table is made here only when a TableProduct takes its
    table form (the direct forms need none).

    folded: with a constant filter and bias, the input zero point zx folded into the bias
    (sum (x - zx) w = sum x w - zx sum w: the same integer, so the same bytes), when the
    uncentred sums still fit float32 exactly and that stage's float32 requantization is proven
    (OutputStage.prepare_f32): the kernel then casts its input without centring it (one pass
    over the input fewer) and pads with zx.  self.const: the stage constant runs take (that
    one, when folded).

    aug (in_product: CONV_2D's single-group layers): (stage, packed, folded) where the GEMM
    adds the bias itself (_in_product), else None."""

    def __init__(self, qs, packed, bias_value, one_pixel=None, zx=0, xtype=None, in_product=False):
        self.qs = qs
        self.packed = packed
        self.bias_src = bias_value
        self.const = self.one = self.aug = None
        self.folded = False
        if packed.val is not None and bias_value is not None:
            pk = packed.val
            prod = in_product and one_pixel is None and xtype is not None
            if prod:
                self.aug = self._in_product(pk, bias_value, zx, xtype)
            if self.aug is None:
                self._bias_in_stage(pk, bias_value, one_pixel, zx, xtype)
                if prod and pk.dtype == np.float32 and not self.const.f32 and _F64_IN_PRODUCT:
                    # neither proves float32: the float64 evaluation either way, cheaper with
                    # one multiplier and constant for all channels (and the input uncentred)
                    self.aug = self._in_product(pk, bias_value, zx, xtype, f32=False)
            if self.aug is not None:
                self.const, _, self.folded = self.aug
            dims = qs.out.dims
            if self.one is None and dims is not None and all(dims):
                self.const.prepare_small(int(np.prod(dims)))

    def _bias_in_stage(self, pk, bias_value, one_pixel, zx, xtype):
        """self.const (and self.one, self.folded) with the bias in the stage's per-channel
        constants."""
        qs = self.qs
        if one_pixel is not None:
            self.const = qs.stage(bias_value, pk.bound, pk.ch_bound())
            self.one = Q.DirectProduct.for_stage(pk.mat, zx, self.const, qs.out.dtype, one_pixel) \
                or Q.TableProduct.for_stage(pk.mat, zx, self.const, qs.out.dtype, one_pixel)
        raw = None if self.one is not None or xtype is None else self._folded_stage(pk, bias_value, zx, xtype)
        if raw is not None and raw.f32_fix is not None and _CLEAN_OVER_FOLDED \
                and len(raw.f32_fix[0]) * _CLEAN_TRY_SHARE <= raw.nch:
            # the folded bias (b - zx sum w: larger, so float32 rounds acc * m + k more
            # coarsely) leaves channels to the exact fix-up: the unfolded stage, where it
            # needs none, costs one pass centring the input instead.  Tried only where
            # the fix-up has at most one channel in _CLEAN_TRY_SHARE (over the corpus's
            # quantized CNNs the unfolded stage came out clean only there: a compilation
            # cost, not a result, decision)
            plain = qs.stage(bias_value, pk.bound, pk.ch_bound())
            if plain.prepare_f32(qs.out.dtype) and plain.f32_fix is None:
                self.const, raw = plain, None
        if raw is not None:
            self.const, self.folded = raw, True
        else:                       # the unfolded stage, made only where it is the one used
            if self.const is None:
                self.const = qs.stage(bias_value, pk.bound, pk.ch_bound())
            if pk.dtype == np.float32:
                self.const.prepare_f32(qs.out.dtype)

    def _folded_stage(self, pk, bias_value, zx, xtype):
        if not zx or pk.dtype != np.float32 or pk.wsums is None or not pk.mat.size:
            return None
        ch = pk.ch_bound(_raw_max(xtype))       # the uncentred input's sums, per channel
        bound = float(ch.max())
        if exact_dtype(bound) != np.float32:
            return None
        bias = np.asarray(bias_value, np.int64) - int(zx) * pk.wsums[0].astype(np.int64)
        st = self.qs.stage(bias, bound, ch)
        return st if st.prepare_f32(self.qs.out.dtype) else None

    def _in_product(self, pk, bias_value, zx, xtype, f32=True):
        """(stage, packed, folded) where the GEMM itself adds the bias, for a per-tensor
        multiplier: the filter matrix [K, O] gets the bias b' as row K and the patches a
        column of ones, so channel o's accumulator is y = sum x w + b'[o], the same integer
        as the stage's acc + bias, and exact: |y| <= max|x| max sum|w| + max|b'| stays inside
        the GEMM dtype's exact range (every partial sum too, in any order).  The stage, made
        for a bias of zero over that range, has one multiplier and one constant for all
        channels: scalar passes, where per-channel constants cost a broadcast pass (a float32
        add along tiled rows 0.55-0.85 against 0.2-0.35 ns a value for a scalar, this
        machine).  folded: b' = b - zx sum w with the input uncentred (as _folded_stage),
        else b' = b with the input centred, tried in that order.  A float32 product needs
        its stage's float32 form proven without a fix-up; None where nothing qualifies (the
        bias then stays in the stage).  f32=False (neither this nor the per-channel stage
        proves float32): the first that is exact, for the float64 evaluation."""
        if np.ndim(self.qs.reals) != 0 or pk.wsums is None or pk.mat.ndim != 2 or not pk.mat.size:
            return None
        b = np.asarray(bias_value, np.int64)
        for fold in ((True, False) if zx else (True,)):
            if fold:
                bias = b - int(zx) * pk.wsums[0].astype(np.int64)
                bound = float(pk.ch_bound(_raw_max(xtype)).max())
            else:
                bias, bound = b, pk.bound
            total = bound + float(np.abs(bias).max(initial=0))
            if exact_dtype(total) != pk.dtype:
                continue
            st = self.qs.stage(None, total)
            if f32 and pk.dtype == np.float32 and not (st.prepare_f32(self.qs.out.dtype) and st.f32_fix is None):
                continue
            mat = np.concatenate([pk.mat, bias.reshape(1, -1).astype(pk.dtype)])
            pk.mat = mat[:-1]       # the filter as a view of the augmented one: one copy kept
            return st, _Packed(mat, pk.dtype, total), fold
        return None

    def is_folded(self, pk, bias):
        return self.folded and pk is self.packed.val and bias is self.bias_src

    def get(self, pk, bias):
        if self.const is not None and pk is self.packed.val and bias is self.bias_src:
            return self.const
        return self.qs.stage(bias, pk.bound)


def _raw_max(xtype):
    """max |x| of an uncentred quantized input of type xtype."""
    lo, hi = Q.qrange(xtype)
    return max(abs(lo), abs(hi))


def _packed_filter(ins, o, out_last, arrange):
    """The filter (input 1) packed for a kernel, once for a constant filter (Derived): float32,
    or quantized centred in the narrowest exact BLAS dtype for the bound max|x - zx| times the
    largest per-output-channel sum of |w| (o output channels, the first filter axis or, with
    out_last, the last); arrange(wf, dtype) lays it out for the kernel."""
    wi = ins[1]
    quant = ins[0].type not in FLOATS

    def pack(wv):
        if not quant:
            wf = wv.astype(np.float32)
            dtype, bound = np.float32, 0.0
        else:
            wf = _center_filter(wv, wi)
            per_out = wf.reshape(-1, o).T if out_last else wf.reshape(o, -1)
            wsums = (per_out.sum(1), np.abs(per_out).sum(1))       # exact: float64 integers
            cmax = float(centered_max(ins[0].type, ins[0].zp))
            bound = cmax * float(wsums[1].max()) if wf.size else 0.0
            dtype = exact_dtype(bound)
            return _Packed(arrange(wf, dtype), dtype, bound, wsums, cmax)
        return _Packed(arrange(wf, dtype), dtype, bound)
    return Derived(wi.value, pack)


class _Output:
    """The output side of a layer's build: quantized -> an OutputStage per (packed filter,
    bias), float -> the float32 bias; zp is the input zero point (centring() tells whether a run
    centres the input by it or pads with it, its zero point folded into the bias).
    one: the quant.DirectProduct (or TableProduct) of a quantized one-pixel layer (one_pixel:
    None, or the layer's depthwise flag when _one_pixel holds) with constant filter and bias,
    else None."""

    def __init__(self, ins, outs, fuse, packed, one_pixel=None, fold=False, in_product=False):
        self.quant = ins[0].type not in FLOATS
        self.fuse = fuse
        self._aug = None
        self._tiles = None
        self._epi = None
        self._bias_const = ins[2].value         # None unless the bias is a constant
        self.one = None
        if self.quant:
            self.zp = ins[0].zp
            self.stages = _StageCache(_QuantSetup(ins, outs, fuse), packed, ins[2].value, one_pixel, self.zp,
                                      ins[0].type if fold else None, in_product)
            self.one = self.stages.one
        else:
            self.fbias = Derived(ins[2].value, lambda bv: bv.astype(np.float32))
            self.zp = 0
        # a constant zero bias (the plan's bias folding leaves one) is not added: one pass over
        # the output fewer.  The same numbers (the sums start from +0.0), except that a rare
        # -0.0 sum would stay -0.0 where adding 0.0 gives +0.0: not under NNAPI_PY_STRICT=1
        self._zero_bias = (not self.quant and self._bias_const is not None
                           and not np.any(self._bias_const) and not strict())

    def centring(self, pk, bias):
        """(value the input is centred by, value it is padded with): (zx, 0), or (0, zx) where
        the stage has zx folded into its bias (_StageCache)."""
        if self.quant and self.stages.is_folded(pk, bias):
            return 0, self.zp
        return self.zp, 0

    def epilogue(self, pk, bias):
        e = self._epi                           # kept for a constant filter and bias
        if e is not None and e[0] is pk and bias is self._bias_const:
            return e[1]
        if self.quant:
            epi = _Epilogue(True, self.fuse, stage=self.stages.get(pk, bias))
        else:
            b = None if self._zero_bias and bias is self._bias_const else self.fbias.get(bias)
            t = self._tiles
            if t is None or t[0] is not b:      # tiled rows kept while the bias is the same
                t = self._tiles = (b, {})
            epi = _Epilogue(False, self.fuse, float_bias=b, tiled=t[1])
        if bias is self._bias_const:
            self._epi = (pk, epi)
        return epi

    def augmented(self, pk, bias):
        """_Packed [K + 1, O]: pk.mat with the bias as row K.  Float: made once for a constant
        filter and bias, None when the filter is not a plain matrix; quantized: the stage
        cache's (_StageCache.aug) for its constant filter and bias, else None."""
        if self.quant:
            st = self.stages
            if st.aug is not None and pk is st.packed.val and bias is st.bias_src:
                return st.aug[1]
            return None
        if pk.mat.ndim != 2:
            return None
        c = self._aug
        if c is not None and c[0] is pk and c[1] is bias and bias is self._bias_const:
            return c[2]
        b = self.fbias.get(bias)
        m = _Packed(np.concatenate([pk.mat, b.reshape(1, -1).astype(pk.dtype)]), pk.dtype, 0.0)
        self._aug = (pk, bias, m)
        return m


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
    wd = np.ascontiguousarray(wd.reshape(kdim + 1, nb * o))
    signed = qs.out.dtype == np.int8
    hwc, npix = h * w * c, oh * ow
    plain = (kh, kw, sh, sw) == (1, 1, 1, 1) and not any(pads)     # the input is the patches
    if not plain:
        idx = _patch_index(dims, pads, geom, hwc, hwc + 1)          # [npix, kdim + 1] in one image
        idx = np.ascontiguousarray((idx[None] + (np.arange(n) * (hwc + 2))[:, None, None])
                                   .reshape(n * npix, kdim + 1))
    clip, copyto, dot, add, xor = Q._CLIP_UFUNC, np.copyto, np.dot, np.add, np.bitwise_xor
    flip = np.full(o, -128, np.int8)
    pool = []
    pop, push = pool.pop, pool.append

    def new():
        cols = np.ones((n * npix, kdim + 1), np.float64)     # the last column: the bias row's one
        if plain:
            xa, xin = cols, cols[:, :kdim].reshape(n, h, w, c)
        else:
            xa = np.empty((n, hwc + 2), np.float64)
            xa[:, hwc], xa[:, hwc + 1] = zx, 1              # the padding's value, the one
            xin = xa[:, :hwc].reshape(n, h, w, c)
        z = np.empty((n * npix, nb * o), np.float64)
        b = np.empty((n * npix, nb * o), np.uint8)
        v = b.view(np.int8) if signed else b
        return [xa.reshape(-1), xin, cols, z, b, v[:, :o], v[:, o:], None, None]

    first = new()
    if not np.shares_memory(first[1], first[0]):            # (the input's view must be written in place)
        return None
    push(first)

    def run(x, out):
        try:
            f = pop()
        except IndexError:
            f = new()
        copyto(f[1], x, casting="unsafe")
        if not plain:
            f[0].take(idx, None, f[2], "clip")
        dot(f[2], wd, out=f[3])
        if out is f[7]:
            r = f[8]
        elif out.flags.c_contiguous:
            r = out.reshape(n * npix, o)
            if kept_array(out):
                f[7], f[8] = out, r
        else:                       # (a strided output: through a contiguous block)
            r = np.empty((n * npix, o), out.dtype)
        if combine == "store":
            clip(f[3], low, high, out=r, casting="unsafe")
        else:
            clip(f[3], low, high, out=f[4], casting="unsafe")
            if combine == "flip":
                xor(f[5], flip, out=r)
            else:                   # the two blocks' bytes: their wrapping sum
                add(f[5], f[6], out=r)
        if not out.flags.c_contiguous:
            out[...] = r.reshape(out.shape)
        push(f)
    return run


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


def _small_quant_dw(res, taps, bias, dims, pads, geom, m):
    """The quantized DEPTHWISE_CONV_2D of a small image (the small-tensor path, common.SMALL)
    with a constant filter and bias, in quant.DirectProduct's form (quant.direct_columns: the
    requantization folded into the product exactly, the negative side's correction as a second
    block where the stage has one): the input cast into a float64 row followed by a channel row
    of the padding's value (the input zero point) and one of ones; every output pixel's taps of
    every channel gathered from it by one take ([pixels, taps + 1, channels], the last tap the
    ones); one einsum with the weights [taps + 1, blocks, channels]; the clamp stored into
    bytes; the int8 top-bit flip or the two blocks' byte sum: 5 numpy calls, the same exact
    sums as the general kernel.  taps: [KH*KW, O] centred; m: the depth multiplier (output
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
    sub = "ptc,tkc->pkc" if nb > 1 else "ptc,tc->pc"
    w_ = np.ascontiguousarray(wd if nb > 1 else wd[:, 0])
    low, high = low.reshape(nb, o), high.reshape(nb, o)
    signed = qs.out.dtype == np.int8
    clip, copyto, add, xor, ein = Q._CLIP_UFUNC, np.copyto, np.add, np.bitwise_xor, Q.c_einsum
    flip = np.full(o, -128, np.int8)
    pool = []
    pop, push = pool.pop, pool.append

    def new():
        xa = np.empty((n, row), np.float64)
        xa[:, hwc:hwc + c], xa[:, hwc + c:] = zx, 1
        cols = np.empty((n * npix, t + 1, o), np.float64)
        z = np.empty((n * npix, nb, o) if nb > 1 else (n * npix, o), np.float64)
        b = np.empty((n * npix, nb, o), np.uint8)
        v = b.view(np.int8) if signed else b
        return [xa.reshape(-1), xa[:, :hwc].reshape(n, h, w, c), cols, z, b.reshape(z.shape), v[:, 0], v[:, -1],
                None, None]

    first = new()
    if not np.shares_memory(first[1], first[0]):            # (the input's view must be written in place)
        return None
    push(first)

    def run(x, out):
        try:
            f = pop()
        except IndexError:
            f = new()
        copyto(f[1], x, casting="unsafe")
        f[0].take(idx, None, f[2], "clip")
        ein(sub, f[2], w_, out=f[3])
        if out is f[7]:
            r = f[8]
        elif out.flags.c_contiguous:
            r = out.reshape(n * npix, o)
            if kept_array(out):
                f[7], f[8] = out, r
        else:                       # (a strided output: through a contiguous block)
            r = np.empty((n * npix, o), out.dtype)
        if combine == "store":
            clip(f[3], low[0], high[0], out=r, casting="unsafe")
        else:
            clip(f[3], low if nb > 1 else low[0], high if nb > 1 else high[0], out=f[4], casting="unsafe")
            if combine == "flip":
                xor(f[5], flip, out=r)
            else:                   # the two blocks' bytes: their wrapping sum
                add(f[5], f[6], out=r)
        if not out.flags.c_contiguous:
            out[...] = r.reshape(out.shape)
        push(f)
    return run


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
        ins = sig.ins
        n = len(ins)
        if n >= 10 and ins[7].type == INT32:
            if n not in (10, 11, 13):
                if n == 12:
                    sig.fail("explicit padding: got 12 inputs; the dilation factors (inputs 11 and 12) "
                             "must be given as a pair")
                self._fail_count(sig, (7, 8, 10, 11, 13))
            return Layout(True, pads=(3, 4, 5, 6), stride=(7, 8), fuse=9,
                          layout=10 if n >= 11 else None, dil=(11, 12) if n == 13 else None)
        if n not in (7, 8, 10):
            if n == 9:
                sig.fail("implicit padding: got 9 inputs; the dilation factors (inputs 8 and 9) "
                         "must be given as a pair")
            self._fail_count(sig, (7, 8, 10, 11, 13))
        return Layout(False, scheme=3, stride=(4, 5), fuse=6,
                      layout=7 if n >= 8 else None, dil=(8, 9) if n == 10 else None)

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


class _SigLike:
    """Lets layout_of() run on build/infer Infos (a count failure there cannot happen:
    addOperation validated the same operands)."""
    __slots__ = ("op", "ins")

    def __init__(self, op, ins):
        self.op = op
        self.ins = ins

    def fail(self, msg):
        raise value_error(f"{self.op.name}: {msg}", False)


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


# ---- DEPTHWISE_CONV_2D --------------------------------------------------------------------------
@register
class DepthwiseConv2D(ConvBase):
    name = "DEPTHWISE_CONV_2D"
    extra_name = "depth multiplier"
    channel_dim = 3
    out_axis = 3

    def layout_of(self, sig):
        ins = sig.ins
        n = len(ins)
        if n >= 11 and ins[8].type == INT32:
            if n not in (11, 12, 14):
                if n == 13:
                    sig.fail("explicit padding: got 13 inputs; the dilation factors (inputs 12 and 13) "
                             "must be given as a pair")
                self._fail_count(sig, (8, 9, 11, 12, 14))
            return Layout(True, pads=(3, 4, 5, 6), stride=(7, 8), extra=9, fuse=10,
                          layout=11 if n >= 12 else None, dil=(12, 13) if n == 14 else None)
        if n not in (8, 9, 11):
            if n == 10:
                sig.fail("implicit padding: got 10 inputs; the dilation factors (inputs 9 and 10) "
                         "must be given as a pair")
            self._fail_count(sig, (8, 9, 11, 12, 14))
        return Layout(False, scheme=3, stride=(4, 5), extra=6, fuse=7,
                      layout=8 if n >= 9 else None, dil=(9, 10) if n == 11 else None)

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

        def kernel(i, oarr):
            out = oarr[0]
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


# ---- TRANSPOSE_CONV_2D --------------------------------------------------------------------------
@register
class TransposeConv2D(ConvBase):
    name = "TRANSPOSE_CONV_2D"
    layout_required = True
    base_level = 3
    allow_zero_sized = True
    out_axis = 0
    value_inputs = (3,)

    def layout_of(self, sig):
        n = len(sig.ins)
        if n == 11:
            return Layout(True, pads=(3, 4, 5, 6), stride=(7, 8), fuse=9, layout=10)
        if n == 9:
            return Layout(False, oshape=3, scheme=4, stride=(5, 6), fuse=7, layout=8)
        self._fail_count(sig, (9, 11))

    def channel_rule(self, cin, wd, sig, L):
        if cin and wd[3] and cin != wd[3]:
            return f"input 1 (filter) depth {wd[3]} does not match the input depth {cin}"
        return None

    def geometry(self, ins, L):
        nchw = self.nchw(ins, L)
        x = ins[0].dims
        n, h, w, c = (x[0], x[2], x[3], x[1]) if nchw else tuple(x)
        n, h, w, c = int(n), int(h), int(w), int(c)
        o, kh, kw, ci = (int(d) for d in ins[1].dims)
        if ci != c:
            raise value_error(f"{self.name}: filter depth {ci} does not match the input depth {c}", False)
        if int(ins[2].dims[0]) != o:
            raise value_error(f"{self.name}: bias has {ins[2].dims[0]} elements, expected {o}", False)
        sw, sh = _int(ins[L.stride[0]]), _int(ins[L.stride[1]])
        if sw < 1 or sh < 1:
            raise value_error(f"{self.name}: strides must be >= 1, got {sw}, {sh}", False)
        fuse = _int(ins[L.fuse])
        if fuse not in (0, 1, 2, 3):
            raise value_error(f"{self.name}: fused activation must be 0..3, got {fuse}", False)
        full_h, full_w = (h - 1) * sh + kh, (w - 1) * sw + kw
        if L.explicit:
            pl, pr, pt, pb = (_int(ins[k]) for k in L.pads)
            if min(pl, pr, pt, pb) < 0:
                raise value_error(f"{self.name}: paddings must be >= 0, got {[pl, pr, pt, pb]}", False)
        else:
            shape = ins[L.oshape].value
            if shape is None:
                raise value_error(f"{self.name}: the output shape tensor (input 3) must be known", False)
            shape = np.asarray(shape).reshape(-1)
            if shape.size != 4:
                raise value_error(f"{self.name}: the output shape tensor has {shape.size} elements, expected 4",
                                  False)
            want_h, want_w = (int(shape[2]), int(shape[3])) if nchw else (int(shape[1]), int(shape[2]))
            scheme = _int(ins[L.scheme])
            if scheme not in (C.PADDING_SAME, C.PADDING_VALID):
                raise value_error(f"{self.name}: padding scheme must be 1 (SAME) or 2 (VALID), got {scheme}",
                                  False)
            pt = pb = pl = pr = 0
            if scheme == C.PADDING_SAME:
                # the output has the requested size: total padding = full - requested; when that
                # is negative the extra rows/columns at the end only receive the bias
                th, tw = full_h - want_h, full_w - want_w
                pt, pl = max(th, 0) // 2, max(tw, 0) // 2
                pb, pr = th - pt, tw - pl
        oh, ow = full_h - pt - pb, full_w - pl - pr
        if oh < 1 or ow < 1:
            raise value_error(f"{self.name}: paddings {[pl, pr, pt, pb]} leave no output of the "
                              f"{full_h}x{full_w} transposed convolution", False)
        return nchw, (n, h, w, c), (o, kh, kw), (sh, sw), (pt, pb, pl, pr), (oh, ow), fuse

    def infer(self, ins):
        L = self.layout_of(_SigLike(self, ins))
        nchw, (n, h, w, c), (o, kh, kw), _, _, (oh, ow), _ = self.geometry(ins, L)
        return [_layout_dims(n, oh, ow, o, nchw)]

    def build(self, ins, outs):
        L = self.layout_of(_SigLike(self, ins))
        nchw, (n, h, w, c), (o, kh, kw), (sh, sw), (pt, pb, pl, pr), (oh, ow), fuse = self.geometry(ins, L)
        full_h, full_w = (h - 1) * sh + kh, (w - 1) * sw + kw

        def arrange(wf, dtype):
            # an output element sums at most all taps of all input channels (the bound)
            return np.ascontiguousarray(wf.transpose(3, 1, 2, 0).reshape(c, kh * kw * o), dtype=dtype)

        packed = _packed_filter(ins, o, False, arrange)
        res = _Output(ins, outs, fuse, packed)

        def kernel(i, oarr):
            pk = packed.get(i[1])
            out = oarr[0]
            if out.size == 0:
                return
            on = out.transpose(0, 2, 3, 1) if nchw else out
            xn = prepare_input(i[0], nchw, (0, 0, 0, 0), pk.dtype, res.zp)
            cols = np.matmul(xn.reshape(-1, c), pk.mat).reshape(n, h, w, kh, kw, o)
            full = np.zeros((n, max(full_h, pt + oh), max(full_w, pl + ow), o), pk.dtype)
            for ky in range(kh):
                for kx in range(kw):
                    full[:, ky:ky + (h - 1) * sh + 1:sh, kx:kx + (w - 1) * sw + 1:sw] += cols[:, :, :, ky, kx]
            acc = full[:, pt:pt + oh, pl:pl + ow]
            if res.quant:
                res.stages.get(pk, i[2])(np.ascontiguousarray(acc), on)
            else:
                acc = np.ascontiguousarray(acc)
                acc += res.fbias.get(i[2])
                Q.apply_float_activation(acc, fuse)
                on[...] = acc
        return kernel
