"""Float matmuls: numpy's ``matmul`` or the private single-threaded BLAS
(``samediff.kernels.blas``), split by rows or columns over the helper thread
(``samediff.kernels.workers``): stacks of matrices by a rule checked on two machine states,
2-D products by a short measurement per shape class on this machine
(``samediff.kernels.routes``).

Why a private BLAS route: numpy's OpenBLAS keeps its own worker threads, which spin after every
call they share, for a long time. Next to our helper (convolutions, pooling) they fought over
the second core: the digits CNN example (``examples/cnn_digits.py``) trained at 5.0 s per epoch
with both pools against 2.1 with numpy's BLAS on one thread. So (``matmul2d``, ``batched``):

* below ``MIN_MNK`` multiply-adds (per product) numpy's ``matmul`` runs the product: OpenBLAS
  stays on one thread there itself (``MIN_MNK`` is its GEMM_MULTITHREAD_THRESHOLD), and its
  call costs less than ours; 1-D, integer, complex and mixed-dtype products always do;
* batched float products (stacks of matrices, as attention's) from ``MIN_MNK`` multiply-adds
  per product run on the private BLAS (``batched``: one GEMM per product, the batch split over
  the helper), unmeasured: numpy would wake its BLAS threads once per product, and a product's
  own timing cannot see that cost -- its pool keeps spinning after the call and takes the
  helper's core from the next split kernel. On W9's training step (a transformer block) this
  made the step 0.70x (quiet) and 0.65x (one core busy) of what it took with numpy's batched
  products;
* a 2-D product from ``PRIVATE_MIN_MNK`` runs on the private split unmeasured (below);
* a 2-D product from ``MIN_MNK`` on takes the route measured fastest for its shape class
  (dtype, power-of-two buckets of m, n, k, split or not) on this machine: numpy's, the private
  BLAS's halves at once over the helper (``private``), or -- for a product that splits -- the
  same halves one after the other on the calling thread (``in_turn``: the same bits as
  ``private``). ``routes.Chooser``: <= 20 ms once per class, ties to ``private``, numpy timed
  last; cached in memory and on disk unless the machine was busy while measuring (a busy
  moment once chose numpy's route at 11 ms against the private one's 175 ms for W9's
  1024x256x256 and kept it). ``ND4PY_BLAS=numpy|private|in_turn`` forces a route (``numpy``
  also never loads the private BLAS). numpy's and the private routes are not bit for bit alike
  (different GEMM kernels): a run is reproducible once its classes are decided. Why numpy
  stays a candidate for 2-D products: on a quiet machine its two-threaded OpenBLAS beat our
  split at W3's (128, 784) x (784, 256) (0.36 vs 0.40 ms; one thread 0.44 ms), and W3's
  ``fit`` took 1.31 ms per iteration with numpy's route forced against 1.82 ms with the private
  one (medians of 4 alternating processes). What it costs under load: W9's step, with numpy chosen for
  4 of its 5 2-D classes, ran 1.3x slower with a core busy than with every product private
  (the same when quiet) -- the measurement cannot see the spinning pool's after-effect;
* the private route is a candidate only when its kernel is compiled: in ``"background"`` and
  ``"interpret"`` compile modes (``kernels.compiling``) numpy takes the product while
  ``_slices`` compiles on the compile thread.

>>> import numpy as np
>>> a = np.arange(6.0).reshape(2, 3)
>>> matmul2d(a, a.T) is None            # small: numpy's matmul
True
>>> b = np.ones((256, 512)); c = np.ones((512, 64))
>>> bool((matmul(b, c) == 512).all())
True
"""
from __future__ import annotations

import time
from typing import Any

import numba
import numpy as np

from . import blas, compiling, routes, spin, split, variants, workers
from .routes import Decision

#: multiply-adds (m * n * k) from which the private BLAS takes the product: numpy's OpenBLAS
#: goes multi-threaded above 4 * 65536 (its GEMM_MULTITHREAD_THRESHOLD)
MIN_MNK = 1 << 18
#: multiply-adds from which the rows go to two threads (as ``kernels.cnn.SPLIT_MIN_MACS``)
SPLIT_MIN_MNK = 1 << 20
#: multiply-adds from which a 2-D product takes the private split unmeasured, as batched ones
#: do: each half is then >= 0.15 ms of GEMM, so the split parallelizes as well as numpy's
#: threads (4096x256x256: 3.2 vs 3.2 ms alone), and numpy's pool, which spins after
#: each call, would take the helper's core from the plan's next split kernels -- a cost the
#: product's own timing cannot see. The ONNX encoder at batch 32 (``bench_onnx``): 93-149 ms
#: with every product private, 150 with numpy's, 188-194 with the measured mix. (2^25 made the
#: ONNX encoder at batch 1 1.18x slower: its 128x256x1024 products run faster on numpy's
#: threads, and nothing long runs split after them. A caller whose own split kernels follow
#: passes ``keep_numpy_asleep`` instead: the LSTM layer, whose time loops ran 1.7-1.9x slower
#: next to numpy's spinning pool.)
PRIVATE_MIN_MNK = 1 << 26

_REALS = (np.dtype(np.float32), np.dtype(np.float64))


def _blas_operand(x: np.ndarray) -> np.ndarray:
    """``x`` if one axis has unit stride and the other steps over whole rows, in whole
    elements (a row-major matrix, a slice of one, or a transposed view), else a C-contiguous
    copy (negative, broadcast, byte-offset -- a field of a structured array -- or otherwise
    strided). Of a stack (``x.ndim > 2``) the last two axes are checked: a slice is a GEMM
    operand, the stack's own strides only pick slices."""
    size, (s0, s1), (r, c) = x.itemsize, x.strides[-2:], x.shape[-2:]
    whole = x.flags.aligned and s0 % size == 0 and s1 % size == 0  # BLAS counts elements
    if whole and ((s1 == size and s0 >= c * size) or (s0 == size and s1 >= r * size)):
        return x
    return np.ascontiguousarray(x)


def _layout(x: np.ndarray) -> str:
    """Numba's array layout of ``x`` (routes are decided per layout: a transposed operand
    runs another BLAS kernel)."""
    return "C" if x.flags.c_contiguous else "F" if x.flags.f_contiguous else "A"


def _warm(key: tuple) -> None:
    """Compile (or load) ``_slices``, the kernel of every private product, for the operand
    dtype of ``key`` (``kernels.compiling.ready`` runs it on the compile thread)."""
    if blas.available():
        _slices[key[1]]


#: the routes of a 2-D product from ``MIN_MNK`` on: ``numpy``, ``private`` (the halves at
#: once, over the helper) and, for a product that splits, ``in_turn`` (the same halves one after
#: the other on the calling thread: the same bits as ``private``). Ties (within
#: ``routes.MARGIN``) go to ``private``, and numpy's is timed after the others (``spins``): its
#: OpenBLAS pool spins after each call and takes the helper's core from the next split kernel
CHOOSER = routes.Chooser("matmul", ("numpy", "private", "in_turn"), env="ND4PY_BLAS",
                         prefer="private", spins=("numpy",))


def _matrix(x: np.ndarray) -> tuple[np.ndarray, tuple]:
    """(a flat view of the memory of ``x`` -- a BLAS operand, see ``_blas_operand`` --, its
    geometry (rows, columns, row stride, column stride, in elements)): a 2-D product's
    operand in ``_slices``' form, so that one kernel serves stacks and 2-D products alike. A
    contiguous or transposed operand's flat view is a reshape (~0.15 us; ``as_strided``,
    for the rest, ~3 us)."""
    size = x.itemsize
    geometry = (x.shape[0], x.shape[1], x.strides[0] // size, x.strides[1] // size)
    if x.flags.c_contiguous:
        return x.reshape(-1), geometry
    if x.flags.f_contiguous:
        return x.T.reshape(-1), geometry
    span = 1 + (x.shape[0] - 1) * geometry[2] + (x.shape[1] - 1) * geometry[3]
    return np.lib.stride_tricks.as_strided(x, (span,), (size,), writeable=False), geometry


_AT_START = np.zeros(1, np.int64)  # the offset of a whole operand
_AT_START.flags.writeable = False


def _private(a: np.ndarray, b: np.ndarray, by_rows: bool, parts: list,
             in_turn: bool = False, bias: np.ndarray | None = None) -> np.ndarray:
    """``a @ b`` on the private BLAS, its halves (rows of ``a``, or columns of ``b``) at once
    over the helper (or ``in_turn`` here): one GEMM per half (``_slices``, one product each),
    so the bits do not depend on which thread ran a half."""
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    (fa, ga), (fb, gb) = _matrix(a), _matrix(b)
    run = _slices[a.dtype]

    def half(p: range, go: Any) -> None:
        lo, hi = p.start, p.stop
        if by_rows:  # rows [lo, hi) of a and of out
            run(fa, fb, np.array([lo * ga[2]], np.int64), _AT_START, (hi - lo,) + ga[1:], gb,
                out[None, lo:hi], 0, 1, go)
        else:  # columns [lo, hi) of b and of out
            run(fa, fb, _AT_START, np.array([lo * gb[3]], np.int64), ga,
                (gb[0], hi - lo) + gb[2:], out[None, :, lo:hi], 0, 1, go)
        if bias is not None:  # on the thread that wrote these rows (columns), just after
            _add_bias(out, bias, by_rows, p)

    if in_turn:  # the same halves, one after the other here: the same bits as split
        for p in parts:
            half(p, workers.NO_GO)
    else:
        split.on_halves(parts, half)
    return out


def _add_bias(out: np.ndarray, bias: np.ndarray, by_rows: bool, p: range) -> None:
    """``out += bias`` over the rows (``by_rows``) or columns ``p`` of ``out``: numpy's add,
    which lets go of the GIL, so the two halves add at once (a [1024, 1024] float32 bias pass
    took 0.3 ms on one thread)."""
    if by_rows:
        out[p.start:p.stop] += bias
    else:
        out[:, p.start:p.stop] += bias[..., p.start:p.stop]


def is_bias_row(bias: np.ndarray, n: int) -> bool:
    """Is ``bias`` a row of ``n`` biases, of shape ``[n]`` or ``[1, n]`` (what ``matmul``'s
    ``bias`` takes)?"""
    return bias.ndim in (1, 2) and bias.size == bias.shape[-1] == n


def _plus(out: np.ndarray | None, bias: np.ndarray | None) -> np.ndarray | None:
    """``out`` with ``bias`` added in place (``out`` is a fresh product: ours to reuse)."""
    if out is not None and bias is not None:
        out += bias
    return out


def _halves(m: int, n: int, k: int) -> tuple[bool, list]:
    """(split by rows, the halves) of an ``m x k @ k x n`` product on the private split."""
    # each half packs the whole of the operand it does not split: split the bigger one
    by_rows = m * k >= k * n
    return by_rows, workers.halves(m if by_rows else n, m * n * k, SPLIT_MIN_MNK)


def _shape_class(dtype: np.dtype, m: int, n: int, k: int) -> tuple[str, bool, list]:
    """(the route class, split by rows, the halves) of an ``m x k @ k x n`` product."""
    by_rows, parts = _halves(m, n, k)
    cls = routes.size_class(dtype, m=m, n=n, k=k) + (" split" if len(parts) == 2 else "")
    return cls, by_rows, parts


def matmul2d(a: np.ndarray, b: np.ndarray, keep_numpy_asleep: bool = False,
             bias: np.ndarray | None = None) -> np.ndarray | None:
    """``a @ b`` for 2-D float32/float64 operands of one dtype, ``MIN_MNK`` multiply-adds or
    more, on the route chosen for its shape class (see the module docstring): on the private
    BLAS (from ``SPLIT_MIN_MNK`` in two halves, of the rows of ``a`` or the columns of ``b``,
    whichever is bigger: each half packs all of the other), or numpy's result when the
    measurement that chose numpy has just computed it; None when numpy should take it (other
    shapes, dtypes, sizes, the chosen route, the private kernel still compiling, or no private
    BLAS here).

    ``keep_numpy_asleep``: the caller runs long split kernels right after (the LSTM's time
    loops), which numpy's pool, spinning for ~0.13 s after a product, would slow down: the
    private split then takes the product unmeasured (unless ``ND4PY_BLAS`` forces a route).

    ``bias``: a row of biases of ``a @ b``'s dtype, of shape ``[n]`` or ``[1, n]`` (``matmul``
    checks), added to every result returned (each half's rows just after its GEMM, on its
    own thread); None: nothing added."""
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.dtype not in _REALS:
        return None
    (m, k), n = a.shape, b.shape[1]
    if b.shape[0] != k or m * n * k < MIN_MNK:
        return None
    forced = CHOOSER.forced()
    if (forced is not None and forced.route == "numpy") or not blas.available():
        return _woke_numpy()
    pa, pb = _blas_operand(a), _blas_operand(b)
    exact = (a.dtype, m, n, k, _layout(pa), _layout(pb))
    if keep_numpy_asleep and forced is None and compiling.ready(("matmul", a.dtype), _warm):
        return _private(pa, pb, *_halves(m, n, k), bias=bias)
    route = None if forced is not None else _ROUTE.get(exact)
    if route is None:
        route = _decide(a, b, pa, pb, exact, forced)
        if route is None:
            return _woke_numpy()  # numpy's, while its kernel compiles
        if not isinstance(route, str):
            return _plus(route, bias)  # a measured result
    if route == "numpy":
        return _woke_numpy()
    return _private(pa, pb, *_halves(m, n, k), route == "in_turn", bias=bias)


#: seconds numpy's OpenBLAS threads keep spinning on the cores after a product that woke them
#: (its THREAD_TIMEOUT, 2^28 cycles: ~0.13 s at 2.1 GHz), with a margin. A split timed meanwhile
#: shares the helper's core with them and loses to one thread for no reason of its own: with
#: the classes of the ONNX encoder (``bench_onnx``) measured one after another, each after the
#: previous one's numpy timing, every one chose ``in_turn`` and kept it on disk -- 1.3-1.7x the
#: time of ``private`` in a process where numpy's pool then never ran.
NUMPY_SPIN_S = 0.2
_numpy_woke = float("-inf")  # perf_counter of the last product from MIN_MNK left to numpy


def _woke_numpy() -> None:
    """Note that numpy's threaded GEMM runs a product now (returns None: numpy's route)."""
    global _numpy_woke
    _numpy_woke = time.perf_counter()


def _numpy_spinning() -> bool:
    """Did numpy's threads run a product within ``NUMPY_SPIN_S``?"""
    return time.perf_counter() - _numpy_woke < NUMPY_SPIN_S


#: the route of each exact (dtype, m, n, k, layouts) decided so far: the per-call cost of a
#: decided product is one dict lookup, not its shape class's text (a 128x256x10 product takes
#: ~12 us: the chooser's ~5 us would make it slower than numpy's)
_ROUTE: dict = {}


def _decide(a, b, pa, pb, exact: tuple, forced: Decision | None) -> Any:
    """The route of ``exact`` (remembered unless forced or provisional), or what the caller
    returns now: None (numpy's route while ``_slices`` compiles) or a measurement's result."""
    dtype, m, n, k = exact[:4]
    if not compiling.ready(("matmul", dtype), _warm):
        return None  # numpy meanwhile: _slices compiles on the compile thread
    cls, by_rows, parts = _shape_class(dtype, m, n, k)
    if forced is not None:
        return forced.route
    if m * n * k >= PRIVATE_MIN_MNK:
        _ROUTE[exact] = "private"
        return "private"
    decision = CHOOSER.decided(cls)
    if decision is None and compiling.pending():
        # a compile holds the GIL in stretches (the helper's half waits for it): timings taken
        # now would lie. The tie-winner runs until the compile thread is idle, then we measure
        return CHOOSER.prefer
    if decision is None:
        # while numpy's threads may still spin (``NUMPY_SPIN_S``) the split cannot be timed
        # fairly: one thread (``in_turn``) is no candidate then, and the decision is not saved
        spinning = _numpy_spinning()
        runs = {"numpy": lambda: np.matmul(a, b),
                "private": lambda: _private(pa, pb, by_rows, parts)}
        if len(parts) == 2 and not spinning:
            runs["in_turn"] = lambda: _private(pa, pb, by_rows, parts, True)
        decision, out = CHOOSER.measure(cls, runs, f"m{m} n{n} k{k}",
                                        "numpy's threads spinning" if spinning else "")
        _woke_numpy()  # (it was timed last)
        _ROUTE[exact] = decision.route
        return out
    _ROUTE[exact] = decision.route
    return decision.route


def _slices_py(a, b, oa, ob, ga, gb, out, lo, hi, go):
    """``out[i] = A_i @ B_i`` for the products ``i`` in ``[lo, hi)`` (``go``: ``workers.both``'s
    token, announced at once):
    ``A_i`` is the matrix of ``a`` (a flat view of the operand's memory) at element offset
    ``oa[i]`` with the geometry ``ga`` = (rows, columns, row stride, column stride, in
    elements), ``B_i`` likewise; one GEMM each, so a product's bits do not depend on which
    half ran it."""
    spin.announce(go)
    for i in range(lo, hi):
        blas.gemm_at(a, oa[i], ga, b, ob[i], gb, out[i], 0.0)


_INDEX = variants.array(numba.int64, 1, True)


def _flat(dt: Any) -> Any:
    """Numba's type of ``_stack``'s flat views: read-only, 1-D, unit stride."""
    return numba.types.Array(dt, 1, "C", readonly=True)


#: one variant per dtype serves every layout of the operands' matrices: it hands strides to
#: BLAS (specialized per layout, W9's first step compiled three), and 2-D products too
#: (``_private``): one kernel to compile where a 2-D one of its own took 0.3 s more cold
_slices = variants.PerDtype(_slices_py, lambda dt: (
    _flat(dt), _flat(dt), _INDEX, _INDEX,
    numba.types.UniTuple(numba.int64, 4), numba.types.UniTuple(numba.int64, 4),
    variants.array(dt, 3), numba.int64, numba.int64, variants.GO))


def _stack(x: np.ndarray, batch: tuple) -> tuple[np.ndarray, np.ndarray, tuple]:
    """(a flat view of the memory of ``x``'s matrices, the element offset of the matrix each
    of the ``batch``'s products reads, the matrices' geometry (rows, columns, row stride,
    column stride)) -- a view, whatever the batch dims' strides: attention's heads, permuted
    views of ``[B, S, H, D]``, are read where they lie. Broadcast batch dims read one matrix
    many times. A copy only where a matrix is no BLAS operand (``_blas_operand``) or a stride
    is negative or not whole elements."""
    size = x.itemsize
    if (not x.flags.aligned or any(s < 0 or s % size for s in x.strides)
            or _blas_operand(x) is not x):
        x = np.ascontiguousarray(x)
    strides = [s // size for s in x.strides]
    span = 1 + sum((n - 1) * s for n, s in zip(x.shape, strides) if n > 0)
    flat = np.lib.stride_tricks.as_strided(x, (span,), (size,), writeable=False)
    lead = x.shape[:-2]
    offsets = np.zeros(lead, np.int64)
    for d, (n, s) in enumerate(zip(lead, strides)):
        offsets += (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(lead) - d - 1))
    geometry = (x.shape[-2], x.shape[-1], strides[-2], strides[-1])
    return flat, np.ascontiguousarray(np.broadcast_to(offsets, batch)).ravel(), geometry


def _rows_merge(x: np.ndarray) -> bool:
    """Do the rows of all of ``x``'s matrices form one matrix (a view, no copy)?"""
    dims = [(n, s) for n, s in zip(x.shape[:-1], x.strides[:-1]) if n != 1]
    return all(s0 == s1 * n1 for (_, s0), (n1, s1) in zip(dims, dims[1:]))


def batched(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``a @ b`` for float32/float64 stacks of matrices of one dtype (``a`` or ``b`` of rank
    >= 3, the other of rank >= 2; batch dims broadcast as numpy's ``matmul``; any strides) on
    the private BLAS: one GEMM per product of the batch, the batch split in two halves over
    the helper from ``SPLIT_MIN_MNK`` multiply-adds in all (bit for bit the same results with
    or without the helper). None -- numpy's route -- below ``MIN_MNK`` multiply-adds per
    product, where numpy's OpenBLAS runs each GEMM on one thread (it is the same test, per
    call: ``m * n * k`` against 4 * 65536, GEMM_MULTITHREAD_THRESHOLD), for other dtypes and
    ranks, when ``ND4PY_BLAS=numpy`` forces numpy's route, while ``_slices`` compiles, or when
    there is no private BLAS. A stack whose rows merge times one matrix is one 2-D product
    (``matmul2d``'s route, else numpy's on the merged rows), whatever its size.

    Not measured against numpy (no ``CHOOSER``): numpy's batched ``matmul`` calls one GEMM per
    product, and from ``MIN_MNK`` each call wakes OpenBLAS's threads, which spin after it and
    take the helper's core -- the design rule (module docstring of ``workers``) is that nd4py
    never wakes them for work of its own. A product's own timing cannot see that cost: it is
    paid by the next split kernel (issue 23 measured W9's step at 1-5 s under load against
    0.16 s with numpy's BLAS on one thread).

    >>> a = np.ones((4, 128, 64)); b = np.ones((64, 64))
    >>> out = batched(a, b)
    >>> out is None or bool((out == 64).all())
    True
    """
    if min(a.ndim, b.ndim) < 2 or max(a.ndim, b.ndim) < 3:
        return None
    if a.dtype != b.dtype or a.dtype not in _REALS:
        return None
    (m, k), (k2, n) = a.shape[-2:], b.shape[-2:]
    if k2 != k:
        return None  # numpy raises its error
    if b.ndim == 2 and _rows_merge(a):  # a stack times one matrix: one GEMM of all rows, on
        a2 = a.reshape(-1, k)           # whichever route (numpy's 3-D matmul would run one
        out2 = matmul2d(a2, b)          # GEMM per leading index: 3.5 against 2.1 ms for
        if out2 is None:                # [8, 128, 1024] @ [1024, 256])
            out2 = np.matmul(a2, b)
        return out2.reshape(a.shape[:-1] + (n,))
    if m * n * k < MIN_MNK:
        return None
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return None  # numpy raises its error
    forced = CHOOSER.forced()
    if (forced is not None and forced.route == "numpy") or not blas.available():
        return None
    count = int(np.prod(batch))
    if count == 0:
        return np.empty(batch + (m, n), a.dtype)
    (sa, oa, ga), (sb, ob, gb) = _stack(a, batch), _stack(b, batch)
    if not compiling.ready(("matmul", a.dtype), _warm):
        return None  # numpy meanwhile: _slices compiles on the compile thread
    out = np.empty((count, m, n), a.dtype)
    parts = workers.halves(count, count * m * n * k, SPLIT_MIN_MNK)
    run = _slices[a.dtype]
    split.on_halves(parts, lambda p, go: run(sa, sb, oa, ob, ga, gb, out, p.start, p.stop, go))
    return out.reshape(batch + (m, n))


def routed(a: np.ndarray, b: np.ndarray, keep_numpy_asleep: bool = False,
           bias: np.ndarray | None = None) -> np.ndarray | None:
    """``a @ b`` (``+ bias``: see ``matmul2d``) on the private BLAS when its route takes it
    (``matmul2d``, ``batched``), else None: numpy's ``matmul`` should compute it."""
    if a.ndim == 2 and b.ndim == 2:
        return matmul2d(a, b, keep_numpy_asleep, bias)
    return _plus(batched(a, b), bias)  # (never wakes numpy's pool from MIN_MNK on)


def matmul(a: np.ndarray, b: np.ndarray, keep_numpy_asleep: bool = False,
           bias: np.ndarray | None = None) -> np.ndarray:
    """``a @ b`` (numpy ``matmul`` semantics) ``+ bias`` (see ``matmul2d``; None: no bias) on
    the route ``routed`` picks, else numpy's; ``keep_numpy_asleep``: see ``matmul2d``.

    >>> import numpy as np
    >>> matmul(np.ones((2, 3)), np.ones((3, 2)), bias=np.array([1.0, 2.0]))
    array([[4., 5.],
           [4., 5.]])
    """
    if bias is not None and not (np.ndim(b) >= 2 and is_bias_row(bias, np.shape(b)[-1])):
        raise ValueError(f"matmul: bias must be a row of biases, of shape [n] or [1, n] with n "
                         f"= {np.shape(b)[-1]} (b's last dim), got shape {bias.shape}")
    out = routed(a, b, keep_numpy_asleep, bias)
    return _plus(np.matmul(a, b), bias) if out is None else out


def warmups(x_shape: tuple, y_shape: tuple, dtype: Any) -> tuple:
    """The warm-ups (module, function, key) a product of these static shapes will run: none
    when numpy takes it (``describe_route``), else the private kernel's (``_slices``: batched
    and 2-D products alike).

    >>> warmups((2, 3), (3, 4), np.float32)
    ()
    """
    route = describe_route(x_shape, y_shape, dtype)
    if not route or route.startswith("numpy"):
        return ()
    return ((__name__, "_warm", ("matmul", np.dtype(dtype).name)),)


def describe_route(x_shape: tuple, y_shape: tuple, dtype: Any) -> str:
    """Which route a product of these static shapes takes, and why (``explain()``), or ``""``
    when it is not a float product of matrices (or stacks of them) with known sizes.

    >>> describe_route((2, 3), (3, 4), np.float32)
    'numpy: below MIN_MNK (2^18 multiply-adds)'
    >>> describe_route((8, 4, 2, 3), (8, 4, 3, 4), np.float32)
    'numpy: below MIN_MNK (2^18 multiply-adds per product)'
    """
    if min(len(x_shape), len(y_shape)) < 2 or np.dtype(dtype) not in _REALS:
        return ""
    (m, k), n = x_shape[-2:], y_shape[-1]
    if min(m, k, n) < 0:
        return ""
    stack = max(len(x_shape), len(y_shape)) > 2
    if m * n * k < MIN_MNK:
        return (f"numpy: below MIN_MNK (2^{MIN_MNK.bit_length() - 1} multiply-adds"
                + (" per product)" if stack else ")"))
    forced = CHOOSER.forced()
    if forced is None and not blas.available():
        return f"numpy: no private BLAS ({blas.why_not()})"
    if stack and len(y_shape) == 2 and min(x_shape) >= 0:
        # a stack times a matrix: one 2-D product of the merged rows (when they merge)
        m = int(np.prod(x_shape[:-1]))
        why = describe_route((m, k), (k, n), dtype)
        return f"{why.split(':')[0]}: rows merged into {m}x{k}x{n}:{why.split(':', 1)[1]}"
    if stack:
        if forced is not None and forced.route == "numpy":
            return f"numpy: {forced.why}"
        return ("private: batched, one GEMM per product (numpy's would wake OpenBLAS's "
                "threads from MIN_MNK per product)")
    if forced is None and m * n * k >= PRIVATE_MIN_MNK:
        return (f"private: from PRIVATE_MIN_MNK (2^{PRIVATE_MIN_MNK.bit_length() - 1} "
                "multiply-adds) unmeasured (numpy's threads would spin into the next kernels)")
    cls = _shape_class(np.dtype(dtype), m, n, k)[0]
    return CHOOSER.describe(cls) or f"not chosen yet at {cls} (measured on the first call)"
