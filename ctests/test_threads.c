/*
 * test_threads.c -- concurrent use of the NNAPI C API.
 *
 *  1. 8 threads share ONE finished compilation; each creates its own
 *     executions and computes 200 times with its own data, checking results.
 *  2. 8 threads do asynchronous startCompute + Event_wait on the shared compilation.
 *  3. 2 threads call Event_wait concurrently on the same event (both released).
 *  4. 4 threads each build, compile and run their own model at the same time.
 *  5. 4 threads each drive their own burst and reusable execution.
 *  6. 4 threads each compute from and into their own shared memory and a device memory
 *     (MemoryDesc, createFromDesc, Memory_copy).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <android/NeuralNetworks.h>

#include "check.h"
#include "nn_helpers.h"

#define E_OK ANEURALNETWORKS_NO_ERROR
#define N_THREADS 8
#define N_ITERS 200
#define VEC 64
#define MAX_FAILURES_PER_THREAD 5

static ANeuralNetworksCompilation* g_comp; /* ADD of two float[VEC] */

typedef struct {
    int tid;
    int failures;
} worker_arg;

static void fill(float* a, float* b, int tid, int iter) {
    for (int i = 0; i < VEC; i++) {
        a[i] = (float)(tid * 100000 + iter * 100 + i);
        b[i] = (float)(i - tid) * 0.5f;
    }
}

/* one compute, checked; returns 1 on success */
static int one_sync(int tid, int iter) {
    float a[VEC], b[VEC], o[VEC];
    fill(a, b, tid, iter);
    memset(o, 0, sizeof o);
    ANeuralNetworksExecution* e = NULL;
    int ok = CHECK_RC(ANeuralNetworksExecution_create(g_comp, &e), E_OK);
    ok = ok && CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a), E_OK);
    ok = ok && CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, sizeof b), E_OK);
    ok = ok && CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o), E_OK);
    ok = ok && CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    if (ok) {
        int bad = nn_count_add_mismatch(a, b, o, VEC);
        ok = CHECK_MSG(bad == 0, "thread %d iteration %d: %d wrong elements (o[0]=%g want %g)", tid, iter,
                       bad, (double)o[0], (double)(a[0] + b[0]));
    }
    ANeuralNetworksExecution_free(e);
    return ok;
}

static void* sync_worker(void* p) {
    worker_arg* w = (worker_arg*)p;
    for (int it = 0; it < N_ITERS; it++) {
        if (!one_sync(w->tid, it) && ++w->failures >= MAX_FAILURES_PER_THREAD) {
            printf("thread %d: too many failures, stopping\n", w->tid);
            break;
        }
    }
    return NULL;
}

static void* async_worker(void* p) {
    worker_arg* w = (worker_arg*)p;
    for (int it = 0; it < 50; it++) {
        float a[VEC], b[VEC], o[VEC];
        fill(a, b, w->tid, it);
        memset(o, 0, sizeof o);
        ANeuralNetworksExecution* e = NULL;
        ANeuralNetworksEvent* ev = NULL;
        int ok = CHECK_RC(nn_prepare2(g_comp, a, b, o, VEC, &e), E_OK);
        ok = ok && CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_OK);
        ok = ok && CHECK_RC(ANeuralNetworksEvent_wait(ev), E_OK);
        if (ok)
            ok = CHECK_MSG(nn_count_add_mismatch(a, b, o, VEC) == 0, "async thread %d iteration %d: wrong result",
                           w->tid, it);
        ANeuralNetworksEvent_free(ev);
        ANeuralNetworksExecution_free(e);
        if (!ok && ++w->failures >= MAX_FAILURES_PER_THREAD) break;
    }
    return NULL;
}

/* ---- concurrent waiters on one event ---- */

typedef struct {
    ANeuralNetworksEvent* ev;
    int rc;
} waiter_arg;

static void* waiter(void* p) {
    waiter_arg* w = (waiter_arg*)p;
    w->rc = ANeuralNetworksEvent_wait(w->ev);
    return NULL;
}

static void test_concurrent_waiters(void) {
    ck_section("two threads waiting on one event");
    /* a heavier model so that the waiters really block: out = ((a + b) * b) + a on 1M floats */
    const uint32_t n = 1u << 20;
    const uint32_t d[1] = {n};
    const int32_t none = ANEURALNETWORKS_FUSED_NONE;
    ANeuralNetworksModel* m = NULL;
    REQUIRE_RC(ANeuralNetworksModel_create(&m), E_OK);
    int rc = 0;
    for (int i = 0; i < 5; i++)
        NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_TENSOR_FLOAT32, 1, d, 0, 0)); /* 0 a,1 b,2 t,3 u,4 out */
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0));          /* 5 */
    NN_TRY(rc, ANeuralNetworksModel_setOperandValue(m, 5, &none, 4));
    const uint32_t i1[3] = {0, 1, 5}, o1[1] = {2}, i2[3] = {2, 1, 5}, o2[1] = {3}, i3[3] = {3, 0, 5}, o3[1] = {4};
    const uint32_t mi[2] = {0, 1};
    NN_TRY(rc, ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, i1, 1, o1));
    NN_TRY(rc, ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_MUL, 3, i2, 1, o2));
    NN_TRY(rc, ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, i3, 1, o3));
    NN_TRY(rc, ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 1, o3));
    NN_TRY(rc, ANeuralNetworksModel_finish(m));
    REQUIRE_RC(rc, E_OK);
    ANeuralNetworksCompilation* c = NULL;
    REQUIRE_RC(nn_compile(m, &c), E_OK);
    float* a = malloc(n * sizeof(float));
    float* b = malloc(n * sizeof(float));
    float* o = malloc(n * sizeof(float));
    for (uint32_t i = 0; i < n; i++) {
        a[i] = (float)(i % 1000);
        b[i] = 2.0f;
    }
    for (int round = 0; round < 10; round++) {
        memset(o, 0, n * sizeof(float));
        ANeuralNetworksExecution* e = NULL;
        ANeuralNetworksEvent* ev = NULL;
        if (!CHECK_RC(nn_prepare2(c, a, b, o, n, &e), E_OK)) break;
        if (!CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_OK)) {
            ANeuralNetworksExecution_free(e);
            break;
        }
        waiter_arg w1 = {ev, -1}, w2 = {ev, -1};
        pthread_t t1, t2;
        CHECK_VAL(pthread_create(&t1, NULL, waiter, &w1), 0);
        CHECK_VAL(pthread_create(&t2, NULL, waiter, &w2), 0);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        CHECK_RC(w1.rc, E_OK);
        CHECK_RC(w2.rc, E_OK);
        int bad = 0;
        for (uint32_t i = 0; i < n; i += 997) bad += o[i] != (a[i] + b[i]) * b[i] + a[i];
        CHECK_MSG(bad == 0 && o[n - 1] == (a[n - 1] + b[n - 1]) * b[n - 1] + a[n - 1],
                  "round %d: output not complete when both waiters returned", round);
        ANeuralNetworksEvent_free(ev);
        ANeuralNetworksExecution_free(e);
    }
    free(a);
    free(b);
    free(o);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* ---- every thread with its own model ---- */

static void* own_model_worker(void* p) {
    worker_arg* w = (worker_arg*)p;
    for (int round = 0; round < 10; round++) {
        uint32_t n = (uint32_t)(4 + w->tid + round);
        const uint32_t d[1] = {n};
        ANeuralNetworksModel* m = NULL;
        ANeuralNetworksCompilation* c = NULL;
        int32_t op = (w->tid % 2) ? ANEURALNETWORKS_MUL : ANEURALNETWORKS_ADD;
        int ok = CHECK_RC(nn_build_binary_f32(op, 1, d, ANEURALNETWORKS_FUSED_NONE, 1, &m), E_OK);
        ok = ok && CHECK_RC(nn_compile(m, &c), E_OK);
        if (ok) {
            float a[32], b[32], o[32];
            for (uint32_t i = 0; i < n; i++) {
                a[i] = (float)(i + 1);
                b[i] = (float)(w->tid + 1);
            }
            ok = CHECK_RC(nn_run2(c, a, b, o, n), E_OK);
            int bad = 0;
            for (uint32_t i = 0; ok && i < n; i++) bad += o[i] != ((w->tid % 2) ? a[i] * b[i] : a[i] + b[i]);
            if (ok) ok = CHECK_MSG(bad == 0, "own-model thread %d round %d: %d wrong", w->tid, round, bad);
        }
        ANeuralNetworksCompilation_free(c);
        ANeuralNetworksModel_free(m);
        if (!ok && ++w->failures >= MAX_FAILURES_PER_THREAD) break;
    }
    return NULL;
}

/* ---- bursts and reusable executions per thread ---- */

static void* burst_worker(void* p) {
    worker_arg* w = (worker_arg*)p;
    ANeuralNetworksBurst* burst = NULL;
    ANeuralNetworksExecution* e = NULL;
    float a[VEC], b[VEC], o[VEC];
    int ok = CHECK_RC(ANeuralNetworksBurst_create(g_comp, &burst), E_OK);
    ok = ok && CHECK_RC(ANeuralNetworksExecution_create(g_comp, &e), E_OK);
    ok = ok && CHECK_RC(ANeuralNetworksExecution_setReusable(e, true), E_OK);
    ok = ok && CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a), E_OK);
    ok = ok && CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, sizeof b), E_OK);
    ok = ok && CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o), E_OK);
    for (int it = 0; ok && it < 100; it++) {
        fill(a, b, w->tid, it);
        memset(o, 0, sizeof o);
        ok = CHECK_RC(ANeuralNetworksExecution_burstCompute(e, burst), E_OK);
        if (ok)
            ok = CHECK_MSG(nn_count_add_mismatch(a, b, o, VEC) == 0, "burst thread %d iteration %d: wrong result",
                           w->tid, it);
    }
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksBurst_free(burst);
    return NULL;
}

/* ---- memory per thread: inputs and output in one shared memory, and a device memory ---- */

static void* memory_worker(void* p) {
    worker_arg* w = (worker_arg*)p;
    nn_shm shm;
    ANeuralNetworksMemoryDesc* desc = NULL;
    ANeuralNetworksMemory* dev = NULL;
    const size_t bytes = VEC * sizeof(float);
    int ok = CHECK_RC(nn_shm_create(3 * bytes, &shm), E_OK);
    ok = ok && CHECK_RC(ANeuralNetworksMemoryDesc_create(&desc), E_OK);
    ok = ok && CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(desc, g_comp, 0, 1.0f), E_OK);
    ok = ok && CHECK_RC(ANeuralNetworksMemoryDesc_finish(desc), E_OK);
    ok = ok && CHECK_RC(ANeuralNetworksMemory_createFromDesc(desc, &dev), E_OK);
    for (int it = 0; ok && it < 50; it++) {
        float* a = (float*)shm.p;
        float* b = a + VEC;
        float* o = b + VEC;
        fill(a, b, w->tid, it);
        memset(o, 0, bytes);
        ANeuralNetworksExecution* e = NULL;
        ok = CHECK_RC(ANeuralNetworksExecution_create(g_comp, &e), E_OK);
        ok = ok && CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, shm.mem, 0, bytes), E_OK);
        ok = ok && CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 1, NULL, shm.mem, bytes, bytes), E_OK);
        /* even iterations write the device memory, then copy it into the shared one */
        if (it % 2 == 0)
            ok = ok && CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, dev, 0, 0), E_OK);
        else
            ok = ok && CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, shm.mem, 2 * bytes, bytes), E_OK);
        ok = ok && CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
        ANeuralNetworksExecution_free(e);
        if (ok && it % 2 == 0) {
            nn_shm out;
            ok = CHECK_RC(nn_shm_create(bytes, &out), E_OK);
            ok = ok && CHECK_RC(ANeuralNetworksMemory_copy(dev, out.mem), E_OK);
            if (ok) memcpy(o, out.p, bytes);
            nn_shm_destroy(&out);
        }
        if (ok)
            ok = CHECK_MSG(nn_count_add_mismatch(a, b, o, VEC) == 0, "memory thread %d iteration %d: wrong result",
                           w->tid, it);
    }
    ANeuralNetworksMemory_free(dev);
    ANeuralNetworksMemoryDesc_free(desc);
    nn_shm_destroy(&shm);
    return NULL;
}

static void run_threads(const char* name, void* (*fn)(void*), int count) {
    ck_section(name);
    pthread_t th[N_THREADS];
    worker_arg args[N_THREADS];
    for (int t = 0; t < count; t++) {
        args[t].tid = t;
        args[t].failures = 0;
        CHECK_VAL(pthread_create(&th[t], NULL, fn, &args[t]), 0);
    }
    for (int t = 0; t < count; t++) pthread_join(th[t], NULL);
}

int main(void) {
    check_init(55);
    ANeuralNetworksModel* m = NULL;
    if (!CHECK_RC(nn_build_add_vec(VEC, &m), E_OK) || !CHECK_RC(nn_compile(m, &g_comp), E_OK)) {
        printf("setup failed: cannot continue\n");
        return check_summary() | 1;
    }
    run_threads("8 threads x 200 synchronous computes on one compilation", sync_worker, N_THREADS);
    run_threads("8 threads x 50 startCompute/Event_wait", async_worker, N_THREADS);
    test_concurrent_waiters();
    run_threads("4 threads, each with its own model", own_model_worker, 4);
    run_threads("4 threads, each with its own burst", burst_worker, 4);
    run_threads("4 threads, each with its own memories (shared and device)", memory_worker, 4);
    ANeuralNetworksCompilation_free(g_comp);
    ANeuralNetworksModel_free(m);
    return check_summary();
}
