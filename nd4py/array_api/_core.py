"""Shared pieces of the array-API namespace: the dtypes, how a call reaches an op (``bind``)
and the eager-only numpy path for the few standard functions with no op.

Every function of the namespace ends in ``bind`` (``op(name, inputs, **attrs)``), so it runs
eagerly, records inside ``graph_scope`` / ``@nd.compile`` and records into a SameDiff graph for
a graph variable. Functions whose result shape depends on the data (``nonzero``, ``unique_*``)
or that have no op yet (bitwise ops, ``sort``) run numpy on the buffers: eager only, and
refused inside a trace with a ``TracingError`` naming the function.
"""
from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import numpy as np

from samediff import NDArray, bind
from samediff.array import CURRENT_TRACE, as_numpy
from samediff.dtypes import SUPPORTED, to_dtype, unsupported
from samediff.errors import TracingError
from samediff.ops import REGISTRY
from samediff.surface import OpSurface

# -- dtypes (the standard's) ------------------------------------------------------------------
bool = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float32, float64 = np.dtype(np.float32), np.dtype(np.float64)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

#: The standard's default dtypes here (numpy's: Python floats become float64).
DEFAULT_FLOAT, DEFAULT_INT, DEFAULT_INDEX = float64, int64, int64
DEFAULT_COMPLEX = complex128

DTYPES = {"bool": bool, "int8": int8, "int16": int16, "int32": int32, "int64": int64,
          "uint8": uint8, "uint16": uint16, "uint32": uint32, "uint64": uint64,
          "float32": float32, "float64": float64, "complex64": complex64,
          "complex128": complex128}

_PY_SCALARS = (int, float, complex)


def dtype_of(value: Any) -> np.dtype | None:
    """The dtype an argument brings to promotion: arrays and dtypes; None for Python scalars."""
    if isinstance(value, np.dtype):
        return value
    if hasattr(value, "dtype") and not isinstance(value, type):
        return np.dtype(value.dtype)
    if isinstance(value, (builtins.bool, *_PY_SCALARS)):
        return None
    return to_dtype(value)


def as_dtype(dtype: Any) -> np.dtype | None:
    return None if dtype is None else to_dtype(dtype)


def op(name: str, inputs: list, **attrs: Any) -> Any:
    """One op call through ``bind`` (None attributes mean "not given")."""
    return bind(REGISTRY[name], list(inputs), {k: v for k, v in attrs.items() if v is not None})


def is_array(x: Any) -> bool:
    return isinstance(x, OpSurface)


def wrap(value: Any) -> NDArray:
    """A Python value or numpy array as an ``NDArray`` (Python floats become float64)."""
    if isinstance(value, OpSurface):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        return NDArray(as_numpy(np.asarray(value)))
    arr = np.asarray(value)
    if arr.dtype not in SUPPORTED:
        raise unsupported(arr.dtype)
    return NDArray(arr)


def eager(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run numpy on the buffers of the array arguments (eager only); array results come back
    as ``NDArray`` (tuples of them stay tuples)."""
    traced = CURRENT_TRACE.get() is not None or any(
        isinstance(a, OpSurface) and type(a) is not NDArray and getattr(a, "_recorder", None)
        is not None for a in args)
    if traced:
        raise TracingError(f"array_api.{what} has no nd4py op (its result depends on the data or "
                           f"it runs numpy): it cannot be traced; call it outside the "
                           f"graph_scope / @nd.compile function")

    def unwrap(a: Any) -> Any:
        if isinstance(a, (list, tuple)):
            return type(a)(unwrap(v) for v in a)
        return np.asarray(a) if isinstance(a, OpSurface) else a

    out = fn(*unwrap(args), **{k: unwrap(v) for k, v in kwargs.items()})
    return _wrap_result(out)


def _wrap_result(out: Any) -> Any:
    if isinstance(out, tuple):
        return tuple(_wrap_result(o) for o in out)
    if isinstance(out, (np.ndarray, np.generic)):
        out = np.asarray(out)
        if out.dtype not in SUPPORTED:
            raise unsupported(out.dtype)
        return NDArray(out)
    return out


def ndim(x: Any) -> int:
    """Number of dimensions (graph variables have a shape but no ``ndim``)."""
    return len(x.shape)


def normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise IndexError(f"axis {axis} is out of bounds for an array of {ndim} dimensions")
    return axis % ndim if ndim else 0


def axes_tuple(axis: Any, ndim: int) -> tuple[int, ...] | None:
    """``axis`` (None, an int or a sequence) as sorted non-negative dims; None = all."""
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(normalize_axis(int(a), ndim) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis!r}")
    return out
