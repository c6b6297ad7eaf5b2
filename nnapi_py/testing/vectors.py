"""The conformance vectors: Android's CTS generated tests as JSON (../shared/cts/<folder>/<spec>.json.gz,
described in its README.md), parsed once into PreparedTest objects every execution mode reuses, and the CTS
harness's rule for comparing an output with the expected values (compare_values)."""

from __future__ import annotations

import dataclasses
import glob
import gzip
import json
import os

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONST_REF_ALIGN = 64            # every CONSTANT_REFERENCE operand starts 64-byte aligned

# JSON operand type name -> numpy dtype of one element (None: no data buffer)
DTYPES = {
    "FLOAT32": np.float32, "INT32": np.int32, "UINT32": np.uint32,
    "TENSOR_FLOAT32": np.float32, "TENSOR_INT32": np.int32,
    "TENSOR_QUANT8_ASYMM": np.uint8, "BOOL": np.uint8,
    "TENSOR_QUANT16_SYMM": np.int16, "TENSOR_FLOAT16": np.float16,
    "TENSOR_BOOL8": np.uint8, "FLOAT16": np.float16,
    "TENSOR_QUANT8_SYMM_PER_CHANNEL": np.int8, "TENSOR_QUANT16_ASYMM": np.uint16,
    "TENSOR_QUANT8_SYMM": np.int8, "TENSOR_QUANT8_ASYMM_SIGNED": np.int8,
    "SUBGRAPH": None, "MODEL": None,
}
# JSON operand type name -> tolerance class of the "tolerance" field
TOL_CLASS = {
    "FLOAT32": "float32", "TENSOR_FLOAT32": "float32",
    "FLOAT16": "float16", "TENSOR_FLOAT16": "float16",
    "INT32": "int32", "UINT32": "int32", "TENSOR_INT32": "int32",
    "TENSOR_QUANT8_ASYMM": "quant8", "TENSOR_QUANT8_ASYMM_SIGNED": "quant8",
    "TENSOR_QUANT8_SYMM": "quant8", "TENSOR_QUANT8_SYMM_PER_CHANNEL": "quant8",
    "TENSOR_QUANT16_ASYMM": "quant16", "TENSOR_QUANT16_SYMM": "quant16",
    "TENSOR_BOOL8": "bool8", "BOOL": "bool8",
}


def default_cts_dir() -> str:
    return os.environ.get("NNAPI_PY_CTS") or os.path.normpath(
        os.path.join(REPO_ROOT, "..", "shared", "cts"))


def cts_files(cts_dir: str) -> list:
    if not cts_dir or not os.path.isdir(cts_dir):
        return []
    return sorted(glob.glob(os.path.join(cts_dir, "*", "*.json.gz")))


def cts_available(cts_dir: str) -> bool:
    return bool(cts_files(cts_dir))


def skip_message(cts_dir: str) -> str:
    return f"conformance: skipped (no CTS vectors at {cts_dir})"


class ConformanceSkip(Exception):
    """Raised by run() when there is nothing to run (no vectors)."""


@dataclasses.dataclass
class Operand:
    type_name: str
    dims: tuple
    scale: float
    zero_point: int
    lifetime: str
    data: object            # np.ndarray (maybe empty) or None for SUBGRAPH operands
    ref_index: int          # SUBGRAPH operands: index into model.referenced
    channel_quant: object   # (channelDim, np.float32 scales) or None
    ignored: bool
    const_offset: int = -1  # CONSTANT_REFERENCE: offset into the shared memory


@dataclasses.dataclass
class Subgraph:
    operands: list
    operations: list        # (op_name, inputs, outputs)
    inputs: list
    outputs: list


@dataclasses.dataclass
class PreparedTest:
    folder: str
    spec: str
    name: str
    ops: tuple
    main: Subgraph
    referenced: list
    relaxed: bool
    expect_failure: bool
    tolerance: dict
    multinomial_tol: float
    dynamic_eligible: bool
    const_size: int          # bytes of shared memory for CONSTANT_REFERENCE operands

    @property
    def test_id(self) -> str:
        return f"{self.folder}/{self.spec}::{self.name}"


def _to_array(values, type_name: str):
    dt = DTYPES.get(type_name)
    if dt is None:
        return None
    if not values:
        return np.zeros(0, dtype=dt)
    if dt in (np.float32, np.float16):
        return np.asarray(values, dtype=np.float64).astype(dt)
    arr = np.asarray(values)
    if arr.dtype == np.bool_:
        return arr.astype(dt)
    return np.asarray(arr, dtype=np.int64).astype(dt)


def _prepare_subgraph(sg: dict, offset_box: list) -> Subgraph:
    operands = []
    for o in sg.get("operands") or []:
        t = o.get("type")
        dims = tuple(int(d) for d in (o.get("dimensions") or []))
        data = o.get("data") or []
        ref_index = -1
        arr = None
        if t in ("SUBGRAPH", "MODEL"):
            ref_index = int(data[0]) if data else -1
        else:
            arr = _to_array(data, t)
        cq = o.get("channelQuant")
        if cq:
            cq = (int(cq.get("channelDim", 0)),
                  np.asarray(cq.get("scales") or [], dtype=np.float32))
        op = Operand(t, dims, float(o.get("scale") or 0.0), int(o.get("zeroPoint") or 0),
                     o.get("lifetime"), arr, ref_index, cq or None, bool(o.get("isIgnored")))
        if op.lifetime == "CONSTANT_REFERENCE" and arr is not None and arr.nbytes:
            op.const_offset = offset_box[0]
            offset_box[0] += -(-arr.nbytes // CONST_REF_ALIGN) * CONST_REF_ALIGN
        operands.append(op)
    operations = [(x.get("type"), [int(i) for i in x.get("inputs") or []],
                   [int(i) for i in x.get("outputs") or []])
                  for x in sg.get("operations") or []]
    return Subgraph(operands, operations, [int(i) for i in sg.get("inputIndexes") or []],
                    [int(i) for i in sg.get("outputIndexes") or []])


def prepare_test(folder: str, spec: str, t: dict) -> PreparedTest:
    model = t.get("model") or {}
    box = [0]
    main = _prepare_subgraph(model.get("main") or {}, box)
    refs = [_prepare_subgraph(sg, box) for sg in model.get("referenced") or []]
    suites = t.get("suites") or {}
    ops = t.get("ops")
    if not ops:
        ops = sorted({o[0] for sg in [main] + refs for o in sg.operations})
    return PreparedTest(
        folder=folder, spec=spec, name=t.get("name") or "?", ops=tuple(ops), main=main,
        referenced=refs, relaxed=bool(model.get("isRelaxed")),
        expect_failure=bool(model.get("expectFailure")),
        tolerance=t.get("tolerance") or {},
        multinomial_tol=float(model.get("expectedMultinomialDistributionTolerance") or 0.0),
        dynamic_eligible=bool(suites.get("DynamicOutputShapeTest")),
        const_size=box[0])


def load_vectors(cts_dir: str, ops=None, name_filter=None, spec_filter=None):
    """Yield PreparedTest objects, or (test_id, error string) for unparseable tests."""
    wanted = set(ops) if ops else None
    for path in cts_files(cts_dir):
        folder = os.path.basename(os.path.dirname(path))
        spec_from_path = os.path.basename(path)[:-len(".json.gz")]
        if spec_filter and not any(s in spec_from_path for s in spec_filter):
            continue
        try:
            with gzip.open(path, "rt") as f:
                doc = json.load(f)
        except Exception as exc:
            yield (f"{folder}/{spec_from_path}", f"cannot read vector file: {exc}")
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("tests", []), list):
            yield (f"{folder}/{spec_from_path}", "vector file is not {spec, folder, tests[]}")
            continue
        spec = str(doc.get("spec") or spec_from_path)
        folder = str(doc.get("folder") or folder)
        for k, t in enumerate(doc.get("tests") or []):
            name = t.get("name") if isinstance(t, dict) else None
            name = str(name) if name else f"#{k}"
            try:
                if not isinstance(t, dict):
                    raise TypeError(f"test is a {type(t).__name__}, not an object")
                if wanted is not None and not wanted.intersection(t.get("ops") or []):
                    continue
                if name_filter and not any(s in name for s in name_filter):
                    continue
                yield prepare_test(folder, spec, t)
            except Exception as exc:
                yield (f"{folder}/{spec}::{name}", f"cannot parse test: {exc!r}")


def numel(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


_DEFAULT_TOL = {
    "float32": {"atol": 1e-5, "rtol": 5.0 * 2.0 ** -23},
    "float16": {"atol": 5.0 * 2.0 ** -10, "rtol": 5.0 * 2.0 ** -10},
    "int32": {"atol": 1}, "quant8": {"atol": 1}, "quant16": {"atol": 1},
    "bool8": {"allowedErrorRatio": 0.0},
}


def compare_values(actual: np.ndarray, expected: np.ndarray, type_name: str, tolerance: dict):
    """Return "" if actual matches expected under the test's tolerance, else a reason."""
    cls = TOL_CLASS.get(type_name, "int32")
    tol = tolerance.get(cls) if isinstance(tolerance.get(cls), dict) else _DEFAULT_TOL[cls]
    if cls == "bool8":
        bad = (actual != 0) != (expected != 0)
        ratio = float(tol.get("allowedErrorRatio", 0.0) or 0.0)
        nbad = int(bad.sum())
        if nbad > ratio * bad.size:
            i = int(np.argmax(bad))
            return (f"{nbad}/{bad.size} mismatches; first at [{i}]: got {int(actual[i])}, "
                    f"expected {int(expected[i])}")
        return ""
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    atol = float(tol.get("atol", 0.0) or 0.0)
    rtol = float(tol.get("rtol", 0.0) or 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - e)
        ok = (diff <= atol + rtol * np.abs(e)) | (a == e) | (np.isnan(a) & np.isnan(e))
    if ok.all():
        return ""
    bad = ~ok
    i = int(np.argmax(bad))
    with np.errstate(invalid="ignore"):
        worst = np.where(bad, diff, 0.0)
        worst = np.nan_to_num(worst, nan=np.inf)
    j = int(np.argmax(worst))
    return (f"{int(bad.sum())}/{bad.size} elements outside atol={atol:g} rtol={rtol:g}; "
            f"first at [{i}]: got {_fmt(a[i])}, expected {_fmt(e[i])}; "
            f"worst at [{j}]: got {_fmt(a[j])}, expected {_fmt(e[j])}")


def _fmt(x) -> str:
    x = float(x)
    return repr(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:.7g}"

