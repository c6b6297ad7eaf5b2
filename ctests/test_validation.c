/*
 * test_validation.c -- misuse of the NNAPI C API must be rejected with the
 * documented (or, where the documentation is silent, Android-runtime) result
 * code, and must never crash.  Every negative check has a positive control
 * next to it (the same call with the offending argument fixed succeeds).
 *
 * Reference: /work/shared/reference/aosp/validation_catalogue.md and
 * api_functions.md.  Sections follow the catalogue:
 *   1 null pointers -> UNEXPECTED_NULL     2 wrong state -> BAD_STATE
 *   3 bad data -> BAD_DATA                 4 handle abuse / free
 *   5 the 128-byte immediate-copy rule
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <android/NeuralNetworks.h>

#include "check.h"
#include "nn_helpers.h"

#define E_OK ANEURALNETWORKS_NO_ERROR
#define E_NULL ANEURALNETWORKS_UNEXPECTED_NULL
#define E_DATA ANEURALNETWORKS_BAD_DATA
#define E_STATE ANEURALNETWORKS_BAD_STATE
#define E_FAIL ANEURALNETWORKS_OP_FAILED

#define F32 ANEURALNETWORKS_TENSOR_FLOAT32

/* A graph error may be reported by the mutator that creates it or by finish. */
#define CHECK_GRAPH_BAD(rc_mutator, model)                                   \
    do {                                                                     \
        int rc_ = (rc_mutator);                                              \
        if (rc_ == E_OK)                                                     \
            CHECK_RC(ANeuralNetworksModel_finish(model), E_DATA);            \
        else                                                                 \
            CHECK_RC(rc_, E_DATA);                                           \
    } while (0)

static const uint32_t kDim2[1] = {2};
static const uint32_t kDim3[1] = {3};
static const int32_t kFuseNone = ANEURALNETWORKS_FUSED_NONE;

static ANeuralNetworksDevice* g_dev;

/* model with operands 0,1 = float[2] inputs, 2 = INT32 fuse (constant), 3 = float[2] output;
 * the ADD operation and identifyInputsAndOutputs are added when `complete` */
static ANeuralNetworksModel* partial_add_model(int complete) {
    ANeuralNetworksModel* m = NULL;
    if (ANeuralNetworksModel_create(&m) != E_OK) return NULL;
    int rc = 0;
    NN_TRY(rc, nn_add_operand(m, F32, 1, kDim2, 0, 0));
    NN_TRY(rc, nn_add_operand(m, F32, 1, kDim2, 0, 0));
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0));
    NN_TRY(rc, nn_add_operand(m, F32, 1, kDim2, 0, 0));
    NN_TRY(rc, ANeuralNetworksModel_setOperandValue(m, 2, &kFuseNone, 4));
    if (complete) {
        uint32_t in[3] = {0, 1, 2}, out[1] = {3}, mi[2] = {0, 1};
        NN_TRY(rc, ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out));
        NN_TRY(rc, ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 1, out));
    }
    if (rc) printf("setup: partial_add_model failed with %d\n", rc);
    return m;
}

static ANeuralNetworksModel* finished_add_model(void) {
    ANeuralNetworksModel* m = NULL;
    int rc = nn_build_add_vec(2, &m);
    if (rc) printf("setup: nn_build_add_vec failed with %d\n", rc);
    return m;
}

static ANeuralNetworksCompilation* finished_compilation(ANeuralNetworksModel* m) {
    ANeuralNetworksCompilation* c = NULL;
    int rc = nn_compile(m, &c);
    if (rc) printf("setup: nn_compile failed with %d\n", rc);
    return c;
}

static ANeuralNetworksCompilation* finished_device_compilation(ANeuralNetworksModel* m) {
    ANeuralNetworksCompilation* c = NULL;
    int rc = nn_compile_for_device(m, &c);
    if (rc) printf("setup: nn_compile_for_device failed with %d\n", rc);
    return c;
}

/* ------------------------------------------------------------------------ */
/* 1. NULL pointers                                                          */
/* ------------------------------------------------------------------------ */

static void test_null_model(void) {
    ck_section("null: model");
    nn_shm shm;
    CHECK_RC(nn_shm_create(64, &shm), E_OK);
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(ANeuralNetworksModel_create(NULL), E_NULL);
    CHECK_RC(ANeuralNetworksModel_create(&m), E_OK);

    ANeuralNetworksOperandType tf = nn_type(F32, 1, kDim2, 0, 0);
    ANeuralNetworksOperandType ti = nn_scalar(ANEURALNETWORKS_INT32);
    ANeuralNetworksOperandType tpc = nn_type(ANEURALNETWORKS_TENSOR_QUANT8_SYMM_PER_CHANNEL, 1,
                                             kDim2, 0, 0);
    ANeuralNetworksOperandType tmodel = nn_scalar(ANEURALNETWORKS_MODEL);
    CHECK_RC(ANeuralNetworksModel_addOperand(NULL, &tf), E_NULL);
    CHECK_RC(ANeuralNetworksModel_addOperand(m, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &tf), E_OK);  /* 0 */
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &tf), E_OK);  /* 1 */
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &ti), E_OK);  /* 2 */
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &tf), E_OK);  /* 3 */

    CHECK_RC(ANeuralNetworksModel_setOperandValue(NULL, 2, &kFuseNone, 4), E_NULL);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 2, NULL, 4), E_NULL);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 2, &kFuseNone, 4), E_OK);

    /* a separate scratch model for the operand kinds that need special types */
    ANeuralNetworksModel* s = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&s), E_OK);
    CHECK_RC(ANeuralNetworksModel_addOperand(s, &tf), E_OK);     /* 0 */
    CHECK_RC(ANeuralNetworksModel_addOperand(s, &tpc), E_OK);    /* 1 */
    CHECK_RC(ANeuralNetworksModel_addOperand(s, &tmodel), E_OK); /* 2 */
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(NULL, 0, shm.mem, 0, 8), E_NULL);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(s, 0, NULL, 0, 8), E_NULL);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(s, 0, shm.mem, 0, 8), E_OK);
    float scales[2] = {0.5f, 0.25f};
    ANeuralNetworksSymmPerChannelQuantParams pc = {.channelDim = 0, .scaleCount = 2, .scales = scales};
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(NULL, 1, &pc), E_NULL);
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(s, 1, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(s, 1, &pc), E_OK);
    ANeuralNetworksModel* ref = finished_add_model();
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromModel(NULL, 2, ref), E_NULL);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromModel(s, 2, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromModel(s, 2, ref), E_OK);
    ANeuralNetworksModel_free(s);

    uint32_t in[3] = {0, 1, 2}, out[1] = {3}, mi[2] = {0, 1};
    CHECK_RC(ANeuralNetworksModel_addOperation(NULL, ANEURALNETWORKS_ADD, 3, in, 1, out), E_NULL);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, NULL, 1, out), E_NULL);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out), E_OK);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(NULL, 2, mi, 1, out), E_NULL);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, NULL, 1, out), E_NULL);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 1, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 1, out), E_OK);
    CHECK_RC(ANeuralNetworksModel_relaxComputationFloat32toFloat16(NULL, true), E_NULL);
    CHECK_RC(ANeuralNetworksModel_relaxComputationFloat32toFloat16(m, false), E_OK);
    CHECK_RC(ANeuralNetworksModel_finish(NULL), E_NULL);
    CHECK_RC(ANeuralNetworksModel_finish(m), E_OK);

    const ANeuralNetworksDevice* devs[1] = {g_dev};
    const ANeuralNetworksDevice* nulldevs[1] = {NULL};
    bool sup[4] = {false, false, false, false};
    CHECK_RC(ANeuralNetworksModel_getSupportedOperationsForDevices(NULL, devs, 1, sup), E_NULL);
    CHECK_RC(ANeuralNetworksModel_getSupportedOperationsForDevices(m, NULL, 1, sup), E_NULL);
    CHECK_RC(ANeuralNetworksModel_getSupportedOperationsForDevices(m, devs, 1, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksModel_getSupportedOperationsForDevices(m, nulldevs, 1, sup), E_NULL);
    CHECK_RC(ANeuralNetworksModel_getSupportedOperationsForDevices(m, devs, 1, sup), E_OK);
    CHECK(sup[0]);

    ANeuralNetworksModel_free(m);
    ANeuralNetworksModel_free(ref);
    nn_shm_destroy(&shm);
}

static void test_null_compilation(void) {
    ck_section("null: compilation");
    ANeuralNetworksModel* m = finished_add_model();
    ANeuralNetworksCompilation* c = NULL;
    ANeuralNetworksCompilation* cd = NULL;
    const ANeuralNetworksDevice* devs[1] = {g_dev};
    const ANeuralNetworksDevice* nulldevs[1] = {NULL};
    static const uint8_t token[ANEURALNETWORKS_BYTE_SIZE_OF_CACHE_TOKEN] = {1, 2, 3};
    char dir[] = "/tmp/nnapi_py_ctest_cacheXXXXXX";
    CHECK(mkdtemp(dir) != NULL);

    CHECK_RC(ANeuralNetworksCompilation_create(NULL, &c), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_create(m, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_create(m, &c), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_createForDevices(NULL, devs, 1, &cd), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_createForDevices(m, NULL, 1, &cd), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_createForDevices(m, devs, 1, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_createForDevices(m, nulldevs, 1, &cd), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_createForDevices(m, devs, 1, &cd), E_OK);

    CHECK_RC(ANeuralNetworksCompilation_setPreference(NULL, ANEURALNETWORKS_PREFER_LOW_POWER), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_setPreference(c, ANEURALNETWORKS_PREFER_LOW_POWER), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setPriority(NULL, ANEURALNETWORKS_PRIORITY_HIGH), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_setPriority(c, ANEURALNETWORKS_PRIORITY_HIGH), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setTimeout(NULL, 0), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_setTimeout(cd, 0), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setCaching(NULL, dir, token), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_setCaching(c, NULL, token), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_setCaching(c, dir, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_setCaching(c, dir, token), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_finish(NULL), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_finish(c), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_finish(cd), E_OK);

    uint32_t v = 0;
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForInput(NULL, 0, &v), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForInput(c, 0, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForInput(c, 0, &v), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForOutput(NULL, 0, &v), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForOutput(c, 0, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForOutput(c, 0, &v), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForInput(NULL, 0, &v), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForInput(c, 0, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForInput(c, 0, &v), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForOutput(NULL, 0, &v), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForOutput(c, 0, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForOutput(c, 0, &v), E_OK);

    ANeuralNetworksBurst* b = NULL;
    CHECK_RC(ANeuralNetworksBurst_create(NULL, &b), E_NULL);
    CHECK_RC(ANeuralNetworksBurst_create(c, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksBurst_create(c, &b), E_OK);
    ANeuralNetworksBurst_free(b);

    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(NULL, &e), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_create(c, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    ANeuralNetworksExecution_free(e);

    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksCompilation_free(cd);
    ANeuralNetworksModel_free(m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
}

static void test_null_execution(void) {
    ck_section("null: execution");
    ANeuralNetworksModel* m = finished_add_model();
    ANeuralNetworksCompilation* c = finished_compilation(m);
    ANeuralNetworksCompilation* cd = finished_device_compilation(m);
    nn_shm shm;
    CHECK_RC(nn_shm_create(64, &shm), E_OK);
    float a[2] = {1, 2}, b[2] = {10, 20}, o[2] = {0, 0};

    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(cd, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(NULL, 0, NULL, a, 8), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, NULL, 8), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(NULL, 1, NULL, shm.mem, 0, 8), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 1, NULL, NULL, 0, 8), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 1, NULL, shm.mem, 0, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(NULL, 0, NULL, o, 8), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, NULL, 8), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(NULL, 0, NULL, shm.mem, 16, 8), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, NULL, 16, 8), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, shm.mem, 16, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setMeasureTiming(NULL, true), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_setMeasureTiming(e, true), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setTimeout(NULL, 0), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_setTimeout(e, 0), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setLoopTimeout(NULL, 1000000), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_setLoopTimeout(e, 1000000), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setReusable(NULL, true), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_setReusable(e, true), E_OK);
    CHECK_RC(ANeuralNetworksExecution_enableInputAndOutputPadding(NULL, true), E_NULL);
    {
        ANeuralNetworksExecution* e2 = NULL;
        CHECK_RC(ANeuralNetworksExecution_create(c, &e2), E_OK);
        CHECK_RC(ANeuralNetworksExecution_enableInputAndOutputPadding(e2, true), E_OK);
        ANeuralNetworksExecution_free(e2);
    }

    CHECK_RC(ANeuralNetworksExecution_compute(NULL), E_NULL);
    ANeuralNetworksEvent* ev = (ANeuralNetworksEvent*)(uintptr_t)0x1;
    CHECK_RC(ANeuralNetworksExecution_startCompute(NULL, &ev), E_NULL);
    CHECK_MSG(ev == NULL, "*event must be set to NULL on error (got %p)", (void*)ev);
    CHECK_RC(ANeuralNetworksExecution_startCompute(e, NULL), E_NULL);
    const ANeuralNetworksEvent* nulldeps[1] = {NULL};
    ev = (ANeuralNetworksEvent*)(uintptr_t)0x1;
    CHECK_RC(ANeuralNetworksExecution_startComputeWithDependencies(NULL, NULL, 0, 0, &ev), E_NULL);
    CHECK_MSG(ev == NULL, "*event must be set to NULL on error (got %p)", (void*)ev);
    ev = NULL;
    CHECK_RC(ANeuralNetworksExecution_startComputeWithDependencies(e, NULL, 1, 0, &ev), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_startComputeWithDependencies(e, nulldeps, 1, 0, &ev), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_startComputeWithDependencies(e, NULL, 0, 0, NULL), E_NULL);

    ANeuralNetworksBurst* burst = NULL;
    CHECK_RC(ANeuralNetworksBurst_create(cd, &burst), E_OK);
    CHECK_RC(ANeuralNetworksExecution_burstCompute(NULL, burst), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_burstCompute(e, NULL), E_NULL);

    uint32_t r = 0, dims[1] = {0};
    uint64_t dur = 0;
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(NULL, 0, &r), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(e, 0, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandDimensions(NULL, 0, dims), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandDimensions(e, 0, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_getDuration(NULL, ANEURALNETWORKS_DURATION_ON_HARDWARE, &dur), E_NULL);
    CHECK_RC(ANeuralNetworksExecution_getDuration(e, ANEURALNETWORKS_DURATION_ON_HARDWARE, NULL), E_NULL);

    /* positive controls on the same (reusable) execution */
    memcpy(shm.p, b, 8);
    CHECK_RC(ANeuralNetworksExecution_burstCompute(e, burst), E_OK);
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &r), E_OK);
    CHECK_VAL(r, 1);
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandDimensions(e, 0, dims), E_OK);
    CHECK_VAL(dims[0], 2);
    CHECK_RC(ANeuralNetworksExecution_getDuration(e, ANEURALNETWORKS_DURATION_ON_HARDWARE, &dur), E_OK);
    float res[2];
    memcpy(res, shm.p + 16, 8);
    CHECK(res[0] == 11.0f && res[1] == 22.0f);
    ev = NULL;
    CHECK_RC(ANeuralNetworksExecution_startComputeWithDependencies(e, NULL, 0, 0, &ev), E_OK);
    CHECK_RC(ANeuralNetworksEvent_wait(ev), E_OK);
    int fd = -2;
    CHECK_RC(ANeuralNetworksEvent_wait(NULL), E_NULL);
    CHECK_RC(ANeuralNetworksEvent_getSyncFenceFd(NULL, &fd), E_NULL);
    CHECK_RC(ANeuralNetworksEvent_getSyncFenceFd(ev, NULL), E_NULL);
    ANeuralNetworksEvent_free(ev);

    ANeuralNetworksBurst_free(burst);
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksCompilation_free(cd);
    ANeuralNetworksModel_free(m);
    nn_shm_destroy(&shm);
}

static void test_null_memory_device_event(void) {
    ck_section("null: memory, desc, device, event");
    nn_shm a, b;
    CHECK_RC(nn_shm_create(64, &a), E_OK);
    CHECK_RC(nn_shm_create(64, &b), E_OK);
    CHECK_RC(ANeuralNetworksMemory_createFromFd(64, PROT_READ | PROT_WRITE, a.fd, 0, NULL), E_NULL);
    ANeuralNetworksMemory* mem = NULL;
    CHECK_RC(ANeuralNetworksMemory_createFromAHardwareBuffer(NULL, &mem), E_NULL);
    static char fake_ahwb[256];
    CHECK_RC(ANeuralNetworksMemory_createFromAHardwareBuffer((const AHardwareBuffer*)fake_ahwb, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksMemory_copy(NULL, b.mem), E_NULL);
    CHECK_RC(ANeuralNetworksMemory_copy(a.mem, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksMemory_copy(a.mem, b.mem), E_OK);

    ANeuralNetworksModel* m = finished_add_model();
    ANeuralNetworksCompilation* c = finished_compilation(m);
    ANeuralNetworksMemoryDesc* d = NULL;
    CHECK_RC(ANeuralNetworksMemoryDesc_create(NULL), E_NULL);
    CHECK_RC(ANeuralNetworksMemoryDesc_create(&d), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(NULL, c, 0, 1.0f), E_NULL);
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, NULL, 0, 1.0f), E_NULL);
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 0, 1.0f), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(NULL, c, 0, 1.0f), E_NULL);
    CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(d, NULL, 0, 1.0f), E_NULL);
    CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(d, c, 0, 1.0f), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_setDimensions(NULL, 1, kDim2), E_NULL);
    CHECK_RC(ANeuralNetworksMemoryDesc_setDimensions(d, 1, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksMemoryDesc_setDimensions(d, 1, kDim2), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_finish(NULL), E_NULL);
    CHECK_RC(ANeuralNetworksMemoryDesc_finish(d), E_OK);
    CHECK_RC(ANeuralNetworksMemory_createFromDesc(NULL, &mem), E_NULL);
    CHECK_RC(ANeuralNetworksMemory_createFromDesc(d, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksMemory_createFromDesc(d, &mem), E_OK);
    ANeuralNetworksMemory_free(mem);
    ANeuralNetworksMemoryDesc_free(d);

    uint32_t n = 0;
    ANeuralNetworksDevice* dev = NULL;
    const char* s = NULL;
    int32_t type = -1;
    int64_t fl = 0;
    CHECK_RC(ANeuralNetworks_getDeviceCount(NULL), E_NULL);
    CHECK_RC(ANeuralNetworks_getDeviceCount(&n), E_OK);
    CHECK_RC(ANeuralNetworks_getDevice(0, NULL), E_NULL);
    CHECK_RC(ANeuralNetworks_getDevice(0, &dev), E_OK);
    CHECK_RC(ANeuralNetworksDevice_getName(NULL, &s), E_NULL);
    CHECK_RC(ANeuralNetworksDevice_getName(dev, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksDevice_getName(dev, &s), E_OK);
    CHECK_RC(ANeuralNetworksDevice_getType(NULL, &type), E_NULL);
    CHECK_RC(ANeuralNetworksDevice_getType(dev, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksDevice_getType(dev, &type), E_OK);
    CHECK_RC(ANeuralNetworksDevice_getVersion(NULL, &s), E_NULL);
    CHECK_RC(ANeuralNetworksDevice_getVersion(dev, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksDevice_getVersion(dev, &s), E_OK);
    CHECK_RC(ANeuralNetworksDevice_getFeatureLevel(NULL, &fl), E_NULL);
    CHECK_RC(ANeuralNetworksDevice_getFeatureLevel(dev, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksDevice_getFeatureLevel(dev, &fl), E_OK);
    CHECK_RC(ANeuralNetworksDevice_wait(NULL), E_NULL);
    CHECK_RC(ANeuralNetworksDevice_wait(dev), E_OK);

    int efd = eventfd(0, EFD_CLOEXEC);
    CHECK(efd >= 0);
    ANeuralNetworksEvent* ev = NULL;
    CHECK_RC(ANeuralNetworksEvent_createFromSyncFenceFd(efd, NULL), E_NULL);
    CHECK_RC(ANeuralNetworksEvent_createFromSyncFenceFd(efd, &ev), E_OK);
    uint64_t one = 1;
    CHECK(write(efd, &one, sizeof one) == (ssize_t)sizeof one);
    CHECK_RC(ANeuralNetworksEvent_wait(ev), E_OK);
    ANeuralNetworksEvent_free(ev);
    close(efd);

    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
    nn_shm_destroy(&a);
    nn_shm_destroy(&b);
}

static void test_free_null(void) {
    ck_section("free(NULL) is a no-op");
    nn_free_null_handles();
    CHECK(1); /* reached: none of the frees crashed */
}

/* ------------------------------------------------------------------------ */
/* 2. Wrong state                                                            */
/* ------------------------------------------------------------------------ */

static void test_state_model(void) {
    ck_section("state: model");
    nn_shm shm;
    CHECK_RC(nn_shm_create(64, &shm), E_OK);
    ANeuralNetworksModel* m = finished_add_model();
    ANeuralNetworksModel* ref = finished_add_model();
    ANeuralNetworksOperandType tf = nn_type(F32, 1, kDim2, 0, 0);
    float scales[2] = {0.5f, 0.5f};
    ANeuralNetworksSymmPerChannelQuantParams pc = {.channelDim = 0, .scaleCount = 2, .scales = scales};
    uint32_t in[3] = {0, 1, 2}, out[1] = {3}, mi[2] = {0, 1};

    /* every mutator after finish */
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &tf), E_STATE);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 2, &kFuseNone, 4), E_STATE);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(m, 0, shm.mem, 0, 8), E_STATE);
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(m, 0, &pc), E_STATE);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromModel(m, 0, ref), E_STATE);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out), E_STATE);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 1, out), E_STATE);
    CHECK_RC(ANeuralNetworksModel_relaxComputationFloat32toFloat16(m, true), E_STATE);
    CHECK_RC(ANeuralNetworksModel_finish(m), E_STATE);

    /* positive controls: the same mutators on an unfinished model */
    ANeuralNetworksModel* u = partial_add_model(0);
    CHECK_RC(ANeuralNetworksModel_addOperand(u, &tf), E_OK); /* 4 */
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(u, 4, shm.mem, 0, 8), E_OK);
    CHECK_RC(ANeuralNetworksModel_addOperation(u, ANEURALNETWORKS_ADD, 3, in, 1, out), E_OK);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(u, 2, mi, 1, out), E_OK);
    CHECK_RC(ANeuralNetworksModel_relaxComputationFloat32toFloat16(u, true), E_OK);

    /* unfinished model cannot be compiled or queried */
    ANeuralNetworksCompilation* c = NULL;
    const ANeuralNetworksDevice* devs[1] = {g_dev};
    bool sup[2];
    CHECK_RC(ANeuralNetworksCompilation_create(u, &c), E_STATE);
    ANeuralNetworksCompilation_free(c);
    c = NULL;
    CHECK_RC(ANeuralNetworksCompilation_createForDevices(u, devs, 1, &c), E_STATE);
    ANeuralNetworksCompilation_free(c);
    c = NULL;
    CHECK_RC(ANeuralNetworksModel_getSupportedOperationsForDevices(u, devs, 1, sup), E_STATE);
    CHECK_RC(ANeuralNetworksModel_finish(u), E_OK); /* unused operand 4 is a constant: fine */
    CHECK_RC(ANeuralNetworksCompilation_create(u, &c), E_OK);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(u);

    /* setOperandValueFromModel with an unfinished referenced model */
    ANeuralNetworksModel* s = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&s), E_OK);
    ANeuralNetworksOperandType tm = nn_scalar(ANEURALNETWORKS_MODEL);
    CHECK_RC(ANeuralNetworksModel_addOperand(s, &tm), E_OK);
    ANeuralNetworksModel* unfinished = partial_add_model(1);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromModel(s, 0, unfinished), E_STATE);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromModel(s, 0, ref), E_OK);
    ANeuralNetworksModel_free(s);
    ANeuralNetworksModel_free(unfinished);

    /* a model whose finish failed is invalid: finish again -> BAD_STATE,
     * Compilation_create -> BAD_DATA ("the model is invalid", documented) */
    ANeuralNetworksModel* empty = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&empty), E_OK);
    CHECK_RC(ANeuralNetworksModel_finish(empty), E_DATA);
    CHECK_RC(ANeuralNetworksModel_finish(empty), E_STATE);
    c = NULL;
    CHECK_RC(ANeuralNetworksCompilation_create(empty, &c), E_DATA);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(empty);

    ANeuralNetworksModel_free(m);
    ANeuralNetworksModel_free(ref);
    nn_shm_destroy(&shm);
}

static void test_state_compilation(void) {
    ck_section("state: compilation");
    ANeuralNetworksModel* m = finished_add_model();
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(ANeuralNetworksCompilation_create(m, &c), E_OK);
    static const uint8_t token[ANEURALNETWORKS_BYTE_SIZE_OF_CACHE_TOKEN] = {9};
    char dir[] = "/tmp/nnapi_py_ctest_cacheXXXXXX";
    CHECK(mkdtemp(dir) != NULL);

    /* before finish */
    ANeuralNetworksExecution* e = NULL;
    ANeuralNetworksBurst* b = NULL;
    uint32_t v = 0;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_STATE);
    ANeuralNetworksExecution_free(e);
    e = NULL;
    CHECK_RC(ANeuralNetworksBurst_create(c, &b), E_STATE);
    ANeuralNetworksBurst_free(b);
    b = NULL;
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForInput(c, 0, &v), E_STATE);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForOutput(c, 0, &v), E_STATE);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForInput(c, 0, &v), E_STATE);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForOutput(c, 0, &v), E_STATE);
    ANeuralNetworksMemoryDesc* d = NULL;
    CHECK_RC(ANeuralNetworksMemoryDesc_create(&d), E_OK);
    /* role on an unfinished compilation: AOSP maps every role failure to BAD_DATA */
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 0, 1.0f), E_DATA);
    CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(d, c, 0, 1.0f), E_DATA);

    CHECK_RC(ANeuralNetworksCompilation_setPreference(c, ANEURALNETWORKS_PREFER_SUSTAINED_SPEED), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setPriority(c, ANEURALNETWORKS_PRIORITY_LOW), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setCaching(c, dir, token), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_finish(c), E_OK);

    /* after finish */
    CHECK_RC(ANeuralNetworksCompilation_setPreference(c, ANEURALNETWORKS_PREFER_LOW_POWER), E_STATE);
    CHECK_RC(ANeuralNetworksCompilation_setPriority(c, ANEURALNETWORKS_PRIORITY_HIGH), E_STATE);
    CHECK_RC(ANeuralNetworksCompilation_setCaching(c, dir, token), E_STATE);
    CHECK_RC(ANeuralNetworksCompilation_finish(c), E_STATE);
    /* ... and the things that need a finished compilation now work */
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksBurst_create(c, &b), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 0, 1.0f), E_OK);
    ANeuralNetworksMemoryDesc_free(d);
    ANeuralNetworksBurst_free(b);
    ANeuralNetworksExecution_free(e);

    ANeuralNetworksCompilation* cd = NULL;
    const ANeuralNetworksDevice* devs[1] = {g_dev};
    CHECK_RC(ANeuralNetworksCompilation_createForDevices(m, devs, 1, &cd), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setTimeout(cd, 5000000000ull), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_finish(cd), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setTimeout(cd, 5000000000ull), E_STATE);
    CHECK_RC(ANeuralNetworksCompilation_finish(cd), E_STATE);

    ANeuralNetworksCompilation_free(cd);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
}

static void test_state_execution(void) {
    ck_section("state: execution");
    ANeuralNetworksModel* m = finished_add_model();
    ANeuralNetworksCompilation* c = finished_compilation(m);
    ANeuralNetworksCompilation* cd = finished_device_compilation(m);
    nn_shm shm;
    CHECK_RC(nn_shm_create(64, &shm), E_OK);
    float a[2] = {1, 2}, b[2] = {3, 4}, o[2] = {0, 0};
    uint32_t r = 0, dims[1];
    uint64_t dur = 0;

    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(cd, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, shm.mem, 0, 8), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 1, NULL, shm.mem, 0, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, 8), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 8), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, shm.mem, 16, 8), E_STATE);
    /* padding must be enabled before any input/output is set */
    CHECK_RC(ANeuralNetworksExecution_enableInputAndOutputPadding(e, true), E_STATE);
    /* results before completion */
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &r), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandDimensions(e, 0, dims), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_getDuration(e, ANEURALNETWORKS_DURATION_IN_DRIVER, &dur), E_STATE);
    /* positive controls for the setters that will be rejected after compute */
    CHECK_RC(ANeuralNetworksExecution_setLoopTimeout(e, 1000000000ull), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setTimeout(e, 0), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setMeasureTiming(e, false), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setReusable(e, false), E_OK);
    memcpy(shm.p, b, 8);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    CHECK(o[0] == 4.0f && o[1] == 6.0f);

    /* every setter once computation has completed */
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, shm.mem, 0, 8), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 8), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, shm.mem, 16, 8), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_setLoopTimeout(e, 1000000000ull), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_setTimeout(e, 0), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_setMeasureTiming(e, true), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_enableInputAndOutputPadding(e, true), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_setReusable(e, true), E_STATE);
    /* a non-reusable execution cannot be computed again, by any entry point */
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_STATE);
    ANeuralNetworksEvent* ev = (ANeuralNetworksEvent*)(uintptr_t)0x1;
    CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_STATE);
    CHECK_MSG(ev == NULL, "*event must be NULL on error (got %p)", (void*)ev);
    ev = (ANeuralNetworksEvent*)(uintptr_t)0x1;
    CHECK_RC(ANeuralNetworksExecution_startComputeWithDependencies(e, NULL, 0, 0, &ev), E_STATE);
    CHECK_MSG(ev == NULL, "*event must be NULL on error (got %p)", (void*)ev);
    ANeuralNetworksBurst* burst = NULL;
    CHECK_RC(ANeuralNetworksBurst_create(cd, &burst), E_OK);
    CHECK_RC(ANeuralNetworksExecution_burstCompute(e, burst), E_STATE);
    /* results are available now; duration without measurement requested:
     * value must be UINT64_MAX; the code is NO_ERROR (doc) or BAD_STATE (AOSP) */
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &r), E_OK);
    dur = 0;
    int rc = ANeuralNetworksExecution_getDuration(e, ANEURALNETWORKS_DURATION_ON_HARDWARE, &dur);
    CHECK_MSG(rc == E_OK || rc == E_STATE, "getDuration without measurement returned %d", rc);
    CHECK_MSG(dur == UINT64_MAX, "duration without measurement must be UINT64_MAX, got %llu",
              (unsigned long long)dur);
    ANeuralNetworksExecution_free(e);

    /* startCompute path: recompute after Event_wait is rejected too */
    e = NULL;
    CHECK_RC(nn_prepare2(c, a, b, o, 2, &e), E_OK);
    ev = NULL;
    CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_OK);
    /* a second computation while the first may still be in flight (or has completed) */
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_STATE);
    CHECK_RC(ANeuralNetworksEvent_wait(ev), E_OK);
    ANeuralNetworksEvent_free(ev);
    ev = NULL;
    CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_STATE);
    CHECK(ev == NULL);
    ANeuralNetworksExecution_free(e);

    /* reusable execution: positive control, then setters still rejected */
    e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setReusable(e, true), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), E_STATE);
    CHECK_RC(ANeuralNetworksExecution_setReusable(e, false), E_STATE);
    ANeuralNetworksExecution_free(e);

    /* compute with an input not set -> BAD_DATA; results then unavailable */
    e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &r), E_STATE);
    ANeuralNetworksExecution_free(e);
    /* output not set */
    e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_DATA);
    ANeuralNetworksExecution_free(e);

    /* enableInputAndOutputPadding after setOutput also rejected */
    e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_enableInputAndOutputPadding(e, true), E_STATE);
    ANeuralNetworksExecution_free(e);

    ANeuralNetworksBurst_free(burst);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksCompilation_free(cd);
    ANeuralNetworksModel_free(m);
    nn_shm_destroy(&shm);
}

static void test_state_memory_desc(void) {
    ck_section("state: memory descriptor");
    ANeuralNetworksModel* m = finished_add_model();
    ANeuralNetworksCompilation* c = finished_compilation(m);
    ANeuralNetworksMemoryDesc* d = NULL;
    ANeuralNetworksMemory* mem = NULL;
    CHECK_RC(ANeuralNetworksMemoryDesc_create(&d), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 0, 1.0f), E_OK);
    /* unfinished descriptor */
    CHECK_RC(ANeuralNetworksMemory_createFromDesc(d, &mem), E_STATE);
    ANeuralNetworksMemory_free(mem);
    mem = NULL;
    CHECK_RC(ANeuralNetworksMemoryDesc_finish(d), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 1, 1.0f), E_STATE);
    CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(d, c, 0, 1.0f), E_STATE);
    CHECK_RC(ANeuralNetworksMemoryDesc_setDimensions(d, 1, kDim2), E_STATE);
    CHECK_RC(ANeuralNetworksMemoryDesc_finish(d), E_STATE);
    CHECK_RC(ANeuralNetworksMemory_createFromDesc(d, &mem), E_OK);
    ANeuralNetworksMemory_free(mem);
    ANeuralNetworksMemoryDesc_free(d);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* ------------------------------------------------------------------------ */
/* 3. Bad data                                                               */
/* ------------------------------------------------------------------------ */

static void add_operand_expect(ANeuralNetworksModel* m, int32_t type, uint32_t rank,
                               const uint32_t* dims, float scale, int32_t zp, int want,
                               const char* what, int line) {
    ANeuralNetworksOperandType t = {.type = type, .dimensionCount = rank, .dimensions = dims,
                                    .scale = scale, .zeroPoint = zp};
    int rc = ANeuralNetworksModel_addOperand(m, &t);
    if (rc == want) {
        ck_pass();
    } else {
        ck_fail(__FILE__, line, "addOperand(%s) -> %d (%s), expected %d (%s); last_error: %s", what,
                rc, ck_result_name(rc), want, ck_result_name(want), ck_last_error());
    }
}
#define OPERAND(m, type, rank, dims, scale, zp, want) \
    add_operand_expect(m, type, rank, dims, scale, zp, want, #type " " #rank " " #scale " " #zp, __LINE__)

static void test_data_operand_types(void) {
    ck_section("data: operand types");
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&m), E_OK);
    const uint32_t d2[1] = {2};
    const uint32_t d22[2] = {2, 2};
    /* unknown codes */
    OPERAND(m, -1, 0, NULL, 0.f, 0, E_DATA);
    OPERAND(m, 16, 0, NULL, 0.f, 0, E_DATA);
    OPERAND(m, 9999, 1, d2, 0.f, 0, E_DATA);
    OPERAND(m, 0x10001, 0, NULL, 0.f, 0, E_DATA); /* extension type, no registration */
    OPERAND(m, ANEURALNETWORKS_FLOAT32, 0, NULL, 0.f, 0, E_OK);
    /* scalars with dimensions */
    OPERAND(m, ANEURALNETWORKS_FLOAT32, 1, d2, 0.f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_INT32, 1, d2, 0.f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_BOOL, 2, d22, 0.f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_INT32, 0, d2, 0.f, 0, E_DATA); /* count 0 but non-NULL dims */
    OPERAND(m, ANEURALNETWORKS_INT32, 0, NULL, 0.f, 0, E_OK);
    /* dimensionCount > 0 with dimensions == NULL */
    OPERAND(m, F32, 1, NULL, 0.f, 0, E_DATA);
    OPERAND(m, F32, 3, NULL, 0.f, 0, E_DATA);
    OPERAND(m, F32, 2, d22, 0.f, 0, E_OK);
    OPERAND(m, F32, 0, NULL, 0.f, 0, E_OK); /* unknown rank is allowed at model level */
    /* dimension product overflowing uint32 */
    const uint32_t huge[2] = {0x8000u, 0x8000u}; /* 2^30 floats = 2^32 bytes */
    const uint32_t huge2[3] = {0xFFFFFFFFu, 0xFFFFFFFFu, 2};
    const uint32_t big[2] = {0x4000u, 0x4000u}; /* 2^28 floats = 2^30 bytes: fine */
    OPERAND(m, F32, 2, huge, 0.f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 3, huge2, 1.f, 0, E_DATA);
    OPERAND(m, F32, 2, big, 0.f, 0, E_OK);

    /* scale / zeroPoint rules per type */
    OPERAND(m, ANEURALNETWORKS_FLOAT32, 0, NULL, 1.f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_INT32, 0, NULL, 0.5f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_INT32, 0, NULL, 0.f, 3, E_DATA);
    OPERAND(m, ANEURALNETWORKS_UINT32, 0, NULL, 0.f, 1, E_DATA);
    OPERAND(m, ANEURALNETWORKS_BOOL, 0, NULL, 1.f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_FLOAT16, 0, NULL, 0.f, 1, E_DATA);
    OPERAND(m, F32, 1, d2, 1.f, 0, E_DATA);
    OPERAND(m, F32, 1, d2, 0.f, 1, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_FLOAT16, 1, d2, 0.5f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_BOOL8, 1, d2, 0.f, 1, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_INT32, 1, d2, -1.f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_INT32, 1, d2, 0.f, 1, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_INT32, 1, d2, 0.5f, 0, E_OK); /* >= 0 allowed */
    OPERAND(m, ANEURALNETWORKS_TENSOR_INT32, 1, d2, 0.f, 0, E_OK);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 1, d2, -0.5f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 1, d2, 0.f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 1, d2, 0.5f, 256, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 1, d2, 0.5f, -1, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 1, d2, 0.5f, 0, E_OK);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 1, d2, 0.5f, 255, E_OK);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM_SIGNED, 1, d2, 0.5f, 128, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM_SIGNED, 1, d2, 0.5f, -129, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM_SIGNED, 1, d2, 0.f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM_SIGNED, 1, d2, 0.5f, -128, E_OK);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM_SIGNED, 1, d2, 0.5f, 127, E_OK);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT16_ASYMM, 1, d2, 0.5f, 65536, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT16_ASYMM, 1, d2, 0.5f, -1, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT16_ASYMM, 1, d2, 0.f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT16_ASYMM, 1, d2, 0.5f, 65535, E_OK);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT16_SYMM, 1, d2, 0.f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT16_SYMM, 1, d2, 0.5f, 1, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT16_SYMM, 1, d2, 0.5f, 0, E_OK);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_SYMM, 1, d2, 0.5f, 1, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_SYMM, 1, d2, -0.5f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_SYMM, 1, d2, 0.5f, 0, E_OK);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_SYMM_PER_CHANNEL, 1, d2, 1.f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_SYMM_PER_CHANNEL, 1, d2, 0.f, 1, E_DATA);
    OPERAND(m, ANEURALNETWORKS_TENSOR_QUANT8_SYMM_PER_CHANNEL, 1, d2, 0.f, 0, E_OK);
    OPERAND(m, ANEURALNETWORKS_MODEL, 0, NULL, 1.f, 0, E_DATA);
    OPERAND(m, ANEURALNETWORKS_MODEL, 0, NULL, 0.f, 0, E_OK);
    ANeuralNetworksModel_free(m);
}

static void test_data_per_channel(void) {
    ck_section("data: per-channel quantisation parameters");
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&m), E_OK);
    const uint32_t d23[2] = {2, 3};
    CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_TENSOR_QUANT8_SYMM_PER_CHANNEL, 2, d23, 0, 0), E_OK); /* 0 */
    CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 2, d23, 0.5f, 0), E_OK);        /* 1 */
    CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_TENSOR_QUANT8_SYMM_PER_CHANNEL, 2, d23, 0, 0), E_OK); /* 2 */
    float s2[2] = {0.5f, 0.25f}, s3[3] = {0.5f, 0.25f, 0.125f};
    float szero[3] = {0.5f, 0.f, 0.125f}, sneg[3] = {0.5f, -0.25f, 0.125f};
    ANeuralNetworksSymmPerChannelQuantParams ok0 = {.channelDim = 0, .scaleCount = 2, .scales = s2};
    ANeuralNetworksSymmPerChannelQuantParams ok1 = {.channelDim = 1, .scaleCount = 3, .scales = s3};
    ANeuralNetworksSymmPerChannelQuantParams baddim = {.channelDim = 2, .scaleCount = 2, .scales = s2};
    ANeuralNetworksSymmPerChannelQuantParams badcount = {.channelDim = 0, .scaleCount = 3, .scales = s3};
    ANeuralNetworksSymmPerChannelQuantParams badcount1 = {.channelDim = 1, .scaleCount = 2, .scales = s2};
    ANeuralNetworksSymmPerChannelQuantParams zero = {.channelDim = 1, .scaleCount = 3, .scales = szero};
    ANeuralNetworksSymmPerChannelQuantParams neg = {.channelDim = 1, .scaleCount = 3, .scales = sneg};
    ANeuralNetworksSymmPerChannelQuantParams nulls = {.channelDim = 1, .scaleCount = 3, .scales = NULL};
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(m, 1, &ok0), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(m, 0, &baddim), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(m, 0, &badcount), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(m, 0, &badcount1), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(m, 0, &zero), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(m, 0, &neg), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(m, 0, &nulls), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(m, 3, &ok0), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(m, -1, &ok0), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(m, 0, &ok0), E_OK);
    CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(m, 2, &ok1), E_OK);
    ANeuralNetworksModel_free(m);
}

static void test_data_indices(void) {
    ck_section("data: indices out of range");
    nn_shm shm;
    CHECK_RC(nn_shm_create(64, &shm), E_OK);
    ANeuralNetworksModel* ref = finished_add_model();
    /* model side */
    ANeuralNetworksModel* m = partial_add_model(0); /* operands 0..3 */
    float v2[2] = {1, 2};
    float scales[2] = {1.f, 1.f};
    ANeuralNetworksSymmPerChannelQuantParams pc = {.channelDim = 0, .scaleCount = 2, .scales = scales};
    int32_t bad_idx[4] = {4, -1, 999, INT32_MIN};
    for (int i = 0; i < 4; i++) {
        int32_t k = bad_idx[i];
        CHECK_RC(ANeuralNetworksModel_setOperandValue(m, k, v2, 8), E_DATA);
        CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(m, k, shm.mem, 0, 8), E_DATA);
        CHECK_RC(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(m, k, &pc), E_DATA);
        CHECK_RC(ANeuralNetworksModel_setOperandValueFromModel(m, k, ref), E_DATA);
    }
    uint32_t in_bad[3] = {0, 99, 2}, in_bad2[3] = {0, 1, 0xFFFFFFFFu}, in_ok[3] = {0, 1, 2};
    uint32_t out_bad[1] = {4}, out_ok[1] = {3};
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in_bad, 1, out_ok), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in_bad2, 1, out_ok), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in_ok, 1, out_bad), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in_ok, 1, out_ok), E_OK);
    uint32_t mi_bad[2] = {0, 4}, mi_bad2[2] = {0xFFFFFFFFu, 1}, mi_ok[2] = {0, 1};
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi_bad, 1, out_ok), E_DATA);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi_bad2, 1, out_ok), E_DATA);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi_ok, 1, out_bad), E_DATA);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi_ok, 1, out_ok), E_OK);
    CHECK_RC(ANeuralNetworksModel_finish(m), E_OK);

    /* compilation side */
    ANeuralNetworksCompilation* c = finished_compilation(m);
    uint32_t v = 0;
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForInput(c, 2, &v), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForInput(c, 1000, &v), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForInput(c, 1, &v), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForOutput(c, 1, &v), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForOutput(c, 1000, &v), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForInput(c, 2, &v), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForInput(c, 0xFFFFFFFFu, &v), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForOutput(c, 1, &v), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForOutput(c, 0, &v), E_OK);
    ANeuralNetworksMemoryDesc* d = NULL;
    CHECK_RC(ANeuralNetworksMemoryDesc_create(&d), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 2, 1.0f), E_DATA);
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 1000, 1.0f), E_DATA);
    CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(d, c, 1, 1.0f), E_DATA);
    CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(d, c, 0xFFFFFFFFu, 1.0f), E_DATA);
    CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(d, c, 0, 1.0f), E_OK);
    ANeuralNetworksMemoryDesc_free(d);

    /* execution side */
    float a[2] = {1, 2}, b[2] = {3, 4}, o[2];
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    int32_t bad_io[4] = {2, -1, 1000, INT32_MAX};
    for (int i = 0; i < 4; i++) {
        int32_t k = bad_io[i];
        CHECK_RC(ANeuralNetworksExecution_setInput(e, k, NULL, a, 8), E_DATA);
        CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, k, NULL, shm.mem, 0, 8), E_DATA);
    }
    int32_t bad_out[3] = {1, -1, 1000};
    for (int i = 0; i < 3; i++) {
        int32_t k = bad_out[i];
        CHECK_RC(ANeuralNetworksExecution_setOutput(e, k, NULL, o, 8), E_DATA);
        CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, k, NULL, shm.mem, 0, 8), E_DATA);
    }
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    uint32_t r = 0, dims[4];
    for (int i = 0; i < 3; i++) {
        CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(e, bad_out[i], &r), E_DATA);
        CHECK_RC(ANeuralNetworksExecution_getOutputOperandDimensions(e, bad_out[i], dims), E_DATA);
    }
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &r), E_OK);
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandDimensions(e, 0, dims), E_OK);
    ANeuralNetworksExecution_free(e);

    /* getDevice(count) */
    uint32_t n = 0;
    ANeuralNetworksDevice* dev = NULL;
    CHECK_RC(ANeuralNetworks_getDeviceCount(&n), E_OK);
    CHECK_RC(ANeuralNetworks_getDevice(n, &dev), E_DATA);
    CHECK_RC(ANeuralNetworks_getDevice(n + 100, &dev), E_DATA);
    CHECK_RC(ANeuralNetworks_getDevice(0xFFFFFFFFu, &dev), E_DATA);
    CHECK_RC(ANeuralNetworks_getDevice(n - 1, &dev), E_OK);

    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
    ANeuralNetworksModel_free(ref);
    nn_shm_destroy(&shm);
}

static void test_data_lengths(void) {
    ck_section("data: value / buffer lengths");
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&m), E_OK);
    const uint32_t unknown[1] = {0};
    CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0), E_OK); /* 0 scalar */
    CHECK_RC(nn_add_operand(m, F32, 1, kDim2, 0, 0), E_OK);                 /* 1 float[2] */
    CHECK_RC(nn_add_operand(m, F32, 1, unknown, 0, 0), E_OK);               /* 2 float[?] */
    CHECK_RC(nn_add_operand(m, F32, 0, NULL, 0, 0), E_OK);                  /* 3 unknown rank */
    char buf[32] = {0};
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 0, buf, 20), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 0, buf, 3), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 0, buf, 0), E_DATA); /* non-NULL, length 0 */
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 0, buf, 4), E_OK);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 1, buf, 4), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 1, buf, 12), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 1, buf, 8), E_OK);
    /* constants must be fully specified */
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 2, buf, 8), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 3, buf, 8), E_DATA);
    ANeuralNetworksModel_free(m);

    /* execution buffers */
    ANeuralNetworksModel* fm = finished_add_model();
    ANeuralNetworksCompilation* c = finished_compilation(fm);
    float a[4] = {1, 2, 0, 0}, b[2] = {3, 4}, o[4];
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 4), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 12), E_DATA); /* padding not enabled */
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 0), E_DATA);  /* non-NULL, length 0 */
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 4), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 16), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 8), E_OK);
    /* operand type overrides: may only fill in unspecified dimensions */
    const uint32_t d3[1] = {3}, d21[2] = {2, 1};
    ANeuralNetworksOperandType t_dim = nn_type(F32, 1, d3, 0, 0);
    ANeuralNetworksOperandType t_rank = nn_type(F32, 2, d21, 0, 0);
    ANeuralNetworksOperandType t_kind = nn_type(ANEURALNETWORKS_TENSOR_INT32, 1, kDim2, 0, 0);
    ANeuralNetworksOperandType t_invalid = nn_type(F32, 1, kDim2, 0, 7);
    ANeuralNetworksOperandType t_same = nn_type(F32, 1, kDim2, 0, 0);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, &t_dim, a, 12), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, &t_rank, b, 8), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, &t_kind, b, 8), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, &t_invalid, b, 8), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, &t_same, b, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    CHECK(o[0] == 4.f && o[1] == 6.f);
    ANeuralNetworksExecution_free(e);

    /* with padding enabled a larger length is fine, a smaller one is not */
    e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_enableInputAndOutputPadding(e, true), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 4), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 16), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 4), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 16), E_OK);
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(fm);

    /* input with unspecified dimensions and no type at setInput */
    ANeuralNetworksModel* um = NULL;
    CHECK_RC(nn_build_binary_f32(ANEURALNETWORKS_ADD, 1, unknown, 0, 1, &um), E_OK);
    ANeuralNetworksCompilation* uc = finished_compilation(um);
    e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(uc, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), E_DATA);
    ANeuralNetworksOperandType t_full = nn_type(F32, 1, kDim2, 0, 0);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, &t_full, a, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, &t_full, a, 4), E_DATA); /* type says 8 bytes */
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(uc);
    ANeuralNetworksModel_free(um);
}

static void test_data_memory_ranges(void) {
    ck_section("data: memory offset / length");
    nn_shm shm;
    CHECK_RC(nn_shm_create(64, &shm), E_OK);
    ANeuralNetworksModel* m = partial_add_model(0);
    ANeuralNetworksOperandType tf = nn_type(F32, 1, kDim2, 0, 0);
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &tf), E_OK); /* 4: constant float[2] */
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(m, 4, shm.mem, 64, 8), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(m, 4, shm.mem, 60, 8), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(m, 4, shm.mem, 1000, 8), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(m, 4, shm.mem, SIZE_MAX - 3, 8), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(m, 4, shm.mem, 0, 4), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(m, 4, shm.mem, 0, 12), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(m, 4, shm.mem, 0, SIZE_MAX), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(m, 4, shm.mem, 56, 8), E_OK);
    ANeuralNetworksModel_free(m);

    ANeuralNetworksModel* fm = finished_add_model();
    ANeuralNetworksCompilation* c = finished_compilation(fm);
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, shm.mem, 60, 8), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, shm.mem, 64, 8), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, shm.mem, SIZE_MAX - 3, 8), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, shm.mem, 0, 4), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, shm.mem, 0, 12), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, shm.mem, 0, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 1, NULL, shm.mem, 8, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, shm.mem, 60, 8), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, shm.mem, 128, 8), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, shm.mem, SIZE_MAX - 3, 8), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, shm.mem, 16, 4), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, shm.mem, 16, 8), E_OK);
    float in[4] = {1, 2, 30, 40};
    memcpy(shm.p, in, 16);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    float out[2];
    memcpy(out, shm.p + 16, 8);
    CHECK(out[0] == 31.f && out[1] == 42.f);
    ANeuralNetworksExecution_free(e);

    /* Memory_createFromFd with an invalid fd */
    ANeuralNetworksMemory* mem = (ANeuralNetworksMemory*)(uintptr_t)0x1;
    int rc = ANeuralNetworksMemory_createFromFd(64, PROT_READ, -1, 0, &mem);
    CHECK_MSG(rc != E_OK, "createFromFd(fd=-1) must fail (got %d)", rc);
    CHECK_MSG(mem == NULL, "*memory must be NULL on failure (got %p)", (void*)mem);

    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(fm);
    nn_shm_destroy(&shm);
}

static void test_data_graph(void) {
    ck_section("data: model graph");
    uint32_t in[3] = {0, 1, 2}, out[1] = {3}, mi[2] = {0, 1};
    ANeuralNetworksModel* m;

    /* empty model */
    m = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&m), E_OK);
    CHECK_RC(ANeuralNetworksModel_finish(m), E_DATA);
    ANeuralNetworksModel_free(m);

    /* operands and operation but no inputs/outputs identified */
    m = partial_add_model(0);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out), E_OK);
    CHECK_RC(ANeuralNetworksModel_finish(m), E_DATA);
    ANeuralNetworksModel_free(m);

    /* no outputs */
    m = partial_add_model(0);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out), E_OK);
    CHECK_GRAPH_BAD(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 0, out), m);
    ANeuralNetworksModel_free(m);

    /* cycle: x = ADD(in, y); y = ADD(x, in); output y */
    m = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&m), E_OK);
    for (int i = 0; i < 3; i++) CHECK_RC(nn_add_operand(m, F32, 1, kDim2, 0, 0), E_OK); /* 0 in,1 x,2 y */
    CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0), E_OK);           /* 3 fuse */
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 3, &kFuseNone, 4), E_OK);
    {
        uint32_t i1[3] = {0, 2, 3}, o1[1] = {1}, i2[3] = {1, 0, 3}, o2[1] = {2}, ci[1] = {0};
        CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, i1, 1, o1), E_OK);
        CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, i2, 1, o2), E_OK);
        CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, ci, 1, o2), E_OK);
        CHECK_RC(ANeuralNetworksModel_finish(m), E_DATA);
        /* the failed model is invalid now */
        CHECK_RC(ANeuralNetworksModel_finish(m), E_STATE);
    }
    ANeuralNetworksModel_free(m);

    /* operand read but never written (operand 1 is neither input, constant nor output) */
    m = partial_add_model(0);
    {
        uint32_t only0[1] = {0};
        CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out), E_OK);
        CHECK_GRAPH_BAD(ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, only0, 1, out), m);
    }
    ANeuralNetworksModel_free(m);

    /* operand written twice */
    m = partial_add_model(0);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out), E_OK);
    {
        int rc = ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out);
        if (rc == E_OK) rc = ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 1, out);
        CHECK_GRAPH_BAD(rc, m);
    }
    ANeuralNetworksModel_free(m);

    /* model input also written by an operation */
    m = partial_add_model(0);
    {
        uint32_t o0[1] = {0};
        int rc = ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out);
        if (rc == E_OK) rc = ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, o0);
        if (rc == E_OK) rc = ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 1, out);
        CHECK_GRAPH_BAD(rc, m);
    }
    ANeuralNetworksModel_free(m);

    /* model inputs / outputs that identifyInputsAndOutputs rejects on an ADD model */
    static const struct {
        const char* what;
        uint32_t n_in, ins[3], n_out, outs[2];
    } bad_io[] = {
        {"input listed as output", 2, {0, 1}, 2, {3, 0}},
        {"duplicate inputs", 3, {0, 1, 0}, 1, {3}},
        {"duplicate outputs", 2, {0, 1}, 2, {3, 3}},
        {"constant as model input", 3, {0, 1, 2}, 1, {3}},
        {"constant as model output", 2, {0, 1}, 2, {3, 2}},
    };
    for (size_t k = 0; k < NN_ARRAY_LEN(bad_io); k++) {
        ck_section(bad_io[k].what); /* names the row in a failure */
        m = partial_add_model(0);
        CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out), E_OK);
        CHECK_GRAPH_BAD(ANeuralNetworksModel_identifyInputsAndOutputs(m, bad_io[k].n_in, bad_io[k].ins,
                                                                      bad_io[k].n_out, bad_io[k].outs), m);
        ANeuralNetworksModel_free(m);
    }
    ck_section("data: model graph");

    /* positive control */
    m = partial_add_model(1);
    CHECK_RC(ANeuralNetworksModel_finish(m), E_OK);
    ANeuralNetworksModel_free(m);
}

/* builds operands for an operation-signature test; returns model */
static ANeuralNetworksModel* op_model(void) {
    ANeuralNetworksModel* m = NULL;
    if (ANeuralNetworksModel_create(&m)) return NULL;
    const uint32_t d23[2] = {2, 3}, d32[2] = {3, 2}, d3[1] = {3}, d6[1] = {6}, d2[1] = {2};
    const uint32_t d5[5] = {1, 1, 1, 2, 3}, d1[1] = {1};
    int rc = 0;
    NN_TRY(rc, nn_add_operand(m, F32, 2, d23, 0, 0));                                   /* 0 */
    NN_TRY(rc, nn_add_operand(m, F32, 2, d23, 0, 0));                                   /* 1 */
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0));                /* 2 fuse */
    NN_TRY(rc, nn_add_operand(m, F32, 2, d23, 0, 0));                                   /* 3 out */
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 2, d23, 0.5f, 0)); /* 4 */
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_FLOAT32, 0, NULL, 0, 0));              /* 5 */
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0));                /* 6 */
    NN_TRY(rc, nn_add_operand(m, F32, 2, d32, 0, 0));                                   /* 7 [3,2] */
    NN_TRY(rc, nn_add_operand(m, F32, 1, d3, 0, 0));                                    /* 8 bias [3] */
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_TENSOR_INT32, 1, d2, 0, 0));           /* 9 shape */
    NN_TRY(rc, nn_add_operand(m, F32, 1, d6, 0, 0));                                    /* 10 */
    NN_TRY(rc, nn_add_operand(m, F32, 5, d5, 0, 0));                                    /* 11 rank 5 */
    NN_TRY(rc, nn_add_operand(m, F32, 5, d5, 0, 0));                                    /* 12 rank 5 */
    NN_TRY(rc, nn_add_operand(m, F32, 2, d23, 0, 0));                                   /* 13 out2 */
    NN_TRY(rc, nn_add_operand(m, F32, 1, d3, 0, 0));                                    /* 14 */
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_TENSOR_INT32, 1, d1, 0, 0));           /* 15 shape [1] */
    NN_TRY(rc, nn_add_operand(m, F32, 5, d5, 0, 0));                                    /* 16 rank 5 */
    if (rc) printf("setup: op_model failed with %d\n", rc);
    return m;
}

static void test_data_operations(void) {
    ck_section("data: operation codes and signatures");
    ANeuralNetworksModel* m = op_model();
    const uint32_t ok_in[3] = {0, 1, 2}, ok_out[1] = {3};
    /* invalid operation codes */
    CHECK_RC(ANeuralNetworksModel_addOperation(m, -1, 3, ok_in, 1, ok_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, 106, 3, ok_in, 1, ok_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, 9999, 3, ok_in, 1, ok_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, 0x7fffffff, 3, ok_in, 1, ok_out), E_DATA);
    /* ADD: wrong input / output counts */
    const uint32_t in2[2] = {0, 1}, in4[4] = {0, 1, 2, 2}, out2[2] = {3, 13};
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 2, in2, 1, ok_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 4, in4, 1, ok_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 0, ok_in, 1, ok_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, ok_in, 0, ok_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, ok_in, 2, out2), E_DATA);
    /* ADD: wrong operand types */
    const uint32_t t_mixed[3] = {0, 4, 2};      /* float + quant8 */
    const uint32_t t_scalar_in[3] = {0, 5, 2};  /* float + FLOAT32 scalar */
    const uint32_t t_act_float[3] = {0, 1, 5};  /* activation as FLOAT32 */
    const uint32_t t_act_tensor[3] = {0, 1, 1}; /* activation as tensor */
    const uint32_t t_out_q[1] = {4};            /* quant8 output for float inputs */
    const uint32_t t_out_scalar[1] = {5};
    const uint32_t t_rank5[3] = {11, 12, 2}, t_rank5_out[1] = {16};
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, t_mixed, 1, ok_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, t_scalar_in, 1, ok_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, t_act_float, 1, ok_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, t_act_tensor, 1, ok_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, ok_in, 1, t_out_q), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, ok_in, 1, t_out_scalar), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, t_rank5, 1, t_rank5_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, ok_in, 1, ok_out), E_OK);
    /* MUL */
    const uint32_t mul_out[1] = {13};
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_MUL, 2, in2, 1, mul_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_MUL, 3, t_mixed, 1, mul_out), E_DATA);
    ANeuralNetworksModel_free(m);

    /* RELU */
    m = op_model();
    const uint32_t relu_in[1] = {0}, relu_in2[2] = {0, 1}, relu_in_scalar[1] = {5};
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_RELU, 2, relu_in2, 1, ok_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_RELU, 1, relu_in_scalar, 1, ok_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_RELU, 1, relu_in, 1, t_out_q), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_RELU, 1, relu_in, 1, ok_out), E_OK);
    /* SOFTMAX: beta must be FLOAT32 for a float32 input */
    const uint32_t sm_bad[2] = {1, 6}, sm_ok[2] = {1, 5}, sm_out[1] = {13};
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_SOFTMAX, 2, sm_bad, 1, sm_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_SOFTMAX, 1, sm_ok, 1, sm_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_SOFTMAX, 2, sm_ok, 1, sm_out), E_OK);
    ANeuralNetworksModel_free(m);

    /* FULLY_CONNECTED: input [2,3] weights must be [units, 3]; here bias [3] + weights [3,2]
     * (input size 2 != 3) is a shape error that may be caught later, so only types/counts here */
    m = op_model();
    const uint32_t fc_in3[3] = {0, 7, 8}, fc_bias_int[4] = {0, 7, 9, 2}, fc_act_f[4] = {0, 7, 8, 5};
    const uint32_t fc_out[1] = {3};
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_FULLY_CONNECTED, 3, fc_in3, 1, fc_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_FULLY_CONNECTED, 4, fc_bias_int, 1, fc_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_FULLY_CONNECTED, 4, fc_act_f, 1, fc_out), E_DATA);
    /* RESHAPE: shape must be TENSOR_INT32 */
    const uint32_t rs_bad[2] = {0, 14}, rs_ok[2] = {0, 15}, rs_out[1] = {10}, rs_one[1] = {0};
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_RESHAPE, 2, rs_bad, 1, rs_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_RESHAPE, 1, rs_one, 1, rs_out), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_RESHAPE, 2, rs_ok, 1, rs_out), E_OK);
    ANeuralNetworksModel_free(m);

    /* positive control for FULLY_CONNECTED: input [2,3], weights [4,3], bias [4] -> [2,4] */
    m = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&m), E_OK);
    {
        const uint32_t di[2] = {2, 3}, dw[2] = {4, 3}, db[1] = {4}, dout[2] = {2, 4};
        CHECK_RC(nn_add_operand(m, F32, 2, di, 0, 0), E_OK);
        CHECK_RC(nn_add_operand(m, F32, 2, dw, 0, 0), E_OK);
        CHECK_RC(nn_add_operand(m, F32, 1, db, 0, 0), E_OK);
        CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0), E_OK);
        CHECK_RC(nn_add_operand(m, F32, 2, dout, 0, 0), E_OK);
        const uint32_t fi[4] = {0, 1, 2, 3}, fo[1] = {4};
        CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_FULLY_CONNECTED, 4, fi, 1, fo), E_OK);
    }
    ANeuralNetworksModel_free(m);
}

static void test_data_compilation(void) {
    ck_section("data: compilation settings and devices");
    ANeuralNetworksModel* m = finished_add_model();
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(ANeuralNetworksCompilation_create(m, &c), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setPreference(c, 40), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_setPreference(c, -1), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_setPreference(c, 3), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_setPreference(c, ANEURALNETWORKS_PREFER_LOW_POWER), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setPreference(c, ANEURALNETWORKS_PREFER_FAST_SINGLE_ANSWER), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setPreference(c, ANEURALNETWORKS_PREFER_SUSTAINED_SPEED), E_OK);
    const int bad_prio[] = {0, 89, 91, 99, 101, 109, 111, -1, 1, 2};
    for (size_t i = 0; i < NN_ARRAY_LEN(bad_prio); i++) {
        int rc = ANeuralNetworksCompilation_setPriority(c, bad_prio[i]);
        CHECK_MSG(rc == E_DATA, "setPriority(%d) -> %d (%s), expected BAD_DATA; last_error: %s",
                  bad_prio[i], rc, ck_result_name(rc), ck_last_error());
    }
    CHECK_RC(ANeuralNetworksCompilation_setPriority(c, ANEURALNETWORKS_PRIORITY_LOW), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setPriority(c, ANEURALNETWORKS_PRIORITY_MEDIUM), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setPriority(c, ANEURALNETWORKS_PRIORITY_HIGH), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setPriority(c, ANEURALNETWORKS_PRIORITY_DEFAULT), E_OK);
    /* timeouts need a single-device createForDevices compilation */
    CHECK_RC(ANeuralNetworksCompilation_setTimeout(c, 1000000000ull), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_finish(c), E_OK);

    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setTimeout(e, 1000000000ull), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setMeasureTiming(e, true), E_DATA);
    float a[2] = {1, 2}, b[2] = {3, 4}, o[2];
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 8), E_OK);
    ANeuralNetworksEvent* ev = NULL;
    CHECK_RC(ANeuralNetworksExecution_startComputeWithDependencies(e, NULL, 0, 1000000000ull, &ev), E_DATA);
    CHECK(ev == NULL);
    ev = NULL;
    CHECK_RC(ANeuralNetworksExecution_startComputeWithDependencies(e, NULL, 0, 0, &ev), E_OK);
    CHECK_RC(ANeuralNetworksEvent_wait(ev), E_OK);
    CHECK(o[0] == 4.f && o[1] == 6.f);
    ANeuralNetworksEvent_free(ev);
    ANeuralNetworksExecution_free(e);

    /* createForDevices: 0 devices, duplicates */
    const ANeuralNetworksDevice* one[1] = {g_dev};
    const ANeuralNetworksDevice* dup[2] = {g_dev, g_dev};
    ANeuralNetworksCompilation* cd = NULL;
    CHECK_RC(ANeuralNetworksCompilation_createForDevices(m, one, 0, &cd), E_DATA);
    ANeuralNetworksCompilation_free(cd);
    cd = NULL;
    CHECK_RC(ANeuralNetworksCompilation_createForDevices(m, dup, 2, &cd), E_DATA);
    ANeuralNetworksCompilation_free(cd);
    cd = NULL;
    bool sup[1];
    CHECK_RC(ANeuralNetworksModel_getSupportedOperationsForDevices(m, one, 0, sup), E_DATA);
    CHECK_RC(ANeuralNetworksModel_getSupportedOperationsForDevices(m, dup, 2, sup), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_createForDevices(m, one, 1, &cd), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setTimeout(cd, 1000000000ull), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_finish(cd), E_OK);
    ANeuralNetworksExecution* ed = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(cd, &ed), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setTimeout(ed, 1000000000ull), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setMeasureTiming(ed, true), E_OK);
    ANeuralNetworksExecution_free(ed);
    ANeuralNetworksCompilation_free(cd);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

static void test_data_events(void) {
    ck_section("data: events");
    ANeuralNetworksEvent* ev = (ANeuralNetworksEvent*)(uintptr_t)0x1;
    CHECK_RC(ANeuralNetworksEvent_createFromSyncFenceFd(-1, &ev), E_DATA);
    CHECK_MSG(ev == NULL, "*event must be NULL on failure (got %p)", (void*)ev);
    ev = NULL;
    CHECK_RC(ANeuralNetworksEvent_createFromSyncFenceFd(-5, &ev), E_DATA);

    /* an event from startCompute is not backed by a sync fence */
    ANeuralNetworksModel* m = finished_add_model();
    ANeuralNetworksCompilation* c = finished_compilation(m);
    float a[2] = {1, 2}, b[2] = {3, 4}, o[2];
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(nn_prepare2(c, a, b, o, 2, &e), E_OK);
    ev = NULL;
    CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_OK);
    CHECK_RC(ANeuralNetworksEvent_wait(ev), E_OK);
    int fd = 12345;
    CHECK_RC(ANeuralNetworksEvent_getSyncFenceFd(ev, &fd), E_DATA);
    CHECK_MSG(fd == -1, "sync_fence_fd must be set to -1 (got %d)", fd);
    ANeuralNetworksEvent_free(ev);
    ANeuralNetworksExecution_free(e);

    /* positive control: a fence-backed event */
    int efd = eventfd(1, EFD_CLOEXEC); /* already signalled */
    ev = NULL;
    CHECK_RC(ANeuralNetworksEvent_createFromSyncFenceFd(efd, &ev), E_OK);
    fd = -1;
    CHECK_RC(ANeuralNetworksEvent_getSyncFenceFd(ev, &fd), E_OK);
    CHECK(fd >= 0 && fd != efd);
    if (fd >= 0) close(fd);
    CHECK_RC(ANeuralNetworksEvent_wait(ev), E_OK);
    ANeuralNetworksEvent_free(ev);
    close(efd);

    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* quant8 ADD [2] model, finished */
static ANeuralNetworksModel* quant_add_model(void) {
    ANeuralNetworksModel* m = NULL;
    if (ANeuralNetworksModel_create(&m)) return NULL;
    int rc = 0;
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 1, kDim2, 0.5f, 0));
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 1, kDim2, 0.5f, 0));
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0));
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 1, kDim2, 1.0f, 0));
    NN_TRY(rc, ANeuralNetworksModel_setOperandValue(m, 2, &kFuseNone, 4));
    uint32_t in[3] = {0, 1, 2}, out[1] = {3}, mi[2] = {0, 1};
    NN_TRY(rc, ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out));
    NN_TRY(rc, ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 1, out));
    NN_TRY(rc, ANeuralNetworksModel_finish(m));
    if (rc) printf("setup: quant_add_model failed with %d\n", rc);
    return m;
}

static void test_data_memory_desc(void) {
    ck_section("data: memory descriptors and device memory");
    ANeuralNetworksModel* m = finished_add_model();
    ANeuralNetworksCompilation* c = finished_compilation(m);
    ANeuralNetworksModel* m3 = NULL;
    CHECK_RC(nn_build_add_vec(3, &m3), E_OK);
    ANeuralNetworksCompilation* c3 = finished_compilation(m3);
    ANeuralNetworksModel* mq = quant_add_model();
    ANeuralNetworksCompilation* cq = finished_compilation(mq);

    ANeuralNetworksMemoryDesc* d = NULL;
    CHECK_RC(ANeuralNetworksMemoryDesc_create(&d), E_OK);
    const float bad_freq[] = {0.0f, -0.5f, 1.5f, NAN, INFINITY};
    for (size_t i = 0; i < NN_ARRAY_LEN(bad_freq); i++) {
        int rc = ANeuralNetworksMemoryDesc_addInputRole(d, c, 0, bad_freq[i]);
        CHECK_MSG(rc == E_DATA, "addInputRole(frequency=%g) -> %d (%s), expected BAD_DATA; last_error: %s",
                  (double)bad_freq[i], rc, ck_result_name(rc), ck_last_error());
        rc = ANeuralNetworksMemoryDesc_addOutputRole(d, c, 0, bad_freq[i]);
        CHECK_MSG(rc == E_DATA, "addOutputRole(frequency=%g) -> %d (%s), expected BAD_DATA; last_error: %s",
                  (double)bad_freq[i], rc, ck_result_name(rc), ck_last_error());
    }
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 0, 0.5f), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 0, 0.5f), E_DATA); /* same role twice */
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 1, 1.0f), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(d, c, 0, 1.0f), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(d, c, 0, 1.0f), E_DATA);
    /* incompatible operand metadata between roles */
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, cq, 0, 1.0f), E_DATA); /* type */
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c3, 0, 1.0f), E_DATA); /* dims */
    CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(d, c3, 0, 1.0f), E_DATA);
    /* incompatible setDimensions */
    const uint32_t d21[2] = {2, 1};
    CHECK_RC(ANeuralNetworksMemoryDesc_setDimensions(d, 2, d21), E_DATA);
    CHECK_RC(ANeuralNetworksMemoryDesc_setDimensions(d, 1, kDim3), E_DATA);
    CHECK_RC(ANeuralNetworksMemoryDesc_setDimensions(d, 1, kDim2), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_finish(d), E_OK);
    ANeuralNetworksMemory* dm = NULL;
    CHECK_RC(ANeuralNetworksMemory_createFromDesc(d, &dm), E_OK);
    ANeuralNetworksMemoryDesc_free(d);

    /* a descriptor with no role */
    ANeuralNetworksMemoryDesc* d0 = NULL;
    CHECK_RC(ANeuralNetworksMemoryDesc_create(&d0), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_finish(d0), E_DATA);
    ANeuralNetworksMemoryDesc_free(d0);

    /* device memory with only an output role */
    ANeuralNetworksMemoryDesc* dout = NULL;
    ANeuralNetworksMemory* om = NULL;
    CHECK_RC(ANeuralNetworksMemoryDesc_create(&dout), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(dout, c, 0, 1.0f), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_finish(dout), E_OK);
    CHECK_RC(ANeuralNetworksMemory_createFromDesc(dout, &om), E_OK);
    ANeuralNetworksMemoryDesc_free(dout);

    float a[2] = {1, 2}, b[2] = {3, 4}, o[2];
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    /* device memory: offset and length must both be 0 */
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, om, 0, 8), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, om, 8, 0), E_DATA);
    /* used in a role it was not created for */
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, om, 0, 0), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, 8), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, om, 0, 0), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    ANeuralNetworksExecution_free(e);
    /* with an execution of another compilation (same model, different compilation object) */
    ANeuralNetworksCompilation* c2 = finished_compilation(m);
    e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c2, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, om, 0, 0), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 8), E_OK);
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c2);

    /* device memory cannot be a model constant */
    ANeuralNetworksModel* u = partial_add_model(0);
    ANeuralNetworksOperandType tf = nn_type(F32, 1, kDim2, 0, 0);
    CHECK_RC(ANeuralNetworksModel_addOperand(u, &tf), E_OK);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(u, 4, dm, 0, 8), E_DATA);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(u, 4, dm, 0, 0), E_DATA);
    ANeuralNetworksModel_free(u);

    /* Memory_copy */
    nn_shm s8, s16;
    CHECK_RC(nn_shm_create(8, &s8), E_OK);
    CHECK_RC(nn_shm_create(16, &s16), E_OK);
    CHECK_RC(ANeuralNetworksMemory_copy(s8.mem, s16.mem), E_DATA); /* size mismatch */
    CHECK_RC(ANeuralNetworksMemory_copy(s16.mem, s8.mem), E_DATA);
    CHECK_RC(ANeuralNetworksMemory_copy(dm, s8.mem), E_DATA);   /* uninitialised source */
    CHECK_RC(ANeuralNetworksMemory_copy(s16.mem, dm), E_DATA);  /* 16 bytes into float[2] */
    memcpy(s8.p, a, 8);
    CHECK_RC(ANeuralNetworksMemory_copy(s8.mem, dm), E_OK);     /* initialises dm */
    memset(s8.p, 0, 8);
    CHECK_RC(ANeuralNetworksMemory_copy(dm, s8.mem), E_OK);
    CHECK(memcmp(s8.p, a, 8) == 0);
    CHECK_RC(ANeuralNetworksMemory_copy(dm, s16.mem), E_DATA);
    CHECK_RC(ANeuralNetworksMemory_copy(dm, dm), E_OK);

    /* uninitialised device memory used as an execution input: rejected at
     * setInputFromMemory (BAD_DATA) or at compute (OP_FAILED) */
    ANeuralNetworksMemoryDesc* din = NULL;
    ANeuralNetworksMemory* im = NULL;
    CHECK_RC(ANeuralNetworksMemoryDesc_create(&din), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(din, c, 0, 1.0f), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_finish(din), E_OK);
    CHECK_RC(ANeuralNetworksMemory_createFromDesc(din, &im), E_OK);
    ANeuralNetworksMemoryDesc_free(din);
    e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    {
        int rc = ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, im, 0, 0);
        if (rc == E_OK) {
            CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, 8), E_OK);
            CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 8), E_OK);
            CHECK_RC(ANeuralNetworksExecution_compute(e), E_FAIL);
        } else {
            CHECK_RC(rc, E_DATA);
        }
    }
    ANeuralNetworksExecution_free(e);

    ANeuralNetworksMemory_free(im);
    nn_shm_destroy(&s8);
    nn_shm_destroy(&s16);
    ANeuralNetworksMemory_free(om);
    ANeuralNetworksMemory_free(dm);
    ANeuralNetworksCompilation_free(cq);
    ANeuralNetworksModel_free(mq);
    ANeuralNetworksCompilation_free(c3);
    ANeuralNetworksModel_free(m3);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

static void test_data_burst(void) {
    ck_section("data: burst from another compilation");
    ANeuralNetworksModel* m = finished_add_model();
    ANeuralNetworksCompilation* c1 = finished_compilation(m);
    ANeuralNetworksCompilation* c2 = finished_compilation(m);
    ANeuralNetworksBurst* b1 = NULL;
    CHECK_RC(ANeuralNetworksBurst_create(c1, &b1), E_OK);
    float a[2] = {1, 2}, b[2] = {3, 4}, o[2] = {0, 0};
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(nn_prepare2(c2, a, b, o, 2, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_burstCompute(e, b1), E_DATA);
    ANeuralNetworksExecution_free(e);
    e = NULL;
    CHECK_RC(nn_prepare2(c1, a, b, o, 2, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_burstCompute(e, b1), E_OK);
    CHECK(o[0] == 4.f && o[1] == 6.f);
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksBurst_free(b1);
    ANeuralNetworksCompilation_free(c1);
    ANeuralNetworksCompilation_free(c2);
    ANeuralNetworksModel_free(m);
}

/* ------------------------------------------------------------------------ */
/* 4. Handle abuse: freed / wrong-kind / garbage handles -> BAD_DATA          */
/* ------------------------------------------------------------------------ */

static void test_handle_abuse(void) {
    ck_section("handles: freed, wrong kind, garbage");
    float a[2] = {1, 2}, b[2] = {3, 4}, o[2];
    ANeuralNetworksOperandType tf = nn_type(F32, 1, kDim2, 0, 0);
    void* garbage = (void*)(uintptr_t)0x1234;
    static char fake_ahwb[256];

    /* garbage pointers, one per handle kind */
    CHECK_RC(ANeuralNetworksModel_addOperand((ANeuralNetworksModel*)garbage, &tf), E_DATA);
    CHECK_RC(ANeuralNetworksModel_finish((ANeuralNetworksModel*)garbage), E_DATA);
    ANeuralNetworksCompilation* gc = NULL;
    CHECK_RC(ANeuralNetworksCompilation_create((ANeuralNetworksModel*)garbage, &gc), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_finish((ANeuralNetworksCompilation*)garbage), E_DATA);
    ANeuralNetworksExecution* ge = NULL;
    CHECK_RC(ANeuralNetworksExecution_create((ANeuralNetworksCompilation*)garbage, &ge), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_compute((ANeuralNetworksExecution*)garbage), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInput((ANeuralNetworksExecution*)garbage, 0, NULL, a, 8), E_DATA);
    CHECK_RC(ANeuralNetworksEvent_wait((ANeuralNetworksEvent*)garbage), E_DATA);
    CHECK_RC(ANeuralNetworksMemoryDesc_finish((ANeuralNetworksMemoryDesc*)garbage), E_DATA);
    CHECK_RC(ANeuralNetworksMemory_copy((ANeuralNetworksMemory*)garbage, (ANeuralNetworksMemory*)garbage), E_DATA);
    const char* name = NULL;
    CHECK_RC(ANeuralNetworksDevice_getName((ANeuralNetworksDevice*)garbage, &name), E_DATA);
    /* a fake AHardwareBuffer */
    ANeuralNetworksMemory* am = (ANeuralNetworksMemory*)(uintptr_t)0x1;
    CHECK_RC(ANeuralNetworksMemory_createFromAHardwareBuffer((const AHardwareBuffer*)fake_ahwb, &am), E_DATA);
    CHECK_MSG(am == NULL, "*memory must be NULL on failure (got %p)", (void*)am);
    am = NULL;
    CHECK_RC(ANeuralNetworksMemory_createFromAHardwareBuffer((const AHardwareBuffer*)garbage, &am), E_DATA);

    /* real objects, used with arguments of the wrong kind */
    ANeuralNetworksModel* m = finished_add_model();
    ANeuralNetworksCompilation* c = finished_compilation(m);
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(nn_prepare2(c, a, b, o, 2, &e), E_OK);
    nn_shm shm;
    CHECK_RC(nn_shm_create(64, &shm), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute((ANeuralNetworksExecution*)m), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_compute((ANeuralNetworksExecution*)c), E_DATA);
    CHECK_RC(ANeuralNetworksModel_finish((ANeuralNetworksModel*)e), E_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperand((ANeuralNetworksModel*)c, &tf), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_finish((ANeuralNetworksCompilation*)m), E_DATA);
    CHECK_RC(ANeuralNetworksEvent_wait((ANeuralNetworksEvent*)c), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_burstCompute(e, (ANeuralNetworksBurst*)c), E_DATA);
    {
        ANeuralNetworksExecution* fresh = NULL;
        CHECK_RC(ANeuralNetworksExecution_create(c, &fresh), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(fresh, 0, NULL, (ANeuralNetworksMemory*)m, 0, 8), E_DATA);
        CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(fresh, 0, NULL, shm.mem, 0, 8), E_OK);
        ANeuralNetworksExecution_free(fresh);
    }
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole((ANeuralNetworksMemoryDesc*)shm.mem, c, 0, 1.f), E_DATA);
    CHECK_RC(ANeuralNetworksDevice_getName((ANeuralNetworksDevice*)m, &name), E_DATA);
    ge = NULL;
    CHECK_RC(ANeuralNetworksExecution_create((ANeuralNetworksCompilation*)m, &ge), E_DATA);
    /* the real objects still work afterwards */
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    CHECK(o[0] == 4.f && o[1] == 6.f);

    /* freed handles: use after free -> BAD_DATA, then a second free is harmless.
     * Each object is checked right after its free, before anything else is allocated. */
    ANeuralNetworksExecution_free(e);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), E_DATA);
    ANeuralNetworksExecution_free(e);

    ANeuralNetworksCompilation* c2 = finished_compilation(m);
    ANeuralNetworksCompilation_free(c2);
    ge = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c2, &ge), E_DATA);
    CHECK_RC(ANeuralNetworksCompilation_finish(c2), E_DATA);
    ANeuralNetworksCompilation_free(c2);

    ANeuralNetworksModel* m2 = partial_add_model(1);
    ANeuralNetworksModel_free(m2);
    CHECK_RC(ANeuralNetworksModel_addOperand(m2, &tf), E_DATA);
    CHECK_RC(ANeuralNetworksModel_finish(m2), E_DATA);
    gc = NULL;
    CHECK_RC(ANeuralNetworksCompilation_create(m2, &gc), E_DATA);
    ANeuralNetworksModel_free(m2);

    nn_shm s2;
    CHECK_RC(nn_shm_create(64, &s2), E_OK);
    ANeuralNetworksExecution* e2 = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e2), E_OK);
    ANeuralNetworksMemory* fm = s2.mem;
    ANeuralNetworksMemory_free(fm);
    s2.mem = NULL;
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e2, 0, NULL, fm, 0, 8), E_DATA);
    CHECK_RC(ANeuralNetworksMemory_copy(fm, shm.mem), E_DATA);
    ANeuralNetworksMemory_free(fm);

    ANeuralNetworksBurst* fb = NULL;
    CHECK_RC(ANeuralNetworksBurst_create(c, &fb), E_OK);
    ANeuralNetworksBurst_free(fb);
    CHECK_RC(ANeuralNetworksExecution_burstCompute(e2, fb), E_DATA);
    ANeuralNetworksBurst_free(fb);
    ANeuralNetworksExecution_free(e2);

    ANeuralNetworksMemoryDesc* fd = NULL;
    CHECK_RC(ANeuralNetworksMemoryDesc_create(&fd), E_OK);
    ANeuralNetworksMemoryDesc_free(fd);
    CHECK_RC(ANeuralNetworksMemoryDesc_finish(fd), E_DATA);
    ANeuralNetworksMemoryDesc_free(fd);

    e = NULL;
    CHECK_RC(nn_prepare2(c, a, b, o, 2, &e), E_OK);
    ANeuralNetworksEvent* ev = NULL;
    CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_OK);
    CHECK_RC(ANeuralNetworksEvent_wait(ev), E_OK);
    ANeuralNetworksEvent_free(ev);
    CHECK_RC(ANeuralNetworksEvent_wait(ev), E_DATA);
    ANeuralNetworksEvent_free(ev);
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksExecution_free(e);
    CHECK(1); /* reached: no double free crashed */

    /* free of unfinished objects and of unscheduled executions */
    ANeuralNetworksModel* um = partial_add_model(1);
    ANeuralNetworksModel_free(um);
    ANeuralNetworksCompilation* uc = NULL;
    CHECK_RC(ANeuralNetworksCompilation_create(m, &uc), E_OK);
    ANeuralNetworksCompilation_free(uc);
    ANeuralNetworksExecution* ue = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &ue), E_OK);
    ANeuralNetworksExecution_free(ue);
    ANeuralNetworksMemoryDesc* ud = NULL;
    CHECK_RC(ANeuralNetworksMemoryDesc_create(&ud), E_OK);
    ANeuralNetworksMemoryDesc_free(ud);

    /* the library is still fully functional */
    float o2[2] = {0, 0};
    CHECK_RC(nn_run2(c, a, b, o2, 2), E_OK);
    CHECK(o2[0] == 4.f && o2[1] == 6.f);

    nn_shm_destroy(&s2);
    nn_shm_destroy(&shm);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* ------------------------------------------------------------------------ */
/* 5. setOperandValue: <= 128 bytes copied immediately, > 128 referenced       */
/* ------------------------------------------------------------------------ */

/* out = in + constant, with a constant of n floats given by setOperandValue; the constant
 * buffer is overwritten with 100.0 after setOperandValue and before finish. Returns the
 * value of out[0] for in = 0 (or NAN on failure). */
static float run_overwritten_constant(uint32_t n, float* constant) {
    for (uint32_t i = 0; i < n; i++) constant[i] = 1.0f;
    ANeuralNetworksModel* m = NULL;
    if (!CHECK_RC(ANeuralNetworksModel_create(&m), E_OK)) return NAN;
    const uint32_t d[1] = {n};
    int rc = 0;
    NN_TRY(rc, nn_add_operand(m, F32, 1, d, 0, 0));
    NN_TRY(rc, nn_add_operand(m, F32, 1, d, 0, 0));
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0));
    NN_TRY(rc, nn_add_operand(m, F32, 1, d, 0, 0));
    NN_TRY(rc, ANeuralNetworksModel_setOperandValue(m, 1, constant, n * sizeof(float)));
    NN_TRY(rc, ANeuralNetworksModel_setOperandValue(m, 2, &kFuseNone, 4));
    for (uint32_t i = 0; i < n; i++) constant[i] = 100.0f; /* before finish */
    uint32_t in[3] = {0, 1, 2}, out[1] = {3}, mi[1] = {0};
    NN_TRY(rc, ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out));
    NN_TRY(rc, ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, mi, 1, out));
    NN_TRY(rc, ANeuralNetworksModel_finish(m));
    CHECK_RC(rc, E_OK);
    float result = NAN;
    ANeuralNetworksCompilation* c = NULL;
    if (rc == 0 && CHECK_RC(nn_compile(m, &c), E_OK)) {
        float x[64] = {0}, y[64] = {0};
        ANeuralNetworksExecution* e = NULL;
        CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, x, n * sizeof(float)), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, y, n * sizeof(float)), E_OK);
        if (CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK)) result = y[n - 1];
        ANeuralNetworksExecution_free(e);
    }
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
    return result;
}

static void test_immediate_copy(void) {
    ck_section("setOperandValue 128-byte rule");
    static float small[32], large[33];
    float r_small = run_overwritten_constant(32, small); /* exactly 128 bytes: copied */
    CHECK_MSG(r_small == 1.0f, "<=128-byte constant must be copied at setOperandValue: got %g, want 1",
              (double)r_small);
    float r_large = run_overwritten_constant(33, large); /* 132 bytes: referenced */
    CHECK_MSG(r_large == 100.0f,
              ">128-byte constant is referenced until finish: got %g, want 100 (value at finish)",
              (double)r_large);
}

int main(void) {
    check_init(50);
    uint32_t n = 0;
    if (!CHECK_RC(ANeuralNetworks_getDeviceCount(&n), E_OK) || n == 0 ||
        !CHECK_RC(ANeuralNetworks_getDevice(0, &g_dev), E_OK)) {
        printf("no device: cannot continue\n");
        return check_summary() | 1;
    }
    test_null_model();
    test_null_compilation();
    test_null_execution();
    test_null_memory_device_event();
    test_free_null();
    test_state_model();
    test_state_compilation();
    test_state_execution();
    test_state_memory_desc();
    test_data_operand_types();
    test_data_per_channel();
    test_data_indices();
    test_data_lengths();
    test_data_memory_ranges();
    test_data_graph();
    test_data_operations();
    test_data_compilation();
    test_data_events();
    test_data_memory_desc();
    test_data_burst();
    test_handle_abuse();
    test_immediate_copy();
    return check_summary();
}
