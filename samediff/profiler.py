"""The profiler: where a run's time goes, as Chrome Trace Events (Perfetto, chrome://tracing).

``with profile("trace.json"):`` records, for every plan executed while it is open, one event per
plan step — a fused kernel (args: its ops), a library call (matmul, conv2d...), an interpreter
node — with the shapes and dtypes it read and wrote; one event per plan execution around them;
plan compiles (building a plan, Numba compile included) as complete events; plan-cache hits and
misses as instant events; eager op calls (``nd.exp(x)`` outside any trace) as "eager" events.
On exit the file is written. ``summary()`` /
``profile_summary()`` give the table to read first: per op or kernel, calls, total, mean and
share of the profiled step time.

This module is a leaf recorder: it imports only ``errors``, and the executors above it call it
(``array.bind``, ``interpreter``, ``compiler.plan``, ``compiler.cache``) only when the
module flag ``active`` is set — one attribute read per plan execution (per eager op, per cache
lookup) is all profiling costs when it is off.

Threads: a profile records the plans of *every* thread while it is open, each event under its
thread's ``tid`` (named in the file's metadata). ``warmup``/``steps`` count top-level plan
executions of all threads in the order they start; a plan run inside another plan's step (a
``cond`` branch) belongs to the enclosing execution and is recorded with it (its events carry
``args.nested``). Cache events, compiles and eager ops outside any plan are recorded while the
window is open (from ``warmup`` executions on, until ``steps`` more have started). Profiles may
nest or overlap: each one counts and records independently. A compiled function's replay that
its own memo serves (``@nd.compile`` with the same input types) reaches no plan-cache lookup, so
it shows a plan event but no cache hit.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable, NamedTuple, Sequence

from .errors import ConfigError

#: True while at least one profile is open. Executors read it once per plan execution and
#: only then take their instrumented path.
active = False

_lock = threading.Lock()
_open: tuple["Profile", ...] = ()
_last: "Profile | None" = None
_local = threading.local()   # .depth: nested plan executions; .into: their profiles
_T0 = time.perf_counter_ns()
_PID = os.getpid()

#: Event categories of the summary's rows: plan steps, and eager op calls.
STEP_CATEGORIES = ("kernel", "library", "interpreter", "eager")


def _forked() -> None:
    """In a forked child: the parent's profiles are the parent's (the child neither records
    into nor writes them)."""
    global _open, active, _PID
    _open, active, _PID = (), False, os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def now_us() -> float:
    """Microseconds on the trace's clock (``ts`` of an event)."""
    return (time.perf_counter_ns() - _T0) / 1000.0


_DESCRIBED: dict = {}  # (dtype, shape) -> text: str(np.dtype) costs about a microsecond


def describe(value: Any) -> str:
    """``float32[128,784]`` for an array, ``float (weak)`` for a Python scalar."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return f"{type(value).__name__} (weak)"
    text = _DESCRIBED.get((dtype, shape))
    if text is None:
        if len(_DESCRIBED) > 4096:
            _DESCRIBED.clear()
        text = _DESCRIBED[(dtype, shape)] = f"{dtype}[{','.join(map(str, shape))}]"
    return text


class Profile:
    """One profiling session (see the module docstring); ``nd.profile`` makes one.

    ``path``: where ``__exit__`` writes the trace (``None``: keep it in memory only).
    ``warmup``: top-level plan executions to skip first; ``steps``: how many to record after
    them (``None``: all until exit), as ND4J's ``ProfilingListener`` (warmup, nIter).
    """

    def __init__(self, path: str | os.PathLike | None = None, *, warmup: int = 0,
                 steps: int | None = None) -> None:
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise ConfigError(f"profile: warmup must be an integer >= 0, got {warmup!r}")
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)
                                  or steps < 1):
            raise ConfigError(f"profile: steps must be None or an integer >= 1, got {steps!r}")
        self.path = None if path is None else os.fspath(path)
        self.warmup, self.steps = warmup, steps
        self.events: list[dict] = []
        self.executions = 0     # top-level plan executions seen while open (skipped included)
        self.recorded = 0       # of which recorded
        self._threads: dict[int, str] = {}
        self._pid = os.getpid()

    # -- life cycle --------------------------------------------------------------------------
    def start(self) -> "Profile":
        """Begin recording (``with`` does this)."""
        global _open, active, _last
        with _lock:
            if self in _open:
                raise RuntimeError("profile: this profile is already recording")
            _open = _open + (self,)
            active = True
            _last = self
        self._pid = os.getpid()
        return self

    def stop(self) -> None:
        """Stop recording (idempotent)."""
        global _open, active
        with _lock:
            _open = tuple(p for p in _open if p is not self)
            active = bool(_open)

    def __enter__(self) -> "Profile":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        if self.path is not None and self._pid == os.getpid():  # not from a forked child
            self.write(self.path)

    def recording(self) -> bool:
        """Would the next top-level plan execution be recorded?"""
        return self.warmup <= self.executions and (
            self.steps is None or self.executions < self.warmup + self.steps)

    # -- output ------------------------------------------------------------------------------
    def trace(self) -> dict:
        """The Chrome Trace Event object: ``{"traceEvents": [...], "displayTimeUnit": "ms"}``."""
        meta = [{"ph": "M", "name": "process_name", "pid": _PID, "tid": 0, "ts": 0,
                 "cat": "__metadata", "args": {"name": "nd4py"}}]
        meta += [{"ph": "M", "name": "thread_name", "pid": _PID, "tid": tid, "ts": 0,
                  "cat": "__metadata", "args": {"name": name}}
                 for tid, name in sorted(self._threads.items())]
        return {"traceEvents": meta + list(self.events), "displayTimeUnit": "ms"}

    def write(self, path: str | os.PathLike) -> str:
        """Write the trace as JSON (loadable in Perfetto / chrome://tracing); returns the path."""
        path = os.fspath(path)
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.trace(), f)
        return path

    def summary(self) -> "Summary":
        """The per-op table of this profile's step events (see ``Summary``)."""
        return summarize(self.events)

    def _add(self, event: dict) -> None:
        tid = event["tid"]
        if tid not in self._threads:
            self._threads[tid] = threading.current_thread().name
        self.events.append(event)  # list.append is atomic: threads may record at once

    def __repr__(self) -> str:
        return (f"Profile({self.path!r}, warmup={self.warmup}, steps={self.steps}: "
                f"{self.recorded} of {self.executions} plan execution(s) recorded, "
                f"{len(self.events)} event(s))")


# -- what the executors call (only when ``active``) ------------------------------------------

def targets() -> Sequence[Profile]:
    """The profiles an event happening now belongs to: inside a plan execution, the ones
    recording it; otherwise those whose next top-level execution would be recorded."""
    if getattr(_local, "depth", 0):
        return _local.into
    return [p for p in _open if p.recording()]


def plan_begin() -> Sequence[Profile]:
    """A plan execution starts: returns the profiles recording it (may be empty). Every
    ``plan_begin`` must be paired with a ``plan_end``."""
    depth = getattr(_local, "depth", 0)
    if depth:
        into = _local.into
    else:
        with _lock:
            into = [p for p in _open if p.recording()]
            for p in _open:
                p.executions += 1
            for p in into:
                p.recorded += 1
        _local.into = into
    _local.depth = depth + 1
    return into


def plan_end() -> None:
    _local.depth -= 1


def complete(into: Iterable[Profile], name: str, cat: str, ts: float, args: dict | None = None,
             end: float | None = None) -> None:
    """Record a complete ("X") event that began at ``ts`` and ends now (or at ``end``)."""
    end = now_us() if end is None else end
    args = args or {}
    # inside a plan's step (a step of a branch's plan, an eager op a UDF calls): its time is
    # already counted in that step's
    if getattr(_local, "depth", 0) > (0 if cat == "eager" else 1):
        args["nested"] = True
    event = {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": round(end - ts, 3), "pid": _PID,
             "tid": threading.get_native_id(), "args": args}
    for p in into:
        p._add(event)


def instant(name: str, cat: str, args: dict | None = None) -> None:
    """Record an instant ("i", thread-scoped) event into the profiles recording now."""
    into = targets()
    if not into:
        return
    event = {"name": name, "cat": cat, "ph": "i", "s": "t", "ts": now_us(), "pid": _PID,
             "tid": threading.get_native_id(), "args": args or {}}
    for p in into:
        p._add(event)


def compile_event(ts: float, plan: Any, owner: Any = None) -> None:
    """A plan was built (``ts``: when building began)."""
    into = targets()
    if not into:
        return
    explain = getattr(plan, "explain", None)
    args = {"plan": explain().splitlines()[0] if explain else type(plan).__name__,
            "kind": getattr(plan, "kind", type(plan).__name__)}
    if getattr(plan, "reason", ""):
        args["fallback"] = plan.reason
    if owner is not None:
        args["owner"] = str(owner)
    complete(into, "compile plan", "compile", ts, args)


def step_args(ops: Sequence[str], values: dict, ins: Sequence[Any], outs: Sequence[Any]) -> dict:
    """The args of a step event: its ops and the shapes/dtypes it read and wrote."""
    return {"ops": list(ops),
            "inputs": [describe(values[s]) for s in ins if s in values],
            "outputs": [describe(values[s]) for s in outs if s in values]}


# -- the façade ------------------------------------------------------------------------------

def profile(path: str | os.PathLike | None = None, *, warmup: int = 0,
            steps: int | None = None) -> Profile:
    """Profile the plans run inside a ``with`` block; write a Chrome trace to ``path``.

    Every plan step (fused kernel, library call, interpreter node) becomes a complete event
    with its ops and input/output shapes and dtypes; plan compiles are complete events and
    plan-cache hits/misses instant events. ``warmup`` skips the first N plan executions,
    ``steps`` records only the M after them. Open the file in https://ui.perfetto.dev or
    chrome://tracing; ``profile_summary()`` prints the per-op table. Plans and eager op calls
    of every thread are recorded, each under its own tid.

    >>> import json, os, tempfile
    >>> import nd4py as nd
    >>> nd.clear_cache()  # (so that this example's plan is built, and its compile recorded)
    >>> @nd.compile
    ... def dense(x, w, b):
    ...     return nd.nn.relu(x @ w + b)
    >>> path = os.path.join(tempfile.mkdtemp(), "trace.json")
    >>> with nd.profile(path) as prof:
    ...     for _ in range(3):
    ...         _ = dense(nd.ones(4, 3), nd.ones(3, 2), nd.zeros(2))
    >>> events = json.load(open(path))["traceEvents"]
    >>> sorted({e["cat"] for e in events} & {"compile", "kernel", "library", "plan"})
    ['compile', 'kernel', 'library', 'plan']
    >>> prof.recorded
    3
    """
    return Profile(path, warmup=warmup, steps=steps)


class Row(NamedTuple):
    """One line of the summary: an op (library call, interpreter node, eager call) or a fused
    kernel."""
    op: str
    kind: str       # "kernel", "library", "interpreter" or "eager" ("nested ..." in a branch)
    calls: int
    total_ms: float
    mean_us: float
    percent: float  # of all top-level step and eager time in the profile


@dataclass
class Summary:
    """Per-op totals of a profile's step events, largest first; ``str()`` is the table.
    ``plan_ms`` is the time inside top-level plan executions (steps plus the plan's own
    overhead; the profiler's own recording time taken out), ``overhead_ms`` the part of it
    outside the steps, ``compile_ms`` the time spent building plans."""

    rows: list[Row]
    step_ms: float
    plan_ms: float
    overhead_ms: float
    plans: int
    compile_ms: float
    compiles: int
    hits: int
    misses: int

    def __str__(self) -> str:
        width = max([len(r.op) for r in self.rows] + [len("op / kernel")])
        width = min(width, 60)
        lines = [f"{'op / kernel':<{width}}  {'kind':<11} {'calls':>7} {'total ms':>10} "
                 f"{'mean us':>10} {'%':>6}"]
        for r in self.rows:
            op = r.op if len(r.op) <= width else r.op[:width - 3] + "..."
            lines.append(f"{op:<{width}}  {r.kind:<11} {r.calls:>7} {r.total_ms:>10.3f} "
                         f"{r.mean_us:>10.1f} {r.percent:>6.1f}")
        lines.append(f"steps and eager ops {self.step_ms:.3f} ms; {self.plans} plan execution(s) "
                     f"{self.plan_ms:.3f} ms (outside their steps {self.overhead_ms:.3f} ms); "
                     f"{self.compiles} compile(s) {self.compile_ms:.3f} ms; plan cache "
                     f"{self.hits} hit(s), {self.misses} miss(es)")
        return "\n".join(lines)


def summarize(events: Iterable[dict]) -> Summary:
    """Aggregate step events by (name, category) into a ``Summary``. Steps of a plan run
    inside another plan's step (a ``cond`` branch) get rows of kind ``nested ...``; their time
    is already in the enclosing step's, so only top-level steps make up the 100 %."""
    totals: dict[tuple[str, str], list] = {}
    plan_us = compile_us = recording_us = 0.0
    plans = compiles = hits = misses = 0
    for e in events:
        cat = e.get("cat")
        nested = e.get("args", {}).get("nested", False)
        if cat in STEP_CATEGORIES:
            acc = totals.setdefault((e["name"], "nested " + cat if nested else cat), [0, 0.0])
            acc[0] += 1
            acc[1] += e["dur"]
        elif cat == "plan" and not nested:
            plans += 1
            plan_us += e["dur"]
            recording_us += e["args"].get("recording_us", 0.0)
        elif cat == "compile":
            compiles += 1
            compile_us += e["dur"]
        elif cat == "cache":
            hits += e["name"] == "plan cache hit"
            misses += e["name"] == "plan cache miss"
    step_us = sum(t for (_, cat), (_, t) in totals.items() if not cat.startswith("nested"))
    eager_us = _totals_of(totals, "eager")
    rows = [Row(name, cat, n, t / 1000.0, t / n, 100.0 * t / step_us if step_us else 0.0)
            for (name, cat), (n, t) in totals.items()]
    rows.sort(key=lambda r: (-r.total_ms, r.op))
    plan_us -= recording_us
    return Summary(rows, step_us / 1000.0, plan_us / 1000.0,
                   (plan_us - (step_us - eager_us)) / 1000.0 if plans else 0.0, plans,
                   compile_us / 1000.0, compiles, hits, misses)


def _totals_of(totals: dict, kind: str) -> float:
    return sum(t for (_, cat), (_, t) in totals.items() if cat == kind)


def profile_summary(prof: Profile | None = None, *, show: bool = True) -> Summary:
    """The table a user reads first: per op or fused kernel, calls, total ms, mean us and %
    of the profiled step time, largest total first; printed unless ``show=False``, and
    returned (``.rows``). ``prof`` defaults to the most recently started profile.

    >>> import nd4py as nd
    >>> @nd.compile
    ... def f(x):
    ...     return (x @ x).sum()
    >>> with nd.profile() as prof:
    ...     _ = f(nd.ones(8, 8))
    >>> table = nd.profile_summary(show=False)
    >>> "matmul" in [r.op for r in table.rows if r.kind == "library"]  # (rows: largest first)
    True
    >>> round(sum(r.percent for r in table.rows))
    100
    """
    prof = prof if prof is not None else _last
    if prof is None:
        raise RuntimeError("profile_summary: nothing was profiled yet; run code inside "
                           "`with nd.profile(...):` first")
    table = prof.summary()
    if show:
        print(table, file=sys.stdout)
    return table


__all__ = ["Profile", "Row", "Summary", "active", "profile", "profile_summary", "summarize"]
