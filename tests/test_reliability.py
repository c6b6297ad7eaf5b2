"""Reproductions of what the fuzzer found (issue: reliability), each a documented code with a
reason in our own words, never a crash."""
import os
import sys
import tempfile

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nnhelp  # noqa: E402
from nnhelp import BAD_DATA, T, build_model, ffi, last_error, lib, new_model  # noqa: E402

pytestmark = nnhelp.needs_library


@pytest.fixture
def prot_none_memory():
    fd, path = tempfile.mkstemp()
    os.write(fd, b"\0" * 4096)
    mp = ffi.new("ANeuralNetworksMemory**")
    assert lib.ANeuralNetworksMemory_createFromFd(4096, 0, fd, 0, mp) == 0      # the NDK allows PROT_NONE
    yield mp[0], fd
    lib.ANeuralNetworksMemory_free(mp[0])
    os.close(fd)
    os.unlink(path)


def _add_model():
    """ADD of two [4] float32 inputs; returns (model, compilation)."""
    m, _, ins = build_model("ADD", [T.f32([4]), T.f32([4]), T.i32(0)], [T.f32([4])])
    assert ins == [0, 1]
    c = ffi.new("ANeuralNetworksCompilation**")
    assert lib.ANeuralNetworksCompilation_create(m, c) == 0
    assert lib.ANeuralNetworksCompilation_finish(c[0]) == 0
    return m, c[0]


def test_prot_none_memory_as_input_is_rejected(prot_none_memory):
    mem, _ = prot_none_memory
    model, comp = _add_model()
    e = ffi.new("ANeuralNetworksExecution**")
    assert lib.ANeuralNetworksExecution_create(comp, e) == 0
    assert lib.ANeuralNetworksExecution_setInputFromMemory(e[0], 0, ffi.NULL, mem, 0, 16) == BAD_DATA
    assert "not readable" in last_error()
    lib.ANeuralNetworksExecution_free(e[0])
    lib.ANeuralNetworksCompilation_free(comp)
    lib.ANeuralNetworksModel_free(model)


def test_prot_none_memory_as_constant_and_copy_source_is_rejected(prot_none_memory):
    mem, fd = prot_none_memory
    m, _ = new_model([T.f32([4])])
    assert lib.ANeuralNetworksModel_setOperandValueFromMemory(m, 0, mem, 0, 16) == BAD_DATA
    assert "not readable" in last_error()
    lib.ANeuralNetworksModel_free(m)
    rw = ffi.new("ANeuralNetworksMemory**")
    assert lib.ANeuralNetworksMemory_createFromFd(4096, 3, fd, 0, rw) == 0
    assert lib.ANeuralNetworksMemory_copy(mem, rw[0]) == BAD_DATA
    assert "not readable" in last_error()
    lib.ANeuralNetworksMemory_free(rw[0])


def test_prot_none_memory_still_works_where_nothing_is_read(prot_none_memory):
    """Creating and freeing it stays legal, as the NDK says."""
    mem, _ = prot_none_memory
    assert mem != ffi.NULL
    assert np.dtype(np.float32).itemsize == 4


GC_REENTRY = r"""
import gc, sys
sys.path.insert(0, sys.argv[1])
from nnhelp import ffi, lib
dims = ffi.new("uint32_t[]", [4])          # kept alive: the struct only points at it
t = ffi.new("ANeuralNetworksOperandType*", {"type": 3, "dimensionCount": 1, "dimensions": dims})

class Owner:                      # cyclic garbage whose finalizer frees a model
    def __init__(self):
        p = ffi.new("ANeuralNetworksModel**")
        lib.ANeuralNetworksModel_create(p)
        lib.ANeuralNetworksModel_addOperand(p[0], t)
        self.h, self.me = p[0], self
    def __del__(self):
        lib.ANeuralNetworksModel_free(self.h)

gc.set_threshold(1, 1, 1)         # collect at (almost) every allocation, inside library calls too
for _ in range(200):
    Owner()
    p = ffi.new("ANeuralNetworksModel**")
    lib.ANeuralNetworksModel_create(p)
    for _ in range(20):
        assert lib.ANeuralNetworksModel_addOperand(p[0], t) == 0
    lib.ANeuralNetworksModel_free(p[0])
print("ok")
"""


def test_finalizer_reentering_the_library_does_not_deadlock():
    """A client's __del__ that frees an NNAPI object may run (garbage collection) while the
    library's Python side is inside another call on the same thread."""
    import subprocess
    r = subprocess.run([sys.executable, "-c", GC_REENTRY, os.path.dirname(os.path.abspath(__file__))],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def _model_with(*types):
    m = ffi.new("ANeuralNetworksModel**")
    assert lib.ANeuralNetworksModel_create(m) == 0
    codes = []
    keep = []
    for code, dims, scale in types:
        d = ffi.new("uint32_t[]", dims) if dims else ffi.NULL
        keep.append(d)
        t = ffi.new("ANeuralNetworksOperandType*", {"type": code, "dimensionCount": len(dims), "dimensions": d,
                                                    "scale": scale, "zeroPoint": 0})
        codes.append((lib.ANeuralNetworksModel_addOperand(m[0], t), last_error()))
    lib.ANeuralNetworksModel_free(m[0])
    return codes


@pytest.mark.parametrize("position", [0, 1, 2])
def test_non_finite_scale_is_rejected_wherever_the_operand_comes(position):
    ok = (3, [2], 0.0)
    bad = (5, [2], float("inf"))                      # TENSOR_QUANT8_ASYMM with an infinite scale
    types = [ok, ok, ok]
    types[position] = bad
    codes = _model_with(*types)
    assert codes[position][0] == BAD_DATA and "finite" in codes[position][1]
    nan = list(types)
    nan[position] = (5, [2], float("nan"))
    assert _model_with(*nan)[position][0] == BAD_DATA


@pytest.mark.parametrize("position", [0, 1, 2])
def test_byte_size_overflow_does_not_depend_on_position(position):
    ok = (3, [2], 0.0)
    huge = (3, [1 << 31, 1 << 31], 0.0)               # 2**64 bytes: the old C product wrapped to 0
    types = [ok, ok, ok]
    types[position] = huge
    assert _model_with(*types)[position][0] == BAD_DATA


def test_argmax_of_a_vector_holding_nan():
    from nnhelp import T, run_op
    code, out = run_op("ARGMAX", [T.f32([4], np.array([1, np.nan, 3, 2], np.float32)), T.i32(0)], [T.i32t([1])])
    assert code == 0, out
    assert out[0].tolist() == [2]                      # NaN never replaces the running maximum
    code, out = run_op("ARGMIN", [T.f32([3], np.array([np.nan, 1, 0], np.float32)), T.i32(0)], [T.i32t([1])])
    assert code == 0 and out[0].tolist() == [0]        # ... and wins when it is element 0


HUGE = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))       # 2 GiB of address space
sys.path.insert(0, sys.argv[1])
import numpy as np
from nnhelp import T, run_graph
ops = [T.f32([1], np.ones(1, np.float32)), T.i32t([1], [1 << 29], const=True), T.f32([1 << 29]),
       T.i32t([1], [0], const=True), T.b(False), T.f32([1])]
code, out = run_graph(ops, [("TILE", [0, 1], [2]), ("REDUCE_SUM", [2, 3, 4], [5])], outputs=[5])
print(code, out if code else "")
"""


def test_a_tensor_too_large_for_memory_is_out_of_memory():
    """A 2 GiB intermediate under a 2 GiB address-space limit: OUT_OF_MEMORY with a reason,
    not numpy's text."""
    import subprocess
    r = subprocess.run([sys.executable, "-c", HUGE, os.path.dirname(os.path.abspath(__file__))],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    code, _, reason = r.stdout.strip().partition(" ")
    assert code == "1", r.stdout
    assert "MemoryError" not in reason and "too big" not in reason
