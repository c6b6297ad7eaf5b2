/*
 * test_feature_levels.c -- a client that decides which Android release it talks to by the
 * functions the library exports, as TFLite's NNAPI delegate does (nnapi_implementation.cc:
 * createFromFd -> 27, relaxComputationFloat32toFloat16 -> 28, getDeviceCount -> 29,
 * Compilation_setTimeout -> 30, getRuntimeFeatureLevel -> 31, then that function's answer),
 * and takes the code path of that release.  NOT linked against the library: it dlopen()s
 * "libneuralnetworks.so" by bare name (LD_LIBRARY_PATH picks build/lib/feature-level-N) or the
 * path given, resolves every function with dlsym and calls only what it found.
 *
 *   test_feature_levels EXPECTED_LEVEL [LIBRARY]    EXPECTED_LEVEL: 1..8
 *
 * It checks that it lands on EXPECTED_LEVEL, that the level's code path works (results, no
 * OP_FAILED "needs feature level"), and that the library behaves as that level (what the next
 * level added is refused; devices and getRuntimeFeatureLevel report the level).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <android/NeuralNetworks.h>

#include "check.h"
#include "nn_dlsym.h"

static const int64_t LEVEL_CODE[9] = {0, 27, 28, 29, 30, 31, 1000006, 1000007, 1000008};

static int found;   /* how many of the 69 functions the library exports */

static void load_all(void* lib) {
#define LOAD_PTR(name) p_##name = (__typeof__(&name))dlsym(lib, #name); found += p_##name != NULL;
    NNAPI_FUNCTIONS(LOAD_PTR)
#undef LOAD_PTR
}

/* The release, from the symbols (as the delegate infers android_sdk_version), then the
   runtime's own answer where the function to ask exists. */
static int infer_feature_level(void) {
    int sdk = 0;
    if (p_ANeuralNetworksMemory_createFromFd) sdk = 27;
    if (sdk == 27 && p_ANeuralNetworksModel_relaxComputationFloat32toFloat16) sdk = 28;
    if (sdk == 28 && p_ANeuralNetworks_getDeviceCount) sdk = 29;
    if (sdk == 29 && p_ANeuralNetworksCompilation_setTimeout) sdk = 30;
    if (sdk == 30 && p_ANeuralNetworks_getRuntimeFeatureLevel) sdk = 31;
    if (sdk == 0) return 0;
    if (sdk < 31) return sdk - 26;
    int64_t code = p_ANeuralNetworks_getRuntimeFeatureLevel();
    for (int n = 5; n <= 8; n++)
        if (code == LEVEL_CODE[n]) return n;
    return -1;
}

static const uint32_t D4[1] = {4};

/* x + y (+ FuseCode NONE) -> out; returns the model, finished */
static ANeuralNetworksModel* add_model(int level) {
    ANeuralNetworksModel* m = NULL;
    if (!CHECK_RC(p_ANeuralNetworksModel_create(&m), ANEURALNETWORKS_NO_ERROR)) return NULL;
    nn_dl_add_model(m);
    if (level >= 2)     /* Android P: the delegate's allow_fp16 */
        CHECK_RC(p_ANeuralNetworksModel_relaxComputationFloat32toFloat16(m, true), ANEURALNETWORKS_NO_ERROR);
    if (!CHECK_RC(p_ANeuralNetworksModel_finish(m), ANEURALNETWORKS_NO_ERROR)) {
        p_ANeuralNetworksModel_free(m);
        return NULL;
    }
    return m;
}

/* What the next level added is refused: the library behaves as its level. */
static void next_level_refused(int level) {
    ANeuralNetworksModel* m = NULL;
    if (!CHECK_RC(p_ANeuralNetworksModel_create(&m), ANEURALNETWORKS_NO_ERROR)) return;
    ANeuralNetworksOperandType tf = {.type = ANEURALNETWORKS_TENSOR_FLOAT32, .dimensionCount = 1, .dimensions = D4};
    ANeuralNetworksOperandType ti = {.type = ANEURALNETWORKS_INT32};
    if (level == 1) {           /* DIV: feature level 2 */
        p_ANeuralNetworksModel_addOperand(m, &tf);
        p_ANeuralNetworksModel_addOperand(m, &tf);
        p_ANeuralNetworksModel_addOperand(m, &ti);
        p_ANeuralNetworksModel_addOperand(m, &tf);
        const int32_t none = ANEURALNETWORKS_FUSED_NONE;
        p_ANeuralNetworksModel_setOperandValue(m, 2, &none, sizeof none);
        const uint32_t in[3] = {0, 1, 2}, out[1] = {3};
        CHECK_RC(p_ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_DIV, 3, in, 1, out), ANEURALNETWORKS_BAD_DATA);
    } else if (level == 2) {    /* TENSOR_FLOAT16: feature level 3 */
        ANeuralNetworksOperandType th = {.type = ANEURALNETWORKS_TENSOR_FLOAT16, .dimensionCount = 1, .dimensions = D4};
        CHECK_RC(p_ANeuralNetworksModel_addOperand(m, &th), ANEURALNETWORKS_BAD_DATA);
    } else if (level == 3) {    /* TENSOR_QUANT8_ASYMM_SIGNED: feature level 4 */
        ANeuralNetworksOperandType tq = {.type = ANEURALNETWORKS_TENSOR_QUANT8_ASYMM_SIGNED, .dimensionCount = 1,
                                         .dimensions = D4, .scale = 0.5f};
        CHECK_RC(p_ANeuralNetworksModel_addOperand(m, &tq), ANEURALNETWORKS_BAD_DATA);
    }
    p_ANeuralNetworksModel_free(m);
}

static void run_level_path(int level) {
    ck_section("the level's code path");
    ANeuralNetworksModel* m = add_model(level);
    if (!m) return;
    ANeuralNetworksCompilation* c = NULL;
    int one_device = 0;
    if (level >= 3) {           /* Android Q: devices, createForDevices */
        uint32_t n = 0;
        CHECK_RC(p_ANeuralNetworks_getDeviceCount(&n), ANEURALNETWORKS_NO_ERROR);
        ANeuralNetworksDevice* dev = NULL;
        if (CHECK(n >= 1) && CHECK_RC(p_ANeuralNetworks_getDevice(0, &dev), ANEURALNETWORKS_NO_ERROR)) {
            const char* name = NULL;
            int64_t fl = 0;
            CHECK_RC(p_ANeuralNetworksDevice_getName(dev, &name), ANEURALNETWORKS_NO_ERROR);
            CHECK_RC(p_ANeuralNetworksDevice_getFeatureLevel(dev, &fl), ANEURALNETWORKS_NO_ERROR);
            CHECK_MSG(fl == LEVEL_CODE[level], "device %s reports feature level %lld, expected %lld",
                      name ? name : "?", (long long)fl, (long long)LEVEL_CODE[level]);
            const ANeuralNetworksDevice* devs[1] = {dev};
            bool supported[1] = {false};
            CHECK_RC(p_ANeuralNetworksModel_getSupportedOperationsForDevices(m, devs, 1, supported),
                     ANEURALNETWORKS_NO_ERROR);
            CHECK(supported[0]);
            one_device = CHECK_RC(p_ANeuralNetworksCompilation_createForDevices(m, devs, 1, &c), ANEURALNETWORKS_NO_ERROR);
        }
    } else {
        CHECK_RC(p_ANeuralNetworksCompilation_create(m, &c), ANEURALNETWORKS_NO_ERROR);
    }
    if (!c) { p_ANeuralNetworksModel_free(m); return; }
    CHECK_RC(p_ANeuralNetworksCompilation_setPreference(c, ANEURALNETWORKS_PREFER_SUSTAINED_SPEED), ANEURALNETWORKS_NO_ERROR);
    if (level >= 4) {           /* Android R: priority, compilation timeout */
        CHECK_RC(p_ANeuralNetworksCompilation_setPriority(c, ANEURALNETWORKS_PRIORITY_HIGH), ANEURALNETWORKS_NO_ERROR);
        if (one_device)
            CHECK_RC(p_ANeuralNetworksCompilation_setTimeout(c, 5000000000ull), ANEURALNETWORKS_NO_ERROR);
    }
    if (!CHECK_RC(p_ANeuralNetworksCompilation_finish(c), ANEURALNETWORKS_NO_ERROR)) goto done;
    if (level >= 5) {           /* Android S: preferred alignment */
        uint32_t align = 0;
        CHECK_RC(p_ANeuralNetworksCompilation_getPreferredMemoryAlignmentForInput(c, 0, &align), ANEURALNETWORKS_NO_ERROR);
        CHECK(align >= 1 && (align & (align - 1)) == 0);
    }
    ANeuralNetworksExecution* e = NULL;
    if (!CHECK_RC(p_ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR)) goto done;
    if (level >= 5)             /* Android S: one execution, computed twice */
        CHECK_RC(p_ANeuralNetworksExecution_setReusable(e, true), ANEURALNETWORKS_NO_ERROR);
    float a[4] = {1, 2, 3, 4}, b[4] = {0.5f, 0.25f, -1, 10}, o[4] = {0};
    CHECK_RC(p_ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(p_ANeuralNetworksExecution_setInput(e, 1, NULL, b, sizeof b), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(p_ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o), ANEURALNETWORKS_NO_ERROR);
    if (level >= 4 && one_device)   /* Android R: execution timeout */
        CHECK_RC(p_ANeuralNetworksExecution_setTimeout(e, 5000000000ull), ANEURALNETWORKS_NO_ERROR);
    for (int run = 0; run < (level >= 5 ? 2 : 1); run++) {
        ANeuralNetworksEvent* ev = NULL;
        if (level >= 4) {       /* Android R: fenced execution */
            CHECK_RC(p_ANeuralNetworksExecution_startComputeWithDependencies(e, NULL, 0, 0, &ev), ANEURALNETWORKS_NO_ERROR);
            CHECK_RC(p_ANeuralNetworksEvent_wait(ev), ANEURALNETWORKS_NO_ERROR);
            p_ANeuralNetworksEvent_free(ev);
        } else if (level == 3) {   /* Android Q: synchronous compute, output shapes */
            CHECK_RC(p_ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_NO_ERROR);
            uint32_t rank = 0;
            CHECK_RC(p_ANeuralNetworksExecution_getOutputOperandRank(e, 0, &rank), ANEURALNETWORKS_NO_ERROR);
            CHECK_VAL(rank, 1);
        } else {                /* Android O-MR1 / P: startCompute + Event_wait */
            CHECK_RC(p_ANeuralNetworksExecution_startCompute(e, &ev), ANEURALNETWORKS_NO_ERROR);
            CHECK_RC(p_ANeuralNetworksEvent_wait(ev), ANEURALNETWORKS_NO_ERROR);
            p_ANeuralNetworksEvent_free(ev);
        }
        int bad = 0;
        for (int i = 0; i < 4; i++) bad += o[i] != a[i] + b[i];
        CHECK_MSG(bad == 0, "ADD result wrong: %g %g %g %g", (double)o[0], (double)o[1], (double)o[2], (double)o[3]);
        a[0] += 1;
    }
    p_ANeuralNetworksExecution_free(e);
done:
    p_ANeuralNetworksCompilation_free(c);
    p_ANeuralNetworksModel_free(m);
    ck_section("behaves as its level");
    next_level_refused(level);
}

int main(int argc, char** argv) {
    check_init(50);
    if (argc < 2) {
        printf("usage: %s EXPECTED_LEVEL [LIBRARY]\n", argv[0]);
        return 2;
    }
    int expected = atoi(argv[1]);
    const char* path = argc > 2 ? argv[2] : "libneuralnetworks.so";
    ck_section("dlopen");
    void* lib = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    if (!CHECK_MSG(lib != NULL, "dlopen(\"%s\"): %s", path, dlerror())) return check_summary();
    ck_last_error_fn = (const char* (*)(void))dlsym(lib, "nnapi_py_last_error");
    CHECK_MSG(ck_last_error_fn != NULL, "nnapi_py_last_error is not exported");
    load_all(lib);
    ck_section("the release, from the symbols");
    int level = infer_feature_level();
    printf("%d of %d functions exported: feature level %d\n", found, NNAPI_FUNCTION_COUNT, level);
    CHECK_VAL(level, expected);
    if (level >= 1 && level <= 8) run_level_path(level);
    return check_summary();
}
