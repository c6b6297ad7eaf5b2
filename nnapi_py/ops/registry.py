"""Operation lookup.  Importing this module registers every operation module listed here."""
import importlib

from .. import constants as C
from ..errors import bad_data, lenient
from .base import OPS, Op

# one module per family; each registers its operations with @register on import
_MODULES = (
    "elementwise", "unary", "activation", "normalization", "convert",   # family 1
    "conv", "depthwise_conv", "transpose_conv", "dense", "pool", "resize", "spatial",   # family 2
    "shape", "slicing", "reduce", "gather",                                # family 3
    "control",                                                             # IF, WHILE
    "box_nms", "roi", "proposals", "detection",                            # NMS, ROI, proposals, SSD
    "rnn",                                                                 # family 4: RNN, SVDF
    "sampling",                                                            # LSH_PROJECTION, RANDOM_MULTINOMIAL
    "lstm",                                                                # LSTM, UNI/BIDI sequence LSTM
    "qlstm",                                                               # QUANTIZED_16BIT_LSTM, QUANTIZED_LSTM
)

for _m in _MODULES:
    importlib.import_module(f"{__package__}.{_m}")


def op_name(code):
    if 0 <= code < len(C.OPERATION_NAMES):
        return C.OPERATION_NAMES[code]
    if code == C.OEM_OPERATION:
        return "OEM_OPERATION"
    return f"operation code {code}"


_OEM_REASON = ("OEM_OPERATION is deprecated (since Android 10) and this device has no vendor "
               "extension to run it; use an extension operation type instead")


class _OemOperation(Op):
    """OEM_OPERATION: Android 14 accepts it in a model with any operands (addOperation,
    Model_finish); no device supports it, so getSupportedOperationsForDevices reports false
    and Compilation_finish fails (BAD_DATA).  NNAPI_PY_STRICT=1 rejects it at addOperation."""
    name = "OEM_OPERATION"
    code = C.OEM_OPERATION
    unsupported = f"OEM_OPERATION: no device supports it ({_OEM_REASON})"

    def may_omit(self, pos, n_inputs, type_code):
        return True

    def validate(self, sig):
        lenient("OEM_OPERATION accepted in a model", _OEM_REASON)
        return 1


_OEM = _OemOperation()


def lookup(code):
    op = OPS.get(code)
    if op is not None:
        return op
    if code == C.OEM_OPERATION:
        return _OEM
    if 0 <= code < len(C.OPERATION_NAMES):
        raise bad_data(f"{op_name(code)}: operation is not implemented by nnapi_py yet")
    if code >> 16:
        raise bad_data(f"extension operation type {code:#x} is not supported (no extensions registered)")
    raise bad_data(f"unknown operation code {code} (NNAPI's are 0..{len(C.OPERATION_NAMES) - 1}, OEM_OPERATION "
                   f"{C.OEM_OPERATION} and extension types, which have a prefix in their upper 16 bits)")


def supported(code):
    return code in OPS
