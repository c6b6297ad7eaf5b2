/*
 * test_sl.c -- the library as an NNAPI Support Library, loaded the way Android's and TFLite's
 * loaders do (loadNnApiSupportLibrary): dlopen(path), dlsym("ANeuralNetworks_getSLDriverImpl"),
 * check implFeatureLevel, cast to the layout of that level (FL5 for levels 5..7, FL8 for 8),
 * then use nothing but the table: devices and the SL_ queries, a model built, compiled and run
 * (sync, startComputeWithDependencies + Event_wait, burst, inputs from fd memory and outputs to a
 * descriptor memory), caching from fds, the extension functions, and the diagnostics (every
 * callback value checked).  Not linked against the library.
 *
 *   test_sl LIBRARY LEVEL      LEVEL 5..8: the table's level;  1..4: no table (no symbol, or NULL)
 *
 * The one function used outside the table is nnapi_py_last_error (for failure messages) and,
 * for the ASYNC diagnostic mode, ANeuralNetworksExecution_startCompute, which the Support
 * Library layout does not carry (it has startComputeWithDependencies only).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <NeuralNetworksSupportLibraryImpl.h>

#include "check.h"

static const int64_t LEVEL_CODE[9] = {0, 27, 28, 29, 30, 31, 1000006, 1000007, 1000008};
static NnApiSLDriverImplFL5* T;
static NnApiSLDriverImplFL8* T8;     /* level 8 only */
static int64_t want_code;
static void* lib;
static const char* name_of_dev0(void);

/* ---- what the diagnostic callbacks saw ---------------------------------------------------- */
#define MAXREC 64
typedef struct {
    int32_t session; int64_t version; uint8_t hash[32]; char devices[256]; int32_t error;
    int in_class, out_class, mode; uint64_t t_compile, t_runtime, t_driver, t_hardware;
    int caching, control_flow, dynamic; const void* context;
} rec_t;
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static rec_t crec[MAXREC], erec[MAXREC];
static int ncomp, nexec;
static int my_context;

/* The fields both kinds of diagnostic info have, read into r through the SL table; KIND is
   Compilation or Execution (the getters differ only in that word). */
#define RECORD_COMMON(r, KIND, context, i)                                                 \
    do {                                                                                   \
        (r)->context = (context);                                                          \
        (r)->session = T->SL_ANeuralNetworksDiagnostic##KIND##Info_getSessionId(i);        \
        (r)->version = T->SL_ANeuralNetworksDiagnostic##KIND##Info_getNnApiVersion(i);     \
        const uint8_t* h_ = T->SL_ANeuralNetworksDiagnostic##KIND##Info_getModelArchHash(i); \
        if (h_) memcpy((r)->hash, h_, 32);                                                 \
        const char* d_ = T->SL_ANeuralNetworksDiagnostic##KIND##Info_getDeviceIds(i);      \
        snprintf((r)->devices, sizeof (r)->devices, "%s", d_ ? d_ : "(null)");             \
        (r)->error = (int32_t)T->SL_ANeuralNetworksDiagnostic##KIND##Info_getErrorCode(i); \
        (r)->in_class = T->SL_ANeuralNetworksDiagnostic##KIND##Info_getInputDataClass(i);  \
        (r)->out_class = T->SL_ANeuralNetworksDiagnostic##KIND##Info_getOutputDataClass(i); \
        (r)->caching = T->SL_ANeuralNetworksDiagnostic##KIND##Info_isCachingEnabled(i);    \
        (r)->control_flow = T->SL_ANeuralNetworksDiagnostic##KIND##Info_isControlFlowUsed(i); \
        (r)->dynamic = T->SL_ANeuralNetworksDiagnostic##KIND##Info_areDynamicTensorsUsed(i); \
    } while (0)

/* Takes rec_lock (the caller releases it) and the next free record of recs, NULL when all are used. */
static rec_t* lock_next_record(rec_t* recs, int* n) {
    pthread_mutex_lock(&rec_lock);
    return *n < MAXREC ? &recs[(*n)++] : NULL;
}

static void on_compilation(const void* context, const ANeuralNetworksDiagnosticCompilationInfo* i) {
    rec_t* r = lock_next_record(crec, &ncomp);
    if (r) {
        RECORD_COMMON(r, Compilation, context, i);
        r->t_compile = T->SL_ANeuralNetworksDiagnosticCompilationInfo_getCompilationTimeNanos(i);
    }
    pthread_mutex_unlock(&rec_lock);
}

static void on_execution(const void* context, const ANeuralNetworksDiagnosticExecutionInfo* i) {
    rec_t* r = lock_next_record(erec, &nexec);
    if (r) {
        RECORD_COMMON(r, Execution, context, i);
        r->mode = T->SL_ANeuralNetworksDiagnosticExecutionInfo_getExecutionMode(i);
        r->t_runtime = T->SL_ANeuralNetworksDiagnosticExecutionInfo_getRuntimeExecutionTimeNanos(i);
        r->t_driver = T->SL_ANeuralNetworksDiagnosticExecutionInfo_getDriverExecutionTimeNanos(i);
        r->t_hardware = T->SL_ANeuralNetworksDiagnosticExecutionInfo_getHardwareExecutionTimeNanos(i);
    }
    pthread_mutex_unlock(&rec_lock);
}

/* A copy of the latest execution record (the first slot when there is none); *n the count. */
static rec_t last_execution(int* n) {
    pthread_mutex_lock(&rec_lock);
    *n = nexec;
    rec_t r = erec[*n > 0 ? *n - 1 : 0];
    pthread_mutex_unlock(&rec_lock);
    return r;
}

static int nonzero(const uint8_t* h) {
    for (int k = 0; k < 32; k++)
        if (h[k]) return 1;
    return 0;
}

/* ---- a model through the table: out = a + b (float32 [4]) ---------------------------------- */
static const uint32_t D4[1] = {4};

static ANeuralNetworksModel* add_model(void) {
    ANeuralNetworksModel* m = NULL;
    if (T->ANeuralNetworksModel_create(&m) != ANEURALNETWORKS_NO_ERROR) return NULL;
    ANeuralNetworksOperandType t = {ANEURALNETWORKS_TENSOR_FLOAT32, 1, D4, 0.0f, 0};
    ANeuralNetworksOperandType s = {ANEURALNETWORKS_INT32, 0, NULL, 0.0f, 0};
    int32_t none = ANEURALNETWORKS_FUSED_NONE;
    uint32_t in[3] = {0, 1, 2}, out[1] = {3}, io[2] = {0, 1};
    int ok = T->ANeuralNetworksModel_addOperand(m, &t) == 0 && T->ANeuralNetworksModel_addOperand(m, &t) == 0 &&
             T->ANeuralNetworksModel_addOperand(m, &s) == 0 && T->ANeuralNetworksModel_addOperand(m, &t) == 0 &&
             T->ANeuralNetworksModel_setOperandValue(m, 2, &none, sizeof none) == 0 &&
             T->ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out) == 0 &&
             T->ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, io, 1, out) == 0;
    CHECK_MSG(ok, "building ADD through the table: %s", ck_last_error());
    return m;
}

static const float A[4] = {1, 2, 3, 4}, B[4] = {10, 20, 30, 40};

static int sums_ok(const float* y) {
    for (int k = 0; k < 4; k++)
        if (y[k] != A[k] + B[k]) return 0;
    return 1;
}

static ANeuralNetworksDevice* dev0;

static ANeuralNetworksExecution* new_execution(ANeuralNetworksCompilation* c, float* y, int measure) {
    ANeuralNetworksExecution* e = NULL;
    if (!CHECK_RC(T->ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR)) return NULL;
    if (measure) CHECK_RC(T->ANeuralNetworksExecution_setMeasureTiming(e, true), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(T->ANeuralNetworksExecution_setInput(e, 0, NULL, A, sizeof A), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(T->ANeuralNetworksExecution_setInput(e, 1, NULL, B, sizeof B), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(T->ANeuralNetworksExecution_setOutput(e, 0, NULL, y, 4 * sizeof(float)), ANEURALNETWORKS_NO_ERROR);
    return e;
}

/* ---- sections --------------------------------------------------------------------------------- */
static void perf_cb(SL_ANeuralNetworksOperandPerformanceInfo p, void* ctx) {
    int* seen = (int*)ctx;
    seen[0]++;
    if (p.operandType == ANEURALNETWORKS_TENSOR_FLOAT32 && p.performanceInfo.execTime > 0.0f &&
        p.performanceInfo.powerUsage > 0.0f)
        seen[1]++;
}

static void ext_cb(SL_ANeuralNetworksExtensionOperandTypeInformation info, void* ctx) {
    (void)info;
    (*(int*)ctx)++;
}

static void devices(void) {
    ck_section("devices and SL_ device queries");
    uint32_t n = 0;
    REQUIRE_RC(T->ANeuralNetworks_getDeviceCount(&n), ANEURALNETWORKS_NO_ERROR);
    CHECK(n >= 1);
    REQUIRE_RC(T->ANeuralNetworks_getDevice(0, &dev0), ANEURALNETWORKS_NO_ERROR);
    const char* name = NULL;
    CHECK_RC(T->ANeuralNetworksDevice_getName(dev0, &name), ANEURALNETWORKS_NO_ERROR);
    CHECK(name && *name);
    int64_t fl = 0;
    CHECK_RC(T->ANeuralNetworksDevice_getFeatureLevel(dev0, &fl), ANEURALNETWORKS_NO_ERROR);
    CHECK_VAL(fl, want_code);
    CHECK_VAL(T->ANeuralNetworks_getRuntimeFeatureLevel(), want_code);
    CHECK_RC(T->ANeuralNetworksDevice_wait(dev0), ANEURALNETWORKS_NO_ERROR);

    uint32_t nm = 7, nd = 7;
    CHECK_RC(T->SL_ANeuralNetworksDevice_getNumberOfCacheFilesNeeded(dev0, &nm, &nd), ANEURALNETWORKS_NO_ERROR);
    CHECK_VAL(nm, 1);
    CHECK_VAL(nd, 1);
    nm = nd = 7;
    CHECK_RC(T->SL_ANeuralNetworksDevice_getNumberOfCacheFilesNeeded(NULL, &nm, &nd), ANEURALNETWORKS_UNEXPECTED_NULL);
    CHECK(nm == 0 && nd == 0);
    CHECK_RC(T->SL_ANeuralNetworksDevice_getNumberOfCacheFilesNeeded(dev0, NULL, &nd), ANEURALNETWORKS_UNEXPECTED_NULL);
    CHECK_RC(T->SL_ANeuralNetworksDevice_getNumberOfCacheFilesNeeded((const ANeuralNetworksDevice*)(uintptr_t)0x1230,
                                                                     &nm, &nd), ANEURALNETWORKS_BAD_DATA);
    CHECK(strlen(ck_last_error()) > 0);

    for (int32_t kind = 0; kind < 4; kind++) {
        SL_ANeuralNetworksPerformanceInfo p = {0.0f, 0.0f};
        CHECK_RC(T->SL_ANeuralNetworksDevice_getPerformanceInfo(dev0, kind, &p), ANEURALNETWORKS_NO_ERROR);
        CHECK_MSG(p.execTime > 0.0f && p.powerUsage > 0.0f, "kind %d: %g %g", kind, p.execTime, p.powerUsage);
    }
    SL_ANeuralNetworksPerformanceInfo p = {5.0f, 5.0f};
    CHECK_RC(T->SL_ANeuralNetworksDevice_getPerformanceInfo(dev0, 4, &p), ANEURALNETWORKS_BAD_DATA);
    CHECK(p.execTime == 0.0f && p.powerUsage == 0.0f);
    CHECK_RC(T->SL_ANeuralNetworksDevice_getPerformanceInfo(dev0, 0, NULL), ANEURALNETWORKS_UNEXPECTED_NULL);

    int seen[2] = {0, 0};
    CHECK_RC(T->SL_ANeuralNetworksDevice_forEachOperandPerformanceInfo(dev0, seen, perf_cb), ANEURALNETWORKS_NO_ERROR);
    CHECK_MSG(seen[0] >= 15 && seen[1] == 1, "%d operand types, float32 seen %d", seen[0], seen[1]);
    CHECK_RC(T->SL_ANeuralNetworksDevice_forEachOperandPerformanceInfo(dev0, NULL, perf_cb),
             ANEURALNETWORKS_UNEXPECTED_NULL);
    CHECK_RC(T->SL_ANeuralNetworksDevice_forEachOperandPerformanceInfo(dev0, seen, NULL),
             ANEURALNETWORKS_UNEXPECTED_NULL);

    uint32_t count = 9;
    CHECK_RC(T->SL_ANeuralNetworksDevice_getVendorExtensionCount(dev0, &count), ANEURALNETWORKS_NO_ERROR);
    CHECK_VAL(count, 0);
    CHECK_RC(T->SL_ANeuralNetworksDevice_getVendorExtensionCount(dev0, NULL), ANEURALNETWORKS_UNEXPECTED_NULL);
    const char* ext = "x";
    CHECK_RC(T->SL_ANeuralNetworksDevice_getVendorExtensionName(dev0, 0, &ext), ANEURALNETWORKS_BAD_DATA);
    CHECK(ext == NULL);
    int calls = 0;
    CHECK_RC(T->SL_ANeuralNetworksDevice_forEachVendorExtensionOperandTypeInformation(dev0, 0, &calls, ext_cb),
             ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(T->SL_ANeuralNetworksDevice_forEachVendorExtensionOperandTypeInformation(dev0, 0, NULL, ext_cb),
             ANEURALNETWORKS_UNEXPECTED_NULL);
    CHECK_VAL(calls, 0);
    bool supported = true;
    CHECK_RC(T->ANeuralNetworksDevice_getExtensionSupport(dev0, "com.example.ext", &supported),
             ANEURALNETWORKS_NO_ERROR);
    CHECK(!supported);
    CHECK_RC(T->ANeuralNetworksDevice_getExtensionSupport(dev0, NULL, &supported), ANEURALNETWORKS_UNEXPECTED_NULL);
}

static void extensions(void) {
    ck_section("extension functions of the table");
    ANeuralNetworksModel* m = add_model();
    if (!m) return;
    int32_t type = 0;
    CHECK_RC(T->ANeuralNetworksModel_getExtensionOperandType(m, "com.example.ext", 1, &type), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(T->ANeuralNetworksModel_getExtensionOperationType(m, "com.example.ext", 1, &type),
             ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(T->ANeuralNetworksModel_getExtensionOperandType(m, NULL, 1, &type), ANEURALNETWORKS_UNEXPECTED_NULL);
    CHECK_RC(T->ANeuralNetworksModel_setOperandExtensionData(m, 0, NULL, 0), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(T->ANeuralNetworksModel_setOperandExtensionData(m, 99, NULL, 0), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(T->ANeuralNetworksModel_setOperandExtensionData(m, 0, NULL, 4), ANEURALNETWORKS_UNEXPECTED_NULL);
    REQUIRE_RC(T->ANeuralNetworksModel_finish(m), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(T->ANeuralNetworksModel_setOperandExtensionData(m, 0, NULL, 0), ANEURALNETWORKS_BAD_STATE);
    if (T8) {
        const ANeuralNetworksDevice* devs[1] = {dev0};
        ANeuralNetworksCompilation* c = NULL;
        REQUIRE_RC(T->ANeuralNetworksCompilation_createForDevices(m, devs, 1, &c), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(T8->ANeuralNetworksCompilation_addExtensionAttribute(c, "com.example.ext", 1, NULL, 0),
                 ANEURALNETWORKS_BAD_DATA);
        CHECK_RC(T8->ANeuralNetworksCompilation_addExtensionAttribute(c, NULL, 1, NULL, 0),
                 ANEURALNETWORKS_UNEXPECTED_NULL);
        CHECK_RC(T->ANeuralNetworksCompilation_finish(c), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(T8->ANeuralNetworksCompilation_addExtensionAttribute(c, "com.example.ext", 1, NULL, 0),
                 ANEURALNETWORKS_BAD_STATE);
        ANeuralNetworksExecution* e = NULL;
        REQUIRE_RC(T->ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR);
        uint8_t data[4] = {1, 2, 3, 4};
        CHECK_RC(T8->ANeuralNetworksExecution_addExtensionAttribute(e, "com.example.ext", 1, data, 4),
                 ANEURALNETWORKS_BAD_DATA);
        CHECK_RC(T8->ANeuralNetworksExecution_addExtensionAttribute(NULL, "com.example.ext", 1, data, 4),
                 ANEURALNETWORKS_UNEXPECTED_NULL);
        CHECK_RC(T8->ANeuralNetworksExecution_addExtensionAttribute(
                     (ANeuralNetworksExecution*)(uintptr_t)0x5550, "com.example.ext", 1, data, 4),
                 ANEURALNETWORKS_BAD_DATA);
        T->ANeuralNetworksExecution_free(e);
        T->ANeuralNetworksCompilation_free(c);
    }
    T->ANeuralNetworksModel_free(m);
}

static int memfd_with(const void* data, size_t n) {
    int fd = memfd_create("test_sl", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)n) != 0) return -1;
    if (data && pwrite(fd, data, n, 0) != (ssize_t)n) return -1;
    return fd;
}

static void caching_from_fds(ANeuralNetworksModel* m) {
    ck_section("SL_ANeuralNetworksCompilation_setCachingFromFds");
    const ANeuralNetworksDevice* devs[1] = {dev0};
    ANeuralNetworksCompilation* c = NULL;
    REQUIRE_RC(T->ANeuralNetworksCompilation_createForDevices(m, devs, 1, &c), ANEURALNETWORKS_NO_ERROR);
    int mfd = memfd_with(NULL, 0), dfd = memfd_with(NULL, 0);
    uint8_t token[ANEURALNETWORKS_BYTE_SIZE_OF_CACHE_TOKEN];
    memset(token, 7, sizeof token);
    int bad = -1;
    CHECK_RC(T->SL_ANeuralNetworksCompilation_setCachingFromFds(c, &mfd, 1, &dfd, 1, NULL), ANEURALNETWORKS_UNEXPECTED_NULL);
    CHECK_RC(T->SL_ANeuralNetworksCompilation_setCachingFromFds(c, NULL, 1, &dfd, 1, token), ANEURALNETWORKS_UNEXPECTED_NULL);
    CHECK_RC(T->SL_ANeuralNetworksCompilation_setCachingFromFds(NULL, &mfd, 1, &dfd, 1, token), ANEURALNETWORKS_UNEXPECTED_NULL);
    CHECK_RC(T->SL_ANeuralNetworksCompilation_setCachingFromFds(c, &bad, 1, &dfd, 1, token), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(T->SL_ANeuralNetworksCompilation_setCachingFromFds(c, &mfd, 1, &dfd, 1, token), ANEURALNETWORKS_NO_ERROR);
    close(mfd);     /* duplicated by the library */
    close(dfd);
    int before = ncomp;
    CHECK_RC(T->ANeuralNetworksCompilation_finish(c), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(T->SL_ANeuralNetworksCompilation_setCachingFromFds(c, NULL, 0, NULL, 0, token), ANEURALNETWORKS_BAD_STATE);
    if (CHECK_VAL(ncomp, before + 1)) CHECK_VAL(crec[before].caching, 1);
    float y[4] = {0};
    ANeuralNetworksExecution* e = new_execution(c, y, 0);
    if (e) {
        CHECK_RC(T->ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_NO_ERROR);
        CHECK(sums_ok(y));
        if (CHECK(nexec > 0)) CHECK_VAL(erec[nexec - 1].caching, 1);
        T->ANeuralNetworksExecution_free(e);
    }
    T->ANeuralNetworksCompilation_free(c);
}

static void run_model(void) {
    ck_section("a model run only through the table, with diagnostics");
    T->SL_ANeuralNetworksDiagnostic_registerCallbacks(on_compilation, on_execution, &my_context);
    ANeuralNetworksModel* m = add_model();
    if (!m) return;
    REQUIRE_RC(T->ANeuralNetworksModel_finish(m), ANEURALNETWORKS_NO_ERROR);
    const ANeuralNetworksDevice* devs[1] = {dev0};
    ANeuralNetworksCompilation* c = NULL;
    REQUIRE_RC(T->ANeuralNetworksCompilation_createForDevices(m, devs, 1, &c), ANEURALNETWORKS_NO_ERROR);
    CHECK_VAL(ncomp, 0);
    REQUIRE_RC(T->ANeuralNetworksCompilation_finish(c), ANEURALNETWORKS_NO_ERROR);
    if (!CHECK_VAL(ncomp, 1)) return;
    rec_t* cr = &crec[0];
    CHECK(cr->context == &my_context);
    CHECK_RC(cr->error, ANEURALNETWORKS_NO_ERROR);
    CHECK_VAL(cr->version, want_code);
    CHECK(cr->session != 0);
    CHECK(nonzero(cr->hash));
    CHECK_MSG(strstr(cr->devices, name_of_dev0()) != NULL && strchr(cr->devices, '=') != NULL, "%s", cr->devices);
    CHECK_VAL(cr->in_class, ANNDIAG_DATA_CLASS_FLOAT32);
    CHECK_VAL(cr->out_class, ANNDIAG_DATA_CLASS_FLOAT32);
    CHECK(cr->t_compile > 0 && cr->t_compile != UINT64_MAX);
    CHECK(!cr->caching && !cr->control_flow && !cr->dynamic);

    /* a second finish fails (BAD_STATE) and is reported, as Android reports it */
    CHECK_RC(T->ANeuralNetworksCompilation_finish(c), ANEURALNETWORKS_BAD_STATE);
    if (CHECK_VAL(ncomp, 2)) {
        CHECK_RC(crec[1].error, ANEURALNETWORKS_BAD_STATE);
        CHECK_VAL(crec[1].session, cr->session);
    }

    /* sync, with timing */
    float y[4] = {0};
    ANeuralNetworksExecution* e = new_execution(c, y, 1);
    if (e) {
        CHECK_RC(T->ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_NO_ERROR);
        CHECK(sums_ok(y));
        uint64_t on_hw = 0;
        CHECK_RC(T->ANeuralNetworksExecution_getDuration(e, ANEURALNETWORKS_DURATION_ON_HARDWARE, &on_hw),
                 ANEURALNETWORKS_NO_ERROR);
        if (CHECK_VAL(nexec, 1)) {
            rec_t* r = &erec[0];
            CHECK(r->context == &my_context);
            CHECK_VAL(r->mode, ANNDIAG_EXECUTION_MODE_SYNC);
            CHECK_RC(r->error, ANEURALNETWORKS_NO_ERROR);
            CHECK_VAL(r->session, cr->session);
            CHECK(memcmp(r->hash, cr->hash, 32) == 0);
            CHECK(strcmp(r->devices, cr->devices) == 0);
            CHECK_VAL(r->version, want_code);
            CHECK_VAL(r->in_class, ANNDIAG_DATA_CLASS_FLOAT32);
            CHECK_VAL(r->out_class, ANNDIAG_DATA_CLASS_FLOAT32);
            CHECK(r->t_runtime > 0 && r->t_runtime != UINT64_MAX);
            CHECK_VAL(r->t_hardware, on_hw);
            CHECK(r->t_driver > 0 && r->t_driver != UINT64_MAX);
            CHECK(r->t_runtime >= r->t_driver);
        }
        T->ANeuralNetworksExecution_free(e);
    }

    /* without timing: driver and hardware times unknown (UINT64_MAX), as Android reports them */
    ANeuralNetworksBurst* burst = NULL;
    REQUIRE_RC(T->ANeuralNetworksBurst_create(c, &burst), ANEURALNETWORKS_NO_ERROR);
    memset(y, 0, sizeof y);
    e = new_execution(c, y, 0);
    if (e) {
        CHECK_RC(T->ANeuralNetworksExecution_burstCompute(e, burst), ANEURALNETWORKS_NO_ERROR);
        CHECK(sums_ok(y));
        if (CHECK_VAL(nexec, 2)) {
            CHECK_VAL(erec[1].mode, ANNDIAG_EXECUTION_MODE_BURST);
            CHECK(erec[1].t_runtime > 0 && erec[1].t_runtime != UINT64_MAX);
            CHECK(erec[1].t_driver == UINT64_MAX && erec[1].t_hardware == UINT64_MAX);
            CHECK_VAL(erec[1].session, cr->session);
        }
        T->ANeuralNetworksExecution_free(e);
    }
    T->ANeuralNetworksBurst_free(burst);

    /* startComputeWithDependencies + Event_wait; the event is a pollable fence */
    memset(y, 0, sizeof y);
    e = new_execution(c, y, 0);
    if (e) {
        ANeuralNetworksEvent* ev = NULL;
        CHECK_RC(T->ANeuralNetworksExecution_startComputeWithDependencies(e, NULL, 0, 0, &ev), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(T->ANeuralNetworksEvent_wait(ev), ANEURALNETWORKS_NO_ERROR);
        CHECK(sums_ok(y));
        int fd = -1;
        CHECK_RC(T->ANeuralNetworksEvent_getSyncFenceFd(ev, &fd), ANEURALNETWORKS_NO_ERROR);
        if (fd >= 0) close(fd);
        int n;
        rec_t r = last_execution(&n);
        if (CHECK_VAL(n, 3)) {
            CHECK_VAL(r.mode, ANNDIAG_EXECUTION_MODE_ASYNC_WITH_DEPS);
            CHECK_VAL(r.t_runtime, UINT64_MAX);      /* Android reports no runtime time for this mode */
            CHECK_RC(r.error, ANEURALNETWORKS_NO_ERROR);
            CHECK_VAL(r.session, cr->session);
        }
        T->ANeuralNetworksEvent_free(ev);
        T->ANeuralNetworksExecution_free(e);
    }

    /* startCompute (not in the table: the one function taken from the library itself) */
    int (*start)(ANeuralNetworksExecution*, ANeuralNetworksEvent**) =
        (int (*)(ANeuralNetworksExecution*, ANeuralNetworksEvent**))dlsym(lib, "ANeuralNetworksExecution_startCompute");
    memset(y, 0, sizeof y);
    e = start ? new_execution(c, y, 0) : NULL;
    if (e) {
        ANeuralNetworksEvent* ev = NULL;
        CHECK_RC(start(e, &ev), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(T->ANeuralNetworksEvent_wait(ev), ANEURALNETWORKS_NO_ERROR);
        CHECK(sums_ok(y));
        int n;
        rec_t r = last_execution(&n);
        if (CHECK_VAL(n, 4)) {
            CHECK_VAL(r.mode, ANNDIAG_EXECUTION_MODE_ASYNC);
            CHECK(r.t_runtime > 0 && r.t_runtime != UINT64_MAX);
        }
        T->ANeuralNetworksEvent_free(ev);
        T->ANeuralNetworksExecution_free(e);
    }

    /* inputs from fd memory, the output to a descriptor memory, copied back to fd memory */
    ck_section("memory from fd and from a descriptor, through the table");
    int base = nexec;
    float ab[8];
    memcpy(ab, A, sizeof A);
    memcpy(ab + 4, B, sizeof B);
    int fd = memfd_with(ab, sizeof ab), ofd = memfd_with(NULL, 16);
    ANeuralNetworksMemory *in_mem = NULL, *out_fd_mem = NULL, *out_desc_mem = NULL;
    ANeuralNetworksMemoryDesc* desc = NULL;
    REQUIRE_RC(T->ANeuralNetworksMemory_createFromFd(sizeof ab, PROT_READ | PROT_WRITE, fd, 0, &in_mem),
               ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(T->ANeuralNetworksMemory_createFromFd(16, PROT_READ | PROT_WRITE, ofd, 0, &out_fd_mem),
               ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(T->ANeuralNetworksMemoryDesc_create(&desc), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(T->ANeuralNetworksMemoryDesc_addOutputRole(desc, c, 0, 1.0f), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(T->ANeuralNetworksMemoryDesc_finish(desc), ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(T->ANeuralNetworksMemory_createFromDesc(desc, &out_desc_mem), ANEURALNETWORKS_NO_ERROR);
    T->ANeuralNetworksMemoryDesc_free(desc);
    e = NULL;
    REQUIRE_RC(T->ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(T->ANeuralNetworksExecution_setInputFromMemory(e, 0, NULL, in_mem, 0, 16), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(T->ANeuralNetworksExecution_setInputFromMemory(e, 1, NULL, in_mem, 16, 16), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(T->ANeuralNetworksExecution_setOutputFromMemory(e, 0, NULL, out_desc_mem, 0, 0), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(T->ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(T->ANeuralNetworksMemory_copy(out_desc_mem, out_fd_mem), ANEURALNETWORKS_NO_ERROR);
    float got[4] = {0};
    CHECK(pread(ofd, got, sizeof got, 0) == (ssize_t)sizeof got);
    CHECK(sums_ok(got));
    CHECK_VAL(nexec, base + 1);
    T->ANeuralNetworksExecution_free(e);
    T->ANeuralNetworksMemory_free(in_mem);
    T->ANeuralNetworksMemory_free(out_fd_mem);
    T->ANeuralNetworksMemory_free(out_desc_mem);
    close(fd);
    close(ofd);

    caching_from_fds(m);

    /* a second compilation: its own session */
    ck_section("sessions, a failing compilation, unregistering");
    ANeuralNetworksCompilation* c2 = NULL;
    CHECK_RC(T->ANeuralNetworksCompilation_createForDevices(m, devs, 1, &c2), ANEURALNETWORKS_NO_ERROR);
    base = ncomp;
    CHECK_RC(T->ANeuralNetworksCompilation_finish(c2), ANEURALNETWORKS_NO_ERROR);
    if (CHECK_VAL(ncomp, base + 1)) {
        CHECK(crec[base].session != cr->session);
        CHECK(memcmp(crec[base].hash, cr->hash, 32) == 0);      /* same model, same architecture hash */
    }
    T->ANeuralNetworksCompilation_free(c2);

    /* OEM_OPERATION: accepted in the model, supported by no device: Compilation_finish fails */
    ANeuralNetworksModel* om = NULL;
    REQUIRE_RC(T->ANeuralNetworksModel_create(&om), ANEURALNETWORKS_NO_ERROR);
    ANeuralNetworksOperandType ot = {ANEURALNETWORKS_TENSOR_OEM_BYTE, 1, D4, 0.0f, 0};
    uint32_t oin[1] = {0}, oout[1] = {1};
    int ok = T->ANeuralNetworksModel_addOperand(om, &ot) == 0 && T->ANeuralNetworksModel_addOperand(om, &ot) == 0 &&
             T->ANeuralNetworksModel_addOperation(om, ANEURALNETWORKS_OEM_OPERATION, 1, oin, 1, oout) == 0 &&
             T->ANeuralNetworksModel_identifyInputsAndOutputs(om, 1, oin, 1, oout) == 0 &&
             T->ANeuralNetworksModel_finish(om) == 0;
    if (ok) {
        ANeuralNetworksCompilation* oc = NULL;
        CHECK_RC(T->ANeuralNetworksCompilation_createForDevices(om, devs, 1, &oc), ANEURALNETWORKS_NO_ERROR);
        base = ncomp;
        CHECK_RC(T->ANeuralNetworksCompilation_finish(oc), ANEURALNETWORKS_BAD_DATA);
        if (CHECK_VAL(ncomp, base + 1)) {
            CHECK_RC(crec[base].error, ANEURALNETWORKS_BAD_DATA);
            CHECK_VAL(crec[base].in_class, ANNDIAG_DATA_CLASS_OTHER);
            CHECK(crec[base].t_compile > 0);
            CHECK(memcmp(crec[base].hash, cr->hash, 32) != 0);
        }
        T->ANeuralNetworksCompilation_free(oc);
    }
    T->ANeuralNetworksModel_free(om);

    /* unregistered: nothing more is reported */
    T->SL_ANeuralNetworksDiagnostic_registerCallbacks(NULL, NULL, NULL);
    base = nexec;
    int cbase = ncomp;
    memset(y, 0, sizeof y);
    e = new_execution(c, y, 0);
    if (e) {
        CHECK_RC(T->ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_NO_ERROR);
        T->ANeuralNetworksExecution_free(e);
    }
    CHECK_RC(T->ANeuralNetworksCompilation_createForDevices(m, devs, 1, &c2), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(T->ANeuralNetworksCompilation_finish(c2), ANEURALNETWORKS_NO_ERROR);
    T->ANeuralNetworksCompilation_free(c2);
    CHECK_VAL(nexec, base);
    CHECK_VAL(ncomp, cbase);

    /* the getters never crash on NULL */
    CHECK_VAL(T->SL_ANeuralNetworksDiagnosticExecutionInfo_getSessionId(NULL), 0);
    CHECK(T->SL_ANeuralNetworksDiagnosticCompilationInfo_getDeviceIds(NULL) == NULL);

    T->ANeuralNetworksCompilation_free(c);
    T->ANeuralNetworksModel_free(m);
}

int main(int argc, char** argv) {
    check_init(50);
    if (argc != 3) {
        printf("usage: test_sl LIBRARY LEVEL\n");
        return 2;
    }
    int level = atoi(argv[2]);
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!CHECK_MSG(lib != NULL, "dlopen: %s", dlerror())) return check_summary();
    ck_last_error_fn = (const char* (*)(void))dlsym(lib, "nnapi_py_last_error");
    NnApiSLDriverImpl* (*get)(void) = (NnApiSLDriverImpl * (*)(void)) dlsym(lib, "ANeuralNetworks_getSLDriverImpl");
    ck_section("the table");
    if (level < 5) {
        /* a feature-level-N library (N < 5) has no such symbol; the default library lowered
           below level 5 by NNAPI_PY_FEATURE_LEVEL has it, and it returns NULL */
        CHECK_MSG(get == NULL || get() == NULL, "a table at feature level %d", level);
        printf("no Support Library table at feature level %d (%s)\n", level, get ? "NULL table" : "no symbol");
        return check_summary();
    }
    if (!CHECK(get != NULL)) return check_summary();
    NnApiSLDriverImpl* impl = get();
    if (!CHECK(impl != NULL)) return check_summary();
    want_code = LEVEL_CODE[level];
    CHECK_VAL(impl->implFeatureLevel, want_code);
    CHECK(get() == impl);
    /* the loader's cast, by implFeatureLevel */
    if (impl->implFeatureLevel < ANEURALNETWORKS_FEATURE_LEVEL_5) return check_summary();
    T = (NnApiSLDriverImplFL5*)impl;
    if (impl->implFeatureLevel >= ANEURALNETWORKS_FEATURE_LEVEL_8) T8 = (NnApiSLDriverImplFL8*)impl;
    void* const* slot = (void* const*)(const void*)&T->ANeuralNetworksBurst_create;
    size_t nslots = (sizeof(NnApiSLDriverImplFL5) - sizeof(NnApiSLDriverImpl)) / sizeof(void*);
    size_t filled = 0;
    for (size_t k = 0; k < nslots; k++) filled += slot[k] != NULL;
    CHECK_VAL(filled, nslots);
    CHECK_VAL(nslots, 104);
    if (T8) CHECK(T8->ANeuralNetworksCompilation_addExtensionAttribute && T8->ANeuralNetworksExecution_addExtensionAttribute);
    /* the ANeuralNetworks* slots are the library's own entry points */
    CHECK((void*)T->ANeuralNetworksModel_create == dlsym(lib, "ANeuralNetworksModel_create"));
    CHECK((void*)T->ANeuralNetworksExecution_compute == dlsym(lib, "ANeuralNetworksExecution_compute"));
    CHECK((void*)T->ANeuralNetworks_getRuntimeFeatureLevel == dlsym(lib, "ANeuralNetworks_getRuntimeFeatureLevel"));
    CHECK(dlsym(lib, "SL_ANeuralNetworksDevice_getPerformanceInfo") == NULL);     /* only in the table */
    printf("implFeatureLevel %lld, %zu slots%s\n", (long long)impl->implFeatureLevel, nslots + (T8 ? 2 : 0),
           T8 ? " (FL8 layout)" : " (FL5 layout)");

    devices();
    if (dev0) {
        extensions();
        run_model();
    }
    return check_summary();
}

static const char* name_of_dev0(void) {
    const char* name = "?";
    if (dev0) T->ANeuralNetworksDevice_getName(dev0, &name);
    return name;
}
