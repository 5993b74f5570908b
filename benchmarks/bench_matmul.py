"""Matmul routes: numpy's ``matmul``, nd4py's eager ``a @ b``, the route nd4py chose for the
shape class (``samediff/kernels/routes.py``) and each route forced, at the W3 shapes (the
784-256-10 MLP, batch 128: the forward product and the gradient products) and a few others.

Goal (issue 23): no shape slower than numpy within noise. The variants run interleaved, one
call each per round in rotating order, so the machine's drift hits them alike; the table gives
medians and the median of the per-round ratios to numpy. The chosen route is what this
machine's route cache says (``ND4PY_CACHE_DIR``), measured now if the class is new.

Batched rows (W9's attention products: stacks of matrices) run on the private BLAS from
``MIN_MNK`` multiply-adds per product (``kernels.matmul.batched``); ``--busy`` runs the table
with another process spinning on the last core (``bench_split_load._Busy``), where numpy's
multi-threaded OpenBLAS loses its second core.

Run: ``python benchmarks/bench_matmul.py [--rounds 200] [--json] [--busy] [--only W9]``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time

import numpy as np

import nd4py as nd
from samediff.kernels import compiling, routes
from samediff.kernels import matmul as M

# (name, a's shape, b's shape, transpose a's storage (a gradient's x^T), transpose b's)
SHAPES = [
    ("W3 forward x @ W1", (128, 784), (784, 256), False, False),
    ("W3 dW1 = x^T @ g", (784, 128), (128, 256), True, False),
    ("W3 dx = g @ W1^T", (128, 256), (256, 784), False, True),
    ("W3 W2: h @ W2", (128, 256), (256, 10), False, False),
    ("small 64^3", (64, 64), (64, 64), False, False),
    ("256 x 512 x 64", (256, 512), (512, 64), False, False),
    ("512^3", (512, 512), (512, 512), False, False),
    ("1024^3", (1024, 1024), (1024, 1024), False, False),
    # batched (W9's attention block, benchmarks/workloads.py): stacks on the private BLAS
    ("W9 x @ Wq", (8, 128, 256), (256, 256), False, False),
    ("W9 dWq = x^T @ g", (8, 256, 128), (8, 128, 256), True, False),
    ("W9 q @ k^T", (8, 4, 128, 64), (8, 4, 64, 128), False, True),
    ("W9 p @ v", (8, 4, 128, 128), (8, 4, 128, 64), False, False),
]


def _operand(rng, shape, transposed):
    if transposed:  # stored the other way round, as autodiff hands it over (a view)
        stored = shape[:-2] + shape[-2:][::-1]
        return np.swapaxes(rng.standard_normal(stored).astype(np.float32), -1, -2)
    return rng.standard_normal(shape).astype(np.float32)


def bench(a, b, rounds: int) -> dict:
    xa, xb = nd.create(a), nd.create(b)

    def forced(route):
        def run():
            with routes.force("matmul", route):
                return M.matmul(a, b)
        return run
    variants = {"numpy": lambda: np.matmul(a, b), "nd4py eager": lambda: xa @ xb,
                "chosen": lambda: M.matmul(a, b), "numpy route": forced("numpy"),
                "private route": forced("private")}
    for fn in variants.values():  # warm: compile, measure the class, first touch
        fn()
    compiling.wait_ready(("matmul", a.dtype), 120)
    times: dict = {k: [] for k in variants}
    names = list(variants)
    budget = time.perf_counter() + 20.0
    for r in range(rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            variants[k]()
            times[k].append(time.perf_counter() - t0)
        if time.perf_counter() > budget and r >= 10:
            break
    out = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    out.update({f"{k} / numpy": statistics.median(t / n for t, n in zip(v, times["numpy"]))
                for k, v in times.items() if k != "numpy"})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--busy", action="store_true",
                        help="with a process spinning on the last core (as bench_split_load)")
    parser.add_argument("--only", default="", help="rows whose name contains this")
    args = parser.parse_args()
    busy = contextlib.nullcontext()
    if args.busy:
        sys.path.insert(0, os.path.dirname(__file__))
        from bench_split_load import _Busy
        busy = _Busy()
    with busy:
        _table(args)


def _table(args) -> None:
    print(f"load average {os.getloadavg()[0]:.1f}{' (busy core)' if args.busy else ''}")
    rng = np.random.default_rng(0)
    results = {}
    print(f"{'product':22} {'m x k x n':>16} {'numpy':>8} {'eager':>8} {'chosen':>8} "
          f"{'private':>8}  eager/np chosen/np private/np  route (why)")
    for name, sa, sb, ta, tb in SHAPES:
        if args.only not in name:
            continue
        a, b = _operand(rng, sa, ta), _operand(rng, sb, tb)
        r = results[name] = bench(a, b, args.rounds)
        m, k, n = sa[-2], sa[-1], sb[-1]
        why = M.describe_route(sa, sb, np.float32)
        print(f"{name:22} {f'{m}x{k}x{n}':>16} {r['numpy']:8.3f} {r['nd4py eager']:8.3f} "
              f"{r['chosen']:8.3f} {r['private route']:8.3f}  {r['nd4py eager / numpy']:8.2f} "
              f"{r['chosen / numpy']:9.2f} {r['private route / numpy']:10.2f}  {why}")
        r["route"] = why
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
