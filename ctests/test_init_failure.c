/*
 * test_init_failure.c -- behaviour when the library's runtime cannot start.
 *
 * Must be run with NNAPI_PY_FORCE_INIT_FAILURE=1 (the pytest driver does):
 * nnapi_py then fails its initialisation on purpose.  Every function that
 * returns a result code must return ANEURALNETWORKS_OP_FAILED (never
 * NO_ERROR, and not a validation code: nothing can be validated without the
 * runtime), out-pointers documented as "set to NULL on failure" must be NULL,
 * and the *_free functions must not crash.  The driver also checks that
 * stderr holds exactly one line starting with "nnapi_py:".
 *
 * All arguments are otherwise plausible and non-NULL; the "handles" are
 * pointers to a static dummy area (never real objects, since nothing can be
 * created).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <android/NeuralNetworks.h>

#include "check.h"
#include "nn_helpers.h"

#define FAIL_RC ANEURALNETWORKS_OP_FAILED

static char g_dummy[8][256];

int main(void) {
    check_init(50);
    /* any cause of a failed start-up will do: forced, or a PYTHONHOME that cannot work */
    if (!getenv("NNAPI_PY_FORCE_INIT_FAILURE") && !getenv("PYTHONHOME")) {
        printf("this program must be run with NNAPI_PY_FORCE_INIT_FAILURE=1 (or a bad PYTHONHOME)\n");
        CHECK(0);
        return check_summary();
    }
    ANeuralNetworksModel* fm = (ANeuralNetworksModel*)g_dummy[0];
    ANeuralNetworksCompilation* fc = (ANeuralNetworksCompilation*)g_dummy[1];
    ANeuralNetworksExecution* fe = (ANeuralNetworksExecution*)g_dummy[2];
    ANeuralNetworksMemory* fmem = (ANeuralNetworksMemory*)g_dummy[3];
    ANeuralNetworksMemoryDesc* fd = (ANeuralNetworksMemoryDesc*)g_dummy[4];
    ANeuralNetworksBurst* fb = (ANeuralNetworksBurst*)g_dummy[5];
    ANeuralNetworksEvent* fev = (ANeuralNetworksEvent*)g_dummy[6];
    ANeuralNetworksDevice* fdev = (ANeuralNetworksDevice*)g_dummy[7];
    const ANeuralNetworksDevice* devs[1] = {fdev};
    const ANeuralNetworksEvent* deps[1] = {fev};
    void* sentinel = (void*)(uintptr_t)0x1;

    const uint32_t d2[1] = {2};
    ANeuralNetworksOperandType tf = {.type = ANEURALNETWORKS_TENSOR_FLOAT32, .dimensionCount = 1, .dimensions = d2};
    float buf[2] = {1, 2};
    float scales[2] = {1, 1};
    ANeuralNetworksSymmPerChannelQuantParams pc = {.channelDim = 0, .scaleCount = 2, .scales = scales};
    const uint32_t in[3] = {0, 1, 2}, out[1] = {3};
    static const uint8_t token[ANEURALNETWORKS_BYTE_SIZE_OF_CACHE_TOKEN] = {0};
    int memfd = memfd_create("nnapi_py_ctest", MFD_CLOEXEC);
    if (memfd >= 0 && ftruncate(memfd, 4096) != 0) printf("note: ftruncate failed\n");
    int efd = eventfd(1, EFD_CLOEXEC);

    for (int pass = 0; pass < 2; pass++) { /* the failure is sticky: same answers the second time */
        ck_section(pass ? "second round" : "first round");
        uint32_t u = 7;
        int32_t i32 = 7;
        int64_t i64 = 7;
        uint64_t u64 = 7;
        const char* str = "x";
        bool sup[1];
        int fdout = 7;

        ANeuralNetworksModel* m = (ANeuralNetworksModel*)sentinel;
        CHECK_RC(ANeuralNetworksModel_create(&m), FAIL_RC);
        CHECK_MSG(m == NULL, "Model_create must set *model = NULL on failure (got %p)", (void*)m);
        CHECK_RC(ANeuralNetworksModel_addOperand(fm, &tf), FAIL_RC);
        CHECK_RC(ANeuralNetworksModel_setOperandValue(fm, 0, buf, sizeof buf), FAIL_RC);
        CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(fm, 0, fmem, 0, 8), FAIL_RC);
        CHECK_RC(ANeuralNetworksModel_setOperandValueFromModel(fm, 0, fm), FAIL_RC);
        CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(fm, 0, &pc), FAIL_RC);
        CHECK_RC(ANeuralNetworksModel_addOperation(fm, ANEURALNETWORKS_ADD, 3, in, 1, out), FAIL_RC);
        CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(fm, 2, in, 1, out), FAIL_RC);
        CHECK_RC(ANeuralNetworksModel_relaxComputationFloat32toFloat16(fm, true), FAIL_RC);
        CHECK_RC(ANeuralNetworksModel_finish(fm), FAIL_RC);
        CHECK_RC(ANeuralNetworksModel_getSupportedOperationsForDevices(fm, devs, 1, sup), FAIL_RC);

        ANeuralNetworksCompilation* c = NULL;
        CHECK_RC(ANeuralNetworksCompilation_create(fm, &c), FAIL_RC);
        CHECK_RC(ANeuralNetworksCompilation_createForDevices(fm, devs, 1, &c), FAIL_RC);
        CHECK_RC(ANeuralNetworksCompilation_setPreference(fc, ANEURALNETWORKS_PREFER_LOW_POWER), FAIL_RC);
        CHECK_RC(ANeuralNetworksCompilation_setPriority(fc, ANEURALNETWORKS_PRIORITY_LOW), FAIL_RC);
        CHECK_RC(ANeuralNetworksCompilation_setTimeout(fc, 0), FAIL_RC);
        CHECK_RC(ANeuralNetworksCompilation_setCaching(fc, "/tmp", token), FAIL_RC);
        CHECK_RC(ANeuralNetworksCompilation_finish(fc), FAIL_RC);
        CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForInput(fc, 0, &u), FAIL_RC);
        CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForOutput(fc, 0, &u), FAIL_RC);
        CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForInput(fc, 0, &u), FAIL_RC);
        CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForOutput(fc, 0, &u), FAIL_RC);

        ANeuralNetworksBurst* b = NULL;
        CHECK_RC(ANeuralNetworksBurst_create(fc, &b), FAIL_RC);
        ANeuralNetworksExecution* e = NULL;
        CHECK_RC(ANeuralNetworksExecution_create(fc, &e), FAIL_RC);
        CHECK_RC(ANeuralNetworksExecution_setInput(fe, 0, NULL, buf, sizeof buf), FAIL_RC);
        CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(fe, 0, NULL, fmem, 0, 8), FAIL_RC);
        CHECK_RC(ANeuralNetworksExecution_setOutput(fe, 0, NULL, buf, sizeof buf), FAIL_RC);
        CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(fe, 0, NULL, fmem, 0, 8), FAIL_RC);
        CHECK_RC(ANeuralNetworksExecution_setMeasureTiming(fe, true), FAIL_RC);
        CHECK_RC(ANeuralNetworksExecution_setTimeout(fe, 0), FAIL_RC);
        CHECK_RC(ANeuralNetworksExecution_setLoopTimeout(fe, 0), FAIL_RC);
        CHECK_RC(ANeuralNetworksExecution_setReusable(fe, true), FAIL_RC);
        CHECK_RC(ANeuralNetworksExecution_enableInputAndOutputPadding(fe, true), FAIL_RC);
        CHECK_RC(ANeuralNetworksExecution_compute(fe), FAIL_RC);
        ANeuralNetworksEvent* ev = (ANeuralNetworksEvent*)sentinel;
        CHECK_RC(ANeuralNetworksExecution_startCompute(fe, &ev), FAIL_RC);
        CHECK_MSG(ev == NULL, "startCompute must set *event = NULL on failure (got %p)", (void*)ev);
        ev = (ANeuralNetworksEvent*)sentinel;
        CHECK_RC(ANeuralNetworksExecution_startComputeWithDependencies(fe, deps, 1, 0, &ev), FAIL_RC);
        CHECK_MSG(ev == NULL, "startComputeWithDependencies must set *event = NULL on failure (got %p)",
                  (void*)ev);
        CHECK_RC(ANeuralNetworksExecution_burstCompute(fe, fb), FAIL_RC);
        CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(fe, 0, &u), FAIL_RC);
        CHECK_RC(ANeuralNetworksExecution_getOutputOperandDimensions(fe, 0, &u), FAIL_RC);
        CHECK_RC(ANeuralNetworksExecution_getDuration(fe, ANEURALNETWORKS_DURATION_ON_HARDWARE, &u64), FAIL_RC);

        CHECK_RC(ANeuralNetworksEvent_wait(fev), FAIL_RC);
        ev = (ANeuralNetworksEvent*)sentinel;
        CHECK_RC(ANeuralNetworksEvent_createFromSyncFenceFd(efd, &ev), FAIL_RC);
        CHECK_MSG(ev == NULL, "Event_createFromSyncFenceFd must set *event = NULL on failure (got %p)", (void*)ev);
        CHECK_RC(ANeuralNetworksEvent_getSyncFenceFd(fev, &fdout), FAIL_RC);

        ANeuralNetworksMemory* mem = (ANeuralNetworksMemory*)sentinel;
        CHECK_RC(ANeuralNetworksMemory_createFromFd(4096, PROT_READ | PROT_WRITE, memfd, 0, &mem), FAIL_RC);
        CHECK_MSG(mem == NULL, "Memory_createFromFd must set *memory = NULL on failure (got %p)", (void*)mem);
        mem = (ANeuralNetworksMemory*)sentinel;
        CHECK_RC(ANeuralNetworksMemory_createFromAHardwareBuffer((const AHardwareBuffer*)g_dummy[3], &mem), FAIL_RC);
        CHECK_MSG(mem == NULL, "Memory_createFromAHardwareBuffer must set *memory = NULL on failure (got %p)",
                  (void*)mem);
        CHECK_RC(ANeuralNetworksMemory_copy(fmem, fmem), FAIL_RC);
        mem = NULL;
        CHECK_RC(ANeuralNetworksMemory_createFromDesc(fd, &mem), FAIL_RC);
        ANeuralNetworksMemoryDesc* desc = (ANeuralNetworksMemoryDesc*)sentinel;
        CHECK_RC(ANeuralNetworksMemoryDesc_create(&desc), FAIL_RC);
        CHECK_MSG(desc == NULL, "MemoryDesc_create must set *desc = NULL on failure (got %p)", (void*)desc);
        CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(fd, fc, 0, 1.0f), FAIL_RC);
        CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(fd, fc, 0, 1.0f), FAIL_RC);
        CHECK_RC(ANeuralNetworksMemoryDesc_setDimensions(fd, 1, d2), FAIL_RC);
        CHECK_RC(ANeuralNetworksMemoryDesc_finish(fd), FAIL_RC);

        CHECK_RC(ANeuralNetworks_getDeviceCount(&u), FAIL_RC);
        ANeuralNetworksDevice* dev = NULL;
        CHECK_RC(ANeuralNetworks_getDevice(0, &dev), FAIL_RC);
        CHECK_RC(ANeuralNetworksDevice_getName(fdev, &str), FAIL_RC);
        CHECK_RC(ANeuralNetworksDevice_getType(fdev, &i32), FAIL_RC);
        CHECK_RC(ANeuralNetworksDevice_getVersion(fdev, &str), FAIL_RC);
        CHECK_RC(ANeuralNetworksDevice_getFeatureLevel(fdev, &i64), FAIL_RC);
        CHECK_RC(ANeuralNetworksDevice_wait(fdev), FAIL_RC);

        /* non-result-code functions: must simply not crash */
        printf("round %d: getRuntimeFeatureLevel=%lld getDefaultLoopTimeout=%llu getMaximumLoopTimeout=%llu\n", pass,
               (long long)ANeuralNetworks_getRuntimeFeatureLevel(),
               (unsigned long long)ANeuralNetworks_getDefaultLoopTimeout(),
               (unsigned long long)ANeuralNetworks_getMaximumLoopTimeout());

        /* *_free: NULL and the dummy handles */
        nn_free_null_handles();
        ANeuralNetworksModel_free(fm);
        ANeuralNetworksCompilation_free(fc);
        ANeuralNetworksExecution_free(fe);
        ANeuralNetworksBurst_free(fb);
        ANeuralNetworksMemory_free(fmem);
        ANeuralNetworksMemoryDesc_free(fd);
        ANeuralNetworksEvent_free(fev);
        CHECK(1); /* reached: no free crashed */
    }
    if (memfd >= 0) close(memfd);
    if (efd >= 0) close(efd);
    return check_summary();
}
