"""The global random stream shared by eager calls, graphs and compiled plans.

Random ops draw from one ``numpy.random.Generator`` (PCG64). ``set_seed`` resets it, so a
program that seeds once is reproducible end to end, and a replayed plan draws fresh numbers
on every call (like ND4J's global RNG, unlike a baked-in constant). Each thread gets its own
generator, derived from the seed and the order in which threads first draw, so threads never
race on generator state.

>>> from samediff import random_state
>>> random_state.set_seed(42); a = random_state.generator().random()
>>> random_state.set_seed(42); a == random_state.generator().random()
True

``stream(*entropy)`` gives the current thread, for the length of a ``with`` block, its own
generator derived from those ints (a ``SeedSequence``), whatever the global stream's state:
work that must draw the same numbers wherever and however often it runs (a Dask task that a
lost worker's replacement recomputes) runs under a stream named by what it is (run seed,
round, partition), not by what the process happened to run before it.

>>> with random_state.stream(7, 0, 1):
...     b = random_state.generator().random()
>>> with random_state.stream(7, 0, 1):
...     b == random_state.generator().random()
True
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import numpy as np

_lock = threading.Lock()
_seed: int | None = None
_epoch = 0            # bumped by set_seed so every thread re-derives its generator
_threads_seen = 0
_local = threading.local()


def set_seed(seed: int) -> None:
    """Reseed the global stream (all threads)."""
    global _seed, _epoch, _threads_seen
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"set_seed: seed must be a non-negative int, got {seed!r}")
    with _lock:
        _seed, _epoch, _threads_seen = int(seed), _epoch + 1, 0


def get_seed() -> int | None:
    return _seed


def generator() -> np.random.Generator:
    """This thread's generator: its ``stream`` if one is open, else the global stream's for
    the current seed."""
    gen = getattr(_local, "scoped", None)
    if gen is not None:
        return gen
    gen = getattr(_local, "gen", None)
    if gen is not None and _local.epoch == _epoch:
        return gen
    global _threads_seen
    with _lock:
        index, _threads_seen = _threads_seen, _threads_seen + 1
        seq = np.random.SeedSequence(_seed) if _seed is not None else np.random.SeedSequence()
        child = seq.spawn(index + 1)[index] if index else seq
        _local.gen, _local.epoch = np.random.Generator(np.random.PCG64(child)), _epoch
    return _local.gen


@contextlib.contextmanager
def stream(*entropy: int) -> Iterator[np.random.Generator]:
    """Within the block, this thread draws from a generator of its own, seeded by
    ``SeedSequence(entropy)`` (non-negative ints, e.g. ``(seed, round, partition)``), and
    yields it; on exit — also on an error — the thread's previous generator (the global
    stream's, or an enclosing ``stream``'s) is back, at the state it was left in. The global
    stream and other threads are untouched, and ``set_seed`` inside the block does not
    replace it.

    >>> set_seed(1); before = generator().bit_generator.state
    >>> try:
    ...     with stream(5, 0) as gen:
    ...         with stream(6):
    ...             pass
    ...         assert generator() is gen  # the enclosing stream is back
    ...         raise KeyError("a failing task")
    ... except KeyError:
    ...     pass
    >>> generator().bit_generator.state == before
    True
    """
    if not entropy or any(isinstance(e, bool) or not isinstance(e, (int, np.integer)) or e < 0
                          for e in entropy):
        raise ValueError(f"stream: entropy must be one or more non-negative ints, got "
                         f"{entropy!r}")
    previous = getattr(_local, "scoped", None)
    gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(e) for e in entropy])))
    _local.scoped = gen
    try:
        yield gen
    finally:
        _local.scoped = previous
