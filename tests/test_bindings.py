"""How a computation binds the caller's buffers (Execution._compute, Plan.run_static): an
execution on the buffers of an earlier one of the same compilation takes that one's views,
a reusable execution keeps its own, an arena leaves plain views of caller memory bound
between runs (never an ANeuralNetworksMemory's), and a Python host's numpy settings are left
as they were while its warnings stay quiet inside a computation."""
import gc
import warnings
import weakref

import numpy as np
import pytest

import nnapi_py as nn
from nnapi_py import _capi, execution as EX
from nnapi_py import nn as _nn

RNG = np.random.default_rng(11)


def _add_model():
    """ADD of two float32 [4] inputs, every dimension fixed (the raw setters' fast path)."""
    m = nn.Model()
    a = m.input("a", nn.float32, (4,))
    b = m.input("b", nn.float32, (4,))
    m.output(m.op("ADD", a, b, 0, outputs=[(nn.float32, (4,))]), "y")
    return m, m.compile()


def _one_shot(lib, ffi, comp, a, b, y, reusable=False):
    """Create an execution on these numpy buffers and compute it; returns its handle."""
    p = ffi.new("ANeuralNetworksExecution**")
    assert lib.ANeuralNetworksExecution_create(comp.handle, p) == 0
    e = p[0]
    if reusable:
        assert lib.ANeuralNetworksExecution_setReusable(e, True) == 0
    assert lib.ANeuralNetworksExecution_setInput(e, 0, ffi.NULL, ffi.from_buffer(a), a.nbytes) == 0
    assert lib.ANeuralNetworksExecution_setInput(e, 1, ffi.NULL, ffi.from_buffer(b), b.nbytes) == 0
    assert lib.ANeuralNetworksExecution_setOutput(e, 0, ffi.NULL, ffi.from_buffer(y), y.nbytes) == 0
    assert lib.ANeuralNetworksExecution_compute(e) == 0
    return e


def test_executions_on_reused_buffers_take_one_binding_and_see_new_contents(monkeypatch):
    ffi, lib = _nn._api()
    _, comp = _add_model()
    calls = []
    orig = EX.Execution._bind_static

    def spy(self):
        calls.append(1)
        return orig(self)
    monkeypatch.setattr(EX.Execution, "_bind_static", spy)
    sets = [tuple(np.zeros(4, np.float32) for _ in range(3)) for _ in range(2)]
    for k in range(8):
        a, b, y = sets[k % 2]
        a[...] = RNG.standard_normal(4)
        b[...] = RNG.standard_normal(4)
        y[...] = np.nan
        e = _one_shot(lib, ffi, comp, a, b, y)
        np.testing.assert_array_equal(y, a + b)
        lib.ANeuralNetworksExecution_free(e)
    assert len(calls) == 2, "each set of buffers is bound once, then its binding is taken again"
    # other buffers of the same sizes: a binding of their own, the right numbers
    a, b, y = (np.arange(4, dtype=np.float32) + k for k in (1, 10, 0))
    e = _one_shot(lib, ffi, comp, a, b, y)
    np.testing.assert_array_equal(y, a + b)
    lib.ANeuralNetworksExecution_free(e)
    assert len(calls) == 3


def test_reusable_execution_between_other_executions_of_its_compilation():
    """The arena a reusable execution left its views in is taken by another execution on
    other buffers in between: each computation still reads and writes its own."""
    ffi, lib = _nn._api()
    _, comp = _add_model()
    a, b, y = (np.zeros(4, np.float32) for _ in range(3))
    e = _one_shot(lib, ffi, comp, a, b, y, reusable=True)
    for _ in range(5):
        a2, b2, y2 = (RNG.standard_normal(4).astype(np.float32) for _ in range(3))
        other = _one_shot(lib, ffi, comp, a2, b2, y2)
        np.testing.assert_array_equal(y2, a2 + b2)
        lib.ANeuralNetworksExecution_free(other)
        a[...] = RNG.standard_normal(4)
        b[...] = RNG.standard_normal(4)
        assert lib.ANeuralNetworksExecution_compute(e) == 0
        np.testing.assert_array_equal(y, a + b)
    lib.ANeuralNetworksExecution_free(e)


def test_an_arena_keeps_no_memory_alive():
    """Inputs and outputs in ANeuralNetworksMemory: views of the memory's mapping, unbound at
    the end of every run, so once the execution and the memory are freed nothing holds the
    memory object (and its file descriptor) alive."""
    ffi, lib = _nn._api()
    _, comp = _add_model()
    xa = RNG.standard_normal(4).astype(np.float32)
    xb = RNG.standard_normal(4).astype(np.float32)
    ma, mb, my = nn.Memory(xa), nn.Memory(xb), nn.Memory(size=16)
    refs = [weakref.ref(_capi._H[int(ffi.cast("uintptr_t", m.handle))]) for m in (ma, mb, my)]
    p = ffi.new("ANeuralNetworksExecution**")
    assert lib.ANeuralNetworksExecution_create(comp.handle, p) == 0
    e = p[0]
    assert lib.ANeuralNetworksExecution_setInputFromMemory(e, 0, ffi.NULL, ma.handle, 0, 16) == 0
    assert lib.ANeuralNetworksExecution_setInputFromMemory(e, 1, ffi.NULL, mb.handle, 0, 16) == 0
    assert lib.ANeuralNetworksExecution_setOutputFromMemory(e, 0, ffi.NULL, my.handle, 0, 16) == 0
    assert lib.ANeuralNetworksExecution_compute(e) == 0
    mem = _capi._H[int(ffi.cast("uintptr_t", my.handle))]
    np.testing.assert_array_equal(np.frombuffer(bytes(mem.bytes[:16]), np.float32), xa + xb)
    del mem
    lib.ANeuralNetworksExecution_free(e)
    for m in (ma, mb, my):
        m.free()
    gc.collect()
    assert all(r() is None for r in refs), "an arena or a binding kept a memory alive"
    plan = comp_plan(comp)
    assert not plan.bindings, "views of a memory are never remembered as a binding"


def comp_plan(comp):
    ffi, _ = _nn._api()
    return _capi._H[int(ffi.cast("uintptr_t", comp.handle))].plan


def test_a_python_host_computation_is_quiet_and_leaves_numpy_settings_alone():
    """inf - inf in a kernel: no warning and no FloatingPointError reach the host, even inside
    the host's own np.errstate(all="raise"), and its settings are the same afterwards."""
    m = nn.Model()
    a = m.input("a", nn.float32, (3,))
    b = m.input("b", nn.float32, (3,))
    m.output(m.op("SUB", a, b, 0, outputs=[(nn.float32, (3,))]), "y")
    comp = m.compile()
    x = np.array([np.inf, 1, -np.inf], np.float32)
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = comp.run({"a": x, "b": x})["y"]
        with np.errstate(all="raise"):
            y2 = comp.run({"a": x, "b": x})["y"]
            assert all(v == "raise" for v in np.geterr().values())
            with pytest.raises(FloatingPointError):
                np.subtract(x, x)
    assert np.geterr() == before
    np.testing.assert_array_equal(np.isnan(y), [True, False, True])
    np.testing.assert_array_equal(np.isnan(y2), [True, False, True])


class _InertVar:
    """A context variable whose value numpy never reads."""
    def set(self, value):
        return None

    def reset(self, token):
        pass


def _missing():
    raise ImportError("no such name in this numpy")


@pytest.mark.parametrize("private", [lambda: (_InertVar(), lambda **kw: object()), _missing],
                         ids=["inert", "missing"])
def test_quiet_context_falls_back_to_errstate(monkeypatch, private):
    """Where numpy's private context variable is absent or not what the fast form expects,
    the pair _quiet_context returns is np.errstate's, and silences the same way."""
    monkeypatch.setattr(EX, "_numpy_error_var", private)
    enter, leave = EX._quiet_context()
    assert enter.__name__ == "enter_public"
    _check_quiet(enter, leave)


def _check_quiet(enter, leave):
    """Inside enter/leave every setting is "ignore" (inf - inf raises nothing), around it the
    caller's np.errstate(all="raise") holds, and after it the settings before."""
    before = np.geterr()
    with np.errstate(all="raise"):
        token = enter()
        try:
            assert all(v == "ignore" for v in np.geterr().values())
            np.subtract(np.float32(np.inf), np.float32(np.inf))
        finally:
            leave(token)
        assert all(v == "raise" for v in np.geterr().values())
    assert np.geterr() == before


def test_quiet_context_of_this_numpy():
    """numpy 2: the fast form, which behaves as np.errstate."""
    if np.lib.NumpyVersion(np.__version__) < "2.0.0":
        pytest.skip(f"numpy {np.__version__} keeps its error settings elsewhere: np.errstate is used")
    enter, leave = EX._quiet_context()
    assert enter.__name__ != "enter_public"
    _check_quiet(enter, leave)
