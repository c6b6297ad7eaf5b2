/*
 * test_dlopen.c -- load libneuralnetworks.so at run time the way Android apps
 * and frameworks do: dlopen("libneuralnetworks.so", RTLD_LAZY | RTLD_LOCAL)
 * by bare name (found through LD_LIBRARY_PATH), dlsym every one of the 69
 * ANeuralNetworks* functions, then build and run a small ADD model through the
 * function pointers.  NOT linked against the library.
 *
 *   test_dlopen [--dlclose]     --dlclose: dlclose() the library before exiting
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <android/NeuralNetworks.h>

#include "check.h"
#include "nn_dlsym.h"

static void* g_lib;

static int load_all(void) {
    int missing = 0, count = 0;
#define LOAD_PTR(name)                                                          \
    p_##name = (__typeof__(&name))dlsym(g_lib, #name);                          \
    count++;                                                                    \
    if (!CHECK_MSG(p_##name != NULL, "dlsym(%s): %s", #name, dlerror())) missing++;
    NNAPI_FUNCTIONS(LOAD_PTR)
#undef LOAD_PTR
    CHECK_VAL(count, NNAPI_FUNCTION_COUNT);
    return missing;
}

static void run_add_model(void) {
    ck_section("ADD model through dlsym'd pointers");
    ANeuralNetworksModel* m = NULL;
    REQUIRE_RC(p_ANeuralNetworksModel_create(&m), ANEURALNETWORKS_NO_ERROR);
    nn_dl_add_model(m);
    REQUIRE_RC(p_ANeuralNetworksModel_finish(m), ANEURALNETWORKS_NO_ERROR);
    ANeuralNetworksCompilation* c = NULL;
    REQUIRE_RC(p_ANeuralNetworksCompilation_create(m, &c), ANEURALNETWORKS_NO_ERROR);
    REQUIRE_RC(p_ANeuralNetworksCompilation_finish(c), ANEURALNETWORKS_NO_ERROR);
    float a[4] = {1, 2, 3, 4}, b[4] = {0.5f, 0.25f, -1, 10}, o[4] = {0};
    ANeuralNetworksExecution* e = NULL;
    REQUIRE_RC(p_ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(p_ANeuralNetworksExecution_setInput(e, 0, NULL, a, sizeof a), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(p_ANeuralNetworksExecution_setInput(e, 1, NULL, b, sizeof b), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(p_ANeuralNetworksExecution_setOutput(e, 0, NULL, o, sizeof o), ANEURALNETWORKS_NO_ERROR);
    ANeuralNetworksEvent* ev = NULL;
    CHECK_RC(p_ANeuralNetworksExecution_startCompute(e, &ev), ANEURALNETWORKS_NO_ERROR);
    CHECK_RC(p_ANeuralNetworksEvent_wait(ev), ANEURALNETWORKS_NO_ERROR);
    int bad = 0;
    for (int i = 0; i < 4; i++) bad += o[i] != a[i] + b[i];
    CHECK_MSG(bad == 0, "ADD result wrong: %g %g %g %g", (double)o[0], (double)o[1], (double)o[2], (double)o[3]);
    p_ANeuralNetworksEvent_free(ev);
    p_ANeuralNetworksExecution_free(e);
    p_ANeuralNetworksCompilation_free(c);
    p_ANeuralNetworksModel_free(m);

    uint32_t n = 0;
    CHECK_RC(p_ANeuralNetworks_getDeviceCount(&n), ANEURALNETWORKS_NO_ERROR);
    CHECK(n >= 1);
    CHECK_VAL(p_ANeuralNetworks_getRuntimeFeatureLevel(), ANEURALNETWORKS_FEATURE_LEVEL_8);
    /* an error path, to see that the error reporting works through dlopen too */
    CHECK_RC(p_ANeuralNetworksModel_create(NULL), ANEURALNETWORKS_UNEXPECTED_NULL);
}

int main(int argc, char** argv) {
    int do_dlclose = argc > 1 && strcmp(argv[1], "--dlclose") == 0;
    check_init(50);
    ck_section("dlopen by bare name");
    g_lib = dlopen("libneuralnetworks.so", RTLD_LAZY | RTLD_LOCAL);
    if (!CHECK_MSG(g_lib != NULL, "dlopen(\"libneuralnetworks.so\"): %s", dlerror())) return check_summary();
    /* the library's own error-message accessor, if it exports one */
    ck_last_error_fn = (const char* (*)(void))dlsym(g_lib, "nnapi_py_last_error");
    CHECK_MSG(ck_last_error_fn != NULL, "nnapi_py_last_error is not exported");
    Dl_info info;
    memset(&info, 0, sizeof info);
    void* sym = dlsym(g_lib, "ANeuralNetworksModel_create");
    if (sym && dladdr(sym, &info)) printf("loaded from %s\n", info.dli_fname ? info.dli_fname : "?");
    /* a second dlopen gives the same library */
    void* again = dlopen("libneuralnetworks.so", RTLD_LAZY | RTLD_LOCAL);
    CHECK(again == g_lib);
    if (again) dlclose(again);

    ck_section("dlsym of all 69 functions");
    if (load_all() != 0) return check_summary();
    run_add_model();
    if (do_dlclose) {
        ck_section("dlclose");
        ck_last_error_fn = NULL;
        CHECK_VAL(dlclose(g_lib), 0);
    }
    return check_summary();
}
