"""Sample inputs for every op of the table, with their references (STYLE §10).

``SAMPLES[op_name]`` lists 1-4 ``Sample`` s. References come from ``op_references.py`` (or are
one-liners here) and are written from the op's definition — Python's ``math`` module applied
element by element, explicit index maps and loops — never by calling the op or copying its
numpy code, so a wrong impl cannot agree with its own reference. Random ops have no
reference; their ``check`` tests range and moments instead.

Inputs are float64 arrays (or Python scalars, which stay *weak*); ``cast_inputs`` casts them to
the dtype a test runs in. Samples that run in integer dtypes hold integral values only, and
avoid the points where an op is undefined or not smooth (log of <= 0, acos at ±1, ties at a
relu cutoff, halves for floor/ceil...).

The suites read every op's samples: eager vs reference, inference, SameDiff and save/load
(``test_op_table.py``, ``test_serialize.py``), compiled vs interpreter for fusable ops
(``test_compiled_ops.py``) and, for differentiable elementwise ops and reductions, finite
differences on every ``smooth`` float sample (``test_gradients_elementwise.py``). A sample that
sits on an op's kinks, ties, jumps or non-finite values says ``smooth=False``; edge values
(±inf, NaN, -0.0) belong in such a sample, with a reference that gives the limits.
"""
from __future__ import annotations

import importlib
import math
import pathlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import (
        arange_ref, away_from_int, batch_norm_ref, broadcast_like_ref, broadcast_ref, build,
        batch_norm_train_ref, check_bernoulli, check_dropout_mask, check_normal, check_truncated, check_uniform, concat_ref, dot_ref,
        expand_ref, first_index, fsum_or_sum, idx, item, iv, layer_norm_ref, log_softmax_ref,
        matmul_ref, mean_of, nonzero_iv, one_hot_ref, pad_grad_ref, pad_ref, permute_ref, pos,
        pw, reshape_like_ref, slice_grad_ref, split_like_ref,
        random_signs, red, reduce_to_like_ref, repeat_ref, reshape_ref, reverse_ref,
        round_half_away, scan, scatter_ref, sign_of, slice_ref, softmax_ref, split_ref,
        squeeze_ref, stack_ref, tile_ref, truthy_block, u, unstack_ref, variance_of)
except ImportError:  # ... or tests/ became one
    from .op_references import (
        arange_ref, away_from_int, batch_norm_ref, broadcast_like_ref, broadcast_ref, build,
        batch_norm_train_ref, check_bernoulli, check_dropout_mask, check_normal, check_truncated, check_uniform, concat_ref, dot_ref,
        expand_ref, first_index, fsum_or_sum, idx, item, iv, layer_norm_ref, log_softmax_ref,
        matmul_ref, mean_of, nonzero_iv, one_hot_ref, pad_grad_ref, pad_ref, permute_ref, pos,
        pw, reshape_like_ref, slice_grad_ref, split_like_ref,
        random_signs, red, reduce_to_like_ref, repeat_ref, reshape_ref, reverse_ref,
        round_half_away, scan, scatter_ref, sign_of, slice_ref, softmax_ref, split_ref,
        squeeze_ref, stack_ref, tile_ref, truthy_block, u, unstack_ref, variance_of)

FLOATS = ("float32", "float64")
INTS = ("int32", "int64")
NUMERIC = FLOATS + INTS
#: Run without casting anything: the op's own default dtype is under test.
DEFAULT = "default"
#: ``out_dtype`` meaning "the dtype the sample runs in".
SAME = "same"


def float_of(dt: str) -> str:
    """Float math on integers gives float64 (numpy); floats keep their width."""
    return dt if dt.startswith("float") else "float64"


def wide_int(dt: str) -> str:
    """Sums and products of small ints accumulate in int64 (numpy's platform int)."""
    return dt if dt.startswith("float") or dt == "bool" else "int64"


@dataclass(frozen=True, eq=False)
class Sample:
    """One call of an op: inputs, attributes, and how to judge the result."""

    inputs: list
    attrs: dict = field(default_factory=dict)
    #: ``reference(*inputs, **attrs)`` on the cast inputs (floats widened to float64) and the
    #: op's full attributes (defaults filled in); returns an array or a tuple of arrays.
    #: None only for random ops, which have ``check`` instead.
    reference: Callable | None = None
    rtol: float | None = None            # float32 tolerances (None = the suite's default)
    atol: float | None = None
    dtypes: tuple[str, ...] = FLOATS
    #: expected result dtype: SAME, a dtype name, or ``f(run_dtype) -> name``
    out_dtype: Any = SAME
    fixed: tuple[int, ...] = ()          # float inputs that are never cast (mixed-dtype operands)
    castable: tuple[int, ...] = ()       # int inputs that are cast (others are indices)
    dtype_attr: str | None = None        # attribute that receives the run dtype
    check: Callable | None = None        # random ops: check(result: np.ndarray, attrs)
    #: a leading -1 (unknown) dim makes the output shape unknowable: the op must refuse
    dynamic_refuses: bool = False
    #: the inputs keep away from the op's kinks, ties, jumps and non-finite values: finite
    #: differences apply (the gradient suite checks every smooth float sample)
    smooth: bool = True


def expected_dtype(sample: Sample, dtype: str, k: int = 0) -> np.dtype:
    """Output ``k``'s expected dtype (``out_dtype`` may give one per output: a tuple)."""
    out = sample.out_dtype
    if callable(out):
        out = out(dtype)
    if isinstance(out, tuple):
        out = out[k]
    return np.dtype(dtype if isinstance(out, str) and out == SAME else out)


def cast_inputs(sample: Sample, dtype: str) -> list:
    """The sample's inputs in ``dtype``: float arrays (and ``castable`` int arrays) are cast;
    Python scalars (weak), bool masks, index arrays and ``fixed`` inputs are left alone."""
    out = []
    for i, x in enumerate(sample.inputs):
        if isinstance(x, np.ndarray) and dtype != DEFAULT and i not in sample.fixed and (
                x.dtype.kind == "f" or i in sample.castable):
            x = x.astype(dtype)
        out.append(x)
    return out


def run_attrs(sample: Sample, dtype: str) -> dict:
    """The sample's attributes, with the run dtype put into ``dtype_attr``."""
    attrs = dict(sample.attrs)
    if sample.dtype_attr and dtype != DEFAULT:
        attrs[sample.dtype_attr] = dtype
    return attrs


def reference_inputs(inputs: list) -> list:
    """Inputs for a reference: float arrays widened to float64 so the reference is exact."""
    return [x.astype(np.float64) if isinstance(x, np.ndarray) and x.dtype.kind == "f" else x
            for x in inputs]


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------

S = Sample
SAMPLES: dict[str, list[Sample]] = {}


def unary_op(name, f, *arrays, edges=None, **kw):
    """One sample per array; ``edges``: one more (``smooth=False``) holding edge values."""
    SAMPLES[name] = [S([a], reference=pw(f), **kw) for a in arrays]
    if edges is not None:
        SAMPLES[name].append(S([np.array(edges)], reference=pw(f), smooth=False,
                               **{k: v for k, v in kw.items() if k != "dtypes"}))


#: edge values for ``unary_op(..., edges=...)`` (every float format holds them exactly)
EDGES = [-math.inf, -0.0, 0.0, math.inf, math.nan]


def add_samples(name, *samples):
    SAMPLES.setdefault(name, []).extend(samples)


# --- unary math -----------------------------------------------------------------------------
unary_op("neg", lambda v: -v, iv(2, 3), iv(3, 1, 2), iv(), dtypes=NUMERIC)
unary_op("abs", abs, iv(2, 3), iv(4, 1), dtypes=NUMERIC)
unary_op("sign", sign_of, iv(2, 3), iv(1, 5), dtypes=NUMERIC, smooth=False)  # zeros: jumps
add_samples("sign", S([u(2, 2)], reference=pw(sign_of)))
# complex parts, on real inputs (complex values: tests/test_complex.py)
unary_op("real", lambda v: v, iv(2, 3), iv(3, 1), dtypes=NUMERIC)
unary_op("imag", lambda v: 0 * v, iv(2, 3), iv(1, 4), dtypes=NUMERIC)
unary_op("stop_gradient", lambda v: v, iv(2, 3), dtypes=NUMERIC, edges=EDGES)
unary_op("conj", lambda v: v, iv(2, 3), iv(3, 1), dtypes=NUMERIC)
unary_op("identity", lambda v: v, iv(2, 3), iv(3, 1, 2), iv(), dtypes=NUMERIC, edges=EDGES)
unary_op("angle", lambda v: math.atan2(0.0, v), pos(2, 3), -pos(3, 1))
unary_op("exp", math.exp, u(2, 3), u(3, 1, 2))
add_samples("exp", S([iv(2, 2)], reference=pw(math.exp), dtypes=INTS, out_dtype="float64"))
unary_op("expm1", math.expm1, u(2, 3), np.array([1e-6, -3e-5, 2e-4, 0.5]))
unary_op("log", math.log, pos(2, 3), pos(1, 4, lo=0.01, hi=100.0))
unary_op("log1p", math.log1p, u(2, 3, lo=-0.9, hi=3.0), np.array([1e-7, -2e-6, 3e-4]))
unary_op("sqrt", math.sqrt, pos(2, 3), pos(3, 1))
add_samples("sqrt", S([iv(2, 3, lo=0, hi=9)], reference=pw(math.sqrt), dtypes=INTS,
                      out_dtype="float64"))
unary_op("rsqrt", lambda v: 1 / math.sqrt(v), pos(2, 3), pos(1, 3, lo=0.01, hi=50.0))
unary_op("square", lambda v: v * v, iv(2, 3), iv(2, 1), dtypes=NUMERIC)
add_samples("square", S([u(3, 2)], reference=pw(lambda v: v * v)))
unary_op("reciprocal", lambda v: 1 / v, pos(2, 3), -pos(3, 1))
add_samples("reciprocal", S([nonzero_iv(2, 3)], reference=pw(lambda v: 1 / v), dtypes=INTS,
                            out_dtype="float64"))
unary_op("sin", math.sin, u(2, 3, lo=-4, hi=4), u(1, 3))
unary_op("cos", math.cos, u(2, 3, lo=-4, hi=4), u(3, 1))
unary_op("tan", math.tan, u(2, 3, lo=-1.4, hi=1.4), u(1, 4, lo=-1, hi=1))
unary_op("asin", math.asin, u(2, 3, lo=-0.95, hi=0.95), u(4, 1, lo=-0.5, hi=0.5))
unary_op("acos", math.acos, u(2, 3, lo=-0.95, hi=0.95), u(4, 1, lo=-0.5, hi=0.5))
unary_op("atan", math.atan, u(2, 3, lo=-5, hi=5), u(1, 2))
unary_op("sinh", math.sinh, u(2, 3), u(3, 1))
unary_op("asinh", math.asinh, u(2, 3, lo=-4, hi=4), u(3, 1), edges=EDGES)
unary_op("acosh", math.acosh, u(2, 3, lo=1.2, hi=6), u(1, 4, lo=1.05, hi=2),
         edges=[1.0, math.inf, math.nan])
unary_op("atanh", math.atanh, u(2, 3, lo=-0.9, hi=0.9), u(4, 1, lo=-0.5, hi=0.5),
         edges=[-0.0, 0.0, math.nan])
unary_op("cosh", math.cosh, u(2, 3), u(3, 1))
unary_op("tanh", math.tanh, u(2, 3, lo=-4, hi=4), u(3, 1))
unary_op("floor", math.floor, away_from_int(2, 3), away_from_int(3, 1))
unary_op("ceil", math.ceil, away_from_int(2, 3), away_from_int(3, 1))
unary_op("round", round_half_away, away_from_int(2, 3))
add_samples("round", *(S([a], reference=pw(round_half_away), smooth=False) for a in (
    np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5]),  # exact halves: away from zero
    # just below 0.5 (in float32 / float64) and odd integers where x + 0.5 is inexact
    np.array([0.5 - 2.0 ** -25, -(0.5 - 2.0 ** -25), 0.5 - 2.0 ** -54, 2.0 ** 23 + 1,
              -(2.0 ** 23 + 3), 2.0 ** 52 + 1]))))
unary_op("erf", math.erf, u(2, 3, lo=-3, hi=3), u(4, 1))
_special = np.array([[0.0, np.nan, np.inf], [-np.inf, -1.5, 2.0]])
unary_op("isnan", math.isnan, _special, u(2, 2), out_dtype="bool")
unary_op("signbit", lambda v: math.copysign(1.0, v) < 0, _special, u(2, 2), out_dtype="bool",
         edges=[-0.0, 0.0, -math.nan, math.nan])
unary_op("isinf", math.isinf, _special, u(2, 2), out_dtype="bool")
unary_op("isfinite", math.isfinite, _special, u(2, 2), out_dtype="bool")
unary_op("logical_not", lambda v: not v, iv(2, 3, lo=-1, hi=1), iv(3, 1, lo=0, hi=1),
         dtypes=NUMERIC + ("bool",), out_dtype="bool")
unary_op("log2", lambda v: -math.inf if v == 0 else math.nan if v < 0 else math.log2(v),
         np.geomspace(0.01, 100.0, 6).reshape(2, 3), edges=EDGES + [8.0, 0.5, -1.0])
unary_op("exp2", lambda v: 2.0 ** v, np.linspace(-4.0, 4.0, 6).reshape(2, 3),
         edges=EDGES + [3.0, -2.0, 10.5])
unary_op("cube", lambda v: v * v * v, np.array([[-3.0, -1.0, 0.0], [1.0, 2.0, 3.0]]),
         dtypes=NUMERIC, edges=EDGES + [1.5, -2.5])

# --- activations ----------------------------------------------------------------------------
unary_op("sigmoid", lambda v: 1 / (1 + math.exp(-v)), u(2, 3, lo=-6, hi=6),
         np.array([-30.0, -15.0, 0.0, 15.0, 30.0]))
unary_op("softplus", lambda v: math.log1p(math.exp(v)), u(2, 3, lo=-6, hi=6),
         np.array([[-30.0], [-1e-3], [20.0], [30.0]]))
unary_op("softsign", lambda v: v / (1 + abs(v)), u(2, 3, lo=-5, hi=5), u(3, 1))
SAMPLES["relu"] = [
    S([iv(2, 3)], reference=pw(lambda v, cutoff: v if v > cutoff else 0), dtypes=NUMERIC,
      smooth=False),  # integers: zeros sit on the kink
    S([np.array([[-1.0, 0.2, 0.45], [0.55, 0.9, 3.0]])], {"cutoff": 0.5},
      pw(lambda v, cutoff: v if v > cutoff else 0)),
]
unary_op("relu6", lambda v: min(max(v, 0), 6), iv(2, 3, lo=-3, hi=9), dtypes=NUMERIC,
         smooth=False)  # kinks at 0 and 6
add_samples("relu6", S([np.array([[-3.0, 0.5, 5.5, 9.0]])],
                       reference=pw(lambda v: min(max(v, 0), 6))))
SAMPLES["leaky_relu"] = [
    S([u(2, 3)], reference=pw(lambda v, alpha: v if v >= 0 else alpha * v)),
    S([u(3, 1)], {"alpha": 0.2}, pw(lambda v, alpha: v if v >= 0 else alpha * v)),
]
_elu = pw(lambda v, alpha: v if v > 0 else alpha * (math.exp(v) - 1))
SAMPLES["elu"] = [S([u(2, 3)], reference=_elu), S([u(3, 1, lo=-5)], {"alpha": 0.5}, _elu)]
_SELU_L, _SELU_A = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717
unary_op("selu", lambda v: _SELU_L * (v if v > 0 else _SELU_A * (math.exp(v) - 1)),
         u(2, 3, lo=-4, hi=4), u(1, 3))
SAMPLES["gelu"] = [
    S([u(2, 3, lo=-4, hi=4)], reference=pw(lambda v, approximate: 0.5 * v * (1 + math.tanh(
        math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))))),
    S([u(3, 1, lo=-4, hi=4)], {"approximate": False},
      pw(lambda v, approximate: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))),
]
unary_op("swish", lambda v: v / (1 + math.exp(-v)), u(2, 3, lo=-6, hi=6), u(1, 4))
unary_op("hard_sigmoid", lambda v: min(1.0, max(0.0, 0.2 * v + 0.5)),
         np.array([[-4.0, -1.0, 0.3, 2.0, 4.0]]), u(3, 1, lo=-2.4, hi=2.4))
unary_op("hard_tanh", lambda v: min(1.0, max(-1.0, v)), np.array([-3.0, -0.5, 0.25, 0.9, 2.0]),
         u(2, 3, lo=-0.99, hi=0.99))
unary_op("log_sigmoid", lambda v: -math.log1p(math.exp(-v)), u(2, 3, lo=-6, hi=6),
         np.array([-30.0, -1.0, 0.0, 20.0]))
# kinks of hard_swish's derivative at -3 and 3 (its gradient follows PyTorch there)
unary_op("hard_swish", lambda v: -0.0 if v <= -3 else v * min(v + 3, 6) / 6,
         np.array([[-4.5, -2.0, -0.7], [0.4, 2.5, 4.0]]), edges=EDGES + [-3.0, 3.0, -1e30, 1e30])
unary_op("mish", lambda v: -0.0 if v == -math.inf else v * math.tanh(
         max(v, 0.0) + math.log1p(math.exp(-abs(v)))), np.linspace(-6.0, 6.0, 6).reshape(2, 3),
         edges=EDGES + [-1e30, 1e30, -20.0, 30.0])

# --- binary -----------------------------------------------------------------------------------


def binary_op(name, f, *, scalar=None, ints=True, lhs=None, rhs=None, **kw):
    """Standard binary samples: (3,1)-(4,) broadcasting, a size-1 dim, and a weak scalar."""
    ref = pw(f)
    a, b = (lhs or iv)(3, 1), (rhs or iv)(4)
    samples = [S([a, b], reference=ref, dtypes=NUMERIC if ints else FLOATS, **kw),
               S([(lhs or u)(2, 1, 3), (rhs or u)(2, 4, 1)], reference=ref, **kw)]
    if scalar is not None:
        samples.append(S([(lhs or u)(2, 3), scalar], reference=ref, **kw))
    SAMPLES[name] = samples


binary_op("add", lambda a, b: a + b, scalar=2.0)
add_samples("add", S([iv(2, 3), 3], reference=pw(lambda a, b: a + b), dtypes=INTS),
            S([iv(2, 3), 2.5], reference=pw(lambda a, b: a + b), dtypes=INTS, out_dtype="float64"))
SAMPLES["add"].pop(1)  # at most 4 samples; the other binary ops cover (2,1,3)+(2,4,1)
binary_op("sub", lambda a, b: a - b, scalar=0.5)
add_samples("sub", S([1.5, u(2, 2)], reference=pw(lambda a, b: a - b)))
binary_op("mul", lambda a, b: a * b, scalar=2.0)
add_samples("mul", S([u(2, 2), u(2, 2)], reference=pw(lambda a, b: a * b), fixed=(1,),
                     dtypes=("float32",), out_dtype="float64"))
binary_op("div", lambda a, b: a / b, scalar=4.0, ints=False,
          rhs=lambda *s: pos(*s) * random_signs(s))  # divisors away from 0
add_samples("div", S([iv(3, 1), nonzero_iv(4)], reference=pw(lambda a, b: a / b), dtypes=INTS,
                     out_dtype="float64"))
binary_op("rsub", lambda a, b: b - a, scalar=3.0)
binary_op("rdiv", lambda a, b: b / a, scalar=2.0, ints=False, lhs=lambda *s: pos(*s))
SAMPLES["pow"] = [
    S([pos(3, 1), u(4)], reference=pw(math.pow)),
    S([pos(2, 3), 2.0], reference=pw(math.pow)),
    S([iv(3, 1), iv(4, lo=0, hi=3)], reference=pw(lambda a, b: a ** int(b)), dtypes=INTS),
    S([pos(2, 1, 3), pos(2, 4, 1, lo=-2, hi=2)], reference=pw(math.pow)),
]
binary_op("maximum", max, scalar=0.0)
# a numpy scalar is strong (NEP 50), even np.float64 which subclasses Python's float
add_samples("maximum", S([u(2, 3), np.float64(0.5)], reference=pw(max), dtypes=("float32",),
                         out_dtype="float64"))
binary_op("minimum", min, scalar=0.0)
SAMPLES["floor_mod"] = [
    S([iv(3, 1, lo=-7, hi=7), nonzero_iv(4)], reference=pw(lambda a, b: a % b), dtypes=NUMERIC,
      smooth=False),  # multiples of the divisor: jumps
    S([np.array([[5.3], [-5.3], [0.7]]), np.array([2.0, -2.0, 1.5])],
      reference=pw(lambda a, b: a % b)),
    S([np.array([7.5, -7.5, 3.25]), 2.0], reference=pw(lambda a, b: a % b)),
]
SAMPLES["floor_div"] = [
    S([iv(3, 1, lo=-7, hi=7), nonzero_iv(4)], reference=pw(lambda a, b: a // b), dtypes=NUMERIC,
      smooth=False),  # multiples of the divisor: jumps
    S([np.array([[5.3], [-5.3], [0.7]]), np.array([2.0, -2.0, 1.5])],
      reference=pw(lambda a, b: a // b)),
    S([iv(2, 3, lo=-9, hi=9), 4], reference=pw(lambda a, b: a // b), dtypes=INTS),
    # the array API's infinities: floor of the true quotient (Python says nan and -1.0)
    S([np.array([math.inf, -math.inf, 1.5, -1.5, 7.0]), np.array([2.0, 3.0, -math.inf,
                                                                 -math.inf, math.inf])],
      reference=pw(lambda a, b: a / b if math.isinf(a / b) or a / b == 0
                   else float(math.floor(a / b))), smooth=False),
]
SAMPLES["copysign"] = [
    S([u(2, 3), u(3)], reference=pw(math.copysign)),
    S([u(3, 1), np.array([-0.0, 0.0, -math.inf, math.nan])], reference=pw(math.copysign),
      smooth=False),
]
SAMPLES["atan2"] = [
    S([u(3, 1), u(4)], reference=pw(math.atan2)),
    S([np.array([1.0, 1.0, -1.0, -1.0]), np.array([1.0, -1.0, 1.0, -1.0])],
      reference=pw(math.atan2)),  # one point in each quadrant
]
binary_op("squared_difference", lambda a, b: (a - b) ** 2, scalar=1.0)
for _name, _f in [("eq", lambda a, b: a == b), ("neq", lambda a, b: a != b),
                  ("gt", lambda a, b: a > b), ("gte", lambda a, b: a >= b),
                  ("lt", lambda a, b: a < b), ("lte", lambda a, b: a <= b)]:
    SAMPLES[_name] = [
        S([iv(3, 1, lo=-2, hi=2), iv(4, lo=-2, hi=2)], reference=pw(_f), dtypes=NUMERIC,
          out_dtype="bool"),  # small ranges: many ties
        S([u(2, 3), 0.5], reference=pw(_f), out_dtype="bool"),
        S([iv(2, 1, 3), iv(2, 4, 1)], reference=pw(_f), out_dtype="bool"),
    ]
for _name, _f in [("logical_and", lambda a, b: bool(a) and bool(b)),
                  ("logical_or", lambda a, b: bool(a) or bool(b)),
                  ("logical_xor", lambda a, b: bool(a) != bool(b))]:
    SAMPLES[_name] = [
        S([iv(3, 1, lo=-1, hi=1), iv(4, lo=0, hi=1)], reference=pw(_f),
          dtypes=NUMERIC + ("bool",), out_dtype="bool"),
        S([iv(2, 1, 2, lo=0, hi=1), iv(2, 3, 1, lo=0, hi=2)], reference=pw(_f), dtypes=("bool",),
          out_dtype="bool"),
    ]

# --- other elementwise ------------------------------------------------------------------------
_where = pw(lambda c, a, b: a if c else b)
SAMPLES["where"] = [
    S([np.array([[True], [False]]), iv(2, 3), iv(3)], reference=_where, dtypes=NUMERIC),
    S([np.array([True, False, True]), u(2, 3), 0.0], reference=_where),
    S([np.array([[True, False], [False, True]]), iv(2, 2), -1], reference=_where, dtypes=INTS),
]
SAMPLES["clip_by_value"] = [
    S([np.array([[-3.0, -0.5, 0.25], [0.9, 1.7, 4.0]])], {"clip_min": -1.0, "clip_max": 1.0},
      pw(lambda v, clip_min, clip_max: min(max(v, clip_min), clip_max))),
    S([u(3, 1, lo=-4, hi=4)], {"clip_min": -2.5, "clip_max": 0.5},
      pw(lambda v, clip_min, clip_max: min(max(v, clip_min), clip_max))),
]
SAMPLES["cast"] = [
    S([u(2, 3, lo=-5, hi=5)], {"dtype": "int32"}, pw(lambda v, dtype: math.trunc(v)),
      out_dtype="int32"),
    S([iv(3, 1)], {"dtype": "float64"}, pw(lambda v, dtype: float(v)), dtypes=NUMERIC,
      out_dtype="float64"),
    S([iv(2, 2, lo=-1, hi=1)], {"dtype": "bool"}, pw(lambda v, dtype: v != 0), dtypes=NUMERIC,
      out_dtype="bool"),
    S([iv(4)], {"dtype": "float32"}, pw(lambda v, dtype: float(v)), dtypes=NUMERIC,
      out_dtype="float32"),
]

# --- linalg -------------------------------------------------------------------------------------
SAMPLES["matmul"] = [
    S([iv(2, 3), iv(3, 4)], reference=matmul_ref, dtypes=NUMERIC),
    S([u(2, 2, 3), u(3, 4)], reference=matmul_ref),  # batch dims broadcast
    S([u(2, 3, 2), u(1, 4, 3)], {"transpose_x": True, "transpose_y": True,
                                 "transpose_result": True}, matmul_ref),
    S([u(3), u(3, 4)], reference=matmul_ref),  # 1-D operand
]
def _cross_ref(a, b):
    """Component k of a x b is a[k+1] b[k+2] - a[k+2] b[k+1] (indices mod 3), per vector of the
    broadcast leading dims."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)

    def component(i):
        *lead, k = i
        p, q = (*lead, (k + 1) % 3), (*lead, (k + 2) % 3)
        return item(a, p) * item(b, q) - item(a, q) * item(b, p)
    return build(shape, component)


SAMPLES["cross"] = [
    S([iv(2, 3), iv(2, 3)], reference=_cross_ref, dtypes=NUMERIC),
    S([u(4, 1, 3), u(2, 3)], reference=_cross_ref),  # leading dims broadcast
]
SAMPLES["tensor_mmul"] = [
    S([u(2, 3, 4), u(4, 3, 5)], {"dims_x": (1, 2), "dims_y": (1, 0)},
      lambda x, y, **a: np.einsum("abc,cbd->ad", x, y)),
    S([iv(2, 3), iv(3, 4)], {"dims_x": (-1,), "dims_y": (0,)},
      lambda x, y, **a: np.einsum("ab,bc->ac", x, y), dtypes=NUMERIC),
]
SAMPLES["dot"] = [
    S([iv(3, 4), iv(4)], reference=dot_ref, dtypes=NUMERIC, out_dtype=wide_int),
    S([u(3, 4), u(4)], {"dims": (-1,)}, dot_ref),
    S([u(2, 3), u(2, 3)], {"dims": (0,)}, dot_ref),
]

# --- nn -----------------------------------------------------------------------------------------
SAMPLES["softmax"] = [
    S([u(2, 3)], reference=softmax_ref),
    S([u(3, 1, 2)], {"dim": 0}, softmax_ref),
    S([u(2, 4) + 80.0], {"dim": 1}, softmax_ref),  # float32 exp(80+) overflows unless shifted
]
SAMPLES["log_softmax"] = [
    S([u(2, 3)], reference=log_softmax_ref),
    S([u(3, 1, 2)], {"dim": 0}, log_softmax_ref),
    S([u(2, 4) + 80.0], {"dim": -1}, log_softmax_ref),
]
SAMPLES["layer_norm"] = [
    S([u(2, 3, 4), pos(4), u(4)], reference=layer_norm_ref),
    S([u(2, 3, 4), pos(3, 4)], {"dims": (1, 2), "epsilon": 1e-3}, layer_norm_ref),
    S([u(2, 3, 4), pos(3), u(3)], {"dims": (1,)}, layer_norm_ref),
]
SAMPLES["batch_norm"] = [
    S([u(2, 3, 4), u(3), pos(3), pos(3), u(3)], {"axis": 1}, batch_norm_ref),
    S([u(4, 3), u(3), pos(3), pos(3), u(3)], {"epsilon": 1e-3}, batch_norm_ref),
    S([u(2, 3), u(3), pos(3), 2.0, 0.5], {}, batch_norm_ref),  # scalar gamma/beta broadcast
]
SAMPLES["batch_norm_train"] = [
    S([u(4, 3, 2), u(3), pos(3), pos(3), u(3)], {"axis": 1, "momentum": 0.8},
      batch_norm_train_ref, rtol=1e-4, atol=1e-4),
    S([u(5, 3), u(3), pos(3), 1.5, -0.5], {"epsilon": 1e-3}, batch_norm_train_ref,
      rtol=1e-4, atol=1e-4),
]
SAMPLES["dropout"] = [
    S([u(3, 4)], {"p": 0.7}, lambda x, *, p: x),  # inference: the identity
    S([u(2, 3, 2)], {}, lambda x, *, p: x),
]
SAMPLES["dropout_mask"] = [
    S([u(40, 50)], {"p": 0.3}, check=check_dropout_mask),
    S([u(2000)], {"p": 0.9}, check=check_dropout_mask),
]
SAMPLES["bias_add"] = [
    S([iv(2, 3), iv(3)],
      reference=lambda x, b, **a: build(x.shape, lambda i: item(x, i) + b[i[-1]]),
      dtypes=NUMERIC),
    S([u(2, 3, 2), u(3)], {"nchw": True},
      lambda x, b, **a: build(x.shape, lambda i: item(x, i) + b[i[1]])),
    S([u(2, 3), 0.5], {}, lambda x, b, **a: build(x.shape, lambda i: item(x, i) + b)),
]
SAMPLES["linear"] = [
    S([u(2, 3), u(3, 4), u(4)], reference=lambda x, w, b: matmul_ref(x, w) + b),
    S([iv(3, 2), iv(2, 4)], reference=lambda x, w: matmul_ref(x, w), dtypes=NUMERIC),
    S([u(2, 1, 3), u(3, 2), u(2)], reference=lambda x, w, b: matmul_ref(x, w) + b),
    S([u(2, 3), u(3, 2), 0.25], reference=lambda x, w, b: matmul_ref(x, w) + b),
]

# --- reductions ---------------------------------------------------------------------------------


def reduction_samples(name, f, make=u, dtypes=FLOATS, out_dtype=SAME, extra=None, **kw):
    """dims=None, a negative dim, several dims, and keep_dims=True over a size-1 dim."""
    extra = extra or [{}] * 4
    kw = {"dtypes": dtypes, "out_dtype": out_dtype, **kw}
    SAMPLES[name] = [
        S([make(2, 3, 4)], {"dims": None, **extra[0]}, red(f), **kw),
        S([make(2, 3, 4)], {"dims": (-1,), **extra[1]}, red(f), **kw),
        S([make(2, 3, 4)], {"dims": (0, 2), **extra[2]}, red(f), **kw),
        S([make(3, 1, 4)], {"dims": (1, -1), "keep_dims": True, **extra[3]}, red(f), **kw),
    ]
reduction_samples("sum", fsum_or_sum, make=iv, dtypes=NUMERIC, out_dtype=wide_int)
reduction_samples("mean", mean_of, make=iv, dtypes=NUMERIC, out_dtype=float_of)
reduction_samples("prod", math.prod, make=lambda *s: pos(*s, lo=0.6, hi=1.5))
add_samples("prod", S([iv(2, 3, 4, lo=1, hi=3)], {"dims": (0, -1)}, red(math.prod),
                      dtypes=INTS, out_dtype=wide_int))
SAMPLES["prod"].pop(2)  # keep 4 samples: the int one covers several dims
reduction_samples("max", max, make=iv, dtypes=NUMERIC, smooth=False)  # small ints: ties
reduction_samples("min", min, make=iv, dtypes=NUMERIC, smooth=False)
for _name, _f in (("max", max), ("min", min)):  # tie-free floats (the gradient suite's)
    SAMPLES[_name][2] = S([np.random.default_rng(5).permutation(24).reshape(2, 3, 4) * 0.37 - 4.0],
                          {"dims": (0, 2)}, red(_f))
_bc = [{}, {"bias_corrected": True}, {}, {"bias_corrected": True}]
reduction_samples("variance", variance_of, extra=_bc)
SAMPLES["variance"][3] = S([u(3, 2, 4)], {"dims": (1, -1), "keep_dims": True,
                                          "bias_corrected": True}, red(variance_of))
add_samples("variance", S([iv(2, 5)], {"dims": (1,)}, red(variance_of), dtypes=INTS,
                          out_dtype="float64"))
SAMPLES["variance"].pop(2)
reduction_samples("std", lambda v, bias_corrected=False: math.sqrt(variance_of(v, bias_corrected)),
                  extra=_bc)
SAMPLES["std"][3] = S([u(3, 2, 4)], {"dims": (1, -1), "keep_dims": True, "bias_corrected": True},
                      red(lambda v, bias_corrected: math.sqrt(variance_of(v, bias_corrected))))
reduction_samples("norm1", lambda v: math.fsum(abs(a) for a in v))
add_samples("norm1", S([iv(2, 3)], {"dims": (-1,)}, red(lambda v: float(sum(abs(a) for a in v))),
                       dtypes=INTS, out_dtype="float64"))
SAMPLES["norm1"].pop(2)
reduction_samples("norm2", lambda v: math.sqrt(math.fsum(a * a for a in v)))
reduction_samples("norm_max", lambda v: max(abs(a) for a in v))
reduction_samples("log_sum_exp", lambda v: math.log(math.fsum(math.exp(a) for a in v)))
add_samples("log_sum_exp", S([u(2, 3) + 100.0], {"dims": (1,)},
                             red(lambda v: math.log(math.fsum(math.exp(a) for a in v)))))
SAMPLES["log_sum_exp"].pop(2)


reduction_samples("all", all, make=truthy_block, dtypes=NUMERIC + ("bool",), out_dtype="bool")
reduction_samples("any", any, make=lambda *s: np.where(truthy_block(*s) == 0, 2.0, 0.0),
                  dtypes=NUMERIC + ("bool",), out_dtype="bool")
for _name, _pick in [("argmax", max), ("argmin", min)]:
    _ref = red(lambda v, _p=_pick: first_index(v, _p))
    SAMPLES[_name] = [
        S([iv(2, 3, 4)], {"dims": None}, _ref, dtypes=NUMERIC, out_dtype="int64"),  # ties
        S([u(2, 3, 4)], {"dims": (-1,)}, _ref, out_dtype="int64"),
        S([iv(3, 4, lo=-1, hi=1)], {"dims": (0,), "keep_dims": True}, _ref, dtypes=NUMERIC,
          out_dtype="int64"),
        S([u(2, 1, 3)], {"dims": None, "keep_dims": True}, _ref, out_dtype="int64"),
    ]


def _cum_samples(name, f, identity, make):
    def ref(x, *, axis=-1, exclusive=False, reverse=False):
        return scan(x, axis, f, identity, exclusive, reverse)
    SAMPLES[name] = [
        S([make(2, 3, 4)], {}, ref, dtypes=NUMERIC, out_dtype=wide_int),
        S([make(3, 4)], {"axis": 0, "exclusive": True}, ref, dtypes=NUMERIC, out_dtype=wide_int),
        S([make(2, 4, 1)], {"axis": 1, "reverse": True}, ref),
        S([make(2, 4)], {"axis": -1, "exclusive": True, "reverse": True}, ref),
    ]


_cum_samples("cumsum", lambda a, b: a + b, 0, iv)
_cum_samples("cumprod", lambda a, b: a * b, 1, lambda *s: iv(*s, lo=-2, hi=2))

# --- creation -------------------------------------------------------------------------------
_ALL_DT = NUMERIC + ("bool",)
SAMPLES["zeros"] = [
    S([], {"shape": (2, 3)}, lambda shape, dtype: build(shape, lambda i: 0), dtypes=_ALL_DT,
      dtype_attr="dtype"),
    S([], {"shape": (3,)}, lambda shape, dtype: build(shape, lambda i: 0), dtypes=(DEFAULT,),
      out_dtype="float32"),
    S([], {"shape": (), "dtype": "int64"}, lambda shape, dtype: np.array(0), dtypes=(DEFAULT,),
      out_dtype="int64"),
]
SAMPLES["ones"] = [
    S([], {"shape": (2, 1, 3)}, lambda shape, dtype: build(shape, lambda i: 1), dtypes=_ALL_DT,
      dtype_attr="dtype"),
    S([], {"shape": (4,)}, lambda shape, dtype: build(shape, lambda i: 1), dtypes=(DEFAULT,),
      out_dtype="float32"),
]
SAMPLES["full"] = [
    S([], {"shape": (2, 3), "value": 2.5},
      lambda shape, value, dtype: build(shape, lambda i: value),
      dtype_attr="dtype"),
    S([], {"shape": (3, 1), "value": -4}, lambda shape, value, dtype: build(shape, lambda i: value),
      dtypes=NUMERIC, dtype_attr="dtype"),
    S([], {"shape": (2,), "value": 7.0}, lambda shape, value, dtype: build(shape, lambda i: value),
      dtypes=(DEFAULT,), out_dtype="float32"),
]
_lin = (lambda start, stop, num, dtype=None:
        build((num,), lambda i: start + i[0] * (stop - start) / (num - 1) if num > 1 else start))
SAMPLES["linspace"] = [
    S([], {"start": 0.0, "stop": 1.0, "num": 5}, _lin, dtype_attr="dtype"),
    S([], {"start": -1.0, "stop": 2.0, "num": 7}, _lin, dtypes=(DEFAULT,), out_dtype="float32"),
    S([], {"start": 3.0, "stop": 5.0, "num": 1}, _lin, dtype_attr="dtype"),
]
SAMPLES["arange"] = [
    S([], {"start": 1, "stop": 7, "step": 2}, arange_ref, dtypes=(DEFAULT,), out_dtype="int64"),
    S([], {"start": 0.5, "stop": 2.0, "step": 0.25}, arange_ref, dtypes=(DEFAULT,),
      out_dtype="float32"),
    S([], {"start": 5}, arange_ref, dtypes=(DEFAULT,), out_dtype="int64"),
    S([], {"start": 10, "stop": 1, "step": -3}, arange_ref, dtypes=NUMERIC, dtype_attr="dtype"),
]
_eye = (lambda rows, cols=None, dtype=None:
        build((rows, rows if cols is None else cols), lambda i: 1 if i[0] == i[1] else 0))
SAMPLES["eye"] = [
    S([], {"rows": 3, "cols": 4}, _eye, dtypes=_ALL_DT, dtype_attr="dtype"),
    S([], {"rows": 2}, _eye, dtypes=(DEFAULT,), out_dtype="float32"),
]
SAMPLES["zeros_like"] = [
    S([u(2, 3)], {}, lambda x, dtype=None: build(x.shape, lambda i: 0), dtypes=FLOATS),
    S([iv(3, 1)], {"dtype": "int32"}, lambda x, dtype: build(x.shape, lambda i: 0),
      dtypes=NUMERIC, out_dtype="int32"),
]
SAMPLES["ones_like"] = [
    S([iv(2, 3)], {}, lambda x, dtype=None: build(x.shape, lambda i: 1), dtypes=NUMERIC),
    S([u(1, 4)], {"dtype": "float64"}, lambda x, dtype: build(x.shape, lambda i: 1),
      out_dtype="float64"),
]
SAMPLES["full_like"] = [
    S([u(2, 3)], {"value": 1.5}, lambda x, value, dtype=None: build(x.shape, lambda i: value)),
    S([u(3, 1)], {"value": 4.0, "dtype": "int64"},
      lambda x, value, dtype: build(x.shape, lambda i: value), out_dtype="int64"),
    S([iv(2, 2)], {"value": -2.0}, lambda x, value, dtype=None: build(x.shape, lambda i: value),
      dtypes=INTS),
]

# --- random -----------------------------------------------------------------------------------
SAMPLES["uniform"] = [
    S([], {"shape": (500,), "low": -1.0, "high": 3.0}, check=check_uniform, dtype_attr="dtype"),
    S([], {"shape": (2, 3)}, check=check_uniform, dtypes=(DEFAULT,), out_dtype="float32"),
]
SAMPLES["normal"] = [
    S([], {"shape": (400, 3), "mean": 2.0, "std": 0.5}, check=check_normal, dtype_attr="dtype"),
    S([], {"shape": (2, 1, 3)}, check=check_normal, dtypes=(DEFAULT,), out_dtype="float32"),
]
SAMPLES["bernoulli"] = [
    S([], {"shape": (2000,), "p": 0.3}, check=check_bernoulli,
      dtypes=FLOATS + ("int32", "bool"), dtype_attr="dtype"),
    S([], {"shape": (3, 2)}, check=check_bernoulli, dtypes=(DEFAULT,), out_dtype="float32"),
]
SAMPLES["truncated_normal"] = [
    S([], {"shape": (1500,), "mean": 1.0, "std": 2.0}, check=check_truncated, dtype_attr="dtype"),
]

# --- shape ops ----------------------------------------------------------------------------
SAMPLES["reshape"] = [
    S([iv(2, 3, 4)], {"shape": (4, 6)}, reshape_ref, dtypes=NUMERIC),
    S([u(2, 3, 4)], {"shape": (6, -1)}, reshape_ref),
    S([u(3, 1)], {"shape": (1, 3, 1)}, reshape_ref),
    S([u(2, 3, 4)], {"shape": (4, 6), "order": "f"}, reshape_ref),
]
SAMPLES["permute"] = [
    S([iv(2, 3, 4)], {"dims": (2, 0, 1)}, permute_ref, dtypes=NUMERIC),
    S([u(3, 1)], {"dims": (1, 0)}, permute_ref),
]
SAMPLES["transpose"] = [
    S([iv(2, 3, 4)], {}, lambda x: build(x.shape[::-1], lambda i: item(x, i[::-1])),
      dtypes=NUMERIC),
    S([u(1, 3)], {}, lambda x: build(x.shape[::-1], lambda i: item(x, i[::-1]))),
]
SAMPLES["expand_dims"] = [
    S([iv(2, 3)], {"axis": 1}, expand_ref, dtypes=NUMERIC),
    S([u(2, 3)], {"axis": -1}, expand_ref),
    S([u(3)], {"axis": 0}, expand_ref),
]
SAMPLES["squeeze"] = [
    S([iv(2, 1, 3, 1)], {}, squeeze_ref, dtypes=NUMERIC, dynamic_refuses=True),
    S([u(2, 1, 3, 1)], {"axis": (1,)}, squeeze_ref),
    S([u(2, 1, 3, 1)], {"axis": (-1, 1)}, squeeze_ref),
]
SAMPLES["flatten"] = [
    S([iv(2, 3, 4)], {}, lambda x, order="c": np.array(list(x.flat)), dtypes=NUMERIC),
    S([u(2, 3)], {"order": "f"},
      lambda x, order: np.array([item(x, i[::-1]) for i in np.ndindex(*x.shape[::-1])])),
]
SAMPLES["concat"] = [
    S([iv(2, 3), iv(1, 3), iv(3, 3)], {}, concat_ref, dtypes=NUMERIC),
    S([u(2, 1), u(2, 3)], {"axis": -1}, concat_ref),
    S([u(2, 2, 1), u(2, 2, 2)], {"axis": 2}, concat_ref),
]
SAMPLES["stack"] = [
    S([iv(2, 3), iv(2, 3), iv(2, 3)], {}, stack_ref, dtypes=NUMERIC),
    S([u(2, 3), u(2, 3)], {"axis": -1}, stack_ref),
    S([u(3, 1), u(3, 1)], {"axis": 1}, stack_ref),
]
SAMPLES["unstack"] = [
    S([iv(3, 2, 4)], {}, unstack_ref, dtypes=NUMERIC, dynamic_refuses=True),
    S([u(2, 4)], {"axis": -1}, unstack_ref),
    S([u(2, 1, 3)], {"axis": 1}, unstack_ref),
]
SAMPLES["split"] = [
    S([iv(6, 4)], {"num_or_sizes": (3,)}, split_ref, dtypes=NUMERIC),
    S([u(2, 7)], {"num_or_sizes": (2, -1, 1), "axis": 1}, split_ref),
    S([u(4, 6)], {"num_or_sizes": (2,), "axis": -1}, split_ref),
]
def _dynamic_partition_ref(x, p, *, num_partitions):
    """Part i: the slices x[j] (j over p's indices, row-major) with p[j] == i, in order."""
    slots = list(np.ndindex(*p.shape))
    return tuple(np.array([x[j] for j in slots if p[j] == i], dtype=x.dtype).reshape(
        (-1,) + x.shape[p.ndim:]) for i in range(num_partitions))


SAMPLES["dynamic_partition"] = [
    S([iv(5, 2), idx([1, 0, 2, 1, 1])], {"num_partitions": 3}, _dynamic_partition_ref,
      dtypes=NUMERIC),
    S([u(2, 3, 2), idx([[0, 2, 0], [0, 0, 2]], np.int32)], {"num_partitions": 3},
      _dynamic_partition_ref),  # 2-D partitions; part 1 is empty
]
SAMPLES["slice"] = [
    S([iv(4, 5)], {"begin": (1, 0), "size": (2, -1)}, slice_ref, dtypes=NUMERIC),
    S([u(3, 4, 2)], {"begin": (0, 1, 1), "size": (3, 2, 1)}, slice_ref),
]
SAMPLES["strided_slice"] = [
    # x[1, ::2, None, ...] on (4, 5, 3) -> (3, 1, 3)
    S([iv(4, 5, 3)], {"index": (1, ("slice", None, None, 2), "newaxis", "ellipsis")},
      lambda x, index: build((3, 1, 3), lambda i: item(x, (1, 2 * i[0], i[2]))), dtypes=NUMERIC),
    # x[::-1, ..., 0] on (3, 2, 4) -> (3, 2)
    S([u(3, 2, 4)], {"index": (("slice", None, None, -1), "ellipsis", 0)},
      lambda x, index: build((3, 2), lambda i: item(x, (2 - i[0], i[1], 0)))),
    # x[1:3, -1] on (4, 5) -> (2,)
    S([u(4, 5)], {"index": (("slice", 1, 3, None), -1)},
      lambda x, index: build((2,), lambda i: item(x, (1 + i[0], 4)))),
]
SAMPLES["gather"] = [
    S([iv(4, 3), idx([[2, 0], [3, 3]])], {},
      lambda x, ix, axis=0: build((2, 2, 3), lambda i: item(x, (ix[i[0], i[1]], i[2]))),
      dtypes=NUMERIC),
    S([u(4, 3), idx([-1, 0], np.int32)], {"axis": 1},  # negative indices wrap
      lambda x, ix, axis: build((4, 2), lambda i: item(x, (i[0], ix[i[1]] % 3)))),
    S([u(5), idx(2)], {}, lambda x, ix, axis=0: np.array(x[int(ix)])),
]
SAMPLES["scatter_add"] = [
    S([iv(5, 3), idx([1, 3, 1]), iv(3, 3)], {}, scatter_ref("add"), dtypes=NUMERIC),  # dup adds
    S([u(4, 2), idx([[0], [-1]]), u(1, 2)], {}, scatter_ref("add")),  # broadcast updates
]
SAMPLES["scatter_update"] = [
    S([iv(5, 3), idx([0, 2, 0]), iv(3, 3)], {}, scatter_ref("update"), dtypes=NUMERIC),  # last wins
    S([u(4, 2), idx([3, 1], np.int32), u(2, 2)], {}, scatter_ref("update")),
]
SAMPLES["tile"] = [
    S([iv(2, 3)], {"reps": (2, 1)}, tile_ref, dtypes=NUMERIC),
    S([u(2, 3)], {"reps": (2, 1, 2)}, tile_ref),
]
SAMPLES["repeat"] = [
    S([iv(2, 3)], {"repeats": 2}, repeat_ref, dtypes=NUMERIC),
    S([u(2, 3)], {"repeats": 3, "axis": 1}, repeat_ref),
    S([u(2, 1)], {"repeats": 2, "axis": -2}, repeat_ref),
]
SAMPLES["broadcast_to"] = [
    S([iv(3, 1)], {"shape": (2, 3, 4)}, broadcast_ref, dtypes=NUMERIC),
    S([np.array(1.5)], {"shape": (2, 2)}, broadcast_ref),
    S([u(1, 3)], {"shape": (2, 3)}, broadcast_ref),
]
SAMPLES["pad"] = [
    S([iv(2, 3)], {"paddings": ((1, 0), (2, 1)), "constant": 1.0}, pad_ref, dtypes=NUMERIC),
    S([u(3, 4)], {"paddings": ((1, 1), (2, 2)), "mode": "reflect"}, pad_ref),
    S([u(3, 4)], {"paddings": ((2, 1), (1, 0)), "mode": "symmetric"}, pad_ref),
    S([u(2, 1)], {"paddings": ((0, 0), (1, 1)), "constant": -2.5}, pad_ref),
]
SAMPLES["reverse"] = [
    S([iv(2, 3, 4)], {"dims": (0, 2)}, reverse_ref, dtypes=NUMERIC),
    S([u(3, 1)], {"dims": (-2,)}, reverse_ref),
]
SAMPLES["one_hot"] = [
    S([idx([[0, 2], [1, 3]])], {"depth": 4}, one_hot_ref, dtypes=_ALL_DT, dtype_attr="dtype"),
    S([idx([1, 5, 0, -1])], {"depth": 3, "axis": 0, "on": 2.0, "off": -1.0}, one_hot_ref,
      dtype_attr="dtype"),  # out-of-range and negative indices: all off
    S([idx([2, 0], np.int32)], {"depth": 3}, one_hot_ref, dtypes=(DEFAULT,), out_dtype="float32"),
]

# --- gradient helpers -------------------------------------------------------------------------
SAMPLES["reduce_to_like"] = [
    S([iv(2, 3, 4), iv(3, 1)], {}, reduce_to_like_ref, dtypes=NUMERIC),  # keeps g's dtype
    S([u(3, 4), u(4)], {}, reduce_to_like_ref),
    S([u(2, 3), u(2, 3)], {}, reduce_to_like_ref),
    S([u(2, 3), 1.0], {}, reduce_to_like_ref),  # a scalar `like`: sum everything
]
SAMPLES["broadcast_like"] = [
    S([iv(3, 1), iv(2, 3, 4)], {}, broadcast_like_ref, dtypes=NUMERIC),
    S([u(4), u(3, 1)], {}, broadcast_like_ref),
    S([u(2, 3), u(2, 3)], {}, broadcast_like_ref),
]
SAMPLES["reshape_like"] = [
    S([iv(2, 6), iv(3, 4)], {}, reshape_like_ref, dtypes=NUMERIC),  # keeps g's dtype
    S([u(2, 3, 2), u(12)], {}, reshape_like_ref),
    S([u(1), 2.0], {}, reshape_like_ref),  # to a scalar's shape
]
SAMPLES["slice_grad"] = [
    # like[1, ::2, None, ...] on (4, 5, 3): g (3, 1, 3)
    S([u(3, 1, 3), u(4, 5, 3)], {"index": (1, ("slice", None, None, 2), "newaxis", "ellipsis")},
      slice_grad_ref),
    S([u(3, 2), u(3, 2, 4)], {"index": (("slice", None, None, -1), "ellipsis", 0)},
      slice_grad_ref),
    S([u(2), u(4, 5)], {"index": (("slice", 1, 3, None), -1)}, slice_grad_ref),
]
SAMPLES["pad_grad"] = [
    S([u(4, 6), u(3, 3)], {"paddings": ((1, 0), (2, 1))}, pad_grad_ref),
    S([u(5, 8), u(3, 4)], {"paddings": ((1, 1), (2, 2)), "mode": "reflect"}, pad_grad_ref),
    S([u(9, 4), u(2, 4)], {"paddings": ((3, 4), (0, 0)), "mode": "symmetric"}, pad_grad_ref),
    S([u(12), u(3)], {"paddings": ((4, 5),), "mode": "reflect"}, pad_grad_ref),  # re-reflected
]


# Some families keep their rows in files of their own: ``op_samples_<family>.py`` exports
# ``<family>_samples(S) -> rows``.
def _load_rows(module: str, fn: str) -> None:
    try:  # rootdir-relative import (tests/ is not a package) ...
        rows = importlib.import_module(module)
    except ImportError:  # ... or tests/ became one
        rows = importlib.import_module(f".{module}", __package__)
    SAMPLES.update(getattr(rows, fn)(S))


_load_rows("op_samples_fft", "fft_samples")  # (here: the sample inputs share one seeded stream)
SAMPLES["split_like"] = [
    S([u(2, 6), u(2, 1), u(2, 3), u(2, 2)], {"axis": 1}, split_like_ref),
    S([iv(5, 2), iv(2, 2), iv(3, 2)], {}, split_like_ref, dtypes=NUMERIC),
    S([u(3, 2), u(3, 2)], {"axis": -2}, split_like_ref),
]
# every other ``op_samples_<family>.py`` beside this file, in name order
for _module in sorted(p.stem for p in pathlib.Path(__file__).parent.glob("op_samples_*.py")):
    if _module != "op_samples_fft":
        _load_rows(_module, _module.removeprefix("op_samples_") + "_samples")
