"""Op namespaces (``sd.math``, ``nd.nn``, ...) generated from the op table, and graph summaries.

One ``OpNamespace`` class serves SameDiff and the eager API: it needs a front end (its names,
layout and argument rule, ``samediff/frontends``) and a function that applies an op. Functions
are resolved from the table on attribute access, so a user-defined op registered later appears
everywhere at once.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from .frontends import ND4J, Frontend
from .losses import LossNamespace
from .ops import OpDef

#: ``apply(op, inputs, attrs, name[, rec])``: run or record one op (``bind``); ``rec``, the
#: attribute record of ``attrs``, is passed when the front end memoizes its argument rule.
Applier = Callable[..., Any]


def op_function(op: OpDef, frontend: Frontend, apply: Applier,
                leading_name: bool) -> Callable[..., Any]:
    """A Python function for ``op``: its arguments are split by the front end's rule.

    With ``leading_name`` a first string argument is the output name (ND4J's
    ``sd.nn.relu("hidden", x, 0)``)."""
    split_call = frontend.split_call
    # hot path (bench_eager_overhead: nd.add(A, B)): exactly the op's inputs, positionally,
    # need no argument rule
    plain = (not leading_name and not op.variadic and op.min_inputs == len(op.inputs)
             and op.name not in frontend.rewritten)
    n_inputs = len(op.inputs) if plain else -1
    # the rule memoized per call form (nd.sum(x, 1)); the applier then also takes the record
    bind_arguments = None if leading_name else frontend.bind_arguments

    def function(*args: Any, **kwargs: Any) -> Any:
        if not kwargs and len(args) == n_inputs:
            return apply(op, list(args), None, None)
        if bind_arguments is not None:
            inputs, attrs, name, rec = bind_arguments(op, args, kwargs)
            return apply(op, inputs, attrs, name, rec)
        inputs, attrs, name = split_call(op, args, kwargs, leading_name)
        return apply(op, inputs, attrs, name)
    function.__name__ = op.name
    function.__qualname__ = op.name
    function.__doc__ = (f"{op.doc}\n\nOp ``{op.name}``: inputs {op.inputs}, attributes "
                        f"{ {k: (v[0].name, v[1]) for k, v in op.attr_kinds.items()} }.")
    return function


class OpNamespace:
    """Attribute access returns a function applying the named op (e.g. ``ns.relu(x)``): a
    name of ``frontend`` for an op of ``groups`` (None = every op)."""

    def __init__(self, title: str, frontend: Frontend, groups: Iterable[str] | None,
                 apply: Applier, leading_name: bool = False) -> None:
        self._title = title
        self._frontend = frontend
        self._groups = None if groups is None else tuple(groups)
        self._apply = apply
        self._leading_name = leading_name
        self._cache: dict[tuple, Callable] = {}

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        fn = self._function(name, self._groups)
        if fn is None:
            raise AttributeError(f"{self._title} has no op {name!r}; available: "
                                 f"{', '.join(sorted(self._frontend.ops_in(self._groups)))}")
        setattr(self, name, fn)  # later lookups skip __getattr__
        return fn

    def _raw_op(self, name: str) -> Callable[..., Any]:
        """The function applying op ``name`` (any op, not only this namespace's) here,
        bypassing hand-written forms of the same name (``RnnForms.lstm_layer`` calls the
        ``lstm_layer`` op, ``RnnForms.gruCell`` calls ``matmul``, through this)."""
        fn = self._function(name, None)
        if fn is None:
            raise AttributeError(f"{self._title}: no op {name!r}")
        return fn

    def _function(self, name: str, groups: tuple[str, ...] | None) -> Callable[..., Any] | None:
        """The (memoized) function of the op called ``name`` among ``groups`` (None: all)."""
        key = (name, groups)
        fn = self._cache.get(key)
        if fn is None:
            op = self._frontend.ops_in(groups).get(name)
            if op is None:
                return None
            fn = self._cache[key] = op_function(op, self._frontend, self._apply,
                                                self._leading_name)
        return fn

    def __dir__(self) -> list[str]:
        extra = [n for n in dir(type(self)) if not n.startswith("_") and n not in dir(OpNamespace)]
        return sorted({*self._frontend.ops_in(self._groups), *extra})

    def __repr__(self) -> str:
        return f"<{self._title}: {len(self._frontend.ops_in(self._groups))} ops>"


def op_namespaces(frontend: Frontend, prefix: str, apply: Applier, *, eager_only: bool = False,
                  leading_name: bool = False) -> dict[str, OpNamespace]:
    """One ``OpNamespace`` per namespace of the front end's layout (``eager_only``: only those
    the eager API shows), keyed by the namespace's name."""
    return {ns: _namespace_class(space.forms)(f"{prefix}.{ns}", frontend, space.groups, apply,
                                              leading_name)
            for ns, space in frontend.namespaces.items() if space.eager or not eager_only}


_WITH_FORMS: dict[type, type] = {}


def _namespace_class(forms: type | None) -> type:
    """``OpNamespace``, or (one class per mixin) it with a namespace's hand-written forms."""
    if forms is None:
        return OpNamespace
    cls = _WITH_FORMS.get(forms)
    if cls is None:
        cls = _WITH_FORMS[forms] = type(f"{forms.__name__}Namespace", (forms, OpNamespace), {})
    return cls


def attach_namespaces(sd: Any, record: Applier) -> None:
    """Give a SameDiff its ``sd.math``/``sd.nn``/... namespaces (the ND4J front end's layout)
    and ``sd.all_ops`` (every op), recording ops with ``record`` (its own)."""
    for attr, namespace in op_namespaces(ND4J, "sd", record, leading_name=True).items():
        setattr(sd, attr, namespace)
    sd.all_ops = OpNamespace("sd", ND4J, None, record, leading_name=True)  # type: ignore[attr-defined]
    sd.loss = LossNamespace(sd)  # type: ignore[attr-defined]


def summary_text(sd: Any) -> str:
    """Variables (name, type, shape, dtype, producing op) then ops (name, op, attrs, wiring)."""
    rows = [("Name", "Type", "Shape", "DType", "Op")]
    graph = sd.graph
    for info in graph.vars.values():
        shape = "(" + ", ".join("?" if d < 0 else str(d) for d in info.ttype.shape) + ")"
        rows.append((info.name, info.vtype.value, shape, info.ttype.dtype.name,
                     info.producer.op.name if info.producer else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [f"--- SameDiff: {len(graph.vars)} variables, {len(graph.nodes)} ops ---"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if graph.nodes:
        lines.append("--- Ops (execution order) ---")
        for i, node in enumerate(graph.nodes):
            lines.append(f"{i:>4}  {_node_line(node)}")
            lines += _body_lines(node, "        ")
    return "\n".join(lines)


def _node_line(node: Any) -> str:
    shown = {k: v for k, v in vars(node.attrs).items() if k not in node.op.bodies}
    attrs = "" if not shown else " {" + ", ".join(f"{k}={v}" for k, v in shown.items()) + "}"
    return (f"{node.name}: {node.op.name}{attrs}{node.op.describe_bodies(node.attrs)}"
            f"({', '.join(node.inputs)}) -> {', '.join(node.outputs)}")


def _body_lines(node: Any, indent: str) -> list[str]:
    """The sub-graphs a node carries (``op.bodies``), indented under it, recursively."""
    lines = []
    for name, body in node.op.body_graphs(node.attrs):
        lines.append(f"{indent}{name}({', '.join(body.inputs)}) -> {', '.join(body.outputs)}")
        for k, inner in enumerate(body.nodes):
            lines.append(f"{indent}  {k:>2}  {_node_line(inner)}")
            lines += _body_lines(inner, indent + "      ")
    return lines
