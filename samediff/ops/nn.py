"""Neural-network ops with fused numpy kernels: softmax, log_softmax, layer_norm, batch_norm,
bias_add and linear.

Constants are Python floats (weak under NEP 50), so float32 inputs give float32 outputs.
``row_kernel=`` declares the row anchors: ops the compiler computes row by row over the last
axis, together with the elementwise ops that feed and consume them (``compiler/rowwise.py``).
Each op's gradient rule is given with it (``grad=``, written with table ops on graph values);
``batch_norm``'s training form (``training=``) is ``batch_norm_train`` (``train_mode.py``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels import forksafe, lazy
from .call import op
from .families import Attr, normalize_axis, normalize_dims, probed_infer
from .linalg import matmul_grads, matmul_shape
from .registry import AttrKind, RowKernel, define

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


# --- gradient helpers -------------------------------------------------------------------------

def _placed(p: Any, rank: int, axes: tuple[int, ...]) -> Any:
    """A parameter whose dims sit (right-aligned) on ``axes`` of a rank-``rank`` array, with
    size-1 dims inserted elsewhere (nn.py's placement, built with expand_dims: no static
    sizes). Scalars broadcast as they are."""
    if not p.shape:
        return p
    covered = axes[len(axes) - len(p.shape):]
    for q in range(rank):  # ascending: each insert leaves the later positions right
        if q not in covered:
            p = op.expand_dims(p, axis=q)
    return p


def _sum_except(t: Any, keep: tuple[int, ...]) -> Any:
    """``t`` summed over every dim not in ``keep`` (parameter gradients; the engine then sums
    leading or size-1 dims down to the parameter's own shape)."""
    rest = tuple(i for i in range(len(t.shape)) if i not in keep)
    return op.sum(t, dims=rest) if rest else t


# --- softmax / log_softmax --------------------------------------------------------------------

def _shifted(x, dim: int):
    """``x`` minus its max along ``dim`` (so exp() cannot overflow).

    Edge values, the same in every executor (the fused row kernels compute exactly this):
    a slice holding +inf or NaN becomes NaN throughout (``inf - inf``: the normalizer
    ``inf / inf`` is undefined; torch, JAX and SciPy give NaN too); an all -inf slice is
    ``0 / 0`` = NaN; -inf entries of other slices give 0 (``log_softmax``: -inf). A size-0
    ``dim`` has nothing to normalize: the result is empty (numpy's max would raise)."""
    x = np.asarray(x)
    if x.size == 0:
        return x - x  # x - max(x)'s dtype, without reducing an empty axis
    return x - np.max(x, axis=dim, keepdims=True)


def _softmax(x, *, dim):
    e = np.exp(_shifted(x, dim))
    return e / np.sum(e, axis=dim, keepdims=True)


def _log_softmax(x, *, dim):
    s = _shifted(x, dim)
    return s - np.log(np.sum(np.exp(s), axis=dim, keepdims=True))


def _dim_shape(xs: Shape, a) -> Shape:
    normalize_axis(a.dim, len(xs), "dim")
    return xs


def _softmax_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    y, gy = outs[0], gs[0] * outs[0]
    return [gy - y * op.sum(gy, dims=(a.dim,), keep_dims=True)]


def _log_softmax_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    g = gs[0]
    return [g - op.exp(outs[0]) * op.sum(g, dims=(a.dim,), keep_dims=True)]


_DIM = {"dim": (Attr.INT, -1)}
define("softmax", ["x"], probed_infer("softmax", _dim_shape, (("dim", 0),)), _softmax,
       attrs=_DIM, namespace="nn", row_kernel=RowKernel("softmax", axis="dim"),
       grad=_softmax_grad,
       doc="``exp(x) / sum(exp(x))`` along ``dim``, shifted by the "
       "max for stability (a slice holding +inf or NaN gives NaN; a size-0 ``dim``, an empty "
       "result).")
define("log_softmax", ["x"], probed_infer("log_softmax", _dim_shape, (("dim", 0),)),
       _log_softmax, attrs=_DIM, namespace="nn",
       row_kernel=RowKernel("log_softmax", axis="dim"),
       grad=_log_softmax_grad,
       doc="``x - log(sum(exp(x)))`` along ``dim``, shifted by the max for stability (edge "
       "values as softmax).")


# --- layer_norm ---------------------------------------------------------------------------------

def _norm_axes(rank: int, dims) -> tuple[int, ...]:
    if not dims:
        raise ValueError("dims must name at least one dim to normalize over")
    return normalize_dims(dims, rank)


def _stats_dtype(dtype: np.dtype) -> np.dtype:
    """Layer-norm statistics are computed in float64 for narrower floats (and ints): a float32
    square overflows for |x| above ~1.8e19 and a float32 sum near 3.4e38. The fused row kernel
    and the gradient rule use the same rule."""
    return np.promote_types(dtype, np.float64) if dtype.kind in "fc" else np.dtype(np.float64)


def _normalized(x, axes: tuple[int, ...], epsilon: float):
    """``(x - mean) / sqrt(var + epsilon)`` (biased variance, like ND4J) over ``axes``, with
    the statistics in ``_stats_dtype``, returned in x's float dtype (float64 for ints).
    Temporaries are reused in place: fresh full-size buffers cost page faults, which on this
    kind of machine cost more than the arithmetic."""
    out_dtype = x.dtype if x.dtype.kind in "fc" else np.dtype(np.float64)
    xs = x.astype(_stats_dtype(x.dtype), copy=False)
    mean = np.mean(xs, axis=axes, keepdims=True)
    if x.dtype == np.float32:  # xs is a copy of x: square its deviations in place
        d = np.subtract(xs, mean, out=xs)
        var = np.mean(np.square(d, out=d), axis=axes, keepdims=True)
        return _normalized_f32(x, mean, np.sqrt(var + epsilon))
    d = xs - mean
    with np.errstate(divide="ignore"):
        rstd = 1.0 / np.sqrt(np.mean(np.square(d), axis=axes, keepdims=True) + epsilon)
    return np.multiply(d, rstd, out=d).astype(out_dtype, copy=False)


def _normalized_f32(x, mean, std):
    """The fused row kernel's float32 arithmetic (``compiler.mathlib.row_norm_f32``), so that
    eager and compiled results round alike: ``(x / p - m) * r - c`` with ``p`` a power of two
    >= std for std above 1e30 (else 1: exact scaling that keeps x - mean from overflowing and
    ``r = p / std`` normal for rows near 3.4e38), ``m`` the float32 ``mean / p`` and ``c`` the
    share of its rounding error in the result (``x / p - m`` is exact near the mean, so
    rounding the mean to float32 costs no digits)."""
    f32 = np.float32
    p = np.where(std > 1e30, np.ldexp(1.0, np.frexp(std)[1]), 1.0)
    m = mean / p
    m32 = m.astype(f32)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = p / std
        c = ((m - m32) * r).astype(f32)
    out = np.multiply(x, (1.0 / p).astype(f32))
    out -= m32
    out *= r.astype(f32)
    out -= c
    return out


def _layer_norm(x, gain, bias=None, *, dims, epsilon):
    x = np.asarray(x)
    axes = _norm_axes(x.ndim, dims)

    def place(p):
        return p if np.ndim(p) == 0 else np.reshape(p, _placed_shape(np.shape(p), x.ndim, axes,
                                                                        "parameter"))
    out = _normalized(x, axes, epsilon) * place(gain)
    return out if bias is None else out + place(bias)


def _layer_norm_shape(xs: Shape, *params_and_attrs) -> Shape:
    *params, a = params_and_attrs
    axes = _norm_axes(len(xs), a.dims)
    for what, p in zip(("gain", "bias"), params):
        xs = _fit(xs, _placed_shape(p, len(xs), axes, what), what)
    return xs


def _layer_norm_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    """``xhat = (x - mean) * rstd``; ``dx = rstd * (gp - mean(gp) - xhat * mean(gp * xhat))``
    with ``gp = g * gain`` and means over the normalized dims (biased variance).

    The statistics are the forward pass's (float64 for float32 x, see ``nn._stats_dtype``),
    without full-size float64 temporaries (they cost more than the arithmetic): ``xhat`` is
    the op itself with gain 1 (a row kernel), and the variance is the float64 mean of the
    squares of ``x - m`` (cast, squared and summed per element by one fused reduction) around
    x's mean ``m`` in x's dtype -- ``x - m`` is exact near the mean, and the rounding of ``m``
    adds ``(mean - m)**2``, relative ``((mean - m) / std)**2``: a few 1e-7 for a float32 row
    whose spread is 1e-4 of its offset."""
    x, gain, g = ins[0], ins[1], gs[0]
    rank = len(x.shape)
    axes = normalize_dims(a.dims, rank)
    dt = np.dtype(x.dtype)
    wide = _stats_dtype(dt)
    xhat = op.layer_norm(x, 1.0, dims=a.dims, epsilon=a.epsilon)
    d = x - op.mean(x, dims=axes, keep_dims=True)
    d = d if wide == dt else op.cast(d, dtype=wide)
    rstd = op.rsqrt(op.mean(d * d, dims=axes, keep_dims=True) + a.epsilon)
    if wide != dt and dt.kind == "f":
        rstd = op.cast(rstd, dtype=dt)
    gp = g * _placed(gain, rank, axes)
    dx = rstd * (gp - op.mean(gp, dims=axes, keep_dims=True)
                 - xhat * op.mean(gp * xhat, dims=axes, keep_dims=True))
    grads = [dx, _sum_except(g * xhat, axes)]
    return grads + ([_sum_except(g, axes)] if len(ins) > 2 else [])


define("layer_norm", ["x", "gain", "bias?"],
       probed_infer("layer_norm", _layer_norm_shape, (("dims", (0,)),)), _layer_norm,
       attrs={"dims": (Attr.INTS, (-1,)), "epsilon": (Attr.FLOAT, 1e-5)}, namespace="nn",
       row_kernel=RowKernel("normalize", axis="dims", epsilon="epsilon"),
       grad=_layer_norm_grad,
       doc="Normalize over ``dims`` to mean 0 / (biased) variance 1, then "
       "``* gain + bias``; gain/bias span the normalized dims (right-aligned, broadcastable). "
       "Statistics in float64 for float32 x (no overflow up to 3.4e38).")


# --- batch_norm -------------------------------------------------------------------------------

def _momentum(v: Any) -> float:
    m = Attr.FLOAT.coerce(v)
    if not 0.0 <= m <= 1.0:
        raise ValueError(f"momentum weighs the old running value and is in [0, 1] (0.9: "
                         f"PyTorch's momentum=0.1); got {m}")
    return m


#: batch_norm's and batch_norm_train's (train_mode.py) momentum: one kind, checked where given
MOMENTUM = AttrKind("momentum", _momentum)


def bn_params_fit(x: np.ndarray, params: tuple, ax: int) -> bool:
    """Eager calls skip inference: 1-D parameters must match x's ``ax`` (numpy would
    broadcast 3 values against a size-1 axis into a wrong shape); else inference explains."""
    return all(np.ndim(p) != 1 or np.size(p) in (1, x.shape[ax]) for p in params)


def _batch_norm(x, mean, variance, gamma, beta, *, epsilon, axis, momentum):
    x = np.asarray(x)
    ax = axis % x.ndim
    if not bn_params_fit(x, (mean, variance, gamma, beta), ax):
        raise ValueError("invalid inputs")  # explain_failure asks inference for the message
    # Fold the per-channel parameters first: one scale and one shift touch x.
    scale = _along(gamma, x.ndim, ax) / np.sqrt(_along(variance, x.ndim, ax) + epsilon)
    return (x - _along(mean, x.ndim, ax)) * scale + _along(beta, x.ndim, ax)


def batch_norm_shape(xs: Shape, params: list[Shape], axis: int) -> Shape:
    """x's shape refined by batch norm's parameters (mean, variance, gamma, beta) along
    ``axis``. Parameters that fit the channels of the other layout -- NCHW data with the
    default ``axis=-1``, or NHWC data with ``axis=1`` -- are refused naming the axis to pass."""
    ax = normalize_axis(axis, len(xs), "axis")
    for what, p in zip(("mean", "variance", "gamma", "beta"), params):
        if len(p) == 1 and len(xs) >= 3 and p[0] >= 0 and xs[ax] >= 0 and p[0] != xs[ax]:
            other = {1: len(xs) - 1, len(xs) - 1: 1}.get(ax)
            if other is not None and xs[other] == p[0]:
                layout = "channels first (NCHW)" if other == 1 else "channels last (NHWC)"
                raise ValueError(
                    f"{what} has {p[0]} values but x (shape {xs}) has {xs[ax]} on axis {ax} "
                    f"(axis={axis}); for {layout} data, whose channels are axis {other}, pass "
                    f"axis={other if other == 1 else -1} (axis is batch_norm's data format)")
        xs = _vector(p, what, xs, ax)
    return xs


def _batch_norm_infer_shape(xs: Shape, *params_and_attrs) -> Shape:
    *params, a = params_and_attrs
    return batch_norm_shape(xs, params, a.axis)


def _batch_norm_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    x, mean, variance, gamma, _ = ins
    g, rank = gs[0], len(ins[0].shape)
    ax = normalize_axis(a.axis, rank)

    def along(p: Any) -> Any:
        return _placed(p, rank, (ax,))
    rstd = op.rsqrt(along(variance) + a.epsilon)
    xc = x - along(mean)
    dx = g * along(gamma) * rstd
    return [dx, -_sum_except(dx, (ax,)), -0.5 * _sum_except(dx * xc * rstd * rstd, (ax,)),
            _sum_except(g * xc * rstd, (ax,)), _sum_except(g, (ax,))]


def _batch_norm_training(ins: list, a: Any) -> tuple[list, dict]:
    # batch_norm_train is defined in train_mode.py (above this module): ``op`` finds it by
    # name when the form runs, like any op a gradient rule uses
    y, new_mean, new_var = op.batch_norm_train(*ins, epsilon=a.epsilon, axis=a.axis,
                                               momentum=a.momentum)
    return [y], {1: new_mean, 2: new_var}


define("batch_norm", ["x", "mean", "variance", "gamma", "beta"],
       probed_infer("batch_norm", _batch_norm_infer_shape, (("axis", 0),)), _batch_norm,
       attrs={"epsilon": (Attr.FLOAT, 1e-5), "axis": (Attr.INT, -1),
              "momentum": (MOMENTUM, 0.9)}, namespace="nn",
       grad=_batch_norm_grad, training=_batch_norm_training,
       doc="Batch norm ``(x - mean) / sqrt(variance + epsilon) * gamma + beta`` with 1-D "
       "parameters applied along ``axis``, using the running ``mean``/``variance``. In "
       "training mode (``fit``...) it is ``batch_norm_train``: batch statistics, and the "
       "running ones move by ``momentum`` (see ``samediff/ops/train_mode.py``).")


# --- bias_add / linear ------------------------------------------------------------------------

def _bias_axis(rank: int, nchw: bool) -> int:
    if rank < (2 if nchw else 1):
        raise ValueError(f"x must have rank >= {2 if nchw else 1} for nchw={nchw}, got rank {rank}")
    return 1 if nchw else rank - 1


def _bias_add(x, b, *, nchw):
    x = np.asarray(x)
    return np.add(x, _along(b, x.ndim, _bias_axis(x.ndim, nchw)))


def _bias_add_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    rank = len(ins[0].shape)
    return [gs[0], _sum_except(gs[0], (1 if a.nchw else rank - 1,))]


define("bias_add", ["x", "b"],
       probed_infer("bias_add", lambda xs, bs, a: _vector(bs, "b", xs, _bias_axis(len(xs), a.nchw)),
           (("nchw", False),)),
       _bias_add, attrs={"nchw": (Attr.BOOL, False)}, namespace="nn",
       grad=_bias_add_grad,
       doc="``x + b`` with the 1-D bias along dim 1 (``nchw=True``) or the last dim.")


M = lazy("matmul")  # products on ``kernels.matmul``'s routes, as the matmul op's


@forksafe.guarded  # numpy's threaded GEMM: a fork waits for it (samediff/kernels/forksafe.py)
def _linear(x, w, b=None):
    x, w = np.asarray(x), np.asarray(w)
    # a row of biases of the product's dtype goes with the product: the private route adds it
    # to each half's rows on that half's thread (W6's six bias passes: 0.8 ms on one thread).
    # (Anything else -- a Python scalar, which stays weak, another dtype -- is added after.)
    row = b if (isinstance(b, np.ndarray) and x.dtype == w.dtype == b.dtype and w.ndim == 2
                and M.is_bias_row(b, w.shape[-1]) and b.ndim <= x.ndim) else None
    if x.ndim > 2 and w.ndim == 2 and x.flags.c_contiguous:
        # [..., in] as one [rows, in] GEMM (numpy's matmul runs one GEMM per leading index),
        # and the bias added in place: [8, 128, 256] @ [256, 1024] + b 6.5 -> 3.0 ms
        out = M.matmul(x.reshape(-1, x.shape[-1]), w, bias=row)
        out = out.reshape(*x.shape[:-1], w.shape[-1])
    else:
        out = M.matmul(x, w, bias=row)
    if b is None or row is not None:
        return out
    if np.result_type(out, b) == out.dtype and np.broadcast_shapes(out.shape,
                                                                   np.shape(b)) == out.shape:
        out += b  # (out is the GEMM's fresh result: ours to reuse)
        return out
    return out + b


def _linear_shape(xs: Shape, ws: Shape, *rest) -> Shape:
    *bs, _ = rest  # the bias shape, if a bias was given; then the attrs
    if len(ws) != 2:
        raise ValueError(f"w must be 2-D of shape (in, out), got shape {ws}")
    out = matmul_shape(xs, ws)
    return _vector(bs[0], "b", out, len(out) - 1, "x @ w") if bs else out


def _linear_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    dx, dw = matmul_grads(ins[0], ins[1], gs[0])
    return [dx, dw] + ([gs[0]] if len(ins) > 2 else [])


define("linear", ["x", "w", "b?"], probed_infer("linear", _linear_shape), _linear,
       namespace="nn",
       grad=_linear_grad,
       doc="Dense layer ``x @ w + b`` with ``w`` of shape (in, out) and 1-D "
       "``b`` of length out (ND4J's linear / xwPlusB).")
