"""The channels-last im2col route of ``kernels.cnn`` for NCHW convolutions of small images:
chunks of whole images, each one GEMM.

``kernels.im2col`` gathers ``cols [kH*kW*C, positions]`` one image at a time: each of its rows
is a run of ``OW`` input values, so on an 8x8 image every copy is 8 values long -- shorter than
one AVX-512 vector -- and the gather took 31 us per image of (32, 8, 8) against 12 us for its
GEMM; and one GEMM per image of 16 positions (a 4x4 image) runs at half the speed of one over
many images. Here a chunk of images is first turned channels-last (``xh [m, H, W, C]``), so
the rows of ``colsT [m*OH*OW, kH*kW*C]`` are runs of ``C`` values (the order of the HWIO
weights reshaped to ``[kH*kW*C, O]``, as they are), and the whole chunk is one GEMM:

* forward: ``[O, m*P] = W2^T @ colsT^T``, then each image's ``[O, P]`` block is copied into
  ``out`` with the bias and the relu;
* weight adjoint: ``dW2 += colsT^T @ G^T``, ``G [O, m*P]`` the chunk's output gradient laid
  side by side;
* input adjoint: ``colsT = G^T @ W2^T``, scatter-added into a channels-last ``dxh`` (col2im),
  turned back into NCHW.

Every buffer is sized by the chunk (``chunks``: at most the im2col budget of ``colsT``
values); the three drivers run a list of chunks in one compiled call on the private BLAS, so
``kernels.cnn`` hands each of two threads half of the chunks. Measured at the digits CNN's
shapes (batch 32, float32, two threads) in ``kernels.cnn``'s docstring.
"""
from __future__ import annotations

import functools

import numba
import numpy as np

from . import blas, spin
from .jit_options import PYTHON_CALLERS

_njit = numba.njit(cache=True, nogil=True, **PYTHON_CALLERS)

#: input channels from which a small image's convolution goes channels-last (a run of C
#: values per copy; at 8 channels the per-image rows of ``kernels.im2col`` were faster:
#: 1.4-1.8x at (32, 8, 32, 32))
MIN_CHANNELS = 16


def chunks(n: int, per_image: int, budget: int, halves: bool) -> np.ndarray:
    """``[(first image, end image)]``: even chunks of at most ``budget // per_image`` images
    (at least one), an even number of them when the work is split over two threads."""
    return _chunks(n, per_image, budget, halves)


@functools.lru_cache(maxsize=256)
def _chunks(n: int, per_image: int, budget: int, halves: bool) -> np.ndarray:
    count = -(-n // max(1, budget // per_image))
    if halves and count % 2 and count < n:
        count += 1
    edges = np.linspace(0, n, count + 1).round().astype(np.int64)
    return np.stack([edges[:-1], edges[1:]], axis=1)


@numba.njit(nogil=True, inline="always")
def _to_hwc(x, n0, n1, xh):
    """``xh[n - n0, y, t, c] = x[n, c, y, t]`` for the chunk's images (flat, unsigned)."""
    c_n, h, w = x.shape[1], x.shape[2], x.shape[3]
    xf, hf = x.reshape(-1), xh.reshape(-1)
    u = np.uint64
    plane = u(h * w)
    for n in range(n0, n1):
        src, dst = u(n * c_n) * plane, u(n - n0) * plane * u(c_n)
        for p in range(plane):
            s, d = src + p, dst + p * u(c_n)
            for c in range(u(c_n)):
                hf[d + c] = xf[s + c * plane]


@numba.njit(nogil=True, inline="always")
def _from_hwc(dxh, n0, n1, dx):
    """``dx[n, c, y, t] = dxh[n - n0, y, t, c]`` (the adjoint layout change)."""
    c_n, h, w = dx.shape[1], dx.shape[2], dx.shape[3]
    df, hf = dx.reshape(-1), dxh.reshape(-1)
    u = np.uint64
    plane = u(h * w)
    for n in range(n0, n1):
        dst, src = u(n * c_n) * plane, u(n - n0) * plane * u(c_n)
        for c in range(u(c_n)):
            d = dst + c * plane
            for p in range(plane):
                df[d + p] = hf[src + p * u(c_n) + c]


@numba.njit(nogil=True, inline="always")
def _source(r, t, i, j, h, w, sh, sw, ph, pw, dh, dw):
    """The input pixel ``(iy, ix)`` output ``(r, t)`` reads at tap ``(i, j)``; -1 if padding."""
    iy, ix = r * sh - ph + i * dh, t * sw - pw + j * dw
    return (iy * w + ix) if (0 <= iy < h) and (0 <= ix < w) else -1


@_njit
def gather(xh, cols, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw):
    """``cols[(n*OH + r)*OW + t, (i*kW + j)*C + c] = xh[n, iy, ix, c]`` (zero in padding)."""
    m, h, w, c_n = xh.shape
    xf, cf = xh.reshape(-1), cols.reshape(-1)
    u = np.uint64
    kk, cu = u(kh * kw * c_n), u(c_n)
    row = u(0)
    for n in range(m):
        image = u(n * h * w)
        for r in range(oh):
            for t in range(ow):
                for i in range(kh):
                    for j in range(kw):
                        d0 = row + u(i * kw + j) * cu
                        s = _source(r, t, i, j, h, w, sh, sw, ph, pw, dh, dw)
                        if s < 0:
                            for c in range(cu):
                                cf[d0 + c] = 0
                        else:
                            s0 = (image + u(s)) * cu
                            for c in range(cu):
                                cf[d0 + c] = xf[s0 + c]
                row += kk


@_njit
def col2im(cols, dxh, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw):
    """``dxh`` += the adjoint of ``gather`` (``dxh`` zeroed by the caller): the same walk,
    the copies reversed into adds -- two kernels, not one with a flag, as in
    ``kernels.im2col`` (the flag's branches keep the runs from vectorizing)."""
    m, h, w, c_n = dxh.shape
    xf, cf = dxh.reshape(-1), cols.reshape(-1)
    u = np.uint64
    kk, cu = u(kh * kw * c_n), u(c_n)
    row = u(0)
    for n in range(m):
        image = u(n * h * w)
        for r in range(oh):
            for t in range(ow):
                for i in range(kh):
                    for j in range(kw):
                        s = _source(r, t, i, j, h, w, sh, sw, ph, pw, dh, dw)
                        if s >= 0:
                            d0, s0 = (image + u(s)) * cu, row + u(i * kw + j) * cu
                            for c in range(cu):
                                xf[d0 + c] += cf[s0 + c]
                row += kk


@numba.njit(nogil=True, inline="always")
def _side_by_side(g, n0, n1, gcat):
    """``gcat[o, (n - n0)*P + p] = g[n, o, p]``: the chunk's output gradient as one matrix."""
    o_n, p_n = g.shape[1], g.shape[2] * g.shape[3]
    gf, cf = g.reshape(-1), gcat.reshape(-1)
    u = np.uint64
    width = u((n1 - n0) * p_n)
    for n in range(n0, n1):
        for o in range(o_n):
            s, d = u((n * o_n + o) * p_n), u(o) * width + u((n - n0) * p_n)
            for p in range(u(p_n)):
                cf[d + p] = gf[s + p]


def forward(x, w2t, out, todo, xh_buf, cols_buf, tmp_buf, bias, relu,
            kh, kw, sh, sw, ph, pw, dh, dw, go):
    """``out[n] = W2^T @ cols(n)`` (+ ``bias``, then ``max(., 0)`` if ``relu``) for the
    images of the chunks ``todo``."""
    spin.announce(go)
    c_n, h, w = x.shape[1], x.shape[2], x.shape[3]
    o_n, oh, ow = out.shape[1], out.shape[2], out.shape[3]
    p_n, kk = oh * ow, w2t.shape[1]
    flat, zero = out.reshape(-1), np.zeros(1, out.dtype)[0]
    u = np.uint64
    for chunk in range(todo.shape[0]):
        n0, n1 = todo[chunk, 0], todo[chunk, 1]
        m = n1 - n0
        xh = xh_buf[:m * h * w * c_n].reshape((m, h, w, c_n))
        cols = cols_buf[:m * p_n * kk].reshape((m * p_n, kk))
        tmp = tmp_buf[:o_n * m * p_n].reshape((o_n, m * p_n))
        _to_hwc(x, n0, n1, xh)
        gather(xh, cols, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw)
        blas.gemm(w2t, cols.T, tmp, 0.0)
        tf = tmp.reshape(-1)
        for n in range(m):
            for o in range(o_n):
                s, d = u(o * m * p_n + n * p_n), u(((n0 + n) * o_n + o) * p_n)
                b = bias[o] if bias.size else zero
                if relu:
                    for p in range(u(p_n)):
                        v = tf[s + p] + b
                        flat[d + p] = v if (v > zero) | (v != v) else zero
                else:
                    for p in range(u(p_n)):
                        flat[d + p] = tf[s + p] + b


def weight_grad(x, g, dw2, todo, xh_buf, cols_buf, tmp_buf, kh, kw, sh, sw, ph, pw, dh, dw,
                go):
    """``dw2 [kH*kW*C, O] = sum over the chunks of cols^T @ G^T``."""
    spin.announce(go)
    c_n, h, w = x.shape[1], x.shape[2], x.shape[3]
    o_n, oh, ow = g.shape[1], g.shape[2], g.shape[3]
    p_n, kk = oh * ow, dw2.shape[0]
    for chunk in range(todo.shape[0]):
        n0, n1 = todo[chunk, 0], todo[chunk, 1]
        m = n1 - n0
        xh = xh_buf[:m * h * w * c_n].reshape((m, h, w, c_n))
        cols = cols_buf[:m * p_n * kk].reshape((m * p_n, kk))
        gcat = tmp_buf[:o_n * m * p_n].reshape((o_n, m * p_n))
        _to_hwc(x, n0, n1, xh)
        gather(xh, cols, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw)
        _side_by_side(g, n0, n1, gcat)
        blas.gemm(cols.T, gcat.T, dw2, 0.0 if chunk == 0 else 1.0)
    if todo.shape[0] == 0:
        dw2[:] = 0


def input_grad(g, w2, dx, todo, xh_buf, cols_buf, tmp_buf, kh, kw, sh, sw, ph, pw, dh, dw,
               go):
    """``dx[n] = col2im(G^T @ W2^T)`` for the images of the chunks ``todo`` (every value of
    those images of ``dx`` is written)."""
    spin.announce(go)
    c_n, h, w = dx.shape[1], dx.shape[2], dx.shape[3]
    o_n, oh, ow = g.shape[1], g.shape[2], g.shape[3]
    p_n, kk = oh * ow, w2.shape[0]
    for chunk in range(todo.shape[0]):
        n0, n1 = todo[chunk, 0], todo[chunk, 1]
        m = n1 - n0
        dxh = xh_buf[:m * h * w * c_n].reshape((m, h, w, c_n))
        cols = cols_buf[:m * p_n * kk].reshape((m * p_n, kk))
        gcat = tmp_buf[:o_n * m * p_n].reshape((o_n, m * p_n))
        _side_by_side(g, n0, n1, gcat)
        blas.gemm(gcat.T, w2.T, cols, 0.0)
        dxh[:] = 0
        col2im(cols, dxh, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw)
        _from_hwc(dxh, n0, n1, dx)


_COMPILED = {f: _njit(f) for f in (forward, weight_grad, input_grad)}


def run(driver, *args) -> None:
    """``driver`` (``forward``, ``weight_grad``, ``input_grad``) over its chunks, compiled
    (the route is only chosen where the private BLAS is there)."""
    _COMPILED[driver](*args)
