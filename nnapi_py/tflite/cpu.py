"""CPU partitions: operators NNAPI cannot run, in a sub-model run by LiteRT's own kernels.

The delegate leaves what it cannot take on TFLite's CPU kernels; here the same kernels run
through LiteRT's interpreter (`ai-edge-litert`, the optional extra `nnapi_py[litert]`).  Each CPU
partition becomes a sub-model of the original file: the partition's operators with their
options, the tensors they touch (constants with their buffers, values folded at load as new
constants), its boundary tensors as the sub-model's inputs and outputs, and every other
subgraph unchanged (IF / WHILE / CALL_ONCE bodies).  It is written with the schema's generated
builders (the object API LiteRT ships for the same schema: `ModelT` unpacked from the file,
trimmed, `Pack`ed), never by hand; the kernels are LiteRT's builtin ones without XNNPACK.

Tensors cross without copies where LiteRT keeps them in place: `raw(t)` is an array over the
interpreter's own buffer (not a view LiteRT's Python wrapper counts, so `invoke` still runs);
after every invoke `moved()` says whether LiteRT re-planned its arena (a dynamic tensor
resized), in which case the caller binds again.
"""
from __future__ import annotations

import ctypes
from typing import Dict, Optional, Sequence

import numpy as np

INSTALL = "pip install 'ai-edge-litert==2.3.0'"     # the extra nnapi_py[litert] (pyproject.toml)


def _litert():
    from ai_edge_litert import interpreter, schema_py_generated
    return interpreter, schema_py_generated


def available() -> bool:
    """Whether LiteRT can be imported (CPU partitions need it)."""
    try:
        _litert()
    except ImportError:
        return False
    return True


_TFLITE_TYPE = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_, 7: np.int16,
                8: np.complex64, 9: np.int8, 10: np.float64, 11: np.complex128, 12: np.uint64, 15: np.uint32,
                16: np.uint16}


def submodel(buf: bytes, ops: Sequence[int], inputs: Sequence[int], outputs: Sequence[int],
             constants: Optional[Dict[int, np.ndarray]] = None, subgraph: int = 0) -> bytes:
    """The bytes of a .tflite model holding operators `ops` of `subgraph` (original indices, kept
    in that order), with tensors `inputs` / `outputs` (original indices) as its inputs / outputs
    and `constants` (tensor index -> value, e.g. folded at load) written as constant buffers."""
    import flatbuffers
    _, S = _litert()
    m = S.ModelT.InitFromPackedBuf(bytearray(buf), 0)
    g = m.subgraphs[subgraph]
    constants = dict(constants or {})
    used = set(inputs) | set(outputs) | set(constants)
    for k in ops:
        op = g.operators[k]
        for seq in (op.inputs, op.outputs, op.intermediates):
            used.update(int(t) for t in (seq if seq is not None else ()) if t >= 0)
    order = sorted(used)
    new = {t: k for k, t in enumerate(order)}
    buffers = m.buffers or []
    keep = {0}
    for k, sg in enumerate(m.subgraphs):
        if k != subgraph:
            keep.update(t.buffer for t in (sg.tensors or ()))
    tensors = []
    for t in order:
        tt = g.tensors[t]
        if t in constants:
            v = np.ascontiguousarray(constants[t], _TFLITE_TYPE.get(tt.type))
            b = S.BufferT()
            b.data = np.frombuffer(v.tobytes(), np.uint8)
            buffers.append(b)
            tt.buffer = len(buffers) - 1
            tt.shape = list(v.shape)
            tt.shapeSignature = None
        elif t in inputs:
            tt.buffer = 0
        keep.add(tt.buffer)
        tensors.append(tt)
    for k, b in enumerate(buffers):
        if k not in keep:
            buffers[k] = S.BufferT()
        elif b.offset > 1:                  # data stored after the flatbuffer (models over 2 GB)
            b.data = np.frombuffer(buf, np.uint8, b.size, b.offset)
            b.offset = b.size = 0
    operators = []
    for k in ops:
        op = g.operators[k]
        op.inputs = [new[int(t)] if t >= 0 else -1 for t in (op.inputs if op.inputs is not None else ())]
        op.outputs = [new[int(t)] if t >= 0 else -1 for t in (op.outputs if op.outputs is not None else ())]
        if op.intermediates is not None and len(op.intermediates):
            op.intermediates = [new[int(t)] for t in op.intermediates]
        if op.largeCustomOptionsSize:
            off, size = op.largeCustomOptionsOffset, op.largeCustomOptionsSize
            op.customOptions = np.frombuffer(buf, np.uint8, size, off)
            op.largeCustomOptionsOffset = op.largeCustomOptionsSize = 0
        operators.append(op)
    g.tensors, g.operators = tensors, operators
    g.inputs, g.outputs = [new[t] for t in inputs], [new[t] for t in outputs]
    m.buffers = buffers
    m.signatureDefs = None              # signatures name tensors of the whole model
    m.metadata = m.metadataBuffer = None
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


_VARIABLE_OPS = {"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"}


def stateful(buf: bytes, ops: Sequence[int], subgraph: int = 0) -> bool:
    """Whether operators `ops` keep values between invokes in LiteRT (resource variables, or
    variable tensors such as an LSTM's state)."""
    import tflite
    m = tflite.Model.GetRootAsModel(buf, 0)
    g = m.Subgraphs(subgraph)
    names = {v: k for k, v in tflite.BuiltinOperator.__dict__.items() if not k.startswith("_")}
    for k in ops:
        op = g.Operators(k)
        code = m.OperatorCodes(op.OpcodeIndex())
        if names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode())) in _VARIABLE_OPS:
            return True
        if any(t >= 0 and g.Tensors(int(t)).IsVariable() for t in op.InputsAsNumpy()):
            return True
    return False


class CpuRunError(RuntimeError):
    """LiteRT failed while running a CPU partition (the message names its operators and LiteRT's reason)."""


class CpuPartition:
    """Operators `ops` of the model in `buf` run by LiteRT's builtin (non-XNNPACK) kernels."""

    def __init__(self, buf: bytes, ops: Sequence[int], inputs: Sequence[int], outputs: Sequence[int],
                 constants: Optional[Dict[int, np.ndarray]] = None, threads: int = 1, name: str = "",
                 shapes: Optional[Dict[int, Sequence[int]]] = None):
        """shapes: the importer's shape of each input tensor where it differs from the file's
        (inputs of any length: the sub-model is resized to them before LiteRT allocates)."""
        self.ops, self.inputs, self.outputs, self.name = list(ops), list(inputs), list(outputs), name
        self.content = submodel(buf, ops, inputs, outputs, constants)
        self._threads, self._shapes = threads, shapes or {}
        self._start()
        # variables LiteRT keeps between invokes (resource variables, variable tensors): reset() starts over
        self.stateful = stateful(buf, ops)

    def reset(self) -> None:
        """A fresh interpreter: the variables it kept between invokes back to their initial values."""
        self._start()
        self._addr = {}

    def _start(self):
        interpreter, _ = _litert()
        kind = interpreter.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        self.it = interpreter.Interpreter(model_content=self.content, num_threads=self._threads,
                                          experimental_op_resolver_type=kind)
        for t, d in zip(self.inputs, self.it.get_input_details()):
            want = tuple(self._shapes.get(t, ()))
            if want and want != tuple(d["shape"]):
                self.it.resize_tensor_input(d["index"], list(want))
        self.it.allocate_tensors()
        # sub-model tensor index of each original boundary tensor
        self.index = {t: d["index"] for t, d in zip(self.inputs, self.it.get_input_details())}
        self.index.update({t: d["index"] for t, d in zip(self.outputs, self.it.get_output_details())})
        self.shape = {t: tuple(d["shape"]) for t, d in zip(self.inputs, self.it.get_input_details())}
        self._addr: Dict[int, int] = {}
        numeric = {np.dtype(d) for d in _TFLITE_TYPE.values()}        # resource / string tensors are not handed out
        self.static = all(self._has_data(d["index"]) for d in self.it.get_tensor_details()
                          if np.dtype(d["dtype"]) in numeric)

    def _has_data(self, i):
        """Whether sub-model tensor i has its buffer after allocate_tensors (a dynamic tensor,
        sized while running, has none yet)."""
        try:
            v = self.it.tensor(i)()
        except ValueError:
            return False
        ok = not isinstance(v, np.ndarray) or bool(v.ctypes.data) or not v.size   # a 0-d tensor comes as a scalar
        del v
        return ok

    def _view(self, t):
        return self.it.tensor(self.index[t])()

    def raw(self, t: int) -> Optional[np.ndarray]:
        """An array over the interpreter's buffer of boundary tensor t (None: not allocated yet,
        a dynamic tensor).  Valid while moved() stays False."""
        try:
            v = self._view(t)
        except ValueError:
            return None
        if not isinstance(v, np.ndarray):     # a 0-d tensor comes as a scalar copy
            return None
        addr, shape, dtype = v.ctypes.data, v.shape, v.dtype
        del v
        if not addr or not int(np.prod(shape)):
            return None
        self._addr[t] = addr
        n = int(np.prod(shape)) * dtype.itemsize
        return np.frombuffer((ctypes.c_char * n).from_address(addr), dtype).reshape(shape)

    def invoke(self) -> None:
        try:
            self.it.invoke()
        except RuntimeError as e:           # a kernel refused its inputs (e.g. a slice out of range)
            raise CpuRunError(f"TFLite's CPU kernels (LiteRT) failed on operator(s) {', '.join(map(str, self.ops))}: "
                              f"{' '.join(str(e).split())}") from None

    def moved(self) -> bool:
        """True when a buffer handed out by raw() is no longer where LiteRT keeps the tensor."""
        for t, a in self._addr.items():
            v = self._view(t)
            here = v.ctypes.data
            del v
            if here != a:
                return True
        return False

    def get(self, t: int) -> np.ndarray:
        return self.it.get_tensor(self.index[t])

    def set(self, t: int, value) -> None:
        self.it.set_tensor(self.index[t], np.asarray(value).reshape(self.shape[t]))


def first_dynamic_tensor(buf: bytes, shapes: Optional[Sequence[Sequence[int]]] = None) -> Optional[int]:
    """The first tensor of subgraph 0 that TFLite makes dynamic-sized when it prepares the whole
    model (its size known only while running: no buffer after allocate_tensors), in operator
    order, or None.  The NNAPI delegate refuses such a graph altogether (subgraph.cc: "Attempting to
    use a delegate that only supports static-sized tensors with a graph that has dynamic-sized
    tensors")."""
    interpreter, schema = _litert()
    kind = interpreter.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    it = interpreter.Interpreter(model_content=bytes(buf), experimental_op_resolver_type=kind)
    for d, shape in zip(it.get_input_details(), shapes or ()):
        if tuple(shape) != tuple(d["shape"]):
            it.resize_tensor_input(d["index"], list(shape))
    it.allocate_tensors()
    g = schema.ModelT.InitFromPackedBuf(bytearray(buf), 0).subgraphs[0]
    numeric = set(_TFLITE_TYPE)
    for op in g.operators or ():
        for t in (op.outputs if op.outputs is not None else ()):
            if t < 0 or g.tensors[t].type not in numeric:
                continue
            try:
                v = it.tensor(int(t))()
            except ValueError:
                return int(t)
            del v
    return None
