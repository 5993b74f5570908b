"""Gradient rules of the structural ops: shape ops, matrix products (``linalg.py``), the nn
ops, creation and random ops, and the gradient helpers of ``grad_ops.py``.

Rules use only table ops -- operators and methods on the graph values, ``op.*`` (``call.py``)
for free functions -- so backward graphs can be differentiated again. Shapes may hold -1
(unknown) dims: a rule never turns one into a static attribute. Where a gradient needs a
run-time shape it takes it from an input through a ``*_like`` helper of ``grad_ops.py``
(``reshape_like``, ``slice_grad``, ``pad_grad``, ``split_like``, ``reduce_to_like``), and
fast static paths are used only when every dim involved is known.

Conventions:

* ``scatter_update``: with duplicate indices only the update that wins (the last one) gets a
  gradient; the others did not reach the output. ``ref`` gets ``g`` with the overwritten rows
  zeroed.
* ``pad`` in ``reflect``/``symmetric`` mode: every mirrored copy sends its gradient back to its
  source element; the ``constant`` value gets none (it is an attribute).
* ``gather``: repeated indices accumulate their gradients (scatter-add into zeros).
* ``concat`` splits ``g`` with static sizes when at most one input's size along the axis is
  unknown, else with ``split_like`` (sizes read at run time).
* ``zeros_like``/``ones_like``/``full_like`` read only x's shape and dtype: x gets no gradient
  (``None``; see the creation section). Ops without array inputs (creation, random) and
  ``one_hot`` (integer input) are non-differentiable.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .call import op
from .families import normalize_axis, normalize_dims
from .nn import _stats_dtype
from .registry import defgrad, nondifferentiable


def _unary(name: str, fn: Any) -> None:
    """Register ``fn(x, g, attrs) -> dx`` for a one-input, one-output op."""
    defgrad(name, lambda ins, outs, gs, a: [fn(ins[0], gs[0], a)])


def _like_only(name: str, fn: Any) -> None:
    """Register ``fn(x, g, attrs) -> dx`` for a helper ``op(x, like)``: ``like`` only lends
    its shape, so it gets no gradient."""
    defgrad(name, lambda ins, outs, gs, a: [fn(ins[0], gs[0], a), None])


def _known(shape: tuple[int, ...]) -> bool:
    return all(d >= 0 for d in shape)


def _blocks(g: Any, expanded: Any, reps: tuple[int, ...]) -> Any:
    """``g`` reshaped to ``expanded``'s shape times ``reps`` (``expanded`` has size 1 wherever
    ``reps`` is not 1): splits each repeated dim of ``g`` into (copies, size) or (size, copies)
    blocks. Static when the sizes are known, else shaped like a run-time broadcast."""
    shape = tuple(d * r if d >= 0 else -1 for d, r in zip(expanded.shape, reps))
    if _known(shape):
        return op.reshape(g, shape=shape)
    # any value of that shape serves as ``like``: tiling ``expanded`` by ``reps`` has it (and,
    # unlike zeros(shape=...), it is an op on a value, so it runs wherever ``g`` lives)
    return op.reshape_like(g, op.tile(expanded, reps=reps))


# --- reshape / permute / transpose / expand_dims / squeeze / flatten ------------------------

def _flatten(x: Any, g: Any, a: Any) -> Any:
    if a.order.upper() == "F":  # column-major order is row-major order of the transpose
        return op.transpose(op.reshape_like(g, op.transpose(x)))
    return op.reshape_like(g, x)


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, d in enumerate(perm):
        inv[d] = i
    return tuple(inv)


def _reshape(x: Any, g: Any, a: Any) -> Any:
    if a.order.upper() == "F":  # an 'f' reshape is a 'c' reshape between transposes
        return op.transpose(op.reshape_like(op.transpose(g), op.transpose(x)))
    return op.reshape_like(g, x)


_unary("reshape", _reshape)
_unary("squeeze", lambda x, g, a: op.reshape_like(g, x))
_unary("flatten", _flatten)
_unary("permute", lambda x, g, a: op.permute(g, dims=_inverse(a.dims)))
_unary("transpose", lambda x, g, a: op.transpose(g))
_unary("expand_dims", lambda x, g, a: op.squeeze(
    g, axis=(normalize_axis(a.axis, len(x.shape) + 1),)))


# --- concat / stack / unstack / split ---------------------------------------------------------

def _concat(ins: list, outs: list, gs: list, a: Any) -> list:
    g = gs[0]
    if len(ins) == 1:
        return [g]
    ax = normalize_axis(a.axis, len(g.shape))
    sizes = tuple(x.shape[ax] for x in ins)
    if sum(s < 0 for s in sizes) <= 1:  # split takes one -1 (the rest)
        return list(op.split(g, num_or_sizes=sizes, axis=ax))
    return list(op.split_like(g, *ins, axis=ax))  # sizes known only at run time


defgrad("concat", _concat)
defgrad("stack", lambda ins, outs, gs, a: list(
    op.unstack(gs[0], axis=normalize_axis(a.axis, len(gs[0].shape)))))
defgrad("unstack", lambda ins, outs, gs, a: [
    op.stack(*gs, axis=normalize_axis(a.axis, len(ins[0].shape)))])
defgrad("split", lambda ins, outs, gs, a: [
    op.concat(*gs, axis=normalize_axis(a.axis, len(ins[0].shape)))])


# --- slice / strided_slice ---------------------------------------------------------------------

def _slice_spec(a: Any) -> tuple:
    """``slice``'s begin/size as a ``strided_slice`` index (size -1 = to the end)."""
    return tuple(("slice", b, None if s == -1 else b + s, None) for b, s in zip(a.begin, a.size))


_unary("slice", lambda x, g, a: op.slice_grad(g, x, index=_slice_spec(a)))
_unary("strided_slice", lambda x, g, a: op.slice_grad(g, x, index=a.index))


# --- gather / scatter ----------------------------------------------------------------------------

def _gather(ins: list, outs: list, gs: list, a: Any) -> list:
    """Scatter-add ``g`` into zeros of ``x``'s shape (repeated indices accumulate). scatter_add
    writes along axis 0, so ``axis`` is moved to the front and back again."""
    x, idx = ins
    g, r, k = gs[0], len(ins[0].shape), len(ins[1].shape)
    ax = normalize_axis(a.axis, r)
    if ax == 0:
        return [op.scatter_add(op.zeros_like(x), idx, g), None]
    front = (ax, *range(ax), *range(ax + 1, r))
    # g's dims: x's dims before axis, then the index dims, then x's dims after axis
    upd = op.permute(g, dims=(*range(ax, ax + k), *range(ax), *range(ax + k, r + k - 1)))
    out = op.scatter_add(op.permute(op.zeros_like(x), dims=front), idx, upd)
    return [op.permute(out, dims=_inverse(front)), None]


def _scatter_update(ins: list, outs: list, gs: list, a: Any) -> list:
    ref, idx, upd = ins
    g = gs[0]
    rows = op.gather(g, idx)
    # Which update reached the output? Number the updates 1..n, scatter the numbers like the
    # updates (the last duplicate wins) and keep the updates whose number came back.
    num = op.reshape_like(op.cumsum(op.flatten(op.ones_like(idx))), idx)
    for _ in range(len(ref.shape) - 1):
        num = op.expand_dims(num, axis=-1)
    winner = op.gather(op.scatter_update(op.zeros_like(ref, dtype=num.dtype), idx, num), idx)
    won = op.where(op.eq(winner, num), rows, op.zeros_like(rows))
    return [op.scatter_update(g, idx, op.zeros_like(upd)), None, won]


def _dynamic_partition(ins: list, outs: list, gs: list, a: Any) -> list:
    """The inverse, ND4J/TensorFlow's dynamic stitch: number x's slices 0..n-1, partition the
    numbers like x, and scatter each part's gradient back to its numbers' rows."""
    x, p = ins
    flat_p = op.flatten(p)
    number = op.cumsum(op.ones_like(flat_p)) - 1
    where = op.dynamic_partition(number, flat_p, num_partitions=a.num_partitions)
    # zeros with one row per slice: x's slices all in one part (x's shape with p's dims
    # flattened, even where those dims are known only at run time)
    rows = op.zeros_like(x) if len(p.shape) == 1 else op.dynamic_partition(
        op.zeros_like(x), op.zeros_like(p), num_partitions=1)[0]
    for idx, g in zip(where, gs):
        rows = op.scatter_add(rows, idx, g)
    return [op.reshape_like(rows, x), None]


defgrad("gather", _gather)
defgrad("dynamic_partition", _dynamic_partition)
defgrad("scatter_add", lambda ins, outs, gs, a: [gs[0], None, op.gather(gs[0], ins[1])])
defgrad("scatter_update", _scatter_update)


# --- tile / repeat / broadcast_to / pad / reverse / one_hot -----------------------------------

def _tile(x: Any, g: Any, a: Any) -> Any:
    """Sum the copies: view ``g`` as (reps0, size0, reps1, size1, ...) blocks and sum the reps."""
    n = max(len(x.shape), len(a.reps))
    reps = (1,) * (n - len(a.reps)) + tuple(a.reps)
    expanded = x
    for _ in range(n - len(x.shape)):
        expanded = op.expand_dims(expanded, axis=0)
    for i in range(n):
        expanded = op.expand_dims(expanded, axis=2 * i)  # (1, size0, 1, size1, ...)
    interleaved = tuple(v for r in reps for v in (r, 1))
    summed = op.sum(_blocks(g, expanded, interleaved), dims=tuple(range(0, 2 * n, 2)))
    return op.reshape_like(summed, x)


def _repeat(x: Any, g: Any, a: Any) -> Any:
    """Sum the copies: each element is repeated in a row, so view ``g``'s axis as (size, copies)."""
    # numpy repeats the flattened array for axis=None and treats a scalar as shape (1,)
    base = op.flatten(x) if a.axis is None or not x.shape else x
    ax = 0 if a.axis is None else normalize_axis(a.axis, len(base.shape))
    reps = tuple(a.repeats if i == ax + 1 else 1 for i in range(len(base.shape) + 1))
    summed = op.sum(_blocks(g, op.expand_dims(base, axis=ax + 1), reps), dims=(ax + 1,))
    return summed if base is x else op.reshape_like(summed, x)


def _pad(x: Any, g: Any, a: Any) -> Any:
    if a.mode == "constant":  # the inner block; negative stops keep it free of static sizes
        return op.strided_slice(g, index=tuple(("slice", b, -e if e else None, None)
                                              for b, e in a.paddings))
    return op.pad_grad(g, x, paddings=a.paddings, mode=a.mode)


_unary("tile", _tile)
_unary("repeat", _repeat)
_unary("broadcast_to", lambda x, g, a: op.reduce_to_like(g, x))
_unary("pad", _pad)
_unary("reverse", lambda x, g, a: op.reverse(g, dims=a.dims))
nondifferentiable("one_hot")


# --- matrix products ---------------------------------------------------------------------------

def _swap_last2(t: Any) -> Any:
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
        g = _swap_last2(g)
    x1, y1 = len(x.shape) == 1, len(y.shape) == 1
    if x1:
        x, tx, g = op.expand_dims(x, axis=0), False, op.expand_dims(g, axis=-1 if y1 else -2)
    if y1:
        y, ty, g = op.expand_dims(y, axis=-1), False, op.expand_dims(g, axis=-1)
    dx = (op.matmul(y, g, transpose_x=ty, transpose_y=True) if tx
          else op.matmul(g, y, transpose_y=not ty))
    dy = (op.matmul(g, x, transpose_x=True, transpose_y=tx) if ty
          else op.matmul(x, g, transpose_x=not tx))
    if x1:
        dx = op.squeeze(dx, axis=(-2,))
    if y1:
        dy = op.squeeze(dy, axis=(-1,))
    return dx, dy


def _tensor_mmul(ins: list, outs: list, gs: list, a: Any) -> list:
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


def _dot(ins: list, outs: list, gs: list, a: Any) -> list:
    x, y = ins
    g = gs[0]
    if a.dims is not None:  # restore the reduced dims as size 1 (dims of the broadcast shape)
        for d in normalize_dims(a.dims, max(len(x.shape), len(y.shape))):
            g = op.expand_dims(g, axis=d)
    # a reduced dim where the other operand has size 1 must still get x's size: broadcast
    return [op.broadcast_like(g * y, x), op.broadcast_like(g * x, y)]


defgrad("matmul", lambda ins, outs, gs, a: list(matmul_grads(
    ins[0], ins[1], gs[0], a.transpose_x, a.transpose_y, a.transpose_result)))
defgrad("tensor_mmul", _tensor_mmul)
defgrad("dot", _dot)


# --- nn ---------------------------------------------------------------------------------------

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


def _softmax(ins: list, outs: list, gs: list, a: Any) -> list:
    y, gy = outs[0], gs[0] * outs[0]
    return [gy - y * op.sum(gy, dims=(a.dim,), keep_dims=True)]


def _log_softmax(ins: list, outs: list, gs: list, a: Any) -> list:
    g = gs[0]
    return [g - op.exp(outs[0]) * op.sum(g, dims=(a.dim,), keep_dims=True)]


def _layer_norm(ins: list, outs: list, gs: list, a: Any) -> list:
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


def _batch_norm(ins: list, outs: list, gs: list, a: Any) -> list:
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


def _bias_add(ins: list, outs: list, gs: list, a: Any) -> list:
    rank = len(ins[0].shape)
    return [gs[0], _sum_except(gs[0], (1 if a.nchw else rank - 1,))]


def _linear(ins: list, outs: list, gs: list, a: Any) -> list:
    dx, dw = matmul_grads(ins[0], ins[1], gs[0])
    return [dx, dw] + ([gs[0]] if len(ins) > 2 else [])


defgrad("softmax", _softmax)
defgrad("log_softmax", _log_softmax)
defgrad("layer_norm", _layer_norm)
defgrad("batch_norm", _batch_norm)
defgrad("bias_add", _bias_add)
defgrad("linear", _linear)


# --- creation and random ops -------------------------------------------------------------------
# Ops without array inputs have nothing to differentiate. The ``*_like`` ops read only x's
# shape and dtype, never its values: x gets no gradient (None, rather than a materialized zero
# array added into x's gradient), so a loss that reaches x only through them reports that x
# "does not affect any loss" — which is exactly true.

nondifferentiable("zeros", "ones", "full", "linspace", "arange", "eye",
                  "uniform", "normal", "bernoulli", "truncated_normal")
for _name in ("zeros_like", "ones_like", "full_like"):
    defgrad(_name, lambda ins, outs, gs, a: [None])


# --- the gradient helpers: each one's gradient is its partner ------------------------------------

_like_only("reduce_to_like", lambda x, g, a: op.broadcast_like(g, x))
_like_only("broadcast_like", lambda x, g, a: op.reduce_to_like(g, x))
_like_only("reshape_like", lambda x, g, a: op.reshape_like(g, x))
_like_only("slice_grad", lambda x, g, a: op.strided_slice(g, index=a.index))
_like_only("pad_grad", lambda x, g, a: op.pad(g, paddings=a.paddings, mode=a.mode))
defgrad("split_like", lambda ins, outs, gs, a: [
    op.concat(*gs, axis=normalize_axis(a.axis, len(ins[0].shape)))] + [None] * (len(ins) - 1))
