"""What every evaluator shares: the protocol, input checks, count-based metrics, text tables.

Evaluators accumulate *sufficient statistics* batch by batch (confusion counts, sums, co-moments)
so memory does not grow with the data, ``merge`` is exact, and training loops can drive any of
them through the same five methods: ``eval``, ``reset``, ``merge``, ``stats``, ``metrics``.

The accumulation is written once, here: an evaluator's *configuration* (thresholds, modes,
names) is kept by ``reset`` and must agree for ``merge``; its *state* is a dict of named fields
(count and sum arrays, kept score batches) over a number of columns (classes, outputs, regression
columns; a single ROC is one column). Each evaluator declares its fields and how each one merges
(``add``, ``concat`` or its own ``_combine``), how an empty state looks for ``width`` columns,
and how one batch becomes a state of the same form; ``reset``, ``merge``, the column-count
checks and column lookup by index or name are this module's.
"""
from __future__ import annotations

import abc
import warnings
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from ..errors import EvaluationError

__all__ = ["BaseEvaluation", "EvaluationWarning", "EvaluationError", "add", "concat"]


class EvaluationWarning(UserWarning):
    """An averaged metric left out classes/columns for which it is undefined (e.g. precision of a
    class the model never predicted). Filter it with ``warnings.simplefilter("ignore",
    EvaluationWarning)``."""


State = dict[str, Any]  # field name -> accumulated value (an array, an int, a list of batches)


def add(mine: Any, theirs: Any) -> Any:
    """Merge rule of counts and sums."""
    return mine + theirs


def concat(mine: list, theirs: list) -> list:
    """Merge rule of kept batches (exact ROC scores): ``mine`` is this evaluator's own list."""
    mine.extend(theirs)
    return mine


class BaseEvaluation(abc.ABC):
    """The protocol of every evaluator (ND4J's ``IEvaluation``).

    ``eval`` accumulates one batch, ``reset`` forgets everything accumulated (the configuration
    stays), ``merge`` adds another evaluator's accumulated state (same kind and configuration),
    ``stats`` is a readable report and ``metrics`` a flat ``{name: float}`` of headline numbers.
    ``str(ev)`` is ``ev.stats()``.

    Subclasses declare ``_fields`` (``{name: merge rule}``), ``_unit`` (what a column is, for
    messages and lookups), ``_names_attr`` (the attribute holding column names, or ``None``),
    implement ``_empty(width)``, call ``_start(width)`` at the end of ``__init__`` (``width``
    fixed by the configuration, or ``None`` to take it from the first batch) and hand each
    validated batch to ``_accumulate``.
    """

    _fields: ClassVar[dict[str, Callable[[Any, Any], Any]]] = {}
    _unit: ClassVar[str] = "column"
    _names_attr: ClassVar[str | None] = "labels_list"

    _fixed_width: int | None
    _width: int | None
    _state: State | None

    @abc.abstractmethod
    def eval(self, labels: Any, predictions: Any, mask: Any = None) -> None:
        """Accumulate one batch of labels and predictions (rows are examples)."""

    @abc.abstractmethod
    def stats(self) -> str:
        """A readable multi-line report."""

    @abc.abstractmethod
    def metrics(self) -> dict[str, float]:
        """The headline metrics as a flat ``{name: value}`` dict (used by training history)."""

    @abc.abstractmethod
    def _empty(self, width: int) -> State:
        """A state with nothing accumulated over ``width`` columns (one value per field)."""

    def __str__(self) -> str:
        return self.stats()

    # --- the shared state protocol --------------------------------------------------------------

    def _start(self, width: int | None) -> None:
        self._fixed_width = width
        self.reset()

    def reset(self) -> None:
        """Forget the accumulated statistics; the configuration is kept (a column count that
        was only inferred from data is forgotten too).

        >>> from samediff.evaluation import Evaluation
        >>> ev = Evaluation(num_classes=2); ev.eval([1], [1]); ev.reset(); ev.num_examples
        0
        """
        self._width = self._fixed_width
        self._state = None if self._width is None else self._empty(self._width)

    def _ensure_state(self, width: int) -> State:
        """The state, created for ``width`` columns on the first batch (checked by the caller)."""
        if self._state is None:
            self._width, self._state = width, self._empty(width)
        return self._state

    def _combine(self, mine: State, theirs: State) -> State:
        """Fold ``theirs`` into ``mine`` field by field with the declared rules; a batch may
        carry only the fields it changes. Evaluators whose fields combine jointly override it."""
        return {k: rule(mine[k], theirs[k]) if k in theirs else mine[k]
                for k, rule in self._fields.items()}

    def _accumulate(self, width: int, batch: State) -> None:
        self._state = self._combine(self._ensure_state(width), batch)

    def merge(self, other: BaseEvaluation) -> None:
        """Add the statistics accumulated by ``other`` (same class and configuration); merging
        evaluators of parts of the data equals evaluating the whole.

        >>> from samediff.evaluation import Evaluation
        >>> a, b = Evaluation(num_classes=2), Evaluation(num_classes=2)
        >>> a.eval([0, 1], [0, 0]); b.eval([1], [1]); a.merge(b); a.confusion_matrix().tolist()
        [[1, 0], [1, 1]]
        """
        self._check_merge(other)
        problem = self._merge_mismatch(other)
        if problem is not None:
            raise EvaluationError(problem)
        if other._state is None:  # nothing evaluated and no column count: nothing to add
            return
        assert other._width is not None
        if self._width is not None and self._width != other._width:
            raise EvaluationError(self._width_mismatch(self._width, other._width))
        self._accumulate(other._width, other._state)
        if self._names_attr is not None and getattr(self, self._names_attr) is None:
            setattr(self, self._names_attr, getattr(other, self._names_attr))

    def _check_merge(self, other: Any) -> None:
        if type(other) is not type(self):
            raise EvaluationError(
                f"{type(self).__name__}.merge: cannot merge a {type(other).__name__}; merge only "
                f"evaluators of the same class (evaluate both sides with {type(self).__name__})")

    def _merge_mismatch(self, other: Any) -> str | None:
        """Why ``other``'s configuration keeps its state from being added (``None``: it agrees)."""
        return None

    def _width_mismatch(self, mine: int, theirs: int) -> str:
        return (f"{type(self).__name__}.merge: {mine} vs {theirs} {self._unit}s; only "
                f"evaluations of the same outputs merge")

    def _column(self, key: int | str) -> int:
        """A column given by index or by name -> index, checked against the column count."""
        names = None if self._names_attr is None else getattr(self, self._names_attr)
        return resolve_index(key, names, self._width, self._unit, type(self).__name__)

    def _column_name(self, i: int, default: str | None = None) -> str:
        names = None if self._names_attr is None else getattr(self, self._names_attr)
        return names[i] if names else (str(i) if default is None else default)


# --- input conversion --------------------------------------------------------------------------

def to_array(x: Any, what: str, owner: str) -> np.ndarray:
    """``np.asarray`` (zero-copy for NDArray and numpy arrays) that insists on numeric data."""
    try:
        a = np.asarray(x)
    except (ValueError, TypeError) as e:  # ragged nested lists
        raise EvaluationError(f"{owner}.eval: {what} is not a rectangular array ({e})") from None
    if a.dtype.kind not in "biuf":
        raise EvaluationError(f"{owner}.eval: {what} must be numeric or bool, got dtype "
                              f"{a.dtype}; convert it with np.asarray(..., dtype=float)")
    return a


def check_rows(labels: np.ndarray, predictions: np.ndarray, owner: str,
               max_ndim: int = 2) -> None:
    for what, a in (("labels", labels), ("predictions", predictions)):
        if not 1 <= a.ndim <= max_ndim:
            raise EvaluationError(
                f"{owner}.eval: {what} has shape {a.shape}; expected [n] or [n, columns]. "
                f"Flatten time series to [n * steps, columns] (and their mask to [n * steps])")
    if labels.shape[0] != predictions.shape[0]:
        raise EvaluationError(
            f"{owner}.eval: labels {labels.shape} and predictions {predictions.shape} have "
            f"different numbers of rows (examples); pass the labels of the same batch")


def _mask_values(mask: Any, owner: str) -> np.ndarray:
    m = to_array(mask, "mask", owner)
    if m.dtype.kind != "b" and not np.all((m == 0) | (m == 1)):
        # a mask with other values is usually per-example weights, which evaluators do not take
        raise EvaluationError(f"{owner}.eval: mask values must be 0 or 1 (or bool), got values "
                              f"such as {m[(m != 0) & (m != 1)][:3].tolist()}")
    return m.astype(bool)


def row_mask(mask: Any, n: int, owner: str) -> np.ndarray | None:
    """A per-example mask ``[n]`` or ``[n, 1]`` as bool ``[n]`` (``None`` when no mask)."""
    if mask is None:
        return None
    m = _mask_values(mask, owner)
    if m.ndim == 2 and m.shape[1] == 1:
        m = m[:, 0]
    if m.shape != (n,):
        raise EvaluationError(f"{owner}.eval: mask has shape {m.shape}; {owner} takes a "
                              f"per-example mask of shape ({n},) or ({n}, 1) (per-output masks: "
                              f"EvaluationBinary, ROCBinary, RegressionEvaluation)")
    return m


def output_mask(mask: Any, shape: tuple[int, int], owner: str) -> np.ndarray | None:
    """A per-example (``[n]``, ``[n, 1]``) or per-output (``[n, C]``) mask as bool ``[n, C]``."""
    if mask is None:
        return None
    m = _mask_values(mask, owner)
    n, c = shape
    if m.ndim == 1 and m.shape[0] == n:
        m = m[:, None]
    if m.ndim != 2 or m.shape[0] != n or m.shape[1] not in (1, c):
        raise EvaluationError(f"{owner}.eval: mask has shape {m.shape}; expected ({n},), "
                              f"({n}, 1) (per example) or ({n}, {c}) (per output)")
    return np.broadcast_to(m, shape)


def check_no_nan(a: np.ndarray, what: str, owner: str, finite: bool = False) -> None:
    bad = ~np.isfinite(a) if finite else np.isnan(a)
    if a.dtype.kind == "f" and bad.any():
        row = int(np.argwhere(bad)[0][0])
        kind = "non-finite values" if finite else "NaN"
        raise EvaluationError(f"{owner}.eval: {what} {a.shape} contain {kind} (first at row "
                              f"{row}); check the model output, or mask those rows out")


def binary_values(a: np.ndarray, what: str, owner: str) -> np.ndarray:
    """0/1 labels as bool; soft labels would silently turn integer counts fractional."""
    if a.dtype.kind != "b" and not np.all((a == 0) | (a == 1)):
        raise EvaluationError(f"{owner}.eval: {what} must be 0 or 1, got values such as "
                              f"{np.unique(a[(a != 0) & (a != 1)])[:3].tolist()}; binarize them "
                              f"first (e.g. labels > 0.5)")
    return a.astype(bool)


def resolve_index(key: int | str, names: Sequence[str] | None, size: int | None,
                  what: str, owner: str) -> int:
    """A class/column given by index or by name -> index, checked against ``size``."""
    if isinstance(key, str):
        if names is None or key not in names:
            known = list(names) if names else "none (pass names to the constructor)"
            raise EvaluationError(f"{owner}: no {what} named {key!r}; known names: {known}")
        return list(names).index(key)
    if size is None:
        raise EvaluationError(f"{owner}: nothing has been evaluated yet, so {what} {key} is "
                              f"unknown; call eval(...) first")
    i = int(key)
    if not 0 <= i < size:
        raise EvaluationError(f"{owner}: {what} index {key} is out of range; valid indices "
                              f"are 0..{size - 1}")
    return i


# --- metrics from confusion counts ------------------------------------------------------------
# One definition per metric, written on count arrays: applied per class, to pooled counts (micro
# averaging) and per output column of EvaluationBinary. Each returns (value, defined); undefined
# entries (zero denominator) have value 0.0, ND4J's default edge value.

Counts = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # tp, fp, fn, tn (float64)
Rule = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _ratio(num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    defined = den > 0
    return np.where(defined, num / np.where(defined, den, 1.0), 0.0), defined


def precision_rule(tp, fp, fn, tn):
    return _ratio(tp, tp + fp)


def recall_rule(tp, fp, fn, tn):
    return _ratio(tp, tp + fn)


def fpr_rule(tp, fp, fn, tn):
    return _ratio(fp, fp + tn)


def fnr_rule(tp, fp, fn, tn):
    return _ratio(fn, fn + tp)


def accuracy_rule(tp, fp, fn, tn):
    return _ratio(tp + tn, tp + fp + fn + tn)


def f_beta_rule(beta: float) -> Rule:
    def rule(tp, fp, fn, tn):
        p, dp = precision_rule(tp, fp, fn, tn)
        r, dr = recall_rule(tp, fp, fn, tn)
        den = beta * beta * p + r
        # ND4J: F is 0 when precision or recall is 0 (avoids 0/0 on the harmonic mean)
        value = np.where((p == 0) | (r == 0), 0.0,
                         (1 + beta * beta) * p * r / np.where(den > 0, den, 1.0))
        return value, dp & dr
    return rule


def g_measure_rule(tp, fp, fn, tn):
    p, dp = precision_rule(tp, fp, fn, tn)
    r, dr = recall_rule(tp, fp, fn, tn)
    return np.sqrt(p * r), dp & dr


def mcc_rule(tp, fp, fn, tn):
    den = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return _ratio(tp * tn - fp * fn, den)


def false_alarm_rule(tp, fp, fn, tn):
    a, da = fpr_rule(tp, fp, fn, tn)
    b, db = fnr_rule(tp, fp, fn, tn)
    return (a + b) / 2, da & db


def mean_defined(values: np.ndarray, defined: np.ndarray) -> float:
    """Mean over the defined entries; NaN when none is defined (e.g. nothing evaluated)."""
    return float(values[defined].mean()) if defined.any() else float("nan")


def warn_excluded(owner: str, metric: str, names: Sequence[str], reason: str,
                  unit: tuple[str, str] = ("class", "classes")) -> None:
    # stacklevel 4: user code -> public metric method -> _metric/_average -> here
    warnings.warn(f"{owner}: the averaged {metric} leaves out {len(names)} "
                  f"{unit[0] if len(names) == 1 else unit[1]} with {reason}: {list(names)}",
                  EvaluationWarning, stacklevel=4)


# --- text reports ------------------------------------------------------------------------------

def fmt(x: float, digits: int = 4) -> str:
    return "NaN" if np.isnan(x) else f"{x:.{digits}f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Right-aligned columns (first column left-aligned), widths from the contents."""
    cells = [list(map(str, headers))] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for r in cells:
        parts = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def banner(title: str, width: int = 66) -> str:
    return f"{title}".center(width, "=")
