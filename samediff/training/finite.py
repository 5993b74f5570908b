"""``all_finite``: whether a step's loss and gradients hold no NaN and no infinity.

The check is a Numba kernel (``samediff/kernels/finite.py``: bit tests, why and how fast);
this caller loads it on the first training step, not when ``samediff`` is imported.

>>> import numpy as np
>>> all_finite(np.float32(1.5), np.array([1.0, np.inf], np.float32))
False
"""
from __future__ import annotations

from typing import Any

from ..kernels import lazy

_kernels = lazy("finite")


def all_finite(*values: Any) -> bool:
    """True when every element of every value is finite (no NaN, no +-inf).

    >>> all_finite(1.0, [2.0, 3.0])
    True
    """
    return _kernels.all_finite(*values)
