"""Array creation (``nd.zeros``, ``nd.full``, ``nd.linspace``, ...).

Each function is a thin, annotated front for a creation op of the table, so inside a
``graph_scope`` creation is traced like any other op. Shapes may be given as ints, one tuple,
or after a leading dtype as in ND4J (``nd.zeros(nd.FLOAT, 2, 3)``).

>>> import nd4py as nd
>>> nd.zeros(2, 3).shape
(2, 3)
>>> nd.full((2,), 7.0, dtype=nd.INT).numpy().tolist()
[7, 7]
"""
from __future__ import annotations

from typing import Any

import numpy as np

from samediff import NDArray, bind, create
from samediff.errors import OpError
from samediff.ops import get_op

__all__ = ["create", "array", "zeros", "ones", "full", "value_array_of", "empty", "linspace",
           "arange", "eye", "zeros_like", "ones_like", "full_like", "scalar"]

array = create


def _shape_dtype(what: str, args: tuple, dtype: Any) -> tuple[tuple[int, ...], Any]:
    args = list(args)
    if args and not isinstance(args[0], (int, np.integer, tuple, list)):
        if dtype is not None:
            raise OpError(f"{what}: dtype given twice")
        dtype = args.pop(0)
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = list(args[0])
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in args):
        raise OpError(f"{what}: shape must be ints or one tuple of ints, got {tuple(args)!r}")
    return tuple(int(d) for d in args), dtype


def _attrs(**kw: Any) -> dict:
    return {k: v for k, v in kw.items() if v is not None}


def zeros(*shape: Any, dtype: Any = None) -> NDArray:
    """An array of zeros (default dtype FLOAT)."""
    shape, dtype = _shape_dtype("zeros", shape, dtype)
    return bind(get_op("zeros"), [], _attrs(shape=shape, dtype=dtype))


def ones(*shape: Any, dtype: Any = None) -> NDArray:
    """An array of ones (default dtype FLOAT)."""
    shape, dtype = _shape_dtype("ones", shape, dtype)
    return bind(get_op("ones"), [], _attrs(shape=shape, dtype=dtype))


def full(shape: Any, value: float, dtype: Any = None) -> NDArray:
    """An array filled with ``value`` (ND4J ``valueArrayOf``)."""
    shape, dtype = _shape_dtype("full", (shape,), dtype)
    return bind(get_op("full"), [], _attrs(shape=shape, value=value, dtype=dtype))


value_array_of = full
empty = zeros  # no uninitialized memory is ever handed out


def linspace(start: float, stop: float, num: int, dtype: Any = None) -> NDArray:
    """``num`` evenly spaced values from ``start`` to ``stop`` inclusive."""
    return bind(get_op("linspace"), [], _attrs(start=start, stop=stop, num=num, dtype=dtype))


def arange(start: float, stop: float | None = None, step: float = 1, dtype: Any = None) -> NDArray:
    """Values in ``[start, stop)`` by ``step``; ``arange(n)`` is ``0..n-1`` (LONG for integral
    arguments, FLOAT otherwise)."""
    if stop is None:
        start, stop = 0, start
    return bind(get_op("arange"), [], _attrs(start=start, stop=stop, step=step, dtype=dtype))


def eye(rows: int, cols: int | None = None, dtype: Any = None) -> NDArray:
    """Identity matrix (ones on the diagonal)."""
    return bind(get_op("eye"), [], _attrs(rows=rows, cols=cols, dtype=dtype))


def zeros_like(x: Any, dtype: Any = None) -> NDArray:
    return bind(get_op("zeros_like"), [x], _attrs(dtype=dtype))


def ones_like(x: Any, dtype: Any = None) -> NDArray:
    return bind(get_op("ones_like"), [x], _attrs(dtype=dtype))


def full_like(x: Any, value: float, dtype: Any = None) -> NDArray:
    return bind(get_op("full_like"), [x], _attrs(value=value, dtype=dtype))


def scalar(value: Any, dtype: Any = None) -> NDArray:
    """A 0-d array (ND4J ``Nd4j.scalar``)."""
    out = create(value, dtype)
    if out.rank != 0:
        raise OpError(f"scalar: expected a single value, got shape {out.shape}")
    return out
