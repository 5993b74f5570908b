"""Shared fixtures and helpers of the tracing test files."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff.array import CURRENT_TRACE
from tracing import PLAN_CACHE

A = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
B = np.array([[0.5, -1.0], [2.0, 0.0], [1.0, 3.0]], dtype=np.float32)


@pytest.fixture(autouse=True)
def isolated_plan_cache():
    """Every test starts from an empty plan cache, so cache counters are exact."""
    size = PLAN_CACHE.maxsize
    nd.clear_cache()
    yield
    nd.set_cache_size(size)
    nd.clear_cache()
    assert CURRENT_TRACE.get() is None, "a test left a trace active"


def stats() -> dict:
    return nd.cache_stats()


def arr(values, dtype=np.float32) -> nd.NDArray:
    return nd.create(np.array(values, dtype=dtype))
