"""A short run of the fuzzer (tools/fuzz.py) in CI: random call sequences, memory lifetimes
(freed under constants, executions, bursts, computations in flight), counts in the millions,
and mutated conformance models of every family (extreme parameters, constants turned into
inputs with extreme values, quantization of inputs), one child process per batch; fails on a
crash, a call over 5 s, a result code outside the documented set, a raw-exception reason, a
wrong result, stderr output or a leaked fd.  The long run (>= 2,000,000 calls) is in
docs/testing.md.

The mutated models come from Android's conformance vectors (../shared/cts, or $NNAPI_PY_CTS,
as tests/test_conformance.py finds them).  Where they are absent the fuzzer still runs its call
sequences and memory lifetimes (test_short_fuzz_run), and the mutated-model test skips, saying
where it looked."""
import os
import re
import subprocess
import sys

import pytest

from nnapi_py.testing import cts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def fuzz_run():
    """One run of 4 batches of 3,000 calls (seed 1000), on the vectors where they are present."""
    cts_dir = cts.default_cts_dir()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fuzz.py"), "--seed", "1000", "--batches", "4",
                        "--calls", "3000", "--timeout", "120", "--cts", cts_dir],
                       capture_output=True, text=True, timeout=600)
    return cts_dir, r


def test_short_fuzz_run(fuzz_run):
    _, r = fuzz_run
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 failing batches" in r.stdout, r.stdout[-3000:]
    calls = [int(x) for x in re.findall(r"(\d+) calls in", r.stdout)]
    assert calls and calls[0] >= 4 * 3000, r.stdout     # every batch made its calls


def test_short_fuzz_run_mutated_models(fuzz_run):
    cts_dir, r = fuzz_run
    if not cts.cts_available(cts_dir):
        pytest.skip(f"fuzz: mutated conformance models skipped (no CTS vectors at {cts_dir}; "
                    "set NNAPI_PY_CTS to their directory)")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    models = [int(x) for x in re.findall(r"(\d+) mutated models", r.stdout)]
    assert models and models[0] > 100, r.stdout          # the mutated models did run
