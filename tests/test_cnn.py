"""The cnn ops beyond the registry-driven suites: gradients against finite differences (every
sample row, float64), second derivatives through the linear helpers, unknown batch dims,
ND4J's configs and call forms, the keyword form, errors, a LeNet-ish SameDiff model with
save/load, and an optional cross-check against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.errors import OpError
from samediff.frontends.cnn_config import Conv1DConfig, Conv2DConfig, Pooling2DConfig
from samediff.gradcheck import check_gradients
from samediff.ops import REGISTRY
from samediff.ops.registry import NONDIFF

try:
    from op_samples import SAMPLES
except ImportError:
    from tests.op_samples import SAMPLES

CNN = sorted(n for n, op in REGISTRY.items() if op.namespace == "cnn")
RNG = np.random.default_rng(5)


def _loss_graph(op, inputs, attrs, like=()):
    """``sum(op(vars) * W)`` in float64; inputs at ``like`` positions are constants."""
    sd = SameDiff.create()
    args = [sd.constant(f"c{i}", x) if i in like else sd.var(f"x{i}", x)
            for i, x in enumerate(inputs)]
    out = getattr(sd.cnn, op)(*args, **attrs)
    (out * sd.constant("W", RNG.standard_normal(out.shape))).sum().mark_as_loss()
    return sd


_LIKE = {"conv2d_input_grad": (2,), "conv2d_weight_grad": (2,), "avg_pooling2d_grad": (1,),
         "avg_pooling1d_grad": (1,), "avg_pooling3d_grad": (1,)}  # shape-only inputs
GRAD_CASES = [pytest.param(n, k, id=f"{n}-{k}") for n in CNN if REGISTRY[n].grad is not NONDIFF
              for k in range(len(SAMPLES[n]))]


def test_every_cnn_op_has_samples_and_a_gradient_rule():
    assert set(CNN) >= {"conv1d", "conv2d", "max_pooling2d", "avg_pooling2d"}
    assert all(SAMPLES.get(n) and REGISTRY[n].grad is not None for n in CNN)


@pytest.mark.parametrize("op, k", GRAD_CASES)
def test_gradient_matches_finite_differences(op, k):
    s = SAMPLES[op][k]
    result = check_gradients(_loss_graph(op, s.inputs, s.attrs, _LIKE.get(op, ())))
    assert result.passed, str(result)


def test_second_derivative_through_conv2d():
    sd = SameDiff.create()
    x, w = sd.var("x", RNG.standard_normal((1, 2, 4, 4))), sd.var("w", RNG.standard_normal((2, 2, 2, 2)))
    y = sd.cnn.conv2d(x, w, padding=1)
    (y * y).sum().mark_as_loss()
    assert check_gradients(sd).passed
    g = nd.grad(lambda x, w: (nd.cnn.conv2d(x, w, stride=2) ** 2).sum(), argnums=(0, 1))
    gx = nd.grad(lambda x: g(x, nd.create(np.ones((2, 2, 2, 2))))[0].sum())(
        nd.create(RNG.standard_normal((1, 2, 4, 4))))
    assert gx.shape == (1, 2, 4, 4)


def test_unknown_batch_dim_in_samediff():
    sd = SameDiff.create()
    x = sd.placeholder("x", "float64", -1, 3, 8, 8)
    w = sd.var("w", RNG.standard_normal((3, 3, 3, 4)))
    h = sd.cnn.maxPooling2d(sd.cnn.conv2d(x, w, padding="same"), kernel=2, stride=2)
    assert h.shape == (-1, 4, 4, 4)
    h.sum().mark_as_loss()
    grads = sd.calculate_gradients({"x": RNG.standard_normal((5, 3, 8, 8))}, "w", "x")
    assert grads["w"].shape == (3, 3, 3, 4) and grads["x"].shape == (5, 3, 8, 8)


# --- configs and call forms ---------------------------------------------------------------------

def test_config_builder_equals_constructor_and_validates():
    built = Conv2DConfig.builder().kH(3).kW(3).sH(2).sW(2).pH(1).pW(1).build()
    assert built == Conv2DConfig(kH=3, kW=3, sH=2, sW=2, pH=1, pW=1)
    with pytest.raises(OpError, match="sH must be >= 1"):
        Conv2DConfig(kH=3, kW=3, sH=0)
    with pytest.raises(OpError, match="dataFormat"):
        Conv2DConfig(dataFormat="NCWH")
    with pytest.raises(OpError, match="kH must be >= 1"):
        Pooling2DConfig(kW=2)
    with pytest.raises(AttributeError, match="no field 'stride'"):
        Conv2DConfig.builder().stride(2)


def test_config_and_keyword_forms_agree():
    x, w, b = RNG.standard_normal((2, 3, 7, 7)), RNG.standard_normal((3, 3, 3, 4)), RNG.standard_normal(4)
    cfg = Conv2DConfig(kH=3, kW=3, sH=2, sW=2, isSameMode=True)
    a = nd.cnn.conv2d(x, w, b, cfg).numpy()
    k = nd.cnn.conv2d(x, w, b=b, stride=2, padding="same").numpy()
    np.testing.assert_array_equal(a, k)
    wt = np.ascontiguousarray(w.transpose(3, 2, 0, 1))  # OIHW
    cfg_oihw = Conv2DConfig(kH=3, kW=3, sH=2, sW=2, isSameMode=True, weightsFormat="OIYX")
    np.testing.assert_allclose(nd.cnn.conv2d(x, wt, b, cfg_oihw).numpy(), a, rtol=1e-12)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    nhwc = nd.cnn.conv2d(xh, w, b, stride=(2, 2), padding="same", data_format="NHWC").numpy()
    np.testing.assert_allclose(nhwc.transpose(0, 3, 1, 2), a, rtol=1e-12)
    p = Pooling2DConfig(kH=3, kW=3, sH=2, sW=2, pH=1, pW=1, divisor="INCLUDE_PADDING")
    np.testing.assert_array_equal(
        nd.cnn.avgPooling2d(x, p).numpy(),
        nd.cnn.avg_pooling2d(x, kernel=3, stride=2, padding=1, count_include_pad=True).numpy())
    np.testing.assert_array_equal(nd.cnn.maxPooling2d(x, p).numpy(),
                                  nd.cnn.max_pooling2d(x, kernel=3, stride=2, padding=1).numpy())
    x1, w1 = RNG.standard_normal((2, 3, 9)), RNG.standard_normal((3, 3, 2))
    np.testing.assert_array_equal(
        nd.cnn.conv1d(x1, w1, Conv1DConfig(k=3, s=2, p=1)).numpy(),
        nd.cnn.conv1d(x1, w1, stride=2, padding=1).numpy())


def test_nd4j_call_forms_in_samediff():
    sd = SameDiff.create()
    x = sd.placeholder("x", "float32", -1, 1, 8, 8)
    w = sd.var("w", RNG.standard_normal((3, 3, 1, 2)).astype(np.float32))
    b = sd.var("b", np.zeros(2, np.float32))
    cfg = Conv2DConfig.builder().kH(3).kW(3).pH(1).pW(1).build()
    c1 = sd.cnn.conv2d("c1", x, w, b, cfg)
    c2 = sd.cnn.conv2d("c2", x, w, cfg)
    p = sd.cnn.maxPooling2d("p", c1, Pooling2DConfig(kH=2, kW=2, sH=2, sW=2))
    assert (c1.name, c2.name, p.name) == ("c1", "c2", "p")
    assert c1.shape == (-1, 2, 8, 8) and p.shape == (-1, 2, 4, 4)
    out = sd.output({"x": np.ones((2, 1, 8, 8), np.float32)}, "c1", "c2", "p")
    np.testing.assert_array_equal(out["c1"].numpy(), out["c2"].numpy())
    assert out["p"].numpy().dtype == np.float32


def test_config_and_keyword_clash_is_an_error():
    x, w = np.ones((1, 1, 4, 4)), np.ones((3, 3, 1, 1))
    with pytest.raises(OpError, match="given both by a config and as keywords"):
        nd.cnn.conv2d(x, w, Conv2DConfig(kH=3, kW=3), stride=2)


def test_errors_name_the_problem():
    with pytest.raises(OpError, match="conv2d requires float inputs, got int32 x"):
        nd.cnn.conv2d(np.ones((1, 1, 4, 4), np.int32), np.ones((3, 3, 1, 1), np.float32))
    with pytest.raises(OpError, match="conv1d requires float inputs"):
        nd.cnn.conv1d(np.ones((1, 1, 4), np.int64), np.ones((3, 1, 1)))
    with pytest.raises(OpError, match=r"w expects 4 \(2 per group x groups=2\)"):
        nd.cnn.conv2d(np.ones((1, 2, 4, 4)), np.ones((3, 3, 2, 2)), groups=2)
    with pytest.raises(OpError, match="do not split into groups=2"):
        nd.cnn.conv2d(np.ones((1, 2, 4, 4)), np.ones((3, 3, 1, 3)), groups=2)
    with pytest.raises(OpError, match="groups must be >= 1"):
        nd.cnn.conv2d(np.ones((1, 2, 4, 4)), np.ones((3, 3, 2, 2)), groups=0)
    with pytest.raises(OpError, match="input channels"):
        nd.cnn.conv2d(np.ones((1, 2, 4, 4)), np.ones((3, 3, 3, 2)))
    with pytest.raises(OpError, match="does not fit"):
        nd.cnn.conv2d(np.ones((1, 1, 2, 2)), np.ones((3, 3, 1, 1)))
    with pytest.raises(OpError, match="padding"):
        nd.cnn.conv2d(np.ones((1, 1, 4, 4)), np.ones((3, 3, 1, 1)), padding="full")
    with pytest.raises(OpError, match="more than half the kernel"):
        nd.cnn.maxPooling2d(np.ones((1, 1, 4, 4)), kernel=2, padding=2)


def test_traced_and_compiled_forward_match_eager():
    x, w = RNG.standard_normal((2, 3, 6, 6)), RNG.standard_normal((3, 3, 3, 4))

    @nd.compile
    def f(x, w):
        return nd.cnn.avgPooling2d(nd.cnn.conv2d(x, w, padding=1).relu(), kernel=2, stride=2)
    @nd.compile
    def g(x, w):  # ND4J's config form inside a trace
        h = nd.cnn.conv2d(x, w, Conv2DConfig(kH=3, kW=3, pH=1, pW=1)).relu()
        return nd.cnn.avgPooling2d(h, Pooling2DConfig(kH=2, kW=2, sH=2, sW=2))
    want = nd.cnn.avgPooling2d(nd.cnn.conv2d(x, w, padding=1).relu(), kernel=2, stride=2)
    np.testing.assert_allclose(f(nd.create(x), nd.create(w)).numpy(), want.numpy(), rtol=1e-12)
    np.testing.assert_allclose(g(nd.create(x), nd.create(w)).numpy(), want.numpy(), rtol=1e-12)


def _lenet(tmp_path=None):
    sd = SameDiff.create()
    x = sd.placeholder("x", "float64", -1, 1, 12, 12)
    w1 = sd.var("w1", RNG.standard_normal((3, 3, 1, 4)) * 0.3)
    b1 = sd.var("b1", np.zeros(4))
    w2 = sd.var("w2", RNG.standard_normal((3, 3, 4, 6)) * 0.3)
    wd = sd.var("wd", RNG.standard_normal((6 * 3 * 3, 5)) * 0.1)
    h = sd.cnn.conv2d(x, w1, b1, Conv2DConfig(kH=3, kW=3, isSameMode=True)).relu()
    h = sd.cnn.maxPooling2d(h, Pooling2DConfig(kH=2, kW=2, sH=2, sW=2))
    h = sd.cnn.conv2d(h, w2, padding=1).tanh()
    h = sd.cnn.avgPooling2d(h, kernel=2, stride=2)
    logits = sd.nn.linear(h.reshape(-1, 6 * 3 * 3), wd)
    sd.mean("loss", logits * logits).mark_as_loss()
    return sd


def test_lenet_forward_backward_and_save_load(tmp_path):
    sd = _lenet()
    feeds = {"x": RNG.standard_normal((3, 1, 12, 12))}
    grads = sd.calculate_gradients(feeds, "w1", "b1", "w2", "wd")
    assert {k: v.shape for k, v in grads.items()} == {
        "w1": (3, 3, 1, 4), "b1": (4,), "w2": (3, 3, 4, 6), "wd": (54, 5)}
    assert check_gradients(sd, feeds, max_per_variable=6).passed
    path = tmp_path / "lenet.sdz"
    sd.save(path)
    back = SameDiff.load(path)
    np.testing.assert_array_equal(back.output(feeds, "loss")["loss"].numpy(),
                                  sd.output(feeds, "loss")["loss"].numpy())


def test_matches_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x, w, b = RNG.standard_normal((2, 3, 9, 8)), RNG.standard_normal((4, 3, 3, 3)), RNG.standard_normal(4)
    for kw in ({"stride": 2, "padding": 1}, {"dilation": 2, "padding": (2, 1)}):
        want = F.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), **kw).numpy()
        got = nd.cnn.conv2d(x, w, b, weights_format="OIHW", **kw).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(nd.cnn.max_pooling2d(x, kernel=3, stride=2, padding=1).numpy(),
                               F.max_pool2d(torch.tensor(x), 3, 2, 1).numpy())
    for include in (False, True):
        np.testing.assert_allclose(
            nd.cnn.avg_pooling2d(x, kernel=3, stride=2, padding=1,
                                 count_include_pad=include).numpy(),
            F.avg_pool2d(torch.tensor(x), 3, 2, 1, count_include_pad=include).numpy(),
            rtol=1e-12)
    x1, w1 = RNG.standard_normal((2, 3, 11)), RNG.standard_normal((5, 3, 3))
    np.testing.assert_allclose(
        nd.cnn.conv1d(x1, w1, weights_format="OIW", stride=2, dilation=2).numpy(),
        F.conv1d(torch.tensor(x1), torch.tensor(w1), stride=2, dilation=2).numpy(), rtol=1e-10)
    # grouped: values and both gradients, against autograd
    xg, wg = RNG.standard_normal((2, 6, 7, 7)), RNG.standard_normal((9, 2, 3, 3))
    xt, wt = torch.tensor(xg, requires_grad=True), torch.tensor(wg, requires_grad=True)
    yt = F.conv2d(xt, wt, stride=2, padding=1, groups=3)
    yt.pow(2).sum().backward()
    got, (dx, dw) = nd.value_and_grad(
        lambda a, b: (nd.cnn.conv2d(a, b, stride=2, padding=1, groups=3,
                                    weights_format="OIHW") ** 2).sum(), argnums=(0, 1))(
        nd.create(xg), nd.create(wg))
    np.testing.assert_allclose(got.item(), yt.pow(2).sum().item(), rtol=1e-10)
    np.testing.assert_allclose(dx.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(dw.numpy(), wt.grad.numpy(), rtol=1e-9, atol=1e-10)


def _max_pool_grad_reference(x, g, k, s, p):
    """Loop reference: each window's gradient goes to its first tap (row-major) holding the
    maximum; a NaN beats every number; taps in the padding never win."""
    dx = np.zeros_like(x)
    for b, c, oh, ow in np.ndindex(*g.shape):
        best, at = None, None
        for i in range(k):
            for j in range(k):
                ih, iw = oh * s - p + i, ow * s - p + j
                if 0 <= ih < x.shape[2] and 0 <= iw < x.shape[3]:
                    v = x[b, c, ih, iw]
                    if at is None or (not np.isnan(best) and (np.isnan(v) or v > best)):
                        best, at = v, (ih, iw)
        dx[b, c][at] += g[b, c, oh, ow]
    return dx


@pytest.mark.parametrize("k, s, p", [(2, 2, 0), (3, 2, 1), (2, 1, 0)])
def test_max_pool_gradient_goes_to_the_first_maximum_and_nan_wins(k, s, p):
    x = np.round(RNG.standard_normal((2, 3, 6, 6)), 0)  # many ties
    x[0, 0, 0, 1] = x[1, 2, 3, 3] = np.nan
    y = nd.cnn.max_pooling2d(nd.create(x), kernel=k, stride=s, padding=p)
    g = RNG.standard_normal(y.shape)
    got = nd.cnn.max_pooling2d_grad(nd.create(x), nd.create(g), kernel=k, stride=s,
                                    padding=p).numpy()
    np.testing.assert_array_equal(got, _max_pool_grad_reference(x, g, k, s, p))


@pytest.mark.compiled
def test_compiled_plans_fold_a_relu_into_the_conv_before_it():
    """``relu(conv2d(...))`` becomes one conv2d with the relu epilogue -- bit for bit the
    eager values -- unless something else reads the convolution's own result."""
    x = nd.create(RNG.standard_normal((4, 3, 9, 9)).astype(np.float32))
    w = nd.create(RNG.standard_normal((3, 3, 3, 16)).astype(np.float32))
    b = nd.create(RNG.standard_normal(16).astype(np.float32))
    with nd.graph_scope() as folded:
        y = nd.cnn.conv2d(x, w, b, padding=1).relu() * 2.0
    assert "library: conv2d + relu" in folded.plan.explain(), folded.plan.explain()
    want = nd.cnn.conv2d(x, w, b, padding=1).relu() * 2.0
    np.testing.assert_array_equal(y.numpy(), want.numpy())
    with nd.graph_scope() as kept:  # the pre-activation is an output too: nothing to fold
        c = nd.cnn.conv2d(x, w, b, padding=1)
        r = c.relu()
    assert "+ relu" not in kept.plan.explain()
    np.testing.assert_array_equal(r.numpy(), np.maximum(c.numpy(), 0))


@pytest.mark.compiled
def test_training_plan_folds_relu_and_matches_the_interpreter():
    """In a training step the relu's gradient reads the relu's output, so the pre-activation
    is read by nobody else and the relu folds; gradients equal the interpreter's."""
    sd = _lenet()
    feeds = {"x": RNG.standard_normal((3, 1, 12, 12))}
    from samediff.training import Sgd, TrainingConfig
    sd.setTrainingConfig(TrainingConfig(updater=Sgd(0.0), feature_mapping=["x"]))
    sd.fit((feeds["x"],), epochs=1, batch_size=3, verbose=0)
    step = sd._train_step_cache[2]
    assert any("conv2d + relu" in p.explain() for p in step._plans.values())
    from samediff import compiler
    grads = sd.calculate_gradients(feeds, "w1", "b1")
    previous = compiler.set_executor("interpreter")
    try:
        ref = sd.calculate_gradients(feeds, "w1", "b1")
    finally:
        compiler.set_executor(previous)
    for k in ref:
        np.testing.assert_allclose(grads[k], ref[k], rtol=1e-12, atol=1e-12)
