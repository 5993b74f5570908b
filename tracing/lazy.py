"""``LazyArray``: the proxy an op returns while a trace is active.

It is an ``NDArray`` whose buffer arrives when its scope ends. Until then it answers shape,
dtype and rank from inferred metadata and supports every operator and method (each call is
recorded); reading data raises a ``TracingError`` naming the op that produced it. Once
materialized it behaves exactly like an ``NDArray``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from samediff.array import NDArray
from samediff.surface import NdInt, read_error
from samediff.errors import TracingError
from samediff.ops import TensorType

PENDING = "pending"
READY = "ready"
FAILED = "failed"


class LazyArray(NDArray):
    """A traced array: metadata now, data after its ``graph_scope`` ends."""

    __slots__ = ("_trace", "_slot", "_type", "_value", "_state", "_origin_at", "_failure")

    def __init__(self, trace: Any, slot: int, ttype: TensorType, origin: tuple[str, int] | str) -> None:
        self._trace = trace
        self._slot = slot
        self._type = ttype
        self._value: np.ndarray | None = None
        self._state = PENDING
        self._origin_at = origin  # (op name, node index), or a description: named in every error

    @property
    def _origin(self) -> str:
        if isinstance(self._origin_at, str):
            return self._origin_at
        op, index = self._origin_at
        return f"{op} (node {index})"

    # NDArray reads its buffer through ``_data``; here that is where laziness is enforced.
    @property
    def _data(self) -> np.ndarray:  # type: ignore[override]
        if self._state is READY:
            return self._value  # type: ignore[return-value]
        if self._state is FAILED:
            raise TracingError(f"this traced array ({self._description}) never got a value: "
                               f"{self._failure}")
        raise read_error(self._description, self._trace.read_hint)  # as nd.grad's values

    @property
    def _description(self) -> str:
        origin = self._origin
        return origin if isinstance(self._origin_at, str) else f"produced by {origin}"

    def _materialize(self, value: np.ndarray) -> None:
        self._value, self._state, self._trace = value, READY, None

    def _fail(self, reason: str) -> None:
        self._state, self._trace, self._failure = FAILED, None, reason

    @property
    def is_materialized(self) -> bool:
        return self._state is READY

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape if self._state is READY else self._type.shape  # type: ignore[union-attr]

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype if self._state is READY else self._type.dtype  # type: ignore[union-attr]

    @property
    def rank(self) -> NdInt:
        return NdInt(len(self.shape))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def length(self) -> NdInt:
        return NdInt(np.prod(self.shape, dtype=np.int64))

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def dup(self, order: str = "c") -> NDArray:
        """A copy; while tracing it is recorded (a same-dtype cast, which always copies)."""
        if self._state is READY:
            return super().dup(order)
        return self.cast_to(self.dtype)

    def __repr__(self) -> str:
        if self._state is READY:
            return super().__repr__()
        return (f"LazyArray(shape={self.shape}, dtype={self.dtype.name}, {self._state}, "
                f"{self._description})")
