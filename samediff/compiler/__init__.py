"""The fused compiler: plans of Numba kernels, with the interpreter as reference and fallback.

``make_plan(nodes, input_slots, output_slots, types)`` is the default planner: it builds one
plan, uncached. Callers get plans through ``samediff.compiler.cache.get_plan``, the one plan
cache (LRU, statistics, interpreter fallback, replaceable planner), shared by traces,
compiled functions, ``SameDiff.output`` and training steps. The executor is ``"compiled"`` by
default; ``ND4PY_EXECUTOR=interpreter`` or ``set_executor("interpreter")`` selects the
interpreter (for debugging).
"""
from __future__ import annotations

import os
from typing import Any, Sequence

from ..interpreter import InterpreterPlan

EXECUTORS = ("compiled", "interpreter")
_executor = os.environ.get("ND4PY_EXECUTOR", "compiled")
if _executor not in EXECUTORS:
    raise ValueError(f"ND4PY_EXECUTOR must be one of {EXECUTORS}, got {_executor!r}")


def set_executor(name: str) -> str:
    """Select ``"compiled"`` or ``"interpreter"`` for new plans; returns the previous one."""
    global _executor
    if name not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {name!r}")
    previous, _executor = _executor, name
    return previous


def get_executor() -> str:
    return _executor


def make_plan(nodes: Sequence[Any], input_slots: Sequence[Any], output_slots: Sequence[Any],
              types: Any, exact_shapes: bool = False, donate: Any = None) -> Any:
    """A plan for running ``nodes`` from ``input_slots`` to ``output_slots``.

    ``exact_shapes``: the caller runs this plan only for inputs of exactly these shapes (it
    keys its cache by them), so shape-dependent simplifications are allowed.
    ``donate``: ``{output slot: input slot}`` pairs whose input buffer the plan may overwrite
    with that output (the caller no longer needs the old contents); granted where safe."""
    if _executor == "interpreter" or types is None:
        return InterpreterPlan(nodes, input_slots, output_slots, types)
    from .plan import CompiledPlan  # Numba is imported on first use, not at `import nd4py`
    return CompiledPlan(nodes, input_slots, output_slots, types, exact_shapes, donate)


__all__ = ["make_plan", "set_executor", "get_executor", "EXECUTORS", "InterpreterPlan"]
