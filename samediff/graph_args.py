"""The argument rules of SameDiff's variable constructors, ND4J's loose forms included:
``sd.placeholder("x", FLOAT, -1, 784)`` (dims as varargs or one sequence, -1 unknown) and
``sd.var("w", "xavier", FLOAT, 784, 10)`` / ``sd.var("w", array)`` (an init scheme, a dtype,
dims and a value in any order, each given once).

>>> import numpy as np
>>> parse_var_args(("xavier", "float", 3, 2), None, None, None)[1:]
('xavier', dtype('float32'), (3, 2))
>>> shape_arg(((-1, 784),), allow_unknown=True)
(-1, 784)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .array import NDArray, as_numpy
from .dtypes import to_dtype
from .errors import GraphError, NdDTypeError
from .init import SCHEMES, WeightInit


def shape_arg(shape: Any, allow_unknown: bool = False) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    out = tuple(int(d) for d in shape)
    if any(d < (-1 if allow_unknown else 0) for d in out):
        raise GraphError(f"invalid shape {out}" + ("" if allow_unknown else " (-1 not allowed here)"))
    return out


INIT_NAMES = set(SCHEMES)


def parse_var_args(args: tuple, init: Any, dtype: Any, shape: Any) -> tuple:
    value, dims = None, list(shape) if shape is not None else []
    for a in args:
        if isinstance(a, WeightInit) or (isinstance(a, str) and a in INIT_NAMES):
            if init is not None:
                raise GraphError(f"var: init scheme given twice ({init!r} and {a!r})")
            init = a
        elif isinstance(a, (int, np.integer)) and not isinstance(a, bool):
            dims.append(int(a))
        elif isinstance(a, (tuple, list)) and all(isinstance(d, (int, np.integer)) for d in a):
            dims.extend(int(d) for d in a)
        elif isinstance(a, (NDArray, np.ndarray)):
            value = as_numpy(a).copy()
        elif isinstance(a, (str, np.dtype, type)):
            if dtype is not None:
                raise GraphError(f"var: data type given twice ({dtype!r} and {a!r})")
            try:
                dtype = to_dtype(a)
            except NdDTypeError as exc:
                raise NdDTypeError(f"var: {a!r} is neither an init scheme "
                                   f"{sorted(INIT_NAMES)} nor a data type ({exc})") from None
        else:
            raise GraphError(f"var: cannot interpret argument {a!r}; expected an array, an init "
                             f"scheme {sorted(INIT_NAMES)}, a dtype or shape dims")
    dtype = to_dtype(dtype) if dtype is not None else None
    if value is not None and dims and tuple(dims) != value.shape:
        raise GraphError(f"var: shape {tuple(dims)} contradicts the value's shape {value.shape}")
    if value is None and any(d < 0 for d in dims):
        raise GraphError(f"var: variables need a fully known shape, got {tuple(dims)}")
    return value, init, dtype, tuple(dims)

