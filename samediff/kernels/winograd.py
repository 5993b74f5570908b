"""Winograd F(4x4, 3x3): the 3x3, stride-1 convolutions of ``kernels.cnn`` in 4x fewer
multiplies (channels first).

A 3x3 correlation of a 6x6 input tile ``d`` with a kernel ``g`` gives a 4x4 output tile
``Y = A^T [(G g G^T) * (B^T d B)] A`` (``*`` elementwise). The three matrices come from
evaluating polynomials at the points 0, 1, -1, 2, -2 and infinity (the one-axis identity is
checked in the tests). Over channels the elementwise product becomes 36 GEMMs -- for each of
the 36 tile positions ``xi``: ``M[xi] (O x T) = U[xi] (O x C) @ V[xi] (C x T)`` over the T
tiles -- of 36 * O * C * T multiply-adds where the direct form needs 9 * 16 * O * C * T: 4x
fewer. The transforms are additions and small multiples, compiled here (``nogil``) and run
per band of tile rows so that ``V`` and ``M`` stay near the cache; the GEMMs go to the private
single-threaded BLAS (``samediff.kernels.blas``), so two threads can each run whole bands.

Precision: the transforms' constants (up to 8 and 1/24) cost bits -- float32 results differ
from a float64 reference by ~1e-5 of the output's scale (measured: max 8.7e-4 on outputs up
to 127 at 64 channels, where the direct float32 sum is off by 4e-5). ``ND4PY_WINOGRAD=0``
turns the route off (``kernels.cnn.choose``).

Profile ((8, 64, 56, 56) -> 64, pad 1, float32, two threads of whole images; medians in one
process, interleaved with torch 2.13 eager at 8.5-9.6 ms): this route 6.9-8.3 ms -- the 36
GEMMs (231 M multiply-adds) ~5.5 ms of one thread, the transforms the rest; F(2x2, 3x3)
(2.25x fewer multiplies, exact to 5e-5) 9.3-10.7; im2col 11-12 (nine taps' worth of GEMMs
at ~90 GFLOP/s per core cannot reach torch's direct kernels at this size).
"""
from __future__ import annotations

import os

import numba
import numpy as np

from . import blas, spin
from .im2col import relu_span

#: Input channels (of the convolution) and output channels below which im2col stays
#: cheaper: the GEMMs' depth is the input channels.
MIN_CHANNELS = 16

_G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])
_GG = np.kron(_G, _G)  # [(a, b), (i, j)]: G on both axes of a 3x3 filter as one matrix
_BT = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], float)
_AT = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                [0, 1, -1, 8, -8, 1]], float)

_njit = numba.njit(cache=True, nogil=True)


def enabled() -> bool:
    """The route may run: the private BLAS is loaded and ``ND4PY_WINOGRAD`` is not ``0``."""
    return blas.available() and os.environ.get("ND4PY_WINOGRAD", "") != "0"


#: A convolution goes this way only when it has at least this many output positions (batch x
#: height x width) per channel (the larger count): the filter transform costs 36 x C x O
#: values whatever the image, and below this it costs more than the multiplies it saves.
#: Measured (float32, this 2-core machine; Winograd's time / im2col's): 512 -> 512 channels at
#: 7x7, batch 1: 3.0x (60 vs 20 ms), batch 8 3.1x; 256 at 14x14 batch 1-8: 1.7-1.9x; 128 at
#: 28x28 batch 1: 1.5x, batch 4 (24 positions per channel): 0.99x; 64 at 56x56 batch 1-2 (49-98
#: per channel): 0.74-0.95x.
MIN_POSITIONS_PER_CHANNEL = 32


def applies(kernel, stride, dilation, c_in: int, c_out: int, dtype,
            positions: int | None = None) -> bool:
    """Whether a channels-first convolution goes this way: 3x3, stride 1, no dilation,
    float32/float64, at least ``MIN_CHANNELS`` in and out, ``positions`` (output positions
    over the batch, when known) at least ``MIN_POSITIONS_PER_CHANNEL`` per channel, and
    ``enabled()``."""
    if positions is not None and positions < MIN_POSITIONS_PER_CHANNEL * max(c_in, c_out):
        return False
    return (tuple(kernel) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and min(c_in, c_out) >= MIN_CHANNELS
            and np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float64)) and enabled())


def filter_transform(w: np.ndarray) -> np.ndarray:
    """HWIO 3x3 weights -> ``U [36, O, C]`` (``G w G^T`` per channel pair, in float64 and
    rounded once)."""
    # one GEMM: U[(a, b), (o, c)] = sum over (i, j) of (G kron G)[(a, b), (i, j)] w[i, j, c, o],
    # written straight in U's order. (A three-operand einsum looped over all of (a, b, i, j,
    # c, o), and transposing its result was memory-bound: 140-220 ms at 512 x 512 channels,
    # more than the convolution of a 7x7 image; this takes a few ms.)
    taps = w.astype(np.float64).transpose(0, 1, 3, 2).reshape(9, -1)  # [(i, j), (o, c)]
    u = _GG @ taps
    return np.ascontiguousarray(u.reshape(36, w.shape[3], w.shape[2]), dtype=w.dtype)


def tiles(oh: int, ow: int) -> tuple[int, int]:
    """Tile rows and columns covering an ``oh x ow`` output."""
    return -(-oh // 4), -(-ow // 4)


def units(n: int, oh: int, ow: int, c_in: int, c_out: int, budget: int) -> np.ndarray:
    """``[(image, first tile row, end tile row)]``: bands of tile rows whose ``V`` and ``M``
    (36 * (C + O) values per tile) hold at most ``budget`` values (at least one tile row),
    of even height within an image."""
    th, tw = tiles(oh, ow)
    rows = max(1, min(th, budget // (36 * (c_in + c_out) * tw)))
    rows = -(-th // -(-th // rows))
    return np.array([(b, r, min(th, r + rows)) for b in range(n) for r in range(0, th, rows)],
                    np.int64).reshape(-1, 3)


def scratch_size(todo: np.ndarray, ow: int, c_in: int, c_out: int) -> tuple[int, int]:
    """Values of ``V`` and of ``M`` the largest unit of ``todo`` needs."""
    tw = tiles(1, ow)[1]
    t = int((todo[:, 2] - todo[:, 1]).max()) * tw if len(todo) else 0
    return 36 * c_in * t, 36 * c_out * t


@_njit
def run(x, u, out, pad_t, pad_l, todo, vbuf, mbuf, bias, relu, go):
    """``out[b]`` (rows of the units' tile rows) = the 3x3 correlation of ``x[b]`` (zero
    outside; ``pad_t``/``pad_l`` rows/columns of padding before, any sign) with the
    transformed weights ``u``, plus ``bias`` (``[O]``, or empty for none), then ``max(., 0)``
    if ``relu``, for every unit ``(b, ty0, ty1)`` of ``todo``; ``go``: ``workers.both``'s
    token, announced at once."""
    spin.announce(go)
    c, o = x.shape[1], out.shape[1]
    tw = (out.shape[3] + 3) // 4
    k = np.array([2, 4, 5, 8], x.dtype)  # the transforms' multiples, in the data's dtype
    p = np.empty((6, 4, tw + 1), x.dtype)
    q = np.empty((6, 4, tw + 1), x.dtype)
    r = np.empty((4, 6, tw), x.dtype)
    y = np.empty((4, 4 * tw), x.dtype)
    for unit in range(todo.shape[0]):
        b, ty0, ty1 = todo[unit, 0], todo[unit, 1], todo[unit, 2]
        t = (ty1 - ty0) * tw
        v = vbuf[:36 * c * t].reshape((36, c, t))
        m = mbuf[:36 * o * t].reshape((36, o, t))
        _input_transform(x[b], v, p, q, k, pad_t, pad_l, ty0, ty1, tw)
        for xi in range(36):
            blas.gemm(u[xi], v[xi], m[xi], 0.0)
        _output_transform(m, out[b], r, y, k, ty0, ty1, tw, bias, relu)


@numba.njit(nogil=True, inline="always")
def _bt(d0, d1, d2, d3, d4, d5, k):
    """``B^T d`` of six values (``k`` = 2, 4, 5, 8 in the data's dtype)."""
    return (k[1] * d0 - k[2] * d2 + d4, d3 + d4 - k[1] * (d1 + d2), k[1] * (d1 - d2) + d4 - d3,
            k[0] * (d3 - d1) + d4 - d2, k[0] * (d1 - d3) + d4 - d2, k[1] * d1 - k[2] * d3 + d5)


@numba.njit(nogil=True, inline="always")
def _at(m0, m1, m2, m3, m4, m5, k):
    """``A^T m`` of six values."""
    a, b, c, d = m1 + m2, m1 - m2, m3 + m4, m3 - m4
    return m0 + a + c, b + k[0] * d, a + k[1] * c, b + k[3] * d + m5


@_njit
def _input_transform(xb, v, p, q, k, pad_t, pad_l, ty0, ty1, tw):
    """``v[xi, c, tile]`` = ``B^T d B`` of each tile of rows ``[ty0, ty1)``. Per channel and
    tile row: the six input rows are split into four phases (``p[r, j, t] = row[4t + j]``), so
    that both passes of the transform run over contiguous vectors of tiles."""
    c_n, h, w = xb.shape
    for c in range(c_n):
        for ty in range(ty0, ty1):
            for i in range(6):
                iy = 4 * ty - pad_t + i
                if iy < 0 or iy >= h:
                    p[i] = 0
                    continue
                row = xb[c, iy]
                for j in range(4):
                    pj = p[i, j]
                    for t in range(tw + 1):
                        ix = 4 * t + j - pad_l
                        pj[t] = row[ix] if 0 <= ix < w else 0
            for j in range(4):  # down the columns: q = B^T d
                for t in range(tw + 1):
                    o0, o1, o2, o3, o4, o5 = _bt(p[0, j, t], p[1, j, t], p[2, j, t], p[3, j, t],
                                                 p[4, j, t], p[5, j, t], k)
                    q[0, j, t], q[1, j, t], q[2, j, t] = o0, o1, o2
                    q[3, j, t], q[4, j, t], q[5, j, t] = o3, o4, o5
            t0 = (ty - ty0) * tw
            for a in range(6):  # along the rows: (B^T d) B
                q0, q1, q2, q3 = q[a, 0], q[a, 1], q[a, 2], q[a, 3]
                for tx in range(tw):
                    o0, o1, o2, o3, o4, o5 = _bt(q0[tx], q1[tx], q2[tx], q3[tx], q0[tx + 1],
                                                 q1[tx + 1], k)
                    t = t0 + tx
                    v[6 * a, c, t], v[6 * a + 1, c, t], v[6 * a + 2, c, t] = o0, o1, o2
                    v[6 * a + 3, c, t], v[6 * a + 4, c, t], v[6 * a + 5, c, t] = o3, o4, o5


@_njit
def _output_transform(m, ob, r, y, k, ty0, ty1, tw, bias, relu):
    """``ob[o]`` rows of tile rows ``[ty0, ty1)`` = ``A^T M A`` of each tile (+ ``bias[o]``,
    then ``max(., 0)`` if ``relu``), cropped to the output."""
    o_n, oh, ow = ob.shape
    flat, zero = ob.reshape(-1), np.zeros(1, ob.dtype)[0]
    for o in range(o_n):
        for ty in range(ty0, ty1):
            t0 = (ty - ty0) * tw
            for b in range(6):  # down the columns
                for tx in range(tw):
                    t = t0 + tx
                    r0, r1, r2, r3 = _at(m[b, o, t], m[6 + b, o, t], m[12 + b, o, t],
                                         m[18 + b, o, t], m[24 + b, o, t], m[30 + b, o, t], k)
                    r[0, b, tx], r[1, b, tx], r[2, b, tx], r[3, b, tx] = r0, r1, r2, r3
            for i in range(4):  # along the rows
                ri = r[i]
                for tx in range(tw):
                    y0, y1, y2, y3 = _at(ri[0, tx], ri[1, tx], ri[2, tx], ri[3, tx], ri[4, tx],
                                         ri[5, tx], k)
                    y[i, 4 * tx], y[i, 4 * tx + 1], y[i, 4 * tx + 2], y[i, 4 * tx + 3] = (
                        y0, y1, y2, y3)
            rows = min(4, oh - 4 * ty)
            for i in range(rows):
                if bias.size:
                    ob[o, 4 * ty + i, :] = y[i, :ow] + bias[o]
                else:
                    ob[o, 4 * ty + i, :] = y[i, :ow]
            if relu:
                relu_span(flat, (o * oh + 4 * ty) * ow, rows * ow, zero)
