"""Outputs handed on as views (Plan._views): RESHAPE, SQUEEZE, EXPAND_DIMS, SLICE, STRIDED_SLICE
and SPLIT whose input and outputs are temporaries of the plan and whose result is a contiguous
part of the input run no kernel; their readers get a view of the input's buffer.  The same bytes
as the copies, the input's buffer kept as long as a view of it is read, model outputs still
written, non-contiguous parts still copied."""

import numpy as np
import pytest

import nnapi_py as nn
import nnapi_py.plan as plan_mod
import nnhelp
from nnapi_py import _capi, ffi

F = nn.float32


def _plan(c):
    return _capi._H[int(ffi.cast("uintptr_t", c.handle))].plan


def _compile(make, views):
    saved = plan_mod.VIEWS
    plan_mod.VIEWS = views
    try:
        return make().compile()
    finally:
        plan_mod.VIEWS = saved


def _chain():
    """x [2, 6] + 1 -> RESHAPE [3, 4] -> SLICE rows 1..2 -> EXPAND_DIMS -> SQUEEZE ->
    SPLIT in 2 along axis 0 -> each * 2 / * 3; STRIDED_SLICE row 0 of the reshaped one (also a
    view), and a column slice (not contiguous: copied)."""
    m = nn.Model()
    x = m.input("x", F, (2, 6))
    a = m.op("ADD", x, np.ones((2, 6), np.float32), 0, outputs=[(F, (2, 6))])
    r = m.op("RESHAPE", a, np.array([3, 4], np.int32), outputs=[(F, (3, 4))])
    s = m.op("SLICE", r, np.array([1, 0], np.int32), np.array([2, 4], np.int32), outputs=[(F, (2, 4))])
    e = m.op("EXPAND_DIMS", s, 0, outputs=[(F, (1, 2, 4))])
    q = m.op("SQUEEZE", e, np.array([0], np.int32), outputs=[(F, (2, 4))])
    p0, p1 = m.op("SPLIT", q, 0, 2, outputs=[(F, (1, 4)), (F, (1, 4))])
    m.output(m.op("MUL", p0, np.full((1, 4), 2, np.float32), 0, outputs=[(F, (1, 4))]), "y0")
    m.output(m.op("MUL", p1, np.full((1, 4), 3, np.float32), 0, outputs=[(F, (1, 4))]), "y1")
    row = m.op("STRIDED_SLICE", r, np.array([0, 0], np.int32), np.array([1, 4], np.int32), np.array([1, 1], np.int32),
               0, 0, 1, outputs=[(F, (4,))])
    m.output(m.op("ADD", row, np.full((4,), 5, np.float32), 0, outputs=[(F, (4,))]), "y2")
    col = m.op("SLICE", r, np.array([0, 1], np.int32), np.array([3, 2], np.int32), outputs=[(F, (3, 2))])
    m.output(m.op("SUB", col, np.full((3, 2), 1, np.float32), 0, outputs=[(F, (3, 2))]), "y3")
    return m


def test_views_same_bytes_fewer_steps():
    x = np.random.default_rng(4).standard_normal((2, 6)).astype(np.float32)
    on, off = _compile(_chain, True), _compile(_chain, False)
    p = _plan(on)
    assert len(p.views) == 7          # RESHAPE, SLICE, EXPAND_DIMS, SQUEEZE, SPLIT's two, STRIDED_SLICE
    assert len(p.steps) == len(_plan(off).steps) - 6
    got, want = on.run({"x": x}), off.run({"x": x})
    r = (x + 1).reshape(3, 4)
    assert got["y0"].tobytes() == (r[1:2] * 2).tobytes() == want["y0"].tobytes()
    assert got["y1"].tobytes() == (r[2:3] * 3).tobytes() == want["y1"].tobytes()
    assert got["y2"].tobytes() == (r[0] + 5).tobytes() == want["y2"].tobytes()
    assert got["y3"].tobytes() == (r[:, 1:3] - 1).tobytes() == want["y3"].tobytes()


def _late_reader():
    """a = x + 1; v = RESHAPE(a); then three temporaries of a's size (which would take a's
    buffer were it freed after the RESHAPE); y = v + the last of them: a's buffer must live
    until y."""
    m = nn.Model()
    x = m.input("x", F, (16,))
    a = m.op("ADD", x, np.ones(16, np.float32), 0, outputs=[(F, (16,))])
    v = m.op("RESHAPE", a, np.array([4, 4], np.int32), outputs=[(F, (4, 4))])
    t = m.op("MUL", x, np.full(16, 2, np.float32), 0, outputs=[(F, (16,))])
    for k in range(3):
        t = m.op("ADD", t, np.full(16, k, np.float32), 0, outputs=[(F, (16,))])
    t = m.op("RESHAPE", t, np.array([4, 4], np.int32), outputs=[(F, (4, 4))])
    m.output(m.op("ADD", v, t, 0, outputs=[(F, (4, 4))]), "y")
    return m


def test_view_keeps_its_source_buffer_alive():
    x = np.arange(16, dtype=np.float32)
    c = _compile(_late_reader, True)
    assert _plan(c).views
    want = ((x + 1) + (x * 2 + 0 + 1 + 2)).reshape(4, 4)
    assert c.run({"x": x})["y"].tobytes() == want.astype(np.float32).tobytes()


def test_model_inputs_and_outputs_are_not_views():
    """A RESHAPE of a model input, and one writing a model output, are not views of the plan's
    temporaries (Plan.views: the input's view is made when the caller's array is bound,
    Plan._bound_views); the results are right."""
    m = nn.Model()
    x = m.input("x", F, (2, 3))
    r = m.op("RESHAPE", x, np.array([3, 2], np.int32), outputs=[(F, (3, 2))])
    a = m.op("ADD", r, np.ones((3, 2), np.float32), 0, outputs=[(F, (3, 2))])
    m.output(m.op("RESHAPE", a, np.array([6], np.int32), outputs=[(F, (6,))]), "y")
    c = m.compile()
    assert not _plan(c).views
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.zeros(6, np.float32)
    e = c.execution()
    e.run({"x": x}, {"y": out})
    assert out.tolist() == (x.reshape(-1) + 1).tolist()


def test_views_from_many_threads():
    """Each arena has its own views: concurrent computations do not see each other's values."""
    c = _compile(_chain, True)
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(50):
            x = rng.standard_normal((2, 6)).astype(np.float32)
            r = (x + 1).reshape(3, 4)
            got = c.run({"x": x})
            if got["y1"].tobytes() != (r[2:3] * 3).tobytes() or got["y2"].tobytes() != (r[0] + 5).tobytes():
                errors.append(seed)
    nnhelp.in_threads(work, 6)
    assert not errors


@pytest.mark.parametrize("views", [True, False])
def test_views_flag(views):
    c = _compile(_chain, views)
    assert bool(_plan(c).views) == views


def test_profile_says_what_was_handed_on(monkeypatch):
    from nnapi_py import profiling
    monkeypatch.setattr(profiling, "ENABLED", True)
    notes = []
    monkeypatch.setattr(profiling, "note", notes.append)
    _compile(_chain, True)
    assert "6 operation(s) handed on as views of their input (no kernel runs)" in notes


def test_folded_constant_source_is_not_a_view():
    """FILL of constants is computed at compilation into a new constant operand (past the
    model's own): a RESHAPE of it is folded too, and a view is never made of a constant."""
    m = nn.Model()
    x = m.input("x", F, (2, 2))
    f = m.op("FILL", np.array([4], np.int32), np.float32(1.5), outputs=[(F, (4,))])
    r = m.op("RESHAPE", f, np.array([2, 2], np.int32), outputs=[(F, (2, 2))])
    m.output(m.op("ADD", x, r, 0, outputs=[(F, (2, 2))]), "y")
    c = m.compile()
    assert not _plan(c).views
    assert c.run({"x": np.ones((2, 2), np.float32)})["y"].tolist() == [[2.5, 2.5], [2.5, 2.5]]


def test_cached_plan_with_views_rebuilds_the_right_steps(tmp_path, monkeypatch):
    """A kernel the compilation cache cannot write is built again when the plan is loaded; with
    operations handed on as views the steps no longer line up with the nodes: the loaded plan's
    steps are made again from its nodes, and it computes the same bytes."""
    from nnapi_py import cache
    real = cache._Pickler.reducer_override
    refused = []

    def refuse_slice(self, obj):        # the column SLICE's kernel (the only region copy left)
        import types
        if type(obj) is types.FunctionType and obj.__qualname__.startswith("_region_kernel"):
            import pickle
            refused.append(obj)
            raise pickle.PicklingError("not writable (test)")
        return real(self, obj)
    monkeypatch.setattr(cache._Pickler, "reducer_override", refuse_slice)
    x = np.random.default_rng(9).standard_normal((2, 6)).astype(np.float32)
    want = _compile(_chain, False).run({"x": x})
    token = bytes(range(32))
    first = _chain().compile(cache_dir=str(tmp_path), token=token)
    second = _chain().compile(cache_dir=str(tmp_path), token=token)
    st = _capi._comp(int(ffi.cast("uintptr_t", second.handle))).cache_status
    assert st.startswith("hit"), st
    assert refused                          # the column SLICE's kernel was written as "rebuild"
    p = _plan(second)
    assert p.views and len(p.steps) == len(_plan(first).steps)
    for c in (first, second):
        got = c.run({"x": x})
        assert all(got[k].tobytes() == want[k].tobytes() for k in want)
