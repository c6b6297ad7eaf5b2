#!/usr/bin/env python3
"""The conformance runner's command, kept at this path: `python tests/cts_runner.py ARGS` is
`python -m nnapi_py.testing.cts ARGS` (the runner lives in nnapi_py/testing/: cts.py, vectors.py, abi.py,
runner.py; tests import it from there)."""
import sys

from nnapi_py.testing.cts import main

if __name__ == "__main__":
    sys.exit(main())
