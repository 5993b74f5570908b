"""Recording op calls into a graph: ``GraphRecorder`` and the handles it hands out.

``bind`` (``samediff/array.py``) is the one place an op call goes. When an input is a
``GraphValue`` — a handle on a variable of some ``Graph``, like an ``SDVariable`` — ``bind``
records the call into that handle's graph through its ``GraphRecorder``. The recorder turns
Python call arguments into graph inputs: handles of its own graph become their names, Python
scalars weak literal constants (``x * 2.0`` stays float32), arrays constants. Types are
inferred before the graph changes, so a failing op leaves nothing behind.

Autodiff and the training step record with plain handles on a fresh graph; ``SameDiff`` hands
out its own handle class (``SDVariable``), which adds ND4J's conveniences.

>>> import numpy as np
>>> from samediff.ir import Graph, VariableType
>>> from samediff.ops import TensorType
>>> rec = GraphRecorder(Graph())
>>> x = rec.add(VariableType.PLACEHOLDER, TensorType((3,), np.dtype("float32")), "x")
>>> y = (x * 2.0).exp()          # operators and methods record, through bind
>>> [n.op.name for n in rec.graph.nodes], y.dtype
(['mul', 'exp'], dtype('float32'))
"""
from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from .array import NDArray, as_numpy, bind, type_of
from .arg_kinds import WEAK_SCALARS, is_array_like
from .errors import GraphError, OpError
from .ir import Graph, VariableType
from .ops import OpDef, TensorType
from .surface import KEEP_IN_OPS, NdInt, OpSurface, read_error


class GraphValue(OpSurface):
    """A handle on the variable ``name`` of a recorder's graph. Ops on it record (via ``bind``);
    in-place methods (``addi``) are refused: graph values are immutable."""

    __slots__ = ("_recorder", "_name")

    def __init__(self, recorder: "GraphRecorder", name: str) -> None:
        self._recorder = recorder
        self._name = name

    _apply = staticmethod(bind)  # (op, inputs, attrs, name=None, rec=None): records

    def _inplace(self, op: OpDef, inputs: list, attrs: dict, operator: bool) -> Any:
        if operator:  # `v += 1` rebinds the Python name, as for any immutable value
            return self._apply(op, inputs, attrs)
        raise GraphError(f"{op.name}i: graph variables are immutable values; "
                         f"use v = v.{op.name}(...) instead")

    def __reduce__(self) -> tuple:
        raise GraphError(f"cannot pickle or copy the graph value {self._name!r}: it is a handle "
                         f"on a graph being recorded (nd.grad, autodiff); pickle the SameDiff "
                         f"or the computed arrays instead")

    @property
    def name(self) -> str:
        return self._name

    @property
    def _var(self) -> Any:
        return self._recorder.graph.vars[self._name]

    @property
    def ttype(self) -> TensorType:
        """The static type: shape (``-1`` = unknown dim), dtype, weakness."""
        return self._var.ttype

    @property
    def shape(self) -> tuple[int, ...]:
        """Inferred shape; ``-1`` marks dims unknown until run time."""
        return self._var.ttype.shape

    @property
    def dtype(self) -> np.dtype:
        return self._var.ttype.dtype

    @property
    def rank(self) -> NdInt:
        """Number of dims: ``v.rank`` or ND4J's ``v.rank()``."""
        return NdInt(len(self.shape))

    @property
    def size(self) -> int | None:
        """Number of elements; ``None`` while a dim is unknown (the array API's rule)."""
        shape = self.shape
        return None if any(d < 0 for d in shape) else math.prod(shape)

    @property
    def length(self) -> NdInt:
        """Number of elements: ``v.length`` or ND4J's ``v.length()``, once every dim is known."""
        size = self.size
        if size is None:
            raise GraphError(f"length: {self._name!r} is {self._var.ttype}, "
                             f"with dims unknown until run time; its length is only known from "
                             f"an output() result (out.length())")
        return NdInt(size)

    def _read_error(self, what: str) -> Any:
        """``bool(v)``, ``float(v)``...: the same error a traced array gives, with the
        recorder's hint (where the value is symbolic, what to do instead)."""
        graph = self._recorder.graph
        origin = next((f"produced by {n.op.name} (node {i})" for i, n in enumerate(graph.nodes)
                       if self._name in n.outputs), None)
        if origin is None:
            origin = f"{self._var.vtype.value.lower()} {self._name!r}"
        return read_error(f"{origin}, {self._var.ttype}, in {what}", self._recorder.read_hint)

    def __repr__(self) -> str:
        return f"GraphValue({self._name!r}, {self._var.ttype})"


class GraphRecorder:
    """Records op calls into ``graph`` (see the module docstring); ``handle`` makes the handle
    returned for a variable (``SameDiff`` returns its ``SDVariable`` s). ``level`` orders
    recorders by creation: ``bind`` records an op whose inputs belong to several graphs into
    the newest (innermost) one."""

    _created = itertools.count()
    #: What a user reading a recorded value's data is told (``nd.grad`` and SameDiff say more).
    read_hint = (f"while a graph is being recorded: its values exist only when the graph runs; "
                 f"{KEEP_IN_OPS}")

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.level = next(GraphRecorder._created)

    def handle(self, name: str) -> Any:
        return GraphValue(self, name)

    def add(self, vtype: VariableType, ttype: TensorType, name: str,
            value: np.ndarray | None = None) -> Any:
        """Add a variable (placeholder, constant...) and return its handle."""
        self.graph.add_var(name, vtype, ttype, value)
        return self.handle(name)

    def owns(self, x: Any) -> bool:
        return isinstance(x, GraphValue) and x._recorder is self

    def _type(self, op: OpDef, x: Any) -> TensorType:
        """The static type of input ``x`` — or the error saying why it cannot be one."""
        if isinstance(x, GraphValue):
            if x._recorder is not self:
                raise GraphError(f"{op.name}: variable {x.name!r} belongs to another graph "
                                 f"(another SameDiff instance); variables of two graphs "
                                 f"cannot be mixed")
            return self.graph.vars[x.name].ttype
        if isinstance(x, OpSurface) and not isinstance(x, NDArray) or _is_pending(x):
            raise GraphError(f"{op.name}: cannot use a {type(x).__name__} in a SameDiff graph: "
                             f"traced arrays (graph_scope / nd.compile) and graph variables "
                             f"cannot be mixed; use the graph's placeholders and variables")
        if x is None:
            raise OpError(f"{op.name}: an input is None; pass a variable, an array or a number")
        return type_of(_as_value(x))

    def _input_name(self, op: OpDef, x: Any, reserved: tuple[str, ...]) -> str:
        if isinstance(x, GraphValue):
            return x.name
        taken = self.graph.vars.keys() | set(reserved)  # ``reserved``: the op's own outputs
        if type(x) in WEAK_SCALARS:  # weak literal, like 2.0 in x * 2.0 (not np.float64)
            name = self.graph.unique("literal", taken)
            self.graph.add_var(name, VariableType.CONSTANT, type_of(x), np.asarray(x))
            return name
        if is_array_like(x) or isinstance(x, np.generic):
            arr = as_numpy(x).copy()
            name = self.graph.unique("constant", taken)
            self.graph.add_var(name, VariableType.CONSTANT, TensorType(arr.shape, arr.dtype), arr)
            return name
        raise OpError(f"{op.name}: cannot use {x!r} ({type(x).__name__}) as an input")

    def record(self, op: OpDef, inputs: list, attrs: dict | None, name: str | None = None) -> Any:
        """Record ``op(*inputs, **attrs)``; returns the output handle (a tuple for several)."""
        rec = op.make_attrs(attrs) if attrs else op.default_attrs
        if rec is None:
            rec = op.make_attrs({})  # raises: a required attribute is missing
        out_types = op.infer_types([self._type(op, x) for x in inputs], rec)
        graph = self.graph
        base = graph.new_name(name, op.name)  # checked before literals/constants are added
        outs = tuple(base if i == 0 else f"{base}:{i}" for i in range(len(out_types)))
        for o in outs[1:]:
            if o in graph.vars:
                raise GraphError(f"{op.name}: output name {o!r} already exists")
        in_names = tuple(self._input_name(op, x, outs) for x in inputs)
        graph.add_node(op, rec, in_names, out_types, base)
        created = [self.handle(o) for o in outs]
        return tuple(created) if op.multi_output or len(created) != 1 else created[0]


def _is_pending(x: Any) -> bool:
    """A traced array (a ``LazyArray`` still waiting for its value) — without importing
    tracing, which sits above this module."""
    return getattr(type(x), "_state", None) is not None and getattr(x, "_state", None) == "pending"


def _as_value(x: Any) -> Any:
    """Runtime-like value of a non-variable input, for type inference."""
    if type(x) in WEAK_SCALARS:
        return x
    return as_numpy(x)
