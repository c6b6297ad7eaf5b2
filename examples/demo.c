/* demo.c -- build a small model through the NNAPI C API and print its outputs.
 *
 *   out = softmax(relu(a + b) * c)      a, b, c: float32 [2, 4]
 *
 * Build: cc demo.c $(pkg-config --cflags --libs neuralnetworks)   (or: make demo)
 */
#include <android/NeuralNetworks.h>
#include <nnapi_py.h>
#include <stdio.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        int rc_ = (call);                                                             \
        if (rc_ != ANEURALNETWORKS_NO_ERROR) {                                        \
            fprintf(stderr, "%s failed: %d (%s)\n", #call, rc_, nnapi_py_last_error()); \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

int main(void) {
    uint32_t dims[2] = {2, 4};
    ANeuralNetworksOperandType tensor = {ANEURALNETWORKS_TENSOR_FLOAT32, 2, dims, 0.0f, 0};
    ANeuralNetworksOperandType i32 = {ANEURALNETWORKS_INT32, 0, NULL, 0.0f, 0};
    ANeuralNetworksOperandType f32 = {ANEURALNETWORKS_FLOAT32, 0, NULL, 0.0f, 0};

    ANeuralNetworksModel* model = NULL;
    CHECK(ANeuralNetworksModel_create(&model));
    /* operands: 0 a, 1 b, 2 fuse, 3 sum, 4 c, 5 relu, 6 prod, 7 beta, 8 out */
    CHECK(ANeuralNetworksModel_addOperand(model, &tensor));  /* 0 */
    CHECK(ANeuralNetworksModel_addOperand(model, &tensor));  /* 1 */
    CHECK(ANeuralNetworksModel_addOperand(model, &i32));     /* 2 */
    CHECK(ANeuralNetworksModel_addOperand(model, &tensor));  /* 3 */
    CHECK(ANeuralNetworksModel_addOperand(model, &tensor));  /* 4 */
    CHECK(ANeuralNetworksModel_addOperand(model, &tensor));  /* 5 */
    CHECK(ANeuralNetworksModel_addOperand(model, &tensor));  /* 6 */
    CHECK(ANeuralNetworksModel_addOperand(model, &f32));     /* 7 */
    CHECK(ANeuralNetworksModel_addOperand(model, &tensor));  /* 8 */
    int32_t none = ANEURALNETWORKS_FUSED_NONE;
    float beta = 1.0f;
    static const float c[8] = {1, 1, 1, 1, 0.5f, 0.5f, 2, 2};   /* 32 bytes: copied now */
    CHECK(ANeuralNetworksModel_setOperandValue(model, 2, &none, sizeof none));
    CHECK(ANeuralNetworksModel_setOperandValue(model, 4, c, sizeof c));
    CHECK(ANeuralNetworksModel_setOperandValue(model, 7, &beta, sizeof beta));
    uint32_t add_in[3] = {0, 1, 2}, add_out[1] = {3};
    uint32_t relu_in[1] = {3}, relu_out[1] = {5};
    uint32_t mul_in[3] = {5, 4, 2}, mul_out[1] = {6};
    uint32_t sm_in[2] = {6, 7}, sm_out[1] = {8};
    CHECK(ANeuralNetworksModel_addOperation(model, ANEURALNETWORKS_ADD, 3, add_in, 1, add_out));
    CHECK(ANeuralNetworksModel_addOperation(model, ANEURALNETWORKS_RELU, 1, relu_in, 1, relu_out));
    CHECK(ANeuralNetworksModel_addOperation(model, ANEURALNETWORKS_MUL, 3, mul_in, 1, mul_out));
    CHECK(ANeuralNetworksModel_addOperation(model, ANEURALNETWORKS_SOFTMAX, 2, sm_in, 1, sm_out));
    uint32_t ins[2] = {0, 1}, outs[1] = {8};
    CHECK(ANeuralNetworksModel_identifyInputsAndOutputs(model, 2, ins, 1, outs));
    CHECK(ANeuralNetworksModel_finish(model));

    ANeuralNetworksCompilation* compilation = NULL;
    CHECK(ANeuralNetworksCompilation_create(model, &compilation));
    CHECK(ANeuralNetworksCompilation_finish(compilation));

    float a[8] = {1, 2, 3, 4, -1, -2, 3, 4};
    float b[8] = {0.5f, 0.5f, 0.5f, 0.5f, 1, 1, -1, -1};
    float out[8] = {0};
    ANeuralNetworksExecution* execution = NULL;
    CHECK(ANeuralNetworksExecution_create(compilation, &execution));
    CHECK(ANeuralNetworksExecution_setInput(execution, 0, NULL, a, sizeof a));
    CHECK(ANeuralNetworksExecution_setInput(execution, 1, NULL, b, sizeof b));
    CHECK(ANeuralNetworksExecution_setOutput(execution, 0, NULL, out, sizeof out));
    CHECK(ANeuralNetworksExecution_compute(execution));

    ANeuralNetworksDevice* device = NULL;
    const char* name = NULL;
    CHECK(ANeuralNetworks_getDevice(0, &device));
    CHECK(ANeuralNetworksDevice_getName(device, &name));
    printf("nnapi_py demo on device \"%s\" (runtime feature level %lld)\n", name,
           (long long)ANeuralNetworks_getRuntimeFeatureLevel());
    printf("softmax(relu(a + b) * c) =\n");
    for (int r = 0; r < 2; r++) {
        printf("  [");
        for (int k = 0; k < 4; k++) printf("%s%.6f", k ? ", " : "", out[r * 4 + k]);
        printf("]\n");
    }
    /* a bad call returns an error code with a reason */
    int rc = ANeuralNetworksExecution_compute(execution);
    printf("computing a finished, non-reusable execution again -> %d (%s)\n", rc, nnapi_py_last_error());

    ANeuralNetworksExecution_free(execution);
    ANeuralNetworksCompilation_free(compilation);
    ANeuralNetworksModel_free(model);
    return 0;
}
