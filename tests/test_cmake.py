"""find_package(nnapi_py) (issue 38, point 5; docs/cmake.md): examples/cmake configured, built,
installed and run against the three trees that carry the CMake package config -- the checkout's
build tree (`python -m nnapi_py --cmake-dir`), a `make install` tree (staged with DESTDIR, so the
config's paths are proven relative to its own location) and an installed wheel -- each with the
demo on nnapi_py::neuralnetworks and a client on nnapi_py::feature_level_5 (which must report the
runtime feature level 31, where the full library reports 1000008).  The programs run without
LD_LIBRARY_PATH or PYTHONPATH, from the build directory and from their own install prefix.
Also: the version file and the components' errors, and the pkg-config files of the one template.

cmake: the one on PATH, else the venv's (PyPI's `cmake`, installed here when missing); without
any, or without a C compiler, the tests skip saying why."""
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "cmake")
DEMO_OUTPUT = "[0.032059, 0.087144, 0.236883, 0.643914]"      # examples/demo.c's first row
LEVEL_5 = "runtime feature level: 31"                        # ANEURALNETWORKS_FEATURE_LEVEL_5


def _version():
    sys.path.insert(0, os.path.join(ROOT, "cmake"))
    try:
        import render
        return render.version()
    finally:
        sys.path.pop(0)


VERSION = _version()


def _find_cmake():
    found = shutil.which("cmake") or shutil.which("cmake", path=os.path.dirname(sys.executable))
    if found:
        return found, ""
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "cmake"], capture_output=True, text=True)
    found = shutil.which("cmake", path=os.path.dirname(sys.executable))
    return found, "" if found else ("cmake is not installed and `pip install cmake` failed: "
                                    + (p.stderr.strip().splitlines() or ["?"])[-1])


@pytest.fixture(scope="module")
def cmake():
    exe, why = _find_cmake()
    if not exe:
        print(why)
        pytest.skip(why)
    if not (shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")):
        pytest.skip("no C compiler (cc) for the CMake example")
    return exe


def clean_env(**extra):
    """The environment of a client that knows nothing of us: no PYTHONPATH, LD_LIBRARY_PATH,
    NNAPI_PY_* (a level or device setting would change what the programs print), no CMake
    search hints, no outer make's flags."""
    drop = ("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "CMAKE_PREFIX_PATH", "nnapi_py_DIR", "nnapi_py_ROOT",
            "NNAPI_PY_ROOT", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("NNAPI_PY_")}
    env.update(extra)
    return env


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, env=kw.pop("env", None) or clean_env(), **kw)
    assert p.returncode == 0, f"{' '.join(map(str, cmd))} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def runpath(exe):
    out = run(["readelf", "-d", exe])
    m = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]", out)
    return [d for d in m.group(1).split(":") if d] if m else []


def build_example(cmake, tmp, hint, config_dir):
    """Configure examples/cmake with `hint` (-Dnnapi_py_DIR=... or -DCMAKE_PREFIX_PATH=...),
    check it found the config in config_dir, build, install into tmp/inst and run every program
    from both places (cwd: tmp, so nothing is found relative to the checkout)."""
    b, inst = os.path.join(tmp, "b"), os.path.join(tmp, "inst")
    out = run([cmake, "-S", EXAMPLE, "-B", b, hint, "-DCMAKE_BUILD_TYPE=Release",
               "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF"], cwd=tmp)
    assert f"nnapi_py {VERSION}: {config_dir}" in out, out
    run([cmake, "--build", b, "-j", "2"], cwd=tmp)
    run([cmake, "--install", b, "--prefix", inst], cwd=tmp)
    progs = {}
    for where in (b, os.path.join(inst, "bin")):
        demo, level = os.path.join(where, "demo"), os.path.join(where, "feature_level")
        assert DEMO_OUTPUT in run([demo], cwd=tmp)
        assert "(runtime feature level 1000008)" in run([demo], cwd=tmp)
        assert run([level], cwd=tmp).startswith(LEVEL_5 + "\n")
        progs[where] = (demo, level)
    return progs


def check_links(progs, libdir, leveldir):
    """Every program's rpath names the library directory of its target (the installed ones too:
    CMAKE_INSTALL_RPATH_USE_LINK_PATH), and the feature-level client needs only the level library."""
    for demo, level in progs.values():
        assert os.path.realpath(libdir) in map(os.path.realpath, runpath(demo))
        level_dirs = list(map(os.path.realpath, runpath(level)))
        assert os.path.realpath(os.path.join(leveldir, "feature-level-5")) in level_dirs
        assert os.path.realpath(libdir) not in level_dirs


def test_build_tree(cmake, tmp_path):
    """(a) the checkout: -Dnnapi_py_DIR=$(python -m nnapi_py --cmake-dir), which make lib wrote."""
    config_dir = run([sys.executable, "-m", "nnapi_py", "--cmake-dir"], cwd=str(tmp_path)).strip()
    assert config_dir == os.path.join(ROOT, "build", "lib", "cmake", "nnapi_py")
    progs = build_example(cmake, str(tmp_path), f"-Dnnapi_py_DIR={config_dir}", config_dir)
    check_links(progs, os.path.join(ROOT, "build", "lib"), os.path.join(ROOT, "build", "lib"))


def test_install_tree(cmake, tmp_path):
    """(b) `DESTDIR=<stage> make install PREFIX=/opt/nnapi`: the staged tree is found by the usual
    CMAKE_PREFIX_PATH search (PREFIX/lib/cmake/nnapi_py) although it is not at PREFIX, and
    its .pc file names PREFIX.  (`-o lib`: the library is `make test`'s own prerequisite; a test
    never rebuilds the shared build tree.)"""
    stage = str(tmp_path / "stage")
    run(["make", "-s", "-C", ROOT, "-o", "lib", "install", "PREFIX=/opt/nnapi", f"DESTDIR={stage}"])
    prefix = os.path.join(stage, "opt", "nnapi")
    config_dir = os.path.join(prefix, "lib", "cmake", "nnapi_py")
    assert sorted(os.listdir(config_dir)) == ["nnapi_pyConfig.cmake", "nnapi_pyConfigVersion.cmake"]
    with open(os.path.join(prefix, "lib", "pkgconfig", "neuralnetworks.pc")) as f:
        assert f.read() == PC.format(prefix="/opt/nnapi", libdir="${prefix}/lib",
                                     supp="${prefix}/share/nnapi_py/suppressions")
    assert sorted(os.listdir(os.path.join(prefix, "share", "nnapi_py", "suppressions"))) == \
        ["lsan.supp", "tsan.supp", "valgrind.supp"]
    progs = build_example(cmake, str(tmp_path), f"-DCMAKE_PREFIX_PATH={prefix}", config_dir)
    check_links(progs, os.path.join(prefix, "lib"), os.path.join(prefix, "lib", "nnapi_py"))


@pytest.fixture(scope="session")
def wheel_site(tmp_path_factory):
    """The wheel (`pip wheel .`), built once per session, installed into a fresh directory."""
    d = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(d), ROOT],
        cwd=ROOT)
    (whl,) = [f for f in os.listdir(d) if f.endswith(".whl")]
    site = d / "site"
    run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(d / whl)])
    return str(site)


def test_wheel(cmake, wheel_site, tmp_path):
    """(c) the installed wheel: CMAKE_PREFIX_PATH=<site-packages> finds <site>/nnapi_py/cmake;
    the programs load the wheel's library (their rpath) and it finds its package beside itself
    and numpy where it was built -- no PYTHONPATH."""
    pkg = os.path.join(wheel_site, "nnapi_py")
    config_dir = os.path.join(pkg, "cmake")
    out = run([sys.executable, "-S", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import nnapi_py; "
               "print(nnapi_py.__file__); print(nnapi_py.cmake_dir()); print(nnapi_py.pkgconfig_dir())", wheel_site],
              cwd=str(tmp_path))
    assert out.split() == [os.path.join(pkg, "__init__.py"), config_dir, os.path.join(pkg, "pkgconfig")]
    progs = build_example(cmake, str(tmp_path), f"-DCMAKE_PREFIX_PATH={wheel_site}", config_dir)
    check_links(progs, pkg, pkg)
    for demo, _ in progs.values():
        ldd = run(["ldd", demo])
        assert re.search(r"libneuralnetworks\.so => " + re.escape(os.path.join(pkg, "libneuralnetworks.so")), ldd), ldd


def test_wheel_pkgconfig(wheel_site):
    """The wheel's neuralnetworks.pc is relative to itself (${pcfiledir}); same fields as the others."""
    pc_dir = os.path.join(wheel_site, "nnapi_py", "pkgconfig")
    with open(os.path.join(pc_dir, "neuralnetworks.pc")) as f:
        assert f.read() == PC.format(prefix="${pcfiledir}/..", libdir="${prefix}", supp="${prefix}/suppressions")
    if not shutil.which("pkg-config"):
        pytest.skip("pkg-config is not installed: the wheel's .pc was checked as text only")
    out = run(["pkg-config", "--cflags", "--libs", "neuralnetworks"], env=clean_env(PKG_CONFIG_PATH=pc_dir)).split()
    pkg = os.path.join(wheel_site, "nnapi_py")
    assert [os.path.normpath(a[2:]) for a in out if a.startswith(("-I", "-L"))] == [os.path.join(pkg, "include"), pkg]
    assert "-lneuralnetworks" in out
    supp = run(["pkg-config", "--variable=valgrind_suppressions", "neuralnetworks"], env=clean_env(PKG_CONFIG_PATH=pc_dir))
    assert os.path.isfile(supp.strip()), supp


PC = """prefix={prefix}
libdir={libdir}
includedir=${{prefix}}/include
# python -m nnapi_py --suppressions: for valgrind, ThreadSanitizer, LeakSanitizer (README: Using it in your CI)
suppressionsdir={supp}
valgrind_suppressions=${{suppressionsdir}}/valgrind.supp
tsan_suppressions=${{suppressionsdir}}/tsan.supp
lsan_suppressions=${{suppressionsdir}}/lsan.supp

Name: neuralnetworks
Description: Android NNAPI for Linux (nnapi_py)
Version: %s
Libs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lneuralnetworks
Cflags: -I${{includedir}}
""" % VERSION


def test_build_tree_pkgconfig():
    """make lib's .pc (the same template): as before the template, with the checkout as prefix."""
    with open(os.path.join(ROOT, "build", "lib", "pkgconfig", "neuralnetworks.pc")) as f:
        assert f.read() == PC.format(prefix=ROOT, libdir="${prefix}/build/lib", supp="${prefix}/nnapi_py/suppressions")


CHECKS = """cmake_minimum_required(VERSION 3.13)
project(checks NONE)
# an unsuitable version or a missing component resets the cache's nnapi_py_DIR: set it each time
macro(find)
  set(nnapi_py_DIR "${{CONFIG_DIR}}" CACHE PATH "" FORCE)
  find_package(nnapi_py ${{ARGN}})
endmacro()
foreach(ask "" 0.1 {version} 0 0.2 1.0 0.1...1.0 0.2...1.0)
  find(${{ask}} QUIET)
  message(STATUS "version '${{ask}}': ${{nnapi_py_FOUND}}")
endforeach()
foreach(c feature_level_1 feature_level_8 feature_level_9 level_5)
  find(QUIET COMPONENTS ${{c}})
  message(STATUS "component ${{c}}: ${{nnapi_py_FOUND}}")
endforeach()
find(REQUIRED OPTIONAL_COMPONENTS feature_level_9)
message(STATUS "optional feature_level_9: ${{nnapi_py_FOUND}} ${{nnapi_py_feature_level_9_FOUND}}")
foreach(t neuralnetworks nnapi_py feature_level_1 feature_level_8 feature_level_9)
  if(TARGET nnapi_py::${{t}})
    message(STATUS "target nnapi_py::${{t}}")
  endif()
endforeach()
get_target_property(inc nnapi_py::neuralnetworks INTERFACE_INCLUDE_DIRECTORIES)
get_target_property(loc nnapi_py::feature_level_3 IMPORTED_LOCATION)
message(STATUS "include ${{inc}}")
message(STATUS "level 3 ${{loc}}")
message(STATUS "levels ${{nnapi_py_FEATURE_LEVELS}}")
"""


def test_config_versions_components_targets(cmake, tmp_path):
    """The version file (same major, and same minor while the major is 0; ranges), the
    components feature_level_1..8 (an unknown one fails a required find_package, not an optional
    one), the targets and their properties."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "CMakeLists.txt").write_text(CHECKS.format(version=VERSION))
    config_dir = os.path.join(ROOT, "build", "lib", "cmake", "nnapi_py")
    out = run([cmake, "-S", str(tmp_path / "src"), "-B", str(tmp_path / "b"), f"-DCONFIG_DIR={config_dir}"])
    status = [ln[3:] for ln in out.splitlines() if ln.startswith("-- ") and not ln.startswith(("-- Configuring",
                                                                                                "-- Generating", "-- Build"))]
    assert VERSION.startswith("0.1"), "update the expectations below with the version"
    assert status == [
        "version '': 1", f"version '0.1': 1", f"version '{VERSION}': 1", "version '0': 1", "version '0.2': 0",
        "version '1.0': 0", "version '0.1...1.0': 1", "version '0.2...1.0': 0",
        "component feature_level_1: 1", "component feature_level_8: 1", "component feature_level_9: 0",
        "component level_5: 0",
        "optional feature_level_9: 1 FALSE",
        "target nnapi_py::neuralnetworks", "target nnapi_py::nnapi_py", "target nnapi_py::feature_level_1",
        "target nnapi_py::feature_level_8",
        f"include {os.path.join(ROOT, 'include')}",
        f"level 3 {os.path.join(ROOT, 'build', 'lib', 'feature-level-3', 'libneuralnetworks.so')}",
        "levels 1;2;3;4;5;6;7;8",
    ], out
