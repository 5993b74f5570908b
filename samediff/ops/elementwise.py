"""Elementwise ops: unary math, activations, binary arithmetic/comparison/logic, where, clip, cast.

Each op is one definition: its numpy implementation (one line, mostly), and with it the
scalar expression fused kernels compute per element (``scalar=``, see ``registry.py``; or
``unfused=`` saying why there is none), ``exact=True`` where that expression performs numpy's
IEEE operations in numpy's order (kernels then equal the eager op bit for bit), and its
gradient rule (``grad=``: ``fn(x, y, g, attrs) -> dx`` for one input, ``y`` the output;
``fn(x, y, out, g) -> (dx, dy)`` for two; ``NONDIFF`` for bool results). Constants are Python
floats on purpose: they are *weak* (NEP 50), so float32 inputs stay float32.

A rule gets graph values and is written with ordinary ops on them: operators, methods
(``g * x.cos()``) and ``op.where(...)`` for free functions (``call.py``), which record into the
graph being differentiated -- so backward graphs can be differentiated again. ``g`` has the
(broadcast) output shape; the engine sums it back to each input's shape. Where possible a rule
reuses the forward output ``y`` (``exp``, ``tanh``, ``sigmoid``...) instead of recomputing it.

Conventions at non-smooth points (PyTorch's):

* ``abs'(0) = 0``; ``relu'(cutoff) = 0``; ``leaky_relu'(0) = alpha``; ``elu``/``selu`` use the
  negative branch at 0.
* ``relu6``, ``hard_tanh`` and ``hard_sigmoid`` pass the gradient strictly inside their linear
  range (0 at the kinks); ``clip_by_value`` passes it where ``clip_min <= x <= clip_max``
  (inclusive, like ``torch.clamp``); ``hard_swish``: ``x/3 + 1/2`` on the closed ``[-3, 3]``.
* ``maximum``/``minimum``: on ties each input gets half of the gradient.
* ``pow``: ``d/dx = y * x**(y-1)`` (0 where ``y == 0``); ``d/dy = x**y * log(x)`` where
  ``x > 0`` and 0 elsewhere (the real derivative does not exist for negative bases; PyTorch gives
  NaN there, 0 at ``x == 0``).
* Piecewise-constant float ops (``sign``, ``floor``, ``ceil``, ``round``, ``floor_div``) have a
  documented zero gradient; bool-valued ops (comparisons, logic, ``isnan``...) are
  non-differentiable.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..dtypes import is_string
from .call import op
from .families import Attr, REQUIRED, binary, binary_rule, elementwise, unary
from .registry import NONDIFF, Activation, TensorType, define
from .strings import cast_strings

_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_A = 0.044715

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


# --- gradient rules (conventions in the module docstring) -----------------------------------


def _zero(x: Any, y: Any, g: Any, a: Any) -> Any:
    """Piecewise-constant ops: a zero gradient (like JAX/PyTorch)."""
    return op.zeros_like(x)


def _inside(x: Any, lo: float, hi: float) -> Any:
    """``lo < x < hi`` (strict: the kinks of a clipped linear piece get gradient 0)."""
    return (x > lo) & (x < hi)


def _gelu_grad(x: Any, y: Any, g: Any, a: Any) -> Any:
    # gelu' is exactly 0 / 1 beyond +-40 (as gelu is -0 / x there); clipping keeps x^3 and
    # inf * 0 from turning that into NaN for huge or infinite x
    x = op.clip_by_value(x, clip_min=-40.0, clip_max=40.0)
    if a.approximate:  # y = x/2 (1 + tanh(u)), u = c (x + A x^3)
        t = (_SQRT_2_OVER_PI * (x + _GELU_A * x * x * x)).tanh()
        dt = (1.0 - t * t) * (_SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_A * x * x))
        return g * (0.5 * (1.0 + t) + 0.5 * x * dt)
    # y = x Phi(x): Phi(x) + x phi(x)
    return g * (0.5 * (1.0 + (_INV_SQRT2 * x).erf()) + _INV_SQRT_2PI * x * (-0.5 * (x * x)).exp())


def _swish_grad(x: Any, y: Any, g: Any, a: Any) -> Any:
    s = x.sigmoid()
    return g * (s + y * (1.0 - s))  # s + x s (1 - s), with x s = y


def _pow_grad(x: Any, y: Any, out: Any, g: Any) -> tuple:
    # Both masked branches use safe operands (exponent 1 where y == 0, base 1 where x <= 0):
    # an unselected branch that held inf/NaN would still poison the gradients of this rule.
    y0 = y == 0
    dx = op.where(y0, 0.0, g * y * x ** (op.where(y0, 1.0, y) - 1.0))
    pos = x > 0
    log_x = op.where(pos, op.where(pos, x, 1.0).log(), 0.0)
    return dx, g * out * log_x


def _extremum(x: Any, y: Any, g: Any, wins: Any) -> tuple:
    """Gradient of maximum/minimum: to the winning input, split equally on ties."""
    dx = op.where(wins, g, op.where(x == y, 0.5 * g, 0.0))
    return dx, g - dx


def _atan2_grad(y: Any, x: Any, out: Any, g: Any) -> tuple:
    s = g / (x * x + y * y)  # inputs are (y, x), like the op
    return s * x, -s * y


def _squared_difference_grad(x: Any, y: Any, out: Any, g: Any) -> tuple:
    d = 2.0 * g * (x - y)
    return d, -d


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
      grad=lambda x, y, g, a: -g,
      doc="Elementwise negation, ``-x``.")
unary("abs", np.abs, scalar=lambda e, x: f"abs({x})", exact=True,
      grad=lambda x, y, g, a: g * x.sign(),
      doc="Elementwise absolute value.")
unary("sign", np.sign, unfused="no kernel expression yet: numpy's results for NaN and +-0 need "
      "a chain of selects",
      grad=_zero,
      doc="Elementwise sign (-1, 0, 1).")
# complex parts: fresh arrays (numpy's real/imag of a complex array are views into it); on
# real inputs real/conj are the identity, imag is 0 and angle 0 or pi
unary("real", lambda x: np.array(np.real(x)), scalar=lambda e, x: f"({x})", exact=True,
      grad=lambda x, y, g, a: g,  # real inputs only: complex paths are refused
      doc="Real part (the identity on real inputs).")
unary("imag", lambda x: np.array(np.imag(x)), unfused="0 for real inputs (not 0 * x: that "
      "is NaN at infinity); complex values are not fused",
      grad=_zero,
      doc="Imaginary part (zeros on real inputs).")
unary("conj", np.conjugate, scalar=lambda e, x: f"({x})", exact=True,
      grad=lambda x, y, g, a: g,
      doc="Complex conjugate (the identity on real inputs).")
# JAX's stop_gradient: the identity forward (a fresh array, as every elementwise op gives),
# a zero gradient backward, so `x * stop_gradient(x)` differentiates to `x`, not `2 x`
unary("stop_gradient", lambda x: np.array(x, copy=True), scalar=lambda e, x: f"({x})",
      exact=True, grad=lambda x, y, g, a: op.zeros_like(g), stops_gradient=True,
      namespace="base", doc="The identity, with a zero gradient: values that flow through it "
      "are constants to ``nd.grad`` and SameDiff's gradients (JAX's ``stop_gradient``).")
# ONNX's Identity (and any importer's): the values as they are, in a fresh array; the gradient
# flows through unchanged
unary("identity", lambda x: np.array(x, copy=True), scalar=lambda e, x: f"({x})", exact=True,
      grad=lambda x, y, g, a: g, namespace="base", storage=True, strings=True,
      doc="The identity: a copy of ``x`` (ONNX's ``Identity``); the gradient passes through.")
unary("angle", np.angle, unfused="complex argument (atan2 of the parts); complex values are "
      "not fused",
      grad=_zero,
      doc="Argument of each value in radians (0 or pi on real inputs).")
unary("exp", np.exp, scalar=_fn("exp"),
      grad=lambda x, y, g, a: g * y,
      doc="Elementwise ``e**x``.")
unary("expm1", np.expm1, scalar=_fn("expm1"),
      grad=lambda x, y, g, a: g * (y + 1.0),
      doc="Elementwise ``exp(x) - 1``, accurate near 0.")
unary("log", np.log, scalar=_fn("log"),
      grad=lambda x, y, g, a: g / x,
      doc="Elementwise natural logarithm.")
unary("log1p", np.log1p, scalar=_fn("log1p"),
      grad=lambda x, y, g, a: g / (x + 1.0),
      doc="Elementwise ``log(1 + x)``, accurate near 0.")
unary("sqrt", np.sqrt, scalar=_math("sqrt"), exact=True,
      grad=lambda x, y, g, a: 0.5 * g / y,
      doc="Elementwise square root.")
unary("rsqrt", lambda x: 1.0 / np.sqrt(x), scalar=lambda e, x: f"({e.c(1)} / math.sqrt({x}))",
      exact=True,
      grad=lambda x, y, g, a: -0.5 * g * y / x,
      doc="Elementwise ``1 / sqrt(x)``.")
unary("square", np.square, scalar=lambda e, x: f"({x} * {x})", exact=True,
      grad=lambda x, y, g, a: 2.0 * g * x,
      doc="Elementwise ``x * x``.")
unary("reciprocal", lambda x: np.true_divide(1, x), scalar=lambda e, x: f"({e.c(1)} / {x})",
      exact=True,
      grad=lambda x, y, g, a: -g * y * y,
      doc="Elementwise ``1 / x`` (true division).")
unary("sin", np.sin, scalar=_math("sin"),
      grad=lambda x, y, g, a: g * x.cos(),
      doc="Elementwise sine.")
unary("cos", np.cos, scalar=_math("cos"),
      grad=lambda x, y, g, a: -g * x.sin(),
      doc="Elementwise cosine.")
unary("tan", np.tan, scalar=_math("tan"),
      grad=lambda x, y, g, a: g * (1.0 + y * y),
      doc="Elementwise tangent.")
unary("asin", np.arcsin, scalar=_math("asin"),
      grad=lambda x, y, g, a: g * (1.0 - x * x).rsqrt(),
      doc="Elementwise inverse sine.")
unary("acos", np.arccos, scalar=_math("acos"),
      grad=lambda x, y, g, a: -g * (1.0 - x * x).rsqrt(),
      doc="Elementwise inverse cosine.")
unary("atan", np.arctan, scalar=_math("atan"),
      grad=lambda x, y, g, a: g / (1.0 + x * x),
      doc="Elementwise inverse tangent.")
unary("sinh", np.sinh, scalar=_math("sinh"),
      grad=lambda x, y, g, a: g * x.cosh(),
      doc="Elementwise hyperbolic sine.")
unary("cosh", np.cosh, scalar=_math("cosh"),
      grad=lambda x, y, g, a: g * x.sinh(),
      doc="Elementwise hyperbolic cosine.")
unary("tanh", np.tanh, scalar=_fn("tanh"),
      grad=lambda x, y, g, a: g * (1.0 - y * y),
      doc="Elementwise hyperbolic tangent.")
unary("asinh", np.arcsinh, scalar=_math("asinh"),
      grad=lambda x, y, g, a: g * (x * x + 1.0).rsqrt(),
      doc="Elementwise inverse hyperbolic sine.")
unary("acosh", np.arccosh, scalar=_math("acosh"),
      grad=lambda x, y, g, a: g * (x * x - 1.0).rsqrt(),
      doc="Elementwise inverse hyperbolic cosine (NaN below 1).")
unary("atanh", np.arctanh, scalar=_math("atanh"),
      grad=lambda x, y, g, a: g / (1.0 - x * x),
      doc="Elementwise inverse hyperbolic tangent (+-inf at +-1, NaN beyond).")
unary("floor", np.floor, scalar=_np("floor"), exact=True,
      grad=_zero,
      doc="Elementwise floor.")
unary("ceil", np.ceil, scalar=_np("ceil"), exact=True,
      grad=_zero,
      doc="Elementwise ceiling.")
unary("round", _round_half_away, unfused="no kernel expression yet: halves away from zero "
      "need a select on the exact fraction",
      grad=_zero,
      doc="Elementwise rounding, halves away from zero (like ND4J).")
unary("erf", _erf, scalar=_fn("erf"),
      grad=lambda x, y, g, a: _TWO_OVER_SQRT_PI * g * (-(x * x)).exp(),
      doc="Elementwise Gauss error function.")
unary("isnan", np.isnan, scalar=_np("isnan"), exact=True,
      grad=NONDIFF,
      doc="Elementwise NaN test (bool result).")
unary("isinf", np.isinf, scalar=_np("isinf"), exact=True,
      grad=NONDIFF,
      doc="Elementwise infinity test (bool result).")
unary("isfinite", np.isfinite, scalar=_np("isfinite"), exact=True,
      grad=NONDIFF,
      doc="Elementwise finiteness test (bool result).")
unary("signbit", np.signbit, scalar=lambda e, x: f"(math.copysign(1.0, {x}) < 0.0)", exact=True,
      grad=NONDIFF,
      doc="Elementwise sign bit (True for -0.0 and negative NaNs too; bool result).")
unary("logical_not", np.logical_not, scalar=lambda e, x: f"(not {x})", exact=True,
      grad=NONDIFF,
      doc="Elementwise logical not (bool result).")
unary("log2", np.log2, scalar=_math("log2"), grad=lambda x, y, g, a: g / (x * _LN2),
      doc="Elementwise base-2 logarithm (``log2(8) == 3`` exactly).")
unary("exp2", np.exp2, scalar=_np("exp2"), grad=lambda x, y, g, a: g * y * _LN2,
      doc="Elementwise ``2**x``.")
unary("cube", lambda x: x * x * x, scalar=lambda e, x: f"({x} * {x} * {x})", exact=True,
      grad=lambda x, y, g, a: 3.0 * g * x * x, doc="Elementwise ``x * x * x`` (ND4J's cube).")

# --- activations (nn namespace) -------------------------------------------------------------
unary("sigmoid", _sigmoid, namespace="nn", scalar=_fn("sigmoid"),
      grad=lambda x, y, g, a: g * y * (1.0 - y),
      doc="Logistic sigmoid ``1 / (1 + exp(-x))``.")
unary("softplus", _softplus, namespace="nn", scalar=_fn("softplus"),
      grad=lambda x, y, g, a: g * x.sigmoid(),
      doc="``log(1 + exp(x))``, overflow-free.")
# +-1 at +-inf (the limit), not inf / inf = NaN: the same select as the eager op
unary("softsign", _softsign, namespace="nn", exact=True,
      scalar=lambda e, x: (f"(math.copysign({e.c(1)}, {x}) if np.isinf({x}) else "
                           f"({x} / ({e.c(1)} + abs({x}))))"),
      grad=lambda x, y, g, a: g / (1.0 + x.abs()).square(),
      doc="``x / (1 + |x|)`` (+-1 at +-inf).")
# with cutoff 0 it is the "relu" a library op with an epilogue (conv2d) applies in its own pass
unary("relu", _relu, namespace="nn", attrs={"cutoff": (Attr.FLOAT, 0.0)}, exact=True,
      activation=Activation("relu", when=(("cutoff", 0.0),)),
      scalar=lambda e, x: (f"np.maximum({x}, {e.c(0)})" if e.attrs.cutoff == 0.0
                           else f"({x} if {x} > {e.a('cutoff')} else {e.c(0)})"),
      # from y when cutoff >= 0 (y > cutoff iff x > cutoff there): the backward then needs only
      # the output, so the input can be freed -- and a plan can fold the relu into the conv
      grad=lambda x, y, g, a: op.where((y if a.cutoff >= 0.0 else x) > a.cutoff, g, 0.0),
      doc="Rectified linear unit: ``x`` where ``x > cutoff``, else 0.")
unary("relu6", lambda x: np.clip(x, 0, 6), namespace="nn", exact=True,
      scalar=lambda e, x: _clip(x, e.c(0), e.c(6)),
      grad=lambda x, y, g, a: op.where(_inside(x, 0.0, 6.0), g, 0.0),
      doc="``min(max(x, 0), 6)``.")
unary("leaky_relu", lambda x, *, alpha: np.where(np.greater_equal(x, 0), x, alpha * x),
      namespace="nn", attrs=_ALPHA, exact=True,
      scalar=lambda e, x: f"({x} if {x} >= {e.c(0)} else {e.a('alpha')} * {x})",
      grad=lambda x, y, g, a: op.where(x > 0.0, g, a.alpha * g),
      doc="``x`` if ``x >= 0`` else ``alpha * x``.")
unary("elu", lambda x, *, alpha: np.where(np.greater(x, 0), x, alpha * np.expm1(np.minimum(x, 0))),
      namespace="nn", attrs={"alpha": (Attr.FLOAT, 1.0)},
      scalar=lambda e, x: (f"({x} if {x} > {e.c(0)} else "
                           f"{e.a('alpha')} * {e.f('expm1')}(min({x}, {e.c(0)})))"),
      # negative branch: d/dx alpha (e^x - 1) = alpha e^x = y + alpha (y is finite on both)
      grad=lambda x, y, g, a: op.where(x > 0.0, g, g * (y + a.alpha)),
      doc="Exponential linear unit.")
unary("selu", lambda x: _SELU_SCALE * np.where(np.greater(x, 0), x,
                                               _SELU_ALPHA * np.expm1(np.minimum(x, 0))),
      namespace="nn",
      scalar=lambda e, x: (f"({e.c(_SELU_SCALE)} * ({x} if {x} > {e.c(0)} else "
                           f"{e.c(_SELU_ALPHA)} * {e.f('expm1')}(min({x}, {e.c(0)}))))"),
      grad=lambda x, y, g, a: op.where(x > 0.0, _SELU_SCALE * g,
                                       g * (y + _SELU_SCALE * _SELU_ALPHA)),
      doc="Scaled exponential linear unit.")
unary("gelu", _gelu, namespace="nn", attrs={"approximate": (Attr.BOOL, True)},
      scalar=lambda e, x: f"{e.f('gelu_tanh' if e.attrs.approximate else 'gelu_erf')}({x})",
      grad=_gelu_grad,
      doc="Gaussian error linear unit; ``approximate=True`` uses the tanh form (as JAX), "
          "``False`` the exact erf form (ND4J's precise_gelu). ``gelu(-inf)`` is -0.0.")
unary("swish", _swish, namespace="nn", scalar=_fn("swish"),
      grad=_swish_grad,
      doc="``x * sigmoid(x)`` (also called SiLU); ``swish(-inf)`` is -0.0.")
unary("hard_sigmoid", lambda x: np.clip(0.2 * x + 0.5, 0.0, 1.0), namespace="nn", exact=True,
      scalar=lambda e, x: _clip(f"{e.c(0.2)} * {x} + {e.c(0.5)}", e.c(0), e.c(1)),
      grad=lambda x, y, g, a: op.where(_inside(x, -2.5, 2.5), 0.2 * g, 0.0),  # linear inside
      doc="``clip(0.2 * x + 0.5, 0, 1)`` (ND4J's definition).")
unary("hard_tanh", lambda x: np.clip(x, -1, 1), namespace="nn", exact=True,
      scalar=lambda e, x: _clip(x, e.c(-1), e.c(1)),
      grad=lambda x, y, g, a: op.where(_inside(x, -1.0, 1.0), g, 0.0),
      doc="``clip(x, -1, 1)``.")
unary("log_sigmoid", lambda x: -_softplus(-x), namespace="nn",
      scalar=lambda e, x: f"(-{e.f('softplus')}(-{x}))",
      grad=lambda x, y, g, a: g * (-x).sigmoid(),
      doc="``log(sigmoid(x))``, overflow-free.")
unary("hard_swish", _hard_swish, namespace="nn", exact=True,
      scalar=_hard_swish_expr, grad=_hard_swish_grad,
      doc="``x * relu6(x + 3) / 6`` (PyTorch's hardswish, and its gradient: 0 below -3, "
          "``x / 3 + 1/2`` on [-3, 3], 1 above); ``hard_swish(-inf)`` is -0.0.")
unary("mish", _mish, namespace="nn", scalar=_mish_expr, grad=_mish_grad,
      doc="``x * tanh(softplus(x))``; ``mish(-inf)`` is -0.0.")

# --- binary -------------------------------------------------------------------------------
binary("add", np.add, scalar=_infix("({x} + {y})"), exact=True,
       grad=lambda x, y, out, g: (g, g),
       doc="Elementwise ``x + y`` with broadcasting.")
binary("sub", np.subtract, scalar=_infix("({x} - {y})"), exact=True,
       grad=lambda x, y, out, g: (g, -g),
       doc="Elementwise ``x - y`` with broadcasting.")
binary("mul", np.multiply, scalar=_infix("({x} * {y})"), exact=True,
       grad=lambda x, y, out, g: (g * y, g * x),
       doc="Elementwise ``x * y`` with broadcasting.")
binary("div", np.true_divide, scalar=_infix("({x} / {y})"), exact=True,
       grad=lambda x, y, out, g: (g / y, -g * out / y),
       doc="Elementwise true division ``x / y`` with broadcasting.")
binary("rsub", lambda x, y: np.subtract(y, x), scalar=_infix("({y} - {x})"), exact=True,
       into=lambda out, x, y: np.subtract(y, x, out=out),
       grad=lambda x, y, out, g: (-g, g),
       doc="Reversed subtraction ``y - x``.")
binary("rdiv", lambda x, y: np.true_divide(y, x), scalar=_infix("({y} / {x})"), exact=True,
       into=lambda out, x, y: np.true_divide(y, x, out=out),
       grad=lambda x, y, out, g: (-g * out / x, g / x),
       doc="Reversed division ``y / x``.")
binary("pow", np.power, scalar=_infix("({x} ** {y})"),
       grad=_pow_grad,
       doc="Elementwise ``x ** y``.")
binary("maximum", np.maximum, scalar=_infix("np.maximum({x}, {y})"), exact=True,
       grad=lambda x, y, out, g: _extremum(x, y, g, x > y),
       doc="Elementwise maximum (NaN propagates).")
binary("minimum", np.minimum, scalar=_infix("np.minimum({x}, {y})"), exact=True,
       grad=lambda x, y, out, g: _extremum(x, y, g, x < y),
       doc="Elementwise minimum (NaN propagates).")
binary("floor_mod", np.mod, unfused="no kernel expression yet: numpy's mod "
       "(sign of y, zero and infinite divisors)",
       grad=lambda x, y, out, g: (g, -g * (x // y)),  # x - y floor(x / y), floor constant
       doc="Remainder with the sign of ``y`` (Python ``%``).")
binary("floor_div", _floor_divide, unfused="no kernel expression yet: "
       "numpy's floor_divide (zero and infinite divisors)",
       grad=lambda x, y, out, g: (op.zeros_like(x), op.zeros_like(y)),
       doc="Floor division (Python ``//``); an infinity against a finite nonzero operand "
           "follows the array API standard (``inf // 2 == inf``, ``1 // -inf == -0.0``).")
binary("copysign", np.copysign, scalar=_infix("math.copysign({x}, {y})"), exact=True,
       # +-x: the sign flips x's gradient where it flipped x; y only moves a sign bit
       grad=lambda x, y, out, g: (op.where(out == x, g, -g), op.zeros_like(y)),
       doc="Elementwise ``|x|`` with the sign bit of ``y``.")
elementwise("atan2", ["y", "x"], np.arctan2, scalar=_infix("math.atan2({x}, {y})"),
            grad=binary_rule(_atan2_grad),
            doc="Elementwise ``atan(y / x)`` in the right quadrant.")
binary("squared_difference", lambda x, y: np.square(np.subtract(x, y)),
       scalar=_infix("(({x} - {y}) * ({x} - {y}))"), exact=True,
       grad=_squared_difference_grad,
       doc="Elementwise ``(x - y) ** 2``.")
for _name, _sym, _ufunc in [("eq", "==", np.equal), ("neq", "!=", np.not_equal),
                            ("gt", ">", np.greater), ("gte", ">=", np.greater_equal),
                            ("lt", "<", np.less), ("lte", "<=", np.less_equal)]:
    binary(_name, _ufunc, scalar=_infix(f"({{x}} {_sym} {{y}})"), exact=True, grad=NONDIFF,
           strings=_name in ("eq", "neq"),
           doc=f"Elementwise ``x {_sym} y`` (bool result).")
# logical ops read bool values (truth values, not the values themselves, for xor)
binary("logical_and", np.logical_and, scalar=_infix("({x} and {y})"), exact=True,
       grad=NONDIFF,
       doc="Elementwise logical and (bool result).")
binary("logical_or", np.logical_or, scalar=_infix("({x} or {y})"), exact=True,
       grad=NONDIFF,
       doc="Elementwise logical or (bool result).")
binary("logical_xor", np.logical_xor, scalar=_infix("(bool({x}) != bool({y}))"), exact=True,
       grad=NONDIFF,
       doc="Elementwise logical xor (bool result).")

# --- other elementwise ------------------------------------------------------------------------
elementwise("where", ["condition", "x", "y"], lambda c, x, y: np.where(c, x, y), namespace="base",
            method=False, scalar=lambda e, c, x, y: f"({x} if {c} else {y})", exact=True,
            grad=lambda ins, outs, gs, a: [None, op.where(ins[0], gs[0], 0.0),
                                           op.where(ins[0], 0.0, gs[0])],
            strings=True,
            doc="Elementwise select: ``x`` where ``condition`` else ``y``.")
unary("clip_by_value", lambda x, *, clip_min, clip_max: np.clip(x, clip_min, clip_max),
      attrs={"clip_min": (Attr.FLOAT, REQUIRED), "clip_max": (Attr.FLOAT, REQUIRED)},
      scalar=lambda e, x: _clip(x, e.a("clip_min"), e.a("clip_max")),
      exact=True,
      grad=lambda x, y, g, a: op.where((x >= a.clip_min) & (x <= a.clip_max), g, 0.0),
      doc="Clip values to ``[clip_min, clip_max]``.")


def _cast_infer(types: list[TensorType], attrs) -> TensorType:
    return TensorType(types[0].shape, attrs.dtype)


def _cast(x, *, dtype):
    x = np.asarray(x)
    if is_string(x.dtype) or is_string(dtype):  # ONNX Cast's rules for strings (strings.py)
        return cast_strings(x, dtype)
    return x.astype(dtype)


# in a kernel the store into the node's dtype is the conversion (kernels never see strings:
# they hold float and bool values only); the autodiff engine casts the gradient back to the
# input's dtype
define("cast", ["x"], _cast_infer, _cast,
       attrs={"dtype": (Attr.DTYPE, REQUIRED)}, namespace="base", storage=True, strings=True,
       elementwise=True, scalar=lambda e, x: x, exact=True,
       grad=lambda ins, outs, gs, a: [gs[0]],
       doc="Convert to another data type (numpy ``astype`` semantics; to and from utf8, "
           "ONNX Cast's rules: see samediff/ops/strings.py).")
