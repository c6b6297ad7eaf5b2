"""NNAPI conformance runner: drives libneuralnetworks.so through its C ABI.

The conformance vectors (../shared/cts/<folder>/<spec>.json.gz, described in
../shared/cts/README.md) are the Android CTS generated tests converted to JSON.  For
every test this module builds the model, compiles it, executes it and compares the
outputs exactly the way Android's CTS harness does, but only through the public C
functions of the library (cffi ABI mode, i.e. ``ffi.dlopen``), so what is tested is the
shared object an application would link against.

Modes (one execution per test and mode):
  sync     ANeuralNetworksExecution_compute
  async    ANeuralNetworksExecution_startCompute + ANeuralNetworksEvent_wait
  burst    ANeuralNetworksBurst_create + ANeuralNetworksExecution_burstCompute
  dynamic  the DynamicOutputShapeTest variant: every output of every subgraph is declared
           with all dimensions 0 (rank kept); shapes must come back through
           getOutputOperandRank/Dimensions (computed with ANeuralNetworksExecution_compute).
           Only tests whose ``suites.DynamicOutputShapeTest`` is true run in this mode.

Each (test, mode) ends up as one of
  passed           outputs (and output shapes) match; or a model marked expectFailure failed
                   at some step as it must;
  not_implemented  ANeuralNetworksModel_addOperation answered ANEURALNETWORKS_BAD_DATA and
                   nnapi_py_last_error() mentions "not implemented" (reported as skipped);
  failed           anything else (step, result code and nnapi_py_last_error() recorded).

CLI (tests/cts_runner.py is the same command):
  python -m nnapi_py.testing.cts [--lib PATH | --feature-level N] [--cts DIR] [--ops ADD,MUL]
                                 [--modes sync,async,burst,dynamic] [-v]
Environment: NNAPI_PY_LIB (library path), NNAPI_PY_CTS (vector directory).
--feature-level N runs build/lib/feature-level-N/libneuralnetworks.so (the library exporting
only the functions of feature levels <= N; the vectors need level 8's operations).
Python API (tests/test_conformance.py, tools/fuzz.py, tools/ops_table.py): ``run(...) -> Results``; the
pieces, by concern: nnapi_py/testing/vectors.py (the vectors parsed, the tolerance), abi.py (the library
loaded, a model built through the C ABI), runner.py (one test in one mode, Results, run()).
"""
from __future__ import annotations

import argparse
import faulthandler
import os
import sys
import textwrap

from .abi import Library, ModelBuilder, StepFailure, default_lib_path
from .runner import (ALL_MODES, FAILED, NOT_IMPLEMENTED, PASSED, STATUSES, Record, Results, Runner, Watchdog,
                     run)
from .vectors import (DTYPES, TOL_CLASS, ConformanceSkip, Operand, PreparedTest, Subgraph, compare_values,
                      cts_available, cts_files, default_cts_dir, load_vectors, numel, prepare_test, skip_message)


__all__ = ["ALL_MODES", "PASSED", "FAILED", "NOT_IMPLEMENTED", "STATUSES", "DTYPES", "TOL_CLASS",
           "ConformanceSkip", "Operand", "Subgraph", "PreparedTest", "Record", "Results", "StepFailure",
           "Library", "ModelBuilder", "Runner", "Watchdog", "compare_values", "cts_available", "cts_files",
           "default_cts_dir", "default_lib_path", "load_vectors", "numel", "prepare_test", "skip_message",
           "run", "main"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nnapi_py.testing.cts",
                                 description="Run the NNAPI conformance vectors against "
                                             "libneuralnetworks.so through its C ABI.")
    ap.add_argument("--lib", help="library path (default: $NNAPI_PY_LIB or "
                                  "build/lib/libneuralnetworks.so)")
    ap.add_argument("--feature-level", type=int, choices=range(1, 9), metavar="N",
                    help="run build/lib/feature-level-N/libneuralnetworks.so")
    ap.add_argument("--cts", help="vector directory (default: $NNAPI_PY_CTS or ../shared/cts)")
    ap.add_argument("--ops", help="comma-separated operations: only tests using any of them")
    ap.add_argument("--modes", default=",".join(ALL_MODES),
                    help="comma-separated subset of " + ",".join(ALL_MODES))
    ap.add_argument("--spec", help="comma-separated substrings of spec (file) names")
    ap.add_argument("--name", help="comma-separated substrings of test names")
    ap.add_argument("--limit", type=int, default=20, help="failures to list (default 20)")
    ap.add_argument("--trace", action="store_true",
                    help="print each (mode, test) to stderr before running it "
                         "(locates a crash of the library)")
    ap.add_argument("--timeout", type=float, default=600,
                    help="abort the run if one test takes longer (seconds, 0: never)")
    ap.add_argument("--progress", action="store_true", help="print each spec as it starts")
    ap.add_argument("--cache", metavar="DIR", help="compile every model twice with setCaching(DIR, a token "
                                                    "per test and mode): the second, from the cache, runs")
    ap.add_argument("-v", "--verbose", action="store_true", help="list all failures")
    args = ap.parse_args(argv)

    faulthandler.enable()
    cts_dir = args.cts or default_cts_dir()
    if not cts_available(cts_dir):
        print(skip_message(cts_dir))
        return 0
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in ALL_MODES]
    if bad:
        ap.error(f"unknown mode(s) {bad}; choose from {','.join(ALL_MODES)}")
    if args.lib and args.feature_level:
        ap.error("--lib and --feature-level name two libraries: give one")
    lib_path = args.lib or default_lib_path(args.feature_level)
    if not os.path.exists(lib_path):
        print(f"conformance: library {lib_path} not found (run `make lib`)", file=sys.stderr)
        return 2
    try:
        library = Library(lib_path)
    except Exception as exc:
        print(f"conformance: cannot load {lib_path}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 2
    print(f"library: {library.describe()}")
    print(f"vectors: {cts_dir}")

    def progress(test):
        sys.stderr.write(f"  {test.folder}/{test.spec}\n")
        sys.stderr.flush()

    def split(s):
        return [x.strip() for x in s.split(",") if x.strip()]

    results = run(ops=args.ops, modes=modes, cts_dir=cts_dir, library=library,
                  name_filter=split(args.name) if args.name else None,
                  spec_filter=split(args.spec) if args.spec else None,
                  progress=progress if args.progress else None, trace=args.trace,
                  timeout=args.timeout, cache_dir=args.cache)
    print()
    print(results.table())
    ni = results.not_implemented_ops()
    if ni:
        print()
        print(f"not implemented (operation rejected at addOperation: tests, mode {modes[0]}):")
        print(textwrap.fill(", ".join(f"{op}={n}" for op, n in ni.items()), width=100,
                            initial_indent="  ", subsequent_indent="  "))
    fails = results.failures
    if fails or results.load_errors:
        print()
        print(f"failures ({len(fails) + len(results.load_errors)}):")
        print(results.failure_report(limit=None if args.verbose else args.limit))
    print()
    print(f"time: {results.elapsed:.1f}s")
    print(results.summary_line())
    return 0 if results.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
