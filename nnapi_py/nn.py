"""The Pythonic API: build, compile and run NNAPI models from numpy (docs/python_api.md; a tour
in examples/python_api.py).

Every call goes through the exported ``ANeuralNetworks*`` functions of the same C library a C
client links (``from nnapi_py import ffi, lib``); the API only keeps Python-side bookkeeping
(operand types, names, the graph for inspection).  This is the public module; the code is in
nn_base.py (library access, errors, operand types, memories), nn_checks.py (argument checking),
nn_model.py (model building) and nn_execution.py (compilation and execution).
"""
from __future__ import annotations

import contextlib
from typing import Optional

from . import constants as C  # noqa: F401  (nn.C: the constants, as before)
from .nn_base import (Memory, NNAPIError, OperandType, _api, _check, _operand_type, _release, bool8,  # noqa: F401
                      float16, float32, int32, quant8_asymm, quant8_asymm_signed, quant8_symm,
                      quant8_symm_per_channel, quant16_asymm, quant16_symm, scalar_bool, scalar_float16,
                      scalar_float32, scalar_int32, uint32)
from .nn_checks import (UnknownNameError, _as_bool, _as_dtype, _as_int, _as_name, _compile_args,  # noqa: F401
                        _operation, _said, _SCALAR_RANGES, _shape, _shape_error, _shape_text, _timeout,
                        _writable_target)
from .nn_execution import Burst, Compilation, Execution, device_names, feature_level  # noqa: F401
from .nn_model import Model, Operand, OperandLike  # noqa: F401

__all__ = ["NNAPIError", "OperandType", "Model", "Operand", "Compilation", "Execution", "Burst", "Memory",
           "float32", "float16", "int32", "uint32", "bool8", "quant8_asymm", "quant8_asymm_signed",
           "quant8_symm", "quant16_symm", "quant16_asymm", "quant8_symm_per_channel", "device_names",
           "feature_level"]


# ---- device settings (NNAPI_PY_FEATURE_LEVEL / NNAPI_PY_DEVICES / NNAPI_PY_FAULTS) -------------------
@contextlib.contextmanager
def emulated(feature_level: Optional[int] = None, devices: Optional[str] = None, faults: Optional[str] = None):
    """Within the block, the library behaves as the given Android release / shows the given
    virtual devices / injects the given faults (the same settings as the environment variables,
    see README "Testing your client's code paths")."""
    from . import devices as _devices
    with _devices.emulated(feature_level=feature_level, devices=devices, faults=faults):
        yield
