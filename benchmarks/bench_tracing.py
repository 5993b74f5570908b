"""Tracing overheads, measured against numpy in the same run.

* **scope re-entry**: a ``with nd.graph_scope():`` block of 10 small ops (8x8 float32), entered
  again and again so every exit is a plan-cache hit. Reported per recorded op, in total and as
  overhead over running the same 10 numpy calls directly. Goal: overhead <= 5 us per op.
* **compiled call**: ``@nd.compile`` of ``relu(x @ w + b)`` on 8x8 inputs, replayed. Goal:
  <= 10 us per call (jax.jit is about 10 us on this machine).

Run: ``python benchmarks/bench_tracing.py [--json]``. Medians of repeated samples.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import nd4py as nd

OPS_IN_SCOPE = 10


def median_us(fn, inner: int, samples: int = 21) -> float:
    fn(inner)  # warm up (first trace and compile happen here)
    times = []
    for _ in range(samples):
        t0 = time.perf_counter_ns()
        fn(inner)
        times.append((time.perf_counter_ns() - t0) / inner / 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="also print results as JSON")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    xn, wn = rng.random((8, 8), np.float32), rng.random((8, 8), np.float32)
    bn = rng.random(8, dtype=np.float32)
    x, w, b = nd.create(xn), nd.create(wn), nd.create(bn)

    def scope_loop(n: int) -> None:
        for _ in range(n):
            with nd.graph_scope():
                y = x * 2.0
                y = y + b
                y = nd.nn.relu(y)
                y = y - 1.0
                y = y * y
                y = y.sum(1)
                y = y + 1.0
                y = nd.exp(y)
                y = y / 3.0
                y = y.neg()

    def numpy_loop(n: int) -> None:
        for _ in range(n):
            y = xn * 2.0
            y = y + bn
            y = np.maximum(y, 0)
            y = y - 1.0
            y = y * y
            y = y.sum(1)
            y = y + 1.0
            y = np.exp(y)
            y = y / 3.0
            y = np.negative(y)

    @nd.compile
    def dense(x, w, b):
        return nd.nn.relu(x @ w + b)

    def compiled_loop(n: int) -> None:
        for _ in range(n):
            dense(x, w, b)

    def numpy_dense(n: int) -> None:
        for _ in range(n):
            np.maximum(xn @ wn + bn, 0)

    scope = median_us(scope_loop, 500) / OPS_IN_SCOPE
    numpy_op = median_us(numpy_loop, 2000) / OPS_IN_SCOPE
    compiled = median_us(compiled_loop, 5000)
    numpy_call = median_us(numpy_dense, 5000)
    rows = [
        ("graph_scope re-entry, per recorded op", scope, numpy_op, "overhead <= 5 us/op"),
        ("  overhead over numpy, per op", scope - numpy_op, None, ""),
        ("@nd.compile relu(x @ w + b), per call", compiled, numpy_call, "<= 10 us/call"),
    ]
    print(f"{'case':42} {'nd4py us':>9} {'numpy us':>9} {'ratio':>7}  goal")
    for name, ours, ref, goal in rows:
        ref_s = f"{ref:9.2f}" if ref is not None else f"{'':9}"
        ratio = f"{ours / ref:7.2f}" if ref else f"{'':7}"
        print(f"{name:42} {ours:9.2f} {ref_s} {ratio}  {goal}")
    print(f"plan cache: {nd.cache_stats()}")
    if args.json:
        print(json.dumps({"scope_us_per_op": scope, "numpy_us_per_op": numpy_op,
                          "scope_overhead_us_per_op": scope - numpy_op,
                          "compiled_us_per_call": compiled, "numpy_us_per_call": numpy_call}))


if __name__ == "__main__":
    main()
