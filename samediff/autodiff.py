"""Reverse-mode autodiff over SameDiff graphs.

The backward pass is recorded into the same ``SameDiff`` with ordinary table ops (each op's
``grad`` rule is written with them), so gradients can be executed, traced, compiled, saved and
differentiated again. Gradient variables are named ``<name>-grad`` as in ND4J.

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

from typing import TYPE_CHECKING, Any

from .errors import NdError
from .namespaces import OpNamespace
from .ops.registry import NONDIFF

if TYPE_CHECKING:
    from .graph import SameDiff, SDVariable


class GradientError(NdError, ValueError):
    """A gradient was asked for that cannot be computed (no path, non-differentiable op...)."""


def _accumulate(F: Any, parts: list) -> Any:
    total = parts[0]
    for p in parts[1:]:
        total = F.add(total, p)
    return total


def unbroadcast(F: Any, g: Any, x: Any) -> Any:
    """Sum ``g`` back to ``x``'s shape where broadcasting expanded it."""
    if g.shape == x.shape and all(d >= 0 for d in x.shape):
        return g
    return F.reduce_to_like(g, x)


def build_gradients(sd: "SameDiff", losses: list[str], wrt: list[str]) -> dict[str, str]:
    """Record the backward pass of ``sum(losses)`` into ``sd``; return {variable: grad name}."""
    if not losses:
        raise GradientError("no loss variables: call v.mark_as_loss() or "
                            "sd.set_loss_variables(...) before asking for gradients")
    for name in (*losses, *wrt):
        sd._info(name)
    for name in losses:
        if sd._vars[name].ttype.dtype.kind != "f":
            raise GradientError(f"loss {name!r} is {sd._vars[name].ttype.dtype}; losses must be "
                                f"floating point")
    F = OpNamespace("gradient ops", None, sd._record)
    forward = list(sd._nodes)

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

    grads: dict[str, list] = {}
    blocked: list[str] = []
    first_new, old_vars = len(sd._nodes), set(sd._vars)
    try:
        with sd.name_scope("grad"):
            result = _backward(sd, F, forward, losses, wrt, depends, needed, grads, blocked)
    except BaseException:
        _prune(sd, first_new, old_vars, set())  # a failed build leaves the graph as it was
        raise
    _prune(sd, first_new, old_vars, set(result.values()))
    return result


def _prune(sd: "SameDiff", first_new: int, old_vars: set[str], keep: set[str]) -> None:
    """Drop backward nodes (and their variables) that no kept gradient depends on: rules also
    build gradients for constants and literals, which nobody asked for."""
    new_nodes = sd._nodes[first_new:]
    live = set(keep)
    used_nodes = []
    for node in reversed(new_nodes):
        if any(o in live for o in node.outputs):
            live.update(node.inputs)
            used_nodes.append(node)
    used = {id(n) for n in used_nodes}
    for node in new_nodes:
        if id(node) not in used:
            sd._node_names.discard(node.name)
            for o in node.outputs:
                sd._vars.pop(o, None)
    sd._nodes[first_new:] = [n for n in new_nodes if id(n) in used]
    referenced = {i for n in sd._nodes for i in n.inputs} | keep
    for name in [n for n, i in sd._vars.items() if n not in old_vars and i.producer is None
                 and n not in referenced]:
        del sd._vars[name]  # literals/constants created only for pruned nodes


def _backward(sd: "SameDiff", F: Any, forward: list, losses: list[str], wrt: list[str],
              depends: set, needed: set, grads: dict[str, list], blocked: list[str]) -> dict[str, str]:
    for name in losses:
        grads.setdefault(name, []).append(F.ones_like(sd._vars[name].sdvar))
    for node in reversed(forward):
        if not any(o in grads for o in node.outputs):
            continue
        if not any(i in depends and i in needed for i in node.inputs):
            continue
        rule = node.op.grad
        if rule is NONDIFF or rule is None:
            blocked.append(f"{node.name} ({node.op.name})")
            continue
        outs = [sd._vars[o].sdvar for o in node.outputs]
        gs = [_accumulate(F, grads[o]) if o in grads else None for o in node.outputs]
        if len(gs) > 1:  # multi-output ops: unused outputs contribute zeros
            gs = [g if g is not None else F.zeros_like(o) for g, o in zip(gs, outs)]
        ins = [sd._vars[i].sdvar for i in node.inputs]
        in_grads = rule(F, ins, outs, gs, node.attrs)
        if len(in_grads) != len(ins):
            raise GradientError(f"gradient rule of {node.op.name} returned {len(in_grads)} "
                                f"gradients for {len(ins)} inputs")
        for x, gx in zip(ins, in_grads):
            if gx is None or x.name not in depends:
                continue
            if x.dtype.kind != "f":  # an integer/bool value carries no gradient: name its source
                producer = sd._vars[x.name].producer
                if producer is not None:
                    blocked.append(f"{producer.name} ({producer.op.name})")
                continue
            gx = unbroadcast(F, gx, x)
            if gx.dtype != x.dtype:
                gx = F.cast(gx, dtype=x.dtype)
            grads.setdefault(x.name, []).append(gx)

    result = {}
    for name in wrt:
        if name not in grads:
            why = (f"; the only paths go through non-differentiable ops: {', '.join(blocked)}"
                   if blocked and name in needed else "; it does not affect any loss")
            raise GradientError(f"no gradient for {name!r} with respect to losses "
                                f"{losses}{why}")
        result[name] = _name_gradient(sd, name, _accumulate(F, grads[name]))
    return result


def _name_gradient(sd: "SameDiff", name: str, total: "SDVariable") -> str:
    """Rename a freshly built gradient to ND4J's ``<name>-grad`` when that name is free and the
    value is not shared with another gradient or forward variable."""
    wanted = f"{name}-grad"
    if wanted not in sd._vars and total.name.startswith("grad/"):
        sd._rename(total.name, wanted)
        return wanted
    return total.name


def gradient_names(sd: "SameDiff", wrt: list[str]) -> dict[str, str]:
    """Gradient variable names for ``wrt`` against the current losses (built once, cached)."""
    key = (tuple(sd._losses), tuple(wrt))
    cached = sd._grad_cache.get(key)
    if cached is None:
        bad = [n for n in wrt if sd._info(n).ttype.dtype.kind != "f"]
        if bad:
            raise GradientError(f"gradients exist only for floating-point variables; "
                                f"{bad} are not")
        cached = sd._grad_cache[key] = build_gradients(sd, list(sd._losses), list(wrt))
    return cached
