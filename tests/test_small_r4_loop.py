"""A WHILE of small tensors (a GRU step, precise_vad's form) runs its condition and body flat on
arenas bound once per loop (ops/control.py _LoopKit, Plan.run_bound), and operations that only
select part of a tensor no one reads run no kernel (Plan._unread).  The same bytes as the
loop run operation by operation; failures, the loop timeout and the deadline as before; each
thread on a kit of its own."""
import numpy as np
import pytest

import nnapi_py as nn
from nnapi_py import _capi, ffi
import nnapi_py.plan as plan_mod
from nnapi_py.ops import control
import nnhelp

F, I = nn.float32, nn.int32


def _plan(c):
    return _capi._H[int(ffi.cast("uintptr_t", c.handle))].plan


def _gru_like(steps, rows=None, computed_table=False):
    """WHILE i < steps: i += 1; h = h * 0.5 + table[i] (GATHER of the counter); acc = h as
    (1, 1, 4) (EXPAND_DIMS, a one-input CONCATENATION), with two SLICEs of acc no one reads.
    table: an input-only loop value of `rows` rows (steps by default): the model input, or
    (computed_table) the model input times 1 (a temporary of the outer plan, whose slices
    GATHER keeps)."""
    rows = steps if rows is None else rows
    cm = nn.Model("cond")
    ci, _, _, _ = (cm.input("i", I, (1,)), cm.input("h", F, (1, 4)), cm.input("acc", F, (1, 1, 4)),
                   cm.input("table", F, (rows, 1, 4)))
    cm.output(cm.op("LESS", ci, np.array([steps], np.int32), outputs=[(nn.bool8, (1,))]), "go")
    b = nn.Model("body")
    bi, bh, bacc, bt = (b.input("i", I, (1,)), b.input("h", F, (1, 4)), b.input("acc", F, (1, 1, 4)),
                        b.input("table", F, (rows, 1, 4)))
    i1 = b.op("ADD", bi, np.array([1], np.int32), 0, outputs=[(I, (1,))])
    g = b.op("GATHER", bt, np.int32(0), bi, outputs=[(F, (1, 1, 4))])
    gr = b.op("RESHAPE", g, np.array([1, 4], np.int32), outputs=[(F, (1, 4))])
    half = b.op("MUL", bh, np.full((1, 4), 0.5, np.float32), 0, outputs=[(F, (1, 4))])
    h1 = b.op("ADD", half, gr, 0, outputs=[(F, (1, 4))])
    b.op("SLICE", bacc, np.array([0, 0, 0], np.int32), np.array([1, 1, 2], np.int32), outputs=[(F, (1, 1, 2))])
    b.op("SLICE", bacc, np.array([0, 0, 2], np.int32), np.array([1, 1, 2], np.int32), outputs=[(F, (1, 1, 2))])
    e = b.op("EXPAND_DIMS", h1, np.int32(0), outputs=[(F, (1, 1, 4))])
    acc1 = b.op("CONCATENATION", e, np.int32(0), outputs=[(F, (1, 1, 4))])
    b.output(i1, "i1")
    b.output(h1, "h1")
    b.output(acc1, "acc1")
    m = nn.Model()
    i0, h0, a0, t0 = (m.input("i", I, (1,)), m.input("h", F, (1, 4)), m.input("acc", F, (1, 1, 4)),
                      m.input("table", F, (rows, 1, 4)))
    if computed_table:
        t0 = m.op("MUL", t0, np.ones((rows, 1, 4), np.float32), 0, outputs=[(F, (rows, 1, 4))])
    r = m.op("WHILE", cm, b, i0, h0, a0, t0, outputs=[(I, (1,)), (F, (1, 4)), (F, (1, 1, 4))])
    for k, name in enumerate(("i_out", "h_out", "acc_out")):
        m.output(r[k], name)
    return m


def _feed(rng, rows, start=0):
    return {"i": np.array([start], np.int32), "h": rng.standard_normal((1, 4)).astype(np.float32),
            "acc": rng.standard_normal((1, 1, 4)).astype(np.float32),
            "table": rng.standard_normal((rows, 1, 4)).astype(np.float32)}


def _want(feed, steps):
    i, h, acc = int(feed["i"][0]), feed["h"], feed["acc"]
    while i < steps:
        h = h * np.float32(0.5) + feed["table"][i].reshape(1, 4)
        acc = h.reshape(1, 1, 4)
        i += 1
    return {"i_out": np.array([i], np.int32), "h_out": h, "acc_out": acc}


def _same(got, want):
    assert got.keys() == want.keys()
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        assert got[k].tobytes() == want[k].tobytes(), k


def _body_plan(c):
    node = next(n for n in _plan(c).nodes if n.name == "WHILE")
    return [p for _, p in node.cache.values() if len(p.nodes) > 2][0]


@pytest.mark.parametrize("computed_table", [False, True])
def test_loop_same_bytes_as_operation_by_operation(monkeypatch, computed_table):
    rng = np.random.default_rng(0)
    c = _gru_like(9, computed_table=computed_table).compile()
    feeds = [_feed(rng, 9, start) for start in (0, 3, 8, 9, 12)]      # 9, 6, 1, 0 and no steps
    flat = [c.run(f) for f in feeds]
    for f, got in zip(feeds, flat):
        _same(got, _want(f, 9))
    assert _plan(c).static and _plan(c).has_control
    body = _body_plan(c)
    assert len(body.loop_kits) == 1, "one kit, taken and given back by each computation"
    monkeypatch.setattr(control, "FLAT", False)
    slow = _gru_like(9, computed_table=computed_table).compile()
    for f, got in zip(feeds, flat):
        _same(slow.run(f), got)


def test_sub_plans_run_bound_not_bound_per_step(monkeypatch):
    """The condition and the body run on arenas bound when the kit is made (Plan.bind), not
    per step: a second computation binds nothing; the body's element-wise steps are direct
    ufunc calls on the bound arrays (Plan.direct_steps)."""
    from nnapi_py.plan import Plan
    rng = np.random.default_rng(1)
    c = _gru_like(6).compile()
    c.run(_feed(rng, 6))
    kit = _body_plan(c).loop_kits[0]
    for calls in kit.body_calls:
        assert sorted(fn.__name__ for fn, _ in calls if isinstance(fn, np.ufunc)) == ["add", "multiply"], \
            "the float MUL and ADD direct calls (the counter's int ADD is one_int's own)"
    for calls in kit.cond_calls:                # LESS of one value (one_value's direct call)
        assert [(fn.__qualname__.split(".")[0], args) for fn, args in calls] == [("one_value", ())]
    binds, runs = [], []
    real_bind, real_run = Plan.bind, Plan.run_direct
    monkeypatch.setattr(Plan, "bind", lambda self, *a, **k: (binds.append(self), real_bind(self, *a, **k))[1])
    monkeypatch.setattr(Plan, "run_direct", lambda self, *a, **k: (runs.append(self), real_run(self, *a, **k))[1])
    e = c.execution(reusable=True)
    feed = _feed(rng, 6)
    outs = {"i_out": np.zeros(1, np.int32), "h_out": np.zeros((1, 4), np.float32),
            "acc_out": np.zeros((1, 1, 4), np.float32)}
    e.run(feed, outs)
    body = _body_plan(c)
    assert sum(p is body for p in runs) == 6 and sum(p is not body for p in runs) >= 7
    n_binds = sum(p is body for p in binds)
    e.run(feed, outs)           # the same input-only array: nothing bound again
    assert sum(p is body for p in binds) == n_binds
    _same(outs, _want(feed, 6))


def _gather_kept(c):
    """The indices whose slices the body's GATHER keeps (gather._one_index's direct call on
    the loop kit's bound table), or None where GATHER is no direct call (a caller's table)."""
    got = None
    for kit in _body_plan(c).loop_kits:
        for calls in kit.body_calls:
            for fn, _ in calls:
                if "_one_index" in fn.__qualname__ and fn.__code__.co_freevars:
                    cells = dict(zip(fn.__code__.co_freevars, (x.cell_contents for x in fn.__closure__)))
                    if "views" in cells:
                        got = (got or set()) | set(cells["views"])
    return got


@pytest.mark.parametrize("computed_table", [False, True])
def test_input_only_value_rebound_when_it_changes(computed_table):
    """The kit's arenas hold the input-only values they were bound to; a computation with other
    arrays (or the same array with new values) reads the new ones (computed_table: the same
    temporary with new values every computation, whose slices GATHER keeps)."""
    rng = np.random.default_rng(2)
    c = _gru_like(5, computed_table=computed_table).compile()
    for _ in range(3):
        f = _feed(rng, 5)
        _same(c.run(f), _want(f, 5))
    e = c.execution(reusable=True)
    f = _feed(rng, 5)
    outs = {"i_out": np.zeros(1, np.int32), "h_out": np.zeros((1, 4), np.float32),
            "acc_out": np.zeros((1, 1, 4), np.float32)}
    e.run(f, outs)
    _same(outs, _want(f, 5))
    f["table"][...] = rng.standard_normal((5, 1, 4)).astype(np.float32)
    e.run(f, outs)
    _same(outs, _want(f, 5))
    # a caller's array is never kept; the outer plan's temporary is
    assert _gather_kept(c) == (set(range(5)) if computed_table else None)


def test_results_are_not_the_kits_arrays():
    rng = np.random.default_rng(3)
    c = _gru_like(4).compile()
    f1, f2 = _feed(rng, 4), _feed(rng, 4)
    first = c.run(f1)
    kept = {k: v.copy() for k, v in first.items()}
    c.run(f2)
    _same(first, kept)


def test_body_failure_same_reason_as_operation_by_operation(monkeypatch):
    """A GATHER index past the table (the counter runs past its rows) fails the computation
    with the reason the node-by-node run gives."""
    rng = np.random.default_rng(4)
    f = _feed(rng, 3)
    with pytest.raises(nn.NNAPIError) as flat:
        _gru_like(6, rows=3).compile().run(f)
    monkeypatch.setattr(control, "FLAT", False)
    with pytest.raises(nn.NNAPIError) as slow:
        _gru_like(6, rows=3).compile().run(f)
    assert flat.value.code_name == slow.value.code_name == "OP_FAILED"
    assert flat.value.reason == slow.value.reason
    assert "GATHER" in flat.value.reason and "out of range" in flat.value.reason


@pytest.mark.parametrize("computed_table", [False, True])
def test_loops_from_many_threads(computed_table):
    """Each computation in progress takes a kit of its own; kits are kept, at most one per
    computation that was in progress at once."""
    c = _gru_like(7, computed_table=computed_table).compile()
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(30):
                f = _feed(rng, 7, int(rng.integers(0, 8)))
                got = c.run(f)
                want = _want(f, 7)
                if any(got[k].tobytes() != want[k].tobytes() for k in want):
                    errors.append(seed)
        except Exception as e:
            errors.append(e)
    nnhelp.in_threads(work, 6)
    assert not errors
    assert 1 <= len(_body_plan(c).loop_kits) <= 6


def _selections(unread=True):
    """y = (x + 1) * 2; SLICE, STRIDED_SLICE and a RESHAPE of the SLICE no one reads (of the
    ADD's result and of the model input)."""
    m = nn.Model()
    x = m.input("x", F, (2, 6))
    a = m.op("ADD", x, np.ones((2, 6), np.float32), 0, outputs=[(F, (2, 6))])
    s = m.op("SLICE", a, np.array([0, 1], np.int32), np.array([2, 3], np.int32), outputs=[(F, (2, 3))])
    m.op("RESHAPE", s, np.array([6], np.int32), outputs=[(F, (6,))])
    m.op("STRIDED_SLICE", x, np.array([0, 0], np.int32), np.array([2, 6], np.int32), np.array([1, 2], np.int32),
         0, 0, 0, outputs=[(F, (2, 3))])
    m.output(m.op("MUL", a, np.full((2, 6), 2, np.float32), 0, outputs=[(F, (2, 6))]), "y")
    return m


def test_unread_selections_run_no_kernel(monkeypatch):
    x = np.random.default_rng(5).standard_normal((2, 6)).astype(np.float32)
    c = _selections().compile()
    p = _plan(c)
    assert len(p.unread) == 3 and len(p.steps) == 2
    assert not set(p.unread) & {i for i, _, _ in p.temps}, "an unread result takes no memory"
    want = ((x + np.float32(1)) * np.float32(2)).astype(np.float32)
    assert c.run({"x": x})["y"].tobytes() == want.tobytes()
    monkeypatch.setattr(plan_mod, "VIEWS", False)
    c2 = _selections().compile()
    assert not _plan(c2).unread and len(_plan(c2).steps) == 5
    assert c2.run({"x": x})["y"].tobytes() == want.tobytes()


def test_unread_result_of_an_operation_that_can_fail_still_runs():
    """A GATHER no one reads still runs: its index can be out of range, found at execution."""
    m = nn.Model()
    x = m.input("x", F, (3, 2))
    k = m.input("k", I, (1,))
    m.op("GATHER", x, np.int32(0), k, outputs=[(F, (1, 2))])
    m.output(m.op("RELU", x, outputs=[(F, (3, 2))]), "y")
    c = m.compile()
    assert not _plan(c).unread
    c.run({"x": np.ones((3, 2), np.float32), "k": np.array([2], np.int32)})
    with pytest.raises(nn.NNAPIError) as e:
        c.run({"x": np.ones((3, 2), np.float32), "k": np.array([3], np.int32)})
    assert e.value.code_name == "OP_FAILED" and "out of range" in e.value.reason


def test_profile_says_what_runs_no_kernel(monkeypatch):
    from nnapi_py import profiling
    monkeypatch.setattr(profiling, "ENABLED", True)
    notes = []
    monkeypatch.setattr(profiling, "note", notes.append)
    _selections().compile()
    assert "3 operation(s) whose results no operation reads run no kernel" in notes


_EDGES = np.array([0, 1, -1, 7, -7, 2 ** 31 - 1, -2 ** 31, 2 ** 30, -2 ** 30 - 3, 65536, 46341], np.int32)


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("form", ["inputs", "const_b", "const_a", "broadcast"])
def test_one_element_int32_same_as_ufunc(op, form, monkeypatch):
    """One-element TENSOR_INT32 ADD / SUB / MUL on Python ints (elementwise.one_int) wrap as the
    int32 ufunc does: every pair of edge values, a constant on either side, shapes (1,) and
    (1, 1, 1) broadcast; the same bytes as the model built with the ufunc kernel."""
    from nnapi_py.ops import elementwise
    sa, sb = ((1, 1, 1), (1,)) if form == "broadcast" else ((1,), (1,))
    so = (1, 1, 1) if form == "broadcast" else (1,)
    pairs = [(int(x), int(y)) for x in _EDGES for y in _EDGES]

    def build(cv):
        m = nn.Model()
        a = np.array([cv], np.int32).reshape(sa) if form == "const_a" else m.input("a", I, sa)
        b = np.array([cv], np.int32).reshape(sb) if form == "const_b" else m.input("b", I, sb)
        m.output(m.op(op, a, b, 0, outputs=[(I, so)]), "y")
        return m

    def runs(c, x, y):
        feed = {}
        if form != "const_a":
            feed["a"] = np.array([x], np.int32).reshape(sa)
        if form != "const_b":
            feed["b"] = np.array([y], np.int32).reshape(sb)
        return c.run(feed)["y"]
    consts = sorted({x if form == "const_a" else y for x, y in pairs}) if form.startswith("const") else [0]
    for cv in consts:
        lean = build(cv).compile()
        with monkeypatch.context() as mp:
            mp.setattr(elementwise, "one_int", lambda *a: None)
            general = build(cv).compile()
        assert _plan(lean).steps[0][0].__qualname__.startswith("one_int")
        assert not _plan(general).steps[0][0].__qualname__.startswith("one_int")
        for x, y in pairs:
            if form == "const_a" and x != cv or form == "const_b" and y != cv:
                continue
            got, want = runs(lean, x, y), runs(general, x, y)
            assert got.dtype == want.dtype == np.int32 and got.shape == want.shape == so
            assert got.tobytes() == want.tobytes(), (op, x, y, got, want)


def _reshape_of_input():
    """y = RESHAPE(x) + 1, z = EXPAND_DIMS(y) * 2 (a selection of a model input and one of a
    model output, each read by one operation)."""
    m = nn.Model()
    x = m.input("x", F, (2, 6))
    r = m.op("RESHAPE", x, np.array([3, 4], np.int32), outputs=[(F, (3, 4))])
    y = m.op("ADD", r, np.ones((3, 4), np.float32), 0, outputs=[(F, (3, 4))])
    e = m.op("EXPAND_DIMS", y, np.int32(0), outputs=[(F, (1, 3, 4))])
    m.output(y, "y")
    m.output(m.op("MUL", e, np.full((1, 3, 4), 2, np.float32), 0, outputs=[(F, (1, 3, 4))]), "z")
    return m


def _want_reshape(x):
    y = x.reshape(3, 4) + np.float32(1)
    return y, (y * np.float32(2)).reshape(1, 3, 4)


def test_selections_of_bound_arrays_are_views_where_they_can_be():
    """Plan._bound_views: the RESHAPE of the model input and the EXPAND_DIMS of the model output
    hand on views of the bound arrays (their steps run no kernel); a strided caller array
    takes the kernel into the arena's temporary instead, and the next contiguous one the view
    again; a run without keep leaves no view of the caller's arrays behind."""
    import gc
    import weakref
    from nnapi_py.plan_run import _skip
    c = _reshape_of_input().compile()
    p = _plan(c)
    assert len(p.bound_views) == 2 and len(p.steps) == 4
    rng = np.random.default_rng(6)
    for _ in range(3):
        x = rng.standard_normal((2, 6)).astype(np.float32)
        got = c.run({"x": x})
        y, z = _want_reshape(x)
        assert got["y"].tobytes() == y.tobytes() and got["z"].tobytes() == z.tobytes()
        ref = weakref.ref(x)
        del x, got
        gc.collect()
        assert ref() is None, "the plan kept the caller's input array"
    ab = p.take_arena()
    try:
        wide = rng.standard_normal((2, 12)).astype(np.float32)
        for x in (wide[:, ::2], np.ascontiguousarray(wide[:, ::2]), wide[:, 1::2]):
            outs = [np.empty((3, 4), np.float32), np.empty((1, 3, 4), np.float32)[:, :, :]]
            p.run_static([x], outs, None, True, ab)
            y, z = _want_reshape(np.ascontiguousarray(x))
            assert outs[0].tobytes() == y.tobytes() and outs[1].tobytes() == z.tobytes()
            kinds = [ab[1][s][0] is _skip for s, _, _ in p.bound_views]
            assert kinds == [x.flags.c_contiguous, True], kinds
    finally:
        p.give_arena(ab)


def test_bound_views_of_two_alternating_arrays_are_made_once():
    """Two sets of arrays taking turns on one arena with keep (a streaming pair's two
    executions): each set's bound views are made once and handed on again (the same objects,
    so the readers' kept views of their inputs hit), with the right values every run; a
    strided array in between takes the kernel and the views come back after; a run without
    keep drops the memo, so nothing of the caller's stays with the arena."""
    import gc
    import weakref
    from nnapi_py.plan_run import _skip
    c = _reshape_of_input().compile()
    p = _plan(c)
    (s0, _, outs0) = p.bound_views[0]
    (r, side, k), = outs0[0][3]                 # the ADD reading the RESHAPE of the input
    rng = np.random.default_rng(9)
    sets = [([rng.standard_normal((2, 6)).astype(np.float32)],
             [np.empty((3, 4), np.float32), np.empty((1, 3, 4), np.float32)]) for _ in range(2)]
    ab = p.take_arena()
    try:
        seen = [None, None]
        for step in range(6):
            ins, outs = sets[step % 2]
            if step == 3:                       # a strided input between: the kernel runs
                wide = rng.standard_normal((2, 12)).astype(np.float32)
                p.run_static([wide[:, ::2]], outs, None, True, ab)
                assert ab[1][s0][0] is not _skip
                y, _ = _want_reshape(np.ascontiguousarray(wide[:, ::2]))
                assert outs[0].tobytes() == y.tobytes()
            ins[0][...] = rng.standard_normal((2, 6)).astype(np.float32)
            p.run_static(ins, outs, None, True, ab)
            y, z = _want_reshape(ins[0])
            assert outs[0].tobytes() == y.tobytes() and outs[1].tobytes() == z.tobytes()
            assert ab[1][s0][0] is _skip
            view = ab[1][r][1 + side][k]
            assert np.shares_memory(view, ins[0])
            if seen[step % 2] is None:
                seen[step % 2] = view
            assert view is seen[step % 2], "the bound view was made again for an array met before"
        x = rng.standard_normal((2, 6)).astype(np.float32)
        p.run_static([x], sets[0][1], None, False, ab)
        y, _ = _want_reshape(x)
        assert sets[0][1][0].tobytes() == y.tobytes()
        assert not ab[4], "a run without keep left the memo of the caller's arrays"
        refs = [weakref.ref(x)] + [weakref.ref(a) for ins, _ in sets for a in ins]
        del x, ins, sets, view, seen
        gc.collect()
        assert all(w() is None for w in refs), "the arena kept a caller's array"
    finally:
        p.give_arena(ab)


def test_bound_view_reusable_execution_sees_new_values():
    """A reusable execution keeps its arrays bound (and the views of them): new input values in
    the same buffers are what the next computation reads."""
    c = _reshape_of_input().compile()
    e = c.execution(reusable=True)
    rng = np.random.default_rng(7)
    for _ in range(3):
        x = rng.standard_normal((2, 6)).astype(np.float32)
        outs = {"y": np.zeros((3, 4), np.float32), "z": np.zeros((1, 3, 4), np.float32)}
        e.run({"x": x}, outs)
        y, z = _want_reshape(x)
        assert outs["y"].tobytes() == y.tobytes() and outs["z"].tobytes() == z.tobytes()


def test_gru_body_expands_its_output_as_a_view():
    c = _gru_like(4).compile()
    rng = np.random.default_rng(8)
    f = _feed(rng, 4)
    _same(c.run(f), _want(f, 4))
    body = _body_plan(c)
    (s, src, outs), = body.bound_views                    # EXPAND_DIMS of the output h1
    assert src == body.outputs[1] and body.steps[s][2] == tuple(o for o, _, _, _ in outs)
    from nnapi_py.plan_run import _skip
    assert all(kit.body_arenas[p][1][s][0] is _skip for kit in body.loop_kits for p in (0, 1))


def test_unexpected_failure_in_a_direct_call_names_its_operation():
    """A kernel's unexpected exception inside the loop's direct calls becomes OP_FAILED naming
    the body's operation (as run_bound and run_static name it)."""
    import nnapi_py.plan as P
    rng = np.random.default_rng(9)
    c = _gru_like(4).compile()
    c.run(_feed(rng, 4))
    body = _body_plan(c)
    kit = body.loop_kits[0]
    mul = next(k for k, (_, ii, _) in enumerate(body.steps)
               if any(n.name == "MUL" and n.ins == ii for n in body.nodes))

    def boom(*args):
        raise RuntimeError("boom")
    for calls in kit.body_calls:
        calls[mul] = (boom, calls[mul][1])
    with pytest.raises(nn.NNAPIError) as e:
        c.run(_feed(rng, 4))
    assert e.value.code_name == "OP_FAILED" and "MUL" in e.value.reason and "internal error" in e.value.reason
    assert P.INTERNAL_ERRORS and P.INTERNAL_ERRORS[-1][0] == "MUL"
    P.INTERNAL_ERRORS.pop()                      # caused on purpose (tests/conftest.py)


@pytest.mark.parametrize("fuse", [0, 1, 2, 3])
def test_fully_connected_in_a_loop_same_bytes_as_operation_by_operation(fuse, monkeypatch):
    """A body's small float FULLY_CONNECTED (an input of rank 3, flattened to rows; every fused
    activation) as a direct call on the kit's arrays: the bytes of the node-by-node run."""
    rng = np.random.default_rng(10 + fuse)
    w = (rng.standard_normal((8, 8)) * 0.6).astype(np.float32)
    bias = rng.standard_normal(8).astype(np.float32)

    def build():
        cm = nn.Model("cond")
        ci, _ = cm.input("i", I, (1,)), cm.input("v", F, (1, 1, 8))
        cm.output(cm.op("LESS", ci, np.array([6], np.int32), outputs=[(nn.bool8, (1,))]), "go")
        b = nn.Model("body")
        bi, bv = b.input("i", I, (1,)), b.input("v", F, (1, 1, 8))
        y = b.op("FULLY_CONNECTED", bv, w, bias, fuse, outputs=[(F, (1, 8))])
        b.output(b.op("ADD", bi, np.array([1], np.int32), 0, outputs=[(I, (1,))]), "i1")
        b.output(b.op("RESHAPE", y, np.array([1, 1, 8], np.int32), outputs=[(F, (1, 1, 8))]), "v1")
        m = nn.Model()
        r = m.op("WHILE", cm, b, m.input("i", I, (1,)), m.input("v", F, (1, 1, 8)),
                 outputs=[(I, (1,)), (F, (1, 1, 8))])
        m.output(r[1], "v_out")
        return m
    c = build().compile()
    feeds = [{"i": np.array([0], np.int32), "v": rng.standard_normal((1, 1, 8)).astype(np.float32)}
             for _ in range(3)]
    flat = [c.run(f) for f in feeds]
    calls = _body_plan(c).loop_kits[0].body_calls[0]
    assert any("_small_float_fc" in fn.__qualname__ and not args for fn, args in calls), "FC a direct call"
    monkeypatch.setattr(control, "FLAT", False)
    slow = build().compile()
    for f, got in zip(feeds, flat):
        _same(slow.run(f), got)
