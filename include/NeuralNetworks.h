#ifndef NNAPI_PY_NEURALNETWORKS_H_SHIM
#define NNAPI_PY_NEURALNETWORKS_H_SHIM
/* Lets both <NeuralNetworks.h> and <android/NeuralNetworks.h> work. */
#include "android/NeuralNetworks.h"
#endif
