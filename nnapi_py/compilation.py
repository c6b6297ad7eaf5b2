"""ANeuralNetworksCompilation and ANeuralNetworksBurst."""
import os
import threading
import time

import numpy as np

from . import constants as C
from . import devices
from . import profiling
from .errors import NNError, bad_data, bad_state, strict
from .plan import Plan

PREFERRED_ALIGNMENT = 64   # bytes; a cache line, what numpy kernels like
PREFERRED_PADDING = 64


class Compilation:
    def __init__(self, model, devices=None):
        if model.invalid:
            raise bad_data("the model is invalid (its ANeuralNetworksModel_finish failed)")
        if not model.finished:
            raise bad_state("the model must be finished (ANeuralNetworksModel_finish) before it is compiled")
        self.model = model
        self.devices = devices          # None = ANeuralNetworksCompilation_create
        self.preference = C.PREFER_FAST_SINGLE_ANSWER
        self.priority = C.PRIORITY_DEFAULT
        self.timeout = 0
        self.cache_dir = None
        self.token = None
        self.cache_status = None        # what the compilation cache did at finish (nnapi_py/cache.py)
        self.finished = False
        self.invalid = False
        self.plan = None
        self._cpu_plan = None           # float32 plan for CPU fallback when self.plan has fp16 parts
        self.partition = None           # devices.Partition when devices/faults are configured
        if devices is not None and strict():
            self._check_support()       # NNAPI_PY_STRICT=1: at once (Android: at finish)

    def _check_support(self):
        """Every operation must be supported by one of the devices given to createForDevices
        (no CPU fallback then): Android checks it when the compilation is finished."""
        m = self.model
        for k, op in enumerate(m.operations):
            why = [d.why_not(op, m) for d in self.devices]
            if None not in why:
                raise bad_data(f"operation {k} ({op.op.name}) is not supported by the given devices: "
                               f"{'; '.join(why)}")

    @property
    def single_device(self):
        return self.devices is not None and len(self.devices) == 1

    def _mutable(self):
        if self.finished:
            raise bad_state("the compilation has been finished and can no longer be modified")

    def set_preference(self, p):
        self._mutable()
        if p not in C.PREFERENCES:
            raise bad_data(f"invalid preference {p} (expected 0 LOW_POWER, 1 FAST_SINGLE_ANSWER or 2 SUSTAINED_SPEED)")
        self.preference = p

    def set_priority(self, p):
        self._mutable()
        if p not in C.PRIORITIES:
            raise bad_data(f"invalid priority {p} (expected 90 LOW, 100 MEDIUM or 110 HIGH)")
        self.priority = p

    def set_timeout(self, ns):
        self._mutable()
        if not self.single_device:
            raise bad_data("ANeuralNetworksCompilation_setTimeout needs a compilation created by "
                           "ANeuralNetworksCompilation_createForDevices with exactly one device")
        self.timeout = ns

    def set_caching(self, cache_dir, token):
        self._mutable()
        if not cache_dir.endswith("/"):
            cache_dir += "/"
        self.cache_dir, self.token = cache_dir, bytes(token)

    def finish(self):
        if self.finished:
            raise bad_state("ANeuralNetworksCompilation_finish was already called on this compilation")
        self.finished = True
        if self.devices is not None:
            try:
                self._check_support()
            except NNError:
                self.invalid = True
                raise
        config = devices.CONFIG
        fp16 = ()
        if not config.default:     # devices or faults configured: partition as Android does
            self.partition = devices.Partition(config, self.model, self.devices, self.preference)
            try:
                self.partition.compile()
            except NNError:
                self.invalid = True
                raise
            fp16 = self.partition.fp16_operations()
        try:
            if self.cache_dir is not None or getattr(self, "cache_fds", None):
                self.plan = self._cached_plan(fp16)
            else:
                with np.errstate(all="ignore"):     # constant folding may meet inf/NaN: values, not errors
                    self.plan = Plan(self.model, fp16)
        except NNError:
            self.invalid = True
            raise
        except MemoryError:
            self.invalid = True
            raise NNError(C.OUT_OF_MEMORY, "out of memory while compiling (constants and temporaries)") from None
        except Exception as e:
            self.invalid = True
            from .plan_run import _record_internal
            _record_internal("ANeuralNetworksCompilation_finish", e)
            raise NNError(C.OP_FAILED, f"compilation failed: internal error: {type(e).__name__}: {e}") from e

    def _cache_target(self):
        """(path, None) of the cache entry in the cache directory, or (None, fd): the SL's
        model cache fd (SL_ANeuralNetworksCompilation_setCachingFromFds keeps duplicates as
        self.cache_fds = (model fds, data fds, token); the entry is one file, the first fd)."""
        from . import cache                 # on first use: start-up does not pay for its imports
        if self.cache_dir is not None:
            return os.path.join(self.cache_dir, cache.entry_name(self.token)), None
        model_fds, data_fds, _ = self.cache_fds
        fds = tuple(model_fds) + tuple(data_fds)
        return (None, fds[0]) if fds else (None, None)

    def _cached_plan(self, fp16):
        """The plan from the compilation cache when it holds one for this model, library and
        options; else made here and written there (nnapi_py/cache.py).  cache_status says which."""
        from . import cache
        t0 = time.perf_counter()
        path, fd = self._cache_target()
        if path is None and fd is None:
            self.cache_status = "off (no cache file given)"
            with np.errstate(all="ignore"):
                return Plan(self.model, fp16)
        ops = self.model.operations
        key = cache.key(self, [k for k, o in enumerate(ops) if id(o) in fp16] if fp16 else ())
        where = path if path is not None else f"fd {fd}"
        try:
            try:
                if path is not None:
                    try:
                        f = open(path, "rb")
                    except FileNotFoundError:
                        raise cache.Miss("miss", "no entry") from None
                    except OSError as e:
                        raise cache.Miss("miss", f"cannot read: {e.strerror}") from None
                    with f:
                        stream, buffers = cache.read_entry(cache.FileReader(f), key)
                else:
                    stream, buffers = cache.read_entry(cache.FdReader(fd), key)
                plan = cache.plan_from(stream, buffers, self.model, fp16)
            except OSError as e:
                raise cache.Miss("miss", f"cannot read: {e.strerror}") from None
            self._note(f"hit ({where}, {(time.perf_counter() - t0) * 1e3:.1f} ms)")
            return plan
        except cache.Miss as m:
            why = f"{m.kind} ({m.reason})"
        t1 = time.perf_counter()
        with np.errstate(all="ignore"):
            plan = Plan(self.model, fp16)
        t2 = time.perf_counter()
        try:
            parts = cache.plan_parts(plan, key)
            if path is not None:
                cache.write_entry(path, parts)
            else:
                cache.write_fd(fd, parts)
            done = f"written in {(time.perf_counter() - t2) * 1e3:.1f} ms"
        except Exception as e:          # unwritable directory, full disk, a plan it cannot hold
            done = f"not written: {type(e).__name__}: {e}"
        self._note(f"{why}: compiled in {(t2 - t1) * 1e3:.1f} ms, {done} ({where})")
        return plan

    def _note(self, status):
        self.cache_status = status
        profiling.note("compilation cache " + status)

    def cpu_plan(self):
        """The plan an execution that falls back to the CPU implementation runs: float32
        everywhere (made on first use when the compiled plan has float16 partitions)."""
        if not self.plan.fp16:
            return self.plan
        if self._cpu_plan is None:
            with np.errstate(all="ignore"):
                self._cpu_plan = Plan(self.model)
        return self._cpu_plan

    def _ready(self):
        if self.invalid:
            raise bad_state("the compilation is invalid (its ANeuralNetworksCompilation_finish failed)")
        if not self.finished:
            raise bad_state("the compilation must be finished (ANeuralNetworksCompilation_finish) first")

    def preferred(self, is_input, index, what):
        self._ready()
        n = len(self.model.inputs if is_input else self.model.outputs)
        if not 0 <= index < n:
            raise bad_data(f"{'input' if is_input else 'output'} index {index} is out of range ({n})")
        return PREFERRED_ALIGNMENT if what == "alignment" else PREFERRED_PADDING


class Burst:
    def __init__(self, compilation):
        compilation._ready()
        self.compilation = compilation
        self.lock = threading.Lock()
