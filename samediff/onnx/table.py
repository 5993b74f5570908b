"""The converter table: one converter per (domain, op type, since-version), chosen by the
model's opset. No if-chains: a converter is written for the opset where the op last changed
its meaning and serves every later opset until the next entry.

A converter is a function ``convert(node) -> value | tuple of values`` of a ``NodeContext``
(``importer.py``): it reads the ONNX node's inputs and attributes and records table ops. The
context folds every op whose inputs are all constants at import (``Shape`` of a static shape,
the arithmetic on it, ``Constant``...), so converters never special-case constants.

>>> from samediff.onnx.table import converter, lookup
>>> @converter("MyRelu", since=(1, 6), domain="example.domain")
... def _my_relu(node):
...     return node.op("relu", node.input(0))
>>> lookup("example.domain", "MyRelu", 7) is _my_relu, lookup("example.domain", "MyRelu", 0)
(True, None)
"""
from __future__ import annotations

import bisect
from typing import Any, Callable, Iterable, Sequence

from ..errors import NdError

__all__ = ["converter", "lookup", "supported", "OnnxImportError", "OnnxStaticInputError",
           "DEFAULT_DOMAINS"]

#: the names ONNX gives its default operator set
DEFAULT_DOMAINS = ("", "ai.onnx")

# (domain, op type) -> sorted since-versions, and the converters in the same order
_SINCE: dict[tuple[str, str], list[int]] = {}
_FUNCS: dict[tuple[str, str], list[Callable]] = {}


class OnnxImportError(NdError, ValueError):
    """An ONNX model cannot be imported: malformed or truncated, or it holds nodes or
    attribute values nd4py has no converter for (every such node is listed at once)."""


class OnnxStaticInputError(OnnxImportError):
    """A node needs the *value* of one of its inputs at import (a ``Reshape`` target, a
    ``Slice`` bound...) and that input is a graph input. ``input_name`` names it: pass its
    value to ``import_onnx(..., static_inputs={name: value})``."""

    def __init__(self, message: str, input_name: str) -> None:
        super().__init__(message)
        self.input_name = input_name


def _key(domain: str, op_type: str) -> tuple[str, str]:
    return ("" if domain in DEFAULT_DOMAINS else domain, op_type)


def converter(op_types: str | Iterable[str], since: int | Iterable[int] = 1,
              domain: str = "") -> Callable[[Callable], Callable]:
    """Register the decorated function for ``op_types`` (one name or several sharing the
    converter) from each opset version in ``since``."""
    names = [op_types] if isinstance(op_types, str) else list(op_types)
    versions = [since] if isinstance(since, int) else list(since)

    def register(fn: Callable) -> Callable:
        for name in names:
            key = _key(domain, name)
            sinces, funcs = _SINCE.setdefault(key, []), _FUNCS.setdefault(key, [])
            for v in versions:
                if v in sinces:
                    raise ValueError(f"ONNX converter for {name!r} (domain {domain!r}) since "
                                     f"opset {v} is defined twice")
                at = bisect.bisect(sinces, v)
                sinces.insert(at, v)
                funcs.insert(at, fn)
        return fn
    return register


def lookup(domain: str, op_type: str, opset: int) -> Callable | None:
    """The converter serving ``op_type`` at ``opset`` of ``domain``: the entry with the
    largest since-version not above it; None if there is none."""
    key = _key(domain, op_type)
    sinces = _SINCE.get(key)
    if not sinces:
        return None
    at = bisect.bisect(sinces, opset) - 1
    return _FUNCS[key][at] if at >= 0 else None


def supported() -> dict[tuple[str, str], list[int]]:
    """Every (domain, op type) with a converter, and the opset versions its entries start at.

    >>> from samediff.onnx import table
    >>> import samediff.onnx  # registers the converters
    >>> table.supported()[("", "Relu")]
    [1]
    """
    return {k: list(v) for k, v in sorted(_SINCE.items())}


def describe(node: Any, opset: int) -> str:
    """``'name' (OpType, domain '', opset 13)`` for error messages."""
    return (f"{node.name or '<unnamed>'!r} ({node.op_type}, domain {node.domain or ''!r}, "
            f"opset {opset})")


Attr = Any  # (an attribute value as ``onnx.helper.get_attribute_value`` gives it)


def bodies(node: Any) -> list:
    """The graphs ``node`` carries as attributes (control-flow bodies: ``If`` branches,
    ``Loop``/``Scan`` bodies), in attribute order."""
    out: list = []
    for a in node.attribute:
        if a.type == a.GRAPH:
            out.append(a.g)
        elif a.type == a.GRAPHS:
            out += list(a.graphs)
    return out


def all_nodes(nodes: Sequence[Any]) -> list:
    """``nodes`` and the nodes of their graph attributes (control-flow bodies), depth first."""
    out = []
    for node in nodes:
        out.append(node)
        for g in bodies(node):
            out += all_nodes(g.node)
    return out
