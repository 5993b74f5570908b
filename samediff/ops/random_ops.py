"""Random ops: uniform, normal, bernoulli and truncated normal samples of a given shape.

All draw from ``samediff.random_state.generator()`` (never numpy's global functions), so
``random_state.set_seed`` makes eager code, graphs and compiled plans reproducible. ``random=True``
tells later passes never to fold or deduplicate these ops. float32 samples are drawn directly
in float32 (numpy's Generator supports it and it is faster); other dtypes are cast.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import random_state
from .creation import check_static_shape
from .families import REQUIRED, Attr
from .registry import NONDIFF, TensorType, define

_FLOAT32 = np.dtype(np.float32)


def _draw_dtype(dtype: np.dtype) -> np.dtype:
    """Dtype the generator draws in: float32 when that is the target, else float64."""
    return _FLOAT32 if dtype == _FLOAT32 else np.dtype(np.float64)


def _require_float(dtype: np.dtype) -> None:
    if dtype.kind != "f":
        raise ValueError(f"samples are real numbers: dtype must be a float type, got {dtype}; "
                         f"cast the result if you need integers")


# --- parameter checks, shared by inference and the eager implementation ------------------------

def _check_uniform(*, shape, low, high, dtype) -> None:
    _require_float(dtype)
    if not low < high:
        raise ValueError(f"low must be < high, got low={low}, high={high}")


def _check_normal(*, shape, mean, std, dtype) -> None:
    _require_float(dtype)
    if not std >= 0:
        raise ValueError(f"std must be >= 0, got {std}")


def _check_bernoulli(*, shape, p, dtype) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")


# --- samplers --------------------------------------------------------------------------------

def _uniform(gen: np.random.Generator, *, shape, low, high, dtype) -> np.ndarray:
    u = gen.random(shape, dtype=_draw_dtype(dtype))
    return u * (high - low) + low


def _normal(gen: np.random.Generator, *, shape, mean, std, dtype) -> np.ndarray:
    return gen.standard_normal(shape, dtype=_draw_dtype(dtype)) * std + mean


def _bernoulli(gen: np.random.Generator, *, shape, p, dtype) -> np.ndarray:
    # float64 uniforms: a float32 draw would round small p to a multiple of 2**-24.
    return gen.random(shape) < p


def _truncated_normal(gen: np.random.Generator, *, shape, mean, std, dtype) -> np.ndarray:
    z = np.asarray(gen.standard_normal(shape, dtype=_draw_dtype(dtype)))
    far = np.abs(z) > 2.0
    while far.any():  # ~4.6% are redrawn per round, so this ends after a few rounds
        z[far] = gen.standard_normal(int(far.sum()), dtype=z.dtype)
        far = np.abs(z) > 2.0
    return z * std + mean


def _random_op(name: str, sample, check, params: dict, doc: str) -> None:
    def infer(types: list[TensorType], a: Any) -> TensorType:
        check_static_shape(a.shape)
        check(**vars(a))
        return TensorType(a.shape, a.dtype)

    def impl(**attrs: Any) -> np.ndarray:
        check_static_shape(attrs["shape"])
        check(**attrs)
        out = sample(random_state.generator(), **attrs)
        return np.asarray(out).astype(attrs["dtype"], copy=False)

    define(name, [], infer, impl, namespace="random", method=False, random=True, grad=NONDIFF,
           attrs={"shape": (Attr.INTS, REQUIRED), **params, "dtype": (Attr.DTYPE, _FLOAT32)},
           doc=doc)


_MEAN_STD = {"mean": (Attr.FLOAT, 0.0), "std": (Attr.FLOAT, 1.0)}

_random_op("uniform", _uniform, _check_uniform,
           {"low": (Attr.FLOAT, 0.0), "high": (Attr.FLOAT, 1.0)},
           doc="Samples uniform on ``[low, high)`` (default float32).")
_random_op("normal", _normal, _check_normal, _MEAN_STD,
           doc="Samples from a normal distribution with ``mean`` and ``std`` (default float32).")
_random_op("bernoulli", _bernoulli, _check_bernoulli, {"p": (Attr.FLOAT, 0.5)},
           doc="1 with probability ``p``, else 0, in ``dtype`` (default float32; bool allowed).")
_random_op("truncated_normal", _truncated_normal, _check_normal, _MEAN_STD,
           doc="Normal samples with those beyond 2 ``std`` from ``mean`` redrawn (like ND4J/TF).")
