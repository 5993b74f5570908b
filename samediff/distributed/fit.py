"""``fit_distributed``: data-parallel training of one SameDiff on the workers of a Dask client.

The run is a sequence of *rounds*, each a small Dask graph (DL4J's
``ParameterAveragingTrainingMaster`` as tasks):

1. the client writes the parameters and updater state (``.npz`` bytes, ``payload.py``); up to
   ``EMBED_BYTES`` they travel inside the round's tasks, beyond that they are scattered to
   every worker (``broadcast=True``). The model itself (``to_bytes``: graph JSON + arrays, no
   pickle) was scattered to every worker once for the run;
2. one task per partition (``tasks.train_partition``) runs ``averaging_frequency`` steps of
   ``samediff.training.fit`` on that partition's batches — the batches, in the order, that a
   local ``fit`` of the partition with the same seed would take — and returns parameters,
   updater state, loss and timings;
3. pairwise ``tasks.merge`` tasks sum the results (a tree reduction), the client fetches the
   sum, averages it (parameters *and* updater state) and loads it into ``sd``.

``mode="gradients"`` runs every step as: one ``tasks.partition_gradients`` task per partition
(the gradient plan of the partition's next batch), the tree reduction, and one
``tasks.apply_gradients`` task (the update plan on the averaged gradients); the steps of a
round are chained as futures (the client does not wait between steps) and the client fetches
the state once per round.

**Lost workers.** Every task is a pure function of its inputs (payloads, the partition's data,
counters), and the data are futures with lineage (``data.py``), so Dask recomputes whatever a
lost worker held or was running — in averaging mode that partition's round, in gradient mode
the step's gradient and merge tasks (and any earlier step of the round whose result died with
the worker) — and the result is the same bits. A task that raises is retried ``retries``
times. Nothing ever waits without a bound: a round not done after ``round_timeout`` seconds
raises ``DistributedTrainingError`` naming the partitions still running. The scheduler's
transition log tells how many times each task started: ``History.rounds[i].retries`` and the
``samediff.distributed`` logger name the partitions that ran more than once.

**Random draws** (dropout masks) come from a stream per task, ``random_state.stream`` seeded
by (run ``seed``, epoch, first batch of the round or step, partition) (``tasks.task_stream``),
never from a worker's global stream — whose state depends on which tasks that process ran
before, and which is seeded from the OS on a fresh worker. So a recomputed task draws exactly
what the lost one drew, and a run with dropout is the same bits run to run for the same seed,
whatever the workers and however many were lost; a resumed run draws what the uninterrupted
one did (the stream is named by the round's position in the run, not by a counter of this call).

**Same numbers as local.** With one partition and ``averaging_frequency=1`` (or
``mode="gradients"``), training equals ``sd.fit`` bit for bit: same batches, same step code,
same updater state evolution, same iteration counter for schedules — for a model whose training
draws no random numbers. With dropout it equals ``sd.fit`` in all but the masks: local ``fit``
draws them from the global stream (``set_seed``), which a task cannot share (continuing it
would chain every task to the one before and break recomputation from lineage), so the two
runs are equally distributed but not the same bits. Tasks run plans with the client's executor
(``compiled`` or ``interpreter``). With P partitions, each step's learning
rate follows the iteration counter, which advances by one per local step (as on each DL4J
worker): a schedule sized for a local run of N examples spans P times as many epochs here.
"""
from __future__ import annotations

import logging
import os
import sys
import time
import uuid
from concurrent.futures import CancelledError
from typing import Any, Mapping, Sequence


from .. import compiler, serialize
from ..errors import TrainingError
from ..random_state import get_seed
from ..training.data import Batches, FeedMapping
from ..training.history import EpochRecord
from ..training.listeners import as_listener
from ..training.trainer import (ON_NONFINITE, EpochProgress, epoch_summary, evaluate_loss,
                                evaluation_lists, train_step_for)
from . import tasks
from .data import Partitions, Placeholders, partition
from .errors import DistributedTrainingError
from .history import DistributedHistory, RoundRecord
from .payload import encode_model, encode_state

log = logging.getLogger("samediff.distributed")

MODES = ("average", "gradients")

#: training states up to this size travel inside the round's tasks; larger ones are scattered
EMBED_BYTES = 1 << 20


def _client(client: Any) -> Any:
    try:
        import distributed
    except ImportError:
        raise ImportError("fit_distributed needs Dask distributed: pip install "
                          "'nd4py[distributed]' (or 'dask[distributed]')") from None
    if client is not None:
        return client
    try:
        return distributed.get_client()
    except ValueError:
        raise DistributedTrainingError(
            "fit_distributed: no Dask client; pass client=Client('tcp://scheduler:8786') or "
            "Client(LocalCluster()), or create one first (it becomes the default)") from None


def _check(epochs: Any, batch_size: Any, freq: Any, mode: str, on_nonfinite: str,
           checkpoint_every: Any, checkpoint_path: Any, resume: bool) -> None:
    for name, value, low in (("epochs", epochs, 0), ("batch_size", batch_size, 1),
                             ("averaging_frequency", freq, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise TrainingError(f"fit_distributed: {name} must be a whole number >= {low}, got "
                                f"{value!r}")
    if mode not in MODES:
        raise TrainingError(f"fit_distributed: mode must be one of {list(MODES)}, got {mode!r} "
                            f"('average': parameter averaging every averaging_frequency steps, "
                            f"'gradients': every step's gradients averaged)")
    if on_nonfinite not in ON_NONFINITE:
        raise TrainingError(f"fit_distributed: on_nonfinite must be one of "
                            f"{list(ON_NONFINITE)}, got {on_nonfinite!r}")
    if resume and not checkpoint_path:
        raise TrainingError("fit_distributed: resume=True needs checkpoint_path= (where the "
                            "interrupted run wrote its checkpoints)")
    if checkpoint_every is not None and (not isinstance(checkpoint_every, int)
                                         or checkpoint_every < 1 or not checkpoint_path):
        raise TrainingError("fit_distributed: checkpoint_every must be a whole number of rounds "
                            ">= 1, with checkpoint_path= a local path or an fsspec URL")


class _ClientTrainer:
    """What listeners see (``trainer.model``/``sd``, ``state``, ``history``, ``stop``), as in
    local ``fit``; ``on_iteration_end`` is called once per round, with the round's loss."""

    def __init__(self, sd: Any, history: DistributedHistory, listeners: Sequence[Any]) -> None:
        self.model = self.sd = sd
        self.config = sd.training_config
        self.state = sd.updater_state
        self.history = history
        self.listeners = [as_listener(x) for x in listeners]
        self.stop = False


def fit_distributed(sd: Any, data: Any, client: Any = None, *, epochs: int = 1,
                    batch_size: int = 32, averaging_frequency: int = 5, mode: str = "average",
                    shuffle: bool = True, partitions: int | None = None,
                    validation: Any = None, evaluations: Mapping[str, Any] | None = None,
                    label: str | None = None, checkpoint_every: int | None = None,
                    checkpoint_path: str | os.PathLike | None = None, resume: bool = False,
                    listeners: Sequence[Any] = (), verbose: int | None = None,
                    seed: int | None = None, on_nonfinite: str = "raise", retries: int = 2,
                    round_timeout: float = 600.0) -> DistributedHistory:
    """Train ``sd`` (a SameDiff with a ``TrainingConfig``) on the workers of the Dask
    ``client`` (default: the current client); returns a ``DistributedHistory``. See the module
    docstring for how a round runs and how lost workers are handled.

    * ``data``: ``(features, labels)`` numpy or dask arrays, a dict ``{placeholder: array}``,
      or a list of ``.npz`` paths/URLs (one partition each; ``data.py``). numpy arrays are cut
      into ``partitions`` parts (default: one per worker); dask arrays' blocks along axis 0
      are the partitions (``partitions=`` rechunks them). Dask DataFrame/Series pieces,
      ``(ddf[feature_cols], ddf[label_cols])`` or ``{placeholder: ddf[cols]}``: the frame's
      partitions are the partitions, converted on the workers to the placeholders' dtypes;
    * ``epochs``: epochs to train from ``sd``'s epoch counter (a resumed run stops at the
      same epoch as the run it resumes); ``batch_size``: per partition and step;
    * ``averaging_frequency``: local steps per round; in ``mode="gradients"`` the steps whose
      state the client fetches at once (every step's gradients are averaged);
    * ``validation`` / ``evaluations`` / ``label``: as ``fit``'s, run on the client after
      each epoch;
    * ``checkpoint_every`` rounds, ``sd`` is saved (updater state included) to
      ``checkpoint_path``: a local path (atomic: temporary + rename) or an fsspec URL
      (written beside it, then moved). ``resume=True`` loads that checkpoint first, if it
      exists, and continues: the result is the same as an uninterrupted run's;
    * ``listeners``: as ``fit``'s; ``on_iteration_end`` is called once per round;
      ``verbose``: a progress bar of rounds per epoch;
    * ``seed``: the partitions' shuffling and the tasks' random streams (dropout), as in the
      module docstring (default: ``random_state.get_seed()``, or 0 when none was set);
    * ``retries``: times a task that raised is run again; ``round_timeout``: seconds a round
      may take before ``DistributedTrainingError``.

    A damaged model or state payload on a worker raises ``DistributedTrainingError`` naming
    the round, the partition and the worker, chained to the worker's ``CorruptFileError``.
    """
    client = _client(client)
    _check(epochs, batch_size, averaging_frequency, mode, on_nonfinite, checkpoint_every,
           checkpoint_path, resume)
    cfg = sd.training_config
    if cfg is None:
        raise TrainingError("fit_distributed: no training config; call sd.set_training_config("
                            "TrainingConfig(updater=..., feature_mapping=[...], "
                            "label_mapping=[...])) first")
    state = sd.updater_state
    target = state.epoch + epochs  # a partial epoch in progress counts as one, as in fit
    if resume and checkpoint_path is not None:
        _resume(sd, os.fspath(checkpoint_path))
    step = train_step_for(sd, cfg, ())  # checks the config here, before anything is shipped
    state.ensure({p: sd.read_value(p) for p in step.params}, step.slots,
                 cfg.updater.state_init())
    run = _Run(sd, client, mode, batch_size, averaging_frequency, shuffle,
               (get_seed() or 0) if seed is None else seed, on_nonfinite, retries,
               round_timeout)
    run.start(data, partitions)
    history = run.history
    trainer = _ClientTrainer(sd, history, listeners)
    verbose = (1 if sys.stderr.isatty() else 0) if verbose is None else verbose
    evs = evaluation_lists(evaluations)
    val = None if validation is None else Batches(
        validation, FeedMapping(cfg.feature_mapping, cfg.label_mapping), batch_size, False, 0,
        "fit_distributed (validation)")
    if evs and label is None:
        label = cfg.label_mapping[0] if cfg.label_mapping else None
    rounds_done = 0
    try:
        for ls in trainer.listeners:
            ls.on_fit_start(trainer)
        while state.epoch < target and not trainer.stop:
            epoch = state.epoch
            for ls in trainer.listeners:
                ls.on_epoch_start(trainer, epoch)
            n_rounds = run.rounds_per_epoch
            title = f"epoch {epoch + 1}/{target}"
            progress = EpochProgress(range(n_rounds - state.batch // averaging_frequency), title,
                                 verbose)
            first = len(history.rounds)
            while state.epoch == epoch:
                record = run.round()
                rounds_done += 1
                progress.update(record.loss)
                for ls in trainer.listeners:
                    ls.on_iteration_end(trainer, state.iteration - 1, record.loss)
                if checkpoint_every and rounds_done % checkpoint_every == 0:
                    _checkpoint(sd, os.fspath(checkpoint_path))  # type: ignore[arg-type]
                if trainer.stop:
                    break
            progress.close()
            if state.epoch == epoch:  # stopped mid-epoch
                break
            rec = _epoch_record(epoch, history.rounds[first:])
            if val is not None:
                rec.val_loss, metrics = evaluate_loss(sd, val, evs, label)
                rec.metrics.update({f"val_{k}": v for k, v in metrics.items()})
            history.epochs.append(rec)
            if verbose > 0:
                print(epoch_summary(rec, title), file=sys.stderr)
            for ls in trainer.listeners:
                ls.on_epoch_end(trainer, rec)
        for ls in trainer.listeners:
            ls.on_fit_end(trainer)
    finally:
        run.close()
    return history


def _epoch_record(epoch: int, rounds: list[RoundRecord]) -> EpochRecord:
    samples = sum(r.samples for r in rounds)
    seconds = sum(r.seconds for r in rounds)
    loss = sum(r.loss * r.samples for r in rounds) / samples if samples else float("nan")
    metrics = {"samples_per_s": samples / seconds if seconds else float("nan"),
               "retries": float(sum(sum(r.retries.values()) for r in rounds))}
    return EpochRecord(epoch, loss, None, metrics, seconds, sum(r.steps for r in rounds))


class _Run:
    """One ``fit_distributed`` call's state on the client: the scattered model, the
    partitions, and the round loop."""

    def __init__(self, sd: Any, client: Any, mode: str, batch_size: int, freq: int,
                 shuffle: bool, seed: int, on_nonfinite: str, retries: int,
                 timeout: float) -> None:
        self.sd, self.client, self.mode = sd, client, mode
        self.batch_size, self.freq, self.shuffle, self.seed = batch_size, freq, shuffle, seed
        self.on_nonfinite, self.retries, self.timeout = on_nonfinite, retries, timeout
        self.executor = compiler.get_executor()
        self.id = uuid.uuid4().hex[:10]
        self.history = DistributedHistory()
        self.count = 0  # rounds run so far (task keys)

    def start(self, data: Any, n_partitions: int | None) -> None:
        self._model_bytes, self.model_digest = encode_model(self.sd)
        # a key of its own (hash=False): scattered under its content's hash, a second run of
        # the same model reused the key while the scheduler was still releasing the first
        # run's copy, and its tasks failed with "lost dependencies" (1 run in 3)
        self.model = self.client.scatter(self._model_bytes, broadcast=True, hash=False)
        self.parts: Partitions = partition(data, self.client, n_partitions,
                                           Placeholders.of(self.sd))
        self.batches = self.parts.batches(self.batch_size)
        if not any(self.batches):
            raise TrainingError("fit_distributed: the data has no examples")
        self.rounds_per_epoch = -(-max(self.batches) // self.freq)

    def close(self) -> None:
        self.model = self._model_bytes = None
        self.parts = None  # type: ignore[assignment]

    # -- one round --------------------------------------------------------------------------
    def round(self) -> RoundRecord:
        sd, client, state = self.sd, self.client, self.sd.updater_state
        epoch, start = state.epoch, state.batch
        t0 = time.perf_counter()
        names = [p for p in sd.trainable_names()]
        blob, digest = encode_state({p: sd.read_value(p) for p in names}, state.arrays)
        t1 = time.perf_counter()
        # a small state rides in the tasks themselves (one message less per round, measured
        # ~13 ms of a ~50 ms round on a local cluster, and it can never be lost with a
        # worker); a large one is scattered to every worker once
        shared = blob if len(blob) <= EMBED_BYTES else client.scatter(blob, broadcast=True,
                                                                      hash=False)
        t2 = time.perf_counter()
        for attempt in range(self.retries + 1):
            # (a run again gets keys of its own: the scheduler may still hold the old ones)
            tag = f"{self.id}-{self.count}" + (f"-again{attempt}" if attempt else "")
            if self.mode == "average":
                final, watched, keys = self._average(shared, digest, tag, epoch, start,
                                                     state.iteration)
            else:
                final, watched, keys = self._gradients(shared, digest, tag, epoch, start,
                                                       state.iteration)
            try:
                self._wait(final, watched, epoch)
                t3 = time.perf_counter()
                result = final.result()
                break
            except CancelledError as exc:
                # Dask cancels a task it lost track of while a worker died ("already
                # forgotten"); the round's tasks are pure and seeded by their place in the run,
                # so running the round again gives the same bits
                if attempt == self.retries:
                    raise DistributedTrainingError(
                        f"fit_distributed: round {self.count} (epoch {epoch}) was cancelled "
                        f"by the scheduler {attempt + 1} time(s) (workers lost under it?): "
                        f"{exc}", round=self.count) from exc
                log.warning("fit_distributed: round %d (epoch %d) was cancelled by the "
                            "scheduler (%s); running it again", self.count, epoch, exc)
                # What was scattered has no lineage: if every copy went with the workers
                # ("lost dependencies"), a run again on the same futures is cancelled again.
                # Fresh copies (new keys) make the next try independent of the lost ones.
                self.model = self.client.scatter(self._model_bytes, broadcast=True,
                                                 hash=False)
                if shared is not blob:
                    shared = client.scatter(blob, broadcast=True, hash=False)
        if self.mode == "gradients":
            result = self._gradient_result(result, watched)
        t4 = time.perf_counter()
        if not result.get("count"):
            raise TrainingError(f"fit_distributed: epoch {epoch}, batch {start}: no partition "
                                f"had a batch left (empty data?)")
        self._load(result)
        t5 = time.perf_counter()
        retried = self._retries(keys)
        steps = min(self.freq, max(self.batches) - start)
        state.iteration = int(result["iteration"])
        state.batch = start + steps
        if state.batch >= max(self.batches):
            state.epoch, state.batch = epoch + 1, 0
        busy = [s + c + w for s, c, w in zip(result["setup"], result["compute"],
                                              result["serialize"])]
        longest = max(range(len(busy)), key=busy.__getitem__)
        timings = {"encode": t1 - t0, "scatter": t2 - t1, "wait": t3 - t2, "gather": t4 - t3,
                   "apply": t5 - t4, "worker_setup": result["setup"][longest],
                   "worker_compute": result["compute"][longest],
                   "worker_copy": result["serialize"][longest],
                   "overhead": max(0.0, (t3 - t2) - busy[longest])}
        if self.mode == "gradients":  # steps run one after another: their times add up
            timings["overhead"] = max(0.0, (t3 - t2) - sum(busy) / max(len(self.batches), 1))
        samples = int(result["samples"])
        record = RoundRecord(epoch, start // self.freq,
                             result["loss_sum"] / samples if samples else float("nan"),
                             samples, steps, time.perf_counter() - t0, retried, timings)
        self.history.rounds.append(record)
        self.history.iteration_losses.append(record.loss)
        self.count += 1
        return record

    def _submit(self, fn: Any, *args: Any, key: str, **kwargs: Any) -> Any:
        return self.client.submit(fn, *args, key=key, retries=self.retries, pure=False,
                                  **kwargs)

    def _tree(self, leaves: list, tag: str) -> Any:
        """Pairwise ``merge`` tasks down to one future."""
        level, depth = list(leaves), 0
        while len(level) > 1:
            nxt = [self._submit(tasks.merge, level[i], level[i + 1],
                                key=f"samediff-merge-{tag}-{depth}-{i // 2}")
                   for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                nxt.append(level[-1])
            level, depth = nxt, depth + 1
        return level[0]

    def _common(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "shuffle": self.shuffle, "seed": self.seed,
                "executor": self.executor}

    def _average(self, shared: Any, digest: str, tag: str, epoch: int, start: int,
                 iteration: int) -> tuple[Any, dict, list[str]]:
        leaves, watched = [], {}
        for p, part in enumerate(self.parts.futures):
            key = f"samediff-train-{tag}-p{p}"
            fut = self._submit(tasks.train_partition, self.model, self.model_digest, shared,
                               digest, part, partition=p, epoch=epoch, start=start,
                               steps=self.freq, iteration=iteration,
                               on_nonfinite=self.on_nonfinite, key=key, **self._common())
            leaves.append(fut)
            watched[key] = (p, fut)
        final = self._tree(leaves, tag)
        return final, watched, list(watched) + ([final.key] if len(leaves) > 1 else [])

    def _gradients(self, shared: Any, digest: str | None, tag: str, epoch: int, start: int,
                   iteration: int) -> tuple[Any, dict, list[str]]:
        watched: dict[str, tuple] = {}
        summaries = []
        current, current_digest = shared, digest
        keys: list[str] = []
        for j in range(min(self.freq, max(self.batches) - start)):
            index = start + j
            leaves = []
            for p, part in enumerate(self.parts.futures):
                if index >= self.batches[p]:
                    continue
                key = f"samediff-grad-{tag}-s{j}-p{p}"
                fut = self._submit(tasks.partition_gradients, self.model, self.model_digest,
                                   current, current_digest, part, partition=p, epoch=epoch,
                                   index=index, iteration=iteration + j, key=key,
                                   **self._common())
                leaves.append(fut)
                watched[key] = (p, fut)
            reduced = self._tree(leaves, f"{tag}-s{j}")
            current = self._submit(tasks.apply_gradients, self.model, self.model_digest,
                                   current, current_digest, reduced, iteration=iteration + j,
                                   epoch=epoch, executor=self.executor,
                                   on_nonfinite=self.on_nonfinite,
                                   key=f"samediff-apply-{tag}-s{j}")
            current_digest = None
            summaries.append(self._submit(tasks.step_summary, reduced,
                                          key=f"samediff-summary-{tag}-s{j}"))
            keys += [k for k in watched if k not in keys] + [current.key]
        self._summaries = summaries
        return current, watched, keys

    def _gradient_result(self, final: dict, watched: dict) -> dict:
        """The round's statistics from the steps' summaries, with the final state."""
        stats = self.client.gather(self._summaries)
        self._summaries = []
        out = {"params": final["params"], "slots": final["slots"], "count": 1,
               "iteration": final["iteration"], "samples": sum(s["samples"] for s in stats),
               "loss_sum": sum(s["loss_sum"] for s in stats),
               "setup": [sum(s["setup"][i] for s in stats if i < len(s["setup"]))
                         for i in range(max(len(s["setup"]) for s in stats))],
               "compute": [sum(s["compute"][i] for s in stats if i < len(s["compute"]))
                           for i in range(max(len(s["compute"]) for s in stats))]}
        out["serialize"] = [0.0] * len(out["setup"])
        out["dtypes"] = None
        return out

    def _wait(self, final: Any, watched: dict, epoch: int) -> None:
        """Wait for the round, at most ``timeout`` seconds; errors name round and partition."""
        from distributed import wait
        try:
            wait([final], timeout=self.timeout)
        except TimeoutError:
            running = sorted(p for p, f in watched.values() if f.status != "finished")
            raise DistributedTrainingError(
                f"fit_distributed: round {self.count} (epoch {epoch}) did not finish within "
                f"{self.timeout} s; partitions still pending: {running}. Check that the "
                f"cluster has live workers (client.scheduler_info()), or raise round_timeout",
                round=self.count, partitions=running) from None
        if final.status == "finished":
            return
        for key, (p, fut) in watched.items():
            if fut.status == "error":
                self._raise(fut, p, epoch)
        self._raise(final, None, epoch)

    def _raise(self, fut: Any, p: int | None, epoch: int) -> None:
        exc = fut.exception()
        what = f"partition {p}" if p is not None else "the reduction"
        from distributed import KilledWorker
        if isinstance(exc, KilledWorker):
            why = (f"the workers running it kept dying ({exc}); the task was given up after "
                   f"distributed.scheduler.allowed-failures attempts")
        else:
            why = f"{type(exc).__name__}: {exc}"
        raise DistributedTrainingError(
            f"fit_distributed: round {self.count} (epoch {epoch}), {what} failed: {why}",
            round=self.count, partitions=[] if p is None else [p]) from exc

    def _load(self, result: dict) -> None:
        """Average the summed result into the client's model (parameters, updater arrays)."""
        count, sd = result["count"], self.sd
        dtypes = result.get("dtypes")
        params, slots = result["params"], result["slots"]
        if dtypes is not None:
            params = tasks.average(params, count, dtypes["params"])
            slots = tasks.average(slots, count, dtypes["slots"])
        tasks.write_state(sd, params, slots)

    def _retries(self, keys: list[str]) -> dict[int, int]:
        """``{partition: extra attempts}`` from the scheduler's transition log."""
        try:
            started = self.client.run_on_scheduler(_attempts, keys)
        except Exception as exc:  # noqa: BLE001 -- a report must not fail the run
            log.debug("fit_distributed: could not read the scheduler's log: %s", exc)
            return {}
        retried: dict[int, int] = {}
        for key, n in started.items():
            if n > 1:
                p = _partition_of(key)
                if p is not None:
                    retried[p] = retried.get(p, 0) + n - 1
        if retried:
            log.warning("fit_distributed: round %d: partition(s) %s ran again (%s extra "
                        "attempt(s)): a worker was lost or a task failed; recomputed from "
                        "lineage", self.count, sorted(retried), sum(retried.values()))
        return retried


def _partition_of(key: str) -> int | None:
    tail = key.rsplit("-", 1)[-1]
    return int(tail[1:]) if tail.startswith("p") and tail[1:].isdigit() else None


def _attempts(keys: list[str], dask_scheduler: Any = None) -> dict[str, int]:
    """(On the scheduler.) How many times each key went to ``processing``."""
    wanted, out = set(keys), {k: 0 for k in keys}
    for entry in list(dask_scheduler.transition_log):
        if entry[0] in wanted and entry[2] == "processing":
            out[entry[0]] += 1
    return out


# -- checkpoints ------------------------------------------------------------------------------

def _checkpoint(sd: Any, path: str) -> None:
    """Save ``sd`` with its updater state: atomically to a local path, or to an fsspec URL by
    writing a temporary beside it and moving it over."""
    if "://" not in path:
        serialize.save(sd, path, save_updater_state=True)
        return
    import fsspec
    fs, target = fsspec.core.url_to_fs(path)
    temporary = f"{target}.{uuid.uuid4().hex[:8]}.tmp"
    fs.pipe_file(temporary, serialize.to_bytes(sd))
    try:
        fs.mv(temporary, target)
    except BaseException:
        if fs.exists(temporary):
            fs.rm(temporary)
        raise


def _resume(sd: Any, path: str) -> None:
    """Load the checkpoint at ``path`` (if any) into ``sd``: values, updater state, counters."""
    if "://" in path:
        import fsspec
        fs, target = fsspec.core.url_to_fs(path)
        if not fs.exists(target):
            log.info("fit_distributed: no checkpoint at %s; starting from sd", path)
            return
        saved = serialize.from_bytes(fs.cat_file(target), path)
    elif not os.path.exists(path):
        log.info("fit_distributed: no checkpoint at %s; starting from sd", path)
        return
    else:
        saved = serialize.load(path)
    for name, info in saved.graph.vars.items():
        if info.value is not None and name in sd.graph.vars and \
                sd.graph.vars[name].value is not None:
            if sd.read_value(name).shape != info.value.shape:
                raise TrainingError(f"fit_distributed: the checkpoint {path} does not match the "
                                    f"model: {name!r} has shape {info.value.shape} there, "
                                    f"{sd.read_value(name).shape} here")
            sd.write_value(name, info.value)
    state, loaded = sd.updater_state, saved.updater_state
    state.iteration, state.epoch, state.batch = loaded.iteration, loaded.epoch, loaded.batch
    state.arrays.clear()
    state.arrays.update(loaded.arrays)
