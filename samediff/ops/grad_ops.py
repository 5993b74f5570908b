"""Ops that gradient rules need: undoing and redoing broadcasting against a runtime shape.

``reduce_to_like(g, x)`` sums ``g`` down to ``x``'s shape (the adjoint of broadcasting) and
``broadcast_like(g, x)`` broadcasts ``g`` up to it. Taking the target shape from an input
rather than an attribute keeps gradients correct for ``-1`` (unknown) dims, and the two ops
are each other's gradient, so higher derivatives work.
"""
from __future__ import annotations

import numpy as np

from .families import broadcast_shapes
from .registry import TensorType, define


def _reduce_to_like(g, like):
    g = np.asarray(g)
    shape = np.shape(like)
    lead = g.ndim - len(shape)
    if lead < 0:
        raise ValueError(f"cannot reduce shape {g.shape} to the larger rank of {shape}")
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and g.shape[lead + i] != 1)
    # dtype=g.dtype: numpy would widen int32 sums to int64; the result keeps g's dtype (infer)
    out = np.sum(g, axis=axes, keepdims=True, dtype=g.dtype) if axes else g
    return out.reshape(shape) if out.shape != shape else out


def _reduce_infer(types, attrs):
    g, like = types
    if len(g.shape) < len(like.shape):
        raise ValueError(f"cannot reduce rank {len(g.shape)} to rank {len(like.shape)}")
    broadcast_shapes(g.shape, like.shape)  # must be broadcast-compatible
    return TensorType(like.shape, g.dtype)


def _broadcast_infer(types, attrs):
    g, like = types
    return TensorType(broadcast_shapes(g.shape, like.shape), g.dtype)


define("reduce_to_like", ["g", "like"], _reduce_infer, _reduce_to_like, namespace="base",
       method=False, doc="Sum ``g`` over the dims that broadcasting added relative to "
                         "``like``'s shape (the adjoint of broadcasting).")
define("broadcast_like", ["g", "like"], _broadcast_infer,
       lambda g, like: np.array(np.broadcast_to(g, np.broadcast_shapes(np.shape(g), np.shape(like)))),
       namespace="base", method=False,
       doc="Broadcast ``g`` against ``like``'s shape (result has ``g``'s dtype).")
