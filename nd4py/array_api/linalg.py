"""The array API ``linalg`` extension (its eager functions and result tuples are the front
end's ``LINALG_EAGER`` / ``LINALG_RESULTS`` tables, ``samediff.frontends.array_api``). ``matmul``, ``matrix_transpose``, ``tensordot``,
``vecdot``, ``outer``, ``trace``, ``vector_norm`` and the Frobenius ``matrix_norm`` are ops
(they trace and compile); the decompositions and solvers have no op yet and run
``numpy.linalg`` on the buffers: eager only, refused inside a trace."""
from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

import numpy as np

from samediff.frontends import array_api as _table

from ._core import axes_tuple, eager, ndim, op
from ._functions import matmul, matrix_transpose, tensordot, vecdot  # noqa: F401

#: the named tuples of the front end's ``LINALG_RESULTS`` table, by function
_RESULTS = {fn: namedtuple(cls, fields)
            for fn, (cls, fields) in _table.LINALG_RESULTS.items()}
EighResult, QRResult = _RESULTS["eigh"], _RESULTS["qr"]
SlogdetResult, SVDResult = _RESULTS["slogdet"], _RESULTS["svd"]


def outer(x1: Any, x2: Any, /) -> Any:
    return op("mul", [op("reshape", [x1], shape=(-1, 1)), op("reshape", [x2], shape=(1, -1))])


def trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    from ._functions import sum as _sum
    mask = np.eye(x.shape[-2], x.shape[-1], offset, dtype=np.bool_)
    return _sum(op("where", [mask, x, op("zeros_like", [x])]), axis=(-2, -1), dtype=dtype)


def diagonal(x: Any, /, *, offset: int = 0) -> Any:
    return eager("linalg.diagonal", lambda a: np.diagonal(a, offset, -2, -1).copy(), x)


def vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:
    dims = axes_tuple(axis, ndim(x))
    if dims is None and keepdims is False:
        x, dims = op("reshape", [x], shape=(-1,)), (0,)
    elif dims is None:
        dims = tuple(range(ndim(x)))
    a = op("abs", [x])
    kw = {"dims": dims, "keep_dims": keepdims or None}
    if ord == math.inf:
        return op("max", [a], **kw)
    if ord == -math.inf:
        return op("min", [a], **kw)
    if ord == 0:
        return op("cast", [op("sum", [op("neq", [x, 0])], **kw)], dtype=a.dtype)  # real
    if ord == 1:
        return op("sum", [a], **kw)
    if ord == 2:
        return op("sqrt", [op("sum", [op("square", [a])], **kw)])
    return op("pow", [op("sum", [op("pow", [a, float(ord)])], **kw), 1.0 / ord])


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    if ord == "fro":
        squares = op("square", [op("abs", [x])])  # |x|^2: real for complex x too
        return op("sqrt", [op("sum", [squares], dims=(ndim(x) - 2, ndim(x) - 1),
                              keep_dims=keepdims or None)])
    return eager("linalg.matrix_norm", lambda a: np.linalg.matrix_norm(a, keepdims=keepdims,
                                                                      ord=ord), x)


def _eager(name: str, fn: Any, result: Any = None) -> Any:
    def call(x: Any, /, *args: Any, **kwargs: Any) -> Any:
        out = eager(f"linalg.{name}", lambda *a, **k: _plain(fn(*a, **k)), x, *args, **kwargs)
        return result(*out) if result is not None else out
    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``numpy.linalg.{name}`` on the buffers (eager only: no op yet)."
    return call


def _plain(out: Any) -> Any:
    return tuple(out) if isinstance(out, tuple) else out


def _fn(name: str, fn: Any, *args: Any, result: Any = None, **kwargs: Any) -> Any:
    out = eager(f"linalg.{name}", lambda *a, **k: _plain(fn(*a, **k)), *args, **kwargs)
    return result(*out) if result is not None else out


def cholesky(x: Any, /, *, upper: bool = False) -> Any:
    return _fn("cholesky", np.linalg.cholesky, x, upper=upper)


_EAGER = {n: _eager(n, f, _RESULTS.get(n)) for n, f in _table.LINALG_EAGER.items()}
det, eigh, eigvalsh, inv = _EAGER["det"], _EAGER["eigh"], _EAGER["eigvalsh"], _EAGER["inv"]
matrix_power, slogdet, solve = _EAGER["matrix_power"], _EAGER["slogdet"], _EAGER["solve"]
svdvals = _EAGER["svdvals"]


def matrix_rank(x: Any, /, *, rtol: Any = None) -> Any:
    return _fn("matrix_rank", np.linalg.matrix_rank, x, rtol=rtol)


def pinv(x: Any, /, *, rtol: Any = None) -> Any:
    return _fn("pinv", np.linalg.pinv, x, rtol=rtol)


def qr(x: Any, /, *, mode: str = "reduced") -> QRResult:
    return _fn("qr", np.linalg.qr, x, mode=mode, result=QRResult)


def svd(x: Any, /, *, full_matrices: bool = True) -> SVDResult:
    return _fn("svd", np.linalg.svd, x, full_matrices=full_matrices, result=SVDResult)


def cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    return _fn("cross", np.linalg.cross, x1, x2, axis=axis)
