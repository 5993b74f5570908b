"""Routes chosen by measurement: which of an op's kernels runs a shape class, decided by a short
timing on first use and remembered per machine (as FFTW's wisdom and cuDNN's autotuner do).

Why: a route that won on the day it was chosen can lose on another (the issue measured nd4py's
(128, 784) x (784, 256) matmul on the private BLAS at 2.0-2.5 ms against numpy's 1.2 ms one
day, on par another): fixed size thresholds encode one machine state. So for each shape class
-- dtype and the power-of-two bucket of each dimension, plus whatever else changes the work
(``"split"``) -- a ``Chooser`` times its routes once, alternately, a few repetitions each,
within ``BUDGET_S`` (the untimed first run of each included), and keeps the faster median. One
route is preferred (by default the first, numpy's): another must beat it by ``MARGIN`` to be
chosen, so noise alone never moves a class off it. The measured calls are real calls: the
caller gets the winner's result. Routes that leave a thread pool spinning after each call
(``spins``: numpy's multi-threaded OpenBLAS) are timed after the others, not alternately: their
spinning threads take the core the others' next call splits onto (interleaved, the private
split matmul timed 1.7 ms against numpy's 0.85 at 1024x256x256; each in a block of its own,
0.82-0.87 against 0.75-0.78).

Decisions are kept in memory and on disk, in ``<ND4PY_CACHE_DIR or ~/.cache/nd4py>/routes/``,
one JSON file per machine key (``versions()``: CPU model and features, core count, Python,
NumPy, Numba, the private BLAS wheel, nd4py, ``FORMAT``): another machine or install never
reads them, and a run is reproducible once its classes are tuned (routes are not bit for bit
alike: different BLAS kernels sum in different orders). Delete the directory to tune again.

A decision measured on a busy machine is kept in memory only, never written: the 1-minute load
average above the core count (``_load``), or one route's rounds spread over more than
``SPREAD`` times its fastest (another process took the core mid-measurement). A busy moment
must not tune a machine forever: such a class is measured again by the next process. Its
reason says "(busy: not saved)".

Forcing: ``force(op, route)`` (a block, this process) or the chooser's environment variable
(``ND4PY_BLAS=numpy|private`` for matmul) decides without measuring, and says so.

>>> c = Chooser("doc", ("numpy", "fast"), persist=False)
>>> d, result = c.measure("float32 m2^7", {"numpy": lambda: 1, "fast": lambda: 2}, "m128")
>>> d.route in ("numpy", "fast") and c.decided("float32 m2^7") is d
True
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

__all__ = ["Chooser", "Decision", "busy", "force", "size_class", "versions"]

#: bump when the shape classes or the measurement change: older decisions are ignored (2:
#: decisions of format 1 were saved whatever the load, some measured at a busy moment)
FORMAT = 2
#: time a class's measurement should take (its untimed first runs included): rounds stop once
#: it is spent after three, or after one round that alone took three times as much (a big
#: product: its class is measured once per machine)
BUDGET_S = 0.020
#: timed rounds at most (each runs every route once, in alternating order)
ROUNDS = 5
#: another route must be faster than the reference by this fraction to be chosen
MARGIN = 0.05

#: a route whose slowest timed round took more than this many times its fastest was measured
#: while something else ran: the decision is not saved (a quiet machine's rounds of one
#: product agree within tens of percent; a busy one's differ by 10-100x)
SPREAD = 3.0

_clock = time.perf_counter  # (tests inject a fake clock: no test times real work)


def _load() -> float:
    """The 1-minute load average (0.0 where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def busy(times: dict[str, list[float]]) -> str:
    """Why a measurement's ``times`` (route -> its rounds) should not be saved, or ``""``."""
    cores = os.cpu_count() or 1
    load = _load()
    if load > cores:
        return f"load {load:.1f} > {cores} cores"
    for route, t in times.items():
        if t and min(t) > 0 and max(t) > SPREAD * min(t):
            return f"{route}'s rounds spread {max(t) / min(t):.0f}x"
    return ""


@dataclass(frozen=True)
class Decision:
    """The route of one shape class, and why (what ``explain()`` prints)."""

    route: str
    why: str


def size_class(dtype: Any, **dims: int) -> str:
    """``"float32 m2^7 n2^8 k2^9"``: the dtype and each dimension's power-of-two bucket
    (``2^b <= size < 2^(b+1)``; ``0`` for an empty one).

    >>> size_class("float32", m=128, n=256, k=784)
    'float32 m2^7 n2^8 k2^9'
    """
    return " ".join([str(dtype)] + [f"{name}2^{max(size, 1).bit_length() - 1}" if size else
                                    f"{name}0" for name, size in dims.items()])


_VERSIONS: str | None = None


def versions() -> str:
    """What a decision depends on besides its shape class: the machine and the installs."""
    global _VERSIONS
    if _VERSIONS is None:
        from importlib.metadata import PackageNotFoundError, version

        def ver(name: str) -> str:
            try:
                return version(name)
            except PackageNotFoundError:
                return "-"
        try:
            from llvmlite import binding as llvm
            cpu = f"{llvm.get_host_cpu_name()}:{llvm.get_host_cpu_features().flatten()}"
        except Exception:  # noqa: BLE001 (no llvmlite: the platform's name is what we have)
            import platform
            cpu = platform.processor() or platform.machine()
        _VERSIONS = (f"r{FORMAT}-cpu{hashlib.sha256(cpu.encode()).hexdigest()[:12]}"
                     f"x{os.cpu_count()}-py{sys.version_info[:3]}-np{ver('numpy')}-"
                     f"nb{ver('numba')}-blas{ver('scipy-openblas32')}-nd{ver('nd4py')}")
    return _VERSIONS


def _directory() -> Path:
    env = os.environ.get("ND4PY_CACHE_DIR")  # (the kernel cache's base, compiler/codegen.py)
    return (Path(env) if env else Path.home() / ".cache" / "nd4py") / "routes"


def _path() -> Path:
    return _directory() / f"routes-{hashlib.sha256(versions().encode()).hexdigest()[:16]}.json"


def _read(path: Path) -> dict:
    """The file's choices, or {} when it is missing, unreadable or of other versions."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("versions") != versions():
        return {}  # stale (another machine or install under a colliding name): ignored
    choices = data.get("choices")
    return choices if isinstance(choices, dict) else {}


_disk_lock = threading.Lock()


def _write(op: str, cls: str, decision: Decision) -> None:
    """Add one decision to the machine's file (merged with what other processes wrote since;
    written whole and renamed, so a reader never sees half a file). A read-only or missing
    cache directory only costs the decision its persistence."""
    path = _path()
    with _disk_lock:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            choices = _read(path)
            choices.setdefault(op, {})[cls] = {"route": decision.route, "why": decision.why}
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump({"versions": versions(), "choices": choices}, f, indent=1)
            os.replace(tmp, path)
        except OSError:
            pass


_forced: dict[str, str] = {}


@contextlib.contextmanager
def force(op: str, route: str) -> Iterator[None]:
    """Run ``op`` on ``route`` inside the block (process-wide), without measuring.

    >>> c = Chooser("doc_forced", ("numpy", "fast"), persist=False)
    >>> with force("doc_forced", "fast"):
    ...     c.forced()
    Decision(route='fast', why='forced by routes.force')
    """
    previous = _forced.get(op)
    _forced[op] = route
    try:
        yield
    finally:
        if previous is None:
            _forced.pop(op, None)
        else:
            _forced[op] = previous


class Chooser:
    """The routes of one op (``routes[0]``: numpy's, always ready) and its decisions per shape
    class. ``env``: a variable whose value, if it names a route, forces it; ``prefer``: the
    route that wins ties (within ``MARGIN``; default ``routes[0]``)."""

    def __init__(self, op: str, routes: tuple[str, ...], env: str | None = None,
                 persist: bool = True, prefer: str | None = None,
                 spins: tuple[str, ...] = ()) -> None:
        self.op, self.routes, self.env, self.persist = op, tuple(routes), env, persist
        self.prefer = self.routes[0] if prefer is None else prefer
        self.spins = tuple(spins)  # routes that leave a thread pool spinning: timed last
        self._memory: dict[str, Decision] = {}
        self._loaded = not persist
        self._lock = threading.Lock()

    def forced(self) -> Decision | None:
        """The forced decision (``force``, else the environment variable), or None."""
        route = _forced.get(self.op)
        if route is not None:
            return Decision(route, "forced by routes.force")
        value = os.environ.get(self.env, "") if self.env else ""
        if value in self.routes:
            return Decision(value, f"forced by {self.env}={value}")
        return None

    def decided(self, cls: str) -> Decision | None:
        """The decision for ``cls`` made earlier in this process or on this machine, or None."""
        d = self._memory.get(cls)
        if d is None and not self._loaded:
            self._load()
            d = self._memory.get(cls)
        return d

    def _load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            for cls, entry in _read(_path()).get(self.op, {}).items():
                if isinstance(entry, dict) and entry.get("route") in self.routes:
                    self._memory.setdefault(cls, Decision(entry["route"],
                                                          str(entry.get("why", "")) + " (cached)"))
            self._loaded = True

    def measure(self, cls: str, runs: dict[str, Callable[[], Any]],
                shape: str = "", unsettled: str = "") -> tuple[Decision, Any]:
        """Time ``runs`` (route -> a call computing the op) on ``cls`` (see the module
        docstring), remember the winner, and return it with the result of one of its runs.
        ``shape``: the concrete sizes measured, for the reason; ``unsettled``: why the
        caller knows this moment is unrepresentative (the decision is then not saved, as a
        busy machine's)."""
        names = [r for r in self.routes if r in runs]
        times: dict[str, list[float]] = {r: [] for r in names}
        results: dict[str, Any] = {}
        calm = [r for r in names if r not in self.spins]
        if len(calm) == len(names):
            _rounds(names, runs, times, results, BUDGET_S)
        else:  # a spinning pool would slow the others' next calls: time those first
            _rounds(calm, runs, times, results, BUDGET_S / 2)
            _rounds([r for r in names if r in self.spins], runs, times, results, BUDGET_S / 2)
        med = {r: statistics.median(t) for r, t in times.items()}
        ref = self.prefer if self.prefer in names else names[0]
        best = min(names, key=lambda r: med[r])
        if med[best] >= (1 - MARGIN) * med[ref]:
            best = ref
        others = " vs ".join(f"{r} {med[r] * 1e3:.3g} ms" for r in names if r != best)
        where = f"at {shape} {cls.split()[0]}" if shape else f"at {cls}"
        noisy = unsettled or busy(times)
        why = f"measured {med[best] * 1e3:.3g} ms vs {others} {where}"
        decision = Decision(best, f"{why} (busy: {noisy}; not saved)" if noisy else why)
        self._memory[cls] = decision
        if self.persist and not noisy:
            _write(self.op, cls, decision)
        return decision, results[best]

    def describe(self, cls: str) -> str:
        """``"numpy: measured ..."`` for a decided class, else ``""``."""
        d = self.forced() or self.decided(cls)
        return f"{d.route}: {d.why}" if d else ""


def _rounds(names: list[str], runs: dict, times: dict, results: dict, budget: float) -> None:
    """Time ``names`` in alternating rounds (drift cancels) within ``budget`` (see the module
    docstring), after one untimed run each (first touch, thread wake-up)."""
    start = _clock()
    results.update({r: runs[r]() for r in names})
    for k in range(ROUNDS):
        for r in (names if k % 2 == 0 else names[::-1]):
            t0 = _clock()
            results[r] = runs[r]()
            times[r].append(_clock() - t0)
        spent = _clock() - start  # (three rounds unless one already took the budget)
        if spent > budget and (k >= 2 or spent > 3 * budget):
            break
