"""Edge cases of training and of the plan features it relies on (found in review): freezing,
resuming mid-epoch, renaming, reused listeners and directories, views and donation."""
from __future__ import annotations

import os

import numpy as np
import pytest

from samediff import SameDiff, compiler
from samediff.errors import UnknownVariableError
from samediff.ir import VariableType
from samediff.execution import typed_plan
from samediff.ops import TensorType
from samediff.training import TrainingConfig
from samediff.training.listeners import CheckpointListener, EarlyStopping, LambdaListener
from samediff.training.updaters import Adam, Sgd

pytestmark = pytest.mark.compiled

RNG = np.random.default_rng(0)
X = RNG.random((32, 3), dtype=np.float32)
Y = X @ np.array([[1.0], [-2.0], [3.0]], np.float32) + 0.5


def model(updater=None, **config) -> SameDiff:
    sd = SameDiff.create()
    x, y = sd.placeholder("x", "float", -1, 3), sd.placeholder("y", "float", -1, 1)
    w = sd.var("w", np.zeros((3, 1), np.float32))
    b = sd.var("b", np.zeros((1,), np.float32))
    (x.mmul(w) + b - y).square().mean(name="mse").mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=updater or Sgd(0.1), feature_mapping=["x"],
                                          label_mapping=["y"], **config))
    return sd


def value(sd: SameDiff, name: str) -> np.ndarray:
    return sd.get_variable(name).get_arr().numpy().copy()


def test_unfreezing_a_variable_trains_it_again():
    sd = model()
    sd.convert_to_constant(sd.get_variable("b"))
    sd.fit((X, Y), epochs=2, batch_size=16, verbose=0)
    assert value(sd, "b") == 0.0
    sd.convert_to_variable(sd.get_variable("b"))
    sd.fit((X, Y), epochs=2, batch_size=16, verbose=0)
    assert value(sd, "b") != 0.0


def test_variables_no_loss_depends_on_are_left_alone():
    sd = model()
    head = sd.var("unused_head", np.ones((2, 2), np.float32))
    sd.fit((X, Y), epochs=1, batch_size=16, verbose=0)
    np.testing.assert_array_equal(value(sd, head.name), np.ones((2, 2)))


def test_resuming_from_a_mid_epoch_checkpoint_sees_the_remaining_batches(tmp_path):
    straight = model(Adam(0.05))
    straight.fit((X, Y), epochs=2, batch_size=8, verbose=0)
    first = model(Adam(0.05))
    ckpt = CheckpointListener(tmp_path, every_epochs=None, every_iterations=2, keep_last=10)

    def stop(trainer, iteration, loss):  # interrupt after the 6th iteration (mid epoch 1)
        if iteration + 1 == 6:
            trainer.stop = True
    first.fit((X, Y), epochs=2, batch_size=8, verbose=0,
              listeners=[ckpt, LambdaListener(on_iteration_end=stop)])
    resumed = SameDiff.load(os.path.join(tmp_path, "checkpoint-e1-i6.sdz"))
    assert (resumed.updater_state.epoch, resumed.updater_state.batch) == (1, 2)
    resumed.fit((X, Y), epochs=1, batch_size=8, verbose=0)
    assert resumed.updater_state.iteration == 8
    for name in ("w", "b"):
        np.testing.assert_array_equal(value(resumed, name), value(straight, name))


def test_save_after_freezing_or_renaming_a_trained_variable(tmp_path):
    sd = model(Adam(0.01))
    sd.fit((X, Y), epochs=1, batch_size=16, verbose=0)
    sd.get_variable("w").rename("weights")
    assert "weights" in sd.updater_state.arrays  # Adam's moments follow the variable
    sd.convert_to_constant(sd.get_variable("b"))
    sd.save(tmp_path / "m.sdz")
    loaded = SameDiff.load(tmp_path / "m.sdz")
    assert set(loaded.updater_state.arrays) == {"weights"}
    assert loaded.get_variable("b").variable_type is VariableType.CONSTANT


def test_unknown_evaluation_output_fails_before_anything_changes():
    from samediff.evaluation import Evaluation
    sd = model()
    sd.fit((X, Y), epochs=1, batch_size=16, verbose=0)
    before = value(sd, "w")
    with pytest.raises(UnknownVariableError, match="nope"):
        sd.fit((X, Y), epochs=1, batch_size=16, verbose=0, evaluations={"nope": Evaluation()})
    np.testing.assert_array_equal(value(sd, "w"), before)


@pytest.mark.parametrize("config", [{}, {"minimize": False}, {"l2": 1.0}])
def test_training_and_validation_loss_measure_the_same_thing(config):
    sd = model(Sgd(0.0), **config)
    history = sd.fit((X, Y), epochs=1, batch_size=32, validation=(X, Y), verbose=0)
    np.testing.assert_allclose(history.losses[0], history.val_losses[0], rtol=1e-6)
    assert ("regularization" in history.epochs[0].metrics) == ("l2" in config)


def test_checkpoints_of_another_run_in_the_same_directory_are_kept(tmp_path):
    model().fit((X, Y), epochs=3, batch_size=16, verbose=0,
                listeners=[CheckpointListener(tmp_path, keep_last=1)])
    second = CheckpointListener(tmp_path, keep_last=2)
    model().fit((X, Y), epochs=1, batch_size=16, verbose=0, listeners=[second])
    names = sorted(os.listdir(tmp_path))
    assert names == ["checkpoint-e1-i2.sdz", "checkpoint-e3-i6.sdz"]


def test_early_stopping_starts_afresh_in_each_fit():
    stopper = EarlyStopping(monitor="loss", patience=1)
    model(Sgd(0.1)).fit((X, Y), epochs=20, batch_size=16, verbose=0, listeners=[stopper])
    history = model(Sgd(0.1)).fit((X, Y), epochs=5, batch_size=16, verbose=0,
                                  listeners=[stopper])
    assert len(history.epochs) == 5


@pytest.mark.parametrize("data", ["list", "dict"])
def test_whole_datasets_as_a_list_or_a_features_labels_dict(data):
    a, b = model(), model()
    a.fit([X, Y] if data == "list" else {"features": X, "labels": Y}, epochs=2, batch_size=8,
          verbose=0)
    b.fit((X, Y), epochs=2, batch_size=8, verbose=0)
    np.testing.assert_array_equal(value(a, "w"), value(b, "w"))


def test_library_views_of_a_folded_constant_are_handed_out_as_copies():
    sd = SameDiff.create()
    x, y = sd.placeholder("x", "float", -1, 3), sd.placeholder("y", "float", -1)
    sd.base.reshape_like(sd.ones_like(x), y, name="z")
    feed = {"x": np.zeros((2, 3), np.float32), "y": np.zeros(6, np.float32)}
    sd.output(feed, "z")["z"].numpy()[...] = 7.0
    np.testing.assert_array_equal(sd.output(feed, "z")["z"].numpy(), np.ones(6))


def test_donation_is_refused_when_a_view_of_the_input_is_read_later():
    sd = SameDiff.create()
    p = sd.placeholder("p", "float", 2, 3)
    view = p.reshape(6)
    new_p = p - 1.0
    q = view * 2.0
    types = {"p": TensorType((2, 3), np.dtype(np.float32))}
    consts = {k: v for k, v in sd.graph.vars.items() if v.vtype is VariableType.CONSTANT}
    types.update({k: v.ttype for k, v in consts.items()})
    plan = typed_plan(list(sd.graph.nodes), types, [new_p.name, q.name], {new_p.name: "p"})
    values = {k: (v.value.item() if v.ttype.weak else v.value) for k, v in consts.items()}
    values["p"] = np.ones((2, 3), np.float32)
    _, got_q = plan.execute([values[k] for k in plan.input_slots])
    np.testing.assert_array_equal(got_q, np.full(6, 2.0))
    if plan.kind == "compiled":
        assert plan.donations == 0


@pytest.mark.parametrize("executor", ["interpreter", "compiled"])
@pytest.mark.parametrize("make", ["sum", "sigmoid", "cast"])
def test_ops_on_python_scalars_keep_their_declared_dtype(make, executor):
    previous = compiler.set_executor(executor)
    try:
        sd = SameDiff.create()
        x = sd.placeholder("x", "float", -1, 3)
        scalar = {"sum": lambda: sd.sum(2.0), "sigmoid": lambda: sd.nn.sigmoid(2.0),
                  "cast": lambda: sd.cast(2.0, dtype="double")}[make]()
        y = x * scalar
        out = sd.output({"x": np.ones((2, 3), np.float32)}, y.name)[y.name]
        assert out.dtype == y.dtype
    finally:
        compiler.set_executor(previous)


def _three_donations():
    """A plan of one kernel with three outputs (c * 2 + a, b + a, a - 1 for float32[4] inputs
    a, b, c), each donated its own input's buffer, listed in another order; and the graph's
    constants."""
    sd = SameDiff.create()
    a, b, c = (sd.placeholder(n, "float", 4) for n in "abc")
    new_c, new_b, new_a = c * 2.0 + a, b + a, a - 1.0
    f32 = TensorType((4,), np.dtype(np.float32))
    consts = {k: v for k, v in sd.graph.vars.items() if v.vtype is VariableType.CONSTANT}
    types = {"a": f32, "b": f32, "c": f32, **{k: v.ttype for k, v in consts.items()}}
    plan = typed_plan(list(sd.graph.nodes), types, [new_c.name, new_b.name, new_a.name],
                      {new_a.name: "a", new_b.name: "b", new_c.name: "c"})
    return plan, consts


def test_a_kernel_with_several_donated_outputs_writes_each_into_its_own_input():
    """Three outputs of one kernel donated to three inputs listed in another order: the
    first call (the driver's general path) and the next (its fast path) write each result
    into its own input's buffer."""
    plan, consts = _three_donations()
    if plan.kind == "compiled":
        assert plan.donations == 3
    for _ in range(2):
        inputs = {k: (v.value.item() if v.ttype.weak else v.value) for k, v in consts.items()}
        inputs.update({"a": np.full(4, 1.0, np.float32), "b": np.full(4, 10.0, np.float32),
                       "c": np.full(4, 100.0, np.float32)})
        got = plan.execute([inputs[k] for k in plan.input_slots])
        for value, want in zip(got, (201.0, 11.0, 0.0)):
            np.testing.assert_array_equal(value, np.full(4, want))


@pytest.mark.compiled
@pytest.mark.parametrize("contiguous", [True, False])
def test_kernels_write_donated_buffers_through_one_parameter(contiguous):
    """A kernel whose outputs were donated the buffers of inputs it reads element for element
    is generated with variants that store through those inputs (``codegen.INPLACE_VARIANTS``:
    one parameter per buffer, so LLVM vectorizes the loop). Both driver paths take them when
    every buffer was taken; a buffer that cannot be written through (a strided view) gets a
    fresh output from the other variant. Same values either way."""
    plan, consts = _three_donations()
    assert plan.kind == "compiled" and plan.donations == 3
    steps = [s for s in plan.steps if getattr(s, "donated", None)]
    assert steps and all(s.spec.inplace for s in steps)
    for _ in range(2):  # the driver's general path, then its fast path
        inputs = {k: (v.value.item() if v.ttype.weak else v.value) for k, v in consts.items()}
        fresh = {"a": 1.0, "b": 10.0, "c": 100.0}
        for k, v in fresh.items():
            inputs[k] = np.full(4, v, np.float32) if contiguous else np.full(8, v, np.float32)[::2]
        got = plan.execute([inputs[k] for k in plan.input_slots])
        for value, want, donor in zip(got, (201.0, 11.0, 0.0), "cba"):
            np.testing.assert_array_equal(value, np.full(4, want))
            assert (value is inputs[donor]) == contiguous
            if not contiguous:  # the strided input keeps its old values
                np.testing.assert_array_equal(inputs[donor], np.full(4, fresh[donor]))
    used = {name for s in steps for name in ("kernel_io", "kernel")
            if getattr(s.kernels, name).signatures}
    assert "kernel_io" in used and ("kernel" in used) == (not contiguous)


def test_shuffled_batches_gathered_into_reused_buffers_are_the_fresh_batches():
    """``Batches.epoch(reuse=True)`` (fit without evaluations) gives the rows ``v[idx]`` gives,
    the last short batch too, each in a buffer reused for the next batch of its size."""
    from samediff.training.data import Batches, FeedMapping
    data = (np.arange(70, dtype=np.float32).reshape(35, 2), np.arange(35.0).reshape(35, 1))
    batches = Batches(data, FeedMapping(["x"], ["y"]), 8, True, 3, "fit")
    fresh = list(batches.epoch(2))
    reused = [{k: (v, v.copy()) for k, v in feeds.items()}
              for feeds in batches.epoch(2, reuse=True)]
    assert len(fresh) == len(reused) == 5 and len(fresh[-1]["x"]) == 3
    for want, got in zip(fresh, reused):
        for k in want:
            np.testing.assert_array_equal(got[k][1], want[k])
            assert got[k][0].dtype == want[k].dtype and got[k][0].flags.c_contiguous
    assert reused[0]["x"][0] is reused[1]["x"][0]  # one buffer per size, not one per batch


def test_fit_ignores_float_errors_in_steps_and_restores_the_callers_error_state():
    """fit sets numpy's error state once per epoch when no listener or evaluation runs in the
    loop; a non-finite step is still reported by fit alone and the caller's state comes back."""
    sd = model(Sgd(0.1))
    bad = X.copy()
    bad[5, 1] = np.inf
    with np.errstate(all="raise"):
        history = sd.fit((bad, Y), epochs=2, batch_size=8, verbose=0, on_nonfinite="skip")
        assert np.geterr()["over"] == "raise" and np.geterr()["invalid"] == "raise"
    assert history.epochs[0].metrics["skipped"] == 1
    assert np.isfinite(sd.read_value("w")).all()


def test_dict_batches_keyed_by_placeholders_named_labels_feed_those_placeholders():
    from samediff.training.data import FeedMapping
    mapping = FeedMapping(["x"], ["labels"])
    x, y = np.ones((2, 3), np.float32), np.zeros((2, 1), np.float32)
    feeds = mapping.feeds({"x": x, "labels": y}, "fit")
    assert feeds["x"] is not None and np.array_equal(feeds["labels"], y)
    assert np.array_equal(feeds["x"], x)
    both = mapping.feeds({"features": x, "labels": y}, "fit")  # the positional form still works
    assert np.array_equal(both["x"], x) and np.array_equal(both["labels"], y)
