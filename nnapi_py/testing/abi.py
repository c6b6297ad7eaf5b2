"""The library under test through its C ABI only (cffi ABI mode, ``ffi.dlopen``), as an application links it:
Library (the loaded library, its enumerators and result-code names) and ModelBuilder (a prepared test's model
built call by call: operands, constants in memory, referenced subgraphs, per-channel quantization)."""

from __future__ import annotations

import os
import tempfile

from ..cdef import build_cdef, header_paths
from .vectors import REPO_ROOT, Operand

PROT_READ, PROT_WRITE = 0x1, 0x2
# JSON type names whose NNAPI enumerator is spelled differently
TYPE_ALIASES = {"SUBGRAPH": "MODEL"}


def default_lib_path(feature_level=None) -> str:
    """NNAPI_PY_LIB, else the package's library where nnapi_py.library_path() looks (inside the installed
    package, else build/lib/libneuralnetworks.so); feature_level=N (1..8): that level's library
    (feature-level-N/), NNAPI_PY_LIB aside.  Not built yet: the build tree's path (for the caller's
    "not found" message)."""
    if feature_level is None and os.environ.get("NNAPI_PY_LIB"):
        return os.environ["NNAPI_PY_LIB"]
    sub = () if feature_level is None else (f"feature-level-{int(feature_level)}",)
    package = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), *sub, "libneuralnetworks.so")
    return package if os.path.exists(package) else os.path.join(REPO_ROOT, "build", "lib", *sub, "libneuralnetworks.so")


class Library:
    def __init__(self, lib_path: str, header: str = None, extra_header: str = None):
        import cffi
        if header is None:
            header, extra_header = header_paths()
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


class StepFailure(Exception):
    def __init__(self, step, code=None, message="", detail="", not_implemented=None):
        super().__init__(step)
        self.step, self.code, self.message, self.detail = step, code, message, detail
        self.not_implemented = not_implemented   # name of the rejected operation, if any


class ModelBuilder:
    """Builds a PreparedTest's models through the library (the runner's first steps)."""
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

