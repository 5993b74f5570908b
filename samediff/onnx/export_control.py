"""Control-flow exporters: ``cond`` -> ONNX ``If``, ``while_loop`` -> ``Loop``, ``scan`` ->
``Scan`` (``Loop`` when it scans no inputs), the inverse of ``converters/control.py``.

A body (a SameDiff sub-graph, ``samediff/control/bodies.py``) is exported node by node with
the same exporters as the main graph, into a child ``ExportContext``; then every name it
wrote is renamed under a prefix unique in the model (ONNX's scoping forbids a sub-graph name
shadowing an outer one), except the body inputs that are bound to outer values: a cond's
operands and a loop's captures are read from the enclosing scope by name (ONNX's implicit
outer-scope inputs), so nothing is copied into the body. A body's constants become
``Constant`` nodes inside it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import VariableType
from .dtypes import elem_type, tensor
from .exporting import EXPORTERS, ExportContext, OnnxExportError, exports, type_weak_literals

_INT64_MIN = int(np.iinfo(np.int64).min)


def _unique_prefix(ctx: ExportContext, hint: str) -> str:
    """A name prefix no other body of this export uses (the counter is shared down the tree
    of contexts)."""
    counter = ctx.__dict__.setdefault("_body_counter", [0])
    counter[0] += 1
    return f"{hint}{counter[0]}/"


def _value_info(name: str, ttype: Any) -> Any:
    from onnx import helper
    dims = [d if d >= 0 else None for d in ttype.shape]
    return helper.make_tensor_value_info(name, elem_type(ttype.dtype), dims)


def _rename(nodes: list, mapping: dict[str, str]) -> None:
    """Rename values in ``nodes`` (and the sub-graphs of their attributes, which may read
    them from the outer scope) by ``mapping``, in place."""
    for n in nodes:
        for seq in (n.input, n.output):
            for k, v in enumerate(seq):
                if v in mapping:
                    seq[k] = mapping[v]
        for attr in n.attribute:
            graphs = [attr.g] if attr.HasField("g") else list(attr.graphs)
            for g in graphs:
                _rename(list(g.node), mapping)
                for out in g.output:
                    if out.name in mapping:
                        out.name = mapping[out.name]


def typed(body: Any, types: list) -> Any:
    """A copy of ``body`` whose values have the types inputs of ``types`` give them: a body
    is recorded once and run on whatever its operands are at run time (float32 operands of a
    body traced on float64 ones), but an ONNX sub-graph is typed by what it computes."""
    known = body.retype(dict(zip(body.inputs, types)))
    g = body.copy()
    for name, ttype in known.items():
        var = g.vars.get(name)
        if var is not None and not var.ttype.weak:
            var.ttype = ttype
    return g


def inline_body(ctx: ExportContext, body: Any, bind: dict[str, str], hint: str,
                types: list | None = None) -> tuple:
    """The ONNX nodes computing ``body`` (typed by its inputs' ``types`` when given), its
    inputs read from the names ``bind`` maps them to: ``(nodes, output names)``. Nothing is
    added to ``ctx``."""
    from onnx import helper

    if types is not None:
        body = typed(body, types)
    missing = [f"{n.name!r} ({n.op.name})" for n in body.nodes if n.op.name not in EXPORTERS]
    if missing:
        raise OnnxExportError(f"a {hint} body holds op(s) with no ONNX form: "
                              + ", ".join(missing))
    child = ExportContext(body, ctx.opset)
    child.__dict__["_body_counter"] = ctx.__dict__.setdefault("_body_counter", [0])
    for name, var in body.vars.items():
        if var.vtype in (VariableType.CONSTANT, VariableType.VARIABLE) \
                and var.value is not None and not var.ttype.weak:
            value = np.asarray(var.value.numpy() if hasattr(var.value, "numpy") else var.value)
            child.initializers.append(tensor(value.astype(var.ttype.dtype), name))
    for node in body.nodes:
        try:
            EXPORTERS[node.op.name](child, node)
        except OnnxExportError:
            raise
        except Exception as exc:
            raise OnnxExportError(f"{hint} body node {node.name!r} ({node.op.name}): "
                                  f"{type(exc).__name__}: {exc}") from exc
    type_weak_literals(child, body)
    nodes = [helper.make_node("Constant", [], [t.name], value=t) for t in child.initializers]
    nodes += child.nodes
    prefix = _unique_prefix(ctx, hint)
    defined = {o for n in nodes for o in n.output if o} | set(body.inputs)
    mapping = {name: bind.get(name, prefix + name) for name in defined}
    _rename(nodes, mapping)
    return nodes, [mapping.get(o, o) for o in body.outputs]


def body_graph(ctx: ExportContext, body: Any, formal: list[tuple[str, Any]],
               bind: dict[str, str], outputs_types: list, hint: str,
               extra_nodes: list | None = None, extra_outputs: tuple = ()) -> Any:
    """An ONNX ``GraphProto``: formal inputs ``(name, ttype)``, the body's nodes (inputs bound
    by ``bind``), then ``extra_nodes``; its outputs ``extra_outputs`` (names) followed by the
    body's, each through an ``Identity`` to a fresh name (a graph output must be a value the
    graph computes, once)."""
    from onnx import helper
    nodes, outs = inline_body(ctx, body, bind, hint)
    nodes += extra_nodes or []
    all_outs = list(extra_outputs) + list(outs)
    prefix = _unique_prefix(ctx, hint + "_out")
    infos = []
    for k, (name, ttype) in enumerate(zip(all_outs, outputs_types)):
        out = f"{prefix}{k}"
        nodes.append(helper.make_node("Identity", [name], [out]))
        infos.append(_value_info(out, ttype))
    return helper.make_graph(nodes, hint, [_value_info(n, t) for n, t in formal], infos)


def _types(body: Any, names) -> list:
    return [body.vars[n].ttype for n in names]


def _outer(ctx: ExportContext, names, drop_leading: bool = False) -> list:
    """The types of outer values (a scanned one without its leading axis)."""
    from ..ops import TensorType
    out = []
    for n in names:
        t = ctx.graph.vars[n].ttype
        out.append(TensorType(tuple(t.shape[1:] if drop_leading else t.shape), t.dtype))
    return out


@exports("cond")
def _cond(ctx, node) -> None:
    """ONNX ``If``: the branches take no inputs; the operands are read from the outer
    scope."""
    a = node.attrs
    pred, operands = node.inputs[0], list(node.inputs[1:])
    pred = ctx.as_dtype(pred, np.bool_)  # (an integer predicate: non-zero is true)
    branches = {}
    for attr, onnx_attr in (("then_body", "then_branch"), ("else_body", "else_branch")):
        body = typed(getattr(a, attr), _outer(ctx, operands))
        bind = dict(zip(body.inputs, operands))
        branches[onnx_attr] = body_graph(ctx, body, [], bind,
                                         _types(body, body.outputs), attr)
    ctx.emit("If", [pred], node.outputs, **branches)


@exports("while_loop")
def _while_loop(ctx, node) -> None:
    """ONNX ``Loop``: the cond is computed once before the loop on the initial carry, and in
    the loop body on the carry the step gives (ONNX's ``cond_out``); ``max_iterations`` is
    the trip count ``M``. Per-step outputs are Loop's scan outputs."""
    from onnx import helper

    from ..ops import TensorType
    a = node.attrs
    nc = int(a.num_carry)
    carry, caps = list(node.inputs[:nc]), list(node.inputs[nc:])
    types = _outer(ctx, node.inputs)
    cond_b, body = typed(a.cond, types), typed(a.body, types)
    first, (go,) = inline_body(ctx, cond_b, dict(zip(cond_b.inputs, carry + caps)), "cond")
    ctx.nodes.extend(first)
    prefix = _unique_prefix(ctx, "loop")
    iter_name, cond_in = prefix + "i", prefix + "cond_in"
    formal_carry = [prefix + f"carry{k}" for k in range(nc)]
    bind = dict(zip(body.inputs, formal_carry + caps))
    stepped, outs = inline_body(ctx, body, bind, "body")
    again, (go_out,) = inline_body(ctx, cond_b, dict(zip(cond_b.inputs, outs[:nc] + caps)),
                                   "cond")
    bool_t = TensorType((), np.dtype(bool))
    nodes = stepped + again
    out_types = [bool_t] + _types(body, body.outputs)
    infos = []
    out_prefix = _unique_prefix(ctx, "loop_out")
    for k, (name, ttype) in enumerate(zip([go_out] + outs, out_types)):
        nodes.append(helper.make_node("Identity", [name], [f"{out_prefix}{k}"]))
        infos.append(_value_info(f"{out_prefix}{k}", ttype))
    formal = [(iter_name, TensorType((), np.dtype(np.int64))), (cond_in, bool_t)]
    formal += list(zip(formal_carry, _types(body, body.inputs[:nc])))
    graph = helper.make_graph(nodes, "while_body", [_value_info(n, t) for n, t in formal],
                              infos)
    trip = "" if int(a.max_iterations) < 0 else ctx.const(np.int64(a.max_iterations),
                                                          hint="max_iterations")
    ctx.emit("Loop", [trip, go, *carry], node.outputs, body=graph)


@exports("scan")
def _scan(ctx, node) -> None:
    """ONNX ``Scan`` over the leading axis of the xs (``reverse``: every scan input and
    output in direction 1); a scan of no inputs is a ``Loop`` of ``length`` steps."""
    from ..ops import TensorType
    a = node.attrs
    nc, nx = int(a.num_carry), int(a.num_xs)
    carry, xs, caps = (list(node.inputs[:nc]), list(node.inputs[nc:nc + nx]),
                       list(node.inputs[nc + nx:]))
    body = typed(a.body, _outer(ctx, carry) + _outer(ctx, xs, True) + _outer(ctx, caps))
    prefix = _unique_prefix(ctx, "scan")
    formal_names = [prefix + f"in{k}" for k in range(nc + nx)]
    formal = list(zip(formal_names, _types(body, body.inputs[:nc + nx])))
    bind = dict(zip(body.inputs, formal_names + caps))
    n_ys = len(body.outputs) - nc
    if nx:  # (reversed by slicing around a forward Scan: not every runtime has directions)
        graph = body_graph(ctx, body, formal, bind, _types(body, body.outputs), "scan_body")
        if a.reverse:
            xs = [_reversed(ctx, x) for x in xs]
        outs = list(node.outputs)
        if a.reverse:
            outs = outs[:nc] + [ctx.fresh("ys") for _ in range(n_ys)]
        ctx.emit("Scan", [*carry, *xs], outs, body=graph, num_scan_inputs=nx)
        if a.reverse:
            for y, out in zip(outs[nc:], node.outputs[nc:]):
                _reversed(ctx, y, out)
        return
    bool_t = TensorType((), np.dtype(bool))
    iter_name, cond_in = prefix + "i", prefix + "cond_in"
    formal = [(iter_name, TensorType((), np.dtype(np.int64))), (cond_in, bool_t)] + formal
    graph = body_graph(ctx, body, formal, bind, [bool_t] + _types(body, body.outputs),
                       "scan_body", extra_outputs=(cond_in,))
    outs = list(node.outputs)
    if a.reverse:  # the steps do not depend on the index: only ys' order is reversed
        outs = outs[:nc] + [ctx.fresh("ys") for _ in range(n_ys)]
    ctx.emit("Loop", [ctx.const(np.int64(a.length), hint="length"), "", *carry], outs,
             body=graph)
    if a.reverse:
        for y, out in zip(outs[nc:], node.outputs[nc:]):
            _reversed(ctx, y, out)


def _reversed(ctx: ExportContext, x: str, out: str | None = None) -> str:
    """``x`` reversed along its leading axis."""
    return ctx.emit("Slice", [x, ctx.ints([-1]), ctx.ints([_INT64_MIN]), ctx.ints([0]),
                              ctx.ints([-1])], [out] if out else 1)[0]
