"""Numba options for who calls a compiled function: which of Numba's wrappers to build.

Numba builds two wrappers around every function it compiles: a CPython one (unboxes the
arguments from Python objects; ~400 lines of LLVM IR for a kernel of eight arrays, as many as
the kernel's own loop) and a C-callable one (for first-class function objects). Nothing here
takes a kernel as a C function pointer, and the helpers that kernels call (the element
functions, row statistics, BLAS layouts) are never called from Python. Building only what
is called took 5-12 % off each cold compile.

>>> import numba
>>> @numba.njit(**ONLY_COMPILED_CALLERS)
... def twice(x):
...     return 2 * x
>>> @numba.njit(**PYTHON_CALLERS)
... def call(x):
...     return twice(x) + 1
>>> call(3)
7
"""
from __future__ import annotations

__all__ = ["ONLY_COMPILED_CALLERS", "PYTHON_CALLERS"]

#: a function only compiled code calls: neither wrapper (calling it from Python raises)
ONLY_COMPILED_CALLERS = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}
#: a function Python calls (a kernel, an entry point): its CPython wrapper only
PYTHON_CALLERS = {"no_cfunc_wrapper": True}
