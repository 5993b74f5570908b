"""The compiled attention forward and backward (``samediff/kernels/attention.py``) against a
float64 softmax and its chain rule written here, and the routing rules: which calls take
them, which stay on numpy.

The kernel runs blocks of queries, a causal block reading only the keys its queries see, the
(batch, head) pairs split over two threads; every shape below crosses a block edge somewhere
(lengths 1, 127-129, 300), and the causal cases cover L > S and L < S (PyTorch's top-left
alignment). Heads made by ``permute`` are read through their strides, not copied.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import nd4py as nd
from samediff.kernels import attention as kernel
from samediff.kernels import blas, workers
from samediff.ops import attention

pytestmark = pytest.mark.skipif(not blas.available(), reason=blas.why_not() or "no BLAS")
RNG = np.random.default_rng(11)


def reference(q, k, v, causal, scale=None):
    """softmax(q k^T scale, keys after each query hidden) v in float64, whole."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * s
    if causal:
        seen = np.arange(k.shape[-2])[None, :] <= np.arange(q.shape[-2])[:, None]
        scores = np.where(seen, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)) @ v


def f32(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def run(q, k, v, causal, scale=None):
    """The op's eager call, asserting that it took the kernel."""
    assert attention._kernel_fits(q, k, v), "expected the compiled route"
    return nd.nn.scaled_dot_product_attention(nd.create(q), nd.create(k), nd.create(v),
                                              is_causal=causal, scale=scale).numpy()


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("batch, length, keys, e, ev", [
    ((2, 3), 300, 300, 32, 32),
    ((4,), 129, 129, 16, 24),
    ((1, 2), 300, 170, 16, 16),
    ((1, 2), 170, 300, 16, 8),
    ((40,), 128, 1, 16, 8),
    ((2, 1, 2), 127, 64, 64, 64),
])
def test_kernel_matches_the_definition(batch, length, keys, e, ev, causal):
    q, k, v = f32(*batch, length, e), f32(*batch, keys, e), f32(*batch, keys, ev)
    got = run(q, k, v, causal)
    assert got.shape == (*batch, length, ev) and got.dtype == np.float32
    np.testing.assert_allclose(got, reference(q, k, v, causal), rtol=2e-5, atol=2e-6)


def test_heads_as_strides_and_an_explicit_scale():
    """q/k/v as the [batch, heads, seq, dh] views of a [batch, seq, heads, dh] projection (the
    transformer block's heads) and a non-contiguous v: read in place, same answer."""
    x = f32(3, 200, 4, 32)
    q = x.transpose(0, 2, 1, 3)
    k = f32(3, 200, 4, 32).transpose(0, 2, 1, 3)
    v = f32(3, 4, 200, 64)[..., ::2]  # (features not unit-stride: copied by the route)
    got = run(q, k, v, True, scale=0.3)
    np.testing.assert_allclose(got, reference(q, k, v, True, 0.3), rtol=2e-5, atol=2e-6)


def test_large_scores_do_not_overflow():
    """Scores in the thousands: each row is shifted by its max before the exp. (A float32
    score of ~3000 carries ~2e-4 of rounding, so the exp of a difference of two does too:
    the tolerance is that, not the kernel's.)"""
    q, k, v = f32(2, 130, 16) * 40, f32(2, 130, 16) * 40, f32(2, 130, 16)
    got = run(q, k, v, False)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, reference(q, k, v, False), rtol=2e-3, atol=2e-3)


def test_two_halves_compute_what_one_thread_does():
    """The pairs split over two threads give the same bits as one thread doing them all."""
    q, k, v = (f32(1, 6, 256, 32) for _ in range(3))
    split = kernel.attend(q, k, v, 0.2, True)
    whole = np.empty((1, 256, 6, 32), np.float32)  # (forward writes [batch, length, heads, e])
    scale = np.float32(0.2 * kernel.LOG2_E)  # (forward's scale is in base 2)
    kernel.forward[np.dtype(np.float32)](q, k, v, scale, True, 0, 6, kernel.block_for(256), whole,
                                         workers.NO_GO)
    assert len(workers.halves(6, 10 ** 9, kernel.SPLIT_MIN_WORK)) == 2
    np.testing.assert_array_equal(split, whole.transpose(0, 2, 1, 3))


def test_heads_merge_without_a_copy():
    """The output is written as [batch, length, heads, e]: merging the heads (a transformer's
    permute and reshape) is a view of it."""
    q, k, v = (f32(2, 4, 64, 16) for _ in range(3))
    out = kernel.attend(q, k, v, 0.25, False)
    merged = out.transpose(0, 2, 1, 3).reshape(2, 64, 64)
    assert out.shape == (2, 4, 64, 16) and np.shares_memory(merged, out)


@pytest.mark.parametrize("why, make", [
    ("float64", lambda: [RNG.normal(size=(2, 200, 16)) for _ in range(3)]),
    ("broadcast batch", lambda: [f32(2, 200, 16), f32(1, 200, 16), f32(1, 200, 16)]),
    ("tiny", lambda: [f32(4, 8), f32(4, 8), f32(4, 8)]),
    ("no keys", lambda: [f32(2, 200, 16), f32(2, 0, 16), f32(2, 0, 16)]),
])
def test_what_stays_on_numpy(why, make):
    q, k, v = make()
    assert not attention._kernel_fits(q, k, v), why


def test_a_mask_stays_on_numpy_and_agrees():
    """A mask takes the numpy route; with all-True it answers what the kernel does."""
    q, k, v = (f32(2, 150, 16) for _ in range(3))
    everything = nd.create(np.ones((150, 150), bool))
    masked = nd.nn.scaled_dot_product_attention(nd.create(q), nd.create(k), nd.create(v),
                                                everything).numpy()
    np.testing.assert_allclose(masked, run(q, k, v, False), rtol=2e-5, atol=2e-6)


def reference_grads(q, k, v, g, causal, scale=None):
    """(dq, dk, dv) of sum(out * g) in float64, whole: dV = P^T g, dS = P (dP - rowsum(P dP))."""
    q, k, v, g = (np.asarray(a, np.float64) for a in (q, k, v, g))
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * s
    if causal:
        seen = np.arange(k.shape[-2])[None, :] <= np.arange(q.shape[-2])[:, None]
        scores = np.where(seen, scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True)) * s
    return ds @ k, np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ g


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("batch, length, keys, e, ev", [
    ((2, 3), 300, 300, 32, 32),
    ((1, 2), 300, 170, 16, 24),
    ((4,), 129, 200, 16, 8),
])
def test_backward_kernel_matches_the_chain_rule(batch, length, keys, e, ev, causal):
    q, k, v = f32(*batch, length, e), f32(*batch, keys, e), f32(*batch, keys, ev)
    out = run(q, k, v, causal)
    g = f32(*out.shape)
    assert attention._kernel_fits(q, k, v, out, g), "expected the compiled route"
    got = attention._sdpa_backward(q, k, v, out, g, is_causal=causal, scale=None)
    for d, want in zip(got, reference_grads(q, k, v, g, causal)):
        assert d.dtype == np.float32 and d.shape == want.shape
        np.testing.assert_allclose(d, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_float32_training_differentiates_through_the_blocked_op():
    """A float32 graph's gradient is the one blocked op (no L x S product in the graph) and
    agrees with the chain rule; float64 keeps the table ops (differentiable again)."""
    from samediff import SameDiff
    for dtype in (np.float32, np.float64):
        sd = SameDiff.create()
        q, k, v = (sd.var(n, RNG.normal(size=(2, 2, 150, 16)).astype(dtype)) for n in "qkv")
        out = sd.nn.scaled_dot_product_attention(q, k, v, is_causal=True)
        (out * out).sum().mark_as_loss()
        grads = sd.calculate_gradients({}, "q", "k", "v")
        ops = {n.op.name for n in sd.graph.nodes}
        assert ("scaled_dot_product_attention_grad" in ops) == (dtype == np.float32), ops
        values = [sd.get_variable(n).get_arr().numpy() for n in "qkv"]
        want = reference_grads(*values, 2 * reference(*values, True), True)
        for n, w in zip("qkv", want):
            np.testing.assert_allclose(grads[n].numpy(), w, rtol=2e-4,
                                       atol=2e-4 * np.abs(w).max())


def test_backward_never_holds_a_full_score_matrix():
    """float64 (the numpy route), seq 1,024, 2 heads: one head's scores would be 8 MiB; the
    blocked gradient holds a block's probabilities and their gradient (2 x 2 MiB for both
    heads), numpy's copy of the transposed one for a product, and its outputs (0.75 MiB):
    measured 6.5 MiB."""
    import tracemalloc
    q, k, v = (RNG.normal(size=(2, 1024, 16)) for _ in range(3))
    out, g = attention._sdpa(q, k, v, is_causal=True, scale=None), RNG.normal(size=(2, 1024, 16))
    tracemalloc.start()
    try:
        grads = attention._sdpa_backward(q, k, v, out, g, is_causal=True, scale=None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [d.shape for d in grads] == [(2, 1024, 16)] * 3
    assert peak < 7 << 20, f"peak {peak / 2 ** 20:.1f} MiB"


@pytest.mark.parametrize("op, shapes", [
    ("dot_product_attention", [(2, 16, 150), (2, 16, 150), (2, 8, 150)]),
    ("multi_head_dot_product_attention",
     [(2, 12, 140), (2, 12, 140), (2, 12, 140), (4, 16, 12), (4, 16, 12), (4, 8, 12), (32, 6)]),
])
def test_nd4j_attention_forms_differentiate_through_the_blocked_op_in_float32(op, shapes):
    """ND4J's feature-major forms hand their output to the blocked gradient (float32, no
    mask): their float32 gradients equal their float64 ones (the table ops') to float32."""
    from samediff import SameDiff
    values = [RNG.normal(size=s) * 0.5 for s in shapes]
    grads = {}
    for dtype in (np.float32, np.float64):
        sd = SameDiff.create()
        xs = [sd.var(f"x{i}", v.astype(dtype)) for i, v in enumerate(values)]
        out = getattr(sd.nn, op)(*xs)
        (out * out).sum().mark_as_loss()
        names = [f"x{i}" for i in range(len(values))]
        got = sd.calculate_gradients({}, *names)
        grads[dtype] = [got[n].numpy() for n in names]
        used = {n.op.name for n in sd.graph.nodes}
        assert ("scaled_dot_product_attention_grad" in used) == (dtype == np.float32)
    for g32, g64 in zip(grads[np.float32], grads[np.float64]):
        np.testing.assert_allclose(g32, g64, rtol=2e-3, atol=2e-3 * np.abs(g64).max())


@pytest.mark.parametrize("n, m", [(1, 1), (7, 3), (8, 8), (13, 9), (9, 17), (0, 5), (64, 12)])
def test_the_scaled_transpose_handles_ragged_tiles(n, m):
    """``k^T * scale`` in whole 8 x 8 tiles, then the ragged edges: every element once."""
    from samediff.kernels.attention import _transpose_scaled
    src = f32(n, m)
    dst = np.full((m, n), np.nan, np.float32)
    _transpose_scaled(src, np.float32(0.5), dst)
    np.testing.assert_array_equal(dst, (src * np.float32(0.5)).T)


def test_one_compiled_variant_serves_every_layout():
    """Contiguous heads and heads made by ``permute`` (strided views) run the one compiled
    function: its warm-up key is known from static types, so a plan's compile helper takes
    it ahead (``OpDef.warm``); a mask, float64 or a tiny product declares none."""
    contiguous = [f32(2, 4, 128, 32) for _ in range(3)]
    permuted = [f32(2, 128, 4, 32).transpose(0, 2, 1, 3) for _ in range(3)]
    for q, k, v in (contiguous, permuted):
        assert kernel.ready(q, k, v)
        got = kernel.attend(q, k, v, 0.25, True)
        np.testing.assert_allclose(got, reference(q, k, v, True, 0.25), rtol=2e-5, atol=2e-6)
    assert len(kernel.forward[np.dtype(np.float32)].signatures) == 1
    from samediff.ir import TensorType
    from samediff.ops import registry
    t32, t64 = TensorType((8, 4, 128, 64), np.dtype(np.float32)), TensorType(
        (8, 4, 128, 64), np.dtype(np.float64))
    fwd, bwd = (registry.get_op(n) for n in ("scaled_dot_product_attention",
                                             "scaled_dot_product_attention_grad"))
    assert fwd.warm([t32] * 3, fwd.default_attrs) == (
        ("samediff.kernels.attention", "_warm", ("attention", "float32")),)
    assert bwd.warm([t32] * 5, bwd.default_attrs) == (
        ("samediff.kernels.attention", "_warm_backward", ("attention_backward", "float32")),)
    tiny = TensorType((2, 8, 4), np.dtype(np.float32))
    assert fwd.warm([t32] * 4, fwd.default_attrs) == ()  # a mask: numpy's route
    assert fwd.warm([t64] * 3, fwd.default_attrs) == () == fwd.warm([tiny] * 3,
                                                                    fwd.default_attrs)
