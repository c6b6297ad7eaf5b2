"""Shared layer of the detection operations: box tensors and their checks.

Boxes are [x1, y1, x2, y2] rows.  Box tensors follow the score / feature-map type for
floats; with 8-bit quantized data they are TENSOR_QUANT16_ASYMM with scale 0.125 and
zeroPoint 0 (the reference requires that for the signed variant too, whatever the header
text says about zeroPoint -128, which QUANT16_ASYMM cannot even hold).

Type and rank checks, box decoding (bbox_transform) and writing, shared by box_nms.py, roi.py,
proposals.py and detection.py.
"""
import numpy as np

from .. import constants as C
from .base import value_error
from . import quant as Q


F16, F32, I32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32, C.TENSOR_INT32
Q8, Q8S, Q16A = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED, C.TENSOR_QUANT16_ASYMM
TYPE_LEVELS = {F32: 3, F16: 3, Q8: 3, Q8S: 4}
QUANT8 = (Q8, Q8S)
BOX_SCALE = 0.125
f32 = np.float32


def tname(t):
    return C.TYPE_NAMES.get(t, str(t))


# ---- shared validation helpers --------------------------------------------------------------
def _float_scalar(t):
    """Scalar type of float parameters: FLOAT16 with TENSOR_FLOAT16 data, FLOAT32 otherwise."""
    return C.FLOAT16 if t == F16 else C.FLOAT32


def _check_box_type(sig, info, label, t):
    """A box tensor for data of type t: same float type, or QUANT16_ASYMM (0.125, 0; its
    quantization is checked when the operation is prepared, at execution)."""
    if t in QUANT8:
        if info.type != Q16A:
            sig.fail(f"{label} has type {tname(info.type)}, expected TENSOR_QUANT16_ASYMM for {tname(t)} data")
        if info.scale != BOX_SCALE or info.zp != 0:
            with sig.at_execution():
                sig.fail(f"{label} (TENSOR_QUANT16_ASYMM boxes) must have scale 0.125 and zeroPoint 0, "
                         f"got {info.scale} and {info.zp}")
    elif info.type != t:
        sig.fail(f"{label} has type {tname(info.type)}, expected {tname(t)} (the type of input 0)")


def _check_type(sig, where, idx, t, what):
    ops = sig.ins if where == "input" else sig.outs
    if ops[idx].type != t:
        sig.fail(f"{where} {idx} ({what}) has type {tname(ops[idx].type)}, expected {tname(t)}")


def _check_rank(sig, where, idx, rank, what):
    ops = sig.ins if where == "input" else sig.outs
    r = ops[idx].rank
    if r is not None and r != 0 and r != rank:
        sig.fail(f"{where} {idx} ({what}) must be a {rank}-D tensor, got rank {r}")


def check_ranks(sig, ranks):
    """An operation's rank table, rows (where, index, rank, what), checked at validation: an operand
    of known rank must have the row's rank (Android checks it when it prepares the operation)."""
    for where, idx, rank, what in ranks:
        _check_rank(sig, where, idx, rank, what)


def input_dims(fail, ins, ranks):
    """The same table's input rows checked by the shape rule: the inputs' dimensions, in the table's order,
    each of the row's rank."""
    return [_rank_of(fail, ins[idx], rank, f"input {idx} ({what})") for where, idx, rank, what in ranks
            if where == "input"]


def _dim(info, k):
    """Declared dimension k (0 = unknown) of an operand whose rank may be unknown."""
    d = info.dims
    return d[k] if d and len(d) > k else 0


def _rank_of(fail, info, rank, label):
    d = info.dims
    if d is None or len(d) != rank:
        fail(f"{label} must be a {rank}-D tensor, got dimensions {None if d is None else list(d)}")
    return d


def _real_boxes(a, t):
    """Box values -> float32 array of real coordinates (quantized: q * 0.125)."""
    a = np.asarray(a)
    if t in QUANT8:
        return a.astype(f32) * f32(BOX_SCALE)
    return a.astype(f32)


def scalar_of_value(v):
    """A scalar input value (numpy scalar / 0-d or 1-element array) as a Python number."""
    return np.asarray(v).reshape(-1)[0].item()


# ---- shared by the box-decoding operations ------------------------------------------------------
Q16S = C.TENSOR_QUANT16_SYMM


def _real(a, info):
    """Tensor values -> float32 real values (quantized types through their scale / zeroPoint)."""
    a = np.asarray(a)
    if a.dtype.kind in "iu" and info.type != I32:
        return Q.dequantize(a, info.scale, info.zp)
    return a.astype(f32)


def bbox_transform(rois, deltas, height, width):
    """Apply [dx, dy, dw, dh] deltas to [x1, y1, x2, y2] boxes and clip to the image.

    rois (R, 4), deltas (R, C, 4), height / width (R,) image size per row -> (R, C, 4) float32,
    in the reference's float32 order of operations."""
    two = f32(2)
    w = (rois[:, 2] - rois[:, 0])[:, None]
    h = (rois[:, 3] - rois[:, 1])[:, None]
    cx = ((rois[:, 0] + rois[:, 2]) / two)[:, None]
    cy = ((rois[:, 1] + rois[:, 3]) / two)[:, None]
    with np.errstate(all="ignore"):
        nw = np.exp(deltas[..., 2]) * w
        nh = np.exp(deltas[..., 3]) * h
        ncx = cx + deltas[..., 0] * w
        ncy = cy + deltas[..., 1] * h
        out = np.empty(deltas.shape, f32)
        out[..., 0] = ncx - nw / two
        out[..., 1] = ncy - nh / two
        out[..., 2] = ncx + nw / two
        out[..., 3] = ncy + nh / two
    zero = f32(0)
    for k, lim in ((0, width), (1, height), (2, width), (3, height)):
        np.minimum(np.maximum(out[..., k], zero), lim[:, None], out=out[..., k])
    return out


def _check_corners(fail, boxes, what):
    """Each row [x1, y1, x2, y2] needs x1 <= x2 and y1 <= y2 (the reference rejects others)."""
    bad = np.flatnonzero(~((boxes[:, 0] <= boxes[:, 2]) & (boxes[:, 1] <= boxes[:, 3])))
    if bad.size:
        fail(f"{what}: box {int(bad[0])} is {boxes[bad[0]].tolist()}, a box needs x1 <= x2 and y1 <= y2")


def _write_boxes(out, real, t_out):
    """Real box coordinates into a float output or a TENSOR_QUANT16_ASYMM (0.125, 0) one."""
    if t_out == Q16A:
        Q.requantize_into(out, real, BOX_SCALE, 0)
    else:
        out[...] = real


def _runtime_fail(name):
    def fail(msg):
        raise value_error(f"{name}: {msg}", at_runtime=True)
    return fail


def _check_dims(fail, got, want, what):
    if tuple(got) != tuple(want):
        fail(f"{what} has shape {list(got)}, expected {list(want)}")
