"""The importer's shared layer: what every mapping module (map_*.py) builds on.

* `maps(...)`: the registry.  A mapping module declares, per builtin, the function that lowers
  it, the NNAPI feature level it needs at least, and the cases the TFLite NNAPI delegate accepts
  only from some level on (`Rule`s: "int8 tensors need feature level 4").
* `Ctx`: one mapping in progress -- the tensors, the NNAPI model being built, the target feature
  level; operand creation, constants, scalar options, fused activations, emitting operations.
* `decide(ctx, node)`: whether a node can be mapped at ctx.level, and if not, why.

A mapping module imports this module (and nnapi_py.nn, numpy), never a sibling mapping module
(tests/test_layering.py checks).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import nn

# Android SDK level <-> NNAPI feature level (the delegate speaks SDK levels: kMinSdkVersionForNNAPI 27,
# ...NNAPI11 28, ...NNAPI12 29, ...NNAPI13 30, kNNAPIRuntimeFeatureLevel5 31, then 1000006, 1000007, 1000008).
SDK_OF_LEVEL = {1: 27, 2: 28, 3: 29, 4: 30, 5: 31, 6: 1000006, 7: 1000007, 8: 1000008}
ANDROID_OF_LEVEL = {1: "Android 8.1", 2: "Android 9", 3: "Android 10", 4: "Android 11", 5: "Android 12",
                    6: "Android 13", 7: "Android 14", 8: "Android 15"}
FLOAT32, INT32 = nn.float32, nn.int32
NEVER = 99                                  # a Rule level no release reaches: the delegate never accepts it

FUSE = {0: 0, 1: 1, 2: 2, 3: 3}             # TFLite NONE, RELU, RELU_N1_TO_1, RELU6 -> NNAPI FuseCode
PADDING = {0: 1, 1: 2}                      # TFLite SAME/VALID -> NNAPI PADDING_SAME/VALID


# The newest TFLite op version of each builtin the delegate accepts (ExpectMaxOpVersion /
# ExpectOpVersion in Validate; MUL: 2 without a chosen accelerator). nnapi_py looks at the actual
# types and options instead, so this counts only in the delegate's view (decide(delegate=True)).
DELEGATE_MAX_VERSION = {
    "ABS": 1, "ADD": 2, "ARG_MAX": 2, "ARG_MIN": 2, "AVERAGE_POOL_2D": 2, "BATCH_MATMUL": 2, "BATCH_TO_SPACE_ND": 2,
    "BIDIRECTIONAL_SEQUENCE_LSTM": 1, "CAST": 1, "CONCATENATION": 2, "CONV_2D": 5, "COS": 1, "DEPTHWISE_CONV_2D": 3,
    "DEQUANTIZE": 2, "DIV": 1, "ELU": 1, "EMBEDDING_LOOKUP": 1, "EQUAL": 2, "EXP": 1, "EXPAND_DIMS": 1, "FILL": 1,
    "FLOOR": 1, "FULLY_CONNECTED": 5, "GATHER": 2, "GREATER": 2, "GREATER_EQUAL": 2, "HASHTABLE_LOOKUP": 1,
    "L2_NORMALIZATION": 2, "L2_POOL_2D": 1, "LEAKY_RELU": 1, "LESS": 2, "LESS_EQUAL": 2,
    "LOCAL_RESPONSE_NORMALIZATION": 1, "LOG": 1, "LOGICAL_AND": 1, "LOGICAL_NOT": 1, "LOGICAL_OR": 1, "LOGISTIC": 2,
    "LOG_SOFTMAX": 1, "LSH_PROJECTION": 1, "LSTM": 3, "MAXIMUM": 3, "MAX_POOL_2D": 2, "MEAN": 2, "MINIMUM": 3,
    "MIRROR_PAD": 2, "MUL": 2, "NEG": 2, "NOT_EQUAL": 2, "PACK": 2, "PAD": 2, "PADV2": 2, "POW": 1, "PRELU": 1,
    "QUANTIZE": 2, "REDUCE_ANY": 2, "REDUCE_MAX": 2, "REDUCE_MIN": 2, "REDUCE_PROD": 1, "RELU": 2, "RELU6": 2,
    "RELU_N1_TO_1": 2, "RESHAPE": 1, "RESIZE_BILINEAR": 3, "RESIZE_NEAREST_NEIGHBOR": 3, "REVERSE_V2": 3, "RNN": 1,
    "RSQRT": 2, "SELECT": 2, "SIN": 1, "SLICE": 2, "SOFTMAX": 2, "SPACE_TO_BATCH_ND": 2, "SPACE_TO_DEPTH": 2,
    "SPLIT": 3, "SPLIT_V": 2, "SQRT": 1, "SQUARED_DIFFERENCE": 2, "SQUEEZE": 1, "STRIDED_SLICE": 2, "SUB": 3,
    "SUM": 1, "SVDF": 1, "TANH": 2, "TILE": 1, "TOPK_V2": 2, "TRANSPOSE": 2, "TRANSPOSE_CONV": 4,
    "UNIDIRECTIONAL_SEQUENCE_LSTM": 2, "UNIDIRECTIONAL_SEQUENCE_RNN": 1, "UNPACK": 2,
}


from .reader import MissingOperand, Unmapped  # noqa: E402,F401 (Unmapped: this node cannot be lowered)


# -- the registry -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """A case of a builtin accepted only from feature level `level` on (NEVER: not at all).
    when(ctx, node) -> bool tells whether the node is in that case; what names the case.
    beyond=True: the delegate refuses the case below `level`, but nnapi_py lowers it anyway at
    every level (the report shows it; the loader maps it).  own=True: the other way round, a
    limit of nnapi_py's that the delegate does not have (not counted in the delegate's view)."""
    level: int
    what: str
    when: Callable = field(default=lambda ctx, node: True)
    beyond: bool = False
    own: bool = False
    fails: str = ""                         # the delegate hands it to NNAPI, which fails it so (counts in both views)

    def reason(self, name):
        if self.fails:
            return f"{name}: {self.what}: {self.fails}"
        if self.level >= NEVER:
            return f"{name}: {self.what} is not supported by " + ("nnapi_py" if self.own else "the NNAPI delegate")
        return f"{name}: {self.what} needs feature level {self.level} ({ANDROID_OF_LEVEL.get(self.level, '?')})"


@dataclass
class Entry:
    name: str                               # the builtin (CUSTOM_<code> for a custom operator)
    fn: Callable                            # fn(ctx, node) -> str: the NNAPI operation(s) it became
    level: int = 1                          # the feature level the mapping needs at least
    rules: Tuple[Rule, ...] = ()
    delegate: bool = True                   # whether TFLite's NNAPI delegate maps this builtin at all
    module: str = ""

    def reasons(self, ctx, node, delegate=False) -> List[str]:
        """Why node cannot be mapped at ctx.level ([] when it can).  delegate=True: as the
        delegate decides (rules marked beyond count too)."""
        out = []
        top = DELEGATE_MAX_VERSION.get(self.name)
        if delegate and top is not None and node.version > top:
            out.append(f"{self.name}: op version {node.version} is above the delegate's {top}")
        if ctx.level < self.level:
            out.append(f"{self.name} needs feature level {self.level} ({ANDROID_OF_LEVEL.get(self.level, '?')})")
        for r in self.rules:
            counts = not r.own if delegate else not r.beyond
            if counts and ctx.level < r.level and _applies(r, ctx, node):
                out.append(r.reason(self.name))
        return out


def _applies(rule, ctx, node):
    try:
        return bool(rule.when(ctx, node))
    except (Unmapped, IndexError, KeyError, AttributeError, TypeError, ValueError, ZeroDivisionError, OverflowError):
        return False                        # an odd node: its mapper says why it cannot be mapped


REGISTRY: Dict[str, Entry] = {}


def maps(*names: str, level: int = 1, rules: Sequence[Rule] = (), delegate: bool = True):
    """Decorator: fn(ctx, node) lowers each of the builtins `names`.

        @maps("BATCH_MATMUL", level=6, rules=[Rule(NEVER, "adj_x", lambda c, n: n.options(...).AdjX())])
        def batch_matmul(ctx, node): ...
    """
    def deco(fn):
        for n in names:
            REGISTRY[n] = Entry(n, fn, level, tuple(rules), delegate, fn.__module__.rsplit(".", 1)[-1])
        return fn
    return deco


def decide(ctx, node, delegate=False) -> Tuple[Optional[Entry], List[str]]:
    """(the node's Entry, the reasons it cannot be mapped at ctx.level) -- no reasons: mappable."""
    e = REGISTRY.get(node.name)
    if e is None:
        if node.name.startswith("CUSTOM_"):
            return None, [f"custom operator {node.name[7:]!r}: NNAPI has no operation for it (the delegate maps no "
                          f"custom operators)"]
        if node.name.startswith("BUILTIN_"):
            return None, [f"builtin code {node.name[8:]} is not an operator of the TFLite schema nnapi_py reads "
                          f"(a model for a newer TFLite?)"]
        return None, [f"{node.name}: no NNAPI mapping for this builtin"]
    reasons = e.reasons(ctx, node, delegate)
    # int8 activations: NNAPI's TENSOR_QUANT8_ASYMM_SIGNED is feature level 4. Below, the delegate
    # converts them to uint8 (zero point + 128) for most operations; nnapi_py does not (yet), so this
    # rule is nnapi_py's own and does not count in the delegate's view.
    if not delegate and ctx.level < INT8.level and INT8 not in e.rules and _applies(INT8, ctx, node):
        reasons.append(INT8.reason(node.name))
    if node.name in SAME_QUANT and _applies(SAME_QUANT_RULE, ctx, node):
        reasons.append(SAME_QUANT_RULE.reason(node.name))
    return e, reasons


# -- predicates the rules use ---------------------------------------------------------------------------
F32, F16, I32, U8, I8, BOOL = np.float32, np.float16, np.int32, np.uint8, np.int8, np.bool_
QUANT = (U8, I8)
FLOAT = (F32, F16)


def axis_in(value, rank, what="axis"):
    """A TFLite axis (-rank <= axis < rank) as a non-negative one; Unmapped outside that range
    (a scalar has none): TFLite's kernels refuse it, no modulo makes it another axis."""
    a = int(value)
    if not -rank <= a < rank:
        raise Unmapped(f"{what} {a} is outside the {rank} dimension(s) of its tensor")
    return a % rank


def tensor_of(ctx, node, which=0, out=False):
    ks = node.outs if out else node.ins
    return ctx.tensors[ks[which]] if which < len(ks) and ks[which] >= 0 else None


def of_type(*dtypes, which=0, out=False):
    """A `when` predicate: input (output) `which` has one of dtypes."""
    ds = {np.dtype(d) for d in dtypes}

    def when(ctx, node):
        t = tensor_of(ctx, node, which, out)
        return t is not None and t.dtype is not None and np.dtype(t.dtype) in ds
    return when


def not_of_type(*dtypes, which=0, out=False):
    """A `when` predicate: input (output) `which` has none of dtypes."""
    is_one = of_type(*dtypes, which=which, out=out)
    return lambda ctx, node: tensor_of(ctx, node, which, out) is not None and not is_one(ctx, node)


def option(cls, getter, test=bool):
    """A `when` predicate on the node's options: test(options.getter())."""
    def when(ctx, node):
        o = node.options(cls)
        return o is not None and test(getattr(o, getter)())
    return when


def rank_above(n, which=0, out=False):
    return lambda ctx, node: len(tensor_of(ctx, node, which, out).shape) > n


def not_constant(which):
    return lambda ctx, node: ctx.tensors[node.ins[which]].value is None


def hybrid(ctx, node):
    """Float activations with quantized (int8 / uint8) constant weights (input 1)."""
    x, w = ctx.tensors[node.ins[0]], ctx.tensors[node.ins[1]]
    return x.dtype in FLOAT and w.dtype in QUANT


def all_of(*preds):
    return lambda ctx, node: all(p(ctx, node) for p in preds)


def uses_int8_activations(ctx, node):
    """An int8 tensor other than a symmetric constant weight: TENSOR_QUANT8_ASYMM_SIGNED."""
    for k in list(node.ins) + list(node.outs):
        t = ctx.tensors[k] if k >= 0 else None
        if t is not None and t.dtype == np.int8 and not (t.value is not None and (t.scales or k in ctx.filters)):
            return True
    return False


INT8 = Rule(4, "int8 (TENSOR_QUANT8_ASYMM_SIGNED) tensors", uses_int8_activations, own=True)

# Builtins whose NNAPI operation(s) require a quantized output to keep the scale and zero point of the data
# input (Android checks it when the operation is prepared, at execution: "output 0 must have the scale and
# zeroPoint of input 0"): builtin -> the data input.  TFLite's kernels for most of them move the stored
# integers without requantizing (or requantize, for RELU / pooling); the delegate validates none of this and
# hands them to NNAPI, which fails them.  With another scale or zero point such an operator stays on the CPU,
# in nnapi_py and in the delegate's view.  (MEAN is requantized instead, as the delegate does:
# map_reduce.py.)
SAME_QUANT = dict.fromkeys(
    ("RELU", "RELU6", "RELU_N1_TO_1", "MAX_POOL_2D", "AVERAGE_POOL_2D", "REDUCE_MAX", "REDUCE_MIN",
     "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "GATHER", "SPACE_TO_DEPTH", "DEPTH_TO_SPACE",
     "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", "RESHAPE", "TRANSPOSE", "PAD", "PADV2", "SLICE", "TILE",
     "SQUEEZE", "EXPAND_DIMS", "TOPK_V2", "SPLIT_V", "STRIDED_SLICE", "UNPACK", "PACK", "BROADCAST_TO",
     "MIRROR_PAD", "REVERSE_V2"), 0)
SAME_QUANT["SPLIT"] = 1                     # SPLIT(axis, value)


def other_output_quantization(ctx, node):
    """A quantized output whose scale or zero point differs from the data input's."""
    x = tensor_of(ctx, node, SAME_QUANT.get(node.name, 0))
    if x is None or x.dtype not in QUANT:
        return False
    for k in node.outs:
        y = ctx.tensors[k] if k >= 0 else None
        if y is not None and y.dtype in QUANT and (y.scale != x.scale or y.zp != x.zp):
            return True
    return False


SAME_QUANT_RULE = Rule(NEVER, "a quantized output with another scale / zero point than its input",
                       other_output_quantization,
                       fails="NNAPI requires them equal; the delegate would hand it over and Android fail it at "
                             "execution")
QUANTIZED = Rule(3, "quantized tensors", of_type(U8, I8))
INT32 = Rule(4, "int32 tensors", of_type(I32))


# -- the mapping context ------------------------------------------------------------------------------
class Ctx:
    """One subgraph being lowered into one NNAPI model at a target feature level."""

    def __init__(self, graph, nn_model, level: int):
        self.graph = graph
        self.tensors = graph.tensors
        self.nn_model = nn_model
        self.level = level
        self.filters = set()                # constant int8 tensors used as conv filters (per-channel type)
        # resource variables of streaming models (map_state.py)
        self.handles: Dict[int, str] = {}
        self.state_in: Dict[str, int] = {}
        self.state_out: Dict[str, int] = {}
        self.initial_state: Dict[str, np.ndarray] = {}

    # operands
    def type(self, t) -> nn.OperandType:
        if t.dtype == np.float32:
            return nn.float32
        if t.dtype == np.float16:
            return nn.float16
        if t.dtype == np.int32:
            # a bias of a per-channel filter has scale 0 in NNAPI (its scales are input x filter)
            return nn.OperandType(nn.int32.code, 0.0 if t.scales else t.scale, 0)
        if t.dtype == np.bool_:
            return nn.bool8
        if t.dtype == np.uint8:
            return nn.quant8_asymm(t.scale, t.zp)
        if t.dtype == np.int8:
            if t.scales is not None or (t.value is not None and t.zp == 0 and t.index in self.filters):
                return nn.quant8_symm_per_channel(t.scales or [t.scale] * t.shape[t.qdim], t.qdim)
            return nn.quant8_asymm_signed(t.scale, t.zp)
        raise Unmapped(f"tensor {t.name!r} of type {t.type_name} has no NNAPI operand type here")

    def operand(self, k):
        """The NNAPI operand of tensor k (a constant is created on first use)."""
        t = self.tensors[k]
        if t.operand is None:
            if t.value is None:
                raise Unmapped(f"tensor {t.name!r} is used before any operator produces it")
            if 0 in np.shape(t.value):
                raise Unmapped(f"tensor {t.name!r} is a constant with no elements (shape {list(t.shape)}): "
                               "NNAPI has no operand for it")
            t.operand = self.nn_model.constant(np.ascontiguousarray(t.value), self.type(t), name=t.name)
        return t.operand

    def out(self, k):
        """(type, shape) of tensor k as an operation output."""
        t = self.tensors[k]
        return (self.type(t), t.shape)

    def const(self, k, what):
        """The constant value of tensor k (Unmapped naming `what` when it is not constant)."""
        v = self.tensors[k].value
        if v is None:
            raise Unmapped(f"{what} must be constant")
        return v

    def ivec(self, values):
        """A constant TENSOR_INT32 vector."""
        return self.nn_model.constant(np.asarray(values, np.int32).reshape(-1), nn.int32)

    def constant(self, value, type=None):
        return self.nn_model.constant(value, type)

    def op(self, nnapi_op, *ins, outputs=None, names=()):
        """An intermediate NNAPI operation (not bound to a tensor)."""
        return self.nn_model.op(nnapi_op, *ins, outputs=outputs, names=names)

    def emit(self, nnapi_op, ins, out_k, extra=()):
        """One NNAPI operation producing tensor out_k."""
        o = self.nn_model.op(nnapi_op, *ins, *extra, outputs=[self.out(out_k)], names=[self.tensors[out_k].name])
        self.tensors[out_k].operand = o
        return nnapi_op

    def bind(self, out_k, operand):
        """Tensor out_k is this (already built) operand."""
        self.tensors[out_k].operand = operand

    def bias(self, node, n_out):
        """The bias operand of a conv / fully-connected node (zeros when absent)."""
        ins = node.ins
        if len(ins) > 2 and ins[2] >= 0:
            return self.operand(ins[2])
        return self.nn_model.constant(np.zeros(n_out, np.float32), nn.float32)

    def scalar(self, k, what):
        """The single value of constant tensor k as a Python number."""
        v = self.const(k, what).reshape(-1)
        if v.size != 1:
            raise Unmapped(f"{what} must be a single value")
        return v[0].item()

    def float_weight(self, k):
        """Weights k as a float32 operand: a quantized constant (hybrid model: int8 weights, float
        activations) goes through NNAPI DEQUANTIZE of the TENSOR_QUANT8_SYMM(_PER_CHANNEL)
        constant, as the NNAPI delegate does it; float weights are used as they are."""
        t = self.tensors[k]
        if t.dtype not in (np.int8, np.uint8):
            return self.operand(k)
        if t.value is None:
            raise Unmapped(f"quantized weights {t.name!r} with float activations must be constant")
        if t.operand is None:
            if t.dtype == np.int8 and t.zp == 0:
                typ = (nn.quant8_symm_per_channel(t.scales, t.qdim) if t.scales
                       else nn.quant8_symm(t.scale))
            else:
                typ = self.type(t)
            t.operand = self.nn_model.constant(np.ascontiguousarray(t.value), typ, name=t.name)
        return self.nn_model.op("DEQUANTIZE", t.operand, outputs=[(nn.float32, t.shape)])

    def optional(self, k, like=None):
        """The operand of optional input tensor k, or an omitted operand (no value) when absent."""
        if k is not None and k >= 0:
            return self.operand(k)
        return self.nn_model.omitted(self.type(like) if like is not None else nn.float32)

    # variable tensors (the state of RNN / LSTM / SVDF layers, kept by TFLite between invocations)
    def state_input(self, k):
        """Variable tensor k as a model input "state:<name>" the model object feeds on each run
        (initially its buffer or zeros), registered once."""
        t = self.tensors[k]
        var = t.name
        if t.operand is None:
            t.operand = self.nn_model.input("state:" + var, self.type(t), t.shape)
            self.state_in[var] = k
            init = np.array(t.value) if t.value is not None else np.zeros(t.shape, t.dtype) + t.zp
            self.initial_state.setdefault(var, init.astype(t.dtype))
        return t.operand

    def state_output(self, k, operand):
        """operand is the next value of variable tensor k (a model output "state:<name>")."""
        from .reader import Tensor
        t0 = self.tensors[k]
        t = Tensor(len(self.tensors), t0.name + ":next", t0.dtype, t0.shape, t0.scale, t0.zp)
        t.operand = operand
        self.tensors.append(t)
        self.state_out[t0.name] = t.index


def fuse_code(opts):
    """The FuseCode of an options table's fused activation (Unmapped when NNAPI has none)."""
    f = FUSE.get(opts.FusedActivationFunction() if opts is not None else 0)
    if f is None:
        raise Unmapped("fused activation not supported by NNAPI")
    return f
