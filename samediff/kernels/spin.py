"""Native spin-waiting for the worker hand-off (``samediff.kernels.workers``): a thread polls
a flag in a shared int64 array without the GIL, with the CPU's spin-loop hint between reads and, every ``YIELD_EVERY`` reads, an offer of
the core to any other thread that wants it (a spinning helper otherwise held OpenMP's second
thread off its core: a parallel kernel right after a split convolution ran 7.0 -> 8.9 ms).

Why not a lock or a queue: waking a thread that sleeps in the kernel costs 40-60 us on a
virtual machine (the idle vCPU halts and the host has to wake it), which is as long as the
kernels being split; a thread that polls sees the flag within a few hundred nanoseconds.

``claim(flags, i, ticket)`` is the work-stealing claim: an atomic ``max`` on a claim word,
won by exactly one of the threads claiming a ticket.

``spin_until(flags, i, value, spins)`` returns True as soon as ``flags[i] == value``, False
after ``spins`` polls. The reads are atomic seq_cst loads (so the compiler cannot hoist them
out of the loop, and a load after a store is ordered after it); ``ns_per_spin()`` says how long one poll takes on this CPU.

>>> import numpy as np
>>> flags = np.zeros(1, np.int64)
>>> spin_until(flags, 0, 0, 10), spin_until(flags, 0, 1, 10)
(True, False)
"""
from __future__ import annotations

import functools
import platform
import sys
import time

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .jit_options import PYTHON_CALLERS

__all__ = ["spin_until", "publish", "announce", "publish_then_spin", "claim", "await_claim",
           "load", "ns_per_spin", "relax"]

_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


def _flags_type(array, index) -> bool:
    """The intrinsics take C-contiguous 1-D int64 arrays and an integer index only."""
    return (isinstance(array, types.Array) and array.dtype == types.int64 and array.ndim == 1
            and array.layout == "C" and isinstance(index, types.Integer))


@intrinsic
def _load_seq_cst(typingctx, array, index):  # type: ignore[no-untyped-def]
    """``array[index]`` as a sequentially consistent atomic load: the flag protocol is a
    Dekker pattern (store mine, then load yours), which only seq_cst loads order after seq_cst
    stores on every CPU (an acquire load may pass the store on ARM; x86 costs the same)."""
    if not _flags_type(array, index):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.load_atomic(builder.gep(data, [args[1]]), "seq_cst", 8)
    return types.int64(array, index), codegen


@intrinsic
def _spin_hint(typingctx):  # type: ignore[no-untyped-def]
    """x86's ``pause`` (lets the sibling hyper-thread run, saves power); nothing elsewhere."""
    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        if _X86:
            fn = builder.module.declare_intrinsic("llvm.x86.sse2.pause",
                                                  fnty=ir.FunctionType(ir.VoidType(), []))
            builder.call(fn, [])
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def _store_seq_cst(typingctx, array, index, value):  # type: ignore[no-untyped-def]
    """``array[index] = value`` as a sequentially consistent atomic store (a full fence: the
    loads after it cannot be served before it is visible)."""
    if not (_flags_type(array, index) and isinstance(value, types.Integer)):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        builder.store_atomic(args[2], builder.gep(data, [args[1]]), "seq_cst", 8)
        return context.get_dummy_value()
    return types.void(array, index, value), codegen


@intrinsic
def _max_seq_cst(typingctx, array, index, value):  # type: ignore[no-untyped-def]
    """``old = array[index]; array[index] = max(old, value); return old`` as one sequentially
    consistent atomic read-modify-write (LLVM's ``atomicrmw max``: ``lock cmpxchg`` in a loop
    on x86, ``ldaxr``/``stlxr`` or ``ldsmaxal`` on ARM) -- numba has no CAS of its own."""
    if not (_flags_type(array, index) and isinstance(value, types.Integer)):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.atomic_rmw("max", builder.gep(data, [args[1]]), args[2], "seq_cst")
    return types.int64(array, index, types.int64), codegen


if sys.platform == "win32":
    @numba.njit(nogil=True, inline="always")
    def _yield_cpu() -> None:
        pass
else:
    _sched_yield = types.ExternalFunction("sched_yield", types.int32())

    @numba.njit(nogil=True, inline="always")
    def _yield_cpu() -> None:
        _sched_yield()


@numba.njit(nogil=True, inline="always")
def relax(polls: int, yield_every: int) -> None:
    """Between two polls of a Numba loop of one's own (``kernels/recurrent.py``): the
    spin-loop hint, and on every
    ``yield_every``-th poll an offer of the core to a thread that wants it (as ``spin_until``)."""
    if yield_every and polls % yield_every == yield_every - 1:
        _yield_cpu()
    else:
        _spin_hint()


@numba.njit(nogil=True, cache=True, **PYTHON_CALLERS)
def spin_until(flags: np.ndarray, index: int, value: int, spins: int, yield_every: int = 0,
               equal: bool = True) -> bool:
    """Poll ``spins`` times for ``flags[index] == value`` (for ``!=`` when not ``equal``);
    every ``yield_every`` polls (0: never) offer the core to a thread that wants it
    (``sched_yield``, ~0.5 us). True as soon as it holds, else False."""
    for k in range(spins):
        if (_load_seq_cst(flags, index) == value) == equal:
            return True
        if yield_every and k % yield_every == yield_every - 1:
            _yield_cpu()  # a thread waiting for this core (OpenMP's, BLAS's) runs now
        else:
            _spin_hint()
    return (_load_seq_cst(flags, index) == value) == equal


@numba.njit(nogil=True, cache=True, **PYTHON_CALLERS)
def publish(flags: np.ndarray, index: int, value: int) -> None:
    """``flags[index] = value`` with a full fence (see ``publish_then_spin``)."""
    _store_seq_cst(flags, index, value)


@numba.njit(nogil=True, cache=True, **PYTHON_CALLERS)
def announce(go: tuple) -> None:
    """Called first thing by a nogil kernel that got a ``go`` token (``workers.both(...,
    gated=True)``): the caller has let go of the GIL, so the helper may take it now. (A
    kernel run as Python -- no private BLAS -- announces with the GIL held: correct, the
    helper then waits for the GIL as it would ungated.)"""
    _store_seq_cst(go[0], go[1], go[2])


@numba.njit(nogil=True, cache=True, **PYTHON_CALLERS)
def publish_then_spin(flags: np.ndarray, index: int, value: int, wait_index: int,
                      wait_value: int, stop_index: int, spins: int) -> int:
    """Store ``flags[index] = value`` with the GIL already released (so the thread polling
    for it does not wake up into a GIL that this thread still holds), then poll as
    ``spin_until(flags, wait_index, wait_value, spins)``: 1 when it held, 0 after ``spins``
    polls, 2 at once when ``flags[stop_index]`` is nonzero (the other side has gone to sleep
    and needs a notification from Python). (``spin_until`` with its defaults, as Python
    calls it: the same compiled function, where passing them on compiled a second one.)"""
    _store_seq_cst(flags, index, value)
    if _load_seq_cst(flags, stop_index) != 0:
        return 2
    return 1 if spin_until(flags, wait_index, wait_value, spins) else 0


@numba.njit(nogil=True, cache=True, **PYTHON_CALLERS)
def claim(flags: np.ndarray, index: int, ticket: int) -> bool:
    """Claim ``ticket`` in the claim word ``flags[index]``: raise it to ``ticket`` atomically,
    True if it was below (this thread claimed it), False if it was already there (another
    thread did). Tickets only grow and the word only rises, so of any number of threads
    claiming one ticket exactly one wins, and a late claim of an older ticket never takes
    the word back down (``workers``: whoever gets to a half first runs it).

    >>> flags = np.zeros(1, np.int64)
    >>> claim(flags, 0, 1), claim(flags, 0, 1), claim(flags, 0, 0), int(flags[0])
    (True, False, False, 1)
    """
    return _max_seq_cst(flags, index, ticket) < ticket


@numba.njit(nogil=True, cache=True, **PYTHON_CALLERS)
def await_claim(flags: np.ndarray, index: int, seen: int, claim_index: int, spins: int,
                yield_every: int = 0) -> int:
    """Poll ``flags[index]`` for a ticket other than ``seen`` and claim each one that shows
    (``claim(flags, claim_index, ticket)``), all without the GIL: the ticket when a claim is
    won; ``-latest`` (the last ticket looked at, negated: <= 0) after ``spins`` more polls
    (one look when 0). A ticket the other side claimed first is passed over here, so a
    thread that lost never takes the GIL for it."""
    for k in range(spins + 1):
        ticket = _load_seq_cst(flags, index)
        if ticket != seen:
            if _max_seq_cst(flags, claim_index, ticket) < ticket:
                return ticket
            seen = ticket
        if k == spins:
            break
        if yield_every and k % yield_every == yield_every - 1:
            _yield_cpu()
        else:
            _spin_hint()
    return -seen


@numba.njit(nogil=True, cache=True, **PYTHON_CALLERS)
def load(flags: np.ndarray, index: int) -> int:
    """``flags[index]`` as a sequentially consistent load: ordered after this thread's
    earlier fenced stores and claims on every CPU (a plain numpy read is, on x86 only)."""
    return _load_seq_cst(flags, index)


@functools.lru_cache(maxsize=None)
def ns_per_spin() -> float:
    """Nanoseconds per poll of ``spin_until`` (measured once: ``pause`` takes 3-40 ns
    depending on the CPU)."""
    flags = np.zeros(1, np.int64)
    spin_until(flags, 0, 1, 10)  # compiled or loaded from cache before timing
    n = 20_000
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        spin_until(flags, 0, 1, n)
        best = min(best, (time.perf_counter() - t0) * 1e9 / n)
    return max(best, 0.5)
