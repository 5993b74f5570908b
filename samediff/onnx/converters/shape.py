"""ONNX shape ops: Shape, Size, Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat,
Gather, Expand, Constant."""
from __future__ import annotations

import math

import numpy as np

from ..table import converter


@converter("Constant", since=(1, 12))
def _constant(node):
    for name in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if node.has_attr(name):
            value = node.attr(name)
            dtype = np.float32 if "float" in name else (np.int64 if "int" in name else None)
            return np.asarray(value, dtype=dtype)
    raise node.fail("a Constant of sparse or string values is not supported")


@converter("Shape", since=(1, 15))
def _shape(node):
    x = node.input(0)
    shape = node.shape(x)
    rank = len(shape)
    start, end = node.attr("start", 0), node.attr("end", rank)
    start, end = (max(0, min(rank, v + rank if v < 0 else v)) for v in (start, end))
    dims = shape[start:end]
    if all(d >= 0 for d in dims):
        return np.asarray(dims, np.int64)
    # a run-time dim (a dynamic batch): the shape is read when the graph runs
    full = node.op("shape_of", x)
    if (start, end) == (0, rank):
        return full
    return node.op("slice", full, begin=(start,), size=(max(end - start, 0),))


def _partial_ints(node, value):
    """``(values, known)`` of a 1-D integer run-time ``value`` as far as import knows it,
    following the exporter's shape arithmetic: ``shape_of(t)`` is known where ``t``'s dims
    are static, a ``concat`` where its pieces are (constants, or such shapes); any other
    piece is unknown. None when ``value`` is not a ``concat`` or ``shape_of`` of a
    ``SameDiff`` graph (values inside control-flow bodies are not followed)."""
    graph = node.graph_of(value)
    if graph is None or len(value.shape) != 1:
        return None

    def piece(name):
        var = graph.vars[name]
        n = var.ttype.shape[0] if len(var.ttype.shape) == 1 else -1
        if var.value is not None and var.producer is None:  # a constant
            v = np.asarray(var.value).reshape(-1)
            return v.astype(np.int64), np.ones(len(v), bool)
        if var.producer is not None and var.producer.op.name == "shape_of":
            dims = np.asarray(graph.vars[var.producer.inputs[0]].ttype.shape, np.int64)
            return dims, dims >= 0
        if n < 0:
            return None
        return np.full(n, -1, np.int64), np.zeros(n, bool)
    producer = graph.vars[value.name].producer
    if producer is None or producer.op.name not in ("concat", "shape_of"):
        return None
    if producer.op.name == "shape_of":
        return piece(value.name)
    pieces = [piece(n) for n in producer.inputs]
    if any(p is None for p in pieces):
        return None
    return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])


def _static_target(node, x, target, allowzero):
    """A run-time Reshape target as a static one, when import knows every element but one,
    and the shape of ``x`` tells no more: ``Concat(Unsqueeze(Gather(Shape(x), 0)), [C],
    [H], [W])`` -- PyTorch's ``x.view(x.size(0), ...)`` -- is ``reshape(x, (-1, C, H, W))``:
    the one run-time element (the batch) is what the element count leaves, since a valid
    target matches it. Keeps the static dims in the graph's types, so later Shape arithmetic
    on them folds. None when more than one element is run-time or -1, or one is 0 (the
    element count cannot then decide the -1)."""
    partial = _partial_ints(node, target)
    if partial is None:
        return None
    values, known = partial
    shape = node.shape(x)
    dims = []
    for i, (v, k) in enumerate(zip(values, known)):
        if k and v == 0 and not allowzero:
            v, k = (shape[i], shape[i] >= 0) if i < len(shape) else (0, False)
        dims.append(int(v) if k else -1)
    if sum(d < 0 for d in dims) > 1 or any(d == 0 for d in dims) or \
            any(d < -1 for d in dims):
        return None
    return tuple(dims)


@converter("Size")
def _size(node):
    x = node.input(0)
    shape = node.shape(x)
    if all(d >= 0 for d in shape):
        return np.asarray(math.prod(shape), np.int64)
    return node.op("prod", node.op("shape_of", x))  # (read when the graph runs)


@converter("Reshape", since=(1, 5))
def _reshape(node):
    x = node.input(0)
    allowzero = node.attr("allowzero", 0)
    if node.opset >= 5 and not isinstance(node.input(1), np.ndarray):
        static = _static_target(node, x, node.input(1), allowzero)
        if static is not None:
            return node.op("reshape", x, shape=static)
        # a target computed when the graph runs (from a run-time Shape): reshape then
        return node.op("reshape_to", x, node.input(1), allowzero=bool(allowzero))
    target = (node.attr("shape") if node.opset < 5 else node.static_ints(1, "shape"))
    shape = node.shape(x)
    dims = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            dims.append(shape[i])
        else:
            dims.append(int(d))
    if sum(d < 0 for d in dims) > 1:  # a copied run-time dim and a -1: resolved at run time
        return node.op("reshape_to", x, np.asarray(target, np.int64),
                       allowzero=bool(allowzero))
    return node.op("reshape", x, shape=tuple(dims))


@converter("Flatten", since=(1, 9, 11, 13))
def _flatten(node):
    x = node.input(0)
    shape = node.shape(x)
    axis = node.attr("axis", 1)
    axis = axis + len(shape) if axis < 0 else axis
    lead = shape[:axis]
    if any(d < 0 for d in shape[axis:]):
        if any(d < 0 for d in lead):
            raise node.fail("flattening with run-time dims on both sides is not supported")
        return node.op("reshape", x, shape=(math.prod(lead), -1))
    return node.op("reshape", x, shape=(-1 if any(d < 0 for d in lead) else math.prod(lead),
                                        math.prod(shape[axis:])))


@converter("Transpose")
def _transpose(node):
    x = node.input(0)
    perm = node.attr("perm") or list(range(node.rank(x)))[::-1]
    return node.op("permute", x, dims=tuple(int(p) for p in perm))


def _axes(node, index: int, attr_until: int):
    if node.opset < attr_until:
        axes = node.attr("axes")
        return None if axes is None else tuple(int(a) for a in axes)
    return node.static_ints(index, "axes")


@converter("Squeeze", since=(1, 11, 13))
def _squeeze(node):
    x = node.input(0)
    axes = _axes(node, 1, 13)
    rank = node.rank(x)
    if axes is None:
        shape = node.shape(x)
        if any(d < 0 for d in shape):
            raise node.fail("Squeeze without axes over run-time dims is not supported")
        axes = tuple(i for i, d in enumerate(shape) if d == 1)
    axes = tuple(sorted(a + rank if a < 0 else a for a in axes))
    return node.op("squeeze", x, axis=axes) if axes else node.op("identity", x)


@converter("Unsqueeze", since=(1, 11, 13))
def _unsqueeze(node):
    x = node.input(0)
    axes = _axes(node, 1, 13)
    rank = node.rank(x) + len(axes)
    axes = sorted(a + rank if a < 0 else a for a in axes)
    shape = list(node.shape(x))
    for a in axes:
        shape.insert(a, 1)
    if sum(d < 0 for d in shape) <= 1:
        return node.op("reshape", x, shape=tuple(shape))
    out = x
    for a in axes:
        out = node.op("expand_dims", out, axis=a)
    return out


@converter("Concat", since=(1, 4, 11, 13))
def _concat(node):
    values = [v for v in node.inputs() if v is not None]
    return node.op("concat", *values, axis=int(node.attr("axis", 0)))


def _known_dims(node, value):
    """The dims of ``value`` when it is ``shape_of(t)`` (a ``Shape`` of a tensor with a
    run-time dim) -- ``t``'s static shape, -1 where only run time knows -- else None."""
    graph = node.graph_of(value)
    if graph is None:  # (values inside control-flow bodies are not followed)
        return None
    producer = graph.vars[value.name].producer
    if producer is None or producer.op.name != "shape_of":
        return None
    return np.asarray(graph.vars[producer.inputs[0]].ttype.shape, np.int64)


@converter("Gather", since=(1, 11, 13))
def _gather(node):
    x, idx = node.input(0), node.input(1)
    axis = int(node.attr("axis", 0))
    rank = node.rank(x)
    axis = axis + rank if axis < 0 else axis
    size = node.shape(x)[axis]
    dims = _known_dims(node, x) if isinstance(idx, np.ndarray) else None
    if dims is not None and idx.dtype.kind in "iu" and np.all((idx >= -size) & (idx < size)):
        # Shape -> Gather picking dims known at import (the channels, not the run-time
        # batch): a constant, so what PyTorch's exporter builds on it folds too -- its
        # ``squeeze(1)`` is If(Equal(Gather(Shape(x), 1), 1), Squeeze, Identity), whose
        # branches differ in rank and so cannot both stay
        picked = np.asarray(dims[np.where(idx < 0, idx + size, idx)])  # (0-d: an array)
        if np.all(picked >= 0):
            return picked
    if isinstance(idx, np.ndarray) and size >= 0:
        idx = np.where(idx < 0, idx + size, idx).astype(np.int64)
    elif node.dtype(idx).kind != "u":  # negative indices count from the end
        itype = node.dtype(idx)
        dim = (np.asarray(size, itype) if size >= 0 else  # (a run-time dim: read it then)
               node.op("cast", node.op("gather", node.op("shape_of", x),
                                       np.asarray(axis, np.int64), axis=0), dtype=itype))
        neg = node.op("lt", idx, np.zeros((), itype))
        idx = node.op("where", neg, node.op("add", idx, dim), idx)
    return node.op("gather", x, idx, axis=axis)


@converter("Expand", since=8)
def _expand(node):
    x = node.input(0)
    if not isinstance(node.input(1), np.ndarray):  # a target computed at run time
        return node.op("expand_to", x, node.input(1))
    target = node.static_ints(1, "shape")
    shape = node.shape(x)
    rank = max(len(shape), len(target))
    full = (1,) * (rank - len(shape)) + tuple(shape)
    target = (1,) * (rank - len(target)) + tuple(target)
    out = tuple(max(a, b) if a >= 0 else (b if b != 1 else -1) for a, b in zip(full, target))
    if any(d < 0 for d in out):  # a run-time dim of x: broadcast when the graph runs
        return node.op("expand_to", x, np.asarray(target, np.int64))
    return node.op("broadcast_to", x, shape=out)
