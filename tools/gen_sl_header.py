"""Generate include/NeuralNetworksSupportLibraryImpl.h: the NNAPI Support Library table.

An "updatable NNAPI" (Support Library) is a shared library that exports one function,
``ANeuralNetworks_getSLDriverImpl()``, returning a static table of function pointers whose
first member says which layout it has (``implFeatureLevel``).  Android's loaders (its own
``loadNnApiSupportLibrary``, TFLite's ``tflite/nnapi/sl``) cast the table by that level:
FL5, FL6 and FL7 share one layout; FL8 appends two functions.  The slot order below is that
layout (fixed by Android, never reordered); a slot's signature comes from our own
include/android/NeuralNetworks.h when the function is one of its 69 prototypes, else from
SL_PROTOTYPES here (the SL_ functions and six extension functions that only the table offers).

build_ffi.py re-runs render() at build time and refuses to build when the committed header
differs, and fills the table from the slots it parses out of the header, so neither can drift
from the prototypes.  Usage:
    python tools/gen_sl_header.py > include/NeuralNetworksSupportLibraryImpl.h
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NN_HEADER = os.path.join(ROOT, "include", "android", "NeuralNetworks.h")
OUT = os.path.join(ROOT, "include", "NeuralNetworksSupportLibraryImpl.h")

# The FL5 layout, in Android's order (after the leading NnApiSLDriverImpl base).
FL5_SLOTS = """
ANeuralNetworksBurst_create ANeuralNetworksBurst_free ANeuralNetworksCompilation_createForDevices
ANeuralNetworksCompilation_finish ANeuralNetworksCompilation_free
ANeuralNetworksCompilation_getPreferredMemoryAlignmentForInput
ANeuralNetworksCompilation_getPreferredMemoryAlignmentForOutput
ANeuralNetworksCompilation_getPreferredMemoryPaddingForInput
ANeuralNetworksCompilation_getPreferredMemoryPaddingForOutput ANeuralNetworksCompilation_setCaching
ANeuralNetworksCompilation_setPreference ANeuralNetworksCompilation_setPriority
ANeuralNetworksCompilation_setTimeout ANeuralNetworksDevice_getExtensionSupport
ANeuralNetworksDevice_getFeatureLevel ANeuralNetworksDevice_getName ANeuralNetworksDevice_getType
ANeuralNetworksDevice_getVersion ANeuralNetworksDevice_wait ANeuralNetworksEvent_createFromSyncFenceFd
ANeuralNetworksEvent_free ANeuralNetworksEvent_getSyncFenceFd ANeuralNetworksEvent_wait
ANeuralNetworksExecution_burstCompute ANeuralNetworksExecution_compute ANeuralNetworksExecution_create
ANeuralNetworksExecution_enableInputAndOutputPadding ANeuralNetworksExecution_free
ANeuralNetworksExecution_getDuration ANeuralNetworksExecution_getOutputOperandDimensions
ANeuralNetworksExecution_getOutputOperandRank ANeuralNetworksExecution_setInput
ANeuralNetworksExecution_setInputFromMemory ANeuralNetworksExecution_setLoopTimeout
ANeuralNetworksExecution_setMeasureTiming ANeuralNetworksExecution_setOutput
ANeuralNetworksExecution_setOutputFromMemory ANeuralNetworksExecution_setReusable
ANeuralNetworksExecution_setTimeout ANeuralNetworksExecution_startComputeWithDependencies
ANeuralNetworksMemoryDesc_addInputRole ANeuralNetworksMemoryDesc_addOutputRole
ANeuralNetworksMemoryDesc_create ANeuralNetworksMemoryDesc_finish ANeuralNetworksMemoryDesc_free
ANeuralNetworksMemoryDesc_setDimensions ANeuralNetworksMemory_copy
ANeuralNetworksMemory_createFromAHardwareBuffer ANeuralNetworksMemory_createFromDesc
ANeuralNetworksMemory_createFromFd ANeuralNetworksMemory_free ANeuralNetworksModel_addOperand
ANeuralNetworksModel_addOperation ANeuralNetworksModel_create ANeuralNetworksModel_finish
ANeuralNetworksModel_free ANeuralNetworksModel_getExtensionOperandType
ANeuralNetworksModel_getExtensionOperationType ANeuralNetworksModel_getSupportedOperationsForDevices
ANeuralNetworksModel_identifyInputsAndOutputs ANeuralNetworksModel_relaxComputationFloat32toFloat16
ANeuralNetworksModel_setOperandExtensionData ANeuralNetworksModel_setOperandSymmPerChannelQuantParams
ANeuralNetworksModel_setOperandValue ANeuralNetworksModel_setOperandValueFromMemory
ANeuralNetworksModel_setOperandValueFromModel ANeuralNetworks_getDefaultLoopTimeout
ANeuralNetworks_getDevice ANeuralNetworks_getDeviceCount ANeuralNetworks_getMaximumLoopTimeout
ANeuralNetworks_getRuntimeFeatureLevel
SL_ANeuralNetworksCompilation_setCachingFromFds SL_ANeuralNetworksDevice_getNumberOfCacheFilesNeeded
SL_ANeuralNetworksDevice_getPerformanceInfo SL_ANeuralNetworksDevice_forEachOperandPerformanceInfo
SL_ANeuralNetworksDevice_getVendorExtensionCount SL_ANeuralNetworksDevice_getVendorExtensionName
SL_ANeuralNetworksDevice_forEachVendorExtensionOperandTypeInformation
SL_ANeuralNetworksDiagnosticCompilationInfo_getSessionId
SL_ANeuralNetworksDiagnosticCompilationInfo_getNnApiVersion
SL_ANeuralNetworksDiagnosticCompilationInfo_getModelArchHash
SL_ANeuralNetworksDiagnosticCompilationInfo_getDeviceIds
SL_ANeuralNetworksDiagnosticCompilationInfo_getErrorCode
SL_ANeuralNetworksDiagnosticCompilationInfo_getInputDataClass
SL_ANeuralNetworksDiagnosticCompilationInfo_getOutputDataClass
SL_ANeuralNetworksDiagnosticCompilationInfo_getCompilationTimeNanos
SL_ANeuralNetworksDiagnosticCompilationInfo_isCachingEnabled
SL_ANeuralNetworksDiagnosticCompilationInfo_isControlFlowUsed
SL_ANeuralNetworksDiagnosticCompilationInfo_areDynamicTensorsUsed
SL_ANeuralNetworksDiagnosticExecutionInfo_getSessionId
SL_ANeuralNetworksDiagnosticExecutionInfo_getNnApiVersion
SL_ANeuralNetworksDiagnosticExecutionInfo_getModelArchHash
SL_ANeuralNetworksDiagnosticExecutionInfo_getDeviceIds
SL_ANeuralNetworksDiagnosticExecutionInfo_getExecutionMode
SL_ANeuralNetworksDiagnosticExecutionInfo_getInputDataClass
SL_ANeuralNetworksDiagnosticExecutionInfo_getOutputDataClass
SL_ANeuralNetworksDiagnosticExecutionInfo_getErrorCode
SL_ANeuralNetworksDiagnosticExecutionInfo_getRuntimeExecutionTimeNanos
SL_ANeuralNetworksDiagnosticExecutionInfo_getDriverExecutionTimeNanos
SL_ANeuralNetworksDiagnosticExecutionInfo_getHardwareExecutionTimeNanos
SL_ANeuralNetworksDiagnosticExecutionInfo_isCachingEnabled
SL_ANeuralNetworksDiagnosticExecutionInfo_isControlFlowUsed
SL_ANeuralNetworksDiagnosticExecutionInfo_areDynamicTensorsUsed
SL_ANeuralNetworksDiagnostic_registerCallbacks
""".split()

# Appended by the FL8 layout (after an FL5 struct as its base).
FL8_SLOTS = ["ANeuralNetworksCompilation_addExtensionAttribute", "ANeuralNetworksExecution_addExtensionAttribute"]

_CI = "const ANeuralNetworksDiagnosticCompilationInfo* diagnosticCompilationInfo"
_EI = "const ANeuralNetworksDiagnosticExecutionInfo* diagnosticExecutionInfo"

# (return type, parameters) of every slot that is not one of NeuralNetworks.h's prototypes.
SL_PROTOTYPES = {
    "ANeuralNetworksDevice_getExtensionSupport":
        ("int", "const ANeuralNetworksDevice* device, const char* extensionName, bool* isExtensionSupported"),
    "ANeuralNetworksModel_getExtensionOperandType":
        ("int", "ANeuralNetworksModel* model, const char* extensionName, uint16_t operandCodeWithinExtension, "
                "int32_t* type"),
    "ANeuralNetworksModel_getExtensionOperationType":
        ("int", "ANeuralNetworksModel* model, const char* extensionName, uint16_t operationCodeWithinExtension, "
                "ANeuralNetworksOperationType* type"),
    "ANeuralNetworksModel_setOperandExtensionData":
        ("int", "ANeuralNetworksModel* model, int32_t index, const void* data, size_t length"),
    "ANeuralNetworksCompilation_addExtensionAttribute":
        ("int", "ANeuralNetworksCompilation* compilation, const char* extensionName, "
                "uint16_t attributeCodeWithinExtension, const void* data, size_t length"),
    "ANeuralNetworksExecution_addExtensionAttribute":
        ("int", "ANeuralNetworksExecution* execution, const char* extensionName, "
                "uint16_t attributeCodeWithinExtension, const void* data, size_t length"),
    "SL_ANeuralNetworksCompilation_setCachingFromFds":
        ("int", "ANeuralNetworksCompilation* compilation, const int* modelCacheFds, "
                "const uint32_t numModelCacheFiles, const int* dataCacheFds, const uint32_t numDataCacheFiles, "
                "const uint8_t* token"),
    "SL_ANeuralNetworksDevice_getNumberOfCacheFilesNeeded":
        ("int", "const ANeuralNetworksDevice* device, uint32_t* numModelCacheFiles, uint32_t* numDataCacheFiles"),
    "SL_ANeuralNetworksDevice_getPerformanceInfo":
        ("int", "const ANeuralNetworksDevice* device, int32_t performanceInfoKind, "
                "SL_ANeuralNetworksPerformanceInfo* performanceInfo"),
    "SL_ANeuralNetworksDevice_forEachOperandPerformanceInfo":
        ("int", "const ANeuralNetworksDevice* device, void* context, "
                "void (*callback)(SL_ANeuralNetworksOperandPerformanceInfo, void*)"),
    "SL_ANeuralNetworksDevice_getVendorExtensionCount":
        ("int", "const ANeuralNetworksDevice* device, uint32_t* vendorExtensionCount"),
    "SL_ANeuralNetworksDevice_getVendorExtensionName":
        ("int", "const ANeuralNetworksDevice* device, uint32_t vendorExtensionIndex, const char** extensionName"),
    "SL_ANeuralNetworksDevice_forEachVendorExtensionOperandTypeInformation":
        ("int", "const ANeuralNetworksDevice* device, uint32_t vendorExtensionIndex, void* context, "
                "void (*callback)(SL_ANeuralNetworksExtensionOperandTypeInformation, void*)"),
    "SL_ANeuralNetworksDiagnosticCompilationInfo_getSessionId": ("int32_t", _CI),
    "SL_ANeuralNetworksDiagnosticCompilationInfo_getNnApiVersion": ("int64_t", _CI),
    "SL_ANeuralNetworksDiagnosticCompilationInfo_getModelArchHash": ("const uint8_t*", _CI),
    "SL_ANeuralNetworksDiagnosticCompilationInfo_getDeviceIds": ("const char*", _CI),
    "SL_ANeuralNetworksDiagnosticCompilationInfo_getErrorCode": ("int32_t", _CI),
    "SL_ANeuralNetworksDiagnosticCompilationInfo_getInputDataClass": ("ANeuralNetworksDiagnosticDataClass", _CI),
    "SL_ANeuralNetworksDiagnosticCompilationInfo_getOutputDataClass": ("ANeuralNetworksDiagnosticDataClass", _CI),
    "SL_ANeuralNetworksDiagnosticCompilationInfo_getCompilationTimeNanos": ("uint64_t", _CI),
    "SL_ANeuralNetworksDiagnosticCompilationInfo_isCachingEnabled": ("bool", _CI),
    "SL_ANeuralNetworksDiagnosticCompilationInfo_isControlFlowUsed": ("bool", _CI),
    "SL_ANeuralNetworksDiagnosticCompilationInfo_areDynamicTensorsUsed": ("bool", _CI),
    "SL_ANeuralNetworksDiagnosticExecutionInfo_getSessionId": ("int32_t", _EI),
    "SL_ANeuralNetworksDiagnosticExecutionInfo_getNnApiVersion": ("int64_t", _EI),
    "SL_ANeuralNetworksDiagnosticExecutionInfo_getModelArchHash": ("const uint8_t*", _EI),
    "SL_ANeuralNetworksDiagnosticExecutionInfo_getDeviceIds": ("const char*", _EI),
    "SL_ANeuralNetworksDiagnosticExecutionInfo_getExecutionMode": ("ANeuralNetworksDiagnosticExecutionMode", _EI),
    "SL_ANeuralNetworksDiagnosticExecutionInfo_getInputDataClass": ("ANeuralNetworksDiagnosticDataClass", _EI),
    "SL_ANeuralNetworksDiagnosticExecutionInfo_getOutputDataClass": ("ANeuralNetworksDiagnosticDataClass", _EI),
    "SL_ANeuralNetworksDiagnosticExecutionInfo_getErrorCode": ("uint32_t", _EI),
    "SL_ANeuralNetworksDiagnosticExecutionInfo_getRuntimeExecutionTimeNanos": ("uint64_t", _EI),
    "SL_ANeuralNetworksDiagnosticExecutionInfo_getDriverExecutionTimeNanos": ("uint64_t", _EI),
    "SL_ANeuralNetworksDiagnosticExecutionInfo_getHardwareExecutionTimeNanos": ("uint64_t", _EI),
    "SL_ANeuralNetworksDiagnosticExecutionInfo_isCachingEnabled": ("bool", _EI),
    "SL_ANeuralNetworksDiagnosticExecutionInfo_isControlFlowUsed": ("bool", _EI),
    "SL_ANeuralNetworksDiagnosticExecutionInfo_areDynamicTensorsUsed": ("bool", _EI),
    "SL_ANeuralNetworksDiagnostic_registerCallbacks":
        ("void", "ANeuralNetworksDiagnosticCompilationFinishedCallback compilationCallback, "
                 "ANeuralNetworksDiagnosticExecutionFinishedCallback executionCallback, void* callbackContext"),
}

_PROTO = re.compile(r"^(int|void|uint64_t|int64_t)\s+(ANeuralNetworks\w+)\((.*)\);\s*$", re.M)


def nn_prototypes(text):
    """{name: (return type, parameters)} of NeuralNetworks.h ("void" parameters as "")."""
    return {n: (r, "" if p.strip() == "void" else p.strip()) for r, n, p in _PROTO.findall(text)}


def slot_line(name, ret, params):
    return f"    {ret} (*{name})({params or 'void'});"


def _slots(names, protos):
    lines = []
    for n in names:
        ret, params = protos[n] if n in protos else SL_PROTOTYPES[n]
        lines.append(slot_line(n, ret, params))
    return "\n".join(lines)


TEMPLATE = """/*
 * NeuralNetworksSupportLibraryImpl.h -- the NNAPI Support Library table of nnapi_py.
 *
 * GENERATED by tools/gen_sl_header.py from include/android/NeuralNetworks.h and the slot order
 * of Android's Support Library layout; do not edit (build_ffi.py refuses a header that differs).
 *
 * libneuralnetworks.so (and build/lib/feature-level-N/libneuralnetworks.so for N >= 5) exports
 * ANeuralNetworks_getSLDriverImpl(): a pointer to a static, complete table whose first member,
 * implFeatureLevel, is the library's NNAPI feature level code.  A loader casts it by that code:
 * ANEURALNETWORKS_FEATURE_LEVEL_5, _6 and _7 to NnApiSLDriverImplFL5 (one layout), _8 to
 * NnApiSLDriverImplFL8.  Every slot is set; the ANeuralNetworks* slots are the library's own
 * exported functions, so they behave exactly as the direct calls.  The SL_ functions and the
 * extension functions exist only in the table (no symbol of those names is exported).
 */
#ifndef NNAPI_PY_NEURAL_NETWORKS_SUPPORT_LIBRARY_IMPL_H
#define NNAPI_PY_NEURAL_NETWORKS_SUPPORT_LIBRARY_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "android/NeuralNetworks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A device's speed and power relative to the CPU reference (lower is better). */
typedef struct {
    float execTime;
    float powerUsage;
} SL_ANeuralNetworksPerformanceInfo;

/* The performance of a device on operations whose first operand has type operandType. */
typedef struct {
    int32_t operandType;
    SL_ANeuralNetworksPerformanceInfo performanceInfo;
} SL_ANeuralNetworksOperandPerformanceInfo;

/* An operand type a vendor extension defines (nnapi_py's devices have no extension). */
typedef struct {
    uint32_t byteSize;
    uint16_t type;
    bool isTensor;
} SL_ANeuralNetworksExtensionOperandTypeInformation;

/* performanceInfoKind of SL_ANeuralNetworksDevice_getPerformanceInfo */
typedef enum {
    SL_ANEURALNETWORKS_CAPABILITIES_PERFORMANCE_RELAXED_SCALAR = 0,
    SL_ANEURALNETWORKS_CAPABILITIES_PERFORMANCE_RELAXED_TENSOR = 1,
    SL_ANEURALNETWORKS_CAPABILITIES_PERFORMANCE_IF = 2,
    SL_ANEURALNETWORKS_CAPABILITIES_PERFORMANCE_WHILE = 3
} SL_ANeuralNetworksPerformanceInfoCode;

typedef enum {
    ANNDIAG_NO_ERROR = 0,
    ANNDIAG_FAILED_TO_LOAD_SL = 1,
    ANNDIAG_FAILED_TO_REGISTER_SERVICE = 2,
    ANNDIAG_GENERAL_ERROR = 3,
    ANNDIAG_INVALID_ARGUMENT = 4
} ANeuralNetworksDiagnosticResultCode;

/* The kind of the model's input (or output) tensors: every one float32, float16 or quantized,
   a mix of those, only other types (OTHER), or none (UNKNOWN). */
typedef enum {
    ANNDIAG_DATA_CLASS_UNKNOWN = 0,
    ANNDIAG_DATA_CLASS_OTHER = 1,
    ANNDIAG_DATA_CLASS_FLOAT32 = 2,
    ANNDIAG_DATA_CLASS_FLOAT16 = 3,
    ANNDIAG_DATA_CLASS_QUANT = 4,
    ANNDIAG_DATA_CLASS_MIXED = 5
} ANeuralNetworksDiagnosticDataClass;

/* How a computation was started: startCompute (ASYNC), compute (SYNC), burstCompute (BURST),
   startComputeWithDependencies (ASYNC_WITH_DEPS). */
typedef enum {
    ANNDIAG_EXECUTION_MODE_UNKNOWN = 0,
    ANNDIAG_EXECUTION_MODE_ASYNC = 1,
    ANNDIAG_EXECUTION_MODE_SYNC = 2,
    ANNDIAG_EXECUTION_MODE_BURST = 3,
    ANNDIAG_EXECUTION_MODE_ASYNC_WITH_DEPS = 4
} ANeuralNetworksDiagnosticExecutionMode;

/* What the diagnostic callbacks receive: valid only during the callback, read with the
   table's SL_ANeuralNetworksDiagnostic*Info_* getters. */
typedef struct ANeuralNetworksDiagnosticCompilationInfo ANeuralNetworksDiagnosticCompilationInfo;
typedef struct ANeuralNetworksDiagnosticExecutionInfo ANeuralNetworksDiagnosticExecutionInfo;

/* Called after every ANeuralNetworksCompilation_finish (success or failure) and after every
   computation (any mode), on the thread that finished it, once callbacks are registered. */
typedef void (*ANeuralNetworksDiagnosticCompilationFinishedCallback)(
        const void* context, const ANeuralNetworksDiagnosticCompilationInfo* info);
typedef void (*ANeuralNetworksDiagnosticExecutionFinishedCallback)(
        const void* context, const ANeuralNetworksDiagnosticExecutionInfo* info);

/* The part every layout starts with: a FeatureLevelCode (ANEURALNETWORKS_FEATURE_LEVEL_5..8). */
typedef struct NnApiSLDriverImpl {
    int64_t implFeatureLevel;
} NnApiSLDriverImpl;

/* Layout of feature levels 5, 6 and 7 (implFeatureLevel says which). */
typedef struct NnApiSLDriverImplFL5 {
    NnApiSLDriverImpl base;
%(fl5)s
} NnApiSLDriverImplFL5;

typedef struct NnApiSLDriverImplFL5 NnApiSLDriverImplFL6;
typedef NnApiSLDriverImplFL6 NnApiSLDriverImplFL7;

/* Layout of feature level 8: the FL5 layout, then two functions. */
typedef struct NnApiSLDriverImplFL8 {
    NnApiSLDriverImplFL5 base;
%(fl8)s
} NnApiSLDriverImplFL8;

/* The library's table (never NULL from a library of level >= 5, unless NNAPI_PY_FEATURE_LEVEL
   lowers the default library below level 5: then NULL, as the level has no Support Library). */
NnApiSLDriverImpl* ANeuralNetworks_getSLDriverImpl(void);

#ifdef __cplusplus
}
#endif

#endif /* NNAPI_PY_NEURAL_NETWORKS_SUPPORT_LIBRARY_IMPL_H */
"""


def render(nn_header_text):
    protos = nn_prototypes(nn_header_text)
    missing = [n for n in FL5_SLOTS + FL8_SLOTS if n not in protos and n not in SL_PROTOTYPES]
    assert not missing, f"slots with no signature: {missing}"
    return TEMPLATE % {"fl5": _slots(FL5_SLOTS, protos), "fl8": _slots(FL8_SLOTS, protos)}


if __name__ == "__main__":
    sys.stdout.write(render(open(NN_HEADER).read()))
