"""nd4py in one page: eager arrays, a SameDiff graph with gradients, tracing and compilation.

Run: ``python examples/quickstart.py``
"""
from __future__ import annotations

import time

import numpy as np

import nd4py as nd
from samediff.gradcheck import check_gradients


def eager() -> None:
    print("== eager arrays (ND4J-style) ==")
    x = nd.create([[1.0, -2.0], [3.0, 4.0]])
    w = nd.random.normal(2, 3, dtype=nd.FLOAT)
    y = nd.nn.relu(x.mmul(w).add(1.0))
    print("relu(x @ w + 1) shape", y.shape, "dtype", y.dtype)
    x.addi(10)  # in place, like ND4J's addi
    print("x after addi(10):\n", x)
    print("sum over dim 1:", x.sum(1), " argmax:", x.argmax().item())


def samediff_mlp() -> None:
    print("\n== SameDiff: define, run, differentiate ==")
    nd.random.set_seed(0)
    sd = nd.SameDiff.create()
    features = sd.placeholder("input", nd.FLOAT, -1, 4)
    labels = sd.placeholder("labels", nd.FLOAT, -1, 3)
    with sd.name_scope("layer1"):
        w1 = sd.var("w", "xavier", nd.FLOAT, 4, 8)
        b1 = sd.var("b", nd.FLOAT, 8)
        hidden = sd.nn.relu(features.mmul(w1).add(b1), name="hidden")
    w2 = sd.var("w2", "xavier", nd.FLOAT, 8, 3)
    logits = hidden.mmul(w2)
    sd.nn.softmax("probs", logits)
    loss = (labels * sd.nn.log_softmax(logits)).sum(1).mean().neg()
    loss.rename("loss").mark_as_loss()
    print(sd.summary())
    batch = {"input": np.random.default_rng(0).normal(size=(5, 4)),
             "labels": np.eye(3)[[0, 1, 2, 1, 0]]}
    print("probs rows sum to 1:", sd.output(batch, "probs")["probs"].sum(1))
    grads = sd.calculate_gradients(batch, "layer1/w", "w2")
    print("gradient shapes:", {k: v.shape for k, v in grads.items()})
    print(check_gradients(sd, batch, max_per_variable=6))


def tracing() -> None:
    print("\n== graph_scope and @nd.compile ==")
    a, b = nd.random.uniform(256, 256), nd.random.uniform(256, 256)
    with nd.graph_scope() as scope:
        out = nd.nn.gelu(nd.matmul(a, b) * 0.01)
    print("traced result:", out.shape, "| plan:", scope.plan.explain().splitlines()[0])

    @nd.compile
    def dense(x, w, bias):
        return nd.nn.relu(x @ w + bias)

    x, w, bias = nd.ones(8, 8), nd.ones(8, 8), nd.zeros(8)
    dense(x, w, bias)  # first call traces and plans
    t0 = time.perf_counter()
    for _ in range(1000):
        dense(x, w, bias)
    print(f"compiled call: {(time.perf_counter() - t0) * 1e3:.2f} us per call (replayed plan)")
    print(dense.explain().splitlines()[0], "| cache:", nd.cache_stats())


if __name__ == "__main__":
    eager()
    samediff_mlp()
    tracing()
