"""tracing: turns eager nd4py calls into SameDiff graphs (graph_scope, LazyArray, compile).

It sits between ``samediff`` (op table, graph, interpreter) and the ``nd4py`` façade: it plugs
a ``Trace`` into ``samediff.array.CURRENT_TRACE``, the one place every op call consults, and
runs finished traces through cached plans.
"""
from __future__ import annotations

import sys

from samediff.compiler import tiered
from samediff.compiler.cache import PLAN_CACHE, CacheStats, RetraceWarning, set_planner
from samediff.compiler.tiered import compile_mode, get_compile_mode, set_compile_mode
from samediff.interpreter import InterpreterPlan

from .compile import (CompiledFunction, CompiledGraphFunction, close_all, compile,
                      set_default_max_signatures, signature_stats)
from .lazy import LazyArray
from .scope import GraphScope, graph_scope
from .trace import Trace


def clear_cache() -> None:
    """Drop every cached plan — of traces, ``SameDiff.output``, training steps and compiled
    functions: the one plan cache (``samediff.compiler.cache``) — and reset its statistics.
    Like ``jax.clear_caches()``, compiled functions forget their traces too: their next call
    traces afresh (capturing the arrays their globals/closures name then)."""
    PLAN_CACHE.clear()
    close_all()


def cache_stats() -> dict[str, int]:
    """Cache counters. The plan cache (one, shared by every caller): ``hits``, ``misses``,
    ``compiles``, ``fallbacks``, ``evictions``, ``plans`` (cached now), ``max_plans``.
    Compiled functions: ``signatures`` (traced signatures kept, over all live compiled
    functions), ``max_signatures`` (the default bound per function), ``signature_evictions``.
    Tiered compilation (``compile_mode("background")``): ``tiered_compiling`` (plans still
    answering from the interpreter while their kernels compile), ``tiered_swapped``. Fused
    kernels: ``kernel_modules`` (distinct kernels loaded by this process, each compiled once
    per machine), ``kernel_reuses`` (kernel requests a loaded one answered: repeated blocks),
    ``fast_loads`` / ``fast_load_fallbacks`` (kernels loaded from the disk cache without
    Numba's full set-up, and loads that needed it); all 0 until a kernel is loaded, as nothing
    here imports Numba. The compile helper process (``compiler/compile_helper.py``):
    ``helper_spawns``, ``helper_compiles`` (kernels and warm-ups it compiled for this
    process), ``helper_failures``.

    >>> import nd4py as nd
    >>> sorted(nd.cache_stats())[:3]
    ['compiles', 'evictions', 'fallbacks']
    """
    return {**PLAN_CACHE.stats.as_dict(), "plans": len(PLAN_CACHE), "max_plans": PLAN_CACHE.maxsize,
            **signature_stats(), **tiered.stats(), **_kernel_stats()}


def _kernel_stats() -> dict[str, int]:
    """The kernel layer's counters, read only if it is loaded (importing it loads Numba)."""
    out = {"kernel_modules": 0, "kernel_reuses": 0, "fast_loads": 0, "fast_load_fallbacks": 0,
           "helper_spawns": 0, "helper_compiles": 0, "helper_failures": 0}
    codegen = sys.modules.get("samediff.compiler.codegen")
    fastload = sys.modules.get("samediff.kernels.fastload")
    helper = sys.modules.get("samediff.compiler.compile_helper")
    if helper is not None:
        out.update(helper.stats)
    if codegen is not None:
        out.update(codegen.kernel_stats())
    if fastload is not None:
        out.update(fastload.stats)
    return out


def set_cache_size(maxsize: int | None = None, *, signatures: int | None = None) -> None:
    """Bound the plan cache to ``maxsize`` plans, and/or every compiled function (without its
    own ``max_signatures``) to ``signatures`` traced signatures. Least recently used entries
    are evicted. Sizes must be integers >= 1 (``ConfigError`` otherwise).

    >>> import nd4py as nd
    >>> nd.set_cache_size(256, signatures=64)
    """
    if maxsize is not None:
        PLAN_CACHE.resize(maxsize)
    if signatures is not None:
        set_default_max_signatures(signatures)


__all__ = ["CompiledFunction", "CompiledGraphFunction", "compile", "LazyArray", "PLAN_CACHE",
           "CacheStats", "InterpreterPlan", "RetraceWarning", "set_planner", "GraphScope",
           "graph_scope", "Trace", "clear_cache", "cache_stats", "set_cache_size",
           "compile_mode", "get_compile_mode", "set_compile_mode"]
