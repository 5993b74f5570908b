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


def fit_iteration_ms(sd, data: tuple, batch_size: int, repeats: int) -> float:
    """Median wall time of one ``sd.fit`` iteration in milliseconds: whole epochs over
    ``data`` (the first one, compiling, not counted), divided by their batch count."""
    n_batches = len(data[0]) // batch_size
    return median_ms(lambda: sd.fit(data, epochs=1, batch_size=batch_size, verbose=0),
                     repeats) / n_batches
