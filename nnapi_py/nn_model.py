"""The Python API's model building: Model (operands, operations, inputs, outputs, inspection)
and Operand (nnapi_py/nn.py is the public module)."""
from __future__ import annotations

import hashlib
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import constants as C
from . import describe as _describe
from .nn_base import (Memory, OperandType, _api, _check, _operand_type, _release, bool8, float32, float16, int32,
                      scalar_bool, scalar_float16, scalar_float32, scalar_int32)
from .nn_checks import _as_bool, _as_dtype, _as_int, _as_name, _compile_args, _operation, _shape
from .nn_execution import Compilation

_DTYPE_TYPES = {np.dtype(np.float32): float32, np.dtype(np.float16): float16, np.dtype(np.int32): int32,
                np.dtype(np.bool_): bool8}

# output types that differ from "the type and quantization of the first tensor input"
_BOOL_OUT = {"EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL", "LOGICAL_AND",
             "LOGICAL_OR", "LOGICAL_NOT", "REDUCE_ALL", "REDUCE_ANY"}
_INT_OUT = {"ARGMAX", "ARGMIN"}


# Model._add: the ANeuralNetworksOperandType (and its dimensions) of each (code, dims, scale,
# zero point) met, made once: the library reads it during the call only
_OPERAND_TYPES: Dict[tuple, tuple] = {}


class Operand:
    """One operand of a Model (returned by input / constant / op)."""
    __slots__ = ("model", "index", "type", "dims", "name", "fit")

    def __init__(self, model: "Model", index: int, type: OperandType, dims: Tuple[int, ...], name: str):
        self.model, self.index, self.type, self.dims, self.name = model, index, type, dims, name
        self.fit = dims         # the last array shape accepted for it (run(): one comparison next time)

    def __repr__(self):
        return f"<operand {self.index} {self.name!r} {self.type.name} {list(self.dims)}>"


OperandLike = Union[Operand, int, float, bool, np.ndarray, "Model"]


class Model:
    """An ANeuralNetworksModel being built; ``compile()`` finishes it."""

    def __init__(self, name: str = "model", *, relaxed: bool = False):
        _as_name(name, "Model(name")
        relaxed = _as_bool(relaxed, "Model(relaxed")
        ffi, lib = _api()
        p = ffi.new("ANeuralNetworksModel**")
        _check(lib.ANeuralNetworksModel_create(p), "ANeuralNetworksModel_create")
        self.handle, self.name, self.relaxed = p[0], name, relaxed
        self.operands: List[Operand] = []
        self.operations: List[Tuple[str, List[int], List[int]]] = []
        self.inputs: List[Operand] = []
        self.outputs: List[Operand] = []
        self.values: Dict[int, Any] = {}
        self._keep: List[Any] = []
        self.finished = False

    # -- operands
    def _add(self, t: OperandType, dims: Sequence[int], name: str) -> Operand:
        ffi, lib = _api()
        dims = tuple(int(d) for d in dims)
        key = (t.code, dims, t.scale, t.zero_point)
        ot = _OPERAND_TYPES.get(key)
        if ot is None:                  # read-only once made: one per type and shape (~2 us)
            d = ffi.new("uint32_t[]", dims) if dims else ffi.NULL
            ot = (ffi.new("ANeuralNetworksOperandType*", {"type": t.code, "dimensionCount": len(dims),
                                                          "dimensions": d, "scale": t.scale,
                                                          "zeroPoint": t.zero_point}), d)
            if len(_OPERAND_TYPES) < 1024:
                _OPERAND_TYPES[key] = ot
        _check(lib.ANeuralNetworksModel_addOperand(self.handle, ot[0]), "ANeuralNetworksModel_addOperand")
        o = Operand(self, len(self.operands), t, dims, name or f"t{len(self.operands)}")
        self.operands.append(o)
        if t.channel_scales is not None:
            sc = ffi.new("float[]", list(t.channel_scales))
            prm = ffi.new("ANeuralNetworksSymmPerChannelQuantParams*",
                          {"channelDim": t.channel_dim, "scaleCount": len(t.channel_scales), "scales": sc})
            _check(lib.ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(self.handle, o.index, prm),
                   "ANeuralNetworksModel_setOperandSymmPerChannelQuantParams")
        return o

    def input(self, name: str, type: OperandType, shape: Sequence[int]) -> Operand:
        """A model input; 0 in shape means a dimension given at execution time.  type: an nn
        type, or 'float32' / 'float16' / 'int32' / 'bool' (or those numpy dtypes)."""
        _as_name(name, "input(name")
        type = _operand_type(type, "input(type")
        shape = _shape(shape, f"input({name!r}, shape")
        if any(i.name == name for i in self.inputs):
            raise ValueError(f"the model already has an input named {name!r} (input names must be unique)")
        o = self._add(type, shape, name)
        self.inputs.append(o)
        return o

    def constant(self, value: Any, type: Optional[OperandType] = None, name: str = "") -> Operand:
        """A constant from a numpy array / Python number (copied when <= 128 bytes, otherwise
        referenced: this Model keeps the array alive), or a (Memory, offset, length) triple."""
        ffi, lib = _api()
        if not isinstance(name, str):
            raise TypeError(f"constant(name={name!r}): expected a str")
        if type is not None:
            type = _operand_type(type, "constant(type")
        if isinstance(value, tuple) and value and isinstance(value[0], Memory):
            if len(value) != 3:
                raise ValueError(f"constant(value): a constant in a Memory is (memory, offset, length), "
                                 f"{len(value)} items were given")
            mem, offset, length = value
            _as_int(offset, "constant(value) offset", 0, mem.size)
            _as_int(length, "constant(value) length", 1, mem.size)
            if type is None:
                raise ValueError("a constant in a Memory needs its type")
            o = self._add(type, (length // max(type.dtype.itemsize, 1),), name)
            _check(lib.ANeuralNetworksModel_setOperandValueFromMemory(self.handle, o.index, mem.handle, offset, length),
                   "ANeuralNetworksModel_setOperandValueFromMemory")
            self._keep.append(mem)
            return o
        if value is None or isinstance(value, (str, bytes, Operand, Model, Memory)):
            raise TypeError(f"constant(value={value!r}): expected a numpy array, a number, a list of numbers, "
                            f"or a (Memory, offset, length) triple")
        a = np.asarray(value)
        if type is None:
            type = _DTYPE_TYPES.get(a.dtype)
            if type is None:
                raise ValueError(f"give the operand type of a {a.dtype} constant (e.g. nn.quant8_asymm(scale, zp))")
            if a.ndim == 0:
                type = {C.TENSOR_FLOAT32: scalar_float32, C.TENSOR_FLOAT16: scalar_float16,
                        C.TENSOR_INT32: scalar_int32, C.TENSOR_BOOL8: scalar_bool}[type.code]
        a = np.array(_as_dtype(a, type.dtype, f"constant {name or len(self.operands)}"), order="C")  # a private copy
        if type.is_scalar:
            a = a.reshape(())
        o = self._add(type, () if type.is_scalar else a.shape, name)
        self._keep.append(a)
        self.values[o.index] = a
        _check(lib.ANeuralNetworksModel_setOperandValue(self.handle, o.index, ffi.from_buffer(a), a.nbytes),
               "ANeuralNetworksModel_setOperandValue")
        return o

    def omitted(self, type: OperandType = float32) -> Operand:
        """An omitted optional input (no value)."""
        type = _operand_type(type, "omitted(type")
        ffi, lib = _api()
        o = self._add(type, (), "omitted")
        _check(lib.ANeuralNetworksModel_setOperandValue(self.handle, o.index, ffi.NULL, 0),
               "ANeuralNetworksModel_setOperandValue")
        return o

    def _operand(self, v: OperandLike, float_scalar: OperandType) -> Operand:
        if isinstance(v, Operand):
            if v.model is not self:
                raise ValueError(f"{v!r} belongs to another model")
            return v
        if isinstance(v, Model):
            ffi, lib = _api()
            v._finish()
            o = self._add(OperandType(C.MODEL), (), v.name)
            _check(lib.ANeuralNetworksModel_setOperandValueFromModel(self.handle, o.index, v.handle),
                   "ANeuralNetworksModel_setOperandValueFromModel")
            self._keep.append(v)
            return o
        if isinstance(v, (bool, np.bool_)):
            return self.constant(np.array(v, np.bool_), scalar_bool)
        if isinstance(v, (int, np.integer)):
            return self.constant(_as_dtype(v, np.int32, f"scalar {v}"), scalar_int32)
        if isinstance(v, (float, np.floating)):
            return self.constant(_as_dtype(v, float_scalar.dtype, f"scalar {v}"), float_scalar)
        if v is None or isinstance(v, (str, bytes, dict, set, OperandType)):
            raise TypeError(f"{v!r} is not an operand: give an Operand of this model, a number, a numpy array "
                            f"(a constant), a Model (IF / WHILE) or m.omitted() for an omitted input")
        return self.constant(v)

    def op(self, operation: Union[str, int], *inputs: OperandLike,
           outputs: Optional[Sequence[Union[OperandType, Tuple[OperandType, Sequence[int]]]]] = None,
           names: Sequence[str] = ()) -> Union[Operand, Tuple[Operand, ...]]:
        """Add an operation (by name, e.g. "CONV_2D", or code).  Python numbers become scalar
        operands (int: INT32, float: FLOAT32 or FLOAT16 next to float16 tensors, bool: BOOL);
        numpy arrays become constants; a Model becomes a subgraph operand (IF, WHILE).

        outputs: types (or (type, shape) pairs) of the results; by default one output of the
        first tensor input's type and quantization (BOOL8 for comparisons, INT32 for
        ARGMAX/ARGMIN, the branch/body outputs for IF/WHILE), with its shape left to the
        runtime's shape rules.  Returns an Operand, or a tuple of them."""
        ffi, lib = _api()
        name, code = _operation(operation)
        if isinstance(names, str):
            names = (names,)
        for nm in names:
            if not isinstance(nm, str):
                raise TypeError(f"{name}: names={names!r}: expected a str or a sequence of str")
        if outputs is not None:
            if isinstance(outputs, (OperandType, str)) or not isinstance(outputs, Sequence):
                raise TypeError(f"{name}: outputs={outputs!r}: expected a list of types or (type, shape) pairs, "
                                f"e.g. outputs=[nn.float32] or [(nn.float32, (1, 4))]")
            outputs = [(_operand_type(o[0], f"{name}: outputs[{k}] type"),
                        _shape(o[1], f"{name}: outputs[{k}] shape") if o[1] is not None else None)
                       if isinstance(o, tuple) and len(o) == 2 else _operand_type(o, f"{name}: outputs[{k}]")
                       for k, o in enumerate(outputs)]
        first = next((v for v in inputs if isinstance(v, Operand) and not v.type.is_scalar), None)
        fs = scalar_float16 if first is not None and first.type.code == C.TENSOR_FLOAT16 else scalar_float32
        ins = [self._operand(v, fs) for v in inputs]
        if outputs is None:
            outputs = self._default_outputs(name, ins, first)
        outs = []
        for k, spec in enumerate(outputs):
            t, shape = spec if isinstance(spec, tuple) else (spec, None)
            if shape is None:
                shape = (0,) * len(first.dims) if first is not None and first.dims else ()
                if name in ("IF", "WHILE") or (first is not None and not first.dims):
                    shape = ()
            outs.append(self._add(t, shape, names[k] if k < len(names) else f"{name.lower()}_{len(self.operands)}"))
        ii, oo = [o.index for o in ins], [o.index for o in outs]
        _check(lib.ANeuralNetworksModel_addOperation(self.handle, code, len(ii), ffi.new("uint32_t[]", ii),
                                                     len(oo), ffi.new("uint32_t[]", oo)),
               f"ANeuralNetworksModel_addOperation({name})")
        self.operations.append((name, ii, oo))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _default_outputs(self, name, ins, first):
        if name in ("IF", "WHILE"):
            sub = next(v for v in self._keep[::-1] if isinstance(v, Model) and
                       any(o.type.code == C.MODEL for o in ins))
            return [o.type for o in sub.outputs]
        if first is None:
            raise ValueError(f"{name}: give the output types (outputs=[...])")
        t = first.type
        if name in _BOOL_OUT:
            t = bool8
        elif name in _INT_OUT:
            t = int32
        return [t]

    def output(self, operand: Operand, name: Optional[str] = None) -> Operand:
        """Make `operand` a model output (named `name`, by default its own name)."""
        if not isinstance(operand, Operand):
            raise TypeError(f"output(operand={operand!r}): expected an Operand of this model (what input() or op() "
                            f"returned)")
        if operand.model is not self:
            raise ValueError(f"output({operand!r}): the operand belongs to another model")
        if name is not None:
            _as_name(name, "output(name")
        if any(o.name == (name or operand.name) for o in self.outputs):
            raise ValueError(f"the model already has an output named {name or operand.name!r} "
                             f"(output names must be unique)")
        if name:
            operand.name = name
        self.outputs.append(operand)
        return operand

    def _finish(self) -> None:
        if self.finished:
            return
        ffi, lib = _api()
        if self.relaxed:
            _check(lib.ANeuralNetworksModel_relaxComputationFloat32toFloat16(self.handle, True),
                   "ANeuralNetworksModel_relaxComputationFloat32toFloat16")
        ins = ffi.new("uint32_t[]", [o.index for o in self.inputs] or [0])
        outs = ffi.new("uint32_t[]", [o.index for o in self.outputs] or [0])
        _check(lib.ANeuralNetworksModel_identifyInputsAndOutputs(self.handle, len(self.inputs), ins,
                                                                 len(self.outputs), outs),
               "ANeuralNetworksModel_identifyInputsAndOutputs")
        _check(lib.ANeuralNetworksModel_finish(self.handle), "ANeuralNetworksModel_finish")
        self.finished = True

    def compile(self, *, preference: Union[str, int] = "fast_single_answer", devices: Optional[Iterable[str]] = None,
                priority: Union[str, int, None] = None, timeout_ns: Optional[int] = None,
                cache_dir: Optional[str] = None, token: Optional[bytes] = None) -> "Compilation":
        """Finish the model and compile it (preference "low_power" / "fast_single_answer" /
        "sustained_speed"; devices: device names for createForDevices; priority "low" /
        "medium" / "high"; timeout_ns; cache_dir + 32-byte token for setCaching: the library
        stores the compiled plan there and a later compilation of the same model with the same
        token loads it; the token defaults to cache_token(), a hash of the model's content)."""
        preference, devices, priority, timeout_ns, cache_dir, token = _compile_args(
            preference, devices, priority, timeout_ns, cache_dir, token)
        self._finish()
        if cache_dir is not None and token is None:
            token = self.cache_token()
        return Compilation(self, preference, devices, priority, timeout_ns, cache_dir, token)

    def cache_token(self) -> bytes:
        """The 32-byte caching token compile(cache_dir=...) uses by default: SHA-256 of the
        model's operands, operations, inputs, outputs, relax flag and constant values (the
        library's own key checks the content again, so this only names the cache entry)."""
        h = hashlib.sha256()
        h.update(repr((self.relaxed, [(o.type.code, o.dims, o.type.scale, o.type.zero_point, o.type.channel_dim,
                                       None if o.type.channel_scales is None else list(o.type.channel_scales))
                                      for o in self.operands],
                       self.operations, [o.index for o in self.inputs], [o.index for o in self.outputs])).encode())
        for i in sorted(self.values):
            h.update(b"%d:" % i)
            h.update(np.ascontiguousarray(self.values[i]).tobytes())
        for v in self._keep:
            if isinstance(v, Model):
                h.update(v.cache_token())
        return h.digest()

    # -- inspection
    def to_dict(self) -> dict:
        return _describe.model_dict(
            [(o.type.code, list(o.dims), o.type.scale, o.type.zero_point, o.name) for o in self.operands],
            self.operations, [o.index for o in self.inputs], [o.index for o in self.outputs],
            {k: v for k, v in self.values.items()})

    def summary(self) -> str:
        return _describe.summary(self.to_dict())

    def to_json(self) -> str:
        return _describe.to_json(self.to_dict())

    def to_dot(self) -> str:
        return _describe.to_dot(self.to_dict())

    def to_svg(self) -> str:
        """SVG rendering of to_dot() (needs Graphviz's `dot` on PATH)."""
        return _describe.render_svg(self.to_dot())

    def __del__(self):
        _release("ANeuralNetworksModel_free", getattr(self, "handle", None))

