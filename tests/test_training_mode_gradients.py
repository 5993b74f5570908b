"""Gradients in training mode differentiate the training forms themselves.

``nd.grad`` / ``nd.value_and_grad`` inside ``graph_scope(training=True)`` or
``nd.compile(training=True)`` compute the value with the training forms (dropout's mask, batch
statistics); the gradient must be that form's gradient, computed with the same mask. Driven by
the op table: every op with a training form, on every float sample of ``tests/op_samples.py``,
against central finite differences of the training-mode value. Each finite-difference
evaluation reseeds the random stream, so every evaluation draws the same mask as the gradient.
"""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import random_state
from samediff.ops import REGISTRY

try:
    from op_samples import SAMPLES
except ImportError:
    from tests.op_samples import SAMPLES

SEED = 1234
TRAINING_OPS = sorted(name for name, op in REGISTRY.items() if op.training is not None)


def _cases():
    for name in TRAINING_OPS:
        for k, sample in enumerate(SAMPLES[name]):
            yield pytest.param(name, sample, id=f"{name}-sample{k}")


def test_every_training_form_has_a_gradient_sample():
    assert TRAINING_OPS, "the op table has no training forms: the suite below tests nothing"
    for name in TRAINING_OPS:
        assert any(isinstance(x, np.ndarray) and x.dtype.kind == "f"
                   for s in SAMPLES[name] for x in s.inputs), name


def _objective(name, sample):
    """``f(*float inputs) = sum(op(...) * W)`` (each output of a multi-output op its own W),
    and the indices of the float inputs it differentiates."""
    op = getattr(nd.nn, name, None) or getattr(nd, name)
    floats = [i for i, x in enumerate(sample.inputs)
              if isinstance(x, np.ndarray) and x.dtype.kind == "f"]
    rng = np.random.default_rng(5)

    def f(*args):
        inputs = list(sample.inputs)
        for i, a in zip(floats, args):
            inputs[i] = a
        outs = op(*inputs, **sample.attrs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        total = 0.0
        for o in outs:
            total = total + (o * rng_weights(o.shape)).sum()
        return total

    weights: dict = {}

    def rng_weights(shape):
        if shape not in weights:
            weights[shape] = nd.create(rng.uniform(0.5, 1.5, shape))
        return weights[shape]

    return f, floats


def _training_value(f, args):
    random_state.set_seed(SEED)
    with nd.graph_scope(training=True):
        v = f(*[nd.create(a) for a in args])
    return float(v.numpy())


@pytest.mark.parametrize("name, sample", list(_cases()))
def test_training_gradient_matches_finite_differences(name, sample):
    f, floats = _objective(name, sample)
    args = [np.asarray(sample.inputs[i], np.float64) for i in floats]
    random_state.set_seed(SEED)
    with nd.graph_scope(training=True):
        value, grads = nd.value_and_grad(f, argnums=tuple(range(len(args))))(
            *[nd.create(a) for a in args])
    assert float(value.numpy()) == pytest.approx(_training_value(f, args), rel=1e-12)
    h = 1e-6
    for k, (a, g) in enumerate(zip(args, grads)):
        numeric = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            plus, minus = [x.copy() for x in args], [x.copy() for x in args]
            plus[k][idx] += h
            minus[k][idx] -= h
            numeric[idx] = (_training_value(f, plus) - _training_value(f, minus)) / (2 * h)
        np.testing.assert_allclose(g.numpy(), numeric, rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name}: gradient of input {floats[k]}")


def test_dropout_gradient_is_the_mask_in_a_compiled_training_function():
    x = np.linspace(-1.0, 1.0, 24).reshape(4, 6)

    @nd.compile(training=True)
    def step(x):
        return nd.value_and_grad(lambda v: (nd.nn.dropout(v, 0.5) * v).sum())(x)

    random_state.set_seed(3)
    value, g = step(nd.create(x))
    random_state.set_seed(3)
    with nd.graph_scope(training=True):
        kept = nd.nn.dropout(nd.ones(4, 6, dtype="double"), 0.5)
    mask = kept.numpy()                                # 0 or 1/p, the mask the step drew
    assert set(np.unique(mask)) <= {0.0, 2.0} and 0 < (mask > 0).sum() < mask.size
    np.testing.assert_allclose(value.numpy(), (x * mask * x).sum())
    np.testing.assert_allclose(g.numpy(), 2 * x * mask)  # d/dx (x * m * x)


def test_nested_gradients_in_training_mode_use_one_mask():
    x = np.linspace(0.2, 1.4, 6)

    def inner(v):
        return (nd.nn.dropout(v, 0.5) ** 3).sum()

    random_state.set_seed(8)
    with nd.graph_scope(training=True):
        hess_diag = nd.grad(lambda v: nd.grad(inner)(v).sum())(nd.create(x))
        mask_probe = nd.grad(inner)(nd.create(np.ones(6)))
    # inner = sum((m x)^3): grad = 3 m^3 x^2, and d/dx of its sum = 6 m^3 x. The second scope
    # call draws a new mask, so only the first is checked, against the sign pattern it implies.
    h = hess_diag.numpy()
    m3 = h / (6 * x)
    assert set(np.round(m3, 9)) <= {0.0, 8.0}, m3          # m in {0, 2}: m^3 in {0, 8}
    assert mask_probe.numpy().shape == (6,)


def test_batch_norm_gradient_uses_the_batch_statistics():
    """d/dx sum(batch_norm(x) * w) with batch statistics: the independent formula
    (g - mean(g) - xhat * mean(g * xhat)) / sqrt(var + eps) per channel."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(6, 3)) * 2 + 1
    w = rng.normal(size=(6, 3))
    eps = 1e-5

    def f(v):
        y = nd.nn.batch_norm(v, nd.zeros(3, dtype="double"), nd.ones(3, dtype="double"),
                             nd.ones(3, dtype="double"), nd.zeros(3, dtype="double"),
                             epsilon=eps)
        return (y * nd.create(w)).sum()

    with nd.graph_scope(training=True):
        g = nd.grad(f)(nd.create(x))
    mean, var = x.mean(0), x.var(0)
    xhat = (x - mean) / np.sqrt(var + eps)
    expected = (w - w.mean(0) - xhat * (w * xhat).mean(0)) / np.sqrt(var + eps)
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-9, atol=1e-12)
    with nd.graph_scope():                               # inference: the running statistics
        g_inf = nd.grad(f)(nd.create(x))
    np.testing.assert_allclose(g_inf.numpy(), w / np.sqrt(1 + eps), rtol=1e-12)
