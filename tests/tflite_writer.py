"""Tiny single-subgraph .tflite models for tests, written with the tflite package's generated
flatbuffer builders (the same schema code the importer reads with).

    write(path, tensors=[(name, dtype, shape, data or None), ...],
          ops=[(builtin, inputs, outputs, options or None), ...], inputs=[...], outputs=[...])

options: (OptionsTypeName, {"Field": value}) e.g. ("PackOptions", {"ValuesCount": 2, "Axis": 0});
a list value is written as a vector field (("SqueezeOptions", {"SqueezeDims": [1]})).
A tensor may carry a fifth item, a dict: "scale" / "zero_point" (per-tensor quantization),
"scales" + "axis" (per-channel), "variable" (is_variable), "signature" (shape_signature).
An op may carry a fifth item, its version; a CUSTOM op is ("CUSTOM:<code>", ins, outs, custom_options bytes).
"""
import flatbuffers
import numpy as np
import tflite

_TYPES = {np.dtype(np.float32): 0, np.dtype(np.int32): 2, np.dtype(np.uint8): 3, np.dtype(np.bool_): 6,
          np.dtype(np.int8): 9, np.dtype(np.int64): 4, np.dtype(np.float16): 1, np.dtype(np.int16): 7,
          np.dtype(np.complex64): 8}


def _extra(t):
    return t[4] if len(t) > 4 and t[4] else {}


def _quantization(b, extra):
    if "scale" not in extra and "scales" not in extra:
        return None
    scales = list(extra.get("scales", [extra.get("scale")]))
    zps = list(extra.get("zero_points", [extra.get("zero_point", 0)] * len(scales)))
    sv = _vec(b, tflite.QuantizationParametersStartScaleVector, [float(x) for x in scales], b.PrependFloat32)
    zv = _vec(b, tflite.QuantizationParametersStartZeroPointVector, [int(z) for z in zps], b.PrependInt64)
    tflite.QuantizationParametersStart(b)
    tflite.QuantizationParametersAddScale(b, sv)
    tflite.QuantizationParametersAddZeroPoint(b, zv)
    tflite.QuantizationParametersAddQuantizedDimension(b, int(extra.get("axis", 0)))
    return tflite.QuantizationParametersEnd(b)


def _vec(b, start, items, add):
    start(b, len(items))
    for x in reversed(items):
        add(x)
    return b.EndVector()


def write(path, tensors, ops, inputs, outputs):
    b = flatbuffers.Builder(1024)
    # buffers: 0 is the empty sentinel; constants get their own
    buf_offsets, tensor_buffer = [], []
    tflite.BufferStart(b)
    buf_offsets.append(tflite.BufferEnd(b))
    for name, dtype, shape, data, *_ in tensors:
        if data is None:
            tensor_buffer.append(0)
            continue
        raw = np.ascontiguousarray(np.asarray(data, dtype)).tobytes()
        b.StartVector(1, len(raw), 16)
        for byte in reversed(raw):
            b.PrependByte(byte)
        vec = b.EndVector()
        tflite.BufferStart(b)
        tflite.BufferAddData(b, vec)
        buf_offsets.append(tflite.BufferEnd(b))
        tensor_buffer.append(len(buf_offsets) - 1)
    tensor_offsets = []
    for t, bi in zip(tensors, tensor_buffer):
        name, dtype, shape = t[:3]
        extra = _extra(t)
        n = b.CreateString(name)
        sh = _vec(b, tflite.TensorStartShapeVector, list(shape), b.PrependInt32)
        sig = (_vec(b, tflite.TensorStartShapeSignatureVector, list(extra["signature"]), b.PrependInt32)
               if "signature" in extra else None)
        q = _quantization(b, extra)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, sh)
        if sig is not None:
            tflite.TensorAddShapeSignature(b, sig)
        if q is not None:
            tflite.TensorAddQuantization(b, q)
        if extra.get("variable"):
            tflite.TensorAddIsVariable(b, True)
        tflite.TensorAddType(b, _TYPES[np.dtype(dtype)])
        tflite.TensorAddBuffer(b, bi)
        tflite.TensorAddName(b, n)
        tensor_offsets.append(tflite.TensorEnd(b))
    codes = sorted({(op[0], op[4] if len(op) > 4 else 1) for op in ops})
    code_offsets = []
    for c, version in codes:
        custom = b.CreateString(c.split(":", 1)[1]) if c.startswith("CUSTOM:") else None
        v = tflite.BuiltinOperator.CUSTOM if custom is not None else getattr(tflite.BuiltinOperator, c)
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddBuiltinCode(b, v)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(v, 127))
        tflite.OperatorCodeAddVersion(b, version)
        if custom is not None:
            tflite.OperatorCodeAddCustomCode(b, custom)
        code_offsets.append(tflite.OperatorCodeEnd(b))
    op_offsets = []
    for op in ops:
        name, ins, outs, options = op[:4]
        opt_off, opt_type, custom_off = None, 0, None
        if name.startswith("CUSTOM:"):
            raw = bytes(options or b"")
            custom_off = _vec(b, tflite.OperatorStartCustomOptionsVector, list(raw), b.PrependUint8)
        elif options:
            cls, fields = options
            vectors = {f: _vec(b, getattr(tflite, f"{cls}Start{f}Vector"), list(val), b.PrependInt32)
                       for f, val in fields.items() if isinstance(val, (list, tuple))}
            getattr(tflite, cls + "Start")(b)
            for f, val in fields.items():
                getattr(tflite, f"{cls}Add{f}")(b, vectors.get(f, val))
            opt_off = getattr(tflite, cls + "End")(b)
            opt_type = getattr(tflite.BuiltinOptions, cls)
        iv = _vec(b, tflite.OperatorStartInputsVector, list(ins), b.PrependInt32)
        ov = _vec(b, tflite.OperatorStartOutputsVector, list(outs), b.PrependInt32)
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, codes.index((name, op[4] if len(op) > 4 else 1)))
        tflite.OperatorAddInputs(b, iv)
        tflite.OperatorAddOutputs(b, ov)
        if opt_off is not None:
            tflite.OperatorAddBuiltinOptionsType(b, opt_type)
            tflite.OperatorAddBuiltinOptions(b, opt_off)
        if custom_off is not None:
            tflite.OperatorAddCustomOptions(b, custom_off)
        op_offsets.append(tflite.OperatorEnd(b))
    tv = _vec(b, tflite.SubGraphStartTensorsVector, tensor_offsets, b.PrependUOffsetTRelative)
    ov = _vec(b, tflite.SubGraphStartOperatorsVector, op_offsets, b.PrependUOffsetTRelative)
    iv = _vec(b, tflite.SubGraphStartInputsVector, list(inputs), b.PrependInt32)
    outv = _vec(b, tflite.SubGraphStartOutputsVector, list(outputs), b.PrependInt32)
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tv)
    tflite.SubGraphAddOperators(b, ov)
    tflite.SubGraphAddInputs(b, iv)
    tflite.SubGraphAddOutputs(b, outv)
    sg = tflite.SubGraphEnd(b)
    sgv = _vec(b, tflite.ModelStartSubgraphsVector, [sg], b.PrependUOffsetTRelative)
    cv = _vec(b, tflite.ModelStartOperatorCodesVector, code_offsets, b.PrependUOffsetTRelative)
    bv = _vec(b, tflite.ModelStartBuffersVector, buf_offsets, b.PrependUOffsetTRelative)
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, cv)
    tflite.ModelAddSubgraphs(b, sgv)
    tflite.ModelAddBuffers(b, bv)
    b.Finish(tflite.ModelEnd(b), b"TFL3")
    with open(path, "wb") as f:
        f.write(b.Output())
    return path


def with_subgraphs(path, main, *subgraphs):
    """A model of several subgraphs (IF / WHILE bodies): main and each of subgraphs are dicts of
    write()'s arguments (tensors, ops, inputs, outputs, optional "name"); subgraph k of the
    model is subgraphs[k - 1].  Each is written by write(), then the subgraphs are merged with
    the schema's object API (LiteRT's generated ModelT): operator codes and buffers shared."""
    import tempfile

    parts = []
    with tempfile.TemporaryDirectory() as d:
        for k, g in enumerate((main, *subgraphs)):
            p = write(f"{d}/g{k}.tflite", g["tensors"], g["ops"], g["inputs"], g["outputs"])
            parts.append((read_object(p), g.get("name", f"g{k}")))
    model = parts[0][0]
    model.subgraphs[0].name = parts[0][1]
    codes = [(c.builtinCode, c.customCode, c.version) for c in model.operatorCodes]
    for m, name in parts[1:]:
        base = len(model.buffers) - 1               # buffer 0 is the shared empty one
        model.buffers.extend(m.buffers[1:])
        g = m.subgraphs[0]
        g.name = name
        for t in g.tensors:
            t.buffer = t.buffer + base if t.buffer else 0
        for op in g.operators or []:
            c = m.operatorCodes[op.opcodeIndex]
            key = (c.builtinCode, c.customCode, c.version)
            if key not in codes:
                codes.append(key)
                model.operatorCodes.append(c)
            op.opcodeIndex = codes.index(key)
        model.subgraphs.append(g)
    return write_object(model, path)


def read_object(path):
    """The model at `path` in the schema's object API (LiteRT's generated ModelT)."""
    from ai_edge_litert import schema_py_generated as S
    return S.ModelT.InitFromPackedBuf(bytearray(open(path, "rb").read()), 0)


def write_object(model, path):
    """Write a ModelT (the schema's object API) to `path` as a .tflite file; returns path."""
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), b"TFL3")
    with open(path, "wb") as f:
        f.write(b.Output())
    return path


def binary(path, op="ADD", shape=(1, 8, 8, 3), dtype=np.float32):
    """A model of one two-input operator without options: y = op(a, b), all three of `shape`."""
    tensors = [(name, dtype, tuple(shape), None) for name in "aby"]
    return write(path, tensors, [(op, [0, 1], [2], None)], [0, 1], [2])
