"""The operation registry: what every operation module provides and how it is found.

An operation is one class in one module under nnapi_py/ops/, registered with @register.
It provides three things:

* ``validate(sig)`` -- the signature check done at ANeuralNetworksModel_addOperation (types,
  counts, ranks, quantization rules) and again at Model_finish with constant values known.
  It fails through ``sig.fail(...)`` (BAD_DATA, reason names the op and operand) and
  returns the minimum feature level (1..8) the signature needs.  Rules Android 14 checks
  only when its driver prepares the operation (output shapes against the inputs, fixed or
  derived quantization, values) sit inside ``with sig.at_execution():`` -- deferred to
  the computation by default, reported at once under NNAPI_PY_STRICT=1.
* ``infer(ins)`` -- the shape rule: output dims from input Infos whose dims are all known
  (constant inputs carry their ``value``).  Value errors raise NNError (BAD_DATA at
  compilation, OP_FAILED at execution).
* ``build(ins, outs)`` -- returns ``kernel(inputs, outputs)``; called once per input-shape
  signature (at Compilation_finish when shapes are known) so constants are converted and
  packed once.  Inputs are numpy arrays (scalars: numpy scalars; omitted: None); the kernel
  writes into the given output arrays (often the caller's own buffers).
"""
import numpy as np

from .. import constants as C
from ..errors import NNError, bad_data, strict


def _tensor_budget():
    """Bytes one tensor computed at execution, or one kernel's working buffer, may take
    (NNAPI_PY_MAX_TENSOR_BYTES, default a quarter of physical memory): a shape that comes from
    input values is checked against it before anything is allocated (plan.size_problem), so a
    huge padding or tile count is OUT_OF_MEMORY with a reason instead of an allocation the
    system cannot back."""
    import os
    raw = os.environ.get("NNAPI_PY_MAX_TENSOR_BYTES", "")
    if raw.strip():
        try:
            n = int(raw.strip().replace("_", ""), 0)
        except ValueError:
            n = 0
        if n >= 1:
            return n
        from ..errors import bad_setting
        bad_setting("NNAPI_PY_MAX_TENSOR_BYTES", raw, "a number of bytes >= 1 (decimal, or 0x hexadecimal)",
                    "the default applies (a quarter of physical memory)")
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
    except (ValueError, OSError, AttributeError):
        return 1 << 30


MAX_TENSOR_BYTES = _tensor_budget()

OPS = {}            # operation code -> Op instance
OPERATION_NAMES = {}  # code -> name for all 106 operations + OEM (for messages)


class Info:
    """Static description of one operand as an operation sees it."""
    __slots__ = ("type", "dims", "scale", "zp", "channel", "value", "omitted", "index")

    def __init__(self, type, dims, scale=0.0, zp=0, channel=None, value=None, omitted=False, index=-1):
        self.type = type
        self.dims = dims          # tuple, None = unknown rank; 0 entries = unknown dim
        self.scale = scale
        self.zp = zp
        self.channel = channel    # ChannelQuant or None
        self.value = value        # numpy array / numpy scalar when constant (or at run time)
        self.omitted = omitted
        self.index = index

    @property
    def rank(self):
        return None if self.dims is None else len(self.dims)

    @property
    def known(self):
        return self.dims is not None and all(self.dims)

    @property
    def dtype(self):
        return C.DTYPES[self.type]

    def with_dims(self, dims):
        return Info(self.type, tuple(dims), self.scale, self.zp, self.channel, None, False, self.index)

    def __repr__(self):
        return f"Info({C.TYPE_NAMES.get(self.type, self.type)}, {self.dims}, s={self.scale}, zp={self.zp})"


class ChannelQuant:
    __slots__ = ("dim", "scales")

    def __init__(self, dim, scales):
        self.dim = dim
        self.scales = scales   # numpy float32 array

    def __eq__(self, other):
        return (isinstance(other, ChannelQuant) and self.dim == other.dim
                and np.array_equal(self.scales, other.scales))


def tname(t):
    """Name of an operand type code for messages (TENSOR_FLOAT32, ...)."""
    return C.TYPE_NAMES.get(t, str(t))


def scalar(info, default=None):
    """Python value of a scalar operand (constant, or at run time), `default` when it is
    absent (info None), omitted or not known yet."""
    if info is None or info.omitted or info.value is None:
        return default
    v = info.value
    return v.item() if hasattr(v, "item") else v


def resolve_axis(name, axis, rank, what="axis"):
    """One axis in [-rank, rank) -> [0, rank); value error (at compilation) otherwise."""
    axis = int(axis)
    if not -rank <= axis < rank:
        raise value_error(f"{name}: {what} {axis} is out of range [{-rank}, {rank}) for an input of rank {rank}",
                          at_runtime=False)
    return axis + rank if axis < 0 else axis


class Sig:
    """What validate() sees: the operation's operand Infos, plus failure helpers.

    The checks name an operand as ``where`` ("input"/"output") and index, plus its role
    ``what`` when given ("input 1 (axes) has type ..."); those comparing with another
    operand name it with ``ref`` (default "input 0")."""
    __slots__ = ("op", "ins", "outs", "deferred", "_later")

    def __init__(self, op, ins, outs):
        self.op = op
        self.ins = ins
        self.outs = outs
        self.deferred = None      # reason of the first failed check Android makes at execution
        self._later = None

    def fail(self, msg):
        raise bad_data(f"{self.op.name}: {msg}")

    def at_execution(self):
        """Context for the checks Android 14 makes when its driver prepares the operation
        (common/cpu_operations ``prepare``), not in the operation's ``validate()`` at
        addOperation: output ranks and shapes against the inputs, fixed or derived
        quantization (output scale, bias scale), values of constants.  A check failing
        inside it ends the block; by default its reason is kept in ``sig.deferred`` (the
        model records it on the operation, the compilation succeeds, every computation
        fails with OP_FAILED and this reason); under NNAPI_PY_STRICT=1 it fails here, at
        the earliest point (BAD_DATA), as a lint."""
        later = self._later
        if later is None:
            later = self._later = _AtExecution(self)
        return later

    def operand(self, where, idx):
        return (self.ins if where == "input" else self.outs)[idx]

    @staticmethod
    def label(where, idx, what=None):
        return f"{where} {idx}" + (f" ({what})" if what else "")

    def prepare_rule(self):
        """Context of a rule tying operands together (an output's or a parameter tensor's shape,
        scale or zeroPoint against another operand or a fixed value): checked at execution
        (at_execution), except for operations whose Android validate() checks such rules
        itself (Op.validates_outputs), where it fails at once."""
        return _NOW if self.op.validates_outputs else self.at_execution()

    # ---- common checks -------------------------------------------------------------
    def count(self, n_in, n_out):
        """n_in: int or collection of allowed counts."""
        allowed = (n_in,) if isinstance(n_in, int) else tuple(n_in)
        if len(self.ins) not in allowed:
            self.fail(f"expected {' or '.join(map(str, allowed))} inputs, got {len(self.ins)}")
        if len(self.outs) != n_out:
            self.fail(f"expected {n_out} output{'s' if n_out != 1 else ''}, got {len(self.outs)}")

    def present(self, idx, what=None):
        """A required input must not be omitted (NO_VALUE)."""
        if self.ins[idx].omitted:
            self.fail(f"{self.label('input', idx, what)} is required but was omitted "
                      f"(no value; the input is not optional)")

    def all_present(self, roles=None, n=None):
        """The first n inputs (default: all) are required; roles: their names."""
        for k in range(len(self.ins) if n is None else n):
            self.present(k, roles[k] if roles else None)

    def types(self, where, idx, allowed, what=None):
        """Operand type in `allowed` (dict type -> level, or a collection); returns the type."""
        t = self.operand(where, idx).type
        if t not in allowed:
            names = ", ".join(tname(a) for a in allowed)
            self.fail(f"{self.label(where, idx, what)} has type {tname(t)}, expected {names}")
        return t

    def same_type(self, where, idx, t, what=None, ref="input 0"):
        """Operand type must be t, the type of operand `ref`."""
        o = self.operand(where, idx)
        if o.type != t:
            self.fail(f"{self.label(where, idx, what)} has type {tname(o.type)}, expected {tname(t)} "
                      f"(the type of {ref})")

    def rank_between(self, where, idx, lo=1, hi=None, what=None):
        """Known rank within [lo, hi] (hi None: no upper limit); unknown rank passes."""
        r = self.operand(where, idx).rank
        if r is not None and r != 0 and not (lo <= r and (hi is None or r <= hi)):
            want = f"at least {lo}" if hi is None else f"{lo} (a {lo}-D tensor)" if lo == hi else f"{lo}..{hi}"
            self.fail(f"{self.label(where, idx, what)} has rank {r}, expected {want}")

    def same_quant(self, where, idx, ref_info, ref="input 0"):
        """A quantized operand must carry the same scale and zeroPoint as Info ref_info
        (operand `ref`)."""
        o = self.operand(where, idx)
        if o.type in C.QUANT_TYPES and (o.scale != ref_info.scale or o.zp != ref_info.zp):
            with self.prepare_rule():
                self.fail(f"{where} {idx} must have the scale and zeroPoint of {ref} ({ref_info.scale}, "
                          f"{ref_info.zp}), got ({o.scale}, {o.zp}): the same scale and zeroPoint as {ref} "
                          f"is required")

    def like(self, where, idx, src, what=None, ref="input 0"):
        """Operand has the type of Info src (operand `ref`) and, quantized, its scale and zeroPoint."""
        self.same_type(where, idx, src.type, what, ref)
        self.same_quant(where, idx, src, ref)

    def fixed_quant(self, idx, scale, zp):
        o = self.outs[idx]
        if o.scale != scale or o.zp != zp:
            with self.prepare_rule():
                self.fail(f"output {idx} must have scale {scale} and zeroPoint {zp}, got {o.scale} and {o.zp}")

    def fuse(self, idx, int_type=False):
        """Input idx is an INT32 FuseCode (value checked once known); FUSED_NONE only for
        TENSOR_INT32 operations (int_type)."""
        self.types("input", idx, (C.INT32,), "fused activation")
        f = self.scalar_value(idx)
        if f is None:
            return
        with self.at_execution():           # Android's kernels check the value
            if f not in (C.FUSED_NONE, C.FUSED_RELU, C.FUSED_RELU1, C.FUSED_RELU6):
                self.fail(f"input {idx} (fused activation) must be a FuseCode 0..3, got {f}")
            if int_type and f != C.FUSED_NONE:
                self.fail(f"input {idx} (fused activation) must be FUSED_NONE (0) for TENSOR_INT32, got {f}")

    def scalar_value(self, idx):
        """Value of a constant scalar input, or None when not known (yet)."""
        return scalar(self.ins[idx])


class _AtExecution:
    """``with sig.at_execution():`` -- see Sig.at_execution."""
    __slots__ = ("sig",)

    def __init__(self, sig):
        self.sig = sig

    def __enter__(self):
        return self.sig

    def __exit__(self, etype, exc, tb):
        if etype is None or not issubclass(etype, NNError) or exc.code != C.BAD_DATA or strict():
            return False
        if self.sig.deferred is None:
            self.sig.deferred = exc.reason
        return True


class _Now:
    """A context that changes nothing: the checks in it fail at once."""
    __slots__ = ()

    def __enter__(self):
        return None

    def __exit__(self, etype, exc, tb):
        return False


_NOW = _Now()
AT_EXECUTION = "checked at execution, as Android does"


def _hidden(info, dims=False, value=False):
    """info with its dimensions (unknown rank) and / or its value hidden."""
    return Info(info.type, None if dims else info.dims, info.scale, info.zp, info.channel,
                None if value else info.value, info.omitted, info.index)


def check_operation(op, ins, outs):
    """Validate one operation as Android 14 does: (minimum feature level, deferred reason).

    Android's ``validate()`` (addOperation, Model_finish) sees the operands' types and
    shapes but neither the values of constants nor, in effect, the outputs' shapes (it checks
    the outputs' types only); the rules involving those are checked when the driver prepares
    the operation.  So ``op.validate`` runs first with constant values and the outputs'
    dimensions hidden (unknown): what fails there fails now (BAD_DATA).  It then runs again
    with everything known, inside ``at_execution``: what fails only then is deferred to the
    computation (or, under NNAPI_PY_STRICT=1, fails now).  Referenced models (IF, WHILE)
    stay visible: Android checks them in validate()."""
    hide_out = not op.validates_outputs and any(o.dims is not None for o in outs)
    hide_in = any(i.value is not None and i.type != C.MODEL for i in ins)
    first = Sig(op, [_hidden(i, value=True) if i.value is not None and i.type != C.MODEL else i for i in ins],
                [_hidden(o, dims=True) for o in outs] if hide_out else outs)
    level = op.validate(first) or 1
    if first.deferred is None and (hide_out or hide_in):
        full = Sig(op, ins, outs)
        with full.at_execution():
            level = op.validate(full) or 1
        first.deferred = full.deferred
    return level, first.deferred


def deferred_failure(reason):
    """The error every computation of a compilation with a deferred check returns."""
    return NNError(C.OP_FAILED, f"{reason}: {AT_EXECUTION}")


class Op:
    name = "?"       # OperationCode name without ANEURALNETWORKS_; the code is looked up
    code = -1
    # indices of tensor inputs whose *values* determine output shapes or the kernel
    value_inputs = ()
    # zero-sized inputs allowed (FL3+): kernels must cope with empty arrays; otherwise a
    # zero-sized input at execution is OP_FAILED (as the reference runtime does)
    allow_zero_sized = False
    # input positions that may be omitted (NULL); None = not declared (no generic check)
    optional_inputs = ()         # positions that may be omitted (NO_VALUE / a NULL input); all others are required

    def may_omit(self, pos, n_inputs, type_code):
        """Whether input pos may be omitted: a declared optional position, or the trailing
        optional NCHW layout flag (a BOOL last input: omitted means NHWC, as documented)."""
        return pos in self.optional_inputs or (pos == n_inputs - 1 and pos > 0 and type_code == C.BOOL)
    # control flow (IF/WHILE): the plan calls execute(node, inputs, deadline) -> outputs
    control = False
    # why no device runs this operation (OEM_OPERATION): accepted in a model, getSupported...
    # reports it unsupported and Compilation_finish fails with this reason (BAD_DATA)
    unsupported = None
    # Android's validate() itself checks the outputs' ranks and quantization against the inputs
    # (PACK, REVERSE, MIRROR_PAD): those rules fail at addOperation instead of at execution
    validates_outputs = False
    # more inputs / outputs than any signature of the operation has (None: a variadic list,
    # bounded by MAX_OPERATION_OPERANDS): addOperation rejects longer lists before it reads them
    max_inputs = 64
    max_outputs = 8

    def fuse_input(self, ins):
        """Position of this operation's FuseCode input for these input Infos, or None when it
        has none.  The plan folds a following RELU / RELU1 / RELU6 into it at compilation."""
        return None

    def bias_to_pass_on(self, ins):
        """(position of a constant float32 per-channel bias input, NCHW?) when this operation
        only adds that bias to its per-channel sums (no activation after it), so a following
        operation may absorb it (the plan's bias folding); None otherwise."""
        return None

    def absorb_bias(self, ins, bias, nchw):
        """This operation's own bias with `bias` (per channel of its input 0, in the layout
        nchw) added to that input folded in, as a new float32 array, when it is linear in
        input 0 with no padding; None when it cannot."""
        return None

    def view_of(self, ins, outs):
        """For an operation whose every output is a part of input 0 (or all of it) in another
        shape: per output the numpy index selecting it (out = in[index].reshape(out's shape)),
        for these input and output Infos (shapes known); None otherwise.  The plan hands such
        outputs on as views of the input where they are contiguous (no kernel runs)."""
        return None

    def validate(self, sig):
        raise NotImplementedError

    def infer(self, ins):
        raise NotImplementedError

    def build(self, ins, outs):
        raise NotImplementedError


class Runtime:
    """What the runtime layer lends to operations that run whole models (IF, WHILE).

    plan.py fills these in when it is imported, so an operation never imports the runtime
    (layers import downward only)."""
    make_plan = None        # model -> compiled Plan
    model_type = None       # the Model class (a MODEL operand holds one)


def register(cls):
    """Class decorator: instantiate and register; the code comes from the name."""
    op = cls()
    op.code = C.OPERATION_CODES[op.name]
    if op.code in OPS:
        raise RuntimeError(f"operation code {op.code} registered twice")
    OPS[op.code] = op
    return cls


def register_variants(base, namespace, rows):
    """Table-driven registration: for each row (class name, attributes) a subclass of base with those
    attributes, registered and bound in namespace (a module's globals(), so it stays importable by name)."""
    for cls_name, attrs in rows:
        cls = type(cls_name, (base,), {"__module__": namespace["__name__"], "__qualname__": cls_name, **attrs})
        namespace[cls_name] = register(cls)


def value_error(msg, at_runtime):
    """Value-dependent errors: BAD_DATA while compiling, OP_FAILED while executing."""
    return NNError(C.OP_FAILED if at_runtime else C.BAD_DATA, msg)


class PoolBuffer(np.ndarray):
    """The memory a plan's temporaries are views of (Plan.take_arena): an array whose base is
    one lives as long as its arena, so a kernel may keep views of it from run to run."""


def kept_array(a):
    """True when views of a may be kept between runs: a kernel's own array (it owns its
    data) or a plan temporary.  Never a caller's input or output (a view of user memory,
    which the next run may replace and which must not be kept alive)."""
    return a.flags.owndata or type(a.base) is PoolBuffer
