"""Recurrent builtins (LSTM, UNIDIRECTIONAL_SEQUENCE_LSTM, BIDIRECTIONAL_SEQUENCE_LSTM, RNN,
UNIDIRECTIONAL_SEQUENCE_RNN, SVDF) on writer-made models with variable state tensors, run three
times in a row against LiteRT's reference kernels: the state TFLite keeps between invocations is
carried by TfliteModel.run()."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert) is not installed")
pytest.importorskip("tflite", reason="the tflite parser package is not installed")
from tflite_ref import compare  # noqa: E402

f32 = np.float32
rng = np.random.default_rng(7)
VAR = {"variable": True}


def w(*shape):
    return rng.uniform(-0.5, 0.5, shape).astype(f32)


def _lstm_weights(prefix, units, n_in):
    """Tensors 1..17 of an LSTM (no peepholes, no projection: those are absent, index -1)."""
    ts = [(f"{prefix}w{i}", f32, (units, n_in), w(units, n_in)) for i in range(4)]
    ts += [(f"{prefix}r{i}", f32, (units, units), w(units, units)) for i in range(4)]
    ts += [(f"{prefix}b{i}", f32, (units,), w(units)) for i in range(4)]
    return ts                                           # 12 tensors: roles 1-8 and 12-15


def _roles(base):
    """TFLite input list 1..17 from 12 tensors starting at `base` (peepholes / projection absent)."""
    return list(range(base, base + 8)) + [-1, -1, -1] + list(range(base + 8, base + 12)) + [-1, -1]


def test_lstm_carries_its_states(tmp_path):
    b, n_in, units = 2, 3, 4
    ts = [("x", f32, (b, n_in), None)] + _lstm_weights("", units, n_in)
    ts += [("h", f32, (b, units), None, VAR), ("c", f32, (b, units), None, VAR), ("y", f32, (b, units), None)]
    ins = [0] + _roles(1) + [13, 14]
    m = compare(tmp_path, ts, [("LSTM", ins, [15], ("LSTMOptions", {"FusedActivationFunction": 4}), 4)],
                [0], [15], [w(b, n_in) * 4], "LSTM", steps=3, tol=1e-5)
    assert set(m.state) == {"h", "c"}


def test_unidirectional_sequence_lstm(tmp_path):
    t, b, n_in, units = 3, 2, 3, 4
    ts = [("x", f32, (t, b, n_in), None)] + _lstm_weights("", units, n_in)
    ts += [("h", f32, (b, units), None, VAR), ("c", f32, (b, units), None, VAR), ("y", f32, (t, b, units), None)]
    ins = [0] + _roles(1) + [13, 14, -1, -1, -1, -1]
    compare(tmp_path, ts, [("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [15], (
        "UnidirectionalSequenceLSTMOptions", {"FusedActivationFunction": 4, "TimeMajor": True}))],
        [0], [15], [w(t, b, n_in) * 4], "UNIDIRECTIONAL_SEQUENCE_LSTM (states carried)", steps=3)


def test_bidirectional_sequence_lstm(tmp_path):
    t, b, n_in, units = 3, 2, 3, 4
    ts = [("x", f32, (t, b, n_in), None)] + _lstm_weights("f", units, n_in) + _lstm_weights("b", units, n_in)
    ts += [(n, f32, (b, units), None, VAR) for n in ("fh", "fc", "bh", "bc")]
    ts += [("yf", f32, (t, b, units), None), ("yb", f32, (t, b, units), None)]
    ins = [0] + _roles(1) + _roles(13) + [25, 26, 27, 28] + [-1] * 9
    compare(tmp_path, ts, [("BIDIRECTIONAL_SEQUENCE_LSTM", ins, [29, 30], (
        "BidirectionalSequenceLSTMOptions", {"FusedActivationFunction": 4, "TimeMajor": True,
                                             "MergeOutputs": False}))],
        [0], [29, 30], [w(t, b, n_in) * 4], "BIDIRECTIONAL_SEQUENCE_LSTM", steps=3)


def test_rnn(tmp_path):
    b, n_in, units = 2, 3, 4
    ts = [("x", f32, (b, n_in), None), ("w", f32, (units, n_in), w(units, n_in)),
          ("r", f32, (units, units), w(units, units)), ("b", f32, (units,), w(units)),
          ("h", f32, (b, units), None, VAR), ("y", f32, (b, units), None)]
    compare(tmp_path, ts, [("RNN", [0, 1, 2, 3, 4], [5], ("RNNOptions", {"FusedActivationFunction": 1}))],
            [0], [5], [w(b, n_in) * 4], "RNN (state carried)", steps=3)


def test_unidirectional_sequence_rnn(tmp_path):
    t, b, n_in, units = 3, 2, 3, 4
    ts = [("x", f32, (t, b, n_in), None), ("w", f32, (units, n_in), w(units, n_in)),
          ("r", f32, (units, units), w(units, units)), ("b", f32, (units,), w(units)),
          ("h", f32, (b, units), None, VAR), ("y", f32, (t, b, units), None)]
    compare(tmp_path, ts, [("UNIDIRECTIONAL_SEQUENCE_RNN", [0, 1, 2, 3, 4], [5],
                            ("SequenceRNNOptions", {"FusedActivationFunction": 1, "TimeMajor": True}))],
            [0], [5], [w(t, b, n_in) * 4], "UNIDIRECTIONAL_SEQUENCE_RNN (state carried)", steps=3)


def test_svdf(tmp_path):
    b, n_in, units, rank, memory = 2, 3, 4, 1, 5
    ts = [("x", f32, (b, n_in), None), ("wf", f32, (units * rank, n_in), w(units * rank, n_in)),
          ("wt", f32, (units * rank, memory), w(units * rank, memory)), ("b", f32, (units,), w(units)),
          ("s", f32, (b, memory * units * rank), None, VAR), ("y", f32, (b, units), None)]
    compare(tmp_path, ts, [("SVDF", [0, 1, 2, 3, 4], [5], ("SVDFOptions", {"Rank": rank,
                                                                          "FusedActivationFunction": 1}))],
            [0], [5], [w(b, n_in) * 4], "SVDF (state carried)", steps=3)
