"""Training-mode gradients against PyTorch autograd (skipped where torch is not installed:
torch is never a dependency; run this file in a separate environment that has it).

dropout: the mask nd4py drew is read back and handed to torch (torch's own dropout draws other
numbers), with ND4J's p (keep probability) turned into torch's drop probability. batch norm:
``torch.nn.functional.batch_norm(training=True)``, whose gradient uses the batch statistics.
"""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import random_state

torch = pytest.importorskip("torch")


def test_dropout_gradient_matches_torch_with_the_same_mask():
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(5, 7)), rng.normal(size=(7, 3))

    def f(x, w):
        return (nd.tanh(nd.nn.dropout(x, 0.6) @ w) ** 2).sum()

    random_state.set_seed(4)
    with nd.graph_scope(training=True):
        value, (gx, gw) = nd.value_and_grad(f, argnums=(0, 1))(nd.create(x), nd.create(w))
    random_state.set_seed(4)
    with nd.graph_scope(training=True):
        mask = nd.nn.dropout(nd.ones(5, 7, dtype="double"), 0.6)
    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(w, requires_grad=True)
    tv = (torch.tanh((tx * torch.tensor(mask.numpy())) @ tw) ** 2).sum()
    tv.backward()
    np.testing.assert_allclose(value.numpy(), tv.item(), rtol=1e-12)
    np.testing.assert_allclose(gx.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gw.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape, axis", [((8, 3), 1), ((4, 3, 5, 2), 1)])
def test_batch_norm_training_gradient_matches_torch(shape, axis):
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=shape) * 2 + 0.5, rng.normal(size=shape)
    c = shape[axis]
    gamma, beta = rng.uniform(0.5, 1.5, c), rng.normal(size=c)

    def f(x, gamma, beta):
        y = nd.nn.batch_norm(x, nd.zeros(c, dtype="double"), nd.ones(c, dtype="double"),
                             gamma, beta, axis=axis, epsilon=1e-5)
        return (y * nd.create(w)).sum()

    with nd.graph_scope(training=True):
        grads = nd.grad(f, argnums=(0, 1, 2))(nd.create(x), nd.create(gamma), nd.create(beta))
    tx, tg, tb = (torch.tensor(a, requires_grad=True) for a in (x, gamma, beta))
    ty = torch.nn.functional.batch_norm(tx, torch.zeros(c, dtype=torch.float64),
                                        torch.ones(c, dtype=torch.float64), tg, tb,
                                        training=True, eps=1e-5)
    (ty * torch.tensor(w)).sum().backward()
    for ours, theirs in zip(grads, (tx, tg, tb)):
        np.testing.assert_allclose(ours.numpy(), theirs.grad.numpy(), rtol=1e-9, atol=1e-12)
