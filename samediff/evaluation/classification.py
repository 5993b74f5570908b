"""Multi-class classification evaluation: ND4J's ``Evaluation``.

State (the fields of ``base``'s protocol) is one ``[C, C]`` confusion matrix of counts (rows =
actual class, columns = predicted class) plus the top-N hit counts, so memory does not depend on
how much data is evaluated and ``merge`` is an exact sum.
"""
from __future__ import annotations

from typing import Any, Literal, Sequence

import numpy as np

from .base import (BaseEvaluation, Counts, EvaluationError, Rule, State, add, banner,
                   check_no_nan, check_rows, f_beta_rule, false_alarm_rule, fmt, fnr_rule,
                   fpr_rule, g_measure_rule, mcc_rule, mean_defined, precision_rule,
                   recall_rule, row_mask, table, to_array, warn_excluded)

__all__ = ["Evaluation", "Averaging"]

Averaging = Literal["macro", "micro"]

_OWNER = "Evaluation"
# why a macro average leaves a class out, per metric rule (stats() and the warnings say it)
_NEVER_PREDICTED = "no predictions (never predicted by the model)"
_NO_LABELS = "no examples in the labels"


def _indices(a: np.ndarray, c: int, what: str) -> np.ndarray:
    """Integer class indices, checked to be whole numbers in ``0..c-1``."""
    if a.dtype.kind == "f" and not np.all(a == np.round(a)):
        hint = ("; for a binary probability pass predictions of shape [n, 1]"
                if what == "predictions" else "")
        raise EvaluationError(
            f"{_OWNER}.eval: 1-D {what} {a.shape} must be integer class indices, got "
            f"non-integer values such as {a[a != np.round(a)][:3].tolist()}; pass [n, C] "
            f"one-hot labels / per-class scores instead{hint}")
    idx = a.astype(np.int64)
    bad = (idx < 0) | (idx >= c)
    if bad.any():
        raise EvaluationError(f"{_OWNER}.eval: {what} contain class index {int(idx[bad][0])}, "
                              f"outside 0..{c - 1} for {c} classes; set num_classes= to the "
                              f"real number of classes")
    return idx


class Evaluation(BaseEvaluation):
    """Accuracy, precision, recall, F-scores, MCC and the confusion matrix of a classifier.

    Inputs per batch (rows are examples; NDArray, numpy arrays or lists):

    - ``labels``: one-hot ``[n, C]`` (the true class is the argmax) or class indices ``[n]``
      (also ``[n, 1]``).
    - ``predictions``: per-class probabilities or logits ``[n, C]`` (the predicted class is the
      argmax; ties go to the lowest index), class indices ``[n]``, or a single probability of
      class 1 ``[n, 1]`` (binary; predicted 1 when ``p > binary_decision_threshold``, default
      0.5, strictly greater as in ND4J).
    - ``mask``: optional per-example ``[n]`` / ``[n, 1]`` of 0/1; masked rows are skipped
      (they may hold NaN padding).

    Args:
        num_classes: number of classes; inferred from ``[n, C]`` inputs when omitted, and
            required when labels and predictions are both class indices.
        labels_list: class names for reports (``len`` sets ``num_classes``); metric methods
            also accept a class name where they take a class index.
        top_n: also count a top-N hit when fewer than N classes score strictly higher than the
            true class (ND4J's rule; needs ``[n, C]`` predictions).
        binary_positive_class: with exactly 2 classes, ``precision()``, ``recall()``, ``f1()``
            ... without arguments report this class (ND4J default 1); ``None`` = macro average.
        binary_decision_threshold: with 2 classes, predict class 1 when the class-1 score is
            ``> threshold`` instead of taking the argmax.

    Averaging (``averaging="macro"|"micro"``, ND4J semantics): *macro* is the unweighted mean
    of per-class values; *micro* computes the metric once from counts pooled over classes
    (for single-label data micro precision = micro recall = micro F1 = accuracy). A per-class
    value whose denominator is 0 is **undefined**: asked for directly it is 0.0 (ND4J's edge
    value), and macro averages **exclude** it. So a class the model never predicted is left
    out of macro precision (and F1, G-measure), a class absent from the labels out of macro
    recall, with an ``EvaluationWarning`` naming the classes (like ND4J); ``stats()`` lists
    them. The same rule applies to FPR, FNR and MCC, keeping macro FNR = 1 - macro recall.
    With nothing evaluated every metric is NaN.

    >>> import numpy as np
    >>> ev = Evaluation(labels_list=["cat", "dog", "bird"])
    >>> ev.eval([0, 1, 2, 2], np.array([[.8, .1, .1], [.2, .7, .1], [.1, .2, .7], [.6, .3, .1]]))
    >>> ev.accuracy()
    0.75
    >>> ev.confusion_matrix().tolist()
    [[1, 0, 0], [0, 1, 0], [1, 0, 1]]
    >>> round(ev.precision("cat"), 4), ev.recall(averaging="micro")
    (0.5, 0.75)
    """

    _fields = {"confusion": add, "top_n_correct": add, "top_n_total": add}
    _unit = "class"

    def __init__(self, num_classes: int | None = None, labels_list: Sequence[str] | None = None,
                 top_n: int = 1, binary_positive_class: int | None = 1,
                 binary_decision_threshold: float | None = None) -> None:
        if labels_list is not None:
            labels_list = [str(s) for s in labels_list]
            if num_classes is not None and num_classes != len(labels_list):
                raise EvaluationError(f"Evaluation: num_classes={num_classes} but labels_list "
                                      f"has {len(labels_list)} names; give one name per class")
            num_classes = len(labels_list)
        if num_classes is not None and int(num_classes) < 2:
            raise EvaluationError(f"Evaluation: num_classes={num_classes}; classification "
                                  f"needs at least 2 classes")
        if int(top_n) < 1:
            raise EvaluationError(f"Evaluation: top_n={top_n} must be >= 1")
        if binary_positive_class not in (None, 0, 1):
            raise EvaluationError(f"Evaluation: binary_positive_class={binary_positive_class} "
                                  f"must be 0, 1 or None")
        self.labels_list: list[str] | None = labels_list
        self.top_n = int(top_n)
        self.binary_positive_class = binary_positive_class
        self.binary_decision_threshold = (None if binary_decision_threshold is None
                                          else float(binary_decision_threshold))
        self._start(None if num_classes is None else int(num_classes))

    # --- accumulation --------------------------------------------------------------------------

    def _empty(self, width: int) -> State:
        return {"confusion": np.zeros((width, width), np.int64), "top_n_correct": 0,
                "top_n_total": 0}

    @property
    def _confusion(self) -> np.ndarray | None:
        return None if self._state is None else self._state["confusion"]

    @property
    def _top_n_total(self) -> int:
        return 0 if self._state is None else self._state["top_n_total"]

    def eval(self, labels: Any, predictions: Any, mask: Any = None) -> None:
        """Accumulate one batch (see the class docstring for the accepted shapes).

        >>> ev = Evaluation()
        >>> ev.eval([[1, 0], [0, 1], [0, 1]], [[.9, .1], [.4, .6], [.3, .7]], mask=[1, 1, 0])
        >>> ev.num_examples, ev.accuracy()
        (2, 1.0)
        """
        y = to_array(labels, "labels", _OWNER)
        p = to_array(predictions, "predictions", _OWNER)
        check_rows(y, p, _OWNER)
        c = self._classes_of(y, p)
        keep = row_mask(mask, y.shape[0], _OWNER)
        if keep is not None:
            y, p = y[keep], p[keep]
        check_no_nan(y, "labels", _OWNER)
        check_no_nan(p, "predictions", _OWNER)
        actual = self._actual(y, c)
        predicted = self._predicted(p, c)
        batch: State = {"confusion": np.bincount(actual * c + predicted,
                                                 minlength=c * c).reshape(c, c)}
        if self.top_n > 1:
            true_score = p[np.arange(len(actual)), actual]
            higher = (p > true_score[:, None]).sum(axis=1)
            batch["top_n_correct"] = int((higher < self.top_n).sum())
            batch["top_n_total"] = len(actual)
        # everything is validated: only now touch the state, so a bad batch leaves no trace
        self._accumulate(c, batch)

    def _classes_of(self, y: np.ndarray, p: np.ndarray) -> int:
        """The number of classes these inputs imply, checked against what is already known."""
        y_cols = y.shape[1] if y.ndim == 2 and y.shape[1] > 1 else None
        p_cols = None if p.ndim == 1 else (2 if p.shape[1] == 1 else p.shape[1])
        if y_cols is not None and p_cols is not None and y_cols != p_cols:
            p_says = ("are one binary probability column (2 classes)" if p.shape[1] == 1
                      else f"score {p_cols} classes")
            raise EvaluationError(f"{_OWNER}.eval: labels {y.shape} are one-hot over {y_cols} "
                                  f"classes but predictions {p.shape} {p_says}; both must "
                                  f"cover the same classes")
        c = y_cols or p_cols
        known = self._width
        if c is not None and known is not None and c != known:
            raise EvaluationError(
                f"{_OWNER}.eval: labels {y.shape} and predictions {p.shape} imply {c} classes, "
                f"but this evaluation has {known} (from num_classes/labels_list or earlier "
                f"batches); use one Evaluation per problem, or reset() it")
        c = c or known
        if c is None:
            raise EvaluationError(
                f"{_OWNER}.eval: labels {y.shape} and predictions {p.shape} are both class "
                f"indices, so the number of classes is unknown; pass Evaluation(num_classes=...)"
                f" or labels_list=[...]")
        if self.top_n > 1 and (p.ndim == 1 or p.shape[1] == 1):
            raise EvaluationError(f"{_OWNER}.eval: top_n={self.top_n} needs per-class scores "
                                  f"[n, {c}] as predictions, got {p.shape}")
        if self.binary_decision_threshold is not None and c != 2:
            raise EvaluationError(f"{_OWNER}.eval: binary_decision_threshold is set but the "
                                  f"data has {c} classes; it applies to binary problems only")
        return c

    @staticmethod
    def _actual(y: np.ndarray, c: int) -> np.ndarray:
        if y.ndim == 2 and y.shape[1] > 1:
            empty = ~np.any(y > 0, axis=1)
            if empty.any():
                # ND4J would silently count such a row as class 0; it is almost always padding
                raise EvaluationError(
                    f"{_OWNER}.eval: one-hot labels {y.shape} have a row with no positive "
                    f"entry (row {int(np.argmax(empty))} of the unmasked rows); mask padded "
                    f"rows out with mask=")
            return y.argmax(axis=1)
        return _indices(y.reshape(-1), c, "labels")

    def _predicted(self, p: np.ndarray, c: int) -> np.ndarray:
        if p.ndim == 1:
            return _indices(p, c, "predictions")
        thr = self.binary_decision_threshold
        if p.shape[1] == 1:
            return (p[:, 0] > (0.5 if thr is None else thr)).astype(np.int64)
        if thr is not None:
            return (p[:, 1] > thr).astype(np.int64)
        return p.argmax(axis=1)

    def _merge_mismatch(self, other: Any) -> str | None:
        if (other.top_n, other.binary_decision_threshold) == (self.top_n,
                                                              self.binary_decision_threshold):
            return None
        return (f"Evaluation.merge: configurations differ (top_n {self.top_n} vs {other.top_n}, "
                f"binary_decision_threshold {self.binary_decision_threshold} vs "
                f"{other.binary_decision_threshold}); counts made differently cannot be added")

    def _width_mismatch(self, mine: int, theirs: int) -> str:
        return (f"Evaluation.merge: this evaluation has {mine} classes and the other {theirs}; "
                f"only evaluations of the same problem merge")

    # --- counts -------------------------------------------------------------------------------

    @property
    def num_classes(self) -> int | None:
        """Number of classes (``None`` until given or seen in data)."""
        return self._width

    @property
    def num_examples(self) -> int:
        """Number of (unmasked) examples evaluated (ND4J ``getNumRowCounter``)."""
        return 0 if self._confusion is None else int(self._confusion.sum())

    def confusion_matrix(self) -> np.ndarray:
        """A copy of the ``[C, C]`` int64 counts: ``[actual, predicted]``.

        >>> ev = Evaluation(num_classes=2); ev.eval([0, 0, 1], [0, 1, 1])
        >>> ev.confusion_matrix().tolist()
        [[1, 1], [0, 1]]
        """
        if self._confusion is None:
            return np.zeros((0, 0), np.int64)
        return self._confusion.copy()

    def class_label(self, cls: int) -> str:
        """The name of class ``cls`` (its index as text without ``labels_list``)."""
        return self._column_name(cls)

    def _counts(self) -> Counts:
        cm = self.confusion_matrix().astype(np.float64)
        tp = np.diag(cm).copy()
        fp, fn = cm.sum(axis=0) - tp, cm.sum(axis=1) - tp
        return tp, fp, fn, cm.sum() - tp - fp - fn

    def true_positives(self) -> np.ndarray:
        """Per-class true positives ``[C]`` (int64). Likewise ``false_positives``,
        ``false_negatives``, ``true_negatives`` and ``class_count`` (actual examples per class).

        >>> ev = Evaluation(num_classes=2); ev.eval([0, 0, 1], [0, 1, 1])
        >>> ev.true_positives().tolist(), ev.false_positives().tolist()
        ([1, 1], [0, 1])
        """
        return self._counts()[0].astype(np.int64)

    def false_positives(self) -> np.ndarray:
        """Per-class false positives ``[C]``: predicted as the class, actually another."""
        return self._counts()[1].astype(np.int64)

    def false_negatives(self) -> np.ndarray:
        """Per-class false negatives ``[C]``: actually the class, predicted as another."""
        return self._counts()[2].astype(np.int64)

    def true_negatives(self) -> np.ndarray:
        """Per-class true negatives ``[C]``: neither actually nor predicted the class."""
        return self._counts()[3].astype(np.int64)

    def class_count(self) -> np.ndarray:
        """Number of actual examples of each class ``[C]``."""
        return self.confusion_matrix().sum(axis=1)

    # --- metrics -------------------------------------------------------------------------------

    def accuracy(self) -> float:
        """Fraction of examples whose predicted class is the actual class (NaN if none)."""
        n = self.num_examples
        return float(np.trace(self._confusion)) / n if n else float("nan")

    def top_n_accuracy(self) -> float:
        """Fraction of examples whose true class is among the ``top_n`` highest scores (ties
        count as hits, as in ND4J); equals ``accuracy()`` when ``top_n == 1``.

        >>> ev = Evaluation(top_n=2)
        >>> ev.eval([1, 0], [[.5, .3, .2], [.1, .6, .3]]); ev.top_n_accuracy()
        0.5
        """
        if self.top_n == 1:
            return self.accuracy()
        correct, total = self._state["top_n_correct"], self._top_n_total  # type: ignore[index]
        return correct / total if total else float("nan")

    def _mode(self, averaging: str | None) -> str:
        if averaging is None:
            binary = self._width == 2 and self.binary_positive_class is not None
            return "positive" if binary else "macro"
        mode = str(averaging).lower()
        if mode not in ("macro", "micro"):
            raise EvaluationError(f"{_OWNER}: averaging={averaging!r}; use 'macro' or 'micro'")
        return mode

    def _metric(self, name: str, rule: Rule, cls: int | str | None, averaging: str | None,
                reason: str | None = None) -> float:
        if cls is not None and averaging is not None:
            raise EvaluationError(f"{_OWNER}.{name}: pass a class or an averaging, not both")
        if self.num_examples == 0:
            return float("nan")
        counts = self._counts()
        mode = "class" if cls is not None else self._mode(averaging)
        if mode == "positive":
            cls, mode = self.binary_positive_class, "class"
        if mode == "class":
            i = self._column(cls)
            return float(rule(*(c[i:i + 1] for c in counts))[0][0])
        if mode == "micro":
            return float(rule(*(c.sum(keepdims=True) for c in counts))[0][0])
        values, defined = rule(*counts)
        if reason is not None and not defined.all():
            warn_excluded(_OWNER, name, [self.class_label(i) for i in np.flatnonzero(~defined)],
                          reason)
        return mean_defined(values, defined)

    def precision(self, cls: int | str | None = None, averaging: Averaging | None = None) -> float:
        """TP / (TP + FP) of class ``cls``, or averaged (default: the positive class for binary
        problems, else macro; classes never predicted are excluded from the macro average).

        >>> ev = Evaluation(num_classes=3); ev.eval([0, 1, 2, 2], [0, 1, 2, 0])
        >>> ev.precision(0), ev.precision(averaging="macro")
        (0.5, 0.8333333333333334)
        """
        return self._metric("precision", precision_rule, cls, averaging, _NEVER_PREDICTED)

    def recall(self, cls: int | str | None = None, averaging: Averaging | None = None) -> float:
        """TP / (TP + FN) (sensitivity); classes absent from the labels are excluded from the
        macro average.

        >>> ev = Evaluation(num_classes=3); ev.eval([0, 1, 2, 2], [0, 1, 2, 0])
        >>> ev.recall(2)
        0.5
        """
        return self._metric("recall", recall_rule, cls, averaging, _NO_LABELS)

    def f_beta(self, beta: float, cls: int | str | None = None,
               averaging: Averaging | None = None) -> float:
        """(1 + b²)·P·R / (b²·P + R), 0 when P or R is 0; undefined (excluded from macro) when
        P or R is undefined.

        >>> ev = Evaluation(num_classes=2); ev.eval([1, 1, 0], [1, 0, 1])
        >>> ev.f_beta(2.0)
        0.5
        """
        return self._metric(f"f_beta({beta})", f_beta_rule(float(beta)), cls, averaging)

    def f1(self, cls: int | str | None = None, averaging: Averaging | None = None) -> float:
        """F1 = harmonic mean of precision and recall (``f_beta(1.0, ...)``).

        >>> ev = Evaluation(num_classes=2); ev.eval([1, 1, 0], [1, 0, 1]); ev.f1()
        0.5
        """
        return self._metric("f1", f_beta_rule(1.0), cls, averaging)

    def g_measure(self, cls: int | str | None = None, averaging: Averaging | None = None) -> float:
        """sqrt(precision · recall)."""
        return self._metric("g_measure", g_measure_rule, cls, averaging)

    def false_positive_rate(self, cls: int | str | None = None,
                            averaging: Averaging | None = None) -> float:
        """FP / (FP + TN): how often other classes are mistaken for this one."""
        return self._metric("false_positive_rate", fpr_rule, cls, averaging)

    def false_negative_rate(self, cls: int | str | None = None,
                            averaging: Averaging | None = None) -> float:
        """FN / (FN + TP) = 1 - recall."""
        return self._metric("false_negative_rate", fnr_rule, cls, averaging)

    def false_alarm_rate(self, cls: int | str | None = None,
                         averaging: Averaging | None = None) -> float:
        """(FPR + FNR) / 2, per class, then averaged like the other metrics."""
        return self._metric("false_alarm_rate", false_alarm_rule, cls, averaging)

    def matthews_correlation(self, cls: int | str | None = None,
                             averaging: Averaging | None = None) -> float:
        """One-vs-rest Matthews correlation (TP·TN - FP·FN) / sqrt(...), per class or macro /
        micro averaged as in ND4J (not the multi-class R_K statistic).

        >>> ev = Evaluation(num_classes=2); ev.eval([1, 1, 0, 0], [1, 1, 0, 1])
        >>> round(ev.matthews_correlation(), 4)
        0.5774
        """
        return self._metric("matthews_correlation", mcc_rule, cls, averaging)

    def metrics(self) -> dict[str, float]:
        """``accuracy``, ``precision``, ``recall``, ``f1``, ``matthews_correlation`` (default
        averaging) and ``top_n_accuracy`` when ``top_n > 1``.

        >>> ev = Evaluation(num_classes=2); ev.eval([0, 1], [0, 1]); ev.metrics()["f1"]
        1.0
        """
        out = {"accuracy": self.accuracy(), "precision": self.precision(),
               "recall": self.recall(), "f1": self.f1(),
               "matthews_correlation": self.matthews_correlation()}
        if self.top_n > 1:
            out["top_n_accuracy"] = self.top_n_accuracy()
        return out

    # --- report -------------------------------------------------------------------------------

    def stats(self, include_confusion: bool = True) -> str:
        """ND4J-style report: headline metrics, averaging note, classes left out of averages,
        a per-class table and (optionally) the confusion matrix.

        >>> ev = Evaluation(num_classes=2); ev.eval([0, 1, 1], [0, 1, 0])
        >>> print(ev.stats().splitlines()[3])
         Accuracy:        0.6667
        """
        c = self._width
        if self.num_examples == 0:
            return f"{banner('Evaluation Metrics')}\n No examples evaluated yet\n"
        mode = self._mode(None)
        counts = self._counts()
        values = {}
        for name, rule in (("precision", precision_rule), ("recall", recall_rule),
                           ("f1", f_beta_rule(1.0)), ("mcc", mcc_rule)):
            # call _metric without a reason: the report lists exclusions itself, no warnings
            values[name] = self._metric(name, rule, None, None)
        lines = [banner("Evaluation Metrics"),
                 f" # of classes:    {c}",
                 f" # of examples:   {self.num_examples}",
                 f" Accuracy:        {fmt(self.accuracy())}"]
        if self.top_n > 1:
            lines.append(f" Top-{self.top_n} Accuracy:  {fmt(self.top_n_accuracy())}")
        lines += [f" Precision:       {fmt(values['precision'])}",
                  f" Recall:          {fmt(values['recall'])}",
                  f" F1 Score:        {fmt(values['f1'])}",
                  f" MCC:             {fmt(values['mcc'])}"]
        if mode == "positive":
            pos = self.binary_positive_class
            lines.append(f"Precision, recall, F1 & MCC: reported for positive class (class "
                         f"{pos} - \"{self.class_label(pos)}\") only")
        else:
            lines.append(f"Precision, recall, F1 & MCC: macro-averaged (equally weighted avg. "
                         f"of {c} classes)")
            for rule, metric, reason in ((precision_rule, "precision", _NEVER_PREDICTED),
                                         (recall_rule, "recall", _NO_LABELS)):
                excluded = np.flatnonzero(~rule(*counts)[1])
                if len(excluded):
                    names = [self.class_label(i) for i in excluded]
                    lines.append(f"Warning: average {metric} leaves out {len(names)} "
                                 f"class(es) with {reason}: {names}")
        rows = []  # one line per class; TN is implied (num_examples - the others)
        tp, fp, fn, _ = counts
        for i in range(c):
            name = f"{i} ({self.labels_list[i]})" if self.labels_list else str(i)
            rows.append([name,
                         int(tp[i] + fn[i]), int(tp[i]), int(fp[i]), int(fn[i]),
                         fmt(self.precision(i)), fmt(self.recall(i)), fmt(self.f1(i))])
        lines += ["", banner("Per-class Performance"),
                  table(["Class", "Count", "TP", "FP", "FN", "Precision", "Recall", "F1"],
                        rows)]
        if include_confusion:
            lines += ["", banner("Confusion Matrix"), self._confusion_text(),
                      "", "Confusion matrix format: Actual (rowClass) predicted as (columnClass) "
                      "N times"]
        lines.append("=" * 66)
        return "\n".join(lines) + "\n"

    def _confusion_text(self) -> str:
        cm = self._confusion
        assert cm is not None
        w = max(len(str(int(cm.max()))), len(str(len(cm) - 1))) + 1
        head = "".join(str(j).rjust(w) for j in range(len(cm)))
        lines = [head, "-" * (len(head) + 1)]
        for i, row in enumerate(cm):
            lines.append("".join(str(int(v)).rjust(w) for v in row)
                         + f" | {i} = {self.class_label(i)}")
        return "\n".join(lines)
