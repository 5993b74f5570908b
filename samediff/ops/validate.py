"""Import-time checks of the op table (STYLE §8): a malformed op fails loudly at import,
not deep inside a user's graph."""
from __future__ import annotations

import keyword
from typing import Iterable

from .registry import REQUIRED, OpDef


class OpTableError(Exception):
    """The op table itself is malformed (a bug in an op definition, never a user error)."""


def check_op(op: OpDef) -> list[str]:
    """Problems with one op definition (empty list = fine)."""
    problems = []
    if not op.name.isidentifier() or keyword.iskeyword(op.name):
        problems.append("name is not a valid Python identifier")
    if not op.doc:
        problems.append("has no doc")
    if not callable(op.impl) or not callable(op.infer):
        problems.append("impl and infer must be callable")
    names = [i.lstrip("*").rstrip("?") for i in op.inputs]
    if len(set(names)) != len(names):
        problems.append(f"repeated input names {op.inputs}")
    if any(i.startswith("*") for i in op.inputs[1:]) or (op.variadic and len(op.inputs) > 1):
        problems.append("a variadic input must be the only input")
    optional = [i.endswith("?") for i in op.inputs]
    if any(optional[i] and not optional[i + 1] for i in range(len(optional) - 1)):
        problems.append("optional inputs must be trailing")
    if op.method and not op.inputs:
        problems.append("method=True needs at least one input (self)")
    if set(op.attr_kinds) & set(names):
        problems.append("an attribute has the same name as an input")
    for attr, (kind, default) in op.attr_kinds.items():
        if default is REQUIRED or default is None:
            continue
        try:
            if kind.coerce(default) != default:
                problems.append(f"default of {attr!r} is not canonical ({default!r})")
        except Exception as exc:  # noqa: BLE001 - report any failure as a table problem
            problems.append(f"default of {attr!r} is invalid for {kind}: {exc}")
    if op.grad is None:
        problems.append("has no gradient rule and is not marked non-differentiable "
                        "(use defgrad or nondifferentiable)")
    elif op.grad != "none" and not callable(op.grad):
        problems.append("grad must be a callable rule or NONDIFF")
    return problems


def validate_table(ops: Iterable[OpDef]) -> None:
    """Raise ``OpTableError`` listing every problem in the table."""
    report = [f"{op.name}: {p}" for op in ops for p in check_op(op)]
    if report:
        raise OpTableError("invalid op table:\n  " + "\n  ".join(report))
