"""Build build/lib/libneuralnetworks.so: the NNAPI C ABI as a cffi-embedded Python runtime.

Every ANeuralNetworks* prototype is read from include/android/NeuralNetworks.h and turned
into (1) an ``extern "Python"`` callback ``_nnpy_<name>`` whose arguments are cheap to
convert (handles and raw buffers become uintptr_t, an ANeuralNetworksOperandType* is
unpacked into scalars) and (2) an exported C function ``<name>`` that makes sure the
runtime is up (else returns ANEURALNETWORKS_OP_FAILED) and forwards.  Nothing is written by
hand per function: the rules below apply to parameter types.

Besides the library itself it writes one library per NNAPI feature level,
``<out>/feature-level-N/libneuralnetworks.so`` for N = 1..8: the same compiled object relinked
with an export list of the functions of levels <= N (the header's "FLn (API m)" notes; levels
6-8 export level 5's set, no function was added after it) and a baked-in default level, so a
client that decides which Android release it talks to by the symbols it finds (TFLite's NNAPI
delegate, PyTorch's loader) sees exactly that release.

Usage: python build_ffi.py [--out build/lib] [--tmp DIR] [--package-root DIR] [--no-levels]
                           [--sanitize thread|address,undefined|...]
(--sanitize: the library's own C layer compiled and linked with -fsanitize=..., for the tests that
check it with ThreadSanitizer or AddressSanitizer; a client of such a build must be built with the same
sanitizer)
(see Makefile)
"""
import argparse
import os
import re
import shlex
import site
import subprocess
import sys
import sysconfig

import cffi

ROOT = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(ROOT, "include", "android", "NeuralNetworks.h")
EXTRA_HEADER = os.path.join(ROOT, "include", "nnapi_py.h")
SL_HEADER = os.path.join(ROOT, "include", "NeuralNetworksSupportLibraryImpl.h")
SL_GENERATOR = os.path.join(ROOT, "tools", "gen_sl_header.py")
SL_ENTRY = "ANeuralNetworks_getSLDriverImpl"
SL_FIRST_LEVEL = 5           # the Support Library table exists from feature level 5
OP_FAILED = 5

_LEVEL_NOTE = re.compile(r"^/\*\s*FL(\d)\s*\(API \d+\)[^\n]*\n(?:int|void|uint64_t|int64_t)\s+(ANeuralNetworks\w+)\(", re.M)
FEATURE_LEVELS = range(1, 9)
LAST_FUNCTION_LEVEL = 5      # no ANeuralNetworks* function was added at feature levels 6..8
_PROTO = re.compile(r"^(int|void|uint64_t|int64_t)\s+(ANeuralNetworks\w+)\((.*)\);\s*$", re.M)



# Calls that may block for long (kernels, waits) are not serialised by the C-host call gate
# (see _nnpy_gate_in): other threads must be able to enter meanwhile.
_UNGATED = {"ANeuralNetworksExecution_compute", "ANeuralNetworksExecution_burstCompute",
            "ANeuralNetworksEvent_wait"}

def parse_prototypes(text):
    protos = []
    for ret, name, params in _PROTO.findall(text):
        ps = []
        if params.strip() not in ("", "void"):
            for p in params.split(","):
                p = p.strip()
                m = re.match(r"^(.*?)(\w+)$", p)
                ps.append((m.group(1).strip(), m.group(2)))
        protos.append((ret, name, ps))
    return protos


def function_levels(text):
    """{function: the feature level that introduced it}, from the header's per-prototype notes."""
    return {name: int(level) for level, name in _LEVEL_NOTE.findall(text)}


def exports_at(level, levels):
    """The ANeuralNetworks* functions a feature-level-`level` library exports."""
    return sorted(n for n, lv in levels.items() if lv <= min(level, LAST_FUNCTION_LEVEL))


_OPAQUE = re.compile(r"^(const\s+)?(ANeuralNetworks(Model|Compilation|Execution|Memory|MemoryDesc|Burst|Event|Device)|AHardwareBuffer)\s*\*$")
_OPAQUE_OUT = re.compile(r"^ANeuralNetworks\w+\s*\*\s*\*$")
_OPAQUE_ARRAY = re.compile(r"^const ANeuralNetworks\w+\s*\*\s*const\s*\*$")
_OPERAND_TYPE = "const ANeuralNetworksOperandType*"


def lower(ptype, pname):
    """Rule for one C parameter -> (python-side params [(ctype, name)], C expression list)."""
    t = ptype.replace(" *", "*").strip()
    if t == _OPERAND_TYPE:
        n = pname
        return ([("uintptr_t", n), ("int32_t", n + "_code"), ("uint32_t", n + "_count"),
                 ("uint32_t", n + "_d0"), ("uint32_t", n + "_d1"), ("uint32_t", n + "_d2"),
                 ("uint32_t", n + "_d3"), ("uintptr_t", n + "_dims"), ("float", n + "_scale"),
                 ("int32_t", n + "_zp")],
                [f"(uintptr_t){n}", f"{n} ? {n}->type : 0", f"{n} ? {n}->dimensionCount : 0",
                 f"_nnpy_dim({n}, 0)", f"_nnpy_dim({n}, 1)", f"_nnpy_dim({n}, 2)", f"_nnpy_dim({n}, 3)",
                 f"{n} ? (uintptr_t){n}->dimensions : 0", f"{n} ? {n}->scale : 0.0f",
                 f"{n} ? {n}->zeroPoint : 0"])
    if _OPAQUE.match(t) or t in ("const void*", "void*"):
        return [("uintptr_t", pname)], [f"(uintptr_t){pname}"]
    if _OPAQUE_OUT.match(t):
        return [("uintptr_t*", pname)], [f"(uintptr_t*){pname}"]
    if _OPAQUE_ARRAY.match(t):
        return [("const uintptr_t*", pname)], [f"(const uintptr_t*){pname}"]
    return [(ptype, pname)], [pname]


def generate(protos, export=True):
    cdef = [
        "typedef struct { int32_t type; uint32_t dimensionCount; const uint32_t* dimensions; float scale; int32_t zeroPoint; } ANeuralNetworksOperandType;",
        "typedef struct { uint32_t channelDim; uint32_t scaleCount; const float* scales; } ANeuralNetworksSymmPerChannelQuantParams;",
        "typedef int32_t ANeuralNetworksOperationType;",
        'extern "Python" int _nnpy_ready(void);',
        'extern "Python" void _nnpy_flush_operands(uintptr_t model, uintptr_t records, uint32_t count);',
        'extern "Python" void _nnpy_shutdown(void);',
        "int nnpy_owns_interpreter(void);",
        "const char* nnpy_so_path(void);",
        "int nnpy_force_failure(void);",
        "int nnpy_library_level(void);",
        "const char* nnpy_baked_paths(void);",
        "const char* nnpy_checker(void);",
        "void nnpy_batch_operands_for(uintptr_t model);",
        "void nnpy_stop_batching(uintptr_t model);",
    ]
    csrc = []
    for ret, name, params in protos:
        py_params, c_args = [], []
        for ptype, pname in params:
            p, a = lower(ptype, pname)
            py_params += p
            c_args += a
        pdecl = ", ".join(f"{t} {n}" for t, n in py_params) or "void"
        cdef.append(f'extern "Python" {ret} _nnpy_{name}({pdecl});')
        csrc.append(f"static {ret} _nnpy_{name}({pdecl});")
        cparams = ", ".join(f"{t} {n}" for t, n in params) or "void"
        call = f"_nnpy_{name}({', '.join(c_args)})"
        # Rule: a function taking an ANeuralNetworksOperandType* also gets a slim callback,
        # used when that pointer is NULL (the common case), that skips the unpacked fields.
        typed = [pn for pt, pn in params if pt.replace(" *", "*").strip() == _OPERAND_TYPE]
        if typed and name != "ANeuralNetworksModel_addOperand":
            tp = typed[0]
            slim = [(t, n) for t, n in py_params if not n.startswith(tp + "_") and n != tp]
            slim_args = [a for (t, n), a in zip(py_params, c_args) if not n.startswith(tp + "_") and n != tp]
            sdecl = ", ".join(f"{t} {n}" for t, n in slim)
            cdef.append(f'extern "Python" {ret} _nnpy_{name}_untyped({sdecl});')
            csrc.append(f"static {ret} _nnpy_{name}_untyped({sdecl});")
            call = f"({tp} == NULL ? _nnpy_{name}_untyped({', '.join(slim_args)}) : {call})"
        gated = name not in _UNGATED
        if ret == "void":
            body = (f"    if (_nnpy_up()) {{ _nnpy_sync(); int g_ = _nnpy_gate_in(); {call}; _nnpy_gate_out(g_); }}"
                    if gated else f"    if (_nnpy_up()) {{ _nnpy_sync(); {call}; }}")
        elif ret == "int":
            # rule: handle out-parameters are NULL whenever the call fails, even with no runtime
            outs = [pn for pt, pn in params if _OPAQUE_OUT.match(pt.replace(" *", "*").strip())]
            down = "".join(f"if ({pn}) *{pn} = NULL; " for pn in outs)
            pre = ""
            if name == "ANeuralNetworksModel_addOperand":
                pre = "    if (_nnpy_batched_add((uintptr_t)model, type)) return ANEURALNETWORKS_NO_ERROR;\n"
            tail = (f"    int g_ = _nnpy_gate_in();\n    int r_ = {call};\n    _nnpy_gate_out(g_);\n    return r_;"
                    if gated else f"    return {call};")
            body = (f"    if (!_nnpy_up()) {{ {down}return ANEURALNETWORKS_OP_FAILED; }}\n{pre}"
                    f"    _nnpy_sync();\n{tail}")
        else:  # uint64_t / int64_t getters: documented constants when the runtime is down
            fallback = {"ANeuralNetworks_getDefaultLoopTimeout": "2000000000ULL",
                        "ANeuralNetworks_getMaximumLoopTimeout": "15000000000ULL",
                        "ANeuralNetworks_getRuntimeFeatureLevel": "_nnpy_level_code()"}[name]
            body = f"    if (!_nnpy_up()) return {fallback};\n    return {call};"
        csrc.append(f"{'NNPY_EXPORT' if export else 'static'} {ret} {name}({cparams})\n{{\n{body}\n}}\n")
    return "\n".join(cdef), "\n".join(csrc)


# ---- the NNAPI Support Library table (include/NeuralNetworksSupportLibraryImpl.h) ----------
# The header is generated by tools/gen_sl_header.py; here it is checked against the prototypes
# (a slot named after one of the 69 functions must have its exact signature) and, where the
# generator is present, against a fresh rendering.  The C table is filled from the slots parsed
# out of that header, each with the function of the same name: the exported entry points
# themselves, or the static functions below (SL_ functions, extension functions).
_SLOT = re.compile(r"^    (.+?)\s*\(\*(\w+)\)\((.*)\);$", re.M)

# table-only functions forwarded to Python by the generator's rules (generate(export=False))
SL_FORWARDED = ("ANeuralNetworksDevice_getExtensionSupport", "ANeuralNetworksModel_getExtensionOperandType",
                "ANeuralNetworksModel_getExtensionOperationType", "ANeuralNetworksModel_setOperandExtensionData",
                "ANeuralNetworksCompilation_addExtensionAttribute", "ANeuralNetworksExecution_addExtensionAttribute",
                "SL_ANeuralNetworksCompilation_setCachingFromFds",
                "SL_ANeuralNetworksDevice_getNumberOfCacheFilesNeeded",
                "SL_ANeuralNetworksDevice_getPerformanceInfo", "SL_ANeuralNetworksDevice_getVendorExtensionCount",
                "SL_ANeuralNetworksDevice_getVendorExtensionName")
# written in SL_C below: callbacks into the client, and getters that only read a C struct
SL_HANDWRITTEN_PREFIXES = ("SL_ANeuralNetworksDiagnostic", "SL_ANeuralNetworksDevice_forEach")


def sl_slots(sl_text):
    """(FL5 slots, FL8 extra slots) of the header: [(return type, name, parameters)] in order."""
    def struct(name):
        m = re.search(r"typedef struct %s \{\n(.*?)\n\} %s;" % (name, name), sl_text, re.S)
        assert m, f"{SL_HEADER}: struct {name} not found"
        return [(r.strip(), n, "" if p.strip() == "void" else p.strip()) for r, n, p in _SLOT.findall(m.group(1))]
    return struct("NnApiSLDriverImplFL5"), struct("NnApiSLDriverImplFL8")


def check_sl_header(nn_text, sl_text, protos):
    fl5, fl8 = sl_slots(sl_text)
    assert len(fl5) == 104 and len(fl8) == 2, f"{SL_HEADER}: {len(fl5)} FL5 and {len(fl8)} FL8 slots (104, 2)"
    by_name = {name: (ret, ", ".join(f"{t} {n}" for t, n in ps)) for ret, name, ps in protos}
    for ret, name, params in fl5 + fl8:
        if name in by_name:
            assert (ret, params) == by_name[name], (
                f"{SL_HEADER}: slot {name} is {ret} ({params}), the prototype is {by_name[name]}")
        else:
            assert name in SL_FORWARDED or name.startswith(SL_HANDWRITTEN_PREFIXES), f"no implementation of slot {name}"
    if os.path.exists(SL_GENERATOR):
        import importlib.util
        spec = importlib.util.spec_from_file_location("gen_sl_header", SL_GENERATOR)
        gen = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gen)
        assert gen.render(nn_text) == sl_text, (f"{SL_HEADER} differs from what tools/gen_sl_header.py makes of "
                                               f"{HEADER}: regenerate it (python tools/gen_sl_header.py > ...)")
    return fl5, fl8


def generate_sl(fl5, fl8):
    forwarded = []
    for ret, name, params in fl5 + fl8:
        if name in SL_FORWARDED:
            forwarded.append((ret, name, [(re.match(r"^(.*?)(\w+)$", p.strip()).group(1).strip(),
                                           re.match(r"^(.*?)(\w+)$", p.strip()).group(2)) for p in params.split(",")]))
    cdef, csrc = generate(forwarded, export=False)
    cdef = "\n".join(line for line in cdef.splitlines() if any(f"_nnpy_{n}(" in line for n in SL_FORWARDED))
    slots = ",\n".join(f"        .{name} = {name}" for _, name, _ in fl5)
    extra = ",\n".join(f"    .{name} = {name}" for _, name, _ in fl8)
    table = (f"#define NNPY_SL_TABLE(level) {{ \\\n    .base = {{ \\\n        .base = {{ .implFeatureLevel = (level) }}, \\\n"
             + slots.replace("\n", " \\\n") + " \\\n    }, \\\n" + extra.replace("\n", " \\\n") + " \\\n}\n")
    n5 = len(fl5)
    diag = NNPY_DIAG_STRUCT.strip("\n")
    return (SL_CDEF.replace("@NNPY_DIAG_STRUCT@", diag) + "\n" + cdef,
            csrc + SL_C.replace("@NNPY_DIAG_STRUCT@", diag) + table + SL_TABLES.replace("NNPY_FL5_SLOTS", str(n5)))


# the diagnostics record nnapi_py/sl.py fills: declared once, for cffi (SL_CDEF) and the C source (SL_C)
NNPY_DIAG_STRUCT = r"""
typedef struct {
    int32_t session; int64_t version; uint8_t hash[32]; const char* devices; int32_t error;
    int32_t in_class; int32_t out_class; uint64_t compile_ns; int32_t mode;
    uint64_t runtime_ns; uint64_t driver_ns; uint64_t hardware_ns;
    int32_t caching; int32_t control_flow; int32_t dynamic;
} nnpy_diag;
"""

SL_CDEF = r"""
typedef struct { float execTime; float powerUsage; } SL_ANeuralNetworksPerformanceInfo;
@NNPY_DIAG_STRUCT@
void nnpy_diag_fire(int execution, nnpy_diag* info);
extern "Python" void _nnpy_sl_diagnostics(int on);
extern "Python" int _nnpy_sl_operand_performance(uintptr_t device, uintptr_t context, uintptr_t callback,
                                                 int32_t* types, float* perf, uint32_t cap, uint32_t* count);
extern "Python" int _nnpy_sl_extension_operand_types(uintptr_t device, uint32_t index, uintptr_t context,
                                                     uintptr_t callback);
"""

SL_C = r"""
/* ---- Support Library: diagnostics and the callbacks into the client ----------------------
   The info a diagnostic callback receives is one of these, filled by nnapi_py/sl.py and alive
   during the callback; the getters only read it (a NULL info reads as zeros). */
@NNPY_DIAG_STRUCT@

static pthread_mutex_t _nnpy_diag_lock = PTHREAD_MUTEX_INITIALIZER;
static ANeuralNetworksDiagnosticCompilationFinishedCallback _nnpy_diag_ccb;
static ANeuralNetworksDiagnosticExecutionFinishedCallback _nnpy_diag_ecb;
static void* _nnpy_diag_ctx;
static void _nnpy_sl_diagnostics(int on);

/* called by Python (which gives up the GIL around the call): the client's callback */
static void nnpy_diag_fire(int execution, nnpy_diag* info) {
    pthread_mutex_lock(&_nnpy_diag_lock);
    ANeuralNetworksDiagnosticCompilationFinishedCallback ccb = _nnpy_diag_ccb;
    ANeuralNetworksDiagnosticExecutionFinishedCallback ecb = _nnpy_diag_ecb;
    void* ctx = _nnpy_diag_ctx;
    pthread_mutex_unlock(&_nnpy_diag_lock);
    if (execution && ecb) ecb(ctx, (const ANeuralNetworksDiagnosticExecutionInfo*)(void*)info);
    if (!execution && ccb) ccb(ctx, (const ANeuralNetworksDiagnosticCompilationInfo*)(void*)info);
}

/* NULL for a callback: that kind is not reported; both NULL: diagnostics off (Android would
   call a NULL pointer). */
static void SL_ANeuralNetworksDiagnostic_registerCallbacks(
        ANeuralNetworksDiagnosticCompilationFinishedCallback compilationCallback,
        ANeuralNetworksDiagnosticExecutionFinishedCallback executionCallback, void* callbackContext)
{
    pthread_mutex_lock(&_nnpy_diag_lock);
    _nnpy_diag_ccb = compilationCallback;
    _nnpy_diag_ecb = executionCallback;
    _nnpy_diag_ctx = callbackContext;
    pthread_mutex_unlock(&_nnpy_diag_lock);
    if (_nnpy_up()) {
        _nnpy_sync();
        int g_ = _nnpy_gate_in();
        _nnpy_sl_diagnostics(compilationCallback != NULL || executionCallback != NULL);
        _nnpy_gate_out(g_);
    }
}

#define NNPY_DIAG(kind, T, name, expr) \
    static T SL_ANeuralNetworksDiagnostic##kind##Info_##name(const ANeuralNetworksDiagnostic##kind##Info* i) { \
        const nnpy_diag* d = (const nnpy_diag*)(const void*)i; \
        if (!d) return (T)0; \
        return (T)(expr); \
    }
#define NNPY_DIAG_BOTH(T, name, expr) NNPY_DIAG(Compilation, T, name, expr) NNPY_DIAG(Execution, T, name, expr)
NNPY_DIAG_BOTH(int32_t, getSessionId, d->session)
NNPY_DIAG_BOTH(int64_t, getNnApiVersion, d->version)
NNPY_DIAG_BOTH(const uint8_t*, getModelArchHash, d->hash)
NNPY_DIAG_BOTH(const char*, getDeviceIds, d->devices)
NNPY_DIAG_BOTH(ANeuralNetworksDiagnosticDataClass, getInputDataClass, d->in_class)
NNPY_DIAG_BOTH(ANeuralNetworksDiagnosticDataClass, getOutputDataClass, d->out_class)
NNPY_DIAG_BOTH(bool, isCachingEnabled, d->caching != 0)
NNPY_DIAG_BOTH(bool, isControlFlowUsed, d->control_flow != 0)
NNPY_DIAG_BOTH(bool, areDynamicTensorsUsed, d->dynamic != 0)
NNPY_DIAG(Compilation, int32_t, getErrorCode, d->error)
NNPY_DIAG(Compilation, uint64_t, getCompilationTimeNanos, d->compile_ns)
NNPY_DIAG(Execution, uint32_t, getErrorCode, d->error)
NNPY_DIAG(Execution, ANeuralNetworksDiagnosticExecutionMode, getExecutionMode, d->mode)
NNPY_DIAG(Execution, uint64_t, getRuntimeExecutionTimeNanos, d->runtime_ns)
NNPY_DIAG(Execution, uint64_t, getDriverExecutionTimeNanos, d->driver_ns)
NNPY_DIAG(Execution, uint64_t, getHardwareExecutionTimeNanos, d->hardware_ns)

static int _nnpy_sl_operand_performance(uintptr_t device, uintptr_t context, uintptr_t callback,
                                        int32_t* types, float* perf, uint32_t cap, uint32_t* count);
static int _nnpy_sl_extension_operand_types(uintptr_t device, uint32_t index, uintptr_t context, uintptr_t callback);

#define NNPY_MAX_OPERAND_TYPES 64
/* Python checks the arguments and lists the figures; the client's callback runs here, outside
   Python. */
static int SL_ANeuralNetworksDevice_forEachOperandPerformanceInfo(
        const ANeuralNetworksDevice* device, void* context,
        void (*callback)(SL_ANeuralNetworksOperandPerformanceInfo, void*))
{
    int32_t types[NNPY_MAX_OPERAND_TYPES];
    float perf[2 * NNPY_MAX_OPERAND_TYPES];
    uint32_t n = 0;
    if (!_nnpy_up()) return ANEURALNETWORKS_OP_FAILED;
    _nnpy_sync();
    int g_ = _nnpy_gate_in();
    int r_ = _nnpy_sl_operand_performance((uintptr_t)device, (uintptr_t)context, (uintptr_t)callback,
                                          types, perf, NNPY_MAX_OPERAND_TYPES, &n);
    _nnpy_gate_out(g_);
    if (r_ != ANEURALNETWORKS_NO_ERROR) return r_;
    for (uint32_t k = 0; k < n && k < NNPY_MAX_OPERAND_TYPES; k++) {
        SL_ANeuralNetworksOperandPerformanceInfo p;
        p.operandType = types[k];
        p.performanceInfo.execTime = perf[2 * k];
        p.performanceInfo.powerUsage = perf[2 * k + 1];
        callback(p, context);
    }
    return ANEURALNETWORKS_NO_ERROR;
}

/* No device has a vendor extension: after the argument checks every index is out of range. */
static int SL_ANeuralNetworksDevice_forEachVendorExtensionOperandTypeInformation(
        const ANeuralNetworksDevice* device, uint32_t vendorExtensionIndex, void* context,
        void (*callback)(SL_ANeuralNetworksExtensionOperandTypeInformation, void*))
{
    if (!_nnpy_up()) return ANEURALNETWORKS_OP_FAILED;
    _nnpy_sync();
    int g_ = _nnpy_gate_in();
    int r_ = _nnpy_sl_extension_operand_types((uintptr_t)device, vendorExtensionIndex, (uintptr_t)context,
                                              (uintptr_t)callback);
    _nnpy_gate_out(g_);
    return r_;
}
"""

SL_TABLES = r"""
/* One complete table per layout level; a slot of a wrong type is a compile error. */
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wincompatible-pointer-types"
static NnApiSLDriverImplFL8 _nnpy_sl_tables[4] = {
    NNPY_SL_TABLE(ANEURALNETWORKS_FEATURE_LEVEL_5), NNPY_SL_TABLE(ANEURALNETWORKS_FEATURE_LEVEL_6),
    NNPY_SL_TABLE(ANEURALNETWORKS_FEATURE_LEVEL_7), NNPY_SL_TABLE(ANEURALNETWORKS_FEATURE_LEVEL_8),
};
#pragma GCC diagnostic pop
_Static_assert(sizeof(NnApiSLDriverImplFL5) == sizeof(int64_t) + NNPY_FL5_SLOTS * sizeof(void (*)(void)),
               "every FL5 slot of the header is named in the table");

/* The table of the runtime's feature level: the library's own (feature-level-N), or for the
   default library 8 unless NNAPI_PY_FEATURE_LEVEL lowers it; below level 5: NULL (no Support
   Library at that level).  Does not fail when the runtime cannot start: every slot then
   reports that as the direct calls do. */
NNPY_EXPORT NnApiSLDriverImpl* ANeuralNetworks_getSLDriverImpl(void)
{
    switch (ANeuralNetworks_getRuntimeFeatureLevel()) {
    case ANEURALNETWORKS_FEATURE_LEVEL_5: return &_nnpy_sl_tables[0].base.base;
    case ANEURALNETWORKS_FEATURE_LEVEL_6: return &_nnpy_sl_tables[1].base.base;
    case ANEURALNETWORKS_FEATURE_LEVEL_7: return &_nnpy_sl_tables[2].base.base;
    case ANEURALNETWORKS_FEATURE_LEVEL_8: return &_nnpy_sl_tables[3].base.base;
    default: return NULL;
    }
}
"""


C_PRELUDE = r"""
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "android/NeuralNetworks.h"
#include "nnapi_py.h"
#include "NeuralNetworksSupportLibraryImpl.h"

#define NNPY_EXPORT __attribute__((visibility("default")))

static uint32_t _nnpy_dim(const ANeuralNetworksOperandType* t, uint32_t k) {
    return (t && t->dimensions && k < t->dimensionCount) ? t->dimensions[k] : 0u;
}

/* The feature level a feature-level-N library is linked for (a one-line object of its own,
   level.c in the build directory); the default library links none: 0, feature level 8 unless
   NNAPI_PY_FEATURE_LEVEL says otherwise. */
extern const int _nnpy_library_level __attribute__((weak, visibility("hidden")));
static int nnpy_library_level(void) { return &_nnpy_library_level ? _nnpy_library_level : 0; }
static int64_t _nnpy_level_code(void) {
    static const int64_t code[9] = {ANEURALNETWORKS_FEATURE_LEVEL_8, 27, 28, 29, 30, 31,
                                    ANEURALNETWORKS_FEATURE_LEVEL_6, ANEURALNETWORKS_FEATURE_LEVEL_7,
                                    ANEURALNETWORKS_FEATURE_LEVEL_8};
    int n = nnpy_library_level();
    return code[n >= 1 && n <= 8 ? n : 0];
}

static const char* _nnpy_baked = NNPY_BAKED_PATHS;   /* package root and site dirs, ':'-separated */
static const char* nnpy_baked_paths(void) { return _nnpy_baked; }

static const char* nnpy_so_path(void) {
    static char path[4096];
    Dl_info info;
    if (!path[0] && dladdr((void*)&nnpy_so_path, &info) && info.dli_fname)
        snprintf(path, sizeof path, "%s", info.dli_fname);
    return path;
}

static int nnpy_force_failure(void) {
    const char* v = getenv("NNAPI_PY_FORCE_INIT_FAILURE");
    return v && *v && strcmp(v, "0") != 0;
}

/* ---- start-up ----------------------------------------------------------------------------
   The first call of any entry point starts the runtime, once per process, from any thread.
   Two kinds of host:
   - a C program: no interpreter yet.  We start one (cffi's careful Py_InitializeEx).
   - a process that already runs Python (PyTorch's NNAPI backend, ctypes, cffi, Jupyter).  There is
     nothing to start, so cffi's start-up lock is skipped: it is a spin lock on
     PyCapsule_Type.tp_version_tag that only counts as free while that field is 0, and on
     CPython 3.8-3.11 any attribute lookup on a capsule (done by `import torch` and many other
     extensions) sets it for good: the first call would spin forever.
   Then, holding the GIL, the import hook (NNPY_PATHS_CODE) lets the runtime find its own
   dependencies (cffi's backend, numpy) where the library was built or installed, even when the
   host's sys.path lacks them, without changing what the host itself imports; then cffi sets up
   this module and runs INIT_CODE.  Threads that arrive while another thread starts the runtime
   wait for it, and give up the GIL while they wait (a thread holding it would otherwise block
   the starting thread forever). */
static int _nnpy_state;               /* 0 = not started, 2 = starting, 1 = up, -1 = failed; atomic */
static pthread_mutex_t _nnpy_start_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int _nnpy_starting;   /* this thread is running the start-up */

static void _nnpy_fail(const char* why) {
    fprintf(stderr, "nnapi_py: runtime unavailable (%s); every ANeuralNetworks* call returns ANEURALNETWORKS_OP_FAILED\n", why);
    fflush(stderr);
}

static int _nnpy_ready(void);
static void _nnpy_shutdown(void);
static int _nnpy_owns;               /* 1 when we started the interpreter (C host) */
static int nnpy_owns_interpreter(void) { return _nnpy_owns; }

/* Process exit with computations in flight: before the libraries' destructors run (numpy,
   OpenBLAS), let running kernels finish and park the worker threads.  (A Python host does the
   same from Python's atexit, before the interpreter finalizes: see _capi.install.) */
static void _nnpy_atexit(void) {
    if (__atomic_load_n(&_nnpy_state, __ATOMIC_ACQUIRE) == 1 && _nnpy_owns && Py_IsInitialized()) _nnpy_shutdown();
}

/* The thread state of the calling thread if it holds the GIL, else NULL. */
static PyThreadState* _nnpy_gil_held(void) {
    if (!Py_IsInitialized()) return NULL;
#if PY_VERSION_HEX >= 0x030D0000
    return PyThreadState_GetUnchecked();
#else
    /* the GIL holder (any thread): compared with this thread's own state, never dereferenced --
       a holder that is exiting may free its state at any moment (ThreadSanitizer saw it) */
    PyThreadState* t = _PyThreadState_UncheckedGet();
    return (t && t == PyGILState_GetThisThreadState()) ? t : NULL;
#endif
}

/* Lock `m`, giving up the GIL while waiting if this thread holds it: the thread that holds `m`
   may need the GIL before it lets go (the runtime's start-up, an operand batch's flush). */
static void _nnpy_lock_without_gil(pthread_mutex_t* m) {
    PyThreadState* ts = _nnpy_gil_held();
    if (ts) PyEval_SaveThread();
    pthread_mutex_lock(m);
    if (ts) PyEval_RestoreThread(ts);
}

/* Run NNPY_PATHS_CODE with the GIL held; 0 on success, else the reason in `why`. */
static int _nnpy_find_dependencies(char* why, size_t n) {
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = -1;
    PyObject* d = PyDict_New();
    PyObject* r = NULL;
    if (d && PyDict_SetItemString(d, "__builtins__", PyEval_GetBuiltins()) == 0) {
        PyObject* so = PyUnicode_DecodeFSDefault(nnpy_so_path());
        PyObject* baked = PyUnicode_DecodeFSDefault(_nnpy_baked);
        PyObject* owns = PyBool_FromLong(_nnpy_owns);
        if (so && baked && owns && PyDict_SetItemString(d, "SO_PATH", so) == 0
            && PyDict_SetItemString(d, "BAKED", baked) == 0 && PyDict_SetItemString(d, "OWNS", owns) == 0)
            r = PyRun_String(NNPY_PATHS_CODE, Py_file_input, d, d);
        Py_XDECREF(so); Py_XDECREF(baked); Py_XDECREF(owns);
    }
    if (r) {
        PyObject* missing = PyDict_GetItemString(d, "MISSING");     /* borrowed */
        if (missing && PyUnicode_Check(missing) && PyUnicode_GetLength(missing) > 0)
            snprintf(why, n, "%s", PyUnicode_AsUTF8(missing));
        else
            rc = 0;
    } else {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyObject* sv = v ? PyObject_Str(v) : NULL;
        snprintf(why, n, "locating the runtime's modules failed: %s", sv ? PyUnicode_AsUTF8(sv) : "?");
        Py_XDECREF(sv); Py_XDECREF(t); Py_XDECREF(v); Py_XDECREF(tb);
        PyErr_Clear();
    }
    Py_XDECREF(r);
    Py_XDECREF(d);
    PyGILState_Release(g);
    return rc;
}

/* ---- a client under a checking tool ------------------------------------------------------
   AddressSanitizer / LeakSanitizer, ThreadSanitizer and valgrind watch every malloc of the
   process.  CPython's own small-object allocator (pymalloc) carves objects out of arenas it maps
   itself, which those tools cannot see into: at exit LeakSanitizer reports megabytes of the
   interpreter's live objects as leaked (nothing points at them from memory it scans) and valgrind
   reports reads inside arenas.  So when the interpreter is ours (a C host) and such a tool is in
   the process -- found at run time by its public interface functions, or valgrind's preload --
   the interpreter is started with the plain malloc allocator (PYTHONMALLOC=malloc, Python's own
   advice for these tools), unless the client set PYTHONMALLOC itself.  Every object is then a
   malloc block the tool tracks and finds reachable; the library's own C layer is not affected:
   a leak of its own is still reported.  Nothing changes for a process without such a tool. */
static const char* _nnpy_checker;         /* the tool found, or NULL */
static const char* nnpy_checker(void) { return _nnpy_checker ? _nnpy_checker : ""; }

static const char* _nnpy_find_checker(void) {
    if (dlsym(RTLD_DEFAULT, "__asan_init")) return "AddressSanitizer";
    if (dlsym(RTLD_DEFAULT, "__lsan_do_leak_check")) return "LeakSanitizer";
    if (dlsym(RTLD_DEFAULT, "__tsan_init")) return "ThreadSanitizer";
    if (dlsym(RTLD_DEFAULT, "__msan_init")) return "MemorySanitizer";
    const char* pre = getenv("LD_PRELOAD");
    if (pre && strstr(pre, "vgpreload")) return "valgrind";
    return NULL;
}

static void _nnpy_prefer_malloc(void) {
    const char* env = getenv("PYTHONMALLOC");
    if (env && *env) return;                 /* the client's choice */
    PyPreConfig pre;
    PyPreConfig_InitPythonConfig(&pre);
    /* what Py_InitializeEx (cffi's start-up) would use itself: the "compat" pre-configuration
       (no UTF-8 mode, no C locale coercion, command line not parsed) */
    pre._config_init = 1;                    /* _PyConfig_INIT_COMPAT */
    pre.parse_argv = 0;
    pre.isolated = -1;
    pre.use_environment = -1;
    pre.utf8_mode = 0;
    pre.coerce_c_locale = 0;
    pre.coerce_c_locale_warn = 0;
    pre.dev_mode = -1;
    pre.allocator = PYMEM_ALLOCATOR_MALLOC;
    (void)Py_PreInitialize(&pre);            /* on failure Py_InitializeEx starts as before */
}

/* The interpreter's home in a C host: the prefix of the Python the library was built with
   (NNPY_PYTHON_HOME), unless PYTHONHOME is set.  Left to itself, an embedded CPython finds its
   standard library from the first "python3" on PATH: with PATH=/usr/bin:/bin (a CI job with a
   clean environment) that is the system's Python, whose standard library does not match the
   libpython we run ("No module named '_struct'").  Used only where that home holds this
   version's standard library (an installed wheel on another machine keeps the default search). */
static int _nnpy_stdlib_at(const char* prefix, size_t n) {
    char probe[4096];
    snprintf(probe, sizeof probe, "%.*s/lib/python%s/os.py", (int)n, prefix, PY_VERSION_SHORT);
    return access(probe, R_OK) == 0;
}

/* 0, or -1 with the reason in `why`: a PYTHONHOME without this version's standard library would
   make CPython's start-up abort the whole process (a fatal error), so it is refused here. */
static int _nnpy_set_home(char* why, size_t nwhy) {
    const char* env = getenv("PYTHONHOME");
    if (env && *env) {
        size_t n = strcspn(env, ":");                   /* PREFIX[:EXEC_PREFIX] */
        if (_nnpy_stdlib_at(env, n)) return 0;
        snprintf(why, nwhy, "PYTHONHOME=%s holds no Python %s standard library (%.*s/lib/python%s/os.py)",
                 env, PY_VERSION_SHORT, (int)n, env, PY_VERSION_SHORT);
        return -1;
    }
    if (!NNPY_PYTHON_HOME[0] || !_nnpy_stdlib_at(NNPY_PYTHON_HOME, strlen(NNPY_PYTHON_HOME))) return 0;
    wchar_t* home = Py_DecodeLocale(NNPY_PYTHON_HOME, NULL);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    if (home) Py_SetPythonHome(home);                    /* copies it (CPython >= 3.8) */
#pragma GCC diagnostic pop
    PyMem_RawFree(home);
    return 0;
}

static void _nnpy_init(void) {
    /* Make libpython's symbols global: when we were dlopen'ed with RTLD_LOCAL (as PyTorch's
       and TFLite's loaders do), numpy's extension modules could not resolve them. */
    Dl_info info;
    if (dladdr((void*)&Py_GetVersion, &info) && info.dli_fname)
        (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    /* A process that already runs another Python version would bind our calls to its
       interpreter: refuse instead of crashing. */
    const char* v = Py_GetVersion();
    size_t n = strlen(PY_VERSION_SHORT);
    if (strncmp(v, PY_VERSION_SHORT, n) != 0 || (v[n] >= '0' && v[n] <= '9')) {
        char why[512];                      /* the whole version line: build, date and compiler */
        snprintf(why, sizeof why, "built for Python " PY_VERSION_SHORT " but this process runs Python %.*s",
                 (int)strcspn(v, "\n"), v);
        _nnpy_fail(why);
        return;
    }
    _nnpy_owns = !Py_IsInitialized();
    _nnpy_checker = _nnpy_find_checker();
    if (_nnpy_owns) {
        char whyhome[1024];
        if (_nnpy_set_home(whyhome, sizeof whyhome) != 0) { _nnpy_fail(whyhome); return; }
        if (_nnpy_checker) _nnpy_prefer_malloc();
#if PY_VERSION_HEX < 0x030C0000
        if (PyCapsule_Type.tp_version_tag != 0) {
            /* an interpreter ran in this process before and was finalized: cffi's lock would
               never be free, and no other cffi module can be starting Python concurrently */
            Py_InitializeEx(0);
            PyEval_SaveThread();
        } else
#endif
        if (_cffi_carefully_make_gil() != 0) { _nnpy_fail("the Python interpreter could not be started"); return; }
    }
    char why[1024];
    if (_nnpy_find_dependencies(why, sizeof why) != 0) { _nnpy_fail(why); return; }
    _cffi_acquire_reentrant_mutex();
    int rc = _cffi_initialize_python();    /* imports cffi's backend, sets up this module, runs INIT_CODE */
    if (rc == 0 && _cffi_call_python_org != NULL) {
        __sync_synchronize();               /* what cffi's own start-up does: publish, then switch */
        _cffi_call_python = (_cffi_call_python_fnptr)_cffi_call_python_org;
    } else {
        rc = -1;
    }
    _cffi_release_reentrant_mutex();
    if (rc != 0) { _nnpy_fail("cffi could not set up the library's Python module (reason above)"); return; }
    if (_nnpy_ready() != 1) return;        /* Python printed the reason */
    atexit(_nnpy_atexit);
    __atomic_store_n(&_nnpy_state, 1, __ATOMIC_RELEASE);
}

__attribute__((noinline)) static int _nnpy_start(void) {
    if (_nnpy_starting) return 0;          /* re-entered from the start-up itself */
    int s = __atomic_load_n(&_nnpy_state, __ATOMIC_ACQUIRE);
    if (s == 1 || s == -1) return s == 1;
    if (pthread_mutex_trylock(&_nnpy_start_lock) != 0) {
        /* another thread is starting the runtime: wait for it without holding the GIL */
        _nnpy_lock_without_gil(&_nnpy_start_lock);
        pthread_mutex_unlock(&_nnpy_start_lock);
        return __atomic_load_n(&_nnpy_state, __ATOMIC_ACQUIRE) == 1;
    }
    if (__atomic_load_n(&_nnpy_state, __ATOMIC_ACQUIRE) == 0) {
        _nnpy_starting = 1;
        __atomic_store_n(&_nnpy_state, 2, __ATOMIC_RELAXED);
        _nnpy_init();
        if (__atomic_load_n(&_nnpy_state, __ATOMIC_ACQUIRE) != 1) __atomic_store_n(&_nnpy_state, -1, __ATOMIC_RELEASE);
        _nnpy_starting = 0;
    }
    pthread_mutex_unlock(&_nnpy_start_lock);
    return __atomic_load_n(&_nnpy_state, __ATOMIC_ACQUIRE) == 1;
}

static inline int _nnpy_up(void) {
    if (__builtin_expect(__atomic_load_n(&_nnpy_state, __ATOMIC_ACQUIRE) == 1, 1)) return 1;
    return _nnpy_start();
}

/* ---- the call gate (C hosts) ----------------------------------------------------------
   Every entry point needs the GIL.  When several C threads call in at once, handing the GIL
   from thread to thread on every call (futex wake-ups, lost time slices) collapses the
   throughput far below one thread's.  In an interpreter we own, short calls first take this
   adaptive mutex, so only one C thread at a time asks for the GIL and the hand-over is a brief
   spin.  Calls that run kernels or wait (_UNGATED in build_ffi.py) bypass it: BLAS kernels
   release the GIL and must overlap.  Nested calls (a finalizer during a call) never wait.
   Python hosts are not gated: their own threads hold the GIL while calling in. */
static pthread_mutex_t _nnpy_gate = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static __thread int _nnpy_gate_depth;
static inline int _nnpy_gate_in(void) {
    if (!_nnpy_owns) return 0;
    if (_nnpy_gate_depth++ > 0) return 0;
    pthread_mutex_lock(&_nnpy_gate);
    return 1;
}
static inline void _nnpy_gate_out(int g) {
    if (!_nnpy_owns) return;
    _nnpy_gate_depth--;
    if (g) pthread_mutex_unlock(&_nnpy_gate);
}

/* ---- operand batching ------------------------------------------------------------------
   ANeuralNetworksModel_addOperand is the call real loaders make thousands of times.  Once
   Python has accepted a model (a live, unfinished handle: nnpy_batch_operands_for), further
   operands whose type passes the stateless checks below are appended to a C buffer; every
   other entry point first flushes that buffer into the Python model (_nnpy_sync), so the
   model is always complete when anything else looks at it.  Operands that fail any check
   take the normal path, where Python reports the precise reason.

   Under any interleaving of threads (issue 44):
   - _nnpy_pending counts the operands not yet in their Python model: those in the buffer and
     those being flushed.  It drops only after a flush has returned, so a thread that reads 0
     (the one unlocked read, in _nnpy_sync) knows every operand added before is in its model;
     any other count sends it to the lock, which a flush holds until it is done.
   - the buffer and its model change only under the lock; the model is also read without it
     as a hint (_nnpy_batched_add re-checks under the lock), hence atomically.
   - a flush hands Python a copy of the records: while Python runs, a finalizer on this same
     thread may add to the buffer (the lock is recursive) without touching what is flushed.
   - a thread that holds the GIL (a host calling through ctypes.PyDLL, or a C extension)
     gives it up while it waits for the lock: the thread flushing needs the GIL. */
typedef struct { int32_t type; uint32_t count; uint32_t d[4]; float scale; int32_t zp; } nnpy_opnd;
#define NNPY_BATCH 256
/* Recursive: while a flush runs Python, the garbage collector may run a client's finalizer that
   frees a model (nnpy_stop_batching) on this same thread; that must not deadlock. */
static pthread_mutex_t _nnpy_batch_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static uintptr_t _nnpy_batch_model;   /* written under the lock, read atomically */
static uint32_t _nnpy_batch_n;        /* under the lock */
static uint32_t _nnpy_pending;        /* buffered + being flushed: written under the lock, read atomically */
static nnpy_opnd _nnpy_batch[NNPY_BATCH];

static void _nnpy_flush_operands(uintptr_t model, uintptr_t records, uint32_t count);

static void _nnpy_batch_acquire(void) {
    if (pthread_mutex_trylock(&_nnpy_batch_lock) != 0) _nnpy_lock_without_gil(&_nnpy_batch_lock);
}

static void _nnpy_flush_locked(void) {
    uint32_t n = _nnpy_batch_n;
    if (n) {
        nnpy_opnd copy[NNPY_BATCH];
        memcpy(copy, _nnpy_batch, n * sizeof(nnpy_opnd));
        _nnpy_batch_n = 0;
        _nnpy_flush_operands(_nnpy_batch_model, (uintptr_t)copy, n);
        __atomic_store_n(&_nnpy_pending, _nnpy_pending - n, __ATOMIC_RELEASE);   /* now in the model */
    }
}

static inline void _nnpy_sync(void) {
    if (__builtin_expect(__atomic_load_n(&_nnpy_pending, __ATOMIC_ACQUIRE) != 0, 0)) {
        _nnpy_batch_acquire();
        _nnpy_flush_locked();
        pthread_mutex_unlock(&_nnpy_batch_lock);
    }
}

static void nnpy_batch_operands_for(uintptr_t model) {   /* called by Python, lock not held */
    _nnpy_batch_acquire();
    if (_nnpy_batch_model != model) {
        _nnpy_flush_locked();
        __atomic_store_n(&_nnpy_batch_model, model, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&_nnpy_batch_lock);
}

static void nnpy_stop_batching(uintptr_t model) {
    _nnpy_batch_acquire();
    if (_nnpy_batch_model == model) {
        _nnpy_flush_locked();
        __atomic_store_n(&_nnpy_batch_model, 0, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&_nnpy_batch_lock);
}

/* the stateless operand-type rules (see nnapi_py/operand.py for the full set with messages) */
static int _nnpy_type_ok(const ANeuralNetworksOperandType* t) {
    int32_t c = t->type;
    if (c < 0 || c > 15) return 0;
    int scalar = (c == 0 || c == 1 || c == 2 || c == 6 || c == 10 || c == 15);
    if (t->dimensionCount > 4) return 0;
    if ((t->dimensionCount == 0) != (t->dimensions == NULL)) return 0;
    if (scalar && t->dimensionCount) return 0;
    static const uint8_t esize[16] = {4, 4, 4, 4, 4, 1, 1, 2, 2, 1, 2, 1, 2, 1, 1, 0};
    uint64_t bytes = esize[c];
    for (uint32_t k = 0; k < t->dimensionCount; k++) {
        if (t->dimensions[k]) bytes *= t->dimensions[k];     /* < 2**64: both factors < 2**32 */
        if (bytes > 0xFFFFFFFFull) return 0;                 /* checked at every step: no wrap */
    }
    float s = t->scale;
    if (!__builtin_isfinite(s)) return 0;
    int32_t z = t->zeroPoint;
    switch (c) {
    case 5: return s > 0.f && z >= 0 && z <= 255;
    case 14: return s > 0.f && z >= -128 && z <= 127;
    case 12: return s > 0.f && z >= 0 && z <= 65535;
    case 7: case 13: return s > 0.f && z == 0;
    case 4: return s >= 0.f && z == 0;
    default: return s == 0.f && z == 0;
    }
}

static int _nnpy_batched_add(uintptr_t model, const ANeuralNetworksOperandType* t) {
    if (!t || model == 0 || model != __atomic_load_n(&_nnpy_batch_model, __ATOMIC_RELAXED) || !_nnpy_type_ok(t))
        return 0;
    int done = 0;
    _nnpy_batch_acquire();
    if (model == _nnpy_batch_model) {
        if (_nnpy_batch_n == NNPY_BATCH) _nnpy_flush_locked();
        nnpy_opnd* r = &_nnpy_batch[_nnpy_batch_n];
        r->type = t->type;
        r->count = t->dimensionCount;
        for (uint32_t k = 0; k < 4; k++) r->d[k] = k < t->dimensionCount ? t->dimensions[k] : 0;
        r->scale = t->scale;
        r->zp = t->zeroPoint;
        _nnpy_batch_n++;
        __atomic_store_n(&_nnpy_pending, _nnpy_pending + 1, __ATOMIC_RELEASE);
        done = 1;
    }
    pthread_mutex_unlock(&_nnpy_batch_lock);
    return done;
}

/* nnapi_py_* extras (include/nnapi_py.h) */
static const char* _nnpy_last_error_text(void);
static int _nnpy_last_error_code(void);

NNPY_EXPORT const char* nnapi_py_last_error(void)
{
    if (!_nnpy_up()) return "nnapi_py runtime unavailable (initialisation failed)";
    _nnpy_sync();
    const char* s = _nnpy_last_error_text();
    return s ? s : "";
}

NNPY_EXPORT int nnapi_py_last_error_code(void)
{
    if (!_nnpy_up()) return ANEURALNETWORKS_OP_FAILED;
    return _nnpy_last_error_code();
}
"""

# Run by the C start-up with the GIL held, before cffi imports its backend (see _nnpy_init).
# Globals given: SO_PATH (this library's file), BAKED ("package root:site dir:..." recorded at
# build time), OWNS (True when the library started the interpreter).  Sets MISSING.
PATHS_CODE = r'''
import os, sys
from importlib.machinery import PathFinder
from importlib.util import find_spec

class NnapiPyFinder:
    # An import hook that finds only the named top-level modules, and only in the given
    # directories: the runtime's own package, and its dependencies where the library was
    # built or installed.  Any other import of the host is left alone.
    def __init__(self, role, names, dirs):
        self.role, self.names, self.dirs = role, frozenset(names), list(dirs)

    def find_spec(self, name, path=None, target=None):
        if path is None and name in self.names:
            return PathFinder.find_spec(name, self.dirs)
        return None

    def __repr__(self):
        return "<libneuralnetworks.so finder for %s in %s>" % (self.role, ":".join(self.dirs))

def _install():
    extra = [p for p in os.environ.get("NNAPI_PY_PATH", "").split(":") if p]
    baked = [p for p in BAKED.split(":") if p]
    own, deps = list(extra), []
    # installed: site-packages/nnapi_py/libneuralnetworks.so, or one directory deeper for the
    # feature-level libraries (site-packages/nnapi_py/feature-level-N/libneuralnetworks.so)
    here = os.path.dirname(os.path.abspath(SO_PATH)) if SO_PATH else ""
    if os.path.basename(here).startswith("feature-level-"):
        here = os.path.dirname(here)
    here = os.path.dirname(here)
    if here and os.path.isfile(os.path.join(here, "nnapi_py", "__init__.py")):
        own.append(here)
        deps.append(here)
    own += baked[:1]
    deps += baked[1:]
    names = ("_cffi_backend", "cffi", "numpy")
    for f in list(sys.meta_path):   # a library loaded twice keeps one hook of each kind
        if type(f).__name__ == "NnapiPyFinder":
            sys.meta_path.remove(f)
    sys.meta_path.insert(0, NnapiPyFinder("nnapi_py", ("nnapi_py",), own))
    dep_finder = NnapiPyFinder("its dependencies", names, deps)
    if OWNS:
        sys.meta_path.insert(1, dep_finder)   # our own interpreter: the build's versions first
    else:
        sys.meta_path.append(dep_finder)      # a host's own modules always come first
    missing = [n for n in ("nnapi_py",) + names if find_spec(n) is None]
    if missing:
        return ("Python module%s %s not found (looked in this process's sys.path and in %s)"
                % ("s" if len(missing) > 1 else "", ", ".join(missing), ", ".join(own + deps) or "nothing"))
    return ""

MISSING = _install()
'''

INIT_CODE = r'''
import os, sys
from _nnapi_py_embed import ffi, lib

_ok = [0]

@ffi.def_extern()
def _nnpy_ready():
    return _ok[0]

def _start():
    if lib.nnpy_force_failure():
        raise RuntimeError("NNAPI_PY_FORCE_INIT_FAILURE is set")
    from nnapi_py import _capi
    _capi.install(ffi, lib, ffi.string(lib.nnpy_so_path()).decode(errors="replace"))

try:
    _start()
    _ok[0] = 1
except BaseException as _e:
    sys.stderr.write("nnapi_py: runtime unavailable (%s: %s); every ANeuralNetworks* call returns "
                     "ANEURALNETWORKS_OP_FAILED\n" % (type(_e).__name__, _e))
    if os.environ.get("NNAPI_PY_TRACE"):
        import traceback
        traceback.print_exc()
    sys.stderr.flush()
'''


def c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", '\\n"\n    "') + '"'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "lib"))
    ap.add_argument("--tmp", default=os.path.join(ROOT, "build", "ffi"))
    # (both directories are made absolute below: cffi compiles from inside --tmp)
    ap.add_argument("--package-root", default=ROOT, help="directory that contains nnapi_py/ (baked in)")
    ap.add_argument("--no-levels", action="store_true", help="skip the feature-level-N libraries")
    ap.add_argument("--sanitize", default="", help="-fsanitize= list for the C layer (tests only)")
    args = ap.parse_args()
    args.out, args.tmp = os.path.abspath(args.out), os.path.abspath(args.tmp)
    header = open(HEADER).read()
    protos = parse_prototypes(header)
    assert len(protos) == 69, f"expected 69 prototypes in {HEADER}, found {len(protos)}"
    levels = function_levels(header)
    assert set(levels) == {name for _, name, _ in protos}, "every prototype needs its 'FLn (API m)' note"
    cdef, csrc = generate(protos)
    fl5, fl8 = check_sl_header(header, open(SL_HEADER).read(), protos)
    sl_cdef, sl_csrc = generate_sl(fl5, fl8)
    extras = open(EXTRA_HEADER).read()
    extra_protos = re.findall(r"^(?:const char\*|int)\s+(nnapi_py_\w+)\(([^)]*)\);", extras, re.M)

    ffi = cffi.FFI()
    ffi.cdef(cdef + "\n" + sl_cdef)
    ffi.cdef('extern "Python" const char* _nnpy_last_error_text(void);\n'
             'extern "Python" int _nnpy_last_error_code(void);')
    ffi.embedding_api("")   # exports are plain C functions (above), so init failure is handled in C
    extra_names = [n for n, _ in extra_protos]
    os.makedirs(args.tmp, exist_ok=True)
    vscript = write_version_script(os.path.join(args.tmp, "exports.map"),
                                   [name for _, name, _ in protos] + extra_names + [SL_ENTRY])
    sites = [p for p in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(p)]
    baked = ":".join([os.path.abspath(args.package_root)] + sites)
    ver = "%d.%d" % sys.version_info[:2]
    home = sys.base_prefix if os.path.isfile(os.path.join(sys.base_prefix, "lib", f"python{ver}", "os.py")) else ""
    prelude = (f'#define NNPY_BAKED_PATHS "{baked}"\n#define PY_VERSION_SHORT "{ver}"\n'
               f'#define NNPY_PYTHON_HOME {c_string(home)}\n'
               f'static const char NNPY_PATHS_CODE[] = {c_string(PATHS_CODE)};\n' + C_PRELUDE)
    os.makedirs(args.out, exist_ok=True)
    libdir = sysconfig.get_config_var("LIBDIR")
    sanitize = ["-g", "-fno-omit-frame-pointer", f"-fsanitize={args.sanitize}"] if args.sanitize else []
    ffi.set_source("_nnapi_py_embed", prelude + csrc + sl_csrc,
                   include_dirs=[os.path.join(ROOT, "include")],
                   extra_compile_args=["-O2", "-fvisibility=hidden", "-Wno-unused-function"] + sanitize,
                   extra_link_args=["-Wl,-soname,libneuralnetworks.so", f"-Wl,--version-script={vscript}", f"-Wl,-rpath,{libdir}",
                                    "-ldl", "-lpthread"] + sanitize)
    ffi.embedding_init_code(INIT_CODE)
    target = os.path.join(os.path.abspath(args.out), "libneuralnetworks.so")
    cwd = os.getcwd()
    os.chdir(args.tmp)
    try:
        ffi.compile(target=target, verbose=False)
    finally:
        os.chdir(cwd)
    print(f"built {target}")
    if not args.no_levels:
        obj = os.path.join(args.tmp, "_nnapi_py_embed.o")
        for n in FEATURE_LEVELS:
            sl = [SL_ENTRY] if n >= SL_FIRST_LEVEL else []
            print("built " + link_level_library(obj, n, exports_at(n, levels) + extra_names + sl, args.out, args.tmp))


def write_version_script(path, exports):
    with open(path, "w") as f:
        f.write("{\n  global:\n" + "".join(f"    {n};\n" for n in exports) + "  local: *;\n};\n")
    return path


def link_level_library(obj, level, exports, out, tmp):
    """<out>/feature-level-N/libneuralnetworks.so: the compiled library object linked again with
    the level's export list and a one-line object holding its level (read by
    nnpy_library_level()); no second compilation of the runtime."""
    src = os.path.join(tmp, f"level{level}.c")
    with open(src, "w") as f:
        f.write(f'__attribute__((visibility("hidden"))) const int _nnpy_library_level = {level};\n')
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    level_obj = src[:-2] + ".o"
    subprocess.run(cc + ["-c", "-fPIC", src, "-o", level_obj], check=True)
    ldshared = shlex.split(os.environ.get("LDSHARED") or sysconfig.get_config_var("LDSHARED") or "cc -shared")
    if os.environ.get("CC"):
        ldshared = cc + ldshared[1:]
    vscript = write_version_script(os.path.join(tmp, f"exports-level{level}.map"), exports)
    libdir = sysconfig.get_config_var("LIBDIR")
    target = os.path.join(out, f"feature-level-{level}", "libneuralnetworks.so")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    subprocess.run(ldshared + [obj, level_obj, "-o", target, f"-L{libdir}",
                               "-lpython" + sysconfig.get_config_var("LDVERSION"),
                               "-Wl,-soname,libneuralnetworks.so", f"-Wl,--version-script={vscript}",
                               f"-Wl,-rpath,{libdir}", "-ldl", "-lpthread"], check=True)
    return target


if __name__ == "__main__":
    main()
