"""One compiled variant of a kernel-layer Numba function per dtype, for arrays of any layout.

Numba specializes a function on each argument's array layout (C-, F-contiguous or any, ``A``)
and mutability, and each specialization is a compile of its own: 0.8-1.2 s for the private
BLAS's matmul halves on a cold cache, and the first training step of a transformer block
compiled them three times (C @ C, C @ F, A @ C). Where the function only hands pointers and
strides to BLAS -- its body has no loop that would vectorize better on a known layout -- one
variant typed with layout ``A`` serves every layout: Numba converts a C or F array to ``A``
at the call (a safe conversion), so no call compiles again.

``PerDtype(py_func, signature)`` holds one dispatcher per dtype, built on first use from
``signature(numba_dtype)`` (the argument types, arrays as ``A``; inputs read-only so that
writable and read-only arrays both convert): a dispatcher given its signature compiles it (or
loads it from Numba's disk cache) at once and then refuses to compile anything else, so a
call with other types is a ``TypeError`` naming the types, never a silent recompile.

>>> import numpy as np
>>> def first(a):
...     return a[0, 0]
>>> f = PerDtype(first, lambda dt: (array(dt, 2, readonly=True),), cache=False)
>>> f[np.dtype(np.float32)](np.eye(2, dtype=np.float32).T)  # an F-contiguous view
1.0
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable

import numba
import numpy as np
from numba import types

from . import fastload, workers
from .jit_options import PYTHON_CALLERS

#: Numba's type of ``workers``' ``go`` token (the last parameter of a kernel split in halves)
GO = numba.typeof(workers.NO_GO)


def array(dtype: Any, ndim: int, readonly: bool = False) -> types.Array:
    """Numba's type of a ``dtype`` array of rank ``ndim`` in any layout."""
    return types.Array(dtype, ndim, "A", readonly=readonly)


class PerDtype:
    """``py_func`` compiled once per dtype, with the argument types ``signature(dtype)``."""

    def __init__(self, py_func: Callable, signature: Callable[[Any], tuple], **options: Any):
        self._py_func, self._signature = py_func, signature
        self._options = {"nogil": True, "cache": True, **PYTHON_CALLERS, **options}
        self._by_dtype: dict = {}
        self._lock = threading.Lock()
        self.__doc__ = py_func.__doc__
        # a fork while another thread builds would leave the child's lock held for good
        os.register_at_fork(after_in_child=self._new_lock)

    def _new_lock(self) -> None:
        self._lock = threading.Lock()

    def __getitem__(self, dtype: np.dtype) -> Any:
        """The dispatcher for ``dtype`` (compiled, or loaded from the disk cache, once)."""
        dispatcher = self._by_dtype.get(dtype)
        if dispatcher is None:
            with self._lock:  # one build per dtype, also when threads ask at once
                dispatcher = self._by_dtype.get(dtype)
                if dispatcher is None:
                    signature = self._signature(numba.from_dtype(dtype))
                    # numba.njit([signature]) would load a cached variant through Numba's
                    # full set-up (~0.2-0.4 s in a new process): adopt the fast load first
                    dispatcher = numba.njit(**self._options)(self._py_func)
                    fastload.adopt(dispatcher)
                    dispatcher.compile(signature)
                    dispatcher.disable_compile()
                    self._by_dtype[dtype] = dispatcher
        return dispatcher
