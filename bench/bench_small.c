#define _POSIX_C_SOURCE 200809L
/* bench_small.c -- the cost of one execution of a small model through the C API (issue 41):
 * a chain of N float32 ADDs of a [1, 16] tensor and a constant, one reusable execution,
 * ANeuralNetworksExecution_compute timed in 25 batches of 200 (median of the batches).
 * Prints "small_exec_c <N> <us per compute>".  bench/small_path.py runs it with and without
 * NNAPI_PY_PROFILE (the kernels' own time) to get the cost beyond the kernels. */
#include "bench_common.h"

#define BATCHES 25
#define PER 200

int main(int argc, char** argv) {
    int n = argc > 1 ? atoi(argv[1]) : 16;
    if (n < 1 || n > 1000) n = 16;
    uint32_t dims[2] = {1, 16};
    ANeuralNetworksOperandType t = {ANEURALNETWORKS_TENSOR_FLOAT32, 2, dims, 0.f, 0};
    ANeuralNetworksOperandType s = {ANEURALNETWORKS_INT32, 0, NULL, 0.f, 0};
    ANeuralNetworksModel* m;
    CHECK(ANeuralNetworksModel_create(&m));
    static float k[16];
    for (int i = 0; i < 16; i++) k[i] = 0.5f;
    int32_t none = 0;
    uint32_t x = 0, next = 0;
    CHECK(ANeuralNetworksModel_addOperand(m, &t)); x = next++;          /* the model input */
    CHECK(ANeuralNetworksModel_addOperand(m, &t)); uint32_t c = next++; /* the constant */
    CHECK(ANeuralNetworksModel_setOperandValue(m, c, k, sizeof k));
    CHECK(ANeuralNetworksModel_addOperand(m, &s)); uint32_t f = next++;
    CHECK(ANeuralNetworksModel_setOperandValue(m, f, &none, sizeof none));
    uint32_t in0 = x, cur = x;
    for (int i = 0; i < n; i++) {
        CHECK(ANeuralNetworksModel_addOperand(m, &t));
        uint32_t y = next++;
        uint32_t ins[3] = {cur, c, f};
        CHECK(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, ins, 1, &y));
        cur = y;
    }
    CHECK(ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, &in0, 1, &cur));
    CHECK(ANeuralNetworksModel_finish(m));
    ANeuralNetworksCompilation* comp;
    CHECK(ANeuralNetworksCompilation_create(m, &comp));
    CHECK(ANeuralNetworksCompilation_finish(comp));
    float a[16] = {0}, o[16];
    ANeuralNetworksExecution* e;
    CHECK(ANeuralNetworksExecution_create(comp, &e));
    CHECK(ANeuralNetworksExecution_setReusable(e, true));
    CHECK(ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a));
    CHECK(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o));
    for (int i = 0; i < 500; i++) CHECK(ANeuralNetworksExecution_compute(e));
    double v[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now_us();
        for (int i = 0; i < PER; i++) CHECK(ANeuralNetworksExecution_compute(e));
        v[b] = (now_us() - t0) / PER;
    }
    if (o[0] != 0.5f * n) { fprintf(stderr, "wrong result %g\n", o[0]); return 1; }
    printf("small_exec_c %d %.3f\n", n, median(v, BATCHES));
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(comp);
    ANeuralNetworksModel_free(m);
    return 0;
}
