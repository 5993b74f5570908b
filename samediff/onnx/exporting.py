"""The exporters' table (op name -> exporter) and what an exporter writes into
(``ExportContext``); the exporters themselves are in ``export_ops.py``, ``to_onnx`` in
``export.py``."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..errors import NdError
from .dtypes import elem_type, tensor

__all__ = ["OnnxExportError", "EXPORTERS", "exports", "ExportContext"]


class OnnxExportError(NdError, ValueError):
    """A graph cannot be written as ONNX: ops with no ONNX form (every such node listed),
    or an attribute value an exporter cannot express (the node named)."""


#: op name -> exporter ``fn(ctx, node)``; ``ctx.emit`` writes ONNX nodes
EXPORTERS: dict[str, Callable[["ExportContext", Any], None]] = {}


def exports(*names: str) -> Callable[[Callable], Callable]:
    def register(fn: Callable) -> Callable:
        for name in names:
            EXPORTERS[name] = fn
        return fn
    return register


class ExportContext:
    """What an exporter writes into: ONNX nodes, initializers for constants it needs."""

    def __init__(self, graph: Any, opset: int) -> None:
        self.graph = graph  # the SameDiff's ir.Graph
        self.opset = opset
        self.nodes: list = []
        self.initializers: list = []
        self._names: set[str] = set(graph.vars)
        self._count = 0

    def fresh(self, hint: str) -> str:
        """A value name not used in the graph."""
        while True:
            self._count += 1
            name = f"{hint}__{self._count}"
            if name not in self._names:
                self._names.add(name)
                return name

    def emit(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str] | int = 1,
             **attrs: Any) -> list[str]:
        """Write one ONNX node; ``outputs`` names, or how many fresh names to make. Returns
        the output names."""
        from onnx import helper
        if isinstance(outputs, int):
            outputs = [self.fresh(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs),
                                           **{k: v for k, v in attrs.items() if v is not None}))
        return list(outputs)

    def const(self, value: Any, dtype: Any = None, hint: str = "const") -> str:
        """An initializer holding ``value``; its name."""
        name = self.fresh(hint)
        self.initializers.append(tensor(np.asarray(value, dtype=dtype), name))
        return name

    def as_dtype(self, name: str, dtype: Any) -> str:
        """``name``, or a ``Cast`` of it when its dtype is not ``dtype``. (A weak literal is
        typed by its node when written: it needs no cast.)"""
        var = self.graph.vars.get(name)
        if var is not None and var.ttype.weak:
            return name
        if self.dtype(name) == np.dtype(dtype):
            return name
        return self.emit("Cast", [name], to=elem_type(dtype))[0]

    def weak(self, name: str) -> bool:
        """Whether ``name`` is a weak literal (a Python scalar typed by its node)."""
        var = self.graph.vars.get(name)
        return var is not None and bool(var.ttype.weak)

    def ints(self, values: Sequence[int], hint: str = "ints") -> str:
        return self.const(np.asarray(list(values), np.int64), hint=hint)

    def dtype(self, name: str) -> np.dtype:
        return np.dtype(self.graph.vars[name].ttype.dtype)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.graph.vars[name].ttype.shape)

    def rank(self, name: str) -> int:
        return len(self.shape(name))

    def fail(self, node: Any, why: str) -> OnnxExportError:
        return OnnxExportError(f"node {node.name!r} ({node.op.name}): {why}")


#: the opsets ``to_onnx`` writes
MIN_OPSET, MAX_OPSET = 13, 23
_INT64_MAX, _INT64_MIN = int(np.iinfo(np.int64).max), int(np.iinfo(np.int64).min)


def _axes(dims, rank: int) -> list[int]:
    """A reduction's ``dims`` attribute as non-negative axes (None: all of them)."""
    if dims is None:
        return list(range(rank))
    dims = [dims] if isinstance(dims, (int, np.integer)) else list(dims)
    return sorted(int(d) + rank if int(d) < 0 else int(d) for d in dims)


def _scalar(ctx: "ExportContext", value, dtype) -> str:
    return ctx.const(value, np.dtype(dtype), hint="scalar")


def type_weak_literals(ctx: ExportContext, graph: Any) -> None:
    """Weak Python-scalar constants (``x * 2.0``) become initializers of the type their node
    computes in: its result's (arithmetic: the exporters cast the other inputs to it), or, for
    a bool result (a comparison), the strong input's."""
    done: set[str] = set()
    for node in graph.nodes:
        strong = [i for i in node.inputs if not graph.vars[i].ttype.weak]
        dtype = np.dtype(graph.vars[node.outputs[0]].ttype.dtype)
        if dtype == np.bool_ and strong:
            dtype = np.result_type(*[graph.vars[i].ttype.dtype for i in strong])
        for i in node.inputs:
            var = graph.vars[i]
            if var.ttype.weak and var.value is not None and i not in done:
                value = np.asarray(var.value.numpy() if hasattr(var.value, "numpy")
                                   else var.value, dtype=dtype)
                ctx.initializers.append(tensor(value, i))
                done.add(i)
