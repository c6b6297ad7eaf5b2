"""The settings read from the environment at start-up, each in a fresh process (issue 26.8): a
malformed NNAPI_PY_FEATURE_LEVEL / NNAPI_PY_DEVICES / NNAPI_PY_FAULTS is named with its expected
form and ignored while the valid ones still apply; an unknown NNAPI_PY_TRACE value is said once."""
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
