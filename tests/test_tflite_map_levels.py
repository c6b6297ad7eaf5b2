"""The NNAPI delegate's per-release conditions (nnapi_delegate.cc `Validate`) as the mapping
modules declare them (`@maps(level=...)`, `Rule`s): a writer-made model per rule, decided at
feature levels 3, 4, 6 and 8 (Android 10, 11, 13, 15) without building anything.
delegate=True asks what the delegate itself would do (cases nnapi_py lowers anyway, marked
beyond, count there)."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
pytest.importorskip("tflite", reason="the tflite parser package is not installed")
import tflite_writer  # noqa: E402
import nnapi_py.tflite as T  # noqa: E402
from nnapi_py.tflite.base import REGISTRY, Ctx, decide  # noqa: E402
from nnapi_py.tflite.model import try_fold  # noqa: E402
from nnapi_py.tflite.reader import Reader  # noqa: E402

f32, i32, i8, u8, i64 = np.float32, np.int32, np.int8, np.uint8, np.int64
LEVELS = (3, 4, 6, 8)


def reasons(tmp_path, tensors, ops, inputs, outputs, delegate=False, levels=LEVELS):
    """{level: reasons of the last operator} (folded operators before it are folded first)."""
    path = tflite_writer.write(str(tmp_path / "r.tflite"), tensors, ops, inputs, outputs)
    T.mapping_modules()
    out = {}
    for level in levels:
        g = Reader(path).graph(0)
        ctx = Ctx(g, None, level)
        ctx.filters = {n.ins[1] for n in g.nodes if n.name in ("CONV_2D", "DEPTHWISE_CONV_2D")}
        for node in g.nodes[:-1]:
            try_fold(ctx, node)
        out[level] = decide(ctx, g.nodes[-1], delegate)[1]
    return out


def first_level(rs):
    """The lowest of LEVELS at which there is no reason left (None: never)."""
    return next((lv for lv in sorted(rs) if not rs[lv]), None)


def two_in(op, a_shape, b_shape, out_shape, dtype=f32, options=None, extra_a=None, out_dtype=None):
    ta = ("a", dtype, a_shape, None, extra_a) if extra_a else ("a", dtype, a_shape, None)
    tb = ("b", dtype, b_shape, None, extra_a) if extra_a else ("b", dtype, b_shape, None)
    to = ("y", out_dtype or dtype, out_shape, None, extra_a) if extra_a else ("y", out_dtype or dtype, out_shape, None)
    return [ta, tb, to], [(op, [0, 1], [2], options)], [0, 1], [2]


def test_batch_matmul_needs_feature_level_6(tmp_path):
    rs = reasons(tmp_path, *two_in("BATCH_MATMUL", (2, 3, 4), (2, 4, 5), (2, 3, 5)))
    assert first_level(rs) == 6
    assert rs[4] == ["BATCH_MATMUL: NNAPI's BATCH_MATMUL needs feature level 6 (Android 13)"]


def test_batch_matmul_broadcast_is_never_delegated(tmp_path):
    rs = reasons(tmp_path, *two_in("BATCH_MATMUL", (2, 3, 4), (4, 5), (2, 3, 5)))
    assert first_level(rs) is None and "broadcast batch dimensions" in rs[8][0]


def test_batch_matmul_by_a_constant_matrix_is_fully_connected_at_every_level(tmp_path):
    """Beyond the delegate: a constant right-hand matrix (broadcast over the batch) makes a
    FULLY_CONNECTED, valid from feature level 1; the delegate needs level 6 and no broadcast."""
    ts = [("a", f32, (2, 3, 4), None), ("b", f32, (4, 5), np.ones((4, 5), f32)), ("y", f32, (2, 3, 5), None)]
    ops = [("BATCH_MATMUL", [0, 1], [2], None)]
    assert first_level(reasons(tmp_path, ts, ops, [0], [2], levels=(1, 3, 6, 8))) == 1
    assert first_level(reasons(tmp_path, ts, ops, [0], [2], delegate=True)) is None


@pytest.mark.parametrize("op,level", [("MIRROR_PAD", 7), ("REVERSE_V2", 7)])
def test_level_7_builtins(tmp_path, op, level):
    ts = [("x", f32, (1, 3, 4, 2), None), ("p", i32, (4, 2) if op == "MIRROR_PAD" else (1,),
                                            np.ones((4, 2), i32) if op == "MIRROR_PAD" else np.array([1], i32)),
          ("y", f32, (1, 5, 6, 4) if op == "MIRROR_PAD" else (1, 3, 4, 2), None)]
    ops = [(op, [0, 1], [2], ("MirrorPadOptions", {"Mode": 0}) if op == "MIRROR_PAD" else None)]
    theirs = reasons(tmp_path, ts, ops, [0], [2], delegate=True)
    assert first_level(theirs) == 8 and "needs feature level 7 (Android 14)" in theirs[6][0]
    # nnapi_py: GATHERs of constant indices below level 7 (beyond the delegate)
    assert first_level(reasons(tmp_path, ts, ops, [0], [2])) == 3


def test_int8_activations_need_feature_level_4(tmp_path):
    q = {"scale": 0.1, "zero_point": 3}
    rs = reasons(tmp_path, *two_in("ADD", (2, 3), (2, 3), (2, 3), dtype=i8, extra_a=q))
    assert first_level(rs) == 4
    assert "int8 (TENSOR_QUANT8_ASYMM_SIGNED) tensors needs feature level 4 (Android 11)" in rs[3][0]
    # the delegate itself converts int8 to uint8 below feature level 4
    assert first_level(reasons(tmp_path, *two_in("ADD", (2, 3), (2, 3), (2, 3), dtype=i8, extra_a=q),
                               delegate=True)) == 3


def test_int32_add_needs_feature_level_4(tmp_path):
    rs = reasons(tmp_path, *two_in("ADD", (2, 3), (2, 3), (2, 3), dtype=i32))
    assert first_level(rs) == 4 and rs[3] == ["ADD: int32 tensors needs feature level 4 (Android 11)"]


def test_elu_and_fully_connected_keep_num_dims_need_level_4(tmp_path):
    ts = [("x", f32, (2, 3), None), ("y", f32, (2, 3), None)]
    assert first_level(reasons(tmp_path, ts, [("ELU", [0], [1], None)], [0], [1])) == 4
    ts = [("x", f32, (2, 3, 4), None), ("w", f32, (5, 4), np.ones((5, 4), f32)), ("b", f32, (5,), np.zeros(5, f32)),
          ("y", f32, (2, 3, 5), None)]
    rs = reasons(tmp_path, ts, [("FULLY_CONNECTED", [0, 1, 2], [3], ("FullyConnectedOptions", {"KeepNumDims": True}))],
                 [0], [3])
    assert first_level(rs) == 4 and "keep_num_dims" in rs[3][0]


def test_resize_align_corners_needs_level_4(tmp_path):
    ts = [("x", f32, (1, 3, 3, 2), None), ("s", i32, (2,), np.array([6, 6], i32)), ("y", f32, (1, 6, 6, 2), None)]
    rs = reasons(tmp_path, ts, [("RESIZE_BILINEAR", [0, 1], [2], ("ResizeBilinearOptions", {"AlignCorners": True}))],
                 [0], [2], levels=(2, 3, 4))
    assert first_level(rs) == 4 and "align_corners" in rs[3][0]


def test_rsqrt_quantized_needs_level_7(tmp_path):
    q = {"scale": 0.05, "zero_point": 0}
    ts = [("x", u8, (4,), None, q), ("y", u8, (4,), None, q)]
    rs = reasons(tmp_path, ts, [("RSQRT", [0], [1], None)], [0], [1])
    assert first_level(rs) == 8 and "quantized input needs feature level 7" in rs[6][0]


def test_hybrid_conv_needs_level_3(tmp_path):
    ts = [("x", f32, (1, 4, 4, 2), None), ("w", i8, (3, 1, 1, 2), np.ones((3, 1, 1, 2), i8), {"scale": 0.1}),
          ("b", f32, (3,), np.zeros(3, f32)), ("y", f32, (1, 4, 4, 3), None)]
    rs = reasons(tmp_path, ts, [("CONV_2D", [0, 1, 2], [3], ("Conv2DOptions", {"Padding": 1, "StrideW": 1,
                                                                                "StrideH": 1}))], [0], [3],
                 levels=(2, 3))
    assert first_level(rs) == 3 and "hybrid" in rs[2][0]


def test_softmax_rank_3_needs_level_3(tmp_path):
    ts = [("x", f32, (2, 3, 4), None), ("y", f32, (2, 3, 4), None)]
    rs = reasons(tmp_path, ts, [("SOFTMAX", [0], [1], ("SoftmaxOptions", {"Beta": 1.0}))], [0], [1], levels=(1, 2, 3))
    assert first_level(rs) == 3 and "rank other than 2 or 4" in rs[2][0]


def test_arg_max_with_int64_output_is_never_delegated(tmp_path):
    ts = [("x", f32, (2, 5), None), ("ax", i32, (), np.array(1, i32)), ("y", i64, (2,), None)]
    rs = reasons(tmp_path, ts, [("ARG_MAX", [0, 1], [2], ("ArgMaxOptions", {"OutputType": 4}))], [0], [2])
    assert first_level(rs) is None and "int64 output" in rs[8][0]


@pytest.mark.parametrize("op,delegate_level", [("PACK", 4), ("SPLIT_V", 4)])
def test_lowerings_beyond_the_delegate(tmp_path, op, delegate_level):
    """PACK (RESHAPE + CONCATENATION) and SPLIT_V (SLICEs) are lowered by nnapi_py from feature
    level 3 on; the delegate takes them from level 4: the two views differ at level 3."""
    if op == "PACK":
        ts = [("a", f32, (2, 3), None), ("b", f32, (2, 3), None), ("y", f32, (2, 2, 3), None)]
        ops = [("PACK", [0, 1], [2], ("PackOptions", {"ValuesCount": 2, "Axis": 1}))]
        ins = [0, 1]
        outs = [2]
    else:
        ts = [("x", f32, (2, 6), None), ("s", i32, (2,), np.array([2, 4], i32)), ("ax", i32, (), np.array(1, i32)),
              ("a", f32, (2, 2), None), ("b", f32, (2, 4), None)]
        ops = [("SPLIT_V", [0, 1, 2], [3, 4], ("SplitVOptions", {"NumSplits": 2}))]
        ins, outs = [0], [3, 4]
    ours = reasons(tmp_path, ts, ops, ins, outs)
    theirs = reasons(tmp_path, ts, ops, ins, outs, delegate=True)
    assert first_level(ours) == 3 and first_level(theirs) == delegate_level


def test_op_versions_above_the_delegates_count_only_in_its_view(tmp_path):
    """FULLY_CONNECTED version 9 (the delegate takes up to 5): nnapi_py maps what it can read."""
    ts = [("x", f32, (2, 4), None), ("w", f32, (3, 4), np.ones((3, 4), f32)), ("b", f32, (3,), np.zeros(3, f32)),
          ("y", f32, (2, 3), None)]
    ops = [("FULLY_CONNECTED", [0, 1, 2], [3], ("FullyConnectedOptions", {}), 9)]
    assert first_level(reasons(tmp_path, ts, ops, [0], [3])) == 3
    theirs = reasons(tmp_path, ts, ops, [0], [3], delegate=True)
    assert first_level(theirs) is None and theirs[8] == ["FULLY_CONNECTED: op version 9 is above the delegate's 5"]


def test_every_builtin_of_the_delegate_is_registered():
    names = ("ABS ADD ARG_MAX ARG_MIN AVERAGE_POOL_2D BATCH_MATMUL BATCH_TO_SPACE_ND BIDIRECTIONAL_SEQUENCE_LSTM CAST "
             "CONCATENATION CONV_2D COS DENSIFY DEPTH_TO_SPACE DEPTHWISE_CONV_2D DEQUANTIZE DIV ELU EMBEDDING_LOOKUP "
             "EQUAL EXP EXPAND_DIMS FILL FLOOR FULLY_CONNECTED GATHER GREATER GREATER_EQUAL HARD_SWISH "
             "HASHTABLE_LOOKUP L2_NORMALIZATION L2_POOL_2D LEAKY_RELU LESS LESS_EQUAL LOCAL_RESPONSE_NORMALIZATION LOG "
             "LOG_SOFTMAX LOGICAL_AND LOGICAL_NOT LOGICAL_OR LOGISTIC LSH_PROJECTION LSTM MAX_POOL_2D MAXIMUM MEAN "
             "MINIMUM MIRROR_PAD MUL NEG NOT_EQUAL PACK PAD PADV2 POW PRELU QUANTIZE REDUCE_ANY REDUCE_MAX REDUCE_MIN "
             "REDUCE_PROD RELU RELU6 RELU_N1_TO_1 RESHAPE RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR REVERSE_V2 RNN RSQRT "
             "SELECT SIN SLICE SOFTMAX SPACE_TO_BATCH_ND SPACE_TO_DEPTH SPLIT SPLIT_V SQRT SQUARED_DIFFERENCE SQUEEZE "
             "STRIDED_SLICE SUB SUM SVDF TANH TILE TOPK_V2 TRANSPOSE TRANSPOSE_CONV UNIDIRECTIONAL_SEQUENCE_LSTM "
             "UNIDIRECTIONAL_SEQUENCE_RNN UNPACK").split()
    T.mapping_modules()
    assert len(names) == 94
    missing = [n for n in names if n not in REGISTRY or not REGISTRY[n].delegate]
    assert not missing, missing


def test_docs_list_every_mapping():
    """docs/tflite_importer.md names every registered builtin (its table is generated from the
    registry: regenerate it when a mapping is added)."""
    doc = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                            "tflite_importer.md")).read()
    T.mapping_modules()
    missing = [n for n in REGISTRY if n not in doc]
    assert not missing, missing
