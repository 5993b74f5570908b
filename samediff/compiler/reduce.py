"""Reductions fused with the elementwise chain that feeds them.

A reduction that declares how to fold it (``OpDef.accumulate``: ``sum``/``mean``/``max``/``min``)
over trailing dims (or all dims) whose input is computed by an elementwise group nobody else
reads: the kernel views the data as ``(rows, cols)`` (cols = the reduced trailing dims),
computes the chain per element and accumulates it in a register, so the full-size intermediate
is never written. Sums accumulate in float64 for float32 data.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..ops import TensorType
from ..ops.registry import Accumulator
from ..ops.families import normalize_dims
from .codegen import (_PREFIX, FLOATS, PRELUDE, KERNEL, KernelSpec, _arg, kernel_head,
                      kernel_params, module_source)
from .exprs import Emitter

def trailing_split(node: Any, types: Sequence[TensorType]) -> int | None:
    """Index of the first reduced dim if ``node`` is a fusable reduction (it declares
    ``accumulate``) over trailing dims of a float input."""
    if node.op.accumulate is None:
        return None
    x = types[node.inputs[0]]
    rank = len(x.shape)
    if x.dtype not in FLOATS or types[node.outputs[0]].dtype != x.dtype or rank == 0:
        return None
    dims = normalize_dims(node.attrs.dims, rank)
    if not dims or dims != tuple(range(dims[0], rank)) or any(d < 0 for d in x.shape):
        return None
    return dims[0]


def split_pattern(t_shape: tuple[int, ...], shape: tuple[int, ...], split: int) -> tuple[bool, bool] | None:
    """How an input is read in the (rows, cols) view: full, broadcast over rows (it has
    exactly the reduced trailing shape), one value per row (the kept leading dims, size 1 in
    the reduced ones: a ``keep_dims`` statistic, as in ``mean((x - m)**2)``), or a single
    value; None if none of these."""
    t_shape = tuple(t_shape)
    if t_shape == tuple(shape):
        return (False, False)
    stripped = t_shape
    while stripped and stripped[0] == 1:
        stripped = stripped[1:]
    if int(np.prod(stripped, dtype=np.int64)) == 1:
        return (True, True)
    if stripped == tuple(shape[split:]):
        return (True, False)
    padded = (1,) * (len(shape) - len(t_shape)) + t_shape
    if padded == tuple(shape[:split]) + (1,) * (len(shape) - split):
        return (False, True)
    return None


def render_reduce(spec: KernelSpec, acc: Accumulator) -> str:
    """Kernels: per row, run the chain over the columns and fold it into ``acc``."""
    reads = [f"a{k} = in{k}[{'0' if brow else 'r'}, {'0' if bcol else 'c'}]"
             for k, (_, (brow, bcol)) in enumerate(spec.arrays)]
    body = list(reads)
    for n in spec.nodes:
        expr = n.op.scalar(Emitter(n.compute or np.float64, n.attrs),
                           *(_arg(a, n.compute) for a in n.args))
        body.append(f"{n.out} = {_PREFIX[n.out_dtype]}({expr})")
    (value, dtype), = spec.outputs
    body.append("acc = " + acc.step.format(v=value))
    params = kernel_params(spec, ["o0", "C"])
    lines = list(PRELUDE)
    lines += kernel_head(KERNEL, params) + ["    for r in range(o0.size):",
              f"        acc = {acc.init}", "        for c in range(C):"]
    lines += ["            " + b for b in body]
    lines += [f"        o0[r] = {_PREFIX[dtype]}({acc.finish})", ""]
    return module_source(lines)


def leading_sum(node: Any, types: Sequence[TensorType]) -> int | None:
    """How many leading dims ``node`` sums away, if it is a bias-gradient-like sum: an op
    declaring ``shape_adjoint`` (it sums, broadcasts or reshapes input 0 to input 1's shape)
    whose float result has fewer elements than its input and is the input's trailing shape —
    so it can only be the sum over the leading dims (``reduce_to_like(g, b)`` for a bias
    ``b`` of shape ``g.shape[1:]``). Exact (non -1) shapes only."""
    if not node.op.shape_adjoint or node.op.scalar is not None or len(node.outputs) != 1:
        return None
    g, out = types[node.inputs[0]], types[node.outputs[0]]
    if g.dtype not in FLOATS or out.dtype != g.dtype or g.weak or any(d < 0 for d in g.shape):
        return None
    lead = len(g.shape) - len(out.shape)
    # (not over a single row, which the plan cache's broadcast patterns tell apart; an empty
    # batch fuses as any other size does, since plans are shared across sizes)
    if lead < 1 or tuple(g.shape[lead:]) != tuple(out.shape) \
            or int(np.prod(g.shape[:lead], dtype=np.int64)) == 1:
        return None
    return lead


def fuse_leading_sums(steps: list, types: Sequence[TensorType]) -> list:
    """Fold a leading-dims sum (``leading_sum``: a bias gradient) into the plain elementwise
    group that computes its input, as one more output of that kernel accumulated row after
    row: one pass over the data and one plan step fewer. The sum adds the rows in order in the
    input's dtype, starting from zeros, as numpy's ``sum(axis=0)`` of a C-ordered array does
    (bit for bit). Groups are the planner's ``Group`` (duck-typed: ``produced``, ``sums``)."""
    made: dict[Any, int] = {}   # value -> index (in ``out``) of the step computing it
    out: list = []
    for step in steps:
        lead = None if hasattr(step, "produced") else leading_sum(step, types)
        k = made.get(step.inputs[0], -1) if lead is not None else -1
        group = out[k] if k >= 0 else None
        # the other inputs (``like``: read for its shape) must exist when the group runs
        if group is None or not hasattr(group, "produced") or group.rowwise \
                or group.reduce_split is not None \
                or tuple(group.shape) != tuple(types[step.inputs[0]].shape) \
                or any(leading_sum(n, types) != lead for n in group.sums) \
                or any(made.get(i, -1) >= k for i in step.inputs[1:]):
            out.append(step)
            k = len(out) - 1
        else:
            group.nodes.append(step)
            group.sums.append(step)
            group.produced.update(step.outputs)
        for v in step.produced if hasattr(step, "produced") else step.outputs:
            made[v] = k
    return out
