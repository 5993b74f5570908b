"""Gradient rules of the elementwise ops and reductions, checked against finite differences.

One record per (op, inputs, attrs): a float64 graph ``sum(op(vars) * W)`` with a fixed random
``W`` must pass ``check_gradients``. The records come from the op table: every op flagged
``elementwise`` or ``reduction`` that is differentiable is checked on each of its ``smooth``
float samples in ``op_samples.py`` (reductions over every kind of ``dims``), and its second
derivative too. Smooth samples stay away from the points where an op is not smooth; the
conventions at those points (ties, kinks, zeros) have their own explicit tests below.
"""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.gradcheck import check_gradients
from samediff.ops import REGISTRY, TensorType
from samediff.ops.registry import NONDIFF

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_samples import SAMPLES, expected_dtype
except ImportError:  # ... or tests/ became one
    from tests.op_samples import SAMPLES, expected_dtype

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


class Const:
    """An input given to the graph as a constant (never checked)."""

    def __init__(self, value):
        self.value = value


def case(op, *inputs, id=None, **attrs):
    return pytest.param(op, list(inputs), attrs, id=id or op)


# --- cases from the op table: every smooth float sample of a differentiable elementwise op or
# reduction (flags, not names: a new op is checked through its row in op_samples.py) ---------

def _family(op) -> bool:
    return op.namespace != "udf" and (op.elementwise or op.reduction)


FAMILY = sorted(n for n, op in REGISTRY.items() if _family(op))
# stop_gradient's zero gradient is a definition, not its derivative: tests/test_jax_expectations.py
DIFFERENTIABLE = [n for n in FAMILY
                  if REGISTRY[n].grad is not NONDIFF and not REGISTRY[n].stops_gradient]


def checkable(sample) -> bool:
    """A smooth sample that runs in a float dtype and gives a float result."""
    floats = [d for d in sample.dtypes if d.startswith("float")]
    return sample.smooth and bool(floats) and expected_dtype(sample, floats[-1]).kind == "f"


def graph_inputs(sample) -> list:
    """Float arrays become checked variables (float64); masks/indices stay constants, Python
    scalars stay weak literals."""
    return [x.astype(np.float64) if isinstance(x, np.ndarray) and x.dtype.kind == "f"
            else Const(x) if isinstance(x, np.ndarray) else x for x in sample.inputs]


def _sample_cases():
    out = []
    for name in DIFFERENTIABLE:
        if REGISTRY[name].reduction:
            continue  # swept over dims below
        for i, s in enumerate(SAMPLES.get(name, ())):
            if checkable(s):
                out.append(case(name, *graph_inputs(s), id=f"{name}-sample{i}", **s.attrs))
    return out


def _reduction_cases():
    """Each differentiable reduction over every kind of ``dims``, on its first smooth sample's
    input (rank 3), plus a scalar; ``bias_corrected`` too where the op has it."""
    out = []
    dims_list = [None, (0,), (1,), (-1,), (0, 2), (2, 0)]
    for name in DIFFERENTIABLE:
        op = REGISTRY[name]
        if not op.reduction:
            continue
        x = next(s.inputs[0] for s in SAMPLES[name] if checkable(s)).astype(np.float64)
        assert x.ndim == 3, f"{name}: the first smooth sample should be rank 3"
        for dims in dims_list:
            for keep in (False, True):
                out.append(case(name, x, dims=dims, keep_dims=keep,
                                id=f"{name}-{dims}-{'keep' if keep else 'drop'}"))
        if "bias_corrected" in op.attr_kinds:
            for dims in (None, (1,)):
                out.append(case(name, x, dims=dims, bias_corrected=True,
                                id=f"{name}-{dims}-corrected"))
        out.append(case(name, x[0, 0, :1].reshape(()), id=f"{name}-scalar"))
    return out


def _scan_cases():
    """The scans (neither elementwise nor reductions) over their own attributes."""
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
    args = [sd.constant(f"c{i}", x.value) if isinstance(x, Const)
            else sd.var(f"x{i}", x) if isinstance(x, np.ndarray) else x  # scalars stay weak
            for i, x in enumerate(inputs)]
    out = getattr(sd.all_ops, op)(*args, **attrs)
    w = sd.constant("W", RNG.standard_normal(out.shape))
    (out.cast(nd.DOUBLE) * w).sum().mark_as_loss()
    return sd


CASES = _sample_cases() + _reduction_cases() + _scan_cases()


@pytest.mark.parametrize("op, inputs, attrs", CASES)
def test_gradient_matches_finite_differences(op, inputs, attrs):
    result = check_gradients(build(op, inputs, attrs))
    assert result.passed, str(result)


def test_every_differentiable_elementwise_op_and_reduction_is_covered():
    missing = set(DIFFERENTIABLE) - {p.values[0] for p in CASES}
    assert not missing, (f"differentiable ops without a smooth float sample in op_samples.py "
                         f"(finite differences need one): {sorted(missing)}")


@pytest.mark.parametrize("op", [n for n in FAMILY if REGISTRY[n].grad is NONDIFF])
def test_nondifferentiable_ops_have_bool_or_integer_results(op):
    """An elementwise op or reduction is NONDIFF exactly when its result cannot carry a
    gradient; float-valued piecewise-constant ops have a zero gradient instead."""
    opdef = REGISTRY[op]
    types = [TensorType((2, 3), np.dtype(np.float64))] * opdef.min_inputs
    (out,) = opdef.infer_types(types, opdef.default_attrs)
    assert out.dtype.kind in "biu", f"{op} gives {out.dtype} but is marked non-differentiable"


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

def _second_derivative_cases():
    """Every differentiable one-input elementwise op, on its first smooth sample."""
    out = []
    for name in DIFFERENTIABLE:
        op = REGISTRY[name]
        if not op.elementwise or len(op.inputs) != 1:
            continue
        i, s = next((i, s) for i, s in enumerate(SAMPLES[name]) if checkable(s))
        out.append(case(name, *graph_inputs(s), id=f"{name}-sample{i}", **s.attrs))
    return out


@pytest.mark.parametrize("op, inputs, attrs", _second_derivative_cases())
def test_second_derivative(op, inputs, attrs):
    """Rules are written with table ops, so the gradient is differentiable again."""
    sd = SameDiff.create()
    (x,) = [sd.var("x", v) for v in inputs]
    y = getattr(sd.all_ops, op)(x, **attrs).cast(nd.DOUBLE)
    (y * sd.constant("W", RNG.standard_normal(y.shape))).sum().mark_as_loss()
    g = x.gradient()  # (times x: a loss that depends on x even where g does not)
    sd.set_loss_variables((g * x * sd.constant("W2", RNG.standard_normal(g.shape))).sum(name="gl"))
    result = check_gradients(sd)
    assert result.passed, str(result)
