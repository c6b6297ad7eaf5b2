"""Edge cases of the reduction and lookup operations, through the C library.

MEAN, REDUCE_ALL/ANY/MAX/MIN/PROD/SUM, ARGMAX/ARGMIN, TOPK_V2 (nnapi_py/ops/reduce.py) and
GATHER, EMBEDDING_LOOKUP, HASHTABLE_LOOKUP (nnapi_py/ops/gather.py): what the conformance
vectors do not reach (validation reasons, NaN/inf, extreme values, ties, run-time axes,
out-of-range indices, dynamic output shapes).
"""
import itertools
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nnhelp import (lib, T, Opd, run_op, add_op_code,  # noqa: E402
                    expect_ok as ok, expect_fail as fails)

pytestmark = pytest.mark.skipif(lib is None, reason="libneuralnetworks.so not built")

BAD_DATA, OP_FAILED = 4, 5
NAN, INF = float("nan"), float("inf")
F32MAX = float(np.finfo(np.float32).max)


def q8h(dims, data=None):
    """HASHTABLE_LOOKUP hits operand: TENSOR_QUANT8_ASYMM, scale 1, zeroPoint 0."""
    return Opd(5, dims, data, 1.0, 0)


def reduce_ref(x, axes, keep, kind):
    r = x.ndim
    ax = tuple(sorted({a % r for a in axes}))
    f = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "mean": np.mean,
         "any": np.any, "all": np.all}[kind]
    y = f(x, axis=ax, keepdims=True)
    if not keep:
        y = y.reshape([n for d, n in enumerate(x.shape) if d not in ax] or [1])
    return y


# ---------------------------------------------------------------------------------------------
# MEAN / REDUCE_*: shapes, all axis combinations, keep_dims
# ---------------------------------------------------------------------------------------------

REDUCE_F = [("REDUCE_SUM", "sum"), ("REDUCE_PROD", "prod"), ("REDUCE_MAX", "max"),
            ("REDUCE_MIN", "min")]


@pytest.mark.parametrize("op,kind", REDUCE_F)
@pytest.mark.parametrize("keep", [False, True])
def test_reduce_float_all_axis_sets(op, kind, keep):
    rng = np.random.default_rng(1)
    x = rng.uniform(0.5, 1.5, (2, 3, 1, 4)).astype(np.float32)
    for n in range(1, 5):
        for axes in itertools.combinations(range(4), n):
            # negative spellings and a duplicate
            ax = [a - 4 if a % 2 else a for a in axes] + [axes[0]]
            want = reduce_ref(x, ax, keep, kind)
            got = ok(run_op(op, [T.f32(x.shape, x), T.i32t([len(ax)], ax, const=True), T.b(keep)],
                            [T.f32([0] * want.ndim)]))[0]
            assert got.shape == want.shape, (axes, got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("keep,shape", [(0, (1,)), (-3, (1,)), (1, (1, 1)), (7, (1, 1))])
def test_mean_keep_dims_is_positive_int(keep, shape):
    got = ok(run_op("MEAN", [T.f32([2, 2], [1, 2, 3, 4]), T.i32t([2], [1, -2], const=True), T.i32(keep)],
                    [T.f32([0] * len(shape))]))[0]
    assert got.shape == shape
    assert got.reshape(-1)[0] == 2.5


def test_reduce_bool_keep_dims_and_all_axes():
    x = [True, False, True, True]
    got = ok(run_op("REDUCE_ALL", [T.bool8([2, 2], x), T.i32t([2], [0, 1], const=True), T.b(False)],
                    [T.bool8([1])]))[0]
    assert got.tolist() == [0]
    got = ok(run_op("REDUCE_ANY", [T.bool8([2, 2], x), T.i32t([1], [0], const=True), T.b(True)],
                    [T.bool8([1, 2])]))[0]
    assert got.tolist() == [[1, 1]]


def test_reduce_bool_non_canonical_bytes():
    # any non-zero byte of a TENSOR_BOOL8 is true
    x = Opd(9, [2, 2], np.array([0, 2, 255, 1], np.uint8))
    any_ = ok(run_op("REDUCE_ANY", [x, T.i32t([1], [1], const=True), T.b(False)], [T.bool8([2])]))[0]
    all_ = ok(run_op("REDUCE_ALL", [x, T.i32t([1], [1], const=True), T.b(False)], [T.bool8([2])]))[0]
    assert any_.view(np.uint8).tolist() == [1, 1]
    assert all_.view(np.uint8).tolist() == [0, 1]


def test_reduce_axes_given_at_execution():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    feeds = [[x, np.array([0], np.int32)], [x, np.array([2, -1], np.int32)], [x, np.array([1, 0], np.int32)],
             [x, np.array([0], np.int32)]]
    res = ok(run_op("REDUCE_SUM", [T.f32([2, 3, 4]), T.i32t([0]), T.b(False)], [T.f32([0, 0])], runs=feeds))
    want = [x.sum(0), x.sum(2), x.sum((0, 1)).reshape(4)]
    # the declared output rank is 2: reducing two axes gives rank 1 -> OP_FAILED at execution
    assert res[0][0] == 0 and np.array_equal(res[0][1][0], want[0])
    assert res[1][0] == 0 and np.array_equal(res[1][1][0], want[1])
    assert res[2][0] == OP_FAILED and "conflicts" in res[2][1]
    assert res[3][0] == 0 and np.array_equal(res[3][1][0], want[0])


def test_reduce_axis_out_of_range_at_execution():
    res = ok(run_op("REDUCE_MAX", [T.f32([2, 3]), T.i32t([1]), T.b(True)], [T.f32([0, 0])],
                    runs=[[np.ones((2, 3)), np.array([2], np.int32)], [np.ones((2, 3)), np.array([-3], np.int32)]]))
    for code, msg in res:
        assert code == OP_FAILED
        assert "REDUCE_MAX" in msg and "out of range" in msg


def test_reduce_nan_handling():
    x = [1, NAN, 3, NAN, NAN, NAN]
    mx = ok(run_op("REDUCE_MAX", [T.f32([2, 3], x), T.i32t([1], [1], const=True), T.b(False)], [T.f32([2])]))[0]
    mn = ok(run_op("REDUCE_MIN", [T.f32([2, 3], x), T.i32t([1], [1], const=True), T.b(False)], [T.f32([2])]))[0]
    # std::max/std::min from the type's lowest/highest value: NaN never wins
    assert mx.tolist() == [3.0, -F32MAX]
    assert mn.tolist() == [1.0, F32MAX]
    s = ok(run_op("REDUCE_SUM", [T.f32([2, 3], x), T.i32t([1], [1], const=True), T.b(False)], [T.f32([2])]))[0]
    assert np.isnan(s).all()


def test_reduce_prod_zero_wins_over_inf_and_nan():
    x = [0.0, INF, 2.0, -0.0, NAN, 1.0, 2.0, INF, 3.0, 1e30, 1e30, -1.0]
    p = ok(run_op("REDUCE_PROD", [T.f32([4, 3], x), T.i32t([1], [-1], const=True), T.b(False)], [T.f32([4])]))[0]
    assert p[0] == 0 and not np.signbit(p[0])
    assert p[1] == 0 and not np.signbit(p[1])
    assert p[2] == INF
    assert p[3] == -INF


def test_reduce_float16_and_relaxed():
    x = np.linspace(-3, 5, 24).astype(np.float16).reshape(2, 3, 4)
    for op, kind in REDUCE_F + [("MEAN", "mean")]:
        keep = T.i32(0) if op == "MEAN" else T.b(False)
        got = ok(run_op(op, [T.f16(x.shape, x), T.i32t([2], [0, 2], const=True), keep], [T.f16([3])]))[0]
        want = reduce_ref(x.astype(np.float32), [0, 2], False, kind)
        np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)
        got = ok(run_op(op, [T.f32(x.shape, x), T.i32t([2], [0, 2], const=True), keep], [T.f32([3])],
                        relaxed=True))[0]
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)


def test_mean_quant_truncates_toward_zero():
    # the reference sums the raw values in int32 and divides by the count in C
    x = [-5, -4, -4, 1, 2, 2, -128, -128, -127]
    got = ok(run_op("MEAN", [T.q8s([3, 3], x, 0.5, -3), T.i32t([1], [1], const=True), T.i32(0)],
                    [T.q8s([3], None, 0.5, -3)]))[0]
    assert got.tolist() == [-4, 1, -127]        # -13/3 -> -4, 5/3 -> 1, -383/3 -> -127
    xu = [0, 1, 1, 255, 255, 254]
    got = ok(run_op("MEAN", [T.q8([2, 3], xu, 0.1, 128), T.i32t([1], [1], const=True), T.i32(1)],
                    [T.q8([2, 1], None, 0.1, 128)]))[0]
    assert got.tolist() == [[0], [254]]


def test_reduce_quant_max_min_extremes():
    x = [-128, 127, 0, -128, -128, -128]
    mx = ok(run_op("REDUCE_MAX", [T.q8s([2, 3], x, 2.0, 127), T.i32t([1], [1], const=True), T.b(False)],
                   [T.q8s([2], None, 2.0, 127)]))[0]
    mn = ok(run_op("REDUCE_MIN", [T.q8([2, 3], [0, 255, 3, 255, 255, 255], 1e-6, 0),
                                  T.i32t([1], [1], const=True), T.b(False)], [T.q8([2], None, 1e-6, 0)]))[0]
    assert mx.tolist() == [127, -128]
    assert mn.tolist() == [0, 255]


def test_reduce_dynamic_output_shape():
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    got = ok(run_op("REDUCE_SUM", [T.f32(x.shape, x), T.i32t([3], [0, 1, 2], const=True), T.b(False)],
                    [Opd(3, [0])]))[0]
    assert got.shape == (1,) and got[0] == 15
    got = ok(run_op("MEAN", [T.f32(x.shape, x), T.i32t([1], [-1], const=True), T.i32(1)],
                    [Opd(3, [0, 0, 0])]))[0]
    assert got.shape == (1, 2, 1) and got.reshape(-1).tolist() == [1.0, 4.0]


@pytest.mark.strict_mode
def test_reduce_declared_output_shape_conflict():
    c, msg = run_op("REDUCE_SUM", [T.f32([2, 3]), T.i32t([1], [0], const=True), T.b(False)], [T.f32([2])])
    assert c == BAD_DATA and "conflicts" in msg


# ---- validation ---------------------------------------------------------------------------

@pytest.mark.strict_mode
def test_reduce_validation_reasons():
    cases = [
        ("REDUCE_SUM", [T.q8([2, 2]), T.i32t([1]), T.b(False)], [T.q8([2])], "input 0", "TENSOR_QUANT8_ASYMM"),
        ("REDUCE_PROD", [T.i32t([2, 2]), T.i32t([1]), T.b(False)], [T.i32t([2])], "input 0", "TENSOR_INT32"),
        ("REDUCE_MAX", [T.bool8([2, 2]), T.i32t([1]), T.b(False)], [T.bool8([2])], "input 0", "TENSOR_BOOL8"),
        ("REDUCE_ALL", [T.f32([2, 2]), T.i32t([1]), T.b(False)], [T.f32([2])], "input 0", "TENSOR_FLOAT32"),
        ("REDUCE_SUM", [T.f32([2, 2, 2, 2, 2]), T.i32t([1]), T.b(False)], [T.f32([2])], "rank 5"),
        ("MEAN", [T.f32([2, 2, 2, 2, 2]), T.i32t([1]), T.i32(0)], [T.f32([2])], "rank 5"),
        ("REDUCE_SUM", [T.f32([2, 2]), T.f32([1]), T.b(False)], [T.f32([2])], "input 1 (axes)"),
        ("REDUCE_SUM", [T.f32([2, 2]), T.i32t([1, 1]), T.b(False)], [T.f32([2])], "input 1 (axes)", "rank 2"),
        ("REDUCE_SUM", [T.f32([2, 2]), T.i32t([1]), T.i32(0)], [T.f32([2])], "input 2 (keep_dims)", "BOOL"),
        ("MEAN", [T.f32([2, 2]), T.i32t([1]), T.b(False)], [T.f32([2])], "input 2 (keep_dims)", "INT32"),
        ("REDUCE_MIN", [T.f32([2, 2]), T.i32t([1]), T.b(False)], [T.f16([2])], "output 0"),
        ("MEAN", [T.q8([2, 2], None, 0.5, 1), T.i32t([1]), T.i32(0)], [T.q8([2], None, 0.5, 2)],
         "same scale and zeroPoint"),
        ("REDUCE_MAX", [T.q8s([2, 2], None, 0.5, 1), T.i32t([1]), T.b(False)], [T.q8s([2], None, 0.25, 1)],
         "same scale and zeroPoint"),
        ("REDUCE_SUM", [T.f32([2, 2]), T.i32t([1]), T.b(False), T.b(False)], [T.f32([2])], "expected 3 inputs"),
        ("REDUCE_SUM", [T.f32([2, 2]), T.i32t([1])], [T.f32([2])], "expected 3 inputs"),
        ("MEAN", [T.f32([2, 2]), T.i32t([1]), T.i32(0)], [T.f32([2]), T.f32([2])], "expected 1 output"),
    ]
    for op, ins, outs, *words in cases:
        msg = fails(add_op_code(op, ins, outs), BAD_DATA, op, *words)
        assert "addOperation" in msg


@pytest.mark.strict_mode
def test_reduce_constant_axes_checked_at_finish():
    msg = fails(run_op("REDUCE_SUM", [T.f32([2, 2]), T.i32t([2], [1, 2], const=True), T.b(False)], [T.f32([2])]),
                BAD_DATA, "REDUCE_SUM", "axis 2 is out of range [-2, 2)")
    assert "Model_finish" in msg
    fails(run_op("MEAN", [T.f32([2, 2]), T.i32t([1], [-3], const=True), T.i32(0)], [T.f32([2])]),
          BAD_DATA, "MEAN", "axis -3")


def test_reduce_omitted_axes():
    fails(run_op("REDUCE_SUM", [T.f32([2, 2]), T.i32t([1], None, const=True), T.b(False)], [T.f32([2])]),
          BAD_DATA, "input 1 (axes)", "not optional")


# ---------------------------------------------------------------------------------------------
# ARGMAX / ARGMIN
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,f", [("ARGMAX", np.argmax), ("ARGMIN", np.argmin)])
def test_argminmax_every_axis(op, f):
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 3, (2, 3, 4)).astype(np.float32)     # many ties: first index wins
    for axis in range(-3, 3):
        want = f(x, axis=axis).astype(np.int32)
        got = ok(run_op(op, [T.f32(x.shape, x), T.i32(axis)], [T.i32t([0] * want.ndim)]))[0]
        assert np.array_equal(got, want), axis


def test_argminmax_rank1_gives_shape_1_and_types():
    got = ok(run_op("ARGMAX", [T.q8s([4], [-128, 5, 127, 127], 0.5, 0), T.i32(0)], [T.i32t([1])]))[0]
    assert got.tolist() == [2]
    got = ok(run_op("ARGMIN", [T.i32t([4], [2147483647, -2147483648, 0, -2147483648]), T.i32(-1)],
                    [T.i32t([0])]))[0]
    assert got.tolist() == [1]
    got = ok(run_op("ARGMAX", [T.f16([3], [1.0, 65504.0, -INF]), T.i32(0)], [T.i32t([1])]))[0]
    assert got.tolist() == [1]
    got = ok(run_op("ARGMIN", [T.q8([2, 2], [9, 3, 1, 1], 1.0, 0), T.i32(1)], [T.i32t([2])]))[0]
    assert got.tolist() == [1, 0]


def test_argminmax_nan_like_reference():
    # strict comparison from element 0: NaN only "wins" when it is element 0
    x = [1, NAN, 3, NAN, 2, 9, -INF, NAN, -INF]
    amax = ok(run_op("ARGMAX", [T.f32([3, 3], x), T.i32(1)], [T.i32t([3])]))[0]
    amin = ok(run_op("ARGMIN", [T.f32([3, 3], x), T.i32(1)], [T.i32t([3])]))[0]
    assert amax.tolist() == [2, 0, 0]
    assert amin.tolist() == [0, 0, 0]


@pytest.mark.strict_mode
def test_argminmax_validation():
    fails(add_op_code("ARGMAX", [T.bool8([2, 2]), T.i32(0)], [T.i32t([2])]), BAD_DATA, "ARGMAX", "input 0")
    fails(add_op_code("ARGMAX", [T.f32([2, 2]), T.i32(0)], [T.f32([2])]), BAD_DATA, "output 0", "TENSOR_INT32")
    fails(add_op_code("ARGMIN", [T.f32([2, 2]), T.i32t([1])], [T.i32t([2])]), BAD_DATA, "input 1 (axis)")
    fails(run_op("ARGMIN", [T.f32([2, 2]), T.i32(2)], [T.i32t([2])]), BAD_DATA, "ARGMIN",
          "axis) 2 is out of range [-2, 2)")
    fails(run_op("ARGMAX", [T.f32([2, 2]), T.i32(-3)], [T.i32t([2])]), BAD_DATA, "out of range")


# ---------------------------------------------------------------------------------------------
# TOPK_V2
# ---------------------------------------------------------------------------------------------

def test_topk_ties_larger_index_first():
    # the specification (and Android's reference, which sorts (value, index) pairs and
    # reverses them): equal values come with the larger index first
    v, i = ok(run_op("TOPK_V2", [T.f32([2, 4], [1, 3, 3, 2, 5, 5, 5, 5]), T.i32(3)],
                     [T.f32([2, 3]), T.i32t([2, 3])]))
    assert v.tolist() == [[3, 3, 2], [5, 5, 5]]
    assert i.tolist() == [[2, 1, 3], [3, 2, 1]]


def test_topk_extremes_and_types():
    v, i = ok(run_op("TOPK_V2", [T.i32t([1, 5], [-2147483648, 2147483647, 0, 7, 7]), T.i32(5)],
                     [T.i32t([1, 5]), T.i32t([1, 5])]))
    assert v.tolist() == [[2147483647, 7, 7, 0, -2147483648]] and i.tolist() == [[1, 4, 3, 2, 0]]
    v, i = ok(run_op("TOPK_V2", [T.f32([5], [-1.0, INF, -INF, 0.5, -0.0]), T.i32(4)],
                     [T.f32([4]), T.i32t([4])]))
    assert v.tolist() == [INF, 0.5, 0.0, -1.0] and i.tolist() == [1, 3, 4, 0]
    v, i = ok(run_op("TOPK_V2", [T.f16([4], [0.5, -65504, 65504, 0.25]), T.i32(2)], [T.f16([2]), T.i32t([2])]))
    assert v.tolist() == [65504, 0.5] and i.tolist() == [2, 0]
    v, i = ok(run_op("TOPK_V2", [T.q8([2, 3], [0, 255, 254, 7, 7, 9], 0.5, 3), T.i32(1)],
                     [T.q8([2, 1], None, 0.5, 3), T.i32t([2, 1])]))
    assert v.tolist() == [[255], [9]] and i.tolist() == [[1], [2]]


def test_topk_large_rows_match_sort():
    rng = np.random.default_rng(5)
    x = rng.integers(-50, 50, (3, 1000)).astype(np.float32)
    v, i = ok(run_op("TOPK_V2", [T.f32(x.shape, x), T.i32(17)], [T.f32([3, 17]), T.i32t([3, 17])]))
    order = np.lexsort((-np.arange(1000)[None, :].repeat(3, 0), -x), axis=-1)[:, :17]
    assert np.array_equal(i, order)
    assert np.array_equal(v, np.take_along_axis(x, order, -1))


@pytest.mark.strict_mode
def test_topk_k_at_execution_and_validation():
    fails(run_op("TOPK_V2", [T.f32([2, 3]), T.i32(0)], [T.f32([2, 0]), T.i32t([2, 0])]), BAD_DATA,
          "input 1 (k) must be at least 1")
    fails(run_op("TOPK_V2", [T.f32([2, 3]), T.i32(4)], [T.f32([2, 0]), T.i32t([2, 0])]), BAD_DATA,
          "exceeds the last dimension")
    fails(add_op_code("TOPK_V2", [T.f32([2, 3]), T.i32(1)], [T.f32([2, 1]), T.f32([2, 1])]), BAD_DATA,
          "output 1 (indices)")
    fails(add_op_code("TOPK_V2", [T.q8([2, 3], None, 0.5, 0), T.i32(1)], [T.q8([2, 1], None, 0.5, 1),
                                                                          T.i32t([2, 1])]),
          BAD_DATA, "same scale and zeroPoint")
    fails(add_op_code("TOPK_V2", [T.f32([2, 3]), T.i32(1)], [T.f32([2, 1])]), BAD_DATA, "expected 2 outputs")
    # k given at execution (a model input scalar)
    k = Opd(1, (), None, const=False)
    res = ok(run_op("TOPK_V2", [T.f32([2, 3]), k], [T.f32([0, 0]), T.i32t([0, 0])],
                    runs=[[np.array([[1, 2, 3], [6, 5, 4]], np.float32), np.array(2, np.int32)],
                          [np.array([[1, 2, 3], [6, 5, 4]], np.float32), np.array(4, np.int32)]]))
    assert res[0][0] == 0 and res[0][1][1].tolist() == [[2, 1], [0, 1]]
    assert res[1][0] == OP_FAILED and "k = 4" in res[1][1]


# ---------------------------------------------------------------------------------------------
# GATHER
# ---------------------------------------------------------------------------------------------

def test_gather_every_axis_and_index_rank():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    idx = np.array([[1, 0], [0, 1]], np.int32)
    for axis in range(-3, 3):
        size = x.shape[axis]
        ind = np.minimum(idx, size - 1)
        want = np.take(x, ind, axis=axis)
        got = ok(run_op("GATHER", [T.i32t(x.shape, x), T.i32(axis), T.i32t(ind.shape, ind)],
                        [T.i32t([0] * want.ndim)]))[0]
        assert np.array_equal(got, want), axis


@pytest.mark.strict_mode
def test_gather_out_of_range_fails_at_execution():
    fails(run_op("GATHER", [T.f32([3, 2], range(6)), T.i32(0), T.i32t([2], [2, 3])], [T.f32([2, 2])]),
          OP_FAILED, "GATHER", "indices value 3 is out of range [0, 3)")
    fails(run_op("GATHER", [T.f32([3, 2], range(6)), T.i32(-1), T.i32t([1], [-1])], [T.f32([3, 1])]),
          OP_FAILED, "value -1 is out of range [0, 2)")
    # constant indices: found at Model_finish
    msg = fails(run_op("GATHER", [T.f32([3, 2]), T.i32(0), T.i32t([1], [5], const=True)], [T.f32([1, 2])]),
                BAD_DATA, "input 2 (indices) value 5")
    assert "Model_finish" in msg


@pytest.mark.strict_mode
def test_gather_quant_and_validation():
    got = ok(run_op("GATHER", [T.q8s([4], [-128, 0, 127, 5], 0.5, -1), T.i32(0), T.i32t([3], [3, 3, 0])],
                    [T.q8s([3], None, 0.5, -1)]))[0]
    assert got.tolist() == [5, 5, -128]
    fails(add_op_code("GATHER", [T.q8([4], None, 0.5, 0), T.i32(0), T.i32t([3])], [T.q8([3], None, 0.5, 1)]),
          BAD_DATA, "same scale and zeroPoint")
    fails(add_op_code("GATHER", [T.bool8([4]), T.i32(0), T.i32t([3])], [T.bool8([3])]), BAD_DATA, "input 0")
    fails(add_op_code("GATHER", [T.f32([4]), T.i32(0), T.f32([3])], [T.f32([3])]), BAD_DATA,
          "input 2 (indices)")
    fails(add_op_code("GATHER", [T.f32([4]), T.i32t([1]), T.i32t([3])], [T.f32([3])]), BAD_DATA,
          "input 1 (axis)")
    fails(run_op("GATHER", [T.f32([4]), T.i32(1), T.i32t([3])], [T.f32([3])]), BAD_DATA,
          "axis) 1 is out of range [-1, 1)")


# ---------------------------------------------------------------------------------------------
# EMBEDDING_LOOKUP
# ---------------------------------------------------------------------------------------------

def test_embedding_lookup_rows_and_errors():
    vals = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    got = ok(run_op("EMBEDDING_LOOKUP", [T.i32t([4], [2, 0, 2, 1]), T.f32(vals.shape, vals)],
                    [T.f32([4, 2, 2])]))[0]
    assert np.array_equal(got, vals[[2, 0, 2, 1]])
    fails(run_op("EMBEDDING_LOOKUP", [T.i32t([2], [2, 3]), T.f32([3, 2], range(6))], [T.f32([2, 2])]),
          OP_FAILED, "EMBEDDING_LOOKUP", "lookups value 3 is out of range [0, 3)")
    fails(run_op("EMBEDDING_LOOKUP", [T.i32t([1], [-1]), T.f32([3, 2], range(6))], [T.f32([1, 2])]),
          OP_FAILED, "value -1")
    got = ok(run_op("EMBEDDING_LOOKUP", [T.i32t([2], [1, 1]), T.q8s([2, 2], [-128, 127, 3, 4], 0.25, 3)],
                    [T.q8s([0, 0], None, 0.25, 3)]))[0]
    assert got.tolist() == [[3, 4], [3, 4]]


@pytest.mark.strict_mode
def test_embedding_lookup_validation():
    fails(add_op_code("EMBEDDING_LOOKUP", [T.i32t([2]), T.f32([3])], [T.f32([2])]), BAD_DATA,
          "input 1 (values)", "at least 2")
    fails(add_op_code("EMBEDDING_LOOKUP", [T.i32t([2, 1]), T.f32([3, 2])], [T.f32([2, 2])]), BAD_DATA,
          "input 0 (lookups)", "rank 2")
    fails(add_op_code("EMBEDDING_LOOKUP", [T.f32([2]), T.f32([3, 2])], [T.f32([2, 2])]), BAD_DATA,
          "input 0 (lookups)")
    fails(add_op_code("EMBEDDING_LOOKUP", [T.i32t([2]), T.bool8([3, 2])], [T.bool8([2, 2])]), BAD_DATA,
          "input 1 (values)")
    fails(add_op_code("EMBEDDING_LOOKUP", [T.i32t([2]), T.q8([3, 2], None, 0.5, 0)], [T.q8([2, 2], None, 1.0, 0)]),
          BAD_DATA, "same scale and zeroPoint as input 1")
    fails(add_op_code("EMBEDDING_LOOKUP", [T.i32t([2]), T.f32([3, 2])], [T.i32t([2, 2])]), BAD_DATA,
          "output 0", "type of input 1")


# ---------------------------------------------------------------------------------------------
# HASHTABLE_LOOKUP
# ---------------------------------------------------------------------------------------------

def test_hashtable_hits_misses_and_extreme_keys():
    keys = [-2147483648, -7, 0, 2147483647]
    vals = np.arange(8, dtype=np.int32).reshape(4, 2) + 10
    look = [2147483647, 5, -2147483648, 0, -8]
    out, hits = ok(run_op("HASHTABLE_LOOKUP", [T.i32t([5], look), T.i32t([4], keys), T.i32t([4, 2], vals)],
                          [T.i32t([5, 2]), q8h([5])]))
    assert hits.tolist() == [1, 0, 1, 1, 0]
    assert out.tolist() == [[16, 17], [0, 0], [10, 11], [14, 15], [0, 0]]


def test_hashtable_quant_miss_is_zero_byte():
    out, hits = ok(run_op("HASHTABLE_LOOKUP", [T.i32t([2], [3, 4]), T.i32t([1], [4]),
                                               T.q8([1, 3], [9, 8, 7], 0.5, 100)],
                          [T.q8([2, 3], None, 0.5, 100), q8h([2])]))
    assert out.tolist() == [[0, 0, 0], [9, 8, 7]] and hits.tolist() == [0, 1]


@pytest.mark.strict_mode
def test_hashtable_unsorted_keys():
    fails(run_op("HASHTABLE_LOOKUP", [T.i32t([1], [1]), T.i32t([3], [5, 1, 7]), T.f32([3, 1], [1, 2, 3])],
                 [T.f32([1, 1]), q8h([1])]), OP_FAILED, "HASHTABLE_LOOKUP", "sorted in ascending order")
    msg = fails(run_op("HASHTABLE_LOOKUP", [T.i32t([1], [1]), T.i32t([3], [5, 1, 7], const=True),
                                            T.f32([3, 1], [1, 2, 3])], [T.f32([1, 1]), q8h([1])]),
                BAD_DATA, "sorted in ascending order")
    assert "Model_finish" in msg


@pytest.mark.strict_mode
def test_hashtable_validation():
    fails(add_op_code("HASHTABLE_LOOKUP", [T.i32t([3]), T.i32t([3]), T.f32([3, 1])],
                      [T.f32([3, 1]), Opd(5, [3], None, 0.5, 0)]), BAD_DATA, "output 1 (hits)", "scale 1.0")
    fails(add_op_code("HASHTABLE_LOOKUP", [T.i32t([3]), T.i32t([3]), T.f32([3, 1])],
                      [T.f32([3, 1]), T.i32t([3])]), BAD_DATA, "output 1 (hits)")
    fails(add_op_code("HASHTABLE_LOOKUP", [T.i32t([3]), T.i32t([3]), T.f16([3, 1])],
                      [T.f16([3, 1]), q8h([3])]), BAD_DATA, "input 2 (values)")
    fails(add_op_code("HASHTABLE_LOOKUP", [T.i32t([3]), T.i32t([2]), T.f32([3, 1])],
                      [T.f32([3, 1]), q8h([3])]), BAD_DATA, "input 1 (keys) has 2 entries")
    fails(add_op_code("HASHTABLE_LOOKUP", [T.i32t([3]), T.i32t([3]), T.f32([3])],
                      [T.f32([3]), q8h([3])]), BAD_DATA, "input 2 (values)", "at least 2")
    fails(add_op_code("HASHTABLE_LOOKUP", [T.i32t([3]), T.i32t([3]), T.q8([3, 1], None, 0.5, 0)],
                      [T.q8([3, 1], None, 0.5, 9), q8h([3])]), BAD_DATA, "same scale and zeroPoint as input 2")
    fails(add_op_code("HASHTABLE_LOOKUP", [T.i32t([3]), T.i32t([3]), T.f32([3, 1])], [T.f32([3, 1])]),
          BAD_DATA, "expected 2 outputs")


# ---------------------------------------------------------------------------------------------
# unspecified input dimensions (resolved at execution)
# ---------------------------------------------------------------------------------------------

def test_unspecified_input_dims():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = ok(run_op("REDUCE_SUM", [T.f32([0, 3], x), T.i32t([1], [0], const=True), T.b(False)], [T.f32([0])]))[0]
    assert got.tolist() == [3, 5, 7]
    got = ok(run_op("GATHER", [T.f32([0, 0], x), T.i32(1), T.i32t([0], np.array([2, 2, 0], np.int32))],
                    [T.f32([0, 0])]))[0]
    assert got.tolist() == [[2, 2, 0], [5, 5, 3]]
    v, i = ok(run_op("TOPK_V2", [T.f32([0, 0], x), T.i32(2)], [T.f32([0, 0]), T.i32t([0, 0])]))
    assert i.tolist() == [[2, 1], [2, 1]]
    got = ok(run_op("ARGMIN", [T.f32([0, 0], x), T.i32(0)], [T.i32t([0])]))[0]
    assert got.tolist() == [0, 0, 0]
    out, hits = ok(run_op("HASHTABLE_LOOKUP", [T.i32t([0], np.array([4, 1], np.int32)),
                                               T.i32t([0], np.array([1, 4], np.int32)), T.f32([0, 3], x)],
                          [T.f32([0, 0]), q8h([0])]))
    assert out.tolist() == [[3, 4, 5], [0, 1, 2]] and hits.tolist() == [1, 1]
    got = ok(run_op("EMBEDDING_LOOKUP", [T.i32t([0], np.array([1], np.int32)), T.f32([0, 3], x)],
                    [T.f32([0, 0])]))[0]
    assert got.tolist() == [[3, 4, 5]]
