"""A TfliteModel's inputs and outputs as its user sees them, the check of run()'s arrays, and
LoadError's order (issue 26, points 2, 7, 9), on tiny models written with tests/tflite_writer.py."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
pytest.importorskip("tflite", reason="the tflite parser package is not installed")
import tflite_writer  # noqa: E402
import nnapi_py.tflite as T  # noqa: E402
from nnapi_py.tflite import inout  # noqa: E402
from nnapi_py.tflite.model import LoadError  # noqa: E402

f32, i8 = np.float32, np.int8


def add_model(tmp_path):
    return tflite_writer.write(str(tmp_path / "add.tflite"),
                               [("a", f32, (1, 128, 128, 3), None), ("b", f32, (1, 128, 128, 3), None),
                                ("y", f32, (1, 128, 128, 3), None)],
                               [("ADD", [0, 1], [2], None)], [0, 1], [2])


def test_inputs_and_outputs_show_names_shapes_dtypes_quantization(tmp_path):
    """26.9: m.inputs / m.outputs, and the report lists them (quantization too)."""
    m = T.load(add_model(tmp_path))
    assert [repr(i) for i in m.inputs] == ["a: float32[1, 128, 128, 3]", "b: float32[1, 128, 128, 3]"]
    assert m.outputs[0].name == "y" and m.outputs[0].shape == (1, 128, 128, 3) and m.outputs[0].dtype == f32
    assert m.inputs[0].quantization is None
    q = tflite_writer.write(str(tmp_path / "q.tflite"),
                            [("x", i8, (1, 4), None, {"scale": 0.5, "zero_point": -3, "signature": (-1, 4)}),
                             ("y", i8, (1, 4), None, {"scale": 0.5, "zero_point": -3})],
                            [("RELU", [0], [1], None)], [0], [1])
    mq = T.load(q)
    assert mq.inputs[0].quantization == (0.5, -3)
    assert repr(mq.inputs[0]) == "x: int8[-1, 4] (scale 0.5, zero point -3)"
    rep = mq.report()
    assert "x: int8[-1, 4] (scale 0.5, zero point -3)" in rep and "y: int8[1, 4] (scale 0.5, zero point -3)" in rep


def test_run_checks_count_shape_and_dtype(tmp_path):
    """26.2: a run takes exactly one array per input, of its shape and dtype: a missing input is
    an error (never the previous run's values), so are extra inputs, a reshaped array of the
    same size and a lossy dtype; the error names the input."""
    m = T.load(add_model(tmp_path))
    a = np.ones((1, 128, 128, 3), f32)
    m.run([a, a])
    np.testing.assert_array_equal(m.run([a, 2 * a])[0], 3)
    with pytest.raises(ValueError, match=r"0 input\(s\) given, the model takes 2: a: float32\[1, 128, 128, 3\]"):
        m.run([])
    with pytest.raises(ValueError, match="3 input"):
        m.run([a, a, a])
    for shape in ((128, 128, 3), (1, 49152)):
        with pytest.raises(ValueError) as e:
            m.run([a, np.ones(shape, f32)])
        assert str(e.value) == f"input b: float32[1, 128, 128, 3]: an array of shape {list(shape)} was given"
    with pytest.raises(ValueError, match="input a: float32.*float64 values were given"):
        m.run([np.ones((1, 128, 128, 3)), a])
    with pytest.raises(ValueError, match="list of arrays"):
        m.run(a)
    np.testing.assert_array_equal(m.run({"b": a, "a": a})[0], 2)            # by name
    np.testing.assert_array_equal(m.run([a.astype(np.float16), a])[0], 2)   # a lossless cast
    np.testing.assert_array_equal(m.run([3 * a, a])[0], 4)                  # still right after the errors


def test_dynamic_dimension_accepts_any_size():
    info = inout.TensorInfo("x", (1, 4), (-1, 4), np.dtype(f32), "FLOAT32")
    assert len(inout.check_inputs([info], [np.zeros((5, 4), f32)])[0]) == 5
    with pytest.raises(ValueError, match=r"x: float32\[-1, 4\]: an array of shape \[5, 3\] was given \(it does "
                                         r"not fit the shape signature"):
        inout.check_inputs([info], [np.zeros((5, 3), f32)])


def test_load_error_lists_causes_first_and_counts_consequences():
    """26.7: the operators that fail for a reason of their own come first; those that only lack
    an input an earlier one did not produce are one line, counted."""
    unmapped = [(0, "CUSTOM_builtin", "custom operator 'builtin': no NNAPI mapping")] + \
        [(k, "ADD", f"tensor 't{k}' is used before any operator produces it") for k in range(1, 243)] + \
        [(300, "RFFT2D", "no NNAPI operation computes it")]
    text = str(LoadError("/x/m.tflite", unmapped))
    lines = text.splitlines()
    assert lines[0] == "m.tflite: 2 operator(s) cannot run through NNAPI:"
    assert lines[1] == "  operator 0: CUSTOM_builtin: custom operator 'builtin': no NNAPI mapping"
    assert lines[2] == "  operator 300: RFFT2D: no NNAPI operation computes it"
    assert lines[3] == ("  and 242 operator(s) after them that only lack an input those did not produce "
                        "(operators 1-242)")
    assert len(lines) == 4
    assert LoadError.exit_code == 1
