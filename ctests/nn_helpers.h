/*
 * ctests/nn_helpers.h -- small model-building helpers shared by the C tests.
 * Requires the program to be linked against libneuralnetworks.so
 * (test_dlopen.c does not use this header).
 */
#ifndef NNAPI_PY_CTESTS_NN_HELPERS_H
#define NNAPI_PY_CTESTS_NN_HELPERS_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <android/NeuralNetworks.h>

#include "check.h"

#define NN_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static CK_UNUSED ANeuralNetworksOperandType nn_type(int32_t type, uint32_t rank,
                                                   const uint32_t* dims, float scale,
                                                   int32_t zeroPoint) {
    ANeuralNetworksOperandType t;
    t.type = type;
    t.dimensionCount = rank;
    t.dimensions = rank ? dims : NULL;
    t.scale = scale;
    t.zeroPoint = zeroPoint;
    return t;
}

static CK_UNUSED ANeuralNetworksOperandType nn_scalar(int32_t type) {
    return nn_type(type, 0, NULL, 0.0f, 0);
}

/* Add an operand; returns the NNAPI result code. */
static CK_UNUSED int nn_add_operand(ANeuralNetworksModel* m, int32_t type, uint32_t rank,
                                   const uint32_t* dims, float scale, int32_t zp) {
    ANeuralNetworksOperandType t = nn_type(type, rank, dims, scale, zp);
    return ANeuralNetworksModel_addOperand(m, &t);
}

/* Every *_free function given NULL: each must be a no-op. */
static CK_UNUSED void nn_free_null_handles(void) {
    ANeuralNetworksModel_free(NULL);
    ANeuralNetworksCompilation_free(NULL);
    ANeuralNetworksExecution_free(NULL);
    ANeuralNetworksBurst_free(NULL);
    ANeuralNetworksMemory_free(NULL);
    ANeuralNetworksMemoryDesc_free(NULL);
    ANeuralNetworksEvent_free(NULL);
}

/* The first non-zero code of a sequence of calls (for building models). */
#define NN_TRY(rc_var, call)      \
    do {                          \
        if ((rc_var) == 0) {      \
            (rc_var) = (call);    \
        }                         \
    } while (0)

/*
 * Binary element-wise model (ADD or MUL) on TENSOR_FLOAT32 of shape dims[rank]:
 *   operand 0 = input a, 1 = input b, 2 = fuse code (constant INT32), 3 = output
 *   model inputs {0, 1}, outputs {3}. Finished when finish != 0.
 */
static CK_UNUSED int nn_build_binary_f32(int32_t op, uint32_t rank, const uint32_t* dims,
                                         int32_t fuse, int finish, ANeuralNetworksModel** out) {
    ANeuralNetworksModel* m = NULL;
    int rc = ANeuralNetworksModel_create(&m);
    if (rc) {
        *out = NULL;
        return rc;
    }
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_TENSOR_FLOAT32, rank, dims, 0.f, 0));
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_TENSOR_FLOAT32, rank, dims, 0.f, 0));
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0.f, 0));
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_TENSOR_FLOAT32, rank, dims, 0.f, 0));
    NN_TRY(rc, ANeuralNetworksModel_setOperandValue(m, 2, &fuse, sizeof fuse));
    uint32_t in[3] = {0, 1, 2}, o[1] = {3}, mi[2] = {0, 1};
    NN_TRY(rc, ANeuralNetworksModel_addOperation(m, op, 3, in, 1, o));
    NN_TRY(rc, ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 1, o));
    if (finish) NN_TRY(rc, ANeuralNetworksModel_finish(m));
    *out = m;
    return rc;
}

/* ADD of two float32 vectors of n elements, no activation, finished. */
static CK_UNUSED int nn_build_add_vec(uint32_t n, ANeuralNetworksModel** out) {
    uint32_t d[1] = {n};
    return nn_build_binary_f32(ANEURALNETWORKS_ADD, 1, d, ANEURALNETWORKS_FUSED_NONE, 1, out);
}

/* Compilation_create + finish */
static CK_UNUSED int nn_compile(ANeuralNetworksModel* m, ANeuralNetworksCompilation** c) {
    int rc = ANeuralNetworksCompilation_create(m, c);
    if (rc) return rc;
    return ANeuralNetworksCompilation_finish(*c);
}

/* createForDevices(first device) + finish */
static CK_UNUSED int nn_compile_for_device(ANeuralNetworksModel* m,
                                          ANeuralNetworksCompilation** c) {
    ANeuralNetworksDevice* dev = NULL;
    int rc = ANeuralNetworks_getDevice(0, &dev);
    if (rc) return rc;
    const ANeuralNetworksDevice* devs[1] = {dev};
    rc = ANeuralNetworksCompilation_createForDevices(m, devs, 1, c);
    if (rc) return rc;
    return ANeuralNetworksCompilation_finish(*c);
}

/* One synchronous run of a 2-input/1-output float model: out = f(a, b). */
static CK_UNUSED int nn_run2(ANeuralNetworksCompilation* c, const float* a, const float* b,
                             float* out, uint32_t n) {
    ANeuralNetworksExecution* e = NULL;
    int rc = ANeuralNetworksExecution_create(c, &e);
    if (rc) return rc;
    NN_TRY(rc, ANeuralNetworksExecution_setInput(e, 0, NULL, a, n * sizeof(float)));
    NN_TRY(rc, ANeuralNetworksExecution_setInput(e, 1, NULL, b, n * sizeof(float)));
    NN_TRY(rc, ANeuralNetworksExecution_setOutput(e, 0, NULL, out, n * sizeof(float)));
    NN_TRY(rc, ANeuralNetworksExecution_compute(e));
    ANeuralNetworksExecution_free(e);
    return rc;
}

/* Execution with both inputs and the output set (not computed). */
static CK_UNUSED int nn_prepare2(ANeuralNetworksCompilation* c, const float* a, const float* b,
                                 float* out, uint32_t n, ANeuralNetworksExecution** pe) {
    int rc = ANeuralNetworksExecution_create(c, pe);
    if (rc) return rc;
    NN_TRY(rc, ANeuralNetworksExecution_setInput(*pe, 0, NULL, a, n * sizeof(float)));
    NN_TRY(rc, ANeuralNetworksExecution_setInput(*pe, 1, NULL, b, n * sizeof(float)));
    NN_TRY(rc, ANeuralNetworksExecution_setOutput(*pe, 0, NULL, out, n * sizeof(float)));
    return rc;
}

static CK_UNUSED int nn_close(float a, float b, float tol) {
    return fabsf(a - b) <= tol * (1.0f + fabsf(b));
}

/* number of i in [0,n) with out[i] != a[i] + b[i] */
static CK_UNUSED int nn_count_add_mismatch(const float* a, const float* b, const float* out,
                                          uint32_t n) {
    int bad = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!nn_close(out[i], a[i] + b[i], 1e-6f)) bad++;
    return bad;
}

/* IEEE half <-> float (round to nearest even; enough for test values) */
static CK_UNUSED uint16_t nn_f2h(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = x & 0x7fffffu;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t h = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)h;
}

static CK_UNUSED float nn_h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
    if (exp == 0) {
        if (mant == 0) {
            x = sign;
        } else {
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while (!(mant & 0x400u));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        x = sign | 0x7f800000u | (mant << 13);
    } else {
        x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* Shared memory from memfd_create, mapped on our side and wrapped in an ANeuralNetworksMemory. */
typedef struct {
    int fd;
    size_t size;
    unsigned char* p;
    ANeuralNetworksMemory* mem;
} nn_shm;

/* Returns the Memory_createFromFd result code (-1 if the memfd could not be made). */
static CK_UNUSED int nn_shm_create(size_t size, nn_shm* s) {
    s->fd = -1;
    s->size = size;
    s->p = NULL;
    s->mem = NULL;
    s->fd = memfd_create("nnapi_py_ctest", MFD_CLOEXEC);
    if (s->fd < 0) return -1;
    if (ftruncate(s->fd, (off_t)size) != 0) return -1;
    void* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
    if (p == MAP_FAILED) return -1;
    s->p = (unsigned char*)p;
    memset(s->p, 0, size);
    return ANeuralNetworksMemory_createFromFd(size, PROT_READ | PROT_WRITE, s->fd, 0, &s->mem);
}

static CK_UNUSED void nn_shm_destroy(nn_shm* s) {
    ANeuralNetworksMemory_free(s->mem);
    s->mem = NULL;
    if (s->p) munmap(s->p, s->size);
    s->p = NULL;
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
}

#endif /* NNAPI_PY_CTESTS_NN_HELPERS_H */
