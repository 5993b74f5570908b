"""ND4J's positional call forms that mean something else in nd4py's own order, rewritten to
the op's own order (``OVERLOADS`` in ``nd4j.py``). Each rewrite matches only its ND4J pattern
and leaves every other call alone; where nd4py's and ND4J's reading of one call differ and
nothing in the values tells them apart, the call is refused (``OpError``) when it is made —
never left to fail when the graph runs.

* ``split(input, numSplit, splitDim)``: two ints are a count of equal parts and a dim (part
  sizes are one sequence: ``split(x, [2, 1], 0)``); three or more bare ints are refused;
* ``concat(dimension, arrays...)`` / ``stack(axis, arrays...)`` (``Nd4j.concat(0, a, b)``,
  ``sd.concat("c", 0, a, b)``): a leading int is the axis;
* flags before dimensions: ``sum(x, keepDims, dims...)`` and every reduction like it,
  ``variance(x, biasCorrected, [keepDims], dims...)`` / ``std``,
  ``cumsum(x, exclusive, reverse, axis)`` / ``cumprod`` (``FLAGS_FIRST``);
* a data type first or among numbers: ``linspace(dataType, start, stop, number)``,
  ``normal(mean, stddev, dataType, shape...)``, ``uniform(min, max, ...)``,
  ``bernoulli(p, dataType, shape...)``;
* ``repeat(x, a, b)`` is ND4J's ``repeat(dimension, repeats)`` but numpy's ``repeat(repeats,
  axis)``: refused, asking for keywords.

A rewrite returns the new positional arguments, or a ``Rewrite`` when it also sets
attributes by name (a flag given twice, positionally and by keyword, is then refused by
``split_call`` like any other conflict).

>>> _split_overload(("x", 4, 1))
('x', (4,), 1)
>>> _axis_first_overload((0, "a", "b"))
(['a', 'b'], 0)
>>> flags_first("variance", ("dims", "keep_dims", "bias_corrected"))(("x", True, 0)).attrs
{'bias_corrected': True, 'dims': (0,)}
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from ..errors import OpError


class Rewrite(NamedTuple):
    """A rewritten call: positional ``args`` plus ``attrs`` set by the ND4J ``form``."""

    args: tuple
    attrs: dict
    form: str


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_bool(v: Any) -> bool:
    return isinstance(v, (bool, np.bool_))


def _is_dtype(v: Any) -> bool:
    """A data type object (``nd.FLOAT``, ``np.float32``); strings are left alone, since a
    string can also be an output name or a mode."""
    return isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic))


def _split_overload(args: tuple) -> tuple:
    """ND4J's ``split(input, numSplit, splitDim)``."""
    if len(args) < 3 or not all(_is_int(v) for v in args[1:]):
        return args  # split(x, n), split(x, sizes, axis), keywords
    if len(args) == 3:
        return (args[0], (int(args[1]),), int(args[2]))
    raise OpError(f"split: split(x, {', '.join(map(str, args[1:]))}) is ambiguous: ND4J's "
                  f"split(input, numSplit, splitDim) takes two ints; give part sizes as one "
                  f"sequence, e.g. split(x, {list(args[1:])}, axis=0)")


def _axis_first_overload(args: tuple) -> tuple:
    """``Nd4j.concat(dimension, arrays...)``, ``sd.stack(axis, values...)``: a leading Python
    int (never an array to join: they need rank >= 1) is the axis."""
    if len(args) < 2 or not (type(args[0]) is int):
        return args
    rest = args[1:]
    if len(rest) == 1 and isinstance(rest[0], (list, tuple)):
        rest = tuple(rest[0])
    return (list(rest), args[0])


#: ND4J's flags before the dimensions: op -> (its bool parameters in ND4J's order, the
#: attribute the ints after them fill). Every other op whose first attribute is ``dims`` and
#: that has ``keep_dims`` is a reduction with ND4J's ``sum(x, keepDims, dims...)``.
FLAGS_FIRST: dict[str, tuple[tuple[str, ...], str]] = {
    "variance": (("bias_corrected", "keep_dims"), "dims"),
    "std": (("bias_corrected", "keep_dims"), "dims"),
    "cumsum": (("exclusive", "reverse"), "axis"),
    "cumprod": (("exclusive", "reverse"), "axis"),
}


def flags_first(op_name: str, attrs: tuple[str, ...]) -> Callable[[tuple], Any] | None:
    """The flags-first rewrite of an op with attributes ``attrs`` (None: it has none).
    Reads as ND4J only when the first value after the (single) input is a bool: nd4py's own
    order starts with the dims or axis, which are never bools."""
    flags, target = FLAGS_FIRST.get(op_name, (None, None))
    if flags is None:
        if not attrs or attrs[0] != "dims" or "keep_dims" not in attrs:
            return None
        flags, target = ("keep_dims",), "dims"
    form = f"{op_name}(x, {', '.join(flags)}, {target}...)"

    def rewrite(args: tuple) -> tuple | Rewrite:
        if len(args) < 2 or not _is_bool(args[1]):
            return args
        rest, found = list(args[1:]), {}
        while rest and _is_bool(rest[0]) and len(found) < len(flags):
            found[flags[len(found)]] = bool(rest.pop(0))
        if not all(_is_int(v) for v in rest) or (target != "dims" and len(rest) > 1):
            want = "one int axis" if target != "dims" else "int dims"
            raise OpError(f"{op_name}: expected ND4J's {form} with bool flags then {want}, got "
                          f"{tuple(args[1:])!r}")
        if rest:
            found[target] = tuple(int(v) for v in rest) if target == "dims" else int(rest[0])
        return Rewrite((args[0],), found, form)
    return rewrite


def _dtype_first_overload(args: tuple) -> tuple:
    """ND4J's ``linspace(dataType, start, stop, number)``: the data type moves last."""
    if len(args) == 4 and _is_dtype(args[0]):
        return (*args[1:], args[0])
    return args


def _random_overload(n_params: int) -> Callable[[tuple], tuple]:
    """ND4J's ``normal(mean, stddev, dataType, shape...)`` (``n_params`` numbers, a data type,
    then the shape as ints or one sequence) -> ``(shape, params..., dtype)``."""
    def rewrite(args: tuple) -> tuple:
        if len(args) <= n_params or not _is_dtype(args[n_params]):
            return args
        shape = args[n_params + 1:]
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = tuple(shape[0])
        return (tuple(shape), *args[:n_params], args[n_params])
    return rewrite


def _repeat_overload(args: tuple) -> tuple:
    if len(args) == 3 and _is_int(args[1]) and _is_int(args[2]):
        raise OpError(f"repeat: repeat(x, {args[1]}, {args[2]}) is ambiguous: ND4J reads "
                      f"repeat(dimension, repeats), numpy repeat(repeats, axis); write "
                      f"repeat(x, repeats={args[2]}, axis={args[1]}) or repeat(x, "
                      f"repeats={args[1]}, axis={args[2]})")
    return args


ND4J_OVERLOADS: dict[str, Callable[[tuple], Any]] = {
    "split": _split_overload, "concat": _axis_first_overload, "stack": _axis_first_overload,
    "linspace": _dtype_first_overload, "repeat": _repeat_overload,
    "normal": _random_overload(2), "uniform": _random_overload(2),
    "truncated_normal": _random_overload(2), "bernoulli": _random_overload(1),
}
