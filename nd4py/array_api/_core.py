"""Shared pieces of the array-API namespace: the dtypes (named by the front end's table,
``samediff.frontends.array_api``), how a call reaches an op (``bind``) and the eager-only
numpy path for the few standard functions with no op.

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
from samediff.frontends.array_api import (  # noqa: F401  (the namespace's shared helpers)
    DEFAULT_COMPLEX,
    DEFAULT_FLOAT,
    DEFAULT_INDEX,
    DEFAULT_INT,
    DTYPES,
    axes_tuple,
    ndim,
    normalize_axis,
)
from samediff.ops import REGISTRY
from samediff.surface import OpSurface

# -- dtypes (the standard's, from the front end's table) --------------------------------------
bool, int8, int16, int32, int64 = (DTYPES[n] for n in ("bool", "int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (DTYPES[n] for n in ("uint8", "uint16", "uint32", "uint64"))
float32, float64 = DTYPES["float32"], DTYPES["float64"]
complex64, complex128 = DTYPES["complex64"], DTYPES["complex128"]

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
