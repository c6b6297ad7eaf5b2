"""A reusable execution's later computations take a short path (execution.Execution._again in the
runtime, nn.Execution._again in the Python API, the importer's step): the same results, the
same failures with their codes and reasons, the same state machine as the first computation."""
import numpy as np
import pytest

import nnapi_py as nn
from nnapi_py import _capi, ffi, lib
from nnapi_py import constants as C


def _gather_model():
    """y = GATHER(table [5, 3], axis 0, idx [2]) * 2: an index out of range fails the computation."""
    m = nn.Model()
    idx = m.input("idx", nn.int32, (2,))
    table = np.arange(15, dtype=np.float32).reshape(5, 3)
    g = m.op("GATHER", table, 0, idx, outputs=[(nn.float32, (2, 3))])
    m.output(m.op("MUL", g, np.full((2, 3), 2, np.float32), 0, outputs=[(nn.float32, (2, 3))]), "y")
    return m.compile()


def _runtime(e):
    return _capi._H[int(ffi.cast("uintptr_t", e.handle))]


def test_runtime_again_same_results_and_failures():
    c = _gather_model()
    pe = ffi.new("ANeuralNetworksExecution**")
    assert lib.ANeuralNetworksExecution_create(c.handle, pe) == 0
    e = pe[0]
    idx = np.array([0, 4], np.int32)
    out = np.zeros((2, 3), np.float32)
    assert lib.ANeuralNetworksExecution_setReusable(e, True) == 0
    assert lib.ANeuralNetworksExecution_setInput(e, 0, ffi.NULL, ffi.from_buffer(idx), idx.nbytes) == 0
    assert lib.ANeuralNetworksExecution_setOutput(e, 0, ffi.NULL, ffi.from_buffer(out), out.nbytes) == 0
    try:
        assert lib.ANeuralNetworksExecution_compute(e) == 0
        assert _capi._H[int(ffi.cast("uintptr_t", e))]._again is not None
        table = np.arange(15, dtype=np.float32).reshape(5, 3)
        assert out.tolist() == (table[[0, 4]] * 2).tolist()
        for k in range(5):                  # new values in the bound input, in place
            idx[:] = [k, 4 - k]
            assert lib.ANeuralNetworksExecution_compute(e) == 0
            assert out.tolist() == (table[[k, 4 - k]] * 2).tolist()
        idx[:] = [1, 7]                     # out of range: the computation fails, with its reason
        assert lib.ANeuralNetworksExecution_compute(e) == C.OP_FAILED
        code, why = nn.last_error()
        assert code == C.OP_FAILED and "GATHER" in why
        r = ffi.new("uint32_t*")            # the failed computation's outputs cannot be queried
        assert lib.ANeuralNetworksExecution_getOutputOperandRank(e, 0, r) == C.BAD_STATE
        idx[:] = [2, 3]                     # and the execution computes again afterwards
        assert lib.ANeuralNetworksExecution_compute(e) == 0
        assert out.tolist() == (table[[2, 3]] * 2).tolist()
        assert lib.ANeuralNetworksExecution_getOutputOperandRank(e, 0, r) == 0 and r[0] == 2
        # its settings stay frozen after the first computation, as before
        assert lib.ANeuralNetworksExecution_setLoopTimeout(e, 10 ** 6) == C.BAD_STATE
    finally:
        lib.ANeuralNetworksExecution_free(e)


def test_python_api_again_same_results_and_errors():
    c = _gather_model()
    e = c.execution(reusable=True)
    table = np.arange(15, dtype=np.float32).reshape(5, 3)
    first = e.run({"idx": np.array([0, 1], np.int32)}, copy=False)
    assert first["y"].tolist() == (table[[0, 1]] * 2).tolist()
    assert e._again is not None
    bound = e._bound[2]["idx"]              # the execution's own copy of the input
    bound[:] = [3, 2]
    again = e.run(copy=False)
    assert again is first and again["y"].tolist() == (table[[3, 2]] * 2).tolist()
    bound[:] = [9, 0]
    with pytest.raises(nn.NNAPIError) as err:
        e.run(copy=False)
    assert err.value.code_name == "OP_FAILED" and err.value.call == "ANeuralNetworksExecution_compute"
    # the general path with new inputs still works, and copies unless asked not to
    got = e.run({"idx": np.array([4, 4], np.int32)})
    assert got["y"].tolist() == (table[[4, 4]] * 2).tolist() and got["y"] is not first["y"]


def test_one_shot_execution_takes_no_short_path():
    c = _gather_model()
    e = c.execution()
    e.run({"idx": np.array([0, 1], np.int32)}, copy=False)
    assert e._again is None and _runtime(e)._again is None
    with pytest.raises(nn.NNAPIError) as err:         # a one-shot execution's second computation
        e.run(copy=False)
    assert err.value.code_name == "BAD_STATE"
