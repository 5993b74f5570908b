"""numpy/Numba kernels of the convolution and pooling ops (``ops/cnn.py``), in either layout.

Convolution is a BLAS problem; ``conv`` / ``conv_input_grad`` pick a route per op, layout,
kernel, channels and dtype:

* ``"winograd"`` (``kernels/winograd.py``), tried first: 3x3, stride 1, >= 16 channels in
  and out, NCHW, outputs at least 16 wide with enough positions per channel
  (``winograd.applies``), forward and input adjoint (the latter is the same 3x3 correlation
  with the kernel flipped and the channels swapped): Winograd F(4x4, 3x3), 4x fewer
  multiplies. At batch 32 and 16x16 it takes 0.55-0.87x the channels-last route's time.
* ``"hwc"`` (``kernels/im2col_hwc.py``): NCHW batches of small images (outputs
  at most ``HWC_MAX_WIDTH`` wide) with at least 16 input channels -- chunks of images turned
  channels-last, so each gathered copy is a run of C values, and one GEMM per chunk. The
  digits CNN's shapes (batch 32, float32, two threads, one loaded run): 32->32 3x3 on 8x8
  forward / input / weight adjoint 1.04 / 0.88 / 0.96 ms against 1.65 / 2.07 / 1.70 by the
  per-image route and 2.6 / 2.6 by Winograd (1.6-2.2x this route's time still, after its
  transforms became 2-4x faster); 32->64 on 4x4 0.62 / 0.49 / 0.47 against
  ~1.0 / 1.2-1.4 / 1.0; 64->64 on 16x16 at batch 8 1.39 / 1.10 / 0.95 against 2.1 / 4.1 / 1.5.
  The example's epoch: 4.2 -> 2.4 s.
* ``"im2col"`` (``kernels/im2col.py``, NCHW, ``choose``): per image -- or band of output rows
  when one image's buffer exceeds the budget -- gather the windows into
  ``cols [kH*kW*C, positions]`` and make it one GEMM with the HWIO weights reshaped to
  ``[kH*kW*C, O]``. A whole list of units runs in one compiled call on the private
  single-threaded BLAS, so two threads each take half of them (``samediff.kernels.workers``).
* ``"taps"``: one GEMM per kernel tap, of depth C (O for the input adjoint): for tap
  ``(i, j)`` the output positions whose input lies inside the (unpadded) image get
  ``rows @ w[i, j]`` (NHWC) or ``w[i, j].T @ cols`` per image (NCHW). At stride 1 each tap
  multiplies the whole input into one reused buffer and adds its shifted window to the
  output (no gather); at larger strides the tap's rows are gathered first. NHWC, float16,
  and the NCHW input adjoint of more than ``INPUT_GRAD_IM2COL_MAX_C`` channels go this way.

Memory: a forward holds input + output + scratch of at most one output-sized buffer (the
per-tap route's), except that im2col units may hold ``kernels.im2col.IM2COL_FLOOR`` values (1
MiB of float32) whatever the output; no unit exceeds ``IM2COL_BUDGET`` (8 MiB of float32, a
quarter of the L3). Scratch is kept per thread across calls: a fresh buffer per call costs a
page fault per 4 KiB, which was most of a small convolution's time. Padding is never
materialized.

Measured ((8, 64, 56, 56) float32 -> 64, 3x3 pad 1, medians of one process, two cores):
forward Winograd 7.7-9.7 ms; compiled im2col 11.5 (its numpy form -- strided copies and
numpy's multi-threaded GEMMs -- 14.6), weight adjoint 12.6 (15.6), stride 2 3.5 (6.4);
torch 2.13 eager 8.5-12.4 for the forward. LeNet shapes (batch 32; one thread): 1->8 5x5
on 28x28 forward 0.17 ms, 8->16 5x5 on 12x12 0.32, its input adjoint 0.30 (the numpy forms:
0.25-0.29, 0.39-0.47, 0.5-0.8). Split over two threads (``samediff.kernels.workers``: a spinning,
gated hand-off of ~4 us) the same LeNet kernels take 0.58-0.65x their one-thread time (the
2x2 max-pool adjoint 0.60x); at batch 8 0.75-0.94x, at batch 2-4 1-3.5x (the halves are
shorter than the Python around them, so each waits on the other's GIL): hence the
``SPLIT_MIN_*`` floors. With the old queue hand-off (two futex wakes, ~60 us here) W7 gained
nothing from the second core.

What did not pay: the per-tap route split over two threads (25 taps of ~8 numpy calls, each
half waiting for the other's GIL: 0.93 -> 3.96 ms); two halves each calling numpy's
multi-threaded GEMM (they fight over OpenBLAS's one pool: 1.1-2x slower -- hence the private
BLAS); ``parallel=True`` gathers next to BLAS threads that spin (20-100x slowdowns with
torch's OpenMP also loaded); a general Numba max-pool forward with branches and signed
indices (numpy's per-tap ``np.maximum`` is 0.10-0.14 ms at (32, 8, 24, 24), that kernel 0.40;
the branch-free 2x2 one, ``_max_pool2x2_cf``, 0.048).

Compile modes (``kernels.compiling``): in ``"background"`` and ``"interpret"`` modes a route
whose Numba functions are not compiled yet (Winograd, im2col, the 2x2 and general max-pool
kernels) is no candidate: the numpy routes (per-tap GEMMs, per-tap ``np.maximum``) run the op
while they compile on the compile thread, a warm-up on tiny arguments of the same types
(``_warm``). The per-tap convolution sums in another order (not bit for bit the im2col or
Winograd result); the max-pool routes give the same values.

``cf`` says channels first (NCHW: spatial axes 2, 3) or last (NHWC: axes 1, 2); weights are
always HWIO here (``[kH, kW, iC, oC]``; the ops convert OIHW). Geometry of one spatial axis:
output ``o`` reads input ``o * s - before + t * d`` at tap ``t``.
"""
from __future__ import annotations

import math
import threading
from typing import Any

import numba
import numpy as np

from . import compiling, forksafe, frozen, spin, split, workers
from . import im2col as I
from . import im2col_hwc as H
from . import winograd as W
from .geometry import Pair, axis_pads, geometry, out_shape, spatial, tap_range  # noqa: F401
from .jit_options import PYTHON_CALLERS

# Serial on purpose (see the module docstring: thread pools that spin).
_njit = numba.njit(cache=True, nogil=True, **PYTHON_CALLERS)


@_njit
def _beats(v, best):
    """``v`` replaces the running maximum ``best``: larger, or the first NaN."""
    return v > best or (v != v and best == best)


@numba.njit(nogil=True, inline="always")
def _window_rows(plane, oh, h, w, oh_n, ow_n):
    """Flat unsigned offsets of output row ``oh`` of a 2x2 stride-2 pooling: the two input
    rows its windows read, and the output row (``plane`` = image * channels + channel)."""
    u = np.uint64
    return (u((plane * h + 2 * oh) * w), u((plane * h + 2 * oh + 1) * w),
            u((plane * oh_n + oh) * ow_n))


@numba.njit(nogil=True, inline="always")
def _window(xf, top, below, ow):
    """The four inputs of window ``ow`` of the rows at ``top`` and ``below``."""
    j = np.uint64(2) * ow
    return xf[top + j], xf[top + j + np.uint64(1)], xf[below + j], xf[below + j + np.uint64(1)]


@_njit
def _max_pool2x2_cf(x, out, go):
    """The max of each 2x2 window at stride 2 (NCHW, no padding; an odd last row/column is
    no window's), NaN if the window holds one (as ``np.maximum``): selects, not branches,
    so the row loop vectorizes. (32, 8, 24, 24) float32: 0.14 ms by numpy's four per-tap
    ``np.maximum`` calls (four passes over the output), 0.026-0.048 ms here on one thread
    (split in two only from ``SPLIT_MIN_POOL_FORWARD``: it barely gains below)."""
    spin.announce(go)
    n, c_n, h, w = x.shape
    oh_n, ow_n = out.shape[2], out.shape[3]
    xf, of = x.reshape(-1), out.reshape(-1)
    u = np.uint64
    for plane in range(n * c_n):
        for oh in range(oh_n):
            top, below, row = _window_rows(plane, oh, h, w, oh_n, ow_n)
            for ow in range(u(ow_n)):
                a, b, c, d = _window(xf, top, below, ow)
                m1 = b if b > a else a
                m2 = d if d > c else c
                m = m2 if m2 > m1 else m1
                nan = (a != a) | (b != b) | (c != c) | (d != d)
                of[row + ow] = (a + b + c + d) if nan else m


@_njit
def _max_pool2x2_backward_cf(x, g, dx, go):
    """``_max_pool_backward_cf`` for the common 2x2 windows at stride 2 without padding
    (``dx`` zeroed): windows do not overlap, so each of a window's four inputs gets ``g`` or
    0 by a select on the winner's number -- no branch, no scattered add, and flat unsigned
    indices (signed ones make Numba wrap negative indices): 0.37 -> 0.09 ms at (32, 8, 24,
    24) float32, one thread. ``go``: ``workers.both``'s token, announced at once."""
    spin.announce(go)
    n, c_n, h, w = x.shape
    oh_n, ow_n = g.shape[2], g.shape[3]
    xf, gf, df = x.reshape(-1), g.reshape(-1), dx.reshape(-1)
    u = np.uint64
    zero = np.zeros(1, dx.dtype)[0]
    for plane in range(n * c_n):
        for oh in range(oh_n):
            top, below, row = _window_rows(plane, oh, h, w, oh_n, ow_n)
            for ow in range(u(ow_n)):
                a, b, c, d = _window(xf, top, below, ow)
                # the compares as selects (branches on real data mispredict); NaN -- the
                # first one wins -- is rare, so its branch is predicted
                take = b > a
                best, sel = (b if take else a), (1 if take else 0)
                take = c > best
                best, sel = (c if take else best), (2 if take else sel)
                sel = 3 if d > best else sel
                if (a != a) | (b != b) | (c != c) | (d != d):
                    sel = 0 if a != a else (1 if b != b else (2 if c != c else 3))
                v = gf[row + ow]
                j = u(2) * ow
                df[top + j] = v if sel == 0 else zero
                df[top + j + u(1)] = v if sel == 1 else zero
                df[below + j] = v if sel == 2 else zero
                df[below + j + u(1)] = v if sel == 3 else zero


@_njit
def _max_pool_backward_cf(x, g, dx, kh, kw, sh, sw, ph, pw, dh, dw, go):
    """``dx`` (zeroed) += each window's ``g`` at the tap that wins it (the first in row-major
    order holding the maximum; NaN wins, as in ``np.maximum``): the winner search and the
    routing in one pass, no index array (one plane per task: no races)."""
    spin.announce(go)
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



#: Multiply-adds below which a convolution stays on one thread (module docstring: the LeNet
#: convolutions at batch 8, ~0.9-1.6 M, gain 0.75-0.94x split; at batch 4, ~0.8 M, 1.07x).
SPLIT_MIN_MACS = 1 << 20


#: Pooling: window reads (outputs x taps) below which a pooling op stays on one thread (the
#: 2x2 adjoint of (n, 8, 24, 24): 0.60x split at n = 32 (147 Ki reads), 0.82x at 8 (37 Ki),
#: 1.0x at 4).
SPLIT_MIN_POOL = 1 << 15
#: The 2x2 max-pool forward reads once and writes a quarter: from 256 Ki reads (at (32, 8,
#: 24, 24), 147 Ki: 26 us on one thread, 24.5 split; at (32, 16, 8, 8): 13 vs 19)
SPLIT_MIN_POOL_FORWARD = 1 << 18


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
        n = math.prod(shape)
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


_NUMBA_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


INPUT_GRAD_IM2COL_MAX_C = 8  # input channels up to which the input adjoint goes im2col


def _warm(key: tuple) -> None:
    """Compile (or load) the Numba functions of route ``key`` = ``(route, dtype)`` by running
    its ops on tiny NCHW arguments (``compiling.ready``: on the compile thread)."""
    route, dt = key
    if route in ("pool2x2", "pool"):
        one, two, pads = (1, 1), (2, 2), (0, 0)
        x = np.ones((1, 1, 4, 4), dt)
        k = two if route == "pool2x2" else (3, 3)
        s = two if route == "pool2x2" else one
        max_pool_grad(x, max_pool(x, k, s, pads, one, True), k, s, pads, one, True)
        return
    _warm_conv(key)
    _warm_input_grad(key)
    if route != "winograd":  # (no Winograd weight adjoint)
        _warm_weight_grad(key)


def _warm_arrays(key: tuple) -> tuple:
    """(x, w, padding, g) on which a convolution takes route ``key[0]``: tiny, NCHW, HWIO."""
    route, dt = key
    if route == "winograd":
        x, w, pad = np.ones((1, 16, 4, 4), dt), np.ones((3, 3, 16, 16), dt), "same"
    elif route == "hwc":
        x, w = np.ones((2, H.MIN_CHANNELS, 4, 4), dt), np.ones((3, 3, H.MIN_CHANNELS, 2), dt)
        pad = "same"
    else:
        x, w, pad = np.ones((1, 1, 4, 4), dt), np.ones((3, 3, 1, 2), dt), (0, 0)
    geo = geometry(spatial(x.shape, True), w.shape[:2], (1, 1), pad, (1, 1))
    return x, w, pad, np.ones(out_shape(x.shape, geo, w.shape[3], True), dt)


def _warm_conv(key: tuple) -> None:
    """``_warm``'s forward convolution alone (a compile helper may take the ops at once)."""
    x, w, pad, _ = _warm_arrays(key)
    conv(x, w, (1, 1), pad, (1, 1), True)
    if key[0] != "winograd":
        conv(x, w, (1, 1), pad, (1, 1), True, bias=np.zeros(w.shape[3], w.dtype), relu=True)


def _warm_input_grad(key: tuple) -> None:
    """``_warm``'s input adjoint alone."""
    x, w, pad, g = _warm_arrays(key)
    conv_input_grad(g, w, x.shape, (1, 1), pad, (1, 1), True)


def _warm_weight_grad(key: tuple) -> None:
    """``_warm``'s weight adjoint alone."""
    x, w, pad, g = _warm_arrays(key)
    conv_weight_grad(x, g, w.shape[:2], (1, 1), pad, (1, 1), True)


def pool_warmups(x_shape: tuple, kernel: tuple, stride: tuple, padding: Any, dilation: tuple,
                 cf: bool, dtype: Any, grad: bool = False) -> tuple:
    """The warm-up of the compiled route a max pooling (``grad``: its adjoint) of these static
    shapes takes (``OpDef.warm``), or none: the 2x2 windows' kernels, or the adjoint's general
    one."""
    if not cf or np.dtype(dtype) not in _NUMBA_DTYPES or min(x_shape) < 0:
        return ()
    geo = geometry(spatial(x_shape, cf), kernel, stride, padding, dilation)
    route = "pool2x2" if _two_by_two(kernel, stride, dilation, geo, x_shape[2:]) else "pool"
    if route == "pool" and not grad:
        return ()
    return ((__name__, "_warm" if grad else "_warm_pool_forward",
             (route, np.dtype(dtype).name)),)


def _warm_pool_forward(key: tuple) -> None:
    """``_warm``'s 2x2 max pooling forward alone."""
    x = np.ones((1, 1, 4, 4), key[1])
    max_pool(x, (2, 2), (2, 2), (0, 0), (1, 1), True)


def _ready(route: str, dtype) -> bool:
    """Whether ``route``'s Numba functions may run now (``compiling.ready``)."""
    return compiling.ready((route, np.dtype(dtype)), _warm)


def choose(cf: bool, op: str = "conv", channels: int = 0, dtype=np.float32) -> str:
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
    if not cf or np.dtype(dtype) not in _NUMBA_DTYPES:
        return "taps"
    if op == "input_grad" and channels > INPUT_GRAD_IM2COL_MAX_C:
        return "taps"
    return "im2col"


def _im2col_plan(x_shape, w_shape, geo, cf, op, dtype):
    """None (another route), or the im2col route's units (``kernels.im2col.units``) -- in two
    halves, one per thread, when compiled and big enough -- and the depth ``kk``."""
    if choose(cf, op, w_shape[2], dtype) != "im2col":
        return None
    n, oh, ow, o = x_shape[0], geo[0][2], geo[1][2], w_shape[3]
    kk = w_shape[0] * w_shape[1] * w_shape[2]
    budget = I.budget(n, oh, ow, o, kk)
    if n == 1 and oh > 1 and op != "input_grad" and oh * ow * kk * o >= SPLIT_MIN_MACS:
        # one image (inference at batch 1): two bands of output rows, one per thread. The
        # forward's bands write disjoint rows and the weight adjoint's sum their own partial
        # products; the input adjoint's would scatter-add into shared input rows. Decided by
        # size alone, so one thread computes the same bits (ResNet-50 at batch 1: 1.2x)
        budget = min(budget, -(-oh // 2) * ow * kk)
    todo = I.units(range(n), oh, ow, kk, budget)
    # Python-run drivers (no private BLAS) would only trade the GIL: one thread then
    return _unit_halves(todo, n * oh * ow * kk * o if I.compiled() else 0), kk


def _hwc_plan(x_shape, w_shape, geo, cf, dtype, op="conv"):
    """None (another route), or the channels-last route's chunks of images
    (``kernels.im2col_hwc``) in one or two halves, and the scratch sizes of its largest chunk
    ``(xh, cols, tmp)``: NCHW, float32/64, the private BLAS there, a batch, a kernel larger
    than 1x1 (a 1x1 one gathers nothing worth reordering), at least ``MIN_CHANNELS`` input
    channels, outputs at most ``HWC_MAX_WIDTH`` wide (``HWC_MAX_WIDTH_INPUT_GRAD`` for the
    input adjoint) and one image's ``cols`` within the im2col budget."""
    n, c, o = x_shape[0], w_shape[2], w_shape[3]
    oh, ow = geo[0][2], geo[1][2]
    widest = HWC_MAX_WIDTH_INPUT_GRAD if op == "input_grad" else HWC_MAX_WIDTH
    if not (cf and n > 1 and c >= H.MIN_CHANNELS and ow <= widest and w_shape[0] * w_shape[1] > 1
            and np.dtype(dtype) in _NUMBA_DTYPES and I.compiled()):
        return None
    kk, positions = w_shape[0] * w_shape[1] * c, oh * ow
    budget = I.budget(n, oh, ow, o, kk)
    if positions * kk > budget:
        return None
    macs = n * positions * kk * o
    todo = H.chunks(n, positions * kk, budget, macs >= SPLIT_MIN_MACS)
    m = int((todo[:, 1] - todo[:, 0]).max())
    sizes = (m * x_shape[2] * x_shape[3] * c, m * positions * kk, o * m * positions)
    return _unit_halves(todo, macs), sizes


def _hwc(driver, plan, first, second, result, tail):
    """``kernels.im2col_hwc`` ``driver(first, second, result, chunks, *scratch, *tail)``
    over the plan's parts at once (``_on_parts``: ``result`` a shape for the weight
    adjoint)."""
    parts, (xh_n, cols_n, tmp_n) = plan

    def call(part, into, scratch, go):
        H.run(driver, first, second, into, part, scratch.view("hwc_x", (xh_n,)),
              scratch.view("cols", (cols_n,)), scratch.view("hwc_tmp", (tmp_n,)), *tail, go)
    return _on_parts(parts, first.dtype, result, call)


#: output widths up to which an NCHW convolution of >= ``im2col_hwc.MIN_CHANNELS`` input
#: channels goes channels-last (its per-row copies are shorter than a vector or two there).
#: The input adjoint gains up to twice that: its other route is the per-tap one (interleaved,
#: batch 32, 3x3: 0.37-0.59x its time at 32x32 with 16-64 channels; forward and weight adjoint
#: there 0.7-2x, so they stay on the per-image gather). 3x3 stride-1 ones from 16 wide go by
#: Winograd first (tried before this route).
HWC_MAX_WIDTH = 16
HWC_MAX_WIDTH_INPUT_GRAD = 32


def _unit_halves(todo: np.ndarray, macs: int) -> list[np.ndarray]:
    """The units of a compiled convolution in two halves, one per thread, when a second
    thread pays for its hand-off (``SPLIT_MIN_MACS``); else all of them in one."""
    return [todo[p.start:p.stop] for p in workers.halves(len(todo), macs, SPLIT_MIN_MACS)]


def _geo_args(geo, kernel, stride, dilation):
    return (kernel[0], kernel[1], stride[0], stride[1], geo[0][0], geo[1][0],
            dilation[0], dilation[1])


def _im2col(driver, plan, first, second, result, ow, tail):
    """``kernels.im2col`` ``driver(first, second, result, units, cols, *tail)`` over the plan's
    parts at once (``_on_parts``; ``result`` None: the weight adjoint's ``[kk, O]``)."""
    parts, kk = plan

    def call(part, into, scratch, go):
        I.run(driver, first, second, into, part,
              scratch.view("cols", (I.largest(part, ow, kk),)), *tail, go)
    return _on_parts(parts, first.dtype, (kk, second.shape[1]) if result is None else result,
                     call)


def _on_parts(parts, dtype, result, call):
    """``call(part, into, scratch, go)`` over the parts at once (one per thread), each with its
    thread's kept scratch. ``result`` is an array the parts share (disjoint writes), or the
    shape of a weight adjoint: each part then fills one of its own, and their sum is
    returned."""
    own = isinstance(result, tuple)

    def work(part, go):
        into = np.empty(result, dtype) if own else result
        call(part, into, _kept_scratch(dtype), go)
        return into
    got = split.on_halves(parts, work)
    return sum(got[1:], got[0]) if own else result


def _winograd(x, w, out, before, bias, relu=False):
    """``out`` = ``x`` (*) ``w`` (3x3, stride 1, NCHW) by ``kernels.winograd``: bands of tile
    rows, split over two threads, each band's transforms and GEMMs in one compiled call. The
    bands' scratch (two threads' worth) stays within one output-sized buffer."""
    n, c, o = x.shape[0], w.shape[2], w.shape[3]
    oh, ow = out.shape[2], out.shape[3]
    todo = W.units(n, oh, ow, c, o, min(I.IM2COL_BUDGET, out.size // 2))
    u = frozen.derived(w, "winograd", W.filter_transform)
    parts = _unit_halves(todo, out.size * c * 9)

    def work(part, go):
        nv, nm = W.scratch_size(part, ow, c, o)
        buf = _kept_scratch(out.dtype)
        W.run(x, u, out, before[0], before[1], part, buf.view("wino_v", (nv,)),
              buf.view("wino_m", (nm,)), bias, relu, go)
    split.on_halves(parts, work)
    return out


def _o_major(w: np.ndarray) -> np.ndarray:
    """HWIO weights as ``[O, kH*kW*C]``: a transposing copy (none for 1x1 OIHW weights seen as
    HWIO), made once for frozen weights (``kernels.frozen``)."""
    return frozen.derived(w, "o_major", lambda w: np.ascontiguousarray(
        w.transpose(3, 0, 1, 2)).reshape(w.shape[3], -1))


def _routes(op: str, xshape: tuple, wshape: tuple, geo: Any, stride: tuple, dilation: tuple,
            cf: bool, dtype: Any, kept: bool = False) -> list:
    """The compiled routes that apply to convolution ``op`` (``"conv"``, ``"input_grad"``,
    ``"weight_grad"``) at these shapes, best first, each as (route, its plan or None):
    ``"winograd"``, ``"hwc"``, ``"im2col"``. ``xshape`` is x's (dx's for the input adjoint),
    ``wshape`` HWIO; ``kept``: the weights are frozen (``W.applies``). The first whose kernels
    are ready runs (``_ready``); none: numpy's per-tap GEMMs."""
    out: list = []
    c, o = wshape[2], wshape[3]
    if cf and op == "conv":
        n, _, oh, ow = out_shape(xshape, geo, o, cf)
        if W.applies(wshape[:2], stride, dilation, c, o, dtype, n * oh * ow, ow, n, kept):
            out.append(("winograd", None))
    elif cf and op == "input_grad":
        if W.applies(wshape[:2], stride, dilation, o, c, dtype,
                     xshape[0] * xshape[2] * xshape[3], xshape[3]):
            out.append(("winograd", None))
    hwc = _hwc_plan(xshape, wshape, geo, cf, dtype, "input_grad" if op == "input_grad" else "conv")
    if hwc is not None:
        out.append(("hwc", hwc))
    plan = _im2col_plan(xshape, wshape, geo, cf, op, dtype)
    if plan is not None:
        out.append(("im2col", plan))
    return out


def conv_warmups(op: str, xshape: tuple, wshape: tuple, stride: tuple, padding: Any,
                 dilation: tuple, cf: bool, dtype: Any) -> tuple:
    """The warm-up (module, function, key) of the route a convolution ``op`` of these static
    shapes takes in ``"sync"`` mode (``_routes``' first; ``OpDef.warm``), or none.

    >>> conv_warmups("conv", (8, 1, 28, 28), (5, 5, 1, 6), (1, 1), (0, 0), (1, 1), True,
    ...              np.float32)[0][1:]
    ('_warm_conv', ('im2col', 'float32'))
    """
    if np.dtype(dtype) not in _NUMBA_DTYPES or min(*xshape, *wshape) < 0:
        return ()
    geo = geometry(spatial(xshape, cf), wshape[:2], stride, padding, dilation)
    routes = _routes(op, xshape, wshape, geo, stride, dilation, cf, dtype)
    return ((__name__, f"_warm_{op}", (routes[0][0], np.dtype(dtype).name)),) if routes else ()


@forksafe.guarded  # GEMMs and the helper: a fork waits for them (samediff/kernels/forksafe.py)
def conv(x, w, stride, padding, dilation, cf, bias=None, relu=False):
    """``x`` (*) ``w`` [kH, kW, C, O] (+ ``bias`` [O] along the channels, then ``max(., 0)``
    if ``relu``), by the route ``choose`` picks; the compiled routes write the bias and the
    relu with the product, while it is in cache."""
    geo = geometry(spatial(x.shape, cf), w.shape[:2], stride, padding, dilation)
    dtype = np.result_type(x, w)
    x, w = x.astype(dtype, copy=False), w.astype(dtype, copy=False)
    if x.shape[1 if cf else 3] != w.shape[2]:
        raise ValueError(f"x has {x.shape[1 if cf else 3]} channels, w expects {w.shape[2]}")
    out = np.empty(out_shape(x.shape, geo, w.shape[3], cf), dtype)
    b = np.zeros(0, dtype) if bias is None else np.ascontiguousarray(bias, dtype).reshape(-1)
    for route, plan in _routes("conv", x.shape, w.shape, geo, stride, dilation, cf, dtype,
                               cf and frozen.is_frozen(w)):
        if not _ready(route, dtype):
            continue
        if route == "winograd":
            return _winograd(np.ascontiguousarray(x), w, out, (geo[0][0], geo[1][0]), b, relu)
        args = (b, relu, *_geo_args(geo, w.shape[:2], stride, dilation))
        if route == "hwc":
            return _hwc(H.forward, plan, np.ascontiguousarray(x), _o_major(w), out, args)
        return _im2col(I.forward, plan, np.ascontiguousarray(x), _o_major(w), out, geo[1][2],
                       args)
    taps = _taps(spatial(x.shape, cf), geo, w.shape[:2], stride, dilation, cf)
    out = _gemm_taps(x, lambda i, j: w[i, j], out, taps, cf, tuple(stride) == (1, 1))
    if b.size:
        out += b.reshape(-1, 1, 1) if cf else b
    if relu:
        np.maximum(out, 0, out=out)
    return out


@forksafe.guarded
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
    for route, plan in _routes("input_grad", xshape, w.shape, geo, stride, dilation, cf, dtype):
        if not _ready(route, dtype):
            continue
        if route == "winograd":
            # the full correlation of g with the flipped kernel, channels swapped
            flipped = np.ascontiguousarray(w[::-1, ::-1].transpose(0, 1, 3, 2))
            return _winograd(np.ascontiguousarray(g), flipped, np.empty(xshape, dtype),
                             (2 - geo[0][0], 2 - geo[1][0]), np.zeros(0, dtype))
        w2 = np.ascontiguousarray(w.reshape(-1, w.shape[3]))
        if route == "hwc":
            return _hwc(H.input_grad, plan, np.ascontiguousarray(g), w2,
                        np.empty(xshape, dtype), _geo_args(geo, w.shape[:2], stride, dilation))
        return _im2col(I.input_grad, plan, np.ascontiguousarray(g), w2, np.zeros(xshape, dtype),
                       geo[1][2], _geo_args(geo, w.shape[:2], stride, dilation))
    taps = [(i, j, xi, gi) for i, j, gi, xi in _taps(hw, geo, w.shape[:2], stride, dilation, cf)]
    dx = np.empty(xshape, dtype)
    return _gemm_taps(g, lambda i, j: w[i, j].T, dx, taps, cf, tuple(stride) == (1, 1))


@forksafe.guarded
def conv_weight_grad(x, g, kernel, stride, padding, dilation, cf):
    """Adjoint of ``conv`` in ``w``: -> dw [kH, kW, C, O]."""
    hw = spatial(x.shape, cf)
    geo = geometry(hw, kernel, stride, padding, dilation)
    dtype = np.result_type(x, g)
    c, o = (x.shape[1], g.shape[1]) if cf else (x.shape[3], g.shape[3])
    for route, plan in _routes("weight_grad", x.shape, (kernel[0], kernel[1], c, o), geo, stride,
                               dilation, cf, dtype):
        if not _ready(route, dtype):
            continue
        x, g = x.astype(dtype, copy=False), g.astype(dtype, copy=False)
        if route == "hwc":
            dw2 = _hwc(H.weight_grad, plan, np.ascontiguousarray(x), np.ascontiguousarray(g),
                       (kernel[0] * kernel[1] * c, o), _geo_args(geo, kernel, stride, dilation))
        else:
            dw2 = _im2col(I.weight_grad, plan, np.ascontiguousarray(x), np.ascontiguousarray(g),
                          None, geo[1][2], _geo_args(geo, kernel, stride, dilation))
        return dw2.reshape(kernel[0], kernel[1], c, o)
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

def _pool_setup(shape, kernel, stride, padding, dilation, cf, taps=True):
    """(geometry, output shape, the taps -- or None when not ``taps``: the compiled kernels
    need none, and listing them is most of a small pooling op's Python time)."""
    hw = spatial(shape, cf)
    geo = geometry(hw, kernel, stride, padding, dilation)
    ch = shape[1] if cf else shape[3]
    return geo, out_shape(shape, geo, ch, cf), (
        _taps(hw, geo, kernel, stride, dilation, cf) if taps else None)



def _pool_halves(out, kernel, work, least: int | None = None) -> None:
    """``work(images, go)`` over two halves of the batch at once when it reads at least
    ``least`` (default ``SPLIT_MIN_POOL``) window values."""
    least = SPLIT_MIN_POOL if least is None else least
    split.on_halves(workers.halves(out.shape[0], out.size * kernel[0] * kernel[1], least),
                    work)


def _two_by_two(kernel, stride, dilation, geo, hw) -> bool:
    """2x2 windows at stride 2, no padding on either side: they tile the image (but an odd
    last row or column) without overlap, the case with branch-free compiled kernels. (An odd
    size under ``"same"`` pads one after: its last window would read past the image.)"""
    return (tuple(kernel), tuple(stride), tuple(dilation)) == ((2, 2), (2, 2), (1, 1)) and all(
        geo[a][0] == 0 and geo[a][2] == hw[a] // 2 for a in range(2))


def max_pool(x, kernel, stride, padding, dilation, cf):
    """Max over the taps that lie inside the image (padding never wins). NCHW 2x2 windows at
    stride 2 (float32/64): one compiled pass, the batch in two halves. Otherwise numpy's
    per-tap ``np.maximum``, on one thread: its calls are short, and two halves of them ran
    slower than one (0.12 vs 0.10 ms at (32, 8, 24, 24), the GIL between calls)."""
    geo, shape, _ = _pool_setup(x.shape, kernel, stride, padding, dilation, cf, taps=False)
    if cf and x.dtype in _NUMBA_DTYPES and _two_by_two(kernel, stride, dilation, geo,
                                                       x.shape[2:]) and _ready("pool2x2", x.dtype):
        x, out = np.ascontiguousarray(x), np.empty(shape, x.dtype)

        def work(p: range, go) -> None:
            _max_pool2x2_cf(x[p.start:p.stop], out[p.start:p.stop], go)
        _pool_halves(out, kernel, work, SPLIT_MIN_POOL_FORWARD)
        return out
    taps = _taps(spatial(x.shape, cf), geo, kernel, stride, dilation, cf)
    out = np.empty(shape, x.dtype)
    out.fill(-np.inf)
    for _, _, oi, ii in taps:
        region = out[oi]
        np.maximum(region, x[ii], out=region)
    return out


def max_pool_grad(x, g, kernel, stride, padding, dilation, cf):
    """``g`` routed to the input that won each window (the first tap in row-major order among
    equal maxima, like PyTorch)."""
    geo = None
    if cf and x.dtype in _NUMBA_DTYPES:
        geo, _, _ = _pool_setup(x.shape, kernel, stride, padding, dilation, True, taps=False)
        two_by_two = _two_by_two(kernel, stride, dilation, geo, x.shape[2:])
    if geo is not None and _ready("pool2x2" if two_by_two else "pool", x.dtype):
        dtype = np.result_type(x, g)
        if two_by_two:  # writes every input its windows cover: zero only the rest (an odd
            dx = np.empty(x.shape, dtype)  # last row/column) -- a pass less over dx
            dx[:, :, 2 * g.shape[2]:] = 0
            dx[:, :, :, 2 * g.shape[3]:] = 0
        else:
            dx = np.zeros(x.shape, dtype)
        x, g = np.ascontiguousarray(x), np.ascontiguousarray(g, dtype)

        def work(p: range, go) -> None:  # nogil kernels: the halves run at once
            a, b = p.start, p.stop
            if two_by_two:
                _max_pool2x2_backward_cf(x[a:b], g[a:b], dx[a:b], go)
            else:
                _max_pool_backward_cf(x[a:b], g[a:b], dx[a:b], kernel[0], kernel[1], stride[0],
                                      stride[1], geo[0][0], geo[1][0], dilation[0], dilation[1],
                                      go)
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
