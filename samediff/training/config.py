"""``TrainingConfig``: what ``SameDiff.fit`` needs besides the graph (ND4J's TrainingConfig).

>>> from samediff.training import TrainingConfig
>>> from samediff.training.updaters import Adam
>>> config = TrainingConfig(updater=Adam(1e-3), l2=1e-4, feature_mapping=["x"],
...                         label_mapping=["y"])
>>> TrainingConfig.from_json(config.to_json()) == config
True
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from typing import Any, Sequence

from ..errors import TrainingError
from .updaters import Updater


def _names(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    names = [getattr(v, "name", v) for v in value]
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise TrainingError(f"TrainingConfig: {what} must be placeholder/variable names, got {bad!r}")
    return names


@dataclass(eq=False)
class TrainingConfig:
    """How to train a graph: the updater, regularization and which placeholders the data feeds.

    * ``updater``: an ``Updater`` (``Sgd``, ``Adam``...), required.
    * ``l1``, ``l2``: penalties ``l1 * sum|p|`` and ``l2/2 * sum(p^2)`` on every trainable
      variable, added to the loss; their gradients are added before the updater runs.
    * ``weight_decay``: decoupled decay applied after the updater, ``p -= lr * wd * p`` (or
      ``wd * p`` with ``weight_decay_apply_lr=False``). As in ND4J it is an alternative to
      ``l2``: setting both is refused.
    * ``feature_mapping`` / ``label_mapping``: placeholder names the features and labels of
      each batch feed, in order.
    * ``loss_variables``: what to minimize (default: the graph's marked losses, summed).
    * ``minimize``: ``False`` maximizes instead.
    """

    updater: Any = None
    l1: float = 0.0
    l2: float = 0.0
    weight_decay: float = 0.0
    weight_decay_apply_lr: bool = True
    feature_mapping: Sequence[str] = field(default_factory=list)
    label_mapping: Sequence[str] = field(default_factory=list)
    loss_variables: Sequence[str] | None = None
    minimize: bool = True

    def __post_init__(self) -> None:
        self.feature_mapping = _names(self.feature_mapping, "feature_mapping")
        self.label_mapping = _names(self.label_mapping, "label_mapping")
        if self.loss_variables is not None:
            self.loss_variables = _names(self.loss_variables, "loss_variables")
        for name in ("l1", "l2", "weight_decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0:
                raise TrainingError(f"TrainingConfig: {name} must be a finite number >= 0, "
                                    f"got {value!r}")
            setattr(self, name, float(value))
        for name in ("minimize", "weight_decay_apply_lr"):
            if not isinstance(getattr(self, name), bool):
                raise TrainingError(f"TrainingConfig: {name} must be True or False, got "
                                    f"{getattr(self, name)!r}")
        if self.l2 > 0 and self.weight_decay > 0:
            raise TrainingError("TrainingConfig: l2 and weight_decay are alternatives (ND4J "
                                "applies one or the other); set only one of them")
        if self.updater is not None and not callable(getattr(self.updater, "update", None)):
            raise TrainingError(f"TrainingConfig: updater must be an Updater (Sgd, Adam, ...), "
                                f"got {self.updater!r}")

    # -- ND4J's builder spelling ------------------------------------------------------------
    @classmethod
    def builder(cls) -> "_Builder":
        """``TrainingConfig.builder().updater(Adam(1e-3)).l2(1e-4)
        .data_set_feature_mapping("x").data_set_label_mapping("y").build()`` (ND4J's
        ``new TrainingConfig.Builder()``: ``TrainingConfig.Builder()`` works too).

        >>> from samediff.training import Adam
        >>> TrainingConfig.Builder().l2(1e-4).updater(Adam(1e-3)).dataSetFeatureMapping(
        ...     "input").dataSetLabelsMapping("labels").build().label_mapping
        ['labels']
        """
        return _Builder()

    Builder = builder

    # -- JSON -------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["updater"] = None if self.updater is None else self.updater.to_json()
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict) -> "TrainingConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise TrainingError(f"TrainingConfig: unknown fields {sorted(unknown)} in saved config")
        data = dict(data)
        if data.get("updater") is not None:
            data["updater"] = Updater.from_json(data["updater"])
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> "TrainingConfig":
        return cls.from_dict(json.loads(text))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TrainingConfig) and self.to_dict() == other.to_dict()


class _Builder:
    def __init__(self) -> None:
        self._kwargs: dict[str, Any] = {}

    def _set(self, key: str, value: Any) -> "_Builder":
        self._kwargs[key] = value
        return self

    def updater(self, u: Any) -> "_Builder":
        return self._set("updater", u)

    def l1(self, v: float) -> "_Builder":
        return self._set("l1", v)

    def l2(self, v: float) -> "_Builder":
        return self._set("l2", v)

    def weight_decay(self, v: float, apply_lr: bool = True) -> "_Builder":
        self._set("weight_decay_apply_lr", apply_lr)
        return self._set("weight_decay", v)

    def data_set_feature_mapping(self, *names: str) -> "_Builder":
        return self._set("feature_mapping", list(names))

    def data_set_label_mapping(self, *names: str) -> "_Builder":
        return self._set("label_mapping", list(names))

    def loss_variables(self, *names: str) -> "_Builder":
        return self._set("loss_variables", list(names))

    def minimize(self, flag: bool = True) -> "_Builder":
        return self._set("minimize", flag)

    dataSetFeatureMapping = data_set_feature_mapping
    dataSetLabelMapping = dataSetLabelsMapping = data_set_labels_mapping = data_set_label_mapping
    weightDecay = weight_decay

    def build(self) -> TrainingConfig:
        return TrainingConfig(**self._kwargs)
