"""Conformance: Android's NNAPI CTS generated tests, run through the C ABI of
build/lib/libneuralnetworks.so by the conformance runner, nnapi_py/testing/cts.py.

The whole vector set is run once per test module (all four modes); the tests below
then look at the results.  The same set also runs, in a child process started first so
both run at once, against build/lib/feature-level-8/libneuralnetworks.so (the library built
for one feature level: its export list and baked-in level must not change a result).
Skips cleanly when the vectors or the library are absent.
"""

import os
import subprocess
import sys

import pytest

from nnapi_py.testing import cts

MODES = cts.ALL_MODES
FOUNDATION_OPS = ("ADD", "MUL", "RELU", "SOFTMAX", "FULLY_CONNECTED", "RESHAPE")


@pytest.fixture(scope="module")
def level8_run():
    """`python -m nnapi_py.testing.cts --feature-level 8` in a child process (all modes), started at once."""
    lib_path = cts.default_lib_path(8)
    if not cts.cts_available(cts.default_cts_dir()) or not os.path.exists(lib_path):
        yield None
        return
    env = dict(os.environ)
    env.pop("NNAPI_PY_LIB", None)
    proc = subprocess.Popen([sys.executable, "-m", "nnapi_py.testing.cts", "--feature-level", "8"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def results(level8_run):
    pytest.importorskip("cffi")
    cts_dir = cts.default_cts_dir()
    if not cts.cts_available(cts_dir):
        pytest.skip(cts.skip_message(cts_dir))
    lib_path = cts.default_lib_path()
    if not os.path.exists(lib_path):
        pytest.skip(f"conformance: skipped (library {lib_path} not built; run `make lib`)")
    return cts.run(modes=MODES, lib_path=lib_path, cts_dir=cts_dir)


@pytest.mark.parametrize("mode", MODES)
def test_conformance(results, mode):
    """No (test, mode) may fail.  Tests using an operation the runtime reports as
    "not implemented" are counted as skipped, so this covers every test whose
    operations are all implemented."""
    fails = results.failures_for(mode)
    if fails or results.load_errors:
        pytest.fail(
            f"{len(fails)} conformance failures in mode {mode}\n\n"
            f"{results.table()}\n\n{results.failure_report(limit=50, mode=mode)}\n\n"
            f"{results.summary_line()}", pytrace=False)


def test_foundation_ops(results):
    """ADD, MUL, RELU, SOFTMAX, FULLY_CONNECTED, RESHAPE: every test whose operations
    are all among these must pass in every mode, and each op has >= 1 passing test."""
    problems, not_impl = [], {}
    for mode in MODES:
        recs = results.records_for(mode=mode, ops_subset_of=FOUNDATION_OPS)
        for r in recs:
            if r.status == cts.NOT_IMPLEMENTED:
                key = (mode, r.message or r.step)
                not_impl[key] = not_impl.get(key, 0) + 1
            elif r.status != cts.PASSED:
                problems.append(r.describe())
        for op in FOUNDATION_OPS:
            if not any(op in r.ops and r.status == cts.PASSED for r in recs):
                problems.append(f"[{mode}] {op}: no passing test")
    if problems or not_impl:
        lines = [f"[{mode}] {n} tests not implemented: {msg}"
                 for (mode, msg), n in sorted(not_impl.items())]
        lines += problems[:100]
        if len(problems) > 100:
            lines.append(f"... {len(problems) - 100} more")
        pytest.fail("foundation operations (tests using only "
                    f"{', '.join(FOUNDATION_OPS)}):\n{results.table(FOUNDATION_OPS)}\n\n"
                    + "\n".join(lines), pytrace=False)


def test_conformance_on_the_feature_level_8_library(level8_run, results):
    """The whole suite, every mode, through build/lib/feature-level-8/libneuralnetworks.so."""
    if level8_run is None:
        pytest.skip("conformance vectors or build/lib/feature-level-8 absent")
    out, _ = level8_run.communicate(timeout=1800)
    last = out.strip().splitlines()[-1] if out.strip() else ""
    assert level8_run.returncode == 0 and last.endswith(" 0 failed"), out[-6000:]
    assert "feature-level-8" in out.splitlines()[0], out.splitlines()[0]   # "library: <path> ..."
    assert int(last.split()[0]) == results.passed, (last, results.summary_line())
