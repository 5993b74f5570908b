"""Edge values: every executor gives the same, documented answer (fixed regression cases).

Executors: eager, ``graph_scope`` run by the interpreter, ``graph_scope`` compiled (fused
kernels), and ``@nd.compile`` (compiled). The differential hypothesis suite
(``test_compiler_hypothesis.py``) draws such values into random graphs; these cases pin the
answers themselves, one per defect the fuzzer found:

* softmax / log_softmax over a size-0 axis: an empty result (numpy's max used to raise in
  eager and the interpreter while the row kernel returned an empty array); layer_norm too;
* reductions over empty axes follow numpy everywhere: sum 0, prod 1, mean NaN, max/min a
  named ``OpError`` (the fused kernel leaves that case to the interpreter);
* softmax / log_softmax of a row holding +inf or NaN: NaN throughout (as torch, JAX and
  SciPy); -inf entries give 0 (log_softmax: -inf); an all -inf row is 0/0 = NaN. Eager used to
  give [nan, 0, 0] for [inf, 0, 1] where the kernel gave NaN throughout;
* log_softmax next to a huge max keeps log(sum): [1e30, 1e30] is log(0.5), not 0 (the row
  kernel used to form x - (max + log(sum)));
* activations at +-inf give their limits: gelu/swish(-inf) = -0.0 (was NaN eagerly, -0.0
  compiled; float64 kernels gave NaN too), softsign(+-inf) = +-1 (NaN everywhere before); the
  gelu gradient is 0 / 1 there (was NaN);
* layer_norm of float32 rows above ~1.8e19: statistics in float64 (the eager float32 variance
  overflowed, giving 0), forward and gradient;
* float32 sums whose partial sums overflow (sum([3e38, 3e38, -3e38]) = 3e38): numpy's float32
  accumulator gave inf, the kernels' float64 accumulator did not.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import nd4py as nd
from samediff import compiler
from samediff.compiler import plan as cplan
from samediff.gradcheck import check_gradients

try:  # rootdir-relative import (tests/ is not a package) ...
    from edge_values import INF, NAN, masks_equal
except ImportError:  # ... or tests/ became one
    from tests.edge_values import INF, NAN, masks_equal

pytestmark = [pytest.mark.compiled, pytest.mark.filterwarnings("ignore::RuntimeWarning"),
              pytest.mark.filterwarnings("ignore::tracing.RetraceWarning")]

EXECUTORS = ("eager", "interpreter", "compiled", "nd.compile")
DTYPES = ("float32", "float64")


def run(fn, arrays: list, executor: str):
    """``fn(*arrays)`` (a tuple of outputs, or one) as numpy arrays, or the exception raised."""
    previous = compiler.set_executor("interpreter" if executor == "interpreter" else "compiled")
    try:
        with np.errstate(all="ignore"):
            xs = [nd.create(a) for a in arrays]
            if executor == "eager":
                out = fn(*xs)
            elif executor == "nd.compile":
                out = nd.compile(fn)(*xs)
            else:
                with nd.graph_scope(f"test_edge_values {executor}"):
                    out = fn(*xs)
        return [o.numpy() for o in out] if isinstance(out, (tuple, list)) else out.numpy()
    except nd.NdError as exc:
        return exc
    finally:
        compiler.set_executor(previous)


def all_executors(fn, *arrays) -> dict:
    return {ex: run(fn, list(arrays), ex) for ex in EXECUTORS}


def fused_kinds(fn, *arrays) -> list[str]:
    """The kernel step classes of ``fn``'s compiled plan (``RowStep``, ``ReduceStep``...), to
    make sure a case really runs through the fused kernels it is about."""
    previous = compiler.set_executor("compiled")
    try:
        with np.errstate(all="ignore"), nd.graph_scope("test_edge_values plan") as scope:
            out = fn(*[nd.create(a) for a in arrays])  # held: only live arrays are planned
    finally:
        compiler.set_executor(previous)
    kernels = [s for s in scope.plan.steps if isinstance(s, cplan.KernelStep)]
    assert all(s.kernels is not None for s in kernels), scope.plan.explain()
    del out
    return [type(s).__name__ for s in kernels]


def assert_all(results: dict, want, rtol: float = 0.0, signs: bool = False) -> None:
    """Every executor's result equals ``want`` (NaN/inf positions exactly, other values within
    ``rtol``; the sign of zeros too with ``signs``)."""
    for ex, got in results.items():
        assert not isinstance(got, Exception), f"{ex} raised {got!r}"
        want_a = np.asarray(want, got.dtype)
        assert got.shape == want_a.shape, f"{ex}: shape {got.shape}, want {want_a.shape}"
        masks_equal(got, want_a, ex)
        np.testing.assert_allclose(got, want_a, rtol=rtol, atol=0, equal_nan=True, err_msg=ex)
        if signs:
            zeros = want_a == 0
            np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want_a[zeros]),
                                          err_msg=f"{ex}: sign of zero")


# --------------------------------------------------------------------------------------------
# Zero-size dims
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("anchor", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, dim", [((3, 0), -1), ((0,), -1), ((0, 4), -1), ((2, 0, 4), 1)])
def test_softmax_over_an_empty_axis_is_empty(anchor: str, shape: tuple, dim: int) -> None:
    """Nothing to normalize: an empty result of x's shape and dtype (as torch and JAX), with
    a prologue and an epilogue around the anchor (one row kernel for the last axis)."""
    def fn(x):
        return getattr(nd, anchor)(x * 2.0 + 1.0, dim) * 3.0

    x = np.zeros(shape, np.float32)
    assert_all(all_executors(fn, x), x)
    if dim == -1:
        assert "RowStep" in fused_kinds(fn, x)


@pytest.mark.parametrize("shape", [(3, 0), (0, 4), (0,)])
def test_layer_norm_of_empty_rows_is_empty(shape: tuple) -> None:
    def fn(x, g):
        return nd.layer_norm(x + 1.0, g, g) * 2.0

    x, g = np.zeros(shape, np.float32), np.ones(shape[-1:], np.float32)
    assert_all(all_executors(fn, x, g), x)
    assert "RowStep" in fused_kinds(fn, x, g)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, dims", [((3, 0), (-1,)), ((0,), None), ((2, 0, 3), (1, 2)),
                                         ((0, 3), (-1,))])
def test_empty_reductions_follow_numpy_in_every_executor(shape: tuple, dims, dtype: str) -> None:
    """sum 0, prod 1, mean NaN; max/min of an empty axis raise a named OpError everywhere
    (numpy has no identity for them; the fused kernel hands that case to the interpreter).
    Each reduction reads a chain of its own, so sum/mean/max/min fuse with it."""
    x = np.zeros(shape, dtype)
    want_shape = np.sum(x, axis=dims).shape
    empty_axis = 0 in [shape[d] for d in (dims or range(len(shape)))]
    for name, identity in (("sum", 0.0), ("prod", 1.0), ("mean", NAN), ("max", None),
                           ("min", None)):
        def fn(x, name=name):
            return getattr(nd, name)(x * 2.0 + 1.0, dims)

        results = all_executors(fn, x)
        if name != "prod" and (dims is None or dims == (-1,)):  # trailing dims: fused
            # (the plan of a non-empty input of the same rank: an empty max raises)
            assert fused_kinds(fn, np.ones([d or 2 for d in shape], dtype)) == ["ReduceStep"]
        if identity is None and empty_axis:
            assert all(isinstance(r, nd.OpError) for r in results.values()), (name, results)
            assert all("zero-size" in str(r) for r in results.values()), (name, results)
        else:
            assert_all(results, np.full(want_shape, identity if empty_axis else 0.0, dtype))


# --------------------------------------------------------------------------------------------
# Row anchors: infinities, NaN, huge values
# --------------------------------------------------------------------------------------------

_E = math.e
#: (row, softmax, log_softmax); the rule: x - max(x), then exp / sum (log: minus log(sum))
SOFTMAX_ROWS = [
    ([INF, 0.0, 1.0], [NAN] * 3, [NAN] * 3),                  # inf - inf: NaN throughout
    ([INF, INF, 0.0], [NAN] * 3, [NAN] * 3),
    ([NAN, 0.0, 1.0], [NAN] * 3, [NAN] * 3),
    ([-INF, -INF, -INF], [NAN] * 3, [NAN] * 3),               # 0 / 0
    ([-INF, 0.0, 1.0], [0.0, 1 / (1 + _E), _E / (1 + _E)],
     [-INF, -math.log1p(_E), 1 - math.log1p(_E)]),
    ([1e30, 1e30, -1e30], [0.5, 0.5, 0.0], [-math.log(2), -math.log(2), -2e30 - math.log(2)]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fused", ["anchor", "prologue+epilogue"])
def test_softmax_rows_with_infinities(fused: str, dtype: str) -> None:
    x = np.array([r for r, _, _ in SOFTMAX_ROWS], dtype)
    for k, anchor in ((1, "softmax"), (2, "log_softmax")):
        def fn(x, anchor=anchor):
            if fused == "anchor":
                return getattr(nd, anchor)(x)
            return getattr(nd, anchor)(x * 1.0 - 0.0) * 1.0  # (both exact for these values)
        want = np.array([row[k] for row in SOFTMAX_ROWS])
        assert_all(all_executors(fn, x), want, rtol=1e-6)
        assert fused_kinds(fn, x) == ["RowStep"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_of_huge_rows(dtype: str) -> None:
    """float32 rows beyond ~1.8e19 (the square overflows) up to 3.4e38 (x - mean overflows):
    the statistics are float64 in every executor, so the result is the float64 one, rounded."""
    x = np.array([[1e20, -1e20, 3e20, 0.0], [3.4e38, -3.4e38, 3.4e38, -3.4e38],
                  [1e30, 1e30, 1e30, 1e30], [1e-30, 2e-30, 3e-30, -1e-30]], dtype)
    g, b = np.array([1.0, 2.0, 0.5, -1.0], dtype), np.array([0.0, 0.5, 0.0, 1.0], dtype)
    x64 = x.astype(np.float64)
    c = x64 - x64.mean(-1, keepdims=True)
    want = (c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5)).astype(dtype) * g + b

    def fn(x, g, b):
        return nd.layer_norm(x, g, b) * 1.0

    results = all_executors(fn, x, g, b)
    assert all(r.dtype == np.dtype(dtype) for r in results.values())
    assert_all(results, want * 1.0, rtol=1e-6)
    assert fused_kinds(fn, x, g, b) == ["RowStep"]


def test_layer_norm_of_a_constant_row_without_epsilon() -> None:
    """epsilon=0: a constant row is 0 * (1 / 0) = NaN in every executor (no exception from the
    kernel's division)."""
    x = np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 3.0]], np.float32)

    def fn(x, g):
        return nd.layer_norm(x, g, epsilon=0.0) * 1.0

    s = math.sqrt(2 / 3)  # the biased std of [1, 2, 3]
    assert_all(all_executors(fn, x, np.ones(3, np.float32)),
               [[NAN, NAN, NAN], [-1 / s, 0.0, 1 / s]], rtol=1e-6)


def test_layer_norm_gradient_of_huge_float32_rows() -> None:
    """layer_norm(c x) = layer_norm(x) for a large c, so the gradient w.r.t. c x is the one
    w.r.t. x divided by c -- finite, in float32, and the same for both executors."""
    u = np.array([[0.5, -1.5, 2.0, 0.25], [1.0, 3.0, -2.0, 0.5]])
    w = np.array([[1.0, -2.0, 0.5, 3.0], [0.5, 1.0, -1.0, 2.0]])

    def gradient(x: np.ndarray, executor: str) -> np.ndarray:
        previous = compiler.set_executor(executor)
        try:
            sd = nd.SameDiff.create()
            xv = sd.placeholder("x", nd.FLOAT if x.dtype == np.float32 else nd.DOUBLE, -1, 4)
            g = sd.constant("g", np.ones(4, x.dtype))
            (sd.nn.layer_norm(xv, g) * sd.constant("w", w.astype(x.dtype))).sum().mark_as_loss()
            return sd.calculate_gradients({"x": x}, "x")["x"].numpy()
        finally:
            compiler.set_executor(previous)

    scale = 1e20
    want = gradient(u, "interpreter") / scale  # float64, eps negligible next to var(c u)
    for executor in ("interpreter", "compiled"):
        got = gradient((u * scale).astype(np.float32), executor)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-4, err_msg=executor)


@pytest.mark.parametrize("dims", [(-1,), (1, 2)])
def test_layer_norm_gradient_rule(dims: tuple) -> None:
    """The rule (xhat from the op itself, float64 variance for float32 x) against float64
    central differences, and its float32 form against its float64 one; over the last dim
    (fused reductions) and over two dims (library reductions)."""
    rng = np.random.default_rng(5)
    x0 = rng.standard_normal((2, 3, 4)) * 3.0 + 1.5
    shape = tuple(x0.shape[d] for d in dims)
    gain0, bias0 = 1.0 + 0.2 * rng.standard_normal(shape), 0.1 * rng.standard_normal(shape)
    w0 = rng.standard_normal(x0.shape)

    def graph(dtype):
        sd = nd.SameDiff.create()
        x = sd.var("x", x0.astype(dtype))
        gain, bias = sd.var("gain", gain0.astype(dtype)), sd.var("bias", bias0.astype(dtype))
        y = sd.nn.layer_norm(x, gain, bias, dims=dims)
        (sd.nn.gelu(y) * sd.constant("w", w0.astype(dtype))).sum().mark_as_loss()
        return sd

    previous = compiler.set_executor("interpreter")  # (central differences: many runs)
    try:
        result = check_gradients(graph(np.float64))
    finally:
        compiler.set_executor(previous)
    assert result.passed, str(result)
    # (compiled: the fused path, over the last dim; two dims compile many library-call plans)
    for executor in ("interpreter", "compiled") if dims == (-1,) else ("interpreter",):
        previous = compiler.set_executor(executor)
        try:
            g64 = graph(np.float64).calculate_gradients({}, "x", "gain", "bias")
            g32 = graph(np.float32).calculate_gradients({}, "x", "gain", "bias")
        finally:
            compiler.set_executor(previous)
        for k in g64:
            assert g32[k].dtype == np.float32
            np.testing.assert_allclose(g32[k].numpy(), g64[k].numpy(), rtol=2e-4, atol=2e-5,
                                       err_msg=f"{executor} {k}")


# --------------------------------------------------------------------------------------------
# Activations at +-inf, huge and NaN inputs
# --------------------------------------------------------------------------------------------

_SELU = (1.0507009873554805, 1.6732632423543772)   # scale, alpha
#: op -> its values at (-inf, -h, h, +inf) for a huge h: the limits at +-inf, and at +-h the
#: limit again or h's own size. One multi-output kernel per dtype computes them all.
ACTIVATIONS = {
    "gelu": lambda h: (-0.0, -0.0, h, INF),
    "gelu_erf": lambda h: (-0.0, -0.0, h, INF),
    "swish": lambda h: (-0.0, -0.0, h, INF),
    "softsign": lambda h: (-1.0, -1.0, 1.0, 1.0),
    "softplus": lambda h: (0.0, 0.0, h, INF),
    "log_sigmoid": lambda h: (-INF, -h, 0.0, 0.0),
    "sigmoid": lambda h: (0.0, 0.0, 1.0, 1.0),
    "tanh": lambda h: (-1.0, -1.0, 1.0, 1.0),
    "erf": lambda h: (-1.0, -1.0, 1.0, 1.0),
    "elu": lambda h: (-1.0, -1.0, h, INF),
    "selu": lambda h: (-_SELU[0] * _SELU[1], -_SELU[0] * _SELU[1], _SELU[0] * h, INF),
    "relu": lambda h: (0.0, 0.0, h, INF),
    "leaky_relu": lambda h: (-INF, -0.01 * h, h, INF),
    "hard_sigmoid": lambda h: (0.0, 0.0, 1.0, 1.0),
    "hard_tanh": lambda h: (-1.0, -1.0, 1.0, 1.0),
    "relu6": lambda h: (0.0, 0.0, 6.0, 6.0),
    "exp": lambda h: (0.0, 0.0, INF, INF),
    "expm1": lambda h: (-1.0, -1.0, INF, INF),
}
#: the sign of zero is part of the contract here (gelu and swish of x << 0 are -0.0 for
#: finite x in every executor, so -inf gives -0.0 as well)
SIGNED = ("gelu", "gelu_erf", "swish")


def _activation(name: str, x):
    return nd.gelu(x, False) if name == "gelu_erf" else getattr(nd, name)(x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_activations_give_their_limits_at_infinity(dtype: str) -> None:
    huge = 1e30 if dtype == "float32" else 1e300
    x = np.array([-INF, -huge, huge, INF, NAN], dtype)

    def fn(x):
        return tuple(_activation(name, x) for name in ACTIVATIONS)

    results = all_executors(fn, x)
    assert fused_kinds(fn, x) == ["KernelStep"]
    for k, (name, values) in enumerate(ACTIVATIONS.items()):
        per_op = {ex: r[k] for ex, r in results.items()}
        assert_all(per_op, [*values(huge), NAN], rtol=1e-6, signs=name in SIGNED)


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_gradient_at_infinity(approximate: bool) -> None:
    """gelu' -> 0 / 1; x**3 and inf * 0 used to make it NaN for huge or infinite x."""
    x = np.array([-INF, -1e30, -50.0, 50.0, 1e30, INF])
    for executor in ("interpreter", "compiled"):
        previous = compiler.set_executor(executor)
        try:
            sd = nd.SameDiff.create()
            xv = sd.placeholder("x", nd.DOUBLE, -1)
            sd.nn.gelu(xv, approximate).sum().mark_as_loss()
            got = sd.calculate_gradients({"x": x}, "x")["x"].numpy()
        finally:
            compiler.set_executor(previous)
        np.testing.assert_array_equal(got, [0.0, 0.0, 0.0, 1.0, 1.0, 1.0], err_msg=executor)


# --------------------------------------------------------------------------------------------
# float32 sums
# --------------------------------------------------------------------------------------------

def test_float32_sums_do_not_overflow_part_way() -> None:
    """numpy's float32 accumulator overflows on [3e38, 3e38, -3e38]; the kernels accumulate in
    float64, and eager recomputes such sums in float64, so every executor gives 3e38. A total
    beyond float32's range is still inf."""
    x = np.array([[3e38, 3e38, -3e38], [3e38, 3e38, 0.0], [1.0, 2.0, 3.0]], np.float32)

    def fn(x):  # fused (a chain feeding a trailing reduction) and library (leading axis) sums
        return (nd.sum(x * 1.0, -1), nd.mean(x * 1.0, -1), nd.sum(x, 0), nd.mean(x, None))

    results = all_executors(fn, x)
    assert fused_kinds(fn, x).count("ReduceStep") == 2
    for k, want in enumerate([[3e38, INF, 6.0], [1e38, 2e38, 2.0], [INF, INF, -3e38],
                              (9e38 + 6) / 9]):
        assert_all({ex: r[k] for ex, r in results.items()}, want, rtol=1e-6)
