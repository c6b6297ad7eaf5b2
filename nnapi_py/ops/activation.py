"""Activations: RELU, RELU1, RELU6, LOGISTIC, TANH, ELU, HARD_SWISH, PRELU, SOFTMAX, LOG_SOFTMAX.

Numerics (what the kernels do and why):

* float16 tensors are computed in float32 and rounded once when stored; float32 (relaxed or
  not) is computed in float32 (SOFTMAX/LOG_SOFTMAX reduce in float32 as the reference does).
* Clamps reproduce the reference's std::max(lo, x) / std::min(x, hi) on NaN (the bound
  wins), e.g. RELU(NaN) = 0 as in the Android CPU path (quant.clamp_into).
* Element-wise 8-bit activations (LOGISTIC, TANH, HARD_SWISH) are table lookups: the 256
  possible input codes are evaluated once in build() in float64 from the dequantized value and
  requantized with exact round-half-away-from-zero (requantize_into).  This stays within the
  CTS tolerance (+-1) of the reference's gemmlowp fixed-point algorithms; the run-time cost is
  one np.take.
* Quantized SOFTMAX works on the integer differences d = max - x along the axis (the only thing
  the reference looks at): exp(-d * beta * input_scale) comes from a 256-entry float32 table
  built once, is normalised, scaled to the fixed output scale 1/256 and rounded half away
  from zero (float instead of the reference's gemmlowp fixed point: the error stays around
  1e-5 of an output step, far inside the CTS +-1; every CTS vector matches exactly).
* PRELU quantized follows the reference exactly: two fixed-point multipliers
  (input_scale/output_scale for x >= 0, input_scale*alpha_scale/output_scale for x < 0)
  applied with quant.multiply_by_quantized_multiplier.
"""
import numpy as np

from .. import constants as C
from .base import Op, kept_array, register, value_error
from . import quant as Q
from .quant import quantize_value
from . import common
from .common import n_elements, small
from .common import broadcast_shape, scalar_for, check_scalar, same_shape_signature, check_axis_input, check_same_shape, optional_axis, optional_axis_level, float_kernel, Scratch, row_repeats  # noqa: F401

F16, F32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32
Q8, Q8S = C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED
FLOATS = (F32, F16)
QUANT8 = (Q8, Q8S)


# ---- helpers shared by activation.py / normalization.py ------------------------------------
def lut_kernel(table):
    """Element-wise 8-bit kernel from a 256-entry table indexed by the input's bit pattern."""
    look = Q.ByteLookup(table)

    def k(i, o):
        look(i[0], o[0])
    return k


def quant_table(inp, out, real_fn):
    """256-entry table: requantize real_fn(dequantized input code) to the output's parameters."""
    return Q.unary_table(inp.dtype, inp.scale, inp.zp, out.dtype, out.scale, out.zp, real_fn)


def _table_kernel(ins, outs, table):
    """The kernel of a table activation: the lean one on small tensors, else lut_kernel."""
    if small(ins[0], outs[0]):
        return Q.small_lookup(table, ins[0].dtype, n_elements(ins[0]))
    return lut_kernel(table)


def _small_f32(ins, outs):
    """True for a float32 activation of a small tensor (common.SMALL): its lean kernel makes the
    general kernel's ufunc calls (the same bits), bound once, without float_kernel's wrapper."""
    return ins[0].type == F32 and outs[0].dtype == np.float32 and small(ins[0], outs[0])


def _small_sigmoid(shape):
    """_sigmoid's four calls: -x, exp, + 1 (an int 1 meets float32 as float32: here an array of
    ones of the output's shape, no scalar converted per call), 1 / v.  One value: the same four
    steps on numpy float32 scalars (numpy's in-place ufunc on a one-element array costs about
    1 us more a call than on a longer one; a float32 scalar's exp is the array loop's, and its
    negation, sum and quotient are the same IEEE operations)."""
    neg, exp, add, rec = np.negative, np.exp, np.add, np.reciprocal
    shape = tuple(int(d) for d in shape)
    one = np.ones(shape, np.float32)
    if len(shape) and all(d == 1 for d in shape):
        at, one32 = (0,) * len(shape), np.float32(1)

        def k1(i, o):
            o[0][at] = one32 / (exp(-i[0][at]) + one32)
        return k1

    def k(i, o):
        out = o[0]
        neg(i[0], out=out)
        exp(out, out=out)
        add(out, one, out=out)
        rec(out, out=out)
    return k


def _small_tanh():
    tanh = np.tanh

    def k(i, o):
        tanh(i[0], out=o[0])
    return k


# ---- RELU family, LOGISTIC, TANH, HARD_SWISH, ELU ---------------------------------------------
class _Unary(Op):
    """One tensor in, one tensor of the same type and shape out."""
    allow_zero_sized = True
    type_levels = {F32: 1, Q8: 1, F16: 3, Q8S: 4}
    max_rank = 4
    n_inputs = 1

    def validate(self, sig):
        t = same_shape_signature(sig, self.n_inputs, self.type_levels)
        if self.max_rank:
            sig.rank_between("input", 0, 1, self.max_rank)
        self.check_params(sig, t)
        if t in QUANT8:
            self.check_output_quant(sig, t)
        return self.type_levels[t]

    def check_params(self, sig, t):
        pass

    def check_output_quant(self, sig, t):
        sig.same_quant("output", 0, sig.ins[0])

    def infer(self, ins):
        d = ins[0].dims
        if self.max_rank and len(d) > self.max_rank:
            raise value_error(f"{self.name}: input 0 has rank {len(d)}, expected at most {self.max_rank}",
                              at_runtime=False)
        return [d]


class _Clamp(_Unary):
    lo = hi = None

    def build(self, ins, outs):
        inp = ins[0]
        if inp.type in FLOATS:
            lo, hi = self.lo, self.hi

            def k(i, o):           # float16: the bounds are exact in float16, no rounding issue
                Q.clamp_into(i[0], lo, hi, o[0])
            return k
        # quantized: clamp the codes to the quantized bounds (input and output share scale/zp)
        dt = inp.dtype
        qlo, qhi = Q.qrange_of_dtype(dt)
        lo = max(qlo, quantize_value(self.lo, inp.scale, inp.zp, dt))
        hi = qhi if self.hi is None else min(qhi, quantize_value(self.hi, inp.scale, inp.zp, dt))
        lo_v, hi_v = dt.type(lo), dt.type(max(lo, hi))

        def k(i, o):
            np.clip(i[0], lo_v, hi_v, out=o[0])
        return k


@register
class Relu(_Clamp):
    name = "RELU"
    lo, hi = 0.0, None


@register
class Relu1(_Clamp):
    name = "RELU1"
    lo, hi = -1.0, 1.0


@register
class Relu6(_Clamp):
    name = "RELU6"
    lo, hi = 0.0, 6.0


def _sigmoid(x, out):
    np.negative(x, out=out)
    np.exp(out, out=out)
    out += 1
    np.reciprocal(out, out=out)


@register
class Logistic(_Unary):
    name = "LOGISTIC"

    def check_output_quant(self, sig, t):
        sig.fixed_quant(0, 1.0 / 256, 0 if t == Q8 else -128)

    def build(self, ins, outs):
        if ins[0].type in FLOATS:
            return _small_sigmoid(outs[0].dims) if _small_f32(ins, outs) else float_kernel(_sigmoid, outs[0].dtype)
        with np.errstate(over="ignore"):
            tab = quant_table(ins[0], outs[0], lambda v: 1.0 / (1.0 + np.exp(-v)))
        return _table_kernel(ins, outs, tab)


@register
class Tanh(_Unary):
    name = "TANH"
    type_levels = {F32: 1, Q8: 3, F16: 3, Q8S: 4}

    def check_output_quant(self, sig, t):
        sig.fixed_quant(0, 1.0 / 128, 128 if t == Q8 else 0)

    def build(self, ins, outs):
        if ins[0].type in FLOATS:
            if _small_f32(ins, outs):
                return _small_tanh()
            return float_kernel(lambda x, out: np.tanh(x, out=out), outs[0].dtype)
        return _table_kernel(ins, outs, quant_table(ins[0], outs[0], np.tanh))


def _hard_swish(x, out):
    # x * min(6, max(0, x + 3)) / 6
    np.add(x, 3, out=out)
    Q.clip_inplace(out, 0, 6)       # NaN kept where the reference's bound wins: x * ... is NaN anyway
    out *= x
    out /= 6


@register
class HardSwish(_Unary):
    name = "HARD_SWISH"
    type_levels = {F32: 4, F16: 4, Q8: 4, Q8S: 4}
    max_rank = 0

    def check_output_quant(self, sig, t):
        pass                       # output scale/zeroPoint may differ from the input's

    def build(self, ins, outs):
        if ins[0].type in FLOATS:
            return float_kernel(_hard_swish, outs[0].dtype)

        def real(v):
            return v * np.clip(v + 3.0, 0.0, 6.0) / 6.0
        return _table_kernel(ins, outs, quant_table(ins[0], outs[0], real))


@register
class Elu(_Unary):
    name = "ELU"
    type_levels = {F32: 4, F16: 4}
    max_rank = 0
    n_inputs = 2

    def check_params(self, sig, t):
        check_scalar(sig, 1, "alpha", scalar_for(t), t)

    def build(self, ins, outs):
        if ins[1].value is None:
            raise value_error("ELU: input 1 (alpha) has no value", at_runtime=False)
        alpha = np.float32(float(ins[1].value))

        def elu(x, out):
            # max(0, x) + min(0, alpha * (exp(x) - 1))
            neg = np.expm1(x)
            neg *= alpha
            np.fmin(neg, 0, out=neg)
            np.fmax(x, 0, out=out)
            out += neg
        return float_kernel(elu, outs[0].dtype)


# ---- PRELU ----------------------------------------------------------------------------------
@register
class Prelu(Op):
    name = "PRELU"
    type_levels = {F32: 3, F16: 3, Q8: 3, Q8S: 4}

    def validate(self, sig):
        sig.count(2, 1)
        t = sig.types("input", 0, self.type_levels)
        sig.same_type("input", 1, t, "alpha")
        sig.same_type("output", 0, t)
        a, b, o = sig.ins[0], sig.ins[1], sig.outs[0]
        if a.known and b.known:
            try:
                shape = np.broadcast_shapes(a.dims, b.dims)
            except ValueError:
                sig.fail(f"input 0 {list(a.dims)} and input 1 (alpha) {list(b.dims)} are not broadcast-compatible")
            if o.dims is not None and (len(o.dims) != len(shape) or
                                       any(y and y != x for x, y in zip(shape, o.dims))):
                sig.fail(f"output 0 has dimensions {list(o.dims)}, expected {list(shape)} "
                         f"(input 0 broadcast with alpha)")
        return self.type_levels[t]

    def infer(self, ins):
        return [broadcast_shape(self.name, ins[0].dims, ins[1].dims)]

    def build(self, ins, outs):
        t = ins[0].type
        if t in FLOATS:
            fast = _prelu_rows(ins, outs) if t == F32 else None
            if fast is not None:
                return fast
            if t == F32:
                def k(i, o):
                    x, a = i[0], i[1]
                    with np.errstate(all="ignore"):
                        if np.isfinite(a).all():
                            # max(x, 0) + min(x, 0) * alpha: equal to the reference's
                            # x >= 0 ? x : x * alpha whenever alpha is finite, faster than a mask
                            neg = np.empty(x.shape, np.float32)
                            Q.negpart_into(x, neg)
                            np.multiply(neg, a, out=o[0])
                            Q.relu_into(x, neg)
                            o[0] += neg
                        else:
                            np.multiply(x, a, out=o[0])
                            np.copyto(o[0], x, where=x >= 0)
            else:
                def k(i, o):
                    x = i[0].astype(np.float32)
                    with np.errstate(all="ignore"):
                        r = x * i[1].astype(np.float32)
                        np.copyto(r, x, where=x >= 0)
                        o[0][...] = r
            return k
        inp, alpha, out = ins[0], ins[1], outs[0]
        pos = Q.Requant(inp.scale / out.scale)
        neg = Q.Requant(inp.scale * alpha.scale / out.scale)
        zi, za, zo = inp.zp, alpha.zp, out.zp
        lo, hi = Q.qrange(out.type)
        a_const = None if alpha.value is None else alpha.value.astype(np.int64) - za

        def k(i, o):
            x = i[0].astype(np.int64) - zi
            a = a_const if a_const is not None else i[1].astype(np.int64) - za
            acc = np.where(x >= 0, pos(np.broadcast_to(x, o[0].shape)), neg(x * a))
            acc += zo
            Q.store(o[0], acc, lo, hi)
        return k


def _prelu_rows(ins, outs):
    """float32 PRELU with a constant, finite alpha (the usual case).  With a non-zero alpha
    <= 1 everywhere (or >= 1 everywhere) x >= 0 ? x : x * alpha is max(x, x * alpha) (min for
    alpha >= 1): two passes and no temporary; with one non-zero alpha per channel, mostly on
    one side of 1, the same for all channels and the few others again on their own;
    otherwise max(x, 0) + min(x, 0) * alpha (exact for finite alpha) in four passes over a
    kept work array.  Alpha is tiled once along whole rows of the input's trailing dimensions,
    so numpy's inner loop runs over a long row rather than over the channels.  None when this
    does not apply (the general kernel runs)."""
    x, a = ins[0], ins[1]
    if a.value is None or x.dims is None or not all(x.dims) or outs[0].dims is None \
            or tuple(outs[0].dims) != tuple(x.dims):
        return None
    alpha = np.asarray(a.value, np.float32)
    if alpha.size == 0 or not np.isfinite(alpha).all():
        return None
    pick = None                             # None: max(x, 0) + min(x, 0) * alpha, four passes
    fix = None                              # (channels, their alphas, other form): computed again
    shape = tuple(int(d) for d in x.dims)
    r = len(shape)
    ap = alpha.reshape((1,) * (r - alpha.ndim) + alpha.shape)
    if alpha.all():                         # (alpha 0 would make inf * 0 = NaN where x = +inf)
        if (alpha <= 1).all():
            pick = np.maximum
        elif (alpha >= 1).all():
            pick = np.minimum
        elif ap.ndim and all(d == 1 for d in ap.shape[:-1]) and ap.shape[-1] == shape[-1]:
            # one alpha per channel, some above 1 and some below (trained PReLUs often have a
            # channel or two above 1): the form most channels take for the whole array, then
            # the few others again, gathered into one block (strided passes per channel cost
            # 2x: 96x96x16 with three such channels 168 -> ~100 us)
            ch = ap.reshape(-1)
            above = np.flatnonzero(ch > 1)
            below = np.flatnonzero(ch < 1)
            pick, other, bad = (np.maximum, np.minimum, above) if len(above) <= len(below) \
                else (np.minimum, np.maximum, below)
            if 4 * len(bad) <= len(ch):
                fix = (bad.astype(np.intp), ch[bad].astype(np.float32), other)
            else:
                pick = None
    k = r                                   # trailing dims alpha may vary along
    while k > 0 and all(d == 1 for d in ap.shape[:r - k + 1]):
        k -= 1
    k = max(k, 1)
    while k < r and int(np.prod(shape[r - k:])) < 1024:
        k += 1                              # longer rows: alpha broadcasts along them anyway
    row = np.ascontiguousarray(np.broadcast_to(ap[(0,) * (r - k)], shape[r - k:]).reshape(-1))
    reps = row_repeats(row.size, int(np.prod(shape)))
    if reps > 1:
        row = np.tile(row, reps)
    n = row.size

    scratch = Scratch()
    x_rows = common.Reshaped((int(np.prod(shape)) // n, n))        # views kept between runs
    o_rows = common.Reshaped((int(np.prod(shape)) // n, n), out=True)
    few = None                  # one or two channels fixed up: their strided columns, no copies
    if fix is not None and len(fix[0]) <= 2:        # (1x8x8x128, one channel: 12.3 -> 4.1 us)
        few = [(int(j), np.array(aj, np.float32)) for j, aj in zip(fix[0], fix[1])]
        pixels = (int(np.prod(shape)) // shape[-1], shape[-1])
        x_pc, o_pc = common.Reshaped(pixels), common.Reshaped(pixels, out=True)

    def kern(i, o):
        xv, out = i[0], o[0]
        if not (xv.flags.c_contiguous and out.flags.c_contiguous):
            with np.errstate(all="ignore"):
                out[...] = pick(xv, xv * ap) if pick and not fix else \
                    np.maximum(xv, 0) + np.minimum(xv, 0) * ap
            return
        x2, o2 = x_rows(xv), o_rows(out)        # (kept views: 1x4x4x128 6.3 -> 3.6 us)
        if pick is not None:            # numpy's errors are ignored where kernels run
            np.multiply(x2, row, out=o2)
            pick(o2, x2, out=o2)
            if few is not None:
                xc, oc, f = x_pc(xv), o_pc(out), fix[2]
                for j, aj in few:
                    xj, oj = xc[:, j], oc[:, j]
                    np.multiply(xj, aj, out=oj)
                    f(oj, xj, out=oj)
            elif fix is not None:
                idx, a, f = fix
                xb = xv.reshape(-1, xv.shape[-1])[:, idx]     # [pixels, few channels], a copy
                rb = xb * a
                f(rb, xb, out=rb)
                out.reshape(-1, out.shape[-1])[:, idx] = rb
            return
        with np.errstate(all="ignore"):
            bufs = scratch.take()
            try:
                tmp = bufs.array("neg", x2.shape, np.float32)
                Q.negpart_into(x2, tmp)
                tmp *= row
                Q.relu_into(x2, o2)
                o2 += tmp
            finally:
                scratch.give(bufs)
    return kern


# ---- SOFTMAX, LOG_SOFTMAX --------------------------------------------------------------------
def _scaled_logits(x, out, axis, b32):
    """out = (x - max(x) along axis) * beta (float32 beta b32), the common start of both."""
    np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
    if b32 != 1:
        out *= b32


class _SoftmaxBase(Op):
    allow_zero_sized = True

    def check_beta(self, sig, t):
        check_scalar(sig, 1, "beta", scalar_for(t) if t in FLOATS else C.FLOAT32, t)
        b = sig.scalar_value(1)
        if b is not None and not b > 0:
            sig.fail(f"input 1 (beta) must be positive, got {b}")

    def axis_of(self, ins):
        return optional_axis(self.name, ins, 2)

    def beta_of(self, ins):
        b = ins[1].value
        if b is None:
            raise value_error(f"{self.name}: input 1 (beta) has no value", at_runtime=False)
        b = float(b)
        if not b > 0:
            raise value_error(f"{self.name}: input 1 (beta) must be positive, got {b}", at_runtime=False)
        return b


TINY_SOFTMAX = 16       # _tiny_quant_softmax: most values (a classifier's last layer) ...
TINY_SOFTMAX_ROW = 7    # ... and most along the axis (numpy's float32 sum is sequential below 8)


def _tiny_quant_softmax(exptab, axis, zo, hi, signed, shape):
    """Quantized SOFTMAX of at most TINY_SOFTMAX values, at most TINY_SOFTMAX_ROW along the
    axis (a tiny classifier's scores, 1x4), in Python scalars: the general kernel's float32
    operations one value at a time with numpy's float32 scalars (the same IEEE float32
    arithmetic as its ufuncs), the row's sum in numpy's order (its add.reduce adds a row of
    fewer than 8 values one after the other, from the first), floor and clamp by a table of
    the output's bytes, the bytes written through a kept memoryview of the output.  The
    input is read as its bytes (int8 with the top bit flipped: the same differences max - x);
    each row is a slice of them.  1x4: 4 us against 15-18 us for the 9 ufunc calls; the same
    bytes."""
    shape = tuple(int(d) for d in shape)
    axis %= len(shape)
    size, n = int(np.prod(shape)), shape[axis]
    step = int(np.prod(shape[axis + 1:], dtype=np.int64))
    starts = np.moveaxis(np.arange(size).reshape(shape), axis, -1).reshape(-1, n)[:, 0].tolist()
    rows = [slice(s0, s0 + (n - 1) * step + 1, step) for s0 in starts]
    flip = bytes((b ^ 0x80) if signed else b for b in range(256))
    tab = [np.float32(v) for v in exptab]
    f256, c = np.float32(256), np.float32(0.5 + zo)
    # floor(v) - zo of v = e * r + c in [zo + 1/2, zo + 256.5] is in 0..256; its output byte
    byte = [(min(k + zo, hi)) & 0xFF for k in range(257)]
    zf = float(zo)
    last = [None]

    def k(i, o):
        xb = i[0].tobytes().translate(flip)
        if len(rows) == 1:
            res = None
        else:
            res = [0] * size
        for row in rows:
            v = xb[row]
            m = max(v)
            e = [tab[m - a] for a in v]
            s = e[0]
            for t in e[1:]:
                s = s + t
            r = f256 / s
            b = [byte[int(float(t * r + c) - zf)] for t in e]
            if res is None:
                res = b
            else:
                res[row] = b
        out, seen = o[0], last[0]             # (output, its bytes): one read, thread-safe
        if seen is not None and out is seen[0]:
            seen[1][:] = bytes(res)
        elif out.flags.c_contiguous:
            mv = memoryview(out).cast("B")
            mv[:] = bytes(res)
            if kept_array(out):
                last[0] = (out, mv)
        else:
            out[...] = np.frombuffer(bytes(res), out.dtype).reshape(out.shape)
    return k


def _small_quant_softmax(exptab, axis, zo, hi, signed, shape):
    """Quantized SOFTMAX of a small tensor (common.SMALL): the general kernel's float32 passes
    with the differences max - x taken in int16 (no order-preserving byte flip for int8: the
    same differences), the ufuncs' own reductions (the max and sum methods' Python wrappers
    skipped: the same loops), the table read by its method, every result into a kept array
    (one set per concurrent call) and the last clamp stored into the output; uint8 without
    the floor (every value is >= 1/2 there: the store's truncation is the floor): 8-9 numpy
    calls, the same bytes."""
    take = exptab.take
    mx, sm = np.maximum.reduce, np.add.reduce
    sub, div, mul, add, floor, mini = np.subtract, np.divide, np.multiply, np.add, np.floor, np.minimum
    kshape = tuple(1 if k == axis else int(d) for k, d in enumerate(shape))
    shape = tuple(int(d) for d in shape)
    # the constants as arrays of their operands' shapes (the same float32 values the general
    # kernel's scalars take; no scalar converted per call)
    c = np.full(shape, 0.5 + zo, np.float32)
    f256 = np.full(kshape, 256, np.float32)
    top = np.full(shape, hi, np.float32)
    pool = []
    pop, push = pool.pop, pool.append

    def new():
        return (np.empty(kshape, np.int8 if signed else np.uint8), np.empty(shape, np.int16 if signed else np.uint8),
                np.empty(shape, np.float32), np.empty(kshape, np.float32))

    def k(i, o):
        x = i[0]
        if x.size == 0:
            return
        try:
            m, d, e, s = pop()
        except IndexError:
            m, d, e, s = new()
        mx(x, axis, None, m, True)
        if signed:
            sub(m, x, out=d, dtype=np.int16)
        else:
            sub(m, x, out=d)
        take(d, None, e, "clip")
        sm(e, axis, None, s, True)
        div(f256, s, out=s)
        mul(e, s, out=e)
        add(e, c, out=e)
        if signed:
            floor(e, out=e)
        mini(e, top, out=o[0], casting="unsafe")
        push((m, d, e, s))
    return k


@register
class Softmax(_SoftmaxBase):
    name = "SOFTMAX"
    optional_inputs = (2,)
    type_levels = {F32: 1, Q8: 1, F16: 3, Q8S: 4}

    def validate(self, sig):
        t = same_shape_signature(sig, (2, 3), self.type_levels)
        sig.rank_between("input", 0, 1, 4)
        self.check_beta(sig, t)
        level = optional_axis_level(sig, 3, 2, self.type_levels[t], (2, 4))
        if t in QUANT8:
            sig.fixed_quant(0, 1.0 / 256, 0 if t == Q8 else -128)
        return level

    def infer(self, ins):
        d = ins[0].dims
        if len(d) > 4:
            raise value_error(f"SOFTMAX: input 0 has rank {len(d)}, expected at most 4", at_runtime=False)
        self.axis_of(ins)
        return [d]

    def build(self, ins, outs):
        axis = self.axis_of(ins)
        beta = self.beta_of(ins)
        if ins[0].type in FLOATS:
            b32 = np.float32(beta)

            def softmax(x, out):
                if x.size == 0:
                    return
                _scaled_logits(x, out, axis, b32)
                np.exp(out, out=out)
                out /= out.sum(axis=axis, keepdims=True)
            return float_kernel(softmax, outs[0].dtype)
        # quantized: only d = max - x (0..255 steps) matters; exp(-d * beta * scale) is a table
        # (float32 table: half the memory traffic of float64; +-1e-5 on the 0..256 output scale)
        exptab = np.exp(-np.arange(256, dtype=np.float64) * (beta * ins[0].scale)).astype(np.float32)
        zo = outs[0].zp
        hi = Q.qrange(outs[0].type)[1]
        signed = ins[0].type == Q8S
        if small(ins[0], outs[0]) and tuple(ins[0].dims) == tuple(outs[0].dims):
            dims = tuple(int(d) for d in ins[0].dims)
            if 0 < int(np.prod(dims)) <= TINY_SOFTMAX and dims[axis] <= TINY_SOFTMAX_ROW:
                return _tiny_quant_softmax(exptab, axis, zo, hi, signed, dims)
            return _small_quant_softmax(exptab, axis, zo, hi, signed, ins[0].dims)

        def k(i, o):
            x = i[0]
            if x.size == 0:
                return
            u = np.bitwise_xor(x.view(np.uint8), 0x80) if signed else x   # order-preserving uint8
            e = np.take(exptab, u.max(axis=axis, keepdims=True) - u)
            s = e.sum(axis=axis, keepdims=True)
            np.divide(np.float32(256), s, out=s)
            e *= s                      # p * 256 >= 0: round half away = floor(v + 0.5)
            e += np.float32(0.5 + zo)
            np.floor(e, out=e)
            np.minimum(e, hi, out=e)
            o[0][...] = e
        return k


@register
class LogSoftmax(_SoftmaxBase):
    name = "LOG_SOFTMAX"
    type_levels = {F32: 3, F16: 3}

    def validate(self, sig):
        t = same_shape_signature(sig, 3, self.type_levels)
        self.check_beta(sig, t)
        sig.present(2, "axis")
        check_axis_input(sig, 2)
        return self.type_levels[t]

    def infer(self, ins):
        self.axis_of(ins)
        return [ins[0].dims]

    def build(self, ins, outs):
        axis = self.axis_of(ins)
        b32 = np.float32(self.beta_of(ins))

        def log_softmax(x, out):
            # (x - max) * beta - log(sum(exp((x - max) * beta)))
            if x.size == 0:
                return
            _scaled_logits(x, out, axis, b32)
            out -= np.log(np.exp(out).sum(axis=axis, keepdims=True))
        return float_kernel(log_softmax, outs[0].dtype)
