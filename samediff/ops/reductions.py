"""Reductions (sum, mean, max, norms, log-sum-exp, ...), arg-reductions and cumulative sums.

Every reduction takes ``dims`` (None = all dims; negative dims count from the end) and
``keep_dims``. Dtypes follow numpy: ``sum`` of int32 is int64, ``mean`` of ints is float64,
``max`` of an empty axis raises (as numpy does) while ``sum`` of it is 0 (``prod`` 1, ``mean``
NaN). Norms follow ``numpy.linalg.norm``: integer and bool inputs give float64. A float32
``sum``/``mean`` whose float32 partial sums overflow is recomputed in float64 (``_rescued``),
as the fused kernels accumulate.
"""
from __future__ import annotations

import math

import numpy as np

from .families import (Attr, REDUCE_ATTRS, normalize_axis, probe_dtypes, reduce_shape,
                       reduction)
from .registry import Accumulator, TensorType, define

# How fused kernels fold the reductions they can fuse (compiler/reduce.py): sums accumulate in
# float64 for float32 data; np.maximum/np.minimum propagate NaN like numpy's max/min (Python's
# max(acc, nan) is acc); numpy raises for an empty max/min, so those leave it to the interpreter.
_SUM = Accumulator("0.0", "acc + {v}")
_MEAN = Accumulator("0.0", "acc + {v}", finish="acc / C")
_MAX = Accumulator("-np.inf", "np.maximum(acc, {v})", empty=False, exact=True)
_MIN = Accumulator("np.inf", "np.minimum(acc, {v})", empty=False, exact=True)


def _as_float(x) -> np.ndarray:
    """Floats unchanged, ints/bools as float64 (``numpy.linalg.norm``'s rule)."""
    x = np.asarray(x)
    return x if np.issubdtype(x.dtype, np.inexact) else x.astype(np.float64)


def _norm1(x, *, dims, keep_dims):
    return np.sum(np.abs(_as_float(x)), axis=dims, keepdims=keep_dims)


def _norm2(x, *, dims, keep_dims):
    return np.sqrt(np.sum(np.square(np.abs(_as_float(x))), axis=dims, keepdims=keep_dims))


def _norm_max(x, *, dims, keep_dims):
    return np.max(np.abs(_as_float(x)), axis=dims, keepdims=keep_dims)


def _log_sum_exp(x, *, dims, keep_dims):
    x = _as_float(x)
    # initial=-inf makes an empty reduction give log(0) = -inf instead of raising.
    m = np.max(x, axis=dims, keepdims=True, initial=-np.inf)
    # An all -inf (or +inf) slice would give inf - inf = NaN; shifting it by 0 instead yields
    # log(0) = -inf (resp. +inf), the exact answer. log(0) warns, hence the errstate.
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=dims, keepdims=True)) + m
    if not keep_dims:
        out = np.squeeze(out, axis=dims if dims is not None else tuple(range(x.ndim)))
    return out


_NARROW = (np.dtype(np.float16), np.dtype(np.float32))


def _finite(out) -> bool:
    """All of a reduction's outputs finite? One dot product of the output with itself (~0.4
    us, the cheapest numpy pass): it is not finite if an output is not (or, harmlessly, if
    outputs above ~1e19 make the sum of squares overflow: _rescued then keeps them)."""
    if out.ndim == 0:
        return math.isfinite(out)
    flat = out if out.ndim == 1 else out.reshape(-1)
    return math.isfinite(flat.dot(flat))


def _rescued(out, x, fn, dims, keep_dims):
    """numpy sums float16/float32 in their own dtype, so a partial sum can overflow although
    the total fits (``sum([3e38, 3e38, -3e38])`` is inf, or NaN from inf - inf); the fused
    kernels accumulate in float64 and round once. Where the narrow result is not finite it is
    recomputed that way, so every executor agrees; finite results are left untouched."""
    wide = fn(x, axis=dims, keepdims=keep_dims, dtype=np.float64).astype(out.dtype)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(out), out, wide)


def _sum(x, *, dims, keep_dims):
    # np.add.reduce is np.sum without its Python-level wrapper (same results and dtypes)
    out = np.add.reduce(x, axis=dims, keepdims=keep_dims)
    if out.dtype in _NARROW and not _finite(out):  # (cheap checks first: the hot path)
        return _rescued(out, x, np.add.reduce, dims, keep_dims)
    return out


def _mean(x, *, dims, keep_dims):
    out = np.mean(x, axis=dims, keepdims=keep_dims)
    if out.dtype in _NARROW and not _finite(out):
        return _rescued(out, x, np.mean, dims, keep_dims)
    return out


reduction("sum", _sum, namespace="base", accumulate=_SUM,
          doc="Sum over ``dims`` (numpy dtype rules: small ints -> int64).")
reduction("mean", _mean, namespace="base", accumulate=_MEAN,
          doc="Arithmetic mean over ``dims`` (ints -> float64).")
reduction("prod", lambda x, *, dims, keep_dims: np.prod(x, axis=dims, keepdims=keep_dims),
          namespace="base", doc="Product over ``dims``.")
reduction("max", lambda x, *, dims, keep_dims: np.max(x, axis=dims, keepdims=keep_dims),
          namespace="base", accumulate=_MAX,
          doc="Maximum over ``dims`` (a reduction; elementwise is ``maximum``).")
reduction("min", lambda x, *, dims, keep_dims: np.min(x, axis=dims, keepdims=keep_dims),
          namespace="base", accumulate=_MIN,
          doc="Minimum over ``dims`` (a reduction; elementwise is ``minimum``).")

_BIAS = {"bias_corrected": (Attr.BOOL, False)}
reduction("variance", lambda x, *, dims, keep_dims, bias_corrected:
          np.var(x, axis=dims, ddof=int(bias_corrected), keepdims=keep_dims),
          attrs=_BIAS, namespace="base",
          doc="Variance over ``dims``; ``bias_corrected=True`` divides by n-1 instead of n.")
reduction("std", lambda x, *, dims, keep_dims, bias_corrected:
          np.std(x, axis=dims, ddof=int(bias_corrected), keepdims=keep_dims),
          attrs=_BIAS, namespace="base",
          doc="Standard deviation over ``dims``; ``bias_corrected=True`` divides by n-1.")

reduction("norm1", _norm1, namespace="base", doc="L1 norm ``sum(|x|)`` over ``dims``.")
reduction("norm2", _norm2, namespace="base", doc="L2 norm ``sqrt(sum(x**2))`` over ``dims``.")
reduction("norm_max", _norm_max, namespace="base",
          doc="Max norm ``max(|x|)`` over ``dims``.")
reduction("log_sum_exp", _log_sum_exp, namespace="math",
          doc="``log(sum(exp(x)))`` over ``dims``, computed stably by shifting by the max.")
reduction("all", lambda x, *, dims, keep_dims: np.all(x, axis=dims, keepdims=keep_dims),
          namespace="base", doc="True where every element over ``dims`` is truthy (bool result).")
reduction("any", lambda x, *, dims, keep_dims: np.any(x, axis=dims, keepdims=keep_dims),
          namespace="base", doc="True where some element over ``dims`` is truthy (bool result).")


# --- argmax / argmin -----------------------------------------------------------------------

def _one_axis(name: str, dims) -> int | None:
    """``None`` (flattened) or the single dim: numpy cannot arg-reduce several dims at once."""
    if dims is None:
        return None
    if len(dims) != 1:
        raise ValueError(f"{name} reduces over all dims (dims=None, flattened) or exactly one "
                         f"dim, got dims={tuple(dims)}; reshape first to combine dims")
    return dims[0]


def _arg_reduction(name: str, fn, doc: str) -> None:
    def impl(x, *, dims, keep_dims):
        return fn(x, axis=_one_axis(name, dims), keepdims=keep_dims).astype(np.int64, copy=False)

    def infer(types: list[TensorType], a) -> TensorType:
        _one_axis(name, a.dims)
        return TensorType(reduce_shape(types[0].shape, a.dims, a.keep_dims), np.dtype(np.int64))

    define(name, ["x"], infer, impl, attrs=REDUCE_ATTRS, namespace="base", reduction=True,
           doc=doc)


_arg_reduction("argmax", np.argmax, "Index (int64) of the maximum over one dim, or of the "
               "flattened array when ``dims`` is None; the first one on ties.")
_arg_reduction("argmin", np.argmin, "Index (int64) of the minimum over one dim, or of the "
               "flattened array when ``dims`` is None; the first one on ties.")


# --- cumulative sum / product ----------------------------------------------------------------

def _cumulative(fn, identity: int):
    def impl(x, *, axis, exclusive, reverse):
        x = np.asarray(x)
        if reverse:
            x = np.flip(x, axis)
        out = fn(x, axis=axis)
        if exclusive:
            # Shift by one along axis, filling the first slot with the identity: the exclusive
            # scan is exact (no subtraction/division of the inclusive one).
            shifted = np.full_like(out, identity)
            n = out.shape[axis]
            dst = [slice(None)] * out.ndim
            src = [slice(None)] * out.ndim
            dst[axis % out.ndim], src[axis % out.ndim] = slice(1, n), slice(0, n - 1)
            shifted[tuple(dst)] = out[tuple(src)]
            out = shifted
        return np.flip(out, axis) if reverse else out
    return impl


def _cum_op(name: str, fn, identity: int, doc: str) -> None:
    op = None

    def infer(types: list[TensorType], a) -> TensorType:
        (x,) = types
        normalize_axis(a.axis, x.rank, "axis")
        (dtype,) = probe_dtypes(op, a, ((x.dtype, x.weak),), (("axis", 0),))
        return TensorType(x.shape, dtype)

    op = define(name, ["x"], infer, _cumulative(fn, identity), namespace="base",
                attrs={"axis": (Attr.INT, -1), "exclusive": (Attr.BOOL, False),
                       "reverse": (Attr.BOOL, False)}, doc=doc)


_cum_op("cumsum", np.cumsum, 0, "Cumulative sum along ``axis``; ``exclusive`` omits "
        "the current element, ``reverse`` scans from the end (ND4J semantics).")
_cum_op("cumprod", np.cumprod, 1, "Cumulative product along ``axis``; ``exclusive`` "
        "omits the current element, ``reverse`` scans from the end (ND4J semantics).")
