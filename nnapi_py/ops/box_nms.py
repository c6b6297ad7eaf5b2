"""BOX_WITH_NMS_LIMIT (its selection, in the reference order: nms.box_with_nms_limit).

The number of output boxes depends on the input values: inputs 0-2 are value inputs, the
shape rule runs the selection (memoised, so the kernel does not redo it).
"""
import numpy as np

from .. import constants as C
from .base import Op, register, value_error
from . import quant as Q
from .common import check_present, check_scalar_type
from .boxes import (
    I32, QUANT8, TYPE_LEVELS, _check_box_type, _check_type, _dim, _float_scalar, _real_boxes, check_ranks,
    f32, input_dims, scalar_of_value)
from .nms import NMS_GAUSSIAN, NMS_HARD, NMS_LINEAR, box_with_nms_limit


NMS_NAMES = ("scores", "boxes", "batch index", "score_threshold", "max_num_detections", "nms kernel",
             "iou_threshold", "sigma", "nms_score_threshold")


@register
class BoxWithNmsLimit(Op):
    name = "BOX_WITH_NMS_LIMIT"
    ranks = (("input", 0, 2, "scores"), ("input", 1, 2, "boxes"),
             ("input", 2, 1, "batch index"), ("output", 0, 1, "scores"),
             ("output", 1, 2, "boxes"), ("output", 2, 1, "classes"),
             ("output", 3, 1, "batch index"))     # (where, index, rank, what)
    value_inputs = (0, 1, 2)       # the number of output boxes depends on scores, boxes, batches
    allow_zero_sized = True
    optional_inputs = ()

    def __init__(self):
        self._memo = None          # (key, NmsResult) of the last selection

    def validate(self, sig):
        sig.count(9, 4)
        check_present(sig)
        t = sig.types("input", 0, TYPE_LEVELS)
        _check_box_type(sig, sig.ins[1], "input 1 (boxes)", t)
        _check_type(sig, "input", 2, I32, "batch index")
        fs = _float_scalar(t)
        for k in (3, 6, 7, 8):
            check_scalar_type(sig, k, fs, NMS_NAMES[k])
        for k in (4, 5):
            check_scalar_type(sig, k, C.INT32, NMS_NAMES[k])
        sig.same_type("output", 0, t)
        sig.same_quant("output", 0, sig.ins[0])
        _check_box_type(sig, sig.outs[1], "output 1 (boxes)", t)
        _check_type(sig, "output", 2, I32, "classes")
        _check_type(sig, "output", 3, I32, "batch index")
        with sig.at_execution():    # Android checks shapes and values when it prepares the operation
            check_ranks(sig, self.ranks)
            s, b, bi = sig.ins[0], sig.ins[1], sig.ins[2]
            n, ncls = _dim(s, 0), _dim(s, 1)
            if ncls == 1:
                sig.fail("input 0 (scores) must have at least 2 classes (class 0 is the background), got 1")
            if n and _dim(b, 0) and _dim(b, 0) != n:
                sig.fail(f"input 1 (boxes) has {_dim(b, 0)} rows, expected {n} (the rows of input 0)")
            if ncls and _dim(b, 1) and _dim(b, 1) != 4 * ncls:
                sig.fail(f"input 1 (boxes) dimension 1 is {_dim(b, 1)}, expected 4 * {ncls} classes = {4 * ncls}")
            if n and _dim(bi, 0) and _dim(bi, 0) != n:
                sig.fail(f"input 2 (batch index) has {_dim(bi, 0)} entries, expected {n} (the rows of input 0)")
            if _dim(sig.outs[1], 1) not in (0, 4):
                sig.fail(f"output 1 (boxes) dimension 1 is {_dim(sig.outs[1], 1)}, expected 4")
            kind = sig.scalar_value(5)
            if kind is not None and kind not in (NMS_HARD, NMS_LINEAR, NMS_GAUSSIAN):
                sig.fail(f"input 5 (nms kernel) must be 0 (hard), 1 (linear) or 2 (gaussian), got {kind}")
        return TYPE_LEVELS[t]

    # ---- the selection (shape rule and kernel) ----------------------------------------------
    def _fail(self, msg):
        raise value_error(f"{self.name}: {msg}", at_runtime=False)

    def _check_shapes(self, ins):
        s, b, bi = input_dims(self._fail, ins, self.ranks)
        n, ncls = s
        if ncls < 2:
            self._fail(f"input 0 (scores) must have at least 2 classes (class 0 is the background), got {ncls}")
        if b[0] != n or b[1] != 4 * ncls:
            self._fail(f"input 1 (boxes) has shape {list(b)}, expected [{n}, {4 * ncls}] "
                       f"([rows of input 0, 4 * classes])")
        if bi[0] != n:
            self._fail(f"input 2 (batch index) has {bi[0]} entries, expected {n} (the rows of input 0)")
        return n, ncls

    def _select(self, ins, arrays):
        """arrays: the 9 input values.  Memoised on the input bytes and parameters."""
        t = ins[0].type
        sc, bx, bi = (np.asarray(a) for a in arrays[:3])
        params = tuple(scalar_of_value(a) for a in arrays[3:])
        key = (t, ins[0].scale, ins[0].zp, sc.shape, bx.shape, bi.shape, sc.tobytes(), bx.tobytes(),
               bi.tobytes(), params)
        memo = self._memo
        if memo is not None and memo[0] == key:
            return memo[1]
        n, ncls = self._check_shapes(ins)
        score_th, max_det, kind, iou_th, sigma, nms_th = params
        if kind not in (NMS_HARD, NMS_LINEAR, NMS_GAUSSIAN):
            self._fail(f"input 5 (nms kernel) must be 0 (hard), 1 (linear) or 2 (gaussian), got {kind}")
        if t in QUANT8:
            scores = Q.dequantize(sc, ins[0].scale, ins[0].zp)
        else:
            scores = sc.astype(f32)
        boxes = _real_boxes(bx, t).reshape(n, ncls, 4)
        bad = (boxes[..., 0] > boxes[..., 2]) | (boxes[..., 1] > boxes[..., 3])
        if bad.any():
            r, c = np.argwhere(bad)[0]
            self._fail(f"input 1 (boxes): box {c} of row {r} is {boxes[r, c].tolist()}, "
                       f"a box needs x1 <= x2 and y1 <= y2")
        res = box_with_nms_limit(scores, boxes, bi.astype(np.int64), f32(score_th), int(max_det), int(kind),
                                 f32(iou_th), f32(sigma), f32(nms_th))
        self._memo = (key, res)
        return res

    def infer(self, ins):
        res = self._select(ins, [i.value for i in ins])
        n = len(res)
        return [(n,), (n, 4), (n,), (n,)]

    def build(self, ins, outs):
        t = ins[0].type
        infos = ins
        out_scale, out_zp = outs[0].scale, outs[0].zp

        def kernel(i, o):
            res = self._select(infos, i)
            n = len(res)
            if o[0].shape[0] != n:        # cannot happen: the shapes came from the same selection
                raise value_error(f"{self.name}: output size {o[0].shape[0]} does not match the "
                                  f"{n} selected boxes", at_runtime=True)
            if not n:
                return
            if t in QUANT8:
                v = res.scores / f32(out_scale) + f32(out_zp)
                Q.quantize_to(o[0], Q.round_half_away(v), 1.0, 0)
            else:
                o[0][...] = res.scores
            ncls = i[0].shape[1]
            o[1][...] = np.asarray(i[1]).reshape(-1, ncls, 4)[res.rows, res.classes]
            o[2][...] = res.classes
            o[3][...] = res.batches
        return kernel
