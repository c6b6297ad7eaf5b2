"""Issue 25, finding 1: the recurrent family (RNN, SVDF, LSTM, the sequence RNNs/LSTMs, the
quantized LSTMs) and the detection family checked every shape rule before a kernel runs.

Conformance models of those operations with randomly mutated operand dimensions must give a
documented code with a reason in our words -- at the point Android 14 checks the rule
(addOperation for its validate(), otherwise the computation: OP_FAILED "checked at
execution") -- and never an "internal error" (tests/conftest.py also fails any test whose
calls made the library record one)."""
import copy
import random

import numpy as np
import pytest

from nnapi_py.testing import cts
from nnhelp import T, Opd, run_op, AT_EXECUTION

RECURRENT = ("RNN", "SVDF", "LSTM", "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN",
             "UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM", "QUANTIZED_LSTM",
             "QUANTIZED_16BIT_LSTM")
DETECTION = ("BOX_WITH_NMS_LIMIT", "ROI_ALIGN", "ROI_POOLING", "AXIS_ALIGNED_BBOX_TRANSFORM",
             "GENERATE_PROPOSALS", "DETECTION_POSTPROCESSING", "HEATMAP_MAX_KEYPOINT")
DOCUMENTED = {0, 1, 3, 4, 5, 6, 8}   # NO_ERROR, OUT_OF_MEMORY, UNEXPECTED_NULL, BAD_DATA, OP_FAILED,
                                     # BAD_STATE, OUTPUT_INSUFFICIENT_SIZE
MUTATIONS_PER_OP = 24

_CTS = cts.default_cts_dir()
_LIB = None


def _library():
    global _LIB
    if _LIB is None:
        _LIB = cts.Library(cts.default_lib_path())
    return _LIB


def _models(op):
    out = []
    for t in cts.load_vectors(_CTS, ops=[op]):
        if not isinstance(t, tuple) and len(t.main.operations) == 1 and not t.referenced \
                and not t.expect_failure:
            out.append(t)
        if len(out) >= 6:
            break
    return out


def _mutate(t, r):
    """Change the dimensions of one to three operands of the model (keeping their data:
    constants then no longer match and must be rejected as such)."""
    t = copy.deepcopy(t)
    ops = [o for o in t.main.operands if o.dims]
    for _ in range(r.randint(1, 3)):
        o = r.choice(ops)
        d = list(o.dims)
        how = r.randrange(4) if d else 2
        if how == 0:                                   # one dimension changed
            k = r.randrange(len(d))
            d[k] = r.choice([1, 2, 3, 5, 8, d[k] + 1, max(d[k] - 1, 1)])
        elif how == 1:                                 # one dimension dropped
            d.pop(r.randrange(len(d)))
        elif how == 2:                                 # one added
            d.insert(r.randrange(len(d) + 1), r.choice([1, 2, 3]))
        else:                                          # all replaced
            d = [r.choice([1, 2, 3, 4, 8]) for _ in d]
        o.dims = tuple(d)
        if isinstance(o.data, np.ndarray) and o.data.size and o.data.size != int(np.prod(d, dtype=np.int64)):
            o.data = np.resize(o.data, [x or 1 for x in d]).astype(o.data.dtype)
    return t


@pytest.mark.skipif(not cts.cts_available(_CTS), reason=cts.skip_message(_CTS))
@pytest.mark.parametrize("op", RECURRENT + DETECTION)
def test_mutated_dimensions_give_documented_codes(op):
    models = _models(op)
    if not models:
        pytest.skip(f"no conformance vectors of {op}")
    r = random.Random(f"issue25-{op}")
    runner = cts.Runner(_library())
    failed_at = {}
    for k in range(MUTATIONS_PER_OP):
        t = _mutate(r.choice(models), r)
        rec = runner.run(t, r.choice(["sync", "dynamic"]))
        if rec.code is None:
            continue
        assert int(rec.code) in DOCUMENTED, rec.describe()
        assert "internal error" not in (rec.message or ""), rec.describe()
        if int(rec.code) != 8:         # OUTPUT_INSUFFICIENT_SIZE: the buffers of the unmutated outputs
            assert op in (rec.message or "") or rec.step in ("addOperand", "setOperandValue", "setInput",
                                                             "setOutput"), rec.describe()
        failed_at[rec.step] = failed_at.get(rec.step, 0) + 1
    assert failed_at, f"no mutation of {op} was rejected"


def _birnn(x_dims, wf_dims):
    """BIDIRECTIONAL_SEQUENCE_RNN (time-major, merged outputs) with declared input / forward
    weights dimensions; batch 2, 3 steps, input 4, units 8."""
    b, s, n, u = 2, 3, 4, 8

    def f(dims, const=True):
        return T.f32(dims, np.zeros(int(np.prod(dims)), np.float32) if all(dims) else None, const=const)
    x = T.f32(x_dims, np.zeros(int(np.prod(x_dims)), np.float32))
    ins = [x, f(wf_dims), f([u, u]), f([u]), T.f32([b, u], np.zeros(b * u, np.float32)),
           f([u, n]), f([u, u]), f([u]), T.f32([b, u], np.zeros(b * u, np.float32)),
           Opd(3, [], None, const=True), Opd(3, [], None, const=True), Opd(3, [], None, const=True),
           T.i32(0), T.b(True), T.b(True)]
    return run_op("BIDIRECTIONAL_SEQUENCE_RNN", ins, [T.f32([s, b, 2 * u])])


@pytest.mark.parametrize("x_dims, wf_dims, words", [
    ((3, 2), (8, 4), ("input 0",)),                  # a 2-D input: was AxisError inside the kernel
    ((3, 2, 4), (8, 1), ("input 1",)),               # forward weights of the wrong width: was a matmul mismatch
])
def test_birnn_mutated_dimensions_are_rejected_with_a_reason(x_dims, wf_dims, words):
    """The two tracebacks of issue 25 (AxisError: axis 1 is out of bounds; matmul: mismatch in
    its core dimension): now a shape rule of BIDIRECTIONAL_SEQUENCE_RNN, checked at execution
    as Android does (NNAPI_PY_STRICT=1: at once), with our reason."""
    code, msg = _birnn(x_dims, wf_dims)
    assert code in (4, 5), msg
    assert "internal error" not in msg and "BIDIRECTIONAL_SEQUENCE_RNN" in msg, msg
    for w in words:
        assert w in msg, msg
    if code == 5:
        assert AT_EXECUTION in msg or "compute" in msg, msg
