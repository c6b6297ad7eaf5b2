/*
 * test_lifetimes.c -- a C client that frees a memory while it is still in use, asks for
 * sizes computed from input values that cannot exist, and passes counts in the millions
 * (issue 25).  The memory stays valid for the model, execution, burst or computation in
 * flight that uses it (released with its last user); an impossible computed size is a
 * documented code with a reason; a huge count is rejected before the list is read.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <android/NeuralNetworks.h>

#include "check.h"
#include "nn_helpers.h"

#define E_OK ANEURALNETWORKS_NO_ERROR
#define F32 ANEURALNETWORKS_TENSOR_FLOAT32

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum { AT_CONSTANT, AT_EXECUTION, AT_BURST, AT_IN_FLIGHT, AT_BETWEEN };
static const char* WHEN[] = {"constant", "execution", "burst", "in-flight", "between"};

/* out = a + b: a at 0, b (a model constant) at 64, out at 128 of one shared memory, which is
 * freed at point `when`; every call must succeed and the result be right */
static void memory_freed_at(int when) {
    ck_section(WHEN[when]);
    nn_shm s;
    REQUIRE_RC(nn_shm_create(4096, &s), E_OK);
    float* f = (float*)s.p;
    for (int k = 0; k < 4; k++) {
        f[k] = (float)(k + 1);
        f[16 + k] = (float)(10 * (k + 1));
    }
    uint32_t d4[1] = {4};
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&m), E_OK);
    for (int k = 0; k < 2; k++) CHECK_RC(nn_add_operand(m, F32, 1, d4, 0.f, 0), E_OK);
    CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0.f, 0), E_OK);
    CHECK_RC(nn_add_operand(m, F32, 1, d4, 0.f, 0), E_OK);
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(m, 1, s.mem, 64, 16), E_OK);
    if (when == AT_CONSTANT) {
        ANeuralNetworksMemory_free(s.mem);          /* before finish and compilation */
        s.mem = NULL;
    }
    int32_t none = 0;
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 2, &none, sizeof none), E_OK);
    uint32_t in[3] = {0, 1, 2}, out[1] = {3};
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out), E_OK);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, in, 1, out), E_OK);
    CHECK_RC(ANeuralNetworksModel_finish(m), E_OK);
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    float a[4] = {1, 2, 3, 4}, res[4] = {0};
    if (when == AT_CONSTANT) {
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, res, sizeof res), E_OK);
        CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    } else {
        if (when == AT_BETWEEN || when == AT_BURST) CHECK_RC(ANeuralNetworksExecution_setReusable(e, true), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, s.mem, 0, 16), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, s.mem, 128, 16), E_OK);
        ANeuralNetworksBurst* b = NULL;
        ANeuralNetworksEvent* ev = NULL;
        switch (when) {
            case AT_EXECUTION:
                ANeuralNetworksMemory_free(s.mem);
                s.mem = NULL;
                CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
                break;
            case AT_BURST:
                CHECK_RC(ANeuralNetworksBurst_create(c, &b), E_OK);
                CHECK_RC(ANeuralNetworksExecution_burstCompute(e, b), E_OK);
                ANeuralNetworksMemory_free(s.mem);
                s.mem = NULL;
                memset(f + 32, 0, 16);
                CHECK_RC(ANeuralNetworksExecution_burstCompute(e, b), E_OK);
                ANeuralNetworksBurst_free(b);
                break;
            case AT_IN_FLIGHT:
                CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_OK);
                ANeuralNetworksMemory_free(s.mem);
                s.mem = NULL;
                CHECK_RC(ANeuralNetworksEvent_wait(ev), E_OK);
                ANeuralNetworksEvent_free(ev);
                break;
            default:
                CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
                ANeuralNetworksMemory_free(s.mem);
                s.mem = NULL;
                memset(f + 32, 0, 16);
                CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
        }
        memcpy(res, f + 32, sizeof res);
    }
    for (int k = 0; k < 4; k++)
        CHECK_MSG(res[k] == a[k] + f[16 + k], "out[%d] = %g, expected %g", k, res[k], a[k] + f[16 + k]);
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
    nn_shm_destroy(&s);          /* frees s.mem if still set (NULL is a no-op) */
}

/* PAD whose paddings are a model input: paddings of 2^31 - 1 -> a documented code, promptly */
static void pad_from_input_values(void) {
    ck_section("PAD with huge paddings from an input");
    uint32_t d2[2] = {2, 2}, dz[2] = {0, 0};
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&m), E_OK);
    CHECK_RC(nn_add_operand(m, F32, 2, d2, 0.f, 0), E_OK);
    CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_TENSOR_INT32, 2, d2, 0.f, 0), E_OK);
    CHECK_RC(nn_add_operand(m, F32, 2, dz, 0.f, 0), E_OK);
    uint32_t in[2] = {0, 1}, out[1] = {2};
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_PAD, 2, in, 1, out), E_OK);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, in, 1, out), E_OK);
    CHECK_RC(ANeuralNetworksModel_finish(m), E_OK);
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);
    float x[4] = {1, 2, 3, 4}, y[64];
    int32_t pads[4] = {0, 2147483647, 0, 2147483647};
    for (int burst = 0; burst < 2; burst++) {
        ANeuralNetworksExecution* e = NULL;
        CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, x, sizeof x), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, pads, sizeof pads), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, y, sizeof y), E_OK);
        ANeuralNetworksEvent* ev = NULL;
        ANeuralNetworksBurst* b = NULL;
        if (burst) {
            CHECK_RC(ANeuralNetworksBurst_create(c, &b), E_OK);
            CHECK_RC(ANeuralNetworksExecution_burstCompute(e, b), ANEURALNETWORKS_OP_FAILED);
            ANeuralNetworksBurst_free(b);
        } else {
            CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_OK);
            CHECK_RC(ANeuralNetworksEvent_wait(ev), ANEURALNETWORKS_OP_FAILED);
            ANeuralNetworksEvent_free(ev);
        }
        const char* why = ck_last_error();
        CHECK_MSG(strstr(why, "PAD") && strstr(why, "2^32 - 1") && !strstr(why, "internal error"),
                  "reason: %s", why);
        ANeuralNetworksExecution_free(e);
    }
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* the count: 25,165,824 operation inputs, all valid indices */
static void huge_counts(void) {
    ck_section("counts in the millions");
    const uint32_t n = 25165824;
    uint32_t* zeros = calloc(n, sizeof *zeros);
    REQUIRE_RC(zeros != NULL, 1);
    uint32_t d4[1] = {4};
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&m), E_OK);
    CHECK_RC(nn_add_operand(m, F32, 1, d4, 0.f, 0), E_OK);
    double t0 = now();
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, n, zeros, 1, zeros), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_CONCATENATION, n, zeros, 1, zeros),
             ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, n, zeros, n, zeros), ANEURALNETWORKS_BAD_DATA);
    ANeuralNetworksOperandType t = nn_type(F32, n, zeros, 0.f, 0);
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &t), ANEURALNETWORKS_BAD_DATA);
    double dt = now() - t0;
    CHECK_MSG(dt < 3.0, "four calls with counts of %u took %.2f s", n, dt);
    ANeuralNetworksModel_free(m);
    free(zeros);
}

int main(void) {
    check_init(50);
    for (int when = AT_CONSTANT; when <= AT_BETWEEN; when++) memory_freed_at(when);
    pad_from_input_values();
    huge_counts();
    return check_summary();
}
