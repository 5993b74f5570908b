"""What JAX users try first (issue 21): ``nd.compile(static_argnums=..., static_argnames=...)``,
``nd.stop_gradient``, ``nd.jacrev`` / ``nd.jacfwd`` / ``nd.hessian``, and the same
``TracingError`` for ``if``/``float()`` on a traced value inside ``nd.grad`` as inside
``nd.compile``. Jacobians are checked against central finite differences in float64."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.autodiff import GradientError
from samediff.errors import ConcretizationError, ConfigError, TracingError
from samediff.ops import REGISTRY

RNG = np.random.default_rng(21)
W = RNG.standard_normal((3, 4))
X = RNG.standard_normal(4)


def numeric_jacobian(f, x, eps=1e-6):
    """Central differences of a numpy function: shape f(x).shape + x.shape."""
    y = np.asarray(f(x))
    jac = np.zeros(y.shape + x.shape)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        jac[(...,) + i] = (np.asarray(f(x + d)) - np.asarray(f(x - d))) / (2 * eps)
    return jac


# --- nd.compile(static_argnums=..., static_argnames=...) -------------------------------------

def test_static_argnums_are_python_values_in_the_cache_key():
    seen = []

    @nd.compile(static_argnums=(1,))
    def f(x, flag):
        seen.append(flag)          # runs once per traced signature
        return x * 2.0 if flag else x - 1.0   # `if` on a static value

    x = nd.create([1.0, 2.0])
    assert f(x, True).numpy().tolist() == [2.0, 4.0]
    assert f(x, False).numpy().tolist() == [0.0, 1.0]
    assert f(x, True).numpy().tolist() == [2.0, 4.0]   # replayed, not retraced
    assert seen == [True, False] and f.cache_info()["traces"] == 2


def test_static_argnames_decorator_factory_and_either_spelling():
    @nd.compile(static_argnames=("n",))
    def power(x, n):
        for _ in range(n - 1):     # a Python loop over a static value
            x = x * x
        return x

    x = nd.create([2.0])
    assert power(x, n=3).numpy().tolist() == [16.0]
    assert power(x, 2).numpy().tolist() == [4.0]     # the name also covers its position
    assert nd.compile(lambda x, k: x * float(k), static_argnums=1)(x, k=3).item() == 6.0


def test_static_argnums_on_a_method_count_self():
    class Scale:
        @nd.compile(static_argnums=(2,))
        def apply(self, x, k):
            return x * float(k)

    assert Scale().apply(nd.create([1.0, 2.0]), 3).numpy().tolist() == [3.0, 6.0]


@pytest.mark.parametrize("value, match", [([1, 2], "hashable"), (np.ones(2), "is an array"),
                                          (nd.ones(2), "is an array")])
def test_unhashable_or_array_static_argument_is_a_named_type_error(value, match):
    f = nd.compile(lambda x, n: x, static_argnums=1)
    with pytest.raises(TypeError, match=match) as info:
        f(nd.create([1.0]), value)
    assert "static argument n" in str(info.value)
    assert f.cache_info()["signatures"] == 0     # nothing traced, nothing kept


@pytest.mark.parametrize("spec, match", [
    ({"static_argnums": 2}, "out of range"),
    ({"static_argnums": -3}, "out of range"),
    ({"static_argnames": "flg"}, "did you mean 'flag'"),
    ({"static_argnums": "1"}, "takes ints"),
])
def test_bad_static_spec_fails_at_decoration(spec, match):
    def f(x, flag):
        return x
    with pytest.raises(ConfigError, match=match):
        nd.compile(f, **spec)


# --- nd.stop_gradient ---------------------------------------------------------------------------

def test_stop_gradient_is_the_identity_forward_and_a_fresh_array():
    x = nd.create([1.0, -2.0, 3.0])
    y = nd.stop_gradient(x)
    assert y.numpy().tolist() == [1.0, -2.0, 3.0] and y.dtype == x.dtype
    assert not np.shares_memory(y.numpy(), x.numpy())
    assert x.stopGradient().numpy().tolist() == [1.0, -2.0, 3.0]   # ND4J spelling
    op = REGISTRY["stop_gradient"]
    assert op.elementwise and op.exact and op.scalar(None, "v") == "(v)" and op.stops_gradient


def test_stop_gradient_in_nd_grad():
    x = nd.create([1.0, 2.0, 3.0], dtype=nd.DOUBLE)
    # d/dx sum(x * sg(x)) = sg(x) = x (not 2x); a function only of sg(x) has zero gradient
    assert nd.grad(lambda x: (x * nd.stop_gradient(x)).sum())(x).numpy().tolist() == [1, 2, 3]
    assert nd.grad(lambda x: nd.stop_gradient(x).sum())(x).numpy().tolist() == [0, 0, 0]
    traced = nd.compile(nd.grad(lambda x: (x * nd.stop_gradient(x)).sum()))
    assert traced(x).numpy().tolist() == [1.0, 2.0, 3.0]


def test_stop_gradient_in_samediff():
    sd = SameDiff.create()
    v = sd.var("v", np.array([1.0, 2.0]))
    (v * sd.stop_gradient(v) + sd.base.stopGradient(v * 3.0)).sum().mark_as_loss()
    np.testing.assert_array_equal(sd.calculate_gradients({}, "v")["v"].numpy(), [1.0, 2.0])


@pytest.mark.parametrize("name", [n for n, op in REGISTRY.items() if op.stops_gradient])
def test_ops_that_stop_gradients_have_zero_gradients(name):
    """Flagged ops are left out of the finite-difference suite (their gradient is a definition,
    not the derivative); this is their check instead."""
    x = nd.create(RNG.standard_normal(3))
    g = nd.grad(lambda x: (getattr(nd, name)(x) * x).sum())(x)
    np.testing.assert_array_equal(g.numpy(), x.numpy())


# --- if / float() on a traced value: one error, in nd.grad as in nd.compile ----------------------

def _branchy(x):
    if x.sum() > 0:
        return (x * x).sum()
    return x.sum()


@pytest.mark.parametrize("read", [bool, float, int, lambda v: v.item(), lambda v: [0, 1][v]],
                         ids=["bool", "float", "int", "item", "index"])
def test_reading_a_value_inside_grad_raises_the_tracing_error(read):
    x = nd.create([1.0, 2.0])
    with pytest.raises(ConcretizationError) as info:
        nd.grad(lambda x: x.sum() * float(read(x.sum())))(x)
    assert isinstance(info.value, TracingError) and isinstance(info.value, TypeError)
    message = str(info.value)
    assert message.startswith("cannot read the data of a traced array (produced by sum")
    assert "inside nd.grad of <lambda>" in message and "nd.where(cond, a, b)" in message
    assert "GraphValue" not in message
    assert nd.grad(lambda x: x.sum())(x).numpy().tolist() == [1.0, 1.0]   # nothing left behind


def test_grad_and_compile_give_the_same_error():
    x = nd.create([1.0, 2.0])
    with pytest.raises(ConcretizationError) as in_grad:
        nd.grad(_branchy)(x)
    with pytest.raises(ConcretizationError) as in_compile:
        nd.compile(_branchy)(x)
    head = "cannot read the data of a traced array (produced by gt (node 1)"
    remedies = ("nd.where(cond, a, b) or nd.cond(pred, true_fn, false_fn, *operands) instead "
                "of `if`", "nd.fori_loop, nd.while_loop or nd.scan instead of a Python loop")
    for info in (in_grad, in_compile):
        assert str(info.value).startswith(head)
        assert all(remedy in str(info.value) for remedy in remedies)


def test_a_python_loop_over_a_traced_count_names_the_loop_ops():
    @nd.compile
    def f(n, x):
        for _ in range(n):  # the count is traced: its value is unknown while tracing
            x = x * 2.0
        return x
    with pytest.raises(ConcretizationError, match="nd.fori_loop, nd.while_loop or nd.scan"):
        f(nd.create(3), nd.create([1.0]))


def test_samediff_variables_keep_their_type_error():
    sd = SameDiff.create()
    v = sd.var("v", np.array([1.0]))
    with pytest.raises(TypeError, match="ambiguous.*v.eval()"):
        bool(v > 0.0)
    with pytest.raises(ConcretizationError, match=r"variable 'v'.*float\(\)"):
        float(v)


# --- nd.jacrev / nd.jacfwd / nd.hessian ---------------------------------------------------------

FUNCTIONS = {
    "tanh_matmul": (lambda x: nd.math.tanh(nd.create(W) @ x), lambda x: np.tanh(W @ x)),
    "softmax": (lambda x: nd.nn.softmax(x), lambda x: np.exp(x) / np.exp(x).sum()),
    "reduction": (lambda x: (x * x).sum() * 0.5 + nd.math.log_sum_exp(x, 0),
                  lambda x: (x * x).sum() * 0.5 + np.log(np.exp(x).sum())),
}


@pytest.mark.parametrize("jac", [nd.jacrev, nd.jacfwd], ids=["jacrev", "jacfwd"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_jacobians_match_finite_differences(jac, name):
    f, ref = FUNCTIONS[name]
    got = jac(f)(nd.create(X)).numpy()
    want = numeric_jacobian(ref, X)
    assert got.shape == want.shape == np.shape(ref(X)) + X.shape
    np.testing.assert_allclose(got, want, atol=1e-8)


def test_jacobian_of_a_compiled_call_is_one_plan():
    f, ref = FUNCTIONS["tanh_matmul"]
    compiled = nd.compile(nd.jacrev(f))
    np.testing.assert_allclose(compiled(nd.create(X)).numpy(), numeric_jacobian(ref, X),
                               atol=1e-8)
    compiled(nd.create(X * 2.0))
    assert compiled.cache_info()["traces"] == 1


def test_hessian_matches_finite_differences_and_composes():
    f = lambda x: nd.math.tanh(nd.create(W) @ x).sum()  # noqa: E731
    h = nd.hessian(f)(nd.create(X)).numpy()
    # finite differences of the closed-form gradient W^T (1 - tanh(W x)^2)
    want = numeric_jacobian(lambda x: W.T @ (1.0 - np.tanh(W @ x) ** 2), X)
    np.testing.assert_allclose(h, want, atol=1e-8)
    np.testing.assert_allclose(h, h.T, atol=1e-14)
    np.testing.assert_allclose(nd.jacrev(nd.jacrev(f))(nd.create(X)).numpy(), h, atol=1e-14)
    np.testing.assert_allclose(nd.compile(nd.hessian(f))(nd.create(X)).numpy(), h, atol=1e-12)


def test_tuple_argnums_structures_and_zero_blocks():
    a, b = nd.create([1.0, 2.0], dtype=nd.DOUBLE), nd.create([3.0], dtype=nd.DOUBLE)
    ja, jb = nd.jacfwd(lambda a, b: a * b, argnums=(0, 1))(a, b)
    assert ja.numpy().tolist() == [[3.0, 0.0], [0.0, 3.0]] and jb.numpy().tolist() == [[1.0], [2.0]]
    # f is linear in b: the (b, b) block is zero (a gradient constant in b, not an error)
    h = nd.hessian(lambda a, b: (a * a * b).sum(), argnums=(0, 1))(a, b)
    assert [[blk.shape for blk in row] for row in h] == [[(2, 2), (2, 1)], [(1, 2), (1, 1)]]
    assert h[0][1].numpy().tolist() == [[2.0], [4.0]] and h[1][1].numpy().tolist() == [[0.0]]
    # dict arguments and tuple outputs: outputs outside, arguments inside (as in JAX)
    jac = nd.jacrev(lambda p: (p["a"] * 2.0, p["b"].sum()))({"a": a, "b": b})
    assert jac[0]["a"].shape == (2, 2) and jac[0]["b"].shape == (2, 1)
    assert jac[1]["a"].shape == (2,) and jac[1]["b"].numpy().tolist() == [1.0]
    assert nd.jacrev(lambda x: x[:0])(a).shape == (0, 2)


def test_second_derivative_of_a_linear_function_is_zero():
    """The inner gradient depends on x only through shapes (ones_like, broadcast_like): zero,
    as in JAX, not "no gradient for 'arg0'"."""
    x = nd.create([1.0, 2.0])
    assert nd.grad(lambda x: nd.grad(lambda z: z.sum())(x).sum())(x).numpy().tolist() == [0, 0]


def test_jacobian_errors_are_named():
    x = nd.create([1.0, 2.0])
    with pytest.raises(GradientError, match="jacrev of <lambda>: the function returned a int32"):
        nd.jacrev(lambda x: x.cast(nd.INT))(x)
    with pytest.raises(GradientError, match="jacfwd: argnums must be"):
        nd.jacfwd(lambda x: x, argnums="0")
