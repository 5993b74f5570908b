"""User-defined ops: seed 001's "add" UDF with its own gradient, saved and reloaded; UDFs in
eager code, graphs, traces, gradient checks; registration errors."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff, udf
from samediff.errors import OpError, UnknownOpError
from samediff.gradcheck import check_gradients


@pytest.fixture
def my_add_udf():
    """Seed 001's MyAddUdf: forward = x + y, gradient = (g, g), no properties."""
    @udf.op(inputs=("x", "y"), replace=True)
    def my_add_udf(x, y):
        "Adds x and y (seed 001's example UDF)."
        return np.add(x, y)

    calls = []

    @my_add_udf.gradient
    def _(F, ins, outs, gs, attrs):
        calls.append(1)
        return [gs[0], gs[0]]

    my_add_udf.grad_calls = calls
    yield my_add_udf
    udf.unregister("my_add_udf")


def _seed_graph(my_add_udf):
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.FLOAT, -1, 128)
    y = sd.placeholder("y", nd.FLOAT, -1, 128)
    (result,) = sd.do_udf(my_add_udf, x, y)
    loss = result.mean(name="loss")
    loss.mark_as_loss()
    return sd


def test_seed_001_udf_graph_save_and_reload(my_add_udf, tmp_path):
    sd = _seed_graph(my_add_udf)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.random((4, 128), np.float32), "y": rng.random((4, 128), np.float32)}
    before = sd.output(feeds, "loss")["loss"].item()
    assert before == pytest.approx(float(np.mean(feeds["x"] + feeds["y"])), rel=1e-6)

    path = tmp_path / "model_with_udf.sdz"
    sd.save(path)
    reloaded = SameDiff.load(path)
    assert reloaded.output(feeds, "loss")["loss"].item() == pytest.approx(before, rel=1e-7)
    grads = reloaded.calculate_gradients(feeds, "x", "y")
    expected = np.full((4, 128), 1.0 / (4 * 128), np.float32)
    np.testing.assert_allclose(grads["x"].numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(grads["y"].numpy(), expected, rtol=1e-6)
    assert my_add_udf.grad_calls, "the UDF's own gradient rule was used"


def test_loading_a_graph_whose_udf_is_not_registered_names_it(my_add_udf, tmp_path):
    path = tmp_path / "m.sdz"
    _seed_graph(my_add_udf).save(path)
    udf.unregister("my_add_udf")
    try:
        with pytest.raises(UnknownOpError, match="my_add_udf"):
            SameDiff.load(path)
    finally:  # the fixture unregisters again at teardown
        udf.register("my_add_udf", np.add, inputs=("x", "y"))


def test_udf_eager_method_trace_and_gradcheck(my_add_udf):
    a, b = nd.create([1.0, 2.0]), nd.create([10.0, 20.0])
    assert my_add_udf(a, b).numpy().tolist() == [11.0, 22.0]
    assert nd.my_add_udf(a, b).numpy().tolist() == [11.0, 22.0]
    assert a.my_add_udf(b).numpy().tolist() == [11.0, 22.0]
    with nd.graph_scope():
        lazy = my_add_udf(a, 1.0)
    assert lazy.numpy().tolist() == [2.0, 3.0]

    sd = SameDiff.create()
    v = sd.var("v", np.array([0.3, -0.7, 1.1]))
    w = sd.var("w", np.array([2.0, 0.5, -1.0]))
    (s,) = sd.do_udf(my_add_udf, v, w)
    (s * s).sum().mark_as_loss()
    result = check_gradients(sd)
    assert result.passed, str(result)


def test_udf_properties_are_attributes_and_are_saved(tmp_path):
    @udf.op(inputs=("x",), properties={"threshold": 0.5, "mode": 1}, replace=True)
    def clip_above(x, *, threshold, mode):
        "Values above threshold become threshold * mode."
        return np.where(x > threshold, threshold * mode, x)
    try:
        x = nd.create([0.1, 0.9])
        assert clip_above(x, threshold=0.2, mode=2).numpy().tolist() == pytest.approx([0.1, 0.4])
        sd = SameDiff.create()
        p = sd.placeholder("p", nd.FLOAT, 2)
        (out,) = sd.do_udf(clip_above, p, threshold=0.3, mode=3, name="out")
        sd.save(tmp_path / "g.sdz")
        back = SameDiff.load(tmp_path / "g.sdz")
        node = [n for n in back.ops() if n.op.name == "clip_above"][0]
        assert (node.attrs.threshold, node.attrs.mode) == (0.3, 3)
        got = back.output({"p": np.array([0.1, 0.9], np.float32)}, "out")["out"].numpy()
        assert got.tolist() == pytest.approx([0.1, 0.9])
        with pytest.raises(OpError, match="mode"):
            clip_above(x, mode="high")
    finally:
        udf.unregister("clip_above")


def test_udf_without_gradient_gives_clear_error():
    @udf.op(inputs=("x",), replace=True)
    def no_grad_udf(x):
        "Squares x but declares no gradient."
        return x * x
    try:
        sd = SameDiff.create()
        v = sd.var("v", np.array([1.0, 2.0]))
        (out,) = sd.do_udf(no_grad_udf, v)
        out.sum().mark_as_loss()
        with pytest.raises(nd.GradientError, match="no_grad_udf"):
            sd.calculate_gradients({}, "v")
    finally:
        udf.unregister("no_grad_udf")


def test_registration_errors():
    with pytest.raises(OpError, match="already exists"):
        udf.register("add", np.add, inputs=("x", "y"))
    with pytest.raises(OpError, match="property"):
        udf.register("bad_props", np.negative, properties={"weights": [1, 2]})
    with pytest.raises(OpError, match="not a user-defined op"):
        udf.unregister("exp")
    assert "bad_props" not in nd.SameDiff.create().all_ops.__dir__()
