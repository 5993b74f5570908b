"""numpy kernels of the convolution and pooling ops (``cnn.py``), in either data layout.

Convolution is a BLAS problem; ``choose`` picks the route per op, layout and input channels
(NCHW: im2col for the forward and the weight adjoint, and for the input adjoint of few input
channels; otherwise per tap):

* ``"im2col"``: chunked im2col. A chunk of whole images -- or, when one image does not fit,
  a band of output rows of one image -- is gathered into ``cols[kH*kW*C, positions]`` (one
  numpy copy from a strided window view of the input, or of a zero-bordered slab of it when
  the windows reach into the padding) and multiplied by the
  HWIO weights reshaped to ``[kH*kW*C, O]``, as they are: one GEMM of depth kH*kW*C per
  image of the chunk (numpy's batched matmul), written straight into the output. The input
  adjoint is the same GEMMs transposed, then the scatter-add (col2im) of the same per-tap
  blocks; the weight adjoint is ``cols @ g.T`` per image, summed. (Per image, not one wide
  GEMM of the whole chunk: small GEMMs run on one BLAS thread, and that beat the wide GEMM
  -- plus its transposed copy -- by 1.2-1.9x at the LeNet shapes next to torch's threads.)
* ``"taps"``: one GEMM per kernel tap, of depth C (O for the input adjoint): for tap
  ``(i, j)`` the output positions whose input lies inside the (unpadded) image get
  ``rows @ w[i, j]`` (NHWC) or ``w[i, j].T @ cols`` per image (NCHW). At stride 1 each tap
  multiplies the whole input into one reused buffer and adds its shifted window to the
  output (no gather); at larger strides the tap's rows are gathered first.

Memory: a forward holds input + output + one chunk buffer, and the chunk is at most one
output-sized buffer (what the per-tap route's scratch is), except that chunks are allowed
up to ``IM2COL_FLOOR`` values (1 MiB of float32) whatever the output, and never exceed
``IM2COL_BUDGET`` (8 MiB of float32, a quarter of the L3). The chunk buffers are kept per
thread across calls: a fresh buffer per call costs a page fault per 4 KiB, which was most
of a small convolution's time. Padding is never materialized.

Profile (eager, (8, 64, 56, 56) float32 NCHW -> 64 channels, 3x3, pad 1, 2 noisy cores;
medians, same process, interleaved with torch 2.x eager): the per-tap route took ~22-29 ms
(torch ~13.5-14.5 in that run), of which the nine depth-64 GEMMs ~13 ms and the eight
shifted-window adds (each reads and writes an output-sized array) most of the rest. The
im2col route: sixteen depth-576 GEMMs (half an image each, ~175 GFLOP/s, near this
machine's peak) ~10.5 ms plus the per-tap copies ~3-4 ms: ~14.6 ms, 1.0-1.1x torch. Weight
adjoint ~15-18 ms (per tap ~28-33; torch ~14-16): 1.0-1.1x. Input adjoint: per tap, ~19-26
ms (torch ~15-17): 1.2-1.5x; im2col + col2im measured ~31. LeNet shapes (batch 32; torch in
brackets): 1->8 5x5 on 28x28 forward 0.36 ms (per tap 7.3; 0.18), input adjoint 0.56
(0.80; 1.14), weight adjoint 0.36 (0.64; 0.14); 8->16 5x5 on 12x12 forward 0.71 (1.17;
0.11), input adjoint 0.91 (per tap, unchanged; 0.19), weight adjoint 0.78 (0.89; 0.16).
There the copies' rows are 8-24 values long and fixed costs dominate: torch stays 2-7x
ahead per op. Gathering a chunk with one copy from a window view instead of one per tap
(~8 us of Python each) took the W7 step's convolutions from 2.55 to 2.26 ms (2 forwards + 2
weight adjoints, in the plan). Max-pool 2x2 (32, 8, 24, 24): forward 0.10 ms, numpy per tap
(torch 0.33 with indices); backward 0.43 ms, one Numba pass that finds each window's winner
and routes its gradient, written out for 2x2 windows at stride 2 (general loops 0.76,
search-then-route in two passes 0.94; torch's reuses the forward's indices: 0.03).

What did not pay: the gathers as Numba loops -- serial they move ~1-2 GB/s against numpy's
strided copies' ~20 GB/s; ``parallel=True`` ones are fast alone but Numba's OpenMP pool and
BLAS's threads both spin-wait after their work, and alternating them (gather, GEMM, gather,
...) on 2 cores cost a scheduler time slice per switch once torch's OpenMP was also loaded:
20-100x slowdowns; the max-pool backward kernel is therefore serial Numba too. Splitting only
the gathers over two Python threads gained nothing (BLAS's spinning threads hold the other
core). A Numba max-pool forward lost to numpy's per-tap ``np.maximum`` (0.40 vs 0.10 ms), a
reshape-and-``max`` one even more (2.7 ms: a reduction over two strided axes).

Two cores (``halves``): what does pay is splitting a whole op -- gathers, GEMMs, col2im --
into two halves of the images, one per thread (``samediff.workers``), when each GEMM is small
enough for OpenBLAS to run it on the calling thread alone (``SPLIT_MAX_GEMM``): nothing then
waits on another pool. LeNet shapes (batch 32, medians, same process, split vs one thread):
input adjoint 8->16 0.47-0.51 vs 0.69-0.71 ms and 1->8 0.40-0.45 vs 0.51-0.57; forward and
weight adjoint 8->16 0.39-0.43 vs 0.41-0.50; the 1->8 forward does not gain (0.32-0.35 vs
0.23-0.26: its one copy per half is the whole op). W7 step (through ``fit``): 4.0-4.8 ->
3.4-3.8 ms. Halves that run many small Python-level steps (the per-tap route: 25 taps of
~8 numpy calls) lose instead (0.93 -> 3.96 ms), each waiting for the other's GIL: that route
stays on one thread. Two halves calling multi-threaded GEMMs (the 64-channel conv) fight
over OpenBLAS's pool (1.1-2x slower), and OpenBLAS's thread count is process-wide (its
``_local`` setter is not, in numpy's 0.3.31 build), so those stay on one thread as well.

``cf`` says channels first (NCHW: spatial axes 2, 3) or last (NHWC: axes 1, 2); weights are
always HWIO here (``[kH, kW, iC, oC]``; the ops convert OIHW). Geometry of one spatial axis:
output ``o`` reads input ``o * s - before + t * d`` at tap ``t``.
"""
from __future__ import annotations

import threading

import numba
import numpy as np

from .. import workers
from . import cnn_winograd as W

Pair = tuple[int, int]

# Serial on purpose (see the module docstring: thread pools that spin).
_njit = numba.njit(cache=True, nogil=True)


# --- im2col gathers (channels first) ------------------------------------------------------------
# ``cols[k, b * L + r * OW + ow]`` with ``k = (i * kW + j) * C + c`` and ``L = rows * OW`` is
# the input that output ``(n0 + b, r0 + r, ow)`` reads at tap ``(i, j)`` in channel ``c`` (zero
# in the padding): the HWIO weights reshaped to ``[kH*kW*C, O]`` are the other GEMM operand
# as they are, and a chunk of several images is one wide GEMM.

def _im2col_cf(x, cols, nb, n0, r0, kh, kw, sh, sw, ph, pw, dh, dw):
    """``cols[k, b, r, ow]`` (as [kk, nb * rows, OW]), ``k = (i * kW + j) * C + c``: the input
    that output ``(n0 + b, r0 + r, ow)`` reads at tap ``(i, j)`` in channel ``c``, zero in the
    padding. One numpy copy from a strided 6-D window view ``[kH, kW, C, nb, rows, OW]`` of
    the input -- or, when the windows reach into the padding, of a zero-bordered copy of the
    rows they read (a slab at most the chunk's input plus its halo). One call per chunk: the
    per-tap copies it replaces cost ~8 us of Python each, most of a LeNet-sized conv."""
    rows, ow_n = cols.shape[1] // nb, cols.shape[2]
    c_n, h, w = x.shape[1], x.shape[2], x.shape[3]
    top, left = r0 * sh - ph, -pw  # first input row / column the chunk's windows read
    bottom = (r0 + rows - 1) * sh - ph + (kh - 1) * dh + 1  # one past the last
    right = (ow_n - 1) * sw - pw + (kw - 1) * dw + 1
    if top >= 0 and left >= 0 and bottom <= h and right <= w:
        src = x[n0:n0 + nb, :, top:bottom, left:right]
    else:
        src = _kept_scratch(x.dtype).view("slab", (nb, c_n, bottom - top, right - left))
        src.fill(0)
        y0, y1, x0, x1 = max(top, 0), min(bottom, h), max(left, 0), min(right, w)
        if y1 > y0 and x1 > x0:
            src[:, :, y0 - top:y1 - top, x0 - left:x1 - left] = x[n0:n0 + nb, :, y0:y1, x0:x1]
    st = src.strides
    windows = np.lib.stride_tricks.as_strided(
        src, shape=(kh, kw, c_n, nb, rows, ow_n),
        strides=(dh * st[2], dw * st[3], st[1], st[0], sh * st[2], sw * st[3]), writeable=False)
    np.copyto(cols.reshape(kh, kw, c_n, nb, rows, ow_n), windows)


def _col2im_cf(cols, dx, nb, n0, r0, kh, kw, sh, sw, ph, pw, dh, dw):
    """``dx`` += the adjoint of ``_im2col_cf``: one compiled pass (``nogil``, so two halves
    of the images run at once). The numpy form -- one strided add per tap -- cost ~5 us of
    Python per tap plus a pass over ``dx`` each: 25 of them were most of a LeNet input
    adjoint."""
    rows, ow_n = cols.shape[1] // nb, cols.shape[2]
    _col2im_kernel(cols.reshape(kh, kw, dx.shape[1], nb, rows, ow_n), dx, n0, r0, sh, sw, ph,
                   pw, dh, dw)


@_njit
def _col2im_kernel(cols, dx, n0, r0, sh, sw, ph, pw, dh, dw):
    kh, kw, c_n, nb, rows, ow_n = cols.shape
    h, w = dx.shape[2], dx.shape[3]
    for i in range(kh):
        for j in range(kw):
            off = j * dw - pw  # input column of output column o: o * sw + off
            lo = 0 if off >= 0 else (-off + sw - 1) // sw
            hi = min(ow_n, (w - 1 - off) // sw + 1) if w - 1 - off >= 0 else 0
            for c in range(c_n):
                for b in range(nb):
                    for r in range(rows):
                        ih = (r0 + r) * sh - ph + i * dh
                        if ih < 0 or ih >= h:
                            continue
                        src, dst = cols[i, j, c, b, r], dx[n0 + b, c, ih]
                        for o in range(lo, hi):
                            dst[o * sw + off] += src[o]


@_njit
def _beats(v, best):
    """``v`` replaces the running maximum ``best``: larger, or the first NaN."""
    return v > best or (v != v and best == best)


@_njit
def _max_pool2x2_backward_cf(x, g, dx):
    """``_max_pool_backward_cf`` for the common 2x2 windows at stride 2 without padding,
    written out: straight-line code whose compares compile to selects (3-4x faster than the
    general loops over taps, whose short variable trip counts and branches LLVM keeps)."""
    n, c_n = x.shape[0], x.shape[1]
    oh_n, ow_n = g.shape[2], g.shape[3]
    for b in range(n):
        for c in range(c_n):
            src, grad, dst = x[b, c], g[b, c], dx[b, c]
            for oh in range(oh_n):
                i0 = 2 * oh
                for ow in range(ow_n):
                    j0 = 2 * ow
                    best, bi, bj = src[i0, j0], i0, j0
                    v = src[i0, j0 + 1]
                    if _beats(v, best):
                        best, bj = v, j0 + 1
                    v = src[i0 + 1, j0]
                    if _beats(v, best):
                        best, bi, bj = v, i0 + 1, j0
                    v = src[i0 + 1, j0 + 1]
                    if _beats(v, best):
                        bi, bj = i0 + 1, j0 + 1
                    dst[bi, bj] += grad[oh, ow]


@_njit
def _max_pool_backward_cf(x, g, dx, kh, kw, sh, sw, ph, pw, dh, dw):
    """``dx`` (zeroed) += each window's ``g`` at the tap that wins it (the first in row-major
    order holding the maximum; NaN wins, as in ``np.maximum``): the winner search and the
    routing in one pass, no index array (one plane per task: no races)."""
    n, c_n, h, w = x.shape
    oh_n, ow_n = g.shape[2], g.shape[3]
    for b in range(n):
        for c in range(c_n):
            src, grad, dst = x[b, c], g[b, c], dx[b, c]
            for oh in range(oh_n):
                for ow in range(ow_n):
                    best, bi, bj = src[0, 0], -1, -1
                    for i in range(kh):
                        ih = oh * sh - ph + i * dh
                        if ih < 0 or ih >= h:
                            continue
                        for j in range(kw):
                            iw = ow * sw - pw + j * dw
                            if iw < 0 or iw >= w:
                                continue
                            v = src[ih, iw]
                            if bi < 0 or _beats(v, best):
                                best, bi, bj = v, ih, iw
                    if bi >= 0:
                        dst[bi, bj] += grad[oh, ow]



def _chunks(images: range, oh: int, ow: int, per_pos: int, budget: int):
    """``(n0, n1, r0, r1)`` chunks of (``images``, output rows) whose im2col buffer
    (``per_pos`` values per output position) holds at most ``budget`` values: whole images
    while one fits, else bands of rows of one image."""
    img = oh * ow * per_pos
    if img <= budget:
        nb = max(1, budget // img)
        for n0 in range(images.start, images.stop, nb):
            yield n0, min(images.stop, n0 + nb), 0, oh
    else:
        rows = max(1, budget // (ow * per_pos))
        rows = -(-oh // -(-oh // rows))  # even bands
        for n0 in images:
            for r0 in range(0, oh, rows):
                yield n0, n0 + 1, r0, min(oh, r0 + rows)


#: Multiply-adds below which a convolution stays on one thread (a split costs ~20-40 us).
SPLIT_MIN_MACS = 1 << 20
#: The largest GEMM (M * N * K) a split convolution may call: OpenBLAS runs smaller ones on
#: the calling thread only. Two halves each calling a multi-threaded GEMM fight over the
#: same pool (measured: 1.1-2x slower than one thread calling them in turn).
SPLIT_MAX_GEMM = 1 << 18


#: Pooling: window reads (outputs x taps) below which a pooling op stays on one thread.
SPLIT_MIN_POOL = 1 << 16


def halves(n: int, work: int, gemm: int, least: int | None = None) -> list[range]:
    """The images ``range(n)`` in two halves for ``workers.both`` -- when there are two
    images, a second core, ``work`` of at least ``least`` (``SPLIT_MIN_MACS``) and no GEMM
    above ``SPLIT_MAX_GEMM`` -- else whole."""
    least = SPLIT_MIN_MACS if least is None else least
    if n < 2 or not workers.enabled() or work < least or gemm > SPLIT_MAX_GEMM:
        return [range(n)]
    h = (n + 1) // 2
    return [range(0, h), range(h, n)]


def on_halves(parts: list[range], work) -> list:
    """``[work(part) for part in parts]``, the two halves at once (``workers.both``)."""
    if len(parts) == 1:
        return [work(parts[0])]
    got: list = [None, None]

    def job(k: int) -> None:
        got[k] = work(parts[k])
    workers.both(lambda: job(0), lambda: job(1))
    return got


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


_KEEP = threading.local()


def _kept_scratch(dtype) -> _Scratch:
    """This thread's scratch of ``dtype`` kept across calls (the im2col chunks, at most
    ``IM2COL_BUDGET`` values): a fresh buffer per call costs a page fault per 4 KiB, which is
    most of a small convolution's time."""
    keep = _KEEP.__dict__.setdefault("scratch", {})
    s = keep.get(np.dtype(dtype))
    if s is None:
        s = keep[np.dtype(dtype)] = _Scratch(dtype)
    return s


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


IM2COL_FLOOR = 1 << 18  # values: chunks below 1 MiB need not be smaller than the output
IM2COL_BUDGET = 1 << 21  # values (8 MiB of float32): a quarter of the L3 cache


_NUMBA_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


INPUT_GRAD_IM2COL_MAX_C = 8  # input channels up to which the input adjoint goes im2col


def choose(cf: bool, op: str = "conv", channels: int = 0) -> str:
    """The route of a convolution op (``"conv"``, ``"input_grad"``, ``"weight_grad"``) with
    ``channels`` input channels: ``"im2col"`` -- chunked im2col, one GEMM of depth kH*kW*C
    per image of a chunk -- or ``"taps"`` -- one GEMM of depth C (O for the input adjoint)
    per kernel tap, no gathered copy.

    * NHWC: ``"taps"`` always (its per-tap GEMMs need no gather; no channels-last gather is
      written).
    * NCHW forward and weight adjoint: ``"im2col"`` at every size measured -- 1.5-2x at 64
      channels (one depth-576 GEMM runs near BLAS peak, nine depth-64 ones do not, and the
      per-tap shifted-window adds move as much memory as the gather), 1.1-20x at 1-8.
    * NCHW input adjoint: ``"im2col"`` only up to ``INPUT_GRAD_IM2COL_MAX_C`` input channels
      (with the compiled col2im and two threads: 1.4-1.8x the per-tap route at 8 channels,
      1.3-2x at 1); from 16 channels on (one thread: 0.7-0.95x at 16 and at 64) the col2im
      scatter-add costs more than the per-tap route's adds."""
    if not cf:
        return "taps"
    if op == "input_grad" and channels > INPUT_GRAD_IM2COL_MAX_C:
        return "taps"
    return "im2col"


def _im2col_plan(x_shape, w_shape, geo, cf, op="conv"):
    """None (route ``"taps"``), or the im2col route's chunks -- per half of the images when
    the work is split over two threads (``halves``) -- and depth ``kk``. Chunks hold whole
    images while one fits the budget, else bands of output rows of one image; the budget is
    at most one output-sized buffer (the per-tap route's scratch) unless that is below
    ``IM2COL_FLOOR``, and at most ``IM2COL_BUDGET``."""
    if choose(cf, op, w_shape[2]) != "im2col":
        return None
    n, oh, ow, o = x_shape[0], geo[0][2], geo[1][2], w_shape[3]
    kk = w_shape[0] * w_shape[1] * w_shape[2]
    budget = min(IM2COL_BUDGET, max(n * oh * ow * o, ow * kk, IM2COL_FLOOR))
    chunks = list(_chunks(range(n), oh, ow, kk, budget))
    gemm = max((r1 - r0) * ow for _, _, r0, r1 in chunks) * kk * o  # one GEMM per image
    parts = halves(n, n * oh * ow * kk * o, gemm)
    return [list(_chunks(p, oh, ow, kk, budget)) for p in parts], kk


def _geo_args(geo, kernel, stride, dilation):
    return (kernel[0], kernel[1], stride[0], stride[1], geo[0][0], geo[1][0],
            dilation[0], dilation[1])


def _conv_im2col(x, w, out, geo, plan, stride, dilation):
    parts, kk = plan
    on_halves(parts, lambda chunks: _conv_chunks(x, w, out, geo, chunks, kk, stride, dilation))
    return out


def _conv_chunks(x, w, out, geo, chunks, kk, stride, dilation):
    n, o, ow = x.shape[0], w.shape[3], geo[1][2]
    w2t = w.reshape(kk, o).T
    outm = out.reshape(n, o, -1)
    args = _geo_args(geo, w.shape[:2], stride, dilation)
    buf = _kept_scratch(out.dtype)  # per thread
    for n0, n1, r0, r1 in chunks:
        nb, length = n1 - n0, (r1 - r0) * ow
        cols = buf.view("cols", (kk, nb * (r1 - r0), ow))
        _im2col_cf(x, cols, nb, n0, r0, *args)
        cols = cols.reshape(kk, nb * length)
        if nb == 1:
            np.matmul(w2t, cols, out=outm[n0, :, r0 * ow:r1 * ow])
        else:  # one GEMM per image (batched): small ones run on one BLAS thread, which beat
            # one wide GEMM + a transposed copy by 1.3-1.7x next to torch's threads
            np.matmul(w2t, cols.reshape(kk, nb, length).transpose(1, 0, 2), out=outm[n0:n1])


def _grad_im2col(g, w, dx, x, kernel, geo, plan, stride, dilation):
    """Through the chunks of ``_conv_im2col``: ``dx`` (zeroed) += conv's input adjoint (``x``
    None), or -> dw as [kk, O] (``w`` None). Halves of the images write disjoint parts of
    ``dx``; their weight adjoints are summed."""
    parts, kk = plan
    got = on_halves(parts, lambda chunks: _grad_chunks(g, w, dx, x, kernel, geo, chunks, kk,
                                                       stride, dilation))
    return dx if x is None else sum(got[1:], got[0])


def _grad_chunks(g, w, dx, x, kernel, geo, chunks, kk, stride, dilation):
    n, o, ow = g.shape[0], g.shape[1], geo[1][2]
    gm = g.reshape(n, o, -1)
    args = _geo_args(geo, kernel, stride, dilation)
    buf = _kept_scratch(g.dtype)
    w2 = np.zeros((kk, o), g.dtype) if x is not None else w.reshape(kk, o)
    for n0, n1, r0, r1 in chunks:
        nb, length = n1 - n0, (r1 - r0) * ow
        cols = buf.view("cols", (kk, nb * (r1 - r0), ow))
        cols2 = cols.reshape(kk, nb * length)
        if x is None:
            if nb == 1:
                np.matmul(w2, gm[n0, :, r0 * ow:r1 * ow], out=cols2)
            else:  # batched, as the forward
                np.matmul(w2, gm[n0:n1], out=cols2.reshape(kk, nb, length).transpose(1, 0, 2))
            _col2im_cf(cols, dx, nb, n0, r0, *args)
            continue
        _im2col_cf(x, cols, nb, n0, r0, *args)
        if nb == 1:
            w2 += cols2 @ gm[n0, :, r0 * ow:r1 * ow].T
        else:  # batched, as the forward (beat one GEMM of depth nb * L: 1.2-1.9x)
            w2 += np.matmul(cols2.reshape(kk, nb, length).transpose(1, 0, 2),
                            gm[n0:n1].transpose(0, 2, 1)).sum(0)
    return dx if x is None else w2


def _winograd(x, w, out, before):
    """``out`` = ``x`` (*) ``w`` (3x3, stride 1, NCHW) by ``cnn_winograd``: bands of tile
    rows, split over two threads, each band's transforms and GEMMs in one compiled call. The
    bands' scratch (two threads' worth) stays within one output-sized buffer."""
    n, c, o = x.shape[0], w.shape[2], w.shape[3]
    oh, ow = out.shape[2], out.shape[3]
    todo = W.units(n, oh, ow, c, o, min(IM2COL_BUDGET, out.size // 2))
    u = W.filter_transform(w)
    parts = [todo]
    if len(todo) > 1 and workers.enabled() and out.size * c * 9 >= SPLIT_MIN_MACS:
        parts = [todo[:(len(todo) + 1) // 2], todo[(len(todo) + 1) // 2:]]

    def work(part):
        nv, nm = W.scratch_size(part, ow, c, o)
        buf = _kept_scratch(out.dtype)
        W.run(x, u, out, before[0], before[1], part, buf.view("wino_v", (nv,)),
              buf.view("wino_m", (nm,)))
    on_halves(parts, work)
    return out


def conv(x, w, stride, padding, dilation, cf):
    """``x`` (*) ``w`` [kH, kW, C, O], by the route ``choose`` picks."""
    geo = geometry(spatial(x.shape, cf), w.shape[:2], stride, padding, dilation)
    dtype = np.result_type(x, w)
    x, w = x.astype(dtype, copy=False), w.astype(dtype, copy=False)
    if x.shape[1 if cf else 3] != w.shape[2]:
        raise ValueError(f"x has {x.shape[1 if cf else 3]} channels, w expects {w.shape[2]}")
    out = np.empty(out_shape(x.shape, geo, w.shape[3], cf), dtype)
    if cf and W.applies(w.shape[:2], stride, dilation, w.shape[2], w.shape[3], dtype):
        return _winograd(np.ascontiguousarray(x), w, out, (geo[0][0], geo[1][0]))
    plan = _im2col_plan(x.shape, w.shape, geo, cf)
    if plan is not None:
        return _conv_im2col(np.ascontiguousarray(x), np.ascontiguousarray(w), out, geo, plan,
                            stride, dilation)
    taps = _taps(spatial(x.shape, cf), geo, w.shape[:2], stride, dilation, cf)
    return _gemm_taps(x, lambda i, j: w[i, j], out, taps, cf, tuple(stride) == (1, 1))


def conv_input_grad(g, w, xshape, stride, padding, dilation, cf):
    """Adjoint of ``conv`` in ``x``: ``g`` (conv's output gradient) -> dx of ``xshape``: the
    transposed GEMMs then col2im, or the same taps with source and destination swapped and
    ``w[i, j]`` transposed."""
    hw = spatial(xshape, cf)
    geo = geometry(hw, w.shape[:2], stride, padding, dilation)
    dtype = np.result_type(g, w)
    g, w = g.astype(dtype, copy=False), w.astype(dtype, copy=False)
    if g.shape[1 if cf else 3] != w.shape[3] or xshape[1 if cf else 3] != w.shape[2]:
        raise ValueError(f"g {g.shape} / x {xshape} channels do not match w {w.shape}")
    if cf and W.applies(w.shape[:2], stride, dilation, w.shape[3], w.shape[2], dtype):
        # the full correlation of g with the flipped kernel, channels swapped
        flipped = np.ascontiguousarray(w[::-1, ::-1].transpose(0, 1, 3, 2))
        return _winograd(np.ascontiguousarray(g), flipped, np.empty(xshape, dtype),
                         (2 - geo[0][0], 2 - geo[1][0]))
    plan = _im2col_plan(xshape, w.shape, geo, cf, "input_grad")
    if plan is not None:
        return _grad_im2col(np.ascontiguousarray(g), np.ascontiguousarray(w),
                            np.zeros(xshape, dtype), None, w.shape[:2], geo, plan, stride,
                            dilation)
    taps = [(i, j, xi, gi) for i, j, gi, xi in _taps(hw, geo, w.shape[:2], stride, dilation, cf)]
    dx = np.empty(xshape, dtype)
    return _gemm_taps(g, lambda i, j: w[i, j].T, dx, taps, cf, tuple(stride) == (1, 1))


def conv_weight_grad(x, g, kernel, stride, padding, dilation, cf):
    """Adjoint of ``conv`` in ``w``: -> dw [kH, kW, C, O]."""
    hw = spatial(x.shape, cf)
    geo = geometry(hw, kernel, stride, padding, dilation)
    dtype = np.result_type(x, g)
    c, o = (x.shape[1], g.shape[1]) if cf else (x.shape[3], g.shape[3])
    plan = _im2col_plan(x.shape, (kernel[0], kernel[1], c, o), geo, cf, "weight_grad")
    if plan is not None:
        x, g = x.astype(dtype, copy=False), g.astype(dtype, copy=False)
        w2 = _grad_im2col(np.ascontiguousarray(g), None, None, np.ascontiguousarray(x), kernel,
                          geo, plan, stride, dilation)
        return w2.reshape(kernel[0], kernel[1], c, o)
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



def _pool_halves(out, kernel, work) -> None:
    """``work(images)`` over two halves of the batch at once when it is big enough."""
    on_halves(halves(out.shape[0], out.size * kernel[0] * kernel[1], 0, SPLIT_MIN_POOL), work)


def max_pool(x, kernel, stride, padding, dilation, cf):
    """Max over the taps that lie inside the image (padding never wins)."""
    _, shape, taps = _pool_setup(x.shape, kernel, stride, padding, dilation, cf)
    out = np.empty(shape, x.dtype)

    def work(p: range) -> None:
        dst, src = out[p.start:p.stop], x[p.start:p.stop]
        dst.fill(-np.inf)
        for _, _, oi, ii in taps:
            region = dst[oi]
            np.maximum(region, src[ii], out=region)
    _pool_halves(out, kernel, work)
    return out


def max_pool_grad(x, g, kernel, stride, padding, dilation, cf):
    """``g`` routed to the input that won each window (the first tap in row-major order among
    equal maxima, like PyTorch)."""
    if cf and x.dtype in _NUMBA_DTYPES:
        geo, _, _ = _pool_setup(x.shape, kernel, stride, padding, dilation, True)
        dx = np.zeros(x.shape, np.result_type(x, g))
        x, g = np.ascontiguousarray(x), np.ascontiguousarray(g, dx.dtype)
        two_by_two = (tuple(kernel), tuple(stride), tuple(dilation), geo[0][0], geo[1][0]) == (
            (2, 2), (2, 2), (1, 1), 0, 0)

        def work(p: range) -> None:  # nogil kernels: the halves run at once
            a, b = p.start, p.stop
            if two_by_two:
                _max_pool2x2_backward_cf(x[a:b], g[a:b], dx[a:b])
            else:
                _max_pool_backward_cf(x[a:b], g[a:b], dx[a:b], kernel[0], kernel[1], stride[0],
                                      stride[1], geo[0][0], geo[1][0], dilation[0], dilation[1])
        _pool_halves(g, kernel, work)
        return dx
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
