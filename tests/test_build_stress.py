"""Many threads building models at once (issue 44): the library's C-side operand batch must hand
every model its operands in order before any other call on it, under any interleaving.

- C host: ctests/test_build_stress.c, 8 threads x 1,000 builds (chains of 1..180 ADD operations,
  1 to 400 operands; compiles and executions of other models interleaved), every model checked
  by its result.
- Python host: tests/stress_build_client.py in a bare venv (ctypes only: no cffi, no numpy in the
  host), the same mix, through ctypes.CDLL (the GIL released during each call) and ctypes.PyDLL
  (the GIL held, as a C extension calls).

The same programs run under ThreadSanitizer against a TSan build of the library's C layer in
tests/test_sanitizers.py.
"""
import os
import subprocess
import venv

import pytest

from test_ctests import ROOT, assert_all_passed, compile_ctest, needs_lib, run_program

CLIENT = ROOT / "tests" / "stress_build_client.py"
LIB = ROOT / "build" / "lib" / "libneuralnetworks.so"
STRESS_TIMEOUT = 600


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A venv created without pip: the host has neither cffi nor numpy."""
    d = tmp_path_factory.mktemp("bare") / "venv"
    venv.EnvBuilder(with_pip=False).create(d)
    return str(d / "bin" / "python")


def _env():
    e = dict(os.environ)
    for k in ("PYTHONPATH", "NNAPI_PY_TRACE", "NNAPI_PY_FORCE_INIT_FAILURE"):
        e.pop(k, None)
    return e


@needs_lib
def test_c_host_eight_threads_build_a_thousand_models_each():
    exe = compile_ctest("test_build_stress")
    rc, out, err = run_program([exe], timeout=STRESS_TIMEOUT, env={"NNPY_STRESS_THREADS": "8",
                                                                   "NNPY_STRESS_BUILDS": "1000"})
    assert "checked 8000 of 8000 models" in out, out[-2000:] + err[-2000:]
    assert_all_passed([exe], rc, out, err)


@needs_lib
@pytest.mark.parametrize("how, builds", [("cdll", 1000), ("pydll", 250)])
def test_python_host_eight_threads_build_models(bare_python, how, builds):
    cmd = [bare_python, str(CLIENT), str(LIB), "8", str(builds)] + (["pydll"] if how == "pydll" else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=STRESS_TIMEOUT, env=_env(), cwd="/")
    assert p.returncode == 0 and p.stdout.splitlines()[-1] == f"{8 * builds} passed, 0 failed", (
        f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
