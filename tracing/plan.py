"""Plans and the plan cache.

A *plan* executes a traced graph: ``plan.execute(input_values) -> output_values``. The planner
that turns (nodes, output slots) into a plan is replaceable (``set_planner``), so the fused
compiler slots in without tracing changing. The default planner is ``samediff.compiler.make_plan``
(fused Numba kernels, or the interpreter when ``ND4PY_EXECUTOR=interpreter``).

The cache is keyed by the op sequence — op names, attributes and wiring — plus the input
dtypes, ranks and broadcast patterns, and which values are wanted. It is an LRU, bounded,
thread-safe, counts hits/misses/compiles/fallbacks/evictions, and warns once when one owner (a
compiled function or a ``graph_scope`` call site) keeps producing new keys.
"""
from __future__ import annotations

import logging
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, fields
from typing import Any, Callable, Hashable, Sequence

from samediff.compiler import make_plan
from samediff.errors import ConfigError
from samediff.graph import Node
from samediff.interpreter import InterpreterPlan


log = logging.getLogger("nd4py.plan")


class RetraceWarning(UserWarning):
    """One function or scope compiled many distinct plans; says what changed between them."""


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    compiles: int = 0
    fallbacks: int = 0
    evictions: int = 0

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: ``planner(nodes, input_slots, output_slots, types) -> plan``; ``types[slot]`` is a TensorType.
Planner = Callable[[Sequence[Node], Sequence[int], Sequence[int], Any], Any]
_planner: Planner = make_plan


def set_planner(planner: Planner) -> Planner:
    """Install the function that builds plans; returns the previous one."""
    global _planner
    previous, _planner = _planner, planner
    return previous


def build_plan(nodes: Sequence[Node], input_slots: Sequence[int], output_slots: Sequence[int],
               types: Any = None) -> Any:
    """Build a plan with the installed planner; if it fails, fall back to the interpreter (which
    fills every output) and record why — the failure is logged once per distinct reason."""
    try:
        return _planner(nodes, input_slots, output_slots, types)
    except Exception as exc:  # noqa: BLE001 - any planner failure must degrade, not break
        if _planner is InterpreterPlan:
            raise
        if getattr(exc, "strict", False):
            raise
        reason = f"{type(exc).__name__}: {exc}"
        if reason not in _logged_reasons:
            _logged_reasons.add(reason)
            log.warning("plan compilation failed, using the interpreter: %s", reason)
        return InterpreterPlan(nodes, input_slots, output_slots, types, reason=reason)


_logged_reasons: set[str] = set()


RETRACE_LIMIT = 8
#: Owners (compiled functions, scope call sites) whose plan history the retrace check keeps;
#: least recently active beyond this are forgotten, so the bookkeeping stays bounded.
MAX_TRACKED_OWNERS = 512


def check_cache_size(n: Any) -> int:
    """``n`` if it is a usable cache bound (an int >= 1), else a ``ConfigError``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"a cache size must be an integer >= 1, got {n!r}; use "
                          f"nd.clear_cache() (or fn.close()) to empty a cache instead")
    return n


@dataclass
class _OwnerHistory:
    """What the retrace check needs of one owner: how many plans it built, the last two keys."""
    count: int = 0
    previous: Hashable = None
    last: Hashable = None


class PlanCache:
    """Bounded LRU of plans, shared by every scope and compiled function."""

    def __init__(self, maxsize: int = 256) -> None:
        self.maxsize = check_cache_size(maxsize)
        self.stats = CacheStats()
        self._plans: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._owners: OrderedDict[Hashable, _OwnerHistory] = OrderedDict()  # LRU, bounded
        self._warned: set[Hashable] = set()  # owners already warned about (subset of _owners)

    def get_or_build(self, key: Hashable, build: Callable[[], Any], owner: Hashable = None) -> Any:
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
                self.stats.hits += 1
                return plan
            self.stats.misses += 1
        plan = build()  # outside the lock: compiling may be slow
        with self._lock:
            self.stats.compiles += 1
            if getattr(plan, "reason", ""):
                self.stats.fallbacks += 1
            self._plans[key] = plan
            while len(self._plans) > self.maxsize:
                self._plans.popitem(last=False)
                self.stats.evictions += 1
            warning = self._note_owner(owner, key)
        if warning:
            warnings.warn(warning, RetraceWarning, stacklevel=4)
        return plan

    def _note_owner(self, owner: Hashable, key: Hashable) -> str | None:
        if owner is None:
            return None
        history = self._owners.pop(owner, None) or _OwnerHistory()
        self._owners[owner] = history  # most recently active last
        while len(self._owners) > MAX_TRACKED_OWNERS:
            forgotten, _ = self._owners.popitem(last=False)
            self._warned.discard(forgotten)
        history.count += 1
        history.previous, history.last = history.last, key
        if history.count <= RETRACE_LIMIT or owner in self._warned:
            return None
        self._warned.add(owner)
        return (f"{owner} has compiled {history.count} distinct plans; between the last two the "
                f"{describe_key_change(history.previous, history.last)} changed. Each new plan "
                f"costs a trace and a compile: keep shapes/dtypes/attributes stable, or pass "
                f"changing values as arrays")

    def discard(self, plan: Any) -> None:
        """Forget ``plan`` (it failed at run time): the next request for its key builds anew."""
        with self._lock:
            for key in [k for k, p in self._plans.items() if p is plan]:
                del self._plans[key]

    def resize(self, maxsize: int) -> None:
        check_cache_size(maxsize)
        with self._lock:
            self.maxsize = maxsize
            while len(self._plans) > maxsize:
                self._plans.popitem(last=False)
                self.stats.evictions += 1

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()
            self._owners.clear()
            self._warned.clear()
            self.stats = CacheStats()

    def __len__(self) -> int:
        return len(self._plans)


def describe_key_change(old: tuple, new: tuple) -> str:
    """Name the first part of a plan key that differs (ops, attrs, wiring, dtypes, shapes...)."""
    (old_nodes, old_ins, old_outs, *_), (new_nodes, new_ins, new_outs, *_) = old, new
    if [n[0] for n in old_nodes] != [n[0] for n in new_nodes]:
        return "op sequence"
    for a, b in zip(old_nodes, new_nodes):
        if a[1] != b[1]:
            return f"attributes of {a[0]} ({a[1]!r} -> {b[1]!r})"
        if a[2:] != b[2:]:
            return f"wiring of {a[0]}"
    labels = ("dtype", "rank", "weakness", "shape (broadcast pattern)")
    for i, label in enumerate(labels):
        if [x[i] for x in old_ins] != [x[i] for x in new_ins]:
            return f"input {label}"
    return "set of requested outputs" if old_outs != new_outs else "number of inputs"


PLAN_CACHE = PlanCache()
