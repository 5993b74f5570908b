"""tracing: turns eager nd4py calls into SameDiff graphs (graph_scope, LazyArray, compile).

It sits between ``samediff`` (op table, graph, interpreter) and the ``nd4py`` façade: it plugs
a ``Trace`` into ``samediff.array.CURRENT_TRACE``, the one place every op call consults, and
runs finished traces through cached plans.
"""
from __future__ import annotations

from .compile import CompiledFunction, CompiledGraphFunction, compile
from .lazy import LazyArray
from .plan import PLAN_CACHE, CacheStats, InterpreterPlan, RetraceWarning, set_planner
from .scope import GraphScope, graph_scope
from .trace import Trace


def clear_cache() -> None:
    """Drop every cached plan and reset the cache statistics."""
    PLAN_CACHE.clear()


def cache_stats() -> dict[str, int]:
    """Plan-cache counters: hits, misses, compiles, fallbacks, evictions."""
    return PLAN_CACHE.stats.as_dict()


def set_cache_size(maxsize: int) -> None:
    """Bound the number of cached plans (least recently used are evicted)."""
    PLAN_CACHE.resize(maxsize)


__all__ = ["CompiledFunction", "CompiledGraphFunction", "compile", "LazyArray", "PLAN_CACHE",
           "CacheStats", "InterpreterPlan", "RetraceWarning", "set_planner", "GraphScope",
           "graph_scope", "Trace", "clear_cache", "cache_stats", "set_cache_size"]
