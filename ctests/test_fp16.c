/*
 * test_fp16.c -- accelerator numerics as a C client sees them, through functions of feature
 * levels <= 3 only (it runs against build/lib/feature-level-3 as well as the default library).
 * Run with NNAPI_PY_DEVICES="gpu=float-fast:fp16" (tests/test_ctests.py sets it):
 *   ADD(2048, 1) of a relaxed model on the gpu gives 2048 (float16), without
 *   relaxComputationFloat32toFloat16 2049; createForDevices(gpu) likewise.
 * With "cpu" (NNAPI_PY_DEVICES unset: the default CPU device) both give 2049.
 *
 *   test_fp16 gpu|cpu
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include <android/NeuralNetworks.h>

#include "check.h"

static const uint32_t D1[1] = {1};

static ANeuralNetworksModel* add_model(int relaxed) {
    ANeuralNetworksOperandType tf = {.type = ANEURALNETWORKS_TENSOR_FLOAT32, .dimensionCount = 1, .dimensions = D1};
    ANeuralNetworksOperandType ti = {.type = ANEURALNETWORKS_INT32};
    const int32_t none = ANEURALNETWORKS_FUSED_NONE;
    const float one = 1.0f;
    ANeuralNetworksModel* m = NULL;
    if (!CHECK_RC(ANeuralNetworksModel_create(&m), ANEURALNETWORKS_NO_ERROR)) return NULL;
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &tf), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &tf), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &ti), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &tf), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 1, &one, sizeof one), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 2, &none, sizeof none), ANEURALNETWORKS_NO_ERROR);
    const uint32_t in[3] = {0, 1, 2}, out[1] = {3}, mi[1] = {0};
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, mi, 1, out), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksModel_relaxComputationFloat32toFloat16(m, relaxed), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksModel_finish(m), ANEURALNETWORKS_NO_ERROR);
    return m;
}

/* x + 1 for x = 2048 through a compilation of `m` (on `dev` when given) */
static float run(ANeuralNetworksModel* m, const ANeuralNetworksDevice* dev) {
    ANeuralNetworksCompilation* c = NULL;
    float x = 2048.0f, y = -1.0f;
    if (dev) {
        const ANeuralNetworksDevice* devs[1] = {dev};
        if (!CHECK_RC(ANeuralNetworksCompilation_createForDevices(m, devs, 1, &c), ANEURALNETWORKS_NO_ERROR)) return y;
    } else if (!CHECK_RC(ANeuralNetworksCompilation_create(m, &c), ANEURALNETWORKS_NO_ERROR)) {
        return y;
    }
    ANeuralNetworksExecution* e = NULL;
    if (CHECK_RC(ANeuralNetworksCompilation_finish(c), ANEURALNETWORKS_NO_ERROR) &&
        CHECK_RC(ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR)) {
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, &x, sizeof x), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, &y, sizeof y), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_NO_ERROR);
        ANeuralNetworksExecution_free(e);
    }
    ANeuralNetworksCompilation_free(c);
    return y;
}

int main(int argc, char** argv) {
    check_init(50);
    int gpu = argc > 1 && strcmp(argv[1], "gpu") == 0;
    ANeuralNetworksModel* relaxed = add_model(1);
    ANeuralNetworksModel* exact = add_model(0);
    if (!relaxed || !exact) return check_summary();
    ck_section("Compilation_create");
    CHECK_VAL(run(relaxed, NULL), gpu ? 2048.0f : 2049.0f);
    CHECK_VAL(run(exact, NULL), 2049.0f);
    if (gpu) {
        ck_section("createForDevices(gpu)");
        uint32_t n = 0;
        ANeuralNetworksDevice* dev = NULL;
        const char* name = NULL;
        CHECK_RC(ANeuralNetworks_getDeviceCount(&n), ANEURALNETWORKS_NO_ERROR);
        for (uint32_t i = 0; i < n; i++) {
            ANeuralNetworksDevice* d = NULL;
            if (ANeuralNetworks_getDevice(i, &d) == ANEURALNETWORKS_NO_ERROR &&
                ANeuralNetworksDevice_getName(d, &name) == ANEURALNETWORKS_NO_ERROR && strcmp(name, "gpu") == 0)
                dev = d;
        }
        if (CHECK_MSG(dev != NULL, "no device named gpu (set NNAPI_PY_DEVICES=gpu=float-fast:fp16)")) {
            CHECK_VAL(run(relaxed, dev), 2048.0f);
            CHECK_VAL(run(exact, dev), 2049.0f);
        }
    }
    ANeuralNetworksModel_free(relaxed);
    ANeuralNetworksModel_free(exact);
    return check_summary();
}
