"""Per-call overhead of small eager nd4py ops, next to the same computation in plain numpy.

What is measured
----------------
Every case is an 8x8 float32 computation: tiny enough that numpy's own work is negligible, so
the numbers are the *Python dispatch overhead* of an eager op (``OpSurface.__add__`` ->
``NDArray._apply`` (``bind``) -> numpy and back into an ``NDArray``).

==============  ===============================  ==============================
case            nd4py                            numpy (same run, same data)
==============  ===============================  ==============================
add (operator)  ``A + B``                        ``a + b``
add (function)  ``nd.add(A, B)``                 ``np.add(a, b)``
chain (3 ops)   ``nd.nn.relu(A * B + C)``        ``np.maximum(a * b + c, 0)``
sum(1)          ``A.sum(1)``                     ``np.sum(a, axis=1)``
addi            ``A.addi(B)``                    ``a += b``
exp (method)    ``A.exp()``                      ``np.exp(a)``
matmul          ``A @ B``                        ``a @ b``
reshape         ``A.reshape(4, 16)``             ``a.reshape(4, 16)``
==============  ===============================  ==============================

Each statement is compiled into a ``timeit`` loop of ``--inner`` calls (default 2000), timed
with ``time.perf_counter_ns``; that gives one sample. ``--samples`` samples (default 30) are
taken per case, *interleaved* round-robin across all cases and both libraries so that clock,
thermal or noisy-neighbour drift hits nd4py and numpy alike. The table reports the median
µs per call (and the p25-p75 spread), the nd4py/numpy ratio of the medians, and for the chain
the cost per op (median / 3). As with ``timeit``, the garbage collector is off while a loop
runs; pass ``--gc`` to keep it on.

Goal
----
A small eager op should cost at most **3 µs** (numpy itself is about 1 µs or less on these
sizes). The ``goal`` column says whether each case's per-op median meets that bound.

W5: a compiled call
-------------------
A second table times one call of ``@nd.compile`` of ``relu(x @ w + b)`` with x (8, 8), w (8, 8)
and b (8,) float32 — a plan hit: the signature lookup, the plan's steps, the result wrapping —
next to the same computation in numpy, ``jax.jit`` (the call as made, which dispatches
asynchronously, and with ``block_until_ready()``) and torch eager, interleaved with the cases
above. Peers that are not installed are skipped (``/tmp/peervenv/bin/python`` has both). Goal:
nd4py's call at most **0.7x** ``jax.jit``'s (the ``vs jax`` column).

Usage::

    python benchmarks/bench_eager_overhead.py            # table
    python benchmarks/bench_eager_overhead.py --json     # table, then one JSON document
    python benchmarks/bench_eager_overhead.py --json-only --samples 50 --inner 5000
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import timeit
from pathlib import Path

import numpy as np

try:
    import nd4py as nd
except ImportError:  # run from a checkout without installing: add the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import nd4py as nd

GOAL_US_PER_OP = 3.0

# (key, label, ops per call, nd4py statement, numpy statement, in-place)
# Statements are written exactly as a user would (``nd.add``, ``nd.nn.relu``, ``np.sum``), so
# module/namespace attribute lookups are part of the cost on both sides. Operands and the two
# modules are bound to locals in the timeit setup, so both sides pay the same name lookups.
CASES = [
    ("add_operator", "add  A + B", 1, "A + B", "a + b", False),
    ("add_function", "add  nd.add(A, B)", 1, "nd.add(A, B)", "np.add(a, b)", False),
    ("chain_relu", "chain relu(A*B+C)", 3, "nd.nn.relu(A * B + C)", "np.maximum(a * b + c, 0)",
     False),
    ("sum_dim1", "sum  A.sum(1)", 1, "A.sum(1)", "np.sum(a, axis=1)", False),
    ("addi", "addi A.addi(B)", 1, "A.addi(B)", "a += b", True),
    ("exp_method", "exp  A.exp()", 1, "A.exp()", "np.exp(a)", False),
    ("matmul", "matmul A @ B", 1, "A @ B", "a @ b", False),
    ("reshape", "reshape A.reshape(4, 16)", 1, "A.reshape(4, 16)", "a.reshape(4, 16)", False),
]


W5_GOAL_VS_JAX = 0.7


def make_w5() -> tuple[list[tuple[str, str]], dict]:
    """(label, statement) rows of W5 and their shared namespace: nd4py first, then numpy and
    whichever of jax and torch are installed. Each row is checked against numpy once."""
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
    b = rng.standard_normal(8).astype(np.float32)

    @nd.compile
    def dense(x, w, b):
        return nd.nn.relu(x @ w + b)

    env = {"np": np, "x": x, "w": w, "b": b, "f": dense,
           "X": nd.create(x.copy()), "W": nd.create(w.copy()), "B": nd.create(b.copy())}
    rows = [("nd4py @nd.compile", "f(X, W, B)"), ("numpy", "np.maximum(x @ w + b, 0)")]
    try:
        import jax
        jf = jax.jit(lambda x, w, b: jax.nn.relu(x @ w + b))
        env.update(jf=jf, jx=jax.numpy.asarray(x), jw=jax.numpy.asarray(w),
                   jb=jax.numpy.asarray(b))
        rows += [("jax.jit", "jf(jx, jw, jb)"),
                 ("jax.jit blocked", "jf(jx, jw, jb).block_until_ready()")]
    except ImportError:
        pass
    try:
        import torch
        env.update(torch=torch, tx=torch.from_numpy(x), tw=torch.from_numpy(w),
                   tb=torch.from_numpy(b))
        rows.append(("torch eager", "torch.relu(tx @ tw + tb)"))
    except ImportError:
        pass
    want = np.maximum(x @ w + b, 0)
    for label, stmt in rows:
        got = np.asarray(eval(stmt, dict(env)))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=label)
    return rows, env


def make_env(inplace: bool) -> dict:
    """Fresh 8x8 float32 operands; nd4py arrays wrap *separate* buffers from the numpy ones so
    in-place cases never interfere. In-place cases add a tiny value so nothing overflows."""
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(3))
    if inplace:
        b = np.full((8, 8), 1e-6, np.float32)
    return {"np": np, "nd": nd, "a": a, "b": b, "c": c,
            "A": nd.create(a.copy()), "B": nd.create(b.copy()), "C": nd.create(c.copy())}


SETUP = "a = _g['a']; b = _g['b']; c = _g['c']; A = _g['A']; B = _g['B']; C = _g['C']\n" \
        "np = _g['np']; nd = _g['nd']"


def make_timer(stmt: str, env: dict, keep_gc: bool, names: str = SETUP) -> timeit.Timer:
    setup = ("import gc; gc.enable()\n" if keep_gc else "") + names
    return timeit.Timer(stmt, setup, timer=time.perf_counter_ns, globals={"_g": env})


def check_results(env: dict) -> None:
    """The two sides must compute the same thing (guards against benchmarking a broken op)."""
    a, b, c, A, B, C = (env[k] for k in "abcABC")
    pairs = [(A + B, a + b), (nd.add(A, B), np.add(a, b)),
             (nd.nn.relu(A * B + C), np.maximum(a * b + c, 0)), (A.sum(1), np.sum(a, axis=1)),
             (A.exp(), np.exp(a)), (A @ B, a @ b), (A.reshape(4, 16), a.reshape(4, 16))]
    for got, want in pairs:
        got = got.numpy()
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def run(samples: int, inner: int, keep_gc: bool) -> tuple[list[dict], list[dict]]:
    check_results(make_env(False))
    timers = []
    for key, label, n_ops, nd_stmt, np_stmt, inplace in CASES:
        env = make_env(inplace)
        timers.append((make_timer(nd_stmt, env, keep_gc), make_timer(np_stmt, env, keep_gc)))
    w5_rows, w5_env = make_w5()
    w5_names = "; ".join(f"{k} = _g[{k!r}]" for k in w5_env)  # locals, as above
    w5_timers = [make_timer(stmt, w5_env, keep_gc, w5_names) for _, stmt in w5_rows]
    for t_nd, t_np in timers:  # warm-up: caches (dtype probes, namespaces) and CPU clocks
        t_nd.timeit(inner // 4 or 1)
        t_np.timeit(inner // 4 or 1)
    for t in w5_timers:
        t.timeit(inner // 4 or 1)
    raw = [([], []) for _ in CASES]
    w5_raw: list[list[float]] = [[] for _ in w5_rows]
    for s in range(samples):
        for (t_nd, t_np), (nd_ns, np_ns) in zip(timers, raw):
            # alternate which side goes first so neither always follows the other
            if s % 2:
                np_ns.append(t_np.timeit(inner) / inner)
                nd_ns.append(t_nd.timeit(inner) / inner)
            else:
                nd_ns.append(t_nd.timeit(inner) / inner)
                np_ns.append(t_np.timeit(inner) / inner)
        order = list(zip(w5_timers, w5_raw))
        for t, ns in (order[::-1] if s % 2 else order):
            ns.append(t.timeit(inner) / inner)
    return _case_results(raw), _w5_results(w5_rows, w5_raw)


def _w5_results(rows: list[tuple[str, str]], raw: list[list[float]]) -> list[dict]:
    meds = [statistics.median(ns) for ns in raw]
    jax_med = next((m for (label, _), m in zip(rows, meds) if label == "jax.jit"), None)
    out = []
    for (label, stmt), ns, med in zip(rows, raw, meds):
        q = statistics.quantiles(ns, n=4)
        out.append({"row": label, "stmt": stmt, "us": med / 1e3,
                    "us_p25_p75": [q[0] / 1e3, q[2] / 1e3], "vs_nd4py": med / meds[0],
                    "vs_jax_jit": None if jax_med is None else med / jax_med})
    if jax_med is not None:
        out[0]["meets_goal"] = out[0]["vs_jax_jit"] <= W5_GOAL_VS_JAX
    return out


def _case_results(raw: list) -> list[dict]:
    results = []
    for (key, label, n_ops, nd_stmt, np_stmt, _), (nd_ns, np_ns) in zip(CASES, raw):
        nd_med, np_med = statistics.median(nd_ns), statistics.median(np_ns)
        nd_q, np_q = statistics.quantiles(nd_ns, n=4), statistics.quantiles(np_ns, n=4)
        results.append({
            "case": key, "label": label, "ops": n_ops,
            "nd4py_stmt": nd_stmt, "numpy_stmt": np_stmt,
            "nd4py_us": nd_med / 1e3, "numpy_us": np_med / 1e3,
            "nd4py_us_p25_p75": [nd_q[0] / 1e3, nd_q[2] / 1e3],
            "numpy_us_p25_p75": [np_q[0] / 1e3, np_q[2] / 1e3],
            "nd4py_us_per_op": nd_med / n_ops / 1e3, "numpy_us_per_op": np_med / n_ops / 1e3,
            "ratio": nd_med / np_med,
            "overhead_us_per_op": (nd_med - np_med) / n_ops / 1e3,
            "meets_goal": nd_med / n_ops / 1e3 <= GOAL_US_PER_OP,
        })
    return results


def format_table(results: list[dict], samples: int, inner: int) -> str:
    head = (f"{'case':<20} {'nd4py µs':>9} {'(p25-p75)':>13} {'numpy µs':>9} {'ratio':>6} "
            f"{'nd µs/op':>9} {'np µs/op':>9} {'+µs/op':>7}  goal≤{GOAL_US_PER_OP:g}µs")
    lines = [f"eager overhead, 8x8 float32 — median of {samples} samples x {inner} calls "
             f"(python {platform.python_version()}, numpy {np.__version__})", head,
             "-" * len(head)]
    for r in results:
        lo, hi = r["nd4py_us_p25_p75"]
        lines.append(
            f"{r['label']:<20} {r['nd4py_us']:>9.2f} {f'({lo:.2f}-{hi:.2f})':>13} "
            f"{r['numpy_us']:>9.2f} {r['ratio']:>5.1f}x {r['nd4py_us_per_op']:>9.2f} "
            f"{r['numpy_us_per_op']:>9.2f} {r['overhead_us_per_op']:>7.2f}  "
            f"{'ok' if r['meets_goal'] else 'MISS'}")
    return "\n".join(lines)


def format_w5(rows: list[dict]) -> str:
    head = f"{'W5 relu(x @ w + b), 8x8':<24} {'µs':>8} {'(p25-p75)':>15} {'vs nd4py':>9} {'vs jax':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lo, hi = r["us_p25_p75"]
        vs_jax = "" if r["vs_jax_jit"] is None else f"{r['vs_jax_jit']:.2f}x"
        lines.append(f"{r['row']:<24} {r['us']:>8.2f} {f'({lo:.2f}-{hi:.2f})':>15} "
                     f"{r['vs_nd4py']:>8.2f}x {vs_jax:>7}")
    if "meets_goal" in rows[0]:
        lines.append(f"goal: nd4py <= {W5_GOAL_VS_JAX:g}x jax.jit: "
                     f"{'ok' if rows[0]['meets_goal'] else 'MISS'}")
    else:
        lines.append("(jax not installed: no goal check; run with /tmp/peervenv/bin/python)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=30, help="samples per case (default 30)")
    p.add_argument("--inner", type=int, default=2000, help="calls per sample (default 2000)")
    p.add_argument("--gc", action="store_true", help="keep the garbage collector on while timing")
    p.add_argument("--json", action="store_true", help="also print the results as JSON")
    p.add_argument("--json-only", action="store_true", help="print only the JSON document")
    args = p.parse_args(argv)
    if args.samples < 2 or args.inner < 1:
        p.error("--samples must be >= 2 and --inner >= 1")
    results, w5 = run(args.samples, args.inner, args.gc)
    if not args.json_only:
        print(format_table(results, args.samples, args.inner))
        print()
        print(format_w5(w5))
    if args.json or args.json_only:
        doc = {"benchmark": "eager_overhead", "goal_us_per_op": GOAL_US_PER_OP,
               "samples": args.samples, "inner": args.inner, "gc": args.gc,
               "python": platform.python_version(), "numpy": np.__version__,
               "platform": platform.platform(), "results": results,
               "w5": {"goal_vs_jax_jit": W5_GOAL_VS_JAX, "rows": w5}}
        if not args.json_only:
            print()
        print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
