"""python -m nnapi_py [--cflags] [--libs] [--libdir] [--version]: flags to build against the library.
python -m nnapi_py run MODEL.tflite [--input a.npy ...] [--save DIR] [--compare] [--bench N] [--check]
  [--feature-level N]: run a .tflite model through NNAPI, partitioned as TFLite's NNAPI delegate
would (random inputs unless given; --compare: LiteRT on the same inputs, max abs / rel difference
per output; --bench N: our median ms beside LiteRT's, one thread; --check: only the report --
what the delegate would do on that Android release, partitions, per operator the NNAPI
operation(s) or why it stays on the CPU; --feature-level N: 1..8 or an API level 27..35, default
the runtime's: NNAPI_PY_FEATURE_LEVEL).
python -m nnapi_py show FILE.json [--dot | --json | --svg OUT.svg]: a model dumped with
NNAPI_PY_DUMP=DIR (or written by Model.to_json()) as a table (default), Graphviz dot, JSON or SVG."""
import os
import sys

from . import __version__, include_dir, library_path


def show(argv):
    import json
    from . import inspect
    files = [a for a in argv if not a.startswith("--")]
    if len(files) != 1 or not files[0].endswith(".json"):
        print("usage: python -m nnapi_py show MODEL.json [--dot | --json | --svg OUT.svg]", file=sys.stderr)
        return 2
    try:
        with open(files[0]) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        print(f"cannot read {files[0]}: {e}", file=sys.stderr)
        return 1
    if "--dot" in argv:
        print(inspect.to_dot(d), end="")
    elif "--json" in argv:
        print(inspect.to_json(d))
    elif "--svg" in argv:
        k = argv.index("--svg")
        if k + 1 >= len(argv):
            print("--svg needs an output file", file=sys.stderr)
            return 2
        try:
            svg = inspect.render_svg(inspect.to_dot(d))
        except RuntimeError as e:
            print(e, file=sys.stderr)
            return 1
        with open(argv[k + 1], "w") as f:
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
    a = ap.parse_args(argv)
    from . import tflite as T
    try:
        m = T.load(a.model, feature_level=a.feature_level, check_only=a.check)
    except (T.LoadError, ValueError) as e:
        print(e, file=sys.stderr)
        return 1
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
            print("LiteRT is not installed (pip install ai-edge-litert): no comparison", file=sys.stderr)
            return 0
        def interp(kind):
            try:
                it = Interpreter(model_path=a.model, num_threads=1, experimental_op_resolver_type=kind)
                it.allocate_tensors()
                return it
            except (RuntimeError, ValueError):
                return None
        if a.compare:
            m.reset()
            ref = interp(OpResolverType.BUILTIN_REF) or interp(OpResolverType.AUTO)
            for d, x in zip(ref.get_input_details(), inputs):
                ref.set_tensor(d["index"], x)
            ref.invoke()
            ours = m.run(inputs)
            for d in ref.get_output_details():
                want = ref.get_tensor(d["index"])
                got = ours[m.output_names.index(d["name"])].reshape(want.shape).astype(np.float64)
                diff = np.abs(got - want)
                print(f"{d['name']}: max abs difference {diff.max():.3g}, max rel "
                      f"{diff.max() / max(1.0, float(np.abs(want).max())):.3g} (LiteRT reference kernels)")
        if a.bench:
            def median_ms(fn):
                fn()
                ts = []
                for _ in range(a.bench):
                    t0 = time.perf_counter()
                    fn()
                    ts.append((time.perf_counter() - t0) * 1e3)
                return statistics.median(ts)
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
    return 0


def main(argv):
    if not argv or "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    if argv[0] == "show":
        return show(argv[1:])
    if argv[0] == "run":
        return run_tflite(argv[1:])
    out = []
    for a in argv:
        if a == "--cflags":
            out.append(f"-I{include_dir()}")
        elif a == "--libs":
            d = os.path.dirname(library_path())
            out.append(f"-L{d} -Wl,-rpath,{d} -lneuralnetworks")
        elif a == "--libdir":
            out.append(os.path.dirname(library_path()))
        elif a == "--version":
            out.append(__version__)
        else:
            print(f"unknown option {a}", file=sys.stderr)
            return 2
    print(" ".join(out))
    return 0


sys.exit(main(sys.argv[1:]))
