"""When compiling may block a caller: the compile mode, the one compile thread, and which kernel
families are ready.

Plans (``samediff/compiler/tiered.py``) and the kernels layer's own Numba functions (the private
BLAS's matmul halves, ``finite``'s bit counts, the convolution and pooling drivers) share them:

* **the mode** (``ND4PY_COMPILE``; ``compiler.set_compile_mode`` / ``compile_mode`` set it and
  check the name): ``"sync"`` compiles on first use, before answering (deterministic: the
  default); ``"background"`` and ``"interpret"`` never make a caller wait for Numba;
* **one compile thread** (``submit``): plan builds and kernel warm-ups queue on it in order,
  each counted in flight for ``forksafe`` (a fork waits for a compile in progress), restarted
  in a forked child for the jobs still queued. At exit the jobs not started are dropped and
  the one running is waited for (a daemon thread inside LLVM while the process's static
  destructors run aborts the process);
* **ready** (``ready(key, warm)``): a kernel-layer route that needs a Numba function asks
  whether it may call it now. In ``"sync"`` mode always (the call compiles if it must). Else
  only once ``warm`` -- a call of the function on tiny arguments of the same Numba types,
  which compiles it or loads it from Numba's disk cache -- has run on the compile thread; until
  then the caller takes its numpy route, which is always ready. The first call of a training
  step in background mode therefore runs on numpy's routes while the kernels compile.

This module imports no Numba (``import nd4py`` loads it).

>>> from samediff.kernels import compiling
>>> with compiling.override("sync"):
...     compiling.ready(("doc", 1), lambda key: None)
True
"""
from __future__ import annotations

import atexit
import contextlib
import contextvars
import os
import queue
import sys
import threading
import traceback
from typing import Any, Callable, Hashable, Iterator

from . import forksafe

__all__ = ["MODES", "mode", "set_default", "override", "submit", "pending", "ready",
           "wait_ready"]

MODES = ("sync", "background", "interpret")

#: the process's mode (``compiler.tiered`` checks the name at import and raises ConfigError)
_default = os.environ.get("ND4PY_COMPILE", "sync")
_override: contextvars.ContextVar[str | None] = contextvars.ContextVar("nd4py_compile_mode",
                                                                       default=None)


def mode() -> str:
    """The compile mode here: a ``override`` block's (this thread/context), else the process's."""
    m = _override.get()
    return _default if m is None else m


def set_default(m: str) -> str:
    """Set the process's mode (unchecked: ``compiler.set_compile_mode`` checks); the old one."""
    global _default
    previous, _default = _default, m
    return previous


@contextlib.contextmanager
def override(m: str) -> Iterator[None]:
    """``m`` as the mode inside the block, on this thread/context only (unchecked)."""
    token = _override.set(m)
    try:
        yield
    finally:
        _override.reset(token)


# -- the compile thread -----------------------------------------------------------------------

_jobs: queue.SimpleQueue = queue.SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()
_pending = 0  # jobs queued or running


#: at exit, how long to wait for the compile in progress (a daemon thread still inside LLVM
#: when the process's static destructors run aborts the process: seen as SIGABRT in MCJIT's
#: register allocator while the main thread ran its exit handlers, 1 exit in 5-10 of a
#: background-mode LSTM training script)
EXIT_WAIT_S = 60.0
_exiting = False
_idle = threading.Event()  # set while no job is queued or running
_idle.set()


def submit(job: Callable[[], None]) -> None:
    """Run ``job()`` on the compile thread, after the jobs queued before it. A job that raises
    is reported on stderr once and dropped (its callers keep their numpy or interpreter route).
    At exit, jobs not started are dropped and the one running is waited for."""
    global _pending, _thread
    with _lock:
        _pending += 1
        _idle.clear()
        _jobs.put(job)
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_work, name="nd4py-compile", daemon=True)
            _thread.start()


def pending() -> int:
    """Jobs queued or running on the compile thread."""
    return _pending


@forksafe.guarded  # a fork waits for a compile in progress (Numba holds its locks meanwhile)
def _run(job: Callable[[], None]) -> None:
    job()


#: the interpreter's GIL switch interval while the compile thread works. Numba compiles mostly
#: in Python, holding the GIL: at Python's default 5 ms the thread running the plans waited up
#: to 5 ms after every numpy call that had released it, and W3's training iterations took 12-21
#: ms during its compile (3-6 ms interpreted alone); at 0.1 ms, 5-9 ms, and the compile itself
#: took as long (9.7 vs 10.3 s).
COMPILING_SWITCH_S = 1e-4
_saved_switch: float | None = None


def _switch_fast(on: bool) -> None:
    """Shorten the switch interval while compiling; restore the previous one after (unless
    someone changed it meanwhile: theirs stays)."""
    global _saved_switch
    if on and _saved_switch is None:
        _saved_switch = sys.getswitchinterval()
        sys.setswitchinterval(min(_saved_switch, COMPILING_SWITCH_S))
    elif not on and _saved_switch is not None:
        if sys.getswitchinterval() == min(_saved_switch, COMPILING_SWITCH_S):
            sys.setswitchinterval(_saved_switch)
        _saved_switch = None


def _work() -> None:
    global _pending
    while True:
        job = _jobs.get()
        with _lock:
            _switch_fast(True)
        try:
            if not _exiting:
                _run(job)
        except BaseException:  # noqa: BLE001 (the thread must survive a failed job)
            print("nd4py: a background compile failed (its callers keep their numpy route):\n"
                  + traceback.format_exc(), file=sys.stderr)
        finally:
            with _lock:
                _pending -= 1
                if not _pending:
                    _switch_fast(False)
                    _idle.set()


def _finish_at_exit() -> None:
    """Drop the jobs not started and wait for the one running (``EXIT_WAIT_S``)."""
    global _exiting
    _exiting = True
    if _thread is not None and _thread.is_alive():
        _idle.wait(EXIT_WAIT_S)


atexit.register(_finish_at_exit)


def _after_fork_in_child() -> None:
    """The compile thread does not exist in a child: start one for the jobs still queued."""
    global _thread, _lock, _warming_lock, _idle
    _thread, _lock, _warming_lock = None, threading.Lock(), threading.Lock()
    _idle = threading.Event()
    if not _pending:
        _idle.set()
    if _pending:
        _thread = threading.Thread(target=_work, name="nd4py-compile", daemon=True)
        _thread.start()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# -- which kernel families are ready ----------------------------------------------------------

_ready: set = set()      # keys whose Numba functions are compiled (or loaded) for their types
_warming: dict = {}      # key -> threading.Event, set when its warm-up has run
_warming_lock = threading.Lock()


def ready(key: Hashable, warm: Callable[[Any], None]) -> bool:
    """May the caller run the Numba functions ``key`` names now? True once they are compiled
    for ``key``'s types, and always in ``"sync"`` mode (the call compiles them if it must).
    Otherwise False, and ``warm(key)`` -- which compiles them (or loads them from Numba's disk
    cache) by one call on tiny arguments of the same types -- is queued on the compile thread
    once; the caller takes its numpy route meanwhile. ``key`` must name every type the call
    specializes on (dtype, layouts, ranks); ``warm`` is a module-level function (no closure
    is built on the hot path)."""
    if key in _ready:
        return True
    if mode() == "sync":  # the caller's own call compiles them now, as it always did. (Not
        return True       # marked ready here: a warm-up in progress on the compile thread
                          # runs in sync mode too, and must not let callers in before it ends)
    with _warming_lock:
        if key in _warming:
            return False
        done = _warming[key] = threading.Event()
    submit(lambda: _warm(key, warm, _ready, done))
    return False


def _warm(key: Hashable, warm: Callable[[Any], None], into: set, done: threading.Event) -> None:
    try:
        with override("sync"):  # inside, every ``ready`` says yes: the warm-up compiles
            warm(key)
        into.add(key)
    finally:
        done.set()


def wait_ready(key: Hashable, timeout: float | None = None) -> bool:
    """Block until ``key``'s warm-up has run (or ``timeout`` seconds); True if it is ready."""
    event = _warming.get(key)
    if event is not None:
        event.wait(timeout)
    return key in _ready
