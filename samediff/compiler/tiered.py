"""Tiered execution: a new plan answers at once from the interpreter while its kernels compile
on a background thread; the compiled plan swaps in between two calls when it is ready.

Compiling a plan's fused kernels takes from a fraction of a second to tens of seconds on a cold
kernel cache (Numba/LLVM), against micro- to milliseconds per call once compiled. A JIT in a
language VM (HotSpot, V8) does not make the first calls wait for its optimizing tier, and
neither do plans in ``"background"`` mode:

* ``get_plan`` (``cache.py``) builds, on a miss, an ``InterpreterPlan`` (no compiling: the
  first call costs about what the interpreter costs) wrapped in a ``TieredPlan``, whose first
  call queues the real build on one daemon thread once it has answered (compiling holds the
  GIL in stretches: started earlier, it would slow that first answer down);
* the thread builds the plan with the installed planner (with the cache's usual fallback: a
  plan whose compile fails keeps running in the interpreter, and says why) and swaps it in:
  one reference assignment, so a call that already started finishes on the plan it began
  with, and every later call runs compiled;
* ``explain()`` says which tier ran and since when; ``nd.cache_stats()`` counts
  ``tiered_compiling`` and ``tiered_swapped``; ``TieredPlan.wait()`` blocks until the swap.

Modes (``ND4PY_COMPILE``, ``set_compile_mode`` for the process, ``compile_mode(...)`` as a
context for one block or thread): ``"sync"`` (the default: a miss compiles before it
answers, as before), ``"background"`` and ``"interpret"`` (never compile). The default stays
``"sync"`` because tiers are not bit for bit alike: ops flagged ``exact`` give the same bits in
both, but a fused kernel's math functions (``compiler/mathlib.py``) may differ from numpy's in
the last bit, so results of the first calls of a background plan can differ in the last bits
from later ones — and a training run would then depend on how fast the compile was (the
reproducibility promise of ``fit`` holds in ``"sync"`` mode).

Threads and fork: plans are shared by threads (the swap is atomic); the build job counts as an
in-flight kernel for ``kernels.forksafe``, so a fork waits for a compile in progress (up to
``forksafe.WAIT_S``), and a forked child restarts the thread for the builds still queued.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any, Callable, Iterator

from ..errors import ConfigError
from ..interpreter import InterpreterPlan
from ..kernels import compiling

MODES = compiling.MODES


def _checked(mode: Any, where: str) -> str:
    if mode not in MODES:
        raise ConfigError(f"{where}: compile mode must be one of {MODES}, got {mode!r}")
    return mode


# the mode lives in the kernels layer (``kernels.compiling``), whose own Numba functions follow
# it too; its name is checked here, where ConfigError is known
_checked(compiling.mode(), "ND4PY_COMPILE")


def set_compile_mode(mode: str) -> str:
    """Set the process-wide compile mode for new plans; returns the previous one.

    >>> previous = set_compile_mode("background")
    >>> set_compile_mode(previous)
    'background'
    """
    return compiling.set_default(_checked(mode, "set_compile_mode"))


def get_compile_mode() -> str:
    """The mode new plans are built in here (a ``compile_mode`` block's, else the process's)."""
    return compiling.mode()


@contextlib.contextmanager
def compile_mode(mode: str) -> Iterator[None]:
    """Build the plans first needed inside the block in ``mode`` (this thread/context only).

    >>> import nd4py as nd
    >>> with nd.compile_mode("interpret"):
    ...     with nd.graph_scope() as scope:
    ...         y = nd.ones(3) * 2.0
    >>> y.numpy().tolist(), scope.plan.kind
    ([2.0, 2.0, 2.0], 'interpreter')
    """
    with compiling.override(_checked(mode, "compile_mode")):
        yield


class TieredPlan:
    """A plan that runs in the interpreter until its compiled form is ready (see the module
    docstring). ``execute``, ``input_slots`` and ``output_slots`` are those of a plan."""

    kind = "tiered"

    def __init__(self, interpreted: InterpreterPlan, build: Callable[[], Any]) -> None:
        self.input_slots = interpreted.input_slots
        self.output_slots = interpreted.output_slots
        self.reason = ""  # (a cache counts a plan with a reason as a fallback)
        self._active: Any = interpreted
        self._interpreted = interpreted
        self._build = build
        self._done = threading.Event()
        self._queued = False
        self._queued_at = time.perf_counter()
        self._swapped_after: float | None = None

    def execute(self, inputs: Any) -> list[Any]:
        out = self._active.execute(inputs)
        if not self._queued:  # the build starts after the first answer, so that compiling
            self._queue()     # (which holds the GIL in stretches) does not slow it down
        return out

    def _queue(self) -> None:
        with _thread_lock:
            if self._queued:
                return
            self._queued = True
            self._queued_at = time.perf_counter()
        _queue_build(self)

    @property
    def compiled(self) -> bool:
        """True once the built plan has swapped in (it may itself be an interpreter fallback,
        with its ``reason``)."""
        return self._done.is_set()

    @property
    def active(self) -> Any:
        """The plan calls run on now."""
        return self._active

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the built plan has swapped in (or ``timeout`` seconds); True if it has."""
        return self._done.wait(timeout)

    def _run_build(self) -> None:
        try:
            plan = self._build()
        except BaseException as exc:  # (build already falls back; this is a last resort)
            plan = InterpreterPlan(self._interpreted.nodes, self.input_slots, self.output_slots,
                                   reason=f"background build failed: {type(exc).__name__}: {exc}")
        self.reason = getattr(plan, "reason", "")
        self._active = plan  # the swap: one reference, read once per call
        self._swapped_after = time.perf_counter() - self._queued_at
        self._build = None  # type: ignore[assignment]  (frees what the build closed over)
        self._done.set()

    def explain(self) -> str:
        if self._done.is_set():
            head = f"plan: tiered, swapped in after {self._swapped_after:.3f} s; running:"
        elif not self._queued:
            head = "plan: tiered, compiles in the background after its first call; running:"
        else:
            waited = time.perf_counter() - self._queued_at
            head = f"plan: tiered, compiling in the background for {waited:.3f} s; running:"
        return head + "\n" + "\n".join("  " + line for line in self._active.explain().splitlines())


# -- the builds, on the kernels layer's one compile thread ----------------------------------

_thread_lock = threading.Lock()
_pending = 0      # queued or building now
_swapped = 0      # built and swapped in, since the process started


def _queue_build(plan: TieredPlan) -> None:
    global _pending
    with _thread_lock:
        _pending += 1
    compiling.submit(lambda: _build_one(plan))  # (counted in flight for forksafe there)


def _build_one(plan: TieredPlan) -> None:
    global _pending, _swapped
    try:
        plan._run_build()
    finally:
        with _thread_lock:
            _pending -= 1
            _swapped += 1


def stats() -> dict[str, int]:
    """``tiered_compiling`` (builds queued or running) and ``tiered_swapped`` (done)."""
    return {"tiered_compiling": _pending, "tiered_swapped": _swapped}


def _after_fork_in_child() -> None:
    """A lock held by a thread that does not exist in the child (the compile thread itself
    restarts in ``kernels.compiling`` for the builds still queued)."""
    global _thread_lock
    _thread_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


__all__ = ["MODES", "TieredPlan", "compile_mode", "get_compile_mode", "set_compile_mode",
           "stats"]
