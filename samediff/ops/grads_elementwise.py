"""Gradient rules of the elementwise ops (``elementwise.py``), one ``defgrad`` line per op.

A rule gets graph values and is written with ordinary ops on them: operators, methods
(``g * x.cos()``) and ``op.where(...)`` for free functions (``call.py``), which record into the
graph being differentiated -- so backward graphs can be differentiated again. ``g`` has the
(broadcast) output shape; the engine sums it back to each input's shape. Where possible a rule
reuses the forward output ``y`` (``exp``, ``tanh``, ``sigmoid``...) instead of recomputing it.
Ops defined more recently carry their rule in their own definition (``grad=``).

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
from typing import Any, Callable

from .call import op
from .elementwise import _SELU_ALPHA, _SELU_SCALE, _SQRT_2_OVER_PI
from .families import binary_rule, unary_rule
from .registry import defgrad, nondifferentiable

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_GELU_A = 0.044715


def zero_grad(ins: list, outs: list, gs: list, attrs: Any) -> list:
    """Rule for piecewise-constant ops: a zero gradient for every input (like JAX/PyTorch)."""
    return [op.zeros_like(x) for x in ins]


def unary_grad(name: str, fn: Callable[..., Any]) -> None:
    """Register ``fn(x, y, g, attrs) -> dx`` (``y`` the output) for a one-input op."""
    defgrad(name, unary_rule(fn))


def binary_grad(name: str, fn: Callable[..., Any]) -> None:
    """Register ``fn(x, y, out, g) -> (dx, dy)`` for a two-input op."""
    defgrad(name, binary_rule(fn))


def _inside(x: Any, lo: float, hi: float) -> Any:
    """``lo < x < hi`` (strict: the kinks of a clipped linear piece get gradient 0)."""
    return (x > lo) & (x < hi)


# --- unary math -------------------------------------------------------------------------------
for _name in ("sign", "floor", "ceil", "round", "imag", "angle"):
    defgrad(_name, zero_grad)
unary_grad("neg", lambda x, y, g, a: -g)
unary_grad("real", lambda x, y, g, a: g)  # real inputs only: complex paths are refused
unary_grad("conj", lambda x, y, g, a: g)
unary_grad("abs", lambda x, y, g, a: g * x.sign())
unary_grad("exp", lambda x, y, g, a: g * y)
unary_grad("expm1", lambda x, y, g, a: g * (y + 1.0))
unary_grad("log", lambda x, y, g, a: g / x)
unary_grad("log1p", lambda x, y, g, a: g / (x + 1.0))
unary_grad("sqrt", lambda x, y, g, a: 0.5 * g / y)
unary_grad("rsqrt", lambda x, y, g, a: -0.5 * g * y / x)
unary_grad("square", lambda x, y, g, a: 2.0 * g * x)
unary_grad("reciprocal", lambda x, y, g, a: -g * y * y)
unary_grad("sin", lambda x, y, g, a: g * x.cos())
unary_grad("cos", lambda x, y, g, a: -g * x.sin())
unary_grad("tan", lambda x, y, g, a: g * (1.0 + y * y))
unary_grad("asin", lambda x, y, g, a: g * (1.0 - x * x).rsqrt())
unary_grad("acos", lambda x, y, g, a: -g * (1.0 - x * x).rsqrt())
unary_grad("atan", lambda x, y, g, a: g / (1.0 + x * x))
unary_grad("sinh", lambda x, y, g, a: g * x.cosh())
unary_grad("cosh", lambda x, y, g, a: g * x.sinh())
unary_grad("tanh", lambda x, y, g, a: g * (1.0 - y * y))
unary_grad("asinh", lambda x, y, g, a: g * (x * x + 1.0).rsqrt())
unary_grad("acosh", lambda x, y, g, a: g * (x * x - 1.0).rsqrt())
unary_grad("atanh", lambda x, y, g, a: g / (1.0 - x * x))
unary_grad("erf", lambda x, y, g, a: _TWO_OVER_SQRT_PI * g * (-(x * x)).exp())
nondifferentiable("isnan", "isinf", "isfinite", "logical_not", "signbit")

# --- activations ------------------------------------------------------------------------------


def _gelu(x: Any, y: Any, g: Any, a: Any) -> Any:
    # gelu' is exactly 0 / 1 beyond +-40 (as gelu is -0 / x there); clipping keeps x^3 and
    # inf * 0 from turning that into NaN for huge or infinite x
    x = op.clip_by_value(x, clip_min=-40.0, clip_max=40.0)
    if a.approximate:  # y = x/2 (1 + tanh(u)), u = c (x + A x^3)
        t = (_SQRT_2_OVER_PI * (x + _GELU_A * x * x * x)).tanh()
        dt = (1.0 - t * t) * (_SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_A * x * x))
        return g * (0.5 * (1.0 + t) + 0.5 * x * dt)
    # y = x Phi(x): Phi(x) + x phi(x)
    return g * (0.5 * (1.0 + (_INV_SQRT2 * x).erf()) + _INV_SQRT_2PI * x * (-0.5 * (x * x)).exp())


def _swish(x: Any, y: Any, g: Any, a: Any) -> Any:
    s = x.sigmoid()
    return g * (s + y * (1.0 - s))  # s + x s (1 - s), with x s = y


unary_grad("sigmoid", lambda x, y, g, a: g * y * (1.0 - y))
unary_grad("softplus", lambda x, y, g, a: g * x.sigmoid())
unary_grad("log_sigmoid", lambda x, y, g, a: g * (-x).sigmoid())
unary_grad("swish", _swish)
unary_grad("softsign", lambda x, y, g, a: g / (1.0 + x.abs()).square())
# from y when cutoff >= 0 (y > cutoff iff x > cutoff there): the backward then needs only the
# output, so the input can be freed -- and a plan can fold the relu into the conv before it
unary_grad("relu", lambda x, y, g, a: op.where((y if a.cutoff >= 0.0 else x) > a.cutoff,
                                               g, 0.0))
unary_grad("relu6", lambda x, y, g, a: op.where(_inside(x, 0.0, 6.0), g, 0.0))
unary_grad("hard_tanh", lambda x, y, g, a: op.where(_inside(x, -1.0, 1.0), g, 0.0))
# clip(0.2 x + 0.5, 0, 1) is linear for -2.5 < x < 2.5
unary_grad("hard_sigmoid", lambda x, y, g, a: op.where(_inside(x, -2.5, 2.5), 0.2 * g, 0.0))
unary_grad("leaky_relu", lambda x, y, g, a: op.where(x > 0.0, g, a.alpha * g))
# negative branches: d/dx alpha (e^x - 1) = alpha e^x = y + alpha (y is finite on both branches)
unary_grad("elu", lambda x, y, g, a: op.where(x > 0.0, g, g * (y + a.alpha)))
unary_grad("selu", lambda x, y, g, a: op.where(x > 0.0, _SELU_SCALE * g,
                                               g * (y + _SELU_SCALE * _SELU_ALPHA)))
unary_grad("gelu", _gelu)

# --- binary -----------------------------------------------------------------------------------


def _pow(x: Any, y: Any, out: Any, g: Any) -> tuple:
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


def _atan2(y: Any, x: Any, out: Any, g: Any) -> tuple:
    s = g / (x * x + y * y)  # inputs are (y, x), like the op
    return s * x, -s * y


def _squared_difference(x: Any, y: Any, out: Any, g: Any) -> tuple:
    d = 2.0 * g * (x - y)
    return d, -d


binary_grad("add", lambda x, y, out, g: (g, g))
binary_grad("sub", lambda x, y, out, g: (g, -g))
binary_grad("rsub", lambda x, y, out, g: (-g, g))
binary_grad("mul", lambda x, y, out, g: (g * y, g * x))
binary_grad("div", lambda x, y, out, g: (g / y, -g * out / y))
binary_grad("rdiv", lambda x, y, out, g: (-g * out / x, g / x))
binary_grad("pow", _pow)
binary_grad("maximum", lambda x, y, out, g: _extremum(x, y, g, x > y))
binary_grad("minimum", lambda x, y, out, g: _extremum(x, y, g, x < y))
# x mod y = x - y floor(x / y), floor being piecewise constant
binary_grad("floor_mod", lambda x, y, out, g: (g, -g * (x // y)))
defgrad("floor_div", zero_grad)
binary_grad("atan2", _atan2)
# copysign(x, y) = +-x: the sign flips x's gradient where it flipped x; y only moves a sign bit
binary_grad("copysign", lambda x, y, out, g: (op.where(out == x, g, -g), op.zeros_like(y)))
binary_grad("squared_difference", _squared_difference)
nondifferentiable("eq", "neq", "gt", "gte", "lt", "lte", "logical_and", "logical_or",
                  "logical_xor")

# --- other --------------------------------------------------------------------------------------
defgrad("where", lambda ins, outs, gs, a: [None, op.where(ins[0], gs[0], 0.0),
                                           op.where(ins[0], 0.0, gs[0])])
unary_grad("clip_by_value", lambda x, y, g, a: op.where(
    (x >= a.clip_min) & (x <= a.clip_max), g, 0.0))
# the engine casts the gradient back to the input's dtype
defgrad("cast", lambda ins, outs, gs, a: [gs[0]])
