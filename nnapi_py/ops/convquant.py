"""Shared layer of the convolutions: the quantized conv product and its output stage.

Quantized layers compute their integer sums exactly with BLAS on centred values (float32
when every partial sum provably stays below 2**24, else float64) and requantize with
quant.OutputStage (the reference rounding, per-channel multipliers vectorised); a constant
filter and bias with float32 sums get, at compilation, OutputStage.prepare_f32's float32
requantization wherever it is proven to give the reference's results (OutputStage.consume).
"""
import numpy as np

from ..errors import strict
from . import quant as Q
from .quant import OutputStage, centered_max, exact_dtype, scale_product
from .common import Q8, Q8S, QPC, FLOATS, Derived, row_repeats


_FEW_ROWS = 64                  # _product: quantized GEMMs of at most this many patches ...
_WIDE_O = 128                   # ... by at least this many output channels run transposed
_CLEAN_OVER_FOLDED = True       # _StageCache: the unfolded stage where it needs no fix-up ...
_CLEAN_TRY_SHARE = 96           # ... tried where the folded one leaves at most 1 channel in this many
_CH_BOUND = True               # per-channel stages proven over each channel's own accumulator bound
_BIAS_IN_PRODUCT = True        # _StageCache: a per-tensor quantized layer's bias summed by its GEMM
_F64_IN_PRODUCT = True         # ... also where its stage stays on float64


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
