"""SameDiff graph -> ONNX model (``to_onnx``).

Placeholders become graph inputs (``-1`` dims become symbolic dims), constants and variables
initializers, and each node of the graph one or a few ONNX nodes written by its op's exporter
in ``EXPORTERS`` (op name -> function). Whether an op has an ONNX form is a fact of the table
(``exportable(op)``); a graph holding ops without one raises ``OnnxExportError`` listing every
such node at once, before anything is written.

Exporters write for the opset asked (``opset=13`` to ``23``; reductions take their axes as an
input from 18, ``ReduceSum`` from 13, as ONNX moved them), and the model passes
``onnx.checker``'s full check (with shape inference) before it is returned.

>>> import numpy as np
>>> from samediff import SameDiff
>>> sd = SameDiff.create()
>>> x = sd.placeholder("x", "float", -1, 3)
>>> y = sd.nn.relu(x * 2.0).rename("y")
>>> model = to_onnx(sd, outputs=["y"])
>>> [n.op_type for n in model.graph.node]
['Mul', 'Relu']
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import NdError
from ..ir import VariableType

__all__ = ["to_onnx", "exportable", "OnnxExportError", "EXPORTERS", "DEFAULT_OPSET"]

DEFAULT_OPSET = 17
MIN_OPSET, MAX_OPSET = 13, 23


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


def exportable(op: Any) -> bool:
    """Whether table op ``op`` (an ``OpDef`` or a name) has an ONNX form.

    >>> exportable("relu"), exportable("fft")
    (True, False)
    """
    from . import export_ops  # noqa: F401 - fills EXPORTERS
    return (op if isinstance(op, str) else op.name) in EXPORTERS


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
        from onnx import numpy_helper
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def as_dtype(self, name: str, dtype: Any) -> str:
        """``name``, or a ``Cast`` of it when its dtype is not ``dtype``. (A weak literal is
        typed by its node when written: it needs no cast.)"""
        from onnx import helper
        var = self.graph.vars.get(name)
        if var is not None and var.ttype.weak:
            return name
        if self.dtype(name) == np.dtype(dtype):
            return name
        return self.emit("Cast", [name], to=helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))[0]

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


def _tensor_type(name: str, ttype: Any) -> Any:
    from onnx import helper
    dims = [d if d >= 0 else f"{name}_dim{k}" for k, d in enumerate(ttype.shape)]
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(
        np.dtype(ttype.dtype)), dims)


def to_onnx(sd: Any, path: Any = None, *, opset: int = DEFAULT_OPSET,
            outputs: Sequence[str] | None = None, check: bool = True) -> Any:
    """``sd`` as an ``onnx.ModelProto`` (also written to ``path`` when given).

    ``outputs``: the graph outputs (default: every op result nothing else reads, and the
    losses). Placeholders become inputs, constants and variables initializers. The model
    passes ``onnx.checker.check_model(model, full_check=True)`` (``check=False`` skips it).
    """
    import onnx
    from onnx import helper, numpy_helper
    from . import export_ops  # noqa: F401 - fills EXPORTERS
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise OnnxExportError(f"opset {opset} is not supported: choose {MIN_OPSET}..{MAX_OPSET}")
    graph = sd.graph
    missing = [f"{n.name!r} ({n.op.name})" for n in graph.nodes if n.op.name not in EXPORTERS]
    if missing:
        raise OnnxExportError(f"{len(missing)} node(s) have ops with no ONNX form: "
                              + ", ".join(missing))
    if outputs is None:
        read = {i for n in graph.nodes for i in n.inputs}
        outputs = [o for n in graph.nodes for o in n.outputs if o not in read]
        outputs += [loss for loss in sd.loss_variables() if loss not in outputs]
    for name in outputs:
        if name not in graph.vars:
            raise OnnxExportError(f"output {name!r} is not a variable of the graph")
    ctx = ExportContext(graph, opset)
    inputs, initializers = [], []
    for name, var in graph.vars.items():
        if var.vtype == VariableType.PLACEHOLDER:
            inputs.append(_tensor_type(name, var.ttype))
        elif var.vtype in (VariableType.CONSTANT, VariableType.VARIABLE) and var.value is not None:
            value = np.asarray(var.value.numpy() if hasattr(var.value, "numpy") else var.value)
            if var.ttype.weak:  # a Python scalar: typed by the op that reads it
                continue
            initializers.append(numpy_helper.from_array(value.astype(var.ttype.dtype), name))
    for node in graph.nodes:
        try:
            EXPORTERS[node.op.name](ctx, node)
        except OnnxExportError:
            raise
        except Exception as exc:  # noqa: BLE001 - name the node
            raise OnnxExportError(f"node {node.name!r} ({node.op.name}): {type(exc).__name__}: "
                                  f"{exc}") from exc
    _type_weak_literals(ctx, graph)
    outs = [_tensor_type(name, graph.vars[name].ttype) for name in outputs]
    onnx_graph = helper.make_graph(ctx.nodes, "nd4py", inputs, outs,
                                   initializer=initializers + ctx.initializers)
    model = helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="nd4py")
    model.ir_version = min(model.ir_version, _IR_FOR_OPSET.get(opset, model.ir_version))
    if check:
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as exc:  # noqa: BLE001 - onnx raises ValidationError and friends
            raise OnnxExportError(f"the exported model fails onnx.checker: {exc}") from exc
    if path is not None:
        onnx.save_model(model, os.fspath(path))
    return model


#: the IR version of the onnx release that introduced each opset (a model must not claim a
#: newer IR than runtimes of its opset know)
_IR_FOR_OPSET = {13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10, 22: 10,
                 23: 11}


def _type_weak_literals(ctx: ExportContext, graph: Any) -> None:
    """Weak Python-scalar constants (``x * 2.0``) become initializers of the type their node
    computes in: its result's (arithmetic: the exporters cast the other inputs to it), or, for
    a bool result (a comparison), the strong input's."""
    from onnx import numpy_helper
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
                ctx.initializers.append(numpy_helper.from_array(value, i))
                done.add(i)
