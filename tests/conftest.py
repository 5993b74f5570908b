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


#: model files and the script that writes them where torch is installed: data, not tests
collect_ignore_glob = ["data/*"]


def pytest_configure(config):
    if getattr(config.option, "dist", None) == "load":
        # ``-n auto`` (pytest-xdist) hands each worker a quarter of the tests up front and
        # never moves them: one worker kept ~900 compile-heavy tests for 290 s while the other
        # ran out of work after 100 s (5m49 wall). Work stealing rebalances: 3m46.
        config.option.dist = "worksteal"
    config.addinivalue_line("markers", "compiled: run plans with the fused Numba compiler")
    config.addinivalue_line("markers", "heavy(seconds=10): takes many seconds (an example's "
                            "training run, a compile-bound hypothesis family); scheduled first, "
                            "longest first")


def pytest_collection_modifyitems(config, items):
    """Heavy tests first, in their own order: with ``-n 2`` (pytest-xdist) the two workers then
    start on the long ones and finish together on the many short ones, instead of one worker
    ending the run alone on an example script that started last."""
    def seconds(item) -> float:
        mark = item.get_closest_marker("heavy")
        return 0.0 if mark is None else mark.kwargs.get("seconds", 10.0)

    items.sort(key=seconds, reverse=True)  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def _executor(request):
    wanted = "compiled" if request.node.get_closest_marker("compiled") else "interpreter"
    previous = compiler.set_executor(wanted)
    yield
    compiler.set_executor(previous)


@pytest.fixture
def split_calls(monkeypatch):
    """The outer-loop extents ``workers.split_leading`` was called with (0: run whole), in
    order, while the test runs (the calls still run)."""
    from samediff.kernels import workers
    calls: list[int] = []
    real = workers.split_leading

    def spy(kernel, n, *args):
        calls.append(n)
        real(kernel, n, *args)
    monkeypatch.setattr(workers, "split_leading", spy)
    return calls
