"""Evaluation classes: hand-computed small examples, then randomized cross-checks against
independent straightforward numpy (loops, Mann–Whitney U, np.corrcoef), merge/reset/mask
semantics, and the named errors."""
from __future__ import annotations

import doctest
import importlib
import warnings

import numpy as np
import pytest

import nd4py as nd
from samediff.errors import EvaluationError, NdError
from samediff.evaluation import (ROC, Evaluation, EvaluationBinary, EvaluationWarning,
                                 RegressionEvaluation, ROCBinary, ROCMultiClass)

approx = pytest.approx


def one_hot(idx, c):
    return np.eye(c)[np.asarray(idx)]


def scores_for(pred, c, rng=None):
    """Probabilities whose argmax is ``pred``."""
    p = np.full((len(pred), c), 0.1 / (c - 1))
    p[np.arange(len(pred)), pred] = 0.9
    return p


# ================================================================================================
# Evaluation: a 3-class example worked out by hand
#
#   actual:    0 0 0 0 1 1 2 2 2
#   predicted: 0 0 1 2 1 1 0 2 1
#
#   confusion (rows actual, columns predicted)     per class   TP FP FN TN
#        0  1  2                                    0           2  1  2  4
#   0 [  2  1  1 ]   row sums 4                     1           2  2  0  5
#   1 [  0  2  0 ]            2                     2           1  1  2  5
#   2 [  1  1  1 ]            3                     (FP = column sum - TP, FN = row sum - TP,
#   col sums 3 4 2                                   TN = 9 - TP - FP - FN)
#
#   accuracy = (2 + 2 + 1) / 9 = 5/9
#   precision = TP/(TP+FP) = [2/3, 2/4, 1/2] -> macro (2/3 + 1/2 + 1/2)/3 = 5/9
#   recall    = TP/(TP+FN) = [2/4, 2/2, 1/3] -> macro (1/2 + 1 + 1/3)/3 = 11/18
#   F1 = 2TP/(2TP+FP+FN) = [4/7, 4/6, 2/5]   -> macro (4/7 + 2/3 + 2/5)/3 = 172/315
#   micro: pooled TP=5, FP=4, FN=4 -> P = R = F1 = 5/9
#   FPR = FP/(FP+TN) = [1/5, 2/7, 1/6] -> macro 137/630; micro 4/(4+14) = 2/9
#   FNR = [1/2, 0, 2/3] -> macro 7/18 (= 1 - macro recall)
#   MCC = (TP·TN - FP·FN)/sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN))
#       class 0: (8-2)/sqrt(3·4·5·6) = 1/sqrt(10); class 1: 10/sqrt(4·2·7·5) = 10/sqrt(280)
#       class 2: (5-2)/sqrt(2·3·6·7) = 3/sqrt(252)
#       micro: (5·14 - 4·4)/sqrt(9·9·18·18) = 1/3
# ================================================================================================

ACTUAL = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2])
PRED = np.array([0, 0, 1, 2, 1, 1, 0, 2, 1])
CM = [[2, 1, 1], [0, 2, 0], [1, 1, 1]]


@pytest.fixture
def ev3():
    ev = Evaluation(num_classes=3)
    ev.eval(ACTUAL, PRED)
    return ev


def test_evaluation_hand_counts(ev3):
    assert ev3.confusion_matrix().tolist() == CM
    assert ev3.true_positives().tolist() == [2, 2, 1]
    assert ev3.false_positives().tolist() == [1, 2, 1]
    assert ev3.false_negatives().tolist() == [2, 0, 2]
    assert ev3.true_negatives().tolist() == [4, 5, 5]
    assert ev3.class_count().tolist() == [4, 2, 3]
    assert ev3.num_examples == 9 and ev3.num_classes == 3


def test_evaluation_hand_metrics(ev3):
    assert ev3.accuracy() == approx(5 / 9)
    assert [ev3.precision(i) for i in range(3)] == approx([2 / 3, 1 / 2, 1 / 2])
    assert [ev3.recall(i) for i in range(3)] == approx([1 / 2, 1, 1 / 3])
    assert [ev3.f1(i) for i in range(3)] == approx([4 / 7, 2 / 3, 2 / 5])
    assert ev3.precision() == approx(5 / 9)  # default for 3 classes: macro
    assert ev3.precision(averaging="macro") == approx(5 / 9)
    assert ev3.recall(averaging="macro") == approx(11 / 18)
    assert ev3.f1(averaging="macro") == approx(172 / 315)
    for metric in (ev3.precision, ev3.recall, ev3.f1):
        assert metric(averaging="micro") == approx(5 / 9)
    assert ev3.false_positive_rate(averaging="macro") == approx(137 / 630)
    assert ev3.false_positive_rate(averaging="micro") == approx(2 / 9)
    assert [ev3.false_positive_rate(i) for i in range(3)] == approx([1 / 5, 2 / 7, 1 / 6])
    assert ev3.false_negative_rate(averaging="macro") == approx(7 / 18)
    assert ev3.false_negative_rate(averaging="macro") == approx(1 - ev3.recall())
    assert ev3.false_alarm_rate(0) == approx((1 / 5 + 1 / 2) / 2)
    mcc = [1 / np.sqrt(10), 10 / np.sqrt(280), 3 / np.sqrt(252)]
    assert [ev3.matthews_correlation(i) for i in range(3)] == approx(mcc)
    assert ev3.matthews_correlation() == approx(np.mean(mcc))
    assert ev3.matthews_correlation(averaging="micro") == approx(1 / 3)
    # F-beta: (1+b²)PR/(b²P+R) for class 0 with P=2/3, R=1/2, b=2 -> (5/3)/(8/3+1/2)=10/19
    assert ev3.f_beta(2.0, 0) == approx(10 / 19)
    assert ev3.g_measure(0) == approx(np.sqrt(2 / 3 * 1 / 2))


def test_evaluation_input_forms_agree(ev3):
    """Class indices, one-hot labels, [n, 1] index labels, probabilities, logits, NDArray."""
    forms = [
        (one_hot(ACTUAL, 3), PRED),
        (ACTUAL, scores_for(PRED, 3)),
        (ACTUAL[:, None], np.log(scores_for(PRED, 3))),  # logits: argmax unchanged
        (one_hot(ACTUAL, 3).tolist(), scores_for(PRED, 3).tolist()),
        (nd.create(one_hot(ACTUAL, 3)), nd.create(scores_for(PRED, 3))),
        (ACTUAL.astype(np.float32), PRED.astype(np.float64)),
    ]
    for labels, preds in forms:
        ev = Evaluation()  # number of classes inferred whenever an input is [n, C]
        if np.ndim(preds) == 1:
            ev = Evaluation(num_classes=3)
        ev.eval(labels, preds)
        assert ev.confusion_matrix().tolist() == CM


def test_evaluation_class_names_and_stats(ev3):
    ev = Evaluation(labels_list=["cat", "dog", "bird"])
    ev.eval(ACTUAL, PRED)
    assert ev.precision("cat") == ev.precision(0) == approx(2 / 3)
    text = ev.stats()
    for piece in ("# of classes:    3", "Accuracy:        0.5556", "macro-averaged",
                  "2 = bird", "Confusion matrix format: Actual (rowClass)", "0 (cat)"):
        assert piece in text
    # the matrix rows as ND4J prints them
    assert " 2 1 1 | 0 = cat" in text and " 1 1 1 | 2 = bird" in text
    assert "Confusion Matrix" not in ev.stats(include_confusion=False)
    assert str(ev) == text
    m = ev3.metrics()
    assert set(m) == {"accuracy", "precision", "recall", "f1", "matthews_correlation"}
    assert m["f1"] == approx(172 / 315) and all(isinstance(v, float) for v in m.values())


def test_evaluation_binary_defaults_to_positive_class():
    # labels 1 1 0 0 1, predicted 1 0 0 1 1: class 1 TP=2 FP=1 FN=1; class 0 TP=1 FP=1 FN=1
    labels, preds = [1, 1, 0, 0, 1], [1, 0, 0, 1, 1]
    ev = Evaluation(num_classes=2)
    ev.eval(labels, preds)
    assert (ev.precision(), ev.recall(), ev.f1()) == approx((2 / 3, 2 / 3, 2 / 3))
    assert ev.precision(averaging="macro") == approx((2 / 3 + 1 / 2) / 2)
    assert "positive class (class 1" in ev.stats()
    ev0 = Evaluation(num_classes=2, binary_positive_class=0)
    ev0.eval(labels, preds)
    assert ev0.precision() == approx(1 / 2)
    evm = Evaluation(num_classes=2, binary_positive_class=None)
    evm.eval(labels, preds)
    assert evm.precision() == approx(7 / 12)
    # [n, 1] probability of class 1: predicted 1 iff p > 0.5 (strictly, as ND4J): .5 -> 0
    evp = Evaluation()
    evp.eval(np.array(labels)[:, None], [[.6], [.5], [.2], [.7], [.9]])
    assert evp.confusion_matrix().tolist() == ev.confusion_matrix().tolist()
    # a custom threshold on softmax [n, 2]: class 1 iff p1 > 0.65 -> predicted 0 0 0 1 1
    evt = Evaluation(binary_decision_threshold=0.65)
    p1 = np.array([.6, .5, .2, .7, .9])
    evt.eval(labels, np.stack([1 - p1, p1], 1))
    assert evt.confusion_matrix().tolist() == [[1, 1], [2, 1]]


def test_evaluation_top_n():
    # true 0: top-1 hit; true 1: one class higher -> top-2 hit; true 2: two higher -> miss;
    # true 2 tied with the max (.4 = .4): nothing strictly higher -> hit (ND4J), argmax says 0
    probs = [[.5, .3, .2], [.5, .3, .2], [.5, .3, .2], [.4, .2, .4]]
    ev = Evaluation(top_n=2)
    ev.eval([0, 1, 2, 2], probs)
    assert ev.top_n_accuracy() == approx(3 / 4)
    assert ev.accuracy() == approx(1 / 4)
    with pytest.warns(EvaluationWarning):  # classes 1 and 2 are never predicted
        assert ev.metrics()["top_n_accuracy"] == approx(3 / 4)
    assert "Top-2 Accuracy:  0.7500" in ev.stats()
    with pytest.raises(EvaluationError, match="top_n=2 needs per-class scores"):
        Evaluation(num_classes=3, top_n=2).eval([0, 1], [0, 1])


def test_evaluation_macro_excludes_never_predicted_class():
    # actual 0 1 2, predicted 0 1 1: class 2 is never predicted -> precision undefined
    # precision: [1, 1/2, undefined] -> macro over classes 0, 1 = 3/4
    # recall:    [1, 1, 0]           -> macro 2/3
    # F1 (ND4J): undefined when P or R is -> [1, 2/3, excluded] -> 5/6
    ev = Evaluation(num_classes=3)
    ev.eval([0, 1, 2], [0, 1, 1])
    with pytest.warns(EvaluationWarning, match=r"precision leaves out 1 class .*\['2'\]"):
        assert ev.precision() == approx(3 / 4)
    assert ev.precision(2) == 0.0  # asked directly: ND4J's edge value
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # recall needs no exclusion here: no warning
        assert ev.recall() == approx(2 / 3)
        assert ev.f1() == approx(5 / 6)
        text = ev.stats()  # the report lists the exclusion instead of warning
    assert "Warning: average precision leaves out 1 class(es)" in text
    # a class absent from the labels is left out of macro recall
    ev2 = Evaluation(num_classes=3)
    ev2.eval([0, 1, 1], [0, 1, 0])
    with pytest.warns(EvaluationWarning, match="recall leaves out"):
        assert ev2.recall() == approx((1 + 1 / 2) / 2)


def test_evaluation_empty_is_nan():
    ev = Evaluation(num_classes=3)
    assert ev.num_examples == 0 and ev.confusion_matrix().tolist() == [[0] * 3] * 3
    assert all(np.isnan(v) for v in ev.metrics().values())
    assert "No examples" in ev.stats()
    assert np.isnan(Evaluation().accuracy()) and Evaluation().confusion_matrix().shape == (0, 0)


def test_evaluation_mask():
    labels, preds = one_hot(ACTUAL, 3), scores_for(PRED, 3)
    keep = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0])
    padded_preds = preds.copy()
    padded_preds[keep == 0] = np.nan  # masked rows may hold padding
    padded_labels = labels.copy()
    padded_labels[keep == 0] = 0  # all-zero one-hot rows are fine when masked
    ev = Evaluation()
    ev.eval(padded_labels, padded_preds, mask=keep[:, None])
    ref = Evaluation()
    ref.eval(labels[keep == 1], preds[keep == 1])
    assert ev.confusion_matrix().tolist() == ref.confusion_matrix().tolist()
    assert ev.num_examples == 6
    ev.eval(labels, preds, mask=keep.astype(bool))
    assert ev.num_examples == 12


def test_evaluation_merge_reset_and_random_cross_check():
    rng = np.random.default_rng(0)
    c, n = 5, 400
    actual = rng.integers(0, c, n)
    logits = rng.normal(size=(n, c)) + 1.5 * one_hot(actual, c)
    pred = logits.argmax(1)
    # independent reference: counts by a Python loop, metrics by their textbook formulas
    cm = np.zeros((c, c), int)
    for a, p in zip(actual, pred):
        cm[a, p] += 1
    tp = np.array([cm[i, i] for i in range(c)])
    fp = np.array([sum(cm[j, i] for j in range(c) if j != i) for i in range(c)])
    fn = np.array([sum(cm[i, j] for j in range(c) if j != i) for i in range(c)])
    tn = n - tp - fp - fn
    ranks = np.array([(logits[i] > logits[i, actual[i]]).sum() for i in range(n)])

    whole = Evaluation(top_n=3)
    whole.eval(one_hot(actual, c), logits)
    parts = [Evaluation(top_n=3) for _ in range(3)]
    for part, rows in zip(parts, np.array_split(np.arange(n), 3)):
        part.eval(actual[rows], logits[rows])
    parts[0].merge(parts[1])
    parts[0].merge(parts[2])
    parts[0].merge(Evaluation(top_n=3))  # an empty one adds nothing
    for ev in (whole, parts[0]):
        assert ev.confusion_matrix().tolist() == cm.tolist()
        assert ev.accuracy() == approx(np.trace(cm) / n)
        assert ev.top_n_accuracy() == approx(np.mean(ranks < 3))
        assert ev.precision(averaging="macro") == approx(np.mean(tp / (tp + fp)))
        assert ev.recall(averaging="micro") == approx(tp.sum() / (tp.sum() + fn.sum()))
        p, r = tp / (tp + fp), tp / (tp + fn)
        assert ev.f1(averaging="macro") == approx(np.mean(2 * p * r / (p + r)))
        mcc = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        assert ev.matthews_correlation(averaging="macro") == approx(mcc.mean())
        assert ev.false_positive_rate(averaging="macro") == approx(np.mean(fp / (fp + tn)))
    whole.reset()
    assert whole.num_examples == 0 and whole.num_classes is None and whole._top_n_total == 0
    whole.eval(actual[:10], logits[:10])
    assert whole.num_examples == 10


def test_evaluation_errors(ev3):
    with pytest.raises(EvaluationError, match=r"labels \(2, 3\).*predictions \(2, 4\)"):
        Evaluation().eval(np.eye(3)[:2], np.ones((2, 4)))
    with pytest.raises(EvaluationError, match="different numbers of rows"):
        Evaluation().eval(np.eye(3), np.ones((2, 3)))
    with pytest.raises(EvaluationError, match="NaN"):
        Evaluation().eval([0, 1], [[0.5, np.nan], [0.2, 0.8]])
    with pytest.raises(EvaluationError, match="class index 3, outside 0..2"):
        Evaluation(num_classes=3).eval([0, 3], [0, 1])
    with pytest.raises(EvaluationError, match="pass Evaluation\\(num_classes=...\\)"):
        Evaluation().eval([0, 1], [1, 1])
    with pytest.raises(EvaluationError, match="imply 4 classes, but this evaluation has 3"):
        ev3.eval(np.eye(4), np.eye(4))
    with pytest.raises(EvaluationError, match="no positive entry"):
        Evaluation().eval([[0, 0], [0, 1]], [[.3, .7], [.2, .8]])
    with pytest.raises(EvaluationError, match="integer class indices"):
        Evaluation(num_classes=2).eval([0, 1], [0.3, 0.7])
    with pytest.raises(EvaluationError, match="mask has shape"):
        Evaluation().eval(np.eye(2), np.eye(2), mask=[1, 1, 1])
    with pytest.raises(EvaluationError, match="mask values must be 0 or 1"):
        Evaluation().eval(np.eye(2), np.eye(2), mask=[0.5, 1])
    with pytest.raises(EvaluationError, match="numeric"):
        Evaluation(num_classes=2).eval(["a", "b"], [0, 1])
    with pytest.raises(EvaluationError, match="has shape"):
        Evaluation().eval(np.zeros((2, 3, 4)), np.zeros((2, 3, 4)))
    with pytest.raises(EvaluationError, match="cannot merge a RegressionEvaluation"):
        ev3.merge(RegressionEvaluation())
    with pytest.raises(EvaluationError, match="3 classes and the other 2"):
        other = Evaluation(num_classes=2)
        other.eval([0], [0])
        ev3.merge(other)
    with pytest.raises(EvaluationError, match="configurations differ"):
        ev3.merge(Evaluation(top_n=2))
    with pytest.raises(EvaluationError, match="averaging='weighted'"):
        ev3.precision(averaging="weighted")  # type: ignore[arg-type]
    with pytest.raises(EvaluationError, match="no class named 'cat'"):
        ev3.precision("cat")
    with pytest.raises(EvaluationError, match="out of range"):
        ev3.recall(3)
    with pytest.raises(EvaluationError, match="labels_list has 2 names"):
        Evaluation(num_classes=3, labels_list=["a", "b"])
    # a rejected batch leaves the accumulated state untouched
    assert ev3.confusion_matrix().tolist() == CM
    # the error is catchable as the library base and as ValueError
    assert issubclass(EvaluationError, NdError) and issubclass(EvaluationError, ValueError)


# ================================================================================================
# EvaluationBinary, by hand (threshold 0.5, predicted positive iff p > 0.5)
#
#   labels          predictions        predicted       column  TP FP FN TN
#   [1, 0, 1]       [.9, .2, .4]       [1, 0, 0]       0        1  1  1  1
#   [0, 0, 1]       [.6, .1, .7]       [1, 0, 1]       1        1  0  1  2   (.5 is not > .5)
#   [1, 1, 0]       [.3, .8, .2]       [0, 1, 0]       2        2  0  1  1
#   [0, 1, 1]       [.2, .5, .6]       [0, 0, 1]
#
#   precision [1/2, 1, 1], recall [1/2, 1/2, 2/3], accuracy [2/4, 3/4, 3/4]
#   F1 = 2TP/(2TP+FP+FN) = [2/4, 2/3, 4/5]
#   averages: precision 5/6, recall 5/9, accuracy 2/3, F1 (1/2 + 2/3 + 4/5)/3 = 59/90
# ================================================================================================

BL = np.array([[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 1]])
BP = np.array([[.9, .2, .4], [.6, .1, .7], [.3, .8, .2], [.2, .5, .6]])


def test_evaluation_binary_hand():
    ev = EvaluationBinary(labels_list=["a", "b", "c"])
    ev.eval(BL, BP)
    assert ev.true_positives().tolist() == [1, 1, 2]
    assert ev.false_positives().tolist() == [1, 0, 0]
    assert ev.false_negatives().tolist() == [1, 1, 1]
    assert ev.true_negatives().tolist() == [1, 2, 1]
    assert [ev.precision(i) for i in range(3)] == approx([1 / 2, 1, 1])
    assert [ev.recall(i) for i in range(3)] == approx([1 / 2, 1 / 2, 2 / 3])
    assert [ev.accuracy(i) for i in range(3)] == approx([1 / 2, 3 / 4, 3 / 4])
    assert [ev.f1(i) for i in range(3)] == approx([1 / 2, 2 / 3, 4 / 5])
    assert ev.f1("c") == approx(4 / 5) and ev.total_count("b") == 4
    assert ev.matthews_correlation(0) == 0.0  # (1·1 - 1·1) / ...
    assert ev.false_positive_rate(0) == approx(1 / 2) and ev.false_negative_rate(2) == approx(1 / 3)
    assert ev.average_precision() == approx(5 / 6)
    assert ev.average_recall() == approx(5 / 9)
    assert ev.average_accuracy() == approx(2 / 3)
    assert ev.average_f1() == approx(59 / 90)
    assert ev.metrics() == approx({"accuracy": 2 / 3, "precision": 5 / 6, "recall": 5 / 9,
                                   "f1": 59 / 90})
    text = ev.stats()
    assert "Label" in text and "c " in text and "0.8000" in text


def test_evaluation_binary_thresholds_and_mask():
    # per-column thresholds [.5, .45, .65]: column 1 now predicts row 3 (.5 > .45) -> TP 2, FN 0;
    # column 2 misses row 3 (.6 <= .65) -> TP 1, FN 2
    ev = EvaluationBinary(threshold=[0.5, 0.45, 0.65])
    ev.eval(BL, BP)
    assert [ev.recall(i) for i in range(3)] == approx([1 / 2, 1, 1 / 3])
    # per-output mask: column 0 drops row 3, column 1 drops row 2, column 2 drops row 1
    #   col 0: rows 0-2 -> TP 1 FP 1 FN 1 TN 0;  col 1: rows 0,1,3 -> FN 1 TN 2 (never predicted)
    #   col 2: rows 0,2,3 -> TP 1 FN 1 TN 1
    mask = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 1], [0, 1, 1]])
    preds = BP.copy()
    preds[mask == 0] = np.nan  # padding under the mask is ignored
    ev = EvaluationBinary()
    ev.eval(BL, preds, mask=mask)
    assert [ev.total_count(i) for i in range(3)] == [3, 3, 3]
    assert ev.true_positives().tolist() == [1, 0, 1]
    assert ev.true_negatives().tolist() == [0, 2, 1]
    assert ev.precision(1) == 0.0  # never predicted positive: edge value...
    with pytest.warns(EvaluationWarning, match=r"precision leaves out 1 column .*\['1'\]"):
        assert ev.average_precision() == approx((1 / 2 + 1) / 2)  # ...left out of the average
    # a per-example mask is the same as dropping rows
    ev1, ev2 = EvaluationBinary(), EvaluationBinary()
    ev1.eval(BL, BP, mask=[1, 0, 1, 1])
    ev2.eval(BL[[0, 2, 3]], BP[[0, 2, 3]])
    assert ev1.true_positives().tolist() == ev2.true_positives().tolist()
    assert ev1.false_negatives().tolist() == ev2.false_negatives().tolist()


def test_evaluation_binary_merge_random_and_errors():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, (300, 4))
    probs = np.clip(labels * 0.3 + rng.random((300, 4)) * 0.7, 0, 1)
    whole, a, b = EvaluationBinary(), EvaluationBinary(), EvaluationBinary()
    whole.eval(labels, probs)
    a.eval(labels[:120], probs[:120])
    b.eval(labels[120:], probs[120:])
    a.merge(b)
    pred = probs > 0.5
    for ev in (whole, a):
        assert ev.true_positives().tolist() == (pred & (labels == 1)).sum(0).tolist()
        assert ev.false_positives().tolist() == (pred & (labels == 0)).sum(0).tolist()
        for j in range(4):
            assert ev.accuracy(j) == approx(np.mean(pred[:, j] == labels[:, j]))
    whole.reset()
    assert np.isnan(whole.average_accuracy()) and whole.num_outputs is None
    with pytest.raises(EvaluationError, match=r"labels \(2, 2\) and predictions \(2, 3\)"):
        EvaluationBinary().eval(np.ones((2, 2)), np.ones((2, 3)))
    with pytest.raises(EvaluationError, match="must be 0 or 1"):
        EvaluationBinary().eval([[0.9]], [[0.5]])
    with pytest.raises(EvaluationError, match="NaN"):
        EvaluationBinary().eval([[1]], [[np.nan]])
    with pytest.raises(EvaluationError, match="3 thresholds for 2 outputs"):
        EvaluationBinary(num_outputs=2, threshold=[.5, .5, .5])
    with pytest.raises(EvaluationError, match="has 4"):
        a.eval(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(EvaluationError, match="thresholds differ"):
        a.merge(EvaluationBinary(threshold=0.7))
    with pytest.raises(EvaluationError, match="cannot merge"):
        a.merge(Evaluation())


# ================================================================================================
# ROC, by hand
#
#   labels 1   0   1   0   1   0
#   scores .9  .8  .7  .7  .4  .2
#
#   Mann–Whitney: positive .9 beats 3 negatives; .7 beats .2, ties .7 (1/2), loses to .8;
#   .4 beats .2 -> U = 3 + 1.5 + 1 = 5.5 of 3·3 pairs -> AUC = 11/18
#   curve (threshold: TP FP): inf 0 0 | .9: 1 0 | .8: 1 1 | .7: 2 2 | .4: 3 2 | .2: 3 3
#   trapezoids: 1/3·1/3 + 1/3·(1/3+2/3)/2 + 1/3·1 = 11/18 (the tie is the diagonal segment)
#   precision-recall (from recall 0, precision 1): recall 0 1/3 1/3 2/3 1 1,
#   precision 1 1 1/2 1/2 3/5 1/2 -> AUPRC = 1/3 + 0 + 1/6 + (1/2+3/5)/2·1/3 = 41/60
# ================================================================================================

RL = np.array([1, 0, 1, 0, 1, 0])
RS = np.array([.9, .8, .7, .7, .4, .2])


def mann_whitney_auc(labels, scores):
    """Independent AUC: the fraction of (positive, negative) pairs ranked right, ties 1/2."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    diff = pos[:, None] - neg[None, :]
    return ((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size


def test_roc_hand():
    roc = ROC()
    roc.eval(RL, RS)
    assert roc.calculate_auc() == approx(11 / 18) == mann_whitney_auc(RL, RS)
    fpr, tpr, thr = roc.get_roc_curve()
    assert fpr.tolist() == approx([0, 0, 1 / 3, 2 / 3, 2 / 3, 1])
    assert tpr.tolist() == approx([0, 1 / 3, 1 / 3, 2 / 3, 1, 1])
    assert thr.tolist() == [np.inf, .9, .8, .7, .4, .2]
    prec, rec, _ = roc.get_precision_recall_curve()
    assert prec.tolist() == approx([1, 1, 1 / 2, 1 / 2, 3 / 5, 1 / 2])
    assert rec.tolist() == approx([0, 1 / 3, 1 / 3, 2 / 3, 1, 1])
    assert roc.calculate_aucpr() == approx(41 / 60)
    assert roc.count_actual_positive() == 3 and roc.count_actual_negative() == 3
    assert roc.metrics() == approx({"auc": 11 / 18, "aucpr": 41 / 60})
    assert "AUC (Area under ROC Curve):                0.6111" in roc.stats()


def test_roc_binned_hand():
    # 10 steps: every score lies on the grid i/10, so the binned curve has the exact curve's
    # points (plus repeats) and the same areas
    roc = ROC(threshold_steps=10)
    roc.eval(RL, RS)
    assert roc.calculate_auc() == approx(11 / 18)
    assert roc.calculate_aucpr() == approx(41 / 60)
    assert len(roc.get_roc_curve().thresholds) == 12  # inf + 11 grid thresholds
    # 2 steps, thresholds 1, .5, 0 (positive iff score >= t): TP/FP = 0/0, 2/2 (.9 .8 .7 .7),
    # 3/3 -> points (0,0) (2/3,2/3) (1,1): AUC 1/2
    coarse = ROC(threshold_steps=2)
    coarse.eval(RL, RS)
    assert coarse.calculate_auc() == approx(0.5)
    assert coarse.get_roc_curve().fpr.tolist() == approx([0, 0, 2 / 3, 1])


def test_roc_input_forms_mask_and_degenerate():
    ref = ROC()
    ref.eval(RL, RS)
    for labels, preds in ((RL[:, None], RS[:, None]), (one_hot(RL, 2), np.stack([1 - RS, RS], 1)),
                          (nd.create(RL.astype(np.float32)), nd.create(RS))):
        roc = ROC()
        roc.eval(labels, preds)
        assert roc.calculate_auc() == approx(ref.calculate_auc())
    masked = ROC()
    masked.eval(np.r_[RL, 1, 0], np.r_[RS, np.nan, 5.0], mask=np.r_[np.ones(6), 0, 0])
    assert masked.calculate_auc() == approx(11 / 18)
    one_class = ROC()
    one_class.eval([1, 1], [.3, .6])
    assert np.isnan(one_class.calculate_auc()) and one_class.calculate_aucpr() == approx(1.0)
    empty = ROC()
    assert np.isnan(empty.calculate_auc()) and np.isnan(empty.calculate_aucpr())
    assert "0 positive" in empty.stats()
    # exact mode takes any real score (logits), including infinities
    logits = ROC()
    logits.eval([0, 1, 1, 0], [-np.inf, np.inf, 3.0, 3.0])
    assert logits.calculate_auc() == approx(mann_whitney_auc(np.array([0, 1, 1, 0]),
                                                             np.array([-1e9, 1e9, 3., 3.])))


def test_roc_random_cross_check_and_merge():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, 500)
    scores = np.round(rng.random(500) * 0.6 + labels * 0.3, 2)  # many ties
    whole = ROC()
    whole.eval(labels, scores)
    auc = mann_whitney_auc(labels, scores)
    assert whole.calculate_auc() == approx(auc, abs=1e-12)
    parts = [ROC() for _ in range(4)]
    for part, rows in zip(parts, np.array_split(np.arange(500), 4)):
        part.eval(labels[rows], scores[rows])
    for p in parts[1:]:
        parts[0].merge(p)
    assert parts[0].calculate_auc() == approx(auc, abs=1e-12)
    assert parts[0].calculate_aucpr() == approx(whole.calculate_aucpr(), abs=1e-12)
    # binned on the scores' own grid (hundredths) is exact too; merged binned likewise
    b1, b2 = ROC(100), ROC(100)
    b1.eval(labels[:200], scores[:200])
    b2.eval(labels[200:], scores[200:])
    b1.merge(b2)
    assert b1.calculate_auc() == approx(auc, abs=1e-12)
    assert b1.calculate_aucpr() == approx(whole.calculate_aucpr(), abs=1e-12)
    coarse = ROC(10)
    coarse.eval(labels, scores)
    assert abs(coarse.calculate_auc() - auc) < 0.05
    whole.reset()
    assert whole.count_actual_positive() == 0


def test_roc_errors():
    with pytest.raises(EvaluationError, match="use ROCMultiClass for 3 classes"):
        ROC().eval(np.eye(3), np.eye(3))
    with pytest.raises(EvaluationError, match=r"binned mode .* \[0, 1\].*exact mode"):
        ROC(threshold_steps=10).eval([0, 1], [-2.0, 3.0])
    with pytest.raises(EvaluationError, match="NaN"):
        ROC().eval([0, 1], [0.2, np.nan])
    with pytest.raises(EvaluationError, match="must be 0 or 1"):
        ROC().eval([0, 2], [0.2, 0.4])
    with pytest.raises(EvaluationError, match="threshold_steps=-1"):
        ROC(threshold_steps=-1)
    with pytest.raises(EvaluationError, match="threshold_steps differ"):
        ROC().merge(ROC(threshold_steps=5))
    with pytest.raises(EvaluationError, match="cannot merge a ROCBinary"):
        ROC().merge(ROCBinary())


def test_roc_multiclass_and_binary():
    # one-vs-all: class c is the ROC of (actual == c) against column c, e.g. for the docstring
    # example: class 1 scores .2 .6 .3 .1, positives {.6, .1}, negatives {.2, .3} -> 2/4
    labels = [0, 1, 2, 1]
    probs = np.array([[.7, .2, .1], [.3, .6, .1], [.2, .3, .5], [.2, .1, .7]])
    mc = ROCMultiClass(labels_list=["a", "b", "c"])
    mc.eval(labels, probs)
    assert [mc.calculate_auc(i) for i in range(3)] == approx([1.0, 0.5, 2 / 3])
    assert mc.calculate_auc("b") == approx(0.5)
    assert mc.calculate_average_auc() == approx((1 + 0.5 + 2 / 3) / 3)
    mc1 = ROCMultiClass()
    mc1.eval(one_hot(labels, 3), probs)
    assert mc1.calculate_average_auc() == approx(mc.calculate_average_auc())
    assert "Average AUC:   0.7222" in mc.stats()

    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, (200, 3))
    s = np.round(rng.random((200, 3)) * 0.7 + 0.3 * y, 1)
    mask = rng.integers(0, 2, (200, 3))
    rb = ROCBinary()
    rb.eval(y[:90], s[:90], mask=mask[:90])
    rb2 = ROCBinary()
    rb2.eval(y[90:], s[90:], mask=mask[90:])
    rb.merge(rb2)
    for j in range(3):
        k = mask[:, j] == 1
        assert rb.calculate_auc(j) == approx(mann_whitney_auc(y[k, j], s[k, j]))
    assert rb.metrics()["auc"] == approx(np.mean([rb.calculate_auc(j) for j in range(3)]))
    with pytest.raises(EvaluationError, match="exactly one 1"):
        ROCMultiClass().eval([[1, 1, 0]], [[.5, .3, .2]])
    with pytest.raises(EvaluationError, match="class indices in 0..2"):
        ROCMultiClass().eval([3], [[.5, .3, .2]])
    with pytest.raises(EvaluationError, match="3 vs 2 columns"):
        other = ROCBinary()
        other.eval(np.ones((2, 2)), np.ones((2, 2)))
        rb.merge(other)


# ================================================================================================
# RegressionEvaluation, by hand
#
#   column 0: y 1 2 3 4, p 2 2 2 5: errors -1 0 1 -1 -> SSE 3, SAE 3 -> MSE 3/4, MAE 3/4
#     ȳ = 2.5, Σ(y-ȳ)² = 5 -> RSE 3/5, R² 2/5
#     p̄ = 2.75, Σ(y-ȳ)(p-p̄) = 1.125 + .375 - .375 + 3.375 = 4.5, Σ(p-p̄)² = 6.75
#     -> Pearson 4.5 / sqrt(5 · 6.75) = sqrt(0.6)
#   column 1: y 0 0 1 1, p .5 0 1 .5: SSE .5, SAE 1 -> MSE 1/8, MAE 1/4; Σ(y-ȳ)² = 1 -> R² 1/2
#     Σ(y-ȳ)(p-p̄) = .5, Σ(p-p̄)² = .5 -> Pearson .5 / sqrt(.5) = sqrt(.5)
# ================================================================================================

YL = np.array([[1, 0], [2, 0], [3, 1], [4, 1]], float)
YP = np.array([[2, .5], [2, 0], [2, 1], [5, .5]])


def test_regression_hand():
    ev = RegressionEvaluation(column_names=["a", "b"])
    ev.eval(YL, YP)
    assert ev.mean_squared_error("a") == approx(3 / 4) and ev.mean_squared_error(1) == approx(1 / 8)
    assert ev.mean_absolute_error(0) == approx(3 / 4) and ev.mean_absolute_error(1) == approx(1 / 4)
    assert ev.root_mean_squared_error(0) == approx(np.sqrt(3 / 4))
    assert ev.relative_squared_error(0) == approx(3 / 5)
    assert ev.r_squared(0) == approx(2 / 5) and ev.r_squared("b") == approx(1 / 2)
    assert ev.pearson_correlation(0) == approx(np.sqrt(0.6))
    assert ev.pearson_correlation(1) == approx(np.sqrt(0.5))
    assert ev.average_mean_squared_error() == approx((3 / 4 + 1 / 8) / 2)
    assert ev.average_r_squared() == approx((2 / 5 + 1 / 2) / 2)
    assert ev.average_mean_absolute_error() == approx(1 / 2)
    assert ev.average_pearson_correlation() == approx((np.sqrt(.6) + np.sqrt(.5)) / 2)
    m = ev.metrics()
    assert set(m) == {"mse", "mae", "rmse", "rse", "r2", "pearson"}
    assert m["rse"] == approx((3 / 5 + 1 / 2) / 2)
    assert ev.count("a") == 4
    text = ev.stats()
    assert "0.75000" in text and "average" in text and text.splitlines()[2].startswith("a ")


def test_regression_mask_merge_random_and_stability():
    rng = np.random.default_rng(4)
    y = rng.normal(size=(300, 3)) * [1, 10, 0.1]
    p = y + rng.normal(size=(300, 3)) * 0.5
    mask = rng.random((300, 3)) > 0.2
    whole = RegressionEvaluation()
    whole.eval(y, np.where(mask, p, np.nan), mask=mask)  # padding under the mask is ignored
    parts = [RegressionEvaluation() for _ in range(5)]
    for part, rows in zip(parts, np.array_split(np.arange(300), 5)):
        part.eval(y[rows], p[rows], mask=mask[rows])
    for q in parts[1:]:
        parts[0].merge(q)
    for ev in (whole, parts[0]):
        for j in range(3):
            yj, pj = y[mask[:, j], j], p[mask[:, j], j]
            sse = np.sum((yj - pj) ** 2)
            assert ev.count(j) == len(yj)
            assert ev.mean_squared_error(j) == approx(np.mean((yj - pj) ** 2))
            assert ev.mean_absolute_error(j) == approx(np.mean(np.abs(yj - pj)))
            assert ev.r_squared(j) == approx(1 - sse / np.sum((yj - yj.mean()) ** 2))
            assert ev.pearson_correlation(j) == approx(np.corrcoef(yj, pj)[0, 1])
    # labels with a huge mean, fed in small batches: centred moments keep R² and Pearson exact
    # where Σy² - n·ȳ² would cancel to noise
    x = rng.normal(size=200)
    px = x + rng.normal(size=200) * 0.1
    big = RegressionEvaluation()
    for rows in np.array_split(np.arange(200), 40):
        big.eval(1e9 + x[rows], 1e9 + px[rows])
    assert big.r_squared(0) == approx(1 - np.sum((x - px) ** 2) / np.sum((x - x.mean()) ** 2),
                                      rel=1e-6)
    assert big.pearson_correlation(0) == approx(np.corrcoef(x, px)[0, 1], rel=1e-6)
    # constant labels: R², RSE and Pearson undefined (NaN) and left out of averages
    const = RegressionEvaluation()
    const.eval([[2.0, 1.0], [2.0, 3.0]], [[1.0, 1.0], [3.0, 2.0]])
    assert np.isnan(const.r_squared(0)) and np.isnan(const.pearson_correlation(0))
    assert const.average_r_squared() == approx(const.r_squared(1))
    const.reset()
    assert const.num_columns is None and np.isnan(const.metrics()["mse"])


def test_regression_errors():
    with pytest.raises(EvaluationError, match=r"labels \(3, 2\) and predictions \(3, 1\)"):
        RegressionEvaluation().eval(np.ones((3, 2)), np.ones((3, 1)))
    with pytest.raises(EvaluationError, match="non-finite"):
        RegressionEvaluation().eval([1.0, 2.0], [1.0, np.inf])
    with pytest.raises(EvaluationError, match="non-finite"):
        RegressionEvaluation().eval([np.nan, 2.0], [1.0, 2.0])
    with pytest.raises(EvaluationError, match=r"mask has shape \(2, 3\)"):
        RegressionEvaluation().eval(np.ones((2, 2)), np.ones((2, 2)), mask=np.ones((2, 3)))
    ev = RegressionEvaluation(num_columns=2)
    with pytest.raises(EvaluationError, match="3 columns but this evaluation has 2"):
        ev.eval(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(EvaluationError, match="2 vs 1 columns"):
        other = RegressionEvaluation()
        other.eval([1.0], [1.0])
        ev.merge(other)
    with pytest.raises(EvaluationError, match="cannot merge a ROC"):
        ev.merge(ROC())


# ================================================================================================
# the shared protocol, and the runnable docstrings
# ================================================================================================

PROTOCOL_CASES = [
    (lambda: Evaluation(), one_hot(ACTUAL, 3), scores_for(PRED, 3)),
    (lambda: EvaluationBinary(), BL, BP),
    (lambda: ROC(), RL, RS),
    (lambda: ROC(threshold_steps=20), RL, RS),
    (lambda: ROCBinary(), BL, BP),
    (lambda: ROCMultiClass(), ACTUAL, scores_for(PRED, 3)),
    (lambda: RegressionEvaluation(), YL, YP),
]


@pytest.mark.parametrize("make, labels, preds", PROTOCOL_CASES)
def test_protocol(make, labels, preds):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvaluationWarning)
        ev = make()
        ev.eval(nd.create(np.asarray(labels, np.float32)), nd.create(preds))
        m = ev.metrics()
        assert m and all(isinstance(k, str) and isinstance(v, float) for k, v in m.items())
        assert isinstance(ev.stats(), str) and ev.stats() == str(ev)
        # merge(a, b) == eval on the concatenation
        a, b, whole = make(), make(), make()
        n = len(labels)
        a.eval(labels[: n // 2], preds[: n // 2])
        b.eval(labels[n // 2:], preds[n // 2:])
        a.merge(b)
        whole.eval(np.concatenate([labels[: n // 2], labels[n // 2:]]), preds)
        assert a.metrics() == approx(whole.metrics(), nan_ok=True)
        assert a.stats() == whole.stats()
        # an empty evaluator merges as a no-op; reset returns to the empty state
        a.merge(make())
        assert a.metrics() == approx(whole.metrics(), nan_ok=True)
        a.reset()
        assert a.stats() == make().stats()
        assert all(np.isnan(v) for v in a.metrics().values())


@pytest.mark.parametrize("module", ["", ".base", ".classification", ".binary", ".roc",
                                    ".regression"])
def test_docstring_examples_run(module):
    mod = importlib.import_module("samediff.evaluation" + module)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_exports():
    import samediff
    assert nd.evaluation.Evaluation is Evaluation is samediff.Evaluation
    assert samediff.ROC is ROC and samediff.EvaluationError is EvaluationError


def test_sklearn_cross_check():
    skm = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(5)
    y = rng.integers(0, 4, 300)
    logits = rng.normal(size=(300, 4)) + one_hot(y, 4)
    ev = Evaluation()
    ev.eval(y, logits)
    pred = logits.argmax(1)
    assert ev.f1(averaging="macro") == approx(skm.f1_score(y, pred, average="macro"))
    assert ev.precision(averaging="micro") == approx(skm.precision_score(y, pred,
                                                                         average="micro"))
    yb = (y == 0).astype(int)
    roc = ROC()
    roc.eval(yb, logits[:, 0])
    assert roc.calculate_auc() == approx(skm.roc_auc_score(yb, logits[:, 0]))
