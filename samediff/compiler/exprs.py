"""Scalar expressions of elementwise ops, for fused code generation.

Each entry fills the op's ``scalar`` slot with ``expr(e, *inputs) -> str``: Python source for one
element, given the source of each input element. ``e`` (an ``Emitter``) supplies *typed*
constants (``e.c(0.5)`` is ``f32(0.5)`` in a float32 kernel, so nothing is silently promoted to
float64), attributes (``e.a("alpha")``) and the math function for the kernel's dtype
(``e.f("tanh")``: the vectorizable float32 version, or libm for float64).

Ops without an entry are simply not fused (they run as library calls); an op whose numpy
semantics are hard to reproduce exactly per element (``round``, integer ``floor_div``...) is
left out on purpose.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ops import get_op

Expr = Callable[..., str]


class Emitter:
    """Per-node code-generation context: compute dtype and attribute values."""

    def __init__(self, dtype: np.dtype, attrs: Any) -> None:
        self.dtype = np.dtype(dtype)
        self.attrs = attrs

    @property
    def prefix(self) -> str:
        return {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}[self.dtype]

    def c(self, value: float) -> str:
        """A constant of the compute dtype."""
        return f"{self.prefix}({float(value)!r})"

    def a(self, name: str) -> str:
        return self.c(getattr(self.attrs, name))

    def f(self, name: str) -> str:
        """Name of the elementwise math function ``name`` for this dtype."""
        return f"{name}_{self.prefix}"


_U = {
    "neg": lambda e, x: f"(-{x})",
    "abs": lambda e, x: f"abs({x})",
    "exp": lambda e, x: f"{e.f('exp')}({x})",
    "expm1": lambda e, x: f"{e.f('expm1')}({x})",
    "log": lambda e, x: f"{e.f('log')}({x})",
    "log1p": lambda e, x: f"{e.f('log1p')}({x})",
    "sqrt": lambda e, x: f"math.sqrt({x})",
    "rsqrt": lambda e, x: f"({e.c(1)} / math.sqrt({x}))",
    "square": lambda e, x: f"({x} * {x})",
    "reciprocal": lambda e, x: f"({e.c(1)} / {x})",
    "sin": lambda e, x: f"math.sin({x})",
    "cos": lambda e, x: f"math.cos({x})",
    "tan": lambda e, x: f"math.tan({x})",
    "asin": lambda e, x: f"math.asin({x})",
    "acos": lambda e, x: f"math.acos({x})",
    "atan": lambda e, x: f"math.atan({x})",
    "sinh": lambda e, x: f"math.sinh({x})",
    "cosh": lambda e, x: f"math.cosh({x})",
    "tanh": lambda e, x: f"{e.f('tanh')}({x})",
    "floor": lambda e, x: f"np.floor({x})",
    "ceil": lambda e, x: f"np.ceil({x})",
    "erf": lambda e, x: f"{e.f('erf')}({x})",
    "sigmoid": lambda e, x: f"{e.f('sigmoid')}({x})",
    "softplus": lambda e, x: f"{e.f('softplus')}({x})",
    # +-1 at +-inf (the limit), not inf / inf = NaN: the same select as the eager op
    "softsign": lambda e, x: (f"(math.copysign({e.c(1)}, {x}) if np.isinf({x}) else "
                              f"({x} / ({e.c(1)} + abs({x}))))"),
    "relu": lambda e, x: (f"np.maximum({x}, {e.c(0)})" if e.attrs.cutoff == 0.0
                          else f"({x} if {x} > {e.a('cutoff')} else {e.c(0)})"),
    "relu6": lambda e, x: f"np.minimum(np.maximum({x}, {e.c(0)}), {e.c(6)})",
    "leaky_relu": lambda e, x: f"({x} if {x} >= {e.c(0)} else {e.a('alpha')} * {x})",
    "elu": lambda e, x: (f"({x} if {x} > {e.c(0)} else "
                         f"{e.a('alpha')} * {e.f('expm1')}(min({x}, {e.c(0)})))"),
    "selu": lambda e, x: (f"({e.c(1.0507009873554805)} * ({x} if {x} > {e.c(0)} else "
                          f"{e.c(1.6732632423543772)} * {e.f('expm1')}(min({x}, {e.c(0)}))))"),
    "gelu": lambda e, x: (f"{e.f('gelu_tanh')}({x})" if e.attrs.approximate
                          else f"{e.f('gelu_erf')}({x})"),
    "swish": lambda e, x: f"{e.f('swish')}({x})",  # -0.0 at -inf, not -inf * 0
    "hard_sigmoid": lambda e, x: (f"np.minimum(np.maximum({e.c(0.2)} * {x} + {e.c(0.5)}, "
                                  f"{e.c(0)}), {e.c(1)})"),
    "hard_tanh": lambda e, x: f"np.minimum(np.maximum({x}, {e.c(-1)}), {e.c(1)})",
    "log_sigmoid": lambda e, x: f"(-{e.f('softplus')}(-{x}))",
    "isnan": lambda e, x: f"np.isnan({x})",
    "isinf": lambda e, x: f"np.isinf({x})",
    "isfinite": lambda e, x: f"np.isfinite({x})",
    "clip_by_value": lambda e, x: (f"np.minimum(np.maximum({x}, {e.a('clip_min')}), "
                                   f"{e.a('clip_max')})"),
}
_B = {
    "add": "({x} + {y})", "sub": "({x} - {y})", "mul": "({x} * {y})", "div": "({x} / {y})",
    "rsub": "({y} - {x})", "rdiv": "({y} / {x})",
    "maximum": "np.maximum({x}, {y})", "minimum": "np.minimum({x}, {y})",
    "squared_difference": "(({x} - {y}) * ({x} - {y}))", "atan2": "math.atan2({x}, {y})",
    "eq": "({x} == {y})", "neq": "({x} != {y})", "gt": "({x} > {y})", "gte": "({x} >= {y})",
    "lt": "({x} < {y})", "lte": "({x} <= {y})", "pow": "({x} ** {y})",
}
#: ops over bool values only
_LOGICAL = {"logical_not": lambda e, x: f"(not {x})",
            "logical_and": lambda e, x, y: f"({x} and {y})",
            "logical_or": lambda e, x, y: f"({x} or {y})",
            "logical_xor": lambda e, x, y: f"(bool({x}) != bool({y}))"}  # truth values, not values


def _where(e: Emitter, c: str, x: str, y: str) -> str:
    return f"({x} if {c} else {y})"


def install() -> None:
    """Fill the ``scalar`` slot of every op that has an expression here."""
    table: dict[str, Expr] = dict(_U)
    table.update({k: (lambda t: lambda e, x, y: t.format(x=x, y=y))(v) for k, v in _B.items()})
    table.update(_LOGICAL)
    table["where"] = _where
    table["cast"] = lambda e, x: x  # the store into the node's dtype is the conversion
    # gradients broadcast through it: in a kernel, broadcasting is just how ``g`` is indexed;
    # ``like`` only gives the shape (its unused element load is dead code to LLVM)
    table["broadcast_like"] = lambda e, g, like: g
    for name, expr in table.items():
        object.__setattr__(get_op(name), "scalar", expr)


install()
