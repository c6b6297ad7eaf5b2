"""A 2-layer LSTM (input 40, 512 units, projection 128, 100 time steps, batch 1, float32) built
and run through the C API (cffi over libneuralnetworks.so: two UNIDIRECTIONAL_SEQUENCE_LSTM
operations), beside torch.nn.LSTM(40, 512, num_layers=2, proj_size=128) eager with the same
weights, one thread, measured alternately in one process.

Prints "lstm_nnapi <ms> lstm_torch <ms>" (medians), or "lstm unavailable (...)".
"""
import statistics
import sys
import time

import numpy as np

T_STEPS, N_IN, UNITS, PROJ, LAYERS = 100, 40, 512, 128, 2


def build(ffi, lib, layers, keep):
    """layers: [(w_ih [4U, I], w_hh [4U, P], bias [4U], w_hr [P, U]), ...] in torch's gate order i, f, g, o."""
    F32, I32S, F32S, BOOL = 3, 1, 0, 6
    mp = ffi.new("ANeuralNetworksModel**")
    assert lib.ANeuralNetworksModel_create(mp) == 0
    m = mp[0]
    count = [0]

    def operand(t, dims, value=None):
        d = ffi.new("uint32_t[]", dims) if dims else ffi.NULL
        keep.append(d)
        ot = ffi.new("ANeuralNetworksOperandType*", {"type": t, "dimensionCount": len(dims), "dimensions": d,
                                                     "scale": 0.0, "zeroPoint": 0})
        assert lib.ANeuralNetworksModel_addOperand(m, ot) == 0
        k = count[0]
        count[0] += 1
        if value is not None:
            a = np.ascontiguousarray(value)
            keep.append(a)
            assert lib.ANeuralNetworksModel_setOperandValue(m, k, ffi.from_buffer(a), a.nbytes) == 0
        elif t != F32 or dims == [0]:
            assert lib.ANeuralNetworksModel_setOperandValue(m, k, ffi.NULL, 0) == 0     # omitted
        return k

    x = operand(F32, [T_STEPS, 1, N_IN])
    inputs = [x]
    cur, n_in = x, N_IN
    for w_ih, w_hh, bias, w_hr in layers:
        gate = lambda w, g: np.ascontiguousarray(w[g * UNITS:(g + 1) * UNITS], np.float32)   # noqa: E731
        order = (0, 1, 2, 3)        # i, f, g(cell), o in torch == NNAPI's i, f, c, o
        ins = [cur]
        ins += [operand(F32, [UNITS, n_in], gate(w_ih, g)) for g in order]
        ins += [operand(F32, [UNITS, PROJ], gate(w_hh, g)) for g in order]
        ins += [operand(F32, [0]) for _ in range(3)]                                   # no peephole
        ins += [operand(F32, [UNITS], gate(bias, g)) for g in order]
        ins += [operand(F32, [PROJ, UNITS], np.ascontiguousarray(w_hr, np.float32)), operand(F32, [0])]
        ins += [operand(F32, [1, PROJ], np.zeros((1, PROJ), np.float32)),
                operand(F32, [1, UNITS], np.zeros((1, UNITS), np.float32))]
        ins += [operand(I32S, [], np.array(4, np.int32)), operand(F32S, [], np.array(0, np.float32)),
                operand(F32S, [], np.array(0, np.float32)), operand(BOOL, [], np.array(1, np.uint8))]
        ins += [operand(F32, [0]) for _ in range(4)]                                   # no layer norm
        out = operand(F32, [T_STEPS, 1, PROJ])
        a = ffi.new("uint32_t[]", ins)
        o = ffi.new("uint32_t[]", [out])
        assert lib.ANeuralNetworksModel_addOperation(m, 92, len(ins), a, 1, o) == 0, "addOperation"
        cur, n_in = out, PROJ
    assert lib.ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, ffi.new("uint32_t[]", inputs), 1,
                                                             ffi.new("uint32_t[]", [cur])) == 0
    assert lib.ANeuralNetworksModel_finish(m) == 0
    cp = ffi.new("ANeuralNetworksCompilation**")
    assert lib.ANeuralNetworksCompilation_create(m, cp) == 0
    assert lib.ANeuralNetworksCompilation_finish(cp[0]) == 0
    return m, cp[0]


def main(runs=15):
    try:
        import warnings
        import torch
        warnings.filterwarnings("ignore", message="LSTM with projections is not supported with oneDNN")
    except ImportError:
        print("lstm unavailable (PyTorch not installed)")
        return 0
    from nnapi_py import ffi, lib
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = torch.nn.LSTM(N_IN, UNITS, num_layers=LAYERS, proj_size=PROJ).eval()
    layers = []
    for k in range(LAYERS):
        g = lambda n: getattr(net, f"{n}_l{k}").detach().numpy()   # noqa: E731
        layers.append((g("weight_ih"), g("weight_hh"), g("bias_ih") + g("bias_hh"), g("weight_hr")))
    keep = []
    model, comp = build(ffi, lib, layers, keep)
    x = np.random.default_rng(0).standard_normal((T_STEPS, 1, N_IN)).astype(np.float32)
    y = np.empty((T_STEPS, 1, PROJ), np.float32)
    ep = ffi.new("ANeuralNetworksExecution**")
    assert lib.ANeuralNetworksExecution_create(comp, ep) == 0
    ex = ep[0]
    assert lib.ANeuralNetworksExecution_setReusable(ex, True) == 0
    assert lib.ANeuralNetworksExecution_setInput(ex, 0, ffi.NULL, ffi.from_buffer(x), x.nbytes) == 0
    assert lib.ANeuralNetworksExecution_setOutput(ex, 0, ffi.NULL, ffi.from_buffer(y), y.nbytes) == 0
    xt = torch.from_numpy(x)

    def ours():
        assert lib.ANeuralNetworksExecution_compute(ex) == 0

    def theirs():
        with torch.no_grad():
            return net(xt)[0]

    ours()
    want = theirs().numpy()
    err = float(np.abs(y - want).max())
    if err > 1e-4 * max(1.0, float(np.abs(want).max())):
        print(f"lstm wrong (max abs difference {err:g})")
        return 1
    a, b = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        ours()
        a.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        theirs()
        b.append(time.perf_counter() - t0)
    lib.ANeuralNetworksExecution_free(ex)
    lib.ANeuralNetworksCompilation_free(comp)
    lib.ANeuralNetworksModel_free(model)
    print(f"lstm_nnapi {statistics.median(a) * 1e3:.3f} lstm_torch {statistics.median(b) * 1e3:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
