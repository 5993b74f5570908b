"""The channels-last im2col route of NCHW convolutions of small images
(``samediff/kernels/im2col_hwc.py``): forward (bias, relu), input and weight adjoints against
the loop references for strides, dilations, padding of any sign and odd sizes; chunks of one
image or many, one thread or two (the same bits); and which shapes take the route."""
from __future__ import annotations

import numpy as np
import pytest

from samediff.kernels import blas, workers
from samediff.kernels import cnn as K
from samediff.kernels import im2col as I
from samediff.kernels import im2col_hwc as H

try:
    from op_samples_cnn import conv2d_input_grad_ref, conv2d_ref, conv2d_weight_grad_ref
except ImportError:  # run from the repository root as a package
    from tests.op_samples_cnn import conv2d_input_grad_ref, conv2d_ref, conv2d_weight_grad_ref

pytestmark = pytest.mark.skipif(not blas.available(), reason="the route needs the private BLAS")

CASES = [  # (x shape NCHW, kernel, out channels, stride, padding, dilation)
    ((3, 16, 5, 6), (3, 3), 8, (1, 1), (1, 1), (1, 1)),    # the digits CNN's kind, smaller
    ((3, 17, 7, 5), (3, 2), 4, (2, 1), (0, 1), (1, 1)),    # odd sizes, strides, uneven kernel
    ((2, 16, 6, 9), (3, 3), 8, (1, 2), (2, 0), (2, 1)),    # dilation; padding beyond the taps
    ((5, 20, 4, 4), (1, 3), 7, (1, 1), (0, 1), (1, 1)),    # a 1x3 kernel
    ((2, 16, 3, 3), (3, 3), 5, (1, 1), (3, 3), (1, 1)),    # outputs larger than the input
]


def _kw(stride, pad, dilation):
    return dict(stride=stride, padding=pad, dilation=dilation, groups=1, data_format="NCHW",
                weights_format="HWIO")


def _plan_is_hwc(x_shape, w_shape, stride, pad, dilation, dtype) -> bool:
    geo = K.geometry(x_shape[2:], w_shape[:2], stride, pad, dilation)
    return all(K._hwc_plan(x_shape, w_shape, geo, True, dtype, op) is not None
               for op in ("conv", "weight_grad", "input_grad"))


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("shape, kernel, o, stride, pad, dilation", CASES)
@pytest.mark.parametrize("images_per_chunk", [None, 1])
def test_forward_and_adjoints_match_the_references(monkeypatch, shape, kernel, o, stride, pad,
                                                   dilation, dtype, tol, images_per_chunk):
    if images_per_chunk:  # a budget of one image's cols: chunks of one image
        geo = K.geometry(shape[2:], kernel, stride, pad, dilation)
        one = geo[0][2] * geo[1][2] * kernel[0] * kernel[1] * shape[1]
        monkeypatch.setattr(I, "IM2COL_FLOOR", one)
        monkeypatch.setattr(I, "IM2COL_BUDGET", one)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(kernel + (shape[1], o)).astype(dtype)
    b = rng.standard_normal(o).astype(dtype)
    assert _plan_is_hwc(shape, w.shape, stride, pad, dilation, dtype)
    kw = _kw(stride, pad, dilation)
    ref = conv2d_ref(x, w, b, **kw)
    got = K.conv(x, w, stride, pad, dilation, True, b)
    assert got.dtype == dtype and got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=0, atol=tol * np.abs(ref).max())
    relu = K.conv(x, w, stride, pad, dilation, True, b, relu=True)
    np.testing.assert_array_equal(relu, np.maximum(got, 0))
    g = rng.standard_normal(ref.shape).astype(dtype)
    dx = K.conv_input_grad(g, w, shape, stride, pad, dilation, True)
    dx_ref = conv2d_input_grad_ref(g, w, x, **kw)
    assert dx.dtype == dtype
    np.testing.assert_allclose(dx, dx_ref, rtol=0, atol=tol * np.abs(dx_ref).max())
    dw = K.conv_weight_grad(x, g, kernel, stride, pad, dilation, True)
    dw_ref = conv2d_weight_grad_ref(x, g, w, **kw)
    assert dw.shape == w.shape and dw.dtype == dtype
    np.testing.assert_allclose(dw, dw_ref, rtol=0, atol=tol * np.abs(dw_ref).max())


@pytest.mark.skipif(not workers.enabled(), reason="one CPU or ND4PY_WORKERS=1")
def test_two_threads_give_the_bits_of_one(monkeypatch):
    """Halves own whole chunks of images: forward and input adjoint write disjoint images, the
    weight adjoint sums its halves' partial products -- the same sum one thread makes of the
    same chunks (the chunking does not depend on the thread count)."""
    monkeypatch.setattr(K, "SPLIT_MIN_MACS", 0)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 16, 5, 7)).astype(np.float32)
    w = rng.standard_normal((3, 3, 16, 6)).astype(np.float32)
    g = rng.standard_normal((6, 6, 5, 7)).astype(np.float32)
    runs = [lambda: K.conv(x, w, (1, 1), "same", (1, 1), True),
            lambda: K.conv_input_grad(g, w, x.shape, (1, 1), "same", (1, 1), True),
            lambda: K.conv_weight_grad(x, g, (3, 3), (1, 1), "same", (1, 1), True)]
    calls = []
    real = workers.both
    monkeypatch.setattr(workers, "both", lambda a, b, **kw: (calls.append(1), real(a, b, **kw)))
    split = [run() for run in runs]
    assert len(calls) == 3
    monkeypatch.setattr(workers, "_ENABLED", False)
    for got, run in zip(split, runs):
        np.testing.assert_array_equal(got, run())


def test_chunks_cover_the_batch_evenly():
    for n, per_image, budget, halves in [(32, 18432, 1 << 18, True), (32, 18432, 1 << 18, False),
                                         (3, 10, 1000, True), (1, 10, 5, True),
                                         (7, 100, 250, True)]:
        todo = H.chunks(n, per_image, budget, halves)
        assert todo[0, 0] == 0 and todo[-1, 1] == n
        assert (todo[1:, 0] == todo[:-1, 1]).all() and (todo[:, 1] > todo[:, 0]).all()
        sizes = todo[:, 1] - todo[:, 0]
        assert sizes.max() - sizes.min() <= 1
        assert sizes.max() * per_image <= budget or sizes.max() == 1
        if halves and len(todo) < n:
            assert len(todo) % 2 == 0


@pytest.mark.parametrize("x_shape, w_shape, want, want_input_grad", [
    ((32, 32, 8, 8), (3, 3, 32, 32), True, True),       # the digits CNN
    ((32, 32, 4, 4), (3, 3, 32, 64), True, True),
    ((32, 64, 32, 32), (3, 3, 64, 64), False, True),    # (3x3 s1 goes Winograd before this)
    ((32, 8, 8, 8), (3, 3, 8, 32), False, False),       # few channels: per-image rows are longer
    ((32, 32, 8, 8), (1, 1, 32, 64), False, False),     # 1x1: nothing to gather
    ((1, 32, 8, 8), (3, 3, 32, 32), False, False),      # one image: bands of rows on two threads
    ((8, 64, 56, 56), (3, 3, 64, 64), False, False),    # wide rows: the NCHW gather copies well
])
def test_small_images_of_many_channels_take_the_route(x_shape, w_shape, want, want_input_grad):
    geo = K.geometry(x_shape[2:], w_shape[:2], (1, 1), "same", (1, 1))
    for op, expected in (("conv", want), ("weight_grad", want), ("input_grad", want_input_grad)):
        assert (K._hwc_plan(x_shape, w_shape, geo, True, np.float32, op) is not None) is expected
        assert K._hwc_plan(x_shape, w_shape, geo, True, np.float16, op) is None
