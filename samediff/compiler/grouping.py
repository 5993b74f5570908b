"""Which nodes a compiled plan fuses into which kernels: ``partition`` cuts the nodes into
``Group`` s of elementwise nodes (one kernel each) and single library nodes, in execution
order; ``fuse_reductions`` folds a trailing-dims reduction into the group computing its input,
``fuse_row_prologues`` the group computing a row kernel's input into the row kernel
(``plan.CompiledPlan`` runs them, then ``reduce.fuse_leading_sums``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..ops import TensorType
from .codegen import FLOATS
from .reduce import split_pattern, trailing_split
from .rowwise import row_anchor, row_broadcastable

BOOL = np.dtype(np.bool_)


def compute_dtype(types: list[TensorType]) -> np.dtype | None:
    strong = [t.dtype for t in types if not t.weak and t.dtype in FLOATS]
    if strong:
        return np.result_type(*strong)
    return None


def fusable(node: Any, types: Sequence[TensorType], rank0: bool = False) -> bool:
    """Can a kernel compute ``node`` element by element (``op.scalar``, float or bool values)?
    A rank-0 result only with ``rank0`` (a loop kernel's scalars): launching a kernel for one
    costs more than numpy's scalar math."""
    if not node.op.fusable or len(node.outputs) != 1:
        return False
    ins = [types[i] for i in node.inputs]
    out = types[node.outputs[0]]
    if not out.shape and not rank0:
        return False
    allowed = (*FLOATS, BOOL)
    if out.dtype not in allowed or any(t.dtype not in allowed and not t.weak for t in ins):
        return False
    if any(t.weak and t.dtype.kind not in "fib" for t in ins):
        return False
    if out.dtype in FLOATS and compute_dtype(ins) is None and not all(t.weak for t in ins):
        return False  # e.g. a float result computed from bool inputs only: leave it to numpy
    if any(len(t.shape) > len(out.shape) for t in ins):
        return False
    return bool(ins) and not all(t.weak for t in ins)


@dataclass
class Group:
    shape: tuple[int, ...]
    nodes: list = field(default_factory=list)
    produced: set = field(default_factory=set)
    rowwise: bool = False   # has a row anchor (an op with ``row_kernel``: softmax...)
    reduce_split: int | None = None  # ends with a reduction over dims[reduce_split:]
    prologue: int = 0       # row groups: elementwise nodes computing the anchor's input first
    sums: list = field(default_factory=list)  # leading-dims sums of its values (bias gradients)

    def accepts(self, node: Any, types: Sequence[TensorType]) -> bool:
        if self.rowwise:  # a row kernel can only read full rows, column vectors and scalars
            return all(i in self.produced or row_broadcastable(types[i], self.shape)
                       for i in node.inputs)
        return True


def partition(nodes: Sequence[Any], types: Sequence[TensorType]) -> list:
    """Steps in execution order: ``Group`` s of fused nodes and single library nodes."""
    steps: list = []
    step_of: dict[int, int] = {}
    for node in nodes:
        if row_anchor(node, types):
            steps.append(Group(types[node.outputs[0]].shape, rowwise=True))
            target = len(steps) - 1
            steps[target].nodes.append(node)
            steps[target].produced.update(node.outputs)
        elif fusable(node, types):
            shape = types[node.outputs[0]].shape
            k = max((step_of.get(i, -1) for i in node.inputs), default=-1)
            # Join the group that produced an input (all other inputs are ready by then), or
            # else the latest step if it is a same-shaped group: every input is ready before it.
            if k >= 0 and isinstance(steps[k], Group) and steps[k].shape == shape \
                    and steps[k].accepts(node, types):
                target = k
            elif steps and isinstance(steps[-1], Group) and steps[-1].shape == shape \
                    and steps[-1].accepts(node, types):
                target = len(steps) - 1
            else:
                steps.append(Group(shape))
                target = len(steps) - 1
            steps[target].nodes.append(node)
            steps[target].produced.update(node.outputs)
        else:
            steps.append(node)
            target = len(steps) - 1
        for o in node.outputs:
            step_of[o] = target
    return steps


def _consumers(steps: list) -> dict[Any, list]:
    """Value -> the nodes (inside groups or not) that read it."""
    consumers: dict[Any, list] = {}
    for step in steps:
        for n in (step.nodes if isinstance(step, Group) else [step]):
            for i in n.inputs:
                consumers.setdefault(i, []).append(n)
    return consumers


def fuse_reductions(steps: list, types: Sequence[TensorType], outputs: Sequence[Any]) -> list:
    """Fold a trailing-dims reduction into the elementwise group right before it when that
    group's values are read by nobody else (so the full-size intermediate need not exist)."""
    consumers, wanted = _consumers(steps), set(outputs)
    out: list = []
    for step in steps:
        prev = out[-1] if out else None
        split = None if isinstance(step, Group) else trailing_split(step, types)
        if (split is not None and isinstance(prev, Group) and not prev.rowwise
                and prev.reduce_split is None and step.inputs[0] in prev.produced
                and prev.shape == types[step.inputs[0]].shape and not prev.produced & wanted
                and _read_only_inside(prev, step, consumers) and _fits_split(prev, types, split)):
            prev.nodes.append(step)
            prev.reduce_split = split
            continue
        out.append(step)
    return out


def fuse_row_prologues(steps: list, types: Sequence[TensorType], outputs: Sequence[Any]) -> list:
    """Fold the elementwise group that computes a row anchor's input into the row kernel
    (``softmax(x @ w + b)``: the bias add happens in the row's first pass, into a scratch row)
    when nobody else reads that group's values and it reads only rows, column vectors and
    scalars, at least one of them a full row. The group need not be the step just before:
    in ``softmax(q @ k^T / 8)`` with the ``v`` projection recorded in between, the scale
    moves down to the softmax -- legal, as only the row kernel reads its values and its own
    inputs were all computed before it (buffer donation is decided later, on these steps)."""
    consumers, wanted = _consumers(steps), set(outputs)
    out: list = []
    producer: dict[Any, Group] = {}  # value -> the elementwise group in ``out`` computing it
    for step in steps:
        prev = (producer.get(step.nodes[0].inputs[0]) if isinstance(step, Group)
                and step.rowwise and step.prologue == 0 and step.nodes[0].inputs else None)
        if (prev is not None and prev.shape == step.shape
                and not prev.produced & wanted and _read_only_inside(prev, step.nodes[0], consumers,
                                                                      also=step.nodes)
                and _row_readable(prev, types, step.shape)
                and _reads_only_anchor_input(step, prev.produced)):
            step.nodes[:0] = prev.nodes
            step.produced |= prev.produced
            step.prologue = len(prev.nodes)
            del out[next(k for k, s in enumerate(out) if s is prev)]
            for v in prev.produced:
                producer.pop(v, None)
            out.append(step)
            continue
        out.append(step)
        if isinstance(step, Group) and not step.rowwise and step.reduce_split is None:
            producer.update(dict.fromkeys(step.produced, step))
    return out


def _reads_only_anchor_input(row: Group, produced: set) -> bool:
    """The row kernel's own nodes may read the prologue's result (the anchor's input: the
    scratch row) but no other prologue temporary, and the anchor reads it only as input 0."""
    x = row.nodes[0].inputs[0]
    if any(i in produced for i in row.nodes[0].inputs[1:]):
        return False
    return all(i == x for n in row.nodes[1:] for i in n.inputs if i in produced)


def _row_readable(group: Group, types: Sequence[TensorType], shape: tuple[int, ...]) -> bool:
    external = [i for n in group.nodes for i in n.inputs if i not in group.produced]
    return (all(row_broadcastable(types[i], shape) for i in external)
            and any(not types[i].weak and tuple(types[i].shape) == tuple(shape) for i in external))


def _read_only_inside(group: Group, reduction: Any, consumers: dict, also: Sequence = ()) -> bool:
    inside = {id(n) for n in group.nodes} | {id(reduction)} | {id(n) for n in also}
    return all(id(c) in inside for v in group.produced for c in consumers.get(v, ()))


def _fits_split(group: Group, types: Sequence[TensorType], split: int) -> bool:
    return all(types[i].weak or split_pattern(types[i].shape, group.shape, split) is not None
               for n in group.nodes for i in n.inputs if i not in group.produced)


__all__ = ["BOOL", "Group", "compute_dtype", "fuse_reductions", "fuse_row_prologues", "fusable", "partition"]
