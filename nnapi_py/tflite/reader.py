"""Reading a .tflite flatbuffer: with verify.py, the only module of the importer that touches the
`tflite` package (the official schema's generated Python code).  The file is verified first
(verify.py: a damaged file is LoadError "not a valid .tflite file: <what>", never an out-of-bounds
read); everything the rest needs is decoded here once, every subgraph at load: tensors (type,
shape, quantization, constant value, sparsity), operators (builtin name, op version, inputs,
outputs, options table, custom options), subgraph inputs / outputs."""
from __future__ import annotations

import os
import re
from typing import List, Optional

import numpy as np

from . import verify

# TensorType -> numpy dtype (COMPLEX64 and the like stay None: no NNAPI operand type)
DTYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_, 9: np.int8,
          7: np.int16, 10: np.float64}
TYPE_NAMES = {0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING", 6: "BOOL", 7: "INT16",
              8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 11: "COMPLEX128", 12: "UINT64", 13: "RESOURCE",
              14: "VARIANT", 15: "UINT32", 16: "UINT16", 17: "INT4", 18: "BFLOAT16", 19: "INT2", 20: "UINT4",
              21: "FLOAT8_E4M3FN", 22: "FLOAT8_E5M2"}


class Tensor:
    """One tensor of a subgraph.  value: its constant value (numpy, shaped; the stored values
    only for a sparse tensor) or None; operand: the NNAPI operand once created."""
    __slots__ = ("index", "name", "dtype", "type_name", "shape", "signature", "scale", "zp", "value", "operand",
                 "scales", "qdim", "sparsity", "variable", "stored")

    def __init__(self, index, name, dtype, shape, scale=0.0, zp=0, value=None, scales=None, qdim=0,
                 type_name="", signature=None, sparsity=None, variable=False):
        self.index, self.name, self.dtype, self.shape = index, name, dtype, shape
        self.scale, self.zp, self.value, self.operand = scale, zp, value, None
        self.scales, self.qdim = scales, qdim        # per-channel quantization (int8 weights, int32 bias)
        self.type_name = type_name or (str(np.dtype(dtype)) if dtype is not None else "?")
        self.signature = signature if signature is not None else shape     # -1: a dimension of any size
        self.sparsity, self.variable = sparsity, variable
        self.stored = value is not None         # its value is in the file (also one numpy has no type for)


class Unmapped(Exception):
    """This node cannot be lowered (the message is the reason).  base.Unmapped is this class."""


class MissingOperand(Unmapped, IndexError):
    """An operator has fewer inputs / outputs than its operation takes (a damaged or odd file)."""


class Operands(list):
    """An operator's input or output tensor indices; reading one past the end is MissingOperand
    naming the operator, so a mapping never fails with a bare IndexError on such a file."""
    __slots__ = ("what",)

    def __getitem__(self, k):
        if isinstance(k, int) and not -len(self) <= k < len(self):
            raise MissingOperand(f"{self.what} {k} is missing (the operator has {len(self)})")
        return list.__getitem__(self, k)


def _operands(values, what):
    out = Operands(values)
    out.what = what
    return out


# an options table with no fields: every accessor of tflite.<X>Options gives its default
_EMPTY_TABLE = (bytearray(b"\x04\x00\x04\x00\x04\x00\x00\x00"), 4)


class Node:
    """One operator: name is the builtin's name (CUSTOM_<code> for a custom operator)."""
    __slots__ = ("index", "name", "version", "ins", "outs", "_op", "custom_options", "subgraph")

    def __init__(self, index, name, version, ins, outs, op, custom_options=b"", subgraph=0):
        self.index, self.name, self.version = index, name, version
        self.ins, self.outs = _operands(ins, "input"), _operands(outs, "output")
        self._op, self.custom_options, self.subgraph = op, custom_options, subgraph

    def options(self, cls_name: str):
        """The operator's builtin options table decoded as tflite.<cls_name>: the file's when its
        options are of that type, else one with every field at its default (as TFLite reads an
        operator whose options are absent or of another type); None for an operator without a
        flatbuffer (one the importer made)."""
        import tflite
        if self._op is None:
            return None
        opt = getattr(tflite, cls_name)()
        table = self._op.BuiltinOptions()
        if table is None or self._op.BuiltinOptionsType() != getattr(tflite.BuiltinOptions, cls_name, -1):
            opt.Init(*_EMPTY_TABLE)
        else:
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
        self.tensors: List[Tensor] = [reader.tensor(g, k, index) for k in range(g.TensorsLength())]
        reader._graph_tensors[index] = self.tensors
        n = len(self.tensors)
        self.inputs = g.InputsAsNumpy().tolist() if g.InputsLength() else []
        self.outputs = g.OutputsAsNumpy().tolist() if g.OutputsLength() else []
        for what, vec in (("input", self.inputs), ("output", self.outputs)):
            bad = [i for i in vec if not 0 <= i < n]
            if bad:
                raise verify.Invalid(f"subgraph {index}: {what} tensor {bad[0]} is not one of its {n} tensors")
            twice = sorted({i for i in vec if vec.count(i) > 1}) if what == "input" else ()
            if twice:                       # (an output listed twice is two outputs of one value)
                raise verify.Invalid(f"subgraph {index}: tensor {twice[0]} is listed twice among its {what}s")
        written = {}
        self.nodes: List[Node] = [reader.node(g.Operators(k), k, index, written)
                                  for k in range(g.OperatorsLength())]
        inputs = set(self.inputs)
        given = inputs | {t.index for t in self.tensors if t.stored or t.variable}     # values before any operator
        for node in self.nodes:             # operators in an order they can run: a value is read after it is written
            for i in node.outs:
                if i >= 0 and (i in inputs or self.tensors[i].stored):
                    what = "an input of the subgraph" if i in inputs else "a constant"
                    raise verify.Invalid(f"subgraph {index}, operator {node.index}: its output tensor {i} "
                                         f"({self.tensors[i].name!r}) is {what}")
            for i in node.ins:
                if i >= 0 and i not in given and written.get(i, node.index) >= node.index:
                    after = f"operator {written[i]} writes only after it" if i in written else \
                        "is no input, no constant and written by no operator"
                    raise verify.Invalid(f"subgraph {index}, operator {node.index}: it reads tensor {i} "
                                         f"({self.tensors[i].name!r}), which {after}")
        for i in self.outputs:              # an output nothing gives a value
            if i not in written and i not in given:
                raise verify.Invalid(f"subgraph {index}: output tensor {i} ({self.tensors[i].name!r}) is no input, "
                                     f"no constant and written by no operator")
        if index == 0 and not self.outputs:
            raise verify.Invalid("subgraph 0 has no outputs")


class LoadError(Exception):
    """The model cannot be loaded.  Two kinds (python -m nnapi_py prints either as its error):

    * LoadError(path, unmapped, hint): operators that cannot run -- `unmapped` lists (operator
      index, builtin, reason); the message lists the causes first, operators that fail only because
      an input was never produced (a consequence of an earlier failure) counted in one line after
      them.  Exit code 1 (the model cannot run here).
    * LoadError.invalid_file(path, what): the file is not a valid .tflite model (damaged, truncated, not
      a TFLite flatbuffer): one line "<file>: not a valid .tflite file: <what>", `what` naming the
      table, field or offset at fault.  Exit code 2 (the file given is wrong); `invalid` holds what."""
    exit_code = 1                       # python -m nnapi_py: the model cannot run
    multiline = True                    # its lines are the list of causes
    invalid = None                      # what is wrong with the file (LoadError.invalid_file)

    def __init__(self, path, unmapped, hint=""):
        self.unmapped = unmapped
        causes = [u for u in unmapped if not _CONSEQUENCE.search(u[2])]
        after = [u for u in unmapped if _CONSEQUENCE.search(u[2])]
        lines = [f"  operator {k}: {name}: {why}" for k, name, why in causes]
        if after:
            lines.append(f"  and {len(after)} operator(s) after them that only lack an input those did not produce "
                         f"(operators {_ranges([k for k, _, _ in after])})")
        super().__init__(f"{os.path.basename(path)}: {len(causes) or len(unmapped)} operator(s) cannot run through "
                         f"NNAPI:\n" + "\n".join(lines) + (f"\n{hint}" if hint else ""))

    @classmethod
    def invalid_file(cls, path, what):
        """The file is not a valid .tflite model: `what` says where and why (one line, exit code 2)."""
        e = cls.__new__(cls)
        Exception.__init__(e, f"{os.path.basename(path)}: not a valid .tflite file: {what}")
        e.unmapped, e.invalid, e.exit_code, e.multiline = [], what, 2, False
        return e


_CONSEQUENCE = re.compile(r"is used before any operator produces it")


def _ranges(ks):
    """'3-7, 9, 12-14' for sorted operator indices."""
    out, ks = [], sorted(ks)
    for k in ks:
        if out and k == out[-1][1] + 1:
            out[-1][1] = k
        else:
            out.append([k, k])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)


class Reader:
    """The whole model: reader.graph(k) is subgraph k (0: the main one)."""

    def __init__(self, path: str):
        from .. import require
        tflite = require("tflite", "tflite", "the .tflite importer (its flatbuffer parser)")
        self.path = path
        with open(path, "rb") as f:
            self.buf = f.read()
        if len(self.buf) < 8 or self.buf[4:8] != b"TFL3":
            raise LoadError.invalid_file(path, f"bytes 4-7 are {self.buf[4:8]!r}, not the TFL3 flatbuffer identifier: "
                                               f"this is not a .tflite model; give a TensorFlow Lite model file")
        try:
            verify.structure(self.buf)      # every offset, vtable, vector and string inside the file
            # a scalar field of a table the schema lists only as scalars is read from a padded copy: no read
            # runs past the end even where the field is wider than the bytes left
            self.model = tflite.Model.GetRootAsModel(self.buf + bytes(8), 0)
            verify.model(self.model, len(self.buf))    # subgraphs, buffers, operator codes
            self._names = builtin_names()
            self._n_buffers, self._n_codes = self.model.BuffersLength(), self.model.OperatorCodesLength()
            self._graph_tensors = {}        # subgraph -> its tensors (while it is read)
            self._calls = {}                # subgraph -> the subgraphs its IF / WHILE / CALL_ONCE call
            # every subgraph decoded now, each tensor and operator checked as it is read (indices, enums,
            # shapes, buffer sizes, quantization, sparsity), then the calls between subgraphs
            self._graphs = {k: Graph(self, k) for k in range(self.model.SubgraphsLength())}
            verify.calls(self._calls)
        except verify.Invalid as e:
            raise LoadError.invalid_file(path, str(e)) from None

    @property
    def n_graphs(self):
        return self.model.SubgraphsLength()

    def graph(self, k: int = 0) -> Graph:
        if k not in self._graphs:
            self._graphs[k] = Graph(self, k)
        return self._graphs[k]

    def tensor(self, g, k, s=0) -> Tensor:
        t = g.Tensors(k)
        raw_name, typ, shape, sig, quant, data, b, sp = verify.tensor(self.model, t, k, s, self._n_buffers)
        dtype = DTYPES.get(typ)
        shape = tuple(shape)
        sig = tuple(sig) if sig is not None else shape
        value = None
        if data is not None and dtype is not None:
            value = np.frombuffer(data.tobytes(), dtype)
            if sp is None:                    # a sparse tensor's buffer holds only its stored values
                value = value.reshape(shape)
        elif b is not None and dtype is not None and 0 in shape and not t.IsVariable() and _is_constant(b):
            value = np.zeros(shape, dtype)    # a zero-sized constant: no bytes to store
        scale, zp, scales, qdim = 0.0, 0, None, 0
        if quant is not None:
            q_scales, q_zps, q_dim = quant
            scale, zp = float(q_scales[0]), int(q_zps[0])
            if len(q_scales) > 1:
                scales, qdim = [float(x) for x in q_scales], int(q_dim)
        name = raw_name.decode(errors="replace") if raw_name else f"t{k}"
        out = Tensor(k, name, dtype, shape, scale, zp, value, scales, qdim, TYPE_NAMES.get(typ, str(typ)),
                     sig, sparsity(sp), bool(t.IsVariable()))
        out.stored = value is not None or data is not None
        return out

    def node(self, op, k, graph=0, written=None) -> Node:
        ins, outs = verify.operator(self.model, op, k, graph, len(self._graph_tensors[graph]),
                                    {} if written is None else written, self._calls, len(self.buf), self._n_codes)
        code = self.model.OperatorCodes(op.OpcodeIndex())
        b = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        name = self._names.get(b, f"BUILTIN_{b}")        # a code the schema does not know: BUILTIN_<code>
        custom = b""
        if name == "CUSTOM":
            c = code.CustomCode()
            name = "CUSTOM_" + (c.decode(errors="replace") if c else "?")
            custom = op.CustomOptionsAsNumpy().tobytes() if op.CustomOptionsLength() else b""
        node = Node(k, name, int(code.Version() or 1), ins, outs, op, custom, graph)
        _check_windows(node, graph)
        return node


# convolutions and pools: the options TFLite's kernels divide by or step with (read as the builtin's own options
# table: absent, or of another type, every field is 0 -- a stride of 0 that LiteRT's kernels do not survive)
_WINDOWS = {"CONV_2D": ("Conv2DOptions", ("StrideW", "StrideH", "DilationWFactor", "DilationHFactor")),
            "DEPTHWISE_CONV_2D": ("DepthwiseConv2DOptions", ("StrideW", "StrideH", "DilationWFactor",
                                                             "DilationHFactor")),
            "TRANSPOSE_CONV": ("TransposeConvOptions", ("StrideW", "StrideH")),
            "AVERAGE_POOL_2D": ("Pool2DOptions", ("StrideW", "StrideH", "FilterWidth", "FilterHeight")),
            "MAX_POOL_2D": ("Pool2DOptions", ("StrideW", "StrideH", "FilterWidth", "FilterHeight")),
            "L2_POOL_2D": ("Pool2DOptions", ("StrideW", "StrideH", "FilterWidth", "FilterHeight"))}


def _check_windows(node, graph):
    spec = _WINDOWS.get(node.name)
    if spec is None:
        return
    o = node.options(spec[0])
    bad = [f for f in spec[1] if getattr(o, f)() < 1]
    if bad:
        raise verify.Invalid(f"subgraph {graph}, operator {node.index} ({node.name}): {spec[0]} "
                             f"{', '.join(f'{f} {getattr(o, f)()}' for f in bad)} (each must be at least 1)")


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
