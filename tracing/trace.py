"""``Trace``: what ``bind`` records into while a scope or compiled function is active.

A trace records into a slot-keyed ``ir.Graph`` (``self.graph``): every value is an integer
*slot* (``Graph.add_slot``/``Graph.append``), the same container SameDiff, autodiff and training
build, keyed for the plan cache by the same ``structural_key``. Inputs (eager arrays, deduplicated by identity,
and Python scalars, each a weak scalar input so ``x * 2`` and ``x * 3`` share one plan) get
slots as they are first used; each recorded op gets slots for its outputs. At the end, the
slots still held by live ``LazyArray`` s (weak references: intermediates nobody holds are
dropped) plus in-place write-backs are the plan's outputs.
"""
from __future__ import annotations

import weakref
from typing import Any, Hashable

import numpy as np

from samediff.array import NDArray, as_numpy, type_of
from samediff.arg_kinds import WEAK_SCALARS
from samediff.compiler.cache import PLAN_CACHE, get_plan, shape_class, structural_key
from samediff.errors import NdDTypeError, OpError, TracingError
from samediff.samediff import SameDiff
from samediff.ir import Graph, Node
from samediff.ops import OpDef, TensorType, get_op
from samediff.surface import KEEP_IN_OPS

from .lazy import PENDING, LazyArray

_PY_SCALARS = WEAK_SCALARS
_WEAK_TYPES = {t: type_of(t(1)) for t in _PY_SCALARS}  # a Python scalar's type depends on its class only


class Trace:
    """A recording of op calls on slots, finished into a cached plan."""

    #: What a user reading traced data is told to do instead (a compiled function says more).
    read_hint = f"before its graph_scope ends; read it after the `with` block, or {KEEP_IN_OPS}"

    def __init__(self, owner: Hashable = None, read_hint: str | None = None,
                 training: bool = False) -> None:
        self.owner = owner
        # training mode: ops with a training form (dropout, batch_norm) record that form
        # instead (samediff/ops/train_mode.py); the op sequence, hence the plan key, differs
        self.training = training
        if read_hint is not None:
            self.read_hint = read_hint
        self.graph = Graph()                       # slot-keyed: value ids are ints
        self.input_slots: list[int] = []
        self.input_objects: list[Any] = []         # the eager object (or scalar) behind each input
        self._slot_by_id: dict[int, int] = {}      # id(eager array) -> slot
        self._lazies: list[weakref.ref] = []
        self._writebacks: dict[int, tuple[NDArray, int]] = {}
        self._viewed: set[int] = set()             # slots something took a view of
        self._view_results: set[int] = set()       # slots that are views of another slot
        self._arguments: set[int] = set()          # id() of argument proxies (add_argument)
        self._donors: dict[int, int] = {}          # id(eager in-place target) -> its input slot

    # -- slots ------------------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        return self.graph.nodes

    def type_of(self, slot: int) -> TensorType:
        return self.graph.vars[slot].ttype  # type: ignore[index]

    def add_input(self, obj: Any) -> int:
        """Slot of an eager value used in the trace (arrays deduplicated by identity)."""
        weak = _WEAK_TYPES.get(type(obj))
        if weak is not None:
            slot = self.graph.add_slot(weak)
            self.input_slots.append(slot)
            self.input_objects.append(obj)
            return slot
        slot = self._slot_by_id.get(id(obj))
        if slot is not None:
            return slot
        value = obj._data if isinstance(obj, NDArray) else as_numpy(obj)
        for target, _ in self._writebacks.values():  # reading it would miss a pending update
            if target is not obj and type(target) is not LazyArray \
                    and np.may_share_memory(target._data, value):
                raise TracingError("an array used in this graph_scope shares memory with an array "
                                   "updated in place earlier in it (a view, or the base of one); "
                                   "the traced read would not see the update. Use the functional "
                                   "form (add instead of addi...)")
        slot = self.graph.add_slot(TensorType(value.shape, value.dtype))
        self.input_slots.append(slot)
        self.input_objects.append(obj if isinstance(obj, (NDArray, np.ndarray)) else value)
        self._slot_by_id[id(obj)] = slot  # input_objects keeps obj alive, so its id stays unique
        return slot

    def add_argument(self, ttype: TensorType, description: str) -> LazyArray:
        """A symbolic input: an abstract array of type ``ttype`` whose data is unknown while
        tracing (a compiled function's argument, like a JAX tracer). Reading its data raises
        a ``TracingError`` with ``description``; in-place updates of it are written back."""
        slot = self.graph.add_slot(ttype)
        proxy = LazyArray(self, slot, ttype, description)
        self.input_slots.append(slot)
        self.input_objects.append(proxy)
        self._arguments.add(id(proxy))  # input_objects keeps the proxy alive: its id stays unique
        self._lazies.append(weakref.ref(proxy))
        return proxy

    def slot_of(self, x: Any) -> int:
        if type(x) is LazyArray and x._state is PENDING:
            if x._trace is not self:
                raise TracingError(f"a traced array ({x._description}) belongs to another trace "
                                   f"(another thread, or a scope that is still open elsewhere)")
            return x._slot
        if isinstance(x, NDArray):
            x._data  # a failed LazyArray raises its explanation here
        return self.add_input(x)

    # -- recording ------------------------------------------------------------------------
    def record(self, op: OpDef, inputs: list, attrs: dict, name: str | None = None) -> Any:
        rec = op.make_attrs(attrs) if attrs else op.default_attrs
        if rec is None:
            rec = op.make_attrs({})
        # (the common input, a pending proxy of this trace, without a call: the hot path)
        slots = tuple([x._slot if type(x) is LazyArray and x._trace is self
                       and x._state is PENDING else self.slot_of(x) for x in inputs])
        if self.training and op.training is not None:
            return self._record_training_form(op, rec, slots)
        graph = self.graph
        vars_ = graph.vars
        out_types = op.infer_types([vars_[s].ttype for s in slots], rec)  # type: ignore[index]
        outs = graph.append(op, rec, slots, out_types, name or "")
        index = len(graph.nodes) - 1
        if op.view:  # in-place updates through or of views cannot be replayed functionally
            self._viewed.update(slots)
            self._view_results.update(outs)
        origin = (op.name, index)
        if len(outs) == 1 and not op.multi_output:
            lazy = LazyArray(self, outs[0], out_types[0], origin)
            self._lazies.append(weakref.ref(lazy))
            return lazy
        lazies = tuple([LazyArray(self, s, t, origin) for s, t in zip(outs, out_types)])
        self._lazies.extend([weakref.ref(x) for x in lazies])
        return lazies

    def _record_training_form(self, op: OpDef, rec: Any, slots: tuple[int, ...]) -> Any:
        """Record ``op``'s training form on proxies of its input slots (eager inputs too); the
        form's state updates (running statistics) have nowhere to go in a trace and are
        dropped (``batch_norm_train`` returns them)."""
        origin = f"an input of {op.name}'s training form"
        handles = [LazyArray(self, s, self.type_of(s), origin) for s in slots]
        outs, _updates = op.training(handles, rec)
        return tuple(outs) if op.multi_output or len(outs) != 1 else outs[0]

    def record_inplace(self, target: NDArray, op: OpDef, inputs: list, attrs: dict) -> NDArray:
        """``target.addi(...)`` while tracing: record functionally, rebind ``target`` to the
        result, write back to its buffer at the end (eager targets)."""
        lazy = type(target) is LazyArray and target._state is PENDING
        current = target._slot if lazy else self._slot_by_id.get(id(target))
        if current is not None and (current in self._viewed or current in self._view_results):
            raise TracingError(f"{op.name}i: in-place update of an array that is, or has, a view "
                               f"(slicing, reshape, transpose...) inside a graph_scope is not "
                               f"supported: the views would not see the update. Use the "
                               f"functional form ({op.name}) instead")
        if not lazy:
            self._check_no_alias(target, op)
        result = self.record(op, inputs, attrs)
        rtype, ttype = self.type_of(result._slot), (target._type if lazy else type_of(target._data))
        if rtype.shape != ttype.shape:
            raise OpError(f"{op.name}i: in-place result has shape {rtype.shape} but the target "
                          f"has shape {ttype.shape}; use the non-in-place {op.name}()")
        if rtype.dtype != ttype.dtype:
            if not np.can_cast(rtype.dtype, ttype.dtype, "same_kind"):
                raise NdDTypeError(f"{op.name}i: cannot write a {rtype.dtype} result into a "
                                   f"{ttype.dtype} array in place; use {op.name}() or cast first")
            result = self.record(get_op("cast"), [result], {"dtype": ttype.dtype})
        if lazy:
            target._slot, target._type = result._slot, self.type_of(result._slot)
            if id(target) in self._arguments:  # the caller's array is updated after each call
                self._writebacks[id(target)] = (target, result._slot)
        else:
            self._donors.setdefault(id(target), self._slot_by_id[id(target)])
            self._slot_by_id[id(target)] = result._slot
            self._writebacks[id(target)] = (target, result._slot)
        return target

    def _check_no_alias(self, target: NDArray, op: OpDef) -> None:
        buf = target._data
        for obj in self.input_objects:
            other = obj._data if isinstance(obj, NDArray) else obj
            if isinstance(other, np.ndarray) and obj is not target and np.may_share_memory(buf, other):
                raise TracingError(f"{op.name}i: the target shares memory with another array used "
                                   f"in this graph_scope; the update would not be seen by it. "
                                   f"Use the functional form ({op.name}) instead")

    # -- finishing ------------------------------------------------------------------------
    def live_outputs(self) -> tuple[list[LazyArray], list[tuple[NDArray, int]]]:
        alive = [x for x in (r() for r in self._lazies)
                 if x is not None and x._state is PENDING and x._trace is self]
        return alive, list(self._writebacks.values())

    def key(self, output_slots: tuple[int, ...]) -> tuple:
        """The plan key, a ``structural_key`` of the graph like SameDiff's, except that each
        input is keyed by its ``shape_class`` (dtype, rank, weakness, which dims are 1) and not
        its sizes: a new batch size reuses the plan (which is built without exact shapes)."""
        vars_ = self.graph.vars
        ins = {s: shape_class(vars_[s].ttype) for s in self.input_slots}  # type: ignore[index]
        return structural_key(self.graph, self.input_slots, output_slots, ins)

    def plan_for(self, output_slots: tuple[int, ...]) -> Any:
        vars_ = self.graph.vars
        return get_plan(self.key(output_slots), self.graph.nodes, self.input_slots, output_slots,
                        lambda: {s: v.ttype for s, v in vars_.items()},
                        donate=self.donations(), owner=self.owner)

    def donations(self) -> dict[int, int] | None:
        """``{write-back slot: the target's input slot}``: the plan may compute an in-place
        update straight into the target's buffer (as numpy's ``out=``), with no full-size
        temporary and no copy back. Not with symbolic arguments: arrays passed at call time
        may alias each other, which record_inplace checks only for the arrays it sees. If a
        plan fails after such a kernel ran, its target already holds the update."""
        if self._arguments or not self._donors:
            return None
        return {slot: self._donors[id(t)] for t, slot in self._writebacks.values()
                if id(t) in self._donors}

    def input_values(self) -> list[Any]:
        return [o._data if isinstance(o, NDArray) else o for o in self.input_objects]

    def finish(self) -> tuple[Any, tuple[int, ...]]:
        """Plan, execute, and give every live LazyArray its value; apply write-backs.
        Returns the plan and the output slots."""
        alive, writebacks = self.live_outputs()
        out_slots = tuple(sorted({x._slot for x in alive} | {s for _, s in writebacks}))
        plan = self.plan_for(out_slots)
        try:
            values = dict(zip(out_slots, plan.execute(self.input_values())))
        except BaseException:
            PLAN_CACHE.discard(plan)  # a plan that failed is not replayed for the next trace
            self.discard("its graph_scope failed to run; " + (
                "arrays it updates in place (x.addi(...)) may already hold their update, as "
                "they would after the same failure eagerly" if self.donations() else
                "nothing was written"))
            raise
        for x in alive:
            x._materialize(values[x._slot])
        for target, slot in writebacks:
            if values[slot] is not target._data:  # else the plan wrote into it (donations)
                np.copyto(target._data, values[slot], casting="same_kind")
        return plan, out_slots

    def discard(self, reason: str = "the graph_scope raised an exception; the trace was "
                                     "discarded and nothing ran") -> None:
        """Fail every pending LazyArray of this trace (touching one raises, with ``reason``)."""
        for ref in self._lazies:
            x = ref()
            if x is not None and x._state is PENDING and x._trace is self:
                x._fail(reason)

    # -- inspection -----------------------------------------------------------------------
    def to_samediff(self, output_slots: tuple[int, ...] = ()) -> SameDiff:
        """The trace as a SameDiff graph: inputs become placeholders named ``in_<k>``, ops keep
        their attributes, the wanted outputs are named ``out_i``."""
        return SameDiff(self.graph.named({s: f"in_{k}" for k, s in enumerate(self.input_slots)},
                                         {s: f"out_{i}" for i, s in enumerate(output_slots)}))
