"""Discrete Fourier transforms (numpy's ``pocketfft`` through ``np.fft``): ``fft``/``ifft``
and ``fftn``/``ifftn`` (complex), ``rfft``/``irfft``/``rfftn``/``irfftn`` (real <-> half
spectrum) and ``hfft``/``ihfft`` (Hermitian), each with ``norm`` "backward" | "ortho" |
"forward".

Results keep the input's precision: float32 and complex64 give complex64 (real transforms
float32), everything else complex128 (float64). The transforms are library steps of a plan;
they have no gradient rule (the spectra are complex, and gradients are real-valued).

>>> import numpy as np, nd4py as nd
>>> nd.fft.rfft(nd.create(np.array([1.0, 0.0, -1.0, 0.0]))).numpy().tolist()
[0j, (2+0j), 0j]
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .families import Attr, normalize_axis
from .registry import NONDIFF, TensorType, define

Shape = tuple[int, ...]
_NORMS = ("backward", "ortho", "forward")


def _complex_of(dt: np.dtype) -> np.dtype:
    single = dt in (np.dtype(np.float32), np.dtype(np.complex64), np.dtype(np.float16))
    return np.dtype(np.complex64 if single else np.complex128)


def _real_of(dt: np.dtype) -> np.dtype:
    return np.dtype(np.float32 if _complex_of(dt) == np.complex64 else np.float64)


def _check_norm(name: str, norm: str) -> None:
    if norm not in _NORMS:
        raise ValueError(f"{name}: norm must be one of {_NORMS}, got {norm!r}")


#: how each transform maps a length: (input length m, requested n or None) -> output length
_SIZE: dict[str, Callable[[int, Any], int]] = {
    "fft": lambda m, n: m if n is None else n,
    "ifft": lambda m, n: m if n is None else n,
    "rfft": lambda m, n: (m if n is None else n) // 2 + 1,
    "irfft": lambda m, n: 2 * (m - 1) if n is None else n,
    "hfft": lambda m, n: 2 * (m - 1) if n is None else n,
    "ihfft": lambda m, n: (m if n is None else n) // 2 + 1,
}
#: transforms whose input must be real / whose output is real
_REAL_IN, _REAL_OUT = ("rfft", "ihfft"), ("irfft", "hfft")


def _out_dtype(name: str, x: TensorType) -> np.dtype:
    if name in _REAL_IN and x.dtype.kind == "c":
        raise TypeError(f"{name} takes real input, got {x.dtype}; use fft for complex input")
    if x.dtype.kind not in "biufc":
        raise TypeError(f"{name}: unsupported input dtype {x.dtype}")
    return _real_of(x.dtype) if name in _REAL_OUT else _complex_of(x.dtype)


def _length(name: str, m: int, n: Any, what: str) -> int:
    if n is not None and n < 1:
        raise ValueError(f"{name}: {what} must be >= 1, got {n}")
    if m < 0:  # unknown until run time: known anyway when n is given
        return -1 if n is None else _SIZE[name](0, n)
    out = _SIZE[name](m, n)
    if out < 1:
        raise ValueError(f"{name}: a transform of length {out} from an axis of size {m}; "
                         f"pass n=")
    return out


def _one_axis(name: str) -> None:
    np_fn = getattr(np.fft, name)

    def impl(x, *, n, axis, norm):
        _check_norm(name, norm)
        x = np.asarray(x)
        out = np_fn(x, n=n, axis=axis, norm=norm)
        return out.astype(_out_dtype(name, TensorType(x.shape, x.dtype)), copy=False)

    def infer(types: list[TensorType], a: Any) -> list[TensorType]:
        (x,) = types
        _check_norm(name, a.norm)
        if not x.shape:
            raise ValueError(f"{name}: a 0-d input has no axis to transform")
        ax = normalize_axis(a.axis, len(x.shape), "axis")
        shape = list(x.shape)
        shape[ax] = _length(name, shape[ax], a.n, "n")
        return [TensorType(tuple(shape), _out_dtype(name, x))]

    define(name, ["x"], infer, impl, namespace="fft", grad=NONDIFF, method=False,
           attrs={"n": (Attr.OPT_INT, None), "axis": (Attr.INT, -1),
                  "norm": (Attr.STR, "backward")},
           doc=f"numpy's ``np.fft.{name}`` along ``axis`` (``n``: the transform length; "
               f"``norm``: backward, ortho or forward).")


def _n_axes(name: str, base: str) -> None:
    np_fn = getattr(np.fft, name)

    def axes_of(rank: int, s: Any, axes: Any) -> tuple[int, ...]:
        if axes is None:
            axes = tuple(range(rank - len(s), rank)) if s is not None else tuple(range(rank))
        out = tuple(normalize_axis(ax, rank, "axes") for ax in axes)
        if len(set(out)) != len(out):
            raise ValueError(f"{name}: repeated axes {axes}")
        if s is not None and len(s) != len(out):
            raise ValueError(f"{name}: s {s} and axes {axes} differ in length")
        return out

    def impl(x, *, s, axes, norm):
        _check_norm(name, norm)
        x = np.asarray(x)
        axes = axes_of(x.ndim, s, axes)  # explicit: numpy 2 deprecates s without axes
        if not axes:
            return x.astype(_out_dtype(base, TensorType(x.shape, x.dtype)))  # nothing to do
        out = np_fn(x, s=s, axes=axes, norm=norm)
        return out.astype(_out_dtype(base, TensorType(x.shape, x.dtype)), copy=False)

    def infer(types: list[TensorType], a: Any) -> list[TensorType]:
        (x,) = types
        _check_norm(name, a.norm)
        axes = axes_of(len(x.shape), a.s, a.axes)
        shape = list(x.shape)
        for i, ax in enumerate(axes):
            n = None if a.s is None else a.s[i]
            last = i == len(axes) - 1  # the real transforms halve/restore the last axis only
            shape[ax] = _length(base if last else "fft", shape[ax], n, "s")
        return [TensorType(tuple(shape), _out_dtype(base, x))]

    define(name, ["x"], infer, impl, namespace="fft", grad=NONDIFF, method=False,
           attrs={"s": (Attr.OPT_INTS, None), "axes": (Attr.OPT_INTS, None),
                  "norm": (Attr.STR, "backward")},
           doc=f"numpy's ``np.fft.{name}`` over ``axes`` (default: all, or the last len(s)); "
               f"``s``: the transform lengths.")


for _name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    _one_axis(_name)
for _name, _base in (("fftn", "fft"), ("ifftn", "ifft"), ("rfftn", "rfft"), ("irfftn", "irfft")):
    _n_axes(_name, _base)
