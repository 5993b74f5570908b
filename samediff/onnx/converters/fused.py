"""Converters of the nodes the import's own rewrites make (``onnx/optimize.py``), in its
domain ``ai.nd4py``.

``MatMulAdd(X, W, B)`` is ``Add(MatMul(X, W), B)``: the table's ``linear`` when ``W`` is 2-D,
``X`` of rank >= 2 and ``B`` a row of ``W``'s width, all of one float dtype (the bias then goes
with the product's halves); else the two ops as their own converters write them.

``ScaledDotProductAttention(Q, K^T, V, c)`` (attribute ``scale_op``: ``"Div"`` or ``"Mul"``)
is attention as the model wrote it: ``softmax(Q @ K^T (/ or *) c) @ V``, softmax over the last
axis. With float32/float64 operands of rank >= 2 and ``c`` a constant scalar of their dtype it
becomes the table's ``scaled_dot_product_attention`` on ``K`` (``K^T`` with its last two axes
swapped: a view) with scale ``1 / c`` or ``c``: the blocked kernel with its fused softmax,
whose output is laid out so that merging the heads is a view. Anything else is written back
as the four ops (matmul, div or mul, softmax, matmul), exactly as their own converters would.
"""
from __future__ import annotations

import numpy as np

from ..optimize import FUSED_DOMAIN
from ..table import converter


def _scalar(value: object, dtype: np.dtype) -> float | None:
    """``value`` as a float when it is a constant scalar of ``dtype``, else None."""
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype == dtype:
        return float(value.reshape(()))
    return None


@converter("ScaledDotProductAttention", domain=FUSED_DOMAIN)
def _attention(node):
    q, kt, v, c = node.input(0), node.input(1), node.input(2), node.input(3)
    divide = node.attr("scale_op") in ("Div", b"Div")
    dtype = node.dtype(q)
    constant = _scalar(c, dtype)
    if (dtype in (np.float32, np.float64) and node.dtype(kt) == node.dtype(v) == dtype
            and min(node.rank(q), node.rank(kt), node.rank(v)) >= 2
            and constant is not None and constant != 0.0 and np.isfinite(constant)):
        rank = node.rank(kt)
        k = node.op("permute", kt, dims=tuple(range(rank - 2)) + (rank - 1, rank - 2))
        return node.op("scaled_dot_product_attention", q, k, v, is_causal=False,
                       scale=1.0 / constant if divide else constant)
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
