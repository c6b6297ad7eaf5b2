"""`python -m nnapi_py run` with what a user gets wrong, in real subprocesses (issue 26, points 5
and 10): a missing file, a file that is not a .tflite, a wrong-size or missing --input, a
failure inside the library while loading or compiling (also under --check), a missing optional
package -- each one line on stderr, no traceback, exit 2 (the command line, a file or an input
given) or 1 (the model cannot run); --compare ends with a verdict against a stated tolerance."""
import os
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
pytest.importorskip("tflite", reason="the tflite parser package is not installed")
import tflite_writer  # noqa: E402

f32 = np.float32


def run_cli(*args, prelude=""):
    """python -m nnapi_py run ARGS, after `prelude` (Python run first in that process, to break
    something on purpose)."""
    code = prelude + "\nimport runpy, sys\nsys.argv = ['nnapi_py'] + sys.argv[1:]\n" \
                     "runpy.run_module('nnapi_py', run_name='__main__', alter_sys=True)\n"
    env = {k: v for k, v in os.environ.items() if k != "NNAPI_PY_TRACE"}
    return subprocess.run([sys.executable, "-c", code, "run", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


def failed(p, code, *needles):
    """Exit `code`, no traceback, stderr's first line names every needle; returns stderr's lines."""
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stdout + p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert lines and lines[0].startswith("nnapi_py: "), p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines


def add_model(tmp_path):
    return tflite_writer.write(str(tmp_path / "add.tflite"),
                               [("a", f32, (1, 8, 8, 3), None), ("b", f32, (1, 8, 8, 3), None),
                                ("y", f32, (1, 8, 8, 3), None)],
                               [("ADD", [0, 1], [2], None)], [0, 1], [2])


def test_missing_file_and_not_a_tflite(tmp_path):
    assert len(failed(run_cli(tmp_path / "nope.tflite"), 2, "nope.tflite: No such file or directory")) == 1
    text = tmp_path / "notes.tflite"
    text.write_text("lorem ipsum dolor sit amet, consectetur adipiscing elit\n" * 20)
    assert len(failed(run_cli(text), 2, "is not a .tflite model", "TFL3")) == 1
    assert len(failed(run_cli(text, "--check"), 2, "is not a .tflite model")) == 1


def test_wrong_inputs(tmp_path):
    path = add_model(tmp_path)
    good, bad = tmp_path / "good.npy", tmp_path / "bad.npy"
    np.save(good, np.ones((1, 8, 8, 3), f32))
    np.save(bad, np.ones((1, 192), f32))                            # the same size, another shape
    assert len(failed(run_cli(path, "--input", good, "--input", bad), 2,
                      "input b: float32[1, 8, 8, 3]: an array of shape [1, 192] was given")) == 1
    assert len(failed(run_cli(path, "--input", good), 2, "1 input(s) given, the model takes 2")) == 1
    assert len(failed(run_cli(path, "--input", tmp_path / "missing.npy", "--input", good), 2, "missing.npy")) == 1
    p = run_cli(path, "--input", good, "--input", good)
    assert p.returncode == 0 and "y: float32[1, 8, 8, 3]" in p.stdout, p.stderr


def test_library_failures_while_loading(tmp_path):
    """The library refusing an operation (addOperation) with LiteRT unavailable: exit 1, the
    LoadError's causes, no traceback; under --check the operator is reported on the CPU (exit 0).
    A failing Compilation_finish: one line, exit 1.  --traceback shows where."""
    path = add_model(tmp_path)
    refuse = ("import nnapi_py.nn as nn\n"
              "def op(self, *a, **k):\n"
              "    raise nn.NNAPIError(4, 'refused on purpose', 'ANeuralNetworksModel_addOperation(ADD)')\n"
              "nn.Model.op = op\n"
              "from nnapi_py.tflite import cpu\ncpu.available = lambda: False\n")
    lines = failed(run_cli(path, prelude=refuse), 1, "add.tflite: 1 operator(s) cannot run through NNAPI")
    assert "refused on purpose" in lines[1] and len(lines) == 3            # the cause, then what to install
    p = run_cli(path, "--check", prelude=refuse)
    assert p.returncode == 0 and "refused on purpose" in p.stdout and "Traceback" not in p.stderr, p.stderr
    broken = ("import nnapi_py.nn as nn\n"
              "def compile(self, **k):\n"
              "    raise nn.NNAPIError(5, 'no memory on purpose', 'ANeuralNetworksCompilation_finish')\n"
              "nn.Model.compile = compile\n")
    for extra in ((), ("--check",)):
        lines = failed(run_cli(path, *extra, prelude=broken), 1,
                       "ANeuralNetworksCompilation_finish: OP_FAILED: no memory on purpose")
        assert len(lines) == 1
    p = run_cli(path, "--traceback", prelude=broken)
    assert p.returncode == 1 and "Traceback (most recent call last)" in p.stderr


def test_missing_parser_package(tmp_path):
    path = add_model(tmp_path)
    hide = "import sys\nsys.modules['tflite'] = None\n"          # import tflite -> ImportError
    assert len(failed(run_cli(path, prelude=hide), 1, "pip install 'nnapi_py[tflite]'")) == 1


def test_compare_prints_a_verdict_against_its_tolerance(tmp_path):
    pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert) is not installed")
    path = add_model(tmp_path)
    p = run_cli(path, "--compare")
    assert p.returncode == 0, p.stderr
    assert "tolerance: float outputs max |x - ref| <= 0.001 * max(1, max |ref|)" in p.stdout
    assert "y: ours max abs 0 (rel 0); LiteRT XNNPACK max abs 0 (rel 0): within the tolerance" in p.stdout
    assert "verdict: MATCH: 1 of 1 output(s) within the tolerance" in p.stdout
    off = ("import nnapi_py.tflite.model as M\n_run = M.TfliteModel.run\n"
           "M.TfliteModel.run = lambda self, x: [o + 0.01 for o in _run(self, x)]\n")
    p = run_cli(path, "--compare", prelude=off)
    assert p.returncode == 1, p.stderr
    assert "y: ours max abs 0.01 (rel 0.00" in p.stdout and "OUTSIDE the tolerance" in p.stdout
    assert "verdict: MISMATCH: 0 of 1 output(s) within the tolerance (outside: y)" in p.stdout
