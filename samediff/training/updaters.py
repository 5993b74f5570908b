"""Gradient updaters (optimizers) with ND4J's names, defaults and update formulas.

An updater is a frozen record of hyper-parameters. The trainer uses it in three steps:

* ``state_names()``: the per-parameter state slots, each an array shaped and typed like the
  parameter, filled with ``state_init()[slot]`` (0 unless said otherwise: ND4J starts AdaGrad's
  and RmsProp's accumulators at ``epsilon``);
* ``hyper(iteration, epoch)``: the step-dependent scalars, computed in Python once per step
  (the scheduled learning rate ``"lr"``, always present, and e.g. Adam's bias-corrected step
  size ``"alpha_t"``). The keys are the same at every step;
* ``update(param, grad, state, hyper) -> (new_param, new_state)``: written only with operators
  and op methods shared by ``NDArray`` and ``SDVariable``, so the same code runs eagerly on
  arrays and records graph ops on variables.

In the formulas, ``t = iteration + 1`` and every operation is elementwise. A learning rate (and
Nesterovs/Momentum's momentum) may be a float or a ``Schedule``.

>>> import nd4py as nd
>>> from samediff.training.updaters import Adam, Updater
>>> adam = Adam(0.1)
>>> p, g = nd.create([1.0, -2.0]), nd.create([0.5, -0.5])
>>> state = {k: nd.zeros_like(p) for k in adam.state_names()}
>>> p, state = adam.update(p, g, state, adam.hyper(0, 0))
>>> [round(x, 4) for x in p.numpy().tolist()]  # float32 in, float32 out
[0.9, -1.9]
>>> Updater.from_json(adam.to_json()) == adam
True
"""
from __future__ import annotations

import abc
import math
from dataclasses import dataclass, fields
from typing import Any, Mapping

import numpy as np

from ..errors import TrainingError
from .schedules import (Schedule, as_value, check_number, dataclass_from_json,
                        dataclass_to_json)

_REGISTRY: dict[str, type["Updater"]] = {}


def _check_rate(owner: str, name: str, value: Any) -> Any:
    """A learning rate or momentum: a number >= 0 or a Schedule."""
    if isinstance(value, Schedule):
        return value
    return check_number(owner, name, value, 0)


def _check_beta(owner: str, name: str, value: Any) -> float:
    return check_number(owner, name, value, 0, 1, hi_open=True)


def _scalar(h: Any, param: Any) -> Any:
    """A hyper value ready to combine with ``param`` without changing its dtype.

    Python floats are weak (a float32 param stays float32); numpy scalars and 0-d arrays
    become Python floats; a scalar NDArray/SDVariable of another dtype (say a float64
    placeholder next to a float32 parameter) is cast to the parameter's dtype. Weak scalar
    variables (the trainer's hyper placeholders) are used as they are.
    """
    if isinstance(h, (int, float, np.generic, np.ndarray)):
        return float(h)
    ttype = getattr(h, "ttype", None)  # a graph variable: a weak placeholder never promotes
    if ttype is not None and ttype.weak:
        return h
    dtype = getattr(param, "dtype", None)
    if dtype is not None and getattr(h, "dtype", dtype) != dtype:
        return h.cast_to(dtype)
    return h


@dataclass(frozen=True)
class Updater(abc.ABC):
    """Base class of all updaters (ND4J ``IUpdater``); see the module docstring.

    Subclasses are frozen dataclasses that set ``_state`` (slot names), ``_check`` (validate
    fields), ``_hyper`` (extra step scalars) and ``_step`` (the formula). In ``_step``, combine
    a hyper scalar only with arrays (``lr * (p * wd)``, not ``(lr * wd) * p``): step-dependent
    scalar products belong in ``_hyper``, and a scalar-by-scalar graph op is wasted work.
    """

    _state = ()  # plain class attribute, not a dataclass field

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):
            _REGISTRY[cls.__name__] = cls

    def __post_init__(self) -> None:
        name = type(self).__name__
        if any(f.name == "learning_rate" for f in fields(self)):
            object.__setattr__(self, "learning_rate",
                               _check_rate(name, "learning_rate", self.learning_rate))
        self._check()

    def _set(self, field: str, value: Any) -> None:
        object.__setattr__(self, field, value)  # frozen dataclass: normalise in __post_init__

    def _check(self) -> None:
        """Validate/normalise the updater-specific fields."""

    # -- the interface the trainer calls ------------------------------------------------------
    def state_names(self) -> tuple[str, ...]:
        """Per-parameter state slots, each shaped and typed like the parameter."""
        return self._state

    def state_init(self) -> dict[str, float]:
        """Initial fill value of each state slot (0.0 unless the updater says otherwise)."""
        return {name: 0.0 for name in self._state}

    def learning_rate_at(self, iteration: int, epoch: int = 0) -> float:
        """The (scheduled) learning rate of this step (ND4J ``getLearningRate``)."""
        lr = as_value(getattr(self, "learning_rate", 0.0), iteration, epoch)
        if not math.isfinite(lr) or lr < 0:
            raise TrainingError(f"{type(self).__name__}: the learning-rate schedule "
                                f"{self.learning_rate!r} gave {lr!r} at iteration {iteration}, "
                                f"epoch {epoch}; a learning rate must be finite and >= 0")
        return float(lr)

    getLearningRate = learning_rate_at

    @property
    def has_learning_rate(self) -> bool:
        return any(f.name == "learning_rate" for f in fields(self))

    def hyper(self, iteration: int, epoch: int) -> dict[str, float]:
        """Scalars for the step with 0-based ``iteration``: ``{"lr": ..., ...}``."""
        lr = self.learning_rate_at(iteration, epoch)
        return {"lr": lr, **self._hyper(lr, iteration, epoch)}

    def _hyper(self, lr: float, iteration: int, epoch: int) -> dict[str, float]:
        return {}

    def update(self, param: Any, grad: Any, state: Mapping[str, Any],
               hyper: Mapping[str, Any]) -> tuple[Any, dict]:
        """One step: ``(new_param, new_state)`` from the parameter, its gradient, the state
        slots and ``hyper(iteration, epoch)`` (as floats, scalar arrays or scalar variables)."""
        name = type(self).__name__
        missing = [s for s in self._state if s not in state]
        if missing:
            raise TrainingError(f"{name}.update: state is missing slots {missing}; expected "
                                f"{list(self._state)} (see state_names())")
        wanted = self.hyper(0, 0)
        missing = [k for k in wanted if k not in hyper]
        if missing:
            raise TrainingError(f"{name}.update: hyper is missing {missing}; pass "
                                f"hyper(iteration, epoch), which has keys {list(wanted)}")
        h = {k: _scalar(hyper[k], param) for k in wanted}
        return self._step(param, grad, dict(state), h)

    @abc.abstractmethod
    def _step(self, p: Any, g: Any, s: dict, h: dict) -> tuple[Any, dict]:
        """(new param, new state) from param, grad, state and step scalars."""

    # -- JSON ---------------------------------------------------------------------------------
    def to_json(self) -> dict:
        """``{"type": "Adam", "learning_rate": 0.001 or a schedule dict, "beta1": ...}``."""
        return dataclass_to_json(self)

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "Updater":
        """Rebuild an updater from ``to_json()`` output; dispatches on ``"type"``."""
        return dataclass_from_json(d, _REGISTRY, "Updater")


class _AdamFamily(Updater):
    """Shared fields/validation of Adam-like updaters (no dataclass: declares no fields)."""

    _correct_v = True  # AdaMax and Nadam (as ND4J) bias-correct the first moment only

    def _hyper(self, lr: float, iteration: int, epoch: int) -> dict[str, float]:
        """Step size ``alpha_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)`` (without the square
        root factor when ``_correct_v`` is false)."""
        t = iteration + 1
        v = math.sqrt(1.0 - self.beta2 ** t) if self._correct_v else 1.0
        return {"alpha_t": lr * v / (1.0 - self.beta1 ** t)}

    def _check(self) -> None:
        name = type(self).__name__
        self._set("beta1", _check_beta(name, "beta1", self.beta1))
        self._set("beta2", _check_beta(name, "beta2", self.beta2))
        self._set("epsilon", check_number(name, "epsilon", self.epsilon, 0))

    def _moments(self, g: Any, s: dict) -> tuple[Any, Any]:
        return (s["m"] * self.beta1 + g * (1.0 - self.beta1),
                s["v"] * self.beta2 + g.square() * (1.0 - self.beta2))


# -- the updaters -------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoOp(Updater):
    """No update: ``p' = p`` (ND4J ``NoOp``); for frozen parameters."""

    def learning_rate_at(self, iteration: int, epoch: int = 0) -> float:
        return 0.0

    def _step(self, p: Any, g: Any, s: dict, h: dict) -> tuple[Any, dict]:
        return p, {}


@dataclass(frozen=True)
class Sgd(Updater):
    """Plain SGD (ND4J ``Sgd``, default lr 1e-3): ``p' = p - lr * g``."""

    learning_rate: Any = 1e-3

    def _step(self, p: Any, g: Any, s: dict, h: dict) -> tuple[Any, dict]:
        return p - h["lr"] * g, {}


class _WithMomentum(Updater):
    """Validation and per-step value of a (possibly scheduled) ``momentum`` field."""

    def _check(self) -> None:
        self._set("momentum", _check_momentum(type(self).__name__, self.momentum))

    def _hyper(self, lr: float, iteration: int, epoch: int) -> dict[str, float]:
        return {"momentum": _momentum_at(self, iteration, epoch)}


@dataclass(frozen=True)
class Momentum(_WithMomentum):
    """Classical (heavy-ball) momentum, as torch ``SGD(momentum=mu)``; not in ND4J:
    ``v' = mu * v + g``, ``p' = p - lr * v'``. Defaults lr 0.1, momentum 0.9 (as Nesterovs).
    ``momentum`` may be a schedule."""

    learning_rate: Any = 0.1
    momentum: Any = 0.9
    _state = ("v",)

    def _step(self, p: Any, g: Any, s: dict, h: dict) -> tuple[Any, dict]:
        v = h["momentum"] * s["v"] + g
        return p - h["lr"] * v, {"v": v}


@dataclass(frozen=True)
class Nesterovs(_WithMomentum):
    """Nesterov momentum (ND4J ``Nesterovs``, defaults lr 0.1, momentum 0.9):
    ``v' = mu * v - lr * g``, ``p' = p - mu * v + (1 + mu) * v'``.
    ``momentum`` may be a schedule (ND4J's momentum schedule)."""

    learning_rate: Any = 0.1
    momentum: Any = 0.9
    _state = ("v",)

    def _step(self, p: Any, g: Any, s: dict, h: dict) -> tuple[Any, dict]:
        mu = h["momentum"]
        v = mu * s["v"] - h["lr"] * g
        # = p - mu * v_prev + (1 + mu) * v', written so that no op combines two scalars
        return p + v + mu * (v - s["v"]), {"v": v}


def _check_momentum(owner: str, value: Any) -> Any:
    return value if isinstance(value, Schedule) else _check_beta(owner, "momentum", value)


def _momentum_at(u: Any, iteration: int, epoch: int) -> float:
    mu = as_value(u.momentum, iteration, epoch)
    if not (math.isfinite(mu) and 0 <= mu < 1):
        raise TrainingError(f"{type(u).__name__}: the momentum schedule {u.momentum!r} gave "
                            f"{mu!r} at iteration {iteration}, epoch {epoch}; momentum must be "
                            f"in [0, 1)")
    return float(mu)


@dataclass(frozen=True)
class Adam(_AdamFamily):
    """Adam (ND4J ``Adam``, defaults lr 1e-3, beta1 0.9, beta2 0.999, epsilon 1e-8)::

        m' = beta1 * m + (1 - beta1) * g
        v' = beta2 * v + (1 - beta2) * g^2
        alpha_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
        p' = p - alpha_t * m' / (sqrt(v') + epsilon)

    (ND4J replaces an ``alpha_t`` of 0 by ``epsilon``; we keep 0, so a zero learning rate,
    e.g. the first step of a warm-up, really leaves the parameters alone.)
    """

    learning_rate: Any = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    _state = ("m", "v")

    def _step(self, p: Any, g: Any, s: dict, h: dict) -> tuple[Any, dict]:
        m, v = self._moments(g, s)
        return p - h["alpha_t"] * m / (v.sqrt() + self.epsilon), {"m": m, "v": v}


@dataclass(frozen=True)
class AdamW(_AdamFamily):
    """Adam with decoupled weight decay (Loshchilov & Hutter; torch ``AdamW``; ND4J gets it
    from ``Adam`` + ``WeightDecay``). Defaults as Adam plus ``weight_decay`` 0.01 (torch's)::

        m', v', alpha_t as Adam
        p' = p - alpha_t * m' / (sqrt(v') + epsilon) - lr * weight_decay * p
    """

    learning_rate: Any = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    weight_decay: float = 0.01
    _state = ("m", "v")

    def _check(self) -> None:
        super()._check()
        self._set("weight_decay", check_number("AdamW", "weight_decay", self.weight_decay, 0))

    def _step(self, p: Any, g: Any, s: dict, h: dict) -> tuple[Any, dict]:
        m, v = self._moments(g, s)
        step = h["alpha_t"] * m / (v.sqrt() + self.epsilon)
        return p - step - h["lr"] * (p * self.weight_decay), {"m": m, "v": v}


@dataclass(frozen=True)
class AdaMax(_AdamFamily):
    """AdaMax, Adam with the infinity norm (ND4J ``AdaMax``, defaults lr 1e-3, beta1 0.9,
    beta2 0.999, epsilon 1e-8)::

        m' = beta1 * m + (1 - beta1) * g
        u' = max(beta2 * u, |g|) + 1e-32          (ND4J's guard against 0/0, kept in u)
        p' = p - lr / (1 - beta1^t) * m' / u'
    """

    learning_rate: Any = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    _state = ("m", "u")

    _correct_v = False

    def _step(self, p: Any, g: Any, s: dict, h: dict) -> tuple[Any, dict]:
        m = s["m"] * self.beta1 + g * (1.0 - self.beta1)
        u = (s["u"] * self.beta2).maximum(g.abs()) + 1e-32
        return p - h["alpha_t"] * m / u, {"m": m, "u": u}


@dataclass(frozen=True)
class Nadam(_AdamFamily):
    """Nesterov-accelerated Adam (ND4J ``Nadam``, defaults lr 1e-3, beta1 0.9, beta2 0.999,
    epsilon 1e-8); like ND4J, ``v`` is not bias-corrected::

        m' = beta1 * m + (1 - beta1) * g
        v' = beta2 * v + (1 - beta2) * g^2
        p' = p - lr / (1 - beta1^t) * (beta1 * m' + (1 - beta1) * g) / (sqrt(v') + epsilon)
    """

    learning_rate: Any = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    _state = ("m", "v")

    _correct_v = False

    def _step(self, p: Any, g: Any, s: dict, h: dict) -> tuple[Any, dict]:
        m, v = self._moments(g, s)
        nesterov = m * self.beta1 + g * (1.0 - self.beta1)
        return p - h["alpha_t"] * nesterov / (v.sqrt() + self.epsilon), {"m": m, "v": v}


@dataclass(frozen=True)
class AMSGrad(_AdamFamily):
    """AMSGrad (ND4J ``AMSGrad``, defaults lr 1e-3, beta1 0.9, beta2 0.999, epsilon 1e-8)::

        m', v', alpha_t as Adam
        v_hat' = max(v_hat, v')
        p' = p - alpha_t * m' / (sqrt(v_hat') + epsilon)
    """

    learning_rate: Any = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    _state = ("m", "v", "v_hat")

    def _step(self, p: Any, g: Any, s: dict, h: dict) -> tuple[Any, dict]:
        m, v = self._moments(g, s)
        v_hat = s["v_hat"].maximum(v)
        return (p - h["alpha_t"] * m / (v_hat.sqrt() + self.epsilon),
                {"m": m, "v": v, "v_hat": v_hat})


@dataclass(frozen=True)
class AdaGrad(Updater):
    """AdaGrad (ND4J ``AdaGrad``, defaults lr 0.1, epsilon 1e-6); the history starts at
    ``epsilon`` as in ND4J (``state_init``)::

        h' = h + g^2
        p' = p - lr * g / (sqrt(h') + epsilon)
    """

    learning_rate: Any = 0.1
    epsilon: float = 1e-6
    _state = ("grad",)

    def _check(self) -> None:
        self._set("epsilon", check_number("AdaGrad", "epsilon", self.epsilon, 0))

    def state_init(self) -> dict[str, float]:
        return {"grad": self.epsilon}

    def _step(self, p: Any, g: Any, s: dict, h: dict) -> tuple[Any, dict]:
        hist = s["grad"] + g.square()
        return p - h["lr"] * g / (hist.sqrt() + self.epsilon), {"grad": hist}


@dataclass(frozen=True)
class RmsProp(Updater):
    """RMSProp (ND4J ``RmsProp``, defaults lr 0.1, rms_decay 0.95, epsilon 1e-8); the cache
    starts at ``epsilon`` as in ND4J (``state_init``)::

        c' = rms_decay * c + (1 - rms_decay) * g^2
        p' = p - lr * g / (sqrt(c') + epsilon)
    """

    learning_rate: Any = 0.1
    rms_decay: float = 0.95
    epsilon: float = 1e-8
    _state = ("g",)

    def _check(self) -> None:
        self._set("rms_decay", _check_beta("RmsProp", "rms_decay", self.rms_decay))
        self._set("epsilon", check_number("RmsProp", "epsilon", self.epsilon, 0))

    def state_init(self) -> dict[str, float]:
        return {"g": self.epsilon}

    def _step(self, p: Any, g: Any, s: dict, h: dict) -> tuple[Any, dict]:
        c = s["g"] * self.rms_decay + g.square() * (1.0 - self.rms_decay)
        return p - h["lr"] * g / (c.sqrt() + self.epsilon), {"g": c}


@dataclass(frozen=True)
class AdaDelta(Updater):
    """AdaDelta (ND4J ``AdaDelta``, defaults rho 0.95, epsilon 1e-6)::

        msg'  = rho * msg + (1 - rho) * g^2
        d     = g * sqrt(msdx + epsilon) / sqrt(msg' + epsilon)
        msdx' = rho * msdx + (1 - rho) * d^2
        p'    = p - lr * d

    ND4J's AdaDelta has no learning rate; ``learning_rate`` (default 1.0, i.e. ND4J's update)
    is torch's multiplier, and may be a schedule.
    """

    rho: float = 0.95
    epsilon: float = 1e-6
    learning_rate: Any = 1.0
    _state = ("msg", "msdx")

    def _check(self) -> None:
        self._set("rho", _check_beta("AdaDelta", "rho", self.rho))
        self._set("epsilon", check_number("AdaDelta", "epsilon", self.epsilon, 0))

    def _step(self, p: Any, g: Any, s: dict, h: dict) -> tuple[Any, dict]:
        msg = s["msg"] * self.rho + g.square() * (1.0 - self.rho)
        d = g * (s["msdx"] + self.epsilon).sqrt() / (msg + self.epsilon).sqrt()
        msdx = s["msdx"] * self.rho + d.square() * (1.0 - self.rho)
        return p - h["lr"] * d, {"msg": msg, "msdx": msdx}


#: every updater by its JSON ``type`` name
UPDATERS = dict(_REGISTRY)

__all__ = ["Updater", "NoOp", "Sgd", "Momentum", "Nesterovs", "Adam", "AdamW", "AdaMax", "Nadam",
           "AMSGrad", "AdaGrad", "RmsProp", "AdaDelta", "UPDATERS"]
