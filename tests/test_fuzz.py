"""A short run of the fuzzer (tools/fuzz.py) in CI: random call sequences, memory lifetimes
(freed under constants, executions, bursts, computations in flight), counts in the millions,
and mutated conformance models of every family (extreme parameters, constants turned into
inputs with extreme values, quantization of inputs), one child process per batch; fails on a
crash, a call over 5 s, a result code outside the documented set, a raw-exception reason, a
wrong result, stderr output or a leaked fd.  The long run (>= 2,000,000 calls) is in the README."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_short_fuzz_run():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fuzz.py"), "--seed", "1000", "--batches", "4",
                        "--calls", "3000", "--timeout", "120"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 failing batches" in r.stdout
    models = [int(x) for x in __import__("re").findall(r"(\d+) mutated models", r.stdout)]
    assert models and models[0] > 100, r.stdout          # the mutated models did run
