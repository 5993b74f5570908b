"""The im2col route of ``kernels.cnn`` (channels first): per unit of work -- one image, or a
band of its output rows when one image's buffer would exceed the budget -- gather the input
each output position reads into ``cols [kH*kW*C, positions]`` and make it one GEMM with the
HWIO weights reshaped to ``[kH*kW*C, O]``, as they are.

* forward: ``out[n] = W^T @ cols``;
* input adjoint: ``cols = W @ g[n]``, then scatter-added back (col2im);
* weight adjoint: ``dW += cols @ g[n]^T``, summed over the units.

Each of the three runs a whole list of units in one compiled call (``nogil``): the gather
(``gather``), the GEMM (the private single-threaded BLAS, ``samediff.kernels.blas``) and
col2im, with no Python between them -- so ``kernels.cnn`` hands each of two threads half of the units.
Without the private BLAS the same drivers run as Python (numpy's GEMM per unit).

Measured (LeNet shapes, batch 32, float32, one thread; median ms): 1->8 5x5 on 28x28 forward
0.13 (the numpy form -- one strided copy per chunk of images and a batched matmul -- 0.25-0.29,
most of it Python around the calls); 8->16 5x5 on 12x12 0.23 (0.39-0.47). The gather's loops
index with unsigned integers: with signed ones Numba's negative-index wraparound kept LLVM from
vectorizing the row copies (0.68 vs 0.13 ms for the first).
"""
from __future__ import annotations

import functools

import numba
import numpy as np

from . import blas, spin
from .jit_options import PYTHON_CALLERS

IM2COL_FLOOR = 1 << 18  # values: chunks below 1 MiB need not be smaller than the output
IM2COL_BUDGET = 1 << 21  # values (8 MiB of float32): a quarter of the L3 cache

_njit = numba.njit(cache=True, nogil=True, **PYTHON_CALLERS)


def units(images: range, oh: int, ow: int, kk: int, budget: int) -> np.ndarray:
    """``[(image, first output row, end row)]``: whole images while one image's ``cols``
    (``kk`` values per output position) fits ``budget`` values, else even bands of rows.
    Shared between calls of the same sizes (a training step asks for the same ones every
    time): callers only read it."""
    return _units(images.start, images.stop, oh, ow, kk, budget)


@functools.lru_cache(maxsize=256)
def _units(first: int, stop: int, oh: int, ow: int, kk: int, budget: int) -> np.ndarray:
    images = range(first, stop)
    if oh * ow * kk <= budget:
        return np.array([(n, 0, oh) for n in images], np.int64).reshape(-1, 3)
    rows = max(1, budget // (ow * kk))
    rows = -(-oh // -(-oh // rows))
    return np.array([(n, r, min(oh, r + rows)) for n in images for r in range(0, oh, rows)],
                    np.int64).reshape(-1, 3)


def budget(n: int, oh: int, ow: int, o: int, kk: int) -> int:
    """Values one unit's ``cols`` may hold: the output's size (the per-tap route's scratch),
    at least ``IM2COL_FLOOR`` and one row of positions, at most ``IM2COL_BUDGET``."""
    return min(IM2COL_BUDGET, max(n * oh * ow * o, ow * kk, IM2COL_FLOOR))


def largest(todo: np.ndarray, ow: int, kk: int) -> int:
    """Values of ``cols`` the largest unit of ``todo`` needs."""
    return int((todo[:, 2] - todo[:, 1]).max()) * ow * kk if len(todo) else 0


@numba.njit(nogil=True, inline="always")
def _tap(c, i, j, c_n, kw, dw, pw, sw, w, ow_n):
    """Row ``k`` of ``cols`` for channel ``c`` at tap ``(i, j)``; ``off``, the input column
    of output column ``o`` being ``o * sw + off``; the outputs ``[lo, hi)`` whose input
    column lies inside the image."""
    off = j * dw - pw
    lo = 0 if off >= 0 else min(ow_n, (-off + sw - 1) // sw)
    hi = max(lo, min(ow_n, (w - 1 - off) // sw + 1)) if w - 1 - off >= 0 else lo
    return (i * kw + j) * c_n + c, off, lo, hi


@numba.njit(nogil=True, inline="always")
def relu_span(flat, start, length, zero):
    """``flat[start:start + length] = max(., 0)`` in place; ``zero`` of ``flat``'s dtype.
    As ``np.maximum(a, 0)`` (the ``relu`` op), bit for bit: positives and NaN stay, the rest
    (-0.0 too) becomes +0.0. A select and a store of every element, on a contiguous span with
    unsigned indices: a store of the negatives only, or strided row views, kept the loop from
    vectorizing (W7's 1->8 conv: +20-70 us instead of +3)."""
    u = np.uint64
    s0 = u(start)
    for t in range(u(length)):
        v = flat[s0 + t]
        flat[s0 + t] = v if (v > zero) | (v != v) else zero


@_njit
def gather(xi, cols, r0, r1, kh, kw, sh, sw, ph, pw, dh, dw):
    """``cols[k, (r - r0) * OW + ow]``, ``k = (i * kW + j) * C + c``: the input ``xi[c]``
    (one image, C-contiguous) that output ``(r, ow)`` reads at tap ``(i, j)``, zero in the
    padding, for the output rows ``[r0, r1)``."""
    c_n, h, w = xi.shape
    ow_n = cols.shape[1] // (r1 - r0)
    xf, cf = xi.reshape(-1), cols.reshape(-1)
    u = np.uint64
    for c in range(c_n):
        for i in range(kh):
            for j in range(kw):
                k, off, lo, hi = _tap(c, i, j, c_n, kw, dw, pw, sw, w, ow_n)
                for r in range(r0, r1):
                    d0 = u((k * (r1 - r0) + r - r0) * ow_n)
                    iy = r * sh - ph + i * dh
                    if iy < 0 or iy >= h:
                        for t in range(u(ow_n)):
                            cf[d0 + t] = 0
                        continue
                    for t in range(u(lo)):
                        cf[d0 + t] = 0
                    s0, dl = u((c * h + iy) * w + lo * sw + off), d0 + u(lo)
                    if sw == 1:
                        for t in range(u(hi - lo)):
                            cf[dl + t] = xf[s0 + t]
                    else:
                        for t in range(u(hi - lo)):
                            cf[dl + t] = xf[s0 + t * u(sw)]
                    for t in range(u(hi), u(ow_n)):
                        cf[d0 + t] = 0


@_njit
def col2im(cols, dxi, r0, r1, kh, kw, sh, sw, ph, pw, dh, dw):
    """``dxi`` += the adjoint of ``gather`` (one image, output rows ``[r0, r1)``): the same
    walk, the copies reversed into adds. (One kernel with an ``adjoint`` flag for both ran
    the gather 1.2-2x slower: the flag's branches kept its row loops from vectorizing.)"""
    c_n, h, w = dxi.shape
    ow_n = cols.shape[1] // (r1 - r0)
    xf, cf = dxi.reshape(-1), cols.reshape(-1)
    u = np.uint64
    for c in range(c_n):
        for i in range(kh):
            for j in range(kw):
                k, off, lo, hi = _tap(c, i, j, c_n, kw, dw, pw, sw, w, ow_n)
                for r in range(r0, r1):
                    iy = r * sh - ph + i * dh
                    if iy < 0 or iy >= h:
                        continue
                    s0 = u((k * (r1 - r0) + r - r0) * ow_n + lo)
                    d0 = u((c * h + iy) * w + lo * sw + off)
                    if sw == 1:
                        for t in range(u(hi - lo)):
                            xf[d0 + t] += cf[s0 + t]
                    else:
                        for t in range(u(hi - lo)):
                            xf[d0 + t * u(sw)] += cf[s0 + t]


def forward(x, w2t, out, todo, buf, bias, relu, kh, kw, sh, sw, ph, pw, dh, dw, go):
    """``bias`` (``[O]``, or empty for none) is written first and the GEMM adds onto it:
    no second pass over the output; so is ``relu`` (``max(out, 0)``), on each unit's slab
    while it is in cache. ``go``: ``workers.both``'s token, announced at once (all three
    drivers)."""
    spin.announce(go)
    o, oh, ow, kk = out.shape[1], out.shape[2], out.shape[3], w2t.shape[1]
    flat, zero = out.reshape(-1), np.zeros(1, out.dtype)[0]
    for unit in range(todo.shape[0]):
        n, r0, r1 = todo[unit, 0], todo[unit, 1], todo[unit, 2]
        length = (r1 - r0) * ow
        cols = buf[:kk * length].reshape((kk, length))
        gather(x[n], cols, r0, r1, kh, kw, sh, sw, ph, pw, dh, dw)
        dst = out[n].reshape((o, -1))[:, r0 * ow:r1 * ow]
        if bias.size:
            for q in range(o):
                dst[q] = bias[q]
        blas.gemm(w2t, cols, dst, 1.0 if bias.size else 0.0)
        if relu:
            for q in range(o):
                relu_span(flat, ((n * o + q) * oh + r0) * ow, length, zero)


def input_grad(g, w2, dx, todo, buf, kh, kw, sh, sw, ph, pw, dh, dw, go):
    spin.announce(go)
    o, ow, kk = g.shape[1], g.shape[3], w2.shape[0]
    for unit in range(todo.shape[0]):
        n, r0, r1 = todo[unit, 0], todo[unit, 1], todo[unit, 2]
        length = (r1 - r0) * ow
        cols = buf[:kk * length].reshape((kk, length))
        blas.gemm(w2, g[n].reshape((o, -1))[:, r0 * ow:r1 * ow], cols, 0.0)
        col2im(cols, dx[n], r0, r1, kh, kw, sh, sw, ph, pw, dh, dw)


def weight_grad(x, g, dw2, todo, buf, kh, kw, sh, sw, ph, pw, dh, dw, go):
    spin.announce(go)
    o, ow, kk = g.shape[1], g.shape[3], dw2.shape[0]
    for unit in range(todo.shape[0]):
        n, r0, r1 = todo[unit, 0], todo[unit, 1], todo[unit, 2]
        length = (r1 - r0) * ow
        cols = buf[:kk * length].reshape((kk, length))
        gather(x[n], cols, r0, r1, kh, kw, sh, sw, ph, pw, dh, dw)
        blas.gemm(cols, g[n].reshape((o, -1))[:, r0 * ow:r1 * ow].T, dw2,
                  0.0 if unit == 0 else 1.0)
    if todo.shape[0] == 0:
        dw2[:] = 0


_COMPILED = {f: _njit(f) for f in (forward, input_grad, weight_grad)}


def compiled() -> bool:
    """Whether the drivers run compiled (the private BLAS is there); else they run as Python,
    one numpy GEMM per unit."""
    return blas.available()


def run(driver, *args) -> None:
    """``driver`` (``forward``, ``input_grad``, ``weight_grad``) over its units."""
    (_COMPILED[driver] if compiled() else driver)(*args)

