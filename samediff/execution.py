"""Running a graph: feeds checked against their placeholders, and plans for concrete types.

Shared by ``SameDiff.output``, a training ``Model``'s ``output`` (``run_graph``) and the
training step (``samediff/training/step.py``): all feed placeholders, re-type the graph for the
feeds' concrete shapes and ask the compiler for a plan.

>>> import numpy as np
>>> from samediff.ir import Var, VariableType
>>> from samediff.ops import TensorType
>>> x = Var("x", VariableType.PLACEHOLDER, TensorType((-1, 2), np.dtype("float32")))
>>> check_feed(x, np.ones((3, 2))).dtype      # float64 data converts to the placeholder's dtype
dtype('float32')
"""
from __future__ import annotations

from typing import Any, Mapping, MutableMapping, Sequence

import numpy as np

from .array import NDArray
from .compiler.cache import Structure, get_plan
from .errors import PlaceholderError, UnknownVariableError
from .ir import Graph, Node, Var, VariableType, did_you_mean, infer_node_types
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


def run_graph(graph: Graph, feeds: Mapping[str, Any], names: list[str],
              held: Mapping[str, Any] | None = None,
              structures: MutableMapping[tuple, Structure] | None = None) -> tuple[Any, list]:
    """Compute the variables ``names`` of ``graph`` from placeholder ``feeds``, running only
    the nodes they need; returns ``(plan, results)``. A result that is a variable's or a
    constant's own array is a copy (callers may write to what they get).

    ``held``: placeholder values set beforehand (ND4J's ``ph.set_array``), used where ``feeds``
    has none. ``structures``: the caller's memo of node structures per ``(graph version,
    names)``, so a repeated call hashes no node. A feed of an unknown name or of a variable that
    is not a placeholder, and a placeholder left without a value, are named errors."""
    nodes = graph.needed(names)
    values = _feed_values(graph, feeds, nodes, names, held or {})
    structure = None
    if structures is not None:
        memo_key = (graph.version, tuple(names))
        structure = structures.get(memo_key)
        if structure is None:
            if len(structures) >= 64:
                structures.clear()
            structure = structures[memo_key] = Structure.of(nodes)
    variables = graph.vars
    types = {k: runtime_type(variables[k], values[k]) for k in values}
    plan = typed_plan(nodes, types, names, structure=structure)
    results = plan.execute([values[k] for k in plan.input_slots])
    return plan, [np.array(r) if variables[n].value is not None else np.asarray(r)
                  for n, r in zip(names, results)]


def _feed_values(graph: Graph, feeds: Mapping[str, Any], nodes: list[Node], outputs: list[str],
                 held: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, value in feeds.items():
        info = graph.vars.get(name)
        if info is None:
            known = [n for n, v in graph.vars.items() if v.vtype is VariableType.PLACEHOLDER]
            raise UnknownVariableError(f"output: cannot feed {name!r}: no such variable"
                                       f"{did_you_mean(name, known)} (placeholders: {known})")
        if info.vtype is not VariableType.PLACEHOLDER:
            raise PlaceholderError(f"output: {name!r} is a {info.vtype.value}, not a "
                                   f"placeholder; only placeholders can be fed")
        values[name] = check_feed(info, value)
    for name in {i for n in nodes for i in n.inputs} | set(outputs):
        info = graph.vars[name]
        if info.value is not None:
            values[name] = info.value.item() if info.ttype.weak else info.value
        elif info.vtype is VariableType.PLACEHOLDER and name not in values:
            # ND4J: a placeholder's array set with ph.set_array(a) is its value until a feed
            # overrides it (already checked like a feed when it was set)
            value = held.get(name)
            if value is None:
                raise PlaceholderError(f"output: placeholder {name!r} ({info.ttype}) needs "
                                       f"a value; pass it as output({{{name!r}: array}}, "
                                       f"...) or set it with ph.set_array(array)")
            values[name] = value
    return values


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
