"""ONNX's non-tensor values during import: ``OnnxSequence`` (a ``seq(tensor)`` of a length known
at import) and ``OnnxOptional`` (holding a value, a sequence, or nothing). Converters and the
importer share them; this module imports nothing of either."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["OnnxSequence", "OnnxOptional", "element_name", "describe_value"]

Value = Any  # SDVariable | np.ndarray (| OnnxSequence | OnnxOptional)


class OnnxSequence:
    """An ONNX ``seq(tensor)`` value during import: a fixed number of elements (each an
    ``SDVariable`` or a numpy array) and the element ``dtype`` (kept for an empty sequence).
    Immutable: the sequence converters build new ones, so a value bound to one ONNX name never
    changes under another."""

    __slots__ = ("items", "dtype")

    def __init__(self, items: Sequence[Value] = (), dtype: Any = None) -> None:
        self.items = tuple(items)
        if dtype is None and self.items:
            dtype = self.items[0].dtype
        self.dtype = None if dtype is None else np.dtype(dtype)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Any:
        return iter(self.items)

    def __getitem__(self, i: int) -> Value:
        return self.items[i]

    def __repr__(self) -> str:
        return f"OnnxSequence(<{len(self.items)} x {self.dtype}>)"


class OnnxOptional:
    """An ONNX ``optional(...)`` value during import: ``value`` is a tensor value or an
    ``OnnxSequence``, or None for an empty optional (whether it is empty is known at import)."""

    __slots__ = ("value",)

    def __init__(self, value: Value = None) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"OnnxOptional({self.value!r})"


def element_name(name: str, i: int) -> str:
    """The graph variable of element ``i`` of sequence ``name`` (a graph input or output):
    ``name.i``, e.g. ``"seq.0"``."""
    return f"{name}.{i}"


def describe_value(value: Value) -> str:
    """'a sequence of 3 tensor(s)', 'an empty optional'... for error messages."""
    if isinstance(value, OnnxSequence):
        return f"a sequence of {len(value)} tensor(s)"
    if isinstance(value, OnnxOptional):
        return ("an empty optional" if value.value is None
                else f"an optional holding {describe_value(value.value)}")
    return "a tensor"
