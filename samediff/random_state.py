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
"""
from __future__ import annotations

import threading

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
    """This thread's generator for the current seed."""
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
