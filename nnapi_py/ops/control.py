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


def _signature_check(sig, what, model, values, outs=None):
    """Referenced model operands must agree with the operation's operands."""
    def agree(kind, k, inner, outer):
        if inner.type != outer.type:
            sig.fail(f"{what} {kind} {k} has type {tname(inner.type)}, "
                     f"the operation's operand has {tname(outer.type)}")
        if inner.type in C.QUANT_TYPES and (inner.scale != outer.scale or inner.zp != outer.zp):
            sig.fail(f"{what} {kind} {k} has scale/zeroPoint ({inner.scale}, {inner.zp}), "
                     f"the operation's operand has ({outer.scale}, {outer.zp})")
        a, b = inner.dims, outer.dims
        if a and b:
            if len(a) != len(b):
                sig.fail(f"{what} {kind} {k} has rank {len(a)}, the operation's operand has rank {len(b)}")
            for d1, d2 in zip(a, b):
                if d1 and d2 and d1 != d2:
                    sig.fail(f"{what} {kind} {k} has dimensions {list(a)}, the operation's operand has {list(b)}")
    if len(model.inputs) != len(values):
        sig.fail(f"{what} has {len(model.inputs)} inputs, expected {len(values)}")
    for k, (i, outer) in enumerate(zip(model.inputs, values)):
        agree("input", k, model.info(i), outer)
    if outs is not None:
        if len(model.outputs) != len(outs):
            sig.fail(f"{what} has {len(model.outputs)} outputs, expected {len(outs)}")
        for k, (o, outer) in enumerate(zip(model.outputs, outs)):
            agree("output", k, model.info(o), outer)


def _subplan(node, model):
    """The compiled plan of a referenced model, built once per node."""
    p = node.cache.get(id(model))
    if p is None or p[0] is not model:
        p = (model, Runtime.make_plan(model))
        node.cache[id(model)] = p
    return p[1]


def _run(plan, values, deadline):
    """Run a referenced model's plan on arrays; returns fresh output arrays."""
    outs = {}

    def provider(k, shape, dt):
        a = np.empty(shape, dt)
        outs[k] = a
        return a

    ins = [None if v is None else (v if np.ndim(v) or not isinstance(v, np.ndarray) else v[()]) for v in values]
    plan.run_dynamic(ins, provider, deadline)
    return [outs[k] for k in range(len(plan.outputs))]


class _Control(Op):
    max_inputs = max_outputs = None
    control = True
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
        sig.types("input", 0, (C.TENSOR_BOOL8,))
        d = sig.ins[0].dims
        if d is not None and len(d) and tuple(d) != (1,):
            sig.fail(f"input 0 (condition) must have shape [1], got {list(d)}")
        sig.types("input", 1, (C.MODEL,))
        sig.types("input", 2, (C.MODEL,))
        for k, what in ((1, "then model"), (2, "else model")):
            m = sig.ins[k].value
            if m is not None:
                _signature_check(sig, what, m, sig.ins[3:], sig.outs)
        return 4

    def execute(self, node, ins, deadline):
        cond = bool(np.asarray(ins[0]).reshape(-1)[0])
        model = node_model(ins[1] if cond else ins[2])
        return _run(_subplan(node, model), ins[3:], deadline)


@register
class While(_Control):
    name = "WHILE"

    def validate(self, sig):
        self.check_operands(sig)
        sig.types("input", 0, (C.MODEL,))
        sig.types("input", 1, (C.MODEL,))
        cond, body = sig.ins[0].value, sig.ins[1].value
        m = len(sig.outs)
        if body is not None:
            k = len(body.outputs) - m
            n = len(body.inputs) - m - k
            if k < 0 or n < 0 or m + k + n != len(sig.ins) - 2:
                sig.fail(f"the body model has {len(body.inputs)} inputs and {len(body.outputs)} outputs, "
                         f"which does not fit {len(sig.ins) - 2} loop inputs and {m} outputs")
            _signature_check(sig, "body model", body, sig.ins[2:], sig.ins[2:2 + m + k])
            for j in range(m):
                o = body.info(body.outputs[j])
                if o.type != sig.outs[j].type:
                    sig.fail(f"output {j} has type {tname(sig.outs[j].type)}, the body model's "
                             f"output has {tname(o.type)}")
        if cond is not None:
            _signature_check(sig, "condition model", cond, sig.ins[2:])
            if len(cond.outputs) != 1:
                sig.fail(f"the condition model must have exactly one output, it has {len(cond.outputs)}")
            o = cond.info(cond.outputs[0])
            if o.type != C.TENSOR_BOOL8 or (o.dims is not None and tuple(o.dims) not in ((1,),)):
                sig.fail("the condition model's output must be a TENSOR_BOOL8 of shape [1]")
        return 4

    def execute(self, node, ins, deadline):
        cond_plan = _subplan(node, node_model(ins[0]))
        body_plan = _subplan(node, node_model(ins[1]))
        m = len(node.outs)
        k = len(body_plan.outputs) - m
        vals = list(ins[2:])
        timeout = getattr(loop, "timeout", C.DEFAULT_LOOP_TIMEOUT_NS)
        end = time.monotonic_ns() + timeout
        while True:
            c = _run(cond_plan, vals, deadline)[0]
            if not bool(np.asarray(c).reshape(-1)[0]):
                break
            vals = _run(body_plan, vals, deadline) + vals[m + k:]
            if time.monotonic_ns() > end:
                raise NNError(C.MISSED_DEADLINE_TRANSIENT,
                              f"WHILE: the loop ran longer than the loop timeout ({timeout / 1e9:g} s)")
        return [np.array(v, copy=True) for v in vals[:m]]


def node_model(v):
    if Runtime.model_type is not None and isinstance(v, Runtime.model_type):
        return v
    raise NNError(C.OP_FAILED, "a MODEL operand does not hold a model")
