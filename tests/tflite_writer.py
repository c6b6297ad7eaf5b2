"""Tiny single-subgraph .tflite models for tests, written with the tflite package's generated
flatbuffer builders (the same schema code the importer reads with).

    write(path, tensors=[(name, dtype, shape, data or None), ...],
          ops=[(builtin, inputs, outputs, options or None), ...], inputs=[...], outputs=[...])

options: (OptionsTypeName, {"Field": value}) e.g. ("PackOptions", {"ValuesCount": 2, "Axis": 0}).
"""
import flatbuffers
import numpy as np
import tflite

_TYPES = {np.dtype(np.float32): 0, np.dtype(np.int32): 2, np.dtype(np.uint8): 3, np.dtype(np.bool_): 6,
          np.dtype(np.int8): 9, np.dtype(np.int64): 4}


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
    for name, dtype, shape, data in tensors:
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
    for (name, dtype, shape, data), bi in zip(tensors, tensor_buffer):
        n = b.CreateString(name)
        sh = _vec(b, tflite.TensorStartShapeVector, list(shape), b.PrependInt32)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, sh)
        tflite.TensorAddType(b, _TYPES[np.dtype(dtype)])
        tflite.TensorAddBuffer(b, bi)
        tflite.TensorAddName(b, n)
        tensor_offsets.append(tflite.TensorEnd(b))
    codes = sorted({op[0] for op in ops})
    code_offsets = []
    for c in codes:
        v = getattr(tflite.BuiltinOperator, c)
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddBuiltinCode(b, v)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(v, 127))
        tflite.OperatorCodeAddVersion(b, 1)
        code_offsets.append(tflite.OperatorCodeEnd(b))
    op_offsets = []
    for name, ins, outs, options in ops:
        opt_off, opt_type = None, 0
        if options:
            cls, fields = options
            getattr(tflite, cls + "Start")(b)
            for f, val in fields.items():
                getattr(tflite, f"{cls}Add{f}")(b, val)
            opt_off = getattr(tflite, cls + "End")(b)
            opt_type = getattr(tflite.BuiltinOptions, cls)
        iv = _vec(b, tflite.OperatorStartInputsVector, list(ins), b.PrependInt32)
        ov = _vec(b, tflite.OperatorStartOutputsVector, list(outs), b.PrependInt32)
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, codes.index(name))
        tflite.OperatorAddInputs(b, iv)
        tflite.OperatorAddOutputs(b, ov)
        if opt_off is not None:
            tflite.OperatorAddBuiltinOptionsType(b, opt_type)
            tflite.OperatorAddBuiltinOptions(b, opt_off)
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
