"""A failed ``fit`` leaves the model as it was: a snapshot of its structure, restored on failure.

``fit`` builds its own step graph and leaves the user's graph alone, but it may replace the loss
variables (``TrainingConfig.loss_variables``), fills caches (plans, the train step), creates
updater state, and listeners may change anything. Anything can fail
half-way: empty data, a bad batch, a bad config, a listener raising, a non-finite step, Ctrl-C.
Rather than undoing each of these where it happens, ``fit`` asks the model for a snapshot of
itself (``TrainableModel.snapshot``) when it starts and calls ``restore`` on any exception. A
model builds it with ``ModelSnapshot`` from its own attributes, graph and updater state. The rule:

* **structure comes back exactly**: nodes (and their inputs, outputs, names), variables (names,
  types, shapes, producers), node names, name counters (the next op gets the name it would have
  got), name scopes, loss variables, the training config, and the caches that describe the graph
  (gradients, plans, the cached train step) — every attribute of the model;
* **numbers follow completed steps**: values are never touched. Training writes parameters only
  in steps that completed (a refused non-finite step writes nothing). Updater state — arrays and
  the iteration/epoch/batch counters — comes back as well when no step was applied; after k
  applied steps it is kept, matching the parameters, as if training had been interrupted after
  step k (a fit started later resumes from there, as from a checkpoint).

>>> from samediff import SameDiff
>>> sd = SameDiff.create()
>>> x = sd.placeholder("x", "float", -1, 2)
>>> snapshot = sd.snapshot()
>>> _ = x * 2.0
>>> len(sd.ops()), snapshot.restore(keep_training_progress=False), len(sd.ops())
(1, None, 0)
"""
from __future__ import annotations

import copy
from typing import Callable

from ..ir import Graph
from .state import UpdaterState


class GraphSnapshot:
    """A graph's structure and an updater state's contents (plain values: any model's)."""

    def __init__(self, graph: Graph, state: UpdaterState) -> None:
        # a copy holds the structure (nodes are immutable; values are shared, so applied
        # steps stay applied), restored into the same Graph object
        self.graph, self.structure = graph, graph.copy()
        self.state = state
        self.counters = (state.iteration, state.epoch, state.batch)
        self.arrays = [(p, slots, dict(slots)) for p, slots in state.arrays.items()]

    def restore(self, keep_training_progress: bool) -> None:
        """Put the structure back; the updater state too unless ``keep_training_progress``
        (some steps were applied: their parameters stay, so their updater state stays)."""
        self.graph.restore_from(self.structure)
        if keep_training_progress:
            return
        state = self.state
        state.iteration, state.epoch, state.batch = self.counters
        state.arrays.clear()
        for param, slots, saved in self.arrays:
            _refill(slots, saved)
            state.arrays[param] = slots


class ModelSnapshot:
    """Everything about a model (see the module docstring), taken by the model itself: every
    attribute of ``owner`` (containers are refilled, so references to them stay valid), the
    structure of ``graph`` and the contents of ``state``. Attributes named in ``progress`` (the
    one holding the updater state) are left as they are when training progress is kept;
    ``then`` runs last (what only the owner knows how to put back)."""

    def __init__(self, owner: object, graph: Graph, state: UpdaterState,
                 progress: tuple[str, ...] = (), then: Callable[[], None] | None = None) -> None:
        self.owner, self.progress, self.then = owner, progress, then
        self.attrs = dict(vars(owner))
        self.contents = {k: copy.copy(v) for k, v in self.attrs.items()
                         if isinstance(v, (dict, list, set))}
        self.graph = GraphSnapshot(graph, state)

    def restore(self, keep_training_progress: bool) -> None:
        """Put the structure back; the updater state too unless ``keep_training_progress``."""
        owner = self.owner
        for name in [k for k in vars(owner) if k not in self.attrs]:  # attributes added since
            delattr(owner, name)
        for name, obj in self.attrs.items():
            if name in self.progress and keep_training_progress:
                continue
            if name in self.contents:
                _refill(obj, self.contents[name])
            setattr(owner, name, obj)
        self.graph.restore(keep_training_progress)
        if self.then is not None:
            self.then()


def _refill(container: dict | list | set, saved: dict | list | set) -> None:
    """Give ``container`` the contents of its copy ``saved`` (same object afterwards)."""
    if isinstance(container, list):
        container[:] = saved  # type: ignore[index]
    else:
        container.clear()
        container.update(saved)  # type: ignore[arg-type]
