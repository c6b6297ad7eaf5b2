"""Random valid graphs (tests/validgraph.py) on a fixed list of seeds, through the C library
in every execution mode, against the float64 references written there; and the degenerate
cases the tester is meant to reach, pinned.  Longer runs: `python tests/validgraph.py --seeds A-B`."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cts_runner  # noqa: E402
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
