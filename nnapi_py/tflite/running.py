"""Running a loaded .tflite model (TfliteModel's base): run() checks the arrays (inout.py) and
feeds them to the plan with as little in between as the plan's own run: one NNAPI partition runs
on a pair of reusable executions (_StatePair) whose input buffers are filled in place and whose
state buffers alternate, so a step copies only its real inputs in and its real outputs out;
several partitions run through partition.Stitch; the variables of streaming models carry from one
run to the next (state, reset()); inputs of other shapes than compiled for (where the signature
has -1) run on a variant compiled for them."""
from __future__ import annotations

import os
from typing import Dict, List, Sequence

import numpy as np

from .. import nn
from . import inout, shapes


class Running:
    """run(), state and reset() of a TfliteModel (the loading is model.TfliteModel's)."""

    def run(self, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Inputs in the model's input order -> outputs in its output order.  A streaming model's
        variables are carried from one call to the next (reset() starts over)."""
        p = self._pair
        if p and type(inputs) in (list, tuple) and len(inputs) == len(p.specs):
            # a step of a streaming model: arrays of the compiled shapes and dtypes, run as they
            # are on the reusable executions (what the general way below does with them)
            for a, (shape, dtype) in zip(inputs, p.specs):
                if type(a) is not np.ndarray or a.shape != shape or a.dtype != dtype:
                    break
            else:
                if self._exec_lock.acquire(False):
                    try:
                        return p.run(inputs)
                    except nn.NNAPIError as e:
                        raise self._told(e) from None
                    finally:
                        self._exec_lock.release()
        if self.check_only:
            raise RuntimeError(f"{os.path.basename(self.path)} was loaded with check_only=True: report() only")
        inputs = inout.check_inputs(self._inputs, inputs)      # count, shape, dtype: ValueError naming the input
        if self.open_inputs and tuple(a.shape for a in inputs) != self.input_shapes:
            return self._run_variant(inputs)
        try:
            return self._run(inputs)
        except nn.NNAPIError as e:
            raise self._told(e) from None

    def _told(self, e):
        """The error a run raises for the library's error e: a rule Android checks at execution
        that failed at the file's placeholder shapes says why."""
        if not self._file_shapes or e.code_name != "OP_FAILED":
            return e
        return nn.NNAPIError(e.code, f"{e.reason}. {self._shapes_hint()}", e.call)

    def _run(self, inputs):
        if self._stitch is not None:
            with self._exec_lock:
                outs, assigned = self._stitch.run(list(inputs), self._state)
                self._state = {**self._state, **assigned}
            return outs
        if self._pair is not False and self._exec_lock.acquire(blocking=False):
            try:
                res = self._run_reusable(inputs)
            finally:
                self._exec_lock.release()
            if res is not None:
                return res
        feed = {n: a for n, a in zip(self.input_names, inputs)}
        state = self.state
        for var in self._state_in:
            feed["state:" + var] = state[var]
        res = self.compilation.run(feed)
        self.state = {**state, **{var: res["state:" + var] for var in self._state_out}}
        return [res[n] for n in self.output_names]

    def _shapes_hint(self):
        sig = "; ".join(f"'{self.tensors[i].name}' {list(s)}" for i, s in
                        zip(self.graph.inputs, shapes.signatures(self.graph)))
        return (f"The inputs' shape signatures have -1 ({sig}): if the file's shapes are not ones the "
                f"model runs at, compile for the shapes you run with load(path, input_shapes=[...]).")

    def _run_variant(self, inputs):
        """Inputs of other shapes than compiled for (where their signatures have -1): run them on
        this model compiled for those shapes, made on first use and kept (the 8 last used); the
        variables of a streaming model carry over."""
        key = shapes.check(self.graph, [np.shape(a) for a in inputs])
        v = self.variants.pop(key, None)
        if v is None:
            compile_options, feature_level, max_partitions = self._options
            v = type(self)(self.path, compile_options, feature_level, max_partitions, input_shapes=key)
            while len(self.variants) >= 8:
                self.variants.pop(next(iter(self.variants)))
        self.variants[key] = v
        carried = bool(self._state_in or self._state_out)
        if carried:
            v.state = self.state
        out = v.run(inputs)
        if carried:
            self.state = v.state
        return out

    def _run_reusable(self, inputs):
        """The outputs of a run on the model's pair of reusable executions (_StatePair; the caller
        holds _exec_lock), made on the first call.  None -- the caller makes a fresh execution --
        when the runtime has no reusable executions (feature level < 5) or the pair cannot take
        these arrays (inputs of other dtypes or shapes than its buffers')."""
        p = self._pair
        if p is None:
            try:
                p = _StatePair(self)
            except (nn.NNAPIError, ValueError):
                self._pair = False
                return None
            self._pair = p
        return p.run(inputs)

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
        """Variables back to their initial values (also those LiteRT keeps in CPU partitions)."""
        self.state = self.initial_state
        if getattr(self, "_stitch", None) is not None:
            self._stitch.reset()


class _StatePair:
    """Two reusable executions of a model whose state buffers alternate (one execution where no
    state alternates): execution 0 reads the variables from buffer set 0 and writes their next
    values into set 1, execution 1 the other way round; every input is bound to a buffer of the
    pair's own.  A step copies its real inputs into those buffers and its real outputs out, and
    no state (a wake-word model carries a few dozen variable tensors: copying each in and out
    through one execution cost about a fifth of a step).  A variable only read is one array both
    read; one only assigned is an output kept per execution (copied into the array both read
    where it is also read but its input and output operands differ in type or shape).
    ValueError when the model's inputs are not all arrays of fixed shape and of the dtypes run()
    hands over (then run() makes fresh executions)."""

    def __init__(self, model):
        comp = model.compilation
        self.execs = [comp.execution(reusable=True)]
        self.names = list(model.output_names)
        self.ins, self.outs = list(model._state_in), list(model._state_out)
        tin = {o.name: o for o in model.nn_model.inputs}
        tout = {o.name: o for o in model.nn_model.outputs}
        given = model.nn_model.inputs[:len(model._inputs)]     # the graph's inputs come first, in order
        self.feed_names = [o.name for o in given]
        self.specs = [(tuple(shape), info.dtype) for info, shape in zip(model._inputs, model.input_shapes)]
        self.feeds = [[], []]               # per execution: the buffer of each model input, bound
        for o, info, shape in zip(given, model._inputs, model.input_shapes):
            shape = tuple(shape)
            if o.type.dtype != info.dtype or tuple(o.dims or ()) != shape:
                raise ValueError(f"input {o.name!r}: not a fixed-shape input of dtype {info.dtype}")
            for bufs in self.feeds:
                bufs.append(np.zeros(shape, info.dtype))
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
        # a second execution only where state alternates: two executions of one plan take turns
        # binding its arena (about 2 us a run), so a model without paired state keeps to one
        self.execs.append(comp.execution(reusable=True) if self.paired else self.execs[0])
        # variables assigned but not alternated: (variable, result name, the array both read or None)
        self.kept = [(v, "state:" + v, self.bufs[0].get(v)) for v in self.outs if v not in self.paired]
        self.k = 0                          # the execution to run next (it reads bufs[k])
        self.bound = [False, False]
        self.results = [None, None]         # per execution: (its result dict, the outputs' views in order)
        self.last = {}                      # variables assigned but not alternated: latest values

    def run(self, arrays):
        """The outputs (fresh arrays) of one step on `arrays`, one per model input of its dtype
        and shape (inout.check_inputs' result)."""
        k = self.k
        for buf, a in zip(self.feeds[k], arrays):
            if a.shape != buf.shape:        # run() hands over only the compiled shapes
                raise ValueError(f"input shape {a.shape}: the executions are bound for {buf.shape}")
            buf[...] = a
        ex = self.execs[k]
        if self.bound[k]:
            res = ex.run(copy=False)
        else:                               # first run of this execution: bind the input and state buffers
            bound = {"state:" + v: self.bufs[k][v] for v in self.ins}
            bound.update(zip(self.feed_names, self.feeds[k]))
            res = inout.first_run(ex, bound, {"state:" + v: self.bufs[1 - k][v] for v in self.paired}, {})
            self.bound[k] = True
            if self.execs[1] is ex:         # one execution in both places (no paired state)
                self.bound[1 - k] = True
        for v, key, both in self.kept:
            self.last[v] = r = res[key]
            if both is not None:            # read too, but of another dtype / shape: copied
                both[...] = r
        if self.paired:
            self.k = 1 - k
        outs = self.results[k]
        if outs is None or outs[0] is not res:  # the execution's output views (the same every run)
            outs = self.results[k] = (res, [res[n] for n in self.names])
        return [a.copy() for a in outs[1]]

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
