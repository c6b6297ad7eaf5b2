"""Issue 41's small-tensor path of the elementwise, reduction, unary and shape operations: the
lean kernels (operands viewed in the output's shape or as 0-d arrays, prepared activation
bounds, MEAN's sum divided out of place, one-element reductions as a comparison, ...) give
the bytes of the general kernels, which the same model gets compiled with common.SMALL = 0.
Each model runs twice on one reusable execution with other inputs the second time (the kept
views must show the new values), with static shapes and with shapes known only at execution,
over random shapes, values (NaN, inf, -0.0 among them), constants and fused activations."""
import numpy as np
import pytest

import nnapi_py as nn
from nnapi_py.ops import common

SEEDS = range(8)
SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30, -1e30, 3.0], np.float32)


def _runs(build, feeds):
    """Per compilation (small path, then general): the outputs of each feed, run in turn on one
    reusable execution."""
    got = []
    for small in (common.SMALL, 0):
        saved = common.SMALL
        common.SMALL = small
        try:
            c = build().compile()
        finally:
            common.SMALL = saved
        e = c.execution(reusable=True)
        got.append([{k: np.array(v) for k, v in e.run(f).items()} for f in feeds])
    return got


def _same(build, feeds):
    lean, general = _runs(build, feeds)
    for a, b in zip(lean, general):
        assert a.keys() == b.keys()
        for k in a:
            x, y = a[k], b[k]
            assert x.dtype == y.dtype and x.shape == y.shape, k
            assert x.tobytes() == y.tobytes(), f"{k}: small path {x.ravel()[:8]} general {y.ravel()[:8]}"


def _floats(rng, shape):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    flat = x.reshape(-1)
    k = min(flat.size, int(rng.integers(0, 4)))
    flat[rng.choice(flat.size, k, replace=False)] = rng.choice(SPECIALS, k)
    return x


def _bools(rng, shape):
    """BOOL8 data with non-zero bytes other than 1 (true in the reference)."""
    b = rng.integers(0, 3, shape).astype(np.uint8)
    return b.view(np.bool_)


def _declared(shape, dynamic):
    return tuple(0 for _ in shape) if dynamic else shape


# shape pairs: same, a one-element operand, fewer leading dimensions, a true broadcast
PAIRS = [((1, 32), (1, 32)), ((1, 32), (1, 1)), ((1, 32), (32,)), ((1, 1), (1,)), ((1,), (1, 1)),
         ((2, 3, 4), (4,)), ((2, 3, 4), (3, 1)), ((1, 1, 5), (1,)), ((4,), (2, 1, 4)), ((3, 1), (1, 5)),
         ((1, 1), (1, 1)), ((1,), (1,))]


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV"])
@pytest.mark.parametrize("fuse", [0, 1, 2, 3])
@pytest.mark.parametrize("pair", range(len(PAIRS)))
def test_float_binary(op, fuse, pair):
    rng = np.random.default_rng(pair * 31 + fuse)
    sa, sb = PAIRS[pair]
    out = np.broadcast_shapes(sa, sb)
    a1, a2 = _floats(rng, sa), _floats(rng, sa)
    b1, b2 = _floats(rng, sb), _floats(rng, sb)
    for const in (False, True):
        for dynamic in (False, True):
            def build():
                m = nn.Model()
                x = m.input("a", nn.float32, _declared(sa, dynamic))
                y = b1 if const else m.input("b", nn.float32, _declared(sb, dynamic))
                m.output(m.op(op, x, y, fuse, outputs=[(nn.float32, _declared(out, dynamic))]), "y")
                # the constant first too
                m.output(m.op(op, y, x, fuse, outputs=[(nn.float32, _declared(out, dynamic))]), "z")
                return m
            feeds = [{"a": a1}, {"a": a2}] if const else [{"a": a1, "b": b1}, {"a": a2, "b": b2}]
            _same(build, feeds)


@pytest.mark.parametrize("op", ["EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL"])
@pytest.mark.parametrize("pair", range(len(PAIRS)))
def test_compare(op, pair):
    rng = np.random.default_rng(pair)
    sa, sb = PAIRS[pair]
    out = np.broadcast_shapes(sa, sb)
    fa, fb = _floats(rng, sa), _floats(rng, sb)
    fb.reshape(-1)[0] = fa.reshape(-1)[0]                  # an equal pair
    ba, bb = _bools(rng, sa), _bools(rng, sb)
    fc = _floats(rng, sb)
    for dynamic in (False, True):
        def build():
            m = nn.Model()
            for t, name, s in ((nn.float32, "fa", sa), (nn.float32, "fb", sb), (nn.bool8, "ba", sa),
                               (nn.bool8, "bb", sb)):
                m.input(name, t, _declared(s, dynamic))
            fa_, fb_, ba_, bb_ = m.inputs
            m.output(m.op(op, fa_, fb_, outputs=[(nn.bool8, _declared(out, dynamic))]), "f")
            m.output(m.op(op, ba_, bb_, outputs=[(nn.bool8, _declared(out, dynamic))]), "b")
            m.output(m.op(op, fa_, fc, outputs=[(nn.bool8, _declared(out, dynamic))]), "c")
            return m
        feeds = [{"fa": fa, "fb": fb, "ba": ba, "bb": bb}, {"fa": fb.reshape(-1)[:1].repeat(np.prod(sa)).reshape(sa),
                                                            "fb": fa[..., :1].reshape(-1)[:1].repeat(np.prod(sb)).reshape(sb),
                                                            "ba": bb.reshape(-1)[:1].repeat(np.prod(sa)).reshape(sa),
                                                            "bb": ba.reshape(-1)[:1].repeat(np.prod(sb)).reshape(sb)}]
        _same(build, feeds)


@pytest.mark.parametrize("pair", range(len(PAIRS)))
def test_logical(pair):
    rng = np.random.default_rng(pair + 100)
    sa, sb = PAIRS[pair]
    out = np.broadcast_shapes(sa, sb)
    bc = _bools(rng, sb)
    for dynamic in (False, True):
        def build():
            m = nn.Model()
            a = m.input("a", nn.bool8, _declared(sa, dynamic))
            b = m.input("b", nn.bool8, _declared(sb, dynamic))
            for op in ("LOGICAL_AND", "LOGICAL_OR"):
                m.output(m.op(op, a, b, outputs=[(nn.bool8, _declared(out, dynamic))]), op)
            m.output(m.op("LOGICAL_AND", a, bc, outputs=[(nn.bool8, _declared(out, dynamic))]), "c")
            m.output(m.op("LOGICAL_NOT", a, outputs=[(nn.bool8, _declared(sa, dynamic))]), "not")
            return m
        _same(build, [{"a": _bools(rng, sa), "b": _bools(rng, sb)} for _ in range(3)])


REDUCTIONS = [((1, 32), [1]), ((1, 128), [-1]), ((1, 1), [0, 1]), ((2, 3, 4), [1]), ((2, 3, 4), [0, 2]),
              ((2, 3, 4), [2, 0, 2]), ((5,), [0]), ((3, 1, 2), [1]), ((1, 7, 1, 3), [1, 2]), ((2, 3, 4), [0, 1, 2]),
              ((4, 1), [1]), ((1, 1, 1), [0, 2])]


@pytest.mark.parametrize("case", range(len(REDUCTIONS)))
@pytest.mark.parametrize("keep", [False, True])
def test_mean_and_logical_reductions(case, keep):
    rng = np.random.default_rng(case * 2 + keep)
    shape, axes = REDUCTIONS[case]
    red = {a % len(shape) for a in axes}
    if keep:
        oshape = tuple(1 if d in red else n for d, n in enumerate(shape))
    else:
        oshape = tuple(n for d, n in enumerate(shape) if d not in red) or (1,)
    axes = np.array(axes, np.int32)
    for dynamic in (False, True):
        def build():
            m = nn.Model()
            f = m.input("f", nn.float32, _declared(shape, dynamic))
            b = m.input("b", nn.bool8, _declared(shape, dynamic))
            o = _declared(oshape, dynamic)
            m.output(m.op("MEAN", f, axes, int(keep), outputs=[(nn.float32, o)]), "MEAN")
            for op in ("REDUCE_ANY", "REDUCE_ALL"):
                m.output(m.op(op, b, axes, keep, outputs=[(nn.bool8, o)]), op)
            return m
        feeds = []
        for _ in range(3):
            bits = _bools(rng, shape)
            if rng.random() < 0.5:
                bits = np.ones(shape, np.uint8).view(np.bool_)
            feeds.append({"f": _floats(rng, shape), "b": bits})
        _same(build, feeds)


def test_mean_sums_as_the_general_kernel():
    """Long rows where numpy's pairwise summation differs from a sequential one: the same bits."""
    rng = np.random.default_rng(5)
    for shape, axes in (((1, 4096), [1]), ((1, 1000), [1]), ((16, 256), [1]), ((16, 256), [0]), ((4, 32, 32), [1, 2])):
        x = (rng.standard_normal(shape) * 1e4).astype(np.float32)

        def build():
            m = nn.Model()
            f = m.input("f", nn.float32, shape)
            out = tuple(n for d, n in enumerate(shape) if d not in axes) or (1,)
            m.output(m.op("MEAN", f, np.array(axes, np.int32), 0, outputs=[(nn.float32, out)]), "y")
            return m
        _same(build, [{"f": x}])


@pytest.mark.parametrize("shape", [(1, 1), (1,), (1, 32), (2, 3, 4)])
def test_rsqrt(shape):
    rng = np.random.default_rng(len(shape))
    for dynamic in (False, True):
        def build():
            m = nn.Model()
            x = m.input("x", nn.float32, _declared(shape, dynamic))
            m.output(m.op("RSQRT", x, outputs=[(nn.float32, _declared(shape, dynamic))]), "y")
            return m
        _same(build, [{"x": np.abs(_floats(rng, shape))}, {"x": _floats(rng, shape)}])


def test_small_tensors_take_the_lean_kernels():
    """The models above do run the lean kernels (and the general ones with SMALL = 0)."""
    from nnapi_py import _capi, ffi

    def kernel_codes(small):
        saved = common.SMALL
        common.SMALL = small
        try:
            m = nn.Model()
            x = m.input("x", nn.float32, (1, 32))
            b = m.input("b", nn.bool8, (1, 1))
            s = m.op("MEAN", x, np.array([1], np.int32), 1, outputs=[(nn.float32, (1, 1))])
            r = m.op("RSQRT", s, outputs=[(nn.float32, (1, 1))])
            y = m.op("ADD", x, r, 1, outputs=[(nn.float32, (1, 32))])
            g = m.op("GREATER_EQUAL", r, np.ones(1, np.float32), outputs=[(nn.bool8, (1, 1))])
            a = m.op("REDUCE_ANY", m.op("LOGICAL_OR", g, b, outputs=[(nn.bool8, (1, 1))]),
                     np.array([0, 1], np.int32), False, outputs=[(nn.bool8, (1,))])
            m.output(y, "y")
            m.output(a, "a")
            c = m.op("CONCATENATION", x, y, np.int32(1), outputs=[(nn.float32, (1, 64))])
            m.output(m.op("STRIDED_SLICE", c, np.array([0, 1], np.int32), np.array([1, 64], np.int32),
                          np.array([1, 2], np.int32), np.int32(0), np.int32(0), np.int32(0),
                          outputs=[(nn.float32, (1, 32))]), "s")
            e = m.compile().execution(reusable=True)
        finally:
            common.SMALL = saved
        e.run({"x": np.ones((1, 32), np.float32), "b": np.zeros((1, 1), np.bool_)})
        plan = _capi._H[int(ffi.cast("uintptr_t", e.handle))].plan
        return [k.__code__ for ab in plan._arenas for k, _, _ in ab[1]]

    lean, general = kernel_codes(common.SMALL), kernel_codes(0)
    assert len(lean) == len(general) == 8
    for a, b in zip(lean, general):
        assert a is not b, a.co_qualname


# ---- data movement: RESHAPE, SQUEEZE, EXPAND_DIMS, SLICE, STRIDED_SLICE, CONCATENATION -------
# Each runs on the model's own inputs and outputs (caller memory) and between plan temporaries
# (inputs made by an operation, the result read by another), where the lean kernels keep views
# and memoryviews.

def _temp(m, t, x, shape, dynamic):
    """x passed through an operation that does not change it (a plan temporary)."""
    if t is nn.float32:
        return m.op("ADD", x, np.zeros(1, np.float32), 0, outputs=[(t, _declared(shape, dynamic))])
    return m.op("CONCATENATION", x, np.int32(0), outputs=[(t, _declared(shape, dynamic))])


def _values(rng, t, shape):
    if t is nn.float32:
        return _floats(rng, shape)
    if t is nn.float16:
        with np.errstate(over="ignore"):
            return _floats(rng, shape).astype(np.float16)
    return rng.integers(-128, 128, shape).astype(np.int8)


TYPES = {"float32": nn.float32, "int8": nn.quant8_asymm_signed(0.5, 3), "float16": nn.float16}


def _movement_case(op, t, in_shape, args, out_shape, dynamic, seed):
    rng = np.random.default_rng(seed)

    def build():
        m = nn.Model()
        x = m.input("x", t, _declared(in_shape, dynamic))
        o = _declared(out_shape, dynamic)
        m.output(m.op(op, x, *args, outputs=[(t, o)]), "direct")
        y = m.op(op, _temp(m, t, x, in_shape, dynamic), *args, outputs=[(t, o)])
        m.output(_temp(m, t, y, out_shape, dynamic), "temps")
        return m
    _same(build, [{"x": _values(rng, t, in_shape)} for _ in range(3)])


@pytest.mark.parametrize("tname", sorted(TYPES))
@pytest.mark.parametrize("dynamic", [False, True])
def test_reshape_squeeze_expand_dims(tname, dynamic):
    t = TYPES[tname]
    for seed, (op, in_shape, args, out_shape) in enumerate([
            ("RESHAPE", (1, 16, 96), (np.array([1, 1536], np.int32),), (1, 1536)),
            ("RESHAPE", (1, 3, 40), (np.array([1, 3, 1, 40], np.int32),), (1, 3, 1, 40)),
            ("RESHAPE", (2, 3, 4), (np.array([-1, 4], np.int32),), (6, 4)),
            ("RESHAPE", (1,), (np.array([1, 1, 1], np.int32),), (1, 1, 1)),
            ("SQUEEZE", (1, 5, 1, 3), (np.array([0, 2], np.int32),), (5, 3)),
            ("EXPAND_DIMS", (5, 3), (np.int32(1),), (5, 1, 3))]):
        _movement_case(op, t, in_shape, args, out_shape, dynamic, seed)


SLICES = [  # (input shape, begin, size) of SLICE
    ((1, 9, 1, 64), [0, 0, 0, 0], [1, 9, 1, 32]), ((1, 9, 1, 64), [0, 0, 0, 32], [-1, -1, -1, -1]),
    ((1, 17, 1, 64), [0, 1, 0, 0], [1, 16, 1, 64]), ((2, 3, 4), [1, 0, 0], [1, 3, 4]), ((2, 3, 4), [0, 1, 1], [2, 2, 2]),
    ((5,), [2], [3]), ((1, 1), [0, 0], [1, 1])]
STRIDED = [  # (input shape, begin, end, strides, begin_mask, end_mask, shrink_axis_mask)
    ((1, 17, 1, 64), [0, 1, 0, 0], [1, 17, 1, 64], [1, 1, 1, 1], 0, 0, 0),
    ((1, 5, 1, 40), [0, 3, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1], 13, 15, 0),
    ((1, 1, 20), [0, 0, 0], [1, 1, 20], [1, 1, 1], 0, 0, 2),
    ((2, 6, 4), [0, 0, 0], [2, 6, 4], [1, 2, 1], 0, 0, 0),
    ((2, 6, 4), [1, 5, 3], [0, 0, 0], [-1, -2, -1], 0, 0, 0),
    ((4, 4), [1, 0], [2, 4], [1, 1], 0, 0, 1),
    ((6,), [1], [6], [2], 0, 0, 0)]


def _strided_out(shape, begin, end, strides, bm, em, sm):
    idx = []
    for d, (n, b, e, s) in enumerate(zip(shape, begin, end, strides)):
        if sm >> d & 1:
            idx.append(b)
            continue
        idx.append(slice(None if bm >> d & 1 else b, None if em >> d & 1 else e, s))
    r = np.empty(shape)[tuple(idx)]
    return r.shape or (1,), tuple(idx)


@pytest.mark.parametrize("tname", sorted(TYPES))
@pytest.mark.parametrize("dynamic", [False, True])
def test_slice_and_strided_slice(tname, dynamic):
    t = TYPES[tname]
    for seed, (shape, begin, size) in enumerate(SLICES):
        out = tuple(n - b if s == -1 else s for n, b, s in zip(shape, begin, size))
        _movement_case("SLICE", t, shape, (np.array(begin, np.int32), np.array(size, np.int32)), out, dynamic, seed)
    for seed, (shape, begin, end, strides, bm, em, sm) in enumerate(STRIDED):
        out, _ = _strided_out(shape, begin, end, strides, bm, em, sm)
        args = (np.array(begin, np.int32), np.array(end, np.int32), np.array(strides, np.int32),
                np.int32(bm), np.int32(em), np.int32(sm))
        _movement_case("STRIDED_SLICE", t, shape, args, out, dynamic, seed)


def test_strided_slice_values():
    """The lean STRIDED_SLICE against numpy's own indexing (not only the general kernel)."""
    rng = np.random.default_rng(1)
    for shape, begin, end, strides, bm, em, sm in STRIDED:
        out, idx = _strided_out(shape, begin, end, strides, bm, em, sm)
        x = _floats(rng, shape)
        m = nn.Model()
        xi = m.input("x", nn.float32, shape)
        m.output(m.op("STRIDED_SLICE", xi, np.array(begin, np.int32), np.array(end, np.int32),
                      np.array(strides, np.int32), np.int32(bm), np.int32(em), np.int32(sm),
                      outputs=[(nn.float32, out)]), "y")
        got = m.compile().run({"x": x})["y"]
        assert got.tobytes() == np.ascontiguousarray(x[idx]).reshape(out).tobytes()


CONCATS = [  # (input shapes, axis)
    ([(1, 16, 1, 64), (1, 1, 1, 64)], 1), ([(1, 1, 1, 32), (1, 1, 1, 32)], 3), ([(1, 2, 1, 40), (1, 3, 1, 40)], 1),
    ([(2, 3), (2, 5)], 1), ([(2, 3), (1, 3), (4, 3)], 0), ([(1, 4), (1, 1), (1, 2)], -1), ([(3, 2, 2), (3, 1, 2)], 1),
    ([(1, 1, 20), (1, 1, 20)], 1)]


@pytest.mark.parametrize("tname", sorted(TYPES))
@pytest.mark.parametrize("dynamic", [False, True])
def test_concatenation(tname, dynamic):
    t = TYPES[tname]
    for seed, (shapes, axis) in enumerate(CONCATS):
        rng = np.random.default_rng(seed)
        a = axis % len(shapes[0])
        out = list(shapes[0])
        out[a] = sum(s[a] for s in shapes)
        out = tuple(out)

        def build():
            m = nn.Model()
            xs = [m.input(f"x{k}", t, _declared(s, dynamic)) for k, s in enumerate(shapes)]
            o = _declared(out, dynamic)
            m.output(m.op("CONCATENATION", *xs, np.int32(axis), outputs=[(t, o)]), "direct")
            temps = [_temp(m, t, x, s, dynamic) for x, s in zip(xs, shapes)]
            y = m.op("CONCATENATION", *temps, np.int32(axis), outputs=[(t, o)])
            m.output(_temp(m, t, y, out, dynamic), "temps")
            # one model input, one temporary (a streaming model's ring buffer)
            y = m.op("CONCATENATION", xs[0], *temps[1:], np.int32(axis), outputs=[(t, o)])
            m.output(_temp(m, t, y, out, dynamic), "mixed")
            return m
        _same(build, [{f"x{k}": _values(rng, t, s) for k, s in enumerate(shapes)} for _ in range(3)])


@pytest.mark.parametrize("dynamic", [False, True])
def test_transpose(dynamic):
    for seed, (shape, perm) in enumerate([((1, 29, 13), [1, 0, 2]), ((2, 3, 4), [2, 0, 1]), ((1, 5, 1, 3), [2, 1, 0, 3]),
                                          ((4, 1), [1, 0]), ((2, 3), [1, 0]), ((1, 1, 6), [2, 1, 0])]):
        out = tuple(shape[p] for p in perm)
        for tname, t in sorted(TYPES.items()):
            _movement_case("TRANSPOSE", t, shape, (np.array(perm, np.int32),), out, dynamic, seed)


@pytest.mark.parametrize("dynamic", [False, True])
def test_gather_one_index(dynamic):
    """GATHER by one index, constant or not (a loop counter), every axis; out of range fails."""
    rng = np.random.default_rng(4)
    for shape in ((29, 1, 13), (2, 3, 4), (5,)):
        for axis in range(len(shape)):
            out = shape[:axis] + (1,) + shape[axis + 1:]
            x = _floats(rng, shape)
            c = np.array([shape[axis] - 1], np.int32)

            def build():
                m = nn.Model()
                xi = m.input("x", nn.float32, _declared(shape, dynamic))
                ii = m.input("i", nn.int32, (1,))
                o = _declared(out, dynamic)
                m.output(m.op("GATHER", xi, np.int32(axis), ii, outputs=[(nn.float32, o)]), "var")
                m.output(m.op("GATHER", xi, np.int32(axis), c, outputs=[(nn.float32, o)]), "const")
                m.output(_temp(m, nn.float32, m.op("GATHER", _temp(m, nn.float32, xi, shape, dynamic), np.int32(axis),
                                                   c, outputs=[(nn.float32, o)]), out, dynamic), "temps")
                return m
            _same(build, [{"x": x, "i": np.array([k], np.int32)} for k in range(shape[axis])])
            saved = common.SMALL
            try:
                for small in (saved, 0):
                    common.SMALL = small
                    comp = build().compile()
                    for bad in (-1, shape[axis]):
                        with pytest.raises(nn.NNAPIError, match="out of range"):
                            comp.run({"x": x, "i": np.array([bad], np.int32)})
            finally:
                common.SMALL = saved


@pytest.mark.parametrize("op", ["EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL",
                                "LOGICAL_AND", "LOGICAL_OR"])
def test_one_element_pairs(op):
    """One-element comparisons and logical operations (Python values, one fill) over every pair
    of special values: float32 and float16 (NaN, infinities, -0.0), int32 extremes, BOOL8 bytes
    0, 1, 2 and 255 (any non-zero byte true)."""
    if op.startswith("LOGICAL"):
        cases = [(nn.bool8, np.array([0, 1, 2, 255], np.uint8).view(np.bool_))]
    else:
        with np.errstate(over="ignore"):
            f16 = SPECIALS.astype(np.float16)
        cases = [(nn.float32, SPECIALS), (nn.float16, f16),
                 (nn.int32, np.array([-2**31, -1, 0, 1, 2**31 - 1], np.int32)),
                 (nn.bool8, np.array([0, 1, 2], np.uint8).view(np.bool_))]
    for t, vals in cases:
        for sa, sb in (((1,), (1,)), ((1, 1), (1,)), ((1,), (1, 1, 1))):
            out = np.broadcast_shapes(sa, sb)

            def build():
                m = nn.Model()
                a, b = m.input("a", t, sa), m.input("b", t, sb)
                m.output(m.op(op, a, b, outputs=[(nn.bool8, out)]), "y")
                return m
            _same(build, [{"a": np.array([x]).reshape(sa), "b": np.array([y]).reshape(sb)} for x in vals for y in vals])
