"""``on_halves`` for kernels whose callers must not wait for a compile: the helper thread's
hand-off (``workers``/``spin``: Numba functions) compiles on the first split, seconds on a cold
cache. Until it is compiled (``kernels.compiling``: background and interpret modes) the two
halves run one after the other on the calling thread -- the same arithmetic, so the same bits
as split (``workers.halves``) -- while the hand-off compiles on the compile thread.

>>> on_halves([range(0, 2), range(2, 4)], lambda part, go: sum(part))
[1, 5]
"""
from __future__ import annotations

from typing import Callable

from . import compiling, workers

__all__ = ["on_halves"]

_KEY = ("workers.both",)


def _warm(key: tuple) -> None:
    """Compile (or load) the hand-off's Numba functions (``workers.compile_hand_off``)."""
    workers.compile_hand_off()


def on_halves(parts: list, work: Callable) -> list:
    """``workers.on_halves(parts, work)``, or its halves in turn here while the hand-off
    compiles."""
    if len(parts) == 1 or compiling.ready(_KEY, _warm):
        return workers.on_halves(parts, work)
    return [work(part, workers.NO_GO) for part in parts]
