"""One computation, three ways: eager ``nd.*`` calls, ``with nd.graph_scope():`` and ``@nd.compile``.

The computation is the forward pass of a 2-layer MLP on a [1024, 512] float32 batch:
``softmax(layer_norm(gelu(x @ w1 + b1)) @ w2 + b2)``. The function body is written once and
run eagerly (every op executes as it is called), traced inside a graph scope (recorded, planned
once, then replayed from the plan cache), and compiled (traced once per input signature, later
calls skip the Python function entirely). The three results must agree; the script prints the
median time of each after a warm-up, then what the compiler made of the function.

Run: ``python examples/eager_scope_compile.py`` (or ``--quick`` for fewer repeats).
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import numpy as np

import nd4py as nd

BATCH, FEATURES, HIDDEN, CLASSES = 1024, 512, 512, 10


def mlp(x, w1, b1, gain, bias, w2, b2):
    """The forward pass, written with ordinary nd4py calls; the mode is chosen by the caller."""
    hidden = nd.nn.gelu(x @ w1 + b1)
    hidden = nd.nn.layer_norm(hidden, gain, bias)
    return nd.nn.softmax(hidden @ w2 + b2)


def eager(*args):
    return mlp(*args)


def in_scope(*args):
    with nd.graph_scope():
        out = mlp(*args)
    return out  # a real array once the block has ended


compiled = nd.compile(mlp)


def median_ms(fn: Callable, args: tuple, repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):  # first calls trace, plan and (for the compiler) build kernels
        fn(*args)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test)")
    repeats = 3 if parser.parse_args().quick else 20

    nd.random.set_seed(0)
    params = (nd.random.normal(FEATURES, HIDDEN) * (1 / FEATURES ** 0.5), nd.zeros(HIDDEN),
              nd.ones(HIDDEN), nd.zeros(HIDDEN),
              nd.random.normal(HIDDEN, CLASSES) * (1 / HIDDEN ** 0.5), nd.zeros(CLASSES))
    x = nd.random.uniform(BATCH, FEATURES)
    args = (x, *params)

    results = {name: np.asarray(fn(*args)) for name, fn in
               (("eager", eager), ("graph_scope", in_scope), ("@nd.compile", compiled))}
    reference = results["eager"]
    assert reference.shape == (BATCH, CLASSES) and reference.dtype == np.float32, reference.dtype
    for name, value in results.items():
        assert value.dtype == np.float32, (name, value.dtype)
        assert np.allclose(value, reference, rtol=1e-4, atol=1e-6), \
            f"{name} differs from eager by {np.abs(value - reference).max():.3g}"
    print(f"MLP forward on a [{BATCH}, {FEATURES}] float32 batch: the three results agree "
          f"(max |difference| {max(np.abs(v - reference).max() for v in results.values()):.2g}), "
          f"rows sum to 1 (max error {np.abs(reference.sum(1) - 1).max():.2g})")

    print(f"\nmedian of {repeats} calls after warm-up:")
    for name, fn in (("eager", eager), ("graph_scope", in_scope), ("@nd.compile", compiled)):
        print(f"  {name:<12} {median_ms(fn, args, repeats):8.2f} ms")

    print("\n== compiled.explain() ==")
    print(compiled.explain())


if __name__ == "__main__":
    main()
