"""The NNAPI Support Library table (ANeuralNetworks_getSLDriverImpl, issue 39).

ctests/test_sl.c loads a library as Android's and TFLite's loaders do (dlopen by path, dlsym,
implFeatureLevel, the cast by level) and uses only the table: devices and SL_ queries, a model
run sync / with dependencies / in a burst / from memories, caching from fds, the extension
functions, and the diagnostic callbacks with every value checked.  Run against the default
library and each feature-level library from 5 to 8 (levels 1..4: no such symbol), and against
the default library lowered by NNAPI_PY_FEATURE_LEVEL.  The Python side (nnapi_py/sl.py) is
checked directly below.
"""
import os
import subprocess
import sys

import pytest

from test_ctests import CC, CTESTS, LIB, LIBDIR, OUTDIR, ROOT, _cflags, _link_flags, assert_all_passed

_exe = []


def _client():
    if not _exe:
        OUTDIR.mkdir(parents=True, exist_ok=True)
        out = OUTDIR / "test_sl"
        cmd = [CC] + _cflags() + ["-o", str(out), str(CTESTS / "test_sl.c")] + _link_flags(False)
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        _exe.append(out)
    return _exe[0]


def level_lib(n):
    return LIBDIR / f"feature-level-{n}" / "libneuralnetworks.so"


def _run(path, level, env=None):
    exe = _client()
    full = {k: v for k, v in os.environ.items() if not k.startswith("NNAPI_PY_")}
    full.update(env or {})
    cmd = [str(exe), str(path), str(level)]
    proc = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=120)
    rc, out, err = proc.returncode, proc.stdout, proc.stderr
    n = assert_all_passed(cmd, rc, out, err)
    assert err == "", err
    return n, out


@pytest.mark.skipif(not LIB.exists(), reason="run `make lib` first")
@pytest.mark.parametrize("level", [None, 5, 6, 7, 8], ids=lambda n: "default" if n is None else f"level-{n}")
def test_table_through_the_loader_path(level):
    path = LIB if level is None else level_lib(level)
    if not path.exists():
        pytest.skip(f"{path} not built")
    n, out = _run(path, level or 8)
    want = "106 slots (FL8 layout)" if (level or 8) == 8 else "104 slots (FL5 layout)"
    assert want in out
    assert n >= 190, out


@pytest.mark.skipif(not level_lib(1).exists(), reason="feature-level libraries not built")
@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_no_table_below_level_5(level):
    n, out = _run(level_lib(level), level)
    assert "(no symbol)" in out


@pytest.mark.skipif(not LIB.exists(), reason="run `make lib` first")
@pytest.mark.parametrize("env_level,want", [("6", "6"), ("7", "7"), ("3", "3")])
def test_default_library_follows_the_variable(env_level, want):
    n, out = _run(LIB, want, {"NNAPI_PY_FEATURE_LEVEL": env_level})
    if int(want) < 5:
        assert "(NULL table)" in out


# ---------------------------------------------------------------------------- Python side
def _add_model(code=3, relaxed=False, weights=b"\0\0\0\0"):
    from nnapi_py import constants as C
    from nnapi_py.model import Model
    m = Model()
    m.add_operand(code, (4,), 0.5 if code == C.TENSOR_QUANT8_ASYMM else 0.0, 0)
    m.add_operand(code, (4,), 0.5 if code == C.TENSOR_QUANT8_ASYMM else 0.0, 0)
    m.add_operand(C.INT32, (), 0.0, 0)
    m.add_operand(code, (4,), 0.5 if code == C.TENSOR_QUANT8_ASYMM else 0.0, 0)
    m.set_value(2, weights)
    m.add_operation(C.OPERATION_CODES["ADD"], [0, 1, 2], [3])
    m.identify([0, 1], [3])
    m.relax(relaxed)
    m.finish()
    return m


def test_data_classes_as_android_folds_them():
    from nnapi_py import constants as C, sl
    m = _add_model()
    assert sl.data_class(m, m.inputs) == sl.FLOAT32
    assert sl.data_class(m, ()) == sl.UNKNOWN
    q = _add_model(C.TENSOR_QUANT8_ASYMM)
    assert sl.data_class(q, q.outputs) == sl.QUANT
    m.types[1] = C.TENSOR_FLOAT16
    assert sl.data_class(m, m.inputs) == sl.MIXED
    m.types[0] = m.types[1] = C.TENSOR_INT32
    assert sl.data_class(m, m.inputs) == sl.OTHER


def test_arch_hash_is_the_structure_not_the_weights():
    from nnapi_py import sl
    a, b = sl.arch_hash(_add_model()), sl.arch_hash(_add_model(weights=b"\0\0\0\0"))
    assert len(a) == 32 and a == b
    assert sl.arch_hash(_add_model(relaxed=True)) != a
    assert sl.arch_hash(_add_model(8)) != a


def test_performance_figures_are_the_devices():
    from nnapi_py import constants as C, devices, sl
    with devices.emulated(devices="gpu=float-fast,npu=quant") as cfg:
        gpu, npu = cfg.devices
        rows = {t: (e, p) for t, e, p in sl.operand_performance(gpu)}
        assert rows[C.TENSOR_FLOAT32] == pytest.approx((0.8, 1.1))
        assert C.TENSOR_OEM_BYTE not in rows and len(rows) == 16
        nrows = {t: (e, p) for t, e, p in sl.operand_performance(npu)}
        assert nrows[C.TENSOR_QUANT8_ASYMM] == pytest.approx((0.7, 0.7))
        assert sl._figures(gpu, "relaxed") == pytest.approx((0.7, 1.1))


def test_diagnostics_off_by_default():
    from nnapi_py import sl
    assert sl.ACTIVE is False


@pytest.mark.skipif(not LIB.exists(), reason="run `make lib` first")
def test_table_in_a_python_host(tmp_path):
    """ctypes in a Python process (PyTorch's NNAPI backend's kind of host): the table's slots are
    called, diagnostic callbacks written in Python (they take the GIL themselves) fire from the
    computation, synchronous and asynchronous, without a deadlock."""
    code = f"""
import ctypes, sys, time
sys.path.insert(0, {str(ROOT / 'tools')!r})
import gen_sl_header as g
lib = ctypes.CDLL({str(LIB)!r})
lib.ANeuralNetworks_getSLDriverImpl.restype = ctypes.c_void_p
t = lib.ANeuralNetworks_getSLDriverImpl()
assert ctypes.cast(t, ctypes.POINTER(ctypes.c_int64))[0] == 1000008
slots = ctypes.cast(t, ctypes.POINTER(ctypes.c_void_p))
P = ctypes.c_void_p
def fn(name, res, *args):
    return ctypes.CFUNCTYPE(res, *args)(slots[1 + g.FL5_SLOTS.index(name)])
seen = []
sid = fn("SL_ANeuralNetworksDiagnosticExecutionInfo_getSessionId", ctypes.c_int32, P)
mode = fn("SL_ANeuralNetworksDiagnosticExecutionInfo_getExecutionMode", ctypes.c_int, P)
csid = fn("SL_ANeuralNetworksDiagnosticCompilationInfo_getSessionId", ctypes.c_int32, P)
CB = ctypes.CFUNCTYPE(None, P, P)
ccb = CB(lambda ctx, info: seen.append(("c", csid(info))))
ecb = CB(lambda ctx, info: seen.append(("e", sid(info), mode(info))))
fn("SL_ANeuralNetworksDiagnostic_registerCallbacks", None, CB, CB, P)(ccb, ecb, None)
class T(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int32), ("n", ctypes.c_uint32), ("d", P), ("scale", ctypes.c_float), ("zp", ctypes.c_int32)]
dims = (ctypes.c_uint32 * 1)(4)
t4, s = T(3, 1, ctypes.addressof(dims), 0, 0), T(1, 0, None, 0, 0)
m = P()
assert lib.ANeuralNetworksModel_create(ctypes.byref(m)) == 0
for ty in (t4, t4, s, t4):
    assert lib.ANeuralNetworksModel_addOperand(m, ctypes.byref(ty)) == 0
none = ctypes.c_int32(0)
assert lib.ANeuralNetworksModel_setOperandValue(m, 2, ctypes.byref(none), 4) == 0
ins, outs, io = (ctypes.c_uint32 * 3)(0, 1, 2), (ctypes.c_uint32 * 1)(3), (ctypes.c_uint32 * 2)(0, 1)
assert lib.ANeuralNetworksModel_addOperation(m, 0, 3, ins, 1, outs) == 0
assert lib.ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, io, 1, outs) == 0
assert lib.ANeuralNetworksModel_finish(m) == 0
c = P()
assert lib.ANeuralNetworksCompilation_create(m, ctypes.byref(c)) == 0
assert lib.ANeuralNetworksCompilation_finish(c) == 0
a, y = (ctypes.c_float * 4)(1, 2, 3, 4), (ctypes.c_float * 4)()
for start in (False, True):
    e = P()
    assert lib.ANeuralNetworksExecution_create(c, ctypes.byref(e)) == 0
    assert lib.ANeuralNetworksExecution_setInput(e, 0, None, a, 16) == 0
    assert lib.ANeuralNetworksExecution_setInput(e, 1, None, a, 16) == 0
    assert lib.ANeuralNetworksExecution_setOutput(e, 0, None, y, 16) == 0
    if start:
        ev = P()
        assert lib.ANeuralNetworksExecution_startCompute(e, ctypes.byref(ev)) == 0
        assert lib.ANeuralNetworksEvent_wait(ev) == 0
        lib.ANeuralNetworksEvent_free(ev)
    else:
        assert lib.ANeuralNetworksExecution_compute(e) == 0
    assert list(y) == [2, 4, 6, 8]
    lib.ANeuralNetworksExecution_free(e)
assert [k[0] for k in seen] == ["c", "e", "e"], seen
assert seen[1][1] == seen[2][1] == seen[0][1] and seen[1][2] == 2 and seen[2][2] == 1, seen
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NNAPI_PY_")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
