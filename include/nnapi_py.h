/*
 * nnapi_py.h -- extras exported by nnapi_py's libneuralnetworks.so beside the NNAPI.
 */
#ifndef NNAPI_PY_H
#define NNAPI_PY_H

#ifdef __cplusplus
extern "C" {
#endif

/* The one-line reason of the calling thread's most recent failed ANeuralNetworks* call
   ("" if none).  Valid until the same thread's next call. */
const char* nnapi_py_last_error(void);

/* The result code of that call (0 if none). */
int nnapi_py_last_error_code(void);

#ifdef __cplusplus
}
#endif

#endif /* NNAPI_PY_H */
