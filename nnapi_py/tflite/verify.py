"""Checking a .tflite file before anything reads it: a damaged file is refused with the place
that is wrong, never read out of bounds.

`structure(buf)` is a flatbuffer verifier (what flatbuffers' C++ `Verifier` does for LiteRT's
`VerifyAndBuildFromBuffer`): from the root table down, every table's vtable, every field, every
offset, vector and string lies inside the file and is aligned, with the schema of TFLite's
model (`SCHEMA` below: the tables holding offsets; a table not listed holds only scalars, each
field checked to start inside the file -- the reader reads a padded copy, so no scalar runs past
its end).  `model(reader)` then checks what the schema cannot say: every index (operator codes,
tensors, buffers, subgraphs of IF / WHILE / CALL_ONCE) in range, enum values known, shapes
non-negative and of a size a tensor can have, constant data of the size shape x type needs,
quantization and sparsity consistent with the shape, each tensor written by one operator.

Both raise `Invalid(what)`; reader.Reader turns it into `LoadError: <file>: not a valid .tflite
file: <what>`.
"""
from __future__ import annotations

import math
import struct

import numpy as np


class Invalid(Exception):
    """The file is not a valid .tflite model: the message says what is wrong and where."""


# The schema of TFLite's model flatbuffer (tflite/schema/schema.fbs as LiteRT 2.x ships it) for the tables that
# hold offsets: "slot kind" per field.  Kinds: i8 u8 i16 u16 i32 u32 i64 u64 f32 f64 (scalars), str, [scalar]
# (a vector of scalars), [str], [Table] (a vector of tables), Table, union (its type is the u8 field in the slot
# before).  Tables not listed (most builtin options) hold only scalars.  tests/test_tflite_corrupt.py checks this
# against the generated code of the `tflite` package and of LiteRT.
SCHEMA_TEXT = """
Model: 0 u32, 1 [OperatorCode], 2 [SubGraph], 3 str, 4 [Buffer], 5 [i32], 6 [Metadata], 7 [SignatureDef], \
8 [ExternalBufferGroup], 9 [ExternalBuffer]
OperatorCode: 0 i8, 1 str, 2 i32, 3 i32
SubGraph: 0 [Tensor], 1 [i32], 2 [i32], 3 [Operator], 4 str, 5 i32
Tensor: 0 [i32], 1 i8, 2 u32, 3 str, 4 QuantizationParameters, 5 u8, 6 SparsityParameters, 7 [i32], 8 u8, \
9 [VariantSubType], 10 u32
QuantizationParameters: 0 [f32], 1 [f32], 2 [f32], 3 [i64], 4 u8, 5 union, 6 i32
CustomQuantization: 0 [u8]
BlockwiseQuantization: 0 i32, 1 i32, 2 i32, 3 [i32]
MultiAxisQuantization: 0 i32, 1 i32, 2 i32, 3 [i32]
SparsityParameters: 0 [i32], 1 [i32], 2 [DimensionMetadata]
DimensionMetadata: 0 i8, 1 i32, 2 u8, 3 union, 4 u8, 5 union
Int32Vector: 0 [i32]
Uint16Vector: 0 [u16]
Uint8Vector: 0 [u8]
VariantSubType: 0 [i32], 1 i8, 2 u8
Operator: 0 u32, 1 [i32], 2 [i32], 3 u8, 4 union, 5 [u8], 6 i8, 7 [u8], 8 [i32], 9 u64, 10 u64, 11 u8, 12 union, \
13 i32
Buffer: 0 [u8], 1 u64, 2 u64
Metadata: 0 str, 1 u32
TensorMap: 0 str, 1 u32
SignatureDef: 0 [TensorMap], 1 [TensorMap], 2 str, 4 u32
ExternalBufferGroup: 0 str
ExternalBuffer: 0 u32, 1 u32, 2 u64, 4 str
ConcatEmbeddingsOptions: 0 i32, 1 [i32], 2 [i32]
FullyConnectedOptions: 0 i8, 1 i8, 2 u8, 3 u8, 4 i8, 5 [u8]
ReshapeOptions: 0 [i32]
SqueezeOptions: 0 [i32]
VarHandleOptions: 0 str, 1 str
BucketizeOptions: 0 [f32]
StableHLOCompositeOptions: 0 str, 1 i32, 2 [u8], 3 i8, 4 i32
StablehloBroadcastInDimOptions: 0 [i64]
StablehloSliceOptions: 0 [i64], 1 [i64], 2 [i64]
StablehloConvolutionOptions: 0 [i64], 1 [i64], 2 [i64], 3 [i64], 4 [u8], 5 i64, 6 i64, 7 [i64], 8 i64, 9 i64, \
10 [i64], 11 i64, 12 i64, 13 [i64], 14 i64, 15 i64, 16 [u32]
StablehloCustomCallOptions: 0 str, 1 u8, 2 str, 3 i32, 4 [i32], 5 [u8]
StablehloReduceOptions: 0 [i64], 1 i32
StablehloScatterOptions: 0 u8, 1 [i64], 2 [i64], 3 [i64], 4 i64, 5 u8, 6 i32
StablehloDynamicSliceOptions: 0 [i64]
StablehloPadOptions: 0 [i64], 1 [i64], 2 [i64]
StablehloDotGeneralOptions: 0 [i64], 1 [i64], 2 [i64], 3 [i64], 4 [u32]
StablehloReduceWindowOptions: 0 [i64], 1 [i64], 2 [i64], 3 [i64], 4 [i64], 5 i32
StablehloGatherOptions: 0 [i64], 1 [i64], 2 [i64], 3 i64, 4 [i64], 5 u8
StablehloTransposeOptions: 0 [i64]
StablehloCaseOptions: 0 [i32]
"""
# union fields: (table, slot) -> the union's members that hold offsets {type value: table}; other members are
# tables of scalars only (any value below `count`), values from `count` on are unknown (not read).
UNIONS = {
    ("Operator", 4): ("BuiltinOptions", 127, {3: "ConcatEmbeddingsOptions", 8: "FullyConnectedOptions",
                                              17: "ReshapeOptions", 30: "SqueezeOptions", 111: "VarHandleOptions",
                                              115: "BucketizeOptions"}),
    ("Operator", 12): ("BuiltinOptions2", 24, {
        2: "StablehloBroadcastInDimOptions", 3: "StablehloSliceOptions", 4: "StablehloConvolutionOptions",
        5: "StablehloCustomCallOptions", 6: "StablehloReduceOptions", 7: "StablehloScatterOptions",
        9: "StablehloDynamicSliceOptions", 10: "StablehloPadOptions", 12: "StablehloDotGeneralOptions",
        13: "StablehloReduceWindowOptions", 16: "StablehloGatherOptions", 17: "StablehloTransposeOptions",
        21: "StableHLOCompositeOptions", 23: "StablehloCaseOptions"}),
    ("QuantizationParameters", 5): ("QuantizationDetails", 4, {1: "CustomQuantization", 2: "BlockwiseQuantization",
                                                              3: "MultiAxisQuantization"}),
    ("DimensionMetadata", 3): ("SparseIndexVector", 4, {1: "Int32Vector", 2: "Uint16Vector", 3: "Uint8Vector"}),
    ("DimensionMetadata", 5): ("SparseIndexVector", 4, {1: "Int32Vector", 2: "Uint16Vector", 3: "Uint8Vector"}),
}
SIZES = {"i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "u32": 4, "f32": 4, "i64": 8, "u64": 8, "f64": 8}
FIELD_NAMES = {   # for messages: the fields of the tables a reader meets first
    "Model": "version operator_codes subgraphs description buffers metadata_buffer metadata signature_defs "
             "external_buffer_groups external_buffers",
    "SubGraph": "tensors inputs outputs operators name debug_metadata_index",
    "Tensor": "shape type buffer name quantization is_variable sparsity shape_signature has_rank variant_tensors "
              "external_buffer",
    "Operator": "opcode_index inputs outputs builtin_options_type builtin_options custom_options "
                "custom_options_format mutating_variable_inputs intermediates large_custom_options_offset "
                "large_custom_options_size builtin_options_2_type builtin_options_2 debug_metadata_index",
    "OperatorCode": "deprecated_builtin_code custom_code version builtin_code",
    "Buffer": "data offset size",
    "QuantizationParameters": "min max scale zero_point details_type details quantized_dimension",
}
MAX_TABLES = 1_000_000          # flatbuffers' Verifier default (max_tables)


def _parse(text):
    out = {}
    for line in text.replace("\\\n", "").strip().splitlines():
        name, _, fields = line.partition(":")
        out[name.strip()] = {int(s): k for s, k in (f.split() for f in fields.split(","))}
    return out


SCHEMA = _parse(SCHEMA_TEXT)


_FIELDS = {t: names.split() for t, names in FIELD_NAMES.items()}


def _field_name(table, slot):
    names = _FIELDS.get(table, ())
    return names[slot] if slot < len(names) else f"field {slot}"


class _Verifier:
    def __init__(self, buf):
        self.b = buf
        self.n = len(buf)
        self.seen = set()

    def fail(self, where, what):
        raise Invalid(f"{where}: {what}")

    def _in(self, at, size, where, what):
        if at < 0 or at + size > self.n:
            self.fail(where, f"{what} at byte {at} lies past the end of the file ({self.n} bytes)")

    def _aligned(self, at, size, where, what):
        if at % size:
            self.fail(where, f"{what} at byte {at} is not aligned to {size} bytes")

    def u32(self, at):
        return struct.unpack_from("<I", self.b, at)[0]

    def offset(self, at, where):
        """The position an offset field at `at` points to (checked: in the file)."""
        self._in(at, 4, where, "the offset")
        self._aligned(at, 4, where, "the offset")
        o = self.u32(at)
        if o == 0:
            self.fail(where, f"the offset at byte {at} is 0")
        target = at + o
        if target >= self.n:
            self.fail(where, f"the offset at byte {at} points to byte {target}, past the end of the file "
                             f"({self.n} bytes)")
        return target

    def vector(self, at, elem, where, terminator=False):
        """(start of the elements, count) of the vector at `at`."""
        self._in(at, 4, where, "the vector's length")
        self._aligned(at, 4, where, "the vector's length")
        count = self.u32(at)
        end = at + 4 + count * elem + (1 if terminator else 0)
        if end > self.n:
            self.fail(where, f"{'a string' if terminator else 'a vector'} of {count} "
                             f"{'bytes' if terminator else 'elements'} at byte {at} runs past the end of the file "
                             f"({self.n} bytes)")
        if terminator and self.b[at + 4 + count] != 0:
            self.fail(where, f"the string at byte {at} lacks its terminating zero")
        return at + 4, count

    def table(self, pos, name, where):
        key = (pos, name)
        if key in self.seen:
            return
        self.seen.add(key)
        if len(self.seen) > MAX_TABLES:
            self.fail(where, f"more than {MAX_TABLES} tables")
        self._in(pos, 4, where, f"the {name} table")
        self._aligned(pos, 4, where, f"the {name} table")
        vt = pos - struct.unpack_from("<i", self.b, pos)[0]
        self._in(vt, 4, where, f"the {name} table's vtable")
        self._aligned(vt, 2, where, f"the {name} table's vtable")
        vsize = struct.unpack_from("<H", self.b, vt)[0]
        if vsize < 4 or vsize % 2:
            self.fail(where, f"the {name} table's vtable (byte {vt}) has an invalid size {vsize}")
        self._in(vt, vsize, where, f"the {name} table's vtable of {vsize} bytes")
        fields = SCHEMA.get(name, {})
        for slot in range((vsize - 4) // 2):
            fo = struct.unpack_from("<H", self.b, vt + 4 + 2 * slot)[0]
            if not fo:
                continue
            kind = fields.get(slot)
            at = pos + fo
            fw = f"{where}, {_field_name(name, slot)}"
            if kind is None or kind in SIZES:          # a scalar (of unknown size when not in the schema)
                size = SIZES.get(kind, 1)
                self._in(at, size, fw, "the field")
                if kind is not None:
                    self._aligned(at, size, fw, "the field")
                continue
            if kind == "union":
                self.union(pos, vt, vsize, name, slot, at, fw)
                continue
            target = self.offset(at, fw)
            self.value(target, kind, fw)

    def value(self, target, kind, where):
        if kind == "str":
            self.vector(target, 1, where, terminator=True)
        elif kind.startswith("["):
            inner = kind[1:-1]
            start, count = self.vector(target, SIZES.get(inner, 4), where)
            if inner in SIZES:
                return
            for i in range(count):
                t = self.offset(start + 4 * i, f"{where}[{i}]")
                self.value(t, inner, f"{where}[{i}]")
        else:
            self.table(target, kind, where)

    def union(self, pos, vt, vsize, name, slot, at, where):
        union, count, with_offsets = UNIONS[(name, slot)]
        t_slot = slot - 1
        fo = struct.unpack_from("<H", self.b, vt + 4 + 2 * t_slot)[0] if 4 + 2 * t_slot < vsize else 0
        utype = self.b[pos + fo] if fo and pos + fo < self.n else 0
        target = self.offset(at, where)
        if utype == 0 or utype >= count:            # NONE, or a member this schema does not know: not read
            return
        self.table(target, with_offsets.get(utype, f"{union}[{utype}]"), where)


def structure(buf) -> None:
    """Check the flatbuffer structure of a whole .tflite file (bytes): Invalid on the first fault."""
    v = _Verifier(buf)
    if len(buf) < 8:
        raise Invalid(f"the file has {len(buf)} bytes, fewer than a flatbuffer's header")
    root = v.offset(0, "the root offset")
    v.table(root, "Model", "the model")


# -- the model's structure beyond the schema ------------------------------------------------------------
TYPE_SIZES = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 8: 8, 9: 1, 10: 8, 11: 16, 12: 8, 15: 4, 16: 2, 18: 2, 21: 1,
              22: 1}
PACKED_BITS = {17: 4, 19: 2, 20: 4}         # INT4, INT2, UINT4: packed, (count x bits + 7) // 8 bytes
N_TENSOR_TYPES = 23             # TensorType FLOAT32 .. FLOAT8_E5M2
QUANT_RANGES = {3: (0, 255), 9: (-128, 127), 7: (-32768, 32767)}
MAX_TENSOR_BYTES = 2 ** 31 - 1  # a tensor of a .tflite model (its flatbuffer is limited to 2 GB; NNAPI to 4 GB)
# options fields holding enum values: accessor -> (TFLite enum, its number of values)
ENUM_FIELDS = {"Padding": ("Padding", 2), "FusedActivationFunction": ("ActivationFunctionType", 6),
               "WeightsFormat": ("FullyConnectedOptionsWeightsFormat", 2), "KernelType": ("LSTMKernelType", 2),
               "Combiner": ("CombinerType", 3)}
ENUM_BY_OPTIONS = {"MirrorPadOptions": {"Mode": ("MirrorPadMode", 2)},
                   "LSHProjectionOptions": {"Type": ("LSHProjectionType", 3)}}
SUBGRAPH_FIELDS = {"IfOptions": ("ThenSubgraphIndex", "ElseSubgraphIndex"),
                   "WhileOptions": ("CondSubgraphIndex", "BodySubgraphIndex"),
                   "CallOnceOptions": ("InitSubgraphIndex",), "CallOptions": ("Subgraph",)}


def model(m, n_bytes: int) -> None:
    """Check the model-wide tables of the decoded model `m` (tflite.Model over a structurally verified
    buffer of n_bytes): subgraphs, buffers, operator codes.  The reader checks each subgraph's
    tensors (`tensor`) and operators (`operator`) as it decodes them, then the calls between
    subgraphs (`calls`)."""
    n_graphs, n_buffers, n_codes = m.SubgraphsLength(), m.BuffersLength(), m.OperatorCodesLength()
    if n_graphs == 0:
        raise Invalid("the model has no subgraph")
    for k in range(n_buffers):
        b = m.Buffers(k)
        if b.Offset() > 1 and (b.Offset() + b.Size() > n_bytes):
            raise Invalid(f"buffer {k}: its data at bytes {b.Offset()}..{b.Offset() + b.Size()} lies past the end of "
                          f"the file ({n_bytes} bytes)")
    for k in range(n_codes):
        c = m.OperatorCodes(k)
        if max(c.BuiltinCode(), c.DeprecatedBuiltinCode()) < 0:
            raise Invalid(f"operator code {k}: builtin code {max(c.BuiltinCode(), c.DeprecatedBuiltinCode())} is "
                          "negative")


def operator(m, op, j, s, n_tensors, written, calls, n_bytes, n_codes):
    """Check operator j of subgraph s: its operator code, tensor indices (each tensor written by
    one operator: `written` tensor -> operator), enum options, the subgraphs it calls (into
    `calls`).  Returns (inputs, outputs) as lists of ints."""
    import tflite
    ow = f"subgraph {s}, operator {j}"
    if op.OpcodeIndex() >= n_codes:
        raise Invalid(f"{ow}: operator code {op.OpcodeIndex()} is not one of the model's {n_codes}")
    ins = op.InputsAsNumpy().tolist() if op.InputsLength() else []
    outs = op.OutputsAsNumpy().tolist() if op.OutputsLength() else []
    inter = op.IntermediatesAsNumpy().tolist() if op.IntermediatesLength() else []
    for what, vec, low in (("input", ins, -1), ("output", outs, -1), ("intermediate", inter, 0)):
        for i in vec:
            if not low <= i < n_tensors:
                raise Invalid(f"{ow}: {what} tensor {i} is not one of the subgraph's {n_tensors} tensors")
    for i in outs:
        if i >= 0:
            if i in written:
                raise Invalid(f"{ow}: output tensor {i} is already written by operator {written[i]}")
            written[i] = j
    if op.LargeCustomOptionsSize() and op.LargeCustomOptionsOffset() + op.LargeCustomOptionsSize() > n_bytes:
        raise Invalid(f"{ow}: its custom options at byte {op.LargeCustomOptionsOffset()} lie past the end of "
                      f"the file ({n_bytes} bytes)")
    if not _OPTIONS:
        _OPTIONS.update(options_names())
    cls = _OPTIONS.get(op.BuiltinOptionsType())
    table = op.BuiltinOptions() if cls else None
    if table is not None:
        o = getattr(tflite, cls)()
        o.Init(table.Bytes, table.Pos)
        for acc, (enum, count) in ENUM_FIELDS.items() | ENUM_BY_OPTIONS.get(cls, {}).items():
            if hasattr(o, acc) and not 0 <= getattr(o, acc)() < count:
                raise Invalid(f"{ow}: {cls}.{acc} is {getattr(o, acc)()}, not a value of TFLite's {enum} "
                              f"(0..{count - 1})")
        n_graphs = m.SubgraphsLength()
        for acc in SUBGRAPH_FIELDS.get(cls, ()):
            sg = getattr(o, acc)()
            if not 0 < sg < n_graphs:
                raise Invalid(f"{ow}: {cls}.{acc} is {sg}, not one of the model's subgraphs 1..{n_graphs - 1}")
            calls.setdefault(s, set()).add(sg)
    return ins, outs


def options_names():
    """BuiltinOptions type value -> options table name (the tflite package's enum; NONE left out)."""
    import tflite
    return {v: k for k, v in tflite.BuiltinOptions.__dict__.items() if not k.startswith("_") and v}


_OPTIONS = {}


def calls(graph_calls):
    """Subgraphs calling one another (IF / WHILE / CALL_ONCE) must not call themselves."""
    state = {}

    def visit(s, chain):
        if state.get(s) == 1:
            return
        if s in chain:
            raise Invalid(f"subgraph {s} calls itself (through subgraphs {' -> '.join(map(str, chain + [s]))})")
        for t in sorted(graph_calls.get(s, ())):
            visit(t, chain + [s])
        state[s] = 1

    for s in sorted(graph_calls):
        visit(s, [])


def tensor(m, t, k, s, n_buffers):
    """Check tensor k of subgraph s (of a model with n_buffers buffers) and return what the reader
    needs of it: (name bytes, type, shape, signature or None, quantization (scales array, zero points
    array, dimension) or None, buffer data (uint8 array) or None, the Buffer table, sparsity table)."""
    name = t.Name()
    tw = f"subgraph {s}, tensor {k}" + (f" ({name.decode(errors='replace')!r})" if name else "")
    typ = t.Type()
    if not 0 <= typ < N_TENSOR_TYPES:
        raise Invalid(f"{tw}: type {typ} is not a TFLite tensor type")
    shape = t.ShapeAsNumpy().tolist() if t.ShapeLength() else []
    if any(d < 0 for d in shape):
        raise Invalid(f"{tw}: shape {shape} has a negative dimension")
    sig = t.ShapeSignatureAsNumpy().tolist() if t.ShapeSignatureLength() else None
    if sig is not None and (len(sig) != len(shape) or any(d < -1 for d in sig)):
        raise Invalid(f"{tw}: shape signature {sig} does not fit its shape {shape}")
    count = math.prod(shape)
    size = TYPE_SIZES.get(typ, 1)
    if count * size > MAX_TENSOR_BYTES:
        raise Invalid(f"{tw}: shape {shape} makes a tensor of {count * size} bytes, more than any tensor of a "
                      f".tflite model (2 GB)")
    bi = t.Buffer()
    if bi >= n_buffers and bi != 0:
        raise Invalid(f"{tw}: buffer {bi} is not one of the model's {n_buffers} buffers")
    b = m.Buffers(bi) if bi < n_buffers else None
    data = b.DataAsNumpy() if b is not None and b.DataLength() else None
    sp = t.Sparsity()
    need = (count * PACKED_BITS[typ] + 7) // 8 if typ in PACKED_BITS else count * size
    if data is not None and (typ in TYPE_SIZES or typ in PACKED_BITS) and sp is None and len(data) != need:
        raise Invalid(f"{tw}: its buffer {bi} holds {len(data)} bytes where shape {shape} of "
                      f"{_type_name(typ)} needs {need}")
    quant = None
    q = t.Quantization()
    if q is not None and q.ScaleLength():
        scales = q.ScaleAsNumpy()
        nz = q.ZeroPointLength()
        zps = q.ZeroPointAsNumpy() if nz else np.zeros(1, np.int64)
        lo, hi = QUANT_RANGES.get(typ, (-2 ** 31, 2 ** 31 - 1))
        if len(scales) == 1 and nz <= 1:            # per tensor (most tensors): plain numbers
            s0, z0 = float(scales[0]), int(zps[0])
            scale_ok, zp_ok = math.isfinite(s0) and s0 >= 0, lo <= z0 <= hi
        else:
            scale_ok = bool(np.all(np.isfinite(scales)) and not np.any(scales < 0))
            zp_ok = bool(zps.min() >= lo and zps.max() <= hi)
        if not scale_ok:
            raise Invalid(f"{tw}: quantization scale {scales[:4].tolist()} is not a finite non-negative number")
        if nz and nz != len(scales):
            raise Invalid(f"{tw}: {len(scales)} quantization scales but {nz} zero points")
        if not zp_ok:
            raise Invalid(f"{tw}: zero point {int(zps[np.argmax((zps < lo) | (zps > hi))])} is outside "
                          f"{_type_name(typ)}'s range {lo}..{hi}")
        qd = q.QuantizedDimension()
        if len(scales) > 1 and (not 0 <= qd < len(shape) or shape[qd] != len(scales)):
            raise Invalid(f"{tw}: {len(scales)} per-channel scales along dimension {qd} of shape {shape}")
        quant = (scales, zps, qd)
    if sp is not None:
        _sparsity(t, sp, shape, tw, size, data)
    return name, typ, shape, sig, quant, data, b, sp


def _type_name(typ):
    from .reader import TYPE_NAMES
    return TYPE_NAMES.get(typ, str(typ))


def _sparsity(t, sp, shape, tw, size, data):
    """TFLite's sparse format: the traversal order a permutation of the dimensions (the tensor's, then one per
    block dimension), block_map naming tensor dimensions, one DimensionMetadata per traversed dimension, CSR
    segments non-decreasing within the indices, indices within their dimension, the stored values counted."""
    import tflite
    rank = len(shape)
    order = [int(x) for x in sp.TraversalOrderAsNumpy()] if sp.TraversalOrderLength() else list(range(rank))
    block_map = [int(x) for x in sp.BlockMapAsNumpy()] if sp.BlockMapLength() else []
    n = len(order)
    if sorted(order) != list(range(n)) or n != rank + len(block_map):
        raise Invalid(f"{tw}: sparsity traversal order {order} is not a permutation of its {rank} dimensions and "
                      f"{len(block_map)} block dimensions")
    if any(not 0 <= b < rank for b in block_map) or len(set(block_map)) != len(block_map):
        raise Invalid(f"{tw}: sparsity block map {block_map} does not name distinct dimensions of its shape {shape}")
    if sp.DimMetadataLength() != n:
        raise Invalid(f"{tw}: {sp.DimMetadataLength()} sparsity dimension metadata for {n} traversed dimensions")
    sizes = []
    for lv in range(n):
        d = sp.DimMetadata(lv)
        if d.Format() == tflite.DimensionType.DENSE:
            sizes.append(None)
            if d.DenseSize() < 0:
                raise Invalid(f"{tw}: sparsity dimension {lv} has a negative size {d.DenseSize()}")
        elif d.Format() != tflite.DimensionType.SPARSE_CSR:
            raise Invalid(f"{tw}: sparsity dimension {lv} has format {d.Format()}, neither DENSE nor SPARSE_CSR")
    # the dimension sizes: block dimensions' sizes are their dense sizes; a blocked dimension is divided by them
    block = {b: sp.DimMetadata(rank + i).DenseSize() for i, b in enumerate(block_map)}
    if any(v <= 0 or shape[b] % v for b, v in block.items()):
        raise Invalid(f"{tw}: sparsity block sizes {list(block.values())} do not divide shape {shape}")
    dim_size = [shape[d] // block.get(d, 1) if d < rank else sp.DimMetadata(d).DenseSize() for d in order]
    count = 1                                   # entries at the current level
    for lv in range(n):
        d = sp.DimMetadata(lv)
        if d.Format() == tflite.DimensionType.DENSE:
            if d.DenseSize() != dim_size[lv]:
                raise Invalid(f"{tw}: sparsity dimension {lv} has dense size {d.DenseSize()}, its dimension "
                              f"{dim_size[lv]}")
            count *= d.DenseSize()
            if count * size > MAX_TENSOR_BYTES:
                raise Invalid(f"{tw}: sparsity dimensions make more than 2 GB")
            continue
        seg, ind = _index_vector(d.ArraySegmentsType(), d.ArraySegments()), \
            _index_vector(d.ArrayIndicesType(), d.ArrayIndices())
        if seg is None or ind is None:
            raise Invalid(f"{tw}: sparse dimension {lv} lacks its segments or indices")
        seg = seg.astype(np.int64)
        if len(seg) != count + 1 or seg[0] != 0 or np.any(np.diff(seg) < 0) or seg[-1] != len(ind):
            raise Invalid(f"{tw}: sparse dimension {lv}: segments {seg[:8].tolist()}... do not split its "
                          f"{len(ind)} indices into {count} rows")
        if len(ind) and (ind.min() < 0 or ind.max() >= dim_size[lv]):
            raise Invalid(f"{tw}: sparse dimension {lv}: an index is outside 0..{dim_size[lv] - 1}")
        count = len(ind)
    if data is not None and len(data) != count * size:
        raise Invalid(f"{tw}: its buffer holds {len(data)} bytes where its sparsity stores {count} values "
                      f"({count * size} bytes)")


def _index_vector(kind, table):
    import tflite
    cls = {tflite.SparseIndexVector.Int32Vector: tflite.Int32Vector,
           tflite.SparseIndexVector.Uint16Vector: tflite.Uint16Vector,
           tflite.SparseIndexVector.Uint8Vector: tflite.Uint8Vector}.get(kind)
    if cls is None or table is None:
        return None
    v = cls()
    v.Init(table.Bytes, table.Pos)
    return v.ValuesAsNumpy() if v.ValuesLength() else np.zeros(0, np.int32)
