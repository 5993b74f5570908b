"""Converters of the nodes the import's own rewrites make (``onnx/optimize.py``), in its
domain ``ai.nd4py``.

``MatMulAdd(X, W, B)`` is ``Add(MatMul(X, W), B)``: the table's ``linear`` when ``W`` is 2-D,
``X`` of rank >= 2 and ``B`` a row of ``W``'s width, all of one float dtype (the bias then goes
with the product's halves); else the two ops as their own converters write them.

``ScaledDotProductAttention(Q, K^T, V, c)`` (attribute ``scale_op``: ``"Div"`` or ``"Mul"``)
is attention as the model wrote it: ``softmax(Q @ K^T (/ or *) c) @ V``, softmax over the last
axis. With float32/float64 operands of rank >= 2 and ``c`` a constant scalar of their dtype
(that broadcasting does not grow the scores by, and whose scale is a normal number) it
becomes the table's ``scaled_dot_product_attention`` on ``K`` (``K^T`` with its last two axes
swapped: a view) with scale ``1 / c`` or ``c``: the blocked kernel with its fused softmax,
whose output is laid out so that merging the heads is a view. Anything else is written back
as the four ops (matmul, div or mul, softmax, matmul), exactly as their own converters would.
"""
from __future__ import annotations

import numpy as np

from ..optimize import FUSED_DOMAIN
from ..table import converter


def _scale(value: object, dtype: np.dtype, rank: int, divide: bool) -> float | None:
    """The attention scale ``1 / c`` (``divide``) or ``c`` when ``value`` (``c``) is a constant
    of ``dtype`` with one element and at most ``rank`` dims (more would grow the scores'
    shape), and the scale a normal number of ``dtype`` whose double stays finite (the kernel
    multiplies it by log2(e)); else None."""
    if not (isinstance(value, np.ndarray) and value.size == 1 and value.dtype == dtype
            and value.ndim <= rank):
        return None
    c = value.reshape(())
    with np.errstate(all="ignore"):
        scale = np.divide(dtype.type(1), c) if divide else c
    info = np.finfo(dtype)
    return float(scale) if info.tiny <= abs(scale) <= info.max / 2 else None


@converter("ScaledDotProductAttention", domain=FUSED_DOMAIN)
def _attention(node):
    q, kt, v, c = node.input(0), node.input(1), node.input(2), node.input(3)
    divide = node.attr("scale_op") in ("Div", b"Div")
    dtype = node.dtype(q)
    scale = _scale(c, dtype, max(node.rank(q), node.rank(kt)), divide)
    if (dtype in (np.float32, np.float64) and node.dtype(kt) == node.dtype(v) == dtype
            and min(node.rank(q), node.rank(kt), node.rank(v)) >= 2 and scale is not None):
        rank = node.rank(kt)
        k = node.op("permute", kt, dims=tuple(range(rank - 2)) + (rank - 1, rank - 2))
        return node.op("scaled_dot_product_attention", q, k, v, is_causal=False, scale=scale)
    scores = node.op("matmul", q, kt)
    scores = node.op("div" if divide else "mul", scores, c)
    probs = node.op("softmax", scores, dim=node.rank(scores) - 1)
    return node.op("matmul", probs, v)


@converter("MatMulAdd", domain=FUSED_DOMAIN)
def _matmul_add(node):
    x, w, b = node.input(0), node.input(1), node.input(2)
    dtype = node.dtype(x)
    if (dtype.kind == "f" and node.dtype(w) == node.dtype(b) == dtype and node.rank(x) >= 2
            and node.rank(w) == 2 and node.rank(b) == 1
            and node.shape(b)[0] == node.shape(w)[1] >= 0):
        return node.op("linear", x, w, b)
    return node.op("add", node.op("matmul", x, w), b)
