"""The Python API in one page: build a small network, inspect it, run it four ways.

    .venv/bin/python examples/python_api.py
"""
import numpy as np

import nnapi_py as nn

# A tiny classifier head: y = softmax(relu(x @ W1' + b1) @ W2' + b2)
rng = np.random.default_rng(0)
m = nn.Model("head")
x = m.input("x", nn.float32, (0, 8))                       # batch size given at run time
h = m.op("FULLY_CONNECTED", x, rng.normal(size=(16, 8)).astype(np.float32),
         np.zeros(16, np.float32), 1)                         # 1 = fused RELU
logits = m.op("FULLY_CONNECTED", h, rng.normal(size=(3, 16)).astype(np.float32), np.zeros(3, np.float32), 0)
m.output(m.op("SOFTMAX", logits, 1.0), "y")

print(m.summary())

c = m.compile(preference="sustained_speed")
batch = rng.normal(size=(2, 8)).astype(np.float32)
print("y =", c.run({"x": batch})["y"])                       # one synchronous execution
print("async:", c.run_async({"x": batch})["y"].sum(axis=1))   # startCompute + Event_wait
burst = c.burst()                                             # low-overhead repeated runs
print("burst:", burst.run({"x": batch[:1]})["y"].shape)
e = c.execution(reusable=True)                                # bind once, compute many times
for _ in range(3):
    e.run({"x": batch})

try:                                                          # errors carry the library's reason
    bad = nn.Model()
    a = bad.input("a", nn.float32, (2,))
    bad.output(bad.op("ADD", a, a, 9), "z")
    bad.compile()
except nn.NNAPIError as err:
    print("rejected:", err.code_name, "-", err.reason)
