"""A client's own checking tools see a clean library (issues 38 and 44).

Clients test their NNAPI code on Linux CI under AddressSanitizer/UBSan, valgrind and
ThreadSanitizer.  Here the C tests and examples are built the way such a client builds them and
run with no option or file set, except the one suppression file valgrind and TSan are given
(`python -m nnapi_py --suppressions=TOOL`):

- ASan+UBSan (gcc's shared runtime): the ABI suite, threads, lifetimes, first call, the operand
  batch stress, the demo and examples/fallback.c exit 0 with no report; clang's static runtime:
  the demo and the threads test; UBSan alone: the demo.
- A deliberate leak in a test-only client is still reported, and only it.
- valgrind --error-exitcode=1 --leak-check=full: the demo and a threaded test exit 0.
- ThreadSanitizer: the demo and the threads test built with -fsanitize=thread against the
  library; and the library's own C layer built with -fsanitize=thread (build_ffi.py --sanitize
  thread) under the threads test, the operand batch stress test (C host) and the stress client
  in a Python host (libtsan preloaded): no race reported.

A tool the machine lacks (`make test` installs valgrind and clang where it can) skips with the
reason.  Build products go to build/sanitize/.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

from test_ctests import CTESTS, INCLUDE, LIBDIR, ROOT, SUMMARY_RE, needs_lib

OUT = ROOT / "build" / "sanitize"
EXAMPLES = ROOT / "examples"
ASAN_UBSAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
REPORT = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer")
TIMEOUT = 600


def _clean_env(extra=None):
    """The environment of a client's CI run: no sanitizer options, no PYTHONMALLOC of ours."""
    e = dict(os.environ)
    for k in ("ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "PYTHONMALLOC",
              "NNAPI_PY_FORCE_INIT_FAILURE", "NNAPI_PY_TRACE", "LD_PRELOAD", "PYTHONPATH"):
        e.pop(k, None)
    e.update(extra or {})
    return e


def _need(tool):
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed on this machine (`make test` installs it where it can)")
    return path


def suppressions(tool):
    out = subprocess.run([sys.executable, "-m", "nnapi_py", f"--suppressions={tool}"], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert os.path.isfile(out), out
    return out


def build(src, name, flags, cc="gcc", libdir=LIBDIR):
    """Compile one C client the way a user's CI does, into build/sanitize/."""
    OUT.mkdir(parents=True, exist_ok=True)
    exe = OUT / name
    cmd = [cc, "-std=c11", "-g", "-O1", "-fno-omit-frame-pointer", *flags, f"-I{INCLUDE}", f"-I{CTESTS}",
           str(src), "-o", str(exe), f"-L{libdir}", "-lneuralnetworks", f"-Wl,-rpath,{libdir}",
           "-lpthread", "-ldl", "-lm"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, f"$ {' '.join(cmd)}\n{p.stdout}{p.stderr}"
    return exe


def run(cmd, env=None, timeout=TIMEOUT):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                       env=_clean_env(env), cwd=ROOT)
    return p


def assert_clean(p, what, summary=True):
    reports = REPORT.findall(p.stderr) + REPORT.findall(p.stdout)
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    ok = p.returncode == 0 and not reports
    if summary:
        m = SUMMARY_RE.match(lines[-1] if lines else "")
        ok = ok and m is not None and m.group(2) == "0"
    assert ok, (f"{what}: exit {p.returncode}, {len(reports)} sanitizer reports\n"
                f"--- stdout (end) ---\n{p.stdout[-3000:]}\n--- stderr (start) ---\n{p.stderr[:6000]}")


# ---- AddressSanitizer + UndefinedBehaviorSanitizer ----------------------------------------------

C_PROGRAMS = {   # name -> environment
    "test_validation": {}, "test_api": {}, "test_threads": {}, "test_lifetimes": {}, "test_first_call": {},
    "test_build_stress": {"NNPY_STRESS_THREADS": "8", "NNPY_STRESS_BUILDS": "60"},
}


@needs_lib
@pytest.mark.parametrize("name", sorted(C_PROGRAMS))
def test_asan_ubsan_c_tests(name):
    exe = build(CTESTS / f"{name}.c", f"{name}.asan", ASAN_UBSAN)
    assert_clean(run([exe], C_PROGRAMS[name]), f"{name} under ASan+UBSan")


@needs_lib
def test_asan_ubsan_demo():
    p = run([build(EXAMPLES / "demo.c", "demo.asan", ASAN_UBSAN)])
    assert_clean(p, "demo under ASan+UBSan", summary=False)
    assert "[11, 22, 33, 44]" in p.stdout or p.stdout.strip(), p.stdout


@needs_lib
def test_asan_ubsan_fallback_example():
    p = run([build(EXAMPLES / "fallback.c", "fallback.asan", ASAN_UBSAN)],
            {"NNAPI_PY_DEVICES": "gpu=float-fast", "NNAPI_PY_FAULTS": "gpu:execute-fail"})
    assert_clean(p, "fallback.c under ASan+UBSan", summary=False)
    assert "fallbacks in 4 runs" in p.stdout, p.stdout


@needs_lib
def test_ubsan_alone_demo():
    p = run([build(EXAMPLES / "demo.c", "demo.ubsan", ["-fsanitize=undefined", "-fno-sanitize-recover"])])
    assert_clean(p, "demo under UBSan", summary=False)


@needs_lib
@pytest.mark.parametrize("src", ["examples/demo.c", "ctests/test_threads.c"])
def test_clang_static_asan_runtime(src):
    clang = _need("clang")
    name = os.path.basename(src)[:-2] + ".clang-asan"
    exe = build(ROOT / src, name, ASAN_UBSAN, cc=clang)
    p = run([exe])
    assert_clean(p, f"{src} under clang's static ASan runtime", summary=src.startswith("ctests"))


LEAKER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <android/NeuralNetworks.h>

static void* volatile keep;

__attribute__((noinline)) static void leak_on_purpose(void) {
    char* p = malloc(4096);          /* never freed: the one leak of this program */
    memset(p, 1, 4096);
    keep = p;
    keep = NULL;
}

int main(void) {
    ANeuralNetworksModel* m = NULL;
    if (ANeuralNetworksModel_create(&m) != ANEURALNETWORKS_NO_ERROR) return 3;
    ANeuralNetworksModel_free(m);
    leak_on_purpose();
    puts("done");
    fflush(stdout);
    return 0;
}
"""


@needs_lib
def test_a_clients_own_leak_is_still_reported():
    OUT.mkdir(parents=True, exist_ok=True)
    src = OUT / "leaker.c"
    src.write_text(LEAKER)
    p = run([build(src, "leaker.asan", ["-fsanitize=address"])])
    assert p.returncode != 0 and "done" in p.stdout, p.stdout + p.stderr
    assert "ERROR: LeakSanitizer: detected memory leaks" in p.stderr, p.stderr[-3000:]
    assert "leak_on_purpose" in p.stderr, p.stderr[-3000:]
    # that leak alone: nothing of the embedded interpreter is reported beside it
    assert "SUMMARY: AddressSanitizer: 4096 byte(s) leaked in 1 allocation(s)." in p.stderr, p.stderr[-3000:]


# ---- valgrind ------------------------------------------------------------------------------------

def _valgrind(exe, env=None):
    vg = _need("valgrind")
    p = run([vg, "--error-exitcode=1", "--leak-check=full", f"--suppressions={suppressions('valgrind')}", exe],
            env)
    assert p.returncode == 0, f"valgrind: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-8000:]}"
    assert "ERROR SUMMARY: 0 errors" in p.stderr and "definitely lost: 0 bytes" in p.stderr or \
        "All heap blocks were freed" in p.stderr, p.stderr[-4000:]
    return p


@needs_lib
def test_valgrind_demo():
    _valgrind(build(EXAMPLES / "demo.c", "demo.plain", []))


@needs_lib
def test_valgrind_threaded_build_stress():
    p = _valgrind(build(CTESTS / "test_build_stress.c", "test_build_stress.plain", []),
                  {"NNPY_STRESS_THREADS": "4", "NNPY_STRESS_BUILDS": "4"})
    assert "checked 16 of 16 models" in p.stdout, p.stdout


# ---- ThreadSanitizer -----------------------------------------------------------------------------

@needs_lib
@pytest.mark.parametrize("src, summary", [("examples/demo.c", False), ("ctests/test_threads.c", True)])
def test_tsan_client(src, summary):
    exe = build(ROOT / src, os.path.basename(src)[:-2] + ".tsan", ["-fsanitize=thread"])
    p = run([exe], {"TSAN_OPTIONS": f"suppressions={suppressions('tsan')}"})
    assert_clean(p, f"{src} under TSan", summary=summary)


@pytest.fixture(scope="module")
def tsan_lib():
    """The library's own C layer built with -fsanitize=thread (build/sanitize/tsan)."""
    out = OUT / "tsan"
    lib = out / "libneuralnetworks.so"
    inputs = [ROOT / "build_ffi.py", INCLUDE / "android" / "NeuralNetworks.h", INCLUDE / "nnapi_py.h",
              INCLUDE / "NeuralNetworksSupportLibraryImpl.h"]
    if not lib.exists() or lib.stat().st_mtime < max(f.stat().st_mtime for f in inputs):
        p = subprocess.run([sys.executable, str(ROOT / "build_ffi.py"), "--out", str(out), "--tmp",
                            str(OUT / "tsan-ffi"), "--no-levels", "--sanitize", "thread"],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr
    return out


@needs_lib
@pytest.mark.parametrize("name, env", [
    ("test_threads", {}),
    ("test_build_stress", {"NNPY_STRESS_THREADS": "8", "NNPY_STRESS_BUILDS": "100"}),
])
def test_tsan_c_layer_c_host(tsan_lib, name, env):
    exe = build(CTESTS / f"{name}.c", f"{name}.tsan-lib", ["-fsanitize=thread"], libdir=tsan_lib)
    assert_clean(run([exe], env), f"{name} against the TSan build of the C layer")


@needs_lib
def test_tsan_c_layer_python_host(tsan_lib):
    """The stress client (ctypes) in a Python process with libtsan preloaded."""
    libtsan = subprocess.run(["gcc", "-print-file-name=libtsan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(libtsan):
        pytest.skip("gcc's libtsan.so was not found")
    python = os.path.realpath(sys.executable)      # the interpreter binary itself, not a venv shim
    p = run([python, ROOT / "tests" / "stress_build_client.py", tsan_lib / "libneuralnetworks.so", "8", "50"],
            {"LD_PRELOAD": libtsan})
    assert_clean(p, "the stress client in a Python host against the TSan build")
