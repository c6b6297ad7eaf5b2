"""The settings read from the environment at start-up, each in a fresh process (issue 26.8): a
malformed NNAPI_PY_FEATURE_LEVEL / NNAPI_PY_DEVICES / NNAPI_PY_FAULTS is named with its expected
form and ignored while the valid ones still apply; an unknown NNAPI_PY_TRACE value is said once.
Issue 40.6: every NNAPI_PY_* variable the package reads -- the device and fault grammars enforced
(a bare word is no device), NNAPI_PY_MAX_TENSOR_BYTES, NNAPI_PY_STRICT, NNAPI_PY_PROFILE,
NNAPI_PY_DUMP, NNAPI_PY_LIB -- a bad value is one stderr line naming the variable, the value and
the accepted form, once per process, and the documented fallback applies."""
import os
import subprocess
import sys

import pytest

import nnapi_py

try:
    nnapi_py.library_path()
    HAVE_LIB = True
except FileNotFoundError:
    HAVE_LIB = False
pytestmark = pytest.mark.skipif(not HAVE_LIB, reason="library not built (make lib)")

VARS = ("NNAPI_PY_FEATURE_LEVEL", "NNAPI_PY_DEVICES", "NNAPI_PY_FAULTS", "NNAPI_PY_TRACE")
PROBE = ("import nnapi_py as nn\nfrom nnapi_py import devices as D\n"
         "print(nn.feature_level(), nn.device_names(), [f.text() for f in D.CONFIG.faults])\n")


def probe(**env):
    e = {k: v for k, v in os.environ.items() if k not in VARS}
    e.update(env)
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=e, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip(), p.stderr.strip().splitlines()


def test_a_malformed_level_keeps_the_devices_and_faults():
    out, err = probe(NNAPI_PY_FEATURE_LEVEL="abc", NNAPI_PY_DEVICES="gpu=float-fast,npu=quant",
                     NNAPI_PY_FAULTS="gpu:execute-fail@every=2")
    assert out == "1000008 ['gpu', 'npu'] ['gpu:execute-fail@every=2']"
    assert err == ["nnapi_py: ignoring NNAPI_PY_FEATURE_LEVEL='abc': feature level 'abc': expected 1..8 or an "
                   "Android API level 27..35"]


def test_malformed_devices_keep_the_level():
    out, err = probe(NNAPI_PY_FEATURE_LEVEL="3", NNAPI_PY_DEVICES="gpu=bogus")
    assert out == "29 ['nnapi_py-cpu'] []"
    assert len(err) == 1 and err[0].startswith("nnapi_py: ignoring NNAPI_PY_DEVICES='gpu=bogus': ")
    assert "unknown preset 'bogus'" in err[0] and "(expected name=preset[:TYPE][:level]" in err[0]


def test_malformed_faults_keep_the_rest_and_faults_need_a_listed_device():
    out, err = probe(NNAPI_PY_FEATURE_LEVEL="30", NNAPI_PY_DEVICES="gpu=float-fast", NNAPI_PY_FAULTS="gpu:nope")
    assert out == "30 ['gpu'] []"
    assert len(err) == 1 and "ignoring NNAPI_PY_FAULTS='gpu:nope': unknown fault kind 'nope'" in err[0]
    assert "(expected device:kind[=value][@every=K|@from=N];...)" in err[0]
    out, err = probe(NNAPI_PY_FEATURE_LEVEL="4", NNAPI_PY_DEVICES="gpu=bogus", NNAPI_PY_FAULTS="gpu:dead")
    assert out == "30 ['nnapi_py-cpu'] []"
    assert len(err) == 2 and "ignoring NNAPI_PY_FAULTS='gpu:dead': fault gpu:dead names no listed device" in err[1]


def test_valid_settings_say_nothing():
    out, err = probe(NNAPI_PY_FEATURE_LEVEL="5", NNAPI_PY_DEVICES="gpu=float-fast", NNAPI_PY_FAULTS="gpu:dead")
    assert out == "31 ['gpu'] ['gpu:dead']" and err == []


def test_unknown_trace_value_is_said_once():
    out, err = probe(NNAPI_PY_TRACE="verbose")
    assert out.startswith("1000008")
    assert err == ["nnapi_py: ignoring NNAPI_PY_TRACE='verbose': expected errors (or 1), calls, devices or all"]
    for known in ("errors", "1", "calls", "devices", "all", "0"):
        assert not any("ignoring NNAPI_PY_TRACE" in line for line in probe(NNAPI_PY_TRACE=known)[1])


# ---- issue 40, point 6: every NNAPI_PY_* variable ----------------------------------------------------
ALL_VARS = VARS + ("NNAPI_PY_STRICT", "NNAPI_PY_MAX_TENSOR_BYTES", "NNAPI_PY_PROFILE", "NNAPI_PY_DUMP", "NNAPI_PY_LIB")
# read by the C start-up code (build_ffi.py), not by the package: NNAPI_PY_PATH (extra directories
# searched for the package) and NNAPI_PY_FORCE_INIT_FAILURE (anything but empty or 0: fail on purpose)
C_VARS = ("NNAPI_PY_PATH", "NNAPI_PY_FORCE_INIT_FAILURE")
# read by the test helpers (nnapi_py/testing/, a client of the library): where the CTS vectors are and
# where the real-model corpus is cached
TESTING_VARS = ("NNAPI_PY_CTS", "NNAPI_PY_CORPUS")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_py(code, **env):
    e = {k: v for k, v in os.environ.items() if k not in ALL_VARS}
    e.update(env)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)
    return p.returncode, p.stdout.strip(), p.stderr.strip().splitlines()


def test_every_variable_the_package_reads_is_covered_here():
    """A new NNAPI_PY_* setting gets a check for a bad value (and a line in this list)."""
    import re
    found = set()
    for base in ("nnapi_py", "build_ffi.py"):
        path = os.path.join(ROOT, base)
        files = [path] if path.endswith(".py") else [os.path.join(d, f) for d, _, fs in os.walk(path)
                                                      for f in fs if f.endswith(".py")]
        for f in files:
            with open(f) as fh:
                found |= set(re.findall(r"NNAPI_PY_[A-Z_]+[A-Z]", fh.read()))
    known = set(ALL_VARS + C_VARS + TESTING_VARS)
    assert found <= known, sorted(found - known)


@pytest.mark.parametrize("value, said", [
    ("garbage", "device 'garbage' has no '=' (presets: all, cpu, float-fast, float-slow, quant, minimal) (expected "
                "name=preset[:TYPE][:level][:fp16],... or JSON (text, a file, or @file))"),
    ("gpu=float-fast:XPU", "option 'XPU' is none of a device type (UNKNOWN, OTHER, CPU, GPU, ACCELERATOR), a feature "
                           "level (1..8 or 27..35) or fp32 / fp16"),
    ("gpu=float-fast:GPU:CPU", "two type options"),
    ("=all", "a device needs a name"),
    ("gpu=", "unknown preset ''"),
    ("g:pu=all", "the name 'g:pu' has a space or one of"),
    ("gpu=float-fast:99", "feature level 99: expected 1..8 or an Android API level 27..35"),
    ("gpu=all,gpu=quant", "two devices have the same name"),
    ("@/nonexistent/devices.json", "cannot read /nonexistent/devices.json: No such file or directory"),
    ('{"devices": [{"name": "g", "colour": 1}]}', "device 'g': unknown keys ['colour']"),
    ('{"devices": [{"name": "g", "operations": ["ADDD"]}]}', "operations: 'ADDD' is no NNAPI operation"),
    ('{"devices": [{"name": "g", "performance": {"float32": [1]}}]}', "performance 'float32' [1]: expected"),
    ('{"devices": [{"name": "g"', "the text is not valid JSON"),
    ('{"gpus": []}', "unknown keys ['gpus']"),
])
def test_devices_grammar(value, said):
    out, err = probe(NNAPI_PY_DEVICES=value)
    assert out == "1000008 ['nnapi_py-cpu'] []"
    assert len(err) == 1 and err[0].startswith(f"nnapi_py: ignoring NNAPI_PY_DEVICES={value!r}: ") and said in err[0], err


def test_devices_grammar_accepts_the_documented_forms(tmp_path):
    f = tmp_path / "devices.json"
    f.write_text('{"devices": [{"name": "gpu", "preset": "float-fast", "type": "GPU", "feature_level": 30, '
                 '"operations": ["ADD", 1], "performance": {"float32": {"exec_time": 0.5, "power": 1}}, '
                 '"numerics": "fp16"}], "faults": [{"device": "gpu", "kind": "delay", "value": 5, "every": 2}]}')
    for value in (str(f), "@" + str(f), f.read_text()):
        out, err = probe(NNAPI_PY_DEVICES=value)
        assert out == "1000008 ['gpu'] ['gpu:delay=5.0@every=2']" and err == []
    out, err = probe(NNAPI_PY_DEVICES="gpu=float-fast:GPU:5:fp16, npu=quant:accelerator")
    assert out == "1000008 ['gpu', 'npu'] []" and err == []


@pytest.mark.parametrize("value, said", [
    ("zzz", "fault 'zzz' is not device:kind (kinds: compile-fail, execute-fail, timeout, deadline, busy, dead, delay) "
            "(expected device:kind[=value][@every=K|@from=N];...)"),
    ("gpu:", "fault 'gpu:' is not device:kind"),
    ("gpu:dead=5", "only delay takes a value (dead takes none)"),
    ("gpu:delay", "a delay fault needs a value in milliseconds, >= 0 (delay=50)"),
    ("gpu:delay=abc", "a delay fault needs a value in milliseconds"),
    ("gpu:dead@every=x", "@every takes a call count from 1 (got 'x')"),
    ("gpu:dead@from=0", "@from takes a call count from 1 (got '0')"),
    ("gpu:dead@every=2@from=3", "@every and @from together"),
    ("gpu:dead@sometimes", "@sometimes is neither @every=K nor @from=N"),
    ("gpu:dead@every=2@every=3", "@every given twice"),
])
def test_faults_grammar(value, said):
    out, err = probe(NNAPI_PY_DEVICES="gpu=all", NNAPI_PY_FAULTS=value)
    assert out == "1000008 ['gpu'] []"
    assert len(err) == 1 and err[0].startswith(f"nnapi_py: ignoring NNAPI_PY_FAULTS={value!r}: ") and said in err[0], err


MAX = "from nnapi_py.ops import base; print(base.MAX_TENSOR_BYTES)"


def test_max_tensor_bytes():
    rc, default, err = run_py(MAX)
    assert rc == 0 and err == [] and int(default) > 1
    for value in ("abc", "-5", "0", "1.5", "64K"):
        rc, out, err = run_py(MAX, NNAPI_PY_MAX_TENSOR_BYTES=value)
        assert rc == 0 and out == default, (value, out)
        assert err == [f"nnapi_py: ignoring NNAPI_PY_MAX_TENSOR_BYTES={value!r}: expected a number of bytes >= 1 "
                       f"(decimal, or 0x hexadecimal); the default applies (a quarter of physical memory)"]
    for value, n in (("65536", 65536), ("0x10000", 65536), (" 1 ", 1), ("1_000", 1000)):
        assert run_py(MAX, NNAPI_PY_MAX_TENSOR_BYTES=value) == (0, str(n), [])


STRICT = "from nnapi_py import errors; print(errors.strict(), errors.strict())"


def test_strict_flag():
    for value, on in (("1", True), ("true", True), ("YES", True), ("on", True), ("0", False), ("", False),
                      ("no", False), ("off", False)):
        assert run_py(STRICT, NNAPI_PY_STRICT=value) == (0, f"{on} {on}", []), value
    rc, out, err = run_py(STRICT, NNAPI_PY_STRICT="maybe")
    assert out == "False False" and err == ["nnapi_py: ignoring NNAPI_PY_STRICT='maybe': expected 1 or 0 (also "
                                            "true/false, yes/no, on/off); it stays off"]


PROFILED = ("import numpy as np, nnapi_py as nn\nm = nn.Model()\nx = m.input('x', nn.float32, (2,))\n"
            "m.output(m.op('ADD', x, x, 0), 'y')\nm.compile().run({'x': np.ones(2, np.float32)})\nprint('ran')\n")


def test_profile_file(tmp_path):
    rc, out, err = run_py(PROFILED, NNAPI_PY_PROFILE="/nonexistent/dir/x")
    assert rc == 0 and out == "ran"
    assert err[0] == ("nnapi_py: ignoring NNAPI_PY_PROFILE='/nonexistent/dir/x': expected 1 (the report on stderr) or "
                      "a file to write it to (no directory /nonexistent/dir); the report goes to stderr")
    assert "nnapi_py profile (NNAPI_PY_PROFILE):" in err[1:] and sum("ignoring" in e for e in err) == 1
    f = tmp_path / "profile.txt"
    rc, out, err = run_py(PROFILED, NNAPI_PY_PROFILE=str(f))
    assert rc == 0 and err == [] and f.read_text().startswith("nnapi_py profile (NNAPI_PY_PROFILE):")
    for off in ("0", "off", ""):
        assert run_py(PROFILED, NNAPI_PY_PROFILE=off) == (0, "ran", [])
    rc, out, err = run_py(PROFILED, NNAPI_PY_PROFILE=str(tmp_path))
    assert "(it is a directory); the report goes to stderr" in err[0]


def test_dump_directory(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    rc, out, err = run_py(PROFILED, NNAPI_PY_DUMP=str(afile / "sub"))
    assert rc == 0 and out == "ran"
    assert err == [f"nnapi_py: ignoring NNAPI_PY_DUMP='{afile / 'sub'}': expected a directory nnapi_py can create and "
                   f"write ({afile} is not a directory); nothing is dumped"]
    rc, out, err = run_py(PROFILED, NNAPI_PY_DUMP="yes")
    assert err == ["nnapi_py: ignoring NNAPI_PY_DUMP='yes': expected a directory to write the models to "
                   "(NNAPI_PY_DUMP=DIR); nothing is dumped"]
    where = tmp_path / "new" / "dir"
    assert run_py(PROFILED, NNAPI_PY_DUMP=str(where)) == (0, "ran", [])
    assert sorted(p.suffix for p in where.iterdir()) == [".dot", ".json"]
    assert run_py(PROFILED, NNAPI_PY_DUMP="0") == (0, "ran", [])


def test_library_path_setting():
    rc, out, err = run_py("import nnapi_py as nn\nnn.feature_level()", NNAPI_PY_LIB="/nonexistent/libx.so")
    assert rc == 1
    assert err[-1].startswith("OSError: NNAPI_PY_LIB='/nonexistent/libx.so': cannot load it as libneuralnetworks.so (")
    assert "expected the path of a built library (unset it to use " in err[-1]


def test_each_line_is_said_once_per_process():
    """The settings are read again when a feature-level library starts (set_library_level):
    a malformed one is still said once."""
    code = PROBE + "D.set_library_level(7)\nD.set_library_level(6)\nprint(nn.feature_level())\n"
    rc, out, err = run_py(code, NNAPI_PY_DEVICES="garbage", NNAPI_PY_FAULTS="zzz", NNAPI_PY_STRICT="maybe")
    assert rc == 0 and out.splitlines()[-1] == "1000006"       # the settings were read again
    assert len(err) == 3 and len(set(err)) == 3, err


def test_testing_variables_name_what_is_missing(tmp_path):
    """NNAPI_PY_CTS at a directory without vectors: the runner says where it looked; NNAPI_PY_CORPUS at a
    place that cannot be written: the corpus says so (Unavailable, which tests turn into a named skip)."""
    p = subprocess.run([sys.executable, "-m", "nnapi_py.testing.cts", "--ops", "ADD", "--modes", "sync"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "NNAPI_PY_CTS": str(tmp_path / "none")})
    assert f"no CTS vectors at {tmp_path / 'none'}" in p.stdout + p.stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, out, err = run_py("from nnapi_py.testing import corpus\n"
                            "try:\n    corpus.models()\nexcept corpus.Unavailable as e:\n    print('U', e)",
                            NNAPI_PY_CORPUS=str(blocker / "corpus"))
    assert code == 0 and out.startswith("U cannot make the corpus cache") and "NNAPI_PY_CORPUS=" in out, (out, err)
