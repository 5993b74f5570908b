"""Gradient rules of the reductions and scans (``reductions.py``).

A reduction's gradient ``g`` has the reduced shape; ``_spread`` re-inserts the reduced dims
as size 1 (when ``keep_dims=False``; dims are normalized against ``x``'s rank, which is always
known) and the result is broadcast against ``x`` at run time (``broadcast_like`` or a product
with an ``x``-shaped term), so unknown (-1) dims are fine. Counts (``mean``, ``variance``) are Python numbers when the reduced dims are
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

Rules are written with ordinary ops on the graph values (operators, methods, ``op.*``).
"""
from __future__ import annotations

from typing import Any

from .call import op
from .families import normalize_dims
from .grads_elementwise import unary_grad
from .registry import defgrad, nondifferentiable


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


def _extremum(x: Any, y: Any, g: Any, a: Any) -> Any:
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


def _prod(x: Any, y: Any, g: Any, a: Any) -> Any:
    dims = _axes(x, a)
    if not dims:
        return g
    return _spread(g, x, a) * _leave_one_out(x, dims)


def _moment(x: Any, a: Any) -> tuple[Any, Any]:
    """(x - mean, the variance's denominator n - ddof)."""
    centred = x - op.mean(x, dims=a.dims, keep_dims=True)
    return centred, _count(x, a) - int(a.bias_corrected)


def _variance(x: Any, y: Any, g: Any, a: Any) -> Any:
    centred, denom = _moment(x, a)
    return _spread(g, x, a) * (2.0 * centred / denom)


def _over_nonzero(g: Any, y: Any) -> Any:
    """``g / y``, and 0 where ``y == 0`` (without ever dividing by 0, so no NaN in grads of
    grads either)."""
    zero = y == 0
    return op.where(zero, 0.0, g / op.where(zero, 1.0, y))


def _std(x: Any, y: Any, g: Any, a: Any) -> Any:
    centred, denom = _moment(x, a)
    return _spread(_over_nonzero(g, y), x, a) * (centred / denom)


def _norm2(x: Any, y: Any, g: Any, a: Any) -> Any:
    return _spread(_over_nonzero(g, y), x, a) * x


def _norm_max(x: Any, y: Any, g: Any, a: Any) -> Any:
    return x.sign() * _extremum(x.abs(), y, g, a)


def _log_sum_exp(x: Any, y: Any, g: Any, a: Any) -> Any:
    return _spread(g, x, a) * (x - _spread(y, x, a)).exp()  # softmax over dims


def _cumsum(ins: list, outs: list, gs: list, a: Any) -> list:
    # out_i sums x_j over j <= i (j < i if exclusive), in scan order; the adjoint sums g over
    # the same pairs the other way round: the same scan, reversed.
    return [op.cumsum(gs[0], axis=a.axis, exclusive=a.exclusive, reverse=not a.reverse)]


def _cumprod(ins: list, outs: list, gs: list, a: Any) -> list:
    # d out_i / d x_j = out_i / x_j for every pair of the scan (exact only where x != 0)
    s = op.cumsum(gs[0] * outs[0], axis=a.axis, exclusive=a.exclusive, reverse=not a.reverse)
    return [s / ins[0]]


unary_grad("sum", lambda x, y, g, a: _spread_like(g, x, a))
unary_grad("mean", lambda x, y, g, a: _spread_like(g, x, a) / _count(x, a))
unary_grad("prod", _prod)
unary_grad("max", _extremum)
unary_grad("min", _extremum)
unary_grad("variance", _variance)
unary_grad("std", _std)
unary_grad("norm1", lambda x, y, g, a: _spread(g, x, a) * x.sign())
unary_grad("norm2", _norm2)
unary_grad("norm_max", _norm_max)
unary_grad("log_sum_exp", _log_sum_exp)
defgrad("cumsum", _cumsum)
defgrad("cumprod", _cumprod)
nondifferentiable("argmax", "argmin", "all", "any")
