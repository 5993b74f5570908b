"""``nd.grad`` / ``nd.value_and_grad`` on ordinary Python functions of arrays.

Every expected gradient here is independent of the library's gradient code: central finite
differences of a numpy twin of the function (written out in this file), or a closed form worked
out by hand. Covered: elementwise math, an MLP loss, broadcasting, reductions, indexing,
reshape/transpose, ``where``; ``argnums``; pytrees; ``has_aux``; ``value_and_grad``;
composition with ``nd.compile`` (one trace, one plan); nesting (higher derivatives, grads inside
compiled functions); errors; float32; and (when installed) agreement with ``jax.grad``.
"""
from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracing_support import isolated_plan_cache, stats  # noqa: F401  (autouse: clean plan cache)

import nd4py as nd
from samediff.compiler import get_executor
from samediff.recorder import GraphValue

RTOL, ATOL = 1e-6, 1e-7  # float64 central differences with h = 1e-6: error ~1e-9 here
SMALL = settings(max_examples=12, deadline=None)


# ============================================================================================
# helpers: numpy twins and finite differences
# ============================================================================================


def fd_grad(f: Callable[..., float], args: list[np.ndarray], i: int = 0,
            h: float = 1e-6) -> np.ndarray:
    """Central finite differences of the numpy function ``f(*args)`` w.r.t. ``args[i]``."""
    args = [np.array(a, dtype=np.float64) for a in args]
    x = args[i]
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + h
        up = f(*args)
        x[idx] = old - h
        down = f(*args)
        x[idx] = old
        g[idx] = (up - down) / (2 * h)
    return g


def fd_tree(f: Callable[[dict], float], params: dict, h: float = 1e-6) -> dict:
    """Finite differences of ``f(params)`` for every leaf of a flat dict of numpy arrays."""
    out = {}
    for key, value in params.items():
        def at(leaf, key=key):
            return f({**params, key: leaf})
        out[key] = fd_grad(at, [value], 0, h)
    return out


def arr(values: Any, dtype: Any = np.float64) -> nd.NDArray:
    return nd.create(np.array(values, dtype=dtype))


def close(actual: Any, expected: Any, rtol: float = RTOL, atol: float = ATOL) -> None:
    assert isinstance(actual, nd.NDArray), f"expected an NDArray, got {type(actual).__name__}"
    np.testing.assert_allclose(actual.numpy(), expected, rtol=rtol, atol=atol)


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_log_softmax(z):
    m = z.max(axis=-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


# (name, nd function, numpy twin, input shape). Every function maps a float64 array to a scalar.
CASES = [
    ("polynomial",
     lambda x: (x ** 3 - 2.0 * x * x + x - 4.0).sum(),
     lambda x: (x ** 3 - 2.0 * x * x + x - 4.0).sum(), (4, 3)),
    ("exp_log",
     lambda x: (nd.exp(x * 0.5) + nd.log(x * x + 1.0)).sum(),
     lambda x: (np.exp(x * 0.5) + np.log(x * x + 1.0)).sum(), (4, 3)),
    ("tanh_sigmoid_div",
     lambda x: (nd.tanh(x) * nd.nn.sigmoid(x) + 1.0 / (1.0 + x * x)).mean(),
     lambda x: (np.tanh(x) * np_sigmoid(x) + 1.0 / (1.0 + x * x)).mean(), (4, 3)),
    ("sqrt_pow",
     lambda x: nd.sqrt(x * x + 2.0).sum() + nd.math.pow(x * x + 1.0, 1.5).sum(),
     lambda x: np.sqrt(x * x + 2.0).sum() + ((x * x + 1.0) ** 1.5).sum(), (5,)),
    ("broadcast_row_column",
     lambda x: ((x + x[0:1, :] * x[:, 1:2]) * x[:, 2:3]).sum(),
     lambda x: ((x + x[0:1, :] * x[:, 1:2]) * x[:, 2:3]).sum(), (4, 3)),
    ("reductions",
     lambda x: x.max() + (x.max(1) * x.sum(1)).sum() + (x.mean(0) ** 2).sum()
     + ((x - x.mean(1, keep_dims=True)) ** 2).mean(),
     lambda x: x.max() + (x.max(1) * x.sum(1)).sum() + (x.mean(0) ** 2).sum()
     + ((x - x.mean(1, keepdims=True)) ** 2).mean(), (4, 3)),
    ("indexing_slicing",
     lambda x: (x[1:, ::2] * x[0:3, 0:2]).sum() + x[2].sum() * 2.0 + x[-1, 1] * x[0, 0]
     + (x[::-1] * x).sum(),
     lambda x: (x[1:, ::2] * x[0:3, 0:2]).sum() + x[2].sum() * 2.0 + x[-1, 1] * x[0, 0]
     + (x[::-1] * x).sum(), (4, 3)),
    ("reshape_transpose",
     lambda x: (x.reshape(3, 4) @ x).sum() + (x.T * x.T[::-1]).sum()
     + (x.reshape(-1) * nd.tanh(x.reshape(-1))).sum(),
     lambda x: (x.reshape(3, 4) @ x).sum() + (x.T * x.T[::-1]).sum()
     + (x.reshape(-1) * np.tanh(x.reshape(-1))).sum(), (4, 3)),
    ("where",
     lambda x: nd.where(x > 0.0, x * x, x * -3.0).sum() + nd.math.maximum(x, 0.25).sum(),
     lambda x: np.where(x > 0.0, x * x, x * -3.0).sum() + np.maximum(x, 0.25).sum(), (4, 3)),
    ("log_softmax_softmax",
     lambda x: (nd.nn.log_softmax(x, dim=-1) * x).sum() + nd.nn.softmax(x, dim=-1)[:, 0].sum(),
     lambda x: (np_log_softmax(x) * x).sum() + np.exp(np_log_softmax(x))[:, 0].sum(), (4, 3)),
    ("concat_stack",
     lambda x: (nd.concat([x, x * x], 0).sum(0) * nd.stack([x[0], x[1]], axis=0).sum(0)).sum(),
     lambda x: (np.concatenate([x, x * x], 0).sum(0) * np.stack([x[0], x[1]], 0).sum(0)).sum(),
     (4, 3)),
]


# ============================================================================================
# 1. gradients vs finite differences
# ============================================================================================


@pytest.mark.parametrize("name,f,np_f,shape", CASES, ids=[c[0] for c in CASES])
def test_grad_matches_finite_differences(name, f, np_f, shape):
    x = np.random.default_rng(7).standard_normal(shape)
    g = nd.grad(f)(arr(x))
    assert g.shape == x.shape and g.dtype == np.float64
    close(g, fd_grad(np_f, [x]))


def mlp_params(rng, d=3, h=5, c=4):
    return {"w1": rng.standard_normal((d, h)), "b1": rng.standard_normal(h) * 0.1,
            "w2": rng.standard_normal((h, c)), "b2": rng.standard_normal(c) * 0.1}


def mlp_loss(p, x, labels):
    hidden = nd.nn.relu(x @ p["w1"] + p["b1"])
    logits = hidden @ p["w2"] + p["b2"]
    return -(labels * nd.nn.log_softmax(logits, dim=-1)).sum(1).mean()


def np_mlp_loss(p, x, labels):
    hidden = np.maximum(x @ p["w1"] + p["b1"], 0.0)
    logits = hidden @ p["w2"] + p["b2"]
    return -(labels * np_log_softmax(logits)).sum(1).mean()


def test_mlp_softmax_cross_entropy_pytree_grad():
    rng = np.random.default_rng(3)
    p = mlp_params(rng)
    x = rng.standard_normal((6, 3))
    labels = np.eye(4)[rng.integers(0, 4, 6)]
    params = {k: arr(v) for k, v in p.items()}
    value, g = nd.value_and_grad(mlp_loss)(params, arr(x), arr(labels))
    assert type(g) is dict and list(g) == ["w1", "b1", "w2", "b2"]
    assert value.item() == pytest.approx(np_mlp_loss(p, x, labels), rel=1e-12)
    expected = fd_tree(lambda q: np_mlp_loss(q, x, labels), p)
    for k in p:
        close(g[k], expected[k])
    # the same loss through nd.loss (whose ops record into nd.grad's graph like any other)
    def with_loss_ns(q):
        hidden = nd.nn.relu(arr(x) @ q["w1"] + q["b1"])
        return nd.loss.softmax_cross_entropy(labels, hidden @ q["w2"] + q["b2"])
    g2 = nd.grad(with_loss_ns)(params)
    for k in p:
        close(g2[k], expected[k])


def test_several_arguments_with_broadcasting():
    """A row vector and a column vector broadcast against a matrix: their gradients are
    summed back to their own shapes."""
    rng = np.random.default_rng(11)
    x, row, col = rng.standard_normal((4, 3)), rng.standard_normal(3), rng.standard_normal((4, 1))

    def f(a, r, c):
        return (nd.tanh(a * r + c) * c).sum() + (r * r).sum()

    def np_f(a, r, c):
        return (np.tanh(a * r + c) * c).sum() + (r * r).sum()

    ga, gr, gc = nd.grad(f, argnums=(0, 1, 2))(arr(x), arr(row), arr(col))
    assert (ga.shape, gr.shape, gc.shape) == ((4, 3), (3,), (4, 1))
    for i, g in enumerate((ga, gr, gc)):
        close(g, fd_grad(np_f, [x, row, col], i))


@SMALL
@given(rows=st.integers(1, 5), cols=st.integers(1, 5), seed=st.integers(0, 2 ** 32 - 1),
       case=st.sampled_from(["polynomial", "exp_log", "tanh_sigmoid_div"]))
def test_grad_hypothesis_elementwise(rows, cols, seed, case):
    _, f, np_f, _ = next(c for c in CASES if c[0] == case)
    x = np.random.default_rng(seed).uniform(-2.0, 2.0, (rows, cols))
    close(nd.grad(f)(arr(x)), fd_grad(np_f, [x]), rtol=1e-5, atol=1e-6)


@SMALL
@given(rows=st.integers(1, 5), cols=st.integers(1, 5), seed=st.integers(0, 2 ** 32 - 1))
def test_grad_hypothesis_broadcast_and_reductions(rows, cols, seed):
    rng = np.random.default_rng(seed)
    x, row, col = rng.normal(size=(rows, cols)), rng.normal(size=cols), rng.normal(size=(rows, 1))

    def f(a, r, c):
        y = nd.exp((a + r) * 0.5) * c
        return (y.sum(0) * r).sum() + y.mean(1).sum() + (a * a).mean()

    def np_f(a, r, c):
        y = np.exp((a + r) * 0.5) * c
        return (y.sum(0) * r).sum() + y.mean(1).sum() + (a * a).mean()

    grads = nd.grad(f, argnums=(0, 1, 2))(arr(x), arr(row), arr(col))
    for i, g in enumerate(grads):
        close(g, fd_grad(np_f, [x, row, col], i), rtol=1e-5, atol=1e-6)


@SMALL
@given(n=st.integers(1, 6), d=st.integers(1, 4), h=st.integers(1, 5), c=st.integers(2, 4),
       seed=st.integers(0, 2 ** 32 - 1))
def test_grad_hypothesis_mlp(n, d, h, c, seed):
    rng = np.random.default_rng(seed)
    p = mlp_params(rng, d, h, c)
    x = rng.standard_normal((n, d))
    labels = np.eye(c)[rng.integers(0, c, n)]
    g = nd.grad(mlp_loss)({k: arr(v) for k, v in p.items()}, arr(x), arr(labels))
    expected = fd_tree(lambda q: np_mlp_loss(q, x, labels), p)
    for k in p:  # relu kinks are measure-zero for continuous random data
        close(g[k], expected[k], rtol=1e-5, atol=1e-6)


# ============================================================================================
# 2. argnums, pytrees, has_aux, Python floats
# ============================================================================================


def _f3(a, b, c):
    return (a * a * b).sum() + (b * c).sum() * 2.0 + c.sum()


A3, B3, C3 = np.array([1.0, 2.0]), np.array([3.0, -1.0]), np.array([0.5, 4.0])
# d/da = 2ab, d/db = a^2 + 2c, d/dc = 2b + 1
GA3, GB3, GC3 = 2 * A3 * B3, A3 ** 2 + 2 * C3, 2 * B3 + 1


def test_argnums_int_tuple_and_negative():
    args = (arr(A3), arr(B3), arr(C3))
    g = nd.grad(_f3)(*args)
    assert isinstance(g, nd.NDArray)
    close(g, GA3)
    close(nd.grad(_f3, argnums=1)(*args), GB3)
    close(nd.grad(_f3, argnums=-1)(*args), GC3)
    close(nd.grad(_f3, argnums=-3)(*args), GA3)
    one = nd.grad(_f3, argnums=(1,))(*args)
    assert type(one) is tuple and len(one) == 1
    close(one[0], GB3)
    two = nd.grad(_f3, argnums=(2, 0))(*args)  # the order asked for is kept
    assert type(two) is tuple and len(two) == 2
    close(two[0], GC3)
    close(two[1], GA3)
    neg = nd.grad(_f3, argnums=(-1, 1))(*args)
    close(neg[0], GC3)
    close(neg[1], GB3)


def test_non_differentiated_arguments_may_be_anything():
    def f(x, n, mode, table, scale=1.0):
        assert n == 3 and mode == "square" and table is None
        return (x * x).sum() * n * scale

    x = arr([1.0, -2.0])
    close(nd.grad(f)(x, 3, "square", None), 6 * np.array([1.0, -2.0]))
    close(nd.grad(f)(x, 3, "square", None, scale=0.5), 3 * np.array([1.0, -2.0]))
    # an array that is not differentiated is an input, not a constant baked in
    close(nd.grad(lambda x, y: (x * y).sum())(x, arr([4.0, 5.0])), [4.0, 5.0])
    # numpy arrays are accepted as differentiated arguments
    close(nd.grad(lambda x: (x ** 3).sum())(np.array([1.0, 2.0])), [3.0, 12.0])


def test_pytree_dict_list_tuple_nested():
    w, b = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0.5, -0.5])
    params = {"w": arr(w), "b": arr(b)}
    g = nd.grad(lambda p: ((p["w"] @ p["b"]) ** 2).sum())(params)
    assert type(g) is dict and list(g) == ["w", "b"]
    v = w @ b
    close(g["w"], 2 * np.outer(v, b))
    close(g["b"], 2 * w.T @ v)

    g = nd.grad(lambda xs: (xs[0] * xs[1]).sum())([arr([1.0, 2.0]), arr([3.0, 4.0])])
    assert type(g) is list and len(g) == 2
    close(g[0], [3.0, 4.0])
    close(g[1], [1.0, 2.0])

    g = nd.grad(lambda t: (t[0] * t[1] * t[1]).sum())((arr([1.0, 2.0]), arr([3.0, 4.0])))
    assert type(g) is tuple and len(g) == 2
    close(g[0], [9.0, 16.0])
    close(g[1], [6.0, 16.0])

    nested = {"layers": [{"w": arr([1.0, 2.0]), "b": arr([0.5])},
                         {"w": arr([3.0]), "b": arr([-1.0])}],
              "scale": (2.0,)}

    def f(p):
        total = p["scale"][0] * 0.0
        for layer in p["layers"]:
            total = total + (layer["w"] * layer["w"]).sum() * layer["b"].sum()
        return total * p["scale"][0]

    g = nd.grad(f)(nested)
    assert type(g) is dict and type(g["layers"]) is list and type(g["scale"]) is tuple
    assert type(g["layers"][0]) is dict and list(g["layers"][0]) == ["w", "b"]
    close(g["layers"][0]["w"], 2 * np.array([1.0, 2.0]) * 0.5 * 2.0)
    close(g["layers"][0]["b"], [5.0 * 2.0])
    close(g["layers"][1]["w"], [2 * 3.0 * -1.0 * 2.0])
    close(g["layers"][1]["b"], [9.0 * 2.0])
    close(g["scale"][0], 5.0 * 0.5 + 9.0 * -1.0)  # a Python float leaf: a 0-d gradient
    assert g["scale"][0].shape == ()


def test_pytree_namedtuple_keeps_its_type():
    Params = collections.namedtuple("Params", "w b")
    g = nd.grad(lambda p: (p.w * p.b).sum())(Params(arr([1.0, 2.0]), arr([3.0, 4.0])))
    assert type(g) is Params
    close(g.w, [3.0, 4.0])
    close(g.b, [1.0, 2.0])


def test_pytree_argnums_mixed_with_plain_arrays():
    p = {"a": arr([1.0, 2.0]), "b": [arr([3.0])]}
    gp, gx = nd.grad(lambda p, x: (p["a"] * x).sum() * p["b"][0].sum(), argnums=(0, 1))(
        p, arr([5.0, 6.0]))
    close(gp["a"], [15.0, 18.0])
    close(gp["b"][0], [17.0])
    close(gx, [3.0, 6.0])


def test_pytree_leaf_that_does_not_affect_the_output_has_a_zero_gradient():
    """As in jax.grad: an input the output does not depend on gets zeros of its shape."""
    g = nd.grad(lambda p: p["used"].sum())({"used": arr([1.0]), "unused": arr([2.0, 3.0])})
    assert g["unused"].numpy().tolist() == [0.0, 0.0] and g["used"].numpy().tolist() == [1.0]


def test_has_aux_values_are_materialized():
    outside = arr([7.0])
    x = arr([1.0, -2.0, 3.0])

    def f(x):
        y = x * x
        return y.sum(), {"squares": y, "positive": x > 0.0, "count": 3, "label": "sq",
                         "outside": outside, "pair": (nd.exp(x), [x.sum()])}

    g, aux = nd.grad(f, has_aux=True)(x)
    close(g, [2.0, -4.0, 6.0])
    assert list(aux) == ["squares", "positive", "count", "label", "outside", "pair"]
    for leaf in (aux["squares"], aux["positive"], aux["pair"][0], aux["pair"][1][0]):
        assert type(leaf) is nd.NDArray and not isinstance(leaf, GraphValue)
    close(aux["squares"], [1.0, 4.0, 9.0])
    np.testing.assert_array_equal(aux["positive"].numpy(), [True, False, True])
    assert aux["count"] == 3 and aux["label"] == "sq" and aux["outside"] is outside
    assert type(aux["pair"]) is tuple and type(aux["pair"][1]) is list
    close(aux["pair"][0], np.exp([1.0, -2.0, 3.0]), rtol=1e-12)
    close(aux["pair"][1][0], 2.0)

    (value, aux2), g2 = nd.value_and_grad(f, has_aux=True)(x)
    assert value.item() == 14.0
    close(g2, [2.0, -4.0, 6.0])
    close(aux2["squares"], [1.0, 4.0, 9.0])


def test_has_aux_list_pair_is_accepted():
    g, aux = nd.grad(lambda x: [(x * x).sum(), x * 2.0], has_aux=True)(arr([3.0]))
    close(g, [6.0])
    close(aux, [6.0])


def test_python_float_arguments():
    ga, gb = nd.grad(lambda a, b: a * a * b + b, argnums=(0, 1))(3.0, 2.0)
    for g in (ga, gb):
        assert isinstance(g, nd.NDArray) and g.shape == () and g.dtype.kind == "f"
    assert ga.item() == pytest.approx(12.0) and gb.item() == pytest.approx(10.0)
    # a float scaling an array
    g = nd.grad(lambda s, x: (x * s * s).sum())(1.5, arr([1.0, 2.0, 3.0]))
    assert g.item() == pytest.approx(2 * 1.5 * 6.0)
    # the identity function
    assert nd.grad(lambda x: x)(4.0).item() == 1.0
    assert nd.grad(lambda x: nd.exp(x))(0.0).item() == pytest.approx(1.0)


def test_same_array_passed_twice_gets_separate_gradients():
    x = arr([1.0, 2.0])
    ga, gb = nd.grad(lambda a, b: (a * a * b).sum(), argnums=(0, 1))(x, x)
    close(ga, [2.0, 8.0])
    close(gb, [1.0, 4.0])


def test_grad_does_not_change_its_arguments():
    x = np.array([1.0, 2.0, 3.0])
    xa = arr(x)
    nd.grad(lambda t: (t * t).sum())(xa)
    np.testing.assert_array_equal(xa.numpy(), x)


# ============================================================================================
# 3. value_and_grad
# ============================================================================================


@pytest.mark.parametrize("name,f,np_f,shape", CASES[:6], ids=[c[0] for c in CASES[:6]])
def test_value_and_grad_value_is_the_eager_value(name, f, np_f, shape):
    x = arr(np.random.default_rng(5).standard_normal(shape))
    value, g = nd.value_and_grad(f)(x)
    eager = f(x)
    assert isinstance(value, nd.NDArray) and value.shape == () and value.dtype == eager.dtype
    assert value.item() == pytest.approx(eager.item(), rel=1e-12, abs=1e-12)
    close(g, nd.grad(f)(x).numpy(), rtol=0, atol=0)


def test_value_and_grad_argnums_tuple():
    value, (ga, gc) = nd.value_and_grad(_f3, argnums=(0, 2))(arr(A3), arr(B3), arr(C3))
    assert value.item() == pytest.approx(_f3(A3, B3, C3))
    close(ga, GA3)
    close(gc, GC3)


# ============================================================================================
# 4. composition with nd.compile
# ============================================================================================


def _tanh_loss(w, x):
    return (nd.tanh(x @ w) ** 2).mean() + (w * w).sum() * 0.01


def _np_tanh_loss(w, x):
    return (np.tanh(x @ w) ** 2).mean() + (w * w).sum() * 0.01


@pytest.mark.parametrize("executor", ["interpreter", pytest.param("compiled",
                                                                  marks=pytest.mark.compiled)])
def test_compiled_grad_is_one_trace_one_plan(executor):
    assert get_executor() == executor
    gf = nd.compile(nd.grad(_tanh_loss, argnums=(0, 1)))
    rng = np.random.default_rng(2)
    for _ in range(4):  # new data, same shapes
        w, x = rng.standard_normal((3, 2)), rng.standard_normal((5, 3))
        gw, gx = gf(arr(w), arr(x))
        ew, ex = nd.grad(_tanh_loss, argnums=(0, 1))(arr(w), arr(x))
        close(gw, ew.numpy(), rtol=1e-12, atol=1e-14)
        close(gx, ex.numpy(), rtol=1e-12, atol=1e-14)
        close(gw, fd_grad(_np_tanh_loss, [w, x], 0))
    assert gf.cache_info()["traces"] == 1 and gf.cache_info()["signatures"] == 1
    st_ = stats()
    assert st_["compiles"] == 1 and st_["plans"] == 1 and st_["misses"] == 1, st_
    assert st_["fallbacks"] == 0, st_


@pytest.mark.parametrize("executor", ["interpreter", pytest.param("compiled",
                                                                  marks=pytest.mark.compiled)])
def test_compiled_value_and_grad_with_aux_and_pytree(executor):
    assert get_executor() == executor
    def f(p, x):
        h = x @ p["w"] + p["b"]
        return (h * h).mean(), {"h": h}

    vg = nd.compile(nd.value_and_grad(f, has_aux=True))
    rng = np.random.default_rng(4)
    for _ in range(3):
        p = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
        x = rng.standard_normal((4, 3))
        (value, aux), g = vg({k: arr(v) for k, v in p.items()}, arr(x))
        h = x @ p["w"] + p["b"]
        assert value.item() == pytest.approx((h * h).mean(), rel=1e-12)
        assert type(aux["h"]) is nd.NDArray
        close(aux["h"], h, rtol=1e-12)
        expected = fd_tree(lambda q, x=x: ((x @ q["w"] + q["b"]) ** 2).mean(), p)
        assert type(g) is dict
        for k in p:
            close(g[k], expected[k])
    assert vg.cache_info()["traces"] == 1
    assert stats()["compiles"] == 1 and stats()["plans"] == 1


def test_compiled_sgd_step_with_grad_inside():
    step = nd.compile(lambda w, x: w - 0.1 * nd.grad(_tanh_loss)(w, x))
    rng = np.random.default_rng(6)
    w, x = rng.standard_normal((3, 2)), rng.standard_normal((5, 3))
    for _ in range(3):
        new = step(arr(w), arr(x))
        expected = w - 0.1 * fd_grad(_np_tanh_loss, [w, x], 0)
        close(new, expected)
        w = new.numpy().copy()
    assert step.cache_info()["traces"] == 1 and stats()["compiles"] == 1


def test_grad_inside_graph_scope_is_traced():
    x = arr([1.0, 2.0])
    with nd.graph_scope():
        g = nd.grad(lambda y: (y ** 3).sum())(x * 1.0)
    close(g, [3.0, 12.0])


def test_grad_of_a_compiled_function_gives_correct_values():
    cf = nd.compile(lambda x: (nd.sin(x) * x).sum())
    x = np.array([0.3, -1.2, 2.0])
    close(nd.grad(cf)(arr(x)), np.sin(x) + x * np.cos(x))


def test_grad_of_a_compiled_function_does_not_pile_up_signatures():
    cf = nd.compile(lambda x: (x * x).sum())
    for _ in range(3):
        nd.grad(cf)(arr([1.0, 2.0]))
    assert cf.cache_info()["signatures"] <= 1


# ============================================================================================
# 5. nesting: higher derivatives, grads inside differentiated / compiled functions
# ============================================================================================


def test_second_and_third_derivatives():
    x = np.array([-1.5, 0.5, 2.0])

    def second(f):
        return nd.grad(lambda t: nd.grad(f)(t).sum())

    close(second(lambda t: (t ** 3).sum())(arr(x)), 6 * x)
    close(second(lambda t: nd.sin(t).sum())(arr(x)), -np.sin(x), rtol=1e-12)
    close(second(lambda t: nd.exp(t * 2.0).sum())(arr(x)), 4 * np.exp(2 * x), rtol=1e-12)
    close(second(lambda t: nd.tanh(t).sum())(arr(x)),
          -2 * np.tanh(x) * (1 - np.tanh(x) ** 2), rtol=1e-10)
    third = nd.grad(lambda t: second(lambda u: (u ** 4).sum())(t).sum())
    close(third(arr(x)), 24 * x)
    # scalars, nd.grad(nd.grad(f)) directly
    assert nd.grad(nd.grad(lambda t: t ** 3))(2.0).item() == pytest.approx(12.0)
    assert nd.grad(nd.grad(nd.grad(lambda t: t ** 3)))(2.0).item() == pytest.approx(6.0)


def test_hessian_vector_product_couples_elements():
    """f(x) = (sum x)^3: grad = 3 s^2 (all entries), Hessian = 6 s * ones, so H v = 6 s sum(v)."""
    x, v = np.array([0.5, 1.0, -0.25]), np.array([1.0, -2.0, 4.0])

    def f(t):
        return t.sum() ** 3

    def hvp(t, w):
        return nd.grad(lambda u: (nd.grad(f)(u) * w).sum())(t)

    close(hvp(arr(x), arr(v)), np.full(3, 6 * x.sum() * v.sum()))


def test_grad_through_an_inner_grad_of_a_closure():
    """Differentiate, w.r.t. y, the inner gradient d/dx sum(sin(x * y)) = y cos(x y)."""
    x0, y0 = np.array([0.3, -0.7, 1.1]), np.array([1.5, 0.4, -2.0])

    def outer(y):
        inner = nd.grad(lambda x: nd.sin(x * y).sum())(arr(x0))
        return inner.sum()

    expected = np.cos(x0 * y0) - x0 * y0 * np.sin(x0 * y0)
    close(nd.grad(outer)(arr(y0)), expected, rtol=1e-12)
    # and against finite differences of the closed-form inner gradient
    close(nd.grad(outer)(arr(y0)), fd_grad(lambda y: (y * np.cos(x0 * y)).sum(), [y0]))


def test_mixed_partials_with_argnums():
    """f(a, b) = sum(a^2 b^3): d2f/(da db) summed over a's gradient = 6 a b^2 w.r.t. b."""
    a, b = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    g = nd.grad(lambda bb, aa: nd.grad(lambda u, w: (u * u * w ** 3).sum())(aa, bb).sum())(
        arr(b), arr(a))
    close(g, 6 * a * b ** 2)


@pytest.mark.parametrize("executor", ["interpreter", pytest.param("compiled",
                                                                  marks=pytest.mark.compiled)])
def test_compiled_second_derivative(executor):
    assert get_executor() == executor
    h = nd.compile(nd.grad(lambda x: nd.grad(lambda y: (y ** 3 + nd.sin(y)).sum())(x).sum()))
    for x in (np.array([1.0, 2.0, -0.5]), np.array([0.1, 0.2, 0.3])):
        close(h(arr(x)), 6 * x - np.sin(x), rtol=1e-12)
    assert h.cache_info()["traces"] == 1 and stats()["compiles"] == 1


def test_compiled_function_with_a_closure_over_a_traced_argument():
    f = nd.compile(lambda x, w: nd.grad(lambda v: ((x @ v) ** 2).sum())(w))
    x, w = np.array([[1.0, 2.0], [0.0, -1.0]]), np.array([[0.5], [1.5]])
    close(f(arr(x), arr(w)), 2 * x.T @ (x @ w))


# ============================================================================================
# 6. errors
# ============================================================================================


def test_non_scalar_output_is_an_error():
    with pytest.raises(nd.GradientError, match="scalar") as info:
        nd.grad(lambda x: x * x)(arr([1.0, 2.0]))
    assert "sum()" in str(info.value)  # says how to fix it


def test_integer_argument_is_an_error():
    with pytest.raises(nd.GradientError, match="floating-point") as info:
        nd.grad(lambda x: (x * x).sum())(nd.create([1, 2]))
    assert "int64" in str(info.value)
    with pytest.raises(nd.GradientError, match="floating-point"):
        nd.grad(lambda x: x * 2.0)(3)
    with pytest.raises(nd.GradientError, match="floating-point"):  # an int leaf of a pytree
        nd.grad(lambda p: p["w"].sum() * p["n"])({"w": arr([1.0]), "n": 2})
    with pytest.raises(nd.GradientError, match="floating-point"):  # an integer output
        nd.grad(lambda x: (x > 0.0).cast_to("int64").sum())(arr([1.0]))


def test_output_not_depending_on_the_argument_has_zero_gradients():
    """A constant float output (as in jax.grad) gives zeros; a non-scalar or non-float output
    is an error naming what was returned."""
    value, g = nd.value_and_grad(lambda x: nd.create(np.array(1.0)))(arr([1.0, 2.0]))
    assert value.item() == 1.0 and g.numpy().tolist() == [0.0, 0.0]
    assert nd.grad(lambda x, y: (y * y).sum())(arr([1.0]), arr([2.0])).numpy().tolist() == [0.0]
    g = nd.grad(lambda x, y: (x * x).sum(), argnums=(0, 1))(arr([1.0]), arr([2.0]))
    assert g[0].numpy().tolist() == [2.0] and g[1].numpy().tolist() == [0.0]
    with pytest.raises(nd.GradientError, match="floating-point scalar.*NoneType"):
        nd.grad(lambda x: None)(arr([1.0]))
    # only a non-differentiable path (a comparison) links the output to the argument
    with pytest.raises(nd.GradientError, match="non-differentiable"):
        nd.grad(lambda x: (x > 0.0).cast_to("double").sum())(arr([1.0]))


def test_argnums_out_of_range_or_malformed_is_an_error():
    with pytest.raises(nd.GradientError, match="argnums") as info:
        nd.grad(lambda x: x.sum(), argnums=1)(arr([1.0]))
    assert "1 positional argument" in str(info.value)
    with pytest.raises(nd.GradientError, match="argnums"):
        nd.grad(lambda x: x.sum(), argnums=-2)(arr([1.0]))
    with pytest.raises(nd.GradientError, match="argnums"):
        nd.grad(lambda x, y: x.sum(), argnums=(0, 5))(arr([1.0]), arr([1.0]))
    with pytest.raises(nd.GradientError, match="argnums"):
        nd.grad(lambda x: x.sum(), argnums=())
    with pytest.raises(nd.GradientError, match="argnums"):
        nd.value_and_grad(lambda x: x.sum(), argnums="0")


def test_has_aux_with_a_non_pair_is_an_error():
    with pytest.raises(nd.GradientError, match="pair"):
        nd.grad(lambda x: x.sum(), has_aux=True)(arr([1.0]))
    with pytest.raises(nd.GradientError, match="pair"):
        nd.grad(lambda x: (x.sum(), 1, 2), has_aux=True)(arr([1.0]))


def test_unsupported_argument_type_is_an_error():
    with pytest.raises(nd.GradientError, match="str") as info:
        nd.grad(lambda x: x)("abc")
    assert "arrays, floats" in str(info.value)
    with pytest.raises(nd.GradientError, match="NoneType"):
        nd.grad(lambda p: p["a"].sum())({"a": arr([1.0]), "b": None})


def test_error_inside_the_function_propagates_and_leaves_no_trace():
    def bad(x):
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        nd.grad(bad)(arr([1.0]))
    close(nd.grad(lambda x: (x * x).sum())(arr([2.0])), [4.0])  # still usable afterwards


# ============================================================================================
# 7. float32
# ============================================================================================


POW_FREE = [c for c in CASES if c[0] not in ("polynomial", "sqrt_pow", "reductions")]


@pytest.mark.parametrize("name,f,np_f,shape", POW_FREE, ids=[c[0] for c in POW_FREE])
def test_float32_inputs_give_float32_gradients(name, f, np_f, shape):
    x = np.random.default_rng(8).standard_normal(shape)
    value, g = nd.value_and_grad(f)(arr(x, np.float32))
    assert g.dtype == np.float32 and value.dtype == np.float32
    close(g, fd_grad(np_f, [x]), rtol=2e-4, atol=2e-4)
    gc = nd.compile(nd.grad(f))(arr(x, np.float32))  # compiled agrees, dtype included
    assert gc.dtype == np.float32
    close(gc, g.numpy(), rtol=1e-5, atol=1e-6)


def test_float32_pytree_leaves_keep_their_dtypes():
    rng = np.random.default_rng(8)
    x32 = arr(rng.standard_normal((4, 3)), np.float32)
    p = {"w": arr(rng.standard_normal((3, 2)), np.float32), "b": arr([0.1, 0.2], np.float64)}
    g = nd.grad(lambda p: ((x32 @ p["w"]) * p["b"]).sum())(p)
    assert g["w"].dtype == np.float32 and g["b"].dtype == np.float64
    # Python-float literals stay weak: they do not promote float32 to float64
    g = nd.grad(lambda x: (x * 2.5 + 1.0).sum())(arr([1.0, 2.0], np.float32))
    assert g.dtype == np.float32
    close(g, [2.5, 2.5])


@pytest.mark.parametrize("f", [lambda x: (x ** 3).sum(), lambda x: (x ** 2.5).sum(),
                               lambda x: nd.math.pow(x, 1.5).sum()])
def test_float32_pow_with_a_literal_exponent_gives_float32_gradients(f):
    x = arr([1.0, 2.0], np.float32)
    assert nd.compile(nd.grad(f))(x).dtype == np.float32
    assert nd.grad(f)(x).dtype == np.float32


# ============================================================================================
# 8. agreement with jax.grad (skipped unless jax is installed)
# ============================================================================================


def test_agrees_with_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    rng = np.random.default_rng(9)
    x = rng.standard_normal((4, 3))
    pairs = [
        (lambda t: (nd.tanh(t) * nd.exp(t * 0.3)).sum(),
         lambda t: (jnp.tanh(t) * jnp.exp(t * 0.3)).sum()),
        (lambda t: (t.max(1) * t.mean(0).sum()).sum(),
         lambda t: (t.max(1) * t.mean(0).sum()).sum()),
        (lambda t: (nd.nn.log_softmax(t, dim=-1) * t).sum(),
         lambda t: (jax.nn.log_softmax(t, axis=-1) * t).sum()),
        (lambda t: (t.reshape(3, 4) @ t).sum() + (t[1:, ::2] ** 2).sum(),
         lambda t: (t.reshape(3, 4) @ t).sum() + (t[1:, ::2] ** 2).sum()),
    ]
    for f, jf in pairs:
        close(nd.grad(f)(arr(x)), np.asarray(jax.grad(jf)(jnp.asarray(x))), rtol=1e-10,
              atol=1e-12)
    hess = nd.grad(lambda t: nd.grad(lambda u: (nd.sin(u) * u).sum())(t).sum())(arr(x))
    jhess = jax.grad(lambda t: jax.grad(lambda u: (jnp.sin(u) * u).sum())(t).sum())(x)
    close(hess, np.asarray(jhess), rtol=1e-10, atol=1e-12)
