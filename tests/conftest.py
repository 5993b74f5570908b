"""Test-suite policy.

Numba compiles cost 0.3-1 s per kernel, so the suite runs plans through the interpreter by
default (it is the reference semantics) and only tests marked ``compiled`` build fused kernels;
those share kernels through the process-wide kernel cache.

Matmul routes are forced to the private BLAS (``ND4PY_BLAS=private``, unless set): the suite
tests that route's kernels, and no test may depend on a timing (``kernels.routes`` measures
otherwise; ``tests/test_routes.py`` tests the measuring with a fake clock).
"""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("ND4PY_BLAS", "private")

from samediff import compiler


def pytest_configure(config):
    config.addinivalue_line("markers", "compiled: run plans with the fused Numba compiler")


@pytest.fixture(autouse=True)
def _executor(request):
    wanted = "compiled" if request.node.get_closest_marker("compiled") else "interpreter"
    previous = compiler.set_executor(wanted)
    yield
    compiler.set_executor(previous)
