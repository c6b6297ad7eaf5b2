"""Random valid graphs (tests/validgraph.py) on a fixed list of seeds, through the C library
in every execution mode, against the float64 references written there; and the degenerate
cases the tester is meant to reach, pinned.  Longer runs: `python tests/validgraph.py --seeds A-B`."""
import gzip
import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nnapi_py.testing import cts as cts_runner  # noqa: E402  (the conformance runner)
import validgraph  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(cts_runner.default_lib_path()),
                                reason="build/lib/libneuralnetworks.so missing: run `make lib`")

SEEDS = range(0, 300)          # about 300 graphs x 4 modes
MODES = cts_runner.ALL_MODES


def _run(seeds, modes, ops=None, max_ops=4):
    failures, cases, seen = [], 0, set()
    for seed in seeds:
        test, problems = validgraph.run_case(seed, modes, ops, max_ops)
        if test is None:
            continue
        cases += 1
        seen.update(test["ops"])
        if problems:
            failures.append(f"seed {seed} (rerun: python tests/validgraph.py --seeds {seed}"
                            f"{' --ops ' + ','.join(ops) if ops else ''} --max-ops {max_ops})\n"
                            f"{validgraph.describe(test)}\n    " + "\n    ".join(problems[:6]))
    return cases, seen, failures


def test_fixed_seeds_every_mode():
    cases, seen, failures = _run(SEEDS, MODES)
    assert not failures, f"{len(failures)} of {cases} graphs failed:\n" + "\n".join(failures[:10])
    assert cases >= 250


def test_every_operation_of_the_registry_alone():
    """Each operation of the registry drawn alone (every recipe, so every operation, runs in
    make test): 6 single-operation graphs each, sync and dynamic."""
    from nnapi_py.ops import registry
    names = sorted(op.name for op in registry.OPS.values())
    missing = [n for n in names if n not in validgraph.RECIPES]
    failures, unseen = [], []
    for k, name in enumerate(names):
        if name not in validgraph.RECIPES:
            continue
        cases, seen, f = _run(range(5000 + 40 * k, 5000 + 40 * k + 40), ("sync", "dynamic"), [name], 1)
        failures += f
        if name not in seen:
            unseen.append(name)
    assert not failures, "\n".join(failures[:10])
    assert not unseen, f"never drawn: {unseen}"
    assert not missing or set(missing) <= set(validgraph.NOT_COVERED), f"no recipe: {missing}"
    assert not validgraph.NOT_COVERED, f"operations without a recipe: {validgraph.NOT_COVERED}"


def test_virtual_devices_fp16():
    """Graphs on virtual devices (an fp16 GPU, a quantized NPU beside it, a minimal CPU):
    relaxed models computed in float16 there, within the fp16 bound."""
    failures = []
    for seed in range(700, 800):
        test, problems = validgraph.run_case(seed, ("sync",), devices=validgraph.DEVICE_SETS)
        if test is not None and problems:
            failures.append(f"seed {seed}: " + "; ".join(problems[:3]))
    assert not failures, "\n".join(failures[:10])


@pytest.mark.parametrize("ops", [("DEPTHWISE_CONV_2D", "RELU"), ("CONV_2D", "GROUPED_CONV_2D"),
                                 ("TRANSPOSE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D")])
def test_window_operations_in_both_layouts(ops):
    """The window operations alone (more of their degenerate shapes per seed); the seeds
    include the issue's DEPTHWISE_CONV_2D NCHW one-channel case (seed 465 fails without its fix)."""
    cases, _, failures = _run(range(300, 1000), ("sync",), list(ops))
    assert not failures, f"{len(failures)} of {cases} graphs failed:\n" + "\n".join(failures[:10])


def _vectors(path):
    full = os.path.join(cts_runner.default_cts_dir(), path)
    if not os.path.exists(full):
        pytest.skip(f"conformance vectors missing: {full}")
    with gzip.open(full, "rt") as f:
        tests = json.load(f)["tests"]
    for t in tests:          # the variations whose inputs are model inputs (not computed in the graph)
        sg = t["model"]["main"]
        if len(sg["operations"]) == 1:
            ops = sg["operands"]

            def real(k):
                o = ops[k]
                a = np.asarray(o["data"], np.float64).reshape(o["dimensions"]) if o["dimensions"] \
                    else np.float64(o["data"][0])
                return (a - o["zeroPoint"]) * o["scale"] if o["scale"] and "FLOAT" not in o["type"] else a
            op = sg["operations"][0]
            yield t["name"], [real(k) for k in op["inputs"]], [real(k) for k in op["outputs"]]


def _same_rows(got, want, image_pos, atol):
    """Rows sorted by image and descending score (the order inside an image is open)."""
    go = np.lexsort((-got[0], got[image_pos]))
    wo = np.lexsort((-want[0], want[image_pos]))
    return all(np.shape(g) == np.shape(w) and np.allclose(np.asarray(g)[go], np.asarray(w)[wo], atol=atol, rtol=1e-3)
               for g, w in zip(got, want))


def test_detection_references_reproduce_the_conformance_vectors():
    """The tester's own float64 references of DETECTION_POSTPROCESSING, GENERATE_PROPOSALS and
    BOX_WITH_NMS_LIMIT (hard kernel) give the conformance vectors' outputs (Android's expected
    values; quantized outputs within one step), so the recipes judge the kernel by an
    independent reading of the operations."""
    seen = {}
    for name, v, want in _vectors("V1_2/detection_postprocess.json.gz"):
        p = {"scales": tuple(float(x) for x in v[3:7]), "regular": bool(v[7]), "max_det": int(v[8]),
             "max_cls": int(v[9]), "per_class": int(v[10]), "th": float(v[11]), "iou": float(v[12]),
             "bg": bool(v[13]), "n_out": want[0].shape[1]}
        got = validgraph._dp_ref(v[0], v[1], v[2], p)
        assert all(g.shape == w.shape and np.allclose(g, w, atol=1e-3, rtol=1e-3) for g, w in zip(got, want)), name
        seen["DETECTION_POSTPROCESSING"] = seen.get("DETECTION_POSTPROCESSING", 0) + 1
    for path in ("V1_2/generate_proposals.json.gz", "V1_3/generate_proposals_quant8_signed.json.gz"):
        for name, v, want in _vectors(path):
            p = {"hs": float(v[4]), "ws": float(v[5]), "pre": int(v[6]), "post": int(v[7]), "iou": float(v[8]),
                 "min_size": float(v[9]), "nchw": bool(v[10])}
            got = validgraph._gp_ref(v[0], v[1], v[2], v[3], p)
            assert _same_rows(got, want, 2, 0.126), name
            seen["GENERATE_PROPOSALS"] = seen.get("GENERATE_PROPOSALS", 0) + 1
    for path in ("V1_2/box_with_nms_limit_hard.json.gz", "V1_3/box_with_nms_limit_quant8_signed.json.gz"):
        for name, v, want in _vectors(path):
            if int(v[5]) != 0:
                continue
            got = validgraph._nms_ref(v[0], v[1], v[2].astype(np.int64), float(v[3]), int(v[4]), float(v[6]))
            assert _same_rows(got, want, 3, 0.011), name
            seen["BOX_WITH_NMS_LIMIT"] = seen.get("BOX_WITH_NMS_LIMIT", 0) + 1
    assert seen.get("DETECTION_POSTPROCESSING", 0) >= 9 and seen.get("GENERATE_PROPOSALS", 0) >= 10 \
        and seen.get("BOX_WITH_NMS_LIMIT", 0) >= 4, seen
