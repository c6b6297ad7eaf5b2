"""The same MobileNetV2-style network as bench_mobilenet.c in PyTorch eager (CPU, 1 thread).

Prints "torch_float32 <ms>" (best of N), and with --quantized "torch_quant8 <ms> <engine>": the
same network quantized with PyTorch's own tools (FX graph mode, default qconfig, 4 calibration
batches) on the fastest of its quantized engines (x86 / fbgemm / qnnpack), best of N.
Optional: needs `pip install torch==2.13.0`.
"""
import sys
import time


def network(torch):
    """The MobileNetV2-style network of bench_mobilenet.c (random weights, eval mode)."""
    from torch import nn

    def conv(cin, cout, k, s, groups=1, act=True):
        layers = [nn.Conv2d(cin, cout, k, s, padding=k // 2, groups=groups, bias=True)]
        if act:
            layers.append(nn.ReLU6())
        return layers

    class Block(nn.Module):
        def __init__(self, cin, cout, t, s):
            super().__init__()
            hid = cin * t
            layers = [] if t == 1 else conv(cin, hid, 1, 1)
            layers += conv(hid, hid, 3, s, groups=hid) + conv(hid, cout, 1, 1, act=False)
            self.body = nn.Sequential(*layers)
            self.res = s == 1 and cin == cout

        def forward(self, x):
            y = self.body(x)
            return x + y if self.res else y

    layers = conv(3, 32, 3, 2)
    c = 32
    for t, cout, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                          (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for r in range(n):
            layers.append(Block(c, cout, t, s if r == 0 else 1))
            c = cout
    layers += conv(c, 1280, 1, 1) + [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, 1000)]
    return nn.Sequential(*layers).eval()


def best_ms(fn, runs):
    """The fastest of `runs` calls of fn(), in ms."""
    best = 1e30
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def quantized(torch, runs):
    import warnings
    warnings.filterwarnings("ignore")
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    torch.manual_seed(0)
    x = torch.rand(1, 3, 224, 224)
    results = []
    for engine in ("x86", "fbgemm", "qnnpack"):
        if engine not in torch.backends.quantized.supported_engines:
            continue
        torch.backends.quantized.engine = engine
        prepared = prepare_fx(network(torch), get_default_qconfig_mapping(engine), (x,))
        with torch.no_grad():
            for _ in range(4):
                prepared(torch.rand(1, 3, 224, 224))
            q = convert_fx(prepared)
            q(x)
            best = best_ms(lambda: q(x), runs)
        results.append((best, engine))
    best, engine = min(results)
    print(f"torch_quant8 {best:.3f} {engine} numpy_gemm_floor {gemm_floor(torch, x, runs):.3f}")
    return 0


def gemm_floor(torch, x, runs):
    """Best ms of the network's dense products alone as bare float32 numpy matmuls, in this
    process right after PyTorch's quantized runs: every convolution that is not depthwise (the
    stem as its [pixels, 27] patch matrix, the 1x1 layers as [pixels, C]) and the fully
    connected layer, with no depthwise layer, requantization, patch gathering or anything else.
    float32 BLAS is the fastest product numpy has (it has no int8 GEMM: its integer matmul
    does not use BLAS), so this is a floor under any numpy-based quant8 network."""
    import numpy as np
    shapes = []

    def record(mod, inp, out):
        if isinstance(mod, torch.nn.Linear):
            shapes.append((inp[0].shape[0], mod.in_features, mod.out_features))
        elif mod.groups == 1:
            k = mod.in_channels * mod.kernel_size[0] * mod.kernel_size[1]
            shapes.append((out.shape[2] * out.shape[3], k, mod.out_channels))
    net = network(torch)
    for mod in net.modules():
        if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)):
            mod.register_forward_hook(record)
    with torch.no_grad():
        net(x)
    rng = np.random.default_rng(0)
    mats = [(rng.random((m, k), np.float32), rng.random((k, n), np.float32), np.empty((m, n), np.float32))
            for m, k, n in shapes]
    def products():
        for a, b, o in mats:
            np.matmul(a, b, out=o)
    return best_ms(products, max(runs, 10))


def main(runs=10):
    try:
        import torch
    except ImportError:
        print("torch_float32 unavailable (PyTorch not installed)")
        return 0
    torch.set_num_threads(1)
    if "--quantized" in sys.argv:
        return quantized(torch, runs)
    net = network(torch)
    x = torch.rand(1, 3, 224, 224)
    with torch.no_grad():
        net(x)
        best = best_ms(lambda: net(x), runs)
    print(f"torch_float32 {best:.3f}")
    return 0


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    sys.exit(main(int(args[0]) if args else 10))
