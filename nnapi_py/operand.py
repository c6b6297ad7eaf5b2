"""Operand descriptions: validation of ANeuralNetworksOperandType and byte sizes."""
import math
from . import constants as C
from .errors import bad_data

_SCALARS = C.SCALAR_TYPES
_KNOWN = frozenset(C.TYPE_NAMES)
_SCALE_ZERO = frozenset((C.FLOAT32, C.INT32, C.UINT32, C.BOOL, C.FLOAT16, C.TENSOR_FLOAT32,
                         C.TENSOR_FLOAT16, C.TENSOR_BOOL8, C.TENSOR_QUANT8_SYMM_PER_CHANNEL, C.MODEL))
_SCALE_POSITIVE = C.QUANT_TYPES
_ZP_RANGE = C.ZERO_POINT_RANGE
_UINT32_MAX = 0xFFFFFFFF


def check_operand_type(code, dims, scale, zp, what="operand"):
    """Validate one operand type the way addOperand must (raises NNError BAD_DATA).

    dims is a tuple (possibly containing 0 = unknown), or None for an unknown rank.
    """
    if code not in _KNOWN:
        if code >> 16:
            raise bad_data(f"{what}: extension operand type {code:#x} is not supported (no extensions registered)")
        raise bad_data(f"{what}: unknown operand type {code}")
    if code in (C.OEM_SCALAR, C.TENSOR_OEM_BYTE):
        return
    if code in _SCALARS:
        if dims:
            raise bad_data(f"{what}: scalar type {C.TYPE_NAMES[code]} must have dimensionCount 0, got {len(dims)}")
    elif dims:
        n = 1
        for d in dims:
            if d:
                n *= d
        if n * C.ELEMENT_SIZE[code] > _UINT32_MAX:
            raise bad_data(f"{what}: tensor byte size overflows uint32 (dimensions {list(dims)})")
    if not math.isfinite(scale):
        raise bad_data(f"{what}: scale must be a finite number, got {scale}")
    if code in _SCALE_ZERO:
        if scale != 0.0:
            raise bad_data(f"{what}: {C.TYPE_NAMES[code]} requires scale 0, got {scale}")
    elif code in _SCALE_POSITIVE:
        if not scale > 0.0:
            raise bad_data(f"{what}: {C.TYPE_NAMES[code]} requires scale > 0, got {scale}")
    elif code == C.TENSOR_INT32:
        if not scale >= 0.0:
            raise bad_data(f"{what}: TENSOR_INT32 requires scale >= 0, got {scale}")
    r = _ZP_RANGE.get(code)
    if r is not None:
        if not r[0] <= zp <= r[1]:
            raise bad_data(f"{what}: {C.TYPE_NAMES[code]} zeroPoint must be in [{r[0]}, {r[1]}], got {zp}")
    elif zp != 0:
        raise bad_data(f"{what}: {C.TYPE_NAMES[code]} requires zeroPoint 0, got {zp}")


def fully_specified(dims):
    return dims is not None and all(dims)


def byte_size(code, dims):
    """Exact byte size of an operand with fully specified dims (scalars: dims == ())."""
    n = C.ELEMENT_SIZE.get(code, 1)
    for d in dims:
        n *= d
    return n


def dims_text(dims):
    return "unknown rank" if dims is None else "[" + ",".join(str(d) for d in dims) + "]"


def merge_dims(declared, given, what):
    """Combine declared dims (0 = unknown, None = unknown rank) with dims given later.

    Raises BAD_DATA if they disagree; returns the merged tuple.
    """
    if declared is None or len(declared) == 0:
        return tuple(given)
    if len(given) != len(declared):
        raise bad_data(f"{what}: rank {len(given)} does not match the model's rank {len(declared)}")
    out = []
    for i, (a, b) in enumerate(zip(declared, given)):
        if a and b and a != b:
            raise bad_data(f"{what}: dimension {i} is {b} but the model says {a}")
        out.append(a or b)
    return tuple(out)
