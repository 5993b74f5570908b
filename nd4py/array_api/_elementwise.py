"""Elementwise functions: one function per entry of the front end's tables
(``samediff.frontends.array_api``: ``UNARY``/``BINARY`` name -> op, ``EAGER`` name -> numpy
function for the bitwise functions, which have no op yet: eager numpy, refused inside a
trace), and the rest composed from ops (``log10``, ``trunc``, ``round`` half to even,
``hypot``...)."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from samediff.frontends.array_api import BINARY, EAGER, UNARY

from ._core import eager, op


def _unary(name: str, op_name: str) -> Callable:
    def fn(x: Any, /) -> Any:
        return op(op_name, [x])
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"The ``{op_name}`` op."
    return fn


def _binary(name: str, op_name: str) -> Callable:
    def fn(x1: Any, x2: Any, /) -> Any:
        return op(op_name, [x1, x2])
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"The ``{op_name}`` op."
    return fn


def _eager(name: str, np_fn: Callable) -> Callable:
    if np_fn.nin == 1:
        def fn(x: Any, /) -> Any:
            return eager(name, np_fn, x)
    else:
        def fn(x1: Any, x2: Any, /) -> Any:  # type: ignore[misc]
            return eager(name, np_fn, x1, x2)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"numpy's ``{np_fn.__name__}`` on the buffers (eager only: no op yet)."
    return fn


FUNCTIONS: dict[str, Callable] = {}
FUNCTIONS.update({n: _unary(n, o) for n, o in UNARY.items()})
FUNCTIONS.update({n: _binary(n, o) for n, o in BINARY.items()})
FUNCTIONS.update({n: _eager(n, f) for n, f in EAGER.items()})


def _integral(x: Any) -> bool:
    return np.dtype(x.dtype).kind in "iub"


def positive(x: Any, /) -> Any:
    return op("cast", [x], dtype=x.dtype)


def ceil(x: Any, /) -> Any:
    return positive(x) if _integral(x) else op("ceil", [x])


def floor(x: Any, /) -> Any:
    return positive(x) if _integral(x) else op("floor", [x])


def trunc(x: Any, /) -> Any:
    if _integral(x):
        return positive(x)
    return op("where", [op("lt", [x, 0]), op("ceil", [x]), op("floor", [x])])


def round(x: Any, /) -> Any:
    """Round half to even (the ``round`` op rounds half away from zero); complex values
    round their real and imaginary parts."""
    if _integral(x):
        return positive(x)
    if np.dtype(x.dtype).kind == "c":
        real, imag = round(op("real", [x])), round(op("imag", [x]))
        return op("add", [op("cast", [real], dtype=x.dtype), op("mul", [imag, 1j])])
    r = op("floor", [op("add", [x, 0.5])])
    tie = op("eq", [op("sub", [r, x]), 0.5])
    odd = op("eq", [op("floor_mod", [r, 2.0]), 1.0])
    out = op("where", [op("logical_and", [tie, odd]), op("sub", [r, 1.0]), r])
    return op("where", [op("eq", [x, 0]), x, op("where", [op("lt", [x, 0]), op("neg", [
        op("abs", [out])]), out])])  # -0.0 and -0.4 round to -0.0


def floor_divide(x1: Any, x2: Any, /) -> Any:
    """The ``floor_div`` op (it follows the standard's infinities, as ``//`` does)."""
    return op("floor_div", [x1, x2])


def log10(x: Any, /) -> Any:
    return op("div", [op("log", [x]), math.log(10.0)])


def _operands(x1: Any, x2: Any) -> tuple[Any, Any]:
    """A Python scalar operand as a 0-d array of the other operand's dtype (the standard's
    promotion), so functions composed of several ops keep that dtype throughout."""
    if not hasattr(x1, "dtype"):
        x1 = op("full", [], shape=(), value=x1, dtype=x2.dtype)
    if not hasattr(x2, "dtype"):
        x2 = op("full", [], shape=(), value=x2, dtype=x1.dtype)
    return x1, x2


def hypot(x1: Any, x2: Any, /) -> Any:
    x1, x2 = _operands(x1, x2)
    a, b = op("abs", [x1]), op("abs", [x2])
    hi, lo = op("maximum", [a, b]), op("minimum", [a, b])
    ratio = op("where", [op("eq", [hi, 0]), op("zeros_like", [hi]), op("div", [lo, hi])])
    out = op("mul", [hi, op("sqrt", [op("add", [op("square", [ratio]), 1.0])])])
    return op("where", [op("logical_or", [op("isinf", [a]), op("isinf", [b])]),
                        op("full_like", [out], value=float("inf")), out])


def logaddexp(x1: Any, x2: Any, /) -> Any:
    hi = op("maximum", [x1, x2])
    out = op("add", [hi, op("log1p", [op("exp", [op("neg", [op("abs", [op("sub", [x1, x2])])])])])])
    return op("where", [op("eq", [x1, x2]), op("add", [hi, math.log(2.0)]), out])


def clip(x: Any, /, min: Any = None, max: Any = None) -> Any:
    out = x
    if min is not None:
        out = op("maximum", [out, min])
    if max is not None:
        out = op("minimum", [out, max])
    return out if out is not x else positive(x)


FUNCTIONS.update({f.__name__: f for f in (
    positive, ceil, floor, trunc, round, floor_divide, log10, hypot, logaddexp, clip)})
