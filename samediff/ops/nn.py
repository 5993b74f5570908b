"""Neural-network ops with fused numpy kernels: softmax, log_softmax, layer_norm, batch_norm,
bias_add and linear.

Constants are Python floats (weak under NEP 50), so float32 inputs give float32 outputs.
"""
from __future__ import annotations

import numpy as np

from .families import Attr, normalize_axis, normalize_dims, probed_infer
from .linalg import matmul_shape
from .registry import define

Shape = tuple[int, ...]


# --- shape helpers --------------------------------------------------------------------------

def _placed_shape(param: Shape, rank: int, axes: tuple[int, ...], what: str) -> Shape:
    """Shape that puts ``param`` 's dims (right-aligned) on ``axes`` of a rank-``rank`` array
    and 1 elsewhere, so a parameter of the normalized dims broadcasts against x correctly."""
    if len(param) > len(axes):
        raise ValueError(f"{what} of shape {param} has more dims than the {len(axes)} "
                         f"normalized dim(s) {axes}")
    padded = (1,) * (len(axes) - len(param)) + tuple(param)
    full = [1] * rank
    for ax, d in zip(axes, padded):
        full[ax] = d
    return tuple(full)


def _fit(x: Shape, param: Shape, what: str, of: str = "x") -> Shape:
    """x's shape refined by a same-rank placed parameter; error if the parameter would grow x."""
    out = []
    for i, (xd, pd) in enumerate(zip(x, param)):
        if pd not in (1, -1) and xd >= 0 and xd != pd:
            raise ValueError(f"{what} has size {pd} where dim {i} of {of} (shape {x}) has "
                             f"size {xd}")
        out.append(pd if xd < 0 and pd > 1 else xd)
    return tuple(out)


def _vector(p: Shape, what: str, x: Shape, axis: int, of: str = "x") -> Shape:
    """Check that a parameter of shape ``p`` is 1-D and fits x's ``axis`` (or is a scalar,
    which the kernels broadcast); return x's shape refined by it."""
    if len(p) == 0:
        return tuple(x)
    if len(p) != 1:
        raise ValueError(f"{what} must be 1-D (one value per entry of x's dim {axis}) or a "
                         f"scalar, got shape {p}")
    placed = [1] * len(x)
    placed[axis] = p[0]
    return _fit(x, tuple(placed), what, of)


def _along(p, rank: int, axis: int):
    """A 1-D parameter reshaped to broadcast along ``axis``; weak/0-d operands stay as they are."""
    if np.ndim(p) == 0:
        return p
    shape = [1] * rank
    shape[axis] = -1
    return np.reshape(p, shape)


# --- softmax / log_softmax --------------------------------------------------------------------

def _shifted(x, dim: int):
    # Subtracting the max makes exp() overflow-free; a non-finite max (all -inf slice) is
    # replaced by 0 so the slice does not become inf - inf = NaN before exp.
    m = np.max(x, axis=dim, keepdims=True)
    return x - np.where(np.isfinite(m), m, 0)


def _softmax(x, *, dim):
    e = np.exp(_shifted(x, dim))
    return e / np.sum(e, axis=dim, keepdims=True)


def _log_softmax(x, *, dim):
    s = _shifted(x, dim)
    return s - np.log(np.sum(np.exp(s), axis=dim, keepdims=True))


def _dim_shape(xs: Shape, a) -> Shape:
    normalize_axis(a.dim, len(xs), "dim")
    return xs


_DIM = {"dim": (Attr.INT, -1)}
define("softmax", ["x"], probed_infer("softmax", _dim_shape, (("dim", 0),)), _softmax,
       attrs=_DIM, namespace="nn", doc="``exp(x) / sum(exp(x))`` along ``dim``, shifted by the "
       "max for stability.")
define("log_softmax", ["x"], probed_infer("log_softmax", _dim_shape, (("dim", 0),)),
       _log_softmax, attrs=_DIM, namespace="nn", nd4j="logSoftmax",
       doc="``x - log(sum(exp(x)))`` along ``dim``, shifted by the max for stability.")


# --- layer_norm ---------------------------------------------------------------------------------

def _norm_axes(rank: int, dims) -> tuple[int, ...]:
    if not dims:
        raise ValueError("dims must name at least one dim to normalize over")
    return normalize_dims(dims, rank)


def _layer_norm(x, gain, bias=None, *, dims, epsilon):
    x = np.asarray(x)
    axes = _norm_axes(x.ndim, dims)

    def place(p):
        return p if np.ndim(p) == 0 else np.reshape(p, _placed_shape(np.shape(p), x.ndim, axes,
                                                                        "parameter"))
    centered = x - np.mean(x, axis=axes, keepdims=True)
    var = np.mean(np.square(centered), axis=axes, keepdims=True)  # biased, like ND4J
    out = centered / np.sqrt(var + epsilon) * place(gain)
    return out if bias is None else out + place(bias)


def _layer_norm_shape(xs: Shape, *params_and_attrs) -> Shape:
    *params, a = params_and_attrs
    axes = _norm_axes(len(xs), a.dims)
    for what, p in zip(("gain", "bias"), params):
        xs = _fit(xs, _placed_shape(p, len(xs), axes, what), what)
    return xs


define("layer_norm", ["x", "gain", "bias?"],
       probed_infer("layer_norm", _layer_norm_shape, (("dims", (0,)),)), _layer_norm,
       attrs={"dims": (Attr.INTS, (-1,)), "epsilon": (Attr.FLOAT, 1e-5)}, namespace="nn",
       nd4j="layerNorm", doc="Normalize over ``dims`` to mean 0 / (biased) variance 1, then "
       "``* gain + bias``; gain/bias span the normalized dims (right-aligned, broadcastable).")


# --- batch_norm -------------------------------------------------------------------------------

def _batch_norm(x, mean, variance, gamma, beta, *, epsilon, axis):
    x = np.asarray(x)
    ax = axis % x.ndim
    # Fold the per-channel parameters first: one scale and one shift touch x.
    scale = _along(gamma, x.ndim, ax) / np.sqrt(_along(variance, x.ndim, ax) + epsilon)
    return (x - _along(mean, x.ndim, ax)) * scale + _along(beta, x.ndim, ax)


def _batch_norm_infer_shape(xs: Shape, *params_and_attrs) -> Shape:
    *params, a = params_and_attrs
    ax = normalize_axis(a.axis, len(xs), "axis")
    for what, p in zip(("mean", "variance", "gamma", "beta"), params):
        xs = _vector(p, what, xs, ax)
    return xs


define("batch_norm", ["x", "mean", "variance", "gamma", "beta"],
       probed_infer("batch_norm", _batch_norm_infer_shape, (("axis", 0),)), _batch_norm,
       attrs={"epsilon": (Attr.FLOAT, 1e-5), "axis": (Attr.INT, -1)}, namespace="nn",
       nd4j="batchNorm", doc="Inference batch norm ``(x - mean) / sqrt(variance + epsilon) * "
       "gamma + beta`` with 1-D parameters applied along ``axis``.")


# --- bias_add / linear ------------------------------------------------------------------------

def _bias_axis(rank: int, nchw: bool) -> int:
    if rank < (2 if nchw else 1):
        raise ValueError(f"x must have rank >= {2 if nchw else 1} for nchw={nchw}, got rank {rank}")
    return 1 if nchw else rank - 1


def _bias_add(x, b, *, nchw):
    x = np.asarray(x)
    return np.add(x, _along(b, x.ndim, _bias_axis(x.ndim, nchw)))


define("bias_add", ["x", "b"],
       probed_infer("bias_add", lambda xs, bs, a: _vector(bs, "b", xs, _bias_axis(len(xs), a.nchw)),
           (("nchw", False),)),
       _bias_add, attrs={"nchw": (Attr.BOOL, False)}, namespace="nn", nd4j="biasAdd",
       doc="``x + b`` with the 1-D bias along dim 1 (``nchw=True``) or the last dim.")


def _linear(x, w, b=None):
    out = np.matmul(x, w)
    return out if b is None else out + b


def _linear_shape(xs: Shape, ws: Shape, *rest) -> Shape:
    *bs, _ = rest  # the bias shape, if a bias was given; then the attrs
    if len(ws) != 2:
        raise ValueError(f"w must be 2-D of shape (in, out), got shape {ws}")
    out = matmul_shape(xs, ws)
    return _vector(bs[0], "b", out, len(out) - 1, "x @ w") if bs else out


define("linear", ["x", "w", "b?"], probed_infer("linear", _linear_shape), _linear,
       namespace="nn", doc="Dense layer ``x @ w + b`` with ``w`` of shape (in, out) and 1-D "
       "``b`` of length out (ND4J's linear / xwPlusB).")
