"""Suite-wide checks.

A kernel that raises an unexpected Python exception means validation let through something
a kernel cannot handle: the library reports it as OP_FAILED with an "internal error" reason
(nnapi_py/plan.py records it). Any test that causes one fails, whatever it asserted itself."""
import sys

import pytest


@pytest.fixture(autouse=True)
def no_internal_errors():
    plan = sys.modules.get("nnapi_py.plan")
    before = len(plan.INTERNAL_ERRORS) if plan is not None else 0
    yield
    plan = sys.modules.get("nnapi_py.plan")
    if plan is not None and len(plan.INTERNAL_ERRORS) > before:
        new = plan.INTERNAL_ERRORS[before:]
        pytest.fail(f"the library hit internal errors (validation should have rejected these): {new}")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "strict_mode: run under NNAPI_PY_STRICT=1, where every rule fails at the earliest "
                   "point (also the rules Android 14 defers to the computation; tests/test_deferred_checks.py "
                   "asserts those in the default mode)")


@pytest.fixture(autouse=True)
def _strict_mode_marker(request, monkeypatch):
    """Tests marked strict_mode assert where each rule fails at the earliest point (the lint)."""
    if request.node.get_closest_marker("strict_mode") is not None:
        monkeypatch.setenv("NNAPI_PY_STRICT", "1")
