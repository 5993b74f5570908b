"""Sample rows for the ops that carry sub-graphs (``samediff/control``): their bodies are
graph attributes, built here with the IR's recorder (placeholders typed float64 with unknown
dims; the suites cast the operands, and the bodies re-type to whatever they are given)."""
from __future__ import annotations

import numpy as np

from samediff.control.loops import backward_body
from samediff.ir import Graph, VariableType
from samediff.ops import TensorType
from samediff.recorder import GraphRecorder

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import u
except ImportError:  # ... or tests/ became one
    from .op_references import u


def body(fn, rank: int, n: int = 1) -> Graph:
    """The graph of ``fn`` applied to ``n`` float64 placeholders of rank ``rank``."""
    return typed_body(fn, *[(rank, "float64")] * n)


def typed_body(fn, *types) -> Graph:
    """The graph of ``fn`` applied to placeholders of ``(rank, dtype)`` ``types``."""
    rec = GraphRecorder(Graph())
    xs = [rec.add(VariableType.PLACEHOLDER, TensorType((-1,) * rank, np.dtype(dtype)), f"x{i}")
          for i, (rank, dtype) in enumerate(types)]
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


def _while_counted_ref(i, c, w, **attrs):
    """Written from while_loop's definition for the counted body below: while i < 4 (and at
    most ``max_iterations`` steps): i <- i + 1, c <- tanh(c / 2 + w)."""
    limit = attrs["max_iterations"]
    steps = 0
    while i < 4 and (limit < 0 or steps < limit):
        i, c, steps = i + 1, np.tanh(c * 0.5 + w), steps + 1
    return np.asarray(i), c


def _while_doubling_ref(c, **attrs):
    """While sum(c) < 100: c <- 2c, stacking sin of the carry entering each step."""
    ys = []
    while c.sum() < 100 and (attrs["max_iterations"] < 0 or len(ys) < attrs["max_iterations"]):
        ys.append(np.sin(c))
        c = c * 2.0
    return c, (np.stack(ys) if ys else np.empty((0, *c.shape)))


def _while_grad_ref(i, c, w, ct_i, ct_c, **attrs):
    """The counted loop's gradient from first principles: with c' = tanh(c / 2 + w),
    dc' = (1 - c'^2) (dc / 2 + dw); pulled back through the four steps, w's summed."""
    carries = []
    while i < 4:
        carries.append(c)
        i, c = i + 1, np.tanh(c * 0.5 + w)
    g_c, g_w = ct_c, np.zeros_like(w)
    for entering in reversed(carries):
        d = g_c * (1.0 - np.tanh(entering * 0.5 + w) ** 2)
        g_c, g_w = d * 0.5, g_w + d
    return np.asarray(ct_i), g_c, g_w  # (the counter's cotangent passes through)


def control_samples(S):
    exp_plus = body(lambda x, y: (x * 2.0).exp() + y, 2, 2)
    minus = body(lambda x, y: x - y, 2, 2)
    pair_then = body(lambda x: (x.sin(), x * x), 1)
    pair_else = body(lambda x: (-x, x + 1.0), 1)
    both = {"then_body": exp_plus, "else_body": minus}
    step = body(lambda c, x: ((c * 0.5 + x).tanh(), c * x), 1, 2)
    step_w = body(lambda c, x, w: ((c * 0.5 + x).tanh() * w, c * x), 1, 3)
    scan = {"body": step, "num_carry": 1, "num_xs": 1, "length": 4}
    # (the counter is a float: every output of a row runs in the row's dtype; integer carries
    # are in tests/test_control_while.py)
    counted = {"cond": body(lambda i, c, w: i < 4.0, 0, 3),
               "body": body(lambda i, c, w: (i + 1.0, (c * 0.5 + w).tanh()), 0, 3),
               "num_carry": 2}
    doubling = {"cond": body(lambda c: c.sum() < 100.0, 1),
                "body": body(lambda c: (c * 2.0, c.sin()), 1), "num_carry": 1}
    counted_grad = {**counted, "checkpoint": 2,
                    "backward": backward_body(counted["body"], 2, 0, [True, True, True])[0]}
    integral = np.array([1.0, 2.0, 3.0])  # (exact in every float format: one trip count)
    return {"while_loop": [
        S([np.array(0.0), u(3), u(3)], counted, _while_counted_ref),
        S([np.array(1.0), u(3), u(3)], {**counted, "checkpoint": 2, "max_iterations": 2},
          _while_counted_ref),
        S([integral], doubling, _while_doubling_ref),
        S([np.array([60.0, 50.0])], doubling, _while_doubling_ref),  # no step runs
    ], "while_loop_grad": [
        S([np.array(0.0), u(3), u(3), np.array(0.5), u(3)], counted_grad, _while_grad_ref),
    ], "cond": [
        S([np.array(True), u(2, 3), u(2, 3)], both, _cond_ref),
        S([np.array(False), u(2, 3), u(2, 3)], both, _cond_ref),
        S([np.array(3, dtype=np.int64), u(4)], {"then_body": pair_then, "else_body": pair_else},
          _cond_pair_ref),
    ], "scan": [
        S([u(3), u(4, 3)], scan, _scan_ref),
        S([u(3), u(4, 3)], {**scan, "reverse": True}, _scan_ref),
        S([u(3), u(4, 3), u(3)], {**scan, "body": step_w}, _scan_ref),
    ]}
