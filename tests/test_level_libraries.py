"""The per-feature-level libraries (build/lib/feature-level-N/libneuralnetworks.so, N = 1..8).

Each exports exactly the ANeuralNetworks* functions of feature levels <= N (levels 6..8: level
5's set), as the header's per-prototype "FLn (API m)" notes say (cross-checked with
../shared/reference/api_functions.md where present), plus nnapi_py_last_error(_code) and, from
level 5, ANeuralNetworks_getSLDriverImpl (the Support Library table), under
the same SONAME, and behaves as level N without NNAPI_PY_FEATURE_LEVEL.  The dlsym-driven
client ctests/test_feature_levels.c (TFLite's NNAPI delegate's way of finding the Android
release) takes its level's code path against each of them, all eight at once in separate
processes.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_ctests import CTESTS, LIBDIR, ROOT, SUMMARY_RE, compile_ctest

LEVELS = range(1, 9)
HEADER = ROOT / "include" / "android" / "NeuralNetworks.h"
API_DOC = ROOT.parent / "shared" / "reference" / "api_functions.md"


def level_lib(n):
    return LIBDIR / f"feature-level-{n}" / "libneuralnetworks.so"


needs_level_libs = pytest.mark.skipif(not all(level_lib(n).exists() for n in LEVELS),
                                      reason="build/lib/feature-level-N not built (run `make lib`)")


def documented_levels():
    """{function: feature level} from the header's notes ("/* FL3 (API 29): ..." above each
    prototype)."""
    text = HEADER.read_text()
    found = re.findall(r"^/\* FL(\d) \(API (\d+)\)[^\n]*\n[\w ]+?\b(ANeuralNetworks\w+)\(", text, re.M)
    levels = {name: int(fl) for fl, api, name in found}
    assert all(int(api) == 26 + int(fl) for fl, api, _ in found)
    assert len(levels) == 69
    return levels


def expected_exports(n):
    return {f for f, lv in documented_levels().items() if lv <= min(n, 5)}


def exported_functions(path):
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.split()[1:2] == ["T"]}


@pytest.mark.skipif(not API_DOC.exists(), reason="../shared/reference absent")
def test_header_levels_match_the_reference():
    doc = dict((name, int(fl)) for fl, name in re.findall(
        r"^\| (\d) \| \d+ \| \[(ANeuralNetworks\w+)\]", API_DOC.read_text(), re.M))
    assert doc == documented_levels()


def test_level_counts():
    # 23 at level 1, +1 at 2, +19 at 3, +19 at 4, +7 at 5, none after (api_functions.md)
    assert [len(expected_exports(n)) for n in LEVELS] == [23, 24, 43, 62, 69, 69, 69, 69]


@needs_level_libs
@pytest.mark.parametrize("n", LEVELS)
def test_exports_exactly_the_level(n):
    got = exported_functions(level_lib(n))
    want = expected_exports(n) | {"nnapi_py_last_error", "nnapi_py_last_error_code"}
    if n >= 5:      # the Support Library table (levels 1..4 have none)
        want.add("ANeuralNetworks_getSLDriverImpl")
    assert got == want, f"missing {sorted(want - got)}, extra {sorted(got - want)}"
    soname = subprocess.run(["readelf", "-d", str(level_lib(n))], capture_output=True, text=True).stdout
    assert "Library soname: [libneuralnetworks.so]" in soname


def _run_client(exe, n, path=None, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NNAPI_PY_")}
    env.update(env_extra or {})
    args = [str(exe), str(n)]
    if path is None:
        env["LD_LIBRARY_PATH"] = str(level_lib(n).parent)       # dlopen by bare name
    else:
        args.append(str(path))
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _passed(proc):
    out, err = proc.communicate(timeout=120)
    last = out.strip().splitlines()[-1] if out.strip() else ""
    m = SUMMARY_RE.match(last)
    assert proc.returncode == 0 and m and m.group(2) == "0", f"exit {proc.returncode}\n{out}\n{err}"
    assert err == "", err
    return out


@needs_level_libs
def test_dlsym_client_takes_each_levels_path_all_at_once():
    """Eight processes at once, each with its level's library found by bare name."""
    exe = compile_ctest("test_feature_levels")
    procs = {n: _run_client(exe, n) for n in LEVELS}
    for n, p in procs.items():
        out = _passed(p)
        assert f"{len(expected_exports(n))} of 69 functions exported: feature level {n}" in out


@needs_level_libs
def test_default_library_and_the_variable():
    exe = compile_ctest("test_feature_levels")
    _passed(_run_client(exe, 8, LIBDIR / "libneuralnetworks.so"))
    # the variable lowers a level library's level; it cannot raise it past its exports
    _passed(_run_client(exe, 6, level_lib(7), {"NNAPI_PY_FEATURE_LEVEL": "6"}))
    _passed(_run_client(exe, 3, level_lib(3), {"NNAPI_PY_FEATURE_LEVEL": "8"}))


@needs_level_libs
@pytest.mark.parametrize("n", [2, 6])
def test_level_library_in_a_python_process(n, tmp_path):
    """Loaded with ctypes into a Python process: devices and getRuntimeFeatureLevel report N
    (level 2: a level-3 operand type is refused; no device query exists there)."""
    code = f"""
import ctypes
lib = ctypes.CDLL({str(level_lib(n))!r})
assert hasattr(lib, "ANeuralNetworksExecution_setReusable") == ({n} >= 5)
m = ctypes.c_void_p()
assert lib.ANeuralNetworksModel_create(ctypes.byref(m)) == 0
from nnapi_py import devices
assert devices.CONFIG.level == {n}, devices.CONFIG.level
if {n} >= 5:
    lib.ANeuralNetworks_getRuntimeFeatureLevel.restype = ctypes.c_int64
    assert lib.ANeuralNetworks_getRuntimeFeatureLevel() == 1000006
    d = ctypes.c_void_p(); fl = ctypes.c_int64()
    assert lib.ANeuralNetworks_getDevice(0, ctypes.byref(d)) == 0
    assert lib.ANeuralNetworksDevice_getFeatureLevel(d, ctypes.byref(fl)) == 0 and fl.value == 1000006
else:
    class T(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int32), ("n", ctypes.c_uint32), ("d", ctypes.c_void_p),
                    ("scale", ctypes.c_float), ("zp", ctypes.c_int32)]
    dims = (ctypes.c_uint32 * 1)(4)
    assert lib.ANeuralNetworksModel_addOperand(m, ctypes.byref(T(3, 1, ctypes.addressof(dims), 0, 0))) == 0
    assert lib.ANeuralNetworksModel_addOperand(m, ctypes.byref(T(8, 1, ctypes.addressof(dims), 0, 0))) == 4
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NNAPI_PY_")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


@needs_level_libs
def test_library_path_and_cli():
    import nnapi_py
    for n in LEVELS:
        assert Path(nnapi_py.library_path(feature_level=n)) == level_lib(n)
    assert Path(nnapi_py.library_path(feature_level=30)) == level_lib(4)      # Android API level
    with pytest.raises(ValueError):
        nnapi_py.library_path(feature_level=9)
    r = subprocess.run([sys.executable, "-m", "nnapi_py", "--libs", "--feature-level", "3"],
                       capture_output=True, text=True)
    d = level_lib(3).parent
    assert r.returncode == 0 and r.stdout.split() == [f"-L{d}", f"-Wl,-rpath,{d}", "-lneuralnetworks"]
    r = subprocess.run([sys.executable, "-m", "nnapi_py", "--libdir", "--feature-level", "9"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "expected 1..8" in r.stderr


@needs_level_libs
def test_c_program_links_against_a_level_library(tmp_path):
    """Linked (not dlopen'ed) against feature-level-4 with the CLI's flags: the level-4 code path."""
    flags = subprocess.run([sys.executable, "-m", "nnapi_py", "--cflags", "--libs", "--feature-level", "4"],
                           capture_output=True, text=True, check=True).stdout.split()
    exe = tmp_path / "linked"
    src = tmp_path / "linked.c"
    src.write_text((CTESTS / "test_feature_levels.c").read_text().replace(
        '"libneuralnetworks.so"', 'NULL'))     # dlopen(NULL): the symbols the program was linked with
    subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{CTESTS}", str(src), "-o", str(exe),
                    "-Wl,--no-as-needed"] + flags + ["-ldl", "-lpthread"], check=True)
    out = _passed(_run_client(exe, 4, None))
    assert "62 of 69 functions exported: feature level 4" in out
