"""conv3d, deconv2d/deconv3d, depthwise_conv2d and separable_conv2d beyond the registry-driven
suites (which check every sample row against ``op_samples_cnn_more_conv.py``'s loop
references, traced/compiled/saved, and -- ``test_cnn.py`` -- against finite differences):
ND4J's configs and call forms, the keyword form, adjoint identities, second derivatives,
unknown dims, bad inputs, and an optional cross-check against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.errors import OpError
from samediff.frontends.cnn_config import (Conv2DConfig, Conv3DConfig, DeConv2DConfig,
                                           DeConv3DConfig)
from samediff.gradcheck import check_gradients

RNG = np.random.default_rng(11)


def r(*shape):
    return RNG.standard_normal(shape)


# --- configs and call forms -------------------------------------------------------------------

def test_configs_build_validate_and_expand():
    c = Conv3DConfig.builder().kD(2).kH(3).kW(3).sD(2).isSameMode(True).build()
    assert c == Conv3DConfig(kD=2, kH=3, kW=3, sD=2, isSameMode=True)
    assert c.op_attrs(None) == {"stride": (2, 1, 1), "padding": "same", "dilation": (1, 1, 1),
                                "data_format": "NDHWC"}  # ND4J's Conv3DConfig default
    assert DeConv3DConfig().op_attrs(None)["data_format"] == "NCDHW"  # ND4J's default there
    assert DeConv2DConfig(sH=2, sW=3, pH=1).op_attrs(None) == {
        "stride": (2, 3), "padding": (1, 0), "dilation": (1, 1), "data_format": "NCHW"}
    with pytest.raises(OpError, match="sD must be >= 1"):
        Conv3DConfig(sD=0)
    with pytest.raises(OpError, match="dataFormat"):
        DeConv2DConfig(dataFormat="NCDHW")
    with pytest.raises(OpError, match="pW must be >= 0"):
        DeConv3DConfig(pW=-1)


def test_conv3d_config_and_keyword_forms_agree():
    x, w, b = r(2, 5, 6, 4, 3), r(2, 3, 2, 3, 4), r(4)  # NDHWC, [kD, kH, kW, iC, oC]
    cfg = Conv3DConfig(kD=2, kH=3, kW=2, sD=2, sH=1, sW=2, pD=1, pH=0, pW=1)
    a = nd.cnn.conv3d(x, w, b, cfg).numpy()
    k = nd.cnn.conv3d(x, w, b=b, stride=(2, 1, 2), padding=(1, 0, 1),
                      data_format="NDHWC").numpy()
    np.testing.assert_array_equal(a, k)
    xc = np.ascontiguousarray(x.transpose(0, 4, 1, 2, 3))
    wt = np.ascontiguousarray(w.transpose(4, 3, 0, 1, 2))  # OIDHW
    ncdhw = nd.cnn.conv3d(xc, wt, b, stride=(2, 1, 2), padding=(1, 0, 1),
                          weights_format="OIDHW").numpy()
    np.testing.assert_allclose(ncdhw.transpose(0, 2, 3, 4, 1), a, rtol=1e-12, atol=1e-12)
    sd = SameDiff.create()
    xv = sd.placeholder("x", "float64", -1, 5, 6, 4, 3)
    y = sd.cnn.conv3d("y", xv, sd.var("w", w), sd.var("b", b), cfg)
    assert y.name == "y" and y.shape == (-1, 3, 4, 3, 4)
    np.testing.assert_allclose(sd.output({"x": x}, "y")["y"].numpy(), a, rtol=1e-12)


def test_deconv_configs_and_keyword_forms_agree():
    x, w = r(2, 3, 4, 5), r(3, 3, 2, 3)  # NCHW, [kH, kW, oC, iC]
    a = nd.cnn.deconv2d(x, w, DeConv2DConfig(kH=3, kW=3, sH=2, sW=2, isSameMode=True)).numpy()
    assert a.shape == (2, 2, 8, 10)  # "same": input * stride
    np.testing.assert_array_equal(a, nd.cnn.deconv2d(x, w, stride=2, padding="same").numpy())
    x3, w3 = r(1, 2, 3, 3, 2), r(2, 2, 2, 3, 2)
    a3 = nd.cnn.deconv3d(x3, w3, None, DeConv3DConfig(kD=2, kH=2, kW=2, sD=2, pH=1)).numpy()
    assert a3.shape == (1, 3, 6, 2, 3)
    np.testing.assert_array_equal(
        a3, nd.cnn.deconv3d(x3, w3, stride=(2, 1, 1), padding=(0, 1, 0)).numpy())


def test_depthwise_and_separable_nd4j_names_and_conv2d_config():
    x, dw, pw, b = r(2, 3, 7, 6), r(3, 3, 3, 2), r(1, 1, 6, 4), r(4)
    cfg = Conv2DConfig(kH=3, kW=3, sH=2, sW=2, isSameMode=True)
    a = nd.cnn.depthWiseConv2d(x, dw, None, cfg).numpy()
    assert a.shape == (2, 6, 4, 3)
    np.testing.assert_array_equal(a, nd.cnn.depthwise_conv2d(x, dw, stride=2,
                                                             padding="same").numpy())
    s = nd.cnn.separableConv2d(x, dw, pw, b, cfg).numpy()
    want = np.einsum("nkhw,kq->nqhw", a, pw[0, 0]) + b[:, None, None]
    np.testing.assert_allclose(s, want, rtol=1e-12, atol=1e-12)
    sd = SameDiff.create()
    xv = sd.placeholder("x", "float64", -1, 3, 7, 6)
    y = sd.cnn.separableConv2d("y", xv, sd.var("dw", dw), sd.var("pw", pw), sd.var("b", b), cfg)
    assert y.shape == (-1, 4, 4, 3)
    np.testing.assert_allclose(sd.output({"x": x}, "y")["y"].numpy(), s, rtol=1e-12)


def test_depthwise_with_multiplier_one_is_per_channel_conv2d():
    x, w = r(2, 3, 6, 5), r(3, 2, 3, 1)
    y = nd.cnn.depthwise_conv2d(x, w, padding=1, dilation=(1, 2)).numpy()
    for c in range(3):
        yc = nd.cnn.conv2d(x[:, c:c + 1], w[:, :, c:c + 1, :], padding=1, dilation=(1, 2))
        np.testing.assert_allclose(y[:, c:c + 1], yc.numpy(), rtol=1e-12, atol=1e-12)


# --- adjoints and derivatives ---------------------------------------------------------------------

@pytest.mark.parametrize("attrs", [{}, {"stride": 2, "padding": 1},
                                   {"stride": (2, 1), "padding": "same", "dilation": (1, 2)}])
def test_deconv2d_is_the_adjoint_of_conv2d(attrs):
    """<conv2d(x, w), y> == <x, deconv2d(y, w)>: ND4J's deconv weights [kH, kW, oC, iC] are
    the conv's [kH, kW, iC, oC] of the way back."""
    x, w = r(2, 3, 7, 6), r(3, 2, 3, 4)
    cx = nd.cnn.conv2d(x, w, **attrs).numpy()
    y = r(*cx.shape)
    back = nd.cnn.deconv2d(y, w, output_size=x.shape[2:], **attrs).numpy()
    assert back.shape == x.shape
    np.testing.assert_allclose(np.vdot(cx, y), np.vdot(x, back), rtol=1e-10)


@pytest.mark.parametrize("fmt", ["NCDHW", "NDHWC"])
def test_deconv3d_is_the_adjoint_of_conv3d(fmt):
    x, w = r(1, 3, 5, 4, 6), r(2, 3, 2, 3, 2)
    if fmt == "NDHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 4, 1))
    attrs = {"stride": (2, 1, 2), "padding": (1, 1, 0), "data_format": fmt}
    cx = nd.cnn.conv3d(x, w, **attrs).numpy()
    y = r(*cx.shape)
    size = x.shape[2:] if fmt == "NCDHW" else x.shape[1:4]
    back = nd.cnn.deconv3d(y, w, output_size=size, **attrs).numpy()
    np.testing.assert_allclose(np.vdot(cx, y), np.vdot(x, back), rtol=1e-10)


@pytest.mark.parametrize("build", [
    lambda sd, x: sd.cnn.conv3d(x, sd.var("w", r(2, 2, 2, 2, 2)), stride=2, padding=1),
    lambda sd, x: sd.cnn.deconv3d(x, sd.var("w", r(2, 2, 2, 2, 2)), stride=(2, 1, 1)),
    lambda sd, x: sd.cnn.depthwise_conv2d(x.reshape(1, 2, 12, 4), sd.var("w", r(3, 3, 2, 2)),
                                          stride=2, padding="same"),
    lambda sd, x: sd.cnn.separable_conv2d(x.reshape(1, 2, 12, 4), sd.var("dw", r(3, 2, 2, 2)),
                                          sd.var("pw", r(1, 1, 4, 3)), stride=(1, 2)),
    lambda sd, x: sd.cnn.deconv2d(x.reshape(1, 2, 12, 4), sd.var("w", r(3, 2, 3, 2)), stride=2,
                                  padding="same"),
], ids=["conv3d", "deconv3d", "depthwise", "separable", "deconv2d"])
def test_second_derivatives(build):
    """(y * y).sum(): the backward pass goes through the adjoint ops, which are differentiated
    again by finite differences of the gradient."""
    sd = SameDiff.create()
    y = build(sd, sd.var("x", r(1, 2, 4, 3, 4)))
    (y * y).sum().mark_as_loss()
    result = check_gradients(sd)
    assert result.passed, str(result)


def test_eager_grad_of_grad_conv3d():
    w = nd.create(r(2, 2, 2, 2, 3))
    g = nd.grad(lambda x, w: (nd.cnn.conv3d(x, w, stride=2) ** 2).sum(), argnums=(0, 1))
    gx = nd.grad(lambda x: g(x, w)[1].sum())(nd.create(r(1, 2, 4, 5, 4)))
    assert gx.shape == (1, 2, 4, 5, 4)


def test_unknown_batch_dims_and_gradients():
    sd = SameDiff.create()
    x = sd.placeholder("x", "float64", -1, 2, 6, 6, 6)
    h = sd.cnn.conv3d(x, sd.var("w", r(3, 3, 3, 2, 4)), stride=2, padding="same")
    assert h.shape == (-1, 4, 3, 3, 3)
    y = sd.cnn.deconv3d(h, sd.var("v", r(2, 2, 2, 2, 4)), stride=2)
    assert y.shape == (-1, 2, 6, 6, 6)
    y.sum().mark_as_loss()
    grads = sd.calculate_gradients({"x": r(3, 2, 6, 6, 6)}, "w", "v", "x")
    assert grads["w"].shape == (3, 3, 3, 2, 4) and grads["x"].shape == (3, 2, 6, 6, 6)


def test_unknown_spatial_sizes_at_stride_one_differentiate_strided_ones_say_why():
    sd = SameDiff.create()
    x = sd.placeholder("x", "float64", -1, 2, -1, -1)
    y = sd.cnn.depthwise_conv2d(x, sd.var("w", r(3, 3, 2, 2)), padding="same")
    assert y.shape == (-1, 4, -1, -1)
    y.sum().mark_as_loss()
    assert sd.calculate_gradients({"x": r(2, 2, 5, 7)}, "x")["x"].shape == (2, 2, 5, 7)
    sd = SameDiff.create()
    x = sd.placeholder("x", "float64", -1, 2, -1, -1, -1)
    sd.cnn.conv3d(x, sd.var("w", r(2, 2, 2, 2, 2)), stride=2).sum().mark_as_loss()
    with pytest.raises(OpError, match="spatial sizes"):
        sd.calculate_gradients({"x": r(1, 2, 5, 5, 5)}, "x")


# --- bad inputs ------------------------------------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda: nd.cnn.conv3d(np.ones((1, 2, 3, 3, 3), np.int32), r(2, 2, 2, 2, 1)),
     "conv3d requires float inputs"),
    (lambda: nd.cnn.deconv2d(np.ones((1, 2, 3, 3), np.int64), r(2, 2, 1, 2)),
     "deconv2d requires float inputs"),
    (lambda: nd.cnn.depthwise_conv2d(r(1, 2, 3, 3), np.ones((2, 2, 2, 1), np.int32)),
     "depthwise_conv2d requires float inputs"),
    (lambda: nd.cnn.conv3d(r(1, 2, 3, 3), r(2, 2, 2, 2, 1)), r"conv3d: x must have rank 5"),
    (lambda: nd.cnn.conv3d(r(1, 3, 3, 3, 3), r(2, 2, 2, 2, 1)), "3 input channels"),
    (lambda: nd.cnn.conv3d(r(1, 2, 3, 3, 3), r(4, 2, 2, 2, 1)), "does not fit"),
    (lambda: nd.cnn.conv3d(r(1, 2, 3, 3, 3), r(2, 2, 2, 2, 1), r(2)), "b must be 1-D of 1"),
    (lambda: nd.cnn.deconv2d(r(1, 3, 3, 3), r(2, 2, 1, 2)), r"\[kH, kW, oC, iC\]"),
    (lambda: nd.cnn.deconv2d(r(1, 2, 3, 3), r(2, 2, 1, 2), stride=2, output_size=(9, 6)),
     "output_size"),
    (lambda: nd.cnn.deconv2d(r(1, 2, 2, 2), r(2, 2, 1, 2), padding=3), "less padding"),
    (lambda: nd.cnn.deconv3d(r(1, 2, 2, 2, 2), r(2, 2, 2, 1, 2), weights_format="HWOI"),
     "weights_format"),
    (lambda: nd.cnn.depthwise_conv2d(r(1, 3, 4, 4), r(2, 2, 2, 2)), "3 input channels"),
    (lambda: nd.cnn.depthwise_conv2d(r(1, 2, 4, 4), r(2, 2, 2, 2), weights_format="OIHW"),
     "weights_format"),
    (lambda: nd.cnn.separable_conv2d(r(1, 2, 4, 4), r(2, 2, 2, 2), r(1, 1, 2, 3)),
     r"pw must be \[1, 1, iC\*depthMultiplier, oC\] = \[1, 1, 4, oC\]"),
    (lambda: nd.cnn.conv3d(r(1, 2, 3, 3, 3), r(2, 2, 2, 2, 1), stride=(1, 2)), "stride"),
])
def test_bad_inputs_name_the_op_and_the_fix(call, match):
    with pytest.raises(OpError, match=match):
        call()


# --- PyTorch cross-check (optional) --------------------------------------------------------------

def test_against_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    t = torch.from_numpy
    x, w = r(2, 3, 5, 6, 7), r(4, 3, 2, 3, 2)  # OIDHW
    for kw in ({}, {"stride": (2, 1, 2), "padding": (1, 0, 1), "dilation": (1, 2, 1)}):
        np.testing.assert_allclose(nd.cnn.conv3d(x, w, weights_format="OIDHW", **kw).numpy(),
                                   F.conv3d(t(x), t(w), **kw).numpy(), rtol=1e-10, atol=1e-10)
    x2, w2 = r(2, 4, 5, 6), r(4, 3, 3, 2)  # IOHW
    for kw in ({}, {"stride": 2, "padding": 1, "dilation": 2}):
        np.testing.assert_allclose(
            nd.cnn.deconv2d(x2, w2, weights_format="IOHW", **kw).numpy(),
            F.conv_transpose2d(t(x2), t(w2), **kw).numpy(), rtol=1e-10, atol=1e-10)
    x3, w3 = r(1, 4, 3, 4, 3), r(4, 3, 3, 2, 2)
    np.testing.assert_allclose(
        nd.cnn.deconv3d(x3, w3, weights_format="IODHW", stride=2, padding=1).numpy(),
        F.conv_transpose3d(t(x3), t(w3), stride=2, padding=1).numpy(), rtol=1e-10, atol=1e-10)
    xd, wd = r(2, 3, 6, 7), r(3, 3, 3, 2)  # [kH, kW, iC, M] -> torch [iC*M, 1, kH, kW]
    wt = np.ascontiguousarray(wd.reshape(3, 3, 6).transpose(2, 0, 1)[:, None])
    np.testing.assert_allclose(
        nd.cnn.depthwise_conv2d(xd, wd, stride=2, padding=1).numpy(),
        F.conv2d(t(xd), t(wt), stride=2, padding=1, groups=3).numpy(), rtol=1e-10, atol=1e-10)
