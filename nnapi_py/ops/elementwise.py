"""Element-wise operations on two (or three) tensors with NNAPI broadcasting.

ADD, SUB, MUL, DIV (FuseCode activation), POW, MAXIMUM, MINIMUM, the six comparisons
(EQUAL ... LESS_EQUAL, TENSOR_BOOL8 result), LOGICAL_AND / LOGICAL_OR / LOGICAL_NOT and
SELECT.

Broadcasting (all binary ops here except SELECT): shapes are aligned on their trailing
dimensions; two dimensions are compatible when equal or when one of them is 1; a zero
dimension is only compatible with 0 or 1 and gives 0.  numpy's rule is exactly that.

Quantized kernels.  An 8-bit operand has only 256 possible values, so every quantized
result here is a function of one or two bytes.  build() evaluates the reference
arithmetic (fixed-point multipliers from quant.py with the reference rounding, or the
reference's float requantization) once over the whole input domain -- 256 entries for
one operand, 256 x 256 for two -- and the kernel is a single table lookup written into the
output buffer.  The results are bit-identical to evaluating the formula per element.
"""

import operator

import numpy as np

from .. import constants as C
from .base import Op, register, register_variants, value_error
from . import quant as Q
from .common import broadcast_shape, check_present, dequant_table, small  # noqa: F401
from .common import Reshaped, float_clamp, lean_operand, n_elements

F16, F32, I32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32, C.TENSOR_INT32
Q8, Q8S = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED
BOOL8 = C.TENSOR_BOOL8
QUANT8 = (Q8, Q8S)
FLOATS = (F16, F32)


# ---------------------------------------------------------------------------------------
# helpers shared by the operations of this module (and unary.py)
# ---------------------------------------------------------------------------------------
def requant_table(src, dst):
    """Byte of src -> value of dst's type (quant.requant_table of two Infos)."""
    return Q.requant_table(src.type, src.scale, src.zp, dst.type, dst.scale, dst.zp)


def is_identity_requant(src, dst):
    return src.type == dst.type and src.scale == dst.scale and src.zp == dst.zp


def pair_index(a, b):
    """Index (byte(a) << 8 | byte(b)) of the broadcast pair, for a 256 x 256 table."""
    ia = np.left_shift(Q.as_bytes(a), 8, dtype=np.uint16)
    return np.bitwise_or(ia, Q.as_bytes(b), dtype=np.uint16)


def fuse_value(name, ins, idx):
    v = ins[idx].value
    if v is None:
        raise value_error(f"{name}: the fused activation (input {idx}) has no value", at_runtime=False)
    f = int(v)
    if f not in (0, 1, 2, 3):
        raise value_error(f"{name}: input {idx} (fused activation) must be a FuseCode 0..3, got {f}",
                          at_runtime=False)
    return f


def _bool_operand(a):
    """TENSOR_BOOL8 data as bytes: any non-zero byte is true, as in the reference."""
    return a.view(np.uint8)


# ---------------------------------------------------------------------------------------
# ADD, SUB, MUL, DIV: two tensors + FuseCode
# ---------------------------------------------------------------------------------------
class Binary(Op):
    """Two tensors + FuseCode -> one tensor of input0's type, NNAPI broadcasting."""
    type_levels = {F32: 1, Q8: 1, F16: 3, Q8S: 4, I32: 4}
    allow_zero_sized = True
    ufunc = None
    py = None           # the operation on Python ints (one_int), for TENSOR_INT32 of one element

    def fuse_input(self, ins):
        return 2 if len(ins) > 2 else None

    def validate(self, sig):
        sig.count(3, 1)
        t = sig.types("input", 0, self.type_levels)
        sig.same_type("input", 1, t)
        sig.types("input", 2, (C.INT32,), "fused activation")
        sig.same_type("output", 0, t)
        check_present(sig)
        sig.rank_between("input", 0, 1, 4)
        sig.rank_between("input", 1, 1, 4)
        sig.fuse(2, t == I32)
        if t in QUANT8:
            self.check_quant(sig)
        level = self.type_levels[t]
        if any(i.dims is not None and 0 in i.dims and i.value is not None for i in sig.ins[:2]):
            level = max(level, 3)      # zero-sized tensors exist since FL3
        return level

    def check_quant(self, sig):
        pass

    def infer(self, ins):
        for k in (0, 1):
            if len(ins[k].dims) > 4:
                raise value_error(f"{self.name}: input {k} has rank {len(ins[k].dims)}, expected at most 4",
                                  at_runtime=False)
        return [broadcast_shape(self.name, ins[0].dims, ins[1].dims)]

    def build(self, ins, outs):
        t = ins[0].type
        fuse = fuse_value(self.name, ins, 2)
        if t == I32:
            if fuse != C.FUSED_NONE:
                raise value_error(f"{self.name}: input 2 (fused activation) must be FUSED_NONE (0) for "
                                  f"TENSOR_INT32, got {fuse}", at_runtime=False)
            return (self.py is not None and one_int(self.py, ins, outs)) or self.int_kernel()
        if t in FLOATS:
            if t == F32 and small(ins[0], ins[1], outs[0]):
                return lean_pair(self.ufunc, ins, outs, float_clamp(fuse, np.float32))
            return self.float_kernel(fuse)
        return self.quant_kernel(ins[0], ins[1], outs[0], fuse)

    def quant_kernel(self, a, b, out, fuse):
        return self.table_kernel(self.quant_table(a, b, out, fuse), (a, b), (out,))

    def float_kernel(self, fuse):
        # inf - inf, overflow, x / 0 give NaN / inf as in C: kernels run with numpy's floating
        # point errors ignored (Execution.compute sets that up once per thread), so no
        # errstate here (about 1 us per call)
        ufunc = self.ufunc
        if fuse == C.FUSED_NONE:
            def k(i, o):
                ufunc(i[0], i[1], out=o[0])
        else:
            act = Q.apply_float_activation

            def k(i, o):
                ufunc(i[0], i[1], out=o[0])
                act(o[0], fuse)
        return k

    def int_kernel(self):
        ufunc = self.ufunc

        def k(i, o):
            ufunc(i[0], i[1], out=o[0])      # two's complement wrap-around, like int32 in C
        return k

    @staticmethod
    def table_kernel(table, ins=None, outs=None):
        """The 256 x 256 table's kernel.  On small tensors (common.small of ins and outs) the
        lean variant: one advanced index of the table as [256, 256] by the two inputs (an int8
        code -k indexes row 256 - k: its byte's own row), broadcast as the inputs are, stored
        into the output (2 numpy calls instead of 3, and no uint16 index arrays)."""
        if ins is not None and small(*ins, *outs):
            t2 = table.reshape(256, 256)

            def k(i, o):
                o[0][...] = t2[i[0], i[1]]
            return k

        def k(i, o):
            # mode "clip": a uint16 pair index is always inside the 65536-entry table, so
            # nothing is clipped; "wrap" would compute a modulo per element (168 -> 125 us
            # for 75k values)
            np.take(table, pair_index(i[0], i[1]), out=o[0], mode="clip")
        return k

    def quant_table(self, a, b, out, fuse):
        raise NotImplementedError


def one_value(py, ins, outs):
    """The kernel of a one-element operation whose result is py(a, b) of its two inputs'
    values as Python objects (item(): a bool for BOOL8 data, any non-zero byte true; a float
    holding a float32 / float16 value exactly; an int): no ufunc, the output filled with the
    result (about 0.5 us against 1.5-2.8).  For comparisons and logical operations, whose
    Python result is the one numpy gives; None unless all three tensors have one element."""
    if any(n_elements(t) != 1 for t in (ins[0], ins[1], outs[0])):
        return None

    def k(i, o):
        o[0].fill(py(i[0].item(), i[1].item()))

    def direct(i, o):
        """k on arrays bound for good (Plan.direct_steps): their methods looked up once."""
        a, b, fill = i[0].item, i[1].item, o[0].fill

        def run():
            fill(py(a(), b()))
        return run, ()
    k.direct = direct
    return k


def one_int(py, ins, outs):
    """The kernel of a one-element TENSOR_INT32 ADD / SUB / MUL (a loop counter's step): py
    of the inputs' Python ints, wrapped to int32 as numpy's int32 ufunc wraps (two's
    complement), filled into the output (about 0.8 us against 1.1); a constant operand's int
    taken at build (the run passes that very array).  None unless all three tensors have one
    element."""
    if any(n_elements(t) != 1 for t in (ins[0], ins[1], outs[0])):
        return None
    lo, hi, span = -2 ** 31, 2 ** 31 - 1, 2 ** 32
    const_ok = ins[0].value is None or ins[1].value is None      # a static build: values are constants
    ca, cb = ((t.value if const_ok and isinstance(t.value, np.ndarray) else k) for k, t in enumerate(ins[:2]))
    a, b = (int(c.reshape(-1)[0]) if isinstance(c, np.ndarray) else None for c in (ca, cb))

    def k(i, o):
        x, y = i[0], i[1]
        v = py(a if x is ca else x.item(), b if y is cb else y.item())
        if not lo <= v <= hi:
            v = (v - lo) % span + lo
        o[0].fill(v)

    def direct(i, o):
        """k on arrays bound for good (Plan.direct_steps): their methods looked up once."""
        x, y, fill = i[0], i[1], o[0].fill
        xv, yv = (a if x is ca else None), (b if y is cb else None)
        xi, yi = x.item, y.item

        def run():
            v = py(xi() if xv is None else xv, yi() if yv is None else yv)
            if not lo <= v <= hi:
                v = (v - lo) % span + lo
            fill(v)
        return run, ()
    k.direct = direct
    return k


def lean_pair(ufunc, ins, outs, act=None, dtype=None):
    """The small-tensor kernel of ufunc(input 0, input 1, out=output 0) (then act(output 0)
    when act is given): an operand of one element is passed as a 0-d view, one of the
    output's size in another shape (fewer leading 1s) as a view in the output's shape, so
    numpy takes its same-shape loop instead of setting up a broadcast (about 1 us less);
    views kept from run to run (common.Reshaped), a constant's made at build; the output
    passed positionally (a keyword costs about 0.1 us a call).  The ufunc pairs the same
    elements, so the results are the same bits.  dtype: the inputs' data
    taken in that dtype (BOOL8 as bytes)."""
    shape = outs[0].dims
    const_ok = ins[0].value is None or ins[1].value is None      # a static build: values are constants
    pa = lean_operand(ins[0], shape, const_ok, dtype)
    pb = lean_operand(ins[1], shape, const_ok, dtype)
    # a constant's view, made at build, taken without calling its Reshaped (about 0.4 us)
    ca, va = pa.pair if pa is not None else (None, None)
    cb, vb = pb.pair if pb is not None else (None, None)
    f = ufunc
    if pa is None and pb is None and act is None:
        def k(i, o):
            f(i[0], i[1], o[0])
    elif pa is None and pb is None:
        def k(i, o):
            z = o[0]
            f(i[0], i[1], z)
            act(z)
    elif pa is None:
        def k(i, o):
            z, y = o[0], i[1]
            f(i[0], vb if y is cb else pb(y), z)
            if act is not None:
                act(z)
    elif pb is None:
        def k(i, o):
            z, x = o[0], i[0]
            f(va if x is ca else pa(x), i[1], z)
            if act is not None:
                act(z)
    else:
        def k(i, o):
            z, x, y = o[0], i[0], i[1]
            f(va if x is ca else pa(x), vb if y is cb else pb(y), z)
            if act is not None:
                act(z)
    if act is None:
        def direct(i, o):
            """The one ufunc call on arrays bound for good (Plan.direct_steps), where an operand
            needs no view made per call (as is, or the constant's made at build); else None."""
            x, y = i[0], i[1]
            if pa is not None:
                if x is not ca:
                    return None
                x = va
            if pb is not None:
                if y is not cb:
                    return None
                y = vb
            return f, (x, y, o[0])
        k.direct = direct
    return k


def _add_sub_kernel(a, b, out, fuse, negate_second):
    """The pair table's kernel, and on tensors of at least Q.PAIR_AFFINE_MIN values without
    broadcasting the table's float32 form (Q.PairAffine, proven on all 65536 pairs) where
    one exists: the same bytes."""
    table = _add_sub_table(a, b, out, fuse, negate_second)
    lookup = Binary.table_kernel(table, (a, b), (out,))
    if small(a, b, out):
        return lookup
    rb = b.scale / out.scale
    form = Q.PairAffine.prove(table, C.DTYPES[a.type], C.DTYPES[b.type], a.scale / out.scale,
                              -rb if negate_second else rb, C.DTYPES[out.type])
    if form is None:
        return lookup
    big = Q.PAIR_AFFINE_MIN

    def k(i, o):
        x, y, z = i[0], i[1], o[0]
        if z.size >= big and x.shape == z.shape and y.shape == z.shape:
            form(x, y, z)
        else:
            lookup(i, o)
    return k


def _add_sub_table(a, b, out, fuse, negate_second):
    """256 x 256 table of the reference quantized ADD (SUB: second multiplier negated).

    Both inputs are moved to a common scale 2 * max(scale_a, scale_b) with 20 bits of
    headroom, added, and rescaled to the output scale; the fused activation clamps in the
    output's quantized domain.
    """
    left_shift = 20
    twice_max = 2.0 * max(a.scale, b.scale)
    m1 = Q.Requant(a.scale / twice_max)
    m2 = Q.Requant(b.scale / twice_max)
    mo = Q.Requant(twice_max / ((1 << left_shift) * out.scale))
    if negate_second:
        m2.q = -m2.q
    s1 = m1((Q.byte_codes(C.DTYPES[a.type]) - a.zp) << left_shift)
    s2 = m2((Q.byte_codes(C.DTYPES[b.type]) - b.zp) << left_shift)
    raw = s1[:, None] + s2[None, :]
    acc = mo(raw.ravel()) + out.zp
    lo, hi = Q.activation_range(fuse, out.scale, out.zp, out.type)
    return np.clip(acc, lo, hi).astype(C.DTYPES[out.type])


class _AddSub(Binary):
    negate_second = False

    def quant_kernel(self, a, b, out, fuse):
        return _add_sub_kernel(a, b, out, fuse, negate_second=self.negate_second)


register_variants(_AddSub, globals(), [
    ("Add", dict(name="ADD", ufunc=staticmethod(np.add), py=staticmethod(operator.add))),
    ("Sub", dict(name="SUB", ufunc=staticmethod(np.subtract), py=staticmethod(operator.sub), negate_second=True,
                 type_levels={F32: 2, F16: 3, Q8: 3, Q8S: 4, I32: 4})),
])


@register
class Mul(Binary):
    name = "MUL"
    ufunc = staticmethod(np.multiply)
    py = staticmethod(operator.mul)

    def check_quant(self, sig):
        a, b, o = sig.ins[0], sig.ins[1], sig.outs[0]
        prod = Q.scale_product(a.scale, b.scale)
        if not np.float32(o.scale) > prod:
            sig.fail(f"output 0 scale {o.scale} must be greater than input 0 scale x input 1 scale "
                     f"({a.scale} x {b.scale} = {float(prod)})")

    def quant_table(self, a, b, out, fuse):
        # the reference forms the input product scale in float32, the ratio in double
        prod = Q.scale_product(a.scale, b.scale)
        m = Q.Requant(prod / out.scale)
        va = Q.byte_codes(C.DTYPES[a.type]) - a.zp
        vb = Q.byte_codes(C.DTYPES[b.type]) - b.zp
        acc = m((va[:, None] * vb[None, :]).ravel()) + out.zp
        lo, hi = Q.activation_range(fuse, out.scale, out.zp, out.type)
        return np.clip(acc, lo, hi).astype(C.DTYPES[out.type])


@register
class Div(Binary):
    name = "DIV"
    type_levels = {F32: 2, F16: 3, I32: 4}

    ufunc = staticmethod(np.divide)

    def int_kernel(self):
        def k(i, o):
            # floor division ("//"); division by zero gives 0 (the reference's choice)
            with np.errstate(all="ignore"):
                np.floor_divide(i[0], i[1], out=o[0])
        return k


# ---------------------------------------------------------------------------------------
# POW, MAXIMUM, MINIMUM: two tensors, broadcasting, no activation
# ---------------------------------------------------------------------------------------
class Pairwise(Op):
    """Two tensors of one type -> one tensor of that type (or BOOL8), broadcasting."""
    type_levels = {}
    out_type = None            # None: same as input 0

    def validate(self, sig):
        sig.count(2, 1)
        t = sig.types("input", 0, self.type_levels)
        sig.same_type("input", 1, t)
        if self.out_type is None:
            sig.same_type("output", 0, t)
        else:
            sig.types("output", 0, (self.out_type,))
        check_present(sig)
        return self.type_levels[t]

    def infer(self, ins):
        return [broadcast_shape(self.name, ins[0].dims, ins[1].dims)]


@register
class Pow(Pairwise):
    name = "POW"
    type_levels = {F32: 3, F16: 3}

    def build(self, ins, outs):
        def k(i, o):
            with np.errstate(all="ignore"):
                np.power(i[0], i[1], out=o[0])
        return k


class MaxMin(Pairwise):
    type_levels = {F32: 3, F16: 3, I32: 3, Q8: 3, Q8S: 4}
    is_max = True

    def build(self, ins, outs):
        t = ins[0].type
        pick = np.maximum if self.is_max else np.minimum
        if t == I32:
            def k(i, o):
                pick(i[0], i[1], out=o[0])
            return k
        if t in FLOATS:
            if self.is_max:
                # std::max(a, b) = a < b ? b : a  (a NaN in b is ignored, a NaN in a is kept)
                def k(i, o):
                    a, b = i[0], i[1]
                    np.copyto(o[0], a)
                    np.copyto(o[0], b, where=np.less(a, b))
            else:
                # std::min(a, b) = b < a ? b : a
                def k(i, o):
                    a, b = i[0], i[1]
                    np.copyto(o[0], a)
                    np.copyto(o[0], b, where=np.less(b, a))
            return k
        # quantized: both inputs requantized to the output's parameters, then compared
        ta, tb = requant_table(ins[0], outs[0]), requant_table(ins[1], outs[0])
        table = pick(ta[:, None], tb[None, :]).ravel()
        return Binary.table_kernel(table, ins[:2], outs)


register_variants(MaxMin, globals(), [
    ("Maximum", dict(name="MAXIMUM", is_max=True)),
    ("Minimum", dict(name="MINIMUM", is_max=False)),
])


# ---------------------------------------------------------------------------------------
# comparisons: two tensors -> TENSOR_BOOL8
# ---------------------------------------------------------------------------------------
class Compare(Pairwise):
    type_levels = {BOOL8: 3, F16: 3, F32: 3, I32: 3, Q8: 3, Q8S: 4}
    out_type = BOOL8
    ufunc = None
    py = None              # the operation on one element's Python values (one_value)

    def build(self, ins, outs):
        t = ins[0].type
        f = self.ufunc
        if t == BOOL8:
            # (not one_value: item() would make a byte 2 equal to a byte 1)
            if small(*ins, *outs):
                return lean_pair(f, ins, outs, dtype=np.uint8)

            def k(i, o):
                f(_bool_operand(i[0]), _bool_operand(i[1]), out=o[0])
            return k
        if t in QUANT8:
            # the reference compares the dequantized float32 values
            da, db = dequant_table(ins[0]), dequant_table(ins[1])
            table = f(da[:, None], db[None, :]).ravel()
            return Binary.table_kernel(table, ins[:2], outs)
        if small(*ins, *outs):
            if tuple(ins[0].dims) == tuple(ins[1].dims) == tuple(outs[0].dims):
                k = one_value(self.py, ins, outs)       # (broadcast: lean_pair's 0-d views cost less in runs)
                if k is not None:
                    return k
            return lean_pair(f, ins, outs)

        def k(i, o):
            f(i[0], i[1], out=o[0])
        return k


register_variants(Compare, globals(), [
    ("Equal", dict(name="EQUAL", ufunc=staticmethod(np.equal), py=staticmethod(operator.eq))),
    ("NotEqual", dict(name="NOT_EQUAL", ufunc=staticmethod(np.not_equal), py=staticmethod(operator.ne))),
    ("Greater", dict(name="GREATER", ufunc=staticmethod(np.greater), py=staticmethod(operator.gt))),
    ("GreaterEqual", dict(name="GREATER_EQUAL", ufunc=staticmethod(np.greater_equal), py=staticmethod(operator.ge))),
    ("Less", dict(name="LESS", ufunc=staticmethod(np.less), py=staticmethod(operator.lt))),
    ("LessEqual", dict(name="LESS_EQUAL", ufunc=staticmethod(np.less_equal), py=staticmethod(operator.le))),
])


# ---------------------------------------------------------------------------------------
# logical operations on TENSOR_BOOL8
# ---------------------------------------------------------------------------------------
class LogicalBinary(Pairwise):
    type_levels = {BOOL8: 3}
    out_type = BOOL8
    ufunc = None
    py = None              # the operation on one element's Python values (one_value)

    def build(self, ins, outs):
        f = self.ufunc
        if small(*ins, *outs):
            return one_value(self.py, ins, outs) or lean_pair(f, ins, outs, dtype=np.uint8)

        def k(i, o):
            f(_bool_operand(i[0]), _bool_operand(i[1]), out=o[0])
        return k


register_variants(LogicalBinary, globals(), [
    ("LogicalAnd", dict(name="LOGICAL_AND", ufunc=staticmethod(np.logical_and), py=staticmethod(operator.and_))),
    ("LogicalOr", dict(name="LOGICAL_OR", ufunc=staticmethod(np.logical_or), py=staticmethod(operator.or_))),
])


@register
class LogicalNot(Op):
    name = "LOGICAL_NOT"

    def validate(self, sig):
        sig.count(1, 1)
        sig.types("input", 0, (BOOL8,))
        sig.types("output", 0, (BOOL8,))
        check_present(sig)
        return 3

    def infer(self, ins):
        return [ins[0].dims]

    def build(self, ins, outs):
        if small(*ins, *outs):
            look, zero, eq = Reshaped(ins[0].dims, dtype=np.uint8), np.zeros((), np.uint8), np.equal

            def k(i, o):
                eq(look(i[0]), zero, out=o[0])
            return k

        def k(i, o):
            np.equal(_bool_operand(i[0]), 0, out=o[0])
        return k


# ---------------------------------------------------------------------------------------
# SELECT: condition ? input1 : input2, all of one shape
# ---------------------------------------------------------------------------------------
@register
class Select(Op):
    name = "SELECT"
    type_levels = {F16: 3, F32: 3, I32: 3, Q8: 3, Q8S: 4}

    def validate(self, sig):
        sig.count(3, 1)
        sig.types("input", 0, (BOOL8,))
        t = sig.types("input", 1, self.type_levels)
        sig.same_type("input", 2, t, ref="input 1")
        sig.same_type("output", 0, t, ref="input 1")
        check_present(sig)
        return self.type_levels[t]

    def infer(self, ins):
        c, a, b = (tuple(x.dims) for x in ins)
        if c != a:
            raise value_error(f"SELECT: input 0 (condition) has shape {list(c)} but input 1 has shape "
                              f"{list(a)}; they must be equal (no broadcasting)", at_runtime=False)
        if b != a:
            raise value_error(f"SELECT: input 2 has shape {list(b)} but input 1 has shape {list(a)}; "
                              f"they must be equal", at_runtime=False)
        return [a]

    def build(self, ins, outs):
        t = ins[1].type
        ta = tb = None
        if t in QUANT8:
            if not is_identity_requant(ins[1], outs[0]):
                ta = requant_table(ins[1], outs[0])
            if not is_identity_requant(ins[2], outs[0]):
                tb = requant_table(ins[2], outs[0])

        def k(i, o):
            out = o[0]
            if tb is None:
                np.copyto(out, i[2])
            else:
                Q.take(tb, i[2], out)
            x = i[1] if ta is None else np.take(ta, Q.as_bytes(i[1]), mode="clip")
            np.copyto(out, x, where=i[0])     # a non-zero BOOL8 byte selects input 1
        return k
