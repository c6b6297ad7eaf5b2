/*
 * test_android_rejects.c -- calls Android 14's runtime rejects and nnapi_py used to accept
 * (issue 23, "cause 2"), each with a positive control; run in default and strict mode.
 *
 *  - Event_getSyncFenceFd: *syncFenceFd is -1 on every failure (NULL, stale or fence-less event).
 *  - MemoryDesc: a scalar role after setDimensions gave a rank; roles whose dimensions contradict
 *    the descriptor's.
 *  - IF / WHILE whose operands do not match the referenced models: BAD_DATA at addOperation.
 *  - setInput / setOutput (and the FromMemory variants): a type that overrides a dimension the
 *    model fixes (also with 0), an input type that is not fully specified (rank 0 included).
 *  - compute: an output shape that contradicts the dimensions the client gave -> OP_FAILED; an
 *    output whose computed size overflows uint32 -> OP_FAILED without allocating it.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <nnapi_py.h>

#include "check.h"
#include "nn_helpers.h"

#define F32 ANEURALNETWORKS_TENSOR_FLOAT32

static int reason_has(const char* needle) {
    const char* r = nnapi_py_last_error();
    return r != NULL && strstr(r, needle) != NULL;
}

/* ------------------------------------------------------------------------ events */
static void test_event_fence_fd(void) {
    ck_section("Event_getSyncFenceFd sets -1 first");
    int fd = -100;
    CHECK_RC(ANeuralNetworksEvent_getSyncFenceFd(NULL, &fd), ANEURALNETWORKS_UNEXPECTED_NULL);
    CHECK_VAL(fd, -1);
    CHECK_RC(ANeuralNetworksEvent_getSyncFenceFd(NULL, NULL), ANEURALNETWORKS_UNEXPECTED_NULL);

    /* a garbage (never created) event */
    fd = -100;
    CHECK_RC(ANeuralNetworksEvent_getSyncFenceFd((const ANeuralNetworksEvent*)(uintptr_t)0x7a00deadbee0ull, &fd),
             ANEURALNETWORKS_BAD_DATA);
    CHECK_VAL(fd, -1);

    /* an event of startCompute is not backed by a fence; a freed event is stale */
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksCompilation* c = NULL;
    ANeuralNetworksExecution* e = NULL;
    ANeuralNetworksEvent* ev = NULL;
    float a[2] = {1, 2}, b[2] = {3, 4}, out[2] = {0};
    REQUIRE_RC(nn_build_add_vec(2, &m), ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(nn_compile(m, &c), ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(nn_prepare2(c, a, b, out, 2, &e), ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(ANeuralNetworksExecution_startCompute(e, &ev), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksEvent_wait(ev), ANEURALNETWORKS_NO_ERROR);
    fd = -100;
    CHECK_RC(ANeuralNetworksEvent_getSyncFenceFd(ev, &fd), ANEURALNETWORKS_BAD_DATA);
    CHECK_VAL(fd, -1);
    ANeuralNetworksEvent_free(ev);
    fd = -100;
    CHECK_RC(ANeuralNetworksEvent_getSyncFenceFd(ev, &fd), ANEURALNETWORKS_BAD_DATA);
    CHECK_VAL(fd, -1);
    ANeuralNetworksExecution_free(e);

    /* positive control: a fenced computation's event gives a fresh fd */
    e = NULL;
    ev = NULL;
    REQUIRE_RC(nn_prepare2(c, a, b, out, 2, &e), ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(ANeuralNetworksExecution_startComputeWithDependencies(e, NULL, 0, 0, &ev),
               ANEURALNETWORKS_NO_ERROR);
    fd = -100;
    CHECK_RC(ANeuralNetworksEvent_getSyncFenceFd(ev, &fd), ANEURALNETWORKS_NO_ERROR);
    CHECK(fd > 0);
    if (fd > 0) close(fd);
    CHECK_RC(ANeuralNetworksEvent_wait(ev), ANEURALNETWORKS_NO_ERROR);
    ANeuralNetworksEvent_free(ev);
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* ------------------------------------------------------------------------ memory descriptors */
/* ADD whose fuse code is a model input: inputs {0: float[2], 1: float[2], 2: INT32 scalar}. */
static int build_add_scalar_input(ANeuralNetworksModel** out) {
    ANeuralNetworksModel* m = NULL;
    int rc = ANeuralNetworksModel_create(&m);
    if (rc) return rc;
    uint32_t d[1] = {2};
    NN_TRY(rc, nn_add_operand(m, F32, 1, d, 0.f, 0));
    NN_TRY(rc, nn_add_operand(m, F32, 1, d, 0.f, 0));
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0.f, 0));
    NN_TRY(rc, nn_add_operand(m, F32, 1, d, 0.f, 0));
    uint32_t in[3] = {0, 1, 2}, o[1] = {3};
    NN_TRY(rc, ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, o));
    NN_TRY(rc, ANeuralNetworksModel_identifyInputsAndOutputs(m, 3, in, 1, o));
    NN_TRY(rc, ANeuralNetworksModel_finish(m));
    *out = m;
    return rc;
}

/* A new descriptor with dimensions dims[rank] set (rank < 0: none set); NULL on failure. */
static ANeuralNetworksMemoryDesc* desc_with(int rank, const uint32_t* dims) {
    ANeuralNetworksMemoryDesc* d = NULL;
    if (!CHECK_RC(ANeuralNetworksMemoryDesc_create(&d), ANEURALNETWORKS_NO_ERROR)) return NULL;
    if (rank >= 0) CHECK_RC(ANeuralNetworksMemoryDesc_setDimensions(d, (uint32_t)rank, dims), ANEURALNETWORKS_NO_ERROR);
    return d;
}

static void test_memory_desc(void) {
    ck_section("MemoryDesc roles against setDimensions");
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksCompilation* c = NULL;
    REQUIRE_RC(build_add_scalar_input(&m), ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(nn_compile(m, &c), ANEURALNETWORKS_NO_ERROR);
    const uint32_t two[1] = {2}, zero[1] = {0}, three[1] = {3};

    /* a rank given first (also [0]: a rank with an unknown dimension), then a scalar role:
     * BAD_DATA (Android's MemoryBuilder::addRole); the descriptor stays usable */
    for (int k = 0; k < 2; k++) {
        ANeuralNetworksMemoryDesc* d = desc_with(1, k ? zero : two);
        if (!d) return;
        CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 2, 1.0f), ANEURALNETWORKS_BAD_DATA);
        CHECK(reason_has("scalar"));
        CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(d, c, 0, 1.0f), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksMemoryDesc_finish(d), ANEURALNETWORKS_NO_ERROR);
        ANeuralNetworksMemoryDesc_free(d);
    }

    /* dimensions given first that contradict the role's operand: BAD_DATA */
    ANeuralNetworksMemoryDesc* d = desc_with(1, three);
    if (!d) return;
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 0, 1.0f), ANEURALNETWORKS_BAD_DATA);
    ANeuralNetworksMemoryDesc_free(d);

    /* positive controls: rank 0 then a scalar role; a scalar role then rank 0 */
    d = desc_with(0, NULL);
    if (!d) return;
    CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 2, 1.0f), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksMemoryDesc_setDimensions(d, 0, NULL), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksMemoryDesc_setDimensions(d, 1, two), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(ANeuralNetworksMemoryDesc_finish(d), ANEURALNETWORKS_NO_ERROR);
    ANeuralNetworksMemory* mem = NULL;
    CHECK_RC(ANeuralNetworksMemory_createFromDesc(d, &mem), ANEURALNETWORKS_NO_ERROR);
    ANeuralNetworksMemory_free(mem);
    ANeuralNetworksMemoryDesc_free(d);

    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* ------------------------------------------------------------------------ IF / WHILE */
/* A finished one-operation model: operands types[n], `op` reading ins[n_in] and writing
 * operand out, model inputs operands 0..n_model_in-1, output `out`. */
static ANeuralNetworksModel* one_op_model(const ANeuralNetworksOperandType* const* types, uint32_t n, int32_t op,
                                          const uint32_t* ins, uint32_t n_in, uint32_t out, uint32_t n_model_in) {
    ANeuralNetworksModel* m = NULL;
    int rc = ANeuralNetworksModel_create(&m);
    for (uint32_t k = 0; k < n; k++) NN_TRY(rc, ANeuralNetworksModel_addOperand(m, types[k]));
    const uint32_t model_ins[2] = {0, 1}, o[1] = {out};
    NN_TRY(rc, ANeuralNetworksModel_addOperation(m, op, n_in, ins, 1, o));
    NN_TRY(rc, ANeuralNetworksModel_identifyInputsAndOutputs(m, n_model_in, model_ins, 1, o));
    NN_TRY(rc, ANeuralNetworksModel_finish(m));
    CHECK_RC(rc, ANEURALNETWORKS_NO_ERROR);
    return m;
}

/* out = CAST(in): an identity model on `type` */
static ANeuralNetworksModel* identity_model(const ANeuralNetworksOperandType* type) {
    const ANeuralNetworksOperandType* types[2] = {type, type};
    const uint32_t in[1] = {0};
    return one_op_model(types, 2, ANEURALNETWORKS_CAST, in, 1, 1, 1);
}

/* cond(a, b) = LESS(a, b) -> bool[1] */
static ANeuralNetworksModel* less_model(const ANeuralNetworksOperandType* type) {
    const uint32_t one[1] = {1}, in[2] = {0, 1};
    ANeuralNetworksOperandType bt = nn_type(ANEURALNETWORKS_TENSOR_BOOL8, 1, one, 0.f, 0);
    const ANeuralNetworksOperandType* types[3] = {type, type, &bt};
    return one_op_model(types, 3, ANEURALNETWORKS_LESS, in, 2, 2, 2);
}

/* body(a, b) = CAST(a), b input-only */
static ANeuralNetworksModel* body_model(const ANeuralNetworksOperandType* type) {
    const ANeuralNetworksOperandType* types[3] = {type, type, type};
    const uint32_t in[1] = {0};
    return one_op_model(types, 3, ANEURALNETWORKS_CAST, in, 1, 2, 2);
}

/* addOperation's code for IF (cond != NULL: IF(cond, m1 = then, m2 = else, data...)) or WHILE
 * (cond == NULL: WHILE(m1 = condition, m2 = body, data...)) with outputs outs[n_outs]. */
static int add_control(const ANeuralNetworksOperandType* cond, const ANeuralNetworksModel* m1,
                       const ANeuralNetworksModel* m2, const ANeuralNetworksOperandType* data, uint32_t n_data,
                       const ANeuralNetworksOperandType* outs, uint32_t n_outs) {
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksOperandType mt = nn_scalar(ANEURALNETWORKS_MODEL);
    const uint32_t first = cond != NULL;
    int rc = ANeuralNetworksModel_create(&m);
    if (cond) NN_TRY(rc, ANeuralNetworksModel_addOperand(m, cond));
    NN_TRY(rc, ANeuralNetworksModel_addOperand(m, &mt));
    NN_TRY(rc, ANeuralNetworksModel_addOperand(m, &mt));
    NN_TRY(rc, ANeuralNetworksModel_setOperandValueFromModel(m, first, m1));
    NN_TRY(rc, ANeuralNetworksModel_setOperandValueFromModel(m, first + 1, m2));
    uint32_t ins[8] = {0, 1, 2}, os[4];
    for (uint32_t k = 0; k < n_data; k++) {
        NN_TRY(rc, ANeuralNetworksModel_addOperand(m, &data[k]));
        ins[first + 2 + k] = first + 2 + k;
    }
    for (uint32_t k = 0; k < n_outs; k++) {
        NN_TRY(rc, ANeuralNetworksModel_addOperand(m, &outs[k]));
        os[k] = first + 2 + n_data + k;
    }
    if (rc == 0)
        rc = ANeuralNetworksModel_addOperation(m, cond ? ANEURALNETWORKS_IF : ANEURALNETWORKS_WHILE,
                                               first + 2 + n_data, ins, n_outs, os);
    else
        rc = -rc;   /* a setup failure is never mistaken for the code under test */
    ANeuralNetworksModel_free(m);
    return rc;
}

static int add_if(const ANeuralNetworksModel* then_m, const ANeuralNetworksModel* else_m,
                  const ANeuralNetworksOperandType* data, uint32_t n_data,
                  const ANeuralNetworksOperandType* outs, uint32_t n_outs, const uint32_t* cond_dims,
                  uint32_t cond_rank) {
    ANeuralNetworksOperandType bt = nn_type(ANEURALNETWORKS_TENSOR_BOOL8, cond_rank, cond_dims, 0.f, 0);
    return add_control(&bt, then_m, else_m, data, n_data, outs, n_outs);
}

#define add_while(cond_m, body_m, data, n_data, outs, n_outs) \
    add_control(NULL, cond_m, body_m, data, n_data, outs, n_outs)

static void test_control_flow(void) {
    ck_section("IF / WHILE checked against the referenced models at addOperation");
    const uint32_t d23[2] = {2, 3}, d00[2] = {0, 0}, d33[2] = {3, 3}, one[1] = {1}, zero[1] = {0};
    ANeuralNetworksOperandType f23 = nn_type(F32, 2, d23, 0.f, 0);
    ANeuralNetworksOperandType f00 = nn_type(F32, 2, d00, 0.f, 0);
    ANeuralNetworksOperandType f33 = nn_type(F32, 2, d33, 0.f, 0);
    ANeuralNetworksOperandType frank = nn_type(F32, 0, NULL, 0.f, 0);
    ANeuralNetworksOperandType i23 = nn_type(ANEURALNETWORKS_TENSOR_INT32, 2, d23, 0.f, 0);
    ANeuralNetworksOperandType q23 = nn_type(ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 2, d23, 0.5f, 0);
    ANeuralNetworksOperandType q23b = nn_type(ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 2, d23, 0.25f, 0);
    ANeuralNetworksModel* id = identity_model(&f23);
    ANeuralNetworksModel* idq = identity_model(&q23);
    ANeuralNetworksModel* cond = less_model(&f23);
    ANeuralNetworksModel* body = body_model(&f23);
    if (!id || !idq || !cond || !body) return;

    /* controls: matching operands, and unknown dimensions / rank on the outer side */
    CHECK_RC(add_if(id, id, &f23, 1, &f23, 1, one, 1), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(add_if(id, id, &f00, 1, &frank, 1, one, 1), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(add_if(idq, idq, &q23, 1, &q23, 1, one, 1), ANEURALNETWORKS_NO_ERROR);
    /* mismatches: type, count, dimensions, quantization, output */
    CHECK_RC(add_if(id, id, &i23, 1, &f23, 1, one, 1), ANEURALNETWORKS_BAD_DATA);
    CHECK(reason_has("IF") && reason_has("then model input 0"));
    ANeuralNetworksOperandType two_data[2] = {f23, f23};
    CHECK_RC(add_if(id, id, two_data, 2, &f23, 1, one, 1), ANEURALNETWORKS_BAD_DATA);
    CHECK(reason_has("then model has 1 inputs and 1 outputs"));
    CHECK_RC(add_if(id, id, &f23, 1, two_data, 2, one, 1), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(add_if(id, id, &f33, 1, &f23, 1, one, 1), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(add_if(id, id, &f23, 1, &f33, 1, one, 1), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(add_if(idq, idq, &q23b, 1, &q23, 1, one, 1), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(add_if(id, idq, &f23, 1, &f23, 1, one, 1), ANEURALNETWORKS_BAD_DATA);
    CHECK(reason_has("else model"));
    /* the condition is a TENSOR_BOOL8 of shape exactly [1] (validateConditionOperand) */
    CHECK_RC(add_if(id, id, &f23, 1, &f23, 1, zero, 1), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(add_if(id, id, &f23, 1, &f23, 1, NULL, 0), ANEURALNETWORKS_BAD_DATA);

    /* WHILE: cond(a, b), body(a, b) -> a: one input-output and one input-only operand */
    ANeuralNetworksOperandType loop_in[2] = {f23, f23};
    CHECK_RC(add_while(cond, body, loop_in, 2, &f23, 1), ANEURALNETWORKS_NO_ERROR);
    ANeuralNetworksOperandType loop_in3[3] = {f23, f23, f23};
    CHECK_RC(add_while(cond, body, loop_in3, 3, &f23, 1), ANEURALNETWORKS_BAD_DATA);
    CHECK(reason_has("WHILE") && reason_has("condition model"));
    ANeuralNetworksOperandType loop_bad[2] = {f23, i23};
    CHECK_RC(add_while(cond, body, loop_bad, 2, &f23, 1), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(add_while(cond, body, loop_in, 2, &i23, 1), ANEURALNETWORKS_BAD_DATA);
    CHECK(reason_has("body model output 0"));
    CHECK_RC(add_while(cond, body, loop_in, 2, two_data, 2), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(add_while(body, body, loop_in, 2, &f23, 1), ANEURALNETWORKS_BAD_DATA);   /* cond output not bool */

    ANeuralNetworksModel_free(id);
    ANeuralNetworksModel_free(idq);
    ANeuralNetworksModel_free(cond);
    ANeuralNetworksModel_free(body);
}

/* ------------------------------------------------------------------------ setInput / setOutput */
/* ADD of float tensors with the given (shared) input / output dims (model inputs {0, 1}). */
static int build_add(uint32_t rank, const uint32_t* dims, uint32_t out_rank, const uint32_t* out_dims,
                     ANeuralNetworksModel** m, ANeuralNetworksCompilation** c) {
    int rc = ANeuralNetworksModel_create(m);
    if (rc) return rc;
    int32_t fuse = 0;
    NN_TRY(rc, nn_add_operand(*m, F32, rank, dims, 0.f, 0));
    NN_TRY(rc, nn_add_operand(*m, F32, rank, dims, 0.f, 0));
    NN_TRY(rc, nn_add_operand(*m, ANEURALNETWORKS_INT32, 0, NULL, 0.f, 0));
    NN_TRY(rc, nn_add_operand(*m, F32, out_rank, out_dims, 0.f, 0));
    NN_TRY(rc, ANeuralNetworksModel_setOperandValue(*m, 2, &fuse, sizeof fuse));
    uint32_t in[3] = {0, 1, 2}, o[1] = {3};
    NN_TRY(rc, ANeuralNetworksModel_addOperation(*m, ANEURALNETWORKS_ADD, 3, in, 1, o));
    NN_TRY(rc, ANeuralNetworksModel_identifyInputsAndOutputs(*m, 2, in, 1, o));
    NN_TRY(rc, ANeuralNetworksModel_finish(*m));
    NN_TRY(rc, nn_compile(*m, c));
    return rc;
}

static void test_set_io_types(void) {
    ck_section("setInput/setOutput types, as checkDimensionInfo");
    const uint32_t two[1] = {2}, three[1] = {3}, zero[1] = {0}, d22[2] = {2, 2};
    ANeuralNetworksOperandType t2 = nn_type(F32, 1, two, 0.f, 0);
    ANeuralNetworksOperandType t3 = nn_type(F32, 1, three, 0.f, 0);
    ANeuralNetworksOperandType t0 = nn_type(F32, 1, zero, 0.f, 0);
    ANeuralNetworksOperandType trank0 = nn_type(F32, 0, NULL, 0.f, 0);
    ANeuralNetworksOperandType t22 = nn_type(F32, 2, d22, 0.f, 0);
    float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, out[4] = {0};
    nn_shm shm;
    if (!CHECK_RC(nn_shm_create(64, &shm), ANEURALNETWORKS_NO_ERROR)) return;

    /* the model fixes [2] */
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksCompilation* c = NULL;
    ANeuralNetworksExecution* e = NULL;
    REQUIRE_RC(build_add(1, two, 1, two, &m, &c), ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, &t3, a, 12), ANEURALNETWORKS_BAD_DATA);
    CHECK(reason_has("fixes it to 2"));
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, &t0, a, 8), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, &t0, shm.mem, 0, 8), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, &t22, a, 16), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, &t0, out, 8), ANEURALNETWORKS_BAD_DATA);
    CHECK(reason_has("output 0: dimension 0 is given as 0"));
    CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, &t0, shm.mem, 0, 8), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, &t3, out, 12), ANEURALNETWORKS_BAD_DATA);
    /* controls: the same type, and the type left out */
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, &t2, a, 8), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 1, &t2, shm.mem, 0, 8), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, out, 8), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_NO_ERROR);
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);

    /* the model leaves the rank unknown: an input's type must be fully specified */
    m = NULL;
    c = NULL;
    e = NULL;
    REQUIRE_RC(build_add(0, NULL, 0, NULL, &m, &c), ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, &trank0, a, 4), ANEURALNETWORKS_BAD_DATA);
    CHECK(reason_has("must be fully specified"));
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, &t0, a, 0), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, &trank0, shm.mem, 0, 4), ANEURALNETWORKS_BAD_DATA);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), ANEURALNETWORKS_BAD_DATA);
    /* an output may stay unknown (rank 0 or 0 dimensions) */
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, &trank0, out, 16), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, &t22, a, 16), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 1, &t22, shm.mem, 0, 16), ANEURALNETWORKS_NO_ERROR);
    memcpy(shm.p, b, sizeof b);
    CHECK_RC(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_NO_ERROR);
    CHECK(out[3] == 44.0f);
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
    nn_shm_destroy(&shm);
}

/* Memory from a descriptor as an execution's input or output: the type given must combine with
 * the descriptor's dimensions (DeviceMemoryValidator::validate), and an input's dimensions must
 * equal the shape the memory holds, at every computation (validateInputDimensions). */
static void test_desc_memory_types(void) {
    ck_section("types given with memory from a descriptor");
    const uint32_t zero[1] = {0}, one[1] = {1}, two[1] = {2}, three[1] = {3};
    ANeuralNetworksOperandType t1 = nn_type(F32, 1, one, 0.f, 0), t2 = nn_type(F32, 1, two, 0.f, 0);
    ANeuralNetworksOperandType t3 = nn_type(F32, 1, three, 0.f, 0);
    float a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksCompilation* c = NULL;
    REQUIRE_RC(build_add(1, zero, 1, zero, &m, &c), ANEURALNETWORKS_NO_ERROR);   /* all dims unknown */

    for (int fixed = 0; fixed < 2; fixed++) {
        /* fixed: the descriptor says [1]; otherwise it leaves the dimension unknown */
        ANeuralNetworksMemoryDesc* d = desc_with(1, fixed ? one : zero);
        if (!d) return;
        CHECK_RC(ANeuralNetworksMemoryDesc_addOutputRole(d, c, 0, 1.0f), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksMemoryDesc_addInputRole(d, c, 0, 1.0f), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksMemoryDesc_finish(d), ANEURALNETWORKS_NO_ERROR);
        ANeuralNetworksMemory* mem = NULL;
        REQUIRE_RC(ANeuralNetworksMemory_createFromDesc(d, &mem), ANEURALNETWORKS_NO_ERROR);
        ANeuralNetworksMemoryDesc_free(d);

        /* write a [1] (fixed) or [2] result into the memory; [2] against a [1] descriptor: BAD_DATA */
        const ANeuralNetworksOperandType* shape = fixed ? &t1 : &t2;
        ANeuralNetworksExecution* e = NULL;
        REQUIRE_RC(ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR);
        if (fixed) {
            CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, &t2, mem, 0, 0), ANEURALNETWORKS_BAD_DATA);
            CHECK(reason_has("incompatible with the memory's [1]"));
        }
        CHECK_RC(ANeuralNetworksExecution_setOutputFromMemory(e, 0, shape, mem, 0, 0), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, shape, a, fixed ? 4 : 8), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, shape, b, fixed ? 4 : 8), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_NO_ERROR);
        ANeuralNetworksExecution_free(e);

        /* read it back as input 0 with a type that differs from the shape it holds */
        e = NULL;
        REQUIRE_RC(ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR);
        if (fixed) {
            CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, &t2, mem, 0, 0), ANEURALNETWORKS_BAD_DATA);
        } else {
            CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, &t3, mem, 0, 0), ANEURALNETWORKS_NO_ERROR);
            CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, &t3, b, 12), ANEURALNETWORKS_NO_ERROR);
            float out[3] = {0};
            CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, out, 12), ANEURALNETWORKS_NO_ERROR);
            CHECK_RC(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_OP_FAILED);
            CHECK(reason_has("input 0: dimensions [3] differ from the shape [2] the descriptor memory holds"));
        }
        ANeuralNetworksExecution_free(e);

        /* control: the shape it holds */
        e = NULL;
        float out[2] = {0};
        REQUIRE_RC(ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setInputFromMemory(e, 0, shape, mem, 0, 0), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, shape, b, fixed ? 4 : 8), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, out, fixed ? 4 : 8), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_NO_ERROR);
        CHECK(out[0] == 21.0f);      /* (1 + 10) + 10 */
        ANeuralNetworksExecution_free(e);
        ANeuralNetworksMemory_free(mem);
    }
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* ------------------------------------------------------------------------ computed output shapes */
static void test_output_shape_given(void) {
    ck_section("output dimensions given by the client against the computed shape");
    const uint32_t two[1] = {2}, three[1] = {3}, zero[1] = {0};
    ANeuralNetworksOperandType t2 = nn_type(F32, 1, two, 0.f, 0);
    ANeuralNetworksOperandType t3 = nn_type(F32, 1, three, 0.f, 0);
    float a[2] = {1, 2}, b[2] = {3, 4}, out[3] = {-1, -1, -1};

    /* inputs fixed [2] (a static plan), output declared [0]: the client says [3] */
    for (int reusable = 0; reusable < 2; reusable++) {
        ANeuralNetworksModel* m = NULL;
        ANeuralNetworksCompilation* c = NULL;
        ANeuralNetworksExecution* e = NULL;
        REQUIRE_RC(build_add(1, two, 1, zero, &m, &c), ANEURALNETWORKS_NO_ERROR);
        REQUIRE_RC(ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR);
        if (reusable) CHECK_RC(ANeuralNetworksExecution_setReusable(e, true), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, a, 8), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, NULL, b, 8), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, &t3, out, 12), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_OP_FAILED);
        CHECK(reason_has("computed shape [2] differs from the dimensions [3]"));
        if (reusable) CHECK_RC(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_OP_FAILED);
        ANeuralNetworksExecution_free(e);
        ANeuralNetworksCompilation_free(c);
        ANeuralNetworksModel_free(m);
    }

    /* everything unknown (dynamic shapes): input [2], output given [3] with a small buffer too */
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksCompilation* c = NULL;
    ANeuralNetworksExecution* e = NULL;
    REQUIRE_RC(build_add(1, zero, 1, zero, &m, &c), ANEURALNETWORKS_NO_ERROR);
    const uint32_t one[1] = {1};
    ANeuralNetworksOperandType t1 = nn_type(F32, 1, one, 0.f, 0);
    for (int k = 0; k < 3; k++) {
        const ANeuralNetworksOperandType* ot = k == 0 ? &t3 : k == 1 ? &t1 : &t2;
        uint32_t len = k == 0 ? 12 : k == 1 ? 4 : 8;
        e = NULL;
        REQUIRE_RC(ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, &t2, a, 8), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, &t2, b, 8), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, ot, out, len), ANEURALNETWORKS_NO_ERROR);
        /* [3]: contradicts; [1]: contradicts (not merely too small); [2]: the control */
        CHECK_RC(ANeuralNetworksExecution_compute(e), k == 2 ? ANEURALNETWORKS_NO_ERROR : ANEURALNETWORKS_OP_FAILED);
        ANeuralNetworksExecution_free(e);
    }
    CHECK(out[0] == 4.0f && out[1] == 6.0f);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* FULLY_CONNECTED [65536,1] x [65536,1]^T: the output would be 16 GiB, its size overflows uint32.
 * The process runs under a 6 GiB address-space limit, so a regression fails, it does not swap. */
static void test_output_size_overflow(void) {
    ck_section("an output whose size overflows uint32 fails the compute");
    enum { N = 1 << 16 };
    const uint32_t d01[2] = {0, 1}, d0[1] = {0}, d00[2] = {0, 0}, in_d[2] = {N, 1}, bias_d[1] = {N};
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksCompilation* c = NULL;
    ANeuralNetworksExecution* e = NULL;
    int rc = ANeuralNetworksModel_create(&m);
    int32_t act = 0;
    NN_TRY(rc, nn_add_operand(m, F32, 2, d01, 0.f, 0));
    NN_TRY(rc, nn_add_operand(m, F32, 2, d01, 0.f, 0));
    NN_TRY(rc, nn_add_operand(m, F32, 1, d0, 0.f, 0));
    NN_TRY(rc, nn_add_operand(m, ANEURALNETWORKS_INT32, 0, NULL, 0.f, 0));
    NN_TRY(rc, nn_add_operand(m, F32, 2, d00, 0.f, 0));
    NN_TRY(rc, ANeuralNetworksModel_setOperandValue(m, 3, &act, sizeof act));
    uint32_t in[4] = {0, 1, 2, 3}, o[1] = {4};
    NN_TRY(rc, ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_FULLY_CONNECTED, 4, in, 1, o));
    NN_TRY(rc, ANeuralNetworksModel_identifyInputsAndOutputs(m, 3, in, 1, o));
    NN_TRY(rc, ANeuralNetworksModel_finish(m));
    NN_TRY(rc, nn_compile(m, &c));
    REQUIRE_RC(rc, ANEURALNETWORKS_NO_ERROR);
    static float data[N], outb[N];
    ANeuralNetworksOperandType it = nn_type(F32, 2, in_d, 0.f, 0), bt = nn_type(F32, 1, bias_d, 0.f, 0);
    REQUIRE_RC(ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, &it, data, sizeof data), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 1, &it, data, sizeof data), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 2, &bt, data, sizeof data), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, outb, sizeof outb), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_OP_FAILED);
    CHECK(reason_has("more than an operand can hold"));
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

int main(void) {
    struct rlimit lim = {6ull << 30, 6ull << 30};
    setrlimit(RLIMIT_AS, &lim);
    check_init(55);
    ck_last_error_fn = nnapi_py_last_error;
    test_event_fence_fd();
    test_memory_desc();
    test_control_flow();
    test_set_io_types();
    test_desc_memory_types();
    test_output_shape_given();
    test_output_size_overflow();
    return check_summary();
}
