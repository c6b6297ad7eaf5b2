#define _POSIX_C_SOURCE 200809L
/* bench_api.c -- per-call overhead of the NNAPI C API (median of repeated batches).
 * Prints one line per measurement: "name value_us target_us". */
#include "bench_common.h"

#define BATCHES 25

int main(void) {
    double v[BATCHES];
    /* 1. addOperand: 500 tensor operands per model, timed up to and including the next
       call on the model (which is when operands batched on the C side reach Python) */
    uint32_t dims[4] = {1, 8, 8, 16};
    ANeuralNetworksOperandType t = {ANEURALNETWORKS_TENSOR_FLOAT32, 4, dims, 0.f, 0};
    for (int b = 0; b < BATCHES; b++) {
        ANeuralNetworksModel* m;
        CHECK(ANeuralNetworksModel_create(&m));
        double t0 = now_us();
        for (int i = 0; i < 500; i++) CHECK(ANeuralNetworksModel_addOperand(m, &t));
        CHECK(ANeuralNetworksModel_relaxComputationFloat32toFloat16(m, false));
        v[b] = (now_us() - t0) / 500;
        ANeuralNetworksModel_free(m);
    }
    printf("addOperand %.3f 1.0\n", median(v, BATCHES));

    ANeuralNetworksModel* m;
    ANeuralNetworksCompilation* c = bench_add4(&m);
    float a[4] = {1, 2, 3, 4}, bb[4] = {5, 6, 7, 8}, o[4];
    /* 2. setInput alone (fresh executions; only the setter is timed) */
    for (int b = 0; b < BATCHES; b++) {
        enum { N = 200 };
        ANeuralNetworksExecution* e[N];
        for (int i = 0; i < N; i++) CHECK(ANeuralNetworksExecution_create(c, &e[i]));
        double t0 = now_us();
        for (int i = 0; i < N; i++) CHECK(ANeuralNetworksExecution_setInput(e[i], 0, NULL, a, sizeof a));
        v[b] = (now_us() - t0) / N;
        for (int i = 0; i < N; i++) ANeuralNetworksExecution_free(e[i]);
    }
    printf("setInput %.3f 1.0\n", median(v, BATCHES));
    /* 3. full 1-op execution lifecycle */
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now_us();
        for (int i = 0; i < 200; i++) {
            ANeuralNetworksExecution* e;
            CHECK(ANeuralNetworksExecution_create(c, &e));
            CHECK(ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a));
            CHECK(ANeuralNetworksExecution_setInput(e, 1, NULL, bb, sizeof bb));
            CHECK(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o));
            CHECK(ANeuralNetworksExecution_compute(e));
            ANeuralNetworksExecution_free(e);
        }
        v[b] = (now_us() - t0) / 200;
    }
    if (o[0] != 6.f || o[3] != 12.f) { fprintf(stderr, "wrong result\n"); return 1; }
    printf("execution_lifecycle %.3f 20.0\n", median(v, BATCHES));
    /* 4. compute() on a reusable execution */
    ANeuralNetworksExecution* e;
    CHECK(ANeuralNetworksExecution_create(c, &e));
    CHECK(ANeuralNetworksExecution_setReusable(e, true));
    CHECK(ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a));
    CHECK(ANeuralNetworksExecution_setInput(e, 1, NULL, bb, sizeof bb));
    CHECK(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o));
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now_us();
        for (int i = 0; i < 1000; i++) CHECK(ANeuralNetworksExecution_compute(e));
        v[b] = (now_us() - t0) / 1000;
    }
    printf("reusable_compute %.3f 8.0\n", median(v, BATCHES));
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
    return 0;
}
