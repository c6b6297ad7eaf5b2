"""Write the package-config files of one layout from the templates beside this script: the CMake
package config (nnapi_pyConfig.cmake, nnapi_pyConfigVersion.cmake) and pkg-config's
neuralnetworks.pc.  One template each, three layouts (docs/cmake.md):

  build    the checkout after `make lib`: build/lib/cmake/nnapi_py/, build/lib/pkgconfig/
  install  `make install`: PREFIX/lib/cmake/nnapi_py/, PREFIX/lib/pkgconfig/ (level libraries in
           PREFIX/lib/nnapi_py/feature-level-N/)
  wheel    the installed package (setup.py): nnapi_py/cmake/, nnapi_py/pkgconfig/

Usage: python cmake/render.py LAYOUT [--cmake-dir DIR] [--pkgconfig-dir DIR] [--prefix PREFIX]
(--prefix: the .pc file's prefix, for build and install; the CMake files need none: they find
their tree from their own location, and the wheel's .pc from ${pcfiledir})."""
import argparse
import os
import re
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FEATURE_LEVELS = range(1, 9)

# per layout: the tree's root seen from the CMake config's directory, and from that root the
# library's directory, the include directory and the directory holding feature-level-N/;
# pkg-config's libdir, includedir and suppressionsdir (from ${prefix}), and its prefix when not given
LAYOUTS = {
    "build": dict(ROOT_FROM_CONFIG="../../../..", LIBDIR="build/lib", INCLUDEDIR="include", LEVELDIR="build/lib",
                  libdir="${prefix}/build/lib", includedir="${prefix}/include", prefix=None,
                  suppressionsdir="${prefix}/nnapi_py/suppressions"),
    "install": dict(ROOT_FROM_CONFIG="../../..", LIBDIR="lib", INCLUDEDIR="include", LEVELDIR="lib/nnapi_py",
                    libdir="${prefix}/lib", includedir="${prefix}/include", prefix=None,
                    suppressionsdir="${prefix}/share/nnapi_py/suppressions"),
    "wheel": dict(ROOT_FROM_CONFIG="..", LIBDIR=".", INCLUDEDIR="include", LEVELDIR=".",
                  libdir="${prefix}", includedir="${prefix}/include", prefix="${pcfiledir}/..",
                  suppressionsdir="${prefix}/suppressions"),
}


def version():
    """nnapi_py.__version__, read from the source (the package is not imported)."""
    with open(os.path.join(ROOT, "nnapi_py", "__init__.py")) as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def substitute(template, values):
    with open(os.path.join(HERE, template)) as f:
        text = f.read()
    text = re.sub(r"@(\w+)@", lambda m: str(values[m.group(1)]), text)
    return text


def write(path, text):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def render(layout, cmake_dir=None, pkgconfig_dir=None, prefix=None):
    """Write the files of `layout` into the directories given; returns their paths."""
    values = dict(LAYOUTS[layout], LAYOUT=layout, NNAPI_PY_VERSION=version(),
                  FEATURE_LEVELS=" ".join(map(str, FEATURE_LEVELS)), SIZEOF_VOID_P=struct.calcsize("P"))
    values["prefix"] = prefix if prefix is not None else values["prefix"]
    written = []
    if cmake_dir:
        for name in ("nnapi_pyConfig.cmake", "nnapi_pyConfigVersion.cmake"):
            written.append(write(os.path.join(cmake_dir, name), substitute(name + ".in", values)))
    if pkgconfig_dir:
        if values["prefix"] is None:
            raise SystemExit(f"render.py: the {layout} layout's neuralnetworks.pc needs --prefix")
        written.append(write(os.path.join(pkgconfig_dir, "neuralnetworks.pc"),
                             substitute("neuralnetworks.pc.in", values)))
    return written


def main():
    ap = argparse.ArgumentParser(prog="python cmake/render.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("layout", choices=sorted(LAYOUTS))
    ap.add_argument("--cmake-dir")
    ap.add_argument("--pkgconfig-dir")
    ap.add_argument("--prefix")
    a = ap.parse_args()
    render(a.layout, a.cmake_dir, a.pkgconfig_dir, a.prefix)


if __name__ == "__main__":
    main()
