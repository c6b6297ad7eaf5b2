"""`make bench`: build the C benchmarks against the library, run them, compare with targets.

API overhead (bench_api.c, median of repeated batches; the median of 5 runs), cold start
(bench_cold.c: whole process, median of 7 runs), and the MobileNetV2-style network (bench_mobilenet.c, float32
and quant8, single-threaded BLAS) compared with PyTorch eager when PyTorch is installed (5 rounds of the
four in turn: medians, and ratios as the median of each round's own ratio), and
the same network converted by PyTorch's NNAPI backend and run through the library inside one
Python process beside torch eager (mobilenet_torch_nnapi.py), a 2-layer projected LSTM
through the C API beside torch.nn.LSTM (lstm.py), and an SSD-sized DETECTION_POSTPROCESSING head
in regular mode beside the class-by-class walk it replaced (detection.py).  The corpus's .tflite models
(tflite_models.py), each beside LiteRT, then issue 28's goal over its quantized CNNs: their
geometric mean of ours / LiteRT builtin (quantized_cnn_mean), and the compilation cache's
second / first compilation of FaceNet (compile_cache.py, compile_cached_ratio).  Thread scaling (bench_threads.c): runs
with 1 and 4 threads alternate, and the 4-vs-1 ratio is the median of each adjacent pair's
ratio (5 pairs for the small execution, 3 for the convolution), so a drift of the machine's
speed between runs does not enter it.  Every process runs with one BLAS thread (ENV); the
first line printed says which thread counts were in force.
"""
import math
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build", "bench")
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def build(name):
    os.makedirs(BUILD, exist_ok=True)
    exe = os.path.join(BUILD, name)
    src = os.path.join(ROOT, "bench", name + ".c")
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O2", "-std=c11", "-Wall", "-Wextra", src, "-o", exe, "-I" + os.path.join(ROOT, "include"),
                    "-L" + os.path.join(ROOT, "build", "lib"), "-lneuralnetworks",
                    "-Wl,-rpath," + os.path.join(ROOT, "build", "lib")], check=True)
    return exe


AT_LEAST = set()    # rows whose target is a floor (throughput ratios), not a ceiling
GOALS = set()       # speed goals (ratios to other engines, same run): shown ok / MISSED, but a
                    # missed goal does not make `make bench` fail -- the other targets do


def build_threads():
    """bench_threads.c needs -lpthread on top of the usual flags."""
    os.makedirs(BUILD, exist_ok=True)
    exe = os.path.join(BUILD, "bench_threads")
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O2", "-std=c11", "-Wall", "-Wextra", os.path.join(ROOT, "bench", "bench_threads.c"),
                    "-o", exe, "-I" + os.path.join(ROOT, "include"), "-L" + os.path.join(ROOT, "build", "lib"),
                    "-lneuralnetworks", "-Wl,-rpath," + os.path.join(ROOT, "build", "lib"), "-lpthread"], check=True)
    return exe


def threads_line():
    """What every benchmark runs with: numpy's BLAS threads as a child process with ENV reports
    them (nnapi_py.blas), and the other engines' settings."""
    r = subprocess.run([sys.executable, "-c", "import numpy; from nnapi_py import blas; print(blas.describe())"],
                       env=ENV, capture_output=True, text=True)
    pins = " ".join(f"{k}={ENV[k]}" for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"))
    return (f"threads: nnapi_py numpy BLAS {r.stdout.strip() or 'unknown: ' + r.stderr.strip()[-200:]} ({pins}); "
            f"LiteRT num_threads=1; PyTorch set_num_threads(1); the 4-vs-1 rows use 1 and 4 client threads")


def quantized_cnn_mean(rows, ratios):
    """Issue 28's goal row: the geometric mean of ours / LiteRT builtin over the quantized CNNs of
    the corpus (nnapi_py/testing/corpus.py QUANTIZED_CNNS: classifier, embedding network, detector),
    with the mean that also counts the tiny ones (TINY_QUANTIZED: fixed cost per call) under it."""
    from nnapi_py.testing.corpus import QUANTIZED_CNNS, TINY_QUANTIZED
    got = {r[0].split("/")[0].strip(): r[1] for r in rows if r[0].endswith("/builtin")}

    def mean(names):
        xs = [got[n] for n in names if n in got]
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan, len(xs)
    gm, n = mean(QUANTIZED_CNNS)
    if not n:
        return
    name = f"  quantized CNNs/builtin ({n} of {len(QUANTIZED_CNNS)}, geomean)"
    rows.append((name, gm, "x", 1.5))
    GOALS.add(name)
    gm_all, n_all = mean(QUANTIZED_CNNS + TINY_QUANTIZED)
    ratios[name] = (gm_all, f"with {', '.join(TINY_QUANTIZED)} ({n_all} models; 8x8 input: the fixed cost per call)")


def small_rows(rows, ratios):
    """Issue 41's rows (bench/small_path.py): (a) the largest per-operation time over the kernels of
    the corpus's tiny models whose tensors (constants included) have at most 4,096 elements
    (NNAPI_PY_PROFILE's timer; the median of each kernel's runs, its mean beside: on a shared
    machine a preempted kernel puts a time slice into the mean), goal 6 us; (b) the cost of an
    execution beyond its kernels, C host and Python host, for 16 operations: goal 10 + 0.5 x 16
    us; (c) each tiny model ours / LiteRT builtin kernels in one run: goal 4x, the int8 wake words
    2x; (e) for information, numpy's floor of the FULLY_CONNECTED-only tiny models (tflm_sine):
    its layers as the fewest numpy calls, no runtime, over LiteRT builtin, and our run over it."""
    script = os.path.join(ROOT, "bench", "small_path.py")
    r = subprocess.run([sys.executable, script, "all"], env=ENV, capture_output=True, text=True)
    from small_path import INT8_WAKE           # bench/ is this script's directory
    for line in (r.stdout or "").splitlines():
        parts = line.split()
        if parts[:1] == ["small_op_max"]:
            name = "small_op_max_median"
            rows.append((name, float(parts[1]), "us", 6.0))
            GOALS.add(name)
            rows.append(("  small_op_max_mean", float(parts[2]), "us", None))
            rows.append((f"  small_ops_above_6us (of {parts[4]})", float(parts[3]), "", None))
            print(f"small_op_max: {' '.join(parts[5:])}", file=sys.stderr)
        elif parts[:1] == ["small_exec_overhead_py"] or parts[:1] == ["small_exec_overhead_c"]:
            name = parts[0]
            rows.append((name, float(parts[1]), "us", 10 + 0.5 * int(parts[2])))
            GOALS.add(name)
        elif parts[:1] == ["tiny_overhead"] and len(parts) == 5:
            name = f"  tiny_overhead {parts[1]}"         # TfliteModel.run() with no-op kernels
            rows.append((name, float(parts[2]), "us", float(parts[4])))
            GOALS.add(name)
        elif parts[:1] == ["tiny_floor"] and len(parts) == 5:
            # numpy's floor for an FC-only tiny model (small_path.py floor): no runtime, fewest calls
            floor, builtin, ours = (float(v) for v in parts[2:])
            rows.append((f"  tiny_floor {parts[1]}/builtin", floor / builtin if builtin else float("nan"), "x", None))
            rows.append((f"  tiny_floor {parts[1]} ours/floor", ours / floor if floor else float("nan"), "x", None))
        elif parts[:1] == ["tiny"] and len(parts) == 4:
            ours, builtin = float(parts[2]), float(parts[3])
            name = f"  tiny {parts[1]}/builtin"
            rows.append((name, ours / builtin if builtin == builtin and builtin else float("nan"), "x",
                         2.0 if parts[1] in INT8_WAKE else 4.0))
            GOALS.add(name)
    if r.returncode and r.stderr:
        print(r.stderr.strip().splitlines()[-1], file=sys.stderr)


NET_ROUNDS = 5      # rounds of the MobileNetV2-style network: PyTorch eager, PyTorch quantized
                    # (a process each, best of 10 inferences), then ours float32 and quant8 in one
                    # process, their inferences alternating (best of 10 each)


def compile_cache_rows(rows):
    """Issue 39's row: the second compilation of FaceNet (from the compilation cache) over the
    first (empty cache: compiled and written), same process (compile_cache.py); the other
    model's times as information."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compile_cache.py")], env=ENV,
                       capture_output=True, text=True)
    for line in (r.stdout or "").splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0] == "compile_cache":
            first, second, mb = (float(x) for x in parts[2:])
            facenet = parts[1] == "facenet_uint8"
            rows.append(("compile_cached_ratio" if facenet else f"  {parts[1]}_cached_ratio", second / first, "x",
                         0.15 if facenet else None))
            rows.append((f"  {parts[1]}_first_compile", first, "ms", None))
            rows.append((f"  {parts[1]}_cached_compile", second, "ms", None))
            rows.append((f"  {parts[1]}_cache_entry", mb, "MB", None))
        elif line.startswith("compile_cache unavailable"):
            print(line, file=sys.stderr)
    if r.returncode and r.stderr:
        print(r.stderr.strip().splitlines()[-1], file=sys.stderr)


def _net_round(exe):
    """One round: {name: ms} of whatever ran (PyTorch only where installed)."""
    got = {}
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "mobilenet_torch.py")], env=ENV,
                       capture_output=True, text=True)
    m = re.match(r"torch_float32 ([\d.]+)", r.stdout or "")
    if m:
        got["torch_float32"] = float(m.group(1))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "mobilenet_torch.py"), "--quantized"], env=ENV,
                       capture_output=True, text=True)
    m = re.match(r"torch_quant8 ([\d.]+) (\w+)(?: numpy_gemm_floor ([\d.]+))?", r.stdout or "")
    if m:
        got["torch_quant8"] = float(m.group(1))
        got["engine"] = m.group(2)
        if m.group(3):
            got["numpy_gemm_floor"] = float(m.group(3))
    # ours: both networks in one process, inferences alternating (bench_mobilenet.c "both")
    r = subprocess.run([exe, "both", "10"], env=ENV, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed", file=sys.stderr)
        return got
    for line in r.stdout.splitlines():
        m = re.match(r"mobilenet_(float32|quant8) ([\d.]+)", line)
        if m:
            got[m.group(1)] = float(m.group(2))
        m = re.match(r"pairs quant8/float32 median ([\d.]+)", line)
        if m:
            got["pair"] = float(m.group(1))
    return got


def network_rows(rows, ratios):
    """The MobileNetV2-style network in NET_ROUNDS rounds: each time the median of the rounds,
    each ratio the median of the rounds' own ratios (the two sides measured within seconds of
    each other: the shared machine's speed drifts by 1.5x from minute to minute); quant8 /
    float32 from inferences alternating in one process (the median of adjacent pairs)."""
    exe = build("bench_mobilenet")
    rounds = [_net_round(exe) for _ in range(NET_ROUNDS)]

    def med(key):
        v = [r[key] for r in rounds if key in r]
        return statistics.median(v) if v else None

    def ratio(a, b):
        v = [r[a] / r[b] for r in rounds if a in r and b in r]
        return statistics.median(v) if v else None
    torch_ms, torch_q_ms = med("torch_float32"), med("torch_quant8")
    if torch_ms:
        rows.append(("torch_eager_float32", torch_ms, "ms", None))
    if torch_q_ms:
        engine = statistics.mode([r["engine"] for r in rounds if "engine" in r])
        rows.append((f"torch_quant8_{engine}", torch_q_ms, "ms", None))
    if med("numpy_gemm_floor"):     # the network's dense products alone as float32 numpy matmuls
        rows.append(("numpy_gemm_floor", med("numpy_gemm_floor"), "ms", None))
        ratios["numpy_gemm_floor"] = (ratio("numpy_gemm_floor", "torch_quant8"),
                                      "PyTorch quantized: numpy's fastest product, before any other work")
    for kind, factor in (("float32", 2.0), ("quant8", 3.0)):
        ms = med(kind)
        if ms is None:
            rows.append((f"mobilenet_{kind}", float("nan"), "ms", None))
            continue
        rows.append((f"mobilenet_{kind}", ms, "ms", factor * torch_ms if torch_ms else None))
        if kind == "quant8" and torch_q_ms:
            ratios[f"mobilenet_{kind}"] = (ratio("quant8", "torch_quant8"), "PyTorch quantized eager (same network)")
        ref = "torch_float32" if kind == "float32" else "torch_quant8"
        if ratio(kind, ref):    # the speed goals: at most PyTorch eager (float32), 2 x PyTorch quantized (quant8)
            name = "mobilenet_f32/torch" if kind == "float32" else "mobilenet_q8/torch_quant"
            rows.append((name, ratio(kind, ref), "x", 1.0 if kind == "float32" else 2.0))
            GOALS.add(name)
        pairs = [r["pair"] for r in rounds if "pair" in r]
        if kind == "quant8" and pairs:      # issue 28: quant8 no slower than float
            rows.append(("mobilenet_q8/f32", statistics.median(pairs), "x", 1.1))
            GOALS.add("mobilenet_q8/f32")
            ratios["mobilenet_q8/f32"] = (min(pairs), "in the lowest round (each round: the median of 10 adjacent "
                                          "float32 / quant8 inference pairs; rounds " +
                                          ", ".join(f"{v:.2f}" for v in pairs) + ")")


def main():
    print(threads_line())
    rows = []   # (name, value, unit, target)
    ratios = {}  # name -> (ratio, to what), printed under the row
    runs = {}                           # 5 runs of bench_api: the median of their medians, so
    for _ in range(5):                  # that one slow spell of a shared machine does not decide
        out = subprocess.run([build("bench_api")], env=ENV, capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            name, value, target = line.split()
            runs.setdefault((name, float(target)), []).append(float(value))
    for (name, target), values in runs.items():
        rows.append((name, statistics.median(values), "us", target))
    exe = build("bench_cold")
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        subprocess.run([exe], env=ENV, capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    rows.append(("cold_start", statistics.median(times), "s", 0.3))
    if "--quick" not in sys.argv:
        network_rows(rows, ratios)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "mobilenet_torch_nnapi.py")], env=ENV,
                           capture_output=True, text=True)
        m = re.match(r"torch_nnapi_float32 ([\d.]+) torch_eager_float32 ([\d.]+)", r.stdout or "")
        if m:   # PyTorch's NNAPI backend on our library, in one process, beside torch eager
            rows.append(("in_process_torch_eager", float(m.group(2)), "ms", None))
            rows.append(("in_process_torch_nnapi", float(m.group(1)), "ms", None))
            ratios["in_process_torch_nnapi"] = (float(m.group(1)) / float(m.group(2)), "torch eager, same process")
        elif r.stdout.strip():
            print(r.stdout.strip(), file=sys.stderr)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "detection.py")], env=ENV,
                           capture_output=True, text=True)
        m = re.match(r"detection_regular_ms ([\d.]+) class_by_class_ms ([\d.]+)", r.stdout or "")
        if m:   # SSD-sized DETECTION_POSTPROCESSING, regular mode, beside the class-by-class walk
            rows.append(("detection_ssd_regular", float(m.group(1)), "ms", None))
            rows.append(("  class_by_class/ours", float(m.group(2)) / float(m.group(1)), "x", 10.0))
            AT_LEAST.add("  class_by_class/ours")
            GOALS.add("  class_by_class/ours")
            ratios["detection_ssd_regular"] = (float(m.group(2)), "ms: the class-by-class walk (before issue 28)")
        elif (r.stdout or r.stderr).strip():
            print((r.stdout or r.stderr).strip().splitlines()[-1], file=sys.stderr)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "lstm.py")], env=ENV,
                           capture_output=True, text=True)
        m = re.match(r"lstm_nnapi ([\d.]+) lstm_torch ([\d.]+)", r.stdout or "")
        if m:   # 2-layer LSTM through the C API beside torch.nn.LSTM, same process, one thread
            rows.append(("lstm_torch_eager", float(m.group(2)), "ms", None))
            rows.append(("lstm_2layer_nnapi", float(m.group(1)), "ms", 1.5 * float(m.group(2))))
            ratios["lstm_2layer_nnapi"] = (float(m.group(1)) / float(m.group(2)), "torch.nn.LSTM eager, same process")
        elif (r.stdout or r.stderr).strip():
            print((r.stdout or r.stderr).strip().splitlines()[-1], file=sys.stderr)
    if "--quick" not in sys.argv:
        # executions from 4 C threads sharing one compilation, against 1 thread, same run
        exe = build_threads()
        for model, seconds, floor, pairs in (("small", 2, 0.9, 5), ("conv", 4, 1.6, 3)):
            runs = {1: [], 4: []}
            ratios_4_1 = []
            for _ in range(pairs):              # 1 and 4 threads alternately: drift hits both
                got = {}
                for n in (1, 4):
                    out = subprocess.run([exe, model, str(n), str(seconds)], env=ENV, capture_output=True, text=True)
                    if out.returncode == 0:
                        got[n] = float(out.stdout.split()[2])
                        runs[n].append(got[n])
                if len(got) == 2:               # the ratio of each adjacent pair of runs
                    ratios_4_1.append(got[4] / got[1])
            rate = {n: statistics.median(r) if r else float("nan") for n, r in runs.items()}
            rows.append((f"threads_{model}_1", rate[1], "/s", None))
            rows.append((f"threads_{model}_4", rate[4], "/s", None))
            rows.append((f"threads_{model}_4_vs_1", statistics.median(ratios_4_1) if ratios_4_1 else float("nan"),
                         "x", floor))
            AT_LEAST.add(f"threads_{model}_4_vs_1")
    if "--quick" not in sys.argv:
        # real .tflite models: ours vs LiteRT (XNNPACK / builtin kernels / reference), one thread
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "tflite_models.py")], env=ENV,
                           capture_output=True, text=True)
        for line in (r.stdout or "").splitlines():
            parts = line.split()
            if len(parts) == 6 and parts[0] == "tflite":
                ours, xnn, builtin, ref = (float(x) for x in parts[2:])
                name = f"tflite_{parts[1]}"
                rows.append((name, ours, "ms", None))
                ratios[name] = (ours / xnn, f"XNNPACK ({xnn:.3g} ms); {ours / ref:.2f} x reference kernels "
                                            f"({ref:.3g} ms)")
                if builtin == builtin:      # the goal: at most LiteRT's builtin kernels (no XNNPACK)
                    rows.append((f"  {parts[1]}/builtin", ours / builtin, "x", 1.0))
                    GOALS.add(f"  {parts[1]}/builtin")
            elif line.startswith("tflite unavailable"):
                print(line, file=sys.stderr)
        quantized_cnn_mean(rows, ratios)
        compile_cache_rows(rows)
        small_rows(rows, ratios)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "python_api.py")], env=ENV,
                       capture_output=True, text=True)
    m = re.match(r"pyapi_builder_us ([\d.-]+) pyapi_run_us ([\d.-]+)", r.stdout or "")
    if m:   # the Python API's cost above the raw cffi calls it makes
        rows.append(("pyapi_builder_extra", float(m.group(1)), "us", 5.0))
        rows.append(("pyapi_run_extra", float(m.group(2)), "us", 5.0))
    elif (r.stdout or r.stderr).strip():
        print((r.stdout or r.stderr).strip().splitlines()[-1], file=sys.stderr)
    ok = True
    w = max([24] + [len(r[0]) + 1 for r in rows])
    print(f"{'benchmark':<{w}}{'value':>12}  {'target':>10}  result")
    for name, value, unit, target in rows:
        if target is None:
            verdict = ""
        else:
            good = value >= target if name in AT_LEAST else value <= target
            if name not in GOALS:
                ok &= good
            verdict = ("ok" if good else "MISSED") + (" (goal)" if name in GOALS else "")
        tgt = "" if target is None else f"{'>=' if name in AT_LEAST else '<='} {target:.3g}"
        print(f"{name:<{w}}{value:>10.3f} {unit:<2} {tgt:>10}  {verdict}")
        if name in ("mobilenet_float32", "mobilenet_quant8") and any(r[0] == "torch_eager_float32" for r in rows):
            t = [r[1] for r in rows if r[0] == "torch_eager_float32"][0]
            print(f"{'':<{w}}{value / t:>10.2f} x PyTorch eager float32")
        if name in ratios:
            print(f"{'':<{w}}{ratios[name][0]:>10.2f} x {ratios[name][1]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
