"""Failures during training: non-finite steps change nothing, a failed fit leaves the graph as it
was (samediff/training/step.py, finite.py, rollback.py, trainer.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samediff import SameDiff, compiler
from samediff.errors import TrainingError
from samediff.evaluation import Evaluation, RegressionEvaluation
from samediff.training import NonFiniteError, TrainingConfig
from samediff.training.finite import all_finite
from samediff.training.listeners import LambdaListener, Listener
from samediff.training.trainer import train_step_for
from samediff.training.updaters import Adam, Sgd, Updater

RNG = np.random.default_rng(7)
X = RNG.random((40, 3), dtype=np.float32)
Y = X @ np.array([[1.0], [-2.0], [3.0]], np.float32) + 0.5
GOOD = [(X[i:i + 8], Y[i:i + 8]) for i in range(0, 40, 8)]  # five batches of 8


def model(updater: Any = None, **config: Any) -> SameDiff:
    sd = SameDiff.create()
    x, y = sd.placeholder("x", "float", -1, 3), sd.placeholder("y", "float", -1, 1)
    w = sd.var("w", np.zeros((3, 1), np.float32))
    b = sd.var("b", np.zeros((1,), np.float32))
    (x.mmul(w).add(b, name="pred") - y).square().mean(name="mse").mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=updater or Adam(0.05), feature_mapping=["x"],
                                          label_mapping=["y"], **config))
    return sd


def poisoned(part: str, value: float, where: tuple[int, int] = (3, 0)) -> tuple:
    """The first good batch with one NaN/inf in its features or labels."""
    x, y = GOOD[0][0].copy(), GOOD[0][1].copy()
    (x if part == "x" else y)[where] = value
    return x, y


def numbers(sd: SameDiff) -> tuple:
    """Every value, updater-state array and counter, bit for bit."""
    state = sd.updater_state
    values = {k: (v.value.dtype.str, v.value.shape, v.value.tobytes())
              for k, v in sd.graph.vars.items() if v.value is not None}
    arrays = {p: {s: (a.dtype.str, a.shape, a.tobytes()) for s, a in d.items()}
              for p, d in state.arrays.items()}
    return values, arrays, (state.iteration, state.epoch, state.batch)


def trained(sd: SameDiff) -> tuple:
    """What training changes: parameter values, updater-state arrays and counters."""
    values, arrays, counters = numbers(sd)
    return {v.name: values[v.name] for v in sd.trainable_variables()}, arrays, counters


def structure(sd: SameDiff) -> tuple:
    """Everything structural about a graph: nodes, variables, names, handles, counters, caches."""
    graph = sd.graph
    nodes = [(n.name, n.op.name, repr(n.attrs), n.inputs, n.outputs) for n in graph.nodes]
    variables = [(k, i.name, i.vtype, i.ttype, i.producer.name if i.producer else None)
                 for k, i in graph.vars.items()]
    handles = sorted((k, h.name) for k, h in sd._handles.items())
    config = sd.training_config.to_json() if sd.training_config is not None else None
    return (nodes, variables, handles, sd.summary(), sorted(graph.node_names),
            dict(graph.name_counts), list(graph.scopes), sd.loss_variables, dict(sd._grad_cache),
            graph.key(), config, sd._train_step_cache, sd.updater_state)


@pytest.fixture(params=["interpreter", "compiled"])
def executor(request):
    previous = compiler.set_executor(request.param)
    yield request.param
    compiler.set_executor(previous)


# -- 6. a non-finite step changes nothing ---------------------------------------------------------
@pytest.mark.parametrize("part, value", [("x", np.nan), ("y", np.inf), ("y", -np.inf)])
def test_a_non_finite_batch_changes_no_parameter_state_or_counter(executor, part, value):
    sd = model()
    sd.fit(GOOD[:2], epochs=1, verbose=0)  # Adam moments and counters are not trivial
    shape = structure(sd)
    with pytest.raises(NonFiniteError, match=r"epoch 1, batch 1 .*unchanged") as info:
        sd.fit([GOOD[2], poisoned(part, value), GOOD[3]], epochs=1, verbose=0)
    assert (info.value.epoch, info.value.batch, info.value.iteration) == (1, 1, 3)
    after_one = model()
    after_one.fit(GOOD[:2], epochs=1, verbose=0)
    after_one.fit([GOOD[2]], epochs=1, verbose=0)
    got, want = numbers(sd), numbers(after_one)
    assert got[0] == want[0] and got[1] == want[1]  # exactly one more (good) step was taken
    assert got[2] == (3, 1, 1)  # epoch 1 stopped before its batch 1: a resume retries it
    assert structure(sd) == shape


def test_the_first_batch_non_finite_leaves_everything_as_it_was(executor):
    sd = model()
    sd.fit(GOOD[:2], epochs=1, verbose=0)
    before, shape = numbers(sd), structure(sd)
    with pytest.raises(NonFiniteError, match="loss was nan"):
        sd.fit([poisoned("x", np.nan), GOOD[1]], epochs=1, verbose=0)
    assert numbers(sd) == before and structure(sd) == shape


def test_a_loss_that_overflows_only_in_the_backward_pass_is_refused(executor):
    """-log(x * w) at x = 1e-40 (a float32 subnormal) is 92.1, but d/du log(u) = 1/u = 1e40
    overflows float32: the loss is finite, the gradient is -inf."""
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, 1)
    w = sd.var("w", np.ones((1,), np.float32))
    (-(x * w).log()).mean(name="nll").mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=Adam(0.1), feature_mapping=["x"]))
    tiny = np.full((4, 1), 1e-40, np.float32)
    sd.fit((np.ones((4, 1), np.float32),), epochs=1, batch_size=4, verbose=0)
    before = numbers(sd)
    with pytest.raises(NonFiniteError, match=r"a gradient was not finite \(the loss was 92"):
        sd.fit((tiny,), epochs=1, batch_size=4, verbose=0)
    assert numbers(sd) == before


@pytest.mark.parametrize("data", ["batches", "arrays"])
def test_skip_mode_trains_exactly_like_the_data_without_the_bad_batches(executor, data):
    bad = poisoned("y", np.nan)
    if data == "batches":
        with_bad, without = [GOOD[0], bad, GOOD[1], GOOD[2]], GOOD[:3]
        kwargs: dict = {}
    else:  # array data, unshuffled, the bad rows filling exactly one batch
        rows = [GOOD[0], bad, GOOD[1], GOOD[2]]
        with_bad = (np.concatenate([r[0] for r in rows]), np.concatenate([r[1] for r in rows]))
        without = (X[:24], Y[:24])
        kwargs = {"batch_size": 8, "shuffle": False}
    sd, reference = model(), model()
    history = sd.fit(with_bad, epochs=2, verbose=0, on_nonfinite="skip", **kwargs)
    expected = reference.fit(without, epochs=2, verbose=0, **kwargs)
    got, want = numbers(sd), numbers(reference)
    assert got[:2] == want[:2]  # parameters and Adam moments, bit for bit
    assert got[2] == want[2] == (6, 2, 0)  # skipped batches are no iterations
    assert history.metric("skipped") == [1, 1]
    assert history.losses == expected.losses
    assert history.iteration_losses == expected.iteration_losses
    assert [e.iterations for e in history.epochs] == [3, 3]
    assert "skipped" not in expected.epochs[0].metrics  # only reported in skip mode


def test_an_epoch_of_only_bad_batches_is_skipped_whole():
    sd = model(Sgd(0.1))
    before = trained(sd)
    history = sd.fit([poisoned("x", np.inf), poisoned("y", np.nan)], epochs=2, verbose=0,
                     on_nonfinite="skip")
    assert history.metric("skipped") == [2, 2] and np.isnan(history.losses).all()
    assert trained(sd)[0] == before[0] and trained(sd)[2] == (0, 2, 0)  # 2 epochs, 0 steps


def test_skip_mode_with_evaluations_and_listeners_ignores_the_bad_batch():
    """The bad batch's NaN predictions are not evaluated (that would raise) and listeners see
    iterations only."""
    seen = []
    sd = model()
    listener = LambdaListener(on_iteration_end=lambda t, i, loss: seen.append((i, loss)))
    history = sd.fit([GOOD[0], poisoned("x", np.nan), GOOD[1]], epochs=1, verbose=0,
                     on_nonfinite="skip", evaluations={"pred": RegressionEvaluation()},
                     listeners=[listener])
    assert [i for i, _ in seen] == [0, 1] and np.isfinite([v for _, v in seen]).all()
    assert history.metric("skipped") == [1] and np.isfinite(history.metric("mse")).all()


@pytest.mark.parametrize("value", ["ignore", "", None, True])
def test_on_nonfinite_is_validated_before_anything_happens(value):
    sd = model()
    before = structure(sd)
    with pytest.raises(TrainingError, match=r"on_nonfinite must be one of \['raise', 'skip'\]"):
        sd.fit(GOOD, epochs=1, verbose=0, on_nonfinite=value)
    assert structure(sd) == before


@pytest.mark.parametrize("executor_name", ["interpreter", "compiled"])
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_non_finite_values_anywhere_in_a_batch_change_nothing(executor_name, data):
    previous = compiler.set_executor(executor_name)
    try:
        sd = model(Adam(0.05), l2=1e-3)
        sd.fit(GOOD[:1], epochs=1, verbose=0)
        x, y = GOOD[1][0].copy(), GOOD[1][1].copy()
        spots = data.draw(st.lists(st.tuples(st.sampled_from(["x", "y"]), st.integers(0, 7),
                                             st.integers(0, 2),
                                             st.sampled_from([np.nan, np.inf, -np.inf])),
                                   min_size=1, max_size=5))
        for part, row, col, value in spots:
            if part == "x":
                x[row, col] = value
            else:
                y[row, 0] = value
        before = numbers(sd)
        with pytest.raises(NonFiniteError):
            sd.fit([(x, y)], epochs=1, verbose=0)
        assert numbers(sd) == before
    finally:
        compiler.set_executor(previous)


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from([np.float16, np.float32, np.float64]),
       shape=st.lists(st.integers(0, 9), min_size=0, max_size=3),
       bad=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from([np.nan, np.inf, -np.inf])),
                    max_size=3),
       big=st.booleans(), transpose=st.booleans())
def test_all_finite_agrees_with_numpy(dtype, shape, bad, big, transpose):
    a = np.ones(shape, dtype)
    if big and a.size:
        a.flat[0] = np.finfo(dtype).max  # large finite values are no false alarm
    for where, value in bad:
        if a.size:
            a.flat[where % a.size] = value
    view = a.T if transpose else a
    assert all_finite(np.float32(0.5), view) == bool(np.isfinite(view).all())


# -- 7. a failed fit leaves the graph as it was ---------------------------------------------------
@dataclass(frozen=True)
class _BrokenUpdater(Updater):
    """An updater whose rule fails while the train step is being recorded."""

    learning_rate: Any = 0.1

    def _step(self, p: Any, g: Any, s: dict, h: dict) -> tuple[Any, dict]:
        raise ValueError("broken update rule")


class _Interrupt(Listener):
    def on_epoch_start(self, trainer: Any, epoch: int) -> None:
        raise KeyboardInterrupt


def _configure(kind: str, sd: SameDiff) -> None:
    """The config a failure kind needs (set before the graph is fingerprinted)."""
    bad = {"unknown loss variable in the config": {"loss_variables": ["nope"]},
           "broken updater rule": {"updater": _BrokenUpdater()},
           "feature mapping names a variable": {"feature_mapping": ["w"]}}.get(kind)
    if bad is not None:
        sd.set_training_config(TrainingConfig(**{"updater": Adam(0.05), "feature_mapping": ["x"],
                                                 "label_mapping": ["y"], **bad}))


def _fail(kind: str, sd: SameDiff) -> None:
    """Make ``sd.fit`` fail in one of many ways, none of them after a completed step."""
    listeners: list = []
    data: Any = GOOD
    if kind == "empty data":
        data = (X[:0], Y[:0])
    elif kind == "shape mismatch in a batch":
        data = [(X[:8, :2], Y[:8])]
    elif kind == "non-finite first batch":
        data = [poisoned("x", np.nan)]
    elif kind == "listener raises at the start":
        listeners = [LambdaListener(on_epoch_start=lambda t, e: 1 / 0)]
    elif kind == "keyboard interrupt":
        listeners = [_Interrupt()]
    evaluations = {"nope": Evaluation()} if kind == "unknown evaluation output" else None
    sd.fit(data, epochs=1, verbose=0, listeners=listeners, evaluations=evaluations)


FAILURES = ["empty data", "shape mismatch in a batch", "unknown loss variable in the config",
            "broken updater rule", "feature mapping names a variable",
            "unknown evaluation output", "listener raises at the start", "keyboard interrupt",
            "non-finite first batch"]


@pytest.mark.parametrize("trained", [False, True], ids=["fresh", "trained"])
@pytest.mark.parametrize("kind", FAILURES)
def test_a_failed_fit_leaves_the_graph_exactly_as_it_was(kind, trained):
    sd = model()
    if trained:  # the backward pass, a cached step and updater state exist already
        sd.fit(GOOD[:2], epochs=1, verbose=0)
    _configure(kind, sd)
    shape, values, ops = structure(sd), numbers(sd), len(sd.ops())
    with pytest.raises((TrainingError, ValueError, KeyError, ZeroDivisionError,
                        KeyboardInterrupt)):
        _fail(kind, sd)
    assert len(sd.ops()) == ops
    assert structure(sd) == shape
    assert numbers(sd) == values


@pytest.mark.parametrize("kind", FAILURES)
def test_after_a_failed_fit_the_graph_behaves_as_if_fit_was_never_called(kind):
    """Same names for new ops, same training, bit for bit, as an untouched twin."""
    failed, twin = model(), model()
    _configure(kind, failed)
    with pytest.raises((TrainingError, ValueError, KeyError, ZeroDivisionError,
                        KeyboardInterrupt)):
        _fail(kind, failed)
    for sd in (failed, twin):
        sd.set_training_config(model().training_config)
        (sd.get_variable("w") * 2.0).sum(name="extra")
        sd.math.add(sd.get_variable("b"), 1.0)
        sd.fit(GOOD, epochs=2, verbose=0)
    assert structure(failed)[:9] == structure(twin)[:9]
    assert numbers(failed) == numbers(twin)


def test_a_listener_failing_after_some_steps_keeps_those_steps_but_not_the_structure():
    """The rule: structure always comes back; completed steps (parameters, their updater state
    and counters) stay, as after an interruption, so a later fit resumes where it stopped."""
    sd = model()
    shape = structure(sd)

    def fail_after_three(trainer, iteration, loss):
        if iteration == 2:
            raise RuntimeError("listener bug")
    with pytest.raises(RuntimeError, match="listener bug"):
        sd.fit(GOOD, epochs=2, verbose=0,
               listeners=[LambdaListener(on_iteration_end=fail_after_three)])
    assert structure(sd) == shape  # no backward pass, no cached step: structure is restored
    three = model()
    three.fit(GOOD[:3], epochs=1, verbose=0)
    assert trained(sd)[:2] == trained(three)[:2]
    assert trained(sd)[2] == (3, 0, 3)  # 3 steps done, in epoch 0, at its batch 3
    sd.fit(GOOD, epochs=2, verbose=0)  # resumes at batch 3 of epoch 0
    straight = model()
    straight.fit(GOOD, epochs=2, verbose=0)
    assert numbers(sd) == numbers(straight)


def test_a_failed_fit_keeps_the_cached_train_step_of_the_last_good_fit():
    sd = model()
    sd.fit(GOOD, epochs=1, verbose=0)
    step = train_step_for(sd, sd.training_config, ())
    with pytest.raises(TrainingError):
        sd.fit((X[:0], Y[:0]), epochs=1, verbose=0)
    assert train_step_for(sd, sd.training_config, ()) is step  # nothing recompiles


def test_a_gradient_viewing_a_parameter_is_copied_before_the_update_writes_it():
    """Between the plans the update cannot see that a handed-over gradient shares memory with a
    buffer it writes in place; ``StepPlan`` copies such a gradient (stub plans show why)."""
    from samediff.training.step import StepPlan

    class Stub:
        kind = "stub"

        def __init__(self, slots, fn):
            self.input_slots, self.fn = slots, fn

        def execute(self, inputs):
            return self.fn(*inputs)

    def update(g, p):  # like a donated kernel: writes p in place, then reads g
        p -= 1.0
        return [p + g.reshape(4)]
    gradients = Stub(["p"], lambda p: [np.float64(0.0), p.reshape(2, 2)])  # gradient = view of p
    plan = StepPlan(gradients, ["loss", "g"], ["loss", "g"], Stub(["g", "p"], update), ["new_p"],
                    handoff=["g"], written=["p"])
    results, applied = plan.execute({"p": np.arange(4.0)})
    assert applied and results["new_p"].tolist() == [-1.0, 1.0, 3.0, 5.0]
