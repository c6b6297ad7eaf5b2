"""What the widened fuzzer found (issue 25), one regression test per cause:

2. a memory freed while a model constant, an execution, a burst or a computation in flight
   uses it stays valid for them (released with its last user);
3. shapes computed from input values (paddings, multiples, sizes, block sizes ...) are checked
   before anything is allocated: OP_FAILED past Android's uint32 operand size, OUT_OF_MEMORY past
   NNAPI_PY_MAX_TENSOR_BYTES, each with our reason, never an internal error;
4. work sized by a parameter's value (a stride, a filter wider than the image, a sampling ratio)
   is bounded by the tensors: each call works less than BOUND_S of CPU time (and returns);
5. counts in the millions (operation inputs, ranks, model inputs, devices, dependencies, scales)
   are rejected or handled before the lists are read: each call works less than BOUND_S of CPU
   time (and returns within HANG_S of wall time).
"""
import mmap
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nnhelp  # noqa: E402
from nnhelp import ffi, lib, last_error, new_model, run_op, T, Opd, op_code  # noqa: E402

pytestmark = nnhelp.needs_library
OUT_OF_MEMORY, BAD_DATA, OP_FAILED, UNEXPECTED_NULL = 1, 4, 5, 3
RAW = re.compile(r"internal error|Traceback|\b[A-Za-z]+(Error|Exception)\b: |array is too big")
B = 1 << 28
# The bound is on the work a call does: its CPU time (time.process_time: this process, every
# thread).  The bugs did 1 << 28 steps or read lists of 25 M entries in Python and took minutes
# (or forever); the slowest call here works 0.65 s on an idle machine (a dependency list of
# 25 M events).  Not wall time: on the shared 2-core machine a call's wall time stretches with
# the other processes' load (that 0.65 s call once took 3.50 s) while its CPU time does not.
BOUND_S = 3.0
# A call that blocks without working (a wait that never ends) uses no CPU time: a wall-clock
# bound catches it, generous enough for any load (the fuzzer calls 5 s of a call a hang when it
# runs alone; here other tests and processes share the machine).
HANG_S = 30.0


def timed(fn, *args):
    w0, c0 = time.monotonic(), time.process_time()
    r = fn(*args)
    cpu, wall = time.process_time() - c0, time.monotonic() - w0
    assert cpu < BOUND_S, f"worked {cpu:.2f} s of CPU time (wall {wall:.2f} s): more than {BOUND_S:g} s"
    assert wall < HANG_S, f"took {wall:.2f} s of wall time ({cpu:.2f} s of CPU time): a call that blocks"
    return r


# ---- 2. a memory freed under its users ---------------------------------------------------------
class Shared:
    """One page of shared memory: a at 0, b at 64, out at 128 (float32[4] each)."""
    def __init__(self):
        self.fd = os.memfd_create("nnapi_py_test")
        os.ftruncate(self.fd, 4096)
        self.map = mmap.mmap(self.fd, 4096)
        self.f = np.frombuffer(self.map, np.float32)
        self.a, self.b = np.array([1, 2, 3, 4], np.float32), np.array([10, 20, 30, 40], np.float32)
        self.f[:4], self.f[16:20] = self.a, self.b
        p = ffi.new("ANeuralNetworksMemory**")
        assert lib.ANeuralNetworksMemory_createFromFd(4096, 3, self.fd, 0, p) == 0
        self.mem = p[0]

    @property
    def out(self):
        return self.f[32:36]

    def free(self):
        lib.ANeuralNetworksMemory_free(self.mem)

    def close(self):
        del self.f
        self.map.close()
        os.close(self.fd)


def _add_with_memory_constant(sh, free_after_constant=False):
    """ADD(a, b) with b a model constant in sh's memory; returns (model, compilation)."""
    m, _ = new_model([T.f32([4]), T.f32([4]), T.i32(0), T.f32([4])])
    assert lib.ANeuralNetworksModel_setOperandValueFromMemory(m, 1, sh.mem, 64, 16) == 0
    if free_after_constant:
        sh.free()
    assert lib.ANeuralNetworksModel_setOperandValue(m, 2, ffi.new("int32_t*", 0), 4) == 0
    ins = ffi.new("uint32_t[]", [0, 1, 2])
    assert lib.ANeuralNetworksModel_addOperation(m, 0, 3, ins, 1, ffi.new("uint32_t[]", [3])) == 0
    assert lib.ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, ins, 1, ffi.new("uint32_t[]", [3])) == 0
    assert lib.ANeuralNetworksModel_finish(m) == 0, last_error()
    c = ffi.new("ANeuralNetworksCompilation**")
    assert lib.ANeuralNetworksCompilation_create(m, c) == 0
    assert lib.ANeuralNetworksCompilation_finish(c[0]) == 0, last_error()
    return m, c[0]


def _memory_execution(sh, c, reusable=False):
    e = ffi.new("ANeuralNetworksExecution**")
    assert lib.ANeuralNetworksExecution_create(c, e) == 0
    if reusable:
        assert lib.ANeuralNetworksExecution_setReusable(e[0], True) == 0
    assert lib.ANeuralNetworksExecution_setInputFromMemory(e[0], 0, ffi.NULL, sh.mem, 0, 16) == 0
    assert lib.ANeuralNetworksExecution_setOutputFromMemory(e[0], 0, ffi.NULL, sh.mem, 128, 16) == 0
    return e[0]


def _open_fds():
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("when", ["constant", "execution", "burst", "in-flight", "between"])
def test_memory_freed_under_its_users_stays_valid(when):
    before = _open_fds()
    sh = Shared()
    m, c = _add_with_memory_constant(sh, free_after_constant=when == "constant")
    if when == "constant":                       # the constant's memory went before finish
        sh2 = Shared()                           # inputs and output from another memory
        e = _memory_execution(sh2, c)
        assert lib.ANeuralNetworksExecution_compute(e) == 0, last_error()
        np.testing.assert_array_equal(sh2.out, sh2.a + sh.b)
        lib.ANeuralNetworksExecution_free(e)
        sh2.free()
        sh2.close()
    else:
        e = _memory_execution(sh, c, reusable=when in ("between", "burst"))
        if when == "execution":
            sh.free()
            assert lib.ANeuralNetworksExecution_compute(e) == 0, last_error()
        elif when == "burst":
            b = ffi.new("ANeuralNetworksBurst**")
            assert lib.ANeuralNetworksBurst_create(c, b) == 0
            assert lib.ANeuralNetworksExecution_burstCompute(e, b[0]) == 0, last_error()
            sh.free()
            sh.out[:] = 0
            assert lib.ANeuralNetworksExecution_burstCompute(e, b[0]) == 0, last_error()
            lib.ANeuralNetworksBurst_free(b[0])
        elif when == "in-flight":
            ev = ffi.new("ANeuralNetworksEvent**")
            assert lib.ANeuralNetworksExecution_startCompute(e, ev) == 0
            sh.free()
            assert lib.ANeuralNetworksEvent_wait(ev[0]) == 0, last_error()
            lib.ANeuralNetworksEvent_free(ev[0])
        else:
            assert lib.ANeuralNetworksExecution_compute(e) == 0
            sh.free()
            sh.out[:] = 0
            assert lib.ANeuralNetworksExecution_compute(e) == 0, last_error()   # ... its users keep it
        np.testing.assert_array_equal(sh.out, sh.a + sh.b)
        lib.ANeuralNetworksExecution_free(e)
    lib.ANeuralNetworksCompilation_free(c)
    lib.ANeuralNetworksModel_free(m)
    sh.close()
    import gc
    gc.collect()
    time.sleep(0.05)                             # a worker thread drops its finished task
    assert _open_fds() <= before, "the memory's fd outlived its last user"


def test_freed_memory_handle_is_rejected_as_an_argument():
    sh = Shared()
    sh.free()
    m, _ = new_model([T.f32([4])])
    assert lib.ANeuralNetworksModel_setOperandValueFromMemory(m, 0, sh.mem, 0, 16) == BAD_DATA
    assert "not a live handle" in last_error()
    lib.ANeuralNetworksModel_free(m)
    sh.close()


# ---- 3. sizes from input values ----------------------------------------------------------------
I32 = lambda v: Opd("INT32", [], v, const=False)     # noqa: E731  (a scalar given as a model input)
X22 = lambda: T.f32([2, 2], [1, 2, 3, 4])             # noqa: E731
X4 = lambda: T.f32([1, 2, 2, 1], [1, 2, 3, 4])        # noqa: E731
BIG = (1 << 31) - 1
SIZE_CASES = {
    "PAD": ("PAD", [X22(), T.i32t([2, 2], [[0, BIG], [0, BIG]])], 1),
    "PAD huge": ("PAD", [X22(), T.i32t([2, 2], [[0, 1 << 30], [0, 1 << 30]])], 1),
    "PAD_V2": ("PAD_V2", [X22(), T.i32t([2, 2], [[0, BIG], [0, BIG]]), T.f32s(0.0)], 1),
    "TILE": ("TILE", [T.f32([2], [1, 2]), T.i32t([1], [BIG])], 1),
    "TILE 2-D": ("TILE", [X22(), T.i32t([2], [BIG, BIG])], 1),
    "FILL": ("FILL", [T.i32t([3], [1 << 30] * 3), T.f32s(1.0)], 1),
    "RESIZE_BILINEAR": ("RESIZE_BILINEAR", [X4(), I32(BIG), I32(BIG)], 1),
    "RESIZE_NEAREST_NEIGHBOR": ("RESIZE_NEAREST_NEIGHBOR", [X4(), I32(BIG), I32(BIG)], 1),
    "SPACE_TO_BATCH_ND": ("SPACE_TO_BATCH_ND", [X4(), T.i32t([2], [B, B]), T.i32t([2, 2], [[0, B - 2], [0, B - 2]])], 1),
    "RESHAPE": ("RESHAPE", [T.f32([2], [1, 2]), T.i32t([2], [1 << 30, 1 << 30])], 1),
    "SLICE": ("SLICE", [T.f32([2], [1, 2]), T.i32t([1], [0]), T.i32t([1], [BIG])], 1),
    "TOPK_V2": ("TOPK_V2", [T.f32([2], [1, 2]), I32(BIG)], 2),
    "EXPAND_DIMS": ("EXPAND_DIMS", [T.f32([2], [1, 2]), I32(BIG)], 1),
    "MIRROR_PAD": ("MIRROR_PAD", [X22(), T.i32t([2, 2], [[0, 1 << 30], [0, 1 << 30]]), T.i32(0)], 1),
    "GATHER": ("GATHER", [T.f32([3], [1, 2, 3]), T.i32(0), T.i32t([2], [B, -B])], 1),
}


def _unknown_output(like_rank):
    return T.f32([0] * like_rank)


@pytest.mark.parametrize("case", sorted(SIZE_CASES))
def test_sizes_from_input_values_give_a_documented_code(case):
    op, ins, nout = SIZE_CASES[case]
    rank = {"FILL": 3, "RESIZE_BILINEAR": 4, "RESIZE_NEAREST_NEIGHBOR": 4, "SPACE_TO_BATCH_ND": 4, "RESHAPE": 2,
            "SLICE": 1, "TOPK_V2": 1, "EXPAND_DIMS": 2, "GATHER": 1, "TILE": len(ins[0].dims)}.get(op, 2)
    outs = [_unknown_output(rank)] + ([T.i32t([0])] if nout == 2 else [])
    code, msg = timed(run_op, op, ins, outs)
    assert code in (OP_FAILED, OUT_OF_MEMORY, BAD_DATA), (code, msg)
    assert not RAW.search(str(msg)), msg
    assert op in str(msg)


def test_computed_size_past_uint32_names_the_rule():
    code, msg = run_op("PAD", [X22(), T.i32t([2, 2], [[0, BIG], [0, BIG]])], [T.f32([0, 0])])
    assert code == OP_FAILED
    assert "computed output shape" in msg and "more than an operand can hold (2^32 - 1" in msg


def test_computed_size_past_the_tensor_budget_is_out_of_memory():
    """NNAPI_PY_MAX_TENSOR_BYTES (default a quarter of physical memory) bounds one computed tensor."""
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from nnhelp import run_op, T\n"
            "c, m = run_op('PAD', [T.f32([2, 2], [1, 2, 3, 4]), T.i32t([2, 2], [[0, 1000], [0, 1000]])], [T.f32([0, 0])])\n"
            "print(c); print(m)\n"
            "c, m = run_op('PAD', [T.f32([2, 2], [1, 2, 3, 4]), T.i32t([2, 2], [[0, 10], [0, 10]])], [T.f32([0, 0])])\n"
            "print(c)\n") % os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "NNAPI_PY_MAX_TENSOR_BYTES": "65536"})
    lines = r.stdout.splitlines()
    assert lines[0] == str(OUT_OF_MEMORY), r.stdout + r.stderr
    assert "NNAPI_PY_MAX_TENSOR_BYTES" in lines[1] and "65536" in lines[1]
    assert lines[2] == "0"                        # 12 x 12 floats fit


# ---- 4. work proportional to a parameter value ------------------------------------------------
def _i(v):
    return Opd("INT32", [], v)


X = lambda: T.f32([1, 3, 3, 2], np.arange(18))        # noqa: E731
PARAM_CASES = {
    # the case: one output pixel, 1 << 28 stride phases
    "DEPTHWISE_CONV_2D stride": ("DEPTHWISE_CONV_2D", [X(), T.f32([1, 2, 2, 2], np.ones(8), const=True),
                                                       T.f32([2], [0, 0], const=True)]
                                 + [_i(v) for v in (0, 0, 0, 0, B, B, 1, 0)], 0),
    "DEPTHWISE_CONV_2D stride+dilation": ("DEPTHWISE_CONV_2D", [X(), T.f32([1, 2, 2, 2], np.ones(8), const=True),
                                                                T.f32([2], [0, 0], const=True)]
                                          + [_i(v) for v in (0, 0, 0, 0, B, B, 1, 0)]
                                          + [Opd("BOOL", [], 0), _i(1), _i(1)], 0),
    "CONV_2D stride": ("CONV_2D", [X(), T.f32([2, 2, 2, 2], np.ones(16), const=True), T.f32([2], [0, 0], const=True)]
                       + [_i(v) for v in (0, 0, 0, 0, B, B, 0)], 0),
    "GROUPED_CONV_2D stride": ("GROUPED_CONV_2D", [X(), T.f32([2, 2, 2, 1], np.ones(8), const=True),
                                                   T.f32([2], [0, 0], const=True)]
                               + [_i(v) for v in (0, 0, 0, 0, B, B, 2, 0)] + [Opd("BOOL", [], 0)], 0),
    # a filter as wide as the paddings with a stride as large: few outputs, 1 << 28 filter taps
    "AVERAGE_POOL_2D wide filter": ("AVERAGE_POOL_2D", [X()] + [_i(v) for v in (B - 1,) * 4 + (B, B, B, B, 0)], 0),
    "MAX_POOL_2D wide filter": ("MAX_POOL_2D", [X()] + [_i(v) for v in (B - 1,) * 4 + (B, B, B, B, 0)], 0),
    "L2_POOL_2D wide filter": ("L2_POOL_2D", [X()] + [_i(v) for v in (B - 1,) * 4 + (B, B, B, B, 0)], 0),
    "LOCAL_RESPONSE_NORMALIZATION radius": ("LOCAL_RESPONSE_NORMALIZATION",
                                            [X(), _i(BIG), T.f32s(1.0), T.f32s(1.0), T.f32s(0.5)], 0),
    "TRANSPOSE_CONV_2D stride": ("TRANSPOSE_CONV_2D", [X(), T.f32([2, 2, 2, 2], np.ones(16), const=True),
                                                       T.f32([2], [0, 0], const=True)]
                                 + [_i(v) for v in (0, 0, 0, 0, B, B, 0)] + [Opd("BOOL", [], 0)], OP_FAILED),
    "ROI_ALIGN sampling ratio": ("ROI_ALIGN", [X(), T.f32([1, 4], [0, 0, 2, 2]), T.i32t([1], [0]), _i(2), _i(2),
                                               T.f32s(1.0), T.f32s(1.0), _i(B), _i(B), Opd("BOOL", [], 0)], OP_FAILED),
}


@pytest.mark.parametrize("case", sorted(PARAM_CASES))
def test_work_is_bounded_by_the_tensors_not_by_a_parameter(case):
    op, ins, want = PARAM_CASES[case]
    code, res = timed(run_op, op, ins, [T.f32([0, 0, 0, 0])])
    assert code == want, res
    if code:
        assert not RAW.search(res), res


def test_depthwise_huge_stride_result():
    code, res = run_op(*PARAM_CASES["DEPTHWISE_CONV_2D stride"][:2], [T.f32([0, 0, 0, 0])])
    assert code == 0
    x = np.arange(18, dtype=np.float32).reshape(3, 3, 2)
    np.testing.assert_array_equal(res[0].reshape(-1), x[:2, :2].sum(axis=(0, 1)))


def test_pool_wide_filter_result():
    """Window of output (0, 0) covers input row/column 0 only, (1, 1) rows/columns 1..2."""
    code, res = run_op(*PARAM_CASES["AVERAGE_POOL_2D wide filter"][:2], [T.f32([0, 0, 0, 0])])
    assert code == 0
    x = np.arange(18, dtype=np.float32).reshape(3, 3, 2)
    np.testing.assert_array_equal(res[0][0, 0, 0], x[0, 0])
    np.testing.assert_array_equal(res[0][0, 1, 1], x[1:, 1:].mean(axis=(0, 1)))


# ---- 5. counts in the millions -----------------------------------------------------------------
N = 25_165_824              # the count: 96 MiB of uint32


@pytest.fixture(scope="module")
def huge():
    zeros = ffi.new("uint32_t[]", N)            # every entry 0: a valid operand index
    ptrs = ffi.new("uintptr_t[]", N)
    return zeros, ptrs


@pytest.fixture
def model():
    m, _ = new_model([T.f32([4])] * 3)
    yield m
    lib.ANeuralNetworksModel_free(m)


@pytest.mark.parametrize("op", ["ADD", "CONCATENATION", "IF", "SPLIT", "BIDIRECTIONAL_SEQUENCE_LSTM"])
def test_add_operation_with_millions_of_inputs_returns_at_once(model, huge, op):
    zeros, _ = huge
    rc = timed(lib.ANeuralNetworksModel_addOperation, model, op_code(op), N, zeros, 1, zeros)
    assert rc == BAD_DATA
    assert f"{N} inputs" in last_error()
    rc = timed(lib.ANeuralNetworksModel_addOperation, model, op_code(op), 2, zeros, N, zeros)
    assert rc == BAD_DATA
    assert f"{N} outputs" in last_error()


def test_identify_with_millions_of_entries_returns_at_once(model, huge):
    zeros, _ = huge
    assert timed(lib.ANeuralNetworksModel_identifyInputsAndOutputs, model, N, zeros, N, zeros) == BAD_DATA
    assert "more operands than the model has" in last_error()


def test_huge_dimension_counts_return_at_once(model, huge):
    zeros, _ = huge
    t = ffi.new("ANeuralNetworksOperandType*", {"type": 3, "dimensionCount": N,
                                                "dimensions": ffi.cast("uint32_t *", zeros)})
    assert timed(lib.ANeuralNetworksModel_addOperand, model, t) == BAD_DATA
    assert f"dimensionCount {N}" in last_error()
    d = ffi.new("ANeuralNetworksMemoryDesc**")
    assert lib.ANeuralNetworksMemoryDesc_create(d) == 0
    assert timed(lib.ANeuralNetworksMemoryDesc_setDimensions, d[0], N, zeros) == BAD_DATA
    lib.ANeuralNetworksMemoryDesc_free(d[0])
    # an execution's input typed with millions of dimensions
    from test_reliability import _add_model
    m, c = _add_model()
    e = ffi.new("ANeuralNetworksExecution**")
    assert lib.ANeuralNetworksExecution_create(c, e) == 0
    buf = ffi.new("float[]", 4)
    assert timed(lib.ANeuralNetworksExecution_setInput, e[0], 0, t, buf, 16) == BAD_DATA
    lib.ANeuralNetworksExecution_free(e[0])
    lib.ANeuralNetworksCompilation_free(c)
    lib.ANeuralNetworksModel_free(m)


def test_millions_of_devices_or_dependencies_return_at_once(model, huge):
    _, ptrs = huge
    arr = np.frombuffer(ffi.buffer(ptrs), np.uintp)
    dev = ffi.new("ANeuralNetworksDevice**")
    assert lib.ANeuralNetworks_getDevice(0, dev) == 0
    arr[:] = int(ffi.cast("uintptr_t", dev[0]))          # one device, N times
    c = ffi.new("ANeuralNetworksCompilation**")
    rc = timed(lib.ANeuralNetworksCompilation_createForDevices, model,
               ffi.cast("const ANeuralNetworksDevice* const*", ptrs), N, c)
    assert rc == BAD_DATA and "numDevices" in last_error()
    arr[N - 1] = 0
    rc = timed(lib.ANeuralNetworksCompilation_createForDevices, model,
               ffi.cast("const ANeuralNetworksDevice* const*", ptrs), N, c)
    assert rc == UNEXPECTED_NULL
    # a dependency list of one finished event, N times: waits on it once
    from test_reliability import _add_model
    m, comp = _add_model()
    execs, bufs = [], [ffi.new("float[]", 4) for _ in range(3)]
    for _ in range(2):
        e = ffi.new("ANeuralNetworksExecution**")
        assert lib.ANeuralNetworksExecution_create(comp, e) == 0
        for k in range(2):
            assert lib.ANeuralNetworksExecution_setInput(e[0], k, ffi.NULL, bufs[k], 16) == 0
        assert lib.ANeuralNetworksExecution_setOutput(e[0], 0, ffi.NULL, bufs[2], 16) == 0
        execs.append(e[0])
    ev = ffi.new("ANeuralNetworksEvent**")
    assert lib.ANeuralNetworksExecution_startCompute(execs[0], ev) == 0
    assert lib.ANeuralNetworksEvent_wait(ev[0]) == 0
    arr[:] = int(ffi.cast("uintptr_t", ev[0]))
    ev2 = ffi.new("ANeuralNetworksEvent**")
    rc = timed(lib.ANeuralNetworksExecution_startComputeWithDependencies, execs[1],
               ffi.cast("const ANeuralNetworksEvent* const*", ptrs), N, 0, ev2)
    assert rc == 0, last_error()
    assert lib.ANeuralNetworksEvent_wait(ev2[0]) == 0
    lib.ANeuralNetworksEvent_free(ev2[0])
    arr[N // 2] = 0x1230                                # one stale handle among them
    rc = timed(lib.ANeuralNetworksExecution_startComputeWithDependencies, execs[1],
               ffi.cast("const ANeuralNetworksEvent* const*", ptrs), N, 0, ev2)
    assert rc == BAD_DATA and "not a live handle" in last_error()
    lib.ANeuralNetworksEvent_free(ev[0])
    for e in execs:
        lib.ANeuralNetworksExecution_free(e)
    lib.ANeuralNetworksCompilation_free(comp)
    lib.ANeuralNetworksModel_free(m)


def test_millions_of_channel_scales_return_at_once(huge):
    zeros, _ = huge
    m, _ = new_model([Opd("TENSOR_QUANT8_SYMM_PER_CHANNEL", [4])])
    cq = ffi.new("ANeuralNetworksSymmPerChannelQuantParams*", {"channelDim": 0, "scaleCount": N,
                                                               "scales": ffi.cast("float *", zeros)})
    assert timed(lib.ANeuralNetworksModel_setOperandSymmPerChannelQuantParams, m, 0, cq) == BAD_DATA
    assert "scaleCount" in last_error()
    lib.ANeuralNetworksModel_free(m)


@pytest.mark.parametrize("op", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
def test_resize_of_an_empty_batch_to_a_huge_size_builds_nothing(op):
    """Zero batches: nothing to write, so no per-axis tables of 1 << 28 entries (fuzzer finding)."""
    code, res = timed(run_op, op, [T.f32([0, 2, 2, 1], np.zeros((0, 2, 2, 1))), I32(3), I32(B), T.b(False)],
                      [T.f32([0, 0, 0, 0])])
    assert code == 0, res
    assert res[0].shape == (0, B, 3, 1)


def test_convolution_padded_by_huge_parameters_is_out_of_memory_with_its_reason():
    """Paddings of 2^30 with a stride as large: a few output pixels, but the kernel's padded copy of
    the input would have 2^31 rows.  A documented limit (docs/decisions.md): OUT_OF_MEMORY naming
    the working buffer, promptly; never an internal error."""
    P = 1 << 30
    ins = [X(), T.f32([2, 2, 2, 2], np.ones(16), const=True), T.f32([2], [0, 0], const=True)] + \
        [_i(v) for v in (P, P, P, P, P, P, 0)]
    code, res = timed(run_op, "CONV_2D", ins, [T.f32([0, 0, 0, 0])])
    assert code == OUT_OF_MEMORY, res
    assert "CONV_2D" in res and "working buffer" in res and not RAW.search(res)
