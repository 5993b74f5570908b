"""Table ops added for ONNX import (shape family): see samediff/onnx/converters/indexing*.py.

* ``nonzero``: the coordinates of the non-zero elements, one row per dim (ONNX ``NonZero``).
* ``unique``: the unique elements or slices with first-occurrence indices, inverse indices
  and counts (ONNX ``Unique``).
* ``scatter_reduce``: ``scatter_add``'s sibling for the multiplicative and max/min
  reductions of ONNX ``ScatterND``/``ScatterElements`` (the converters flatten the data so
  that every scatter writes rows along axis 0).

``nonzero`` and ``unique`` have value-dependent output sizes (``value_shaped``): their
result dims are -1 until the op runs.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .call import op
from .families import REQUIRED, normalize_axis
from .registry import NONDIFF, Attr, TensorType, define
from .shape_ops import _like
from .slicing import _scatter_args, _scatter_infer

_I64 = np.dtype(np.int64)


# --- nonzero ----------------------------------------------------------------------------------

def _nonzero(x):
    x = np.asarray(x)
    if x.ndim == 0:  # (numpy refuses 0-d; a scalar has no coordinates to list)
        return np.zeros((0, int(bool(x))), np.int64)
    return np.stack(np.nonzero(x)).astype(np.int64).reshape(x.ndim, -1)


define("nonzero", ["x"], lambda t, a: TensorType((t[0].rank, -1), _I64), _nonzero,
       namespace="shape", value_shaped=True, grad=NONDIFF,
       doc="Coordinates of the non-zero (true) elements in row-major order, as an int64 "
           "array of shape (rank, count) (ONNX ``NonZero``; numpy ``nonzero`` stacked).")


# --- unique -------------------------------------------------------------------------------------

def _unique_infer(types: list[TensorType], a: Any) -> list[TensorType]:
    (x,) = types
    if a.axis is None:
        n = -1 if any(d < 0 for d in x.shape) else int(np.prod(x.shape, dtype=np.int64))
        return [_like(x, (-1,)), TensorType((-1,), _I64), TensorType((n,), _I64),
                TensorType((-1,), _I64)]
    ax = normalize_axis(a.axis, x.rank, "axis")
    y = x.shape[:ax] + (-1,) + x.shape[ax + 1:]
    return [_like(x, y), TensorType((-1,), _I64), TensorType((x.shape[ax],), _I64),
            TensorType((-1,), _I64)]


def _unique(x, *, sorted, axis):
    x = np.asarray(x)
    if axis is None:
        x, ax = x.reshape(-1), 0
    else:
        ax = normalize_axis(axis, x.ndim, "axis")
    rows = np.moveaxis(x, ax, 0)
    # np.unique sorts (lexicographically for slices) and returns first occurrences
    y, first, inverse, counts = np.unique(rows, return_index=True, return_inverse=True,
                                          return_counts=True, axis=0)
    inverse = inverse.reshape(-1)
    if not sorted:  # order of first occurrence: renumber the sorted groups
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y, first, counts, inverse = y[order], first[order], counts[order], rank[inverse]
    return (np.moveaxis(y, 0, ax), first.astype(np.int64), inverse.astype(np.int64),
            counts.astype(np.int64))


define("unique", ["x"], _unique_infer, _unique,
       attrs={"sorted": (Attr.BOOL, True), "axis": (Attr.OPT_INT, None)},
       namespace="shape", multi_output=True, value_shaped=True, grad=NONDIFF,
       doc="The unique elements (``axis`` None: of the flattened array) or unique slices "
           "along ``axis``, sorted or in order of first occurrence; also returns each one's "
           "first index, every element's (slice's) index into the result, and the counts, "
           "all int64 (ONNX ``Unique``).")


# --- scatter_reduce -----------------------------------------------------------------------------

_REDUCE = {"mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter_reduce_infer(types: list[TensorType], a: Any) -> TensorType:
    if a.reduction not in _REDUCE:
        raise ValueError(f"reduction must be one of {tuple(_REDUCE)}, got {a.reduction!r}")
    return _scatter_infer(types, a)


def _scatter_reduce(ref, indices, updates, *, reduction):
    out, rows_at, rows = _scatter_args(ref, indices, updates)  # (checked as scatter_add's)
    _REDUCE[reduction].at(out, rows_at, rows)  # duplicates combine
    return out


def _scatter_reduce_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    ref, idx, upd = ins
    out, g = outs[0], gs[0]
    gathered_g = op.gather(g, idx)
    if a.reduction == "mul":
        # out[j] = ref[j] * prod(updates sent to j): d/dref[j] = that product; d/dupd_i =
        # out[j] / upd_i (updates of 0 have no finite quotient: keep them away from 0)
        g_ref = op.scatter_reduce(g, idx, upd, reduction="mul")
        g_upd = op.gather(g * out, idx) / upd
    else:
        # max/min: the gradient goes to whichever value (ref or update) became the output
        g_ref = op.where(op.eq(ref, out), g, op.zeros_like(g))
        g_upd = op.where(op.eq(upd, op.gather(out, idx)), gathered_g, op.zeros_like(gathered_g))
    return [g_ref, None, op.reduce_to_like(g_upd, upd)]


define("scatter_reduce", ["ref", "indices", "updates"], _scatter_reduce_infer, _scatter_reduce,
       attrs={"reduction": (Attr.STR, REQUIRED)}, namespace="shape",
       grad=_scatter_reduce_grad,
       doc="Copy of ``ref`` whose rows at ``indices`` (axis 0) are combined with ``updates`` "
           "rows by ``reduction`` ('mul', 'max' or 'min'); duplicate indices all combine.")


# --- range / constant_of_shape: creation from run-time values -----------------------------------
# ``arange``/``full`` take their bounds and shape as attributes; these read them from input
# tensors, so an ONNX Range/ConstantOfShape whose inputs are computed at run time still runs
# (constant inputs fold at import as usual).

def _scalar_of(v: Any, what: str) -> Any:
    a = np.asarray(v)
    if a.size != 1:
        raise ValueError(f"{what} must hold one value, got shape {a.shape}")
    return a.reshape(-1)[0]


def _range_infer(types: list[TensorType], a: Any) -> TensorType:
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1 or types[0].dtype.kind not in "iuf":
        raise ValueError(f"start, limit and delta must share one integer or float dtype, got "
                         f"{[str(t.dtype) for t in types]}")
    return TensorType((-1,), types[0].dtype)


def _range(start, limit, delta):
    dtype = np.asarray(start).dtype
    s, e, d = (_scalar_of(v, w) for v, w in ((start, "start"), (limit, "limit"),
                                             (delta, "delta")))
    if d == 0:
        raise ValueError("delta must not be 0")
    if dtype.kind in "iu":  # exact integer arithmetic: n = max(ceil((e - s) / d), 0)
        s, e, d = int(s), int(e), int(d)
        n = max(-((s - e) // d), 0)
        return (s + np.arange(n, dtype=np.int64) * d).astype(dtype)
    n = max(int(np.ceil((float(e) - float(s)) / float(d))), 0)
    # start + i * delta in float64, then rounded once to the dtype (float16 keeps precision)
    return (float(s) + np.arange(n, dtype=np.float64) * float(d)).astype(dtype)


def _range_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    start, _, delta = ins
    g = gs[0]
    steps = op.cumsum(op.ones_like(g)) - 1  # i = 0, 1, ... (the element's multiple of delta)
    # the element count is piecewise constant in limit: no gradient flows to it
    return [op.reshape_like(op.sum(g), start), None, op.reshape_like(op.sum(g * steps), delta)]


define("range", ["start", "limit", "delta"], _range_infer, _range, method=False,
       namespace="creation", value_shaped=True, grad=_range_grad,
       doc="``start, start + delta, ...`` up to ``limit`` (exclusive), read from one-element "
           "tensors at run time: ``max(ceil((limit - start) / delta), 0)`` elements of "
           "start's dtype (ONNX ``Range``; ``arange`` takes attributes instead).")


def _constant_of_shape_infer(types: list[TensorType], a: Any) -> TensorType:
    (shape,) = types
    if shape.dtype.kind not in "iu" or shape.rank != 1 or shape.shape[0] < 0:
        raise ValueError(f"shape must be a 1-D integer tensor of known length, got "
                         f"{shape.dtype}{list(shape.shape)}")
    return TensorType((-1,) * shape.shape[0], a.dtype)


def _constant_of_shape(shape, *, value, dtype):
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if any(d < 0 for d in dims):
        raise ValueError(f"shape dims must be >= 0, got {dims}")
    return np.full(dims, value, dtype)


define("constant_of_shape", ["shape"], _constant_of_shape_infer, _constant_of_shape,
       attrs={"value": (Attr.NUMBER, 0.0), "dtype": (Attr.DTYPE, np.dtype(np.float32))},
       method=False, namespace="creation", value_shaped=True, grad=NONDIFF,
       doc="An array of the shape held by the 1-D integer tensor ``shape`` (read at run "
           "time), filled with ``value`` (ONNX ``ConstantOfShape``; ``full`` takes the shape "
           "as an attribute).")


# --- run-time shapes: shape_of, reshape_to, expand_to ---------------------------------------
# An exported model computes shapes from shapes (``x.view(x.size(0), -1)`` is Shape -> Gather
# -> Concat -> Reshape): with a run-time batch dim those values exist only at run time.

define("shape_of", ["x"], lambda t, a: TensorType((t[0].rank,), _I64),
       lambda x: np.asarray(np.shape(x), np.int64), method=False, namespace="shape",
       grad=NONDIFF,
       doc="The shape of ``x`` as a 1-D int64 array, read at run time (ONNX ``Shape``).")


def _shape_vector(t: TensorType, what: str) -> int:
    if t.dtype.kind not in "iu" or t.rank != 1 or t.shape[0] < 0:
        raise ValueError(f"{what} must be a 1-D integer tensor of known length, got "
                         f"{t.dtype}{list(t.shape)}")
    return t.shape[0]


def _reshape_to_dims(x_shape: tuple, target: Any, allowzero: bool) -> tuple:
    dims = [int(d) for d in np.asarray(target).reshape(-1)]
    if not allowzero:  # 0 copies the input's dim at that position
        dims = [x_shape[i] if d == 0 and i < len(x_shape) else d for i, d in enumerate(dims)]
    return tuple(dims)


define("reshape_to", ["x", "shape"],
       lambda t, a: _like(t[0], (-1,) * _shape_vector(t[1], "shape")),
       lambda x, shape, *, allowzero: np.reshape(
           x, _reshape_to_dims(np.shape(x), shape, allowzero)),
       attrs={"allowzero": (Attr.BOOL, False)}, method=False, namespace="shape",
       value_shaped=True, view=True,
       grad=lambda ins, outs, gs, a: [op.reshape_like(gs[0], ins[0]), None],
       doc="``x`` reshaped to the shape held by the 1-D integer tensor ``shape``, read at run "
           "time: -1 is inferred, 0 copies the input's dim unless ``allowzero`` (ONNX "
           "``Reshape``; ``reshape`` takes the shape as an attribute).")


def _expand_shape(x_shape: tuple, target: Any) -> tuple:
    dims = [int(d) for d in np.asarray(target).reshape(-1)]
    rank = max(len(x_shape), len(dims))
    a = (1,) * (rank - len(x_shape)) + tuple(x_shape)
    b = (1,) * (rank - len(dims)) + tuple(dims)
    return tuple(np.broadcast_shapes(a, b))


define("expand_to", ["x", "shape"],
       lambda t, a: _like(t[0], (-1,) * max(t[0].rank, _shape_vector(t[1], "shape"))),
       lambda x, shape: np.array(np.broadcast_to(x, _expand_shape(np.shape(x), shape))),
       method=False, namespace="shape", value_shaped=True,
       grad=lambda ins, outs, gs, a: [op.reduce_to_like(gs[0], ins[0]), None],
       doc="``x`` broadcast against the shape held by the 1-D integer tensor ``shape``, read "
           "at run time (numpy's two-way broadcast: ONNX ``Expand``).")
