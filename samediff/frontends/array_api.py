"""The array API front end (the standard, 2024.12): the standard's names as tables over the one
op table, and the call rules that turn a standard call into op calls.

``nd4py.array_api`` (what ``x.__array_namespace__()`` returns) is a namespace built from this
module: it makes one function per table entry (with the standard's signature) and adds the
functions composed of several ops and the eager numpy paths. Nothing here defines an op:

* ``UNARY`` / ``BINARY``: elementwise name -> op of the same semantics (numpy/NEP 50 promotion);
* ``EAGER``: elementwise name -> numpy function run on the buffers (no op yet: eager only,
  refused inside a trace);
* ``REDUCTIONS``: name -> (op, whether it takes ``dtype=``: ``sum``/``prod`` of integers then
  accumulate in the widest integer of their signedness); ``MOMENTS`` (``std``/``var`` with
  ``correction``), ``CUMULATIVE`` (``cumulative_sum``/``cumulative_prod``), ``SEARCH``
  (``argmax``/``argmin``);
* ``FFT_AXIS`` / ``FFT_AXES``: the ``fft`` extension's transforms along one axis (``n``,
  ``axis``, ``norm``) or over several (``s``, ``axes``, ``norm``);
* ``LINALG_EAGER`` / ``LINALG_RESULTS``: the ``linalg`` functions with no op yet (``numpy.linalg``
  on the buffers) and the named tuples they return;
* ``DTYPES``, ``DTYPE_KINDS``, the default dtypes and ``VERSIONS``.

The keyword rules are the standard's: ``axis`` -> ``dims``, ``keepdims`` -> ``keep_dims``,
``correction`` -> ``bias_corrected``. The call rules (``reduce``, ``moment``, ``cumulative``,
``arg_reduce``) are written with an ``apply(op_name, inputs, **attrs)`` that the namespace
hands in (its ``bind``), as the numpy front end's forms are, so this layer imports nothing
above the op table. Every op a table names is checked against the op table at import.

>>> from samediff.frontends.array_api import BINARY, REDUCTIONS, reduce
>>> BINARY["remainder"], REDUCTIONS["sum"]
('floor_mod', ('sum', True))
>>> calls = []
>>> def apply(op, inputs, **attrs):
...     calls.append((op, attrs)); return inputs[0]
>>> class X: shape, dtype = (2, 3), np.dtype("float64")
>>> _ = reduce(apply, "mean", X(), axis=-1, keepdims=True); calls
[('mean', {'dims': (1,), 'keep_dims': True})]
"""
from __future__ import annotations

import builtins
from typing import Any, Callable

import numpy as np

from ..ops import REGISTRY
from .common import FrontendTableError

#: ``apply(op_name, inputs, **attrs)``: one op call (None attributes mean "not given").
Apply = Callable[..., Any]

VERSION = "2024.12"
VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")

# -- dtypes (the standard's) ------------------------------------------------------------------
DTYPES: dict[str, np.dtype] = {n: np.dtype(n) for n in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128")}
#: The standard's default dtypes here (numpy's: Python floats become float64).
DEFAULT_FLOAT, DEFAULT_INT, DEFAULT_INDEX = DTYPES["float64"], DTYPES["int64"], DTYPES["int64"]
DEFAULT_COMPLEX = DTYPES["complex128"]
#: ``isdtype`` kind name -> test on a dtype.
DTYPE_KINDS: dict[str, Callable[[np.dtype], bool]] = {
    "bool": lambda d: d.kind == "b",
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": lambda d: d.kind == "f",
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iufc",
}

# -- elementwise --------------------------------------------------------------------------------
#: standard name -> op of the table (same semantics, numpy/NEP 50 promotion).
UNARY: dict[str, str] = {
    "abs": "abs", "acos": "acos", "asin": "asin", "atan": "atan", "cos": "cos", "cosh": "cosh",
    "exp": "exp", "expm1": "expm1", "isfinite": "isfinite", "isinf": "isinf", "isnan": "isnan",
    "log": "log", "log1p": "log1p", "log2": "log2", "logical_not": "logical_not",
    "negative": "neg", "sign": "sign", "sin": "sin", "sinh": "sinh", "sqrt": "sqrt",
    "square": "square", "tan": "tan", "tanh": "tanh", "reciprocal": "reciprocal",
    "acosh": "acosh", "asinh": "asinh", "atanh": "atanh", "conj": "conj", "real": "real",
    "imag": "imag", "signbit": "signbit",
}
BINARY: dict[str, str] = {
    "add": "add", "atan2": "atan2", "divide": "div", "equal": "eq",
    "greater": "gt", "greater_equal": "gte", "less": "lt", "less_equal": "lte",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
    "maximum": "maximum", "minimum": "minimum", "multiply": "mul", "not_equal": "neq",
    "pow": "pow", "remainder": "floor_mod", "subtract": "sub", "copysign": "copysign",
}
#: standard name -> numpy function run eagerly (no op yet; refused inside a trace).
EAGER: dict[str, np.ufunc] = {
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "bitwise_invert": np.invert, "bitwise_left_shift": np.left_shift,
    "bitwise_right_shift": np.right_shift, "nextafter": np.nextafter,
}

# -- statistics and searching ---------------------------------------------------------------------
#: name -> (op, takes ``dtype=``); the standard's ``axis``/``keepdims`` -> ``dims``/``keep_dims``.
REDUCTIONS: dict[str, tuple[str, bool]] = {
    "sum": ("sum", True), "prod": ("prod", True), "mean": ("mean", False),
    "max": ("max", False), "min": ("min", False), "all": ("all", False), "any": ("any", False),
}
#: name -> op taking ``correction`` (0 or 1 -> ``bias_corrected``; others are composed).
MOMENTS: dict[str, str] = {"std": "std", "var": "variance"}
#: name -> op along one ``axis`` (``include_initial`` is composed with ``concat``).
CUMULATIVE: dict[str, str] = {"cumulative_sum": "cumsum", "cumulative_prod": "cumprod"}
SEARCH: dict[str, str] = {"argmax": "argmax", "argmin": "argmin"}

# -- extensions ---------------------------------------------------------------------------------
#: ``fft`` transforms along one axis: ``(x, /, *, n=None, axis=-1, norm="backward")``.
FFT_AXIS: dict[str, str] = {n: n for n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")}
#: ``fft`` transforms over several axes: ``(x, /, *, s=None, axes=None, norm="backward")``.
FFT_AXES: dict[str, str] = {n: n for n in ("fftn", "ifftn", "rfftn", "irfftn")}
#: ``linalg`` functions with no op yet: ``numpy.linalg`` on the buffers (eager only).
LINALG_EAGER: dict[str, Callable[..., Any]] = {
    n: getattr(np.linalg, n) for n in (
        "det", "eigh", "eigvalsh", "inv", "matrix_power", "slogdet", "solve", "svdvals")}
#: ``linalg`` function -> (named tuple it returns, its fields).
LINALG_RESULTS: dict[str, tuple[str, str]] = {
    "eigh": ("EighResult", "eigenvalues eigenvectors"), "qr": ("QRResult", "Q R"),
    "slogdet": ("SlogdetResult", "sign logabsdet"), "svd": ("SVDResult", "U S Vh"),
}


# -- call rules ---------------------------------------------------------------------------------

def ndim(x: Any) -> int:
    """Number of dimensions (graph variables have a shape but no ``ndim``)."""
    return len(x.shape)


def normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise IndexError(f"axis {axis} is out of bounds for an array of {ndim} dimensions")
    return axis % ndim if ndim else 0


def axes_tuple(axis: Any, ndim: int) -> tuple[int, ...] | None:
    """``axis`` (None, an int or a sequence) as sorted non-negative dims; None = all."""
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(normalize_axis(int(a), ndim) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis!r}")
    return out


def accumulator(x: Any, dtype: np.dtype | None) -> np.dtype | None:
    """``sum``/``prod`` of integers accumulate in the widest type of their signedness."""
    if dtype is None and np.dtype(x.dtype).kind in "iu":
        return np.dtype(np.int64 if x.dtype.kind == "i" else np.uint64)
    if dtype is None and np.dtype(x.dtype).kind == "b":
        return np.dtype(np.int64)
    return dtype


def reduce(apply: Apply, name: str, x: Any, axis: Any, keepdims: bool,
           dtype: np.dtype | None = None) -> Any:
    """A reduction op over ``axis`` (``()`` reduces nothing), accumulating in ``dtype``."""
    if dtype is not None and dtype != x.dtype:
        x = apply("cast", [x], dtype=dtype)
    dims = axes_tuple(axis, ndim(x))
    if dims == ():  # reduces nothing: each element alone (all/any still give bools)
        return apply("cast", [x], dtype=np.dtype(bool) if name in ("all", "any") else x.dtype)
    if ndim(x) == 0:
        dims = None
    out = apply(name, [x], dims=dims, keep_dims=keepdims or None)
    return out if dtype is None or out.dtype == dtype else apply("cast", [out], dtype=dtype)


def moment(apply: Apply, name: str, x: Any, axis: Any, correction: Any, keepdims: bool) -> Any:
    """``std``/``variance`` with the standard's ``correction`` (0/1 map onto the op)."""
    dims = axes_tuple(axis, ndim(x))
    if correction in (0, 1) and dims != ():
        return apply(name, [x], dims=dims if ndim(x) else None, keep_dims=keepdims or None,
                     bias_corrected=builtins.bool(correction))
    n = int(np.prod([x.shape[d] for d in (dims if dims is not None else range(ndim(x)))]))
    var = reduce(apply, "variance", x, axis, keepdims) if dims != () else \
        apply("zeros_like", [x])
    out = apply("mul", [var, n / builtins.max(n - correction, 0) if n > correction
                        else float("nan")])
    return apply("sqrt", [out]) if name == "std" else out


def cumulative(apply: Apply, name: str, x: Any, axis: Any, dtype: np.dtype | None,
               include_initial: bool) -> Any:
    """``cumsum``/``cumprod`` along ``axis`` (required unless ``x`` is 1-D)."""
    if axis is None:
        if ndim(x) != 1:
            raise ValueError(f"cumulative_{name[3:]}: give axis= for a {ndim(x)}-d array")
        axis = 0
    axis = normalize_axis(axis, ndim(x))
    dt = accumulator(x, dtype)
    if dt is not None and dt != x.dtype:
        x = apply("cast", [x], dtype=dt)
    out = apply(name, [x], axis=axis)
    if out.dtype != x.dtype:  # numpy widens small integers (uint8 -> uint64): keep dtype=
        out = apply("cast", [out], dtype=x.dtype)
    if include_initial:
        shape = list(x.shape)
        shape[axis] = 1
        first = apply("full", [], shape=tuple(shape), value=0 if name == "cumsum" else 1,
                      dtype=x.dtype)
        out = apply("concat", [first, out], axis=axis)
    return out


def arg_reduce(apply: Apply, name: str, x: Any, axis: Any, keepdims: bool) -> Any:
    """``argmax``/``argmin`` along one axis, or over the flattened array."""
    if axis is None:
        out = apply(name, [apply("reshape", [x], shape=(-1,))], dims=(0,))
        return apply("reshape", [out], shape=(1,) * ndim(x)) if keepdims else out
    return apply(name, [x], dims=(normalize_axis(axis, ndim(x)),), keep_dims=keepdims or None)


def check() -> list[str]:
    """Problems with the tables (empty list = fine): every op they name exists."""
    tables = {"UNARY": UNARY, "BINARY": BINARY, "REDUCTIONS": {k: v[0] for k, v in
                                                              REDUCTIONS.items()},
              "MOMENTS": MOMENTS, "CUMULATIVE": CUMULATIVE, "SEARCH": SEARCH,
              "FFT_AXIS": FFT_AXIS, "FFT_AXES": FFT_AXES}
    return [f"{table}[{name!r}] refers to op {op!r}, which is not in the op table"
            for table, entries in tables.items() for name, op in entries.items()
            if op not in REGISTRY]


_PROBLEMS = check()
if _PROBLEMS:
    raise FrontendTableError("front end 'array_api': " + "; ".join(_PROBLEMS))
