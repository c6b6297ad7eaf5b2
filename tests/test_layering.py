"""The package's layers import downward only (README "Layers").

C ABI (_capi) -> runtime objects (model, compilation, execution, memory, event, devices, plan)
-> operation registry -> operation modules -> shared operation layer (base, quant, common,
padding) -> errors/constants.  An operation module never imports a sibling operation module:
what two families share lives in the shared layer.
"""
import ast
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parent.parent / "nnapi_py"
OPS = PKG / "ops"
SHARED = {"base", "quant", "common", "padding", "registry", "__init__",
          "convgeom", "convquant", "im2col", "convsmall",      # what the convolution modules share
          "boxes", "nms"}                                        # what the detection modules share


def _imports(path):
    """(module-relative names) imported by path: 'ops.conv', 'errors', ... (package-relative)."""
    tree = ast.parse(path.read_text())
    rel = path.relative_to(PKG).with_suffix("")
    pkg_parts = list(rel.parts[:-1])
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[: len(pkg_parts) - (node.level - 1)]
                mod = base + (node.module.split(".") if node.module else [])
                if node.module is None or not mod:
                    for a in node.names:
                        found.add(".".join(mod + [a.name]))
                else:
                    found.add(".".join(mod))
                    for a in node.names:          # "from . import quant"
                        found.add(".".join(mod + [a.name]))
            elif node.module and node.module.startswith("nnapi_py"):
                found.add(node.module[len("nnapi_py."):])
    return found


def _operation_modules():
    return sorted(p for p in OPS.glob("*.py") if p.stem not in SHARED)


@pytest.mark.parametrize("path", _operation_modules(), ids=lambda p: p.stem)
def test_operation_module_imports_only_the_shared_layer(path):
    siblings = {p.stem for p in _operation_modules()} - {path.stem}
    bad = sorted(m for m in _imports(path) if m.startswith("ops.") and m.split(".")[1] in siblings)
    assert not bad, f"{path.name} imports sibling operation module(s) {bad}; move what they share into ops/common.py"


def _shared_modules():
    """The shared layer's files: ops/<stem>.py, or every module of the package ops/<stem>/ (ops/quant/)."""
    return [p for stem in sorted(SHARED - {"registry", "__init__"})
            for p in (sorted((OPS / stem).glob("*.py")) if (OPS / stem).is_dir() else [OPS / f"{stem}.py"])]


@pytest.mark.parametrize("path", _shared_modules(), ids=lambda p: str(p.relative_to(OPS).with_suffix("")))
def test_shared_layer_imports_no_operation_module(path):
    ops = {p.stem for p in _operation_modules()}
    bad = sorted(m for m in _imports(path) if m.startswith("ops.") and m.split(".")[1] in ops)
    assert not bad, f"ops/{path.relative_to(OPS)} (shared layer) imports operation module(s) {bad}"


def test_operations_do_not_import_the_runtime():
    runtime = {"_capi", "model", "compilation", "execution", "memory", "event", "devices", "plan", "cache",
               "execution_io", "plan_run", "plan_rewrites"}
    for path in OPS.rglob("*.py"):               # ops/quant/ too
        bad = sorted(m for m in _imports(path) if m.split(".")[0] in runtime)
        assert not bad, f"ops/{path.relative_to(OPS)} imports runtime module(s) {bad} (layers import downward only)"


# -- the .tflite importer: one mapping module per operator family over its shared layer (base.py)
TFLITE = PKG / "tflite"
TFLITE_SHARED = {"base", "reader"}          # what a mapping module may import from the importer


def _mapping_modules():
    return sorted(TFLITE.glob("map_*.py"))


@pytest.mark.parametrize("path", _mapping_modules(), ids=lambda p: p.stem)
def test_tflite_mapping_module_imports_only_the_shared_layer(path):
    bad = sorted(m for m in _imports(path) if m.startswith("tflite.") and m.split(".")[1] not in TFLITE_SHARED)
    assert not bad, (f"tflite/{path.name} imports {bad}; a mapping module imports only the importer's shared "
                     f"layer ({sorted(TFLITE_SHARED)}), never a sibling mapping module or the loader")
    runtime = {"_capi", "model", "compilation", "execution", "memory", "event", "devices", "plan", "ops",
               "execution_io", "plan_run", "plan_rewrites", "nn_base", "nn_checks", "nn_model", "nn_execution"}
    bad = sorted(m for m in _imports(path) if m.split(".")[0] in runtime)
    assert not bad, f"tflite/{path.name} imports runtime module(s) {bad}: it builds through nnapi_py.nn only"


def test_tflite_shared_layer_imports_no_mapping_module():
    for stem in sorted(TFLITE_SHARED | {"fold"}):
        bad = sorted(m for m in _imports(TFLITE / f"{stem}.py")
                     if m.startswith("tflite.") and m.split(".")[1].startswith("map_"))
        assert not bad, f"tflite/{stem}.py (shared layer) imports mapping module(s) {bad}"


def test_only_the_abi_layer_imports_the_support_library_module():
    """nnapi_py/sl.py (the Support Library table's Python side) sits in the runtime-objects layer:
    it may import the runtime objects, and only _capi imports it."""
    for path in PKG.rglob("*.py"):
        if path.stem in ("_capi", "sl"):
            continue
        bad = sorted(m for m in _imports(path) if m == "sl" or m.endswith(".sl"))
        assert not bad, f"{path.relative_to(PKG)} imports nnapi_py.sl (only _capi may)"
    assert "_capi" not in {m.split(".")[0] for m in _imports(PKG / "sl.py")}


def test_no_runtime_module_imports_the_testing_package():
    """nnapi_py/testing/ (the CTS runner, the real-model corpus) is a client layer: it drives the C library
    and the public API as an application does, and nothing else in the package imports it."""
    for path in PKG.rglob("*.py"):
        if path.relative_to(PKG).parts[0] == "testing":
            continue
        bad = sorted(m for m in _imports(path) if m.split(".")[0] == "testing")
        bad += sorted(a.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Import)
                      for a in node.names if a.name.split(".")[:2] == ["nnapi_py", "testing"])
        assert not bad, f"{path.relative_to(PKG)} imports {bad}: nnapi_py.testing is a client of the runtime"
