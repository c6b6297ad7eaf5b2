"""ANeuralNetworksExecution: the preparation -> computation -> completed state machine."""
import threading
import time

import numpy as np

from . import constants as C
from . import devices
from .cffi_util import view_array
from .errors import NNError, bad_data, bad_state, lenient, null
from .event import Event, pool
from .operand import byte_size, check_operand_type, dims_text
from .ops.control import loop as _loop

PREPARATION, COMPUTATION, COMPLETED = 0, 1, 2
UINT64_MAX = 0xFFFFFFFFFFFFFFFF
_SCALARS = C.SCALAR_TYPES


# One input or output binding: a tuple (addr, length, dims, memory, offset, omitted).
def _IO(addr, length, dims, memory=None, offset=0, omitted=False):
    return (addr, length, dims, memory, offset, omitted)


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


def _given_dims(kind, index, declared, given, partial):
    """The dimensions of a tensor input/output from the type given to setInput/setOutput (or
    their FromMemory variants), as Android 14's checkDimensionInfo: the type of an input with a
    buffer must be fully specified (rank >= 1, no 0; `partial` for outputs and omitted inputs);
    a model of known rank fixes the rank and every non-zero dimension, also against a 0."""
    if not partial and (not given or not all(given)):
        raise bad_data(f"{kind} {index}: the operand type given has dimensions {dims_text(given)}; an input's "
                       f"type must be fully specified (rank >= 1, no 0 dimension)")
    if not declared:                         # unknown rank in the model
        return given if given or kind == "input" else None
    if len(given) != len(declared):
        raise bad_data(f"{kind} {index}: rank {len(given)} differs from the model's rank {len(declared)}")
    for i, (a, b) in enumerate(zip(declared, given)):
        if a and a != b:
            raise bad_data(f"{kind} {index}: dimension {i} is given as {b} but the model fixes it to {a} "
                           f"(only the model's unspecified dimensions can be given)")
    return given


def _check_output(k, given, shape):
    """A computed model output against what the client fixed, before anything is written: as
    Android 14's ExecutionBuilder::updateOutputShapes, the computation fails (OP_FAILED) when
    the shape contradicts a dimension given for the output (setOutput's type, or the model's
    when none was given).  A size past 2^32 - 1 bytes never reaches here: the plan's
    size_problem fails every computed operand first, outputs included."""
    if given and (len(given) != len(shape) or any(g and g != d for g, d in zip(given, shape))):
        raise NNError(C.OP_FAILED, f"output {k}: the computed shape {list(shape)} differs from the dimensions "
                                   f"{dims_text(given)} given for it")


class Execution:
    # defaults as class attributes: creating an execution sets only what differs per object
    state = PREPARATION
    reusable = False
    padding = False
    any_set = False
    measure = False
    timeout = 0
    loop_timeout = C.DEFAULT_LOOP_TIMEOUT_NS
    status = None
    out_shapes = None
    durations = None
    _bound = None        # cached (in_arrays, out_arrays) of a reusable execution

    def __init__(self, compilation):
        if not compilation.finished or compilation.invalid:
            compilation._ready()
        self.compilation = compilation
        plan = self.plan = compilation.plan
        self.model = compilation.model
        self.ins = [None] * len(plan.inputs)
        self.outs = [None] * len(plan.outputs)

    # ---- preparation -------------------------------------------------------------------------
    def _prep(self):
        if self.state != PREPARATION:
            raise bad_state("the execution is no longer in the preparation state")

    def set_io(self, is_input, index, tdesc, addr, length, memory=None, offset=0):
        if self.state != PREPARATION:
            raise bad_state("the execution is no longer in the preparation state")
        lst = self.ins if is_input else self.outs
        kind = "input" if is_input else "output"
        if not 0 <= index < len(lst):
            raise bad_data(f"{kind} index {index} is out of range (model has {len(lst)} {kind}s)")
        m = self.model
        op = (m.inputs if is_input else m.outputs)[index]
        code = m.types[op]
        declared = m.dims[op]
        if tdesc is not None:
            tcode, tdims, tscale, tzp = tdesc
            if tcode != code:
                raise bad_data(f"{kind} {index}: the operand type given is {C.TYPE_NAMES.get(tcode, tcode)}, "
                               f"the model's is {C.TYPE_NAMES[code]} (only unspecified dimensions may be filled in)")
            if tscale != m.scales[op] or tzp != m.zps[op]:
                check_operand_type(tcode, tuple(tdims), tscale, tzp, f"{kind} {index}: the operand type given")
                lenient("quantization given at setInput/setOutput is ignored",
                        f"{kind} {index}: the operand type given has scale {tscale:g} and zeroPoint {tzp}, the "
                        f"model's has scale {m.scales[op]:g} and zeroPoint {m.zps[op]}; the model's are used")
            if code in _SCALARS:
                if tdims:
                    raise bad_data(f"{kind} {index}: a scalar cannot be given dimensions")
                dims = ()
            else:
                dims = _given_dims(kind, index, declared, tuple(tdims),
                                   partial=not is_input or (memory is None and addr == 0))
        else:
            dims = () if code in _SCALARS else declared
        if lst[index] is not None:
            raise bad_state(f"{kind} {index} has already been set")
        if memory is None and addr == 0:
            if length != 0:
                raise null(f"{kind} {index}: buffer is NULL but length is {length}")
            if is_input and dims and all(dims):
                what = self.plan.required_inputs.get(index)
                if what is not None:           # omission is for optional inputs (a zero-sized one is not omitted)
                    raise bad_data(f"input {index}: a NULL buffer omits the input, but it feeds {what}, which is "
                                   f"not optional")
            lst[index] = _IO(0, 0, dims, omitted=True)
            self.any_set = True
            return
        known = dims is not None and all(dims)
        if is_input and not known:
            raise bad_data(f"{kind} {index}: dimensions {dims_text(dims)} are not fully specified; "
                           f"pass an ANeuralNetworksOperandType with the actual dimensions")
        if memory is not None and memory.kind == "desc":
            if offset != 0 or length != 0:
                raise bad_data(f"{kind} {index}: memory from a descriptor needs offset 0 and length 0")
            roles = memory.roles_in if is_input else memory.roles_out
            if (self.compilation, index) not in roles:
                raise bad_data(f"{kind} {index}: the memory descriptor has no {kind} role for this index")
            if tdesc is not None and dims and memory.dims and (
                    len(dims) != len(memory.dims) or any(a and b and a != b for a, b in zip(dims, memory.dims))):
                # Android 14's DeviceMemoryValidator::validate: against the descriptor's dimensions
                raise bad_data(f"{kind} {index}: dimensions {dims_text(dims)} are incompatible with the memory's "
                               f"{dims_text(memory.dims)} (from its descriptor)")
            lst[index] = _IO(0, 0, dims, memory, 0)
            self.any_set = True
            return
        if known:
            need = byte_size(code, dims)
            if length < need or (length != need and not self.padding):
                raise bad_data(f"{kind} {index}: length {length} does not match the operand size {need} bytes"
                               + ("" if self.padding else " (enable padding to pass a larger buffer)"))
        if memory is not None:
            memory.check_region(offset, length, f"{kind} {index}")
            if not is_input and not memory.writable:
                raise bad_data(f"{kind} {index}: the memory is not writable")
            if is_input and not getattr(memory, "readable", True):
                raise bad_data(f"{kind} {index}: the memory is not readable (it was created without PROT_READ)")
        lst[index] = _IO(addr, length, dims, memory, offset)
        self.any_set = True

    def enable_padding(self, enable):
        self._prep()
        if self.any_set:
            raise bad_state("enableInputAndOutputPadding must be called before any input or output is set")
        self.padding = bool(enable)

    def set_reusable(self, r):
        self._prep()
        self.reusable = bool(r)

    def set_measure(self, measure):
        self._prep()
        if not self.compilation.single_device:
            raise bad_data("setMeasureTiming needs a compilation created by createForDevices with exactly one device")
        self.measure = bool(measure)

    def set_timeout(self, ns):
        self._prep()
        if not self.compilation.single_device:
            raise bad_data("ANeuralNetworksExecution_setTimeout needs a compilation created by "
                           "createForDevices with exactly one device")
        self.timeout = ns

    def set_loop_timeout(self, ns):
        self._prep()
        self.loop_timeout = min(ns, C.MAXIMUM_LOOP_TIMEOUT_NS)

    # ---- computation ---------------------------------------------------------------------------
    def begin(self):
        """Move to the computation state (raises on misuse)."""
        with _state_lock:
            if self.state != PREPARATION:
                if self.state == COMPUTATION:
                    raise bad_state("a computation of this execution is already in progress")
                if not self.reusable:
                    raise bad_state("the execution has completed and is not reusable")
            if None in self.ins or None in self.outs:
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
            if QUIET_NUMPY:
                if not getattr(_quiet, "on", False):   # np.seterr is per thread: once on each thread
                    np.seterr(all="ignore")
                    _quiet.on = True
                status = self._compute(deadline, plan)
            else:                                       # numpy warnings must not reach a host's stderr
                token = _quiet_enter()
                try:
                    status = self._compute(deadline, plan)
                finally:
                    _quiet_leave(token)
        except NNError as e:
            from .errors import set_last
            set_last("ANeuralNetworksExecution_compute", e.code, e.reason)
            status = e.code
        except MemoryError:
            from .errors import set_last
            set_last("ANeuralNetworksExecution_compute", C.OUT_OF_MEMORY,
                     "out of memory: the computation's tensors need more memory than this process can allocate")
            status = C.OUT_OF_MEMORY
        except Exception as e:
            from .errors import set_last
            from .plan import _record_internal
            _record_internal("ANeuralNetworksExecution_compute", e)
            set_last("ANeuralNetworksExecution_compute", C.OP_FAILED, f"internal error: {type(e).__name__}: {e}")
            status = C.OP_FAILED
        if self.measure:
            dt = time.perf_counter_ns() - t0
            if status == C.NO_ERROR:
                self.durations = (dt, dt, dt if fenced else UINT64_MAX, dt if fenced else UINT64_MAX)
            else:
                self.durations = None
        return status

    def _input_array(self, k, io):
        if io[5]:
            return None
        m = self.model
        code = m.types[m.inputs[k]]
        dt = C.DTYPES[code]
        if io[3] is not None:
            mem = io[3]
            if mem.kind == "desc":
                if not mem.initialized:
                    raise NNError(C.OP_FAILED, f"input {k}: the descriptor memory is not initialized")
                shape = mem.shape
                if code not in _SCALARS and tuple(io[2]) != tuple(shape):
                    # Android 14's validateInputDimensions, at every computation
                    raise NNError(C.OP_FAILED, f"input {k}: dimensions {dims_text(io[2])} differ from the shape "
                                               f"{list(shape)} the descriptor memory holds")
                raw = mem.array[:byte_size(code, shape)]
            else:
                shape = io[2]
                raw = mem.bytes[io[4]:io[4] + byte_size(code, shape)]
            a = raw.view(dt)
            return a[0] if code in _SCALARS else a.reshape(shape)
        if code in _SCALARS:
            return view_array(io[0], dt.itemsize, dt, (1,))[0]
        return view_array(io[0], byte_size(code, io[2]), dt, io[2])

    def _output_region(self, k, io, need):
        """(kind, obj): raw uint8 region able to hold `need` bytes, or None if too small."""
        if io[3] is not None:
            mem = io[3]
            if mem.kind == "desc":
                return mem.ensure(need)[:need]
            if need > io[1]:
                return None
            return mem.bytes[io[4]:io[4] + need]
        if need > io[1]:
            return None
        return view_array(io[0], need, np.uint8, (need,)) if need else np.empty(0, np.uint8)

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
        plan.run_static(bound[0], bound[1], deadline, bound[2])
        self.out_shapes = plan.out_shapes
        if not bound[2]:                    # views of memories: descriptor memories learn their shape
            self._mark_desc_outputs(self.out_shapes)
        return C.NO_ERROR

    def has_desc_memory(self):
        return any(io[3] is not None and io[3].kind == "desc" for io in self.ins + self.outs)

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
