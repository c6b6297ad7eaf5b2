"""Constant work once (issue 41, nnapi_py/plan.py _ConstantFolds): an operation whose inputs are
all constants, or results of such operations, is computed at compilation by the kernel the plan
would run, and its results kept as constants.  Checked here: the same bits as the unfolded plan,
chains and partial graphs, model outputs still written on every computation, the memory bound,
errors still raised at execution, NNAPI_PY_STRICT=1, float16 partitions, dynamic shapes, the
compilation cache, the profile's report, and the Python API and .tflite importer paths (the C API
path: ctests/test_constant_fold.c)."""
import os

import numpy as np
import pytest

import nnapi_py as nn
from nnapi_py import plan as P
from nnapi_py import constants as C
from nnapi_py import devices

RNG = np.random.default_rng(41)


@pytest.fixture
def plans(monkeypatch):
    """Every Plan made, in order (compilations and the plans of IF / WHILE models)."""
    made = []
    orig = P.Plan.__init__

    def spy(self, *a, **k):
        orig(self, *a, **k)
        made.append(self)
    monkeypatch.setattr(P.Plan, "__init__", spy)
    return made


@pytest.fixture
def unfolded(monkeypatch):
    """Call unfolded() to compile with constant folding off from then on (the reference plan)."""
    def off():
        monkeypatch.setattr(P._ConstantFolds, "try_fold", lambda self, node, kernel, shapes: None)
    return off


def _names(plan):
    return [nd.name for nd in plan.nodes]


def _hybrid_fc(m, x, w, scales, bias=None):
    """DEQUANTIZE of a constant per-channel int8 filter, then FULLY_CONNECTED: the delegate's
    lowering of a hybrid layer."""
    wq = m.constant(w, nn.quant8_symm_per_channel(scales, 0))
    wf = m.op("DEQUANTIZE", wq, outputs=[(nn.float32, w.shape)])
    b = np.zeros(w.shape[0], np.float32) if bias is None else bias
    return m.op("FULLY_CONNECTED", x, wf, b, 0, outputs=[(nn.float32, (x.dims[0], w.shape[0]))])


def _weights(rows, cols):
    w = RNG.integers(-127, 128, (rows, cols)).astype(np.int8)
    s = (RNG.uniform(0.5, 2, rows) / 127).astype(np.float32)
    return w, s


def _hybrid_model(w, s, rows=2):
    m = nn.Model()
    x = m.input("x", nn.float32, (rows, w.shape[1]))
    m.output(_hybrid_fc(m, x, w, s), "y")
    return m


def test_hybrid_layer_dequantized_once_same_bits(plans, unfolded):
    w, s = _weights(48, 64)
    x = RNG.standard_normal((2, 64)).astype(np.float32)
    c = _hybrid_model(w, s).compile()
    folded = plans[-1]
    assert _names(folded) == ["FULLY_CONNECTED"]
    assert folded.constant_folds["operations"] == 1
    assert folded.constant_folds["by_type"] == {"DEQUANTIZE": 1}
    assert folded.constant_folds["bytes"] == w.size * 4
    y = [c.run({"x": x})["y"] for _ in range(3)]
    unfolded()
    y0 = _hybrid_model(w, s).compile().run({"x": x})["y"]
    assert _names(plans[-1]) == ["DEQUANTIZE", "FULLY_CONNECTED"]
    for v in y:
        np.testing.assert_array_equal(v, y0)
    ref = x.astype(np.float64) @ (w * s[:, None].astype(np.float64)).T
    np.testing.assert_allclose(y[0], ref, rtol=1e-4, atol=1e-4)


def test_chain_of_constant_operations_and_a_partial_graph(plans, unfolded):
    """DEQUANTIZE -> TRANSPOSE -> MUL by a constant -> the filter of FULLY_CONNECTED: the three
    constant operations folded, the rest (reading the model input) kept; the chain's
    intermediates are released (only the last result is kept)."""
    def build():
        m = nn.Model()
        x = m.input("x", nn.float32, (3, 16))
        w = RNG.integers(-127, 128, (16, 24)).astype(np.int8) if not hasattr(build, "w") else build.w
        build.w = w
        d = m.op("DEQUANTIZE", m.constant(w, nn.quant8_symm(0.03)), outputs=[(nn.float32, (16, 24))])
        t = m.op("TRANSPOSE", d, np.array([1, 0], np.int32), outputs=[(nn.float32, (24, 16))])
        g = m.op("MUL", t, np.full((24, 16), 0.5, np.float32), 0)
        fc = m.op("FULLY_CONNECTED", x, g, np.arange(24, dtype=np.float32), 0, outputs=[(nn.float32, (3, 24))])
        m.output(m.op("ADD", fc, m.op("RELU", fc), 0), "y")
        return m
    x = RNG.standard_normal((3, 16)).astype(np.float32)
    y = build().compile().run({"x": x})["y"]
    p = plans[-1]
    assert p.constant_folds["by_type"] == {"DEQUANTIZE": 1, "TRANSPOSE": 1, "MUL": 1}
    assert p.constant_folds["bytes"] == 24 * 16 * 4            # the intermediates released
    assert "DEQUANTIZE" not in _names(p) and "FULLY_CONNECTED" in _names(p)
    unfolded()
    np.testing.assert_array_equal(y, build().compile().run({"x": x})["y"])


def test_model_output_computed_from_constants_is_written_every_run(plans):
    """A model output that depends only on constants: its operation still runs on every
    computation (it writes the caller's buffer); what feeds it is folded."""
    m = nn.Model()
    x = m.input("x", nn.float32, (4,))
    c = m.op("MUL", np.arange(4, dtype=np.float32), np.full(4, 3, np.float32), 0, outputs=[(nn.float32, (4,))])
    k = m.op("ADD", c, np.ones(4, np.float32), 0)                  # a model output
    m.output(k, "k")
    m.output(m.op("ADD", x, c, 0), "y")
    comp = m.compile()
    p = plans[-1]
    assert p.constant_folds["by_type"] == {"MUL": 1}
    assert sorted(_names(p)) == ["ADD", "ADD"]
    buf = {"k": np.full(4, np.nan, np.float32), "y": np.full(4, np.nan, np.float32)}
    for _ in range(2):
        buf["k"][...] = -7
        comp.run({"x": np.ones(4, np.float32)}, outputs=buf)
        np.testing.assert_array_equal(buf["k"], np.arange(4) * 3 + 1)
        np.testing.assert_array_equal(buf["y"], np.arange(4) * 3 + 1)


def test_memory_bound(plans, unfolded, monkeypatch):
    """The folded results kept stay within max(FOLD_FACTOR x the model's constant bytes,
    FOLD_FLOOR): a TILE of a small constant past it is not folded (it runs every time, with the
    same result), and the report says so."""
    def build():
        m = nn.Model()
        x = m.input("x", nn.float32, (64, 64))
        t = m.op("TILE", np.arange(64, dtype=np.float32).reshape(1, 64), np.array([64, 1], np.int32),
                 outputs=[(nn.float32, (64, 64))])
        m.output(m.op("ADD", x, t, 0), "y")
        return m
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    y = build().compile().run({"x": x})["y"]                      # 16 KB: under the floor, folded
    assert plans[-1].constant_folds["by_type"] == {"TILE": 1}
    monkeypatch.setattr(P, "FOLD_FLOOR", 0)                       # 4 x (256 + 8 bytes) < 16 KB
    y1 = build().compile().run({"x": x})["y"]
    f = plans[-1].constant_folds
    assert f["operations"] == 0 and f["not_folded_memory"] == 1 and f["budget"] == 4 * (64 * 4 + 8)
    assert "TILE" in _names(plans[-1])
    monkeypatch.setattr(P, "FOLD_FACTOR", 64)                     # 64 x 264 bytes >= 16 KB: folded
    y2 = build().compile().run({"x": x})["y"]
    assert plans[-1].constant_folds["by_type"] == {"TILE": 1}
    np.testing.assert_array_equal(y, y1)
    np.testing.assert_array_equal(y, y2)
    np.testing.assert_array_equal(y, x + np.arange(64, dtype=np.float32))


def test_bound_counts_only_what_is_kept(plans, monkeypatch):
    """A chain whose intermediates are each as large as the bound allows still folds whole:
    an intermediate read only by the next folded operation is released."""
    m = nn.Model()
    x = m.input("x", nn.float32, (256,))
    v = np.arange(256, dtype=np.float32)
    a = v
    for _ in range(5):
        a = m.op("MUL", a, np.float32(1.5) * np.ones(256, np.float32), 0, outputs=[(nn.float32, (256,))])
    m.output(m.op("ADD", x, a, 0), "y")
    # constants: 6 x 1 KB; bound 1.2 x that: one 1 KB result at a time fits, two would not
    monkeypatch.setattr(P, "FOLD_FLOOR", 0)
    monkeypatch.setattr(P, "FOLD_FACTOR", 0.2)
    y = m.compile().run({"x": np.zeros(256, np.float32)})["y"]
    f = plans[-1].constant_folds
    assert f["by_type"] == {"MUL": 5} and f["not_folded_memory"] == 0
    np.testing.assert_array_equal(y, v * np.float32(1.5) * np.float32(1.5) * np.float32(1.5) * np.float32(1.5)
                                  * np.float32(1.5))


@pytest.mark.parametrize("strict", ["", "1"])
def test_errors_stay_at_execution(plans, monkeypatch, strict):
    """GATHER with indices computed from constants, one out of range: unfolded, the indices are
    known only at execution, where the computation fails (OP_FAILED); folded, the same -- the
    compilation succeeds in both modes (NNAPI_PY_STRICT=1 too: only the fold told us)."""
    monkeypatch.setenv("NNAPI_PY_STRICT", strict)
    m = nn.Model()
    x = m.input("x", nn.float32, (5, 3))
    idx = m.op("ADD", np.array([0, 2, 4], np.int32), np.array([1, 1, 1], np.int32), 0,
               outputs=[(nn.int32, (3,))])      # [1, 3, 5]
    m.output(m.op("GATHER", x, 0, idx, outputs=[(nn.float32, (3, 3))]), "y")
    comp = m.compile()
    assert plans[-1].constant_folds["by_type"] == {"ADD": 1}
    with pytest.raises(nn.NNAPIError) as e:
        comp.run({"x": np.zeros((5, 3), np.float32)})
    assert e.value.code == C.OP_FAILED and "out of range" in str(e.value)


def test_a_fold_whose_computation_fails_is_left_to_run(plans, monkeypatch):
    """A kernel failing on its constant inputs: not folded; the computation fails at
    execution with the kernel's own error, every time."""
    from nnapi_py.errors import NNError
    from nnapi_py.ops import registry
    floor = next(op for op in registry.OPS.values() if op.name == "FLOOR")
    calls = []

    def build(ins, outs):
        def k(i, o):
            calls.append(1)
            raise NNError(C.OP_FAILED, "FLOOR: failing on purpose")
        return k
    monkeypatch.setattr(floor, "build", build)
    m = nn.Model()
    x = m.input("x", nn.float32, (3,))
    f = m.op("FLOOR", m.op("MUL", np.ones(3, np.float32), np.ones(3, np.float32), 0, outputs=[(nn.float32, (3,))]))
    m.output(m.op("ADD", x, f, 0), "y")
    comp = m.compile()
    p = plans[-1]
    assert p.constant_folds["by_type"] == {"MUL": 1} and p.constant_folds["not_folded_failed"] == 1
    assert "FLOOR" in _names(p) and calls == [1]
    for _ in range(2):
        with pytest.raises(nn.NNAPIError, match="failing on purpose"):
            comp.run({"x": np.zeros(3, np.float32)})
    assert len(calls) == 3


def test_strict_mode_folds_with_the_same_bits(plans, unfolded, monkeypatch):
    monkeypatch.setenv("NNAPI_PY_STRICT", "1")
    w, s = _weights(10, 20)
    x = RNG.standard_normal((2, 20)).astype(np.float32)
    y = _hybrid_model(w, s).compile().run({"x": x})["y"]
    assert plans[-1].constant_folds["by_type"] == {"DEQUANTIZE": 1}
    unfolded()
    np.testing.assert_array_equal(y, _hybrid_model(w, s).compile().run({"x": x})["y"])


def test_never_folded_random_and_control_flow(plans):
    """RANDOM_MULTINOMIAL (a draw per computation) and IF are not folded, even on constants."""
    m = nn.Model()
    x = m.input("x", nn.float32, (1,))
    logits = m.op("MUL", np.array([[0.5, 0.1, 2.0]], np.float32), np.ones((1, 3), np.float32), 0,
                  outputs=[(nn.float32, (1, 3))])
    r = m.op("RANDOM_MULTINOMIAL", logits, 4, np.array([7, 9], np.int32), outputs=[(nn.int32, (1, 4))])
    m.output(m.op("ADD", x, x, 0), "y")
    m.output(m.op("CAST", r, outputs=[(nn.float32, (1, 4))]), "r")
    m.compile()
    p = plans[-1]
    assert p.constant_folds["by_type"] == {"MUL": 1}
    assert "RANDOM_MULTINOMIAL" in _names(p)


def test_dynamic_shapes_and_shapes_made_known(plans, unfolded):
    """A folded branch in a plan whose input shape is known only at execution; and a RESHAPE
    whose target shape is computed from constants, known at compilation once folded (a
    static plan instead of a dynamic one), with the same results."""
    def build():
        m = nn.Model()
        x = m.input("x", nn.float32, (0, 6))
        shape = m.op("ADD", np.array([-1, 2], np.int32), np.array([0, 1], np.int32), 0, outputs=[(nn.int32, (2,))])   # [-1, 3]
        r = m.op("RESHAPE", x, shape, outputs=[(nn.float32, (0, 0))])
        m.output(m.op("MUL", r, m.op("DEQUANTIZE", m.constant(np.array([[2, -3, 4]], np.int8), nn.quant8_symm(0.5)),
                                     outputs=[(nn.float32, (1, 3))]), 0), "y")
        return m
    comp = build().compile()
    p = plans[-1]
    assert p.constant_folds["by_type"] == {"ADD": 1, "DEQUANTIZE": 1} and not p.static
    unfolded()
    ref = build().compile()
    for rows in (1, 4):
        x = RNG.standard_normal((rows, 6)).astype(np.float32)
        y = comp.run({"x": x})["y"]
        np.testing.assert_array_equal(y, ref.run({"x": x})["y"])
        np.testing.assert_array_equal(y, x.reshape(-1, 3) * np.array([1, -1.5, 2], np.float32))



def test_dynamic_plan_made_static_by_folding(plans, unfolded):
    def build():
        m = nn.Model()
        x = m.input("x", nn.float32, (4, 6))
        shape = m.op("ADD", np.array([-1, 2], np.int32), np.array([0, 1], np.int32), 0, outputs=[(nn.int32, (2,))])
        m.output(m.op("RESHAPE", x, shape, outputs=[(nn.float32, (0, 0))]), "y")
        return m.compile()
    comp = build()
    assert plans[-1].static and plans[-1].constant_folds["by_type"] == {"ADD": 1}
    unfolded()
    ref = build()
    assert not plans[-1].static                 # unfolded: the shape is a value computed at execution
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    y = comp.run({"x": x})["y"]
    np.testing.assert_array_equal(y, x.reshape(8, 3))
    np.testing.assert_array_equal(y, ref.run({"x": x})["y"])


def test_float16_partition_same_bits(plans, unfolded):
    """A relaxed model on a device with float16 numerics: the folded constant is what the
    fp16 operation would have computed (rounded), the results bit-identical to the unfolded plan."""
    w, s = _weights(12, 16)
    x = RNG.standard_normal((2, 16)).astype(np.float32)

    def run():
        with devices.emulated(devices="gpu=float-fast:fp16"):
            m = nn.Model(relaxed=True)
            xi = m.input("x", nn.float32, (2, 16))
            m.output(m.op("MUL", _hybrid_fc(m, xi, w, s), np.float32(1 / 3) * np.ones((2, 12), np.float32), 0), "y")
            return m.compile().run({"x": x})["y"]
    y = run()
    assert plans[-1].constant_folds["by_type"] == {"DEQUANTIZE": 1}
    unfolded()
    np.testing.assert_array_equal(y, run())


def test_cached_compilation_keeps_the_folded_constants(plans, tmp_path):
    """The compilation cache stores the plan with its folded constants: the second compilation
    (a hit) has them, computes nothing again, and gives the same bits."""
    w, s = _weights(32, 40)
    x = RNG.standard_normal((2, 40)).astype(np.float32)
    first = _hybrid_model(w, s).compile(cache_dir=str(tmp_path))
    y1 = first.run({"x": x})["y"]
    assert plans[-1].constant_folds["by_type"] == {"DEQUANTIZE": 1}
    n = len(plans)
    second = _hybrid_model(w, s).compile(cache_dir=str(tmp_path))
    assert len(plans) == n                             # loaded, not compiled: no new Plan made
    y2 = second.run({"x": x})["y"]
    np.testing.assert_array_equal(y1, y2)
    assert any(f.startswith("nnapi_py-") for f in os.listdir(tmp_path))


def test_profile_report_says_what_was_folded(monkeypatch):
    from nnapi_py import profiling
    monkeypatch.setattr(profiling, "ENABLED", True)
    monkeypatch.setattr(profiling, "_notes", [])
    w, s = _weights(16, 8)
    _hybrid_model(w, s).compile()
    assert any("constant folding: 1 operation computed at compilation (DEQUANTIZE 1), "
               f"{16 * 8 * 4 / 2 ** 20:.2f} MB kept as constants" in n for n in profiling._notes), profiling._notes


def test_importer_hybrid_model(plans, tmp_path):
    """A .tflite FULLY_CONNECTED with int8 weights and float activations (dynamic-range
    quantization): the importer lowers it as the delegate does (DEQUANTIZE + FULLY_CONNECTED),
    the plan folds the DEQUANTIZE, and the result equals the float-weights copy's."""
    pytest.importorskip("tflite")
    import tflite_writer as W
    import nnapi_py.tflite as T
    w, s = _weights(6, 10)
    sc = float(s[0])
    x = RNG.standard_normal((1, 10)).astype(np.float32)
    path = str(tmp_path / "hybrid.tflite")
    W.write(path, [("x", np.float32, (1, 10), None), ("w", np.int8, (6, 10), w, {"scale": sc, "zero_point": 0}),
                   ("y", np.float32, (1, 6), None)],
            [("FULLY_CONNECTED", [0, 1, -1], [2], None)], [0], [2])
    m = T.load(path)
    y = m.run([x])
    y = y[0] if isinstance(y, (list, tuple)) else y
    folds = [p.constant_folds for p in plans if p.constant_folds]
    assert folds and folds[-1]["by_type"] == {"DEQUANTIZE": 1}
    wf = (w.astype(np.float32) * np.float32(sc)).astype(np.float32)
    path2 = str(tmp_path / "float.tflite")
    W.write(path2, [("x", np.float32, (1, 10), None), ("w", np.float32, (6, 10), wf),
                    ("y", np.float32, (1, 6), None)],
            [("FULLY_CONNECTED", [0, 1, -1], [2], None)], [0], [2])
    y2 = T.load(path2).run([x])
    y2 = y2[0] if isinstance(y2, (list, tuple)) else y2
    np.testing.assert_array_equal(np.asarray(y), np.asarray(y2))


@pytest.mark.parametrize("strict", ["", "1"])
def test_hybrid_1x1_convolution_takes_the_depthwise_bias(plans, unfolded, monkeypatch, strict):
    """DEPTHWISE_CONV_2D -> 1x1 CONV_2D whose filter is a DEQUANTIZE of int8: folded first, the
    filter is known when the plan's bias folding looks, so the depthwise bias moves into the
    convolution as in the float model (default mode; within float32 rounding).  Under
    NNAPI_PY_STRICT=1 no bias moves and the folded plan is bit-identical to the unfolded one."""
    monkeypatch.setenv("NNAPI_PY_STRICT", strict)
    c, o = 6, 5
    dw = RNG.standard_normal((1, 3, 3, c)).astype(np.float32)
    b = RNG.standard_normal(c).astype(np.float32)
    wq = RNG.integers(-127, 128, (o, 1, 1, c)).astype(np.int8)
    sc = (RNG.uniform(0.5, 2, o) / 127).astype(np.float32)

    def build():
        m = nn.Model()
        x = m.input("x", nn.float32, (1, 7, 7, c))
        d = m.op("DEPTHWISE_CONV_2D", x, dw, b, 1, 1, 1, 1, 0)
        f = m.op("DEQUANTIZE", m.constant(wq, nn.quant8_symm_per_channel(sc, 0)), outputs=[(nn.float32, wq.shape)])
        m.output(m.op("CONV_2D", d, f, np.zeros(o, np.float32), 1, 1, 1, 0, outputs=[(nn.float32, (1, 7, 7, o))]), "y")
        return m.compile()
    x = RNG.standard_normal((1, 7, 7, c)).astype(np.float32)
    y = build().run({"x": x})["y"]
    p = plans[-1]
    assert p.constant_folds["by_type"] == {"DEQUANTIZE": 1}
    assert p.biases_passed_on == (0 if strict else 1)
    unfolded()
    y0 = build().run({"x": x})["y"]
    assert plans[-1].biases_passed_on == 0
    if strict:
        np.testing.assert_array_equal(y, y0)
    else:
        np.testing.assert_allclose(y, y0, rtol=1e-5, atol=1e-5)


def test_referenced_model_folds_in_its_own_plan(plans, unfolded):
    """An IF branch with a hybrid layer: the branch's plan (made at its first computation)
    folds its DEQUANTIZE; the IF itself is never folded, even on a constant condition."""
    w, s = _weights(5, 4)

    def build():
        b = nn.Model("then")
        v = b.input("v", nn.float32, (1, 4))
        b.output(_hybrid_fc(b, v, w, s), "r")
        m = nn.Model()
        m.output(m.op("IF", np.array([True]), b, b, m.input("x", nn.float32, (1, 4))), "y")
        return m.compile()
    x = RNG.standard_normal((1, 4)).astype(np.float32)
    comp = build()
    assert plans[-1].constant_folds is None and "IF" in _names(plans[-1])
    y = [comp.run({"x": x})["y"] for _ in range(2)]
    branch = [p for p in plans if p.constant_folds]
    assert len(branch) == 1 and branch[0].constant_folds["by_type"] == {"DEQUANTIZE": 1}
    assert _names(branch[0]) == ["FULLY_CONNECTED"]
    unfolded()
    y0 = build().run({"x": x})["y"]
    np.testing.assert_array_equal(y[0], y0)
    np.testing.assert_array_equal(y[1], y0)
