"""python -m nnapi_py [--cflags] [--libs] [--libdir] [--version] [--feature-level N]: flags to build
against the library (--feature-level N: the library exporting only feature levels <= N, 1..8).
python -m nnapi_py --cmake-dir: the directory of the CMake package config, for
cmake -Dnnapi_py_DIR=$(python -m nnapi_py --cmake-dir) and find_package(nnapi_py) (imported targets
nnapi_py::neuralnetworks, nnapi_py::feature_level_N; docs/cmake.md).  --pkgconfig-dir: the
directory of neuralnetworks.pc, for PKG_CONFIG_PATH.
python -m nnapi_py --suppressions[=valgrind|tsan|lsan]: the shipped suppression files for checking a
client with valgrind, ThreadSanitizer or LeakSanitizer (README: "Using it in your CI").
python -m nnapi_py run MODEL.tflite [--input a.npy ...] [--input-shape NAME=D1,D2,...] [--save DIR]
  [--compare [--no-reference-ok]] [--bench N] [--check] [--feature-level N] [--max-partitions N]
  [--allow-fp16] [--devices SPEC] [--cache DIR]: run a .tflite model through NNAPI, partitioned as
TFLite's NNAPI delegate would; --compare: a verdict per output against LiteRT's reference kernels
under the stated bound (nnapi_py/tflite/compare.py).  python -m nnapi_py run --help: every option.
python -m nnapi_py show FILE.json | MODEL.tflite [--dot | --json | --svg OUT.svg]: a model dumped with
NNAPI_PY_DUMP=DIR (or written by Model.to_json()), or the NNAPI model(s) built for a .tflite (named
by its tensor names), as a table (default), Graphviz dot, JSON or SVG (python -m nnapi_py show --help).
A failure prints one line saying what is wrong and exits 2 (usage, a file or input given) or 1
(the model cannot run); --traceback (or NNAPI_PY_TRACE=1) also prints the traceback."""
import argparse
import os
import sys

from . import __version__, cmake_dir, include_dir, library_path, pkgconfig_dir


class UsageError(Exception):
    """A command line that cannot be followed: exit 2 with the message."""
    exit_code = 2


class NoReference(Exception):
    """--compare without its reference (LiteRT missing, or unable to run the model): exit 2."""
    exit_code = 2


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (UsageError: exit 2) naming the subcommand's --help."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")

    def _print_message(self, message, file=None):
        if message:                             # argparse's own swallows a closed pipe: entry() ends quietly
            (file or sys.stdout).write(message)


def _count(least, what):
    """An argparse type: an integer >= least, else a message saying what the number is."""
    def parse(text):
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number ({what})") from None
        if n < least:
            raise argparse.ArgumentTypeError(f"{n}: {what} must be at least {least}")
        return n
    parse.__name__ = "count"
    return parse


def _input_shape(text):
    """--input-shape NAME=D1,D2,...: (NAME, (D1, D2, ...)), every dimension >= 1."""
    name, eq, dims = text.rpartition("=")
    if not eq or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=D1,D2,... (an input's name, its dimensions), "
                                         f"e.g. input=1,1760")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: the dimensions {dims!r} are not whole numbers separated by "
                                         f"commas (e.g. {name}=1,1760)") from None
    if any(d < 1 for d in shape):
        raise argparse.ArgumentTypeError(f"{text!r}: every dimension must be at least 1")
    return name, shape


def _add_shape_options(ap):
    ap.add_argument("--input-shape", action="append", default=[], type=_input_shape, metavar="NAME=D1,D2,...",
                    help="the shape to compile input NAME for, an input whose shape signature has -1 "
                         "(repeatable, one per input; the others keep the file's shapes; run: LiteRT's inputs "
                         "are resized to the same shapes for --compare and --bench)")
    ap.add_argument("--feature-level", metavar="LEVEL",
                    help="the Android release to map for: 1..8 or an API level 27..35 (default: the runtime's, "
                         "NNAPI_PY_FEATURE_LEVEL)")


def _shapes_for(path, given, arrays=None):
    """The input shapes to load `path` with: one per input, from --input-shape (given: [(name,
    shape)]) or, for an input whose signature has -1, from its --input array; None when they are
    the file's own.  UsageError for a name the model does not have, a name given twice, or an
    array whose shape contradicts its --input-shape."""
    if not given and not arrays:
        return None
    from .tflite import shapes
    from .tflite.reader import Reader
    g = Reader(path).graph(0)
    names = [g.tensors[i].name for i in g.inputs]
    sigs = shapes.signatures(g)
    out = list(shapes.file_shapes(g))
    seen = {}
    for name, shape in given:
        if name not in names:
            listed = "; ".join(f"'{n}' {list(s)}" for n, s in zip(names, sigs))
            raise UsageError(f"--input-shape {name}=...: the model has no input '{name}'; its inputs (shape "
                             f"signatures, -1: any size) are {listed}")
        if name in seen:
            raise UsageError(f"--input-shape: input '{name}' given twice ({list(seen[name])} and {list(shape)})")
        seen[name] = shape
        out[names.index(name)] = shape
    for k, a in enumerate(arrays or ()):
        if k >= len(names) or a is None:
            continue
        if names[k] in seen:
            if tuple(a.shape) != tuple(seen[names[k]]):
                raise UsageError(f"input '{names[k]}': --input-shape {names[k]}={','.join(map(str, seen[names[k]]))} "
                                 f"but its --input array has shape {list(a.shape)}: give one shape")
        elif -1 in sigs[k]:
            out[k] = tuple(a.shape)
    out = tuple(tuple(s) for s in out)
    return None if out == tuple(tuple(s) for s in shapes.file_shapes(g)) else out


def _load_npy(f):
    import numpy as np
    try:
        a = np.load(f, allow_pickle=False)
    except OSError:
        raise
    except ValueError as e:
        raise UsageError(f"--input {f}: not a numpy .npy array file ({str(e).splitlines()[0]}); write one with "
                         f"numpy.save") from None
    if not isinstance(a, np.ndarray):
        raise UsageError(f"--input {f}: a .npz archive holds several arrays; give one .npy file per input")
    return a


# ---- show ----------------------------------------------------------------------------------------
SHOW_HELP = """python -m nnapi_py show FILE.json | MODEL.tflite [--dot | --json | --svg OUT.svg]

FILE.json: a model written by NNAPI_PY_DUMP=DIR (every model a client finishes; a C client's
operands have no names, so they are t0, t1, ...) or by Model.to_json().  MODEL.tflite: the NNAPI
model(s) the importer builds for it (as `run` would), operands named by the .tflite tensor names
(a name TFLite's converter joined from several with ';' by its first part and ';...'; --json: in full).
Default: a table (one line per operation, then inputs and outputs); --dot: Graphviz dot; --json:
the model's JSON; --svg OUT.svg: rendered by Graphviz's dot."""


def _check_model_json(d, path):
    """UsageError unless d has the form describe.model_dict writes (what `show` reads)."""
    need = ('an object with "operands" (a list of {"index", "type", "dims", "scale", "zero_point", "name", '
            '"lifetime"}), "operations" (a list of {"index", "type", "inputs", "outputs"}), "inputs" and "outputs" '
            '(operand indices), as NNAPI_PY_DUMP=DIR or Model.to_json() write')

    def bad(what):
        return UsageError(f"{path} is not a model's JSON: {what}; it must be {need}")
    if not isinstance(d, dict):
        raise bad(f"it holds a {type(d).__name__}")
    missing = [k for k in ("operands", "operations", "inputs", "outputs") if k not in d]
    if missing:
        raise bad("it lacks " + ", ".join(f'"{k}"' for k in missing))
    for k in ("operands", "operations", "inputs", "outputs"):
        if not isinstance(d[k], list):
            raise bad(f'"{k}" is a {type(d[k]).__name__}, not a list')
    n = len(d["operands"])

    def index_ok(i):
        return isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n
    for k, o in enumerate(d["operands"]):
        lacking = [f for f in ("type", "dims", "scale", "zero_point", "name", "lifetime")
                   if not isinstance(o, dict) or f not in o]
        if lacking:
            raise bad(f"operand {k} lacks " + ", ".join(f'"{f}"' for f in lacking))
        if o["dims"] is not None and not (isinstance(o["dims"], list) and all(isinstance(x, int) for x in o["dims"])):
            raise bad(f'operand {k}: "dims" is not a list of whole numbers')
    for k, op in enumerate(d["operations"]):
        lacking = [f for f in ("type", "inputs", "outputs") if not isinstance(op, dict) or f not in op]
        if lacking:
            raise bad(f"operation {k} lacks " + ", ".join(f'"{f}"' for f in lacking))
        if "index" not in op:
            op["index"] = k
        for f in ("inputs", "outputs"):
            if not isinstance(op[f], list) or not all(index_ok(i) for i in op[f]):
                raise bad(f'operation {k}: "{f}" must list operand indices 0..{n - 1}')
    for f in ("inputs", "outputs"):
        if not all(index_ok(i) for i in d[f]):
            raise bad(f'"{f}" must list operand indices 0..{n - 1}')


def _tflite_nnapi_models(a):
    """[(title, model dict)] of the NNAPI models the importer builds for a .tflite."""
    import json
    from . import tflite as T
    shapes = _shapes_for(a.model, a.input_shape)
    m = T.load(a.model, feature_level=a.feature_level, input_shapes=shapes)
    if m.compilation is not None:
        models = [m.compilation.model]
    else:
        models = [s.compilation.model for s in getattr(m._stitch, "steps", ()) if hasattr(s, "compilation")]
    n = len(models)
    return [(f"{os.path.basename(a.model)}: NNAPI partition {k + 1} of {n}" if n > 1 else "", json.loads(x.to_json()))
            for k, x in enumerate(models)]


def show(argv):
    import json
    from . import describe
    ap = _Parser(prog="python -m nnapi_py show", description=SHOW_HELP,
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", metavar="FILE.json|MODEL.tflite")
    form = ap.add_mutually_exclusive_group()
    form.add_argument("--dot", action="store_true", help="Graphviz dot on stdout")
    form.add_argument("--json", action="store_true", help="the model's JSON on stdout")
    form.add_argument("--svg", metavar="OUT.svg", help="an SVG drawn by Graphviz's dot (needs it installed)")
    _add_shape_options(ap)
    ap.add_argument("--partition", type=_count(1, "the NNAPI partition to show, from 1"), metavar="K",
                    help="MODEL.tflite with several NNAPI partitions: the one for --dot / --json / --svg")
    a = ap.parse_args(argv)
    if a.model.endswith(".tflite"):
        models = _tflite_nnapi_models(a)
        if not models:
            raise UsageError(f"{a.model}: no operator runs through NNAPI (all on the CPU): no NNAPI model to show; "
                             f"`python -m nnapi_py run {a.model} --check` says why")
        if a.partition is not None:
            if a.partition > len(models):
                raise UsageError(f"--partition {a.partition}: {a.model} has {len(models)} NNAPI partition(s)")
            models = [models[a.partition - 1]]
        elif len(models) > 1 and (a.dot or a.json or a.svg):
            raise UsageError(f"{a.model} has {len(models)} NNAPI partitions: choose one for --dot / --json / --svg "
                             f"with --partition K (1..{len(models)})")
    elif a.model.endswith(".json"):
        if a.input_shape or a.feature_level or a.partition:
            raise UsageError("--input-shape, --feature-level and --partition apply to a .tflite; a model's JSON is "
                             "shown as it was written")
        with open(a.model) as f:
            try:
                d = json.load(f)
            except ValueError as e:
                raise UsageError(f"{a.model} is not a model's JSON: {e}") from e
        _check_model_json(d, a.model)
        models = [("", d)]
        import re
        if d["operands"] and all(re.fullmatch(r"t\d+", str(o["name"])) for o in d["operands"]):
            print("nnapi_py: note: the operands have no names (t0, t1, ...: a model given through the C API carries "
                  "none); for a .tflite, `python -m nnapi_py show MODEL.tflite` names them by its tensors",
                  file=sys.stderr)
    else:
        raise UsageError(f"{a.model}: show reads a model's .json (NNAPI_PY_DUMP=DIR or Model.to_json()) or a "
                         f".tflite model")
    for title, d in models:
        if a.model.endswith(".tflite") and not a.json:     # "a;b;c": names TFLite's converter joined
            for o in d["operands"]:
                if ";" in o["name"]:
                    o["name"] = o["name"].split(";")[0] + ";..."
        if a.dot:
            print(describe.to_dot(d), end="")
        elif a.json:
            print(describe.to_json(d))
        elif a.svg:
            svg = describe.render_svg(describe.to_dot(d))      # RuntimeError without Graphviz: exit 1
            with open(a.svg, "w") as f:
                f.write(svg)
        else:
            if title:
                print(f"== {title}")
            print(describe.summary(d))
    return 0


# ---- run -----------------------------------------------------------------------------------------
RUN_HELP = """python -m nnapi_py run MODEL.tflite [options]

Run a .tflite model through NNAPI, partitioned as TFLite's NNAPI delegate would (operators NNAPI
cannot run on TFLite's CPU kernels through LiteRT).  Random inputs (seed 0) unless --input gives
them; prints each output's type, shape, min and max.  Exit 0; 1 when the model cannot run or
--compare finds an output outside the bound; 2 for a usage error, a file or an input given, or
--compare without its reference."""

RUN_EPILOG = f"""--compare: nnapi_py's outputs against LiteRT's reference kernels on the same inputs, per output,
with LiteRT's own optimized kernels (builtin, without XNNPACK) and LiteRT XNNPACK measured beside.
The bound (nnapi_py/tflite/compare.py; the real-model tests assert the same): {{policy}}.
Hybrid models (int8 weights, float activations) are compared with the reference on a copy with
dequantized weights (what NNAPI computes), and with LiteRT on the model itself within
{{hybrid:g}} * max(1, max |ref|).  It needs LiteRT ({{install}}); without it --compare is an error
(exit 2) unless --no-reference-ok."""


def run_tflite(argv):
    import statistics
    import textwrap
    import time
    import numpy as np
    from .tflite import compare as P
    ap = _Parser(prog="python -m nnapi_py run", description=RUN_HELP,
                 epilog=textwrap.fill(" ".join(RUN_EPILOG.format(policy=P.POLICY, hybrid=P.HYBRID_RTOL,
                                                                 install=P.INSTALL).split()), 96),
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", metavar="MODEL.tflite")
    ap.add_argument("--input", action="append", default=[], metavar="FILE.npy",
                    help="an input array (numpy .npy), one per model input in order")
    _add_shape_options(ap)
    ap.add_argument("--save", metavar="DIR", help="write the outputs as DIR/output_K.npy (made if missing)")
    ap.add_argument("--compare", action="store_true",
                    help="compare with LiteRT's reference kernels on the same inputs: a verdict per output "
                         "against the stated bound (exit 1 when one is outside)")
    ap.add_argument("--no-reference-ok", action="store_true",
                    help="with --compare: when LiteRT is not installed or cannot run the model, say so and "
                         "exit 0 instead of 2 (nothing compared)")
    ap.add_argument("--bench", type=_count(1, "the number of timed runs"), metavar="N",
                    help="our median ms over N runs beside LiteRT's (XNNPACK, builtin, reference kernels), one "
                         "thread each (numpy's BLAS pinned too; the thread counts are printed)")
    ap.add_argument("--check", action="store_true",
                    help="only the report: what the delegate would do at the feature level, its partitions, per "
                         "operator the NNAPI operation(s) or why it stays on the CPU")
    ap.add_argument("--max-partitions", type=_count(0, "the delegate's max_number_delegated_partitions"),
                    default=3, metavar="N", help="the delegate's max_number_delegated_partitions (default 3, "
                                                 "0: no limit)")
    ap.add_argument("--allow-fp16", action="store_true",
                    help="TFLite's allow_fp16: the model relaxed to float16 on a device with fp16 numerics "
                         "(default --devices gpu=float-fast:fp16); --compare then shows its accuracy")
    ap.add_argument("--devices", metavar="SPEC", help="NNAPI_PY_DEVICES for this run")
    ap.add_argument("--cache", metavar="DIR",
                    help="the compilation cache directory (made if missing): a second run loads the compiled "
                         "plans instead of compiling again")
    a = ap.parse_args(argv)
    if a.check:
        extra = [f for f, v in (("--input", a.input), ("--save", a.save), ("--compare", a.compare),
                                ("--bench", a.bench), ("--cache", a.cache)) if v]
        if extra:
            raise UsageError(f"--check only reports what the delegate would do and runs nothing: drop "
                             f"{', '.join(extra)} (or --check)")
    if a.no_reference_ok and not a.compare:
        raise UsageError("--no-reference-ok goes with --compare (it lets a missing reference pass)")
    if a.compare and not P.litert_available():
        if not a.no_reference_ok:
            raise NoReference(f"--compare needs LiteRT, the reference it compares with, which is not installed: "
                              f"{P.INSTALL} (or pip install 'nnapi_py[compare]'); --no-reference-ok runs without "
                              f"comparing")
    from . import tflite as T
    from .devices import emulated
    devs = a.devices or ("gpu=float-fast:fp16" if a.allow_fp16 else None)
    for flag, d in (("--save", a.save), ("--cache", a.cache)):
        if d and os.path.exists(d) and not os.path.isdir(d):
            raise UsageError(f"{flag} {d}: not a directory (it is made if missing)")
    arrays = [_load_npy(f) for f in a.input]
    shapes = _shapes_for(a.model, a.input_shape, arrays)

    def load(**options):
        options.update(feature_level=a.feature_level, max_partitions=a.max_partitions, check_only=a.check,
                       input_shapes=shapes)
        if a.cache and not a.check:
            os.makedirs(a.cache, exist_ok=True)
            options["cache_dir"] = a.cache
        if devs is None:
            return T.load(a.model, **options)
        with emulated(devices=devs):            # compilations keep the devices they were made with
            return T.load(a.model, **options)
    m = load(allow_fp16=a.allow_fp16)           # errors: entry() says them
    if a.check:
        if shapes is not None:
            print("input shapes checked at: " + "; ".join(f"{n} {list(s)}" for n, s in zip(m.input_names, shapes)))
        print(m.report())
        return 0
    if arrays:
        inputs = arrays
    else:
        rng = np.random.default_rng(0)
        inputs = [(rng.uniform(-1, 1, dims) if np.dtype(dt).kind == "f" else rng.integers(-128, 128, dims)).astype(dt)
                  for _, dt, dims in m.input_specs]
    outs = m.run(inputs)
    for name, o in zip(m.output_names, outs):
        rng_text = f" min {o.min():.6g} max {o.max():.6g}" if o.size else " (empty)"
        print(f"{name}: {o.dtype}{list(o.shape)}{rng_text}")
    if a.save:
        os.makedirs(a.save, exist_ok=True)
        for k, o in enumerate(outs):
            np.save(os.path.join(a.save, f"output_{k}.npy"), o)
    sys.stdout.flush()
    verdict = 0
    if a.compare:
        if not P.litert_available():
            print(f"nnapi_py: note: nothing compared (--no-reference-ok): LiteRT is not installed ({P.INSTALL})",
                  file=sys.stderr)
        else:
            try:
                verdict = (compare_fp16(m, inputs, load, a.model) if a.allow_fp16 else
                           compare(m, inputs, a.model, bool(a.input)))
            except NoReference as e:
                if not a.no_reference_ok:
                    raise
                print(f"nnapi_py: note: nothing compared (--no-reference-ok): {e}", file=sys.stderr)
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
        have = P.litert_available()
        print(f"threads: nnapi_py numpy BLAS: {blas.describe()}; LiteRT: "
              f"{'num_threads=1' if have else 'not installed'}")
        print(f"nnapi_py: {median_ms(lambda: m.run(inputs)):.3f} ms (median of {a.bench})")
        if not have:
            print(f"LiteRT: not installed, not timed ({P.INSTALL})")
        else:
            shapes_run = [np.shape(x) for x in inputs]
            for label, kind in (("LiteRT XNNPACK", "AUTO"), ("LiteRT without XNNPACK", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"),
                                ("LiteRT reference kernels", "BUILTIN_REF")):
                try:
                    it = P.interpreter(a.model, kind, shapes_run)
                    P.invoke(it, inputs)
                except (RuntimeError, ValueError) as e:
                    print(f"{label}: unavailable for this model ({_first_line(e)})")
                    continue
                print(f"{label}: {median_ms(it.invoke):.3f} ms (median of {a.bench})")
    return verdict


def _first_line(e):
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__


def _litert(path, shapes, *kinds):
    """(interpreter, kind) for the first op resolver kind LiteRT can run the model with; NoReference
    naming the reason when none can."""
    from .tflite import compare as P
    why = []
    for kind in kinds:
        try:
            return P.interpreter(path, kind, shapes), kind
        except (RuntimeError, ValueError) as e:
            why.append(f"{kind}: {_first_line(e)}")
    raise NoReference(f"LiteRT cannot run {os.path.basename(path)} ({'; '.join(why)}): there is no reference to "
                      f"compare with")


_KIND_LABEL = {"BUILTIN_REF": "LiteRT reference kernels (BUILTIN_REF)",
               "BUILTIN_WITHOUT_DEFAULT_DELEGATES": "LiteRT builtin kernels (without XNNPACK)",
               "AUTO": "LiteRT default kernels (XNNPACK)"}


def compare(m, inputs, path, given=False):
    """--compare: ours and LiteRT's optimized kernels against LiteRT's reference kernels on the
    same inputs, per output, under the policy of nnapi_py/tflite/compare.py (the tests' one); 0
    when every output is within its bound, else 1.  NoReference when LiteRT cannot run it."""
    import tempfile
    import numpy as np
    from .tflite import compare as P
    shapes = [np.shape(x) for x in inputs]
    with tempfile.TemporaryDirectory(prefix="nnapi_py-compare-") as tmp:
        try:
            exact = P.float_weights(path, os.path.join(tmp, "float_weights.tflite"))
        except ImportError:                     # flatbuffers missing: LiteRT without its schema helpers
            exact = None
        ref, ref_kind = _litert(exact or path, shapes, "BUILTIN_REF", "AUTO")
        want = P.invoke(ref, inputs)
        hybrid = P.invoke(_litert(path, shapes, ref_kind, "AUTO")[0], inputs) if exact else None
    try:
        opt, opt_kind = _litert(path, shapes, "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "AUTO")
        fast = P.invoke(opt, inputs)
    except NoReference:
        opt_kind, fast = None, {}
    try:
        xnn = P.invoke(P.interpreter(path, "AUTO", shapes), inputs)
    except (RuntimeError, ValueError):
        xnn = {}
    scales = P.output_scales(ref)
    m.reset()
    ours = m.run(inputs)
    where = "the --input arrays" if given else "random inputs (seed 0)"
    print(f"compared: nnapi_py with {_KIND_LABEL[ref_kind]}"
          + (" on a copy with the hybrid weights dequantized to float32 (what NNAPI computes), and with LiteRT "
             "on the model itself" if exact else "")
          + f", on the same {where}"
          + (f"; {_KIND_LABEL[opt_kind]} and LiteRT XNNPACK measured beside" if opt_kind else ""))
    if ref_kind != "BUILTIN_REF":
        print("note: LiteRT's reference kernels cannot run this model (an operator they lack): its default kernels "
              "are the reference")
    print(f"bound: {P.POLICY}" + (f"; hybrid: within {P.HYBRID_RTOL:g} * max(1, max |ref|) of LiteRT on the model "
                                  "itself" if exact else ""))
    bad = []
    for name, w in want.items():
        got = ours[m.output_names.index(name)]
        label = _KIND_LABEL[ref_kind].split(" (")[0]
        if exact and w.dtype.kind == "f":           # LiteRT's optimized kernels beside the hybrid reference
            checks = [P.check_output(name, got, w, reference=label + " (float-weights copy)"),
                      P.check_output(name, got, hybrid[name], fast.get(name), rtol=P.HYBRID_RTOL,
                                     xnnpack=xnn.get(name), reference=label + " on the hybrid model itself")]
        else:
            checks = [P.check_output(name, got, w, fast.get(name), scales.get(name, 0.0), xnnpack=xnn.get(name),
                                     reference=label)]
        for c in checks:
            print(c.line())
        if not all(c.ok for c in checks):
            bad.append(name)
    print(f"verdict: {'MATCH' if not bad else 'MISMATCH'}: {len(want) - len(bad)} of {len(want)} output(s) within "
          f"the bound" + (f" (outside: {', '.join(bad)})" if bad else ""))
    return 1 if bad else 0


def compare_fp16(m, inputs, load, path):
    """--compare --allow-fp16: the accuracy of float16 numerics per output (against our float32
    run and against LiteRT's reference kernels), information without a verdict; the verdict is
    the policy's on our float32 run of the same model."""
    import numpy as np
    from .tflite import compare as P
    shapes = [np.shape(x) for x in inputs]
    ref, ref_kind = _litert(path, shapes, "BUILTIN_REF", "AUTO")
    want_all = P.invoke(ref, inputs)
    m.reset()
    ours = m.run(inputs)
    full = load().run(inputs)           # the same model in float32

    def diff(got, want):
        err, rel = P.distance(got, want)
        return f"max abs {err:.3g}, max rel {rel:.3g}"
    print(f"compared: nnapi_py with --allow-fp16 (float16 numerics) and without (float32) with "
          f"{_KIND_LABEL[ref_kind]} on the same inputs; the float16 figures are its accuracy (no verdict: "
          f"--allow-fp16 trades accuracy for speed); the verdict is on the float32 run")
    print(f"bound: {P.POLICY}")
    bad = []
    for name, want in want_all.items():
        k = m.output_names.index(name)
        want = want.astype(np.float64) if want.dtype.kind == "f" else want
        got, f32 = ours[k].reshape(want.shape), full[k].reshape(want.shape)
        print(f"{name}: fp16 vs float32 {diff(got, f32)}; fp16 vs LiteRT {diff(got, want)}; "
              f"float32 vs LiteRT {diff(f32, want)}")
        c = P.check_output(name, f32, want_all[name], reference=_KIND_LABEL[ref_kind].split(" (")[0])
        print(c.line("float32 run"))
        if not c.ok:
            bad.append(name)
    print(f"verdict (float32 run): {'MATCH' if not bad else 'MISMATCH'}: {len(want_all) - len(bad)} of "
          f"{len(want_all)} output(s) within the bound" + (f" (outside: {', '.join(bad)})" if bad else ""))
    return 1 if bad else 0


def main(argv):
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(__doc__)
        return 0
    if argv[0] == "show":
        return show(argv[1:])
    if argv[0] == "run":
        return run_tflite(argv[1:])
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    out = []
    level = None
    if "--feature-level" in argv:
        k = argv.index("--feature-level")
        if k + 1 >= len(argv):
            print("nnapi_py: --feature-level needs a level (1..8 or an Android API level 27..35)", file=sys.stderr)
            return 2
        level = argv[k + 1]
        argv = argv[:k] + argv[k + 2:]
        try:
            library_path(level)
        except (ValueError, FileNotFoundError) as e:
            print(f"nnapi_py: {e}", file=sys.stderr)
            return 2
    for a in argv:
        if a == "--suppressions" or a.startswith("--suppressions="):
            try:
                out.append(suppressions_text(a.partition("=")[2]))
            except KeyError as e:
                print(f"nnapi_py: {e.args[0]}", file=sys.stderr)
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
                print(f"nnapi_py: {e}", file=sys.stderr)
                return 2
        else:
            hint = " (subcommands: run, show; python -m nnapi_py --help)" if not a.startswith("-") else \
                " (python -m nnapi_py --help)"
            print(f"nnapi_py: unknown option {a}{hint}", file=sys.stderr)
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
    # the importer's hint names the Python call; on the command line it is --input-shape
    msg = msg.replace("load(path, input_shapes=[...])",
                      "--input-shape NAME=D1,D2,... (one per such input; in Python load(path, input_shapes=[...]))")
    lines = [ln for ln in msg.splitlines() if ln.strip()] or [type(e).__name__]
    return code, "\n".join(lines) if getattr(e, "multiline", False) else " ".join(ln.strip() for ln in lines)


def entry(argv):
    """main() with every failure as one line and an exit code (the traceback with --traceback
    or NNAPI_PY_TRACE=1); --bench pins the BLAS threads before numpy loads.  A reader that goes
    away (`... | head -1`) ends the command quietly, as SIGPIPE ends a Unix tool."""
    want_tb = "--traceback" in argv or os.environ.get("NNAPI_PY_TRACE", "").strip().lower() in _TRACE_VALUES
    argv = [a for a in argv if a != "--traceback"]
    if argv[:1] == ["run"] and any(a == "--bench" or a.startswith("--bench=") for a in argv):
        from . import blas
        blas.pin_environment(1)
    try:
        code = main(argv)
        sys.stdout.flush()                              # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:
        return _broken_pipe()
    except KeyboardInterrupt:
        return 130
    except SystemExit as e:                             # argparse's --help (0)
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            return _broken_pipe()
        raise e
    except Exception as e:
        if want_tb:
            import traceback
            traceback.print_exc()
        code, line = _failure(e)
        print(f"nnapi_py: {line}", file=sys.stderr)
        return code


def _broken_pipe():
    """stdout's reader has gone: nothing more is written (Python's own flush at exit is sent to
    /dev/null) and the process ends as a Unix tool does on SIGPIPE (by the signal where it can,
    else exit 141 = 128 + SIGPIPE), without a message."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError):
        pass
    import signal
    if hasattr(signal, "SIGPIPE"):
        try:
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGPIPE)
        except (OSError, ValueError):
            pass
    return 141


if __name__ == "__main__":
    sys.exit(entry(sys.argv[1:]))
