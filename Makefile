# nnapi_py -- see README.md.  Everything runs inside a private virtual environment (.venv).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
LIB    := build/lib/libneuralnetworks.so
LEVELS := 1 2 3 4 5 6 7 8
# one library per NNAPI feature level: only that level's functions exported (build_ffi.py)
LEVEL_LIBS := $(foreach n,$(LEVELS),build/lib/feature-level-$(n)/libneuralnetworks.so)
CC     ?= cc
CFLAGS ?= -O2 -std=c11 -Wall -Wextra
PREFIX ?= /usr/local
LINK   := -Iinclude -Lbuild/lib -lneuralnetworks -Wl,-rpath,$(CURDIR)/build/lib -lpthread -ldl

.PHONY: all venv lib demo test checkers bench bench-profile install clean

all: lib

$(VENV)/.ready: pyproject.toml setup.py
	@echo "== first run: creating the virtual environment $(VENV) (a minute or two; later runs skip this)"
	$(PYTHON) -m venv $(VENV)
	@echo "== installing cffi, numpy, pytest, setuptools into $(VENV)"
	$(PY) -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
	$(PY) -m pip install --quiet "cffi>=1.16" "numpy>=1.24" "pytest>=7" "setuptools>=65" wheel
	@echo "== installing nnapi_py itself into $(VENV) (editable: python -m nnapi_py works from any directory)"
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e . >/dev/null
	touch $@

venv: $(VENV)/.ready

# What the tests need beyond the base dependencies: PyTorch's CPU build for the in-process
# torch -> NNAPI tests (tests/test_torch_nnapi.py).  Those tests skip without it, except in CI.
TORCH ?= torch==2.13.0
TFLITE ?= tflite==2.18.0 ai-edge-litert==2.3.0
$(VENV)/.test-ready: $(VENV)/.ready
	@echo "installing test dependencies into $(VENV): $(TORCH) $(TFLITE)"
	@$(PY) -m pip install --quiet "$(TORCH)" || { \
	  if [ -n "$$CI" ]; then echo "CI: could not install $(TORCH)" >&2; exit 1; fi; \
	  echo "warning: could not install $(TORCH); the PyTorch tests will skip"; }
	@$(PY) -m pip install --quiet $(TFLITE) || { \
	  if [ -n "$$CI" ]; then echo "CI: could not install $(TFLITE)" >&2; exit 1; fi; \
	  echo "warning: could not install $(TFLITE); the .tflite tests will skip"; }
	touch $@

$(LIB) $(LEVEL_LIBS) &: $(VENV)/.ready build_ffi.py include/android/NeuralNetworks.h include/nnapi_py.h include/NeuralNetworksSupportLibraryImpl.h
	$(PY) build_ffi.py --out build/lib

# The package-config files, one template each (cmake/*.in) rendered by cmake/render.py for the
# layout: here the build tree (build/lib/pkgconfig/, build/lib/cmake/nnapi_py/: find_package(nnapi_py)
# with -Dnnapi_py_DIR=$(python -m nnapi_py --cmake-dir)); `make install` and setup.py render theirs.
RENDER     := $(PY) cmake/render.py
RENDER_IN  := cmake/render.py cmake/neuralnetworks.pc.in cmake/nnapi_pyConfig.cmake.in cmake/nnapi_pyConfigVersion.cmake.in nnapi_py/__init__.py
BUILD_CMAKE := build/lib/cmake/nnapi_py/nnapi_pyConfig.cmake build/lib/cmake/nnapi_py/nnapi_pyConfigVersion.cmake

build/lib/pkgconfig/neuralnetworks.pc: $(RENDER_IN) | $(VENV)/.ready
	@$(RENDER) build --pkgconfig-dir $(dir $@) --prefix "$(CURDIR)"

$(BUILD_CMAKE) &: $(RENDER_IN) | $(VENV)/.ready
	@$(RENDER) build --cmake-dir build/lib/cmake/nnapi_py

# The runtime's bytecode, written once here: a process that starts the library (cold start)
# then loads it instead of compiling ~25 modules (0.20 -> 0.10 s where PYTHONDONTWRITEBYTECODE
# is set or the checkout is read-only for the user running it).  Python recompiles a module in
# memory when its source is newer, so an edited file is never run stale.
lib: $(LIB) $(LEVEL_LIBS) build/lib/pkgconfig/neuralnetworks.pc $(BUILD_CMAKE)
	@$(PY) -m compileall -q nnapi_py >/dev/null

build/demo: examples/demo.c $(LIB)
	$(CC) $(CFLAGS) $< -o $@ $(LINK)

demo: build/demo
	./build/demo

test: lib $(VENV)/.test-ready checkers
	$(PY) -m pytest -q -rs tests

# The tools a client's CI checks with (tests/test_sanitizers.py): gcc brings ASan, UBSan and TSan;
# valgrind and clang (its static ASan runtime) are Debian packages, installed here when missing
# and the machine allows it (root with apt-get).  Otherwise those tests skip, saying why.
CHECKERS := valgrind clang
checkers:
	@missing=""; for t in $(CHECKERS); do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "== installing$$missing (Debian packages) for the sanitizer tests"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; } >/dev/null 2>&1 \
	      || echo "warning: could not install$$missing; tests/test_sanitizers.py skips what needs them"; \
	  else echo "warning:$$missing not installed (needs root and apt-get); tests/test_sanitizers.py skips what needs them"; fi; \
	fi

bench: lib $(VENV)/.test-ready
	$(PY) bench/run.py

# time per operation type of the MobileNetV2-style network (NNAPI_PY_PROFILE=1, printed at exit)
bench-profile: lib
	@mkdir -p build/bench
	$(CC) $(CFLAGS) bench/bench_mobilenet.c -o build/bench/bench_mobilenet $(LINK)
	NNAPI_PY_PROFILE=1 OPENBLAS_NUM_THREADS=1 ./build/bench/bench_mobilenet float32 10
	NNAPI_PY_PROFILE=1 OPENBLAS_NUM_THREADS=1 ./build/bench/bench_mobilenet quant8 10

# DESTDIR=/stage make install PREFIX=/usr: a staged install (the .pc says /usr; the CMake
# config finds its tree from its own location, so it works in the stage and after the copy).
DEST := $(DESTDIR)$(PREFIX)
install: lib
	install -d $(DEST)/lib $(DEST)/include/android $(DEST)/lib/pkgconfig $(DEST)/lib/cmake/nnapi_py
	install -m 755 $(LIB) $(DEST)/lib/libneuralnetworks.so
	for n in $(LEVELS); do install -d $(DEST)/lib/nnapi_py/feature-level-$$n && \
	  install -m 755 build/lib/feature-level-$$n/libneuralnetworks.so $(DEST)/lib/nnapi_py/feature-level-$$n/; done
	install -m 644 include/android/NeuralNetworks.h $(DEST)/include/android/
	install -m 644 include/NeuralNetworks.h include/nnapi_py.h include/NeuralNetworksSupportLibraryImpl.h $(DEST)/include/
	install -d $(DEST)/share/nnapi_py/suppressions
	install -m 644 nnapi_py/suppressions/*.supp $(DEST)/share/nnapi_py/suppressions/
	$(RENDER) install --pkgconfig-dir $(DEST)/lib/pkgconfig --prefix "$(PREFIX)" --cmake-dir $(DEST)/lib/cmake/nnapi_py

clean:
	rm -rf build
