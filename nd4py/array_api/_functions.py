"""Statistical, searching, manipulation, linear-algebra, indexing and utility functions: the
reductions, moments, cumulative functions and ``argmax``/``argmin`` are one function per entry
of the front end's tables (``samediff.frontends.array_api``, whose call rules map ``axis`` ->
``dims``, ``keepdims`` -> ``keep_dims``, ``correction`` -> ``bias_corrected``); the others are
mapped onto ops or composed from them here; sorting, set functions and ``nonzero`` run numpy
eagerly (their results depend on the data)."""
from __future__ import annotations

import builtins
from collections import namedtuple
from collections.abc import Callable
from typing import Any

import numpy as np

from samediff.frontends.array_api import (CUMULATIVE, MOMENTS, REDUCTIONS, SEARCH, accumulator,
                                          arg_reduce, cumulative, moment, reduce)

from ._core import as_dtype, axes_tuple, eager, ndim, normalize_axis, op
from ._dtypes import result_type


def _reduction(name: str, op_name: str, takes_dtype: bool) -> Callable:
    if takes_dtype:
        def fn(x: Any, /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
            return reduce(op, op_name, x, axis, keepdims, as_dtype(accumulator(x, dtype)))
    else:
        def fn(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:  # type: ignore[misc]
            return reduce(op, op_name, x, axis, keepdims)
    return _named(fn, name, f"The ``{op_name}`` op over ``axis`` (all axes by default).")


def _moment(name: str, op_name: str) -> Callable:
    def fn(x: Any, /, *, axis: Any = None, correction: Any = 0.0, keepdims: bool = False) -> Any:
        return moment(op, op_name, x, axis, correction, keepdims)
    return _named(fn, name, f"The ``{op_name}`` op with ``correction`` degrees of freedom.")


def _cumulative(name: str, op_name: str) -> Callable:
    def fn(x: Any, /, *, axis: Any = None, dtype: Any = None,
           include_initial: bool = False) -> Any:
        return cumulative(op, op_name, x, axis, as_dtype(dtype), include_initial)
    return _named(fn, name, f"The ``{op_name}`` op along ``axis``.")


def _search(name: str, op_name: str) -> Callable:
    def fn(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
        return arg_reduce(op, op_name, x, axis, keepdims)
    return _named(fn, name, f"The ``{op_name}`` op along ``axis`` (the flattened array by "
                            f"default).")


def _named(fn: Callable, name: str, doc: str) -> Callable:
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


#: one function per entry of the front end's statistics and searching tables
FUNCTIONS: dict[str, Callable] = {
    **{n: _reduction(n, o, d) for n, (o, d) in REDUCTIONS.items()},
    **{n: _moment(n, o) for n, o in MOMENTS.items()},
    **{n: _cumulative(n, o) for n, o in CUMULATIVE.items()},
    **{n: _search(n, o) for n, o in SEARCH.items()},
}
sum, prod, mean, max, min, all, any = (FUNCTIONS[n] for n in (
    "sum", "prod", "mean", "max", "min", "all", "any"))
std, var = FUNCTIONS["std"], FUNCTIONS["var"]
cumulative_sum, cumulative_prod = FUNCTIONS["cumulative_sum"], FUNCTIONS["cumulative_prod"]
argmax, argmin = FUNCTIONS["argmax"], FUNCTIONS["argmin"]


# -- searching -----------------------------------------------------------------------------
def where(condition: Any, x1: Any = None, x2: Any = None, /) -> Any:
    """The ``where`` op; ``where(condition)`` alone is ``nonzero(condition)``, as in numpy and
    torch (scikit-learn's ``roc_curve`` calls ``xp.where(mask)[0]``)."""
    if x1 is None and x2 is None:
        return nonzero(condition)
    if x1 is None or x2 is None:
        raise TypeError("where: give both x1 and x2, or neither (then it is nonzero)")
    return op("where", [condition, x1, x2])


def count_nonzero(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return reduce(op, "sum", op("cast", [op("neq", [x, 0]), ], dtype=np.dtype(np.int64)), axis,
                  keepdims)


def nonzero(x: Any, /) -> tuple:
    if ndim(x) == 0:
        raise ValueError("nonzero of a 0-d array")
    return eager("nonzero", np.nonzero, x)


def searchsorted(x1: Any, x2: Any, /, *, side: str = "left", sorter: Any = None) -> Any:
    return eager("searchsorted", np.searchsorted, x1, x2, side=side, sorter=sorter)


# -- sorting and sets (eager) ----------------------------------------------------------------
def sort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
    def run(a: np.ndarray) -> np.ndarray:
        out = np.sort(a, axis=axis, kind="stable")
        return np.flip(out, axis=axis) if descending else out
    return eager("sort", run, x)


def argsort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
    def run(a: np.ndarray) -> np.ndarray:
        if not descending:
            return np.argsort(a, axis=axis, kind="stable")
        n = a.shape[axis]
        idx = np.argsort(np.flip(a, axis=axis), axis=axis, kind="stable")
        return np.flip(n - 1 - idx, axis=axis)
    return eager("argsort", run, x)


UniqueAllResult = namedtuple("UniqueAllResult", "values indices inverse_indices counts")
UniqueCountsResult = namedtuple("UniqueCountsResult", "values counts")
UniqueInverseResult = namedtuple("UniqueInverseResult", "values inverse_indices")


def _unique(what: str, x: Any, index: bool, inverse: bool, counts: bool) -> Any:
    """``numpy.unique`` on the buffer: values sorted ascending (numpy 2.3's ``unique_*`` no
    longer sort, and libraries such as scikit-learn rely on sorted classes), NaNs distinct
    (the standard's ``equal_nan=False``), inverse indices in the shape of ``x``."""
    def run(a: np.ndarray) -> Any:
        out = np.unique(a, return_index=index, return_inverse=inverse, return_counts=counts,
                        equal_nan=False)
        if not isinstance(out, tuple):
            return out
        out = list(out)
        if inverse:
            out[1 + index] = out[1 + index].reshape(a.shape)
        return tuple(out)
    return eager(what, run, x)


def unique_values(x: Any, /) -> Any:
    return _unique("unique_values", x, False, False, False)


def unique_counts(x: Any, /) -> UniqueCountsResult:
    return UniqueCountsResult(*_unique("unique_counts", x, False, False, True))


def unique_inverse(x: Any, /) -> UniqueInverseResult:
    return UniqueInverseResult(*_unique("unique_inverse", x, False, True, False))


def unique_all(x: Any, /) -> UniqueAllResult:
    return UniqueAllResult(*_unique("unique_all", x, True, True, True))


# -- manipulation ----------------------------------------------------------------------------
def reshape(x: Any, /, shape: Any, *, copy: Any = None) -> Any:
    if copy is False:
        raise ValueError("reshape: nd4py cannot promise a view (copy=False)")
    return op("reshape", [x], shape=tuple(int(s) for s in shape))


def permute_dims(x: Any, /, axes: Any) -> Any:
    return op("permute", [x], dims=tuple(normalize_axis(int(a), ndim(x)) for a in axes))


def matrix_transpose(x: Any, /) -> Any:
    if ndim(x) < 2:
        raise ValueError("matrix_transpose needs at least 2 dimensions")
    axes = list(range(ndim(x)))
    axes[-2], axes[-1] = axes[-1], axes[-2]
    return permute_dims(x, axes)


def moveaxis(x: Any, source: Any, destination: Any, /) -> Any:
    src = axes_tuple(source, ndim(x))
    dst = axes_tuple(destination, ndim(x))
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination need the same number of axes")
    order = [a for a in range(ndim(x)) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute_dims(x, order)


def _promoted(arrays: Any) -> list:
    arrays = list(arrays)
    dt = result_type(*arrays)
    return [a if a.dtype == dt else op("cast", [a], dtype=dt) for a in arrays]


def concat(arrays: Any, /, *, axis: Any = 0) -> Any:
    arrays = _promoted(arrays)
    if axis is None:
        arrays = [op("reshape", [a], shape=(-1,)) for a in arrays]
        axis = 0
    return op("concat", arrays, axis=normalize_axis(axis, ndim(arrays[0])))


def stack(arrays: Any, /, *, axis: int = 0) -> Any:
    arrays = _promoted(arrays)
    return op("stack", arrays, axis=normalize_axis(axis, ndim(arrays[0]) + 1))


def unstack(x: Any, /, *, axis: int = 0) -> tuple:
    out = op("unstack", [x], axis=normalize_axis(axis, ndim(x)))
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def expand_dims(x: Any, /, axis: int = 0) -> Any:
    return op("expand_dims", [x], axis=normalize_axis(axis, ndim(x) + 1))


def squeeze(x: Any, /, axis: Any) -> Any:
    axes = axes_tuple(axis, ndim(x))
    if builtins.any(x.shape[a] != 1 for a in axes):
        raise ValueError(f"squeeze: axis {axis} of shape {x.shape} is not of size 1")
    return op("squeeze", [x], axis=axes)


def flip(x: Any, /, *, axis: Any = None) -> Any:
    dims = axes_tuple(axis, ndim(x))
    dims = tuple(range(ndim(x))) if dims is None else dims
    return op("reverse", [x], dims=dims) if dims else op("cast", [x], dtype=x.dtype)


def roll(x: Any, /, shift: Any, *, axis: Any = None) -> Any:
    if axis is None:
        return op("reshape", [roll(op("reshape", [x], shape=(-1,)), shift, axis=0)],
                  shape=tuple(x.shape))
    shifts = (shift,) if isinstance(shift, int) else tuple(shift)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    out = x
    for s, a in zip(shifts, axes):
        a = normalize_axis(a, ndim(x))
        n = x.shape[a]
        s = s % n if n else 0
        if s:
            pre = (slice(None),) * a
            out = op("concat", [out[pre + (slice(n - s, None),)], out[pre + (slice(0, n - s),)]],
                     axis=a)
    return out if out is not x else op("cast", [x], dtype=x.dtype)


def broadcast_to(x: Any, /, shape: Any) -> Any:
    return op("broadcast_to", [x], shape=tuple(int(s) for s in shape))


def broadcast_arrays(*arrays: Any) -> list:
    shape = np.broadcast_shapes(*(tuple(a.shape) for a in arrays))
    return [broadcast_to(a, shape) for a in arrays]


def tile(x: Any, repetitions: Any, /) -> Any:
    reps = tuple(int(r) for r in repetitions)
    if len(reps) < ndim(x):
        reps = (1,) * (ndim(x) - len(reps)) + reps
    elif len(reps) > ndim(x):
        x = op("reshape", [x], shape=(1,) * (len(reps) - ndim(x)) + tuple(x.shape))
    return op("tile", [x], reps=reps)


def repeat(x: Any, repeats: Any, /, *, axis: Any = None) -> Any:
    if not isinstance(repeats, int):
        return eager("repeat", np.repeat, x, repeats, axis=axis)
    if axis is None:
        x, axis = op("reshape", [x], shape=(-1,)), 0
    return op("repeat", [x], repeats=repeats, axis=normalize_axis(axis, ndim(x)))


def take(x: Any, indices: Any, /, *, axis: Any = None) -> Any:
    if axis is None:
        if ndim(x) != 1:
            raise ValueError("take: give axis= for arrays of more than one dimension")
        axis = 0
    return op("gather", [x, indices], axis=normalize_axis(axis, ndim(x)))


def take_along_axis(x: Any, indices: Any, /, *, axis: int = -1) -> Any:
    return eager("take_along_axis", np.take_along_axis, x, indices, axis=axis)


def diff(x: Any, /, n: int = 1, *, axis: int = -1, prepend: Any = None,
         append: Any = None) -> Any:
    """The standard's ``diff`` (``n`` also positional, numpy's order: scikit-learn's
    ``roc_curve`` calls ``xp.diff(fps, 2)``)."""
    axis = normalize_axis(axis, ndim(x))
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = concat(parts, axis=axis)
    pre = (slice(None),) * axis
    for _ in range(n):
        x = op("sub", [x[pre + (slice(1, None),)], x[pre + (slice(None, -1),)]])
    return x


# -- linear algebra --------------------------------------------------------------------------
def matmul(x1: Any, x2: Any, /) -> Any:
    return op("matmul", [x1, x2])


def tensordot(x1: Any, x2: Any, /, *, axes: Any = 2) -> Any:
    if isinstance(axes, int):
        dims_x = tuple(range(ndim(x1) - axes, ndim(x1)))
        dims_y = tuple(range(axes))
    else:
        dims_x, dims_y = (tuple(normalize_axis(int(a), nd) for a in ax)
                          for ax, nd in zip(axes, (ndim(x1), ndim(x2))))
    if not dims_x:
        shape1 = tuple(x1.shape) + (1,) * ndim(x2)
        return op("mul", [op("reshape", [x1], shape=shape1), x2])
    return op("tensor_mmul", [x1, x2], dims_x=dims_x, dims_y=dims_y)


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """Dot product of vectors along ``axis``, ``sum(conj(x1) * x2)``; keeps the dtype."""
    if ndim(x1) == 0 or ndim(x2) == 0 or x1.shape[axis] != x2.shape[axis]:
        raise ValueError(f"vecdot: shapes {x1.shape} and {x2.shape} differ along axis {axis}")
    if np.dtype(x1.dtype).kind == "c":
        x1 = op("conj", [x1])
    prod = op("mul", [x1, x2])
    out = op("sum", [prod], dims=(normalize_axis(axis, ndim(prod)),))
    return out if out.dtype == prod.dtype else op("cast", [out], dtype=prod.dtype)
