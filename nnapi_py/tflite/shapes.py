"""Input shapes: an input whose shape signature has -1 (audio of any length, any batch size).

A TfliteModel is compiled for one set of input shapes: the file's own, or the ones given to
`load(..., input_shapes=...)`.  `run()` with arrays of other shapes (allowed only in the
dimensions the signature leaves open) compiles the model again for those shapes -- one more
TfliteModel, kept in a small cache -- so every compilation has static shapes: loading-time folds
(SHAPE of such an input, the index arithmetic behind it) and every mapping see the real shapes,
and the runtime plans the run once.

Tensor shapes for a set of input shapes:
* the file's own input shapes: the shapes the file stores (the converter computed them for
  exactly these inputs, as LiteRT allocates them); the -1 of the signatures are resolved to them.
* other input shapes: LiteRT's own shape propagation (`resize_tensor_input` + `allocate_tensors`
  on its builtin kernels, nothing run) when LiteRT is installed -- the shapes TFLite itself gives
  every tensor.  Without LiteRT, or where LiteRT cannot allocate the model (a custom operator it
  lacks), the dimensions a signature leaves open become NNAPI's unspecified dimensions (0) and
  the runtime infers them when the compilation is finished; a mapping that needs such a shape
  then cannot map its operator.
* a custom operator's output the file gives no shape (rank 0, no signature: the converter cannot
  know what the kernel makes, e.g. TFLite_Detection_PostProcess's boxes): the shape LiteRT's
  kernel gives it when the model is allocated, as for an open dimension; without LiteRT it stays
  as read.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

Shapes = Tuple[Tuple[int, ...], ...]


def signatures(graph) -> Shapes:
    """The inputs' shape signatures as the file has them (resolve() then sets them to shapes)."""
    if not hasattr(graph, "read_signatures"):
        graph.read_signatures = tuple(tuple(graph.tensors[i].signature) for i in graph.inputs)
    return graph.read_signatures


def open_dims(graph) -> bool:
    """Whether any input of the graph has a dimension of any size (-1 in its shape signature)."""
    return any(-1 in s for s in signatures(graph))


def unsized_custom_outputs(graph) -> bool:
    """Whether a custom operator has an output the file gives no shape (rank 0): its kernel sizes it."""
    return any(graph.tensors[t].shape == () and graph.tensors[t].value is None
               for n in graph.nodes if n.name.startswith("CUSTOM_") for t in n.outs if t >= 0)


def file_shapes(graph) -> Shapes:
    return tuple(tuple(graph.tensors[i].shape) for i in graph.inputs)


def check(graph, shapes: Sequence[Sequence[int]]) -> Shapes:
    """shapes (one per input) as a tuple of tuples; ValueError where one differs from its input's
    signature in rank or in a fixed dimension."""
    shapes = tuple(tuple(int(d) for d in s) for s in shapes)
    if len(shapes) != len(graph.inputs):
        raise ValueError(f"{len(shapes)} input shape(s) given, the model has {len(graph.inputs)} input(s)")
    for i, s, sig in zip(graph.inputs, shapes, signatures(graph)):
        if len(s) != len(sig) or any(g != d and d != -1 for g, d in zip(s, sig)) or any(g < 0 for g in s):
            raise ValueError(f"input '{graph.tensors[i].name}': shape {list(s)} does not fit its shape signature "
                             f"{list(sig)} (-1: any size)")
    return shapes


def resolve(reader, input_shapes: Optional[Sequence[Sequence[int]]] = None) -> Shapes:
    """Give the tensors their shapes for input_shapes of subgraph 0 (None: the file's own) and
    return those input shapes.  Only models with an open dimension (-1 in a shape signature of
    subgraph 0) or a custom operator's unsized output change: their shapes come from LiteRT's shape propagation when it is installed
    (at the file's own input shapes too: a converter writes 1 for a dimension it could not know),
    for every subgraph LiteRT reaches when it runs the model (IF / WHILE bodies); a dimension
    that only running can tell stays open (NNAPI: unspecified, the runtime infers it).  Without
    LiteRT: at the file's shapes the tensors stay as read; at other shapes every open dimension
    is unspecified."""
    graph = reader.graph(0)
    own = file_shapes(graph)
    shapes = own if input_shapes is None else check(graph, input_shapes)
    if not any(-1 in t.signature for t in graph.tensors if t.value is None) and not unsized_custom_outputs(graph):
        return shapes
    signatures(graph)
    found = _litert_shapes(reader.buf, graph.inputs, shapes, reader.n_graphs)
    if found is None and shapes == own:
        return shapes
    for k in range(reader.n_graphs):
        for t in reader.graph(k).tensors:
            if t.value is not None or t.variable:
                continue
            if found is not None and (k, t.index) in found:
                shape, moved = found[k, t.index]
                t.shape = tuple(0 if m else d for d, m in zip(shape, moved))
                t.signature = tuple(-1 if m else d for d, m in zip(shape, moved))
            elif -1 in t.signature and (k == 0 or shapes != own):
                t.shape = tuple(0 if s == -1 else d for d, s in zip(t.shape, t.signature))
    for i, s in zip(graph.inputs, shapes):
        graph.tensors[i].shape = graph.tensors[i].signature = s
    return shapes


def _litert_shapes(buf, inputs, shapes, n_graphs=1):
    """{(subgraph, tensor index): (shape, [whether each dimension is open])} for these input
    shapes as LiteRT gives them: allocated, then run once on zeros and once on other values (a
    kernel may size its output only when it runs; IF / WHILE bodies get their shapes then); a
    dimension that differs between the two runs depends on the data: open.  None: LiteRT
    missing, or it cannot allocate the model (a custom operator it lacks)."""
    try:
        import numpy as np
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        return None
    try:
        it = Interpreter(model_content=bytes(buf),
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        for i, s in zip(inputs, shapes):
            it.resize_tensor_input(i, list(s))
        it.allocate_tensors()
    except (RuntimeError, ValueError):
        return None

    def now(graphs):
        out = {}
        for k in graphs:
            try:
                out.update({(k, d["index"]): tuple(int(x) for x in d["shape"])
                            for d in it.get_tensor_details(subgraph_index=k)})
            except (RuntimeError, ValueError):
                pass
        return out
    runs = [now([0])]
    rng = np.random.default_rng(0)
    for fill in ("zeros", "values"):
        try:
            for d in it.get_input_details():
                shape, dt = d["shape"], np.dtype(d["dtype"])
                x = (np.zeros(shape, dt) if fill == "zeros" else
                     rng.uniform(-1, 1, shape).astype(dt) if dt.kind == "f" else rng.integers(0, 2, shape).astype(dt))
                it.set_tensor(d["index"], x)
            it.invoke()
        except (RuntimeError, ValueError):
            break
        runs.append(now(range(n_graphs)))
    first, last = runs[min(1, len(runs) - 1)], runs[-1]
    out = {}
    for key, s in last.items():
        a = first.get(key, s)
        out[key] = (s, [len(a) != len(s) or x != y for x, y in zip(a, s)])
    return out
