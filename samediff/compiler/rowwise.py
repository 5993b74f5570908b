"""Row-wise fused kernels: a row anchor (an op declaring ``row_kernel``: ``layer_norm``,
``softmax``, ``log_softmax``) over the last axis, followed by the elementwise ops that consume
its result, in one kernel. The anchor's ``RowKernel.variant`` picks the row algorithm below
(``"normalize"``, ``"softmax"``, ``"log_softmax"``).

Arrays are viewed as 2-D ``(rows, C)``; each row is handled by one iteration of the outer
loop: the row statistics (mean/variance, or max/sum of exponentials) are computed in a couple
of passes over the row while it sits in cache, then one pass applies the normalization and the
epilogue and writes the output. Statistics accumulate in float64 for float32 inputs, and a
float32 layer_norm row is rescaled by a power of two when its spread is large, so rows up to
3.4e38 neither overflow nor lose digits.

Edge values follow the eager ops (``ops/nn.py``) by plain arithmetic, with no special cases:
a row holding +inf or NaN gives NaN throughout (``x - max`` is ``inf - inf``), an all -inf row
``0 / 0`` = NaN, and rows of length 0 give an empty result.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..ops import TensorType
from ..ops.families import normalize_dims
from .codegen import (_PREFIX, FLOATS, PRELUDE, KERNEL, KernelSpec, NodeSpec, _arg,
                      kernel_head, module_source, kernel_params)
from .exprs import Emitter

#: the row algorithms ``render_rows`` implements (every ``RowKernel.VARIANTS``)
ROW_VARIANTS = ("normalize", "softmax", "log_softmax")


def row_anchor(node: Any, types: Sequence[TensorType]) -> bool:
    """Can ``node`` start a row-wise kernel? (A row anchor over its last axis, float data.)"""
    row = node.op.row_kernel
    if row is None:
        return False
    x, out = types[node.inputs[0]], types[node.outputs[0]]
    rank = len(x.shape)
    if rank == 0 or x.dtype not in FLOATS or out.dtype != x.dtype or x.shape[-1] < 0:
        return False
    axis = getattr(node.attrs, row.axis)
    if isinstance(axis, tuple):  # a dims attribute: it must be the last dim alone
        if normalize_dims(axis, rank) != (rank - 1,):
            return False
    elif axis not in (-1, rank - 1):
        return False
    return all(row_broadcastable(types[i], x.shape) for i in node.inputs[1:])


def row_epsilon(node: Any) -> float | None:
    """The anchor's epsilon (variant "normalize"), or None."""
    name = node.op.row_kernel.epsilon
    return None if name is None else float(getattr(node.attrs, name))


def row_broadcastable(t: TensorType, shape: tuple[int, ...]) -> bool:
    """Inputs a row kernel can read: the full shape, a per-column vector, or a scalar."""
    if t.weak:
        return True
    dims = tuple(t.shape)
    while dims and dims[0] == 1:
        dims = dims[1:]
    return dims in ((), (shape[-1],)) or tuple(t.shape) == tuple(shape)


def row_pattern(t_shape: tuple[int, ...], shape: tuple[int, ...]) -> tuple[bool, bool]:
    """Broadcast pattern of an input over the 2-D (rows, C) view."""
    full = tuple(t_shape) == tuple(shape)
    return (not full, tuple(t_shape)[-1:] in ((), (1,)) and shape[-1] != 1)


def render_rows(spec: KernelSpec, variant: str, eps: float | None, prologue: int = 0) -> str:
    """Source of the row kernels. ``spec.nodes`` are ``prologue`` elementwise nodes computing
    the anchor's input (evaluated once per element into a scratch row), the anchor (computed
    by the row algorithm ``variant``, one of ``ROW_VARIANTS``), then the epilogue."""
    if variant not in ROW_VARIANTS:
        raise ValueError(f"unknown row kernel variant {variant!r}; implemented: {ROW_VARIANTS}")
    first, epilogue = spec.nodes[prologue], spec.nodes[prologue + 1:]
    dt = _PREFIX[first.out_dtype]
    e_exp = Emitter(first.out_dtype, None).f("exp")  # vectorizable exp for float32
    reads = []
    for k, (_, (brow, bcol)) in enumerate(spec.arrays):
        reads.append(f"a{k} = in{k}[{'0' if brow else 'r'}, {'0' if bcol else 'c'}]")
    x = first.args[0]
    pre: list[str] = []
    # scratch rows are allocated once per call, not per row (an allocation and a free per
    # row of 128 cost ~10 % of a softmax kernel)
    scratch: list[str] = []
    if prologue:  # x is a temporary: compute the row once, then read it like an input row
        scratch.append(f"xr = np.empty(C, {dt})")
        pre = ["for c in range(C):"]
        pre += ["    " + b for b in reads + _node_lines(spec.nodes[:prologue])]
        pre.append(f"    xr[c] = {x}")
        load_x, row = f"{x} = xr[c]", "xr"
    else:
        load_x, row = reads[int(x[1:])], _row_expr(x, spec)
    if variant == "normalize":
        # statistics accumulate in float64 (ops/nn.py does the same); the normalization runs
        # in the kernel's dtype: float32 as (x / p - mu / p) * (p / std) - c with p a power of
        # two and c the rounding of mu / p (see row_norm_f32): no overflow for rows near
        # 3.4e38, no digits lost to the float32 mean, and the eager op's arithmetic
        stats = [f"mu, var = row_mean_var({row})"]
        if first.out_dtype == np.float32:
            stats.append(f"inv_p, mu, rstd, mu_c = row_norm_f32(mu, var, {float(eps)!r})")
            normalized = f"({x} * inv_p - mu) * rstd - mu_c"
        else:
            stats.append(f"rstd = 1.0 / math.sqrt(var + {float(eps)!r})")
            normalized = f"({x} - mu) * rstd"
        g = _arg(first.args[1], first.compute)
        b = _arg(first.args[2], first.compute) if len(first.args) > 2 else None
        value = f"{dt}({normalized}) * {g}" + (f" + {b}" if b else "")
    else:
        # exponentials go to a scratch row (vectorized exp), summed by a reassociated loop
        scratch.append(f"tmp = np.empty(C, {dt})")
        # (no columns: no max to take, and none is read)
        stats = [f"m = {dt}(row_max({row}, C)) if C else {dt}(0)", "for c in range(C):",
                 f"    {load_x}", f"    tmp[c] = {e_exp}({x} - m)",
                 f"acc = {dt}(row_sum(tmp))"]
        if variant == "softmax":
            value = f"{dt}(tmp[c] / acc)"
        else:
            # (x - m) - log(acc), as the eager op: x - (m + log(acc)) loses log(acc) next to
            # a huge m (log_softmax([1e30, 1e30]) must be log(0.5), not 0)
            stats.append(f"lsum = {dt}(math.log(acc))")
            value = f"{dt}({dt}({x} - m) - lsum)"
    body = list(reads) + ([load_x] if prologue else []) + [f"{first.out} = {dt}({value})"]
    body += _node_lines(epilogue)
    body += [f"o{k}[r, c] = {ref}" for k, (ref, _) in enumerate(spec.outputs)]
    params = kernel_params(spec, [f"o{k}" for k in range(len(spec.outputs))])
    lines = list(PRELUDE)
    lines += kernel_head(KERNEL, params) + ["    R = o0.shape[0]", "    C = o0.shape[1]"]
    lines += ["    " + s for s in scratch] + ["    for r in range(R):"]
    lines += ["        " + s for s in pre + stats]
    lines.append("        for c in range(C):")
    lines += ["            " + b for b in body]
    lines.append("")
    return module_source(lines)


def _node_lines(nodes: Sequence[Any]) -> list[str]:
    """One typed assignment per elementwise node."""
    return [f"{n.out} = {_PREFIX[n.out_dtype]}("
            f"{n.op.scalar(Emitter(n.compute or np.float64, n.attrs), *(_arg(a, n.compute) for a in n.args))})"
            for n in nodes]


def _row_expr(ref: str, spec: KernelSpec) -> str:
    """The anchor input's row ``r`` as a 1-D view (it is always a full-shape array)."""
    return f"in{ref[1:]}[r]"


def spec_for_rows(nodes: Sequence[Any], arrays: list, scalars: list, outputs: list,
                  types: Sequence[TensorType], shape: tuple[int, ...]) -> KernelSpec:
    refs = {s: f"a{k}" for k, s in enumerate(arrays)}
    refs.update({s: f"s{k}" for k, s in enumerate(scalars)})
    patterns = tuple((types[s].dtype, row_pattern(types[s].shape, shape)) for s in arrays)
    specs = []
    for k, n in enumerate(nodes):
        ins = [types[i] for i in n.inputs]
        strong = [t.dtype for t in ins if not t.weak and t.dtype in FLOATS]
        specs.append(NodeSpec(n.op, n.attrs, tuple(refs[i] for i in n.inputs), f"t{k}",
                              types[n.outputs[0]].dtype,
                              np.result_type(*strong) if strong else None))
        refs[n.outputs[0]] = f"t{k}"
    return KernelSpec(2, False, patterns, len(scalars), tuple(specs),
                      tuple((refs[s], types[s].dtype) for s in outputs))


def row_view_shape(a_shape: tuple[int, ...], pattern: tuple[bool, bool],
                   shape: tuple[int, ...]) -> tuple[int, int] | None:
    """The 2-D shape an input of shape ``a_shape`` is read as by a row kernel over ``shape``,
    or None if it does not fit ``pattern``."""
    brow, bcol = pattern
    cols = shape[-1] if shape else 1
    if not brow:  # explicit row count: reshape(-1, 0) is ambiguous for empty rows
        return (math.prod(shape[:-1]), cols) if tuple(a_shape) == tuple(shape) else None
    size = math.prod(a_shape)
    if size == 1:
        return (1, 1) if bcol or cols == 1 else None
    return (1, cols) if tuple(a_shape[-1:]) == (cols,) and size == cols else None
