/* bench_mobilenet.c -- a MobileNetV2-style network built through the NNAPI C API.
 *
 * NHWC input 1x224x224x3; stem 3x3/2 conv (32) + ReLU6; the 17 inverted residual blocks of
 * MobileNetV2 (1x1 expand + ReLU6, 3x3 depthwise + ReLU6, 1x1 project, residual ADD where
 * the shapes allow); 1x1 conv to 1280 + ReLU6; 7x7 average pool; fully connected to 1000.
 * Random weights.  Usage: bench_mobilenet float32|quant8 [runs]   prints "ms_per_inference".
 */
#define _POSIX_C_SOURCE 200809L
#include <android/NeuralNetworks.h>
#include <nnapi_py.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x) do { int rc_ = (x); if (rc_) { fprintf(stderr, "%s:%d %s -> %d: %s\n", __FILE__, __LINE__, #x, rc_, nnapi_py_last_error()); exit(1); } } while (0)

static ANeuralNetworksModel* M;
static uint32_t n_operands;
static int QUANT;                       /* 0 float32, 1 quant8 asymm */
static const float ACT_SCALE = 0.05f;   /* activations: scale 0.05, zero point 0 (ReLU6 range fits) */
static const int32_t ACT_ZP = 0;
static const float W_SCALE = 0.01f;
static const int32_t W_ZP = 128;

static void* keep[4096];
static int n_keep;

static uint32_t operand(int32_t type, uint32_t rank, const uint32_t* dims, float scale, int32_t zp) {
    ANeuralNetworksOperandType t = {type, rank, rank ? dims : NULL, scale, zp};
    CHECK(ANeuralNetworksModel_addOperand(M, &t));
    return n_operands++;
}

static uint32_t tensor(uint32_t n, uint32_t h, uint32_t w, uint32_t c) {
    uint32_t d[4] = {n, h, w, c};
    return QUANT ? operand(ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 4, d, ACT_SCALE, ACT_ZP)
                 : operand(ANEURALNETWORKS_TENSOR_FLOAT32, 4, d, 0.f, 0);
}

static uint32_t scalar_i32(int32_t v) {
    uint32_t k = operand(ANEURALNETWORKS_INT32, 0, NULL, 0.f, 0);
    CHECK(ANeuralNetworksModel_setOperandValue(M, k, &v, sizeof v));
    return k;
}

static uint32_t weights(uint32_t rank, const uint32_t* dims) {
    size_t n = 1;
    for (uint32_t i = 0; i < rank; i++) n *= dims[i];
    uint32_t k;
    void* buf;
    if (QUANT) {
        k = operand(ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, rank, dims, W_SCALE, W_ZP);
        uint8_t* p = malloc(n);
        for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(W_ZP - 20 + rand() % 41);
        buf = p;
        CHECK(ANeuralNetworksModel_setOperandValue(M, k, p, n));
    } else {
        k = operand(ANEURALNETWORKS_TENSOR_FLOAT32, rank, dims, 0.f, 0);
        float* p = malloc(n * sizeof *p);
        for (size_t i = 0; i < n; i++) p[i] = ((float)rand() / RAND_MAX - 0.5f) * 0.2f;
        buf = p;
        CHECK(ANeuralNetworksModel_setOperandValue(M, k, p, n * sizeof *p));
    }
    keep[n_keep++] = buf;                 /* > 128 bytes: referenced, must outlive the model */
    return k;
}

static uint32_t bias(uint32_t c) {
    uint32_t d[1] = {c};
    uint32_t k;
    if (QUANT) {
        k = operand(ANEURALNETWORKS_TENSOR_INT32, 1, d, ACT_SCALE * W_SCALE, 0);
        int32_t* p = malloc(c * sizeof *p);
        for (uint32_t i = 0; i < c; i++) p[i] = rand() % 200 - 100;
        keep[n_keep++] = p;
        CHECK(ANeuralNetworksModel_setOperandValue(M, k, p, c * sizeof *p));
    } else {
        k = operand(ANEURALNETWORKS_TENSOR_FLOAT32, 1, d, 0.f, 0);
        float* p = malloc(c * sizeof *p);
        for (uint32_t i = 0; i < c; i++) p[i] = ((float)rand() / RAND_MAX - 0.5f) * 0.1f;
        keep[n_keep++] = p;
        CHECK(ANeuralNetworksModel_setOperandValue(M, k, p, c * sizeof *p));
    }
    return k;
}

static void op(ANeuralNetworksOperationType type, uint32_t nin, const uint32_t* in, uint32_t out) {
    CHECK(ANeuralNetworksModel_addOperation(M, type, nin, in, 1, &out));
}

/* conv (groups == 1) or depthwise (depthwise != 0), implicit SAME padding */
static uint32_t conv(uint32_t x, uint32_t h, uint32_t w, uint32_t cin, uint32_t cout, uint32_t k,
                     uint32_t stride, int depthwise, int relu6, uint32_t* oh, uint32_t* ow) {
    uint32_t fd[4] = {depthwise ? 1 : cout, k, k, depthwise ? cout : cin};
    uint32_t f = weights(4, fd), b = bias(cout);
    *oh = (h + stride - 1) / stride;
    *ow = (w + stride - 1) / stride;
    uint32_t y = tensor(1, *oh, *ow, cout);
    uint32_t pad = scalar_i32(ANEURALNETWORKS_PADDING_SAME), s = scalar_i32((int32_t)stride);
    uint32_t act = scalar_i32(relu6 ? ANEURALNETWORKS_FUSED_RELU6 : ANEURALNETWORKS_FUSED_NONE);
    if (depthwise) {
        uint32_t mult = scalar_i32(1);
        uint32_t in[8] = {x, f, b, pad, s, s, mult, act};
        op(ANEURALNETWORKS_DEPTHWISE_CONV_2D, 8, in, y);
    } else {
        uint32_t in[7] = {x, f, b, pad, s, s, act};
        op(ANEURALNETWORKS_CONV_2D, 7, in, y);
    }
    return y;
}

typedef struct {
    ANeuralNetworksCompilation* comp;
    ANeuralNetworksExecution* e;
    void* in_buf;
    void* out_buf;
    uint32_t operands;
} Net;

/* builds, compiles and binds the network in float32 (quant 0) or quant8 (quant 1) */
static Net setup(int quant) {
    QUANT = quant;
    n_operands = 0;
    srand(1234);
    CHECK(ANeuralNetworksModel_create(&M));
    uint32_t h = 224, w = 224, oh, ow;
    uint32_t input = tensor(1, h, w, 3);
    uint32_t x = conv(input, h, w, 3, 32, 3, 2, 0, 1, &oh, &ow);
    h = oh; w = ow;
    uint32_t c = 32;
    static const uint32_t cfg[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                                       {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    for (int g = 0; g < 7; g++) {
        for (uint32_t r = 0; r < cfg[g][2]; r++) {
            uint32_t t = cfg[g][0], cout = cfg[g][1], stride = r == 0 ? cfg[g][3] : 1;
            uint32_t y = x, hid = c * t, yh = h, yw = w;
            if (t != 1) y = conv(y, h, w, c, hid, 1, 1, 0, 1, &yh, &yw);
            y = conv(y, yh, yw, hid, hid, 3, stride, 1, 1, &yh, &yw);
            y = conv(y, yh, yw, hid, cout, 1, 1, 0, 0, &yh, &yw);
            if (stride == 1 && cout == c) {
                uint32_t sum = tensor(1, yh, yw, cout), none = scalar_i32(ANEURALNETWORKS_FUSED_NONE);
                uint32_t in[3] = {x, y, none};
                op(ANEURALNETWORKS_ADD, 3, in, sum);
                y = sum;
            }
            x = y; h = yh; w = yw; c = cout;
        }
    }
    x = conv(x, h, w, c, 1280, 1, 1, 0, 1, &oh, &ow);
    uint32_t pooled = tensor(1, 1, 1, 1280);
    {
        uint32_t pad = scalar_i32(ANEURALNETWORKS_PADDING_VALID), one = scalar_i32(1), k = scalar_i32((int32_t)oh);
        uint32_t none = scalar_i32(ANEURALNETWORKS_FUSED_NONE);
        uint32_t in[7] = {x, pad, one, one, k, k, none};
        op(ANEURALNETWORKS_AVERAGE_POOL_2D, 7, in, pooled);
    }
    uint32_t fcw_d[2] = {1000, 1280};
    uint32_t fcw = weights(2, fcw_d), fcb = bias(1000);
    uint32_t od[2] = {1, 1000};
    uint32_t logits = QUANT ? operand(ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 2, od, 0.1f, 128)
                            : operand(ANEURALNETWORKS_TENSOR_FLOAT32, 2, od, 0.f, 0);
    {
        uint32_t none = scalar_i32(ANEURALNETWORKS_FUSED_NONE);
        uint32_t in[4] = {pooled, fcw, fcb, none};
        op(ANEURALNETWORKS_FULLY_CONNECTED, 4, in, logits);
    }
    CHECK(ANeuralNetworksModel_identifyInputsAndOutputs(M, 1, &input, 1, &logits));
    CHECK(ANeuralNetworksModel_finish(M));
    ANeuralNetworksCompilation* comp;
    CHECK(ANeuralNetworksCompilation_create(M, &comp));
    CHECK(ANeuralNetworksCompilation_setPreference(comp, ANEURALNETWORKS_PREFER_SUSTAINED_SPEED));
    CHECK(ANeuralNetworksCompilation_finish(comp));

    size_t in_elems = 224 * 224 * 3;
    size_t esz = QUANT ? 1 : 4;
    void* in_buf = malloc(in_elems * esz);
    for (size_t i = 0; i < in_elems; i++) {
        if (QUANT) ((uint8_t*)in_buf)[i] = (uint8_t)(rand() % 40);
        else ((float*)in_buf)[i] = (float)rand() / RAND_MAX;
    }
    void* out_buf = malloc(1000 * esz);
    Net net = {comp, NULL, in_buf, out_buf, n_operands};
    CHECK(ANeuralNetworksExecution_create(comp, &net.e));
    CHECK(ANeuralNetworksExecution_setReusable(net.e, true));
    CHECK(ANeuralNetworksExecution_setInput(net.e, 0, NULL, in_buf, in_elems * esz));
    CHECK(ANeuralNetworksExecution_setOutput(net.e, 0, NULL, out_buf, 1000 * esz));
    CHECK(ANeuralNetworksExecution_compute(net.e));      /* warm-up */
    ANeuralNetworksModel_free(M);
    return net;
}

static double once(Net* n) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    CHECK(ANeuralNetworksExecution_compute(n->e));
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) * 1e-6;
}

static void release(Net* n) {
    ANeuralNetworksExecution_free(n->e);
    ANeuralNetworksCompilation_free(n->comp);
    free(n->in_buf);
    free(n->out_buf);
}

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

/* usage: bench_mobilenet float32|quant8|both [runs]
   both: the two networks in one process, their inferences alternating (float32, quant8,
   float32, ...), so that the quant8 / float32 ratio of each adjacent pair is measured within
   a fraction of a second; prints both lines and the median of the pairs' ratios */
int main(int argc, char** argv) {
    const char* kind = argc > 1 ? argv[1] : "float32";
    int runs = argc > 2 ? atoi(argv[2]) : 10;
    if (runs < 1) runs = 1;
    int both = strcmp(kind, "both") == 0;
    Net nets[2];
    int kinds[2], n = 0;
    if (both || strcmp(kind, "quant8") != 0) kinds[n++] = 0;
    if (both || strcmp(kind, "quant8") == 0) kinds[n++] = 1;
    for (int k = 0; k < n; k++) nets[k] = setup(kinds[k]);    /* srand(1234) each: the same weights */
    double best[2] = {1e30, 1e30}, total[2] = {0, 0};
    double* ratio = malloc(sizeof(double) * (size_t)runs);
    for (int r = 0; r < runs; r++) {
        double t[2];
        for (int k = 0; k < n; k++) {
            t[k] = once(&nets[k]);
            total[k] += t[k];
            if (t[k] < best[k]) best[k] = t[k];
        }
        if (n == 2) ratio[r] = t[1] / t[0];
    }
    for (int k = 0; k < n; k++)
        printf("mobilenet_%s %.3f ms/inference (best of %d; mean %.3f; %u operands)\n",
               kinds[k] ? "quant8" : "float32", best[k], runs, total[k] / runs, nets[k].operands);
    if (n == 2) {
        qsort(ratio, (size_t)runs, sizeof(double), cmp_double);
        printf("pairs quant8/float32 median %.3f (of %d adjacent pairs)\n", ratio[runs / 2], runs);
    }
    free(ratio);
    for (int k = 0; k < n; k++) release(&nets[k]);
    for (int i = 0; i < n_keep; i++) free(keep[i]);
    return 0;
}
