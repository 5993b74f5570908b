"""Elementwise ops: unary math, activations, binary arithmetic/comparison/logic, where, clip, cast.

Each op is one line of numpy. Constants are Python floats on purpose: they are *weak*
(NEP 50), so float32 inputs stay float32.
"""
from __future__ import annotations

import math

import numpy as np

from .families import Attr, REQUIRED, binary, elementwise, unary
from .registry import TensorType, define

_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)

_erf_f64 = np.frompyfunc(math.erf, 1, 1)


def _float_dtype(x) -> np.dtype:
    """Dtype a float-valued numpy ufunc would give for ``x`` (ints -> float64, f16 stays)."""
    return np.result_type(np.asarray(x).dtype, np.float16)


def _erf(x):
    # numpy has no erf; math.erf is exact to float64. The compiler carries a fast version.
    dt = _float_dtype(x)
    return np.asarray(_erf_f64(np.asarray(x, dtype=np.float64)), dtype=np.float64).astype(dt, copy=False)


def _sigmoid(x):
    # exp of -|x| never overflows; both branches are accurate in relative terms.
    e = np.exp(-np.abs(x))
    return np.where(np.greater_equal(x, 0), 1.0 / (1.0 + e), e / (1.0 + e))


def _softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


def _round_half_away(x):
    # Not floor(|x| + 0.5): that addition rounds (0.49999997 + 0.5 -> 1 in float32, and odd
    # values above 2**23 / 2**52 go to the next even one). The fraction x - trunc(x) is exact.
    t = np.trunc(x)
    return np.where(np.greater_equal(np.abs(x - t), 0.5), t + np.sign(x), t)


#: gelu and swish are x * cdf(x), and the cdf is exactly 0 below these points in every float
#: format (1 + tanh/erf rounds to 0; exp(-800) is 0 even in float64). Clamping x there changes
#: no finite result and gives the limit -0.0 at -inf instead of -inf * 0 = NaN: the value the
#: fused kernels give.
_GELU_FLOOR, _SWISH_FLOOR = -40.0, -800.0


def _gelu(x, *, approximate):
    x = np.maximum(x, _GELU_FLOOR)  # NaN stays NaN
    if approximate:
        return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1.0 + _erf(x * _INV_SQRT2))


def _swish(x):
    x = np.maximum(x, _SWISH_FLOOR)
    return x * _sigmoid(x)


def _softsign(x):
    # the limit +-1 at +-inf (not inf / inf = NaN), like the fused kernels
    return np.where(np.isinf(x), np.sign(x), x / (1.0 + np.abs(x)))


def _relu(x, *, cutoff):
    if cutoff == 0.0:
        return np.maximum(x, 0)
    return np.where(np.greater(x, cutoff), x, 0).astype(np.asarray(x).dtype, copy=False)


_ALPHA = {"alpha": (Attr.FLOAT, 0.01)}

# --- unary math ---------------------------------------------------------------------------
unary("neg", np.negative, doc="Elementwise negation, ``-x``.")
unary("abs", np.abs, doc="Elementwise absolute value.")
unary("sign", np.sign, doc="Elementwise sign (-1, 0, 1).")
unary("exp", np.exp, doc="Elementwise ``e**x``.")
unary("expm1", np.expm1, doc="Elementwise ``exp(x) - 1``, accurate near 0.")
unary("log", np.log, doc="Elementwise natural logarithm.")
unary("log1p", np.log1p, doc="Elementwise ``log(1 + x)``, accurate near 0.")
unary("sqrt", np.sqrt, doc="Elementwise square root.")
unary("rsqrt", lambda x: 1.0 / np.sqrt(x), doc="Elementwise ``1 / sqrt(x)``.")
unary("square", np.square, doc="Elementwise ``x * x``.")
unary("reciprocal", lambda x: np.true_divide(1, x), doc="Elementwise ``1 / x`` (true division).")
unary("sin", np.sin, doc="Elementwise sine.")
unary("cos", np.cos, doc="Elementwise cosine.")
unary("tan", np.tan, doc="Elementwise tangent.")
unary("asin", np.arcsin, doc="Elementwise inverse sine.")
unary("acos", np.arccos, doc="Elementwise inverse cosine.")
unary("atan", np.arctan, doc="Elementwise inverse tangent.")
unary("sinh", np.sinh, doc="Elementwise hyperbolic sine.")
unary("cosh", np.cosh, doc="Elementwise hyperbolic cosine.")
unary("tanh", np.tanh, doc="Elementwise hyperbolic tangent.")
unary("floor", np.floor, doc="Elementwise floor.")
unary("ceil", np.ceil, doc="Elementwise ceiling.")
unary("round", _round_half_away, doc="Elementwise rounding, halves away from zero (like ND4J).")
unary("erf", _erf, doc="Elementwise Gauss error function.")
unary("isnan", np.isnan, doc="Elementwise NaN test (bool result).")
unary("isinf", np.isinf, doc="Elementwise infinity test (bool result).")
unary("isfinite", np.isfinite, doc="Elementwise finiteness test (bool result).")
unary("logical_not", np.logical_not, doc="Elementwise logical not (bool result).")

# --- activations (nn namespace) -------------------------------------------------------------
unary("sigmoid", _sigmoid, namespace="nn", doc="Logistic sigmoid ``1 / (1 + exp(-x))``.")
unary("softplus", _softplus, namespace="nn", doc="``log(1 + exp(x))``, overflow-free.")
unary("softsign", _softsign, namespace="nn", doc="``x / (1 + |x|)`` (+-1 at +-inf).")
unary("relu", _relu, namespace="nn", attrs={"cutoff": (Attr.FLOAT, 0.0)},
      doc="Rectified linear unit: ``x`` where ``x > cutoff``, else 0.")
unary("relu6", lambda x: np.clip(x, 0, 6), namespace="nn", doc="``min(max(x, 0), 6)``.")
unary("leaky_relu", lambda x, *, alpha: np.where(np.greater_equal(x, 0), x, alpha * x),
      namespace="nn", attrs=_ALPHA, nd4j="leakyRelu", doc="``x`` if ``x >= 0`` else ``alpha * x``.")
unary("elu", lambda x, *, alpha: np.where(np.greater(x, 0), x, alpha * np.expm1(np.minimum(x, 0))),
      namespace="nn", attrs={"alpha": (Attr.FLOAT, 1.0)}, doc="Exponential linear unit.")
unary("selu", lambda x: _SELU_SCALE * np.where(np.greater(x, 0), x,
                                               _SELU_ALPHA * np.expm1(np.minimum(x, 0))),
      namespace="nn", doc="Scaled exponential linear unit.")
unary("gelu", _gelu, namespace="nn", attrs={"approximate": (Attr.BOOL, True)},
      doc="Gaussian error linear unit; ``approximate=True`` uses the tanh form (as JAX), "
          "``False`` the exact erf form (ND4J's precise_gelu). ``gelu(-inf)`` is -0.0.")
unary("swish", _swish, namespace="nn", aliases=("silu",),
      doc="``x * sigmoid(x)`` (also called SiLU); ``swish(-inf)`` is -0.0.")
unary("hard_sigmoid", lambda x: np.clip(0.2 * x + 0.5, 0.0, 1.0), namespace="nn",
      nd4j="hardSigmoid", doc="``clip(0.2 * x + 0.5, 0, 1)`` (ND4J's definition).")
unary("hard_tanh", lambda x: np.clip(x, -1, 1), namespace="nn", nd4j="hardTanh",
      doc="``clip(x, -1, 1)``.")
unary("log_sigmoid", lambda x: -_softplus(-x), namespace="nn", nd4j="logSigmoid",
      doc="``log(sigmoid(x))``, overflow-free.")

# --- binary -------------------------------------------------------------------------------
binary("add", np.add, doc="Elementwise ``x + y`` with broadcasting.")
binary("sub", np.subtract, doc="Elementwise ``x - y`` with broadcasting.")
binary("mul", np.multiply, doc="Elementwise ``x * y`` with broadcasting.")
binary("div", np.true_divide, doc="Elementwise true division ``x / y`` with broadcasting.")
binary("rsub", lambda x, y: np.subtract(y, x), doc="Reversed subtraction ``y - x``.")
binary("rdiv", lambda x, y: np.true_divide(y, x), doc="Reversed division ``y / x``.")
binary("pow", np.power, doc="Elementwise ``x ** y``.")
binary("maximum", np.maximum, nd4j="max", doc="Elementwise maximum (NaN propagates).")
binary("minimum", np.minimum, nd4j="min", doc="Elementwise minimum (NaN propagates).")
binary("floor_mod", np.mod, nd4j="floorMod", doc="Remainder with the sign of ``y`` (Python ``%``).")
binary("floor_div", np.floor_divide, nd4j="floorDiv", doc="Floor division (Python ``//``).")
elementwise("atan2", ["y", "x"], np.arctan2, doc="Elementwise ``atan(y / x)`` in the right quadrant.")
binary("squared_difference", lambda x, y: np.square(np.subtract(x, y)), nd4j="squaredDifference",
       doc="Elementwise ``(x - y) ** 2``.")
binary("eq", np.equal, doc="Elementwise ``x == y`` (bool result).")
binary("neq", np.not_equal, doc="Elementwise ``x != y`` (bool result).")
binary("gt", np.greater, doc="Elementwise ``x > y`` (bool result).")
binary("gte", np.greater_equal, doc="Elementwise ``x >= y`` (bool result).")
binary("lt", np.less, doc="Elementwise ``x < y`` (bool result).")
binary("lte", np.less_equal, doc="Elementwise ``x <= y`` (bool result).")
binary("logical_and", np.logical_and, doc="Elementwise logical and (bool result).")
binary("logical_or", np.logical_or, doc="Elementwise logical or (bool result).")
binary("logical_xor", np.logical_xor, doc="Elementwise logical xor (bool result).")

# --- other elementwise ------------------------------------------------------------------------
elementwise("where", ["condition", "x", "y"], lambda c, x, y: np.where(c, x, y), namespace="base",
            method=False, doc="Elementwise select: ``x`` where ``condition`` else ``y``.")
unary("clip_by_value", lambda x, *, clip_min, clip_max: np.clip(x, clip_min, clip_max),
      attrs={"clip_min": (Attr.FLOAT, REQUIRED), "clip_max": (Attr.FLOAT, REQUIRED)},
      nd4j="clipByValue", doc="Clip values to ``[clip_min, clip_max]``.")


def _cast_infer(types: list[TensorType], attrs) -> TensorType:
    return TensorType(types[0].shape, attrs.dtype)


define("cast", ["x"], _cast_infer, lambda x, *, dtype: np.asarray(x).astype(dtype),
       attrs={"dtype": (Attr.DTYPE, REQUIRED)}, namespace="base", nd4j="castTo",
       elementwise=True, doc="Convert to another data type (numpy ``astype`` semantics).")
