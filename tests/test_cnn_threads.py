"""Convolution and pooling split over two threads (``samediff.kernels.workers``): the same values as
one thread and as the loop references, whatever the split (uneven halves, row bands, padding,
stride), and the helper's own contract (errors, nesting, concurrent callers)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import nd4py as nd
from samediff.kernels import workers
from samediff.kernels import im2col as I
from samediff.kernels import cnn as K

try:
    from op_samples_cnn import (conv2d_input_grad_ref, conv2d_ref, conv2d_weight_grad_ref,
                                max_pooling2d_grad_ref, max_pooling2d_ref)
except ImportError:  # run from the repository root as a package
    from tests.op_samples_cnn import (conv2d_input_grad_ref, conv2d_ref, conv2d_weight_grad_ref,
                                      max_pooling2d_grad_ref, max_pooling2d_ref)

pytestmark = pytest.mark.skipif(not workers.enabled(), reason="one CPU or ND4PY_WORKERS=1")

GEOMETRIES = [  # (x shape NCHW, kernel, out channels, stride, padding)
    ((3, 2, 9, 9), (3, 3), 4, (1, 1), (1, 1)),
    ((5, 3, 11, 10), (3, 2), 2, (2, 1), (0, 1)),
    ((2, 9, 8, 8), (2, 2), 3, (2, 2), (0, 0)),  # 9 channels: the input adjoint goes per tap
]


@pytest.fixture
def always_split(monkeypatch):
    """Split every op that has two images, however small; count the splits."""
    monkeypatch.setattr(K, "SPLIT_MIN_MACS", 0)
    monkeypatch.setattr(K, "SPLIT_MIN_POOL", 0)
    monkeypatch.setattr(K, "SPLIT_MIN_POOL_FORWARD", 0)
    calls = []
    real = workers.both

    def counting(first, second, **kw):
        calls.append(1)
        real(first, second, **kw)
    monkeypatch.setattr(workers, "both", counting)
    return calls


def _serial(monkeypatch, fn):
    with monkeypatch.context() as m:
        m.setattr(workers, "_ENABLED", False)
        return fn()


@pytest.mark.parametrize("bands", [False, True])
@pytest.mark.parametrize("shape, kernel, o, stride, pad", GEOMETRIES)
def test_split_convolution_matches_one_thread_and_reference(always_split, monkeypatch, bands,
                                                            shape, kernel, o, stride, pad):
    if bands:  # a chunk holds a few output rows of one image: halves still own whole images
        monkeypatch.setattr(I, "IM2COL_FLOOR", 1)
        monkeypatch.setattr(I, "IM2COL_BUDGET", 2 * shape[3] * kernel[0] * kernel[1] * shape[1])
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    w = rng.standard_normal(kernel + (shape[1], o))
    kw = dict(stride=stride, padding=pad, dilation=(1, 1), groups=1, data_format="NCHW",
              weights_format="HWIO")
    runs = {
        "conv": (lambda: K.conv(x, w, stride, pad, (1, 1), True),
                 lambda: conv2d_ref(x, w, **kw)),
    }
    y = runs["conv"][0]()
    g = rng.standard_normal(y.shape)
    runs["input_grad"] = (lambda: K.conv_input_grad(g, w, x.shape, stride, pad, (1, 1), True),
                          lambda: conv2d_input_grad_ref(g, w, x, **kw))
    runs["weight_grad"] = (lambda: K.conv_weight_grad(x, g, kernel, stride, pad, (1, 1), True),
                           lambda: conv2d_weight_grad_ref(x, g, w, **kw))
    for name, (ours, ref) in runs.items():
        before = len(always_split)
        split = ours()
        assert len(always_split) > before or (name == "input_grad" and shape[1] > 8), name
        np.testing.assert_allclose(split, _serial(monkeypatch, ours), rtol=1e-12, atol=1e-12,
                                   err_msg=name)
        np.testing.assert_allclose(split, ref(), rtol=1e-10, atol=1e-10, err_msg=name)


@pytest.mark.parametrize("kernel, stride, pad", [((2, 2), (2, 2), (0, 0)),
                                                 ((3, 3), (2, 1), (1, 1))])
def test_split_max_pool_matches_reference(always_split, kernel, stride, pad):
    rng = np.random.default_rng(1)
    x = rng.integers(-3, 3, (3, 2, 8, 9)).astype(np.float64)  # ties: the first maximum wins
    kw = dict(kernel=kernel, stride=stride, padding=pad, dilation=(1, 1), data_format="NCHW")
    y = K.max_pool(x, kernel, stride, pad, (1, 1), True)
    np.testing.assert_array_equal(y, max_pooling2d_ref(x, **kw))
    g = rng.standard_normal(y.shape)
    dx = K.max_pool_grad(x, g, kernel, stride, pad, (1, 1), True)
    np.testing.assert_allclose(dx, max_pooling2d_grad_ref(x, g, **kw), rtol=1e-12)
    # the 2x2 forward is compiled and splits too; other windows' numpy calls stay on one thread
    assert len(always_split) == (2 if kernel == (2, 2) else 1)


@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (3, 2, 4, 4), (1, 1, 3, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_2x2_max_pool_forward_nan_inf_and_odd_edges(always_split, monkeypatch, shape, dtype):
    """The compiled 2x2 forward against numpy's windowed max: a NaN anywhere in a window
    makes it NaN, -inf/inf are ordinary values, an odd last row/column belongs to no window;
    split and one-thread runs agree bit for bit."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[rng.choice(flat.size, max(1, flat.size // 7), replace=False)] = np.nan
    flat[rng.choice(flat.size, max(1, flat.size // 9), replace=False)] = -np.inf
    flat[rng.choice(flat.size, max(1, flat.size // 11), replace=False)] = np.inf
    n, c, h, w = shape
    oh, ow = h // 2, w // 2
    want = x[:, :, :2 * oh, :2 * ow].reshape(n, c, oh, 2, ow, 2).max(axis=(3, 5))
    got = K.max_pool(x, (2, 2), (2, 2), (0, 0), (1, 1), True)
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, _serial(monkeypatch, lambda: K.max_pool(
        x, (2, 2), (2, 2), (0, 0), (1, 1), True)))
    if n > 1:
        assert always_split


def test_both_runs_both_and_raises_either_error():
    got = []
    workers.both(lambda: got.append("a"), lambda: got.append("b"))
    assert sorted(got) == ["a", "b"]

    def boom():
        raise KeyError("second half")
    with pytest.raises(KeyError, match="second half"):
        workers.both(lambda: None, boom)
    with pytest.raises(ZeroDivisionError):
        workers.both(lambda: 1 / 0, lambda: None)
    done = []
    workers.both(lambda: done.append(1), lambda: done.append(2))  # the helper still serves
    assert sorted(done) == [1, 2]


def test_nested_and_concurrent_callers_run_every_job_once():
    hits = []
    lock = threading.Lock()

    def hit(tag):
        def job():
            with lock:
                hits.append(tag)
        return job

    def nested(tag):  # a job that itself splits: the helper is busy, so it runs serially
        return lambda: workers.both(hit(tag + "1"), hit(tag + "2"))

    threads = [threading.Thread(target=workers.both, args=(nested(f"t{k}a"), nested(f"t{k}b")))
               for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(hits) == sorted(f"t{k}{h}{i}" for k in range(4) for h in "ab" for i in "12")


@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (1, 2, 4, 4), (3, 1, 7, 2)])
def test_2x2_max_pool_adjoint_zeroes_what_no_window_covers(shape):
    """The 2x2 stride-2 adjoint writes every covered input and zeroes only the odd last
    row/column: fill the allocator with garbage first so a missed zero would show."""
    for _ in range(3):
        np.full(int(np.prod(shape)), 7.0)  # freed buffers of the same size, not zero
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape)
    kw = dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), data_format="NCHW")
    g = rng.standard_normal(K.max_pool(x, (2, 2), (2, 2), (0, 0), (1, 1), True).shape)
    dx = K.max_pool_grad(x, g, (2, 2), (2, 2), (0, 0), (1, 1), True)
    np.testing.assert_array_equal(dx, max_pooling2d_grad_ref(x, g, **kw))


@pytest.mark.parametrize("shape, w_shape, cf, pad, route", [
    ((4, 16, 9, 10), (3, 3, 16, 16), True, (1, 1), "winograd"),
    ((4, 16, 9, 10), (3, 3, 16, 16), True, (1, 1), "hwc"),  # channels-last, compiled
    ((4, 3, 9, 10), (3, 3, 3, 5), True, (1, 1), "im2col"),  # compiled
    ((4, 9, 10, 3), (3, 3, 3, 5), False, (0, 1), "taps"),   # NHWC: per tap
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_epilogue_equals_relu_after_every_route(always_split, monkeypatch, shape, w_shape,
                                                     cf, pad, route, dtype):
    """``conv(..., relu=True)`` is ``np.maximum(conv(...), 0)`` bit for bit (NaN kept), on
    every route, split or not, in bands or whole images."""
    if route != "hwc":
        monkeypatch.setattr(K, "HWC_MAX_WIDTH", -1)
        monkeypatch.setattr(K, "HWC_MAX_WIDTH_INPUT_GRAD", -1)
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape).astype(dtype)
    x.reshape(-1)[5] = np.nan  # a NaN output must stay NaN through the epilogue
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[3]).astype(dtype)
    for budget in (None, 4 * w_shape[0] * w_shape[1] * w_shape[2] * shape[3]):
        with monkeypatch.context() as m:
            if budget:  # bands of a few rows per unit (GEMMs of other sizes: other roundings)
                m.setattr(I, "IM2COL_FLOOR", 1)
                m.setattr(I, "IM2COL_BUDGET", budget)
            want = np.maximum(K.conv(x, w, (1, 1), pad, (1, 1), cf, b), 0)
            assert np.isnan(want).any() and (want == 0).any()
            got = K.conv(x, w, (1, 1), pad, (1, 1), cf, b, relu=True)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(_serial(monkeypatch, lambda: K.conv(
                x, w, (1, 1), pad, (1, 1), cf, b, relu=True)), want)


@pytest.mark.parametrize("shape", [(2, 3, 7, 7), (2, 2, 5, 8), (1, 2, 6, 9)])
def test_2x2_same_padding_on_odd_sizes_takes_the_general_route(shape):
    """Under ``"same"`` an odd size pads one after: the last window reaches past the image,
    so the compiled 2x2 kernels (which read whole windows) must not take it -- through the
    public ops, forward and gradient, against the reference."""
    rng = np.random.default_rng(6)
    x = -np.abs(rng.standard_normal(shape)) - 1  # all negative: a read past the end shows
    kw = dict(kernel=(2, 2), stride=(2, 2), padding="same", dilation=(1, 1),
              data_format="NCHW")
    y = nd.cnn.max_pooling2d(nd.create(x), kernel=2, stride=2, padding="same").numpy()
    np.testing.assert_array_equal(y, max_pooling2d_ref(x, **kw))
    g = rng.standard_normal(y.shape)
    dx = K.max_pool_grad(x, g, (2, 2), (2, 2), "same", (1, 1), True)
    np.testing.assert_allclose(dx, max_pooling2d_grad_ref(x, g, **kw), rtol=1e-12)


def test_relu_span_is_np_maximum_bit_for_bit():
    """The conv epilogue's relu: +0.0 for -0.0 and negatives, NaN and positives kept."""
    from samediff.kernels.im2col import relu_span
    for dtype in (np.float32, np.float64):
        a = np.array([-0.0, 0.0, -1.5, np.nan, 2.0, -np.inf, np.inf, 1e-30, -1e-30], dtype)
        got = np.concatenate([a, a])
        relu_span(got, 3, a.size, dtype(0))  # a span in the middle: the rest untouched
        want = np.concatenate([a[:3], np.maximum(np.concatenate([a[3:], a[:3]]), 0), a[3:]])
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
