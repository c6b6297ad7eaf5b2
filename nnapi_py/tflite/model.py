"""TfliteModel: a .tflite model read (reader.py), folded (fold.py), mapped node by node through the
registry the mapping modules (map_*.py) fill, and compiled into one NNAPI model; run() feeds it
and carries the variables of streaming models."""
from __future__ import annotations

import importlib
import os
import pkgutil
import threading
from typing import Dict, List, Optional, Sequence

import numpy as np

from .. import nn
from .base import Ctx, Unmapped, decide
from .fold import FOLDS
from .reader import DTYPES, Reader


class LoadError(Exception):
    """The model cannot be mapped: `unmapped` lists (operator index, builtin, reason)."""

    def __init__(self, path, unmapped):
        self.unmapped = unmapped
        lines = "\n".join(f"  operator {k}: {name}: {why}" for k, name, why in unmapped)
        super().__init__(f"{os.path.basename(path)}: {len(unmapped)} operator(s) cannot run through NNAPI:\n{lines}")


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


class TfliteModel:
    """A .tflite subgraph mapped to one compiled NNAPI model."""

    def __init__(self, path: str, compile_options: Optional[dict] = None, feature_level: Optional[int] = None):
        mapping_modules()
        self.path = path
        self.reader = Reader(path)
        self.graph = self.reader.graph(0)
        self.tensors = self.graph.tensors
        self.feature_level = int(feature_level or nn.feature_level())
        self.mapping: List[tuple] = []          # (operator index, builtin, NNAPI operations or reason)
        self.nn_model = nn.Model(os.path.basename(path))
        self.ctx = Ctx(self.graph, self.nn_model, self.feature_level)
        self.ctx.initial_state = self._init_state()
        self.initial_state = self.ctx.initial_state
        self._state_in: Dict[str, int] = self.ctx.state_in     # variable -> tensor read (a model input)
        self._state_out: Dict[str, int] = self.ctx.state_out   # variable -> tensor assigned (a model output)
        self._build()
        self.compilation = self.nn_model.compile(**(compile_options or {}))
        self._pair = None                       # _StatePair of reusable executions (False: not available)
        self._exec_lock = threading.Lock()
        self.input_names = [self.tensors[i].name for i in self.graph.inputs]
        self.reset()
        self.output_names = [self.tensors[i].name for i in self.graph.outputs]

    def _init_state(self):
        """Variables' initial values from the init subgraph(s) CALL_ONCE runs (constant assignments)."""
        state = {}
        for s in range(1, self.reader.n_graphs):
            g = self.reader.graph(s)
            handles = {}
            for node in g.nodes:
                if node.name == "VAR_HANDLE":
                    o = node.options("VarHandleOptions")
                    handles[node.outs[0]] = (o.SharedName() or b"").decode()
                elif node.name == "ASSIGN_VARIABLE":
                    t = g.tensors[node.ins[1]]
                    if t.value is not None and t.dtype in DTYPES.values():
                        state[handles.get(node.ins[0], "?")] = np.array(t.value).reshape(t.shape).copy()
        return state

    def _build(self):
        g, ctx = self.graph, self.ctx
        ctx.filters = {n.ins[1] for n in g.nodes if n.name in ("CONV_2D", "DEPTHWISE_CONV_2D") and len(n.ins) > 1}
        unmapped = []
        for i in g.inputs:
            t = self.tensors[i]
            try:
                t.operand = self.nn_model.input(t.name, ctx.type(t), t.shape)
            except Unmapped as e:
                unmapped.append((-1, "model input", str(e)))
        for node in g.nodes:
            try:
                done = lower(ctx, node)
                self.mapping.append((node.index, node.name, done))
            except Unmapped as e:
                unmapped.append((node.index, node.name, str(e)))
                self.mapping.append((node.index, node.name, f"unmapped: {e}"))
        if unmapped:
            raise LoadError(self.path, unmapped)
        for i in g.outputs:
            self.nn_model.output(ctx.operand(i), self.tensors[i].name)
        for var, k in self._state_out.items():
            self.nn_model.output(ctx.operand(k), "state:" + var)

    # -- running
    def run(self, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Inputs in the model's input order -> outputs in its output order.  A streaming model's
        variables are carried from one call to the next (reset() starts over)."""
        feed = {n: a for n, a in zip(self.input_names, inputs)}
        res = self._run_reusable(feed)
        if res is not None:
            return res
        state = self.state
        for var in self._state_in:
            feed["state:" + var] = state[var]
        res = self.compilation.run(feed)
        self.state = {**state, **{var: res["state:" + var] for var in self._state_out}}
        return [res[n] for n in self.output_names]

    def _run_reusable(self, feed):
        """The outputs of a run on the model's pair of reusable executions (_StatePair), bound on
        the first calls, then only input values copied in and no state copied at all.  None --
        the caller makes a fresh execution -- when the runtime has no reusable executions
        (feature level < 5), when another thread is using them, or when the input shapes differ
        from the bound ones."""
        if self._pair is False or not self._exec_lock.acquire(blocking=False):
            return None
        try:
            p = self._pair
            if p is None:
                try:
                    p = _StatePair(self)
                except nn.NNAPIError:
                    self._pair = False
                    return None
                self._pair = p
            try:
                return p.run(feed)
            except ValueError:              # other shapes than the bound ones
                return None
        finally:
            self._exec_lock.release()

    @property
    def state(self) -> Dict[str, np.ndarray]:
        """The variables' current values (copies)."""
        p = self._pair
        return p.values() if p else {k: v.copy() for k, v in self._state.items()}

    @state.setter
    def state(self, values: Dict[str, np.ndarray]) -> None:
        p = self._pair
        if p:
            p.load(values)
        else:
            self._state = {k: np.array(v) for k, v in values.items()}

    def reset(self) -> None:
        """Variables back to their initial values."""
        self.state = self.initial_state

    def report(self) -> str:
        lines = [f"{os.path.basename(self.path)}: {len(self.mapping)} operators"]
        for k, name, done in self.mapping:
            lines.append(f"  {k:>4}  {name:<24} -> {done}")
        return "\n".join(lines)


class _StatePair:
    """Two reusable executions of a streaming model whose state buffers alternate: execution 0
    reads the variables from buffer set 0 and writes their next values into set 1, execution 1
    the other way round, so a step copies its real inputs in and its real outputs out but no
    state (a wake-word model carries a few dozen variable tensors: copying each in and out
    through one execution cost about a fifth of a step).  A variable only read is one array
    both read; one only assigned is an output kept per execution (copied into the array both
    read where it is also read but its input and output operands differ in type or shape)."""

    def __init__(self, model):
        comp = model.compilation
        self.execs = [comp.execution(reusable=True), comp.execution(reusable=True)]
        self.names = list(model.output_names)
        self.ins, self.outs = list(model._state_in), list(model._state_out)
        tin = {o.name: o for o in model.nn_model.inputs}
        tout = {o.name: o for o in model.nn_model.outputs}
        cur = model._state
        self.bufs = [{}, {}]
        for v in self.ins:
            i = tin["state:" + v]
            a = np.array(cur[v], dtype=i.type.dtype)
            o = tout.get("state:" + v)
            alternate = o is not None and o.type.dtype == i.type.dtype and tuple(o.dims or ()) == a.shape
            self.bufs[0][v] = a
            self.bufs[1][v] = a.copy() if alternate else a      # only read: one array for both
        self.paired = {v for v in self.outs if v in self.bufs[0] and self.bufs[1][v] is not self.bufs[0][v]}
        self.k = 0                          # the execution to run next (it reads bufs[k])
        self.bound = [False, False]
        self.last = {}                      # variables assigned but not alternated: latest values

    def run(self, feed):
        k = self.k
        ex = self.execs[k]
        if self.bound[k]:
            res = ex.run(feed, copy=False)
        else:                               # first run of this execution: bind the buffers
            inputs = {n: np.array(a) for n, a in feed.items()}      # its own, written into later
            inputs.update({"state:" + v: self.bufs[k][v] for v in self.ins})
            outputs = {"state:" + v: self.bufs[1 - k][v] for v in self.paired}
            res = ex.run(inputs, outputs, copy=False)
            self.bound[k] = True
        for v in self.outs:
            if v not in self.paired:
                self.last[v] = res["state:" + v]
                if v in self.bufs[0]:       # read too, but of another dtype / shape: copied
                    self.bufs[0][v][...] = self.last[v]
        self.k = 1 - k
        return [res[n].copy() for n in self.names]

    def values(self):
        vals = {v: a.copy() for v, a in self.bufs[self.k].items()}
        vals.update({v: a.copy() for v, a in self.last.items()})
        return vals

    def load(self, values):
        """The variables set to values (reset(), or an assignment to TfliteModel.state)."""
        self.last = {}
        for v, a in values.items():
            if v in self.bufs[self.k]:
                self.bufs[self.k][v][...] = a
            elif v in self.outs:
                self.last[v] = np.array(a)



class _StatePair:
    """Two reusable executions of a streaming model whose state buffers alternate: execution 0
    reads the variables from buffer set 0 and writes their next values into set 1, execution 1
    the other way round, so a step copies its real inputs in and its real outputs out but no
    state (a wake-word model carries a few dozen variable tensors: copying each in and out
    through one execution cost about a fifth of a step).  A variable only read is one array
    both read; one only assigned is an output kept per execution (copied into the array both
    read where it is also read but its input and output operands differ in type or shape)."""

    def __init__(self, model):
        comp = model.compilation
        self.execs = [comp.execution(reusable=True), comp.execution(reusable=True)]
        self.names = list(model.output_names)
        self.ins, self.outs = list(model._state_in), list(model._state_out)
        tin = {o.name: o for o in model.nn_model.inputs}
        tout = {o.name: o for o in model.nn_model.outputs}
        cur = model._state
        self.bufs = [{}, {}]
        for v in self.ins:
            i = tin["state:" + v]
            a = np.array(cur[v], dtype=i.type.dtype)
            o = tout.get("state:" + v)
            alternate = o is not None and o.type.dtype == i.type.dtype and tuple(o.dims or ()) == a.shape
            self.bufs[0][v] = a
            self.bufs[1][v] = a.copy() if alternate else a      # only read: one array for both
        self.paired = {v for v in self.outs if v in self.bufs[0] and self.bufs[1][v] is not self.bufs[0][v]}
        self.k = 0                          # the execution to run next (it reads bufs[k])
        self.bound = [False, False]
        self.last = {}                      # variables assigned but not alternated: latest values

    def run(self, feed):
        k = self.k
        ex = self.execs[k]
        if self.bound[k]:
            res = ex.run(feed, copy=False)
        else:                               # first run of this execution: bind the buffers
            inputs = {n: np.array(a) for n, a in feed.items()}      # its own, written into later
            inputs.update({"state:" + v: self.bufs[k][v] for v in self.ins})
            outputs = {"state:" + v: self.bufs[1 - k][v] for v in self.paired}
            res = ex.run(inputs, outputs, copy=False)
            self.bound[k] = True
        for v in self.outs:
            if v not in self.paired:
                self.last[v] = res["state:" + v]
                if v in self.bufs[0]:       # read too, but of another dtype / shape: copied
                    self.bufs[0][v][...] = self.last[v]
        self.k = 1 - k
        return [res[n].copy() for n in self.names]

    def values(self):
        vals = {v: a.copy() for v, a in self.bufs[self.k].items()}
        vals.update({v: a.copy() for v, a in self.last.items()})
        return vals

    def load(self, values):
        """The variables set to values (reset(), or an assignment to TfliteModel.state)."""
        self.last = {}
        for v, a in values.items():
            if v in self.bufs[self.k]:
                self.bufs[self.k][v][...] = a
            elif v in self.outs:
                self.last[v] = np.array(a)


def load(path: str, feature_level: Optional[int] = None, **compile_options) -> TfliteModel:
    """Parse, map and compile a .tflite model (raises LoadError listing unmapped operators).
    feature_level: the NNAPI feature level to map for (default: the runtime's)."""
    return TfliteModel(path, compile_options, feature_level)
