"""DLPack both ways, zero-copy: ``nd.from_dlpack(obj)`` and ``NDArray.__dlpack__``.

The protocol is numpy's own (numpy >= 2 implements DLPack 1.0, read-only flag included), so
there is no C struct here: ``NDArray.__dlpack__`` hands the call to its numpy buffer, and
``from_dlpack`` imports with ``np.from_dlpack`` and wraps the result. Both share memory with
the other side: a write through one is visible through the other (unless the producer
exported a read-only buffer, e.g. a JAX array: numpy then marks the import read-only).

>>> import numpy as np
>>> from samediff.dlpack import from_dlpack
>>> a = np.arange(3.0)
>>> x = from_dlpack(a)
>>> np.shares_memory(x.numpy(), a), np.shares_memory(np.from_dlpack(x), a)
(True, True)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .array import NDArray
from .dtypes import is_supported, unsupported

__all__ = ["from_dlpack"]


def from_dlpack(obj: Any, *, device: Any = None, copy: bool | None = None) -> NDArray:
    """An ``NDArray`` sharing memory with ``obj`` (a numpy/PyTorch/JAX/CuPy... array that
    implements ``__dlpack__``), like ``np.from_dlpack``. ``copy=True`` copies, ``copy=False``
    refuses to; ``device`` may only be ``"cpu"``. Arrays of a dtype nd4py does not support
    (complex, bfloat16...) raise ``NdDTypeError`` naming it; an object without
    ``__dlpack__`` (a list, a scalar) raises ``TypeError`` naming what is accepted."""
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"from_dlpack: a {type(obj).__name__} does not implement the DLPack "
                        f"protocol (__dlpack__); it takes an array that does (NDArray, numpy, "
                        f"PyTorch, JAX, CuPy...). For lists and scalars use nd.create(...) or "
                        f"nd.array_api.asarray(...)")
    try:
        data = np.from_dlpack(obj, device=device, copy=copy)
    except (BufferError, TypeError, ValueError, RuntimeError) as exc:  # RuntimeError: JAX's
        dtype = getattr(obj, "dtype", None)
        if dtype is not None and "dtype" in str(exc).lower():
            raise unsupported(dtype, "from_dlpack: ") from exc
        raise
    if not is_supported(data.dtype):
        raise unsupported(data.dtype, "from_dlpack: ")
    return NDArray(data)

