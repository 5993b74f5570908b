"""Which Python call arguments are arrays and which are static values.

The recorder (a literal or an array argument?) and the front ends' argument rules
(``samediff/frontends``: may this value fill an optional input?) share this one test.
"""
from __future__ import annotations

from typing import Any

import numpy as np

#: Python scalars: weak operands (``float32_array * 2.0`` stays float32, ``* 1j`` complex64)
WEAK_SCALARS = (bool, int, float, complex)
_SCALAR_TYPES = (*WEAK_SCALARS, np.generic, str, type(None), np.dtype, type)


def is_array_like(value: Any) -> bool:
    """Arrays, variables and lists are inputs; Python scalars, strings and dtypes are not."""
    return not isinstance(value, _SCALAR_TYPES) and not isinstance(value, tuple)
