"""``while_loop``: a body applied while a predicate holds, for a number of steps known only at
run time (JAX's ``lax.while_loop``, ONNX's ``Loop``, ND4J's ``whileLoop``) — and differentiable
in reverse mode, which JAX refuses and ND4J cannot do.

One op of the table, ``while_loop(*carry, *captures, cond=, body=, num_carry=,
max_iterations=, checkpoint=)``. ``cond`` maps ``(carry leaves, captures)`` to a bool scalar;
``body`` maps them to ``(new carry leaves, per-step output leaves)``; the op returns the final
carry and the per-step outputs stacked along a new leading axis whose length is the trip count
(ONNX ``Loop``'s scan outputs; ``nd.while_loop`` has none). ``max_iterations`` (-1: none)
stops the loop after that many steps even if ``cond`` still holds (ONNX's trip count ``M``).

Gradients, chosen per node by ``checkpoint``:

* ``checkpoint=0`` (the default): save every carry. The gradient re-runs the loop with a body
  that also stacks the carry entering each step, then scans the body's VJP backwards over
  them — ``scan``'s gradient with the trip count taken from the saved carries. Memory
  O(T · carry); one extra forward pass; differentiable again (it is made of loops).
* ``checkpoint=k``: keep at most ``k`` carries (besides the initial one) and recompute the
  rest: one pass counts the trip count ``T``, then binomial checkpointing (Griewank's
  ``revolve`` schedule, ``reverse_with_checkpoints``) reverses the ``T`` steps. With ``r`` the
  least integer such that ``C(k + 1 + r, r) >= T``, each step is recomputed at most ``r``
  times: ``k = 10`` reverses 1,000 steps with at most 4 evaluations of each (3.6 on
  average), 10,000 with 6 (5.5); with the forward pass and the counting pass, the gradient
  costs about 6 and 8 forward passes. Memory O(k · carry). This gradient is not
  differentiable again.

>>> import nd4py as nd
>>> halve = lambda v: while_loop(lambda x: x.sum() > 1.0, lambda x: x * 0.5, v)
>>> halve(nd.create([3.0, 5.0])).numpy().tolist()  # 8 -> 4 -> 2 -> 1: three halvings
[0.375, 0.625]
>>> nd.grad(lambda v: halve(v).sum())(nd.create([3.0, 5.0])).numpy().tolist()
[0.125, 0.125]
"""
from __future__ import annotations

from math import comb
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np

from ..array import CURRENT_TRACE, NDArray, bind, type_of
from ..compiler.loop_kernels import describe as describe_loop, run_loop
from ..errors import GradientError, OpError
from ..ir import Graph
from ..ops import REQUIRED, Attr, TensorType, define
from ..ops.call import op as _op
from .bodies import (align_captures, body_types, flatten, is_symbolic, keeping_outer_graphs,
                     operand_type, run_body, trace_body, unflatten)
from .cond import check_predicate, samediff_tracer
from .loops import CarryError, backward_body, check_carry, check_structure, loop_gradient


# -- the op: types, run, gradient ---------------------------------------------------------------

def _types(types: Sequence[TensorType], attrs: Any) -> tuple[list[TensorType], list]:
    """(carry types, per-step output types) of the loop (``attrs``: the node's) on inputs of
    ``types``."""
    nc = attrs.num_carry
    if not 0 < nc <= len(types):
        raise OpError(f"while_loop: num_carry={nc} must be between 1 and the number of inputs "
                      f"({len(types)})")
    if attrs.max_iterations < -1 or attrs.checkpoint < 0:
        raise OpError(f"while_loop: max_iterations must be >= 0 (or -1: none) and checkpoint "
                      f">= 0, got {attrs.max_iterations} and {attrs.checkpoint}")
    carry = list(types[:nc])
    detail = f" ({nc} carry, {len(types) - nc} captured)"
    outs = {which: body_types(body, types, "while_loop", f"the {which}", detail)
            for which, body in (("cond", attrs.cond), ("body", attrs.body))}
    if len(outs["cond"]) != 1:
        raise OpError(f"while_loop: the cond returns {len(outs['cond'])} values; it returns "
                      f"one bool scalar")
    check_predicate(outs["cond"][0], "while_loop: the cond", kinds="b")
    if len(outs["body"]) < nc:
        raise CarryError(f"while_loop: the body returns {len(outs['body'])} output(s), fewer "
                         f"than its {nc} carry leaves")
    check_carry(carry, outs["body"], "while_loop")
    ys = outs["body"][nc:]
    if ys and attrs.checkpoint:
        raise OpError("while_loop: checkpoint=k needs a loop without per-step outputs (their "
                      "gradients need every step's values); use checkpoint=0")
    return [TensorType(a.shape, a.dtype) for a in carry], ys


def _infer(types: list[TensorType], attrs: Any) -> list[TensorType]:
    carry, ys = _types(types, attrs)
    return carry + [TensorType((-1, *y.shape), y.dtype) for y in ys]


def _steps(cond: Graph, body: Graph, carry: list, caps: list, limit: int):
    """The carries entering each step and each step's outputs, lazily, until ``cond`` fails
    or ``limit`` steps (-1: no limit) ran."""
    t = 0
    while (limit < 0 or t < limit) and bool(np.asarray(run_body(cond, [*carry, *caps])[0])):
        outs = run_body(body, [*carry, *caps])
        yield carry, outs
        carry = outs[:len(carry)]
        t += 1


def _impl(*vals: Any, **attrs: Any) -> Any:
    cond, body, nc = attrs["cond"], attrs["body"], attrs["num_carry"]
    whole = run_loop(cond, body, vals, nc, 0, -1, False, attrs["max_iterations"])
    if whole is not None:  # compiled whole: every step in one Numba function
        out = whole[0] + whole[1]
        return tuple(out) if len(out) > 1 else out[0]
    carry, caps = [np.asarray(v) for v in vals[:nc]], list(vals[nc:])
    ys: list[list] = []
    for _, outs in _steps(cond, body, carry, caps, attrs["max_iterations"]):
        carry = [np.asarray(o) for o in outs[:nc]]
        ys.append(outs[nc:])
    out = [c.copy() if any(c is v for v in vals) else c for c in carry]
    if len(body.outputs) > nc:
        if ys:
            out += [np.stack([y[k] for y in ys]) for k in range(len(ys[0]))]
        else:  # no step ran: empty per-step outputs of the types the body gives
            _, types = _types([type_of(v) for v in vals], SimpleNamespace(**attrs))
            out += [np.empty((0, *[max(d, 0) for d in t.shape]), t.dtype) for t in types]
    return tuple(out) if len(out) > 1 else out[0]


def _grad(ins: list, outs: list, gs: list, attrs: Any) -> list:
    nc = attrs.num_carry
    common = {"cond": attrs.cond, "num_carry": nc, "max_iterations": attrs.max_iterations}
    if not attrs.checkpoint:
        def forward(entering_body: Graph) -> Any:
            return bind(WHILE, list(ins), {**common, "body": entering_body, "checkpoint": 0})
        return loop_gradient(ins, outs, gs, attrs.body, nc, 0, -1, False, forward)
    float_in = [x.dtype.kind == "f" for x in ins]
    if not any(float_in) or not any(o.dtype.kind == "f" for o in outs):
        return [None] * len(ins)
    gs = [g if g is not None else _op.zeros_like(o) for g, o in zip(gs, outs)]
    back, caps = backward_body(attrs.body, nc, 0, float_in)
    res = bind(WHILE_GRAD, [*ins, *gs[:nc]], {**common, "body": attrs.body, "backward": back,
                                              "checkpoint": attrs.checkpoint})
    res = list(res) if isinstance(res, tuple) else [res]
    grads: list = [res[k] if float_in[k] else None for k in range(nc)]
    grads += [None] * (len(ins) - nc)
    for j, k in enumerate(caps):
        grads[k] = res[nc + j]
    return grads


WHILE = define(
    "while_loop", ("*carry_captures",), _infer, _impl, namespace="control", method=False,
    attrs={"cond": (Attr.GRAPH, REQUIRED), "body": (Attr.GRAPH, REQUIRED),
           "num_carry": (Attr.INT, REQUIRED), "max_iterations": (Attr.INT, -1),
           "checkpoint": (Attr.INT, 0)},
    bodies=("cond", "body"), grad=_grad, value_shaped=True,  # (the per-step outputs' length)
    route=lambda types, a: describe_loop(a.cond, a.body, types, a.num_carry, 0),
    doc="while_loop(*carry, *captures): the body applied while cond holds (at most "
        "max_iterations times); returns (final carry..., stacked per-step outputs...). The "
        "functional form is nd.while_loop(cond_fun, body_fun, init).")


# -- the checkpointed gradient --------------------------------------------------------------------

def binomial_split(steps: int, slots: int) -> int:
    """Where to put the next checkpoint when reversing ``steps`` steps from a stored carry with
    ``slots`` free checkpoint slots (``steps >= 2``, ``slots >= 1``): Griewank's binomial rule.
    ``r``, the least repetition number with ``C(slots + 1 + r, r) >= steps``, bounds how often a
    step is recomputed; the first ``C(slots + r, r - 1)`` steps are left for later (reversed
    with every slot and one repetition fewer), the rest reversed first with one slot fewer.

    >>> binomial_split(10, 1), binomial_split(1000, 10)
    (6, 364)
    """
    r = 1
    while comb(slots + 1 + r, r) < steps:
        r += 1
    return min(max(comb(slots + r, r - 1), 1), steps - 1)


def reverse_with_checkpoints(advance: Callable[[Any, int], Any],
                             step_back: Callable[[Any, Any], Any], start: Any, steps: int,
                             slots: int, cotangent: Any) -> Any:
    """Reverse ``steps`` steps of a loop from its carry ``start``: the cotangent after the
    last step, pulled back through every step by ``step_back(carry entering the step,
    cotangent after it) -> cotangent before it``, storing at most ``slots`` carries besides
    ``start``; the carries a step needs are recomputed from the nearest stored one by
    ``advance(carry, n)`` (the carry ``n`` steps later: one compiled loop call when the body
    compiles whole).

    >>> seen = []
    >>> reverse_with_checkpoints(lambda c, n: c + n, lambda c, g: seen.append(c) or g * 2,
    ...                          0, 5, 2, 1), seen
    (32, [4, 3, 2, 1, 0])
    """
    stack = [(0, start)]  # stored carries: (the step they enter, the carry), nearest on top
    end = steps  # the steps before ``end`` are still to reverse
    while end > 0:
        at, carry = stack[-1]
        free = slots - (len(stack) - 1)
        if end - at == 1:
            cotangent = step_back(carry, cotangent)
            end = at
            if len(stack) > 1:
                stack.pop()
            continue
        if free == 0:  # no slot: recompute the carry entering the last step from the nearest
            cotangent = step_back(advance(carry, end - 1 - at), cotangent)
            end -= 1
            continue
        split = binomial_split(end - at, free)
        stack.append((at + split, advance(carry, split)))
    return cotangent


def _grad_types(types: list[TensorType], attrs: Any) -> list[TensorType]:
    nc = attrs.num_carry
    ins = types[:len(types) - nc]
    _types(ins, attrs)
    return list(ins[:nc]) + [t for t in ins[nc:] if t.dtype.kind == "f"]


def _grad_impl(*vals: Any, cond: Graph, body: Graph, backward: Graph, num_carry: int,
               max_iterations: int, checkpoint: int) -> Any:
    nc = num_carry
    n_in = len(vals) - nc
    init, caps, cts = list(vals[:nc]), list(vals[nc:n_in]), list(vals[n_in:])
    whole = run_loop(cond, body, [*init, *caps], nc, 0, -1, False, max_iterations)
    steps = whole[2] if whole is not None else sum(
        1 for _ in _steps(cond, body, init, caps, max_iterations))
    accs = [np.zeros_like(c) for c in caps if np.asarray(c).dtype.kind == "f"]

    def advance(carry: list, n: int) -> list:
        if n:  # the body as a scan of n steps (compiled whole when it fuses)
            whole = run_loop(None, body, [*carry, *caps], nc, 0, n, False, -1)
            if whole is not None:
                return whole[0]
        for _ in range(n):
            carry = run_body(body, [*carry, *caps])[:nc]
        return carry

    def step_back(carry: list, state: list) -> list:
        return run_body(backward, [*state, *carry, *caps])
    out = reverse_with_checkpoints(advance, step_back, init, steps, checkpoint, [*cts, *accs])
    out = [np.array(o, copy=True) if any(o is v for v in vals) else np.asarray(o) for o in out]
    return tuple(out) if len(out) > 1 else out[0]


def _no_second_order(ins: list, outs: list, gs: list, attrs: Any) -> list:
    raise GradientError("while_loop(checkpoint=k): its gradient recomputes carries and is not "
                        "differentiable again; use checkpoint=None (save every carry) for "
                        "higher derivatives")


WHILE_GRAD = define(
    "while_loop_grad", ("*carry_captures_cotangents",), _grad_types, _grad_impl,
    namespace="control", method=False,
    attrs={"cond": (Attr.GRAPH, REQUIRED), "body": (Attr.GRAPH, REQUIRED),
           "backward": (Attr.GRAPH, REQUIRED), "num_carry": (Attr.INT, REQUIRED),
           "max_iterations": (Attr.INT, -1), "checkpoint": (Attr.INT, REQUIRED)},
    bodies=("cond", "body", "backward"), grad=_no_second_order,
    doc="while_loop_grad(*carry, *captures, *cotangents): the gradient of a while_loop with "
        "checkpoint=k (binomial checkpointing: at most k saved carries); returns the "
        "gradients of the initial carry and of the float captures.")


# -- the functional form ------------------------------------------------------------------------

def while_loop(cond_fun: Callable[[Any], Any] | Sequence[Any],
               body_fun: Callable[[Any], Any] | None = None, init_val: Any = None,
               max_iterations: int | None = None, *, checkpoint: int | None = None,
               cond: Graph | None = None, body: Graph | None = None,
               num_carry: int | None = None) -> Any:
    """``val = body_fun(val)`` while ``cond_fun(val)``, starting from ``init_val``, as JAX's
    ``lax.while_loop``; returns the final ``val``. ``val`` is a pytree (tuples, lists, dicts)
    of arrays whose structure, shapes and dtypes the body keeps (``CarryError``); ``cond_fun``
    returns a bool scalar. ``max_iterations``: stop after that many steps even if
    ``cond_fun`` still holds.

    Eagerly (concrete values, no trace) this is a Python loop. Inside ``nd.graph_scope()`` /
    ``@nd.compile`` or on SameDiff variables both functions are recorded once into bodies
    (values they close over are captured, as in ``nd.cond``) and one ``while_loop`` node is
    recorded: its trip count is decided when it runs, so one plan serves every trip count.
    It differentiates in reverse mode: ``checkpoint=None`` saves every carry (memory O(T));
    ``checkpoint=k`` keeps at most ``k`` and recomputes the rest (memory O(k); see the module
    docstring for the cost).

    >>> import nd4py as nd
    >>> def sqrt(a):  # Newton's iteration until converged
    ...     step = lambda x: 0.5 * (x + a / x)
    ...     return while_loop(lambda x: ((step(x) - x).abs() > 1e-12).any(), step, a)
    >>> round(float(sqrt(nd.create(2.0)).numpy()), 6)
    1.414214
    >>> round(float(nd.grad(sqrt)(nd.create(2.0)).numpy()), 6)  # 1 / (2 sqrt(2))
    0.353553

    ``while_loop([*carry, *captures], cond=g, body=h, num_carry=n, max_iterations=-1,
    checkpoint=0)`` applies body graphs directly (the op itself, as a saved graph holds it).
    """
    if body is not None or cond is not None:  # the op: while_loop([*carry, *captures])
        return bind(WHILE, list(cond_fun), {  # type: ignore[arg-type]
            "cond": cond, "body": body, "num_carry": num_carry,
            "max_iterations": -1 if max_iterations is None else max_iterations,
            "checkpoint": checkpoint or 0})
    if not (callable(cond_fun) and callable(body_fun)):
        raise OpError("while_loop(cond_fun, body_fun, init_val): cond_fun and body_fun must be "
                      "callables")
    limit = -1 if max_iterations is None else _count("max_iterations", max_iterations, 0)
    slots = 0 if checkpoint is None else _count("checkpoint", checkpoint, 1)
    leaves, structure = flatten(init_val)
    leaves = [x if isinstance(x, NDArray) or is_symbolic(x) else NDArray(np.asarray(x))
              for x in leaves]
    if CURRENT_TRACE.get() is None and not any(is_symbolic(x) for x in leaves):
        return _eager(cond_fun, body_fun, leaves, structure, limit, slots)
    return _record(cond_fun, body_fun, leaves, structure, limit, slots)


def _count(what: str, value: Any, least: int) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < least:
        raise OpError(f"while_loop: {what} must be an int >= {least} (or None), got {value!r}")
    return int(value)


def _eager(cond_fun: Callable, body_fun: Callable, leaves: list, structure: Any, limit: int,
           slots: int) -> Any:
    val = unflatten(structure, leaves)
    types = [operand_type(x) for x in leaves]
    t = 0
    while limit < 0 or t < limit:
        pred = cond_fun(val)
        if is_symbolic(pred):  # cond reads a recorded value it closes over: the rest records
            rest = -1 if limit < 0 else limit - t
            return _record(cond_fun, body_fun, flatten(val)[0], structure, rest, slots)
        check_predicate(operand_type(pred), "while_loop: cond_fun", kinds="b")
        if not bool(np.asarray(pred.numpy() if isinstance(pred, NDArray) else pred)):
            break
        val = body_fun(val)
        new_leaves, new_structure = flatten(val)
        check_structure(new_structure, structure, "while_loop")
        check_carry(types, [operand_type(x) for x in new_leaves], "while_loop")
        t += 1
    return val


def _record(cond_fun: Callable, body_fun: Callable, leaves: list, structure: Any, limit: int,
            slots: int, name: str | None = None) -> Any:
    types = [operand_type(x) for x in leaves]

    def cond_step(*xs: Any) -> Any:
        return cond_fun(unflatten(structure, xs))

    def body_step(*xs: Any) -> tuple:
        new_leaves, new_structure = flatten(body_fun(unflatten(structure, xs)))
        check_structure(new_structure, structure, "while_loop")
        return tuple(new_leaves)
    with keeping_outer_graphs(leaves):
        cond_g, cond_s, cond_c = trace_body(cond_step, types, "while_loop: cond_fun",
                                            freeze=False)
        if cond_s != "*":
            raise OpError("while_loop: cond_fun must return one bool scalar, got a "
                          "tuple/list/dict")
        body_g, _, body_c = trace_body(body_step, types, "while_loop: body_fun", freeze=False)
        (cond_g, body_g), captured = align_captures([(cond_g, cond_c), (body_g, body_c)])
        out = bind(WHILE, [*leaves, *captured],
                   {"cond": cond_g, "body": body_g, "num_carry": len(leaves),
                    "max_iterations": limit, "checkpoint": slots}, name)
    return unflatten(structure, out if isinstance(out, tuple) else (out,))


# -- ND4J's form --------------------------------------------------------------------------------

def while_loop_nd4j(sd: Any, out_names: Sequence[str] | None, loop_name: str | None,
                    loop_vars: Sequence[Any], cond: Callable, body: Callable) -> list:
    """ND4J's ``sd.whileLoop(outputNames, loopName, loopVars, cond, body)``: ``cond(sd,
    inputs)`` returns a BOOL scalar, ``body(sd, inputs)`` one new value per loop variable;
    each lambda records into a SameDiff of its own, on placeholders typed like ``loopVars``
    (a lambda reads only those: pass every value the loop needs as a loop variable). Returns
    the final values, named ``outputNames`` when given."""
    loop_vars = list(loop_vars)
    if not loop_vars:
        raise OpError("whileLoop: loopVars is empty; a loop needs at least one loop variable")
    if out_names is not None and len(out_names) != len(loop_vars):
        raise OpError(f"whileLoop: {len(out_names)} output name(s) for {len(loop_vars)} loop "
                      f"variables")
    types = [operand_type(x) for x in loop_vars]
    hint = "whileLoop's loopVars"
    saved = sd.graph.copy()
    try:
        cond_g, cond_s, _ = samediff_tracer(type(sd), cond, types, "whileLoop: cond", hint)()
        if cond_s != "*":
            raise OpError("whileLoop: the cond lambda must return one BOOL scalar variable")
        check_predicate(cond_g.vars[cond_g.outputs[0]].ttype, "whileLoop: cond", kinds="b")
        body_g, _, _ = samediff_tracer(type(sd), body, types, "whileLoop: body", hint)()
        if len(body_g.outputs) != len(loop_vars):
            raise CarryError(f"whileLoop: the body returns {len(body_g.outputs)} value(s) for "
                             f"{len(loop_vars)} loop variables")
        name = loop_name if out_names is None else out_names[0]
        out = bind(WHILE, loop_vars, {"cond": cond_g.freeze(), "body": body_g.freeze(),
                                      "num_carry": len(loop_vars)}, name)
        out = list(out) if isinstance(out, tuple) else [out]
        for k, (value, wanted) in enumerate(zip(out, out_names or ())):
            if k and value.name != wanted:
                sd.graph.rename(value.name, wanted)
                out[k] = sd.get_variable(wanted)
        return out
    except Exception:
        sd.graph.restore_from(saved)
        raise
