"""Inputs whose shape signature has -1 (nnapi_py/tflite/shapes.py): a compilation per set of
input shapes, cached; at the file's own shapes the -1 are resolved (SHAPE of such an input folds
at load).  Writer-made models and the corpus's audio front end, against LiteRT's reference
kernels resized to the same shapes."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
litert = pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert) is not installed")
pytest.importorskip("tflite", reason="the tflite parser package is not installed")
import nnapi_py.nn as nn  # noqa: E402
import nnapi_py.tflite as T  # noqa: E402
from nnapi_py.testing import corpus  # noqa: E402
import tflite_writer as W  # noqa: E402
from tflite_ref import reference  # noqa: E402

F32, I32 = np.float32, np.int32


def check(m, path, inputs, tol=1e-5):
    want = reference(path, inputs)
    got = m.run(inputs)
    for g, w in zip(got, want):
        assert np.shape(g) == w.shape
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def batch_model(path):
    """y = relu(x @ W^T + b) reshaped to [SHAPE(x)[0], 2, 3]: x [-1, 4] (file shape [1, 4]); the
    reshape's target comes from SHAPE -> STRIDED_SLICE -> PACK, folded at load per shape."""
    w = np.arange(24, dtype=F32).reshape(6, 4) / 10 - 1
    tensors = [("x", F32, (1, 4), None, {"signature": [-1, 4]}), ("w", F32, (6, 4), w),
               ("b", F32, (6,), np.linspace(-1, 1, 6).astype(F32)), ("h", F32, (1, 6), None, {"signature": [-1, 6]}),
               ("shape", I32, (2,), None), ("begin", I32, (1,), np.array([0], I32)),
               ("end", I32, (1,), np.array([1], I32)), ("stride", I32, (1,), np.array([1], I32)),
               ("n", I32, (), None), ("two", I32, (), np.array(2, I32)), ("three", I32, (), np.array(3, I32)),
               ("target", I32, (3,), None), ("y", F32, (1, 2, 3), None, {"signature": [-1, 2, 3]})]
    ops = [("FULLY_CONNECTED", [0, 1, 2], [3], ("FullyConnectedOptions", {"FusedActivationFunction": 1})),
           ("SHAPE", [0], [4], ("ShapeOptions", {"OutType": 2})),
           ("STRIDED_SLICE", [4, 5, 6, 7], [8], ("StridedSliceOptions", {"ShrinkAxisMask": 1})),
           ("PACK", [8, 9, 10], [11], ("PackOptions", {"ValuesCount": 3, "Axis": 0})),
           ("RESHAPE", [3, 11], [12], None)]
    return W.write(path, tensors, ops, [0], [12])


def test_file_shapes_resolve_the_signature_and_fold_shape_arithmetic(tmp_path):
    path = batch_model(str(tmp_path / "batch.tflite"))
    m = T.load(path)
    kinds = {d.name: d.kind for d in m.decisions}
    assert kinds["SHAPE"] == kinds["PACK"] == "folded" and kinds["RESHAPE"] == "nnapi", m.report()
    check(m, path, [np.random.default_rng(0).uniform(-1, 1, (1, 4)).astype(F32)])


def test_other_batch_sizes_compile_once_each(tmp_path):
    path = batch_model(str(tmp_path / "batch.tflite"))
    m = T.load(path)
    rng = np.random.default_rng(1)
    for n in (3, 1, 5, 3):
        check(m, path, [rng.uniform(-1, 1, (n, 4)).astype(F32)])
    assert sorted(s[0][0] for s in m.variants) == [3, 5]     # batch 1 is the model itself
    v = m.variants[((3, 4),)]
    assert {d.name: d.kind for d in v.decisions}["SHAPE"] == "folded"


def test_load_at_given_shapes_and_the_signature_is_enforced(tmp_path):
    path = batch_model(str(tmp_path / "batch.tflite"))
    m = T.load(path, input_shapes=[(4, 4)])
    assert m.input_specs[0][2] == (4, 4)
    check(m, path, [np.ones((4, 4), F32)])
    with pytest.raises(ValueError, match="shape signature"):
        m.run([np.ones((4, 5), F32)])
    with pytest.raises(ValueError, match="shape signature"):
        T.load(path, input_shapes=[(2, 3)])


def test_without_litert_the_runtime_infers_the_other_shapes(tmp_path, monkeypatch):
    """Without LiteRT's shape propagation the open dimensions stay unspecified in the NNAPI model
    and the runtime infers them at compilation (here: a model with nothing to fold)."""
    from nnapi_py.tflite import shapes
    path = W.write(str(tmp_path / "fc.tflite"),
                   [("x", F32, (1, 4), None, {"signature": [-1, 4]}), ("w", F32, (3, 4), np.ones((3, 4), F32)),
                    ("b", F32, (3,), np.zeros(3, F32)), ("y", F32, (1, 3), None, {"signature": [-1, 3]}),
                    ("z", F32, (1, 3), None, {"signature": [-1, 3]})],
                   [("FULLY_CONNECTED", [0, 1, 2], [3], None), ("TANH", [3], [4], None)], [0], [4])
    monkeypatch.setattr(shapes, "_litert_shapes", lambda *a: None)
    m = T.load(path)
    check(m, path, [np.linspace(-1, 1, 28).astype(F32).reshape(7, 4)])


def test_audio_of_any_length_melspectrogram():
    """openWakeWord's mel spectrogram: input [-1, -1] (a batch of audio of any length)."""
    path = corpus.model_or_skip("oww_melspectrogram")
    # stored with input [1, 1] (one sample): it compiles, as on Android, and a run at that shape
    # fails where Android checks the rule, at execution, saying what to do
    m1 = T.load(path)
    with pytest.raises(nn.NNAPIError, match=r"checked at execution.*-1, -1\]\): if the file's shapes are not "
                                            r"ones the model runs at, compile for the shapes you run with "
                                            r"load\(path, input_shapes"):
        m1.run([np.zeros((1, 1), F32)])
    # audio of another length compiles a variant for it
    check(m1, path, [np.random.default_rng(1).uniform(-1, 1, (1, 1760)).astype(F32)], tol=1e-3)
    [shape] = corpus.INPUT_SHAPES["oww_melspectrogram"]
    m = T.load(path, input_shapes=[shape])
    rng = np.random.default_rng(2)
    for n in (1760, 16000, 1760):
        check(m, path, [rng.uniform(-1, 1, (1, n)).astype(F32)], tol=1e-3)


def test_real_model_at_other_batch_sizes():
    """BirdNET's species-occurrence model: input [-1, 3] (latitude, longitude, week), any batch."""
    path = corpus.model_or_skip("birdnet_meta")
    m = T.load(path)
    rng = np.random.default_rng(3)
    for n in (1, 4):
        x = np.stack([rng.uniform(-90, 90, n), rng.uniform(-180, 180, n), rng.integers(1, 49, n)], 1).astype(F32)
        check(m, path, [x], tol=1e-4)
    assert list(m.variants) == [((4, 3),)]


def test_custom_operator_outputs_the_file_leaves_unsized(tmp_path):
    """An SSD head: LOGISTIC on NNAPI, then TFLite_Detection_PostProcess (a custom operator the
    delegate leaves on the CPU) whose four outputs the file gives no shape (rank 0, as converters
    write them): they get the shapes LiteRT's kernel gives them, and the model's outputs match."""
    from flatbuffers import flexbuffers
    rng = np.random.default_rng(3)
    n, classes = 12, 3
    anchors = np.concatenate([rng.uniform(0.2, 0.8, (n, 2)), rng.uniform(0.1, 0.4, (n, 2))], 1).astype(F32)
    options = flexbuffers.Dumps({"max_detections": 4, "max_classes_per_detection": 1, "detections_per_class": 100,
                                 "use_regular_nms": False, "nms_score_threshold": 0.1, "nms_iou_threshold": 0.5,
                                 "num_classes": classes, "y_scale": 10.0, "x_scale": 10.0, "h_scale": 5.0,
                                 "w_scale": 5.0})
    tensors = [("boxes", F32, (1, n, 4), None), ("logits", F32, (1, n, classes + 1), None),
               ("scores", F32, (1, n, classes + 1), None), ("anchors", F32, (n, 4), anchors)] + \
        [(name, F32, (), None) for name in ("detection_boxes", "detection_classes", "detection_scores", "count")]
    ops = [("LOGISTIC", [1], [2], None), ("CUSTOM:TFLite_Detection_PostProcess", [0, 2, 3], [4, 5, 6, 7], options)]
    path = W.write(str(tmp_path / "ssd_head.tflite"), tensors, ops, [0, 1], [4, 5, 6, 7])
    m = T.load(path)
    assert [m.tensors[t].shape for t in (4, 5, 6, 7)] == [(1, 4, 4), (1, 4), (1, 4), (1,)]
    assert {d.name: d.kind for d in m.decisions} == {"LOGISTIC": "nnapi", "CUSTOM_TFLite_Detection_PostProcess": "cpu"}
    feeds = [rng.uniform(-1, 1, (1, n, 4)).astype(F32), rng.uniform(-3, 3, (1, n, classes + 1)).astype(F32)]
    assert reference(path, feeds)[3][0] == 4          # four boxes found
    check(m, path, feeds)
