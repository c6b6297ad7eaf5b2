"""Testing helpers that are a client of the library (as numpy.testing is of numpy): nothing in the runtime
imports them (tests/test_layering.py).

cts       the NNAPI conformance runner: Android's CTS vectors run through libneuralnetworks.so's C ABI in
          every execution mode (`python -m nnapi_py.testing.cts --help`); its pieces are vectors.py (the
          vectors and their tolerance), abi.py (the library and a model built call by call) and runner.py.
corpus    the real .tflite models of the tests and benchmarks, fetched from the packages that ship them into
          build/corpus (or $NNAPI_PY_CORPUS), and the comparison policy against LiteRT.
"""
