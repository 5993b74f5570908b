"""Training mode: dropout and batch norm behave differently in ``fit``,
``graph_scope(training=True)`` and ``nd.compile(training=True)`` than at inference.

Expected values are computed here from the definitions (batch mean and biased variance, the
momentum rule, inverted dropout's 0 or 1/p), not by calling the library's ops.
"""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff, random_state
from samediff.errors import OpError
from samediff.training import TrainingConfig
from samediff.training_forms import training_graph
from samediff.training.step import TrainStep
from samediff.training.updaters import Sgd

RNG = np.random.default_rng(11)


def _bn_model(momentum: float = 0.9, p: float | None = None, lr: float = 0.05) -> SameDiff:
    """x (-1, 4) -> matmul -> batch_norm (axis 1) -> relu [-> dropout] -> matmul -> mse."""
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, 4)
    y = sd.placeholder("y", "float", -1, 2)
    w = sd.var("w", RNG.normal(size=(4, 3)).astype(np.float32))
    rm, rv = sd.var("rm", np.zeros(3, np.float32)), sd.var("rv", np.ones(3, np.float32))
    gamma, beta = sd.var("gamma", np.ones(3, np.float32)), sd.var("beta", np.zeros(3, np.float32))
    h = sd.nn.relu(sd.nn.batch_norm(x.mmul(w), rm, rv, gamma, beta, axis=1, momentum=momentum))
    if p is not None:
        h = sd.nn.dropout(h, p)
    w2 = sd.var("w2", RNG.normal(size=(3, 2)).astype(np.float32))
    ((h.mmul(w2) - y).square().mean()).mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=Sgd(lr), feature_mapping=["x"],
                                          label_mapping=["y"]))
    return sd


def _batch(n: int = 16) -> tuple[np.ndarray, np.ndarray]:
    return (RNG.normal(size=(n, 4)).astype(np.float32) * 2 + 1,
            RNG.normal(size=(n, 2)).astype(np.float32))


def _value(sd: SameDiff, name: str) -> np.ndarray:
    return np.array(sd.graph.vars[name].value, copy=True)


# --- batch norm ---------------------------------------------------------------------------------

def test_fit_moves_the_running_statistics_by_the_momentum_rule():
    sd = _bn_model(momentum=0.8)
    X, Y = _batch()
    w = _value(sd, "w").astype(np.float64)
    sd.fit((X, Y), epochs=1, batch_size=16, verbose=0)   # one step on the whole batch
    h = X.astype(np.float64) @ w                          # the pre-norm activations of that step
    n = len(h)
    mean = h.sum(0) / n
    var = ((h - mean) ** 2).sum(0) / n                     # biased, as ONNX/Keras
    np.testing.assert_allclose(_value(sd, "rm"), 0.8 * 0.0 + 0.2 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_value(sd, "rv"), 0.8 * 1.0 + 0.2 * var, rtol=1e-5, atol=1e-6)


def test_running_statistics_are_not_trained_and_gamma_beta_are():
    sd = _bn_model()
    X, Y = _batch()
    before = {k: _value(sd, k) for k in ("gamma", "beta")}
    sd.fit((X, Y), epochs=1, batch_size=16, verbose=0)
    assert all(not np.array_equal(_value(sd, k), v) for k, v in before.items())
    step = TrainStep(sd, sd.training_config)
    assert "rm" not in step.params and "rv" not in step.params
    assert {"w", "w2", "gamma", "beta"} <= set(step.params)


def test_running_statistics_converge_and_output_uses_them():
    sd = _bn_model(momentum=0.5, lr=0.0)   # fixed weights: the statistics settle on the batch's
    X, Y = _batch(64)
    sd.fit((X, Y), epochs=30, batch_size=64, verbose=0)
    h = X.astype(np.float64) @ _value(sd, "w").astype(np.float64)
    np.testing.assert_allclose(_value(sd, "rm"), h.mean(0), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(_value(sd, "rv"), h.var(0), rtol=1e-3, atol=1e-3)
    # output() normalizes with the running statistics (inference form), per sample
    one = sd.output({"x": X[:1]}, "batch_norm")["batch_norm"].numpy()
    rm, rv = _value(sd, "rm"), _value(sd, "rv")
    want = (X[:1] @ _value(sd, "w") - rm) / np.sqrt(rv + 1e-5) * _value(sd, "gamma") \
        + _value(sd, "beta")
    np.testing.assert_allclose(one, want, rtol=1e-4, atol=1e-5)


def test_a_non_finite_step_leaves_the_running_statistics_alone():
    sd = _bn_model()
    X, Y = _batch()
    Y[3, 0] = np.nan
    rm, rv = _value(sd, "rm"), _value(sd, "rv")
    sd.fit((X, Y), epochs=1, batch_size=16, verbose=0, on_nonfinite="skip")
    np.testing.assert_array_equal(_value(sd, "rm"), rm)
    np.testing.assert_array_equal(_value(sd, "rv"), rv)


def test_the_users_graph_stays_the_inference_graph():
    sd = _bn_model(p=0.5)
    ops = [n.op.name for n in sd.graph.nodes]
    train, updates = training_graph(sd.graph)
    assert [n.op.name for n in sd.graph.nodes] == ops
    assert "batch_norm_train" in [n.op.name for n in train.nodes]
    assert "dropout_mask" in [n.op.name for n in train.nodes]
    assert set(updates) == {"rm", "rv"}
    train.validate()


def test_save_load_keeps_running_statistics_and_training_resumes(tmp_path):
    sd = _bn_model(p=0.7)
    X, Y = _batch(32)
    sd.fit((X, Y), epochs=2, batch_size=16, verbose=0)
    path = tmp_path / "bn.sdz"
    sd.save(str(path))
    loaded = SameDiff.load(str(path))
    for k in ("rm", "rv", "w", "gamma"):
        np.testing.assert_array_equal(_value(loaded, k), _value(sd, k))
    out = lambda m: m.output({"x": X}, "batch_norm")["batch_norm"].numpy()  # noqa: E731
    np.testing.assert_array_equal(out(loaded), out(sd))
    random_state.set_seed(3)
    h1 = sd.fit((X, Y), epochs=1, batch_size=16, verbose=0)
    random_state.set_seed(3)
    h2 = loaded.fit((X, Y), epochs=1, batch_size=16, verbose=0)
    assert h1.losses == h2.losses
    np.testing.assert_array_equal(_value(loaded, "rm"), _value(sd, "rm"))


# --- dropout -------------------------------------------------------------------------------------

def _dropout_model(p: float) -> SameDiff:
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, 200)
    w = sd.var("w", np.ones(1, np.float32))
    (sd.nn.dropout(x * w, p).mean()).mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=Sgd(0.0), feature_mapping=["x"]))
    return sd


def test_dropout_is_active_in_fit_and_the_identity_in_output():
    sd = _dropout_model(0.5)
    X = np.ones((8, 200), np.float32)
    out = sd.output({"x": X}, "dropout")["dropout"].numpy()
    np.testing.assert_array_equal(out, X)                          # inference: identity
    history = sd.fit((X,), epochs=5, batch_size=8, verbose=0)
    losses = np.array(history.losses)
    # each step's loss is the kept fraction * 2 (inverted dropout, p = keep probability):
    # near 1 (6 standard errors of a 1600-draw mean), never exactly 1 every time
    assert np.all(np.abs(losses - 1.0) < 6 * 2 * np.sqrt(0.25 / 1600))
    assert not np.all(losses == 1.0)


def test_dropout_in_fit_is_reproducible_with_the_seed():
    X = np.ones((8, 200), np.float32)
    runs = []
    for _ in range(2):
        random_state.set_seed(42)
        sd = _dropout_model(0.6)
        runs.append(sd.fit((X,), epochs=3, batch_size=8, verbose=0).losses)
    assert runs[0] == runs[1]


def test_keep_probability_one_keeps_everything_in_training():
    x = nd.create(RNG.normal(size=(5, 7)).astype(np.float32))
    with nd.graph_scope(training=True):
        y = nd.nn.dropout(x, 1.0)
    np.testing.assert_array_equal(y.numpy(), x.numpy())


def test_graph_scope_training_drops_and_scales_by_one_over_p():
    x = nd.create(np.full((50, 40), 3.0, np.float32))
    with nd.graph_scope(training=True):
        y = nd.nn.dropout(x, 0.8)
    vals = y.numpy()
    assert set(np.unique(vals).tolist()) <= {0.0, np.float32(3.0 / 0.8)}
    assert abs((vals != 0).mean() - 0.8) < 6 * np.sqrt(0.16 / vals.size)
    with nd.graph_scope():
        z = nd.nn.dropout(x, 0.8)
    np.testing.assert_array_equal(z.numpy(), x.numpy())


def test_compile_training_draws_a_fresh_mask_per_call_and_inference_is_separate():
    x = nd.create(np.ones((30, 30), np.float32))

    def f(a):
        return nd.nn.dropout(a * 2.0, 0.5)
    train, infer = nd.compile(f, training=True), nd.compile(f)
    first, second = train(x).numpy(), train(x).numpy()
    assert set(np.unique(first).tolist()) <= {0.0, 4.0}
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(infer(x).numpy(), np.full((30, 30), 2.0, np.float32))


def test_compiled_training_function_inside_an_inference_scope_keeps_its_mode():
    x = nd.create(np.ones((40, 40), np.float32))
    train = nd.compile(lambda a: nd.nn.dropout(a, 0.5), training=True)
    with nd.graph_scope():
        inner = train(x)
        plain = nd.nn.dropout(x, 0.5)
    assert (inner.numpy() == 0).any()
    np.testing.assert_array_equal(plain.numpy(), x.numpy())


def test_graph_scope_training_batch_norm_uses_batch_statistics():
    x = RNG.normal(size=(6, 3, 2, 2)).astype(np.float64) * 3 + 2
    with nd.graph_scope(training=True):
        y = nd.nn.batch_norm(nd.create(x), nd.zeros(3, dtype="float64"),
                             nd.ones(3, dtype="float64"), nd.ones(3, dtype="float64"),
                             nd.zeros(3, dtype="float64"), axis=1, epsilon=0.0)
    got = y.numpy()
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    std = np.sqrt(((x - mean) ** 2).mean(axis=(0, 2, 3), keepdims=True))
    np.testing.assert_allclose(got, (x - mean) / std, rtol=1e-10, atol=1e-10)


# --- bad inputs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("p", [0.0, -0.1, 1.5])
def test_dropout_refuses_a_keep_probability_outside_0_1(p):
    with pytest.raises(OpError, match=r"dropout.*keep"):
        nd.nn.dropout(nd.ones(3), p)


def test_batch_norm_train_refuses_bad_momentum_and_non_vector_statistics():
    x = nd.ones(4, 3)
    v = nd.ones(3)
    with pytest.raises(OpError, match="momentum"):
        nd.nn.batch_norm_train(x, v, v, v, v, axis=1, momentum=1.5)
    with pytest.raises(OpError, match="running mean must be 1-D"):
        nd.nn.batch_norm_train(x, 0.0, v, v, v, axis=1)
    with pytest.raises(OpError, match="float"):
        nd.nn.batch_norm_train(nd.ones(4, 3, dtype="int32"), v, v, v, v, axis=1)


def test_batch_norm_refuses_a_momentum_outside_0_1_when_recorded():
    v = nd.ones(3)
    with pytest.raises(OpError, match="momentum"):
        nd.nn.batch_norm(nd.ones(4, 3), v, v, v, v, axis=1, momentum=1.5)


def test_a_fit_stopped_by_a_non_finite_batch_keeps_the_earlier_steps_statistics(tmp_path):
    from samediff.training.trainer import NonFiniteError
    path = str(tmp_path / "bn.sdz")
    _bn_model().save(path)
    good, bad = _batch(), _batch()
    bad[1][0, 0] = np.nan
    reference, stopped = SameDiff.load(path), SameDiff.load(path)
    reference.fit(good, epochs=1, batch_size=16, verbose=0)
    both = (np.concatenate([good[0], bad[0]]), np.concatenate([good[1], bad[1]]))
    with pytest.raises(NonFiniteError):
        stopped.fit(both, epochs=1, batch_size=16, shuffle=False, verbose=0)
    for name in ("rm", "rv", "w"):  # the first step's update, not the refused one's (the
        # batch is a slice of a larger array there: BLAS may round the last bit differently)
        np.testing.assert_allclose(_value(stopped, name), _value(reference, name),
                                   rtol=1e-6, atol=1e-7)
    assert not np.array_equal(_value(stopped, "rm"), np.zeros(3, np.float32))
