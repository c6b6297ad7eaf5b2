/*
 * ctests/nn_dlsym.h -- for the C tests that reach the API through dlsym (test_dlopen.c,
 * test_feature_levels.c): one function-pointer variable p_<name> per function of
 * nnapi_functions.h, typed from the NDK header, and an ADD model built through them.
 * Nothing here links against libneuralnetworks.so.
 */
#ifndef NNAPI_PY_CTESTS_NN_DLSYM_H
#define NNAPI_PY_CTESTS_NN_DLSYM_H

#include <stdint.h>

#include <android/NeuralNetworks.h>

#include "check.h"
#include "nnapi_functions.h"

#define NN_DECLARE_PTR(name) static __typeof__(&name) p_##name;
NNAPI_FUNCTIONS(NN_DECLARE_PTR)
#undef NN_DECLARE_PTR

/* On a new model m: x + y (+ FuseCode NONE) -> out over [4] float32, x and y the model's inputs,
   out its output (not finished); each call a check. */
static CK_UNUSED void nn_dl_add_model(ANeuralNetworksModel* m) {
    static const uint32_t d[1] = {4};
    ANeuralNetworksOperandType tf = {.type = ANEURALNETWORKS_TENSOR_FLOAT32, .dimensionCount = 1, .dimensions = d};
    ANeuralNetworksOperandType ti = {.type = ANEURALNETWORKS_INT32};
    const int32_t none = ANEURALNETWORKS_FUSED_NONE;
    CHECK_RC(p_ANeuralNetworksModel_addOperand(m, &tf), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(p_ANeuralNetworksModel_addOperand(m, &tf), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(p_ANeuralNetworksModel_addOperand(m, &ti), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(p_ANeuralNetworksModel_addOperand(m, &tf), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(p_ANeuralNetworksModel_setOperandValue(m, 2, &none, sizeof none), ANEURALNETWORKS_NO_ERROR);
    const uint32_t in[3] = {0, 1, 2}, out[1] = {3}, mi[2] = {0, 1};
    CHECK_RC(p_ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(p_ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 1, out), ANEURALNETWORKS_NO_ERROR);
}

#endif /* NNAPI_PY_CTESTS_NN_DLSYM_H */
