"""Partitions: operators NNAPI cannot run stay on TFLite's own CPU kernels through LiteRT, in
sub-models written with the schema's builders, partitioned as TFLite's NNAPI delegate does
(graph_info.cc's greedy partitioning, at most 3 NNAPI partitions).  Each model is written with
tests/tflite_writer.py and compared with LiteRT running the whole model."""
import os
import sys

import numpy as np
import pytest
from flatbuffers import flexbuffers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert) is not installed")
pytest.importorskip("tflite", reason="the tflite parser package is not installed")
import tflite_writer  # noqa: E402
from tflite_ref import interpreter, reference as whole_model  # noqa: E402  (LiteRT's reference kernels)
import nnapi_py.tflite as T  # noqa: E402
from nnapi_py.tflite import cpu, partition  # noqa: E402

tflite_writer._TYPES.setdefault(np.dtype(np.complex64), 8)
f32, i32, c64 = np.float32, np.int32, np.complex64
rng = np.random.default_rng(11)


def fft_model(tmp_path):
    """x -> ADD (NNAPI) -> RFFT2D -> COMPLEX_ABS (complex64: no NNAPI operation) -> MUL (NNAPI)."""
    return tflite_writer.write(
        str(tmp_path / "fft.tflite"),
        [("x", f32, (1, 8, 16), None), ("one", f32, (1,), [1.0]), ("xa", f32, (1, 8, 16), None),
         ("len", i32, (2,), [8, 16]), ("spec", c64, (1, 8, 9), None), ("mag", f32, (1, 8, 9), None),
         ("two", f32, (1,), [2.0]), ("y", f32, (1, 8, 9), None)],
        [("ADD", [0, 1], [2], None), ("RFFT2D", [2, 3], [4], None), ("COMPLEX_ABS", [4], [5], None),
         ("MUL", [5, 6], [7], None)], [0], [7])


def test_fft_runs_on_litert_between_two_nnapi_partitions(tmp_path):
    path = fft_model(tmp_path)
    m = T.load(path)
    assert [(p.nnapi, p.nodes) for p in m.partitions] == [(True, [0]), (False, [1, 2]), (True, [3])]
    assert [d.kind for d in m.decisions] == ["nnapi", "cpu", "cpu", "nnapi"]
    for k in range(3):                      # again and again: the bound buffers are reused
        x = rng.normal(size=(1, 8, 16)).astype(f32)
        got = m.run([x])[0]
        np.testing.assert_allclose(got, whole_model(path, [x])[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, 2 * np.abs(np.fft.rfft2(x + 1)), rtol=1e-4, atol=1e-4)
    rep = m.report()
    assert "Replacing 2 out of 4 node(s) with delegate (TfLiteNnapiDelegate) node, yielding 3 partitions" in rep
    assert "RFFT2D: no NNAPI mapping" in rep and "partition 2: CPU (LiteRT)" in rep


def test_tensors_cross_partitions_without_copies(tmp_path):
    """The NNAPI partition before the CPU one writes into LiteRT's input buffer, the one after it
    reads LiteRT's output buffer: both homes are LiteRT's own memory."""
    m = T.load(fft_model(tmp_path))
    m.run([np.zeros((1, 8, 16), f32)])
    st = m._stitch
    c = st.steps[1]
    assert isinstance(c, cpu.CpuPartition) and c.static and c not in st.copying
    xa, mag = 2, 5
    assert st.home[xa] is c.raws[xa] and st.home[mag] is c.raws[mag]
    lite_in = c.it.tensor(c.index[xa])()
    assert st.home[xa].ctypes.data == lite_in.ctypes.data
    del lite_in


def test_a_custom_operator_litert_knows(tmp_path):
    """TFLite's AudioSpectrogram custom operator (flexbuffer options) between NNAPI operations."""
    opts = flexbuffers.Dumps({"window_size": 16, "stride": 8, "magnitude_squared": True})
    path = tflite_writer.write(
        str(tmp_path / "spec.tflite"),
        [("x", f32, (64, 1), None), ("g", f32, (1,), [0.5]), ("xs", f32, (64, 1), None),
         ("spec", f32, (1, 7, 9), None), ("eps", f32, (1,), [1e-6]), ("s2", f32, (1, 7, 9), None),
         ("y", f32, (1, 7, 9), None)],
        [("MUL", [0, 1], [2], None), ("CUSTOM:AudioSpectrogram", [2], [3], opts), ("ADD", [3, 4], [5], None),
         ("LOG", [5], [6], None)], [0], [6])
    m = T.load(path)
    assert [p.nnapi for p in m.partitions] == [True, False, True]
    x = rng.normal(size=(64, 1)).astype(f32)
    np.testing.assert_allclose(m.run([x])[0], whole_model(path, [x])[0], rtol=1e-5, atol=1e-5)


def test_folded_values_reach_a_cpu_partition_as_constants(tmp_path):
    """RFFT2D's fft_length computed at load (SHAPE of a constant-shaped input -> folded) is
    written into the CPU sub-model as a constant."""
    path = tflite_writer.write(
        str(tmp_path / "fold.tflite"),
        [("x", f32, (8, 16), None), ("len", i32, (2,), None), ("spec", c64, (8, 9), None), ("y", f32, (8, 9), None)],
        [("SHAPE", [0], [1], ("ShapeOptions", {"OutType": 2})), ("RFFT2D", [0, 1], [2], None),
         ("COMPLEX_ABS", [2], [3], None)], [0], [3])
    m = T.load(path)
    assert [d.kind for d in m.decisions] == ["folded", "cpu", "cpu"]
    x = rng.normal(size=(8, 16)).astype(f32)
    np.testing.assert_allclose(m.run([x])[0], np.abs(np.fft.rfft2(x)), rtol=1e-4, atol=1e-4)


def chain(tmp_path, pattern):
    """y = x through one operator per letter: "a" ADD 1 (NNAPI), "c" CUMSUM (no NNAPI operation)."""
    tensors = [("x", f32, (1, 6), None), ("one", f32, (1,), [1.0]), ("axis", i32, (), [1])]
    ops, cur = [], 0
    for k, c in enumerate(pattern):
        tensors.append((f"t{k}", f32, (1, 6), None))
        out = len(tensors) - 1
        ops.append(("ADD", [cur, 1], [out], None) if c == "a" else ("CUMSUM", [cur, 2], [out], None))
        cur = out
    return tflite_writer.write(str(tmp_path / f"{pattern}.tflite"), tensors, ops, [0], [cur])


def test_only_the_three_largest_nnapi_partitions_are_delegated(tmp_path):
    """Like the delegate's max_number_delegated_partitions = 3: of the NNAPI partitions
    [0] [2,3] [5] [7] [9] the three largest ([2,3], then the earlier singles [0], [5]) stay; nodes
    6-9 form one CPU partition."""
    path = chain(tmp_path, "acaacacaca")
    x = rng.normal(size=(1, 6)).astype(f32)
    m = T.load(path)
    nnapi = [p.nodes for p in m.partitions if p.nnapi]
    assert nnapi == [[0], [2, 3], [5]]
    assert "max_number_delegated_partitions" in m.decisions[7].text
    assert "Replacing 4 out of 10 node(s)" in m.report() and "yielding 6 partitions" in m.report()
    np.testing.assert_allclose(m.run([x])[0], whole_model(path, [x])[0], rtol=1e-5, atol=1e-5)
    unlimited = T.load(path, max_partitions=0)
    assert len([p for p in unlimited.partitions if p.nnapi]) == 5
    np.testing.assert_allclose(unlimited.run([x])[0], whole_model(path, [x])[0], rtol=1e-5, atol=1e-5)


def test_without_litert_one_load_error_lists_the_operators_and_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu, "available", lambda: False)
    with pytest.raises(T.LoadError) as e:
        T.load(fft_model(tmp_path))
    assert [(k, name) for k, name, _ in e.value.unmapped] == [(1, "RFFT2D"), (2, "COMPLEX_ABS")]
    assert cpu.INSTALL in str(e.value) and "LiteRT" in str(e.value)
    m = T.load(fft_model(tmp_path), check_only=True)       # the report needs no LiteRT
    assert "yielding 3 partitions" in m.report()
    with pytest.raises(RuntimeError):
        m.run([np.zeros((1, 8, 16), f32)])


def test_a_mapping_that_fails_while_building_moves_its_operator_to_the_cpu(tmp_path, monkeypatch):
    """A mapper may raise Unmapped only while building (e.g. a value it needs is not constant):
    the operator joins a CPU partition and the graph is partitioned again."""
    real = T.REGISTRY["MUL"].fn

    def refuse(ctx, node):
        raise T.Unmapped("refused while building (test)")
    monkeypatch.setattr(T.REGISTRY["MUL"], "fn", refuse)
    path = fft_model(tmp_path)
    m = T.load(path)
    assert [(p.nnapi, p.nodes) for p in m.partitions] == [(True, [0]), (False, [1, 2, 3])]
    assert "refused while building" in m.decisions[3].text
    x = rng.normal(size=(1, 8, 16)).astype(f32)
    np.testing.assert_allclose(m.run([x])[0], whole_model(path, [x])[0], rtol=1e-5, atol=1e-5)
    assert real is not refuse


# -- the partitioning itself (graph_info.cc), on bare node lists -----------------------------------------
def nodes(*io):
    return [partition.Node(k, ins, outs) for k, (ins, outs) in enumerate(io)]


def test_greedy_partitioning_takes_every_ready_node_of_the_round_kind():
    """x -> A(nn) -> y; x -> B(cpu) -> z; y -> D(nn) -> w: A and D share one NNAPI partition
    (D is ready in the first round), B is the CPU one."""
    ps = partition.partition(nodes(([0], [1]), ([0], [2]), ([1], [3])), {0, 2}, model_outputs=[2, 3])
    assert [(p.nnapi, p.nodes, p.inputs, p.outputs) for p in ps] == [(True, [0, 2], [0], [3]),
                                                                    (False, [1], [0], [2])]


def test_partition_boundaries_and_order():
    """A CPU node between two NNAPI ones: three partitions, tensors crossing named on both sides;
    constants are never boundaries."""
    ps = partition.partition(nodes(([0, 9], [1]), ([1], [2]), ([2, 1], [3])), {0, 2}, model_outputs=[3],
                             not_boundary={9})
    assert [(p.nnapi, p.nodes, p.inputs, p.outputs) for p in ps] == [
        (True, [0], [0], [1]), (False, [1], [1], [2]), (True, [2], [2, 1], [3])]
    assert partition.replacing_line(ps, 3, 0, "main") == (
        "Replacing 2 out of 3 node(s) with delegate (TfLiteNnapiDelegate) node, yielding 3 partitions for subgraph 0 "
        "(main).")


def test_side_effect_nodes_keep_their_order():
    """Nodes touching resources keep their relative order (TFLite's control edges): the second
    one cannot join the first NNAPI round ahead of the CPU one between them."""
    io = [partition.Node(0, [0], [1], True), partition.Node(1, [0], [2], True), partition.Node(2, [0], [3], True)]
    ps = partition.partition(io, {0, 2})
    assert [(p.nnapi, p.nodes) for p in ps] == [(True, [0]), (False, [1]), (True, [2])]
    free = partition.partition([partition.Node(k, n.inputs, n.outputs) for k, n in enumerate(io)], {0, 2})
    assert [(p.nnapi, p.nodes) for p in free] == [(True, [0, 2]), (False, [1])]


def test_nothing_delegated_has_no_log_line():
    ps = partition.partition(nodes(([0], [1])), set())
    assert "no node is delegated" in partition.replacing_line(ps, 1)


def test_a_recurrent_state_next_to_a_cpu_partition(tmp_path):
    """An RNN's variable state tensor is carried by run() from step to step while the model is
    partitioned (a CUMSUM on the CPU before and after it), as LiteRT keeps it between invokes."""
    b, n_in, units = 2, 3, 4
    w = [rng.uniform(-0.5, 0.5, s).astype(f32) for s in ((units, n_in), (units, units), (units,))]
    path = tflite_writer.write(
        str(tmp_path / "rnn.tflite"),
        [("x", f32, (b, n_in), None), ("w", f32, (units, n_in), w[0]), ("r", f32, (units, units), w[1]),
         ("b", f32, (units,), w[2]), ("h", f32, (b, units), None, {"variable": True}), ("y", f32, (b, units), None),
         ("axis", i32, (), [1]), ("xc", f32, (b, n_in), None), ("z", f32, (b, units), None)],
        [("CUMSUM", [0, 6], [7], None), ("RNN", [7, 1, 2, 3, 4], [5], ("RNNOptions", {"FusedActivationFunction": 1})),
         ("CUMSUM", [5, 6], [8], None)], [0], [8])
    m = T.load(path)
    assert [p.nnapi for p in m.partitions] == [False, True, False]
    ref = interpreter(path)
    for _ in range(3):
        x = rng.normal(size=(b, n_in)).astype(f32)
        ref.set_tensor(ref.get_input_details()[0]["index"], x)
        ref.invoke()
        np.testing.assert_allclose(m.run([x])[0], ref.get_tensor(ref.get_output_details()[0]["index"]),
                                   rtol=1e-5, atol=1e-5)


def test_a_streaming_int8_model_below_android_11_runs_on_litert_with_its_variables():
    """okay_nabu (int8, resource variables) at feature level 3: NNAPI has no int8 there, the
    variable operators alone would make an NNAPI partition without operations, so the whole
    model is one LiteRT partition that keeps the variables itself: bit-exact with LiteRT step by
    step, and reset() starts the variables over."""
    from nnapi_py.testing import corpus
    path = corpus.model_or_skip("okay_nabu")
    m = T.load(path, feature_level=3)
    assert [(p.nnapi, len(p.nodes)) for p in m.partitions] == [(False, 61)]
    assert m._stitch.steps[0].stateful
    ref = interpreter(path)
    d = ref.get_input_details()[0]
    xs = [rng.integers(-128, 128, d["shape"]).astype(np.int8) for _ in range(12)]
    outs = []
    for x in xs:
        ref.set_tensor(d["index"], x)
        ref.invoke()
        outs.append(m.run([x])[0].copy())
        np.testing.assert_array_equal(outs[-1], ref.get_tensor(ref.get_output_details()[0]["index"]))
    m.reset()
    np.testing.assert_array_equal([m.run([x])[0] for x in xs[:4]], outs[:4])


def test_an_operator_neither_nnapi_nor_litert_can_run_is_one_load_error(tmp_path):
    path = tflite_writer.write(str(tmp_path / "nosuch.tflite"),
                               [("x", f32, (4,), None), ("y", f32, (4,), None), ("z", f32, (4,), None)],
                               [("CUSTOM:NoSuchOp", [0], [1], b""), ("ABS", [1], [2], None)], [0], [2])
    with pytest.raises(T.LoadError) as e:
        T.load(path)
    assert [(k, name) for k, name, _ in e.value.unmapped] == [(0, "CUSTOM_NoSuchOp")]
    assert "LiteRT cannot run it either" in str(e.value) and "NoSuchOp" in str(e.value)
    assert "yielding 2 partitions" in T.load(path, check_only=True).report()
