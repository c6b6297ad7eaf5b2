"""The wheel ships every subpackage: pyproject.toml lists its packages by name (setuptools'
[tool.setuptools] packages), so a new package directory of nnapi_py/ must be listed there or
`pip install .` installs a package that fails to import.  (The editable install of `make` maps the
whole directory and would not notice.)"""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is Python 3.11's")
def test_pyproject_lists_every_package_of_nnapi_py():
    import tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "nnapi_py").rglob("__init__.py")}
    assert on_disk - listed == set(), f"add {sorted(on_disk - listed)} to pyproject.toml's [tool.setuptools] packages"
    assert listed - on_disk == set(), f"pyproject.toml lists packages that do not exist: {sorted(listed - on_disk)}"
