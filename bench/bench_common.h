/* bench_common.h -- what the C benchmarks (bench_api.c, bench_small.c, bench_threads.c) share:
 * a monotonic clock, the median of a batch of timings, a CHECK that exits on any error code
 * with the library's reason, and the ADD of two [4] float32 vectors, compiled. */
#ifndef NNAPI_PY_BENCH_COMMON_H
#define NNAPI_PY_BENCH_COMMON_H

#include <android/NeuralNetworks.h>
#include <nnapi_py.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BENCH_UNUSED __attribute__((unused))

#define CHECK(x) do { int rc_ = (x); if (rc_) { fprintf(stderr, "%s -> %d: %s\n", #x, rc_, nnapi_py_last_error()); exit(1); } } while (0)

static BENCH_UNUSED double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int bench_cmp(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

/* sorts v */
static BENCH_UNUSED double median(double* v, int n) {
    qsort(v, n, sizeof *v, bench_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ADD of two [4] float32 model inputs (no activation), finished and compiled; the model in *pm */
static BENCH_UNUSED ANeuralNetworksCompilation* bench_add4(ANeuralNetworksModel** pm) {
    uint32_t dims[1] = {4};
    ANeuralNetworksOperandType t = {ANEURALNETWORKS_TENSOR_FLOAT32, 1, dims, 0.f, 0};
    ANeuralNetworksOperandType s = {ANEURALNETWORKS_INT32, 0, NULL, 0.f, 0};
    ANeuralNetworksModel* m;
    CHECK(ANeuralNetworksModel_create(&m));
    CHECK(ANeuralNetworksModel_addOperand(m, &t));
    CHECK(ANeuralNetworksModel_addOperand(m, &t));
    CHECK(ANeuralNetworksModel_addOperand(m, &s));
    CHECK(ANeuralNetworksModel_addOperand(m, &t));
    int32_t none = 0;
    CHECK(ANeuralNetworksModel_setOperandValue(m, 2, &none, 4));
    uint32_t in[3] = {0, 1, 2}, out[1] = {3}, mi[2] = {0, 1};
    CHECK(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out));
    CHECK(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 1, out));
    CHECK(ANeuralNetworksModel_finish(m));
    ANeuralNetworksCompilation* c;
    CHECK(ANeuralNetworksCompilation_create(m, &c));
    CHECK(ANeuralNetworksCompilation_finish(c));
    *pm = m;
    return c;
}

#endif
