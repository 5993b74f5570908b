"""Models are values (issue 21): ``copy.deepcopy`` and ``pickle`` of a SameDiff go through the
safe file format; the copy is independent, computes the same, trains on identically (updater
state included) and carries user-defined ops by their registered name. Also what multiprocessing
users pickle besides: variables, NDArrays (views, non-contiguous), TrainingConfig."""
from __future__ import annotations

import copy
import multiprocessing
import pickle

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff, udf
from samediff.errors import GraphError, TracingError, UnknownOpError
from samediff.training import Adam, TrainingConfig

PROTOCOLS = range(2, pickle.HIGHEST_PROTOCOL + 1)


def _model(seed: int = 0) -> SameDiff:
    rng = np.random.default_rng(seed)
    sd = SameDiff.create()
    x, y = sd.placeholder("x", nd.FLOAT, -1, 4), sd.placeholder("y", nd.FLOAT, -1, 3)
    w = sd.var("w", rng.standard_normal((4, 3)).astype(np.float32))
    b = sd.var("b", np.zeros(3, np.float32))
    logits = x.mmul(w) + b
    sd.nn.softmax("probs", logits)
    sd.loss.softmax_cross_entropy("loss", y, logits)
    sd.set_training_config(TrainingConfig(updater=Adam(1e-2), l2=1e-4,
                                          feature_mapping=["x"], label_mapping=["y"]))
    return sd


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    x = rng.random((16, 4), np.float32)
    return x, np.eye(3, dtype=np.float32)[x.argmax(1) % 3]


def _fit(sd: SameDiff, epochs: int = 2) -> None:
    sd.fit(_data(), epochs=epochs, batch_size=8, shuffle=False, verbose=0)


def _weights(sd: SameDiff) -> dict[str, np.ndarray]:
    return {v.name: v.get_arr().numpy().copy() for v in sd.trainable_variables()}


def _state(sd: SameDiff) -> tuple:
    s = sd.updater_state
    return (s.iteration, s.epoch, s.batch,
            {p: {k: a.copy() for k, a in slots.items()} for p, slots in s.arrays.items()})


def _assert_same_state(a: tuple, b: tuple) -> None:
    assert a[:3] == b[:3]
    assert a[3].keys() == b[3].keys()
    for p in a[3]:
        assert a[3][p].keys() == b[3][p].keys()
        for k in a[3][p]:
            np.testing.assert_array_equal(a[3][p][k], b[3][p][k])


COPIES = {f"pickle{p}": (lambda sd, p=p: pickle.loads(pickle.dumps(sd, protocol=p)))
          for p in PROTOCOLS}
COPIES["deepcopy"] = copy.deepcopy


@pytest.mark.parametrize("make_copy", COPIES.values(), ids=list(COPIES))
def test_a_copy_is_complete_independent_and_trains_on_identically(make_copy):
    sd = _model()
    _fit(sd, 1)  # updater state (Adam moments, counters) exists before the copy
    twin = make_copy(sd)
    assert type(twin) is SameDiff and twin is not sd
    x, _ = _data()
    np.testing.assert_array_equal(twin.output({"x": x}, "probs")["probs"].numpy(),
                                  sd.output({"x": x}, "probs")["probs"].numpy())
    assert twin.loss_variables == sd.loss_variables
    assert twin.training_config == sd.training_config
    _assert_same_state(_state(twin), _state(sd))
    before = _weights(sd)
    _fit(twin)  # training the copy leaves the original untouched...
    for name, value in _weights(sd).items():
        np.testing.assert_array_equal(value, before[name])
    assert sd.updater_state.iteration == 2
    _fit(sd)  # ...and the original then trains to exactly the same place
    for name, value in _weights(sd).items():
        np.testing.assert_array_equal(value, _weights(twin)[name])
    _assert_same_state(_state(twin), _state(sd))


def test_a_model_pickled_with_its_variables_stays_one_graph():
    sd = _model()
    w = sd.get_variable("w")
    sd2, w2, probs2 = pickle.loads(pickle.dumps((sd, w, sd.get_variable("probs"))))
    assert w2.sd is sd2 and probs2.sd is sd2 and w2.name == "w"
    lone = pickle.loads(pickle.dumps(w))  # alone, a variable brings its model along
    np.testing.assert_array_equal(lone.get_arr().numpy(), w.get_arr().numpy())
    a, b = copy.deepcopy([sd, w])
    assert b.sd is a and a is not sd


def test_placeholder_arrays_gradients_and_names_are_carried():
    sd = _model()
    x, y = _data()
    sd.get_variable("x").set_array(x)
    sd.get_variable("y").set_array(y)
    grads = sd.calculate_gradients(None, "w")
    twin = copy.deepcopy(sd)
    again = twin.calculate_gradients(None, "w")  # the built gradient variables are reused
    np.testing.assert_array_equal(again["w"].numpy(), grads["w"].numpy())
    assert twin.variable_names() == sd.variable_names()
    assert twin.var(None, nd.FLOAT, 2).name == sd.var(None, nd.FLOAT, 2).name  # same counters


@pytest.fixture
def scaled_add():
    @udf.op(name="values_scaled_add", inputs=("x", "y"), properties={"scale": 1.0}, replace=True)
    def scaled_add(x, y, *, scale):
        "(x + y) * scale"
        return (x + y) * scale
    yield scaled_add
    udf.unregister("values_scaled_add")


def _udf_model(op) -> SameDiff:
    sd = SameDiff.create()
    a = sd.var("a", np.arange(3, dtype=np.float32))
    sd.do_udf(op, a, a, scale=3.0)
    return sd


def test_user_defined_ops_travel_by_registered_name(scaled_add):
    sd = _udf_model(scaled_add)
    out = sd.ops()[-1].outputs[0]
    data = pickle.dumps(sd)
    assert b"scaled_add" in data and b"(x + y)" not in data  # a name, not code
    np.testing.assert_array_equal(pickle.loads(data).output({}, out)[out].numpy(), [0.0, 6.0, 12.0])
    udf.unregister("values_scaled_add")
    try:
        with pytest.raises(UnknownOpError, match=r"values_scaled_add.*pickled SameDiff|"
                                                 r"pickled SameDiff.*values_scaled_add"):
            pickle.loads(data)
    finally:  # the fixture unregisters again at teardown
        udf.register("values_scaled_add", lambda x, y, *, scale: x, inputs=("x", "y"),
                     properties={"scale": 1.0})


def _output_in_child(sd: SameDiff) -> list:
    return sd.output({"x": np.ones((2, 4), np.float32)}, "probs")["probs"].numpy().tolist()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork")
def test_a_model_crosses_a_process_boundary():
    sd = _model()
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply(_output_in_child, (sd,))
    np.testing.assert_array_equal(got, _output_in_child(sd))


def test_graph_values_being_recorded_refuse_to_pickle_by_name():
    def f(x):
        with pytest.raises(GraphError, match="cannot pickle.*pickle the SameDiff"):
            pickle.dumps(x)
        return (x * x).sum()
    nd.grad(f)(nd.ones(2))
    with nd.graph_scope():
        pending = nd.ones(2) + 1
        with pytest.raises(TracingError, match="cannot read"):
            pickle.dumps(pending)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ndarrays_pickle_views_and_strided_arrays_as_their_values(protocol):
    base = nd.create(np.arange(24, dtype=np.float32).reshape(4, 6))
    cases = [base, base[1], base[:, ::2], base.transpose(), nd.create(np.asfortranarray(
        base.numpy())), nd.create(np.float64(2.5)), nd.create(np.zeros((0, 3), np.int32))]
    for x in cases:
        y = pickle.loads(pickle.dumps(x, protocol=protocol))
        assert type(y) is type(x) and y.dtype == x.dtype and y.shape == x.shape
        np.testing.assert_array_equal(y.numpy(), x.numpy())
        if y.size:
            y.addi(1)  # writable, and its own buffer: the original is unchanged
            assert not np.array_equal(y.numpy(), x.numpy())


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_training_config_pickles(protocol):
    config = _model().training_config
    assert pickle.loads(pickle.dumps(config, protocol=protocol)) == config
