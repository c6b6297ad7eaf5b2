"""What Android 14's runtime rejects and nnapi_py used to accept (issue 23, cause 2), through
the C library, in default mode and under NNAPI_PY_STRICT=1 (the same answers in both: these
are Android's checks, the NDK text agrees).  ctests/test_android_rejects.c checks the same
from C."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from nnhelp import T, ffi, lib, build_graph, last_error, op_code  # noqa: E402

pytestmark = pytest.mark.skipif(lib is None, reason="build/lib/libneuralnetworks.so missing: run `make lib`")

OK, OP_FAILED, BAD_DATA, UNEXPECTED_NULL = 0, 5, 4, 3
F32, INT32, TINT32, BOOL8, MODEL = 3, 1, 4, 9, 15
CAST, LESS, IF, WHILE = (op_code(n) for n in ("CAST", "LESS", "IF", "WHILE"))


@pytest.fixture(params=["default", "strict"])
def mode(request, monkeypatch):
    if request.param == "strict":
        monkeypatch.setenv("NNAPI_PY_STRICT", "1")
    else:
        monkeypatch.delenv("NNAPI_PY_STRICT", raising=False)
    return request.param


def _type(code, dims=None):
    """An ANeuralNetworksOperandType (dims None: rank 0); returns (pointer, keepalive)."""
    d = ffi.new("uint32_t[]", list(dims)) if dims else ffi.NULL
    t = ffi.new("ANeuralNetworksOperandType*", {"type": code, "dimensionCount": len(dims or ()),
                                               "dimensions": d})
    return t, d


def _compile(model):
    cp = ffi.new("ANeuralNetworksCompilation**")
    assert lib.ANeuralNetworksCompilation_create(model, cp) == OK
    assert lib.ANeuralNetworksCompilation_finish(cp[0]) == OK
    return cp[0]


def _execution(comp):
    ep = ffi.new("ANeuralNetworksExecution**")
    assert lib.ANeuralNetworksExecution_create(comp, ep) == OK
    return ep[0]


def _add(dims, out_dims=None, fuse_input=False):
    """ADD of float tensors `dims` -> `out_dims` (default dims); the fuse code a constant, or
    a third model input.  Returns (model, compilation, keepalive)."""
    ops = [T.f32(dims), T.f32(dims), T.i32(0), T.f32(dims if out_dims is None else out_dims)]
    inputs = [0, 1, 2] if fuse_input else [0, 1]
    model, keep, _, _ = build_graph(ops, [("ADD", [0, 1, 2], [3])], inputs, [3])
    return model, _compile(model), keep


def test_event_sync_fence_fd_is_minus_one_on_every_failure(mode):
    fd = ffi.new("int*", -100)
    assert lib.ANeuralNetworksEvent_getSyncFenceFd(ffi.NULL, fd) == UNEXPECTED_NULL
    assert fd[0] == -1
    fd[0] = -100
    bogus = ffi.cast("ANeuralNetworksEvent*", 0x7a00deadbee0)
    assert lib.ANeuralNetworksEvent_getSyncFenceFd(bogus, fd) == BAD_DATA
    assert fd[0] == -1 and "not a live handle" in last_error()
    model, comp, keep = _add([2])
    a = np.ones(2, np.float32)
    out = np.zeros(2, np.float32)
    ex = _execution(comp)
    for k in (0, 1):
        assert lib.ANeuralNetworksExecution_setInput(ex, k, ffi.NULL, ffi.from_buffer(a), 8) == OK
    assert lib.ANeuralNetworksExecution_setOutput(ex, 0, ffi.NULL, ffi.from_buffer(out), 8) == OK
    ev = ffi.new("ANeuralNetworksEvent**")
    assert lib.ANeuralNetworksExecution_startCompute(ex, ev) == OK
    assert lib.ANeuralNetworksEvent_wait(ev[0]) == OK
    fd[0] = -100
    assert lib.ANeuralNetworksEvent_getSyncFenceFd(ev[0], fd) == BAD_DATA
    assert fd[0] == -1 and "not backed by a sync fence" in last_error()
    lib.ANeuralNetworksEvent_free(ev[0])
    lib.ANeuralNetworksExecution_free(ex)
    lib.ANeuralNetworksCompilation_free(comp)
    lib.ANeuralNetworksModel_free(model)


def test_memory_desc_scalar_role_after_a_rank(mode):
    model, comp, keep = _add([2], fuse_input=True)     # input 2 is an INT32 scalar
    two, zero, three = ffi.new("uint32_t[]", [2]), ffi.new("uint32_t[]", [0]), ffi.new("uint32_t[]", [3])

    def desc(rank, dims):
        dp = ffi.new("ANeuralNetworksMemoryDesc**")
        assert lib.ANeuralNetworksMemoryDesc_create(dp) == OK
        if rank is not None:
            assert lib.ANeuralNetworksMemoryDesc_setDimensions(dp[0], rank, dims) == OK
        return dp[0]

    for rank, dims in ((1, two), (1, zero)):
        d = desc(rank, dims)
        assert lib.ANeuralNetworksMemoryDesc_addInputRole(d, comp, 2, 1.0) == BAD_DATA
        assert "is a scalar but the descriptor has dimensions" in last_error()
        lib.ANeuralNetworksMemoryDesc_free(d)
    d = desc(1, three)                                  # contradicts the role's [2]
    assert lib.ANeuralNetworksMemoryDesc_addInputRole(d, comp, 0, 1.0) == BAD_DATA
    assert "incompatible dimensions" in last_error()
    lib.ANeuralNetworksMemoryDesc_free(d)
    d = desc(1, zero)                                   # [0] then [2]: combined to [2]
    assert lib.ANeuralNetworksMemoryDesc_addOutputRole(d, comp, 0, 1.0) == OK
    assert lib.ANeuralNetworksMemoryDesc_setDimensions(d, 1, three) == BAD_DATA
    lib.ANeuralNetworksMemoryDesc_free(d)
    for rank in (None, 0):                              # controls: no rank, rank 0
        d = desc(rank, ffi.NULL)
        assert lib.ANeuralNetworksMemoryDesc_addInputRole(d, comp, 2, 1.0) == OK
        assert lib.ANeuralNetworksMemoryDesc_finish(d) == OK
        lib.ANeuralNetworksMemoryDesc_free(d)
    lib.ANeuralNetworksCompilation_free(comp)
    lib.ANeuralNetworksModel_free(model)


def _finished(operand_types, op, ins, outs, model_ins, model_outs):
    mp = ffi.new("ANeuralNetworksModel**")
    assert lib.ANeuralNetworksModel_create(mp) == OK
    keep = []
    for code, dims in operand_types:
        t, d = _type(code, dims)
        keep.append(d)
        assert lib.ANeuralNetworksModel_addOperand(mp[0], t) == OK
    arr = lambda xs: ffi.new("uint32_t[]", xs)   # noqa: E731
    assert lib.ANeuralNetworksModel_addOperation(mp[0], op, len(ins), arr(ins), len(outs), arr(outs)) == OK
    assert lib.ANeuralNetworksModel_identifyInputsAndOutputs(mp[0], len(model_ins), arr(model_ins),
                                                             len(model_outs), arr(model_outs)) == OK
    assert lib.ANeuralNetworksModel_finish(mp[0]) == OK
    return mp[0]


def _control_add_operation(op, refs, data, outs, cond=(BOOL8, [1])):
    """addOperation's code for IF (refs = then, else; `cond` the condition's type) or WHILE
    (refs = cond, body); data / outs: (code, dims) of the data operands and outputs."""
    mp = ffi.new("ANeuralNetworksModel**")
    assert lib.ANeuralNetworksModel_create(mp) == OK
    m = mp[0]
    types = ([cond] if op == IF else []) + [(MODEL, None)] * 2 + list(data) + list(outs)
    keep = []
    for code, dims in types:
        t, d = _type(code, dims)
        keep.append(d)
        assert lib.ANeuralNetworksModel_addOperand(m, t) == OK
    first = 1 if op == IF else 0
    for k, ref in enumerate(refs):
        assert lib.ANeuralNetworksModel_setOperandValueFromModel(m, first + k, ref) == OK
    n_in = first + 2 + len(data)
    ins = ffi.new("uint32_t[]", list(range(n_in)))
    os_ = ffi.new("uint32_t[]", list(range(n_in, n_in + len(outs))))
    code = lib.ANeuralNetworksModel_addOperation(m, op, n_in, ins, len(outs), os_)
    msg = last_error()
    lib.ANeuralNetworksModel_free(m)
    return code, msg


def test_if_and_while_checked_against_their_models_at_add_operation(mode):
    f23, f33, i23, funk = (F32, [2, 3]), (F32, [3, 3]), (TINT32, [2, 3]), (F32, [0, 0])
    ident = _finished([f23, f23], CAST, [0], [1], [0], [1])
    cond = _finished([f23, f23, (BOOL8, [1])], LESS, [0, 1], [2], [0, 1], [2])
    body = _finished([f23, f23, f23], CAST, [0], [2], [0, 1], [2])
    try:
        assert _control_add_operation(IF, (ident, ident), [f23], [f23])[0] == OK
        assert _control_add_operation(IF, (ident, ident), [funk], [(F32, None)])[0] == OK
        for data, outs, words in (([i23], [f23], "then model input 0 has type TENSOR_FLOAT32"),
                                  ([f23, f23], [f23], "then model has 1 inputs and 1 outputs"),
                                  ([f23], [f23, f23], "then model has 1 inputs and 1 outputs"),
                                  ([f33], [f23], "then model input 0 has dimensions [2, 3]"),
                                  ([f23], [f33], "then model output 0 has dimensions [2, 3]")):
            code, msg = _control_add_operation(IF, (ident, ident), data, outs)
            assert code == BAD_DATA and "IF: " in msg and words in msg, msg
        code, msg = _control_add_operation(IF, (ident, ident), [f23], [f23], cond=(BOOL8, None))
        assert code == BAD_DATA and "TENSOR_BOOL8 of shape [1]" in msg

        assert _control_add_operation(WHILE, (cond, body), [f23, f23], [f23])[0] == OK
        for data, outs, words in (([f23, f23, f23], [f23], "condition model has 2 inputs"),
                                  ([f23, i23], [f23], "condition model input 1"),
                                  ([f23, f23], [i23], "body model output 0"),
                                  ([f23, f23], [f23, f23], "body model has 2 inputs and 1 outputs")):
            code, msg = _control_add_operation(WHILE, (cond, body), data, outs)
            assert code == BAD_DATA and "WHILE: " in msg and words in msg, msg
        code, msg = _control_add_operation(WHILE, (body, body), [f23, f23], [f23])
        assert code == BAD_DATA and "condition model's output" in msg
    finally:
        for m in (ident, cond, body):
            lib.ANeuralNetworksModel_free(m)


def test_set_input_output_types_as_check_dimension_info(mode):
    a = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float32)
    pa, po = ffi.from_buffer(a), ffi.from_buffer(out)
    t3, k3 = _type(F32, [3])
    t0, k0 = _type(F32, [0])
    t2, k2 = _type(F32, [2])
    t22, k22 = _type(F32, [2, 2])
    trank0, _ = _type(F32)

    model, comp, keep = _add([2])                       # the model fixes [2]
    ex = _execution(comp)
    for t, n, words in ((t3, 12, "input 0: dimension 0 is given as 3 but the model fixes it to 2"),
                        (t0, 8, "must be fully specified"),
                        (t22, 16, "rank 2 differs from the model's rank 1")):
        assert lib.ANeuralNetworksExecution_setInput(ex, 0, t, pa, n) == BAD_DATA
        assert words in last_error()
    assert lib.ANeuralNetworksExecution_setOutput(ex, 0, t0, po, 8) == BAD_DATA
    assert "output 0: dimension 0 is given as 0 but the model fixes it to 2" in last_error()
    assert lib.ANeuralNetworksExecution_setInput(ex, 0, t2, pa, 8) == OK
    lib.ANeuralNetworksExecution_free(ex)
    lib.ANeuralNetworksCompilation_free(comp)
    lib.ANeuralNetworksModel_free(model)

    model, comp, keep = _add([])                        # unknown rank everywhere
    ex = _execution(comp)
    assert lib.ANeuralNetworksExecution_setInput(ex, 0, trank0, pa, 4) == BAD_DATA
    assert "must be fully specified" in last_error()
    assert lib.ANeuralNetworksExecution_setOutput(ex, 0, trank0, po, 16) == OK   # an output may stay unknown
    for k in (0, 1):
        assert lib.ANeuralNetworksExecution_setInput(ex, k, t22, pa, 16) == OK
    assert lib.ANeuralNetworksExecution_compute(ex) == OK
    np.testing.assert_array_equal(out, 2 * a)
    lib.ANeuralNetworksExecution_free(ex)
    lib.ANeuralNetworksCompilation_free(comp)
    lib.ANeuralNetworksModel_free(model)


@pytest.mark.parametrize("static", [True, False], ids=["static-plan", "dynamic-shapes"])
def test_output_dimensions_given_must_match_the_computed_shape(mode, static):
    a = np.array([1, 2], np.float32)
    out = np.full(3, -1, np.float32)
    t2, k2 = _type(F32, [2])
    t3, k3 = _type(F32, [3])
    model, comp, keep = _add([2] if static else [0], out_dims=[0])
    for ot, n, want in ((t3, 12, OP_FAILED), (t2, 8, OK)):
        ex = _execution(comp)
        for k in (0, 1):
            assert lib.ANeuralNetworksExecution_setInput(ex, k, ffi.NULL if static else t2, ffi.from_buffer(a), 8) == OK
        assert lib.ANeuralNetworksExecution_setOutput(ex, 0, ot, ffi.from_buffer(out), n) == OK
        assert lib.ANeuralNetworksExecution_compute(ex) == want
        if want == OP_FAILED:
            assert "output 0: the computed shape [2] differs from the dimensions [3] given for it" in last_error()
            assert out[0] == -1                         # nothing was written
        lib.ANeuralNetworksExecution_free(ex)
    np.testing.assert_array_equal(out[:2], [2, 4])
    lib.ANeuralNetworksCompilation_free(comp)
    lib.ANeuralNetworksModel_free(model)


def test_types_given_with_memory_from_a_descriptor(mode):
    """The type must combine with the descriptor's dimensions (Android's DeviceMemoryValidator),
    and an input's dimensions must equal the shape the memory holds, at every computation."""
    model, comp, keep = _add([0])                       # dimensions unknown everywhere
    t1, k1 = _type(F32, [1])
    t2, k2 = _type(F32, [2])
    t3, k3 = _type(F32, [3])
    a = np.array([1, 2, 3], np.float32)
    out = np.zeros(3, np.float32)
    pa, po = ffi.from_buffer(a), ffi.from_buffer(out)

    def memory(dims):
        dp = ffi.new("ANeuralNetworksMemoryDesc**")
        assert lib.ANeuralNetworksMemoryDesc_create(dp) == OK
        assert lib.ANeuralNetworksMemoryDesc_setDimensions(dp[0], 1, ffi.new("uint32_t[]", dims)) == OK
        assert lib.ANeuralNetworksMemoryDesc_addOutputRole(dp[0], comp, 0, 1.0) == OK
        assert lib.ANeuralNetworksMemoryDesc_addInputRole(dp[0], comp, 0, 1.0) == OK
        assert lib.ANeuralNetworksMemoryDesc_finish(dp[0]) == OK
        mp = ffi.new("ANeuralNetworksMemory**")
        assert lib.ANeuralNetworksMemory_createFromDesc(dp[0], mp) == OK
        lib.ANeuralNetworksMemoryDesc_free(dp[0])
        return mp[0]

    def run(in0, in0_type, n, out_type=ffi.NULL, out_mem=None):
        ex = _execution(comp)
        if isinstance(in0, np.ndarray):
            assert lib.ANeuralNetworksExecution_setInput(ex, 0, in0_type, ffi.from_buffer(in0), n * 4) == OK
        else:
            assert lib.ANeuralNetworksExecution_setInputFromMemory(ex, 0, in0_type, in0, 0, 0) == OK
        assert lib.ANeuralNetworksExecution_setInput(ex, 1, in0_type, pa, n * 4) == OK
        if out_mem is None:
            assert lib.ANeuralNetworksExecution_setOutput(ex, 0, out_type, po, n * 4) == OK
        else:
            assert lib.ANeuralNetworksExecution_setOutputFromMemory(ex, 0, out_type, out_mem, 0, 0) == OK
        code = lib.ANeuralNetworksExecution_compute(ex)
        lib.ANeuralNetworksExecution_free(ex)
        return code

    fixed = memory([1])
    ex = _execution(comp)
    assert lib.ANeuralNetworksExecution_setOutputFromMemory(ex, 0, t2, fixed, 0, 0) == BAD_DATA
    assert "output 0: dimensions [2] are incompatible with the memory's [1] (from its descriptor)" in last_error()
    assert lib.ANeuralNetworksExecution_setInputFromMemory(ex, 0, t2, fixed, 0, 0) == BAD_DATA
    lib.ANeuralNetworksExecution_free(ex)
    assert run(a, t1, 1, t1, fixed) == OK               # controls: [1] written, then read as [1]
    assert run(fixed, t1, 1) == OK and out[0] == 3

    free = memory([0])
    assert run(a, t2, 2, t2, free) == OK                # the memory now holds a [2]
    assert run(free, t3, 3) == OP_FAILED
    assert "input 0: dimensions [3] differ from the shape [2] the descriptor memory holds" in last_error()
    assert run(free, t2, 2) == OK
    np.testing.assert_array_equal(out[:2], [3, 6])
    for h in (fixed, free):
        lib.ANeuralNetworksMemory_free(h)
    lib.ANeuralNetworksCompilation_free(comp)
    lib.ANeuralNetworksModel_free(model)
