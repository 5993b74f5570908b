"""Multi-label (independent binary outputs) evaluation: ND4J's ``EvaluationBinary``.

State (the fields of ``base``'s protocol) is four count vectors: TP, FP, FN, TN per output
column; the metric formulas are the shared count rules of ``base`` applied column-wise.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .base import (BaseEvaluation, Counts, EvaluationError, Rule, State, accuracy_rule, add,
                   banner,
                   binary_values, check_no_nan, check_rows, f_beta_rule, false_alarm_rule, fmt,
                   fnr_rule, fpr_rule, g_measure_rule, mcc_rule, mean_defined, output_mask,
                   precision_rule, recall_rule, table, to_array, warn_excluded)

__all__ = ["EvaluationBinary"]

_OWNER = "EvaluationBinary"
_COLUMNS = ("column", "columns")
_COUNTS = ("tp", "fp", "fn", "tn")


class EvaluationBinary(BaseEvaluation):
    """Per-column binary metrics for multi-label outputs (e.g. sigmoid outputs).

    Each column ``j`` is its own yes/no problem: predicted positive when
    ``predictions[:, j] > threshold[j]`` (strictly greater, as in ND4J), actual positive when
    ``labels[:, j] == 1``. Inputs are ``[n, C]`` (or ``[n]`` for one column); labels must be
    0/1; ``mask`` is per example (``[n]``, ``[n, 1]``) or per output (``[n, C]``), 0/1.

    Args:
        num_outputs: number of columns (inferred from the first batch when omitted).
        threshold: decision threshold, one for all columns or one per column (default 0.5).
        labels_list: column names for reports; metric methods accept a name or an index.

    Per-column metrics are 0.0 where undefined (zero denominator, ND4J's edge value);
    ``average_*`` is the mean over the columns where the metric is defined (columns never
    predicted positive are left out of ``average_precision``, columns without positive labels
    out of ``average_recall``, with an ``EvaluationWarning``) — the same rule as macro
    averages of ``Evaluation``. NaN when nothing has been evaluated.

    >>> ev = EvaluationBinary(threshold=[0.5, 0.3])
    >>> ev.eval([[1, 0], [0, 1], [1, 1]], [[0.9, 0.2], [0.6, 0.4], [0.4, 0.35]])
    >>> ev.true_positives().tolist(), ev.false_positives().tolist()
    ([1, 2], [1, 0])
    >>> ev.precision(0), ev.recall(0), ev.accuracy(1)
    (0.5, 0.5, 1.0)
    >>> other = EvaluationBinary(threshold=[0.5, 0.3]); other.eval([[0, 0]], [[.1, .1]])
    >>> ev.merge(other); ev.total_count(0)
    4
    """

    _fields = {k: add for k in _COUNTS}
    _unit = "output"

    def __init__(self, num_outputs: int | None = None,
                 threshold: float | Sequence[float] | np.ndarray = 0.5,
                 labels_list: Sequence[str] | None = None) -> None:
        thr = np.asarray(threshold, dtype=np.float64)
        if thr.ndim > 1 or np.isnan(thr).any():
            raise EvaluationError(f"{_OWNER}: threshold must be a number or a 1-D sequence "
                                  f"(one per output), got shape {thr.shape}")
        if labels_list is not None:
            labels_list = [str(s) for s in labels_list]
            if num_outputs is not None and num_outputs != len(labels_list):
                raise EvaluationError(f"{_OWNER}: num_outputs={num_outputs} but labels_list has "
                                      f"{len(labels_list)} names")
            num_outputs = len(labels_list)
        if thr.ndim == 1:
            if num_outputs is not None and len(thr) != num_outputs:
                raise EvaluationError(f"{_OWNER}: {len(thr)} thresholds for {num_outputs} "
                                      f"outputs; give one threshold or one per output")
            num_outputs = len(thr)
        if num_outputs is not None and int(num_outputs) < 1:
            raise EvaluationError(f"{_OWNER}: num_outputs={num_outputs} must be >= 1")
        self.threshold = thr
        self.labels_list: list[str] | None = labels_list
        self._start(None if num_outputs is None else int(num_outputs))

    # --- accumulation ----------------------------------------------------------------------

    def _empty(self, width: int) -> State:
        return {k: np.zeros(width, np.int64) for k in _COUNTS}

    def eval(self, labels: Any, predictions: Any, mask: Any = None) -> None:
        """Accumulate one batch of 0/1 labels and scores, both ``[n, C]``.

        >>> ev = EvaluationBinary()
        >>> ev.eval([[1], [0], [1]], [[0.7], [0.9], [0.2]], mask=[1, 1, 0])
        >>> ev.total_count(0), ev.accuracy(0)
        (2, 0.5)
        """
        y = to_array(labels, "labels", _OWNER)
        p = to_array(predictions, "predictions", _OWNER)
        check_rows(y, p, _OWNER)
        y = y[:, None] if y.ndim == 1 else y
        p = p[:, None] if p.ndim == 1 else p
        if y.shape != p.shape:
            raise EvaluationError(f"{_OWNER}.eval: labels {y.shape} and predictions {p.shape} "
                                  f"must have the same shape [n, outputs]")
        c = y.shape[1]
        known = self._width
        if known is not None and c != known:
            raise EvaluationError(f"{_OWNER}.eval: inputs have {c} output columns but this "
                                  f"evaluation has {known} (from its constructor or earlier "
                                  f"batches); use one EvaluationBinary per output layer")
        m = output_mask(mask, y.shape, _OWNER)
        keep = np.ones(y.shape, bool) if m is None else m
        # masked entries may hold padding (even NaN): zero them before checking and counting
        y = np.where(keep, y, 0)
        p = np.where(keep, p, 0)
        check_no_nan(p, "predictions", _OWNER)
        actual = binary_values(y, "labels", _OWNER)
        predicted = p > self.threshold
        batch = [actual & predicted, ~actual & predicted, actual & ~predicted,
                 ~actual & ~predicted]
        self._accumulate(c, {k: (b & keep).sum(0).astype(np.int64)
                             for k, b in zip(_COUNTS, batch)})

    def _merge_mismatch(self, other: Any) -> str | None:
        c = self._width or other._width or 1
        if np.array_equal(self._thresholds(c), other._thresholds(c)):
            return None
        return (f"{_OWNER}.merge: thresholds differ ({self.threshold} vs {other.threshold}); "
                f"counts made at different thresholds cannot be added")

    # --- counts --------------------------------------------------------------------------------

    @property
    def num_outputs(self) -> int | None:
        """Number of output columns (``None`` until given or seen)."""
        return self._width

    def _all_counts(self) -> Counts:
        state = self._state if self._state is not None else self._empty(0)
        tp, fp, fn, tn = (state[k].astype(np.float64) for k in _COUNTS)
        return tp, fp, fn, tn

    def true_positives(self) -> np.ndarray:
        """Per-column true positives ``[C]`` (likewise ``false_positives``,
        ``false_negatives``, ``true_negatives``)."""
        return self._all_counts()[0].astype(np.int64)

    def false_positives(self) -> np.ndarray:
        """Per-column false positives ``[C]``."""
        return self._all_counts()[1].astype(np.int64)

    def false_negatives(self) -> np.ndarray:
        """Per-column false negatives ``[C]``."""
        return self._all_counts()[2].astype(np.int64)

    def true_negatives(self) -> np.ndarray:
        """Per-column true negatives ``[C]``."""
        return self._all_counts()[3].astype(np.int64)

    def total_count(self, col: int | str) -> int:
        """Number of (unmasked) entries evaluated in column ``col``."""
        i = self._column(col)
        return int(sum(k[i] for k in self._all_counts()))

    def _thresholds(self, c: int) -> np.ndarray | None:
        """Thresholds as ``[c]`` (a scalar and equal per-column values compare equal)."""
        return np.broadcast_to(self.threshold, (c,)) if self.threshold.ndim == 0 or \
            len(self.threshold) == c else None

    # --- metrics -------------------------------------------------------------------------------

    def _metric(self, rule: Rule, col: int | str) -> float:
        i = self._column(col)
        counts = [k[i:i + 1] for k in self._all_counts()]
        if sum(float(k[0]) for k in counts) == 0:
            return float("nan")  # nothing evaluated in this column (all masked)
        return float(rule(*counts)[0][0])

    def _average(self, name: str, rule: Rule, reason: str | None = None) -> float:
        counts = self._all_counts()
        values, defined = rule(*counts)
        seen = sum(counts) > 0
        if reason is not None and (seen & ~defined).any():
            names = [self._column_name(i) for i in np.flatnonzero(seen & ~defined)]
            warn_excluded(_OWNER, name, names, reason, _COLUMNS)
        return mean_defined(values, defined & seen)

    def accuracy(self, col: int | str) -> float:
        """(TP + TN) / total for column ``col`` (NaN if the column saw no data)."""
        return self._metric(accuracy_rule, col)

    def precision(self, col: int | str) -> float:
        """TP / (TP + FP) for column ``col`` (0.0 if never predicted positive)."""
        return self._metric(precision_rule, col)

    def recall(self, col: int | str) -> float:
        """TP / (TP + FN) for column ``col`` (0.0 if it has no positive labels)."""
        return self._metric(recall_rule, col)

    def f_beta(self, beta: float, col: int | str) -> float:
        """F-beta score of column ``col``."""
        return self._metric(f_beta_rule(float(beta)), col)

    def f1(self, col: int | str) -> float:
        """F1 score of column ``col``.

        >>> ev = EvaluationBinary(); ev.eval([[1], [1], [0]], [[.9], [.1], [.8]]); ev.f1(0)
        0.5
        """
        return self._metric(f_beta_rule(1.0), col)

    def g_measure(self, col: int | str) -> float:
        """sqrt(precision · recall) of column ``col``."""
        return self._metric(g_measure_rule, col)

    def matthews_correlation(self, col: int | str) -> float:
        """Matthews correlation of column ``col``."""
        return self._metric(mcc_rule, col)

    def false_positive_rate(self, col: int | str) -> float:
        """FP / (FP + TN) of column ``col``."""
        return self._metric(fpr_rule, col)

    def false_negative_rate(self, col: int | str) -> float:
        """FN / (FN + TP) of column ``col``."""
        return self._metric(fnr_rule, col)

    def false_alarm_rate(self, col: int | str) -> float:
        """(FPR + FNR) / 2 of column ``col``."""
        return self._metric(false_alarm_rule, col)

    def average_accuracy(self) -> float:
        """Mean accuracy over the columns that saw data."""
        return self._average("accuracy", accuracy_rule)

    def average_precision(self) -> float:
        """Mean precision over the columns where it is defined (not the AP of a PR curve)."""
        return self._average("precision", precision_rule, "no positive predictions")

    def average_recall(self) -> float:
        """Mean recall over the columns with positive labels."""
        return self._average("recall", recall_rule, "no positive labels")

    def average_f1(self) -> float:
        """Mean F1 over the columns where precision and recall are defined.

        >>> ev = EvaluationBinary(); ev.eval([[1, 1], [0, 1]], [[.9, .2], [.1, .8]])
        >>> round(ev.average_f1(), 4)  # column F1s 1.0 and 2/3
        0.8333
        """
        return self._average("f1", f_beta_rule(1.0))

    def average_matthews_correlation(self) -> float:
        """Mean Matthews correlation over the columns where it is defined."""
        return self._average("matthews_correlation", mcc_rule)

    def average_false_positive_rate(self) -> float:
        """Mean FPR over the columns with negative labels."""
        return self._average("false_positive_rate", fpr_rule)

    def average_false_negative_rate(self) -> float:
        """Mean FNR over the columns with positive labels."""
        return self._average("false_negative_rate", fnr_rule)

    def metrics(self) -> dict[str, float]:
        """``accuracy``, ``precision``, ``recall``, ``f1``: averages over columns."""
        return {"accuracy": self.average_accuracy(), "precision": self.average_precision(),
                "recall": self.average_recall(), "f1": self.average_f1()}

    # --- report -------------------------------------------------------------------------------

    def stats(self) -> str:
        """A table of per-column metrics and counts, then the column averages.

        >>> ev = EvaluationBinary(labels_list=["a"]); ev.eval([[1], [0]], [[.9], [.2]])
        >>> print(ev.stats().splitlines()[1])
        Label  Accuracy      F1  Precision  Recall  Total  TP  TN  FP  FN  Threshold
        """
        c = self._width
        if self._state is None or c is None:
            return f"{banner('EvaluationBinary Metrics')}\n No examples evaluated yet\n"
        thr = self._thresholds(c)
        assert thr is not None
        tp, fp, fn, tn = (self._state[k] for k in _COUNTS)
        rows = [[self._column_name(i),
                 fmt(self.accuracy(i)), fmt(self.f1(i)), fmt(self.precision(i)),
                 fmt(self.recall(i)), int(tp[i] + fp[i] + fn[i] + tn[i]), int(tp[i]),
                 int(tn[i]), int(fp[i]), int(fn[i]), f"{thr[i]:g}"] for i in range(c)]
        averages = {"accuracy": self._average("accuracy", accuracy_rule),
                    "f1": self._average("f1", f_beta_rule(1.0)),
                    "precision": self._average("precision", precision_rule),
                    "recall": self._average("recall", recall_rule)}
        lines = [banner("EvaluationBinary Metrics"),
                 table(["Label", "Accuracy", "F1", "Precision", "Recall", "Total", "TP", "TN",
                        "FP", "FN", "Threshold"], rows), "",
                 "Averages over columns (columns where a metric is undefined are left out):"]
        lines += [f" {k.capitalize():<10} {fmt(v)}" for k, v in averages.items()]
        lines.append("=" * 66)
        return "\n".join(lines) + "\n"
