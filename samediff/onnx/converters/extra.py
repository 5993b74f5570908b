"""ONNX converters for newer standalone ops: BitCast (the table's ``bitcast``), SwiGLU,
TensorScatter (the KV-cache update) and FlexAttention (``ai.onnx.preview``), the last three
composed of table ops so they are differentiable, traced and compiled like any other graph.
"""
from __future__ import annotations

import math

import numpy as np

from ..dtypes import np_dtype
from ..table import OnnxImportError, converter


def _c(value, dtype) -> np.ndarray:
    return np.asarray(value, dtype)


# --- BitCast ------------------------------------------------------------------------------------

@converter("BitCast", since=26)
def _bitcast(node):
    x = node.input(0)
    to = node.attr("to")
    if to is None:
        raise node.fail("BitCast needs the 'to' attribute (the target element type)")
    try:
        target = np_dtype(int(to))
    except OnnxImportError:
        raise node.fail(f"BitCast to ONNX element type {to} is not supported: it has no "
                        f"numpy dtype in nd4py") from None
    source = node.dtype(x)
    if target.kind in "OUS" or source.kind in "OUS":
        raise node.fail("BitCast from or to strings is not defined")
    if target.itemsize != source.itemsize:
        raise node.fail(f"BitCast needs types of one bit width: {source} has "
                        f"{source.itemsize * 8} bits, {target} {target.itemsize * 8}")
    if target == source:
        return node.op("identity", x)
    return node.op("bitcast", x, dtype=target)


# --- SwiGLU ------------------------------------------------------------------------------------

@converter("SwiGLU", since=28)
def _swiglu(node):
    a, b = node.input(0), node.input(1)
    sa, sb = node.shape(a), node.shape(b)
    if len(sa) != len(sb) or any(x >= 0 and y >= 0 and x != y for x, y in zip(sa, sb)):
        raise node.fail(f"SwiGLU needs A and B of one shape (no broadcasting), got "
                        f"{list(sa)} and {list(sb)}")
    alpha = float(node.attr("alpha", 1.0))
    dtype = node.dtype(a)
    if alpha == 1.0:
        gate = node.op("swish", a)
    else:
        gate = node.op("mul", a, node.op("sigmoid", node.op("mul", a, _c(alpha, dtype))))
    return node.op("mul", gate, b)


# --- TensorScatter ------------------------------------------------------------------------------

@converter("TensorScatter", since=24)
def _tensor_scatter(node):
    """Rows of ``update`` written into a copy of the cache at ``write_indices[b] + s`` along
    the sequence axis: with both flattened to rows (prefix dims x sequence, trailing dims),
    one ``scatter_update`` whose row indices are computed from the run-time write indices."""
    past, update, where = node.input(0), node.input(1), node.input(2)
    mode = node.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise node.fail(f"mode must be 'linear' or 'circular', got {mode!r}")
    shape, ushape = tuple(node.shape(past)), tuple(node.shape(update))
    rank = len(shape)
    axis = int(node.attr("axis", -2))
    if not -rank <= axis < rank or axis % rank == 0:
        raise node.fail(f"axis {axis} must name a dim of the rank-{rank} cache other than "
                        f"the batch dim 0")
    axis %= rank
    if any(d < 0 for d in shape + ushape):
        raise node.fail(f"TensorScatter needs static cache and update shapes (the row "
                        f"arithmetic uses them), got {list(shape)} and {list(ushape)}")
    if len(ushape) != rank or any(shape[i] != ushape[i] for i in range(rank) if i != axis) \
            or ushape[axis] > shape[axis]:
        raise node.fail(f"update {list(ushape)} must match the cache {list(shape)} except "
                        f"along axis {axis}, where it may not be longer")
    batch, length, steps = shape[0], shape[axis], ushape[axis]
    pre = math.prod(shape[:axis])     # prefix rows (batch included)
    post = math.prod(shape[axis + 1:])
    batch_of = np.arange(pre, dtype=np.int64) // (pre // batch)  # each prefix row's batch
    if where is None:
        start = np.zeros((pre, 1), np.int64)
    else:
        start = node.op("reshape", node.op("gather", node.op("cast", where, dtype=np.int64),
                                           batch_of, axis=0), shape=(pre, 1))
    dst = node.op("add", start, np.arange(steps, dtype=np.int64).reshape(1, steps))
    if mode == "circular":
        dst = node.op("floor_mod", dst, _c(length, np.int64))
    rows = node.op("add", dst, (np.arange(pre, dtype=np.int64) * length).reshape(pre, 1))
    flat = node.op("reshape", past, shape=(pre * length, post))
    flat = node.op("scatter_update", flat, node.op("reshape", rows, shape=(pre * steps,)),
                   node.op("reshape", update, shape=(pre * steps, post)))
    return node.op("reshape", flat, shape=shape)


# --- FlexAttention (ai.onnx.preview) ------------------------------------------------------------

def _modifier(node, name: str, value):
    """Apply graph attribute ``name`` (one rank-4 input, one output) to ``value``."""
    body = node.attr(name)
    if body is None:
        return value
    if len(body.input) != 1 or len(body.output) != 1:
        raise node.fail(f"{name} must take one input and give one output, it has "
                        f"{len(body.input)} and {len(body.output)}")
    (out,) = node.import_body(body, [value])
    if node.dtype(out) != node.dtype(value):  # (ONNX reads the result in the same precision)
        out = node.op("cast", out, dtype=node.dtype(value))
    return out


@converter("FlexAttention", since=1, domain="ai.onnx.preview")
def _flex_attention(node):
    q, k, v = node.input(0), node.input(1), node.input(2)
    if node.rank(q) != 4 or node.rank(k) != 4 or node.rank(v) != 4:
        raise node.fail(f"FlexAttention needs rank-4 Q, K, V, got ranks {node.rank(q)}, "
                        f"{node.rank(k)}, {node.rank(v)}")
    dtype = node.dtype(q)
    qh, kh, e = node.shape(q)[1], node.shape(k)[1], node.shape(q)[3]
    if qh != kh:  # GQA: query head h reads key/value head h // (qh / kh)
        if qh < 0 or kh <= 0 or qh % kh:
            raise node.fail(f"{qh} query heads do not group over {kh} key/value heads (both "
                            f"must be known at import, the first a multiple of the second)")
        k = node.op("repeat", k, repeats=qh // kh, axis=1)
        v = node.op("repeat", v, repeats=qh // kh, axis=1)
    scale = node.attr("scale")
    if scale is None:
        if e < 0:
            raise node.fail("the default scale needs the head size (Q's last dim) at import")
        scale = 1.0 / math.sqrt(e)
    # Q and K each scaled by sqrt(scale) (computed in float32, then in Q's dtype), as ONNX
    root = _c(np.sqrt(np.float32(scale)), dtype)
    scores = node.op("matmul", node.op("mul", q, root), node.op("mul", k, root),
                     transpose_y=True)
    precision = node.attr("softmax_precision")
    if precision is not None:
        compute = np_dtype(int(precision))
        if compute.kind != "f":
            raise node.fail(f"softmax_precision must be a float type, got {compute}")
    elif dtype.kind != "f":
        raise node.fail(f"softmax_precision must be given for {dtype} inputs")
    else:
        compute = np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    if compute != dtype:
        scores = node.op("cast", scores, dtype=compute)
    scores = _modifier(node, "score_mod", scores)
    probs = _modifier(node, "prob_mod", node.op("softmax", scores, dim=-1))
    if node.dtype(v) != compute:
        v = node.op("cast", v, dtype=compute)
    y = node.op("matmul", probs, v)
    return node.op("cast", y, dtype=dtype) if compute != dtype else y
