"""The emitter that op scalar expressions are rendered with, for fused code generation.

Scalar expressions are declared with the ops (``OpDef.scalar``, in ``samediff/ops``): the table
declares, the compiler reads. An expression is ``scalar(e, *inputs) -> str``, Python source for
one element given the source of each input element; ``e`` (an ``Emitter``) supplies *typed*
constants (``e.c(0.5)`` is ``f32(0.5)`` in a float32 kernel, so nothing is silently promoted to
float64), attributes (``e.a("alpha")``) and the math function for the kernel's dtype
(``e.f("tanh")``: the vectorizable float32 version of ``fastmath``, or libm for float64; both
are in ``mathlib``, which every kernel module star-imports).

Ops without an expression are simply not fused (they run as library calls); each says why
(``OpDef.unfused``), and ``ops/validate.py`` checks that every elementwise op has one or the
other.
"""
from __future__ import annotations

from typing import Any

import numpy as np


class Emitter:
    """Per-node code-generation context: compute dtype and attribute values."""

    def __init__(self, dtype: np.dtype, attrs: Any) -> None:
        self.dtype = np.dtype(dtype)
        self.attrs = attrs

    @property
    def prefix(self) -> str:
        return {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}[self.dtype]

    def c(self, value: float) -> str:
        """A constant of the compute dtype."""
        return f"{self.prefix}({float(value)!r})"

    def a(self, name: str) -> str:
        return self.c(getattr(self.attrs, name))

    def f(self, name: str) -> str:
        """Name of the elementwise math function ``name`` for this dtype."""
        return f"{name}_{self.prefix}"
