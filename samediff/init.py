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


# --- ND4J's WeightInitScheme classes (org.nd4j.weightinit.impl), for literal ports ------------

def _order(order: str) -> None:
    if order not in ("c", "f"):
        raise GraphError(f"weight init order must be 'c' or 'f' (as in ND4J), got {order!r}")


class _FanScheme(WeightInit):
    """ND4J's ``new XxxInitScheme(order, fanIn[, fanOut])``: a ``WeightInit`` of a fixed scheme.
    ``order`` ('c'/'f') is accepted for ND4J compatibility (arrays are C-ordered); fans default
    from the variable's shape when not given."""

    _scheme = "xavier"

    def __init__(self, order: str = "c", fan_in: float | None = None,
                 fan_out: float | None = None) -> None:
        _order(order)
        super().__init__(self._scheme, fan_in, fan_out)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(fan_in={self.fan_in}, fan_out={self.fan_out})"


class XavierInitScheme(_FanScheme):
    """Normal, variance ``2 / (fanIn + fanOut)`` (ND4J ``XavierInitScheme('c', fanIn, fanOut)``).

    >>> XavierInitScheme('c', 784, 100).sample((784, 100), np.float32).shape
    (784, 100)
    """

    _scheme = "xavier"


class XavierUniformInitScheme(_FanScheme):
    """Uniform with Xavier's variance (ND4J ``XavierUniformInitScheme``)."""

    _scheme = "xavier_uniform"


class ReluInitScheme(_FanScheme):
    """Normal, variance ``2 / fanIn`` (He; ND4J ``ReluInitScheme``)."""

    _scheme = "relu"


class ReluUniformInitScheme(_FanScheme):
    """Uniform, variance ``2 / fanIn`` (ND4J ``ReluUniformInitScheme``)."""

    _scheme = "he_uniform"


class LecunUniformInitScheme(_FanScheme):
    """Uniform, variance ``1 / fanIn`` (ND4J ``LecunUniformInitScheme``)."""

    _scheme = "lecun_uniform"


class _OrderOnlyScheme(WeightInit):
    """ND4J's ``new XxxInitScheme(order)``: a ``WeightInit`` of a fixed, parameterless scheme."""

    _scheme = "zeros"

    def __init__(self, order: str = "c") -> None:
        _order(order)
        super().__init__(self._scheme)


class ZeroInitScheme(_OrderOnlyScheme):
    """All zeros (ND4J ``ZeroInitScheme('c')``)."""

    _scheme = "zeros"


class OneInitScheme(_OrderOnlyScheme):
    """All ones (ND4J ``OneInitScheme('c')``)."""

    _scheme = "ones"


class ConstantInitScheme(WeightInit):
    """Every element ``value`` (ND4J ``ConstantInitScheme('c', value)``)."""

    def __init__(self, order: str = "c", value: float = 0.0) -> None:
        _order(order)
        super().__init__("constant", value=float(value))


class IdentityInitScheme(_OrderOnlyScheme):
    """The identity matrix (ND4J ``IdentityInitScheme('c')``)."""

    _scheme = "identity"


class UniformInitScheme(WeightInit):
    """Uniform in ``[-1/sqrt(fanIn), 1/sqrt(fanIn)]`` (ND4J ``UniformInitScheme('c', fanIn)``)."""

    def __init__(self, order: str = "c", fan_in: float = 1.0) -> None:
        _order(order)
        bound = 1.0 / math.sqrt(float(fan_in))
        super().__init__("uniform", fan_in=float(fan_in), low=-bound, high=bound)


ND4J_SCHEMES = (XavierInitScheme, XavierUniformInitScheme, ReluInitScheme, ReluUniformInitScheme,
                LecunUniformInitScheme, ZeroInitScheme, OneInitScheme, ConstantInitScheme,
                IdentityInitScheme, UniformInitScheme)
