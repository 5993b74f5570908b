"""A second core for the library kernels: ``both(first, second)`` runs ``second`` on one
persistent helper thread while the calling thread runs ``first``.

Why a thread of our own and not Numba's ``parallel=True`` or a bigger BLAS call: the kernels
that use it (convolution gathers and their small per-image GEMMs, pooling) alternate numpy
copies, single-threaded BLAS calls and ``nogil`` Numba loops; a pool that spin-waits after
each piece (Numba's OpenMP layer, OpenBLAS's threads) held the other core away from the next
piece (see ``ops/cnn_kernels.py``). Work split into two halves of whole images, each half
running everything it needs on its own thread, has no such hand-off. numpy, BLAS and
``nogil`` Numba functions release the GIL, so the halves do run at once.

The helper takes one job at a time: a second caller (another user thread, or a job that
itself calls ``both``) finds it busy and runs both halves itself, in order -- same results,
no deadlock. ``ND4PY_WORKERS=1`` turns the helper off (every ``both`` then runs serially).
After ``os.fork`` the child starts a helper of its own on first use.

>>> from samediff.workers import both
>>> out = [0, 0]
>>> both(lambda: out.__setitem__(0, 1), lambda: out.__setitem__(1, 2))
>>> out
[1, 2]
"""
from __future__ import annotations

import os
import queue
import threading
from typing import Callable

__all__ = ["both", "enabled"]

_ENABLED = os.environ.get("ND4PY_WORKERS", "") != "1" and (os.cpu_count() or 1) > 1


class _Helper:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.busy = threading.Lock()  # held by the caller whose job the helper runs
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.done: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="nd4py-worker", daemon=True).start()

    def _loop(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                job()
            except BaseException as exc:  # handed to the caller, raised there
                self.done.put(exc)
            else:
                self.done.put(None)


_helper: _Helper | None = None
_start = threading.Lock()


def enabled() -> bool:
    """Whether ``both`` may use a second thread (``ND4PY_WORKERS=1`` or one CPU: no)."""
    return _ENABLED


def _get() -> _Helper:
    global _helper
    with _start:
        if _helper is None or _helper.pid != os.getpid():
            _helper = _Helper()
        return _helper


def both(first: Callable[[], None], second: Callable[[], None]) -> None:
    """Run ``first()`` here and ``second()`` on the helper thread; return when both are done.
    An exception from either is raised here (``first``'s if both fail), after both finished.
    Serial (``first`` then ``second``) when the helper is disabled or busy."""
    helper = _get() if _ENABLED else None
    if helper is None or not helper.busy.acquire(blocking=False):
        first()
        second()
        return
    try:
        helper.jobs.put(second)
        try:
            first()
        finally:
            failure = helper.done.get()
    finally:
        helper.busy.release()
    if failure is not None:
        raise failure
