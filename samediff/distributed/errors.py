"""``DistributedTrainingError``: a distributed run failed, and where."""
from __future__ import annotations

from ..errors import TrainingError


class DistributedTrainingError(TrainingError):
    """A ``fit_distributed`` round failed: a task raised (its exception is chained as
    ``__cause__``, e.g. the worker's ``CorruptFileError``), workers kept dying under it, or it
    did not finish within ``round_timeout``. ``round`` (0-based, counted in this run) and
    ``partitions`` say where."""

    def __init__(self, message: str, round: int | None = None,  # noqa: A002 - the word
                 partitions: list[int] | None = None) -> None:
        super().__init__(message)
        self.round, self.partitions = round, list(partitions or [])

    def __reduce__(self) -> tuple:
        return (type(self), (str(self), self.round, self.partitions))
