"""Training mode as a graph transform: every op with a training form (``OpDef.training``:
dropout, batch norm, see ``samediff/ops/train_mode.py``) replaced by that form.

The user's graph stays the inference graph (``output()``, ``evaluate()``); ``fit`` trains the
transformed copy, and ``nd.grad`` called inside a training trace differentiates the transformed
copy of its function's graph (``samediff/functional.py``). What the forms report as state updates (batch norm's running statistics)
comes back as ``{variable: value}``: after an applied step ``fit`` writes each value into its
variable, and those variables are not trained by gradient.

>>> import numpy as np
>>> from samediff import SameDiff
>>> sd = SameDiff.create()
>>> x = sd.placeholder("x", "float", -1, 3)
>>> y = sd.nn.dropout(x, 0.5)
>>> train, updates = training_graph(sd.graph)
>>> [n.op.name for n in sd.graph.nodes], [n.op.name for n in train.nodes], updates
(['dropout'], ['dropout_mask', 'mul'], {})
"""
from __future__ import annotations

from .ir import Graph, VariableType
from .recorder import GraphRecorder


def training_graph(graph: Graph) -> tuple[Graph, dict[str, str]]:
    """A copy of ``graph`` in training mode, and ``{VARIABLE name: its value after a step}``
    (``graph`` itself is not changed). Value names read by the rest of the graph are kept."""
    if not any(n.op.training is not None for n in graph.nodes):
        return graph, {}
    out = graph.copy()
    rec = GraphRecorder(out)
    updates: dict[str, str] = {}
    for node in graph.nodes:
        form = node.op.training
        if form is None:
            continue
        values, changes = form([rec.handle(i) for i in node.inputs], node.attrs)
        out.substitute(node, [v.name for v in values])
        for index, value in changes.items():
            target = node.inputs[index]
            if out.vars[target].vtype is VariableType.VARIABLE:
                updates[target] = value.name
    return out, updates
