"""Gradient rules of the elementwise ops and reductions, checked against finite differences.

One record per (op, inputs, attrs): a float64 graph ``sum(op(vars) * W)`` with a fixed random
``W`` must pass ``check_gradients``. Inputs stay away from the points where an op is not smooth;
the conventions at those points (ties, kinks, zeros) have their own explicit tests.
"""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.gradcheck import check_gradients
from samediff.ops import REGISTRY
from samediff.ops.registry import NONDIFF

RNG = np.random.default_rng(7)


def away(shape=(3, 4), lo=-2.0, hi=2.0, avoid=(0.0,), gap=0.15):
    """Uniform values in [lo, hi] at least ``gap`` from every point of ``avoid``."""
    x = RNG.uniform(lo, hi, shape)
    for _ in range(100):
        bad = np.zeros(x.shape, bool)
        for a in avoid:
            bad |= np.abs(x - a) < gap
        if not bad.any():
            return x
        x[bad] = RNG.uniform(lo, hi, int(bad.sum()))
    raise AssertionError("could not sample away from the avoided points")


def pos(shape=(3, 4), lo=0.5, hi=2.0):
    return RNG.uniform(lo, hi, shape)


def distinct(shape=(3, 4)):
    """Values with no ties (max/min reductions), well separated."""
    n = int(np.prod(shape))
    return (RNG.permutation(n) * 0.37 - 2.0).reshape(shape) + RNG.uniform(0, 0.05, shape)


class Const:
    """An input given to the graph as a constant (never checked)."""

    def __init__(self, value):
        self.value = value


def case(op, *inputs, id=None, **attrs):
    return pytest.param(op, list(inputs), attrs, id=id or op)


UNARY = [
    case("neg", away()), case("abs", away()), case("exp", away()), case("expm1", away()),
    case("log", pos()), case("log1p", pos(lo=-0.5)), case("sqrt", pos()), case("rsqrt", pos()),
    case("square", away()), case("reciprocal", away(gap=0.4)), case("sin", away()),
    case("cos", away()), case("tan", away(lo=-1.2, hi=1.2)), case("asin", away(lo=-0.8, hi=0.8)),
    case("acos", away(lo=-0.8, hi=0.8)), case("atan", away()), case("sinh", away()),
    case("cosh", away()), case("tanh", away()), case("erf", away()),
    case("sigmoid", away(lo=-4, hi=4)), case("softplus", away(lo=-4, hi=4)),
    case("log_sigmoid", away(lo=-4, hi=4)), case("swish", away(lo=-4, hi=4)),
    case("softsign", away()),
    case("relu", away()), case("relu", away(avoid=(0.5,)), cutoff=0.5, id="relu-cutoff"),
    case("relu6", away(lo=-2, hi=8, avoid=(0.0, 6.0))),
    case("hard_tanh", away(avoid=(-1.0, 1.0))),
    case("hard_sigmoid", away(lo=-4, hi=4, avoid=(-2.5, 2.5))),
    case("leaky_relu", away()), case("leaky_relu", away(), alpha=0.3, id="leaky_relu-alpha"),
    case("elu", away()), case("elu", away(), alpha=0.5, id="elu-alpha"), case("selu", away()),
    case("gelu", away(lo=-3, hi=3), approximate=True, id="gelu-tanh"),
    case("gelu", away(lo=-3, hi=3), approximate=False, id="gelu-erf"),
    case("clip_by_value", away(avoid=(-0.5, 0.5)), clip_min=-0.5, clip_max=0.5),
    case("cast", away(), dtype="float32"),
    # piecewise constant: documented zero gradient (finite differences agree away from jumps)
    case("sign", away()), case("floor", away(avoid=np.arange(-2, 3))),
    case("ceil", away(avoid=np.arange(-2, 3))), case("round", away(avoid=np.arange(-2.5, 3, 0.5))),
]

BINARY = [
    case("add", away(), away((4,))), case("sub", away(), away((3, 1))),
    case("rsub", away(), away()), case("mul", away(), away((4,))),
    case("div", away(), away((4,), gap=0.5)), case("rdiv", away(gap=0.5), away((3, 1))),
    case("pow", pos(), away()), case("pow", away(), Const(3.0), id="pow-negative-base"),
    case("pow", pos((3, 1)), away((4,)), id="pow-broadcast"),
    case("maximum", distinct(), distinct()), case("minimum", distinct(), distinct((4,))),
    case("floor_mod", np.array([[1.3, -2.2, 3.7, 0.4], [5.1, -0.3, 2.6, -4.9]]),
         np.array([0.7, 1.3, -1.1, 2.3])),
    case("floor_div", np.array([[1.3, -2.2, 3.7, 0.4]]), np.array([0.7, 1.3, -1.1, 2.3])),
    case("atan2", away(), away((4,))), case("squared_difference", away(), away((3, 1))),
    case("where", Const(RNG.random((3, 4)) > 0.5), away(), away((4,))),
]


def _reduction_cases():
    out = []
    dims_list = [None, (0,), (1,), (-1,), (0, 1)]
    values = {"sum": away, "mean": away, "prod": lambda: away(lo=-1.5, hi=1.5, gap=0.3),
              "max": distinct, "min": distinct, "variance": away, "std": away,
              "norm1": away, "norm2": away, "norm_max": distinct, "log_sum_exp": away}
    for op, make in values.items():
        for dims in dims_list:
            for keep in (False, True):
                out.append(case(op, make(), dims=dims, keep_dims=keep,
                                id=f"{op}-{dims}-{'keep' if keep else 'drop'}"))
    for op in ("variance", "std"):
        for dims in (None, (1,)):
            out.append(case(op, away(), dims=dims, bias_corrected=True,
                            id=f"{op}-{dims}-corrected"))
    rank3 = (2, 3, 2)  # non-adjacent reduced dims: expand_dims order matters
    for op in ("sum", "mean", "prod", "max", "variance", "norm2", "log_sum_exp"):
        make = distinct if op == "max" else away
        out.append(case(op, make(rank3), dims=(0, 2), id=f"{op}-rank3"))
        out.append(case(op, make(rank3), dims=(2, 0), id=f"{op}-rank3-unsorted"))
    out.append(case("sum", np.array(1.5), id="sum-scalar"))
    out.append(case("prod", np.array(1.5), id="prod-scalar"))
    return out


def _scan_cases():
    out = []
    for op in ("cumsum", "cumprod"):
        for axis in (0, 1, -1):
            for exclusive in (False, True):
                for reverse in (False, True):
                    x = away(lo=-1.5, hi=1.5, gap=0.4)
                    out.append(case(op, x, axis=axis, exclusive=exclusive, reverse=reverse,
                                    id=f"{op}-{axis}-{'ex' if exclusive else 'in'}-"
                                       f"{'rev' if reverse else 'fwd'}"))
    return out


def build(op, inputs, attrs):
    sd = SameDiff.create()
    args = [sd.constant(f"c{i}", x.value) if isinstance(x, Const) else sd.var(f"x{i}", x)
            for i, x in enumerate(inputs)]
    out = getattr(sd.all_ops, op)(*args, **attrs)
    w = sd.constant("W", RNG.standard_normal(out.shape))
    (out.cast(nd.DOUBLE) * w).sum().mark_as_loss()
    return sd


@pytest.mark.parametrize("op, inputs, attrs", UNARY + BINARY + _reduction_cases() + _scan_cases())
def test_gradient_matches_finite_differences(op, inputs, attrs):
    result = check_gradients(build(op, inputs, attrs))
    assert result.passed, str(result)


def test_every_elementwise_op_and_reduction_is_covered():
    def reduction_family(op):
        return op.infer.__qualname__.split(".")[0] in ("reduction", "_arg_reduction", "_cum_op")

    ops = {p.values[0] for p in UNARY + BINARY + _reduction_cases() + _scan_cases()}
    mine = {name for name, op in REGISTRY.items()
            if op.namespace != "udf" and (op.elementwise or reduction_family(op))}
    assert mine - ops - set(NONDIFFERENTIABLE) == set()


NONDIFFERENTIABLE = ["eq", "neq", "gt", "gte", "lt", "lte", "logical_and", "logical_or",
                     "logical_xor", "logical_not", "isnan", "isinf", "isfinite", "argmax",
                     "argmin", "all", "any"]


@pytest.mark.parametrize("op", NONDIFFERENTIABLE)
def test_bool_and_integer_ops_are_nondifferentiable(op):
    assert REGISTRY[op].grad is NONDIFF


@pytest.mark.parametrize("op", ["sign", "floor", "ceil", "round"])
def test_piecewise_constant_ops_have_zero_gradient(op):
    sd = SameDiff.create()
    v = sd.var("v", np.array([0.0, 1.0, -2.5, 0.3]))   # includes the jumps themselves
    getattr(sd.math, op)(v).sum().mark_as_loss()
    np.testing.assert_array_equal(sd.calculate_gradients({}, "v")["v"].numpy(), 0.0)


# --- conventions at non-smooth points -----------------------------------------------------------

def grad_of(fn, *values):
    sd = SameDiff.create()
    vs = [sd.var(f"v{i}", np.asarray(v, dtype=np.float64)) for i, v in enumerate(values)]
    fn(sd, *vs).sum().mark_as_loss()
    grads = sd.calculate_gradients({}, *[v.name for v in vs])
    out = [grads[v.name].numpy() for v in vs]
    return out if len(out) > 1 else out[0]


def test_kinks_follow_pytorch():
    x = [-1.0, 0.0, 1.0, 6.0, 2.5, -2.5]
    np.testing.assert_array_equal(grad_of(lambda sd, v: sd.math.abs(v), x), [-1, 0, 1, 1, 1, -1])
    np.testing.assert_array_equal(grad_of(lambda sd, v: sd.nn.relu(v), x), [0, 0, 1, 1, 1, 0])
    np.testing.assert_array_equal(grad_of(lambda sd, v: sd.nn.relu6(v), x), [0, 0, 1, 0, 1, 0])
    np.testing.assert_array_equal(grad_of(lambda sd, v: sd.nn.hard_tanh(v), x), [0, 1, 0, 0, 0, 0])
    np.testing.assert_allclose(grad_of(lambda sd, v: sd.nn.hard_sigmoid(v), x),
                               [0.2, 0.2, 0.2, 0, 0, 0])
    np.testing.assert_allclose(grad_of(lambda sd, v: sd.nn.leaky_relu(v, 0.1), x),
                               [0.1, 0.1, 1, 1, 1, 0.1])
    np.testing.assert_allclose(grad_of(lambda sd, v: sd.nn.elu(v), [0.0]), [1.0])
    # clip_by_value passes the gradient on the closed interval (torch.clamp)
    np.testing.assert_array_equal(
        grad_of(lambda sd, v: sd.math.clip_by_value(v, -1.0, 1.0), x), [1, 1, 1, 0, 0, 0])


def test_maximum_minimum_split_ties_equally():
    gx, gy = grad_of(lambda sd, a, b: sd.math.maximum(a, b), [1.0, 2.0, 3.0], [1.0, 3.0, 0.0])
    np.testing.assert_array_equal(gx, [0.5, 0.0, 1.0])
    np.testing.assert_array_equal(gy, [0.5, 1.0, 0.0])
    gx, gy = grad_of(lambda sd, a, b: sd.math.minimum(a, b), [1.0, 2.0, 3.0], [1.0, 3.0, 0.0])
    np.testing.assert_array_equal(gx, [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(gy, [0.5, 0.0, 1.0])


def test_max_min_norm_max_reductions_share_ties():
    x = [[3.0, 1.0, 3.0, 3.0], [-2.0, 5.0, -5.0, 0.0]]
    np.testing.assert_allclose(grad_of(lambda sd, v: v.max(1), x),
                               [[1 / 3, 0, 1 / 3, 1 / 3], [0, 1, 0, 0]])
    np.testing.assert_allclose(grad_of(lambda sd, v: v.min(0), x),
                               [[0, 1, 0, 0], [1, 0, 1, 1]])
    np.testing.assert_allclose(grad_of(lambda sd, v: sd.base.norm_max(v, 1), x),
                               [[1 / 3, 0, 1 / 3, 1 / 3], [0, 0.5, -0.5, 0]])


def test_pow_exponent_gradient_is_zero_for_nonpositive_bases():
    gx, gy = grad_of(lambda sd, a, b: a ** b, [-2.0, 0.0, 0.0, 2.0], [2.0, 2.0, 0.0, 3.0])
    np.testing.assert_allclose(gx, [-4.0, 0.0, 0.0, 12.0])
    np.testing.assert_allclose(gy, [0.0, 0.0, 0.0, 8.0 * np.log(2.0)])


def test_norm2_and_std_are_zero_at_zero():
    np.testing.assert_array_equal(grad_of(lambda sd, v: sd.base.norm2(v), [0.0, 0.0]), [0, 0])
    np.testing.assert_array_equal(grad_of(lambda sd, v: sd.base.std(v), [1.5, 1.5]), [0, 0])


@pytest.mark.parametrize("x", [[[2.0, 0.0, -1.5], [0.5, 3.0, 1.2]],
                               [[2.0, 0.0, 0.0], [0.0, 3.0, 1.2]]], ids=["one-zero", "zeros"])
@pytest.mark.parametrize("dims", [None, (0,), (1,)])
def test_prod_is_exact_with_zeros(x, dims):
    # the gradient is the product of the *other* elements: no division by zero
    x = np.array(x)
    sd = build("prod", [x], {"dims": dims})
    result = check_gradients(sd)
    assert result.passed, str(result)
    g = grad_of(lambda sd, v: v.prod(dims=dims), x)
    assert np.all(np.isfinite(g))


# --- unknown (-1) dims -------------------------------------------------------------------------

DYNAMIC = [
    ("add", lambda sd, x, b: x + b), ("mul", lambda sd, x, b: x * b),
    ("div", lambda sd, x, b: x / (b * b + 1.0)), ("pow", lambda sd, x, b: sd.math.abs(x) ** b),
    ("maximum", lambda sd, x, b: sd.math.maximum(x, b)),
    ("atan2", lambda sd, x, b: sd.math.atan2(x, b)),
    ("where", lambda sd, x, b: sd.base.where(x > 0.0, x * b, b)),
    ("sum-drop", lambda sd, x, b: (x * b).sum(0)),
    ("mean-drop", lambda sd, x, b: (x * b).mean(0)),
    ("variance-all", lambda sd, x, b: sd.base.variance(x * b, bias_corrected=True)),
    ("std-drop", lambda sd, x, b: sd.base.std(x * b, 0)),
    ("max-drop", lambda sd, x, b: (x * b).max(0)),
    ("prod-keep", lambda sd, x, b: (x * b).prod(0, keep_dims=True)),
    ("log_sum_exp", lambda sd, x, b: sd.math.log_sum_exp(x * b, 0)),
    ("cumprod", lambda sd, x, b: sd.base.cumprod(x * b, axis=0, reverse=True)),
]


@pytest.mark.parametrize("fn", [f for _, f in DYNAMIC], ids=[n for n, _ in DYNAMIC])
def test_unknown_batch_dim(fn):
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.DOUBLE, -1, 3)
    b = sd.var("b", np.array([0.7, -1.3, 1.1]))
    out = fn(sd, x, b)
    w = sd.constant("W", np.array([0.3, -0.8, 1.7]))
    (out * w).sum().mark_as_loss()
    for batch in (1, 4):
        feeds = {"x": away((batch, 3), gap=0.3)}
        g = sd.calculate_gradients(feeds, "b")["b"]
        assert g.shape == (3,)
        result = check_gradients(sd, feeds, ["b", "x"])
        assert result.passed, str(result)


# --- second derivatives: rules are written with table ops -------------------------------------

@pytest.mark.parametrize("op", ["tanh", "sigmoid", "exp", "sin", "softplus", "erf", "gelu",
                                "swish", "elu", "log_sigmoid", "rsqrt", "atan"])
def test_second_derivative(op):
    sd = SameDiff.create()
    x = sd.var("x", away((5,), lo=0.3, hi=2.0) * np.array([1, -1, 1, -1, 1]) if op != "rsqrt"
               else pos((5,)))
    (getattr(sd.all_ops, op)(x) * sd.constant("W", RNG.standard_normal(5))).sum().mark_as_loss()
    g = x.gradient()
    sd.set_loss_variables((g * sd.constant("W2", RNG.standard_normal(5))).sum(name="gl"))
    result = check_gradients(sd)
    assert result.passed, str(result)
