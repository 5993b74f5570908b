"""How a Python call maps onto an op's inputs and attributes — one rule for every front end.

``nd.sum(x, 0, 1)``, ``x.sum(0, 1)``, ``sd.math.sum("s", x, 0, 1)`` and ``x.reshape(2, 3)`` all
go through ``split_call``:

1. required inputs are taken positionally (anything: arrays, variables, Python scalars);
2. optional inputs (``"name?"``) are taken positionally only when the value is array-like;
3. a variadic op (``"*xs"``) takes a list/tuple as its first argument, or leading array-likes;
4. remaining positional values fill attributes in declaration order — except that if the first
   attribute is a sequence kind (``dims``, ``shape``, ``reps``...) and every remaining value is an
   int, they are packed into it (``x.reshape(2, 3)``, ``x.sum(0, 1)``);
5. keywords name inputs or attributes; ``name=`` is returned separately (SameDiff and traces
   use it to name the output variable).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import OpError
from .ops.registry import OpDef

_SCALAR_TYPES = (bool, int, float, np.generic, str, type(None), np.dtype, type)
_SEQUENCE_KINDS = ("ints", "dims", "ints?", "nested")


def is_array_like(value: Any) -> bool:
    """Arrays, variables and lists are inputs; Python scalars, strings and dtypes are not."""
    return not isinstance(value, _SCALAR_TYPES) and not isinstance(value, tuple)


def split_call(op: OpDef, args: tuple, kwargs: dict) -> tuple[list, dict, str | None]:
    """Split a call's arguments into (inputs, attrs, name) following the rules above."""
    if not kwargs and not op.variadic and op.min_inputs == len(op.inputs):
        n = len(op.inputs)
        if len(args) == n:
            return list(args), {}, None  # fast path: exactly the required inputs, nothing else
        if len(args) > n and op.attr_kinds and all(type(a) is int for a in args[n:]):
            first, (kind, _) = next(iter(op.attr_kinds.items()))
            if kind.name in _SEQUENCE_KINDS:  # fast path: x.sum(0, 1), x.reshape(2, 3)
                return list(args[:n]), {first: tuple(args[n:])}, None
    kwargs = dict(kwargs)
    name = kwargs.pop("name", None)
    args = list(args)
    inputs: list[Any] = []
    if op.variadic:
        if args and isinstance(args[0], (list, tuple)):
            inputs = list(args.pop(0))
        else:
            while args and is_array_like(args[0]):
                inputs.append(args.pop(0))
        if not inputs:
            raise OpError(f"{op.name}: expected at least one array to {op.name}")
    else:
        for spec in op.inputs:
            key = spec.rstrip("?")
            if key in kwargs:
                inputs.append(kwargs.pop(key))
            elif not spec.endswith("?") and args:
                inputs.append(args.pop(0))
            elif spec.endswith("?") and args and is_array_like(args[0]):
                inputs.append(args.pop(0))
            elif not spec.endswith("?"):
                raise OpError(f"{op.name}: missing input {key!r} (inputs: {', '.join(op.inputs)})")
            else:
                break  # optional inputs are trailing; an absent one ends the list
    attrs = _positional_attrs(op, args)
    clash = set(attrs) & set(kwargs)
    if clash:
        raise OpError(f"{op.name}: attribute(s) {sorted(clash)} given twice")
    attrs.update(kwargs)
    return inputs, attrs, name


def _positional_attrs(op: OpDef, args: list) -> dict:
    if not args:
        return {}
    names = list(op.attr_kinds)
    if names and op.attr_kinds[names[0]][0].name in _SEQUENCE_KINDS and all(
            isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        return {names[0]: tuple(args)}
    if len(args) > len(names):
        raise OpError(f"{op.name}: too many positional arguments {tuple(args)!r}; "
                      f"attributes are {names or 'none'}")
    return dict(zip(names, args))
