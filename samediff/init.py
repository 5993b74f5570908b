"""Weight-initialization schemes for ``SameDiff.var`` (ND4J's ``WeightInitScheme`` family).

A scheme is a small frozen record; fans default from the shape (``fan_in = shape[0] * receptive
field``, ``fan_out = shape[-1] * receptive field``) but can be given, as in ND4J's
``new XavierInitScheme('c', fanIn, fanOut)``.

>>> import numpy as np
>>> from samediff.init import WeightInit
>>> w = WeightInit("xavier").sample((784, 100), np.float32)
>>> w.shape, w.dtype
((784, 100), dtype('float32'))
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import random_state
from .errors import GraphError

SCHEMES = ("zeros", "ones", "constant", "uniform", "normal", "xavier", "xavier_uniform",
           "relu", "he", "he_uniform", "lecun", "lecun_uniform", "identity")


@dataclass(frozen=True)
class WeightInit:
    """An initialization scheme: one of ``SCHEMES``, with optional explicit fans/parameters."""

    scheme: str
    fan_in: float | None = None
    fan_out: float | None = None
    value: float = 0.0        # for "constant"
    low: float = -1.0         # for "uniform"
    high: float = 1.0
    std: float = 1.0          # for "normal"

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise GraphError(f"unknown weight init scheme {self.scheme!r}; choose from {SCHEMES}")

    def fans(self, shape: tuple[int, ...]) -> tuple[float, float]:
        receptive = float(np.prod(shape[2:])) if len(shape) > 2 else 1.0
        fan_in = self.fan_in if self.fan_in is not None else (shape[0] * receptive if shape else 1)
        fan_out = self.fan_out if self.fan_out is not None else (
            (shape[1] if len(shape) > 1 else shape[0]) * receptive if shape else 1)
        return float(fan_in), float(fan_out)

    def sample(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Draw an array of ``shape``/``dtype`` from the global random stream."""
        if any(d < 0 for d in shape):
            raise GraphError(f"weight init needs a fully known shape, got {shape}")
        gen, s = random_state.generator(), self.scheme
        if s == "zeros":
            return np.zeros(shape, dtype)
        if s == "ones":
            return np.ones(shape, dtype)
        if s == "constant":
            return np.full(shape, self.value, dtype)
        if s == "identity":
            if len(shape) != 2 or shape[0] != shape[1]:
                raise GraphError(f"identity init needs a square 2-D shape, got {shape}")
            return np.eye(shape[0], dtype=dtype)
        if s == "uniform":
            return gen.uniform(self.low, self.high, shape).astype(dtype)
        if s == "normal":
            return (gen.standard_normal(shape) * self.std).astype(dtype)
        fan_in, fan_out = self.fans(shape)
        variance = {"xavier": 2.0 / (fan_in + fan_out), "xavier_uniform": 2.0 / (fan_in + fan_out),
                    "relu": 2.0 / fan_in, "he": 2.0 / fan_in, "he_uniform": 2.0 / fan_in,
                    "lecun": 1.0 / fan_in, "lecun_uniform": 1.0 / fan_in}[s]
        if s.endswith("uniform"):
            bound = math.sqrt(3.0 * variance)  # uniform(-b, b) has variance b^2 / 3
            return gen.uniform(-bound, bound, shape).astype(dtype)
        return (gen.standard_normal(shape) * math.sqrt(variance)).astype(dtype)
