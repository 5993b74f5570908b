"""Reductions (sum, mean, max, norms, log-sum-exp, ...), arg-reductions and cumulative sums.

Every reduction takes ``dims`` (None = all dims; negative dims count from the end) and
``keep_dims``. Dtypes follow numpy: ``sum`` of int32 is int64, ``mean`` of ints is float64,
``max`` of an empty axis raises (as numpy does) while ``sum`` of it is 0 (``prod`` 1, ``mean``
NaN). Norms follow ``numpy.linalg.norm``: integer and bool inputs give float64. A float32
``sum``/``mean`` whose float32 partial sums overflow is recomputed in float64 (``_rescued``),
as the fused kernels accumulate.

Gradient rules are given with each op (``grad=``), written with ordinary ops on the graph
values (operators, methods, ``op.*``). A reduction's gradient ``g`` has the reduced shape;
``_spread`` re-inserts the reduced dims as size 1 (when ``keep_dims=False``; dims are
normalized against ``x``'s rank, which is always known) and the result is broadcast against
``x`` at run time (``broadcast_like`` or a product with an ``x``-shaped term), so unknown (-1)
dims are fine. Counts (``mean``, ``variance``) are Python numbers when the reduced dims are
known and a runtime ``sum(ones_like(x))`` otherwise.

Conventions:

* ``max``/``min``/``norm_max``: the gradient goes to every element equal to the extremum, split
  equally among ties (like ``torch.amax``).
* ``norm1``: ``sign(x)`` (0 at 0); ``norm2``: ``x / norm`` and ``std``: ``(x - mean) / (n' std)``,
  both 0 where the norm / std is 0 (as PyTorch).
* ``prod``: the product of the other elements (exclusive products from both ends), exact even
  with zeros in ``x``. ``cumprod``: ``reverse_cumsum(g * out) / x`` (as TensorFlow), exact only
  away from ``x == 0`` (NaN there).
* ``argmax``, ``argmin``, ``all``, ``any`` are non-differentiable (integer/bool results).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import adjoints  # noqa: F401  (the rules use its broadcast_like)
from .call import op
from .families import (Attr, REDUCE_ATTRS, normalize_axis, normalize_dims, probe_dtypes,
                       reduce_shape, reduction)
from .registry import NONDIFF, Accumulator, TensorType, define

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
    """All of a reduction's outputs finite? Their sum is finite only if they all are: up to 64
    outputs summed as Python floats (float64: no overflow), more by one dot product of the
    output with itself (~0.4 us, the cheapest numpy pass; outputs above ~1e19 make the sum
    of squares overflow, which is harmless: _rescued then keeps them)."""
    if out.ndim == 0:
        return math.isfinite(out)
    flat = out if out.ndim == 1 else out.reshape(-1)
    if flat.size <= 64:  # a few outputs: a Python sum (float64, exact enough) beats a BLAS call
        return math.isfinite(sum(flat.tolist()))
    return math.isfinite(flat.dot(flat))


def _rescued(out, x, fn, dims, keep_dims):
    """numpy sums float16/float32 in their own dtype, so a partial sum can overflow although
    the total fits (``sum([3e38, 3e38, -3e38])`` is inf, or NaN from inf - inf); the fused
    kernels accumulate in float64 and round once. Where the narrow result is not finite it is
    recomputed that way, so every executor agrees; finite results are left untouched."""
    wide = fn(x, axis=dims, keepdims=keep_dims, dtype=np.float64).astype(out.dtype)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(out), out, wide)


_ADD_REDUCE = np.add.reduce


def _sum(x, *, dims, keep_dims):
    # np.add.reduce is np.sum without its Python-level wrapper (same results and dtypes); its
    # arguments given positionally (axis, dtype, out, keepdims): a ufunc parses keywords
    # slowly (~0.5 us of a ~1 us 8x8 sum)
    out = _ADD_REDUCE(x, dims, None, None, keep_dims)
    if out.dtype in _NARROW and not _finite(out):  # (cheap checks first: the hot path)
        return _rescued(out, x, np.add.reduce, dims, keep_dims)
    return out


def _mean(x, *, dims, keep_dims):
    out = np.mean(x, axis=dims, keepdims=keep_dims)
    if out.dtype in _NARROW and not _finite(out):
        return _rescued(out, x, np.mean, dims, keep_dims)
    return out


# --- gradient rules (conventions in the module docstring) -------------------------------

def _axes(x: Any, a: Any) -> tuple[int, ...]:
    return normalize_dims(a.dims, len(x.shape))  # the rank is known even when sizes are not


def _spread(t: Any, x: Any, a: Any) -> Any:
    """``t`` (reduced shape) with the reduced dims restored as size 1 (keep_dims form)."""
    if not a.keep_dims:
        for d in _axes(x, a):  # ascending: each insert leaves the later positions right
            t = op.expand_dims(t, axis=d)
    return t


def _spread_like(t: Any, x: Any, a: Any) -> Any:
    """``t`` broadcast back to ``x``'s full shape."""
    return op.broadcast_like(_spread(t, x, a), x)


def _count(x: Any, a: Any) -> Any:
    """Number of reduced elements per result: a Python int if known, else a runtime value."""
    sizes = [x.shape[d] for d in _axes(x, a)]
    if all(s >= 0 for s in sizes):
        n = 1
        for s in sizes:
            n *= s
        return n
    return op.sum(op.ones_like(x), dims=_axes(x, a), keep_dims=True)


def _extremum_grad(x: Any, y: Any, g: Any, a: Any) -> Any:
    """Route ``g`` to the elements of ``x`` equal to the reduced value ``y``, ties sharing."""
    hit = (x == _spread(y, x, a)).cast(dtype=g.dtype)
    share = _spread(g, x, a) / op.sum(hit, dims=_axes(x, a), keep_dims=True)
    return hit * share


def _leave_one_out(x: Any, dims: tuple[int, ...]) -> Any:
    """For each element, the product of the *other* elements over ``dims`` — no division.

    Along one dim it is (exclusive scan from the front) * (exclusive scan from the back); over
    several it is that times the leave-one-out product of the per-slice products of the rest."""
    d, rest = dims[0], dims[1:]
    out = (op.cumprod(x, axis=d, exclusive=True)
           * op.cumprod(x, axis=d, exclusive=True, reverse=True))
    if rest:
        out = out * _leave_one_out(op.prod(x, dims=(d,), keep_dims=True), rest)
    return out


def _prod_grad(x: Any, y: Any, g: Any, a: Any) -> Any:
    dims = _axes(x, a)
    if not dims:
        return g
    return _spread(g, x, a) * _leave_one_out(x, dims)


def _moment(x: Any, a: Any) -> tuple[Any, Any]:
    """(x - mean, the variance's denominator n - ddof)."""
    centred = x - op.mean(x, dims=a.dims, keep_dims=True)
    return centred, _count(x, a) - int(a.bias_corrected)


def _variance_grad(x: Any, y: Any, g: Any, a: Any) -> Any:
    centred, denom = _moment(x, a)
    return _spread(g, x, a) * (2.0 * centred / denom)


def _over_nonzero(g: Any, y: Any) -> Any:
    """``g / y``, and 0 where ``y == 0`` (without ever dividing by 0, so no NaN in grads of
    grads either)."""
    zero = y == 0
    return op.where(zero, 0.0, g / op.where(zero, 1.0, y))


def _std_grad(x: Any, y: Any, g: Any, a: Any) -> Any:
    centred, denom = _moment(x, a)
    return _spread(_over_nonzero(g, y), x, a) * (centred / denom)


def _norm2_grad(x: Any, y: Any, g: Any, a: Any) -> Any:
    return _spread(_over_nonzero(g, y), x, a) * x


def _norm_max_grad(x: Any, y: Any, g: Any, a: Any) -> Any:
    return x.sign() * _extremum_grad(x.abs(), y, g, a)


def _log_sum_exp_grad(x: Any, y: Any, g: Any, a: Any) -> Any:
    return _spread(g, x, a) * (x - _spread(y, x, a)).exp()  # softmax over dims


reduction("sum", _sum, namespace="base", accumulate=_SUM,
          grad=lambda x, y, g, a: _spread_like(g, x, a),
          doc="Sum over ``dims`` (numpy dtype rules: small ints -> int64).")
reduction("mean", _mean, namespace="base", accumulate=_MEAN,
          grad=lambda x, y, g, a: _spread_like(g, x, a) / _count(x, a),
          doc="Arithmetic mean over ``dims`` (ints -> float64).")
reduction("prod", lambda x, *, dims, keep_dims: np.prod(x, axis=dims, keepdims=keep_dims),
          namespace="base", grad=_prod_grad,
          doc="Product over ``dims``.")
reduction("max", lambda x, *, dims, keep_dims: np.max(x, axis=dims, keepdims=keep_dims),
          namespace="base", accumulate=_MAX,
          grad=_extremum_grad,
          doc="Maximum over ``dims`` (a reduction; elementwise is ``maximum``).")
reduction("min", lambda x, *, dims, keep_dims: np.min(x, axis=dims, keepdims=keep_dims),
          namespace="base", accumulate=_MIN,
          grad=_extremum_grad,
          doc="Minimum over ``dims`` (a reduction; elementwise is ``minimum``).")

_BIAS = {"bias_corrected": (Attr.BOOL, False)}
reduction("variance", lambda x, *, dims, keep_dims, bias_corrected:
          np.var(x, axis=dims, ddof=int(bias_corrected), keepdims=keep_dims),
          attrs=_BIAS, namespace="base",
          grad=_variance_grad,
          doc="Variance over ``dims``; ``bias_corrected=True`` divides by n-1 instead of n.")
reduction("std", lambda x, *, dims, keep_dims, bias_corrected:
          np.std(x, axis=dims, ddof=int(bias_corrected), keepdims=keep_dims),
          attrs=_BIAS, namespace="base",
          grad=_std_grad,
          doc="Standard deviation over ``dims``; ``bias_corrected=True`` divides by n-1.")

reduction("norm1", _norm1, namespace="base",
          grad=lambda x, y, g, a: _spread(g, x, a) * x.sign(),
          doc="L1 norm ``sum(|x|)`` over ``dims``.")
reduction("norm2", _norm2, namespace="base",
          grad=_norm2_grad,
          doc="L2 norm ``sqrt(sum(x**2))`` over ``dims``.")
reduction("norm_max", _norm_max, namespace="base",
          grad=_norm_max_grad,
          doc="Max norm ``max(|x|)`` over ``dims``.")
reduction("log_sum_exp", _log_sum_exp, namespace="math",
          grad=_log_sum_exp_grad,
          doc="``log(sum(exp(x)))`` over ``dims``, computed stably by shifting by the max.")
reduction("all", lambda x, *, dims, keep_dims: np.all(x, axis=dims, keepdims=keep_dims),
          namespace="base", grad=NONDIFF,
          doc="True where every element over ``dims`` is truthy (bool result).")
reduction("any", lambda x, *, dims, keep_dims: np.any(x, axis=dims, keepdims=keep_dims),
          namespace="base", grad=NONDIFF,
          doc="True where some element over ``dims`` is truthy (bool result).")


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
           grad=NONDIFF, doc=doc)


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


def _cumsum_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    # out_i sums x_j over j <= i (j < i if exclusive), in scan order; the adjoint sums g over
    # the same pairs the other way round: the same scan, reversed.
    return [op.cumsum(gs[0], axis=a.axis, exclusive=a.exclusive, reverse=not a.reverse)]


def _cumprod_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    # d out_i / d x_j = out_i / x_j for every pair of the scan (exact only where x != 0)
    s = op.cumsum(gs[0] * outs[0], axis=a.axis, exclusive=a.exclusive, reverse=not a.reverse)
    return [s / ins[0]]


def _cum_op(name: str, fn, identity: int, grad, doc: str) -> None:
    op = None

    def infer(types: list[TensorType], a) -> TensorType:
        (x,) = types
        normalize_axis(a.axis, x.rank, "axis")
        (dtype,) = probe_dtypes(op, a, ((x.dtype, x.weak),), (("axis", 0),))
        return TensorType(x.shape, dtype)

    op = define(name, ["x"], infer, _cumulative(fn, identity), namespace="base",
                attrs={"axis": (Attr.INT, -1), "exclusive": (Attr.BOOL, False),
                       "reverse": (Attr.BOOL, False)}, grad=grad, doc=doc)


_cum_op("cumsum", np.cumsum, 0, _cumsum_grad, "Cumulative sum along ``axis``; ``exclusive`` omits "
        "the current element, ``reverse`` scans from the end (ND4J semantics).")
_cum_op("cumprod", np.cumprod, 1, _cumprod_grad, "Cumulative product along ``axis``; ``exclusive`` "
        "omits the current element, ``reverse`` scans from the end (ND4J semantics).")
