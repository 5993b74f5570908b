"""ONNX converters, the indexing family: Slice, Range, ConstantOfShape, Split, Pad, Tile,
Trilu, OneHot, EyeLike, Compress, NonZero, Unique, the Gather*/Scatter* ops, ReverseSequence,
DepthToSpace, SpaceToDepth, CenterCropPad and Col2Im (Resize/Upsample: ``indexing_2.py``).

Element-wise gathers and scatters (GatherElements, GatherND, ScatterElements, ScatterND) are
composed from the table's axis-0 ``gather``/``scatter_*`` on the flattened data: the linear
index of every addressed element is ``sum(coordinate * stride)``, where the strides come
from the static shape and only the index input's values are read at run time. That keeps
them differentiable through ``gather``'s and ``scatter_*``'s own gradient rules.

Values read at import where possible (constants fold), at run time where ONNX feeds them as
tensors: Slice starts/ends (clamped at run time, then a ``gather`` of a ``range``), Range
bounds, ConstantOfShape's shape, Pad's constant value, NonZero/Compress/Unique (value-shaped
table ops). Axes, steps, pads, repeats, split sizes and OneHot depth stay import-time.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..table import converter

_INT64 = np.int64


# --- helpers ------------------------------------------------------------------------------------

def _norm_axis(node: Any, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise node.fail(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _static_shape(node: Any, x: Any, what: str) -> tuple[int, ...]:
    """x's shape when every dim is known at import (the composed index arithmetic needs it)."""
    shape = tuple(node.shape(x))
    if any(d < 0 for d in shape):
        raise node.fail(f"{what} over run-time (-1) dims of shape {shape} is not supported "
                        f"(the index arithmetic needs the static shape)")
    return shape


def _strides(shape: Sequence[int]) -> np.ndarray:
    """Row-major element strides of ``shape`` (int64)."""
    out = np.ones(len(shape), _INT64)
    for i in range(len(shape) - 2, -1, -1):
        out[i] = out[i + 1] * shape[i + 1]
    return out


def _as_int64(node: Any, idx: Any) -> Any:
    return idx if node.dtype(idx) == np.int64 else node.op("cast", idx, dtype=np.dtype(_INT64))


def _wrap_negative(node: Any, idx: Any, size: Any) -> Any:
    """ONNX indices in [-size, size): negative ones count from the end (``size`` broadcasts)."""
    idx = _as_int64(node, idx)
    neg = node.op("lt", idx, np.zeros((), _INT64))
    return node.op("where", neg, node.op("add", idx, np.asarray(size, _INT64)), idx)


def _flat(node: Any, x: Any) -> Any:
    return node.op("reshape", x, shape=(-1,))


# --- Slice ------------------------------------------------------------------------------------

def _slice_item(node: Any, d: int, start: int, end: int, step: int) -> tuple:
    """One ``strided_slice`` item for ONNX bounds on a dim of size ``d`` (-1: run time).

    ONNX clamps start to [0, d] (negative step: [0, d-1]) and end to [0, d] ([-1, d-1]),
    after adding d to negative values; Python slicing does the same except that it empties a
    negative-step slice whose start is below -d, so known dims are resolved here."""
    if step == 0:
        raise node.fail("Slice steps cannot be 0")
    if d >= 0:
        start = start + d if start < 0 else start
        end = end + d if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), d), min(max(end, 0), d)
            return ("slice", start, end, step)
        start, end = min(max(start, 0), d - 1), min(max(end, -1), d - 1)
        return ("slice", start, None if end < 0 else end, step)
    if step < 0 and start < -(2 ** 31):
        raise node.fail("a negative-step Slice starting before the front of a run-time dim "
                        "is not supported")
    big = 2 ** 62  # (INT64_MAX/MIN sentinels mean "to the end": Python slicing clamps alike)
    return ("slice", max(min(start, big), -big), max(min(end, big), -big), step)


def _slice_common(node: Any, x: Any, starts, ends, axes, steps) -> Any:
    shape = node.shape(x)
    rank = len(shape)
    axes = tuple(range(len(starts))) if axes is None else axes
    steps = (1,) * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise node.fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must "
                        f"have one entry each")
    index: list[Any] = [("slice", None, None, None)] * rank
    for a, s, e, st in zip(axes, starts, ends, steps):
        a = _norm_axis(node, int(a), rank)
        index[a] = _slice_item(node, shape[a], int(s), int(e), int(st))
    return node.op("strided_slice", x, index=tuple(index))


@converter("Slice", since=1)
def _slice_v1(node):
    axes = node.attr("axes")
    return _slice_common(node, node.input(0), node.attr("starts"), node.attr("ends"),
                         None if axes is None else tuple(axes), None)


def _runtime_bound(node: Any, bound: Any, i: int, d: int, lo: int, hi: int) -> Any:
    """Bound ``i`` of a run-time starts/ends vector on a dim of size d: negative values
    count from the end, then the ONNX clamp to [lo, hi]."""
    v = node.op("reshape", node.op("gather", _as_int64(node, bound), np.asarray([i], _INT64),
                                   axis=0), shape=())
    v = _wrap_negative(node, v, d)
    return node.op("maximum", node.op("minimum", v, np.asarray(hi, _INT64)),
                   np.asarray(lo, _INT64))


def _slice_runtime(node: Any, x: Any, starts: Any, ends: Any, axes, steps) -> Any:
    """Slice with starts/ends known only at run time: per axis, clamp the bounds with
    run-time arithmetic and gather the ``range`` of source indices (differentiable through
    ``gather``). The sliced dims must be static (their sizes enter the clamping)."""
    shape = node.shape(x)
    rank = len(shape)
    count = node.shape(starts)[0]
    if count < 0:
        raise node.fail("run-time starts of unknown length are not supported")
    axes = tuple(range(count)) if axes is None else axes
    steps = (1,) * count if steps is None else steps
    out = x
    for i, (a, st) in enumerate(zip(axes, steps)):
        a = _norm_axis(node, int(a), rank)
        d = shape[a]
        if d < 0:
            raise node.fail(f"Slice with run-time bounds of run-time dim {a} is not supported")
        if st == 0:
            raise node.fail("Slice steps cannot be 0")
        lo, hi = (0, d) if st > 0 else (0, d - 1)
        begin = _runtime_bound(node, starts, i, d, lo, hi)
        end = _runtime_bound(node, ends, i, d, lo if st > 0 else -1, hi)
        picked = node.op("range", begin, end, np.asarray(st, _INT64))
        out = node.op("gather", out, picked, axis=a)
    return out


@converter("Slice", since=10)
def _slice_v10(node):  # bounds became inputs, and steps were added
    x, starts, ends = node.input(0), node.input(1), node.input(2)
    axes, steps = node.static_ints(3, "axes"), node.static_ints(4, "steps")
    if isinstance(starts, np.ndarray) and isinstance(ends, np.ndarray):
        return _slice_common(node, x, node.static_ints(1, "starts"),
                             node.static_ints(2, "ends"), axes, steps)
    return _slice_runtime(node, x, starts, ends, axes, steps)


# --- creation: Range, ConstantOfShape, EyeLike --------------------------------------------------

@converter("Range", since=11)
def _range(node):  # (stash_type, 27: range computes in float64 for every float type anyway)
    return node.op("range", node.input(0), node.input(1), node.input(2))


@converter("ConstantOfShape", since=9)
def _constant_of_shape(node):
    value = node.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return node.op("constant_of_shape", _as_int64(node, node.input(0)), value=value[0].item(),
                   dtype=value.dtype)


@converter("EyeLike", since=9)
def _eye_like(node):
    x = node.input(0)
    shape = _static_shape(node, x, "EyeLike")
    if len(shape) != 2:
        raise node.fail(f"EyeLike needs a 2-D input, got shape {shape}")
    from ..dtypes import np_dtype
    to = node.attr("dtype")
    dtype = node.dtype(x) if to is None else np_dtype(to)
    # the value depends only on the (static) shape: a constant
    return np.eye(shape[0], shape[1], int(node.attr("k", 0)), dtype=dtype)


# --- Split --------------------------------------------------------------------------------------

def _split_common(node: Any, sizes: Sequence[int] | None, uneven: bool) -> Any:
    x = node.input(0)
    shape = node.shape(x)
    axis = _norm_axis(node, int(node.attr("axis", 0)), len(shape))
    d = shape[axis]
    n = node.num_outputs
    if sizes is None:
        if uneven and node.has_attr("num_outputs"):
            n = int(node.attr("num_outputs"))
        if d < 0:
            if uneven:
                raise node.fail("an uneven Split of a run-time dim is not supported")
            return node.op("split", x, num_or_sizes=(n,), axis=axis)
        chunk = -(-d // n)
        if uneven:  # opset 18: ceil(d/n)-sized parts, the last one smaller
            sizes = [min(chunk, max(d - i * chunk, 0)) for i in range(n)]
        elif d % n:
            raise node.fail(f"cannot split a dim of size {d} into {n} equal parts")
        else:
            sizes = [d // n] * n
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) == 1:  # (split's one-int form means "n parts")
        return (node.op("identity", x),)
    return node.op("split", x, num_or_sizes=sizes, axis=axis)


@converter("Split", since=1)
def _split_attr(node):
    split = node.attr("split")
    if node.opset < 2 and split is None and node.num_inputs > 1:
        split = node.static_ints(1, "split")
    return _split_common(node, None if not split else tuple(split), False)


@converter("Split", since=13)
def _split_input(node):  # split sizes became an input
    return _split_common(node, node.static_ints(1, "split"), False)


@converter("Split", since=18)
def _split_num_outputs(node):  # num_outputs: uneven last chunk allowed
    return _split_common(node, node.static_ints(1, "split"), True)


# --- Pad ------------------------------------------------------------------------------------

def _pad_common(node: Any, pads: Sequence[int], mode: str, value: Any,
                axes: Sequence[int] | None) -> Any:
    x = node.input(0)
    shape = node.shape(x)
    rank = len(shape)
    axes = tuple(range(rank)) if axes is None else tuple(_norm_axis(node, a, rank) for a in axes)
    if len(pads) != 2 * len(axes):
        raise node.fail(f"pads {tuple(pads)} must hold 2 entries per padded axis {axes}")
    before, after = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        before[a], after[a] = int(pads[i]), int(pads[i + len(axes)])
    if any(p < 0 for p in before + after):  # negative pads crop first
        index = tuple(("slice", -min(b, 0), min(e, 0) or None, None)
                      for b, e in zip(before, after))
        x = node.op("strided_slice", x, index=index)
        before, after = [max(b, 0) for b in before], [max(e, 0) for e in after]
    if not any(before) and not any(after):
        return node.op("identity", x)
    paddings = tuple(zip(before, after))
    if mode == "constant" and (value is None or isinstance(value, np.ndarray)):
        v = 0.0 if value is None else np.asarray(value).reshape(-1)[0].item()
        return node.op("pad", x, paddings=paddings, mode="constant", constant=v)
    if mode == "constant":  # a run-time pad value: zero padding, then the value outside x
        inside = node.op("pad", node.op("ones_like", x, dtype=np.dtype(bool)),
                         paddings=paddings, mode="constant", constant=0.0)
        fill = node.op("reshape", node.op("cast", value, dtype=node.dtype(x)), shape=())
        return node.op("where", inside, node.op("pad", x, paddings=paddings, mode="constant",
                                                constant=0.0), fill)
    if mode == "reflect":
        return node.op("pad", x, paddings=paddings, mode="reflect")
    if mode not in ("edge", "wrap"):
        raise node.fail(f"Pad mode {mode!r} is not supported")
    # edge/wrap: a gather of constant source indices per padded axis (clamped or modular)
    shape = node.shape(x)
    for a in range(rank):
        if not before[a] and not after[a]:
            continue
        d = shape[a]
        if d <= 0:
            raise node.fail(f"{mode} padding needs a known, non-empty dim; axis {a} has {d}")
        src = np.arange(-before[a], d + after[a], dtype=_INT64)
        src = np.clip(src, 0, d - 1) if mode == "edge" else src % d
        x = node.op("gather", x, src, axis=a)
    return x


@converter("Pad", since=1)
def _pad_v1(node):  # the attribute was called paddings
    return _pad_common(node, node.attr("paddings"), node.attr("mode", "constant"),
                       node.attr("value", 0.0), None)


@converter("Pad", since=2)
def _pad_v2(node):
    return _pad_common(node, node.attr("pads"), node.attr("mode", "constant"),
                       node.attr("value", 0.0), None)


@converter("Pad", since=11)
def _pad_inputs(node):  # pads/constant_value became inputs (11); axes input (18), wrap (19)
    axes = node.static_ints(3, "axes")
    value = node.input(2) if node.num_inputs > 2 else None  # (may be a run-time scalar)
    return _pad_common(node, node.static_ints(1, "pads"), node.attr("mode", "constant"),
                       value, axes)


# --- Tile, Trilu, OneHot ------------------------------------------------------------------------

@converter("Tile", since=1)
def _tile_v1(node):  # one axis: tiles and axis inputs
    x = node.input(0)
    reps = [1] * node.rank(x)
    reps[_norm_axis(node, int(node.static_ints(2, "axis")[0]), node.rank(x))] = int(
        node.static_ints(1, "tiles")[0])
    return node.op("tile", x, reps=tuple(reps))


@converter("Tile", since=6)
def _tile(node):  # a repeat count per dim
    return node.op("tile", node.input(0), reps=node.static_ints(1, "repeats"))


@converter("Trilu", since=14)
def _trilu(node):
    k = node.static_ints(1, "k") if node.num_inputs > 1 else None
    diagonal = int(k[0]) if k else 0
    name = "triu" if int(node.attr("upper", 1)) else "tril"
    return node.op(name, node.input(0), diagonal=diagonal)


def _one_hot_common(node: Any, wrap: bool) -> Any:
    indices = node.input(0)
    depth = int(np.asarray(node.static(1, "depth")).reshape(-1)[0])
    values = np.asarray(node.static(2, "values")).reshape(-1)
    if values.size != 2:
        raise node.fail(f"values must hold [off, on], got {values.size} values")
    if node.dtype(indices).kind == "f":  # float indices: their integer part
        indices = node.op("cast", indices, dtype=np.dtype(_INT64))
    idx = _wrap_negative(node, indices, depth) if wrap else indices
    return node.op("one_hot", idx, depth=depth, axis=int(node.attr("axis", -1)),
                   on=values[1].item(), off=values[0].item(), dtype=values.dtype)


# --- data-dependent shapes: NonZero, Compress, Unique ------------------------------------------

@converter("OneHot", since=9)
def _one_hot_v9(node):  # indices outside [0, depth) give all-off rows
    return _one_hot_common(node, False)


@converter("OneHot", since=11)
def _one_hot(node):  # negative indices count from the end
    return _one_hot_common(node, True)


@converter("NonZero", since=9)
def _nonzero(node):
    return node.op("nonzero", node.input(0))


@converter("Compress", since=9)
def _compress(node):
    x, cond = node.input(0), node.input(1)
    axis = node.attr("axis")
    if axis is None:
        x, axis = _flat(node, x), 0
    else:
        axis = _norm_axis(node, int(axis), node.rank(x))
    picked = node.op("reshape", node.op("nonzero", cond), shape=(-1,))
    return node.op("gather", x, picked, axis=axis)


@converter("Unique", since=11)
def _unique(node):
    axis = node.attr("axis")
    x = node.input(0)
    if axis is not None:
        axis = _norm_axis(node, int(axis), node.rank(x))
    return node.op("unique", x, sorted=bool(node.attr("sorted", 1)), axis=axis)


# --- element-wise gathers and scatters ----------------------------------------------------------

def _elements_index(node: Any, shape: Sequence[int], indices: Any, axis: int) -> Any:
    """Linear indices into flattened data of ``shape`` for ONNX ``indices`` along ``axis``:
    every other coordinate is the index element's own position.

    The strides need the data's dims after the first; the first may be run-time (a dynamic
    batch): then along axis 0 a negative index gives a negative linear index, which the
    axis-0 gather/scatter wrap by the flat size exactly as ONNX wraps it by that dim."""
    if any(d < 0 for d in shape[1:]):
        raise node.fail(f"{node.op_type} over data of shape {tuple(shape)}: only the first "
                        f"dim may be run-time (the strides need the others)")
    strides = _strides(shape)
    idx = _wrap_negative(node, indices, max(shape[axis], 0))
    ishape = tuple(node.shape(indices))
    if all(d >= 0 for d in ishape):  # the other coordinates: a constant grid
        grids = np.indices(ishape, dtype=_INT64) if ishape else np.zeros((0,), _INT64)
        base: Any = np.zeros(ishape, _INT64)
        for d in range(len(shape)):
            if d != axis:
                base = base + grids[d] * strides[d]
    else:  # run-time index dims: count the positions along each dim at run time
        base = np.zeros((), _INT64)
        ones = node.op("ones_like", idx)
        for d in range(len(shape)):
            if d != axis:
                coord = node.op("cumsum", ones, axis=d, exclusive=True)
                base = node.op("add", base, node.op("mul", coord, np.asarray(strides[d])))
    return node.op("add", node.op("mul", idx, np.asarray(strides[axis], _INT64)), base)


@converter("GatherElements", since=11)
def _gather_elements(node):
    x, indices = node.input(0), node.input(1)
    shape = tuple(node.shape(x))
    axis = _norm_axis(node, int(node.attr("axis", 0)), len(shape))
    lin = _elements_index(node, shape, indices, axis)
    return node.op("gather", _flat(node, x), lin, axis=0)


def _scatter_flat(node: Any, flat: Any, lin: Any, updates: Any, reduction: str) -> Any:
    """Write ``updates`` rows into ``flat`` at axis-0 indices ``lin``."""
    if reduction == "none":
        return node.op("scatter_update", flat, lin, updates)
    if reduction == "add":
        return node.op("scatter_add", flat, lin, updates)
    if reduction in ("mul", "max", "min"):
        return node.op("scatter_reduce", flat, lin, updates, reduction=reduction)
    raise node.fail(f"reduction {reduction!r} is not supported")


def _scatter_elements(node: Any, reduction: str) -> Any:
    data, indices, updates = node.input(0), node.input(1), node.input(2)
    shape = tuple(node.shape(data))
    axis = _norm_axis(node, int(node.attr("axis", 0)), len(shape))
    lin = _elements_index(node, shape, indices, axis)
    out = _scatter_flat(node, _flat(node, data), _flat(node, lin), _flat(node, updates),
                        reduction)
    return node.op("reshape", out, shape=shape)


@converter("Scatter", since=9)
def _scatter(node):  # (deprecated in opset 11: ScatterElements without reduction)
    return _scatter_elements(node, "none")


@converter("ScatterElements", since=11)
def _scatter_elements_conv(node):  # reduction: add/mul (16), max/min (18)
    return _scatter_elements(node, node.attr("reduction", "none"))


def _nd_index(node: Any, shape: Sequence[int], indices: Any, batch_dims: int) -> tuple:
    """Axis-0 indices into data reshaped to (prod(batch + indexed dims), rest...), and that
    reshape's target, for GatherND/ScatterND ``indices`` of last dim k.

    Only what the arithmetic reads must be static: k, the batch dims and the indexed dims
    after the first (strides and negative-index wrapping), and for the reshape all but one of
    the dims; the indices' other dims (a NonZero count...) may be run-time. Without batch
    dims the first indexed dim may be run-time too: its negative indices give negative linear
    indices, which the axis-0 gather/scatter wrap by the (run-time) row count exactly like
    ONNX wraps them by that dim."""
    ishape = tuple(node.shape(indices))
    b = batch_dims
    if not ishape or ishape[-1] < 0:
        raise node.fail(f"indices of shape {ishape} need a known last dim (the index depth)")
    k = ishape[-1]
    if k > len(shape) - b:
        raise node.fail(f"indices' last dim {k} exceeds the data's rank {len(shape)} minus "
                        f"batch_dims {b}")
    prefix, rest = tuple(shape[:b + k]), tuple(shape[b + k:])
    lead_free = b == 0 and k > 0 and prefix[0] < 0  # (a run-time first indexed dim)
    fixed = prefix[1:] if lead_free else prefix
    if any(d < 0 for d in fixed) or sum(d < 0 for d in rest) + lead_free > 1:
        raise node.fail(f"{node.op_type} over data of shape {tuple(shape)} needs its batch and "
                        f"indexed dims known at import (the first indexed one may be run-time "
                        f"without batch_dims), and at most one run-time dim in all")
    indexed = prefix[b:]
    # (size 0 leaves a run-time first dim's negative indices to the gather/scatter wrap)
    idx = _wrap_negative(node, indices, np.asarray([max(d, 0) for d in indexed], _INT64))
    lin = node.op("sum", node.op("mul", idx, _strides(indexed)), dims=(-1,))
    if b:  # each batch element addresses its own block of prod(indexed) rows
        per_batch = int(np.prod(indexed, dtype=_INT64))
        offsets = np.arange(int(np.prod(shape[:b], dtype=_INT64)), dtype=_INT64)
        offsets = (offsets * per_batch).reshape(tuple(shape[:b]) + (1,) * (len(ishape) - 1 - b))
        lin = node.op("add", lin, offsets)
    return lin, (-1 if lead_free else int(np.prod(prefix, dtype=_INT64)),) + rest


@converter("GatherND", since=11)
def _gather_nd(node):  # (batch_dims from 12)
    x, indices = node.input(0), node.input(1)
    lin, rows = _nd_index(node, node.shape(x), indices, int(node.attr("batch_dims", 0)))
    return node.op("gather", node.op("reshape", x, shape=rows), lin, axis=0)


@converter("ScatterND", since=11)
def _scatter_nd(node):  # reduction: add/mul (16), max/min (18)
    data, indices, updates = node.input(0), node.input(1), node.input(2)
    shape = tuple(node.shape(data))
    lin, rows = _nd_index(node, shape, indices, 0)
    out = _scatter_flat(node, node.op("reshape", data, shape=rows), lin, updates,
                        node.attr("reduction", "none"))
    return node.op("reshape", out, shape=shape)


@converter("ReverseSequence", since=10)
def _reverse_sequence(node):
    """A gather of each element's source: time index len-1-t inside its sequence, t past
    its end. The time positions are counted at run time (cumsum of ones), so a run-time
    batch or time dim is fine wherever ``_elements_index`` allows it."""
    x, lens = node.input(0), node.input(1)
    shape = tuple(node.shape(x))
    rank = len(shape)
    t_ax = _norm_axis(node, int(node.attr("time_axis", 0)), rank)
    b_ax = _norm_axis(node, int(node.attr("batch_axis", 1)), rank)
    b_shape = [1] * rank
    b_shape[b_ax] = -1
    t = node.op("cumsum", node.op("ones_like", x, dtype=np.dtype(_INT64)), axis=t_ax,
                exclusive=True)
    lens = node.op("reshape", _as_int64(node, lens), shape=tuple(b_shape))
    src = node.op("where", node.op("lt", t, lens),
                  node.op("sub", node.op("sub", lens, np.ones((), _INT64)), t), t)
    return node.op("gather", _flat(node, x), _elements_index(node, shape, src, t_ax), axis=0)


# --- DepthToSpace / SpaceToDepth ----------------------------------------------------------------

def _nchw(node: Any, x: Any, what: str) -> tuple[int, int, int, int]:
    shape = tuple(node.shape(x))
    if len(shape) != 4 or any(d < 0 for d in shape[1:]):
        raise node.fail(f"{what} needs a 4-D input with known C, H, W; got shape {shape}")
    return shape  # type: ignore[return-value]


@converter("DepthToSpace", since=1)
def _depth_to_space(node):  # (mode from 11)
    x = node.input(0)
    n, c, h, w = _nchw(node, x, "DepthToSpace")
    b = int(node.attr("blocksize"))
    if c % (b * b):
        raise node.fail(f"channels {c} are not a multiple of blocksize^2 = {b * b}")
    n = -1 if n < 0 else n
    oc = c // (b * b)
    if node.attr("mode", "DCR") == "DCR":  # depth = (block row, block column, channel)
        y = node.op("reshape", x, shape=(n, b, b, oc, h, w))
        y = node.op("permute", y, dims=(0, 3, 4, 1, 5, 2))
    else:  # CRD: depth = (channel, block row, block column)
        y = node.op("reshape", x, shape=(n, oc, b, b, h, w))
        y = node.op("permute", y, dims=(0, 1, 4, 2, 5, 3))
    return node.op("reshape", y, shape=(n, oc, h * b, w * b))


@converter("SpaceToDepth", since=1)
def _space_to_depth(node):  # (mode from 28)
    x = node.input(0)
    n, c, h, w = _nchw(node, x, "SpaceToDepth")
    b = int(node.attr("blocksize"))
    if h % b or w % b:
        raise node.fail(f"H {h} and W {w} must be multiples of blocksize {b}")
    n = -1 if n < 0 else n
    y = node.op("reshape", x, shape=(n, c, h // b, b, w // b, b))
    if node.attr("mode", "DCR") == "DCR":  # depth = (block row, block column, channel)
        y = node.op("permute", y, dims=(0, 3, 5, 1, 2, 4))
    else:  # CRD: depth = (channel, block row, block column)
        y = node.op("permute", y, dims=(0, 1, 3, 5, 2, 4))
    return node.op("reshape", y, shape=(n, c * b * b, h // b, w // b))


# --- CenterCropPad, Col2Im ----------------------------------------------------------------------

@converter("CenterCropPad", since=18)
def _center_crop_pad(node):
    x = node.input(0)
    target = node.static_ints(1, "shape")
    shape = node.shape(x)
    rank = len(shape)
    axes = node.attr("axes")
    axes = range(rank) if axes is None else [_norm_axis(node, int(a), rank) for a in axes]
    index: list[Any] = [("slice", None, None, None)] * rank
    pads = [(0, 0)] * rank
    for a, t in zip(axes, target):
        d = shape[a]
        if d < 0:
            raise node.fail(f"CenterCropPad of run-time dim {a} is not supported")
        if t < d:  # crop: the extra element (odd difference) comes off the end
            start = (d - t) // 2
            index[a] = ("slice", start, start + t, None)
        elif t > d:  # pad with zeros: the extra element goes to the end
            pads[a] = ((t - d) // 2, t - d - (t - d) // 2)
    y = node.op("strided_slice", x, index=tuple(index))
    if any(p != (0, 0) for p in pads):
        y = node.op("pad", y, paddings=tuple(pads), mode="constant", constant=0.0)
    return y


@converter("Col2Im", since=18)
def _col2im(node):
    """The adjoint of im2col as one matmul with a constant 0/1 matrix that sends each
    (block offset, block position) column entry to its image pixel (or nowhere, in the
    padding); overlapping blocks add up."""
    x = node.input(0)
    image = node.static_ints(1, "image_shape")
    block = node.static_ints(2, "block_shape")
    nd = len(image)
    dil = tuple(node.attr("dilations") or (1,) * nd)
    strides = tuple(node.attr("strides") or (1,) * nd)
    pads = tuple(node.attr("pads") or (0,) * (2 * nd))
    shape = tuple(node.shape(x))
    if len(shape) != 3 or shape[1] < 0 or shape[2] < 0:
        raise node.fail(f"Col2Im needs an input (N, C*prod(block), L) with known C and L, got "
                        f"{shape}")
    grid = tuple((image[i] + pads[i] + pads[i + nd] - dil[i] * (block[i] - 1) - 1)
                 // strides[i] + 1 for i in range(nd))
    k, ll, p = int(np.prod(block)), int(np.prod(grid)), int(np.prod(image))
    if shape[2] != ll or shape[1] % k:
        raise node.fail(f"input {shape} does not match blocks {block} over image {image} "
                        f"({ll} block positions)")
    c = shape[1] // k
    m = np.zeros((k * ll, p), np.dtype(node.dtype(x)))
    offsets = np.indices(block).reshape(nd, -1).T
    positions = np.indices(grid).reshape(nd, -1).T
    for ki, off in enumerate(offsets):
        pix = positions * np.asarray(strides) - np.asarray(pads[:nd]) + off * np.asarray(dil)
        inside = np.all((pix >= 0) & (pix < np.asarray(image)), axis=1)
        flat = np.ravel_multi_index(tuple(np.where(inside[:, None], pix, 0).T), image)
        rows = ki * ll + np.arange(ll)
        m[rows[inside], flat[inside]] = 1
    n = -1 if shape[0] < 0 else shape[0]
    y = node.op("matmul", node.op("reshape", x, shape=(n, c, k * ll)), m)
    return node.op("reshape", y, shape=(n, c) + tuple(image))
