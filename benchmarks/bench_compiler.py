"""Fused-compiler workloads, with ratios against numpy measured in the same run.

* **W1** ``gelu(x * a + b)`` on 4M float32 (tanh-form gelu): compiled ``@nd.compile`` plan vs
  numpy eager, vs a plain numpy copy of ``x`` (memory-bandwidth floor). Goals: >= 15x numpy and
  within 1.5x of the copy. Also the peak extra memory of one compiled call (goal: the output
  only, i.e. <= input + output + 5%).
* **W2** ``gelu(layer_norm(x))`` on 4096x1024 float32. Goal: >= 8x numpy.
* **compile**: cold (empty kernel cache) and warm (new process, cache kept) time to build and
  first-run an MLP forward+backward plan. Goals: cold <= 3 s, warm <= 0.5 s.
* **in place**: peak memory above the array of ``x.addi(1)`` on a 200 MB float32 array — eager,
  in a ``graph_scope`` plan, and ``w.subi(g)`` on an argument of ``@nd.compile`` — vs numpy's
  ``np.add(x, 1, out=x)``. Goal: eager and graph_scope ~0 (< 5 % of the array) like numpy.

Run: ``python benchmarks/bench_compiler.py [--json] [--quick] [--inplace-only]``. Medians of
repeated runs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tracemalloc

import numpy as np
from timing import median_ms  # benchmarks/timing.py (the script's own directory)

import nd4py as nd

SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))


def numpy_gelu(y: np.ndarray) -> np.ndarray:
    return 0.5 * y * (1.0 + np.tanh(SQRT_2_OVER_PI * (y + 0.044715 * y * y * y)))


def w1(repeats: int) -> dict:
    n = 4 * 1024 * 1024
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    a, b = 0.7, 0.1

    @nd.compile
    def fused(x, a, b):
        return nd.nn.gelu(x * a + b)

    xn = nd.create(x)
    fused(xn, a, b)
    got = fused(xn, a, b).numpy()
    want = numpy_gelu(x * np.float32(a) + np.float32(b))
    err = float(np.max(np.abs(got - want)))
    compiled = median_ms(lambda: fused(xn, a, b), repeats)
    eager = median_ms(lambda: numpy_gelu(x * np.float32(a) + np.float32(b)), repeats)
    copy = median_ms(lambda: x.copy(), repeats)
    tracemalloc.start()
    fused(xn, a, b)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"compiled_ms": compiled, "numpy_ms": eager, "copy_ms": copy,
            "speedup_vs_numpy": eager / compiled, "ratio_to_copy": compiled / copy,
            "peak_extra_mb": peak / 2**20, "output_mb": x.nbytes / 2**20, "max_abs_err": err,
            "explain": fused.explain().splitlines()[-3:]}


def w2(repeats: int) -> dict:
    x = np.random.default_rng(1).standard_normal((4096, 1024)).astype(np.float32)
    gain, bias = np.ones(1024, np.float32), np.zeros(1024, np.float32)

    @nd.compile
    def fused(x, g, b):
        return nd.nn.gelu(nd.nn.layer_norm(x, g, b))

    def numpy_w2():
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return numpy_gelu((x - mu) / np.sqrt(var + 1e-5) * gain + bias)

    xs, gs, bs = nd.create(x), nd.create(gain), nd.create(bias)
    err = float(np.max(np.abs(fused(xs, gs, bs).numpy() - numpy_w2())))
    compiled = median_ms(lambda: fused(xs, gs, bs), repeats)
    eager = median_ms(numpy_w2, repeats)
    return {"compiled_ms": compiled, "numpy_ms": eager, "speedup_vs_numpy": eager / compiled,
            "max_abs_err": err, "explain": fused.explain().splitlines()[-4:]}


_MLP = r"""
import time, numpy as np
t0 = time.perf_counter()
import nd4py as nd
t_import = time.perf_counter() - t0
sd = nd.SameDiff.create()
x = sd.placeholder("x", nd.FLOAT, -1, 784); y = sd.placeholder("y", nd.FLOAT, -1, 10)
w1 = sd.var("w1", "xavier", nd.FLOAT, 784, 256); b1 = sd.var("b1", nd.FLOAT, 256)
w2 = sd.var("w2", "xavier", nd.FLOAT, 256, 10); b2 = sd.var("b2", nd.FLOAT, 10)
logits = sd.nn.relu(x.mmul(w1).add(b1)).mmul(w2).add(b2)
(y * sd.nn.log_softmax(logits)).sum(1).mean().neg().mark_as_loss()
feeds = {"x": np.ones((128, 784), np.float32), "y": np.eye(10, dtype=np.float32)[np.arange(128) % 10]}
t1 = time.perf_counter()
sd.calculate_gradients(feeds, "w1", "b1", "w2", "b2")
print(t_import, time.perf_counter() - t1)
"""


def compile_times() -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "ND4PY_CACHE_DIR": cache, "NUMBA_CACHE_DIR": cache}
        runs = []
        for _ in range(2):  # cold (empty cache), then warm (new process, cache kept)
            out = subprocess.run([sys.executable, "-c", _MLP], env=env, capture_output=True,
                                 text=True, check=True).stdout.split()
            runs.append([float(v) for v in out])
    (imp_cold, cold), (imp_warm, warm) = runs
    return {"cold_s": cold, "warm_s": warm, "import_s": imp_warm}


def _peak_mb(fn) -> float:
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak / 2**20


def inplace(mb: int = 200) -> dict:
    x = nd.create(np.ones(mb * 2**20 // 4, np.float32))
    g = nd.create(np.full(x.shape, 0.5, np.float32))

    def scope():
        with nd.graph_scope():
            x.addi(1.0)

    @nd.compile
    def step(w, g):
        w.subi(g)

    for warm in (scope, lambda: step(x, g)):
        warm()  # plans built, kernels compiled
    buf = x.numpy()
    return {"array_mb": x.nbytes / 2**20,
            "numpy_out_mb": _peak_mb(lambda: np.add(buf, 1.0, out=buf)),
            "eager_addi_mb": _peak_mb(lambda: x.addi(1.0)),
            "graph_scope_addi_mb": _peak_mb(scope),
            "compiled_argument_subi_mb": _peak_mb(lambda: step(x, g))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--inplace-only", action="store_true", help="only the in-place row")
    args = parser.parse_args()
    ri = inplace()
    print(f"in place on {ri['array_mb']:.0f} MB float32, peak above the array: numpy out= "
          f"{ri['numpy_out_mb']:.2f} MB | x.addi(1) eager {ri['eager_addi_mb']:.2f} MB, in a "
          f"graph_scope {ri['graph_scope_addi_mb']:.2f} MB (goal < 5 %) | w.subi(g) on a compiled "
          f"function's argument {ri['compiled_argument_subi_mb']:.0f} MB (its output buffer)")
    if args.inplace_only:
        return
    reps = 5 if args.quick else 15
    r1, r2, rc = w1(reps), w2(reps), compile_times()
    print(f"W1 gelu(x*a+b), 4M float32: compiled {r1['compiled_ms']:.2f} ms | numpy "
          f"{r1['numpy_ms']:.2f} ms ({r1['speedup_vs_numpy']:.1f}x, goal >= 15x) | copy "
          f"{r1['copy_ms']:.2f} ms ({r1['ratio_to_copy']:.2f}x of copy, goal <= 1.5x) | "
          f"peak extra {r1['peak_extra_mb']:.1f} MB for a {r1['output_mb']:.1f} MB output | "
          f"max |err| {r1['max_abs_err']:.1e}")
    print(f"W2 gelu(layer_norm(x)), 4096x1024 float32: compiled {r2['compiled_ms']:.2f} ms | "
          f"numpy {r2['numpy_ms']:.2f} ms ({r2['speedup_vs_numpy']:.1f}x, goal >= 8x) | "
          f"max |err| {r2['max_abs_err']:.1e}")
    print(f"MLP forward+backward plan: cold {rc['cold_s']:.2f} s (goal <= 3 s), warm new process "
          f"{rc['warm_s']:.2f} s (goal <= 0.5 s); `import nd4py` {rc['import_s']:.2f} s")
    print("W1 plan:", *r1["explain"], sep="\n  ")
    print("W2 plan:", *r2["explain"], sep="\n  ")
    if args.json:
        print(json.dumps({"w1": r1, "w2": r2, "compile": rc, "inplace": ri}, default=str))


if __name__ == "__main__":
    main()
