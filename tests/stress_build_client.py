"""Many Python threads building models at once through the C library (issue 44), with nothing
but the standard library (ctypes: no cffi, no numpy in the host).  Run by tests/test_build_stress.py:

    python stress_build_client.py LIBRARY [THREADS] [BUILDS] [pydll]

THREADS threads (default 8) each build BUILDS models (default 1000), the same mix as
ctests/test_build_stress.c: chains of 1..180 ADD operations on float32 vectors (up to 400
operands, more than the library's C-side operand batch holds), per-operation or shared fuse
constants, an optional constant vector (copied or referenced), and now and then the model built
before run between two addOperand calls.  Every model is compiled, executed and checked by its
result (a + kb*b + kc, exact in float32).  `pydll` calls through ctypes.PyDLL, which keeps the
GIL during each call, as a C extension such as torch does.  Prints one line
`N passed, M failed` (N = models built and checked) and the first failures; exits 1 on any.
"""
import ctypes
import random
import sys
import threading

path = sys.argv[1]
nthreads = int(sys.argv[2]) if len(sys.argv) > 2 else 8
nbuilds = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
pydll = len(sys.argv) > 4 and sys.argv[4] == "pydll"
lib = (ctypes.PyDLL if pydll else ctypes.CDLL)(path)
P = ctypes.c_void_p
F = ctypes.c_float
U32 = ctypes.c_uint32


class OperandType(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int32), ("dimensionCount", U32),
                ("dimensions", ctypes.POINTER(U32)), ("scale", F), ("zeroPoint", ctypes.c_int32)]


for _name in ("ANeuralNetworksModel_free", "ANeuralNetworksCompilation_free", "ANeuralNetworksExecution_free"):
    getattr(lib, _name).restype = None
lib.nnapi_py_last_error.restype = ctypes.c_char_p
NONE = ctypes.c_int32(0)
SCALAR = OperandType(1, 0, None, 0.0, 0)         # INT32
SIZES = (1, 4, 33, 64)


class Failure(Exception):
    pass


def call(what, rc):
    if rc != 0:
        raise Failure(f"{what} -> {rc}: {lib.nnapi_py_last_error().decode(errors='replace')}")


class Built:
    """A finished, compiled model and what it computes."""

    def __init__(self, n):
        self.n, self.kb, self.kc = n, 0, 0
        self.m, self.c = P(), P()
        self.cval = (F * n)(*[(i % 5) + 0.25 for i in range(n)])   # referenced when > 128 bytes
        self.dims = (U32 * 1)(n)
        self.vec = OperandType(3, 1, self.dims, 0.0, 0)

    def release(self):
        lib.ANeuralNetworksCompilation_free(self.c)
        lib.ANeuralNetworksModel_free(self.m)
        self.m = self.c = None


def run_and_check(b, tid, it, when):
    n = b.n
    x = (F * n)(*[(tid * 1000 + it % 1000) + i * 0.5 for i in range(n)])
    y = (F * n)(*[1 + (i + it) % 7 for i in range(n)])
    o = (F * n)(*([-1.0] * n))
    e = P()
    call("Execution_create", lib.ANeuralNetworksExecution_create(b.c, ctypes.byref(e)))
    try:
        call("setInput 0", lib.ANeuralNetworksExecution_setInput(e, 0, None, x, 4 * n))
        call("setInput 1", lib.ANeuralNetworksExecution_setInput(e, 1, None, y, 4 * n))
        call("setOutput", lib.ANeuralNetworksExecution_setOutput(e, 0, None, o, 4 * n))
        call("compute", lib.ANeuralNetworksExecution_compute(e))
    finally:
        lib.ANeuralNetworksExecution_free(e)
    for i in range(n):
        want = F(x[i] + b.kb * y[i] + b.kc * b.cval[i]).value
        if o[i] != want:
            raise Failure(f"{when}: n={n} kb={b.kb} kc={b.kc}: o[{i}]={o[i]} want {want}")


def build_one(rng, other, tid, it):
    r = rng.randrange(100)
    ops = 1 + rng.randrange(4) if r < 70 else 5 + rng.randrange(36) if r < 95 else 100 + rng.randrange(81)
    b = Built(SIZES[rng.randrange(4)])
    shared_fuse, with_const = rng.randrange(3) == 0, rng.randrange(2) == 0
    mid = rng.randrange(ops) if other is not None and rng.randrange(5) == 0 else -1
    m = b.m
    call("Model_create", lib.ANeuralNetworksModel_create(ctypes.byref(m)))
    add = lib.ANeuralNetworksModel_addOperand
    setv = lib.ANeuralNetworksModel_setOperandValue
    vec, sc = ctypes.byref(b.vec), ctypes.byref(SCALAR)
    call("addOperand a", add(m, vec))
    call("addOperand b", add(m, vec))
    nxt, c_in, fuse = 2, 0, 0
    if with_const:
        c_in, nxt = nxt, nxt + 1
        call("addOperand c", add(m, vec))
        call("setOperandValue c", setv(m, c_in, b.cval, 4 * b.n))
    if shared_fuse:
        fuse, nxt = nxt, nxt + 1
        call("addOperand fuse", add(m, sc))
        call("setOperandValue fuse", setv(m, fuse, ctypes.byref(NONE), 4))
    prev = 0
    for k in range(ops):
        f = fuse
        if not shared_fuse:
            f, nxt = nxt, nxt + 1
            call(f"addOperand {f}", add(m, sc))
        out, nxt = nxt, nxt + 1
        call(f"addOperand {out}", add(m, vec))
        if k == mid:
            run_and_check(other, tid, it, "the previous model run in the middle of a build")
        if not shared_fuse:
            call(f"setOperandValue {f}", setv(m, f, ctypes.byref(NONE), 4))
        use_c = with_const and k % 3 == 2
        ins = (U32 * 3)(prev, c_in if use_c else 1, f)
        outs = (U32 * 1)(out)
        call(f"addOperation {k}", lib.ANeuralNetworksModel_addOperation(m, 0, 3, ins, 1, outs))
        if use_c:
            b.kc += 1
        else:
            b.kb += 1
        prev = out
    call("identifyInputsAndOutputs", lib.ANeuralNetworksModel_identifyInputsAndOutputs(
        m, 2, (U32 * 2)(0, 1), 1, (U32 * 1)(prev)))
    call("finish", lib.ANeuralNetworksModel_finish(m))
    call("Compilation_create", lib.ANeuralNetworksCompilation_create(m, ctypes.byref(b.c)))
    call("Compilation_finish", lib.ANeuralNetworksCompilation_finish(b.c))
    return b, ops, nxt


built = [0] * nthreads
failures = []


def worker(tid):
    rng = random.Random(tid * 7919 + nbuilds)
    prev = None
    for it in range(nbuilds):
        try:
            b, ops, nops = build_one(rng, prev, tid, it)
            run_and_check(b, tid, it, "just built")
            built[tid] += 1
        except Failure as e:
            failures.append(f"thread {tid} build {it}: {e}")
            b = None
            if len(failures) > 20:
                return
        if prev is not None:
            prev.release()
        prev = b
    if prev is not None:
        prev.release()


threads = [threading.Thread(target=worker, args=(t,)) for t in range(nthreads)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for f in failures[:10]:
    print("FAIL", f)
print(f"{sum(built)} passed, {nthreads * nbuilds - sum(built)} failed")
sys.exit(1 if failures or sum(built) != nthreads * nbuilds else 0)
