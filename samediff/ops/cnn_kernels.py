"""numpy kernels of the convolution and pooling ops (``cnn.py``), in either data layout.

A convolution is a sum over the kernel's taps of one GEMM each: for tap ``(i, j)`` the output
positions whose input lies inside the (unpadded) image get the tap's input times ``w[i, j]``
-- ``rows @ w[i, j]`` on channels-last data (one GEMM of all N*H*W rows), ``w[i, j].T @ cols``
on channels-first data (one GEMM per image, numpy's batched matmul). No padded copy of the
input, no im2col buffer and no layout transpose. At stride 1 each tap multiplies the whole
image into one reused buffer and adds its shifted window to the output, so peak memory is
input + output + one tap-sized buffer; at larger strides the tap's rows are gathered first
(one more such buffer). Buffers are reused across taps: a fresh full-size array per tap
costs page faults, which cost as much as the GEMM. Padding is never materialized: a tap
skips the output positions that would read it (zeros for convolutions, "absent" for pooling).

Measured (eager, (8, 64, 56, 56) float32, 3x3, pad 1, 2 cores): ~20 ms; gathering every
tap ~27 ms; going through NHWC with one transpose each way ~34 ms (torch: ~10 ms).

``cf`` says channels first (NCHW: spatial axes 2, 3) or last (NHWC: axes 1, 2); weights are
always HWIO here (``[kH, kW, iC, oC]``; the ops convert OIHW). Geometry of one spatial axis:
output ``o`` reads input ``o * s - before + t * d`` at tap ``t``.
"""
from __future__ import annotations

import numpy as np

Pair = tuple[int, int]


def axis_pads(size: int, k: int, s: int, d: int, padding: int | str) -> tuple[int, int, int]:
    """``(before, after, out)`` for one spatial axis of length ``size`` (-1 = unknown: out -1).

    ``padding="same"`` is ND4J's/TensorFlow's SAME: ``out = ceil(size / s)`` and the total
    padding that needs, the odd one after."""
    eff = (k - 1) * d + 1
    if padding == "same":
        if size < 0:
            return 0, 0, -1
        out = -(-size // s)
        total = max((out - 1) * s + eff - size, 0)
        return total // 2, total - total // 2, out
    p = int(padding)
    if size < 0:
        return p, p, -1
    out = (size + 2 * p - eff) // s + 1
    if out <= 0:
        raise ValueError(f"a kernel spanning {eff} does not fit {size} (+ 2 x {p} padding)")
    return p, p, out


def tap_range(out: int, size: int, before: int, s: int, d: int, t: int) -> tuple[slice, slice]:
    """(output slice, input slice) of tap ``t`` on one axis: the outputs whose input index
    ``o * s - before + t * d`` lies in ``[0, size)``, and those inputs (stride ``s``)."""
    off = t * d - before
    lo = 0 if off >= 0 else (-off + s - 1) // s  # smallest o with o * s + off >= 0
    hi = min(out, (size - 1 - off) // s + 1) if size - 1 - off >= 0 else 0
    if hi <= lo:
        return slice(0, 0), slice(0, 0)
    start = lo * s + off
    return slice(lo, hi), slice(start, start + (hi - lo - 1) * s + 1, s)


def spatial(shape: tuple[int, ...], cf: bool) -> tuple[int, int]:
    return (shape[2], shape[3]) if cf else (shape[1], shape[2])


def geometry(hw: tuple[int, int], kernel: Pair, stride: Pair, padding, dilation: Pair):
    """Per spatial axis ``(before, after, out)`` for spatial sizes ``hw``."""
    return [axis_pads(hw[a], kernel[a], stride[a], dilation[a],
                      "same" if padding == "same" else padding[a]) for a in range(2)]


def out_shape(shape, geo, channels: int, cf: bool) -> tuple[int, ...]:
    oh, ow = geo[0][2], geo[1][2]
    return (shape[0], channels, oh, ow) if cf else (shape[0], oh, ow, channels)


def _taps(hw, geo, kernel, stride, dilation, cf):
    """``[(i, j, out_index, in_index)]`` for every tap that touches the image."""
    lead = (slice(None),) * (2 if cf else 1)
    taps = []
    for i in range(kernel[0]):
        oh, ih = tap_range(geo[0][2], hw[0], geo[0][0], stride[0], dilation[0], i)
        if oh.stop == oh.start:
            continue
        for j in range(kernel[1]):
            ow, iw = tap_range(geo[1][2], hw[1], geo[1][0], stride[1], dilation[1], j)
            if ow.stop != ow.start:
                taps.append((i, j, lead + (oh, ow), lead + (ih, iw)))
    return taps


class _Scratch:
    """One reusable buffer per role (see the module docstring: page faults)."""

    def __init__(self, dtype) -> None:
        self.dtype, self.bufs = np.dtype(dtype), {}

    def view(self, role: str, shape) -> np.ndarray:
        n = int(np.prod(shape))
        buf = self.bufs.get(role)
        if buf is None or buf.size < n:
            buf = self.bufs[role] = np.empty(n, self.dtype)
        return buf[:n].reshape(shape)


def _matrix(a: np.ndarray, scratch: _Scratch, cf: bool) -> np.ndarray:
    """A tap slice as GEMM operand: [N, C, h*w] (cf) or [N*h*w, C], copied into scratch only
    if it is strided."""
    if not a.flags.c_contiguous:
        buf = scratch.view("in", a.shape)
        np.copyto(buf, a)
        a = buf
    return a.reshape(a.shape[0], a.shape[1], -1) if cf else a.reshape(-1, a.shape[-1])


def _gemm_taps(src, mat, dst, taps, cf, whole):
    """``dst[d] += src[s] (x) mat(i, j)`` for every tap ``(i, j, d, s)``, where ``(x)`` is
    ``rows @ mat`` (channels last) or ``mat.T @ cols`` (channels first).

    ``whole`` (stride 1): each tap is one GEMM of the whole of ``src`` into one reused buffer,
    whose shifted window is added to ``dst`` -- no gathered copy of the tap's input (~25%
    faster at 3x3). Else the tap's input is gathered first (strided rows). A tap covering all
    of ``dst`` with all of ``src`` (the centre tap of a "same" conv) goes first and writes
    ``dst`` directly: no zero fill."""
    scratch = _Scratch(dst.dtype)
    sp = (2, 3) if cf else (1, 2)
    n, k = dst.shape[0], dst.shape[1 if cf else 3]

    def gemm(i, j, a, out):
        a = _matrix(a, scratch, cf)
        if cf:
            np.matmul(mat(i, j).T, a, out=out)
        else:
            np.matmul(a, mat(i, j), out=out)

    def spans(index, arr):
        return all(index[ax].start == 0 and index[ax].stop == arr.shape[ax]
                   and index[ax].step in (None, 1) for ax in sp)
    full = next((t for t in taps if spans(t[2], dst) and spans(t[3], src)), None)
    if full is not None:
        gemm(full[0], full[1], src, dst.reshape(n, k, -1) if cf else dst.reshape(-1, k))
    else:
        dst.fill(0)
    if whole:
        src = np.ascontiguousarray(src)
        hw = src.shape[2] * src.shape[3] if cf else src.shape[1] * src.shape[2]
        shape = (n, k) + src.shape[2:] if cf else src.shape[:3] + (k,)
    for i, j, di, si in taps:
        if full is not None and (i, j) == full[:2]:
            continue
        region = dst[di]
        if whole:
            prod = scratch.view("out", (n, k, hw) if cf else (n * hw, k))
            gemm(i, j, src, prod)
            region += prod.reshape(shape)[si]
        else:
            m = region.shape[2] * region.shape[3] if cf else region.size // k
            prod = scratch.view("out", (n, k, m) if cf else (m, k))
            gemm(i, j, src[si], prod)
            region += prod.reshape(region.shape)
    return dst


def conv(x, w, stride, padding, dilation, cf):
    """``x`` (*) ``w`` [kH, kW, C, O]: one GEMM per tap."""
    geo = geometry(spatial(x.shape, cf), w.shape[:2], stride, padding, dilation)
    dtype = np.result_type(x, w)
    x, w = x.astype(dtype, copy=False), w.astype(dtype, copy=False)
    out = np.empty(out_shape(x.shape, geo, w.shape[3], cf), dtype)
    taps = _taps(spatial(x.shape, cf), geo, w.shape[:2], stride, dilation, cf)
    return _gemm_taps(x, lambda i, j: w[i, j], out, taps, cf, tuple(stride) == (1, 1))


def conv_input_grad(g, w, xshape, stride, padding, dilation, cf):
    """Adjoint of ``conv`` in ``x``: ``g`` (conv's output gradient) -> dx of ``xshape``: the
    same taps with source and destination swapped and ``w[i, j]`` transposed."""
    hw = spatial(xshape, cf)
    geo = geometry(hw, w.shape[:2], stride, padding, dilation)
    dtype = np.result_type(g, w)
    g, w = g.astype(dtype, copy=False), w.astype(dtype, copy=False)
    taps = [(i, j, xi, gi) for i, j, gi, xi in _taps(hw, geo, w.shape[:2], stride, dilation, cf)]
    dx = np.empty(xshape, dtype)
    return _gemm_taps(g, lambda i, j: w[i, j].T, dx, taps, cf, tuple(stride) == (1, 1))


def conv_weight_grad(x, g, kernel, stride, padding, dilation, cf):
    """Adjoint of ``conv`` in ``w``: -> dw [kH, kW, C, O]."""
    hw = spatial(x.shape, cf)
    geo = geometry(hw, kernel, stride, padding, dilation)
    dtype = np.result_type(x, g)
    c, o = (x.shape[1], g.shape[1]) if cf else (x.shape[3], g.shape[3])
    dw = np.zeros((kernel[0], kernel[1], c, o), dtype)
    scratch, gs = _Scratch(dtype), _Scratch(dtype)
    for i, j, oi, ii in _taps(hw, geo, kernel, stride, dilation, cf):
        xt, gt = _matrix(x[ii], scratch, cf), _matrix(g[oi], gs, cf)
        if cf:  # per image [C, hw] @ [hw, O], summed over the batch
            dw[i, j] = np.matmul(xt, gt.transpose(0, 2, 1)).sum(0)
        else:
            dw[i, j] = xt.T @ gt
    return dw


# --- pooling -------------------------------------------------------------------------------

def _pool_setup(shape, kernel, stride, padding, dilation, cf):
    hw = spatial(shape, cf)
    geo = geometry(hw, kernel, stride, padding, dilation)
    ch = shape[1] if cf else shape[3]
    return geo, out_shape(shape, geo, ch, cf), _taps(hw, geo, kernel, stride, dilation, cf)


def max_pool(x, kernel, stride, padding, dilation, cf):
    """Max over the taps that lie inside the image (padding never wins)."""
    _, shape, taps = _pool_setup(x.shape, kernel, stride, padding, dilation, cf)
    out = np.full(shape, -np.inf, x.dtype)
    for _, _, oi, ii in taps:
        region = out[oi]
        np.maximum(region, x[ii], out=region)
    return out


def max_pool_grad(x, g, kernel, stride, padding, dilation, cf):
    """``g`` routed to the input that won each window (the first tap in row-major order among
    equal maxima, like PyTorch)."""
    out = max_pool(x, kernel, stride, padding, dilation, cf)
    _, _, taps = _pool_setup(x.shape, kernel, stride, padding, dilation, cf)
    dx = np.zeros(x.shape, np.result_type(x, g))
    taken = np.zeros(out.shape, bool)
    for _, _, oi, ii in taps:
        hit = (x[ii] == out[oi]) & ~taken[oi]
        taken[oi] |= hit
        region = dx[ii]
        region += np.where(hit, g[oi], 0)
    return dx


def _counts(size, geo_axis, k, s, d):
    """How many taps of each output position lie inside the image, on one axis."""
    before, _, out = geo_axis
    cnt = np.zeros(out, np.int64)
    for t in range(k):
        oi, _ = tap_range(out, size, before, s, d, t)
        cnt[oi] += 1
    return cnt


def avg_divisor(shape, geo, kernel, stride, dilation, include_pad, dtype, cf):
    """The divisor, broadcastable against the output: the window's taps inside the image
    (ND4J's default), or the whole window with ``include_pad``."""
    if include_pad:
        return np.asarray(kernel[0] * kernel[1], dtype)
    hw = spatial(shape, cf)
    ch = _counts(hw[0], geo[0], kernel[0], stride[0], dilation[0])
    cw = _counts(hw[1], geo[1], kernel[1], stride[1], dilation[1])
    div = np.maximum(np.multiply.outer(ch, cw), 1).astype(dtype)
    return div if cf else div[:, :, None]


def avg_pool(x, kernel, stride, padding, dilation, include_pad, cf):
    geo, shape, taps = _pool_setup(x.shape, kernel, stride, padding, dilation, cf)
    out = np.zeros(shape, x.dtype)
    for _, _, oi, ii in taps:
        region = out[oi]
        region += x[ii]
    out /= avg_divisor(x.shape, geo, kernel, stride, dilation, include_pad, x.dtype, cf)
    return out


def avg_pool_grad(g, xshape, kernel, stride, padding, dilation, include_pad, cf):
    geo, _, taps = _pool_setup(xshape, kernel, stride, padding, dilation, cf)
    gd = g / avg_divisor(xshape, geo, kernel, stride, dilation, include_pad, g.dtype, cf)
    dx = np.zeros(xshape, g.dtype)
    for _, _, oi, ii in taps:
        region = dx[ii]
        region += gd[oi]
    return dx
