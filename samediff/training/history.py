"""``History``: what ``fit`` returns — per-epoch losses, metrics and timings."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from ..array import NDArray


@dataclass
class EpochRecord:
    """One epoch: mean training loss, validation loss (if validation data was given), metrics
    (``"accuracy"``, ``"val_accuracy"``...), wall time and iterations (applied steps).

    With ``fit(..., on_nonfinite="skip")``, ``metrics["skipped"]`` counts the batches left out
    because their loss or gradients were not finite (``History.metric("skipped")`` per epoch);
    ``loss`` averages the other batches (NaN if every batch was skipped)."""

    epoch: int
    loss: float
    val_loss: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    iterations: int = 0


class LossCurve(Sequence):
    """ND4J's ``LossCurve``: one mean loss per epoch, also a sequence of floats.

    >>> curve = LossCurve([0.9, 0.5])
    >>> curve[-1], curve.lastMeanLoss(), curve.meanLoss(0), len(curve)
    (0.5, 0.5, 0.9, 2)
    """

    def __init__(self, values: Sequence[float]) -> None:
        self._values = tuple(float(v) for v in values)

    @overload
    def __getitem__(self, index: int) -> float: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[float, ...]: ...

    def __getitem__(self, index: Any) -> Any:
        return self._values[index]

    def __len__(self) -> int:
        return len(self._values)

    def meanLoss(self, epoch: int) -> float:  # noqa: N802 - ND4J's names
        """The mean loss of ``epoch`` (0-based; negative counts from the end)."""
        return self._values[epoch]

    def lastMeanLoss(self) -> float:  # noqa: N802
        if not self._values:
            raise IndexError("lastMeanLoss: the curve is empty (no epoch was trained)")
        return self._values[-1]

    def getLossValues(self) -> Any:  # noqa: N802
        """The losses as a float64 NDArray of shape ``[epochs]``."""
        return NDArray(np.array(self._values, dtype=np.float64))

    def __repr__(self) -> str:
        return f"LossCurve({list(self._values)})"


@dataclass
class History:
    """Per-epoch training record.

    >>> h = History([EpochRecord(0, 0.9, seconds=1.0), EpochRecord(1, 0.5, seconds=1.0)])
    >>> h.losses, h.final_loss
    ([0.9, 0.5], 0.5)
    """

    epochs: list[EpochRecord] = field(default_factory=list)
    iteration_losses: list[float] = field(default_factory=list)

    @property
    def losses(self) -> list[float]:
        return [e.loss for e in self.epochs]

    @property
    def val_losses(self) -> list[float | None]:
        return [e.val_loss for e in self.epochs]

    @property
    def final_loss(self) -> float | None:
        return self.epochs[-1].loss if self.epochs else None

    def loss_curve(self) -> LossCurve:
        """ND4J's ``history.lossCurve()``: the mean training loss per epoch."""
        return LossCurve(self.losses)

    def validation_loss_curve(self) -> LossCurve:
        """ND4J's ``validationLossCurve()``: the validation loss of the epochs that had one."""
        return LossCurve([v for v in self.val_losses if v is not None])

    lossCurve = loss_curve
    validationLossCurve = validation_loss_curve

    def metric(self, name: str) -> list[float | None]:
        """One metric per epoch (``None`` where it was not measured)."""
        return [e.metrics.get(name) for e in self.epochs]

    @property
    def seconds(self) -> list[float]:
        return [e.seconds for e in self.epochs]

    def plot(self, ax: Any = None) -> Any:
        """Plot losses (and validation losses) per epoch with matplotlib (optional)."""
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError("History.plot needs matplotlib: pip install matplotlib") from None
        if ax is None:
            _, ax = plt.subplots()
        xs = [e.epoch for e in self.epochs]
        ax.plot(xs, self.losses, label="loss")
        if any(v is not None for v in self.val_losses):
            ax.plot(xs, [float("nan") if v is None else v for v in self.val_losses],
                    label="validation loss")
        ax.set_xlabel("epoch")
        ax.legend()
        return ax

    def __repr__(self) -> str:
        if not self.epochs:
            return "History(no epochs)"
        last = self.epochs[-1]
        extra = "".join(f", {k}={v:.4g}" for k, v in last.metrics.items())
        val = f", val_loss={last.val_loss:.4g}" if last.val_loss is not None else ""
        return f"History({len(self.epochs)} epochs, loss={last.loss:.4g}{val}{extra})"
