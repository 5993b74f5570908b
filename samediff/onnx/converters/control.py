"""ONNX control flow: ``If`` onto ``cond``, ``Scan`` onto ``scan``, ``Loop`` onto
``while_loop`` (no scan outputs) or ``scan`` (a static trip count that always runs to the
end); a Loop carrying a sequence or optional is unrolled at import (``sequence.py``).
Bodies are imported in a child scope of the enclosing graph: values a body reads from outside
(ONNX's implicit outer-scope inputs) become explicit captured inputs of the node
(``samediff/control/bodies.py``), so gradients reach them."""
from __future__ import annotations

import numpy as np

from ...array import NDArray
from ...control.bodies import BranchMismatchError
from ...control.cond import cond
from ...control.loops import scan
from ...control.while_loop import while_loop
from ...errors import OpError
from ..values import OnnxOptional, OnnxSequence
from ..table import converter
from .sequence import from_tree, to_tree, unrolled_loop


def _concrete(value):
    """A numpy array for an eager (folded) result of a control-flow op, else the value."""
    return np.asarray(value.numpy()) if type(value) is NDArray else value


@converter("If", since=(1, 11, 13, 16, 19, 21, 23))
def _if(node):
    pred = node.input(0)
    then_g, else_g = node.attr("then_branch"), node.attr("else_branch")
    if isinstance(pred, np.ndarray):  # known now: import only the branch taken
        return tuple(node.import_body(then_g if bool(pred.reshape(-1)[0]) else else_g, []))
    if node.rank(pred) != 0:
        pred = node.op("reshape", pred, shape=())
    # sequences and optionals cross the cond as pytrees (a list of elements, a dict); both
    # branches must then give the same lengths and emptiness, else the condition must fold
    taken: list = []

    def branch(graph):
        def run():
            taken.append(node.import_body(graph, []))
            return tuple(to_tree(v) for v in taken[-1])
        return run
    try:
        out = cond(pred, branch(then_g), branch(else_g))
    except (BranchMismatchError, OpError):  # (OpError: a branch gives no tensor at all)
        if any(isinstance(v, (OnnxSequence, OnnxOptional)) for vs in taken for v in vs):
            node.static(0, "the condition of an If whose branches give sequences or "
                           "optionals of different lengths or emptiness, or no tensor")
        raise
    out = out if isinstance(out, (tuple, list)) else (out,)
    return tuple(from_tree(t, v, _concrete) for t, v in zip(taken[0], out))


@converter("Scan", since=(9, 11, 16, 19, 21, 23))
def _scan(node):
    body = node.attr("body")
    n_in = int(node.attr("num_scan_inputs"))
    values = node.inputs()
    n_state = len(values) - n_in
    n_out = len(body.output) - n_state
    return _scan_core(node, body, values[:n_state], values[n_state:],
                      list(node.attr("scan_input_axes", [0] * n_in)),
                      list(node.attr("scan_input_directions", [0] * n_in)),
                      list(node.attr("scan_output_axes", [0] * n_out)),
                      list(node.attr("scan_output_directions", [0] * n_out)))


@converter("Scan", since=8)
def _scan8(node):
    """Opset 8's Scan: a leading batch axis on every state and scan input (scanned along
    axis 1), optional per-example ``sequence_lens``; run per example (a static batch)."""
    body = node.attr("body")
    n_in = int(node.attr("num_scan_inputs"))
    values = [node.input(i) for i in range(1, node.num_inputs)]
    n_state = len(values) - n_in
    xs = values[n_state:]
    batch = node.shape(values[0])[0]
    if batch < 0:
        raise node.fail("opset-8 Scan over a run-time batch size is not supported")
    lens = node.input(0)
    if lens is not None:
        steps = node.shape(xs[0])[1]
        lens = node.static(0, "sequence_lens")
        if steps < 0 or np.any(np.asarray(lens) != steps):
            raise node.fail("opset-8 Scan with sequence_lens shorter than the inputs is not "
                            "supported")
    dirs = list(node.attr("directions", [0] * n_in))
    per_example = []
    for b in range(batch):
        pick = [node.op("squeeze", node.op("slice", v, begin=(b,) + (0,) * (node.rank(v) - 1),
                                           size=(1,) + (-1,) * (node.rank(v) - 1)), axis=(0,))
                for v in values]
        per_example.append(_scan_core(node, body, pick[:n_state], pick[n_state:], [0] * n_in,
                                      dirs, [0] * (len(body.output) - n_state),
                                      [0] * (len(body.output) - n_state)))
    return tuple(node.op("stack", *outs, axis=0) for outs in zip(*per_example))


def _scan_core(node, body, states, xs, in_axes, in_dirs, out_axes, out_dirs):
    """ONNX Scan semantics on ``scan``: scan inputs moved so the scanned axis leads (and
    reversed for direction 1), outputs moved back."""
    n_state = len(states)
    moved = []
    for x, axis, rev in zip(xs, in_axes, in_dirs):
        rank = node.rank(x)
        axis = axis + rank if axis < 0 else axis
        if axis:
            x = node.op("permute", x, dims=(axis, *[d for d in range(rank) if d != axis]))
        if rev:
            x = node.op("reverse", x, dims=(0,))
        moved.append(x)

    def step(carry, x):
        got = node.import_body(body, [*carry, *x])
        return tuple(got[:n_state]), tuple(got[n_state:])
    final, ys = scan(step, tuple(states), tuple(moved))
    outs = [_concrete(v) for v in final]
    for y, axis, rev in zip(ys, out_axes, out_dirs):
        y = _concrete(y)
        if rev:
            y = node.op("reverse", y, dims=(0,))
        rank = node.rank(y)
        axis = axis + rank if axis < 0 else axis
        if axis:
            order = list(range(1, rank))
            order.insert(axis, 0)
            y = node.op("permute", y, dims=tuple(order))
        outs.append(y)
    return tuple(outs)


@converter("Loop", since=(1, 11, 13, 16, 19, 21, 23))
def _loop(node):
    body = node.attr("body")
    trip, keep_going = node.input(0), node.input(1)
    carried = [node.any_input(i) for i in range(2, node.num_inputs)]
    if any(isinstance(v, (OnnxSequence, OnnxOptional)) for v in carried):
        return unrolled_loop(node, body, carried)  # (a sequence's length must be static)
    n_scan = len(body.output) - 1 - len(carried)
    if n_scan:
        return _loop_as_scan(node, body, trip, keep_going, carried, n_scan)
    i0 = np.asarray(0, np.int64)
    go0 = np.asarray(True) if keep_going is None else keep_going

    def proceed(carry):
        i, go = carry[0], carry[1]
        ok = go if node.rank(go) == 0 else node.op("reshape", go, shape=())
        if trip is not None:
            ok = node.op("logical_and", ok, node.op("lt", i, node.op("cast", trip,
                                                                      dtype=np.int64)))
        return ok

    def advance(carry):
        i, go, *vs = carry
        got = node.import_body(body, [i, go, *vs])
        go_out = got[0]
        if node.rank(go_out) != 0:
            go_out = node.op("reshape", go_out, shape=())
        go_out = node.op("cast", go_out, dtype=np.bool_)
        return (node.op("add", i, np.asarray(1, np.int64)), go_out, *got[1:])
    go0 = node.op("cast", go0 if node.rank(go0) == 0 else node.op("reshape", go0, shape=()),
                  dtype=np.bool_)
    final = while_loop(proceed, advance, (i0, go0, *carried))
    return tuple(_concrete(v) for v in final[2:])


def _loop_as_scan(node, body, trip, keep_going, carried, n_scan):
    """A Loop with scan outputs: their length must be known when the graph is built, so the
    trip count must be static and the loop must run every iteration."""
    if trip is None:
        raise node.fail("a Loop with scan outputs needs a trip count (M)")
    count = int(node.static(0, "trip count").reshape(-1)[0])
    if keep_going is not None and not bool(node.static(1, "condition").reshape(-1)[0]):
        count = 0  # (the loop does not start)

    def step(carry, _):
        i, *vs = carry
        got = node.import_body(body, [i, np.asarray(True), *vs])
        go_out = got[0]
        if not (isinstance(go_out, np.ndarray) and bool(go_out.reshape(-1)[0])):
            raise node.fail("a Loop with scan outputs whose body may stop early is not "
                            "supported (its scan outputs would have a run-time length)")
        n = len(vs)
        return (node.op("add", i, np.asarray(1, np.int64)), *got[1:1 + n]), \
            tuple(got[1 + n:1 + n + n_scan])
    final, ys = scan(step, (np.asarray(0, np.int64), *carried), None, length=count)
    return tuple(_concrete(v) for v in (*final[1:], *ys))
