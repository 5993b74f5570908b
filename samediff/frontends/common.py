"""What every front end is made of: a names table, a namespace layout and an argument rule,
checked against the op table when the front end is built (at import).

Tables hold plain data keyed by op name; nothing here defines or changes an op.
"""
from __future__ import annotations

import keyword
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

from ..ops import REGISTRY, OpDef
from ..ops.registry import GROUPS
from ..ops.validate import OpTableError

#: A front end's argument rule: ``(op, args, kwargs, leading_name) -> (inputs, attrs, name)``.
CallRule = Callable[[OpDef, tuple, dict, bool], "tuple[list, dict, str | None]"]


class FrontendTableError(OpTableError):
    """A front-end table is malformed: it names an op that does not exist, gives two ops one
    name, or shows an op group that does not exist (a bug in the table, never a user error)."""


@dataclass(frozen=True)
class Namespace:
    """One namespace of a front end (``sd.nn``, ``nd.base``...): the op groups it shows.

    ``eager``: the eager API shows it too (``nd.<name>``); SameDiff shows every namespace
    (``sd.<name>``)."""

    groups: tuple[str, ...]
    eager: bool = True
    #: a mixin of hand-written functions the namespace also has (``RnnForms``: ND4J's
    #: ``lstmLayer`` with its config objects), built on ``OpNamespace._raw_op``
    forms: type | None = None


@dataclass(frozen=True, eq=False)
class Frontend:
    """One front end over the op table: ``names`` maps an op's name to this front end's other
    names for it (a name or a tuple of names), ``namespaces`` is its layout, ``split_call`` its
    argument rule, ``inplace`` the ops that also get an in-place ``<name>i`` method.

    Building one checks it against the op table (``check``): a typo fails at import."""

    name: str
    names: Mapping[str, Any]
    namespaces: Mapping[str, Namespace]
    split_call: CallRule
    inplace: tuple[str, ...] = ()
    #: ops whose arguments ``split_call`` rewrites (ND4J's overloads): no fast path for them
    rewritten: frozenset[str] = frozenset()
    #: ``split_call`` without a leading name, plus the attribute record, memoized:
    #: ``(op, args, kwargs) -> (inputs, attrs, name, record)`` (None: no memoized form)
    bind_arguments: Callable[[OpDef, tuple, dict], tuple] | None = None

    def __post_init__(self) -> None:
        names = {op: (extra,) if isinstance(extra, str) else tuple(extra)
                 for op, extra in self.names.items()}
        object.__setattr__(self, "names", MappingProxyType(names))
        object.__setattr__(self, "namespaces", MappingProxyType(dict(self.namespaces)))
        problems = check(self)
        if problems:
            raise FrontendTableError(f"front end {self.name!r}: " + "; ".join(problems))

    def ops_in(self, groups: Iterable[str] | None = None) -> dict[str, OpDef]:
        """Callable names -> op for the ops of ``groups`` (None = every op, user-defined ones
        included): read from the registry on each call, so later ops appear at once."""
        wanted = None if groups is None else set(groups)
        return names_to_ops(self.names, (op for op in REGISTRY.values()
                                         if wanted is None or op.namespace in wanted))


def names_to_ops(names: Mapping[str, tuple[str, ...]], ops: Iterable[OpDef]) -> dict[str, OpDef]:
    """Callable names -> op: every op's own name, then the names ``names`` gives it.

    An op's own name always wins: a table name that has since become an op's name (a
    user-defined op registered later) resolves to that op, not to the table's.

    >>> from samediff.frontends import ND4J
    >>> from samediff.ops import REGISTRY
    >>> names_to_ops(ND4J.names, REGISTRY.values())["leakyRelu"]
    <op leaky_relu>
    """
    table = {op.name: op for op in ops}
    for op_name, extra in names.items():
        op = table.get(op_name)
        if op is None or op.name != op_name:
            continue  # the op is not among ``ops`` (another group, or not registered)
        for name in extra:
            if name not in REGISTRY:
                table.setdefault(name, op)
    return table


def check(frontend: Frontend) -> list[str]:
    """Problems with a front end's tables (empty list = fine): every op it names exists, every
    name is an identifier that no other op (and no op's own name) claims, every group exists."""
    problems = []
    claimed: dict[str, str] = {}
    for op_name, extra in frontend.names.items():
        if op_name not in REGISTRY:
            problems.append(f"names refers to op {op_name!r}, which is not in the op table")
        for name in extra:
            if not name.isidentifier() or keyword.iskeyword(name):
                problems.append(f"name {name!r} of op {op_name!r} is not a Python identifier")
            elif name in REGISTRY:
                problems.append(f"name {name!r} given to op {op_name!r} is the name of op "
                                f"{REGISTRY[name].name!r}")
            elif name in claimed:
                problems.append(f"name {name!r} is claimed by ops {claimed[name]!r} and {op_name!r}")
            claimed[name] = op_name
    for ns, space in frontend.namespaces.items():
        unknown = [g for g in space.groups if g not in GROUPS]
        if not ns.isidentifier() or unknown:
            problems.append(f"namespace {ns!r} shows unknown op group(s) {unknown}; groups are "
                            f"{GROUPS}" if unknown else f"namespace {ns!r} is not an identifier")
    for op_name in frontend.inplace:
        if op_name not in REGISTRY:
            problems.append(f"inplace refers to op {op_name!r}, which is not in the op table")
    return problems
