"""Gradients through control flow against ``jax.grad`` of the same program written with
``lax`` (float64). JAX is never a dependency: this file is skipped unless JAX is installed
(run it in a separate environment: ``pip install jax pytest`` there, then
``PYTHONPATH=. python -m pytest tests/test_control_vs_jax.py``). JAX refuses reverse mode
through ``lax.while_loop``: a ``while_loop`` is compared with ``lax.fori_loop`` over the trip
count it took (a scan in JAX)."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp, lax = jax.numpy, jax.lax

RNG = np.random.default_rng(29)
W = RNG.uniform(0.3, 0.8, 4)
XS = RNG.uniform(-1.0, 1.0, (6, 4))


def test_scan_with_a_cond_inside():
    def ours(w, xs):
        def step(c, x):
            c = nd.cond((c * x).sum() > 0, lambda a: nd.tanh(a * w + x), lambda a: a * 0.5 - x,
                        c)
            return c, (c * c).sum()
        c, ys = nd.scan(step, w * 0.1, xs)
        return c.sum() + ys.sum()

    def theirs(w, xs):
        def step(c, x):
            c = lax.cond((c * x).sum() > 0, lambda a: jnp.tanh(a * w + x), lambda a: a * 0.5 - x,
                         c)
            return c, (c * c).sum()
        c, ys = lax.scan(step, w * 0.1, xs)
        return c.sum() + ys.sum()
    got = nd.grad(ours, argnums=(0, 1))(nd.create(W), nd.create(XS))
    want = jax.grad(theirs, argnums=(0, 1))(jnp.asarray(W), jnp.asarray(XS))
    for g, h in zip(got, want):
        np.testing.assert_allclose(g.numpy(), np.asarray(h), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("checkpoint", [None, 1, 3])
def test_while_loop_against_the_fori_loop_of_its_trip_count(checkpoint):
    def step(v, w):
        return nd.sin(v) * w

    def run(w):
        return nd.while_loop(lambda c: (c[1] * c[1]).sum() > 0.05,
                             lambda c: (c[0] + 1, step(c[1], w)), (nd.create(0), w),
                             max_iterations=50, checkpoint=checkpoint)
    trips = int(run(nd.create(W))[0].numpy())
    assert 3 <= trips < 50

    def theirs(w):
        return (lax.fori_loop(0, trips, lambda i, v: jnp.sin(v) * w, w) ** 2).sum()
    got = nd.grad(lambda w: (run(w)[1] ** 2).sum())(nd.create(W)).numpy()
    np.testing.assert_allclose(got, np.asarray(jax.grad(theirs)(jnp.asarray(W))), rtol=1e-12)


def test_second_derivative_of_a_scan():
    def ours(a):
        c, _ = nd.scan(lambda c, x: (nd.sin(c * a) + x, None), a * 0.0, nd.create(XS[:, 0]))
        return c

    def theirs(a):
        return lax.scan(lambda c, x: (jnp.sin(c * a) + x, None), a * 0.0, jnp.asarray(XS[:, 0]))[0]
    a = np.float64(0.7)
    got = nd.grad(nd.grad(ours))(nd.create(a)).numpy()
    np.testing.assert_allclose(got, np.asarray(jax.grad(jax.grad(theirs))(a)), rtol=1e-10)
