"""The autodiff engine: losses, which variables get gradients, errors, broadcasting with -1
dims, higher derivatives, the backward graph as an ordinary graph, and gradient-checked
compositions (MLP + softmax cross-entropy, layer norm, broadcast chains)."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff, VariableType
from samediff.gradcheck import check_gradients
from samediff.ops import REGISTRY
from samediff.ops.registry import NONDIFF

RNG = np.random.default_rng(42)


def test_every_op_declares_differentiability():
    undeclared = sorted(op.name for op in REGISTRY.values() if op.grad is None)
    assert not undeclared, f"ops with neither a gradient rule nor NONDIFF: {undeclared}"


def test_quadratic_gradients_and_gradient_variable():
    sd = SameDiff.create()
    w = sd.var("w", np.array([1.0, -2.0, 3.0]))
    loss = (w * w).sum(name="loss")
    loss.mark_as_loss()
    assert sd.loss_variables == ["loss"]
    g = sd.calculate_gradients({}, "w")["w"].numpy()
    np.testing.assert_allclose(g, [2.0, -4.0, 6.0])
    gv = w.gradient()
    assert gv.name == "w-grad" and gv.variable_type is VariableType.ARRAY
    np.testing.assert_allclose(gv.eval().numpy(), g)


def test_several_losses_are_summed():
    sd = SameDiff.create()
    w = sd.var("w", np.array([1.0, 2.0]))
    (w * 3.0).sum().mark_as_loss()
    (w * w).sum().mark_as_loss()
    np.testing.assert_allclose(sd.calculate_gradients({}, "w")["w"].numpy(), [5.0, 7.0])


def test_default_gradients_cover_trainable_variables_only():
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.DOUBLE, -1, 2)
    c = sd.constant("c", np.array([1.0, 1.0]))
    w = sd.var("w", np.array([[1.0], [2.0]]))
    (x.mmul(w) + c.sum()).sum().mark_as_loss()
    feeds = {"x": np.ones((3, 2))}
    assert set(sd.calculate_gradients(feeds)) == {"w"}
    both = sd.calculate_gradients(feeds, "w", "x")   # placeholders only when asked
    np.testing.assert_allclose(both["x"].numpy(), np.tile([1.0, 2.0], (3, 1)))
    np.testing.assert_allclose(both["w"].numpy(), [[3.0], [3.0]])


def test_gradient_errors_are_named():
    sd = SameDiff.create()
    w = sd.var("w", np.array([1.0, 2.0]))
    unused = sd.var("unused", np.array([1.0]))
    with pytest.raises(nd.GradientError, match="mark_as_loss"):
        sd.calculate_gradients({}, "w")
    (w * 2.0).sum().mark_as_loss()
    with pytest.raises(nd.GradientError, match="does not affect any loss"):
        sd.calculate_gradients({}, "unused")
    assert unused.name == "unused"
    # a path that only goes through an integer-valued op carries no gradient
    sd2 = SameDiff.create()
    v = sd2.var("v", np.array([0.3, 0.9]))
    (v.argmax().cast(nd.DOUBLE) * 1.0).mark_as_loss()
    with pytest.raises(nd.GradientError, match="argmax"):
        sd2.calculate_gradients({}, "v")
    assert REGISTRY["argmax"].grad is NONDIFF


def test_zero_gradient_ops_give_documented_zeros():
    sd = SameDiff.create()
    v = sd.var("v", np.array([0.3, 1.7, -2.2]))
    (sd.math.floor(v) + sd.math.round(v) + sd.math.sign(v)).sum().mark_as_loss()
    np.testing.assert_array_equal(sd.calculate_gradients({}, "v")["v"].numpy(), [0.0, 0.0, 0.0])


def test_broadcasting_is_undone_with_unknown_batch_dims():
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.DOUBLE, -1, 3)
    b = sd.var("b", np.array([0.1, 0.2, 0.3]))
    s = sd.var("s", np.array(2.0))
    col = sd.var("col", np.ones((1, 3)))
    ((x + b) * s * col).sum().mark_as_loss()
    for batch in (1, 4):
        feeds = {"x": RNG.random((batch, 3))}
        g = sd.calculate_gradients(feeds, "b", "s", "col")
        assert g["b"].shape == (3,) and g["s"].shape == () and g["col"].shape == (1, 3)
        np.testing.assert_allclose(g["b"].numpy(), np.full(3, 2.0 * batch))
        assert check_gradients(sd, feeds).passed


def test_second_derivative_through_the_backward_graph():
    sd = SameDiff.create()
    w = sd.var("w", np.array([0.5, -1.0, 2.0]))
    (w * w * w).sum().mark_as_loss()
    g = w.gradient()                       # 3 w^2, an ordinary graph variable
    sd2_loss = g.sum(name="gsum")
    sd.set_loss_variables(sd2_loss)
    hess_diag = sd.calculate_gradients({}, "w")["w"].numpy()
    np.testing.assert_allclose(hess_diag, 6.0 * np.array([0.5, -1.0, 2.0]))


def test_backward_graph_saves_and_loads(tmp_path):
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.FLOAT, -1, 4)
    w = sd.var("w", RNG.standard_normal((4, 2)).astype(np.float32))
    sd.nn.softmax(x.mmul(w)).mean().mark_as_loss()
    feeds = {"x": RNG.standard_normal((5, 4)).astype(np.float32)}
    before = sd.calculate_gradients(feeds, "w")["w"].numpy()
    sd.save(tmp_path / "g.sdz")
    back = SameDiff.load(tmp_path / "g.sdz")
    assert back.has_variable("w-grad")
    np.testing.assert_allclose(back.output(feeds, "w-grad")["w-grad"].numpy(), before, rtol=1e-6)


def _softmax_cross_entropy(sd, logits, labels):
    return (labels * sd.nn.log_softmax(logits)).sum(1).mean().neg()


def test_mlp_with_softmax_cross_entropy_gradcheck():
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.DOUBLE, -1, 5)
    y = sd.placeholder("y", nd.DOUBLE, -1, 3)
    w1 = sd.var("w1", RNG.standard_normal((5, 4)) * 0.5)
    b1 = sd.var("b1", RNG.standard_normal(4) * 0.1)
    w2 = sd.var("w2", RNG.standard_normal((4, 3)) * 0.5)
    b2 = sd.var("b2", RNG.standard_normal(3) * 0.1)
    h = sd.math.tanh(x.mmul(w1).add(b1))
    _softmax_cross_entropy(sd, h.mmul(w2).add(b2), y).mark_as_loss()
    feeds = {"x": RNG.standard_normal((6, 5)), "y": np.eye(3)[RNG.integers(0, 3, 6)]}
    result = check_gradients(sd, feeds)
    assert result.passed, str(result)


def test_layer_norm_and_broadcast_chain_gradcheck():
    sd = SameDiff.create()
    x = sd.var("x", RNG.standard_normal((3, 4)))
    gain = sd.var("gain", 1.0 + 0.1 * RNG.standard_normal(4))
    bias = sd.var("bias", 0.1 * RNG.standard_normal(4))
    row = sd.var("row", RNG.standard_normal((3, 1)))
    scale = sd.var("scale", np.array(0.7))
    y = sd.nn.layer_norm(x, gain, bias)
    z = sd.nn.gelu((y * row + scale) / (1.0 + scale * scale))
    (z * sd.constant(RNG.standard_normal((3, 4)))).sum().mark_as_loss()
    result = check_gradients(sd)
    assert result.passed, str(result)


def test_float32_graph_gets_float32_gradients():
    sd = SameDiff.create()
    w = sd.var("w", np.ones((2, 2), np.float32))
    (w * 2.0).sum().mark_as_loss()
    g = sd.calculate_gradients({}, "w")["w"]
    assert g.dtype == np.float32


def test_table_validation_rejects_an_op_without_a_gradient_decision():
    from samediff.ops.registry import OpDef
    from samediff.ops.validate import OpTableError, check_op, validate_table
    op = OpDef(name="undecided", inputs=("x",), attr_kinds={}, infer=lambda t, a: t[0],
               impl=lambda x: x, doc="An op that forgot its gradient.")
    assert any("gradient" in p for p in check_op(op))
    with pytest.raises(OpTableError, match="undecided"):
        validate_table([op])
