"""One recorder: an op on an ``SDVariable`` — through ``nd.*`` functions, the ``nd.math`` /
``nd.nn`` / ``nd.linalg`` namespaces, methods, operators or ``nd.loss`` — goes through ``bind``
and is recorded into the variable's own ``SameDiff``.

Checked here: the op lands in the right graph and computes what the eager op computes on the
same data; gradients of graphs built that way (``sd.calculate_gradients``) match finite
differences of numpy twins written in this file; mixing two graphs, or a traced array with a
graph variable, is a ``GraphError``; a failing op leaves the graph exactly as it was; and what
``nd.loss`` does on graph variables compared with ``sd.loss``.
"""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff, SDVariable
from samediff.errors import GraphError, OpError
from samediff.losses import LossError

RNG = np.random.default_rng(1234)
X = RNG.standard_normal((4, 3))
Y = RNG.standard_normal((4, 3))
W = RNG.standard_normal((3, 2))
Z01 = RNG.uniform(0.0, 1.0, (4, 3))           # labels in [0, 1]
ONEHOT = np.eye(3)[[0, 2, 1, 2]]
CLASSES = np.array([0, 2, 1, 2])


def graph():
    """A SameDiff with float64 placeholders a, b (batch unknown), labels, and a variable w."""
    sd = SameDiff.create()
    a = sd.placeholder("a", "double", -1, 3)
    b = sd.placeholder("b", "double", -1, 3)
    z = sd.placeholder("z", "double", -1, 3)
    onehot = sd.placeholder("onehot", "double", -1, 3)
    classes = sd.placeholder("classes", "int64", -1)
    w = sd.var("w", W.copy())
    return sd, {"a": a, "b": b, "z": z, "onehot": onehot, "classes": classes, "w": w}


FEEDS = {"a": X, "b": Y, "z": Z01, "onehot": ONEHOT, "classes": CLASSES}


def eager_inputs():
    return {"a": nd.create(X), "b": nd.create(Y), "z": nd.create(Z01),
            "onehot": nd.create(ONEHOT), "classes": nd.create(CLASSES), "w": nd.create(W)}


def snapshot(sd: SameDiff) -> tuple:
    return (sd.summary(), len(sd.ops()), tuple(sd.variable_names()), tuple(sd.loss_variables))


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def fd_grad(f, x, h=1e-6):
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + h
        up = f(x)
        x[idx] = old - h
        down = f(x)
        x[idx] = old
        g[idx] = (up - down) / (2 * h)
    return g


# ============================================================================================
# 1. ops on SDVariables record into their graph and compute the eager values
# ============================================================================================

# Each case is written once against the shared API and run both on graph variables and on
# eager NDArrays holding the same data.
OPS = {
    "nd.exp": lambda v: nd.exp(v["a"]),
    "nd.log": lambda v: nd.log(v["a"] * v["a"] + 1.0),
    "nd.nn.relu": lambda v: nd.nn.relu(v["a"]),
    "nd.nn.sigmoid": lambda v: nd.nn.sigmoid(v["a"]),
    "nd.nn.softmax": lambda v: nd.nn.softmax(v["a"], dim=-1),
    "nd.nn.log_softmax": lambda v: nd.nn.log_softmax(v["a"], dim=-1),
    "nd.nn.leaky_relu": lambda v: nd.nn.leaky_relu(v["a"], alpha=0.1),
    "nd.math.add_literal": lambda v: nd.math.add(v["a"], 1.0),
    "nd.math.add": lambda v: nd.math.add(v["a"], v["b"]),
    "nd.math.tanh": lambda v: nd.math.tanh(v["a"]),
    "nd.math.maximum": lambda v: nd.math.maximum(v["a"], v["b"]),
    "nd.math.squared_difference": lambda v: nd.math.squared_difference(v["a"], v["b"]),
    "nd.math.log_sum_exp": lambda v: nd.math.log_sum_exp(v["a"], 1),
    "nd.math.clip_by_value": lambda v: nd.math.clip_by_value(v["a"], clip_min=-0.5, clip_max=0.5),
    "nd.where": lambda v: nd.where(v["a"] > v["b"], v["a"], v["b"] * 2.0),
    "nd.matmul": lambda v: nd.matmul(v["a"], v["w"]),
    "nd.concat": lambda v: nd.concat([v["a"], v["b"]], 0),
    "nd.stack": lambda v: nd.stack([v["a"], v["b"]], axis=1),
    "method.mmul": lambda v: v["a"].mmul(v["w"]),
    "method.sum": lambda v: v["a"].sum(1),
    "method.mean_keep": lambda v: v["a"].mean(0, keep_dims=True),
    "method.max": lambda v: v["a"].max(1),
    "method.reshape": lambda v: v["a"].reshape(-1),
    "method.transpose": lambda v: v["a"].T,
    "method.cast_to": lambda v: v["a"].cast_to("float"),
    "getitem": lambda v: v["a"][1:, ::2] + v["b"][0, ::2] * v["a"][-1, 1],
    "op.matmul": lambda v: v["a"] @ v["w"],
    "op.arith": lambda v: (v["a"] + v["b"]) * 2.0 - v["b"] / (v["a"] * v["a"] + 1.0),
    "op.reflected": lambda v: 2.0 - v["a"] + 3.0 * v["b"] - 1.0 / (v["b"] * v["b"] + 1.0),
    "op.unary": lambda v: -abs(v["a"]) + v["a"] ** 2.0,
    "op.compare": lambda v: v["a"] > v["b"],
    "op.with_ndarray": lambda v: v["a"] * nd.create(np.array([1.0, 2.0, 3.0])),
    "op.with_numpy": lambda v: nd.math.mul(v["a"], np.array([1.0, -1.0, 0.5])),
    "chain": lambda v: nd.nn.relu(v["a"] @ v["w"] + 0.1).sum(1) * nd.exp(v["b"]).mean(1),
}


@pytest.mark.parametrize("name", list(OPS))
def test_op_on_sdvariables_records_into_their_graph(name):
    f = OPS[name]
    sd, v = graph()
    other, _ = graph()
    other_before = snapshot(other)
    nodes_before = len(sd.ops())
    out = f(v)
    assert isinstance(out, SDVariable) and out.sd is sd
    assert len(sd.ops()) > nodes_before
    assert sd.ops()[-1].outputs[0] == out.name  # the result is the newest node of *this* graph
    assert snapshot(other) == other_before
    got = sd.output(FEEDS, out.name)[out.name].numpy()
    expected = f(eager_inputs()).numpy()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)
    else:
        np.testing.assert_array_equal(got, expected)


def test_namespaced_calls_record_into_graph_and_match_numpy():
    """A few independent numpy references (the eager ops have their own tests)."""
    sd, v = graph()
    outs = {
        "exp": (nd.exp(v["a"]), np.exp(X)),
        "relu": (nd.nn.relu(v["a"]), np.maximum(X, 0.0)),
        "add": (nd.math.add(v["a"], 1.0), X + 1.0),
        "sigmoid_w": (nd.nn.sigmoid(v["a"] @ v["w"]), np_sigmoid(X @ W)),
        "log_softmax": (nd.nn.log_softmax(v["b"], dim=-1), np_log_softmax(Y)),
    }
    values = sd.output(FEEDS, *[o.name for o, _ in outs.values()])
    for key, (o, ref) in outs.items():
        np.testing.assert_allclose(values[o.name].numpy(), ref, rtol=1e-12, err_msg=key)
    assert {n.op.name for n in sd.ops()} >= {"exp", "relu", "add", "sigmoid", "matmul",
                                              "log_softmax"}


def test_literals_keep_float32_graphs_float32():
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, 2)
    y = nd.math.add(nd.exp(x) * 2.0, 1.0)
    assert y.dtype == np.float32
    got = sd.output({"x": np.ones((1, 2), np.float32)}, y.name)[y.name]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), np.exp(1.0) * 2 + 1, rtol=1e-6)


def test_naming_an_output():
    sd, v = graph()
    out = nd.exp(v["a"], name="my_exp")
    assert out.name == "my_exp" and sd.has_variable("my_exp")
    np.testing.assert_allclose(sd.output(FEEDS, "my_exp")["my_exp"].numpy(), np.exp(X))


# ============================================================================================
# 1b. nd.loss on SDVariables
# ============================================================================================

def _np_losses():
    p = X
    return {
        "mse": ((p - Y) ** 2).mean(),
        "abs_sum": np.abs(p - Y).sum(),
        "huber_weighted_sum": (np.where(np.abs(p - Y) < 1.0, 0.5 * (p - Y) ** 2,
                                        np.abs(p - Y) - 0.5) * np.array([[1.0, 2.0, 0.5]])).sum(),
        "softmax_ce": -(ONEHOT * np_log_softmax(p)).sum(1).mean(),
        "sparse_softmax_ce": -np_log_softmax(p)[np.arange(4), CLASSES].mean(),
        "sigmoid_ce": (np.log1p(np.exp(p)) - p * Z01).mean(),
        "log_loss": -(Z01 * np.log(np_sigmoid(p) + 1e-7)
                      + (1 - Z01) * np.log(1 - np_sigmoid(p) + 1e-7)).mean(),
        "cosine_none": 1.0 - (Y * p).sum(-1, keepdims=True),
        "hinge": np.maximum(1.0 - (2 * Z01 - 1) * p, 0.0).mean(),
    }


LOSS_CALLS = {
    "mse": lambda v: nd.loss.mean_squared_error(v["b"], v["a"]),
    "abs_sum": lambda v: nd.loss.absolute_difference(v["b"], v["a"], reduction="sum"),
    "huber_weighted_sum": lambda v: nd.loss.huber_loss(
        v["b"], v["a"], weights=np.array([[1.0, 2.0, 0.5]]), reduction="sum"),
    "softmax_ce": lambda v: nd.loss.softmax_cross_entropy(v["onehot"], v["a"]),
    "sparse_softmax_ce": lambda v: nd.loss.sparse_softmax_cross_entropy(v["classes"], v["a"]),
    "sigmoid_ce": lambda v: nd.loss.sigmoid_cross_entropy(v["z"], v["a"]),
    "log_loss": lambda v: nd.loss.log_loss(v["z"], nd.nn.sigmoid(v["a"])),
    "cosine_none": lambda v: nd.loss.cosine_distance(v["b"], v["a"], reduction="none"),
    "hinge": lambda v: nd.loss.hinge_loss(v["z"], v["a"]),
}


@pytest.mark.parametrize("name", list(LOSS_CALLS))
def test_nd_loss_on_sdvariables(name):
    sd, v = graph()
    out = LOSS_CALLS[name](v)
    assert isinstance(out, SDVariable) and out.sd is sd
    got = sd.output(FEEDS, out.name)[out.name].numpy()
    eager = LOSS_CALLS[name](eager_inputs()).numpy()
    np.testing.assert_allclose(got, eager, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got, _np_losses()[name], rtol=1e-9, atol=1e-12)
    # nd.loss records plain ops: no scope, and the result is not made a loss of the graph
    assert sd.loss_variables == []
    assert not any("/" in n.name for n in sd.ops())


def test_nd_loss_versus_sd_loss():
    """Observed behaviour, asserted: ``sd.loss.<name>`` scopes its ops under the loss name,
    names the result after the loss (or ``name=``) and marks it as a loss of the graph;
    ``nd.loss.<name>`` on graph variables records the same ops into the same graph, unscoped,
    ignores ``name=`` (documented: it is for ``sd.loss``) and marks nothing. Both compute the
    same value."""
    sd, v = graph()
    via_nd = nd.loss.mean_squared_error(v["b"], v["a"], name="ignored")
    assert not sd.has_variable("ignored") and sd.loss_variables == []
    via_sd = sd.loss.mean_squared_error(v["b"], v["a"])
    assert via_sd.name == "mean_squared_error" and sd.loss_variables == ["mean_squared_error"]
    scoped = [n.name for n in sd.ops() if n.name.startswith("mean_squared_error/")]
    assert scoped, [n.name for n in sd.ops()]
    named = sd.loss.mean_squared_error(v["b"], v["a"], name="mine")
    assert named.name == "mine" and sd.loss_variables == ["mean_squared_error", "mine"]
    values = sd.output(FEEDS, via_nd.name, via_sd.name, "mine")
    expected = ((X - Y) ** 2).mean()
    for value in values.values():
        assert value.item() == pytest.approx(expected, rel=1e-12)
    # an nd.loss result becomes a loss explicitly, like any variable
    via_nd.mark_as_loss()
    assert via_nd.name in sd.loss_variables


# ============================================================================================
# 2. gradients through recorded ops vs finite differences
# ============================================================================================


def test_gradients_of_an_mlp_built_with_nd_functions():
    rng = np.random.default_rng(5)
    p = {"w1": rng.standard_normal((3, 5)), "b1": rng.standard_normal(5) * 0.1,
         "w2": rng.standard_normal((5, 3)), "b2": rng.standard_normal(3) * 0.1}
    sd = SameDiff.create()
    x = sd.placeholder("x", "double", -1, 3)
    labels = sd.placeholder("labels", "double", -1, 3)
    var = {k: sd.var(k, val.copy()) for k, val in p.items()}
    hidden = nd.nn.relu(nd.matmul(x, var["w1"]) + var["b1"])
    logits = hidden @ var["w2"] + var["b2"]
    loss = nd.loss.softmax_cross_entropy(labels, logits).mark_as_loss()
    assert loss.sd is sd

    def np_loss(q, xx=X):
        h = np.maximum(xx @ q["w1"] + q["b1"], 0.0)
        return -(ONEHOT * np_log_softmax(h @ q["w2"] + q["b2"])).sum(1).mean()

    feeds = {"x": X, "labels": ONEHOT}
    value = sd.output(feeds, loss.name)[loss.name].item()
    assert value == pytest.approx(np_loss(p), rel=1e-12)
    grads = sd.calculate_gradients(feeds, "w1", "b1", "w2", "b2", "x")
    for k, value in p.items():
        expected = fd_grad(lambda leaf, k=k: np_loss({**p, k: leaf}), value)
        np.testing.assert_allclose(grads[k].numpy(), expected, rtol=1e-6, atol=1e-8, err_msg=k)
    np.testing.assert_allclose(grads["x"].numpy(), fd_grad(lambda xx: np_loss(p, xx), X),
                               rtol=1e-6, atol=1e-8)


def test_gradients_through_math_ops_methods_operators_and_losses():
    rng = np.random.default_rng(6)
    w0 = rng.standard_normal(3)
    sd = SameDiff.create()
    x = sd.placeholder("x", "double", -1, 3)
    y = sd.placeholder("y", "double", -1, 3)
    w = sd.var("w", w0.copy())
    xw = x * w
    parts = [
        nd.math.tanh(xw).mean(),
        (nd.exp(x * 0.1) * nd.nn.sigmoid(w)).sum(1).mean(),
        nd.math.square(x - w).max(),
        (nd.where(xw > 0.0, xw, xw * 0.5)[1:, ::2] ** 2.0).sum(),
        nd.loss.huber_loss(y, xw, reduction="sum"),
        nd.loss.sigmoid_cross_entropy(nd.nn.sigmoid(y), xw.T.reshape(-1, 3)),
    ]
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    sd.set_loss_variables(total)

    def np_loss(ww, xx=X):
        xw_ = xx * ww
        d = np.abs(xw_ - Y)
        return (np.tanh(xw_).mean()
                + (np.exp(xx * 0.1) * np_sigmoid(ww)).sum(1).mean()
                + np.square(xx - ww).max()
                + (np.where(xw_ > 0, xw_, xw_ * 0.5)[1:, ::2] ** 2).sum()
                + np.where(d < 1.0, 0.5 * d * d, d - 0.5).sum()
                + (np.log1p(np.exp(xw_.T.reshape(-1, 3))) - xw_.T.reshape(-1, 3)
                   * np_sigmoid(Y)).mean())

    feeds = {"x": X, "y": Y}
    assert sd.output(feeds, total.name)[total.name].item() == pytest.approx(np_loss(w0), rel=1e-12)
    grads = sd.calculate_gradients(feeds, "w", "x")
    np.testing.assert_allclose(grads["w"].numpy(), fd_grad(np_loss, w0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(grads["x"].numpy(), fd_grad(lambda xx: np_loss(w0, xx), X),
                               rtol=1e-6, atol=1e-8)


def test_nd_grad_on_graph_variables_records_into_the_graph():
    """nd.grad applied to SDVariables replays its backward pass through bind, so the gradient
    is an SDVariable of the same graph, and can be differentiated by the graph again."""
    sd = SameDiff.create()
    x = sd.placeholder("x", "double", -1, 3)
    w = sd.var("w", np.array([0.5, -1.0, 2.0]))
    g = nd.grad(lambda t: (t ** 3).sum())(x)
    assert isinstance(g, SDVariable) and g.sd is sd
    np.testing.assert_allclose(sd.output({"x": X}, g.name)[g.name].numpy(), 3 * X ** 2,
                               rtol=1e-12)
    gw = nd.grad(lambda t, xx: (nd.sin(t * xx)).sum())(w, x)  # d/dw = sum_rows x cos(w x)
    assert gw.sd is sd and gw.shape == (3,)
    np.testing.assert_allclose(sd.output({"x": X}, gw.name)[gw.name].numpy(),
                               (X * np.cos(X * np.array([0.5, -1.0, 2.0]))).sum(0), rtol=1e-12)
    # second order through the graph: d/dw sum(3 w^2) = 6 w
    sd.set_loss_variables(nd.grad(lambda t: (t ** 3).sum())(w).sum())
    got = sd.calculate_gradients({}, "w")["w"].numpy()
    np.testing.assert_allclose(got, 6 * np.array([0.5, -1.0, 2.0]), rtol=1e-12)


@pytest.mark.compiled
def test_recorded_graph_values_and_gradients_with_the_compiled_executor():
    sd = SameDiff.create()
    x = sd.placeholder("x", "double", -1, 3)
    w = sd.var("w", W.copy())
    loss = (nd.math.tanh(x @ w) * nd.exp(x.sum(1, keep_dims=True) * 0.1)).mean()
    loss.mark_as_loss()

    def np_loss(ww):
        return (np.tanh(X @ ww) * np.exp(X.sum(1, keepdims=True) * 0.1)).mean()

    assert sd.output({"x": X}, loss.name)[loss.name].item() == pytest.approx(np_loss(W), rel=1e-9)
    grads = sd.calculate_gradients({"x": X}, "w")
    np.testing.assert_allclose(grads["w"].numpy(), fd_grad(np_loss, W), rtol=1e-6, atol=1e-8)


# ============================================================================================
# 3. errors leave graphs unchanged
# ============================================================================================


# name -> (mix, ops each graph may record before the mixing op: they run on one graph only)
MIXES = {
    "add": (lambda x, z: x + z, [], []),
    "rmul": (lambda x, z: z * x, [], []),
    "nd.math.add": (lambda x, z: nd.math.add(x, z), [], []),
    "exp-then-sub": (lambda x, z: nd.exp(x) - z, ["exp"], []),
    "mmul": (lambda x, z: x.mmul(z.T), [], ["transpose"]),
    "concat": (lambda x, z: nd.concat([x, z], 0), [], []),
    "where": (lambda x, z: nd.where(x > 0.0, x, z), ["gt"], []),
    "mse": (lambda x, z: nd.loss.mean_squared_error(z, x), [], []),
}


@pytest.mark.parametrize("name", list(MIXES))
def test_mixing_two_graphs_is_an_error_and_changes_neither(name):
    mix, first_ops, second_ops = MIXES[name]
    sd1 = SameDiff.create()
    x = sd1.placeholder("x", "double", -1, 3)
    sd2 = SameDiff.create()
    z = sd2.placeholder("z", "double", -1, 3)
    before1, before2 = snapshot(sd1), snapshot(sd2)
    with pytest.raises(GraphError, match="another graph") as info:
        mix(x, z)
    assert "cannot be mixed" in str(info.value)
    for sd, ops, before in ((sd1, first_ops, before1), (sd2, second_ops, before2)):
        if ops:
            assert [n.op.name for n in sd.ops()] == ops
        else:
            assert snapshot(sd) == before


def test_traced_array_and_graph_variable_cannot_be_mixed():
    sd, v = graph()
    before = snapshot(sd)
    with nd.graph_scope():
        t = nd.create(X) * 2.0
        for mix in (lambda: v["a"] + t, lambda: t + v["a"], lambda: nd.math.maximum(v["a"], t),
                    lambda: nd.loss.mean_squared_error(t, v["a"]), lambda: t @ v["w"]):
            with pytest.raises(GraphError, match="traced arrays"):
                mix()
    assert snapshot(sd) == before
    compiled = nd.compile(lambda arg: arg + v["a"])
    with pytest.raises(GraphError, match="traced arrays"):
        compiled(nd.create(X))
    assert snapshot(sd) == before


@pytest.mark.parametrize("bad", [
    lambda v: v["a"].mmul(v["q"]),                          # inner dims 3 vs 4
    lambda v: v["a"] + v["q"],                              # (?, 3) + (?, 4)
    lambda v: nd.math.add(v["a"], np.ones(4)),              # a numpy constant that misfits
    lambda v: v["a"] * nd.create(np.ones((2, 5))),          # an NDArray constant that misfits
    lambda v: nd.concat([v["a"], v["q"]], 0),
    lambda v: nd.nn.softmax(v["a"], dim=5),                 # a bad attribute
    lambda v: v["a"].reshape(5, 7),                         # 12 elements per 4 rows: never 35
    lambda v: nd.loss.mean_squared_error(v["q"], v["a"]),   # LossError, before any op
    lambda v: nd.loss.huber_loss(v["b"], v["a"], weights=np.ones((1, 4))),
], ids=["mmul", "add", "numpy-constant", "ndarray-constant", "concat", "softmax-dim",
        "reshape", "mse-shapes", "weights"])
def test_a_failing_op_leaves_the_graph_unchanged(bad):
    sd = SameDiff.create()
    v = {"a": sd.placeholder("a", "double", 4, 3), "b": sd.placeholder("b", "double", 4, 3),
         "q": sd.placeholder("q", "double", 4, 4)}
    nd.exp(v["a"])  # something already there
    before = snapshot(sd)
    with pytest.raises((OpError, GraphError)) as info:
        bad(v)
    assert snapshot(sd) == before, type(info.value).__name__
    # the graph still works
    out = nd.exp(v["a"])
    np.testing.assert_allclose(sd.output({"a": X}, out.name)[out.name].numpy(), np.exp(X))


def test_loss_errors_are_loss_errors():
    sd, v = graph()
    before = snapshot(sd)
    with pytest.raises(LossError, match="same shape"):
        nd.loss.mean_squared_error(v["b"], v["a"] @ v["w"])
    after_matmul = snapshot(sd)  # the matmul itself was a valid op, and stays
    assert after_matmul[1] == before[1] + 1
    with pytest.raises(LossError, match="reduction"):
        nd.loss.mean_squared_error(v["b"], v["a"], reduction="median")
    with pytest.raises(LossError, match="integer class"):
        nd.loss.sparse_softmax_cross_entropy(v["b"], v["a"])
    assert snapshot(sd) == after_matmul


@pytest.mark.parametrize("which", ["nd", "sd"])
@pytest.mark.parametrize("labels_from", ["traced", "other_graph"])
def test_a_failing_composite_loss_leaves_the_graph_unchanged(which, labels_from):
    sd, v = graph()
    other, w = graph()
    before, other_before = snapshot(sd), snapshot(other)
    namespace = nd.loss if which == "nd" else sd.loss
    if labels_from == "other_graph":
        with pytest.raises(GraphError, match="another graph"):
            namespace.softmax_cross_entropy(w["onehot"], v["a"])
    else:
        with nd.graph_scope():
            t = nd.create(Z01) * 1.0
            with pytest.raises(GraphError, match="traced arrays"):
                namespace.sigmoid_cross_entropy(t, v["a"])
    assert snapshot(sd) == before and snapshot(other) == other_before
