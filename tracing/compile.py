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
import inspect
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from samediff.array import CURRENT_TRACE, NDArray
from samediff.compiler.cache import PLAN_CACHE, check_cache_size
from samediff.errors import ConfigError, TracingError
from samediff.ir import did_you_mean
from samediff.functional import tree_leaves
from samediff.ops import TensorType
from samediff.surface import KEEP_IN_OPS, OpSurface

from .trace import Trace

_LEAF = ("leaf",)

#: Signatures a compiled function keeps by default (least recently used are forgotten);
#: ``nd.set_cache_size(signatures=n)`` changes it, ``nd.compile(fn, max_signatures=n)`` per function.
DEFAULT_MAX_SIGNATURES = 64

_READ_HINT = (f"inside a compiled function: its Python code runs only when a new signature is "
              f"traced, so a value read now would be frozen into every later call; "
              f"{KEEP_IN_OPS}, or pass the value as a non-array argument (static_argnums / "
              f"static_argnames), which is part of the cache key")


def _to_ndarrays(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return NDArray(obj)
    if isinstance(obj, (tuple, list)):
        return type(obj)(_to_ndarrays(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _to_ndarrays(v) for k, v in obj.items()}
    return obj


class _Static:
    """An argument named in ``static_argnums``/``static_argnames``: passed through as the
    Python value it is, and part of the cache key (typed, element by element)."""
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _typed(value: Any) -> Any:
    """``value``'s type, and its elements' for tuples: (1, 2) and (1, 2.0) are equal but trace
    differently, so they must not share a signature."""
    if type(value) is tuple:
        return (tuple, tuple(_typed(v) for v in value))
    return type(value)


def _flatten(obj: Any, leaves: list) -> Any:
    """Structure of ``obj`` with arrays replaced by ``_LEAF`` (appended to ``leaves``)."""
    if isinstance(obj, _Static):
        return ("static", obj.value, _typed(obj.value))
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


def _leaf_names(fn: Callable, args: tuple, kwargs: dict) -> list[str]:
    """A readable name per array leaf, in ``_flatten`` order (``x``, ``params['w']``, ``xs[1]``):
    errors about a traced argument say which one."""
    params: list[str] = []
    rest = "args"  # name of a *args parameter, if any
    try:
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                params.append(p.name)
            elif p.kind is p.VAR_POSITIONAL:
                rest = p.name
    except (TypeError, ValueError):  # builtins and some callables have no signature
        pass
    names: list[str] = []

    def walk(obj: Any, path: str) -> None:
        if isinstance(obj, NDArray):
            names.append(path)
        elif isinstance(obj, (tuple, list)):
            for i, o in enumerate(obj):
                walk(o, f"{path}[{i}]")
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{path}[{k!r}]")

    for i, a in enumerate(args):
        walk(a, params[i] if i < len(params) else f"{rest}[{i - len(params)}]")
    for k, v in kwargs.items():
        walk(v, k)
    return names


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
    trace: Trace                         # arguments are symbolic in it: it holds no caller array
    sources: list[tuple[str, Any]]       # per plan input: ("arg", leaf index) or ("obj", captured)
    out_structure: Any                   # fn's result with leaves -> ("leaf", output index)
    out_slots: tuple[int, ...]
    writebacks: list[tuple[tuple[str, Any], int]]  # (target source, output index)
    signature: Any = None
    fast_key: Any = field(default=None)  # key in the positional-arrays fast table, if any

    def __post_init__(self) -> None:
        self.identity_sources = self.sources == [("arg", i) for i in range(len(self.sources))]
        # The common replay, pre-bound: the plan's inputs are the arguments in order, nothing
        # is written back, the result is one array (or a flat tuple/list of them).
        out = self.out_structure
        leaf = out[0] == "leaf"
        flat = not leaf and out[0] in ("tuple", "list") and all(
            s[0] == "leaf" for s in out[1])
        self.direct = (self.identity_sources and not self.writebacks and (leaf or flat)
                       and self.fast_key is not None and len(self.sources) == len(self.fast_key))
        self.single = leaf and out[1] == 0 and len(self.out_slots) == 1


class CompiledFunction:
    """A traced-and-cached version of a Python function over nd4py arrays.

    While ``fn`` is traced its array arguments are symbolic (``LazyArray`` s with a shape and a
    dtype but no data, like JAX's tracers), so nothing data-dependent can be frozen into the
    plan. Arrays ``fn`` reads from elsewhere (globals, closures, attributes) are *captured* when
    it is traced: later calls read the same array objects, so in-place updates of them are seen,
    but rebinding the Python name to another array is not (``close()`` forgets the traces).
    """

    def __init__(self, fn: Callable[..., Any], name: str | None = None,
                 max_signatures: int | None = None, training: bool = False,
                 static_argnums: int | Sequence[int] = (),
                 static_argnames: str | Sequence[str] = ()) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self._static_spec = (static_argnums, static_argnames)
        self._static_nums, self._static_names = _static_arguments(
            fn, static_argnums, static_argnames, name or getattr(fn, "__qualname__", repr(fn)))
        self.training = training  # traced in training mode (dropout on, batch statistics)
        self.name = name or getattr(fn, "__qualname__", repr(fn))
        self._max_signatures = None if max_signatures is None else check_cache_size(max_signatures)
        self._entries: OrderedDict[Any, _Entry] = OrderedDict()  # LRU: oldest first
        self._fast: dict[Any, _Entry] = {}   # all-positional-array signatures
        self._last: _Entry | None = None
        self._recent: _Entry | None = None  # the entry last moved to the LRU's end
        self._lock = threading.Lock()
        self.traces = 0
        self.evictions = 0
        # The retrace check counts plans per function *object* (12 layers each compiling their
        # own forward once must not warn); a tiny token, so the cache never keeps us alive.
        self._owner = _Owner(f"compiled function {self.name!r}")
        _LIVE.add(self)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """``@nd.compile`` on a method: each instance gets its own compiled function of the bound
        method (its own signatures and retrace count), stored on the instance so it lives as
        long as the instance does. ``self`` is then not part of the signature; arrays read
        through it (``self.w``) are captured by the closure rule."""
        if obj is None:
            return self
        slot = f"_nd4py_compiled_{id(self)}"
        try:
            bound = obj.__dict__.get(slot)
        except AttributeError:  # no __dict__ (slots): the instance becomes a static argument
            return functools.partial(self, obj)
        if bound is None:  # the bound method's argument 0 is the original's argument 1
            nums, names = self._static_spec
            nums = (nums,) if isinstance(nums, int) else tuple(nums)
            bound = CompiledFunction(self.fn.__get__(obj, objtype), self.name, self._max_signatures,
                                     self.training, tuple(i - 1 for i in nums if i > 0), names)
            obj.__dict__[slot] = bound
        return bound

    @property
    def max_signatures(self) -> int:
        """How many input signatures this function keeps (the default follows
        ``nd.set_cache_size(signatures=...)``)."""
        return self._max_signatures if self._max_signatures is not None else DEFAULT_MAX_SIGNATURES

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        outer = CURRENT_TRACE.get()
        if outer is not None:  # inside a scope: become part of its trace, in our mode
            if self.training == outer.training:
                return self.fn(*args, **kwargs)
            outer.training, mode = self.training, outer.training
            try:
                return self.fn(*args, **kwargs)
            finally:
                outer.training = mode
        if not kwargs and not self._static_nums:  # fast path: positional arrays only
            try:
                fast = tuple([(x._data.dtype, x._data.shape) for x in args if type(x) is NDArray])
            except Exception:  # e.g. an unmaterialized LazyArray: take the general path
                fast = None
            if fast is not None and len(fast) == len(args):
                entry = self._fast.get(fast)
                if entry is not None:
                    if entry is not self._recent:
                        self._touch(entry)
                    if entry.direct:  # the replay, inlined (bench_eager_overhead's W5 row)
                        outs = entry.plan.execute([x._data for x in args])
                        if entry.single:
                            out = outs[0]
                            return NDArray(out if type(out) is np.ndarray else np.asarray(out))
                        return _unflatten(entry.out_structure,
                                          [NDArray(np.asarray(o)) for o in outs])
                    return self._replay(entry, list(args))
        if _has_graph_values(args, kwargs):  # nd.grad of a compiled function, SDVariables:
            return self.fn(*args, **kwargs)  # the ops record into those values' graph
        if self._static_nums or self._static_names:
            args, kwargs = self._mark_static(args, kwargs)
        args, kwargs = _to_ndarrays(args), _to_ndarrays(kwargs)
        leaves: list[NDArray] = []
        structure = _flatten((args, kwargs), leaves)
        signature = (structure, tuple((x.dtype, x.shape) for x in leaves))
        entry = self._entries.get(signature)
        if entry is None:
            return self._trace_and_run(args, kwargs, leaves, structure, signature)
        self._touch(entry)
        return self._replay(entry, leaves)

    def _mark_static(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Wrap the static arguments (checked: hashable, no arrays) so ``_flatten`` keys them
        by value and the traced function receives them as they are."""
        def wrap(value: Any, label: str) -> _Static:
            if any(isinstance(v, (OpSurface, np.ndarray)) for v in tree_leaves(value)):
                raise TypeError(f"{self.name}: static argument {label} is an array "
                                f"({type(value).__name__}); static arguments are Python values "
                                f"that become part of the cache key (a flag, a size, a mode). "
                                f"Pass arrays as ordinary (traced) arguments")
            try:
                hash(value)
            except TypeError:
                raise TypeError(f"{self.name}: static argument {label} must be hashable: it is "
                                f"part of the cache key; got an unhashable "
                                f"{type(value).__name__} ({value!r:.60}). Pass a tuple instead "
                                f"of a list, or make it an ordinary argument") from None
            return _Static(value)
        n = len(args)
        args = tuple(wrap(a, f"{self._static_nums[i]} (position {i})") if i in self._static_nums else a
                     for i, a in enumerate(args)) if any(i < n for i in self._static_nums) else args
        kwargs = {k: wrap(v, repr(k)) if k in self._static_names else v
                  for k, v in kwargs.items()}
        return args, kwargs

    def _touch(self, entry: _Entry) -> None:
        try:  # most recently used last; another thread may have just evicted it: harmless
            self._entries.move_to_end(entry.signature)
        except KeyError:
            pass
        self._recent = entry  # already last: a call repeating it need not move it again

    def _replay(self, entry: _Entry, leaves: list[NDArray]) -> Any:
        if entry.identity_sources and len(leaves) == len(entry.sources):
            values = [x._data for x in leaves]  # plan inputs are the arguments, in order
        else:
            values = [_source_value(src, leaves) for src in entry.sources]
        outs = entry.plan.execute(values)
        for target, index in entry.writebacks:
            np.copyto(_source_object(target, leaves)._data, outs[index], casting="same_kind")
        return _unflatten(entry.out_structure, [NDArray(np.asarray(o)) for o in outs])

    def _trace_and_run(self, args: tuple, kwargs: dict, leaves: list[NDArray], structure: Any,
                       signature: Any) -> Any:
        owner = str(self._owner)
        trace = Trace(owner=self._owner, read_hint=_READ_HINT, training=self.training)
        names = _leaf_names(self.fn, args, kwargs)
        proxies = [trace.add_argument(TensorType(x.shape, x.dtype), f"argument {n} of {owner}")
                   for x, n in zip(leaves, names)]
        t_args, t_kwargs = _unflatten(_relabel(structure, list(range(len(proxies)))), proxies)
        token = CURRENT_TRACE.set(trace)
        try:
            result = self.fn(*t_args, **t_kwargs)
            out_leaves: list = []
            out_structure = _flatten(result, out_leaves)
            result_slots = [trace.slot_of(x) for x in out_leaves]
        except BaseException:
            trace.discard(f"tracing {owner} raised an exception; nothing ran")
            raise
        finally:
            CURRENT_TRACE.reset(token)
        writebacks = list(trace._writebacks.values())
        out_slots = tuple(sorted(set(result_slots) | {s for _, s in writebacks}))
        plan = trace.plan_for(out_slots)
        index = {s: i for i, s in enumerate(out_slots)}
        by_id = {id(proxy): i for i, proxy in enumerate(proxies)}
        sources = [_source_for(o, by_id) for o in trace.input_objects]
        fast_key = None
        if not kwargs and len(leaves) == len(args) and all(type(a) is NDArray for a in args):
            fast_key = signature[1]
        entry = _Entry(plan, trace, sources, _relabel(out_structure, [index[s] for s in result_slots]),
                       out_slots, [(_source_for(t, by_id), index[s]) for t, s in writebacks],
                       signature, fast_key)
        # Values made while tracing are internal (replay produces the results); touching one
        # that escaped (stored in a global, say) raises with this explanation.
        trace.discard(f"it was made while tracing {owner}; only the function's results get "
                      f"values (return what you need)")
        try:
            result = self._replay(entry, leaves)
        except BaseException:  # not kept: a plan that fails on its first run must not be replayed
            PLAN_CACHE.discard(plan)
            raise
        with self._lock:
            self._entries[signature] = entry
            if fast_key is not None:
                self._fast[fast_key] = entry
            self._last = self._recent = entry
            self.traces += 1
            self._evict(self.max_signatures)
        return result

    def _evict(self, keep: int) -> None:
        """Forget the least recently used signatures beyond ``keep`` (caller holds the lock)."""
        while len(self._entries) > keep:
            _, old = self._entries.popitem(last=False)
            if old.fast_key is not None and self._fast.get(old.fast_key) is old:
                del self._fast[old.fast_key]
            self.evictions += 1

    def cache_info(self) -> dict[str, int]:
        """This function's signature cache: ``signatures`` kept, ``max_signatures``,
        ``traces`` so far, ``evictions``."""
        return {"signatures": len(self._entries), "max_signatures": self.max_signatures,
                "traces": self.traces, "evictions": self.evictions}

    # -- ND4J-style and inspection ----------------------------------------------------------
    @property
    def graph(self) -> Any:
        """The most recently traced graph as a SameDiff."""
        if self._last is None:
            raise TracingError(f"{self.name}: call the function once before asking for its graph")
        return self._last.trace.to_samediff(self._last.out_slots)

    @property
    def last_plan(self) -> Any:
        """The plan of the most recently traced signature (a ``TieredPlan`` while its kernels
        compile in the background: ``.wait()``, ``.compiled``); None before the first call."""
        return None if self._last is None else self._last.plan

    def to_dot(self) -> str:
        """Graphviz DOT text of the most recent signature's plan (``plan.to_dot()``: a
        cluster per fused kernel, library calls and interpreter fallbacks marked; while its
        kernels compile in the background, the plan it answers from now).

        >>> import nd4py as nd
        >>> @nd.compile
        ... def f(x):
        ...     return nd.nn.relu(x * 2.0 + 1.0)
        >>> _ = f(nd.ones(2, 2))
        >>> f.to_dot().startswith("digraph")
        True
        """
        plan = self.last_plan
        if plan is None:
            raise RuntimeError(f"to_dot: compiled function {self.name!r} has not been called "
                               f"yet, so it has no plan to draw; call it once first")
        return getattr(plan, "active", plan).to_dot()

    def explain(self) -> str:
        """Each traced signature's graph and plan, plus the plan-cache statistics (like
        ``jax.make_jaxpr`` for the graph part)."""
        parts = [f"compiled function {self.name!r}: {len(self._entries)} signature(s), "
                 f"{self.traces} trace(s)"]
        for sig, entry in list(self._entries.items()):
            shapes = ", ".join(f"{d.name}{list(s)}" for d, s in sig[1])
            parts += [f"== signature ({shapes})", entry.trace.to_samediff(entry.out_slots).summary(),
                      entry.plan.explain()]
        parts.append(f"cache: {PLAN_CACHE.stats.as_dict()}")
        return "\n".join(parts)

    def close(self) -> None:
        """Forget this function's traces (plans stay in the shared cache until evicted); the
        next call traces afresh, capturing the arrays its globals/closures name then."""
        with self._lock:
            self._entries.clear()
            self._fast.clear()
            self._last = self._recent = None


class _Owner:
    """Identity token of one compiled function in the plan cache's retrace bookkeeping."""
    __slots__ = ("label",)

    def __init__(self, label: str) -> None:
        self.label = label

    def __str__(self) -> str:
        return self.label

    __repr__ = __str__


#: Every live compiled function, for ``cache_stats()`` and ``set_cache_size(signatures=)``.
_LIVE: "weakref.WeakSet[CompiledFunction]" = weakref.WeakSet()


def set_default_max_signatures(n: int) -> None:
    """Signatures every compiled function without its own ``max_signatures`` keeps; functions
    above the new bound forget their least recently used signatures now."""
    global DEFAULT_MAX_SIGNATURES
    DEFAULT_MAX_SIGNATURES = check_cache_size(n)
    for fn in list(_LIVE):
        with fn._lock:
            fn._evict(fn.max_signatures)


def close_all() -> None:
    """``close()`` every live compiled function (``nd.clear_cache``)."""
    for fn in list(_LIVE):
        fn.close()


def signature_stats() -> dict[str, int]:
    """Totals over live compiled functions: signatures kept, the default bound, evictions."""
    live = list(_LIVE)
    return {"signatures": sum(len(f._entries) for f in live),
            "max_signatures": DEFAULT_MAX_SIGNATURES,
            "signature_evictions": sum(f.evictions for f in live)}


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

    def __init__(self, num_inputs: int, fn: Callable[[list], Any],
                 max_signatures: int | None = None) -> None:
        self.num_inputs = num_inputs

        def inputs(*inputs: Any) -> Any:  # named so errors say "argument inputs[1]"
            return fn(list(inputs))
        super().__init__(inputs, name=getattr(fn, "__qualname__", "graph function"),
                         max_signatures=max_signatures)

    def execute(self, *arrays: Any) -> list[NDArray]:
        if len(arrays) != self.num_inputs:
            raise TypeError(f"{self.name}: expects {self.num_inputs} input arrays, got {len(arrays)}")
        out = self(*arrays)
        return list(out) if isinstance(out, (list, tuple)) else [out]


def compile(fn: Any = None, fn2: Callable | None = None, *, name: str | None = None,
            max_signatures: int | None = None, training: bool = False,
            static_argnums: int | Sequence[int] = (),
            static_argnames: str | Sequence[str] = ()) -> Any:
    """Compile ``fn``: ``@nd.compile``, ``nd.compile(fn)``, or ND4J's ``nd.compile(n, fn)``.

    ``static_argnums`` / ``static_argnames`` (as in ``jax.jit``) name arguments that are Python
    values, not arrays: the function receives them as they are (so ``if flag:`` works), they
    must be hashable, and each new value is a new signature (a retrace). A number names the
    parameter too, and a name its position, so either form may be passed either way. They are
    checked when the function is compiled: an unknown name or an out-of-range position raises
    ``ConfigError``.

    >>> import nd4py as nd
    >>> @nd.compile(static_argnames=("n",))
    ... def power(x, n):
    ...     for _ in range(n - 1):   # a Python loop over a static value
    ...         x = x * x
    ...     return x
    >>> power(nd.create([2.0]), n=3).numpy().tolist(), power(nd.create([2.0]), 2).tolist()
    ([16.0], [4.0])

    ``max_signatures`` bounds how many input signatures (shapes, dtypes, static arguments) the
    function keeps traced; the least recently used are forgotten (default
    ``DEFAULT_MAX_SIGNATURES``, see ``nd.set_cache_size``). ``training=True`` traces in
    training mode: dropout drops (a fresh mask each call) and batch norm normalizes with the
    batch's statistics (``samediff/ops/train_mode.py``).
    """
    if isinstance(fn, int) and not isinstance(fn, bool):
        if fn2 is None:
            raise TypeError("nd.compile(num_inputs, fn): fn is missing")
        return CompiledGraphFunction(fn, fn2, max_signatures)
    if fn is None:
        _static_arguments(None, static_argnums, static_argnames, "nd.compile")  # types, now
        return lambda f: CompiledFunction(f, name, max_signatures, training, static_argnums,
                                          static_argnames)
    return CompiledFunction(fn, name, max_signatures, training, static_argnums, static_argnames)


def _static_arguments(fn: Callable | None, argnums: int | Sequence[int],
                     argnames: str | Sequence[str], name: str) -> tuple[dict[int, str], set[str]]:
    """Resolve ``static_argnums``/``static_argnames`` against ``fn``'s signature, as ``jax.jit``
    does: positions -> parameter names (``{0: "x"}``; a position without a name, in ``*args``,
    is labelled ``"*args"``) and the set of names passed by keyword. A bad entry raises
    ``ConfigError`` naming it and the parameters there are."""
    nums = (argnums,) if isinstance(argnums, int) else argnums
    names = (argnames,) if isinstance(argnames, str) else argnames
    try:
        nums, names = tuple(nums), tuple(names)
    except TypeError:
        raise ConfigError(f"{name}: static_argnums must be an int or a sequence of ints and "
                          f"static_argnames a str or a sequence of strs; got {argnums!r} and "
                          f"{argnames!r}") from None
    bad = [i for i in nums if not isinstance(i, int) or isinstance(i, bool)]
    bad += [n for n in names if not isinstance(n, str)]
    if bad:
        raise ConfigError(f"{name}: static_argnums takes ints and static_argnames strs; got "
                          f"{bad!r}")
    if fn is None:
        return {}, set()
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # no signature (a builtin): take the spec as given
        return {i: f"argument {i}" for i in nums}, set(names)
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    by_keyword = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    var_args = any(p.kind is p.VAR_POSITIONAL for p in params)
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    where = f"{name}{inspect.signature(fn)}"
    static_nums: dict[int, str] = {}
    for i in nums:
        j = i + len(positional) if i < 0 and not var_args else i
        if j < 0 or (j >= len(positional) and not var_args):
            raise ConfigError(f"{where}: static_argnums entry {i} is out of range: the function "
                              f"takes {len(positional)} positional argument(s)")
        static_nums[j] = positional[j] if j < len(positional) else "*args"
    static_names = {n for n in static_nums.values() if n in by_keyword}
    for n in names:
        if n not in by_keyword and not var_kw:
            hint = did_you_mean(n, by_keyword) or f"; its parameters: {', '.join(by_keyword)}"
            raise ConfigError(f"{where}: static_argnames entry {n!r} is not a parameter that can "
                              f"be passed by name{hint}")
        static_names.add(n)
        if n in positional:
            static_nums[positional.index(n)] = n
    return static_nums, static_names


def _has_graph_values(args: tuple, kwargs: dict) -> bool:
    """Whether an argument (or a leaf of one) is a graph variable: ops on it record into its
    graph through ``bind`` (``SDVariable``, ``nd.grad``'s handles), so there is nothing to
    compile here."""
    return any(isinstance(x, OpSurface) and x._recorder is not None
               for x in tree_leaves((args, kwargs)))
