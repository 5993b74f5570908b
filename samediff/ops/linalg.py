"""Matrix products: matmul (ND4J ``mmul``), tensor_mmul (``tensordot``), dot and cross.

All products run through numpy's BLAS-backed ``matmul``/``tensordot``, except float products
big enough for a second thread: 2-D ones run on numpy's BLAS or on the private single-threaded
BLAS split over our helper thread, whichever was measured faster for their shape class on this
machine; batched ones on the private BLAS (``kernels.matmul``, ``kernels.routes``: why;
``explain()`` says which). No Python loops.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels import forksafe, lazy
from . import adjoints  # noqa: F401  (the rules use its broadcast_like and reduce_to_like)
from .call import op
from .families import (Attr, REQUIRED, broadcast_shapes, normalize_axis, normalize_dims,
                       probed_infer, reduce_shape)
from .registry import TensorType, define

M = lazy("matmul")  # the private-BLAS kernels (and Numba) load on the first matmul

Shape = tuple[int, ...]


def _swap_last2(shape: Shape) -> Shape:
    return shape[:-2] + (shape[-1], shape[-2]) if len(shape) >= 2 else shape


def matmul_shape(xs: Shape, ys: Shape, transpose_x: bool = False, transpose_y: bool = False,
                 transpose_result: bool = False) -> Shape:
    """Output shape of numpy ``matmul`` (batch dims broadcast, 1-D operands promoted and then
    dropped) after the optional transposes of the last two dims; -1 dims stay unknown."""
    if not xs or not ys:
        raise ValueError(f"operands must have rank >= 1, got shapes {tuple(xs)} and "
                         f"{tuple(ys)}; use mul to multiply by a scalar")
    tx, ty = (_swap_last2(xs) if transpose_x else xs), (_swap_last2(ys) if transpose_y else ys)
    x2 = (1,) + tx if len(tx) == 1 else tx
    y2 = ty + (1,) if len(ty) == 1 else ty
    kx, ky = x2[-1], y2[-2]
    if kx >= 0 and ky >= 0 and kx != ky:
        raise ValueError(f"inner dims differ: x of shape {tuple(xs)} has {kx} columns but y of "
                         f"shape {tuple(ys)} has {ky} rows (transpose_x={transpose_x}, "
                         f"transpose_y={transpose_y})")
    try:
        out = broadcast_shapes(x2[:-2], y2[:-2])
    except ValueError:
        raise ValueError(f"batch dims {x2[:-2]} of x (shape {tuple(xs)}) and {y2[:-2]} of y "
                         f"(shape {tuple(ys)}) cannot be broadcast together") from None
    out += ((x2[-2],) if len(tx) >= 2 else ()) + ((y2[-1],) if len(ty) >= 2 else ())
    return _swap_last2(out) if transpose_result else out


def _t(a: np.ndarray) -> np.ndarray:
    """The last two dims swapped (``a.T`` when 2-D: no Python-level call)."""
    return a.T if a.ndim == 2 else a.swapaxes(-1, -2)


@forksafe.guarded  # a BLAS GEMM (ours or numpy's): a fork waits for it
def _matmul(x, y, *, transpose_x, transpose_y, transpose_result):
    # a plan's step: every microsecond of Python here is paid on every matmul of every step
    if type(x) is not np.ndarray:
        x = np.asarray(x)
    if type(y) is not np.ndarray:
        y = np.asarray(y)
    shapes = x.shape, y.shape
    if transpose_x and x.ndim >= 2:
        x = _t(x)
    if transpose_y and y.ndim >= 2:
        y = _t(y)
    try:
        out = M.routed(x, y)
        if out is None:
            out = np.matmul(x, y)
    except ValueError:  # numpy's own message names neither shape: say which and why
        try:
            matmul_shape(*shapes, transpose_x, transpose_y)
        except ValueError as exc:
            raise ValueError(f"matmul: {exc}") from None
        raise
    return _t(out) if transpose_result and out.ndim >= 2 else out


def _operand_shapes(types: Any, attrs: Any) -> tuple | None:
    """(x's shape, y's shape) as the product sees them (transposes applied), or None when
    the static types are not a float product of matrices or stacks."""
    (x, y) = types
    if x.dtype != y.dtype or len(x.shape) < 2 or len(y.shape) < 2:
        return None
    xs = _swap_last2(tuple(x.shape)) if attrs.transpose_x else tuple(x.shape)
    ys = _swap_last2(tuple(y.shape)) if attrs.transpose_y else tuple(y.shape)
    return xs, ys


def _matmul_route(types: Any, attrs: Any) -> str:
    """The route a matmul of these static types takes (``explain()``), or ``""``."""
    shapes = _operand_shapes(types, attrs)
    return "" if shapes is None else M.describe_route(*shapes, types[0].dtype)


def _matmul_warm(types: Any, attrs: Any) -> tuple:
    """The kernels-layer warm-ups of a matmul at these static types (``OpDef.warm``)."""
    shapes = _operand_shapes(types, attrs)
    return () if shapes is None else M.warmups(*shapes, types[0].dtype)


# --- gradient rules: given with each op (grad=), written with table ops (call.op) -------------

def _swap_last2_of(t: Any) -> Any:
    n = len(t.shape)
    return op.permute(t, dims=(*range(n - 2), n - 1, n - 2))


def matmul_grads(x: Any, y: Any, g: Any, tx: bool = False, ty: bool = False,
                 tr: bool = False) -> tuple[Any, Any]:
    """Gradients of ``matmul(x, y, transpose_x=tx, transpose_y=ty, transpose_result=tr)``.

    With ``A = op(x)``, ``B = op(y)`` and ``C = A @ B``: ``dA = G B^T``, ``dB = A^T G``; the
    transposes are folded into matmul's flags. 1-D operands are promoted like numpy (x to a
    row, y to a column) and the added dim is squeezed again; broadcast batch dims are summed by
    the engine."""
    if tr and len(g.shape) >= 2:  # numpy semantics: the result transpose needs rank >= 2
        g = _swap_last2_of(g)
    x1, y1 = len(x.shape) == 1, len(y.shape) == 1
    if x1:
        x, tx, g = op.expand_dims(x, axis=0), False, op.expand_dims(g, axis=-1 if y1 else -2)
    if y1:
        y, ty, g = op.expand_dims(y, axis=-1), False, op.expand_dims(g, axis=-1)
    dx = (op.matmul(y, g, transpose_x=ty, transpose_y=True) if tx
          else op.matmul(g, y, transpose_y=not ty))
    dy = _stack_times_matrix_dy(x, y, g, tx, ty)
    if dy is None:
        dy = (op.matmul(g, x, transpose_x=True, transpose_y=tx) if ty
              else op.matmul(x, g, transpose_x=not tx))
    if x1:
        dx = op.squeeze(dx, axis=(-2,))
    if y1:
        dy = op.squeeze(dy, axis=(-1,))
    return dx, dy


def _stack_times_matrix_dy(x: Any, y: Any, g: Any, tx: bool, ty: bool) -> Any:
    """The matrix's gradient when a stack ``x [..., m, k]`` multiplies one matrix ``y`` (a
    dense layer over ``[..., in]``): one GEMM over every row of the stack, ``x2^T g2`` with
    ``x2 = x.reshape(-1, k)``, ``g2 = g.reshape(-1, n)`` -- not a product per leading index
    then a sum over them (W9's four [8, 128, 256] weights: 4.5 -> ~1 ms per step). None when
    it does not apply (or the sizes are not known)."""
    if len(y.shape) != 2 or len(x.shape) <= 2 or tx:
        return None
    k, n = x.shape[-1], g.shape[-1]
    if k < 0 or n < 0:
        return None
    x2, g2 = op.reshape(x, shape=(-1, k)), op.reshape(g, shape=(-1, n))
    return op.matmul(g2, x2, transpose_x=True) if ty else op.matmul(x2, g2, transpose_x=True)


_MM_ATTRS = {"transpose_x": (Attr.BOOL, False), "transpose_y": (Attr.BOOL, False),
             "transpose_result": (Attr.BOOL, False)}
define("matmul", ["x", "y"],
       probed_infer("matmul", lambda xs, ys, a: matmul_shape(
           xs, ys, a.transpose_x, a.transpose_y, a.transpose_result)),
       _matmul, attrs=_MM_ATTRS, namespace="base", route=_matmul_route, warm=_matmul_warm,
       grad=lambda ins, outs, gs, a: list(matmul_grads(
           ins[0], ins[1], gs[0], a.transpose_x, a.transpose_y, a.transpose_result)),
       doc="Matrix product with numpy ``matmul`` semantics (batch dims broadcast, 1-D "
           "operands allowed); the transposes swap the last two dims.")


# --- tensor_mmul ------------------------------------------------------------------------------

def _axes(dims: tuple[int, ...], rank: int, what: str) -> tuple[int, ...]:
    """Non-negative axes in the given order (pairing with the other operand matters)."""
    out = tuple(normalize_axis(d, rank, what) for d in dims)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated dim in {what}={tuple(dims)}")
    return out


def tensor_mmul_shape(xs: Shape, ys: Shape, a) -> Shape:
    if len(a.dims_x) != len(a.dims_y):
        raise ValueError(f"dims_x={a.dims_x} and dims_y={a.dims_y} must pair up (same length)")
    ax, ay = _axes(a.dims_x, len(xs), "dims_x"), _axes(a.dims_y, len(ys), "dims_y")
    for i, j in zip(ax, ay):
        if xs[i] >= 0 and ys[j] >= 0 and xs[i] != ys[j]:
            raise ValueError(f"contracted dims differ: x dim {i} has size {xs[i]} but y dim {j} "
                             f"has size {ys[j]} (shapes {tuple(xs)} and {tuple(ys)})")
    return (tuple(d for i, d in enumerate(xs) if i not in ax)
            + tuple(d for j, d in enumerate(ys) if j not in ay))


@forksafe.guarded
def _tensor_mmul(x, y, *, dims_x, dims_y):
    return np.tensordot(x, y, axes=(list(dims_x), list(dims_y)))


def _tensor_mmul_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    """Contract ``g`` with the other operand over its free dims, then permute the result (free
    dims first, contracted dims in ascending order of the other operand) back into place."""
    x, y = ins
    g, rx, ry = gs[0], len(x.shape), len(y.shape)
    ax = [normalize_axis(d, rx) for d in a.dims_x]
    ay = [normalize_axis(d, ry) for d in a.dims_y]
    fx = [i for i in range(rx) if i not in ax]
    fy = [j for j in range(ry) if j not in ay]
    dx = op.tensor_mmul(g, y, dims_x=tuple(range(len(fx), len(fx) + len(fy))), dims_y=tuple(fy))
    dy = op.tensor_mmul(x, g, dims_x=tuple(fx), dims_y=tuple(range(len(fx))))
    perm_x = [fx.index(i) if i in fx else len(fx) + sorted(ay).index(ay[ax.index(i)])
              for i in range(rx)]
    perm_y = [len(ax) + fy.index(j) if j in fy else sorted(ax).index(ax[ay.index(j)])
              for j in range(ry)]
    return [_permuted(dx, perm_x), _permuted(dy, perm_y)]


def _permuted(t: Any, perm: list) -> Any:
    return t if perm == sorted(perm) else op.permute(t, dims=tuple(perm))


# An outer product (no contracted dims) works for any probe shapes and has the same dtype rule.
define("tensor_mmul", ["x", "y"],
       probed_infer("tensor_mmul", tensor_mmul_shape, (("dims_x", ()), ("dims_y", ()))),
       _tensor_mmul, attrs={"dims_x": (Attr.INTS, REQUIRED), "dims_y": (Attr.INTS, REQUIRED)},
       namespace="linalg",
       grad=_tensor_mmul_grad,
       doc="Tensor contraction ``numpy.tensordot(x, y, axes=(dims_x, dims_y))``: x's free "
           "dims, then y's free dims.")


# --- dot --------------------------------------------------------------------------------------

def _dot(x, y, *, dims):
    return np.sum(np.multiply(x, y), axis=dims)


def _dot_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    x, y = ins
    g = gs[0]
    if a.dims is not None:  # restore the reduced dims as size 1 (dims of the broadcast shape)
        for d in normalize_dims(a.dims, max(len(x.shape), len(y.shape))):
            g = op.expand_dims(g, axis=d)
    # a reduced dim where the other operand has size 1 must still get x's size: broadcast
    return [op.broadcast_like(g * y, x), op.broadcast_like(g * x, y)]


define("dot", ["x", "y"],
       probed_infer("dot", lambda xs, ys, a: reduce_shape(broadcast_shapes(xs, ys), a.dims, False),
                    (("dims", None),)),
       _dot, attrs={"dims": (Attr.DIMS, None)}, namespace="linalg",
       grad=_dot_grad,
       doc="``sum(x * y)`` over ``dims`` after broadcasting (ND4J semantics; dims=None "
           "reduces everything to a scalar).")


# --- cross ------------------------------------------------------------------------------------

def _cross_infer(types: list[TensorType], a) -> TensorType:
    x, y = types
    for what, t in (("a", x), ("b", y)):
        if t.rank == 0 or t.shape[-1] not in (3, -1):
            raise ValueError(f"cross needs 3-vectors along the last dim; {what} has shape "
                             f"{tuple(t.shape)} (last dim must be 3)")
        if t.dtype.kind not in "iuf":
            raise ValueError(f"cross needs int or float operands; {what} is {t.dtype}")
    try:
        shape = broadcast_shapes(x.shape, y.shape)
    except ValueError:
        raise ValueError(f"cross: the leading dims of a (shape {tuple(x.shape)}) and b (shape "
                         f"{tuple(y.shape)}) cannot be broadcast together") from None
    # numpy's cross is products and differences of the operands: their promoted dtype
    return TensorType(shape[:-1] + (3,), np.result_type(x.dtype, y.dtype))


def _cross_grad(ins: list, outs: list, gs: list, a) -> list:
    # d/da sum(g . (a x b)) = b x g and d/db = g x a (the triple product is cyclic); summed
    # back over the dims each operand was broadcast along
    x, y = ins
    g = gs[0]
    return [op.reduce_to_like(op.cross(y, g), x), op.reduce_to_like(op.cross(g, x), y)]


define("cross", ["a", "b"], _cross_infer, lambda a, b: np.cross(a, b, axis=-1),
       namespace="math", grad=_cross_grad,
       doc="Cross product of 3-vectors along the last dim (leading dims broadcast), ND4J's "
           "``sd.math.cross(a, b)``: ``[a1*b2 - a2*b1, a2*b0 - a0*b2, a0*b1 - a1*b0]``.")


# --- tril / triu: the lower / upper triangle of the last two dims ---------------------------------

def _triangle_infer(types: list[TensorType], a: Any) -> TensorType:
    if len(types[0].shape) < 2:
        raise ValueError(f"needs a matrix (rank >= 2: the last two dims), got {types[0]}")
    return TensorType(types[0].shape, types[0].dtype)


for _name, _fn, _keeps in (("tril", np.tril, "on or below"), ("triu", np.triu, "on or above")):
    define(_name, ["x"], _triangle_infer,
           (lambda fn: lambda x, *, diagonal: fn(np.asarray(x), diagonal))(_fn),
           attrs={"diagonal": (Attr.INT, 0)}, namespace="linalg",
           grad=(lambda name: lambda ins, outs, gs, a: [
               getattr(op, name)(gs[0], diagonal=a.diagonal)])(_name),
           doc=f"The elements {_keeps} the ``diagonal``-th diagonal of the last two dims (0: "
               f"the main one, > 0 above it, < 0 below), zeros elsewhere (numpy ``{_name}``; "
               f"ND4J's ``sd.linalg.{_name}``).")
