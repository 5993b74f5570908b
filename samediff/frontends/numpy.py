"""The numpy front end: numpy's names and keywords as tables over the one op table, and the
numpy protocols (``__array_ufunc__``, ``__array_function__``, advanced indexing) that read them.

``np.exp(x)``, ``np.maximum(x, 0)``, ``np.mean(x, axis=0)``, ``np.concatenate([x, y])`` and
``x[[0, 2]]`` on an ``NDArray`` become ordinary op calls: they go through ``bind``, so they run
eagerly, record inside ``graph_scope`` / ``@nd.compile`` and record into a graph for a graph
variable. Nothing here defines an op:

* ``UFUNCS``: numpy ufunc name -> op (a tuple of ops: one output per op, ``divmod``);
* ``FUNCTIONS``: numpy function (``"linalg.norm"`` under its submodule) -> ``Fn`` entries, each
  one op plus numpy's parameters in order and how each becomes an op attribute (``axis`` ->
  ``dims``, ``ddof`` -> ``bias_corrected``); the first entry whose parameters fit the call wins
  (``np.transpose(x)`` -> ``transpose``, ``np.transpose(x, axes)`` -> ``permute``);
* ``METADATA``: numpy functions answered from metadata (``np.shape`` of a traced array).

Every entry also accepts numpy's ``dtype=`` (the array inputs are cast first, as numpy's loop
dtype; a function's result is cast too: a reduction accumulates in ``dtype``, and methods take
it as well, ``x.sum(dtype=np.float64)``) and ``out=`` (eager only: the result is written into
the given array, which is returned). Where numpy's integer semantics differ from the op's,
``INTEGER_FORMS`` / ``INTEGER_DTYPE_FORMS`` write them with ops (``np.reciprocal`` of ints,
``np.mean(x, dtype=np.int64)``). A call no entry fits — another function (``np.fft.fft``), a
ufunc method (``np.add.reduce``), an argument numpy has and the op does not (``where=``,
``ddof=2``) — falls back: eagerly numpy runs on the buffers and arrays of supported dtypes come
back as ``NDArray`` (others, e.g. complex, as numpy arrays); inside a trace it raises
``TracingError`` naming the function, since numpy cannot see traced values. Python scalars
stay weak (NEP 50).

>>> import numpy as np
>>> from samediff import create
>>> x = create([[1.0, -2.0], [3.0, 4.0]])
>>> np.maximum(x, 0).sum(axis=0, keepdims=True).numpy().tolist()
[[4.0, 4.0]]
>>> type(np.mean(x, axis=1)).__name__, x[[1, 0]][0].numpy().tolist()
('NDArray', [3.0, 4.0])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ..arg_kinds import WEAK_SCALARS
from ..dtypes import SUPPORTED
from ..errors import ArgumentConflictError, OpError
from ..ops import REGISTRY
from .common import Frontend, Namespace
from .nd4j import split_call as nd4j_split_call

#: numpy ufunc (its ``__name__``) -> op, or a tuple of ops for ufuncs with several outputs.
#: Left out on purpose: ``rint`` (the ``round`` op halves away from zero, numpy to even).
UFUNCS: dict[str, str | tuple[str, ...]] = {
    # arithmetic
    "add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "power": "pow",
    "maximum": "maximum", "minimum": "minimum", "floor_divide": "floor_div",
    "remainder": "floor_mod", "divmod": ("floor_div", "floor_mod"), "arctan2": "atan2",
    "copysign": "copysign",
    "negative": "neg", "absolute": "abs", "sign": "sign", "square": "square",
    "reciprocal": "reciprocal", "matmul": "matmul",
    # exponentials, logarithms, trigonometry
    "exp": "exp", "expm1": "expm1", "exp2": "exp2", "log": "log", "log1p": "log1p",
    "log2": "log2", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan",
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh", "cosh": "cosh",
    "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
    "floor": "floor", "ceil": "ceil", "conjugate": "conj",
    # comparisons and logic
    "equal": "eq", "not_equal": "neq", "greater": "gt", "greater_equal": "gte", "less": "lt",
    "less_equal": "lte", "logical_and": "logical_and", "logical_or": "logical_or",
    "logical_xor": "logical_xor", "logical_not": "logical_not",
    "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite", "signbit": "signbit",
}


@dataclass(frozen=True)
class Fn:
    """One way a numpy function reaches an op.

    ``params``: numpy's parameters in its order, the op's array inputs first (a variadic op
    takes one sequence). ``attrs``: numpy parameter -> op attribute, or ``(attribute,
    convert)`` (``convert`` raising ``KeyError``/``ValueError`` means "not this entry").
    ``fixed``: parameters accepted only at one value (``order="C"``). ``dtype``/``out`` are
    always accepted; ``None`` is "not given" for every parameter. ``when``: a test on the
    array inputs (``np.dot`` is ``matmul`` only up to 2-D). ``defaults``: attribute values
    when numpy's parameter is not given (``np.clip(x, None, 1)``: no lower bound). ``required``:
    numpy parameters this entry needs (``np.cumsum`` of a matrix without ``axis`` flattens).
    ``derived``: attribute values computed from the array inputs when numpy's parameter is not
    given (``np.flip(x)`` reverses every dim of ``x``)."""

    op: str
    params: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    when: Callable[[list], bool] | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    derived: Mapping[str, Callable[[list], Any]] = field(default_factory=dict)


def fn(op: str, params: str, fixed: Mapping[str, Any] | None = None,
       when: Callable[[list], bool] | None = None, defaults: Mapping[str, Any] | None = None,
       required: tuple[str, ...] = (), derived: Mapping[str, Callable[[list], Any]] | None = None,
       **attrs: Any) -> tuple[Fn, ...]:
    return (Fn(op, tuple(p.strip() for p in params.split(",")), attrs, fixed or {}, when,
               defaults or {}, required, derived or {}),)


def _ndim(x: Any) -> int:
    return x.ndim if hasattr(x, "ndim") else np.ndim(x)


def _floating(xs: list) -> bool:
    """``clip_by_value`` has float bounds: integer arrays keep numpy's integer result by falling
    back (``x.clip(lo, hi)``, which is maximum/minimum, traces for every dtype)."""
    return np.dtype(getattr(xs[0], "dtype", np.dtype(object))).kind == "f"


_REDUCE = {"axis": "dims", "keepdims": "keep_dims"}
_DDOF = {"axis": "dims", "keepdims": "keep_dims",
         "ddof": ("bias_corrected", {0: False, 1: True}.__getitem__)}
_INF = float("inf")

#: numpy function (``"linalg.norm"`` for ``np.linalg.norm``) -> the entries that can serve it.
FUNCTIONS: dict[str, tuple[Fn, ...]] = {
    # reductions
    "sum": fn("sum", "a, axis, dtype, out, keepdims", **_REDUCE),
    "prod": fn("prod", "a, axis, dtype, out, keepdims", **_REDUCE),
    "mean": fn("mean", "a, axis, dtype, out, keepdims", **_REDUCE),
    "average": fn("mean", "a, axis, weights, returned, keepdims", {"returned": False}, **_REDUCE),
    "max": fn("max", "a, axis, out, keepdims", **_REDUCE),
    "amax": fn("max", "a, axis, out, keepdims", **_REDUCE),
    "min": fn("min", "a, axis, out, keepdims", **_REDUCE),
    "amin": fn("min", "a, axis, out, keepdims", **_REDUCE),
    "all": fn("all", "a, axis, out, keepdims", **_REDUCE),
    "any": fn("any", "a, axis, out, keepdims", **_REDUCE),
    "argmax": fn("argmax", "a, axis, out, keepdims", **_REDUCE),
    "argmin": fn("argmin", "a, axis, out, keepdims", **_REDUCE),
    "std": fn("std", "a, axis, dtype, out, ddof, keepdims", **_DDOF),
    "var": fn("variance", "a, axis, dtype, out, ddof, keepdims", **_DDOF),
    "cumsum": fn("cumsum", "a, axis, dtype, out", when=lambda xs: _ndim(xs[0]) == 1, axis="axis")
    + fn("cumsum", "a, axis, dtype, out", required=("axis",), axis=("axis", int)),
    "cumprod": fn("cumprod", "a, axis, dtype, out", when=lambda xs: _ndim(xs[0]) == 1,
                  axis="axis")
    + fn("cumprod", "a, axis, dtype, out", required=("axis",), axis=("axis", int)),
    "linalg.norm": fn("norm2", "x, ord, axis, keepdims", {"ord": "fro"}, **_REDUCE),
    # Fourier transforms
    **{f"fft.{n}": fn(n, "a, n, axis, norm, out", n="n", axis="axis", norm="norm") for n in (
        "fft", "ifft", "rfft", "irfft", "hfft", "ihfft")},
    **{f"fft.{n}": fn(n, "a, s, axes, norm, out", s=("s", tuple), axes=("axes", tuple),
                             norm="norm")
       for n in ("fftn", "ifftn", "rfftn", "irfftn")},
    # elementwise functions that are not ufuncs
    "clip": fn("clip_by_value", "a, a_min, a_max, out, min, max", when=_floating,
               defaults={"clip_min": -_INF, "clip_max": _INF},
               a_min=("clip_min", float), a_max=("clip_max", float),
               min=("clip_min", float), max=("clip_max", float)),
    "where": fn("where", "condition, x, y"),
    "real": fn("real", "val"),
    "imag": fn("imag", "val"),
    "angle": fn("angle", "z, deg", {"deg": False}),
    # linear algebra
    "dot": fn("matmul", "a, b, out", when=lambda xs: all(1 <= _ndim(x) <= 2 for x in xs)),
    # shapes
    "reshape": fn("reshape", "a, shape, order, newshape, copy", {"order": "C"},
                  shape=("shape", lambda s: (s,) if isinstance(s, int) else tuple(s)),
                  newshape=("shape", lambda s: (s,) if isinstance(s, int) else tuple(s))),
    "transpose": fn("transpose", "a") + fn("permute", "a, axes", axes="dims"),
    "squeeze": fn("squeeze", "a, axis", axis=("axis", lambda a: (a,) if isinstance(a, int)
                                              else tuple(a))),
    "expand_dims": fn("expand_dims", "a, axis", axis=("axis", int)),
    "concatenate": fn("concat", "arrays, axis, out, dtype, casting", {"casting": "same_kind"},
                      axis=("axis", int)),
    "stack": fn("stack", "arrays, axis, out, dtype, casting", {"casting": "same_kind"},
                axis=("axis", int)),
    "tile": fn("tile", "A, reps", reps=("reps", lambda r: (r,) if isinstance(r, int) else tuple(r))),
    "repeat": fn("repeat", "a, repeats, axis", repeats=("repeats", int), axis="axis"),
    "broadcast_to": fn("broadcast_to", "array, shape, subok", {"subok": False},
                       shape=("shape", lambda s: (s,) if isinstance(s, int) else tuple(s))),
    "flip": fn("reverse", "m, axis", derived={"dims": lambda xs: tuple(range(_ndim(xs[0])))},
               axis=("dims", lambda a: (a,) if isinstance(a, int) else tuple(a))),
    "take": fn("gather", "a, indices, axis, out, mode", {"mode": "raise"}, axis=("axis", int)),
    # creation from an array
    "zeros_like": fn("zeros_like", "a, dtype, order, subok, shape", {"order": "K", "subok": True}),
    "ones_like": fn("ones_like", "a, dtype, order, subok, shape", {"order": "K", "subok": True}),
    "full_like": fn("full_like", "a, fill_value, dtype, order, subok, shape",
                    {"order": "K", "subok": True}, fill_value=("value", float)),
}

#: numpy functions answered from metadata: they work on traced arrays too.
METADATA: dict[str, Callable[..., Any]] = {
    "shape": lambda a: tuple(a.shape), "ndim": lambda a: a.ndim,
    "size": lambda a, axis=None: a.size if axis is None else a.shape[axis],
}


def _numpy_names() -> dict[str, tuple[str, ...]]:
    """The ``names`` table of ``NUMPY``: op -> numpy's other names for it (one op per name;
    ``np.dot``, which is an op's own name, and multi-entry functions are left to ``FUNCTIONS``)."""
    names: dict[str, list[str]] = {}
    pairs = [(n, op) for n, op in UFUNCS.items() if isinstance(op, str)]
    pairs += [(n, entries[0].op) for n, entries in FUNCTIONS.items()
              if len({e.op for e in entries}) == 1 and "." not in n]
    for name, op in pairs:
        if name != op and name not in REGISTRY:
            names.setdefault(op, []).append(name)
    return {op: tuple(dict.fromkeys(extra)) for op, extra in names.items()}


def numpy_split_call(op: Any, args: tuple, kwargs: dict,
                     leading_name: bool = False) -> tuple[list, dict, str | None]:
    """The numpy argument rule for calls by op name: the ND4J rule, which already translates
    numpy's ``axis``/``axes``/``keepdims`` keywords (``NUMPY_KEYWORDS`` in ``nd4j.py``)."""
    return nd4j_split_call(op, args, kwargs, leading_name)


#: The numpy front end, checked against the op table when this module is imported.
NUMPY = Frontend("numpy", _numpy_names(), {"linalg": Namespace(("linalg",))}, numpy_split_call)

# --------------------------------------------------------------------------------------------
# The protocols
# --------------------------------------------------------------------------------------------

#: What a numpy call runs through: ``apply(op, inputs, attrs)`` (``bind``) and
#: ``fallback(what, run, hint)`` — eagerly ``run(wrap)`` calls numpy on the buffers and wraps
#: array results with ``wrap``; inside a trace it raises ``TracingError``.
Fallback = Callable[[str, Callable[[Callable], Any], str], Any]

_HINT = ("call it outside the graph_scope / @nd.compile function, or write it with nd ops "
         "(see samediff/frontends/numpy.py for the functions that map onto ops)")


class _Unfit(Exception):
    """This entry cannot serve this call (a parameter it does not translate)."""


def numpy_name(func: Any) -> str:
    """``"sum"`` for ``np.sum``, ``"linalg.norm"`` for ``np.linalg.norm``."""
    module = getattr(func, "__module__", None) or "numpy"
    prefix = module[len("numpy."):] + "." if module.startswith("numpy.") else ""
    return prefix + getattr(func, "__name__", repr(func))


def numpy_function(apply: Callable, fallback: Fallback, func: Any, args: tuple,
                   kwargs: dict) -> Any:
    """``__array_function__``: the first ``FUNCTIONS`` entry that fits, else the fallback."""
    name = numpy_name(func)
    if name in METADATA:
        return METADATA[name](*args, **kwargs)
    for entry in FUNCTIONS.get(name, ()):
        try:
            inputs, attrs, dtype, out = _split(entry, args, kwargs)
        except _Unfit:
            continue
        if dtype is not None and _integer_dtype_form(entry.op, dtype) is _NO_FORM:
            continue  # numpy's integer-dtype semantics have no op form here: numpy runs it
        return _run(apply, (entry.op,), inputs, attrs, dtype, (out,) if out is not None else None,
                    result_dtype=True)
    return fallback(f"np.{name}", _numpy_call(func, args, kwargs), _HINT)


def numpy_ufunc(apply: Callable, fallback: Fallback, ufunc: np.ufunc, method: str,
                inputs: tuple, kwargs: dict) -> Any:
    """``__array_ufunc__``: a ufunc call maps onto its op(s) (``dtype=`` and ``out=`` too);
    ufunc methods (``reduce``, ``accumulate``, ``outer``, ``at``) and other keywords
    (``where=``, ``casting=``...) fall back."""
    ops = UFUNCS.get(ufunc.__name__)
    extra = set(kwargs) - {"out", "dtype"}
    if method != "__call__" or ops is None or extra:
        what = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        if extra and ops is not None:
            what += f" with {', '.join(sorted(extra))}="
        call = _numpy_call(getattr(ufunc, method), inputs, kwargs)
        out = kwargs.get("out")
        if out is None:
            return fallback(what, call, _HINT)
        fallback(what, call, _HINT)  # numpy wrote into the buffers of ``out``
        return out[0] if len(out) == 1 else out
    ops = (ops,) if isinstance(ops, str) else ops
    return _run(apply, ops, [_input(x) for x in inputs], {}, kwargs.get("dtype"),
                kwargs.get("out"))


def numpy_index(apply: Callable, fallback: Fallback, x: Any, key: Any) -> Any:
    """Advanced indexing reads: one integer array among full slices (``x[[0, 2]]``,
    ``x[:, idx]``) is a ``gather`` (it records); anything else — boolean masks, several
    arrays — falls back to numpy eagerly (a copy, as in numpy) and cannot be traced."""
    items = key if isinstance(key, tuple) else (key,)
    arrays = [i for i, k in enumerate(items) if not isinstance(k, slice)]
    if len(arrays) == 1 and all(k == slice(None) for k in items if isinstance(k, slice)):
        idx = _input(items[arrays[0]])
        if np.dtype(getattr(idx, "dtype", np.dtype(object))).kind in "iu":
            return apply(REGISTRY["gather"], [x, idx], {"axis": arrays[0]})
    is_mask = any(np.dtype(getattr(_input(k), "dtype", np.dtype(object))) == np.bool_
                  for k in items if isinstance(k, (list, np.ndarray)) or hasattr(k, "dtype"))
    what = "indexing with a boolean mask" if is_mask else f"advanced indexing {key!r}"
    hint = ("its result's shape depends on the data; use nd.where(mask, x, 0) to keep the shape"
            if is_mask else "use x.gather(indices, axis=...) for one integer array along one axis")
    return fallback(what, _numpy_call(lambda a, k: a[k], (x, key), {}), hint)


def _input(x: Any) -> Any:
    """numpy's reading of a list argument (float lists are float64, as in numpy)."""
    if isinstance(x, list):
        try:
            return np.asarray(x)
        except ValueError:  # ragged, or holding arrays: left to the op to convert
            return x
    return x


def _split(entry: Fn, args: tuple, kwargs: dict) -> tuple[list, dict, Any, Any]:
    if len(args) > len(entry.params):
        raise _Unfit
    given = dict(zip(entry.params, args))
    for key, value in kwargs.items():
        if key not in entry.params or key in given:
            raise _Unfit
        given[key] = value
    op = REGISTRY[entry.op]
    n_arrays = 1 if op.variadic else len(op.inputs)
    inputs = []
    for p in entry.params[:n_arrays]:
        if p not in given:
            raise _Unfit
        value = given.pop(p)
        inputs += [_input(v) for v in value] if op.variadic else [_input(value)]
    if entry.when is not None and not entry.when(inputs):
        raise _Unfit
    if any(given.get(p) is None or given.get(p) is np._NoValue for p in entry.required):
        raise _Unfit
    dtype, out, attrs = given.pop("dtype", None), given.pop("out", None), dict(entry.defaults)
    attrs.update({k: derive(inputs) for k, derive in entry.derived.items()})
    set_by: dict[str, str] = {}  # attribute -> the numpy parameter that gave it
    for p, value in given.items():
        if value is np._NoValue or (value is None and p not in entry.fixed):
            continue
        if p in entry.fixed:
            if value != entry.fixed[p]:
                raise _Unfit
            continue
        if p not in entry.attrs:
            raise _Unfit  # a numpy parameter this entry does not translate, given a value
        target = entry.attrs[p]
        if isinstance(target, tuple):
            target, convert = target
            try:
                value = convert(value)
            except (KeyError, ValueError, TypeError):
                raise _Unfit from None
        if target in set_by:  # two spellings of one parameter (clip's a_min and min)
            raise ArgumentConflictError(
                f"{entry.op}: numpy's {set_by[target]}= and {p}= both give {target!r} "
                f"({attrs[target]!r} and {value!r}); give only one of them")
        attrs[target], set_by[target] = value, p
    return inputs, attrs, dtype, out


def _run(apply: Callable, ops: tuple[str, ...], inputs: list, attrs: dict, dtype: Any,
         out: tuple | None, result_dtype: bool = False) -> Any:
    """Run ``ops`` on ``inputs``; ``dtype=`` casts the array inputs (a ufunc's loop dtype) and,
    with ``result_dtype`` (numpy functions: a reduction's accumulator), the result too."""
    if dtype is not None and result_dtype:
        results = tuple(with_dtype(apply, op, inputs, attrs, dtype) for op in ops)
    else:
        if dtype is not None:
            inputs = _cast_inputs(apply, inputs, np.dtype(dtype))
        results = tuple(_ufunc_op(apply, op, inputs, attrs) for op in ops)
    if out is None or all(o is None for o in out):
        return results[0] if len(results) == 1 else results
    for target, result in zip(out, results):
        _write(target, result)
    return out[0] if len(out) == 1 else tuple(out)


def _cast_inputs(apply: Callable, inputs: list, dtype: np.dtype) -> list:
    cast = REGISTRY["cast"]
    return [x if isinstance(x, WEAK_SCALARS) or getattr(x, "dtype", None) == dtype
            else apply(cast, [x], {"dtype": dtype}) for x in inputs]


def _integer_reciprocal(apply: Callable, x: Any) -> Any:
    """numpy's integer ``reciprocal`` is C's ``1 / x``, which truncates: only 1 and -1 survive.
    ``1 / 0`` is 0, as integer ``floor_divide`` by zero is here and in numpy (numpy's own
    reciprocal loop gives an undefined value there, e.g. INT_MIN for int32)."""
    unit = apply(REGISTRY["eq"], [apply(REGISTRY["abs"], [x], {}), 1], {})
    return apply(REGISTRY["where"], [unit, x, 0], {})


#: op -> how numpy computes it when every array input has an integer dtype, where the op's
#: rule differs (the ``reciprocal`` op is a true division, as ND4J's is: float results).
INTEGER_FORMS: dict[str, Callable[[Callable, Any], Any]] = {"reciprocal": _integer_reciprocal}


def _ufunc_op(apply: Callable, op: str, inputs: list, attrs: dict) -> Any:
    form = INTEGER_FORMS.get(op)
    if form is not None and all(np.dtype(getattr(x, "dtype", np.dtype(float))).kind in "iu"
                                for x in inputs):
        return form(apply, *inputs)
    return apply(REGISTRY[op], inputs, attrs)


def _integer_mean(apply: Callable, x: Any, attrs: dict, dtype: np.dtype) -> Any:
    """numpy's ``mean(x, dtype=<integer>)``: the sum accumulates in ``dtype`` (and wraps as it
    does), then the quotient by the count is truncated toward zero back to ``dtype``."""
    total = apply(REGISTRY["cast"], [apply(REGISTRY["sum"], [x], attrs)], {"dtype": dtype})
    ones = apply(REGISTRY["ones_like"], [x], {"dtype": np.dtype(np.int64)})
    return apply(REGISTRY["div"], [total, apply(REGISTRY["sum"], [ones], attrs)], {})


_NO_FORM: Any = object()

#: op -> its form when numpy's ``dtype=`` is an integer (or bool) type and the plain
#: "cast the inputs, run the op, cast the result" differs from numpy. ``_NO_FORM``: none here
#: (numpy's var/std truncate their intermediate mean): numpy functions fall back to numpy,
#: methods refuse, named.
INTEGER_DTYPE_FORMS: dict[str, Any] = {"mean": _integer_mean, "variance": _NO_FORM,
                                       "std": _NO_FORM}


def _integer_dtype_form(op: str, dtype: Any) -> Any:
    return INTEGER_DTYPE_FORMS.get(op) if np.dtype(dtype).kind in "biu" else None


#: ops whose numpy function takes ``dtype=`` while the op has no such attribute: their methods
#: accept it too (``x.sum(dtype=np.float64)``, ``x.mean(dtype=np.int64)``), via ``with_dtype``.
DTYPE_OPS: frozenset[str] = frozenset(
    e.op for entries in FUNCTIONS.values() for e in entries
    if "dtype" in e.params and "dtype" not in REGISTRY[e.op].attr_kinds)


def with_dtype(apply: Callable, op: str, inputs: list, attrs: dict, dtype: Any,
               name: str | None = None) -> Any:
    """numpy's ``dtype=`` on a function or method: the array inputs are cast to ``dtype``
    (unsafely, as numpy's reductions cast), the op runs and its result is cast to ``dtype``,
    so a sum accumulates as in numpy's ``dtype`` accumulator (``np.sum(int8s, dtype=np.int8)``
    wraps) and ``mean`` with an integer dtype truncates. ``name`` names the final output.

    >>> import numpy as np
    >>> from samediff import create
    >>> x = create([[1, 2], [4, -7]])
    >>> x.sum(axis=0, dtype=np.float64).numpy().tolist(), x.mean(axis=1, dtype=np.int64).tolist()
    ([5.0, -5.0], [1, -1])
    """
    dt = np.dtype(dtype)
    form = _integer_dtype_form(op, dt)
    if form is _NO_FORM:
        raise OpError(f"{op} with dtype={dt} (an integer type): numpy truncates its intermediate "
                      f"mean, which nd4py does not reproduce; compute it in floating point and "
                      f"cast the result (.astype({dt}))")
    inputs = _cast_inputs(apply, inputs, dt)
    out = form(apply, inputs[0], attrs, dt) if form else apply(REGISTRY[op], inputs, attrs)
    if name is None and out.dtype == dt:
        return out
    return apply(REGISTRY["cast"], [out], {"dtype": dt}, name)


def _write(target: Any, result: Any) -> None:
    """``out=``: eager only (``assign`` refuses inside a trace, naming it)."""
    if hasattr(target, "assign") and not isinstance(target, np.ndarray):
        target.assign(result)
    else:
        np.copyto(target, np.asarray(result), casting="same_kind")


def _numpy_call(func: Callable, args: tuple, kwargs: dict) -> Callable[[Callable], Any]:
    def run(wrap: Callable) -> Any:
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)), wrap)
    return run


def _unwrap(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    if hasattr(value, "__array_function__") and not isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value)  # an NDArray's buffer, no copy: ``out=`` writes through
    return value


def _wrap(value: Any, wrap: Callable) -> Any:
    if isinstance(value, (np.ndarray, np.generic)):  # numpy scalars become 0-d arrays
        return wrap(np.asarray(value)) if value.dtype in SUPPORTED else value
    if isinstance(value, tuple):
        return tuple(_wrap(v, wrap) for v in value)
    if isinstance(value, list):
        return [_wrap(v, wrap) for v in value]
    return value
