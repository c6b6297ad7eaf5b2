/* A host whose Python is another version than the library was built for (issue 26.11): this
 * program defines Py_GetVersion itself and is linked with -rdynamic, so the library's start-up
 * check sees "3.99.1 (...)".  Every call must return OP_FAILED, and the one stderr line must show
 * the whole version string (build and compiler), not a prefix of it. */
#include <stdio.h>

#include <android/NeuralNetworks.h>

const char* Py_GetVersion(void);
const char* Py_GetVersion(void) { return "3.99.1 (main, May  9 2024, 12:34:56) [GCC 12.2.0]"; }

int main(void) {
    ANeuralNetworksModel* m = NULL;
    int rc = ANeuralNetworksModel_create(&m);
    printf("%d\n", rc);
    return rc == ANEURALNETWORKS_OP_FAILED ? 0 : 1;
}
