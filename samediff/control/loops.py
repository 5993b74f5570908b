"""``scan``: a body applied step after step, threading a carry and stacking per-step outputs
(JAX's ``lax.scan``, ONNX's ``Scan``).

One op of the table, ``scan(*carry, *xs, *captures, body=, num_carry=, num_xs=, length=,
reverse=)``. The body maps ``(carry leaves, one slice of each xs leaf along axis 0, captures)``
to ``(new carry leaves, per-step output leaves)``; the op returns the final carry and the
per-step outputs stacked along a new leading axis of ``length``. Each step runs the body
through the plan cache (``run_body``: fused kernels inside). A carry keeps its shape and dtype
from step to step (``CarryError`` names the leaf that changed).

Its gradient is two more ``scan`` nodes: one that also stacks the carry entering each step
(the forward values the backward needs: memory O(length)), then a scan in the opposite
direction over those, whose body is the body's VJP — it threads the carry's cotangent,
accumulates the captures' (a capture is read at every step: its gradient is the sum over
steps) and stacks the xs'. Both are ``scan`` s again, so a scan differentiates twice.

``scan(f, init, xs=None, length=None, reverse=False, unroll=1)`` is the functional form
(``nd.scan``). Carries and xs are pytrees (tuples, lists, dicts) of arrays.

>>> import numpy as np, nd4py as nd
>>> total, partial = scan(lambda c, x: (c + x, c * 2.0), nd.create(0.0), nd.create([1.0, 2.0, 3.0]))
>>> float(total.numpy()), partial.numpy().tolist()
(6.0, [0.0, 2.0, 6.0])
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..array import CURRENT_TRACE, NDArray, bind, type_of
from ..compiler.loop_kernels import describe as describe_loop, run_loop
from ..errors import OpError
from ..ir import Graph, VariableType
from ..ops import REQUIRED, Attr, TensorType, define
from ..ops.call import op as _op
from ..recorder import GraphRecorder
from .bodies import (align_captures, body_types, flatten, is_symbolic, operand_type, run_body,
                     trace_body, unflatten)
from .cond import vjp_body


class CarryError(OpError):
    """A loop body returned a carry leaf whose shape or dtype differs from the one it got."""


# -- the op: types, run, gradient ---------------------------------------------------------------

def _known_equal(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x < 0 or y < 0 or x == y for x, y in zip(a, b))


def _types(types: Sequence[TensorType], body: Graph, nc: int, nx: int,
           length: int) -> tuple[list[TensorType], list[TensorType]]:
    """(carry types, per-step output types) of ``body`` scanned over inputs of ``types``."""
    carry, xs, caps = list(types[:nc]), types[nc:nc + nx], list(types[nc + nx:])
    if length < 0 and not nx:
        raise OpError("scan: length=-1 (the xs' leading axis at run time) needs xs to scan")
    slices = []
    for k, t in enumerate(xs):
        if not t.shape:
            raise OpError(f"scan: xs leaf {k} is a scalar ({t}); scanned arrays need a leading "
                          f"axis to scan over")
        if length >= 0 and t.shape[0] >= 0 and t.shape[0] != length:
            raise OpError(f"scan: xs leaf {k} is {t}: {t.shape[0]} rows along axis 0, but the "
                          f"scan runs {length} steps (every xs leaf needs that many)")
        slices.append(TensorType(t.shape[1:], t.dtype))
    outs = body_types(body, carry + slices + caps, "scan", "the body",
                      f" ({nc} carry, {nx} xs, {len(caps)} captured)")
    if len(outs) < nc:
        raise CarryError(f"scan: the body returns {len(outs)} output(s), fewer than its "
                         f"{nc} carry leaves")
    check_carry(carry, outs)
    return [TensorType(a.shape, a.dtype) for a in carry], outs[nc:]


def check_carry(given: Sequence[TensorType], returned: Sequence[TensorType],
                what: str = "scan") -> None:
    """A loop body returned carry leaves of the types it was given (an unknown dim matches)."""
    for k, (a, b) in enumerate(zip(given, returned)):
        if a.dtype != b.dtype or not _known_equal(a.shape, b.shape):
            raise CarryError(f"{what}: the body changes carry leaf {k} from {a} to {b}; a carry "
                             f"keeps its shape and dtype from step to step (cast or reshape it "
                             f"in the body, or start from an init of the type it becomes)")


def check_structure(returned: Any, init: Any, what: str = "scan") -> None:
    if returned != init:
        raise CarryError(f"{what}: the body returned a carry of another structure "
                         f"({returned}) than init's ({init})")


def _infer(types: list[TensorType], attrs: Any) -> list[TensorType]:
    carry, ys = _types(types, attrs.body, attrs.num_carry, attrs.num_xs, attrs.length)
    return carry + [TensorType((attrs.length, *y.shape), y.dtype) for y in ys]


def _impl(*vals: Any, body: Graph, num_carry: int, num_xs: int, length: int,
          reverse: bool) -> Any:
    nc, nx = num_carry, num_xs
    carry = [np.asarray(v) for v in vals[:nc]]
    xs = [np.asarray(v) for v in vals[nc:nc + nx]]
    caps = list(vals[nc + nx:])
    if length < 0:  # the number of steps is the xs' leading axis, known now
        rows = {len(x) for x in xs}
        if len(rows) != 1:
            raise OpError(f"scan: the xs leaves have different numbers of rows {sorted(rows)}; "
                          f"every xs leaf needs one row per step")
        length = rows.pop()
    whole = run_loop(None, body, vals, nc, nx, length, reverse, -1)
    if whole is not None:  # compiled whole: every step in one Numba function
        out = whole[0] + whole[1]
        return tuple(out) if len(out) > 1 else out[0]
    ys: list[np.ndarray] | None = None
    for t in (range(length - 1, -1, -1) if reverse else range(length)):
        outs = run_body(body, [*carry, *[x[t] for x in xs], *caps])
        carry = [np.asarray(o) for o in outs[:nc]]
        if ys is None:
            ys = [np.empty((length, *np.shape(o)), np.asarray(o).dtype) for o in outs[nc:]]
        for y, o in zip(ys, outs[nc:]):
            y[t] = o
    if ys is None:  # no step ran: the per-step outputs are empty, of the types the body gives
        _, types = _types([type_of(v) for v in vals], body, nc, nx, length)
        ys = [np.empty((0, *[max(d, 0) for d in t.shape]), t.dtype) for t in types]
    out = [c.copy() if any(c is v for v in vals) else c for c in carry] + ys
    return tuple(out) if len(out) > 1 else out[0]


def _carries_entering(body: Graph, nc: int) -> Graph:
    """``body`` that also outputs, as per-step outputs, the carry it was given."""
    g = body.copy()
    g.set_outputs(*g.outputs[:nc], *g.inputs[:nc])
    return g.freeze()


def backward_body(body: Graph, nc: int, nx: int, float_in: list[bool]) -> tuple[Graph, list]:
    """The body of the backward scan, and which float captures it accumulates.

    Inputs: carry = (cotangents of the carry, one accumulator per float capture); xs = (the
    carry entering the step, the step's xs, the per-step outputs' cotangents); captures. Outputs:
    carry = (cotangents of the entering carry, accumulators + this step's capture gradients);
    per-step = the gradients of the float xs slices."""
    n_in = len(body.inputs)
    wrt = [k for k in range(n_in) if float_in[k]]
    vjp = vjp_body(body, wrt, [body.vars[o].ttype for o in body.outputs]).copy()
    grad_of = dict(zip(wrt, vjp.outputs))
    names = list(vjp.inputs)
    ins, cts = names[:n_in], names[n_in:]
    rec = GraphRecorder(vjp)
    caps = [k for k in range(nc + nx, n_in) if float_in[k]]
    accs = [rec.add(VariableType.PLACEHOLDER, vjp.vars[ins[k]].ttype, vjp.unique("acc"))
            for k in caps]
    new_carry = [grad_of.get(k, cts[k]) for k in range(nc)]  # (non-float: passed along)
    summed = [(acc + rec.handle(grad_of[k])).name for acc, k in zip(accs, caps)]
    per_step = [grad_of[k] for k in range(nc, nc + nx) if float_in[k]]
    vjp.order_inputs([*cts[:nc], *[a.name for a in accs], *ins[:nc + nx], *cts[nc:],
                      *ins[nc + nx:]])
    vjp.set_outputs(*new_carry, *summed, *per_step)
    return vjp.freeze(), caps


def _grad(ins: list, outs: list, gs: list, attrs: Any) -> list:
    def forward(entering_body: Graph) -> Any:
        return bind(SCAN, list(ins), {"body": entering_body, "num_carry": attrs.num_carry,
                                      "num_xs": attrs.num_xs, "length": attrs.length,
                                      "reverse": attrs.reverse})
    return loop_gradient(ins, outs, gs, attrs.body, attrs.num_carry, attrs.num_xs, attrs.length,
                         attrs.reverse, forward)


def loop_gradient(ins: list, outs: list, gs: list, body: Graph, nc: int, nx: int, length: int,
                  reverse: bool, forward: Callable[[Graph], Any]) -> list:
    """The gradient of a loop over ``body`` (``scan``, ``while_loop``) that saves every carry:
    ``forward(entering_body)`` records the loop again with a body that also stacks the carry
    entering each step; a ``scan`` in the opposite direction over those carries (``length``
    steps; -1: as many as were saved) runs the body's VJP, threading the carry's cotangent and
    summing the captures'."""
    float_in = [x.dtype.kind == "f" for x in ins]
    if not any(float_in) or not any(o.dtype.kind == "f" for o in outs):
        return [None] * len(ins)
    saved = forward(_carries_entering(body, nc))
    saved = saved if isinstance(saved, tuple) else (saved,)
    entering = list(saved[-nc:]) if nc else []
    gs = [g if g is not None else _op.zeros_like(o) for g, o in zip(gs, outs)]
    back, caps = backward_body(body, nc, nx, float_in)
    accs = [_op.zeros_like(ins[k]) for k in caps]
    res = bind(SCAN, [*gs[:nc], *accs, *entering, *ins[nc:nc + nx], *gs[nc:], *ins[nc + nx:]],
               {"body": back, "num_carry": nc + len(caps), "num_xs": nc + nx + len(outs) - nc,
                "length": length, "reverse": not reverse})
    res = list(res) if isinstance(res, tuple) else [res]
    grads: list = [None] * len(ins)
    for k in range(nc):
        grads[k] = res[k] if float_in[k] else None
    for j, k in enumerate(caps):
        grads[k] = res[nc + j]
    per_step = iter(res[nc + len(caps):])
    for k in range(nc, nc + nx):
        if float_in[k]:
            grads[k] = next(per_step)
    return grads


SCAN = define(
    "scan", ("*carry_xs_captures",), _infer, _impl, namespace="control", method=False,
    attrs={"body": (Attr.GRAPH, REQUIRED), "num_carry": (Attr.INT, REQUIRED),
           "num_xs": (Attr.INT, REQUIRED), "length": (Attr.INT, REQUIRED),
           "reverse": (Attr.BOOL, False)},
    bodies=("body",), grad=_grad,
    route=lambda types, a: describe_loop(None, a.body, types, a.num_carry, a.num_xs),
    doc="scan(*carry, *xs, *captures): the body applied `length` times, threading the carry "
        "and stacking its per-step outputs; returns (final carry..., stacked outputs...). The "
        "functional form is nd.scan(f, init, xs, length, reverse).")


# -- the functional form ------------------------------------------------------------------------

def scan(f: Callable | Sequence[Any], init: Any = None, xs: Any = None,
         length: int | None = None, reverse: bool = False, unroll: int = 1, *,
         body: Graph | None = None, num_carry: int | None = None,
         num_xs: int | None = None) -> Any:
    """``(final carry, stacked ys)`` of ``carry, y = f(carry, x)`` over the leading axis of
    ``xs``, as JAX's ``lax.scan``: ``init`` and ``xs`` are pytrees (tuples, lists, dicts) of
    arrays; ``xs=None`` scans ``length`` steps with ``x = None``; ``reverse=True`` runs from the
    last step to the first (``ys`` stay in step order). ``f`` may return ``y=None``.

    Eagerly (concrete values, no trace) this is a Python loop. Inside ``nd.graph_scope()`` /
    ``@nd.compile`` or on SameDiff variables, ``f`` is recorded once into a body and one
    ``scan`` node is recorded (values ``f`` closes over are captured as in ``nd.cond``); it
    differentiates (the backward pass is a reverse scan over the saved carries), compiles,
    saves and loads. The carry keeps its structure, shapes and dtypes (``CarryError``).
    ``unroll`` is JAX's performance hint, accepted and validated; every step runs the body's
    plan either way.

    ``scan([*carry, *xs, *captures], body=g, num_carry=, num_xs=, length=, reverse=)``
    applies a body graph directly (the op itself, as a saved graph holds it).

    >>> import nd4py as nd
    >>> @nd.compile
    ... def cumsum(xs):
    ...     return nd.scan(lambda c, x: (c + x, c + x), nd.create(0.0), xs)[1]
    >>> cumsum(nd.create([1.0, 2.0, 3.0])).numpy().tolist()
    [1.0, 3.0, 6.0]
    """
    if body is not None:  # the op: scan([*carry, *xs, *captures])
        return bind(SCAN, list(f), {"body": body, "num_carry": num_carry, "num_xs": num_xs,
                                    "length": length, "reverse": reverse})
    if not isinstance(unroll, (int, np.integer)) or isinstance(unroll, bool) or unroll < 1:
        raise OpError(f"scan: unroll must be an int >= 1, got {unroll!r}")
    init_leaves, init_s = flatten(init)
    init_leaves = [x if isinstance(x, NDArray) or is_symbolic(x) else NDArray(np.asarray(x))
                   for x in init_leaves]
    x_leaves, x_s = flatten(xs) if xs is not None else ([], None)
    n = _length(x_leaves, length)
    symbolic = any(is_symbolic(v) for v in (*init_leaves, *x_leaves))
    if CURRENT_TRACE.get() is None and not symbolic and n:  # (no step: the body gives ys' types)
        return _eager(f, init_leaves, init_s, x_leaves, x_s, n, reverse)
    nc = len(init_leaves)
    types = [operand_type(v) for v in init_leaves]
    types += [TensorType(operand_type(v).shape[1:], operand_type(v).dtype) for v in x_leaves]
    shapes: dict = {}

    def step(*leaves: Any) -> tuple:
        carry = unflatten(init_s, leaves[:nc])
        x = unflatten(x_s, leaves[nc:]) if x_s is not None else None
        new, y = _pair(f(carry, x))
        new_leaves, new_s = flatten(new)
        check_structure(new_s, init_s)
        y_leaves, shapes["y"] = flatten(y) if y is not None else ([], None)
        return (*new_leaves, *y_leaves)
    graph, _, captured = trace_body(step, types, "scan: the body", freeze=False)
    (body,), captured = align_captures([(graph, captured)])
    out = bind(SCAN, [*init_leaves, *x_leaves, *captured],
               {"body": body, "num_carry": nc, "num_xs": len(x_leaves), "length": n,
                "reverse": bool(reverse)})
    out = list(out) if isinstance(out, tuple) else [out]
    ys = unflatten(shapes["y"], out[nc:]) if shapes["y"] is not None else None
    return unflatten(init_s, out[:nc]), ys


def _pair(result: Any) -> tuple[Any, Any]:
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise OpError(f"scan: f must return a pair (carry, y), got {type(result).__name__}")
    return result[0], result[1]


def _length(x_leaves: list, length: int | None) -> int:
    shapes = [operand_type(x).shape for x in x_leaves]
    rows = {int(shape[0]) if shape else None for shape in shapes}
    if None in rows:
        raise OpError("scan: every xs leaf needs a leading axis to scan over; got a scalar")
    rows.discard(-1)
    if length is not None:
        if not isinstance(length, (int, np.integer)) or isinstance(length, bool) or length < 0:
            raise OpError(f"scan: length must be an int >= 0, got {length!r}")
        rows.add(int(length))
    if len(rows) != 1:
        raise OpError("scan: " + ("give xs or length" if not rows else
                                   f"the xs leaves and length disagree on the number of steps: "
                                   f"{sorted(rows)}"))
    return rows.pop()


def _eager(f: Callable, init: list, init_s: Any, x_leaves: list, x_s: Any, n: int,
           reverse: bool) -> tuple[Any, Any]:
    carry = unflatten(init_s, init)
    ys: list[list] = [None] * n  # type: ignore[list-item]
    y_s = None
    types = [operand_type(v) for v in init]
    for t in (range(n - 1, -1, -1) if reverse else range(n)):
        x = unflatten(x_s, [v[t] for v in x_leaves]) if x_s is not None else None
        carry, y = _pair(f(carry, x))
        leaves, s = flatten(carry)
        check_structure(s, init_s)
        check_carry(types, [operand_type(leaf) for leaf in leaves])
        ys[t], y_s = (flatten(y) if y is not None else ([], None))
    if y_s is None:
        return carry, None
    # (an op, not np.stack: a step may have read a symbolic value f closes over, and then its
    # outputs are recorded values, unrolled into the enclosing graph)
    stacked = [_op.stack(*[ys[t][k] for t in range(n)], axis=0) for k in range(len(ys[0]))]
    return carry, unflatten(y_s, stacked)


# -- fori_loop: a counted loop --------------------------------------------------------------------

def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any) -> Any:
    """``val = body_fun(i, val)`` for ``i`` from ``lower`` to ``upper - 1``, as JAX's
    ``lax.fori_loop``: a ``scan`` of ``upper - lower`` steps (none when ``upper <= lower``)
    whose carry is ``(i, val)`` (``i`` an int64 scalar), so it records, differentiates,
    compiles and saves as ``scan`` does. ``val`` is a pytree of arrays whose structure, shapes
    and dtypes stay the same. The bounds must be known when the loop is built (Python ints or
    concrete integer scalars); a bound computed inside a trace needs ``while_loop``.

    >>> import nd4py as nd
    >>> newton = lambda a: fori_loop(0, 20, lambda i, x: 0.5 * (x + a / x), a)  # sqrt(a)
    >>> round(float(newton(nd.create(2.0)).numpy()), 6)
    1.414214
    >>> round(float(nd.grad(newton)(nd.create(2.0)).numpy()), 6)  # 1 / (2 sqrt(2))
    0.353553
    """
    lo, hi = _static_int(lower, "lower"), _static_int(upper, "upper")

    def step(carry: tuple, _: Any) -> tuple:
        i, val = carry
        return (i + 1, body_fun(i, val)), None
    (_, out), _ = scan(step, (NDArray(np.asarray(lo, np.int64)), init_val), length=max(hi - lo, 0))
    return out


def _static_int(v: Any, which: str) -> int:
    if is_symbolic(v):
        raise OpError(f"fori_loop: the {which} bound is a value computed inside the trace; "
                      f"fori_loop needs bounds known when the loop is built (a Python int, or "
                      f"pass it as a static argument: nd.compile(f, static_argnums=...)); a "
                      f"data-dependent trip count needs while_loop")
    t = operand_type(v)
    if t.shape != () or t.dtype.kind not in "iu":
        raise OpError(f"fori_loop: the {which} bound must be an integer scalar, got {t}")
    return int(np.asarray(v.numpy() if isinstance(v, NDArray) else v))
