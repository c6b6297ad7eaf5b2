"""Control flow: IF and WHILE run referenced models (ANEURALNETWORKS_MODEL operands).

They are executed by the plan itself (``Op.control``): the referenced models are compiled
once into their own plans (cached on the operation's node) and run with the values of the
outer graph; shapes come from what the referenced models produce.  WHILE loops are bounded
by the execution's loop timeout (ANeuralNetworksExecution_setLoopTimeout, default 2 s).
"""
import threading
import time

import numpy as np

from .. import constants as C
from ..errors import NNError
from .base import Op, Runtime, register, tname

# the loop timeout of the computation running on this thread (set by Execution.run)
loop = threading.local()


def _compatible(sig, what, inner, outer, other="the operation's operand"):
    """Android 14's compatible(): same type, scale, zeroPoint and per-channel parameters; ranks
    and dimensions agree where both are known."""
    if inner.type != outer.type:
        sig.fail(f"{what} has type {tname(inner.type)}, {other} has {tname(outer.type)}")
    if inner.scale != outer.scale or inner.zp != outer.zp or inner.channel != outer.channel:
        sig.fail(f"{what} has scale/zeroPoint ({inner.scale:g}, {inner.zp})"
                 f"{' and per-channel parameters' if inner.channel is not None else ''}, "
                 f"{other} has ({outer.scale:g}, {outer.zp})"
                 f"{' and per-channel parameters' if outer.channel is not None else ''}")
    a, b = inner.dims, outer.dims
    if a and b:
        if len(a) != len(b):
            sig.fail(f"{what} has rank {len(a)}, {other} has rank {len(b)}")
        for d1, d2 in zip(a, b):
            if d1 and d2 and d1 != d2:
                sig.fail(f"{what} has dimensions {list(a)}, {other} has {list(b)}")


def _condition(sig, what, inf):
    """Android 14's validateConditionOperand: a TENSOR_BOOL8 of shape exactly [1]."""
    if inf.type != C.TENSOR_BOOL8 or inf.dims is None or tuple(inf.dims) != (1,):
        sig.fail(f"{what} must be a TENSOR_BOOL8 of shape [1], got {tname(inf.type)} "
                 f"{'of unknown rank' if inf.dims is None else list(inf.dims)}")


def _io(model, kind, k):
    return model.info((model.inputs if kind == "input" else model.outputs)[k])


def _check_if(sig):
    """IF against its branch models (Android 14's validateIfOperation), at addOperation once the
    MODEL operands hold their models, again at finish."""
    _condition(sig, "input 0 (condition)", sig.ins[0])
    for k, what in ((1, "then model"), (2, "else model")):
        m = sig.ins[k].value
        if m is None:
            continue                  # no model yet: checked at finish
        if len(sig.ins) != 3 + len(m.inputs) or len(sig.outs) != len(m.outputs):
            sig.fail(f"the {what} has {len(m.inputs)} inputs and {len(m.outputs)} outputs; the operation "
                     f"passes {len(sig.ins) - 3} inputs and has {len(sig.outs)} outputs")
        for j in range(len(m.inputs)):
            _compatible(sig, f"{what} input {j}", _io(m, "input", j), sig.ins[3 + j], f"input {3 + j}")
        for j in range(len(m.outputs)):
            _compatible(sig, f"{what} output {j}", _io(m, "output", j), sig.outs[j], f"output {j}")


def _check_while(sig):
    """WHILE against its condition and body models (Android 14's validateWhileOperation): with
    m outputs, k state-only and n input-only operands, the operation has 2+m+k+n inputs, the
    condition model m+k+n inputs and one output, the body model m+k+n inputs, m+k outputs."""
    loop_ins = sig.ins[2:]
    cond, body = sig.ins[0].value, sig.ins[1].value
    if cond is not None:
        if len(cond.inputs) != len(loop_ins) or len(cond.outputs) != 1:
            sig.fail(f"the condition model has {len(cond.inputs)} inputs and {len(cond.outputs)} outputs; "
                     f"expected {len(loop_ins)} inputs (the loop operands) and 1 output")
        for j in range(len(cond.inputs)):
            _compatible(sig, f"condition model input {j}", _io(cond, "input", j), loop_ins[j], f"input {2 + j}")
        _condition(sig, "the condition model's output", _io(cond, "output", 0))
    if body is not None:
        m = len(sig.outs)
        if len(body.inputs) != len(loop_ins) or not m <= len(body.outputs) <= len(body.inputs):
            sig.fail(f"the body model has {len(body.inputs)} inputs and {len(body.outputs)} outputs, "
                     f"which does not fit {len(loop_ins)} loop inputs and {m} outputs")
        for j in range(len(body.inputs)):
            _compatible(sig, f"body model input {j}", _io(body, "input", j), loop_ins[j], f"input {2 + j}")
        for j in range(m):
            _compatible(sig, f"body model output {j}", _io(body, "output", j), sig.outs[j], f"output {j}")
        for j in range(len(body.outputs)):
            _compatible(sig, f"body model output {j}", _io(body, "output", j), _io(body, "input", j),
                        f"body model input {j}")


def _subplan(node, model):
    """The compiled plan of a referenced model, built once per node."""
    p = node.cache.get(id(model))
    if p is None or p[0] is not model:
        p = (model, Runtime.make_plan(model))
        node.cache[id(model)] = p
    return p[1]


FLAT = True    # static sub-plans run flat (False: operation by operation; the tests compare the two)


def _run(plan, values, deadline, spare=None):
    """Run a referenced model's plan on arrays; returns fresh output arrays.  A static plan
    (every shape known when it was compiled) whose inputs have its compiled shapes runs its
    kernels as a flat list (Plan.run_static, as an execution does): no per-operation shape
    work, which in a WHILE body of small tensors (a GRU step) cost more than its kernels.
    spare: a list holding the output arrays to write (made there on first use), or None."""
    ins = [None if v is None else (v if np.ndim(v) or not isinstance(v, np.ndarray) else v[()]) for v in values]
    if FLAT and plan.static and plan.failure is None and all(plan.out_refs):
        if all(s is not None and a is not None and np.shape(a) == s for a, s in zip(ins, plan.in_static)):
            if spare:
                outs = spare[0]
            else:
                outs = [np.empty(s, dt) for s, dt in zip(plan.out_shapes, plan.out_dtypes)]
                if spare is not None:
                    spare.append(outs)
            plan.run_static(ins, outs, deadline, True)     # our own arrays: kept bound
            return outs
    outs = {}

    def provider(k, shape, dt):
        a = np.empty(shape, dt)
        outs[k] = a
        return a

    plan.run_dynamic(ins, provider, deadline)
    return [outs[k] for k in range(len(plan.outputs))]


class _Control(Op):
    max_inputs = max_outputs = None
    control = True
    # Android 14's validateIfOperation / validateWhileOperation compare the outputs with the
    # referenced models at addOperation: nothing of it waits for the execution
    validates_outputs = True
    allow_zero_sized = True
    optional_inputs = ()

    @staticmethod
    def check_operands(sig):
        """At least 3 inputs and 1 output; no input omitted."""
        if len(sig.ins) < 3 or not sig.outs:
            sig.fail(f"expected at least 3 inputs and 1 output, got {len(sig.ins)} and {len(sig.outs)}")
        for k, i in enumerate(sig.ins):
            if i.omitted:
                sig.fail(f"input {k} has no value: IF and WHILE operands cannot be omitted")


@register
class If(_Control):
    name = "IF"

    def validate(self, sig):
        self.check_operands(sig)
        sig.types("input", 1, (C.MODEL,))
        sig.types("input", 2, (C.MODEL,))
        _check_if(sig)
        return 4

    def execute(self, node, ins, deadline, into=None):
        """The branch's results (fresh arrays; into: the step's output arrays, not used)."""
        cond = bool(np.asarray(ins[0]).reshape(-1)[0])
        model = node_model(ins[1] if cond else ins[2])
        return _run(_subplan(node, model), ins[3:], deadline)

    def result_shapes(self, node, shapes, values):
        """The outputs' shapes whichever branch runs, where both branch models compile to static
        plans for the inputs' shapes (shapes, values: per input of the operation) and agree."""
        got = None
        for v in values[1:3]:
            p = _static_for(_subplan(node, node_model(v)), shapes[3:])
            if p is None or got is not None and p.out_shapes != got:
                return None
            got = p.out_shapes
        return [tuple(s) for s in got]


@register
class While(_Control):
    name = "WHILE"

    def validate(self, sig):
        self.check_operands(sig)
        sig.types("input", 0, (C.MODEL,))
        sig.types("input", 1, (C.MODEL,))
        _check_while(sig)
        return 4

    def result_shapes(self, node, shapes, values):
        """The outputs' shapes however many steps run: those of the loop values they are, where
        the condition and the body compile to static plans for the values' shapes and every
        step gives each carried value back in its shape and type (what _flat_loop runs)."""
        cond_plan = _subplan(node, node_model(values[0]))
        body_plan = _subplan(node, node_model(values[1]))
        m = len(node.outs)
        if len(body_plan.outputs) < m or not _loop_flat(cond_plan, body_plan, shapes[2:], len(body_plan.outputs)):
            return None
        return [tuple(s) for s in shapes[2:2 + m]]

    def execute(self, node, ins, deadline, into=None):
        """The loop's results: fresh arrays, or the arrays of `into` (a static plan's step's
        outputs) written where the loop runs flat and they have the results' shapes."""
        cond_plan = _subplan(node, node_model(ins[0]))
        body_plan = _subplan(node, node_model(ins[1]))
        m = len(node.outs)
        k = len(body_plan.outputs) - m
        vals = list(ins[2:])
        timeout = getattr(loop, "timeout", C.DEFAULT_LOOP_TIMEOUT_NS)
        end = time.monotonic_ns() + timeout
        got = _flat_loop(cond_plan, body_plan, vals, m, m + k, deadline, end, timeout, into)
        if got is not None:
            return got
        # the body's results alternate between two sets of arrays of this computation: a step
        # writes the set its inputs are not in (the one the step before last wrote)
        spares = ([], [])
        step = 0
        while True:
            c = _run(cond_plan, vals, deadline)[0]
            if not bool(np.asarray(c).reshape(-1)[0]):
                break
            vals = _run(body_plan, vals, deadline, spares[step & 1]) + vals[m + k:]
            step += 1
            if time.monotonic_ns() > end:
                raise NNError(C.MISSED_DEADLINE_TRANSIENT,
                              f"WHILE: the loop ran longer than the loop timeout ({timeout / 1e9:g} s)")
        return [np.array(v, copy=True) for v in vals[:m]]


def _static_for(plan, shapes):
    """plan when it is static, runnable and compiled for exactly these input shapes (no scalar
    input: a scalar loop value goes its own way, _run), else None."""
    if not FLAT or not plan.static or plan.failure is not None or not all(plan.out_refs) or any(plan.in_scalar):
        return None
    if len(plan.in_static) != len(shapes) or any(s is None or tuple(s) != tuple(d) for s, d in zip(plan.in_static, shapes)):
        return None
    return plan


def _flat_loop_ok(cond_plan, body_plan, vals, carried):
    """A WHILE whose loop operands are arrays and whose plans run flat for their shapes
    (_loop_flat): checked once, before the loop (then every step's inputs have the compiled
    shapes)."""
    if not all(isinstance(a, np.ndarray) for a in vals):
        return False
    return _loop_flat(cond_plan, body_plan, [a.shape for a in vals], carried)


def _loop_flat(cond_plan, body_plan, shapes, carried):
    """A WHILE whose condition and body are static plans of the loop operands' shapes (none of
    them a scalar: _static_for), the body's results of the shapes and types of the operands
    they replace."""
    if _static_for(cond_plan, shapes) is None or _static_for(body_plan, shapes) is None:
        return False
    if len(body_plan.out_shapes) < carried or cond_plan.out_scalar[0]:
        return False
    return all(body_plan.out_shapes[j] == body_plan.in_static[j] and body_plan.out_dtypes[j] == body_plan.in_dtypes[j]
               for j in range(carried))


def _flat_loop(cond_plan, body_plan, vals, m, carried, deadline, end, timeout, into=None):
    """The WHILE loop on static plans, on a kit of the body plan's (_LoopKit); None where the
    loop does not run flat (_flat_loop_ok: checked when no kit is made for these plans yet, a
    kit's plans took that check for the shapes they were compiled for).  The loop values
    start as copies in the kit's set 1; a step of parity p runs the condition and then the body
    on the kit's arenas of that parity, bound once to the set the step before wrote (with the
    input-only values) and to the set it writes, set p (Plan.run_direct on the steps made
    then: no binding per step).
    Kits are kept with the body's plan (Plan.loop_kits; a node's own) for the next
    computation, one per computation in progress (threads each take their own).  The results
    are copied into into's arrays where they are of their shapes, else into new arrays."""
    kits = body_plan.loop_kits
    try:
        kit = kits.pop()
    except IndexError:
        kit = None
    if kit is None or kit.cond is not cond_plan or not _fits(vals, body_plan.in_static):
        if kit is not None:
            kits.append(kit)
        if not _flat_loop_ok(cond_plan, body_plan, vals, carried):
            return None
        kit = _LoopKit(cond_plan, body_plan)
    tail = vals[carried:]
    if not _same_objects(kit.tail, tail):
        kit.bind(tail)
    try:
        ca, ba, sets, go = kit.cond_calls, kit.body_calls, kit.sets, kit.go
        for dst, v in zip(sets[1], vals[:carried]):
            dst[...] = v
        crun, brun = cond_plan.run_direct, body_plan.run_direct
        p = 0
        while True:
            crun(ca[p], deadline)
            if not go.item(0):
                break
            brun(ba[p], deadline)
            p ^= 1
            if time.monotonic_ns() > end:
                raise NNError(C.MISSED_DEADLINE_TRANSIENT,
                              f"WHILE: the loop ran longer than the loop timeout ({timeout / 1e9:g} s)")
        got = sets[p ^ 1][:m]
        if into is not None and all(a.shape == v.shape for a, v in zip(into, got)):
            for a, v in zip(into, got):
                a[...] = v
            return into
        return [np.array(v, copy=True) for v in got]
    finally:
        kits.append(kit)


def _fits(vals, shapes):
    """The loop values are arrays of these shapes."""
    for a, s in zip(vals, shapes):
        if not isinstance(a, np.ndarray) or a.shape != s:
            return False
    return True


class _LoopKit:
    """What a flat WHILE loop runs on: an arena of the condition's and of the body's plan per
    parity (taken for good: the kit keeps them), the body's two sets of outputs, the
    condition's output (go: flat), and the input-only values the arenas are bound to."""
    __slots__ = ("cond", "body", "cond_arenas", "body_arenas", "sets", "c", "go", "tail", "cond_calls", "body_calls")

    def __init__(self, cond_plan, body_plan):
        self.cond, self.body = cond_plan, body_plan
        self.c = [np.empty(cond_plan.out_shapes[0], cond_plan.out_dtypes[0])]
        self.go = self.c[0].reshape(-1)
        self.sets = [[np.empty(s, dt) for s, dt in zip(body_plan.out_shapes, body_plan.out_dtypes)]
                     for _ in range(2)]
        self.cond_arenas = [cond_plan.take_arena(), cond_plan.take_arena()]
        self.body_arenas = [body_plan.take_arena(), body_plan.take_arena()]
        self.tail = None

    def bind(self, tail):
        """Parity p reads the set 1 - p and these input-only values; the condition writes c,
        the body set p."""
        self.tail = list(tail)
        for p in (0, 1):
            feed = self.sets[1 - p] + self.tail
            self.cond.bind(self.cond_arenas[p], feed, self.c)
            self.body.bind(self.body_arenas[p], feed, self.sets[p])
        # the steps as direct calls on the arrays bound (Plan.direct_steps), per parity
        self.cond_calls = [self.cond.direct_steps(ab) for ab in self.cond_arenas]
        self.body_calls = [self.body.direct_steps(ab) for ab in self.body_arenas]


def _same_objects(a, b):
    return a is not None and len(a) == len(b) and all(x is y for x, y in zip(a, b))


def node_model(v):
    if Runtime.model_type is not None and isinstance(v, Runtime.model_type):
        return v
    raise NNError(C.OP_FAILED, "a MODEL operand does not hold a model")
