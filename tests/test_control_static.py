"""IF and WHILE as steps of a static plan (plan_run.control_step): a model whose control-flow
operations have inputs of known shapes and fully declared outputs runs flat, like any other
static model, instead of node by node.  The same bytes as the node-by-node run; the loop
timeout and the execution's deadline still stop a loop; a result of another shape than
declared still fails the computation."""
import numpy as np
import pytest

import nnapi_py as nn
from nnapi_py import _capi, ffi, lib
import nnapi_py.plan as plan_mod
import nnhelp
from nnapi_py import constants as C


def _plan(c):
    return _capi._H[int(ffi.cast("uintptr_t", c.handle))].plan


def _branch(op, k):
    b = nn.Model(op.lower())
    x = b.input("x", nn.float32, (2, 3))
    b.output(b.op(op, x, np.full((2, 3), k, np.float32), 0, outputs=[(nn.float32, (2, 3))]), "y")
    return b


def _if_model():
    """y = IF(c, x + 1.5, x - 2) * 3 (the IF between two operations of the outer plan)."""
    m = nn.Model()
    c = m.input("c", nn.bool8, (1,))
    x = m.input("x", nn.float32, (2, 3))
    t = m.op("RELU", x, outputs=[(nn.float32, (2, 3))])
    r = m.op("IF", c, _branch("ADD", 1.5), _branch("SUB", 2.0), t, outputs=[(nn.float32, (2, 3))])
    m.output(m.op("MUL", r, np.full((2, 3), 3, np.float32), 0, outputs=[(nn.float32, (2, 3))]), "y")
    return m


def _loop_model(limit, out_dims=(4,)):
    """WHILE v < limit: v = v * 1.5 + 1 (limit None: WHILE v < 1e30: v = v * 1 + 0, endless);
    out_dims: the WHILE output's declared dimensions (0: not declared, the loop's to say)."""
    cm = nn.Model("cond")
    v = cm.input("v", nn.float32, (4,))
    bound = np.full((4,), 1e30 if limit is None else limit, np.float32)
    k, b = (1.0, 0.0) if limit is None else (1.5, 1.0)
    red = cm.op("LESS", v, bound, outputs=[(nn.bool8, (4,))])
    cm.output(cm.op("REDUCE_ALL", red, np.array([0], np.int32), False, outputs=[(nn.bool8, (1,))]), "go")
    body = nn.Model("body")
    bv = body.input("v", nn.float32, (4,))
    s = body.op("MUL", bv, np.full((4,), k, np.float32), 0, outputs=[(nn.float32, (4,))])
    body.output(body.op("ADD", s, np.full((4,), b, np.float32), 0, outputs=[(nn.float32, (4,))]), "v1")
    m = nn.Model()
    start = m.input("start", nn.float32, (4,))
    r = m.op("WHILE", cm, body, start, outputs=[(nn.float32, out_dims)])
    m.output(m.op("RELU", r, outputs=[(nn.float32, (4,))]) if out_dims != (4,) else r, "end")
    return m


def _node_by_node(monkeypatch, make):
    monkeypatch.setattr(plan_mod, "control_step", lambda node, infos, shapes: None)
    c = make().compile()
    assert not _plan(c).static
    monkeypatch.undo()
    return c


@pytest.mark.parametrize("cond", [True, False])
def test_if_step_same_bytes_as_node_by_node(monkeypatch, cond):
    x = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    feed = {"c": np.array([cond]), "x": x}
    flat = _if_model().compile()
    p = _plan(flat)
    assert p.static and p.has_control
    want = (np.maximum(x, 0) + np.float32(1.5) if cond else np.maximum(x, 0) - np.float32(2)) * np.float32(3)
    got = flat.run(feed)["y"]
    assert got.tobytes() == want.astype(np.float32).tobytes()
    slow = _node_by_node(monkeypatch, _if_model)
    assert slow.run(feed)["y"].tobytes() == got.tobytes()
    e = flat.execution(reusable=True)          # a reusable execution: the same bound arrays, run after run
    for k in range(4):
        feed = {"c": np.array([k % 2 == 0]), "x": x + k}
        assert e.run(feed)["y"].tobytes() == slow.run(feed)["y"].tobytes()


def test_while_step_same_bytes_as_node_by_node(monkeypatch):
    start = np.array([0.5, -3, 10, 2], np.float32)
    flat = _loop_model(100.0).compile()
    assert _plan(flat).static
    got = flat.run({"start": start})["end"]
    v = start.copy()
    while (v < 100).all():
        v = v * np.float32(1.5) + np.float32(1)
    assert got.tobytes() == v.tobytes()
    slow = _node_by_node(monkeypatch, lambda: _loop_model(100.0))
    assert slow.run({"start": start})["end"].tobytes() == got.tobytes()


def _compute_with(c, start, loop_timeout=None, timeout=None):
    pe = ffi.new("ANeuralNetworksExecution**")
    assert lib.ANeuralNetworksExecution_create(c.handle, pe) == 0
    e = pe[0]
    try:
        if loop_timeout is not None:
            assert lib.ANeuralNetworksExecution_setLoopTimeout(e, loop_timeout) == 0
        if timeout is not None:
            assert lib.ANeuralNetworksExecution_setTimeout(e, timeout) == 0
        out = np.zeros(4, np.float32)
        assert lib.ANeuralNetworksExecution_setInput(e, 0, ffi.NULL, ffi.from_buffer(start), start.nbytes) == 0
        assert lib.ANeuralNetworksExecution_setOutput(e, 0, ffi.NULL, ffi.from_buffer(out), out.nbytes) == 0
        return lib.ANeuralNetworksExecution_compute(e), nn.last_error()
    finally:
        lib.ANeuralNetworksExecution_free(e)


def test_endless_while_step_stops_at_the_loop_timeout():
    c = _loop_model(None).compile()
    assert _plan(c).static and _plan(c).has_control
    rc, why = _compute_with(c, np.ones(4, np.float32), loop_timeout=20_000_000)      # 20 ms
    assert rc == C.MISSED_DEADLINE_TRANSIENT
    assert "loop timeout" in str(why)


def test_endless_while_step_stops_at_the_execution_deadline():
    devices = nn.device_names()
    c = _loop_model(None).compile(devices=devices[:1])
    assert _plan(c).static
    rc, why = _compute_with(c, np.ones(4, np.float32), timeout=20_000_000)         # 20 ms, loop timeout 2 s
    assert rc == C.MISSED_DEADLINE_TRANSIENT
    assert "timeout" in str(why)


def test_if_step_result_of_another_shape_fails_the_computation():
    """A branch whose output is not declared fully gives (3, 2) where the outer model declares
    (2, 3): OP_FAILED with the reason, as the node-by-node run says it."""
    def branch():
        b = nn.Model("reshape")
        x, s = b.input("x", nn.float32, (2, 3)), b.input("s", nn.int32, (2,))
        b.output(b.op("RESHAPE", x, s, outputs=[(nn.float32, (0, 0))]), "y")
        return b
    m = nn.Model()
    c, x, s = m.input("c", nn.bool8, (1,)), m.input("x", nn.float32, (2, 3)), m.input("s", nn.int32, (2,))
    m.output(m.op("IF", c, branch(), branch(), x, s, outputs=[(nn.float32, (2, 3))]), "y")
    comp = m.compile()
    assert _plan(comp).static
    feed = {"c": np.array([True]), "x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    assert comp.run({**feed, "s": np.array([2, 3], np.int32)})["y"].tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(nn.NNAPIError) as e:
        comp.run({**feed, "s": np.array([3, 2], np.int32)})
    assert e.value.code_name == "OP_FAILED"
    assert "IF: output shape [3, 2]" in e.value.reason and "declared dimensions" in e.value.reason


def test_while_steps_from_many_threads():
    """Odd and even loop steps run on arenas of their own (control._flat_loop), taken per
    computation and given back: concurrent loops never share one, and the pools stay small."""
    from nnapi_py.ops import control
    c = _loop_model(100.0).compile()
    errors = []

    def want(v):
        while (v < 100).all():
            v = v * np.float32(1.5) + np.float32(1)
        return v

    def work(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(40):
                start = rng.uniform(0, 5, 4).astype(np.float32)      # above -2: the loop ends
                if c.run({"start": start})["end"].tobytes() != want(start).tobytes():
                    errors.append(seed)
        except Exception as e:
            errors.append(e)
    nnhelp.in_threads(work, 6)
    assert not errors
    node = next(n for n in _plan(c).nodes if n.name == "WHILE")
    subs = [p for _, p in node.cache.values()]
    assert subs and all(len(p._arenas) <= 2 * 6 for p in subs)
    assert control.FLAT


def test_undeclared_outputs_from_static_referenced_models(monkeypatch):
    """A WHILE whose output is declared with an unknown dimension takes its loop value's shape
    (the body gives it back in its shape: Op.result_shapes), so the plan stays static; an IF
    whose branches give different shapes leaves the plan to run node by node."""
    start = np.array([0.5, 3, 10, 2], np.float32)
    c = _loop_model(100.0, out_dims=(0,)).compile()
    assert _plan(c).static
    slow = _node_by_node(monkeypatch, lambda: _loop_model(100.0, out_dims=(0,)))
    assert c.run({"start": start})["end"].tobytes() == slow.run({"start": start})["end"].tobytes()

    def branch(n):
        b = nn.Model("b%d" % n)
        x = b.input("x", nn.float32, (4,))
        b.output(b.op("SLICE", x, np.array([0], np.int32), np.array([n], np.int32), outputs=[(nn.float32, (n,))]), "y")
        return b
    m = nn.Model()
    cond, x = m.input("c", nn.bool8, (1,)), m.input("x", nn.float32, (4,))
    m.output(m.op("IF", cond, branch(2), branch(3), x, outputs=[(nn.float32, (0,))]), "y")
    comp = m.compile()
    assert not _plan(comp).static
    assert comp.run({"c": np.array([True]), "x": start})["y"].tolist() == [0.5, 3]
    assert comp.run({"c": np.array([False]), "x": start})["y"].tolist() == [0.5, 3, 10]
