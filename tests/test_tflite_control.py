"""TFLite IF / WHILE (with their subgraphs) through NNAPI IF / WHILE with referenced models
(nnapi_py/tflite/map_control.py), on writer-made models (tests/tflite_writer.with_subgraphs),
each compared with LiteRT's reference kernels; and the real wake-word model with an IF."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
litert = pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert) is not installed")
pytest.importorskip("tflite", reason="the tflite parser package is not installed")
import nnapi_py.tflite as T  # noqa: E402
import tflite_writer as W  # noqa: E402
from tflite_ref import reference  # noqa: E402
from nnapi_py.testing import corpus  # noqa: E402

F32, I32, BOOL = np.float32, np.int32, np.bool_


def check(m, path, inputs):
    want = reference(path, inputs)
    got = m.run(inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g).reshape(w.shape), w, rtol=1e-6, atol=1e-6)


def nodes(m, name):
    return [d for d in m.decisions if d.name == name]


def if_model(path, scalar_condition=False):
    """y = IF(c, then: x * w + 1, else: x - w) with w a constant of the main graph passed to
    the branches; c a boolean input of shape [1], or (scalar_condition) any(s > 0) of an input
    s: a boolean of shape [] computed in the graph, as converters write it."""
    tensors = [("c", BOOL, (1,), None), ("x", F32, (2, 3), None),
               ("w", F32, (3,), np.array([1.5, -2.0, 0.25], F32)), ("y", F32, (2, 3), None)]
    ops = [("IF", [0, 1, 2], [3], ("IfOptions", {"ThenSubgraphIndex": 1, "ElseSubgraphIndex": 2}))]
    inputs = [0, 1]
    if scalar_condition:
        tensors[0] = ("c", BOOL, (), None)
        tensors += [("s", F32, (1,), None), ("zero", F32, (), np.array(0, F32)), ("g", BOOL, (1,), None),
                    ("axis", I32, (1,), np.array([0], I32))]
        ops[:0] = [("GREATER", [4, 5], [6], None), ("REDUCE_ANY", [6, 7], [0], ("ReducerOptions", {"KeepDims": False}))]
        inputs = [4, 1]
    main = dict(name="main", tensors=tensors, ops=ops, inputs=inputs, outputs=[3])
    then = dict(name="then",
                tensors=[("x", F32, (2, 3), None), ("w", F32, (3,), None), ("xw", F32, (2, 3), None),
                         ("one", F32, (), np.array(1, F32)), ("r", F32, (2, 3), None)],
                ops=[("MUL", [0, 1], [2], None), ("ADD", [2, 3], [4], None)], inputs=[0, 1], outputs=[4])
    other = dict(name="else",
                 tensors=[("x", F32, (2, 3), None), ("w", F32, (3,), None), ("r", F32, (2, 3), None)],
                 ops=[("SUB", [0, 1], [2], None)], inputs=[0, 1], outputs=[2])
    return W.with_subgraphs(path, main, then, other)


def test_if_becomes_nnapi_if_with_two_referenced_models(tmp_path):
    path = if_model(str(tmp_path / "if.tflite"))
    m = T.load(path)
    [d] = nodes(m, "IF")
    assert d.kind == "nnapi" and d.text.startswith("IF (then: subgraph 1, 2 operation(s); else: subgraph 2"), d
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3)).astype(F32)
    for c in (True, False):
        check(m, path, [np.array([c]), x])


def test_if_with_a_scalar_condition(tmp_path):
    path = if_model(str(tmp_path / "if0.tflite"), scalar_condition=True)
    m = T.load(path)
    assert nodes(m, "IF")[0].kind == "nnapi"
    x = np.arange(6, dtype=F32).reshape(2, 3)
    for s in (1.0, -1.0):
        check(m, path, [np.array([s], F32), x])


def test_if_needs_feature_level_4(tmp_path):
    path = if_model(str(tmp_path / "if.tflite"))
    m = T.load(path, feature_level=3)
    [d] = nodes(m, "IF")
    assert d.kind == "cpu" and "feature level 4" in d.text
    check(m, path, [np.array([True]), np.ones((2, 3), F32)])


def while_model(path, counter_shape=(1,)):
    """for i in range(n): acc = acc * w + x  (n, w: constants; x: an input unchanged by the
    loop, i and acc carried).  Returns the final acc and i."""
    cs = counter_shape
    main = dict(name="main",
                tensors=[("x", F32, (1, 4), None), ("i0", I32, cs, np.zeros(cs, I32)),
                         ("acc0", F32, (1, 4), np.zeros((1, 4), F32)), ("w", F32, (4,), np.array([.5, 1, -1, 2], F32)),
                         ("i", I32, cs, None), ("acc", F32, (1, 4), None), ("x_out", F32, (1, 4), None),
                         ("w_out", F32, (4,), None)],
                ops=[("WHILE", [1, 2, 0, 3], [4, 5, 6, 7], ("WhileOptions", {"CondSubgraphIndex": 1,
                                                                               "BodySubgraphIndex": 2}))],
                inputs=[0], outputs=[5, 4])
    cond = dict(name="cond",
                tensors=[("i", I32, cs, None), ("acc", F32, (1, 4), None), ("x", F32, (1, 4), None),
                         ("w", F32, (4,), None), ("n", I32, (), np.array(5, I32)), ("go", BOOL, cs, None)],
                ops=[("LESS", [0, 4], [5], None)], inputs=[0, 1, 2, 3], outputs=[5])
    body = dict(name="body",
                tensors=[("i", I32, cs, None), ("acc", F32, (1, 4), None), ("x", F32, (1, 4), None),
                         ("w", F32, (4,), None), ("one", I32, (), np.array(1, I32)), ("i1", I32, cs, None),
                         ("aw", F32, (1, 4), None), ("acc1", F32, (1, 4), None)],
                ops=[("ADD", [0, 4], [5], None), ("MUL", [1, 3], [6], None), ("ADD", [6, 2], [7], None)],
                inputs=[0, 1, 2, 3], outputs=[5, 7, 2, 3])
    return W.with_subgraphs(path, main, cond, body)


@pytest.mark.parametrize("counter_shape", [(1,), ()])
def test_while_becomes_nnapi_while(tmp_path, counter_shape):
    path = while_model(str(tmp_path / "while.tflite"), counter_shape)
    m = T.load(path)
    [d] = nodes(m, "WHILE")
    assert d.kind == "nnapi", d
    assert d.text.startswith("WHILE (2 loop value(s), 1 input-only"), d.text     # w: a constant inside
    check(m, path, [np.random.default_rng(1).uniform(-1, 1, (1, 4)).astype(F32)])


def test_real_wake_word_model_runs_its_if_on_nnapi():
    """openWakeWord's hey_jarvis: the classifier's second stage sits in an IF (two subgraphs)."""
    path = corpus.model_or_skip("oww_hey_jarvis")
    m = T.load(path)
    [d] = nodes(m, "IF")
    assert d.kind == "nnapi" and "then: subgraph 2, 26 operation(s)" in d.text, d.text
    rng = np.random.default_rng(3)
    for scale in (0.1, 1.0, 4.0):
        want = reference(path, [x := rng.uniform(-scale, scale, (1, 16, 96)).astype(F32)])
        got = m.run([x])
        np.testing.assert_allclose(got[0].reshape(want[0].shape), want[0], rtol=1e-5, atol=1e-5)



def test_if_inside_a_while_body(tmp_path):
    """for i in range(4): acc = acc * 2 if i < 2 else acc + x: the body's IF references two more
    subgraphs; NNAPI nests the referenced models the same way."""
    one = (1,)
    main = dict(name="main",
                tensors=[("x", F32, (3,), None), ("i0", I32, one, np.zeros(one, I32)), ("i", I32, one, None),
                         ("acc", F32, (3,), None), ("x_out", F32, (3,), None)],     # x_out: x unchanged
                ops=[("WHILE", [1, 0, 0], [2, 3, 4], ("WhileOptions", {"CondSubgraphIndex": 1,
                                                                         "BodySubgraphIndex": 2}))],
                inputs=[0], outputs=[3])
    cond = dict(name="cond",
                tensors=[("i", I32, one, None), ("acc", F32, (3,), None), ("x", F32, (3,), None),
                         ("n", I32, (), np.array(4, I32)), ("go", BOOL, one, None)],
                ops=[("LESS", [0, 3], [4], None)], inputs=[0, 1, 2], outputs=[4])
    body = dict(name="body",
                tensors=[("i", I32, one, None), ("acc", F32, (3,), None), ("x", F32, (3,), None),
                         ("one", I32, (), np.array(1, I32)), ("two", I32, (), np.array(2, I32)),
                         ("i1", I32, one, None), ("early", BOOL, one, None), ("acc1", F32, (3,), None)],
                ops=[("ADD", [0, 3], [5], None), ("LESS", [0, 4], [6], None),
                     ("IF", [6, 1, 2], [7], ("IfOptions", {"ThenSubgraphIndex": 3, "ElseSubgraphIndex": 4}))],
                inputs=[0, 1, 2], outputs=[5, 7, 2])
    double = dict(name="double",
                  tensors=[("acc", F32, (3,), None), ("x", F32, (3,), None), ("two", F32, (), np.array(2, F32)),
                           ("r", F32, (3,), None)],
                  ops=[("MUL", [0, 2], [3], None)], inputs=[0, 1], outputs=[3])
    add = dict(name="add",
               tensors=[("acc", F32, (3,), None), ("x", F32, (3,), None), ("r", F32, (3,), None)],
               ops=[("ADD", [0, 1], [2], None)], inputs=[0, 1], outputs=[2])
    path = W.with_subgraphs(str(tmp_path / "nested.tflite"), main, cond, body, double, add)
    m = T.load(path)
    [d] = nodes(m, "WHILE")
    assert d.kind == "nnapi", d
    x = np.array([1, -2, 0.5], F32)
    check(m, path, [x])
    np.testing.assert_allclose(m.run([x])[0], x * 4 + 2 * x)


def test_real_vad_runs_its_while_on_nnapi(tmp_path):
    """Mycroft Precise's VAD: a GRU written as a WHILE over 29 time steps (four loop values, the
    input sequence input-only) with hybrid int8 weights, the whole model one NNAPI partition;
    equal to LiteRT on the model with its weights dequantized (corpus.float_weights)."""
    path = corpus.model_or_skip("precise_vad")
    m = T.load(path)
    [d] = nodes(m, "WHILE")
    assert d.kind == "nnapi" and d.text.startswith("WHILE (4 loop value(s), 1 input-only"), d.text
    assert [p.nnapi for p in m.partitions] == [True]
    exact = corpus.float_weights(path, str(tmp_path / "vad_float.tflite"))
    x = np.random.default_rng(5).uniform(-1, 1, (1, 29, 13)).astype(F32)
    np.testing.assert_allclose(m.run([x])[0], reference(exact, [x])[0], rtol=1e-5, atol=1e-6)


def test_a_branch_holding_rnn_state_stays_on_the_cpu(tmp_path):
    """An RNN's hidden state (a variable tensor) inside an IF branch lives from call to call,
    which a referenced NNAPI model cannot carry: the IF runs on LiteRT, state and all."""
    rng = np.random.default_rng(6)
    main = dict(name="main",
                tensors=[("c", BOOL, (1,), None), ("x", F32, (1, 3), None), ("y", F32, (1, 4), None)],
                ops=[("IF", [0, 1], [2], ("IfOptions", {"ThenSubgraphIndex": 1, "ElseSubgraphIndex": 2}))],
                inputs=[0, 1], outputs=[2])
    rnn = dict(name="rnn",
               tensors=[("x", F32, (1, 3), None), ("w", F32, (4, 3), rng.uniform(-1, 1, (4, 3)).astype(F32)),
                        ("r", F32, (4, 4), rng.uniform(-1, 1, (4, 4)).astype(F32)), ("b", F32, (4,), np.zeros(4, F32)),
                        ("h", F32, (1, 4), None, {"variable": True}), ("y", F32, (1, 4), None)],
               ops=[("RNN", [0, 1, 2, 3, 4], [5], ("RNNOptions", {"FusedActivationFunction": 1}))],
               inputs=[0], outputs=[5])
    zero = dict(name="zero",
                tensors=[("x", F32, (1, 3), None), ("w", F32, (4, 3), np.zeros((4, 3), F32)),
                         ("b", F32, (4,), np.zeros(4, F32)), ("y", F32, (1, 4), None)],
                ops=[("FULLY_CONNECTED", [0, 1, 2], [3], None)], inputs=[0], outputs=[3])
    path = W.with_subgraphs(str(tmp_path / "if_rnn.tflite"), main, rnn, zero)
    m = T.load(path)
    [d] = nodes(m, "IF")
    assert d.kind == "cpu" and "holds state carried from call to call" in d.text, d.text
    it = litert.Interpreter(model_path=path, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    x = np.array([[0.5, -1, 2]], F32)
    for c in (True, True, False, True):                 # the state moves on only when the branch runs
        for d, v in zip(it.get_input_details(), (np.array([c]), x)):
            it.set_tensor(d["index"], v)
        it.invoke()
        np.testing.assert_allclose(m.run([np.array([c]), x])[0], it.get_tensor(it.get_output_details()[0]["index"]),
                                   rtol=1e-5, atol=1e-6)
