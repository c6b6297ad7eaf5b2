"""The report: what TFLite's NNAPI delegate would do with a model on a given Android release
(feature levels 3, 4, 6, 8 = Android 10, 11, 13, 15), end to end -- load(feature_level=N)
partitions as the delegate would there, the report gives its "Replacing N out of M node(s)"
line and per operator the NNAPI operation(s) or the release it needs, the model still runs
(CPU partitions on LiteRT) and matches LiteRT; `python -m nnapi_py run --check` prints it for
--feature-level N or NNAPI_PY_FEATURE_LEVEL."""
import os
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
litert = pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert) is not installed")
pytest.importorskip("tflite", reason="the tflite parser package is not installed")
import tflite_writer  # noqa: E402
import nnapi_py.tflite as T  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
f32, i32 = np.float32, np.int32
LEVELS = (3, 4, 6, 8)
rng = np.random.default_rng(5)


def reference(path, feeds):
    """LiteRT's reference kernels (its builtin ones where the reference resolver lacks the operator)."""
    for kind in (litert.OpResolverType.BUILTIN_REF, litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES):
        try:
            it = litert.Interpreter(model_path=path, experimental_op_resolver_type=kind)
            it.allocate_tensors()
            break
        except (RuntimeError, ValueError):
            continue
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def sandwich(tmp_path, op, x_shape, y_shape, extra_tensors=(), extra_ins=(), options=None):
    """x -> ADD 1 -> op -> ADD 1 -> z: the rule's operator between two operators every release delegates."""
    ts = [("x", f32, x_shape, None), ("one", f32, (1,), [1.0]), ("xa", f32, x_shape, None),
          ("y", f32, y_shape, None), ("z", f32, y_shape, None)] + list(extra_tensors)
    ops = [("ADD", [0, 1], [2], None), (op, [2, 2][:1] + list(extra_ins), [3], options), ("ADD", [3, 1], [4], None)]
    return tflite_writer.write(str(tmp_path / f"{op.lower()}.tflite"), ts, ops, [0], [4]), x_shape


def batch_matmul(tmp_path):
    path = tflite_writer.write(
        str(tmp_path / "bmm.tflite"),
        [("x", f32, (2, 3, 4), None), ("one", f32, (1,), [1.0]), ("xa", f32, (2, 3, 4), None),
         ("w", f32, (2, 4, 5), None), ("y", f32, (2, 3, 5), None), ("z", f32, (2, 3, 5), None)],
        [("ADD", [0, 1], [2], None), ("BATCH_MATMUL", [2, 3], [4], None), ("ADD", [4, 1], [5], None)], [0, 3], [5])
    return path, [(2, 3, 4), (2, 4, 5)]


def elu(tmp_path):
    path, x = sandwich(tmp_path, "ELU", (2, 5), (2, 5))
    return path, [x]


def mirror_pad(tmp_path):
    path, x = sandwich(tmp_path, "MIRROR_PAD", (1, 3, 4, 2), (1, 5, 6, 2),
                       [("pads", i32, (4, 2), [[0, 0], [1, 1], [1, 1], [0, 0]])], [5],
                       ("MirrorPadOptions", {"Mode": 0}))
    return path, [x]


# (model, the first release the delegate takes the operator, the first nnapi_py runs it on NNAPI,
#  the delegate's reason below that)
RULES = {"BATCH_MATMUL": (batch_matmul, 6, 6, "BATCH_MATMUL needs feature level 6 (Android 13)"),
         "ELU": (elu, 4, 4, "ELU needs feature level 4 (Android 11)"),
         "MIRROR_PAD": (mirror_pad, 7, 1, "needs feature level 7 (Android 14)")}   # below 7: GATHERs here


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("rule", sorted(RULES))
def test_report_follows_the_delegate_per_release(tmp_path, rule, level):
    build, delegate_from, ours_from, why = RULES[rule]
    path, shapes = build(tmp_path)
    m = T.load(path, feature_level=level)
    rep = m.report()
    assert f"at feature level {level} (" in rep
    if level >= delegate_from:
        assert ("Replacing 3 out of 3 node(s) with delegate (TfLiteNnapiDelegate) node, yielding 1 partitions "
                "for subgraph 0 (") in rep
    else:
        assert "Replacing 2 out of 3 node(s) with delegate (TfLiteNnapiDelegate) node, yielding 3 partitions" in rep
        assert why in rep
    if level >= ours_from:
        assert m.decisions[1].kind == "nnapi" and [p.nnapi for p in m.partitions] == [True]
        assert f"-> {m.decisions[1].text}" in rep
        assert ("[the delegate: CPU, " in rep) == (level < delegate_from)
    else:
        assert m.decisions[1].kind == "cpu" and why in m.decisions[1].text
        assert [p.nnapi for p in m.partitions] == [True, False, True] and "partition 2: CPU (LiteRT)" in rep
    feeds = [rng.normal(size=s).astype(f32) for s in shapes]
    np.testing.assert_allclose(m.run(feeds)[0], reference(path, feeds), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("level", LEVELS)
def test_int8_activations_need_feature_level_4(tmp_path, level):
    """A whole int8 model: from Android 11 on one NNAPI partition.  Below, NNAPI has no int8
    operand type: the delegate would still take it (converting to uint8), nnapi_py does not
    convert (yet) and runs it on LiteRT -- the report says both."""
    q = {"scale": 0.05, "zero_point": -3}
    path = tflite_writer.write(str(tmp_path / "int8.tflite"),
                               [("a", np.int8, (2, 6), None, q), ("b", np.int8, (2, 6), None, q),
                                ("y", np.int8, (2, 6), None, q)], [("ADD", [0, 1], [2], None)], [0, 1], [2])
    m = T.load(path, feature_level=level)
    rep = m.report()
    if level >= 4:
        assert "Replacing 1 out of 1 node(s)" in rep and m.decisions[0].kind == "nnapi"
    else:
        assert m.decisions[0].kind == "cpu" and "needs feature level 4 (Android 11)" in m.decisions[0].text
        assert "Replacing 1 out of 1 node(s)" in rep and "[the delegate: NNAPI]" in rep
    a, b = (rng.integers(-128, 128, (2, 6)).astype(np.int8) for _ in range(2))
    got = m.run([a, b])[0].astype(int)
    assert np.abs(got - reference(path, [a, b]).astype(int)).max() <= 1


def test_where_nnapi_py_does_more_than_the_delegate_the_report_says_so(tmp_path):
    """SHAPE folded at load (the delegate leaves it on TFLite's CPU) and PACK lowered at feature
    level 3 (the delegate refuses PACK before 4): both run without CPU partitions here, and the
    report gives the delegate's own decision beside them and in its line."""
    path = tflite_writer.write(
        str(tmp_path / "more.tflite"),
        [("x", f32, (2, 3), None), ("s", i32, (2,), None), ("a", f32, (2, 3), None), ("b", f32, (2, 3), None),
         ("y", f32, (2, 2, 3), None)],
        [("SHAPE", [0], [1], ("ShapeOptions", {"OutType": 2})), ("RESHAPE", [0, 1], [2], None),
         ("PACK", [2, 3], [4], ("PackOptions", {"ValuesCount": 2, "Axis": 0}))], [0, 3], [4])
    m = T.load(path, feature_level=3)
    assert [d.kind for d in m.decisions] == ["folded", "nnapi", "nnapi"] and [p.nnapi for p in m.partitions] == [True]
    rep = m.report()
    assert "[the delegate: CPU, the NNAPI delegate does not map SHAPE]" in rep
    assert "[the delegate: CPU, PACK" in rep
    assert "Replacing 1 out of 3 node(s)" in rep and "yielding 3 partitions" in rep


def cli(*args, **env):
    return subprocess.run([sys.executable, "-m", "nnapi_py", "run", *args], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT, **env), timeout=300)


def test_cli_check_at_a_feature_level_and_from_the_environment(tmp_path):
    path, _ = batch_matmul(tmp_path)
    for r in (cli(path, "--check", "--feature-level", "4"), cli(path, "--check", "--feature-level", "30"),
              cli(path, "--check", NNAPI_PY_FEATURE_LEVEL="4")):
        assert r.returncode == 0, r.stderr
        assert "feature level 4 (Android 11, API 30)" in r.stdout
        assert ("Replacing 2 out of 3 node(s) with delegate (TfLiteNnapiDelegate) node, yielding 3 partitions"
                in r.stdout)
        assert "BATCH_MATMUL needs feature level 6 (Android 13)" in r.stdout
        assert "input  x" in r.stdout and "[2, 3, 4]" in r.stdout and "output z" in r.stdout
    r = cli(path, "--check", "--feature-level", "6")
    assert r.returncode == 0 and "Replacing 3 out of 3 node(s)" in r.stdout, r.stderr
    r = cli(path, "--check", "--feature-level", "12")
    assert r.returncode != 0 and "feature level" in r.stderr
    r = cli(path, "--feature-level", "4", "--compare")      # runs partitioned and matches LiteRT
    assert r.returncode == 0 and "max abs" in r.stdout, r.stderr


def test_a_graph_with_dynamic_tensors_is_not_delegated_at_all(tmp_path):
    """A RESHAPE to a shape given at run time makes TFLite's tensors dynamic-sized: the delegate
    refuses the whole graph (its warning is quoted), nnapi_py still runs it."""
    path = tflite_writer.write(
        str(tmp_path / "dyn.tflite"),
        [("x", f32, (6,), None), ("s", i32, (2,), None), ("y", f32, (2, 3), None), ("z", f32, (2, 3), None)],
        [("RESHAPE", [0, 1], [2], None), ("ABS", [2], [3], None)], [0, 1], [3])
    m = T.load(path)
    rep = m.report()
    assert "TfLiteNnapiDelegate would not be applied at all" in rep and "dynamic-sized" in rep
    assert "Replacing" not in rep and "ABS  [the delegate: CPU, not applied to this graph" in rep
    x, s = np.arange(6, dtype=f32) - 3, np.array([2, 3], i32)
    np.testing.assert_array_equal(m.run([x, s])[0], np.abs(x).reshape(2, 3))
    assert "would not be applied" not in T.load(batch_matmul(tmp_path)[0]).report()


def test_each_subgraph_gets_its_own_line(tmp_path):
    """TFLite applies the delegate to every subgraph: an IF's branches get their own lines (the
    IF itself stays on the CPU for the delegate, nnapi_py runs it as NNAPI IF from level 4)."""
    bool_ = np.bool_
    main = dict(name="main", tensors=[("c", bool_, (1,), None), ("x", f32, (2, 3), None), ("y", f32, (2, 3), None)],
                ops=[("IF", [0, 1], [2], ("IfOptions", {"ThenSubgraphIndex": 1, "ElseSubgraphIndex": 2}))],
                inputs=[0, 1], outputs=[2])
    then = dict(name="then", tensors=[("x", f32, (2, 3), None), ("r", f32, (2, 3), None), ("s", f32, (2, 3), None)],
                ops=[("ABS", [0], [1], None), ("ELU", [1], [2], None)], inputs=[0], outputs=[2])
    other = dict(name="else", tensors=[("x", f32, (2, 3), None), ("r", f32, (2, 3), None)],
                 ops=[("NEG", [0], [1], None)], inputs=[0], outputs=[1])
    path = tflite_writer.with_subgraphs(str(tmp_path / "if.tflite"), main, then, other)
    rep = T.load(path, feature_level=3).report()
    assert "(no line for subgraph 0: no node is delegated" in rep
    assert ("Replacing 1 out of 2 node(s) with delegate (TfLiteNnapiDelegate) node, yielding 2 partitions for "
            "subgraph 1 (then).") in rep                  # ELU needs feature level 4
    assert "Replacing 1 out of 1 node(s) with delegate (TfLiteNnapiDelegate) node, yielding 1 partitions for " \
           "subgraph 2 (else)." in rep
    assert "yielding 1 partitions for subgraph 1 (then)." in T.load(path, feature_level=4).report()


def test_cli_max_partitions(tmp_path):
    """ADD / CUMSUM alternating: 4 NNAPI partitions; the delegate keeps 3, --max-partitions 0 all."""
    tensors = [("x", f32, (1, 6), None), ("one", f32, (1,), [1.0]), ("axis", i32, (), [1])]
    ops = []
    for k, c in enumerate("acacaca"):
        tensors.append((f"t{k}", f32, (1, 6), None))
        src = 0 if k == 0 else len(tensors) - 2
        ops.append(("ADD", [src, 1], [len(tensors) - 1], None) if c == "a" else
                   ("CUMSUM", [src, 2], [len(tensors) - 1], None))
    path = tflite_writer.write(str(tmp_path / "chain.tflite"), tensors, ops, [0], [len(tensors) - 1])
    r = cli(path, "--check")
    assert r.returncode == 0 and "Replacing 3 out of 7 node(s)" in r.stdout, r.stderr
    r = cli(path, "--check", "--max-partitions", "0")
    assert r.returncode == 0 and "Replacing 4 out of 7 node(s)" in r.stdout and "yielding 7 partitions" in r.stdout
