"""python -m nnapi_py [--cflags] [--libs] [--libdir] [--version]: flags to build against the library.
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


def main(argv):
    if not argv or "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    if argv[0] == "show":
        return show(argv[1:])
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
