"""A short run of the fuzzer (tools/fuzz.py) in CI: random call sequences and mutated
conformance models, one child process per batch; fails on a crash, a hang, a result code
outside the documented set, a raw-exception reason, stderr output or a leaked fd.
The long run (>= 10**6 calls) is documented in the README."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_short_fuzz_run():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fuzz.py"), "--seed", "1000", "--batches", "4",
                        "--calls", "3000", "--timeout", "120"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 failing batches" in r.stdout
