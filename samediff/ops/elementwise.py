"""Elementwise ops: unary math, activations, binary arithmetic/comparison/logic, where, clip, cast.

Each op is one definition: its numpy implementation (one line, mostly), and with it the
scalar expression fused kernels compute per element (``scalar=``, see ``registry.py``; or
``unfused=`` saying why there is none), ``exact=True`` where that expression performs numpy's
IEEE operations in numpy's order (kernels then equal the eager op bit for bit), and for the
newer ops their gradient rule (``grad=``; the older ones have theirs in
``grads_elementwise.py``, one ``unary_grad`` line each). Constants are Python floats on
purpose: they are *weak* (NEP 50), so float32 inputs stay float32.
"""
from __future__ import annotations

import math

import numpy as np

from .call import op
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


#: hard_swish is x * 0 and mish ~ x exp(x) = -0.0 for every x below these points: clamping x
#: there changes no finite result and gives the limit -0.0 at -inf (not -inf * 0 = NaN).
_HARD_SWISH_FLOOR, _MISH_FLOOR = -4.0, -800.0
_LN2 = math.log(2.0)


def _hard_swish(x):
    x = np.maximum(x, _HARD_SWISH_FLOOR)
    return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0


def _mish(x):
    x = np.maximum(x, _MISH_FLOOR)
    return x * np.tanh(_softplus(x))


def _floor_divide(x, y):
    """numpy's floor_divide, except for an infinite operand against a finite nonzero one, where
    the array API standard (and ``floor(x / y)``) gives ``inf // 2 == inf`` and
    ``1 // -inf == -0.0`` (numpy and Python give nan and -1.0). Only arrays holding an infinity
    pay for the fix-up."""
    q = np.floor_divide(x, y)
    if q.dtype.kind != "f":
        return q
    x_inf, y_inf = np.isinf(x), np.isinf(y)
    if not (np.any(x_inf) or np.any(y_inf)):
        return q
    finite_nonzero = [np.isfinite(v) & (v != 0) for v in (x, y)]
    special = (x_inf & finite_nonzero[1]) | (finite_nonzero[0] & y_inf)
    return np.where(special, np.true_divide(x, y), q).astype(q.dtype, copy=False)


def _relu(x, *, cutoff):
    if cutoff == 0.0:
        return np.maximum(x, 0)
    return np.where(np.greater(x, cutoff), x, 0).astype(np.asarray(x).dtype, copy=False)


# --- scalar expressions: source of one element (the emitter protocol is in registry.py) -------


def _fn(name):
    """The kernel dtype's own math function: ``exp_f32`` (vectorizable) or ``exp_f64`` (libm)."""
    return lambda e, x: f"{e.f(name)}({x})"


def _math(name):
    """Python's ``math.<name>`` (Numba calls libm in the argument's precision)."""
    return lambda e, x: f"math.{name}({x})"


def _np(name):
    return lambda e, x: f"np.{name}({x})"


def _infix(template):
    return lambda e, x, y: template.format(x=x, y=y)


def _clip(x, lo, hi):
    return f"np.minimum(np.maximum({x}, {lo}), {hi})"


def _hard_swish_expr(e, x):
    m = f"np.maximum({x}, {e.c(_HARD_SWISH_FLOOR)})"
    return f"(({m} * {_clip(f'{m} + {e.c(3)}', e.c(0), e.c(6))}) / {e.c(6)})"


def _mish_expr(e, x):
    m = f"np.maximum({x}, {e.c(_MISH_FLOOR)})"
    return f"({m} * {e.f('tanh')}({e.f('softplus')}({m})))"


# --- gradients of the ops defined here (the others: grads_elementwise.py) -------------------


def _hard_swish_grad(x, y, g, a):
    # PyTorch's convention: 0 below -3, x/3 + 1/2 on [-3, 3] (both ends included), 1 above
    return op.where(x < -3.0, 0.0, op.where(x <= 3.0, g * (x / 3.0 + 0.5), g))


def _mish_grad(x, y, g, a):
    # d/dx x tanh(sp(x)) = t + x (1 - t^2) sigmoid(x); clipped so that x (1 - t^2) is 0, not
    # inf * 0, at +-inf (the derivative is exactly 0 / 1 beyond +-800 in every float format)
    x = op.clip_by_value(x, clip_min=_MISH_FLOOR, clip_max=-_MISH_FLOOR)
    t = x.softplus().tanh()
    return g * (t + x * (1.0 - t * t) * x.sigmoid())


_ALPHA = {"alpha": (Attr.FLOAT, 0.01)}

# --- unary math -----------------------------------------------------------------------------
unary("neg", np.negative, scalar=lambda e, x: f"(-{x})", exact=True,
      doc="Elementwise negation, ``-x``.")
unary("abs", np.abs, scalar=lambda e, x: f"abs({x})", exact=True, doc="Elementwise absolute value.")
unary("sign", np.sign, unfused="no kernel expression yet: numpy's results for NaN and +-0 need "
      "a chain of selects", doc="Elementwise sign (-1, 0, 1).")
# complex parts: fresh arrays (numpy's real/imag of a complex array are views into it); on
# real inputs real/conj are the identity, imag is 0 and angle 0 or pi
unary("real", lambda x: np.array(np.real(x)), scalar=lambda e, x: f"({x})", exact=True,
      doc="Real part (the identity on real inputs).")
unary("imag", lambda x: np.array(np.imag(x)), unfused="0 for real inputs (not 0 * x: that "
      "is NaN at infinity); complex values are not fused",
      doc="Imaginary part (zeros on real inputs).")
unary("conj", np.conjugate, scalar=lambda e, x: f"({x})", exact=True,
      doc="Complex conjugate (the identity on real inputs).")
# JAX's stop_gradient: the identity forward (a fresh array, as every elementwise op gives),
# a zero gradient backward, so `x * stop_gradient(x)` differentiates to `x`, not `2 x`
unary("stop_gradient", lambda x: np.array(x, copy=True), scalar=lambda e, x: f"({x})",
      exact=True, grad=lambda x, y, g, a: op.zeros_like(g), stops_gradient=True,
      namespace="base", doc="The identity, with a zero gradient: values that flow through it "
      "are constants to ``nd.grad`` and SameDiff's gradients (JAX's ``stop_gradient``).")
unary("angle", np.angle, unfused="complex argument (atan2 of the parts); complex values are "
      "not fused", doc="Argument of each value in radians (0 or pi on real inputs).")
unary("exp", np.exp, scalar=_fn("exp"), doc="Elementwise ``e**x``.")
unary("expm1", np.expm1, scalar=_fn("expm1"), doc="Elementwise ``exp(x) - 1``, accurate near 0.")
unary("log", np.log, scalar=_fn("log"), doc="Elementwise natural logarithm.")
unary("log1p", np.log1p, scalar=_fn("log1p"), doc="Elementwise ``log(1 + x)``, accurate near 0.")
unary("sqrt", np.sqrt, scalar=_math("sqrt"), exact=True, doc="Elementwise square root.")
unary("rsqrt", lambda x: 1.0 / np.sqrt(x), scalar=lambda e, x: f"({e.c(1)} / math.sqrt({x}))",
      exact=True, doc="Elementwise ``1 / sqrt(x)``.")
unary("square", np.square, scalar=lambda e, x: f"({x} * {x})", exact=True,
      doc="Elementwise ``x * x``.")
unary("reciprocal", lambda x: np.true_divide(1, x), scalar=lambda e, x: f"({e.c(1)} / {x})",
      exact=True, doc="Elementwise ``1 / x`` (true division).")
unary("sin", np.sin, scalar=_math("sin"), doc="Elementwise sine.")
unary("cos", np.cos, scalar=_math("cos"), doc="Elementwise cosine.")
unary("tan", np.tan, scalar=_math("tan"), doc="Elementwise tangent.")
unary("asin", np.arcsin, scalar=_math("asin"), doc="Elementwise inverse sine.")
unary("acos", np.arccos, scalar=_math("acos"), doc="Elementwise inverse cosine.")
unary("atan", np.arctan, scalar=_math("atan"), doc="Elementwise inverse tangent.")
unary("sinh", np.sinh, scalar=_math("sinh"), doc="Elementwise hyperbolic sine.")
unary("cosh", np.cosh, scalar=_math("cosh"), doc="Elementwise hyperbolic cosine.")
unary("tanh", np.tanh, scalar=_fn("tanh"), doc="Elementwise hyperbolic tangent.")
unary("asinh", np.arcsinh, scalar=_math("asinh"), doc="Elementwise inverse hyperbolic sine.")
unary("acosh", np.arccosh, scalar=_math("acosh"),
      doc="Elementwise inverse hyperbolic cosine (NaN below 1).")
unary("atanh", np.arctanh, scalar=_math("atanh"),
      doc="Elementwise inverse hyperbolic tangent (+-inf at +-1, NaN beyond).")
unary("floor", np.floor, scalar=_np("floor"), exact=True, doc="Elementwise floor.")
unary("ceil", np.ceil, scalar=_np("ceil"), exact=True, doc="Elementwise ceiling.")
unary("round", _round_half_away, unfused="no kernel expression yet: halves away from zero "
      "need a select on the exact fraction",
      doc="Elementwise rounding, halves away from zero (like ND4J).")
unary("erf", _erf, scalar=_fn("erf"), doc="Elementwise Gauss error function.")
unary("isnan", np.isnan, scalar=_np("isnan"), exact=True,
      doc="Elementwise NaN test (bool result).")
unary("isinf", np.isinf, scalar=_np("isinf"), exact=True,
      doc="Elementwise infinity test (bool result).")
unary("isfinite", np.isfinite, scalar=_np("isfinite"), exact=True,
      doc="Elementwise finiteness test (bool result).")
unary("signbit", np.signbit, scalar=lambda e, x: f"(math.copysign(1.0, {x}) < 0.0)", exact=True,
      doc="Elementwise sign bit (True for -0.0 and negative NaNs too; bool result).")
unary("logical_not", np.logical_not, scalar=lambda e, x: f"(not {x})", exact=True,
      doc="Elementwise logical not (bool result).")
unary("log2", np.log2, scalar=_math("log2"), grad=lambda x, y, g, a: g / (x * _LN2),
      doc="Elementwise base-2 logarithm (``log2(8) == 3`` exactly).")
unary("exp2", np.exp2, scalar=_np("exp2"), grad=lambda x, y, g, a: g * y * _LN2,
      doc="Elementwise ``2**x``.")
unary("cube", lambda x: x * x * x, scalar=lambda e, x: f"({x} * {x} * {x})", exact=True,
      grad=lambda x, y, g, a: 3.0 * g * x * x, doc="Elementwise ``x * x * x`` (ND4J's cube).")

# --- activations (nn namespace) -------------------------------------------------------------
unary("sigmoid", _sigmoid, namespace="nn", scalar=_fn("sigmoid"),
      doc="Logistic sigmoid ``1 / (1 + exp(-x))``.")
unary("softplus", _softplus, namespace="nn", scalar=_fn("softplus"),
      doc="``log(1 + exp(x))``, overflow-free.")
# +-1 at +-inf (the limit), not inf / inf = NaN: the same select as the eager op
unary("softsign", _softsign, namespace="nn", exact=True,
      scalar=lambda e, x: (f"(math.copysign({e.c(1)}, {x}) if np.isinf({x}) else "
                           f"({x} / ({e.c(1)} + abs({x}))))"),
      doc="``x / (1 + |x|)`` (+-1 at +-inf).")
unary("relu", _relu, namespace="nn", attrs={"cutoff": (Attr.FLOAT, 0.0)}, exact=True,
      scalar=lambda e, x: (f"np.maximum({x}, {e.c(0)})" if e.attrs.cutoff == 0.0
                           else f"({x} if {x} > {e.a('cutoff')} else {e.c(0)})"),
      doc="Rectified linear unit: ``x`` where ``x > cutoff``, else 0.")
unary("relu6", lambda x: np.clip(x, 0, 6), namespace="nn", exact=True,
      scalar=lambda e, x: _clip(x, e.c(0), e.c(6)), doc="``min(max(x, 0), 6)``.")
unary("leaky_relu", lambda x, *, alpha: np.where(np.greater_equal(x, 0), x, alpha * x),
      namespace="nn", attrs=_ALPHA, exact=True,
      scalar=lambda e, x: f"({x} if {x} >= {e.c(0)} else {e.a('alpha')} * {x})",
      doc="``x`` if ``x >= 0`` else ``alpha * x``.")
unary("elu", lambda x, *, alpha: np.where(np.greater(x, 0), x, alpha * np.expm1(np.minimum(x, 0))),
      namespace="nn", attrs={"alpha": (Attr.FLOAT, 1.0)},
      scalar=lambda e, x: (f"({x} if {x} > {e.c(0)} else "
                           f"{e.a('alpha')} * {e.f('expm1')}(min({x}, {e.c(0)})))"),
      doc="Exponential linear unit.")
unary("selu", lambda x: _SELU_SCALE * np.where(np.greater(x, 0), x,
                                               _SELU_ALPHA * np.expm1(np.minimum(x, 0))),
      namespace="nn",
      scalar=lambda e, x: (f"({e.c(_SELU_SCALE)} * ({x} if {x} > {e.c(0)} else "
                           f"{e.c(_SELU_ALPHA)} * {e.f('expm1')}(min({x}, {e.c(0)}))))"),
      doc="Scaled exponential linear unit.")
unary("gelu", _gelu, namespace="nn", attrs={"approximate": (Attr.BOOL, True)},
      scalar=lambda e, x: f"{e.f('gelu_tanh' if e.attrs.approximate else 'gelu_erf')}({x})",
      doc="Gaussian error linear unit; ``approximate=True`` uses the tanh form (as JAX), "
          "``False`` the exact erf form (ND4J's precise_gelu). ``gelu(-inf)`` is -0.0.")
unary("swish", _swish, namespace="nn", scalar=_fn("swish"),
      doc="``x * sigmoid(x)`` (also called SiLU); ``swish(-inf)`` is -0.0.")
unary("hard_sigmoid", lambda x: np.clip(0.2 * x + 0.5, 0.0, 1.0), namespace="nn", exact=True,
      scalar=lambda e, x: _clip(f"{e.c(0.2)} * {x} + {e.c(0.5)}", e.c(0), e.c(1)),
      doc="``clip(0.2 * x + 0.5, 0, 1)`` (ND4J's definition).")
unary("hard_tanh", lambda x: np.clip(x, -1, 1), namespace="nn", exact=True,
      scalar=lambda e, x: _clip(x, e.c(-1), e.c(1)), doc="``clip(x, -1, 1)``.")
unary("log_sigmoid", lambda x: -_softplus(-x), namespace="nn",
      scalar=lambda e, x: f"(-{e.f('softplus')}(-{x}))", doc="``log(sigmoid(x))``, overflow-free.")
unary("hard_swish", _hard_swish, namespace="nn", exact=True,
      scalar=_hard_swish_expr, grad=_hard_swish_grad,
      doc="``x * relu6(x + 3) / 6`` (PyTorch's hardswish, and its gradient: 0 below -3, "
          "``x / 3 + 1/2`` on [-3, 3], 1 above); ``hard_swish(-inf)`` is -0.0.")
unary("mish", _mish, namespace="nn", scalar=_mish_expr, grad=_mish_grad,
      doc="``x * tanh(softplus(x))``; ``mish(-inf)`` is -0.0.")

# --- binary -------------------------------------------------------------------------------
binary("add", np.add, scalar=_infix("({x} + {y})"), exact=True,
       doc="Elementwise ``x + y`` with broadcasting.")
binary("sub", np.subtract, scalar=_infix("({x} - {y})"), exact=True,
       doc="Elementwise ``x - y`` with broadcasting.")
binary("mul", np.multiply, scalar=_infix("({x} * {y})"), exact=True,
       doc="Elementwise ``x * y`` with broadcasting.")
binary("div", np.true_divide, scalar=_infix("({x} / {y})"), exact=True,
       doc="Elementwise true division ``x / y`` with broadcasting.")
binary("rsub", lambda x, y: np.subtract(y, x), scalar=_infix("({y} - {x})"), exact=True,
       into=lambda out, x, y: np.subtract(y, x, out=out), doc="Reversed subtraction ``y - x``.")
binary("rdiv", lambda x, y: np.true_divide(y, x), scalar=_infix("({y} / {x})"), exact=True,
       into=lambda out, x, y: np.true_divide(y, x, out=out), doc="Reversed division ``y / x``.")
binary("pow", np.power, scalar=_infix("({x} ** {y})"), doc="Elementwise ``x ** y``.")
binary("maximum", np.maximum, scalar=_infix("np.maximum({x}, {y})"), exact=True,
       doc="Elementwise maximum (NaN propagates).")
binary("minimum", np.minimum, scalar=_infix("np.minimum({x}, {y})"), exact=True,
       doc="Elementwise minimum (NaN propagates).")
binary("floor_mod", np.mod, unfused="no kernel expression yet: numpy's mod "
       "(sign of y, zero and infinite divisors)",
       doc="Remainder with the sign of ``y`` (Python ``%``).")
binary("floor_div", _floor_divide, unfused="no kernel expression yet: "
       "numpy's floor_divide (zero and infinite divisors)",
       doc="Floor division (Python ``//``); an infinity against a finite nonzero operand "
           "follows the array API standard (``inf // 2 == inf``, ``1 // -inf == -0.0``).")
binary("copysign", np.copysign, scalar=_infix("math.copysign({x}, {y})"), exact=True,
       doc="Elementwise ``|x|`` with the sign bit of ``y``.")
elementwise("atan2", ["y", "x"], np.arctan2, scalar=_infix("math.atan2({x}, {y})"),
            doc="Elementwise ``atan(y / x)`` in the right quadrant.")
binary("squared_difference", lambda x, y: np.square(np.subtract(x, y)),
       scalar=_infix("(({x} - {y}) * ({x} - {y}))"), exact=True,
       doc="Elementwise ``(x - y) ** 2``.")
for _name, _sym, _ufunc in [("eq", "==", np.equal), ("neq", "!=", np.not_equal),
                            ("gt", ">", np.greater), ("gte", ">=", np.greater_equal),
                            ("lt", "<", np.less), ("lte", "<=", np.less_equal)]:
    binary(_name, _ufunc, scalar=_infix(f"({{x}} {_sym} {{y}})"), exact=True,
           doc=f"Elementwise ``x {_sym} y`` (bool result).")
# logical ops read bool values (truth values, not the values themselves, for xor)
binary("logical_and", np.logical_and, scalar=_infix("({x} and {y})"), exact=True,
       doc="Elementwise logical and (bool result).")
binary("logical_or", np.logical_or, scalar=_infix("({x} or {y})"), exact=True,
       doc="Elementwise logical or (bool result).")
binary("logical_xor", np.logical_xor, scalar=_infix("(bool({x}) != bool({y}))"), exact=True,
       doc="Elementwise logical xor (bool result).")

# --- other elementwise ------------------------------------------------------------------------
elementwise("where", ["condition", "x", "y"], lambda c, x, y: np.where(c, x, y), namespace="base",
            method=False, scalar=lambda e, c, x, y: f"({x} if {c} else {y})", exact=True,
            doc="Elementwise select: ``x`` where ``condition`` else ``y``.")
unary("clip_by_value", lambda x, *, clip_min, clip_max: np.clip(x, clip_min, clip_max),
      attrs={"clip_min": (Attr.FLOAT, REQUIRED), "clip_max": (Attr.FLOAT, REQUIRED)},
      scalar=lambda e, x: _clip(x, e.a("clip_min"), e.a("clip_max")),
      exact=True, doc="Clip values to ``[clip_min, clip_max]``.")


def _cast_infer(types: list[TensorType], attrs) -> TensorType:
    return TensorType(types[0].shape, attrs.dtype)


# in a kernel the store into the node's dtype is the conversion
define("cast", ["x"], _cast_infer, lambda x, *, dtype: np.asarray(x).astype(dtype),
       attrs={"dtype": (Attr.DTYPE, REQUIRED)}, namespace="base",
       elementwise=True, scalar=lambda e, x: x, exact=True,
       doc="Convert to another data type (numpy ``astype`` semantics).")
