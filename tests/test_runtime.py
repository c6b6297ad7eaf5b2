"""Runtime behaviour seen through the C library from Python (cffi ABI mode)."""
import os
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from nnhelp import ROOT, LIB_PATH, T, Opd, ffi, lib, run_op, build_model, last_error  # noqa: E402

pytestmark = pytest.mark.skipif(lib is None, reason="build/lib/libneuralnetworks.so missing: run `make lib`")

BAD_DATA, BAD_STATE, UNEXPECTED_NULL, OUTPUT_INSUFFICIENT_SIZE = 4, 6, 3, 8


@pytest.mark.strict_mode
def test_add_float_and_reason_readable_from_python():
    code, outs = run_op("ADD", [T.f32([3], [1, 2, 3]), T.f32([3], [10, 20, 30]), T.i32(0)], [T.f32([3])])
    assert code == 0
    np.testing.assert_array_equal(outs[0], [11, 22, 33])
    code, msg = run_op("ADD", [T.f32([3], [1, 2, 3]), T.f32([2], [1, 2]), T.i32(0)], [T.f32([3])])
    assert code == BAD_DATA and "broadcast" in msg
    import nnapi_py
    assert nnapi_py.last_error()[0] == BAD_DATA
    assert "not broadcast-compatible" in nnapi_py.last_error()[1]
    assert "not broadcast-compatible" in last_error()


def test_garbage_foreign_and_null_handles():
    assert lib.ANeuralNetworksExecution_compute(ffi.cast("ANeuralNetworksExecution*", 0x1234)) == BAD_DATA
    assert "not a live handle" in last_error()
    m = ffi.new("ANeuralNetworksModel**")
    assert lib.ANeuralNetworksModel_create(m) == 0
    assert lib.ANeuralNetworksExecution_compute(ffi.cast("ANeuralNetworksExecution*", m[0])) == BAD_DATA
    assert "is an ANeuralNetworksModel" in last_error()
    assert lib.ANeuralNetworksExecution_compute(ffi.NULL) == UNEXPECTED_NULL
    lib.ANeuralNetworksModel_free(m[0])
    lib.ANeuralNetworksModel_free(m[0])            # double free is harmless
    assert lib.ANeuralNetworksModel_finish(m[0]) == BAD_DATA


def test_small_values_are_copied_at_once():
    # <= 128 bytes: copied by setOperandValue; changing the buffer afterwards has no effect
    model, keep, _ = build_model("ADD", [T.f32([2]), Opd(3, [2], [1, 1], const=True), T.i32(0)], [T.f32([2])])
    lib.ANeuralNetworksModel_free(model)
    mp = ffi.new("ANeuralNetworksModel**")
    lib.ANeuralNetworksModel_create(mp)
    dims = ffi.new("uint32_t[]", [2])
    t = ffi.new("ANeuralNetworksOperandType*", {"type": 3, "dimensionCount": 1, "dimensions": dims})
    s = ffi.new("ANeuralNetworksOperandType*", {"type": 1})
    for x in (t, t, s, t):
        assert lib.ANeuralNetworksModel_addOperand(mp[0], x) == 0
    const = np.array([1, 1], np.float32)
    assert lib.ANeuralNetworksModel_setOperandValue(mp[0], 1, ffi.from_buffer(const), 8) == 0
    const[:] = 100                                    # too late: the 8 bytes were copied
    fuse = ffi.new("int32_t*", 0)
    assert lib.ANeuralNetworksModel_setOperandValue(mp[0], 2, fuse, 4) == 0
    assert lib.ANeuralNetworksModel_setOperandValue(mp[0], 2, fuse, 8) == BAD_DATA   # exact length rule
    assert lib.ANeuralNetworksModel_setOperandValue(mp[0], 2, ffi.NULL, 4) == UNEXPECTED_NULL
    ins, outs = ffi.new("uint32_t[]", [0, 1, 2]), ffi.new("uint32_t[]", [3])
    assert lib.ANeuralNetworksModel_addOperation(mp[0], 0, 3, ins, 1, outs) == 0
    assert lib.ANeuralNetworksModel_identifyInputsAndOutputs(mp[0], 1, ffi.new("uint32_t[]", [0]), 1, outs) == 0
    assert lib.ANeuralNetworksModel_finish(mp[0]) == 0
    assert lib.ANeuralNetworksModel_finish(mp[0]) == BAD_STATE
    c = ffi.new("ANeuralNetworksCompilation**")
    assert lib.ANeuralNetworksCompilation_create(mp[0], c) == 0
    assert lib.ANeuralNetworksCompilation_finish(c[0]) == 0
    e = ffi.new("ANeuralNetworksExecution**")
    assert lib.ANeuralNetworksExecution_create(c[0], e) == 0
    a, o = np.array([1, 2], np.float32), np.zeros(2, np.float32)
    assert lib.ANeuralNetworksExecution_setInput(e[0], 0, ffi.NULL, ffi.from_buffer(a), 8) == 0
    assert lib.ANeuralNetworksExecution_setOutput(e[0], 0, ffi.NULL, ffi.from_buffer(o), 8) == 0
    assert lib.ANeuralNetworksExecution_compute(e[0]) == 0
    np.testing.assert_array_equal(o, [2, 3])
    lib.ANeuralNetworksExecution_free(e[0])
    lib.ANeuralNetworksCompilation_free(c[0])
    lib.ANeuralNetworksModel_free(mp[0])


def test_dynamic_output_shape_and_insufficient_size():
    # output declared [0, 0]: its shape is known only at execution
    code, outs = run_op("ADD", [T.f32([2, 1], [1, 2]), T.f32([3], [10, 20, 30]), T.i32(0)], [T.f32([0, 0])])
    assert code == 0 and outs[0].shape == (2, 3)
    code, msg = run_op("ADD", [T.f32([2, 1], [1, 2]), T.f32([3], [10, 20, 30]), T.i32(0)], [T.f32([0, 0])],
                       out_dims=[4])
    assert code == OUTPUT_INSUFFICIENT_SIZE


def test_trace_env_prints_errors_to_stderr():
    code = ("import sys; sys.path.insert(0, %r); from nnhelp import lib, ffi; "
            "lib.ANeuralNetworksModel_finish(ffi.cast('ANeuralNetworksModel*', 0x40))" % os.path.dirname(__file__))
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, NNAPI_PY_TRACE="errors"),
                       capture_output=True, text=True, timeout=60)
    assert "ANeuralNetworksModel_finish -> BAD_DATA" in r.stderr


def test_quantized_multiplier_matches_integer_reference():
    from nnapi_py.ops import quant as Q

    def srdhm(a, b):
        if a == b == -(1 << 31):
            return (1 << 31) - 1
        ab = a * b
        nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
        v = ab + nudge
        return v // (1 << 31) if v >= 0 else -((-v) // (1 << 31))

    def rdbpot(x, e):
        mask = (1 << e) - 1
        rem = x & mask
        thr = (mask >> 1) + (1 if x < 0 else 0)
        return (x >> e) + (1 if rem > thr else 0)

    rng = np.random.default_rng(0)
    for real in (0.0003, 0.25, 0.75, 0.999, 1.5, 3.7):
        q, shift = Q.quantize_multiplier(real)
        xs = rng.integers(-(1 << 20), 1 << 20, 200)
        got = Q.multiply_by_quantized_multiplier(xs, q, shift)
        want = [rdbpot(srdhm(int(x) << max(shift, 0), q), max(-shift, 0)) for x in xs]
        np.testing.assert_array_equal(got, want)
        np.testing.assert_allclose(got, np.round(xs * real), atol=1)


def test_library_loaded_by_full_path_then_bare_name():
    # a second dlopen by bare name finds the already loaded library through its SONAME
    code = ("import ctypes, cffi; l = ctypes.CDLL(%r); ffi = cffi.FFI(); "
            "ffi.cdef('int ANeuralNetworks_getDeviceCount(uint32_t*);'); "
            "l2 = ffi.dlopen('libneuralnetworks.so'); n = ffi.new('uint32_t*'); "
            "print(l2.ANeuralNetworks_getDeviceCount(n), n[0])" % LIB_PATH)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/")
    assert r.stdout.split() == ["0", "1"], r.stderr


def test_every_reason_names_its_function():
    """Issue 26.11: a reason names the function that failed, whichever layer raised it (the
    prefix is added where every reason is recorded, errors.set_last), once."""
    m = ffi.new("ANeuralNetworksModel**")
    assert lib.ANeuralNetworksModel_create(m) == 0
    t = ffi.new("ANeuralNetworksOperandType*", {"type": 0, "dimensionCount": 0, "dimensions": ffi.NULL})
    assert lib.ANeuralNetworksModel_addOperand(m[0], t) == 0
    idx = ffi.new("uint32_t[]", [0])
    assert lib.ANeuralNetworksModel_identifyInputsAndOutputs(m[0], 1, idx, 1, idx) == BAD_DATA
    assert last_error().startswith("ANeuralNetworksModel_identifyInputsAndOutputs: ")
    assert lib.ANeuralNetworksModel_finish(m[0]) == BAD_DATA          # no operations
    assert last_error() == "ANeuralNetworksModel_finish: the model has no operations"
    lib.ANeuralNetworksModel_free(m[0])
    done, _keep, _ = build_model("ADD", [T.f32([2]), T.f32([2]), T.i32(0)], [T.f32([2])])   # finished
    assert lib.ANeuralNetworksModel_addOperand(done, t) == BAD_STATE
    assert last_error() == ("ANeuralNetworksModel_addOperand: the model has been finished and can no longer "
                            "be modified")
    assert lib.ANeuralNetworksModel_finish(done) == BAD_STATE         # already names it: not doubled
    assert last_error() == "ANeuralNetworksModel_finish was already called on this model"
    assert lib.ANeuralNetworksExecution_compute(ffi.NULL) == UNEXPECTED_NULL
    assert last_error().startswith("ANeuralNetworksExecution_compute: ")
    import nnapi_py as nn
    bad = nn.Model()
    a = bad.input("a", nn.float32, (2,))
    bad.output(bad.op("ADD", a, a, 9), "y")       # FuseCode 9: checked at execution, as Android does
    c = bad.compile()
    with pytest.raises(nn.NNAPIError) as e:
        c.run({"a": np.zeros(2, np.float32)})
    assert e.value.reason.startswith("ANeuralNetworksExecution_compute: ")
    assert str(e.value).count("ANeuralNetworksExecution_compute") == 1     # the message does not repeat it


def test_a_reason_passed_on_names_only_the_called_function():
    """A failed computation's reason reaches burstCompute and Event_wait with the function the
    client called, not the inner computation's name as well."""
    import re
    import nnapi_py as nn
    bad = nn.Model()
    a = bad.input("a", nn.float32, (2,))
    bad.output(bad.op("ADD", a, a, 9), "y")       # FuseCode 9: fails at execution
    c = bad.compile()
    x = {"a": np.zeros(2, np.float32)}
    for run, func in ((c.run, "ANeuralNetworksExecution_compute"),
                      (c.burst().run, "ANeuralNetworksExecution_burstCompute"),
                      (c.run_async, "ANeuralNetworksEvent_wait")):
        with pytest.raises(nn.NNAPIError) as e:
            run(x)
        assert e.value.reason.startswith(func + ": "), e.value.reason
        assert re.findall(r"ANeuralNetworks\w+: ", e.value.reason) == [func + ": "], e.value.reason
        assert "fused activation" in e.value.reason
