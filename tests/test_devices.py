"""Emulated Android releases, virtual devices and injected faults (nnapi_py/devices.py).

The library runs in this process (tests/nnhelp.py loads it), so the settings are changed with
`nnapi_py.devices.emulated(...)`, exactly what NNAPI_PY_FEATURE_LEVEL / NNAPI_PY_DEVICES /
NNAPI_PY_FAULTS set at start-up.  tests/test_ctests.py runs ctests/test_devices.c, the same
cases seen by a C client through the environment variables.
"""
import os
import re

import numpy as np
import pytest

from nnhelp import NNCallError, T, ffi, lib, run_op, build_model, build_graph, last_error
from nnapi_py import constants as C
from nnapi_py import devices as D

pytestmark = pytest.mark.skipif(lib is None, reason="library not built (make lib)")


# ------------------------------------------------------------------- feature-level matrix
def _accepts(op, inputs, outputs):
    """(0, None) when the model finishes and compiles, else (code, reason).  (Only feature-level-1
    functions are used: build_graph -> Model_* and Compilation_create/finish.)"""
    try:
        m, keep, _ = build_model(op, inputs, outputs)
    except NNCallError as e:
        return e.code, str(e)
    c = ffi.new("ANeuralNetworksCompilation**")
    rc = lib.ANeuralNetworksCompilation_create(m, c)
    rc = rc or lib.ANeuralNetworksCompilation_finish(c[0])
    msg = last_error()
    lib.ANeuralNetworksCompilation_free(c[0])
    lib.ANeuralNetworksModel_free(m)
    return (0, None) if rc == 0 else (rc, msg)


def _add():
    return _accepts("ADD", [T.f32([2]), T.f32([2]), T.i32(0)], [T.f32([2])])


def _div():
    return _accepts("DIV", [T.f32([2]), T.f32([2]), T.i32(0)], [T.f32([2])])


def _abs():
    return _accepts("ABS", [T.f32([2])], [T.f32([2])])


def _hard_swish():
    return _accepts("HARD_SWISH", [T.f32([2])], [T.f32([2])])


def _reusable():
    """ANeuralNetworksExecution_setReusable (feature level 5) on a feature-level-1 model."""
    m, keep, _ = build_model("ADD", [T.f32([1]), T.f32([1]), T.i32(0)], [T.f32([1])])
    c = ffi.new("ANeuralNetworksCompilation**")
    assert lib.ANeuralNetworksCompilation_create(m, c) == 0
    assert lib.ANeuralNetworksCompilation_finish(c[0]) == 0
    e = ffi.new("ANeuralNetworksExecution**")
    assert lib.ANeuralNetworksExecution_create(c[0], e) == 0
    rc = lib.ANeuralNetworksExecution_setReusable(e[0], True)
    msg = last_error()
    lib.ANeuralNetworksExecution_free(e[0])
    lib.ANeuralNetworksCompilation_free(c[0])
    lib.ANeuralNetworksModel_free(m)
    return (0, None) if rc == 0 else (rc, msg)


def _batch_matmul():
    return _accepts("BATCH_MATMUL", [T.f32([1, 2]), T.f32([2, 1]), T.b(0), T.b(0)], [T.f32([1, 1])])


def _mirror_pad():
    return _accepts("MIRROR_PAD", [T.f32([2]), T.i32t([1, 2], [[1, 1]], const=True), T.i32(0)], [T.f32([4])])


PROBES = [(1, "ADD", _add), (2, "DIV", _div), (3, "ABS", _abs), (4, "HARD_SWISH", _hard_swish),
          (5, "setReusable", _reusable), (6, "BATCH_MATMUL", _batch_matmul), (7, "MIRROR_PAD", _mirror_pad)]


@pytest.mark.parametrize("level", range(1, 9))
@pytest.mark.parametrize("needed, what, probe", PROBES, ids=[p[1] for p in PROBES])
def test_feature_level_matrix(level, needed, what, probe):
    """Each probe needs the feature level its feature appeared at: rejected below, accepted from it."""
    with D.emulated(feature_level=level):
        assert lib.ANeuralNetworks_getRuntimeFeatureLevel() == C.FEATURE_LEVEL_CODE[level]
        code, res = probe()
    if level >= needed:
        assert code == 0, res
    else:
        assert code in (C.BAD_DATA, C.OP_FAILED), res
        m = re.search(r"needs feature level (\d) \(Android API (\d+)\)", res)
        assert m and level < int(m.group(1)) <= needed, res    # (an operand may need a level first)
        assert int(m.group(2)) == D.API_LEVEL[int(m.group(1))]
        if level == needed - 1:
            assert int(m.group(1)) == needed and what in res, res
        assert f"behaves as feature level {level}" in res


def test_level_by_api_level_and_device_levels():
    with D.emulated(feature_level=29):                         # Android 10 = feature level 3
        assert lib.ANeuralNetworks_getRuntimeFeatureLevel() == 29
        dev = ffi.new("ANeuralNetworksDevice**")
        assert lib.ANeuralNetworks_getDevice(0, dev) == 0
        fl = ffi.new("int64_t*")
        assert lib.ANeuralNetworksDevice_getFeatureLevel(dev[0], fl) == 0
        assert fl[0] == 29
        # a function of feature level 4 is "absent": OP_FAILED with the reason
        assert lib.ANeuralNetworksDevice_wait(dev[0]) == C.OP_FAILED
        assert "ANeuralNetworksDevice_wait needs feature level 4 (Android API 30)" in last_error()
        # an operand type of feature level 4
        m = ffi.new("ANeuralNetworksModel**")
        assert lib.ANeuralNetworksModel_create(m) == 0
        t = ffi.new("ANeuralNetworksOperandType*", {"type": C.TENSOR_QUANT8_ASYMM_SIGNED, "dimensionCount": 1,
                                                     "dimensions": ffi.new("uint32_t[]", [2]), "scale": 1.0})
        for _ in range(3):      # the C-side operand batch must not let it through either
            assert lib.ANeuralNetworksModel_addOperand(m[0], t) == C.BAD_DATA
        assert "TENSOR_QUANT8_ASYMM_SIGNED needs feature level 4" in last_error()
        lib.ANeuralNetworksModel_free(m[0])
    assert lib.ANeuralNetworks_getRuntimeFeatureLevel() == C.FEATURE_LEVEL_CODE[8]


def test_value_dependent_level_is_checked_at_finish():
    """A level that only the values decide is known at Model_finish (as on Android)."""
    # ADD of TENSOR_INT32 appeared at feature level 4; that is known at addOperation already, so
    # use the quant8 signed type's feature level via a constant operand instead
    with D.emulated(feature_level=3):
        code, res = run_op("ADD", [T.f32([2], [1, 2]), T.f32([2], [3, 4], const=True), T.i32(0)], [T.f32([2])])
    assert code == 0, res


# ------------------------------------------------------------------------ virtual devices
def _devices():
    n = ffi.new("uint32_t*")
    assert lib.ANeuralNetworks_getDeviceCount(n) == 0
    out = []
    for i in range(n[0]):
        d = ffi.new("ANeuralNetworksDevice**")
        assert lib.ANeuralNetworks_getDevice(i, d) == 0
        name, ver = ffi.new("char**"), ffi.new("char**")
        typ, fl = ffi.new("int32_t*"), ffi.new("int64_t*")
        assert lib.ANeuralNetworksDevice_getName(d[0], name) == 0
        assert lib.ANeuralNetworksDevice_getVersion(d[0], ver) == 0
        assert lib.ANeuralNetworksDevice_getType(d[0], typ) == 0
        assert lib.ANeuralNetworksDevice_getFeatureLevel(d[0], fl) == 0
        out.append((d[0], ffi.string(name[0]).decode(), ffi.string(ver[0]).decode(), typ[0], fl[0]))
    return out


def test_default_is_one_cpu_device():
    devs = _devices()
    assert [(n, v, t, f) for _, n, v, t, f in devs] == [("nnapi_py-cpu", "nnapi_py-1.0", 2, 1000008)]
    assert D.CONFIG.default


def test_device_list_from_compact_text():
    with D.emulated(devices="gpu=float-fast:5,npu=quant:ACCELERATOR:4,cpu=cpu"):
        devs = _devices()
    assert [(n, t, f) for _, n, _, t, f in devs] == [("gpu", 3, 31), ("npu", 4, 30), ("cpu", 2, 1000008)]


def test_device_list_from_json(tmp_path):
    cfg = {"devices": [{"name": "dsp", "preset": "minimal", "type": "OTHER", "feature_level": 30,
                        "version": "dsp-2.1", "operations": ["ADD", "MUL"]}],
           "faults": [{"device": "dsp", "kind": "execute-fail", "every": 2}]}
    p = tmp_path / "devices.json"
    p.write_text(__import__("json").dumps(cfg))
    with D.emulated(devices=str(p)) as config:
        devs = _devices()
        assert len(config.faults) == 1 and config.faults[0].every == 2
    assert [(n, v, t, f) for _, n, v, t, f in devs] == [("dsp", "dsp-2.1", 1, 30)]


def _supported(model, devs):
    handles = ffi.new("ANeuralNetworksDevice*[]", [d[0] for d in devs])
    n = 2
    sup = ffi.new("bool[]", n)
    assert lib.ANeuralNetworksModel_getSupportedOperationsForDevices(model, handles, len(devs), sup) == 0
    return list(sup)


def _two_op_model():
    """Operation 0: float ADD; operation 1: QUANTIZE of its result to quant8."""
    operands = [T.f32([4]), T.f32([4]), T.i32(0), T.f32([4]), T.q8([4], scale=0.5, zp=10)]
    m, keep, _, _ = build_graph(operands, [("ADD", [0, 1, 2], [3]), ("QUANTIZE", [3], [4])], [0, 1], [4])
    _KEEP.append(keep)
    return m


_KEEP = []      # values referenced by models until the end of the module


def test_supported_operations_and_create_for_devices(monkeypatch):
    """Devices that cannot run every operation: as Android, createForDevices succeeds and
    Compilation_finish fails (BAD_DATA); NNAPI_PY_STRICT=1 reports it at createForDevices."""
    monkeypatch.setenv("NNAPI_PY_STRICT", "0")
    with D.emulated(devices="gpu=float-fast,npu=quant"):
        gpu, npu = _devices()
        m = _two_op_model()
        assert _supported(m, [gpu]) == [True, False]
        assert _supported(m, [npu]) == [False, False]     # QUANTIZE's input 0 is float
        assert _supported(m, [gpu, npu]) == [True, False]
        comp = ffi.new("ANeuralNetworksCompilation**")
        handles = ffi.new("ANeuralNetworksDevice*[]", [gpu[0]])
        why = "operation 1 (QUANTIZE) is not supported by the given devices: gpu runs float32"
        assert lib.ANeuralNetworksCompilation_createForDevices(m, handles, 1, comp) == 0
        assert lib.ANeuralNetworksCompilation_finish(comp[0]) == C.BAD_DATA
        assert why in last_error()
        lib.ANeuralNetworksCompilation_free(comp[0])
        monkeypatch.setenv("NNAPI_PY_STRICT", "1")
        assert lib.ANeuralNetworksCompilation_createForDevices(m, handles, 1, comp) == C.BAD_DATA
        assert why in last_error()


def test_partition_follows_performance_and_preference(capsys):
    cfg = D.build(devices="slow=float-slow,fast=float-fast,q=quant")
    m = _FakeModel()
    part = D.Partition(cfg, m, None, C.PREFER_FAST_SINGLE_ANSWER)
    assert [d.name for d in part.assign] == ["fast", "q", "nnapi_py-cpu-fallback"]
    part = D.Partition(cfg, m, None, C.PREFER_LOW_POWER)
    assert [d.name for d in part.assign] == ["slow", "q", "nnapi_py-cpu-fallback"]


class _FakeOp:
    def __init__(self, name, ins, outs, level=1):
        from nnapi_py.ops import registry
        self.code = C.OPERATION_CODES[name]
        self.op = registry.lookup(self.code)
        self.ins, self.outs, self.level = ins, outs, level


class _FakeModel:
    """float ADD, quant8 ADD, float16 ADD: what a partition looks at."""
    relaxed = False
    types = [C.TENSOR_FLOAT32, C.TENSOR_QUANT8_ASYMM, C.TENSOR_FLOAT16, C.INT32]
    operations = [_FakeOp("ADD", (0, 0, 3), (0,)), _FakeOp("ADD", (1, 1, 3), (1,)), _FakeOp("ADD", (2, 2, 3), (2,))]


def test_compilation_create_partitions_and_computes(capfd):
    with D.emulated(devices="gpu=float-fast,npu=quant"):
        m = _two_op_model()
        comp = ffi.new("ANeuralNetworksCompilation**")
        assert lib.ANeuralNetworksCompilation_create(m, comp) == 0
        assert lib.ANeuralNetworksCompilation_finish(comp[0]) == 0
        part = _compilation_object(comp[0]).partition
        assert [d.name for d in part.assign] == ["gpu", "nnapi_py-cpu-fallback"]


def _compilation_object(c):
    from nnapi_py import _capi
    return _capi._H[int(ffi.cast("uintptr_t", c))]


# ------------------------------------------------------------------------------- faults
def _run_add(c, n=4):
    e = ffi.new("ANeuralNetworksExecution**")
    assert lib.ANeuralNetworksExecution_create(c, e) == 0
    a = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    for k in range(2):
        assert lib.ANeuralNetworksExecution_setInput(e[0], k, ffi.NULL, ffi.from_buffer(a), a.nbytes) == 0
    assert lib.ANeuralNetworksExecution_setOutput(e[0], 0, ffi.NULL, ffi.from_buffer(out), out.nbytes) == 0
    rc = lib.ANeuralNetworksExecution_compute(e[0])
    lib.ANeuralNetworksExecution_free(e[0])
    return rc, out


def _add_model_for(device_names=None):
    """(model, compilation) of a float ADD; compiled for the named devices, or by Compilation_create."""
    m, keep, _ = build_model("ADD", [T.f32([4]), T.f32([4]), T.i32(0)], [T.f32([4])])
    _KEEP.append(keep)
    comp = ffi.new("ANeuralNetworksCompilation**")
    if device_names is None:
        assert lib.ANeuralNetworksCompilation_create(m, comp) == 0
    else:
        devs = {n: d for d, n, *_ in _devices()}
        handles = ffi.new("ANeuralNetworksDevice*[]", [devs[n] for n in device_names])
        assert lib.ANeuralNetworksCompilation_createForDevices(m, handles, len(device_names), comp) == 0
    return m, comp[0], lib.ANeuralNetworksCompilation_finish(comp[0])


@pytest.mark.parametrize("kind, code", [("execute-fail", C.OP_FAILED), ("timeout", C.MISSED_DEADLINE_TRANSIENT),
                                        ("deadline", C.MISSED_DEADLINE_PERSISTENT),
                                        ("busy", C.RESOURCE_EXHAUSTED_TRANSIENT), ("dead", C.DEAD_OBJECT)])
def test_execution_faults_every_k(kind, code):
    with D.emulated(devices="gpu=float-fast", faults=f"gpu:{kind}@every=2"):
        m, c, rc = _add_model_for(["gpu"])
        assert rc == 0
        assert _run_add(c)[0] == 0
        rc, _ = _run_add(c)
        assert rc == code
        assert f"gpu:{kind}@every=2" in last_error()
        if kind == "dead":         # dead from then on
            assert _run_add(c)[0] == C.DEAD_OBJECT
            gpu = _devices()[0][0]
            assert lib.ANeuralNetworksDevice_wait(gpu) == C.DEAD_OBJECT
            assert _add_model_for(["gpu"])[2] == C.DEAD_OBJECT
            assert _add_model_for(None)[2] == 0          # Compilation_create: the CPU takes over
        else:
            assert _run_add(c)[0] == 0


def test_execution_fault_falls_back_to_cpu_for_compilation_create():
    with D.emulated(devices="gpu=float-fast", faults="gpu:execute-fail@from=1,gpu:deadline@every=3"):
        m, c, rc = _add_model_for(None)
        rc1, out = _run_add(c)
        assert rc1 == 0 and list(out) == [0, 2, 4, 6]        # fell back to the CPU implementation
        assert _run_add(c)[0] == 0


def test_compile_faults():
    with D.emulated(devices="gpu=float-fast", faults="gpu:compile-fail@from=2"):
        assert _add_model_for(["gpu"])[2] == 0
        m, c, rc = _add_model_for(["gpu"])
        assert rc == C.OP_FAILED and "device gpu failed to compile" in last_error()
        m, c, rc = _add_model_for(None)                       # Compilation_create falls back
        assert rc == 0 and _run_add(c)[0] == 0


def test_delay_and_deadline():
    import time
    with D.emulated(devices="gpu=float-fast", faults="gpu:delay=120"):
        m, c, rc = _add_model_for(["gpu"])
        t0 = time.monotonic()
        assert _run_add(c)[0] == 0
        assert time.monotonic() - t0 >= 0.12
        e = ffi.new("ANeuralNetworksExecution**")
        assert lib.ANeuralNetworksExecution_create(c, e) == 0
        a = np.zeros(4, np.float32)
        for k in range(2):
            lib.ANeuralNetworksExecution_setInput(e[0], k, ffi.NULL, ffi.from_buffer(a), 16)
        lib.ANeuralNetworksExecution_setOutput(e[0], 0, ffi.NULL, ffi.from_buffer(a), 16)
        assert lib.ANeuralNetworksExecution_setTimeout(e[0], 20_000_000) == 0
        assert lib.ANeuralNetworksExecution_compute(e[0]) == C.MISSED_DEADLINE_TRANSIENT
        lib.ANeuralNetworksExecution_free(e[0])


def test_bad_settings_are_reported():
    with pytest.raises(ValueError, match="unknown preset"):
        D.build(devices="x=turbo")
    with pytest.raises(ValueError, match="names no listed device"):
        D.build(devices="gpu=float-fast", faults="npu:dead")
    with pytest.raises(ValueError, match="feature level"):
        D.build(feature_level=40)


def test_function_levels_match_the_header():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    text = open(os.path.join(here, "include", "android", "NeuralNetworks.h")).read()
    found = dict((name, int(fl)) for fl, name in
                 re.findall(r"/\* FL(\d) \(API \d+\):.*?\*/\n[^\n(]*?\bANeuralNetworks(\w+)\(", text))
    assert len(found) == 69
    assert {k: v for k, v in found.items() if v > 1} == C.FUNCTION_LEVEL


def test_readme_fallback_example(tmp_path):
    """examples/fallback.c, as README's "Testing your client's code paths" runs it."""
    import shutil
    import subprocess
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    exe = tmp_path / "fallback"
    libdir = os.path.join(here, "build", "lib")
    subprocess.run([cc, "-O2", "-I" + os.path.join(here, "include"), os.path.join(here, "examples", "fallback.c"),
                    "-L" + libdir, "-lneuralnetworks", "-Wl,-rpath," + libdir, "-o", str(exe)], check=True)
    env = dict(os.environ, NNAPI_PY_DEVICES="gpu=float-fast,npu=quant", NNAPI_PY_FAULTS="gpu:execute-fail@every=2",
               NNAPI_PY_TRACE="devices")
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines() == ["run 0: GPU ok, y[3] = 0"] + [
        f"run {i}: GPU failed, fallback ok, y[3] = {2 * i}" for i in (1, 2, 3)] + ["3 fallbacks in 4 runs"]
    readme = open(os.path.join(here, "README.md")).read()       # the README shows this very output
    assert "\n".join(p.stdout.splitlines()) in readme
    assert "\n".join(p.stdout.splitlines()) in "\n".join(
        ln.lstrip(" *") for ln in open(os.path.join(here, "examples", "fallback.c")).read().splitlines())
    assert "nnapi_py: partition: operation 0 ADD -> gpu" in p.stderr
    assert p.stderr.count("injected fault gpu:execute-fail@every=2") == 3
