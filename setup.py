"""pip install . : builds libneuralnetworks.so with build_ffi.py and ships it inside the
nnapi_py package (with the headers, the CMake package config and the pkg-config file), where the
library finds its Python package again."""
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "nnapi_py")
        subprocess.run([sys.executable, os.path.join(ROOT, "build_ffi.py"), "--out", pkg,
                        "--tmp", os.path.join(self.build_lib, "..", "nnapi_py_ffi"),
                        "--package-root", os.path.abspath(self.build_lib)], check=True)
        inc = os.path.join(pkg, "include")
        if os.path.exists(inc):
            shutil.rmtree(inc)
        shutil.copytree(os.path.join(ROOT, "include"), inc)
        # find_package(nnapi_py) and pkg-config from the installed package (docs/cmake.md):
        # nnapi_py/cmake/nnapi_pyConfig.cmake and nnapi_py/pkgconfig/neuralnetworks.pc
        subprocess.run([sys.executable, os.path.join(ROOT, "cmake", "render.py"), "wheel",
                        "--cmake-dir", os.path.join(pkg, "cmake"),
                        "--pkgconfig-dir", os.path.join(pkg, "pkgconfig")], check=True)


class BinaryDistribution(Distribution):
    """The wheel holds a CPython-specific shared library: tag it for this interpreter and
    platform (e.g. cp311-cp311-linux_x86_64), not py3-none-any."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution,
      options={"build": {"build_base": "build/pip"}})   # build/lib is the library's own place
