/* bench_cold.c -- cold start: this whole process, from exec to the first result, is timed
 * by bench/run.py.  It builds a one-operation model, computes it and prints the result. */
#include <android/NeuralNetworks.h>
#include <stdio.h>

int main(void) {
    uint32_t dims[1] = {4};
    ANeuralNetworksOperandType t = {ANEURALNETWORKS_TENSOR_FLOAT32, 1, dims, 0.f, 0};
    ANeuralNetworksOperandType s = {ANEURALNETWORKS_INT32, 0, NULL, 0.f, 0};
    ANeuralNetworksModel* m = NULL;
    ANeuralNetworksCompilation* c = NULL;
    ANeuralNetworksExecution* e = NULL;
    int32_t none = 0;
    uint32_t in[3] = {0, 1, 2}, out[1] = {3}, mi[2] = {0, 1};
    float a[4] = {1, 2, 3, 4}, b[4] = {4, 3, 2, 1}, o[4] = {0};
    int rc = ANeuralNetworksModel_create(&m);
    rc |= ANeuralNetworksModel_addOperand(m, &t);
    rc |= ANeuralNetworksModel_addOperand(m, &t);
    rc |= ANeuralNetworksModel_addOperand(m, &s);
    rc |= ANeuralNetworksModel_addOperand(m, &t);
    rc |= ANeuralNetworksModel_setOperandValue(m, 2, &none, 4);
    rc |= ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_ADD, 3, in, 1, out);
    rc |= ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, mi, 1, out);
    rc |= ANeuralNetworksModel_finish(m);
    rc |= ANeuralNetworksCompilation_create(m, &c);
    rc |= ANeuralNetworksCompilation_finish(c);
    rc |= ANeuralNetworksExecution_create(c, &e);
    rc |= ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a);
    rc |= ANeuralNetworksExecution_setInput(e, 1, NULL, b, sizeof b);
    rc |= ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o);
    rc |= ANeuralNetworksExecution_compute(e);
    printf("%d %g %g %g %g\n", rc, o[0], o[1], o[2], o[3]);
    return rc != 0 || o[0] != 5.f;
}
