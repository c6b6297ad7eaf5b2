/*
 * test_api.c -- positive end-to-end coverage of the NNAPI C API:
 * devices and runtime queries, the ways to run an execution (compute,
 * startCompute, burst, startComputeWithDependencies with fence fds, reusable
 * executions), shared and device memory, timing, alignment/padding, float16
 * and quant8 models, unspecified and dynamic shapes, omitted optional inputs,
 * and a model using every operation implemented first.
 */
#define _GNU_SOURCE
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <android/NeuralNetworks.h>

#include "check.h"
#include "nn_helpers.h"

#define E_OK ANEURALNETWORKS_NO_ERROR
#define F32 ANEURALNETWORKS_TENSOR_FLOAT32

static ANeuralNetworksDevice* g_dev;
static const int32_t kNone = ANEURALNETWORKS_FUSED_NONE;

static int is_pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* On a new *m: ADD(input 0, input 1, FuseCode NONE) -> output 3 with the three tensor types given,
   finished; each of its nine steps a check. */
static void add_model(ANeuralNetworksModel** m, ANeuralNetworksOperandType ta, ANeuralNetworksOperandType tb,
                      ANeuralNetworksOperandType to) {
    CHECK_RC(ANeuralNetworksModel_create(m), E_OK);
    CHECK_RC(ANeuralNetworksModel_addOperand(*m, &ta), E_OK);
    CHECK_RC(ANeuralNetworksModel_addOperand(*m, &tb), E_OK);
    CHECK_RC(nn_add_operand(*m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0), E_OK);
    CHECK_RC(ANeuralNetworksModel_addOperand(*m, &to), E_OK);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(*m, 2, &kNone, 4), E_OK);
    uint32_t in[3] = {0, 1, 2}, out[1] = {3}, mi[2] = {0, 1};
    CHECK_RC(ANeuralNetworksModel_addOperation(*m, ANEURALNETWORKS_ADD, 3, in, 1, out), E_OK);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(*m, 2, mi, 1, out), E_OK);
    CHECK_RC(ANeuralNetworksModel_finish(*m), E_OK);
}

/* ------------------------------------------------------------------------ */

static void test_devices(void) {
    ck_section("devices and runtime");
    uint32_t n = 0;
    CHECK_RC(ANeuralNetworks_getDeviceCount(&n), E_OK);
    CHECK_MSG(n >= 1, "device count %u", n);
    int64_t runtime_fl = ANeuralNetworks_getRuntimeFeatureLevel();
    CHECK_VAL(runtime_fl, ANEURALNETWORKS_FEATURE_LEVEL_8);
    CHECK_VAL(ANeuralNetworks_getDefaultLoopTimeout(), 2000000000ull);
    CHECK_VAL(ANeuralNetworks_getMaximumLoopTimeout(), 15000000000ull);
    int cpu_devices = 0;
    for (uint32_t i = 0; i < n; i++) {
        ANeuralNetworksDevice* d = NULL;
        ANeuralNetworksDevice* d2 = NULL;
        CHECK_RC(ANeuralNetworks_getDevice(i, &d), E_OK);
        CHECK_RC(ANeuralNetworks_getDevice(i, &d2), E_OK);
        CHECK_MSG(d != NULL && d == d2, "getDevice(%u) must return the same pointer each time", i);
        const char* name = NULL;
        const char* version = NULL;
        int32_t type = -1;
        int64_t fl = 0;
        CHECK_RC(ANeuralNetworksDevice_getName(d, &name), E_OK);
        CHECK_MSG(name && name[0], "device %u name must be a non-empty string", i);
        CHECK_MSG(name && strcmp(name, "nnapi-reference") != 0, "device name must not be nnapi-reference");
        CHECK_RC(ANeuralNetworksDevice_getType(d, &type), E_OK);
        CHECK_MSG(type >= ANEURALNETWORKS_DEVICE_UNKNOWN && type <= ANEURALNETWORKS_DEVICE_ACCELERATOR,
                  "device type %d", type);
        if (type == ANEURALNETWORKS_DEVICE_CPU) cpu_devices++;
        CHECK_RC(ANeuralNetworksDevice_getVersion(d, &version), E_OK);
        CHECK_MSG(version && version[0], "device %u version must be a non-empty string", i);
        CHECK_RC(ANeuralNetworksDevice_getFeatureLevel(d, &fl), E_OK);
        int valid_fl = (fl >= ANEURALNETWORKS_FEATURE_LEVEL_1 && fl <= ANEURALNETWORKS_FEATURE_LEVEL_5) ||
                       fl == ANEURALNETWORKS_FEATURE_LEVEL_6 || fl == ANEURALNETWORKS_FEATURE_LEVEL_7 ||
                       fl == ANEURALNETWORKS_FEATURE_LEVEL_8;
        CHECK_MSG(valid_fl && fl <= runtime_fl, "device feature level %lld (runtime %lld)",
                  (long long)fl, (long long)runtime_fl);
        CHECK_RC(ANeuralNetworksDevice_wait(d), E_OK);
        /* strings stay valid and stable */
        const char* name2 = NULL;
        CHECK_RC(ANeuralNetworksDevice_getName(d, &name2), E_OK);
        CHECK(name && name2 && strcmp(name, name2) == 0);
        printf("device %u: name=\"%s\" type=%d version=\"%s\" feature_level=%lld\n", i,
               name ? name : "?", type, version ? version : "?", (long long)fl);
    }
    CHECK_MSG(cpu_devices >= 1, "expected a device of type ANEURALNETWORKS_DEVICE_CPU");
    int32_t type0 = -1;
    ANeuralNetworksDevice_getType(g_dev, &type0);
    CHECK_VAL(type0, ANEURALNETWORKS_DEVICE_CPU);
}

/* ------------------------------------------------------------------------ */

static void test_add_basic(void) {
    ck_section("float32 ADD / MUL: compute");
    const uint32_t d23[2] = {2, 3};
    float a[6] = {1, 2, 3, -4, -5, -6}, b[6] = {10, 20, 30, 1, 2, 3}, o[6];

    ANeuralNetworksModel* m = NULL;
    CHECK_RC(nn_build_binary_f32(ANEURALNETWORKS_ADD, 2, d23, ANEURALNETWORKS_FUSED_NONE, 1, &m), E_OK);
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);
    memset(o, 0, sizeof o);
    CHECK_RC(nn_run2(c, a, b, o, 6), E_OK);
    CHECK_VAL(nn_count_add_mismatch(a, b, o, 6), 0);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);

    /* fused RELU */
    m = NULL;
    c = NULL;
    CHECK_RC(nn_build_binary_f32(ANEURALNETWORKS_ADD, 2, d23, ANEURALNETWORKS_FUSED_RELU, 1, &m), E_OK);
    CHECK_RC(nn_compile(m, &c), E_OK);
    memset(o, 0, sizeof o);
    CHECK_RC(nn_run2(c, a, b, o, 6), E_OK);
    int bad = 0;
    for (int i = 0; i < 6; i++) bad += o[i] != fmaxf(a[i] + b[i], 0.f);
    CHECK_MSG(bad == 0, "ADD+RELU: %d wrong elements (o[3]=%g want 0)", bad, (double)o[3]);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);

    /* MUL with RELU1 */
    m = NULL;
    c = NULL;
    CHECK_RC(nn_build_binary_f32(ANEURALNETWORKS_MUL, 2, d23, ANEURALNETWORKS_FUSED_RELU1, 1, &m), E_OK);
    CHECK_RC(nn_compile(m, &c), E_OK);
    float ma[6] = {0.5f, -0.5f, 2, -2, 0.1f, 0.f}, mb[6] = {1, 1, 1, 1, 2, 5};
    memset(o, 0, sizeof o);
    CHECK_RC(nn_run2(c, ma, mb, o, 6), E_OK);
    bad = 0;
    for (int i = 0; i < 6; i++) bad += !nn_close(o[i], fminf(fmaxf(ma[i] * mb[i], -1.f), 1.f), 1e-6f);
    CHECK_MSG(bad == 0, "MUL+RELU1: %d wrong elements", bad);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);

    /* broadcasting: [2,3] + [3] */
    m = NULL;
    const uint32_t d3[1] = {3};
    add_model(&m, nn_type(F32, 2, d23, 0, 0), nn_type(F32, 1, d3, 0, 0), nn_type(F32, 2, d23, 0, 0));
    c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);
    float row[3] = {100, 200, 300};
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, row, sizeof row), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    bad = 0;
    for (int i = 0; i < 6; i++) bad += o[i] != a[i] + row[i % 3];
    CHECK_MSG(bad == 0, "broadcast ADD: %d wrong elements", bad);
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);

    /* compilation settings and caching do not change results */
    m = NULL;
    CHECK_RC(nn_build_add_vec(4, &m), E_OK);
    c = NULL;
    CHECK_RC(ANeuralNetworksCompilation_create(m, &c), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setPreference(c, ANEURALNETWORKS_PREFER_SUSTAINED_SPEED), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setPriority(c, ANEURALNETWORKS_PRIORITY_HIGH), E_OK);
    char dir[] = "/tmp/nnapi_py_ctest_cacheXXXXXX";
    static const uint8_t token[ANEURALNETWORKS_BYTE_SIZE_OF_CACHE_TOKEN] = {7, 7, 7};
    if (CHECK(mkdtemp(dir) != NULL)) CHECK_RC(ANeuralNetworksCompilation_setCaching(c, dir, token), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_finish(c), E_OK);
    float x4[4] = {1, 2, 3, 4}, y4[4] = {4, 3, 2, 1}, o4[4] = {0};
    CHECK_RC(nn_run2(c, x4, y4, o4, 4), E_OK);
    CHECK_VAL(nn_count_add_mismatch(x4, y4, o4, 4), 0);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", dir);

    /* relaxed float32 computation still gives (approximately) the right answer */
    m = NULL;
    CHECK_RC(nn_build_binary_f32(ANEURALNETWORKS_ADD, 2, d23, ANEURALNETWORKS_FUSED_NONE, 0, &m), E_OK);
    CHECK_RC(ANeuralNetworksModel_relaxComputationFloat32toFloat16(m, true), E_OK);
    CHECK_RC(ANeuralNetworksModel_finish(m), E_OK);
    c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);
    memset(o, 0, sizeof o);
    CHECK_RC(nn_run2(c, a, b, o, 6), E_OK);
    bad = 0;
    for (int i = 0; i < 6; i++) bad += !nn_close(o[i], a[i] + b[i], 1e-2f);
    CHECK_MSG(bad == 0, "relaxed ADD: %d wrong elements", bad);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* ------------------------------------------------------------------------ */

static void test_async_and_burst(void) {
    ck_section("startCompute, burst, reusable");
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(nn_build_add_vec(8, &m), E_OK);
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);
    float a[8], b[8], o[8];
    for (int i = 0; i < 8; i++) {
        a[i] = (float)i;
        b[i] = (float)(i * i) * 0.5f;
    }

    /* startCompute + Event_wait */
    ANeuralNetworksExecution* e = NULL;
    memset(o, 0, sizeof o);
    CHECK_RC(nn_prepare2(c, a, b, o, 8, &e), E_OK);
    ANeuralNetworksEvent* ev = NULL;
    CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_OK);
    CHECK(ev != NULL);
    CHECK_RC(ANeuralNetworksEvent_wait(ev), E_OK);
    CHECK_RC(ANeuralNetworksEvent_wait(ev), E_OK); /* waiting again is fine */
    CHECK_VAL(nn_count_add_mismatch(a, b, o, 8), 0);
    uint32_t rank = 0, dim = 0;
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &rank), E_OK);
    CHECK_VAL(rank, 1);
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandDimensions(e, 0, &dim), E_OK);
    CHECK_VAL(dim, 8);
    ANeuralNetworksEvent_free(ev);
    ANeuralNetworksExecution_free(e);

    /* Event_free without an explicit wait (AOSP waits inside Event_free) */
    e = NULL;
    memset(o, 0, sizeof o);
    CHECK_RC(nn_prepare2(c, a, b, o, 8, &e), E_OK);
    ev = NULL;
    CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_OK);
    ANeuralNetworksEvent_free(ev);
    CHECK_VAL(nn_count_add_mismatch(a, b, o, 8), 0);
    ANeuralNetworksExecution_free(e);

    /* burst: several executions on one burst object */
    ANeuralNetworksBurst* burst = NULL;
    CHECK_RC(ANeuralNetworksBurst_create(c, &burst), E_OK);
    for (int k = 0; k < 3; k++) {
        float bk[8];
        for (int i = 0; i < 8; i++) bk[i] = b[i] + (float)(k * 100);
        e = NULL;
        memset(o, 0, sizeof o);
        CHECK_RC(nn_prepare2(c, a, bk, o, 8, &e), E_OK);
        CHECK_RC(ANeuralNetworksExecution_burstCompute(e, burst), E_OK);
        CHECK_VAL(nn_count_add_mismatch(a, bk, o, 8), 0);
        ANeuralNetworksExecution_free(e);
    }

    /* reusable execution computed 3x (compute, startCompute, burst) with changed inputs */
    float ra[8], rb[8], ro[8];
    e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setReusable(e, true), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, ra, sizeof ra), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, rb, sizeof rb), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, ro, sizeof ro), E_OK);
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 8; i++) {
            ra[i] = (float)(k * 10 + i);
            rb[i] = (float)(-k) * 0.25f * (float)i;
        }
        memset(ro, 0, sizeof ro);
        CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
        CHECK_MSG(nn_count_add_mismatch(ra, rb, ro, 8) == 0, "reusable compute #%d: wrong result", k);
    }
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 8; i++) ra[i] = (float)(1000 * (k + 1) + i);
        memset(ro, 0, sizeof ro);
        ev = NULL;
        CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_OK);
        CHECK_RC(ANeuralNetworksEvent_wait(ev), E_OK);
        ANeuralNetworksEvent_free(ev);
        CHECK_MSG(nn_count_add_mismatch(ra, rb, ro, 8) == 0, "reusable startCompute #%d: wrong result", k);
        for (int i = 0; i < 8; i++) rb[i] = (float)(7 * i);
        memset(ro, 0, sizeof ro);
        CHECK_RC(ANeuralNetworksExecution_burstCompute(e, burst), E_OK);
        CHECK_MSG(nn_count_add_mismatch(ra, rb, ro, 8) == 0, "reusable burstCompute #%d: wrong result", k);
    }
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksBurst_free(burst);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* ------------------------------------------------------------------------ */

typedef struct {
    int fd;
    unsigned delay_ms;
} signaller_arg;

static void* signaller(void* p) {
    signaller_arg* s = (signaller_arg*)p;
    usleep(s->delay_ms * 1000u);
    uint64_t one = 1;
    ssize_t r = write(s->fd, &one, sizeof one);
    (void)r;
    return NULL;
}

static void test_dependencies(void) {
    ck_section("startComputeWithDependencies and sync fences");
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(nn_build_add_vec(4, &m), E_OK);
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);
    float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, cc[4] = {100, 200, 300, 400};
    float t[4] = {0}, o[4] = {0};

    /* e1: t = a + b (startCompute); e2: o = t + c, depends on e1 */
    ANeuralNetworksExecution* e1 = NULL;
    ANeuralNetworksExecution* e2 = NULL;
    CHECK_RC(nn_prepare2(c, a, b, t, 4, &e1), E_OK);
    CHECK_RC(nn_prepare2(c, t, cc, o, 4, &e2), E_OK);
    ANeuralNetworksEvent* ev1 = NULL;
    ANeuralNetworksEvent* ev2 = NULL;
    REQUIRE_RC(ANeuralNetworksExecution_startCompute(e1, &ev1), E_OK);
    const ANeuralNetworksEvent* deps[1] = {ev1};
    int fd = -1;
    if (!CHECK_RC(ANeuralNetworksExecution_startComputeWithDependencies(e2, deps, 1, 0, &ev2), E_OK)) {
        CHECK_RC(ANeuralNetworksEvent_wait(ev1), E_OK);
        goto external;
    }
    CHECK(ev2 != NULL);
    CHECK_RC(ANeuralNetworksEvent_getSyncFenceFd(ev2, &fd), E_OK);
    CHECK_MSG(fd >= 0, "getSyncFenceFd returned fd %d", fd);
    if (fd >= 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, 10000);
        CHECK_MSG(pr == 1 && (pfd.revents & POLLIN), "sync fence fd not readable after 10 s (poll=%d revents=%#x)",
                  pr, pfd.revents);
        close(fd);
    }
    CHECK_RC(ANeuralNetworksEvent_wait(ev2), E_OK);
    CHECK_RC(ANeuralNetworksEvent_wait(ev1), E_OK);
    int bad = 0;
    for (int i = 0; i < 4; i++) bad += o[i] != a[i] + b[i] + cc[i];
    CHECK_MSG(bad == 0, "dependent execution saw stale input (o[0]=%g, want %g)", (double)o[0],
              (double)(a[0] + b[0] + cc[0]));
    /* a fence fd can also be taken after completion */
    fd = -1;
    CHECK_RC(ANeuralNetworksEvent_getSyncFenceFd(ev2, &fd), E_OK);
    if (fd >= 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        CHECK_VAL(poll(&pfd, 1, 0), 1);
        close(fd);
    }

    /* no dependencies at all */
    ANeuralNetworksExecution* e0 = NULL;
    memset(o, 0, sizeof o);
    CHECK_RC(nn_prepare2(c, a, b, o, 4, &e0), E_OK);
    ANeuralNetworksEvent* ev0 = NULL;
    if (CHECK_RC(ANeuralNetworksExecution_startComputeWithDependencies(e0, NULL, 0, 0, &ev0), E_OK)) {
        CHECK_RC(ANeuralNetworksEvent_wait(ev0), E_OK);
        CHECK_VAL(nn_count_add_mismatch(a, b, o, 4), 0);
    }
    ANeuralNetworksEvent_free(ev0);
    ANeuralNetworksExecution_free(e0);

external:
    ANeuralNetworksEvent_free(ev1);
    ANeuralNetworksEvent_free(ev2);
    ANeuralNetworksExecution_free(e1);
    ANeuralNetworksExecution_free(e2);

    /* dependency on an external fence (an eventfd signalled by another thread) */
    int efd = eventfd(0, EFD_CLOEXEC);
    CHECK(efd >= 0);
    ANeuralNetworksEvent* dep = NULL;
    CHECK_RC(ANeuralNetworksEvent_createFromSyncFenceFd(efd, &dep), E_OK);
    ANeuralNetworksExecution* e3 = NULL;
    float o3[4] = {-1, -1, -1, -1};
    CHECK_RC(nn_prepare2(c, a, b, o3, 4, &e3), E_OK);
    ANeuralNetworksEvent* ev3 = NULL;
    const ANeuralNetworksEvent* deps3[1] = {dep};
    if (!CHECK_RC(ANeuralNetworksExecution_startComputeWithDependencies(e3, deps3, 1, 0, &ev3), E_OK)) {
        uint64_t one = 1;
        if (write(efd, &one, sizeof one) != (ssize_t)sizeof one) printf("note: eventfd write failed\n");
        ANeuralNetworksEvent_free(dep);
        ANeuralNetworksExecution_free(e3);
        close(efd);
        ANeuralNetworksCompilation_free(c);
        ANeuralNetworksModel_free(m);
        return;
    }
    int fd3 = -1;
    CHECK_RC(ANeuralNetworksEvent_getSyncFenceFd(ev3, &fd3), E_OK);
    usleep(150 * 1000);
    CHECK_MSG(o3[0] == -1.f, "execution ran before its dependency was signalled (o3[0]=%g)", (double)o3[0]);
    if (fd3 >= 0) {
        struct pollfd pfd = {.fd = fd3, .events = POLLIN};
        CHECK_MSG(poll(&pfd, 1, 0) == 0, "fence of the dependent execution signalled before its dependency");
    }
    pthread_t th;
    signaller_arg sa = {.fd = efd, .delay_ms = 100};
    double t0 = now_s();
    CHECK_VAL(pthread_create(&th, NULL, signaller, &sa), 0);
    CHECK_RC(ANeuralNetworksEvent_wait(ev3), E_OK);
    double waited = now_s() - t0;
    pthread_join(th, NULL);
    CHECK_MSG(waited >= 0.05, "Event_wait returned after %.3f s, before the dependency was signalled", waited);
    CHECK_VAL(nn_count_add_mismatch(a, b, o3, 4), 0);
    CHECK_RC(ANeuralNetworksEvent_wait(dep), E_OK);
    if (fd3 >= 0) {
        struct pollfd pfd = {.fd = fd3, .events = POLLIN};
        CHECK_VAL(poll(&pfd, 1, 1000), 1);
        close(fd3);
    }
    ANeuralNetworksEvent_free(ev3);
    ANeuralNetworksEvent_free(dep);
    ANeuralNetworksExecution_free(e3);
    close(efd); /* the event owned its own duplicate */

    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/*
 * After Event_wait has returned and Event_free has run, the library must not touch the
 * event's sync-fence fd any more: a late write() of the completion signal to a closed fd
 * number lands in whatever file the application opens next under that number.  Here the
 * "next file" is a fresh eventfd, which must stay unsignalled.
 */
static void test_fence_fd_hygiene(void) {
    ck_section("no writes to a fence fd after Event_wait/Event_free");
    ANeuralNetworksModel* m = NULL;
    REQUIRE_RC(nn_build_add_vec(4, &m), E_OK);
    ANeuralNetworksCompilation* c = NULL;
    REQUIRE_RC(nn_compile(m, &c), E_OK);
    float a[4] = {1, 2, 3, 4}, b[4] = {4, 3, 2, 1}, o[4];
    int corrupted = 0, rounds = 0, errors = 0;
    for (int it = 0; it < 60; it++) {
        ANeuralNetworksExecution* e = NULL;
        ANeuralNetworksEvent* ev = NULL;
        if (nn_prepare2(c, a, b, o, 4, &e) != E_OK ||
            ANeuralNetworksExecution_startComputeWithDependencies(e, NULL, 0, 0, &ev) != E_OK ||
            ANeuralNetworksEvent_wait(ev) != E_OK) {
            errors++;
        }
        ANeuralNetworksEvent_free(ev);
        ANeuralNetworksExecution_free(e);
        int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (efd < 0) break;
        usleep(2000);
        uint64_t v = 0;
        if (read(efd, &v, sizeof v) == (ssize_t)sizeof v) corrupted++; /* someone wrote into our fd */
        close(efd);
        rounds++;
    }
    CHECK_MSG(errors == 0, "%d of 60 startComputeWithDependencies/Event_wait rounds failed", errors);
    CHECK_MSG(corrupted == 0,
              "%d of %d fresh eventfds were written to by the library (late completion write to the "
              "sync-fence fd of an already freed event whose fd number was reused)", corrupted, rounds);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* ------------------------------------------------------------------------ */

static void test_fd_memory(void) {
    ck_section("memory from fds");
    nn_shm cm, io;
    CHECK_RC(nn_shm_create(4096, &cm), E_OK);
    CHECK_RC(nn_shm_create(8192, &io), E_OK);
    const uint32_t n = 64; /* 256 bytes: a constant above the immediate-copy threshold */
    const uint32_t d[1] = {n};
    float* konst = (float*)(cm.p + 256);
    for (uint32_t i = 0; i < n; i++) konst[i] = 0.5f * (float)i;

    /* out = (x + K) * y, K from memory */
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&m), E_OK);
    CHECK_RC(nn_add_operand(m, F32, 1, d, 0, 0), E_OK);                   /* 0 x */
    CHECK_RC(nn_add_operand(m, F32, 1, d, 0, 0), E_OK);                   /* 1 K */
    CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0), E_OK); /* 2 */
    CHECK_RC(nn_add_operand(m, F32, 1, d, 0, 0), E_OK);                   /* 3 t */
    CHECK_RC(nn_add_operand(m, F32, 1, d, 0, 0), E_OK);                   /* 4 y */
    CHECK_RC(nn_add_operand(m, F32, 1, d, 0, 0), E_OK);                   /* 5 out */
    CHECK_RC(ANeuralNetworksModel_setOperandValueFromMemory(m, 1, cm.mem, 256, n * 4), E_OK);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 2, &kNone, 4), E_OK);
    uint32_t i1[3] = {0, 1, 2}, o1[1] = {3}, i2[3] = {3, 4, 2}, o2[1] = {5}, mi[2] = {0, 4};
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, i1, 1, o1), E_OK);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_MUL, 3, i2, 1, o2), E_OK);
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 1, o2), E_OK);
    CHECK_RC(ANeuralNetworksModel_finish(m), E_OK);
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);

    float* x = (float*)(io.p + 0);
    float* y = (float*)(io.p + 1024);
    float* out = (float*)(io.p + 4096);
    for (int round = 0; round < 2; round++) {
        for (uint32_t i = 0; i < n; i++) {
            x[i] = (float)i + (float)round;
            y[i] = (i % 2) ? 2.f : -1.f;
            out[i] = 12345.f;
        }
        ANeuralNetworksExecution* e = NULL;
        CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, io.mem, 0, n * 4), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 1, NULL, io.mem, 1024, n * 4), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, io.mem, 4096, n * 4), E_OK);
        CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
        int bad = 0;
        for (uint32_t i = 0; i < n; i++) bad += !nn_close(out[i], (x[i] + konst[i]) * y[i], 1e-6f);
        CHECK_MSG(bad == 0, "fd memory round %d: %d wrong elements (out[3]=%g want %g)", round, bad,
                  (double)out[3], (double)((x[3] + konst[3]) * y[3]));
        ANeuralNetworksExecution_free(e);
    }
    /* mixing pointer and memory arguments */
    float xb[64], ob[64];
    for (uint32_t i = 0; i < n; i++) xb[i] = 1.f;
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, xb, sizeof xb), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 1, NULL, io.mem, 1024, n * 4), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, ob, sizeof ob), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    int bad = 0;
    for (uint32_t i = 0; i < n; i++) bad += !nn_close(ob[i], (1.f + konst[i]) * y[i], 1e-6f);
    CHECK_MSG(bad == 0, "mixed pointer/memory: %d wrong elements", bad);
    ANeuralNetworksExecution_free(e);

    /* read-only memory is fine for inputs; a memory object created at a page offset */
    nn_shm big;
    CHECK_RC(nn_shm_create(3 * 4096, &big), E_OK);
    float* page1 = (float*)(big.p + 4096);
    for (uint32_t i = 0; i < n; i++) page1[i] = 2.f;
    ANeuralNetworksMemory* ro = NULL;
    CHECK_RC(ANeuralNetworksMemory_createFromFd(4096, PROT_READ, big.fd, 4096, &ro), E_OK);
    e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, ro, 0, n * 4), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, xb, sizeof xb), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, ob, sizeof ob), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    bad = 0;
    for (uint32_t i = 0; i < n; i++) bad += !nn_close(ob[i], 2.f + konst[i], 1e-6f);
    CHECK_MSG(bad == 0, "memory at fd offset 4096: %d wrong elements (ob[1]=%g want %g)", bad,
              (double)ob[1], (double)(2.f + konst[1]));
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksMemory_free(ro);
    nn_shm_destroy(&big);

    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
    nn_shm_destroy(&cm);
    nn_shm_destroy(&io);
}

/* ------------------------------------------------------------------------ */

static void test_device_memory(void) {
    ck_section("MemoryDesc, createFromDesc, Memory_copy");
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(nn_build_add_vec(4, &m), E_OK);
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);
    ANeuralNetworksMemoryDesc* d = NULL;
    CHECK_RC(ANeuralNetworksMemoryDesc_create(&d), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(d, c, 0, 1.0f), E_OK);
    int have_input_role = CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 0, 0.5f), E_OK);
    const uint32_t d4[1] = {4};
    CHECK_RC(ANeuralNetworksMemoryDesc_setDimensions(d, 1, d4), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_finish(d), E_OK);
    ANeuralNetworksMemory* dm = NULL;
    CHECK_RC(ANeuralNetworksMemory_createFromDesc(d, &dm), E_OK);
    ANeuralNetworksMemoryDesc_free(d); /* the memory outlives its descriptor */

    float a[4] = {1, 2, 3, 4}, b[4] = {0.5f, 0.5f, 0.5f, 0.5f}, o[4] = {0};
    /* e1: dm = a + b */
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, sizeof b), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, dm, 0, 0), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    ANeuralNetworksExecution_free(e);
    /* copy device memory to fd memory and read it back */
    nn_shm shm;
    CHECK_RC(nn_shm_create(16, &shm), E_OK);
    CHECK_RC(ANeuralNetworksMemory_copy(dm, shm.mem), E_OK);
    float got[4];
    memcpy(got, shm.p, 16);
    CHECK_VAL(nn_count_add_mismatch(a, b, got, 4), 0);
    /* e2: o = dm + b  (device memory as input) */
    if (have_input_role) {
        e = NULL;
        CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, dm, 0, 0), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, sizeof b), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o), E_OK);
        CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
        int bad = 0;
        for (int i = 0; i < 4; i++) bad += o[i] != a[i] + 2 * b[i];
        CHECK_MSG(bad == 0, "device memory as input: %d wrong elements", bad);
        ANeuralNetworksExecution_free(e);
    }
    /* copy fd memory into device memory, then read it back through another copy */
    float w[4] = {9, 8, 7, 6};
    memcpy(shm.p, w, 16);
    CHECK_RC(ANeuralNetworksMemory_copy(shm.mem, dm), E_OK);
    nn_shm back;
    CHECK_RC(nn_shm_create(16, &back), E_OK);
    CHECK_RC(ANeuralNetworksMemory_copy(dm, back.mem), E_OK);
    CHECK(memcmp(back.p, w, 16) == 0);
    /* device memory to device memory */
    ANeuralNetworksMemoryDesc* d2 = NULL;
    ANeuralNetworksMemory* dm2 = NULL;
    CHECK_RC(ANeuralNetworksMemoryDesc_create(&d2), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d2, c, 1, 1.0f), E_OK);
    CHECK_RC(ANeuralNetworksMemoryDesc_finish(d2), E_OK);
    CHECK_RC(ANeuralNetworksMemory_createFromDesc(d2, &dm2), E_OK);
    ANeuralNetworksMemoryDesc_free(d2);
    CHECK_RC(ANeuralNetworksMemory_copy(dm, dm2), E_OK);
    e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 1, NULL, dm2, 0, 0), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    CHECK_VAL(nn_count_add_mismatch(a, w, o, 4), 0);
    ANeuralNetworksExecution_free(e);

    ANeuralNetworksMemory_free(dm2);
    nn_shm_destroy(&back);
    nn_shm_destroy(&shm);
    ANeuralNetworksMemory_free(dm);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* ------------------------------------------------------------------------ */

static void test_timing(void) {
    ck_section("timing on a createForDevices compilation");
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(nn_build_add_vec(16, &m), E_OK);
    ANeuralNetworksCompilation* c = NULL;
    const ANeuralNetworksDevice* devs[1] = {g_dev};
    CHECK_RC(ANeuralNetworksCompilation_createForDevices(m, devs, 1, &c), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_setTimeout(c, 10000000000ull), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_finish(c), E_OK);
    float a[16], b[16], o[16];
    for (int i = 0; i < 16; i++) {
        a[i] = (float)i;
        b[i] = 1.f;
    }
    for (int mode = 0; mode < 3; mode++) {
        ANeuralNetworksExecution* e = NULL;
        memset(o, 0, sizeof o);
        CHECK_RC(nn_prepare2(c, a, b, o, 16, &e), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setMeasureTiming(e, true), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setTimeout(e, 10000000000ull), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setLoopTimeout(e, 100000000000ull), E_OK); /* clamped */
        if (mode == 0) {
            CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
        } else if (mode == 1) {
            ANeuralNetworksEvent* ev = NULL;
            CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_OK);
            CHECK_RC(ANeuralNetworksEvent_wait(ev), E_OK);
            ANeuralNetworksEvent_free(ev);
        } else {
            ANeuralNetworksEvent* ev = NULL;
            if (!CHECK_RC(ANeuralNetworksExecution_startComputeWithDependencies(e, NULL, 0, 10000000000ull, &ev),
                          E_OK)) {
                ANeuralNetworksExecution_free(e);
                continue;
            }
            CHECK_RC(ANeuralNetworksEvent_wait(ev), E_OK);
            ANeuralNetworksEvent_free(ev);
        }
        CHECK_VAL(nn_count_add_mismatch(a, b, o, 16), 0);
        uint64_t dur[4];
        for (int code = 0; code < 4; code++) {
            dur[code] = 0;
            CHECK_RC(ANeuralNetworksExecution_getDuration(e, code, &dur[code]), E_OK);
            CHECK_MSG(dur[code] == UINT64_MAX || dur[code] < 60000000000ull,
                      "mode %d duration code %d = %llu ns is implausible", mode, code,
                      (unsigned long long)dur[code]);
        }
        if (dur[0] != UINT64_MAX && dur[1] != UINT64_MAX)
            CHECK_MSG(dur[0] <= dur[1], "ON_HARDWARE (%llu) must not exceed IN_DRIVER (%llu)",
                      (unsigned long long)dur[0], (unsigned long long)dur[1]);
        if (mode == 0)
            printf("durations (ns): on_hw=%llu in_driver=%llu fenced_on_hw=%llu fenced_in_driver=%llu\n",
                   (unsigned long long)dur[0], (unsigned long long)dur[1], (unsigned long long)dur[2],
                   (unsigned long long)dur[3]);
        ANeuralNetworksExecution_free(e);
    }
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* ------------------------------------------------------------------------ */

static void test_alignment_padding(void) {
    ck_section("preferred alignment / padding, padded buffers");
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(nn_build_add_vec(5, &m), E_OK); /* 20 bytes: not a multiple of most paddings */
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);
    uint32_t al_in[2], pad_in[2], al_out = 0, pad_out = 0;
    for (uint32_t i = 0; i < 2; i++) {
        al_in[i] = pad_in[i] = 0;
        CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForInput(c, i, &al_in[i]), E_OK);
        CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForInput(c, i, &pad_in[i]), E_OK);
        CHECK_MSG(is_pow2(al_in[i]) && is_pow2(pad_in[i]), "input %u: alignment %u padding %u", i,
                  al_in[i], pad_in[i]);
    }
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryAlignmentForOutput(c, 0, &al_out), E_OK);
    CHECK_RC(ANeuralNetworksCompilation_getPreferredMemoryPaddingForOutput(c, 0, &pad_out), E_OK);
    CHECK_MSG(is_pow2(al_out) && is_pow2(pad_out), "output: alignment %u padding %u", al_out, pad_out);
    printf("alignment in=%u/%u out=%u, padding in=%u/%u out=%u\n", al_in[0], al_in[1], al_out,
           pad_in[0], pad_in[1], pad_out);

    /* padded lengths: raw size (20) rounded up to the padding, plus one more padding unit */
    size_t raw = 20;
    size_t len_in0 = ((raw + pad_in[0] - 1) / (pad_in[0] ? pad_in[0] : 1)) * pad_in[0] + pad_in[0];
    size_t len_in1 = ((raw + pad_in[1] - 1) / (pad_in[1] ? pad_in[1] : 1)) * pad_in[1] + pad_in[1];
    size_t len_out = ((raw + pad_out - 1) / (pad_out ? pad_out : 1)) * pad_out + pad_out;
    size_t maxlen = len_in0 > len_in1 ? len_in0 : len_in1;
    if (len_out > maxlen) maxlen = len_out;
    size_t al = 64;
    if (al_in[0] > al) al = al_in[0];
    if (al_in[1] > al) al = al_in[1];
    if (al_out > al) al = al_out;
    if (maxlen > 1 << 20 || al > 1 << 20) {
        CHECK_MSG(0, "unreasonable padding/alignment");
        ANeuralNetworksCompilation_free(c);
        ANeuralNetworksModel_free(m);
        return;
    }
    size_t stride = ((maxlen + al - 1) / al) * al;
    float* a = aligned_alloc(al, stride);
    float* b = aligned_alloc(al, stride);
    float* o = aligned_alloc(al, stride);
    memset(a, 0, stride);
    memset(b, 0, stride);
    memset(o, 0, stride);
    for (int i = 0; i < 5; i++) {
        a[i] = (float)i;
        b[i] = 10.f * (float)i;
    }
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_enableInputAndOutputPadding(e, true), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, len_in0), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, len_in1), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, len_out), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    CHECK_VAL(nn_count_add_mismatch(a, b, o, 5), 0);
    ANeuralNetworksExecution_free(e);

    /* padded memory regions at aligned offsets */
    nn_shm shm;
    size_t region = stride;
    CHECK_RC(nn_shm_create(4 * region, &shm), E_OK);
    memcpy(shm.p, a, 20);
    memcpy(shm.p + region, b, 20);
    e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_enableInputAndOutputPadding(e, true), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, shm.mem, 0, len_in0), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 1, NULL, shm.mem, region, len_in1), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, shm.mem, 2 * region, len_out), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    float got[5];
    memcpy(got, shm.p + 2 * region, 20);
    CHECK_VAL(nn_count_add_mismatch(a, b, got, 5), 0);
    ANeuralNetworksExecution_free(e);
    nn_shm_destroy(&shm);

    free(a);
    free(b);
    free(o);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* ------------------------------------------------------------------------ */

static void test_float16(void) {
    ck_section("float16 ADD");
    const uint32_t d4[1] = {4};
    ANeuralNetworksModel* m = NULL;
    add_model(&m, nn_type(ANEURALNETWORKS_TENSOR_FLOAT16, 1, d4, 0, 0), nn_type(ANEURALNETWORKS_TENSOR_FLOAT16, 1, d4, 0, 0), nn_type(ANEURALNETWORKS_TENSOR_FLOAT16, 1, d4, 0, 0));
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);
    const float fa[4] = {1.5f, -2.25f, 1024.f, 0.125f}, fb[4] = {2.25f, 0.25f, 1.f, -0.125f};
    uint16_t ha[4], hb[4], ho[4] = {0};
    for (int i = 0; i < 4; i++) {
        ha[i] = nn_f2h(fa[i]);
        hb[i] = nn_f2h(fb[i]);
    }
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, ha, sizeof ha), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, hb, sizeof hb), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, ho, sizeof ho), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    int bad = 0;
    for (int i = 0; i < 4; i++) bad += nn_h2f(ho[i]) != fa[i] + fb[i];
    CHECK_MSG(bad == 0, "float16 ADD: %d wrong (%g %g %g %g)", bad, (double)nn_h2f(ho[0]),
              (double)nn_h2f(ho[1]), (double)nn_h2f(ho[2]), (double)nn_h2f(ho[3]));
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

static void test_quant8(void) {
    ck_section("quant8 ADD with different scales");
    const uint32_t d4[1] = {4};
    ANeuralNetworksModel* m = NULL;
    add_model(&m, nn_type(ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 1, d4, 0.5f, 128), nn_type(ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 1, d4, 0.25f, 100), nn_type(ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 1, d4, 1.0f, 50));
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);
    uint8_t qa[4] = {130, 140, 100, 255}, qb[4] = {104, 0, 120, 255}, qo[4] = {0};
    /* real: {1,6,-14,63.5} + {1,-25,5,38.75} = {2,-19,-9,102.25} -> q = round(x) + 50 */
    const int want[4] = {52, 31, 41, 152};
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, qa, 4), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, qb, 4), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, qo, 4), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    int bad = 0;
    for (int i = 0; i < 4; i++) bad += abs((int)qo[i] - want[i]) > 1;
    CHECK_MSG(bad == 0, "quant8 ADD got {%d,%d,%d,%d} want {52,31,41,152} (+-1)", qo[0], qo[1], qo[2], qo[3]);
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* ------------------------------------------------------------------------ */

static void test_unspecified_dims(void) {
    ck_section("unspecified input dimensions given at setInput");
    const uint32_t unknown[1] = {0};
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(nn_build_binary_f32(ANEURALNETWORKS_ADD, 1, unknown, ANEURALNETWORKS_FUSED_NONE, 1, &m), E_OK);
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);
    for (uint32_t n = 3; n <= 6; n += 3) {
        const uint32_t dn[1] = {n};
        ANeuralNetworksOperandType t = nn_type(F32, 1, dn, 0, 0);
        float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {6, 5, 4, 3, 2, 1}, o[6] = {0};
        ANeuralNetworksExecution* e = NULL;
        CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, &t, a, n * 4), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, &t, b, n * 4), E_OK);
        if (n == 3)
            CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, &t, o, n * 4), E_OK);
        else
            CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, n * 4), E_OK); /* dynamic */
        CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
        CHECK_VAL(nn_count_add_mismatch(a, b, o, n), 0);
        uint32_t rank = 0, dim = 0;
        CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &rank), E_OK);
        CHECK_VAL(rank, 1);
        CHECK_RC(ANeuralNetworksExecution_getOutputOperandDimensions(e, 0, &dim), E_OK);
        CHECK_VAL(dim, n);
        ANeuralNetworksExecution_free(e);
    }
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);

    /* unknown rank (dimensionCount 0) at model level */
    m = NULL;
    CHECK_RC(nn_build_binary_f32(ANEURALNETWORKS_ADD, 0, NULL, ANEURALNETWORKS_FUSED_NONE, 1, &m), E_OK);
    c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);
    const uint32_t d22[2] = {2, 2};
    ANeuralNetworksOperandType t22 = nn_type(F32, 2, d22, 0, 0);
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1}, o[4] = {0};
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, &t22, a, 16), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, &t22, b, 16), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 16), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    CHECK_VAL(nn_count_add_mismatch(a, b, o, 4), 0);
    uint32_t rank = 0, dims[2] = {0, 0};
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &rank), E_OK);
    CHECK_VAL(rank, 2);
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandDimensions(e, 0, dims), E_OK);
    CHECK(dims[0] == 2 && dims[1] == 2);
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

static void test_dynamic_output(void) {
    ck_section("dynamic output shape, OUTPUT_INSUFFICIENT_SIZE");
    /* inputs fully specified [2,3]; output declared [0,0] */
    ANeuralNetworksModel* m = NULL;
    const uint32_t d23[2] = {2, 3}, d00[2] = {0, 0};
    add_model(&m, nn_type(F32, 2, d23, 0, 0), nn_type(F32, 2, d23, 0, 0), nn_type(F32, 2, d00, 0, 0));
    ANeuralNetworksCompilation* c = NULL;
    CHECK_RC(nn_compile(m, &c), E_OK);
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 1, 1, 2, 2, 2}, o[6] = {0};

    /* too small: 2 floats for a [2,3] result */
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, sizeof b), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 8), E_OK);
    uint32_t rank = 0, dims[2] = {0, 0};
    if (CHECK_RC(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE)) {
        CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &rank), ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE);
        CHECK_VAL(rank, 2);
        CHECK_RC(ANeuralNetworksExecution_getOutputOperandDimensions(e, 0, dims),
                 ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE);
        CHECK_MSG(dims[0] == 2 && dims[1] == 3, "reported dims [%u,%u], want [2,3]", dims[0], dims[1]);
    }
    ANeuralNetworksExecution_free(e);

    /* same through startCompute: Event_wait reports it */
    e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, sizeof b), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, 8), E_OK);
    ANeuralNetworksEvent* ev = NULL;
    CHECK_RC(ANeuralNetworksExecution_startCompute(e, &ev), E_OK);
    if (CHECK_RC(ANeuralNetworksEvent_wait(ev), ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE)) {
        rank = 0;
        CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &rank), ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE);
        CHECK_VAL(rank, 2);
    }
    ANeuralNetworksEvent_free(ev);
    ANeuralNetworksExecution_free(e);

    /* retry on a new execution with a big enough buffer */
    float big[8] = {0};
    e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, sizeof b), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, big, sizeof big), E_OK); /* larger is fine */
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    CHECK_VAL(nn_count_add_mismatch(a, b, big, 6), 0);
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &rank), E_OK);
    CHECK_VAL(rank, 2);
    dims[0] = dims[1] = 0;
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandDimensions(e, 0, dims), E_OK);
    CHECK(dims[0] == 2 && dims[1] == 3);
    ANeuralNetworksExecution_free(e);
    /* the exact size */
    e = NULL;
    memset(o, 0, sizeof o);
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, sizeof b), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    CHECK_VAL(nn_count_add_mismatch(a, b, o, 6), 0);
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* ------------------------------------------------------------------------ */

/* SOFTMAX with its optional axis input (default -1) omitted */
static void test_omitted_optional(void) {
    ck_section("omitted optional input (SOFTMAX axis)");
    const uint32_t d23[2] = {2, 3};
    const float beta = 1.0f;
    float x[6] = {1, 2, 3, 0, 0, 0}, o[6];
    double want[6];
    for (int r = 0; r < 2; r++) {
        double s = 0, mx = x[r * 3];
        for (int k = 0; k < 3; k++) mx = fmax(mx, x[r * 3 + k]);
        for (int k = 0; k < 3; k++) s += exp(x[r * 3 + k] - mx);
        for (int k = 0; k < 3; k++) want[r * 3 + k] = exp(x[r * 3 + k] - mx) / s;
    }
    for (int variant = 0; variant < 2; variant++) {
        /* variant 0: axis is a model input omitted with setInput(NULL, 0)
         * variant 1: axis is a constant omitted with setOperandValue(NULL, 0) */
        ANeuralNetworksModel* m = NULL;
        CHECK_RC(ANeuralNetworksModel_create(&m), E_OK);
        CHECK_RC(nn_add_operand(m, F32, 2, d23, 0, 0), E_OK);                       /* 0 x */
        CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_FLOAT32, 0, NULL, 0, 0), E_OK);  /* 1 beta */
        CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0), E_OK);    /* 2 axis */
        CHECK_RC(nn_add_operand(m, F32, 2, d23, 0, 0), E_OK);                       /* 3 out */
        CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 1, &beta, 4), E_OK);
        if (variant == 1) CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 2, NULL, 0), E_OK);
        uint32_t in[3] = {0, 1, 2}, out[1] = {3}, mi[2] = {0, 2};
        REQUIRE_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_SOFTMAX, 3, in, 1, out), E_OK);
        REQUIRE_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, variant == 0 ? 2 : 1, mi, 1, out), E_OK);
        REQUIRE_RC(ANeuralNetworksModel_finish(m), E_OK);
        ANeuralNetworksCompilation* c = NULL;
        REQUIRE_RC(nn_compile(m, &c), E_OK);
        ANeuralNetworksExecution* e = NULL;
        REQUIRE_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, x, sizeof x), E_OK);
        if (variant == 0) CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, NULL, 0), E_OK);
        memset(o, 0, sizeof o);
        CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o), E_OK);
        CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
        int bad = 0;
        for (int i = 0; i < 6; i++) bad += fabs(o[i] - want[i]) > 1e-5;
        CHECK_MSG(bad == 0, "softmax with omitted axis (variant %d): %d wrong elements", variant, bad);
        ANeuralNetworksExecution_free(e);
        ANeuralNetworksCompilation_free(c);
        ANeuralNetworksModel_free(m);
    }
}

/* ------------------------------------------------------------------------ */

/*
 * All first operations in one model:
 *   h = FC(x[2,4], W[3,4], bias[3], NONE)      [2,3]
 *   r = RELU(h)                                [2,3]   (model output 1)
 *   p = MUL(r, s[3], NONE)                     [2,3]
 *   q = ADD(p, y[2,3], NONE)                   [2,3]
 *   z = SOFTMAX(q, beta=0.5)                   [2,3]
 *   out = RESHAPE(z, shape=[6])                [6]     (model output 0)
 */
static void test_all_ops_model(void) {
    ck_section("FC + RELU + MUL + ADD + SOFTMAX + RESHAPE, getSupportedOperationsForDevices");
    const uint32_t d24[2] = {2, 4}, d34[2] = {3, 4}, d3[1] = {3}, d23[2] = {2, 3}, d1[1] = {1}, d6[1] = {6};
    static const float W[12] = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f, 0.7f, -0.8f, 0.9f, 1.0f, -1.1f, 0.2f};
    static const float bias[3] = {0.5f, -1.0f, 0.25f};
    static const float s[3] = {2.0f, -1.0f, 0.5f};
    static const int32_t shape[1] = {6};
    const float beta = 0.5f;
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&m), E_OK);
    CHECK_RC(nn_add_operand(m, F32, 2, d24, 0, 0), E_OK);                      /* 0 x */
    CHECK_RC(nn_add_operand(m, F32, 2, d34, 0, 0), E_OK);                      /* 1 W */
    CHECK_RC(nn_add_operand(m, F32, 1, d3, 0, 0), E_OK);                       /* 2 bias */
    CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0, 0), E_OK);   /* 3 fuse */
    CHECK_RC(nn_add_operand(m, F32, 2, d23, 0, 0), E_OK);                      /* 4 h */
    CHECK_RC(nn_add_operand(m, F32, 2, d23, 0, 0), E_OK);                      /* 5 r */
    CHECK_RC(nn_add_operand(m, F32, 1, d3, 0, 0), E_OK);                       /* 6 s */
    CHECK_RC(nn_add_operand(m, F32, 2, d23, 0, 0), E_OK);                      /* 7 p */
    CHECK_RC(nn_add_operand(m, F32, 2, d23, 0, 0), E_OK);                      /* 8 y */
    CHECK_RC(nn_add_operand(m, F32, 2, d23, 0, 0), E_OK);                      /* 9 q */
    CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_FLOAT32, 0, NULL, 0, 0), E_OK); /* 10 beta */
    CHECK_RC(nn_add_operand(m, F32, 2, d23, 0, 0), E_OK);                      /* 11 z */
    CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_TENSOR_INT32, 1, d1, 0, 0), E_OK); /* 12 shape */
    CHECK_RC(nn_add_operand(m, F32, 1, d6, 0, 0), E_OK);                       /* 13 out */
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 1, W, sizeof W), E_OK);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 2, bias, sizeof bias), E_OK);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 3, &kNone, 4), E_OK);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 6, s, sizeof s), E_OK);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 10, &beta, 4), E_OK);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 12, shape, sizeof shape), E_OK);
    const uint32_t fc_in[4] = {0, 1, 2, 3}, fc_out[1] = {4};
    const uint32_t relu_in[1] = {4}, relu_out[1] = {5};
    const uint32_t mul_in[3] = {5, 6, 3}, mul_out[1] = {7};
    const uint32_t add_in[3] = {7, 8, 3}, add_out[1] = {9};
    const uint32_t sm_in[2] = {9, 10}, sm_out[1] = {11};
    const uint32_t rs_in[2] = {11, 12}, rs_out[1] = {13};
    REQUIRE_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_FULLY_CONNECTED, 4, fc_in, 1, fc_out), E_OK);
    REQUIRE_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_RELU, 1, relu_in, 1, relu_out), E_OK);
    REQUIRE_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_MUL, 3, mul_in, 1, mul_out), E_OK);
    REQUIRE_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, add_in, 1, add_out), E_OK);
    REQUIRE_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_SOFTMAX, 2, sm_in, 1, sm_out), E_OK);
    REQUIRE_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_RESHAPE, 2, rs_in, 1, rs_out), E_OK);
    const uint32_t mi[2] = {0, 8}, mo[2] = {13, 5};
    REQUIRE_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 2, mo), E_OK);
    REQUIRE_RC(ANeuralNetworksModel_finish(m), E_OK);

    bool sup[6] = {false, false, false, false, false, false};
    const ANeuralNetworksDevice* devs[1] = {g_dev};
    CHECK_RC(ANeuralNetworksModel_getSupportedOperationsForDevices(m, devs, 1, sup), E_OK);
    for (int i = 0; i < 6; i++) CHECK_MSG(sup[i], "operation %d reported unsupported", i);

    ANeuralNetworksCompilation* c = NULL;
    REQUIRE_RC(nn_compile_for_device(m, &c), E_OK);
    float x[8] = {1, -2, 3, 0.5f, -1, 0, 2, 4};
    float y[6] = {0.1f, 0.2f, 0.3f, -0.1f, -0.2f, -0.3f};
    float out[6] = {0}, r[6] = {0};
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, x, sizeof x), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, y, sizeof y), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, out, sizeof out), E_OK);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 1, NULL, r, sizeof r), E_OK);
    CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
    /* reference */
    double wr[6], wq[6], wout[6];
    for (int b = 0; b < 2; b++)
        for (int u = 0; u < 3; u++) {
            double h = bias[u];
            for (int k = 0; k < 4; k++) h += (double)x[b * 4 + k] * W[u * 4 + k];
            wr[b * 3 + u] = h > 0 ? h : 0;
            wq[b * 3 + u] = wr[b * 3 + u] * s[u] + y[b * 3 + u];
        }
    for (int b = 0; b < 2; b++) {
        double mx = wq[b * 3], sum = 0;
        for (int k = 1; k < 3; k++) mx = fmax(mx, wq[b * 3 + k]);
        for (int k = 0; k < 3; k++) sum += exp(beta * (wq[b * 3 + k] - mx));
        for (int k = 0; k < 3; k++) wout[b * 3 + k] = exp(beta * (wq[b * 3 + k] - mx)) / sum;
    }
    int bad_r = 0, bad_o = 0;
    for (int i = 0; i < 6; i++) {
        bad_r += fabs(r[i] - wr[i]) > 1e-4 * (1 + fabs(wr[i]));
        bad_o += fabs(out[i] - wout[i]) > 1e-5;
    }
    CHECK_MSG(bad_r == 0, "RELU(FC) output: %d wrong (r[0]=%g want %g)", bad_r, (double)r[0], wr[0]);
    CHECK_MSG(bad_o == 0, "final output: %d wrong (out[0]=%g want %g)", bad_o, (double)out[0], wout[0]);
    uint32_t rank = 0, dim = 0;
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &rank), E_OK);
    CHECK_VAL(rank, 1);
    CHECK_RC(ANeuralNetworksExecution_getOutputOperandDimensions(e, 0, &dim), E_OK);
    CHECK_VAL(dim, 6);
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* RESHAPE whose shape is a model input: output shape known only at execution time */
static void test_reshape_dynamic(void) {
    ck_section("RESHAPE with a runtime shape (dynamic output)");
    const uint32_t d6[1] = {6}, d2[1] = {2}, d00[2] = {0, 0};
    ANeuralNetworksModel* m = NULL;
    CHECK_RC(ANeuralNetworksModel_create(&m), E_OK);
    CHECK_RC(nn_add_operand(m, F32, 1, d6, 0, 0), E_OK);
    CHECK_RC(nn_add_operand(m, ANEURALNETWORKS_TENSOR_INT32, 1, d2, 0, 0), E_OK);
    CHECK_RC(nn_add_operand(m, F32, 2, d00, 0, 0), E_OK);
    const uint32_t in[2] = {0, 1}, out[1] = {2};
    REQUIRE_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_RESHAPE, 2, in, 1, out), E_OK);
    REQUIRE_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, in, 1, out), E_OK);
    REQUIRE_RC(ANeuralNetworksModel_finish(m), E_OK);
    ANeuralNetworksCompilation* c = NULL;
    REQUIRE_RC(nn_compile(m, &c), E_OK);
    const int32_t shapes[3][2] = {{2, 3}, {3, -1}, {6, 1}};
    const uint32_t want[3][2] = {{2, 3}, {3, 2}, {6, 1}};
    float x[6] = {1, 2, 3, 4, 5, 6};
    for (int k = 0; k < 3; k++) {
        float o[6] = {0};
        ANeuralNetworksExecution* e = NULL;
        CHECK_RC(ANeuralNetworksExecution_create(c, &e), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, x, sizeof x), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, shapes[k], 8), E_OK);
        CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o), E_OK);
        CHECK_RC(ANeuralNetworksExecution_compute(e), E_OK);
        CHECK(memcmp(o, x, sizeof x) == 0);
        uint32_t dims[2] = {0, 0};
        CHECK_RC(ANeuralNetworksExecution_getOutputOperandDimensions(e, 0, dims), E_OK);
        CHECK_MSG(dims[0] == want[k][0] && dims[1] == want[k][1], "shape #%d: got [%u,%u] want [%u,%u]", k,
                  dims[0], dims[1], want[k][0], want[k][1]);
        ANeuralNetworksExecution_free(e);
    }
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

int main(void) {
    check_init(50);
    uint32_t n = 0;
    if (!CHECK_RC(ANeuralNetworks_getDeviceCount(&n), E_OK) || n == 0 ||
        !CHECK_RC(ANeuralNetworks_getDevice(0, &g_dev), E_OK)) {
        printf("no device: cannot continue\n");
        return check_summary() | 1;
    }
    test_devices();
    test_add_basic();
    test_async_and_burst();
    test_dependencies();
    test_fence_fd_hygiene();
    test_fd_memory();
    test_device_memory();
    test_timing();
    test_alignment_padding();
    test_float16();
    test_quant8();
    test_unspecified_dims();
    test_dynamic_output();
    test_omitted_optional();
    test_all_ops_model();
    test_reshape_dynamic();
    return check_summary();
}
