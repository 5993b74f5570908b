"""Import-time checks of the op table (STYLE §8): a malformed op fails loudly at import,
not deep inside a user's graph.

Besides the shape of each definition (names, inputs, attribute defaults, a gradient rule or an
explicit ``NONDIFF`` -- given with the op, which ``registry.register`` already insists on), the
declared facts must agree with each other:

* an elementwise op has a scalar expression (it is fusable) or says why not (``unfused=``);
  only elementwise ops (and shape adjoints such as ``broadcast_like``) have expressions, and an
  expression takes the emitter plus one argument per input;
* ``exact`` needs a scalar expression; ``unfused`` only makes sense without one;
* a view op is not elementwise (its result aliases its input), nor a reduction;
* a reduction has one input and ``dims``/``keep_dims`` attributes; only reductions declare an
  ``accumulate`` rule, and a row anchor's ``axis``/``epsilon`` name attributes it has;
* elementwise ops and reductions have one output; random ops are not differentiable;
* ``bodies`` name graph-valued (``Attr.GRAPH``) attributes.
* an ``epilogue`` names an attribute defaulting to ``"none"``; an ``activation`` is a one-input
  elementwise op whose ``when`` names attributes it has.
"""
from __future__ import annotations

import inspect
import keyword
from typing import Iterable

from .registry import NONDIFF, REQUIRED, Attr, OpDef


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
        problems.append("has no gradient rule and is not marked non-differentiable: give its "
                        "definition grad=<rule> or grad=NONDIFF")
    elif op.grad != NONDIFF and not callable(op.grad):
        problems.append("grad must be a callable rule or NONDIFF")
    return problems + check_facts(op)


def check_facts(op: OpDef) -> list[str]:
    """Problems with an op's declared flags and compiler facts (empty list = consistent)."""
    problems = []
    if op.elementwise and op.scalar is None and not op.unfused:
        problems.append("is elementwise but has no scalar expression: give it scalar=... (so the "
                        "compiler can fuse it) or unfused='<reason>'")
    if op.scalar is not None:
        if not (op.elementwise or op.shape_adjoint):
            problems.append("has a scalar expression but is not elementwise")
        elif not callable(op.scalar) or not _takes(op.scalar, 1 + len(op.inputs)):
            problems.append(f"scalar must be a callable scalar(e, {', '.join(op.inputs)})")
        if op.unfused:
            problems.append("has a scalar expression and an unfused reason; drop one")
    if op.exact and op.scalar is None:
        problems.append("exact=True needs a scalar expression")
    if op.unfused and not op.elementwise:
        problems.append("unfused= only applies to elementwise ops")
    if op.view and (op.elementwise or op.reduction):
        problems.append("a view op cannot be elementwise or a reduction")
    if op.elementwise and op.reduction:
        problems.append("cannot be both elementwise and a reduction")
    if (op.elementwise or op.reduction) and op.multi_output:
        problems.append("elementwise ops and reductions have one output")
    if op.reduction and (len(op.inputs) != 1 or not {"dims", "keep_dims"} <= set(op.attr_kinds)):
        problems.append("a reduction takes one input and the attributes dims and keep_dims")
    if op.accumulate is not None and not op.reduction:
        problems.append("accumulate= only applies to reductions")
    row = op.row_kernel
    if row is not None:
        missing = [a for a in (row.axis, row.epsilon) if a is not None and a not in op.attr_kinds]
        if missing:
            problems.append(f"row_kernel names attribute(s) {missing} the op does not have")
        if op.elementwise or op.reduction or op.multi_output:
            problems.append("a row anchor is neither elementwise nor a reduction, and has one "
                            "output")
    if op.random and op.grad not in (None, NONDIFF):
        problems.append("a random op cannot have a gradient rule")
    if op.workspace is not None and (op.attr_kinds.get(op.workspace, (None,))[0] is not Attr.BOOL
                                     or not op.multi_output):
        problems.append(f"workspace names {op.workspace!r}, which must be a BOOL attribute of a "
                        f"multi-output op")
    if op.training is not None and not callable(op.training):
        problems.append("training must be a callable form(inputs, attrs) -> (outputs, updates)")
    if op.epilogue is not None:
        kind = op.attr_kinds.get(op.epilogue)
        if kind is None:
            problems.append(f"epilogue names attribute {op.epilogue!r} the op does not have")
        elif kind[1] != "none":
            problems.append(f"the epilogue attribute {op.epilogue!r} must default to \"none\" "
                            f"(no activation)")
    act = op.activation
    if act is not None:
        if not (op.elementwise and len(op.inputs) == 1):
            problems.append("an activation is a one-input elementwise op")
        missing = [k for k, _ in act.when if k not in op.attr_kinds]
        if missing:
            problems.append(f"activation names attribute(s) {missing} the op does not have")
    for body in op.bodies:
        if op.attr_kinds.get(body, (None,))[0] is not Attr.GRAPH:
            problems.append(f"bodies names {body!r}, which is not a graph-valued (Attr.GRAPH) "
                            f"attribute of the op")
    return problems


def _takes(fn: object, n: int) -> bool:
    """Can ``fn`` be called with ``n`` positional arguments?"""
    try:
        inspect.signature(fn).bind(*range(n))  # type: ignore[arg-type]
    except TypeError:
        return False
    except ValueError:  # no signature (a builtin): cannot tell, assume yes
        return True
    return True


def validate_table(ops: Iterable[OpDef]) -> None:
    """Raise ``OpTableError`` listing every problem in the table."""
    report = [f"{op.name}: {p}" for op in ops for p in check_op(op)]
    if report:
        raise OpTableError("invalid op table:\n  " + "\n  ".join(report))
