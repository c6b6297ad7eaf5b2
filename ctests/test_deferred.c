/*
 * Where each rule fails (issue 23, cause 1), as in Android 14: addOperation runs only the
 * operation's validate() (counts, types, input rank limits); output shapes, fixed output
 * quantization and FuseCode values are checked when the operation is prepared, so
 * addOperation, Model_finish and Compilation_finish succeed and the computation returns
 * OP_FAILED ("...: checked at execution, as Android does"); OEM_OPERATION is accepted in a
 * model and Compilation_finish fails.  Run with NNAPI_PY_STRICT=1 every one of these fails
 * at the earliest call with BAD_DATA (test_ctests.py runs both).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nn_helpers.h"

static int strict_mode(void) {
    const char* s = getenv("NNAPI_PY_STRICT");
    return s && *s && strcmp(s, "0") != 0;
}

static const uint32_t D4[1] = {4};

/* addOperation's code as Android returns it (BAD_DATA under NNAPI_PY_STRICT=1): a check; 1 if it was accepted */
static int accepted_unless_strict(int rc) {
    CHECK_RC(rc, strict_mode() ? ANEURALNETWORKS_BAD_DATA : ANEURALNETWORKS_NO_ERROR);
    return rc == ANEURALNETWORKS_NO_ERROR;
}

/* A model of one operation, op(operand 0) -> operand 1, on a new *m; each step a check.  Returns
   addOperation's code (-1 when the model was not created). */
static int one_op_model(int32_t op, ANeuralNetworksOperandType tin, ANeuralNetworksOperandType tout,
                        ANeuralNetworksModel** m) {
    if (!CHECK_RC(ANeuralNetworksModel_create(m), ANEURALNETWORKS_NO_ERROR)) return -1;
    CHECK_RC(ANeuralNetworksModel_addOperand(*m, &tin), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksModel_addOperand(*m, &tout), ANEURALNETWORKS_NO_ERROR);
    uint32_t in[1] = {0}, out[1] = {1};
    return ANeuralNetworksModel_addOperation(*m, op, 1, in, 1, out);
}

/* operand 0 the model's input, operand 1 its output, finished */
static void finish_one_op(ANeuralNetworksModel* m) {
    uint32_t in[1] = {0}, out[1] = {1};
    CHECK_RC(ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, in, 1, out), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksModel_finish(m), ANEURALNETWORKS_NO_ERROR);
}

/* One computation of x -> y that fails with OP_FAILED, its reason holding each of want[0..n) */
static void compute_fails(ANeuralNetworksCompilation* c, const void* x, size_t nx, void* y, size_t ny,
                          const char* const* want, int n) {
    ANeuralNetworksExecution* e = NULL;
    CHECK_RC(ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setInput(e, 0, NULL, x, nx), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_setOutput(e, 0, NULL, y, ny), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_OP_FAILED);
    const char* why = nnapi_py_last_error();
    for (int k = 0; k < n; k++) CHECK_MSG(strstr(why, want[k]) != NULL, "%s", why);
    ANeuralNetworksExecution_free(e);
}

/* RELU of a [3] input declared with a [1, 1, 1, 3] output. */
static void relu_output_rank(void) {
    ck_section("RELU with an output of another rank");
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksCompilation* c = NULL;
    uint32_t din[1] = {3}, dout[4] = {1, 1, 1, 3};
    int rc = one_op_model(ANEURALNETWORKS_RELU, nn_type(ANEURALNETWORKS_TENSOR_FLOAT32, 1, din, 0, 0),
                          nn_type(ANEURALNETWORKS_TENSOR_FLOAT32, 4, dout, 0, 0), &m);
    if (rc < 0) return;
    if (strict_mode()) {
        CHECK_RC(rc, ANEURALNETWORKS_BAD_DATA);
        CHECK(strstr(nnapi_py_last_error(), "output 0 has rank 4, expected 1") != NULL);
        ANeuralNetworksModel_free(m);
        return;
    }
    CHECK_RC(rc, ANEURALNETWORKS_NO_ERROR);
    finish_one_op(m);
    CHECK_RC(nn_compile(m, &c), ANEURALNETWORKS_NO_ERROR);
    float x[3] = {1, -2, 3}, y[3] = {0};
    static const char* const want[2] = {"RELU: output 0 has rank 4, expected 1",
                                        "checked at execution, as Android does"};
    compute_fails(c, x, sizeof x, y, sizeof y, want, 2);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
}

/* TANH on TENSOR_QUANT8_ASYMM whose output is not (1/128, 128). */
static void tanh_output_quant(void) {
    ck_section("quant8 TANH with the wrong output quantization");
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksCompilation* c = NULL;
    int rc = one_op_model(ANEURALNETWORKS_TANH, nn_type(ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 1, D4, 0.5f, 128),
                          nn_type(ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, 1, D4, 0.5f, 0), &m);
    if (rc >= 0 && accepted_unless_strict(rc)) {
        finish_one_op(m);
        CHECK_RC(nn_compile(m, &c), ANEURALNETWORKS_NO_ERROR);
        uint8_t x[4] = {1, 2, 3, 4}, y[4] = {0};
        static const char* const want[1] = {"TANH: output 0 must have scale"};
        compute_fails(c, x, sizeof x, y, sizeof y, want, 1);
        ANeuralNetworksCompilation_free(c);
    }
    ANeuralNetworksModel_free(m);
}

/* ADD with FuseCode 999: Android compiles it; the computation fails. */
static void fuse_code_999(void) {
    ck_section("ADD with FuseCode 999");
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksCompilation* c = NULL;
    uint32_t d[1] = {2};
    int rc = nn_build_binary_f32(ANEURALNETWORKS_ADD, 1, d, 999, 1, &m);
    if (strict_mode()) {
        CHECK_RC(rc, ANEURALNETWORKS_BAD_DATA);           /* Model_finish, constants known */
    } else {
        CHECK_RC(rc, ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(nn_compile(m, &c), ANEURALNETWORKS_NO_ERROR);
        float a[2] = {1, 2}, b[2] = {3, 4}, out[2] = {0};
        CHECK_RC(nn_run2(c, a, b, out, 2), ANEURALNETWORKS_OP_FAILED);
        CHECK_MSG(strstr(nnapi_py_last_error(), "FuseCode 0..3, got 999") != NULL, "%s", nnapi_py_last_error());
        ANeuralNetworksCompilation_free(c);
    }
    ANeuralNetworksModel_free(m);
}

/* OEM_OPERATION: accepted in a model, unsupported by every device, Compilation_finish fails. */
static void oem_operation(void) {
    ck_section("OEM_OPERATION");
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksCompilation* c = NULL;
    int rc = one_op_model(ANEURALNETWORKS_OEM_OPERATION, nn_type(ANEURALNETWORKS_TENSOR_OEM_BYTE, 1, D4, 0, 0),
                          nn_type(ANEURALNETWORKS_TENSOR_OEM_BYTE, 1, D4, 0, 0), &m);
    if (rc >= 0 && accepted_unless_strict(rc)) {
        finish_one_op(m);
        ANeuralNetworksDevice* dev = NULL;
        CHECK_RC(ANeuralNetworks_getDevice(0, &dev), ANEURALNETWORKS_NO_ERROR);
        const ANeuralNetworksDevice* devs[1] = {dev};
        bool sup[1] = {true};
        CHECK_RC(ANeuralNetworksModel_getSupportedOperationsForDevices(m, devs, 1, sup), ANEURALNETWORKS_NO_ERROR);
        CHECK(!sup[0]);
        CHECK_RC(ANeuralNetworksCompilation_create(m, &c), ANEURALNETWORKS_NO_ERROR);
        CHECK_RC(ANeuralNetworksCompilation_finish(c), ANEURALNETWORKS_BAD_DATA);
        ANeuralNetworksExecution* e = NULL;
        CHECK_RC(ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_BAD_STATE);
        ANeuralNetworksCompilation_free(c);
    }
    ANeuralNetworksModel_free(m);
}

int main(void) {
    check_init(60);
    relu_output_rank();
    tanh_output_quant();
    fuse_code_999();
    oem_operation();
    return check_summary();
}
