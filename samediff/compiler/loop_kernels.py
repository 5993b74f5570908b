"""Which loops run compiled whole, and running them: the cache of ``LoopKernel`` s (one per
body and operand types; ``loop_codegen.py`` generates them, and is imported only when a loop
first runs compiled: it imports Numba) and ``run_loop``, which ``scan`` and ``while_loop`` call
before stepping their bodies.

>>> from samediff import compiler
>>> previous = compiler.set_executor("interpreter")
>>> run_loop(None, None, [], 0, 0, 0, False, -1) is None  # the interpreter steps every loop
True
>>> _ = compiler.set_executor(previous)
"""
from __future__ import annotations

import weakref
from typing import Any, Sequence

import numpy as np

from ..ir import Graph
from ..kernels import compiling
from ..ops import TensorType

from . import get_executor
from ..array import type_of
from .tiered import get_compile_mode

# -- which loops run compiled ---------------------------------------------------------------------

_KERNELS: dict[tuple, Any] = {}   # (bodies' ids, operand types) -> LoopKernel or None
_BY_KEY: dict[tuple, Any] = {}    # LoopKernel.key -> LoopKernel (the compile thread's warm-up)


def loop_kernel(cond: Graph | None, body: Graph, types: Sequence[TensorType], nc: int,
                nx: int) -> Any:
    """The compiled form of a loop over ``body`` (a ``while_loop`` with ``cond``, else a
    ``scan``) on operands of ``types`` — None when it does not compile whole. Cached per
    body objects and types."""
    key = (id(cond), id(body), nc, nx, *[(t.shape, t.dtype, t.weak) for t in types])
    if key in _KERNELS:
        return _KERNELS[key]
    from .loop_codegen import LoopKernel, Unsupported
    try:
        kernel = LoopKernel(cond, body, types, nc, nx)
    except Unsupported:
        kernel = None
    if len(_KERNELS) > 256:  # (bounded: a process that builds many distinct loops)
        _KERNELS.clear()
        _BY_KEY.clear()
    _KERNELS[key] = kernel
    for graph in (cond, body):
        if graph is not None:
            weakref.finalize(graph, _KERNELS.pop, key, None)
    if kernel is not None:
        _BY_KEY.setdefault(kernel.key, kernel)
    return kernel


def describe(cond: Graph | None, body: Graph, types: Sequence[TensorType], nc: int,
             nx: int) -> str:
    """How a compiled plan runs this loop, for ``explain()``: whole, or step by step — why,
    and the plan each body gets per step (its fused kernels and library calls)."""
    from .loop_codegen import LoopKernel, Unsupported, step_types
    from .grouping import Group, partition
    try:
        LoopKernel(cond, body, types, nc, nx)
        return "compiled whole (one Numba loop)"
    except Unsupported as exc:
        why = str(exc)
    except Exception as exc:  # noqa: BLE001 - (explain() never fails for a description)
        why = type(exc).__name__
    parts = [f"per-step plans ({why})"]
    for name, graph in (("cond", cond), ("body", body)):
        if graph is None:
            continue
        try:
            known = graph.retype(dict(zip(graph.inputs, step_types(types, nc, nx))))
        except Exception:  # noqa: BLE001
            continue
        steps = partition(graph.needed(list(graph.outputs)), known)
        parts.append(f"{name}: " + ", ".join(
            "kernel " + " -> ".join(n.op.name for n in s.nodes) if isinstance(s, Group)
            else s.op.name for s in steps))
    return "; ".join(parts)


def _warm(key: tuple) -> None:
    """Compile a loop function on the compile thread: one call on operands of its types."""
    kernel = _BY_KEY.get(key)
    if kernel is None:  # dropped with the cache meanwhile: its first call will compile it
        return
    kernel.function()(*kernel.warm_arguments())


def run_loop(cond: Graph | None, body: Graph, vals: Sequence[Any], nc: int, nx: int, steps: int,
             reverse: bool, limit: int) -> tuple[list, list, int] | None:
    """Run the loop compiled whole if the executor is the compiler, it compiles whole and its
    function is ready (``compiling.ready``: at once in ``"sync"`` mode; in ``"background"``
    mode once the compile thread has compiled it); else None (the caller steps it)."""
    if get_executor() != "compiled" or get_compile_mode() == "interpret":
        return None
    # the cache key, cheaply: an array's (shape, dtype), a Python scalar's weak type
    key = (id(cond), id(body), nc, nx, *[(v.shape, v.dtype, False) if type(v) is np.ndarray
                                         else _weak_key(v) for v in vals])
    kernel = _KERNELS.get(key, _MISSING)
    if kernel is _MISSING:
        kernel = loop_kernel(cond, body, [type_of(v) for v in vals], nc, nx)
    if kernel is None or not compiling.ready(kernel.key, _warm):
        return None
    return kernel.run(vals, steps, reverse, limit)


_MISSING = object()


def _weak_key(v: Any) -> tuple:
    t = type_of(v)
    return (t.shape, t.dtype, t.weak)
