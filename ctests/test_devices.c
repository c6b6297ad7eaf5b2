/*
 * test_devices.c -- virtual devices, injected faults and emulated feature levels, as a C client
 * sees them.  The settings come from the environment (tests/test_ctests.py sets them):
 *
 *   test_devices list              NNAPI_PY_DEVICES="gpu=float-fast:GPU:5,npu=quant:ACCELERATOR:4"
 *   test_devices fault KIND CODE   NNAPI_PY_DEVICES="gpu=float-fast" NNAPI_PY_FAULTS="gpu:KIND@every=2"
 *   test_devices fallback          NNAPI_PY_DEVICES="gpu=float-fast" NNAPI_PY_FAULTS="gpu:execute-fail"
 *   test_devices level N           NNAPI_PY_FEATURE_LEVEL=N
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "check.h"
#include "nn_helpers.h"

static const int64_t LEVEL_CODE[9] = {0, 27, 28, 29, 30, 31, 1000006, 1000007, 1000008};

static ANeuralNetworksDevice* device_named(const char* name) {
    uint32_t n = 0;
    ANeuralNetworks_getDeviceCount(&n);
    for (uint32_t i = 0; i < n; i++) {
        ANeuralNetworksDevice* d = NULL;
        const char* s = NULL;
        if (ANeuralNetworks_getDevice(i, &d) == 0 && ANeuralNetworksDevice_getName(d, &s) == 0 && !strcmp(s, name))
            return d;
    }
    return NULL;
}

/* A finished float ADD model of 4 elements compiled for `dev` (NULL: Compilation_create);
   returns the code of Compilation_finish. */
static int compile_add(ANeuralNetworksDevice* dev, ANeuralNetworksModel** m, ANeuralNetworksCompilation** c) {
    int rc = nn_build_add_vec(4, m);
    if (rc) return rc;
    if (dev) {
        const ANeuralNetworksDevice* devs[1] = {dev};
        rc = ANeuralNetworksCompilation_createForDevices(*m, devs, 1, c);
    } else {
        rc = ANeuralNetworksCompilation_create(*m, c);
    }
    return rc ? rc : ANeuralNetworksCompilation_finish(*c);
}

static int run_add(ANeuralNetworksCompilation* c) {
    float a[4] = {1, 2, 3, 4}, out[4] = {0};
    int rc = nn_run2(c, a, a, out, 4);
    if (rc == 0) CHECK(out[3] == 8.0f);
    return rc;
}

static void scenario_list(void) {
    uint32_t n = 0;
    CHECK_RC(ANeuralNetworks_getDeviceCount(&n), ANEURALNETWORKS_NO_ERROR);
    CHECK(n == 2);
    ANeuralNetworksDevice* gpu = device_named("gpu");
    ANeuralNetworksDevice* npu = device_named("npu");
    if (!CHECK(gpu && npu)) return;
    int32_t type = -1;
    int64_t level = 0;
    CHECK_RC(ANeuralNetworksDevice_getType(gpu, &type), ANEURALNETWORKS_NO_ERROR);
    CHECK(type == ANEURALNETWORKS_DEVICE_GPU);
    CHECK_RC(ANeuralNetworksDevice_getType(npu, &type), ANEURALNETWORKS_NO_ERROR);
    CHECK(type == ANEURALNETWORKS_DEVICE_ACCELERATOR);
    CHECK_RC(ANeuralNetworksDevice_getFeatureLevel(gpu, &level), ANEURALNETWORKS_NO_ERROR);
    CHECK(level == 31);
    CHECK_RC(ANeuralNetworksDevice_getFeatureLevel(npu, &level), ANEURALNETWORKS_NO_ERROR);
    CHECK(level == 30);
    /* a float model: the quantized accelerator cannot take it, the GPU can */
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksCompilation* c = NULL;
    if (!CHECK_RC(nn_build_add_vec(4, &m), ANEURALNETWORKS_NO_ERROR)) return;
    bool sup[1] = {true};
    const ANeuralNetworksDevice* only_npu[1] = {npu};
    CHECK_RC(ANeuralNetworksModel_getSupportedOperationsForDevices(m, only_npu, 1, sup), ANEURALNETWORKS_NO_ERROR);
    CHECK(!sup[0]);
    /* as Android: createForDevices succeeds, Compilation_finish fails (strict: createForDevices) */
    if (getenv("NNAPI_PY_STRICT") && strcmp(getenv("NNAPI_PY_STRICT"), "0") != 0) {
        CHECK_RC(ANeuralNetworksCompilation_createForDevices(m, only_npu, 1, &c), ANEURALNETWORKS_BAD_DATA);
    } else if (CHECK_RC(ANeuralNetworksCompilation_createForDevices(m, only_npu, 1, &c), ANEURALNETWORKS_NO_ERROR)) {
        CHECK_RC(ANeuralNetworksCompilation_finish(c), ANEURALNETWORKS_BAD_DATA);
        ANeuralNetworksCompilation_free(c);
    }
    c = NULL;
    ANeuralNetworksModel_free(m);
    CHECK_RC(compile_add(gpu, &m, &c), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(run_add(c), ANEURALNETWORKS_NO_ERROR);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
    CHECK_RC(compile_add(NULL, &m, &c), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(run_add(c), ANEURALNETWORKS_NO_ERROR);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* every=2: the first compilation/execution on the device succeeds, the second gets `code` */
static void scenario_fault(const char* kind, int code) {
    ANeuralNetworksDevice* gpu = device_named("gpu");
    if (!CHECK(gpu)) return;
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(compile_add(gpu, &m, &c), ANEURALNETWORKS_NO_ERROR);
    if (!strcmp(kind, "compile-fail")) {
        ANeuralNetworksModel* m2 = NULL;
        ANeuralNetworksCompilation* c2 = NULL;
        CHECK_RC(compile_add(gpu, &m2, &c2), code);
        ANeuralNetworksCompilation_free(c2);
        ANeuralNetworksModel_free(m2);
    } else {
        CHECK_RC(run_add(c), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(run_add(c), code);
        CHECK_RC(run_add(c), !strcmp(kind, "dead") ? ANEURALNETWORKS_DEAD_OBJECT : ANEURALNETWORKS_NO_ERROR);
        if (!strcmp(kind, "dead")) CHECK_RC(ANeuralNetworksDevice_wait(gpu), ANEURALNETWORKS_DEAD_OBJECT);
    }
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

static void scenario_fallback(void) {
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(compile_add(NULL, &m, &c), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(run_add(c), ANEURALNETWORKS_NO_ERROR);     /* the CPU implementation takes over */
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
    CHECK_RC(compile_add(device_named("gpu"), &m, &c), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(run_add(c), ANEURALNETWORKS_OP_FAILED);    /* an explicit device list: no fallback */
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

static void scenario_level(int n) {
    CHECK(ANeuralNetworks_getRuntimeFeatureLevel() == LEVEL_CODE[n]);
    ANeuralNetworksDevice* d = NULL;
    uint32_t count = 0;
    CHECK_RC(ANeuralNetworks_getDeviceCount(&count), n >= 3 ? ANEURALNETWORKS_NO_ERROR : ANEURALNETWORKS_OP_FAILED);
    if (n >= 3) {
        CHECK_RC(ANeuralNetworks_getDevice(0, &d), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksDevice_wait(d), n >= 4 ? ANEURALNETWORKS_NO_ERROR : ANEURALNETWORKS_OP_FAILED);
    }
    /* HARD_SWISH appeared at feature level 4 */
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&m), ANEURALNETWORKS_NO_ERROR);
    uint32_t dims[1] = {2};
    CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_TENSOR_FLOAT32, 1, dims, 0, 0), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_TENSOR_FLOAT32, 1, dims, 0, 0), ANEURALNETWORKS_NO_ERROR);
    uint32_t in[1] = {0}, out[1] = {1};
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_HARD_SWISH, 1, in, 1, out),
             n >= 4 ? ANEURALNETWORKS_NO_ERROR : ANEURALNETWORKS_BAD_DATA);
    ANeuralNetworksModel_free(m);
}

int main(int argc, char** argv) {
    check_init(60);
    if (argc >= 2 && !strcmp(argv[1], "list")) scenario_list();
    else if (argc >= 4 && !strcmp(argv[1], "fault")) scenario_fault(argv[2], atoi(argv[3]));
    else if (argc >= 2 && !strcmp(argv[1], "fallback")) scenario_fallback();
    else if (argc >= 3 && !strcmp(argv[1], "level")) scenario_level(atoi(argv[2]));
    else { fprintf(stdout, "usage: test_devices list|fault KIND CODE|fallback|level N\n"); return 2; }
    return check_summary();
}
