"""The Python API's compilation and execution: Compilation, Burst, Execution (binding, the
sync / async / burst runs, dynamic output shapes) and the devices (nnapi_py/nn.py is the public
module)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .nn_base import Memory, _api, _check, _release
from .nn_checks import (UnknownNameError, _as_bool, _as_dtype, _as_int, _check_output_arrays, _named,
                        _shape_error, _shape_text, _timeout, _writable_target)

if TYPE_CHECKING:
    from .nn_model import Operand

_MODES = ("sync", "async", "burst")
_DURATIONS = {"on_hardware": 0, "in_driver": 1, "fenced_on_hardware": 2, "fenced_in_driver": 3}


def _devices() -> Dict[str, Any]:
    """{name: ANeuralNetworksDevice*} of the devices the library shows, in its order."""
    ffi, lib = _api()
    n = ffi.new("uint32_t*")
    _check(lib.ANeuralNetworks_getDeviceCount(n), "ANeuralNetworks_getDeviceCount")
    found = {}
    for k in range(n[0]):
        d = ffi.new("ANeuralNetworksDevice**")
        _check(lib.ANeuralNetworks_getDevice(k, d), "ANeuralNetworks_getDevice")
        s = ffi.new("char**")
        _check(lib.ANeuralNetworksDevice_getName(d[0], s), "ANeuralNetworksDevice_getName")
        found[ffi.string(s[0]).decode()] = d[0]
    return found


def _device_handles(names):
    found = _devices()
    missing = [x for x in names if x not in found]
    if missing:
        raise ValueError(f"devices: no device named {', '.join(map(repr, missing))} (the devices: {sorted(found)}; "
                         f"NNAPI_PY_DEVICES or nn.emulated(devices=...) sets them)")
    return [found[x] for x in names]


def device_names() -> List[str]:
    """Names of the devices the library shows (see NNAPI_PY_DEVICES)."""
    return list(_devices())


def feature_level() -> int:
    return int(_api()[1].ANeuralNetworks_getRuntimeFeatureLevel())


class Compilation:
    def __init__(self, model, preference, devices, priority, timeout_ns, cache_dir, token):
        ffi, lib = _api()
        self.model = model
        p = ffi.new("ANeuralNetworksCompilation**")
        if devices is not None:
            hs = _device_handles(list(devices))
            arr = ffi.new("ANeuralNetworksDevice*[]", hs)
            _check(lib.ANeuralNetworksCompilation_createForDevices(model.handle, arr, len(hs), p),
                   "ANeuralNetworksCompilation_createForDevices")
        else:
            _check(lib.ANeuralNetworksCompilation_create(model.handle, p), "ANeuralNetworksCompilation_create")
        self.handle = p[0]
        _check(lib.ANeuralNetworksCompilation_setPreference(self.handle, preference),
               "ANeuralNetworksCompilation_setPreference")
        if priority is not None:
            _check(lib.ANeuralNetworksCompilation_setPriority(self.handle, priority),
                   "ANeuralNetworksCompilation_setPriority")
        if timeout_ns is not None:
            _check(lib.ANeuralNetworksCompilation_setTimeout(self.handle, timeout_ns),
                   "ANeuralNetworksCompilation_setTimeout")
        if cache_dir is not None:
            tok = ffi.new("uint8_t[]", bytes(token or b"\0" * 32))
            _check(lib.ANeuralNetworksCompilation_setCaching(self.handle, cache_dir.encode(), tok),
                   "ANeuralNetworksCompilation_setCaching")
        _check(lib.ANeuralNetworksCompilation_finish(self.handle), "ANeuralNetworksCompilation_finish")

    def execution(self, *, reusable: bool = False, timeout_ns: Optional[int] = None,
                  measure_timing: bool = False) -> "Execution":
        """A new execution (reusable=True: run it again and again; timeout_ns; measure_timing=True:
        Execution.duration() afterwards)."""
        return Execution(self, _as_bool(reusable, "execution(reusable"), _timeout(timeout_ns, "execution(timeout_ns"),
                         _as_bool(measure_timing, "execution(measure_timing"))

    def run(self, inputs: Union[Mapping[str, Any], Sequence[Any]], outputs: Optional[Mapping[str, np.ndarray]] = None
            ) -> Dict[str, np.ndarray]:
        """One synchronous execution: {input name: array} (or a list in input order) ->
        {output name: array}; dynamic output shapes come back as the execution reports them."""
        return Execution(self, False, None, False).run(inputs, outputs)

    def run_async(self, inputs, outputs=None) -> Dict[str, np.ndarray]:
        """startCompute + Event_wait."""
        return Execution(self, False, None, False).run(inputs, outputs, mode="async")

    def burst(self) -> "Burst":
        return Burst(self)

    def __del__(self):
        _release("ANeuralNetworksCompilation_free", getattr(self, "handle", None))


class Burst:
    """A burst object: run(inputs) executes through ANeuralNetworksExecution_burstCompute."""

    def __init__(self, compilation: Compilation):
        if not isinstance(compilation, Compilation):
            raise TypeError(f"Burst(compilation={compilation!r}): expected a Compilation (Model.compile())")
        ffi, lib = _api()
        p = ffi.new("ANeuralNetworksBurst**")
        _check(lib.ANeuralNetworksBurst_create(compilation.handle, p), "ANeuralNetworksBurst_create")
        self.handle, self.compilation = p[0], compilation

    def run(self, inputs, outputs=None) -> Dict[str, np.ndarray]:
        return Execution(self.compilation, False, None, False).run(inputs, outputs, mode="burst", burst=self)

    def __del__(self):
        _release("ANeuralNetworksBurst_free", getattr(self, "handle", None))


def _max_elements(o: Operand, given: Dict[str, np.ndarray]) -> int:
    if o.dims and all(o.dims):
        return int(np.prod(o.dims))
    biggest = max([a.size for a in given.values()] + [1])
    return max(biggest * 16, 1 << 16)


class Execution:
    """One ANeuralNetworksExecution (reusable=True: run it again and again).

    ``run(inputs, outputs)`` never writes into an array you own unless you asked it to: a
    reusable execution keeps its own copies of the inputs (a later ``run(new_inputs)`` copies the
    new values into them) and its own output buffers (outputs passed to ``run`` receive that
    run's results, and nothing later).  ``bind(inputs, outputs)`` before the first run binds your
    arrays zero-copy instead: the library reads those inputs and writes those outputs in place at
    every run, so changing a bound input in place and calling ``run()`` feeds new data without a
    copy (``run(new_values)`` then writes the new values into your bound array)."""

    _direct: frozenset = frozenset()    # outputs the library writes into the caller's arrays (_bind)
    _again = None                       # compute entry of run(copy=False)'s fast path (every output fixed)
    _out_by_name: Optional[Dict[str, Operand]] = None

    def __init__(self, compilation: Compilation, reusable=False, timeout_ns=None, measure_timing=False):
        ffi, lib = _api()
        p = ffi.new("ANeuralNetworksExecution**")
        _check(lib.ANeuralNetworksExecution_create(compilation.handle, p), "ANeuralNetworksExecution_create")
        self.handle, self.compilation, self.model = p[0], compilation, compilation.model
        self.reusable = bool(reusable)
        self._names: Dict[str, frozenset] = {}     # "input" / "output" -> the model's names (checked per run)
        self._bound = None
        self._pinned: Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]] = ({}, {})   # bind(): the caller's arrays
        self._fixed = None          # {name: view of its buffer} of the fully specified outputs (made
        #                             once; with every output fixed, also run(copy=False)'s result)
        self._scratch = (ffi.new("uint32_t*"), ffi.new("uint32_t[]", 32))    # rank / dimensions
        if reusable:
            _check(lib.ANeuralNetworksExecution_setReusable(self.handle, True), "ANeuralNetworksExecution_setReusable")
        if timeout_ns is not None:
            _check(lib.ANeuralNetworksExecution_setTimeout(self.handle, int(timeout_ns)),
                   "ANeuralNetworksExecution_setTimeout")
        if measure_timing:
            _check(lib.ANeuralNetworksExecution_setMeasureTiming(self.handle, True),
                   "ANeuralNetworksExecution_setMeasureTiming")

    def bind(self, inputs=None, outputs=None) -> "Execution":
        """Bind your own arrays zero-copy (before the first run): every run reads these inputs and
        writes these outputs in place.  Each must already have the operand's dtype and be
        C-contiguous and writeable; inputs not bound here are passed to run() as usual."""
        if self._bound is not None:
            raise ValueError("bind() comes before the execution's first run (its buffers are bound by then)")
        m = self.model
        ins, outs = _named(self._names, inputs, m.inputs, "input"), _named(self._names, outputs, m.outputs, "output")
        by_name = {o.name: o for o in m.inputs + m.outputs}
        for what, given, pinned in (("input", ins, self._pinned[0]), ("output", outs, self._pinned[1])):
            for name, a in given.items():
                o = by_name[name]
                a = _writable_target(a, o, f"bind: {what}")
                if a.shape != o.dims:
                    problem = _shape_error(o, a.shape, f"bind: {what}")
                    if problem:
                        raise ValueError(problem)
                pinned[name] = a
        return self

    def _bind(self, inputs, outputs):
        """The first run: setInput / setOutput for every operand.  Inputs bound with bind() as
        they are; others zero-copy only for a one-shot execution (nothing is written into them),
        private copies for a reusable one.  Outputs: bind()'s as they are; run()'s directly for a
        one-shot execution, else execution-owned buffers the results are copied from."""
        ffi, lib = _api()
        m = self.model
        pinned_in, pinned_out = self._pinned
        keep, arrays = [], {}
        for k, o in enumerate(m.inputs):
            v = inputs.get(o.name)
            if o.name in pinned_in:
                a = pinned_in[o.name]
                if v is not None:
                    v = _as_dtype(v, a.dtype, f"input {o.name!r}")
                    if v.shape != a.shape:
                        raise ValueError(f"input {o.name!r}: array shape {v.shape} differs from the bound array's "
                                         f"{a.shape} (run() copies new values into it: same shape)")
                    a[...] = v
            elif v is None:
                rc = lib.ANeuralNetworksExecution_setInput(self.handle, k, ffi.NULL, ffi.NULL, 0)
                if rc:
                    reason = ffi.string(lib.nnapi_py_last_error()).decode(errors="replace")
                    if "omits the input" not in reason:
                        _check(rc, "ANeuralNetworksExecution_setInput")
                    why = reason.split(", but ", 1)[-1] if ", but " in reason else reason
                    raise ValueError(f"input {o.name!r} is missing: give it to run() (the model's inputs: "
                                     f"{[i.name for i in m.inputs]}); only an input that feeds an optional "
                                     f"operand may be left out, and this one {why.replace('it feeds', 'feeds')}")
                continue
            elif isinstance(v, Memory):
                self._memory_input(k, o, v)
                continue
            else:
                a = _as_dtype(v, o.type.dtype, f"input {o.name!r}")
                shape = a.shape
                if shape != o.fit:              # the declared shape, or the last one accepted
                    problem = _shape_error(o, shape, "input")
                    if problem:
                        raise ValueError(problem)
                    o.fit = shape
                if self.reusable or a is v and not a.flags.writeable:
                    a = np.array(a, order="C")              # its own copy: later runs write into it
                else:
                    a = np.ascontiguousarray(a)
            keep.append(a)
            arrays[o.name] = a
            t = ffi.NULL
            if o.dims and not all(o.dims):
                d = ffi.new("uint32_t[]", a.shape)
                keep.append(d)
                t = ffi.new("ANeuralNetworksOperandType*", {"type": o.type.code, "dimensionCount": a.ndim,
                                                            "dimensions": d, "scale": o.type.scale,
                                                            "zeroPoint": o.type.zero_point})
                keep.append(t)
            _check(lib.ANeuralNetworksExecution_setInput(self.handle, k, t, ffi.from_buffer(a), a.nbytes),
                   "ANeuralNetworksExecution_setInput")
        bufs = {}
        direct = None
        for k, o in enumerate(m.outputs):
            b = pinned_out.get(o.name)
            if b is None and not self.reusable:
                b = outputs.get(o.name)
                if b is not None:           # written in place when its shape is known to be the result's
                    b = _writable_target(b, o, "output")
                    if not (o.dims and all(o.dims)):
                        b = np.empty(max(_max_elements(o, arrays), b.size), o.type.dtype)
                    else:
                        direct = (direct or set()) | {o.name}
            if b is None:
                b = np.empty(_max_elements(o, arrays), o.type.dtype)
            keep.append(b)
            bufs[o.name] = b.reshape(-1)
            _check(lib.ANeuralNetworksExecution_setOutput(self.handle, k, ffi.NULL, ffi.from_buffer(b), b.nbytes),
                   "ANeuralNetworksExecution_setOutput")
        self._bound = (keep, bufs, arrays)
        if direct:
            self._direct = direct

    def _memory_input(self, k: int, o: Operand, mem: "Memory") -> None:
        """setInputFromMemory for the whole of `mem`, its dtype, shape or size checked against
        the operand first (a Memory made from an array knows its dtype and shape)."""
        ffi, lib = _api()
        t = ffi.NULL
        if mem.dtype is not None:
            if mem.dtype != o.type.dtype:
                raise ValueError(f"input {o.name!r}: the Memory holds {mem.dtype} values, the model's input is "
                                 f"{o.type.dtype} ({o.type.name})")
            if mem.shape != o.dims:
                problem = _shape_error(o, mem.shape, "input")
                if problem:
                    raise ValueError(problem + " (the Memory's array)")
                if o.dims != () or not o.type.is_scalar:
                    d = ffi.new("uint32_t[]", mem.shape)
                    t = ffi.new("ANeuralNetworksOperandType*", {"type": o.type.code, "dimensionCount": len(mem.shape),
                                                                "dimensions": d, "scale": o.type.scale,
                                                                "zeroPoint": o.type.zero_point})
                    self._keep_types = getattr(self, "_keep_types", ()) + (d, t)
        elif o.dims and all(o.dims) or o.type.is_scalar:
            need = math.prod(o.dims) * o.type.dtype.itemsize
            if mem.size != need:
                raise ValueError(f"input {o.name!r}: the Memory holds {mem.size} bytes, the model's input "
                                 f"{_shape_text(o.dims)} {o.type.dtype} takes {need}")
        else:
            raise ValueError(f"input {o.name!r} has dimensions given at execution {_shape_text(o.dims)}: a Memory "
                             f"from Memory.from_fd() has no shape; make it with Memory(array) or pass the array")
        _check(lib.ANeuralNetworksExecution_setInputFromMemory(self.handle, k, t, mem.handle, 0, mem.size),
               "ANeuralNetworksExecution_setInputFromMemory")

    def run(self, inputs=None, outputs=None, mode: str = "sync", burst: Optional[Burst] = None,
            copy: bool = True) -> Dict[str, np.ndarray]:
        """Compute; mode "sync", "async" or "burst".  inputs: {name: array} or a list in input
        order; outputs: {name: array} to receive this run's results.  A reusable execution's
        later runs copy new input values into its buffers (same shapes).  copy=False returns the
        execution's output buffers themselves (views the next run overwrites; with fixed output
        shapes the same dict every run: do not change it).  See the class for bind().

        An input array has the operand's declared shape (a 0 there: any size, given by the array;
        a scalar: a number or a 0-d array); it is never reshaped or broadcast.  Its dtype converts
        to the operand's only where no value changes meaning (_as_dtype).  An output array given
        has the result's shape and the operand's dtype, C-contiguous and writeable.  Each is
        otherwise a ValueError naming it, both shapes (or dtypes) and the fix."""
        again = self._again
        if again is not None and inputs is None and outputs is None and not copy and mode == "sync":
            # a reusable execution's next computation on what it holds, fixed output shapes: the
            # same call and result as below without the argument handling (a streaming step)
            rc = again(self.handle)
            if rc:
                _check(rc, "ANeuralNetworksExecution_compute")
            return self._fixed
        ffi, lib = _api()
        m = self.model
        inputs = _named(self._names, inputs, m.inputs, "input")
        outputs = _named(self._names, outputs, m.outputs, "output")
        if mode != "sync":
            if mode not in _MODES:
                raise ValueError(f"mode={mode!r}: one of {', '.join(map(repr, _MODES))}")
            if mode == "burst" and not isinstance(burst, Burst):
                raise TypeError(f"burst={burst!r}: mode 'burst' needs the Burst to run on (compilation.burst())")
        copy_out = outputs
        if outputs:
            by_name = self._out_by_name
            if by_name is None:
                by_name = self._out_by_name = {o.name: o for o in m.outputs}
            _check_output_arrays(outputs, by_name)
        if self._bound is None:
            self._bind(inputs, outputs)
            if not self.reusable:               # bound directly (or pinned), but for dynamic shapes
                copy_out = {k: v for k, v in outputs.items() if k not in self._direct} if outputs else outputs
        elif inputs and self.reusable:      # a one-shot execution's second run fails below (BAD_STATE)
            bound = self._bound[2]
            for name, v in inputs.items():
                if name not in bound:
                    raise UnknownNameError(f"input {name!r} was not bound by the first run (a Memory or omitted): a "
                                           f"reusable execution keeps its inputs; create a new execution")
                a = _as_dtype(v, bound[name].dtype, f"input {name!r}")
                if a.shape != bound[name].shape:
                    raise ValueError(f"input {name!r}: shape {a.shape} differs from the bound {bound[name].shape} "
                                     f"(a reusable execution keeps its shapes; create a new execution)")
                bound[name][...] = a
        if mode == "async":
            ev = ffi.new("ANeuralNetworksEvent**")
            _check(lib.ANeuralNetworksExecution_startCompute(self.handle, ev), "ANeuralNetworksExecution_startCompute")
            try:
                _check(lib.ANeuralNetworksEvent_wait(ev[0]), "ANeuralNetworksEvent_wait")
            finally:
                lib.ANeuralNetworksEvent_free(ev[0])
        elif mode == "burst":
            _check(lib.ANeuralNetworksExecution_burstCompute(self.handle, burst.handle),
                   "ANeuralNetworksExecution_burstCompute")
        else:
            _check(lib.ANeuralNetworksExecution_compute(self.handle), "ANeuralNetworksExecution_compute")
        bufs = self._bound[1]
        fixed = self._fixed
        if fixed is None:                       # fully specified outputs: their views, made once
            fixed = self._fixed = {o.name: bufs[o.name][:math.prod(o.dims)].reshape(o.dims)
                                   for o in m.outputs if o.dims and all(o.dims)}
        if not copy and not copy_out and len(fixed) == len(m.outputs):
            if self.reusable:
                self._again = lib.ANeuralNetworksExecution_compute
            return fixed                        # fixed shapes: the same views every run
        result = {}
        r, d = self._scratch
        for k, o in enumerate(m.outputs):
            v = fixed.get(o.name)
            if v is not None:                   # the shape cannot change: no query
                shape = o.dims
            else:
                rc = lib.ANeuralNetworksExecution_getOutputOperandRank(self.handle, k, r)
                if rc:
                    _check(rc, "ANeuralNetworksExecution_getOutputOperandRank")
                shape = ()
                if r[0]:
                    if r[0] > 32:
                        d = ffi.new("uint32_t[]", r[0])
                    rc = lib.ANeuralNetworksExecution_getOutputOperandDimensions(self.handle, k, d)
                    if rc:
                        _check(rc, "ANeuralNetworksExecution_getOutputOperandDimensions")
                    shape = tuple(d[0:r[0]])
                v = bufs[o.name][:math.prod(shape)].reshape(shape)
            dst = copy_out.get(o.name) if copy_out else None
            if dst is not None:                 # this run's result into the caller's array
                if dst.shape != tuple(shape):
                    raise ValueError(f"output {o.name!r}: array shape {dst.shape} does not match the result's "
                                     f"{tuple(shape)}; pass an array of that shape (or none: run() returns the "
                                     f"result)")
                dst[...] = v
                v = dst
            result[o.name] = v.copy() if copy else v
        return result

    def duration(self, kind: int = 0) -> int:
        """getDuration (after measure_timing=True): nanoseconds (UINT64_MAX when unavailable).
        kind: 0 on hardware, 1 in driver, 2 fenced on hardware, 3 fenced in driver (or those names)."""
        if isinstance(kind, str) and kind in _DURATIONS:
            kind = _DURATIONS[kind]
        else:
            kind = _as_int(kind, "duration(kind", 0, 3, f"0..3 or one of {', '.join(map(repr, _DURATIONS))}")
        ffi, lib = _api()
        d = ffi.new("uint64_t*")
        _check(lib.ANeuralNetworksExecution_getDuration(self.handle, kind, d), "ANeuralNetworksExecution_getDuration")
        return int(d[0])

    def __del__(self):
        _release("ANeuralNetworksExecution_free", getattr(self, "handle", None))

