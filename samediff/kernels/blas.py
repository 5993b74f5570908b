"""A single-threaded BLAS that compiled kernels can call: ``gemm(a, b, c, beta)`` and
``gemv(a, x, y, beta)``.

Why a BLAS of our own next to numpy's: numpy's OpenBLAS is reachable only through ``matmul``
(no accumulate into ``c``, no call from a Numba kernel), and its thread count is process-wide.
Kernels that split their work over two threads (``samediff.kernels.workers``) need GEMMs that run on
the calling thread only -- two halves each calling numpy's multi-threaded GEMM fight over one
pool (1.1-2x slower than one thread, see ``cnn.py`` here). The ``scipy-openblas32``
wheel (the OpenBLAS build numpy and SciPy themselves ship, with every symbol prefixed
``scipy_``, so it never collides with numpy's copy) is loaded once here and set to one
thread; Numba kernels call its ``cblas_?gemm`` by symbol name, which keeps them cacheable
(a ctypes function pointer would bake an address into the cache).

When the wheel is missing (a platform it has no build for) or ``ND4PY_BLAS=numpy`` is set,
``available()`` is False and the kernels that need it are never chosen; ``gemm`` called from
Python still works (through numpy). (``ND4PY_BLAS=private`` forces the 2-D matmuls onto it
instead of the measured choice: ``kernels.matmul``.)

>>> import numpy as np
>>> from samediff.kernels.blas import gemm
>>> a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
>>> c = np.ones((2, 4), np.float32)
>>> gemm(a, b, c, 1.0)  # c = a @ b + 1.0 * c
>>> c[0]
array([4., 4., 4., 4.], dtype=float32)
"""
from __future__ import annotations

import ctypes
import os
import threading

import numba
import numpy as np
from numba import types
from numba.extending import overload

from .jit_options import ONLY_COMPILED_CALLERS, PYTHON_CALLERS, compiled_only

__all__ = ["available", "gemm", "gemm_at", "gemv"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


#: the library's path once this process (or the parent it was forked from) loaded it
_LOADED: str | None = None


def _load() -> str:
    """Load the library for the JIT's symbol lookup; '' on success, else why not."""
    global _LOADED
    if os.environ.get("ND4PY_BLAS", "") == "numpy":
        return "ND4PY_BLAS=numpy"
    if _LOADED is not None:
        # loaded before (a forked child inherits it, and its thread count): loading again
        # would take the dynamic loader's and LLVM's locks, which a parent thread may have
        # held at the fork -- a child that did so at the end of a busy CI run never returned
        return ""
    try:
        import scipy_openblas32
    except ImportError:
        return "the scipy-openblas32 wheel is not installed"
    lib_dir = scipy_openblas32.get_lib_dir()
    names = [n for n in os.listdir(lib_dir) if n.startswith("libscipy_openblas")
             and n.endswith((".so", ".dylib", ".dll"))]
    if not names:
        return f"no OpenBLAS library in {lib_dir}"
    path = os.path.join(lib_dir, names[0])
    import llvmlite.binding as llvm
    llvm.load_library_permanently(path)  # symbols visible to Numba's linker
    ctypes.CDLL(path).scipy_openblas_set_num_threads(1)  # the calling thread only
    _LOADED = path
    return ""


_WHY_NOT: str | None = None  # None: not tried yet (loading costs ~13 ms: at first use)
_LOADING = threading.Lock()


def _after_fork_in_child() -> None:
    """A thread that was loading the library when another forked held ``_LOADING``; it does
    not exist in the child, which would wait for it forever. Loading again is harmless (the
    dynamic loader counts references; the thread count is set again)."""
    global _LOADING
    _LOADING = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def why_not() -> str:
    """Why ``available()`` is False ('' when it is True); the first call loads the library."""
    global _WHY_NOT
    if _WHY_NOT is None:
        with _LOADING:
            if _WHY_NOT is None:
                _WHY_NOT = _load()
    return _WHY_NOT


def available() -> bool:
    """Whether compiled kernels may call ``gemm`` (the private BLAS is loaded). Every path
    into a compiled kernel that calls ``gemm`` asks this first: the library must be loaded
    before such a kernel is linked (from Numba's cache too)."""
    return not why_not()


def _signature(real):
    i = types.int32
    return types.void(i, i, i, i, i, i, real, types.voidptr, i, types.voidptr, i, real,
                      types.voidptr, i)


_SGEMM = types.ExternalFunction("scipy_cblas_sgemm", _signature(types.float32))
_DGEMM = types.ExternalFunction("scipy_cblas_dgemm", _signature(types.float64))


_REALS = (np.dtype(np.float32), np.dtype(np.float64))


def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, beta: float = 0.0) -> None:
    """``c[...] = a @ b + beta * c`` for 2-D float32 or float64 arrays of one dtype, each
    with unit stride along one axis (row-major rows, or a transposed view). Callable from
    Numba kernels (``available()`` must be True there) and from Python."""
    _call("gemm", _gemm_jit, a, b, c, beta)


def _call(name: str, compiled, a: np.ndarray, b: np.ndarray, out: np.ndarray,
          beta: float) -> None:
    """``out[...] = a @ b + beta * out`` by ``compiled`` (the private BLAS), else numpy."""
    if not (a.dtype == b.dtype == out.dtype) or a.dtype not in _REALS:
        raise TypeError(f"{name}: the operands and the result must share float32 or float64, "
                        f"got {a.dtype}, {b.dtype}, {out.dtype}")
    if available():
        compiled(a, b, out, beta)
        return
    out[...] = a @ b + (beta * out if beta else 0)


def _routine(arrays: tuple, ndims: tuple, single, double):
    """(the routine, its real type, the itemsize) for Numba array types ``arrays`` of ranks
    ``ndims`` sharing float32 or float64; None otherwise (another overload's business)."""
    if not all(isinstance(t, types.Array) and t.ndim == d for t, d in zip(arrays, ndims)):
        return None
    dtype = arrays[0].dtype
    if any(t.dtype != dtype for t in arrays) or dtype not in (types.float32, types.float64):
        return None
    fn, real = (single, np.float32) if dtype == types.float32 else (double, np.float64)
    return fn, real, np.dtype(real).itemsize


@compiled_only()
def _layout(rows, cols, s0, s1):
    """(transpose flag, leading dimension) of a ``rows x cols`` matrix with element strides
    ``s0``, ``s1``, one of them unit. (Conditionals, not ``max``: each ``max`` signature is a
    compile of its own.)"""
    if s1 == 1 or cols <= 1:
        return _NO_TRANS, _row_step(s0, cols)
    if s0 == 1 or rows <= 1:
        return _TRANS, _row_step(s1, rows)
    raise ValueError("gemm: an operand has no unit-stride axis (copy it first)")


@compiled_only()
def _row_step(s0, cols):
    """The leading dimension of a row-major matrix: ``max(s0, cols, 1)``."""
    ld = s0 if s0 > cols else cols
    return ld if ld > 1 else 1


@overload(gemm, jit_options={"nogil": True, **ONLY_COMPILED_CALLERS})
def _gemm_overload(a, b, c, beta=0.0):
    routine = _routine((a, b, c), (2, 2, 2), _SGEMM, _DGEMM)
    if routine is None:
        return None
    fn, real, size = routine

    def impl(a, b, c, beta=0.0):
        m, k, n = a.shape[0], a.shape[1], b.shape[1]
        if b.shape[0] != k or c.shape[0] != m or c.shape[1] != n:
            raise ValueError("gemm: shapes do not chain (a [m, k], b [k, n], c [m, n])")
        if c.strides[1] != size and n > 1:
            raise ValueError("gemm: c needs unit-stride rows")
        if m == 0 or n == 0:
            return
        ta, lda = _layout(m, k, a.strides[0] // size, a.strides[1] // size)
        tb, ldb = _layout(k, n, b.strides[0] // size, b.strides[1] // size)
        ldc = _row_step(c.strides[0] // size, n)
        fn(_ROW_MAJOR, ta, tb, m, n, k, real(1.0), a.ctypes.data, lda, b.ctypes.data, ldb,
           real(beta), c.ctypes.data, ldc)
    return impl


@numba.njit(cache=True, nogil=True, **PYTHON_CALLERS)
def _gemm_jit(a, b, c, beta):
    gemm(a, b, c, beta)


def gemm_at(a: np.ndarray, a_at: int, a_geometry: tuple, b: np.ndarray, b_at: int,
            b_geometry: tuple, c: np.ndarray, beta: float = 0.0) -> None:
    """``gemm`` of matrices that lie in 1-D contiguous ``a`` and ``b``: each starts at an
    element offset (``a_at``) and has a geometry (rows, columns, row stride, column stride,
    in elements; one stride unit). For stacks whose batch dims have no common stride
    (attention's permuted heads): no array view is built per product (``as_strided`` in a
    Numba kernel took ~0.3 s of its compile each). From Python: the same through views.

    >>> a = np.arange(12.0, dtype=np.float32)
    >>> c = np.zeros((2, 2), np.float32)
    >>> gemm_at(a, 1, (2, 3, 3, 1), a, 0, (3, 2, 1, 3), c)   # a[1:7] as 2x3 @ a[:6] as 3x2
    >>> c.tolist()
    [[8.0, 26.0], [17.0, 62.0]]
    """
    size = a.itemsize
    view = (lambda x, at, g: np.lib.stride_tricks.as_strided(
        x[at:], g[:2], (g[2] * size, g[3] * size), writeable=False))
    gemm(view(a, a_at, a_geometry), view(b, b_at, b_geometry), c, beta)


@overload(gemm_at, jit_options={"nogil": True, **ONLY_COMPILED_CALLERS})
def _gemm_at_overload(a, a_at, a_geometry, b, b_at, b_geometry, c, beta=0.0):
    routine = _routine((a, b, c), (1, 1, 2), _SGEMM, _DGEMM)
    if routine is None:
        return None
    fn, real, size = routine

    def impl(a, a_at, a_geometry, b, b_at, b_geometry, c, beta=0.0):
        m, k, n = a_geometry[0], a_geometry[1], b_geometry[1]
        if b_geometry[0] != k or c.shape[0] != m or c.shape[1] != n:
            raise ValueError("gemm_at: shapes do not chain (a [m, k], b [k, n], c [m, n])")
        if c.strides[1] != size and n > 1:
            raise ValueError("gemm_at: c needs unit-stride rows")
        if m == 0 or n == 0:
            return
        ta, lda = _layout(m, k, a_geometry[2], a_geometry[3])
        tb, ldb = _layout(k, n, b_geometry[2], b_geometry[3])
        ldc = _row_step(c.strides[0] // size, n)
        # (unsigned: a uintp address plus a signed offset would be typed float64)
        fn(_ROW_MAJOR, ta, tb, m, n, k, real(1.0), a.ctypes.data + np.uintp(a_at * size), lda,
           b.ctypes.data + np.uintp(b_at * size), ldb, real(beta), c.ctypes.data, ldc)
    return impl


def _gemv_signature(real):
    i = types.int32
    return types.void(i, i, i, i, real, types.voidptr, i, types.voidptr, i, real,
                      types.voidptr, i)


_SGEMV = types.ExternalFunction("scipy_cblas_sgemv", _gemv_signature(types.float32))
_DGEMV = types.ExternalFunction("scipy_cblas_dgemv", _gemv_signature(types.float64))


def gemv(a: np.ndarray, x: np.ndarray, y: np.ndarray, beta: float = 0.0) -> None:
    """``y[...] = a @ x + beta * y`` for a 2-D ``a`` with unit stride along one axis and 1-D
    ``x``, ``y``, all float32 or all float64. A product with one row: OpenBLAS's GEMM with
    ``m = 1`` took 1.8x the time of this (``[1, 128] @ [128, 512]``: 4.6 against 2.6 us as four
    128-wide GEMMs; one 512-wide GEMM 4.5 us). Callable from Numba kernels and from Python."""
    _call("gemv", _gemv_jit, a, x, y, beta)


@overload(gemv, jit_options={"nogil": True, **ONLY_COMPILED_CALLERS})
def _gemv_overload(a, x, y, beta=0.0):
    routine = _routine((a, x, y), (2, 1, 1), _SGEMV, _DGEMV)
    if routine is None:
        return None
    fn, real, size = routine

    def impl(a, x, y, beta=0.0):
        m, n = a.shape[0], a.shape[1]
        if x.shape[0] != n or y.shape[0] != m:
            raise ValueError("gemv: shapes do not chain (a [m, n], x [n], y [m])")
        if m == 0:
            return
        if x.strides[0] <= 0 or y.strides[0] <= 0:
            raise ValueError("gemv: x and y need positive strides")
        trans, ld = _layout(m, n, a.strides[0] // size, a.strides[1] // size)
        # a row-major [m, n] as it is (no transpose), or the transpose of a row-major [n, m]
        rows, cols = (m, n) if trans == _NO_TRANS else (n, m)
        fn(_ROW_MAJOR, trans, rows, cols, real(1.0), a.ctypes.data, ld, x.ctypes.data,
           x.strides[0] // size, real(beta), y.ctypes.data, y.strides[0] // size)
    return impl


@numba.njit(cache=True, nogil=True, **PYTHON_CALLERS)
def _gemv_jit(a, x, y, beta):
    gemv(a, x, y, beta)
