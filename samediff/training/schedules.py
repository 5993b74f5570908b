"""Learning-rate (and momentum) schedules: ND4J's ``ISchedule`` family.

A schedule maps the 0-based ``iteration`` (optimizer steps done so far) and ``epoch`` to a value;
``ScheduleType`` says which of the two it reads. Updaters accept a schedule anywhere they accept
a learning rate, and evaluate it in Python once per step (``Updater.hyper``), so a schedule is
never part of the graph.

Every schedule is a frozen dataclass (equality, hashing and ``repr`` for free) with
``value_at(iteration, epoch)``, ``to_json()`` and ``Schedule.from_json(d)``.

>>> from samediff.training.schedules import ExponentialSchedule, ScheduleType, Schedule
>>> s = ExponentialSchedule(ScheduleType.ITERATION, 0.1, 0.5)
>>> s.value_at(2, 0)
0.025
>>> Schedule.from_json(s.to_json()) == s
True
"""
from __future__ import annotations

import abc
import bisect
import math
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any, ClassVar, Mapping

from ..errors import TrainingError


class ScheduleType(str, Enum):
    """Which counter a schedule reads: optimizer steps (``ITERATION``) or epochs (``EPOCH``)."""

    ITERATION = "ITERATION"
    EPOCH = "EPOCH"


# -- validation helpers (shared with updaters.py) ---------------------------------------------
def check_number(owner: str, name: str, value: Any, lo: float | None = None,
                 hi: float | None = None, lo_open: bool = False, hi_open: bool = False) -> float:
    """``float(value)`` if it is a finite real number in the given range, else ``TrainingError``
    naming ``owner.name``, the value and the allowed range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TrainingError(f"{owner}: {name} must be a finite number, got {value!r}")
    ok = ((lo is None or (value > lo if lo_open else value >= lo))
          and (hi is None or (value < hi if hi_open else value <= hi)))
    if not ok:
        rng = (("(" if lo_open else "[") + ("-inf" if lo is None else f"{lo:g}") + ", "
               + ("inf" if hi is None else f"{hi:g}") + (")" if hi_open or hi is None else "]"))
        raise TrainingError(f"{owner}: {name} must be in {rng}, got {value!r}")
    return float(value)


def check_int(owner: str, name: str, value: Any, lo: int) -> int:
    """``value`` if it is an int >= ``lo`` (integral floats from JSON are accepted)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise TrainingError(f"{owner}: {name} must be an integer >= {lo}, got {value!r}")
    return value


def _schedule_type(owner: str, value: Any) -> ScheduleType:
    try:
        return ScheduleType(value.upper() if isinstance(value, str) else value)
    except ValueError:
        raise TrainingError(f"{owner}: schedule_type must be ScheduleType.ITERATION or "
                            f"ScheduleType.EPOCH (or their names), got {value!r}") from None


# -- base class ---------------------------------------------------------------------------------
_REGISTRY: dict[str, type["Schedule"]] = {}


@dataclass(frozen=True)
class Schedule(abc.ABC):
    """Base class of all schedules (ND4J ``ISchedule``).

    Subclasses are frozen dataclasses; ``_check`` validates and normalises fields and
    ``_value(i, iteration, epoch)`` computes the value for counter ``i`` (iteration or epoch,
    chosen by ``schedule_type``).
    """

    #: extra names ``from_json`` accepts for this class
    aliases: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in (cls.__name__, *cls.__dict__.get("aliases", ())):
            _REGISTRY[name] = cls

    def __post_init__(self) -> None:
        if hasattr(self, "schedule_type"):
            self._set("schedule_type", _schedule_type(type(self).__name__, self.schedule_type))
        self._check()

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)  # frozen dataclass: normalise in __post_init__

    def _check(self) -> None:
        """Validate/normalise fields; raise ``TrainingError`` naming the bad one."""

    @abc.abstractmethod
    def _value(self, i: int, iteration: int, epoch: int) -> float:
        """The value for counter ``i`` (each schedule's formula)."""

    def value_at(self, iteration: int, epoch: int = 0) -> float:
        """The value for the step with 0-based ``iteration`` in 0-based ``epoch``."""
        kind = getattr(self, "schedule_type", ScheduleType.ITERATION)
        i = epoch if kind is ScheduleType.EPOCH else iteration
        return float(self._value(i, iteration, epoch))

    valueAt = value_at  # ND4J spelling

    # -- JSON ---------------------------------------------------------------------------------
    def to_json(self) -> dict:
        """A JSON-ready dict: ``{"type": <class name>, <field>: <value>, ...}``."""
        return dataclass_to_json(self)

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "Schedule":
        """Rebuild a schedule from ``to_json()`` output; dispatches on ``"type"``."""
        return dataclass_from_json(d, _REGISTRY, "Schedule")


def dataclass_to_json(obj: Any) -> dict:
    """``{"type": <class name>, <field>: <encoded value>...}`` for a dataclass (schedules and
    updaters share this form; nested schedules are encoded recursively)."""
    out: dict[str, Any] = {"type": type(obj).__name__}
    for f in fields(obj):
        out[f.name] = encode(getattr(obj, f.name))
    return out


def dataclass_from_json(d: Any, registry: Mapping[str, type], what: str) -> Any:
    """Inverse of ``dataclass_to_json``: dispatch on ``"type"`` in ``registry``; an unknown type
    or field raises a ``TrainingError`` naming it."""
    if not isinstance(d, Mapping) or "type" not in d:
        raise TrainingError(f"{what}.from_json: expected a dict with a 'type' key, got {d!r}")
    cls = registry.get(d["type"])
    if cls is None:
        raise TrainingError(f"{what}.from_json: unknown {what.lower()} type {d['type']!r}; "
                            f"known: {sorted(registry)}")
    known = {f.name for f in fields(cls)}
    unknown = set(d) - known - {"type"}
    if unknown:
        raise TrainingError(f"{what}.from_json: {d['type']} has no fields {sorted(unknown)}")
    return cls(**{k: decode(v) for k, v in d.items() if k != "type"})


def encode(value: Any) -> Any:
    """JSON form of a hyper-parameter: schedules become dicts, enums their names."""
    if isinstance(value, Schedule):
        return value.to_json()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):  # MapSchedule's (position, value) pairs
        return {str(k): v for k, v in value}
    return value


def decode(value: Any) -> Any:
    """Inverse of ``encode`` for nested schedules (other values are taken as they are)."""
    if isinstance(value, Mapping) and "type" in value:
        return Schedule.from_json(value)
    return value


def as_value(value: Any, iteration: int, epoch: int) -> float:
    """A hyper-parameter that may be a schedule, evaluated for this step."""
    return value.value_at(iteration, epoch) if isinstance(value, Schedule) else value


# -- the ND4J schedules -------------------------------------------------------------------------
@dataclass(frozen=True)
class FixedSchedule(Schedule):
    """A constant: ``value(i) = value``."""

    value: float

    def _check(self) -> None:
        self._set("value", check_number("FixedSchedule", "value", self.value))

    def _value(self, i: int, iteration: int, epoch: int) -> float:
        return self.value


@dataclass(frozen=True)
class StepSchedule(Schedule):
    """Step decay: ``value(i) = initial_value * decay_rate ** floor(i / step)``.

    >>> StepSchedule("ITERATION", 1.0, 0.5, 10).value_at(25)
    0.25
    """

    schedule_type: ScheduleType
    initial_value: float
    decay_rate: float
    step: float

    def _check(self) -> None:
        self._set("initial_value", check_number("StepSchedule", "initial_value", self.initial_value))
        self._set("decay_rate", check_number("StepSchedule", "decay_rate", self.decay_rate, 0))
        self._set("step", check_number("StepSchedule", "step", self.step, 0, lo_open=True))

    def _value(self, i: int, iteration: int, epoch: int) -> float:
        return self.initial_value * self.decay_rate ** math.floor(i / self.step)


@dataclass(frozen=True)
class ExponentialSchedule(Schedule):
    """Exponential decay: ``value(i) = initial_value * gamma ** i``."""

    schedule_type: ScheduleType
    initial_value: float
    gamma: float

    def _check(self) -> None:
        self._set("initial_value",
                  check_number("ExponentialSchedule", "initial_value", self.initial_value))
        self._set("gamma", check_number("ExponentialSchedule", "gamma", self.gamma, 0))

    def _value(self, i: int, iteration: int, epoch: int) -> float:
        return self.initial_value * self.gamma ** i


@dataclass(frozen=True)
class InverseSchedule(Schedule):
    """Inverse decay: ``value(i) = initial_value / (1 + gamma * i) ** power``."""

    schedule_type: ScheduleType
    initial_value: float
    gamma: float
    power: float

    def _check(self) -> None:
        self._set("initial_value",
                  check_number("InverseSchedule", "initial_value", self.initial_value))
        self._set("gamma", check_number("InverseSchedule", "gamma", self.gamma, 0))
        self._set("power", check_number("InverseSchedule", "power", self.power))

    def _value(self, i: int, iteration: int, epoch: int) -> float:
        return self.initial_value / (1.0 + self.gamma * i) ** self.power


@dataclass(frozen=True)
class PolySchedule(Schedule):
    """Polynomial decay to 0 at ``max_iter``:
    ``value(i) = initial_value * (1 - i / max_iter) ** power`` for ``i < max_iter``, else 0.

    This is Caffe's ``poly`` policy and DL4J's legacy ``Poly`` learning-rate policy. (ND4J's
    current ``PolySchedule`` code computes ``(1 + i/max_iter) ** power``, which grows and
    contradicts its own documentation; we implement the documented decay.)
    """

    schedule_type: ScheduleType
    initial_value: float
    power: float
    max_iter: int

    aliases = ("PolynomialSchedule",)

    def _check(self) -> None:
        self._set("initial_value", check_number("PolySchedule", "initial_value", self.initial_value))
        self._set("power", check_number("PolySchedule", "power", self.power, 0))
        self._set("max_iter", check_int("PolySchedule", "max_iter", self.max_iter, 1))

    def _value(self, i: int, iteration: int, epoch: int) -> float:
        if i >= self.max_iter:
            return 0.0
        return self.initial_value * (1.0 - i / self.max_iter) ** self.power


PolynomialSchedule = PolySchedule


@dataclass(frozen=True)
class SigmoidSchedule(Schedule):
    """Sigmoid: ``value(i) = initial_value / (1 + exp(-gamma * (i - step_size)))``."""

    schedule_type: ScheduleType
    initial_value: float
    gamma: float
    step_size: int

    def _check(self) -> None:
        self._set("initial_value",
                  check_number("SigmoidSchedule", "initial_value", self.initial_value))
        self._set("gamma", check_number("SigmoidSchedule", "gamma", self.gamma))
        self._set("step_size", check_int("SigmoidSchedule", "step_size", self.step_size, 0))

    def _value(self, i: int, iteration: int, epoch: int) -> float:
        z = -self.gamma * (i - self.step_size)
        return self.initial_value / (1.0 + math.exp(z)) if z < 700 else 0.0


def _position(key: Any) -> Any:
    """JSON object keys are strings: ``"10"`` -> 10 (anything else is left for check_int)."""
    return int(key) if isinstance(key, str) and key.isdigit() else key


@dataclass(frozen=True)
class MapSchedule(Schedule):
    """Piecewise constant from a ``{position: value}`` map, which must hold position 0:
    ``value(i) = values[max(k for k in values if k <= i)]``.

    >>> s = MapSchedule("ITERATION", {0: 1.0, 10: 0.5, 20: 0.2})
    >>> [s.value_at(i) for i in (0, 9, 10, 25)]
    [1.0, 1.0, 0.5, 0.2]
    """

    schedule_type: ScheduleType
    values: Any  # given as a dict; stored as sorted ((position, value), ...) so it is hashable

    def _check(self) -> None:
        if not isinstance(self.values, Mapping):
            self._set("values", dict(self.values))  # the stored pairs, or any (k, v) iterable
        pairs = sorted((check_int("MapSchedule", "position", _position(k), 0),
                        check_number("MapSchedule", f"values[{k!r}]", v))
                       for k, v in self.values.items())
        if not pairs or pairs[0][0] != 0:
            raise TrainingError(f"MapSchedule: values must contain position 0 (the initial "
                                f"value), got positions {[k for k, _ in pairs]}")
        if len({k for k, _ in pairs}) != len(pairs):  # e.g. {0: .., "0": ..}
            raise TrainingError("MapSchedule: a position appears twice in values")
        self._set("values", tuple(pairs))

    def _value(self, i: int, iteration: int, epoch: int) -> float:
        keys = [k for k, _ in self.values]
        return self.values[bisect.bisect_right(keys, i) - 1][1]


@dataclass(frozen=True)
class CycleSchedule(Schedule):
    """ND4J's one-cycle policy, repeating every ``cycle_length`` steps. With
    ``pos = i % cycle_length`` and ``step_size = (cycle_length - annealing_length) // 2``:

    * ``pos < step_size``: rise linearly from ``initial_value`` towards ``max_value``;
    * ``pos < 2 * step_size``: fall linearly back;
    * else (annealing): ``initial_value * annealing_decay ** (annealing_length - (cycle_length - pos))``.
    """

    schedule_type: ScheduleType
    initial_value: float
    max_value: float
    cycle_length: int
    annealing_length: int
    annealing_decay: float

    def _check(self) -> None:
        o = "CycleSchedule"
        self._set("initial_value", check_number(o, "initial_value", self.initial_value, 0))
        self._set("max_value", check_number(o, "max_value", self.max_value, self.initial_value))
        self._set("cycle_length", check_int(o, "cycle_length", self.cycle_length, 2))
        self._set("annealing_length", check_int(o, "annealing_length", self.annealing_length, 0))
        self._set("annealing_decay", check_number(o, "annealing_decay", self.annealing_decay, 0))
        if (self.cycle_length - self.annealing_length) // 2 < 1:
            raise TrainingError(f"{o}: cycle_length - annealing_length must be >= 2, got "
                                f"{self.cycle_length} - {self.annealing_length}")

    def _value(self, i: int, iteration: int, epoch: int) -> float:
        step = (self.cycle_length - self.annealing_length) // 2
        inc = (self.max_value - self.initial_value) / step
        pos = i % self.cycle_length
        if pos < step:
            return self.initial_value + inc * pos
        if pos < 2 * step:
            return self.max_value - inc * (pos - step)
        return self.initial_value * self.annealing_decay ** (
            self.annealing_length - (self.cycle_length - pos))


@dataclass(frozen=True)
class CosineSchedule(Schedule):
    """Linear warm-up then cosine decay (ND4J ``CosineWarmupSchedule``):

    * ``i < warmup_steps``: ``max_value * i / warmup_steps``;
    * ``i >= total_steps``: ``min_value``;
    * otherwise ``min_value + 0.5 * (max_value - min_value) * (1 + cos(pi * p))`` with
      ``p = (i - warmup_steps) / (total_steps - warmup_steps)``.

    >>> s = CosineSchedule(1.0, total_steps=10, warmup_steps=2)
    >>> [round(s.value_at(i), 3) for i in (0, 1, 2, 6, 10)]
    [0.0, 0.5, 1.0, 0.5, 0.0]
    """

    max_value: float
    total_steps: int
    warmup_steps: int = 0
    min_value: float = 0.0
    schedule_type: ScheduleType = ScheduleType.ITERATION

    aliases = ("CosineWarmupSchedule",)

    def _check(self) -> None:
        o = "CosineSchedule"
        self._set("max_value", check_number(o, "max_value", self.max_value))
        self._set("min_value", check_number(o, "min_value", self.min_value, hi=self.max_value))
        self._set("warmup_steps", check_int(o, "warmup_steps", self.warmup_steps, 0))
        self._set("total_steps", check_int(o, "total_steps", self.total_steps,
                                           self.warmup_steps + 1))

    def _value(self, i: int, iteration: int, epoch: int) -> float:
        if i < self.warmup_steps:
            return self.max_value * i / self.warmup_steps
        if i >= self.total_steps:
            return self.min_value
        p = (i - self.warmup_steps) / (self.total_steps - self.warmup_steps)
        return self.min_value + 0.5 * (self.max_value - self.min_value) * (1.0 + math.cos(math.pi * p))


CosineWarmupSchedule = CosineSchedule


@dataclass(frozen=True)
class RampSchedule(Schedule):
    """Linear ramp-up over the first ``num_iter`` iterations of any base schedule:
    ``value(it) = base(it) * min(1, (it + 1) / num_iter)`` (always counts iterations)."""

    base: Schedule
    num_iter: int

    def _check(self) -> None:
        if not isinstance(self.base, Schedule):
            raise TrainingError(f"RampSchedule: base must be a Schedule, got {self.base!r}")
        self._set("num_iter", check_int("RampSchedule", "num_iter", self.num_iter, 1))

    def _value(self, i: int, iteration: int, epoch: int) -> float:
        base = self.base.value_at(iteration, epoch)
        return base if iteration >= self.num_iter - 1 else base * (iteration + 1) / self.num_iter


__all__ = ["ScheduleType", "Schedule", "FixedSchedule", "StepSchedule", "ExponentialSchedule",
           "InverseSchedule", "PolySchedule", "PolynomialSchedule", "SigmoidSchedule",
           "MapSchedule", "CycleSchedule", "CosineSchedule", "CosineWarmupSchedule",
           "RampSchedule"]
