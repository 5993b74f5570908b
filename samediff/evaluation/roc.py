"""ROC and precision-recall analysis: ND4J's ``ROC``, ``ROCBinary`` and ``ROCMultiClass``.

Two modes, as in ND4J:

- **exact** (``threshold_steps=0``, the default): every (score, label) pair is kept, and the
  curve has one point per distinct score. Tied scores move TP and FP together, giving a
  diagonal segment, so the trapezoidal AUC equals the Mann–Whitney U statistic with ties
  counted as 1/2. Memory grows with the data: this is the one evaluator that stores scores.
- **binned** (``threshold_steps=k > 0``): only histograms over ``k + 1`` thresholds
  ``i / k`` for ``i = 0..k`` are kept (predicted positive when ``score >= threshold``, as in ND4J);
  constant memory, AUC approximate, and scores must be probabilities in ``[0, 1]``.

Curves are ordered by decreasing threshold and start at a sentinel threshold ``+inf`` where
nothing is predicted positive: ROC point (0, 0), precision-recall point (recall 0,
precision 1).
"""
from __future__ import annotations

import abc

from typing import Any, NamedTuple, Sequence

import numpy as np

from .base import (BaseEvaluation, EvaluationError, State, add, banner, binary_values,
                   check_no_nan, check_rows, concat, fmt, output_mask, row_mask, table, to_array)

__all__ = ["ROC", "ROCBinary", "ROCMultiClass", "RocCurve", "PrecisionRecallCurve"]


class RocCurve(NamedTuple):
    """ROC curve points by decreasing threshold: unpack as ``fpr, tpr, thresholds``."""
    fpr: np.ndarray
    tpr: np.ndarray
    thresholds: np.ndarray


class PrecisionRecallCurve(NamedTuple):
    """Precision-recall points by decreasing threshold (increasing recall)."""
    precision: np.ndarray
    recall: np.ndarray
    thresholds: np.ndarray


def _trapezoid(y: np.ndarray, x: np.ndarray) -> float:
    return float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2.0))


def _check_steps(threshold_steps: int, owner: str) -> int:
    if int(threshold_steps) != threshold_steps or threshold_steps < 0:
        raise EvaluationError(f"{owner}: threshold_steps={threshold_steps}; use 0 for exact "
                              f"mode or a positive integer for binned mode")
    return int(threshold_steps)


def _grid(steps: int) -> np.ndarray:
    # i / k is correctly rounded, so a score written 0.7 meets threshold 7/10 (linspace's
    # i * (1/k) can land one ulp above it)
    return np.arange(steps + 1) / steps


def _check_scores(p: np.ndarray, steps: int, owner: str) -> None:
    check_no_nan(p, "predictions", owner)
    if steps > 0 and p.size and (p.min() < 0 or p.max() > 1):
        raise EvaluationError(
            f"{owner}.eval: binned mode (threshold_steps={steps}) needs probabilities in [0, 1]"
            f", got scores in [{p.min():g}, {p.max():g}]; apply sigmoid/softmax first or use "
            f"exact mode (threshold_steps=0), which takes any score")


class ROC(BaseEvaluation):
    """Binary ROC / precision-recall curves and their areas (AUC, AUPRC).

    Inputs per batch: ``labels`` 0/1 as ``[n]``, ``[n, 1]`` or one-hot ``[n, 2]``;
    ``predictions`` the score of class 1 as ``[n]``, ``[n, 1]``, or softmax ``[n, 2]`` (column
    1 is used); ``mask`` per example ``[n]`` / ``[n, 1]``.

    Args:
        threshold_steps: 0 = exact (keeps all scores; any real-valued score), ``k > 0`` = binned
            over thresholds ``i / k`` (probabilities only, constant memory).

    AUC and AUPRC are NaN while there are no positives (and, for AUC, no negatives).
    ``calculate_aucpr`` integrates the precision-recall curve with the trapezoid rule like
    ND4J; it is not sklearn's step-wise ``average_precision_score``.

    >>> roc = ROC()
    >>> roc.eval([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    >>> roc.calculate_auc()
    0.75
    >>> fpr, tpr, thr = roc.get_roc_curve(); fpr.tolist(), tpr.tolist()
    ([0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.5, 0.5, 1.0, 1.0])
    >>> a, b = ROC(), ROC(); a.eval([0, 1], [.2, .6]); b.eval([1], [.1]); a.merge(b)
    >>> a.calculate_auc()
    0.5
    """

    # exact mode keeps every batch of scores and labels; binned mode keeps, per actual class, a
    # histogram of k = number of thresholds <= score (0..steps+1)
    _fields = {"scores": concat, "labels": concat, "pos_hist": add, "neg_hist": add}
    _names_attr = None

    def __init__(self, threshold_steps: int = 0) -> None:
        self.threshold_steps = _check_steps(threshold_steps, "ROC")
        self._start(1)  # a binary ROC is one column

    @property
    def exact(self) -> bool:
        """True in exact mode (``threshold_steps == 0``)."""
        return self.threshold_steps == 0

    def _empty(self, width: int) -> State:
        size = self.threshold_steps + 2
        return {"scores": [], "labels": [], "pos_hist": np.zeros(size, np.int64),
                "neg_hist": np.zeros(size, np.int64)}

    def eval(self, labels: Any, predictions: Any, mask: Any = None) -> None:
        """Accumulate one batch.

        >>> roc = ROC(threshold_steps=4)
        >>> roc.eval([[1, 0], [0, 1]], [[0.8, 0.2], [0.3, 0.7]]); roc.calculate_auc()
        1.0
        """
        y = to_array(labels, "labels", "ROC")
        p = to_array(predictions, "predictions", "ROC")
        check_rows(y, p, "ROC")
        y, p = self._positive_column(y, "labels"), self._positive_column(p, "predictions")
        keep = row_mask(mask, y.shape[0], "ROC")
        if keep is not None:
            y, p = y[keep], p[keep]
        _check_scores(p, self.threshold_steps, "ROC")
        self._add(binary_values(y, "labels", "ROC"), p)

    @staticmethod
    def _positive_column(a: np.ndarray, what: str) -> np.ndarray:
        if a.ndim == 1:
            return a
        if a.shape[1] in (1, 2):
            return a[:, a.shape[1] - 1]
        raise EvaluationError(
            f"ROC.eval: {what} has shape {a.shape}; ROC is binary and takes [n], [n, 1] or "
            f"[n, 2]; use ROCMultiClass for {a.shape[1]} classes or ROCBinary for multi-label")

    def _add(self, actual: np.ndarray, scores: np.ndarray) -> None:
        """Accumulate validated 1-D bool labels and float scores (also used per column)."""
        if self.exact:
            self._accumulate(1, {"labels": [np.asarray(actual, bool)],
                                 "scores": [scores.astype(np.float64)]})
            return
        k = np.searchsorted(_grid(self.threshold_steps), scores, side="right")
        size = self.threshold_steps + 2
        self._accumulate(1, {"pos_hist": np.bincount(k[actual], minlength=size),
                             "neg_hist": np.bincount(k[~actual], minlength=size)})

    def _exact_data(self) -> tuple[np.ndarray, np.ndarray]:
        state = self._state
        assert state is not None
        if len(state["scores"]) != 1:  # concatenate once, then keep the single array
            state["scores"] = [np.concatenate(state["scores"]) if state["scores"]
                               else np.zeros(0)]
            state["labels"] = [np.concatenate(state["labels"]) if state["labels"]
                               else np.zeros(0, bool)]
        return state["scores"][0], state["labels"][0]

    def _merge_mismatch(self, other: Any) -> str | None:
        if other.threshold_steps == self.threshold_steps:
            return None
        return (f"ROC.merge: threshold_steps differ ({self.threshold_steps} vs "
                f"{other.threshold_steps}); evaluate both in the same mode")

    def _hist(self, key: str) -> np.ndarray:
        assert self._state is not None
        return self._state[key]

    # --- counts and curves ---------------------------------------------------------------------

    def count_actual_positive(self) -> int:
        """Number of examples with label 1."""
        if self.exact:
            return int(self._exact_data()[1].sum())
        return int(self._hist("pos_hist").sum())

    def count_actual_negative(self) -> int:
        """Number of examples with label 0."""
        if self.exact:
            return int((~self._exact_data()[1]).sum())
        return int(self._hist("neg_hist").sum())

    def _points(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(thresholds, TP, FP) by decreasing threshold, starting with the +inf sentinel."""
        if self.exact:
            s, y = self._exact_data()
            order = np.argsort(-s, kind="stable")
            s, y = s[order], y[order]
            # last index of each run of equal scores; compare values (inf - inf is NaN)
            last = np.r_[np.flatnonzero(s[1:] != s[:-1]), len(s) - 1] if len(s) else \
                np.zeros(0, np.int64)
            tp = np.cumsum(y)[last]
            fp = last + 1 - tp
            thresholds = s[last]
        else:
            # count at threshold i = examples with k > i (k = number of thresholds <= score)
            pos = np.cumsum(self._hist("pos_hist")[::-1])[::-1][1:]
            neg = np.cumsum(self._hist("neg_hist")[::-1])[::-1][1:]
            thresholds = _grid(self.threshold_steps)[::-1]
            tp, fp = pos[::-1], neg[::-1]
        return (np.r_[np.inf, thresholds], np.r_[0, tp].astype(np.float64),
                np.r_[0, fp].astype(np.float64))

    def get_roc_curve(self) -> RocCurve:
        """``RocCurve(fpr, tpr, thresholds)``, by decreasing threshold from (0, 0) to (1, 1);
        rates are NaN while a class is absent."""
        thresholds, tp, fp = self._points()
        with np.errstate(invalid="ignore", divide="ignore"):
            return RocCurve(fp / self.count_actual_negative(), tp / self.count_actual_positive(),
                            thresholds)

    def get_precision_recall_curve(self) -> PrecisionRecallCurve:
        """``PrecisionRecallCurve(precision, recall, thresholds)``; where nothing is predicted
        positive precision is 1 (ND4J's convention).

        >>> roc = ROC(); roc.eval([1, 0, 1], [.9, .5, .2])
        >>> roc.get_precision_recall_curve().precision.tolist()
        [1.0, 1.0, 0.5, 0.6666666666666666]
        """
        thresholds, tp, fp = self._points()
        predicted = tp + fp
        precision = np.where(predicted > 0, tp / np.where(predicted > 0, predicted, 1), 1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            recall = tp / self.count_actual_positive()
        return PrecisionRecallCurve(precision, recall, thresholds)

    def calculate_auc(self) -> float:
        """Area under the ROC curve (trapezoids; exact mode = Mann–Whitney U / (P·N)).

        >>> roc = ROC(); roc.eval([0, 1, 0, 1], [.5, .5, .2, .9]); roc.calculate_auc()
        0.875
        """
        if self.count_actual_positive() == 0 or self.count_actual_negative() == 0:
            return float("nan")
        fpr, tpr, _ = self.get_roc_curve()
        return _trapezoid(tpr, fpr)

    def calculate_aucpr(self) -> float:
        """Area under the precision-recall curve (trapezoids over recall, from (0, 1)).

        >>> roc = ROC(); roc.eval([1, 0, 1], [.9, .5, .2]); round(roc.calculate_aucpr(), 4)
        0.7917
        """
        if self.count_actual_positive() == 0:
            return float("nan")
        precision, recall, _ = self.get_precision_recall_curve()
        return _trapezoid(precision, recall)

    def metrics(self) -> dict[str, float]:
        """``auc`` and ``aucpr``."""
        return {"auc": self.calculate_auc(), "aucpr": self.calculate_aucpr()}

    def stats(self) -> str:
        """AUC, AUPRC, class counts and the mode."""
        pos, neg = self.count_actual_positive(), self.count_actual_negative()
        mode = ("exact (all scores kept)" if self.exact
                else f"binned ({self.threshold_steps} threshold steps)")
        auc, aucpr = fmt(self.calculate_auc()), fmt(self.calculate_aucpr())
        return "\n".join([banner("ROC Metrics"),
                          f" AUC (Area under ROC Curve):                {auc}",
                          f" AUPRC (Area under Precision/Recall Curve): {aucpr}",
                          f" Examples: {pos + neg} ({pos} positive, {neg} negative); mode: {mode}",
                          "=" * 66]) + "\n"


def _merge_columns(mine: list[ROC], theirs: list[ROC]) -> list[ROC]:
    for a, b in zip(mine, theirs):
        a.merge(b)
    return mine


class _ROCColumns(BaseEvaluation):
    """One binary ``ROC`` per column; subclasses say how inputs become per-column labels."""

    _fields = {"rocs": _merge_columns}  # one ROC's state per column, merged column by column
    _unit = "column"

    def __init__(self, threshold_steps: int = 0, labels_list: Sequence[str] | None = None) -> None:
        self.threshold_steps = _check_steps(threshold_steps, type(self).__name__)
        self.labels_list: list[str] | None = (None if labels_list is None
                                              else [str(s) for s in labels_list])
        self._start(None)  # the number of columns comes from the first batch, after each reset

    def _empty(self, width: int) -> State:
        return {"rocs": [ROC(self.threshold_steps) for _ in range(width)]}

    @property
    def _rocs(self) -> list[ROC] | None:
        return None if self._state is None else self._state["rocs"]

    @abc.abstractmethod
    def _prepare(self, y: np.ndarray, p: np.ndarray,
                 mask: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """-> (actual bool [n, C], scores [n, C], keep bool [n, C]), validated."""

    def eval(self, labels: Any, predictions: Any, mask: Any = None) -> None:
        """Accumulate one batch (see the class docstring for shapes)."""
        owner = type(self).__name__
        y = to_array(labels, "labels", owner)
        p = to_array(predictions, "predictions", owner)
        check_rows(y, p, owner)
        actual, scores, keep = self._prepare(y, p, mask)
        c = scores.shape[1]
        if self.labels_list is not None and len(self.labels_list) != c:
            raise EvaluationError(f"{owner}.eval: inputs have {c} {self._unit}s but labels_list "
                                  f"has {len(self.labels_list)} names")
        if self._rocs is not None and len(self._rocs) != c:
            raise EvaluationError(f"{owner}.eval: inputs have {c} {self._unit}s but earlier "
                                  f"batches had {len(self._rocs)}; reset() between problems")
        # each column's ROC accumulates its own slice (exact mode keeps the scores per column)
        for j, roc in enumerate(self._ensure_state(c)["rocs"]):
            roc._add(actual[keep[:, j], j], scores[keep[:, j], j])

    def _merge_mismatch(self, other: Any) -> str | None:
        if other.threshold_steps == self.threshold_steps:
            return None
        return (f"{type(self).__name__}.merge: threshold_steps differ "
                f"({self.threshold_steps} vs {other.threshold_steps})")

    @property
    def num_columns(self) -> int | None:
        """Number of columns / classes (``None`` before the first batch)."""
        return self._width

    def get_roc(self, col: int | str) -> ROC:
        """The binary ``ROC`` of one column (by index or name)."""
        i = self._column(col)
        assert self._rocs is not None
        return self._rocs[i]

    def calculate_auc(self, col: int | str) -> float:
        """AUC of one column (NaN if it has no positives or no negatives)."""
        return self.get_roc(col).calculate_auc()

    def calculate_aucpr(self, col: int | str) -> float:
        """AUPRC of one column."""
        return self.get_roc(col).calculate_aucpr()

    def get_roc_curve(self, col: int | str) -> RocCurve:
        """ROC curve of one column."""
        return self.get_roc(col).get_roc_curve()

    def get_precision_recall_curve(self, col: int | str) -> PrecisionRecallCurve:
        """Precision-recall curve of one column."""
        return self.get_roc(col).get_precision_recall_curve()

    def _mean(self, values: list[float]) -> float:
        # columns whose AUC is undefined (one class absent) are left out, as in macro averages
        v = np.array([x for x in values if not np.isnan(x)])
        return float(v.mean()) if len(v) else float("nan")

    def calculate_average_auc(self) -> float:
        """Mean AUC over the columns where it is defined."""
        return self._mean([r.calculate_auc() for r in self._rocs or []])

    def calculate_average_aucpr(self) -> float:
        """Mean AUPRC over the columns where it is defined."""
        return self._mean([r.calculate_aucpr() for r in self._rocs or []])

    def metrics(self) -> dict[str, float]:
        """``auc`` and ``aucpr``, averaged over columns."""
        return {"auc": self.calculate_average_auc(), "aucpr": self.calculate_average_aucpr()}

    def stats(self) -> str:
        """A table of AUC, AUPRC and class counts per column, and the averages."""
        title = f"{type(self).__name__} Metrics"
        if self._rocs is None:
            return f"{banner(title)}\n No examples evaluated yet\n"
        rows = [[self._column_name(j), fmt(r.calculate_auc()),
                 fmt(r.calculate_aucpr()), r.count_actual_positive(), r.count_actual_negative()]
                for j, r in enumerate(self._rocs)]
        return "\n".join([banner(title),
                          table(["Label", "AUC", "AUPRC", "# Pos", "# Neg"], rows), "",
                          f" Average AUC:   {fmt(self.calculate_average_auc())}",
                          f" Average AUPRC: {fmt(self.calculate_average_aucpr())}",
                          "=" * 66]) + "\n"


class ROCBinary(_ROCColumns):
    """One ROC per output column of a multi-label model (sigmoid outputs).

    ``labels`` 0/1 and ``predictions`` scores, both ``[n, C]`` (or ``[n]``); ``mask`` per
    example (``[n]``, ``[n, 1]``) or per output (``[n, C]``). Averages leave out columns whose
    AUC is undefined (a class absent).

    >>> roc = ROCBinary()
    >>> roc.eval([[1, 0], [0, 1], [1, 1]], [[.9, .3], [.2, .8], [.6, .1]])
    >>> roc.calculate_auc(0), roc.calculate_auc(1), roc.calculate_average_auc()
    (1.0, 0.5, 0.75)
    """

    def _prepare(self, y, p, mask):
        y = y[:, None] if y.ndim == 1 else y
        p = p[:, None] if p.ndim == 1 else p
        if y.shape != p.shape:
            raise EvaluationError(f"ROCBinary.eval: labels {y.shape} and predictions {p.shape} "
                                  f"must have the same shape [n, outputs]")
        m = output_mask(mask, y.shape, "ROCBinary")
        keep = np.ones(y.shape, bool) if m is None else np.asarray(m)
        # masked entries may be padding (even NaN): neutralize them before validating
        p = np.where(keep, p, 0.0)
        _check_scores(p, self.threshold_steps, "ROCBinary")
        return binary_values(np.where(keep, y, 0), "labels", "ROCBinary"), p, keep


class ROCMultiClass(_ROCColumns):
    """One-vs-all ROC per class of a single-label multi-class model (ND4J ``ROCMultiClass``).

    ``labels`` one-hot ``[n, C]`` or class indices ``[n]``; ``predictions`` per-class scores
    ``[n, C]`` (column ``c`` is the score of class ``c``); ``mask`` per example.

    >>> roc = ROCMultiClass()
    >>> roc.eval([0, 1, 2, 1], [[.7, .2, .1], [.3, .6, .1], [.2, .3, .5], [.2, .1, .7]])
    >>> roc.calculate_auc(0), roc.calculate_auc(1), round(roc.calculate_average_auc(), 4)
    (1.0, 0.5, 0.7222)
    """

    _unit = "class"

    def _prepare(self, y, p, mask):
        if p.ndim != 2 or p.shape[1] < 2:
            raise EvaluationError(f"ROCMultiClass.eval: predictions {p.shape} must be per-class "
                                  f"scores [n, C] with C >= 2; use ROC for a single score")
        n, c = p.shape
        keep = row_mask(mask, n, "ROCMultiClass")
        keep = np.ones(n, bool) if keep is None else keep
        y, p = y[keep], p[keep]
        _check_scores(p, self.threshold_steps, "ROCMultiClass")
        if y.ndim == 2 and y.shape[1] > 1:
            if y.shape[1] != c:
                raise EvaluationError(f"ROCMultiClass.eval: labels {y.shape} are one-hot over "
                                      f"{y.shape[1]} classes but predictions {p.shape} score {c}")
            actual = binary_values(y, "labels", "ROCMultiClass")
            if len(actual) and not np.all(actual.sum(axis=1) == 1):
                raise EvaluationError("ROCMultiClass.eval: each one-hot label row needs exactly "
                                      "one 1; mask padded rows out, or use ROCBinary for "
                                      "multi-label data")
        else:
            idx = y.reshape(-1)
            if idx.size and (np.any(idx != np.round(idx)) or idx.min() < 0 or idx.max() >= c):
                raise EvaluationError(f"ROCMultiClass.eval: labels {y.shape} must be class "
                                      f"indices in 0..{c - 1} (or one-hot [n, {c}])")
            actual = idx.astype(np.int64)[:, None] == np.arange(c)
        # rows were already selected by the mask; every remaining entry is kept
        return actual, p, np.ones(actual.shape, bool)
