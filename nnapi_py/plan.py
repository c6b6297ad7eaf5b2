"""The compiled plan: operation order, shapes known at compile time, kernels built once,
temporaries allocated once per arena (arenas are pooled so concurrent executions of one
compilation never share a temporary; within an arena, temporaries whose lifetimes do not
overlap share memory)."""
import numpy as np

from . import constants as C
from .errors import NNError, bad_data, strict
from .model import INPUT, OUTPUT, CONST, CONST_REF, NO_VALUE, SUBGRAPH, Model
from .ops.base import Info, PoolBuffer, Runtime, deferred_failure
from .operand import dims_text
from . import profiling
from .plan_rewrites import GraphRewrites
from .plan_run import (INTERNAL_ERRORS, PlanRunner, UINT32_MAX, _compatible, _in_fp16, _itemsize, control_step,  # noqa: F401
                       _record_internal, kernel_failure, size_problem)


def _new_pool(nbytes):
    """The memory of one group of shared temporaries, uninitialised (like np.empty): a
    PoolBuffer, so kernels know arrays made over it may be kept in their views."""
    return PoolBuffer((nbytes,), np.uint8)


# ---- constant folding -------------------------------------------------------------------------
FOLD_FACTOR = 4                 # folded results kept: at most this many times the model's constant bytes ...
FOLD_FLOOR = 16 << 20           # ... or this many bytes, whichever is more
NEVER_FOLDED = frozenset(("RANDOM_MULTINOMIAL",))       # a draw per computation, not a value of its inputs
VIEWS = True                    # outputs that are views of their input take no kernel (Plan._views)


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


class Plan(GraphRewrites, PlanRunner):
    """A model compiled: the nodes in order, their kernels and shapes where known at compilation,
    the temporaries' layout (built here), the runs (PlanRunner) and the graph rewrites
    (GraphRewrites)."""

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
        static = True
        for node in self.nodes:
            if fold.alias:                      # inputs computed at compilation: their constants
                node.ins = tuple([fold.alias.get(i, i) for i in node.ins])
            if node.op.control:
                # IF / WHILE whose inputs' shapes are known and whose outputs' shapes are
                # declared or given by the referenced models: a step of the static plan like
                # any other (it runs its referenced models); else the plan runs node by node
                node.kernel = control_step(node, infos, shapes)
                static = static and node.kernel is not None
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
        self.has_control = static and any(nd.op.control for nd in self.nodes)
        self.shapes = shapes
        self.template = tmpl
        # temporaries to allocate per arena (static plans only)
        life = model.life
        temp = {i for i in range(n) if static and life[i] not in (INPUT, OUTPUT, CONST, CONST_REF, NO_VALUE, SUBGRAPH)
                and i in shapes and infos[i].type in C.DTYPES}     # (folded constants are past n)
        self.unread = self._unread(temp, infos, shapes) if static and VIEWS else frozenset()
        temp -= self.unread
        self.views = self._views(temp, infos, shapes) if static and VIEWS else {}
        self.temps = [(i, shapes[i], infos[i].dtype) for i in range(n) if i in temp and i not in self.views]
        self._arenas = []           # free arenas (take_arena)
        self.pool_sizes, self.pool_of = self._share_temps() if static else ([], {})
        self.steps = self.static_steps() if static else None
        # where each model input / output appears in the steps' argument lists: (step, 0 for
        # inputs / 1 for outputs, position); those entries are set per run, the rest per arena
        where = {}
        for s, (_, ii, oo) in enumerate(self.steps or ()):
            for side, ops in ((0, ii), (1, oo)):
                for k, i in enumerate(ops):
                    where.setdefault(i, []).append((s, side, k))
        self.in_refs = [tuple(where.get(i, ())) for i in self.inputs]
        self.out_refs = [tuple(where.get(i, ())) for i in self.outputs]
        self.bound_views = self._bound_views(temp, infos, shapes, where) if static and VIEWS else ()
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
        self.loop_kits = []         # what a WHILE whose body this is keeps for its next loop (ops/control.py)

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

    def static_steps(self):
        """(kernel, input operands, output operands) of every node that runs a kernel, in order
        (the nodes whose outputs are views, or read by no one (_unread), run none)."""
        return [(nd.kernel, nd.ins, nd.outs) for nd in self._step_nodes()]

    def _step_nodes(self):
        views, unread = self.views, self.unread
        return [nd for nd in self.nodes if not (nd.outs and (nd.outs[0] in views or nd.outs[0] in unread))]

    def _view_spots(self, node, infos, shapes):
        """Op.view_of of a node that may hand on views instead of running its kernel (one with a
        kernel, inputs and outputs, neither control flow nor of a float16 partition): where
        each output lies in its first input, or None."""
        if node.kernel is None or node.op.control or node.fp16 or not node.ins or not node.outs:
            return None
        ins = [self._info_with(infos[i], shapes.get(i)) for i in node.ins]
        outs = [infos[o].with_dims(shapes[o]) for o in node.outs]
        return node.op.view_of(ins, outs)

    def _unread(self, temp, infos, shapes):
        """The outputs of operations that only select a part of their first input or reshape it
        (Op.view_of, as _views) and whose every output is a temporary no operation reads (nor
        a model output): such an operation cannot fail once built (its shapes and parameters
        are the compilation's) and its results are never seen, so it runs no kernel and its
        outputs take no memory.  (A GRU body converted from TFLite slices its carried output
        twice and reads neither slice.)"""
        read, unread, count = set(), set(), 0
        for node in reversed(self.nodes):
            if (all(o in temp and o not in read for o in node.outs)
                    and self._view_spots(node, infos, shapes) is not None):
                unread.update(node.outs)
                count += 1
                continue
            read.update(node.ins)
        if count and profiling.ENABLED:
            profiling.note(f"{count} operation(s) whose results no operation reads run no kernel")
        return frozenset(unread)

    def _views(self, temp, infos, shapes):
        """{operand: (source operand, index, shape)}: the outputs of operations that only
        select a contiguous part of their first input or reshape it (Op.view_of: RESHAPE,
        SQUEEZE, EXPAND_DIMS, SLICE, STRIDED_SLICE, SPLIT), where source and outputs are
        temporaries of the arena: such an output is a view of its source, made once per arena
        (source[index].reshape(shape)), and the operation runs no kernel.  A view is taken only
        where it is C-contiguous and shares the source's memory (checked on an array of the
        source's shape: the arena's arrays are C-contiguous alike); the source's buffer then
        lives as long as its views are read (_share_temps).  Operations of float16 partitions
        run their kernels as before.  NNAPI_PY_PROFILE lists how many were handed on."""
        views = {}
        count = 0
        for node in self.nodes:
            src = node.ins[0] if node.ins else None
            if not (src in temp or src in views) or not all(o in temp for o in node.outs):
                continue
            where = self._view_spots(node, infos, shapes)
            if where is None:
                continue
            probe = np.empty(shapes[src], infos[src].dtype)
            got = []
            for o, w in zip(node.outs, where):
                v = probe[w].reshape(shapes[o])
                if (infos[o].dtype != infos[src].dtype or not v.flags.c_contiguous
                        or v.size and not np.shares_memory(v, probe)):
                    break
                got.append((o, (src, w, shapes[o])))
            else:
                views.update(got)
                count += 1
        if count and profiling.ENABLED:
            profiling.note(f"{count} operation(s) handed on as views of their input (no kernel runs)")
        return views

    def _bound_views(self, temp, infos, shapes, where):
        """The operations of _views whose first input is a model input or output of this plan
        (its array is the caller's, bound per run): ((step, source, ((output, index, shape,
        the steps' places reading it), ...)), ...).  Their steps stay (a kernel's failure names
        the same step), but where the bound array's part is a contiguous view (Plan.bind checks
        it, run by run: a caller's array may be strided), the readers get that view and the
        step runs no kernel; else the kernel writes the arena's temporary, read as before.  Not
        where an output is itself the source of a view made per arena.  (precise_vad's GRU
        body expands its output's dimensions for a CONCATENATION: one copy less a step.)"""
        bound = set(self.inputs) | set(self.outputs)
        sources = {src for src, _, _ in self.views.values()}
        got, count = [], 0
        for s, node in enumerate(self._step_nodes()):
            oo = node.outs
            src = node.ins[0] if node.ins else None
            if src not in bound or any(o not in temp or o in sources or o in self.views for o in oo):
                continue
            if src not in shapes or any(infos[o].dtype != infos[src].dtype for o in oo):
                continue
            spots = self._view_spots(node, infos, shapes)
            if spots is None:
                continue
            got.append((s, src, tuple((o, w, shapes[o], tuple(r for r in where.get(o, ()) if r[1] == 0))
                                      for o, w in zip(oo, spots))))
            count += 1
        if count and profiling.ENABLED:
            profiling.note(f"{count} operation(s) of a model input or output handed on as views where "
                           f"the bound array allows (no kernel runs)")
        return tuple(got)

    def check_runnable(self):
        """Raise the deferred failure (OP_FAILED) of a plan whose checks failed at compilation."""
        if self.failure is not None:
            raise deferred_failure(self.failure)

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
        root = {}                               # a view -> the temporary whose memory it is
        for o, (src, _, _) in self.views.items():
            root[o] = root.get(src, src)
        last = {}
        for s, node in enumerate(self.nodes):
            for i in node.ins:
                i = root.get(i, i)
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
            for i in {root.get(i, i) for i in node.ins} | set(node.outs):
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
        """An arena of this plan, [slots, steps, held inputs, held outputs, bound views' memo
        (plan_run._bind_view)], from the pool or
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
            for o, (src, where, shape) in self.views.items():     # in the operations' order
                slots[o] = slots[src][where].reshape(shape)
            steps = [(k, [slots[i] for i in ii], [slots[o] for o in oo]) for k, ii, oo in self.steps]
            return [slots, steps, None, None, {}]


# IF / WHILE build the plans of the models they reference through these (ops never import us)
Runtime.make_plan = Plan
Runtime.model_type = Model
