"""Op namespaces (``sd.math``, ``nd.nn``, ...) generated from the op table, and graph summaries.

One ``OpNamespace`` class serves SameDiff and the eager API: it only needs a function that
applies an op. Functions are resolved from the table on attribute access, so a user-defined op
registered later appears everywhere at once.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from .binding import split_call
from .losses import LossNamespace
from .ops import REGISTRY, OpDef
from .ops.registry import names_to_ops

Applier = Callable[[OpDef, list, dict, "str | None"], Any]


def ops_in(namespaces: Iterable[str] | None) -> dict[str, OpDef]:
    """Op names (with aliases and ND4J names) -> op, for the given namespaces (None = all)."""
    wanted = None if namespaces is None else set(namespaces)
    return names_to_ops(op for op in REGISTRY.values() if wanted is None or op.namespace in wanted)


def op_function(op: OpDef, apply: Applier, leading_name: bool) -> Callable[..., Any]:
    """A Python function for ``op``: ``f(*inputs, *attrs, name=None, **attrs)``.

    With ``leading_name`` a first string argument is the output name (ND4J's
    ``sd.nn.relu("hidden", x, 0)``)."""
    def function(*args: Any, **kwargs: Any) -> Any:
        if leading_name and args and isinstance(args[0], str) and "name" not in kwargs:
            kwargs["name"], args = args[0], args[1:]
        inputs, attrs, name = split_call(op, args, kwargs)
        return apply(op, inputs, attrs, name)
    function.__name__ = op.name
    function.__qualname__ = op.name
    function.__doc__ = (f"{op.doc}\n\nOp ``{op.name}``: inputs {op.inputs}, attributes "
                        f"{ {k: (v[0].name, v[1]) for k, v in op.attr_kinds.items()} }.")
    return function


class OpNamespace:
    """Attribute access returns a function applying the named op (e.g. ``ns.relu(x)``)."""

    def __init__(self, title: str, namespaces: Iterable[str] | None, apply: Applier,
                 leading_name: bool = False) -> None:
        self._title = title
        self._namespaces = None if namespaces is None else tuple(namespaces)
        self._apply = apply
        self._leading_name = leading_name
        self._cache: dict[str, Callable] = {}

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        fn = self._cache.get(name)
        if fn is None:
            op = ops_in(self._namespaces).get(name)
            if op is None:
                raise AttributeError(f"{self._title} has no op {name!r}; available: "
                                     f"{', '.join(sorted(ops_in(self._namespaces)))}")
            fn = self._cache[name] = op_function(op, self._apply, self._leading_name)
        setattr(self, name, fn)  # later lookups skip __getattr__
        return fn

    def __dir__(self) -> list[str]:
        return sorted(ops_in(self._namespaces))

    def __repr__(self) -> str:
        return f"<{self._title}: {len(ops_in(self._namespaces))} ops>"


SAMEDIFF_NAMESPACES = {"math": ("math",), "nn": ("nn",), "random": ("random",),
                       "linalg": ("linalg",), "shape": ("shape",), "base": ("base", "shape"),
                       "creation": ("creation",)}


def attach_namespaces(sd: Any) -> None:
    """Give a SameDiff its ``sd.math``/``sd.nn``/... namespaces and ``sd.ops`` (every op)."""
    for attr, namespaces in SAMEDIFF_NAMESPACES.items():
        setattr(sd, attr, OpNamespace(f"sd.{attr}", namespaces, sd._record, leading_name=True))
    sd.all_ops = OpNamespace("sd", None, sd._record, leading_name=True)  # type: ignore[attr-defined]
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
            attrs = "" if not node.attrs.__dict__ else f" {node.attrs!r}"
            lines.append(f"{i:>4}  {node.name}: {node.op.name}{attrs}"
                         f"({', '.join(node.inputs)}) -> {', '.join(node.outputs)}")
    return "\n".join(lines)
