"""Partitions as TFLite's NNAPI delegate makes them, and the run that goes through them.

The delegate (tflite/delegates/nnapi/nnapi_delegate.cc, DoPrepare) validates every node at the
target Android level, asks TFLite to partition the supported set (graph_info.cc,
PartitionGraphIntoIndependentNodeSubsets, greedily), keeps only the largest
`max_number_delegated_partitions` NNAPI partitions (3 by default, LimitDelegatedPartitions) and
partitions again; TFLite then logs "Replacing N out of M node(s) with delegate
(TfLiteNnapiDelegate) node, yielding K partitions for subgraph 0." where K counts the NNAPI and
the CPU subsets.  `delegate_partitions` does the same on a list of nodes; `Stitch` runs built
partitions one after another (NNAPI models through our library, CPU ones through LiteRT, cpu.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Set

import numpy as np

MAX_DELEGATED_PARTITIONS = 3        # StatefulNnApiDelegate::Options::max_number_delegated_partitions


@dataclass
class Node:
    """One operator: the tensors it reads and writes (-1: an absent optional input)."""
    index: int
    inputs: Sequence[int]
    outputs: Sequence[int]
    side_effect: bool = False       # resource tensors, IF / WHILE / CALL_ONCE: kept in their order


@dataclass
class Partition:
    nnapi: bool                     # True: one NNAPI model; False: TFLite's CPU kernels (LiteRT)
    nodes: List[int]                # operator indices, in execution order
    inputs: List[int] = field(default_factory=list)     # tensors read here, produced elsewhere / model inputs
    outputs: List[int] = field(default_factory=list)    # tensors produced here, read elsewhere / model outputs


def partition(nodes: Sequence[Node], supported: Set[int], model_outputs: Sequence[int] = (),
              not_boundary: Set[int] = frozenset()) -> List[Partition]:
    """graph_info.cc's greedy partitioning: each round takes every ready node of the round's kind
    (the kind of the first ready node), sweeping the nodes in order until none is added; nodes
    with side effects keep their relative order (TFLite's control edges).  Tensors in
    not_boundary (constants, resources) are never partition inputs or outputs."""
    made: Dict[int, int] = {}       # tensor -> the partition producing it
    produced = {t for nd in nodes for t in nd.outputs if t >= 0}
    done: Set[int] = set()
    after: Dict[int, int] = {}      # side-effect chain: node -> the next one
    waiting = {nd.index: 0 for nd in nodes}
    last = None
    for nd in nodes:
        if nd.side_effect:
            if last is not None:
                after[last] = nd.index
                waiting[nd.index] += 1
            last = nd.index
    parts: List[Partition] = []
    while len(done) < len(nodes):
        cur = None
        added = True
        while added:
            added = False
            for nd in nodes:
                k = nd.index
                if k in done or waiting[k] or any(t in produced and t not in made for t in nd.inputs if t >= 0):
                    continue
                if cur is None:
                    cur = Partition(k in supported, [])
                    parts.append(cur)
                if cur.nnapi != (k in supported):
                    continue
                done.add(k)
                cur.nodes.append(k)
                made.update((t, len(parts) - 1) for t in nd.outputs if t >= 0)
                if k in after:
                    waiting[after[k]] -= 1
                added = True
        if cur is None:             # a cycle or a node reading a tensor nothing produces first
            raise ValueError("the operators cannot be ordered")
    by_index = {nd.index: nd for nd in nodes}
    for e, p in enumerate(parts):
        p.inputs = list(dict.fromkeys(t for k in p.nodes for t in by_index[k].inputs
                                      if t >= 0 and t not in not_boundary and made.get(t) != e))
    for e, p in enumerate(parts):
        read = [t for q in parts if q is not p for t in q.inputs] + list(model_outputs)
        p.outputs = list(dict.fromkeys(t for t in read if made.get(t) == e and t not in not_boundary))
    return parts


def delegate_partitions(nodes: Sequence[Node], supported: Set[int], model_outputs: Sequence[int] = (),
                        not_boundary: Set[int] = frozenset(),
                        max_partitions: int = MAX_DELEGATED_PARTITIONS) -> List[Partition]:
    """partition(), then the delegate's limit: with more than max_partitions NNAPI partitions
    (0 or less: no limit) only the nodes of the largest ones stay on NNAPI (ties: the earlier),
    and the graph is partitioned again."""
    parts = partition(nodes, supported, model_outputs, not_boundary)
    nnapi = [p for p in parts if p.nnapi]
    if 0 < max_partitions < len(nnapi):
        keep = sorted(nnapi, key=lambda p: -len(p.nodes))[:max_partitions]
        parts = partition(nodes, {k for p in keep for k in p.nodes}, model_outputs, not_boundary)
    return parts


def replacing_line(parts: Sequence[Partition], n_nodes: int, subgraph: int = 0, name: str = "") -> str:
    """TFLite's log line as logcat shows it (subgraph.cc; TFLite logs none when nothing is delegated)."""
    n = sum(len(p.nodes) for p in parts if p.nnapi)
    if not n:
        return f"(no line for subgraph {subgraph}: no node is delegated, TfLiteNnapiDelegate is not applied)"
    return (f"Replacing {n} out of {n_nodes} node(s) with delegate (TfLiteNnapiDelegate) node, "
            f"yielding {len(parts)} partitions for subgraph {subgraph} ({name}).")


def might_have_side_effect(node, tensors) -> bool:
    """TFLite's OpMightHaveSideEffect: IF, WHILE, CALL_ONCE, or a resource tensor in or out (a
    reader Node and its graph's tensors)."""
    return node.name in ("IF", "WHILE", "CALL_ONCE") or any(
        k >= 0 and tensors[k].type_name == "RESOURCE" for k in list(node.ins) + list(node.outs))


# -- running the partitions one after another ------------------------------------------------------------
class NnapiStep:
    """A compiled NNAPI partition: its boundary tensors in the order of the NNAPI model's inputs /
    outputs; state_in / state_out: the variables it reads / assigns ("state:<var>" operands)."""

    def __init__(self, compilation, inputs, outputs, state_in=(), state_out=()):
        self.compilation, self.inputs, self.outputs = compilation, list(inputs), list(outputs)
        self.state_in, self.state_out = list(state_in), list(state_out)
        model = compilation.model
        self.in_names = [o.name for o in model.inputs]
        self.out_names = [o.name for o in model.outputs]
        self.ex = None                  # its reusable execution (None: not bound yet, False: unavailable)


class _Moved(Exception):
    pass


class Stitch:
    """Runs the partitions in order.  Every tensor crossing partitions has one home array: a CPU
    partition's output stays in LiteRT's own buffer (cpu.raw), an NNAPI partition writes its
    output straight into the input buffer of a CPU partition reading it (else into an array of
    its own), and an NNAPI partition reads its inputs where they live: no copy between
    partitions, except into a second CPU reader.  A CPU partition with dynamic tensors copies
    through LiteRT's set / get instead; one whose buffers LiteRT moves while running switches to
    that and the run starts over."""

    def __init__(self, steps, model_inputs, model_outputs, constants, specs):
        self.steps, self.model_inputs, self.model_outputs = steps, list(model_inputs), list(model_outputs)
        self.constants = constants      # tensor -> value (outputs folded at load)
        self.specs = specs              # tensor -> (dtype, shape) of every boundary tensor
        self.home: Dict[int, np.ndarray] = {}
        self.copying: Set[object] = set()
        self.bound = False

    def _own(self, t):
        old = self.home.get(t)
        if old is not None and old.flags.owndata:
            return old
        dtype, shape = self.specs[t]
        return np.empty(shape or (1,), dtype)      # a 0-d tensor is a 1-element one in NNAPI

    def _bind(self):
        home = {}
        cpus = [s for s in self.steps if not isinstance(s, NnapiStep)]
        for s in cpus:
            raws = {t: s.raw(t) for t in s.inputs + s.outputs} if s.static and s not in self.copying else {}
            if not raws or any(r is None for r in raws.values()):
                self.copying.add(s)
            s.raws = raws
        for s in self.steps:
            if isinstance(s, NnapiStep):
                s.ex = None
                for t in s.outputs:
                    reader = next((c for c in cpus if c not in self.copying and t in c.inputs), None)
                    home[t] = reader.raws[t] if reader is not None else self._own(t)
            else:
                for t in s.outputs:
                    home[t] = self._own(t) if s in self.copying else s.raws[t]
        self.home, self.bound = home, True

    def reset(self):
        """CPU partitions holding variables start over (LiteRT keeps them between invokes)."""
        for s in self.steps:
            if not isinstance(s, NnapiStep) and s.stateful:
                s.reset()
                self.bound = False

    def run(self, inputs, state):
        """(outputs in the model's order, the variables assigned in this run)."""
        if not self.bound:
            self._bind()
        try:
            return self._run(inputs, state)
        except _Moved:
            self._bind()
            return self._run(inputs, state)

    def _run(self, inputs, state):
        vals = dict(self.home)
        vals.update(zip(self.model_inputs, inputs))
        new_state = {}
        for s in self.steps:
            if isinstance(s, NnapiStep):
                self._run_nnapi(s, vals, state, new_state)
            else:
                self._run_cpu(s, vals)
        outs = [np.array(vals[t]).reshape(self.specs[t][1]) if t in self.specs    # 1-element -> 0-d again
                else np.array(vals.get(t, self.constants.get(t))) for t in self.model_outputs]
        return outs, new_state

    def _run_nnapi(self, s, vals, state, new_state):
        from .. import nn
        fresh = {n: vals[t] for n, t in zip(s.in_names, s.inputs) if t in self.model_inputs}
        fresh.update({"state:" + v: state[v] for v in s.state_in})
        outs = {n: self.home[t] for n, t in zip(s.out_names, s.outputs)}
        if s.ex is None:
            try:
                s.ex = s.compilation.execution(reusable=True)
            except nn.NNAPIError:       # below feature level 5: a fresh execution every run
                s.ex = False
            else:                       # bind: its own buffers for values given each run, homes for the rest
                from .inout import first_run
                homes = {n: vals[t] for n, t in zip(s.in_names, s.inputs) if n not in fresh}
                res = first_run(s.ex, homes, outs, fresh)
                new_state.update({v: np.array(res["state:" + v]) for v in s.state_out})
                return
        if s.ex:
            res = s.ex.run(fresh, copy=False)
        else:
            ins = {n: vals[t] for n, t in zip(s.in_names, s.inputs)}
            ins.update(fresh)
            res = s.compilation.execution().run(ins, outs, copy=False)
        new_state.update({v: np.array(res["state:" + v]) for v in s.state_out})

    def _run_cpu(self, s, vals):
        copying = s in self.copying
        for t in s.inputs:
            if copying:
                s.set(t, vals[t])
            elif vals[t] is not s.raws[t]:
                s.raws[t][...] = vals[t]
        s.invoke()
        if not copying and s.moved():
            self.copying.add(s)
            raise _Moved()
        if copying:
            for t in s.outputs:
                self.home[t][...] = s.get(t)
