"""Moved to nnapi_py/testing/corpus.py (`from nnapi_py.testing import corpus`); this name stays only for
bench/small_path.py until it imports that module."""
from nnapi_py.testing.corpus import *       # noqa: F401,F403
