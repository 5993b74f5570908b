"""The Dask tasks: pure functions of their inputs, run on the workers.

Every task takes the model payload, the training state it starts from and its partition's
data, and returns new arrays; none keeps anything a retry would need (the per-process model
cache only saves the cost of loading: a task on a fresh worker loads the model again). So when
a worker is lost, Dask recomputes its tasks from their lineage on another worker and the result
is the same bits. That includes random draws (dropout masks): a training task draws from its
own stream, ``random_state.stream`` seeded by (run seed, epoch, first batch, partition) —
``task_stream`` — never from the worker's global stream, whose state depends on what that
process ran before.

* ``train_partition``: ``steps`` local steps of one partition (parameter averaging), run by
  ``samediff.training.fit`` itself on the batches a local ``fit`` of that partition would see;
* ``partition_gradients`` / ``apply_gradients``: one step's gradient on one partition, and the
  update applied to the averaged gradient (gradient averaging, ``gradients.py``);
* ``merge``: the pairwise sum of two results (the tree reduction's node);
* ``load_npz``: a partition from an ``.npz`` file (a local path or an fsspec URL).
"""
from __future__ import annotations

import contextlib
import time
from itertools import islice
from typing import Any, Iterator

import numpy as np

from .. import compiler, random_state
from ..errors import TrainingError
from ..training.data import Batches, FeedMapping
from ..training.trainer import NonFiniteError, fit, train_step_for
from .gradients import apply_update, gradient_pass
from .payload import cached, decode_state, where


@contextlib.contextmanager
def using_executor(name: str) -> Iterator[None]:
    """Run plans with the client's executor (a worker would otherwise use its own default):
    "compiled" and "interpreter" may round differently, and distributed results must match the
    client's local ones."""
    previous = compiler.set_executor(name)
    try:
        yield
    finally:
        compiler.set_executor(previous)


#: first word of every task stream's entropy. ``SeedSequence`` pads short entropy with zeros, so
#: without it the stream of (seed, epoch, batch 0, partition 0) would be the generator that
#: shuffles that epoch (``Batches``: ``default_rng([seed, epoch])``)
STREAM_TAG = 0x5D_D157


def task_stream(seed: int, epoch: int, batch: int, partition: int) -> Any:
    """The random stream (a ``random_state.stream`` context) of the task training ``partition``
    from batch ``batch`` of ``epoch`` in a run seeded ``seed``: the same numbers wherever and
    however often the task runs, different ones for every other task of the run."""
    return random_state.stream(STREAM_TAG, seed, epoch, batch, partition)


def _state(state: Any, digest: str | None, here: str,
           iteration: int) -> tuple[dict, dict, int]:
    """``(params, slots, iteration)`` from ``.npz`` bytes the client sent (at ``iteration``),
    or from an ``apply_gradients`` result (a dict holding them and its own iteration: a
    skipped non-finite step does not advance it)."""
    if isinstance(state, dict):
        return state["params"], state["slots"], state["iteration"]
    return (*decode_state(state, digest or "", here), iteration)


def write_state(model: Any, params: dict, slots: dict) -> None:
    """Copy parameters and updater arrays into ``model`` (a worker's cached model, or the
    client's after averaging). Updater arrays keep their identity where they can, so a
    compiled step's cached inputs stay valid."""
    for name, value in params.items():
        model.write_value(name, value)
    arrays = model.updater_state.arrays
    for p, per_slot in slots.items():
        have = arrays.setdefault(p, {})
        for s, value in per_slot.items():
            old = have.get(s)
            if old is not None and old.shape == value.shape and old.dtype == value.dtype:
                np.copyto(old, value)
            else:
                have[s] = np.array(value, copy=True)


def _load(model: Any, params: dict, slots: dict, iteration: int, epoch: int) -> None:
    """The round's numbers and counters in the cached model."""
    write_state(model, params, slots)
    st = model.updater_state
    st.iteration, st.epoch, st.batch = iteration, epoch, 0


@contextlib.contextmanager
def _loaded(model_bytes: bytes, model_digest: str, state: Any, state_digest: str | None,
            here: str, iteration: int, epoch: int, executor: str) -> Iterator[tuple]:
    """This worker's cached model (loaded once per payload), holding its lock, with the
    round's parameters, updater state and counters in it and ``executor`` set: yields
    ``(model, params, iteration)``."""
    entry = cached(model_bytes, model_digest, here)
    with entry.lock, using_executor(executor):
        params, slots, iteration = _state(state, state_digest, here, iteration)
        _load(entry.model, params, slots, iteration, epoch)
        yield entry.model, params, iteration


def _batches(model: Any, data: Any, batch_size: int, shuffle: bool, seed: int,
             here: str) -> Batches:
    cfg = model.training_config
    if cfg is None:
        raise TrainingError("fit_distributed: the model has no training config")
    return Batches(data, FeedMapping(cfg.feature_mapping, cfg.label_mapping), batch_size,
                   shuffle, seed, f"fit_distributed ({here})")


def _positional(batch: dict, mapping: FeedMapping) -> Any:
    """A batch ``{placeholder: array}`` as the ``(features..., labels...)`` tuple ``fit`` maps
    back to the same placeholders. (A dict batch is read as ``{"features", "labels"}`` when a
    placeholder is named ``labels`` or ``features``: ``FeedMapping.feeds``.)"""
    names = mapping.names
    if names and set(batch) == set(names):
        return tuple(batch[n] for n in names)
    return batch


def _snapshot(model: Any, params: dict) -> tuple[dict, dict]:
    """Copies of the parameters and updater arrays (the cached model's arrays are reused by the
    next task on this worker, while Dask may still hold this task's result)."""
    out_p = {p: np.array(model.read_value(p), copy=True) for p in params}
    out_s = {p: {s: np.array(a, copy=True) for s, a in slots.items()}
             for p, slots in model.updater_state.arrays.items()}
    return out_p, out_s


def train_partition(model_bytes: bytes, model_digest: str, state: Any, state_digest: str | None,
                    data: Any, *, partition: int, epoch: int, start: int, steps: int,
                    batch_size: int, shuffle: bool, seed: int, iteration: int, executor: str,
                    on_nonfinite: str) -> dict[str, Any]:
    """Batches ``start .. start+steps`` of ``epoch`` of this partition (the order a local
    ``fit`` of the partition with ``seed`` uses), trained by ``fit`` from the given state.
    Returns the new parameters and updater arrays with loss, counts and timings; ``count`` 0
    when the partition has no batch left in this window."""
    t0 = time.perf_counter()
    here = where(partition)
    with _loaded(model_bytes, model_digest, state, state_digest, here, iteration, epoch,
                 executor) as (model, params, iteration):
        batches = _batches(model, data, batch_size, shuffle, seed, here)
        window = [_positional(b, batches.mapping)
                  for b in islice(batches.epoch(epoch), start, start + steps)]
        if not window:
            return _empty(partition)
        t1 = time.perf_counter()
        with task_stream(seed, epoch, start, partition):
            history = fit(model, window, 1, batch_size=None, shuffle=False, verbose=0,
                          seed=seed, on_nonfinite=on_nonfinite)
        t2 = time.perf_counter()
        record = history.epochs[0]
        samples = sum(len(b[0]) if isinstance(b, tuple) else len(next(iter(b.values())))
                      for b in window)
        new_p, new_s = _snapshot(model, params)
        return {"count": 1, "params": new_p, "slots": new_s,
                "dtypes": {"params": dtypes_of(new_p), "slots": dtypes_of(new_s)},
                "loss_sum": record.loss * samples if record.iterations else 0.0,
                "samples": samples, "steps": record.iterations,
                "skipped": int(record.metrics.get("skipped", 0)),
                "iteration": model.updater_state.iteration, "partitions": [partition],
                "setup": [t1 - t0], "compute": [t2 - t1],
                "serialize": [time.perf_counter() - t2]}


def _empty(partition: int) -> dict[str, Any]:
    return {"count": 0, "partitions": [], "idle": [partition]}


def partition_gradients(model_bytes: bytes, model_digest: str, state: Any,
                        state_digest: str | None, data: Any, *, partition: int, epoch: int,
                        index: int, batch_size: int, shuffle: bool, seed: int, iteration: int,
                        executor: str) -> dict[str, Any]:
    """The gradients of batch ``index`` of ``epoch`` of this partition at the given state."""
    t0 = time.perf_counter()
    here = where(partition)
    with _loaded(model_bytes, model_digest, state, state_digest, here, iteration, epoch,
                 executor) as (model, params, iteration):
        batch = next(islice(_batches(model, data, batch_size, shuffle, seed, here).epoch(epoch),
                            index, None), None)
        if batch is None:
            return _empty(partition)
        step = _ready_step(model)
        t1 = time.perf_counter()
        with task_stream(seed, epoch, index, partition):
            out = gradient_pass(step, batch, model.updater_state)
        n = len(next(iter(batch.values())))
        return {"count": 1, "grads": out["handoff"], "updates": out["updates"],
                "dtypes": {"grads": dtypes_of(out["handoff"]),
                           "updates": dtypes_of(out["updates"])},
                "types": out["types"], "finite": out["finite"], "loss_sum": out["loss"] * n,
                "samples": n, "steps": 1, "iteration": iteration, "partitions": [partition],
                "setup": [t1 - t0],
                "compute": [time.perf_counter() - t1], "serialize": [0.0]}


def _ready_step(model: Any) -> Any:
    """The model's train step (built once per cached model) with its updater state made, as
    ``fit`` does before its first step."""
    cfg = model.training_config
    step = train_step_for(model, cfg, ())
    model.updater_state.ensure({p: model.read_value(p) for p in step.params}, step.slots,
                               cfg.updater.state_init())
    return step


def apply_gradients(model_bytes: bytes, model_digest: str, state: Any, state_digest: str | None,
                    reduced: dict[str, Any], *, iteration: int, epoch: int, executor: str,
                    on_nonfinite: str) -> dict[str, Any]:
    """The state after one update with the average of ``reduced``'s summed gradients (no
    update when a partition's loss or gradient was not finite: then ``on_nonfinite="raise"``
    raises ``NonFiniteError``, ``"skip"`` returns the state unchanged)."""
    here = where()
    with _loaded(model_bytes, model_digest, state, state_digest, here, iteration, epoch,
                 executor) as (model, params, iteration):
        step = _ready_step(model)
        count = reduced["count"]
        if count and reduced["finite"]:
            dtypes = reduced["dtypes"]
            apply_update(step, model.updater_state,
                         average(reduced["grads"], count, dtypes["grads"]),
                         average(reduced["updates"], count, dtypes["updates"]),
                         reduced["types"])
        elif count and on_nonfinite == "raise":
            raise NonFiniteError(
                f"fit_distributed (gradient averaging): epoch {epoch}, iteration {iteration}: a "
                f"partition's loss or gradient was not finite; the step was not applied. Check "
                f"the data for NaN/inf, lower the learning rate, or pass on_nonfinite='skip'",
                epoch, -1, iteration, float("nan"))
        new_p, new_s = _snapshot(model, params)
        return {"params": new_p, "slots": new_s, "iteration": model.updater_state.iteration,
                "applied": bool(count and reduced["finite"])}


def step_summary(reduced: dict[str, Any]) -> dict[str, Any]:
    """The small part of a reduced gradient result the client reads (no arrays)."""
    return {k: v for k, v in reduced.items()
            if k not in ("grads", "updates", "params", "slots", "dtypes")}


_SUMMED = ("params", "slots", "grads", "updates")


def merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two partial results summed (arrays in float64, so the average does not depend on the
    tree's shape beyond float64 rounding; a single result passes through untouched, so one
    partition's result is its own bits). Lists concatenate; numbers add."""
    if not a["count"] or not b["count"]:
        keep, other = (b, a) if not a["count"] else (a, b)
        return {**keep, "idle": keep.get("idle", []) + other.get("idle", [])}
    out: dict[str, Any] = {}
    for key, value in a.items():
        if key not in b:
            out[key] = value
            continue
        other = b[key]
        if key in _SUMMED:
            out[key] = _add(value, other)
        elif key in ("types", "dtypes"):
            out[key] = value
        elif key == "finite":
            out[key] = value and other
        elif key == "iteration":
            out[key] = max(value, other)
        else:  # counts, sums, lists of timings and partitions
            out[key] = value + other
    for key in b.keys() - a.keys():
        out[key] = b[key]
    return out


def _add(x: Any, y: Any) -> Any:
    if isinstance(x, dict):
        return {k: _add(v, y[k]) for k, v in x.items()}
    if x.dtype.kind not in "fc":  # integer variables are not averaged: the first one wins
        return x
    return np.add(x, y, dtype=np.float64 if x.dtype.itemsize <= 8 else x.dtype)


def average(summed: Any, count: int, dtypes: Any) -> Any:
    """``summed / count`` cast back to each array's own dtype (``dtypes``: the same nesting of
    dtype strings, from ``dtypes_of`` on a partition's arrays); a count of 1 returns the
    arrays untouched."""
    if isinstance(summed, dict):
        return {k: average(v, count, dtypes[k]) for k, v in summed.items()}
    dtype = np.dtype(dtypes)
    if count == 1 or dtype.kind not in "fc":
        return summed
    return (summed / count).astype(dtype)


def dtypes_of(tree: Any) -> Any:
    """The dtype strings of a nesting of dicts of arrays (what ``average`` casts back to)."""
    if isinstance(tree, dict):
        return {k: dtypes_of(v) for k, v in tree.items()}
    return tree.dtype.str


def load_npz(path: str) -> dict[str, np.ndarray]:
    """A partition stored as ``.npz`` (arrays keyed by placeholder name, or ``features`` and
    ``labels``), from a local path or any fsspec URL; never unpickles."""
    if "://" in path:
        import fsspec
        with fsspec.open(path, "rb") as f:
            with np.load(f, allow_pickle=False) as npz:
                return {k: npz[k] for k in npz.files}
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}
