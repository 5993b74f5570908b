"""Filling a ``Picture`` from an IR graph, a plan, or a training step's two plans.

Plans are read through their public attributes only (duck-typed, so this module sits below
the compiler and the compiler may import it): ``input_slots``, ``output_slots``, ``types``,
``reason`` and either ``steps`` (a compiled plan: fused groups have ``nodes`` and ``kernels``,
``kernels is None`` meaning the group fell back to the interpreter; any other step is one node
run as a library call) or ``nodes`` (an interpreter plan).

>>> import numpy as np
>>> from samediff.ir import Graph, VariableType
>>> from samediff.ops import TensorType, get_op
>>> g = Graph()
>>> _ = g.add_var("x", VariableType.PLACEHOLDER, TensorType((-1, 3), np.dtype("float32")))
>>> _ = g.record(get_op("exp"), ("x",), name="y")
>>> [(b.lines, b.kind) for b in graph_picture(g).boxes.values()]
[(('x', 'placeholder float32[?,3]'), 'placeholder'), (('y', 'exp', 'float32[?,3]'), 'op')]
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from ..ir import Graph, VariableType
from .model import Picture

#: A fused group's label, by the step's class (the compiler's kernel families).
_KERNEL_NAMES = {"RowStep": "row kernel", "ReduceStep": "reduction kernel"}
PhaseOf = Callable[[Any], str]


def _name(node: Any) -> str:
    return str(node.name) if node.name != "" else node.op.name


def _op_lines(node: Any, type_of: Callable[[Any], Any]) -> list[str]:
    """Name, op (with its bodies' names) and the output types (one line per output, with the
    output's name where it is not the node's)."""
    lines = [_name(node)]
    op_line = node.op.name + node.op.describe_bodies(node.attrs)
    if op_line != lines[0]:
        lines.append(op_line)
    outs = node.outputs
    for j, o in enumerate(outs):
        t = type_of(o)
        text = "?" if t is None else str(t)
        if isinstance(o, str) and o != node.name:  # a value named apart from its node (w-grad)
            text = f"{o}: {text}"
        elif len(outs) > 1:
            text = f":{j} {text}"
        lines.append(text)
    return lines


class _Builder:
    """Adds graphs and plans to one picture; ``values`` maps a value id to the box that
    produces (or is) it, so a later plan's edges start from an earlier plan's boxes."""

    def __init__(self, pic: Picture) -> None:
        self.pic = pic
        self.values: dict[Any, str] = {}
        self.count = 0

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def wire(self, node: Any, box: str, values: dict, missing: Callable[[Any], str]) -> None:
        for i in dict.fromkeys(node.inputs):
            src = values.get(i)
            if src is None:
                src = values[i] = missing(i)
            self.pic.edge(src, box)
        for o in node.outputs:
            values[o] = box

    # -- graphs -------------------------------------------------------------------------
    def graph(self, graph: Graph, cluster: str | None, values: dict) -> None:
        pic = self.pic
        for name, var in graph.vars.items():
            if var.vtype is not VariableType.ARRAY:
                kind = var.vtype.value.lower()
                values[name] = pic.box(self.fresh("v"), [str(name), f"{kind} {var.ttype}"],
                                       kind, cluster, output=name in graph.outputs)
        wanted = set(graph.outputs)
        for node in graph.nodes:
            home = self.bodies_home(node, cluster)
            box = pic.box(self.fresh("n"), _op_lines(node, lambda o: graph.vars[o].ttype),
                          "op", home, output=bool(wanted.intersection(node.outputs)))
            self.wire(node, box, values, lambda i: self.unknown(i, cluster))
            self.bodies(node, box, home)

    def unknown(self, value: Any, cluster: str | None, kind: str = "input",
                type_text: str = "") -> str:
        name = value if isinstance(value, str) else f"%{value}"  # a trace's integer slot
        return self.pic.box(self.fresh("i"), [name] + ([type_text] if type_text else []),
                            kind, cluster)

    def bodies_home(self, node: Any, cluster: str | None) -> str | None:
        """A node with sub-graphs sits in a cluster of its own, with its bodies beside it."""
        if not node.op.bodies:
            return cluster
        return self.pic.cluster(self.fresh("c"), f"{node.op.name} {_name(node)}", "cond", cluster)

    def bodies(self, node: Any, box: str, home: str | None) -> None:
        for attr, body in node.op.body_graphs(node.attrs):
            label = f"{attr}({', '.join(map(str, body.inputs))}) -> " \
                    f"{', '.join(map(str, body.outputs))}"
            cid = self.pic.cluster(self.fresh("b"), label, "body", home)
            inner: dict = {}
            self.graph(body, cid, inner)
            for name in body.inputs:  # the node hands its operands to the body's inputs
                self.pic.edge(box, inner[name], dashed=True, label=attr)

    # -- plans --------------------------------------------------------------------------
    def plan(self, plan: Any, cluster: str | None, kinds: Mapping[Any, str],
             phase_of: PhaseOf | None = None) -> None:
        pic, values = self.pic, self.values
        types = getattr(plan, "types", None)

        def type_of(slot: Any) -> Any:
            try:
                return None if types is None else types[slot]
            except (KeyError, IndexError, TypeError):
                return None

        for slot in plan.input_slots:
            if slot not in values:
                t = type_of(slot)
                values[slot] = self.unknown(slot, None, kinds.get(slot, "input"),
                                            "" if t is None else str(t))
        constants = getattr(plan, "constants", {})

        def missing(slot: Any) -> str:  # a constant the compiler baked into the plan
            t = type_of(slot)
            return self.unknown(slot, cluster, "constant" if slot in constants else "input",
                                "" if t is None else f"constant {t}")

        phases: dict[str, str] = {}

        def home(nodes: Sequence[Any]) -> str | None:
            """The phase cluster (forward/backward) all ``nodes`` belong to, else ``cluster``."""
            if phase_of is None:
                return cluster
            found = {phase_of(n) for n in nodes}
            if len(found) != 1:
                return cluster
            phase = found.pop()
            if phase not in phases:
                phases[phase] = pic.cluster(self.fresh("p"), phase, phase, cluster)
            return phases[phase]

        def add(node: Any, kind: str, where: str | None, note: str = "") -> None:
            where = self.bodies_home(node, where)
            box = pic.box(self.fresh("n"), _op_lines(node, type_of) + ([note] if note else []),
                          kind, where)
            self.wire(node, box, values, missing)
            self.bodies(node, box, where)

        steps = getattr(plan, "steps", None)
        if steps is None:  # an interpreter plan: every node runs through numpy, one by one
            kind = "fallback" if plan.reason else "interpreted"
            note = "interpreter fallback" if plan.reason else "interpreter"
            for node in plan.nodes:
                add(node, kind, home([node]), note)
        for k, step in enumerate(steps or ()):
            if hasattr(step, "kernels") and hasattr(step, "nodes"):  # a fused group
                ok = step.kernels is not None
                what = _KERNEL_NAMES.get(type(step).__name__, "fused kernel")
                label = f"step {k}: {what}" if ok else \
                    f"step {k}: {what} FALLBACK to the interpreter ({_short(step.reason)})"
                cid = pic.cluster(self.fresh("k"), label, "kernel" if ok else "fallback",
                                  home(step.nodes))
                for node in step.nodes:
                    add(node, "kernel" if ok else "fallback", cid,
                        "" if ok else "interpreter fallback")
            else:
                add(step, "library", home([step]), f"step {k}: library call")
        for slot in plan.output_slots:
            box = values.get(slot)
            if box is not None and pic.boxes[box].kind not in ("placeholder", "variable"):
                pic.boxes[box].output = True


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def graph_picture(graph: Graph, title: str = "graph") -> Picture:
    """The picture of an IR graph: inputs styled by kind, one box per op (name, op, output
    types), control-flow bodies as nested clusters."""
    b = _Builder(Picture(title))
    b.graph(graph, None, b.values)
    return b.pic


def plan_picture(plan: Any, title: str | None = None, kinds: Mapping[Any, str] = {},  # noqa: B006
                 phase_of: PhaseOf | None = None) -> Picture:
    """The picture of a compiled or interpreter plan: a cluster per fused kernel, library
    calls and interpreter fallbacks marked. ``kinds`` styles the plan's inputs by variable
    kind (``"placeholder"``...); ``phase_of(node)`` groups nodes into phase clusters."""
    reason = f" (fallback: {_short(plan.reason)})" if getattr(plan, "reason", "") else ""
    b = _Builder(Picture(title or f"{plan.kind} plan{reason}"))
    b.plan(plan, None, kinds, phase_of)
    return b.pic


def step_picture(gradients: Any, update: Any, checked: Sequence[Any],
                 kinds: Mapping[Any, str] = {},  # noqa: B006 (read only)
                 phase_of: PhaseOf | None = None, title: str = "training step") -> Picture:
    """A training step's two plans: the gradients plan (forward and backward phases, when
    ``phase_of`` tells them apart), the finiteness check of ``checked``, then the update plan."""
    b = _Builder(Picture(title))
    pic = b.pic
    g = pic.cluster("gradients", f"gradients plan ({gradients.kind})", "plan")
    b.plan(gradients, g, kinds, phase_of)
    check = pic.box("check", ["all_finite", f"loss + {len(checked) - 1} gradient(s)",
                              "update runs only if true"], "check")
    for name in checked:
        if name in b.values:
            pic.edge(b.values[name], check, dashed=True)
    u = pic.cluster("update", f"update plan ({update.kind}): runs after the check", "update")
    b.plan(update, u, kinds)
    return pic
