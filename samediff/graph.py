"""``SameDiff`` (the define-and-run graph) and ``SDVariable`` (a named value in it).

A graph is a list of nodes in creation order (which is a topological order: a node can only
use variables that already exist) and a table of variables of four types: VARIABLE
(trainable, persistent), CONSTANT (persistent), PLACEHOLDER (fed per call) and ARRAY (op
outputs). Ops are recorded through the same op table and argument rules as eager calls.

>>> import numpy as np
>>> from samediff import SameDiff
>>> sd = SameDiff.create()
>>> x = sd.placeholder("x", "float", -1, 3)
>>> w = sd.var("w", np.ones((3, 2), np.float32))
>>> y = sd.nn.relu(x.mmul(w), name="y")
>>> y.shape
(-1, 2)
>>> sd.output({"x": np.ones((4, 3), np.float32)}, "y")["y"].shape
(4, 2)
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterator, Mapping

import numpy as np

from . import interpreter
from .compiler import get_executor, make_plan
from .array import NDArray, as_numpy, type_of
from .binding import is_array_like
from .dtypes import DEFAULT_FLOAT, FLOAT, nd4j_name, to_dtype
from .errors import GraphError, NdDTypeError, OpError, PlaceholderError, UnknownVariableError
from .init import SCHEMES, WeightInit
from .ops import OpDef, TensorType
from .surface import OpSurface


class VariableType(str, Enum):
    VARIABLE = "VARIABLE"
    CONSTANT = "CONSTANT"
    PLACEHOLDER = "PLACEHOLDER"
    ARRAY = "ARRAY"


@dataclass
class Node:
    """One op application: ``outputs = op(*inputs, **attrs)`` (inputs/outputs are names)."""

    name: str
    op: OpDef
    attrs: Any
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass
class VarInfo:
    name: str
    vtype: VariableType
    ttype: TensorType
    value: np.ndarray | None = None
    producer: Node | None = None
    sdvar: "SDVariable | None" = None


class SDVariable(OpSurface):
    """A variable of a ``SameDiff`` graph. Same operators and methods as ``NDArray``;
    each call records an op. Pass ``name=`` to any method to name its output."""

    __slots__ = ("sd", "_name")

    def __init__(self, sd: "SameDiff", name: str) -> None:
        self.sd = sd
        self._name = name

    def _apply(self, op: OpDef, inputs: list, attrs: dict, name: str | None = None) -> Any:
        return self.sd._record(op, inputs, attrs, name)

    def _inplace(self, op: OpDef, inputs: list, attrs: dict, operator: bool) -> Any:
        if operator:  # `v += 1` rebinds the Python name, as for any immutable value
            return self._apply(op, inputs, attrs)
        raise GraphError(f"{op.name}i: SDVariables are immutable graph values; "
                         f"use v = v.{op.name}(...) instead")

    @property
    def _info(self) -> VarInfo:
        return self.sd._vars[self._name]

    @property
    def name(self) -> str:
        return self._name

    def rename(self, new_name: str) -> "SDVariable":
        """Rename this variable (unique within its graph); returns self."""
        self.sd._rename(self._name, new_name)
        return self

    @property
    def variable_type(self) -> VariableType:
        return self._info.vtype

    @property
    def shape(self) -> tuple[int, ...]:
        """Inferred shape; ``-1`` marks dims unknown until run time."""
        return self._info.ttype.shape

    @property
    def dtype(self) -> np.dtype:
        return self._info.ttype.dtype

    @property
    def rank(self) -> int:
        return len(self.shape)

    def get_arr(self) -> NDArray | None:
        """Current value of a VARIABLE/CONSTANT (live, not a copy); None for other types."""
        value = self._info.value
        return None if value is None else NDArray(value)

    def set_array(self, value: Any) -> None:
        """Replace the value of a VARIABLE or CONSTANT (same shape and dtype kind)."""
        self.sd._set_value(self._name, value)

    def mark_as_loss(self) -> "SDVariable":
        """Make this variable one of the graph's losses (several losses are summed)."""
        self.sd.add_loss_variable(self._name)
        return self

    markAsLoss = mark_as_loss

    def gradient(self) -> "SDVariable":
        """The variable holding d(loss)/d(self) (built on first use, like ND4J)."""
        from .autodiff import gradient_names
        wrt = [v.name for v in self.sd.trainable_variables()]
        if self._name not in wrt:
            wrt.append(self._name)
        return self.sd.get_variable(gradient_names(self.sd, wrt)[self._name])

    def eval(self, placeholders: Mapping[str, Any] | None = None) -> NDArray:
        """Compute this variable's value (ND4J ``eval``)."""
        return self.sd.output(placeholders or {}, self._name)[self._name]

    def __repr__(self) -> str:
        i = self._info
        return (f"SDVariable(name={i.name!r}, type={i.vtype.value}, shape={i.ttype.shape}, "
                f"dtype={nd4j_name(i.ttype.dtype)})")


class SameDiff:
    """A define-and-run computation graph (ND4J's ``SameDiff``). Create with ``SameDiff.create()``."""

    def __init__(self) -> None:
        self._vars: dict[str, VarInfo] = {}
        self._nodes: list[Node] = []
        self._node_names: set[str] = set()
        self._scopes: list[str] = []
        self._name_counts: dict[str, int] = {}
        self._losses: list[str] = []
        self._plans: dict[tuple, Any] = {}
        self._version = 0  # bumped by renames and type changes: cached plans name variables
        self._grad_cache: dict[tuple, dict[str, str]] = {}
        self._training_config: Any = None
        self._train_step_cache: Any = None  # (config key, graph state, TrainStep) of the last fit
        from .training.step import UpdaterState
        self._updater_state = UpdaterState()
        from .namespaces import attach_namespaces
        attach_namespaces(self)

    @classmethod
    def create(cls) -> "SameDiff":
        return cls()

    # -- naming ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def name_scope(self, scope: str) -> Iterator[None]:
        """Prefix names created inside the block with ``scope/`` (nestable)."""
        if not scope or "/" in scope:
            raise GraphError(f"name_scope: invalid scope {scope!r}")
        self._scopes.append(scope)
        try:
            yield
        finally:
            self._scopes.pop()

    def _scoped(self, name: str) -> str:
        return "/".join([*self._scopes, name])

    def _unique(self, base: str, taken: set | dict) -> str:
        base = self._scoped(base)
        n = self._name_counts.get(base, 0)
        name = base if n == 0 and base not in taken else f"{base}_{max(n, 1)}"
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        self._name_counts[base] = n + 1
        return name

    def _new_name(self, name: str | None, default: str) -> str:
        if name is None:
            return self._unique(default, self._vars)
        if not isinstance(name, str) or not name:
            raise GraphError(f"variable names must be non-empty strings, got {name!r}")
        full = self._scoped(name)
        if full in self._vars:
            raise GraphError(f"a variable named {full!r} already exists; names must be unique")
        return full

    def _rename(self, old: str, new: str) -> None:
        self._version += 1
        if new in self._vars:
            raise GraphError(f"rename: a variable named {new!r} already exists")
        info = self._vars.pop(old)
        info.name = new
        info.sdvar._name = new  # type: ignore[union-attr]
        self._vars[new] = info
        for node in self._nodes:
            node.inputs = tuple(new if i == old else i for i in node.inputs)
            node.outputs = tuple(new if o == old else o for o in node.outputs)
        self._losses = [new if n == old else n for n in self._losses]
        state = self._updater_state.arrays
        if old in state:  # a trained variable keeps its updater state (Adam moments...)
            state[new] = state.pop(old)

    # -- variables ------------------------------------------------------------------------
    def _add_var(self, name: str, vtype: VariableType, ttype: TensorType,
                 value: np.ndarray | None = None, producer: Node | None = None) -> SDVariable:
        var = SDVariable(self, name)
        self._vars[name] = VarInfo(name, vtype, ttype, value, producer, var)
        return var

    def placeholder(self, name: str, dtype: Any = FLOAT, *shape: int) -> SDVariable:
        """A value fed at run time; ``-1`` dims accept any size (e.g. the batch)."""
        shape = _shape_arg(shape, allow_unknown=True)
        return self._add_var(self._new_name(name, "placeholder"), VariableType.PLACEHOLDER,
                             TensorType(shape, to_dtype(dtype)))

    placeHolder = placeholder

    def var(self, name: str | None = None, *args: Any, init: Any = None, dtype: Any = None,
            shape: Any = None) -> SDVariable:
        """A trainable VARIABLE: ``var(name, array)``, ``var(name, dtype, *shape)`` (zeros) or
        ``var(name, init, dtype, *shape)`` with ``init`` a scheme name (``"xavier"``...) or a
        ``WeightInit``."""
        value, init, dtype, shape = _parse_var_args(args, init, dtype, shape)
        full = self._new_name(name, "var")  # before sampling: a bad name draws no numbers
        if value is None:
            scheme = init if isinstance(init, WeightInit) else WeightInit(init or "zeros")
            value = scheme.sample(shape, dtype or DEFAULT_FLOAT)
        elif dtype is not None:
            value = value.astype(dtype)
        if value.dtype.kind != "f":
            raise GraphError(f"var {name!r}: VARIABLEs are trainable and must be floating point, "
                             f"got {value.dtype}; use constant() for other types")
        return self._add_var(full, VariableType.VARIABLE, TensorType(value.shape, value.dtype),
                             value)

    def constant(self, name: Any = None, value: Any = None) -> SDVariable:
        """A persistent, non-trainable value: ``constant(name, value)`` or ``constant(value)``."""
        if value is None and not isinstance(name, str):
            name, value = None, name
        arr = as_numpy(value).copy()
        return self._add_var(self._new_name(name, "constant"), VariableType.CONSTANT,
                             TensorType(arr.shape, arr.dtype), arr)

    def scalar(self, name: str | None, value: Any, dtype: Any = None) -> SDVariable:
        """A 0-d CONSTANT."""
        arr = np.asarray(value, dtype=to_dtype(dtype) if dtype is not None else None)
        if dtype is None and arr.dtype == np.float64:
            arr = arr.astype(DEFAULT_FLOAT)
        return self.constant(name, arr.reshape(()))

    def get_variable(self, name: str) -> SDVariable:
        return self._info(name).sdvar  # type: ignore[return-value]

    getVariable = get_variable

    def has_variable(self, name: str) -> bool:
        return name in self._vars

    def variable_names(self) -> list[str]:
        return list(self._vars)

    def variables(self) -> list[SDVariable]:
        """All variables, in creation order."""
        return [v.sdvar for v in self._vars.values()]  # type: ignore[misc]

    def trainable_variables(self) -> list[SDVariable]:
        return [v.sdvar for v in self._vars.values() if v.vtype is VariableType.VARIABLE]  # type: ignore[misc]

    def placeholders(self) -> list[SDVariable]:
        return [v.sdvar for v in self._vars.values() if v.vtype is VariableType.PLACEHOLDER]  # type: ignore[misc]

    def ops(self) -> list[Node]:
        return list(self._nodes)

    def get_shape(self, name: str) -> tuple[int, ...]:
        return self._info(name).ttype.shape

    def _info(self, name: str) -> VarInfo:
        try:
            return self._vars[name]
        except KeyError:
            close = [n for n in self._vars if n.split("/")[-1] == name.split("/")[-1]][:3]
            hint = f"; did you mean {close}?" if close else ""
            raise UnknownVariableError(f"no variable named {name!r} in this SameDiff{hint}") from None

    # -- changing variable types ------------------------------------------------------------
    def convert_to_constant(self, var: SDVariable | str, value: Any = None) -> SDVariable:
        """VARIABLE -> CONSTANT (frozen), or PLACEHOLDER -> CONSTANT with the given ``value``."""
        info = self._info(var if isinstance(var, str) else self._own(var).name)
        if info.vtype is VariableType.VARIABLE:
            if value is not None:
                self._set_value(info.name, value)
        elif info.vtype is VariableType.PLACEHOLDER:
            if value is None:
                raise GraphError(f"convert_to_constant: placeholder {info.name!r} needs a value")
            arr = _check_feed(info, value)
            info.value, info.ttype = arr.copy(), TensorType(arr.shape, arr.dtype)
        elif info.vtype is not VariableType.CONSTANT:
            raise GraphError(f"convert_to_constant: {info.name!r} is an {info.vtype.value} "
                             f"(op output) and cannot become a constant")
        info.vtype = VariableType.CONSTANT
        self._version += 1
        return info.sdvar  # type: ignore[return-value]

    def convert_to_variable(self, var: SDVariable | str) -> SDVariable:
        """CONSTANT (floating point) -> trainable VARIABLE."""
        info = self._info(var if isinstance(var, str) else self._own(var).name)
        if info.vtype is VariableType.CONSTANT and info.ttype.dtype.kind == "f" and not info.ttype.weak:
            info.vtype = VariableType.VARIABLE
            self._version += 1  # cached plans and training steps saw it as a constant
        elif info.vtype is not VariableType.VARIABLE:
            raise GraphError(f"convert_to_variable: only floating-point CONSTANTs can become "
                             f"VARIABLEs; {info.name!r} is a {info.vtype.value} of "
                             f"{info.ttype.dtype}")
        return info.sdvar  # type: ignore[return-value]

    def _set_value(self, name: str, value: Any) -> None:
        info = self._info(name)
        if info.vtype not in (VariableType.VARIABLE, VariableType.CONSTANT):
            raise GraphError(f"set_array: {name!r} is a {info.vtype.value}; only VARIABLEs and "
                             f"CONSTANTs hold values (feed placeholders to output())")
        arr = as_numpy(value)
        if not np.can_cast(arr.dtype, info.ttype.dtype, "same_kind"):
            raise GraphError(f"set_array: {name!r} is {info.ttype.dtype}; {arr.dtype} values do not "
                             f"convert safely; cast them first")
        arr = arr.astype(info.ttype.dtype, copy=False)
        if arr.shape != info.ttype.shape:
            raise GraphError(f"set_array: {name!r} has shape {info.ttype.shape}, got {arr.shape}")
        info.value = arr.copy()

    # -- recording ops ----------------------------------------------------------------------
    def _own(self, var: SDVariable) -> SDVariable:
        if var.sd is not self:
            raise GraphError(f"variable {var.name!r} belongs to another SameDiff instance; "
                             f"variables of two graphs cannot be mixed")
        return var

    def _input_name(self, op: OpDef, x: Any, reserved: tuple[str, ...] = ()) -> str:
        taken = self._vars.keys() | set(reserved)  # ``reserved``: the op's own output names
        if isinstance(x, SDVariable):
            return self._own(x).name
        if type(x) in (bool, int, float):  # weak literal, like 2.0 in x * 2.0 (not np.float64)
            return self._add_var(self._unique("literal", taken), VariableType.CONSTANT,
                                 type_of(x), np.asarray(x)).name
        if isinstance(x, OpSurface) and not isinstance(x, NDArray):
            raise GraphError(f"{op.name}: cannot use {type(x).__name__} in a SameDiff graph")
        if is_array_like(x) or isinstance(x, np.generic):
            arr = as_numpy(x).copy()
            return self._add_var(self._unique("constant", taken), VariableType.CONSTANT,
                                 TensorType(arr.shape, arr.dtype), arr).name
        raise OpError(f"{op.name}: cannot use {x!r} ({type(x).__name__}) as an input")

    def _record(self, op: OpDef, inputs: list, attrs: dict, name: str | None = None) -> Any:
        rec = op.make_attrs(attrs)
        # infer before touching the graph, so a failing op leaves no trace behind
        for x in inputs:
            if isinstance(x, SDVariable):
                self._own(x)
        types = [self._vars[x.name].ttype if isinstance(x, SDVariable) else type_of(as_value(x))
                 for x in inputs]
        out_types = op.infer_types(types, rec)
        base = self._new_name(name, op.name)  # checked before literals/constants are added
        outs = tuple(base if i == 0 else f"{base}:{i}" for i in range(len(out_types)))
        for o in outs[1:]:
            if o in self._vars:
                raise GraphError(f"{op.name}: output name {o!r} already exists")
        in_names = tuple(self._input_name(op, x, outs) for x in inputs)
        node_name = base if base not in self._node_names else self._unique(op.name, self._node_names)
        node = Node(node_name, op, rec, in_names, outs)
        self._nodes.append(node)
        self._node_names.add(node_name)
        created = [self._add_var(o, VariableType.ARRAY, t, producer=node)
                   for o, t in zip(outs, out_types)]
        return tuple(created) if op.multi_output or len(created) != 1 else created[0]

    # -- execution ------------------------------------------------------------------------
    def output(self, placeholders: Mapping[str, Any] | None, *outputs: str) -> dict[str, NDArray]:
        """Compute the named variables, running only the ops they need.

        ``placeholders`` maps placeholder names to values; returns ``{name: NDArray}``.
        """
        if len(outputs) == 1 and isinstance(outputs[0], (list, tuple)):
            outputs = tuple(outputs[0])
        if not outputs:
            raise GraphError("output: name at least one variable to compute")
        names = [o.name if isinstance(o, SDVariable) else o for o in outputs]
        for n in names:
            self._info(n)
        producers = {o: n for n in self._nodes for o in n.outputs}
        nodes = interpreter.needed_nodes(self._nodes, producers, names)
        values = self._initial_values(placeholders or {}, nodes, names)
        plan = self._plan(nodes, values, names)
        results = plan.execute([values[k] for k in plan.input_slots])
        return {n: NDArray(r.copy() if self._vars[n].value is not None else np.asarray(r))
                for n, r in zip(names, results)}

    def _plan(self, nodes: list[Node], values: dict[str, Any], names: list[str]) -> Any:
        """The (cached) plan computing ``names`` from these inputs: compiled by default.
        Cached per requested outputs, input dtypes/shapes and graph version."""
        inputs = sorted(values)
        types = {k: self._runtime_type(k, values[k]) for k in inputs}
        key = (tuple(names), tuple((k, types[k]) for k in inputs), len(self._nodes), self._version,
               get_executor())
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= 64:
                self._plans.clear()
            plan = self._plans[key] = typed_plan(nodes, types, names)
        return plan

    def _runtime_type(self, name: str, value: Any) -> TensorType:
        info = self._vars[name]
        if info.ttype.weak:
            return info.ttype
        return TensorType(np.shape(value), np.asarray(value).dtype)

    def do_udf(self, udf: Any, *inputs: Any, **properties: Any) -> tuple:
        """Apply a user-defined op (its handle, ``OpDef`` or name) to variables; returns the
        output variables as a tuple (ND4J ``sd.doUdf``). Pass ``name=`` to name them."""
        from .ops import get_op
        op = getattr(udf, "op", udf)
        op = get_op(op) if isinstance(op, str) else op
        name = properties.pop("name", None)
        out = self._record(op, list(inputs), properties, name)
        return out if isinstance(out, tuple) else (out,)

    doUdf = do_udf

    # -- losses and gradients ---------------------------------------------------------------
    @property
    def loss_variables(self) -> list[str]:
        return list(self._losses)

    def add_loss_variable(self, name: "str | SDVariable") -> None:
        name = self._own(name).name if isinstance(name, SDVariable) else self._info(name).name
        if name not in self._losses:
            self._losses.append(name)

    def set_loss_variables(self, *names: "str | SDVariable") -> None:
        """Replace the set of losses (their sum is minimized / differentiated)."""
        self._losses = []
        for n in names:
            self.add_loss_variable(n)

    def calculate_gradients(self, placeholders: Mapping[str, Any] | None,
                            *names: str) -> dict[str, NDArray]:
        """Gradients of the summed losses w.r.t. the named variables (default: all trainable
        VARIABLEs), as ``{variable name: gradient array}``."""
        from .autodiff import gradient_names
        if len(names) == 1 and isinstance(names[0], (list, tuple)):
            names = tuple(names[0])
        wrt = [n.name if isinstance(n, SDVariable) else n for n in names] or \
            [v.name for v in self.trainable_variables()]
        grad_names = gradient_names(self, wrt)
        values = self.output(placeholders, *grad_names.values())
        return {n: values[g] for n, g in grad_names.items()}

    calculateGradients = calculate_gradients

    def output_single(self, placeholders: Mapping[str, Any] | None, output: str) -> NDArray:
        return self.output(placeholders, output)[output]

    outputSingle = output_single

    def _initial_values(self, feeds: Mapping[str, Any], nodes: list[Node],
                        outputs: list[str]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, value in feeds.items():
            info = self._info(name)
            if info.vtype is not VariableType.PLACEHOLDER:
                raise PlaceholderError(f"output: {name!r} is a {info.vtype.value}, not a "
                                       f"placeholder; only placeholders can be fed")
            values[name] = _check_feed(info, value)
        used = {i for n in nodes for i in n.inputs} | set(outputs)
        for name in used:
            info = self._vars[name]
            if info.value is not None:
                values[name] = info.value.item() if info.ttype.weak else info.value
            elif info.vtype is VariableType.PLACEHOLDER and name not in values:
                raise PlaceholderError(f"output: placeholder {name!r} ({info.ttype}) needs a "
                                       f"value; pass it as output({{{name!r}: array}}, ...)")
        return values

    def __getattr__(self, name: str) -> Any:
        """Every op of the table is also available directly: ``sd.matmul``, ``sd.concat``..."""
        if name.startswith("_") or name == "all_ops":
            raise AttributeError(name)
        return getattr(self.all_ops, name)

    # -- training (samediff/training) -------------------------------------------------------
    @property
    def training_config(self) -> Any:
        return self._training_config

    @training_config.setter
    def training_config(self, config: Any) -> None:
        self.set_training_config(config)

    def set_training_config(self, config: Any) -> None:
        """Set the ``TrainingConfig`` used by ``fit`` (updater, regularization, data mapping).
        Changing the updater type resets the updater state."""
        from .training.config import TrainingConfig
        if not isinstance(config, TrainingConfig):
            raise GraphError(f"set_training_config: expected a TrainingConfig, got {config!r}")
        for name in [*config.feature_mapping, *config.label_mapping]:
            self._info(name)
        old = self._training_config
        if old is not None and type(old.updater) is not type(config.updater):
            from .training.step import UpdaterState
            self._updater_state = UpdaterState()
        self._training_config = config

    setTrainingConfig = set_training_config

    def fit(self, data: Any = None, epochs: int = 1, *, batch_size: int | None = 32,
            shuffle: bool = True, validation: Any = None, evaluations: Any = None,
            label: str | None = None, listeners: Any = (), verbose: int | None = None,
            seed: int | None = None, on_nonfinite: str = "raise") -> Any:
        """Train with the graph's ``TrainingConfig``; returns a ``History``.

        ``data`` is ``(features, labels)`` arrays (cut into shuffled batches of
        ``batch_size``), a dict of arrays keyed by placeholder, or any re-iterable of batches.
        Each step (forward, backward, regularization, updater) runs as one compiled plan and
        updates the variables in place. ``evaluations={"probs": Evaluation()}`` records
        training (and, with ``validation``, validation) metrics per epoch.

        A batch whose loss or gradients are NaN/inf changes nothing; ``on_nonfinite="raise"``
        (default) then raises ``NonFiniteError``, ``"skip"`` leaves the batch out and counts
        it in the epoch's ``metrics["skipped"]``. A failed fit leaves the graph's structure
        as it was (``samediff/training/rollback.py``).

        >>> history = sd.fit((x_train, y_train), epochs=5, batch_size=64)  # doctest: +SKIP
        """
        from .training.trainer import Trainer
        return Trainer(self, listeners, verbose, on_nonfinite).fit(
            data, epochs, batch_size, shuffle, validation, evaluations, label, seed)

    def evaluate(self, data: Any, output: "str | SDVariable", *evaluations: Any,
                 label: str | None = None, batch_size: int | None = 256) -> Any:
        """Feed ``(labels, predictions of output)`` for every batch of ``data`` to each
        evaluation (``Evaluation()``, ``ROC()``...); returns the evaluation (or a list).

        >>> ev = sd.evaluate((x_test, y_test), "probs", Evaluation())  # doctest: +SKIP
        """
        from .training.trainer import evaluate
        name = output.name if isinstance(output, SDVariable) else output
        evs = evaluate(self, data, name, evaluations, label, batch_size)
        return evs[0] if len(evs) == 1 else evs

    # -- inspection -----------------------------------------------------------------------
    def summary(self) -> str:
        """A readable table of variables (type, shape, dtype, producing op) and ops."""
        from .namespaces import summary_text
        return summary_text(self)

    # -- persistence (samediff/serialize.py) ------------------------------------------------
    def save(self, path: Any, save_updater_state: bool = True) -> None:
        """Save the graph and its VARIABLE/CONSTANT values to ``path`` (a zip of
        ``graph.json`` + ``.npy`` arrays), atomically: a failed save leaves any old file intact.

        >>> sd.save("model.sdz"); sd2 = SameDiff.load("model.sdz")  # doctest: +SKIP
        """
        from . import serialize  # serialize sits above graph (it imports it), like namespaces
        serialize.save(self, path, save_updater_state=save_updater_state)

    @classmethod
    def load(cls, path: Any, *, max_graph_bytes: int | None = None) -> "SameDiff":
        """Load a graph written by ``save``. Never runs code from the file; raises a
        ``SerializationError`` subclass (``CorruptFileError``, ``FormatVersionError``,
        ``UnknownOpError``) naming the file for a file it cannot trust. ``graph.json`` beyond
        ``max_graph_bytes`` (default 256 MiB) is refused before it is inflated."""
        from . import serialize
        return serialize.load(path, cls, max_graph_bytes=max_graph_bytes)

    def __repr__(self) -> str:
        return f"SameDiff({len(self._vars)} variables, {len(self._nodes)} ops)"


def typed_plan(nodes: list[Node], input_types: dict[str, TensorType], names: list[str],
               donate: dict[str, str] | None = None) -> Any:
    """A plan computing ``names`` with ``nodes`` from inputs of these concrete types (the
    inputs of the plan, in order, are ``sorted(input_types)``). Every node is re-typed first,
    so placeholders' -1 dims are known and a bad feed is reported with its node's name."""
    types = infer_node_types(nodes, input_types)
    return make_plan(nodes, sorted(input_types), names, types, exact_shapes=True, donate=donate)


def infer_node_types(nodes: list[Node], input_types: dict[str, TensorType]) -> dict[str, TensorType]:
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


def as_value(x: Any) -> Any:
    """Runtime-like value of a non-variable input, for type inference."""
    if type(x) in (bool, int, float):
        return x
    return as_numpy(x)


def _check_feed(info: VarInfo, value: Any) -> Any:
    arr = np.asarray(value._data if isinstance(value, NDArray) else value)
    want = info.ttype
    if want.weak:  # a weak scalar placeholder stays a Python scalar (it must not promote)
        if arr.shape != () or not np.can_cast(arr.dtype, want.dtype, "same_kind"):
            raise PlaceholderError(f"placeholder {info.name!r} is a Python {want.dtype.kind} "
                                   f"scalar; got {arr.dtype} of shape {arr.shape}")
        return arr.astype(want.dtype).item()
    if arr.dtype != want.dtype:
        if not np.can_cast(arr.dtype, want.dtype, "same_kind"):
            raise PlaceholderError(f"placeholder {info.name!r} is {want.dtype}; got {arr.dtype} "
                                   f"values, which do not convert safely; cast them first")
        converted = arr.astype(want.dtype)
        if arr.dtype.kind in "iu" and want.dtype.kind == "f":
            _check_exact_ints(info, arr, converted)
        arr = converted
    if len(arr.shape) != len(want.shape) or any(
            w >= 0 and w != a for w, a in zip(want.shape, arr.shape)):
        raise PlaceholderError(f"placeholder {info.name!r} has shape {want.shape} (-1 = any); "
                               f"got a value of shape {arr.shape}")
    return arr


def _check_exact_ints(info: VarInfo, ints: np.ndarray, floats: np.ndarray) -> None:
    """Integer feeds of a float placeholder are converted only when every value survives:
    float32 holds integers exactly up to 2**24, float64 up to 2**53 (beyond, some round).
    Float feeds of another precision are rounded like numpy's ``astype`` (documented)."""
    with np.errstate(invalid="ignore", over="ignore"):
        changed = floats.astype(ints.dtype) != ints
        changed |= ~np.isfinite(floats)
    if changed.any():
        bad = ints[changed].flat[0]
        bits = np.finfo(floats.dtype).nmant + 1
        raise PlaceholderError(f"placeholder {info.name!r} is {floats.dtype}; the {ints.dtype} "
                               f"value {bad} is not exactly representable in it ({floats.dtype} "
                               f"holds integers exactly only up to 2**{bits}); cast the data "
                               f"yourself if rounding is intended")


def _shape_arg(shape: Any, allow_unknown: bool = False) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    out = tuple(int(d) for d in shape)
    if any(d < (-1 if allow_unknown else 0) for d in out):
        raise GraphError(f"invalid shape {out}" + ("" if allow_unknown else " (-1 not allowed here)"))
    return out


_INIT_NAMES = set(SCHEMES)


def _parse_var_args(args: tuple, init: Any, dtype: Any, shape: Any) -> tuple:
    value, dims = None, list(shape) if shape is not None else []
    for a in args:
        if isinstance(a, WeightInit) or (isinstance(a, str) and a in _INIT_NAMES):
            if init is not None:
                raise GraphError(f"var: init scheme given twice ({init!r} and {a!r})")
            init = a
        elif isinstance(a, (int, np.integer)) and not isinstance(a, bool):
            dims.append(int(a))
        elif isinstance(a, (tuple, list)) and all(isinstance(d, (int, np.integer)) for d in a):
            dims.extend(int(d) for d in a)
        elif isinstance(a, (NDArray, np.ndarray)):
            value = as_numpy(a).copy()
        elif isinstance(a, (str, np.dtype, type)):
            if dtype is not None:
                raise GraphError(f"var: data type given twice ({dtype!r} and {a!r})")
            try:
                dtype = to_dtype(a)
            except NdDTypeError as exc:
                raise NdDTypeError(f"var: {a!r} is neither an init scheme "
                                   f"{sorted(_INIT_NAMES)} nor a data type ({exc})") from None
        else:
            raise GraphError(f"var: cannot interpret argument {a!r}; expected an array, an init "
                             f"scheme {sorted(_INIT_NAMES)}, a dtype or shape dims")
    dtype = to_dtype(dtype) if dtype is not None else None
    if value is not None and dims and tuple(dims) != value.shape:
        raise GraphError(f"var: shape {tuple(dims)} contradicts the value's shape {value.shape}")
    if value is None and any(d < 0 for d in dims):
        raise GraphError(f"var: variables need a fully known shape, got {tuple(dims)}")
    return value, init, dtype, tuple(dims)

