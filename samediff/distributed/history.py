"""What ``fit_distributed`` returns: a ``History`` (per-epoch records, as local ``fit``) plus
one ``RoundRecord`` per round — loss, samples/s, which partitions Dask had to run again, and
where the round's time went, measured.

>>> h = DistributedHistory(rounds=[RoundRecord(0, 0, 0.5, 64, 8, 0.1, {1: 1})])
>>> h.retries, h.retried_partitions, round(h.samples_per_second[0])
([1], [[1]], 640)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..training.history import History


@dataclass
class RoundRecord:
    """One round: ``epoch``, ``round`` (0-based within the epoch), mean training ``loss``
    (example-weighted over the partitions' steps), ``samples`` trained on (all partitions),
    ``steps`` (per partition, the longest), wall ``seconds`` on the client, ``retries``
    ``{partition: extra attempts}`` (a worker was lost, or a task failed and was retried), and
    ``timings``: seconds measured per phase —

    * ``encode``: the client writing the parameters and updater state as ``.npz`` bytes;
    * ``scatter``: sending them to every worker;
    * ``wait``: from submitting the round's tasks until its reduced result exists;
    * ``gather``: fetching that result; ``apply``: averaging it into the client's model;
    * ``worker_setup`` / ``worker_compute`` / ``worker_copy``: inside the tasks (the longest
      partition): decoding the state and cutting batches / the training steps / copying
      results out;
    * ``overhead``: ``wait`` minus the longest task's own time — scheduling, transfers between
      workers, the tree reduction."""

    epoch: int
    round: int
    loss: float
    samples: int
    steps: int
    seconds: float
    retries: dict[int, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else float("nan")


@dataclass
class DistributedHistory(History):
    """``History`` with the rounds of a distributed run (``rounds``). ``losses``, ``metrics``
    and ``seconds`` are per epoch as for local ``fit``; ``iteration_losses`` holds one loss per
    round (a round's steps ran on several workers at once)."""

    rounds: list[RoundRecord] = field(default_factory=list)

    @property
    def retries(self) -> list[int]:
        """Extra task attempts per round (0: nothing was retried)."""
        return [sum(r.retries.values()) for r in self.rounds]

    @property
    def retried_partitions(self) -> list[list[int]]:
        """The partitions run more than once, per round."""
        return [sorted(r.retries) for r in self.rounds]

    @property
    def samples_per_second(self) -> list[float]:
        return [r.samples_per_second for r in self.rounds]

    def timings(self) -> dict[str, float]:
        """Each phase's seconds summed over the rounds (``RoundRecord.timings``)."""
        out: dict[str, float] = {}
        for r in self.rounds:
            for k, v in r.timings.items():
                out[k] = out.get(k, 0.0) + v
        return out
