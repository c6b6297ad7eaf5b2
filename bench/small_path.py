"""Issue 41's small-tensor rows: what a small model pays per operation and per execution.

  python bench/small_path.py ops      (a) the largest NNAPI_PY_PROFILE mean over the kernels of the corpus's
                                      tiny models whose tensors (constants included) have at most 4,096
                                      elements: "small_op_max <us> <kernel>", and the count above 6 us
  python bench/small_path.py exec     (b) the cost of an execution beyond its kernels, a chain of N = 16 float32
                                      ADDs of [1, 16] (bench_small.c): Python host -- nn.Execution.run() on a
                                      reusable execution with every kernel replaced by a no-op (the plan's
                                      steps) -- and C host -- bench_small.c's compute time less the kernels'
                                      time, which the Python host measures as its compute with the kernels
                                      less without them: "small_exec_overhead_py <us> <N>",
                                      "small_exec_overhead_c <us> <N>" (medians of 5 alternating rounds)
  python bench/small_path.py tiny     (c) each tiny corpus model, ours / LiteRT builtin kernels, one run
                                      (bench/tflite_models.py): "tiny <model> <ours ms> <builtin ms>"
                                      (bench/run.py prints the ratios)
  python bench/small_path.py importer (d) each tiny corpus model's TfliteModel.run() beyond its kernels (every
                                      kernel of its executions a no-op; models run through one NNAPI model):
                                      "tiny_overhead <model> <us> <operations> <ceiling us>", the ceiling
                                      10 us + 0.5 us an operation (medians of 7 batches)
  python bench/small_path.py floor    (e) numpy's floor for the tiny models made only of float32
                                      FULLY_CONNECTED layers (tflm_sine): the layers written by hand
                                      as the fewest numpy calls that give our bits (a product --
                                      np.multiply for one input value, else np.dot --, the bias sum,
                                      np.maximum for RELU), no runtime at all, checked equal to
                                      TfliteModel.run()'s output, timed beside LiteRT's builtin
                                      invoke() and our run() as bench/tflite_models.py times them:
                                      "tiny_floor <model> <floor us> <builtin us> <ours us>"
Run by bench/run.py (make bench).
"""
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHAIN = 16
SMALL = 4096
# the corpus's tiny models: wake words (int8 streaming), openWakeWord's float classifiers, voice
# activity, a tiny int8 CNN and TFLite Micro's sine MLP
TINY = ("okay_nabu", "hey_jarvis", "alexa", "hey_mycroft", "oww_alexa", "oww_hey_jarvis", "oww_hey_mycroft",
        "oww_hey_rhasspy", "oww_okay_nabu", "precise_vad", "helia_tiny_cnn", "tflm_sine")
INT8_WAKE = ("okay_nabu", "hey_jarvis", "alexa", "hey_mycroft")


def _median_us(fn, n=200, batches=25):
    v = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        v.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(v)


def _chain_model(n):
    import numpy as np
    import nnapi_py as nn
    m = nn.Model("chain")
    x = m.input("x", nn.float32, (1, 16))
    c = m.constant(np.full((1, 16), 0.5, np.float32))
    y = x
    for _ in range(n):
        y = m.op("ADD", y, c, 0, outputs=[(nn.float32, (1, 16))])
    m.output(y, "y")
    return m


def exec_py(n):
    """In this process (a Python host): (nn run with no-op kernels, compute with kernels, compute
    with no-op kernels) in us."""
    import numpy as np
    from nnapi_py import ffi, lib, _capi
    comp = _chain_model(n).compile()
    e = comp.execution(reusable=True)
    x = np.zeros((1, 16), np.float32)
    e.run({"x": x})
    h = e.handle
    ex = _capi._H[int(ffi.cast("uintptr_t", h))]
    for _ in range(300):
        e.run(copy=False)
    t_real = _median_us(lambda: lib.ANeuralNetworksExecution_compute(h))
    arenas = ex.plan._arenas
    saved = [list(ab[1]) for ab in arenas]

    def nop(i, o):
        pass
    for ab in arenas:
        ab[1][:] = [(nop, ia, oa) for _, ia, oa in ab[1]]
    t_nop = _median_us(lambda: lib.ANeuralNetworksExecution_compute(h))
    t_run_nop = _median_us(lambda: e.run(copy=False))
    for ab, s in zip(arenas, saved):
        ab[1][:] = s
    return t_run_nop, t_real, t_nop


def exec_rows(rounds=5):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    exe = os.path.join(ROOT, "build", "bench", "bench_small")
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-std=c11", "-Wall", "-Wextra",
                    os.path.join(ROOT, "bench", "bench_small.c"), "-o", exe, "-I" + os.path.join(ROOT, "include"),
                    "-L" + os.path.join(ROOT, "build", "lib"), "-lneuralnetworks",
                    "-Wl,-rpath," + os.path.join(ROOT, "build", "lib")], check=True)
    py, c = [], []
    for _ in range(rounds):
        r = subprocess.run([sys.executable, __file__, "exec-py", str(CHAIN)], env=env, capture_output=True, text=True)
        m = re.search(r"exec_py ([\d.]+) ([\d.]+) ([\d.]+)", r.stdout)
        r2 = subprocess.run([exe, str(CHAIN)], env=env, capture_output=True, text=True)
        m2 = re.search(r"small_exec_c \d+ ([\d.]+)", r2.stdout)
        if not m or not m2:
            print((r.stderr or r2.stderr or "failed").strip().splitlines()[-1], file=sys.stderr)
            continue
        run_nop, real, nop = (float(v) for v in m.groups())
        py.append(run_nop)
        c.append(float(m2.group(1)) - (real - nop))
    if py:
        print(f"small_exec_overhead_py {statistics.median(py):.3f} {CHAIN}")
        print(f"small_exec_overhead_c {statistics.median(c):.3f} {CHAIN}")


def _elements(infos):
    n = 0
    for inf in infos:
        d = getattr(inf, "dims", None)
        if d is not None and getattr(inf, "type", None) in _TENSORS:
            k = 1
            for x in d:
                k *= int(x)
            n = max(n, k)
    return n


_TENSORS = ()


def _load_tiny(name):
    """The corpus model `name` loaded (at the corpus's input shapes) and random inputs for it."""
    import numpy as np
    import nnapi_py.tflite as T
    from nnapi_py.testing import corpus
    shapes = corpus.INPUT_SHAPES.get(name)
    path = corpus.models()[name]
    m = T.load(path, input_shapes=shapes) if shapes else T.load(path)
    rng = np.random.default_rng(0)
    return m, [(rng.uniform(-1, 1, s) if np.dtype(dt).kind == "f" else rng.integers(-128, 128, s)).astype(dt)
               for _, dt, s in m.input_specs]


def ops_in_process(names, runs):
    """(a) in this process, NNAPI_PY_PROFILE on: each kernel labelled with the largest of its
    tensors (constants included) in elements; prints "op <mean us> <elements> <label>"."""
    global _TENSORS
    from nnapi_py import profiling as profile, constants as C
    _TENSORS = set(C.TENSOR_TYPES)
    plain = profile.kernel_label
    profile.kernel_label = lambda name, ins, outs: f"{plain(name, ins, outs)} |{_elements(list(ins) + list(outs))}"
    # NNAPI_PY_PROFILE's timer around each kernel, every run kept: on a shared machine a kernel
    # preempted by another process takes a time slice into its mean; the median does not
    times = {}
    clock = time.perf_counter

    def timed(name, kern, label=None):
        rec = times.setdefault(label, [])

        def run(i, o):
            t0 = clock()
            kern(i, o)
            rec.append(clock() - t0)
        return run
    profile.timed = timed
    for name in names:
        m, ins = _load_tiny(name)
        for _ in range(20):             # warm-up: first-run work (tables, caches) is not the steady state
            m.run(ins)
        for rec in times.values():
            rec.clear()
        for _ in range(runs if name != "precise_vad" else max(runs // 10, 5)):
            m.run(ins)
        for label, rec in times.items():
            if rec:
                text, _, elems = label.rpartition(" |")
                print(f"op {statistics.median(rec) * 1e6:.3f} {statistics.mean(rec) * 1e6:.3f} {elems} {name}: {text}",
                      flush=True)
                rec.clear()
        del m


def op_rows(runs=300):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", NNAPI_PY_PROFILE="/dev/null")
    r = subprocess.run([sys.executable, __file__, "ops-py", str(runs)], env=env, capture_output=True, text=True)
    got = []
    for line in r.stdout.splitlines():
        parts = line.split(" ", 4)
        if len(parts) == 5 and parts[0] == "op" and int(parts[3]) <= SMALL:
            got.append((float(parts[1]), float(parts[2]), parts[4]))
    if not got:
        print((r.stderr or "no kernels").strip().splitlines()[-1], file=sys.stderr)
        return
    got.sort(reverse=True)
    over = sum(1 for t, _, _ in got if t > 6.0)
    print(f"small_op_max {got[0][0]:.3f} {got[0][1]:.3f} {over} {len(got)} {got[0][2]}")
    for t, mean, label in got[:12]:
        print(f"  small_op {t:.3f} {mean:.3f} {label}")


def importer_in_process(names):
    """(d) in this process: each model's run() with every kernel of its executions a no-op."""
    from nnapi_py import ffi, _capi

    def nop(i, o):
        pass
    for name in names:
        m, ins = _load_tiny(name)
        m.run(ins)
        pair = getattr(m, "_pair", None)
        if not pair:                    # partitions, or no reusable executions: not measured here
            continue
        ops = 0
        for k, e in enumerate(pair.execs):
            plan = _capi._H[int(ffi.cast("uintptr_t", e.handle))].plan
            for ab in plan._arenas:
                ops += len(ab[1]) if k == 0 else 0
                ab[1][:] = [(nop, ia, oa) for _, ia, oa in ab[1]]
        if not ops:                     # a dynamic plan (precise_vad's WHILE): no arena steps to replace
            continue
        for _ in range(200):
            m.run(ins)
        us = _median_us(lambda: m.run(ins), n=200, batches=7)
        print(f"tiny_overhead {name} {us:.3f} {ops} {10 + 0.5 * ops:.1f}", flush=True)
        del m


def _child_rows(mode):
    """This script's in-process `mode` in a child process with one BLAS thread: its rows
    printed, its last error line on stderr."""
    r = subprocess.run([sys.executable, __file__, mode], env=dict(os.environ, OPENBLAS_NUM_THREADS="1"),
                       capture_output=True, text=True)
    print(r.stdout, end="")
    if r.returncode and r.stderr:
        print(r.stderr.strip().splitlines()[-1], file=sys.stderr)


FLOOR_ACTS = {0: None, 1: 0.0}     # FULLY_CONNECTED fused activations the floor writes: NONE, RELU


def _fc_floor(nn_model):
    """The float32 FULLY_CONNECTED chain of nn_model as a function of its input, in the fewest
    numpy calls (see "floor" above), or None when the model is something else."""
    import numpy as np
    vals, ops = nn_model.values, nn_model.operations
    layers, prev = [], None
    for name, ins, outs in ops:
        if name != "FULLY_CONNECTED" or len(ins) != 4 or any(k not in vals for k in ins[1:]):
            return None
        if prev is not None and ins[0] != prev:
            return None
        w, b, act = vals[ins[1]], vals[ins[2]], int(np.asarray(vals[ins[3]]))
        if w.dtype != np.float32 or act not in FLOOR_ACTS:
            return None
        wt = np.ascontiguousarray(w.T)
        layers.append((wt.shape[0] == 1, wt, b, None if FLOOR_ACTS[act] is None else np.float32(FLOOR_ACTS[act])))
        prev = outs[0]
    if not layers:
        return None
    dot, mul, add, mx = np.dot, np.multiply, np.add, np.maximum

    def run(x):
        for one, wt, b, lo in layers:
            x = add(mul(x, wt) if one else dot(x, wt), b)
            if lo is not None:
                x = mx(x, lo)
        return x
    return run


def floor_in_process(names):
    """(e) in this process: each FULLY_CONNECTED-only tiny model's numpy floor beside LiteRT's
    builtin invoke() and our run(), interleaved as bench/tflite_models.py does."""
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from tflite_models import interleaved_ms
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
        from nnapi_py.testing import corpus
    except Exception as e:
        print(f"tiny_floor unavailable ({type(e).__name__}: {e})")
        return
    for name in names:
        m, ins = _load_tiny(name)
        floor = _fc_floor(m.nn_model)
        if floor is None or len(ins) != 1:
            continue
        ours = m.run(ins)[0]
        got = floor(ins[0])
        if got.shape != ours.shape or got.tobytes() != ours.tobytes():
            print(f"tiny_floor {name}: the hand-written layers differ from run()'s bits; not measured")
            continue
        it = Interpreter(model_path=corpus.models()[name], num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], ins[0])
        x = ins[0]
        fl, lite, run = interleaved_ms([lambda: floor(x), it.invoke, lambda: m.run(ins)], 11, 4)
        print(f"tiny_floor {name} {fl * 1e3:.3f} {lite * 1e3:.3f} {run * 1e3:.3f}", flush=True)


def tiny_rows():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "tflite_models.py"), *TINY],
                       env=dict(os.environ, OPENBLAS_NUM_THREADS="1"), capture_output=True, text=True)
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 6 and parts[0] == "tflite":
            print(f"tiny {parts[1]} {parts[2]} {parts[4]}")
        elif line.startswith("tflite unavailable"):
            print(line)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if what == "exec-py":
        print("exec_py %.3f %.3f %.3f" % exec_py(int(sys.argv[2])))
    elif what == "ops-py":
        ops_in_process(TINY, int(sys.argv[2]))
    elif what == "importer-py":
        importer_in_process(sys.argv[2:] or TINY)
    elif what == "floor-py":
        floor_in_process(sys.argv[2:] or TINY)
    else:
        if what in ("ops", "all"):
            op_rows()
        if what in ("exec", "all"):
            exec_rows()
        if what in ("importer", "all"):
            _child_rows("importer-py")
        if what in ("tiny", "all"):
            tiny_rows()
        if what in ("floor", "all"):
            _child_rows("floor-py")
