"""Array creation: zeros, ones, full, linspace, arange, eye, and the ``*_like`` variants.

Creation ops take no array inputs (``infer`` gets an empty list) except the ``*_like`` ones,
whose output has the shape of ``x`` and, unless ``dtype`` is given, its dtype. Like ND4J the
default dtype is FLOAT (float32); ``arange`` gives int64 when start, stop and step are integral.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .families import REQUIRED, Attr
from .registry import NONDIFF, TensorType, define

_FLOAT32 = np.dtype(np.float32)
_INT64 = np.dtype(np.int64)


def check_static_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """A created array's shape must be fully known: no negative (-1 = unknown) sizes."""
    if any(d < 0 for d in shape):
        raise ValueError(f"shape {tuple(shape)} must hold non-negative sizes; an unknown (-1) "
                         f"size is not allowed for a created array")
    return tuple(shape)


def _shape_infer(types: list[TensorType], a: Any) -> TensorType:
    return TensorType(check_static_shape(a.shape), a.dtype)


def _check_count(name: str, value: int | None) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


# --- arange: the length rule must match numpy's exactly -----------------------------------------

def _arange_integral(start: float, stop: float | None, step: float) -> bool:
    return all(float(v).is_integer() for v in (start, step) + (() if stop is None else (stop,)))


def _arange_bounds(start: float, stop: float | None, step: float) -> tuple[float, float, float]:
    if stop is None:  # numpy's one-argument form: arange(n) = [0, n)
        start, stop = 0.0, start
    if not all(math.isfinite(v) for v in (start, stop, step)):
        raise ValueError(f"start, stop and step must be finite, got {start}, {stop}, {step}")
    if step == 0:
        raise ValueError("step must not be 0")
    return start, stop, step


def _arange_dtype(a_dtype: np.dtype | None, start: float, stop: float | None, step: float):
    if a_dtype is not None:
        return a_dtype
    return _INT64 if _arange_integral(start, stop, step) else _FLOAT32


def _arange_infer(types: list[TensorType], a: Any) -> TensorType:
    start, stop, step = _arange_bounds(a.start, a.stop, a.step)
    if _arange_integral(start, stop, step):
        n = -(-(int(stop) - int(start)) // int(step))  # exact ceil division on ints
    else:
        n = math.ceil((stop - start) / step)  # numpy's rule, in float64
    return TensorType((max(n, 0),), _arange_dtype(a.dtype, a.start, a.stop, a.step))


def _arange(*, start, stop, step, dtype):
    out_dtype = _arange_dtype(dtype, start, stop, step)
    start, stop, step = _arange_bounds(start, stop, step)
    # Compute in int64 (exact) or float64 and cast: numpy's arange in float32 accumulates error.
    if _arange_integral(start, stop, step):
        values = np.arange(int(start), int(stop), int(step), dtype=np.int64)
    else:
        values = np.arange(start, stop, step, dtype=np.float64)
    return values.astype(out_dtype, copy=False)


# --- linspace / eye --------------------------------------------------------------------------

def _linspace_infer(types: list[TensorType], a: Any) -> TensorType:
    _check_count("num", a.num)
    return TensorType((a.num,), a.dtype)


def _eye_infer(types: list[TensorType], a: Any) -> TensorType:
    _check_count("rows", a.rows)
    _check_count("cols", a.cols)
    return TensorType((a.rows, a.rows if a.cols is None else a.cols), a.dtype)


# --- *_like --------------------------------------------------------------------------------

def _like_infer(types: list[TensorType], a: Any) -> TensorType:
    (x,) = types
    return TensorType(x.shape, x.dtype if a.dtype is None else a.dtype)


# Ops without array inputs have nothing to differentiate. The ``*_like`` ops read only x's
# shape and dtype, never its values: x gets no gradient (None, rather than a materialized zero
# array added into x's gradient), so a loss that reaches x only through them reports that x
# "does not affect any loss" -- which is exactly true.
_NEW = {"namespace": "creation", "method": False, "grad": NONDIFF}
_LIKE = {"namespace": "creation", "method": False,
         "grad": lambda ins, outs, gs, a: [None]}
_SHAPE_DTYPE = {"shape": (Attr.INTS, REQUIRED), "dtype": (Attr.DTYPE, _FLOAT32)}
_OPT_DTYPE = {"dtype": (Attr.OPT_DTYPE, None)}

define("zeros", [], _shape_infer, lambda *, shape, dtype: np.zeros(shape, dtype),
       attrs=_SHAPE_DTYPE, **_NEW, doc="Array of zeros of ``shape`` (default dtype float32).")
define("ones", [], _shape_infer, lambda *, shape, dtype: np.ones(shape, dtype),
       attrs=_SHAPE_DTYPE, **_NEW, doc="Array of ones of ``shape`` (default dtype float32).")
define("full", [], _shape_infer, lambda *, shape, value, dtype: np.full(shape, value, dtype),
       attrs={"shape": (Attr.INTS, REQUIRED), "value": (Attr.NUMBER, REQUIRED),
              "dtype": (Attr.DTYPE, _FLOAT32)}, **_NEW,
       doc="Array of ``shape`` filled with ``value`` (cast to ``dtype``, default float32).")
define("linspace", [], _linspace_infer,
       lambda *, start, stop, num, dtype: np.linspace(start, stop, num, dtype=dtype),
       attrs={"start": (Attr.NUMBER, REQUIRED), "stop": (Attr.NUMBER, REQUIRED),
              "num": (Attr.INT, REQUIRED), "dtype": (Attr.DTYPE, _FLOAT32)}, **_NEW,
       doc="``num`` evenly spaced values from ``start`` to ``stop``, both included.")
define("arange", [], _arange_infer, _arange,
       attrs={"start": (Attr.FLOAT, REQUIRED), "stop": (Attr.OPT_FLOAT, None),
              "step": (Attr.FLOAT, 1.0), "dtype": (Attr.OPT_DTYPE, None)}, **_NEW,
       doc="Values ``start, start+step, ...`` below ``stop`` (``arange(n)`` = [0, n)); dtype "
           "None = int64 if all are integral, else float32.")
define("eye", [], _eye_infer, lambda *, rows, cols, dtype: np.eye(rows, cols, dtype=dtype),
       attrs={"rows": (Attr.INT, REQUIRED), "cols": (Attr.OPT_INT, None),
              "dtype": (Attr.DTYPE, _FLOAT32)}, **_NEW,
       doc="``rows x cols`` matrix with ones on the diagonal (``cols`` None = square).")
define("zeros_like", ["x"], _like_infer, lambda x, *, dtype: np.zeros_like(x, dtype=dtype),
       attrs=_OPT_DTYPE, type_only=True, **_LIKE,
       doc="Zeros with the shape of ``x`` and its dtype unless ``dtype`` is given.")
define("ones_like", ["x"], _like_infer, lambda x, *, dtype: np.ones_like(x, dtype=dtype),
       attrs=_OPT_DTYPE, type_only=True, **_LIKE,
       doc="Ones with the shape of ``x`` and its dtype unless ``dtype`` is given.")
define("full_like", ["x"], _like_infer,
       lambda x, *, value, dtype: np.full_like(x, value, dtype=dtype),
       attrs={"value": (Attr.NUMBER, REQUIRED), **_OPT_DTYPE}, type_only=True, **_LIKE,
       doc="``value`` with the shape of ``x`` and its dtype unless ``dtype`` is given.")
