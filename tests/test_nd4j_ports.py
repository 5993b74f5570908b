"""Literal ports of the seeds' ND4J code (seed 000's MNIST walkthrough, seed 001's graph
inspection): the same method names, argument orders and overloads as the Java."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff.errors import GraphError
from samediff.init import (ConstantInitScheme, IdentityInitScheme, LecunUniformInitScheme,
                           OneInitScheme, ReluInitScheme, UniformInitScheme, WeightInit,
                           XavierInitScheme, ZeroInitScheme)
from samediff.training import Adam, TrainingConfig


def seed_000_topology() -> nd.SameDiff:
    """Seed 000, line by line (its typos in names kept: ``lables``)."""
    samediff = nd.SameDiff.create()
    input = samediff.placeHolder("input", nd.FLOAT, -1, 784)  # noqa: A001 - the seed's name
    weights_1 = samediff.var(XavierInitScheme('c', 784, 100), nd.FLOAT, 784, 100)
    bias_1 = samediff.var(XavierInitScheme('c', 100), nd.FLOAT, 100)
    out_1 = samediff.nn.relu(input.mmul(weights_1).add(bias_1))
    weights_2 = samediff.var(XavierInitScheme('c', 100, 10), nd.FLOAT, 100, 10)
    bias_2 = samediff.var(XavierInitScheme('c', 10), nd.FLOAT, 10)
    samediff.nn.softmax("output", out_1.mmul(weights_2).add(bias_2))
    samediff.placeHolder("lables", 10)
    return samediff


def test_seed_000_topology_and_config_port_literally(tmp_path):
    samediff = seed_000_topology()
    assert samediff.getShapeForVarName("output") == (-1, 10)
    assert samediff.get_variable("lables").shape == (10,)
    assert samediff.get_variable("lables").dtype == np.float32  # FLOAT when left out
    names = samediff.variableNames()
    assert names[:3] == ["input", "var", "var_1"]  # unnamed variables get fresh names
    config = (TrainingConfig.Builder()
              .l2(1e-4)
              .updater(Adam(1e-3))
              .dataSetFeatureMapping("input")
              .dataSetLabelsMapping("lables")
              .build())
    samediff.setTrainingConfig(config)
    assert samediff.training_config.feature_mapping == ["input"]
    assert samediff.training_config.label_mapping == ["lables"]

    model_file_name = str(tmp_path / "sameDiffModel.fd")
    samediff.asFlatFile(model_file_name)
    from_file = nd.SameDiff.fromFlatFile(model_file_name)
    feed = {"input": np.random.default_rng(0).random((3, 784), dtype=np.float32)}
    np.testing.assert_array_equal(from_file.output(feed, "output")["output"].numpy(),
                                  samediff.output(feed, "output")["output"].numpy())
    assert from_file.training_config == config


def test_load_and_save_take_nd4js_updater_state_flag(tmp_path):
    sd = nd.SameDiff.create()
    x = sd.placeHolder("x", nd.FLOAT, -1, 2)
    w = sd.var("w", XavierInitScheme('c', 2, 1), nd.FLOAT, 2, 1)
    ((x.mmul(w) - 1.0) ** 2).mean().markAsLoss()
    sd.setTrainingConfig(TrainingConfig.Builder().updater(Adam(0.1))
                         .dataSetFeatureMapping("x").build())
    sd.fit([{"x": np.ones((4, 2), np.float32)}], 1, verbose=0)
    assert sd.updater_state.iteration == 1
    sd.save(tmp_path / "m.sdz", False)                    # ND4J: save(file, saveUpdaterState)
    assert nd.SameDiff.load(tmp_path / "m.sdz").updater_state.iteration == 0
    sd.save(tmp_path / "m.sdz", True)
    assert nd.SameDiff.load(tmp_path / "m.sdz").updater_state.iteration == 1
    assert nd.SameDiff.load(tmp_path / "m.sdz", False).updater_state.iteration == 0


@pytest.mark.parametrize("scheme, shape, check", [
    (XavierInitScheme('c', 784, 100), (784, 100), lambda a: abs(a.std() - (2 / 884) ** 0.5) < 0.005),
    (ReluInitScheme('c', 400), (400, 50), lambda a: abs(a.std() - (2 / 400) ** 0.5) < 0.005),
    (LecunUniformInitScheme('c', 300), (300, 40),
     lambda a: np.abs(a).max() <= (3 / 300) ** 0.5 + 1e-7),
    (UniformInitScheme('c', 25), (1000,), lambda a: np.abs(a).max() <= 0.2 + 1e-7),
    (ZeroInitScheme('c'), (3, 3), lambda a: not a.any()),
    (OneInitScheme('c'), (3,), lambda a: (a == 1).all()),
    (ConstantInitScheme('c', 2.5), (2, 2), lambda a: (a == 2.5).all()),
    (IdentityInitScheme('c'), (3, 3), lambda a: (a == np.eye(3)).all()),
])
def test_weight_init_scheme_classes(scheme, shape, check):
    assert isinstance(scheme, WeightInit)
    sd = nd.SameDiff.create()
    v = sd.var("v", scheme, nd.FLOAT, *shape)
    arr = v.get_arr().numpy()
    assert arr.shape == shape and arr.dtype == np.float32 and check(arr.astype(np.float64))


def test_bad_scheme_order_and_bad_unnamed_var_are_named_errors():
    with pytest.raises(GraphError, match="order must be 'c' or 'f'"):
        XavierInitScheme('x', 3, 3)
    with pytest.raises(GraphError, match="cannot interpret argument"):
        nd.SameDiff.create().var(object(), nd.FLOAT, 2)
