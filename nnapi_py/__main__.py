"""python -m nnapi_py [--cflags] [--libs] [--libdir] [--version]: flags to build against the library."""
import os
import sys

from . import __version__, include_dir, library_path


def main(argv):
    if not argv or "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
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
