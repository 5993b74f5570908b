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
from .codegen import (_PREFIX, FLOATS, PRELUDE, VARIANTS, KernelSpec, _arg, decorator,
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
    for name, parallel in VARIANTS:
        lines += [decorator(parallel), f"def {name}({params}):",
                  f"    for r in {'prange' if parallel else 'range'}(o0.size):",
                  f"        acc = {acc.init}", "        for c in range(C):"]
        lines += ["            " + b for b in body]
        lines += [f"        o0[r] = {_PREFIX[dtype]}({acc.finish})", ""]
    return module_source(lines)
