"""2-D float matmuls on the private single-threaded BLAS (``samediff.kernels.blas``), split by rows
or columns over the helper thread (``samediff.kernels.workers``) -- not on numpy's multi-threaded
OpenBLAS.

Why: numpy's OpenBLAS keeps its own worker threads, which spin after every call they
share, for a long time. Next to our helper (convolutions, pooling) they fought over the
second core: the digits CNN example (``examples/cnn_digits.py``) trained at 5.0 s per epoch
with both pools against 2.1 with numpy's BLAS on one thread. One pool, ours, now serves every
op. The W3 MLP step did not lose by it: numpy's hand-written step itself ran faster on one
BLAS thread (1.18 vs 1.35 ms) on this 2-vCPU machine.

Below ``MIN_MNK`` multiply-adds numpy's ``matmul`` runs the product (OpenBLAS stays on one
thread there itself, and its call costs less than ours); batched, 1-D, integer, complex and
mixed-dtype products always do.

>>> import numpy as np
>>> a = np.arange(6.0).reshape(2, 3)
>>> matmul2d(a, a.T) is None            # small: numpy's matmul
True
>>> b = np.ones((256, 512)); c = np.ones((512, 64))
>>> bool((matmul2d(b, c) == 512).all())
True
"""
from __future__ import annotations

import numba
import numpy as np

from . import blas, spin, workers

#: multiply-adds (m * n * k) from which the private BLAS takes the product: numpy's OpenBLAS
#: goes multi-threaded above 4 * 65536 (its GEMM_MULTITHREAD_THRESHOLD)
MIN_MNK = 1 << 18
#: multiply-adds from which the rows go to two threads (as ``kernels.cnn.SPLIT_MIN_MACS``)
SPLIT_MIN_MNK = 1 << 20

_REALS = (np.dtype(np.float32), np.dtype(np.float64))


@numba.njit(nogil=True, cache=True)
def _part(a, b, out, by_rows, lo, hi, go):
    """Rows (``by_rows``) or columns ``[lo, hi)`` of ``out = a @ b`` (``go``:
    ``workers.both``'s token, announced at once)."""
    spin.announce(go)
    if by_rows:
        blas.gemm(a[lo:hi], b, out[lo:hi], 0.0)
    else:
        blas.gemm(a, b[:, lo:hi], out[:, lo:hi], 0.0)


def _blas_operand(x: np.ndarray) -> np.ndarray:
    """``x`` if one axis has unit stride and the other steps over whole rows, in whole
    elements (a row-major matrix, a slice of one, or a transposed view), else a C-contiguous
    copy (negative, broadcast, byte-offset -- a field of a structured array -- or otherwise
    strided)."""
    size, (s0, s1), (r, c) = x.itemsize, x.strides, x.shape
    whole = x.flags.aligned and s0 % size == 0 and s1 % size == 0  # BLAS counts elements
    if whole and ((s1 == size and s0 >= c * size) or (s0 == size and s1 >= r * size)):
        return x
    return np.ascontiguousarray(x)


def matmul2d(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``a @ b`` for 2-D float32/float64 operands of one dtype, ``MIN_MNK`` multiply-adds
    or more, on the private BLAS (from ``SPLIT_MIN_MNK`` in two halves, of the rows of ``a``
or the columns of ``b``, whichever is bigger: each half packs all of the other); None when
    numpy should take it (other shapes, dtypes, sizes, or no private BLAS here)."""
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.dtype not in _REALS:
        return None
    (m, k), n = a.shape, b.shape[1]
    if b.shape[0] != k or m * n * k < MIN_MNK or not blas.available():
        return None
    a, b = _blas_operand(a), _blas_operand(b)
    out = np.empty((m, n), a.dtype)
    # each half packs the whole of the operand it does not split: split the bigger one
    by_rows = m * k >= k * n
    parts = workers.halves(m if by_rows else n, m * n * k, SPLIT_MIN_MNK)
    workers.on_halves(parts, lambda p, go: _part(a, b, out, by_rows, p.start, p.stop, go))
    return out
