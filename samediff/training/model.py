"""What training needs from a model: the ``TrainableModel`` contract, and ``Model``, the smallest
object that meets it.

Training (``Trainer``, ``TrainStep``, the rollback of a failed fit, ``evaluate``) reads and
writes a model only through these members, so anything that has them trains: a ``SameDiff``,
or a ``Model`` built from the bytes of one in another process (``serialize.from_bytes`` gives
the graph, losses, config and updater state a ``Model`` holds)::

    model = Model(*serialize.from_bytes(data))   # doctest: +SKIP
    history = fit(model, (x, y), epochs=3)       # samediff.training.fit

The model owns its state and its caches: training asks it for values (``read_value``), hands
trained values back (``write_value``), asks it to keep the compiled step
(``cached_train_step``) and to take a snapshot of itself that a failed fit restores
(``snapshot``); it never touches the model's attributes.

>>> import numpy as np
>>> from samediff.ir import Graph
>>> model = Model(Graph(), [])
>>> model.trainable_names(), model.updater_state.iteration
([], 0)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable, Mapping, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ..errors import GraphError
from ..execution import run_graph
from ..ir import Graph, VariableType
from .config import TrainingConfig
from .rollback import ModelSnapshot
from .state import UpdaterState

_T = TypeVar("_T")


class Snapshot(Protocol):
    """A model's state as ``fit`` found it (``TrainableModel.snapshot``); see ``rollback.py``."""

    def restore(self, keep_training_progress: bool) -> None:
        """Put the structure back; the updater state too unless ``keep_training_progress``."""


class TrainableModel(Protocol):
    """The contract between training and a model (``SameDiff`` and ``Model`` implement it).

    Members:

    * ``graph``: the graph IR (``samediff.ir.Graph``) — read, never changed by training; the
      values of its VARIABLEs and CONSTANTs are the model's parameters and constants;
    * ``loss_variables`` / ``set_loss_variables``: the names of the losses (summed and
      minimized); ``fit`` sets them when the config names some (``loss_variables=``);
    * ``training_config``: the ``TrainingConfig`` (updater, regularization, data mapping), or
      None when none was set (``fit`` then refuses);
    * ``updater_state``: the ``UpdaterState`` (per-parameter arrays and counters) that ``fit``
      creates, advances and resumes from;
    * ``trainable_names()``: the trainable parameters (VARIABLEs), in graph order; ``fit``
      trains those the losses depend on;
    * ``read_value(name)`` / ``write_value(name, value)``: a VARIABLE's or CONSTANT's live
      array (a step reads it and may update it in place), and trained values written back
      into that same array;
    * ``output(feeds, *names)``: computed values (validation, ``evaluate``);
    * ``cached_train_step(key, build)``: the model keeps the compiled step of its last fit;
    * ``snapshot()``: its state, which a failed ``fit`` restores (``rollback.py``).
    """

    @property
    def graph(self) -> Graph:
        """The graph IR; its VARIABLE/CONSTANT values are the model's."""

    @property
    def loss_variables(self) -> list[str]:
        """The names of the losses (their sum is minimized)."""

    def set_loss_variables(self, *names: str) -> None:
        """Replace the losses."""

    @property
    def training_config(self) -> TrainingConfig | None:
        """The training configuration, or None."""

    @property
    def updater_state(self) -> UpdaterState:
        """The updater's arrays and step counters (advanced in place by ``fit``)."""

    def trainable_names(self) -> list[str]:
        """The trainable parameters (VARIABLEs), in graph order."""

    def read_value(self, name: str) -> np.ndarray:
        """The live array of VARIABLE/CONSTANT ``name`` (a step may update it in place)."""

    def write_value(self, name: str, value: np.ndarray) -> None:
        """Write trained ``value`` into ``name``'s own array (nothing to do when it is it)."""

    def output(self, placeholders: Mapping[str, np.ndarray],
               *outputs: str) -> Mapping[str, npt.ArrayLike]:
        """Compute ``outputs`` from placeholder values: ``{name: array}``."""

    def cached_train_step(self, key: Hashable, build: Callable[[], _T]) -> _T:
        """The step the model keeps for ``key`` while its graph is unchanged; else ``build()``,
        kept from now on (one step: the last fit's)."""

    def snapshot(self) -> Snapshot:
        """The model's state now, for ``fit`` to restore if it fails."""


def read_value(graph: Graph, name: str) -> np.ndarray:
    """The live array of VARIABLE/CONSTANT ``name`` of ``graph`` (not a copy; training updates
    it): ``TrainableModel.read_value`` for a model that is a graph with values."""
    info = graph.var(name)
    if info.value is None:
        raise GraphError(f"read_value: {name!r} is a {info.vtype.value}; only VARIABLEs and "
                         f"CONSTANTs hold values")
    return info.value


def write_value(graph: Graph, name: str, value: np.ndarray) -> None:
    """Write trained ``value`` into ``name``'s own array, in place (a CONSTANT's, which is
    frozen, is replaced by a copy: a checkpoint restores constants too)."""
    target, info = read_value(graph, name), graph.var(name)
    if value is target:  # a donated buffer already holds the update
        return
    if info.vtype is VariableType.CONSTANT:
        info.value = np.array(value, dtype=target.dtype, copy=True)
    else:
        np.copyto(target, value)


@dataclass(eq=False)
class Model:
    """The smallest ``TrainableModel``: a graph with its losses, training config and updater
    state — exactly what a saved file holds, so ``Model(*serialize.from_bytes(data))`` trains
    like the ``SameDiff`` the bytes came from (same steps, same numbers)."""

    graph: Graph
    losses: list[str]
    training_config: TrainingConfig | None = None
    updater_state: UpdaterState = field(default_factory=UpdaterState)

    def __post_init__(self) -> None:
        self.losses = list(self.losses)
        # (key, graph version, step) of the last fit, as SameDiff keeps it
        self._step: tuple[Hashable, int, object] | None = None

    @property
    def loss_variables(self) -> list[str]:
        return list(self.losses)

    def set_loss_variables(self, *names: str) -> None:
        for name in names:
            self.graph.var(name)  # an unknown name is an error that names it
        self.losses = list(dict.fromkeys(names))

    def trainable_names(self) -> list[str]:
        return [n for n, v in self.graph.vars.items() if v.vtype is VariableType.VARIABLE]

    def read_value(self, name: str) -> np.ndarray:
        return read_value(self.graph, name)

    def write_value(self, name: str, value: np.ndarray) -> None:
        write_value(self.graph, name, value)

    def output(self, placeholders: Mapping[str, np.ndarray], *outputs: str) -> dict[str, np.ndarray]:
        _, results = run_graph(self.graph, placeholders, list(outputs))
        return dict(zip(outputs, results))

    def cached_train_step(self, key: Hashable, build: Callable[[], _T]) -> _T:
        cached = self._step
        if cached is not None and cached[0] == key and cached[1] == self.graph.version:
            return cached[2]  # type: ignore[return-value]
        step = build()
        self._step = (key, self.graph.version, step)
        return step

    def snapshot(self) -> Snapshot:
        # every field (losses, config, the step cache), the graph's structure, updater state
        return ModelSnapshot(self, self.graph, self.updater_state, progress=("updater_state",))
