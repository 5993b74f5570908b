"""Bodies: a Python function recorded as a graph (a control-flow branch or loop body), and a
body run through the plan cache.

``trace_body`` records a function once, on placeholders typed like its operands, into a fresh
``ir.Graph`` whose ``outputs`` signature is what the function returned — the same code whether
the operands are traced arrays (``graph_scope`` / ``@nd.compile``), SameDiff variables or the
values of an enclosing body. While a body records, no trace is active: an op on closed-over
eager arrays runs eagerly and its result becomes a CONSTANT of the body. A value of an *outer*
graph (a traced array, a SameDiff variable, an enclosing body's value) read by a body is
captured: lifted into an input of the body, which the op recording the body passes as an
operand (``BodyRecorder``, ``align_captures``).

``run_body`` runs a frozen body on arrays: one plan from the one plan cache (``get_plan``
through ``execution.typed_plan``, keyed by the body's structure and the inputs' exact types), so
a body gets fused kernels like any graph, and the interpreter when the compiler declines.

>>> import numpy as np
>>> from samediff.ops import TensorType
>>> body, tree, captures = trace_body(lambda x: (x * 2.0).exp(),
...                                   [TensorType((2,), np.dtype("float64"))], "example")
>>> body.inputs, body.outputs, [n.op.name for n in body.nodes]
(('x0',), ('exp',), ['mul', 'exp'])
>>> np.round(run_body(body, [np.zeros(2)])[0], 3).tolist()
[1.0, 1.0]
"""
from __future__ import annotations

import contextlib
import weakref
from typing import Any, Callable, Hashable, Iterator, Sequence

import numpy as np

from ..array import ACTIVE_BODY, CURRENT_TRACE, NDArray, as_numpy, type_of
from ..arg_kinds import WEAK_SCALARS
from ..compiler import get_executor
from ..compiler.cache import PLAN_CACHE, Structure
from ..compiler.tiered import get_compile_mode
from ..errors import GraphError, OpError
from ..ir import Graph, VariableType
from ..ops import TensorType
from ..recorder import GraphRecorder, GraphValue
from ..execution import runtime_type, typed_plan
from ..surface import OpSurface


class CaptureError(GraphError):
    """A body read a value of an outer graph (a traced array of the enclosing ``graph_scope``,
    a SameDiff variable) that was not passed to it as an operand."""


class BranchMismatchError(OpError):
    """The branches of a ``cond`` return different structures, shapes or dtypes."""


class PredicateError(OpError):
    """A ``cond`` predicate that is not a scalar boolean (or, for ``nd.cond``, integer)."""


# -- operands ---------------------------------------------------------------------------------

def is_symbolic(x: Any) -> bool:
    """Is ``x`` a value being recorded: a graph variable (SameDiff, a body) or a traced array
    still waiting for its value?"""
    if isinstance(x, GraphValue):
        return True
    return isinstance(x, NDArray) and getattr(x, "is_materialized", True) is False


def operand_type(x: Any) -> TensorType:
    """The static type a body's placeholder takes for the operand ``x``."""
    if isinstance(x, GraphValue):
        return x.ttype
    if isinstance(x, NDArray):  # eager, or traced (a LazyArray answers shape/dtype)
        return TensorType(tuple(x.shape), np.dtype(x.dtype))
    if type(x) in WEAK_SCALARS:
        return type_of(x)
    if isinstance(x, OpSurface) or x is None:
        raise OpError(f"cannot use {type(x).__name__} {x!r} as an operand")
    return type_of(as_numpy(x))


def capture_error(what: str, x: Any) -> CaptureError:
    label = repr(x.name) if isinstance(x, GraphValue) else "a traced array"
    return CaptureError(
        f"{what}: the body reads {label} of an enclosing graph that is not one of its operands; "
        f"pass it as an operand (nd.cond(pred, true_fn, false_fn, *operands) hands the operands "
        f"to both branches). Closed-over eager arrays are fine: they become constants of the "
        f"body")


# -- pytrees of outputs -----------------------------------------------------------------------

def flatten(tree: Any) -> tuple[list, Hashable]:
    """Leaves of nested tuples/lists/dicts (JAX's pytrees, minus custom nodes) and the tree's
    structure, a hashable description used to compare branches and rebuild results."""
    if isinstance(tree, (tuple, list)):
        leaves: list = []
        subs = []
        for item in tree:
            sub_leaves, sub = flatten(item)
            leaves += sub_leaves
            subs.append(sub)
        return leaves, (type(tree).__name__, tuple(subs))
    if isinstance(tree, dict):
        keys = sorted(tree)
        leaves, subs = [], []
        for k in keys:
            sub_leaves, sub = flatten(tree[k])
            leaves += sub_leaves
            subs.append(sub)
        return leaves, ("dict", tuple(keys), tuple(subs))
    return [tree], "*"


def unflatten(structure: Hashable, leaves: Sequence[Any]) -> Any:
    """The inverse of ``flatten``."""
    it = iter(leaves)

    def build(s: Any) -> Any:
        if s == "*":
            return next(it)
        if s[0] == "dict":
            return {k: build(sub) for k, sub in zip(s[1], s[2])}
        items = [build(sub) for sub in s[1]]
        return tuple(items) if s[0] == "tuple" else items
    return build(structure)


def describe_structure(structure: Hashable) -> str:
    if structure == "*":
        return "one array"
    if structure[0] == "dict":
        return f"a dict with keys {list(structure[1])}"
    return f"a {structure[0]} of {len(structure[1])}"


# -- recording --------------------------------------------------------------------------------

class BodyRecorder(GraphRecorder):
    """Records a body. A value of an enclosing graph among an op's inputs (a SameDiff variable,
    a traced array, a value of an enclosing body) is *captured*: lifted into an input of the
    body (a placeholder ``capture...``, one per outer value), listed in ``captures``; the op
    recording the body passes the outer values as operands, so they are explicit inputs of
    its node and gradients reach them."""

    def __init__(self, graph: Graph, what: str) -> None:
        super().__init__(graph)
        self.what = what
        self.captures: list[tuple[Any, str]] = []  # (outer value, its input), in input order
        self._lifted: dict[int, str] = {}  # id(outer value) -> its input (captures holds it)

    def outer(self, x: Any) -> bool:
        return (isinstance(x, GraphValue) and not self.owns(x)) or (
            not isinstance(x, GraphValue) and is_symbolic(x))

    def lift(self, x: Any) -> str:
        """The input standing for the outer value ``x`` (added on its first use)."""
        name = self._lifted.get(id(x))
        if name is None:
            name = self.graph.unique("capture")
            self.graph.add_var(name, VariableType.PLACEHOLDER, operand_type(x))
            self._lifted[id(x)] = name
            self.captures.append((x, name))
        return name

    def _type(self, op: Any, x: Any) -> TensorType:
        if self.outer(x):
            return self.graph.vars[self.lift(x)].ttype
        return super()._type(op, x)

    def _input_name(self, op: Any, x: Any, reserved: tuple[str, ...]) -> str:
        if self.outer(x):
            return self.lift(x)
        return super()._input_name(op, x, reserved)


def trace_body(fn: Callable[..., Any], types: Sequence[TensorType], what: str, *,
               samediff: Callable[[], Any] | None = None,
               freeze: bool = True) -> tuple[Graph, Hashable, list]:
    """Record ``fn`` on placeholders ``x0, x1...`` of ``types`` into a new graph whose
    ``outputs`` are its results; returns the graph (frozen unless ``freeze=False``), the
    results' pytree structure and the captures (``BodyRecorder``: (outer value, input name)
    pairs), whose inputs follow ``x0, x1...``.

    ``samediff``: make a fresh ``SameDiff`` and call ``fn(sd, [placeholders])`` on it instead
    (ND4J's ``ifCond`` lambdas), recording into that SameDiff's graph (no captures: ND4J's
    lambdas read the ``inputs`` they are given)."""
    token = CURRENT_TRACE.set(None)  # ops of closed-over eager values run (become constants)
    rec = None
    try:
        if samediff is None:
            rec = BodyRecorder(Graph(), what)
            args = [rec.add(VariableType.PLACEHOLDER, t, f"x{i}") for i, t in enumerate(types)]
            body_token = ACTIVE_BODY.set(rec)
            try:
                result = fn(*args)
            finally:
                ACTIVE_BODY.reset(body_token)
            graph, owns = rec.graph, rec.owns
        else:
            sd = samediff()
            args = [sd.placeholder(f"x{i}", t.dtype, *t.shape) for i, t in enumerate(types)]
            result = fn(sd, args)
            graph = sd.graph.copy()
            owns = (lambda v: getattr(v, "sd", None) is sd)
    finally:
        CURRENT_TRACE.reset(token)
    leaves, structure = flatten(result)
    names = []
    for leaf in leaves:
        if isinstance(leaf, GraphValue) and owns(leaf):
            names.append(leaf.name)
        elif rec is not None and rec.outer(leaf):  # an outer value returned as it is
            names.append(rec.lift(leaf))
        elif is_symbolic(leaf):
            raise capture_error(what, leaf)
        elif leaf is None or isinstance(leaf, OpSurface) and not isinstance(leaf, NDArray):
            raise OpError(f"{what}: returned {type(leaf).__name__} {leaf!r}; a body returns "
                          f"arrays (or tuples/lists/dicts of them)")
        else:  # an eager value: a constant of the body
            arr = as_numpy(leaf).copy()
            name = graph.unique("constant")
            graph.add_var(name, VariableType.CONSTANT, TensorType(arr.shape, arr.dtype), arr)
            names.append(name)
    if not names:
        raise OpError(f"{what}: returned no arrays; a body returns at least one")
    graph.set_outputs(*names)
    return (graph.freeze() if freeze else graph), structure, (rec.captures if rec else [])


@contextlib.contextmanager
def keeping_outer_graphs(values: Sequence[Any]) -> Iterator[None]:
    """Restore the SameDiff graphs of ``values`` if the block raises: recording a control-flow
    node leaves nothing behind when a body or the node's type check fails."""
    graphs = {id(x.sd.graph): x.sd.graph for x in values
              if isinstance(x, GraphValue) and hasattr(x, "sd")}
    saved = [(g, g.copy()) for g in graphs.values()]
    try:
        yield
    except BaseException:
        for graph, copy in saved:
            graph.restore_from(copy)
        raise


def align_captures(traced: Sequence[tuple[Graph, list]]) -> tuple[list[Graph], list]:
    """Bodies that must take the same inputs (the branches of one node), each with its captures
    (``trace_body``'s third result, the body not yet frozen): every body gets an input for every
    captured value, in one order after the operands (unused where its own code does not read
    it). Returns the frozen bodies and the captured values, to pass after the operands."""
    union: list = []
    for _, captures in traced:
        for x, _ in captures:
            if not any(x is y for y in union):
                union.append(x)
    bodies = []
    for graph, captures in traced:
        by_value = {id(x): name for x, name in captures}
        names = []
        for x in union:
            name = by_value.get(id(x))
            if name is None:  # a value another body captured: an input this one ignores
                name = graph.unique("capture")
                graph.add_var(name, VariableType.PLACEHOLDER, operand_type(x))
            names.append(name)
        graph.order_inputs([n for n in graph.inputs if n not in names] + names)
        bodies.append(graph.freeze())
    return bodies, union


# -- typing -----------------------------------------------------------------------------------

def body_types(body: Graph, types: Sequence[TensorType], what: str, which: str,
               detail: str = "") -> list[TensorType]:
    """The output types of ``body`` (``which`` names it in ``what``'s errors: "the body", "the
    true branch") applied to inputs of ``types``; ``detail`` says what those inputs are."""
    if len(body.inputs) != len(types):
        raise OpError(f"{what}: {which} takes {len(body.inputs)} input(s), got {len(types)}"
                      f"{detail}")
    try:
        known = body.retype(dict(zip(body.inputs, types)))
    except OpError as err:
        raise type(err)(f"{what}: in {which}: {err}") from None
    return [known[o] for o in body.outputs]


# -- running ----------------------------------------------------------------------------------

class _Runner:
    """What running one frozen body needs, computed once per body object, and its plans per
    input signature (a memo in front of the plan cache: a loop runs its body thousands of
    times with the same types)."""

    def __init__(self, body: Graph) -> None:
        self.outputs = list(body.outputs)
        self.nodes = body.needed(self.outputs)
        used = {i for n in self.nodes for i in n.inputs} | set(self.outputs)
        self.inputs = [(n, n in used, body.vars[n]) for n in body.inputs]
        self.constants = {n: (v.value.item() if v.ttype.weak else v.value)
                          for n, v in body.vars.items() if v.value is not None and n in used}
        self.vars = {n: body.vars[n] for n in used}
        self.structure = Structure.of(self.nodes)
        self.weak = [var.ttype.weak for _, _, var in self.inputs]
        self.plans: dict[tuple, tuple] = {}  # signature -> (plan, where each plan input is)
        self.generation = PLAN_CACHE.generation

    def plan_for(self, args: Sequence[Any]) -> tuple[Any, list[tuple[bool, Any]]]:
        """The plan for inputs like ``args`` and, per plan input in order, (True, the index
        in ``args``) or (False, a constant's value)."""
        sig = (get_executor(), get_compile_mode(), *[
            (a.shape, a.dtype) if type(a) is np.ndarray else (np.shape(a), type(a))
            for a in args])
        if self.generation != PLAN_CACHE.generation:  # nd.clear_cache() ran
            self.plans.clear()
            self.generation = PLAN_CACHE.generation
        found = self.plans.get(sig)
        if found is not None:
            return found
        values: dict[str, Any] = dict(self.constants)
        index = {}
        for k, ((name, used, var), a) in enumerate(zip(self.inputs, args)):
            if used:
                values[name], index[name] = a, k
        types = {k: runtime_type(self.vars[k], v) for k, v in values.items()}
        plan = typed_plan(self.nodes, types, self.outputs, structure=self.structure)
        where = [(True, index[k]) if k in index else (False, values[k])
                 for k in plan.input_slots]
        if len(self.plans) >= 16:
            self.plans.clear()
        self.plans[sig] = found = (plan, where)
        return found


_RUNNERS: dict[int, _Runner] = {}


def _runner(body: Graph) -> _Runner:
    runner = _RUNNERS.get(id(body))
    if runner is None:
        runner = _RUNNERS[id(body)] = _Runner(body)
        weakref.finalize(body, _RUNNERS.pop, id(body), None)  # ids are reused after death
    return runner


def run_body(body: Graph, args: Sequence[Any]) -> list[Any]:
    """Run the frozen ``body`` on ``args`` (one per input, in order) through the plan cache;
    returns its outputs, never one of ``args`` or of the body's constants itself (a body
    returning an input or a constant returns a copy: the caller may write to its result)."""
    runner = _runner(body)
    if len(args) != len(runner.inputs):
        raise OpError(f"body takes {len(runner.inputs)} inputs, got {len(args)}")
    weak = runner.weak
    args = [a.item() if weak[k] and isinstance(a, np.ndarray) else a for k, a in enumerate(args)]
    plan, where = runner.plan_for(args)
    outs = plan.execute([args[v] if is_arg else v for is_arg, v in where])
    held = (*args, *runner.constants.values())  # the caller's arrays, the body's constants
    return [np.array(o, copy=True) if any(o is a for a in held) else o for o in outs]
