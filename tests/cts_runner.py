#!/usr/bin/env python3
"""The conformance runner's command, kept at this path: `python tests/cts_runner.py ARGS` is
`python -m nnapi_py.testing.cts ARGS` (the runner lives in nnapi_py/testing/: cts.py, vectors.py, abi.py,
runner.py).  Importing this file gives the runner's API, for tests not yet importing nnapi_py.testing.cts."""
import sys

from nnapi_py.testing.cts import *          # noqa: F401,F403
from nnapi_py.testing.cts import _Runner, main  # noqa: F401

if __name__ == "__main__":
    sys.exit(main())
