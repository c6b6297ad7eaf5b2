"""Per-call overhead of the Python API above the raw cffi calls it makes, same process, medians.

builder: Model.input / Model.constant / Model.op versus the ANeuralNetworksModel_addOperand /
setOperandValue / addOperation calls they issue (per Python API call); run: Compilation's
reusable Execution.run versus the raw compute call it makes (no getOutputOperand* calls: the
output's shape is fully specified).
Prints "pyapi_builder_us <extra us per call> pyapi_run_us <extra us per run>".
"""
import statistics
import sys
import time

import numpy as np


def median_us(fn, n, repeats=7):
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(n)
        ts.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(ts)


def main():
    import nnapi_py as nn
    from nnapi_py import ffi, lib
    n = 300
    dims = ffi.new("uint32_t[]", [1, 4])
    t = ffi.new("ANeuralNetworksOperandType*", {"type": 3, "dimensionCount": 2, "dimensions": dims})
    s = ffi.new("ANeuralNetworksOperandType*", {"type": 1, "dimensionCount": 0, "dimensions": ffi.NULL})
    zero = np.zeros(1, np.int32)
    ins = ffi.new("uint32_t[]", 3)
    outs = ffi.new("uint32_t[]", 1)

    def raw(k):                      # one ADD with a fused-activation scalar, per iteration
        p = ffi.new("ANeuralNetworksModel**")
        lib.ANeuralNetworksModel_create(p)
        m = p[0]
        lib.ANeuralNetworksModel_addOperand(m, t)
        for i in range(k):
            lib.ANeuralNetworksModel_addOperand(m, s)
            lib.ANeuralNetworksModel_setOperandValue(m, 2 * i + 1, ffi.from_buffer(zero), 4)
            lib.ANeuralNetworksModel_addOperand(m, t)
            ins[0], ins[1], ins[2], outs[0] = 2 * i, 2 * i, 2 * i + 1, 2 * i + 2
            lib.ANeuralNetworksModel_addOperation(m, 0, 3, ins, 1, outs)
        lib.ANeuralNetworksModel_free(m)

    def api(k):
        m = nn.Model()
        x = m.input("x", nn.float32, (1, 4))
        for _ in range(k):
            x = m.op("ADD", x, x, 0, outputs=[(nn.float32, (1, 4))])

    raw_us, api_us = median_us(raw, n), median_us(api, n)
    calls = 4                                          # raw calls per Python-API op
    builder = (api_us - raw_us) / calls

    m = nn.Model()
    x = m.input("x", nn.float32, (1, 4))
    m.output(m.op("RELU", x, outputs=[(nn.float32, (1, 4))]), "y")
    c = m.compile()
    e = c.execution(reusable=True)
    xin = np.ones((1, 4), np.float32)
    e.run({"x": xin})
    def raw_run(k):                  # the calls run() makes: its output is fully specified,
        for _ in range(k):           # so it asks for no output dimensions
            lib.ANeuralNetworksExecution_compute(e.handle)

    def api_run(k):
        for _ in range(k):
            e.run()

    run_extra = median_us(api_run, 2000) - median_us(raw_run, 2000)
    print(f"pyapi_builder_us {builder:.3f} pyapi_run_us {run_extra:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
