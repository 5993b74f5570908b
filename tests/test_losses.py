"""Loss functions (``samediff/losses.py``): eager vs an independent float64 numpy reference for
every loss x reduction x weights, label smoothing, graphs vs eager, gradient checks, numerical
stability and bad inputs."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from nd4py import LossError, LossReduce, OpError, SameDiff
from samediff.gradcheck import check_gradients

B, C = 5, 4  # batch, classes / features
REDUCTIONS = list(LossReduce)
LOSS_NAMES = ["softmax_cross_entropy", "sparse_softmax_cross_entropy", "sigmoid_cross_entropy",
              "mean_squared_error", "absolute_difference", "log_loss", "huber_loss",
              "cosine_distance", "hinge_loss", "cross_entropy"]


# --- the independent reference, straight from the formulas ----------------------------------

def _log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def ref_per_example(name, labels, preds, label_smoothing=0.0, epsilon=1e-7, delta=1.0,
                    dimension=-1):
    z, x = np.asarray(labels, np.float64), np.asarray(preds, np.float64)
    if name == "softmax_cross_entropy":
        z = z * (1 - label_smoothing) + label_smoothing / z.shape[-1]
        return -(z * _log_softmax(x)).sum(axis=-1)
    if name == "sparse_softmax_cross_entropy":
        return -np.take_along_axis(_log_softmax(x), np.asarray(labels)[..., None], -1)[..., 0]
    if name == "sigmoid_cross_entropy":
        z = z * (1 - label_smoothing) + 0.5 * label_smoothing
        s = 1 / (1 + np.exp(-x))
        return -(z * np.log(s) + (1 - z) * np.log(1 - s))
    if name == "mean_squared_error":
        return (x - z) ** 2
    if name == "absolute_difference":
        return np.abs(x - z)
    if name == "log_loss":
        return -(z * np.log(x + epsilon) + (1 - z) * np.log(1 - x + epsilon))
    if name == "huber_loss":
        d = np.abs(x - z)
        return np.where(d < delta, 0.5 * d ** 2, delta * d - 0.5 * delta ** 2)
    if name == "cosine_distance":
        return 1 - (z * x).sum(axis=dimension, keepdims=True)
    if name == "hinge_loss":
        return np.maximum(0.0, 1 - (2 * z - 1) * x)
    if name == "cross_entropy":
        return -(z * np.log(np.clip(x, epsilon, 1.0))).sum(axis=-1)
    raise AssertionError(name)


def ref_reduce(e, weights, mode):
    w = np.ones_like(e) if weights is None else np.asarray(weights, np.float64)
    if w.ndim and w.ndim < e.ndim:  # per-example weights line up with the leading dims
        w = w.reshape(w.shape + (1,) * (e.ndim - w.ndim))
    w = np.broadcast_to(w, e.shape)
    weighted = e * w
    if mode is LossReduce.NONE:
        return weighted
    if mode is LossReduce.SUM:
        return weighted.sum()
    den = w.sum() if mode is LossReduce.MEAN_BY_WEIGHT else np.count_nonzero(w)
    return 0.0 if den == 0 else weighted.sum() / den


def sample(name, rng, dtype=np.float64):
    """(labels, predictions) typical of each loss."""
    if name == "softmax_cross_entropy":
        labels = rng.dirichlet(np.ones(C), B)
        return labels.astype(dtype), rng.normal(size=(B, C)).astype(dtype) * 2
    if name == "sparse_softmax_cross_entropy":
        return rng.integers(0, C, B), rng.normal(size=(B, C)).astype(dtype) * 2
    if name == "sigmoid_cross_entropy":
        return rng.uniform(size=(B, C)).astype(dtype), rng.normal(size=(B, C)).astype(dtype) * 3
    if name == "cross_entropy":  # probabilities, one with a class underflowed to 0
        probs = rng.dirichlet(np.ones(C), B)
        probs[0] = [0.0, 0.5, 0.5, 0.0][:C]
        return np.eye(C)[rng.integers(1, 3, B)].astype(dtype), probs.astype(dtype)
    if name == "log_loss":
        return (rng.integers(0, 2, (B, C)).astype(dtype),
                rng.uniform(0.05, 0.95, (B, C)).astype(dtype))
    if name == "hinge_loss":
        return rng.integers(0, 2, (B, C)).astype(dtype), rng.normal(size=(B, C)).astype(dtype)
    if name == "cosine_distance":
        a, b = rng.normal(size=(2, B, C))
        a /= np.linalg.norm(a, axis=-1, keepdims=True)
        b /= np.linalg.norm(b, axis=-1, keepdims=True)
        return a.astype(dtype), b.astype(dtype)
    return rng.normal(size=(B, C)).astype(dtype), (rng.normal(size=(B, C)) * 1.5).astype(dtype)


def example_weights(rng):
    w = rng.uniform(0.5, 2.0, B)
    w[1] = 0.0  # a zero weight: the two means differ
    return w


def loss_call(namespace, name):
    """``namespace.<name>`` taking (labels, predictions, ...) like every loss but one:
    ``cross_entropy`` takes probabilities first (seed 000's ``crossEntropy(output, labels)``)."""
    fn = getattr(namespace, name)
    if name != "cross_entropy":
        return fn

    def labels_first(*args, **kwargs):
        lead = 1 if args and isinstance(args[0], str) else 0  # an ND4J leading output name
        args = list(args)
        args[lead], args[lead + 1] = args[lead + 1], args[lead]
        return fn(*args, **kwargs)
    return labels_first


def eager(name, *args, **kwargs):
    return loss_call(nd.loss, name)(*args, **kwargs)


# --- eager vs reference ------------------------------------------------------------------------

@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("mode", REDUCTIONS, ids=[m.name for m in REDUCTIONS])
@pytest.mark.parametrize("name", LOSS_NAMES)
def test_eager_matches_reference(name, mode, weighted):
    rng = np.random.default_rng(abs(hash((name, mode.name, weighted))) % 2**32)
    labels, preds = sample(name, rng)
    weights = example_weights(rng) if weighted else None
    got = eager(name, nd.create(labels), nd.create(preds), weights, mode)
    want = ref_reduce(ref_per_example(name, labels, preds), weights, mode)
    assert isinstance(got, nd.NDArray) and got.dtype == np.float64
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", REDUCTIONS, ids=[m.name for m in REDUCTIONS])
@pytest.mark.parametrize("name,smoothing", [("softmax_cross_entropy", 0.1),
                                            ("softmax_cross_entropy", 0.3),
                                            ("sigmoid_cross_entropy", 0.2)])
def test_label_smoothing(name, smoothing, mode):
    rng = np.random.default_rng(7)
    labels, logits = sample(name, rng)
    weights = example_weights(rng)
    got = eager(name, labels, logits, weights, mode, label_smoothing=smoothing)
    want = ref_reduce(ref_per_example(name, labels, logits, label_smoothing=smoothing), weights,
                      mode)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)
    plain = eager(name, labels, logits, weights, mode)
    assert not np.allclose(got.numpy(), plain.numpy())


@pytest.mark.parametrize("name,param", [("log_loss", {"epsilon": 1e-3}),
                                        ("huber_loss", {"delta": 0.3}),
                                        ("huber_loss", {"delta": 5.0})])
def test_static_parameters(name, param):
    rng = np.random.default_rng(3)
    labels, preds = sample(name, rng)
    got = eager(name, labels, preds, reduction="none", **param)
    np.testing.assert_allclose(got.numpy(), ref_per_example(name, labels, preds, **param),
                               rtol=1e-10)


def test_cosine_distance_other_dimension():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(2, 3, B))
    got = nd.loss.cosine_distance(a, b, None, "none", 0)
    assert got.shape == (1, B)
    np.testing.assert_allclose(got.numpy(), ref_per_example("cosine_distance", a, b, dimension=0))


def test_sparse_and_dense_softmax_agree():
    rng = np.random.default_rng(5)
    classes, logits = sample("sparse_softmax_cross_entropy", rng)
    one_hot = np.eye(C)[classes]
    weights = example_weights(rng)
    for mode in REDUCTIONS:
        sparse = nd.loss.sparse_softmax_cross_entropy(classes, logits, weights, mode)
        dense = nd.loss.softmax_cross_entropy(one_hot, logits, weights, mode)
        np.testing.assert_allclose(sparse.numpy(), dense.numpy(), rtol=1e-12)
    # ND4J's argument order (logits, labels) is recognised from the dtypes
    np.testing.assert_allclose(nd.loss.sparseSoftmaxCrossEntropy(logits, classes).numpy(),
                               nd.loss.sparse_softmax_cross_entropy(classes, logits).numpy())


@pytest.mark.parametrize("wshape", [(), (B,), (B, 1), (B, C), (1, C)])
def test_weight_shapes_for_elementwise_loss(wshape):
    rng = np.random.default_rng(6)
    labels, preds = sample("mean_squared_error", rng)
    w = rng.uniform(0.1, 2.0, wshape)
    for mode in REDUCTIONS:
        got = nd.loss.mean_squared_error(labels, preds, w, mode)
        np.testing.assert_allclose(got.numpy(), ref_reduce((preds - labels) ** 2, w, mode),
                                   rtol=1e-10)


@pytest.mark.parametrize("wshape", [(), (B,), (B, 1)])
def test_weight_shapes_for_softmax_loss(wshape):
    rng = np.random.default_rng(8)
    labels, logits = sample("softmax_cross_entropy", rng)
    w = rng.uniform(0.1, 2.0, wshape)
    e = ref_per_example("softmax_cross_entropy", labels, logits)
    for mode in REDUCTIONS:
        got = nd.loss.softmax_cross_entropy(labels, logits, w, mode)
        np.testing.assert_allclose(got.numpy(), ref_reduce(e, w.reshape(w.shape[:1]), mode),
                                   rtol=1e-10)


def test_all_zero_weights_give_zero_means():
    labels, preds = sample("absolute_difference", np.random.default_rng(9))
    for w in (0.0, np.zeros(B)):
        for mode in (LossReduce.MEAN_BY_WEIGHT, LossReduce.MEAN_BY_NONZERO_WEIGHT_COUNT):
            assert nd.loss.absolute_difference(labels, preds, w, mode).item() == 0.0


def test_float32_inputs_stay_float32_and_labels_are_cast():
    rng = np.random.default_rng(10)
    labels, preds = sample("hinge_loss", rng, np.float32)
    out = nd.loss.hinge_loss(labels.astype(np.int64), preds, np.ones(B), "sum")
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.item(), ref_reduce(ref_per_example("hinge_loss", labels, preds),
                                                      None, LossReduce.SUM), rtol=1e-5)


def test_reduction_names_and_aliases():
    of = LossReduce.of
    assert of("none") is of("NONE") is of(0) is LossReduce.NONE
    assert of("Sum") is of("weighted_sum") is of(1) is LossReduce.SUM
    assert of("mean_by_weight") is of("weighted-mean") is of(2) is LossReduce.MEAN_BY_WEIGHT
    assert (of("mean") is of("MEAN_BY_NONZERO_WEIGHT_COUNT") is of(3)
            is of("weighted_sum_by_nonzero_weights") is LossReduce.MEAN_BY_NONZERO_WEIGHT_COUNT)
    labels, preds = sample("mean_squared_error", np.random.default_rng(11))
    assert nd.loss.meanSquaredError(labels, preds, None, "MEAN").item() == pytest.approx(
        ((preds - labels) ** 2).mean())


def test_inside_graph_scope_matches_eager():
    rng = np.random.default_rng(12)
    labels, logits = sample("softmax_cross_entropy", rng, np.float32)
    want = nd.loss.softmax_cross_entropy(labels, logits, reduction="none").numpy()
    x = nd.create(logits)
    with nd.graph_scope():
        out = nd.loss.softmax_cross_entropy(nd.create(labels), x * 1.0, reduction="none")
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)


# --- SameDiff ------------------------------------------------------------------------------------

def _graph_loss(name, labels, preds, weights, mode, **params):
    sd = SameDiff.create()
    lab = sd.placeholder("labels", labels.dtype, -1, *labels.shape[1:])
    pred = sd.placeholder("preds", preds.dtype, -1, *preds.shape[1:])
    w = None if weights is None else sd.placeholder("w", weights.dtype, -1)
    out = loss_call(sd.loss, name)(f"my_{name}", lab, pred, w, mode, **params)
    feeds = {"labels": labels, "preds": preds, **({} if w is None else {"w": weights})}
    return sd, out, sd.output(feeds, out.name)[out.name]


@pytest.mark.parametrize("mode", [LossReduce.NONE, LossReduce.MEAN_BY_NONZERO_WEIGHT_COUNT,
                                  LossReduce.MEAN_BY_WEIGHT], ids=lambda m: m.name)
@pytest.mark.parametrize("name", LOSS_NAMES)
def test_graph_matches_eager(name, mode):
    rng = np.random.default_rng(13)
    labels, preds = sample(name, rng, np.float32)
    weights = example_weights(rng).astype(np.float32)
    sd, out, got = _graph_loss(name, labels, preds, weights, mode)
    want = eager(name, labels, preds, weights, mode)
    assert out.name == f"my_{name}" and out.name in sd.loss_variables
    assert out.dtype == np.float32 and got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.compiled
def test_compiled_graph_matches_interpreter():
    rng = np.random.default_rng(17)
    for name in LOSS_NAMES:
        labels, preds = sample(name, rng, np.float32)
        weights = example_weights(rng).astype(np.float32)
        _, _, got = _graph_loss(name, labels, preds, weights, LossReduce.MEAN_BY_WEIGHT)
        want = eager(name, labels, preds, weights, LossReduce.MEAN_BY_WEIGHT)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, err_msg=name)


def test_graph_naming_and_loss_marking():
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.FLOAT, -1, 3)
    y = sd.placeholder("y", nd.FLOAT, -1, 3)
    a = sd.loss.softmaxCrossEntropy("xent", y, x, None)     # ND4J style: leading name
    b = sd.loss.mean_squared_error(y, x, name="mse")
    c = sd.loss.absolute_difference(y, x)                   # default name: the loss name
    d = sd.loss.absolute_difference(y, x)
    assert [a.name, b.name, c.name, d.name] == ["xent", "mse", "absolute_difference",
                                                "absolute_difference_1"]
    assert sd.loss_variables == ["xent", "mse", "absolute_difference", "absolute_difference_1"]
    assert any(n.startswith("softmax_cross_entropy/") for n in sd.variable_names())
    with sd.name_scope("head"):
        assert sd.loss.hinge_loss("h", y, x).name == "head/h"
    with pytest.raises(nd.GraphError, match="already exists"):
        sd.loss.log_loss("mse", y, x)


def test_graph_with_unknown_class_count_and_runtime_weights():
    rng = np.random.default_rng(14)
    classes, logits = sample("sparse_softmax_cross_entropy", rng, np.float32)
    weights = example_weights(rng).astype(np.float32)
    sd = SameDiff.create()
    lab = sd.placeholder("labels", nd.LONG, -1)
    lg = sd.placeholder("logits", nd.FLOAT, -1, -1)
    w = sd.placeholder("w", nd.FLOAT, -1, 1)
    out = sd.loss.sparse_softmax_cross_entropy(lab, lg, w)
    got = sd.output({"labels": classes, "logits": logits, "w": weights[:, None]}, out.name)
    want = ref_reduce(ref_per_example("sparse_softmax_cross_entropy", classes, logits), weights,
                      LossReduce.MEAN_BY_NONZERO_WEIGHT_COUNT)
    np.testing.assert_allclose(got[out.name].numpy(), want, rtol=1e-5)


def test_graph_trains_through_loss_gradient():
    rng = np.random.default_rng(15)
    labels, x = np.eye(3)[rng.integers(0, 3, 6)], rng.normal(size=(6, 2))
    sd = SameDiff.create()
    w = sd.var("w", rng.normal(size=(2, 3)))
    logits = sd.constant("x", x).mmul(w)
    loss = sd.loss.softmax_cross_entropy("loss", sd.constant("y", labels), logits)
    grad = sd.calculate_gradients({}, "w")["w"].numpy()
    logits = x @ w.get_arr().numpy()
    p = np.exp(_log_softmax(logits))
    np.testing.assert_allclose(grad, x.T @ (p - labels) / 6, rtol=1e-10)
    assert loss.name in sd.loss_variables


# --- gradients -----------------------------------------------------------------------------------

GRAD_PARAMS = {"softmax_cross_entropy": {"label_smoothing": 0.1},
               "sigmoid_cross_entropy": {"label_smoothing": 0.1}, "huber_loss": {"delta": 0.8}}


@pytest.mark.parametrize("mode", [LossReduce.MEAN_BY_WEIGHT, LossReduce.SUM, LossReduce.NONE,
                                  LossReduce.MEAN_BY_NONZERO_WEIGHT_COUNT], ids=lambda m: m.name)
@pytest.mark.parametrize("name", LOSS_NAMES)
def test_gradcheck(name, mode):
    rng = np.random.default_rng(16)
    labels, preds = sample(name, rng)
    labels, preds = labels[:3], preds[:3]
    sd = SameDiff.create()
    p = sd.var("preds", preds)
    w = sd.var("weights", rng.uniform(0.5, 2.0, 3))  # non-zero: the count is locally constant
    loss_call(sd.loss, name)(sd.constant("labels", labels), p, w, mode,
                             **GRAD_PARAMS.get(name, {}))
    result = check_gradients(sd)
    assert result.passed, str(result)


# --- numerical stability -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_cross_entropy_extreme_logits(dtype):
    logits = np.array([[1000.0, -1000.0, 0.0], [-1000.0, 1000.0, 999.0]], dtype)
    labels = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]], dtype)
    out = nd.loss.softmax_cross_entropy(labels, logits, reduction="none").numpy()
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, [0.0, 2000.0 + np.log1p(np.exp(-1.0))], rtol=1e-6)
    sparse = nd.loss.sparse_softmax_cross_entropy(np.array([0, 0]), logits, reduction="none")
    np.testing.assert_allclose(sparse.numpy(), out, rtol=1e-6)
    # the gradient (softmax - labels) is finite too
    sd = SameDiff.create()
    x = sd.var("x", logits)
    sd.loss.softmax_cross_entropy(sd.constant("y", labels), x, reduction="sum")
    g = sd.calculate_gradients({}, "x")["x"].numpy()
    np.testing.assert_allclose(g, [[0, 0, 0], [-1, np.e / (1 + np.e), 1 / (1 + np.e)]],
                               atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_cross_entropy_extreme_logits(dtype):
    logits = np.array([1000.0, 1000.0, -1000.0, -1000.0, 0.0], dtype)
    labels = np.array([1.0, 0.0, 1.0, 0.0, 1.0], dtype)
    out = nd.loss.sigmoid_cross_entropy(labels, logits, reduction="none").numpy()
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, [0.0, 1000.0, 1000.0, 0.0, np.log(2.0)], rtol=1e-6, atol=1e-6)
    sd = SameDiff.create()
    x = sd.var("x", logits)
    sd.loss.sigmoid_cross_entropy(sd.constant("y", labels), x, reduction="sum")
    g = sd.calculate_gradients({}, "x")["x"].numpy()  # sigmoid(x) - z
    np.testing.assert_allclose(g, [0.0, 1.0, -1.0, 0.0, -0.5], atol=1e-6)


def test_log_loss_at_the_boundaries_is_finite():
    out = nd.loss.log_loss([1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0 + 1e-6, -1e-6], reduction="none")
    assert np.all(np.isfinite(out.numpy()))
    np.testing.assert_allclose(out.numpy(), [-np.log(1e-7)] * 2 + [0.0] * 2, rtol=1e-4, atol=1e-6)


# --- bad inputs ----------------------------------------------------------------------------------

def test_shape_mismatch_names_loss_and_shapes():
    with pytest.raises(LossError, match=r"mean_squared_error.*\(2, 3\).*\(2, 4\)") as err:
        nd.loss.mean_squared_error(np.zeros((2, 3)), np.zeros((2, 4)))
    assert isinstance(err.value, OpError) and "same shape" in str(err.value)
    with pytest.raises(LossError, match=r"softmax_cross_entropy.*\(3, 4\).*\(3, 5\)"):
        nd.loss.softmax_cross_entropy(np.zeros((3, 4)), np.zeros((3, 5)))
    with pytest.raises(LossError, match=r"sparse_softmax_cross_entropy.*\(3,\).*\(4,\)"):
        nd.loss.sparse_softmax_cross_entropy(np.zeros(4, np.int64), np.zeros((3, 5)))


def test_weights_not_broadcastable():
    with pytest.raises(LossError, match=r"hinge_loss: weights of shape \(3,\).*\(5, 4\)"):
        nd.loss.hinge_loss(np.zeros((5, 4)), np.zeros((5, 4)), np.ones(3))
    with pytest.raises(LossError, match=r"softmax_cross_entropy: weights of shape \(5, 4\)"):
        nd.loss.softmax_cross_entropy(np.zeros((5, 4)), np.zeros((5, 4)), np.ones((5, 4)))


def test_unknown_reduction_and_bad_parameters():
    with pytest.raises(LossError, match=r"log_loss: unknown reduction 'average'.*'mean'"):
        nd.loss.log_loss(np.zeros(3), np.zeros(3), reduction="average")
    with pytest.raises(LossError, match="delta must be > 0"):
        nd.loss.huber_loss(np.zeros(3), np.zeros(3), delta=0.0)
    with pytest.raises(LossError, match="label_smoothing"):
        nd.loss.softmax_cross_entropy(np.zeros((2, 3)), np.zeros((2, 3)), label_smoothing=2.0)
    with pytest.raises(LossError, match="dimension"):
        nd.loss.cosine_distance(np.zeros((2, 3)), np.zeros((2, 3)), dimension=2)


def test_bad_labels_types():
    with pytest.raises(LossError, match="integer class indices"):
        nd.loss.sparse_softmax_cross_entropy(np.zeros(2), np.zeros((2, 3)))
    with pytest.raises(LossError, match=r"class labels must be in \[0, 3\)"):
        nd.loss.sparse_softmax_cross_entropy(np.array([0, 3]), np.zeros((2, 3)))
    with pytest.raises(LossError, match="predictions must be floating point"):
        nd.loss.mean_squared_error(np.zeros(2), np.zeros(2, np.int64))


def test_failed_graph_call_records_nothing():
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.FLOAT, -1, 3)
    y = sd.placeholder("y", nd.FLOAT, -1, 4)
    with pytest.raises(LossError, match=r"\(\?, 4\).*\(\?, 3\)"):
        sd.loss.meanSquaredError("l", y, x)
    with pytest.raises(LossError, match="unknown reduction"):
        sd.loss.mean_squared_error(x, x, None, "avg")
    assert sd.ops() == [] and sd.loss_variables == [] and sd.variable_names() == ["x", "y"]
