"""The sequence-model ops against PyTorch's (``F.scaled_dot_product_attention``,
``F.embedding``, ``torch.nn.functional.rms_norm``), values and gradients, float64 (and float32
for the compiled attention). PyTorch is
never a dependency: this file is skipped unless it is installed (run it in a separate
environment: ``PYTHONPATH=. python -m pytest tests/test_sequence_vs_torch.py``)."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd

torch = pytest.importorskip("torch")
F = torch.nn.functional
RNG = np.random.default_rng(41)


def _torch(*arrays):
    return [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]


@pytest.mark.parametrize("how", ["plain", "causal", "bool", "float", "scale"])
def test_scaled_dot_product_attention(how):
    q, k, v = (RNG.normal(size=(2, 3, 5, 4)) for _ in range(3))
    mask = {"bool": RNG.random((5, 5)) > 0.3, "float": RNG.normal(size=(1, 3, 5, 5))}.get(how)
    if mask is not None and mask.dtype == bool:
        mask[:, 0] = True  # (every query attends to something)
    kw = {"is_causal": how == "causal", "scale": 0.3 if how == "scale" else None}
    ours_args = [nd.create(a) for a in (q, k, v)] + ([nd.create(mask)] if mask is not None else [])

    def ours(q, k, v, *m):
        return (nd.nn.scaled_dot_product_attention(q, k, v, *m, **kw) ** 2).sum()
    value = float(ours(*ours_args).numpy())
    grads = nd.grad(ours, argnums=(0, 1, 2))(*ours_args)
    tq, tk, tv = _torch(q, k, v)
    tm = torch.tensor(mask) if mask is not None else None
    want = (F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, **kw) ** 2).sum()
    want.backward()
    assert value == pytest.approx(want.item(), rel=1e-12)
    for g, t in zip(grads, (tq, tk, tv)):
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("shape_q, shape_k", [((2, 3, 300, 32), (2, 3, 300, 32)),
                                              ((1, 4, 170, 16), (1, 4, 260, 16))])
def test_float32_attention_and_its_blocked_gradient(causal, shape_q, shape_k):
    """float32 without a mask: the compiled forward and the blocked gradient op (autodiff's
    for float32) against PyTorch's SDPA and its backward, in float32 on both sides."""
    q = RNG.normal(size=shape_q).astype(np.float32)
    k, v = (RNG.normal(size=shape_k).astype(np.float32) for _ in range(2))
    g = RNG.normal(size=shape_q[:-1] + (shape_k[-1],)).astype(np.float32)
    args = [nd.create(a) for a in (q, k, v)]

    def ours(q, k, v):
        out = nd.nn.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return (out * nd.create(g)).sum()
    grads = nd.grad(ours, argnums=(0, 1, 2))(*args)
    out = nd.nn.scaled_dot_product_attention(*args, is_causal=causal).numpy()
    tq, tk, tv = _torch(q, k, v)
    want = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
    want.backward(torch.from_numpy(g))
    np.testing.assert_allclose(out, want.detach().numpy(), rtol=1e-4, atol=1e-5)
    for ours_g, t in zip(grads, (tq, tk, tv)):
        theirs = t.grad.numpy()
        np.testing.assert_allclose(ours_g.numpy(), theirs, rtol=1e-3,
                                   atol=1e-4 * np.abs(theirs).max())


def test_embedding_and_rms_norm():
    ids, w = np.array([[1, 4, 1], [0, 2, 4]]), RNG.normal(size=(5, 3))
    out = nd.grad(lambda t: (nd.nn.embedding(nd.create(ids), t, padding_idx=4) ** 2).sum())(
        nd.create(w))
    tw = torch.tensor(w, requires_grad=True)
    (F.embedding(torch.tensor(ids), tw, padding_idx=4) ** 2).sum().backward()
    np.testing.assert_allclose(out.numpy(), tw.grad.numpy(), rtol=1e-12)
    x, gain = RNG.normal(size=(4, 6)), RNG.normal(size=6)
    got = nd.nn.rms_norm(nd.create(x), nd.create(gain), epsilon=1e-5).numpy()
    want = F.rms_norm(torch.tensor(x), (6,), torch.tensor(gain), eps=1e-5).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
