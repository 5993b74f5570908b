"""The one plan cache: every caller (traces, ``@nd.compile``, ``SameDiff.output``, training
steps) gets its plans through ``get_plan``.

A *plan* runs a list of nodes: ``plan.execute(input_values) -> output_values``. ``get_plan``
looks the caller's key up in a bounded, thread-safe LRU; on a miss it builds the plan with the
installed planner (``set_planner``; by default ``make_plan``: fused Numba kernels, or the
interpreter under ``set_executor("interpreter")``) and, if the planner fails, falls back to the
interpreter for the whole plan and logs why (once per distinct reason). The cache counts
hits/misses/compiles/fallbacks/evictions and warns (``RetraceWarning``) once when one owner (a
compiled function, a ``graph_scope`` call site) keeps producing new keys.

The caller's key must describe the computation *structurally* — op names, attributes and
wiring, input types, wanted outputs (``structural_key`` builds one) — never an object's
``id()``: plans outlive the graphs that asked for them, and ids are reused. ``get_plan`` adds
what else decides the plan: the executor, the planner, ``exact_shapes`` and ``donate``.

Nodes are duck-typed (``.op``, ``.attrs``, ``.inputs``, ``.outputs``, ``.name``): this module
knows neither the graph nor tracing, which use it.
"""
from __future__ import annotations

import inspect
import logging
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from .. import profiler
from ..errors import ConfigError
from ..interpreter import InterpreterPlan
from . import get_executor, make_plan
from .tiered import TieredPlan, get_compile_mode

log = logging.getLogger("nd4py.plan")

#: ``planner(nodes, input_ids, output_ids, types, *, exact_shapes, donate) -> plan``, where
#: ``types[id]`` is the ``TensorType`` of every value (see ``make_plan``).
Planner = Callable[..., Any]

RETRACE_LIMIT = 8
#: Owners (compiled functions, scope call sites) whose plan history the retrace check keeps;
#: least recently active beyond this are forgotten, so the bookkeeping stays bounded.
MAX_TRACKED_OWNERS = 512


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


# -- planners and the fallback policy -------------------------------------------------------

_planner: Planner = make_plan
_logged_reasons: set[str] = set()


def set_planner(planner: Planner) -> Planner:
    """Install the function that builds plans; returns the previous one.

    It is called as ``planner(nodes, input_ids, output_ids, types, exact_shapes=...,
    donate=...)`` (``make_plan`` documents the two hints; a planner may ignore them). A planner
    that cannot take them is refused with a ``ConfigError``. Plans cached from another planner
    are not reused.

    >>> from samediff.compiler import make_plan
    >>> set_planner(make_plan) is make_plan
    True
    """
    try:
        inspect.signature(planner).bind(None, None, None, None, exact_shapes=False, donate=None)
    except TypeError:
        raise ConfigError(f"set_planner: {planner!r} must accept (nodes, input_ids, output_ids, "
                          f"types, *, exact_shapes, donate); add `exact_shapes=False, "
                          f"donate=None` (or **options) to its parameters") from None
    except ValueError:  # no introspectable signature (a builtin): trust it
        pass
    global _planner
    previous, _planner = _planner, planner
    return previous


def build_plan(nodes: Sequence[Any], input_ids: Sequence[Hashable],
               output_ids: Sequence[Hashable], types: Any = None, *, exact_shapes: bool = False,
               donate: Mapping | None = None) -> Any:
    """Build a plan with the installed planner, uncached. If the planner fails, fall back to
    the interpreter (which fills every output) and record why on the plan (``plan.reason``);
    each distinct reason is logged once. An error flagged ``strict`` (``CompilationError``
    under ``ND4PY_STRICT=1``) is raised instead."""
    return _build_with(_planner, nodes, input_ids, output_ids, types, exact_shapes, donate)


def _build_with(planner: Planner, nodes: Sequence[Any], input_ids: Sequence[Hashable],
                output_ids: Sequence[Hashable], types: Any, exact_shapes: bool,
                donate: Mapping | None) -> Any:
    try:
        return planner(nodes, input_ids, output_ids, types, exact_shapes=exact_shapes,
                       donate=donate)
    except Exception as exc:  # any planner failure must degrade, not break
        if getattr(exc, "strict", False):
            raise
        reason = f"{type(exc).__name__}: {exc}"
        if reason not in _logged_reasons:
            _logged_reasons.add(reason)
            log.warning("plan compilation failed, using the interpreter: %s", reason)
        return InterpreterPlan(nodes, input_ids, output_ids, types, reason=reason)


# -- keys -----------------------------------------------------------------------------------

class PlanKey(NamedTuple):
    """What a cached plan is filed under: the caller's key plus what else decides the plan."""
    key: Hashable
    executor: str
    planner: Planner
    exact_shapes: bool
    donate: frozenset


_SHAPE_CLASSES: dict = {}


def shape_class(ttype: Any) -> Any:
    """The type a shape-polymorphic plan is keyed by: ``ttype`` with every dim that is not 1
    unknown (``-1``). Dtype, rank, weakness and the broadcast pattern decide a plan built
    without ``exact_shapes``; the sizes do not, so a new batch size reuses it (traces).

    >>> import numpy as np
    >>> from samediff.ops import TensorType
    >>> print(shape_class(TensorType((32, 1, 7), np.dtype("float32"))))
    float32[?,1,?]
    """
    known = _SHAPE_CLASSES.get(ttype)  # (on every trace's exit: memoized)
    if known is None:
        if len(_SHAPE_CLASSES) > 4096:
            _SHAPE_CLASSES.clear()
        known = _SHAPE_CLASSES[ttype] = ttype._replace(
            shape=tuple([1 if d == 1 else -1 for d in ttype.shape]))
    return known


def structural_key(nodes: Sequence[Any], input_ids: Sequence[Hashable],
                   output_ids: Sequence[Hashable], input_types: Mapping[Hashable, Any]) -> tuple:
    """A plan key naming the computation by structure: per node its op name, attribute record
    (interned, so identity is equality), wiring and name (errors name the node); the inputs'
    ids and types, in plan order; the wanted outputs. Equal keys mean the same plan, whichever
    graph asked. SameDiff gives exact types and asks for ``exact_shapes=True``; a trace gives
    each input's ``shape_class`` and a shape-polymorphic plan — one key format for both."""
    return node_parts(nodes), tuple([(i, input_types[i]) for i in input_ids]), tuple(output_ids)


def node_parts(nodes: Any) -> tuple:
    """Per node ``(op name, attributes, inputs, outputs, name)``: the node part of a
    ``structural_key`` and of a ``Structure``. ``nodes`` is a sequence of nodes, or a graph
    (``ir.Graph.structure_parts`` keeps a growing graph's parts as it records)."""
    parts = getattr(nodes, "structure_parts", None)
    if parts is not None:
        return parts()
    return tuple([(n.op.name, n.attrs, tuple(n.inputs), tuple(n.outputs), n.name) for n in nodes])


class Structure:
    """The node part of a structural key, hashed once. Graph-backed callers (``SameDiff``,
    training steps) keep one per graph version and reuse it, so a cache lookup costs a hash of a
    few small items, not of every node; equal structures still compare equal.

    >>> a, b = Structure((("add", None),)), Structure((("add", None),))
    >>> a == b and hash(a) == hash(b)
    True
    """

    __slots__ = ("parts", "_hash")

    def __init__(self, parts: tuple) -> None:
        self.parts = parts
        self._hash = hash(parts)

    @classmethod
    def of(cls, nodes: Sequence[Any]) -> "Structure":
        return cls(node_parts(nodes))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Structure) and self._hash == other._hash
                                 and self.parts == other.parts)

    def __repr__(self) -> str:
        return f"Structure({len(self.parts)} nodes)"


def describe_key_change(old: Hashable, new: Hashable) -> str:
    """Name the first part of a plan key that differs (ops, attrs, wiring, input types...).
    Understands ``PlanKey`` s and ``structural_key`` s — ``(nodes, inputs, outputs)`` with
    nodes ``(op name, attrs, *wiring)`` — and says "plan key" for others."""
    if isinstance(old, PlanKey) and isinstance(new, PlanKey):
        for name, a, b in zip(PlanKey._fields[1:], old[1:], new[1:]):
            if a != b:
                return name.replace("_", " ")  # executor, planner, exact shapes, donate
        old, new = old.key, new.key
    try:
        return _describe(old, new)
    except (TypeError, ValueError, IndexError, KeyError):
        return "plan key"


def _type_part(a: Any, b: Any) -> str:
    """Which part of an input's type changed: dtype, rank, weakness or shape."""
    try:
        if a.dtype != b.dtype:
            return "dtype"
        if len(a.shape) != len(b.shape):
            return "rank"
        if a.weak != b.weak:
            return "weakness"
        return "shape (broadcast pattern)" if -1 in a.shape + b.shape else "shape"
    except AttributeError:
        return "type"


def _describe(old: Any, new: Any) -> str:
    if not all(isinstance(k, tuple) and len(k) >= 3 and isinstance(k[0], tuple)
               and isinstance(k[1], tuple) for k in (old, new)):
        return "plan key"
    (old_nodes, old_ins, old_outs, *old_rest), (new_nodes, new_ins, new_outs, *new_rest) = old, new
    if [n[0] for n in old_nodes] != [n[0] for n in new_nodes]:
        return "op sequence"
    for a, b in zip(old_nodes, new_nodes):
        if a[1] != b[1]:
            return f"attributes of {a[0]} ({a[1]!r} -> {b[1]!r})"
        if a[2:] != b[2:]:
            return f"wiring of {a[0]}"
    if len(old_ins) != len(new_ins):
        return "number of inputs"
    for a, b in zip(old_ins, new_ins):
        if a == b:
            continue
        if len(a) == len(b) == 2 and a[0] == b[0]:  # (id, type)
            return f"type of input {a[0]!r} ({a[1]} -> {b[1]}: the input {_type_part(a[1], b[1])})"
        return "inputs"
    if old_outs != new_outs:
        return "set of requested outputs"
    return "plan key" if old_rest != new_rest else "nothing (an evicted plan was rebuilt)"


# -- the cache ------------------------------------------------------------------------------

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
    """Bounded LRU of plans, shared by every caller; thread-safe (plans are built outside the
    lock, so a slow compile blocks nobody)."""

    def __init__(self, maxsize: int = 256) -> None:
        self.maxsize = check_cache_size(maxsize)
        self.stats = CacheStats()
        self._plans: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._owners: OrderedDict[Hashable, _OwnerHistory] = OrderedDict()  # LRU, bounded
        self._warned: set[Hashable] = set()  # owners already warned about (subset of _owners)
        #: keys being built now, each with the event its builder sets when done: another
        #: thread asking for one waits for that build instead of compiling the same plan
        self._building: dict[Hashable, threading.Event] = {}
        #: Bumped by ``clear``: callers that keep a fast-path memo of plans they got from this
        #: cache (a training step per batch shape) drop it when the generation changes.
        self.generation = 0

    def get_or_build(self, key: Hashable, build: Callable[[], Any], owner: Hashable = None) -> Any:
        """The plan cached under ``key``, or ``build()``'s, cached (errors of ``build``
        propagate and cache nothing). ``owner`` names who asked, for the retrace check.

        One build per key at a time: a thread asking for a key another thread is building
        waits for that plan (a hit) rather than compiling it again; if that build fails, the
        waiter builds it itself."""
        while True:
            with self._lock:
                plan = self._plans.get(key)
                if plan is not None:
                    self._plans.move_to_end(key)
                    self.stats.hits += 1
                    if profiler.active:
                        profiler.instant("plan cache hit", "cache", _cache_args(plan, owner))
                    return plan
                pending = self._building.get(key)
                if pending is None:
                    self.stats.misses += 1
                    done = self._building[key] = threading.Event()
                    break
            if not pending.is_set():  # (this thread's own pooled compile, if it is one, now)
                from .compile_helper import flush
                flush()
            pending.wait()
        start = None
        try:
            if profiler.active:
                profiler.instant("plan cache miss", "cache", _cache_args(None, owner))
                start = profiler.now_us()
            plan = build()  # outside the lock: compiling may be slow
        except BaseException:
            with self._lock:
                del self._building[key]
            done.set()
            raise
        within: list = [True]  # filed within this call, or later by a pooled compile
        warned: list = []

        def file(ok: bool) -> None:
            warning = self._file(key, plan, owner, start, done, ok)
            if warning and within[0]:
                warned.append(warning)
            elif warning:
                warnings.warn(warning, RetraceWarning, stacklevel=2)
        # a plan whose kernels compile later (``compile_helper.together``) is filed then
        getattr(plan, "when_compiled", lambda callback: callback(True))(file)
        within[0] = False
        if warned:
            warnings.warn(warned[0], RetraceWarning, stacklevel=5)  # -> get_plan's caller's caller
        return plan

    def _file(self, key: Hashable, plan: Any, owner: Hashable, start: float | None,
              done: threading.Event, ok: bool) -> str | None:
        """Cache ``plan`` under ``key`` (``ok``; its retrace warning, if any), or drop it (its
        compile was cut short); either way, callers waiting for the key go on."""
        if start is not None and ok:
            profiler.compile_event(start, plan, owner)
        warning = None
        with self._lock:
            del self._building[key]
            if ok:
                self.stats.compiles += 1
                if getattr(plan, "reason", ""):
                    self.stats.fallbacks += 1
                self._plans[key] = plan
                while len(self._plans) > self.maxsize:
                    self._plans.popitem(last=False)
                    self.stats.evictions += 1
                warning = self._note_owner(owner, key)
        done.set()
        return warning

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
        """Drop every plan, the retrace bookkeeping and the statistics."""
        with self._lock:
            self._plans.clear()
            self._owners.clear()
            self._warned.clear()
            self.stats = CacheStats()
            self.generation += 1

    def __len__(self) -> int:
        return len(self._plans)


def _cache_args(plan: Any, owner: Hashable) -> dict:
    """A cache event's args (profiling only): who asked, and what plan it got."""
    args = {"owner": str(owner)} if owner is not None else {}
    if plan is not None:
        args["kind"] = getattr(plan, "kind", type(plan).__name__)
    return args


PLAN_CACHE = PlanCache()


def plan_flavor() -> tuple:
    """What picks a plan here besides the computation: the executor in force (the
    ``"interpret"`` compile mode runs the interpreter whatever the executor) and the planner.
    ``get_plan`` keys the cache by it; a caller keeping plans of its own (a training step)
    must key them by it too, or a plan built under one executor runs under another."""
    return ("interpreter" if get_compile_mode() == "interpret" else get_executor()), _planner


def get_plan(key: Hashable, nodes: Sequence[Any], input_ids: Sequence[Hashable],
             output_ids: Sequence[Hashable], types: Any, *, exact_shapes: bool = False,
             donate: Mapping | None = None, owner: Hashable = None) -> Any:
    """The cached plan running ``nodes`` from ``input_ids`` to ``output_ids``, built on a miss.

    ``key`` describes the computation structurally (see ``structural_key``); the executor,
    the planner, ``exact_shapes`` and ``donate`` are added to it here. ``types`` maps every
    value id to its ``TensorType`` — or is a function returning that mapping, called only on a
    miss: type inference errors are the caller's and propagate, whereas a planner failure
    falls back to the interpreter (``build_plan``). ``owner`` (a small hashable token, not a
    graph: the cache keeps it) is named by the ``RetraceWarning`` if it builds too many plans.

    >>> import numpy as np
    >>> from types import SimpleNamespace as Node
    >>> from samediff.ops import TensorType, get_op
    >>> add = get_op("add")
    >>> nodes = [Node(name="sum", op=add, attrs=add.default_attrs, inputs=("a", "b"),
    ...               outputs=("c",))]
    >>> t = TensorType((2,), np.dtype("float32"))
    >>> types = {"a": t, "b": t, "c": t}
    >>> key = structural_key(nodes, ["a", "b"], ["c"], types)
    >>> plan = get_plan(key, nodes, ["a", "b"], ["c"], types, exact_shapes=True)
    >>> plan.execute([np.ones(2, np.float32), np.ones(2, np.float32)])[0].tolist()
    [2.0, 2.0]
    >>> get_plan(key, nodes, ["a", "b"], ["c"], types, exact_shapes=True) is plan
    True
    """
    mode = get_compile_mode()  # (compiler/tiered.py: sync, background or interpret)
    executor, planner = plan_flavor()
    full = PlanKey(key, executor, planner, exact_shapes,
                   frozenset(donate.items()) if donate else frozenset())

    def build() -> Any:
        resolved = types() if callable(types) else types  # outside the planner's fallback
        if mode == "interpret":
            return InterpreterPlan(nodes, input_ids, output_ids, resolved)
        if mode == "background" and executor == "compiled":  # answer now, compile meanwhile
            return TieredPlan(InterpreterPlan(nodes, input_ids, output_ids, resolved),
                              lambda: _build_with(planner, nodes, input_ids, output_ids,
                                                  resolved, exact_shapes, donate))
        return _build_with(planner, nodes, input_ids, output_ids, resolved, exact_shapes, donate)

    plan = PLAN_CACHE.get_or_build(full, build, owner)
    if mode == "sync" and type(plan) is TieredPlan and not plan.compiled:
        plan.wait()  # built in the background for another caller: sync callers get it compiled
    return plan


__all__ = ["MAX_TRACKED_OWNERS", "PLAN_CACHE", "RETRACE_LIMIT", "CacheStats", "PlanCache",
           "PlanKey", "Planner", "RetraceWarning", "build_plan", "check_cache_size", "describe_key_change",
           "get_plan", "set_planner", "shape_class", "structural_key", "Structure"]
