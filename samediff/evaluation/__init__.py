"""Evaluation of model outputs against labels (ND4J's ``org.nd4j.evaluation``), eager and numpy.

Every evaluator follows one protocol so training code can drive any of them:
``eval(labels, predictions, mask=None)`` accumulates a batch (NDArray, numpy arrays or lists),
``reset()``, ``merge(other)``, ``stats() -> str`` and ``metrics() -> dict[str, float]``.

- ``Evaluation``: multi-class accuracy, precision/recall/F1 (per class, macro, micro), MCC,
  confusion matrix, top-N accuracy.
- ``EvaluationBinary``: per-column binary metrics for multi-label outputs.
- ``ROC`` (binary), ``ROCBinary`` (per column), ``ROCMultiClass`` (one-vs-all): AUC, AUPRC and
  curves; exact (``threshold_steps=0``) or binned.
- ``RegressionEvaluation``: per-column MSE, MAE, RMSE, RSE, R², Pearson correlation.

Bad inputs raise ``EvaluationError`` (a ``ValueError``) naming the shapes and the fix; averages
that leave out undefined classes emit ``EvaluationWarning``.

>>> from samediff.evaluation import Evaluation
>>> ev = Evaluation()
>>> ev.eval([[0, 1], [1, 0]], [[0.2, 0.8], [0.4, 0.6]])
>>> ev.metrics()["accuracy"]
0.5
"""
from .base import BaseEvaluation, EvaluationError, EvaluationWarning
from .binary import EvaluationBinary
from .classification import Averaging, Evaluation
from .regression import RegressionEvaluation
from .roc import ROC, PrecisionRecallCurve, ROCBinary, ROCMultiClass, RocCurve

__all__ = ["BaseEvaluation", "EvaluationError", "EvaluationWarning", "Evaluation", "Averaging",
           "EvaluationBinary", "ROC", "ROCBinary", "ROCMultiClass", "RocCurve",
           "PrecisionRecallCurve", "RegressionEvaluation"]
