"""Shared timing helpers of the benchmark scripts: medians of repeated runs after a warm-up."""
from __future__ import annotations

import statistics
import time
from typing import Callable


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``fn()`` in milliseconds (one warm-up call first)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)
