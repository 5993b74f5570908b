"""What travels between the client and the workers, and the worker's cache of loaded models.

Two kinds of payload, both plain bytes in safe formats (no pickle of graphs or code):

* the **model**: ``serialize.to_bytes`` of the SameDiff (graph JSON + ``.npy`` arrays, updater
  state included), sent once per run (``client.scatter(..., broadcast=True)``) with its SHA-256;
* the **training state** of a round: the parameters and the updater's arrays as an ``.npz``
  (``np.savez``, read back with ``allow_pickle=False``), sent once per round with its SHA-256.

Why two and not the whole model every round: a worker turns model bytes into a ``Model`` and
its ``TrainStep`` (step graph, autodiff) once per run, then only copies new numbers into it:
for the digits MLP ``from_bytes`` costs ~21 ms and building the step ~17 ms, against ~1 ms
per training step, so re-sending the model each round would cost more than the round's work.

A worker verifies the digest of everything it loads; damage (truncation, a flipped byte)
raises ``CorruptFileError`` naming the worker and the partition, which the client reports as a
``DistributedTrainingError``.

>>> import numpy as np
>>> blob, digest = encode_state({"w": np.ones(2, np.float32)}, {"w": {"m": np.zeros(2)}})
>>> params, slots = decode_state(blob, digest, "here")
>>> params["w"].tolist(), slots["w"]["m"].tolist()
([1.0, 1.0], [0.0, 0.0])
>>> decode_state(blob[:-3], digest, "worker w, partition 0")
Traceback (most recent call last):
...
samediff.errors.CorruptFileError: fit_distributed: the training state received on worker w, partition 0 is damaged (its SHA-256 does not match the one the client sent: truncated or altered in transit)
"""
from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict
from typing import Any, Mapping

import numpy as np

from .. import serialize
from ..errors import CorruptFileError
from ..training.model import Model

#: models a worker process keeps loaded (one per concurrent run is the usual need)
CACHE_SIZE = 4


def digest_of(data: bytes) -> str:
    """SHA-256 hex digest: a payload's identity (cache key) and its integrity check."""
    return hashlib.sha256(data).hexdigest()


def encode_model(model: Any) -> tuple[bytes, str]:
    """``model`` (a SameDiff or any ``TrainableModel``) as file-format bytes, with its digest."""
    data = serialize.to_bytes(model)
    return data, digest_of(data)


def encode_state(params: Mapping[str, np.ndarray],
                 slots: Mapping[str, Mapping[str, np.ndarray]]) -> tuple[bytes, str]:
    """Parameters and updater arrays as ``.npz`` bytes (member ``p/<name>`` or
    ``s/<name>/<slot>``; names may contain ``/``, so the slot is the last component)."""
    members = {f"p/{k}": np.ascontiguousarray(v) for k, v in params.items()}
    for p, per_slot in slots.items():
        for s, arr in per_slot.items():
            members[f"s/{p}/{s}"] = np.ascontiguousarray(arr)
    buf = io.BytesIO()
    np.savez(buf, **members)
    data = buf.getvalue()
    return data, digest_of(data)


def decode_state(data: bytes, digest: str, where: str) -> tuple[dict, dict]:
    """What ``encode_state`` wrote: ``(params, slots)``; ``CorruptFileError`` naming ``where``
    when the bytes are not the ones the client sent or not a readable ``.npz``."""
    if digest_of(data) != digest:
        raise CorruptFileError(f"fit_distributed: the training state received on {where} is "
                               f"damaged (its SHA-256 does not match the one the client sent: "
                               f"truncated or altered in transit)")
    params: dict[str, np.ndarray] = {}
    slots: dict[str, dict[str, np.ndarray]] = {}
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            for key in npz.files:
                kind, _, rest = key.partition("/")
                if kind == "p":
                    params[rest] = npz[key]
                else:
                    p, _, s = rest.rpartition("/")
                    slots.setdefault(p, {})[s] = npz[key]
    except (ValueError, OSError, EOFError) as exc:
        raise CorruptFileError(f"fit_distributed: the training state received on {where} is "
                               f"not a readable .npz ({exc})") from exc
    return params, slots


class _Entry:
    """A loaded model and the lock its users take (a worker may run tasks in several threads;
    a model's arrays and compiled step are used by one task at a time)."""

    def __init__(self, model: Any) -> None:
        self.model, self.lock = model, threading.Lock()
        self.loads = 1


_CACHE: "OrderedDict[str, _Entry]" = OrderedDict()
_CACHE_LOCK = threading.Lock()
#: how many times this process turned payload bytes into a model (tests read it: a model is
#: loaded once per worker, not once per task or block)
LOADS = {"count": 0}


def loads() -> int:
    """Models this process has loaded from payload bytes (``client.run(loads)`` asks every
    worker)."""
    return LOADS["count"]


def cached(data: bytes, digest: str, where: str, make: Any = None) -> _Entry:
    """The model of payload ``data`` in this process, loaded on first use (digest checked,
    ``serialize.from_bytes``'s checks) and kept, keyed by ``digest``. ``make(saved)`` builds
    the object from ``serialize.Saved`` (default: a training ``Model``)."""
    with _CACHE_LOCK:
        entry = _CACHE.get(digest)
        if entry is not None:
            _CACHE.move_to_end(digest)
            return entry
    if digest_of(data) != digest:
        raise CorruptFileError(f"fit_distributed: the model payload received on {where} is "
                               f"damaged (its SHA-256 does not match the one the client sent: "
                               f"truncated or altered in transit)")
    # a damaged payload raises serialize's named error, its source naming worker and partition
    saved = serialize.from_bytes(data, f"<model payload on {where}>")
    entry = _Entry((make or (lambda s: Model(*s)))(saved))
    LOADS["count"] += 1
    with _CACHE_LOCK:
        _CACHE[digest] = entry
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return entry


def where(partition: int | None = None) -> str:
    """``"worker tcp://..., partition p"`` inside a Dask task; ``"this process"`` outside."""
    try:
        from distributed import get_worker
        name = f"worker {get_worker().address}"
    except (ImportError, ValueError):
        name = "this process"
    return name if partition is None else f"{name}, partition {partition}"
