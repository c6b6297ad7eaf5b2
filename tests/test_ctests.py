"""Drive the C API contract tests in ctests/ against build/lib/libneuralnetworks.so.

Every ctests/*.c program is compiled into build/ctests/ with
    cc -std=c11 -Wall -Wextra -Werror -Iinclude <src> -Lbuild/lib -lneuralnetworks
       -Wl,-rpath,<root>/build/lib -lpthread -ldl -lm
(test_dlopen.c without -lneuralnetworks), run with a timeout, and must exit 0 with a
last line "N passed, 0 failed".  On failure the program's whole output is shown.

Besides the C programs this file checks the loading modes (dlopen by bare name, from
another working directory, ctypes + cffi inside one Python process), forced
initialisation failure, the exported symbol set and SONAME, and that the public headers
compile as C99 -pedantic and as C++11.

Everything needing the library is skipped (with a message) if it has not been built.
"""
import os
import re
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CTESTS = ROOT / "ctests"
LIBDIR = ROOT / "build" / "lib"
LIB = LIBDIR / "libneuralnetworks.so"
OUTDIR = ROOT / "build" / "ctests"
INCLUDE = ROOT / "include"
CC = os.environ.get("CC", "cc")
CXX = os.environ.get("CXX", "g++")

RUN_TIMEOUT = 60
EXIT_INFLIGHT_TIMEOUT = 20
SUMMARY_RE = re.compile(r"^(\d+) passed, (\d+) failed$")

needs_lib = pytest.mark.skipif(
    not LIB.exists(), reason=f"{LIB} has not been built (run `make lib` first)")


def _cflags():
    return ["-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", f"-I{CTESTS}"]


def _link_flags(link_lib=True):
    flags = []
    if link_lib:
        flags += [f"-L{LIBDIR}", "-lneuralnetworks", f"-Wl,-rpath,{LIBDIR}"]
    return flags + ["-lpthread", "-ldl", "-lm"]


_compiled = {}


def compile_ctest(name):
    """Compile ctests/<name>.c into build/ctests/<name> once per session."""
    if name in _compiled:
        return _compiled[name]
    src = CTESTS / f"{name}.c"
    out = OUTDIR / name
    OUTDIR.mkdir(parents=True, exist_ok=True)
    cmd = [CC] + _cflags() + ["-o", str(out), str(src)] + _link_flags(name != "test_dlopen")
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"compilation failed: {' '.join(cmd)}\n{proc.stdout}{proc.stderr}", pytrace=False)
    _compiled[name] = out
    return out


def _describe(proc_rc, stdout, stderr, cmd, extra=""):
    how = f"exit status {proc_rc}"
    if proc_rc is not None and proc_rc < 0:
        how = f"killed by signal {-proc_rc}"
    return (f"$ {' '.join(map(str, cmd))}\n{how}{extra}\n"
            f"----- stdout -----\n{stdout}\n----- stderr -----\n{stderr}")


def run_program(cmd, timeout=RUN_TIMEOUT, env=None, cwd=ROOT):
    """Run, returning (returncode, stdout, stderr); fails the test on timeout."""
    full_env = dict(os.environ)
    full_env.pop("NNAPI_PY_FORCE_INIT_FAILURE", None)
    if env:
        full_env.update(env)
    try:
        proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=full_env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        pytest.fail(_describe(None, out, err, cmd, f" -- TIMEOUT after {timeout} s"), pytrace=False)
    return proc.returncode, proc.stdout, proc.stderr


def assert_all_passed(cmd, rc, stdout, stderr):
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    m = SUMMARY_RE.match(last)
    ok = rc == 0 and m is not None and int(m.group(2)) == 0
    if not ok:
        failures = [ln for ln in stdout.splitlines() if ln.startswith(("FAIL", "CRASH", "HANG"))]
        head = f"{len(failures)} failing checks" if failures else "no summary line"
        pytest.fail(f"{head}; summary: {last!r}\n" + _describe(rc, stdout, stderr, cmd), pytrace=False)
    return int(m.group(1))


# ---------------------------------------------------------------------------------------
# The C programs
# ---------------------------------------------------------------------------------------

@needs_lib
@pytest.mark.parametrize("name", ["test_validation", "test_api", "test_threads", "test_first_call", "test_lifetimes",
                                  "test_constant_fold"])
def test_c_program(name):
    exe = compile_ctest(name)
    rc, out, err = run_program([exe])
    assert_all_passed([exe], rc, out, err)


@needs_lib
@pytest.mark.parametrize("strict", ["", "1"], ids=["default", "strict"])
def test_c_android_rejects(strict):
    """What Android 14 rejects and we used to accept (issue 23): the same in both modes."""
    exe = compile_ctest("test_android_rejects")
    rc, out, err = run_program([exe], env={"NNAPI_PY_STRICT": strict})
    assert_all_passed([exe], rc, out, err)


@needs_lib
@pytest.mark.parametrize("strict", ["0", "1"])
def test_c_program_deferred_checks(strict):
    """Where each rule fails, as in Android 14 (addOperation / compute / Compilation_finish),
    and at the earliest call under NNAPI_PY_STRICT=1 (ctests/test_deferred.c)."""
    exe = compile_ctest("test_deferred")
    rc, out, err = run_program([exe], env={"NNAPI_PY_STRICT": strict})
    assert_all_passed([exe], rc, out, err)


@needs_lib
def test_c_host_threads_stay_quiet_and_release_fds():
    """numpy warnings from computations on several C threads never reach stderr; an fd used by
    an asynchronous computation is closed once everything is freed."""
    exe = compile_ctest("test_quiet_threads")
    rc, out, err = run_program([exe])
    assert_all_passed([exe], rc, out, err)
    assert err == "", f"stderr must stay empty, got:\n{err}"


DEVICES_CASES = [
    (["list"], {"NNAPI_PY_DEVICES": "gpu=float-fast:GPU:5,npu=quant:ACCELERATOR:4"}),
    (["fallback"], {"NNAPI_PY_DEVICES": "gpu=float-fast", "NNAPI_PY_FAULTS": "gpu:execute-fail"}),
] + [(["fault", kind, str(code)], {"NNAPI_PY_DEVICES": "gpu=float-fast", "NNAPI_PY_FAULTS": f"gpu:{kind}@every=2"})
     for kind, code in (("compile-fail", 5), ("execute-fail", 5), ("timeout", 10), ("deadline", 11),
                        ("busy", 12), ("dead", 14))
] + [(["level", str(n)], {"NNAPI_PY_FEATURE_LEVEL": str(n)}) for n in range(1, 9)]


@needs_lib
@pytest.mark.parametrize("args, env", DEVICES_CASES, ids=["-".join(a[:2]) for a, _ in DEVICES_CASES])
def test_devices_faults_and_levels(args, env):
    """Virtual devices, every fault kind and every feature level, seen by a C client."""
    exe = compile_ctest("test_devices")
    rc, out, err = run_program([exe] + args, env=env)
    assert_all_passed([exe] + args, rc, out, err)
    assert err == ""


@needs_lib
@pytest.mark.parametrize("lib", ["default", "feature-level-3"])
@pytest.mark.parametrize("where", ["gpu", "cpu"])
def test_fp16_numerics_from_c(where, lib):
    """ADD(2048, 1) relaxed: 2048 on a device with fp16 numerics, 2049 without relax or on the
    default CPU device; the same through the feature-level-3 library (LD_LIBRARY_PATH)."""
    exe = compile_ctest("test_fp16")
    env = {"NNAPI_PY_DEVICES": "gpu=float-fast:fp16"} if where == "gpu" else {}
    if lib != "default":
        if not (LIBDIR / lib / "libneuralnetworks.so").exists():
            pytest.skip(f"build/lib/{lib} not built")
        env["LD_LIBRARY_PATH"] = str(LIBDIR / lib)
    rc, out, err = run_program([exe, where], env=env)
    assert_all_passed([exe, where], rc, out, err)
    assert err == ""


@needs_lib
@pytest.mark.parametrize("mode", ["return", "exit"])
def test_exit_with_computations_in_flight(mode):
    exe = compile_ctest("test_exit_inflight")
    cmd = [exe] + (["exit"] if mode == "exit" else [])
    rc, out, err = run_program(cmd, timeout=EXIT_INFLIGHT_TIMEOUT)
    assert rc >= 0, "crashed:\n" + _describe(rc, out, err, cmd)
    assert_all_passed(cmd, rc, out, err)


# ---------------------------------------------------------------------------------------
# Loading modes
# ---------------------------------------------------------------------------------------

@needs_lib
@pytest.mark.parametrize("where", ["repo", "tmp"])
def test_dlopen_bare_name(where, tmp_path):
    """(a) dlopen("libneuralnetworks.so") by bare name via LD_LIBRARY_PATH; (b) from another cwd."""
    exe = compile_ctest("test_dlopen")
    cwd = ROOT if where == "repo" else tmp_path
    rc, out, err = run_program([exe], env={"LD_LIBRARY_PATH": str(LIBDIR)}, cwd=cwd)
    assert_all_passed([exe], rc, out, err)


@needs_lib
def test_dlopen_then_dlclose(tmp_path):
    """The library may be dlclose()d after use without crashing the process at exit."""
    exe = compile_ctest("test_dlopen")
    cmd = [exe, "--dlclose"]
    rc, out, err = run_program(cmd, env={"LD_LIBRARY_PATH": str(LIBDIR)}, cwd=tmp_path)
    assert_all_passed(cmd, rc, out, err)


PY_LOADER = textwrap.dedent(r'''
    import ctypes, sys

    LIB = sys.argv[1]
    NO_ERROR = 0

    class OperandType(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int32), ("dimensionCount", ctypes.c_uint32),
                    ("dimensions", ctypes.POINTER(ctypes.c_uint32)), ("scale", ctypes.c_float),
                    ("zeroPoint", ctypes.c_int32)]

    def check(rc, what):
        if rc != NO_ERROR:
            raise SystemExit(f"{what} returned {rc}")

    # (c) ctypes with the full path
    L = ctypes.CDLL(LIB)
    vp = ctypes.c_void_p
    for name in ("ANeuralNetworksModel_free", "ANeuralNetworksCompilation_free", "ANeuralNetworksExecution_free"):
        getattr(L, name).restype = None
        getattr(L, name).argtypes = [vp]
    model = vp()
    check(L.ANeuralNetworksModel_create(ctypes.byref(model)), "Model_create")
    dims = (ctypes.c_uint32 * 1)(3)
    tf = OperandType(3, 1, dims, 0.0, 0)
    ti = OperandType(1, 0, None, 0.0, 0)
    for t in (tf, tf, ti, tf):
        check(L.ANeuralNetworksModel_addOperand(model, ctypes.byref(t)), "addOperand")
    none = ctypes.c_int32(0)
    check(L.ANeuralNetworksModel_setOperandValue(model, 2, ctypes.byref(none), ctypes.c_size_t(4)), "setOperandValue")
    ins = (ctypes.c_uint32 * 3)(0, 1, 2)
    outs = (ctypes.c_uint32 * 1)(3)
    check(L.ANeuralNetworksModel_addOperation(model, 0, 3, ins, 1, outs), "addOperation")
    check(L.ANeuralNetworksModel_identifyInputsAndOutputs(model, 2, ins, 1, outs), "identify")
    check(L.ANeuralNetworksModel_finish(model), "Model_finish")
    comp = vp()
    check(L.ANeuralNetworksCompilation_create(model, ctypes.byref(comp)), "Compilation_create")
    check(L.ANeuralNetworksCompilation_finish(comp), "Compilation_finish")
    a = (ctypes.c_float * 3)(1, 2, 3)
    b = (ctypes.c_float * 3)(10, 20, 30)
    o = (ctypes.c_float * 3)()
    ex = vp()
    check(L.ANeuralNetworksExecution_create(comp, ctypes.byref(ex)), "Execution_create")
    check(L.ANeuralNetworksExecution_setInput(ex, 0, None, a, ctypes.c_size_t(12)), "setInput 0")
    check(L.ANeuralNetworksExecution_setInput(ex, 1, None, b, ctypes.c_size_t(12)), "setInput 1")
    check(L.ANeuralNetworksExecution_setOutput(ex, 0, None, o, ctypes.c_size_t(12)), "setOutput")
    check(L.ANeuralNetworksExecution_compute(ex), "compute")
    if list(o) != [11.0, 22.0, 33.0]:
        raise SystemExit(f"ctypes: wrong result {list(o)}")
    L.ANeuralNetworksExecution_free(ex)
    L.ANeuralNetworksCompilation_free(comp)
    L.ANeuralNetworksModel_free(model)
    print("ctypes: OK")

    # the library must run inside THIS interpreter (no second one)
    mods = sorted(m for m in sys.modules if m == "nnapi_py" or m.startswith("nnapi_py."))
    print("nnapi_py modules in this interpreter:", mods)
    if not mods:
        raise SystemExit("the library did not import its runtime into the running interpreter")

    # (d) cffi, by bare name (LD_LIBRARY_PATH), in the same process
    import cffi
    ffi = cffi.FFI()
    ffi.cdef("""
        typedef struct { int32_t type; uint32_t dimensionCount; const uint32_t* dimensions;
                         float scale; int32_t zeroPoint; } ANeuralNetworksOperandType;
        int ANeuralNetworksModel_create(void** model);
        int ANeuralNetworksModel_addOperand(void* model, const ANeuralNetworksOperandType* type);
        int ANeuralNetworksModel_setOperandValue(void* model, int32_t index, const void* buffer, size_t length);
        int ANeuralNetworksModel_addOperation(void* model, int32_t type, uint32_t inputCount,
                                              const uint32_t* inputs, uint32_t outputCount, const uint32_t* outputs);
        int ANeuralNetworksModel_identifyInputsAndOutputs(void* model, uint32_t inputCount, const uint32_t* inputs,
                                                          uint32_t outputCount, const uint32_t* outputs);
        int ANeuralNetworksModel_finish(void* model);
        void ANeuralNetworksModel_free(void* model);
        int ANeuralNetworksCompilation_create(void* model, void** compilation);
        int ANeuralNetworksCompilation_finish(void* compilation);
        void ANeuralNetworksCompilation_free(void* compilation);
        int ANeuralNetworksExecution_create(void* compilation, void** execution);
        int ANeuralNetworksExecution_setInput(void* e, int32_t index, const void* type, const void* buffer, size_t length);
        int ANeuralNetworksExecution_setOutput(void* e, int32_t index, const void* type, void* buffer, size_t length);
        int ANeuralNetworksExecution_startCompute(void* e, void** event);
        int ANeuralNetworksEvent_wait(void* event);
        void ANeuralNetworksEvent_free(void* event);
        void ANeuralNetworksExecution_free(void* e);
    """)
    C = ffi.dlopen("libneuralnetworks.so")
    pm = ffi.new("void**")
    check(C.ANeuralNetworksModel_create(pm), "cffi Model_create")
    m = pm[0]
    d = ffi.new("uint32_t[1]", [2])
    t_f = ffi.new("ANeuralNetworksOperandType*", {"type": 3, "dimensionCount": 1, "dimensions": d})
    t_i = ffi.new("ANeuralNetworksOperandType*", {"type": 1})
    for t in (t_f, t_f, t_i, t_f):
        check(C.ANeuralNetworksModel_addOperand(m, t), "cffi addOperand")
    fuse = ffi.new("int32_t*", 0)
    check(C.ANeuralNetworksModel_setOperandValue(m, 2, fuse, 4), "cffi setOperandValue")
    ins = ffi.new("uint32_t[3]", [0, 1, 2])
    outs = ffi.new("uint32_t[1]", [3])
    check(C.ANeuralNetworksModel_addOperation(m, 0, 3, ins, 1, outs), "cffi addOperation")  # 0 = ADD
    check(C.ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, ins, 1, outs), "cffi identify")
    check(C.ANeuralNetworksModel_finish(m), "cffi Model_finish")
    pc = ffi.new("void**")
    check(C.ANeuralNetworksCompilation_create(m, pc), "cffi Compilation_create")
    check(C.ANeuralNetworksCompilation_finish(pc[0]), "cffi Compilation_finish")
    a = ffi.new("float[2]", [1.5, 2.5])
    b = ffi.new("float[2]", [0.5, -0.5])
    o = ffi.new("float[2]")
    pe = ffi.new("void**")
    check(C.ANeuralNetworksExecution_create(pc[0], pe), "cffi Execution_create")
    check(C.ANeuralNetworksExecution_setInput(pe[0], 0, ffi.NULL, a, 8), "cffi setInput 0")
    check(C.ANeuralNetworksExecution_setInput(pe[0], 1, ffi.NULL, b, 8), "cffi setInput 1")
    check(C.ANeuralNetworksExecution_setOutput(pe[0], 0, ffi.NULL, o, 8), "cffi setOutput")
    pev = ffi.new("void**")
    check(C.ANeuralNetworksExecution_startCompute(pe[0], pev), "cffi startCompute")
    check(C.ANeuralNetworksEvent_wait(pev[0]), "cffi Event_wait")
    if list(o) != [2.0, 2.0]:
        raise SystemExit(f"cffi: wrong result {list(o)}")
    C.ANeuralNetworksEvent_free(pev[0])
    C.ANeuralNetworksExecution_free(pe[0])
    C.ANeuralNetworksCompilation_free(pc[0])
    C.ANeuralNetworksModel_free(m)
    print("cffi: OK")
''')


@needs_lib
def test_python_ctypes_then_cffi(tmp_path):
    """(c) ctypes.CDLL(full path) and (d) cffi ffi.dlopen(bare name) in one Python process."""
    script = tmp_path / "load_in_python.py"
    script.write_text(PY_LOADER)
    cmd = [sys.executable, str(script), str(LIB)]
    rc, out, err = run_program(cmd, env={"LD_LIBRARY_PATH": str(LIBDIR)}, cwd=tmp_path)
    assert rc == 0 and "ctypes: OK" in out and "cffi: OK" in out, _describe(rc, out, err, cmd)


@needs_lib
def test_forced_initialisation_failure():
    """(e) NNAPI_PY_FORCE_INIT_FAILURE=1: every call OP_FAILED, frees harmless, one stderr line."""
    exe = compile_ctest("test_init_failure")
    rc, out, err = run_program([exe], env={"NNAPI_PY_FORCE_INIT_FAILURE": "1"})
    assert_all_passed([exe], rc, out, err)
    tagged = [ln for ln in err.splitlines() if ln.startswith("nnapi_py:")]
    assert len(tagged) == 1, ("stderr must contain exactly one line starting with 'nnapi_py:'\n"
                              + _describe(rc, out, err, [exe]))


@needs_lib
def test_pythonhome_without_a_standard_library_is_refused():
    """A PYTHONHOME holding no standard library of our Python version would make CPython's start-up
    abort the client: the library refuses it instead (every call OP_FAILED, one stderr line)."""
    exe = compile_ctest("test_init_failure")
    rc, out, err = run_program([exe], env={"PYTHONHOME": "/nonexistent-python-home"})
    assert_all_passed([exe], rc, out, err)
    tagged = [ln for ln in err.splitlines() if ln.startswith("nnapi_py:")]
    assert len(tagged) == 1 and "PYTHONHOME=/nonexistent-python-home holds no Python" in tagged[0], \
        _describe(rc, out, err, [exe])


@needs_lib
@pytest.mark.parametrize("name", ["test_first_call", "test_api"])
def test_clean_environment(name):
    """A CI job with a clean environment (`env -i PATH=/usr/bin:/bin`): the embedded interpreter
    still finds the standard library of the Python the library was built with, not the system's."""
    exe = compile_ctest(name)
    cmd = ["env", "-i", "PATH=/usr/bin:/bin", str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd="/")
    assert_all_passed(cmd, proc.returncode, proc.stdout, proc.stderr)
    assert "runtime unavailable" not in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------------
# Exported symbols and SONAME
# ---------------------------------------------------------------------------------------

def _api_function_names():
    text = (CTESTS / "nnapi_functions.h").read_text()
    names = re.findall(r"^\s*X\((ANeuralNetworks\w+)\)", text, re.M)
    assert len(names) == 69 and len(set(names)) == 69
    return set(names)


def _tool(name):
    path = shutil.which(name)
    if not path:
        pytest.skip(f"{name} not available")
    return path


@needs_lib
def test_exported_symbols():
    """(f) exactly the 69 ANeuralNetworks* functions + ANeuralNetworks_getSLDriverImpl (the Support
    Library table) + nnapi_py_* (data / PyInit_ tolerated)."""
    proc = subprocess.run([_tool("nm"), "-D", "--defined-only", str(LIB)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    functions, data = set(), set()
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        kind, name = parts[-2], parts[-1].split("@")[0]
        (functions if kind in ("T", "t", "W", "i") else data).add(name)
    expected = _api_function_names() | {"ANeuralNetworks_getSLDriverImpl"}
    api = {n for n in functions if n.startswith("ANeuralNetworks")}
    missing = sorted(expected - api)
    unexpected_api = sorted(api - expected)
    tolerated = {n for n in functions if n.startswith("PyInit_") or n in ("_init", "_fini")}
    others = sorted(n for n in functions - api - tolerated if not n.startswith("nnapi_py_"))
    if tolerated - {"_init", "_fini"}:
        warnings.warn(f"library exports {sorted(tolerated - {'_init', '_fini'})}")
        print("note: tolerated exported functions:", sorted(tolerated))
    if data:
        print("note: exported data symbols:", sorted(data))
    assert not missing, f"ANeuralNetworks* functions not exported: {missing}"
    assert not unexpected_api, f"unknown ANeuralNetworks* functions exported: {unexpected_api}"
    assert not others, f"other exported functions (must be ANeuralNetworks* or nnapi_py_*): {others}"


@needs_lib
def test_soname():
    proc = subprocess.run([_tool("readelf"), "-d", str(LIB)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    sonames = re.findall(r"\(SONAME\).*\[(.*)\]", proc.stdout)
    assert sonames == ["libneuralnetworks.so"], proc.stdout


# ---------------------------------------------------------------------------------------
# Headers
# ---------------------------------------------------------------------------------------

HEADER_TU = textwrap.dedent("""
    #include <android/NeuralNetworks.h>
    #include <NeuralNetworks.h>
    #include <android/NeuralNetworks.h>
    %(extra)s
    static int use_header(void) {
        ANeuralNetworksOperandType t = {ANEURALNETWORKS_TENSOR_FLOAT32, 0, 0, 0.0f, 0};
        ANeuralNetworksSymmPerChannelQuantParams p = {0, 0, 0};
        int (*create)(ANeuralNetworksModel**) = ANeuralNetworksModel_create;
        uint64_t (*loop)(void) = ANeuralNetworks_getDefaultLoopTimeout;
        int64_t (*level)(void) = ANeuralNetworks_getRuntimeFeatureLevel;
        (void)p; (void)create; (void)loop; (void)level;
        return t.type + ANEURALNETWORKS_ADD + ANEURALNETWORKS_FEATURE_LEVEL_8 +
               ANEURALNETWORKS_MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES + ANEURALNETWORKS_PRIORITY_DEFAULT;
    }
    int main(void) { return use_header() == 0; }
""")


SL_TU = """
    #include <NeuralNetworksSupportLibraryImpl.h>
    static int use_sl(void) {
        NnApiSLDriverImpl* (*get)(void) = ANeuralNetworks_getSLDriverImpl;
        NnApiSLDriverImplFL8 t8;
        NnApiSLDriverImplFL7* t7 = &t8.base;
        SL_ANeuralNetworksOperandPerformanceInfo p = {ANEURALNETWORKS_TENSOR_FLOAT32, {1.0f, 1.0f}};
        t8.base.base.implFeatureLevel = ANEURALNETWORKS_FEATURE_LEVEL_8;
        t7->ANeuralNetworksCompilation_finish = ANeuralNetworksCompilation_finish;
        (void)get;
        return (int)sizeof(t8) + p.operandType + ANNDIAG_DATA_CLASS_MIXED + ANNDIAG_EXECUTION_MODE_ASYNC_WITH_DEPS;
    }
    int sl_used(void);
    int sl_used(void) { return use_sl(); }
"""


def test_headers_compile_as_c99_pedantic_and_cxx11(tmp_path):
    extra = "#include <nnapi_py.h>" if (INCLUDE / "nnapi_py.h").exists() else ""
    if (INCLUDE / "NeuralNetworksSupportLibraryImpl.h").exists():
        extra += textwrap.dedent(SL_TU)
    src = HEADER_TU % {"extra": extra}
    c_src = tmp_path / "hdr.c"
    cpp_src = tmp_path / "hdr.cpp"
    c_src.write_text(src)
    cpp_src.write_text(src)
    cmds = [
        [CC, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", "-fsyntax-only", str(c_src)],
        [CXX, "-std=c++11", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", "-fsyntax-only", str(cpp_src)],
    ]
    errors = []
    for cmd in cmds:
        if not shutil.which(cmd[0]):
            pytest.skip(f"{cmd[0]} not available")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            errors.append(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    assert not errors, "\n".join(errors)


@needs_lib
def test_wrong_python_version_line_shows_the_whole_version():
    """A process running another Python version: OP_FAILED and one line naming both versions,
    the host's in full (ctests/wrong_python.c interposes Py_GetVersion)."""
    OUTDIR.mkdir(parents=True, exist_ok=True)
    out = OUTDIR / "wrong_python"
    cmd = [CC] + _cflags() + ["-rdynamic", "-o", str(out), str(CTESTS / "wrong_python.c")] + _link_flags()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rc, stdout, stderr = run_program([out])
    assert rc == 0 and stdout.strip() == "5", (stdout, stderr)             # OP_FAILED
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert ("but this process runs Python 3.99.1 (main, May  9 2024, 12:34:56) [GCC 12.2.0]); every "
            "ANeuralNetworks* call returns ANEURALNETWORKS_OP_FAILED") in lines[0]
    assert lines[0].startswith("nnapi_py: runtime unavailable (built for Python 3.")
