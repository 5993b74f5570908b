"""Sequence-model ops: ``embedding`` (a lookup whose gradient is a scatter-add) and
``rms_norm``. (Attention and the recurrent layers come with issue 25's next parts.)

``embedding(ids, weight, padding_idx=None)`` is PyTorch's ``F.embedding``: ``weight[ids]``
for integer ``ids`` of any shape and a ``[num_embeddings, dim]`` table; ids out of range are a
named error (numpy would wrap negatives). Its gradient scatter-adds the output's gradient into
the table's rows, so an id used twice gets both contributions, and the ``padding_idx`` row
(negative: counted from the end, as PyTorch) gets none.

``rms_norm(x, gain, dims=(-1,), epsilon=1e-6)``: ``x / sqrt(mean(x**2) + epsilon) * gain``
over ``dims`` (Zhang & Sennrich's RMSNorm, as Llama and ``torch.nn.RMSNorm``), with the
statistics in float64 for float32 ``x`` (as ``layer_norm``); ``gain`` spans the normalized
dims (a scalar 1.0 for none).
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from ..errors import OpError, OpIndexError
from .call import op
from .families import Attr, normalize_dims
from .nn import _norm_axes, _placed, _placed_shape, _stats_dtype, _sum_except
from .registry import TensorType, define


# --- embedding ----------------------------------------------------------------------------------

def _padding_row(padding_idx: int | None, rows: int) -> int | None:
    if padding_idx is None:
        return None
    if rows >= 0 and not -rows <= padding_idx < rows:
        raise OpError(f"embedding: padding_idx={padding_idx} is outside the table's {rows} "
                      f"rows (it must be in [-{rows}, {rows}))")
    if padding_idx < 0 and rows < 0:  # (known when it runs: only the gradient needs it now)
        raise OpError("embedding: the gradient of a negative padding_idx needs the table's "
                      "number of rows known when the graph is built; give padding_idx >= 0")
    return padding_idx % rows if padding_idx < 0 else padding_idx


def _embedding_infer(types: list[TensorType], a: Any) -> TensorType:
    ids, w = types
    if ids.dtype.kind not in "iu":
        raise OpError(f"embedding: ids must be integers, got {ids}; cast them first "
                      f"(ids.cast('int64'))")
    if len(w.shape) != 2:
        raise OpError(f"embedding: weight must be a [num_embeddings, dim] table, got {w}")
    if w.shape[0] >= 0:
        _padding_row(a.padding_idx, w.shape[0])
    return TensorType((*ids.shape, w.shape[1]), w.dtype)


def _embedding(ids: Any, weight: Any, *, padding_idx: int | None) -> np.ndarray:
    ids, weight = np.asarray(ids), np.asarray(weight)
    _embedding_infer([TensorType(ids.shape, ids.dtype), TensorType(weight.shape, weight.dtype)],
                     SimpleNamespace(padding_idx=padding_idx))  # (eager calls: the same checks)
    rows = len(weight)
    if ids.size and (ids.min() < 0 or ids.max() >= rows):
        raise OpIndexError(f"embedding: ids must be in [0, {rows}) (the table's rows); got "
                           f"values from {ids.min()} to {ids.max()}")
    return weight[ids]


def _embedding_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    ids, w = ins
    g = gs[0]
    pad = _padding_row(a.padding_idx, w.shape[0])
    if pad is not None:  # the padding row learns nothing
        g = op.where(op.expand_dims(op.neq(ids, pad), axis=-1), g, 0.0)
    return [None, op.scatter_add(op.zeros_like(w), ids, g)]


define("embedding", ["ids", "weight"], _embedding_infer, _embedding,
       attrs={"padding_idx": (Attr.OPT_INT, None)}, namespace="nn", grad=_embedding_grad,
       doc="``weight[ids]``: rows of a [num_embeddings, dim] table for integer ids (out of "
           "range: a named error); the gradient scatter-adds into the table (repeated ids "
           "accumulate), never into the ``padding_idx`` row.")


# --- rms_norm -----------------------------------------------------------------------------------

def _rms_norm_infer(types: list[TensorType], a: Any) -> TensorType:
    x, gain = types
    if x.dtype.kind not in "f":
        raise OpError(f"rms_norm: x must be floating point, got {x}")
    axes = _norm_axes(len(x.shape), a.dims)
    _placed_shape(gain.shape, len(x.shape), axes, "gain")
    return TensorType(x.shape, x.dtype)


def _inverse_rms(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> np.ndarray:
    """``1 / sqrt(mean(x**2) + epsilon)`` over ``axes`` (kept), in ``_stats_dtype``."""
    wide = x.astype(_stats_dtype(x.dtype), copy=False)
    with np.errstate(divide="ignore"):
        return 1.0 / np.sqrt(np.mean(wide * wide, axis=axes, keepdims=True) + epsilon)


def _rms_norm(x: Any, gain: Any, *, dims: tuple, epsilon: float) -> np.ndarray:
    x = np.asarray(x)
    axes = _norm_axes(x.ndim, dims)
    g = gain if np.ndim(gain) == 0 else np.reshape(gain, _placed_shape(np.shape(gain), x.ndim,
                                                                       axes, "gain"))
    r = _inverse_rms(x, axes, epsilon)
    return (x * r).astype(x.dtype, copy=False) * np.asarray(g, dtype=x.dtype)


def _rms_norm_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    """With ``r = rsqrt(mean(x**2) + eps)`` and ``gp = g * gain``:
    ``dx = r * gp - x * r**3 * mean(x * gp)``, ``dgain = sum(g * x * r)`` (over the other
    dims)."""
    x, gain, g = ins[0], ins[1], gs[0]
    rank = len(x.shape)
    axes = normalize_dims(a.dims, rank)
    r = op.rsqrt(op.mean(x * x, dims=axes, keep_dims=True) + a.epsilon)
    gp = g * _placed(gain, rank, axes)
    dx = r * gp - x * (r * r * r) * op.mean(x * gp, dims=axes, keep_dims=True)
    return [dx, _sum_except(g * x * r, axes)]


define("rms_norm", ["x", "gain"], _rms_norm_infer, _rms_norm,
       attrs={"dims": (Attr.INTS, (-1,)), "epsilon": (Attr.FLOAT, 1e-6)}, namespace="nn",
       grad=_rms_norm_grad,
       doc="``x / sqrt(mean(x**2) + epsilon) * gain`` over ``dims`` (RMSNorm); gain spans the "
           "normalized dims (a scalar 1.0 for none); statistics in float64 for float32 x.")
