"""The operation registry: what every operation module provides and how it is found.

An operation is one class in one module under nnapi_py/ops/, registered with @register.
It provides three things:

* ``validate(sig)`` -- the signature check done at ANeuralNetworksModel_addOperation (types,
  counts, ranks, quantization rules) and again at Model_finish with constant values known.
  It fails through ``sig.fail(...)`` (BAD_DATA, reason names the op and operand) and
  returns the minimum feature level (1..8) the signature needs.
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
from ..errors import NNError, bad_data

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


class Sig:
    """What validate() sees: the operation's operand Infos, plus failure helpers."""
    __slots__ = ("op", "ins", "outs")

    def __init__(self, op, ins, outs):
        self.op = op
        self.ins = ins
        self.outs = outs

    def fail(self, msg):
        raise bad_data(f"{self.op.name}: {msg}")

    # ---- common checks -------------------------------------------------------------
    def count(self, n_in, n_out):
        """n_in: int or collection of allowed counts."""
        allowed = (n_in,) if isinstance(n_in, int) else tuple(n_in)
        if len(self.ins) not in allowed:
            self.fail(f"expected {' or '.join(map(str, allowed))} inputs, got {len(self.ins)}")
        if len(self.outs) != n_out:
            self.fail(f"expected {n_out} output{'s' if n_out != 1 else ''}, got {len(self.outs)}")

    def types(self, where, idx, allowed):
        ops = self.ins if where == "input" else self.outs
        t = ops[idx].type
        if t not in allowed:
            names = ", ".join(C.TYPE_NAMES.get(a, str(a)) for a in allowed)
            self.fail(f"{where} {idx} has type {C.TYPE_NAMES.get(t, t)}, expected {names}")
        return t

    def same_type(self, where, idx, t):
        ops = self.ins if where == "input" else self.outs
        if ops[idx].type != t:
            self.fail(f"{where} {idx} has type {C.TYPE_NAMES.get(ops[idx].type)}, "
                      f"expected {C.TYPE_NAMES.get(t)} (same as input 0)")

    def rank_between(self, where, idx, lo, hi):
        ops = self.ins if where == "input" else self.outs
        r = ops[idx].rank
        if r is not None and r != 0 and not lo <= r <= hi:
            self.fail(f"{where} {idx} has rank {r}, expected {lo}..{hi}")

    def same_quant(self, where, idx, ref):
        """Output (or input) must carry the same scale and zeroPoint as Info ref."""
        ops = self.ins if where == "input" else self.outs
        o = ops[idx]
        if o.type in C.QUANT_TYPES and (o.scale != ref.scale or o.zp != ref.zp):
            self.fail(f"{where} {idx} must have the same scale and zeroPoint as input 0 "
                      f"({ref.scale}, {ref.zp}), got ({o.scale}, {o.zp})")

    def fixed_quant(self, idx, scale, zp):
        o = self.outs[idx]
        if o.scale != scale or o.zp != zp:
            self.fail(f"output {idx} must have scale {scale} and zeroPoint {zp}, got {o.scale} and {o.zp}")

    def scalar_value(self, idx):
        """Value of a constant scalar input, or None when not known (yet)."""
        v = self.ins[idx].value
        return None if v is None else v.item() if hasattr(v, "item") else v


class Op:
    name = "?"       # OperationCode name without ANEURALNETWORKS_; the code is looked up
    code = -1
    # indices of tensor inputs whose *values* determine output shapes or the kernel
    value_inputs = ()
    # zero-sized inputs allowed (FL3+): kernels must cope with empty arrays; otherwise a
    # zero-sized input at execution is OP_FAILED (as the reference runtime does)
    allow_zero_sized = False
    # input positions that may be omitted (NULL); None = not declared (no generic check)
    optional_inputs = None
    # control flow (IF/WHILE): the plan calls execute(node, inputs, deadline) -> outputs
    control = False

    def validate(self, sig):
        raise NotImplementedError

    def infer(self, ins):
        raise NotImplementedError

    def build(self, ins, outs):
        raise NotImplementedError


def register(cls):
    """Class decorator: instantiate and register; the code comes from the name."""
    op = cls()
    op.code = C.OPERATION_CODES[op.name]
    if op.code in OPS:
        raise RuntimeError(f"operation code {op.code} registered twice")
    OPS[op.code] = op
    return cls


def value_error(msg, at_runtime):
    """Value-dependent errors: BAD_DATA while compiling, OP_FAILED while executing."""
    return NNError(C.OP_FAILED if at_runtime else C.BAD_DATA, msg)
