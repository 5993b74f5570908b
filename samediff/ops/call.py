"""``op``: call any table op on values, wherever they live.

Gradient rules (and any code written against values rather than against a graph or a
namespace) use operators and methods on the values (``g * x.cos()``, ``-g``) and, for ops
that are free functions, ``op``: ``op.where(c, a, b)``, ``op.zeros_like(x)``,
``op.sum(x, dims=(1,), keep_dims=True)`` -- array inputs positional, attributes keyword-only.

A call goes to the ``_apply(op, inputs, attrs)`` method of the first input that has one: an
``NDArray`` runs the op eagerly (or records it into the current trace), a ``LazyArray`` records
it into its trace, an ``SDVariable`` into its SameDiff. So one rule serves every front end, and
this package needs no import of the array or graph layers above it (duck typing on ``_apply``).

>>> import numpy as np
>>> from samediff import create
>>> from samediff.ops.call import op
>>> x = create(np.array([1.0, -2.0]))
>>> op.where(x > 0.0, x, op.zeros_like(x)).numpy().tolist()
[1.0, 0.0]
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import OpError
from .registry import REGISTRY, OpDef, get_op


def apply(opdef: OpDef, inputs: tuple | list, attrs: dict) -> Any:
    """Run or record ``opdef`` through the first input that knows how (has ``_apply``)."""
    for x in inputs:
        method = getattr(x, "_apply", None)
        if method is not None:
            return method(opdef, list(inputs), attrs)
    kinds = ", ".join(type(x).__name__ for x in inputs) or "no inputs"
    raise OpError(f"op.{opdef.name}: none of its inputs ({kinds}) is an NDArray, LazyArray or "
                  f"SDVariable, so there is nothing to run or record it with; pass at least one "
                  f"such value (for plain numpy values call nd.{opdef.name}(...) instead)")


class Ops:
    """``op.<name>(*inputs, **attrs)`` applies the registered op ``<name>`` (see the module
    docstring). Names are looked up on every access, so user-defined ops work too."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        opdef = get_op(name)

        def call(*inputs: Any, **attrs: Any) -> Any:
            return apply(opdef, inputs, attrs)
        call.__name__ = call.__qualname__ = name
        call.__doc__ = opdef.doc
        return call

    def __dir__(self) -> list[str]:
        return sorted(REGISTRY)

    def __repr__(self) -> str:
        return f"<op: {len(REGISTRY)} table ops>"


op = Ops()

__all__ = ["Ops", "apply", "op"]
