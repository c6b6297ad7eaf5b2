"""Load-time folding (nnapi_py/tflite/fold.py): whatever is known when the model is loaded is
computed with numpy then and never reaches NNAPI -- INT32 shape arithmetic, constants with a
zero-sized dimension, float16 and hybrid int8 weights. Each model is compared with LiteRT's
reference kernels."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert) is not installed")
pytest.importorskip("tflite", reason="the tflite parser package is not installed")
from tflite_ref import compare  # noqa: E402

f32, f16, i32, i8 = np.float32, np.float16, np.int32, np.int8
rng = np.random.default_rng(11)


def folded(m):
    return [name for _, name, done in m.mapping if done == "folded at load"]


def test_shape_strided_slice_pack_reshape(tmp_path):
    """SHAPE -> STRIDED_SLICE (shrink) -> PACK with a constant -> RESHAPE: the delegate-era
    'Flatten' pattern that failed with 'STRIDED_SLICE: input 0 has type TENSOR_INT32'."""
    ts = [("x", f32, (2, 3, 4), None), ("s", i32, (3,), None),
          ("b", i32, (1,), np.array([0], i32)), ("e", i32, (1,), np.array([1], i32)),
          ("st", i32, (1,), np.array([1], i32)), ("n", i32, (), None), ("m1", i32, (), np.array(-1, i32)),
          ("shape", i32, (2,), None), ("y", f32, (2, 12), None)]
    ops = [("SHAPE", [0], [1], ("ShapeOptions", {"OutType": 2})),
           ("STRIDED_SLICE", [1, 2, 3, 4], [5], ("StridedSliceOptions", {"ShrinkAxisMask": 1})),
           ("PACK", [5, 6], [7], ("PackOptions", {"ValuesCount": 2, "Axis": 0})),
           ("RESHAPE", [0, 7], [8], None)]
    m = compare(tmp_path, ts, ops, [0], [8], [rng.normal(size=(2, 3, 4)).astype(f32)])
    assert folded(m) == ["SHAPE", "STRIDED_SLICE", "PACK"]


def test_int32_arithmetic_gather_concat_fill_range_cast(tmp_path):
    """Index arithmetic on constants: GATHER of a SHAPE, MUL / ADD / SUB / FLOOR_DIV on int32,
    CONCATENATION, FILL, RANGE, CAST, SLICE; the only NNAPI operations left are the RESHAPE and
    the ADD of the data."""
    ts = [("x", f32, (4, 6), None), ("s", i32, (2,), None), ("i", i32, (1,), np.array([1], i32)),
          ("g", i32, (1,), None), ("two", i32, (1,), np.array([2], i32)), ("h", i32, (1,), None),
          ("m", i32, (1,), None), ("c", i32, (2,), None), ("r", f32, (2, 12), None),
          ("dims", i32, (2,), np.array([2, 12], i32)), ("v", f32, (), np.array(0.5, f32)), ("f", f32, (2, 12), None),
          ("y", f32, (2, 12), None), ("start", i32, (), np.array(0, i32)), ("lim", i32, (), np.array(12, i32)),
          ("d", i32, (), np.array(1, i32)), ("rg", i32, (12,), None), ("rf", f32, (12,), None),
          ("z", f32, (2, 12), None), ("sb", i32, (1,), np.array([0], i32)), ("ss", i32, (1,), np.array([1], i32)),
          ("s0", i32, (1,), None), ("q", i32, (1,), None)]
    ops = [("SHAPE", [0], [1], ("ShapeOptions", {"OutType": 2})),
           ("GATHER", [1, 2], [3], ("GatherOptions", {"Axis": 0})),           # 6
           ("MUL", [3, 4], [5], None),                                         # 12
           ("SLICE", [1, 19, 20], [21], None),                                 # 4
           ("FLOOR_DIV", [21, 4], [22], None),                                 # 2
           ("SUB", [5, 22], [6], None),                                        # 10 (unused below but folded)
           ("CONCATENATION", [22, 5], [7], ("ConcatenationOptions", {"Axis": 0})),   # [2, 12]
           ("RESHAPE", [0, 7], [8], None),
           ("FILL", [9, 10], [11], None),
           ("ADD", [8, 11], [12], None),
           ("RANGE", [13, 14, 15], [16], None), ("CAST", [16], [17], None),
           ("ADD", [12, 17], [18], None)]
    m = compare(tmp_path, ts, ops, [0], [18], [rng.normal(size=(4, 6)).astype(f32)])
    assert sorted(folded(m)) == sorted(["SHAPE", "GATHER", "MUL", "SLICE", "FLOOR_DIV", "SUB", "CONCATENATION",
                                        "FILL", "RANGE", "CAST"])


def test_zero_sized_constant_never_becomes_an_operand(tmp_path):
    """A constant with a 0 dimension (here an empty piece of a concatenation) is dropped instead
    of reaching setOperandValue ('a constant tensor must have fully specified dimensions, got [0]')."""
    ts = [("x", f32, (2, 3), None), ("e", f32, (2, 0), np.zeros((2, 0), f32)), ("y", f32, (2, 3), None),
          ("z", f32, (2, 3), None)]
    compare(tmp_path, ts, [("CONCATENATION", [0, 1], [2], ("ConcatenationOptions", {"Axis": 1})),
                           ("RELU", [2], [3], None)], [0], [3], [rng.normal(size=(2, 3)).astype(f32)],
            "CONCATENATION")


def test_float16_weights_fold_to_float32(tmp_path):
    w = rng.normal(size=(5, 4)).astype(f16)
    ts = [("x", f32, (3, 4), None), ("w16", f16, (5, 4), w), ("w", f32, (5, 4), None), ("b", f32, (5,),
                                                                                           np.zeros(5, f32)),
          ("y", f32, (3, 5), None)]
    m = compare(tmp_path, ts, [("DEQUANTIZE", [1], [2], None), ("FULLY_CONNECTED", [0, 2, 3], [4],
                                                                  ("FullyConnectedOptions", {}))],
                [0], [4], [rng.normal(size=(3, 4)).astype(f32)], "FULLY_CONNECTED")
    assert folded(m) == ["DEQUANTIZE"]


def _hybrid(tmp_path, ts, ops, x):
    """Ours against LiteRT's builtin kernels: LiteRT's hybrid kernels also quantize the float
    input to int8 on the fly (dynamic range quantization), NNAPI's DEQUANTIZE + float operation
    does not (neither does the delegate): they agree within that input rounding, 2% of the
    output range here."""
    import tflite_writer
    import nnapi_py.tflite as T
    path = tflite_writer.write(str(tmp_path / "h.tflite"), ts, ops, [0], [len(ts) - 1])
    m = T.load(path)
    got = m.run([x])[0]
    want = _builtin(path, x)
    assert np.abs(got - want).max() <= 0.02 * np.abs(want).max()
    return m, got


def _builtin(path, x):
    from tflite_ref import interpreter
    it = interpreter(path, builtin=True)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


@pytest.mark.parametrize("per_channel", [False, True])
def test_hybrid_conv_weights_dequantized_by_nnapi(tmp_path, per_channel):
    """int8 weights with float activations (dynamic-range quantization): NNAPI DEQUANTIZE of the
    TENSOR_QUANT8_SYMM(_PER_CHANNEL) constant feeds a float CONV_2D, as the delegate does."""
    wq = rng.integers(-127, 128, (3, 3, 3, 2)).astype(i8)
    q = {"scales": [0.01, 0.02, 0.015], "zero_points": [0, 0, 0], "axis": 0} if per_channel else \
        {"scale": 0.01, "zero_point": 0}
    ts = [("x", f32, (1, 5, 5, 2), None), ("w", i8, (3, 3, 3, 2), wq, q), ("b", f32, (3,), rng.normal(size=3)),
          ("y", f32, (1, 5, 5, 3), None)]
    m, _ = _hybrid(tmp_path, ts, [("CONV_2D", [0, 1, 2], [3], ("Conv2DOptions", {"Padding": 0, "StrideW": 1,
                                                                                  "StrideH": 1}), 5)],
                   rng.normal(size=(1, 5, 5, 2)).astype(f32))
    assert any(done == "DEQUANTIZE + CONV_2D" for _, _, done in m.mapping)


def test_hybrid_fully_connected(tmp_path):
    """Exactly the float product with the dequantized weights; LiteRT within its input rounding."""
    wq = rng.integers(-127, 128, (6, 4)).astype(i8)
    b = rng.normal(size=6).astype(f32)
    ts = [("x", f32, (3, 4), None), ("w", i8, (6, 4), wq, {"scale": 0.02, "zero_point": 0}),
          ("b", f32, (6,), b), ("y", f32, (3, 6), None)]
    x = rng.normal(size=(3, 4)).astype(f32)
    m, got = _hybrid(tmp_path, ts, [("FULLY_CONNECTED", [0, 1, 2], [3], ("FullyConnectedOptions", {}), 3)], x)
    np.testing.assert_allclose(got, x @ (wq.astype(f32) * 0.02).T + b, rtol=1e-5, atol=1e-5)
    assert any(done == "DEQUANTIZE + FULLY_CONNECTED" for _, _, done in m.mapping)
