/*
 * bench/bench_threads.c -- throughput of executions from several C threads sharing one
 * compilation: prints "<model> <threads> <executions per second>".
 *
 *   bench_threads small|conv THREADS SECONDS
 *
 * small: ADD of two [4] float32 vectors, a full execution lifecycle per iteration
 *        (create, setInput x2, setOutput, compute, free) -- runtime overhead bound;
 * conv:  CONV_2D 1x224x224x16 -> 32 channels, 3x3, SAME -- BLAS bound (kernels release the GIL).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"

static ANeuralNetworksCompilation* g_comp;
static int g_conv;
static double g_seconds;
static long g_counts[64];

static double now(void) { return now_us() * 1e-6; }

static void build_small(void) {
    ANeuralNetworksModel* m;
    g_comp = bench_add4(&m);
}

static float* g_filter;
static float* g_bias;

static void build_conv(void) {
    ANeuralNetworksModel* m;
    CHECK(ANeuralNetworksModel_create(&m));
    uint32_t din[4] = {1, 224, 224, 16}, dw[4] = {32, 3, 3, 16}, db[1] = {32}, dout[4] = {1, 224, 224, 32};
    ANeuralNetworksOperandType ti = {ANEURALNETWORKS_TENSOR_FLOAT32, 4, din, 0.f, 0};
    ANeuralNetworksOperandType tw = {ANEURALNETWORKS_TENSOR_FLOAT32, 4, dw, 0.f, 0};
    ANeuralNetworksOperandType tb = {ANEURALNETWORKS_TENSOR_FLOAT32, 1, db, 0.f, 0};
    ANeuralNetworksOperandType to = {ANEURALNETWORKS_TENSOR_FLOAT32, 4, dout, 0.f, 0};
    ANeuralNetworksOperandType s = {ANEURALNETWORKS_INT32, 0, NULL, 0.f, 0};
    CHECK(ANeuralNetworksModel_addOperand(m, &ti));
    CHECK(ANeuralNetworksModel_addOperand(m, &tw));
    CHECK(ANeuralNetworksModel_addOperand(m, &tb));
    for (int k = 0; k < 4; k++) CHECK(ANeuralNetworksModel_addOperand(m, &s));
    CHECK(ANeuralNetworksModel_addOperand(m, &to));
    g_filter = calloc(32 * 9 * 16, sizeof(float));
    g_bias = calloc(32, sizeof(float));
    for (int k = 0; k < 32 * 9 * 16; k++) g_filter[k] = (float)((k * 7) % 13) / 13.f - 0.5f;
    CHECK(ANeuralNetworksModel_setOperandValue(m, 1, g_filter, 32 * 9 * 16 * sizeof(float)));
    CHECK(ANeuralNetworksModel_setOperandValue(m, 2, g_bias, 32 * sizeof(float)));
    int32_t same = ANEURALNETWORKS_PADDING_SAME, one = 1, none = 0;
    CHECK(ANeuralNetworksModel_setOperandValue(m, 3, &same, 4));
    CHECK(ANeuralNetworksModel_setOperandValue(m, 4, &one, 4));
    CHECK(ANeuralNetworksModel_setOperandValue(m, 5, &one, 4));
    CHECK(ANeuralNetworksModel_setOperandValue(m, 6, &none, 4));
    uint32_t in[7] = {0, 1, 2, 3, 4, 5, 6}, out[1] = {7}, mi[1] = {0};
    CHECK(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_CONV_2D, 7, in, 1, out));
    CHECK(ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, mi, 1, out));
    CHECK(ANeuralNetworksModel_finish(m));
    CHECK(ANeuralNetworksCompilation_create(m, &g_comp));
    CHECK(ANeuralNetworksCompilation_finish(g_comp));
}

static void* worker(void* arg) {
    long id = (long)arg, n = 0;
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, o[4];
    float* x = NULL;
    float* y = NULL;
    if (g_conv) {
        x = calloc(224 * 224 * 16, sizeof(float));
        y = calloc(224 * 224 * 32, sizeof(float));
    }
    double end = now() + g_seconds;
    while (now() < end) {
        ANeuralNetworksExecution* e;
        CHECK(ANeuralNetworksExecution_create(g_comp, &e));
        if (g_conv) {
            CHECK(ANeuralNetworksExecution_setInput(e, 0, NULL, x, 224 * 224 * 16 * sizeof(float)));
            CHECK(ANeuralNetworksExecution_setOutput(e, 0, NULL, y, 224 * 224 * 32 * sizeof(float)));
        } else {
            CHECK(ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a));
            CHECK(ANeuralNetworksExecution_setInput(e, 1, NULL, b, sizeof b));
            CHECK(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o));
        }
        CHECK(ANeuralNetworksExecution_compute(e));
        ANeuralNetworksExecution_free(e);
        n++;
    }
    g_counts[id] = n;
    free(x);
    free(y);
    return NULL;
}

int main(int argc, char** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s small|conv THREADS SECONDS\n", argv[0]);
        return 2;
    }
    g_conv = strcmp(argv[1], "conv") == 0;
    int threads = atoi(argv[2]);
    g_seconds = atof(argv[3]);
    if (threads < 1 || threads > 64) return 2;
    if (g_conv) build_conv(); else build_small();
    pthread_t th[64];
    double t0 = now();
    for (long k = 0; k < threads; k++) pthread_create(&th[k], NULL, worker, (void*)k);
    long total = 0;
    for (int k = 0; k < threads; k++) {
        pthread_join(th[k], NULL);
        total += g_counts[k];
    }
    printf("%s %d %.2f\n", argv[1], threads, total / (now() - t0));
    return 0;
}
