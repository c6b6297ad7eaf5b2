"""Reading a .tflite flatbuffer: the only module of the importer that touches the `tflite`
package (the official schema's generated Python code).  Everything the rest needs is decoded
here once: tensors (type, shape, quantization, constant value, sparsity), operators (builtin
name, op version, inputs, outputs, options table, custom options), subgraph inputs / outputs."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

# TensorType -> numpy dtype (COMPLEX64 and the like stay None: no NNAPI operand type)
DTYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_, 9: np.int8,
          7: np.int16, 10: np.float64}
TYPE_NAMES = {0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING", 6: "BOOL", 7: "INT16",
              8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 11: "COMPLEX128", 12: "UINT64", 13: "RESOURCE",
              14: "VARIANT", 15: "UINT32", 16: "UINT16", 17: "INT4"}


class Tensor:
    """One tensor of a subgraph.  value: its constant value (numpy, shaped; the stored values
    only for a sparse tensor) or None; operand: the NNAPI operand once created."""
    __slots__ = ("index", "name", "dtype", "type_name", "shape", "signature", "scale", "zp", "value", "operand",
                 "scales", "qdim", "sparsity", "variable")

    def __init__(self, index, name, dtype, shape, scale=0.0, zp=0, value=None, scales=None, qdim=0,
                 type_name="", signature=None, sparsity=None, variable=False):
        self.index, self.name, self.dtype, self.shape = index, name, dtype, shape
        self.scale, self.zp, self.value, self.operand = scale, zp, value, None
        self.scales, self.qdim = scales, qdim        # per-channel quantization (int8 weights, int32 bias)
        self.type_name = type_name or (str(np.dtype(dtype)) if dtype is not None else "?")
        self.signature = signature if signature is not None else shape     # -1: a dimension of any size
        self.sparsity, self.variable = sparsity, variable


class Node:
    """One operator: name is the builtin's name (CUSTOM_<code> for a custom operator)."""
    __slots__ = ("index", "name", "version", "ins", "outs", "_op", "custom_options", "subgraph")

    def __init__(self, index, name, version, ins, outs, op, custom_options=b"", subgraph=0):
        self.index, self.name, self.version, self.ins, self.outs = index, name, version, ins, outs
        self._op, self.custom_options, self.subgraph = op, custom_options, subgraph

    def options(self, cls_name: str):
        """The operator's builtin options table decoded as tflite.<cls_name>, or None."""
        import tflite
        table = self._op.BuiltinOptions() if self._op is not None else None
        if table is None:
            return None
        opt = getattr(tflite, cls_name)()
        opt.Init(table.Bytes, table.Pos)
        return opt

    def __repr__(self):
        return f"Node({self.index}, {self.name}, ins={self.ins}, outs={self.outs})"


def builtin_names():
    import tflite
    return {v: k for k, v in tflite.BuiltinOperator.__dict__.items() if not k.startswith("_")}


class Graph:
    """A subgraph of a model: tensors, nodes (operators in order), inputs, outputs."""

    def __init__(self, reader, index):
        self.reader, self.index = reader, index
        g = reader.model.Subgraphs(index)
        self._g = g
        self.name = (g.Name() or b"").decode(errors="replace")
        self.tensors: List[Tensor] = [reader.tensor(g, k) for k in range(g.TensorsLength())]
        self.inputs = [int(i) for i in g.InputsAsNumpy()] if g.InputsLength() else []
        self.outputs = [int(i) for i in g.OutputsAsNumpy()] if g.OutputsLength() else []
        self.nodes: List[Node] = [reader.node(g.Operators(k), k, index) for k in range(g.OperatorsLength())]


class NotATflite(ValueError):
    """The file given is not a TensorFlow Lite flatbuffer (python -m nnapi_py: exit 2)."""
    exit_code = 2


class Reader:
    """The whole model: reader.graph(k) is subgraph k (0: the main one)."""

    def __init__(self, path: str):
        from .. import require
        tflite = require("tflite", "tflite", "the .tflite importer (its flatbuffer parser)")
        self.path = path
        self.buf = open(path, "rb").read()
        if len(self.buf) < 8 or self.buf[4:8] != b"TFL3":
            raise NotATflite(f"{path} is not a .tflite model: it lacks the TFL3 flatbuffer identifier (bytes 4-7 "
                             f"{self.buf[4:8]!r}); give a TensorFlow Lite model file")
        self.model = tflite.Model.GetRootAsModel(self.buf, 0)
        self._names = builtin_names()
        self._graphs = {}

    @property
    def n_graphs(self):
        return self.model.SubgraphsLength()

    def graph(self, k: int = 0) -> Graph:
        if k not in self._graphs:
            self._graphs[k] = Graph(self, k)
        return self._graphs[k]

    def tensor(self, g, k) -> Tensor:
        t = g.Tensors(k)
        dtype = DTYPES.get(t.Type())
        shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
        sig = tuple(int(d) for d in t.ShapeSignatureAsNumpy()) if t.ShapeSignatureLength() else shape
        value = None
        b = self.model.Buffers(t.Buffer())
        if b is not None and b.DataLength() and dtype is not None:
            value = np.frombuffer(b.DataAsNumpy().tobytes(), dtype)
            if t.Sparsity() is None:          # a sparse tensor's buffer holds only its stored values
                value = value.reshape(shape)
        elif b is not None and dtype is not None and 0 in shape and not t.IsVariable() and _is_constant(b):
            value = np.zeros(shape, dtype)    # a zero-sized constant: no bytes to store
        scale, zp, scales, qdim = 0.0, 0, None, 0
        q = t.Quantization()
        if q is not None and q.ScaleLength():
            scale, zp = float(q.Scale(0)), int(q.ZeroPoint(0)) if q.ZeroPointLength() else 0
            if q.ScaleLength() > 1:
                scales, qdim = [float(s) for s in q.ScaleAsNumpy()], int(q.QuantizedDimension())
        name = t.Name().decode(errors="replace") if t.Name() else f"t{k}"
        return Tensor(k, name, dtype, shape, scale, zp, value, scales, qdim, TYPE_NAMES.get(t.Type(), str(t.Type())),
                      sig, sparsity(t.Sparsity()), bool(t.IsVariable()))

    def node(self, op, k, graph=0) -> Node:
        code = self.model.OperatorCodes(op.OpcodeIndex())
        b = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        name = self._names.get(b, str(b))
        custom = b""
        if name == "CUSTOM":
            c = code.CustomCode()
            name = "CUSTOM_" + (c.decode(errors="replace") if c else "?")
            custom = op.CustomOptionsAsNumpy().tobytes() if op.CustomOptionsLength() else b""
        ins = [int(i) for i in op.InputsAsNumpy()] if op.InputsLength() else []
        outs = [int(i) for i in op.OutputsAsNumpy()] if op.OutputsLength() else []
        return Node(k, name, int(code.Version() or 1), ins, outs, op, custom, graph)


def _is_constant(buf) -> bool:
    """A buffer with an (empty) data vector present: how the converter writes a constant with no
    elements (a tensor computed at run time points at the empty buffer 0 or a buffer without data)."""
    return buf.DataIsNone() is False if hasattr(buf, "DataIsNone") else False


def sparsity(sp) -> Optional[dict]:
    """TFLite SparsityParameters decoded: traversal order, block map, per dimension ("dense",
    size) or ("csr", segments, indices)."""
    if sp is None:
        return None
    import tflite
    order = list(sp.TraversalOrderAsNumpy()) if sp.TraversalOrderLength() else None
    block_map = list(sp.BlockMapAsNumpy()) if sp.BlockMapLength() else []
    dims = []
    for k in range(sp.DimMetadataLength()):
        d = sp.DimMetadata(k)
        if d.Format() == tflite.DimensionType.DENSE:
            dims.append(("dense", d.DenseSize(), None, None))
        else:
            def vec(union_type, table):
                if table is None:
                    return None
                cls = {tflite.SparseIndexVector.Int32Vector: tflite.Int32Vector,
                       tflite.SparseIndexVector.Uint16Vector: tflite.Uint16Vector,
                       tflite.SparseIndexVector.Uint8Vector: tflite.Uint8Vector}[union_type]
                v = cls()
                v.Init(table.Bytes, table.Pos)
                return v.ValuesAsNumpy()
            dims.append(("csr", None, vec(d.ArraySegmentsType(), d.ArraySegments()),
                         vec(d.ArrayIndicesType(), d.ArrayIndices())))
    return {"order": order, "block_map": block_map, "dims": dims}
