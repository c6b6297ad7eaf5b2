"""Running the prepared tests: one (test, mode) at a time through the C ABI (Runner: build, compile, execute in
the mode, read the output shapes, compare), the records and per-operation counts (Results), a watchdog that
aborts a hung run loudly, and run(), the entry point of the tests and tools."""

from __future__ import annotations

import collections
import dataclasses
import faulthandler
import hashlib
import os
import sys
import threading
import time

import numpy as np

from .abi import Library, ModelBuilder, StepFailure, default_lib_path
from .vectors import (DTYPES, ConformanceSkip, PreparedTest, compare_values, cts_available, default_cts_dir,
                      load_vectors, numel, skip_message)

ALL_MODES = ("sync", "async", "burst", "dynamic")
PASSED, FAILED, NOT_IMPLEMENTED = "passed", "failed", "not_implemented"
STATUSES = (PASSED, FAILED, NOT_IMPLEMENTED)
WHILE_EF_LOOP_TIMEOUT_NS = 200_000_000   # expectFailure models with WHILE (infinite loops)


@dataclasses.dataclass
class Record:
    test_id: str
    folder: str
    spec: str
    name: str
    ops: tuple
    mode: str
    status: str
    step: str = ""
    code: object = None
    code_name: str = ""
    message: str = ""
    detail: str = ""
    expect_failure: bool = False
    ni_op: str = ""          # NOT_IMPLEMENTED: the operation addOperation rejected

    def describe(self) -> str:
        s = f"[{self.mode}] {self.test_id} ({','.join(self.ops)}): "
        if self.step:
            s += f"step {self.step}"
        if self.code is not None:
            s += f" -> {self.code} ({self.code_name})"
        if self.message:
            s += f": {self.message}"
        if self.detail:
            s += f" | {self.detail}"
        return s


class Runner(ModelBuilder):
    """One PreparedTest in one mode -> Record (see nnapi_py/testing/cts.py for the modes and statuses)."""
    # -- one test in one mode ----------------------------------------------------------------
    def run(self, test: PreparedTest, mode: str) -> Record:
        rec = Record(test.test_id, test.folder, test.spec, test.name, test.ops, mode, PASSED,
                     expect_failure=test.expect_failure)
        st = {"keep": [], "models": [], "refmodels": {}, "building": set(), "memory": None,
              "fd": None, "compilation": None, "execution": None, "burst": None}
        try:
            try:
                phase = self._execute(test, mode, st)
            finally:
                self._free(st)
            if test.expect_failure:
                rec.status = FAILED
                rec.step = "expectFailure"
                rec.message = "model is marked expectFailure but every step succeeded"
                return rec
            outputs, shapes = phase
            self._compare(test, outputs, shapes)
        except StepFailure as f:
            rec.step, rec.code, rec.message, rec.detail = f.step, f.code, f.message, f.detail
            rec.code_name = self.L.code_name(f.code) if f.code is not None else ""
            if f.not_implemented:
                rec.status = NOT_IMPLEMENTED
                rec.ni_op = f.not_implemented
            elif test.expect_failure and f.step not in ("runner", "runner-error"):
                rec.status = PASSED     # the model must fail somewhere, and it did
            else:
                rec.status = FAILED
        except Exception as exc:    # a runner bug or odd data: report, never crash
            rec.status, rec.step = FAILED, "runner-error"
            rec.message = f"{type(exc).__name__}: {exc}"
        return rec

    def _execute(self, test, mode, st):
        ffi, lib = self.ffi, self.lib
        keep = st["keep"]
        dynamic = mode == "dynamic"
        main = self._build_subgraph(test, test.main, "", dynamic, st)
        if test.relaxed:
            self._check(lib.ANeuralNetworksModel_relaxComputationFloat32toFloat16(main, True),
                        "relaxComputationFloat32toFloat16")
        self._check(lib.ANeuralNetworksModel_finish(main), "Model_finish")

        cp = ffi.new("ANeuralNetworksCompilation**")
        token = hashlib.sha256(f"{test.test_id} {mode}".encode()).digest() if self.cache_dir else None
        if token:           # the first compilation writes the cache entry (its result is the second's)
            self._check(lib.ANeuralNetworksCompilation_create(main, cp), "Compilation_create")
            lib.ANeuralNetworksCompilation_setCaching(cp[0], self.cache_dir.encode(), token)
            lib.ANeuralNetworksCompilation_finish(cp[0])
            lib.ANeuralNetworksCompilation_free(cp[0])
        self._check(lib.ANeuralNetworksCompilation_create(main, cp), "Compilation_create")
        st["compilation"] = cp[0]
        if token:
            self._check(lib.ANeuralNetworksCompilation_setCaching(cp[0], self.cache_dir.encode(), token),
                        "Compilation_setCaching")
        self._check(lib.ANeuralNetworksCompilation_finish(cp[0]), "Compilation_finish")

        ep = ffi.new("ANeuralNetworksExecution**")
        self._check(lib.ANeuralNetworksExecution_create(cp[0], ep), "Execution_create")
        execution = st["execution"] = ep[0]
        if test.expect_failure and "WHILE" in test.ops:
            # expected-to-fail loops (e.g. while_infinite_loop): don't wait the default 2 s
            lib.ANeuralNetworksExecution_setLoopTimeout(execution, WHILE_EF_LOOP_TIMEOUT_NS)

        sg = test.main
        for k, idx in enumerate(sg.inputs):
            op = sg.operands[idx]
            data = op.data
            if data is None or data.size == 0:
                rc = lib.ANeuralNetworksExecution_setInput(execution, k, ffi.NULL, ffi.NULL, 0)
            else:
                keep.append(data)
                rc = lib.ANeuralNetworksExecution_setInput(
                    execution, k, ffi.NULL, ffi.from_buffer(data), data.nbytes)
            self._check(rc, "setInput", f"input {k} (operand {idx})")

        outputs = []
        for k, idx in enumerate(sg.outputs):
            op = sg.operands[idx]
            dt = DTYPES.get(op.type_name) or np.uint8
            n = numel(op.dims)
            nbytes = max(n * np.dtype(dt).itemsize, 1)
            buf = np.full(nbytes, 0xFF, dtype=np.uint8)   # NaN / -1 if never written
            outputs.append(buf)
            rc = lib.ANeuralNetworksExecution_setOutput(
                execution, k, ffi.NULL, ffi.from_buffer(buf, require_writable=True), nbytes)
            self._check(rc, "setOutput", f"output {k} (operand {idx}), {nbytes} bytes")

        if mode in ("sync", "dynamic"):
            self._check(lib.ANeuralNetworksExecution_compute(execution), "compute")
        elif mode == "async":
            evp = ffi.new("ANeuralNetworksEvent**")
            self._check(lib.ANeuralNetworksExecution_startCompute(execution, evp), "startCompute")
            rc = lib.ANeuralNetworksEvent_wait(evp[0])
            msg = self.L.last_error() if rc else ""
            lib.ANeuralNetworksEvent_free(evp[0])
            if rc != 0:
                raise StepFailure("Event_wait", rc, msg)
        elif mode == "burst":
            bp = ffi.new("ANeuralNetworksBurst**")
            self._check(lib.ANeuralNetworksBurst_create(cp[0], bp), "Burst_create")
            st["burst"] = bp[0]
            self._check(lib.ANeuralNetworksExecution_burstCompute(execution, bp[0]),
                        "burstCompute")
        else:
            raise ValueError(f"unknown mode {mode!r}")

        shapes = []
        rank = ffi.new("uint32_t*")
        for k, idx in enumerate(sg.outputs):
            op = sg.operands[idx]
            if op.ignored:
                shapes.append(None)
                continue
            self._check(lib.ANeuralNetworksExecution_getOutputOperandRank(execution, k, rank),
                        "getOutputOperandRank", f"output {k}")
            r = rank[0]
            if r > 64:
                raise StepFailure("getOutputOperandRank", None, f"absurd rank {r}",
                                  f"output {k}")
            dims = ()
            if r:
                d = ffi.new("uint32_t[]", r)
                self._check(lib.ANeuralNetworksExecution_getOutputOperandDimensions(
                    execution, k, d), "getOutputOperandDimensions", f"output {k}")
                dims = tuple(d[j] for j in range(r))
            shapes.append(dims)
        return outputs, shapes

    def _free(self, st):
        lib = self.lib
        try:
            if st["execution"] is not None:
                lib.ANeuralNetworksExecution_free(st["execution"])
            if st["burst"] is not None:
                lib.ANeuralNetworksBurst_free(st["burst"])
            if st["compilation"] is not None:
                lib.ANeuralNetworksCompilation_free(st["compilation"])
            for m in st["models"]:
                lib.ANeuralNetworksModel_free(m)
            if st["memory"] is not None:
                lib.ANeuralNetworksMemory_free(st["memory"])
        finally:
            if st["fd"] is not None:
                try:
                    os.close(st["fd"])
                except OSError:
                    pass
            st["keep"].clear()

    # -- output checking ---------------------------------------------------------------------
    def _compare(self, test, outputs, shapes):
        sg = test.main
        for k, idx in enumerate(sg.outputs):
            op = sg.operands[idx]
            if op.ignored:
                continue
            if tuple(shapes[k]) != tuple(op.dims):
                raise StepFailure("output_shape", None,
                                  f"output {k}: dimensions {list(shapes[k])}, "
                                  f"expected {list(op.dims)}")
        if test.tolerance.get("kind") == "multinomial" or test.multinomial_tol > 0:
            self._check_multinomial(test, outputs)
            return
        for k, idx in enumerate(sg.outputs):
            op = sg.operands[idx]
            if op.ignored:
                continue
            expected = op.data
            n = numel(op.dims)
            if n == 0:
                continue     # zero-sized output: shape only
            if expected is None or expected.size != n:
                raise StepFailure("runner", None,
                                  f"output {k}: expected data has {0 if expected is None else expected.size} "
                                  f"values for dims {list(op.dims)}")
            actual = outputs[k][: expected.nbytes].view(expected.dtype)
            err = compare_values(actual, expected, op.type_name, test.tolerance)
            if err:
                raise StepFailure("output_values", None, f"output {k} ({op.type_name}): {err}")

    def _check_multinomial(self, test, outputs):
        sg = test.main
        inp = sg.operands[sg.inputs[0]]
        out = sg.operands[sg.outputs[0]]
        tol = test.tolerance.get("probabilityTolerance", test.multinomial_tol) or 0.025
        if len(inp.dims) != 2 or len(out.dims) != 2:
            raise StepFailure("runner", None, "multinomial check needs rank-2 input/output")
        batches, classes = inp.dims
        samples = out.dims[1]
        logits = inp.data.astype(np.float64).reshape(batches, classes)
        got = outputs[0][: batches * samples * 4].view(np.int32).reshape(batches, samples)
        if ((got < 0) | (got >= classes)).any():
            raise StepFailure("output_values", None,
                              f"sampled class index out of range [0,{classes})")
        for b in range(batches):
            with np.errstate(all="ignore"):           # mutated (fuzzed) logits may be inf / NaN
                p = np.exp(logits[b] - logits[b].max())
                p /= p.sum()
            freq = np.bincount(got[b], minlength=classes) / float(samples)
            bad = np.abs(freq - p) > tol
            if bad.any():
                i = int(np.argmax(bad))
                raise StepFailure("output_values", None,
                                  f"batch {b}: {int(bad.sum())} classes outside tolerance {tol}; "
                                  f"class {i}: frequency {freq[i]:.4f}, probability {p[i]:.4f}")


class Results:
    def __init__(self, modes, library_desc=""):
        self.modes = tuple(modes)
        self.library_desc = library_desc
        self.records: list = []
        self.load_errors: list = []           # (test_id, message): unparseable vectors
        self.counts = collections.defaultdict(
            lambda: {m: collections.Counter() for m in self.modes})
        self.totals = collections.Counter()
        self.elapsed = 0.0

    def add(self, rec: Record):
        self.records.append(rec)
        self.totals[rec.status] += 1
        for op in rec.ops:
            self.counts[op][rec.mode][rec.status] += 1

    @property
    def passed(self):
        return self.totals[PASSED]

    @property
    def failed(self):
        return self.totals[FAILED] + len(self.load_errors)

    @property
    def not_implemented(self):
        return self.totals[NOT_IMPLEMENTED]

    @property
    def failures(self):
        return [r for r in self.records if r.status == FAILED]

    def failures_for(self, mode):
        return [r for r in self.records if r.status == FAILED and r.mode == mode]

    def records_for(self, mode=None, status=None, ops_subset_of=None):
        out = []
        for r in self.records:
            if mode is not None and r.mode != mode:
                continue
            if status is not None and r.status != status:
                continue
            if ops_subset_of is not None and not set(r.ops) <= set(ops_subset_of):
                continue
            out.append(r)
        return out

    def op_counts(self, op, mode):
        c = self.counts.get(op, {}).get(mode) if op in self.counts else None
        c = c or collections.Counter()
        return {s: c[s] for s in STATUSES}

    def table(self, ops=None) -> str:
        ops = sorted(self.counts) if ops is None else list(ops)
        w = max([len(o) for o in ops] + [9])
        head1 = " " * w + "".join(f" | {m:^17}" for m in self.modes)
        head2 = f"{'operation':<{w}}" + "".join(f" | {'pass':>5} {'fail':>5} {'n/i':>5}"
                                                for _ in self.modes)
        lines = [head1, head2, "-" * len(head2)]
        for op in ops:
            row = f"{op:<{w}}"
            for m in self.modes:
                c = self.op_counts(op, m)
                row += f" | {c[PASSED]:>5} {c[FAILED]:>5} {c[NOT_IMPLEMENTED]:>5}"
            lines.append(row)
        lines.append("-" * len(head2))
        row = f"{'(tests)':<{w}}"
        for m in self.modes:
            c = collections.Counter(r.status for r in self.records if r.mode == m)
            row += f" | {c[PASSED]:>5} {c[FAILED]:>5} {c[NOT_IMPLEMENTED]:>5}"
        lines.append(row)
        return "\n".join(lines)

    def failure_report(self, limit=20, mode=None) -> str:
        fails = self.failures_for(mode) if mode else self.failures
        lines = [f"cannot load {tid}: {msg}" for tid, msg in self.load_errors]
        shown = fails if limit is None else fails[:limit]
        lines += [r.describe() for r in shown]
        if len(shown) < len(fails):
            lines.append(f"... and {len(fails) - len(shown)} more failures (-v shows all)")
        return "\n".join(lines)

    def not_implemented_ops(self) -> dict:
        """{operation rejected as not implemented: number of tests (first mode run)}"""
        first = self.modes[0] if self.modes else None
        c = collections.Counter(r.ni_op for r in self.records
                                if r.status == NOT_IMPLEMENTED and r.mode == first)
        return dict(sorted(c.items()))

    def summary_line(self) -> str:
        s = f"{self.passed} passed, {self.failed} failed"
        if self.not_implemented:
            s += f", {self.not_implemented} skipped"
        return s


class Watchdog:
    """Kill the process, loudly, when one (test, mode) runs longer than `timeout` seconds.

    A hung library must not hang the run silently: a daemon thread prints the test and
    exits with status 3; faulthandler is armed as a backstop in case the GIL is held.
    """

    def __init__(self, timeout):
        self.timeout = timeout
        self.current = None
        self.deadline = None
        self._lock = threading.Lock()
        if timeout:
            threading.Thread(target=self._watch, name="cts-watchdog", daemon=True).start()

    def start(self, label):
        if not self.timeout:
            return
        with self._lock:
            self.current, self.deadline = label, time.monotonic() + self.timeout
        try:
            faulthandler.dump_traceback_later(self.timeout + 30, exit=True)
        except Exception:
            pass

    def stop(self):
        if not self.timeout:
            return
        with self._lock:
            self.current = self.deadline = None
        try:
            faulthandler.cancel_dump_traceback_later()
        except Exception:
            pass

    def _watch(self):
        while True:
            time.sleep(1.0)
            with self._lock:
                label, deadline = self.current, self.deadline
            if deadline is not None and time.monotonic() > deadline:
                sys.stderr.write(f"\nconformance: TIMEOUT after {self.timeout}s in {label}; "
                                 "aborting the run\n")
                sys.stderr.flush()
                faulthandler.dump_traceback(all_threads=True)
                os._exit(3)


def run(ops=None, modes=ALL_MODES, lib_path=None, cts_dir=None, name_filter=None,
        spec_filter=None, progress=None, trace=False, library=None,
        timeout=600, cache_dir=None) -> Results:
    """Run the conformance vectors against the library; return Results.

    ops: only tests that use at least one of these operations (None: all).
    modes: any of ALL_MODES.  timeout: seconds one (test, mode) may take before the
    process is aborted with a message (0/None: no limit).  cache_dir: every compilation is made
    twice with setCaching(cache_dir, a token of the test and mode); the second, read from the
    cache, is the one run.  Raises ConformanceSkip when there are no vectors and
    OSError/cffi errors when the library cannot be loaded.
    """
    cts_dir = cts_dir or default_cts_dir()
    if not cts_available(cts_dir):
        raise ConformanceSkip(skip_message(cts_dir))
    modes = tuple(m for m in ALL_MODES if m in set(modes or ALL_MODES))
    bad = set(modes or ()) - set(ALL_MODES)
    if bad:
        raise ValueError(f"unknown mode(s): {sorted(bad)}")
    if isinstance(ops, str):
        ops = [o for o in ops.split(",") if o]
    ops = [o.strip().upper() for o in ops] if ops else None
    lib = library or Library(lib_path or default_lib_path())
    runner = Runner(lib, cache_dir)
    watchdog = Watchdog(timeout)
    results = Results(modes, lib.describe())
    t0 = time.monotonic()
    last_spec = None
    for test in load_vectors(cts_dir, ops, name_filter, spec_filter):
        if isinstance(test, tuple):
            results.load_errors.append(test)
            continue
        if progress and test.spec != last_spec:
            progress(test)
            last_spec = test.spec
        for mode in modes:
            if mode == "dynamic" and not test.dynamic_eligible:
                continue
            if trace:
                sys.stderr.write(f"RUN [{mode}] {test.test_id}\n")
                sys.stderr.flush()
            watchdog.start(f"[{mode}] {test.test_id}")
            try:
                results.add(runner.run(test, mode))
            finally:
                watchdog.stop()
    results.elapsed = time.monotonic() - t0
    return results

