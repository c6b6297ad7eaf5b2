#!/usr/bin/env python3
"""NNAPI conformance runner: drives libneuralnetworks.so through its C ABI.

The conformance vectors (../shared/cts/<folder>/<spec>.json.gz, described in
../shared/cts/README.md) are the Android CTS generated tests converted to JSON.  For
every test this module builds the model, compiles it, executes it and compares the
outputs exactly the way Android's CTS harness does, but only through the public C
functions of the library (cffi ABI mode, i.e. ``ffi.dlopen``), so what is tested is the
shared object an application would link against.

Modes (one execution per test and mode):
  sync     ANeuralNetworksExecution_compute
  async    ANeuralNetworksExecution_startCompute + ANeuralNetworksEvent_wait
  burst    ANeuralNetworksBurst_create + ANeuralNetworksExecution_burstCompute
  dynamic  the DynamicOutputShapeTest variant: every output of every subgraph is declared
           with all dimensions 0 (rank kept); shapes must come back through
           getOutputOperandRank/Dimensions (computed with ANeuralNetworksExecution_compute).
           Only tests whose ``suites.DynamicOutputShapeTest`` is true run in this mode.

Each (test, mode) ends up as one of
  passed           outputs (and output shapes) match; or a model marked expectFailure failed
                   at some step as it must;
  not_implemented  ANeuralNetworksModel_addOperation answered ANEURALNETWORKS_BAD_DATA and
                   nnapi_py_last_error() mentions "not implemented" (reported as skipped);
  failed           anything else (step, result code and nnapi_py_last_error() recorded).

CLI:
  python tests/cts_runner.py [--lib PATH | --feature-level N] [--cts DIR] [--ops ADD,MUL]
                             [--modes sync,async,burst,dynamic] [-v]
Environment: NNAPI_PY_LIB (library path), NNAPI_PY_CTS (vector directory).
--feature-level N runs build/lib/feature-level-N/libneuralnetworks.so (the library exporting
only the functions of feature levels <= N; the vectors need level 8's operations).
Python API (used by tests/test_conformance.py): ``run(...) -> Results``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import faulthandler
import glob
import gzip
import hashlib
import json
import os
import sys
import tempfile
import textwrap
import threading
import time

import numpy as np

ALL_MODES = ("sync", "async", "burst", "dynamic")
PASSED, FAILED, NOT_IMPLEMENTED = "passed", "failed", "not_implemented"
STATUSES = (PASSED, FAILED, NOT_IMPLEMENTED)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = os.path.join(REPO_ROOT, "include", "android", "NeuralNetworks.h")
EXTRA_HEADER = os.path.join(REPO_ROOT, "include", "nnapi_py.h")
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)
from nnapi_py.cdef import build_cdef  # noqa: E402  (header -> cdef, shared with the package)

PROT_READ, PROT_WRITE = 0x1, 0x2
CONST_REF_ALIGN = 64            # every CONSTANT_REFERENCE operand starts 64-byte aligned
WHILE_EF_LOOP_TIMEOUT_NS = 200_000_000   # expectFailure models with WHILE (infinite loops)

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
# JSON type names whose NNAPI enumerator is spelled differently
TYPE_ALIASES = {"SUBGRAPH": "MODEL"}


def default_lib_path(feature_level=None) -> str:
    """NNAPI_PY_LIB, else build/lib/libneuralnetworks.so; feature_level=N: the build tree's
    feature-level-N library."""
    if feature_level is not None:
        return os.path.join(REPO_ROOT, "build", "lib", f"feature-level-{int(feature_level)}",
                            "libneuralnetworks.so")
    return os.environ.get("NNAPI_PY_LIB") or os.path.join(
        REPO_ROOT, "build", "lib", "libneuralnetworks.so")


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


# --------------------------------------------------------------------------------------
# Header -> cffi cdef
# --------------------------------------------------------------------------------------

# --------------------------------------------------------------------------------------
# Library wrapper
# --------------------------------------------------------------------------------------

class Library:
    def __init__(self, lib_path: str, header: str = HEADER, extra_header: str = EXTRA_HEADER):
        import cffi
        with open(header) as f:
            htext = f.read()
        etext = ""
        if extra_header and os.path.exists(extra_header):
            with open(extra_header) as f:
                etext = f.read()
        cdef, self.enums = build_cdef(htext, etext)
        self.ffi = cffi.FFI()
        self.ffi.cdef(cdef)
        self.path = lib_path
        self.lib = self.ffi.dlopen(lib_path)
        try:
            self._last_error = self.lib.nnapi_py_last_error
        except Exception:
            self._last_error = None
        self.result_names = {v: k[len("ANEURALNETWORKS_"):] for k, v in self.enums.items()
                             if k.startswith("ANEURALNETWORKS_") and k in _RESULT_CODE_NAMES}

    def last_error(self) -> str:
        if self._last_error is None:
            return ""
        try:
            p = self._last_error()
            if p == self.ffi.NULL:
                return ""
            return self.ffi.string(p).decode("utf-8", "replace")
        except Exception as exc:  # never let diagnostics crash the runner
            return f"<nnapi_py_last_error failed: {exc}>"

    def code_name(self, code) -> str:
        return self.result_names.get(code, "?")

    def operand_code(self, type_name: str) -> int:
        name = "ANEURALNETWORKS_" + TYPE_ALIASES.get(type_name, type_name)
        if name not in self.enums:
            raise KeyError(f"unknown operand type {type_name}")
        return self.enums[name]

    def operation_code(self, op_name: str) -> int:
        name = "ANEURALNETWORKS_" + op_name
        if name not in self.enums:
            raise KeyError(f"unknown operation {op_name}")
        return self.enums[name]

    def describe(self) -> str:
        ffi, lib = self.ffi, self.lib
        parts = [self.path]
        try:
            n = ffi.new("uint32_t*")
            if lib.ANeuralNetworks_getDeviceCount(n) == 0 and n[0] > 0:
                dev = ffi.new("ANeuralNetworksDevice**")
                if lib.ANeuralNetworks_getDevice(0, dev) == 0:
                    name = ffi.new("const char**")
                    fl = ffi.new("int64_t*")
                    if lib.ANeuralNetworksDevice_getName(dev[0], name) == 0 and name[0]:
                        parts.append("device " + ffi.string(name[0]).decode("utf-8", "replace"))
                    if lib.ANeuralNetworksDevice_getFeatureLevel(dev[0], fl) == 0:
                        parts.append(f"feature level {fl[0]}")
                parts.append(f"{n[0]} device(s)")
        except Exception as exc:
            parts.append(f"(device query failed: {exc})")
        return ", ".join(parts)


_RESULT_CODE_NAMES = {
    "ANEURALNETWORKS_" + n for n in (
        "NO_ERROR", "OUT_OF_MEMORY", "INCOMPLETE", "UNEXPECTED_NULL", "BAD_DATA", "OP_FAILED",
        "BAD_STATE", "UNMAPPABLE", "OUTPUT_INSUFFICIENT_SIZE", "UNAVAILABLE_DEVICE",
        "MISSED_DEADLINE_TRANSIENT", "MISSED_DEADLINE_PERSISTENT",
        "RESOURCE_EXHAUSTED_TRANSIENT", "RESOURCE_EXHAUSTED_PERSISTENT", "DEAD_OBJECT")
}


# --------------------------------------------------------------------------------------
# Vectors -> prepared tests (parsed once, reused by every mode)
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# Running one test in one mode
# --------------------------------------------------------------------------------------

class StepFailure(Exception):
    def __init__(self, step, code=None, message="", detail="", not_implemented=None):
        super().__init__(step)
        self.step, self.code, self.message, self.detail = step, code, message, detail
        self.not_implemented = not_implemented   # name of the rejected operation, if any


@dataclasses.dataclass
class Record:
    test_id: str
    folder: str
    spec: str
    name: str
    ops: tuple
    mode: str
    status: str
    step: str = ""
    code: object = None
    code_name: str = ""
    message: str = ""
    detail: str = ""
    expect_failure: bool = False
    ni_op: str = ""          # NOT_IMPLEMENTED: the operation addOperation rejected

    def describe(self) -> str:
        s = f"[{self.mode}] {self.test_id} ({','.join(self.ops)}): "
        if self.step:
            s += f"step {self.step}"
        if self.code is not None:
            s += f" -> {self.code} ({self.code_name})"
        if self.message:
            s += f": {self.message}"
        if self.detail:
            s += f" | {self.detail}"
        return s


class _Runner:
    def __init__(self, library: Library, cache_dir=None):
        self.L = library
        self.ffi = library.ffi
        self.lib = library.lib
        self.cache_dir = cache_dir      # --cache: every compilation twice, the second from the cache

    # -- helpers -------------------------------------------------------------------------
    def _check(self, rc, step, detail=""):
        if rc != 0:
            raise StepFailure(step, rc, self.L.last_error(), detail)

    def _operand_type(self, op: Operand, dynamic: bool, keep: list):
        ffi = self.ffi
        t = ffi.new("ANeuralNetworksOperandType*")
        t.type = self.L.operand_code(op.type_name)
        dims = op.dims
        if dynamic and op.lifetime == "SUBGRAPH_OUTPUT":
            dims = (0,) * len(dims)
        t.dimensionCount = len(dims)
        if dims:
            d = ffi.new("uint32_t[]", [x & 0xFFFFFFFF for x in dims])
            keep.append(d)
            t.dimensions = d
        else:
            t.dimensions = ffi.NULL
        t.scale = op.scale
        t.zeroPoint = op.zero_point
        return t

    def _u32(self, values, keep):
        a = self.ffi.new("uint32_t[]", list(values) or [0])
        keep.append(a)
        return a

    # -- model building --------------------------------------------------------------------
    def _build_subgraph(self, test, sg, where, dynamic, st):
        ffi, lib = self.ffi, self.lib
        keep = st["keep"]
        mp = ffi.new("ANeuralNetworksModel**")
        self._check(lib.ANeuralNetworksModel_create(mp), f"Model_create{where}")
        model = mp[0]
        st["models"].append(model)
        for i, op in enumerate(sg.operands):
            t = self._operand_type(op, dynamic, keep)
            self._check(lib.ANeuralNetworksModel_addOperand(model, t),
                        f"addOperand{where}", f"operand {i} {op.type_name}{list(op.dims)}")
            lt = op.lifetime
            if lt == "CONSTANT_COPY":
                if op.data is not None and op.data.size:
                    keep.append(op.data)
                    rc = lib.ANeuralNetworksModel_setOperandValue(
                        model, i, ffi.from_buffer(op.data), op.data.nbytes)
                else:
                    rc = lib.ANeuralNetworksModel_setOperandValue(model, i, ffi.NULL, 0)
                self._check(rc, f"setOperandValue{where}", f"operand {i}")
            elif lt == "CONSTANT_REFERENCE":
                if op.data is not None and op.data.size:
                    mem = self._const_memory(test, st)
                    rc = lib.ANeuralNetworksModel_setOperandValueFromMemory(
                        model, i, mem, op.const_offset, op.data.nbytes)
                else:
                    rc = lib.ANeuralNetworksModel_setOperandValue(model, i, ffi.NULL, 0)
                self._check(rc, f"setOperandValueFromMemory{where}", f"operand {i}")
            elif lt == "NO_VALUE":
                self._check(lib.ANeuralNetworksModel_setOperandValue(model, i, ffi.NULL, 0),
                            f"setOperandValue(NO_VALUE){where}", f"operand {i}")
            elif lt == "SUBGRAPH":
                ref = op.ref_index
                if not 0 <= ref < len(test.referenced):
                    raise StepFailure("runner", None, f"operand {i}: bad subgraph index {ref}")
                if ref not in st["refmodels"]:
                    if ref in st["building"]:
                        raise StepFailure("runner", None, f"recursive subgraph reference {ref}")
                    st["building"].add(ref)
                    refmodel = self._build_subgraph(test, test.referenced[ref],
                                                    f"(ref {ref})", dynamic, st)
                    self._check(lib.ANeuralNetworksModel_finish(refmodel),
                                f"Model_finish(ref {ref})")
                    st["refmodels"][ref] = refmodel
                self._check(lib.ANeuralNetworksModel_setOperandValueFromModel(
                    model, i, st["refmodels"][ref]), f"setOperandValueFromModel{where}",
                    f"operand {i} -> subgraph {ref}")
            if op.channel_quant is not None:
                dim, scales = op.channel_quant
                keep.append(scales)
                p = ffi.new("ANeuralNetworksSymmPerChannelQuantParams*")
                p.channelDim = dim
                p.scaleCount = scales.size
                p.scales = ffi.cast("const float*", ffi.from_buffer(scales)) \
                    if scales.size else ffi.NULL
                self._check(lib.ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(
                    model, i, p), f"setOperandSymmPerChannelQuantParams{where}", f"operand {i}")
        for k, (name, ins, outs) in enumerate(sg.operations):
            try:
                code = self.L.operation_code(name)
            except KeyError:
                raise StepFailure("runner", None, f"unknown operation name {name!r}")
            rc = lib.ANeuralNetworksModel_addOperation(
                model, code, len(ins), self._u32(ins, keep), len(outs), self._u32(outs, keep))
            if rc != 0:
                msg = self.L.last_error()
                ni = (rc == self.L.enums.get("ANEURALNETWORKS_BAD_DATA", 4)
                      and "not implemented" in msg.lower())
                raise StepFailure(f"addOperation{where}", rc, msg,
                                  f"operation {k} {name}", not_implemented=name if ni else None)
        self._check(lib.ANeuralNetworksModel_identifyInputsAndOutputs(
            model, len(sg.inputs), self._u32(sg.inputs, keep),
            len(sg.outputs), self._u32(sg.outputs, keep)), f"identifyInputsAndOutputs{where}")
        return model

    def _const_memory(self, test, st):
        if st["memory"] is not None:
            return st["memory"]
        ffi, lib = self.ffi, self.lib
        size = max(test.const_size, 1)
        try:
            fd = os.memfd_create("nnapi_cts_const", 0)
        except (AttributeError, OSError):
            tf = tempfile.TemporaryFile()
            fd = os.dup(tf.fileno())
            tf.close()
        st["fd"] = fd
        os.ftruncate(fd, size)
        for sg in [test.main] + test.referenced:
            for op in sg.operands:
                if op.const_offset >= 0:
                    os.pwrite(fd, op.data.tobytes(), op.const_offset)
        mp = ffi.new("ANeuralNetworksMemory**")
        self._check(lib.ANeuralNetworksMemory_createFromFd(size, PROT_READ | PROT_WRITE, fd, 0, mp),
                    "Memory_createFromFd", f"size {size}")
        st["memory"] = mp[0]
        return mp[0]

    # -- one test in one mode ----------------------------------------------------------------
    def run(self, test: PreparedTest, mode: str) -> Record:
        rec = Record(test.test_id, test.folder, test.spec, test.name, test.ops, mode, PASSED,
                     expect_failure=test.expect_failure)
        st = {"keep": [], "models": [], "refmodels": {}, "building": set(), "memory": None,
              "fd": None, "compilation": None, "execution": None, "burst": None}
        try:
            try:
                phase = self._execute(test, mode, st)
            finally:
                self._free(st)
            if test.expect_failure:
                rec.status = FAILED
                rec.step = "expectFailure"
                rec.message = "model is marked expectFailure but every step succeeded"
                return rec
            outputs, shapes = phase
            self._compare(test, outputs, shapes)
        except StepFailure as f:
            rec.step, rec.code, rec.message, rec.detail = f.step, f.code, f.message, f.detail
            rec.code_name = self.L.code_name(f.code) if f.code is not None else ""
            if f.not_implemented:
                rec.status = NOT_IMPLEMENTED
                rec.ni_op = f.not_implemented
            elif test.expect_failure and f.step not in ("runner", "runner-error"):
                rec.status = PASSED     # the model must fail somewhere, and it did
            else:
                rec.status = FAILED
        except Exception as exc:    # a runner bug or odd data: report, never crash
            rec.status, rec.step = FAILED, "runner-error"
            rec.message = f"{type(exc).__name__}: {exc}"
        return rec

    def _execute(self, test, mode, st):
        ffi, lib = self.ffi, self.lib
        keep = st["keep"]
        dynamic = mode == "dynamic"
        main = self._build_subgraph(test, test.main, "", dynamic, st)
        if test.relaxed:
            self._check(lib.ANeuralNetworksModel_relaxComputationFloat32toFloat16(main, True),
                        "relaxComputationFloat32toFloat16")
        self._check(lib.ANeuralNetworksModel_finish(main), "Model_finish")

        cp = ffi.new("ANeuralNetworksCompilation**")
        token = hashlib.sha256(f"{test.test_id} {mode}".encode()).digest() if self.cache_dir else None
        if token:           # the first compilation writes the cache entry (its result is the second's)
            self._check(lib.ANeuralNetworksCompilation_create(main, cp), "Compilation_create")
            lib.ANeuralNetworksCompilation_setCaching(cp[0], self.cache_dir.encode(), token)
            lib.ANeuralNetworksCompilation_finish(cp[0])
            lib.ANeuralNetworksCompilation_free(cp[0])
        self._check(lib.ANeuralNetworksCompilation_create(main, cp), "Compilation_create")
        st["compilation"] = cp[0]
        if token:
            self._check(lib.ANeuralNetworksCompilation_setCaching(cp[0], self.cache_dir.encode(), token),
                        "Compilation_setCaching")
        self._check(lib.ANeuralNetworksCompilation_finish(cp[0]), "Compilation_finish")

        ep = ffi.new("ANeuralNetworksExecution**")
        self._check(lib.ANeuralNetworksExecution_create(cp[0], ep), "Execution_create")
        execution = st["execution"] = ep[0]
        if test.expect_failure and "WHILE" in test.ops:
            # expected-to-fail loops (e.g. while_infinite_loop): don't wait the default 2 s
            lib.ANeuralNetworksExecution_setLoopTimeout(execution, WHILE_EF_LOOP_TIMEOUT_NS)

        sg = test.main
        for k, idx in enumerate(sg.inputs):
            op = sg.operands[idx]
            data = op.data
            if data is None or data.size == 0:
                rc = lib.ANeuralNetworksExecution_setInput(execution, k, ffi.NULL, ffi.NULL, 0)
            else:
                keep.append(data)
                rc = lib.ANeuralNetworksExecution_setInput(
                    execution, k, ffi.NULL, ffi.from_buffer(data), data.nbytes)
            self._check(rc, "setInput", f"input {k} (operand {idx})")

        outputs = []
        for k, idx in enumerate(sg.outputs):
            op = sg.operands[idx]
            dt = DTYPES.get(op.type_name) or np.uint8
            n = _numel(op.dims)
            nbytes = max(n * np.dtype(dt).itemsize, 1)
            buf = np.full(nbytes, 0xFF, dtype=np.uint8)   # NaN / -1 if never written
            outputs.append(buf)
            rc = lib.ANeuralNetworksExecution_setOutput(
                execution, k, ffi.NULL, ffi.from_buffer(buf, require_writable=True), nbytes)
            self._check(rc, "setOutput", f"output {k} (operand {idx}), {nbytes} bytes")

        if mode in ("sync", "dynamic"):
            self._check(lib.ANeuralNetworksExecution_compute(execution), "compute")
        elif mode == "async":
            evp = ffi.new("ANeuralNetworksEvent**")
            self._check(lib.ANeuralNetworksExecution_startCompute(execution, evp), "startCompute")
            rc = lib.ANeuralNetworksEvent_wait(evp[0])
            msg = self.L.last_error() if rc else ""
            lib.ANeuralNetworksEvent_free(evp[0])
            if rc != 0:
                raise StepFailure("Event_wait", rc, msg)
        elif mode == "burst":
            bp = ffi.new("ANeuralNetworksBurst**")
            self._check(lib.ANeuralNetworksBurst_create(cp[0], bp), "Burst_create")
            st["burst"] = bp[0]
            self._check(lib.ANeuralNetworksExecution_burstCompute(execution, bp[0]),
                        "burstCompute")
        else:
            raise ValueError(f"unknown mode {mode!r}")

        shapes = []
        rank = ffi.new("uint32_t*")
        for k, idx in enumerate(sg.outputs):
            op = sg.operands[idx]
            if op.ignored:
                shapes.append(None)
                continue
            self._check(lib.ANeuralNetworksExecution_getOutputOperandRank(execution, k, rank),
                        "getOutputOperandRank", f"output {k}")
            r = rank[0]
            if r > 64:
                raise StepFailure("getOutputOperandRank", None, f"absurd rank {r}",
                                  f"output {k}")
            dims = ()
            if r:
                d = ffi.new("uint32_t[]", r)
                self._check(lib.ANeuralNetworksExecution_getOutputOperandDimensions(
                    execution, k, d), "getOutputOperandDimensions", f"output {k}")
                dims = tuple(d[j] for j in range(r))
            shapes.append(dims)
        return outputs, shapes

    def _free(self, st):
        lib = self.lib
        try:
            if st["execution"] is not None:
                lib.ANeuralNetworksExecution_free(st["execution"])
            if st["burst"] is not None:
                lib.ANeuralNetworksBurst_free(st["burst"])
            if st["compilation"] is not None:
                lib.ANeuralNetworksCompilation_free(st["compilation"])
            for m in st["models"]:
                lib.ANeuralNetworksModel_free(m)
            if st["memory"] is not None:
                lib.ANeuralNetworksMemory_free(st["memory"])
        finally:
            if st["fd"] is not None:
                try:
                    os.close(st["fd"])
                except OSError:
                    pass
            st["keep"].clear()

    # -- output checking ---------------------------------------------------------------------
    def _compare(self, test, outputs, shapes):
        sg = test.main
        for k, idx in enumerate(sg.outputs):
            op = sg.operands[idx]
            if op.ignored:
                continue
            if tuple(shapes[k]) != tuple(op.dims):
                raise StepFailure("output_shape", None,
                                  f"output {k}: dimensions {list(shapes[k])}, "
                                  f"expected {list(op.dims)}")
        if test.tolerance.get("kind") == "multinomial" or test.multinomial_tol > 0:
            self._check_multinomial(test, outputs)
            return
        for k, idx in enumerate(sg.outputs):
            op = sg.operands[idx]
            if op.ignored:
                continue
            expected = op.data
            n = _numel(op.dims)
            if n == 0:
                continue     # zero-sized output: shape only
            if expected is None or expected.size != n:
                raise StepFailure("runner", None,
                                  f"output {k}: expected data has {0 if expected is None else expected.size} "
                                  f"values for dims {list(op.dims)}")
            actual = outputs[k][: expected.nbytes].view(expected.dtype)
            err = compare_values(actual, expected, op.type_name, test.tolerance)
            if err:
                raise StepFailure("output_values", None, f"output {k} ({op.type_name}): {err}")

    def _check_multinomial(self, test, outputs):
        sg = test.main
        inp = sg.operands[sg.inputs[0]]
        out = sg.operands[sg.outputs[0]]
        tol = test.tolerance.get("probabilityTolerance", test.multinomial_tol) or 0.025
        if len(inp.dims) != 2 or len(out.dims) != 2:
            raise StepFailure("runner", None, "multinomial check needs rank-2 input/output")
        batches, classes = inp.dims
        samples = out.dims[1]
        logits = inp.data.astype(np.float64).reshape(batches, classes)
        got = outputs[0][: batches * samples * 4].view(np.int32).reshape(batches, samples)
        if ((got < 0) | (got >= classes)).any():
            raise StepFailure("output_values", None,
                              f"sampled class index out of range [0,{classes})")
        for b in range(batches):
            with np.errstate(all="ignore"):           # mutated (fuzzed) logits may be inf / NaN
                p = np.exp(logits[b] - logits[b].max())
                p /= p.sum()
            freq = np.bincount(got[b], minlength=classes) / float(samples)
            bad = np.abs(freq - p) > tol
            if bad.any():
                i = int(np.argmax(bad))
                raise StepFailure("output_values", None,
                                  f"batch {b}: {int(bad.sum())} classes outside tolerance {tol}; "
                                  f"class {i}: frequency {freq[i]:.4f}, probability {p[i]:.4f}")


def _numel(dims) -> int:
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


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------

class Results:
    def __init__(self, modes, library_desc=""):
        self.modes = tuple(modes)
        self.library_desc = library_desc
        self.records: list = []
        self.load_errors: list = []           # (test_id, message): unparseable vectors
        self.counts = collections.defaultdict(
            lambda: {m: collections.Counter() for m in self.modes})
        self.totals = collections.Counter()
        self.elapsed = 0.0

    def add(self, rec: Record):
        self.records.append(rec)
        self.totals[rec.status] += 1
        for op in rec.ops:
            self.counts[op][rec.mode][rec.status] += 1

    @property
    def passed(self):
        return self.totals[PASSED]

    @property
    def failed(self):
        return self.totals[FAILED] + len(self.load_errors)

    @property
    def not_implemented(self):
        return self.totals[NOT_IMPLEMENTED]

    @property
    def failures(self):
        return [r for r in self.records if r.status == FAILED]

    def failures_for(self, mode):
        return [r for r in self.records if r.status == FAILED and r.mode == mode]

    def records_for(self, mode=None, status=None, ops_subset_of=None):
        out = []
        for r in self.records:
            if mode is not None and r.mode != mode:
                continue
            if status is not None and r.status != status:
                continue
            if ops_subset_of is not None and not set(r.ops) <= set(ops_subset_of):
                continue
            out.append(r)
        return out

    def op_counts(self, op, mode):
        c = self.counts.get(op, {}).get(mode) if op in self.counts else None
        c = c or collections.Counter()
        return {s: c[s] for s in STATUSES}

    def table(self, ops=None) -> str:
        ops = sorted(self.counts) if ops is None else list(ops)
        w = max([len(o) for o in ops] + [9])
        head1 = " " * w + "".join(f" | {m:^17}" for m in self.modes)
        head2 = f"{'operation':<{w}}" + "".join(f" | {'pass':>5} {'fail':>5} {'n/i':>5}"
                                                for _ in self.modes)
        lines = [head1, head2, "-" * len(head2)]
        for op in ops:
            row = f"{op:<{w}}"
            for m in self.modes:
                c = self.op_counts(op, m)
                row += f" | {c[PASSED]:>5} {c[FAILED]:>5} {c[NOT_IMPLEMENTED]:>5}"
            lines.append(row)
        lines.append("-" * len(head2))
        row = f"{'(tests)':<{w}}"
        for m in self.modes:
            c = collections.Counter(r.status for r in self.records if r.mode == m)
            row += f" | {c[PASSED]:>5} {c[FAILED]:>5} {c[NOT_IMPLEMENTED]:>5}"
        lines.append(row)
        return "\n".join(lines)

    def failure_report(self, limit=20, mode=None) -> str:
        fails = self.failures_for(mode) if mode else self.failures
        lines = [f"cannot load {tid}: {msg}" for tid, msg in self.load_errors]
        shown = fails if limit is None else fails[:limit]
        lines += [r.describe() for r in shown]
        if len(shown) < len(fails):
            lines.append(f"... and {len(fails) - len(shown)} more failures (-v shows all)")
        return "\n".join(lines)

    def not_implemented_ops(self) -> dict:
        """{operation rejected as not implemented: number of tests (first mode run)}"""
        first = self.modes[0] if self.modes else None
        c = collections.Counter(r.ni_op for r in self.records
                                if r.status == NOT_IMPLEMENTED and r.mode == first)
        return dict(sorted(c.items()))

    def summary_line(self) -> str:
        s = f"{self.passed} passed, {self.failed} failed"
        if self.not_implemented:
            s += f", {self.not_implemented} skipped"
        return s


class Watchdog:
    """Kill the process, loudly, when one (test, mode) runs longer than `timeout` seconds.

    A hung library must not hang the run silently: a daemon thread prints the test and
    exits with status 3; faulthandler is armed as a backstop in case the GIL is held.
    """

    def __init__(self, timeout):
        self.timeout = timeout
        self.current = None
        self.deadline = None
        self._lock = threading.Lock()
        if timeout:
            threading.Thread(target=self._watch, name="cts-watchdog", daemon=True).start()

    def start(self, label):
        if not self.timeout:
            return
        with self._lock:
            self.current, self.deadline = label, time.monotonic() + self.timeout
        try:
            faulthandler.dump_traceback_later(self.timeout + 30, exit=True)
        except Exception:
            pass

    def stop(self):
        if not self.timeout:
            return
        with self._lock:
            self.current = self.deadline = None
        try:
            faulthandler.cancel_dump_traceback_later()
        except Exception:
            pass

    def _watch(self):
        while True:
            time.sleep(1.0)
            with self._lock:
                label, deadline = self.current, self.deadline
            if deadline is not None and time.monotonic() > deadline:
                sys.stderr.write(f"\nconformance: TIMEOUT after {self.timeout}s in {label}; "
                                 "aborting the run\n")
                sys.stderr.flush()
                faulthandler.dump_traceback(all_threads=True)
                os._exit(3)


# --------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------

def run(ops=None, modes=ALL_MODES, lib_path=None, cts_dir=None, name_filter=None,
        spec_filter=None, progress=None, trace=False, library=None,
        timeout=600, cache_dir=None) -> Results:
    """Run the conformance vectors against the library; return Results.

    ops: only tests that use at least one of these operations (None: all).
    modes: any of ALL_MODES.  timeout: seconds one (test, mode) may take before the
    process is aborted with a message (0/None: no limit).  cache_dir: every compilation is made
    twice with setCaching(cache_dir, a token of the test and mode); the second, read from the
    cache, is the one run.  Raises ConformanceSkip when there are no vectors and
    OSError/cffi errors when the library cannot be loaded.
    """
    cts_dir = cts_dir or default_cts_dir()
    if not cts_available(cts_dir):
        raise ConformanceSkip(skip_message(cts_dir))
    modes = tuple(m for m in ALL_MODES if m in set(modes or ALL_MODES))
    bad = set(modes or ()) - set(ALL_MODES)
    if bad:
        raise ValueError(f"unknown mode(s): {sorted(bad)}")
    if isinstance(ops, str):
        ops = [o for o in ops.split(",") if o]
    ops = [o.strip().upper() for o in ops] if ops else None
    lib = library or Library(lib_path or default_lib_path())
    runner = _Runner(lib, cache_dir)
    watchdog = Watchdog(timeout)
    results = Results(modes, lib.describe())
    t0 = time.monotonic()
    last_spec = None
    for test in load_vectors(cts_dir, ops, name_filter, spec_filter):
        if isinstance(test, tuple):
            results.load_errors.append(test)
            continue
        if progress and test.spec != last_spec:
            progress(test)
            last_spec = test.spec
        for mode in modes:
            if mode == "dynamic" and not test.dynamic_eligible:
                continue
            if trace:
                sys.stderr.write(f"RUN [{mode}] {test.test_id}\n")
                sys.stderr.flush()
            watchdog.start(f"[{mode}] {test.test_id}")
            try:
                results.add(runner.run(test, mode))
            finally:
                watchdog.stop()
    results.elapsed = time.monotonic() - t0
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Run the NNAPI conformance vectors against "
                                             "libneuralnetworks.so through its C ABI.")
    ap.add_argument("--lib", help="library path (default: $NNAPI_PY_LIB or "
                                  "build/lib/libneuralnetworks.so)")
    ap.add_argument("--feature-level", type=int, choices=range(1, 9), metavar="N",
                    help="run build/lib/feature-level-N/libneuralnetworks.so")
    ap.add_argument("--cts", help="vector directory (default: $NNAPI_PY_CTS or ../shared/cts)")
    ap.add_argument("--ops", help="comma-separated operations: only tests using any of them")
    ap.add_argument("--modes", default=",".join(ALL_MODES),
                    help="comma-separated subset of " + ",".join(ALL_MODES))
    ap.add_argument("--spec", help="comma-separated substrings of spec (file) names")
    ap.add_argument("--name", help="comma-separated substrings of test names")
    ap.add_argument("--limit", type=int, default=20, help="failures to list (default 20)")
    ap.add_argument("--trace", action="store_true",
                    help="print each (mode, test) to stderr before running it "
                         "(locates a crash of the library)")
    ap.add_argument("--timeout", type=float, default=600,
                    help="abort the run if one test takes longer (seconds, 0: never)")
    ap.add_argument("--progress", action="store_true", help="print each spec as it starts")
    ap.add_argument("--cache", metavar="DIR", help="compile every model twice with setCaching(DIR, a token "
                                                    "per test and mode): the second, from the cache, runs")
    ap.add_argument("-v", "--verbose", action="store_true", help="list all failures")
    args = ap.parse_args(argv)

    faulthandler.enable()
    cts_dir = args.cts or default_cts_dir()
    if not cts_available(cts_dir):
        print(skip_message(cts_dir))
        return 0
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in ALL_MODES]
    if bad:
        ap.error(f"unknown mode(s) {bad}; choose from {','.join(ALL_MODES)}")
    if args.lib and args.feature_level:
        ap.error("--lib and --feature-level name two libraries: give one")
    lib_path = args.lib or default_lib_path(args.feature_level)
    if not os.path.exists(lib_path):
        print(f"conformance: library {lib_path} not found (run `make lib`)", file=sys.stderr)
        return 2
    try:
        library = Library(lib_path)
    except Exception as exc:
        print(f"conformance: cannot load {lib_path}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 2
    print(f"library: {library.describe()}")
    print(f"vectors: {cts_dir}")

    def progress(test):
        sys.stderr.write(f"  {test.folder}/{test.spec}\n")
        sys.stderr.flush()

    def split(s):
        return [x.strip() for x in s.split(",") if x.strip()]

    results = run(ops=args.ops, modes=modes, cts_dir=cts_dir, library=library,
                  name_filter=split(args.name) if args.name else None,
                  spec_filter=split(args.spec) if args.spec else None,
                  progress=progress if args.progress else None, trace=args.trace,
                  timeout=args.timeout, cache_dir=args.cache)
    print()
    print(results.table())
    ni = results.not_implemented_ops()
    if ni:
        print()
        print(f"not implemented (operation rejected at addOperation: tests, mode {modes[0]}):")
        print(textwrap.fill(", ".join(f"{op}={n}" for op, n in ni.items()), width=100,
                            initial_indent="  ", subsequent_indent="  "))
    fails = results.failures
    if fails or results.load_errors:
        print()
        print(f"failures ({len(fails) + len(results.load_errors)}):")
        print(results.failure_report(limit=None if args.verbose else args.limit))
    print()
    print(f"time: {results.elapsed:.1f}s")
    print(results.summary_line())
    return 0 if results.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
