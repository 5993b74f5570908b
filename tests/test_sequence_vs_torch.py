"""The sequence-model ops against PyTorch's (``F.scaled_dot_product_attention``,
``F.embedding``, ``torch.nn.functional.rms_norm``), values and gradients, float64. PyTorch is
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
