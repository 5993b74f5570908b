"""Training against a contract (issue 22, part 4): ``samediff.training`` trains anything that
meets ``TrainableModel`` (samediff/training/model.py). A ``Model`` built from the bytes of a
``SameDiff`` -- no SameDiff involved -- trains exactly as the SameDiff does, here and in another
process, and a failed fit restores it as it restores a SameDiff."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from samediff import SameDiff, serialize
from samediff.training import (Adam, LambdaListener, Model, TrainableModel, TrainingConfig,
                               fit)

ROOT = Path(__file__).resolve().parent.parent
RNG = np.random.default_rng(3)
X = RNG.random((24, 3), dtype=np.float32)
Y = X @ np.array([[1.0], [-2.0], [3.0]], np.float32) + 0.5


def regression() -> SameDiff:
    sd = SameDiff.create()
    x, y = sd.placeholder("x", "float", -1, 3), sd.placeholder("y", "float", -1, 1)
    w = sd.var("w", np.zeros((3, 1), np.float32))
    b = sd.var("b", np.zeros((1,), np.float32))
    ((x.mmul(w) + b - y).square().mean(name="mse")).mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=Adam(0.05), feature_mapping=["x"],
                                          label_mapping=["y"]))
    return sd


def trained(model: TrainableModel) -> tuple:
    """Parameters, updater-state arrays and counters, bit for bit."""
    state = model.updater_state
    params = {n: model.read_value(n).tobytes() for n in model.trainable_names()}
    arrays = {p: {s: a.tobytes() for s, a in d.items()} for p, d in state.arrays.items()}
    return params, arrays, (state.iteration, state.epoch, state.batch)


def test_both_models_meet_every_member_of_the_contract():
    members = [n for n in vars(TrainableModel) if not n.startswith("_")]
    assert {"graph", "read_value", "write_value", "snapshot", "cached_train_step"} <= set(members)
    sd = regression()
    model = Model(*serialize.from_bytes(serialize.to_bytes(sd)))
    for obj in (sd, model):
        missing = [n for n in members if not hasattr(obj, n)]
        assert not missing, f"{type(obj).__name__} lacks {missing}"


def test_a_model_from_bytes_trains_exactly_like_the_samediff():
    sd = regression()
    sd.fit((X, Y), epochs=1, batch_size=8, verbose=0)  # state to resume from: Adam moments
    model = Model(*serialize.from_bytes(serialize.to_bytes(sd)))
    assert not isinstance(model, SameDiff) and trained(model) == trained(sd)
    want = sd.fit((X, Y), epochs=2, batch_size=8, validation=(X, Y), verbose=0)
    got = fit(model, (X, Y), epochs=2, batch_size=8, validation=(X, Y), verbose=0)
    assert list(got.iteration_losses) == list(want.iteration_losses)
    assert [(r.loss, r.val_loss) for r in got.epochs] == [(r.loss, r.val_loss) for r in want.epochs]
    assert trained(model) == trained(sd)
    assert trained(model)[2] == (9, 3, 0)


def test_a_failed_fit_restores_a_model_through_its_snapshot():
    model = Model(*serialize.from_bytes(serialize.to_bytes(regression())))
    fit(model, (X, Y), epochs=1, batch_size=8, verbose=0)
    before, key, step = trained(model), model.graph.key(), model._step

    def meddle(trainer, *_):  # a listener changes the model, then fails
        trainer.model.set_loss_variables()
        raise RuntimeError("listener failed")

    with pytest.raises(RuntimeError, match="listener failed"):  # before any step
        fit(model, (X, Y), epochs=1, batch_size=8, verbose=0,
            listeners=[LambdaListener(on_epoch_start=meddle)])
    assert trained(model) == before and model.loss_variables == ["mse"]
    assert model.graph.key() == key and model._step is step
    with pytest.raises(RuntimeError, match="listener failed"):  # after one step: it stays
        fit(model, (X, Y), epochs=1, batch_size=8, verbose=0,
            listeners=[LambdaListener(on_iteration_end=meddle)])
    assert trained(model)[2] == (4, 1, 1) and model.loss_variables == ["mse"]
    assert trained(model)[0] != before[0] and model._step is step


_CHILD = """
import sys, numpy as np
from samediff import serialize
from samediff.training import Model, fit
data = sys.stdin.buffer.read()
x, y = np.load(sys.argv[1]), np.load(sys.argv[2])
history = fit(Model(*serialize.from_bytes(data)), (x, y), epochs=2, batch_size=8, seed=5,
              verbose=0)
print(repr([float(v) for v in history.iteration_losses]))
"""


def test_another_process_fits_the_bytes_to_the_same_loss_history(tmp_path):
    sd = regression()
    data = serialize.to_bytes(sd)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", Y)
    env = {**os.environ, "ND4PY_EXECUTOR": "interpreter",  # as this suite runs (conftest)
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "x.npy"),
                           str(tmp_path / "y.npy")], input=data, env=env, cwd=ROOT,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    want = sd.fit((X, Y), epochs=2, batch_size=8, seed=5, verbose=0)  # shuffled alike
    assert eval(done.stdout.decode()) == [float(v) for v in want.iteration_losses]
