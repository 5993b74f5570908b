"""A failed ``fit`` leaves the graph as it was: a snapshot of its structure, restored on failure.

``fit`` builds its own step graph and leaves the user's graph alone, but it may replace the loss
variables (``TrainingConfig.loss_variables``), fills caches (plans, the train step), creates
updater state, and listeners may change anything. Anything can fail
half-way: empty data, a bad batch, a bad config, a listener raising, a non-finite step, Ctrl-C.
Rather than undoing each of these where it happens, ``fit`` takes a ``GraphSnapshot`` when it
starts and calls ``restore`` on any exception. The rule:

* **structure comes back exactly**: nodes (and their inputs, outputs, names), variables (names,
  types, shapes, producers), node names, name counters (the next op gets the name it would have
  got), name scopes, loss variables, the training config, and the caches that describe the graph
  (gradients, plans, the cached train step) — every attribute of the ``SameDiff``;
* **numbers follow completed steps**: values are never touched. Training writes parameters only
  in steps that completed (a refused non-finite step writes nothing). Updater state — arrays and
  the iteration/epoch/batch counters — comes back as well when no step was applied; after k
  applied steps it is kept, matching the parameters, as if training had been interrupted after
  step k (a fit started later resumes from there, as from a checkpoint).

>>> from samediff import SameDiff
>>> sd = SameDiff.create()
>>> x = sd.placeholder("x", "float", -1, 2)
>>> snapshot = GraphSnapshot(sd)
>>> _ = x * 2.0
>>> len(sd.ops()), snapshot.restore(keep_training_progress=False), len(sd.ops())
(1, None, 0)
"""
from __future__ import annotations

import copy
from typing import Any


class GraphSnapshot:
    """The structural state of a ``SameDiff`` (see the module docstring)."""

    def __init__(self, sd: Any) -> None:
        self.sd = sd
        # every attribute's object, and a shallow copy of each container: restoring refills
        # the original containers, so references to them stay valid
        self.attrs = dict(vars(sd))
        self.contents = {k: copy.copy(v) for k, v in self.attrs.items()
                         if isinstance(v, (dict, list, set))}
        # the graph IR: a copy holds its structure (nodes are immutable; values are shared,
        # so applied steps stay applied), restored into the same Graph object
        self.graph = sd.graph
        self.structure = sd.graph.copy()
        self.handle_names = [(h, h._name) for h in sd._handles.values()]
        state = sd.updater_state
        self.counters = (state.iteration, state.epoch, state.batch)
        self.arrays = [(p, slots, dict(slots)) for p, slots in state.arrays.items()]

    def restore(self, keep_training_progress: bool) -> None:
        """Put the structure back; the updater state too unless ``keep_training_progress``
        (some steps were applied: their parameters stay, so their updater state stays)."""
        sd = self.sd
        for name in [k for k in vars(sd) if k not in self.attrs]:  # attributes added since
            delattr(sd, name)
        for name, obj in self.attrs.items():
            if name == "_updater_state" and keep_training_progress:
                continue
            if name in self.contents:
                _refill(obj, self.contents[name])
            setattr(sd, name, obj)
        graph, saved = self.graph, self.structure
        graph.restore_from(saved)
        sd._set_graph(graph)
        for handle, name in self.handle_names:
            handle._name = name
        if not keep_training_progress:
            self._restore_updater_state()

    def _restore_updater_state(self) -> None:
        state = self.sd.updater_state  # the original object again (restored above)
        state.iteration, state.epoch, state.batch = self.counters
        state.arrays.clear()
        for param, slots, saved in self.arrays:
            _refill(slots, saved)
            state.arrays[param] = slots


def _refill(container: Any, saved: Any) -> None:
    """Give ``container`` the contents of its copy ``saved`` (same object afterwards)."""
    if isinstance(container, list):
        container[:] = saved
    else:
        container.clear()
        container.update(saved)
