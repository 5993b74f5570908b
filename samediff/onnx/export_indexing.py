"""Exporters of shapes, indexing, scatter, creation and integer arithmetic (imported by
``export_ops_2.py``): basic slicing, ``pad`` (numpy's symmetric mode as mirrored slices),
``one_hot`` (an index out of range matches nothing, as nd4py), ``top_k``, ``split``,
``unstack``, ScatterND for the scatter ops, ``Unique``, ``NonZero``, ``Einsum`` for
``tensor_mmul``, the ops that read a shape at run time, and the creation ops whose value
their attributes fix (written as constants).
"""
from __future__ import annotations

import numpy as np

from .exporting import _INT64_MAX, _INT64_MIN, _axes, _scalar, exports

# -- shapes, indexing, scatter ------------------------------------------------------------------

@exports("flatten")
def _flatten(ctx, node) -> None:
    x = node.inputs[0]
    if node.attrs.order in ("f", "F"):  # column-major: reversed dims read row-major
        (x,) = ctx.emit("Transpose", [x])
    ctx.emit("Reshape", [x, ctx.ints([-1])], node.outputs)


@exports("reverse")
def _reverse(ctx, node) -> None:
    rank = ctx.rank(node.inputs[0])
    dims = _axes(node.attrs.dims, rank)
    k = len(dims)
    ctx.emit("Slice", [node.inputs[0], ctx.ints([-1] * k), ctx.ints([_INT64_MIN] * k),
                       ctx.ints(dims), ctx.ints([-1] * k)], node.outputs)


@exports("tril", "triu")
def _trilu(ctx, node) -> None:
    """ONNX's Trilu from opset 14; before, a constant mask over the last two dims (their
    sizes must then be static)."""
    x, k = node.inputs[0], int(node.attrs.diagonal)
    upper = node.op.name == "triu"
    if ctx.opset >= 14:
        ctx.emit("Trilu", [x, ctx.const(np.int64(k), hint="k")], node.outputs,
                 upper=int(upper))
        return
    rows, cols = ctx.shape(x)[-2:]
    if rows < 0 or cols < 0:
        raise ctx.fail(node, "before opset 14 (no Trilu) the last two dims must be known when "
                             "the graph is built")
    ones = np.ones((rows, cols), bool)
    keep = np.triu(ones, k) if upper else np.tril(ones, k)
    ctx.emit("Where", [ctx.const(keep, hint="mask"), x, _scalar(ctx, 0, ctx.dtype(x))],
             node.outputs)


@exports("strided_slice")
def _strided_slice(ctx, node) -> None:
    """Basic indexing ``x[key]``: one Slice over the sliced and indexed axes, a Squeeze of
    the indexed ones, an Unsqueeze for each newaxis (at its place in the result)."""
    x = node.inputs[0]
    rank = ctx.rank(x)
    spec = list(node.attrs.index)
    used = sum(1 for item in spec if item not in ("newaxis", "ellipsis"))
    if "ellipsis" in spec:
        at = spec.index("ellipsis")
        spec[at:at + 1] = [("slice", None, None, None)] * (rank - used)
    else:
        spec += [("slice", None, None, None)] * (rank - used)
    starts, ends, axes, steps, squeeze, new_axes = [], [], [], [], [], []
    axis = out_pos = 0
    for item in spec:
        if item == "newaxis":
            new_axes.append(out_pos)
            out_pos += 1
            continue
        if isinstance(item, tuple):
            _, start, stop, step = item
            step = 1 if step is None else int(step)
            if (start, stop, step) != (None, None, 1):
                starts.append((0 if step > 0 else _INT64_MAX) if start is None else int(start))
                ends.append((_INT64_MAX if step > 0 else _INT64_MIN) if stop is None
                            else int(stop))
                axes.append(axis)
                steps.append(step)
            out_pos += 1
        else:  # an index: a slice of one, then squeezed
            i = int(item)
            starts.append(i)
            ends.append(_INT64_MAX if i == -1 else i + 1)
            axes.append(axis)
            steps.append(1)
            squeeze.append(axis)
        axis += 1
    y = x
    if axes:
        (y,) = ctx.emit("Slice", [y, ctx.ints(starts), ctx.ints(ends), ctx.ints(axes),
                                  ctx.ints(steps)])
    if squeeze:
        (y,) = ctx.emit("Squeeze", [y, ctx.ints(squeeze)])
    if new_axes:
        (y,) = ctx.emit("Unsqueeze", [y, ctx.ints(new_axes)])
    ctx.emit("Identity", [y], node.outputs)


@exports("repeat")
def _repeat(ctx, node) -> None:
    """numpy's ``repeat`` by one count: each element tiled along a new axis after its own,
    then the two axes merged (the result's static shape)."""
    a = node.attrs
    x = node.inputs[0]
    if not isinstance(a.repeats, (int, np.integer)):
        raise ctx.fail(node, "per-element repeat counts have no ONNX form; give one count")
    if a.axis is None:
        (x,) = ctx.emit("Reshape", [x, ctx.ints([-1])])
        rank, axis = 1, 0
    else:
        rank = ctx.rank(x)
        axis = int(a.axis) + rank if int(a.axis) < 0 else int(a.axis)
    out_shape = ctx.shape(node.outputs[0])
    if any(d < 0 for d in out_shape):
        raise ctx.fail(node, "repeat needs the result's shape known when the graph is built")
    (u,) = ctx.emit("Unsqueeze", [x, ctx.ints([axis + 1])])
    reps = [1] * (rank + 1)
    reps[axis + 1] = int(a.repeats)
    (t,) = ctx.emit("Tile", [u, ctx.ints(reps)])
    ctx.emit("Reshape", [t, ctx.ints(out_shape)], node.outputs)


@exports("tensor_mmul")
def _tensor_mmul(ctx, node) -> None:
    """``tensordot`` as one Einsum: the contracted dims of x and y share letters."""
    x, y = node.inputs
    rx, ry = ctx.rank(x), ctx.rank(y)
    dx = [int(d) + rx if int(d) < 0 else int(d) for d in node.attrs.dims_x]
    dy = [int(d) + ry if int(d) < 0 else int(d) for d in node.attrs.dims_y]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lx = [next(letters) for _ in range(rx)]
    ly = [next(letters) for _ in range(ry)]
    for i, j in zip(dx, dy):
        ly[j] = lx[i]
    free = [lx[i] for i in range(rx) if i not in dx] + [ly[j] for j in range(ry) if j not in dy]
    out = ctx.dtype(node.outputs[0])
    ctx.emit("Einsum", [ctx.as_dtype(x, out), ctx.as_dtype(y, out)], node.outputs,
             equation=f"{''.join(lx)},{''.join(ly)}->{''.join(free)}")


@exports("nonzero")
def _nonzero(ctx, node) -> None:
    ctx.emit("NonZero", node.inputs, node.outputs)


@exports("unique")
def _unique(ctx, node) -> None:
    """ONNX's Unique: values, first indices, inverse indices, counts (nd4py's outputs)."""
    a = node.attrs
    extra = {} if a.axis is None else {"axis": int(a.axis)}
    ctx.emit("Unique", node.inputs, node.outputs, sorted=int(bool(a.sorted)), **extra)


@exports("reshape_like", "broadcast_like")
def _like_shape(ctx, node) -> None:
    g, like = node.inputs
    (shape,) = ctx.emit("Shape", [like])
    ctx.emit("Reshape" if node.op.name == "reshape_like" else "Expand", [g, shape],
             node.outputs)


@exports("round")
def _round(ctx, node) -> None:
    """Halves away from zero from exact parts: ``t = trunc(x)`` (sign times the floor of the
    magnitude), plus the sign where the fraction ``|x| - floor(|x|)`` is at least a half
    (not ``floor(|x| + 0.5)``, whose addition rounds)."""
    x = node.inputs[0]
    if ctx.dtype(x).kind != "f":
        ctx.emit("Identity", [x], node.outputs)
        return
    (mag,) = ctx.emit("Abs", [x])
    (fl,) = ctx.emit("Floor", [mag])
    (sign,) = ctx.emit("Sign", [x])
    zero = _scalar(ctx, 0, ctx.dtype(x))
    (t,) = ctx.emit("Mul", [sign, fl])  # (below 1 in magnitude: x * 0, keeping -0's sign)
    (t,) = ctx.emit("Where", [ctx.emit("Equal", [fl, zero])[0],
                              ctx.emit("Mul", [x, zero])[0], t])
    (frac,) = ctx.emit("Sub", [mag, fl])
    (half,) = ctx.emit("GreaterOrEqual", [frac, _scalar(ctx, 0.5, ctx.dtype(x))])
    (away,) = ctx.emit("Add", [t, sign])
    ctx.emit("Where", [half, away, t], node.outputs)


def _floor_mod(ctx, x: str, y: str, out: str | int = 1) -> str:
    """Python's ``%``: integers are ONNX's Mod; floats C's fmod (exact), plus ``y`` where
    the remainder is non-zero and its sign differs from ``y``'s (numpy's rule)."""
    if ctx.dtype(x).kind != "f":
        return ctx.emit("Mod", [x, y], [out] if isinstance(out, str) else out, fmod=0)[0]
    (r,) = ctx.emit("Mod", [x, y], fmod=1)
    zero = _scalar(ctx, 0, ctx.dtype(x))
    (nonzero,) = ctx.emit("Not", [ctx.emit("Equal", [r, zero])[0]])
    (differ,) = ctx.emit("Xor", [ctx.emit("Less", [r, zero])[0],
                                 ctx.emit("Less", [y, zero])[0]])
    (fix,) = ctx.emit("And", [nonzero, differ])
    (moved,) = ctx.emit("Add", [r, y])
    (r,) = ctx.emit("Where", [fix, moved, r])
    # a zero remainder takes y's sign (-0 for a negative y): y < 0 or 1 / y < 0 (y = -0)
    (neg_y,) = ctx.emit("Or", [ctx.emit("Less", [y, zero])[0],
                               ctx.emit("Less", [ctx.emit("Reciprocal", [y])[0], zero])[0]])
    (signed_zero,) = ctx.emit("Where", [neg_y, _scalar(ctx, -0.0, ctx.dtype(x)), zero])
    return ctx.emit("Where", [ctx.emit("Equal", [r, zero])[0], signed_zero, r],
                    [out] if isinstance(out, str) else out)[0]


@exports("floor_mod", "floor_div")
def _floor_ops(ctx, node) -> None:
    """``floor_mod``; ``floor_div`` of integers as ``(x - x % y) / y`` (an exact division),
    of floats as numpy's steps (``_float_floor_div``)."""
    out = ctx.dtype(node.outputs[0])
    x, y = (ctx.as_dtype(v, out) for v in node.inputs)
    if node.op.name == "floor_mod":
        _floor_mod(ctx, x, y, node.outputs[0])
    elif out.kind == "f":
        _float_floor_div(ctx, x, y, node.outputs[0])
    else:
        (d,) = ctx.emit("Sub", [x, _floor_mod(ctx, x, y)])
        ctx.emit("Div", [d, y], node.outputs)


def _float_floor_div(ctx, x: str, y: str, out: str) -> None:
    """numpy's float floor division, step by step (so every rounding is the same): ``m =
    fmod(x, y)``, ``d = (x - m) / y`` less one where m's sign differs from y's, then
    ``floor(d)`` rounded up where ``d`` is above it by more than a half, a signed zero where
    ``d`` is 0; ``x / y`` where y is 0, and (nd4py's array-API rule) where one operand is
    infinite and the other finite and non-zero."""
    dtype = ctx.dtype(out)
    zero, one, half = (_scalar(ctx, v, dtype) for v in (0.0, 1.0, 0.5))
    emit = (lambda op, *ins, **kw: ctx.emit(op, list(ins), **kw)[0])
    m = emit("Mod", x, y, fmod=1)
    d = emit("Div", emit("Sub", x, m), y)
    m_nonzero = emit("Not", emit("Equal", m, zero))
    differ = emit("Xor", emit("Less", m, zero), emit("Less", y, zero))
    d = emit("Where", emit("And", m_nonzero, differ), emit("Sub", d, one), d)
    fl = emit("Floor", d)
    fl = emit("Where", emit("Greater", emit("Sub", d, fl), half), emit("Add", fl, one), fl)
    q = emit("Div", x, y)
    signed_zero = emit("Mul", q, zero)  # (0 with the sign of x / y, finite where used)
    result = emit("Where", emit("Equal", d, zero), signed_zero, fl)

    def finite_nonzero(v):
        return emit("And", emit("Not", emit("Or", emit("IsInf", v), emit("IsNaN", v))),
                    emit("Not", emit("Equal", v, zero)))
    special = emit("Or", emit("And", emit("IsInf", x), finite_nonzero(y)),
                   emit("And", finite_nonzero(x), emit("IsInf", y)))
    plain = emit("Or", special, emit("Equal", y, zero))
    ctx.emit("Where", [plain, q, result], [out])


@exports("pad")
def _pad(ctx, node) -> None:
    """Constant and reflect padding are ONNX's Pad; numpy's symmetric mirror (the edge
    repeated) is a reversed slice concatenated on each side of each axis."""
    a = node.attrs
    x = node.inputs[0]
    pads = [(int(b), int(e)) for b, e in a.paddings]
    if a.mode in ("constant", "reflect"):
        flat = [b for b, _ in pads] + [e for _, e in pads]
        ins = [x, ctx.ints(flat)]
        if a.mode == "constant":
            ins.append(_scalar(ctx, a.constant, ctx.dtype(x)))
        ctx.emit("Pad", ins, node.outputs, mode=a.mode)
        return
    if a.mode != "symmetric":
        raise ctx.fail(node, f"padding mode {a.mode!r} has no ONNX form")
    for axis, (before, after) in enumerate(pads):
        parts = []
        if before:
            parts += ctx.emit("Slice", [x, ctx.ints([before - 1]), ctx.ints([_INT64_MIN]),
                                        ctx.ints([axis]), ctx.ints([-1])])
        parts.append(x)
        if after:
            parts += ctx.emit("Slice", [x, ctx.ints([-1]), ctx.ints([-1 - after]),
                                        ctx.ints([axis]), ctx.ints([-1])])
        if len(parts) > 1:
            (x,) = ctx.emit("Concat", parts, axis=axis)
    ctx.emit("Identity", [x], node.outputs)


@exports("one_hot")
def _one_hot(ctx, node) -> None:
    """``indices == arange(depth)`` along the new axis, then ``on``/``off``: an index out of
    range (negative included) matches nothing, as nd4py (ONNX's OneHot counts a negative
    index from the end)."""
    a = node.attrs
    out_rank = ctx.rank(node.outputs[0])
    axis = int(a.axis) + out_rank if int(a.axis) < 0 else int(a.axis)
    depth = int(a.depth)
    idx = ctx.as_dtype(node.inputs[0], np.int64)
    (idx,) = ctx.emit("Unsqueeze", [idx, ctx.ints([axis])])
    ticks = np.arange(depth, dtype=np.int64).reshape([depth] + [1] * (out_rank - 1 - axis))
    (hit,) = ctx.emit("Equal", [idx, ctx.const(ticks, hint="depth")])
    dtype = ctx.dtype(node.outputs[0])
    ctx.emit("Where", [hit, _scalar(ctx, a.on, dtype), _scalar(ctx, a.off, dtype)],
             node.outputs)


@exports("embedding")
def _embedding(ctx, node) -> None:  # (padding_idx only changes the gradient)
    ids, weight = node.inputs
    ctx.emit("Gather", [weight, ids], node.outputs, axis=0)


@exports("top_k", "top_k_indices")
def _top_k(ctx, node) -> None:
    """ONNX's TopK orders equal values by index, lower first, as nd4py."""
    a = node.attrs
    outs = [node.outputs[0], ctx.fresh("indices")] if node.op.name == "top_k" \
        else [ctx.fresh("values"), node.outputs[0]]
    ctx.emit("TopK", [node.inputs[0], ctx.ints([int(a.k)])], outs, axis=int(a.axis),
             largest=int(bool(a.largest)), sorted=1)


@exports("split")
def _split(ctx, node) -> None:
    """Split by the parts' sizes when they are static; equal parts of a run-time dim
    otherwise (opset 18 wants their count as ``num_outputs``)."""
    x = node.inputs[0]
    axis = int(node.attrs.axis)
    axis = axis + ctx.rank(x) if axis < 0 else axis
    sizes = [ctx.shape(o)[axis] for o in node.outputs]
    if all(s >= 0 for s in sizes):
        ctx.emit("Split", [x, ctx.ints(sizes)], node.outputs, axis=axis)
        return
    parts = node.attrs.num_or_sizes
    if len(parts) != 1:
        raise ctx.fail(node, "a split into given sizes along a run-time dim")
    extra = {"num_outputs": len(node.outputs)} if ctx.opset >= 18 else {}
    ctx.emit("Split", [x], node.outputs, axis=axis, **extra)


@exports("unstack")
def _unstack(ctx, node) -> None:
    x = node.inputs[0]
    axis = int(node.attrs.axis)
    axis = axis + ctx.rank(x) if axis < 0 else axis
    pieces = ctx.emit("Split", [x, ctx.ints([1] * len(node.outputs))], len(node.outputs),
                      axis=axis)
    for piece, out in zip(pieces, node.outputs):
        ctx.emit("Squeeze", [piece, ctx.ints([axis])], [out])


_SCATTER = {"scatter_update": "none", "scatter_add": "add"}


@exports("scatter_update", "scatter_add", "scatter_reduce")
def _scatter(ctx, node) -> None:
    """ScatterND over axis 0 (indices ``[..., 1]``), the updates broadcast to
    ``indices.shape + ref.shape[1:]`` as nd4py does. scatter_update's "last duplicate wins"
    is onnx.reference's order; ONNX leaves duplicates without a reduction undefined."""
    ref, indices, updates = node.inputs
    reduction = _SCATTER.get(node.op.name) or str(node.attrs.reduction)
    need = {"none": 13, "add": 16, "mul": 16, "max": 18, "min": 18}
    if reduction not in need:
        raise ctx.fail(node, f"reduction {reduction!r} has no ONNX form")
    if ctx.opset < need[reduction]:
        raise ctx.fail(node, f"ScatterND with reduction {reduction!r} needs opset "
                             f"{need[reduction]} or later")
    idx = ctx.as_dtype(indices, np.int64)
    (idx,) = ctx.emit("Unsqueeze", [idx, ctx.ints([ctx.rank(indices)])])
    want = (*ctx.shape(indices), *ctx.shape(ref)[1:])
    upd = ctx.as_dtype(updates, ctx.dtype(ref))
    if tuple(ctx.shape(updates)) != want:
        if any(d < 0 for d in want):
            raise ctx.fail(node, "updates broadcast against run-time dims")
        (upd,) = ctx.emit("Expand", [upd, ctx.ints(want)])
    extra = {} if reduction == "none" else {"reduction": reduction}
    ctx.emit("ScatterND", [ref, idx, upd], node.outputs, **extra)


# -- shapes read at run time, creation ----------------------------------------------------------

@exports("shape_of")
def _shape_of(ctx, node) -> None:
    ctx.emit("Shape", node.inputs, node.outputs)


def _fill(ctx, node, shape: str, value) -> None:
    from onnx import numpy_helper
    dtype = ctx.dtype(node.outputs[0])
    ctx.emit("ConstantOfShape", [shape], node.outputs,
             value=numpy_helper.from_array(np.asarray([value], dtype)))


@exports("zeros_like", "ones_like", "full_like")
def _like(ctx, node) -> None:
    value = {"zeros_like": 0, "ones_like": 1}.get(node.op.name)
    (shape,) = ctx.emit("Shape", node.inputs)
    _fill(ctx, node, shape, node.attrs.value if value is None else value)


@exports("constant_of_shape")
def _constant_of_shape(ctx, node) -> None:
    _fill(ctx, node, ctx.as_dtype(node.inputs[0], np.int64), node.attrs.value)


@exports("expand_to")
def _expand_to(ctx, node) -> None:
    ctx.emit("Expand", [node.inputs[0], ctx.as_dtype(node.inputs[1], np.int64)], node.outputs)


@exports("reshape_to")
def _reshape_to(ctx, node) -> None:
    if node.attrs.allowzero and ctx.opset < 14:
        raise ctx.fail(node, "allowzero needs opset 14 or later")
    extra = {"allowzero": 1} if node.attrs.allowzero else {}
    ctx.emit("Reshape", [node.inputs[0], ctx.as_dtype(node.inputs[1], np.int64)],
             node.outputs, **extra)


@exports("range")
def _range(ctx, node) -> None:
    dtype = ctx.dtype(node.outputs[0])
    scalars = [ctx.emit("Reshape", [ctx.as_dtype(v, dtype), ctx.ints([])])[0]
               for v in node.inputs]
    ctx.emit("Range", scalars, node.outputs)


@exports("zeros", "ones", "full", "eye", "arange", "linspace")
def _created(ctx, node) -> None:
    """Ops with no inputs whose attributes fix their value: that value, as a constant."""
    from onnx import numpy_helper
    value = np.asarray(node.op.impl(**vars(node.attrs)))
    ctx.emit("Constant", [], node.outputs, value=numpy_helper.from_array(
        value.astype(ctx.dtype(node.outputs[0]), copy=False)))
