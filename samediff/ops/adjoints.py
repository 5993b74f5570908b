"""Adjoint ops: what gradient rules use to undo a shape op against a run-time shape.

``reduce_to_like(g, x)`` sums ``g`` down to ``x``'s shape (the adjoint of broadcasting) and
``broadcast_like(g, x)`` broadcasts ``g`` up to it. ``reshape_like``, ``slice_grad``,
``pad_grad`` and ``split_like`` undo ``reshape``, ``strided_slice``, ``pad`` and ``concat``.
Taking the target shape from an input rather than an attribute keeps gradients correct for
``-1`` (unknown) dims. Each helper's own gradient is again a table op (its partner, given in
its definition below), so higher derivatives work. The modules whose rules lean on these
ops (``reductions``, ``shape_ops``, ``slicing``, ``linalg``) import this one, so it sits below
them; a rule itself names ops through ``call.op``, which looks them up when the rule runs.
"""
from __future__ import annotations

import numpy as np

from typing import Any, Callable

from .call import op
from .families import REQUIRED, Attr, broadcast_shapes, normalize_axis, numel, pad_shape
from .indexing import indexed_shape, spec_to_index
from .registry import TensorType, define


def like_only(fn: Callable[[Any, Any, Any], Any]) -> Callable[..., list]:
    """The rule of a helper ``op(x, like)`` from ``fn(x, g, attrs) -> dx``: ``like`` only
    lends its shape, so it gets no gradient."""
    return lambda ins, outs, gs, a: [fn(ins[0], gs[0], a), None]


def sum_to_shape_of(g: Any, like: Any) -> np.ndarray:
    """``g`` summed over the dims ``like`` lacks or has as 1 (the adjoint of broadcasting
    to ``g``'s shape), with ``like``'s shape."""
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


define("reduce_to_like", ["g", "like"], _reduce_infer, sum_to_shape_of, namespace="base",
       method=False, shape_adjoint=True, view=True,
       grad=like_only(lambda x, g, a: op.broadcast_like(g, x)),
       doc="Sum ``g`` over the dims that broadcasting added relative to ``like``'s shape (the "
           "adjoint of broadcasting).")
# in a kernel, broadcasting is just how ``g`` is indexed; ``like`` only gives the shape (its
# unused element load is dead code to LLVM)
define("broadcast_like", ["g", "like"], _broadcast_infer,
       lambda g, like: np.array(np.broadcast_to(g, np.broadcast_shapes(np.shape(g), np.shape(like)))),
       namespace="base", method=False, shape_adjoint=True, scalar=lambda e, g, like: g,
       exact=True, grad=like_only(lambda x, g, a: op.reduce_to_like(g, x)),
       doc="Broadcast ``g`` against ``like``'s shape (result has ``g``'s dtype).")


# --- runtime-shape helpers of the shape-op gradients ---------------------------------------
# Each takes the target shape from a ``like`` input (so -1 dims are fine) and is the adjoint of
# a shape op; its own gradient is that shape op.

def _reshape_like_infer(types, attrs):
    g, like = types
    n, m = numel(g.shape), numel(like.shape)
    if n >= 0 and m >= 0 and n != m:
        raise ValueError(f"cannot reshape {n} elements (shape {g.shape}) to shape {like.shape} "
                         f"({m} elements)")
    return TensorType(like.shape, g.dtype)


def _check_fits(got, want, what):
    if len(got) != len(want) or any(a >= 0 and b >= 0 and a != b for a, b in zip(got, want)):
        raise ValueError(f"g of shape {tuple(got)} must have the shape {tuple(want)} of {what}")


def _slice_grad_infer(types, attrs):
    g, like = types
    _check_fits(g.shape, indexed_shape(like.shape, attrs.index), "like[index]")
    return TensorType(like.shape, g.dtype)


def _slice_grad(g, like, *, index):
    g, shape = np.asarray(g), np.shape(like)
    _check_fits(g.shape, indexed_shape(shape, index), "like[index]")
    out = np.zeros(shape, g.dtype)
    out[spec_to_index(index)] = g  # basic indexing never repeats an element: no accumulation
    return out


def _pad_grad_infer(types, attrs):
    g, like = types
    _check_fits(g.shape, pad_shape(like.shape, attrs.paddings, attrs.mode), "pad(like)")
    return TensorType(like.shape, g.dtype)


def _pad_grad(g, like, *, paddings, mode):
    g, shape = np.asarray(g), np.shape(like)
    _check_fits(g.shape, pad_shape(shape, paddings, mode), "pad(like)")
    out = g
    for ax, ((before, after), d) in enumerate(zip(paddings, shape)):
        if mode == "constant":
            out = out[(slice(None),) * ax + (slice(before, before + d),)]
            continue
        src = np.pad(np.arange(d), (before, after), mode)  # padded position -> source index
        acc = np.zeros((d,) + out.shape[:ax] + out.shape[ax + 1:], g.dtype)
        np.add.at(acc, src, np.moveaxis(out, ax, 0))  # mirrored copies accumulate
        out = np.moveaxis(acc, 0, ax)
    return np.array(out)


def _split_like_infer(types, attrs):
    if len(types) < 2:
        raise ValueError("split_like needs g and at least one `like` input")
    g, likes = types[0], types[1:]
    ax = normalize_axis(attrs.axis, g.rank, "axis")
    known = [t.shape[ax] for t in likes]
    if all(k >= 0 for k in known) and g.shape[ax] >= 0 and sum(known) != g.shape[ax]:
        raise ValueError(f"the likes' sizes {known} along axis {ax} do not sum to g's size "
                         f"{g.shape[ax]}")
    out = []
    for t in likes:
        if t.rank != g.rank:
            raise ValueError(f"like of shape {t.shape} must have g's rank {g.rank}")
        # the part's size along axis is the like's; other dims are g's (or the like's if unknown)
        shape = tuple(t.shape[i] if i == ax or d < 0 else d for i, d in enumerate(g.shape))
        out.append(TensorType(shape, g.dtype))
    return out


def _split_like(g, *likes, axis):
    g = np.asarray(g)
    ax = normalize_axis(axis, g.ndim, "axis")
    sizes = [np.shape(x)[ax] for x in likes]
    if sum(sizes) != g.shape[ax]:
        raise ValueError(f"the likes' sizes {sizes} along axis {ax} do not sum to g's size "
                         f"{g.shape[ax]}")
    return tuple(np.split(g, np.cumsum(sizes)[:-1], axis=ax))


_HELPER = {"namespace": "base", "method": False}
define("reshape_like", ["g", "like"], _reshape_like_infer,
       lambda g, like: np.reshape(g, np.shape(like)), shape_adjoint=True, view=True, **_HELPER,
       grad=like_only(lambda x, g, a: op.reshape_like(g, x)),
       doc="``g`` reshaped (C order) to ``like``'s run-time shape; result has ``g``'s dtype.")
define("slice_grad", ["g", "like"], _slice_grad_infer, _slice_grad,
       attrs={"index": (Attr.NESTED, REQUIRED)}, **_HELPER,
       grad=like_only(lambda x, g, a: op.strided_slice(g, index=a.index)),
       doc="Zeros of ``like``'s shape with ``g`` written at ``[index]`` (a ``strided_slice`` "
           "spec): the adjoint of ``strided_slice``.")
define("pad_grad", ["g", "like"], _pad_grad_infer, _pad_grad,
       attrs={"paddings": (Attr.NESTED, REQUIRED), "mode": (Attr.STR, "constant")}, **_HELPER,
       grad=like_only(lambda x, g, a: op.pad(g, paddings=a.paddings, mode=a.mode)),
       doc="The adjoint of ``pad``: each element of ``g`` summed into the element of ``like``'s "
           "shape it was copied from (mirrored copies accumulate; constant padding is dropped).")
define("split_like", ["*xs"], _split_like_infer, _split_like, multi_output=True, view=True,
       attrs={"axis": (Attr.INT, 0)}, **_HELPER,
       grad=lambda ins, outs, gs, a: [op.concat(*gs, axis=normalize_axis(a.axis, len(
           ins[0].shape)))] + [None] * (len(ins) - 1),
       doc="Split ``xs[0]`` along ``axis`` into parts as long as ``xs[1:]`` are along it (run-"
           "time sizes): the adjoint of ``concat``.")
