"""Fork safety: ``os.fork`` (multiprocessing's fork start method, data loaders, Dask
workers) while other threads run nd4py kernels, and kernels in the forked child.

A BLAS call in flight hung both processes without this module:

* **A BLAS call in flight.** OpenBLAS (numpy's copy and our private one, ``samediff.kernels.blas``)
  registers a ``pthread_atfork`` handler that shuts its thread pool down before every fork.
  A thread that is inside a multi-threaded GEMM at that moment waits forever for a share of
  work the pool no longer runs, and the child inherits the pool's locks mid-call: a dense
  layer (``nn.linear``) or an NHWC convolution (per-tap GEMMs), both on numpy's threaded
  BLAS, running on one thread while another forked hung both processes on the first fork.
  (Our private copy runs single-threaded and was not seen to hang in ~3,000 forks during
  convolutions and matmuls on it; the gate covers it all the same.) ``guarded`` kernels --
  every op driver that may call a BLAS or hand half its work to the helper thread
  (``samediff.kernels.workers``) -- count themselves in and out from Python; the fork handler
  stops new entries and waits (with the GIL released, at most ``WAIT_S`` seconds) until none
  is in flight, so both BLAS pools are idle when the fork happens. Kernels held back go on after
  the fork, in the parent.

nd4py runs no Numba ``prange`` kernel (its two-thread work goes through ``workers``), so
Numba's OpenMP pool, which kills a forked child that uses it ("fork() called from a process
already using GNU OpenMP"), is never started by nd4py.

The helper thread and the private BLAS's lazy loading reset themselves in the child
(``workers``, ``blas``). This module imports no Numba (it looks Numba up only if something
else loaded it), so the at-fork handlers are installed when ``samediff`` is imported, before
any kernel can run. BLAS calls made outside nd4py (your own ``numpy`` matmul on
another thread) are not guarded: numpy hangs on them the same way.

>>> from samediff.kernels import forksafe
>>> @forksafe.guarded
... def kernel(x):
...     return x + 1
>>> kernel(1), forksafe.in_flight()
(2, 0)
"""
from __future__ import annotations

import functools
import os
import threading
import warnings
from typing import Callable, TypeVar

__all__ = ["guarded", "is_guarded", "in_flight", "nested_thread", "others_in_flight", "WAIT_S"]

#: longest the fork handler waits for in-flight kernels before it lets the fork go on (with
#: a RuntimeWarning): a kernel that needs something the forking thread holds (a lock of the
#: caller's) would otherwise stall the fork for good
WAIT_S = 10.0

F = TypeVar("F", bound=Callable)

_lock = threading.Lock()  # guards _forks; _changed: a kernel left, or a fork ended
_changed = threading.Condition(_lock)
#: one item per thread inside a guarded kernel (outermost calls only). A list because its
#: append and pop are atomic: the common path -- no fork pending -- takes no lock (a lock
#: round trip costs ~0.25 us on this VM, as long as the rest of the wrapper)
_entries: list = []
_forks = 0  # forks waiting in their before-handler: no new kernel starts meanwhile
_local = threading.local()  # .depth: guarded calls open on this thread


def _wait_for_forks() -> None:
    """A fork is pending: step back out (waking it if it saw this entry) and wait for it."""
    _entries.pop()
    with _lock:
        _changed.notify_all()
        _changed.wait_for(lambda: not _forks)


def guarded(fn: F) -> F:
    """Mark ``fn`` as a kernel driver that may call a BLAS or the helper thread: a fork
    waits until no such call is running, and calls that start during a fork begin after
    it. Nested guarded calls on one thread count once (so a fork never waits for a thread
    that itself waits for the fork); a call costs well under a microsecond.

    >>> total = guarded(sum)
    >>> total([1, 2, 3])
    6
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        local = _local
        depth = getattr(local, "depth", 0)
        if depth:
            local.depth = depth + 1
            try:
                return fn(*args, **kwargs)
            finally:
                local.depth = depth
        # enter, then look for a fork; the fork raises its count, then looks for entries:
        # whichever comes second sees the other (the GIL orders the two steps)
        _entries.append(None)
        while _forks:
            _wait_for_forks()
            _entries.append(None)
        local.depth = 1
        try:
            return fn(*args, **kwargs)
        finally:
            local.depth = 0
            _entries.pop()
            if _forks:
                with _lock:
                    _changed.notify_all()
    wrapper.fork_guarded = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def is_guarded(fn: Callable) -> bool:
    """Was ``fn`` made by ``guarded`` (a test checks the kernel drivers that call a BLAS)?

    >>> is_guarded(guarded(sum)), is_guarded(sum)
    (True, False)
    """
    return getattr(fn, "fork_guarded", False) is True


def nested_thread() -> None:
    """Declare the calling thread one whose guarded calls always run on behalf of a caller
    already counted in flight (the helper thread runs halves of other threads' kernels):
    they never wait for a fork -- the fork is waiting for their caller.

    >>> t = threading.Thread(target=nested_thread)
    >>> t.start(); t.join()
    """
    _local.depth = 1


def in_flight() -> int:
    """How many threads are inside a guarded kernel now.

    >>> in_flight()
    0
    """
    return len(_entries)


def others_in_flight() -> int:
    """``in_flight()`` without the calling thread's own guarded call, if it is inside one.

    >>> others_in_flight()
    0
    """
    return len(_entries) - (1 if getattr(_local, "depth", 0) else 0)


def _before_fork() -> None:
    """Runs with the GIL held in the forking thread; ``wait`` releases it, so the kernels in
    flight can finish and leave."""
    global _forks
    mine = 1 if getattr(_local, "depth", 0) else 0  # forking from inside a kernel
    with _lock:
        _forks += 1
        if not _changed.wait_for(lambda: len(_entries) <= mine, WAIT_S):
            warnings.warn(f"os.fork: {len(_entries) - mine} nd4py kernel(s) still running after "
                          f"{WAIT_S} s; forking anyway (a BLAS call in flight may hang the "
                          f"child or that thread)", RuntimeWarning, stacklevel=2)


def _after_fork_in_parent() -> None:
    global _forks
    with _lock:
        _forks -= 1
        _changed.notify_all()  # kernels that waited for the fork start now


def _after_fork_in_child() -> None:
    """Only the forking thread exists here: no kernel is in flight, no fork pending, and the
    condition's lock may have been held by a thread that is gone."""
    global _lock, _changed, _entries, _forks
    _lock = threading.Lock()
    _changed = threading.Condition(_lock)
    _entries = [None] if getattr(_local, "depth", 0) else []
    _forks = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
