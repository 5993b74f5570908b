"""``@nd.compile``: trace a function once per input signature, then replay its cached plan.

The signature is the structure of the arguments, the shape and dtype of every array in them,
and the (hashable) values of everything else. A new shape re-traces the Python function, but
the plan cache is keyed by ranks and broadcast patterns, not sizes, so e.g. a new batch size
reuses the compiled plan. Called inside an active trace, a compiled function is inlined.

>>> import nd4py as nd
>>> @nd.compile
... def dense(x, w, b):
...     return nd.nn.relu(x @ w + b)
>>> y = dense(nd.ones(4, 3), nd.ones(3, 2), nd.zeros(2))
>>> y.numpy().tolist()[0]
[3.0, 3.0]
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from samediff.array import CURRENT_TRACE, NDArray
from samediff.errors import TracingError

from .plan import PLAN_CACHE
from .trace import Trace

_LEAF = ("leaf",)


def _to_ndarrays(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return NDArray(obj)
    if isinstance(obj, (tuple, list)):
        return type(obj)(_to_ndarrays(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _to_ndarrays(v) for k, v in obj.items()}
    return obj


def _flatten(obj: Any, leaves: list) -> Any:
    """Structure of ``obj`` with arrays replaced by ``_LEAF`` (appended to ``leaves``)."""
    if isinstance(obj, NDArray):
        leaves.append(obj)
        return _LEAF
    if isinstance(obj, (tuple, list)):
        return (type(obj).__name__, tuple(_flatten(o, leaves) for o in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _flatten(v, leaves)) for k, v in obj.items()))
    try:
        hash(obj)
    except TypeError:
        raise TypeError(f"compiled functions take arrays, and hashable non-array arguments "
                        f"(they are part of the cache key); got {type(obj).__name__}") from None
    return ("static", obj, type(obj))  # typed: 2, 2.0 and True are equal but promote differently


def _fresh_leaves(obj: Any) -> Any:
    """``obj`` with every array replaced by a new NDArray over the same buffer: while tracing,
    each argument gets its own input slot, distinct from other arguments and from captured
    arrays even when the caller passed the same object (the plan is replayed with others)."""
    if isinstance(obj, NDArray):
        return NDArray(obj._data)
    if isinstance(obj, (tuple, list)):
        return type(obj)(_fresh_leaves(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _fresh_leaves(v) for k, v in obj.items()}
    return obj


def _unflatten(structure: Any, leaves: list) -> Any:
    kind = structure[0]
    if kind == "leaf":
        return leaves[structure[1]]
    if kind == "static":
        return structure[1]
    if kind == "dict":
        return {k: _unflatten(v, leaves) for k, v in structure[1]}
    items = [_unflatten(s, leaves) for s in structure[1]]
    return tuple(items) if kind == "tuple" else items


@dataclass
class _Entry:
    plan: Any
    trace: Trace
    sources: list[tuple[str, Any]]       # per plan input: ("arg", leaf index) or ("obj", value)
    out_structure: Any                   # fn's result with leaves -> ("leaf", output index)
    out_slots: tuple[int, ...]
    writebacks: list[tuple[tuple[str, Any], int]]  # (target source, output index)

    def __post_init__(self) -> None:
        self.identity_sources = self.sources == [("arg", i) for i in range(len(self.sources))]


class CompiledFunction:
    """A traced-and-cached version of a Python function over nd4py arrays."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name or getattr(fn, "__qualname__", repr(fn))
        self._entries: dict[Any, _Entry] = {}
        self._fast: dict[Any, _Entry] = {}   # all-positional-array signatures
        self._last: _Entry | None = None
        self._lock = threading.Lock()
        self.traces = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if CURRENT_TRACE.get() is not None:  # inside a scope: become part of its trace
            return self.fn(*args, **kwargs)
        if not kwargs:  # fast path: positional arrays only (the common replay)
            try:
                fast = tuple([(x._data.dtype, x._data.shape) for x in args if type(x) is NDArray])
            except Exception:  # e.g. an unmaterialized LazyArray: take the general path
                fast = None
            if fast is not None and len(fast) == len(args):
                entry = self._fast.get(fast)
                if entry is not None:
                    return self._replay(entry, list(args))
        args, kwargs = _to_ndarrays(args), _to_ndarrays(kwargs)
        leaves: list[NDArray] = []
        structure = _flatten((args, kwargs), leaves)
        signature = (structure, tuple((x.dtype, x.shape) for x in leaves))
        entry = self._entries.get(signature)
        if entry is None:
            return self._trace_and_run(args, kwargs, leaves, signature)
        return self._replay(entry, leaves)

    def _replay(self, entry: _Entry, leaves: list[NDArray]) -> Any:
        if entry.identity_sources and len(leaves) == len(entry.sources):
            values = [x._data for x in leaves]  # plan inputs are the arguments, in order
        else:
            values = [_source_value(src, leaves) for src in entry.sources]
        outs = entry.plan.execute(values)
        for target, index in entry.writebacks:
            np.copyto(_source_object(target, leaves)._data, outs[index], casting="same_kind")
        return _unflatten(entry.out_structure, [NDArray(np.asarray(o)) for o in outs])

    def _trace_and_run(self, args: tuple, kwargs: dict, leaves: list[NDArray], signature: Any) -> Any:
        trace = Trace(owner=f"compiled function {self.name!r}")
        args, kwargs = _fresh_leaves(args), _fresh_leaves(kwargs)
        proxies: list[NDArray] = []
        _flatten((args, kwargs), proxies)  # same order as ``leaves``
        for proxy in proxies:
            trace.add_input(proxy)
        token = CURRENT_TRACE.set(trace)
        try:
            result = self.fn(*args, **kwargs)
            out_leaves: list = []
            out_structure = _flatten(result, out_leaves)
            result_slots = [trace.slot_of(x) for x in out_leaves]
        except BaseException:
            trace.discard()
            raise
        finally:
            CURRENT_TRACE.reset(token)
        writebacks = list(trace._writebacks.values())
        out_slots = tuple(sorted(set(result_slots) | {s for _, s in writebacks}))
        plan = trace.plan_for(out_slots)
        index = {s: i for i, s in enumerate(out_slots)}
        by_id = {id(proxy): i for i, proxy in enumerate(proxies)}
        sources = [("arg", by_id[id(o)]) if id(o) in by_id else ("obj", o) for o in trace.input_objects]
        entry = _Entry(plan, trace, sources, _relabel(out_structure, [index[s] for s in result_slots]),
                       out_slots, [(_source_for(t, by_id), index[s]) for t, s in writebacks])
        trace.discard()  # LazyArrays made while tracing are internal; replay produces the results
        try:
            result = self._replay(entry, leaves)
        except BaseException:  # not kept: a plan that fails on its first run must not be replayed
            PLAN_CACHE.discard(plan)
            raise
        with self._lock:
            self._entries[signature] = entry
            if not kwargs and len(leaves) == len(args) and all(type(a) is NDArray for a in args):
                self._fast[signature[1]] = entry
            self._last = entry
            self.traces += 1
        return result

    # -- ND4J-style and inspection ----------------------------------------------------------
    @property
    def graph(self) -> Any:
        """The most recently traced graph as a SameDiff."""
        if self._last is None:
            raise TracingError(f"{self.name}: call the function once before asking for its graph")
        return self._last.trace.to_samediff(self._last.out_slots)

    def explain(self) -> str:
        """Each traced signature's graph and plan, plus the plan-cache statistics (like
        ``jax.make_jaxpr`` for the graph part)."""
        parts = [f"compiled function {self.name!r}: {len(self._entries)} signature(s), "
                 f"{self.traces} trace(s)"]
        for sig, entry in self._entries.items():
            shapes = ", ".join(f"{d.name}{list(s)}" for d, s in sig[1])
            parts += [f"== signature ({shapes})", entry.trace.to_samediff(entry.out_slots).summary(),
                      entry.plan.explain()]
        parts.append(f"cache: {PLAN_CACHE.stats.as_dict()}")
        return "\n".join(parts)

    def close(self) -> None:
        """Forget this function's traces (plans stay in the shared cache until evicted)."""
        with self._lock:
            self._entries.clear()
            self._fast.clear()
            self._last = None


def _relabel(structure: Any, indices: list[int]) -> Any:
    it = iter(indices)

    def walk(s: Any) -> Any:
        if s == _LEAF:
            return ("leaf", next(it))
        if s[0] == "static":
            return s
        if s[0] == "dict":
            return ("dict", tuple((k, walk(v)) for k, v in s[1]))
        return (s[0], tuple(walk(x) for x in s[1]))
    return walk(structure)


def _source_for(obj: Any, by_id: dict[int, int]) -> tuple[str, Any]:
    return ("arg", by_id[id(obj)]) if id(obj) in by_id else ("obj", obj)


def _source_object(src: tuple[str, Any], leaves: list[NDArray]) -> Any:
    return leaves[src[1]] if src[0] == "arg" else src[1]


def _source_value(src: tuple[str, Any], leaves: list[NDArray]) -> Any:
    obj = _source_object(src, leaves)
    return obj._data if isinstance(obj, NDArray) else obj


class CompiledGraphFunction(CompiledFunction):
    """ND4J's form: ``nd.compile(num_inputs, lambda inputs: [...])`` with ``execute(*arrays)``."""

    def __init__(self, num_inputs: int, fn: Callable[[list], Any]) -> None:
        self.num_inputs = num_inputs
        super().__init__(lambda *xs: fn(list(xs)), name=getattr(fn, "__qualname__", "graph function"))

    def execute(self, *arrays: Any) -> list[NDArray]:
        if len(arrays) != self.num_inputs:
            raise TypeError(f"{self.name}: expects {self.num_inputs} input arrays, got {len(arrays)}")
        out = self(*arrays)
        return list(out) if isinstance(out, (list, tuple)) else [out]


def compile(fn: Any = None, fn2: Callable | None = None, *, name: str | None = None) -> Any:
    """Compile ``fn``: ``@nd.compile``, ``nd.compile(fn)``, or ND4J's ``nd.compile(n, fn)``."""
    if isinstance(fn, int) and not isinstance(fn, bool):
        if fn2 is None:
            raise TypeError("nd.compile(num_inputs, fn): fn is missing")
        return CompiledGraphFunction(fn, fn2)
    if fn is None:
        return lambda f: CompiledFunction(f, name)
    return CompiledFunction(fn, name)

