"""Loops compiled whole: a ``scan`` or ``while_loop`` whose bodies are elementwise work and
full reductions runs as one Numba function, every step in compiled code (no Python, no plan
call per step).

A body qualifies when every value it computes is either a *vector* — the shape ``S`` that
every array operand of the loop has (carries, scanned rows, captures), flattened to ``n``
elements — or a *scalar* (rank 0), and every node is an op with a scalar expression
(``op.scalar``: what fused kernels compute per element; float and bool values, and integer
scalars through exact arithmetic and comparisons) or a reduction of a vector to a scalar
(``op.accumulate``: sum, mean, max, min; and any/all). Anything else (a matmul, a broadcast
between different shapes, a partial reduction) leaves the loop to the per-step plans
(``samediff.control``), with identical results.

One step is a few *phases*: a phase is one pass over the ``n`` elements computing every
vector value it can, folding reductions as it goes; a value that needs a reduction's result
waits for the next phase (``x / x.sum()``: two). Scalars are computed between phases. The
carry is double-buffered (the step reads one buffer and writes the other, then they swap);
per-step outputs are written into their row; a ``while_loop`` grows them by doubling.

>>> import numpy as np
>>> from samediff.ir import Graph, VariableType
>>> from samediff.ops import TensorType
>>> from samediff.recorder import GraphRecorder
>>> rec = GraphRecorder(Graph())
>>> c, x = (rec.add(VariableType.PLACEHOLDER, TensorType((3,), np.dtype("float64")), n)
...         for n in ("c", "x"))
>>> rec.graph.set_outputs((c * 0.5 + x).name, c.name)
>>> body = rec.graph.freeze()
>>> f64 = np.dtype("float64")
>>> kernel = LoopKernel(None, body, [TensorType((3,), f64), TensorType((4, 3), f64)], 1, 1)
>>> carry, ys, steps = kernel.run([np.zeros(3), np.ones((4, 3))], 4, False, -1)
>>> carry[0].tolist(), ys[0][:, 0].tolist(), steps
([1.875, 1.875, 1.875], [0.0, 1.0, 1.5, 1.75], 4)
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..ir import Graph
from ..ops import TensorType
from ..ops.registry import Accumulator
from .codegen import PRELUDE, decorator, load, module_source
from .exprs import Emitter
from .grouping import compute_dtype, fusable

VECTOR, SCALAR = "vector", "scalar"

#: integer scalars (a loop counter) go through these exact ops only
_INT_OPS = frozenset({"add", "sub", "mul", "neg", "abs", "maximum", "minimum", "eq", "neq", "gt",
                      "gte", "lt", "lte", "logical_and", "logical_or", "logical_not", "where"})
#: bool reductions, folded like ``op.accumulate``
_BOOL_FOLDS = {"any": Accumulator("False", "(acc or {v})"),
               "all": Accumulator("True", "(acc and {v})")}


def step_types(types: Sequence[TensorType], nc: int, nx: int) -> list[TensorType]:
    """What one step of a loop on operands of ``types`` reads: the carry, one row of each
    scanned array, the captures."""
    rows = [TensorType(tuple(t.shape[1:]), t.dtype) for t in types[nc:nc + nx]]
    return [*types[:nc], *rows, *types[nc + nx:]]


class Unsupported(Exception):
    """The loop does not compile whole (the message says why); the per-step plans run it."""


def _type_name(dtype: np.dtype) -> str:
    return "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"


def _literal(value: Any) -> str:
    v = np.asarray(value).item()
    if isinstance(v, float) and not math.isfinite(v):
        return "math.nan" if math.isnan(v) else ("math.inf" if v > 0 else "-math.inf")
    return repr(v)


@dataclass(frozen=True)
class _Read:
    """How a step reads a value it does not compute: an operand of the loop function or a
    literal. ``text`` is an element read (``c0[i]``) for vectors, an expression for scalars."""
    kind: str
    text: str
    weak: bool = False   # a Python scalar: takes the dtype of the node computing with it


def _fold_of(op: Any) -> Accumulator | None:
    return op.accumulate or _BOOL_FOLDS.get(op.name)


def _computable(node: Any, types: dict[str, TensorType]) -> bool:
    """Has ``node`` an element expression here: a fusable op (floats, bools), or exact integer
    arithmetic and comparisons on scalars."""
    if fusable(node, types, rank0=True):
        return True
    out = types[node.outputs[0]]
    return (out.shape == () and node.op.name in _INT_OPS and node.op.scalar is not None
            and len(node.outputs) == 1 and out.dtype.kind in "iub"
            and all(types[i].shape == () and types[i].dtype.kind in "iub" for i in node.inputs))


class _Step:
    """The code of one body graph for one step (see the module docstring on phases)."""

    def __init__(self, graph: Graph, types: dict[str, TensorType], reads: dict[str, _Read],
                 sinks: Sequence[str], prefix: str) -> None:
        self.types, self.reads, self.prefix = types, reads, prefix
        self.before: list[str] = []   # once, before the loop: buffers
        self.lines: list[str] = []    # every step
        self.empty_ok = True          # no max/min fold (numpy raises on an empty one)
        self._names = iter(range(10 ** 9))
        self._local: dict[Any, str] = {}   # value (or (value, phase) for loads) -> local name
        kind = {n: (SCALAR if t.shape == () else VECTOR) for n, t in types.items()}
        self.kind = kind
        phase: dict[str, int] = {}    # vectors: the phase computing them
        ready: dict[str, int] = {}    # scalars: the phase before which they are known
        entries: list[tuple[str, int, Any]] = []
        for node in graph.needed(list(graph.outputs)):
            o = node.outputs[0]
            fold = _fold_of(node.op)
            if fold is not None and len(node.outputs) == 1:
                if kind[node.inputs[0]] != VECTOR or kind[o] != SCALAR:
                    raise Unsupported(f"{node.op.name}: not a full reduction of a loop value")
                p = phase.get(node.inputs[0], 0)
                entries.append(("fold", p, node))
                ready[o] = p + 1
                self.empty_ok &= fold.empty
            elif not _computable(node, types):
                raise Unsupported(f"{node.op.name} ({', '.join(str(types[i]) for i in node.inputs)}"
                                  f" -> {types[o]}) has no element expression here")
            elif kind[o] == VECTOR:
                phase[o] = max([phase.get(i, 0) for i in node.inputs if kind[i] == VECTOR]
                               + [ready.get(i, 0) for i in node.inputs if kind[i] == SCALAR])
                entries.append(("vector", phase[o], node))
            else:
                ready[o] = max([ready.get(i, 0) for i in node.inputs] + [0])
                entries.append(("scalar", ready[o], node))
        outs = list(zip(graph.outputs, sinks))
        vector_outs = [(n, s) for n, s in outs if kind[n] == VECTOR]
        passes = max([p + 1 for what, p, _ in entries if what != "scalar"]
                     + [1 if vector_outs else 0])
        # a vector read in a later phase than its own is kept in a buffer
        buffered = sorted({i for what, p, node in entries if what != "scalar"
                           for i in node.inputs if i in phase and phase[i] < p})
        self.buffers = {v: f"{prefix}w{k}" for k, v in enumerate(buffered)}
        for v, buf in self.buffers.items():
            self.before.append(f"{buf} = np.empty(n, {_type_name(types[v].dtype)})")
        self.phase = phase
        for p in range(passes + 1):
            for what, q, node in entries:
                if what == "scalar" and q == p:
                    self.lines.append(self._assign(node, p, self.lines))
            if p == passes:
                break
            folds = [node for what, q, node in entries if what == "fold" and q == p]
            for node in folds:
                self.lines.append(f"{self._name(node.outputs[0], 'acc')} = "
                                  f"{_fold_of(node.op).init}")
            body: list[str] = []
            for what, q, node in entries:
                if q != p or what == "scalar":
                    continue
                if what == "vector":
                    body.append(self._assign(node, p, body))
                    if node.outputs[0] in self.buffers:
                        body.append(f"{self.buffers[node.outputs[0]]}[i] = "
                                    f"{self._local[node.outputs[0]]}")
                else:
                    acc = self._local[node.outputs[0]]
                    value = self._read(node.inputs[0], p, body, None)
                    body.append(f"{acc} = " + re.sub(r"\bacc\b", acc,
                                                     _fold_of(node.op).step.format(v=value)))
            for name, sink in vector_outs:
                if phase.get(name, 0) == p:
                    body.append(f"{sink} = {self._read(name, p, body, None)}")
            self.lines.append("for i in range(n):")
            self.lines += ["    " + line for line in body] or ["    pass"]
            for node in folds:
                acc = self._local[node.outputs[0]]
                finish = re.sub(r"\bC\b", "n", re.sub(r"\bacc\b", acc, _fold_of(node.op).finish))
                self.lines.append(f"{acc} = {_type_name(types[node.outputs[0]].dtype)}({finish})")
        for name, sink in outs:
            if kind[name] == SCALAR:
                self.lines.append(f"{sink} = {_type_name(types[name].dtype)}"
                                  f"({self._read(name, passes, self.lines, None)})")

    def _name(self, value: Any, stem: str) -> str:
        self._local[value] = name = f"{self.prefix}{stem}{next(self._names)}"
        return name

    def _read(self, name: str, p: int, lines: list[str], compute: np.dtype | None) -> str:
        """``name``'s expression in phase ``p``; a vector operand or buffered vector is
        loaded into a local once per phase (the load appended to ``lines``)."""
        read = self.reads.get(name)
        if read is not None and read.weak:
            return f"{_type_name(compute)}({read.text})" if compute is not None else read.text
        if read is not None and read.kind == SCALAR:
            return read.text
        if read is None and not (name in self.buffers and self.phase[name] < p):
            return self._local[name]
        local = self._local.get((name, p))
        if local is None:
            text = read.text if read is not None else f"{self.buffers[name]}[i]"
            lines.append(f"{self._name((name, p), 'l')} = {text}")
            local = self._local[(name, p)]
        return local

    def _assign(self, node: Any, p: int, lines: list[str]) -> str:
        types = self.types
        compute = compute_dtype([types[i] for i in node.inputs])
        args = [self._read(i, p, lines, compute) for i in node.inputs]
        expr = node.op.scalar(Emitter(compute or np.dtype(np.float64), node.attrs), *args)
        out = types[node.outputs[0]]
        return f"{self._name(node.outputs[0], 't')} = {_type_name(out.dtype)}({expr})"


# -- the loop function ----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Operand:
    kind: str            # VECTOR or SCALAR
    dtype: np.dtype
    weak: bool = False


class LoopKernel:
    """One loop compiled whole, for operands of exact types (shapes included)."""

    def __init__(self, cond: Graph | None, body: Graph, types: Sequence[TensorType], nc: int,
                 nx: int) -> None:
        shapes = {tuple(t.shape) for t in types[:nc]} | {tuple(t.shape[1:]) for t in
                                                         types[nc:nc + nx]}
        shapes |= {tuple(t.shape) for t in types[nc + nx:]}
        shapes.discard(())
        if len(shapes) > 1:
            raise Unsupported(f"operands of several shapes {sorted(shapes)}")
        self.shape = shapes.pop() if shapes else ()
        self.nc, self.nx = nc, nx
        step = step_types(types, nc, nx)
        names = ([f"c{j}" for j in range(nc)] + [f"x{k}" for k in range(nx)]
                 + [f"k{m}" for m in range(len(types) - nc - nx)])
        self.operands = [_Operand(SCALAR if t.shape == () else VECTOR, t.dtype, t.weak)
                         for t in step]
        self.constants: list[np.ndarray] = []  # the bodies' array constants, passed after
        graphs = [("p_", cond), ("b_", body)] if cond is not None else [("b_", body)]
        steps = {}
        for prefix, graph in graphs:
            reads = {}
            for name, t, operand, text in zip(graph.inputs, step, self.operands, names):
                vector = operand.kind == VECTOR
                if text.startswith("x"):  # a row of the scanned array
                    text = f"{text}[r, i]" if vector else f"{text}[r]"
                elif vector:
                    text = f"{text}[i]"
                reads[name] = _Read(operand.kind, text, operand.weak)
            for name, var in graph.vars.items():
                if var.value is None or name in reads:
                    continue
                if var.ttype.weak:
                    reads[name] = _Read(SCALAR, _literal(var.value), True)
                    continue
                value = np.asarray(var.value)
                q = f"q{len(self.constants)}"
                if value.shape == self.shape and value.shape:
                    self.constants.append(np.ascontiguousarray(value).reshape(-1))
                    reads[name] = _Read(VECTOR, f"{q}[i]")
                elif value.size == 1 and value.ndim <= len(self.shape):  # (broadcast: one value)
                    self.constants.append(value.reshape(-1)[0])
                    reads[name] = _Read(SCALAR, q)
                else:
                    raise Unsupported(f"constant {name} of shape {value.shape}")
            known = graph.retype(dict(zip(graph.inputs, step)))
            if graph is cond:
                sinks = ["pred"]
            else:
                sinks = [f"d{j}[i]" if o.kind == VECTOR else f"e{j}"
                         for j, o in enumerate(self.operands[:nc])]
                sinks += [f"y{k}[r, i]" if known[o].shape else f"y{k}[r]"
                          for k, o in enumerate(graph.outputs[nc:])]
            for name, t in known.items():
                if t.shape != () and tuple(t.shape) != self.shape:
                    raise Unsupported(f"{name} is {t}: neither a scalar nor of the loop's "
                                      f"shape {self.shape}")
            steps[prefix] = _Step(graph, known, reads, sinks, prefix)
            if graph is body:
                self.ys = [known[o] for o in graph.outputs[nc:]]
        self.empty_ok = all(s.empty_ok for s in steps.values())
        self.source = self._render(steps, names, cond is not None)
        self.key = ("loop", self.source)
        self.size = math.prod(self.shape)
        # how each operand is passed (``arguments``) and each carry comes back (``run``)
        self.passing = ["weak" if o.weak else
                        ("rows" if o.kind == VECTOR else "scalar rows") if nc <= k < nc + nx else
                        "flat" if o.kind == VECTOR else "scalar"
                        for k, o in enumerate(self.operands)]
        self.carry_kinds = [(o.kind == VECTOR, o.dtype) for o in self.operands[:nc]]
        self._fn: Any = None
        self.runs = 0  # calls that ran compiled (tests and explain() read it)

    def _render(self, steps: dict, names: list[str], is_while: bool) -> str:
        params = ", ".join([f"{n}_in" if n.startswith("c") else n for n in names]
                           + [f"q{k}" for k in range(len(self.constants))]
                           + ["n", "steps", "limit", "reverse"])
        lines = list(PRELUDE) + [decorator(), f"def loop({params}):"]
        body = []
        for j, o in enumerate(self.operands[:self.nc]):
            if o.kind == VECTOR:
                body += [f"c{j} = c{j}_in.copy()", f"d{j} = np.empty_like(c{j})"]
            else:
                body += [f"c{j} = {_type_name(o.dtype)}(c{j}_in)"]
        for s in steps.values():
            body += s.before
        body.append("cap = 16 if steps < 0 else steps")
        for k, y in enumerate(self.ys):
            shape = "(cap, n)" if y.shape else "cap"
            body.append(f"y{k} = np.empty({shape}, {_type_name(y.dtype)})")
        body += ["t = 0", "while True:"]
        loop: list[str] = []
        if is_while:
            loop += ["if limit >= 0 and t >= limit:", "    break"]
            loop += steps["p_"].lines + ["if not pred:", "    break", "r = t"]
            if self.ys:
                loop += ["if t == cap:", "    cap *= 2"]
                for k, y in enumerate(self.ys):
                    shape = "(cap, n)" if y.shape else "cap"
                    loop += [f"    g{k} = np.empty({shape}, {_type_name(y.dtype)})",
                             f"    g{k}[:t] = y{k}", f"    y{k} = g{k}"]
        else:
            loop += ["if t >= steps:", "    break", "r = steps - 1 - t if reverse else t"]
        loop += steps["b_"].lines
        for j, o in enumerate(self.operands[:self.nc]):
            loop.append(f"c{j}, d{j} = d{j}, c{j}" if o.kind == VECTOR else f"c{j} = e{j}")
        loop.append("t += 1")
        body += ["    " + line for line in loop]
        outs = [f"c{j}" for j in range(self.nc)] + [f"y{k}[:t]" for k in range(len(self.ys))]
        body.append(f"return ({', '.join(outs)}, t)")
        lines += ["    " + line for line in body]
        return module_source(lines + [""])

    def function(self) -> Any:
        if self._fn is None:
            self._fn = load(self.source).loop
        return self._fn

    def arguments(self, vals: Sequence[Any]) -> list:
        """The loop function's operands: vectors flat, scanned arrays as (steps, n) rows,
        scalars as numpy scalars, weak ones as Python numbers; then the bodies' constants."""
        n = self.size
        args = []
        for how, v in zip(self.passing, vals):
            if how == "flat":
                if type(v) is not np.ndarray or v.ndim != 1 or not v.flags.c_contiguous:
                    v = np.ascontiguousarray(v).reshape(-1)
                args.append(v)
            elif how == "rows":
                v = np.ascontiguousarray(v)
                args.append(v.reshape(len(v), n))
            elif how == "scalar":
                args.append(np.asarray(v)[()])
            elif how == "weak":
                args.append(v.item() if isinstance(v, np.ndarray) else v)
            else:  # a scanned array of scalars: its rows are the scalars
                args.append(np.ascontiguousarray(v))
        return args + self.constants

    def warm_arguments(self) -> list:
        """Arguments of the loop function's types that run no step (a compile's warm-up)."""
        vals: list = []
        for k, o in enumerate(self.operands):
            if o.weak:
                vals.append(o.dtype.type(0).item())
                continue
            row = self.shape if o.kind == VECTOR else ()
            vals.append(np.zeros((0, *row) if self.nc <= k < self.nc + self.nx else row,
                                 o.dtype))
        return [*self.arguments(vals), max(math.prod(self.shape), 1), 0, 0, False]

    def run(self, vals: Sequence[Any], steps: int, reverse: bool,
            limit: int) -> tuple[list, list, int] | None:
        """``(final carry, stacked per-step outputs, steps run)``, or None when the call is
        the interpreter's (an empty reduction numpy must report)."""
        n = self.size
        if n == 0 and not self.empty_ok:
            return None
        *res, t = self.function()(*self.arguments(vals), n, steps, limit, reverse)
        self.runs += 1
        shape = self.shape
        carry = [c.reshape(shape) if vector else np.array(c, dtype)
                 for c, (vector, dtype) in zip(res[:self.nc], self.carry_kinds)]
        ys = [np.ascontiguousarray(y).reshape((t, *self.shape)) if y_t.shape else
              np.ascontiguousarray(y) for y, y_t in zip(res[self.nc:], self.ys)]
        return carry, ys, t
