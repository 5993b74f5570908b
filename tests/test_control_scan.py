"""``scan`` (``samediff/control/loops.py``): the functional form eagerly, traced, compiled and on
SameDiff variables; pytrees; reverse; zero steps; named errors; gradients through the carry,
the scanned rows and captured values against finite differences. The op's table rows (eager
vs reference, traced, compiled, gradient, save/load) are in ``op_samples_control.py``."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.control import CarryError
from samediff.errors import OpError

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import central_differences
except ImportError:  # ... or tests/ became one
    from .op_references import central_differences

F64 = np.float64
RNG = np.random.default_rng(3)
W = RNG.normal(size=3)
XS = RNG.normal(size=(5, 3))


def step(c, x):
    """carry (h, count): h <- tanh(h * W + x), count + 1; y = {"h": h entering, "s": sum}."""
    h, k = c
    return (nd.tanh(h * nd.create(W) + x), k + 1.0), {"h": h, "s": (h * x).sum()}


def reference(xs, reverse=False):
    h, k = np.zeros(3), 0.0
    hs, ss = [None] * len(xs), [None] * len(xs)
    for t in (range(len(xs) - 1, -1, -1) if reverse else range(len(xs))):
        hs[t], ss[t] = h, float((h * xs[t]).sum())
        h, k = np.tanh(h * W + xs[t]), k + 1.0
    return (h, k), np.array(hs).reshape(len(xs), 3), np.array(ss)


def _check(result, xs, reverse):
    (h, k), ys = result
    (rh, rk), rhs, rss = reference(xs, reverse)
    np.testing.assert_allclose(h.numpy(), rh, rtol=1e-12)
    assert float(np.asarray(k.numpy())) == rk
    np.testing.assert_allclose(ys["h"].numpy(), rhs, rtol=1e-12)
    np.testing.assert_allclose(ys["s"].numpy(), rss, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_eager_traced_compiled_and_samediff_agree_with_the_loop(reverse):
    init = (nd.create(np.zeros(3)), nd.create(0.0))
    xs = nd.create(XS)
    _check(nd.scan(step, init, xs, reverse=reverse), XS, reverse)
    with nd.graph_scope():
        traced = nd.scan(step, init, xs, reverse=reverse)
    _check(traced, XS, reverse)
    f = nd.compile(lambda init, xs: nd.scan(step, init, xs, reverse=reverse))
    _check(f(init, xs), XS, reverse)
    _check(f(init, xs), XS, reverse)  # the cached plan
    sd = SameDiff.create()
    p = sd.placeholder("xs", F64, -1, 3)
    (h, k), ys = nd.scan(step, (sd.constant("h0", np.zeros(3)), sd.constant("k0", 0.0)), p,
                         length=5, reverse=reverse)
    got = sd.output({"xs": XS}, h.name, k.name, ys["h"].name, ys["s"].name)
    _check(((got[h.name], got[k.name]), {"h": got[ys["h"].name], "s": got[ys["s"].name]}),
           XS, reverse)


def test_scan_without_xs_and_without_ys():
    fib = lambda c, _: ((c[1], c[0] + c[1]), None)  # noqa: E731
    (a, b), ys = nd.scan(fib, (nd.create(0.0), nd.create(1.0)), length=10)
    assert ys is None and float(a.numpy()) == 55.0
    with nd.graph_scope():
        (a, b), ys = nd.scan(fib, (nd.create(0.0), nd.create(1.0)), length=10)
    assert ys is None and float(a.numpy()) == 55.0


def test_zero_steps_return_the_init_and_empty_ys():
    init = (nd.create(np.ones(3)), nd.create(2.0))
    (h, k), ys = nd.scan(step, init, nd.create(np.zeros((0, 3))))
    np.testing.assert_array_equal(h.numpy(), np.ones(3))
    assert ys["h"].shape == (0, 3) and ys["s"].shape == (0,)


def test_gradients_through_the_carry_the_rows_and_a_captured_value():
    """d/dw and d/dxs of a loss through a scan whose body closes over ``w``: the capture's
    gradient is summed over the steps. Against central differences (float64)."""
    def loss(w, xs):
        body = lambda h, x: (nd.tanh(h * w + x), (h * h).sum())  # noqa: E731
        h, ys = nd.scan(body, nd.create(np.zeros(3)), xs)
        return h.sum() + ys.sum()

    def ref(w, xs):
        h, tot = np.zeros(3), 0.0
        for x in xs:
            tot += (h * h).sum()
            h = np.tanh(h * w + x)
        return h.sum() + tot
    gw, gx = nd.grad(loss, argnums=(0, 1))(nd.create(W), nd.create(XS))
    for got, at, f in ((gw, W, lambda v: ref(v, XS)), (gx, XS, lambda v: ref(W, v))):
        np.testing.assert_allclose(got.numpy(), central_differences(f, at), rtol=1e-6,
                                   atol=1e-9)


def test_a_samediff_variable_read_by_the_body_gets_its_gradient():
    sd = SameDiff.create()
    xs, w = sd.placeholder("xs", F64, 5, 3), sd.var("w", W.copy())
    h, ys = nd.scan(lambda h, x: (nd.tanh(h * w + x), h.sum()), sd.constant("h0", np.zeros(3)),
                    xs)
    (h.sum() + ys.sum()).mark_as_loss()
    g = sd.calculate_gradients({"xs": XS}, "w")["w"].numpy()

    def ref(wv):
        h, tot = np.zeros(3), 0.0
        for x in XS:
            tot += h.sum()
            h = np.tanh(h * wv + x)
        return h.sum() + tot
    np.testing.assert_allclose(g, central_differences(ref, W), rtol=1e-6, atol=1e-9)


def test_scan_refuses_a_changing_carry_and_disagreeing_lengths():
    xs = nd.create(XS)
    grow = lambda c, x: (nd.concat([c, x], 0), None)  # noqa: E731
    with pytest.raises(CarryError, match="carry leaf 0"):
        nd.scan(grow, nd.create(np.zeros(3)), xs)
    with pytest.raises(CarryError, match="carry leaf 0"):
        with nd.graph_scope():
            nd.scan(grow, nd.create(np.zeros(3)), xs)
    with pytest.raises(CarryError, match="structure"):
        nd.scan(lambda c, x: ((c, c), None), nd.create(np.zeros(3)), xs)
    with pytest.raises(OpError, match="disagree"):
        nd.scan(lambda c, x: (c, None), nd.create(0.0), xs, length=7)
    with pytest.raises(OpError, match="xs or length"):
        nd.scan(lambda c, x: (c, None), nd.create(0.0))
    with pytest.raises(OpError, match="pair"):
        nd.scan(lambda c, x: c, nd.create(0.0), xs)
    with pytest.raises(OpError, match="unroll"):
        nd.scan(lambda c, x: (c, None), nd.create(0.0), xs, unroll=0)


# -- fori_loop ------------------------------------------------------------------------------------

def newton_sqrt(a, n=30):
    return nd.fori_loop(0, n, lambda i, x: 0.5 * (x + a / x), a)


def test_fori_loop_eager_traced_compiled_and_samediff():
    a = np.array([2.0, 9.0, 0.25])
    for got in (newton_sqrt(nd.create(a)),
                nd.compile(newton_sqrt, static_argnums=1)(nd.create(a), 30)):
        np.testing.assert_allclose(got.numpy(), np.sqrt(a), rtol=1e-14)
    with nd.graph_scope():
        traced = newton_sqrt(nd.create(a))
    np.testing.assert_allclose(traced.numpy(), np.sqrt(a), rtol=1e-14)
    sd = SameDiff.create()
    p = sd.placeholder("a", F64, 3)
    out = newton_sqrt(p)
    np.testing.assert_allclose(sd.output({"a": a}, out.name)[out.name].numpy(), np.sqrt(a),
                               rtol=1e-14)


def test_fori_loop_gradient_index_and_empty_range():
    a = np.array([2.0, 9.0, 0.25])
    g = nd.grad(lambda a: newton_sqrt(a).sum())(nd.create(a))
    np.testing.assert_allclose(g.numpy(), 0.5 / np.sqrt(a), rtol=1e-10)
    # the body reads the index: sum of i * x over i = 2..5 with x doubling
    out = nd.fori_loop(2, 6, lambda i, c: (c[0] + i.cast("float64") * c[1], c[1] * 2.0),
                       (nd.create(np.array(0.0)), nd.create(np.array(1.0))))
    want_s, x = 0.0, 1.0
    for i in range(2, 6):
        want_s, x = want_s + i * x, 2.0 * x
    assert (float(out[0].numpy()), float(out[1].numpy())) == (want_s, x)
    same = nd.fori_loop(5, 5, lambda i, x: x * 100.0, nd.create(a))
    np.testing.assert_array_equal(same.numpy(), a)
    backwards = nd.fori_loop(5, 2, lambda i, x: x * 100.0, nd.create(a))
    np.testing.assert_array_equal(backwards.numpy(), a)


def test_fori_loop_bounds_must_be_static_integers():
    with pytest.raises(OpError, match="integer scalar"):
        nd.fori_loop(0, 2.5, lambda i, x: x, nd.create(1.0))
    with pytest.raises(OpError, match="while_loop"):
        with nd.graph_scope():
            n = nd.create(3) + 1
            nd.fori_loop(0, n, lambda i, x: x, nd.create(1.0))
