"""Fuzz the library through its C ABI: random call sequences and mutated conformance models.

    python tools/fuzz.py [--seed S] [--batches B] [--calls N] [--timeout T] [--cts DIR]
    python tools/fuzz.py --replay SEED [--calls N]        # re-run one batch in this process

The parent forks one child process per batch (seed = S + batch); a child makes N calls
through cffi over libneuralnetworks.so: misuse of every object kind (NULL, freed and foreign
handles, wrong states, bad indices, sizes and types) mixed with building, compiling and running
models, and -- where ../shared/cts is present -- conformance models with random mutations
(dimensions, types, quantization, operation codes, operand wiring, input data). Each batch
fails on: a crash (signal), a hang (timeout), a result code outside the documented set, a
reason that is a raw Python exception, any output on stderr, or a file descriptor left open
after every object was freed. Prints one line per failing batch (with its replay command) and
a summary; exits 1 if anything failed.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

CODES = set(range(15))               # ResultCode: NO_ERROR .. DEAD_OBJECT
RAW = re.compile(r"Traceback|internal error|\b[A-Za-z]+(Error|Exception)\b: |object has no attribute|"
                 r"NoneType|not subscriptable|unsupported operand type|cannot convert")


# ---- the child: one batch --------------------------------------------------------------------------
class Batch:
    def __init__(self, seed, calls, cts):
        import numpy as np
        from nnapi_py import ffi, lib
        self.np, self.ffi, self.lib = np, ffi, lib
        self.r = random.Random(seed)
        self.calls = calls
        self.n = 0
        self.codes = {}
        self.violations = []
        self.keep = []
        self.objs = {"model": [], "compilation": [], "execution": [], "memory": [], "event": [], "burst": []}
        self.freed = []
        self.tests = []
        if cts:
            try:
                import cts_runner
                self.cts_runner = cts_runner
                files = cts_runner.cts_files(cts)
                self.r.shuffle(files)
                for path in files[:3]:
                    folder = os.path.basename(os.path.dirname(path))
                    import gzip
                    with gzip.open(path, "rt") as f:
                        d = json.load(f)
                    for t in d["tests"][:20]:
                        self.tests.append(cts_runner.prepare_test(folder, d["spec"], t))
            except Exception as e:          # a missing or odd vector file only limits the fuzzing
                self.tests = []
                print(f"(no mutated models: {e})", file=sys.stdout)

    # -- bookkeeping
    def check(self, fn, rc):
        self.n += 1
        rc = int(rc)
        self.codes[rc] = self.codes.get(rc, 0) + 1
        if rc not in CODES:
            self.violations.append(f"{fn} returned {rc}, not a documented result code")
        elif rc:
            reason = self.ffi.string(self.lib.nnapi_py_last_error()).decode(errors="replace")
            if RAW.search(reason):
                self.violations.append(f"{fn} -> {rc}: raw exception as reason: {reason[:200]}")
        return rc

    def call(self, name, *args):
        return self.check(name, getattr(self.lib, name)(*args))

    def handle(self, kind):
        """A handle of this kind: live (mostly), NULL, freed, or one of another kind."""
        r, ffi = self.r, self.ffi
        x = r.random()
        live = self.objs[kind]
        if live and x < 0.75:
            return r.choice(live)
        if x < 0.85:
            return ffi.NULL
        if self.freed and x < 0.93:
            return ffi.cast(f"ANeuralNetworks{kind.capitalize()}*", r.choice(self.freed))
        others = [h for k, v in self.objs.items() if k != kind for h in v]
        if others:
            return ffi.cast(f"ANeuralNetworks{kind.capitalize()}*", r.choice(others))
        return ffi.NULL

    def new(self, kind, ctor, *args):
        p = self.ffi.new(f"ANeuralNetworks{kind.capitalize()}**")
        rc = self.call(ctor, *args, p)
        if rc == 0 and p[0] != self.ffi.NULL:
            self.objs[kind].append(p[0])
        return rc

    def free(self, kind, fn):
        live = self.objs[kind]
        h = self.handle(kind)
        getattr(self.lib, fn)(h)
        self.n += 1
        if h in live:
            live.remove(h)
            self.freed.append(int(self.ffi.cast("uintptr_t", h)))

    # -- random values
    def dims(self):
        r = self.r
        return [r.choice([0, 1, 2, 3, 4, 7, 1 << 31, 0xFFFFFFFF]) if r.random() < 0.1 else r.randint(1, 4)
                for _ in range(r.choice([0, 1, 1, 2, 2, 3, 4, 5]))]

    def operand_type(self):
        r, ffi = self.r, self.ffi
        code = r.choice([0, 1, 3, 3, 3, 4, 5, 6, 8, 9, 12, 13, 14, 15, 11, 16, 10000, -1])
        d = self.dims()
        arr = ffi.new("uint32_t[]", d) if d else ffi.NULL
        self.keep.append(arr)
        scale = r.choice([0.0, 0.0, 0.5, 1.0, -1.0, float("inf"), float("nan"), 1e-30])
        zp = r.choice([0, 0, 128, -128, 300, -1])
        t = ffi.new("ANeuralNetworksOperandType*", {"type": code, "dimensionCount": len(d) if r.random() > 0.05 else 7,
                                                    "dimensions": arr, "scale": scale, "zeroPoint": zp})
        self.keep.append(t)
        return t if r.random() > 0.03 else ffi.NULL

    def buffer(self):
        n = self.r.choice([0, 1, 4, 16, 64, 4096])
        a = self.np.frombuffer(self.r.randbytes(n) if n else b"\0", self.np.uint8).copy()
        self.keep.append(a)
        return (self.ffi.from_buffer(a) if n else self.ffi.NULL), (n if self.r.random() > 0.1 else self.r.randint(0, 1 << 20))

    def u32s(self, k):
        a = self.ffi.new("uint32_t[]", [self.r.randint(0, 6) for _ in range(max(k, 1))])
        self.keep.append(a)
        return a

    # -- actions
    def step(self):
        r, ffi = self.r, self.ffi
        a = r.randrange(24)
        if a == 0:
            self.new("model", "ANeuralNetworksModel_create")
        elif a in (1, 2, 3):
            self.call("ANeuralNetworksModel_addOperand", self.handle("model"), self.operand_type())
        elif a == 4:
            buf, n = self.buffer()
            self.call("ANeuralNetworksModel_setOperandValue", self.handle("model"), r.randint(-1, 8), buf, n)
        elif a == 5:
            k_in, k_out = r.randint(0, 4), r.randint(0, 2)
            self.call("ANeuralNetworksModel_addOperation", self.handle("model"),
                      r.choice([0, 1, 3, 16, 18, 22, 25, 29, 42, 47, 92, 95, 105, 106, 10000, -1]),
                      k_in, self.u32s(k_in), k_out, self.u32s(k_out))
        elif a == 6:
            k_in, k_out = r.randint(0, 2), r.randint(0, 2)
            self.call("ANeuralNetworksModel_identifyInputsAndOutputs", self.handle("model"), k_in, self.u32s(k_in),
                      k_out, self.u32s(k_out))
        elif a == 7:
            self.call("ANeuralNetworksModel_finish", self.handle("model"))
        elif a == 8:
            self.new("compilation", "ANeuralNetworksCompilation_create", self.handle("model"))
        elif a == 9:
            self.call("ANeuralNetworksCompilation_setPreference", self.handle("compilation"), r.randint(-1, 3))
        elif a == 10:
            self.call("ANeuralNetworksCompilation_finish", self.handle("compilation"))
        elif a == 11:
            self.new("execution", "ANeuralNetworksExecution_create", self.handle("compilation"))
        elif a in (12, 13):
            buf, n = self.buffer()
            fn = r.choice(["ANeuralNetworksExecution_setInput", "ANeuralNetworksExecution_setOutput"])
            self.call(fn, self.handle("execution"), r.randint(-1, 3), ffi.NULL if r.random() < 0.8 else
                      self.operand_type(), buf, n)
        elif a == 14:
            self.call("ANeuralNetworksExecution_compute", self.handle("execution"))
        elif a == 15:
            p = ffi.new("ANeuralNetworksEvent**")
            rc = self.call("ANeuralNetworksExecution_startCompute", self.handle("execution"), p)
            if rc == 0:
                self.objs["event"].append(p[0])
        elif a == 16:
            self.call("ANeuralNetworksEvent_wait", self.handle("event"))
        elif a == 17:
            fd = os.memfd_create("fuzz")
            os.ftruncate(fd, 4096)
            self.new("memory", "ANeuralNetworksMemory_createFromFd", r.choice([0, 16, 4096, 8192]),
                     r.choice([0, 1, 2, 3, 7]), fd if r.random() > 0.05 else -1, r.choice([0, 0, 16, 4096]))
            os.close(fd)
        elif a == 18:
            self.call("ANeuralNetworksExecution_setInputFromMemory", self.handle("execution"), r.randint(-1, 2),
                      ffi.NULL, self.handle("memory"), r.choice([0, 16, 5000]), r.choice([0, 16, 64, 9000]))
        elif a == 19:
            self.call("ANeuralNetworksMemory_copy", self.handle("memory"), self.handle("memory"))
        elif a == 20:
            self.new("burst", "ANeuralNetworksBurst_create", self.handle("compilation"))
        elif a == 21:
            self.call("ANeuralNetworksExecution_burstCompute", self.handle("execution"), self.handle("burst"))
        elif a == 22 and self.tests:
            self.mutated_model()
        else:
            kind = r.choice(list(self.objs))
            self.free(kind, {"model": "ANeuralNetworksModel_free", "compilation": "ANeuralNetworksCompilation_free",
                             "execution": "ANeuralNetworksExecution_free", "memory": "ANeuralNetworksMemory_free",
                             "event": "ANeuralNetworksEvent_free", "burst": "ANeuralNetworksBurst_free"}[kind])

    def mutated_model(self):
        import copy
        r, np = self.r, self.np
        t = copy.deepcopy(r.choice(self.tests))
        ops = t.main.operands
        for _ in range(r.randint(1, 3)):
            o = r.choice(ops)
            m = r.randrange(7)
            if m == 0 and o.dims:
                o.dims = tuple(r.choice([0, 1, 2, 3, 9, o.dims[0]]) for _ in o.dims)
            elif m == 1:
                o.type_name = r.choice(["TENSOR_FLOAT32", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM", "INT32", "FLOAT32",
                                        "BOOL", "TENSOR_FLOAT16", "TENSOR_BOOL8"])
            elif m == 2:
                o.scale, o.zero_point = r.choice([0.0, 0.1, -1.0, 1e9]), r.choice([0, 255, -5])
            elif m == 3 and isinstance(o.data, np.ndarray) and o.data.size:
                flat = o.data.reshape(-1).copy()
                if flat.dtype.kind == "f":
                    with np.errstate(all="ignore"):
                        flat[r.randrange(flat.size)] = r.choice([np.nan, np.inf, -np.inf, 1e30, 0.0])
                else:
                    info = np.iinfo(flat.dtype) if flat.dtype.kind in "iu" else None
                    v = r.choice([0, 1, -1, 127, 1000])
                    flat[r.randrange(flat.size)] = v if info is None else min(max(v, info.min), info.max)
                o.data = flat.reshape(o.data.shape)
            elif m == 4 and t.main.operations:
                k = r.randrange(len(t.main.operations))
                name, ins, outs = t.main.operations[k]
                ins = list(ins)
                if ins:
                    ins[r.randrange(len(ins))] = r.randrange(len(ops))
                t.main.operations[k] = (name, ins, outs)
            elif m == 5 and t.main.operations:
                k = r.randrange(len(t.main.operations))
                name, ins, outs = t.main.operations[k]
                t.main.operations[k] = (r.choice(["ADD", "CONV_2D", "RESHAPE", "SOFTMAX", "LSTM", "GATHER", "IF",
                                                  "ARGMAX", "DEPTHWISE_CONV_2D"]), ins, outs)
            elif m == 6:
                o.lifetime = r.choice(["NO_VALUE", "SUBGRAPH_INPUT", "CONSTANT_COPY", "TEMPORARY_VARIABLE"])
        runner = self.cts_runner._Runner(self.library)
        rec = runner.run(t, r.choice(["sync", "async", "burst", "dynamic"]))
        self.n += 8
        if rec.code is not None:
            if int(rec.code) not in CODES:
                self.violations.append(f"mutated {t.test_id}: {rec.step} returned {rec.code}")
            elif RAW.search(rec.message or ""):
                self.violations.append(f"mutated {t.test_id}: {rec.step}: raw exception as reason: {rec.message[:200]}")

    def run(self):
        if self.tests:
            self.library = self.cts_runner.Library(os.environ.get("NNAPI_PY_LIB") or self.cts_runner.default_lib_path())
        while self.n < self.calls:
            self.step()
            if len(self.keep) > 4096:
                del self.keep[:2048]
        for ev in list(self.objs["event"]):          # let computations finish before freeing
            self.lib.ANeuralNetworksEvent_wait(ev)
        for kind, fn in (("event", "Event"), ("burst", "Burst"), ("execution", "Execution"),
                         ("compilation", "Compilation"), ("memory", "Memory"), ("model", "Model")):
            for h in self.objs[kind]:
                getattr(self.lib, f"ANeuralNetworks{fn}_free")(h)
            self.objs[kind] = []


def open_fds():
    return set(os.listdir("/proc/self/fd"))


def child(seed, calls, cts):
    before = open_fds()
    b = Batch(seed, calls, cts)
    b.run()
    import gc
    gc.collect()
    time.sleep(0.05)                    # worker threads drop their last task
    leaked = sorted(open_fds() - before - {str(fd) for fd in range(3)})
    leaked = [fd for fd in leaked if not os.path.realpath(f"/proc/self/fd/{fd}").startswith("/proc")]
    out = {"calls": b.n, "codes": b.codes, "violations": b.violations[:20], "leaked_fds":
           [os.path.realpath(f"/proc/self/fd/{fd}") for fd in leaked]}
    print("RESULT " + json.dumps(out))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--cts", default=os.path.join(ROOT, "..", "shared", "cts"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--replay", type=int, help="run one batch with this seed in this process")
    a = ap.parse_args(argv)
    cts = a.cts if os.path.isdir(a.cts) else None
    if a.child or a.replay is not None:
        child(a.replay if a.replay is not None else a.seed, a.calls, cts)
        return 0
    failures, total, t0 = 0, 0, time.time()
    codes = {}
    for k in range(a.batches):
        seed = a.seed + k
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--seed", str(seed), "--calls", str(a.calls),
               "--cts", a.cts]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            failures += 1
            print(f"HANG seed {seed} (over {a.timeout:g} s): replay with: python tools/fuzz.py --replay {seed} "
                  f"--calls {a.calls}")
            continue
        problems = []
        if p.returncode < 0:
            problems.append(f"CRASH (signal {-p.returncode})")
        elif p.returncode != 0:
            problems.append(f"exit status {p.returncode}")
        if p.stderr.strip():
            problems.append(f"stderr: {p.stderr.strip()[:300]!r}")
        m = re.search(r"^RESULT (.*)$", p.stdout, re.M)
        if m:
            res = json.loads(m.group(1))
            total += res["calls"]
            for c, n in res["codes"].items():
                codes[int(c)] = codes.get(int(c), 0) + n
            problems += res["violations"]
            if res["leaked_fds"]:
                problems.append(f"fds left open: {res['leaked_fds']}")
        elif not problems:
            problems.append("no result from the batch")
        if problems:
            failures += 1
            print(f"FAIL seed {seed}: {'; '.join(problems)} | replay: python tools/fuzz.py --replay {seed} "
                  f"--calls {a.calls}")
    dt = time.time() - t0
    print(f"fuzz: {a.batches} batches, {total} calls in {dt:.1f} s, {failures} failing batches; "
          f"result codes {dict(sorted(codes.items()))}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
