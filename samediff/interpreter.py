"""The reference executor: runs graph nodes one by one with their numpy implementations.

It is the semantics every faster executor is tested against, and the fallback when a plan
cannot be compiled. It works on the plain graph structure (nodes with input/output names), so
SameDiff, traces and plans all share it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from . import profiler
from .array import explain_failure, type_of
from .arg_kinds import WEAK_SCALARS
from .errors import OpError
from .ir import needed_nodes

if TYPE_CHECKING:
    from .pictures import Picture

_WEAK = WEAK_SCALARS


def _typed_weak(node: Any, args: list) -> bool:
    return node.op.infer_types([type_of(a) for a in args], node.attrs)[0].weak


def run_nodes(nodes: Sequence[Any], values: dict[str, Any]) -> dict[str, Any]:
    """Execute ``nodes`` in order; ``values`` maps names to arrays (or weak Python scalars)
    and receives every output. Returns ``values``."""
    for node in nodes:
        args = [values[i] for i in node.inputs]
        try:
            out = node.op.impl(*args, **node.attrs.__dict__)
        except Exception as exc:
            err = explain_failure(node.op, args, node.attrs, exc)
            raise type(err)(f"{err} [in node {node.name!r}]") from exc
        if not isinstance(out, tuple):  # a multi-output op may return a 1-tuple (unstack of 1)
            if args and type(args[0]) in _WEAK and all(type(a) in _WEAK for a in args) \
                    and np.ndim(out) == 0 and _typed_weak(node, args):  # (rare: cheap guard first)
                # an op of weak Python scalars that is typed weak (lr * 0.5) gives a Python
                # scalar again: it promotes nothing downstream and kernels take it as a scalar
                # argument (reductions, cast... are typed strong and stay arrays)
                out = out.item() if hasattr(out, "item") else out
            elif type(out) is not np.ndarray:
                out = np.asarray(out)
            values[node.outputs[0]] = out
        else:
            if len(out) != len(node.outputs):
                raise OpError(f"{node.op.name}: produced {len(out)} outputs, graph expects "
                              f"{len(node.outputs)} [in node {node.name!r}]")
            for name, o in zip(node.outputs, out):
                values[name] = np.asarray(o)
    return values


class InterpreterPlan:
    """Runs the needed nodes one by one with their numpy implementations."""

    kind = "interpreter"

    def __init__(self, nodes: Sequence[Any], input_slots: Sequence[Any], output_slots: Sequence[Any],
                 types: Any = None, reason: str = "") -> None:
        producers = {o: n for n in nodes for o in n.outputs}
        self.nodes = needed_nodes(nodes, producers, output_slots)
        self.input_slots = tuple(input_slots)
        self.output_slots = tuple(output_slots)
        self.types = types  # every value's static type, when known (read by pictures)
        self.reason = reason  # why this plan is not compiled, if a compiler declined it

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        values: dict[Any, Any] = dict(zip(self.input_slots, inputs))
        if profiler.active:  # the only cost of the profiler when it is off
            return self._execute_profiled(values)
        run_nodes(self.nodes, values)
        return [values[s] for s in self.output_slots]

    def _execute_profiled(self, values: dict) -> list[Any]:
        """``execute`` with a trace event per node (``samediff.profiler``)."""
        into = profiler.plan_begin()
        try:
            start, recording = profiler.now_us(), 0.0
            inputs = [profiler.describe(values[s]) for s in self.input_slots] if into else []
            for node in self.nodes:
                t = profiler.now_us()
                run_nodes((node,), values)
                end = profiler.now_us()
                if into:
                    profiler.complete(into, node.op.name, "interpreter", t, profiler.step_args(
                        [node.op.name], values, node.inputs, node.outputs), end)
                    recording += profiler.now_us() - end
            if into:
                profiler.complete(into, f"plan ({len(self.nodes)} nodes)", "plan", start,
                                  {"kind": self.kind, "recording_us": recording,
                                   "inputs": inputs})
            return [values[s] for s in self.output_slots]
        finally:
            profiler.plan_end()

    def explain(self) -> str:
        head = f"plan: interpreter, {len(self.nodes)} node(s)"
        if self.reason:
            head += f" (fallback: {self.reason})"
        ops = ", ".join(n.op.name + n.op.describe_bodies(n.attrs) for n in self.nodes)
        return f"{head}\n  ops: {ops or '-'}"

    def picture(self, **how: Any) -> "Picture":
        """This plan as a ``samediff.pictures.Picture`` (``plan_picture``'s keywords)."""
        from .pictures import plan_picture  # (down a layer; drawing is not paid at import)
        return plan_picture(self, **how)

    def to_dot(self) -> str:
        """Graphviz DOT text of this plan (its nodes marked as run by the interpreter)."""
        return self.picture().to_dot()
