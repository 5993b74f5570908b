"""Every fusable op of the table, compiled against the interpreter.

Cases come from the op table's flags and ``op_samples``, never from lists of names: for every
op with a scalar expression (``op.fusable``: an elementwise op the compiler fuses) and for every
row anchor (``op.row_kernel``: ``layer_norm``/``softmax``/``log_softmax`` over the last axis),
in float32 and float64 (and bool where a sample runs in bool), the first suitable sample of
``op_samples.SAMPLES`` (one per distinct attribute set, so ``gelu(approximate=False)`` or
``relu(cutoff=0.5)`` get their own kernel), and every sample holding edge values (+-inf, NaN,
-0.0), runs inside ``nd.graph_scope()`` once with the compiled executor and once with the
interpreter. Each case asserts that:

* the plan really fused the op: exactly one ``KernelStep``/``RowStep``, compiled
  (``kernels is not None``), and no library step;
* the results have the interpreter's dtype and shape, and its values within the tolerance of
  the case (below), NaN positions included;
* float32 fast-math ops stay within the error bounds documented for ``samediff.compiler.
  fastmath`` (``test_fastmath.CASES``) against a float64 reference;
* a denser input of the same ranks and broadcast pattern (a few thousand elements drawn from the
  sample's own value range) reuses the same plan -- kernels are shape-generic -- and matches too.

Tolerances, compiled vs interpreter:

* **exact** (bitwise, NaN positions equal) for the ops declaring ``exact=True``: their compiled
  element is the same IEEE-754 operation sequence numpy performs (+ - * /, sqrt, comparisons,
  min/max, floor/ceil, clipping, ``where``, casts, logic...): no fast-math flags and no FMA
  contraction in kernels.
* **float64**: ``rtol=1e-12``. Both sides call a libm-quality implementation (libm in the
  kernel, numpy's own loops in the interpreter), a few ulp (~1e-15) apart, and the sample
  ranges keep the condition numbers small. ``gelu`` also needs ``atol=1e-14``: both compute
  ``0.5 x (1 + tanh(u))``, which cancels for x < 0, so the difference is absolute (|x| eps).
* **float32**: ``rtol=4e-6`` (~32 ulp): the kernel's fast-math functions are within the
  documented bounds (<= 4.5 ulp) of the exact value, numpy's float32 loops within a few ulp.
  ``atol=1e-7`` only matters for results near 0; ``gelu`` gets ``atol=1e-6`` because numpy's
  float32 ``1 + tanh(u)`` cancels for x < 0 (absolute error ~ |x| 2**-24 per ulp of tanh,
  |x| <= 4 here), while the kernel's ``gelu_tanh_f32`` keeps full relative accuracy.

Also: fused trailing-dims reductions (``ReduceStep``: every op declaring ``accumulate``, fed
by a chain; exact where the fold is, ``accumulate.exact``), random
chains of three fusable ops (one kernel each), kernels split over two threads, and
integer ops that must stay library calls. Kernels are compiled once per (op, attributes,
dtype): about 170 small compiles, ~30 s on a cold kernel cache (2 cores), ~4 s warm.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import nd4py as nd
from samediff import bind, compiler, create
from samediff.compiler import plan as cplan
from samediff.ops import REGISTRY

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_samples import SAMPLES, cast_inputs, run_attrs
    from test_fastmath import CASES as FASTMATH, GELU_TANH_POS_BOUND, GELU_TANH_Z_SLOPE
except ImportError:  # ... or tests/ became one
    from tests.op_samples import SAMPLES, cast_inputs, run_attrs
    from tests.test_fastmath import CASES as FASTMATH, GELU_TANH_POS_BOUND, GELU_TANH_Z_SLOPE

pytestmark = [pytest.mark.compiled,  # (edge-value samples warn as numpy does)
              pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning",
                                         "ignore:invalid value:RuntimeWarning",
                                         "ignore:overflow:RuntimeWarning")]

FUSABLE = sorted(name for name, op in REGISTRY.items() if op.fusable)
ANCHORS = sorted(name for name, op in REGISTRY.items() if op.row_kernel is not None)
REDUCERS = sorted(name for name, op in REGISTRY.items() if op.accumulate is not None)
KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.bool_))
RTOL = {"float32": 4e-6, "float64": 1e-12}
ATOL = {"float32": 1e-7, "float64": 0.0}
ATOL_OVERRIDE = {("gelu", "float32"): 1e-6, ("gelu", "float64"): 1e-14}

#: (op, dtype) pairs that legitimately run as a library call instead of a kernel, with the text
#: ``explain()`` must show for them. Empty today: every suitable sample fuses.
NOT_FUSED: dict[tuple[str, str], str] = {}


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------

def _suitable(name: str, sample, dtype: str) -> bool:
    """The sample runs in ``dtype`` with float/bool arrays only, giving a float/bool result."""
    if dtype not in sample.dtypes:
        return False
    values = cast_inputs(sample, dtype)
    if any(isinstance(v, np.ndarray) and v.dtype not in KERNEL_DTYPES for v in values):
        return False
    out = sample.out_dtype(dtype) if callable(sample.out_dtype) else sample.out_dtype
    return np.dtype(dtype if out == "same" else out) in KERNEL_DTYPES


def _attr_key(sample) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in sample.attrs.items()))


def _has_edges(sample) -> bool:
    """Does the sample hold edge values (+-inf, NaN, -0.0)? Those are cases of their own."""
    return any(isinstance(v, np.ndarray) and v.dtype.kind == "f"
               and (not np.isfinite(v).all() or np.signbit(v[v == 0]).any())
               for v in sample.inputs)


def _cases() -> list:
    out = []
    for name in FUSABLE:
        for dtype in ("float32", "float64", "bool"):  # (bool: where a sample runs in bool)
            seen: set = set()
            for i, sample in enumerate(SAMPLES.get(name, ())):
                if _suitable(name, sample, dtype) and (_attr_key(sample) not in seen
                                                       or _has_edges(sample)):
                    seen.add(_attr_key(sample))
                    out.append(pytest.param(name, i, dtype, id=f"{name}-{i}-{dtype}"))
    return out


CASES = _cases()


def _anchor_cases() -> list:
    out = []
    for name in ANCHORS:
        axis = REGISTRY[name].row_kernel.axis  # the first sample over the last axis
        default = REGISTRY[name].attr_kinds[axis][1]
        for dtype in ("float32", "float64"):
            i = next(i for i, s in enumerate(SAMPLES[name])
                     if s.attrs.get(axis, default) in (-1, (-1,)))
            out.append(pytest.param(name, i, dtype, id=f"{name}-{i}-{dtype}"))
    return out


ANCHOR_CASES = _anchor_cases()


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------

def run_in_scope(op, values: list, attrs: dict, executor: str, name: str):
    """``op`` traced in a graph_scope and run by ``executor``: (result, plan)."""
    previous = compiler.set_executor(executor)
    try:
        with nd.graph_scope(name) as scope:
            out = bind(op, [create(v) if isinstance(v, np.ndarray) else v for v in values],
                       dict(attrs))
        return out.numpy(), scope.plan
    finally:
        compiler.set_executor(previous)


def both_executors(fn, arrays: list, label: str) -> tuple:
    """``fn`` traced in a graph_scope under the compiled executor, then the interpreter:
    ((result, plan), (result, plan))."""
    outs = []
    for executor in ("compiled", "interpreter"):
        previous = compiler.set_executor(executor)
        try:
            with nd.graph_scope(f"test_compiled_ops {label}") as scope:
                y = fn(*[create(a) for a in arrays])
            outs.append((y.numpy(), scope.plan))
        finally:
            compiler.set_executor(previous)
    return outs[0], outs[1]


def fused_steps(plan) -> list:
    return [s for s in plan.steps if isinstance(s, cplan.KernelStep)]


def assert_fused(plan, name: str, row: bool = False) -> None:
    """One compiled kernel step (a RowStep for anchors) and nothing run as a library call."""
    assert plan.kind == "compiled", plan.explain()
    steps = fused_steps(plan)
    assert len(steps) == 1 and len(plan.steps) == 1, f"{name}:\n{plan.explain()}"
    assert isinstance(steps[0], cplan.RowStep) == row, f"{name}:\n{plan.explain()}"
    assert steps[0].kernels is not None, f"{name} did not compile: {steps[0].reason}"
    assert [n.op.name for n in steps[0].nodes] == [name]


def assert_matches(got: np.ndarray, want: np.ndarray, name: str, dtype: str, what: str) -> None:
    assert got.dtype == want.dtype, f"{name}: compiled dtype {got.dtype}, interpreter {want.dtype}"
    assert got.shape == want.shape, f"{name}: compiled shape {got.shape}, interpreter {want.shape}"
    if REGISTRY[name].exact or got.dtype.kind == "b":
        np.testing.assert_array_equal(got, want, err_msg=f"{name} {dtype} ({what})")
    else:
        atol = ATOL_OVERRIDE.get((name, dtype), ATOL[dtype])
        np.testing.assert_allclose(got, want, rtol=RTOL[dtype], atol=atol, equal_nan=True,
                                   err_msg=f"{name} {dtype} ({what})")
    if got.dtype.kind == "f":  # the sign of zero is part of the result (gelu(-inf) = -0.0)
        zeros = (got == 0) & (want == 0)
        np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]),
                                      err_msg=f"{name} {dtype} ({what}): signs of zero")


def dense_inputs(values: list, rng: np.random.Generator, target: int = 12_000) -> list:
    """Inputs with the same ranks and broadcast pattern (size-1 dims stay 1, the others grow
    by a common factor) holding ~``target`` output elements -- below the parallel threshold,
    so the same serial kernel runs. Float arrays take values uniformly from the sample's finite
    range, half of them copied from the sample itself (keeping its ties and special values);
    bool arrays are random."""
    arrays = [v for v in values if isinstance(v, np.ndarray)]
    out_shape = np.broadcast_shapes(*[a.shape for a in arrays])
    grown = sum(d != 1 for d in out_shape)
    size = max(int(np.prod(out_shape)), 1)
    k = max(1, int((target / size) ** (1 / max(grown, 1))))
    assert size * k ** grown < cplan.PARALLEL_THRESHOLD
    out = []
    for v in values:
        if not isinstance(v, np.ndarray):
            out.append(v)
            continue
        shape = tuple(d if d == 1 else d * k for d in v.shape)
        if v.dtype == np.bool_:
            out.append(rng.random(shape) < 0.5)
            continue
        flat = v.ravel()
        finite = flat[np.isfinite(flat)]
        lo, hi = float(finite.min()), float(finite.max())
        fresh = rng.uniform(lo, hi, shape) if lo < hi else np.full(shape, lo)
        out.append(np.where(rng.random(shape) < 0.5, rng.choice(flat, shape), fresh)
                   .astype(v.dtype))
    return out


# float32 fast-math ops: bound on |compiled - exact| / (|exact| 2**-24), per element.
# A documented bound of B ulp is at most 2B such units (an ulp is 2**-24..2**-23 relative);
# every further rounding or float32-rounded constant adds at most 1 unit (first order).
def _fm(name: str, extra: int = 0):
    return lambda x, attrs: np.full(x.shape, 2 * FASTMATH[name][1] + extra)


def _gelu_bound(x, attrs):
    if not attrs.get("approximate", True):
        return np.full(x.shape, 2 * FASTMATH["gelu_erf"][1])
    z = np.abs(2.0 * np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3))  # documented |z| scaling
    return 2 * np.where(x >= 0, GELU_TANH_POS_BOUND, GELU_TANH_Z_SLOPE * (1.0 + z))


FASTMATH_BOUNDS = {
    "exp": _fm("exp"), "expm1": _fm("expm1"), "log": _fm("log"), "log1p": _fm("log1p"),
    "tanh": _fm("tanh"), "sigmoid": _fm("sigmoid"), "softplus": _fm("softplus"),
    "erf": _fm("erf"),
    "log_sigmoid": _fm("softplus"),          # -softplus_f32(-x): negations are exact
    "swish": _fm("swish"),                   # swish_f32 (clamped: -0.0 at -inf)
    "elu": _fm("expm1", 2),                  # alpha * expm1_f32(min(x, 0)): constant + product
    "selu": _fm("expm1", 4),                 # scale * (alpha * expm1_f32(...)): two of each
    "gelu": _gelu_bound,                     # gelu_tanh_f32 / gelu_erf_f32
}


def assert_fastmath_bound(name: str, values: list, attrs: dict, got: np.ndarray) -> None:
    wide = [v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
            for v in values]
    exact, _ = run_in_scope(REGISTRY[name], wide, attrs, "interpreter", f"{name} float64 reference")
    x = np.broadcast_to(wide[0], exact.shape).astype(np.float64)
    full = {**getattr(REGISTRY[name].default_attrs, "__dict__", {}), **attrs}
    bound = FASTMATH_BOUNDS[name](x, full)
    with np.errstate(all="ignore"):
        units = np.abs(got.astype(np.float64) - exact) / (np.abs(exact) * 2.0 ** -24)
    units[got == exact] = 0.0
    bad = units > bound
    assert not bad.any(), (f"{name} float32 at x={x[bad][:4]}: {units[bad][:4]} x 2**-24 "
                           f"relative error exceeds the documented bound {bound[bad][:4]}")


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------

def test_every_fusable_op_has_cases():
    covered = {(p.values[0], p.values[2]) for p in CASES}
    missing = [(n, d) for n in FUSABLE for d in ("float32", "float64") if (n, d) not in covered]
    assert not missing, f"fusable ops without a float/bool sample to compile: {missing}"
    assert not (set(FASTMATH_BOUNDS) - set(FUSABLE))
    assert ANCHORS and REDUCERS


@pytest.mark.parametrize("name, i, dtype", CASES)
def test_fused_op_matches_interpreter(name: str, i: int, dtype: str) -> None:
    op, sample = REGISTRY[name], SAMPLES[name][i]
    values, attrs = cast_inputs(sample, dtype), run_attrs(sample, dtype)
    scope = f"test_compiled_ops {name}-{i}-{dtype}"
    got, plan = run_in_scope(op, values, attrs, "compiled", scope)
    want, _ = run_in_scope(op, values, attrs, "interpreter", scope)
    if (name, dtype) in NOT_FUSED:
        assert NOT_FUSED[name, dtype] in plan.explain(), plan.explain()
    else:
        assert_fused(plan, name)
    assert_matches(got, want, name, dtype, "sample")

    rng = np.random.default_rng(zlib.crc32(f"{name}-{i}-{dtype}".encode()))
    dense = dense_inputs(values, rng)
    got, plan2 = run_in_scope(op, dense, attrs, "compiled", scope)
    want, _ = run_in_scope(op, dense, attrs, "interpreter", scope)
    assert plan2 is plan, "same ranks and broadcast pattern must reuse the plan and its kernel"
    assert_matches(got, want, name, dtype, "dense")
    if dtype == "float32" and name in FASTMATH_BOUNDS:
        assert_fastmath_bound(name, dense, attrs, got)


@pytest.mark.parametrize("name, i, dtype", ANCHOR_CASES)
def test_row_anchor_matches_interpreter(name: str, i: int, dtype: str) -> None:
    """Row statistics accumulate in float64 in the kernel, pairwise in the input dtype in
    numpy: float32 results differ by a few ulp of the row's scale (atol) or of the value."""
    op, sample = REGISTRY[name], SAMPLES[name][i]
    values, attrs = cast_inputs(sample, dtype), run_attrs(sample, dtype)
    scope = f"test_compiled_ops {name}-{i}-{dtype}"
    rtol, atol = (4e-6, 1e-6) if dtype == "float32" else (1e-12, 1e-14)
    got, plan = run_in_scope(op, values, attrs, "compiled", scope)
    want, _ = run_in_scope(op, values, attrs, "interpreter", scope)
    assert_fused(plan, name, row=True)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)

    rng = np.random.default_rng(3)
    dense = dense_inputs(values, rng, target=6_000)
    got, plan2 = run_in_scope(op, dense, attrs, "compiled", scope)
    want, _ = run_in_scope(op, dense, attrs, "interpreter", scope)
    assert plan2 is plan
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reducer", REDUCERS)
def test_fused_reduction_matches_interpreter(reducer: str, dtype: str) -> None:
    """A trailing-dims reduction fed by a chain nobody else reads is one ReduceStep. Positive
    terms (no cancellation): float32 sums differ by numpy's float32 accumulation error only
    (~log2(n) ulp; the kernel accumulates in float64). A NaN row must stay NaN (max/min too)."""
    rng = np.random.default_rng(11)
    x = rng.uniform(0.5, 2.0, (5, 3, 7)).astype(dtype)
    x[2, 1, 3] = np.nan
    b = rng.uniform(0.5, 1.0, 7).astype(dtype)

    def f(x, b):
        return bind(REGISTRY[reducer], [x * 2.0 + b], {"dims": (-1,)})

    (got, plan), (want, _) = both_executors(f, [x, b], f"reduce {reducer} {dtype}")
    steps = fused_steps(plan)
    assert len(plan.steps) == 1 and isinstance(steps[0], cplan.ReduceStep), plan.explain()
    assert steps[0].kernels is not None, steps[0].reason
    assert got.dtype == want.dtype and got.shape == want.shape == (5, 3)
    assert np.isnan(got[2, 1]) and np.isnan(want[2, 1])
    if REGISTRY[reducer].accumulate.exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=RTOL[dtype])


def test_unfusable_dtypes_run_as_library_calls():
    """Integer results are never fused: the plan says so and the values are numpy's."""
    x = np.linspace(-3.7, 3.7, 12).reshape(3, 4)
    for op, values, attrs in [("cast", [x], {"dtype": "int32"}),
                              ("add", [x.astype(np.int64), 2], {}),
                              ("exp", [np.arange(4, dtype=np.int32)], {})]:
        got, plan = run_in_scope(REGISTRY[op], values, attrs, "compiled", "test_compiled_ops lib")
        want, _ = run_in_scope(REGISTRY[op], values, attrs, "interpreter", "test_compiled_ops lib")
        assert not fused_steps(plan) and f"library: {op}" in plan.explain(), plan.explain()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


# Chains: well-conditioned continuous ops (no floor/ceil/comparison kinks, whose outputs could
# flip on a one-ulp difference), each binary op taking a fresh input of a random broadcast
# pattern or a Python scalar.
CHAIN_UNARY = ["neg", "abs", "exp", "expm1", "tanh", "sigmoid", "softplus", "swish", "gelu", "elu",
               "selu", "sin", "cos", "atan", "erf", "square", "softsign", "hard_tanh",
               "log_sigmoid", "relu6", "sinh"]
CHAIN_BINARY = ["add", "sub", "mul", "maximum", "minimum", "squared_difference", "atan2", "rsub"]
N_CHAINS = 6


def _chain(seed: int):
    rng = np.random.default_rng(seed)
    ops = [str(rng.choice(CHAIN_UNARY if rng.random() < 0.6 else CHAIN_BINARY)) for _ in range(3)]
    operands = [str(rng.choice(["full", "row", "col", "scalar"])) for _ in ops]
    return ops, operands


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("seed", range(N_CHAINS))
def test_chain_of_three_random_ops_is_one_kernel(seed: int, dtype: str) -> None:
    ops, operands = _chain(seed)
    rng = np.random.default_rng(100 + seed)
    shapes = {"full": (7, 5), "row": (5,), "col": (7, 1)}
    x = rng.uniform(-1.5, 1.5, (7, 5)).astype(dtype)
    others = [float(rng.uniform(-1, 1)) if kind == "scalar"
              else rng.uniform(-1.5, 1.5, shapes[kind]).astype(dtype) for kind in operands]

    def chain(x, *others):
        y = x
        for name, other in zip(ops, others):
            y = bind(REGISTRY[name], [y, other] if len(REGISTRY[name].inputs) == 2 else [y], {})
        return y

    def run(executor):
        previous = compiler.set_executor(executor)
        try:
            with nd.graph_scope(f"test_compiled_ops chain {seed} {dtype}") as scope:
                y = chain(create(x), *[create(o) if isinstance(o, np.ndarray) else o
                                       for o in others])
            return y.numpy(), scope.plan
        finally:
            compiler.set_executor(previous)

    got, plan = run("compiled")
    want, _ = run("interpreter")
    steps = fused_steps(plan)
    assert len(plan.steps) == 1 and len(steps) == 1 and steps[0].kernels is not None, \
        f"{ops}:\n{plan.explain()}"
    assert [n.op.name for n in steps[0].nodes] == ops
    assert got.dtype == want.dtype == np.dtype(dtype)
    # three ops of condition number <= ~10 on |x| <= 1.5: a few ulp each, amplified a little
    rtol, atol = (2e-5, 1e-6) if dtype == "float32" else (1e-11, 1e-14)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=str(ops))


@pytest.mark.parametrize("row", [False, True], ids=["elementwise", "rowwise"])
def test_parallel_kernels_match_serial_interpreter(row: bool, split_calls) -> None:
    """Above PARALLEL_THRESHOLD elements the kernel runs on two halves of its outer loop."""
    rng = np.random.default_rng(5)
    n = cplan.PARALLEL_THRESHOLD + 77
    x = rng.uniform(-3, 3, (n // 129 + 1, 129)).astype(np.float32)
    b = rng.uniform(-1, 1, 129).astype(np.float32)

    def f(x, b):
        y = nd.softmax(x) if row else x
        return nd.nn.gelu(nd.math.tanh(y * 1.5) + b)

    (got, plan), (want, _) = both_executors(f, [x, b], f"parallel {row}")
    steps = fused_steps(plan)
    assert len(steps) == 1 and steps[0].kernels is not None and len(plan.steps) == 1
    assert isinstance(steps[0], cplan.RowStep) == row
    assert x.shape[0] in split_calls, "the kernel did not run on two halves"
    np.testing.assert_allclose(got, want, rtol=4e-6, atol=1e-6)
