"""Graph passes run before grouping: common-subexpression elimination, constant folding, and
folding an activation into the library op before it. (Dead code is never planned: plans
start from the nodes the outputs need.)

* **CSE**: two nodes with the same op, the same (interned, so identity-comparable) attribute
  record and the same inputs compute the same value; the later one is dropped and its outputs
  are aliased to the earlier one's. Random ops are never merged (each draws fresh numbers).
* **Constant folding**: a node whose inputs are all constants (ultimately: non-random ops with
  no inputs at all, like ``nd.ones(3)`` inside a trace) is computed once, when the plan is built.
  A node carrying sub-graphs (``op.bodies``) folds like any op — its impl runs the taken body —
  unless a body draws random numbers.

Both change which buffer backs a value, so the plan copies an output that is a folded constant
or that appears twice among the outputs: the user never holds an array the plan will reuse.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from .. import interpreter
from ..kernels import frozen


@dataclass
class Simplified:
    nodes: list                               # what remains to run, in order
    alias: dict = field(default_factory=dict)   # dropped output -> surviving value
    constants: dict = field(default_factory=dict)  # slot -> value computed at plan time
    identities: int = 0                          # shape adjoints dropped as identities

    def resolve(self, slot: Any) -> Any:
        return self.alias.get(slot, slot)


def simplify(nodes: Sequence[Any], exact_types: Any = None) -> Simplified:
    """CSE and constant folding; with ``exact_types`` (the plan only ever sees inputs of these
    shapes) also drop shape adjoints (``op.shape_adjoint``: ``reduce_to_like``...) that are
    identities for these shapes and fold ``op.type_only`` ops (``ones_like``, which gradient
    rules use to count elements when shapes are unknown while recording)."""
    out = Simplified(nodes=[])
    seen: dict[tuple, Any] = {}
    for node in nodes:
        inputs = tuple(out.resolve(i) for i in node.inputs)
        if inputs != node.inputs:
            node = replace(node, inputs=inputs)
        if exact_types is not None and node.op.shape_adjoint \
                and exact_types[node.inputs[0]] == exact_types[node.outputs[0]]:
            out.alias[node.outputs[0]] = inputs[0]
            out.identities += 1
            continue
        if exact_types is not None and node.op.type_only and not exact_types[inputs[0]].weak:
            t = exact_types[inputs[0]]  # the value depends on the input's (exact) type only
            values = {inputs[0]: np.empty(t.shape, t.dtype)}
            interpreter.run_nodes((node,), values)
            out.constants[node.outputs[0]] = _frozen(values[node.outputs[0]])
            continue
        if not draws_random(node):
            key = (node.op, node.attrs, inputs)
            twin = seen.get(key)
            if twin is not None:
                out.alias.update(zip(node.outputs, twin.outputs))
                continue
            seen[key] = node
            if all(i in out.constants for i in inputs):
                values = dict(out.constants)
                interpreter.run_nodes((node,), values)
                out.constants.update({o: _frozen(values[o]) for o in node.outputs})
                continue
        out.nodes.append(node)
    return out


def _frozen(value: Any) -> Any:
    """A folded constant, frozen: the plan's own, never written (its outputs are handed out as
    copies), so kernels may keep what they derive from it (``kernels.frozen``)."""
    return frozen.freeze(value) if isinstance(value, np.ndarray) else value


def draws_random(node: Any) -> bool:
    """Does the node draw random numbers — its op (``op.random``), or an op in one of the
    sub-graphs it carries (``op.bodies``: a ``cond`` whose branch samples)? Such nodes are
    never merged or folded. A node with bodies otherwise stays one library call."""
    if node.op.random:
        return True
    return any(draws_random(n) for _, g in node.op.body_graphs(node.attrs) for n in g.nodes)


# Read from op facts, not op names: a node whose op declares ``activation`` (relu, when its
# attributes match) folds into the producer of its input when that op declares an ``epilogue``
# attribute, still "none", that takes the activation's name (conv2d's ``activation``).
def fold_epilogues(nodes: Sequence[Any], outputs: Sequence[Any]) -> list:
    """``relu(conv2d(...))`` -> ``conv2d(..., activation="relu")`` when nothing else reads
    the convolution's own result: the kernel applies the relu while each slab of output is
    in cache, and one pass over the activation and one array are saved. The fused node
    writes the relu's output slot, with bit for bit the values the relu computed from the
    convolution's (``kernels.im2col.relu_span``)."""
    producers = {o: n for n in nodes for o in n.outputs}
    readers: dict[Any, int] = {}
    for n in nodes:
        for i in n.inputs:
            readers[i] = readers.get(i, 0) + 1
    kept, fused = set(outputs), {}
    for n in nodes:
        act = n.op.activation
        if act is None or not act.matches(n.attrs):
            continue
        src = n.inputs[0]
        p = producers.get(src)
        attr = p.op.epilogue if p is not None else None
        if attr is None or getattr(p.attrs, attr) != "none" or readers[src] != 1 \
                or src in kept or id(p) in fused or not _takes(p.op, attr, act.name):
            continue
        attrs = p.op.make_attrs({**vars(p.attrs), attr: act.name})
        fused[id(p)] = replace(p, attrs=attrs, outputs=(n.outputs[0],) + p.outputs[1:])
        fused[id(n)] = None
    return [fused.get(id(n), n) for n in nodes if fused.get(id(n), n) is not None]


def _takes(op: Any, attr: str, value: str) -> bool:
    """Does ``op``'s attribute ``attr`` accept ``value`` (an activation its epilogue applies)?"""
    kind, _ = op.attr_kinds[attr]
    try:
        return kind.coerce(value) == value
    except (TypeError, ValueError):
        return False


def epilogue_of(node: Any) -> str:
    """The activation a library node applies in its own pass (``"none"``: none)."""
    attr = node.op.epilogue
    return "none" if attr is None else getattr(node.attrs, attr)


def protect_outputs(values: Sequence[Any], shared: Sequence[bool]) -> list[Any]:
    """Copy the outputs flagged ``shared`` (constants, or values that appear twice)."""
    return [np.array(v, copy=True) if s else v for v, s in zip(values, shared)]
