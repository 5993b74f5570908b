"""A second core for the library kernels: ``both(first, second)`` runs ``second`` on one
persistent helper thread while the calling thread runs ``first``.

Why a thread of our own and not Numba's ``parallel=True`` or a bigger BLAS call: the kernels
that use it (convolution gathers and their small per-image GEMMs, pooling, 2-D matmuls on
the private BLAS) alternate numpy copies, single-threaded BLAS calls and ``nogil`` Numba
loops; a pool that spin-waits after each piece (Numba's OpenMP layer, OpenBLAS's threads)
held the other core away from the next piece (see ``kernels/cnn.py``,
``kernels/matmul.py``). Work split into two halves (of images, rows, columns), each half
running everything it needs on its own thread, has no such hand-off. numpy, BLAS and
``nogil`` Numba functions release the GIL, so the halves do run at once.

**Work stealing.** The second half is run by whichever thread claims it first: the helper
once it sees the job posted, or the caller once its own half is done. Before, the caller
always waited for the helper; when another process held the helper's core, the caller
finished its half and then waited up to a scheduler time slice (milliseconds, against
halves of 20-500 us) for a thread that was not running: with the machine busy the LeNet step
ran 3.3x slower with the helper than on one thread (``benchmarks/bench_split_load.py``).

A claim raises a claim word to the job's ticket with one atomic read-modify-write
(``spin.claim``: LLVM's ``atomicrmw max``, sequentially consistent -- Numba has no
compare-and-swap of its own, so it is a small intrinsic). Why each half runs exactly once:

* one winner -- the read-modify-writes of one word are totally ordered: the first to raise
  it to ticket ``t`` reads a value below ``t`` and wins; every later one reads ``>= t``;
* no stale winner -- tickets are never reused and the word never goes down (``max``), so a
  helper that looked at job ``t`` and claims it late, after the caller took ``t`` back and
  posted ``t + 1``, loses instead of lowering the word or taking ``t + 1``;
* never both -- only the winner runs the half; never neither -- the caller of every posted
  ticket claims it when its own half is done: if the caller loses, the helper won, runs
  the half and publishes ``DONE = t``, which the caller waits for (polling, then asleep,
  woken as before);
* the right half -- the helper claims only tickets it saw posted (``GO``, stored after the
  job); a posted ticket that is still unclaimed belongs to a caller that has not reached
  its own claim, so the job stored is that ticket's. The helper polls and claims in native
  code without the GIL (``spin.await_claim``): it takes the GIL only for a half it won.

The caller takes the half back **at once**, not after a grace period: once its own half is
done, the work left is the whole second half, which takes as long whichever thread runs it,
and a helper that has not claimed it yet can only finish later (it has yet to be scheduled,
take the GIL, or wake up). Waiting first can only add the wait: measured with a 100 us grace
period, the LeNet step went from 1.0-1.16x to 1.22-1.24x of one thread's time on the busy
machine. What stealing cannot fix is a helper preempted *after* its claim, in the middle of
its half: the caller waits for it (a half is not split further -- that would change which
sums are taken in which order, and results are bit for bit the same today).

**Spinning and sleeping.** Waking a thread that sleeps in the kernel took 40-60 us on this
machine's VM each way (``both`` of two 80 us halves: 146 us with a queue, 85 us spinning),
so the helper polls for its next job, without the GIL, for ``ND4PY_WORKER_SPIN_US``
microseconds after each job before it sleeps (and the caller polls for a claimed half the
same way). The bound stays 1000 us, by measurement: the gaps between one split and the
next in a LeNet training step (W7) were under 200 us for 49 % of splits, under 500 us for
74 %, under 1000 us for 92 % (on the busy machine; shorter when quiet), so a shorter poll
lets the helper fall asleep inside a step and pay a wake-up at the next split. Under load
the bound no longer mattered once the caller stopped waiting for an unclaimed half: W7 with
the helper / on one thread, with a pinned busy process at load average 9-13, medians of two
interleaved runs each: 0.98 at 1000 us, 0.98 at 200, 0.91 at 50 and 0.60-0.94 at 0; a
second run 1.04 at 1000, 0.96 at 300, 0.94 at 100 -- within the noise of that machine.
Sleeping at once (0) was worse: two 100 us halves 50 us apart, at load average 4.5, took
1.19-1.21x one thread's time with no poll (a woken helper ran 86 % of the halves, each
after a wake-up) against 1.01-1.07x with polls of 50-1000 us.
After a millisecond without a job the helper sleeps: the price of the poll is at most one
millisecond of one core after the last job.
``ND4PY_WORKER_SPIN_US=0`` sleeps at once, as OpenMP's passive wait policy does.

The GIL is the other sleep: a helper that sees its job while the caller still runs Python
(preparing its own half) blocks on the GIL and, on this machine, wakes ~14 us after the GIL
is free. ``both(first, second, gated=True)`` avoids it: ``first`` receives a ``go`` token and
hands it to its nogil kernel, which calls ``spin.announce(go)`` once it runs without the GIL;
only then does the helper take the GIL for ``second`` (a LeNet conv split in two: the
helper's half began 31 us in, after the caller's whole half; gated, it begins at once). The
helper's "done" is likewise published from native code after it let go of the GIL. Either
side falls asleep only after its poll runs out, saying so with a fenced flag the other side
reads after its own fenced store, so no wake-up is lost.

The helper takes one job at a time: a second caller (another user thread, or a job that
itself calls ``both``) finds it busy and runs both halves itself, in order -- same results,
no deadlock. ``ND4PY_WORKERS=1`` turns the helper off (every ``both`` then runs serially).
Either way the work is split the same (``halves`` looks at sizes only), so results are bit
for bit the same with or without the helper, busy or free.
After ``os.fork`` the child starts a helper of its own on first use (and a fork waits for
the kernels in flight, helper halves included: ``samediff.kernels.forksafe``).

>>> from samediff.kernels.workers import both
>>> out = [0, 0]
>>> both(lambda: out.__setitem__(0, 1), lambda: out.__setitem__(1, 2))
>>> out
[1, 2]
"""
from __future__ import annotations

import os
import threading
from typing import Callable

import numpy as np

from . import forksafe, spin

__all__ = ["both", "halves", "on_halves", "split_leading", "enabled", "NO_GO"]

_ENABLED = os.environ.get("ND4PY_WORKERS", "") != "1" and (os.cpu_count() or 1) > 1
#: how long either side polls before it sleeps (see the module docstring)
SPIN_US = float(os.environ.get("ND4PY_WORKER_SPIN_US", "1000") or 0)
#: polls between the idle helper's offers of its core to other threads (OpenMP's, BLAS's):
#: a helper that only spun held OpenMP's second thread off its core (a parallel kernel right
#: after a split convolution: 7.0 -> 8.9 ms); yielding on every 32nd poll cost the splits
#: themselves 0.6 -> 0.85-1.0x, so the caller's waits never yield, the idle helper rarely
IDLE_YIELD_EVERY = 256
#: slots of the flag array, a cache line apart: the last job ticket posted; the last ticket
#: the helper finished; the helper asleep; the caller asleep; the last ticket claimed
_GO, _DONE, _HELPER_ASLEEP, _CALLER_ASLEEP, _CLAIM = 0, 8, 16, 24, 32

#: the ``go`` token of a kernel that runs unsplit: ``spin.announce`` writes a dummy slot
NO_GO = (np.zeros(1, np.int64), 0, 0)


class _Helper:
    """The helper thread and its hand-off. Tickets number the jobs and never repeat: the
    caller stores ``job = (ticket, second)``, then publishes ``GO = ticket``; the half is
    run by whichever side first raises ``CLAIM`` to its ticket (``spin.claim``), the helper
    once it sees the go, the caller once its own half is done. The helper publishes
    ``DONE = ticket`` after a half it claimed; the caller waits for that only when it lost
    the claim. A caller interrupted anywhere (Ctrl-C in ``first``, before its go, or while
    it waits) leaves nothing that stalls or misleads the next one: the helper claims only a
    ticket it saw posted, and a failure, keyed by its ticket, is not handed on."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.busy = threading.Lock()  # held by the caller whose job the helper runs
        self.flags = np.zeros(40, np.int64)
        self.wake = threading.Condition(threading.Lock())
        self.spins = poll_count()
        self.ticket = 0
        self.job: tuple[int, Callable[[], None]] | None = None
        self.failure: tuple[int, BaseException] | None = None
        self.timeouts = 0  # timed waits that ended unmet: a lost wake-up shows here
        self.helper_ran = 0  # second halves run by the helper; the rest the callers took back
        threading.Thread(target=self._loop, name="nd4py-worker", daemon=True).start()

    def _sleep_until(self, slot: int, value: int, asleep: int, equal: bool = True) -> None:
        """Sleep until ``(flags[slot] == value) == equal``; ``flags[asleep]`` (fenced) tells
        the other side to notify. The 50 ms timeout is a safety net, counted in
        ``timeouts`` (the tests require none)."""
        spin.publish(self.flags, asleep, 1)
        try:
            with self.wake:
                while (self.flags[slot] == value) != equal:
                    if not self.wake.wait(0.05) and (self.flags[slot] == value) != equal:
                        self.timeouts += 1
        finally:
            self.flags[asleep] = 0

    def _notify(self) -> None:
        with self.wake:
            self.wake.notify_all()

    # -- the helper's side
    def _loop(self) -> None:
        forksafe.nested_thread()  # its jobs are halves of kernels their callers count in flight
        flags, seen = self.flags, 0  # seen: the last go looked at
        while True:
            # poll for a go and claim it without the GIL: a half the caller took back never
            # makes this thread take the GIL (on a busy machine most are taken back, and a
            # helper descheduled while holding the GIL would stall the caller)
            got = spin.await_claim(flags, _GO, seen, _CLAIM, self.spins, IDLE_YIELD_EVERY)
            if got <= 0:  # the poll ran out: sleep until a new go, then look once
                self._sleep_until(_GO, -got, _HELPER_ASLEEP, equal=False)
                got = spin.await_claim(flags, _GO, -got, _CLAIM, 0, 0)  # (one signature)
                if got <= 0:
                    seen = -got
                    continue
            seen = got
            # a won claim means the caller of ``got`` has not passed its own claim, so the job
            # stored before that go is still this one
            ticket, job = self.job  # type: ignore[misc]
            self.helper_ran += 1
            try:
                job()
            except BaseException as exc:  # handed to the caller of this ticket
                self.failure = (ticket, exc)
            # "done" goes out after the GIL is let go; 2: the caller sleeps, wake it
            if spin.publish_then_spin(flags, _DONE, ticket, _GO, seen, _CALLER_ASLEEP, 0) == 2:
                self._notify()

    # -- the caller's side
    def run(self, first: Callable, second: Callable[[], None], gated: bool) -> None:
        ticket = self.ticket = self.ticket + 1  # taken first: a ticket is never reused
        self.job = (ticket, second)
        # a sleeping helper is woken now (its wake-up takes longer than the GIL's)
        later = gated and not self.flags[_HELPER_ASLEEP]
        try:
            if not later:  # the helper may start now (and wait for the GIL while ``first``
                self._go(ticket)  # runs Python)
            if gated:
                first((self.flags, _GO, ticket) if later else NO_GO)
            else:
                first()
        except BaseException:
            self._join(ticket, second, later, failed=True)
            raise
        self._join(ticket, second, later, failed=False)
        failure, self.failure = self.failure, None
        if failure is not None and failure[0] == ticket:
            raise failure[1]

    def _go(self, ticket: int) -> None:
        spin.publish(self.flags, _GO, ticket)
        if self.flags[_HELPER_ASLEEP]:
            self._notify()

    def _join(self, ticket: int, second: Callable[[], None], later: bool,
              failed: bool) -> None:
        """``first`` is done: take the second half back if the helper has not claimed it
        (at once -- see the module docstring), else wait for the helper to finish it. After
        a failed ``first`` the half still runs (as the helper would have run it) but its own
        failure is dropped: ``first``'s propagates."""
        flags = self.flags
        if spin.claim(flags, _CLAIM, ticket):
            # an announced go cannot notify: a helper that fell asleep just before it would
            # find it only on its 50 ms net (harmless, but counted as a lost wake-up)
            if later and spin.load(flags, _HELPER_ASLEEP):
                self._notify()
            if not failed:
                second()
                return
            try:
                second()
            except BaseException:  # noqa: BLE001 -- ``first``'s failure is the one raised
                pass
            return
        if not spin.spin_until(flags, _DONE, ticket, self.spins):
            self._sleep_until(_DONE, ticket, _CALLER_ASLEEP)


_helper: _Helper | None = None
_start = threading.Lock()


def poll_count() -> int:
    """How many polls of a flag take ``SPIN_US`` microseconds (``spin.ns_per_spin``)."""
    return int(SPIN_US * 1000 / spin.ns_per_spin()) if SPIN_US > 0 else 0


def compile_hand_off() -> None:
    """Compile (or load) every Numba function of the hand-off, with the argument types its
    calls pass, on a flag array of its own. One split of two empty jobs compiled only what
    its race took: when the caller took the second half back, the helper's "done" path
    (``publish_then_spin``) compiled later, in the middle of the first training step
    (0.25 s on a cold cache)."""
    flags = np.zeros(_CLAIM + 1, np.int64)
    spin.publish(flags, _GO, 1)  # the go; a side going to sleep (``_sleep_until``)
    spin.load(flags, _HELPER_ASLEEP)
    spin.claim(flags, _CLAIM, 1)
    spin.spin_until(flags, _DONE, 1, 0)  # the caller's wait (and ``spin.ns_per_spin``)
    spin.await_claim(flags, _GO, 1, _CLAIM, 0, 0)  # the helper's poll: nothing new to claim
    spin.publish_then_spin(flags, _DONE, 1, _GO, 1, _CALLER_ASLEEP, 0)  # the helper's done
    # (not ``spin.announce``: every kernel calls it, so the first kernel compiles it)


def enabled() -> bool:
    """Whether ``both`` may use a second thread (``ND4PY_WORKERS=1`` or one CPU: no)."""
    return _ENABLED


def _get() -> _Helper:
    global _helper
    with _start:
        if _helper is None or _helper.pid != os.getpid():
            _helper = _Helper()
        return _helper


def _after_fork_in_child() -> None:
    """A forked child has no helper thread, and ``_start`` may have been held by a thread
    that does not exist there: start over."""
    global _helper, _start
    _helper, _start = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def both(first: Callable, second: Callable[[], None], *, gated: bool = False) -> None:
    """Run ``first()`` here and ``second()`` on the helper thread -- or here, after
    ``first``, if the helper has not claimed it by then (work stealing: see the module
    docstring); return when both are done. Each runs exactly once. An exception from either
    is raised here (``first``'s if both fail), after both finished.
    Serial (``first`` then ``second``) when the helper is disabled or busy; there a failing
    ``first`` raises before ``second`` runs.

    ``gated``: ``first`` is called as ``first(go)`` and should hand ``go`` to the nogil
    kernel that does its work, which calls ``spin.announce(go)`` once it runs without the
    GIL; the helper starts ``second`` then (or when ``first`` returns, at the latest). When
    run serially, ``first`` gets ``NO_GO``."""
    helper = _get() if _ENABLED else None
    if helper is None or not helper.busy.acquire(blocking=False):
        first(NO_GO) if gated else first()
        second()
        return
    try:
        helper.run(first, second, gated)
    finally:
        helper.busy.release()


def halves(n: int, work: int, least: int) -> list[range]:
    """``range(n)`` (images, units, rows...) in two halves for ``on_halves`` when there are
    two items and ``work`` of at least ``least`` (below it the hand-off costs more than it
    saves); else whole.

    The split depends on the sizes alone -- not on whether there is a helper
    (``ND4PY_WORKERS=1``, one CPU) nor on whether it is free: without it ``both`` runs the
    two halves in turn. So every result is computed by the same arithmetic in the same order
    whichever thread takes which half, and training is bit-reproducible with or without the
    helper: halves do not always compute what the whole would (a weight adjoint sums its
    halves' partial sums; OpenBLAS takes its small-matrix kernels, summing in another order,
    for a half that the whole would not).

    >>> halves(5, 100, 10)
    [range(0, 3), range(3, 5)]
    >>> halves(5, 100, 1000)
    [range(0, 5)]
    """
    if n < 2 or work < least:
        return [range(n)]
    h = (n + 1) // 2
    return [range(0, h), range(h, n)]


def on_halves(parts: list, work: Callable) -> list:
    """``[work(part, go) for part in parts]`` for one or two parts, the two at once
    (``both``, gated: ``work`` hands ``go`` to its nogil kernel, which announces it; a single
    part gets ``NO_GO``).

    >>> on_halves([range(0, 2), range(2, 4)], lambda part, go: sum(part))
    [1, 5]
    """
    if len(parts) == 1:
        return [work(parts[0], NO_GO)]
    got: list = [None, None]

    def job(k: int, go: tuple) -> None:
        got[k] = work(parts[k], go)
    both(lambda go: job(0, go), lambda: job(1, NO_GO), gated=True)
    return got


def split_leading(kernel: Callable[..., None], n: int, *args: object) -> None:
    """``kernel(*args, go)`` as two calls at once, each on one half of the leading axis of
    every argument that spans it: an ndarray whose leading extent is ``n`` (the kernel's outer
    loop) is sliced ``[:h]`` / ``[h:]``; anything else (scalars, sizes, a broadcast operand,
    whose leading extent is 1) goes to both halves whole. ``n`` below 2 (0: "do not split")
    runs ``kernel(*args, NO_GO)`` whole, here. ``go`` is ``both``'s gate token: the kernel
    should be ``nogil`` and call ``spin.announce(go)`` first.

    For kernels whose outer-loop iterations are independent and write disjoint outputs
    (elementwise, one row per iteration): the halves compute exactly what the whole would.
    ``kernel`` should be ``nogil``. Halves of a C-contiguous array are C-contiguous, so a
    Numba kernel runs the same compiled specialization on the halves as on the whole.

    >>> out = np.zeros(5)
    >>> def add(a, b, o, go):
    ...     o[:] = a + b
    >>> split_leading(add, 5, np.arange(5.0), 10.0, out)
    >>> out
    array([10., 11., 12., 13., 14.])
    >>> split_leading(add, 0, np.arange(5.0), 1.0, out)  # whole
    >>> out
    array([1., 2., 3., 4., 5.])
    """
    if n < 2:
        kernel(*args, NO_GO)
        return
    h = (n + 1) // 2
    first = [a[:h] if type(a) is np.ndarray and a.ndim and a.shape[0] == n else a
             for a in args]
    second = [a[h:] if type(a) is np.ndarray and a.ndim and a.shape[0] == n else a
              for a in args]
    both(lambda go: kernel(*first, go), lambda: kernel(*second, NO_GO), gated=True)
