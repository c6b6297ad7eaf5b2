"""Conformance: Android's NNAPI CTS generated tests, run through the C ABI of
build/lib/libneuralnetworks.so by tests/cts_runner.py.

The whole vector set is run once per test module (all four modes); the tests below
then look at the results.  Skips cleanly when the vectors or the library are absent.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cts_runner  # noqa: E402

MODES = cts_runner.ALL_MODES
FOUNDATION_OPS = ("ADD", "MUL", "RELU", "SOFTMAX", "FULLY_CONNECTED", "RESHAPE")


@pytest.fixture(scope="module")
def results():
    pytest.importorskip("cffi")
    cts_dir = cts_runner.default_cts_dir()
    if not cts_runner.cts_available(cts_dir):
        pytest.skip(cts_runner.skip_message(cts_dir))
    lib_path = cts_runner.default_lib_path()
    if not os.path.exists(lib_path):
        pytest.skip(f"conformance: skipped (library {lib_path} not built; run `make lib`)")
    return cts_runner.run(modes=MODES, lib_path=lib_path, cts_dir=cts_dir)


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
            if r.status == cts_runner.NOT_IMPLEMENTED:
                key = (mode, r.message or r.step)
                not_impl[key] = not_impl.get(key, 0) + 1
            elif r.status != cts_runner.PASSED:
                problems.append(r.describe())
        for op in FOUNDATION_OPS:
            if not any(op in r.ops and r.status == cts_runner.PASSED for r in recs):
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
