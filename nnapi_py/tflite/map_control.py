"""Control flow: TFLite IF and WHILE with their subgraphs become NNAPI IF and WHILE (feature
level 4, Android 11) with referenced models (ANeuralNetworksModel_setOperandValueFromModel).

TFLite's NNAPI delegate does not map either builtin (it leaves them on the CPU); nnapi_py lowers
each referenced subgraph into an NNAPI model of its own, node by node through the same registry
as the main graph (folded at load where the values are known), and the operation references it.

* IF: input 0 the condition (a BOOL8 of one element: NNAPI wants it as shape [1]), the rest
  the branch's inputs.  Inputs that are constants in the main graph become constants inside both
  branch models (so a branch folds and maps with its weights known) and are no operands of IF.
* WHILE: TFLite carries every input through the body; NNAPI splits them into input-output
  operands (the body changes them: WHILE's outputs) and input-only ones.  A body output that is
  its own input unchanged is input-only (a constant one is a constant inside the cond and body
  models); the main graph's output for it is the WHILE input itself.
Everything a subgraph cannot map makes the IF / WHILE node unmapped with the reason (operator
and subgraph named): it then stays on TFLite's CPU kernels like any other node.
"""
from __future__ import annotations

import numpy as np

from .. import nn
from .base import Ctx, Unmapped, decide, maps

BOOL = np.bool_


def _lower(ctx, sub, node):
    """Lower one node of a subgraph the way the loader lowers the main graph's nodes (its
    `lower` hook: fold at load or map); without the hook, map through the registry."""
    hook = getattr(ctx, "lower", None)
    if hook is not None:
        return hook(sub, node)
    entry, reasons = decide(sub, node)
    if reasons:
        raise Unmapped("; ".join(reasons))
    return entry.fn(sub, node)


def _copy(sub, operand):
    """A fresh operand holding operand's value (a model output may not be one of the model's
    inputs or a constant)."""
    if operand.type.code == nn.bool8.code:
        return sub.nn_model.op("LOGICAL_AND", operand, operand, outputs=[(operand.type, operand.dims)])
    if not operand.dims or 0 in operand.dims:
        raise Unmapped(f"a subgraph output of shape {list(operand.dims)} that is its input or a constant "
                       f"cannot be copied (RESHAPE needs a fully specified shape)")
    return sub.nn_model.op("RESHAPE", operand, sub.ivec(operand.dims), outputs=[(operand.type, operand.dims)])


def subgraph_model(ctx, k, inputs, constants, outputs, what):
    """Subgraph k lowered into a new NNAPI model.

    inputs: [(subgraph input position, nn.OperandType, dims)] -> the model's inputs in that order;
    constants: {subgraph input position: value} -> constants inside the model;
    outputs: [subgraph output position] -> the model's outputs in that order.
    Returns (the nn.Model, the number of NNAPI operations in it)."""
    g = ctx.graph.reader.graph(k)
    if not hasattr(g, "read_values"):                # values as read, before any fold of an earlier build
        g.read_values = [t.value for t in g.tensors]
    for t, v in zip(g.tensors, g.read_values):
        t.operand, t.value = None, v
    model = nn.Model(f"{what} (subgraph {k} {g.name})")
    sub = Ctx(g, model, ctx.level)
    sub.filters = {n.ins[1] for n in g.nodes if n.name in ("CONV_2D", "DEPTHWISE_CONV_2D") and len(n.ins) > 1}
    if hasattr(ctx, "lower"):
        sub.lower = ctx.lower
    for pos, value in constants.items():
        g.tensors[g.inputs[pos]].value = np.asarray(value)
    for pos, typ, dims in inputs:
        t = g.tensors[g.inputs[pos]]
        t.operand = model.input(t.name, typ, dims)
    for node in g.nodes:
        if node.name in ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"):
            raise Unmapped(f"{what}: subgraph {k} uses resource variables ({node.name})")
        try:
            _lower(ctx, sub, node)
        except (Unmapped, nn.NNAPIError) as e:
            raise Unmapped(f"{what}: subgraph {k} ({g.name}) operator {node.index} {node.name}: {e}") from None
    if sub.state_in or sub.state_out:               # a variable (RNN / LSTM state) lives across calls
        raise Unmapped(f"{what}: subgraph {k} ({g.name}) holds state carried from call to call "
                       f"({', '.join(sorted(set(sub.state_in) | set(sub.state_out)))})")
    fed = {id(t.operand) for t in (g.tensors[g.inputs[p]] for p, _, _ in inputs)}
    for pos in outputs:
        t = g.tensors[g.outputs[pos]]
        o = sub.operand(t.index)
        if id(o) in fed or t.value is not None:
            o = _copy(sub, o)
        model.output(o, t.name)
    return model, len(model.operations)


def _operand_spec(ctx, k):
    o = ctx.operand(k)
    return o, o.type, tuple(o.dims)


def _bool1(ctx, k):
    """Tensor k (a BOOL8 of one element) as a BOOL8 operand of shape [1]."""
    t = ctx.tensors[k]
    if t.dtype != BOOL or int(np.prod(t.shape)) != 1:
        raise Unmapped(f"the condition {t.name!r} must be one boolean, got {t.type_name} {list(t.shape)}")
    o = ctx.operand(k)
    if tuple(o.dims) == (1,):
        return o
    return ctx.op("LOGICAL_AND", o, np.array([True]), outputs=[(nn.bool8, (1,))])


@maps("IF", level=4, delegate=False)
def if_(ctx, node):
    opts = node.options("IfOptions")
    branches = (opts.ThenSubgraphIndex(), opts.ElseSubgraphIndex())
    cond = _bool1(ctx, node.ins[0])
    args = node.ins[1:]
    constants = {p: ctx.tensors[k].value for p, k in enumerate(args) if ctx.tensors[k].value is not None}
    fed = [(p, *_operand_spec(ctx, k)) for p, k in enumerate(args) if p not in constants]
    outs = list(range(len(node.outs)))
    models, counts = [], []
    for which, b in zip(("then", "else"), branches):
        m, n = subgraph_model(ctx, b, [(p, typ, dims) for p, _, typ, dims in fed], constants, outs, f"IF {which}")
        models.append(m)
        counts.append(n)
    res = ctx.nn_model.op("IF", cond, models[0], models[1], *[o for _, o, _, _ in fed],
                          outputs=[ctx.out(k) for k in node.outs], names=[ctx.tensors[k].name for k in node.outs])
    for k, o in zip(node.outs, res if isinstance(res, tuple) else (res,)):
        ctx.bind(k, o)
    return (f"IF (then: subgraph {branches[0]}, {counts[0]} operation(s); "
            f"else: subgraph {branches[1]}, {counts[1]} operation(s))")


@maps("WHILE", level=4, delegate=False)
def while_(ctx, node):
    opts = node.options("WhileOptions")
    cond_k, body_k = opts.CondSubgraphIndex(), opts.BodySubgraphIndex()
    body = ctx.graph.reader.graph(body_k)
    n = len(node.ins)
    if len(body.inputs) != n or len(body.outputs) != n:
        raise Unmapped(f"the body (subgraph {body_k}) has {len(body.inputs)} inputs and {len(body.outputs)} "
                       f"outputs for {n} loop values")
    carried = [j for j in range(n) if body.outputs[j] != body.inputs[j]]
    if not carried:
        raise Unmapped("the body changes none of the loop values (NNAPI WHILE needs one at least)")
    only = [j for j in range(n) if j not in carried]
    constants = {j: ctx.tensors[node.ins[j]].value for j in only if ctx.tensors[node.ins[j]].value is not None}
    fed = [(j, *_operand_spec(ctx, node.ins[j])) for j in carried + only if j not in constants]
    inputs = [(j, typ, dims) for j, _, typ, dims in fed]
    cond_model, nc = subgraph_model(ctx, cond_k, inputs, constants, [0], "WHILE condition")
    cg = ctx.graph.reader.graph(cond_k)
    ct = cg.tensors[cg.outputs[0]]
    if cond_model.outputs[0].type.code != nn.bool8.code or tuple(cond_model.outputs[0].dims) != (1,):
        if ct.dtype != BOOL or int(np.prod(ct.shape)) != 1:
            raise Unmapped(f"the condition (subgraph {cond_k}) must give one boolean, got {ct.type_name} "
                           f"{list(ct.shape)}")
        o = cond_model.outputs.pop()
        cond_model.output(cond_model.op("LOGICAL_AND", o, np.array([True]), outputs=[(nn.bool8, (1,))]), ct.name)
    body_model, nb = subgraph_model(ctx, body_k, inputs, constants, carried, "WHILE body")
    res = ctx.nn_model.op("WHILE", cond_model, body_model, *[o for _, o, _, _ in fed],
                          outputs=[ctx.out(node.outs[j]) for j in carried],
                          names=[ctx.tensors[node.outs[j]].name for j in carried])
    for j, o in zip(carried, res if isinstance(res, tuple) else (res,)):
        ctx.bind(node.outs[j], o)
    for j in only:                                  # unchanged by the loop: the WHILE input itself
        if ctx.tensors[node.ins[j]].value is not None:
            ctx.tensors[node.outs[j]].value = ctx.tensors[node.ins[j]].value
        else:
            ctx.bind(node.outs[j], ctx.operand(node.ins[j]))
    return (f"WHILE ({len(carried)} loop value(s), {len(fed) - len(carried)} input-only; condition: subgraph "
            f"{cond_k}, {nc} operation(s); body: subgraph {body_k}, {nb} operation(s))")
