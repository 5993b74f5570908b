"""fit, TrainingConfig, the compiled train step, listeners, and save/load of training state."""
from __future__ import annotations

import os

import numpy as np
import pytest

from samediff import SameDiff
from samediff.errors import TrainingError
from samediff.training import TrainingConfig
from samediff.training.listeners import (CheckpointListener, EarlyStopping, LambdaListener,
                                         ScoreListener)
from samediff.training.trainer import train_step_for
from samediff.training.updaters import Adam, Sgd

pytestmark = pytest.mark.compiled  # training runs compiled plans, as users get them

RNG = np.random.default_rng(0)
X = RNG.random((96, 3), dtype=np.float32)
TRUE_W = np.array([[1.0], [-2.0], [3.0]], np.float32)
Y = X @ TRUE_W + 0.5


def regression(updater=None, **config) -> SameDiff:
    sd = SameDiff.create()
    x, y = sd.placeholder("x", "float", -1, 3), sd.placeholder("y", "float", -1, 1)
    w = sd.var("w", np.zeros((3, 1), np.float32))
    b = sd.var("b", np.zeros((1,), np.float32))
    (x.mmul(w) + b - y).square().mean(name="mse").mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=updater or Sgd(0.2), feature_mapping=["x"],
                                          label_mapping=["y"], **config))
    return sd


def params(sd: SameDiff) -> dict[str, np.ndarray]:
    return {v.name: v.get_arr().numpy().copy() for v in sd.trainable_variables()}


def test_fit_on_arrays_converges_and_keeps_float32():
    sd = regression(Adam(0.05))
    history = sd.fit((X, Y), epochs=60, batch_size=16, verbose=0)
    assert history.losses[-1] < 1e-3 * history.losses[0]
    np.testing.assert_allclose(sd.get_variable("w").get_arr().numpy(), TRUE_W, atol=0.05)
    assert sd.get_variable("w").get_arr().dtype == np.float32
    assert [e.iterations for e in history.epochs] == [6] * 60
    assert len(history.iteration_losses) == 360
    assert sd.updater_state.iteration == 360 and sd.updater_state.epoch == 60


def test_one_sgd_step_matches_numpy_with_l1_l2():
    sd = regression(Sgd(0.1), l1=0.01, l2=0.02)
    sd.get_variable("w").set_array(np.array([[0.5], [-0.3], [0.2]], np.float32))
    history = sd.fit((X, Y), epochs=1, batch_size=96, shuffle=False, verbose=0)
    w, b = np.array([[0.5], [-0.3], [0.2]]), np.zeros(1)
    x, y = X.astype(np.float64), Y.astype(np.float64)
    r = x @ w + b - y
    penalty = 0.01 * (np.abs(w).sum() + np.abs(b).sum()) + 0.01 * (w ** 2).sum()
    gw = 2 * x.T @ r / len(x) + 0.01 * np.sign(w) + 0.02 * w
    gb = 2 * r.sum(0) / len(x) + 0.01 * np.sign(b) + 0.02 * b
    # the reported loss is the loss variables' (as for validation); the penalty is separate
    np.testing.assert_allclose(history.losses[0], np.mean(r ** 2), rtol=1e-5)
    np.testing.assert_allclose(history.epochs[0].metrics["regularization"], penalty, rtol=1e-5)
    np.testing.assert_allclose(sd.get_variable("w").get_arr().numpy(), w - 0.1 * gw, rtol=1e-5)
    np.testing.assert_allclose(sd.get_variable("b").get_arr().numpy(), b - 0.1 * gb, atol=1e-6)


def test_weight_decay_is_decoupled_and_exclusive_with_l2():
    with pytest.raises(TrainingError, match="alternatives"):
        TrainingConfig(updater=Sgd(0.1), l2=0.1, weight_decay=0.1)
    sd = regression(Sgd(0.1), weight_decay=0.5)
    w0 = np.array([[0.5], [-0.3], [0.2]], np.float32)
    sd.get_variable("w").set_array(w0)
    sd.fit((X, Y), epochs=1, batch_size=96, shuffle=False, verbose=0)
    r = X.astype(np.float64) @ w0 - Y
    gw = 2 * X.T.astype(np.float64) @ r / len(X)
    np.testing.assert_allclose(sd.get_variable("w").get_arr().numpy(),
                               w0 - 0.1 * gw - 0.1 * 0.5 * w0, rtol=1e-5)


def test_maximize_flips_the_direction():
    sd = SameDiff.create()
    w = sd.var("w", np.array([1.0, 2.0], np.float32))
    (-(w * w).sum()).mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=Sgd(0.25), minimize=False))
    sd.fit([{}], epochs=1, verbose=0)  # no placeholders: one empty batch per epoch
    np.testing.assert_allclose(sd.get_variable("w").get_arr().numpy(), [0.5, 1.0])


class Batch:
    def __init__(self, f, l):
        self.features, self.labels = f, l


class Loader:
    """DataLoader-like: re-iterable with a length."""

    def __init__(self, make):
        self.make = make

    def __iter__(self):
        return iter(self.make())

    def __len__(self):
        return 4


@pytest.mark.parametrize("kind", ["tuples", "dicts", "objects", "loader", "features_labels"])
def test_iterables_of_batches_give_the_same_training_as_arrays(kind):
    parts = [(X[i:i + 24], Y[i:i + 24]) for i in range(0, 96, 24)]
    data = {"tuples": parts,
            "dicts": [{"x": f, "y": l} for f, l in parts],
            "objects": [Batch(f, l) for f, l in parts],
            "loader": Loader(lambda: parts),
            "features_labels": [{"features": f, "labels": l} for f, l in parts]}[kind]
    a, b = regression(), regression()
    a.fit(data, epochs=3, verbose=0)
    b.fit((X, Y), epochs=3, batch_size=24, shuffle=False, verbose=0)
    for k, v in params(a).items():
        np.testing.assert_array_equal(v, params(b)[k])


def test_one_shot_generator_is_refused_for_a_second_epoch():
    sd = regression()
    gen = ((X[i:i + 32], Y[i:i + 32]) for i in range(0, 96, 32))
    with pytest.raises(TrainingError, match="one-shot"):
        sd.fit(gen, epochs=2, verbose=0)


def test_each_step_is_one_compiled_plan(monkeypatch):
    sd = regression()
    step = train_step_for(sd, sd.training_config, ())
    sd.fit((X, Y), epochs=1, batch_size=32, verbose=0)
    (plan,) = step._plans.values()
    assert plan.kind == "compiled", plan.explain()
    calls = []
    original = type(plan).execute
    monkeypatch.setattr(type(plan), "execute", lambda self, v: calls.append(1) or original(self, v))
    sd.fit((X, Y), epochs=2, batch_size=32, verbose=0)
    assert len(calls) == 6 and train_step_for(sd, sd.training_config, ()) is step


def test_fit_leaves_the_user_graph_unchanged():
    """Training builds its own step graph (autodiff is a graph transform): the user's graph,
    its summary and its saved file do not change; ND4J-style ``<name>-grad`` variables appear
    when gradients are asked of the graph itself."""
    sd = regression()
    before = (sd.summary(), sd.graph.key())
    sd.fit((X, Y), epochs=1, batch_size=32, verbose=0)
    assert (sd.summary(), sd.graph.key()) == before
    sd.calculate_gradients({"x": X[:4], "y": Y[:4]}, "w")
    assert "w-grad" in sd.variable_names()


def test_resume_from_save_equals_uninterrupted_training(tmp_path):
    straight = regression(Adam(0.01))
    straight.fit((X, Y), epochs=4, batch_size=16, verbose=0)
    first = regression(Adam(0.01))
    first.fit((X, Y), epochs=2, batch_size=16, verbose=0)
    path = tmp_path / "model.sdz"
    first.save(path)
    resumed = SameDiff.load(path)
    assert resumed.training_config == first.training_config
    assert resumed.updater_state.iteration == 12 and resumed.updater_state.epoch == 2
    resumed.fit((X, Y), epochs=2, batch_size=16, verbose=0)
    for k, v in params(straight).items():
        np.testing.assert_array_equal(params(resumed)[k], v)


def test_save_without_updater_state_restarts_the_updater(tmp_path):
    sd = regression(Adam(0.01))
    sd.fit((X, Y), epochs=1, batch_size=32, verbose=0)
    sd.save(tmp_path / "m.sdz", save_updater_state=False)
    loaded = SameDiff.load(tmp_path / "m.sdz")
    assert loaded.updater_state.arrays == {} and loaded.training_config is not None


def test_listeners(tmp_path, capsys):
    sd = regression(Sgd(0.01))
    logged, ends = [], []
    ckpt = CheckpointListener(tmp_path / "ckpt", every_epochs=1, keep_last=2)
    history = sd.fit((X, Y), epochs=5, batch_size=32, verbose=0, listeners=[
        ScoreListener(every=2, log=logged.append), ckpt, ends.append,
        LambdaListener(on_iteration_end=lambda t, i, loss: None)])
    assert len(logged) == 7 and logged[0].startswith("iteration 2")
    assert [r.epoch for r in ends] == [0, 1, 2, 3, 4] and len(history.epochs) == 5
    kept = ckpt.checkpoints()
    assert [os.path.basename(p) for p in kept] == ["checkpoint-e4-i12.sdz", "checkpoint-e5-i15.sdz"]
    again = SameDiff.load(kept[-1])
    np.testing.assert_array_equal(again.get_variable("w").get_arr().numpy(),
                                  sd.get_variable("w").get_arr().numpy())
    assert capsys.readouterr().err == ""  # verbose=0 is quiet


def test_early_stopping_stops():
    sd = regression(Sgd(0.0))  # nothing improves
    stopper = EarlyStopping(monitor="loss", patience=2)
    # unshuffled: every epoch's mean loss is summed in the same order, so it is exactly equal
    history = sd.fit((X, Y), epochs=50, batch_size=32, verbose=0, listeners=[stopper],
                     shuffle=False)
    assert len(history.epochs) == 3 and stopper.best_epoch == 0
    with pytest.raises(TrainingError, match="val_loss"):
        regression().fit((X, Y), epochs=1, verbose=0, listeners=[EarlyStopping()])


def test_validation_loss_recorded():
    sd = regression(Adam(0.05))
    history = sd.fit((X, Y), epochs=3, batch_size=32, validation=(X[:40], Y[:40]), verbose=0)
    assert all(v is not None and np.isfinite(v) for v in history.val_losses)
    assert history.val_losses[-1] < history.val_losses[0]


def test_config_json_round_trip_and_builder():
    cfg = (TrainingConfig.builder().updater(Adam(1e-3)).l2(1e-4)
           .data_set_feature_mapping("x").data_set_label_mapping("y").build())
    assert TrainingConfig.from_json(cfg.to_json()) == cfg
    assert cfg.feature_mapping == ["x"] and cfg.l2 == 1e-4


@pytest.mark.parametrize("kwargs, match", [
    ({"l1": -1.0}, "l1"), ({"l2": float("nan")}, "l2"), ({"updater": "adam"}, "Updater")])
def test_bad_config(kwargs, match):
    with pytest.raises(TrainingError, match=match):
        TrainingConfig(**{"updater": Sgd(0.1), **kwargs})


def test_fit_errors_are_named_and_leave_no_state():
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, 3)
    sd.var("w", np.zeros((3, 1), np.float32))
    with pytest.raises(TrainingError, match="no training config"):
        sd.fit((X,), verbose=0)
    sd.set_training_config(TrainingConfig(updater=Sgd(0.1), feature_mapping=["x"]))
    with pytest.raises(TrainingError, match="no loss"):
        sd.fit((X,), verbose=0)
    before = (len(sd.graph.nodes), set(sd.variable_names()))
    sd2 = regression()
    with pytest.raises(TrainingError, match="3 parts"):
        sd2.fit([(X, Y, Y)], verbose=0)
    with pytest.raises(TrainingError, match="'y'"):
        sd2.fit([{"x": X}], verbose=0)
    with pytest.raises(TrainingError, match="first"):
        sd2.fit((X, Y[:10]), verbose=0)
    assert (len(sd.graph.nodes), set(sd.variable_names())) == before
    assert x.name == "x"


def test_diverging_loss_is_reported():
    sd = regression(Sgd(1e6))
    with pytest.raises(TrainingError, match="learning rate"):
        sd.fit((X * 1e3, Y), epochs=5, batch_size=96, verbose=0)


@pytest.mark.parametrize("name", sorted(__import__("samediff.training.updaters",
                                                   fromlist=["UPDATERS"]).UPDATERS))
def test_every_updater_trains_under_fit(name):
    from samediff.training.updaters import UPDATERS
    cls = UPDATERS[name]
    sd = regression(cls(), weight_decay=1e-3 if name != "NoOp" else 0.0)
    before = params(sd)
    history = sd.fit((X, Y), epochs=3, batch_size=32, verbose=0)
    after = params(sd)
    assert all(v.dtype == np.float32 for v in after.values())
    assert np.isfinite(history.losses).all()
    if name == "NoOp":
        assert all(np.array_equal(before[k], after[k]) for k in before)
    else:
        assert history.losses[-1] < history.losses[0]


def test_parameters_and_state_are_updated_in_their_own_buffers():
    """The step plan writes new parameters/state into the old buffers (buffer donation)."""
    sd = regression(Adam(0.01))
    w_buffer = sd.graph.vars["w"].value
    sd.fit((X, Y), epochs=2, batch_size=32, verbose=0)
    step = train_step_for(sd, sd.training_config, ())
    (plan,) = step._plans.values()
    assert plan.donations == 6  # w, b and Adam's m, v of each
    assert sd.graph.vars["w"].value is w_buffer
    reference = regression(Adam(0.01))
    from samediff import compiler
    previous = compiler.set_executor("interpreter")  # no donation there: results must agree
    try:
        reference.fit((X, Y), epochs=2, batch_size=32, verbose=0)
    finally:
        compiler.set_executor(previous)
    for k, v in params(reference).items():
        np.testing.assert_allclose(params(sd)[k], v, rtol=1e-5, atol=1e-6)


def classifier() -> tuple[SameDiff, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(120, 2)).astype(np.float32)
    labels = (x[:, 0] + x[:, 1] > 0).astype(int)
    sd = SameDiff.create()
    xs, ys = sd.placeholder("x", "float", -1, 2), sd.placeholder("y", "float", -1, 2)
    w, b = sd.var("w", np.zeros((2, 2), np.float32)), sd.var("b", np.zeros(2, np.float32))
    logits = xs.mmul(w) + b
    sd.nn.softmax("probs", logits)
    sd.loss.softmax_cross_entropy("loss", ys, logits)
    sd.set_training_config(TrainingConfig(updater=Adam(0.1), feature_mapping=["x"],
                                          label_mapping=["y"]))
    return sd, x, np.eye(2, dtype=np.float32)[labels]


def test_fit_records_training_and_validation_metrics_and_evaluate_agrees():
    from samediff.evaluation import Evaluation
    sd, x, y = classifier()
    history = sd.fit((x, y), epochs=10, batch_size=40, validation=(x, y),
                     evaluations={"probs": Evaluation()}, verbose=0)
    assert history.metric("accuracy")[-1] > 0.9 and history.metric("val_accuracy")[-1] > 0.9
    ev = sd.evaluate((x, y), "probs", Evaluation())
    probs = sd.output({"x": x}, "probs")["probs"].numpy()
    manual = Evaluation()
    manual.eval(y, probs)
    assert ev.accuracy() == manual.accuracy() == history.metric("val_accuracy")[-1]
    np.testing.assert_array_equal(ev.confusion_matrix(), manual.confusion_matrix())
    with pytest.raises(TrainingError, match="label"):
        SameDiff.create().evaluate((x,), "probs", Evaluation())


def test_verbose_prints_epoch_summaries_and_default_is_quiet_off_a_terminal(capsys):
    sd, x, y = classifier()
    sd.fit((x, y), epochs=2, batch_size=60)  # stderr is not a TTY under pytest: quiet
    assert capsys.readouterr().err == ""
    sd.fit((x, y), epochs=2, batch_size=60, verbose=1)
    err = capsys.readouterr().err
    assert "epoch 1/2 - loss" in err and "epoch 2/2 - loss" in err


def test_set_array_between_fits_is_seen_by_the_cached_step():
    sd = regression(Sgd(0.1))
    sd.fit((X, Y), epochs=1, batch_size=96, shuffle=False, verbose=0)
    w0 = np.array([[0.5], [-0.3], [0.2]], np.float32)
    sd.get_variable("w").set_array(w0)  # replaces the variable's buffer
    sd.get_variable("b").set_array(np.zeros(1, np.float32))
    sd.fit((X, Y), epochs=1, batch_size=96, shuffle=False, verbose=0)
    r = X.astype(np.float64) @ w0 - Y
    gw = 2 * X.T.astype(np.float64) @ r / len(X)
    np.testing.assert_allclose(sd.get_variable("w").get_arr().numpy(), w0 - 0.1 * gw, rtol=1e-5)


@pytest.mark.compiled
def test_a_training_step_runs_the_executor_in_force_not_the_one_it_first_ran_under():
    """The step keeps its plans per batch type; the executor in force is part of the key. A
    Dask worker's cached model had kept the compiled plans of an earlier task and ran them for
    tasks sent with the interpreter, so a result depended on the worker it ran on."""
    from samediff import compiler
    import nd4py as nd
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.FLOAT, -1, 4)
    y = sd.placeholder("y", nd.FLOAT, -1, 3)
    w = sd.var("w", np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    sd.loss.mean_squared_error("loss", y, x.mmul(w).tanh())
    sd.set_training_config(TrainingConfig(updater=Sgd(0.1), feature_mapping=["x"],
                                          label_mapping=["y"]))
    step = train_step_for(sd, sd.training_config, ())
    sd.updater_state.ensure({p: sd.read_value(p) for p in step.params}, step.slots,
                            sd.training_config.updater.state_init())
    feeds = {"x": np.ones((8, 4), np.float32), "y": np.zeros((8, 3), np.float32)}
    kinds = []
    for executor in ("compiled", "interpreter", "compiled"):
        previous = compiler.set_executor(executor)
        try:
            step.run(feeds, sd.updater_state)
        finally:
            compiler.set_executor(previous)
        kinds.append(next(p.kind for k, p in step._plans.items() if k[2][0] == executor))
    assert "compiled" in kinds[0] and kinds[1] == "interpreter" and kinds[2] == kinds[0]
