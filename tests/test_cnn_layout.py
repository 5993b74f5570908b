"""The 1-D/3-D/global pooling, layout and LRN ops beyond the registry-driven suites (which
check every sample row eager vs reference, traced, compiled, saved/loaded, and -- in
``test_cnn.py`` -- gradients vs finite differences): ND4J's configs and call forms, keyword
forms, unknown batch dims, adjoint identities, second derivatives, errors, and an optional
cross-check against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.errors import OpError
from samediff.frontends.cnn_config import (
    Conv2DConfig,
    LocalResponseNormalizationConfig,
    Pooling1DConfig,
    Pooling3DConfig,
)
from samediff.gradcheck import check_gradients

RNG = np.random.default_rng(17)


def r(*shape):
    return RNG.standard_normal(shape)


# --- ND4J's configs and call forms ----------------------------------------------------------------

def test_pooling_configs_equal_keyword_forms():
    x1 = r(2, 3, 9)
    cfg = Pooling1DConfig.builder().k(3).s(2).p(1).build()
    assert cfg == Pooling1DConfig(k=3, s=2, p=1)
    np.testing.assert_array_equal(nd.cnn.maxPooling1d(x1, cfg).numpy(),
                                  nd.cnn.max_pooling1d(x1, kernel=3, stride=2, padding=1).numpy())
    inc = Pooling1DConfig(k=3, s=2, p=1, divisor="INCLUDE_PADDING", type="AVG")
    np.testing.assert_array_equal(
        nd.cnn.avgPooling1d(x1, inc).numpy(),
        nd.cnn.avg_pooling1d(x1, kernel=3, stride=2, padding=1, count_include_pad=True).numpy())
    nwc = np.ascontiguousarray(x1.transpose(0, 2, 1))
    np.testing.assert_allclose(
        nd.cnn.maxPooling1d(nwc, Pooling1DConfig(k=3, s=2, p=1, isNCW=False)).numpy(),
        nd.cnn.maxPooling1d(x1, cfg).numpy().transpose(0, 2, 1))
    x3 = r(1, 2, 5, 6, 4)
    c3 = Pooling3DConfig(kD=2, kH=3, kW=2, sD=2, sH=1, sW=2, pH=1, isSameMode=False)
    np.testing.assert_array_equal(
        nd.cnn.avgPooling3d(x3, c3).numpy(),
        nd.cnn.avg_pooling3d(x3, kernel=(2, 3, 2), stride=(2, 1, 2), padding=(0, 1, 0)).numpy())
    ndhwc = np.ascontiguousarray(np.moveaxis(x3, 1, -1))
    for c in (Pooling3DConfig(kD=2, kH=2, kW=2, dataFormat="NDHWC"),
              Pooling3DConfig(kD=2, kH=2, kW=2, isNCDHW=False)):
        np.testing.assert_array_equal(
            np.moveaxis(nd.cnn.maxPooling3d(ndhwc, c).numpy(), -1, 1),
            nd.cnn.max_pooling3d(x3, kernel=2).numpy())
    same = nd.cnn.maxPooling3d(x3, Pooling3DConfig(kD=2, kH=2, kW=2, sD=2, sH=2, sW=2,
                                                   isSameMode=True))
    assert same.shape == (1, 2, 3, 3, 2)


def test_config_validation():
    with pytest.raises(OpError, match="k must be >= 1"):
        Pooling1DConfig(s=2)
    with pytest.raises(OpError, match="kD must be >= 1"):
        Pooling3DConfig(kH=2, kW=2)
    with pytest.raises(OpError, match="dataFormat"):
        Pooling3DConfig(kD=1, kH=1, kW=1, dataFormat="NCHW")
    with pytest.raises(OpError, match="depth must be >= 0"):
        LocalResponseNormalizationConfig(depth=-1)
    with pytest.raises(OpError, match="alpha must be a number"):
        LocalResponseNormalizationConfig(alpha="big")


def test_lrn_config_and_defaults():
    x = r(2, 7, 3, 3)
    cfg = LocalResponseNormalizationConfig(alpha=1e-2, beta=0.75, bias=2.0, depth=2)
    np.testing.assert_array_equal(
        nd.cnn.localResponseNormalization(x, cfg).numpy(),
        nd.cnn.local_response_normalization(x, alpha=1e-2, beta=0.75, bias=2.0, depth=2).numpy())
    default = nd.cnn.localResponseNormalization(x, LocalResponseNormalizationConfig()).numpy()
    np.testing.assert_array_equal(default, nd.cnn.local_response_normalization(x).numpy())
    # channels last gives the same numbers, transposed
    xl = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    np.testing.assert_allclose(
        nd.cnn.local_response_normalization(xl, cfg, data_format="NHWC").numpy(),
        nd.cnn.localResponseNormalization(x, cfg).numpy().transpose(0, 2, 3, 1), rtol=1e-13)


def test_im2col_and_col2im_take_a_conv2d_config():
    x = r(2, 3, 6, 5)
    cfg = Conv2DConfig(kH=3, kW=2, sH=2, sW=1, pH=1, pW=0)
    cols = nd.cnn.im2Col(x, cfg)
    assert cols.shape == (2, 3, 3, 2, 3, 4)
    np.testing.assert_array_equal(
        cols.numpy(), nd.cnn.im2col(x, kernel=(3, 2), stride=(2, 1), padding=(1, 0)).numpy())
    back = nd.cnn.col2Im(cols, cfg, size=(6, 5))
    assert back.shape == x.shape
    same = nd.cnn.im2Col(x, Conv2DConfig(kH=3, kW=3, isSameMode=True))
    assert same.shape == (2, 3, 3, 3, 6, 5)


def test_upsampling_call_forms():
    x = r(2, 3, 4, 5)
    want = x.repeat(2, axis=2).repeat(3, axis=3)
    np.testing.assert_array_equal(nd.cnn.upsampling2d(x, 2, 3, True).numpy(), want)  # modern
    np.testing.assert_array_equal(nd.cnn.upsampling2d(x, True, 2, 3).numpy(), want)  # older
    np.testing.assert_array_equal(nd.cnn.upsampling2d(x, scale=(2, 3)).numpy(), want)
    np.testing.assert_array_equal(nd.cnn.upsampling2d(x, 2).numpy(),
                                  x.repeat(2, axis=2).repeat(2, axis=3))
    xl = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(nd.cnn.upsampling2d(xl, 2, 3, False).numpy(),
                                  want.transpose(0, 2, 3, 1))
    x3 = r(1, 2, 2, 3, 2)
    np.testing.assert_array_equal(nd.cnn.upsampling3d(x3, True, 1, 2, 3).numpy(),
                                  x3.repeat(2, axis=3).repeat(3, axis=4))


def test_space_batch_depth_call_forms():
    x = np.arange(16, dtype=np.float32).reshape(4, 2, 2, 1)
    sd = SameDiff.create()
    v = sd.var("x", x)
    a = sd.cnn.batchToSpace(v, [2, 2], [0, 0], [0, 0])           # ND4J 1.0: top/bottom rows
    b = sd.cnn.batchToSpace("b", v, [2, 2], [[0, 0], [0, 0]])    # ND4J beta: int[][] crops
    assert a.eval().shape == (1, 4, 4, 1) and b.name == "b"
    np.testing.assert_array_equal(a.eval().numpy(), b.eval().numpy())
    # TF's documented example: 4 images of 1 value -> one 2x2 image
    one = np.array([1.0, 2.0, 3.0, 4.0]).reshape(4, 1, 1, 1)
    np.testing.assert_array_equal(nd.cnn.batchToSpace(one, [2, 2], [0, 0], [0, 0]).numpy()
                                  .ravel(), [1, 2, 3, 4])
    back = nd.cnn.spaceToBatch(a.eval(), [2, 2], [0, 0], [0, 0])
    np.testing.assert_array_equal(back.numpy(), x)
    cropped = nd.cnn.batchToSpace(r(8, 2, 3, 2), [2, 2], [1, 0], [0, 2])
    assert cropped.shape == (2, 3, 4, 2)
    y = r(2, 8, 3, 4)
    d = nd.cnn.spaceToDepth(y[:, :, :2, :4], 2, "NCHW")
    assert d.shape == (2, 32, 1, 2)
    np.testing.assert_array_equal(nd.cnn.depthToSpace(d, 2, "NCHW").numpy(), y[:, :, :2, :4])


def test_global_pooling_forms():
    x = r(2, 3, 4, 5)
    np.testing.assert_allclose(nd.cnn.globalAvgPooling(x).numpy(), x.mean(axis=(2, 3)))
    np.testing.assert_array_equal(nd.cnn.globalMaxPooling(x, keep_dims=True).numpy(),
                                  x.max(axis=(2, 3), keepdims=True))
    np.testing.assert_array_equal(nd.cnn.global_max_pooling(x, data_format="NWC").numpy(),
                                  x.max(axis=(1, 2)))


# --- graphs: unknown batch, adjoints, second derivatives -----------------------------------------

def test_unknown_batch_dims_in_samediff():
    sd = SameDiff.create()
    x = sd.placeholder("x", "float64", -1, 4, 6, 6)
    h = sd.cnn.local_response_normalization(x, depth=1)
    h = sd.cnn.upsampling2d(sd.cnn.space_to_depth(h, block_size=2), scale=2)
    assert h.shape == (-1, 16, 6, 6)
    c = sd.cnn.im2col(h, kernel=2, stride=2)
    assert c.shape == (-1, 16, 2, 2, 3, 3)
    p = sd.cnn.global_avg_pooling(sd.cnn.col2im(c, size=(6, 6), stride=2))
    assert p.shape == (-1, 16)
    b = sd.cnn.space_to_batch(sd.placeholder("z", "float64", -1, 4, 4, 2), blocks=(2, 2))
    assert b.shape == (-1, 2, 2, 2)
    t = sd.cnn.max_pooling3d(sd.placeholder("t", "float64", -1, 2, 4, 4, 4), kernel=2, stride=2)
    assert t.shape == (-1, 2, 2, 2, 2)
    (p.sum() + t.sum() + b.sum()).mark_as_loss()
    feeds = {"x": r(3, 4, 6, 6), "z": r(2, 4, 4, 2), "t": r(2, 2, 4, 4, 4)}
    grads = sd.calculate_gradients(feeds, "x", "z", "t")
    assert grads["x"].shape == (3, 4, 6, 6) and grads["t"].shape == (2, 2, 4, 4, 4)
    np.testing.assert_array_equal(grads["z"].numpy(), np.ones((2, 4, 4, 2)))


@pytest.mark.parametrize("fwd, adj, x, attrs, adj_attrs", [
    ("im2col", "col2im", (2, 3, 5, 6), {"kernel": 3, "stride": 2, "padding": 1, "dilation": 1},
     {"size": (5, 6), "stride": 2, "padding": 1}),
    ("im2col", "col2im", (1, 2, 5, 4), {"kernel": (2, 2), "padding": "same", "dilation": 2},
     {"size": (5, 4), "padding": "same", "dilation": 2}),
    ("upsampling2d", "upsampling2d_grad", (2, 3, 2, 3), {"scale": (2, 3)}, {"scale": (2, 3)}),
    ("space_to_batch", "batch_to_space", (1, 3, 5, 2), {"blocks": (2, 3),
                                                        "paddings": ((1, 0), (0, 1))},
     {"blocks": (2, 3), "crops": ((1, 0), (0, 1))}),
    ("space_to_depth", "depth_to_space", (2, 3, 4, 6), {"block_size": 2}, {"block_size": 2}),
])
def test_adjoint_identity(fwd, adj, x, attrs, adj_attrs):
    """<A x, y> == <x, A* y>: the helper really is the op's adjoint."""
    xv = r(*x)
    ax = getattr(nd.cnn, fwd)(xv, **attrs).numpy()
    y = r(*ax.shape)
    aty = getattr(nd.cnn, adj)(y, **adj_attrs).numpy()
    assert aty.shape == xv.shape
    np.testing.assert_allclose(np.vdot(ax, y), np.vdot(xv, aty), rtol=1e-12)


def test_second_derivatives_through_linear_layout_ops_and_lrn():
    sd = SameDiff.create()
    x = sd.var("x", r(1, 4, 4, 4))
    h = sd.cnn.local_response_normalization(x, depth=1, alpha=0.3, beta=0.6)
    h = sd.cnn.col2im(sd.cnn.im2col(h, kernel=2, padding=1), size=(4, 4), padding=1)
    h = sd.cnn.avg_pooling3d(sd.cnn.upsampling3d(h.reshape(1, 1, 4, 4, 4), scale=2), kernel=2,
                             padding="same")
    (h * h).sum().mark_as_loss()
    assert check_gradients(sd).passed
    g = nd.grad(lambda v: (nd.cnn.local_response_normalization(v, depth=1) ** 2).sum())
    gg = nd.grad(lambda v: (g(v) * g(v)).sum())(nd.create(r(1, 3, 2, 2)))
    assert gg.shape == (1, 3, 2, 2) and np.isfinite(gg.numpy()).all()


def test_traced_and_compiled_match_eager():
    x = r(2, 4, 6, 6)

    @nd.compile
    def f(x):
        h = nd.cnn.space_to_depth(nd.cnn.local_response_normalization(x, depth=1), block_size=2)
        return nd.cnn.global_max_pooling(nd.cnn.upsampling2d(h, scale=2).tanh())
    want = nd.cnn.global_max_pooling(nd.cnn.upsampling2d(nd.cnn.space_to_depth(
        nd.cnn.local_response_normalization(x, depth=1), block_size=2), scale=2).tanh())
    np.testing.assert_allclose(f(nd.create(x)).numpy(), want.numpy(), rtol=1e-12)


# --- errors ---------------------------------------------------------------------------------------

def test_errors_name_the_problem():
    with pytest.raises(OpError, match="max_pooling1d requires float inputs"):
        nd.cnn.max_pooling1d(np.ones((1, 1, 4), np.int32), kernel=2)
    with pytest.raises(OpError, match="rank 5"):
        nd.cnn.max_pooling3d(r(1, 1, 4, 4), kernel=2)
    with pytest.raises(OpError, match="more than half the kernel"):
        nd.cnn.avg_pooling3d(r(1, 1, 4, 4, 4), kernel=2, padding=2)
    with pytest.raises(OpError, match="does not fit"):
        nd.cnn.max_pooling1d(r(1, 1, 2), kernel=3)
    with pytest.raises(OpError, match="kernel"):
        nd.cnn.avg_pooling1d(r(1, 1, 4))
    with pytest.raises(OpError, match="rank >= 3"):
        nd.cnn.global_avg_pooling(r(2, 3))
    with pytest.raises(OpError, match="channels first"):
        nd.cnn.global_avg_pooling(r(2, 3, 4), data_format="CHW")
    with pytest.raises(OpError, match="not a multiple of block_size"):
        nd.cnn.space_to_depth(r(1, 2, 3, 4), block_size=2)
    with pytest.raises(OpError, match="block_size\\*\\*2"):
        nd.cnn.depth_to_space(r(1, 6, 2, 2), block_size=2)
    with pytest.raises(OpError, match="not a multiple of block"):
        nd.cnn.space_to_batch(r(1, 3, 4, 1), blocks=(2, 2))
    with pytest.raises(OpError, match="not a multiple of the product of blocks"):
        nd.cnn.batch_to_space(r(3, 2, 2, 1), blocks=(2, 2))
    with pytest.raises(OpError, match="one pair per block"):
        nd.cnn.batch_to_space(r(4, 2, 2, 1), blocks=(2, 2), crops=((0, 0),))
    with pytest.raises(OpError, match="crops .* exceed"):
        nd.cnn.batch_to_space(r(4, 1, 1, 1), blocks=(2, 2), crops=((2, 1), (0, 0)))
    with pytest.raises(OpError, match="col2im: cols .* output positions"):
        nd.cnn.col2im(r(1, 1, 2, 2, 3, 3), size=(6, 6))
    with pytest.raises(OpError, match="rank 6"):
        nd.cnn.col2im(r(1, 1, 2, 2), size=(3, 3))
    with pytest.raises(OpError, match="scale"):
        nd.cnn.upsampling2d(r(1, 1, 2, 2), scale=0)
    with pytest.raises(OpError, match="local_response_normalization requires float"):
        nd.cnn.local_response_normalization(np.ones((1, 3, 2, 2), np.int64))
    with pytest.raises(OpError, match="im2col: x must have rank 4"):
        nd.cnn.im2col(r(1, 4, 4), kernel=2)


# --- optional cross-check against PyTorch ----------------------------------------------------------

def test_matches_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    t = torch.tensor
    x1 = r(2, 3, 11)
    np.testing.assert_allclose(nd.cnn.max_pooling1d(x1, kernel=3, stride=2, padding=1,
                                                    dilation=2).numpy(),
                               F.max_pool1d(t(x1), 3, 2, 1, dilation=2).numpy())
    np.testing.assert_allclose(
        nd.cnn.avg_pooling1d(x1, kernel=3, stride=2, padding=1, count_include_pad=True).numpy(),
        F.avg_pool1d(t(x1), 3, 2, 1, count_include_pad=True).numpy(), rtol=1e-12)
    x3 = r(2, 2, 5, 6, 7)
    np.testing.assert_allclose(nd.cnn.max_pooling3d(x3, kernel=3, stride=2, padding=1).numpy(),
                               F.max_pool3d(t(x3), 3, 2, 1).numpy())
    for include in (False, True):
        np.testing.assert_allclose(
            nd.cnn.avg_pooling3d(x3, kernel=(2, 3, 3), stride=2, padding=(1, 1, 0),
                                 count_include_pad=include).numpy(),
            F.avg_pool3d(t(x3), (2, 3, 3), 2, (1, 1, 0), count_include_pad=include).numpy(),
            rtol=1e-12)
    x = r(2, 8, 5, 6)
    np.testing.assert_allclose(nd.cnn.upsampling2d(x, scale=(2, 3)).numpy(),
                               torch.nn.Upsample(scale_factor=(2, 3), mode="nearest")(t(x))
                               .numpy())
    np.testing.assert_allclose(
        nd.cnn.upsampling3d(x3, scale=2).numpy(),
        torch.nn.Upsample(scale_factor=2, mode="nearest")(t(x3)).numpy())
    # im2col = F.unfold (columns [N, C*kH*kW, L]), col2im = F.fold
    kw = {"kernel_size": (3, 2), "dilation": (1, 2), "padding": (1, 1), "stride": (2, 1)}
    cols = nd.cnn.im2col(x, kernel=(3, 2), dilation=(1, 2), padding=1, stride=(2, 1)).numpy()
    np.testing.assert_allclose(cols.reshape(2, 8 * 6, -1), F.unfold(t(x), **kw).numpy())
    y = r(*cols.shape)
    np.testing.assert_allclose(
        nd.cnn.col2im(y, size=(5, 6), dilation=(1, 2), padding=1, stride=(2, 1)).numpy(),
        F.fold(t(y.reshape(2, 48, -1)), output_size=(5, 6), **kw).numpy(), rtol=1e-12)
    # depth_to_space is DCR; pixel_shuffle is CRD: permute the channels to compare
    b, c = 2, 2
    d = nd.cnn.depth_to_space(x, block_size=b).numpy()
    crd = x.reshape(2, b, b, c, 5, 6).transpose(0, 3, 1, 2, 4, 5).reshape(2, 8, 5, 6)
    np.testing.assert_allclose(d, F.pixel_shuffle(t(crd), b).numpy())
    np.testing.assert_allclose(nd.cnn.space_to_depth(d, block_size=b).numpy(), x)
    # LRN: torch divides alpha by the window size 2 * depth + 1
    for depth in (1, 2):
        size = 2 * depth + 1
        np.testing.assert_allclose(
            nd.cnn.local_response_normalization(x, alpha=0.3, beta=0.75, bias=1.5,
                                                depth=depth).numpy(),
            F.local_response_norm(t(x), size, alpha=0.3 * size, beta=0.75, k=1.5).numpy(),
            rtol=1e-10)


def test_channel_orders_agree_across_layouts():
    """NCHW results are the NHWC results transposed (one DCR order for both layouts)."""
    x = r(2, 3, 4, 6)
    xl = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(
        nd.cnn.space_to_depth(x, block_size=2).numpy(),
        nd.cnn.space_to_depth(xl, block_size=2, data_format="NHWC").numpy().transpose(0, 3, 1, 2))
    x3 = r(1, 2, 4, 4, 6)
    xl3 = np.ascontiguousarray(np.moveaxis(x3, 1, -1))
    np.testing.assert_array_equal(
        nd.cnn.avg_pooling3d(x3, kernel=3, stride=2, padding=1).numpy(),
        np.moveaxis(nd.cnn.avg_pooling3d(xl3, kernel=3, stride=2, padding=1,
                                         data_format="NDHWC").numpy(), -1, 1))
