/*
 * examples/fallback.c -- a client's fallback path, tested on a desktop.
 *
 *   NNAPI_PY_DEVICES="gpu=float-fast,npu=quant" NNAPI_PY_FAULTS="gpu:execute-fail@every=2" ./fallback
 *
 * The client prefers the GPU (createForDevices); when an execution there fails it retries
 * with a compilation the runtime may place anywhere (Compilation_create, CPU fallback allowed).
 * The fault fails every 2nd execution the GPU receives, and the retries run there too (the
 * runtime places the ADD on the faster GPU), so they count: the GPU's executions 2, 4 and 6
 * fail, which are runs 1, 2 and 3:
 *
 *   run 0: GPU ok, y[3] = 0
 *   run 1: GPU failed, fallback ok, y[3] = 2
 *   run 2: GPU failed, fallback ok, y[3] = 4
 *   run 3: GPU failed, fallback ok, y[3] = 6
 *   3 fallbacks in 4 runs
 */
#include <stdio.h>
#include <string.h>

#include <android/NeuralNetworks.h>

static ANeuralNetworksDevice* find(const char* wanted) {
    uint32_t n = 0;
    ANeuralNetworks_getDeviceCount(&n);
    for (uint32_t i = 0; i < n; i++) {
        ANeuralNetworksDevice* d;
        const char* name;
        ANeuralNetworks_getDevice(i, &d);
        ANeuralNetworksDevice_getName(d, &name);
        if (strcmp(name, wanted) == 0) return d;
    }
    return NULL;
}

static ANeuralNetworksModel* add_model(void) {     /* out = a + b, float32[4] */
    ANeuralNetworksModel* m;
    uint32_t dims[1] = {4};
    ANeuralNetworksOperandType t = {ANEURALNETWORKS_TENSOR_FLOAT32, 1, dims, 0.0f, 0};
    ANeuralNetworksOperandType s = {ANEURALNETWORKS_INT32, 0, NULL, 0.0f, 0};
    int32_t none = ANEURALNETWORKS_FUSED_NONE;
    uint32_t in[3] = {0, 1, 2}, out[1] = {3};
    ANeuralNetworksModel_create(&m);
    ANeuralNetworksModel_addOperand(m, &t);
    ANeuralNetworksModel_addOperand(m, &t);
    ANeuralNetworksModel_addOperand(m, &s);
    ANeuralNetworksModel_addOperand(m, &t);
    ANeuralNetworksModel_setOperandValue(m, 2, &none, sizeof none);
    ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out);
    ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, in, 1, out);
    ANeuralNetworksModel_finish(m);
    return m;
}

static int run(ANeuralNetworksCompilation* c, const float* a, float* y) {
    ANeuralNetworksExecution* e;
    ANeuralNetworksExecution_create(c, &e);
    ANeuralNetworksExecution_setInput(e, 0, NULL, a, 4 * sizeof(float));
    ANeuralNetworksExecution_setInput(e, 1, NULL, a, 4 * sizeof(float));
    ANeuralNetworksExecution_setOutput(e, 0, NULL, y, 4 * sizeof(float));
    int rc = ANeuralNetworksExecution_compute(e);
    ANeuralNetworksExecution_free(e);
    return rc;
}

int main(void) {
    ANeuralNetworksModel* m = add_model();
    const ANeuralNetworksDevice* gpu[1] = {find("gpu")};
    ANeuralNetworksCompilation *on_gpu = NULL, *anywhere = NULL;
    if (!gpu[0] || ANeuralNetworksCompilation_createForDevices(m, gpu, 1, &on_gpu) ||
        ANeuralNetworksCompilation_finish(on_gpu)) {
        printf("no GPU: run NNAPI_PY_DEVICES=\"gpu=float-fast,npu=quant\" %s\n", "./fallback");
        return 1;
    }
    ANeuralNetworksCompilation_create(m, &anywhere);
    ANeuralNetworksCompilation_finish(anywhere);
    int fallbacks = 0;
    for (int i = 0; i < 4; i++) {
        float a[4] = {1, 2, 3, (float)i}, y[4];
        int rc = run(on_gpu, a, y), fell_back = rc != ANEURALNETWORKS_NO_ERROR;
        if (fell_back) {                                /* the path this example is about */
            fallbacks++;
            rc = run(anywhere, a, y);
        }
        printf("run %d: GPU %s%s, y[3] = %g\n", i, fell_back ? "failed, fallback " : "", rc ? "failed" : "ok", y[3]);
    }
    printf("%d fallbacks in 4 runs\n", fallbacks);
    ANeuralNetworksCompilation_free(on_gpu);
    ANeuralNetworksCompilation_free(anywhere);
    ANeuralNetworksModel_free(m);
    return 0;
}
