"""README recipes a new user follows (issue 26.11): the install command of the .tflite extras
names extras pyproject.toml has, with the versions `make test` installs; a custom PREFIX is
found by pkg-config through PKG_CONFIG_PATH as the README says."""
import os
import re
import shutil
import sys
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


# ---- issue 40.9: the short README stays runnable, its links resolve, and it stays short ----

DOCS = os.path.join(ROOT, "docs")
MD_FILES = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(DOCS) if f.endswith(".md"))
# Paths that a named make target or the corpus fetch creates (not in a fresh clone).
MADE = ("build/",                      # make lib, make demo, nnapi_py/testing/corpus.py's models()
        "nnapi_py/cmake", "nnapi_py/include", "nnapi_py/pkgconfig", "nnapi_py/feature-level")  # pip install .
# Paths inside TensorFlow Lite's source tree (docs/support_library.md builds it), not this repository's.
FOREIGN = ("tools/benchmark", "tools/delegates/")
PATH_RE = re.compile(r"(?<![\w./$-])((?:docs|examples|tests|ctests|tools|nnapi_py|include|build|\.ci)/[\w./+*-]*[\w/*])")
LINK_RE = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _runnable_blocks(text, marked_only):
    """Python code blocks; with marked_only, those right after a `<!-- runnable -->` line."""
    out = []
    for m in re.finditer(r"(<!-- runnable -->\n)?```python\n(.*?)```", text, re.S):
        if m.group(1) or not marked_only:
            out.append(m.group(2))
    return out


@pytest.mark.parametrize("name,marked_only", [("README.md", False), (os.path.join("docs", "python_api.md"), True)])
def test_python_snippets_run(name, marked_only, tmp_path):
    blocks = _runnable_blocks(open(os.path.join(ROOT, name)).read(), marked_only)
    assert blocks, f"{name}: no runnable Python snippet found"
    for i, code in enumerate(blocks):
        script = tmp_path / f"snippet{i}.py"
        script.write_text(code)
        p = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), capture_output=True, text=True,
                           timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))
        assert p.returncode == 0, f"{name} snippet {i} failed:\n{code}\n{p.stderr}"


def test_readme_python_example_prints_what_it_says():
    code = _runnable_blocks(README, False)[0]
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() in code                       # the comment shows the printed value


def _relative_paths(text):
    for m in LINK_RE.finditer(text):
        if not re.match(r"[a-z]+:", m.group(1)):
            yield m.group(1), True
    for m in PATH_RE.finditer(text):
        yield m.group(1), False


@pytest.mark.parametrize("name", MD_FILES)
def test_relative_paths_resolve(name):
    base = os.path.dirname(os.path.join(ROOT, name))
    missing = []
    for path, is_link in _relative_paths(open(os.path.join(ROOT, name)).read()):
        if re.search(r"[<>*…{}]|\bN\b|-N\b|_N\b|\bK\b|\.\.\.", path):
            continue                                       # a placeholder (feature-level-N, <package>)
        candidates = [os.path.join(base, path)] if is_link else [os.path.join(ROOT, path), os.path.join(base, path)]
        if any(os.path.exists(c) for c in candidates):
            continue
        if not is_link and path.startswith(MADE + FOREIGN):
            continue                                       # made by make lib / make demo / the corpus fetch
        missing.append(path)
    assert not missing, f"{name} names files that do not exist: {sorted(set(missing))}"


def test_readme_is_short_and_newcomer_first():
    lines = README.splitlines()
    assert len(lines) <= 320, f"README.md has {len(lines)} lines (at most 320: move details to docs/)"
    heads = [ln for ln in lines if ln.startswith("## ")]
    assert heads[:2] == ["## Two commands", "## Using it from C"], heads
    for page in ("docs/design.md", "docs/benchmarks.md", "docs/settings.md", "docs/decisions.md",
                 "docs/python_api.md", "docs/cli.md", "docs/testing.md"):
        assert page in README, f"README does not link {page}"


def test_readme_corpus_fetch_names_a_real_function_and_path():
    """The README's "A model to try" one-liner calls nnapi_py/testing/corpus.py's models(), and the path
    it then runs is where models() puts that model (checked without the network)."""
    from nnapi_py.testing import corpus
    assert callable(corpus.models)
    line = next(ln for ln in README.splitlines()
                if "from nnapi_py.testing import corpus" in ln and ln.startswith(".venv/bin/python -c"))
    name = re.search(r"models\(\)\['(\w+)'\]", line).group(1)
    path = re.search(r"run (build/corpus/models/\S+\.tflite)", README).group(1)
    assert path.endswith(f"/{name}.tflite")
    assert os.path.relpath(os.path.join(corpus.CACHE, "models"), ROOT) == "build/corpus/models"
    if os.path.exists(os.path.join(ROOT, path)):
        assert corpus.models()[name] == os.path.join(ROOT, path)
