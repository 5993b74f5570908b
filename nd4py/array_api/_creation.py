"""Creation functions: each a creation op of the table (``zeros``, ``full``, ``arange``,
``linspace``, ``eye``, ``*_like``) or a composition (``tril``/``triu``, ``meshgrid``)."""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from samediff import NDArray
from samediff.dlpack import from_dlpack as _from_dlpack
from samediff.dtypes import SUPPORTED, unsupported

from ._core import DEFAULT_COMPLEX, DEFAULT_FLOAT, DEFAULT_INT, as_dtype, is_array, op

_DEVICES = (None, "cpu")


def _device(device: Any) -> None:
    if device not in _DEVICES:
        raise ValueError(f"unknown device {device!r}; nd4py arrays live on 'cpu'")


def _shape(shape: Any) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)


def _scalar_dtype(value: Any) -> np.dtype:
    if isinstance(value, builtins.bool):
        return np.dtype(np.bool_)
    if isinstance(value, int):
        return DEFAULT_INT
    if isinstance(value, float):
        return DEFAULT_FLOAT
    if isinstance(value, complex):
        return DEFAULT_COMPLEX
    if is_array(value):
        return value.dtype
    raise TypeError(f"cannot infer a dtype from {type(value).__name__} {value!r}")


def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: Any = None) -> Any:
    """An array from an array, a (nested) sequence, a Python scalar or a DLPack/buffer object.

    Python floats become float64 and ints int64 (the namespace's defaults); ``copy=False``
    raises when a copy is needed, ``copy=True`` always copies."""
    _device(device)
    want = as_dtype(dtype)
    if is_array(obj):
        if want is not None and want != obj.dtype:
            if copy is False:
                raise ValueError("asarray: converting the dtype needs a copy (copy=False)")
            return op("cast", [obj], dtype=want)
        return obj.dup() if copy else obj
    if isinstance(obj, (np.ndarray, np.generic)) or hasattr(obj, "__dlpack__") and not \
            isinstance(obj, (list, tuple)):
        arr = np.asarray(obj)
        if copy is False and want is not None and want != arr.dtype:
            raise ValueError("asarray: converting the dtype needs a copy (copy=False)")
        arr = np.array(arr, dtype=want, copy=True) if copy else np.asarray(arr, dtype=want)
    else:
        if copy is False:
            raise ValueError(f"asarray: a {type(obj).__name__} cannot be wrapped without a copy "
                             f"(copy=False)")
        obj = _unwrap_nested(obj)
        arr = np.asarray(obj, dtype=want)
        if want is None and arr.dtype.kind == "f" and arr.dtype != DEFAULT_FLOAT:
            arr = arr.astype(DEFAULT_FLOAT)
        elif want is None and arr.dtype.kind == "c" and arr.dtype != DEFAULT_COMPLEX:
            arr = arr.astype(DEFAULT_COMPLEX)
    if arr.dtype not in SUPPORTED:
        raise unsupported(arr.dtype, "asarray: ")
    return NDArray(arr)


def _unwrap_nested(obj: Any) -> Any:
    if isinstance(obj, (list, tuple)):
        return [_unwrap_nested(o) for o in obj]
    return np.asarray(obj) if is_array(obj) else obj


def _filled(shape: Any, value: Any, dtype: np.dtype) -> Any:
    return op("full", [], shape=_shape(shape), value=_number(value), dtype=dtype)


def _number(value: Any) -> Any:
    """A fill value as the ``value`` attribute (a number: bools become 0/1)."""
    if is_array(value):
        value = value.item()
    return int(value) if isinstance(value, builtins.bool) else value


def zeros(shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return op("zeros", [], shape=_shape(shape), dtype=as_dtype(dtype) or DEFAULT_FLOAT)


def ones(shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return op("ones", [], shape=_shape(shape), dtype=as_dtype(dtype) or DEFAULT_FLOAT)


def empty(shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    """Zeros: nd4py never hands out uninitialised memory."""
    return zeros(shape, dtype=dtype, device=device)


def full(shape: Any, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    dt = as_dtype(dtype) or _scalar_dtype(fill_value)
    if dt.kind in "iu" and builtins.abs(int(fill_value)) > 2 ** 53:  # beyond a float attribute
        return asarray(np.full(_shape(shape), fill_value, dtype=dt))
    return _filled(shape, fill_value, dt)


def zeros_like(x: Any, /, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return op("zeros_like", [x], dtype=as_dtype(dtype))


def ones_like(x: Any, /, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return op("ones_like", [x], dtype=as_dtype(dtype))


def empty_like(x: Any, /, *, dtype: Any = None, device: Any = None) -> Any:
    return zeros_like(x, dtype=dtype, device=device)


def full_like(x: Any, /, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    return op("full_like", [x], value=_number(fill_value), dtype=as_dtype(dtype))


def arange(start: Any, /, stop: Any = None, step: Any = 1, *, dtype: Any = None,
           device: Any = None) -> Any:
    """``[start, stop)`` by ``step``: int64 for int arguments, float64 otherwise."""
    _device(device)
    if stop is None:
        start, stop = 0, start
    dt = as_dtype(dtype)
    if dt is None:
        dt = DEFAULT_INT if builtins.all(isinstance(v, int) for v in (start, stop, step)) \
            else DEFAULT_FLOAT
    if dt.kind in "iu" and builtins.max(builtins.abs(start), builtins.abs(stop)) > 2 ** 53:
        return asarray(np.arange(start, stop, step, dtype=dt))
    return op("arange", [], start=start, stop=stop, step=step, dtype=dt)


def linspace(start: Any, stop: Any, /, num: int, *, dtype: Any = None, device: Any = None,
             endpoint: builtins.bool = True) -> Any:
    _device(device)
    complex_ends = isinstance(start, complex) or isinstance(stop, complex)
    dt = as_dtype(dtype) or (DEFAULT_COMPLEX if complex_ends else DEFAULT_FLOAT)
    if endpoint:
        return op("linspace", [], start=start, stop=stop, num=int(num), dtype=dt)
    if num == 0:
        return zeros((0,), dtype=dt)
    out = op("linspace", [], start=start, stop=stop, num=int(num) + 1, dtype=dt)
    return out[:num]


def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None,
        device: Any = None) -> Any:
    _device(device)
    dt = as_dtype(dtype) or DEFAULT_FLOAT
    if k == 0:
        return op("eye", [], rows=int(n_rows), cols=n_cols, dtype=dt)
    return NDArray(np.eye(n_rows, n_cols, k, dtype=dt))  # a constant: no op for k != 0


def _triangle(x: Any, k: int, lower: builtins.bool) -> Any:
    rows, cols = x.shape[-2:]
    mask = (np.tril if lower else np.triu)(np.ones((rows, cols), dtype=np.bool_), k)
    return op("where", [mask, x, op("zeros_like", [x])])


def tril(x: Any, /, *, k: int = 0) -> Any:
    return _triangle(x, k, True)


def triu(x: Any, /, *, k: int = 0) -> Any:
    return _triangle(x, k, False)


def meshgrid(*arrays: Any, indexing: str = "xy") -> list:
    if indexing not in ("xy", "ij"):
        raise ValueError(f"indexing must be 'xy' or 'ij', got {indexing!r}")
    n = len(arrays)
    sizes = [a.shape[0] for a in arrays]
    if indexing == "xy" and n > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, a in enumerate(arrays):
        axis = i
        if indexing == "xy" and n > 1 and i < 2:
            axis = 1 - i
        shape = [1] * n
        shape[axis] = a.shape[0]
        out.append(op("broadcast_to", [op("reshape", [a], shape=tuple(shape))],
                      shape=tuple(sizes)))
    return out


def from_dlpack(x: Any, /, *, device: Any = None, copy: Any = None) -> Any:
    _device(device)
    out = _from_dlpack(x)
    return out.dup() if copy else out


__all__ = [
    "arange",
    "asarray",
    "empty",
    "empty_like",
    "eye",
    "from_dlpack",
    "full",
    "full_like",
    "linspace",
    "meshgrid",
    "ones",
    "ones_like",
    "tril",
    "triu",
    "zeros",
    "zeros_like",
]
