"""One training step split in two at the finiteness check, for synchronous gradient averaging.

``TrainStep`` (``samediff/training/step.py``) already runs a step as two compiled plans: the
*gradient plan* (forward, backward, loss) and — only when the loss and every gradient are
finite — the *update plan* (regularization, the updater's rule, written in place). Gradient
averaging needs exactly that cut: each partition runs the gradient plan on its batch
(``gradient_pass``), the gradients are averaged, and the update plan runs once on the average
(``apply_update``). Both halves are the plans ``fit`` runs (same cache, same kernels), so with
one partition a gradient-averaged step equals a local ``fit`` step bit for bit; nothing here
computes a gradient or an update itself.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..training.state import UpdaterState
from ..training.step import TrainStep


def gradient_pass(step: TrainStep, feeds: Mapping[str, np.ndarray],
                  state: UpdaterState) -> dict[str, Any]:
    """Run the gradient plan on one batch: ``{"loss", "finite", "handoff": {name: array}
    (what the update plan reads: the gradients), "updates": {variable: array} (running
    statistics), "types": {placeholder: (shape, dtype)}}``. Nothing is changed."""
    values, plan, _ = step.prepare(dict(feeds), state)
    with np.errstate(all="ignore"):
        results, finite = plan.run_gradients(values)
    return {"loss": float(results[step.loss_name]), "finite": bool(finite),
            # copies: a compiled plan may reuse its output buffers on the next run
            "handoff": {k: np.array(results[k], copy=True) for k in plan.handoff},
            "updates": {n: np.array(results[v], copy=True)
                        for n, v in step.state_updates.items()},
            "types": {n: (values[n].shape, values[n].dtype.str)
                      for n in step.batch_placeholders}}


def apply_update(step: TrainStep, state: UpdaterState, handoff: Mapping[str, np.ndarray],
                 updates: Mapping[str, np.ndarray],
                 types: Mapping[str, tuple[tuple, str]]) -> None:
    """Run the update plan on ``handoff`` (averaged gradients) and commit it as
    ``TrainStep.run`` commits a finite step: parameters and ``state`` updated in place, the
    (averaged) running statistics ``updates`` written, ``state.iteration`` advanced. ``types``
    (a batch's placeholder shapes) select the plan; the batch itself is not needed (only its
    type is)."""
    feeds = {n: np.empty(shape, np.dtype(dt)) for n, (shape, dt) in types.items()}
    values, plan, _ = step.prepare(feeds, state)
    # the running statistics go where the gradient plan would have put them
    results = {**handoff, **{step.state_updates[n]: v for n, v in updates.items()}}
    with np.errstate(all="ignore"):
        results = plan.run_update(values, results)
    step.commit(results, values, state)
