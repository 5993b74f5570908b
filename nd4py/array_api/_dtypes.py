"""Data type functions: ``astype``, ``can_cast``, ``finfo``, ``iinfo``, ``isdtype``,
``result_type`` — the standard's promotion (numpy 2's, NEP 50: Python scalars are weak)."""
from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any

import numpy as np

from samediff.dtypes import to_dtype
from samediff.frontends.array_api import DTYPE_KINDS

from ._core import dtype_of, op

def isdtype(dtype: Any, kind: Any) -> builtins.bool:
    """Whether ``dtype`` is of ``kind``: a dtype, a kind name or a tuple of them."""
    dtype = np.dtype(dtype) if not isinstance(dtype, np.dtype) else dtype
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in DTYPE_KINDS:
            raise ValueError(f"unknown dtype kind {kind!r}; kinds are {sorted(DTYPE_KINDS)}")
        return DTYPE_KINDS[kind](dtype)
    return dtype == to_dtype(kind)


def _promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """The standard's promotion of two dtypes; mixing kinds (bool, integers, floating) or
    int64 with uint64 is not defined there and raises ``TypeError`` (real and complex
    floating mix: float64 with complex64 is complex128)."""
    kinds = {a.kind, b.kind}
    out = np.promote_types(a, b)
    if ("b" in kinds and len(kinds) > 1) or (kinds & set("fc") and kinds & set("iu")) or \
            (out.kind in "fc" and not kinds & set("fc")):
        raise TypeError(f"the array API standard does not promote {a} with {b}")
    return out


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """The promoted dtype; Python scalars take part weakly (at least one array or dtype)."""
    dtypes = [d for d in (dtype_of(a) for a in arrays_and_dtypes) if d is not None]
    scalars = [a for a in arrays_and_dtypes if dtype_of(a) is None]
    if not dtypes:
        raise TypeError("result_type needs at least one array or dtype")
    out = dtypes[0]
    for d in dtypes[1:]:
        out = _promote(out, d)
    for s in scalars:
        if isinstance(s, builtins.bool):
            ok = True
        elif isinstance(s, int):
            ok = out.kind in "iufc"
        elif isinstance(s, float):
            ok = out.kind in "fc"
        elif isinstance(s, complex):
            ok = out.kind == "c"
        else:
            ok = False
        if not ok:
            raise TypeError(f"a Python {type(s).__name__} does not promote with {out}")
    return out


def can_cast(from_: Any, to: Any, /) -> builtins.bool:
    """Whether ``from_`` casts to ``to`` without losing values (numpy's "safe" casting, which
    includes every promotion of the standard)."""
    return builtins.bool(np.can_cast(dtype_of(from_), to_dtype(to), "safe"))


@dataclass(frozen=True)
class finfo_object:
    """``finfo``'s result: Python floats, as the standard asks."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: np.dtype


@dataclass(frozen=True)
class iinfo_object:
    """``iinfo``'s result."""

    bits: int
    max: int
    min: int
    dtype: np.dtype


def finfo(type: Any, /) -> finfo_object:
    """Machine limits of a floating type: bits, eps, max, min, smallest_normal, dtype (for a
    complex type, those of its real parts, as the standard says)."""
    dt = dtype_of(type)
    if dt.kind not in "fc":
        raise ValueError(f"finfo needs a floating dtype, got {dt}")
    f = np.finfo(dt)
    return finfo_object(int(f.bits), float(f.eps), float(f.max), float(f.min),
                        float(f.smallest_normal), np.dtype(f.dtype))


def iinfo(type: Any, /) -> iinfo_object:
    """Machine limits of an integer type: bits, max, min, dtype."""
    dt = dtype_of(type)
    if dt.kind not in "iu":
        raise ValueError(f"iinfo needs an integer dtype, got {dt}")
    i = np.iinfo(dt)
    return iinfo_object(int(i.bits), int(i.max), int(i.min), dt)


def astype(x: Any, dtype: Any, /, *, copy: builtins.bool = True, device: Any = None) -> Any:
    """``x`` as ``dtype`` (the ``cast`` op); ``copy=False`` returns ``x`` when nothing changes."""
    dt = to_dtype(dtype)
    if not copy and x.dtype == dt:
        return x
    return op("cast", [x], dtype=dt)
