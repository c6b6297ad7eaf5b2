"""Unit tests of the shape and data-movement operations (nnapi_py/ops/shape.py, slicing.py):
RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, CONCATENATION, SPLIT, PACK, TILE, REVERSE, FILL,
RANK, SLICE, STRIDED_SLICE, PAD, PAD_V2, MIRROR_PAD.

Everything goes through the built C library (cffi ABI mode, tests/nnhelp.py).  Edge cases
the CTS vectors miss: negative axes, -1 inference, dynamic output shapes from non-constant
value inputs, zero-sized tensors produced inside a graph, requantizing concatenation
rounding, NaN/inf passing through untouched, and validation failures with their reason.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nnhelp import (lib, T, Opd, run_op, add_op_code, zero_batch,  # noqa: E402
                    expect_ok as ok, expect_fail as fails)

pytestmark = pytest.mark.skipif(lib is None, reason="library not built")

BAD_DATA, OP_FAILED = 4, 5


def f32(a):
    return np.asarray(a, np.float32)


# =========================================================================================
# RESHAPE
# =========================================================================================
class TestReshape:
    def test_minus_one_inferred(self):
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        out = ok(run_op("RESHAPE", [T.f32([2, 3, 4], x), T.i32t([2], [-1, 6], const=True)], [T.f32([4, 6])]))
        np.testing.assert_array_equal(out[0], x.reshape(4, 6))

    def test_flatten(self):
        x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
        out = ok(run_op("RESHAPE", [T.f32([1, 2, 3], x), T.i32t([1], [-1], const=True)], [T.f32([6])]))
        np.testing.assert_array_equal(out[0], x.ravel())

    def test_int32_fl6(self):
        x = np.arange(-3, 3, dtype=np.int32)
        out = ok(run_op("RESHAPE", [T.i32t([6], x), T.i32t([2], [3, 2], const=True)], [T.i32t([3, 2])]))
        np.testing.assert_array_equal(out[0], x.reshape(3, 2))

    def test_quant_keeps_values(self):
        x = np.array([0, 255, 7, 128], np.uint8)
        out = ok(run_op("RESHAPE", [T.q8([4], x, 0.5, 3), T.i32t([2], [2, 2], const=True)], [T.q8([2, 2], None, 0.5, 3)]))
        np.testing.assert_array_equal(out[0], x.reshape(2, 2))

    def test_shape_as_input_dynamic_output(self):
        x = np.arange(12, dtype=np.float32)
        out = ok(run_op("RESHAPE", [T.f32([12], x), T.i32t([3], [2, -1, 3])], [T.f32([0, 0, 0])]))
        assert out[0].shape == (2, 2, 3)
        np.testing.assert_array_equal(out[0], x.reshape(2, 2, 3))

    def test_shape_input_mismatch_fails_at_execution(self):
        fails(run_op("RESHAPE", [T.f32([12], np.zeros(12)), T.i32t([2], [5, 2])], [T.f32([0, 0])]),
              OP_FAILED, "RESHAPE", "has 10 elements")

    @pytest.mark.strict_mode
    def test_const_shape_mismatch_fails_at_compilation(self):
        msg = fails(run_op("RESHAPE", [T.f32([12], np.zeros(12)), T.i32t([2], [5, 2], const=True)],
                           [T.f32([5, 2])]), BAD_DATA, "RESHAPE")
        assert "Compilation_finish" in msg

    def test_two_minus_ones(self):
        fails(run_op("RESHAPE", [T.f32([4], np.zeros(4)), T.i32t([2], [-1, -1], const=True)], [T.f32([2, 2])]),
              BAD_DATA, "more than one -1")

    def test_minus_one_with_zero_component(self):
        fails(run_op("RESHAPE", [T.f32([4], np.zeros(4)), T.i32t([2], [0, -1], const=True)], [T.f32([0, 0])]),
              BAD_DATA, "cannot be inferred")

    def test_shape_must_be_int32(self):
        fails(add_op_code("RESHAPE", [T.f32([4]), T.f32([2], [2, 2], const=True)], [T.f32([2, 2])]),
              BAD_DATA, "RESHAPE: input 1 (shape)", "TENSOR_INT32")

    def test_rank_5_rejected(self):
        fails(add_op_code("RESHAPE", [T.f32([1, 1, 1, 1, 2]), T.i32t([1], [2], const=True)], [T.f32([2])]),
              BAD_DATA, "RESHAPE: input 0 has rank 5")

    @pytest.mark.strict_mode
    def test_output_quant_must_match(self):
        fails(add_op_code("RESHAPE", [T.q8([4], None, 0.5, 3), T.i32t([1], [4], const=True)],
                          [T.q8([4], None, 0.5, 4)]), BAD_DATA, "output 0 must have the scale and zeroPoint")

    def test_output_type_must_match(self):
        fails(add_op_code("RESHAPE", [T.f32([4]), T.i32t([1], [4], const=True)], [T.f16([4])]),
              BAD_DATA, "output 0 has type TENSOR_FLOAT16")

    @pytest.mark.strict_mode
    def test_output_rank_vs_shape_length(self):
        fails(add_op_code("RESHAPE", [T.f32([4]), T.i32t([2], [2, 2], const=True)], [T.f32([4])]),
              BAD_DATA, "output 0 has rank 1")

    def test_nan_inf_preserved(self):
        x = f32([np.nan, np.inf, -np.inf, -0.0])
        out = ok(run_op("RESHAPE", [T.f32([4], x), T.i32t([2], [2, 2], const=True)], [T.f32([2, 2])]))
        np.testing.assert_array_equal(out[0].ravel(), x)
        assert np.signbit(out[0].ravel()[3])


# =========================================================================================
# SQUEEZE / EXPAND_DIMS
# =========================================================================================
class TestSqueeze:
    def test_omitted_squeezes_all(self):
        x = np.arange(3, dtype=np.float32).reshape(1, 3, 1)
        out = ok(run_op("SQUEEZE", [T.f32([1, 3, 1], x), Opd("TENSOR_INT32", [0], None, const=True)], [T.f32([3])]))
        np.testing.assert_array_equal(out[0], x.ravel())

    def test_negative_axis(self):
        x = np.arange(3, dtype=np.float32).reshape(1, 3, 1)
        out = ok(run_op("SQUEEZE", [T.f32([1, 3, 1], x), T.i32t([1], [-1], const=True)], [T.f32([1, 3])]))
        assert out[0].shape == (1, 3)

    def test_all_ones_gives_1(self):
        out = ok(run_op("SQUEEZE", [T.f32([1, 1], [5]), Opd("TENSOR_INT32", [0], None, const=True)], [T.f32([0])]))
        assert out[0].shape == (1,) and out[0][0] == 5

    def test_non_one_dimension(self):
        fails(run_op("SQUEEZE", [T.f32([1, 3], np.zeros(3)), T.i32t([1], [1], const=True)], [T.f32([1])]),
              BAD_DATA, "cannot squeeze dimension 1")

    def test_axis_out_of_range_at_finish(self):
        fails(run_op("SQUEEZE", [T.f32([1, 3], np.zeros(3)), T.i32t([1], [2], const=True)], [T.f32([3])]),
              BAD_DATA, "out of range")

    def test_axes_as_input(self):
        x = np.arange(2, dtype=np.float32).reshape(1, 2, 1)
        out = ok(run_op("SQUEEZE", [T.f32([1, 2, 1], x), T.i32t([1], [0])], [T.f32([0, 0])]))
        assert out[0].shape == (2, 1)


class TestExpandDims:
    @pytest.mark.parametrize("axis,shape", [(0, (1, 2, 3)), (2, (2, 3, 1)), (-1, (2, 3, 1)), (-3, (1, 2, 3))])
    def test_axes(self, axis, shape):
        x = np.arange(6, dtype=np.int32).reshape(2, 3)
        out = ok(run_op("EXPAND_DIMS", [T.i32t([2, 3], x), T.i32(axis)], [T.i32t([0, 0, 0])]))
        assert out[0].shape == shape
        np.testing.assert_array_equal(out[0].ravel(), x.ravel())

    def test_axis_out_of_range(self):
        fails(run_op("EXPAND_DIMS", [T.f32([2], [1, 2]), T.i32(2)], [T.f32([0, 0])]), BAD_DATA,
              "EXPAND_DIMS: input 1 (axis) 2 is out of range [-2, 2)")

    def test_axis_must_be_int32_scalar(self):
        fails(add_op_code("EXPAND_DIMS", [T.f32([2]), T.f32s(0.0)], [T.f32([1, 2])]), BAD_DATA,
              "input 1 (axis) has type FLOAT32, expected INT32")


# =========================================================================================
# TRANSPOSE
# =========================================================================================
class TestTranspose:
    def test_default_perm_reverses(self):
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        out = ok(run_op("TRANSPOSE", [T.f32([2, 3, 4], x), Opd("TENSOR_INT32", [0], None, const=True)],
                        [T.f32([4, 3, 2])]))
        np.testing.assert_array_equal(out[0], x.T)

    def test_perm_as_input(self):
        x = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
        out = ok(run_op("TRANSPOSE", [T.q8([2, 3, 4], x, 0.1, 2), T.i32t([3], [1, 2, 0])],
                        [T.q8([0, 0, 0], None, 0.1, 2)]))
        np.testing.assert_array_equal(out[0], x.transpose(1, 2, 0))

    def test_bad_perm(self):
        fails(run_op("TRANSPOSE", [T.f32([2, 2], np.zeros(4)), T.i32t([2], [0, 0], const=True)], [T.f32([2, 2])]),
              BAD_DATA, "not a permutation")

    @pytest.mark.strict_mode
    def test_perm_length(self):
        fails(add_op_code("TRANSPOSE", [T.f32([2, 2]), T.i32t([3], [0, 1, 2], const=True)], [T.f32([2, 2])]),
              BAD_DATA, "input 1 (perm) has 3 elements, expected 2")

    def test_zero_sized(self):
        x = T.f32([2, 3, 4], np.arange(24))
        out = ok(run_op("TRANSPOSE", [zero_batch(x), T.i32t([3], [2, 0, 1], const=True)], [T.f32([0, 0, 0])]))
        assert out[0].shape == (4, 0, 3)


# =========================================================================================
# CONCATENATION
# =========================================================================================
def ref_requant(q, s_in, z_in, s_out, z_out, lo, hi):
    v = (q.astype(np.float64) - z_in) * s_in / s_out
    r = np.trunc(v + np.copysign(0.5, v))
    return np.clip(r + z_out, lo, hi)


class TestConcatenation:
    def test_negative_axis(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        b = np.arange(4, dtype=np.float32).reshape(2, 2)
        out = ok(run_op("CONCATENATION", [T.f32([2, 3], a), T.f32([2, 2], b), T.i32(-1)], [T.f32([2, 5])]))
        np.testing.assert_array_equal(out[0], np.concatenate([a, b], 1))

    def test_single_input(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        out = ok(run_op("CONCATENATION", [T.f32([2, 3], a), T.i32(0)], [T.f32([2, 3])]))
        np.testing.assert_array_equal(out[0], a)

    @pytest.mark.parametrize("signed", [False, True])
    def test_requantize(self, signed):
        rng = np.random.default_rng(1)
        lo, hi = (-128, 127) if signed else (0, 255)
        mk = T.q8s if signed else T.q8
        a = rng.integers(lo, hi + 1, (3, 4)).astype(np.int8 if signed else np.uint8)
        b = rng.integers(lo, hi + 1, (3, 2)).astype(np.int8 if signed else np.uint8)
        za, zb, zo = (-5, 100, 3) if signed else (120, 7, 131)
        out = ok(run_op("CONCATENATION", [mk([3, 4], a, 0.37, za), mk([3, 2], b, 0.011, zb), T.i32(1)],
                        [mk([3, 6], None, 0.2, zo)]))
        exp = np.concatenate([ref_requant(a, 0.37, za, 0.2, zo, lo, hi), ref_requant(b, 0.011, zb, 0.2, zo, lo, hi)], 1)
        assert np.max(np.abs(out[0].astype(np.int64) - exp)) <= 1

    @pytest.mark.parametrize("axis", [1, 2])
    def test_requantize_large_blocks(self, axis):
        """Inputs of 4096 values or more are requantized by byte pairs (quant.ByteLookup) straight
        into their block of the output where it is contiguous (batch 1 along axis 1), else
        through the table: the same bytes as the table applied to each input's codes."""
        from nnapi_py.ops import quant as Q
        rng = np.random.default_rng(axis)
        shapes = [[1, 1917, 91], [1, 301, 91]] if axis == 1 else [[1, 1917, 91], [1, 1917, 5]]
        params = [(0.37, 120), (0.011, 7)]
        xs = [rng.integers(0, 256, sh).astype(np.uint8) for sh in shapes]
        ins = [T.q8(sh, x, sc, z) for sh, x, (sc, z) in zip(shapes, xs, params)]
        oshape = list(shapes[0])
        oshape[axis] = sum(sh[axis] for sh in shapes)
        out = ok(run_op("CONCATENATION", ins + [T.i32(axis)], [T.q8(oshape, None, 0.2, 131)]))
        exp = np.concatenate([Q.affine_requant_table(np.uint8, float(np.float32(sc)), z, float(np.float32(0.2)), 131)[x]
                              for x, (sc, z) in zip(xs, params)], axis)
        np.testing.assert_array_equal(out[0], exp)

    def test_requantize_rounds_half_away_from_zero(self):
        # scale ratio 0.5: odd distances from the zero point land exactly on .5
        a = np.array([-3, -1, 1, 3], np.int8)
        out = ok(run_op("CONCATENATION", [T.q8s([4], a, 0.5, 0), T.i32(0)], [T.q8s([4], None, 1.0, 0)]))
        np.testing.assert_array_equal(out[0], [-2, -1, 1, 2])

    def test_requantize_saturates(self):
        a = np.array([0, 255], np.uint8)
        b = np.array([10], np.uint8)
        out = ok(run_op("CONCATENATION", [T.q8([2], a, 100.0, 0), T.q8([1], b, 0.001, 10), T.i32(0)],
                        [T.q8([3], None, 0.5, 128)]))
        np.testing.assert_array_equal(out[0], [128, 255, 128])

    def test_same_quant_is_copy(self):
        a = np.array([0, 255], np.uint8)
        out = ok(run_op("CONCATENATION", [T.q8([2], a, 0.3, 9), T.q8([2], a, 0.3, 9), T.i32(0)],
                        [T.q8([4], None, 0.3, 9)]))
        np.testing.assert_array_equal(out[0], [0, 255, 0, 255])

    @pytest.mark.strict_mode
    def test_mismatched_dims(self):
        fails(add_op_code("CONCATENATION", [T.f32([2, 3]), T.f32([3, 3]), T.i32(1)], [T.f32([2, 6])]),
              BAD_DATA, "CONCATENATION: input 1 dimension 0 is 3")

    def test_mixed_types(self):
        fails(add_op_code("CONCATENATION", [T.f32([2]), T.f16([2]), T.i32(0)], [T.f32([4])]),
              BAD_DATA, "input 1 has type TENSOR_FLOAT16")

    def test_axis_out_of_range(self):
        fails(run_op("CONCATENATION", [T.f32([2], [1, 2]), T.f32([2], [1, 2]), T.i32(1)], [T.f32([4])]),
              BAD_DATA, "(axis) 1 is out of range")

    def test_rank5_rejected(self):
        fails(add_op_code("CONCATENATION", [T.f32([1, 1, 1, 1, 2]), T.f32([1, 1, 1, 1, 2]), T.i32(4)],
                          [T.f32([1, 1, 1, 1, 4])]), BAD_DATA, "rank 5")

    def test_zero_sized_input(self):
        x = T.f32([2, 3], np.arange(6))
        out = ok(run_op("CONCATENATION", [zero_batch(x), T.i32(0)], [T.f32([0, 0])]))
        assert out[0].shape == (0, 3)

    def test_unknown_dims_resolved_at_execution(self):
        a = np.arange(6, dtype=np.float32).reshape(3, 2)
        b = np.arange(3, dtype=np.float32).reshape(3, 1)
        out = ok(run_op("CONCATENATION", [T.f32([0, 2], a), T.f32([3, 0], b), T.i32(1)], [T.f32([0, 0])]))
        np.testing.assert_array_equal(out[0], np.concatenate([a, b], 1))


# =========================================================================================
# SPLIT / PACK
# =========================================================================================
class TestSplit:
    def test_negative_axis(self):
        x = np.arange(12, dtype=np.int32).reshape(2, 6)
        out = ok(run_op("SPLIT", [T.i32t([2, 6], x), T.i32(-1), T.i32(3)], [T.i32t([2, 2])] * 3))
        for k in range(3):
            np.testing.assert_array_equal(out[k], x[:, 2 * k:2 * k + 2])

    def test_not_divisible(self):
        fails(run_op("SPLIT", [T.f32([5], np.zeros(5)), T.i32(0), T.i32(2)], [T.f32([0])] * 2),
              BAD_DATA, "does not evenly divide")

    def test_output_count(self):
        fails(run_op("SPLIT", [T.f32([4], np.zeros(4)), T.i32(0), T.i32(2)], [T.f32([0])] * 4),
              BAD_DATA, "num_splits) is 2 but the operation has 4 outputs")

    @pytest.mark.strict_mode
    def test_output_quant(self):
        fails(add_op_code("SPLIT", [T.q8([4], None, 0.5, 1), T.i32(0), T.i32(2)],
                          [T.q8([2], None, 0.5, 1), T.q8([2], None, 0.25, 1)]), BAD_DATA, "output 1 must have")


class TestPack:
    @pytest.mark.parametrize("axis", [0, 1, 2])
    def test_axes(self, axis):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        b = -a
        out = ok(run_op("PACK", [T.i32(axis), T.f32([2, 3], a), T.f32([2, 3], b)], [T.f32([0, 0, 0])]))
        np.testing.assert_array_equal(out[0], np.stack([a, b], axis))

    def test_axis_out_of_range(self):
        fails(run_op("PACK", [T.i32(3), T.f32([2, 3], np.zeros(6)), T.f32([2, 3], np.zeros(6))],
                     [T.f32([0, 0, 0])]), BAD_DATA, "PACK: input 0 (axis) 3 is out of range [0, 3)")

    def test_quant_must_match(self):
        fails(add_op_code("PACK", [T.i32(0), T.q8([2], None, 0.5, 1), T.q8([2], None, 0.5, 2)], [T.q8([2, 2], None, 0.5, 1)]),
              BAD_DATA, "input 2 must have the scale and zeroPoint of input 1")

    def test_shapes_must_match(self):
        fails(add_op_code("PACK", [T.i32(0), T.f32([2]), T.f32([3])], [T.f32([2, 2])]), BAD_DATA,
              "all input tensors must have the same shape")


# =========================================================================================
# TILE / REVERSE / FILL / RANK
# =========================================================================================
class TestTile:
    def test_tile(self):
        x = np.arange(6, dtype=np.int32).reshape(2, 3)
        out = ok(run_op("TILE", [T.i32t([2, 3], x), T.i32t([2], [3, 2], const=True)], [T.i32t([6, 6])]))
        np.testing.assert_array_equal(out[0], np.tile(x, (3, 2)))

    def test_multiples_as_input(self):
        x = np.arange(4, dtype=np.float16).reshape(2, 2)
        out = ok(run_op("TILE", [T.f16([2, 2], x), T.i32t([2], [1, 3])], [T.f16([0, 0])]))
        np.testing.assert_array_equal(out[0], np.tile(x, (1, 3)))

    def test_zero_multiple_gives_empty(self):
        out = ok(run_op("TILE", [T.f32([2], [1, 2]), T.i32t([1], [0])], [T.f32([0])]))
        assert out[0].shape == (0,)

    def test_wrong_length(self):
        fails(add_op_code("TILE", [T.f32([2, 2]), T.i32t([1], [2], const=True)], [T.f32([2, 4])]),
              BAD_DATA, "input 1 (multiples) has 1 elements, expected 2")

    def test_negative_multiple(self):
        fails(run_op("TILE", [T.f32([2], [1, 2]), T.i32t([1], [-1])], [T.f32([0])]), OP_FAILED, "negative")


class TestReverse:
    def test_rank6(self):
        x = np.arange(64, dtype=np.float32).reshape(2, 2, 2, 2, 2, 2)
        out = ok(run_op("REVERSE", [T.f32(list(x.shape), x), T.i32t([1], [4], const=True)], [T.f32(list(x.shape))]))
        np.testing.assert_array_equal(out[0], np.flip(x, 4))

    def test_axis_shape(self):
        fails(add_op_code("REVERSE", [T.f32([2, 2]), T.i32t([2], [0, 1], const=True)], [T.f32([2, 2])]),
              BAD_DATA, "input 1 (axis) must have shape [1]")

    def test_axis_range(self):
        fails(run_op("REVERSE", [T.f32([2, 2], np.zeros(4)), T.i32t([1], [-1], const=True)], [T.f32([2, 2])]),
              BAD_DATA, "out of range [0, 2)")

    def test_rank9_rejected(self):
        fails(add_op_code("REVERSE", [T.f32([1] * 9), T.i32t([1], [0], const=True)], [T.f32([1] * 9)]),
              BAD_DATA, "rank 9")


class TestFill:
    def test_dims_input(self):
        out = ok(run_op("FILL", [T.i32t([3], [2, 1, 3]), T.f32s(np.nan)], [T.f32([0, 0, 0])]))
        assert out[0].shape == (2, 1, 3) and np.isnan(out[0]).all()

    def test_value_type_must_match(self):
        fails(add_op_code("FILL", [T.i32t([1]), T.f32s(1.0)], [T.i32t([0])]), BAD_DATA,
              "input 1 (value) has type FLOAT32, expected INT32")

    def test_negative_dim(self):
        fails(run_op("FILL", [T.i32t([2], [2, -1]), T.i32(1)], [T.i32t([0, 0])]), OP_FAILED, "negative")

    def test_output_type(self):
        fails(add_op_code("FILL", [T.i32t([1]), T.i32(1)], [T.q8([0], None, 1.0, 0)]), BAD_DATA,
              "output 0 has type TENSOR_QUANT8_ASYMM")


class TestRank:
    @pytest.mark.parametrize("dims", [[3], [1, 2, 3, 4, 5]])
    def test_rank(self, dims):
        out = ok(run_op("RANK", [T.bool8(dims, np.ones(int(np.prod(dims))))], [Opd("INT32")]))
        assert out[0] == len(dims)

    def test_output_must_be_int32_scalar(self):
        fails(add_op_code("RANK", [T.f32([2])], [T.i32t([1])]), BAD_DATA, "output 0 has type TENSOR_INT32")

    def test_unknown_dims(self):
        out = ok(run_op("RANK", [T.f32([0, 0], np.zeros((3, 2)))], [Opd("INT32")]))
        assert out[0] == 2


# =========================================================================================
# SLICE / STRIDED_SLICE
# =========================================================================================
class TestSlice:
    def test_size_minus_one(self):
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        out = ok(run_op("SLICE", [T.f32([2, 3, 4], x), T.i32t([3], [1, 0, 1]), T.i32t([3], [-1, 2, -1])],
                        [T.f32([0, 0, 0])]))
        np.testing.assert_array_equal(out[0], x[1:, 0:2, 1:])

    def test_size_zero_gives_empty(self):
        out = ok(run_op("SLICE", [T.f32([3], [1, 2, 3]), T.i32t([1], [3], const=True), T.i32t([1], [0], const=True)],
                        [T.f32([0])]))
        assert out[0].shape == (0,)

    def test_zero_sized_input(self):
        x = T.q8([2, 3], np.arange(6), 0.5, 1)
        out = ok(run_op("SLICE", [zero_batch(x), T.i32t([2], [0, 1], const=True), T.i32t([2], [-1, 2], const=True)],
                        [T.q8([0, 0], None, 0.5, 1)]))
        assert out[0].shape == (0, 2)

    def test_out_of_bounds(self):
        fails(run_op("SLICE", [T.f32([3], [1, 2, 3]), T.i32t([1], [2], const=True), T.i32t([1], [2], const=True)],
                     [T.f32([2])]), BAD_DATA, "exceeds dimension 0")

    def test_negative_begin(self):
        fails(run_op("SLICE", [T.f32([3], [1, 2, 3]), T.i32t([1], [-1]), T.i32t([1], [1])], [T.f32([0])]),
              OP_FAILED, "input 1 (begin) value -1")

    @pytest.mark.strict_mode
    def test_begin_length(self):
        fails(add_op_code("SLICE", [T.f32([3, 1]), T.i32t([1], [0], const=True), T.i32t([2], [1, 1], const=True)],
                          [T.f32([1, 1])]), BAD_DATA, "input 1 (begin) has 1 elements, expected 2")


class TestStridedSlice:
    def run(self, x, begin, end, strides, bm=0, em=0, sm=0, typ=T.f32):
        return run_op("STRIDED_SLICE", [typ(list(x.shape), x), T.i32t([x.ndim], begin), T.i32t([x.ndim], end),
                                        T.i32t([x.ndim], strides), T.i32(bm), T.i32(em), T.i32(sm)],
                      [typ([0] * x.ndim)])

    def test_negative_stride(self):
        x = np.arange(10, dtype=np.float32)
        np.testing.assert_array_equal(ok(self.run(x, [-2], [1], [-3]))[0], x[-2:1:-3])

    def test_negative_stride_to_start(self):
        x = np.arange(5, dtype=np.float32)
        np.testing.assert_array_equal(ok(self.run(x, [4], [-100], [-1]))[0], x[::-1])

    def test_masks(self):
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        out = ok(self.run(x, [2, 3], [0, 0], [1, -2], bm=1, em=3))
        np.testing.assert_array_equal(out[0], x[:, 3::-2])

    def test_clamped_out_of_range(self):
        x = np.arange(4, dtype=np.float32)
        np.testing.assert_array_equal(ok(self.run(x, [-100], [100], [1]))[0], x)

    def test_empty_result(self):
        x = np.arange(4, dtype=np.float32)
        assert ok(self.run(x, [3], [1], [1]))[0].shape == (0,)

    def test_shrink_all_gives_1(self):
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        out = run_op("STRIDED_SLICE", [T.f32([3, 4], x), T.i32t([2], [1, 2], const=True),
                                       T.i32t([2], [2, 3], const=True), T.i32t([2], [1, 1], const=True),
                                       T.i32(0), T.i32(0), T.i32(3)], [T.f32([1])])
        np.testing.assert_array_equal(ok(out)[0], [x[1, 2]])

    def test_shrink_with_wrong_size(self):
        x = np.arange(4, dtype=np.float32).reshape(2, 2)
        fails(run_op("STRIDED_SLICE", [T.f32([2, 2], x), T.i32t([2], [0, 0]), T.i32t([2], [2, 2]),
                                       T.i32t([2], [1, 1]), T.i32(0), T.i32(0), T.i32(1)], [T.f32([0])]),
              OP_FAILED, "shrink_axis_mask 1 but begin 0, end 2, stride 1 select 2 elements")

    @pytest.mark.strict_mode
    def test_output_rank_vs_shrink(self):
        fails(add_op_code("STRIDED_SLICE", [T.f32([2, 2]), T.i32t([2], [0, 0]), T.i32t([2], [1, 2]),
                                            T.i32t([2], [1, 1]), T.i32(0), T.i32(0), T.i32(1)], [T.f32([1, 2])]),
              BAD_DATA, "output 0 has rank 2, expected 1")

    @pytest.mark.strict_mode
    def test_zero_stride(self):
        fails(add_op_code("STRIDED_SLICE", [T.f32([2]), T.i32t([1], [0], const=True), T.i32t([1], [2], const=True),
                                            T.i32t([1], [0], const=True), T.i32(0), T.i32(0), T.i32(0)],
                          [T.f32([2])]), BAD_DATA, "Model_finish", "input 3 (strides) [0] has a zero entry")

    def test_quant8_signed(self):
        x = np.arange(-8, 8, dtype=np.int8).reshape(4, 4)
        out = ok(self.run(x, [0, 1], [4, 4], [2, 2], typ=lambda d, v=None: T.q8s(d, v, 0.5, -3)))
        np.testing.assert_array_equal(out[0], x[0:4:2, 1:4:2])


# =========================================================================================
# PAD / PAD_V2 / MIRROR_PAD
# =========================================================================================
def pads_t(p, const=True):
    p = np.asarray(p, np.int32)
    return T.i32t(list(p.shape), p, const=const)


class TestPad:
    def test_quant8_pads_with_zero_point(self):
        x = np.array([[1, 2], [3, 4]], np.uint8)
        out = ok(run_op("PAD", [T.q8([2, 2], x, 0.5, 77), pads_t([[1, 0], [0, 2]])], [T.q8([3, 4], None, 0.5, 77)]))
        np.testing.assert_array_equal(out[0], np.pad(x, [[1, 0], [0, 2]], constant_values=77))

    def test_float16_4d(self):
        x = np.arange(16, dtype=np.float16).reshape(1, 2, 2, 4)
        p = [[0, 1], [2, 0], [1, 1], [0, 3]]
        out = ok(run_op("PAD", [T.f16([1, 2, 2, 4], x), pads_t(p, const=False)], [T.f16([0, 0, 0, 0])]))
        np.testing.assert_array_equal(out[0], np.pad(x, p))

    @pytest.mark.parametrize("hw", [(5, 6), (48, 50)])
    @pytest.mark.parametrize("c,cpad", [(8, 8), (16, 16), (3, 5), (64, 1), (70, 2)])
    def test_channel_pads_copy_whole_pixels(self, c, cpad, hw):
        """Channel pads (copied as one void item per pixel where a pixel is a short run, see
        common.copy_pixels / fill_pixels; the fill only from 2048 pixels) for float32,
        float16, quant8 and PAD_V2 values (two values: the void item is made per value)."""
        rng = np.random.default_rng(c)
        p = [[0, 0], [1, 0], [0, 2], [0, cpad]]
        x = rng.standard_normal((1,) + hw + (c,)).astype(np.float32)
        od = list(np.pad(x, p).shape)            # (large outputs: declared, not dynamic)
        out = ok(run_op("PAD", [T.f32(list(x.shape), x), pads_t(p)], [T.f32(od)]))
        np.testing.assert_array_equal(out[0], np.pad(x, p))
        h = x.astype(np.float16)
        out = ok(run_op("PAD", [T.f16(list(x.shape), h), pads_t(p)], [T.f16(od)]))
        np.testing.assert_array_equal(out[0], np.pad(h, p))
        q = rng.integers(0, 256, x.shape).astype(np.uint8)
        out = ok(run_op("PAD", [T.q8(list(x.shape), q, 0.5, 77), pads_t(p)], [T.q8(od, None, 0.5, 77)]))
        np.testing.assert_array_equal(out[0], np.pad(q, p, constant_values=77))
        for v in (-2.5, 7.25):
            out = ok(run_op("PAD_V2", [T.f32(list(x.shape), x), pads_t(p), T.f32s(v)], [T.f32(od)]))
            np.testing.assert_array_equal(out[0], np.pad(x, p, constant_values=v))

    def test_negative_padding(self):
        fails(run_op("PAD", [T.f32([2], [1, 2]), pads_t([[0, -1]])], [T.f32([1])]), BAD_DATA, "negative")

    @pytest.mark.strict_mode
    def test_paddings_shape(self):
        fails(add_op_code("PAD", [T.f32([2, 2]), pads_t([[0, 1, 2]])], [T.f32([2, 2])]), BAD_DATA,
              "input 1 (paddings) has shape [1, 3], expected [2, 2]")



class TestPadV2:
    def test_float_value_nan(self):
        x = f32([1, 2])
        out = ok(run_op("PAD_V2", [T.f32([2], x), pads_t([[1, 1]]), T.f32s(np.nan)], [T.f32([4])]))
        assert np.isnan(out[0][[0, 3]]).all() and (out[0][1:3] == x).all()

    def test_float16_value(self):
        x = np.array([1, 2], np.float16)
        out = ok(run_op("PAD_V2", [T.f16([2], x), pads_t([[2, 0]]), T.f16s(-np.inf)], [T.f16([4])]))
        np.testing.assert_array_equal(out[0], np.array([-np.inf, -np.inf, 1, 2], np.float16))

    def test_quant_value(self):
        x = np.array([-5, 5], np.int8)
        out = ok(run_op("PAD_V2", [T.q8s([2], x, 0.1, 4), pads_t([[1, 1]]), T.i32(-128)], [T.q8s([4], None, 0.1, 4)]))
        np.testing.assert_array_equal(out[0], [-128, -5, 5, -128])

    def test_quant_value_out_of_range(self):
        fails(run_op("PAD_V2", [T.q8([2], [1, 2], 0.1, 4), pads_t([[1, 1]]), T.i32(256)], [T.q8([4], None, 0.1, 4)]),
              BAD_DATA, "input 2 (pad value) 256 is outside the range [0, 255]")

    def test_value_type(self):
        fails(add_op_code("PAD_V2", [T.f16([2]), pads_t([[1, 1]]), T.f32s(0.0)], [T.f16([4])]), BAD_DATA,
              "input 2 (pad value) has type FLOAT32, expected FLOAT16")


class TestMirrorPad:
    @pytest.mark.parametrize("mode,np_mode", [(0, "reflect"), (1, "symmetric")])
    def test_3d_against_numpy(self, mode, np_mode):
        x = np.arange(3 * 4 * 5, dtype=np.int32).reshape(3, 4, 5)
        p = [[2, 1], [0, 3], [4, 2]] if mode == 0 else [[3, 2], [4, 0], [5, 5]]
        out = ok(run_op("MIRROR_PAD", [T.i32t([3, 4, 5], x), pads_t(p, const=False), T.i32(mode)],
                        [T.i32t([0, 0, 0])]))
        np.testing.assert_array_equal(out[0], np.pad(x, p, mode=np_mode))

    def test_quant(self):
        x = np.array([1, 2, 3], np.uint8)
        out = ok(run_op("MIRROR_PAD", [T.q8([3], x, 0.5, 0), pads_t([[0, 2]]), T.i32(0)], [T.q8([5], None, 0.5, 0)]))
        np.testing.assert_array_equal(out[0], [1, 2, 3, 2, 1])

    def test_reflect_limit(self):
        fails(run_op("MIRROR_PAD", [T.f32([3], [1, 2, 3]), pads_t([[3, 0]]), T.i32(0)], [T.f32([6])]),
              BAD_DATA, "must be less than its size 3 in REFLECT mode")

    def test_symmetric_limit(self):
        ok(run_op("MIRROR_PAD", [T.f32([3], [1, 2, 3]), pads_t([[3, 0]]), T.i32(1)], [T.f32([6])]))
        fails(run_op("MIRROR_PAD", [T.f32([3], [1, 2, 3]), pads_t([[4, 0]]), T.i32(1)], [T.f32([7])]),
              BAD_DATA, "at most its size 3 in SYMMETRIC mode")

    def test_bad_mode(self):
        fails(run_op("MIRROR_PAD", [T.f32([3], [1, 2, 3]), pads_t([[1, 0]]), T.i32(2)], [T.f32([4])]),
              BAD_DATA, "input 2 (mode) must be 0 (REFLECT) or 1 (SYMMETRIC), got 2")


# =========================================================================================
# generic validation
# =========================================================================================
def test_omitted_required_input():
    fails(add_op_code("EXPAND_DIMS", [T.f32([2]), Opd("INT32", [], None, const=True)], [T.f32([1, 2])]),
          BAD_DATA, "input 1 (axis) is required but was omitted")


def test_wrong_counts():
    fails(add_op_code("TILE", [T.f32([2])], [T.f32([2])]), BAD_DATA, "TILE: expected 2 inputs, got 1")
    fails(add_op_code("SPLIT", [T.f32([2]), T.i32(0)], [T.f32([1])]), BAD_DATA, "SPLIT: expected 3 inputs")
