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

Profile (batch 32, float32, one thread, ms: input transform / GEMMs / output transform):
32 -> 32 channels at 64x64 24 / 6-8 / 11 and 64 -> 64 at 32x32 9-10 / 4.4 / 6.6 when the
transforms looped over the tiles of one tile row at a time (2-16 tiles: short loops that ran
scalar), read their constants from an array the stores might alias, and took array views
inside the loops (a reference count each); now each pass is one loop over all of a band's
tiles on flat buffers: 9.6 / 7.7 / 5.7 and 4.2 / 6.2 / 1.4. Route times, two threads,
interleaved processes: (32, 32, 64, 64) 24.6-29.2 -> 11.9-12.4 ms (torch 2.13 eager 13.9-18.3),
and (8, 64, 56, 56) -> 64 (``bench_cnn``) 2.2x -> 0.45-0.5x torch's time. F(2x2, 3x3) (2.25x
fewer multiplies, exact to 5e-5) was slower; im2col is nine taps' worth of GEMMs.
"""
from __future__ import annotations

import os

import numba
import numpy as np

from . import blas, spin
from .im2col import relu_span
from .jit_options import PYTHON_CALLERS

#: Input channels (of the convolution) and output channels below which im2col stays
#: cheaper: the GEMMs' depth is the input channels.
MIN_CHANNELS = 16

_G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])
_BT = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], float)
_AT = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                [0, 1, -1, 8, -8, 1]], float)

_njit = numba.njit(cache=True, nogil=True, **PYTHON_CALLERS)


def enabled() -> bool:
    """The route may run: the private BLAS is loaded and ``ND4PY_WINOGRAD`` is not ``0``."""
    return blas.available() and os.environ.get("ND4PY_WINOGRAD", "") != "0"


#: A convolution goes this way only when it has at least this many output positions (batch x
#: height x width) per channel (the larger count) and outputs at least ``MIN_WIDTH`` wide: the
#: filter transform costs 36 x C x O values whatever the image, and narrow images fill few
#: tiles per row (each row carries one more tile than it needs: ``run``). Measured (float32,
#: two threads, this 2-core machine; Winograd's time / im2col's, batch 1 unless said):
#: 64 ch at 32x32 (16 per channel) 0.76, 128 at 32x32 (8) 0.79, 128 at 28x28 (6) 0.93, 8 x 64
#: at 20x20 0.77, 4 x 128 at 24x24 0.82; but 64 at 16x16 (4) 1.37, 32 at 16x16 (8) 1.22, 256
#: at 14x14 1.16, 512 at 7x7 1.30, 4 x 256 at 8x8 1.18. Against the channels-last route
#: (``kernels.cnn``), batch 32 at 16x16: 0.55-0.87 (forward), 0.73-0.80 (input adjoint); at
#: 8x8 1.6-2.2.
MIN_POSITIONS_PER_CHANNEL = 8
MIN_WIDTH = 16

#: With the filter transform kept (frozen weights: ``kernels.frozen``) a single image pays
#: at any size from ``KEPT_MIN_CHANNELS`` in and out, while ``U`` (36 x C x O values) stays
#: within ``KEPT_MAX_U_BYTES``. Measured (float32, two threads; Winograd's time / the other
#: route's, both with what they derive from the weights kept): batch 1, 64 ch at 16x16 0.70,
#: at 8x8 0.87; 128 at 28x28 0.45, 16x16 0.65, 8x8 0.84, 7x7 0.86; 256 at 28x28 0.40, 16x16
#: 0.46, 14x14 0.65, 7x7 0.75; but 512 at 8x8 2.3, 7x7 2.0 (a 38 MB ``U`` streamed from
#: memory); batches of small images mixed: 2 x 128 at 8x8 0.99, 4 x 256 at 8x8 1.05, 8 x 64
#: at 8x8 1.23 (the channels-last route is good at those).
KEPT_MIN_CHANNELS = 64
KEPT_MAX_U_BYTES = 16 << 20


def applies(kernel, stride, dilation, c_in: int, c_out: int, dtype,
            positions: int | None = None, width: int | None = None,
            images: int | None = None, kept: bool = False) -> bool:
    """Whether a channels-first convolution goes this way: 3x3, stride 1, no dilation,
    float32/float64, at least ``MIN_CHANNELS`` in and out, ``positions`` (output positions
    over the batch, when known) at least ``MIN_POSITIONS_PER_CHANNEL`` per channel, outputs
    ``width`` (when known) at least ``MIN_WIDTH`` wide -- or, the filter transform ``kept``
    and one image, the ``KEPT_*`` rule -- and ``enabled()``."""
    kept_rule = (kept and images == 1 and min(c_in, c_out) >= KEPT_MIN_CHANNELS
                 and 36 * c_in * c_out * np.dtype(dtype).itemsize <= KEPT_MAX_U_BYTES)
    too_small = (positions is not None
                 and positions < MIN_POSITIONS_PER_CHANNEL * max(c_in, c_out)
                 or width is not None and width < MIN_WIDTH)
    if too_small and not kept_rule:
        return False
    return (tuple(kernel) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and min(c_in, c_out) >= MIN_CHANNELS
            and np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float64)) and enabled())


def filter_transform(w: np.ndarray) -> np.ndarray:
    """HWIO 3x3 weights -> ``U [36, C, O]`` (``G w G^T`` per channel pair, in float64 and
    rounded once); the GEMMs take ``U[xi]`` transposed."""
    u = np.empty((36, w.shape[2], w.shape[3]), w.dtype)
    _filter_transform(np.ascontiguousarray(w), _G, u)
    return u


@_njit
def _filter_transform(w, g, u):
    """``u[6a + b, c, :] = (G w[:, :, c, :] G^T)[a, b]`` over the output channels, which are
    contiguous in HWIO weights and in ``u``: one pass, vectorized along them. (A float64 GEMM
    by ``kron(G, G)`` between transposing copies took 3-4x as long -- 6 ms at 256 x 256
    channels, more than a batch-1 convolution of that size; an ``[36, O, C]`` result written
    from here, strided, 3x longer still.)"""
    c_n, o_n = w.shape[2], w.shape[3]
    t = np.empty((6, 3, o_n))
    for c in range(c_n):
        for a in range(6):  # G down the kernel's rows
            for j in range(3):
                ta, g0, g1, g2 = t[a, j], g[a, 0], g[a, 1], g[a, 2]
                for o in range(o_n):
                    ta[o] = (g0 * np.float64(w[0, j, c, o]) + g1 * np.float64(w[1, j, c, o])
                             + g2 * np.float64(w[2, j, c, o]))
        for a in range(6):  # G along them
            for b in range(6):
                ub = u[6 * a + b, c]
                for o in range(o_n):
                    ub[o] = t[a, 0, o] * g[b, 0] + t[a, 1, o] * g[b, 1] + t[a, 2, o] * g[b, 2]


def tiles(oh: int, ow: int) -> tuple[int, int]:
    """Tile rows and columns covering an ``oh x ow`` output."""
    return -(-oh // 4), -(-ow // 4)


def tiles_per_row(ow: int) -> int:
    """Tiles each row of ``V`` and ``M`` holds: one more than an ``ow``-wide output needs
    (``run`` says why)."""
    return tiles(1, ow)[1] + 1


def units(n: int, oh: int, ow: int, c_in: int, c_out: int, budget: int) -> np.ndarray:
    """``[(image, first tile row, end tile row)]``: bands of tile rows whose ``V`` and ``M``
    (36 * (C + O) values per tile, ``tw + 1`` tiles per row) hold at most ``budget`` values
    (at least one tile row), of even height within an image."""
    th, tp = tiles(oh, ow)[0], tiles_per_row(ow)
    rows = max(1, min(th, budget // (36 * (c_in + c_out) * tp)))
    rows = -(-th // -(-th // rows))
    return np.array([(b, r, min(th, r + rows)) for b in range(n) for r in range(0, th, rows)],
                    np.int64).reshape(-1, 3)


def scratch_size(todo: np.ndarray, ow: int, c_in: int, c_out: int) -> tuple[int, int]:
    """Values of ``V`` and of ``M`` the largest unit of ``todo`` needs."""
    tp = tiles_per_row(ow)
    t = int((todo[:, 2] - todo[:, 1]).max()) * tp if len(todo) else 0
    return 36 * c_in * t, 36 * c_out * t


@_njit
def run(x, u, out, pad_t, pad_l, todo, vbuf, mbuf, bias, relu, go):
    """``out[b]`` (rows of the units' tile rows) = the 3x3 correlation of ``x[b]`` (zero
    outside; ``pad_t``/``pad_l`` rows/columns of padding before, any sign) with the
    transformed weights ``u``, plus ``bias`` (``[O]``, or empty for none), then ``max(., 0)``
    if ``relu``, for every unit ``(b, ty0, ty1)`` of ``todo``; ``go``: ``workers.both``'s
    token, announced at once.

    Each row of tiles carries one tile more than the output needs (``tp = tw + 1``): tile
    ``(ty, tx)`` is then number ``ty * tp + tx`` and its input columns start at ``4 * (ty *
    tp + tx)`` of a band's rows laid end to end, so every pass of the transforms is one long
    loop over all the band's tiles (``tw`` alone is 2-16 here: loops that short ran scalar,
    4x slower). The extra tile reads the next row's first columns; its outputs are dropped."""
    spin.announce(go)
    c, o = x.shape[1], out.shape[1]
    tp = (out.shape[3] + 3) // 4 + 1  # tiles_per_row
    band = 0
    for unit in range(todo.shape[0]):
        band = max(band, todo[unit, 2] - todo[unit, 1])
    k = np.array([2, 4, 5, 8], x.dtype)  # the transforms' multiples, in the data's dtype
    rows = np.zeros((4 * band + 2) * 4 * tp, x.dtype)
    q = np.empty(6 * (band * 4 * tp + 4), x.dtype)
    phases = np.empty(4 * (band * tp + 1), x.dtype)
    r = np.empty(24 * band * tp, x.dtype)
    y = np.empty(4 * band * 4 * tp, x.dtype)
    for unit in range(todo.shape[0]):
        b, ty0, ty1 = todo[unit, 0], todo[unit, 1], todo[unit, 2]
        t = (ty1 - ty0) * tp
        v = vbuf[:36 * c * t].reshape((36, c, t))
        m = mbuf[:36 * o * t].reshape((36, o, t))
        _input_transform(x[b], v, rows, q, phases, k, pad_t, pad_l, ty0, ty1, tp)
        for xi in range(36):
            blas.gemm(u[xi].T, v[xi], m[xi], 0.0)
        _output_transform(m, out[b], r, y, k, ty0, ty1, tp, bias, relu)


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


# The transforms index flat buffers with unsigned integers: Numba wraps negative (signed)
# indices, which keeps LLVM from vectorizing, and every array view taken inside the loops
# costs a reference count (an atomic) -- together 2-4x of these loops' time.
_U = np.uint64


@_njit
def _input_transform(xb, v, rows, q, phases, k, pad_t, pad_l, ty0, ty1, tp):
    """``v[xi, c, tile]`` = ``B^T d B`` of each tile of rows ``[ty0, ty1)`` (``tp`` tiles per
    row). Per channel: the band's input rows, zero-padded to ``4 * tp`` columns (``rows``);
    ``B^T`` down the columns, six rows at a time, into ``q[a]`` (the band's rows end to end);
    per ``a``, ``q[a]`` split into its four column phases (``phases[j, i] = q[a, 4i + j]``,
    so that the last pass reads contiguous vectors) and ``B`` along the rows into ``v``."""
    c_n, h, w = xb.shape
    k = (k[0], k[1], k[2], k[3])  # values, not loads that the stores might alias (3x faster)
    band = ty1 - ty0
    span = 4 * tp
    n_rows, t_n = 4 * band + 2, band * tp
    src0, dst0 = max(0, -pad_l), max(0, pad_l)
    count = _U(max(0, min(w - src0, span - dst0)))
    ql, pl, us, ut = _U(band * span + 4), _U(t_n + 1), _U(span), _U(t_n)
    plane = _U(c_n * t_n)  # v[xi] to v[xi + 1]
    xf, vf = xb.reshape(-1), v.reshape(-1)
    for a in range(6):  # the extra tile of the last row reads 2 past the band's columns
        for s in range(4):
            q[_U(a) * ql + _U(band * span + s)] = 0
    for c in range(c_n):
        for i in range(n_rows):
            iy = 4 * ty0 - pad_t + i
            d0 = _U(i * span + dst0)
            if 0 <= iy < h:
                s0 = _U((c * h + iy) * w + src0)
                for s in range(count):
                    rows[d0 + s] = xf[s0 + s]
            else:
                for s in range(count):
                    rows[d0 + s] = 0
        for tl in range(band):  # B^T down the columns
            r0, q0 = _U(4 * tl * span), _U(tl * span)
            for s in range(us):
                e = r0 + s
                o0, o1, o2, o3, o4, o5 = _bt(rows[e], rows[e + us], rows[e + _U(2) * us],
                                             rows[e + _U(3) * us], rows[e + _U(4) * us],
                                             rows[e + _U(5) * us], k)
                d = q0 + s
                q[d], q[ql + d], q[_U(2) * ql + d] = o0, o1, o2
                q[_U(3) * ql + d], q[_U(4) * ql + d], q[_U(5) * ql + d] = o3, o4, o5
        for a in range(6):  # B along the rows
            qa = _U(a) * ql
            for i in range(pl):
                e = qa + _U(4) * i
                phases[i], phases[pl + i] = q[e], q[e + _U(1)]
                phases[_U(2) * pl + i], phases[_U(3) * pl + i] = q[e + _U(2)], q[e + _U(3)]
            base = _U(6 * a) * plane + _U(c) * ut
            for t in range(ut):
                o0, o1, o2, o3, o4, o5 = _bt(phases[t], phases[pl + t], phases[_U(2) * pl + t],
                                             phases[_U(3) * pl + t], phases[t + _U(1)],
                                             phases[pl + t + _U(1)], k)
                d = base + t
                vf[d], vf[d + plane], vf[d + _U(2) * plane] = o0, o1, o2
                vf[d + _U(3) * plane], vf[d + _U(4) * plane], vf[d + _U(5) * plane] = o3, o4, o5


@_njit
def _output_transform(m, ob, r, y, k, ty0, ty1, tp, bias, relu):
    """``ob[o]`` rows of tile rows ``[ty0, ty1)`` (``tp`` tiles per row) = ``A^T M A`` of
    each tile (+ ``bias[o]``, then ``max(., 0)`` if ``relu``), cropped to the output: ``A^T``
    down the columns of every tile into ``r[i, b]``, ``A`` along the rows into ``y[i]`` (the
    band's output rows ``4 ty + i`` end to end, ``4 * tp`` wide), then the rows copied out."""
    o_n, oh, ow = ob.shape
    k = (k[0], k[1], k[2], k[3])  # values, not loads that the stores might alias
    band = ty1 - ty0
    span = 4 * tp
    flat, zero = ob.reshape(-1), np.zeros(1, ob.dtype)[0]
    mf = m.reshape(-1)
    ut = _U(band * tp)
    plane = _U(o_n) * ut  # m[xi] to m[xi + 1]
    has_bias = bias.size > 0
    for o in range(o_n):
        for b in range(6):  # down the columns
            s0, d0 = _U(b) * plane + _U(o) * ut, _U(b) * ut
            for t in range(ut):
                s = s0 + t
                e0, e1, e2, e3 = _at(mf[s], mf[s + _U(6) * plane], mf[s + _U(12) * plane],
                                     mf[s + _U(18) * plane], mf[s + _U(24) * plane],
                                     mf[s + _U(30) * plane], k)
                d = d0 + t
                r[d], r[d + _U(6) * ut], r[d + _U(12) * ut], r[d + _U(18) * ut] = e0, e1, e2, e3
        for i in range(4):  # along the rows
            s0, d0 = _U(6 * i) * ut, _U(i * band * span)
            for t in range(ut):
                s = s0 + t
                y0, y1, y2, y3 = _at(r[s], r[s + ut], r[s + _U(2) * ut], r[s + _U(3) * ut],
                                     r[s + _U(4) * ut], r[s + _U(5) * ut], k)
                d = d0 + _U(4) * t
                y[d], y[d + _U(1)], y[d + _U(2)], y[d + _U(3)] = y0, y1, y2, y3
        bo = bias[o] if has_bias else zero
        for tl in range(band):
            ty = ty0 + tl
            n_rows = min(4, oh - 4 * ty)
            for i in range(n_rows):
                s0, d0 = _U(i * band * span + tl * span), _U((o * oh + 4 * ty + i) * ow)
                if has_bias:
                    for s in range(_U(ow)):
                        flat[d0 + s] = y[s0 + s] + bo
                else:
                    for s in range(_U(ow)):
                        flat[d0 + s] = y[s0 + s]
            if relu:
                relu_span(flat, (o * oh + 4 * ty) * ow, n_rows * ow, zero)
