"""Training listeners (ND4J's ``Listener``): hooks ``fit`` calls as training goes on.

A listener overrides any of ``on_fit_start``, ``on_epoch_start``, ``on_iteration_end``,
``on_epoch_end`` and ``on_fit_end``; each gets the running ``Trainer`` (``trainer.model``, also
``trainer.sd``; ``trainer.history``, ``trainer.state.iteration``...). Setting ``trainer.stop = True`` ends
training after the current iteration. A plain callable in ``listeners=`` is called as
``fn(record)`` at the end of every epoch.

>>> from samediff.training.listeners import ScoreListener, EarlyStopping
>>> listeners = [ScoreListener(every=50), EarlyStopping(monitor="loss", patience=2)]
"""
from __future__ import annotations

import math
import os
import re
from typing import Any, Callable

from ..errors import TrainingError
from ..profiler import Profile
from .history import EpochRecord


class Listener:
    """Base class: every hook does nothing."""

    def on_fit_start(self, trainer: Any) -> None: ...

    def on_epoch_start(self, trainer: Any, epoch: int) -> None: ...

    def on_iteration_end(self, trainer: Any, iteration: int, loss: float) -> None: ...

    def on_epoch_end(self, trainer: Any, record: EpochRecord) -> None: ...

    def on_fit_end(self, trainer: Any) -> None: ...


class LambdaListener(Listener):
    """Wrap plain functions as hooks: ``LambdaListener(on_epoch_end=lambda t, r: ...)``."""

    def __init__(self, on_epoch_end: Callable | None = None,
                 on_iteration_end: Callable | None = None,
                 on_epoch_start: Callable | None = None) -> None:
        self._end, self._iter, self._start = on_epoch_end, on_iteration_end, on_epoch_start

    def on_epoch_start(self, trainer: Any, epoch: int) -> None:
        if self._start:
            self._start(trainer, epoch)

    def on_iteration_end(self, trainer: Any, iteration: int, loss: float) -> None:
        if self._iter:
            self._iter(trainer, iteration, loss)

    def on_epoch_end(self, trainer: Any, record: EpochRecord) -> None:
        if self._end:
            self._end(trainer, record)


class ScoreListener(Listener):
    """Log the loss every ``every`` iterations (ND4J's ``ScoreListener``)."""

    def __init__(self, every: int = 10, log: Callable[[str], None] = print) -> None:
        if every < 1:
            raise TrainingError(f"ScoreListener: every must be >= 1, got {every}")
        self.every, self.log = every, log

    def on_iteration_end(self, trainer: Any, iteration: int, loss: float) -> None:
        if (iteration + 1) % self.every == 0:
            self.log(f"iteration {iteration + 1}, epoch {trainer.state.epoch}: loss {loss:.6g}")


class EarlyStopping(Listener):
    """Stop when ``monitor`` (``"loss"``, ``"val_loss"`` or a metric such as
    ``"val_accuracy"``) has not improved by ``min_delta`` for ``patience`` epochs."""

    def __init__(self, monitor: str = "val_loss", patience: int = 3, min_delta: float = 0.0,
                 mode: str = "auto") -> None:
        if patience < 0:
            raise TrainingError(f"EarlyStopping: patience must be >= 0, got {patience}")
        if mode == "auto":
            mode = "min" if monitor.endswith("loss") else "max"
        if mode not in ("min", "max"):
            raise TrainingError(f"EarlyStopping: mode must be 'min', 'max' or 'auto', got {mode!r}")
        self.monitor, self.patience, self.min_delta, self.mode = monitor, patience, min_delta, mode
        self.best: float | None = None
        self.best_epoch: int | None = None
        self.waited = 0

    def on_fit_start(self, trainer: Any) -> None:
        self.best, self.best_epoch, self.waited = None, None, 0  # each fit starts afresh

    def _value(self, record: EpochRecord) -> float | None:
        if self.monitor == "loss":
            return record.loss
        if self.monitor == "val_loss":
            return record.val_loss
        return record.metrics.get(self.monitor)

    def on_epoch_end(self, trainer: Any, record: EpochRecord) -> None:
        value = self._value(record)
        if value is None:
            raise TrainingError(f"EarlyStopping: {self.monitor!r} was not measured; available: "
                                f"loss{', val_loss' if record.val_loss is not None else ''}"
                                f"{''.join(', ' + k for k in record.metrics)}")
        better = self.best is None or (value < self.best - self.min_delta if self.mode == "min"
                                       else value > self.best + self.min_delta)
        if better and not math.isnan(value):
            self.best, self.best_epoch, self.waited = value, record.epoch, 0
        else:
            self.waited += 1
            if self.waited >= self.patience:
                trainer.stop = True


class CheckpointListener(Listener):
    """Save the model (with updater state) every N epochs and/or iterations, atomically,
    keeping the last ``keep_last`` files it wrote in ``directory``
    (``<prefix>-e<epoch>-i<iter>.sdz``; files of other runs there are left alone). The model
    saves itself (``save(path, save_updater_state=True)``, as a ``SameDiff`` does)."""

    def __init__(self, directory: str | os.PathLike, every_epochs: int | None = 1,
                 every_iterations: int | None = None, keep_last: int = 3,
                 prefix: str = "checkpoint") -> None:
        if keep_last < 1:
            raise TrainingError(f"CheckpointListener: keep_last must be >= 1, got {keep_last}")
        if not every_epochs and not every_iterations:
            raise TrainingError("CheckpointListener: give every_epochs and/or every_iterations")
        self.directory, self.prefix = os.fspath(directory), prefix
        self.every_epochs, self.every_iterations, self.keep_last = every_epochs, every_iterations, keep_last
        self.written: list[str] = []  # only files this listener wrote are ever pruned
        os.makedirs(self.directory, exist_ok=True)

    def _pattern(self) -> re.Pattern:
        return re.compile(rf"^{re.escape(self.prefix)}-e(\d+)-i(\d+)\.sdz$")

    def checkpoints(self) -> list[str]:
        """Existing checkpoint paths, oldest first."""
        found = []
        for name in os.listdir(self.directory):
            m = self._pattern().match(name)
            if m:
                found.append((int(m.group(2)), int(m.group(1)), os.path.join(self.directory, name)))
        return [p for *_, p in sorted(found)]

    def save(self, trainer: Any) -> str:
        s = trainer.state
        path = os.path.join(self.directory, f"{self.prefix}-e{s.epoch}-i{s.iteration}.sdz")
        save = getattr(trainer.model, "save", None)
        if save is None:
            raise TrainingError(f"CheckpointListener: a {type(trainer.model).__name__} cannot save "
                                f"itself (no save(path, save_updater_state)); checkpoint a "
                                f"SameDiff, or save with samediff.serialize.save(model, path)")
        save(path, save_updater_state=True)  # atomic: temp file + rename
        if path in self.written:
            self.written.remove(path)
        self.written.append(path)
        for old in self.written[:-self.keep_last]:
            if os.path.exists(old):
                os.remove(old)
        self.written = self.written[-self.keep_last:]
        return path

    def on_iteration_end(self, trainer: Any, iteration: int, loss: float) -> None:
        if self.every_iterations and (iteration + 1) % self.every_iterations == 0:
            self.save(trainer)

    def on_epoch_end(self, trainer: Any, record: EpochRecord) -> None:
        if self.every_epochs and (record.epoch + 1) % self.every_epochs == 0:
            self.save(trainer)


class ProfilingListener(Listener):
    """Profile ``fit``'s iterations into a Chrome trace (ND4J's ``ProfilingListener``): skip
    the first ``warmup`` iterations (compiles, first-touch allocations), record the next
    ``steps`` (``None``: until the end of fit), write ``path`` when done. Everything that runs
    plans in the recorded window is in the trace — each training step's plan steps, and any
    validation run at an epoch's end in between. ``listener.profile.summary()`` (or
    ``nd.profile_summary(listener.profile)``) gives the per-op table afterwards.

    >>> import os, tempfile
    >>> import numpy as np
    >>> import nd4py as nd
    >>> sd = nd.SameDiff.create()
    >>> x, y = sd.placeholder("x", nd.FLOAT, -1, 3), sd.placeholder("y", nd.FLOAT, -1, 1)
    >>> w = sd.var("w", nd.FLOAT, 3, 1)
    >>> loss = sd.loss.mean_squared_error("loss", y, x.mmul(w))
    >>> sd.set_loss_variables("loss")
    >>> sd.set_training_config(nd.TrainingConfig(updater=nd.Sgd(0.1), feature_mapping=["x"],
    ...                                          label_mapping=["y"]))
    >>> path = os.path.join(tempfile.mkdtemp(), "fit.json")
    >>> listener = ProfilingListener(path, warmup=1, steps=2)
    >>> _ = sd.fit((np.ones((8, 3), np.float32), np.ones((8, 1), np.float32)), epochs=4,
    ...            batch_size=8, listeners=[listener], verbose=0)
    >>> os.path.exists(path), listener.iterations_recorded
    (True, 2)
    """

    def __init__(self, path: str | os.PathLike, warmup: int = 0, steps: int | None = None) -> None:
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise TrainingError(f"ProfilingListener: warmup must be an integer >= 0, got "
                                f"{warmup!r}")
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)
                                  or steps < 1):
            raise TrainingError(f"ProfilingListener: steps must be None or an integer >= 1, "
                                f"got {steps!r}")
        self.path, self.warmup, self.steps = os.fspath(path), warmup, steps
        self.profile: Profile | None = None
        self.iterations_recorded = 0
        self._seen, self._recording, self._written = 0, False, False

    def on_fit_start(self, trainer: Any) -> None:
        self._finish()  # a previous fit's profile, if one was left open
        self.profile, self.iterations_recorded, self._seen = Profile(self.path), 0, 0
        self._written = False
        if self.warmup == 0:
            self._start()

    def _start(self) -> None:
        self.profile.start()
        self._recording = True

    def on_iteration_end(self, trainer: Any, iteration: int, loss: float) -> None:
        if self.profile is None or self._written:
            return
        self._seen += 1
        if self._recording:
            self.iterations_recorded += 1
            if self.steps is not None and self.iterations_recorded == self.steps:
                self._finish()
        elif self._seen == self.warmup:
            self._start()  # the next iteration is the first recorded

    def on_fit_end(self, trainer: Any) -> None:
        self._finish()

    def _finish(self) -> None:
        """Stop recording and write the file (an empty trace if fit ended in the warm-up)."""
        if self.profile is None or self._written:
            return
        self.profile.stop()
        self._recording = False
        self.profile.write(self.path)
        self._written = True  # fit's end does not write it again


def as_listener(obj: Any) -> Listener:
    if isinstance(obj, Listener):
        return obj
    if callable(obj):
        return LambdaListener(on_epoch_end=lambda trainer, record: obj(record))
    raise TrainingError(f"fit: listeners must be Listener objects or callables, got {obj!r}")
