"""The updater's state: per-parameter arrays (Adam's moments...) and the step counters.

Saved with the model (``serialize.py``); ``fit`` resumes from it.

>>> state = UpdaterState()
>>> state.iteration, state.epoch, state.arrays
(0, 0, {})
"""
from __future__ import annotations

from typing import Mapping

import numpy as np


class UpdaterState:
    """Per-parameter updater arrays plus the step/epoch counters (saved with the model)."""

    def __init__(self, iteration: int = 0, epoch: int = 0, batch: int = 0) -> None:
        # steps done in all, epochs completed, batches done in the current epoch
        self.iteration, self.epoch, self.batch = iteration, epoch, batch
        self.arrays: dict[str, dict[str, np.ndarray]] = {}

    def ensure(self, params: Mapping[str, np.ndarray], slots: tuple[str, ...],
               init: dict[str, float] | None = None) -> None:
        """Create missing state arrays for ``{parameter name: its value}`` (same shape and
        dtype), filled with the updater's initial values."""
        for p, value in params.items():
            have = self.arrays.setdefault(p, {})
            for s in slots:
                arr = have.get(s)
                if arr is None or arr.shape != value.shape or arr.dtype != value.dtype:
                    have[s] = np.full_like(value, (init or {}).get(s, 0.0))
            for s in set(have) - set(slots):
                del have[s]
