"""Fuzz the library through its C ABI: random call sequences and mutated conformance models.

    python tools/fuzz.py [--seed S] [--batches B] [--calls N] [--timeout T] [--cts DIR]
    python tools/fuzz.py --replay SEED [--calls N]        # re-run one batch in this process

The parent forks one child process per batch (seed = S + batch); a child makes N calls
through cffi over libneuralnetworks.so:
* misuse of every object kind (NULL, freed and foreign handles, wrong states, bad indices,
  sizes and types, counts in the millions) mixed with building, compiling and running models;
* memory lifetimes: a memory freed under a model constant, an execution's input or output,
  a burst, an execution in flight, or between two computations (the results must still be right);
* where ../shared/cts is present, conformance models of every family (weighted towards the
  recurrent, detection and control-flow ones, referenced subgraphs included) with random
  mutations: dimensions, types, quantization parameters (of inputs too), operation codes,
  operand wiring, lifetimes, extreme values of scalar parameters (strides, dilations, block
  sizes, k, axes, counts) and constants turned into model inputs given extreme values
  (shapes, paddings, sizes, indices computed from inputs).
Each batch fails on: a crash (signal), a call that takes over 5 s (a hang, with the Python
stack of the call), a huge-count call over 2 s, a result code outside the documented set, a
reason that is a raw Python exception, a wrong result, any output on stderr, or a file
descriptor left open after every object was freed.  Children run with
NNAPI_PY_MAX_TENSOR_BYTES=64 KiB (a computed tensor beyond is OUT_OF_MEMORY) and a 4 GiB
address-space limit.  Prints one line per failing batch (with its replay command) and a
summary; exits 1 if anything failed.
"""
import argparse
import faulthandler
import json
import os
import random
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CODES = set(range(15))               # ResultCode: NO_ERROR .. DEAD_OBJECT
RAW = re.compile(r"Traceback|internal error|\b[A-Za-z]+(Error|Exception)\b: |object has no attribute|"
                 r"NoneType|not subscriptable|unsupported operand type|cannot convert|array is too big|"
                 r"out of bounds for|index \d+ is out of bounds|could not broadcast|operands could not be|"
                 r"invalid literal|must be real number|object is not|takes \d+ positional")
HANG_S = 5.0                         # one call (or one mutated model's whole run) longer than this: a hang
HUGE_S = 2.0                         # a call given a count in the millions must return sooner than this
HUGE = 1 << 22                       # entries of the huge lists (16 MiB of uint32)
INTS = [0, -1, 1, 2, 3, 1 << 16, 1 << 28, (1 << 31) - 1, -(1 << 31), 1000003]
FLOATS = [float("nan"), float("inf"), float("-inf"), 1e30, -1e30, 0.0, 1e-30]
# conformance files of the families a plain random pick would rarely reach
FAMILY = re.compile(r"lstm|rnn|gru|detection|box|roi_|nms|proposal|heatmap|bbox|^if_|^while|quantized|"
                    r"pad|tile|fill|slice|resize|reshape|topk|gather|batch_to_space|space_to_batch|"
                    r"depthwise|conv|pool|expand_dims|split|concat")


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
        self.huge = None
        self.models = {}            # mutated models: "model:<failing step>:<code>" -> count
        if cts:
            try:
                import gzip
                from nnapi_py.testing import cts as conformance
                self.conformance = conformance
                files = conformance.cts_files(cts)
                only = os.environ.get("NNAPI_PY_FUZZ_FILES")      # --files REGEX: hunt in one family
                if only:
                    files = [f for f in files if re.search(only, os.path.basename(f))] or files
                fam = [f for f in files if FAMILY.search(os.path.basename(f))]
                picks = self.r.sample(files, min(4, len(files))) + self.r.sample(fam, min(4, len(fam)))
                for path in picks:
                    folder = os.path.basename(os.path.dirname(path))
                    with gzip.open(path, "rt") as f:
                        d = json.load(f)
                    tests = d["tests"]
                    for t in self.r.sample(tests, min(8, len(tests))):
                        self.tests.append(conformance.prepare_test(folder, d["spec"], t))
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
        faulthandler.dump_traceback_later(HANG_S, exit=True)     # a call over HANG_S: the stack, then exit
        try:
            self._step()
        finally:
            faulthandler.cancel_dump_traceback_later()

    def _step(self):
        r, ffi = self.r, self.ffi
        a = r.randrange(36)
        if a >= 30 or a == 22:                      # mutated models: about a fifth of the steps
            if self.tests:
                self.mutated_model()
                return
            a = 24
        if a >= 24:
            [self.memory_lifetime, self.memory_lifetime, self.huge_counts, self.memory_io, self.memory_io,
             self.huge_counts][a - 24]()
            return
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

    # -- memory lifetimes ------------------------------------------------------------------------
    def memory_io(self):
        """A random memory as an output, a model constant or a MemoryDesc's memory (random handles)."""
        r, ffi = self.r, self.ffi
        k = r.randrange(3)
        if k == 0:
            self.call("ANeuralNetworksExecution_setOutputFromMemory", self.handle("execution"), r.randint(-1, 2),
                      ffi.NULL, self.handle("memory"), r.choice([0, 16, 5000]), r.choice([0, 16, 64, 9000]))
        elif k == 1:
            self.call("ANeuralNetworksModel_setOperandValueFromMemory", self.handle("model"), r.randint(-1, 8),
                      self.handle("memory"), r.choice([0, 16, 5000]), r.choice([0, 4, 16, 200, 9000]))
        else:
            d = ffi.new("ANeuralNetworksMemoryDesc**")
            if self.call("ANeuralNetworksMemoryDesc_create", d) == 0:
                self.call("ANeuralNetworksMemoryDesc_addInputRole", d[0], self.handle("compilation"),
                          r.randint(0, 2), r.choice([1.0, 0.5, 0.0]))
                self.call("ANeuralNetworksMemoryDesc_addOutputRole", d[0], self.handle("compilation"),
                          r.randint(0, 2), 1.0)
                self.call("ANeuralNetworksMemoryDesc_finish", d[0])
                self.new("memory", "ANeuralNetworksMemory_createFromDesc", d[0])
                self.lib.ANeuralNetworksMemoryDesc_free(d[0])

    def memory_lifetime(self):
        """out = a + b with a, b (a model constant) and out in one shared memory, freed at a random
        point: under the constant, the compilation, the execution, a burst, a computation in
        flight or between computations.  Every call must succeed and every result be right."""
        import mmap
        r, ffi, lib, np = self.r, self.ffi, self.lib, self.np
        when = r.choice(["constant", "finish", "compilation", "execution", "in-flight", "between", "burst"])
        fd = os.memfd_create("fuzz-lifetime")
        os.ftruncate(fd, 4096)
        view = mmap.mmap(fd, 4096)
        buf = np.frombuffer(view, np.float32)
        a = np.array([r.uniform(-9, 9) for _ in range(4)], np.float32)
        b = np.array([r.uniform(-9, 9) for _ in range(4)], np.float32)
        buf[:4], buf[16:20] = a, b
        objs = []
        try:
            p = ffi.new("ANeuralNetworksMemory**")
            ok = self.call("ANeuralNetworksMemory_createFromFd", 4096, 3, fd, 0, p) == 0
            mem = p[0] if ok else None

            def free_mem(point):
                nonlocal mem
                if when == point and mem is not None:
                    lib.ANeuralNetworksMemory_free(mem)
                    self.n += 1
                    mem = None

            def need(fn, *args):
                rc = self.call(fn, *args)
                if rc:
                    self.violations.append(f"memory freed at '{when}': {fn} -> {rc}: "
                                           f"{ffi.string(lib.nnapi_py_last_error()).decode(errors='replace')}")
                return rc == 0
            mp = ffi.new("ANeuralNetworksModel**")
            ok = ok and need("ANeuralNetworksModel_create", mp)
            if not ok:
                return
            model = mp[0]
            objs.append(("Model", model))
            t = ffi.new("ANeuralNetworksOperandType*", {"type": 3, "dimensionCount": 1,
                                                        "dimensions": ffi.new("uint32_t[]", [4])})
            t.dimensions = dims = ffi.new("uint32_t[]", [4])
            s = ffi.new("ANeuralNetworksOperandType*", {"type": 1})
            fuse = ffi.new("int32_t*", 0)
            ok = all(need("ANeuralNetworksModel_addOperand", model, x) for x in (t, t, s, t))
            ok = ok and need("ANeuralNetworksModel_setOperandValueFromMemory", model, 1, mem, 64, 16)
            ok = ok and need("ANeuralNetworksModel_setOperandValue", model, 2, fuse, 4)
            free_mem("constant")
            ins, outs = ffi.new("uint32_t[]", [0, 1, 2]), ffi.new("uint32_t[]", [3])
            ok = ok and need("ANeuralNetworksModel_addOperation", model, 0, 3, ins, 1, outs)
            ok = ok and need("ANeuralNetworksModel_identifyInputsAndOutputs", model, 1, ins, 1, outs)
            ok = ok and need("ANeuralNetworksModel_finish", model)
            free_mem("finish")
            cp = ffi.new("ANeuralNetworksCompilation**")
            ok = ok and need("ANeuralNetworksCompilation_create", model, cp)
            if not ok:
                return
            objs.append(("Compilation", cp[0]))
            ok = need("ANeuralNetworksCompilation_finish", cp[0])
            free_mem("compilation")
            if not ok or mem is None:
                return
            bp = ffi.new("ANeuralNetworksBurst**")
            if when == "burst":
                ok = need("ANeuralNetworksBurst_create", cp[0], bp)
                objs.append(("Burst", bp[0]))
            ep = ffi.new("ANeuralNetworksExecution**")
            ok = ok and need("ANeuralNetworksExecution_create", cp[0], ep)
            if not ok:
                return
            ex = ep[0]
            objs.append(("Execution", ex))
            if when == "between":
                need("ANeuralNetworksExecution_setReusable", ex, True)
            ok = need("ANeuralNetworksExecution_setInputFromMemory", ex, 0, ffi.NULL, mem, 0, 16)
            ok = ok and need("ANeuralNetworksExecution_setOutputFromMemory", ex, 0, ffi.NULL, mem, 128, 16)
            free_mem("execution")
            free_mem("burst")
            for rnd in range(2 if when == "between" else 1):
                if not ok:
                    return
                buf[32:36] = 0
                if when == "in-flight":
                    evp = ffi.new("ANeuralNetworksEvent**")
                    ok = need("ANeuralNetworksExecution_startCompute", ex, evp)
                    free_mem("in-flight")
                    if ok:
                        ok = need("ANeuralNetworksEvent_wait", evp[0])
                        lib.ANeuralNetworksEvent_free(evp[0])
                elif when == "burst":
                    ok = need("ANeuralNetworksExecution_burstCompute", ex, bp[0])
                else:
                    ok = need("ANeuralNetworksExecution_compute", ex)
                if ok and not np.allclose(buf[32:36], a + b):
                    self.violations.append(f"memory freed at '{when}': wrong result {buf[32:36]} for {a + b}")
                free_mem("between")
        finally:
            for kind, h in reversed(objs):
                getattr(lib, f"ANeuralNetworks{kind}_free")(h)
            if mem is not None:
                lib.ANeuralNetworksMemory_free(mem)
            del buf
            view.close()
            os.close(fd)

    # -- counts in the millions -----------------------------------------------------------------
    def huge_counts(self):
        r, ffi = self.r, self.ffi
        if self.huge is None:
            self.huge = (ffi.new("uint32_t[]", HUGE), ffi.new("uintptr_t[]", HUGE))
        lst, ptrs = self.huge
        n = r.choice([HUGE, HUGE - 1, 1 << 20, 65537, 4097])
        k = r.randrange(8)
        t0 = time.monotonic()
        if k == 0:
            self.call("ANeuralNetworksModel_addOperation", self.handle("model"), r.choice([0, 2, 29, 42, 89, 92]),
                      n, lst, r.choice([1, n]), lst)
        elif k == 1:
            t = ffi.new("ANeuralNetworksOperandType*", {"type": r.choice([3, 4, 5]), "dimensionCount": n,
                                                        "dimensions": ffi.cast("uint32_t *", lst)})
            self.call("ANeuralNetworksModel_addOperand", self.handle("model"), t)
        elif k == 2:
            self.call("ANeuralNetworksModel_identifyInputsAndOutputs", self.handle("model"), n, lst, n, lst)
        elif k == 3:
            t = ffi.new("ANeuralNetworksOperandType*", {"type": 3, "dimensionCount": n,
                                                        "dimensions": ffi.cast("uint32_t *", lst)})
            buf, size = self.buffer()
            self.call(r.choice(["ANeuralNetworksExecution_setInput", "ANeuralNetworksExecution_setOutput"]),
                      self.handle("execution"), 0, t, buf, size)
        elif k == 4:
            d = ffi.new("ANeuralNetworksMemoryDesc**")
            if self.call("ANeuralNetworksMemoryDesc_create", d) == 0:
                self.call("ANeuralNetworksMemoryDesc_setDimensions", d[0], n, lst)
                self.lib.ANeuralNetworksMemoryDesc_free(d[0])
        elif k == 5:
            ev = self.objs["event"]         # n copies of one live event, or a NULL list
            self.np.frombuffer(ffi.buffer(ptrs), self.np.uintp)[:] = \
                int(ffi.cast("uintptr_t", r.choice(ev))) if ev and r.random() < 0.7 else 0
            p = ffi.new("ANeuralNetworksEvent**")
            rc = self.call("ANeuralNetworksExecution_startComputeWithDependencies", self.handle("execution"),
                           ffi.cast("const ANeuralNetworksEvent* const*", ptrs), n, 0, p)
            if rc == 0:
                self.objs["event"].append(p[0])
        elif k == 6:
            p = ffi.new("ANeuralNetworksCompilation**")
            self.call("ANeuralNetworksCompilation_createForDevices", self.handle("model"),
                      ffi.cast("const ANeuralNetworksDevice* const*", ptrs), n, p)
        else:
            cq = ffi.new("ANeuralNetworksSymmPerChannelQuantParams*", {"channelDim": 0, "scaleCount": n,
                                                                       "scales": ffi.cast("float *", lst)})
            self.call("ANeuralNetworksModel_setOperandSymmPerChannelQuantParams", self.handle("model"),
                      r.randint(0, 4), cq)
        dt = time.monotonic() - t0
        if dt > HUGE_S:
            self.violations.append(f"huge count {n} (case {k}) took {dt:.1f} s")

    # -- mutated conformance models -------------------------------------------------------------
    def _extreme(self, o):
        """Give operand o (its data) extreme values: some entries or all."""
        r, np = self.r, self.np
        if not isinstance(o.data, np.ndarray) or not o.data.size:
            return
        flat = o.data.reshape(-1).copy()
        if flat.dtype.kind == "f":
            v = r.choice(FLOATS)
        else:
            info = np.iinfo(flat.dtype) if flat.dtype.kind in "iu" else None
            v = r.choice(INTS)
            v = v if info is None else min(max(v, int(info.min)), int(info.max))
        with np.errstate(all="ignore"):
            if r.random() < 0.5:
                flat[r.randrange(flat.size)] = v
            else:
                flat[:] = v
        o.data = flat.reshape(o.data.shape)

    def _mutate(self, t, sg):
        r, np = self.r, self.np
        ops = sg.operands
        o = r.choice(ops)
        m = r.randrange(12)
        if m == 0 and o.dims:
            o.dims = tuple(r.choice([0, 1, 2, 3, 9, o.dims[0], 1 << 16, 0xFFFFFFFF]) for _ in o.dims)
        elif m == 1:
            o.type_name = r.choice(["TENSOR_FLOAT32", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM", "INT32", "FLOAT32",
                                    "BOOL", "TENSOR_FLOAT16", "TENSOR_BOOL8", "TENSOR_QUANT8_ASYMM_SIGNED",
                                    "TENSOR_QUANT16_SYMM", "TENSOR_QUANT8_SYMM_PER_CHANNEL"])
        elif m == 2:
            ins = [ops[i] for i in sg.inputs] or ops
            o = r.choice(ins) if r.random() < 0.6 else o          # quantization of inputs, mostly
            o.scale = r.choice([0.0, 0.1, -1.0, 1e9, 1e-30, 1e30, float("nan"), float("inf"), 2.0 ** -24])
            o.zero_point = r.choice([0, 255, -5, -128, 127, 32767, -32768, 1 << 20])
        elif m == 3:
            self._extreme(o)
        elif m == 4 and sg.operations:
            k = r.randrange(len(sg.operations))
            name, ins, outs = sg.operations[k]
            ins = list(ins)
            if ins:
                ins[r.randrange(len(ins))] = r.randrange(len(ops))
            sg.operations[k] = (name, ins, outs)
        elif m == 5 and sg.operations:
            k = r.randrange(len(sg.operations))
            name, ins, outs = sg.operations[k]
            sg.operations[k] = (r.choice(["ADD", "CONV_2D", "RESHAPE", "SOFTMAX", "LSTM", "GATHER", "IF", "WHILE",
                                          "ARGMAX", "DEPTHWISE_CONV_2D", "PAD", "TILE", "SLICE", "TOPK_V2",
                                          "BIDIRECTIONAL_SEQUENCE_RNN", "UNIDIRECTIONAL_SEQUENCE_LSTM",
                                          "BOX_WITH_NMS_LIMIT", "ROI_ALIGN", "GENERATE_PROPOSALS",
                                          "DETECTION_POSTPROCESSING", "SPACE_TO_BATCH_ND", "RESIZE_BILINEAR"]),
                                ins, outs)
        elif m == 6:
            o.lifetime = r.choice(["NO_VALUE", "SUBGRAPH_INPUT", "CONSTANT_COPY", "TEMPORARY_VARIABLE"])
        elif m in (7, 8):
            # a scalar parameter (stride, dilation, block size, k, axis, count, ...) at an extreme
            scal = [x for x in ops if x.type_name in ("INT32", "FLOAT32", "UINT32", "BOOL")
                    and isinstance(x.data, np.ndarray) and x.data.size]
            if scal:
                self._extreme(r.choice(scal))
        elif m in (9, 10) and sg is t.main:
            # a constant given as a model input instead, with extreme values (paddings, shapes,
            # sizes, indices, multiples, block sizes ... computed from inputs)
            consts = [i for i, x in enumerate(ops) if x.lifetime in ("CONSTANT_COPY", "CONSTANT_REFERENCE")
                      and isinstance(x.data, np.ndarray) and x.data.size and i not in sg.inputs]
            if consts:
                i = r.choice(consts)
                ops[i].lifetime = "SUBGRAPH_INPUT"
                sg.inputs.append(i)
                self._extreme(ops[i])
        elif m == 11 and sg.inputs:
            self._extreme(ops[r.choice(sg.inputs)])

    def mutated_model(self):
        import copy
        r = self.r
        t = copy.deepcopy(r.choice(self.tests))
        free_early = r.random() < 0.15
        mutate = not free_early or r.random() < 0.5
        if mutate:
            for _ in range(r.randint(1, 3)):
                sg = r.choice(t.referenced) if t.referenced and r.random() < 0.3 else t.main
                self._mutate(t, sg)
        runner = FreeingRunner(self.library, free_early)
        rec = runner.run(t, r.choice(["sync", "async", "burst"] + (["dynamic"] if t.dynamic_eligible else [])))
        self.n += 8
        key = f"model:{rec.step or 'ok'}:{rec.code if rec.code is not None else ''}"
        self.models[key] = self.models.get(key, 0) + 1
        if rec.code is not None:
            if int(rec.code) not in CODES:
                self.violations.append(f"mutated {t.test_id}: {rec.step} returned {rec.code}")
            elif RAW.search(rec.message or ""):
                self.violations.append(f"mutated {t.test_id}: {rec.step}: raw exception as reason: {rec.message[:200]}")
        if not mutate and runner.freed and rec.status == self.conformance.FAILED and rec.code != 1:   # 1: the budget
            self.violations.append(f"{t.test_id} with its constants' memory freed after the model was built: "
                                   f"{rec.step}: {rec.message[:200]}")

    def run(self):
        global FreeingRunner
        if self.tests:
            FreeingRunner = FreeingRunner or _freeing_runner_class()
            self.library = self.conformance.Library(self.conformance.default_lib_path())   # NNAPI_PY_LIB first
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


def _freeing_runner_class():
    from nnapi_py.testing import cts as conformance

    class FreeingRunner(conformance.Runner):
        """The conformance runner, optionally freeing the memory of the constants as soon as
        the models are built (before finish, compilation and execution)."""
        def __init__(self, library, free_early):
            super().__init__(library)
            self.free_early, self.freed = free_early, False

        def _build_subgraph(self, test, sg, where, dynamic, st):
            model = super()._build_subgraph(test, sg, where, dynamic, st)
            if self.free_early and st["memory"] is not None:
                self.lib.ANeuralNetworksMemory_free(st["memory"])
                os.close(st["fd"])          # the memory keeps its own duplicate
                st["memory"] = st["fd"] = None
                self.freed = True
            return model
    return FreeingRunner


FreeingRunner = None


def open_fds():
    return set(os.listdir("/proc/self/fd"))


def child_env():
    """The children's limits: computed tensors up to 64 KiB (the conformance models are small; a
    valid output of 512 Ki elements, e.g. a quantized ROI_ALIGN 65536 bins high with 16 samples a
    bin, is seconds of honest work, no robustness test), 4 GiB of address space."""
    os.environ.setdefault("NNAPI_PY_MAX_TENSOR_BYTES", str(1 << 16))
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    except (ImportError, ValueError, OSError):
        pass


def child(seed, calls, cts):
    child_env()
    before = open_fds()
    b = Batch(seed, calls, cts)
    b.run()
    import gc
    gc.collect()
    time.sleep(0.05)                    # worker threads drop their last task
    leaked = sorted(open_fds() - before - {str(fd) for fd in range(3)})
    leaked = [fd for fd in leaked if not os.path.realpath(f"/proc/self/fd/{fd}").startswith("/proc")]
    out = {"calls": b.n, "codes": b.codes, "models": b.models, "violations": b.violations[:20], "leaked_fds":
           [os.path.realpath(f"/proc/self/fd/{fd}") for fd in leaked]}
    print("RESULT " + json.dumps(out))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--cts", default=os.path.join(ROOT, "..", "shared", "cts"))
    ap.add_argument("--files", help="mutate only the conformance files whose names match this regex")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--replay", type=int, help="run one batch with this seed in this process")
    a = ap.parse_args(argv)
    if a.files:
        os.environ["NNAPI_PY_FUZZ_FILES"] = a.files
    cts = a.cts if os.path.isdir(a.cts) else None
    if a.child or a.replay is not None:
        child(a.replay if a.replay is not None else a.seed, a.calls, cts)
        return 0
    failures, total, t0 = 0, 0, time.time()
    codes = {}
    models = 0
    kinds = {"crash": 0, "hang": 0, "raw reason": 0, "other": 0}
    for k in range(a.batches):
        seed = a.seed + k
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--seed", str(seed), "--calls", str(a.calls),
               "--cts", a.cts]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            failures += 1
            kinds["hang"] += 1
            print(f"HANG seed {seed} (over {a.timeout:g} s): replay with: python tools/fuzz.py --replay {seed} "
                  f"--calls {a.calls}")
            continue
        problems = []
        if "Timeout (0:00:0" in p.stderr:
            problems.append(f"HANG (a call over {HANG_S:g} s): {p.stderr.strip()[-6000:]!r}")
            p.stderr = ""
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
            models += sum(res.get("models", {}).values())
            problems += res["violations"]
            if res["leaked_fds"]:
                problems.append(f"fds left open: {res['leaked_fds']}")
        elif not problems:
            problems.append("no result from the batch")
        for pr in problems:
            kinds["crash" if pr.startswith("CRASH") else "hang" if pr.startswith("HANG") else
                  "raw reason" if "raw exception" in pr else "other"] += 1
        if problems:
            failures += 1
            print(f"FAIL seed {seed}: {'; '.join(problems)} | replay: python tools/fuzz.py --replay {seed} "
                  f"--calls {a.calls}")
    dt = time.time() - t0
    print(f"fuzz: {a.batches} batches (seeds {a.seed}..{a.seed + a.batches - 1}), {total} calls in {dt:.1f} s, "
          f"{models} mutated models, {failures} failing batches; findings {kinds}; "
          f"result codes {dict(sorted(codes.items()))}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
