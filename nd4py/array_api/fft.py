"""The array API ``fft`` extension: the transforms are the ``fft`` group of the op table (they
trace and compile, as library steps), one function per entry of the front end's ``FFT_AXIS``
/ ``FFT_AXES`` tables (``samediff.frontends.array_api``), ``fftshift``/``ifftshift`` are ``roll``, and
``fftfreq``/``rfftfreq`` are constants (arrays made from ``n`` and ``d`` alone).

>>> import nd4py.array_api as xp
>>> xp.fft.fft(xp.asarray([1.0, 0.0, 0.0, 0.0])).tolist()
[(1+0j), (1+0j), (1+0j), (1+0j)]
"""
from __future__ import annotations

from typing import Any

import numpy as np

from samediff.frontends import array_api as _table

from ._core import DEFAULT_FLOAT, as_dtype, ndim, op
from ._creation import _device, asarray
from ._functions import roll

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _one_axis(name: str, op_name: str) -> Any:
    def transform(x: Any, /, *, n: int | None = None, axis: int = -1,
                  norm: str = "backward") -> Any:
        return op(op_name, [x], n=n, axis=axis, norm=norm)
    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = f"The ``{name}`` op along ``axis`` (numpy's ``np.fft.{name}``)."
    return transform


def _n_axes(name: str, op_name: str) -> Any:
    def transform(x: Any, /, *, s: Any = None, axes: Any = None, norm: str = "backward") -> Any:
        return op(op_name, [x], s=None if s is None else tuple(s),
                  axes=None if axes is None else tuple(axes), norm=norm)
    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = f"The ``{name}`` op over ``axes`` (numpy's ``np.fft.{name}``)."
    return transform


_TRANSFORMS = {**{n: _one_axis(n, o) for n, o in _table.FFT_AXIS.items()},
               **{n: _n_axes(n, o) for n, o in _table.FFT_AXES.items()}}
fft, ifft, rfft, irfft, hfft, ihfft = (_TRANSFORMS[n] for n in (
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft"))
fftn, ifftn, rfftn, irfftn = (_TRANSFORMS[n] for n in ("fftn", "ifftn", "rfftn", "irfftn"))


def fftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Any:
    """Sample frequencies of an ``n``-point transform with sample spacing ``d``."""
    _device(device)
    return asarray(np.fft.fftfreq(n, d), dtype=as_dtype(dtype) or DEFAULT_FLOAT)


def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Any:
    """Sample frequencies of ``rfft``'s ``n // 2 + 1`` outputs."""
    _device(device)
    return asarray(np.fft.rfftfreq(n, d), dtype=as_dtype(dtype) or DEFAULT_FLOAT)


def _shift(x: Any, axes: Any, sign: int) -> Any:
    axes = tuple(range(ndim(x))) if axes is None else (
        (axes,) if isinstance(axes, int) else tuple(axes))
    if not axes:
        return op("cast", [x], dtype=x.dtype)
    return roll(x, tuple(sign * (x.shape[a] // 2) for a in axes), axis=axes)


def fftshift(x: Any, /, *, axes: Any = None) -> Any:
    """The zero frequency moved to the middle: ``roll`` by ``n // 2`` along ``axes``."""
    return _shift(x, axes, 1)


def ifftshift(x: Any, /, *, axes: Any = None) -> Any:
    """``fftshift``'s inverse: ``roll`` by ``-(n // 2)``."""
    return _shift(x, axes, -1)
