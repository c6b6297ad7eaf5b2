"""The compiled plan: operation order, shapes known at compile time, kernels built once,
temporaries allocated once per arena (arenas are pooled so concurrent executions of one
compilation never share a temporary; within an arena, temporaries whose lifetimes do not
overlap share memory)."""
import operator
from time import monotonic_ns as _now

import numpy as np

from . import constants as C
from .errors import NNError, bad_data, op_failed, strict
from .model import TEMP, INPUT, OUTPUT, CONST, CONST_REF, NO_VALUE, SUBGRAPH, Model
from .ops.base import Info, PoolBuffer, Runtime, MAX_TENSOR_BYTES, deferred_failure
from .event import halted, park, enter_run, leave_run
from .operand import dims_text
from . import profiling


def _compatible(declared, got):
    if declared is None:
        return True
    if len(declared) == 0 and len(got) == 0:
        return True
    if len(declared) != len(got):
        return len(declared) == 0
    return all(a == 0 or a == b for a, b in zip(declared, got))


UINT32_MAX = 0xFFFFFFFF


def size_problem(name, o, dims, itemsize):
    """Why operand `o` cannot have the shape `dims` computed for it (None if it can): a negative
    dimension or a byte size past uint32 is OP_FAILED, as Android's CPU executor fails such an
    operand ("Operand data size overflows uint32_t"); a size past MAX_TENSOR_BYTES is
    OUT_OF_MEMORY.  Python integers: no overflow while checking."""
    n = 1
    for x in dims:
        if x < 0:
            return op_failed(f"{name}: computed output shape {list(dims)} for operand {o} has a negative dimension")
        n *= x
    nbytes = n * itemsize
    if nbytes > UINT32_MAX or any(x > UINT32_MAX for x in dims):
        return op_failed(f"{name}: computed output shape {list(dims)} for operand {o} needs {nbytes} bytes, "
                         f"more than an operand can hold (2^32 - 1, as in Android's runtime)")
    if nbytes > MAX_TENSOR_BYTES:
        return NNError(C.OUT_OF_MEMORY, f"{name}: computed output shape {list(dims)} for operand {o} needs "
                                        f"{nbytes} bytes, more than one tensor may take ({MAX_TENSOR_BYTES} bytes, "
                                        f"NNAPI_PY_MAX_TENSOR_BYTES)")
    return None


def _itemsize(info):
    dt = C.DTYPES.get(info.type)
    return 1 if dt is None else np.dtype(dt).itemsize


def _new_pool(nbytes):
    """The memory of one group of shared temporaries, uninitialised (like np.empty): a
    PoolBuffer, so kernels know arrays made over it may be kept in their views."""
    return PoolBuffer((nbytes,), np.uint8)


def _set_constant_input(infos, tmpl, node, pos, type_code, value):
    """A fold's rewiring: input pos of node becomes a new constant operand (type_code, value);
    the model's own operands are untouched."""
    idx = len(infos)
    infos.append(Info(type_code, tuple(np.shape(value)), 0.0, 0, None, value, False, idx))
    tmpl.append(value)
    node.ins = tuple(idx if j == pos else i for j, i in enumerate(node.ins))


def _to_fp16(a):
    """A float32 array rounded to float16 values (still float32)."""
    return np.asarray(a, np.float32).astype(np.float16).astype(np.float32)


def _in_fp16(kernel, round_ins, round_outs):
    """The kernel of an operation on a float16 partition (a device with fp16 numerics running a
    relaxed model): the float32 inputs listed (model inputs, results of other partitions) are
    rounded to float16 first, its float32 results after.  The kernel computes in float32 in
    between: float32 accumulation of float16 values (docs/decisions.md)."""
    def run(ia, oa):
        if round_ins:
            ia = list(ia)
            for k in round_ins:
                if ia[k] is not None:
                    ia[k] = _to_fp16(ia[k])
        kernel(ia, oa)
        for k in round_outs:
            oa[k][...] = oa[k].astype(np.float16)
    return run


# ---- constant folding -------------------------------------------------------------------------
FOLD_FACTOR = 4                 # folded results kept: at most this many times the model's constant bytes ...
FOLD_FLOOR = 16 << 20           # ... or this many bytes, whichever is more
NEVER_FOLDED = frozenset(("RANDOM_MULTINOMIAL",))       # a draw per computation, not a value of its inputs


class _ConstantFolds:
    """Constant work once: an operation whose inputs are all constants (the model's, or results
    folded before it) is computed at compilation, by the kernel the plan would run, and its
    results become constants (new operands; the readers are rewired to them, the model's own
    operands are untouched).  The same bits as running it (the same kernel on the same values),
    so NNAPI_PY_STRICT=1 folds too.  Not folded: control flow (IF / WHILE), RANDOM_MULTINOMIAL,
    an operation with a check deferred to execution, one writing a model output (the caller's
    buffer is written on every computation: the operation runs, on its folded inputs), one with
    a scalar or zero-sized result, one whose computation fails here (it is left to run, so the
    error comes at execution, where Android reports it), and one whose results would take the
    folded results kept past max(FOLD_FACTOR x the model's constant bytes, FOLD_FLOOR): 4x is
    what dequantizing 8-bit weights to float32 takes, the fold this is for.  A folded result
    read only by operations folded after it is released (it does not count against the bound).
    early() folds before the plan's bias folding, so a hybrid model's 1x1 convolutions take a
    depthwise bias as the float model's do (that fold, off under NNAPI_PY_STRICT=1, rounds within
    float32); the shape pass folds the operations of float16 partitions (after their constants
    are rounded) and whatever reads them."""

    def __init__(self, model, infos, tmpl, nodes):
        self.infos, self.tmpl = infos, tmpl
        self.alias = {}                 # model operand computed here -> its constant operand
        self.made = set()               # those constant operands
        self.outputs = frozenset(model.outputs)
        self.nodes = nodes
        self.uses = None                # operand -> readers among the operations not folded (yet),
        self.budget = None              # and the bound: counted at the first candidate (most plans have none)
        self.held = 0                   # bytes of folded results still read by an operation
        self.folded = []                # the nodes computed here
        self.by_type = {}
        self.over = 0                   # operations not folded for the memory bound
        self.failed = 0                 # ... whose computation failed here (left to execution)
        self.tried = set()
        self.in_shape_pass = False      # after early(): folds of float16 operations, and what reads them
        self.late = False

    def early(self, plan):
        """Fold what the model's constants alone determine, before the plan's other folds look
        at values (a 1x1 convolution absorbs a bias only when its filter is known: a hybrid
        model's filters are DEQUANTIZE results).  Operations on float16 partitions wait for the
        shape pass (their constants are rounded first); what fails to prepare here is left to it."""
        infos = self.infos
        shapes = {}
        for node in plan.nodes:
            if self.alias:
                node.ins = tuple([self.alias.get(i, i) for i in node.ins])
            if node.fp16 or node.deferred or node.op.control or node.name in NEVER_FOLDED:
                continue
            ins = []
            for i in node.ins:
                inf = infos[i]
                if inf.omitted:
                    ins.append(inf)
                    continue
                if inf.value is None or inf.type == C.MODEL:
                    break
                ins.append(plan._info_with(inf, () if inf.type in C.SCALAR_TYPES else tuple(np.shape(inf.value))))
            else:
                raw = []
                try:
                    kernel = plan._prepare(node, ins, infos, shapes, raw)
                except NNError:         # the shape pass says it where Android does
                    continue
                if kernel is not None:
                    self.try_fold(node, raw[0], shapes)
        if self.folded:
            drop = {id(nd) for nd in self.folded}
            plan.nodes = [nd for nd in plan.nodes if id(nd) not in drop]
        self.in_shape_pass = True

    def reads_folded(self, node):
        return any(i in self.made for i in node.ins)

    def try_fold(self, node, kernel, shapes):
        infos, tmpl = self.infos, self.tmpl
        if node.name in NEVER_FOLDED or node.op.control or id(node) in self.tried:
            return
        self.tried.add(id(node))            # once: the shape pass does not try again what early() did
        for i in node.ins:
            inf = infos[i]
            if inf.omitted:
                continue
            v = tmpl[i]
            if v is None or inf.type == C.MODEL:
                return
            if not node.op.allow_zero_sized and isinstance(v, np.ndarray) and v.ndim and v.size == 0:
                return                          # fails at execution, as Android's does
        need = 0
        for o in node.outs:
            if o in self.outputs or infos[o].type in C.SCALAR_TYPES or infos[o].type not in C.DTYPES:
                return
            shape = shapes.get(o)
            if shape is None:
                return
            nbytes = int(np.prod(shape, dtype=np.int64)) * _itemsize(infos[o])
            if nbytes == 0:
                return
            need += nbytes
        if self.budget is None:
            self._count()
        # folded inputs read by this operation only are released once it is folded
        freed = sum(tmpl[i].nbytes for i in set(node.ins) if i in self.made and self.uses[i] == node.ins.count(i))
        if self.held - freed + need > self.budget:
            self.over += 1
            return
        ia = [None if infos[i].omitted else tmpl[i] for i in node.ins]
        try:
            oa = [np.empty(shapes[o], infos[o].dtype) for o in node.outs]
            with np.errstate(all="ignore"):
                kernel(ia, oa)
        except Exception:       # NNError, a kernel's failure, memory: the operation runs at execution
            self.failed += 1
            return
        for o, a in zip(node.outs, oa):
            a.flags.writeable = False
            k = len(infos)
            inf = infos[o]
            infos.append(Info(inf.type, tuple(a.shape), inf.scale, inf.zp, inf.channel, a, False, k))
            tmpl.append(a)
            shapes[k] = tuple(a.shape)
            self.alias[o] = k
            self.made.add(k)
            self.uses[k] = self.uses.pop(o, 0)
        self.held += need
        for i in node.ins:                      # folded inputs read by no one else any more
            if i in self.made:
                self.uses[i] -= 1
                if self.uses[i] == 0:
                    self._release(i)
        self.folded.append(node)
        self.late = self.late or self.in_shape_pass
        self.by_type[node.name] = self.by_type.get(node.name, 0) + 1

    def _count(self):
        """The readers of every operand (before any fold), and the memory bound."""
        uses = {}
        get = uses.get
        for node in self.nodes:
            for i in node.ins:
                uses[i] = get(i, 0) + 1
        self.uses = uses
        const = 0
        for inf in self.infos:
            v = inf.value
            if type(v) is np.ndarray:
                const += v.nbytes
        self.budget = max(FOLD_FACTOR * const, FOLD_FLOOR)

    def _release(self, k):
        self.held -= self.tmpl[k].nbytes
        self.tmpl[k] = None
        inf = self.infos[k]
        self.infos[k] = Info(inf.type, inf.dims, inf.scale, inf.zp, inf.channel, None, False, k)

    def finish(self, plan, shapes):
        """Drop the folded operations from the plan; say what was folded (the profile's report,
        NNAPI_PY_TRACE).  Returns the summary kept as Plan.constant_folds."""
        if not (self.folded or self.over or self.failed):
            return None
        drop = {id(nd) for nd in self.folded}
        if any(id(nd) in drop for nd in plan.nodes):
            plan.nodes = [nd for nd in plan.nodes if id(nd) not in drop]
        for nd in self.folded:              # no temporary for what is no longer computed
            for o in nd.outs:
                shapes.pop(o, None)
        summary = {"operations": len(self.folded), "by_type": dict(self.by_type), "bytes": self.held,
                   "not_folded_memory": self.over, "not_folded_failed": self.failed, "budget": self.budget}
        if self.folded or self.over:
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.by_type.items(), key=lambda kv: -kv[1]))
            text = (f"constant folding: {len(self.folded)} operation{'s' if len(self.folded) != 1 else ''} "
                    f"computed at compilation ({kinds or 'none'}), {self.held / 2 ** 20:.2f} MB kept as constants")
            if self.over:
                text += (f"; {self.over} not folded: past the memory bound ({self.budget / 2 ** 20:.1f} MB, "
                         f"{FOLD_FACTOR}x the model's constants or {FOLD_FLOOR >> 20} MB)")
            if self.failed:
                text += f"; {self.failed} left to run (their computation fails: reported at execution)"
            profiling.note(text)
        return summary


class Node:
    __slots__ = ("op", "ins", "outs", "kernel", "cache", "value_ins", "name", "deferred", "fp16", "round_ins",
                 "round_outs")

    def __init__(self, operation):
        self.fp16 = False
        self.round_ins = self.round_outs = ()
        self.op = operation.op
        self.name = operation.op.name
        self.ins = operation.ins
        self.outs = operation.outs
        self.kernel = None
        self.cache = {}
        self.value_ins = None
        self.deferred = operation.deferred


_BINDINGS = 64                  # bindings a plan remembers (Plan.remember_binding)


def _same(held, arrays):
    """True when held and arrays list the same objects, position by position."""
    return len(held) == len(arrays) and all(map(operator.is_, held, arrays))


class Plan:
    def __init__(self, model, fp16=()):
        """fp16: ids of the operations computed in float16 (devices.Partition.fp16_operations)."""
        self.model = model
        n = len(model.types)
        infos = [model.info(i, with_value=True) for i in range(n)]
        self.infos = infos
        self.inputs = model.inputs
        self.outputs = model.outputs
        self.nodes = [Node(o) for o in model.order]
        self.fp16 = frozenset(fp16)
        for node, o in zip(self.nodes, model.order):
            node.fp16 = id(o) in self.fp16
        for node in self.nodes:             # OEM_OPERATION: accepted in a model, run by no device
            if node.op.unsupported:
                raise bad_data(node.op.unsupported)
        # the first check that Android 14 makes at execution and that fails here (Sig.at_execution,
        # or a shape / value rule of infer / build at compilation): every computation fails with it
        self.failure = None
        # template slot list: constants converted once
        tmpl = [None] * n
        for i in range(n):
            if infos[i].value is not None:
                tmpl[i] = infos[i].value
        # model inputs feeding a non-optional operation input: omitting them is an error
        self.required_inputs = {}
        pos = {i: k for k, i in enumerate(model.inputs)}
        for node in self.nodes:
            for k, i in enumerate(node.ins):
                if i in pos and not node.op.may_omit(k, len(node.ins), infos[i].type):
                    self.required_inputs.setdefault(pos[i], f"{node.name} input {k}")
        self.folded = self._fold_activations(model, infos, tmpl)
        self.requantized = self._fold_requantize(model, infos)
        fold = _ConstantFolds(model, infos, tmpl, self.nodes)
        fold.early(self)                # before the bias folding, which needs the constants' values
        self.biases_passed_on = self._fold_biases(model, infos, tmpl)
        if self.fp16:
            self._round_to_fp16(infos, tmpl)
        for node in self.nodes:
            node.value_ins = tuple(k for k, i in enumerate(node.ins)
                                   if infos[i].type in C.SCALAR_TYPES or k in node.op.value_inputs)
        # shapes known at compile time: propagate through the graph
        shapes = {}
        for i in range(len(infos)):             # folded activations add FuseCode constants
            inf = infos[i]
            if inf.value is not None:
                shapes[i] = tuple(np.shape(inf.value)) if inf.type not in C.SCALAR_TYPES else ()
            elif i < n and model.life[i] == INPUT and (inf.known or inf.type in C.SCALAR_TYPES):
                shapes[i] = tuple(inf.dims)
        static = not any(node.op.control for node in self.nodes)
        for node in self.nodes:
            if fold.alias:                      # inputs computed at compilation: their constants
                node.ins = tuple([fold.alias.get(i, i) for i in node.ins])
            if node.op.control:
                continue
            if node.deferred:                   # its outputs stay unknown; every run fails
                self.failure = self.failure or node.deferred
                static = False
                continue
            ok = all(i in shapes or infos[i].omitted for i in node.ins)
            ok = ok and all(infos[node.ins[k]].value is not None or infos[node.ins[k]].omitted
                            for k in node.value_ins)
            if not ok:
                static = False
                continue
            ins = [self._info_with(infos[i], shapes.get(i)) for i in node.ins]
            raw = []
            try:
                node.kernel = self._prepare(node, ins, infos, shapes, raw)
            except NNError as e:
                # Android's driver checks these when it prepares the operation, at execution;
                # under NNAPI_PY_STRICT=1 at once, except where only a folded value told us
                # (unfolded, the check would be made at execution: folding changes nothing seen)
                if strict() and not fold.reads_folded(node) or e.code not in (C.BAD_DATA, C.OP_FAILED):
                    raise
                self.failure = self.failure or e.reason
                static = False
            if node.kernel is None:         # a computed size past the limits: fails at execution
                static = False              # with the reason, where Android fails it
            elif node.fp16 or fold.late:        # the rest was tried before (fold.early)
                fold.try_fold(node, raw[0], shapes)
        self.constant_folds = fold.finish(self, shapes)
        self.static = static
        self.shapes = shapes
        self.template = tmpl
        # temporaries to allocate per arena (static plans only)
        life = model.life
        self.temps = [(i, shapes[i], infos[i].dtype) for i in range(n)
                      if static and life[i] not in (INPUT, OUTPUT, CONST, CONST_REF, NO_VALUE, SUBGRAPH)
                      and i in shapes and infos[i].type in C.DTYPES]
        self._arenas = []           # free arenas (take_arena)
        self.pool_sizes, self.pool_of = self._share_temps() if static else ([], {})
        self.steps = [(nd.kernel, nd.ins, nd.outs) for nd in self.nodes] if static else None
        # where each model input / output appears in the steps' argument lists: (step, 0 for
        # inputs / 1 for outputs, position); those entries are set per run, the rest per arena
        where = {}
        for s, (_, ii, oo) in enumerate(self.steps or ()):
            for side, ops in ((0, ii), (1, oo)):
                for k, i in enumerate(ops):
                    where.setdefault(i, []).append((s, side, k))
        self.in_refs = [tuple(where.get(i, ())) for i in self.inputs]
        self.out_refs = [tuple(where.get(i, ())) for i in self.outputs]
        self.out_shapes = [shapes.get(o) for o in self.outputs]
        self.in_static = [shapes.get(i) for i in self.inputs]
        # byte sizes of fully specified model inputs/outputs (None otherwise): setter fast path
        from .operand import byte_size, fully_specified
        types, dims = model.types, model.dims
        def nbytes(i):
            d = () if types[i] in C.SCALAR_TYPES else dims[i]
            return byte_size(types[i], d) if d is not None and (d == () or fully_specified(d)) else None
        self.in_bytes = [nbytes(i) for i in self.inputs]
        self.out_bytes = [nbytes(i) for i in self.outputs]
        self.in_dims = [() if types[i] in C.SCALAR_TYPES else dims[i] for i in self.inputs]
        self.out_dims = [() if types[i] in C.SCALAR_TYPES else dims[i] for i in self.outputs]
        self.in_dtypes = [C.DTYPES.get(types[i]) for i in self.inputs]
        self.out_dtypes = [C.DTYPES.get(types[i]) for i in self.outputs]
        self.in_scalar = [types[i] in C.SCALAR_TYPES for i in self.inputs]
        self.out_scalar = [types[i] in C.SCALAR_TYPES for i in self.outputs]
        self.in_shapes = [tuple(d) if d is not None else None for d in self.in_dims]
        self.out_static_bytes = [byte_size(types[o], s) if s is not None else None
                                 for o, s in zip(self.outputs, self.out_shapes)]
        # (an execution's input and output records) -> (input views, output views, True): the
        # binding of executions whose every array is a plain view of caller memory
        # (Execution._compute), for the next execution on the same buffers
        self.bindings = {}

    def remember_binding(self, key, bound):
        b = self.bindings
        if len(b) >= _BINDINGS:
            b.clear()
        b[key] = bound

    @staticmethod
    def _prepare(node, ins, infos, shapes, raw=None):
        """Output shapes (into shapes) and the kernel of a node whose input shapes are known
        (raw: a list that gets the kernel without the profile's timing, for constant folding)."""
        out_dims = [tuple(int(x) for x in d) for d in node.op.infer(ins)]
        if any(size_problem(node.name, o, d, _itemsize(infos[o])) for o, d in zip(node.outs, out_dims)):
            return None
        outs = []
        for o, d in zip(node.outs, out_dims):
            if not _compatible(infos[o].dims, d):
                raise NNError(C.BAD_DATA, f"{node.name}: computed output shape {list(d)} for operand {o} "
                                          f"conflicts with its declared dimensions {dims_text(infos[o].dims)}")
            outs.append(infos[o].with_dims(d))
        kernel = node.op.build(ins, outs)
        for o, inf in zip(node.outs, outs):
            shapes[o] = inf.dims
        if node.fp16:
            kernel = _in_fp16(kernel, node.round_ins, node.round_outs)
        if raw is not None:
            raw.append(kernel)
        if profiling.ENABLED:
            kernel = profiling.timed(node.name, kernel, profiling.kernel_label(node.name, ins, outs))
        return kernel

    def check_runnable(self):
        """Raise the deferred failure (OP_FAILED) of a plan whose checks failed at compilation."""
        if self.failure is not None:
            raise deferred_failure(self.failure)

    _ACTIVATIONS = {"RELU": C.FUSED_RELU, "RELU1": C.FUSED_RELU1, "RELU6": C.FUSED_RELU6}

    def _uses_and_producers(self, model):
        """({operand: how many operation inputs and model outputs read it}, {operand: the
        node writing it}) of the current node list (the folds' common view of the graph)."""
        uses = {}
        for node in self.nodes:
            for i in node.ins:
                uses[i] = uses.get(i, 0) + 1
        for i in model.outputs:
            uses[i] = uses.get(i, 0) + 1
        return uses, {o: node for node in self.nodes for o in node.outs}

    def _fold_activations(self, model, infos, tmpl):
        """A float RELU / RELU1 / RELU6 whose input is the only use of a temporary produced by
        an operation with a FuseCode input set to NONE (ADD, MUL, SUB, DIV, the convolutions,
        FULLY_CONNECTED) is folded into that operation: it gets the activation as its fuse
        code (a new constant operand) and writes the activation's output itself, so the
        clamp runs inside its epilogue instead of as a separate pass over memory.  The same
        numbers, except on NaN: a fused clamp keeps NaN (the reference's std::max(x, lo)),
        the standalone operation gives the bound (std::max(lo, x)); docs/decisions.md.
        NNAPI_PY_STRICT=1 folds nothing.  Returns how many folded."""
        if strict():
            return 0
        uses, producer = self._uses_and_producers(model)
        folded = []
        for node in self.nodes:
            code = self._ACTIVATIONS.get(node.name)
            if code is None or len(node.ins) != 1 or len(node.outs) != 1 or node.deferred:
                continue
            x = node.ins[0]
            p = producer.get(x)
            if p is None or p.op.control or p.deferred or len(p.outs) != 1 or uses.get(x) != 1 or p.fp16 != node.fp16 \
                    or model.life[x] != TEMP or infos[x].type not in (C.TENSOR_FLOAT32, C.TENSOR_FLOAT16) \
                    or infos[node.outs[0]].type != infos[x].type:
                continue
            dx, dy = infos[x].dims, infos[node.outs[0]].dims
            if dx and dy and all(dx) and all(dy) and tuple(dx) != tuple(dy):
                continue                           # let the shape check report the conflict
            k = p.op.fuse_input([infos[i] for i in p.ins])
            if k is None or k >= len(p.ins):
                continue
            f = infos[p.ins[k]]
            if f.value is None or f.type != C.INT32 or int(f.value) != C.FUSED_NONE:
                continue
            _set_constant_input(infos, tmpl, p, k, C.INT32, np.int32(code))     # the new FuseCode
            p.outs = tuple(node.outs)
            producer[node.outs[0]] = p
            folded.append(node)
        if folded:
            drop = {id(nd) for nd in folded}
            self.nodes = [nd for nd in self.nodes if id(nd) not in drop]
        return len(folded)

    def _fold_requantize(self, model, infos):
        """DEQUANTIZE of an 8-bit tensor whose float32 result is only the input of a QUANTIZE
        (TFLite's int8 <-> uint8 requantization, as its NNAPI delegate lowers it: a uint8
        model input into an int8 network) becomes that QUANTIZE on the 8-bit tensor itself:
        QUANTIZE.build then computes each code's result once, by its own float path on the
        value DEQUANTIZE gives the code, and looks it up -- the same bytes without the float
        tensor (EfficientNet-Lite0's 224x224x3 input: two passes of about 1.2 ms).  Returns
        how many folded."""
        uses, producer = self._uses_and_producers(model)
        drop = set()
        for node in self.nodes:
            if node.name != "QUANTIZE" or node.deferred or node.fp16 or len(node.ins) != 1:
                continue
            x = node.ins[0]
            p = producer.get(x)
            if p is None or p.name != "DEQUANTIZE" or p.deferred or p.fp16 or uses.get(x) != 1 \
                    or model.life[x] != TEMP or infos[x].type != C.TENSOR_FLOAT32 \
                    or infos[p.ins[0]].type not in (C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED):
                continue
            node.ins = (p.ins[0],)
            drop.add(id(p))
        if drop:
            self.nodes = [nd for nd in self.nodes if id(nd) not in drop]
        return len(drop)

    def _fold_biases(self, model, infos, tmpl):
        """A float32 operation that only adds a constant bias to its per-channel sums
        (DEPTHWISE_CONV_2D without activation, Op.bias_to_pass_on) whose output is a temporary
        read only by an operation linear in it without padding (a 1x1 CONV_2D,
        Op.absorb_bias) passes its bias on: it gets a zero bias (its kernel then skips the
        add, one pass over memory fewer) and the reader the bias W b + c (new constant
        operands; the model's own are untouched).  The converted TFLite face and hand models
        have one per block.  Rounding may differ from adding b first (within float32
        tolerance); NNAPI_PY_STRICT=1 folds nothing.  Returns how many folded."""
        if strict():
            return 0
        readers = {}
        for node in self.nodes:
            for i in node.ins:
                readers.setdefault(i, []).append(node)
        outs = set(model.outputs)
        folded = 0
        for p in self.nodes:
            if p.deferred:
                continue
            got = p.op.bias_to_pass_on([infos[i] for i in p.ins])
            if got is None or len(p.outs) != 1:
                continue
            k, nchw = got
            x = p.outs[0]
            rd = readers.get(x, [])
            if len(rd) != 1 or x in outs or model.life[x] != TEMP:
                continue
            c = rd[0]
            if p.fp16 or c.fp16:        # float16 rounds the depthwise result before the bias
                continue
            if c.op.control or c.deferred or not c.ins or c.ins[0] != x or list(c.ins).count(x) != 1 or len(c.ins) < 3:
                continue
            bias = infos[p.ins[k]].value
            nb = c.op.absorb_bias([infos[i] for i in c.ins], bias, nchw)
            if nb is None:
                continue
            zero = np.zeros_like(np.asarray(bias, np.float32))
            _set_constant_input(infos, tmpl, p, k, infos[p.ins[k]].type, zero)
            _set_constant_input(infos, tmpl, c, 2, infos[c.ins[2]].type, nb)
            folded += 1
        return folded

    def _round_to_fp16(self, infos, tmpl):
        """Float16 partitions: each float32 tensor constant an fp16 operation reads is rounded
        once, here (a new constant operand, shared by its fp16 readers; other readers keep the
        original); float32 tensor inputs no fp16 operation wrote (model inputs, other
        partitions' results) are rounded when the operation runs (Node.round_ins); every float32
        tensor result is rounded (Node.round_outs)."""
        f32 = C.TENSOR_FLOAT32
        writer_fp16 = {o: node.fp16 for node in self.nodes for o in node.outs}
        rounded = {}
        for node in self.nodes:
            if not node.fp16:
                continue
            round_ins = []
            for k, i in enumerate(node.ins):
                inf = infos[i]
                if inf.type != f32:
                    continue
                if inf.value is not None:
                    if i not in rounded:
                        _set_constant_input(infos, tmpl, node, k, f32, _to_fp16(inf.value))
                        rounded[i] = node.ins[k]
                    node.ins = tuple(rounded[i] if j == k else x for j, x in enumerate(node.ins))
                elif not writer_fp16.get(i, False):
                    round_ins.append(k)
            node.round_ins = tuple(round_ins)
            node.round_outs = tuple(k for k, o in enumerate(node.outs) if infos[o].type == f32)

    def _share_temps(self):
        """Temporaries whose lifetimes do not overlap share memory: a temporary lives from
        the step that writes it to the last step that reads it (inclusive, so an operation's
        outputs never alias its own inputs).  Walking the steps in order, each new temporary
        takes the smallest free buffer large enough (else the largest free one, grown; else a
        new one).  Fewer distinct buffers keep the working set of a run in cache: each
        operation writes into memory a recent operation used, instead of a cold buffer of its
        own.  Returns (buffer byte sizes, {operand: buffer index})."""
        sizes, pool_of = [], {}
        nbytes = {i: int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
                  for i, shape, dt in self.temps}
        last = {}
        for s, node in enumerate(self.nodes):
            for i in node.ins:
                if i in nbytes:
                    last[i] = s
        free = []
        for s, node in enumerate(self.nodes):
            for o in node.outs:
                need = nbytes.get(o)
                if not need or o in pool_of:
                    continue
                fit = [k for k in free if sizes[k] >= need]
                if fit:
                    k = min(fit, key=lambda k: sizes[k])
                elif free:
                    k = max(free, key=lambda k: sizes[k])
                    sizes[k] = need
                else:
                    k = len(sizes)
                    sizes.append(need)
                if k in free:
                    free.remove(k)
                pool_of[o] = k
            for i in set(node.ins) | set(node.outs):
                if i in pool_of and last.get(i, s) <= s:
                    free.append(pool_of[i])
        return sizes, pool_of

    @staticmethod
    def _info_with(inf, shape):
        if shape is None:
            return inf
        r = Info(inf.type, shape, inf.scale, inf.zp, inf.channel, inf.value, inf.omitted, inf.index)
        return r

    # ---- arenas ------------------------------------------------------------------------------
    def take_arena(self):
        """An arena of this plan, [slots, steps, held inputs, held outputs], from the pool or
        made now (one per run in progress).  slots: an array per operand (constants, the
        temporaries' arrays, views of shared buffers where their lifetimes allow); steps:
        (kernel, input list, output list) per step, made once per arena, holding the arena's
        own arrays, the entries of model inputs and outputs filled in by a run: a run calls
        each kernel with ready lists instead of building two per step.  held: the caller's
        arrays a run with keep left bound (run_static), else None."""
        try:
            return self._arenas.pop()
        except IndexError:
            slots = list(self.template)
            pools = [_new_pool(b) for b in self.pool_sizes]
            pool_of = self.pool_of
            for i, shape, dt in self.temps:
                k = pool_of.get(i)
                if k is None:
                    slots[i] = np.empty(shape, dt)
                else:                           # a view from the start of the shared buffer
                    slots[i] = np.ndarray(shape, dt, buffer=pools[k])
            steps = [(k, [slots[i] for i in ii], [slots[o] for o in oo]) for k, ii, oo in self.steps]
            return [slots, steps, None, None]

    # ---- execution ---------------------------------------------------------------------------
    def run_static(self, in_arrays, out_arrays, deadline=None, keep=False):
        """Run the static plan on the caller's arrays.  keep (every array a plain view of
        caller memory, which the view cache holds anyway): the arena keeps them bound after
        the run, and a run on the same arrays (the same objects: a reusable execution's, or
        buffers a caller reuses) skips binding them again (a 1-op run: about 2 us); without
        keep (views of an ANeuralNetworksMemory, arrays of the Python API) they are unbound
        at the end, so the arena never keeps a caller's memory alive."""
        if self.failure is not None:
            self.check_runnable()
        ab = self.take_arena()
        slots, steps = ab[0], ab[1]
        enter_run()
        try:
            hi, ho = ab[2], ab[3]
            if not (keep and hi is not None and (hi is in_arrays or _same(hi, in_arrays))
                    and (ho is out_arrays or _same(ho, out_arrays))):
                ab[2] = ab[3] = None
                for i, a, refs in zip(self.inputs, in_arrays, self.in_refs):
                    slots[i] = a
                    for s, side, k in refs:
                        steps[s][1 + side][k] = a
                for i, a, refs in zip(self.outputs, out_arrays, self.out_refs):
                    slots[i] = a
                    for s, side, k in refs:
                        steps[s][1 + side][k] = a
                if keep:
                    ab[2], ab[3] = in_arrays, out_arrays
            ia = None
            try:
                if deadline is None:        # the usual case: no per-step clock, no step counter
                    for kern, ia, oa in steps:
                        if halted[0]:
                            park()
                        kern(ia, oa)
                else:
                    for kern, ia, oa in steps:
                        if halted[0]:
                            park()
                        if _now() > deadline:
                            raise NNError(C.MISSED_DEADLINE_TRANSIENT, "the execution timeout expired")
                        kern(ia, oa)
            except NNError:
                raise
            except Exception as e:
                # the failing step: the one whose input list (an object of its own) is bound
                s = next((k for k, st in enumerate(steps) if st[1] is ia), len(self.steps))
                oo = self.steps[s][2] if s < len(self.steps) else ()
                raise kernel_failure(self._node_name(oo), oo, e) from None
        finally:
            leave_run()
            if ab[2] is None:                   # the caller's arrays are not kept
                for i in self.inputs:
                    slots[i] = None
                for i in self.outputs:
                    slots[i] = None
                for refs in self.in_refs + self.out_refs:
                    for s, side, k in refs:
                        steps[s][1 + side][k] = None
            self._arenas.append(ab)

    def _node_name(self, outs):
        for node in self.nodes:
            if tuple(node.outs) == tuple(outs):
                return node.name
        return "an operation"

    def run_dynamic(self, in_arrays, out_provider, deadline=None):
        """Infer shapes node by node from the actual inputs.

        out_provider(k, shape, dtype) returns the array to write model output k into.
        Returns the shapes of the model outputs.
        """
        if self.failure is not None:
            self.check_runnable()
        slots = list(self.template)
        for i, a in zip(self.inputs, in_arrays):
            slots[i] = a
        out_pos = {o: k for k, o in enumerate(self.outputs)}
        out_shapes = [None] * len(self.outputs)
        enter_run()
        try:
            return self._run_nodes(slots, out_pos, out_shapes, out_provider, deadline)
        finally:
            leave_run()

    def _run_nodes(self, slots, out_pos, out_shapes, out_provider, deadline):
        import time
        infos = self.infos
        for node in self.nodes:
            if halted[0]:
                park()
            if deadline is not None and time.monotonic_ns() > deadline:
                raise NNError(C.MISSED_DEADLINE_TRANSIENT, "the execution timeout expired")
            ins_arr = [slots[i] for i in node.ins]
            if node.op.control:
                results = node.op.execute(node, ins_arr, deadline)
                if node.fp16:       # IF / WHILE on a float16 partition: its results rounded
                    results = [_to_fp16(r) if infos[o].type == C.TENSOR_FLOAT32 else r
                               for o, r in zip(node.outs, results)]
                for o, r in zip(node.outs, results):
                    d = tuple(np.shape(r))
                    if not _compatible(infos[o].dims, d):
                        raise op_failed(f"{node.name}: output shape {list(d)} for operand {o} conflicts with "
                                        f"its declared dimensions {dims_text(infos[o].dims)}")
                    k = out_pos.get(o)
                    if k is not None:
                        out_shapes[k] = d
                        arr = out_provider(k, d, infos[o].dtype)
                        arr[...] = r
                        slots[o] = arr
                    else:
                        slots[o] = r
                continue
            if not node.op.allow_zero_sized:
                for k, a in enumerate(ins_arr):
                    if a is not None and np.ndim(a) and np.size(a) == 0:
                        raise op_failed(f"{node.name}: input {k} is zero-sized, which this operation does not support")
            kern = node.kernel
            ins = None
            if kern is None:
                ins = [self._runtime_info(infos[i], a) for i, a in zip(node.ins, ins_arr)]
                key = tuple(None if a is None else (np.shape(a), a.tobytes() if k in node.value_ins else None)
                            for k, a in enumerate(ins_arr))
                hit = node.cache.get(key)
                if hit is None:
                    try:
                        out_dims = [tuple(int(x) for x in d) for d in node.op.infer(ins)]
                    except NNError as e:
                        raise op_failed(e.reason) from None
                    for o, d in zip(node.outs, out_dims):
                        if not _compatible(infos[o].dims, d):
                            raise op_failed(f"{node.name}: computed output shape {list(d)} for operand {o} "
                                            f"conflicts with its declared dimensions {dims_text(infos[o].dims)}")
                        e = size_problem(node.name, o, d, _itemsize(infos[o]))
                        if e is not None:
                            raise e
                    outs = [infos[o].with_dims(d) for o, d in zip(node.outs, out_dims)]
                    try:
                        kern = node.op.build(ins, outs)
                    except NNError as e:
                        raise op_failed(e.reason) from None
                    if node.fp16:
                        kern = _in_fp16(kern, node.round_ins, node.round_outs)
                    if profiling.ENABLED:
                        kern = profiling.timed(node.name, kern, profiling.kernel_label(node.name, ins, outs))
                    if len(node.cache) > 32:
                        node.cache.clear()
                    node.cache[key] = (kern, out_dims)
                else:
                    kern, out_dims = hit
            else:
                out_dims = [self.shapes[o] for o in node.outs]
            outs_arr = []
            for o, d in zip(node.outs, out_dims):
                k = out_pos.get(o)
                if k is not None:
                    out_shapes[k] = d
                    arr = out_provider(k, d, infos[o].dtype)
                else:
                    try:
                        arr = np.empty(d, infos[o].dtype)
                    except (MemoryError, ValueError):
                        raise NNError(C.OUT_OF_MEMORY, f"{node.name}: cannot allocate operand {o} of shape "
                                      f"{list(d)} ({infos[o].dtype.itemsize * int(np.prod(d, dtype=np.float64)):.3g} "
                                      f"bytes)") from None
                slots[o] = arr
                outs_arr.append(arr)
            try:
                kern(ins_arr, outs_arr)
            except NNError:
                raise
            except Exception as e:
                raise kernel_failure(node.name, node.outs, e) from None
        return out_shapes

    @staticmethod
    def _runtime_info(inf, a):
        if a is None:
            return Info(inf.type, inf.dims, inf.scale, inf.zp, inf.channel, None, True, inf.index)
        return Info(inf.type, tuple(np.shape(a)), inf.scale, inf.zp, inf.channel, a, False, inf.index)


INTERNAL_ERRORS = []     # (operation, exception text) of kernel failures that validation should have caught


def kernel_failure(name, outs, exc):
    """The one place a kernel's unexpected exception becomes a result code and reason:
    OUT_OF_MEMORY for memory exhaustion, otherwise OP_FAILED "internal error" (recorded)."""
    if isinstance(exc, MemoryError) or isinstance(exc, ValueError) and "array is too big" in str(exc):
        why = str(exc) if isinstance(exc, MemoryError) and str(exc) else "an array larger than memory"
        return NNError(C.OUT_OF_MEMORY, f"{name}: out of memory while computing operands {list(outs)} ({why})")
    _record_internal(name, exc)
    return NNError(C.OP_FAILED, f"{name}: internal error computing operands {list(outs)} ({type(exc).__name__}: {exc})")


def _record_internal(name, exc):
    """Kept for tests (tests/conftest.py fails a test that caused one) and for NNAPI_PY_TRACE."""
    INTERNAL_ERRORS.append((name, f"{type(exc).__name__}: {exc}"))
    del INTERNAL_ERRORS[:-100]


# IF / WHILE build the plans of the models they reference through these (ops never import us)
Runtime.make_plan = Plan
Runtime.model_type = Model
