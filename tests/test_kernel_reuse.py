"""Kernels of a repeated block are compiled once and reused (as regional compilation does): a
fused group's kernel is keyed by its expression structure (``codegen.render`` names values by
their place in the kernel, never in the graph), so the same block at another depth of a model
asks for the same kernel module."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff.compiler import codegen
from samediff.compiler.plan import KernelStep

pytestmark = pytest.mark.compiled


def _stack():
    @nd.compile
    def stack(x, ws, bs):
        h = x
        for w, b in zip(ws, bs):  # a residual tanh block: a matmul, then one fused group
            h = nd.tanh(h @ w + b) * 0.5 + h
        return h
    return stack


def _inputs(blocks: int):
    rng = np.random.default_rng(0)
    return (nd.create(rng.random((4, 8), dtype=np.float32)),
            [nd.create(rng.random((8, 8), dtype=np.float32)) for _ in range(blocks)],
            [nd.create(rng.random(8, dtype=np.float32)) for _ in range(blocks)])


def test_the_blocks_of_a_stack_share_one_kernel():
    one = _stack()
    x, ws, bs = _inputs(1)
    one(x, ws, bs)  # the block's kernel is loaded (compiled once per machine) here
    before = codegen.kernel_stats()
    three = _stack()
    x, ws, bs = _inputs(3)
    got = three(x, ws, bs).numpy()
    after = codegen.kernel_stats()
    kernels = [s for s in three.last_plan.steps if isinstance(s, KernelStep)]
    assert len(kernels) == 3 and all(k.kernels is not None for k in kernels)
    assert len({k.source() for k in kernels}) == 1  # same source: one key for the three
    assert len({id(k.kernels) for k in kernels}) == 1  # ... one loaded module
    assert after["kernel_modules"] == before["kernel_modules"]  # nothing new compiled/loaded
    assert after["kernel_reuses"] - before["kernel_reuses"] == 3
    h = x.numpy()
    for w, b in zip(ws, bs):
        h = np.tanh(h @ w.numpy() + b.numpy()) * np.float32(0.5) + h
    np.testing.assert_allclose(got, h, rtol=1e-5, atol=1e-6)


def test_cache_stats_counts_kernels_loaded_and_reused():
    """``nd.cache_stats()`` reports the kernel layer's counters (``codegen.kernel_stats``),
    and the compiled function draws its plan: a cluster per fused kernel."""
    before = nd.cache_stats()
    assert before["kernel_modules"] == codegen.kernel_stats()["kernel_modules"]
    stack = _stack()
    x, ws, bs = _inputs(2)
    stack(x, ws, bs)
    after = nd.cache_stats()
    assert after["kernel_reuses"] >= before["kernel_reuses"] + 1  # the second block's kernel
    assert after["kernel_modules"] + after["kernel_reuses"] > \
        before["kernel_modules"] + before["kernel_reuses"] + 1
    assert {"fast_loads", "fast_load_fallbacks"} <= set(after)
    dot = stack.to_dot()
    assert dot.startswith("digraph") and dot.count("subgraph \"cluster_") >= 2
