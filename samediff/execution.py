"""Running a graph: feeds checked against their placeholders, and plans for concrete types.

Shared by ``SameDiff.output`` and the training step (``samediff/training/step.py``): both feed
placeholders, re-type the graph for the feeds' concrete shapes and ask the compiler for a plan.

>>> import numpy as np
>>> from samediff.ir import Var, VariableType
>>> from samediff.ops import TensorType
>>> x = Var("x", VariableType.PLACEHOLDER, TensorType((-1, 2), np.dtype("float32")))
>>> check_feed(x, np.ones((3, 2))).dtype      # float64 data converts to the placeholder's dtype
dtype('float32')
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .array import NDArray
from .compiler.cache import Structure, get_plan
from .errors import PlaceholderError
from .ir import Node, Var, infer_node_types
from .ops import TensorType


def typed_plan(nodes: Sequence[Node], input_types: dict[str, TensorType], names: list[str],
               donate: dict[str, str] | None = None, structure: Structure | None = None) -> Any:
    """The plan computing ``names`` with ``nodes`` from inputs of these concrete types (the
    inputs of the plan, in order, are ``sorted(input_types)``), from the one plan cache
    (``samediff/compiler/cache.py``). On a miss every node is re-typed first, so placeholders'
    -1 dims are known and a bad feed is reported with its node's name. ``structure``: the
    nodes' ``Structure`` if the caller keeps one (it saves hashing every node per call)."""
    inputs = sorted(input_types)
    key = (structure if structure is not None else Structure.of(nodes),
           tuple([(k, input_types[k]) for k in inputs]), tuple(names))
    return get_plan(key, nodes, inputs, names, lambda: infer_node_types(nodes, input_types),
                    exact_shapes=True, donate=donate)


def runtime_type(var: Var, value: Any) -> TensorType:
    """The concrete type of ``value`` fed for (or held by) ``var``: weak scalars stay weak."""
    if var.ttype.weak:
        return var.ttype
    return TensorType(np.shape(value), np.asarray(value).dtype)


def check_feed(var: Var, value: Any) -> Any:
    """``value`` as the placeholder ``var`` takes it (converted where that is safe), or a
    ``PlaceholderError`` saying what does not fit."""
    arr = np.asarray(value._data if isinstance(value, NDArray) else value)
    want = var.ttype
    if want.weak:  # a weak scalar placeholder stays a Python scalar (it must not promote)
        if arr.shape != () or not np.can_cast(arr.dtype, want.dtype, "same_kind"):
            raise PlaceholderError(f"placeholder {var.name!r} is a Python {want.dtype.kind} "
                                   f"scalar; got {arr.dtype} of shape {arr.shape}")
        return arr.astype(want.dtype).item()
    if arr.dtype != want.dtype:
        if not np.can_cast(arr.dtype, want.dtype, "same_kind"):
            raise PlaceholderError(f"placeholder {var.name!r} is {want.dtype}; got {arr.dtype} "
                                   f"values, which do not convert safely; cast them first")
        converted = arr.astype(want.dtype)
        if arr.dtype.kind in "iu" and want.dtype.kind == "f":
            _check_exact_ints(var, arr, converted)
        arr = converted
    if len(arr.shape) != len(want.shape) or any(
            w >= 0 and w != a for w, a in zip(want.shape, arr.shape)):
        raise PlaceholderError(f"placeholder {var.name!r} has shape {want.shape} (-1 = any); "
                               f"got a value of shape {arr.shape}")
    return arr


def _check_exact_ints(var: Var, ints: np.ndarray, floats: np.ndarray) -> None:
    """Integer feeds of a float placeholder are converted only when every value survives:
    float32 holds integers exactly up to 2**24, float64 up to 2**53 (beyond, some round).
    Float feeds of another precision are rounded like numpy's ``astype`` (documented)."""
    with np.errstate(invalid="ignore", over="ignore"):
        changed = floats.astype(ints.dtype) != ints
        changed |= ~np.isfinite(floats)
    if changed.any():
        bad = ints[changed].flat[0]
        bits = np.finfo(floats.dtype).nmant + 1
        raise PlaceholderError(f"placeholder {var.name!r} is {floats.dtype}; the {ints.dtype} "
                               f"value {bad} is not exactly representable in it ({floats.dtype} "
                               f"holds integers exactly only up to 2**{bits}); cast the data "
                               f"yourself if rounding is intended")
