"""The MobileNetV2-style network (bench/mobilenet_torch.py) converted by PyTorch's NNAPI backend and
run through our library inside this Python process, beside the same network in torch eager.

Prints "torch_nnapi_float32 <ms> torch_eager_float32 <ms>": medians of N runs each, measured
alternately in the same process, one thread.  Needs torch (CI installs torch==2.13.0).
"""
import ctypes
import statistics
import sys
import time


def main(runs=10):
    try:
        import torch
        from torch.backends._nnapi.prepare import convert_model_to_nnapi
    except ImportError:
        print("torch_nnapi_float32 unavailable (PyTorch not installed)")
        return 0
    import nnapi_py
    from mobilenet_torch import network
    ctypes.CDLL(nnapi_py.library_path())     # torch's dlopen("libneuralnetworks.so") finds this copy
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = network(torch)
    x = torch.rand(1, 3, 224, 224)
    xn = x.contiguous(memory_format=torch.channels_last)
    xn.nnapi_nhwc = True
    with torch.no_grad():
        nn = convert_model_to_nnapi(torch.jit.trace(net, x), xn)
        got, want = nn(xn), net(x)
        got = got[0] if isinstance(got, (list, tuple)) else got
        err = float((got - want).abs().max())
        if err > 1e-3 * max(1.0, float(want.abs().max())):
            print(f"torch_nnapi_float32 wrong (max abs difference {err:g})")
            return 1
        t_nn, t_eager = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            nn(xn)
            t_nn.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            net(x)
            t_eager.append((time.perf_counter() - t0) * 1e3)
    print(f"torch_nnapi_float32 {statistics.median(t_nn):.3f} torch_eager_float32 {statistics.median(t_eager):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10))
