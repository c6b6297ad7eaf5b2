"""Every builtin TFLite's NNAPI delegate maps, each on a tiny model written with the schema's
builders (tests/tflite_writer.py), loaded through nnapi_py.tflite and compared with LiteRT's
reference kernels (tests/tflite_ref.py)."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert) is not installed")
pytest.importorskip("tflite", reason="the tflite parser package is not installed")
from tflite_ref import compare  # noqa: E402

f32, i32, u8, i8, b8 = np.float32, np.int32, np.uint8, np.int8, np.bool_
rng = np.random.default_rng(24)


def rnd(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape).astype(f32)


def unary_model(op, shape=(2, 3, 4), dtype=f32, out_dtype=None, options=None):
    return ([("x", dtype, shape, None), ("y", out_dtype or dtype, shape, None)], [(op, [0], [1], options)], [0], [1])


@pytest.mark.parametrize("op,lo,hi,expect", [
    ("ABS", -2, 2, "ABS"), ("EXP", -2, 2, "EXP"), ("LOG", 0.1, 3, "LOG"), ("SQRT", 0.1, 3, "SQRT"),
    ("RSQRT", 0.1, 3, "RSQRT"), ("SIN", -3, 3, "SIN"), ("COS", -3, 3, "SUB + SIN"), ("NEG", -2, 2, "NEG"),
    ("FLOOR", -3, 3, "FLOOR"), ("TANH", -2, 2, "TANH"), ("LOGISTIC", -3, 3, "LOGISTIC"), ("RELU", -2, 2, "RELU"),
    ("RELU6", -2, 8, "RELU6"), ("RELU_N1_TO_1", -2, 2, "RELU1"), ("ELU", -2, 2, "ELU"),
    ("HARD_SWISH", -4, 4, "HARD_SWISH"), ("LOG_SOFTMAX", -2, 2, "LOG_SOFTMAX")])
def test_float_unary(tmp_path, op, lo, hi, expect):
    compare(tmp_path, *unary_model(op), [rnd(2, 3, 4, lo=lo, hi=hi)], expect)


def test_hard_swish_below_level_4_is_decomposed(tmp_path):
    compare(tmp_path, *unary_model("HARD_SWISH"), [rnd(2, 3, 4, lo=-5, hi=5)], "ADD + RELU6 + MUL + MUL", level=3)


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "POW", "SQUARED_DIFFERENCE"])
def test_float_binary(tmp_path, op):
    a, b = rnd(2, 3, lo=0.5, hi=2), rnd(1, 3, lo=0.5, hi=2)
    compare(tmp_path, [("a", f32, (2, 3), None), ("b", f32, (1, 3), None), ("y", f32, (2, 3), None)],
            [(op, [0, 1], [2], None)], [0, 1], [2], [a, b])


def test_int32_arithmetic(tmp_path):
    a = rng.integers(-50, 50, (2, 3)).astype(i32)
    b = rng.integers(-50, 50, (2, 3)).astype(i32)
    compare(tmp_path, [("a", i32, (2, 3), None), ("b", i32, (2, 3), None), ("s", i32, (2, 3), None),
                       ("y", i32, (2, 3), None)],
            [("ADD", [0, 1], [2], None), ("MUL", [2, 1], [3], None)], [0, 1], [3], [a, b], "MUL")


@pytest.mark.parametrize("op", ["EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL"])
def test_comparisons(tmp_path, op):
    a = rng.integers(-3, 3, (2, 4)).astype(f32)
    b = rng.integers(-3, 3, (2, 4)).astype(f32)
    compare(tmp_path, [("a", f32, (2, 4), None), ("b", f32, (2, 4), None), ("y", b8, (2, 4), None)],
            [(op, [0, 1], [2], None)], [0, 1], [2], [a, b], op)


@pytest.mark.parametrize("op", ["LOGICAL_AND", "LOGICAL_OR"])
def test_logical(tmp_path, op):
    a, b = rng.random((2, 4)) > 0.5, rng.random((2, 4)) > 0.5
    compare(tmp_path, [("a", b8, (2, 4), None), ("b", b8, (2, 4), None), ("y", b8, (2, 4), None)],
            [(op, [0, 1], [2], None)], [0, 1], [2], [a, b], op)


def test_logical_not(tmp_path):
    compare(tmp_path, *unary_model("LOGICAL_NOT", dtype=b8), [rng.random((2, 3, 4)) > 0.5], "LOGICAL_NOT")


@pytest.mark.parametrize("op, cond, expect", [("SELECT", (2, 3), "SELECT"),
                                               ("SELECT_V2", (1, 3), "LOGICAL_OR")],   # a bool condition broadcast
                         ids=["select", "select_v2_broadcasts_a_bool_condition"])
def test_select(tmp_path, op, cond, expect):
    compare(tmp_path, [("c", b8, cond, None), ("a", f32, (2, 3), None), ("b", f32, (2, 3), None),
                       ("y", f32, (2, 3), None)],
            [(op, [0, 1, 2], [3], None)], [0, 1, 2], [3],
            [rng.random(cond) > 0.5, rnd(2, 3), rnd(2, 3)], expect)


def test_squared_difference_int32(tmp_path):
    a = rng.integers(-20, 20, (2, 6)).astype(i32)
    b = rng.integers(-20, 20, (2, 6)).astype(i32)
    compare(tmp_path, [("a", i32, (2, 6), None), ("b", i32, (2, 6), None), ("y", i32, (2, 6), None)],
            [("SQUARED_DIFFERENCE", [0, 1], [2], None)], [0, 1], [2], [a, b], "SUB + MUL")


def test_prelu_and_leaky_relu(tmp_path):
    compare(tmp_path, [("x", f32, (2, 3, 4), None), ("s", f32, (4,), rnd(4)), ("y", f32, (2, 3, 4), None),
                       ("z", f32, (2, 3, 4), None)],
            [("PRELU", [0, 1], [2], None), ("LEAKY_RELU", [2], [3], ("LeakyReluOptions", {"Alpha": 0.1}))],
            [0], [3], [rnd(2, 3, 4)], "PRELU")


@pytest.mark.parametrize("rank", [2, 4])
def test_softmax(tmp_path, rank):
    shape = (2, 5) if rank == 2 else (1, 2, 3, 5)
    compare(tmp_path, *unary_model("SOFTMAX", shape, options=("SoftmaxOptions", {"Beta": 0.7})), [rnd(*shape)],
            "SOFTMAX")


def test_l2_normalization(tmp_path):
    compare(tmp_path, *unary_model("L2_NORMALIZATION", (1, 2, 3, 4)), [rnd(1, 2, 3, 4)], "L2_NORMALIZATION")


def test_local_response_normalization(tmp_path):
    """Against LiteRT's builtin kernels: its reference kernel sums the squares over [c - r, c + r)
    where the builtin kernel, NNAPI and TensorFlow sum over [c - r, c + r] (the delegate maps the
    radius unchanged, as here)."""
    compare(tmp_path, *unary_model("LOCAL_RESPONSE_NORMALIZATION", (1, 2, 3, 6), options=(
        "LocalResponseNormalizationOptions", {"Radius": 2, "Bias": 1.0, "Alpha": 0.5, "Beta": 0.75})),
            [rnd(1, 2, 3, 6)], "LOCAL_RESPONSE_NORMALIZATION", builtin=True)


# -- convolutions, matrix products, pooling
def _pool_opts(w=2, h=2, stride=2, pad=1):
    return ("Pool2DOptions", {"Padding": pad, "StrideW": stride, "StrideH": stride, "FilterWidth": w,
                              "FilterHeight": h})


@pytest.mark.parametrize("op", ["L2_POOL_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D"])
def test_pools(tmp_path, op):
    compare(tmp_path, [("x", f32, (1, 4, 6, 3), None), ("y", f32, (1, 2, 3, 3), None)],
            [(op, [0], [1], _pool_opts())], [0], [1], [rnd(1, 4, 6, 3)], op)


def test_grouped_conv(tmp_path):
    w = rnd(4, 3, 3, 2)                                 # 4 outputs, input depth 4 in 2 groups of 2
    conv = ("Conv2DOptions", {"Padding": 0, "StrideW": 1, "StrideH": 1})
    compare(tmp_path, [("x", f32, (1, 5, 5, 4), None), ("w", f32, (4, 3, 3, 2), w), ("b", f32, (4,), rnd(4)),
                       ("y", f32, (1, 5, 5, 4), None)],
            [("CONV_2D", [0, 1, 2], [3], conv)], [0], [3], [rnd(1, 5, 5, 4)], "GROUPED_CONV_2D", tol=1e-4)


def test_transpose_conv(tmp_path):
    w = rnd(3, 3, 3, 2)
    compare(tmp_path, [("shape", i32, (4,), np.array([1, 8, 8, 3], i32)), ("w", f32, (3, 3, 3, 2), w),
                       ("x", f32, (1, 4, 4, 2), None), ("b", f32, (3,), rnd(3)), ("y", f32, (1, 8, 8, 3), None)],
            [("TRANSPOSE_CONV", [0, 1, 2, 3], [4], ("TransposeConvOptions", {"Padding": 0, "StrideW": 2,
                                                                            "StrideH": 2}), 4)],
            [2], [4], [rnd(1, 4, 4, 2)], "TRANSPOSE_CONV_2D", tol=1e-4)


def test_fully_connected_without_bias(tmp_path):
    compare(tmp_path, [("x", f32, (3, 4), None), ("w", f32, (5, 4), rnd(5, 4)), ("y", f32, (3, 5), None)],
            [("FULLY_CONNECTED", [0, 1, -1], [2], ("FullyConnectedOptions", {}))], [0], [2], [rnd(3, 4)],
            "FULLY_CONNECTED")


def test_fully_connected_keep_num_dims(tmp_path):
    compare(tmp_path, [("x", f32, (2, 3, 4), None), ("w", f32, (5, 4), rnd(5, 4)), ("b", f32, (5,), rnd(5)),
                       ("y", f32, (2, 3, 5), None)],
            [("FULLY_CONNECTED", [0, 1, 2], [3], ("FullyConnectedOptions", {"KeepNumDims": True}), 5)],
            [0], [3], [rnd(2, 3, 4)], "FULLY_CONNECTED + RESHAPE")


@pytest.mark.parametrize("adj", [(False, False), (True, False), (False, True)])
def test_batch_matmul(tmp_path, adj):
    a_shape = (2, 4, 3) if adj[0] else (2, 3, 4)
    b_shape = (2, 5, 4) if adj[1] else (2, 4, 5)
    compare(tmp_path, [("a", f32, a_shape, None), ("b", f32, b_shape, None), ("y", f32, (2, 3, 5), None)],
            [("BATCH_MATMUL", [0, 1], [2], ("BatchMatMulOptions", {"AdjX": adj[0], "AdjY": adj[1]}))],
            [0, 1], [2], [rnd(*a_shape), rnd(*b_shape)], "BATCH_MATMUL")


@pytest.mark.parametrize("level,adj_y", [(3, False), (8, False), (8, True)])
def test_batch_matmul_by_a_constant_matrix(tmp_path, level, adj_y):
    """oww_melspectrogram's pattern: [1, 1, F, 257] x a constant [257, 32] -> FULLY_CONNECTED."""
    b = rnd(5, 4) if adj_y else rnd(4, 5)
    compare(tmp_path, [("a", f32, (1, 2, 3, 4), None), ("b", f32, b.shape, b), ("y", f32, (1, 2, 3, 5), None)],
            [("BATCH_MATMUL", [0, 1], [2], ("BatchMatMulOptions", {"AdjY": adj_y}))], [0], [2], [rnd(1, 2, 3, 4)],
            "RESHAPE + FULLY_CONNECTED + RESHAPE", level=level)


# -- shapes and layout
def test_squeeze_and_expand_dims(tmp_path):
    compare(tmp_path, [("x", f32, (1, 3, 1, 4), None), ("s", f32, (3, 4), None), ("ax", i32, (1,), np.array([1], i32)),
                       ("e", f32, (3, 1, 4), None), ("t", f32, (3, 4), None)],
            [("SQUEEZE", [0], [1], None), ("EXPAND_DIMS", [1, 2], [3], None),
             ("SQUEEZE", [3], [4], ("SqueezeOptions", {"SqueezeDims": [1]}))], [0], [3, 4],
            [rnd(1, 3, 1, 4)], "EXPAND_DIMS")


def test_tile_reverse_space_to_depth(tmp_path):
    compare(tmp_path, [("x", f32, (1, 2, 4, 3), None), ("m", i32, (4,), np.array([1, 2, 1, 2], i32)),
                       ("t", f32, (1, 4, 4, 6), None), ("ax", i32, (2,), np.array([1, 2], i32)),
                       ("r", f32, (1, 4, 4, 6), None), ("d", f32, (1, 2, 2, 24), None)],
            [("TILE", [0, 1], [2], None), ("REVERSE_V2", [2, 3], [4], None),
             ("SPACE_TO_DEPTH", [4], [5], ("SpaceToDepthOptions", {"BlockSize": 2}))], [0], [5],
            [rnd(1, 2, 4, 3)], "REVERSE + REVERSE")


@pytest.mark.parametrize("mode", [0, 1])
def test_mirror_pad(tmp_path, mode):
    pads = np.array([[0, 0], [1, 1], [2, 1], [0, 0]], i32)
    compare(tmp_path, [("x", f32, (1, 3, 4, 2), None), ("p", i32, (4, 2), pads), ("y", f32, (1, 5, 7, 2), None)],
            [("MIRROR_PAD", [0, 1], [2], ("MirrorPadOptions", {"Mode": mode}))], [0], [2], [rnd(1, 3, 4, 2)],
            "MIRROR_PAD")


def test_pad_transpose_depth_to_space(tmp_path):
    pads = np.array([[0, 0], [1, 0], [0, 2], [0, 0]], i32)
    compare(tmp_path, [("x", f32, (1, 2, 3, 8), None), ("p", i32, (4, 2), pads), ("y", f32, (1, 3, 5, 8), None),
                       ("perm", i32, (4,), np.array([0, 2, 1, 3], i32)), ("t", f32, (1, 5, 3, 8), None),
                       ("d", f32, (1, 10, 6, 2), None)],
            [("PAD", [0, 1], [2], None), ("TRANSPOSE", [2, 3], [4], None),
             ("DEPTH_TO_SPACE", [4], [5], ("DepthToSpaceOptions", {"BlockSize": 2}))], [0], [5], [rnd(1, 2, 3, 8)],
            "DEPTH_TO_SPACE")


@pytest.mark.parametrize("opts", [{}, {"AlignCorners": True}, {"HalfPixelCenters": True}])
def test_resize_bilinear(tmp_path, opts):
    compare(tmp_path, [("x", f32, (1, 3, 4, 2), None), ("s", i32, (2,), np.array([5, 7], i32)),
                       ("y", f32, (1, 5, 7, 2), None)],
            [("RESIZE_BILINEAR", [0, 1], [2], ("ResizeBilinearOptions", opts), 3)], [0], [2], [rnd(1, 3, 4, 2)],
            "RESIZE_BILINEAR")


def test_padv2(tmp_path):
    pads = np.array([[0, 0], [1, 2], [0, 1]], i32)
    compare(tmp_path, [("x", f32, (1, 3, 4), None), ("p", i32, (3, 2), pads), ("v", f32, (), np.array(1.5, f32)),
                       ("y", f32, (1, 6, 5), None)],
            [("PADV2", [0, 1, 2], [3], None)], [0], [3], [rnd(1, 3, 4)], "PAD_V2")


def test_space_batch_round_trip_with_crops(tmp_path):
    block = np.array([2, 2], i32)
    compare(tmp_path, [("x", f32, (1, 4, 6, 2), None), ("b", i32, (2,), block),
                       ("p", i32, (2, 2), np.array([[0, 0], [1, 1]], i32)), ("s", f32, (4, 2, 4, 2), None),
                       ("c", i32, (2, 2), np.array([[0, 0], [1, 1]], i32)), ("y", f32, (1, 4, 6, 2), None)],
            [("SPACE_TO_BATCH_ND", [0, 1, 2], [3], None), ("BATCH_TO_SPACE_ND", [3, 1, 4], [5], None)],
            [0], [5], [rnd(1, 4, 6, 2)], "BATCH_TO_SPACE_ND + STRIDED_SLICE")


def test_resize_nearest_neighbor(tmp_path):
    compare(tmp_path, [("x", f32, (1, 3, 4, 2), None), ("s", i32, (2,), np.array([6, 8], i32)),
                       ("y", f32, (1, 6, 8, 2), None)],
            [("RESIZE_NEAREST_NEIGHBOR", [0, 1], [2], ("ResizeNearestNeighborOptions", {}))], [0], [2],
            [rnd(1, 3, 4, 2)], "RESIZE_NEAREST_NEIGHBOR")


def test_pack_native_at_level_6(tmp_path):
    compare(tmp_path, [("a", f32, (2, 3), None), ("b", f32, (2, 3), None), ("y", f32, (2, 2, 3), None)],
            [("PACK", [0, 1], [2], ("PackOptions", {"ValuesCount": 2, "Axis": 1}))], [0, 1], [2],
            [rnd(2, 3), rnd(2, 3)], "PACK", level=6)


# -- slicing, splitting, top-k, arg-max
def test_split_topk_argmax_argmin(tmp_path):
    compare(tmp_path, [("ax", i32, (), np.array(1, i32)), ("x", f32, (2, 6), None), ("a", f32, (2, 3), None),
                       ("b", f32, (2, 3), None), ("k", i32, (), np.array(2, i32)), ("v", f32, (2, 2), None),
                       ("i", i32, (2, 2), None), ("am", i32, (2,), None), ("an", i32, (2,), None)],
            [("SPLIT", [0, 1], [2, 3], ("SplitOptions", {"NumSplits": 2})), ("TOPK_V2", [2, 4], [5, 6], None),
             ("ARG_MAX", [3, 0], [7], ("ArgMaxOptions", {"OutputType": 2})),
             ("ARG_MIN", [3, 0], [8], ("ArgMinOptions", {"OutputType": 2}))],
            [1], [5, 6, 7, 8], [rnd(2, 6)], "TOPK_V2")


def test_gather_slice_strided_slice_shrink(tmp_path):
    compare(tmp_path, [("x", f32, (4, 5), None), ("i", i32, (3,), np.array([3, 0, 2], i32)), ("g", f32, (3, 5), None),
                       ("b", i32, (2,), np.array([1, 1], i32)), ("s", i32, (2,), np.array([2, -1], i32)),
                       ("l", f32, (2, 4), None), ("sb", i32, (2,), np.array([-1, 0], i32)),
                       ("se", i32, (2,), np.array([0, 4], i32)), ("ss", i32, (2,), np.array([1, 1], i32)),
                       ("r", f32, (4,), None)],
            [("GATHER", [0, 1], [2], ("GatherOptions", {"Axis": 0})), ("SLICE", [2, 3, 4], [5], None),
             ("STRIDED_SLICE", [0, 6, 7, 8], [9], ("StridedSliceOptions", {"ShrinkAxisMask": 1}))],
            [0], [5, 9], [rnd(4, 5)], "STRIDED_SLICE")


def test_split_v(tmp_path):
    compare(tmp_path, [("x", f32, (2, 7), None), ("s", i32, (3,), np.array([2, -1, 3], i32)),
                       ("ax", i32, (), np.array(1, i32)), ("a", f32, (2, 2), None), ("b", f32, (2, 2), None),
                       ("c", f32, (2, 3), None)],
            [("SPLIT_V", [0, 1, 2], [3, 4, 5], ("SplitVOptions", {"NumSplits": 3}))], [0], [3, 4, 5], [rnd(2, 7)],
            "3 x SLICE")


# -- lookups
def test_embedding_and_hashtable_lookup(tmp_path):
    values = rnd(5, 3)
    keys = np.array([1, 3, 5, 7, 9], i32)
    compare(tmp_path, [("ids", i32, (3,), None), ("v", f32, (5, 3), values), ("e", f32, (3, 3), None),
                       ("keys", i32, (5,), keys), ("h", f32, (3, 3), None), ("hit", u8, (3,), None)],
            [("EMBEDDING_LOOKUP", [0, 1], [2], None), ("HASHTABLE_LOOKUP", [0, 3, 1], [4, 5], None)],
            [0], [2, 4, 5], [np.array([4, 1, 3], i32)], "HASHTABLE_LOOKUP")


@pytest.mark.parametrize("kind", [1, 2])
def test_lsh_projection(tmp_path, kind):
    hashes = rnd(4, 3)
    shape = (4,) if kind == 1 else (12,)
    compare(tmp_path, [("hash", f32, (4, 3), hashes), ("x", i32, (3, 2), None), ("w", f32, (3,), rnd(3, lo=0, hi=1)),
                       ("y", i32, shape, None)],
            [("LSH_PROJECTION", [0, 1] + ([] if kind == 1 else [2]), [3], ("LSHProjectionOptions", {"Type": kind}))],
            [1], [3], [rng.integers(0, 100, (3, 2)).astype(i32)], "LSH_PROJECTION")


# -- reductions
@pytest.mark.parametrize("op,keep", [("SUM", False), ("SUM", True), ("REDUCE_PROD", False), ("REDUCE_MAX", True),
                                     ("REDUCE_MIN", False), ("MEAN", True)])
def test_reductions(tmp_path, op, keep):
    out = (2, 1, 4) if keep else (2, 4)
    compare(tmp_path, [("x", f32, (2, 3, 4), None), ("ax", i32, (1,), np.array([1], i32)), ("y", f32, out, None)],
            [(op, [0, 1], [2], ("ReducerOptions", {"KeepDims": keep}))], [0], [2], [rnd(2, 3, 4, lo=0.5, hi=1.5)])


def test_reduce_any(tmp_path):
    compare(tmp_path, [("x", b8, (2, 3, 4), None), ("ax", i32, (1,), np.array([2], i32)), ("y", b8, (2, 3), None)],
            [("REDUCE_ANY", [0, 1], [2], ("ReducerOptions", {"KeepDims": False}))], [0], [2],
            [rng.random((2, 3, 4)) > 0.8], "REDUCE_ANY")


# -- quantization and casts
def test_quantize_dequantize_cast(tmp_path):
    q = {"scale": 0.02, "zero_point": 120}
    compare(tmp_path, [("x", f32, (2, 5), None), ("q", u8, (2, 5), None, q), ("d", f32, (2, 5), None),
                       ("c", i32, (2, 5), None)],
            [("QUANTIZE", [0], [1], None), ("DEQUANTIZE", [1], [2], None), ("CAST", [2], [3], None)],
            [0], [2, 3], [rnd(2, 5, lo=-2, hi=2) * 10], "QUANTIZE")


# -- quantized variants (uint8 / int8): within one quantization step of LiteRT's reference kernels
QU = {"scale": 0.05, "zero_point": 128}
QI = {"scale": 0.05, "zero_point": -3}


def q(dtype, *shape):
    lo, hi = (0, 256) if dtype == u8 else (-128, 128)
    return rng.integers(lo, hi, shape).astype(dtype)


@pytest.mark.parametrize("dtype,qp", [(u8, QU), (i8, QI)])
@pytest.mark.parametrize("op", ["LEAKY_RELU", "HARD_SWISH", "TANH", "LOGISTIC", "RELU"])
def test_quantized_activations(tmp_path, dtype, qp, op):
    out_q = {"scale": 1 / 256, "zero_point": 0 if dtype == u8 else -128} if op == "LOGISTIC" else \
        {"scale": 1 / 128, "zero_point": 128 if dtype == u8 else 0} if op == "TANH" else qp
    opts = ("LeakyReluOptions", {"Alpha": 0.2}) if op == "LEAKY_RELU" else None
    compare(tmp_path, [("x", dtype, (2, 8), None, qp), ("y", dtype, (2, 8), None, out_q)], [(op, [0], [1], opts)],
            [0], [1], [q(dtype, 2, 8)], qtol=1)


@pytest.mark.parametrize("dtype,qp", [(u8, QU), (i8, QI)])
def test_quantized_padv2_mean_concat(tmp_path, dtype, qp):
    pads = np.array([[0, 0], [1, 2]], i32)
    pad_value = np.array(7 if dtype == u8 else -7, dtype)
    compare(tmp_path, [("x", dtype, (2, 4), None, qp), ("p", i32, (2, 2), pads), ("v", dtype, (), pad_value, qp),
                       ("y", dtype, (2, 7), None, qp), ("ax", i32, (1,), np.array([1], i32)),
                       ("m", dtype, (2, 1), None, qp), ("c", dtype, (2, 8), None, qp)],
            [("PADV2", [0, 1, 2], [3], None), ("MEAN", [3, 4], [5], ("ReducerOptions", {"KeepDims": True})),
             ("CONCATENATION", [3, 5], [6], ("ConcatenationOptions", {"Axis": 1}))],
            [0], [6], [q(dtype, 2, 4)], "PAD_V2", qtol=1)


def test_int8_transpose_conv_with_a_per_tensor_filter(tmp_path):
    """NNAPI wants a per-channel filter with int8 input: the per-tensor scale is repeated."""
    w = q(i8, 3, 3, 3, 2)
    w[w == -128] = -127
    compare(tmp_path, [("shape", i32, (4,), np.array([1, 6, 6, 3], i32)),
                       ("w", i8, (3, 3, 3, 2), w, {"scale": 0.02, "zero_point": 0}),
                       ("x", i8, (1, 3, 3, 2), None, QI), ("y", i8, (1, 6, 6, 3), None, {"scale": 0.3, "zero_point": 2})],
            [("TRANSPOSE_CONV", [0, 1, 2], [3], ("TransposeConvOptions", {"Padding": 0, "StrideW": 2, "StrideH": 2}),
              3)], [2], [3], [q(i8, 1, 3, 3, 2)], "TRANSPOSE_CONV_2D", qtol=1)


def test_hybrid_depthwise_conv(tmp_path):
    """Beyond the delegate: int8 depthwise weights with float activations (NNAPI DEQUANTIZE first);
    per-channel scales (LiteRT's hybrid depthwise kernel reads one scale per channel)."""
    w = q(i8, 1, 3, 3, 4)
    w[w == -128] = -127
    x = rnd(1, 5, 5, 4)
    compare(tmp_path, [("x", f32, (1, 5, 5, 4), None), ("w", i8, (1, 3, 3, 4), w,
                                                         {"scales": [0.01, 0.02, 0.005, 0.01], "zero_points": [0] * 4,
                                                          "axis": 3}),
                       ("b", f32, (4,), rnd(4)), ("y", f32, (1, 5, 5, 4), None)],
            [("DEPTHWISE_CONV_2D", [0, 1, 2], [3], ("DepthwiseConv2DOptions", {"Padding": 0, "StrideW": 1,
                                                                              "StrideH": 1, "DepthMultiplier": 1}))],
            [0], [3], [x], "DEQUANTIZE + DEPTHWISE_CONV_2D", tol=2e-2, builtin=True)


# -- what a mapping emits at a feature level is valid on a runtime of that level
def _emulated(level):
    from nnapi_py import nn
    return nn.emulated(feature_level=level)


@pytest.mark.parametrize("level,case", [
    (3, "hard_swish"), (3, "pack"), (3, "cos"), (3, "batch_matmul"), (3, "select_v2"), (2, "batch_to_space"),
    (5, "pack")])
def test_lowerings_valid_on_a_runtime_of_that_level(tmp_path, level, case):
    """Loaded with feature_level=N while the runtime itself emulates release N (NNAPI_PY_FEATURE_LEVEL):
    the model builds and compiles there, so every operation the mapping emits exists at that level (HARD_SWISH decomposed below 4, PACK as
    RESHAPE + CONCATENATION below 6, ...), and the result still matches LiteRT."""
    models = {
        "hard_swish": (unary_model("HARD_SWISH"), [rnd(2, 3, 4, lo=-5, hi=5)]),
        "pack": (([("a", f32, (2, 3), None), ("b", f32, (2, 3), None), ("y", f32, (2, 2, 3), None)],
                  [("PACK", [0, 1], [2], ("PackOptions", {"ValuesCount": 2, "Axis": 1}))], [0, 1], [2]),
                 [rnd(2, 3), rnd(2, 3)]),
        "cos": (unary_model("COS"), [rnd(2, 3, 4)]),
        "batch_matmul": (([("a", f32, (2, 3, 4), None), ("b", f32, (4, 5), rnd(4, 5)), ("y", f32, (2, 3, 5), None)],
                          [("BATCH_MATMUL", [0, 1], [2], None)], [0], [2]), [rnd(2, 3, 4)]),
        "select_v2": (([("c", b8, (2, 3), None), ("a", f32, (1, 3), None), ("b", f32, (2, 3), None),
                        ("y", f32, (2, 3), None)], [("SELECT_V2", [0, 1, 2], [3], None)], [0, 1, 2], [3]),
                      [rng.random((2, 3)) > 0.5, rnd(1, 3), rnd(2, 3)]),
        "batch_to_space": (([("x", f32, (4, 2, 4, 1), None), ("b", i32, (2,), np.array([2, 2], i32)),
                             ("c", i32, (2, 2), np.array([[0, 0], [1, 1]], i32)), ("y", f32, (1, 4, 6, 1), None)],
                            [("BATCH_TO_SPACE_ND", [0, 1, 2], [3], None)], [0], [3]), [rnd(4, 2, 4, 1)]),
    }
    model, feeds = models[case]
    import tflite_writer
    import nnapi_py.tflite as T
    path = tflite_writer.write(str(tmp_path / "v.tflite"), *model)
    with _emulated(level):                      # built and compiled by a runtime of that level
        m = T.load(path, feature_level=level)
    assert all(not str(done).startswith(("CPU", "unmapped")) for _, _, done in m.mapping), m.mapping
    compare(tmp_path, *model, feeds, level=level)     # (run on today's runtime: FL2 has no compute call)


# -- beyond the delegate: lowerings for what it leaves on the CPU
@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("level", [3, 6])
def test_mirror_pad_below_level_7_gathers(tmp_path, mode, level):
    pads = np.array([[0, 0], [2, 1], [1, 2], [0, 0]], i32)
    with _emulated(level):
        compare(tmp_path, [("x", f32, (1, 3, 4, 2), None), ("p", i32, (4, 2), pads), ("y", f32, (1, 6, 7, 2), None)],
                [("MIRROR_PAD", [0, 1], [2], ("MirrorPadOptions", {"Mode": mode}))], [0], [2], [rnd(1, 3, 4, 2)],
                "GATHER + GATHER", level=level)


def test_reverse_below_level_7_gathers(tmp_path):
    with _emulated(3):
        compare(tmp_path, [("x", f32, (2, 3, 4), None), ("ax", i32, (2,), np.array([1, 2], i32)),
                           ("y", f32, (2, 3, 4), None)],
                [("REVERSE_V2", [0, 1], [2], None)], [0], [2], [rnd(2, 3, 4)], "GATHER + GATHER", level=3)


def test_square(tmp_path):
    compare(tmp_path, *unary_model("SQUARE"), [rnd(2, 3, 4)], "MUL")


def test_gather_with_a_scalar_position(tmp_path):
    """A constant scalar position, and one computed in the graph (an ARG_MAX of a vector; precise_vad's
    WHILE body indexes its frames with a scalar loop counter)."""
    compare(tmp_path, [("x", f32, (3, 4, 5), None), ("i", i32, (), np.array(2, i32)), ("y", f32, (3, 5), None)],
            [("GATHER", [0, 1], [2], ("GatherOptions", {"Axis": 1}))], [0], [2], [rnd(3, 4, 5)], "GATHER + RESHAPE")
    compare(tmp_path, [("x", f32, (3, 4, 5), None), ("v", f32, (4,), None), ("ax", i32, (), np.array(0, i32)),
                       ("i", i32, (), None), ("y", f32, (3, 5), None)],
            [("ARG_MAX", [1, 2], [3], ("ArgMaxOptions", {"OutputType": 2})),
             ("GATHER", [0, 3], [4], ("GatherOptions", {"Axis": 1}))], [0, 1], [4],
            [rnd(3, 4, 5), np.array([0.1, 0.3, 2.0, -1.0], f32)], "GATHER + RESHAPE", name="m2")


@pytest.mark.parametrize("shape_in,shape_out", [((1, 1), ()), ((1,), (1, 1)), ((1, 1, 1), (1,))])
def test_reshape_of_one_bool(tmp_path, shape_in, shape_out):
    """oww_hey_jarvis's IF condition: a bool of one element reshaped (NNAPI cannot RESHAPE BOOL8);
    compared through a SELECT so the output is not a bool of rank 0."""
    compare(tmp_path, [("c", b8, shape_in, None), ("r", b8, shape_out, None), ("a", f32, (2, 3), None),
                       ("b", f32, (2, 3), None), ("y", f32, (2, 3), None)],
            [("RESHAPE", [0], [1], None), ("SELECT_V2", [1, 2, 3], [4], None)], [0, 2, 3], [4],
            [np.array(True).reshape(shape_in), rnd(2, 3), rnd(2, 3)], "LOGICAL_OR")


def test_reduce_all_broadcast_to_floor_div(tmp_path):
    """Builtins the delegate does not map, with an NNAPI form: REDUCE_ALL, BROADCAST_TO (RESHAPE +
    TILE), FLOOR_DIV on floats (DIV + FLOOR)."""
    compare(tmp_path, [("c", b8, (2, 3), None), ("ax", i32, (1,), np.array([1], i32)), ("r", b8, (2,), None),
                       ("x", f32, (3,), None), ("s", i32, (2,), np.array([2, 3], i32)), ("t", f32, (2, 3), None),
                       ("d", f32, (2, 3), None), ("y", f32, (2, 3), None)],
            [("REDUCE_ALL", [0, 1], [2], ("ReducerOptions", {"KeepDims": False})), ("BROADCAST_TO", [3, 4], [5], None, 2),
             ("FLOOR_DIV", [5, 6], [7], None)], [0, 3, 6], [2, 7],
            [rng.random((2, 3)) > 0.3, rnd(3) * 5, rnd(2, 3, lo=0.5, hi=2)], "DIV + FLOOR")


@pytest.mark.parametrize("op,wshape,options", [
    ("CONV_2D", (3, 3, 3, 2), ("Conv2DOptions", {"Padding": 0, "StrideW": 1, "StrideH": 1})),
    ("DEPTHWISE_CONV_2D", (1, 3, 3, 2), ("DepthwiseConv2DOptions", {"Padding": 0, "StrideW": 1, "StrideH": 1,
                                                                     "DepthMultiplier": 1}))])
def test_int8_conv_with_a_per_tensor_filter_and_bias(tmp_path, op, wshape, options):
    """An int8 per-tensor filter becomes per-channel (its scale repeated): its int32 bias, of
    scale input x filter, goes to NNAPI with scale 0 as a per-channel filter's bias must
    (helia_tiny_cnn of the corpus)."""
    w = q(i8, *wshape)
    w[w == -128] = -127
    n = wshape[0] if op == "CONV_2D" else wshape[3]
    xq = {"scale": 0.1, "zero_point": 3}
    compare(tmp_path, [("x", i8, (1, 5, 5, 2), None, xq), ("w", i8, wshape, w, {"scale": 0.02, "zero_point": 0}),
                       ("b", i32, (n,), rng.integers(-300, 300, n).astype(i32), {"scale": 0.002, "zero_point": 0}),
                       ("y", i8, (1, 5, 5, n), None, {"scale": 0.15, "zero_point": -4})],
            [(op, [0, 1, 2], [3], options)], [0], [3], [q(i8, 1, 5, 5, 2)], op, qtol=1)


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM"])
def test_min_max_with_a_computed_scalar(tmp_path, op):
    """Beyond the delegate (which refuses a non-constant scalar input): MAXIMUM(x, max(x) - 8)
    as openWakeWord's melspectrogram clamps its log-mel range (oww_melspectrogram)."""
    compare(tmp_path, [("x", f32, (2, 3, 4), None), ("axes", i32, (3,), np.array([0, 1, 2], i32)),
                       ("m", f32, (), None), ("eight", f32, (), np.array(8, f32)), ("t", f32, (), None),
                       ("y", f32, (2, 3, 4), None)],
            [("REDUCE_MAX", [0, 1], [2], ("ReducerOptions", {"KeepDims": False})), ("SUB", [2, 3], [4], None),
             (op, [0, 4], [5], None)], [0], [5], [rnd(2, 3, 4, lo=-10, hi=10)], op)
