/* feature_level.c -- print the NNAPI feature level of the library this program is linked with
 * (examples/cmake/CMakeLists.txt links it with nnapi_py::feature_level_5: it prints 31, the value
 * of ANEURALNETWORKS_FEATURE_LEVEL_5) and the devices it sees. */
#include <android/NeuralNetworks.h>
#include <stdio.h>

int main(void) {
    printf("runtime feature level: %lld\n", (long long)ANeuralNetworks_getRuntimeFeatureLevel());
    uint32_t n = 0;
    if (ANeuralNetworks_getDeviceCount(&n) != ANEURALNETWORKS_NO_ERROR) return 1;
    for (uint32_t i = 0; i < n; i++) {
        ANeuralNetworksDevice* device = NULL;
        const char* name = NULL;
        int64_t level = 0;
        if (ANeuralNetworks_getDevice(i, &device) != ANEURALNETWORKS_NO_ERROR
            || ANeuralNetworksDevice_getName(device, &name) != ANEURALNETWORKS_NO_ERROR
            || ANeuralNetworksDevice_getFeatureLevel(device, &level) != ANEURALNETWORKS_NO_ERROR)
            return 1;
        printf("device %u: %s (feature level %lld)\n", i, name, (long long)level);
    }
    return 0;
}
