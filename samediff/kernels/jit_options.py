"""Numba options for who calls a compiled function: which of Numba's wrappers to build.

Numba builds two wrappers around every function it compiles: a CPython one (unboxes the
arguments from Python objects; ~400 lines of LLVM IR for a kernel of eight arrays, as many as
the kernel's own loop) and a C-callable one (for first-class function objects). Nothing here
takes a kernel as a C function pointer, and the helpers that kernels call (the element
functions, row statistics, BLAS layouts) are never called from Python. Building only what
is called took 5-12 % off each cold compile.

A function built without its CPython wrapper has no Python entry point: Numba would jump to
the missing wrapper (a crash), so ``compiled_only`` makes a call from Python a named error.

>>> import numba
>>> @compiled_only()
... def twice(x):
...     return 2 * x
>>> @numba.njit(**PYTHON_CALLERS)
... def call(x):
...     return twice(x) + 1
>>> call(3)
7
>>> twice(3)
Traceback (most recent call last):
...
TypeError: twice is called from compiled code only (built without a Python entry point, which made its cold compile faster): call it inside a @numba.njit function
"""
from __future__ import annotations

from typing import Any, Callable

import numba
from numba.core.registry import CPUDispatcher

__all__ = ["ONLY_COMPILED_CALLERS", "PYTHON_CALLERS", "compiled_only"]

#: a function only compiled code calls: neither wrapper (for ``@overload`` implementations,
#: which Python cannot reach; ``compiled_only`` for plain functions)
ONLY_COMPILED_CALLERS = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}
#: a function Python calls (a kernel, an entry point): its CPython wrapper only
PYTHON_CALLERS = {"no_cfunc_wrapper": True}


class _CompiledOnly(CPUDispatcher):
    """A dispatcher whose function has no CPython wrapper: compiled callers link it as any
    other; a call from Python raises instead of jumping to the wrapper that is not there."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{self.py_func.__qualname__} is called from compiled code only "
                        "(built without a Python entry point, which made its cold compile "
                        "faster): call it inside a @numba.njit function")


def compiled_only(**options: Any) -> Callable[[Callable], Any]:
    """``numba.njit(**options)`` for a function that only compiled code calls: built without
    either wrapper (``ONLY_COMPILED_CALLERS``); called from Python, it raises ``TypeError``."""
    def build(py_func: Callable) -> Any:
        dispatcher = numba.njit(**options, **ONLY_COMPILED_CALLERS)(py_func)
        dispatcher.__class__ = _CompiledOnly  # (the same object layout: a Python subclass)
        return dispatcher
    return build
