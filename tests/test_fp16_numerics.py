"""Accelerator numerics: a virtual device with the `fp16` option computes a model relaxed with
relaxComputationFloat32toFloat16 in float16 (inputs, constants and every operation's result
rounded to float16; float32 accumulation inside an operation: docs/decisions.md).  Checked
against numpy float16 references per operation family, on a MobileNetV2-sized network against
the bound float16 predicts, with partitioning and faults, and ADD(2048, 1)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import nnapi_py as nn
from nnapi_py import devices

FP16 = "gpu=all:GPU:fp16"
U = 2.0 ** -11              # float16 unit roundoff (half an ulp, relative)
f16, f32 = np.float16, np.float32


def r16(a):
    """float32 -> float16 -> float32: what the device stores."""
    return np.asarray(a, f32).astype(f16).astype(f32)


def compile_on(build, relaxed=True, devs=FP16, **compile_options):
    with devices.emulated(devices=devs):
        m = nn.Model(relaxed=relaxed)
        build(m)
        return m.compile(**compile_options)


def ulps16(got, want):
    """|got - want| in float16 ulps of want (subnormal spacing near zero)."""
    want = np.asarray(want, np.float64)
    ulp = np.spacing(np.abs(want).astype(f16)).astype(np.float64)
    return np.abs(np.asarray(got, np.float64) - want) / ulp


# ---- the example of the issue -----------------------------------------------------------------
def _add(m):
    x = m.input("x", nn.float32, (1,))
    m.output(m.op("ADD", x, m.input("b", nn.float32, (1,)), 0), "y")


@pytest.mark.parametrize("relaxed, devs, want", [
    (True, FP16, 2048.0),                   # float16: 2049 is not representable, ties to even
    (False, FP16, 2049.0),                  # not relaxed: float32 on the fp16 device too
    (True, None, 2049.0),                   # the default CPU device
    (True, "gpu=float-fast", 2049.0),       # a device without the option
    (True, "gpu=float-fast:fp16", 2048.0),  # the README's example
])
def test_add_2048_plus_1(relaxed, devs, want):
    c = compile_on(_add, relaxed, devs)
    got = c.run({"x": np.array([2048], f32), "b": np.array([1], f32)})["y"]
    assert got.dtype == f32 and got[0] == want


def test_json_numerics_and_bad_value():
    cfg = devices.build(devices='{"devices": [{"name": "npu", "preset": "all", "numerics": "fp16"}]}')
    assert cfg.devices[0].numerics == "fp16"
    assert devices.build(devices="gpu=float-fast:GPU:3:fp16").devices[0].numerics == "fp16"
    with pytest.raises(ValueError):
        devices.build(devices='[{"name": "npu", "numerics": "int4"}]')


# ---- operation families against numpy float16 references -------------------------------------
rng = np.random.default_rng(7)


def _check(build, feeds, ref, exact=False):
    c = compile_on(build)
    got = c.run(feeds)["y"]
    c32 = compile_on(build, relaxed=False)
    full = c32.run(feeds)["y"]
    assert np.array_equal(got, r16(got)), "every result is a float16 value"
    e = ulps16(got, ref)
    if exact:
        assert e.max() == 0, e.max()
    else:
        # float32 accumulation of float16 values, rounded once: the correctly rounded value, or
        # its neighbour where the float32 sum lies within float32 error of a rounding boundary
        assert e.max() <= 1.0 and np.mean(e == 0) > 0.97, (e.max(), np.mean(e == 0))
    assert not np.array_equal(got, full), "float16 numerics must differ from float32 here"
    return got


def test_elementwise_family():
    a, b = rng.standard_normal((2, 3, 50)).astype(f32) * 3
    b = np.where(np.abs(b) < 0.1, 0.5, b).astype(f32)
    for op, fn in (("ADD", np.add), ("SUB", np.subtract), ("MUL", np.multiply), ("DIV", np.divide)):
        def build(m, op=op):
            x, y = m.input("a", nn.float32, a.shape), m.input("b", nn.float32, b.shape)
            m.output(m.op(op, x, y, 0), "y")
        # numpy's own float16 arithmetic: float16 operands, one rounding of the result
        _check(build, {"a": a, "b": b}, fn(a.astype(f16), b.astype(f16)), exact=True)
    c = rng.standard_normal((3, 50)).astype(f32)        # a float32 constant: rounded once

    def build_const(m):
        m.output(m.op("MUL", m.input("a", nn.float32, a.shape), m.constant(c), 0), "y")
    _check(build_const, {"a": a}, a.astype(f16) * c.astype(f16), exact=True)


def test_activation_family():
    x = (rng.standard_normal((4, 64)) * 4).astype(f32)
    x16 = x.astype(f16).astype(np.float64)
    for op, fn in (("LOGISTIC", lambda v: 1 / (1 + np.exp(-v))), ("TANH", np.tanh),
                   ("RELU6", lambda v: np.clip(v, 0, 6)), ("EXP", np.exp)):
        def build(m, op=op):
            m.output(m.op(op, m.input("x", nn.float32, x.shape)), "y")
        got = compile_on(build).run({"x": x})["y"]
        assert np.array_equal(got, r16(got))
        assert ulps16(got, fn(x16).astype(f16)).max() <= 1, op
    e = np.exp(x16 - x16.max(axis=1, keepdims=True))

    def softmax(m):
        m.output(m.op("SOFTMAX", m.input("x", nn.float32, x.shape), 1.0), "y")
    _check(softmax, {"x": x}, (e / e.sum(axis=1, keepdims=True)).astype(f16))


def test_conv_family():
    x = rng.standard_normal((1, 9, 9, 8)).astype(f32)
    w = (rng.standard_normal((16, 3, 3, 8)) * 0.3).astype(f32)
    b = rng.standard_normal(16).astype(f32)
    xp = np.pad(x.astype(f16).astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    w64, b64 = w.astype(f16).astype(np.float64), b.astype(f16).astype(np.float64)
    patches = np.stack([xp[:, i:i + 9, j:j + 9, :] for i in range(3) for j in range(3)], axis=3)
    ref = np.einsum("nhwkc,okc->nhwo", patches, w64.reshape(16, 9, 8)) + b64

    def conv(m):
        m.output(m.op("CONV_2D", m.input("x", nn.float32, x.shape), m.constant(w), m.constant(b),
                      1, 1, 1, 0), "y")                  # SAME, stride 1, no activation
    _check(conv, {"x": x}, ref.astype(f16))
    wd = (rng.standard_normal((1, 3, 3, 8)) * 0.5).astype(f32)
    wd64 = wd.astype(f16).astype(np.float64)
    refd = sum(xp[:, i:i + 9, j:j + 9, :] * wd64[0, i, j] for i in range(3) for j in range(3)) + b64[:8]

    def depthwise(m):
        m.output(m.op("DEPTHWISE_CONV_2D", m.input("x", nn.float32, x.shape), m.constant(wd),
                      m.constant(b[:8]), 1, 1, 1, 1, 0), "y")
    _check(depthwise, {"x": x}, refd.astype(f16))


def test_pooling_family():
    x = rng.standard_normal((1, 8, 8, 4)).astype(f32) * 2
    x16 = x.astype(f16).astype(np.float64).reshape(1, 4, 2, 4, 2, 4)

    def maxpool(m):
        m.output(m.op("MAX_POOL_2D", m.input("x", nn.float32, x.shape), 2, 2, 2, 2, 2, 0), "y")

    def avgpool(m):
        m.output(m.op("AVERAGE_POOL_2D", m.input("x", nn.float32, x.shape), 2, 2, 2, 2, 2, 0), "y")
    _check(maxpool, {"x": x}, x16.max(axis=(2, 4)).astype(f16), exact=True)
    _check(avgpool, {"x": x}, x16.mean(axis=(2, 4)).astype(f16))


def test_fully_connected_and_matmul_family():
    x = rng.standard_normal((3, 40)).astype(f32)
    w = (rng.standard_normal((20, 40)) * 0.2).astype(f32)
    b = rng.standard_normal(20).astype(f32)
    x64, w64, b64 = (v.astype(f16).astype(np.float64) for v in (x, w, b))

    def fc(m):
        m.output(m.op("FULLY_CONNECTED", m.input("x", nn.float32, x.shape), m.constant(w), m.constant(b), 0), "y")
    _check(fc, {"x": x}, (x64 @ w64.T + b64).astype(f16))
    y = rng.standard_normal((40, 7)).astype(f32)

    def matmul(m):
        m.output(m.op("BATCH_MATMUL", m.input("x", nn.float32, x.shape), m.input("w", nn.float32, y.shape),
                      False, False), "y")
    _check(matmul, {"x": x, "w": y}, (x64 @ y.astype(f16).astype(np.float64)).astype(f16))


def test_reduce_family():
    x = rng.standard_normal((4, 6, 30)).astype(f32)
    x64 = x.astype(f16).astype(np.float64)
    axis = np.array([2], np.int32)

    def rsum(m):
        m.output(m.op("REDUCE_SUM", m.input("x", nn.float32, x.shape), m.constant(axis), False,
                          outputs=[(nn.float32, (4, 6))]), "y")

    def mean(m):
        m.output(m.op("MEAN", m.input("x", nn.float32, x.shape), m.constant(axis), 0,
                          outputs=[(nn.float32, (4, 6))]), "y")

    def rmax(m):
        m.output(m.op("REDUCE_MAX", m.input("x", nn.float32, x.shape), m.constant(axis), False,
                          outputs=[(nn.float32, (4, 6))]), "y")
    _check(rsum, {"x": x}, x64.sum(axis=2).astype(f16))
    _check(mean, {"x": x}, x64.mean(axis=2).astype(f16))
    _check(rmax, {"x": x}, x64.max(axis=2).astype(f16), exact=True)


def test_reshape_family():
    x = rng.standard_normal((2, 3, 4)).astype(f32)
    shape = np.array([6, 4], np.int32)
    perm = np.array([2, 0, 1], np.int32)

    def reshape(m):
        m.output(m.op("RESHAPE", m.input("x", nn.float32, x.shape), m.constant(shape),
                          outputs=[(nn.float32, (6, 4))]), "y")

    def transpose(m):
        m.output(m.op("TRANSPOSE", m.input("x", nn.float32, x.shape), m.constant(perm)), "y")

    def concat(m):
        m.output(m.op("CONCATENATION", m.input("x", nn.float32, x.shape), m.constant(x * 3), 1), "y")
    _check(reshape, {"x": x}, x.astype(f16).reshape(6, 4), exact=True)
    _check(transpose, {"x": x}, x.astype(f16).transpose(2, 0, 1), exact=True)
    _check(concat, {"x": x}, np.concatenate([x.astype(f16), (x * 3).astype(f16)], axis=1), exact=True)


def test_if_on_an_fp16_device_rounds_its_results():
    """IF's branch runs as a model of its own (float32); the IF's result is rounded."""
    def build(m):
        b = nn.Model("then")
        v = b.input("v", nn.float32, (2,))
        b.output(b.op("ADD", v, np.array([1, 1], f32), 0), "r")
        cond = m.input("cond", nn.bool8, (1,))
        m.output(m.op("IF", cond, b, b, m.input("x", nn.float32, (2,))), "y")
    feed = {"cond": np.array([True]), "x": np.array([2048, 4], f32)}
    assert compile_on(build).run(feed)["y"].tolist() == [2048, 5]
    assert compile_on(build, relaxed=False).run(feed)["y"].tolist() == [2049, 5]


# ---- partitioning, faults, trace -------------------------------------------------------------
GPU_ADD_ONLY = '{"devices": [{"name": "gpu", "preset": "float-fast", "operations": ["ADD"], "numerics": "fp16"}]}'


def _add_then_mul(m):
    x = m.input("x", nn.float32, (1,))
    y = m.op("ADD", x, m.constant(np.array([1], f32)), 0)        # on gpu: float16
    m.output(m.op("MUL", y, m.constant(np.array([1.0001], f32)), 0), "y")   # on the CPU: float32


def test_partitions_compute_in_their_own_numerics():
    c = compile_on(_add_then_mul, devs=GPU_ADD_ONLY)
    got = c.run({"x": np.array([2048], f32)})["y"][0]
    assert got == f32(2048) * f32(1.0001)          # ADD rounded to 2048; MUL in float32, not rounded
    assert got != r16(got)


@pytest.mark.parametrize("fault, want", [
    ("gpu:execute-fail@every=2", [f32(2048) * f32(1.0001), f32(2049) * f32(1.0001)] * 2),   # falls back: float32
    ("gpu:compile-fail", [f32(2049) * f32(1.0001)] * 4),      # the partition went to the CPU
])
def test_faults_fall_back_to_float32(fault, want):
    doc = GPU_ADD_ONLY[:-1] + f', "faults": ["{fault}"]}}'
    c = compile_on(_add_then_mul, devs=doc)
    got = [c.run({"x": np.array([2048], f32)})["y"][0] for _ in range(4)]
    assert got == want


def test_create_for_devices_and_reported_fault():
    with devices.emulated(devices=GPU_ADD_ONLY[:-1] + ', "faults": ["gpu:execute-fail@from=2"]}'):
        m = nn.Model(relaxed=True)
        _add(m)
        gpu = [d for d in nn.device_names() if d == "gpu"]
        c = m.compile(devices=gpu)
    feed = {"x": np.array([2048], f32), "b": np.array([1], f32)}
    assert c.run(feed)["y"][0] == 2048
    with pytest.raises(nn.NNAPIError) as e:
        c.run(feed)
    assert e.value.code_name == "OP_FAILED"


def test_trace_names_the_numerics(tmp_path):
    code = ("import numpy as np, nnapi_py as nn\n"
            "m = nn.Model(relaxed=True)\n"
            "x = m.input('x', nn.float32, (1,))\n"
            "y = m.op('ADD', x, m.constant(np.array([1], np.float32)), 0)\n"
            "m.output(m.op('MUL', y, m.constant(np.array([2], np.float32)), 0), 'y')\n"
            "print(m.compile().run({'x': np.array([2048], np.float32)})['y'][0])\n")
    env = dict(os.environ, NNAPI_PY_TRACE="devices", NNAPI_PY_DEVICES=GPU_ADD_ONLY)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "4096.0", r.stdout + r.stderr
    assert "partition gpu: operations [0], numerics fp16 (relaxed model)" in r.stderr, r.stderr
    assert "partition nnapi_py-cpu-fallback: operations [1], numerics fp32" in r.stderr, r.stderr


# ---- a MobileNetV2-sized relaxed network --------------------------------------------------------
def mobilenet_v2(m, rng, size=224):
    """The MobileNetV2-style network of bench/bench_mobilenet.c (stem, 17 inverted residual
    blocks, 1x1 to 1280, average pool, FC to 1000), He-scaled random weights so activations stay
    of order one.  Returns the number of operations on the longest path."""
    def conv(x, cin, cout, k, s, depthwise=False, act=3):
        fan = k * k * (1 if depthwise else cin)
        shape = (1, k, k, cout) if depthwise else (cout, k, k, cin)
        w = (rng.standard_normal(shape) * np.sqrt(2.0 / fan)).astype(f32)
        b = (rng.standard_normal(cout) * 0.1).astype(f32)
        if depthwise:
            return m.op("DEPTHWISE_CONV_2D", x, m.constant(w), m.constant(b), 1, s, s, 1, act)
        return m.op("CONV_2D", x, m.constant(w), m.constant(b), 1, s, s, act)

    depth = 0
    x = m.input("x", nn.float32, (1, size, size, 3))
    x, c = conv(x, 3, 32, 3, 2), 32
    depth += 1
    for t, cout, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                          (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for r in range(n):
            stride = s if r == 0 else 1
            y = x if t == 1 else conv(x, c, c * t, 1, 1)
            y = conv(y, c * t, c * t, 3, stride, depthwise=True)
            y = conv(y, c * t, cout, 1, 1, act=0)
            depth += 2 if t == 1 else 3
            if stride == 1 and c == cout:
                y = m.op("ADD", x, y, 0)
                depth += 1
            x, c = y, cout
    x = conv(x, c, 1280, 1, 1)
    k = size // 32
    x = m.op("AVERAGE_POOL_2D", x, 2, 1, 1, k, k, 0)
    x = m.op("RESHAPE", x, m.constant(np.array([1, 1280], np.int32)), outputs=[(nn.float32, (1, 1280))])
    w = (rng.standard_normal((1000, 1280)) * np.sqrt(1.0 / 1280)).astype(f32)
    m.output(m.op("FULLY_CONNECTED", x, m.constant(w), m.constant(np.zeros(1000, f32)), 0), "y")
    return depth + 4


def test_mobilenet_v2_deviation_is_what_float16_predicts():
    """Bound (docs/decisions.md, "fp16 numerics"): each of the L roundings on the longest path
    (input, each operation's result; constants rounded once) multiplies a value by (1 + e),
    |e| <= u = 2^-11, e spread uniformly, RMS u/sqrt(3).  Propagated through layers whose gain is
    about one (He-scaled weights, ReLU6), independent errors add in quadrature:
    relative RMS deviation of the logits ~ sqrt(L) * u / sqrt(3); the first-order worst case, all
    errors aligned, is L * u.  The measured deviation must lie between the last rounding alone
    (u / sqrt(3) / 2: the logits are float16 values) and the worst case, and within a factor 4 of
    the random-walk estimate."""
    rng_w = np.random.default_rng(1234)
    depth = []

    def build(m):
        depth.append(mobilenet_v2(m, rng_w))
    x = np.random.default_rng(5).uniform(0, 1, (1, 224, 224, 3)).astype(f32)
    c16 = compile_on(build)
    y16 = c16.run({"x": x})["y"].astype(np.float64)
    rng_w = np.random.default_rng(1234)         # the same weights
    y32 = compile_on(build, relaxed=False).run({"x": x})["y"].astype(np.float64)
    L = depth[0]
    rel = np.linalg.norm(y16 - y32) / np.linalg.norm(y32)
    estimate = np.sqrt(L) * U / np.sqrt(3)
    print(f"MobileNetV2 relaxed fp16: L={L} roundings on the longest path, relative RMS deviation "
          f"{rel:.3g} (random-walk estimate {estimate:.3g}, worst case {L * U:.3g}); max abs "
          f"{np.abs(y16 - y32).max():.3g} of max |y| {np.abs(y32).max():.3g}; "
          f"top-1 {'same' if y16.argmax() == y32.argmax() else 'differs'}")
    assert np.array_equal(y16, r16(y16))
    assert U / np.sqrt(3) / 2 < rel < L * U
    assert estimate / 4 < rel < estimate * 4


# ---- the .tflite importer's allow_fp16 and `python -m nnapi_py run --allow-fp16` ---------------
def _tflite_mul(tmp_path):
    pytest.importorskip("tflite")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tflite_writer
    w = np.linspace(1.0001, 1.9, 12).astype(f32).reshape(3, 4)
    return tflite_writer.write(str(tmp_path / "mul.tflite"),
                               [("a", f32, (3, 4), None), ("w", f32, (3, 4), w), ("y", f32, (3, 4), None)],
                               [("MUL", [0, 1], [2], None)], [0], [2]), w


def test_tflite_allow_fp16(tmp_path):
    import nnapi_py.tflite as T
    path, w = _tflite_mul(tmp_path)
    a = np.linspace(-3, 1000, 12).astype(f32).reshape(3, 4)
    with devices.emulated(devices="gpu=float-fast:fp16"):
        relaxed, full = T.load(path, allow_fp16=True), T.load(path)
    np.testing.assert_array_equal(relaxed.run([a])[0], (a.astype(f16) * w.astype(f16)))
    np.testing.assert_array_equal(full.run([a])[0], a * w)


def test_cli_compare_allow_fp16(tmp_path):
    pytest.importorskip("ai_edge_litert")
    path, _ = _tflite_mul(tmp_path)
    r = subprocess.run([sys.executable, "-m", "nnapi_py", "run", path, "--compare", "--allow-fp16"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("y: fp16 vs float32")]
    assert line and "fp16 vs LiteRT" in line[0] and "float32 vs LiteRT max abs 0," in line[0], r.stdout
    rel = float(line[0].split("fp16 vs float32")[1].split("max rel ")[1].split(";")[0])
    assert 0 < rel <= 2 * U, line[0]          # one product of float16 values, rounded once
