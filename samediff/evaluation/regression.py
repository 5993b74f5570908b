"""Regression evaluation: ND4J's ``RegressionEvaluation``.

Per output column the state (the fields of ``base``'s protocol) is the count, the means of
labels and predictions, their centred sums of squares and co-moment, and the sums of squared and
absolute errors. Batches (and ``merge``) combine these with Chan et al.'s pairwise update (this
evaluator's ``_combine``) instead of accumulating raw ``Σy²``: the textbook ``Σy² - n·ȳ²``
cancels catastrophically when labels have a large mean (e.g. prices or timestamps), while
centred moments stay accurate.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .base import (BaseEvaluation, EvaluationError, State, add, banner, check_no_nan, check_rows,
                   fmt, output_mask, table, to_array)

__all__ = ["RegressionEvaluation"]

_OWNER = "RegressionEvaluation"
# sufficient statistics per column (all [C], float64): n, means, Σ (y - ȳ)², Σ (p - p̄)²,
# Σ (y - ȳ)(p - p̄), Σ (y - p)², Σ |y - p|
_MOMENTS = ("n", "mean_y", "mean_p", "m2_y", "m2_p", "c_yp", "sse", "sae")


def _of_batch(y: np.ndarray, p: np.ndarray, keep: np.ndarray) -> State:
    # masked entries are zeroed first so padding (even NaN) never enters a sum
    y = np.where(keep, y, 0.0)
    p = np.where(keep, p, 0.0)
    n = keep.sum(axis=0).astype(np.float64)
    safe = np.maximum(n, 1.0)
    mean_y, mean_p = y.sum(axis=0) / safe, p.sum(axis=0) / safe
    dy = np.where(keep, y - mean_y, 0.0)
    dp = np.where(keep, p - mean_p, 0.0)
    err = y - p  # zero where masked
    return dict(zip(_MOMENTS, (n, mean_y, mean_p, (dy * dy).sum(0), (dp * dp).sum(0),
                               (dy * dp).sum(0), (err * err).sum(0), np.abs(err).sum(0))))


def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den == 0 (metric undefined: no data, or constant labels)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


class RegressionEvaluation(BaseEvaluation):
    """Per-column MSE, MAE, RMSE, relative squared error, R² and Pearson correlation.

    ``labels`` and ``predictions`` are ``[n, C]`` (or ``[n]`` for one column) of finite
    numbers; ``mask`` is per example (``[n]``, ``[n, 1]``) or per output (``[n, C]``), 0/1.

    - MSE = Σ(y-p)²/n, MAE = Σ|y-p|/n, RMSE = √MSE
    - RSE = Σ(y-p)² / Σ(y-ȳ)², R² = 1 - RSE (can be negative)
    - Pearson r = Σ(y-ȳ)(p-p̄) / √(Σ(y-ȳ)² Σ(p-p̄)²)

    A value is NaN when undefined (column saw no data; RSE/R² with constant labels; Pearson
    with constant labels or predictions); ``average_*`` is the mean over the columns where it
    is defined (NaN if none).

    Args:
        num_columns: number of columns (inferred from the first batch when omitted).
        column_names: names for reports; metric methods accept a name or an index.

    >>> ev = RegressionEvaluation(column_names=["price"])
    >>> ev.eval([1.0, 2.0, 3.0], [1.5, 2.0, 2.0])
    >>> ev.mean_squared_error("price"), ev.mean_absolute_error(0), ev.r_squared(0)
    (0.4166666666666667, 0.5, 0.375)
    >>> other = RegressionEvaluation(); other.eval([3.0], [3.0]); ev.merge(other)
    >>> round(ev.mean_squared_error(0), 4)
    0.3125
    """

    _names_attr = "column_names"

    def __init__(self, num_columns: int | None = None,
                 column_names: Sequence[str] | None = None) -> None:
        if column_names is not None:
            column_names = [str(s) for s in column_names]
            if num_columns is not None and num_columns != len(column_names):
                raise EvaluationError(f"{_OWNER}: num_columns={num_columns} but column_names has "
                                      f"{len(column_names)} names")
            num_columns = len(column_names)
        if num_columns is not None and int(num_columns) < 1:
            raise EvaluationError(f"{_OWNER}: num_columns={num_columns} must be >= 1")
        self.column_names: list[str] | None = column_names
        self._start(None if num_columns is None else int(num_columns))

    def _empty(self, width: int) -> State:
        return {k: np.zeros(width) for k in _MOMENTS}

    def _combine(self, a: State, b: State) -> State:
        """Chan et al.'s pairwise update of the centred moments (errors simply add)."""
        n = a["n"] + b["n"]
        safe = np.maximum(n, 1.0)
        dy, dp = b["mean_y"] - a["mean_y"], b["mean_p"] - a["mean_p"]
        f = a["n"] * b["n"] / safe
        return {"n": n, "mean_y": a["mean_y"] + dy * b["n"] / safe,
                "mean_p": a["mean_p"] + dp * b["n"] / safe,
                "m2_y": a["m2_y"] + b["m2_y"] + dy * dy * f,
                "m2_p": a["m2_p"] + b["m2_p"] + dp * dp * f,
                "c_yp": a["c_yp"] + b["c_yp"] + dy * dp * f,
                "sse": add(a["sse"], b["sse"]), "sae": add(a["sae"], b["sae"])}

    def eval(self, labels: Any, predictions: Any, mask: Any = None) -> None:
        """Accumulate one batch.

        >>> ev = RegressionEvaluation()
        >>> ev.eval([[1.0, 10.0], [2.0, 20.0]], [[1.0, 12.0], [2.0, 0.0]], mask=[[1, 1], [1, 0]])
        >>> ev.count(0), ev.count(1), ev.mean_absolute_error(1)
        (2, 1, 2.0)
        """
        y = to_array(labels, "labels", _OWNER).astype(np.float64, copy=False)
        p = to_array(predictions, "predictions", _OWNER).astype(np.float64, copy=False)
        check_rows(y, p, _OWNER)
        y = y[:, None] if y.ndim == 1 else y
        p = p[:, None] if p.ndim == 1 else p
        if y.shape != p.shape:
            raise EvaluationError(f"{_OWNER}.eval: labels {y.shape} and predictions {p.shape} "
                                  f"must have the same shape [n, columns]")
        c = y.shape[1]
        if self._width is not None and c != self._width:
            raise EvaluationError(f"{_OWNER}.eval: inputs have {c} columns but this evaluation "
                                  f"has {self._width} (from its constructor or earlier "
                                  f"batches); use one RegressionEvaluation per output")
        m = output_mask(mask, y.shape, _OWNER)
        keep = np.ones(y.shape, bool) if m is None else m
        # one inf or NaN would turn every sum of its column into NaN for good
        check_no_nan(np.where(keep, y, 0.0), "labels", _OWNER, finite=True)
        check_no_nan(np.where(keep, p, 0.0), "predictions", _OWNER, finite=True)
        self._accumulate(c, _of_batch(y, p, keep))

    # --- metrics -------------------------------------------------------------------------------

    @property
    def num_columns(self) -> int | None:
        """Number of columns (``None`` until given or seen)."""
        return self._width

    def _stats(self) -> State:
        return self._state if self._state is not None else self._empty(0)

    def _all(self, name: str) -> np.ndarray:
        """One metric for every column ``[C]`` (NaN where undefined)."""
        m = self._stats()
        if name == "mse":
            return _div(m["sse"], m["n"])
        if name == "mae":
            return _div(m["sae"], m["n"])
        if name == "rmse":
            return np.sqrt(_div(m["sse"], m["n"]))
        if name == "rse":
            return _div(m["sse"], m["m2_y"])
        if name == "r2":
            return 1.0 - _div(m["sse"], m["m2_y"])
        if name == "pearson":
            return _div(m["c_yp"], np.sqrt(m["m2_y"] * m["m2_p"]))
        raise KeyError(name)

    def _one(self, name: str, col: int | str) -> float:
        return float(self._all(name)[self._column(col)])

    def _average(self, name: str) -> float:
        v = self._all(name)
        v = v[~np.isnan(v)]
        return float(v.mean()) if len(v) else float("nan")

    def count(self, col: int | str) -> int:
        """Number of (unmasked) values evaluated in column ``col``."""
        return int(self._stats()["n"][self._column(col)])

    def mean_squared_error(self, col: int | str) -> float:
        """Σ(y - p)² / n of column ``col``."""
        return self._one("mse", col)

    def mean_absolute_error(self, col: int | str) -> float:
        """Σ|y - p| / n of column ``col``."""
        return self._one("mae", col)

    def root_mean_squared_error(self, col: int | str) -> float:
        """√MSE of column ``col``."""
        return self._one("rmse", col)

    def relative_squared_error(self, col: int | str) -> float:
        """Σ(y - p)² / Σ(y - ȳ)²: squared error relative to predicting the label mean."""
        return self._one("rse", col)

    def r_squared(self, col: int | str) -> float:
        """Coefficient of determination 1 - RSE of column ``col``."""
        return self._one("r2", col)

    def pearson_correlation(self, col: int | str) -> float:
        """Pearson correlation of labels and predictions in column ``col``.

        >>> ev = RegressionEvaluation(); ev.eval([1.0, 2.0, 3.0], [2.0, 4.0, 6.1])
        >>> round(ev.pearson_correlation(0), 4)
        0.9999
        """
        return self._one("pearson", col)

    def average_mean_squared_error(self) -> float:
        """Mean over columns of the MSE."""
        return self._average("mse")

    def average_mean_absolute_error(self) -> float:
        """Mean over columns of the MAE."""
        return self._average("mae")

    def average_root_mean_squared_error(self) -> float:
        """Mean over columns of the RMSE."""
        return self._average("rmse")

    def average_relative_squared_error(self) -> float:
        """Mean over columns of the RSE (columns with constant labels left out)."""
        return self._average("rse")

    def average_r_squared(self) -> float:
        """Mean over columns of R² (columns with constant labels left out)."""
        return self._average("r2")

    def average_pearson_correlation(self) -> float:
        """Mean over columns of the Pearson correlation (where defined)."""
        return self._average("pearson")

    def metrics(self) -> dict[str, float]:
        """Column averages: ``mse``, ``mae``, ``rmse``, ``rse``, ``r2``, ``pearson``."""
        return {k: self._average(k) for k in ("mse", "mae", "rmse", "rse", "r2", "pearson")}

    def stats(self) -> str:
        """A table with one row per column and a row of averages.

        >>> ev = RegressionEvaluation(); ev.eval([1.0, 2.0], [1.0, 2.5])
        >>> print(ev.stats().splitlines()[1])
        Column      MSE      MAE     RMSE      RSE       PC      R^2
        """
        c = self._width
        if self._state is None or c is None:
            return f"{banner('Regression Metrics')}\n No examples evaluated yet\n"
        keys = ("mse", "mae", "rmse", "rse", "pearson", "r2")
        per = {k: self._all(k) for k in keys}
        rows = [[self._column_name(j, f"col_{j}")]
                + [fmt(per[k][j], 5) for k in keys] for j in range(c)]
        if c > 1:
            rows.append(["average"] + [fmt(self._average(k), 5) for k in keys])
        return "\n".join([banner("Regression Metrics"),
                          table(["Column", "MSE", "MAE", "RMSE", "RSE", "PC", "R^2"], rows),
                          "=" * 66]) + "\n"
