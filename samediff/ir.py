"""The graph IR: frozen ``Node`` s and a ``Graph`` of typed variables — the one structure that
SameDiff, traces, autodiff, training steps and the serializer build and read.

A ``Graph`` is a table of variables (name -> ``Var``: kind, static type, value for VARIABLEs
and CONSTANTs, producing node) and a list of nodes in creation order, which is a topological
order (a node can only read variables that exist). It knows names, types and wiring — no
arrays-as-objects, no modes, no front end: recording a Python call (literals, handles) is the
job of ``samediff.recorder``; running a graph is the compiler's.

Nodes are immutable, so a graph can be copied cheaply (``copy`` shares nodes and values) and
transformed into a new graph (``subgraph``, autodiff's ``grad``) without touching the original.
A graph can be **frozen**; a frozen graph is hashable by structure, which is what lets a graph
be an op *attribute* (the body of a ``cond``/``while``/``scan``, an ONNX sub-graph).

>>> import numpy as np
>>> from samediff.ops import TensorType, get_op
>>> g = Graph()
>>> _ = g.add_var("x", VariableType.PLACEHOLDER, TensorType((-1, 3), np.dtype("float32")))
>>> g.record(get_op("exp"), ("x",), name="y")
('y',)
>>> g.retype({"x": TensorType((2, 3), np.dtype("float32"))})["y"].shape
(2, 3)
>>> g.freeze() == g.copy().freeze()
True
"""
from __future__ import annotations

import contextlib
import dataclasses
import difflib
from dataclasses import dataclass
from enum import Enum
from typing import Any, Hashable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from .errors import (GraphError, NdDTypeError, NdError, OpError, UnknownOpError,
                     UnknownVariableError)
from .kernels import frozen
from .ops import REGISTRY, OpDef, TensorType
from .ops.registry import Attr, encode_attr


class VariableType(str, Enum):
    """ND4J's variable kinds: trainable, persistent, fed per call, or an op's output."""

    VARIABLE = "VARIABLE"
    CONSTANT = "CONSTANT"
    PLACEHOLDER = "PLACEHOLDER"
    ARRAY = "ARRAY"


_ARRAY = VariableType.ARRAY


@dataclass(frozen=True, eq=False)
class Node:
    """One op application: ``outputs = op(*inputs, **attrs)``. Inputs and outputs are value ids
    (variable names in a ``Graph``, integer slots in a trace)."""

    name: str
    op: OpDef
    attrs: Any
    inputs: tuple
    outputs: tuple

    def replace(self, **changes: Any) -> "Node":
        return dataclasses.replace(self, **changes)

    def key(self) -> tuple:
        """Structure of this node (op, attributes, wiring), for structural hashing."""
        return (self.op.name, self.attrs, self.inputs, self.outputs)


@dataclass(slots=True)
class Var:
    """A variable of a graph: its kind, static type (``-1`` = unknown dim), value (VARIABLE and
    CONSTANT) and producing node (ARRAY)."""

    name: str
    vtype: VariableType
    ttype: TensorType
    value: np.ndarray | None = None
    producer: Node | None = None

    def __setattr__(self, field: str, new: Any) -> None:
        """A CONSTANT's value is frozen (``kernels.frozen``: kernels may keep what they derive
        from it, as onnxruntime prepacks initializers): nothing writes it in place --
        ``get_arr`` hands out a read-only view, ``set_array`` replaces it. A CONSTANT turned
        VARIABLE (trained in place) is thawed."""
        held = self._constant_array()
        if field == "vtype" and new is not VariableType.CONSTANT and held is not None:
            frozen.thaw(held)
        object.__setattr__(self, field, new)
        held = self._constant_array() if field in ("vtype", "value") else None
        if held is not None:
            frozen.freeze(held)

    def _constant_array(self) -> np.ndarray | None:
        """The value when this is a CONSTANT holding an array (fields are unset mid-init)."""
        value = getattr(self, "value", None)
        return value if getattr(self, "vtype", None) is VariableType.CONSTANT \
            and isinstance(value, np.ndarray) else None


class Graph:
    """Variables and nodes; see the module docstring. Mutations bump ``version``."""

    def __init__(self) -> None:
        self.vars: dict[str, Var] = {}
        self.nodes: list[Node] = []
        self.node_names: set[str] = set()
        self.scopes: list[str] = []
        self.name_counts: dict[str, int] = {}
        self.version = 0
        self._frozen = False
        self._key: tuple[int, tuple] | None = None
        #: per node, its part of a plan key (``compiler.cache.structural_key``'s format), kept
        #: as a slot-keyed graph grows (``append``); ``None`` once anything else changed it
        self._parts: list[tuple] | None = []
        #: The ordered output signature of a graph used as a function (a control-flow body):
        #: ``set_outputs`` declares it; its inputs are the PLACEHOLDERs in insertion order.
        self.outputs: tuple[str, ...] = ()

    # -- signature (a graph as a function: control-flow bodies) ----------------------------
    def set_outputs(self, *names: str) -> None:
        """Declare the graph's ordered outputs (variables it has), as a body's results."""
        for n in names:
            self.var(n)
        self._touch()
        self.outputs = tuple(names)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The graph's inputs as a function: its PLACEHOLDERs, in insertion order."""
        return tuple(n for n, v in self.vars.items() if v.vtype is VariableType.PLACEHOLDER)

    def order_inputs(self, names: Sequence[str]) -> None:
        """Make ``names`` (every PLACEHOLDER, once each) the graph's input order (bodies that
        must take the same inputs: the branches of a ``cond`` lifting different captures)."""
        if sorted(names) != sorted(self.inputs):
            raise GraphError(f"order_inputs: {list(names)} are not this graph's inputs "
                             f"{list(self.inputs)}")
        self._touch()
        rest = {k: v for k, v in self.vars.items() if v.vtype is not VariableType.PLACEHOLDER}
        self.vars = {**{n: self.vars[n] for n in names}, **rest}

    # -- naming ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def name_scope(self, scope: str) -> Iterator[None]:
        """Prefix names created inside the block with ``scope/`` (nestable)."""
        if not scope or "/" in scope:
            raise GraphError(f"name_scope: invalid scope {scope!r}")
        self.scopes.append(scope)
        try:
            yield
        finally:
            self.scopes.pop()

    def scoped(self, name: str) -> str:
        return "/".join([*self.scopes, name])

    def unique(self, base: str, taken: Iterable[str] | None = None) -> str:
        """A fresh name ``scope/base`` or ``scope/base_<n>`` not in ``taken`` (default: the
        variables)."""
        taken = self.vars if taken is None else taken
        base = self.scoped(base)
        n = self.name_counts.get(base, 0)
        name = base if n == 0 and base not in taken else f"{base}_{max(n, 1)}"
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        self.name_counts[base] = n + 1
        return name

    def new_name(self, name: str | None, default: str) -> str:
        """``name`` in the current scope (it must be free), or a fresh ``default``-based one."""
        if name is None:
            return self.unique(default)
        if not isinstance(name, str) or not name:
            raise GraphError(f"variable names must be non-empty strings, got {name!r}")
        full = self.scoped(name)
        if full in self.vars:
            raise GraphError(f"a variable named {full!r} already exists; names must be unique")
        return full

    # -- building -------------------------------------------------------------------------
    def _touch(self) -> None:
        if self._frozen:
            raise GraphError("this graph is frozen (it is an op attribute or a cache key); "
                             "copy() it to change it")
        self.version += 1
        self._parts = None

    def var(self, name: str) -> Var:
        try:
            return self.vars[name]
        except KeyError:
            raise UnknownVariableError(f"no variable named {name!r} in this graph"
                                       f"{did_you_mean(name, self.vars)}") from None

    def unknown_output(self, name: str, what: str = "output") -> UnknownVariableError:
        """The error for asking ``what`` for a variable the graph lacks: the closest names,
        then the graph's outputs (its op results, the ones no op reads first) to choose from."""
        read = {i for node in self.nodes for i in node.inputs}
        results = [o for node in self.nodes for o in node.outputs]
        outputs = [o for o in results if o not in read] + [o for o in results if o in read]
        listed = ", ".join(repr(o) for o in outputs[:12]) + (" ..." if len(outputs) > 12 else "")
        return UnknownVariableError(
            f"{what}: no variable named {name!r} in this graph{did_you_mean(name, self.vars)} "
            f"The graph's outputs: {listed or 'none (it has no ops)'} "
            f"({len(self.vars)} variables in all; sd.variableNames() lists them)")

    def add_var(self, name: str, vtype: VariableType, ttype: TensorType,
                value: np.ndarray | None = None, producer: Node | None = None) -> Var:
        if name in self.vars:
            raise GraphError(f"a variable named {name!r} already exists; names must be unique")
        self._touch()
        var = self.vars[name] = Var(name, vtype, ttype, value, producer)
        return var

    def record(self, op: OpDef, inputs: Sequence[str], attrs: Any = None,
               name: str | None = None) -> tuple[str, ...]:
        """Add ``op`` applied to the variables ``inputs``; returns its output names (the first
        is ``name`` or a fresh ``op``-based name, others ``<first>:<i>``). Types are inferred
        before anything changes, so a failing op leaves the graph as it was."""
        rec = attrs if isinstance(attrs, op.attrs_type) else op.make_attrs(attrs or {})
        out_types = op.infer_types([self.var(i).ttype for i in inputs], rec)
        base = self.new_name(name, op.name)
        return self.add_node(op, rec, tuple(inputs), out_types, base)

    def add_node(self, op: OpDef, rec: Any, inputs: tuple[str, ...],
                 out_types: Sequence[TensorType], base: str,
                 outputs: Sequence[str] | None = None) -> tuple[str, ...]:
        """Add a node whose output types are already known (``record`` infers them); its
        outputs are ``outputs``, by default ``base``, ``base:1``..."""
        outs = tuple(outputs) if outputs is not None else tuple(
            base if i == 0 else f"{base}:{i}" for i in range(len(out_types)))
        for o in outs:
            if o in self.vars:
                raise GraphError(f"{op.name}: output name {o!r} already exists")
        node_name = base if base not in self.node_names else self.unique(op.name, self.node_names)
        node = Node(node_name, op, rec, tuple(inputs), outs)
        self._touch()
        self.nodes.append(node)
        self.node_names.add(node_name)
        for o, t in zip(outs, out_types):
            self.vars[o] = Var(o, VariableType.ARRAY, t, producer=node)
        return outs

    # -- slot-keyed graphs (traces) ---------------------------------------------------------
    # A trace records many small ops per second (the budget is a few microseconds each), so it
    # names values by integer *slots* handed out in order and skips the checks a by-name graph
    # needs: a fresh slot can never clash. It is otherwise the same Graph (same nodes, keys,
    # passes, plans); ``named`` turns it into a by-name graph for SameDiff.

    def add_slot(self, ttype: TensorType, vtype: VariableType = VariableType.PLACEHOLDER,
                 value: np.ndarray | None = None) -> int:
        """Add an input variable named by the next integer slot; returns the slot."""
        if self._frozen:
            self._touch()  # raises
        self.version += 1
        slot = len(self.vars)
        self.vars[slot] = Var(slot, vtype, ttype, value)  # type: ignore[index,arg-type]
        return slot

    def append(self, op: OpDef, rec: Any, inputs: tuple, out_types: Sequence[TensorType],
               name: str = "") -> tuple[int, ...]:
        """Add a node of a slot-keyed graph whose output types are already inferred; its outputs
        are the next slots (returned). ``name`` is the user's name for the node, if any."""
        if self._frozen:
            self._touch()  # raises
        self.version += 1
        vars_ = self.vars
        first = len(vars_)
        if len(out_types) == 1:  # (the common case, on the tracing hot path)
            outs: tuple[int, ...] = (first,)
            node = Node(name, op, rec, inputs, outs)
            vars_[first] = Var(first, _ARRAY, out_types[0], None, node)  # type: ignore[index,arg-type]
        else:
            outs = tuple(range(first, first + len(out_types)))
            node = Node(name, op, rec, inputs, outs)
            for o, t in zip(outs, out_types):
                vars_[o] = Var(o, _ARRAY, t, None, node)  # type: ignore[index,arg-type]
        self.nodes.append(node)
        if self._parts is not None:
            self._parts.append((op.name, rec, inputs, outs, name))
        return outs

    def structure_parts(self) -> tuple:
        """Per node ``(op name, attributes, inputs, outputs, name)``: the node part of a plan
        key (``compiler.cache.structural_key``); kept as a slot-keyed graph grows, so a trace's
        key costs no walk over its nodes."""
        parts = self._parts
        if parts is not None and len(parts) == len(self.nodes):
            return tuple(parts)
        return tuple([(n.op.name, n.attrs, tuple(n.inputs), tuple(n.outputs), n.name)
                      for n in self.nodes])

    def named(self, inputs: Mapping[Hashable, str],
              outputs: Mapping[Hashable, str] = {}) -> "Graph":  # noqa: B006 (read only)
        """A by-name copy of a slot-keyed graph: the slots in ``inputs`` become placeholders of
        the given names, the values in ``outputs`` take theirs, every other value is named
        after its node (``<op>_<i>``, ``:<j>`` for a further output)."""
        graph = Graph()
        names: dict[Hashable, str] = {}
        for slot, name in inputs.items():
            names[slot] = name
            graph.add_var(name, VariableType.PLACEHOLDER, self.vars[slot].ttype)
        for i, node in enumerate(self.nodes):
            base = node.name or f"{node.op.name}_{i}"
            outs = []
            for j, slot in enumerate(node.outputs):
                name = outputs.get(slot) or (base if j == 0 else f"{base}:{j}")
                names[slot] = graph.unique(name) if name in graph.vars else name
                outs.append(names[slot])
            graph.add_node(node.op, node.attrs, tuple(names[s] for s in node.inputs),
                           [self.vars[s].ttype for s in node.outputs], base, outs)
        return graph

    def rename(self, old: str, new: str) -> None:
        """Rename a variable everywhere it is used (nodes are rebuilt: they are frozen)."""
        if new in self.vars:
            raise GraphError(f"rename: a variable named {new!r} already exists")
        var = self.var(old)
        self._touch()
        swap = (lambda names: tuple(new if n == old else n for n in names))
        rebuilt: dict[int, Node] = {}
        for i, node in enumerate(self.nodes):
            if old in node.inputs or old in node.outputs:
                rebuilt[id(node)] = self.nodes[i] = node.replace(inputs=swap(node.inputs),
                                                                 outputs=swap(node.outputs))
        self.vars = {(new if k == old else k): v for k, v in self.vars.items()}
        var.name = new
        for v in self.vars.values():
            if v.producer is not None and id(v.producer) in rebuilt:
                v.producer = rebuilt[id(v.producer)]

    def substitute(self, node: Node, values: Sequence[str]) -> None:
        """Replace ``node`` by values already recorded into this graph (an op's expansion):
        output ``i`` of the node becomes ``values[i]``, renamed to the output's name so its
        readers are unchanged; the nodes are then re-sorted so producers come first."""
        if len(values) != len(node.outputs):
            raise GraphError(f"substitute: node {node.name!r} has {len(node.outputs)} outputs, "
                             f"got {len(values)} values")
        for v in values:
            if self.var(v).producer is None:
                raise GraphError(f"substitute: {v!r} is not computed by a node (an identity "
                                 f"expansion must still record an op)")
        self._touch()
        self.nodes = [n for n in self.nodes if n is not node]
        self.node_names.discard(node.name)
        for o in node.outputs:
            del self.vars[o]
        for v, o in zip(values, node.outputs):
            self.rename(v, o)
        self.nodes = self.toposort()

    def set_kind(self, name: str, vtype: VariableType, ttype: TensorType | None = None,
                 value: np.ndarray | None = None) -> None:
        """Change a variable's kind (and type/value): constant <-> variable, fixed placeholder."""
        var = self.var(name)
        self._touch()
        var.vtype = vtype
        if ttype is not None:
            var.ttype = ttype
        if value is not None:
            var.value = value

    # -- reading --------------------------------------------------------------------------
    def producers(self) -> dict[str, Node]:
        return {o: n for n in self.nodes for o in n.outputs}

    def needed(self, outputs: Iterable[str]) -> list[Node]:
        """The nodes (in graph order) that ``outputs`` depend on."""
        return needed_nodes(self.nodes, self.producers(), outputs)

    def upstream(self, names: Iterable[str]) -> set[str]:
        """Every variable the values ``names`` are computed from (and the names themselves)."""
        producers = self.producers()
        seen = set(names)
        stack = list(seen)
        while stack:
            node = producers.get(stack.pop())
            if node is not None:
                for i in node.inputs:
                    if i not in seen:
                        seen.add(i)
                        stack.append(i)
        return seen

    def toposort(self) -> list[Node]:
        """The nodes in an order where every input is computed before it is read (Kahn's
        algorithm, stable: creation order where free). Raises ``GraphError`` on a cycle."""
        producers = self.producers()
        waiting = {id(n): sum(1 for i in set(n.inputs) if i in producers) for n in self.nodes}
        readers: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in set(n.inputs):
                if i in producers:
                    readers.setdefault(i, []).append(n)
        order_of = {id(n): k for k, n in enumerate(self.nodes)}
        ready = [n for n in self.nodes if waiting[id(n)] == 0]
        out: list[Node] = []
        while ready:
            ready.sort(key=lambda n: order_of[id(n)], reverse=True)
            node = ready.pop()
            out.append(node)
            for o in node.outputs:
                for r in readers.get(o, ()):
                    waiting[id(r)] -= 1
                    if waiting[id(r)] == 0:
                        ready.append(r)
        if len(out) != len(self.nodes):
            stuck = [n.name for n in self.nodes if waiting[id(n)] > 0][:5]
            raise GraphError(f"the graph has a cycle through nodes {stuck}")
        return out

    def retype(self, input_types: Mapping[str, TensorType],
               nodes: Sequence[Node] | None = None) -> dict[str, TensorType]:
        """Types of every value ``nodes`` (default: all) compute from inputs of these concrete
        types — how a placeholder's ``-1`` dims become known; variables not given keep their
        static types. An error names its node."""
        known = {n: v.ttype for n, v in self.vars.items() if v.vtype is not VariableType.ARRAY}
        known.update(input_types)
        return infer_node_types(self.nodes if nodes is None else nodes, known)

    def validate(self) -> None:
        """Check the invariants every consumer relies on; raise ``GraphError`` naming the first
        broken one: inputs exist and are defined before use, each value has one producer,
        ARRAY variables have producers and nothing else does, node names are unique."""
        defined = {n for n, v in self.vars.items() if v.vtype is not VariableType.ARRAY}
        names: set[str] = set()
        for node in self.nodes:
            if node.name in names:
                raise GraphError(f"validate: two nodes are named {node.name!r}")
            names.add(node.name)
            for i in node.inputs:
                if i not in self.vars:
                    raise GraphError(f"validate: node {node.name!r} reads unknown variable {i!r}")
                if i not in defined:
                    raise GraphError(f"validate: node {node.name!r} reads {i!r} before it is "
                                     f"computed")
            for o in node.outputs:
                var = self.vars.get(o)
                if var is None or var.producer is not node or o in defined:
                    raise GraphError(f"validate: output {o!r} of node {node.name!r} is not an "
                                     f"ARRAY variable produced by it (or has two producers)")
                defined.add(o)
        orphans = [n for n, v in self.vars.items()
                   if v.vtype is VariableType.ARRAY and n not in defined]
        if orphans:
            raise GraphError(f"validate: ARRAY variables without a producing node: {orphans[:5]}")

    # -- transforming ---------------------------------------------------------------------
    def _take(self, source: "Graph", nodes: list[Node] | None = None,
              keep: set[str] | None = None) -> None:
        """Take ``source``'s structure (or only ``nodes`` and the variables in ``keep``): new
        containers, the same immutable nodes and value arrays."""
        self.vars = {k: dataclasses.replace(v) for k, v in source.vars.items()
                     if keep is None or k in keep}
        self.nodes = list(source.nodes if nodes is None else nodes)
        self.node_names = (set(source.node_names) if nodes is None
                           else {n.name for n in nodes})
        self.name_counts = dict(source.name_counts)
        self.scopes = list(source.scopes)
        self._parts = None  # (recomputed from the nodes when asked)

    def copy(self) -> "Graph":
        """An unfrozen copy sharing the (immutable) nodes and the value arrays."""
        g = Graph()
        g._take(self)
        g.outputs = self.outputs
        g.version = self.version
        return g

    def restore_from(self, saved: "Graph") -> None:
        """Make this graph's structure that of ``saved`` (a ``copy()`` taken earlier); the
        version moves forward, so nothing cached for the states in between is reused."""
        if self.version == saved.version:
            return  # every change bumps the version: nothing changed since the copy
        version = max(self.version, saved.version) + 1
        self._take(saved)
        self.version = version

    def subgraph(self, outputs: Iterable[str], keep: Iterable[str] = ()) -> "Graph":
        """A new graph with only what ``outputs`` need (plus the variables in ``keep``)."""
        outputs = list(outputs)
        nodes = self.needed(outputs)
        used = {i for n in nodes for i in n.inputs} | {o for n in nodes for o in n.outputs}
        g = Graph()
        g._take(self, nodes, used | set(outputs) | set(keep))
        g.version = self.version + 1  # versions only move forward along a graph's history
        return g

    def freeze(self) -> "Graph":
        """Make this graph immutable (and hashable by structure); returns it."""
        self._frozen = True
        return self

    @property
    def frozen(self) -> bool:
        return self._frozen

    def key(self) -> tuple:
        """Structural key: variables (name, kind, type) and nodes (op, attrs, wiring); equal
        keys compute the same function of the same inputs, up to VARIABLE/CONSTANT values.
        Memoized per version."""
        if self._key is None or self._key[0] != self.version:
            vars_ = tuple((v.name, v.vtype.value, v.ttype) for v in self.vars.values())
            self._key = (self.version, (vars_, tuple(n.key() for n in self.nodes),
                                        self.outputs))
        return self._key[1]

    # -- as an attribute value (JSON) ------------------------------------------------------
    def to_dict(self) -> dict:
        """The JSON form of this graph (structure and constant values), as a graph-valued op
        attribute is saved; ``Graph.from_dict`` inverts it."""
        variables = []
        for v in self.vars.values():
            entry: dict[str, Any] = {"name": v.name, "type": v.vtype.value,
                                     "dtype": v.ttype.dtype.name, "shape": list(v.ttype.shape),
                                     "weak": bool(v.ttype.weak)}
            if v.value is not None:
                entry["value"] = v.value.tolist()
            variables.append(entry)
        nodes = [{"name": n.name, "op": n.op.name, "inputs": list(n.inputs),
                  "outputs": list(n.outputs),
                  "attrs": {k: encode_attr(a) for k, a in vars(n.attrs).items()}}
                 for n in self.nodes]
        doc = {"graph": 1, "variables": variables, "nodes": nodes}
        if self.outputs:
            doc["outputs"] = list(self.outputs)
        return doc

    @classmethod
    def from_dict(cls, doc: Any) -> "Graph":
        """The frozen graph ``to_dict`` wrote, re-typed and validated (a damaged document
        raises ``GraphError``; an unknown op ``UnknownOpError``)."""
        try:
            if doc.get("graph") != 1:
                raise GraphError(f"not a graph document (graph={doc.get('graph')!r})")
            g = cls()
            for e in doc["variables"]:
                dtype = np.dtype(e["dtype"])
                ttype = TensorType(tuple(int(d) for d in e["shape"]), dtype, bool(e["weak"]))
                value = np.array(e["value"], dtype=dtype).reshape(ttype.shape) \
                    if "value" in e else None
                vtype = VariableType(e["type"])
                if vtype is not VariableType.ARRAY:
                    g.add_var(str(e["name"]), vtype, ttype, value)
            for e in doc["nodes"]:
                op = REGISTRY.get(e["op"])
                if op is None:
                    raise UnknownOpError(f"graph attribute: unknown op {e['op']!r}")
                rec = decode_attrs(op, e["attrs"])
                types = op.infer_types([g.var(i).ttype for i in e["inputs"]], rec)
                g.add_node(op, rec, tuple(e["inputs"]), types, str(e["name"]),
                           [str(o) for o in e["outputs"]])
            order = [str(e["name"]) for e in doc["variables"]]
            if set(order) == set(g.vars):  # the saved order (part of the structural key)
                g.vars = {n: g.vars[n] for n in order}
            if "outputs" in doc:
                g.set_outputs(*[str(o) for o in doc["outputs"]])
        except NdError:
            raise  # already says what is wrong (unknown op, bad attribute, bad wiring)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise GraphError(f"graph attribute: malformed graph document ({exc})") from exc
        g.validate()
        return g.freeze()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Graph):
            return NotImplemented
        return self is other or (self.key() == other.key() and _same_values(self, other))

    def __hash__(self) -> int:
        if not self._frozen:
            raise TypeError("an unfrozen Graph is mutable and unhashable; freeze() it first")
        return hash(self.key())

    def __repr__(self) -> str:
        return f"Graph({len(self.vars)} variables, {len(self.nodes)} nodes)"


def _same_values(a: Graph, b: Graph) -> bool:
    for name, va in a.vars.items():
        vb = b.vars[name].value
        if (va.value is None) != (vb is None):
            return False
        if va.value is not None and not (va.value is vb or np.array_equal(va.value, vb,
                                                                          equal_nan=True)):
            return False
    return True


def needed_nodes(nodes: Sequence[Any], producers: Mapping[Hashable, Any],
                 outputs: Iterable[Hashable]) -> list:
    """The nodes (in their original, topological order) that ``outputs`` depend on."""
    needed: set[int] = set()
    stack = [producers[o] for o in outputs if o in producers]
    while stack:
        node = stack.pop()
        if id(node) in needed:
            continue
        needed.add(id(node))
        stack.extend(producers[i] for i in node.inputs if i in producers)
    return [n for n in nodes if id(n) in needed]


def infer_node_types(nodes: Sequence[Node],
                     input_types: Mapping[Hashable, TensorType]) -> dict[Hashable, TensorType]:
    """The types of the inputs and of every value ``nodes`` compute from them (a node's error
    names the node)."""
    types = dict(input_types)
    for node in nodes:
        try:
            outs = node.op.infer_types([types[i] for i in node.inputs], node.attrs)
        except (OpError, NdDTypeError) as err:
            raise type(err)(f"{err} [in node {node.name!r}]") from None
        types.update(zip(node.outputs, outs))
    return types


def decode_attrs(op: OpDef, raw: Mapping[str, Any]) -> Any:
    """``op``'s attribute record from their JSON form (a saved file): graph-valued attributes
    (``Attr.GRAPH``) are decoded to frozen IR graphs here, where a graph is known, first."""
    if isinstance(raw, Mapping):
        raw = {k: Graph.from_dict(v) if isinstance(v, dict)
               and op.attr_kinds.get(k, (None,))[0] is Attr.GRAPH else v for k, v in raw.items()}
    return op.make_attrs(raw)


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'probs'?"`` for the names closest to a misspelt ``name`` (same name
    in another name scope first, then ``difflib``'s closest), or ``""``."""
    names = list(candidates)
    leaf = name.split("/")[-1]
    close = [n for n in names if n.split("/")[-1] == leaf and n != name]
    close += [n for n in difflib.get_close_matches(name, names, n=3, cutoff=0.6) if n not in close]
    if not close:
        return ""
    return f"; did you mean {' or '.join(repr(n) for n in close[:3])}?"
