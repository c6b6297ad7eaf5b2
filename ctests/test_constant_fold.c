/*
 * test_constant_fold.c -- constant work once (issue 41) as a C client sees it: DEQUANTIZE of a
 * constant int8 (TENSOR_QUANT8_SYMM) weight matrix, then FULLY_CONNECTED -- the form TFLite's NNAPI
 * delegate gives a hybrid layer (int8 weights, float activations).
 *
 *   1. A child process, forked before the library starts, runs with NNAPI_PY_PROFILE=<file>: the
 *      folded model RUNS_FOLDED times, then the same layer with the int8 weights as a model input
 *      (nothing to fold) RUNS_INPUT times.  Its profile, written when it exits, must count
 *      FULLY_CONNECTED RUNS_FOLDED + RUNS_INPUT runs and DEQUANTIZE only RUNS_INPUT (the unfolded
 *      model's): the constant's DEQUANTIZE ran at compilation, never per run; and the report notes
 *      "constant folding: 1 operation computed at compilation (DEQUANTIZE 1)".
 *   2. Here: the folded model's results equal the unfolded model's bit for bit (same weights given
 *      as an input), and a float reference within rounding, on several inputs; a model whose output
 *      is the DEQUANTIZE of a constant writes that output on every computation.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <android/NeuralNetworks.h>

#include "check.h"

#define K 96            /* inputs */
#define N 64            /* outputs */
#define B 2             /* batch */
#define RUNS_FOLDED 7
#define RUNS_INPUT 3
#define SCALE 0.0125f

static int8_t W[N * K];
static float BIAS[N];

static void make_weights(void) {
    unsigned s = 12345u;
    for (int i = 0; i < N * K; i++) {
        s = s * 1103515245u + 12345u;
        W[i] = (int8_t)((int)((s >> 16) % 255u) - 127);
    }
    for (int i = 0; i < N; i++) BIAS[i] = 0.25f * (float)(i % 7) - 0.5f;
}

static void make_input(float* x, int seed) {
    for (int i = 0; i < B * K; i++) x[i] = sinf(0.37f * (float)(i + 1) * (float)(seed + 1));
}

/* DEQUANTIZE(w) -> FULLY_CONNECTED(x, w, bias); w a constant (weights_input 0) or the model's
   input 1.  0 on success. */
static int build(int weights_input, ANeuralNetworksModel** out) {
    const uint32_t dx[2] = {B, K}, dw[2] = {N, K}, db[1] = {N}, dy[2] = {B, N};
    ANeuralNetworksOperandType tx = {.type = ANEURALNETWORKS_TENSOR_FLOAT32, .dimensionCount = 2, .dimensions = dx};
    ANeuralNetworksOperandType tq = {.type = ANEURALNETWORKS_TENSOR_QUANT8_SYMM, .dimensionCount = 2, .dimensions = dw,
                                     .scale = SCALE};
    ANeuralNetworksOperandType tf = {.type = ANEURALNETWORKS_TENSOR_FLOAT32, .dimensionCount = 2, .dimensions = dw};
    ANeuralNetworksOperandType tb = {.type = ANEURALNETWORKS_TENSOR_FLOAT32, .dimensionCount = 1, .dimensions = db};
    ANeuralNetworksOperandType ti = {.type = ANEURALNETWORKS_INT32};
    ANeuralNetworksOperandType ty = {.type = ANEURALNETWORKS_TENSOR_FLOAT32, .dimensionCount = 2, .dimensions = dy};
    const int32_t none = ANEURALNETWORKS_FUSED_NONE;
    ANeuralNetworksModel* m = NULL;
    int rc = ANeuralNetworksModel_create(&m);
    if (rc) return rc;
    if ((rc = ANeuralNetworksModel_addOperand(m, &tx)) || (rc = ANeuralNetworksModel_addOperand(m, &tq)) ||
        (rc = ANeuralNetworksModel_addOperand(m, &tf)) || (rc = ANeuralNetworksModel_addOperand(m, &tb)) ||
        (rc = ANeuralNetworksModel_addOperand(m, &ti)) || (rc = ANeuralNetworksModel_addOperand(m, &ty)))
        goto fail;
    if (!weights_input && (rc = ANeuralNetworksModel_setOperandValue(m, 1, W, sizeof W))) goto fail;
    if ((rc = ANeuralNetworksModel_setOperandValue(m, 3, BIAS, sizeof BIAS)) ||
        (rc = ANeuralNetworksModel_setOperandValue(m, 4, &none, sizeof none)))
        goto fail;
    const uint32_t dq_in[1] = {1}, dq_out[1] = {2}, fc_in[4] = {0, 2, 3, 4}, fc_out[1] = {5};
    if ((rc = ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_DEQUANTIZE, 1, dq_in, 1, dq_out)) ||
        (rc = ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_FULLY_CONNECTED, 4, fc_in, 1, fc_out)))
        goto fail;
    const uint32_t ins[2] = {0, 1};
    if ((rc = ANeuralNetworksModel_identifyInputsAndOutputs(m, weights_input ? 2 : 1, ins, 1, fc_out)) ||
        (rc = ANeuralNetworksModel_finish(m)))
        goto fail;
    *out = m;
    return 0;
fail:
    ANeuralNetworksModel_free(m);
    return rc;
}

static int compile(ANeuralNetworksModel* m, ANeuralNetworksCompilation** c) {
    int rc = ANeuralNetworksCompilation_create(m, c);
    if (rc) return rc;
    rc = ANeuralNetworksCompilation_finish(*c);
    if (rc) ANeuralNetworksCompilation_free(*c);
    return rc;
}

/* One computation: y = layer(x) (weights given as input 1 when weights_input). */
static int run(ANeuralNetworksCompilation* c, int weights_input, const float* x, float* y) {
    ANeuralNetworksExecution* e = NULL;
    int rc = ANeuralNetworksExecution_create(c, &e);
    if (rc) return rc;
    if (!(rc = ANeuralNetworksExecution_setInput(e, 0, NULL, x, sizeof(float) * B * K)) &&
        !(rc = weights_input ? ANeuralNetworksExecution_setInput(e, 1, NULL, W, sizeof W) : 0) &&
        !(rc = ANeuralNetworksExecution_setOutput(e, 0, NULL, y, sizeof(float) * B * N)))
        rc = ANeuralNetworksExecution_compute(e);
    ANeuralNetworksExecution_free(e);
    return rc;
}

/* ---- 1. the child: NNAPI_PY_PROFILE counts the kernels that run ---------------------------------- */
static int child(const char* profile_path) {
    setenv("NNAPI_PY_PROFILE", profile_path, 1);
    ANeuralNetworksModel *folded = NULL, *plain = NULL;
    ANeuralNetworksCompilation *cf = NULL, *cp = NULL;
    float x[B * K], y[B * N];
    make_input(x, 0);
    if (build(0, &folded) || build(1, &plain) || compile(folded, &cf) || compile(plain, &cp)) {
        printf("child: building or compiling failed\n");
        return 1;
    }
    for (int i = 0; i < RUNS_FOLDED; i++)
        if (run(cf, 0, x, y)) return printf("child: folded run %d failed\n", i), 1;
    for (int i = 0; i < RUNS_INPUT; i++)
        if (run(cp, 1, x, y)) return printf("child: unfolded run %d failed\n", i), 1;
    ANeuralNetworksCompilation_free(cf);
    ANeuralNetworksCompilation_free(cp);
    ANeuralNetworksModel_free(folded);
    ANeuralNetworksModel_free(plain);
    return 0;       /* exit: the library writes the profile */
}

/* runs of `op` in the profile's first table (-1: no line) */
static long runs_of(const char* text, const char* op) {
    size_t n = strlen(op);
    for (const char* p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, op, n) == 0 && p[n] == ' ') {
            long runs = -1;
            if (sscanf(p + n, " %ld", &runs) == 1) return runs;
        }
        if (strncmp(p, "all kernels", 11) == 0) break;     /* the end of the per-operation table */
    }
    return -1;
}

static void profile_section(void) {
    ck_section("DEQUANTIZE of a constant: not run per computation (NNAPI_PY_PROFILE)");
    char path[] = "/tmp/nnapi_py_fold_XXXXXX";
    int fd = mkstemp(path);
    if (!CHECK(fd >= 0)) return;
    close(fd);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = child(path);
        fflush(stdout);
        exit(rc);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    static char text[1 << 16];
    FILE* f = fopen(path, "r");
    size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[got] = 0;
    if (f) fclose(f);
    unlink(path);
    long fc = runs_of(text, "FULLY_CONNECTED"), dq = runs_of(text, "DEQUANTIZE");
    CHECK_MSG(fc == RUNS_FOLDED + RUNS_INPUT, "FULLY_CONNECTED runs %ld (want %d); profile:\n%s", fc,
              RUNS_FOLDED + RUNS_INPUT, text);
    CHECK_MSG(dq == RUNS_INPUT, "DEQUANTIZE runs %ld (want %d: the unfolded model's only); profile:\n%s", dq,
              RUNS_INPUT, text);
    CHECK_MSG(strstr(text, "constant folding: 1 operation computed at compilation (DEQUANTIZE 1)") != NULL,
              "no constant folding note; profile:\n%s", text);
}

/* ---- 2. the results -------------------------------------------------------------------------------- */
static void results_section(void) {
    ck_section("folded and unfolded: the same bits; the float reference");
    ANeuralNetworksModel *folded = NULL, *plain = NULL;
    ANeuralNetworksCompilation *cf = NULL, *cp = NULL;
    REQUIRE_RC(build(0, &folded), ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(build(1, &plain), ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(compile(folded, &cf), ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(compile(plain, &cp), ANEURALNETWORKS_NO_ERROR);
    for (int seed = 0; seed < 4; seed++) {
        float x[B * K], yf[B * N], yp[B * N];
        make_input(x, seed);
        memset(yf, 0xff, sizeof yf);
        CHECK_RC(run(cf, 0, x, yf), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(run(cp, 1, x, yp), ANEURALNETWORKS_NO_ERROR);
        CHECK_MSG(memcmp(yf, yp, sizeof yf) == 0, "seed %d: folded and unfolded results differ", seed);
        int bad = 0;
        for (int b = 0; b < B; b++)
            for (int n = 0; n < N; n++) {
                double acc = BIAS[n];
                for (int k = 0; k < K; k++) acc += (double)x[b * K + k] * (double)W[n * K + k] * (double)SCALE;
                if (fabs(acc - yf[b * N + n]) > 1e-4 * (1 + fabs(acc))) bad++;
            }
        CHECK_MSG(bad == 0, "seed %d: %d results off the float reference", seed, bad);
    }
    ANeuralNetworksCompilation_free(cf);
    ANeuralNetworksCompilation_free(cp);
    ANeuralNetworksModel_free(folded);
    ANeuralNetworksModel_free(plain);
}

static void output_section(void) {
    ck_section("a model output computed from constants is written on every computation");
    const uint32_t dw[2] = {N, K}, dx[1] = {1};
    ANeuralNetworksOperandType tq = {.type = ANEURALNETWORKS_TENSOR_QUANT8_SYMM, .dimensionCount = 2, .dimensions = dw,
                                     .scale = SCALE};
    ANeuralNetworksOperandType tf = {.type = ANEURALNETWORKS_TENSOR_FLOAT32, .dimensionCount = 2, .dimensions = dw};
    ANeuralNetworksOperandType tx = {.type = ANEURALNETWORKS_TENSOR_FLOAT32, .dimensionCount = 1, .dimensions = dx};
    ANeuralNetworksOperandType ti = {.type = ANEURALNETWORKS_INT32};
    const int32_t none = ANEURALNETWORKS_FUSED_NONE;
    ANeuralNetworksModel* m = NULL;
    REQUIRE_RC(ANeuralNetworksModel_create(&m), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &tq), ANEURALNETWORKS_NO_ERROR);     /* 0 weights */
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &tf), ANEURALNETWORKS_NO_ERROR);     /* 1 DEQUANTIZE: output */
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &tx), ANEURALNETWORKS_NO_ERROR);     /* 2 input */
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &ti), ANEURALNETWORKS_NO_ERROR);     /* 3 fuse */
    CHECK_RC(ANeuralNetworksModel_addOperand(m, &tx), ANEURALNETWORKS_NO_ERROR);     /* 4 output x + x */
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 0, W, sizeof W), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksModel_setOperandValue(m, 3, &none, sizeof none), ANEURALNETWORKS_NO_ERROR);
    const uint32_t dq_in[1] = {0}, dq_out[1] = {1}, add_in[3] = {2, 2, 3}, add_out[1] = {4};
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_DEQUANTIZE, 1, dq_in, 1, dq_out),
             ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, add_in, 1, add_out), ANEURALNETWORKS_NO_ERROR);
    const uint32_t ins[1] = {2}, outs[2] = {1, 4};
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, ins, 2, outs), ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(ANeuralNetworksModel_finish(m), ANEURALNETWORKS_NO_ERROR);
    ANeuralNetworksCompilation* c = NULL;
    REQUIRE_RC(compile(m, &c), ANEURALNETWORKS_NO_ERROR);
    static float w[N * K];
    for (int r = 0; r < 3; r++) {
        float x = 1.5f + (float)r, y = 0;
        for (int i = 0; i < N * K; i++) w[i] = -1000.0f - (float)r;
        ANeuralNetworksExecution* e = NULL;
        if (!CHECK_RC(ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR)) break;
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, &x, sizeof x), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, w, sizeof w), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setOutput(e, 1, NULL, &y, sizeof y), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_NO_ERROR);
        ANeuralNetworksExecution_free(e);
        int bad = 0;
        for (int i = 0; i < N * K; i++) bad += w[i] != (float)W[i] * SCALE;
        CHECK_MSG(bad == 0, "run %d: %d dequantized values not written", r, bad);
        CHECK_VAL(y, 2 * x);
    }
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

int main(void) {
    check_init(60);
    make_weights();
    profile_section();      /* first: the fork happens before this process starts the library */
    results_section();
    output_section();
    return check_summary();
}
