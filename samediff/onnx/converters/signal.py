"""ONNX converters, signal family: DFT (opsets 17 and 20), STFT, the HannWindow /
HammingWindow / BlackmanWindow generators and MelWeightMatrix.

ONNX carries complex values as a trailing dim of 2 (real, imaginary) and real signals as a
trailing dim of 1; every result here keeps that layout.

Why a DFT is a contraction with constant basis matrices, not the ``fft`` op family
(``samediff/ops/fft.py``): those ops are complex-valued library steps of a plan with no
gradient rule, and ONNX's [..., 2] layout would need complex values assembled from and split
back into real pairs around them. A DFT of static length ``n`` over an axis of static size
``m`` is linear in the (real, imaginary) pairs, so it is one ``tensor_mmul`` of the input's
[..., m, c] with a constant [m, c, K, c'] basis of cosines and sines built with numpy at
import: every variant -- forward/inverse, full/one-sided, real/complex input, cropping or
zero padding to ``dft_length`` -- is only a different basis (cropped samples get zero rows,
padded ones simply do not exist), and the result is differentiable (the contraction's
gradient is the transposed contraction), traced and compiled with no new kernel. The cost is
O(m n) work and an m x n basis instead of O(n log n): the right trade for the frame lengths
of STFTs and spectral layers (hundreds to a few thousand samples). Where no basis can be
built -- the transformed dim's size is known only at run time, or the basis would exceed
``MAX_BASIS_ENTRIES`` (a long signal transformed whole) -- the DFT falls back to the ``fft``
ops on a complex value assembled from the pairs: the same numbers, O(n log n), but not
differentiable (autodiff names the ``fft`` op if a loss depends on it).

STFT is framing (a ``gather`` of the frames' sample indices, static from the static signal
length) times the window, then the same one-sided/full DFT basis contraction; a window known
at import is folded into the basis. Windows and MelWeightMatrix of static inputs are
constants computed with numpy at import.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ops.indexing import index_to_spec
from ..dtypes import np_dtype
from ..table import converter

Value = Any  # SDVariable | np.ndarray

#: the largest DFT basis (m * c * K * c' entries) built at import: 2**25 float32 entries is
#: 128 MB, far above an STFT's frame (a 2048-sample one-sided frame needs ~4.2M entries)
MAX_BASIS_ENTRIES = 1 << 25


# --- the DFT basis -------------------------------------------------------------------------------

def _phase(m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of 2 pi t j / n for input index t < m and output index j < k, [m, k].

    The product t*j is reduced modulo n in integers first, so large indices lose no
    precision, and values that are zero in exact arithmetic (sin 0, sin pi, cos pi/2...)
    come out as exact zeros rather than 1e-16 noise."""
    r = (np.arange(m, dtype=np.int64)[:, None] * np.arange(k, dtype=np.int64)[None, :]) % n
    angle = (2.0 * np.pi / n) * r
    cos, sin = np.cos(angle), np.sin(angle)
    cos[np.abs(cos) < 1e-12] = 0.0
    sin[np.abs(sin) < 1e-12] = 0.0
    return cos, sin


def dft_basis(m: int, channels: int, n: int, *, inverse: bool, onesided: bool) -> np.ndarray:
    """The float64 basis ``W`` with ``y[..., j, q] = sum_{t, p} x[..., t, p] W[t, p, j, q]``
    for an ONNX DFT of length ``n`` over an axis of ``m`` samples with ``channels`` (1 real,
    2 complex) values each.

    * forward: ``y_j = sum_t x_t e^{-2 pi i t j / n}``, j < n (one-sided: j <= n // 2);
    * inverse, full: ``y_j = (1/n) sum_t x_t e^{+2 pi i t j / n}``;
    * inverse, one-sided (IRFFT): the real ``y_j`` for j < n of the Hermitian spectrum
      whose first n // 2 + 1 bins are given: bins 1..ceil(n/2)-1 count twice (their
      conjugate mirrors), the imaginary parts of bin 0 (and bin n/2, n even) drop out.

    Input samples at t >= n (t > n // 2 for IRFFT) are cropped: their rows are zero."""
    irfft = inverse and onesided
    k = n if (inverse or not onesided) else n // 2 + 1
    cos, sin = _phase(m, k, n)
    used = min(m, n // 2 + 1 if irfft else n)  # the input samples the transform reads
    cos[used:] = 0.0
    sin[used:] = 0.0
    if irfft:
        twice = np.full((m, 1), 2.0)
        twice[0] = 1.0
        if n % 2 == 0 and n // 2 < m:
            twice[n // 2] = 1.0  # (the Nyquist bin is its own mirror)
        w = np.zeros((m, 2, k, 1))
        w[:, 0, :, 0] = twice * cos / n
        w[:, 1, :, 0] = -twice * sin / n
        return w[:, :channels]
    sign, scale = (1.0, 1.0 / n) if inverse else (-1.0, 1.0)
    w = np.empty((m, 2, k, 2))
    # (a + ib)(cos + i sign sin) = (a cos - sign b sin) + i (sign a sin + b cos)
    w[:, 0, :, 0] = cos * scale
    w[:, 1, :, 0] = -sign * sin * scale
    w[:, 0, :, 1] = sign * sin * scale
    w[:, 1, :, 1] = cos * scale
    return w[:, :channels]


def _compute_dtype(node: Any, x: Value) -> np.dtype:
    dtype = node.dtype(x)
    if dtype.kind != "f":
        raise node.fail(f"{node.op_type} takes a floating-point signal, got {dtype}")
    # (half-precision sums of hundreds of products lose the spectrum: work in float32)
    return dtype if dtype.itemsize >= 4 else np.dtype(np.float32)


def _basis_fits(m: int, channels: int, k: int, cout: int) -> bool:
    """Whether a basis for ``m`` samples can be built at import (m known, size bounded)."""
    return 0 <= m and m * channels * k * cout <= MAX_BASIS_ENTRIES


def _fft_dft(node: Any, x: Value, axis: int, n: int | None, *, inverse: bool,
             onesided: bool) -> Value:
    """The same DFT through the (complex, non-differentiable) ``fft`` ops: for a transformed
    dim of run-time size or a transform too long for a basis."""
    dtype = node.dtype(x)
    work = _compute_dtype(node, x)
    cdtype = np.dtype(np.complex64 if work == np.float32 else np.complex128)
    real_in = node.shape(x)[-1] == 1
    if real_in:
        signal = node.op("squeeze", x, axis=(-1,))
        if work != dtype:
            signal = node.op("cast", signal, dtype=work)
    else:
        re = node.op("strided_slice", x, index=index_to_spec((Ellipsis, 0)))
        im = node.op("strided_slice", x, index=index_to_spec((Ellipsis, 1)))
        signal = node.op("add", node.op("cast", re, dtype=cdtype),
                         node.op("mul", node.op("cast", im, dtype=cdtype),
                                 np.asarray(1j, cdtype)))
    if inverse and onesided:  # IRFFT: numpy's irfft reads the first n // 2 + 1 bins too
        y = node.op("irfft", signal, n=n, axis=axis)
        return node.op("cast", node.op("expand_dims", y, axis=-1), dtype=dtype)
    kind = "ifft" if inverse else ("rfft" if onesided and real_in else "fft")
    y = node.op(kind, signal, n=n, axis=axis)
    if onesided and not inverse and not real_in:  # (a complex one-sided spectrum: the
        # full one cropped, as ONNX's reference computes it; n is static here)
        crop = [slice(None)] * (node.rank(x) - 1)
        crop[axis] = slice(0, n // 2 + 1)
        y = node.op("strided_slice", y, index=index_to_spec(tuple(crop)))
    pair = node.op("stack", node.op("real", y), node.op("imag", y), axis=-1)
    return node.op("cast", pair, dtype=dtype)


def _apply_dft(node: Any, x: Value, axis: int, n: int | None, *, inverse: bool, onesided: bool,
               window: np.ndarray | None = None) -> Value:
    """ONNX DFT of ``x`` [..., c] along ``axis`` (non-negative, not the last), length ``n``
    (None: the run-time size of that dim, or twice it less 2 for IRFFT, as ONNX defaults);
    ``window`` (static, one weight per input sample) is folded into the basis. A basis
    contraction where one can be built, else the ``fft`` ops."""
    shape = node.shape(x)
    rank = len(shape)
    m, channels = shape[axis], shape[-1]
    if channels not in (1, 2):
        raise node.fail(f"the last dim holds (real, imaginary) parts and must be 1 (real) or "
                        f"2 (complex), got {channels}")
    if inverse and onesided and channels != 2:
        raise node.fail("an inverse one-sided DFT (IRFFT) takes a complex one-sided spectrum "
                        "([..., 2]); a real one ([..., 1]) is not supported")
    irfft = inverse and onesided
    if n is None:  # (only when m is known only at run time: no basis either way)
        if onesided and not inverse and channels == 2:
            raise node.fail("a one-sided DFT of a complex signal whose length is known only "
                            "at run time is not supported: give dft_length (a constant), or "
                            "a real signal ([..., 1])")
        return _fft_dft(node, x, axis, None, inverse=inverse, onesided=onesided)
    k = n if (inverse or not onesided) else n // 2 + 1
    cout = 1 if irfft else 2
    if not _basis_fits(m, channels, k, cout):
        if window is not None:  # (no basis to fold it into: weight the samples instead)
            w = np.asarray(window, node.dtype(x)).reshape((-1,) + (1,) * (len(shape) - 1 - axis))
            x = node.op("mul", x, w)
        return _fft_dft(node, x, axis, n, inverse=inverse, onesided=onesided)
    dtype = node.dtype(x)
    work = _compute_dtype(node, x)
    basis = dft_basis(m, channels, n, inverse=inverse, onesided=onesided)
    if window is not None:
        basis = basis * np.asarray(window, np.float64).reshape(-1, 1, 1, 1)
    xs = x if work == dtype else node.op("cast", x, dtype=work)
    # contract (axis, last) with the basis's (t, p): x's other dims, then (j, q)
    y = node.op("tensor_mmul", xs, basis.astype(work), dims_x=(axis, rank - 1), dims_y=(0, 1))
    if axis != rank - 2:  # move the transformed dim j from rank - 2 back to ``axis``
        perm = (*range(axis), rank - 2, *range(axis, rank - 2), rank - 1)
        y = node.op("permute", y, dims=perm)
    return y if work == dtype else node.op("cast", y, dtype=dtype)


def _static_scalar(node: Any, i: int, what: str) -> int | None:
    values = node.static_ints(i, what)
    if values is None:
        return None
    if len(values) != 1:
        raise node.fail(f"{what} must be a scalar, got {len(values)} values")
    return values[0]


# --- DFT ----------------------------------------------------------------------------------------

@converter("DFT", since=(17, 20))
def _dft(node):
    """DFT-17 takes the axis as an attribute (default 1), DFT-20 as input 2 (default -2)."""
    x = node.input(0)
    rank = node.rank(x)
    if rank < 2:
        raise node.fail(f"the input must have rank >= 2 (signal dims, then the [1|2] "
                        f"real/imaginary dim), got rank {rank}")
    if node.opset >= 20:
        axis = _static_scalar(node, 2, "axis")
        axis = -2 if axis is None else axis
    else:
        axis = int(node.attr("axis", 1))
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        raise node.fail(f"axis {axis} is out of range for rank {rank}: it must be in "
                        f"[-{rank}, -2] or [0, {rank - 2}] (the last dim holds the "
                        f"real/imaginary parts)")
    axis %= rank
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    for name, value in (("inverse", node.attr("inverse", 0)),
                        ("onesided", node.attr("onesided", 0))):
        if value not in (0, 1):
            raise node.fail(f"{name} must be 0 or 1, got {value}")
    n = _static_scalar(node, 1, "dft_length")
    m = node.shape(x)[axis]
    if n is None and m >= 0:
        n = 2 * (m - 1) if inverse and onesided else m
    if n is not None and n < 1:
        raise node.fail(f"the DFT length must be >= 1, got {n}")
    return _apply_dft(node, x, axis, n, inverse=inverse, onesided=onesided)


# --- STFT ----------------------------------------------------------------------------------------

@converter("STFT", since=17)
def _stft(node):
    """Frames [B, F, frame_length, c] gathered at static sample indices, times the window,
    then the DFT of each frame over its samples: [B, F, K, 2]."""
    signal = node.input(0)
    shape = node.shape(signal)
    if len(shape) != 3:
        raise node.fail(f"the signal must have rank 3 ([batch, length, 1|2]), got shape "
                        f"{tuple(shape)}")
    length = shape[1]
    if length < 0:
        raise node.fail("the signal length must be known at import (the frame count and the "
                        "framing indices are built then); it is known only at run time: give "
                        "the model a static signal length")
    step = _static_scalar(node, 1, "frame_step")
    if step is None or step < 1:
        raise node.fail(f"frame_step must be a positive scalar, got {step}")
    window = node.input(2)
    frame_length = _static_scalar(node, 3, "frame_length")
    if window is not None:
        if node.rank(window) != 1:
            raise node.fail(f"the window must be 1-D, got shape {tuple(node.shape(window))}")
        wlen = node.shape(window)[0]
        if frame_length is None:
            if wlen < 0:
                raise node.fail("the window's length (the frame length) must be known at "
                                "import, or frame_length given")
            frame_length = wlen
        elif wlen >= 0 and wlen != frame_length:
            raise node.fail(f"the window has {wlen} samples but frame_length is "
                            f"{frame_length}; they must be equal")
    elif frame_length is None:
        frame_length = length
    if not 1 <= frame_length <= length:
        raise node.fail(f"frame_length {frame_length} must be in [1, signal length {length}]")
    onesided = node.attr("onesided", 1)
    if onesided not in (0, 1):
        raise node.fail(f"onesided must be 0 or 1, got {onesided}")
    frames = 1 + (length - frame_length) // step
    # sample index of every (frame, position): [frames, frame_length]
    index = (np.arange(frames, dtype=np.int64)[:, None] * step
             + np.arange(frame_length, dtype=np.int64)[None, :])
    framed = node.op("gather", signal, index, axis=1)  # [B, F, frame_length, c]
    static_window = None
    if isinstance(window, np.ndarray):
        static_window = window  # folded into the basis
    elif window is not None:
        w = window if node.dtype(window) == node.dtype(signal) else \
            node.op("cast", window, dtype=node.dtype(signal))
        framed = node.op("mul", framed, node.op("reshape", w, shape=(frame_length, 1)))
    return _apply_dft(node, framed, 2, frame_length, inverse=False, onesided=bool(onesided),
                      window=static_window)


# --- windows -----------------------------------------------------------------------------------

def _hann(n: np.ndarray, period: int) -> np.ndarray:
    return np.sin(np.pi * n / period) ** 2


def _hamming(n: np.ndarray, period: int) -> np.ndarray:
    alpha = 25.0 / 46.0  # (ONNX's exact alpha; 0.54 is its rounding)
    return alpha - (1.0 - alpha) * np.cos(2.0 * np.pi * n / period)


def _blackman(n: np.ndarray, period: int) -> np.ndarray:
    # (the constant added last: at the peak 0.58 + 0.42 is exactly 1.0, which an integer
    # output_datatype then truncates to 1, not 0.9999... to 0)
    waves = -0.5 * np.cos(2.0 * np.pi * n / period) + 0.08 * np.cos(4.0 * np.pi * n / period)
    return waves + 0.42


_WINDOWS = {"HannWindow": _hann, "HammingWindow": _hamming, "BlackmanWindow": _blackman}


def _output_dtype(node: Any) -> np.dtype:
    dtype = np_dtype(int(node.attr("output_datatype", 1)))
    if dtype.kind not in "uif":
        raise node.fail(f"output_datatype {node.attr('output_datatype')} ({dtype}) is not a "
                        f"numeric type")
    return dtype


@converter(("HannWindow", "HammingWindow", "BlackmanWindow"), since=17)
def _window(node):
    """A constant: the window is a function of its static size only."""
    size = _static_scalar(node, 0, "size")
    if size is None or size < 0:
        raise node.fail(f"size must be a non-negative scalar, got {size}")
    periodic = node.attr("periodic", 1)
    if periodic not in (0, 1):
        raise node.fail(f"periodic must be 0 or 1, got {periodic}")
    # periodic: one period of size samples; symmetric: size samples spanning size - 1 steps
    period = size if periodic else size - 1
    n = np.arange(size, dtype=np.float64)
    if period == 0:  # a 1-sample symmetric window: the single peak (1.0), not 0/0
        values = np.ones(size)
    else:
        values = _WINDOWS[node.op_type](n, period)
    return values.astype(_output_dtype(node))


# --- MelWeightMatrix -----------------------------------------------------------------------------

def _hz_to_mel(hz: float) -> float:
    return 2595.0 * math.log1p(hz / 700.0) / math.log(10.0)


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    return 700.0 * np.expm1(mel * (math.log(10.0) / 2595.0))


def mel_weight_matrix(bins: int, dft_length: int, sample_rate: int, lower_hz: float,
                      upper_hz: float) -> np.ndarray:
    """ONNX's [dft_length // 2 + 1, bins] triangular mel filterbank (float64).

    ``bins + 2`` points are spaced ``(mel(upper) - mel(lower)) / (bins + 2)`` apart on the
    mel scale from mel(lower), as ONNX's definition spaces them, and each is mapped to the
    spectrogram bin ``floor((dft_length + 1) * hz / sample_rate)``. Filter i rises linearly
    from point i (0) to point i + 1 (1) and falls to point i + 2 (0); a filter whose rising
    edge is empty is 1 at its centre."""
    spectrum = dft_length // 2 + 1
    low, high = _hz_to_mel(lower_hz), _hz_to_mel(upper_hz)
    mels = low + np.arange(bins + 2) * ((high - low) / (bins + 2))
    # (floor division of the product, not floor of a rounded quotient: a point exactly on a
    # bin edge stays on it)
    points = np.floor_divide((dft_length + 1) * _mel_to_hz(mels), sample_rate).astype(np.int64)
    out = np.zeros((spectrum, bins))
    for i in range(bins):
        left, centre, right = (int(p) for p in points[i:i + 3])
        if left < 0 or max(centre, right - 1) >= spectrum:
            raise ValueError(f"mel band {i} spans spectrogram bins {left}..{right}, outside "
                             f"the {spectrum} bins of a length-{dft_length} DFT: keep "
                             f"upper_edge_hertz <= sample_rate / 2 and lower_edge_hertz >= 0")
        if centre == left:
            out[centre, i] = 1.0
        else:
            j = np.arange(left, centre + 1)
            out[j, i] = (j - left) / (centre - left)
        if right > centre:
            j = np.arange(centre, right)
            out[j, i] = (right - j) / (right - centre)
    return out


@converter("MelWeightMatrix", since=17)
def _mel_weight_matrix(node):
    """A constant: every input is needed at import (they set the matrix's shape)."""
    bins = _static_scalar(node, 0, "num_mel_bins")
    dft_length = _static_scalar(node, 1, "dft_length")
    sample_rate = _static_scalar(node, 2, "sample_rate")
    lower, upper = (node.static(i, what) for i, what in ((3, "lower_edge_hertz"),
                                                         (4, "upper_edge_hertz")))
    if bins < 1 or dft_length < 1 or sample_rate < 1:
        raise node.fail(f"num_mel_bins, dft_length and sample_rate must be positive, got "
                        f"{bins}, {dft_length}, {sample_rate}")
    lower_hz, upper_hz = float(np.asarray(lower).reshape(())), float(np.asarray(upper).reshape(()))
    if not 0.0 <= lower_hz < upper_hz:
        raise node.fail(f"need 0 <= lower_edge_hertz < upper_edge_hertz, got {lower_hz}, "
                        f"{upper_hz}")
    try:
        matrix = mel_weight_matrix(bins, dft_length, sample_rate, lower_hz, upper_hz)
    except ValueError as exc:
        raise node.fail(str(exc)) from None
    return matrix.astype(_output_dtype(node))
