"""Issue 23, cause 1: each rule is checked where Android 14 checks it.

Android's addOperation (and Model_finish) run the operation's validate(): operand counts,
types, input rank limits, feature level.  Everything else -- output shapes against the inputs,
fixed or derived quantization, parameter shapes and values -- is checked when the driver
prepares the operation: the model and the compilation succeed and the computation fails with
OP_FAILED ("...: checked at execution, as Android does").  NNAPI_PY_STRICT=1 reports the same
rule at the earliest point (BAD_DATA), as a lint.  docs/decisions.md lists the moved checks."""
import numpy as np
import pytest

from nnhelp import T, Opd, ffi, lib, run_graph, add_op_code, op_fails_at_execution, last_error, AT_EXECUTION, \
    build_graph

Q8 = 5


def q8(dims, data=None, scale=1 / 256, zp=0, const=False):
    return Opd(Q8, dims, data, scale, zp, const)


def _both(op, ins, outs, *words, strict_stage):
    """Default: model and compilation succeed, compute OP_FAILED naming the rule; strict:
    BAD_DATA at strict_stage."""
    return op_fails_at_execution(op, ins, outs, *words, strict_stage=strict_stage)


@pytest.fixture
def default_mode(monkeypatch):
    monkeypatch.setenv("NNAPI_PY_STRICT", "0")


def test_relu_output_rank_checked_at_execution():
    msg, _ = _both("RELU", [T.f32([3], [1, -2, 3])], [T.f32([1, 1, 1, 3])],
                   "RELU", "output 0 has rank 4, expected 1", strict_stage="addOperation")
    assert msg.startswith("compute -> 5: ANeuralNetworksExecution_compute: operation 0: RELU")


def test_relu_output_rank_model_and_compilation_succeed(default_mode):
    """The point of failure: addOperation, Model_finish and Compilation_finish succeed."""
    model, keep, ins, outs = build_graph([T.f32([3]), T.f32([1, 1, 1, 3])], [("RELU", [0], [1])])
    comp = ffi.new("ANeuralNetworksCompilation**")
    try:
        assert lib.ANeuralNetworksCompilation_create(model, comp) == 0
        assert lib.ANeuralNetworksCompilation_finish(comp[0]) == 0
    finally:
        lib.ANeuralNetworksCompilation_free(comp[0])
        lib.ANeuralNetworksModel_free(model)


def test_input_rank_limit_stays_at_add_operation(default_mode):
    """Android's validate() checks RELU's input rank <= 4: still BAD_DATA at addOperation."""
    code, msg = add_op_code("RELU", [T.f32([1, 1, 1, 1, 2])], [T.f32([1, 1, 1, 1, 2])])
    assert code == 4 and "addOperation" in msg and "rank 5" in msg, msg


def test_wrong_output_type_stays_at_add_operation(default_mode):
    code, msg = add_op_code("RELU", [T.f32([3])], [T.i32t([3])])
    assert code == 4 and "addOperation" in msg, msg


@pytest.mark.parametrize("op, zp", [("TANH", 128), ("LOGISTIC", 0), ("SOFTMAX", 0)])
def test_fixed_output_quantization_checked_at_execution(op, zp):
    ins = [q8([4], [1, 2, 3, 4], scale=0.5, zp=zp)]
    if op == "SOFTMAX":
        ins.append(T.f32s(1.0))
    _both(op, ins, [q8([4], scale=0.5, zp=3)], op, "output 0 must have scale", strict_stage="addOperation")


def test_conv_bias_scale_checked_at_execution():
    ins = [q8([1, 2, 2, 1], [1, 2, 3, 4], 0.5, 0), q8([1, 1, 1, 1], [2], 0.5, 0, const=True),
           Opd(4, [1], [0], 0.3, 0, const=True), T.i32(0), T.i32(0), T.i32(0), T.i32(0), T.i32(1), T.i32(1),
           T.i32(0)]
    _both("CONV_2D", ins, [q8([1, 2, 2, 1], scale=1.0)], "CONV_2D", "input 2 (bias) scale",
          strict_stage="addOperation")


def test_fully_connected_bias_scale_checked_at_execution():
    ins = [q8([1, 2], [1, 2], 0.5, 0), q8([1, 2], [1, 1], 0.5, 0, const=True),
           Opd(4, [1], [0], 0.3, 0, const=True), T.i32(0)]
    _both("FULLY_CONNECTED", ins, [q8([1, 1], scale=1.0)], "FULLY_CONNECTED", "bias",
          strict_stage="addOperation")


def test_pad_paddings_shape_checked_at_execution():
    """PAD_V2-style 1-D paddings: Android's validate() accepts any paddings shape."""
    _both("PAD", [T.f32([2, 2], [1, 2, 3, 4]), T.i32t([4], [0, 1, 0, 1], const=True)], [T.f32([2, 4])],
          "PAD", "input 1 (paddings)", strict_stage="addOperation")


def test_space_to_batch_paddings_shape_checked_at_execution():
    ins = [T.f32([1, 2, 2, 1], [1, 2, 3, 4]), T.i32t([2], [1, 1], const=True), T.i32t([2], [0, 0], const=True)]
    _both("SPACE_TO_BATCH_ND", ins, [T.f32([1, 2, 2, 1])], "SPACE_TO_BATCH_ND", "input 2 (paddings)",
          strict_stage="addOperation")


def test_transpose_perm_length_checked_at_execution():
    _both("TRANSPOSE", [T.f32([2, 3], np.arange(6)), T.i32t([3], [2, 1, 0], const=True)], [T.f32([3, 2])],
          "TRANSPOSE", "input 1 (perm)", strict_stage="addOperation")


def test_detection_box_quantization_checked_at_execution():
    boxes = Opd(12, [1, 4], [0, 0, 80, 80], 0.25, 0)          # TENSOR_QUANT16_ASYMM, scale not 0.125
    ins = [boxes, q8([1, 4], [128] * 4, 0.05, 128), T.i32t([1], [0]), Opd(12, [1, 2], [800, 800], 0.125, 0)]
    _both("AXIS_ALIGNED_BBOX_TRANSFORM", ins, [Opd(12, [1, 4], None, 0.125, 0)],
          "AXIS_ALIGNED_BBOX_TRANSFORM", "input 0 (boxes", "scale 0.125", strict_stage="addOperation")


def test_fuse_code_999_fails_at_compute_not_model_finish():
    _both("ADD", [T.f32([2], [1, 2]), T.f32([2], [3, 4]), T.i32(999)], [T.f32([2])],
          "ADD", "input 2 (fused activation)", "999", strict_stage="Model_finish")


def test_broadcast_incompatible_shapes_fail_at_compute():
    _both("ADD", [T.f32([2, 3], np.ones(6)), T.f32([4, 3], np.ones(12)), T.i32(0)],
          [T.f32([0, 0])], "broadcast", strict_stage="Compilation_finish")


def test_every_execution_path_fails_the_same_way(default_mode):
    """compute, startCompute and the burst all return OP_FAILED with the deferred reason."""
    msgs = []
    model, keep, ins, outs = build_graph([T.f32([3]), T.f32([1, 3])], [("RELU", [0], [1])])
    comp = ffi.new("ANeuralNetworksCompilation**")
    try:
        assert lib.ANeuralNetworksCompilation_create(model, comp) == 0
        assert lib.ANeuralNetworksCompilation_finish(comp[0]) == 0
        x = np.ones(3, np.float32)
        y = np.zeros(3, np.float32)
        for how in ("compute", "start", "burst"):
            ex = ffi.new("ANeuralNetworksExecution**")
            assert lib.ANeuralNetworksExecution_create(comp[0], ex) == 0
            assert lib.ANeuralNetworksExecution_setInput(ex[0], 0, ffi.NULL, ffi.from_buffer(x), 12) == 0
            assert lib.ANeuralNetworksExecution_setOutput(ex[0], 0, ffi.NULL, ffi.from_buffer(y), 12) == 0
            if how == "compute":
                rc = lib.ANeuralNetworksExecution_compute(ex[0])
            elif how == "start":
                ev = ffi.new("ANeuralNetworksEvent**")
                assert lib.ANeuralNetworksExecution_startCompute(ex[0], ev) == 0
                rc = lib.ANeuralNetworksEvent_wait(ev[0])
                lib.ANeuralNetworksEvent_free(ev[0])
            else:
                b = ffi.new("ANeuralNetworksBurst**")
                assert lib.ANeuralNetworksBurst_create(comp[0], b) == 0
                rc = lib.ANeuralNetworksExecution_burstCompute(ex[0], b[0])
                lib.ANeuralNetworksBurst_free(b[0])
            assert rc == 5, how
            msgs.append(last_error())
            lib.ANeuralNetworksExecution_free(ex[0])
    finally:
        lib.ANeuralNetworksCompilation_free(comp[0])
        lib.ANeuralNetworksModel_free(model)
    for m in msgs:
        assert "RELU" in m and "output 0 has rank 2, expected 1" in m and AT_EXECUTION in m, m


def test_later_operations_still_infer_shapes_when_a_rule_is_deferred(default_mode):
    """A deferred failure of one operation does not break the compilation of the others; the
    computation reports the first failing operation in execution order."""
    code, msg = run_graph([T.f32([3], [1, -2, 3]), T.f32([1, 3]), T.f32([0])],
                          [("RELU", [0], [1]), ("RELU6", [1], [2])])
    assert code == 5 and "operation 0: RELU:" in msg and AT_EXECUTION in msg, msg


def test_oem_operation_fails_at_compilation_finish(monkeypatch):
    """OEM_OPERATION: accepted in a model (any operands), reported unsupported by every device,
    Compilation_finish BAD_DATA; NNAPI_PY_STRICT=1 rejects it at addOperation."""
    ops = [Opd(10001, [4], np.zeros(4, np.uint8)), Opd(10001, [4])]
    monkeypatch.setenv("NNAPI_PY_STRICT", "0")
    code, msg = run_graph(ops, [(10000, [0], [1])])
    assert code == 4 and msg.startswith("Compilation_finish") and "OEM_OPERATION" in msg, msg
    model, keep, _, _ = build_graph(ops, [(10000, [0], [1])])
    try:
        n = ffi.new("uint32_t*")
        assert lib.ANeuralNetworks_getDeviceCount(n) == 0
        dev = ffi.new("ANeuralNetworksDevice**")
        assert lib.ANeuralNetworks_getDevice(0, dev) == 0
        sup = ffi.new("bool[1]", [True])
        devs = ffi.new("ANeuralNetworksDevice*[1]", [dev[0]])
        assert lib.ANeuralNetworksModel_getSupportedOperationsForDevices(model, devs, 1, sup) == 0
        assert not sup[0]
        comp = ffi.new("ANeuralNetworksCompilation**")
        assert lib.ANeuralNetworksCompilation_createForDevices(model, devs, 1, comp) == 0
        assert lib.ANeuralNetworksCompilation_finish(comp[0]) == 4
        ex = ffi.new("ANeuralNetworksExecution**")
        assert lib.ANeuralNetworksExecution_create(comp[0], ex) == 6     # BAD_STATE, as Android
        lib.ANeuralNetworksCompilation_free(comp[0])
    finally:
        lib.ANeuralNetworksModel_free(model)
    monkeypatch.setenv("NNAPI_PY_STRICT", "1")
    code, msg = run_graph(ops, [(10000, [0], [1])])
    assert code == 4 and msg.startswith("addOperation") and "NNAPI_PY_STRICT=1" in msg, msg


def test_constant_values_checked_at_execution():
    """Android's validate() never sees operand values: a constant axis out of range (known
    at Model_finish here) fails the computation; strict: Model_finish."""
    _both("REDUCE_SUM", [T.f32([2, 2], [1, 2, 3, 4]), T.i32t([1], [2], const=True), T.b(False)], [T.f32([2])],
          "REDUCE_SUM", "axis 2 is out of range", strict_stage="Model_finish")


def test_concatenation_dimensions_checked_at_execution():
    _both("CONCATENATION", [T.f32([2, 2], np.ones(4)), T.f32([3, 3], np.ones(9)), T.i32(0)], [T.f32([5, 2])],
          "CONCATENATION", strict_stage="Model_finish")


def test_a_deferred_activation_is_not_folded_away(default_mode):
    """The plan folds a RELU into the ADD before it; a RELU whose rule failed is left alone,
    so its own reason is what the computation reports."""
    code, msg = run_graph([T.f32([3], [1, -2, 3]), T.f32([3], [1, 1, 1]), T.i32(0), T.f32([3]), T.f32([0, 0])],
                          [("ADD", [0, 1, 2], [3]), ("RELU", [3], [4])])
    assert code == 5 and "operation 1: RELU: output 0 has rank 2, expected 1" in msg and AT_EXECUTION in msg, msg
