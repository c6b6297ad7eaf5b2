"""The TFLite delegate's lowerings and load-time folding, each on a tiny model written with the
schema's builders (tests/tflite_writer.py) and compared with LiteRT's reference kernels."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
litert = pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert) is not installed")
pytest.importorskip("tflite", reason="the tflite parser package is not installed")
import tflite_writer  # noqa: E402
import nnapi_py.tflite as T  # noqa: E402

f32, i32 = np.float32, np.int32
rng = np.random.default_rng(3)


def check(tmp_path, tensors, ops, inputs, outputs, feeds, expect=None, level=None):
    path = tflite_writer.write(str(tmp_path / "m.tflite"), tensors, ops, inputs, outputs)
    m = T.load(path, feature_level=level)
    got = m.run(feeds)
    ref = litert.Interpreter(model_path=path, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    ref.allocate_tensors()
    for d, x in zip(ref.get_input_details(), feeds):
        ref.set_tensor(d["index"], x)
    ref.invoke()
    for d, g in zip(ref.get_output_details(), got):
        want = ref.get_tensor(d["index"])
        np.testing.assert_allclose(g.reshape(want.shape), want, rtol=1e-6, atol=1e-6)
    off = [x for x in m.mapping if str(x[2]).startswith(("CPU", "unmapped"))]
    assert not off, off                          # every operator on NNAPI (or folded)
    if expect:
        assert expect in m.report(), m.report()
    return m


def test_squared_difference_is_sub_then_mul(tmp_path):
    check(tmp_path, [("a", f32, (2, 3), None), ("b", f32, (2, 3), None), ("y", f32, (2, 3), None)],
          [("SQUARED_DIFFERENCE", [0, 1], [2], None)], [0, 1], [2],
          [rng.normal(size=(2, 3)).astype(f32), rng.normal(size=(2, 3)).astype(f32)], "SUB + MUL")


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_pack_is_reshape_and_concatenation(tmp_path, axis):
    """Below feature level 6 (no NNAPI PACK), as the delegate lowers it."""
    out = [2, 3]
    out.insert(axis, 2)
    check(tmp_path, [("a", f32, (2, 3), None), ("b", f32, (2, 3), None), ("y", f32, tuple(out), None)],
          [("PACK", [0, 1], [2], ("PackOptions", {"ValuesCount": 2, "Axis": axis}))], [0, 1], [2],
          [rng.normal(size=(2, 3)).astype(f32), rng.normal(size=(2, 3)).astype(f32)], "CONCATENATION", level=5)


def test_unpack_is_split_and_reshape(tmp_path):
    check(tmp_path, [("x", f32, (3, 4), None), ("a", f32, (4,), None), ("b", f32, (4,), None), ("c", f32, (4,), None)],
          [("UNPACK", [0], [1, 2, 3], ("UnpackOptions", {"Num": 3, "Axis": 0}))], [0], [1, 2, 3],
          [rng.normal(size=(3, 4)).astype(f32)], "SPLIT + RESHAPE")


def test_select_v2_broadcasts(tmp_path):
    check(tmp_path, [("c", np.bool_, (2, 3), None), ("a", f32, (1, 3), None), ("b", f32, (2, 3), None),
                     ("y", f32, (2, 3), None)],
          [("SELECT_V2", [0, 1, 2], [3], None)], [0, 1, 2], [3],
          [rng.random((2, 3)) > 0.5, rng.normal(size=(1, 3)).astype(f32), rng.normal(size=(2, 3)).astype(f32)],
          "SELECT")


def test_shape_and_range_fold_at_load(tmp_path):
    m = check(tmp_path, [("x", f32, (2, 5), None), ("s", i32, (2,), None), ("y", f32, (2, 5), None),
                         ("start", i32, (), [0]), ("limit", i32, (), [5]), ("delta", i32, (), [1]),
                         ("r", i32, (5,), None), ("rf", f32, (5,), None), ("z", f32, (2, 5), None)],
              [("SHAPE", [0], [1], ("ShapeOptions", {"OutType": 2})), ("RESHAPE", [0, 1], [2], None), ("RANGE", [3, 4, 5], [6], None),
               ("CAST", [6], [7], None), ("ADD", [2, 7], [8], None)], [0], [8],
              [rng.normal(size=(2, 5)).astype(f32)])
    rep = m.report()
    assert rep.count("folded at load") >= 2, rep


def test_leaky_relu_is_prelu(tmp_path):
    check(tmp_path, [("x", f32, (6,), None), ("y", f32, (6,), None)],
          [("LEAKY_RELU", [0], [1], ("LeakyReluOptions", {"Alpha": 0.2}))], [0], [1],
          [rng.normal(size=(6,)).astype(f32)], "PRELU")


def test_run_reuses_one_execution_without_touching_the_callers_arrays(tmp_path):
    """TfliteModel.run binds its pair of reusable executions on the first two calls and copies
    values in afterwards: results stay right and the caller's first input array is never
    written."""
    path = tflite_writer.write(str(tmp_path / "add.tflite"),
                               [("a", f32, (2, 3), None), ("b", f32, (2, 3), None), ("y", f32, (2, 3), None)],
                               [("ADD", [0, 1], [2], None)], [0, 1], [2])
    m = T.load(path)
    a1, b1 = np.ones((2, 3), f32), np.full((2, 3), 2, f32)
    keep = a1.copy()
    np.testing.assert_array_equal(m.run([a1, b1])[0], 3)
    for k in range(3):
        np.testing.assert_array_equal(m.run([np.full((2, 3), k, f32), np.full((2, 3), 10, f32)])[0], k + 10)
    np.testing.assert_array_equal(a1, keep)
    assert m._pair not in (None, False) and m._pair.bound == [True, True]


def test_custom_operators_are_named_by_their_code_each_with_its_own_reason(tmp_path):
    """Issue 40, point 5: a custom operator is named by its custom_code (not "no NNAPI mapping for this
    builtin"), and each one's message is its own: LiteRT's error about one custom operator is never
    quoted for another; an operator LiteRT could run says which of its CPU partition's it cannot."""
    t = [("x", f32, (2, 3), None), ("a", f32, (2, 3), None), ("b", f32, (2, 3), None), ("c", f32, (2, 3), None)]
    path = tflite_writer.write(str(tmp_path / "custom.tflite"), t,
                               [("CUSTOM:FooA", [0], [1], b""), ("CUSTOM:BarB", [1], [2], b""),
                                ("FLOOR_MOD", [2, 2], [3], None)], [0], [3])
    with pytest.raises(T.LoadError) as e:
        T.load(path)
    lines = str(e.value).splitlines()
    assert len(lines) == 4, lines
    assert "custom operator 'FooA'" in lines[1] and "unresolved custom op: FooA" in lines[1] and "BarB" not in lines[1]
    assert "custom operator 'BarB'" in lines[2] and "unresolved custom op: BarB" in lines[2] and "FooA" not in lines[2]
    assert "FLOOR_MOD" in lines[3] and "operator(s) 0, 1 that LiteRT cannot run" in lines[3], lines[3]
    assert "no NNAPI mapping for this builtin" not in lines[1] + lines[2]
    m = T.load(path, check_only=True)
    assert "custom operator 'FooA': NNAPI has no operation for it" in m.report()


def test_an_output_listed_twice_or_an_input_as_output_gets_a_copy(tmp_path):
    """NNAPI lists an operand once among a model's inputs and outputs: a TFLite output listed twice,
    or a model input that is also an output, is copied (RESHAPE to its own shape) before it is an
    output, instead of failing identifyInputsAndOutputs."""
    path = tflite_writer.write(str(tmp_path / "dup.tflite"), [("x", f32, (2, 3), None), ("a", f32, (2, 3), None)],
                               [("RELU", [0], [1], None)], [0], [1, 1, 0])
    x = np.arange(6, dtype=f32).reshape(2, 3) - 3
    a, b, c = T.load(path).run([x])
    np.testing.assert_array_equal(a, np.maximum(x, 0))
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(c, x)
