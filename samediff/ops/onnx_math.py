"""Table ops added for ONNX import (math family, see samediff/onnx/converters/math.py): bitwise
logic and shifts on integers, ``top_k`` / ``top_k_indices``, ``det`` and ``matrix_inverse``,
``round_half_even``.

* Bitwise ops and shifts are integer (and, for and/or/xor/not, bool) ops: non-differentiable.
  Shifts follow numpy: a shift by the bit width or more gives 0 (C leaves it undefined).
* ``top_k`` returns the ``k`` largest (or smallest) values along ``axis`` in order and
  ``top_k_indices`` their int64 indices; equal values come in index order (the lower index
  first), as ONNX's TopK requires. The gradient sends each value's back to its element.
* ``det`` and ``matrix_inverse`` act on the last two dims (``[..., M, M]``). ``det``'s gradient
  is ``g * det * inverse(x)^T`` (Jacobi's formula: it needs invertible matrices, and
  ``matrix_inverse`` raises on a singular one), ``matrix_inverse``'s ``-Y^T g Y^T``.
* ``round_half_even`` rounds halves to the even neighbour (IEEE / numpy ``rint``), ONNX's
  ``Round``; ``round`` rounds them away from zero (ND4J). Its gradient is zero.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .call import op
from .families import Attr, broadcast_shapes, normalize_axis, unary
from .registry import NONDIFF, REQUIRED, TensorType, define

# --- bitwise logic and shifts ------------------------------------------------------------------
# Integer-only, so they are not flagged ``elementwise``: the elementwise family's contract
# (tests/test_gradients_elementwise.py) is that every member takes float inputs, and these
# refuse them. Being library ops costs nothing: numpy's shifts (0 past the bit width, where C
# is undefined) and bool inputs would keep them out of fused kernels anyway.

def _bits_infer(types: list[TensorType], a: Any) -> TensorType:
    for t in types:
        if t.dtype.kind not in "biu":
            raise ValueError(f"bit operations take integer or bool inputs, got {t.dtype}")
    shape = broadcast_shapes(*(t.shape for t in types))
    dtype = np.result_type(*(np.empty(0, t.dtype) for t in types))
    return TensorType(shape, dtype)


def _bits(name: str, inputs: list[str], ufunc: np.ufunc, doc: str) -> None:
    define(name, inputs, _bits_infer, ufunc, namespace="math", grad=NONDIFF, doc=doc)


_bits("bitwise_and", ["x", "y"], np.bitwise_and,
      "Elementwise bitwise and of integers (logical and of bools), broadcasting.")
_bits("bitwise_or", ["x", "y"], np.bitwise_or,
      "Elementwise bitwise or of integers (logical or of bools), broadcasting.")
_bits("bitwise_xor", ["x", "y"], np.bitwise_xor,
      "Elementwise bitwise exclusive or of integers (logical xor of bools), broadcasting.")
_bits("bitwise_not", ["x"], np.invert,
      "Elementwise bitwise complement of integers (logical not of bools).")
_bits("left_shift", ["x", "y"], np.left_shift,
      "Elementwise ``x << y`` of integers (bits shifted out are lost; a shift by the bit "
      "width or more gives 0), broadcasting.")
_bits("right_shift", ["x", "y"], np.right_shift,
      "Elementwise ``x >> y`` of integers (arithmetic for signed ones; a shift by the bit "
      "width or more gives 0, or -1 for negative values), broadcasting.")


def _rint(x):
    # integers are already whole: kept in their dtype (numpy's rint would make them float64)
    x = np.asarray(x)
    return np.array(x, copy=True) if x.dtype.kind in "iub" else np.rint(x)


unary("round_half_even", _rint, unfused="no kernel expression yet: rint in every kernel "
      "dtype", grad=lambda x, y, g, a: op.zeros_like(g),
      doc="Elementwise rounding to the nearest integer, halves to the even one (ONNX's Round, "
          "numpy's rint).")


# --- top_k ---------------------------------------------------------------------------------------
# Two ops: the values (differentiable) and their int64 indices (not), so each op has one result
# dtype (the sample suites' contract). ONNX's TopK records both, so the sort runs twice.

def _top_k_shape(x: TensorType, a: Any) -> tuple[int, ...]:
    axis = normalize_axis(a.axis, x.rank, "axis")
    n = x.shape[axis]
    if a.k < 0 or (n >= 0 and a.k > n):
        raise ValueError(f"k={a.k} is out of range for dim {axis} of size {n}")
    return x.shape[:axis] + (a.k,) + x.shape[axis + 1:]


def _top_k_order(x, *, k, axis, largest) -> np.ndarray:
    x = np.asarray(x)
    axis = normalize_axis(axis, x.ndim, "axis")
    if largest:
        # a stable ascending sort of the reversed axis, read backwards, is descending with
        # equal values in increasing index order (no negation: exact for unsigned ints too)
        n = x.shape[axis]
        order = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
        order = (n - 1) - np.flip(order, axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    return np.take(order, np.arange(k), axis=axis).astype(np.int64)


def _top_k(x, *, k, axis, largest):
    return np.take_along_axis(np.asarray(x), _top_k_order(x, k=k, axis=axis, largest=largest),
                              axis=normalize_axis(axis, np.ndim(x), "axis"))


def _top_k_grad(x: Any, y: Any, g: Any, a: Any) -> Any:
    # values[..., j, ...] = x[..., indices[..., j, ...], ...]: each value's gradient goes back
    # to its source element (one_hot over a new dim after axis, summed over the k picks)
    axis = normalize_axis(a.axis, len(x.shape), "axis")
    n = x.shape[axis]
    if n < 0:
        raise ValueError("top_k's gradient needs the size of its axis")
    picks = op.top_k_indices(x, k=a.k, axis=a.axis, largest=a.largest)
    hot = op.one_hot(picks, depth=n, axis=axis + 1, dtype=g.dtype)
    return op.sum(hot * op.expand_dims(g, axis=axis + 1), dims=(axis,))


_TOP_K_ATTRS = {"k": (Attr.INT, REQUIRED), "axis": (Attr.INT, -1), "largest": (Attr.BOOL, True)}
define("top_k", ["x"], lambda t, a: TensorType(_top_k_shape(t[0], a), t[0].dtype), _top_k,
       attrs=_TOP_K_ATTRS, namespace="math",
       grad=lambda ins, outs, gs, a: [_top_k_grad(ins[0], outs[0], gs[0], a)],
       doc="The ``k`` largest (``largest=False``: smallest) values along ``axis``, in order; "
           "equal values in index order (the lower index first). ``top_k_indices`` gives "
           "where they are.")
define("top_k_indices", ["x"],
       lambda t, a: TensorType(_top_k_shape(t[0], a), np.dtype(np.int64)), _top_k_order,
       attrs=_TOP_K_ATTRS, namespace="math", grad=NONDIFF,
       doc="The int64 indices along ``axis`` of ``top_k``'s values (the lower index first "
           "among equal values).")


# --- det / matrix_inverse ------------------------------------------------------------------------

def _square_check(x: TensorType, name: str) -> None:
    if x.rank < 2:
        raise ValueError(f"{name} needs matrices: an input of rank >= 2, got rank {x.rank}")
    m, n = x.shape[-2:]
    if m >= 0 and n >= 0 and m != n:
        raise ValueError(f"{name} needs square matrices, got {m}x{n}")
    if x.dtype.kind not in "fc":
        raise ValueError(f"{name} needs a float input, got {x.dtype}")


def _det_infer(types: list[TensorType], a: Any) -> TensorType:
    (x,) = types
    _square_check(x, "det")
    return TensorType(x.shape[:-2], x.dtype)


def _inverse_infer(types: list[TensorType], a: Any) -> TensorType:
    (x,) = types
    _square_check(x, "matrix_inverse")
    return TensorType(x.shape, x.dtype)


def _det(x):
    x = np.asarray(x)
    return np.asarray(np.linalg.det(x), dtype=x.dtype)


def _inverse(x):
    x = np.asarray(x)
    return np.asarray(np.linalg.inv(x), dtype=x.dtype)


def _det_grad(x: Any, y: Any, g: Any, a: Any) -> Any:
    # d det(X) / dX = det(X) * X^-T (Jacobi's formula)
    rank = len(x.shape)
    scale = op.expand_dims(op.expand_dims(g * y, axis=-1), axis=-1)
    swap = tuple(range(rank - 2)) + (rank - 1, rank - 2)
    return scale * op.permute(op.matrix_inverse(x), dims=swap)


def _inverse_grad(x: Any, y: Any, g: Any, a: Any) -> Any:
    # d(X^-1) = -X^-1 dX X^-1, so the adjoint is -Y^T g Y^T
    return -op.matmul(op.matmul(y, g, transpose_x=True), y, transpose_y=True)


define("det", ["x"], _det_infer, _det, namespace="linalg",
       grad=lambda ins, outs, gs, a: [_det_grad(ins[0], outs[0], gs[0], a)],
       doc="Determinant of each matrix of ``x`` (``[..., M, M]`` -> ``[...]``).")
define("matrix_inverse", ["x"], _inverse_infer, _inverse, namespace="linalg",
       grad=lambda ins, outs, gs, a: [_inverse_grad(ins[0], outs[0], gs[0], a)],
       doc="Inverse of each matrix of ``x`` (``[..., M, M]``); a singular matrix raises.")
