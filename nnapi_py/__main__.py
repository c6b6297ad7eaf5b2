"""python -m nnapi_py [--cflags] [--libs] [--libdir] [--version] [--feature-level N]: flags to build
against the library (--feature-level N: the library exporting only feature levels <= N, 1..8).
python -m nnapi_py --cmake-dir: the directory of the CMake package config, for
cmake -Dnnapi_py_DIR=$(python -m nnapi_py --cmake-dir) and find_package(nnapi_py) (imported targets
nnapi_py::neuralnetworks, nnapi_py::feature_level_N; docs/cmake.md).  --pkgconfig-dir: the
directory of neuralnetworks.pc, for PKG_CONFIG_PATH.
python -m nnapi_py --suppressions[=valgrind|tsan|lsan]: the shipped suppression files for checking a
client with valgrind, ThreadSanitizer or LeakSanitizer (README: "Using it in your CI").
python -m nnapi_py run MODEL.tflite [--input a.npy ...] [--save DIR] [--compare] [--bench N] [--check]
  [--feature-level N] [--max-partitions N] [--allow-fp16] [--devices SPEC] [--cache DIR]: run a .tflite model
through NNAPI, partitioned as TFLite's NNAPI delegate would (random inputs unless given; --compare:
ours and LiteRT's optimized kernels each against LiteRT's reference kernels on the same inputs,
per output, with a verdict against the stated tolerance (exit 1 when outside it); --bench N: our
median ms beside LiteRT's, both with one thread (numpy's BLAS pinned too; the thread counts are
printed); --check: only the report -- what the delegate would do on that Android release,
partitions, per operator the NNAPI operation(s) or why it stays on the CPU; --feature-level N:
1..8 or an API level 27..35, default the runtime's: NNAPI_PY_FEATURE_LEVEL; --max-partitions N:
the delegate's max_number_delegated_partitions, default 3, 0 for no limit; --devices:
NNAPI_PY_DEVICES for this run; --allow-fp16: TFLite's allow_fp16, the model relaxed to float16
on a device with fp16 numerics (default --devices gpu=float-fast:fp16), and --compare then shows
its accuracy per output against float32 and against LiteRT; --cache DIR: the compilation cache
directory, made if missing: a second run loads the compiled plans instead of compiling again).
python -m nnapi_py show FILE.json [--dot | --json | --svg OUT.svg]: a model dumped with
NNAPI_PY_DUMP=DIR (or written by Model.to_json()) as a table (default), Graphviz dot, JSON or SVG.
A failure prints one line saying what is wrong and exits 2 (usage, a file or input given) or 1
(the model cannot run); --traceback (or NNAPI_PY_TRACE=1) also prints the traceback."""
import os
import sys

from . import __version__, cmake_dir, include_dir, library_path, pkgconfig_dir


class UsageError(Exception):
    """A command line that cannot be followed: exit 2 with the message."""
    exit_code = 2


def show(argv):
    import argparse
    import json
    from . import inspect
    ap = argparse.ArgumentParser(prog="python -m nnapi_py show")
    ap.add_argument("model", metavar="MODEL.json")
    form = ap.add_mutually_exclusive_group()
    form.add_argument("--dot", action="store_true")
    form.add_argument("--json", action="store_true")
    form.add_argument("--svg", metavar="OUT.svg")
    a = ap.parse_args(argv)
    if not a.model.endswith(".json"):
        raise UsageError(f"{a.model}: show reads a model's .json (NNAPI_PY_DUMP=DIR or Model.to_json())")
    with open(a.model) as f:
        try:
            d = json.load(f)
        except ValueError as e:
            raise UsageError(f"{a.model} is not a model's JSON: {e}") from e
    if a.dot:
        print(inspect.to_dot(d), end="")
    elif a.json:
        print(inspect.to_json(d))
    elif a.svg:
        svg = inspect.render_svg(inspect.to_dot(d))      # RuntimeError without Graphviz: exit 1
        with open(a.svg, "w") as f:
            f.write(svg)
    else:
        print(inspect.summary(d))
    return 0


def run_tflite(argv):
    import argparse
    import statistics
    import time
    import numpy as np
    ap = argparse.ArgumentParser(prog="python -m nnapi_py run")
    ap.add_argument("model")
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--save")
    ap.add_argument("--compare", action="store_true")
    ap.add_argument("--bench", type=int, default=0)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--feature-level")
    ap.add_argument("--max-partitions", type=int, default=3)
    ap.add_argument("--allow-fp16", action="store_true")
    ap.add_argument("--devices")
    ap.add_argument("--cache", metavar="DIR")
    a = ap.parse_args(argv)
    from . import tflite as T
    from .devices import emulated
    devs = a.devices or ("gpu=float-fast:fp16" if a.allow_fp16 else None)

    def load(**options):
        options.update(feature_level=a.feature_level, max_partitions=a.max_partitions, check_only=a.check)
        if a.cache and not a.check:
            os.makedirs(a.cache, exist_ok=True)
            options["cache_dir"] = a.cache
        if devs is None:
            return T.load(a.model, **options)
        with emulated(devices=devs):            # compilations keep the devices they were made with
            return T.load(a.model, **options)
    m = load(allow_fp16=a.allow_fp16)           # errors: entry() says them
    if a.check:
        print(m.report())
        return 0
    specs = m.input_specs
    if a.input:
        inputs = [np.load(f) for f in a.input]
    else:
        rng = np.random.default_rng(0)
        inputs = [(rng.uniform(-1, 1, dims) if np.dtype(dt).kind == "f" else rng.integers(-128, 128, dims)).astype(dt)
                  for _, dt, dims in specs]
    outs = m.run(inputs)
    for name, o in zip(m.output_names, outs):
        print(f"{name}: {o.dtype}{list(o.shape)} min {o.min():.6g} max {o.max():.6g}")
    if a.save:
        os.makedirs(a.save, exist_ok=True)
        for k, o in enumerate(outs):
            np.save(os.path.join(a.save, f"output_{k}.npy"), o)
    if a.compare or a.bench:
        try:
            from ai_edge_litert.interpreter import Interpreter, OpResolverType
        except ImportError:
            print("LiteRT is not installed (pip install 'nnapi_py[compare]'): no comparison", file=sys.stderr)
            return 0
        def interp(kind):
            try:
                it = Interpreter(model_path=a.model, num_threads=1, experimental_op_resolver_type=kind)
                it.allocate_tensors()
                return it
            except (RuntimeError, ValueError):
                return None
        if a.compare:
            if a.allow_fp16:                    # the accuracy of float16 numerics, per output
                m.reset()
                ref = interp(OpResolverType.BUILTIN_REF) or interp(OpResolverType.AUTO)
                for d, x in zip(ref.get_input_details(), inputs):
                    ref.set_tensor(d["index"], x)
                ref.invoke()
                ours = m.run(inputs)
                full = load().run(inputs)           # the same model in float32

                def diff(got, want):
                    d = np.abs(got.astype(np.float64) - want)
                    return f"max abs {d.max():.3g}, max rel {d.max() / max(1.0, float(np.abs(want).max())):.3g}"
                for d in ref.get_output_details():
                    want = ref.get_tensor(d["index"]).astype(np.float64)
                    k = m.output_names.index(d["name"])
                    got, f32 = ours[k].reshape(want.shape), full[k].reshape(want.shape)
                    print(f"{d['name']}: fp16 vs float32 {diff(got, f32)}; fp16 vs LiteRT {diff(got, want)}; "
                          f"float32 vs LiteRT {diff(f32, want)}")
                verdict = 0
            else:
                verdict = compare(m, inputs, interp, OpResolverType)
        if a.bench:
            def median_ms(fn):
                fn()
                ts = []
                for _ in range(a.bench):
                    t0 = time.perf_counter()
                    fn()
                    ts.append((time.perf_counter() - t0) * 1e3)
                return statistics.median(ts)
            from . import blas
            if not blas.threads() or any(n != 1 for _, n in blas.threads()):
                blas.limit(1)
            print(f"threads: nnapi_py numpy BLAS: {blas.describe()}; LiteRT: num_threads=1")
            print(f"nnapi_py: {median_ms(lambda: m.run(inputs)):.3f} ms (median of {a.bench})")
            for label, kind in (("LiteRT XNNPACK", OpResolverType.AUTO),
                                ("LiteRT without XNNPACK", OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES),
                                ("LiteRT reference kernels", OpResolverType.BUILTIN_REF)):
                it = interp(kind)
                if it is None:
                    print(f"{label}: unavailable for this model")
                    continue
                for d, x in zip(it.get_input_details(), inputs):
                    it.set_tensor(d["index"], x)
                print(f"{label}: {median_ms(it.invoke):.3f} ms")
        if a.compare:
            return verdict
    return 0


COMPARE_RTOL = 1e-3     # float outputs: max |x - ref| <= COMPARE_RTOL * max(1, max |ref|) (tests/test_tflite.py)
COMPARE_STEPS = 1       # integer (quantized) outputs: within one step


def _distance(x, ref):
    """(max abs difference, its ratio to max(1, max |ref|)) of two arrays of one shape."""
    import numpy as np
    diff = float(np.abs(np.asarray(x, np.float64) - np.asarray(ref, np.float64)).max()) if np.size(ref) else 0.0
    return diff, diff / max(1.0, float(np.abs(np.asarray(ref, np.float64)).max()) if np.size(ref) else 1.0)


def compare(m, inputs, interp, OpResolverType):
    """--compare: ours and LiteRT's optimized kernels (XNNPACK) each against LiteRT's reference
    kernels on the same inputs, per output, and a verdict against the stated tolerance (float:
    COMPARE_RTOL relative to max(1, max |ref|); integer: COMPARE_STEPS steps).  0 when every
    output is within it, else 1."""
    import numpy as np
    ref = interp(OpResolverType.BUILTIN_REF)
    label = "LiteRT reference kernels"
    if ref is None:
        ref, label = interp(OpResolverType.AUTO), "LiteRT XNNPACK (its reference kernels cannot run this model)"
    opt = interp(OpResolverType.AUTO) if label.startswith("LiteRT reference") else None

    def invoke(it):
        for d, x in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], x)
        it.invoke()
        return {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}

    want = invoke(ref)
    theirs = invoke(opt) if opt is not None else {}
    m.reset()
    ours = m.run(inputs)
    print(f"compared with {label}; tolerance: float outputs max |x - ref| <= {COMPARE_RTOL:g} * max(1, max |ref|), "
          f"integer outputs within {COMPARE_STEPS} step")
    bad = []
    for name, w in want.items():
        got = ours[m.output_names.index(name)].reshape(w.shape)
        d_abs, d_rel = _distance(got, w)
        is_float = np.dtype(w.dtype).kind == "f"
        ok = d_rel <= COMPARE_RTOL if is_float else d_abs <= COMPARE_STEPS
        line = f"{name}: ours max abs {d_abs:.3g} (rel {d_rel:.3g})"
        if name in theirs:
            t_abs, t_rel = _distance(theirs[name], w)
            line += f"; LiteRT XNNPACK max abs {t_abs:.3g} (rel {t_rel:.3g})"
        print(f"{line}: {'within' if ok else 'OUTSIDE'} the tolerance")
        if not ok:
            bad.append(name)
    print(f"verdict: {'MATCH' if not bad else 'MISMATCH'}: {len(want) - len(bad)} of {len(want)} output(s) within "
          f"the tolerance" + (f" (outside: {', '.join(bad)})" if bad else ""))
    return 1 if bad else 0


def main(argv):
    if not argv or "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    if argv[0] == "show":
        return show(argv[1:])
    if argv[0] == "run":
        return run_tflite(argv[1:])
    out = []
    level = None
    if "--feature-level" in argv:
        k = argv.index("--feature-level")
        if k + 1 >= len(argv):
            print("--feature-level needs a level (1..8 or an Android API level 27..35)", file=sys.stderr)
            return 2
        level = argv[k + 1]
        argv = argv[:k] + argv[k + 2:]
        try:
            library_path(level)
        except (ValueError, FileNotFoundError) as e:
            print(e, file=sys.stderr)
            return 2
    for a in argv:
        if a == "--suppressions" or a.startswith("--suppressions="):
            try:
                out.append(suppressions_text(a.partition("=")[2]))
            except KeyError as e:
                print(e.args[0], file=sys.stderr)
                return 2
        elif a == "--cflags":
            out.append(f"-I{include_dir()}")
        elif a == "--libs":
            d = os.path.dirname(library_path(level))
            out.append(f"-L{d} -Wl,-rpath,{d} -lneuralnetworks")
        elif a == "--libdir":
            out.append(os.path.dirname(library_path(level)))
        elif a == "--version":
            out.append(__version__)
        elif a in ("--cmake-dir", "--pkgconfig-dir"):
            try:
                out.append(cmake_dir() if a == "--cmake-dir" else pkgconfig_dir())
            except FileNotFoundError as e:
                print(e, file=sys.stderr)
                return 2
        else:
            print(f"unknown option {a}", file=sys.stderr)
            return 2
    print(" ".join(out))
    return 0


SUPPRESSION_TOOLS = ("valgrind", "tsan", "lsan")


def suppressions_text(tool=""):
    """--suppressions: one line `TOOL PATH` per shipped suppression file; --suppressions=TOOL
    (valgrind, tsan, lsan): that file's path alone, for valgrind --suppressions=$(...)."""
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suppressions")
    if not tool:
        return "\n".join(f"{t} {os.path.join(d, t + '.supp')}" for t in SUPPRESSION_TOOLS)
    if tool not in SUPPRESSION_TOOLS:
        raise KeyError(f"--suppressions={tool}: no such file; there are {', '.join(SUPPRESSION_TOOLS)}")
    return os.path.join(d, tool + ".supp")


_TRACE_VALUES = ("1", "errors", "error", "calls", "all")     # NNAPI_PY_TRACE values that trace errors


def _failure(e: BaseException):
    """(exit code, one line) for an exception that ends the command: 2 for usage or a file /
    input given (UsageError, OSError, ValueError, KeyError), 1 when the model cannot run (an
    NNAPI error, a load error, a missing optional package) or anything unexpected."""
    from . import MissingDependency
    msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    if isinstance(e, OSError) and e.filename is not None:
        msg = f"{e.filename}: {e.strerror or msg}"
    code = getattr(e, "exit_code", None)
    if code is None:
        if isinstance(e, MissingDependency):
            code = 1
        elif isinstance(e, (UsageError, OSError, ValueError, KeyError)):
            code = 2
        elif type(e).__name__ in ("NNAPIError", "LoadError") or isinstance(e, RuntimeError):
            code = 1
        else:
            code, msg = 1, (f"internal error: {type(e).__name__}: {msg} (a bug: please report it with the "
                            f"output of --traceback)")
    lines = [ln for ln in msg.splitlines() if ln.strip()] or [type(e).__name__]
    return code, "\n".join(lines) if getattr(e, "multiline", False) else " ".join(ln.strip() for ln in lines)


def entry(argv):
    """main() with every failure as one line and an exit code (the traceback with --traceback
    or NNAPI_PY_TRACE=1); --bench pins the BLAS threads before numpy loads."""
    want_tb = "--traceback" in argv or os.environ.get("NNAPI_PY_TRACE", "").strip().lower() in _TRACE_VALUES
    argv = [a for a in argv if a != "--traceback"]
    if argv[:1] == ["run"] and any(a == "--bench" or a.startswith("--bench=") for a in argv):
        from . import blas
        blas.pin_environment(1)
    try:
        return main(argv)
    except KeyboardInterrupt:
        return 130
    except Exception as e:                              # SystemExit (argparse's usage) passes
        if want_tb:
            import traceback
            traceback.print_exc()
        code, line = _failure(e)
        print(f"nnapi_py: {line}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(entry(sys.argv[1:]))
