"""Ops that cut arrays into parts and put parts together: concat/stack/unstack/split, slicing,
gather/scatter, dynamic_partition and pad (``shape_ops.py`` has the ops that only rearrange).

Like every shape op they keep their input's dtype (``concat``/``stack`` promote like numpy),
return views where numpy does (slicing, ``split``), and call their shape rules from the
implementations too, so eager calls fail with the same message as graph inference.

Gradient rules are given with each op (``grad=``) and use only table ops -- operators and
methods on the graph values, ``op.*`` (``call.py``) for free functions -- so backward graphs
can be differentiated again. Shapes may hold -1 (unknown) dims: a rule never turns one into a
static attribute. Where a gradient needs a run-time shape it takes it from an input through an
adjoint op (``adjoints.py``: ``slice_grad``, ``pad_grad``, ``split_like``), and fast static
paths are used only when every dim involved is known. Conventions:

* ``scatter_update``: with duplicate indices only the update that wins (the last one) gets a
  gradient; the others did not reach the output. ``ref`` gets ``g`` with the overwritten rows
  zeroed.
* ``pad`` in ``reflect``/``symmetric`` mode: every mirrored copy sends its gradient back to its
  source element; the ``constant`` value gets none (it is an attribute).
* ``gather``: repeated indices accumulate their gradients (scatter-add into zeros).
* ``concat`` splits ``g`` with static sizes when at most one input's size along the axis is
  unknown, else with ``split_like`` (sizes read at run time).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import adjoints  # noqa: F401  (the rules use its slice_grad, pad_grad and split_like)
from .call import op
from .families import REQUIRED, Attr, input_rule, normalize_axis, pad_shape
from .indexing import indexed_shape, spec_to_index
from .registry import TensorType, define
from .shape_ops import (_SHAPE, _VIEW, _check_broadcast, _check_int, _int_indices, _inverse,
                        _like, _merge)

Shape = tuple[int, ...]


# --- concat / stack / unstack / split ----------------------------------------------------------

def _concat_infer(types: list[TensorType], a: Any) -> TensorType:
    rank = types[0].rank
    if rank == 0 or any(t.rank != rank for t in types):
        raise ValueError(f"concat needs arrays of one rank >= 1, got ranks "
                         f"{[t.rank for t in types]}")
    ax = normalize_axis(a.axis, rank, "axis")
    out = list(types[0].shape)
    for t in types[1:]:
        for i, d in enumerate(t.shape):
            if i == ax:
                out[i] = -1 if out[i] < 0 or d < 0 else out[i] + d
            else:
                out[i] = _merge(out[i], d, f"dims other than axis {ax} must agree; dim {i}")
    return TensorType(tuple(out), np.result_type(*(t.dtype for t in types)))


def _stack_infer(types: list[TensorType], a: Any) -> TensorType:
    shape = list(types[0].shape)
    for t in types[1:]:
        if t.rank != len(shape):
            raise ValueError(f"stack needs arrays of one shape, got ranks "
                             f"{[t.rank for t in types]}")
        shape = [_merge(x, y, f"stack needs arrays of one shape; dim {i}")
                 for i, (x, y) in enumerate(zip(shape, t.shape))]
    ax = normalize_axis(a.axis, len(shape) + 1, "output axis")
    shape.insert(ax, len(types))
    return TensorType(tuple(shape), np.result_type(*(t.dtype for t in types)))


def _unstack_infer(types: list[TensorType], a: Any) -> list[TensorType]:
    (x,) = types
    ax = normalize_axis(a.axis, x.rank, "axis")
    if x.shape[ax] < 0:
        raise ValueError(f"unstack along axis {ax} must know that dim's size (the number of "
                         f"outputs), got shape {x.shape}")
    return [_like(x, x.shape[:ax] + x.shape[ax + 1:])] * x.shape[ax]


def _split_sizes(dim: int, spec: Shape, ax: int) -> list[int]:
    """Part sizes along dim ``ax`` of size ``dim``: ``(n,)`` = n equal parts, else the sizes."""
    if len(spec) == 1:
        n = spec[0]
        if n < 1:
            raise ValueError(f"the number of parts must be >= 1, got {n}")
        if dim >= 0 and dim % n:
            raise ValueError(f"cannot split dim {ax} of size {dim} into {n} equal parts")
        return [dim // n if dim >= 0 else -1] * n
    if spec.count(-1) > 1 or any(s < -1 for s in spec):
        raise ValueError(f"sizes {spec} must be >= 0, with at most one -1 (the rest)")
    fixed = sum(s for s in spec if s >= 0)
    if dim < 0:
        return list(spec)
    if (-1 in spec and fixed > dim) or (-1 not in spec and fixed != dim):
        raise ValueError(f"sizes {spec} sum to {fixed}, but dim {ax} has size {dim}")
    return [dim - fixed if s == -1 else s for s in spec]


def _split_infer(types: list[TensorType], a: Any) -> list[TensorType]:
    (x,) = types
    ax = normalize_axis(a.axis, x.rank, "axis")
    return [_like(x, x.shape[:ax] + (s,) + x.shape[ax + 1:])
            for s in _split_sizes(x.shape[ax], a.num_or_sizes, ax)]


def _split(x, *, num_or_sizes, axis):
    x = np.asarray(x)
    ax = normalize_axis(axis, x.ndim, "axis")
    sizes = _split_sizes(x.shape[ax], num_or_sizes, ax)
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=ax))


def _concat_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    g = gs[0]
    if len(ins) == 1:
        return [g]
    ax = normalize_axis(a.axis, len(g.shape))
    sizes = tuple(x.shape[ax] for x in ins)
    if sum(s < 0 for s in sizes) <= 1:  # split takes one -1 (the rest)
        return list(op.split(g, num_or_sizes=sizes, axis=ax))
    return list(op.split_like(g, *ins, axis=ax))  # sizes known only at run time


_AXIS0 = {"axis": (Attr.INT, 0)}
define("concat", ["*xs"], _concat_infer, lambda *xs, axis: np.concatenate(xs, axis=axis),
       attrs=_AXIS0, method=False, **_SHAPE,
       grad=_concat_grad,
       strings=True,
       doc="Join arrays along an existing ``axis``; dtype promoted like numpy.")
define("stack", ["*xs"], _stack_infer, lambda *xs, axis: np.stack(xs, axis=axis),
       attrs=_AXIS0, method=False, **_SHAPE,
       grad=lambda ins, outs, gs, a: list(
           op.unstack(gs[0], axis=normalize_axis(a.axis, len(gs[0].shape)))),
       strings=True,
       doc="Join same-shaped arrays along a new ``axis``; dtype promoted like numpy.")
define("unstack", ["x"], _unstack_infer,
       lambda x, *, axis: tuple(np.moveaxis(np.asarray(x), axis, 0)), attrs=_AXIS0, **_VIEW,
       multi_output=True,
       grad=lambda ins, outs, gs, a: [
           op.stack(*gs, axis=normalize_axis(a.axis, len(ins[0].shape)))],
       doc="Split along ``axis`` into a tuple of ``x.shape[axis]`` arrays without that dim.")
define("split", ["x"], _split_infer, _split, multi_output=True,
       attrs={"num_or_sizes": (Attr.INTS, REQUIRED), **_AXIS0}, **_VIEW,
       grad=lambda ins, outs, gs, a: [
           op.concat(*gs, axis=normalize_axis(a.axis, len(ins[0].shape)))],
       doc="Split along ``axis``: one int n = n equal parts, several = part sizes (one may be -1).")


# --- slice / strided_slice ---------------------------------------------------------------------

def _slice_shape(shape: Shape, begin: Shape, size: Shape) -> Shape:
    if not len(begin) == len(size) == len(shape):
        raise ValueError(f"begin {begin} and size {size} need one entry per dim of shape "
                         f"{tuple(shape)}")
    out = []
    for i, (d, b, s) in enumerate(zip(shape, begin, size)):
        if b < 0 or s < -1:
            raise ValueError(f"dim {i}: begin must be >= 0 and size >= 0 or -1 (to the end), "
                             f"got begin {b}, size {s}")
        if d >= 0 and b + max(s, 0) > d:
            raise ValueError(f"dim {i}: begin {b} + size {s} exceeds the dim's size {d}")
        out.append(s if s >= 0 else (d - b if d >= 0 else -1))
    return tuple(out)


def _slice(x, *, begin, size):
    _slice_shape(np.shape(x), begin, size)
    return np.asarray(x)[tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size))]


def _slice_spec(a: Any) -> tuple:
    """``slice``'s begin/size as a ``strided_slice`` index (size -1 = to the end)."""
    return tuple(("slice", b, None if s == -1 else b + s, None) for b, s in zip(a.begin, a.size))


define("slice", ["x"], lambda t, a: _like(t[0], _slice_shape(t[0].shape, a.begin, a.size)),
       _slice, attrs={"begin": (Attr.INTS, REQUIRED), "size": (Attr.INTS, REQUIRED)}, **_VIEW,
       grad=input_rule(lambda x, g, a: op.slice_grad(g, x, index=_slice_spec(a))),
       strings=True,
       doc="Block of ``size`` elements from ``begin`` per dim (ND4J slice; size -1 = to the end).")
define("strided_slice", ["x"],
       lambda t, a: _like(t[0], indexed_shape(t[0].shape, a.index)),
       lambda x, *, index: np.asarray(np.asarray(x)[spec_to_index(index)],
                                      dtype=np.asarray(x).dtype),  # (one string: a str)
       attrs={"index": (Attr.NESTED, REQUIRED)}, **_VIEW,
       grad=input_rule(lambda x, g, a: op.slice_grad(g, x, index=a.index)),
       strings=True,
       doc="Basic slicing ``x[key]`` (ints, slices, newaxis, ...); ``index`` is "
           "``index_to_spec(key)``. Returns a view.")


# --- gather / scatter ----------------------------------------------------------------------------

def _gather_infer(types: list[TensorType], a: Any) -> TensorType:
    x, idx = types
    _check_int(idx, "indices")
    ax = normalize_axis(a.axis, x.rank, "axis")
    return _like(x, x.shape[:ax] + idx.shape + x.shape[ax + 1:])


def _scatter_check(ref: Shape, idx: Shape, upd: Shape, ref_dt: np.dtype, upd_dt: np.dtype) -> None:
    if len(ref) == 0:
        raise ValueError("ref must have rank >= 1 (scatter writes along axis 0)")
    _check_broadcast(upd, idx + tuple(ref[1:]), "updates (indices.shape + ref.shape[1:])")
    if not np.can_cast(upd_dt, ref_dt, "same_kind"):
        raise ValueError(f"updates of dtype {upd_dt} cannot be written into ref of dtype "
                         f"{ref_dt} (same-kind casting); cast them first")


def _scatter_infer(types: list[TensorType], a: Any) -> TensorType:
    ref, idx, upd = types
    _check_int(idx, "indices")
    _scatter_check(ref.shape, idx.shape, upd.shape, ref.dtype, upd.dtype)
    return _like(ref, ref.shape)


def _scatter_args(ref, indices, updates):
    """A copy of ``ref``, indices in ``[0, n)``, updates broadcast to one row per index."""
    ref, idx, upd = np.asarray(ref), _int_indices(indices), np.asarray(updates)
    _scatter_check(ref.shape, idx.shape, upd.shape, ref.dtype, upd.dtype)
    n = ref.shape[0]
    flat = idx.reshape(-1)
    if flat.size and (flat.min() < -n or flat.max() >= n):
        raise IndexError(f"indices must be in [-{n}, {n}) for ref of shape {ref.shape}, "
                         f"got values in [{flat.min()}, {flat.max()}]")
    rows = np.broadcast_to(upd, idx.shape + ref.shape[1:]).reshape((flat.size,) + ref.shape[1:])
    return ref.copy(), (flat % n if flat.size else flat), rows


def _scatter_add(ref, indices, updates):
    out, idx, rows = _scatter_args(ref, indices, updates)
    np.add.at(out, idx, rows)  # unbuffered: duplicate indices accumulate
    return out


def _scatter_update(ref, indices, updates):
    out, idx, rows = _scatter_args(ref, indices, updates)
    # Fancy assignment leaves the winner among duplicates unspecified: keep each index's last row.
    _, first_from_end = np.unique(idx[::-1], return_index=True)
    last = idx.size - 1 - first_from_end
    out[idx[last]] = rows[last]
    return out


def _gather_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    """Scatter-add ``g`` into zeros of ``x``'s shape (repeated indices accumulate). scatter_add
    writes along axis 0, so ``axis`` is moved to the front and back again."""
    x, idx = ins
    g, r, k = gs[0], len(ins[0].shape), len(ins[1].shape)
    ax = normalize_axis(a.axis, r)
    if ax == 0:
        return [op.scatter_add(op.zeros_like(x), idx, g), None]
    front = (ax, *range(ax), *range(ax + 1, r))
    # g's dims: x's dims before axis, then the index dims, then x's dims after axis
    upd = op.permute(g, dims=(*range(ax, ax + k), *range(ax), *range(ax + k, r + k - 1)))
    out = op.scatter_add(op.permute(op.zeros_like(x), dims=front), idx, upd)
    return [op.permute(out, dims=_inverse(front)), None]


def _scatter_update_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    ref, idx, upd = ins
    g = gs[0]
    rows = op.gather(g, idx)
    # Which update reached the output? Number the updates 1..n, scatter the numbers like the
    # updates (the last duplicate wins) and keep the updates whose number came back.
    num = op.reshape_like(op.cumsum(op.flatten(op.ones_like(idx))), idx)
    for _ in range(len(ref.shape) - 1):
        num = op.expand_dims(num, axis=-1)
    winner = op.gather(op.scatter_update(op.zeros_like(ref, dtype=num.dtype), idx, num), idx)
    won = op.where(op.eq(winner, num), rows, op.zeros_like(rows))
    return [op.scatter_update(g, idx, op.zeros_like(upd)), None, won]


def _dynamic_partition_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    """The inverse, ND4J/TensorFlow's dynamic stitch: number x's slices 0..n-1, partition the
    numbers like x, and scatter each part's gradient back to its numbers' rows."""
    x, p = ins
    flat_p = op.flatten(p)
    number = op.cumsum(op.ones_like(flat_p)) - 1
    where = op.dynamic_partition(number, flat_p, num_partitions=a.num_partitions)
    # zeros with one row per slice: x's slices all in one part (x's shape with p's dims
    # flattened, even where those dims are known only at run time)
    rows = op.zeros_like(x) if len(p.shape) == 1 else op.dynamic_partition(
        op.zeros_like(x), op.zeros_like(p), num_partitions=1)[0]
    for idx, g in zip(where, gs):
        rows = op.scatter_add(rows, idx, g)
    return [op.reshape_like(rows, x), None]


define("gather", ["x", "indices"], _gather_infer,
       # (dtype=: numpy gives one picked string as a Python str, which would lose UTF8)
       lambda x, indices, *, axis: np.asarray(np.take(x, _int_indices(indices), axis=axis),
                                              dtype=np.asarray(x).dtype),
       attrs=_AXIS0, **_SHAPE,
       grad=_gather_grad,
       strings=True,
       doc="Select slices along ``axis`` by integer ``indices`` (numpy ``take``; negatives wrap).")
define("scatter_add", ["ref", "indices", "updates"], _scatter_infer, _scatter_add,
       **_SHAPE,
       grad=lambda ins, outs, gs, a: [gs[0], None, op.gather(gs[0], ins[1])],
       doc="Copy of ``ref`` with ``updates`` rows added at ``indices`` along axis 0; duplicates "
           "accumulate.")
define("scatter_update", ["ref", "indices", "updates"], _scatter_infer, _scatter_update,
       **_SHAPE,
       grad=_scatter_update_grad,
       doc="Copy of ``ref`` with rows at ``indices`` (axis 0) replaced by ``updates``; the last "
           "duplicate wins.")


# --- dynamic_partition -----------------------------------------------------------------------
# Its parts' sizes depend on the partition values, not only on shapes: the parts' leading dim
# is unknown (-1) until the op runs, as the IR allows; the gradient stitches them back.

def _dynamic_partition_infer(types: list[TensorType], a: Any) -> list[TensorType]:
    x, p = types
    _check_int(p, "partitions")
    if a.num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {a.num_partitions}")
    prefix = x.shape[:p.rank]
    if p.rank > x.rank or any(d >= 0 and e >= 0 and d != e for d, e in zip(p.shape, prefix)):
        raise ValueError(f"partitions of shape {tuple(p.shape)} must match the leading dims "
                         f"of x (shape {tuple(x.shape)})")
    return [_like(x, (-1,) + x.shape[p.rank:])] * a.num_partitions


def _dynamic_partition(x, partitions, *, num_partitions):
    x, p = np.asarray(x), _int_indices(partitions, "partitions")
    if p.shape != x.shape[:p.ndim]:
        raise ValueError(f"partitions of shape {p.shape} must match the leading dims of x "
                         f"(shape {x.shape})")
    if p.size and (p.min() < 0 or p.max() >= num_partitions):
        raise IndexError(f"partition values must be in [0, {num_partitions}) "
                         f"(num_partitions), got values in [{p.min()}, {p.max()}]")
    return tuple(x[p == i] for i in range(num_partitions))  # row-major order within a part


define("dynamic_partition", ["x", "partitions"], _dynamic_partition_infer, _dynamic_partition,
       attrs={"num_partitions": (Attr.INT, REQUIRED)}, multi_output=True, value_shaped=True,
       **_SHAPE,
       grad=_dynamic_partition_grad,
       doc="Split the slices of ``x`` over ``partitions``' dims into ``num_partitions`` parts: "
           "part i holds, in order, the slices whose partition value is i (ND4J/TensorFlow "
           "``dynamicPartition``); a part's leading size is known only when the op runs.")


# --- pad ------------------------------------------------------------------------------------

def _pad(x, *, paddings, mode, constant):
    pad_shape(np.shape(x), paddings, mode)
    if not paddings:  # a scalar: nothing to pad (numpy's pad cannot take 0-d arrays)
        return np.array(x)
    if mode == "constant":
        return np.pad(x, paddings, mode, constant_values=constant)
    return np.pad(x, paddings, mode)


def _pad_grad(x: Any, g: Any, a: Any) -> Any:
    if a.mode == "constant":  # the inner block; negative stops keep it free of static sizes
        return op.strided_slice(g, index=tuple(("slice", b, -e if e else None, None)
                                              for b, e in a.paddings))
    return op.pad_grad(g, x, paddings=a.paddings, mode=a.mode)


define("pad", ["x"], lambda t, a: _like(t[0], pad_shape(t[0].shape, a.paddings, a.mode)), _pad,
       attrs={"paddings": (Attr.NESTED, REQUIRED), "mode": (Attr.STR, "constant"),
              "constant": (Attr.FLOAT, 0.0)}, **_SHAPE,
       grad=input_rule(_pad_grad),
       doc="Pad each dim by (before, after) with ``constant``, or by 'reflect'/'symmetric' "
           "mirroring (numpy ``pad`` modes).")
