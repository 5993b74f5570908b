"""Loss functions (ND4J's ``SDLoss``/``NDLoss``): ``sd.loss.<name>`` in graphs, ``nd.loss.<name>``
eagerly.

Every loss is written once, as a composite of ordinary table ops (operators, methods and
``op.<name>(...)`` calls, like the gradient rules). Each op goes through ``bind``, which runs it
eagerly, traces it inside ``nd.graph_scope()``, or records it into the graph of an
``SDVariable`` input. Gradients, fusion and save/load therefore come for free; no loss has an op
of its own.

A loss is computed in three steps, as libnd4j's ``*_loss`` ops do:

1. the **per-example loss** ``E``: elementwise (shape of the labels) for
   ``mean_squared_error``, ``absolute_difference``, ``log_loss``, ``huber_loss``, ``hinge_loss``
   and ``sigmoid_cross_entropy``; summed over the last (class) dim for the softmax cross
   entropies (``[batch, classes] -> [batch]``); summed over ``dimension`` with the dim kept for
   ``cosine_distance`` (``[batch, n] -> [batch, 1]``);
2. ``E * weights``, the weights broadcast to ``E``'s shape;
3. the reduction (``LossReduce``), with ``W`` the weights broadcast to ``E``'s shape (all ones
   when no weights are given):

   ================================  ======================================================
   ``NONE``                          the weighted ``E`` itself (not reduced)
   ``SUM``                           ``sum(E * W)``
   ``MEAN_BY_WEIGHT``                ``sum(E * W) / sum(W)``; 0 when ``sum(W) == 0``
   ``MEAN_BY_NONZERO_WEIGHT_COUNT``  ``sum(E * W) / count(W != 0)``; 0 when no weight is non-zero
   (the default)
   ================================  ======================================================

   Without weights both means are the plain mean of ``E``. The reduction may also be given as a
   case-insensitive string: ``"none"``, ``"sum"`` (or ``"weighted_sum"``), ``"mean_by_weight"``
   (or ``"weighted_mean"``), ``"mean_by_nonzero_weight_count"`` (or ``"mean"``,
   ``"weighted_sum_by_nonzero_weights"``), or as libnd4j's codes 0-3.

**Weights** may be a scalar, have ``E``'s shape, or broadcast to it. Beyond ND4J (which asks
for the same rank), lower-rank weights are aligned with the *leading* dims, so ``[batch]``
weights weigh whole examples of a ``[batch, n]`` loss (for per-column weights pass ``[1, n]``),
and trailing size-1 dims are dropped (``[batch, 1]`` weights for the ``[batch]`` softmax loss).

>>> import nd4py as nd
>>> labels, logits = [[0.0, 1.0], [1.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]
>>> round(nd.loss.softmax_cross_entropy(labels, logits).item(), 4)  # ln 2
0.6931
>>> nd.loss.mean_squared_error(labels, logits, reduction="none").shape
(2, 2)
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable

import numpy as np

from .array import NDArray, as_numpy
from .errors import OpError
from .ops.call import op
from .surface import OpSurface

Array = Any  # NDArray, LazyArray, SDVariable, numpy array or nested lists


class LossError(OpError):
    """A loss function got inputs it cannot use: mismatched label/prediction shapes, weights
    that do not broadcast to the per-example loss, an unknown reduction, a bad parameter."""


class LossReduce(str, Enum):
    """How a loss is reduced (ND4J ``LossReduce``); see the module docs for the formulas."""

    NONE = "NONE"
    SUM = "SUM"
    MEAN_BY_WEIGHT = "MEAN_BY_WEIGHT"
    MEAN_BY_NONZERO_WEIGHT_COUNT = "MEAN_BY_NONZERO_WEIGHT_COUNT"

    @classmethod
    def of(cls, value: "LossReduce | str | int", loss: str = "loss") -> "LossReduce":
        """The mode named by ``value``: a ``LossReduce``, a case-insensitive name or alias, or
        libnd4j's code (0 none, 1 sum, 2 mean by weight, 3 mean by non-zero weight count).

        >>> LossReduce.of("Mean") is LossReduce.MEAN_BY_NONZERO_WEIGHT_COUNT
        True
        """
        if isinstance(value, cls):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value < 4:
            return list(cls)[int(value)]
        if isinstance(value, str):
            mode = _REDUCE_ALIASES.get(value.strip().lower().replace("-", "_").replace(" ", "_"))
            if mode is not None:
                return mode
        raise LossError(f"{loss}: unknown reduction {value!r}; use a LossReduce or one of "
                        f"{', '.join(repr(k) for k in _REDUCE_ALIASES)} (case-insensitive)")


_REDUCE_ALIASES = {
    "none": LossReduce.NONE,
    "sum": LossReduce.SUM, "weighted_sum": LossReduce.SUM,
    "mean_by_weight": LossReduce.MEAN_BY_WEIGHT, "weighted_mean": LossReduce.MEAN_BY_WEIGHT,
    "mean_by_nonzero_weight_count": LossReduce.MEAN_BY_NONZERO_WEIGHT_COUNT,
    "mean": LossReduce.MEAN_BY_NONZERO_WEIGHT_COUNT,
    "weighted_sum_by_nonzero_weights": LossReduce.MEAN_BY_NONZERO_WEIGHT_COUNT,
}
DEFAULT_REDUCTION = LossReduce.MEAN_BY_NONZERO_WEIGHT_COUNT


# --- the per-example losses, each written once with ordinary ops ----------------------------
# Inputs arrive validated: predictions floating point, dense labels already in their dtype.

def _softmax_ce(labels: Any, logits: Any, label_smoothing: float = 0.0) -> Any:
    if label_smoothing:
        classes = logits.shape[-1]
        if classes < 0:  # unknown until run time: count the class dim
            classes = op.sum(op.ones_like(logits), dims=(-1,), keep_dims=True)
        labels = labels * (1.0 - label_smoothing) + label_smoothing / classes
    # log_softmax subtracts the max before exponentiating: finite for any finite logits
    return -op.sum(labels * op.log_softmax(logits, dim=-1), dims=(-1,))


def _sparse_softmax_ce(labels: Any, logits: Any) -> Any:
    classes = logits.shape[-1]
    if classes >= 0:
        one_hot = op.one_hot(labels, depth=classes, dtype=logits.dtype)
    else:  # class count unknown until run time: compare with a 0..C-1 ramp along the last dim
        ramp = op.cumsum(op.ones_like(logits), axis=-1, exclusive=True)
        index = op.expand_dims(op.cast(labels, dtype=logits.dtype), axis=-1)
        one_hot = op.cast(op.eq(ramp, index), dtype=logits.dtype)
    return _softmax_ce(one_hot, logits)


def _sigmoid_ce(labels: Any, logits: Any, label_smoothing: float = 0.0) -> Any:
    if label_smoothing:
        labels = labels * (1.0 - label_smoothing) + 0.5 * label_smoothing
    # -z log(sigmoid(x)) - (1 - z) log(1 - sigmoid(x)) == softplus(x) - x z; softplus is the
    # overflow-free log(1 + exp(x)), so this is finite for any finite logits
    return op.softplus(logits) - logits * labels


def _mean_squared_error(labels: Any, predictions: Any) -> Any:
    return op.squared_difference(predictions, labels)


def _absolute_difference(labels: Any, predictions: Any) -> Any:
    return op.abs(predictions - labels)


def _log_loss(labels: Any, predictions: Any, epsilon: float = 1e-7) -> Any:
    # ND4J's formula; clipping to [0, 1] first keeps rounding just outside (1 + 1e-7) from NaN
    p = op.clip_by_value(predictions, clip_min=0.0, clip_max=1.0)
    return -(labels * op.log(p + epsilon) + (1.0 - labels) * op.log(1.0 - p + epsilon))


def _cross_entropy(labels: Any, probabilities: Any, epsilon: float = 1e-7) -> Any:
    # probabilities clipped to [epsilon, 1]: a softmax output that underflowed to 0 in a
    # class whose label is 0 gives 0 * log(epsilon), not 0 * -inf = NaN
    p = op.clip_by_value(probabilities, clip_min=epsilon, clip_max=1.0)
    return -op.sum(labels * op.log(p), dims=(-1,))


def _huber_loss(labels: Any, predictions: Any, delta: float = 1.0) -> Any:
    # 0.5 d^2 for |d| < delta, delta |d| - 0.5 delta^2 beyond, written without a branch
    a = op.abs(predictions - labels)
    q = op.minimum(a, delta)
    return 0.5 * q * q + delta * (a - q)


def _cosine_distance(labels: Any, predictions: Any, dimension: int = -1) -> Any:
    return 1.0 - op.sum(labels * predictions, dims=(dimension,), keep_dims=True)


def _hinge_loss(labels: Any, predictions: Any) -> Any:
    signs = labels * 2.0 - 1.0  # ND4J: {0, 1} labels are used as {-1, 1}
    return op.relu(1.0 - signs * predictions)


def _drop_last(shape: tuple, params: dict) -> tuple:
    return tuple(shape[:-1])


def _keep_dimension(shape: tuple, params: dict) -> tuple:
    d = params["dimension"] % len(shape)
    return tuple(1 if i == d else s for i, s in enumerate(shape))


@dataclass(frozen=True)
class LossDef:
    """One loss: ``per_example(labels, predictions, **params)`` gives ``E``, whose static
    shape is ``loss_shape(predictions.shape, params)`` (elementwise losses: that shape)."""

    name: str
    nd4j_name: str
    per_example: Callable[..., Any]
    loss_shape: Callable[[tuple, dict], tuple] | None = None
    sparse_labels: bool = False


LOSSES = {d.name: d for d in [
    LossDef("softmax_cross_entropy", "softmaxCrossEntropy", _softmax_ce, _drop_last),
    LossDef("sparse_softmax_cross_entropy", "sparseSoftmaxCrossEntropy", _sparse_softmax_ce,
            _drop_last, sparse_labels=True),
    LossDef("sigmoid_cross_entropy", "sigmoidCrossEntropy", _sigmoid_ce),
    LossDef("cross_entropy", "crossEntropy", _cross_entropy, _drop_last),
    LossDef("mean_squared_error", "meanSquaredError", _mean_squared_error),
    LossDef("absolute_difference", "absoluteDifference", _absolute_difference),
    LossDef("log_loss", "logLoss", _log_loss),
    LossDef("huber_loss", "huberLoss", _huber_loss),
    LossDef("cosine_distance", "cosineDistance", _cosine_distance, _keep_dimension),
    LossDef("hinge_loss", "hingeLoss", _hinge_loss),
]}


# --- validation (pure: records no op) ------------------------------------------------------

def _fmt(shape: tuple) -> str:
    dims = ", ".join("?" if d < 0 else str(d) for d in shape)
    return f"({dims},)" if len(shape) == 1 else f"({dims})"


def _compatible(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x == y or x < 0 or y < 0 for x, y in zip(a, b))


def _as_input(x: Any, what: str, loss: str) -> Any:
    if isinstance(x, (OpSurface, np.ndarray)):
        return x
    if x is None:
        raise LossError(f"{loss}: {what} is required (got None)")
    try:
        return as_numpy(x)  # lists and scalars; Python floats become FLOAT like ND4J
    except Exception as exc:
        raise LossError(f"{loss}: cannot use {type(x).__name__} as {what}: {exc}") from None


@dataclass
class _Checked:
    labels: Any
    predictions: Any
    weights: Any
    weight_rank_change: int  # > 0: append that many size-1 dims; < 0: drop trailing size-1 dims
    loss_shape: tuple


def _check(spec: LossDef, labels: Any, predictions: Any, weights: Any, params: dict) -> _Checked:
    """Validate the inputs against ``spec`` and convert constant (numpy) ones; records no op,
    so a bad call leaves a graph untouched."""
    loss = spec.name
    labels = _as_input(labels, "labels", loss)
    predictions = _as_input(predictions, "predictions", loss)
    if spec.sparse_labels and labels.dtype.kind == "f" and predictions.dtype.kind in "iub":
        labels, predictions = predictions, labels  # ND4J's order: (logits, labels)
    lshape, pshape = tuple(labels.shape), tuple(predictions.shape)
    shapes = f"labels {_fmt(lshape)} {labels.dtype}, predictions {_fmt(pshape)} {predictions.dtype}"
    if predictions.dtype.kind != "f":
        raise LossError(f"{loss}: predictions must be floating point ({shapes}); cast them, "
                        f"e.g. x.cast_to('float')")
    if spec.sparse_labels:
        if labels.dtype.kind not in "iu":
            raise LossError(f"{loss}: labels must be integer class indices ({shapes}); for one-hot "
                            f"or probability labels use softmax_cross_entropy")
        if len(pshape) < 1 or not _compatible(lshape, pshape[:-1]):
            raise LossError(f"{loss}: labels must have the logits' shape without the class dim, "
                            f"{_fmt(pshape[:-1])}; got {shapes}")
        _check_class_range(loss, labels, pshape[-1] if pshape else -1)
    else:
        if not _compatible(lshape, pshape):
            raise LossError(f"{loss}: labels and predictions must have the same shape; got "
                            f"{shapes}")
        if labels.dtype != predictions.dtype and isinstance(labels, np.ndarray):
            labels = labels.astype(predictions.dtype)
    _check_params(spec, pshape, params)
    loss_shape = spec.loss_shape(pshape, params) if spec.loss_shape else pshape
    change = 0
    if weights is not None:
        weights = _as_input(weights, "weights", loss)
        change, fitted = _fit_weights(loss, tuple(weights.shape), loss_shape, shapes)
        if isinstance(weights, np.ndarray):  # a constant: convert it here, recording no op
            weights, change = weights.astype(predictions.dtype, copy=False).reshape(fitted), 0
    return _Checked(labels, predictions, weights, change, loss_shape)


def _check_class_range(loss: str, labels: Any, classes: int) -> None:
    """Out-of-range class indices would silently give a zero loss: reject concrete ones."""
    values = labels if isinstance(labels, np.ndarray) else (
        labels.numpy() if type(labels) is NDArray else None)
    if values is None or values.size == 0 or classes < 0:
        return
    low, high = int(values.min()), int(values.max())
    if low < 0 or high >= classes:
        raise LossError(f"{loss}: class labels must be in [0, {classes}) for {classes} classes; "
                        f"got values in [{low}, {high}]")


def _check_params(spec: LossDef, pshape: tuple, params: dict) -> None:
    loss = spec.name
    for key, value in params.items():
        if key == "dimension":
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or \
                    not -len(pshape) <= value < len(pshape):
                raise LossError(f"{loss}: dimension must be an int in [{-len(pshape)}, "
                                f"{len(pshape)}) for predictions of shape {_fmt(pshape)}; "
                                f"got {value!r}")
            continue
        if not isinstance(value, (int, float, np.floating, np.integer)) or isinstance(value, bool):
            raise LossError(f"{loss}: {key} must be a number, got {value!r}")
        value = float(value)
        if key == "label_smoothing" and not 0.0 <= value <= 1.0:
            raise LossError(f"{loss}: label_smoothing must be in [0, 1], got {value}")
        if key == "label_smoothing" and value and spec.name == "softmax_cross_entropy" and \
                len(pshape) < 2:
            raise LossError(f"{loss}: label smoothing needs [batch, classes] (rank >= 2) inputs; "
                            f"got predictions of shape {_fmt(pshape)}")
        if key == "delta" and value <= 0:
            raise LossError(f"{loss}: delta must be > 0, got {value}")
        if key == "epsilon" and value < 0:
            raise LossError(f"{loss}: epsilon must be >= 0, got {value}")
        params[key] = value


def _fit_weights(loss: str, wshape: tuple, eshape: tuple, shapes: str) -> tuple[int, tuple]:
    """How many size-1 dims to append (> 0) or drop (< 0) so weights of shape ``wshape`` line
    up with the per-example loss ``eshape``, and the shape that gives; raises if they cannot
    broadcast to it."""
    fitted, change = wshape, 0
    if len(wshape) > len(eshape) and all(d == 1 for d in wshape[len(eshape):]):
        fitted, change = wshape[:len(eshape)], len(eshape) - len(wshape)
    elif 0 < len(wshape) < len(eshape):
        fitted, change = wshape + (1,) * (len(eshape) - len(wshape)), len(eshape) - len(wshape)
    ok = not wshape or (len(fitted) == len(eshape) and all(
        w == 1 or w == e or w < 0 or e < 0 for w, e in zip(fitted, eshape)))
    if not ok:
        hints = ["()", _fmt(eshape)]
        if eshape:
            hints.insert(1, _fmt(eshape[:1]))
            if len(eshape) > 1:
                hints.insert(2, _fmt(eshape[:1] + (1,) * (len(eshape) - 1)))
        raise LossError(f"{loss}: weights of shape {_fmt(wshape)} do not broadcast to the "
                        f"per-example loss of shape {_fmt(eshape)} ({shapes}); pass weights of "
                        f"shape {', '.join(dict.fromkeys(hints))} or one broadcastable to it")
    return change, fitted


# --- building: conversions, the per-example loss, weights and the reduction -----------------

def _cast(x: Any, dtype: np.dtype) -> Any:
    return x if x.dtype == dtype else op.cast(x, dtype=dtype)


def build_loss(spec: LossDef, checked: _Checked, reduction: LossReduce, params: dict) -> Any:
    """Run/record ``spec`` on inputs that passed ``_check``."""
    predictions = checked.predictions
    labels = checked.labels if spec.sparse_labels else _cast(checked.labels, predictions.dtype)
    e = spec.per_example(labels, predictions, **params)
    w = checked.weights
    if w is not None:
        w = _cast(w, predictions.dtype)
        change = checked.weight_rank_change
        for _ in range(change):
            w = op.expand_dims(w, axis=-1)
        for _ in range(-change):
            w = op.squeeze(w, axis=(-1,))
        e = e * w
    if reduction is LossReduce.NONE:
        return e
    if reduction is LossReduce.SUM or (w is None and 0 in checked.loss_shape):
        return op.sum(e)  # (ND4J's mean of an empty loss is 0, the empty sum)
    if w is None:  # without weights both means are the plain mean
        return op.mean(e)
    total = op.sum(e)
    full = tuple(w.shape) == tuple(e.shape) and all(d >= 0 for d in e.shape)
    w_full = w if full else w * op.ones_like(e)  # the weights as broadcast to E
    if reduction is LossReduce.MEAN_BY_WEIGHT:
        denominator = op.sum(w_full)
    else:
        denominator = op.sum(op.cast(op.neq(w_full, 0.0), dtype=e.dtype))
    zero = op.eq(denominator, 0.0)  # ND4J: 0, not NaN; the inner where keeps gradients finite
    return op.where(zero, 0.0, total / op.where(zero, 1.0, denominator))


# --- the user-facing namespace (sd.loss, nd.loss) ------------------------------------------

def _graphs_of(sd: Any, *values: Any) -> list:
    """The graph IRs a loss call records into: its SameDiff's, and those of graph-variable
    inputs (``nd.loss`` on SDVariables)."""
    graphs = [sd.graph] if sd is not None else []
    for v in values:
        recorder = getattr(v, "_recorder", None) if isinstance(v, OpSurface) else None
        if recorder is not None:
            graphs.append(recorder.graph)
    return graphs


def _leading_name(method: Callable) -> Callable:
    """Allow ND4J's leading output name: ``sd.loss.logLoss("loss", labels, predictions)``."""
    @functools.wraps(method)
    def wrapper(self: "LossNamespace", *args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], str):
            if kwargs.get("name") is not None:
                raise LossError(f"{method.__name__}: output name given twice ({args[0]!r} and "
                                f"name={kwargs['name']!r})")
            kwargs["name"], args = args[0], args[1:]
        return method(self, *args, **kwargs)
    return wrapper


class LossNamespace:
    """The loss functions.

    With ``graph`` (``sd.loss``) results are SDVariables named ``name`` (default: the loss
    name, made unique), their intermediate ops are scoped under the loss name, and each result
    is marked as a loss of the graph. Without (``nd.loss``) they are computed eagerly, or traced
    inside ``nd.graph_scope()``; ``name`` is then ignored."""

    def __init__(self, graph: Any = None) -> None:
        self._graph = graph
        self._title = "nd.loss" if graph is None else "sd.loss"

    def _apply(self, spec_name: str, labels: Array, predictions: Array, weights: Array | None,
               reduction: LossReduce | str | int, name: str | None, **params: Any) -> Any:
        spec = LOSSES[spec_name]
        mode = LossReduce.of(reduction, spec.name)
        checked = _check(spec, labels, predictions, weights, params)
        # a loss is several ops: if one fails, the graphs it was recording into get back the
        # structure they had (one op failing leaves nothing; a loss must not leave a prefix)
        graphs = {id(g): g for g in _graphs_of(self._graph, labels, predictions, weights)}
        saved = [(g, g.copy()) for g in graphs.values()]
        try:
            return self._build(spec, checked, mode, name, params)
        except BaseException:
            for g, copy in saved:
                g.restore_from(copy)
            raise

    def _build(self, spec: LossDef, checked: _Checked, mode: LossReduce, name: str | None,
               params: dict) -> Any:
        graph = self._graph
        if graph is None:
            for field in ("labels", "predictions", "weights"):  # ops dispatch on arrays
                value = getattr(checked, field)
                if isinstance(value, np.ndarray):
                    setattr(checked, field, NDArray(value))
            return build_loss(spec, checked, mode, params)
        target = graph.graph.new_name(name, spec.name)  # checked before any op is recorded
        with graph.name_scope(spec.name):
            for field in ("labels", "predictions", "weights"):  # one constant per array input
                value = getattr(checked, field)
                if isinstance(value, np.ndarray) or type(value) is NDArray:
                    setattr(checked, field, graph.constant(as_numpy(value)))
            out = build_loss(spec, checked, mode, params)
        out.rename(target)
        return out.mark_as_loss()

    @_leading_name
    def softmax_cross_entropy(self, labels: Array, logits: Array, weights: Array | None = None,
                              reduction: LossReduce | str = DEFAULT_REDUCTION,
                              label_smoothing: float = 0.0, *, name: str | None = None) -> Any:
        """Softmax cross entropy on logits: ``E = -sum_c labels_c * log_softmax(logits)_c``
        over the last dim, so ``[batch, classes]`` gives a ``[batch]`` per-example loss. With
        ``label_smoothing`` s the labels become ``labels * (1 - s) + s / classes``.

        >>> import nd4py as nd
        >>> round(nd.loss.softmax_cross_entropy([[0.0, 1.0]], [[1.0, 1.0]]).item(), 4)
        0.6931
        """
        return self._apply("softmax_cross_entropy", labels, logits, weights, reduction, name,
                           label_smoothing=label_smoothing)

    @_leading_name
    def cross_entropy(self, probabilities: Array, labels: Array, weights: Array | None = None,
                      reduction: LossReduce | str = DEFAULT_REDUCTION, epsilon: float = 1e-7,
                      *, name: str | None = None) -> Any:
        """Categorical cross entropy of class **probabilities** (a softmax output, not
        logits): ``E = -sum_c labels_c * log(clip(probabilities_c, epsilon, 1))`` over the last
        dim. Note the argument order, **probabilities first**: seed 000's
        ``samediff.loss.crossEntropy(output, labels)`` (and PyTorch's ``(input, target)``);
        every other loss here takes labels first, as ND4J's. From logits,
        ``softmax_cross_entropy(labels, logits)`` is the numerically stable form.

        >>> import nd4py as nd
        >>> round(nd.loss.cross_entropy([[0.5, 0.5]], [[0.0, 1.0]]).item(), 4)  # ln 2
        0.6931
        """
        return self._apply("cross_entropy", labels, probabilities, weights, reduction, name,
                           epsilon=epsilon)

    @_leading_name
    def sparse_softmax_cross_entropy(self, labels: Array, logits: Array,
                                     weights: Array | None = None,
                                     reduction: LossReduce | str = DEFAULT_REDUCTION, *,
                                     name: str | None = None) -> Any:
        """Softmax cross entropy with integer class labels (shape of the logits without the
        class dim): the same as ``softmax_cross_entropy`` with one-hot labels. ND4J's
        argument order ``(logits, labels)`` is recognised by the dtypes and accepted too.

        >>> import nd4py as nd
        >>> round(nd.loss.sparse_softmax_cross_entropy([1], [[1.0, 1.0]]).item(), 4)
        0.6931
        """
        return self._apply("sparse_softmax_cross_entropy", labels, logits, weights, reduction,
                           name)

    @_leading_name
    def sigmoid_cross_entropy(self, labels: Array, logits: Array, weights: Array | None = None,
                              reduction: LossReduce | str = DEFAULT_REDUCTION,
                              label_smoothing: float = 0.0, *, name: str | None = None) -> Any:
        """Binary cross entropy on logits, elementwise, in the stable form
        ``softplus(x) - x * z``. With ``label_smoothing`` s: ``z = z * (1 - s) + 0.5 s``.

        >>> import nd4py as nd
        >>> round(nd.loss.sigmoid_cross_entropy([[1.0, 0.0]], [[0.0, 0.0]]).item(), 4)
        0.6931
        """
        return self._apply("sigmoid_cross_entropy", labels, logits, weights, reduction, name,
                           label_smoothing=label_smoothing)

    @_leading_name
    def mean_squared_error(self, labels: Array, predictions: Array, weights: Array | None = None,
                           reduction: LossReduce | str = DEFAULT_REDUCTION, *,
                           name: str | None = None) -> Any:
        """Squared error ``(predictions - labels)^2`` per element; averaged (the default
        reduction) it is the mean squared error.

        >>> import nd4py as nd
        >>> nd.loss.mean_squared_error([[1.0, 2.0]], [[1.5, 2.0]]).item()
        0.125
        """
        return self._apply("mean_squared_error", labels, predictions, weights, reduction, name)

    @_leading_name
    def absolute_difference(self, labels: Array, predictions: Array,
                            weights: Array | None = None,
                            reduction: LossReduce | str = DEFAULT_REDUCTION, *,
                            name: str | None = None) -> Any:
        """Absolute error ``|predictions - labels|`` per element.

        >>> import nd4py as nd
        >>> nd.loss.absolute_difference([[1.0, 2.0]], [[1.5, 1.0]], reduction="sum").item()
        1.5
        """
        return self._apply("absolute_difference", labels, predictions, weights, reduction, name)

    @_leading_name
    def log_loss(self, labels: Array, predictions: Array, weights: Array | None = None,
                 reduction: LossReduce | str = DEFAULT_REDUCTION, epsilon: float = 1e-7, *,
                 name: str | None = None) -> Any:
        """Binary cross entropy on probabilities, per element:
        ``-(z log(p + eps) + (1 - z) log(1 - p + eps))``, ``p`` clipped to [0, 1] first.

        >>> import nd4py as nd
        >>> round(nd.loss.log_loss([[1.0, 0.0]], [[0.5, 0.5]]).item(), 4)
        0.6931
        """
        return self._apply("log_loss", labels, predictions, weights, reduction, name,
                           epsilon=epsilon)

    @_leading_name
    def huber_loss(self, labels: Array, predictions: Array, weights: Array | None = None,
                   reduction: LossReduce | str = DEFAULT_REDUCTION, delta: float = 1.0, *,
                   name: str | None = None) -> Any:
        """Huber loss per element, with ``d = predictions - labels``: ``0.5 d^2`` where
        ``|d| < delta``, else ``delta |d| - 0.5 delta^2``.

        >>> import nd4py as nd
        >>> nd.loss.huber_loss([[0.0, 0.0]], [[0.5, 3.0]], reduction="none").numpy().tolist()
        [[0.125, 2.5]]
        """
        return self._apply("huber_loss", labels, predictions, weights, reduction, name,
                           delta=delta)

    @_leading_name
    def cosine_distance(self, labels: Array, predictions: Array, weights: Array | None = None,
                        reduction: LossReduce | str = DEFAULT_REDUCTION, dimension: int = -1, *,
                        name: str | None = None) -> Any:
        """Cosine distance ``1 - sum(labels * predictions)`` along ``dimension`` (kept as size
        1). Like ND4J it assumes unit-norm inputs: normalize them first (divide by
        ``norm2(dimension, keep_dims=True)``) if they are not.

        >>> import nd4py as nd
        >>> nd.loss.cosine_distance([[1.0, 0.0]], [[0.0, 1.0]], reduction="none").shape
        (1, 1)
        """
        return self._apply("cosine_distance", labels, predictions, weights, reduction, name,
                           dimension=dimension)

    @_leading_name
    def hinge_loss(self, labels: Array, predictions: Array, weights: Array | None = None,
                   reduction: LossReduce | str = DEFAULT_REDUCTION, *,
                   name: str | None = None) -> Any:
        """Hinge loss ``max(0, 1 - t * predictions)`` per element, with labels in {0, 1} used
        as ``t`` in {-1, 1} (as ND4J).

        >>> import nd4py as nd
        >>> nd.loss.hinge_loss([[1.0, 0.0]], [[0.5, 0.5]], reduction="none").numpy().tolist()
        [[0.5, 1.5]]
        """
        return self._apply("hinge_loss", labels, predictions, weights, reduction, name)

    softmaxCrossEntropy = softmax_cross_entropy
    sparseSoftmaxCrossEntropy = sparse_softmax_cross_entropy
    crossEntropy = cross_entropy
    sigmoidCrossEntropy = sigmoid_cross_entropy
    meanSquaredError = mean_squared_error
    absoluteDifference = absolute_difference
    logLoss = log_loss
    huberLoss = huber_loss
    cosineDistance = cosine_distance
    hingeLoss = hinge_loss

    def __dir__(self) -> list[str]:
        return sorted([*LOSSES, *(d.nd4j_name for d in LOSSES.values())])

    def __repr__(self) -> str:
        return f"<{self._title}: {', '.join(LOSSES)}>"
