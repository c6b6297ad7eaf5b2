"""The report: what TFLite's NNAPI delegate would do with a model on a given Android release, and
what nnapi_py does with it.

An Android developer learns without a phone why a model is not fully delegated on, say,
Android 11: the delegate's own log line ("Replacing N out of M node(s) with delegate
(TfLiteNnapiDelegate) node, yielding K partitions for subgraph 0."), computed from the same
per-release conditions the delegate's Validate checks (the registry's levels and Rules, with
decide(..., delegate=True)), then nnapi_py's partitions with, per operator, the NNAPI
operation(s) it became or why it stays on TFLite's CPU kernels -- and where nnapi_py does more
than the delegate (folds at load, builtins the delegate does not map, cases it refuses), the
delegate's decision beside it.
"""
from __future__ import annotations

import os

from . import partition
from .base import ANDROID_OF_LEVEL, Ctx, decide

_API_LEVEL = {1: 27, 2: 28, 3: 29, 4: 30, 5: 31, 6: 33, 7: 34, 8: 35}


def release(level: int) -> str:
    """"feature level 4 (Android 11, API 30)"."""
    return f"feature level {level} ({ANDROID_OF_LEVEL.get(level, '?')}, API {_API_LEVEL.get(level, '?')})"


def delegate_view(model, subgraph=0):
    """(the delegate's partitions of a subgraph, {operator: why the delegate would not take it}) at
    the model's level.  TFLite applies the delegate to every subgraph (IF / WHILE bodies too), each
    on its own; subgraph 0 is judged with its values folded at load, the others as read."""
    if subgraph == 0:
        g, ctx = model.graph, model.ctx
    else:
        g = model.reader.graph(subgraph)
        ctx = Ctx(g, None, model.feature_level)
        ctx.filters = {n.ins[1] for n in g.nodes if n.name in ("CONV_2D", "DEPTHWISE_CONV_2D") and len(n.ins) > 1}
    refused = {}
    for node in g.nodes:
        entry, reasons = decide(ctx, node, delegate=True)
        if entry is not None and not entry.delegate:
            reasons = [f"the NNAPI delegate does not map {node.name}"]
        if reasons:
            refused[node.index] = "; ".join(reasons)
    nodes = [partition.Node(n.index, n.ins, n.outs, partition.might_have_side_effect(n, g.tensors)) for n in g.nodes]
    parts = partition.delegate_partitions(nodes, {n.index for n in g.nodes} - set(refused), g.outputs,
                                          max_partitions=model.max_partitions)
    return parts, refused


def _dynamic(model):
    """The first dynamic-sized tensor TFLite would find preparing the model (LiteRT needed to
    know: without it, None)."""
    from . import cpu
    if not cpu.available():
        return None
    try:
        return cpu.first_dynamic_tensor(model.reader.buf, getattr(model, "input_shapes", None))
    except (RuntimeError, ValueError):      # LiteRT cannot prepare it (a custom op it lacks, ...)
        return None


def render(model) -> str:
    g = model.graph
    n = len(g.nodes)
    parts, refused = delegate_view(model)
    delegated = {k for p in parts if p.nnapi for k in p.nodes}
    lines = [f"{os.path.basename(model.path)} at {release(model.feature_level)}: {n} operator(s)"]
    lines += [f"  input  {i.text()}" for i in model.inputs]        # name: dtype[shape] (quantization)
    lines += [f"  output {o.text()}" for o in model.outputs]
    dyn = _dynamic(model)
    unlisted = "outside its largest partitions"
    if dyn is not None:
        delegated, unlisted = set(), "not applied to this graph (dynamic-sized tensors)"
        t = g.tensors[dyn]
        maker = next((nd for nd in g.nodes if dyn in nd.outs), None)
        lines.append(f"TfLiteNnapiDelegate would not be applied at all: tensor #{dyn} {t.name!r}"
                     + (f" (output of operator {maker.index} {maker.name})" if maker else "")
                     + " is dynamic-sized; TFLite would log: Attempting to use a delegate that only supports "
                     "static-sized tensors with a graph that has dynamic-sized tensors.")
    else:
        lines.append(f"TfLiteNnapiDelegate would log: {partition.replacing_line(parts, n, 0, g.name)}")
        for k in range(1, model.reader.n_graphs):       # IF / WHILE bodies, CALL_ONCE initialisers
            sub = model.reader.graph(k)
            if sub.nodes:
                line = partition.replacing_line(delegate_view(model, k)[0], len(sub.nodes), k, sub.name)
                lines.append(f"TfLiteNnapiDelegate would log: {line}")
    ours = model.partitions
    kinds = {}
    for d in model.decisions:
        kinds[d.kind] = kinds.get(d.kind, 0) + 1
    n_nn = sum(1 for p in ours if p.nnapi)
    lines.append(f"nnapi_py: {kinds.get('nnapi', 0)} operator(s) on NNAPI in {n_nn} partition(s), "
                 f"{kinds.get('cpu', 0)} on TFLite's CPU kernels (LiteRT) in {len(ours) - n_nn} partition(s), "
                 f"{kinds.get('folded', 0)} folded at load")
    by_index = {d.index: d for d in model.decisions}

    def row(k):
        d = by_index[k]
        text = d.text if d.kind != "cpu" else f"stays on the CPU: {d.text}"
        line = f"  {k:>5}  {d.name:<24} -> {text}"
        if d.kind != "cpu" and k not in delegated:
            line += f"  [the delegate: CPU, {refused.get(k) or unlisted}]"
        elif d.kind == "cpu" and k in delegated:
            line += "  [the delegate: NNAPI]"
        return line

    for e, p in enumerate(ours, 1):
        names = ", ".join(g.tensors[t].name for t in p.inputs) or "-"
        outs = ", ".join(g.tensors[t].name for t in p.outputs) or "-"
        kind = "NNAPI" if p.nnapi else "CPU (LiteRT)"
        lines.append(f"partition {e}: {kind}, {len(p.nodes)} operator(s); in: {names}; out: {outs}")
        lines += [row(k) for k in p.nodes]
    folded = [d.index for d in model.decisions if d.kind == "folded"]
    if folded:
        lines.append(f"folded at load (no partition): {len(folded)} operator(s)")
        lines += [row(k) for k in folded]
    return "\n".join(lines)
