"""Running a compiled plan (plan.py builds it): the static run on an arena with the caller's
arrays bound, the dynamic run that infers shapes node by node, and what running and building
share: shape agreement, operand size limits, float16 rounding around kernels, and how a kernel's
unexpected exception becomes a result code."""
import operator
from time import monotonic_ns as _now

import numpy as np

from . import constants as C
from .errors import NNError, op_failed
from .ops.base import Info, MAX_TENSOR_BYTES
from .ops.control import loop as _loop
from .event import halted, park, enter_run, leave_run
from .operand import dims_text
from . import profiling


def _compatible(declared, got):
    if declared is None:
        return True
    if len(declared) == 0 and len(got) == 0:
        return True
    if len(declared) != len(got):
        return len(declared) == 0
    return all(a == 0 or a == b for a, b in zip(declared, got))


UINT32_MAX = 0xFFFFFFFF


def size_problem(name, o, dims, itemsize):
    """Why operand `o` cannot have the shape `dims` computed for it (None if it can): a negative
    dimension or a byte size past uint32 is OP_FAILED, as Android's CPU executor fails such an
    operand ("Operand data size overflows uint32_t"); a size past MAX_TENSOR_BYTES is
    OUT_OF_MEMORY.  Python integers: no overflow while checking."""
    n = 1
    for x in dims:
        if x < 0:
            return op_failed(f"{name}: computed output shape {list(dims)} for operand {o} has a negative dimension")
        n *= x
    nbytes = n * itemsize
    if nbytes > UINT32_MAX or any(x > UINT32_MAX for x in dims):
        return op_failed(f"{name}: computed output shape {list(dims)} for operand {o} needs {nbytes} bytes, "
                         f"more than an operand can hold (2^32 - 1, as in Android's runtime)")
    if nbytes > MAX_TENSOR_BYTES:
        return NNError(C.OUT_OF_MEMORY, f"{name}: computed output shape {list(dims)} for operand {o} needs "
                                        f"{nbytes} bytes, more than one tensor may take ({MAX_TENSOR_BYTES} bytes, "
                                        f"NNAPI_PY_MAX_TENSOR_BYTES)")
    return None


def _itemsize(info):
    dt = C.DTYPES.get(info.type)
    return 1 if dt is None else np.dtype(dt).itemsize


def _to_fp16(a):
    """A float32 array rounded to float16 values (still float32)."""
    return np.asarray(a, np.float32).astype(np.float16).astype(np.float32)


def _in_fp16(kernel, round_ins, round_outs):
    """The kernel of an operation on a float16 partition (a device with fp16 numerics running a
    relaxed model): the float32 inputs listed (model inputs, results of other partitions) are
    rounded to float16 first, its float32 results after.  The kernel computes in float32 in
    between: float32 accumulation of float16 values (docs/decisions.md)."""
    def run(ia, oa):
        if round_ins:
            ia = list(ia)
            for k in round_ins:
                if ia[k] is not None:
                    ia[k] = _to_fp16(ia[k])
        kernel(ia, oa)
        for k in round_outs:
            oa[k][...] = oa[k].astype(np.float16)
    return run


_BINDINGS = 64                  # bindings a plan remembers (Plan.remember_binding)


def _skip(ia, oa):
    """The kernel of a step whose outputs are views of a bound array (Plan._bound_views)."""


def _same(held, arrays):
    """True when held and arrays list the same objects, position by position."""
    return len(held) == len(arrays) and all(map(operator.is_, held, arrays))


class PlanRunner:
    """The running half of plan.Plan (its base): the plan's arenas, steps and bindings are
    made by Plan.__init__ and Plan.take_arena."""

    def remember_binding(self, key, bound):
        b = self.bindings
        if len(b) >= _BINDINGS:
            b.clear()
        b[key] = bound

    # ---- execution ---------------------------------------------------------------------------
    def run_static(self, in_arrays, out_arrays, deadline=None, keep=False, arena=None):
        """Run the static plan on the caller's arrays.  keep (every array a plain view of
        caller memory, which the view cache holds anyway): the arena keeps them bound after
        the run, and a run on the same arrays (the same objects: a reusable execution's, or
        buffers a caller reuses) skips binding them again (a 1-op run: about 2 us); without
        keep (views of an ANeuralNetworksMemory, arrays of the Python API) they are unbound
        at the end, so the arena never keeps a caller's memory alive.  arena: one the caller
        took (take_arena) and gives back (give_arena), else one from the pool for this run."""
        if self.failure is not None:
            self.check_runnable()
        ab = self.take_arena() if arena is None else arena
        enter_run()
        try:
            hi, ho = ab[2], ab[3]
            if not (keep and hi is not None and (hi is in_arrays or _same(hi, in_arrays))
                    and (ho is out_arrays or _same(ho, out_arrays))):
                self.bind(ab, in_arrays, out_arrays, keep)
            self.run_bound(ab, deadline)
        finally:
            leave_run()
            if ab[2] is None:                   # the caller's arrays are not kept
                self._unbind(ab)
            if arena is None:
                self._arenas.append(ab)

    def bind(self, ab, in_arrays, out_arrays, keep=True):
        """Bind the model's input and output arrays into arena ab (its slots and its steps'
        argument lists); keep: held there (ab[2], ab[3]) until bound again, for run_bound."""
        slots, steps = ab[0], ab[1]
        ab[2] = ab[3] = None
        for i, a, refs in zip(self.inputs, in_arrays, self.in_refs):
            slots[i] = a
            for s, side, k in refs:
                steps[s][1 + side][k] = a
        for i, a, refs in zip(self.outputs, out_arrays, self.out_refs):
            slots[i] = a
            for s, side, k in refs:
                steps[s][1 + side][k] = a
        memo = ab[4] if keep else None
        for s, src, outs in self.bound_views:
            self._bind_view(slots, steps, s, slots[src], outs, memo)
        if keep:
            ab[2], ab[3] = in_arrays, out_arrays

    def _bind_view(self, slots, steps, s, a, outs, memo=None):
        """Step s of Plan._bound_views on the bound array a: its readers get a's parts as views
        and the step runs no kernel where each part is a contiguous view of a's memory, else
        (a None, strided, or its part not viewable so) the kernel runs into the arena's
        temporaries, which the readers read.  memo (the arena's, for bindings kept: keep): the
        parts made for the last two arrays bound there whose parts are views, given again when one
        of them comes back (the two executions of a streaming pair take turns binding one arena: the same view
        objects every run, so the readers' kept views of their inputs hit)."""
        got = None
        if memo is not None and a is not None:
            seen = memo.get(s)
            if seen:
                for b, parts in seen:
                    if b is a:
                        got = parts
                        break
        if got is None:
            got = []
            if a is not None:
                for o, where, shape, refs in outs:
                    v = a[where].reshape(shape)
                    if not (isinstance(v, np.ndarray) and v.flags.c_contiguous
                            and (v.base is a or a.base is not None and v.base is a.base)):
                        got = []
                        break
                    got.append(v)
            if memo is not None and got:        # (an array the kernel runs for evicts none)
                memo[s] = [(a, got)] + memo.get(s, [])[:1]
        _, ia, oa = steps[s]
        if got:
            steps[s] = (_skip, ia, oa)
        else:
            steps[s] = (self.steps[s][0], ia, oa)
            got = [slots[o] for o, _, _, _ in outs]
        for (o, _, _, refs), v in zip(outs, got):
            for r, side, k in refs:
                steps[r][1 + side][k] = v

    def _unbind(self, ab):
        slots, steps = ab[0], ab[1]
        for i in self.inputs:
            slots[i] = None
        for i in self.outputs:
            slots[i] = None
        for refs in self.in_refs + self.out_refs:
            for s, side, k in refs:
                steps[s][1 + side][k] = None
        for s, _, outs in self.bound_views:         # the readers back on the arena's temporaries
            self._bind_view(slots, steps, s, None, outs)
        ab[4].clear()                               # nothing of the caller's stays with the arena

    def run_bound(self, ab, deadline=None):
        """Run the steps of arena ab on the arrays bound to it (bind), inside a run (enter_run:
        run_static's, or the plan's whose WHILE runs this plan as its body or condition, step
        after step on arenas it binds once).  Between steps: the process's exit (park) and the
        deadline; a kernel's unexpected exception becomes a result code (kernel_failure)."""
        steps = ab[1]
        if self.has_control:                # IF / WHILE steps read the deadline here (control_step)
            _loop.deadline = deadline
        ia = None
        try:
            if deadline is None:            # the usual case: no per-step clock, no step counter
                for kern, ia, oa in steps:
                    if halted[0]:
                        park()
                    kern(ia, oa)
            else:
                for kern, ia, oa in steps:
                    if halted[0]:
                        park()
                    if _now() > deadline:
                        raise NNError(C.MISSED_DEADLINE_TRANSIENT, "the execution timeout expired")
                    kern(ia, oa)
        except NNError:
            raise
        except Exception as e:
            # the failing step: the one whose input list (an object of its own) is bound
            raise self._step_failure(next((k for k, st in enumerate(steps) if st[1] is ia), None), e) from None

    def _step_failure(self, s, e):
        oo = self.steps[s][2] if s is not None else ()
        return kernel_failure(self._node_name(oo), oo, e)

    def direct_steps(self, ab):
        """Arena ab's steps as (callable, arguments) for run_direct, on the arrays bound to it
        now (Plan.bind; made again when it is bound again): a kernel that offers a direct call
        (kernel.direct(ia, oa): (a numpy function, its arguments) or None: one ufunc call on
        those arrays) is called so, without its own call and list lookups (about 0.15 us a
        step), the others as kernel(ia, oa).  For arenas bound once and run many times (a
        WHILE's loop kit)."""
        got = []
        for kern, ia, oa in ab[1]:
            d = getattr(kern, "direct", None)
            got.append((d is not None and d(ia, oa)) or (kern, (ia, oa)))
        return got

    def run_direct(self, calls, deadline=None):
        """run_bound on the calls direct_steps made: the same checks between steps, the same
        failures."""
        if self.has_control:
            _loop.deadline = deadline
        args = None
        try:
            if deadline is None:
                for fn, args in calls:
                    if halted[0]:
                        park()
                    fn(*args)
            else:
                for fn, args in calls:
                    if halted[0]:
                        park()
                    if _now() > deadline:
                        raise NNError(C.MISSED_DEADLINE_TRANSIENT, "the execution timeout expired")
                    fn(*args)
        except NNError:
            raise
        except Exception as e:
            raise self._step_failure(next((k for k, c in enumerate(calls) if c[1] is args), None), e) from None

    def give_arena(self, ab):
        """An arena taken by take_arena back to the pool."""
        self._arenas.append(ab)

    def _node_name(self, outs):
        for node in self.nodes:
            if tuple(node.outs) == tuple(outs):
                return node.name
        return "an operation"

    def run_dynamic(self, in_arrays, out_provider, deadline=None):
        """Infer shapes node by node from the actual inputs.

        out_provider(k, shape, dtype) returns the array to write model output k into.
        Returns the shapes of the model outputs.
        """
        if self.failure is not None:
            self.check_runnable()
        slots = list(self.template)
        for i, a in zip(self.inputs, in_arrays):
            slots[i] = a
        out_pos = {o: k for k, o in enumerate(self.outputs)}
        out_shapes = [None] * len(self.outputs)
        enter_run()
        try:
            return self._run_nodes(slots, out_pos, out_shapes, out_provider, deadline)
        finally:
            leave_run()

    def _run_nodes(self, slots, out_pos, out_shapes, out_provider, deadline):
        import time
        infos = self.infos
        for node in self.nodes:
            if halted[0]:
                park()
            if deadline is not None and time.monotonic_ns() > deadline:
                raise NNError(C.MISSED_DEADLINE_TRANSIENT, "the execution timeout expired")
            ins_arr = [slots[i] for i in node.ins]
            if node.op.control:
                results = node.op.execute(node, ins_arr, deadline)
                if node.fp16:       # IF / WHILE on a float16 partition: its results rounded
                    results = [_to_fp16(r) if infos[o].type == C.TENSOR_FLOAT32 else r
                               for o, r in zip(node.outs, results)]
                for o, r in zip(node.outs, results):
                    d = tuple(np.shape(r))
                    if not _compatible(infos[o].dims, d):
                        raise op_failed(f"{node.name}: output shape {list(d)} for operand {o} conflicts with "
                                        f"its declared dimensions {dims_text(infos[o].dims)}")
                    k = out_pos.get(o)
                    if k is not None:
                        out_shapes[k] = d
                        arr = out_provider(k, d, infos[o].dtype)
                        arr[...] = r
                        slots[o] = arr
                    else:
                        slots[o] = r
                continue
            if not node.op.allow_zero_sized:
                for k, a in enumerate(ins_arr):
                    if a is not None and np.ndim(a) and np.size(a) == 0:
                        raise op_failed(f"{node.name}: input {k} is zero-sized, which this operation does not support")
            kern = node.kernel
            ins = None
            if kern is None:
                ins = [self._runtime_info(infos[i], a) for i, a in zip(node.ins, ins_arr)]
                key = tuple(None if a is None else (np.shape(a), a.tobytes() if k in node.value_ins else None)
                            for k, a in enumerate(ins_arr))
                hit = node.cache.get(key)
                if hit is None:
                    try:
                        out_dims = [tuple(int(x) for x in d) for d in node.op.infer(ins)]
                    except NNError as e:
                        raise op_failed(e.reason) from None
                    for o, d in zip(node.outs, out_dims):
                        if not _compatible(infos[o].dims, d):
                            raise op_failed(f"{node.name}: computed output shape {list(d)} for operand {o} "
                                            f"conflicts with its declared dimensions {dims_text(infos[o].dims)}")
                        e = size_problem(node.name, o, d, _itemsize(infos[o]))
                        if e is not None:
                            raise e
                    outs = [infos[o].with_dims(d) for o, d in zip(node.outs, out_dims)]
                    try:
                        kern = node.op.build(ins, outs)
                    except NNError as e:
                        raise op_failed(e.reason) from None
                    if node.fp16:
                        kern = _in_fp16(kern, node.round_ins, node.round_outs)
                    if profiling.ENABLED:
                        kern = profiling.timed(node.name, kern, profiling.kernel_label(node.name, ins, outs))
                    if len(node.cache) > 32:
                        node.cache.clear()
                    node.cache[key] = (kern, out_dims)
                else:
                    kern, out_dims = hit
            else:
                out_dims = [self.shapes[o] for o in node.outs]
            outs_arr = []
            for o, d in zip(node.outs, out_dims):
                k = out_pos.get(o)
                if k is not None:
                    out_shapes[k] = d
                    arr = out_provider(k, d, infos[o].dtype)
                else:
                    try:
                        arr = np.empty(d, infos[o].dtype)
                    except (MemoryError, ValueError):
                        raise NNError(C.OUT_OF_MEMORY, f"{node.name}: cannot allocate operand {o} of shape "
                                      f"{list(d)} ({infos[o].dtype.itemsize * int(np.prod(d, dtype=np.float64)):.3g} "
                                      f"bytes)") from None
                slots[o] = arr
                outs_arr.append(arr)
            try:
                kern(ins_arr, outs_arr)
            except NNError:
                raise
            except Exception as e:
                raise kernel_failure(node.name, node.outs, e) from None
        return out_shapes

    @staticmethod
    def _runtime_info(inf, a):
        if a is None:
            return Info(inf.type, inf.dims, inf.scale, inf.zp, inf.channel, None, True, inf.index)
        return Info(inf.type, tuple(np.shape(a)), inf.scale, inf.zp, inf.channel, a, False, inf.index)


def control_step(node, infos, shapes):
    """The static plan's step of an IF / WHILE node (kernel(ins, outs)), or None when the
    plan must run node by node: an input's shape unknown at compilation, an output neither
    declared fully nor given by the referenced models (Op.result_shapes: shapes the same at
    every run), or a float16 partition.
    The step runs the operation (Op.execute, the referenced models' plans) and copies its
    results into the step's output arrays, failing with run_dynamic's reason where a result's
    shape differs from the declared one.  Declares the outputs' shapes (into shapes)."""
    if node.fp16 or any(i not in shapes for i in node.ins):
        return None
    dims = []
    for o in node.outs:
        inf = infos[o]
        d = () if inf.type in C.SCALAR_TYPES else inf.dims
        if inf.type not in C.DTYPES:
            return None
        dims.append(tuple(int(x) for x in d) if d is not None and all(d) else None)
    if None in dims:
        # outputs not declared fully: the shapes the referenced models give, where they are
        # the same at every run (Op.result_shapes: static referenced plans)
        try:
            known = node.op.result_shapes(node, [shapes[i] for i in node.ins], [infos[i].value for i in node.ins])
        except NNError:
            known = None
        if known is None or len(known) != len(dims):
            return None
        for k, (o, d) in enumerate(zip(node.outs, known)):
            if not _compatible(infos[o].dims, d):
                return None                 # fails at execution, with run_dynamic's reason
            dims[k] = d
    for o, d in zip(node.outs, dims):
        shapes[o] = d
    op, name, outs = node.op, node.name, node.outs

    def step(ia, oa):
        results = op.execute(node, ia, getattr(_loop, "deadline", None), oa)
        if results is oa:                   # written there (a flat WHILE's results, of these shapes)
            return
        for o, r, a, d in zip(outs, results, oa, dims):
            if np.shape(r) != d:
                raise op_failed(f"{name}: output shape {list(np.shape(r))} for operand {o} conflicts with "
                                f"its declared dimensions {dims_text(infos[o].dims)}")
            a[...] = r
    return step


INTERNAL_ERRORS = []     # (operation, exception text) of kernel failures that validation should have caught


def kernel_failure(name, outs, exc):
    """The one place a kernel's unexpected exception becomes a result code and reason:
    OUT_OF_MEMORY for memory exhaustion, otherwise OP_FAILED "internal error" (recorded)."""
    if isinstance(exc, MemoryError) or isinstance(exc, ValueError) and "array is too big" in str(exc):
        why = str(exc) if isinstance(exc, MemoryError) and str(exc) else "an array larger than memory"
        return NNError(C.OUT_OF_MEMORY, f"{name}: out of memory while computing operands {list(outs)} ({why})")
    _record_internal(name, exc)
    return NNError(C.OP_FAILED, f"{name}: internal error computing operands {list(outs)} ({type(exc).__name__}: {exc})")


def _record_internal(name, exc):
    """Kept for tests (tests/conftest.py fails a test that caused one) and for NNAPI_PY_TRACE."""
    INTERNAL_ERRORS.append((name, f"{type(exc).__name__}: {exc}"))
    del INTERNAL_ERRORS[:-100]
