"""The Pythonic API (nnapi_py.nn) over the C library: every kind of operand, the error path,
sync / async / burst / reusable executions, Memory, control flow, dynamic shapes, device
settings, inspection (summary / JSON / dot), NNAPI_PY_DUMP + `python -m nnapi_py show`, and
NNAPI_PY_TRACE=calls."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import nnapi_py as nn
import nnhelp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = nnhelp.needs_library


def add_model(t=nn.float32, shape=(1, 4)):
    m = nn.Model("add")
    x = m.input("x", t, shape)
    w = m.constant(np.arange(1, 1 + int(np.prod(shape)), dtype=t.dtype).reshape(shape))
    m.output(m.op("ADD", x, w, 0), "y")
    return m


def test_readme_example():
    m = nn.Model()
    x = m.input("x", nn.float32, (1, 4))
    w = m.constant(np.array([[10, 20, 30, 40]], np.float32))
    y = m.op("ADD", x, w, 0)
    m.output(y, "y")
    c = m.compile(preference="fast_single_answer")
    out = c.run({"x": np.arange(4, dtype=np.float32).reshape(1, 4)})
    np.testing.assert_array_equal(out["y"], [[10, 21, 32, 43]])


def test_ffi_and_lib_are_the_c_api():
    from nnapi_py import ffi, lib
    p = ffi.new("ANeuralNetworksModel**")
    assert lib.ANeuralNetworksModel_create(p) == 0
    lib.ANeuralNetworksModel_free(p[0])


@pytest.mark.parametrize("mode", ["sync", "async", "burst", "reusable", "list"])
def test_execution_modes(mode):
    c = add_model().compile()
    x = np.ones((1, 4), np.float32)
    if mode == "sync":
        out = c.run({"x": x})
    elif mode == "async":
        out = c.run_async({"x": x})
    elif mode == "burst":
        b = c.burst()
        out = b.run({"x": x})
        out = b.run({"x": x + 1})
        x = x + 1
    elif mode == "list":
        out = c.run([x])
    else:
        e = c.execution(reusable=True)
        for k in range(3):
            out = e.run({"x": x + k}) if k == 0 else e.run()
    np.testing.assert_array_equal(out["y"], x + np.arange(1, 5))


def test_reusable_run_without_copies_returns_the_bound_buffers():
    """run(copy=False) returns the bound output buffers: the same arrays every run (fixed
    shapes), holding each run's results in turn, and outputs bound by the caller with bind()
    are those very arrays; copy=True (the default) returns copies the next run leaves alone."""
    m = nn.Model()
    x = m.input("x", nn.float32, (2, 2))
    fixed = [(nn.float32, (2, 2))]                                  # declared output shapes
    m.output(m.op("ADD", x, np.ones((2, 2), np.float32), 0, outputs=fixed), "y")
    m.output(m.op("MUL", x, np.full((2, 2), 3, np.float32), 0, outputs=fixed), "z")
    e = m.compile().execution(reusable=True)
    mine = np.empty((2, 2), np.float32)
    first = e.bind(outputs={"z": mine}).run({"x": np.zeros((2, 2), np.float32)}, copy=False)
    assert np.shares_memory(first["z"], mine)
    kept = e.run({"x": np.ones((2, 2), np.float32)})              # a copy
    again = e.run({"x": np.full((2, 2), 2, np.float32)}, copy=False)
    assert again is e.run({"x": np.full((2, 2), 5, np.float32)}, copy=False)
    np.testing.assert_array_equal(again["y"], 6)
    np.testing.assert_array_equal(mine, 15)
    np.testing.assert_array_equal(kept["y"], 2)
    np.testing.assert_array_equal(kept["z"], 3)


def _two_output_model():
    m = nn.Model()
    x = m.input("x", nn.float32, (2, 2))
    fixed = [(nn.float32, (2, 2))]
    m.output(m.op("ADD", x, np.ones((2, 2), np.float32), 0, outputs=fixed), "y")
    m.output(m.op("MUL", x, np.full((2, 2), 3, np.float32), 0, outputs=fixed), "z")
    return m.compile()


def test_reusable_run_never_writes_into_the_callers_arrays():
    """Issue 26.1: a reusable execution's later run(new_inputs) does not write into the arrays an
    earlier run was given, inputs or outputs; outputs given to a run receive that run's results
    only."""
    e = _two_output_model().execution(reusable=True)
    x0 = np.full((2, 2), 7, np.float32)                              # dtype and layout would fit zero-copy
    z0 = np.zeros((2, 2), np.float32)
    out = e.run({"x": x0}, {"z": z0})
    np.testing.assert_array_equal(z0, 21)                            # this run's result, in the caller's array
    np.testing.assert_array_equal(out["y"], 8)
    out = e.run({"x": np.zeros((2, 2), np.float32)})
    np.testing.assert_array_equal(x0, 7)                             # untouched
    np.testing.assert_array_equal(z0, 21)                            # not this run's
    np.testing.assert_array_equal(out["z"], 0)
    x0[...] = 1                                                      # not bound: no effect on the next run
    np.testing.assert_array_equal(e.run()["y"], 1)
    z1 = np.zeros((2, 2), np.float32)
    e.run({"x": np.ones((2, 2), np.float32)}, {"z": z1}, copy=False)
    np.testing.assert_array_equal(z1, 3)
    np.testing.assert_array_equal(z0, 21)


def test_bind_is_zero_copy_on_request():
    """bind(): the caller's arrays, used in place: an input changed in place feeds the next run,
    run(new_values) writes into the bound input, a bound output receives every run's results;
    an array that cannot be used in place is refused, and bind() after the first run too."""
    c = _two_output_model()
    e = c.execution(reusable=True)
    x, z = np.zeros((2, 2), np.float32), np.empty((2, 2), np.float32)
    e.bind({"x": x}, {"z": z})
    assert e.run()["y"].tolist() == [[1, 1], [1, 1]]
    x[...] = 2
    e.run()
    np.testing.assert_array_equal(z, 6)
    e.run({"x": np.full((2, 2), 4, np.float32)})
    np.testing.assert_array_equal(x, 4)                              # asked for: the bound array
    np.testing.assert_array_equal(z, 12)
    with pytest.raises(ValueError, match="before the execution's first run"):
        e.bind({"x": x})
    for bad in (np.zeros((2, 2), np.float64), np.zeros((2, 4), np.float32)[:, ::2]):
        with pytest.raises(ValueError, match="bind: input 'x'"):
            c.execution(reusable=True).bind({"x": bad})
    ro = np.zeros((2, 2), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        c.execution(reusable=True).bind(outputs={"y": ro})


def test_one_shot_execution_second_run_leaves_inputs_alone():
    """A one-shot execution binds its input zero-copy; a second run is BAD_STATE from the
    library and must not have written the new values into the first run's array."""
    e = _two_output_model().execution()
    x0 = np.full((2, 2), 7, np.float32)
    e.run({"x": x0})
    with pytest.raises(nn.NNAPIError) as err:
        e.run({"x": np.zeros((2, 2), np.float32)})
    assert err.value.code_name == "BAD_STATE"
    np.testing.assert_array_equal(x0, 7)


def test_lossy_conversions_are_refused():
    """Issue 26.3: values are converted only where nothing is lost (numpy's "same_kind" casts
    with no overflow, integer -> integer when every value fits); float -> int, out-of-range
    integers and overflowing floats raise a ValueError naming the input."""
    m = nn.Model()
    a = m.input("a", nn.int32, (3,))
    m.output(m.op("ADD", a, a, 0), "s")
    c = m.compile()
    with pytest.raises(ValueError, match="input 'a': float64 values do not convert to int32"):
        c.run({"a": [1.7, -2.9, 3e10]})
    with pytest.raises(ValueError, match="input 'a': 3000000000 does not fit int32"):
        c.run({"a": np.array([1, 2, 3_000_000_000])})
    assert c.run({"a": [1, 2, 3]})["s"].tolist() == [2, 4, 6]             # int64 list -> int32: fits
    assert c.run({"a": np.array([True, False, True])})["s"].tolist() == [2, 0, 2]
    e = c.execution(reusable=True)
    e.run({"a": [1, 2, 3]})
    with pytest.raises(ValueError, match="float64 values do not convert"):
        e.run({"a": [0.5, 0, 0]})                                         # later runs too

    f = nn.Model()
    x = f.input("x", nn.float32, (2,))
    f.output(f.op("ADD", x, x, 0), "y")
    cf = f.compile()
    assert cf.run({"x": np.array([1.5, 2.0])})["y"].tolist() == [3.0, 4.0]   # float64 -> float32
    assert cf.run({"x": [1, 2]})["y"].tolist() == [2.0, 4.0]                  # int -> float
    with pytest.raises(ValueError, match="a value overflows float32"):
        cf.run({"x": [1e40, 0.0]})
    with pytest.raises(ValueError, match="complex128 values do not convert"):
        cf.run({"x": [1j, 0]})

    q = nn.Model()
    u = q.input("u", nn.quant8_asymm(0.5, 0), (3,))
    q.output(q.op("ADD", u, u, 0), "v")
    cq = q.compile()
    assert cq.run({"u": [1, 2, 3]})["v"].tolist() == [2, 4, 6]
    with pytest.raises(ValueError, match="input 'u': 300 does not fit uint8"):
        cq.run({"u": [1, 2, 300]})
    with pytest.raises(ValueError, match="input 'u': -1 does not fit uint8"):
        cq.run({"u": [-1, 2, 3]})

    k = nn.Model()
    with pytest.raises(ValueError, match="float64 values do not convert to int32"):
        k.constant(np.array([1.5]), nn.int32)
    with pytest.raises(ValueError, match="does not fit int32"):
        k.op("ADD", k.input("i", nn.int32, (1,)), np.int32([1]), 2 ** 40)


def test_python_scalars_convert_as_arrays_do():
    """Model.op's Python numbers take a shortcut (nn._SCALAR_RANGES: a bounds check instead of
    numpy reductions): it accepts and refuses exactly what the general conversion does, at the
    edges of int32, float32 and float16."""
    from nnapi_py import nn as N
    for v, dt in ((2 ** 31 - 1, np.int32), (-2 ** 31, np.int32), (255, np.uint8), (0, np.uint8),
                  (3.4028234663852886e38, np.float32), (-3.4028234663852886e38, np.float32),
                  (65504.0, np.float16), (float("nan"), np.float32), (float("inf"), np.float16),
                  (-float("inf"), np.float32), (1e-50, np.float32), (7, np.float32), (-1, np.float64)):
        fast = N._as_dtype(v, dt, "s")
        general = N._as_dtype(np.asarray(v), dt, "s")
        assert fast.dtype == general.dtype == dt and fast.shape == ()
        np.testing.assert_array_equal(fast, general)
    for v, dt, match in ((2 ** 31, np.int32, "does not fit int32"), (-2 ** 31 - 1, np.int32, "does not fit"),
                         (256, np.uint8, "does not fit uint8"), (-1, np.uint8, "does not fit uint8"),
                         (3.5e38, np.float32, "overflows float32"), (70000.0, np.float16, "overflows float16"),
                         (2 ** 200, np.float32, "overflow|does not|convert"), (1.5, np.int32, "do not convert")):
        with pytest.raises(ValueError, match=match):
            N._as_dtype(v, dt, "s")


def test_duplicate_input_and_output_names_are_refused():
    m = nn.Model()
    x = m.input("x", nn.float32, (2,))
    with pytest.raises(ValueError, match="already has an input named 'x'"):
        m.input("x", nn.float32, (2,))
    m.output(m.op("ADD", x, x, 0), "y")
    with pytest.raises(ValueError, match="already has an output named 'y'"):
        m.output(m.op("MUL", x, x, 0), "y")


def test_float16_int32_and_scalar_types():
    m = nn.Model()
    h = m.input("h", nn.float16, (3,))
    m.output(m.op("MUL", h, np.array([2, 2, 2], np.float16), 0), "h2")
    i = m.input("i", nn.int32, (3,))
    m.output(m.op("ADD", i, np.array([1, 2, 3], np.int32), 0), "i2")
    f = m.input("f", nn.float32, (3,))
    m.output(m.op("SOFTMAX", f, 0.5), "soft")                           # float scalar -> FLOAT32
    b = m.op("GREATER", f, np.zeros(3, np.float32))                     # BOOL8 output by default
    m.output(b, "positive")
    out = m.compile().run({"h": np.array([1, 2, 3], np.float16), "i": np.array([5, 5, 5], np.int32),
                           "f": np.array([-2, 0, 2], np.float32)})
    assert out["h2"].dtype == np.float16 and out["h2"].tolist() == [2, 4, 6]
    assert out["i2"].tolist() == [6, 7, 8]
    e = np.exp(0.5 * np.array([-2, 0, 2]))
    np.testing.assert_allclose(out["soft"], e / e.sum(), rtol=1e-6)
    assert out["positive"].dtype == np.bool_ and out["positive"].tolist() == [False, False, True]


def test_quantized_operands_and_per_channel_conv():
    m = nn.Model()
    x = m.input("x", nn.quant8_asymm(0.5, 128), (1, 2, 2, 1))
    w = m.constant(np.array([1, 2], np.int8).reshape(2, 1, 1, 1),
                   nn.quant8_symm_per_channel([0.5, 0.25], 0))
    bias = m.constant(np.array([0, 0], np.int32), nn.OperandType(nn.int32.code, 0.0, 0))
    y = m.op("CONV_2D", x, w, bias, 0, 0, 0, 0, 1, 1, 0, outputs=[nn.quant8_asymm(0.25, 100)])
    m.output(y, "y")
    xs = np.array([130, 132, 126, 128], np.uint8).reshape(1, 2, 2, 1)
    out = m.compile().run({"x": xs})["y"]
    real_x = (xs.astype(float) - 128) * 0.5
    want = np.round(np.concatenate([real_x * 1 * 0.5, real_x * 2 * 0.25], axis=3) / 0.25) + 100
    np.testing.assert_array_equal(out, want)
    m2 = nn.Model()
    s = m2.input("s", nn.quant8_asymm_signed(0.1, -3), (2,))
    m2.output(m2.op("RELU", s), "r")
    assert m2.compile().run({"s": np.array([-10, 7], np.int8)})["r"].tolist() == [-3, 7]


def test_multi_output_and_names():
    m = nn.Model()
    x = m.input("x", nn.float32, (2, 4))
    a, b = m.op("SPLIT", x, 1, 2, outputs=[nn.float32, nn.float32], names=["left", "right"])
    m.output(a)
    m.output(b)
    out = m.compile().run({"x": np.arange(8, dtype=np.float32).reshape(2, 4)})
    assert out["left"].tolist() == [[0, 1], [4, 5]] and out["right"].tolist() == [[2, 3], [6, 7]]


def test_dynamic_shapes_come_back_real():
    m = nn.Model()
    x = m.input("x", nn.float32, (0, 3))                       # batch given at execution
    m.output(m.op("RELU", x), "y")
    c = m.compile()
    for batch in (1, 5):
        out = c.run({"x": -np.ones((batch, 3), np.float32)})
        assert out["y"].shape == (batch, 3)


@pytest.mark.strict_mode
def test_error_path_raises_nnapi_error_with_reason():
    m = nn.Model()
    a = m.input("a", nn.float32, (2,))
    m.output(m.op("ADD", a, a, 7), "y")
    with pytest.raises(nn.NNAPIError) as e:
        m.compile()
    assert e.value.code == 4 and e.value.code_name == "BAD_DATA"
    assert "fused activation" in e.value.reason and e.value.call == "ANeuralNetworksModel_finish"
    m2 = nn.Model()
    with pytest.raises(nn.NNAPIError) as e:
        m2.input("q", nn.quant8_asymm(0.0, 0), (2,))
    assert e.value.code_name == "BAD_DATA" and "scale" in e.value.reason
    c = add_model().compile()
    with pytest.raises(KeyError):
        c.run({"nope": np.zeros((1, 4), np.float32)})


def test_memory_as_input_and_as_constant():
    data = np.arange(4, dtype=np.float32).reshape(1, 4)
    mem_in = nn.Memory(data)
    c = add_model().compile()
    np.testing.assert_array_equal(c.run({"x": mem_in})["y"], data + np.arange(1, 5))
    m = nn.Model()
    x = m.input("x", nn.float32, (4,))
    w = m.constant((nn.Memory(np.full(4, 10, np.float32)), 0, 16), nn.float32)
    m.output(m.op("ADD", x, w, 0), "y")
    assert m.compile().run({"x": np.ones(4, np.float32)})["y"].tolist() == [11] * 4


def test_control_flow_if_and_while():
    def branch(op):
        b = nn.Model(op.lower())
        v = b.input("v", nn.float32, (2,))
        b.output(b.op(op, v, np.array([1, 1], np.float32), 0), "r")
        return b
    m = nn.Model()
    cond = m.input("cond", nn.bool8, (1,))
    x = m.input("x", nn.float32, (2,))
    m.output(m.op("IF", cond, branch("ADD"), branch("SUB"), x), "y")
    c = m.compile()
    assert c.run({"cond": np.array([True]), "x": np.zeros(2, np.float32)})["y"].tolist() == [1, 1]
    assert c.run({"cond": np.array([False]), "x": np.zeros(2, np.float32)})["y"].tolist() == [-1, -1]

    cm = nn.Model("cond")                               # while v < 5: v = v + 1
    v = cm.input("v", nn.float32, (1,))
    cm.output(cm.op("LESS", v, np.array([5], np.float32), outputs=[(nn.bool8, (1,))]), "go")
    body = nn.Model("body")
    bv = body.input("v", nn.float32, (1,))
    body.output(body.op("ADD", bv, np.array([1], np.float32), 0, outputs=[(nn.float32, (1,))]), "v1")
    w = nn.Model()
    start = w.input("start", nn.float32, (1,))
    w.output(w.op("WHILE", cm, body, start, outputs=[(nn.float32, (1,))]), "end")
    assert w.compile().run({"start": np.array([0], np.float32)})["end"].tolist() == [5]


def test_compile_options_and_devices():
    names = nn.device_names()
    assert names
    c = add_model().compile(preference="low_power", devices=names[:1], priority="high", timeout_ns=10 ** 9)
    assert c.run({"x": np.zeros((1, 4), np.float32)})["y"].tolist() == [[1, 2, 3, 4]]
    with pytest.raises(ValueError):
        add_model().compile(devices=["no-such-device"])


def test_emulated_feature_level_context_manager():
    with nn.emulated(feature_level=2):
        assert nn.feature_level() == 28
        m = nn.Model()
        with pytest.raises(nn.NNAPIError) as e:
            m.input("h", nn.float16, (2,))          # TENSOR_FLOAT16 needs feature level 3
        assert "feature level 3" in e.value.reason
    assert nn.feature_level() == 1000008


def test_emulated_faults():
    with nn.emulated(devices="gpu=all", faults="gpu:execute-fail"):
        c = add_model().compile(devices=["gpu"])
        with pytest.raises(nn.NNAPIError) as e:
            c.run({"x": np.zeros((1, 4), np.float32)})
        assert e.value.code_name == "OP_FAILED"


def test_inspection_summary_json_dot():
    m = add_model()
    s = m.summary()
    assert "ADD" in s and "x: TENSOR_FLOAT32[1, 4]" in s
    d = json.loads(m.to_json())
    assert d["operations"][0]["type"] == "ADD" and d["inputs"] == [0]
    dot = m.to_dot()
    assert dot.startswith("digraph") and "op0" in dot


def run_py(code, env=None):
    e = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)


def test_dump_and_show(tmp_path):
    r = run_py("import numpy as np, nnapi_py as nn\n"
               "m = nn.Model(); x = m.input('x', nn.float32, (2,))\n"
               "m.output(m.op('RELU', x), 'y'); m.compile()\n", {"NNAPI_PY_DUMP": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    files = sorted(os.listdir(tmp_path))
    assert any(f.endswith(".json") for f in files) and any(f.endswith(".dot") for f in files)
    js = str(tmp_path / [f for f in files if f.endswith(".json")][0])
    out = subprocess.run([sys.executable, "-m", "nnapi_py", "show", js], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0 and "RELU" in out.stdout and "TENSOR_FLOAT32[2]" in out.stdout
    dot = subprocess.run([sys.executable, "-m", "nnapi_py", "show", js, "--dot"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert dot.stdout.startswith("digraph")


def test_dump_covers_c_clients(tmp_path):
    demo = os.path.join(ROOT, "build", "demo")
    if not os.path.exists(demo):
        subprocess.run(["make", "-s", "build/demo"], cwd=ROOT, check=True, capture_output=True)
    r = subprocess.run([demo], capture_output=True, text=True, env=dict(os.environ, NNAPI_PY_DUMP=str(tmp_path)))
    assert r.returncode == 0, r.stderr
    d = json.load(open(tmp_path / sorted(f for f in os.listdir(tmp_path) if f.endswith(".json"))[0]))
    assert [op["type"] for op in d["operations"]] == ["ADD", "LOGISTIC", "MUL", "RESHAPE"] or d["operations"]


def test_trace_calls_shows_every_add_operand():
    demo = os.path.join(ROOT, "build", "demo")
    if not os.path.exists(demo):
        subprocess.run(["make", "-s", "build/demo"], cwd=ROOT, check=True, capture_output=True)
    r = subprocess.run([demo], capture_output=True, text=True, env=dict(os.environ, NNAPI_PY_TRACE="calls"))
    lines = [x for x in r.stderr.splitlines() if "ANeuralNetworksModel_addOperand(" in x]
    assert len(lines) == 9, r.stderr[:2000]
    assert ".type=TENSOR_FLOAT32" in lines[0] and ".dimensions=[" in lines[0] and "-> NO_ERROR" in lines[0]


def test_example_runs():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "python_api.py")], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "y =" in r.stdout


def test_cflags_libs_from_any_directory(tmp_path):
    r = subprocess.run([sys.executable, "-m", "nnapi_py", "--cflags", "--libs"], capture_output=True, text=True,
                       cwd=tmp_path, env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0 and "-lneuralnetworks" in r.stdout and "-I" in r.stdout


def test_batched_operands_decode_alike_few_or_many(monkeypatch):
    """addOperand calls batched on the C side reach the model when flushed: a few records are
    read with struct (_capi._FEW_RECORDS), a long batch with numpy's field columns; both give
    the model the same types, dimensions, scales and zero points."""
    from nnapi_py import _capi, ffi, lib
    kinds = [(3, [2, 3]), (0, []), (5, [1, 4, 4, 8]), (14, [7]), (1, []), (3, [0, 5]), (12, [2, 2, 2])]

    def build():
        p = ffi.new("ANeuralNetworksModel**")
        assert lib.ANeuralNetworksModel_create(p) == 0
        keep = []
        for k in range(40):
            code, dims = kinds[k % len(kinds)]
            d = ffi.new("uint32_t[]", dims) if dims else ffi.NULL
            scale, zp = {5: (0.5, 3), 14: (0.25, -7), 12: (0.125, 40000)}.get(code, (0.0, 0))
            t = ffi.new("ANeuralNetworksOperandType*", {"type": code, "dimensionCount": len(dims),
                                                         "dimensions": d, "scale": scale, "zeroPoint": zp})
            keep.append((t, d))
            assert lib.ANeuralNetworksModel_addOperand(p[0], t) == 0
            if k % 3 == 2 and _capi._FEW_RECORDS:        # flushes of 1-3 records in between
                lib.ANeuralNetworksModel_setOperandValue(p[0], 999, ffi.NULL, 0)
        lib.ANeuralNetworksModel_setOperandValue(p[0], 999, ffi.NULL, 0)    # flush the rest (BAD_DATA)
        m = _capi._H[int(ffi.cast("uintptr_t", p[0]))]
        got = (list(m.types), list(m.dims), list(m.scales), list(m.zps))
        lib.ANeuralNetworksModel_free(p[0])
        return got
    unpacked = []

    class Counting:                     # _REC_STRUCT, counting the struct path's flushes
        def __init__(self, s):
            self.s = s

        def iter_unpack(self, b):
            unpacked.append(len(b) // self.s.size)
            return self.s.iter_unpack(b)
    monkeypatch.setattr(_capi, "_REC_STRUCT", Counting(_capi._REC_STRUCT))
    few = build()
    assert sum(unpacked) == 39 and max(unpacked) <= 3        # all but the first (the Python path), a few at a time
    monkeypatch.setattr(_capi, "_FEW_RECORDS", 0)
    many = build()
    assert sum(unpacked) == 39                               # none through struct this time
    assert few == many and len(few[0]) == 40
    assert few[1][:4] == [(2, 3), (), (1, 4, 4, 8), (7,)] and few[2][2] == 0.5 and few[3][3] == -7
