"""Random arrays from one global, seedable stream (``nd.random.set_seed``).

Random ops are ops of the table, so inside a ``graph_scope`` or ``@nd.compile`` they are traced
and draw fresh numbers on every replay — reproducibly after ``set_seed``.

>>> import nd4py as nd
>>> nd.random.set_seed(7); a = nd.random.normal(2, 2)
>>> nd.random.set_seed(7); b = nd.random.normal(2, 2)
>>> bool((a == b).all())
True
"""
from __future__ import annotations

from typing import Any

from samediff import NDArray, bind
from samediff.ops import get_op
from samediff.random_state import get_seed, set_seed

from .creation import _attrs, _shape_dtype

__all__ = ["set_seed", "get_seed", "uniform", "rand", "normal", "randn", "bernoulli",
           "truncated_normal"]


def uniform(*shape: Any, low: float = 0.0, high: float = 1.0, dtype: Any = None) -> NDArray:
    """Uniform values in ``[low, high)`` (ND4J ``Nd4j.rand``)."""
    shape, dtype = _shape_dtype("uniform", shape, dtype)
    return bind(get_op("uniform"), [], _attrs(shape=shape, low=low, high=high, dtype=dtype))


def normal(*shape: Any, mean: float = 0.0, std: float = 1.0, dtype: Any = None) -> NDArray:
    """Normally distributed values (ND4J ``Nd4j.randn``)."""
    shape, dtype = _shape_dtype("normal", shape, dtype)
    return bind(get_op("normal"), [], _attrs(shape=shape, mean=mean, std=std, dtype=dtype))


def bernoulli(*shape: Any, p: float = 0.5, dtype: Any = None) -> NDArray:
    """0/1 values, 1 with probability ``p``."""
    shape, dtype = _shape_dtype("bernoulli", shape, dtype)
    return bind(get_op("bernoulli"), [], _attrs(shape=shape, p=p, dtype=dtype))


def truncated_normal(*shape: Any, mean: float = 0.0, std: float = 1.0, dtype: Any = None) -> NDArray:
    """Normal values redrawn until all lie within two standard deviations of the mean."""
    shape, dtype = _shape_dtype("truncated_normal", shape, dtype)
    return bind(get_op("truncated_normal"), [], _attrs(shape=shape, mean=mean, std=std, dtype=dtype))


rand = uniform
randn = normal
