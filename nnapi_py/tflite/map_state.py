"""Resource variables of streaming models: a variable read is a model input, a variable assigned
a model output, carried from one run() to the next by the model object."""
from __future__ import annotations

import numpy as np

from .base import Unmapped, maps


@maps("CALL_ONCE", delegate=False)
def call_once(ctx, node):
    return "initial variable values, applied by run()"


@maps("VAR_HANDLE", delegate=False)
def var_handle(ctx, node):
    o = node.options("VarHandleOptions")
    ctx.handles[node.outs[0]] = (o.SharedName() or b"").decode(errors="replace") or f"var{node.outs[0]}"
    return "state variable " + ctx.handles[node.outs[0]]


@maps("READ_VARIABLE", delegate=False)
def read_variable(ctx, node):
    var = ctx.handles.get(node.ins[0])
    if var is None:
        raise Unmapped("reads a resource no VAR_HANDLE produced")
    t = ctx.tensors[node.outs[0]]
    t.operand = ctx.nn_model.input("state:" + var, ctx.type(t), t.shape)
    ctx.state_in[var] = node.outs[0]
    if var not in ctx.initial_state:
        ctx.initial_state[var] = np.zeros(t.shape, t.dtype) + (t.zp if t.dtype in (np.int8, np.uint8) else 0)
    return "model input state:" + var


@maps("ASSIGN_VARIABLE", delegate=False)
def assign_variable(ctx, node):
    var = ctx.handles.get(node.ins[0])
    if var is None:
        raise Unmapped("assigns a resource no VAR_HANDLE produced")
    ctx.state_out[var] = node.ins[1]
    return "model output state:" + var
