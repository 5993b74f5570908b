"""Turning what users pass to ``fit``/``evaluate`` into feeds ``{placeholder: array}``.

Accepted data:

* arrays: a tuple/list ``(features..., labels...)`` or a dict ``{placeholder: array}`` of whole
  datasets with a common first dim, cut into batches of ``batch_size`` (shuffled per epoch by a
  generator keyed on the absolute epoch, so training resumed from a checkpoint sees exactly the
  batches an uninterrupted run would);
* any re-iterable of batches (a PyTorch ``DataLoader``, a list, a generator *function*...),
  each batch a tuple/list ``(features..., labels...)``, a dict keyed by placeholder name (or by
  ``"features"``/``"labels"``), or an object with ``features``/``labels`` attributes (ND4J's
  ``DataSet``).
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from ..errors import TrainingError


def _array(x: Any) -> np.ndarray:
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):  # NDArray, torch tensors
        x = x.numpy()
    return np.asarray(x)


class FeedMapping:
    """Which placeholders a batch's features and labels feed."""

    def __init__(self, features: Sequence[str], labels: Sequence[str]) -> None:
        self.features, self.labels = list(features), list(labels)

    @property
    def names(self) -> list[str]:
        return self.features + self.labels

    def feeds(self, batch: Any, where: str) -> dict[str, np.ndarray]:
        """One batch as ``{placeholder: array}``."""
        if isinstance(batch, Mapping):
            # {"features": ..., "labels": ...} -- unless the keys are placeholder names (a
            # graph whose label placeholder is called "labels" is fed by name)
            keys = {str(k) for k in batch}
            if keys & {"features", "labels"} and not keys <= set(self.names):
                return self._positional([*_listify(batch.get("features")),
                                         *_listify(batch.get("labels"))], where)
            return {str(k): _array(v) for k, v in batch.items()}
        if hasattr(batch, "features") and not isinstance(batch, (tuple, list, np.ndarray)):
            return self._positional([*_listify(batch.features),
                                     *_listify(getattr(batch, "labels", None))], where)
        if isinstance(batch, (tuple, list)):
            return self._positional(list(batch), where)
        raise TrainingError(f"{where}: cannot read a batch of type {type(batch).__name__}; give "
                            f"a tuple (features, labels), a dict keyed by placeholder name, or "
                            f"an object with .features/.labels")

    def _positional(self, parts: list, where: str) -> dict[str, np.ndarray]:
        names = self.names
        if not names:
            raise TrainingError(f"{where}: the training config has no feature_mapping/"
                                f"label_mapping, so positional batches cannot be matched to "
                                f"placeholders; set them or pass dict batches")
        if len(parts) == len(self.features) and len(parts) < len(names):
            names = self.features  # features only (prediction / evaluation without labels)
        elif len(parts) != len(names):
            raise TrainingError(f"{where}: a batch has {len(parts)} parts but the config maps "
                                f"{len(self.features)} feature(s) {self.features} and "
                                f"{len(self.labels)} label(s) {self.labels}")
        return {n: _array(p) for n, p in zip(names, parts)}


def _listify(x: Any) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (tuple, list)) else [x]


class Batches:
    """Re-iterable batches of feeds for one kind of data (see module docstring)."""

    def __init__(self, data: Any, mapping: FeedMapping, batch_size: int | None, shuffle: bool,
                 seed: int, where: str) -> None:
        self.mapping, self.where = mapping, where
        if data is None or not (isinstance(data, Mapping) or hasattr(data, "__iter__")):
            what = "data is required" if data is None else \
                f"cannot read data of type {type(data).__name__}"
            raise TrainingError(
                f"{where}: {what}; give (features, labels) "
                f"arrays (cut into batches of batch_size), a dict {{placeholder name: array}}, "
                f"or a re-iterable of such batches (e.g. a DataSet iterator)")
        self.arrays = self._as_arrays(data)
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        if self.arrays is None:
            if iter(data) is data:  # a one-shot iterator cannot give a second epoch
                self.source: Any = _OneShot(data)
            else:
                self.source = data
        elif batch_size is None or batch_size < 1:
            raise TrainingError(f"{where}: batch_size must be >= 1 for array data, got {batch_size!r}")

    def _as_arrays(self, data: Any) -> dict[str, np.ndarray] | None:
        if isinstance(data, np.ndarray):  # features only (no labels placeholders)
            data = (data,)
        if isinstance(data, Mapping) and data and all(_is_array(v) for v in data.values()):
            if "features" in data or "labels" in data:  # a whole dataset keyed like a batch
                feeds = self.mapping.feeds(data, self.where)
            else:
                feeds = {str(k): _array(v) for k, v in data.items()}
        elif isinstance(data, (tuple, list)) and data and all(
                isinstance(v, np.ndarray) or (_is_array(v) and not isinstance(v, (tuple, list)))
                for v in data):
            # a tuple or list of arrays is the dataset (a list of batches holds tuples/dicts)
            feeds = self.mapping._positional(list(data), self.where)
        else:
            return None
        sizes = {k: v.shape[0] if v.ndim else None for k, v in feeds.items()}
        if len(set(sizes.values())) != 1 or None in sizes.values():
            raise TrainingError(f"{self.where}: arrays must share their first (example) dim, "
                                f"got {sizes}")
        return feeds

    @property
    def num_examples(self) -> int | None:
        return None if self.arrays is None else next(iter(self.arrays.values())).shape[0]

    def __len__(self) -> int:
        n = self.num_examples
        if n is not None:
            return -(-n // self.batch_size)
        return len(self.source)  # may raise TypeError: unknown length

    def epoch(self, epoch: int, reuse: bool = False) -> Iterator[dict[str, np.ndarray]]:
        """The epoch's batches. ``reuse=True``: shuffled batches are gathered into buffers
        reused from batch to batch, so a batch is valid only until the next one is drawn (the
        caller keeps no batch: ``fit`` without evaluations)."""
        if self.arrays is None:
            for batch in self.source:
                yield self.mapping.feeds(batch, self.where)
            return
        n = self.num_examples
        order = (np.random.default_rng([self.seed, epoch]).permutation(n) if self.shuffle
                 else None)
        if order is not None and reuse:
            yield from self._gathered(order)
            return
        for start in range(0, n, self.batch_size):
            if order is None:
                yield {k: v[start:start + self.batch_size] for k, v in self.arrays.items()}
            else:
                idx = order[start:start + self.batch_size]
                yield {k: v[idx] for k, v in self.arrays.items()}

    def _gathered(self, order: np.ndarray) -> Iterator[dict[str, np.ndarray]]:
        """Shuffled batches gathered by ``take`` into reused buffers: the same rows as
        ``v[idx]``, without a fresh allocation per batch (for a batch of 128 MNIST rows, ~400 KB
        whose pages fault in on every batch). ``mode="clip"`` (the indices are a permutation,
        always in range) lets ``take`` write ``out`` directly instead of buffering it."""
        size = self.batch_size
        buffers: dict[tuple, np.ndarray] = {}
        for start in range(0, len(order), size):
            idx = order[start:start + size]
            feeds = {}
            for k, v in self.arrays.items():
                out = buffers.get((k, len(idx)))
                if out is None:
                    out = buffers[(k, len(idx))] = np.empty((len(idx),) + v.shape[1:], v.dtype)
                feeds[k] = v.take(idx, 0, out, "clip")
            yield feeds


def _is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) or hasattr(x, "__array__") or (
        hasattr(x, "numpy") and hasattr(x, "shape"))


class _OneShot:
    def __init__(self, it: Any) -> None:
        self.it, self.used = it, False

    def __iter__(self) -> Iterator:
        if self.used:
            raise TrainingError("fit: the data is a one-shot iterator (e.g. a generator) and was "
                                "used up by the first epoch; pass a re-iterable (a list, a "
                                "DataLoader, or a function's result per epoch) for more epochs")
        self.used = True
        return iter(self.it)
