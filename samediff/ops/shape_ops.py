"""Shape ops: reshape, permute, squeeze, concat/stack/split, slicing, gather/scatter, tile, pad...

Shape ops keep their input's dtype (``concat``/``stack`` promote like numpy). Where numpy
returns a view (reshape, transpose, basic slicing) so do we: ND4J's ``reshape``/``get`` are
views too. Numpy is lax where ND4J is strict (slices clip, ``transpose`` takes negative dims),
so the shape rules below are also called by the implementations: eager calls fail with the
same message as graph inference. Python indexing keys are canonicalized in ``indexing.py``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .families import REQUIRED, Attr, normalize_axis, normalize_dims, numel
from .indexing import index_to_spec, indexed_shape, spec_to_index  # noqa: F401 (re-exported)
from .registry import TensorType, define

Shape = tuple[int, ...]


def _like(x: TensorType, shape: Sequence[int]) -> TensorType:
    return TensorType(tuple(shape), x.dtype)


def _merge(a: int, b: int, what: str) -> int:
    """Two dims that must agree; -1 (unknown) agrees with anything."""
    if a >= 0 and b >= 0 and a != b:
        raise ValueError(f"{what}: sizes {a} and {b} differ")
    return a if a >= 0 else b


def _check_int(t: TensorType, what: str) -> None:
    if t.dtype.kind not in "iu":
        raise ValueError(f"{what} must have an integer dtype, got {t.dtype}")


def _int_indices(indices: Any, what: str = "indices") -> np.ndarray:
    # np.take silently reads bools as 0/1 and rejects uint64: check the kind, then use intp.
    idx = np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{what} must have an integer dtype, got {idx.dtype}")
    return idx.astype(np.intp, copy=False)


def _check_broadcast(shape: Shape, want: Shape, what: str) -> None:
    """``shape`` must broadcast to ``want`` (unknown dims are trusted)."""
    ok = len(shape) <= len(want) and all(
        d in (1, -1) or w == -1 or d == w for d, w in zip(shape[::-1], want[::-1]))
    if not ok:
        raise ValueError(f"{what} of shape {tuple(shape)} must have shape {tuple(want)} "
                         f"or broadcast to it")


# --- reshape / permute / transpose / expand_dims / squeeze / flatten --------------------------

def _reshape_shape(shape: Shape, target: Shape) -> Shape:
    if target.count(-1) > 1 or any(d < -1 for d in target):
        raise ValueError(f"target shape {target} may hold one -1 (inferred) and no other "
                         f"negative size")
    n = numel(shape)
    known = int(np.prod([d for d in target if d >= 0], dtype=np.int64))
    if -1 not in target:
        part = int(np.prod([d for d in shape if d >= 0], dtype=np.int64))
        if (n >= 0 and n != known) or (n < 0 and part and known % part):
            raise ValueError(f"cannot reshape shape {tuple(shape)} ({n if n >= 0 else '?'} "
                             f"elements) into shape {target} ({known} elements)")
        return target
    if n < 0:
        return target  # the inferred dim stays unknown
    if known == 0 or n % known:
        raise ValueError(f"cannot reshape shape {tuple(shape)} ({n} elements) into shape "
                         f"{target}: no size for the -1 dim fits")
    return tuple(n // known if d == -1 else d for d in target)


def _check_perm(dims: Shape, rank: int) -> None:
    if sorted(dims) != list(range(rank)):
        raise ValueError(f"dims {dims} must be a permutation of {tuple(range(rank))}")


def _permute(x, *, dims):
    _check_perm(dims, np.ndim(x))
    return np.transpose(x, dims)


def _squeeze_axes(shape: Shape, axis: Shape | None) -> Shape:
    if axis is None:
        if any(d < 0 for d in shape):
            raise ValueError(f"squeeze with axis=None must know every dim to find the size-1 "
                             f"ones, got shape {tuple(shape)} with unknown (-1) dims; pass "
                             f"axis explicitly")
        return tuple(i for i, d in enumerate(shape) if d == 1)
    axes = normalize_dims(axis, len(shape))
    bad = [a for a in axes if shape[a] not in (1, -1)]
    if bad:
        raise ValueError(f"cannot squeeze axis {bad} of shape {tuple(shape)}: size is not 1")
    return axes


def _check_order(order: str) -> str:
    if order not in ("c", "f", "C", "F"):
        raise ValueError(f"order must be 'c' (row-major) or 'f' (column-major), got {order!r}")
    return order.upper()


def _permute_infer(types: list[TensorType], a: Any) -> TensorType:
    _check_perm(a.dims, types[0].rank)
    return _like(types[0], [types[0].shape[d] for d in a.dims])


def _expand_dims_infer(types: list[TensorType], a: Any) -> TensorType:
    (x,) = types
    ax = normalize_axis(a.axis, x.rank + 1, "output axis")
    return _like(x, x.shape[:ax] + (1,) + x.shape[ax:])


def _squeeze_infer(types: list[TensorType], a: Any) -> TensorType:
    axes = _squeeze_axes(types[0].shape, a.axis)
    return _like(types[0], [d for i, d in enumerate(types[0].shape) if i not in axes])


def _flatten_infer(types: list[TensorType], a: Any) -> TensorType:
    _check_order(a.order)
    return _like(types[0], (numel(types[0].shape),))


_SHAPE = {"namespace": "shape"}
_VIEW = {**_SHAPE, "view": True}  # numpy returns a view of the input (no copy)

def _reshape_infer(types: list[TensorType], a: Any) -> TensorType:
    _check_order(a.order)
    return _like(types[0], _reshape_shape(types[0].shape, a.shape))


define("reshape", ["x"], _reshape_infer,
       lambda x, *, shape, order: np.reshape(x, _reshape_shape(np.shape(x), shape),
                                             order=_check_order(order)),
       attrs={"shape": (Attr.INTS, REQUIRED), "order": (Attr.STR, "c")}, **_VIEW,
       doc="Same elements in a new shape, read and written in 'c' (row-major) or 'f' "
           "(column-major) order (ND4J's ``reshape(order, shape...)``); one size may be -1.")
define("permute", ["x"], _permute_infer, _permute, attrs={"dims": (Attr.INTS, REQUIRED)}, **_VIEW,
       doc="Reorder the dims: output dim i is input dim ``dims[i]``.")
define("transpose", ["x"], lambda t, a: _like(t[0], t[0].shape[::-1]), np.transpose, **_VIEW,
       doc="Reverse the order of all dims (numpy ``.T``).")
define("expand_dims", ["x"], _expand_dims_infer,
       lambda x, *, axis: np.expand_dims(x, axis), attrs={"axis": (Attr.INT, REQUIRED)},
       **_VIEW, doc="Insert a size-1 dim at ``axis`` (of the output).")
define("squeeze", ["x"], _squeeze_infer,
       lambda x, *, axis: np.squeeze(x, axis=_squeeze_axes(np.shape(x), axis)),
       attrs={"axis": (Attr.OPT_INTS, None)}, **_VIEW,
       doc="Remove size-1 dims: those in ``axis``, or all of them when ``axis`` is None.")
define("flatten", ["x"], _flatten_infer,
       lambda x, *, order: np.ravel(x, order=_check_order(order)),
       attrs={"order": (Attr.STR, "c")}, **_VIEW,
       doc="All elements as a 1-D array, read in 'c' (row-major) or 'f' (column-major) order.")


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


_AXIS0 = {"axis": (Attr.INT, 0)}
define("concat", ["*xs"], _concat_infer, lambda *xs, axis: np.concatenate(xs, axis=axis),
       attrs=_AXIS0, method=False, **_SHAPE,
       doc="Join arrays along an existing ``axis``; dtype promoted like numpy.")
define("stack", ["*xs"], _stack_infer, lambda *xs, axis: np.stack(xs, axis=axis),
       attrs=_AXIS0, method=False, **_SHAPE,
       doc="Join same-shaped arrays along a new ``axis``; dtype promoted like numpy.")
define("unstack", ["x"], _unstack_infer,
       lambda x, *, axis: tuple(np.moveaxis(np.asarray(x), axis, 0)), attrs=_AXIS0, **_VIEW,
       multi_output=True,
       doc="Split along ``axis`` into a tuple of ``x.shape[axis]`` arrays without that dim.")
define("split", ["x"], _split_infer, _split, multi_output=True,
       attrs={"num_or_sizes": (Attr.INTS, REQUIRED), **_AXIS0}, **_VIEW,
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


define("slice", ["x"], lambda t, a: _like(t[0], _slice_shape(t[0].shape, a.begin, a.size)),
       _slice, attrs={"begin": (Attr.INTS, REQUIRED), "size": (Attr.INTS, REQUIRED)}, **_VIEW,
       doc="Block of ``size`` elements from ``begin`` per dim (ND4J slice; size -1 = to the end).")
define("strided_slice", ["x"],
       lambda t, a: _like(t[0], indexed_shape(t[0].shape, a.index)),
       lambda x, *, index: np.asarray(np.asarray(x)[spec_to_index(index)]),
       attrs={"index": (Attr.NESTED, REQUIRED)}, **_VIEW,
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


define("gather", ["x", "indices"], _gather_infer,
       lambda x, indices, *, axis: np.asarray(np.take(x, _int_indices(indices), axis=axis)),
       attrs=_AXIS0, **_SHAPE,
       doc="Select slices along ``axis`` by integer ``indices`` (numpy ``take``; negatives wrap).")
define("scatter_add", ["ref", "indices", "updates"], _scatter_infer, _scatter_add,
       **_SHAPE,
       doc="Copy of ``ref`` with ``updates`` rows added at ``indices`` along axis 0; duplicates "
           "accumulate.")
define("scatter_update", ["ref", "indices", "updates"], _scatter_infer, _scatter_update,
       **_SHAPE,
       doc="Copy of ``ref`` with rows at ``indices`` (axis 0) replaced by ``updates``; the last "
           "duplicate wins.")


# --- dynamic_partition -----------------------------------------------------------------------
# Its parts' sizes depend on the partition values, not only on shapes: the parts' leading dim
# is unknown (-1) until the op runs, as the IR allows; the gradient stitches them back
# (grads_structural.py).

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
       doc="Split the slices of ``x`` over ``partitions``' dims into ``num_partitions`` parts: "
           "part i holds, in order, the slices whose partition value is i (ND4J/TensorFlow "
           "``dynamicPartition``); a part's leading size is known only when the op runs.")


# --- tile / repeat / broadcast_to / pad / reverse / one_hot -----------------------------------

def _tile_shape(shape: Shape, reps: Shape) -> Shape:
    if any(r < 0 for r in reps):
        raise ValueError(f"reps {reps} must be >= 0")
    n = max(len(shape), len(reps))
    shape, reps = (1,) * (n - len(shape)) + tuple(shape), (1,) * (n - len(reps)) + tuple(reps)
    return tuple(0 if r == 0 else (-1 if d < 0 else d * r) for d, r in zip(shape, reps))


def _repeat_infer(types: list[TensorType], a: Any) -> TensorType:
    (x,) = types
    if a.repeats < 0:
        raise ValueError(f"repeats must be >= 0, got {a.repeats}")
    # numpy flattens for axis=None and treats a scalar as shape (1,)
    shape = (numel(x.shape),) if a.axis is None else (x.shape or (1,))
    ax = 0 if a.axis is None else normalize_axis(a.axis, len(shape), "axis")
    d = shape[ax]
    return _like(x, shape[:ax] + (0 if a.repeats == 0 else -1 if d < 0 else d * a.repeats,)
                 + shape[ax + 1:])


def _broadcast_infer(types: list[TensorType], a: Any) -> TensorType:
    if any(d < 0 for d in a.shape):
        raise ValueError(f"shape {a.shape} must hold non-negative sizes")
    _check_broadcast(types[0].shape, a.shape, "x")
    return _like(types[0], a.shape)


_PAD_MODES = ("constant", "reflect", "symmetric")


def _pad_shape(shape: Shape, paddings: Any, mode: str) -> Shape:
    if mode not in _PAD_MODES:
        raise ValueError(f"mode must be one of {_PAD_MODES}, got {mode!r}")
    pairs_ok = isinstance(paddings, tuple) and len(paddings) == len(shape) and all(
        isinstance(p, tuple) and len(p) == 2 and all(type(v) is int and v >= 0 for v in p)
        for p in paddings)
    if not pairs_ok:
        raise ValueError(f"paddings must be {len(shape)} (before, after) pairs of non-negative "
                         f"ints, one per dim, got {paddings}")
    out = []
    for i, (d, (b, e)) in enumerate(zip(shape, paddings)):
        if mode != "constant" and d == 0 and b + e:
            raise ValueError(f"{mode} padding of dim {i} needs a non-empty dim")
        out.append(d + b + e if d >= 0 else -1)
    return tuple(out)


def _pad(x, *, paddings, mode, constant):
    _pad_shape(np.shape(x), paddings, mode)
    if not paddings:  # a scalar: nothing to pad (numpy's pad cannot take 0-d arrays)
        return np.array(x)
    if mode == "constant":
        return np.pad(x, paddings, mode, constant_values=constant)
    return np.pad(x, paddings, mode)


def _one_hot_infer(types: list[TensorType], a: Any) -> TensorType:
    (idx,) = types
    _check_int(idx, "indices")
    if a.depth < 0:
        raise ValueError(f"depth must be >= 0, got {a.depth}")
    ax = normalize_axis(a.axis, idx.rank + 1, "output axis")
    return TensorType(idx.shape[:ax] + (a.depth,) + idx.shape[ax:], a.dtype)


def _one_hot(indices, *, depth, axis, on, off, dtype):
    idx = _int_indices(indices)
    ax = normalize_axis(axis, idx.ndim + 1, "output axis")
    classes = np.arange(depth).reshape((-1,) + (1,) * (idx.ndim - ax))
    return np.where(np.expand_dims(idx, ax) == classes, on, off).astype(dtype)


def _reverse_infer(types: list[TensorType], a: Any) -> TensorType:
    normalize_dims(a.dims, types[0].rank)  # in range, no repeats
    return _like(types[0], types[0].shape)


define("tile", ["x"], lambda t, a: _like(t[0], _tile_shape(t[0].shape, a.reps)),
       lambda x, *, reps: np.tile(x, reps), attrs={"reps": (Attr.INTS, REQUIRED)}, **_SHAPE,
       doc="Repeat the whole array ``reps[i]`` times along dim i (numpy ``tile``).")
define("repeat", ["x"], _repeat_infer, lambda x, *, repeats, axis: np.repeat(x, repeats, axis),
       attrs={"repeats": (Attr.INT, REQUIRED), "axis": (Attr.OPT_INT, None)}, **_SHAPE,
       doc="Repeat each element ``repeats`` times along ``axis`` (None: of the flattened array).")
define("broadcast_to", ["x"], _broadcast_infer,
       lambda x, *, shape: np.array(np.broadcast_to(x, shape)),  # a writable copy, like ND4J
       attrs={"shape": (Attr.INTS, REQUIRED)}, **_SHAPE,
       doc="Broadcast to ``shape`` (numpy rules) as a new array.")
define("pad", ["x"], lambda t, a: _like(t[0], _pad_shape(t[0].shape, a.paddings, a.mode)), _pad,
       attrs={"paddings": (Attr.NESTED, REQUIRED), "mode": (Attr.STR, "constant"),
              "constant": (Attr.FLOAT, 0.0)}, **_SHAPE,
       doc="Pad each dim by (before, after) with ``constant``, or by 'reflect'/'symmetric' "
           "mirroring (numpy ``pad`` modes).")
define("reverse", ["x"], _reverse_infer,
       lambda x, *, dims: np.flip(x, axis=dims), attrs={"dims": (Attr.INTS, REQUIRED)},
       **_VIEW, doc="Reverse the order of elements along ``dims``.")
define("one_hot", ["indices"], _one_hot_infer, _one_hot,
       attrs={"depth": (Attr.INT, REQUIRED), "axis": (Attr.INT, -1), "on": (Attr.FLOAT, 1.0),
              "off": (Attr.FLOAT, 0.0), "dtype": (Attr.DTYPE, np.dtype(np.float32))},
       namespace="nn", method=False,
       doc="One-hot encoding: a new dim of size ``depth`` at ``axis``, ``on`` at each index, "
           "else ``off`` (out-of-range indices give all ``off``).")
