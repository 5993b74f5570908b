"""``fit`` and ``evaluate``: the training loop around the compiled ``TrainStep``.

>>> import numpy as np
>>> from samediff import SameDiff
>>> from samediff.training import TrainingConfig
>>> from samediff.training.updaters import Sgd
>>> sd = SameDiff.create()
>>> x, y = sd.placeholder("x", "float", -1, 3), sd.placeholder("y", "float", -1, 1)
>>> w = sd.var("w", np.zeros((3, 1), np.float32))
>>> ((x.mmul(w) - y).square().mean()).mark_as_loss()
SDVariable(name='mean', type=ARRAY, shape=(), dtype=FLOAT)
>>> sd.set_training_config(TrainingConfig(updater=Sgd(0.1), feature_mapping=["x"],
...                                       label_mapping=["y"]))
>>> X = np.random.default_rng(0).random((64, 3), dtype=np.float32)
>>> history = sd.fit((X, X @ np.array([[1.0], [2.0], [3.0]], np.float32)), epochs=30,
...                  batch_size=16, verbose=0)
>>> history.losses[-1] < 0.01 * history.losses[0]
True

Two rules make failures safe (tested in tests/test_training_failures.py):

* **a non-finite step changes nothing**: when a batch's loss or any gradient is NaN/inf the
  update is not run (``step.py``), so parameters, updater state and the iteration counter stay
  as they were. ``on_nonfinite="raise"`` (default) then raises ``NonFiniteError`` naming the
  epoch and batch; ``"skip"`` drops the batch, counts it in the epoch's ``metrics["skipped"]``
  and goes on;
* **a failed fit leaves the graph as it was** (``rollback.py``): whatever the error, the graph's
  structure comes back exactly; updater state too unless some steps completed (then their
  parameters and updater state stay, as after an interruption).
"""
from __future__ import annotations

import sys
import time
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import TrainingError
from ..random_state import get_seed
from .data import Batches, FeedMapping
from .history import EpochRecord, History
from .config import TrainingConfig
from .listeners import as_listener
from .model import TrainableModel
from .state import UpdaterState
from .step import TrainStep

#: what ``fit`` does with a batch whose loss or gradients are not finite
ON_NONFINITE = ("raise", "skip")


class NonFiniteError(TrainingError):
    """A batch's loss or gradients were NaN/inf (``fit(on_nonfinite="raise")``). The step was
    not applied; ``epoch``, ``batch`` (0-based, within the epoch), ``iteration`` and ``loss``
    say where."""

    def __init__(self, message: str, epoch: int, batch: int, iteration: int, loss: float) -> None:
        super().__init__(message)
        self.epoch, self.batch, self.iteration, self.loss = epoch, batch, iteration, loss


def _config(model: TrainableModel) -> TrainingConfig:
    cfg = model.training_config
    if cfg is None:
        raise TrainingError("fit: no training config; call sd.set_training_config("
                            "TrainingConfig(updater=..., feature_mapping=[...], "
                            "label_mapping=[...])) first")
    return cfg


def evaluation_lists(spec: Mapping[str, Any] | None) -> dict[str, list]:
    """``{output name: evaluation or [evaluations]}`` -> lists."""
    out: dict[str, list] = {}
    for name, evs in (spec or {}).items():
        out[str(name)] = list(evs) if isinstance(evs, (list, tuple)) else [evs]
    return out


class Trainer:
    """Runs epochs of ``TrainStep`` over batches, with validation, metrics and listeners.
    ``model`` is anything that meets the ``TrainableModel`` contract (``model.py``); listeners
    see it as ``trainer.model`` (and ``trainer.sd``, its former name)."""

    def __init__(self, model: TrainableModel, listeners: Sequence[Any] = (),
                 verbose: int | None = None, on_nonfinite: str = "raise") -> None:
        if on_nonfinite not in ON_NONFINITE:
            raise TrainingError(f"fit: on_nonfinite must be one of {list(ON_NONFINITE)}, got "
                                f"{on_nonfinite!r} ('raise' stops at a batch whose loss or "
                                f"gradients are NaN/inf, 'skip' leaves it out and goes on)")
        self.model = self.sd = model
        self.config = _config(model)
        self.state: UpdaterState = model.updater_state
        self.listeners = [as_listener(x) for x in listeners]
        self.verbose = (1 if sys.stderr.isatty() else 0) if verbose is None else verbose
        self.on_nonfinite = on_nonfinite
        self.history = History()
        self.stop = False
        self.steps_applied = 0  # in this fit; a failure keeps their effect (see rollback.py)

    def fit(self, data: Any, epochs: int, batch_size: int | None, shuffle: bool,
            validation: Any, evaluations: Mapping[str, Any] | None, label: str | None,
            seed: int | None) -> History:
        """Train; on any exception the model's structure is restored (``rollback.py``)."""
        snapshot = self.model.snapshot()
        try:
            return self._fit(data, epochs, batch_size, shuffle, validation, evaluations, label,
                             seed)
        except BaseException:
            snapshot.restore(keep_training_progress=self.steps_applied > 0)
            raise

    def _fit(self, data: Any, epochs: int, batch_size: int | None, shuffle: bool,
             validation: Any, evaluations: Mapping[str, Any] | None, label: str | None,
             seed: int | None) -> History:
        cfg = self.config
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
            raise TrainingError(f"fit: epochs must be a whole number >= 0, got {epochs!r}")
        evs = evaluation_lists(evaluations)
        label = self._label_name(label, evs)
        mapping = FeedMapping(cfg.feature_mapping, cfg.label_mapping)
        seed = (get_seed() or 0) if seed is None else seed
        batches = Batches(data, mapping, batch_size, shuffle, seed, "fit")
        val = None if validation is None else Batches(validation, mapping, batch_size, False,
                                                      seed, "fit (validation)")
        step = train_step_for(self.model, cfg, tuple(evs))
        self.state.ensure({p: self.model.read_value(p) for p in step.params}, step.slots,
                          cfg.updater.state_init())
        for ls in self.listeners:
            ls.on_fit_start(self)
        for i in range(epochs):
            record = self._epoch(step, batches, evs, label, f"epoch {i + 1}/{epochs}")
            if val is not None:
                record.val_loss, metrics = evaluate_loss(self.model, val, evs, label)
                record.metrics.update({f"val_{k}": v for k, v in metrics.items()})
            self.history.epochs.append(record)
            if self.verbose > 0:
                print(epoch_summary(record, f"epoch {i + 1}/{epochs}"), file=sys.stderr)
            for ls in self.listeners:
                ls.on_epoch_end(self, record)
            if self.stop:
                break
        for ls in self.listeners:
            ls.on_fit_end(self)
        return self.history

    def _label_name(self, label: str | None, evs: dict) -> str | None:
        if not evs:
            return None
        if label is None:
            if not self.config.label_mapping:
                raise TrainingError("fit: evaluations need labels; set label_mapping in the "
                                    "training config or pass label=<placeholder name>")
            label = self.config.label_mapping[0]
        return label

    def _epoch(self, step: TrainStep, batches: Batches, evs: dict, label: str | None,
               title: str) -> EpochRecord:
        state = self.state
        epoch = state.epoch
        for ls in self.listeners:
            ls.on_epoch_start(self, epoch)
        for ev in (e for group in evs.values() for e in group):
            ev.reset()
        t0 = time.perf_counter()
        total, count, iterations, penalty, skipped = 0.0, 0, 0, 0.0, 0
        progress = EpochProgress(batches, title, self.verbose)
        skip = state.batch  # resumed from a mid-epoch checkpoint: those batches are done
        # evaluations read a batch's labels; nothing else keeps a batch past its step, so its
        # gather buffers can be reused. Without listeners or evaluations no user code runs in
        # the loop: numpy's error state is set once for the epoch (what step.run sets per step)
        quiet = not self.listeners and not evs
        with _quiet(quiet) as outer:
            for feeds in batches.epoch(epoch, reuse=not evs):
                if skip:
                    skip -= 1
                    continue
                loss, extra = step.run(feeds, state, outer_errstate=outer)
                if not step.last_applied:  # nothing changed; raise or leave the batch out
                    self._nonfinite(loss, epoch, state)
                    state.batch += 1  # done with (a resumed epoch must not see it again)
                    skipped += 1
                    progress.update(loss)
                    continue
                self.steps_applied += 1
                state.batch += 1
                n = _batch_size(feeds)
                total, count, iterations = total + loss * n, count + n, iterations + 1
                if step.last_penalty is not None:
                    penalty += step.last_penalty * n
                for name, group in evs.items():
                    for ev in group:
                        ev.eval(feeds[label], extra[name])
                self.history.iteration_losses.append(loss)
                progress.update(loss)
                for ls in self.listeners:
                    ls.on_iteration_end(self, state.iteration - 1, loss)
                if self.stop:
                    break
        progress.close()
        counted = {"skipped": skipped} if self.on_nonfinite == "skip" else {}
        if self.stop and state.batch:  # stopped mid-epoch: the epoch is not over
            return EpochRecord(epoch, total / max(count, 1), None, counted,
                               time.perf_counter() - t0, iterations)
        if count == 0 and not state.batch:
            raise TrainingError(f"fit: epoch {epoch} had no batches (empty data)")
        state.epoch += 1
        state.batch = 0
        metrics = {k: v for group in evs.values() for ev in group for k, v in ev.metrics().items()}
        if step.penalty_name is not None and count:
            metrics["regularization"] = penalty / count
        metrics.update(counted)
        return EpochRecord(epoch, total / count if count else float("nan"), None, metrics,
                           time.perf_counter() - t0,
                           iterations)

    def _nonfinite(self, loss: float, epoch: int, state: UpdaterState) -> None:
        """A refused step: raise ``NonFiniteError`` unless batches like it are skipped."""
        if self.on_nonfinite == "skip":
            return
        what = (f"the loss was {loss}" if not np.isfinite(loss)
                else f"a gradient was not finite (the loss was {loss:.6g})")
        raise NonFiniteError(
            f"fit: epoch {epoch}, batch {state.batch} (0-based; iteration {state.iteration}): "
            f"{what}. The step was not applied: parameters and updater state are unchanged. "
            f"Check the data for NaN/inf, lower the learning rate, or pass "
            f"fit(..., on_nonfinite='skip') to leave such batches out",
            epoch, state.batch, state.iteration, loss)


def fit(model: TrainableModel, data: Any = None, epochs: int = 1, *,
        batch_size: int | None = 32, shuffle: bool = True, validation: Any = None,
        evaluations: Mapping[str, Any] | None = None, label: str | None = None,
        listeners: Sequence[Any] = (), verbose: int | None = None, seed: int | None = None,
        on_nonfinite: str = "raise") -> History:
    """Train ``model`` (any ``TrainableModel``: a ``SameDiff``, or a ``Model`` built from the
    bytes of one) with its ``TrainingConfig``; returns a ``History``. The arguments are
    ``SameDiff.fit``'s, which calls this.

    >>> import numpy as np
    >>> from samediff import SameDiff, serialize
    >>> from samediff.training import Model, Sgd, TrainingConfig
    >>> sd = SameDiff.create()
    >>> x, y = sd.placeholder("x", "float", -1, 1), sd.placeholder("y", "float", -1, 1)
    >>> w = sd.var("w", np.zeros((1, 1), np.float32))
    >>> _ = (x.mmul(w) - y).square().mean().mark_as_loss()
    >>> sd.set_training_config(TrainingConfig(updater=Sgd(0.1), feature_mapping=["x"],
    ...                                       label_mapping=["y"]))
    >>> model = Model(*serialize.from_bytes(serialize.to_bytes(sd)))  # e.g. in another process
    >>> X = np.ones((8, 1), np.float32)
    >>> h1, h2 = fit(model, (X, 2 * X), epochs=3, verbose=0), sd.fit((X, 2 * X), epochs=3, verbose=0)
    >>> list(h1.losses) == list(h2.losses), model.read_value("w").item() == w.eval().item()
    (True, True)
    """
    return Trainer(model, listeners, verbose, on_nonfinite).fit(
        data, epochs, batch_size, shuffle, validation, evaluations, label, seed)


def train_step_for(model: TrainableModel, cfg: TrainingConfig,
                   extra: tuple[str, ...]) -> TrainStep:
    """One ``TrainStep`` per graph version, config and extra outputs (building it builds the
    step graph and compiles kernels; later fits reuse it). The model keeps it."""
    key = (cfg.to_json(), extra, tuple(model.loss_variables), tuple(model.trainable_names()))
    return model.cached_train_step(key, lambda: TrainStep(model, cfg, extra))


def evaluate_loss(model: TrainableModel, batches: Batches, evs: dict,
                  label: str | None) -> tuple[float, dict]:
    """Mean loss (summed loss variables, example-weighted) and metrics over ``batches``."""
    for ev in (e for group in evs.values() for e in group):
        ev.reset()
    losses = model.loss_variables
    total, count = 0.0, 0
    for feeds in batches.epoch(0):
        outs = model.output(_needed_feeds(model, feeds, losses + list(evs)), *losses, *evs)
        value = sum(float(np.sum(np.asarray(outs[n]))) for n in losses)
        n = _batch_size(feeds)
        total, count = total + value * n, count + n
        for name, group in evs.items():
            for ev in group:
                ev.eval(feeds[label], np.asarray(outs[name]))
    metrics = {k: v for group in evs.values() for ev in group for k, v in ev.metrics().items()}
    return (total / count if count else float("nan")), metrics


class _quiet:
    """``with _quiet(on) as outer``: when ``on``, numpy's floating-point errors are ignored
    inside (as ``TrainStep.run`` does around each step) and ``outer`` is the error state
    outside, which the step restores around what is not its plan (converting a feed); else
    ``outer`` is None and nothing changes."""

    def __init__(self, on: bool) -> None:
        self.state = np.errstate(all="ignore") if on else None

    def __enter__(self) -> dict | None:
        if self.state is None:
            return None
        outer = np.geterr()
        self.state.__enter__()
        return outer

    def __exit__(self, *exc: Any) -> None:
        if self.state is not None:
            self.state.__exit__(*exc)


def _batch_size(feeds: dict) -> int:
    """Examples in a batch (losses are averaged over examples); 1 for a batch of no arrays."""
    first = next(iter(feeds.values()), None)
    return len(first) if first is not None and np.ndim(first) else 1


def _needed_feeds(model: TrainableModel, feeds: dict, outputs: list[str]) -> dict:
    """Only the placeholders ``outputs`` depend on (labels are not needed to predict)."""
    used = {i for n in model.graph.needed(outputs) for i in n.inputs}
    return {k: v for k, v in feeds.items() if k in used or k in outputs}


def evaluate(model: TrainableModel, data: Any, output: str, evaluations: Iterable[Any],
             label: str | None = None, batch_size: int | None = 256) -> list:
    """Run ``output`` over ``data`` and feed every evaluation ``(labels, predictions)``."""
    cfg = model.training_config
    mapping = FeedMapping(cfg.feature_mapping if cfg else [], cfg.label_mapping if cfg else [])
    if label is None:
        if cfg is None or not cfg.label_mapping:
            raise TrainingError("evaluate: which placeholder holds the labels? pass label=... or "
                                "set label_mapping in the training config")
        label = cfg.label_mapping[0]
        source = f"the training config's label_mapping ({cfg.label_mapping})"
    else:
        source = f"label={label!r}"
    evs = list(evaluations)
    for ev in evs:
        ev.reset()
    for feeds in Batches(data, mapping, batch_size, False, 0, "evaluate").epoch(0):
        if label not in feeds:
            raise TrainingError(f"evaluate: label placeholder {label!r} is missing from the "
                                f"batch (got {sorted(feeds)}); it is expected because of "
                                f"{source}. Pass batches with labels ((features, labels) "
                                f"pairs, or dicts with a {label!r} key), or name another "
                                f"placeholder with label=")
        pred = np.asarray(model.output(_needed_feeds(model, feeds, [output]), output)[output])
        for ev in evs:
            ev.eval(feeds[label], pred)
    return evs


def epoch_summary(record: EpochRecord, title: str) -> str:
    """The one-line summary ``fit(verbose=1)`` prints after an epoch (``fit_distributed``
    too): ``title - loss ... - val_loss ... - metrics - seconds``."""
    parts = [title, f"loss {record.loss:.4g}"]
    if record.val_loss is not None:
        parts.append(f"val_loss {record.val_loss:.4g}")
    parts += [f"{k} {v:.4g}" for k, v in record.metrics.items()]
    parts.append(f"{record.seconds:.2f} s")
    return " - ".join(parts)


class EpochProgress:
    """An epoch's progress display, shared by ``fit`` and ``fit_distributed``: tqdm on a
    terminal (if installed), a one-line counter otherwise; silent when quiet."""

    def __init__(self, batches: Batches, title: str, verbose: int) -> None:
        self.bar, self.verbose, self.n, self.title = None, verbose, 0, title
        try:
            total = len(batches)
        except TypeError:
            total = None
        self.total = total
        if verbose > 0:
            try:
                from tqdm.auto import tqdm
                self.bar = tqdm(total=total, desc=title, leave=False, file=sys.stderr)
            except ImportError:
                pass

    def update(self, loss: float) -> None:
        self.n += 1
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.4g}", refresh=False)
        elif self.verbose > 0:
            total = f"/{self.total}" if self.total else ""
            sys.stderr.write(f"\r{self.title}: {self.n}{total} loss {loss:.4g}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.verbose > 0:
            sys.stderr.write("\n")
