"""ANeuralNetworksExecution: the preparation -> computation -> completed state machine; the
computations (compute, burst, startCompute with or without dependencies: static plans on bound
views, dynamic output shapes) and their results.  The preparation state (setInput / setOutput,
settings, the arrays over bound buffers) is execution_io.py's ExecutionIO, its base."""
import threading
import time

import numpy as np

from . import constants as C
from . import devices
from .cffi_util import view_array
from .errors import NNError, bad_data, bad_state
from .event import Event, pool
from .execution_io import COMPLETED, COMPUTATION, PREPARATION, ExecutionIO  # noqa: F401 (sl.py)
from .operand import byte_size, dims_text
from .ops.control import loop as _loop

UINT64_MAX = 0xFFFFFFFFFFFFFFFF
_SCALARS = C.SCALAR_TYPES


# numpy floating-point warnings (inf - inf, ...) are not errors here: in an interpreter we
# started (C host) they are silenced once at start-up; in a Python host, per computation.
QUIET_NUMPY = False
_quiet = threading.local()


def _numpy_error_var():
    """numpy 2's context variable of the floating-point error settings, and its maker."""
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
    return _extobj_contextvar, _make_extobj


def _quiet_context():
    """(enter, leave) silencing numpy's floating-point warnings for one computation in a
    Python host (whose own settings stay as they are outside it).  np.errstate builds its
    error object on every entry (about 1.5 us a computation, 3 in the VM's slow state).
    numpy 2 keeps that object in a context variable: one made once, set and reset per
    computation, is the same thing for 0.1 us.  Those names are private to numpy, so they are
    used only after checking here that they behave as np.errstate does (every warning
    ignored inside, the caller's settings back after); otherwise np.errstate it is."""
    def enter_public():
        es = np.errstate(all="ignore")
        es.__enter__()
        return es

    def leave_public(es):
        es.__exit__(None, None, None)
    try:
        var, make = _numpy_error_var()
        ignore = make(all="ignore")
        before = np.geterr()
        with np.errstate(all="warn"):
            token = var.set(ignore)
            try:
                ok = all(v == "ignore" for v in np.geterr().values())
            finally:
                var.reset(token)
            ok = ok and all(v == "warn" for v in np.geterr().values())
        ok = ok and np.geterr() == before
    except Exception:
        ok = False
    if not ok:
        return enter_public, leave_public
    return (lambda: var.set(ignore)), var.reset


_quiet_enter, _quiet_leave = _quiet_context()

_state_lock = threading.Lock()   # guards state transitions of every execution (held briefly)



def _check_output(k, given, shape):
    """A computed model output against what the client fixed, before anything is written: as
    Android 14's ExecutionBuilder::updateOutputShapes, the computation fails (OP_FAILED) when
    the shape contradicts a dimension given for the output (setOutput's type, or the model's
    when none was given).  A size past 2^32 - 1 bytes never reaches here: the plan's
    size_problem fails every computed operand first, outputs included."""
    if given and (len(given) != len(shape) or any(g and g != d for g, d in zip(given, shape))):
        raise NNError(C.OP_FAILED, f"output {k}: the computed shape {list(shape)} differs from the dimensions "
                                   f"{dims_text(given)} given for it")


def _quietly(fn, *args):
    """fn(*args) with numpy's floating-point warnings silenced: they must not reach a host's
    stderr.  In an interpreter we started (C host) np.seterr, which is per thread, is set once
    on each thread that computes; in a Python host the caller's settings are kept outside."""
    if QUIET_NUMPY:
        if not getattr(_quiet, "on", False):
            np.seterr(all="ignore")
            _quiet.on = True
        return fn(*args)
    token = _quiet_enter()
    try:
        return fn(*args)
    finally:
        _quiet_leave(token)


def _failure(e):
    """The result code of a computation that raised e (its reason: this thread's last error)."""
    from .errors import set_last
    if isinstance(e, NNError):
        set_last("ANeuralNetworksExecution_compute", e.code, e.reason)
        return e.code
    if isinstance(e, MemoryError):
        set_last("ANeuralNetworksExecution_compute", C.OUT_OF_MEMORY,
                 "out of memory: the computation's tensors need more memory than this process can allocate")
        return C.OUT_OF_MEMORY
    from .plan_run import _record_internal
    _record_internal("ANeuralNetworksExecution_compute", e)
    set_last("ANeuralNetworksExecution_compute", C.OP_FAILED, f"internal error: {type(e).__name__}: {e}")
    return C.OP_FAILED


class Execution(ExecutionIO):
    # defaults as class attributes (ExecutionIO's: the preparation state's)
    status = None
    out_shapes = None
    durations = None
    _bound = None        # cached (in_arrays, out_arrays) of a reusable execution
    _again = None        # with _bound: its later computations' run (run's fast path)

    def __init__(self, compilation):
        if not compilation.finished or compilation.invalid:
            compilation._ready()
        self.compilation = compilation
        plan = self.plan = compilation.plan
        self.model = compilation.model
        self.ins = [None] * len(plan.inputs)
        self.outs = [None] * len(plan.outputs)

    # ---- computation ---------------------------------------------------------------------------
    def begin(self):
        """Move to the computation state (raises on misuse)."""
        with _state_lock:
            if self.state != PREPARATION:
                if self.state == COMPUTATION:
                    raise bad_state("a computation of this execution is already in progress")
                if not self.reusable:
                    raise bad_state("the execution has completed and is not reusable")
            if self._bound is None and (None in self.ins or None in self.outs):     # bound: all set
                for kind, lst in (("input", self.ins), ("output", self.outs)):
                    for k, io in enumerate(lst):
                        if io is None:
                            raise bad_data(f"{kind} {k} has not been set (use a NULL buffer with length 0 to omit it)")
            self.state = COMPUTATION

    def end(self, status):
        self.status = status
        self.state = COMPLETED

    def run(self, deps=(), fenced=False):
        """Run the computation; returns a result code (never raises)."""
        again = self._again
        if again is not None:
            # a reusable execution's later computation, bound to plain views of caller memory,
            # with nothing that varies per run (no timing, deadline or device partition): the
            # same run of the plan as below, less what only its first computation needed
            _loop.timeout = self.loop_timeout
            try:
                _quietly(again)
                return C.NO_ERROR
            except Exception as e:
                return _failure(e)
        t0 = time.perf_counter_ns() if self.measure else 0
        try:
            if self.plan.required_inputs:
                for k, what in self.plan.required_inputs.items():
                    if self.ins[k][5]:
                        raise NNError(C.OP_FAILED, f"model input {k} was omitted but {what} is not optional")
            deadline = time.monotonic_ns() + self.timeout if self.timeout else None
            part = self.compilation.partition
            plan = self.plan
            if part is not None:
                fault = part.before_run(deadline)
                if fault == devices.FALLBACK:
                    plan = self.compilation.cpu_plan()
                elif fault is not None:
                    raise NNError(*fault)
            _loop.timeout = self.loop_timeout
            status = _quietly(self._compute, deadline, plan)
        except Exception as e:
            status = _failure(e)
        if self.measure:
            dt = time.perf_counter_ns() - t0
            if status == C.NO_ERROR:
                self.durations = (dt, dt, dt if fenced else UINT64_MAX, dt if fenced else UINT64_MAX)
            else:
                self.durations = None
        return status

    def _compute(self, deadline, plan):
        bound = self._bound                 # a reusable execution's, after its first computation
        if bound is None:
            if plan.static:
                # an execution on the same buffers as an earlier one of this compilation (a client
                # reusing its buffers, frame after frame) takes that one's binding: the same views
                key = (*self.ins, *self.outs)
                bound = plan.bindings.get(key)
                if bound is None:
                    bound = self._bind_static()
                    if bound is not None and bound[2]:
                        plan.remember_binding(key, bound)
            if bound is None:
                return self._compute_dynamic([self._input_array(k, io) for k, io in enumerate(self.ins)],
                                             deadline, plan)
            if self.reusable and (bound[2] or not self.has_desc_memory()):
                self._bound = bound
                if (bound[2] and not self.measure and not self.timeout and self.compilation.partition is None
                        and plan is self.plan):
                    run_static, ins, outs = plan.run_static, bound[0], bound[1]
                    self._again = lambda: run_static(ins, outs, None, True)
        plan.run_static(bound[0], bound[1], deadline, bound[2])
        self.out_shapes = plan.out_shapes
        if not bound[2]:                    # views of memories: descriptor memories learn their shape
            self._mark_desc_outputs(self.out_shapes)
        return C.NO_ERROR

    def _bind_static(self):
        """(input arrays, output arrays, keep) for the compiled static plan, or None when this
        execution's inputs differ in shape from the plan or an output buffer is too small.
        keep: every array is a plain (cached) view of caller memory (Plan.run_static)."""
        plan = self.plan
        ins = []
        keep = True
        for k, io in enumerate(self.ins):
            if io[3] is None and not io[5] and io[2] is plan.in_dims[k]:
                if not plan.in_scalar[k]:
                    ins.append(view_array(io[0], plan.in_bytes[k], plan.in_dtypes[k], plan.in_shapes[k]))
                else:               # the value read now: a binding of it is never remembered
                    ins.append(view_array(io[0], plan.in_bytes[k], plan.in_dtypes[k], (1,))[0])
                    keep = False
                continue
            keep = False
            a = self._input_array(k, io)
            s = plan.in_static[k]
            if a is not None and s is not None and np.shape(a) != s:
                return None
            ins.append(a)
        outs = []
        for k, io in enumerate(self.outs):
            shape = plan.out_shapes[k]
            dt = plan.out_dtypes[k]
            need = plan.out_static_bytes[k]
            if io[2] is not self.model.dims[self.model.outputs[k]]:
                _check_output(k, io[2], shape)
            if io[5]:
                outs.append(np.empty(shape, dt))
                keep = False
                continue
            if io[3] is None and need <= io[1]:
                if not plan.out_scalar[k]:
                    outs.append(view_array(io[0], need, dt, shape))
                else:
                    outs.append(view_array(io[0], need, dt, (1,))[0:1].reshape(()))
                    keep = False
                continue
            keep = False
            reg = self._output_region(k, io, need)
            if reg is None:
                return None
            arr = reg.view(dt)
            outs.append(arr[0:1].reshape(()) if plan.out_scalar[k] else arr.reshape(shape))
        return ins, outs, keep

    def _compute_dynamic(self, ins, deadline, plan):
        m = self.model
        insufficient = []
        temps = {}

        def provider(k, shape, dt):
            io = self.outs[k]
            o = m.outputs[k]
            need = byte_size(m.types[o], shape)
            _check_output(k, io[2], shape)
            if io[5]:
                return np.empty(shape, dt)
            reg = self._output_region(k, io, need)
            if reg is None:
                insufficient.append(k)
                a = np.empty(shape, dt)
                temps[k] = a
                return a
            arr = reg.view(dt)
            return arr[0:1].reshape(()) if m.types[o] in _SCALARS else arr.reshape(shape)

        shapes = plan.run_dynamic(ins, provider, deadline)
        self.out_shapes = shapes
        if insufficient:
            from .errors import set_last
            k = insufficient[0]
            set_last("ANeuralNetworksExecution_compute", C.OUTPUT_INSUFFICIENT_SIZE,
                     f"output {k} needs {byte_size(m.types[m.outputs[k]], shapes[k])} bytes for shape "
                     f"{list(shapes[k])} but its buffer has {self.outs[k][1]}")
            for kk in range(len(self.outs)):
                io = self.outs[kk]
                if io[3] is not None and io[3].kind == "desc":
                    io[3].initialized = False
            return C.OUTPUT_INSUFFICIENT_SIZE
        self._mark_desc_outputs(shapes)
        return C.NO_ERROR

    def _mark_desc_outputs(self, shapes):
        for k, io in enumerate(self.outs):
            if io[3] is not None and io[3].kind == "desc":
                io[3].initialized = True
                io[3].shape = tuple(shapes[k])

    def compute(self):
        self.begin()
        status = self.run()
        if status:
            self._finish_status(status)
        self.end(status)
        return status

    def _finish_status(self, status):
        if status not in (C.NO_ERROR, C.OUTPUT_INSUFFICIENT_SIZE):
            for io in self.outs:
                if io is not None and io[3] is not None and io[3].kind == "desc":
                    io[3].initialized = False

    def start(self, deps=(), with_fence=False):
        self.begin()
        ev = Event(with_fence)

        def task():
            status = C.NO_ERROR
            for d in deps:
                if d.wait() != C.NO_ERROR:
                    status = C.OP_FAILED
                    from .errors import set_last
                    set_last("ANeuralNetworksEvent_wait", status, "a dependency of this execution failed")
                    break
            if status == C.NO_ERROR:
                status = self.run(fenced=bool(deps))
            self._finish_status(status)
            self.end(status)
            from .errors import last_error
            ev.signal(status, last_error()[1] if status else "")

        pool.submit(task)
        return ev

    # ---- results ---------------------------------------------------------------------------------
    def _completed(self, k):
        if self.state != COMPLETED:
            raise bad_state("the execution has not completed")
        if self.status not in (C.NO_ERROR, C.OUTPUT_INSUFFICIENT_SIZE):
            raise bad_state("the last computation of this execution failed")
        if not 0 <= k < len(self.outs):
            raise bad_data(f"output index {k} is out of range (model has {len(self.outs)} outputs)")
        shape = self.out_shapes[k] if self.out_shapes else None
        if shape is None:
            raise NNError(C.OUTPUT_INSUFFICIENT_SIZE, f"the shape of output {k} was not computed")
        return tuple(shape)

    def output_rank(self, k):
        shape = self._completed(k)
        return len(shape), self.status

    def output_dims(self, k):
        shape = self._completed(k)
        if self.model.types[self.model.outputs[k]] in _SCALARS:
            raise bad_data(f"output {k} is a scalar: it has no dimensions")
        return shape, self.status

    def duration(self, code):
        if code not in C.DURATION_CODES:
            raise bad_data(f"invalid duration code {code}")
        if self.state != COMPLETED:
            raise bad_state("the execution has not completed")
        if not self.measure:
            raise NNError(C.BAD_STATE, "timing was not requested with ANeuralNetworksExecution_setMeasureTiming")
        if self.status != C.NO_ERROR or self.durations is None:
            raise bad_state("the last computation of this execution failed")
        return self.durations[code]

