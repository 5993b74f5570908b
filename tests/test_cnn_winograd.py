"""The Winograd F(4x4, 3x3) route of 3x3 stride-1 convolutions (``kernels/winograd.py``) and
the private BLAS it calls (``samediff.kernels.blas``): the transform identity from first principles,
the forward and input adjoint against the loop references (padding of any sign, ragged tiles,
one image split in bands, two threads or one), the routing rules, and the fallback when the
BLAS is missing."""
from __future__ import annotations

import numpy as np
import pytest

from samediff.kernels import blas, workers
from samediff.kernels import im2col as I
from samediff.kernels import cnn as K
from samediff.kernels import winograd as W

try:
    from op_samples_cnn import conv2d_input_grad_ref, conv2d_ref
except ImportError:  # run from the repository root as a package
    from tests.op_samples_cnn import conv2d_input_grad_ref, conv2d_ref

needs_blas = pytest.mark.skipif(not blas.available(), reason=f"no private BLAS: {blas.why_not()}")


@pytest.fixture(autouse=True)
def _every_size(monkeypatch):
    """The route for the small images here too (it is kept for big ones by
    ``MIN_POSITIONS_PER_CHANNEL``; ``test_small_images_of_many_channels_take_im2col`` checks
    that rule)."""
    monkeypatch.setattr(W, "MIN_POSITIONS_PER_CHANNEL", 0)
    monkeypatch.setattr(W, "MIN_WIDTH", 0)
    # and not the channels-last route, which small images of a batch take first
    monkeypatch.setattr(K, "HWC_MAX_WIDTH", -1)
    monkeypatch.setattr(K, "HWC_MAX_WIDTH_INPUT_GRAD", -1)
ATTRS = {"stride": (1, 1), "dilation": (1, 1), "groups": 1, "data_format": "NCHW",
         "weights_format": "HWIO"}


def test_one_axis_identity():
    """``A^T [(G g) * (B^T d)]`` is the 3-tap correlation of six inputs -- for random data,
    which pins all three matrices (written from the points 0, 1, -1, 2, -2, infinity)."""
    rng = np.random.default_rng(0)
    for _ in range(5):
        d, g = rng.standard_normal(6), rng.standard_normal(3)
        want = [sum(d[i + k] * g[k] for k in range(3)) for i in range(4)]
        np.testing.assert_allclose(W._AT @ ((W._G @ g) * (W._BT @ d)), want, atol=1e-12)


CASES = [  # (x shape NCHW, out channels, padding (top/bottom, left/right))
    ((2, 16, 9, 7), 16, (1, 1)),  # ragged last tiles both ways
    ((1, 16, 13, 5), 20, (0, 0)),  # one image: split in bands of tile rows
    ((3, 17, 4, 11), 16, (2, 2)),  # outputs larger than the input
    ((2, 16, 1, 1), 16, (1, 1)),  # one pixel
    ((2, 16, 6, 6), 16, (1, 0)),
]


def _run(monkeypatch, fn, budget=None):
    if budget is not None:  # tiny bands: many units per image
        monkeypatch.setattr(I, "IM2COL_BUDGET", budget)
    return fn()


@needs_blas
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("shape, o, pad", CASES)
@pytest.mark.parametrize("bands", [None, 1])
def test_forward_and_input_adjoint_match_the_references(monkeypatch, shape, o, pad, dtype, rtol,
                                                        bands):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((3, 3, shape[1], o)).astype(dtype)
    assert W.applies((3, 3), (1, 1), (1, 1), shape[1], o, dtype)
    ref = conv2d_ref(x, w, padding=pad, **ATTRS)
    got = _run(monkeypatch, lambda: K.conv(x, w, (1, 1), pad, (1, 1), True), bands)
    assert got.dtype == dtype and got.shape == ref.shape
    scale = np.abs(ref).max()
    np.testing.assert_allclose(got, ref, rtol=0, atol=rtol * scale)
    g = rng.standard_normal(ref.shape).astype(dtype)
    dx_ref = conv2d_input_grad_ref(g, w, x, padding=pad, **ATTRS)
    dx = _run(monkeypatch, lambda: K.conv_input_grad(g, w, shape, (1, 1), pad, (1, 1), True),
              bands)
    np.testing.assert_allclose(dx, dx_ref, rtol=0, atol=rtol * np.abs(dx_ref).max())


@pytest.mark.parametrize("shape, kernel, o", [((2, 16, 7, 6), (3, 3), 16),  # Winograd
                                              ((2, 3, 7, 6), (3, 2), 5)])  # im2col
def test_bias_is_written_with_the_product(shape, kernel, o):
    rng = np.random.default_rng(7)
    x, w, b = (rng.standard_normal(shape), rng.standard_normal(kernel + (shape[1], o)),
               rng.standard_normal(o))
    want = conv2d_ref(x, w, b, padding=(1, 1), **ATTRS)
    got = K.conv(x, w, (1, 1), (1, 1), (1, 1), True, b)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)


@needs_blas
def test_adjoint_identity_in_float64():
    """<conv(x), g> == <x, conv_input_grad(g)>: the two Winograd calls are exact adjoints."""
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((2, 16, 10, 9)), rng.standard_normal((3, 3, 16, 24))
    y = K.conv(x, w, (1, 1), (1, 1), (1, 1), True)
    g = rng.standard_normal(y.shape)
    dx = K.conv_input_grad(g, w, x.shape, (1, 1), (1, 1), (1, 1), True)
    assert np.isclose(np.vdot(y, g), np.vdot(x, dx), rtol=1e-12)


@needs_blas
@pytest.mark.skipif(not workers.enabled(), reason="one CPU or ND4PY_WORKERS=1")
def test_two_threads_equal_one(monkeypatch):
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((3, 16, 12, 12), ), rng.standard_normal((3, 3, 16, 16))
    x, w = x.astype(np.float32), w.astype(np.float32)
    split = K.conv(x, w, (1, 1), (1, 1), (1, 1), True)
    monkeypatch.setattr(workers, "_ENABLED", False)
    np.testing.assert_array_equal(K.conv(x, w, (1, 1), (1, 1), (1, 1), True), split)


@pytest.mark.parametrize("kernel, stride, dilation, c, o, dtype", [
    ((5, 5), (1, 1), (1, 1), 16, 16, np.float32),
    ((3, 3), (2, 2), (1, 1), 16, 16, np.float32),
    ((3, 3), (1, 1), (2, 2), 16, 16, np.float32),
    ((3, 3), (1, 1), (1, 1), 8, 16, np.float32),  # few channels: im2col is cheaper
    ((3, 3), (1, 1), (1, 1), 16, 8, np.float32),
    ((3, 3), (1, 1), (1, 1), 16, 16, np.float16),
])
def test_routing_rules(kernel, stride, dilation, c, o, dtype):
    assert not W.applies(kernel, stride, dilation, c, o, dtype)


def test_switched_off_or_without_blas_the_other_routes_give_the_same_values(monkeypatch):
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 16, 7, 7)), rng.standard_normal((3, 3, 16, 16))
    ref = conv2d_ref(x, w, padding=(1, 1), **ATTRS)
    monkeypatch.setenv("ND4PY_WINOGRAD", "0")
    assert not W.applies((3, 3), (1, 1), (1, 1), 16, 16, np.float64)
    np.testing.assert_allclose(K.conv(x, w, (1, 1), (1, 1), (1, 1), True), ref, atol=1e-12)
    monkeypatch.delenv("ND4PY_WINOGRAD")
    monkeypatch.setattr(blas, "_WHY_NOT", "test: no BLAS")
    assert not blas.available() and not W.enabled()
    np.testing.assert_allclose(K.conv(x, w, (1, 1), (1, 1), (1, 1), True), ref, atol=1e-12)
    a, b, c = (np.ones((2, 3)), np.ones((3, 2)), np.ones((2, 2)))
    blas.gemm(a, b, c, 2.0)  # through numpy
    np.testing.assert_array_equal(c, np.full((2, 2), 5.0))


@needs_blas
@pytest.mark.parametrize("stride, pad", [((1, 1), (0, 0)), ((2, 1), (1, 2))])
def test_im2col_compiled_and_python_drivers_agree(monkeypatch, stride, pad):
    """The im2col drivers run compiled on the private BLAS, or as Python on numpy's GEMM
    when it is missing: the same values either way (and as the loop references)."""
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((3, 4, 9, 8)), rng.standard_normal((3, 2, 4, 5))
    kw = dict(ATTRS, stride=stride, padding=pad)

    def all_three():
        y = K.conv(x, w, stride, pad, (1, 1), True)
        g = np.cos(np.arange(y.size)).reshape(y.shape)
        return (y, K.conv_input_grad(g, w, x.shape, stride, pad, (1, 1), True),
                K.conv_weight_grad(x, g, (3, 2), stride, pad, (1, 1), True), g)
    compiled = all_three()
    monkeypatch.setattr(I, "compiled", lambda: False)
    python = all_three()
    for a, b in zip(compiled, python):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(compiled[0], conv2d_ref(x, w, **kw), atol=1e-10)
    assert K.choose(True, "conv", 4, np.float16) == "taps"  # no compiled float16 kernels


# --- the BLAS ---------------------------------------------------------------------------------

@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_on_views_transposes_and_accumulates(dtype):
    rng = np.random.default_rng(5)
    big = rng.standard_normal((12, 20)).astype(dtype)
    cases = [
        (big[2:6, 1:9], big[1:9, 3:9]),  # strided rows
        (big[:7, :5].T, big[:3, :7].T),  # transposed views
        (big[:1, :4], big[:4, :1]),  # vectors
        (big[:3, :0], big[:0, :2]),  # depth 0: c = beta * c
    ]
    for a, b in cases:
        c = rng.standard_normal((a.shape[0], b.shape[1])).astype(dtype)
        want = a.astype(np.float64) @ b + 0.5 * c
        blas.gemm(a, b, c, 0.5)
        np.testing.assert_allclose(c, want, rtol=1e-5 if dtype == np.float32 else 1e-12,
                                   atol=1e-5)


def test_gemm_rejects_bad_operands():
    with pytest.raises(TypeError, match="float32 or float64"):
        blas.gemm(np.ones((2, 2), np.float32), np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(TypeError, match="float32 or float64"):
        blas.gemm(*(np.ones((2, 2), np.int64),) * 3)
    if blas.available():
        with pytest.raises(ValueError, match="shapes do not chain"):
            blas.gemm(np.ones((2, 3)), np.ones((4, 2)), np.ones((2, 2)))
        with pytest.raises(ValueError, match="no unit-stride axis"):
            blas.gemm(np.ones((4, 6))[::2, ::2], np.ones((3, 2)), np.ones((2, 2)))


def test_small_images_of_many_channels_take_im2col(monkeypatch):
    """The filter transform (36 x C x O values) is not worth it for few output positions per
    channel, nor narrow images' few tiles per row: a 7x7 image of 64 channels goes by im2col;
    at 56x56 by Winograd."""
    monkeypatch.setattr(W, "MIN_POSITIONS_PER_CHANNEL", 8)
    monkeypatch.setattr(W, "MIN_WIDTH", 16)
    assert not W.applies((3, 3), (1, 1), (1, 1), 64, 64, np.float32, positions=49, width=7)
    assert not W.applies((3, 3), (1, 1), (1, 1), 64, 64, np.float32, positions=32 * 64, width=8)
    assert W.applies((3, 3), (1, 1), (1, 1), 64, 64, np.float32, positions=56 * 56, width=56) \
        == W.enabled()
    calls = []
    monkeypatch.setattr(K, "_winograd", lambda *a, **k: calls.append(1))
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((1, 64, 7, 7)), rng.standard_normal((3, 3, 64, 64))
    got = K.conv(x, w, (1, 1), (1, 1), (1, 1), True)
    np.testing.assert_allclose(got, conv2d_ref(x, w, padding=(1, 1), **ATTRS), atol=1e-9)
    assert not calls


@needs_blas
def test_batches_of_16_wide_images_take_winograd_before_channels_last(monkeypatch):
    """From 16 wide the Winograd route is tried before the channels-last one (0.55-0.87x its
    time at batch 32); below, the channels-last route keeps them."""
    monkeypatch.setattr(W, "MIN_POSITIONS_PER_CHANNEL", 8)
    monkeypatch.setattr(W, "MIN_WIDTH", 16)
    monkeypatch.setattr(K, "HWC_MAX_WIDTH", 16)
    monkeypatch.setattr(K, "HWC_MAX_WIDTH_INPUT_GRAD", 32)
    calls = []
    real = K._winograd
    monkeypatch.setattr(K, "_winograd", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    rng = np.random.default_rng(5)
    for hw, want in ((16, 2), (8, 0)):
        calls.clear()
        x = rng.standard_normal((4, 16, hw, hw)).astype(np.float32)
        w = rng.standard_normal((3, 3, 16, 16)).astype(np.float32)
        y = K.conv(x, w, (1, 1), (1, 1), (1, 1), True)
        np.testing.assert_allclose(y, conv2d_ref(x, w, padding=(1, 1), **ATTRS), rtol=0,
                                   atol=2e-5 * np.abs(y).max())
        K.conv_input_grad(y, w, x.shape, (1, 1), (1, 1), (1, 1), True)
        assert len(calls) == want, hw
