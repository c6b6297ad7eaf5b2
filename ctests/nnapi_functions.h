/*
 * ctests/nnapi_functions.h -- the 69 ANeuralNetworks* functions of the NDK
 * NeuralNetworks.h (feature levels 1..5; none were added at 6..8), as an
 * X-macro list: NNAPI_FUNCTIONS(X) expands X(name) once per function.
 * Used by test_dlopen.c (dlsym of every name) and by tests/test_ctests.py
 * (exported-symbol check), which parses the X(...) entries below.
 */
#ifndef NNAPI_PY_CTESTS_NNAPI_FUNCTIONS_H
#define NNAPI_PY_CTESTS_NNAPI_FUNCTIONS_H

#define NNAPI_FUNCTION_COUNT 69

#define NNAPI_FUNCTIONS(X) \
    X(ANeuralNetworksBurst_create) \
    X(ANeuralNetworksBurst_free) \
    X(ANeuralNetworksCompilation_create) \
    X(ANeuralNetworksCompilation_createForDevices) \
    X(ANeuralNetworksCompilation_finish) \
    X(ANeuralNetworksCompilation_free) \
    X(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForInput) \
    X(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForOutput) \
    X(ANeuralNetworksCompilation_getPreferredMemoryPaddingForInput) \
    X(ANeuralNetworksCompilation_getPreferredMemoryPaddingForOutput) \
    X(ANeuralNetworksCompilation_setCaching) \
    X(ANeuralNetworksCompilation_setPreference) \
    X(ANeuralNetworksCompilation_setPriority) \
    X(ANeuralNetworksCompilation_setTimeout) \
    X(ANeuralNetworksDevice_getFeatureLevel) \
    X(ANeuralNetworksDevice_getName) \
    X(ANeuralNetworksDevice_getType) \
    X(ANeuralNetworksDevice_getVersion) \
    X(ANeuralNetworksDevice_wait) \
    X(ANeuralNetworksEvent_createFromSyncFenceFd) \
    X(ANeuralNetworksEvent_free) \
    X(ANeuralNetworksEvent_getSyncFenceFd) \
    X(ANeuralNetworksEvent_wait) \
    X(ANeuralNetworksExecution_burstCompute) \
    X(ANeuralNetworksExecution_compute) \
    X(ANeuralNetworksExecution_create) \
    X(ANeuralNetworksExecution_enableInputAndOutputPadding) \
    X(ANeuralNetworksExecution_free) \
    X(ANeuralNetworksExecution_getDuration) \
    X(ANeuralNetworksExecution_getOutputOperandDimensions) \
    X(ANeuralNetworksExecution_getOutputOperandRank) \
    X(ANeuralNetworksExecution_setInput) \
    X(ANeuralNetworksExecution_setInputFromMemory) \
    X(ANeuralNetworksExecution_setLoopTimeout) \
    X(ANeuralNetworksExecution_setMeasureTiming) \
    X(ANeuralNetworksExecution_setOutput) \
    X(ANeuralNetworksExecution_setOutputFromMemory) \
    X(ANeuralNetworksExecution_setReusable) \
    X(ANeuralNetworksExecution_setTimeout) \
    X(ANeuralNetworksExecution_startCompute) \
    X(ANeuralNetworksExecution_startComputeWithDependencies) \
    X(ANeuralNetworksMemoryDesc_addInputRole) \
    X(ANeuralNetworksMemoryDesc_addOutputRole) \
    X(ANeuralNetworksMemoryDesc_create) \
    X(ANeuralNetworksMemoryDesc_finish) \
    X(ANeuralNetworksMemoryDesc_free) \
    X(ANeuralNetworksMemoryDesc_setDimensions) \
    X(ANeuralNetworksMemory_copy) \
    X(ANeuralNetworksMemory_createFromAHardwareBuffer) \
    X(ANeuralNetworksMemory_createFromDesc) \
    X(ANeuralNetworksMemory_createFromFd) \
    X(ANeuralNetworksMemory_free) \
    X(ANeuralNetworksModel_addOperand) \
    X(ANeuralNetworksModel_addOperation) \
    X(ANeuralNetworksModel_create) \
    X(ANeuralNetworksModel_finish) \
    X(ANeuralNetworksModel_free) \
    X(ANeuralNetworksModel_getSupportedOperationsForDevices) \
    X(ANeuralNetworksModel_identifyInputsAndOutputs) \
    X(ANeuralNetworksModel_relaxComputationFloat32toFloat16) \
    X(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams) \
    X(ANeuralNetworksModel_setOperandValue) \
    X(ANeuralNetworksModel_setOperandValueFromMemory) \
    X(ANeuralNetworksModel_setOperandValueFromModel) \
    X(ANeuralNetworks_getDefaultLoopTimeout) \
    X(ANeuralNetworks_getDevice) \
    X(ANeuralNetworks_getDeviceCount) \
    X(ANeuralNetworks_getMaximumLoopTimeout) \
    X(ANeuralNetworks_getRuntimeFeatureLevel) \
    /* end */

#endif /* NNAPI_PY_CTESTS_NNAPI_FUNCTIONS_H */
