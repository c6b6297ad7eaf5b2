"""The NNAPI delegate's requantize and dequantize insertions (issue 40, point 7), each on a tiny
model written with tests/tflite_writer.py and checked against LiteRT's reference kernels within
the corpus tolerance (nnapi_py/tflite/compare.py: quantized outputs within 1 step, float outputs
within 1e-3 of max(1, max |ref|)):

* MEAN with an output scale / zero point other than its input's: MEAN into an intermediate with
  the input's, then ADD of a zero to requantize (IsMeanWithDifferentInputOutputQuantization,
  AppendRequantize in nnapi_delegate.cc).
* QUANTIZE of a quantized input: DEQUANTIZE + QUANTIZE (Map, kTfLiteBuiltinQuantize: AddDequantize).
* Hybrid CONV_2D / FULLY_CONNECTED (float input, int8 weights): DEQUANTIZE of the weights
  (AddDequantizeOperatorsWhereNeeded).
* SQUARED_DIFFERENCE quantized: SUB into an intermediate of the delegate's scale, then MUL
  (TransformSquaredDifferenceIntoSupportedOps).
* FULLY_CONNECTED with keep_num_dims: an intermediate of the output's quantization, then RESHAPE
  (AddIntermediateOutputTensor + AppendReshape).
And the other side: an operator whose NNAPI operation requires the output's scale / zero point to
be the input's (Android fails it at execution) stays on the CPU, and the report does not call it
delegated."""
import numpy as np
import pytest

pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert) is not installed")
pytest.importorskip("tflite", reason="the tflite parser package is not installed")
import nnapi_py.tflite as T  # noqa: E402
import tflite_writer  # noqa: E402
from tflite_ref import reference  # noqa: E402

i8, u8, i32, f32 = np.int8, np.uint8, np.int32, np.float32
rng = np.random.default_rng(40)


def feed(t):
    name, dtype, shape = t[:3]
    if np.dtype(dtype).kind == "f":
        return rng.normal(size=shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def build(tmp_path, tensors, ops, name="m", level=None):
    produced = {o for op in ops for o in op[2]}
    inputs = [k for k, t in enumerate(tensors) if t[3] is None and k not in produced]
    outputs = [k for k in sorted(produced) if not any(k in op[1] for op in ops)]
    path = tflite_writer.write(str(tmp_path / f"{name}.tflite"), tensors, ops, inputs, outputs)
    feeds = [feed(tensors[k]) for k in inputs]
    return path, feeds, T.load(path, feature_level=level)


def check(tmp_path, tensors, ops, became, steps=1, rtol=1e-3, level=None):
    """Load, run, compare with LiteRT; every operator on NNAPI, operator 0 mapped to `became`
    and reported delegated by the delegate's view."""
    path, feeds, m = build(tmp_path, tensors, ops, level=level)
    got, want = m.run(feeds), reference(path, feeds)
    for g, w in zip(got, want):
        g = g.reshape(w.shape)
        if w.dtype.kind == "f":
            assert np.max(np.abs(g - w)) <= rtol * max(1.0, float(np.max(np.abs(w)))), (g, w)
        else:
            assert np.max(np.abs(g.astype(np.int64) - w)) <= steps, (g, w)
    assert [d.kind for d in m.decisions] == ["nnapi"] * len(ops), m.report()
    assert m.decisions[0].text == became, m.decisions[0].text
    report = m.report()
    assert f"Replacing {len(ops)} out of {len(ops)} node(s) with delegate" in report, report
    return m


Q_IN = {"scale": 0.05, "zero_point": 3}
Q_OUT = {"scale": 0.02, "zero_point": -20}


@pytest.mark.parametrize("dtype", [i8, u8])
@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("out_scale", [0.02, 0.1])
def test_mean_with_another_output_scale_is_requantized(tmp_path, dtype, keep, out_scale):
    """The keyword-spotting case: MEAN over H, W whose output has its own scale / zero point.  The
    intermediate holds the mean to a step of the input's scale (Android's quantized MEAN may be a
    step off TFLite's rounding), which the requantization turns into s_in / s_out output steps:
    within that plus one step of LiteRT (one step when the output's scale is the coarser)."""
    qi = dict(Q_IN, zero_point=3 if dtype == i8 else 131)
    qo = {"scale": out_scale, "zero_point": -20 if dtype == i8 else 108}
    shape = (1, 1, 1, 6) if keep else (1, 6)
    check(tmp_path, [("x", dtype, (1, 5, 7, 6), None, qi), ("axes", i32, (2,), np.array([1, 2], i32)),
                     ("y", dtype, shape, None, qo)],
          [("MEAN", [0, 1], [2], ("ReducerOptions", {"KeepDims": keep}))],
          "MEAN + ADD (requantized to the output's scale, as the delegate does)",
          steps=int(qi["scale"] / out_scale + 1) if out_scale < qi["scale"] else 1)


def test_mean_with_the_input_scale_is_one_operation(tmp_path):
    check(tmp_path, [("x", i8, (1, 5, 7, 6), None, Q_IN), ("axes", i32, (2,), np.array([1, 2], i32)),
                     ("y", i8, (1, 1, 1, 6), None, Q_IN)],
          [("MEAN", [0, 1], [2], ("ReducerOptions", {"KeepDims": True}))], "MEAN")


@pytest.mark.parametrize("src,dst", [(i8, i8), (u8, i8), (i8, u8), (u8, u8)])
def test_quantize_of_a_quantized_input_is_dequantize_then_quantize(tmp_path, src, dst):
    qi = dict(Q_IN, zero_point=3 if src == i8 else 131)
    qo = dict(Q_OUT, zero_point=-20 if dst == i8 else 108)
    check(tmp_path, [("x", src, (2, 8), None, qi), ("y", dst, (2, 8), None, qo)],
          [("QUANTIZE", [0], [1], None)], "DEQUANTIZE + QUANTIZE")


@pytest.mark.parametrize("dtype", [i8, u8])
def test_quantized_squared_difference_has_the_delegates_intermediate_scale(tmp_path, dtype):
    """SUB into an intermediate of scale 2 sqrt(max output) / 254 (the delegate's), then MUL: the
    intermediate rounds the difference, so the result is held to 2% of the output range in real
    terms (what that rounding costs), against LiteRT (int8) or the exact real result (uint8, which
    LiteRT's SQUARED_DIFFERENCE lacks)."""
    qa = {"scale": 0.02, "zero_point": 0 if dtype == i8 else 128}
    qo = {"scale": 0.01, "zero_point": -128 if dtype == i8 else 0}
    path, feeds, m = build(tmp_path, [("a", dtype, (3, 8), None, qa), ("b", dtype, (3, 8), None, qa),
                                      ("y", dtype, (3, 8), None, qo)],
                           [("SQUARED_DIFFERENCE", [0, 1], [2], None)])
    got = m.run(feeds)[0]
    real = lambda v, q: (v.astype(np.float64) - q["zero_point"]) * q["scale"]   # noqa: E731
    if dtype == i8:
        want = real(reference(path, feeds)[0], qo)
    else:
        hi = (255 - qo["zero_point"]) * qo["scale"]
        want = np.minimum((real(feeds[0], qa) - real(feeds[1], qa)) ** 2, hi)
    assert np.max(np.abs(real(got, qo) - want)) <= 0.02 * 255 * qo["scale"], (got, want)
    assert m.decisions[0].text == "SUB + MUL"


def _hybrid(tmp_path, op):
    w = rng.integers(-127, 128, (4, 3, 3, 2) if op == "CONV_2D" else (4, 6)).astype(i8)
    wq = {"scale": 0.03, "zero_point": 0}
    if op == "CONV_2D":
        tensors = [("x", f32, (1, 5, 5, 2), None), ("w", i8, w.shape, w, wq),
                   ("b", f32, (4,), rng.normal(size=4).astype(f32)), ("y", f32, (1, 5, 5, 4), None)]
        ops = [("CONV_2D", [0, 1, 2], [3], ("Conv2DOptions", {"Padding": 0, "StrideW": 1, "StrideH": 1}))]
    else:
        tensors = [("x", f32, (3, 6), None), ("w", i8, w.shape, w, wq),
                   ("b", f32, (4,), rng.normal(size=4).astype(f32)), ("y", f32, (3, 4), None)]
        ops = [("FULLY_CONNECTED", [0, 1, 2], [3], None)]
    return tensors, ops, w * wq["scale"]


@pytest.mark.parametrize("op", ["CONV_2D", "FULLY_CONNECTED"])
def test_hybrid_weights_are_dequantized_by_nnapi(tmp_path, op):
    """Float activations, int8 weights: NNAPI DEQUANTIZE of the weights, then the float operation
    -- exactly the float operation on the dequantized weights (LiteRT on a float copy), and within
    the hybrid tolerance (2e-2) of LiteRT's hybrid kernels, which quantize the input on the fly."""
    tensors, ops, w_float = _hybrid(tmp_path, op)
    path, feeds, m = build(tmp_path, tensors, ops)
    got = m.run(feeds)[0]
    float_copy = list(tensors)
    float_copy[1] = ("w", f32, w_float.shape, w_float.astype(f32))
    fpath = tflite_writer.write(str(tmp_path / "float.tflite"), float_copy, ops, [0], [3])
    exact = reference(fpath, feeds)[0]
    assert np.max(np.abs(got - exact)) <= 1e-3 * max(1.0, float(np.max(np.abs(exact))))
    hybrid = reference(path, feeds)[0]
    assert np.max(np.abs(got - hybrid)) <= 2e-2 * max(1.0, float(np.max(np.abs(hybrid))))
    assert [d.kind for d in m.decisions] == ["nnapi"]
    report = m.report()
    assert "Replacing 1 out of 1 node(s)" in report, report


def test_fully_connected_keep_num_dims_reshapes_an_intermediate(tmp_path):
    w = rng.integers(-127, 128, (4, 6)).astype(i8)
    check(tmp_path, [("x", i8, (2, 3, 6), None, Q_IN), ("w", i8, (4, 6), w, {"scale": 0.03, "zero_point": 0}),
                     ("b", i32, (4,), rng.integers(-50, 50, 4).astype(i32), {"scale": 0.05 * 0.03, "zero_point": 0}),
                     ("y", i8, (2, 3, 4), None, {"scale": 0.2, "zero_point": 5})],
          [("FULLY_CONNECTED", [0, 1, 2], [3], ("FullyConnectedOptions", {"KeepNumDims": True}))],
          "FULLY_CONNECTED + RESHAPE")


# -- operations NNAPI runs only with the input's scale and zero point: on the CPU, and not "delegated" ---------
X = ("x", i8, (1, 4, 4, 2), None, Q_IN)


def _y(shape, q=Q_OUT):
    return ("y", i8, shape, None, q)


SAME_QUANT_CASES = {
    "RELU": ([X, _y((1, 4, 4, 2))], [("RELU", [0], [1], None)]),
    "RELU6": ([X, _y((1, 4, 4, 2))], [("RELU6", [0], [1], None)]),
    "MAX_POOL_2D": ([X, _y((1, 2, 2, 2))], [("MAX_POOL_2D", [0], [1], ("Pool2DOptions", {
        "Padding": 1, "StrideW": 2, "StrideH": 2, "FilterWidth": 2, "FilterHeight": 2}))]),
    "AVERAGE_POOL_2D": ([X, _y((1, 2, 2, 2))], [("AVERAGE_POOL_2D", [0], [1], ("Pool2DOptions", {
        "Padding": 1, "StrideW": 2, "StrideH": 2, "FilterWidth": 2, "FilterHeight": 2}))]),
    "RESIZE_BILINEAR": ([X, ("size", i32, (2,), np.array([8, 8], i32)), _y((1, 8, 8, 2))],
                        [("RESIZE_BILINEAR", [0, 1], [2], None)]),
    "RESHAPE": ([X, ("shape", i32, (2,), np.array([16, 2], i32)), _y((16, 2))], [("RESHAPE", [0, 1], [2], None)]),
    "TRANSPOSE": ([X, ("perm", i32, (4,), np.array([0, 2, 1, 3], i32)), _y((1, 4, 4, 2))],
                  [("TRANSPOSE", [0, 1], [2], None)]),
    "GATHER": ([X, ("ix", i32, (2,), np.array([1, 0], i32)), _y((1, 4, 4, 2))],
               [("GATHER", [0, 1], [2], ("GatherOptions", {"Axis": 3}))]),
    "SPLIT": ([("axis", i32, (), np.array(3, i32)), X, _y((1, 4, 4, 1)), ("z", i8, (1, 4, 4, 1), None, Q_OUT)],
              [("SPLIT", [0, 1], [2, 3], ("SplitOptions", {"NumSplits": 2}))]),
}


@pytest.mark.parametrize("builtin", sorted(SAME_QUANT_CASES))
def test_an_output_of_another_scale_where_nnapi_needs_the_inputs_stays_on_the_cpu(tmp_path, builtin):
    """Android fails these at execution ("output 0 must have the scale and zeroPoint of input 0"):
    they run on TFLite's CPU kernels, with LiteRT's result, and neither our partitions nor the
    delegate's view count them as delegated (before, --check called them delegated and the run
    failed)."""
    tensors, ops = SAME_QUANT_CASES[builtin]
    path, feeds, m = build(tmp_path, tensors, ops)
    for g, w in zip(m.run(feeds), reference(path, feeds)):
        np.testing.assert_array_equal(g.reshape(w.shape), w)
    d = m.decisions[0]
    assert d.kind == "cpu" and "another scale / zero point than its input" in d.text \
        and "Android fail it at execution" in d.text, d
    report = m.report()
    assert "Replacing" not in report or "Replacing 0 out of" in report, report
    same = [t[:4] + (Q_IN,) if t[0] in ("y", "z") else t for t in tensors]
    _, _, m2 = build(tmp_path, same, ops, name="same")
    assert m2.decisions[0].kind == "nnapi", m2.report()
