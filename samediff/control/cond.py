"""``cond``: run one of two sub-graphs, chosen by a scalar predicate (JAX's ``lax.cond``,
ONNX's ``If``, ND4J's ``ifCond``).

One op of the table, ``cond(pred, *operands, then_body=, else_body=)``, whose bodies are
graph-valued attributes (``OpDef.bodies``): its impl runs **only** the taken body, through the
plan cache; its type rule types both bodies and checks they agree; its gradient rule is another
``cond`` over the two branches' VJP bodies, so the backward pass also evaluates only the taken
branch, and differentiates again.

``cond(pred, true_fn, false_fn, *operands)`` is the functional form (``nd.cond``): eagerly
(concrete values, no trace) it is plain Python — ``true_fn(*operands) if pred else
false_fn(*operands)``; inside ``graph_scope`` / ``@nd.compile`` or on SameDiff variables both
branches are recorded into bodies and one ``cond`` node is recorded through ``bind``.

>>> import numpy as np
>>> from samediff import SameDiff
>>> sd = SameDiff.create()
>>> x = sd.placeholder("x", np.float64, 2)
>>> y = cond(x.sum() > 0, lambda v: v * 2.0, lambda v: -v, x)
>>> sd.output({"x": np.array([1.0, 2.0])}, y.name)[y.name].numpy().tolist()
[2.0, 4.0]
>>> sd.output({"x": np.array([-1.0, -2.0])}, y.name)[y.name].numpy().tolist()
[1.0, 2.0]
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Sequence

import numpy as np

from .. import autodiff
from ..array import CURRENT_TRACE, bind, to_value
from ..errors import GraphError, OpError
from ..ir import Graph, VariableType
from ..ops import REQUIRED, Attr, TensorType, define
from ..ops.call import op as _op
from ..ops.registry import NONDIFF
from ..recorder import GraphRecorder, GraphValue
from .bodies import (BranchMismatchError, CaptureError, PredicateError, align_captures,
                     body_types, describe_structure, is_symbolic, keeping_outer_graphs,
                     operand_type, run_body, trace_body, unflatten)

_BRANCHES = (("then_body", "the true branch"), ("else_body", "the false branch"))


# -- the op: types, run, gradient ---------------------------------------------------------------

def check_predicate(t: TensorType, what: str = "cond", kinds: str = "biu") -> None:
    """A predicate is a scalar of a kind in ``kinds`` (JAX's cond: bool or integer, the latter
    meaning ``!= 0``; ND4J's ifCond: BOOL only)."""
    if t.shape != ():
        raise PredicateError(f"{what}: the predicate must be a scalar (shape ()), got {t}; "
                             f"reduce it first (e.g. x.all(), x.any(), x.sum() > 0)")
    if t.dtype.kind not in kinds:
        want = "BOOL" if kinds == "b" else "bool or an integer"
        raise PredicateError(f"{what}: the predicate must be {want}, got {t}; compare it "
                             f"first (e.g. x > 0)")


def merge_branch_types(then: list[TensorType], other: list[TensorType]) -> list[TensorType]:
    """One type per output, agreeing between the branches (an unknown dim matches any), or a
    ``BranchMismatchError`` saying which output differs and how."""
    if len(then) != len(other):
        raise BranchMismatchError(f"cond: the true branch returns {len(then)} output(s), the "
                                  f"false branch {len(other)}")
    out = []
    for k, (a, b) in enumerate(zip(then, other)):
        how = ("dtype" if a.dtype != b.dtype else "rank" if len(a.shape) != len(b.shape)
               else "shape" if any(x >= 0 and y >= 0 and x != y for x, y in zip(a.shape, b.shape))
               else None)
        if how is not None:
            raise BranchMismatchError(f"cond: output {k} differs between the branches ({how}): "
                                      f"the true branch gives {a}, the false branch {b}")
        shape = tuple(x if x == y else -1 for x, y in zip(a.shape, b.shape))
        out.append(TensorType(shape, a.dtype, a.weak and b.weak))
    return out


def _infer(types: list[TensorType], attrs: Any) -> list[TensorType]:
    check_predicate(types[0])
    then, other = (body_types(getattr(attrs, b), types[1:], "cond", which)
                   for b, which in _BRANCHES)
    return merge_branch_types(then, other)


def _impl(pred: Any, *operands: Any, then_body: Graph, else_body: Graph) -> Any:
    outs = run_body(then_body if bool(np.asarray(pred)) else else_body, operands)
    outs = [np.asarray(o) for o in outs]
    return tuple(outs) if len(outs) > 1 else outs[0]


def _differentiable_reach(body: Graph, start: str) -> set[str]:
    """The values a gradient can flow to from ``start``: through ops that are not declared
    non-differentiable, into floating-point values (autodiff's own rule)."""
    reach = {start}
    for node in body.nodes:
        if node.op.grad is not NONDIFF and any(i in reach for i in node.inputs):
            reach.update(o for o in node.outputs if body.vars[o].ttype.dtype.kind == "f")
    return reach


def vjp_body(body: Graph, wrt: Sequence[int], cotangents: Sequence[TensorType]) -> Graph:
    """The body ``(*inputs, *cotangents) -> the vector-Jacobian product for inputs[wrt]``:
    ``body`` with cotangent placeholders seeding ``autodiff.grad`` at its float outputs (an
    output returned twice gets the sum of its cotangents). An input no gradient reaches gets
    zeros (JAX's symbolic zero, made concrete)."""
    g = body.copy()
    rec = GraphRecorder(g)
    inputs = g.inputs
    cts = [rec.add(VariableType.PLACEHOLDER, t, g.unique("cotangent")) for t in cotangents]
    seeds: dict[str, Any] = {}
    for o, ct in zip(g.outputs, cts):
        if g.vars[o].ttype.dtype.kind == "f":
            seeds[o] = seeds[o] + ct if o in seeds else ct
    reached = [inputs[i] for i in wrt
               if not seeds.keys().isdisjoint(_differentiable_reach(g, inputs[i]))]
    names: dict[str, str] = {}
    if reached:
        g, names = autodiff.grad(g, list(seeds), reached, scope="vjp",
                                 seeds={o: v.name for o, v in seeds.items()})
    zeros = GraphRecorder(g)
    outs = [names[inputs[i]] if inputs[i] in names
            else _op.zeros_like(zeros.handle(inputs[i])).name for i in wrt]
    g.set_outputs(*outs)
    return g.freeze()


def _grad(ins: list, outs: list, gs: list, attrs: Any) -> list:
    operands = ins[1:]
    wrt = [k for k, x in enumerate(operands) if x.dtype.kind == "f"]
    float_out = [o.dtype.kind == "f" for o in outs]
    if not wrt or not any(float_out):
        return [None] * len(ins)
    gs = [g if g is not None else _op.zeros_like(o) for g, o in zip(gs, outs)]
    bodies = {b: vjp_body(getattr(attrs, b), wrt, [g.ttype for g in gs]) for b, _ in _BRANCHES}
    res = bind(COND, [ins[0], *operands, *gs], bodies)
    res = res if isinstance(res, tuple) else (res,)
    grads: list = [None] * len(ins)
    for k, g in zip(wrt, res):
        grads[1 + k] = g
    return grads


COND = define(
    "cond", ("*pred_operands",), _infer, _impl, namespace="control", method=False,
    attrs={"then_body": (Attr.GRAPH, REQUIRED), "else_body": (Attr.GRAPH, REQUIRED)},
    bodies=("then_body", "else_body"), grad=_grad,
    doc="cond(pred, *operands): then_body(*operands) if pred else else_body(*operands); only "
        "the taken body runs. "
        "The functional form is nd.cond(pred, true_fn, false_fn, *operands).")


# -- the functional form ------------------------------------------------------------------------

def cond(pred: Any, *args: Any, then_body: Graph | None = None,
         else_body: Graph | None = None) -> Any:
    """``true_fn(*operands) if pred else false_fn(*operands)``, as JAX's ``lax.cond``:
    ``cond(pred, true_fn, false_fn, *operands)``.

    ``pred`` is a scalar bool (or integer: non-zero is true). Eagerly (concrete values, no trace
    active) this is plain Python: only the taken branch runs. Inside ``nd.graph_scope()`` /
    ``@nd.compile``, or when ``pred`` or an operand is a SameDiff variable, both branches are
    recorded once, on placeholders typed like the operands, into sub-graphs, and one ``cond``
    node is recorded; when it runs, only the taken branch is evaluated — forward and backward.
    Both branches must return the same structure (an array, or tuples/lists/dicts of arrays)
    with equal shapes and dtypes (``BranchMismatchError`` says which output differs).

    Branches may close over eager arrays (they become constants of the branch) and over values
    of the enclosing graph — traced arrays, SameDiff variables, an enclosing body's values:
    those are *captured*, lifted into extra operands of the node (``bodies.BodyRecorder``), so
    gradients reach them; an op that reads only captured values is recorded into the branch
    too, and runs only when that branch is taken.

    ``cond(pred, *operands, then_body=g, else_body=h)`` applies two body graphs directly (the
    op itself, as a saved graph holds it).
    """
    if then_body is not None or else_body is not None:  # the op: cond([pred, *operands])
        inputs = list(pred) if isinstance(pred, (list, tuple)) and not args else [pred, *args]
        return bind(COND, inputs, {"then_body": then_body, "else_body": else_body})
    if len(args) < 2 or not (callable(args[0]) and callable(args[1])):
        raise OpError("cond(pred, true_fn, false_fn, *operands): true_fn and false_fn must be "
                      "callables")
    true_fn, false_fn, operands = args[0], args[1], list(args[2:])
    if CURRENT_TRACE.get() is None and not any(is_symbolic(x) for x in (pred, *operands)):
        check_predicate(operand_type(pred))
        return (true_fn if bool(np.asarray(to_value(pred))) else false_fn)(*operands)
    check_predicate(operand_type(pred))
    types = [operand_type(x) for x in operands]
    return _record(pred, operands, [
        lambda f=f, which=which: trace_body(f, types, f"cond: {which}", freeze=False)
        for f, (_, which) in zip((true_fn, false_fn), _BRANCHES)])


def _record(pred: Any, operands: list, tracers: list[Callable[[], tuple]],
            name: str | None = None) -> Any:
    """Trace both branches and record one ``cond`` node; an outer graph an erring branch
    recorded into (an op on closed-over variables only) is restored first."""
    with keeping_outer_graphs((pred, *operands)):
        (then_g, then_s, then_c), (else_g, else_s, else_c) = (trace() for trace in tracers)
        if then_s != else_s:
            raise BranchMismatchError(f"cond: the true branch returns "
                                      f"{describe_structure(then_s)}, the false branch "
                                      f"{describe_structure(else_s)}")
        (then_g, else_g), captured = align_captures([(then_g, then_c), (else_g, else_c)])
        out = bind(COND, [pred, *operands, *captured],
                   {"then_body": then_g, "else_body": else_g}, name)
    return unflatten(then_s, out if isinstance(out, tuple) else (out,))


# -- ND4J's form --------------------------------------------------------------------------------

def if_cond(sd: Any, out_name: str | None, if_name: str | None, cond_fn: Callable,
            true_body: Callable, false_body: Callable, inputs: Sequence[Any] = ()) -> Any:
    """ND4J's ``sd.ifCond(outName, ifName, cond, trueBody, falseBody)``: each lambda takes
    ``(sd, inputs)``; ``cond`` records a BOOL scalar into ``sd``, each body records into a
    SameDiff of its own and returns its result(s). ``inputs``: the variables of ``sd`` the
    lambdas receive (a body reads only those; see ``cond`` on captures)."""
    inputs = list(inputs)
    saved = sd.graph.copy()
    try:
        pred = cond_fn(sd, inputs)
        if not (isinstance(pred, GraphValue) and getattr(pred, "sd", None) is sd):
            raise PredicateError(f"ifCond: the cond lambda must return a variable of this "
                                 f"SameDiff, got {type(pred).__name__}")
        check_predicate(pred.ttype, "ifCond", kinds="b")
        types = [operand_type(x) for x in inputs]
        tracers = [samediff_tracer(type(sd), f, types, f"ifCond: {which}")
                   for f, (_, which) in zip((true_body, false_body), _BRANCHES)]
        with sd.graph.name_scope(if_name) if if_name else contextlib.nullcontext():
            return _record(pred, inputs, tracers, out_name)
    except Exception:
        sd.graph.restore_from(saved)
        raise


def samediff_tracer(make: Callable[[], Any], fn: Callable, types: list, what: str,
                    hint: str = "ifCond(..., inputs=[...])") -> Callable[[], tuple]:
    """A tracer of an ND4J lambda ``fn(sd, inputs)``, recording into a fresh SameDiff made by
    ``make``; a variable of the outer SameDiff read by an op of the lambda is a
    ``CaptureError`` naming ``hint``, where such variables go."""
    def trace() -> tuple:
        try:
            return trace_body(fn, types, what, samediff=make, freeze=False)
        except CaptureError:
            raise
        except GraphError as err:  # a variable of the outer SameDiff reached a body op
            raise CaptureError(f"{what}: {err}; pass the outer variables the lambdas read in "
                               f"{hint}") from err
    return trace


# -- switch: one of N branches --------------------------------------------------------------------

def switch(index: Any, branches: Sequence[Callable], *operands: Any) -> Any:
    """``branches[index](*operands)``, as JAX's ``lax.switch``: ``index`` is a scalar integer,
    clamped into ``[0, len(branches) - 1]``. Eagerly plain Python (only that branch runs);
    traced or on SameDiff variables, a chain of ``cond`` nodes — ``cond(index <= 0, b0,
    cond(index <= 1, b1, ...))``, each later test recorded inside the previous false branch —
    so only the taken branch runs, forward and backward, and gradients, compiling, saving and
    captures are ``cond``'s. Every branch returns the same structure, shapes and dtypes.

    >>> import nd4py as nd
    >>> fs = [lambda v: v + 1.0, lambda v: v * 10.0, lambda v: -v]
    >>> [switch(nd.create(i), fs, nd.create([1.0, 2.0])).numpy().tolist() for i in (0, 1, 7)]
    [[2.0, 3.0], [10.0, 20.0], [-1.0, -2.0]]
    """
    branches = list(branches)
    if not branches or not all(callable(b) for b in branches):
        raise OpError(f"switch(index, branches, *operands): branches must be a non-empty "
                      f"sequence of callables, got {branches!r}")
    t = operand_type(index)
    if t.shape != () or t.dtype.kind not in "iu":
        raise PredicateError(f"switch: the index must be a scalar integer, got {t}; "
                             f"e.g. nd.create(2), or cast a computed index with .cast('int64')")
    if CURRENT_TRACE.get() is None and not any(is_symbolic(x) for x in (index, *operands)):
        k = min(max(int(np.asarray(to_value(index))), 0), len(branches) - 1)
        return branches[k](*operands)
    if len(branches) == 1:  # (JAX too: the one branch, applied)
        return branches[0](*operands)

    def chain(k: int) -> Callable:
        if k == len(branches) - 1:
            return branches[k]
        return lambda *ops: cond(index <= k, branches[k], chain(k + 1), *ops)
    return chain(0)(*operands)
