"""Sample rows for the ops that carry sub-graphs (``samediff/control``): their bodies are
graph attributes, built here with the IR's recorder (placeholders typed float64 with unknown
dims; the suites cast the operands, and the bodies re-type to whatever they are given)."""
from __future__ import annotations

import numpy as np

from samediff.ir import Graph, VariableType
from samediff.ops import TensorType
from samediff.recorder import GraphRecorder

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import u
except ImportError:  # ... or tests/ became one
    from .op_references import u


def body(fn, rank: int, n: int = 1) -> Graph:
    """The graph of ``fn`` applied to ``n`` float64 placeholders of rank ``rank``."""
    rec = GraphRecorder(Graph())
    xs = [rec.add(VariableType.PLACEHOLDER, TensorType((-1,) * rank, np.dtype("float64")),
                  f"x{i}") for i in range(n)]
    out = fn(*xs)
    outs = out if isinstance(out, tuple) else (out,)
    rec.graph.set_outputs(*[o.name for o in outs])
    return rec.graph.freeze()


def _cond_ref(pred, *xs, then_body, else_body):
    """Written from cond's definition for the bodies below: exp(2x) + y, or x - y."""
    x, y = xs
    return np.exp(2.0 * x) + y if bool(pred) else x - y


def _cond_pair_ref(pred, x, then_body, else_body):
    return (np.sin(x), x * x) if bool(pred) else (-x, x + 1.0)


def _scan_ref(*operands, body, num_carry, num_xs, length, reverse):
    """Written from scan's definition for the bodies below: carry c, rows x (and an operand w
    read at every step): c <- tanh(c * 0.5 + x) [* w], and y_t = c * x (the carry entering)."""
    c, xs, rest = operands[0], operands[1], operands[2:]
    ys = [None] * length
    for t in (range(length - 1, -1, -1) if reverse else range(length)):
        ys[t] = c * xs[t]
        c = np.tanh(c * 0.5 + xs[t]) * (rest[0] if rest else 1.0)
    return c, np.stack(ys)


def control_samples(S):
    exp_plus = body(lambda x, y: (x * 2.0).exp() + y, 2, 2)
    minus = body(lambda x, y: x - y, 2, 2)
    pair_then = body(lambda x: (x.sin(), x * x), 1)
    pair_else = body(lambda x: (-x, x + 1.0), 1)
    both = {"then_body": exp_plus, "else_body": minus}
    step = body(lambda c, x: ((c * 0.5 + x).tanh(), c * x), 1, 2)
    step_w = body(lambda c, x, w: ((c * 0.5 + x).tanh() * w, c * x), 1, 3)
    scan = {"body": step, "num_carry": 1, "num_xs": 1, "length": 4}
    return {"cond": [
        S([np.array(True), u(2, 3), u(2, 3)], both, _cond_ref),
        S([np.array(False), u(2, 3), u(2, 3)], both, _cond_ref),
        S([np.array(3, dtype=np.int64), u(4)], {"then_body": pair_then, "else_body": pair_else},
          _cond_pair_ref),
    ], "scan": [
        S([u(3), u(4, 3)], scan, _scan_ref),
        S([u(3), u(4, 3)], {**scan, "reverse": True}, _scan_ref),
        S([u(3), u(4, 3), u(3)], {**scan, "body": step_w}, _scan_ref),
    ]}
