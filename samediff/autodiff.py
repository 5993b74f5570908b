"""Reverse-mode autodiff as a pure graph transform: ``grad(graph, losses, wrt)`` returns a new
graph with the backward pass (tinygrad's ``compute_gradient`` shape).

The backward pass is recorded with ordinary table ops (each op's ``grad`` rule is written with
them, on graph handles), so gradients can be executed, traced, compiled, saved and
differentiated again. Gradient variables are named ``<name>-grad`` as in ND4J. ``SameDiff``
adopts the new graph (``calculate_gradients``); the training step builds its own step graph
from it; ``nd.grad`` / ``nd.value_and_grad`` differentiate Python functions with it.

Which variables get gradients: every float VARIABLE or ARRAY on a path between the requested
variables and the losses; placeholders and constants only when asked for by name. Several
losses are summed; a non-scalar loss counts as the sum of its elements.

>>> import numpy as np
>>> from samediff import SameDiff
>>> sd = SameDiff.create()
>>> w = sd.var("w", np.array([1.0, 2.0]))
>>> loss = (w * w).sum().mark_as_loss()
>>> sd.calculate_gradients({}, "w")["w"].numpy().tolist()
[2.0, 4.0]
"""
from __future__ import annotations

from typing import Any, Mapping

from .errors import GradientError  # noqa: F401  (raised here; importers may take it from here)
from .ir import Graph
from .ops.call import op
from .ops.registry import _DIFFERENTIATED, NONDIFF
from .recorder import GraphRecorder, GraphValue


def _accumulate(parts: list) -> Any:
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def unbroadcast(g: Any, x: Any) -> Any:
    """Sum ``g`` back to ``x``'s shape where broadcasting expanded it."""
    if g.shape == x.shape and all(d >= 0 for d in x.shape):
        return g
    return op.reduce_to_like(g, x)


def grad(graph: Graph, losses: list[str], wrt: list[str], scope: str = "grad",
         seeds: Mapping[str, str] | None = None) -> tuple[Graph, dict[str, str]]:
    """The backward pass of ``sum(losses)`` as a graph transform: returns a **new** graph —
    ``graph`` plus the nodes computing the gradients of ``wrt`` (named ``<name>-grad`` where
    that name is free, else under ``scope/``) — and ``{variable: gradient name}``. ``graph``
    itself is not changed, also when this raises.

    ``seeds``: ``{loss: variable}`` — start the loss's backward pass from that variable (its
    cotangent, of the loss's type) instead of ones: a vector-Jacobian product.

    >>> import numpy as np
    >>> from samediff.ir import VariableType
    >>> from samediff.ops import TensorType
    >>> g = Graph()
    >>> x = GraphRecorder(g).add(VariableType.VARIABLE, TensorType((2,), np.dtype("float64")),
    ...                          "x", np.array([1.0, 2.0]))
    >>> y = (x * x).sum()
    >>> new, names = grad(g, [y.name], ["x"])
    >>> names, len(g.nodes) < len(new.nodes)
    ({'x': 'x-grad'}, True)
    """
    if not losses:
        raise GradientError("no loss variables: call v.mark_as_loss() or "
                            "sd.set_loss_variables(...) before asking for gradients")
    for name in (*losses, *wrt):
        graph.var(name)
    for name in losses:
        if graph.vars[name].ttype.dtype.kind != "f":
            raise GradientError(f"loss {name!r} is {graph.vars[name].ttype.dtype}; losses must "
                                f"be floating point")
    bad = [n for n in wrt if graph.vars[n].ttype.dtype.kind != "f"]
    if bad:
        raise GradientError(f"gradients exist only for floating-point variables; {bad} are not")
    forward = list(graph.nodes)
    # variables downstream of what we differentiate with respect to
    depends = set(wrt)
    for node in forward:
        if any(i in depends for i in node.inputs):
            depends.update(node.outputs)
    # variables upstream of the losses
    needed = set(losses)
    for node in reversed(forward):
        if any(o in needed for o in node.outputs):
            needed.update(node.inputs)
    on_path = [n for n in graph.vars if n in depends and n in needed
               and graph.vars[n].ttype.dtype.kind == "c"]
    if on_path:  # the rules are written for real values (no conjugates, no Wirtinger calculus)
        raise GradientError(f"the gradient flows through complex values {on_path[:3]}; "
                            f"gradients are real-valued only: differentiate a real function "
                            f"of real variables, with the complex part outside the path")

    # Rules also build gradients nobody asked for (of constants, literals): record into a
    # scratch copy, then keep only what the requested gradients need.
    scratch = graph.copy()
    rec = GraphRecorder(scratch)
    differentiated = _DIFFERENTIATED.set(frozenset(depends))  # (``needs_gradient``)
    try:
        with scratch.name_scope(scope):
            totals = _backward(rec, forward, losses, wrt, depends, needed, seeds or {})
    finally:
        _DIFFERENTIATED.reset(differentiated)
    result: dict[str, str] = {}
    renamed: dict[str, str] = {}  # one value may be the gradient of several variables
    for name, total in totals.items():
        current = renamed.get(total.name, total.name)
        result[name] = renamed[total.name] = _name_gradient(scratch, name, current, scope)
    return scratch.subgraph([*graph.vars, *result.values()], keep=graph.vars), result


def _keep_workspace(rec: GraphRecorder, node: Any, ins: list) -> tuple[Any, list]:
    """Record ``node`` again with its workspace on (``OpDef.workspace``) in place of the node:
    the same outputs under the same names, plus the workspace its gradient rule reuses.
    Returns the new node's attributes and outputs (the workspace last)."""
    attrs = {**vars(node.attrs), node.op.workspace: True}
    new = rec.record(node.op, ins, attrs)
    rec.graph.substitute(node, [v.name for v in new[:len(node.outputs)]])
    outs = [rec.handle(o) for o in node.outputs] + [new[-1]]
    return node.op.make_attrs(attrs), outs


def _backward(rec: GraphRecorder, forward: list, losses: list[str], wrt: list[str],
              depends: set, needed: set, seeds: Mapping[str, str]) -> dict[str, GraphValue]:
    variables = rec.graph.vars
    value = rec.handle
    grads: dict[str, list] = {}
    blocked: list[str] = []
    for name in losses:
        seed = seeds.get(name)
        grads.setdefault(name, []).append(op.ones_like(value(name)) if seed is None
                                          else value(seed))
    for node in reversed(forward):
        if not any(o in grads for o in node.outputs):
            continue
        if not any(i in depends and i in needed for i in node.inputs):
            continue
        rule = node.op.grad
        if rule is NONDIFF or rule is None:
            blocked.append(f"{node.name} ({node.op.name})")
            continue
        outs = [value(o) for o in node.outputs]
        gs = [_accumulate(grads[o]) if o in grads else None for o in node.outputs]
        if len(gs) > 1:  # multi-output ops: unused outputs contribute zeros
            gs = [g if g is not None else op.zeros_like(o) for g, o in zip(gs, outs)]
        ins = [value(i) for i in node.inputs]
        attrs = node.attrs
        if node.op.workspace is not None and not getattr(attrs, node.op.workspace):
            attrs, outs = _keep_workspace(rec, node, ins)
        in_grads = rule(ins, outs, gs, attrs)
        if len(in_grads) != len(ins):
            raise GradientError(f"gradient rule of {node.op.name} returned {len(in_grads)} "
                                f"gradients for {len(ins)} inputs")
        for x, gx in zip(ins, in_grads):
            if gx is None or x.name not in depends:
                continue
            if x.dtype.kind != "f":  # an integer/bool value carries no gradient: name its source
                producer = variables[x.name].producer
                if producer is not None:
                    blocked.append(f"{producer.name} ({producer.op.name})")
                continue
            gx = unbroadcast(gx, x)
            if gx.dtype != x.dtype:
                gx = op.cast(gx, dtype=x.dtype)
            grads.setdefault(x.name, []).append(gx)

    result = {}
    for name in wrt:
        if name not in grads:
            why = (f"; the only paths go through non-differentiable ops: {', '.join(blocked)}"
                   if blocked and name in needed else "; it does not affect any loss")
            raise GradientError(f"no gradient for {name!r} with respect to losses "
                                f"{losses}{why}")
        result[name] = _accumulate(grads[name])
    return result


def _name_gradient(graph: Graph, name: str, total: str, scope: str) -> str:
    """Rename a freshly built gradient to ND4J's ``<name>-grad`` when that name is free and the
    value is not shared with another gradient or forward variable."""
    wanted = f"{name}-grad"
    if wanted not in graph.vars and total.startswith(scope + "/"):
        graph.rename(total, wanted)
        return wanted
    return total
