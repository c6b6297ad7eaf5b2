"""TfliteModel: a .tflite model read (reader.py), folded (fold.py), partitioned as TFLite's NNAPI
delegate would at the target feature level (partition.py), each NNAPI partition mapped node by node
through the registry the mapping modules (map_*.py) fill and compiled, each CPU partition a
sub-model run by LiteRT (cpu.py); run() feeds them and carries the variables of streaming models;
report() (report.py) says what the delegate would do."""
from __future__ import annotations

import importlib
import os
import pkgutil
import re
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from .. import nn
from ..devices import parse_level
from . import cpu, shapes, inout, partition
from .base import Ctx, Unmapped, decide
from .fold import FOLDS
from .reader import DTYPES, LoadError, Reader
from .running import Running, _StatePair  # noqa: F401  (_StatePair: tests patch it as nnapi_py.tflite._StatePair)


@dataclass
class Decision:
    """Where operator `index` runs: kind "nnapi" (text: the NNAPI operation(s) it became),
    "cpu" (text: why it stays on TFLite's CPU kernels) or "folded" (computed at load)."""
    index: int
    name: str
    kind: str
    text: str


_LOADED = []


def mapping_modules():
    """Import every mapping module of the package (map_*.py): importing one registers its builtins."""
    if not _LOADED:
        pkg = __name__.rsplit(".", 1)[0]
        here = os.path.dirname(os.path.abspath(__file__))
        for info in sorted(pkgutil.iter_modules([here]), key=lambda i: i.name):
            if info.name.startswith("map_"):
                _LOADED.append(importlib.import_module(f"{pkg}.{info.name}"))
    return list(_LOADED)


def runtime_level() -> int:
    """The runtime's feature level, 1..8 (NNAPI_PY_FEATURE_LEVEL when set): getRuntimeFeatureLevel
    gives the API level up to 31, then 1000006, 1000007, 1000008."""
    code = nn.feature_level()
    return code - 1000000 if code > 1000000 else code


def try_fold(ctx, node):
    """Fold node at load when its outputs are known (fold.py): True when folded."""
    f = FOLDS.get(node.name)
    vals = f(ctx, node) if f is not None else None
    if vals is None:
        return False
    for k, v in zip(node.outs, vals):
        ctx.tensors[k].value = v
    return True


def lower(ctx, node) -> str:
    """Fold or map one node at ctx.level: the NNAPI operation(s) it became ("folded at load"),
    or Unmapped with the reason(s) it cannot run through NNAPI."""
    if try_fold(ctx, node):
        return "folded at load"
    entry, reasons = decide(ctx, node)
    if reasons:
        raise Unmapped("; ".join(reasons))
    return entry.fn(ctx, node)


class TfliteModel(Running):
    """A .tflite subgraph mapped to one compiled NNAPI model (loading, folding, partitioning and
    mapping here; running in running.Running)."""

    def __init__(self, path: str, compile_options: Optional[dict] = None, feature_level: Optional[int] = None,
                 max_partitions: int = partition.MAX_DELEGATED_PARTITIONS, check_only: bool = False,
                 input_shapes: Optional[Sequence[Sequence[int]]] = None):
        mapping_modules()
        self.path = path
        self.reader = Reader(path)
        self.graph = self.reader.graph(0)
        self.input_shapes = shapes.resolve(self.reader, input_shapes)   # the input shapes compiled for
        self.open_inputs = shapes.open_dims(self.graph)    # -1 in an input's signature: run() takes other shapes
        self.variants: Dict[tuple, "TfliteModel"] = {}     # input shapes -> this model compiled for them
        self._options = (compile_options, feature_level, max_partitions)
        compile_options = dict(compile_options or {})   # allow_fp16: TFLite's option, the models relaxed
        self.relaxed = bool(compile_options.pop("allow_fp16", False))
        self.tensors = self.graph.tensors
        self.feature_level = parse_level(feature_level if feature_level else runtime_level())
        self.max_partitions = max_partitions
        self.check_only = check_only            # NNAPI partitions built, CPU ones only planned: report(), no run()
        self.decisions: List[Decision] = []     # per operator: where it runs and what it became / why
        self.partitions: List[partition.Partition] = []
        self.nn_model = nn.Model(os.path.basename(path), relaxed=self.relaxed)
        self.ctx = Ctx(self.graph, self.nn_model, self.feature_level)
        self.ctx.lower = lower                  # map_control.py lowers IF / WHILE bodies node by node with it
        self.ctx.initial_state = self._init_state()
        self.initial_state = self.ctx.initial_state
        self._state_in: Dict[str, int] = self.ctx.state_in     # variable -> tensor read (a model input)
        self._state_out: Dict[str, int] = self.ctx.state_out   # variable -> tensor assigned (a model output)
        self.compilation = None
        self._stitch = None                     # partition.Stitch when there is more than one partition
        self._file_shapes = bool(self.open_inputs) and input_shapes is None
        try:
            self._build(compile_options)
        except nn.NNAPIError as e:
            if not self._file_shapes:
                raise
            raise LoadError(path, [(-1, "the file's input shapes " + str([list(s) for s in self.input_shapes]),
                                    str(e))], self._shapes_hint()) from None
        self._pair = None                       # _StatePair of reusable executions (False: not available)
        self._exec_lock = threading.Lock()
        self.input_names = [self.tensors[i].name for i in self.graph.inputs]
        self._inputs = inout.infos(self.tensors, self.graph.inputs, getattr(self.graph, "read_signatures", None))
        self.reset()
        self.output_names = [self.tensors[i].name for i in self.graph.outputs]

    @property
    def mapping(self) -> List[tuple]:
        """(operator index, builtin, the NNAPI operation(s) it became / "folded at load" /
        "CPU (LiteRT): why")."""
        return [(d.index, d.name, d.text if d.kind != "cpu" else f"CPU (LiteRT): {d.text}") for d in self.decisions]

    @property
    def inputs(self) -> List[inout.TensorInfo]:
        """The model's inputs in run()'s order: name, shape (signature: -1 where any size goes), dtype,
        quantization."""
        return list(self._inputs)

    @property
    def outputs(self) -> List[inout.TensorInfo]:
        """The model's outputs in run()'s order."""
        return inout.infos(self.tensors, self.graph.outputs)

    @property
    def input_specs(self) -> List[tuple]:
        """(name, numpy dtype, shape) of each model input, in order."""
        return [(self.tensors[i].name, self.tensors[i].dtype, self.tensors[i].shape) for i in self.graph.inputs]

    def _init_state(self):
        """Variables' initial values from the init subgraph(s) CALL_ONCE runs (constant assignments)."""
        state = {}
        for s in range(1, self.reader.n_graphs):
            g = self.reader.graph(s)
            handles = {}
            for node in g.nodes:
                if node.name == "VAR_HANDLE":
                    o = node.options("VarHandleOptions")
                    handles[node.outs[0]] = (o.SharedName() or b"").decode(errors="replace")
                elif node.name == "ASSIGN_VARIABLE":
                    t = g.tensors[node.ins[1]]
                    if t.value is not None and t.dtype in DTYPES.values():
                        state[handles.get(node.ins[0], "?")] = np.array(t.value).reshape(t.shape).copy()
        return state

    def _build(self, compile_options):
        """Fold what is known at load; decide per operator whether NNAPI can run it at the target
        level; partition like the delegate; map and compile each NNAPI partition (a node whose
        mapping fails while building moves to the CPU and the graph is partitioned again); make
        each CPU partition a LiteRT sub-model."""
        g, ctx = self.graph, self.ctx
        ctx.filters = {n.ins[1] for n in g.nodes if n.name in ("CONV_2D", "DEPTHWISE_CONV_2D") and len(n.ins) > 1}
        why: Dict[int, str] = {}                # operator -> why NNAPI cannot run it here
        folded = set()
        for node in g.nodes:
            if try_fold(ctx, node):
                folded.add(node.index)
                continue
            _, reasons = decide(ctx, node)
            if reasons:
                why[node.index] = "; ".join(reasons)
        nodes = [partition.Node(n.index, n.ins, n.outs, self._side_effect(n)) for n in g.nodes
                 if n.index not in folded]
        not_boundary = {t.index for t in self.tensors          # constants, resources, variable (state) tensors
                        if t.value is not None or t.type_name == "RESOURCE" or t.variable}
        while True:
            self.partitions = partition.delegate_partitions(
                nodes, {nd.index for nd in nodes} - set(why), g.outputs, not_boundary, self.max_partitions)
            try:
                done = self._map_partitions(compile_options)
                break
            except _Failed as e:
                why.update((k, e.reason) for k in e.indices)
        on_cpu = [k for p in self.partitions if not p.nnapi for k in p.nodes]
        for k in on_cpu:                        # left on the CPU by the limit on NNAPI partitions
            why.setdefault(k, f"NNAPI could run it, but it is outside the {self.max_partitions} largest NNAPI "
                              f"partitions (the delegate's max_number_delegated_partitions)")
        if on_cpu and not self.check_only and not cpu.available():
            raise LoadError(self.path, [(k, g.nodes[k].name, why[k]) for k in sorted(on_cpu)],
                            f"They would run on TFLite's CPU kernels through LiteRT, which is not installed: "
                            f"{cpu.INSTALL}")
        folded_values = {t: self.tensors[t].value for k in folded for t in g.nodes[k].outs if t >= 0}
        steps, failed = [], []
        for p in self.partitions:
            if p.nnapi or self.check_only:
                steps.append(done.get(id(p)))
                continue
            consts = {t: folded_values[t] for k in p.nodes for t in g.nodes[k].ins if t in folded_values}
            try:
                steps.append(self._cpu_partition(p.nodes, p.inputs, p.outputs, consts))
            except (RuntimeError, ValueError) as e:     # every CPU partition tried: one error listing them all
                failed += self._cpu_failures(p, consts, e, why)
        if failed:
            raise LoadError(self.path, failed)
        for node in g.nodes:
            k = node.index
            if k in folded:
                self.decisions.append(Decision(k, node.name, "folded", "folded at load"))
            elif k in why:
                self.decisions.append(Decision(k, node.name, "cpu", why[k]))
            else:
                self.decisions.append(Decision(k, node.name, "nnapi", done[k]))
        if self.compilation is not None:      # one NNAPI partition holding every operator
            return
        self.nn_model = None
        if self.check_only:                     # CPU partitions only planned: nothing to run
            return
        specs = {t: (self.tensors[t].dtype, self.tensors[t].shape)
                 for p in self.partitions for t in p.inputs + p.outputs}
        consts = {t: self.tensors[t].value for t in g.outputs if self.tensors[t].value is not None}
        self._stitch = partition.Stitch(steps, g.inputs, g.outputs, consts, specs)

    def _cpu_partition(self, nodes, inputs, outputs, consts):
        return cpu.CpuPartition(self.reader.buf, nodes, inputs, outputs, consts,
                                shapes={t: self.tensors[t].shape for t in inputs})

    def _cpu_failures(self, p, consts, e, why):
        """(operator, builtin, reason) for each operator of CPU partition p, which LiteRT refused
        with `e`: LiteRT's message goes to the operator it names ("Node number N (...)" counts the
        partition's operators; an unresolved custom op by its code), a custom operator it does not
        name is tried alone (its own verdict, never another operator's), every other one points at
        the operator that fails."""
        g = self.graph
        text = _litert_reason(e)
        named = set()
        for n in re.findall(r"Node number (\d+) \(", str(e)):
            if int(n) < len(p.nodes):
                named.add(p.nodes[int(n)])
        for code in re.findall(r"unresolved custom op: ([^ ]+?)\.?(?: |$)", text):
            named.update(k for k in p.nodes if g.nodes[k].name == "CUSTOM_" + code)
        if not named and len(p.nodes) == 1:
            named = set(p.nodes)
        reasons = {k: text for k in named}
        for k in p.nodes:                           # a custom operator LiteRT did not name: its own verdict
            if k not in named and (g.nodes[k].name.startswith("CUSTOM_") or not named):
                ins = [t for t in g.nodes[k].ins if t >= 0 and self.tensors[t].value is None]
                try:
                    self._cpu_partition([k], ins, [t for t in g.nodes[k].outs if t >= 0],
                                        {t: v for t, v in consts.items() if t in g.nodes[k].ins})
                except (RuntimeError, ValueError) as alone:
                    reasons[k] = _litert_reason(alone)
        culprits = ", ".join(str(j) for j in sorted(reasons)) or "?"
        return [(k, g.nodes[k].name, f"{why[k]}; LiteRT cannot run it either: {reasons[k]}" if k in reasons else
                 f"{why[k]}; LiteRT could run it, but not its CPU partition, which holds operator(s) {culprits} that "
                 f"LiteRT cannot run") for k in p.nodes]

    def _side_effect(self, node):
        return partition.might_have_side_effect(node, self.tensors)

    def _map_partitions(self, compile_options):
        """Map and compile every NNAPI partition: {operator: what it became, id(partition): step}.
        One partition holding every operator is this model's own nn_model (inputs and outputs of
        the graph, state variables) as without partitions."""
        g, ctx = self.graph, self.ctx
        done = {}
        nnapi = [p for p in self.partitions if p.nnapi]
        whole = len(nnapi) == len(self.partitions) <= 1
        ctx.state_in.clear()
        ctx.state_out.clear()
        for p in nnapi or ([partition.Partition(True, [])] if whole else []):
            for t in self.tensors:
                t.operand = None
            model = self.nn_model if whole else nn.Model(f"{os.path.basename(self.path)} partition "
                                                         f"{self.partitions.index(p) + 1}", relaxed=self.relaxed)
            ctx.nn_model = model
            state_in, state_out = set(ctx.state_in), set(ctx.state_out)
            names = set()
            for i in (g.inputs if whole else p.inputs):
                t = self.tensors[i]
                name = t.name if t.name not in names else f"{t.name}#{i}"
                names.add(name)
                try:                            # a 0-d tensor crossing partitions: one element (NNAPI rank 0 = unknown)
                    t.operand = model.input(name, ctx.type(t), t.shape or (() if whole else (1,)))
                except (Unmapped, nn.NNAPIError) as e:      # a type NNAPI has no operand for (int8 of scale 0)
                    if whole and not any(i in g.nodes[k].ins for k in p.nodes):
                        raise LoadError(self.path, [(-1, "model input", str(e))]) from None
                    raise _Failed(next(k for k in p.nodes if i in g.nodes[k].ins), str(e)) from None
            for k in p.nodes:
                node = g.nodes[k]
                entry, _ = decide(ctx, node)
                try:
                    done[k] = entry.fn(ctx, node)
                except Unmapped as e:
                    raise _Failed(k, str(e)) from None
                except nn.NNAPIError as e:
                    raise _Failed(k, f"NNAPI refuses the mapping: {e}") from None
            outs = g.outputs if whole else p.outputs
            names = set()
            for i in outs:
                name = self.tensors[i].name if self.tensors[i].name not in names else f"{self.tensors[i].name}#{i}"
                names.add(name)
                model.output(_distinct(ctx, model, ctx.operand(i), self.tensors[i]), name)
            new_out = [v for v in ctx.state_out if v not in state_out]
            for v in new_out:
                k = ctx.state_out[v]
                model.output(_distinct(ctx, model, ctx.operand(k), self.tensors[k]), "state:" + v)
            if not whole and not model.operations:      # only bookkeeping (variables, folds): no NNAPI model
                raise _Failed(p.nodes, "no NNAPI operation in its partition: runs with its neighbours on the CPU")
            if (not model.inputs or not model.outputs) and p.nodes:  # only constants in, or nothing used out
                raise _Failed(p.nodes, f"its NNAPI partition would have no {'input' if not model.inputs else 'output'}"
                                       f" (an NNAPI model needs one): runs on the CPU")
            comp = model.compile(**compile_options)
            if whole:
                self.compilation = comp
            done[id(p)] = partition.NnapiStep(comp, [] if whole else p.inputs, outs,
                                              [v for v in ctx.state_in if v not in state_in], new_out)
        return done

    def report(self) -> str:
        """What TFLite's NNAPI delegate would do with this model at its feature level, and what
        nnapi_py does: partitions, per operator the NNAPI operation(s) or why it stays on the CPU."""
        from .report import render
        return render(self)


def _litert_reason(e):
    """LiteRT's error in one line, without its pointer to the custom-op guide and its "Node number N
    (...) failed to prepare" (N counts a sub-model's operators; the message names the operator)."""
    text = " ".join(str(e).split())
    text = re.sub(r"\s*See instructions: \S+", "", text)
    text = re.sub(r"\s*Node number \d+ \([^)]*\) failed to \w+\.?", "", text)
    return text.strip() or " ".join(str(e).split())


def _distinct(ctx, model, operand, t):
    """`operand` as a new output of `model`: NNAPI lists an operand once among a model's inputs and
    outputs, so one that already is an input or an output (a variable read handed on unchanged, a
    tensor both a partition output and a state output) is first copied (RESHAPE to its own shape;
    LOGICAL_OR with itself for a BOOL8)."""
    if not any(o is operand for o in model.inputs + model.outputs):
        return operand
    shape = tuple(operand.dims or t.shape) or (1,)
    if t.dtype == np.bool_:
        return ctx.op("LOGICAL_OR", operand, operand, outputs=[(operand.type, shape)])
    return ctx.op("RESHAPE", operand, ctx.ivec(shape), outputs=[(operand.type, shape)])


class _Failed(Exception):
    """Mapping operator `index` failed while building its partition."""

    def __init__(self, index, reason):
        super().__init__(reason)
        self.indices = list(index) if isinstance(index, (list, tuple)) else [index]
        self.reason = reason


def load(path: str, feature_level: Optional[int] = None, max_partitions: int = partition.MAX_DELEGATED_PARTITIONS,
         check_only: bool = False, input_shapes: Optional[Sequence[Sequence[int]]] = None,
         **compile_options) -> TfliteModel:
    """Read, fold, partition, map and compile a .tflite model as TFLite's NNAPI delegate would on
    the release of `feature_level` (1..8 or an Android API level 27..35; default the runtime's,
    i.e. NNAPI_PY_FEATURE_LEVEL).  Operators NNAPI cannot run there go to TFLite's CPU kernels
    through LiteRT; max_partitions: the delegate's max_number_delegated_partitions (3; 0: no
    limit).  LoadError lists the operators that cannot run at all (LiteRT missing, or it has no
    kernel either).  check_only=True: only what report() needs (no LiteRT sub-models, no run).
    input_shapes: one shape per input, compiled for instead of the file's (only where an input's
    shape signature has -1); run() with other such shapes compiles again for them (cached).
    compile_options: nn.Model.compile's, and allow_fp16=True (TFLite's allow_fp16: the NNAPI models
    relaxed with relaxComputationFloat32toFloat16)."""
    return TfliteModel(path, compile_options, feature_level, max_partitions, check_only, input_shapes)
