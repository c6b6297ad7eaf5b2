"""README recipes a new user follows (issue 26.11): the install command of the .tflite extras
names extras pyproject.toml has, with the versions `make test` installs; a custom PREFIX is
found by pkg-config through PKG_CONFIG_PATH as the README says."""
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = open(os.path.join(ROOT, "README.md")).read()


def test_tflite_extras_install_command_matches_pyproject_and_makefile():
    assert "pip install '.[tflite,compare]'" in README and "pip install 'nnapi_py[tflite,compare]'" in README
    pyproject = open(os.path.join(ROOT, "pyproject.toml")).read()
    extras = dict(re.findall(r'^(\w+) = \["([^"]+)"\]', pyproject, re.M))
    makefile = open(os.path.join(ROOT, "Makefile")).read()
    pins = re.search(r"^TFLITE \?= (.*)$", makefile, re.M).group(1).split()
    assert [extras["tflite"], extras["compare"]] == pins
    assert f"`{' '.join(pins)}`" in README                    # what `make test` installs, as the README says
    torch = re.search(r"^TORCH \?= (.*)$", makefile, re.M).group(1)
    assert f"`{torch}`" in README


def test_pkg_config_path_for_a_custom_prefix(tmp_path):
    """make install PREFIX=DIR, then PKG_CONFIG_PATH=DIR/lib/pkgconfig pkg-config finds it and a
    program built with those flags runs."""
    if not (shutil.which("pkg-config") and shutil.which("make") and shutil.which("cc")):
        pytest.skip("needs pkg-config, make and cc")
    if not os.path.exists(os.path.join(ROOT, "build", "lib", "libneuralnetworks.so")):
        pytest.skip("library not built (make lib)")
    assert "export PKG_CONFIG_PATH=/opt/nnapi/lib/pkgconfig" in README
    prefix = tmp_path / "nnapi"
    subprocess.run(["make", "-s", "install", f"PREFIX={prefix}"], cwd=ROOT, check=True, capture_output=True)
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "neuralnetworks"], env=env, capture_output=True,
                           text=True, check=True).stdout.split()
    assert f"-I{prefix}/include" in flags and f"-L{prefix}/lib" in flags
    exe = tmp_path / "demo"
    subprocess.run(["cc", os.path.join(ROOT, "examples", "demo.c"), *flags, "-o", str(exe)], check=True)
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
