"""`python -m nnapi_py` as a user runs it (a real subprocess each time): a failure is one line
saying what is wrong and what to do, exit code 2 (usage, a file or input given) or 1 (the model
cannot run), never a traceback unless asked for (--traceback, NNAPI_PY_TRACE=1); `show` in the
README's forms; `run --bench` pins and reports the BLAS threads (issue 26, points 4, 5, 6, 8)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import nnapi_py as nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args, env=None, cwd=None):
    e = dict(os.environ)
    e.pop("NNAPI_PY_TRACE", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "nnapi_py", *map(str, args)], capture_output=True, text=True,
                          env=e, cwd=cwd, timeout=300)


def one_line_failure(p, code, *needles):
    """The process failed with `code`, printed exactly one line on stderr (no traceback) holding
    every needle; returns that line."""
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def saved_model(tmp_path):
    m = nn.Model("add")
    x = m.input("x", nn.float32, (1, 4))
    m.output(m.op("ADD", x, np.ones((1, 4), np.float32), 0), "y")
    js = tmp_path / "m.json"
    js.write_text(m.to_json())
    return js


# ---- point 5: errors are one line with the right exit code ----------------------------------------
def test_unknown_option_and_missing_files(tmp_path):
    one_line_failure(cli("--nope"), 2, "unknown option --nope")
    one_line_failure(cli("run", tmp_path / "missing.tflite"), 2, "missing.tflite", "No such file")
    one_line_failure(cli("show", tmp_path / "missing.json"), 2, "missing.json", "No such file")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    one_line_failure(cli("show", bad), 2, "bad.json is not a model's JSON")
    one_line_failure(cli("show", tmp_path / "model.txt"), 2, "show reads a model's .json")


def test_traceback_on_request(tmp_path):
    """--traceback or NNAPI_PY_TRACE=1 adds the traceback (for a bug report) before the line."""
    for p in (cli("run", tmp_path / "missing.tflite", "--traceback"),
              cli("run", tmp_path / "missing.tflite", env={"NNAPI_PY_TRACE": "1"})):
        assert p.returncode == 2
        assert "Traceback (most recent call last)" in p.stderr
        assert p.stderr.strip().splitlines()[-1].startswith("nnapi_py: ")


def test_missing_optional_package_names_the_extra(tmp_path):
    """Without the flatbuffer parser `tflite`: the API raises an ImportError subclass naming
    pip install 'nnapi_py[tflite]'; the CLI prints that line and exits 1."""
    shadow = tmp_path / "shadow" / "tflite"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'tflite'\", name='tflite')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), os.environ.get("PYTHONPATH", "")])}
    model = tmp_path / "m.tflite"
    model.write_bytes(b"\0" * 64)
    one_line_failure(cli("run", model, env=env), 1, "pip install 'nnapi_py[tflite]'")
    code = ("import sys, nnapi_py, nnapi_py.tflite as T\n"
            "try:\n    T.load(sys.argv[1])\n"
            "except ImportError as e:\n"
            "    print(type(e).__name__, isinstance(e, nnapi_py.MissingDependency), e.name, e)\n")
    e = dict(os.environ, **env)
    p = subprocess.run([sys.executable, "-c", code, str(model)], capture_output=True, text=True, env=e, timeout=120)
    assert p.stdout.startswith("MissingDependency True tflite "), p.stdout + p.stderr
    assert "pip install 'nnapi_py[tflite]'" in p.stdout


def test_pyproject_has_the_extras_the_messages_name():
    text = open(os.path.join(ROOT, "pyproject.toml")).read()
    assert "\ntflite = [" in text and "\ncompare = [" in text


def test_nnapi_error_is_one_line_exit_1():
    """A model the library refuses (an NNAPIError) is exit 1, one line with the reason (the
    CLI cases with .tflite models that fail in the library: tests/test_tflite*.py)."""
    m = nn.Model("bad")
    a = m.input("a", nn.float32, (2,))
    m.output(m.op("ADD", a, a, 9), "y")           # fused activation 9: OP_FAILED at compute, as Android
    from nnapi_py import __main__ as M            # importing the CLI module runs nothing
    c = m.compile()
    with pytest.raises(nn.NNAPIError) as e:
        c.run({"a": np.zeros(2, np.float32)})
    code, line = M._failure(e.value)
    assert code == 1 and "\n" not in line and "OP_FAILED" in line and "fused activation" in line


# ---- point 6: show FILE.json --svg OUT.svg -------------------------------------------------------
def test_show_in_the_readme_forms(tmp_path):
    js = saved_model(tmp_path)
    p = cli("show", js)
    assert p.returncode == 0 and "ADD" in p.stdout, p.stderr
    p = cli("show", js, "--dot")
    assert p.returncode == 0 and p.stdout.startswith("digraph"), p.stderr
    p = cli("show", js, "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["operations"], p.stderr
    out = tmp_path / "OUT.svg"
    p = cli("show", js, "--svg", out)
    import shutil
    if shutil.which("dot"):
        assert p.returncode == 0 and out.read_text().lstrip().startswith("<"), p.stderr
    else:                                          # no Graphviz: one line saying so, not the usage
        line = one_line_failure(p, 1, "dot")
        assert "usage" not in line
    p = cli("show", js, "--svg")
    assert p.returncode == 2 and "--svg" in p.stderr and "Traceback" not in p.stderr


# ---- point 5, the Python API: operations by an unknown name or code ------------------------------
def test_unknown_operation_name_or_code():
    m = nn.Model()
    x = m.input("x", nn.float32, (2,))
    with pytest.raises(ValueError) as e:
        m.op("FOO", x)
    assert "no NNAPI operation named 'FOO'" in str(e.value) and "FLOOR" in str(e.value)
    assert "docs/operations.md" in str(e.value)
    with pytest.raises(ValueError) as e:
        m.op("SOFTMAXX", x, 1.0)
    assert "did you mean SOFTMAX" in str(e.value)
    with pytest.raises(ValueError, match=r"no NNAPI operation has code 9999: codes are 0\.\.105"):
        m.op(9999, x)
    assert m.op("add", x, x, 0).type == nn.float32                 # names in any case


# ---- point 4: --bench pins and reports the BLAS threads ------------------------------------------
def _unpinned_env():
    from nnapi_py import blas
    return {k: v for k, v in os.environ.items() if k not in blas.ENV_VARS and k != "NNAPI_PY_TRACE"}


def test_blas_pinning_before_and_after_numpy_loads():
    """pin_environment() before numpy loads gives one BLAS thread; after, limit() does; threads()
    reads what is in force (the 2-core machine's default would be 2)."""
    code = ("import sys\nfrom nnapi_py import blas\nassert blas.pin_environment(1)\nimport numpy\n"
            "print(blas.threads())\nprint(blas.pin_environment(1))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_unpinned_env(), timeout=60)
    assert p.stdout.split("\n")[:2] == ["[('openblas', 1)]", "False"], p.stdout + p.stderr
    code = ("import numpy\nfrom nnapi_py import blas\nassert blas.limit(1)\nprint(blas.describe())\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_unpinned_env(), timeout=60)
    assert p.stdout.strip() == "openblas 1 thread", p.stdout + p.stderr


def test_run_bench_prints_the_thread_counts(tmp_path):
    pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert) is not installed")
    pytest.importorskip("tflite", reason="the tflite parser package is not installed")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tflite_writer
    path = tflite_writer.binary(str(tmp_path / "add.tflite"), "ADD", (2, 3))
    e = _unpinned_env()
    p = subprocess.run([sys.executable, "-m", "nnapi_py", "run", path, "--bench", "3"], capture_output=True,
                       text=True, env=e, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "threads: nnapi_py numpy BLAS: openblas 1 thread; LiteRT: num_threads=1" in p.stdout, p.stdout


def test_make_bench_prints_the_thread_counts():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import run as bench_run
    line = bench_run.threads_line()
    assert line.startswith("threads: nnapi_py numpy BLAS openblas 1 thread (OPENBLAS_NUM_THREADS=1"), line
    assert "LiteRT num_threads=1" in line


# ---- issue 40 point 5: each subcommand's help, option values, a closed pipe, a JSON that is no model --------
def test_each_subcommand_has_its_own_help():
    for sub, needles in (("run", ("usage: python -m nnapi_py run", "--input-shape", "--compare", "--no-reference-ok",
                                  "--bench N", "bound (nnapi_py/tflite/compare.py")),
                         ("show", ("usage: python -m nnapi_py show", "--svg OUT.svg", "MODEL.tflite",
                                   "--input-shape"))):
        for flag in ("--help", "-h"):
            p = cli(sub, flag)
            assert p.returncode == 0 and p.stderr == "", p.stderr
            for n in needles:
                assert n in p.stdout, (sub, n, p.stdout)
            assert "--cflags" not in p.stdout                   # not the global help
    p = cli("--help")
    assert p.returncode == 0 and "--cflags" in p.stdout and "python -m nnapi_py run --help" in p.stdout
    one_line_failure(cli("runn"), 2, "unknown option runn", "subcommands: run, show")


def _closed_pipe_run(*args):
    """The command with stdout a pipe whose reader has already gone (as `... | head -1` once head
    exits): (returncode, stderr)."""
    r, w = os.pipe()
    os.close(r)
    e = dict(os.environ)
    e.pop("NNAPI_PY_TRACE", None)
    try:
        p = subprocess.run([sys.executable, "-m", "nnapi_py", *map(str, args)], stdout=w, stderr=subprocess.PIPE,
                           text=True, env=e, timeout=300)
    finally:
        os.close(w)
    return p.returncode, p.stderr


def test_a_closed_pipe_ends_quietly(tmp_path):
    """`python -m nnapi_py ... | head -1`: no "[Errno 32] Broken pipe", no traceback: the process
    ends as a Unix tool on SIGPIPE (killed by it; 141 where it cannot be)."""
    import signal
    js = saved_model(tmp_path)
    for args in (("show", js), ("show", js, "--dot"), ("run", "--help"), ("--version",)):
        code, err = _closed_pipe_run(*args)
        assert err == "" and code in (-signal.SIGPIPE, 141), (args, code, err)
    p = subprocess.run(f"'{sys.executable}' -m nnapi_py show '{js}' | head -1", shell=True, capture_output=True,
                       text=True, timeout=120)
    assert p.stdout.startswith("  #  operation") and p.stderr == "", p.stderr


def test_show_says_what_a_model_json_must_hold(tmp_path):
    cases = (({"a": 1}, 'it lacks "operands", "operations", "inputs", "outputs"'),
             ([1, 2], "it holds a list"),
             ({"operands": {}, "operations": [], "inputs": [], "outputs": []}, '"operands" is a dict, not a list'),
             ({"operands": [{"index": 0}], "operations": [], "inputs": [0], "outputs": [0]}, 'operand 0 lacks "type"'),
             ({"operands": [], "operations": [{"type": "ADD", "inputs": [3], "outputs": []}], "inputs": [],
               "outputs": []}, 'operation 0: "inputs" must list operand indices'))
    for k, (d, needle) in enumerate(cases):
        f = tmp_path / f"m{k}.json"
        f.write_text(json.dumps(d))
        line = one_line_failure(cli("show", f), 2, f"m{k}.json is not a model's JSON", needle)
        assert '"operands"' in line and "NNAPI_PY_DUMP=DIR or Model.to_json()" in line
    js = saved_model(tmp_path)
    one_line_failure(cli("show", js, "--input-shape", "x=1,4"), 2, "--input-shape", "apply to a .tflite")


def test_run_bench_values_are_checked_before_anything_runs(tmp_path):
    """--bench N and --max-partitions N out of range are usage errors (exit 2, one line), not a
    statistics error or a silent skip."""
    model = tmp_path / "m.tflite"
    model.write_bytes(b"\0" * 64)
    one_line_failure(cli("run", model, "--bench", "-3"), 2, "--bench", "at least 1")
    one_line_failure(cli("run", model, "--bench", "0"), 2, "--bench", "at least 1")
    one_line_failure(cli("run", model, "--max-partitions", "-1"), 2, "--max-partitions", "at least 0")
    one_line_failure(cli("run"), 2, "the following arguments are required: MODEL.tflite")
