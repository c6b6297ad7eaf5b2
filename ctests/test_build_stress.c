/*
 * test_build_stress.c -- many threads building models at once (issue 44).
 *
 * NNPY_STRESS_THREADS threads (default 8) each build NNPY_STRESS_BUILDS models (default 1000):
 * chains of 1..180 ADD operations on float32 vectors (1 to 400 operands, so the library's
 * operand batch fills and switches models while other threads build theirs), with per-operation
 * or shared fuse constants, an optional constant vector (copied at 4 elements, referenced at
 * 33 or 64), and in the middle of a build the thread runs the model it built before (an
 * execution and a compilation of another model between two addOperand calls).  Every model is
 * compiled, executed and checked by its result: a + kb*b + kc, exact in float32.  A model that
 * lost, gained or reordered an operand fails a call or gives another sum.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <android/NeuralNetworks.h>

#include "check.h"
#include "nn_helpers.h"

#define E_OK ANEURALNETWORKS_NO_ERROR
#define MAX_N 64
#define MAX_OPS 180
#define MAX_FAILURES_PER_THREAD 5

static int g_builds = 1000;

typedef struct {
    uint64_t rng;
    int tid, failures, built;
} worker;

typedef struct {                  /* a finished, compiled model and what it must compute */
    ANeuralNetworksModel* m;
    ANeuralNetworksCompilation* c;
    uint32_t n;
    int kb, kc;
    float cval[MAX_N];             /* referenced constant (setOperandValue > 128 bytes) */
} built;

static uint32_t rnd(worker* w, uint32_t below) {
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return (uint32_t)(w->rng % below);
}

/* one execution of b->c on fresh inputs, checked element by element; 1 when right */
static int run_and_check(worker* w, built* b, int iter, const char* when) {
    float x[MAX_N], y[MAX_N], o[MAX_N];
    for (uint32_t i = 0; i < b->n; i++) {
        x[i] = (float)(w->tid * 1000 + iter % 1000) + (float)i * 0.5f;
        y[i] = (float)(1 + (i + (uint32_t)iter) % 7);
        o[i] = -1.0f;
    }
    if (!CHECK_RC(nn_run2(b->c, x, y, o, b->n), E_OK)) return 0;
    for (uint32_t i = 0; i < b->n; i++) {
        float want = x[i] + (float)b->kb * y[i] + (float)b->kc * b->cval[i];
        if (o[i] != want)
            return CHECK_MSG(0, "thread %d build %d (%s): n=%u kb=%d kc=%d: o[%u]=%g want %g", w->tid, iter,
                             when, b->n, b->kb, b->kc, i, (double)o[i], (double)want);
    }
    return CHECK(1);
}

/* Builds, finishes and compiles one model; `other` (may be NULL) is run in the middle. */
static int build_one(worker* w, built* b, built* other, int iter) {
    static const uint32_t sizes[4] = {1, 4, 33, 64};
    uint32_t r = rnd(w, 100);
    int ops = r < 70 ? 1 + (int)rnd(w, 4) : r < 95 ? 5 + (int)rnd(w, 36) : 100 + (int)rnd(w, MAX_OPS - 99);
    uint32_t n = sizes[rnd(w, 4)];
    int shared_fuse = rnd(w, 3) == 0, with_const = rnd(w, 2) == 0;
    int mid = other && other->c && rnd(w, 5) == 0 ? (int)rnd(w, (uint32_t)ops) : -1;
    memset(b, 0, sizeof *b);
    b->n = n;
    for (uint32_t i = 0; i < n; i++) b->cval[i] = (float)(i % 5) + 0.25f;
    uint32_t d[1] = {n};
    ANeuralNetworksOperandType vec = nn_type(ANEURALNETWORKS_TENSOR_FLOAT32, 1, d, 0.f, 0);
    ANeuralNetworksOperandType i32 = nn_scalar(ANEURALNETWORKS_INT32);
    static const int32_t none = ANEURALNETWORKS_FUSED_NONE;
    int rc = ANeuralNetworksModel_create(&b->m);
    if (!CHECK_RC(rc, E_OK)) return 0;
    ANeuralNetworksModel* m = b->m;
    uint32_t next = 0, a_in = next++, b_in = next++, c_in = 0, fuse = 0;
    NN_TRY(rc, ANeuralNetworksModel_addOperand(m, &vec));
    NN_TRY(rc, ANeuralNetworksModel_addOperand(m, &vec));
    if (with_const) {
        c_in = next++;
        NN_TRY(rc, ANeuralNetworksModel_addOperand(m, &vec));
        NN_TRY(rc, ANeuralNetworksModel_setOperandValue(m, c_in, b->cval, n * sizeof(float)));
    }
    if (shared_fuse) {
        fuse = next++;
        NN_TRY(rc, ANeuralNetworksModel_addOperand(m, &i32));
        NN_TRY(rc, ANeuralNetworksModel_setOperandValue(m, fuse, &none, sizeof none));
    }
    uint32_t prev = a_in;
    for (int k = 0; k < ops && rc == E_OK; k++) {
        uint32_t f = fuse;
        if (!shared_fuse) {
            f = next++;
            NN_TRY(rc, ANeuralNetworksModel_addOperand(m, &i32));
        }
        uint32_t out = next++;
        NN_TRY(rc, ANeuralNetworksModel_addOperand(m, &vec));
        if (k == mid) {            /* another model's execution between two addOperand calls */
            if (!run_and_check(w, other, iter, "run in the middle of the next build")) return 0;
        }
        if (!shared_fuse) NN_TRY(rc, ANeuralNetworksModel_setOperandValue(m, f, &none, sizeof none));
        int use_c = with_const && (k % 3 == 2);
        uint32_t in[3] = {prev, use_c ? c_in : b_in, f}, o[1] = {out};
        NN_TRY(rc, ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, o));
        if (use_c) b->kc++; else b->kb++;
        prev = out;
    }
    uint32_t ins[2] = {a_in, b_in}, outs[1] = {prev};
    NN_TRY(rc, ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, ins, 1, outs));
    NN_TRY(rc, ANeuralNetworksModel_finish(m));
    NN_TRY(rc, nn_compile(m, &b->c));
    return CHECK_MSG(rc == E_OK, "thread %d build %d (%d operations, %u operands): rc %d (%s): %s", w->tid, iter,
                     ops, next, rc, ck_result_name(rc), ck_last_error());
}

static void release(built* b) {
    ANeuralNetworksCompilation_free(b->c);
    ANeuralNetworksModel_free(b->m);
    b->c = NULL;
    b->m = NULL;
}

static void* worker_main(void* p) {
    worker* w = p;
    built* cur = calloc(2, sizeof(built));
    built* prev = cur + 1;
    for (int iter = 0; iter < g_builds && w->failures < MAX_FAILURES_PER_THREAD; iter++) {
        int ok = build_one(w, cur, prev, iter);
        ok = ok && run_and_check(w, cur, iter, "just built");
        if (!ok) w->failures++;
        else w->built++;
        release(prev);
        built* t = prev; prev = cur; cur = t;
    }
    release(prev);
    release(cur);
    free(cur < prev ? cur : prev);
    return NULL;
}

int main(void) {
    check_init(600);
    const char* t = getenv("NNPY_STRESS_THREADS");
    const char* b = getenv("NNPY_STRESS_BUILDS");
    int nthreads = t ? atoi(t) : 8;
    if (nthreads < 1 || nthreads > 64) nthreads = 8;
    if (b && atoi(b) > 0) g_builds = atoi(b);
    ck_section("concurrent model building");
    pthread_t th[64];
    worker ws[64];
    for (int i = 0; i < nthreads; i++) {
        memset(&ws[i], 0, sizeof ws[i]);
        ws[i].tid = i;
        ws[i].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1) + (uint64_t)g_builds;
        pthread_create(&th[i], NULL, worker_main, &ws[i]);
    }
    int total = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        total += ws[i].built;
    }
    printf("built, compiled and checked %d of %d models in %d threads\n", total, nthreads * g_builds, nthreads);
    CHECK_VAL(total, nthreads * g_builds);
    return check_summary();
}
