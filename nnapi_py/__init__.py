"""nnapi_py: the Android Neural Networks API as a Linux libneuralnetworks.so on numpy."""
import os

__version__ = "0.1.0"

_HERE = os.path.dirname(os.path.abspath(__file__))


def library_path(feature_level=None):
    """Path of libneuralnetworks.so: inside the installed package, else the build tree.
    feature_level=N (1..8, or the Android API level 27..35): the library that exports only the
    functions of feature levels <= N and behaves as level N (feature-level-N/)."""
    sub = ()
    if feature_level is not None:
        from .devices import parse_level
        sub = (f"feature-level-{parse_level(feature_level)}",)
    for p in (os.path.join(_HERE, *sub, "libneuralnetworks.so"),
              os.path.join(os.path.dirname(_HERE), "build", "lib", *sub, "libneuralnetworks.so")):
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"{os.path.join(*sub, 'libneuralnetworks.so')} not found: run `make lib` "
                            "(or pip install the package)")


def include_dir():
    for p in (os.path.join(_HERE, "include"), os.path.join(os.path.dirname(_HERE), "include")):
        if os.path.isfile(os.path.join(p, "android", "NeuralNetworks.h")):
            return p
    raise FileNotFoundError("NNAPI headers not found")


def _config_dir(kind, installed, build_tree, filename):
    for p in (os.path.join(_HERE, installed), os.path.join(os.path.dirname(_HERE), "build", "lib", *build_tree)):
        if os.path.isfile(os.path.join(p, filename)):
            return p
    raise FileNotFoundError(f"{kind} not found: run `make lib` (or pip install the package)")


def cmake_dir():
    """The directory holding nnapi_pyConfig.cmake (find_package(nnapi_py), docs/cmake.md): inside
    the installed package (nnapi_py/cmake), else the build tree (build/lib/cmake/nnapi_py)."""
    return _config_dir("the CMake package config nnapi_pyConfig.cmake", "cmake", ("cmake", "nnapi_py"),
                       "nnapi_pyConfig.cmake")


def pkgconfig_dir():
    """The directory holding neuralnetworks.pc (for PKG_CONFIG_PATH): nnapi_py/pkgconfig in the
    installed package, else build/lib/pkgconfig."""
    return _config_dir("the pkg-config file neuralnetworks.pc", "pkgconfig", ("pkgconfig",), "neuralnetworks.pc")


class MissingDependency(ImportError):
    """An optional package a feature needs is not installed: the message names the pip command
    (the extras are in pyproject.toml: nnapi_py[tflite], nnapi_py[compare])."""


def require(module: str, extra: str, purpose: str):
    """Import an optional package, or raise MissingDependency saying how to install it."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependency(f"{purpose} needs the Python package {module!r}, which is not installed: "
                                f"pip install 'nnapi_py[{extra}]'", name=module) from e


def last_error():
    """(code, reason) of this thread's most recent failed ANeuralNetworks* call."""
    from .errors import last_error as _le
    return _le()


def __getattr__(name):
    """``from nnapi_py import ffi, lib``: the header declared with cffi and the library opened
    with it (loaded on first use; NNAPI_PY_LIB picks another library file)."""
    if name in ("ffi", "lib"):
        from .cdef import open_library
        g = globals()
        if "lib" not in g:
            g["ffi"], g["lib"] = open_library()
        return g[name]
    import importlib
    if os.path.exists(os.path.join(_HERE, name + ".py")) or os.path.isdir(os.path.join(_HERE, name)):
        return importlib.import_module(f"{__name__}.{name}")     # a submodule, never shadowed
    if not name.startswith("_"):
        _nn = importlib.import_module(__name__ + ".nn")    # the Pythonic API: nnapi_py.Model, ...
        if hasattr(_nn, name):
            value = globals()[name] = getattr(_nn, name)    # resolved once
            return value
    raise AttributeError(f"module 'nnapi_py' has no attribute {name!r}")
