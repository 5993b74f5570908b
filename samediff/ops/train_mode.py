"""Ops that behave differently while training: ``dropout`` and ``batch_norm``.

A model has one graph; *training mode* is a transform of it, not a second model. An op with a
training form (``training=`` in its definition, an ``OpDef`` fact) is replaced, in training
mode, by what the form records with ordinary ops:

* ``dropout(x, p)`` is the identity at inference (``sd.output()``, plain eager calls). In
  training it becomes ``x * dropout_mask(x, p)``: ``dropout_mask`` is a random op drawing 1/p
  with probability ``p`` and 0 otherwise (*inverted* dropout: the expected value is x, so
  nothing is rescaled at inference). **``p`` is the probability of keeping a value**, as in
  ND4J's ``sd.nn.dropout(x, p)`` and DL4J — not PyTorch's ``p`` (the probability of
  dropping): ``nd.nn.dropout(x, 0.8)`` keeps 80 %.
* ``batch_norm(x, mean, variance, gamma, beta)`` normalizes with the running statistics at
  inference. In training it becomes ``batch_norm_train``, which normalizes with the batch's own
  mean and (biased) variance over every dim but ``axis`` and also returns the new running
  statistics ``momentum * running + (1 - momentum) * batch`` (``momentum`` weighs the old
  value, as in ND4J/DL4J's ``decay``, Keras and ONNX; PyTorch's ``momentum`` is 1 minus ours;
  the running variance takes the biased batch variance, as ONNX and Keras do). ``fit`` writes
  those into the ``mean``/``variance`` variables after each applied step and does not train
  them by gradient.

Who applies the transform: ``fit`` (``samediff/training_forms.py``, before autodiff), and traces
opened with ``graph_scope(training=True)`` / ``nd.compile(training=True)``, which record the
training forms in place of the ops (running statistics are then not written anywhere: call
``batch_norm_train`` to get them). ``nd.grad`` / ``nd.value_and_grad`` called in such a trace
apply the same transform to the function's graph before differentiating it, so the gradient
is the training form's (dropout's mask, the batch statistics), computed from the very mask the
value used.

>>> import numpy as np, nd4py as nd
>>> x = nd.ones(2, 1000)
>>> bool((nd.nn.dropout(x, 0.5) == x).all())                # inference: the identity
True
>>> with nd.graph_scope(training=True):
...     y = nd.nn.dropout(x, 0.5)
>>> sorted(set(np.unique(y.numpy()).tolist()))               # kept values are scaled by 1/p
[0.0, 2.0]
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import random_state
from .call import op
from .families import normalize_axis, unary
from .nn import MOMENTUM, _along, _placed, _sum_except, batch_norm_shape, bn_params_fit
from .registry import NONDIFF, Attr, AttrKind, TensorType, define


def _probability(v: Any) -> float:
    p = Attr.FLOAT.coerce(v)
    if not 0.0 < p <= 1.0:
        raise ValueError(f"p is the probability of keeping a value (ND4J's retain "
                         f"probability), in (0, 1]; got {p}")
    return p


KEEP = AttrKind("keep probability", _probability)


# --- dropout -----------------------------------------------------------------------------------

def _require_float(x: Any) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind != "f":
        raise TypeError(f"dropout needs float values, got {x.dtype}; cast x first")
    return x


unary("dropout", lambda x, *, p: np.array(_require_float(x), copy=True),
      scalar=lambda e, x: f"({x})",
      exact=True, attrs={"p": (KEEP, 0.5)}, namespace="nn", method=False,
      grad=lambda x, y, g, a: g,
      training=lambda ins, a: ([ins[0] * op.dropout_mask(ins[0], p=a.p)], {}),
      doc="Inverted dropout with ``p`` the probability of *keeping* a value (ND4J's "
      "convention, not PyTorch's): the identity at inference, ``x * dropout_mask(x, p)`` in "
      "training mode (``fit``, ``graph_scope(training=True)``, ``nd.compile(training=True)``).")


def _dropout_mask_infer(types: list[TensorType], a: Any) -> TensorType:
    (x,) = types
    if x.dtype.kind != "f":
        raise ValueError(f"dropout needs float values, got {x.dtype}; cast x first")
    return TensorType(x.shape, x.dtype)


def _dropout_mask(x, *, p):
    x = _require_float(x)
    draw = np.float32 if x.dtype == np.float32 else np.float64  # float32 draws: 2x faster
    keep = random_state.generator().random(x.shape, dtype=draw) < p
    return np.multiply(keep, x.dtype.type(1.0 / p), dtype=x.dtype)


define("dropout_mask", ["x"], _dropout_mask_infer, _dropout_mask, attrs={"p": (KEEP, 0.5)},
       namespace="nn", method=False, random=True, grad=NONDIFF,
       doc="A mask shaped like ``x``: ``1/p`` with probability ``p`` (keep), else 0, in x's "
       "dtype (only x's shape and dtype are read). ``x * dropout_mask(x, p)`` is training "
       "dropout.")


# --- batch norm in training --------------------------------------------------------------------

def _bn_train_infer(types: list[TensorType], a: Any) -> list[TensorType]:
    x, mean, variance = types[:3]
    for t, what in zip(types, ("x", "mean", "variance", "gamma", "beta")):
        if t.dtype.kind != "f":
            raise ValueError(f"{what} must be a float array, got {t}")
    ax = normalize_axis(a.axis, x.rank, "axis")
    shape = batch_norm_shape(x.shape, [t.shape for t in types[1:]], a.axis)
    for t, what in ((mean, "mean"), (variance, "variance")):
        if t.rank != 1:
            raise ValueError(f"the running {what} must be 1-D (one value per entry of x's "
                             f"axis {ax}) to be updated, got {t}")
    dtype = np.result_type(*(t.dtype for t in types if not t.weak))  # weak: by kind only
    return [TensorType(shape, dtype), mean, variance]


def _bn_train(x, mean, variance, gamma, beta, *, epsilon, axis, momentum):
    x = np.asarray(x)
    if np.ndim(mean) != 1 or np.ndim(variance) != 1 or any(
            np.asarray(v).dtype.kind != "f" for v in (x, mean, variance, gamma, beta)):
        raise ValueError("invalid inputs")  # eager calls: inference explains (explain_failure)
    ax = axis % x.ndim
    if not bn_params_fit(x, (mean, variance, gamma, beta), ax):
        raise ValueError("invalid inputs")
    red = tuple(i for i in range(x.ndim) if i != ax)
    wide = np.result_type(x.dtype, np.float64)  # statistics of float32 data in float64
    mu = x.mean(axis=red, dtype=wide)
    var = x.var(axis=red, dtype=wide)
    dtype = np.result_type(x, mean, variance, gamma, beta)
    scale = (_along(np.asarray(gamma, wide), x.ndim, ax)
             / np.sqrt(_along(var, x.ndim, ax) + epsilon))
    y = (x - _along(mu, x.ndim, ax).astype(dtype)) * scale.astype(dtype) \
        + _along(np.asarray(beta, dtype), x.ndim, ax)
    new_mean = (momentum * mean + (1.0 - momentum) * mu).astype(np.asarray(mean).dtype)
    new_var = (momentum * variance + (1.0 - momentum) * var).astype(np.asarray(variance).dtype)
    return y.astype(dtype, copy=False), new_mean, new_var


def _bn_train_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    """The batch statistics depend on x: ``dx = rstd * (g' - mean(g') - xhat * mean(g' *
    xhat))`` with ``g' = g * gamma``, plus what the new running statistics pass back through
    the batch mean and variance ((1 - momentum) / n * (g_mean + 2 * g_var * (x - mu)))."""
    x, _, _, gamma, _ = ins
    g, g_mean, g_var = gs
    rank = len(x.shape)
    ax = normalize_axis(a.axis, rank)
    red = tuple(i for i in range(rank) if i != ax)

    def along(p: Any) -> Any:
        return _placed(p, rank, (ax,))
    xc = x - op.mean(x, dims=red, keep_dims=True)
    rstd = op.rsqrt(op.mean(xc * xc, dims=red, keep_dims=True) + a.epsilon)
    xhat = xc * rstd
    gp = g * along(gamma)
    dx = rstd * (gp - op.mean(gp, dims=red, keep_dims=True)
                 - xhat * op.mean(gp * xhat, dims=red, keep_dims=True))
    count = op.sum(op.ones_like(x), dims=red, keep_dims=True)  # folded to a constant by plans
    dx = dx + (along(g_mean) + 2.0 * along(g_var) * xc) * ((1.0 - a.momentum) / count)
    return [dx, g_mean * a.momentum, g_var * a.momentum,
            _sum_except(g * xhat, (ax,)), _sum_except(g, (ax,))]


define("batch_norm_train", ["x", "mean", "variance", "gamma", "beta"], _bn_train_infer,
       _bn_train, attrs={"epsilon": (Attr.FLOAT, 1e-5), "axis": (Attr.INT, -1),
                         "momentum": (MOMENTUM, 0.9)},
       namespace="nn", method=False, multi_output=True, grad=_bn_train_grad,
       doc="Training batch norm: normalizes x with its own mean and biased variance over "
       "every dim but ``axis``, then ``* gamma + beta``; returns ``(y, new_mean, new_var)``, "
       "the running statistics moved toward the batch's: ``momentum * old + (1 - momentum) * "
       "batch``.")
