"""TRANSPOSE_CONV_2D (shared conv machinery: convgeom.py, convquant.py).

* TRANSPOSE_CONV_2D: one matmul input[N*H*W, C] x filter[C, KH*KW*O], then the taps are
  scatter-added with strided slices into the full output and the padding is cropped.
"""
import numpy as np

from .. import constants as C
from .base import register, value_error
from . import quant as Q
from .convgeom import ConvBase, Layout, _SigLike, _int, _layout_dims, prepare_input
from .convquant import _Output, _packed_filter


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
