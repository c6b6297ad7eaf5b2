/*
 * test_quiet_threads.c -- a C host's stderr stays clean and its fds are released.
 *
 * 4 threads (the main one did not start the runtime) compute float32 ADDs whose results
 * overflow to inf and produce NaN (inf + -inf): numpy's floating-point warnings must not reach
 * stderr from any thread (the test driver checks stderr is empty).  Then a memory created from
 * an fd is used by an asynchronous computation (startCompute) and everything is freed: the
 * library must not keep the fd open (an idle worker thread used to keep its last task alive).
 * Also a reusable execution computed first on the main thread and then on other threads (its
 * later computations take the runtime's short path): those threads stay quiet too.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>

#include "check.h"
#include "nn_helpers.h"

#define THREADS 4

static ANeuralNetworksCompilation* comp;

static void* worker(void* arg) {
    (void)arg;
    float a[4] = {3e38f, -3e38f, 1.0f / 0.0f, 1.0f}, b[4] = {3e38f, -3e38f, -1.0f / 0.0f, 2.0f}, out[4];
    for (int k = 0; k < 50; k++) CHECK_RC(nn_run2(comp, a, b, out, 4), ANEURALNETWORKS_NO_ERROR);
    CHECK(out[3] == 3.0f);
    return NULL;
}

static ANeuralNetworksExecution* reused;
static float ra[4] = {3e38f, -3e38f, 1.0f / 0.0f, 1.0f}, rb[4] = {3e38f, -3e38f, -1.0f / 0.0f, 2.0f}, rout[4];

static void* reuse_worker(void* arg) {
    (void)arg;
    for (int k = 0; k < 20; k++) CHECK_RC(ANeuralNetworksExecution_compute(reused), ANEURALNETWORKS_NO_ERROR);
    CHECK(rout[3] == 3.0f);
    return NULL;
}

static int count_fds(void) {
    int n = 0;
    DIR* d = opendir("/proc/self/fd");
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

int main(void) {
    check_init(60);
    ANeuralNetworksModel* m = NULL;
    if (!CHECK_RC(nn_build_add_vec(4, &m), ANEURALNETWORKS_NO_ERROR)) return check_summary();
    CHECK_RC(nn_compile(m, &comp), ANEURALNETWORKS_NO_ERROR);
    pthread_t t[THREADS];
    for (intptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void*)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);

    /* one reusable execution, computed on this thread, then on new threads one after another */
    CHECK_RC(ANeuralNetworksExecution_create(comp, &reused), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setReusable(reused, true), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setInput(reused, 0, NULL, ra, sizeof ra), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setInput(reused, 1, NULL, rb, sizeof rb), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setOutput(reused, 0, NULL, rout, sizeof rout), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_compute(reused), ANEURALNETWORKS_NO_ERROR);
    for (int i = 0; i < THREADS; i++) {
        pthread_t r;
        pthread_create(&r, NULL, reuse_worker, NULL);
        pthread_join(r, NULL);
    }
    ANeuralNetworksExecution_free(reused);

    int before = count_fds();
    nn_shm shm;
    if (CHECK(nn_shm_create(4096, &shm) == 0)) {
        float* p = (float*)shm.p;
        for (int i = 0; i < 4; i++) p[i] = (float)i;
        ANeuralNetworksMemory* mem = shm.mem;
        ANeuralNetworksExecution* e = NULL;
        CHECK_RC(ANeuralNetworksExecution_create(comp, &e), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, mem, 0, 16), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 1, NULL, mem, 0, 16), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, mem, 16, 16), ANEURALNETWORKS_NO_ERROR);
        ANeuralNetworksEvent* ev = NULL;
        CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksEvent_wait(ev), ANEURALNETWORKS_NO_ERROR);
        CHECK(p[4 + 3] == 6.0f);
        ANeuralNetworksEvent_free(ev);
        ANeuralNetworksExecution_free(e);
        nn_shm_destroy(&shm);                /* frees the memory and closes our fd */
        usleep(100 * 1000);                 /* the worker finishes its bookkeeping */
        CHECK(count_fds() <= before);       /* the library's duplicate of the fd is closed */
    }
    ANeuralNetworksCompilation_free(comp);
    ANeuralNetworksModel_free(m);
    return check_summary();
}
