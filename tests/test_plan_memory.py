"""Temporaries share memory when their lifetimes do not overlap (nnapi_py/plan.py,
Plan._share_temps): fewer buffers than temporaries, never an operation whose output shares
memory with one of its inputs or with a temporary still to be read, the same numbers as
numpy, and concurrent executions of one compilation still never share a temporary."""
import pytest

import numpy as np

import nnapi_py as nn
import nnhelp
from nnapi_py import plan as P

RNG = np.random.default_rng(5)


def _plans(monkeypatch):
    made = []
    orig = P.Plan._share_temps

    def spy(self):
        r = orig(self)
        made.append((self, r))
        return r
    monkeypatch.setattr(P.Plan, "_share_temps", spy)
    return made


def _check_no_overlap(plan):
    """Walk the steps: a temporary's buffer is never handed to another temporary while the
    first is still to be read, nor to an output of the step reading it."""
    sizes, pool_of = plan.pool_sizes, plan.pool_of
    last = {}
    for s, node in enumerate(plan.nodes):
        for i in node.ins:
            last[i] = s
    holder = {}                                  # buffer -> temporary living in it
    for s, node in enumerate(plan.nodes):
        for o in node.outs:
            if o in pool_of:
                k = pool_of[o]
                h = holder.get(k)
                assert h is None or last.get(h, -1) < s, (o, h, s)
                holder[k] = o
    assert all(sizes[pool_of[i]] >= int(np.prod(shape)) * np.dtype(dt).itemsize
               for i, shape, dt in plan.temps)


def test_chain_uses_two_buffers(monkeypatch):
    made = _plans(monkeypatch)
    m = nn.Model()
    x = m.input("x", nn.float32, (4, 8))
    v = x
    for k in range(10):
        v = m.op("ADD", v, np.float32(k + 1) * np.ones((4, 8), np.float32), 0)
        v = m.op("MUL", v, v, 0) if k % 3 == 0 else v
    m.output(m.op("RELU1", m.op("TANH", v)), "y")
    xv = RNG.uniform(-0.2, 0.2, (4, 8)).astype(np.float32)
    y = m.compile().run({"x": xv})["y"]
    ref = xv
    for k in range(10):
        ref = ref + np.float32(k + 1)
        ref = ref * ref if k % 3 == 0 else ref
    np.testing.assert_allclose(y, np.clip(np.tanh(ref), -1, 1), rtol=1e-6)
    plan, (sizes, pool_of) = made[-1]
    assert len(plan.temps) >= 12 and len(sizes) == 2
    _check_no_overlap(plan)


def test_long_lived_skip_connection_keeps_its_buffer(monkeypatch):
    """A residual block: the block input is read again after a chain of operations, so the
    chain's temporaries must not reuse its memory."""
    made = _plans(monkeypatch)
    m = nn.Model()
    x = m.input("x", nn.float32, (1, 6, 6, 4))
    w = RNG.standard_normal((4, 3, 3, 4)).astype(np.float32) * 0.3
    b = RNG.standard_normal(4).astype(np.float32)
    h = m.op("CONV_2D", x, w, b, 1, 1, 1, 1)                       # relu
    skip = h
    for _ in range(3):
        h = m.op("CONV_2D", h, w, b, 1, 1, 1, 0)
        h = m.op("LOGISTIC", h)
    out = m.op("ADD", skip, h, 0)
    m.output(m.op("SUB", out, skip, 0), "y")
    xv = RNG.standard_normal((1, 6, 6, 4)).astype(np.float32)
    c = m.compile()
    y = c.run({"x": xv})["y"]

    def conv(v, act):
        vp = np.pad(v, ((0, 0), (1, 1), (1, 1), (0, 0)))
        r = np.zeros((1, 6, 6, 4), np.float64)
        for ky in range(3):
            for kx in range(3):
                r += np.einsum("nhwc,oc->nhwo", vp[:, ky:ky + 6, kx:kx + 6], w[:, ky, kx])
        r += b
        return np.maximum(r, 0) if act else r
    s = conv(xv.astype(np.float64), True)
    hv = s
    for _ in range(3):
        hv = 1 / (1 + np.exp(-conv(hv, False)))
    np.testing.assert_allclose(y, (s + hv) - s, rtol=1e-4, atol=1e-5)
    plan, _ = made[-1]
    _check_no_overlap(plan)
    # the skip temporary's buffer is held by nothing else until the ADD
    k = plan.pool_of[plan.nodes[0].outs[0]]
    add_step = next(s for s, nd in enumerate(plan.nodes) if nd.name == "ADD")
    assert all(plan.pool_of.get(o) != k for nd in plan.nodes[1:add_step] for o in nd.outs)


def test_concurrent_executions_do_not_share(monkeypatch):
    m = nn.Model()
    x = m.input("x", nn.float32, (64, 64))
    v = x
    for _ in range(6):
        v = m.op("TANH", m.op("ADD", v, v, 0))
    m.output(v, "y")
    c = m.compile()
    xs = [RNG.uniform(-1, 1, (64, 64)).astype(np.float32) for _ in range(4)]

    def ref(a):
        for _ in range(6):
            a = np.tanh(a + a)
        return a
    want = [ref(a) for a in xs]
    errors = []

    def worker(k):
        for _ in range(30):
            y = c.run({"x": xs[k]})["y"]
            if not np.allclose(y, want[k], rtol=1e-5, atol=1e-6):
                errors.append(k)
    nnhelp.in_threads(worker, 4)
    assert not errors


def test_kernels_write_every_element_of_a_reused_buffer(monkeypatch):
    """Shared temporaries arrive holding an earlier operation's values: every kernel must write
    its whole output.  With the buffers filled with 0xFF bytes (NaN as float32) before each
    arena is made, a chain of common operations gives the same numbers as with zeros."""
    w = RNG.standard_normal((6, 3, 3, 4)).astype(np.float32) * 0.3
    dw = RNG.standard_normal((1, 3, 3, 6)).astype(np.float32)

    def model():
        m = nn.Model()
        x = m.input("x", nn.float32, (1, 8, 8, 4))
        h = m.op("CONV_2D", x, w, np.zeros(6, np.float32), 1, 1, 1, 1)
        h = m.op("DEPTHWISE_CONV_2D", h, dw, np.ones(6, np.float32), 1, 1, 1, 1, 0)
        p = m.op("MAX_POOL_2D", h, 2, 2, 2, 2, 2, 0)
        q = m.op("PAD", p, np.array([[0, 0], [1, 1], [1, 1], [0, 2]], np.int32))
        r = m.op("RESIZE_BILINEAR", q, 12, 12)
        c = m.op("CONCATENATION", r, r, 3)
        m.output(m.op("SOFTMAX", m.op("TANH", c), 1.0), "y")
        return m
    xv = RNG.standard_normal((1, 8, 8, 4)).astype(np.float32)
    want = model().compile().run({"x": xv})["y"]
    orig = P.Plan.take_arena

    filled = []
    saved = P._new_pool

    def dirty(self):
        sizes = self.pool_sizes

        def new_pool(nbytes):
            pool = saved(nbytes)
            if nbytes in sizes:
                filled.append(nbytes)
                pool.fill(0xFF)             # every byte NaN-like garbage before the run
            return pool
        monkeypatch.setattr(P, "_new_pool", new_pool)
        try:
            return orig(self)
        finally:
            monkeypatch.setattr(P, "_new_pool", saved)
    monkeypatch.setattr(P.Plan, "take_arena", dirty)
    got = model().compile().run({"x": xv})["y"]
    assert len(filled) >= 2                 # the shared buffers were made dirty
    assert not np.isnan(got).any()
    np.testing.assert_array_equal(got, want)


def _root(a):
    """The object at the end of an array's chain of bases."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def test_arena_argument_lists_take_each_runs_arrays_and_keep_none(monkeypatch):
    """Each arena keeps its steps' argument lists (Plan._arena_steps); the entries of model
    inputs and outputs are filled per run: a model input read by two steps, an output also
    read by a later step.  Every run sees its own arrays, the caller's arrays are not kept
    after the run, and a failing kernel is still named by its own operation."""
    import gc
    import weakref
    made = _plans(monkeypatch)
    m = nn.Model()
    x = m.input("x", nn.float32, (2, 3))
    a = m.op("ADD", x, np.ones((2, 3), np.float32), 0)
    b = m.op("MUL", a, x, 0)                     # x read by a second step
    m.output(b, "b")
    m.output(m.op("SUB", b, x, 0), "c")          # output b read again
    comp = m.compile()
    plan = made[-1][0]
    for _ in range(3):
        xv = RNG.standard_normal((2, 3)).astype(np.float32)
        r = comp.run({"x": xv})
        np.testing.assert_array_equal(r["b"], (xv + 1) * xv)
        np.testing.assert_array_equal(r["c"], (xv + 1) * xv - xv)
        ref = weakref.ref(xv)
        del xv, r
        gc.collect()
        assert ref() is None, "the plan kept the caller's input array"
    assert plan._arenas
    for slots, steps, held_in, held_out, memo in plan._arenas:
        # the bound views' memo (plan_run._bind_view) holds arrays only beside a kept binding
        assert held_in is not None or not memo
        # what a run leaves bound is its plain views of the caller's memory (run_static's
        # keep), which own nothing and are views of no caller object; else nothing
        for refs in plan.in_refs + plan.out_refs:
            assert refs
            for s, side, k in refs:
                a = steps[s][1 + side][k]
                assert a is None or (held_in is not None and not a.flags.owndata
                                     and not isinstance(_root(a), np.ndarray))
    # a kernel failing at the second step names MUL
    def boom(i, o):
        raise RuntimeError("boom")
    for ab in plan._arenas:
        steps = ab[1]
        steps[1] = (boom,) + tuple(steps[1][1:])
    with pytest.raises(nn.NNAPIError) as e:
        comp.run({"x": np.zeros((2, 3), np.float32)})
    assert "MUL" in str(e.value) and "internal error" in str(e.value)
    assert P.INTERNAL_ERRORS and P.INTERNAL_ERRORS[-1][0] == "MUL"
    P.INTERNAL_ERRORS.pop()                      # caused on purpose (tests/conftest.py)


def test_views_kept_only_of_own_arrays_and_plan_temporaries():
    """Kernels keep views (im2col windows, depthwise rows) of their input from run to run
    when it is their own padded copy or a plan temporary (ops.base.kept_array: its memory
    is a PoolBuffer of the arena), never of a caller's array.  A VALID convolution reads a
    temporary and the caller's input directly; the results stay right across runs with new
    values, and the caller's array is not kept alive."""
    import gc
    import weakref
    from nnapi_py.ops.base import PoolBuffer, kept_array
    assert kept_array(np.ndarray((2, 3), np.float32, buffer=PoolBuffer((64,), np.uint8)))
    assert kept_array(np.empty((2, 3), np.float32))
    assert not kept_array(np.frombuffer(bytearray(24), np.float32).reshape(2, 3))
    m = nn.Model()
    x = m.input("x", nn.float32, (1, 6, 6, 8))
    w = RNG.standard_normal((4, 2, 2, 8)).astype(np.float32)
    dw = RNG.standard_normal((1, 1, 1, 8)).astype(np.float32)
    t = m.op("ADD", x, x, 0)
    m.output(m.op("CONV_2D", t, w, np.zeros(4, np.float32), 2, 1, 1, 0), "a")    # VALID, temporary
    m.output(m.op("CONV_2D", x, w, np.zeros(4, np.float32), 2, 1, 1, 0), "b")    # VALID, caller's
    m.output(m.op("DEPTHWISE_CONV_2D", t, dw, np.zeros(8, np.float32), 2, 1, 1, 1, 0), "c")
    comp = m.compile()
    for k in range(3):
        xv = RNG.standard_normal((1, 6, 6, 8)).astype(np.float32)
        got = comp.run({"x": xv})
        np.testing.assert_array_equal(got["a"], 2 * got["b"])        # conv(2x) = 2 conv(x), exactly
        np.testing.assert_array_equal(got["c"], (2 * xv) * dw[0, 0, 0])
        ref = weakref.ref(xv)
        del xv, got
        gc.collect()
        assert ref() is None
