"""Shape ops that rearrange elements: reshape, permute, transpose, expand_dims, squeeze,
flatten, tile, repeat, broadcast_to, reverse, one_hot (``slicing.py`` has the ops that cut
arrays into parts and join them: concat/split, slicing, gather/scatter, pad).

Shape ops keep their input's dtype. Where numpy returns a view (reshape, transpose) so do we:
ND4J's ``reshape`` is a view too. Numpy is lax where ND4J is strict (``transpose`` takes
negative dims), so the shape rules below are also called by the implementations: eager calls
fail with the same message as graph inference.

Gradient rules are given with each op (``grad=``) and use only table ops, so backward graphs
can be differentiated again. Shapes may hold -1 (unknown) dims: a rule never turns one into a
static attribute. Where a gradient needs a run-time shape it takes it from an input through an
adjoint op (``adjoints.py``: ``reshape_like``, ``reduce_to_like``), and fast static paths are
used only when every dim involved is known. ``one_hot`` (integer input) is not differentiable.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import adjoints  # noqa: F401  (the rules use its reshape_like and reduce_to_like)
from .call import op
from .families import REQUIRED, Attr, input_rule, normalize_axis, normalize_dims, numel
from .registry import NONDIFF, TensorType, define

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


def _flatten_grad(x: Any, g: Any, a: Any) -> Any:
    if a.order.upper() == "F":  # column-major order is row-major order of the transpose
        return op.transpose(op.reshape_like(g, op.transpose(x)))
    return op.reshape_like(g, x)


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, d in enumerate(perm):
        inv[d] = i
    return tuple(inv)


def _reshape_grad(x: Any, g: Any, a: Any) -> Any:
    if a.order.upper() == "F":  # an 'f' reshape is a 'c' reshape between transposes
        return op.transpose(op.reshape_like(op.transpose(g), op.transpose(x)))
    return op.reshape_like(g, x)


_SHAPE = {"namespace": "shape"}
_VIEW = {**_SHAPE, "view": True}  # numpy returns a view of the input (no copy)

def _reshape_infer(types: list[TensorType], a: Any) -> TensorType:
    _check_order(a.order)
    return _like(types[0], _reshape_shape(types[0].shape, a.shape))


def _reshape(x, *, shape, order):
    # numpy refuses the reshapes _reshape_shape refuses (eager errors then report its message,
    # through inference) -- except sizes below -1, which it reads as -1: checked here. The
    # rest of the checking is left to numpy (~10 us less per call).
    if shape and min(shape) < -1:
        _reshape_shape(np.shape(x), shape)
    if type(x) is np.ndarray:  # the method: np.reshape's Python wrapper costs ~1 us more
        return x.reshape(shape, order=_check_order(order))
    return np.reshape(x, shape, order=_check_order(order))


define("reshape", ["x"], _reshape_infer, _reshape,
       attrs={"shape": (Attr.INTS, REQUIRED), "order": (Attr.STR, "c")}, **_VIEW,
       grad=input_rule(_reshape_grad),
       strings=True,
       doc="Same elements in a new shape, read and written in 'c' (row-major) or 'f' "
           "(column-major) order (ND4J's ``reshape(order, shape...)``); one size may be -1.")
define("permute", ["x"], _permute_infer, _permute, attrs={"dims": (Attr.INTS, REQUIRED)}, **_VIEW,
       grad=input_rule(lambda x, g, a: op.permute(g, dims=_inverse(a.dims))),
       strings=True,
       doc="Reorder the dims: output dim i is input dim ``dims[i]``.")
define("transpose", ["x"], lambda t, a: _like(t[0], t[0].shape[::-1]), np.transpose, **_VIEW,
       grad=input_rule(lambda x, g, a: op.transpose(g)),
       strings=True,
       doc="Reverse the order of all dims (numpy ``.T``).")
define("expand_dims", ["x"], _expand_dims_infer,
       lambda x, *, axis: np.expand_dims(x, axis), attrs={"axis": (Attr.INT, REQUIRED)},
       **_VIEW, grad=input_rule(lambda x, g, a: op.squeeze(
           g, axis=(normalize_axis(a.axis, len(x.shape) + 1),))),
       strings=True,
       doc="Insert a size-1 dim at ``axis`` (of the output).")
define("squeeze", ["x"], _squeeze_infer,
       lambda x, *, axis: np.squeeze(x, axis=_squeeze_axes(np.shape(x), axis)),
       attrs={"axis": (Attr.OPT_INTS, None)}, **_VIEW,
       grad=input_rule(lambda x, g, a: op.reshape_like(g, x)),
       strings=True,
       doc="Remove size-1 dims: those in ``axis``, or all of them when ``axis`` is None.")
define("flatten", ["x"], _flatten_infer,
       lambda x, *, order: np.ravel(x, order=_check_order(order)),
       attrs={"order": (Attr.STR, "c")}, **_VIEW,
       grad=input_rule(_flatten_grad),
       strings=True,
       doc="All elements as a 1-D array, read in 'c' (row-major) or 'f' (column-major) order.")


# --- tile / repeat / broadcast_to / reverse / one_hot -----------------------------------------

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


def _known(shape: tuple[int, ...]) -> bool:
    return all(d >= 0 for d in shape)


def _blocks(g: Any, expanded: Any, reps: tuple[int, ...]) -> Any:
    """``g`` reshaped to ``expanded``'s shape times ``reps`` (``expanded`` has size 1 wherever
    ``reps`` is not 1): splits each repeated dim of ``g`` into (copies, size) or (size, copies)
    blocks. Static when the sizes are known, else shaped like a run-time broadcast."""
    shape = tuple(d * r if d >= 0 else -1 for d, r in zip(expanded.shape, reps))
    if _known(shape):
        return op.reshape(g, shape=shape)
    # any value of that shape serves as ``like``: tiling ``expanded`` by ``reps`` has it (and,
    # unlike zeros(shape=...), it is an op on a value, so it runs wherever ``g`` lives)
    return op.reshape_like(g, op.tile(expanded, reps=reps))


def _tile_grad(x: Any, g: Any, a: Any) -> Any:
    """Sum the copies: view ``g`` as (reps0, size0, reps1, size1, ...) blocks and sum the reps."""
    n = max(len(x.shape), len(a.reps))
    reps = (1,) * (n - len(a.reps)) + tuple(a.reps)
    expanded = x
    for _ in range(n - len(x.shape)):
        expanded = op.expand_dims(expanded, axis=0)
    for i in range(n):
        expanded = op.expand_dims(expanded, axis=2 * i)  # (1, size0, 1, size1, ...)
    interleaved = tuple(v for r in reps for v in (r, 1))
    summed = op.sum(_blocks(g, expanded, interleaved), dims=tuple(range(0, 2 * n, 2)))
    return op.reshape_like(summed, x)


def _repeat_grad(x: Any, g: Any, a: Any) -> Any:
    """Sum the copies: each element is repeated in a row, so view ``g``'s axis as (size, copies)."""
    # numpy repeats the flattened array for axis=None and treats a scalar as shape (1,)
    base = op.flatten(x) if a.axis is None or not x.shape else x
    ax = 0 if a.axis is None else normalize_axis(a.axis, len(base.shape))
    reps = tuple(a.repeats if i == ax + 1 else 1 for i in range(len(base.shape) + 1))
    summed = op.sum(_blocks(g, op.expand_dims(base, axis=ax + 1), reps), dims=(ax + 1,))
    return summed if base is x else op.reshape_like(summed, x)


define("tile", ["x"], lambda t, a: _like(t[0], _tile_shape(t[0].shape, a.reps)),
       lambda x, *, reps: np.tile(x, reps), attrs={"reps": (Attr.INTS, REQUIRED)}, **_SHAPE,
       grad=input_rule(_tile_grad),
       strings=True,
       doc="Repeat the whole array ``reps[i]`` times along dim i (numpy ``tile``).")
define("repeat", ["x"], _repeat_infer, lambda x, *, repeats, axis: np.repeat(x, repeats, axis),
       attrs={"repeats": (Attr.INT, REQUIRED), "axis": (Attr.OPT_INT, None)}, **_SHAPE,
       grad=input_rule(_repeat_grad),
       doc="Repeat each element ``repeats`` times along ``axis`` (None: of the flattened array).")
define("broadcast_to", ["x"], _broadcast_infer,
       lambda x, *, shape: np.array(np.broadcast_to(x, shape)),  # a writable copy, like ND4J
       attrs={"shape": (Attr.INTS, REQUIRED)}, **_SHAPE,
       grad=input_rule(lambda x, g, a: op.reduce_to_like(g, x)),
       strings=True,
       doc="Broadcast to ``shape`` (numpy rules) as a new array.")
define("reverse", ["x"], _reverse_infer,
       lambda x, *, dims: np.flip(x, axis=dims), attrs={"dims": (Attr.INTS, REQUIRED)},
       **_VIEW,
       grad=input_rule(lambda x, g, a: op.reverse(g, dims=a.dims)),
       doc="Reverse the order of elements along ``dims``.")
define("one_hot", ["indices"], _one_hot_infer, _one_hot,
       attrs={"depth": (Attr.INT, REQUIRED), "axis": (Attr.INT, -1), "on": (Attr.FLOAT, 1.0),
              "off": (Attr.FLOAT, 0.0), "dtype": (Attr.DTYPE, np.dtype(np.float32))},
       namespace="nn", method=False,
       grad=NONDIFF,
       doc="One-hot encoding: a new dim of size ``depth`` at ``axis``, ``on`` at each index, "
           "else ``off`` (out-of-range indices give all ``off``).")
