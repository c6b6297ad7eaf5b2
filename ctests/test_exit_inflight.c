/*
 * test_exit_inflight.c -- the process must be able to end while asynchronous
 * computations are still running: start several startCompute()s of a
 * moderately heavy model and leave main without waiting for them.
 *
 *   test_exit_inflight            return from main
 *   test_exit_inflight exit       call exit(0)
 *
 * The pytest driver runs both with a short timeout and checks that the
 * process exits with status 0 (no hang, no crash signal).
 *
 * The model is FULLY_CONNECTED 512x512 chained 4 times on a [256, 512]
 * input; if FULLY_CONNECTED is not available it falls back to a chain of
 * ADD/MUL on 4M-element vectors (the point of the test is the exit, not FC).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <android/NeuralNetworks.h>

#include "check.h"
#include "nn_helpers.h"

#define E_OK ANEURALNETWORKS_NO_ERROR
#define F32 ANEURALNETWORKS_TENSOR_FLOAT32
#define N_INFLIGHT 6
#define BATCH 256
#define UNITS 512
#define LAYERS 4
#define VEC_N (1u << 22)

static float g_weights[LAYERS][UNITS * UNITS]; /* referenced (> 128 bytes): must outlive the model */
static float g_bias[LAYERS][UNITS];

static ANeuralNetworksModel* build_fc_chain(uint32_t* in_elems, uint32_t* out_elems) {
    const uint32_t dx[2] = {BATCH, UNITS}, dw[2] = {UNITS, UNITS}, db[1] = {UNITS};
    const int32_t none = ANEURALNETWORKS_FUSED_NONE;
    ANeuralNetworksModel* m = NULL;
    if (ANeuralNetworksModel_create(&m) != E_OK) return NULL;
    int rc = 0;
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0)); /* 0: fuse */
    NN_TRY(rc, ANeuralNetworksModel_setOperandValue(m, 0, &none, 4));
    NN_TRY(rc, nn_add_operand(m, F32, 2, dx, 0, 0)); /* 1: x */
    uint32_t prev = 1, next = 2;
    for (int l = 0; l < LAYERS && rc == 0; l++) {
        uint32_t w = next++, b = next++, y = next++;
        NN_TRY(rc, nn_add_operand(m, F32, 2, dw, 0, 0));
        NN_TRY(rc, nn_add_operand(m, F32, 1, db, 0, 0));
        NN_TRY(rc, nn_add_operand(m, F32, 2, dx, 0, 0));
        NN_TRY(rc, ANeuralNetworksModel_setOperandValue(m, (int32_t)w, g_weights[l], sizeof g_weights[l]));
        NN_TRY(rc, ANeuralNetworksModel_setOperandValue(m, (int32_t)b, g_bias[l], sizeof g_bias[l]));
        const uint32_t in[4] = {prev, w, b, 0}, out[1] = {y};
        NN_TRY(rc, ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_FULLY_CONNECTED, 4, in, 1, out));
        prev = y;
    }
    const uint32_t mi[1] = {1}, mo[1] = {prev};
    NN_TRY(rc, ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, mi, 1, mo));
    NN_TRY(rc, ANeuralNetworksModel_finish(m));
    if (rc != E_OK) {
        printf("FULLY_CONNECTED chain not available (%d: %s); using the ADD/MUL fallback\n", rc,
               ck_last_error());
        ANeuralNetworksModel_free(m);
        return NULL;
    }
    *in_elems = BATCH * UNITS;
    *out_elems = BATCH * UNITS;
    return m;
}

/* out = ((((x + x) * x) + x) * x) ... 6 ops on VEC_N floats */
static ANeuralNetworksModel* build_vec_chain(uint32_t* in_elems, uint32_t* out_elems) {
    const uint32_t d[1] = {VEC_N};
    const int32_t none = ANEURALNETWORKS_FUSED_NONE;
    ANeuralNetworksModel* m = NULL;
    if (ANeuralNetworksModel_create(&m) != E_OK) return NULL;
    int rc = 0;
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0));
    NN_TRY(rc, ANeuralNetworksModel_setOperandValue(m, 0, &none, 4));
    NN_TRY(rc, nn_add_operand(m, F32, 1, d, 0, 0)); /* 1: x */
    uint32_t prev = 1;
    for (uint32_t k = 0; k < 6 && rc == 0; k++) {
        uint32_t y = 2 + k;
        NN_TRY(rc, nn_add_operand(m, F32, 1, d, 0, 0));
        const uint32_t in[3] = {prev, 1, 0}, out[1] = {y};
        NN_TRY(rc, ANeuralNetworksModel_addOperation(m, (k % 2) ? ANEURALNETWORKS_MUL : ANEURALNETWORKS_ADD, 3,
                                                     in, 1, out));
        prev = y;
    }
    const uint32_t mi[1] = {1}, mo[1] = {prev};
    NN_TRY(rc, ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, mi, 1, mo));
    NN_TRY(rc, ANeuralNetworksModel_finish(m));
    CHECK_RC(rc, E_OK);
    if (rc) {
        ANeuralNetworksModel_free(m);
        return NULL;
    }
    *in_elems = VEC_N;
    *out_elems = VEC_N;
    return m;
}

int main(int argc, char** argv) {
    int use_exit = argc > 1 && strcmp(argv[1], "exit") == 0;
    check_init(0); /* the driver's timeout is the watchdog */
    for (int l = 0; l < LAYERS; l++) {
        for (uint32_t i = 0; i < UNITS * UNITS; i++) g_weights[l][i] = (float)((i * 7u + (uint32_t)l) % 13u) * 1e-3f;
        for (uint32_t i = 0; i < UNITS; i++) g_bias[l][i] = 0.01f * (float)l;
    }
    uint32_t in_elems = 0, out_elems = 0;
    ANeuralNetworksModel* m = build_fc_chain(&in_elems, &out_elems);
    if (!m) m = build_vec_chain(&in_elems, &out_elems);
    if (!CHECK(m != NULL)) return check_summary();
    ANeuralNetworksCompilation* c = NULL;
    if (!CHECK_RC(nn_compile(m, &c), E_OK)) return check_summary();

    /* buffers deliberately leaked: they must stay valid while the computations run */
    int started = 0;
    for (int k = 0; k < N_INFLIGHT; k++) {
        float* x = malloc(in_elems * sizeof(float));
        float* y = malloc(out_elems * sizeof(float));
        if (!x || !y) break;
        for (uint32_t i = 0; i < in_elems; i++) x[i] = (float)(i % 17) * 0.1f;
        ANeuralNetworksExecution* e = NULL;
        ANeuralNetworksEvent* ev = NULL;
        if (!CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK)) break;
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, x, in_elems * sizeof(float)), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, y, out_elems * sizeof(float)), E_OK);
        if (CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_OK)) started++;
        /* neither Event_wait nor any free: leave with the work in flight */
    }
    CHECK_VAL(started, N_INFLIGHT);
    printf("started %d asynchronous computations; leaving main via %s\n", started,
           use_exit ? "exit(0)" : "return");
    int status = check_summary();
    if (use_exit) exit(status);
    return status;
}
