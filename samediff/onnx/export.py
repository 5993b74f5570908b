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
from typing import Any, Sequence

import numpy as np

from ..ir import VariableType
from .dtypes import elem_type, tensor
from .exporting import (EXPORTERS, MAX_OPSET, MIN_OPSET, ExportContext, OnnxExportError,
                        type_weak_literals)

__all__ = ["to_onnx", "exportable", "OnnxExportError", "EXPORTERS", "DEFAULT_OPSET"]

DEFAULT_OPSET = 17


def _load_exporters() -> None:
    """Import the exporter modules, which fill ``EXPORTERS`` (on first use: they need onnx)."""
    from . import (export_control, export_indexing, export_ops, export_ops_2,  # noqa: F401
                   export_recurrent, export_strings)


def exportable(op: Any) -> bool:
    """Whether table op ``op`` (an ``OpDef`` or a name) has an ONNX form.

    >>> exportable("relu"), exportable("fft")
    (True, False)
    """
    _load_exporters()
    return (op if isinstance(op, str) else op.name) in EXPORTERS


def _tensor_type(name: str, ttype: Any) -> Any:
    from onnx import helper
    dims = [d if d >= 0 else f"{name}_dim{k}" for k, d in enumerate(ttype.shape)]
    return helper.make_tensor_value_info(name, elem_type(ttype.dtype), dims)


def to_onnx(sd: Any, path: Any = None, *, opset: int = DEFAULT_OPSET,
            outputs: Sequence[str] | None = None, check: bool = True) -> Any:
    """``sd`` as an ``onnx.ModelProto`` (also written to ``path`` when given).

    ``outputs``: the graph outputs (default: every op result nothing else reads, and the
    losses). Placeholders become inputs, constants and variables initializers. The model
    passes ``onnx.checker.check_model(model, full_check=True)`` (``check=False`` skips it).
    """
    import onnx
    from onnx import helper
    _load_exporters()
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
        outputs += [loss for loss in sd.loss_variables if loss not in outputs]
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
            initializers.append(tensor(value.astype(var.ttype.dtype), name))
    for node in graph.nodes:
        try:
            EXPORTERS[node.op.name](ctx, node)
        except OnnxExportError:
            raise
        except Exception as exc:  # noqa: BLE001 - name the node
            raise OnnxExportError(f"node {node.name!r} ({node.op.name}): {type(exc).__name__}: "
                                  f"{exc}") from exc
    type_weak_literals(ctx, graph)
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
