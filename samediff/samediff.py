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
import copy
from typing import Any, Callable, Hashable, Iterator, Mapping, TypeVar

import numpy as np

from . import autodiff, serialize
from .errors import GradientError
from .array import ACTIVE_BODY, NDArray, as_numpy
from .compiler.cache import Structure
from .control.nd4j_methods import ControlFlowMethods
from .dtypes import DEFAULT_FLOAT, FLOAT, nd4j_name, to_dtype
from .frontends.nd4j import camel_case_method
from .graph_args import parse_var_args, shape_arg
from .errors import GraphError
from .init import WeightInit
from .ir import Graph, Node, Var, VariableType, did_you_mean, infer_node_types
from .namespaces import attach_namespaces, summary_text
from .distributed_methods import DistributedMethods
from .onnx_methods import OnnxMethods
from .ops import TensorType, get_op
from .recorder import GraphRecorder, GraphValue
from .execution import check_feed, run_graph, typed_plan
from .training.config import TrainingConfig
from .training.history import History
from .training.model import read_value, write_value
from .training.rollback import ModelSnapshot
from .training.state import UpdaterState
from .training.trainer import evaluate, fit

#: The variable record of the graph IR (``samediff.ir.Var``), under its former name.
VarInfo = Var
_T = TypeVar("_T")

__all__ = ["SameDiff", "SDVariable", "VariableType", "Node", "VarInfo", "typed_plan",
           "infer_node_types"]


class SDVariable(GraphValue):
    """A variable of a ``SameDiff`` graph. Same operators and methods as ``NDArray``;
    each call records an op into its graph (also through ``nd.*`` functions: ``nd.exp(v)``).
    Pass ``name=`` to any method to name its output."""

    __slots__ = ("sd",)
    _leading_name = True  # ND4J: v.sub("prediction", b), v.mean("loss")

    def __init__(self, sd: "SameDiff", name: str) -> None:
        super().__init__(sd._recorder, name)
        self.sd = sd

    @property
    def _info(self) -> Var:
        return self.sd.graph.vars[self._name]

    @property
    def sameDiff(self) -> "SameDiff":  # noqa: N802 - ND4J's field name
        """The graph this variable belongs to (ND4J's ``sameDiff`` field; also ``.sd``)."""
        return self.sd

    def get_same_diff(self) -> "SameDiff":
        """ND4J's ``getSameDiff()``: the graph this variable belongs to.

        >>> import numpy as np
        >>> from samediff import SameDiff
        >>> sd = SameDiff.create()
        >>> sd.var("v", np.ones(2)).getSameDiff() is sd
        True
        """
        return self.sd

    getSameDiff = get_same_diff

    def rename(self, new_name: str) -> "SDVariable":
        """Rename this variable (unique within its graph); returns self."""
        self.sd._rename(self._name, new_name)
        return self

    def get_var_name(self) -> str:
        """ND4J's ``getVarName()``: the name."""
        return self._name

    getVarName = get_var_name

    def set_var_name(self, new_name: str) -> None:
        """ND4J's ``setVarName(name)``: rename (the name stays unique in its graph)."""
        self.rename(new_name)

    setVarName = set_var_name

    @property
    def variable_type(self) -> VariableType:
        return self._info.vtype

    def get_variable_type(self) -> VariableType:
        """ND4J's ``getVariableType()``."""
        return self._info.vtype

    getVariableType = get_variable_type

    def get_arr(self, enforce_existence: bool = False) -> NDArray | None:
        """Current value of a VARIABLE/CONSTANT (live, not a copy; a CONSTANT's read-only),
        or the array set on a placeholder; None otherwise — or (``getArr(true)``) an error."""
        value = self._info.value
        if value is not None and self._info.vtype is VariableType.CONSTANT:
            value = value.view()
            value.flags.writeable = False
        if value is None:
            value = self.sd._placeholder_arrays.get(self._name)
        if value is None and self.sd._executed and self._info.vtype is VariableType.ARRAY:
            return self.eval()  # after sd.exec(), as ND4J: from the kept placeholder values
        if value is None and enforce_existence:
            raise GraphError(f"getArr(true): {self._name!r} is a {self._info.vtype.value} with no "
                             f"value; compute it with eval() or output(...)")
        return None if value is None else NDArray(value)

    getArr = get_arr

    def set_array(self, value: Any) -> None:
        """Replace the value of a VARIABLE or CONSTANT (same shape and dtype kind). On a
        placeholder it sets the array that ``sd.convert_to_constant(ph)`` freezes (ND4J)."""
        self.sd._set_value(self._name, value)

    setArray = set_array

    def mark_as_loss(self) -> "SDVariable":
        """Make this variable one of the graph's losses (several losses are summed)."""
        self.sd.add_loss_variable(self._name)
        return self

    markAsLoss = mark_as_loss

    def gradient(self) -> "SDVariable":
        """The variable holding d(loss)/d(self) (built on first use, like ND4J). Placeholders
        and constants have none (seed 004: gradients are computed for VARIABLEs and ARRAYs);
        ``sd.calculate_gradients(feed, "x")`` still differentiates with respect to either."""
        vtype = self._info.vtype
        if vtype in (VariableType.PLACEHOLDER, VariableType.CONSTANT):
            raise GradientError(f"{self._name!r} is a {vtype.value}: {vtype.value.lower()}s have "
                                f"no gradient variable; use sd.calculate_gradients(feed, "
                                f"{self._name!r}) for d(loss)/d({self._name})")
        wrt = [v.name for v in self.sd.trainable_variables()]
        if self._name not in wrt:
            wrt.append(self._name)
        return self.sd.get_variable(self.sd._gradient_names(wrt)[self._name])

    getGradient = gradient
    get_gradient = gradient

    def eval(self, placeholders: Mapping[str, Any] | None = None) -> NDArray:
        """Compute this variable's value (ND4J ``eval``)."""
        return self.sd.output(placeholders or {}, self._name)[self._name]

    def __reduce__(self) -> tuple:
        """Pickled (and deep-copied) as (its SameDiff, its name): pickled together, a model
        and its variables stay one graph."""
        return (_variable, (self.sd, self._name))

    def __repr__(self) -> str:
        i = self._info
        return (f"SDVariable(name={i.name!r}, type={i.vtype.value}, shape={i.ttype.shape}, "
                f"dtype={nd4j_name(i.ttype.dtype)})")


class _Recorder(GraphRecorder):
    """A SameDiff's recorder: its handles are the SameDiff's own ``SDVariable`` s."""

    read_hint = ("in a SameDiff graph: a variable's truth value or number is ambiguous until "
                 "the graph runs; compute it with v.eval() or sd.output(...), or keep the "
                 "computation in ops (sd.base.where(cond, a, b) or sd.ifCond instead of "
                 "`if`, sd.whileLoop or nd.scan instead of a Python loop)")

    def __init__(self, sd: "SameDiff") -> None:
        super().__init__(sd.graph)
        self.sd = sd

    def handle(self, name: str) -> "SDVariable":
        return self.sd._handle(name)


class SameDiff(ControlFlowMethods, OnnxMethods, DistributedMethods):
    """A define-and-run computation graph (ND4J's ``SameDiff``): a façade over a graph IR
    (``self.graph``, ``samediff/ir.py``), the handles it gave out, its losses and its training
    state. Create with ``SameDiff.create()``."""

    def __init__(self, graph: Graph | None = None) -> None:
        self.graph = graph if graph is not None else Graph()
        self._recorder = _Recorder(self)
        self._handles: dict[str, SDVariable] = {}
        self._losses: list[str] = []
        self._structures: dict[tuple, Structure] = {}  # (graph version, outputs) -> key part
        self.last_plan: Any = None  # the plan of the last output() call (for inspection)
        self._grad_cache: dict[tuple, dict[str, str]] = {}
        self._training_config: TrainingConfig | None = None
        # (key, graph version, TrainStep) of the last fit (see cached_train_step)
        self._train_step_cache: tuple[Hashable, int, Any] | None = None
        self._updater_state = UpdaterState()
        self._placeholder_arrays: dict[str, np.ndarray] = {}  # ph.set_array(a), ND4J
        self._executed = False  # sd.exec() ran: ARRAY variables' getArr() computes them
        attach_namespaces(self, self._record)

    @classmethod
    def create(cls) -> "SameDiff":
        return cls()

    def _set_graph(self, graph: Graph) -> None:
        """Adopt ``graph`` (an extension of the current one, e.g. with gradient nodes)."""
        self.graph = self._recorder.graph = graph

    def _handle(self, name: str) -> SDVariable:
        handle = self._handles.get(name)
        if handle is None:
            handle = self._handles[name] = SDVariable(self, name)
        return handle

    # -- naming ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def name_scope(self, scope: str) -> Iterator[None]:
        """Prefix names created inside the block with ``scope/`` (nestable). The scope is
        opened and closed on the current graph: asking for gradients inside the block swaps in
        a new graph, which inherits the open scopes."""
        if not scope or "/" in scope:
            raise GraphError(f"name_scope: invalid scope {scope!r}")
        self.graph.scopes.append(scope)
        try:
            yield
        finally:
            self.graph.scopes.pop()

    def _rename(self, old: str, new: str) -> None:
        self.graph.rename(old, new)
        handle = self._handles.pop(old, None)
        if handle is not None:
            handle._name = new
            self._handles[new] = handle
        self._losses = [new if n == old else n for n in self._losses]
        if old in self._placeholder_arrays:
            self._placeholder_arrays[new] = self._placeholder_arrays.pop(old)
        state = self._updater_state.arrays
        if old in state:  # a trained variable keeps its updater state (Adam moments...)
            state[new] = state.pop(old)

    # -- variables ------------------------------------------------------------------------
    def _add_var(self, name: str, vtype: VariableType, ttype: TensorType,
                 value: np.ndarray | None = None) -> SDVariable:
        return self._recorder.add(vtype, ttype, name, value)

    def placeholder(self, name: str, dtype: Any = FLOAT, *shape: int) -> SDVariable:
        """A value fed at run time; ``-1`` dims accept any size (e.g. the batch). The dtype may
        be left out, as in ND4J's ``placeHolder("labels", 10)`` (FLOAT)."""
        if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
            dtype, shape = FLOAT, (int(dtype), *shape)
        shape = shape_arg(shape, allow_unknown=True)
        return self._add_var(self.graph.new_name(name, "placeholder"), VariableType.PLACEHOLDER,
                             TensorType(shape, to_dtype(dtype)))

    placeHolder = placeholder

    def var(self, name: str | None = None, *args: Any, init: Any = None, dtype: Any = None,
            shape: Any = None) -> SDVariable:
        """A trainable VARIABLE: ``var(name, array)``, ``var(name, dtype, *shape)`` (zeros) or
        ``var(name, init, dtype, *shape)`` with ``init`` a scheme name (``"xavier"``...) or a
        ``WeightInit`` (ND4J's ``XavierInitScheme('c', 784, 100)``...). The name may be left out,
        as in ND4J's ``var(initScheme, dtype, *shape)``: the variable is then named ``var``,
        ``var_1``..."""
        if name is not None and not isinstance(name, str):  # ND4J's unnamed overloads
            name, args = None, (name, *args)
        value, init, dtype, shape = parse_var_args(args, init, dtype, shape)
        full = self.graph.new_name(name, "var")  # before sampling: a bad name draws no numbers
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
        return self._add_var(self.graph.new_name(name, "constant"), VariableType.CONSTANT,
                             TensorType(arr.shape, arr.dtype), arr)

    def scalar(self, name: str | None, value: Any, dtype: Any = None) -> SDVariable:
        """A 0-d CONSTANT."""
        arr = np.asarray(value, dtype=to_dtype(dtype) if dtype is not None else None)
        if dtype is None and arr.dtype == np.float64:
            arr = arr.astype(DEFAULT_FLOAT)
        return self.constant(name, arr.reshape(()))

    def get_variable(self, name: str) -> SDVariable:
        return self._handle(self._info(name).name)

    getVariable = get_variable

    def has_variable(self, name: str) -> bool:
        return name in self.graph.vars

    def variable_names(self) -> list[str]:
        return list(self.graph.vars)

    variableNames = variable_names

    def variables(self) -> list[SDVariable]:
        """All variables, in creation order."""
        return [self._handle(n) for n in self.graph.vars]

    def trainable_variables(self) -> list[SDVariable]:
        return [self._handle(n) for n in self.trainable_names()]

    def trainable_names(self) -> list[str]:
        """The names of the trainable VARIABLEs, in creation order."""
        return [n for n, v in self.graph.vars.items() if v.vtype is VariableType.VARIABLE]

    def placeholders(self) -> list[SDVariable]:
        return [self._handle(n) for n, v in self.graph.vars.items()
                if v.vtype is VariableType.PLACEHOLDER]

    def ops(self) -> list[Node]:
        return list(self.graph.nodes)

    def get_shape(self, name: str) -> tuple[int, ...]:
        """The inferred shape of a variable (``-1`` = unknown until run time), no execution."""
        return self._info(name).ttype.shape

    getShapeForVarName = get_shape

    def _info(self, name: str) -> Var:
        return self.graph.var(name)

    # -- changing variable types ------------------------------------------------------------
    def convert_to_constant(self, var: SDVariable | str, value: Any = None) -> SDVariable:
        """VARIABLE -> CONSTANT (frozen), or PLACEHOLDER -> CONSTANT with the given ``value``."""
        info = self._info(var if isinstance(var, str) else self._own(var).name)
        if info.vtype is VariableType.VARIABLE:
            if value is not None:
                self._set_value(info.name, value)
        elif info.vtype is VariableType.PLACEHOLDER:
            if value is None:
                value = self._placeholder_arrays.pop(info.name, None)
            if value is None:
                raise GraphError(f"convert_to_constant: placeholder {info.name!r} needs a value: "
                                 f"call ph.set_array(array) first (ND4J), or pass "
                                 f"convert_to_constant(ph, array)")
            self._placeholder_arrays.pop(info.name, None)
            arr = check_feed(info, value)
            self.graph.set_kind(info.name, VariableType.CONSTANT,
                                TensorType(arr.shape, arr.dtype), arr.copy())
        elif info.vtype is not VariableType.CONSTANT:
            raise GraphError(f"convert_to_constant: {info.name!r} is an {info.vtype.value} "
                             f"(op output) and cannot become a constant")
        self.graph.set_kind(info.name, VariableType.CONSTANT)
        return self._handle(info.name)

    convertToConstant = convert_to_constant

    def convert_to_variable(self, var: SDVariable | str) -> SDVariable:
        """CONSTANT (floating point) -> trainable VARIABLE."""
        info = self._info(var if isinstance(var, str) else self._own(var).name)
        if info.vtype is VariableType.CONSTANT and info.ttype.dtype.kind == "f" and not info.ttype.weak:
            # a new version: cached plans and training steps saw it as a constant
            self.graph.set_kind(info.name, VariableType.VARIABLE)
        elif info.vtype is not VariableType.VARIABLE:
            raise GraphError(f"convert_to_variable: only floating-point CONSTANTs can become "
                             f"VARIABLEs; {info.name!r} is a {info.vtype.value} of "
                             f"{info.ttype.dtype}")
        return self._handle(info.name)

    convertToVariable = convert_to_variable

    def _set_value(self, name: str, value: Any) -> None:
        info = self._info(name)
        if info.vtype is VariableType.PLACEHOLDER:  # ND4J: set, then convertToConstant(ph)
            self._placeholder_arrays[name] = check_feed(info, value).copy()
            return
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
        if not self._recorder.owns(var):
            raise GraphError(f"variable {var.name!r} belongs to another SameDiff instance; "
                             f"variables of two graphs cannot be mixed")
        return var

    def _record(self, op: Any, inputs: list, attrs: dict, name: str | None = None) -> Any:
        """Record ``op`` into this graph, whatever its inputs are (``sd.math.*`` functions with
        no variable input still belong here); ops on variables reach it through ``bind``. In a
        control-flow body being recorded (``nd.scan(lambda h, x: sd.math.tanh(...))``) an op
        on the body's values records into the body."""
        body = ACTIVE_BODY.get()
        # an op reading a value of the body being recorded -- or of an enclosing body (a cond
        # inside a while_loop's body reading the loop's carry): the body records it (capturing
        # what is not its own); ops on this graph's values alone stay in this graph
        if body is not None and any(isinstance(x, GraphValue) and (
                body.owns(x) or not self._recorder.owns(x)) for x in inputs):
            return body.record(op, inputs, attrs, name)
        return self._recorder.record(op, inputs, attrs, name)

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
            if not isinstance(n, str):
                raise GraphError(f"output: outputs are variable names or SDVariables, got {n!r}")
            if n not in self.graph.vars:
                raise self.graph.unknown_output(n)
        self.last_plan, results = run_graph(self.graph, placeholders or {}, names,
                                            self._placeholder_arrays, self._structures)
        return {n: NDArray(r) for n, r in zip(names, results)}

    def do_udf(self, udf: Any, *inputs: Any, **properties: Any) -> tuple:
        """Apply a user-defined op (its handle, ``OpDef`` or name) to variables; returns the
        output variables as a tuple (ND4J ``sd.doUdf``). Pass ``name=`` to name them."""
        name = properties.pop("name", None)
        if hasattr(udf, "udf_call"):  # a class-style UDF instance: sd.doUdf(MyAddUdf(sd, x, y))
            op, bound, props = udf.udf_call()
            inputs, properties = (*bound, *inputs), {**props, **properties}
        else:
            op = getattr(udf, "op", udf)
            op = get_op(op) if isinstance(op, str) else op
        out = self._record(op, list(inputs), properties, name)
        outs = out if isinstance(out, tuple) else (out,)
        if hasattr(udf, "udf_recorded"):  # the instance answers outputVariables() from now on
            udf.udf_recorded(outs)
        return outs

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
        if len(names) == 1 and isinstance(names[0], (list, tuple)):
            names = tuple(names[0])
        wrt = [n.name if isinstance(n, SDVariable) else n for n in names] or \
            [v.name for v in self.trainable_variables()]
        grad_names = self._gradient_names(wrt)
        values = self.output(placeholders, *grad_names.values())
        return {n: values[g] for n, g in grad_names.items()}

    calculateGradients = calculate_gradients

    def _gradient_names(self, wrt: list[str]) -> dict[str, str]:
        """Gradient variable names for ``wrt`` against the current losses: built once by
        autodiff (a new graph: this one plus the backward nodes), which this SameDiff adopts."""
        key = (tuple(self._losses), tuple(wrt))
        cached = self._grad_cache.get(key)
        if cached is None:
            graph, cached = autodiff.grad(self.graph, list(self._losses), list(wrt))
            self._set_graph(graph)
            self._grad_cache[key] = cached
        return cached

    def output_single(self, placeholders: Mapping[str, Any] | None, output: str) -> NDArray:
        return self.output(placeholders, output)[output]

    outputSingle = output_single

    def exec(self, placeholders: Mapping[str, Any] | None = None,
             *outputs: Any) -> dict[str, NDArray]:
        """ND4J's ``exec``: ``output`` for the named variables, or for every ARRAY variable
        when none is named (the seeds' execute-everything ``sd.exec()``). The placeholder
        values are kept, as ``set_array`` keeps them, and ``v.getArr()`` of an ARRAY variable
        then returns its value computed from them.

        >>> import nd4py as nd
        >>> sd = nd.SameDiff.create()
        >>> y = sd.var("x", nd.create([1.0, 2.0])).mul(3.0)
        >>> sorted(sd.exec())
        ['mul']
        >>> y.getArr().numpy().tolist()
        [3.0, 6.0]
        """
        feeds = dict(placeholders or {})
        names = list(outputs) or [v.name for v in self.graph.vars.values()
                                  if v.vtype is VariableType.ARRAY]
        results = self.output(feeds, *names) if names else {}
        for name, value in feeds.items():  # output() checked them: all are placeholders
            self._set_value(name, value)
        self._executed = True
        return results

    def exec_single(self, placeholders: Mapping[str, Any] | None, output: str) -> NDArray:
        """ND4J's ``execSingle``: ``exec`` of one variable, its value."""
        return self.exec(placeholders, output)[output]

    def exec_and_end_result(self) -> NDArray | None:
        """ND4J's old ``execAndEndResult()``: ``exec()``, then the value of the last op's
        (first) output; None for a graph without ops."""
        results = self.exec()
        return results[self.graph.nodes[-1].outputs[0]] if self.graph.nodes else None

    execAll = exec_all = exec
    execSingle = exec_single
    execAndEndResult = exec_and_end_result

    def __getattr__(self, name: str) -> Any:
        """Every op of the table is also available directly: ``sd.matmul``, ``sd.concat``..."""
        if name.startswith("_") or name == "all_ops":
            raise AttributeError(name)
        try:
            return getattr(self.all_ops, name)
        except AttributeError:
            pass
        try:
            return camel_case_method(self, name)  # sd.setLossVariables(...)
        except AttributeError:
            pass
        if name in _RENAMED:
            hint = f"; did you mean {_RENAMED[name]!r}?"
        else:
            known = [n for n in dir(type(self)) if not n.startswith("_")] + dir(self.all_ops)
            hint = did_you_mean(name, known) or "; see dir(sd) for its methods and ops"
        raise AttributeError(f"SameDiff has no method or op {name!r}{hint}") from None

    # -- training (samediff/training; TrainableModel, samediff/training/model.py) -----------
    @property
    def training_config(self) -> TrainingConfig | None:
        return self._training_config

    @training_config.setter
    def training_config(self, config: TrainingConfig) -> None:
        self.set_training_config(config)

    def read_value(self, name: str) -> np.ndarray:
        """The live array of VARIABLE/CONSTANT ``name`` (not a copy; training updates it)."""
        return read_value(self.graph, name)

    def write_value(self, name: str, value: np.ndarray) -> None:
        """Write trained ``value`` into ``name``'s own array (in place, unlike ``set_array``)."""
        write_value(self.graph, name, value)

    def cached_train_step(self, key: Hashable, build: Callable[[], _T]) -> _T:
        """``fit``'s compiled step: this SameDiff keeps the last one, reused while ``key``
        (config, losses, parameters) and the graph are unchanged; otherwise ``build()``."""
        cached = self._train_step_cache
        if cached is not None and cached[0] == key and cached[1] == self.graph.version:
            return cached[2]
        step = build()
        # the version after the step set the loss variables (TrainingConfig.loss_variables)
        self._train_step_cache = (key, self.graph.version, step)
        return step

    def snapshot(self) -> ModelSnapshot:
        """This SameDiff as it is now, for a failed ``fit`` to restore (every attribute, the
        graph's structure, the handles' names; ``samediff/training/rollback.py``)."""
        names = [(h, h.name) for h in self._handles.values()]

        def handles() -> None:  # the recorder follows the graph; handles get their names back
            self._set_graph(self.graph)
            for handle, name in names:
                handle._name = name
        return ModelSnapshot(self, self.graph, self._updater_state, ("_updater_state",), handles)

    @property
    def updater_state(self) -> UpdaterState:
        """The updater's per-variable arrays and step counters (saved with the model)."""
        return self._updater_state

    def set_training_config(self, config: Any) -> None:
        """Set the ``TrainingConfig`` used by ``fit`` (updater, regularization, data mapping).
        Changing the updater type resets the updater state."""
        if not isinstance(config, TrainingConfig):
            raise GraphError(f"set_training_config: expected a TrainingConfig, got {config!r}")
        for name in [*config.feature_mapping, *config.label_mapping]:
            self._info(name)
        old = self._training_config
        if old is not None and type(old.updater) is not type(config.updater):
            self._updater_state = UpdaterState()
        self._training_config = config

    setTrainingConfig = set_training_config

    def fit(self, data: Any = None, epochs: int = 1, *, batch_size: int | None = 32,
            shuffle: bool = True, validation: Any = None, evaluations: Any = None,
            label: str | None = None, listeners: Any = (), verbose: int | None = None,
            seed: int | None = None, on_nonfinite: str = "raise") -> History:
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
        return fit(self, data, epochs, batch_size=batch_size, shuffle=shuffle,
                   validation=validation, evaluations=evaluations, label=label,
                   listeners=listeners, verbose=verbose, seed=seed, on_nonfinite=on_nonfinite)

    def evaluate(self, data: Any, output: "str | SDVariable", *evaluations: Any,
                 label: str | None = None, batch_size: int | None = 256) -> Any:
        """Feed ``(labels, predictions of output)`` for every batch of ``data`` to each
        evaluation (``Evaluation()``, ``ROC()``...); returns the evaluation (or a list).

        >>> ev = sd.evaluate((x_test, y_test), "probs", Evaluation())  # doctest: +SKIP
        """
        name = output.name if isinstance(output, SDVariable) else output
        evs = evaluate(self, data, name, evaluations, label, batch_size)
        return evs[0] if len(evs) == 1 else evs

    # -- inspection -----------------------------------------------------------------------
    def summary(self) -> str:
        """A readable table of variables (type, shape, dtype, producing op) and ops."""
        return summary_text(self)

    def picture(self, training: bool = False) -> Any:
        """The graph's ``samediff.pictures.Picture``; ``training=True``: the plans of the last
        ``fit`` step instead (gradients plan's forward/backward phases, check, update plan)."""
        from .pictures import graph_picture  # (down a layer; drawing is not paid at import)
        if not training:
            return graph_picture(self.graph, "SameDiff")
        cached = self._train_step_cache
        if cached is None:
            raise GraphError("picture(training=True): no training step yet; call fit first")
        return cached[2].picture()

    def to_dot(self, training: bool = False) -> str:
        """Graphviz DOT text of the graph: inputs by kind, one box per op (name, op, output
        shape and dtype), control-flow bodies as nested clusters (``samediff/pictures``);
        ``training=True``: of the last ``fit`` step's plans (fused kernels as clusters)."""
        return self.picture(training).to_dot()

    def save_picture(self, path: Any, training: bool = False, engine: str = "auto") -> str:
        """Write ``picture(training)``: ``.dot`` text, or SVG (Graphviz when installed, else
        our own layout); returns the renderer used (``pictures.write_picture``)."""
        from .pictures import write_picture  # (down a layer; not paid at import)
        return write_picture(self.picture(training), path, engine)

    # -- persistence (samediff/serialize.py) ------------------------------------------------
    def save(self, path: Any, save_updater_state: bool = True) -> None:
        """Save the graph and its VARIABLE/CONSTANT values to ``path`` (a zip of
        ``graph.json`` + ``.npy`` arrays), atomically: a failed save leaves any old file intact.

        >>> sd.save("model.sdz"); sd2 = SameDiff.load("model.sdz")  # doctest: +SKIP
        """
        serialize.save(self, path, save_updater_state=save_updater_state)

    def as_flat_file(self, path: Any, save_updater_state: bool = True) -> None:
        """ND4J's ``asFlatFile``: the same as ``save`` (nd4py's own zip format, not ND4J's
        FlatBuffers: files do not move between the two libraries)."""
        self.save(path, save_updater_state)

    asFlatFile = as_flat_file

    @classmethod
    def load(cls, path: Any, load_updater_state: bool = True, *,
             max_graph_bytes: int | None = None) -> "SameDiff":
        """Load a graph written by ``save`` (ND4J's ``SameDiff.load(file, loadUpdaterState)``:
        with ``False`` training restarts the updater). Never runs code from the file; raises a
        ``SerializationError`` subclass (``CorruptFileError``, ``FormatVersionError``,
        ``UnknownOpError``) naming the file for a file it cannot trust. ``graph.json`` beyond
        ``max_graph_bytes`` (default 256 MiB) is refused before it is inflated."""
        return cls._from_saved(serialize.load(path, max_graph_bytes=max_graph_bytes),
                               load_updater_state)

    @classmethod
    def _from_saved(cls, saved: serialize.Saved, load_updater_state: bool) -> "SameDiff":
        sd = cls(saved.graph)
        sd._losses = list(saved.losses)
        sd._training_config = saved.training_config
        if load_updater_state:
            sd._updater_state = saved.updater_state
        return sd

    @classmethod
    def from_flat_file(cls, path: Any, load_updater_state: bool = True) -> "SameDiff":
        """ND4J's ``fromFlatFile``: the same as ``load``."""
        return cls.load(path, load_updater_state)

    fromFlatFile = from_flat_file

    # -- models are values: pickle and deepcopy go through the file format ----------------
    def __reduce__(self) -> tuple:
        """``pickle`` (protocols 2-5) and ``copy.deepcopy`` carry a SameDiff as its file
        (``serialize.to_bytes``: JSON and ``.npy``, no code), so multiprocessing, Dask and
        joblib can ship it. The copy is independent and complete: graph, values, losses,
        training config, updater state (training resumes identically), placeholder arrays set
        with ``set_array``, built gradient variables and the name counters. A user-defined op
        travels by its registered name: unpickling where it is not registered raises
        ``UnknownOpError`` naming it. Not carried: compiled plans and caches (rebuilt on first
        use), open ``name_scope`` blocks, and attributes a subclass adds. Listeners are never
        part of a SameDiff (they are arguments of ``fit``).

        >>> import copy, pickle, numpy as np
        >>> sd = SameDiff.create()
        >>> w = sd.var("w", np.ones(2, np.float32))
        >>> sd2, w2 = pickle.loads(pickle.dumps((sd, w)))   # a variable pickles as (model, name)
        >>> w2.sd is sd2, w2.eval().tolist()
        (True, [1.0, 1.0])
        >>> copy.deepcopy(sd).get_variable("w").get_arr().addi(1).numpy().tolist(), w.eval().tolist()
        ([2.0, 2.0], [1.0, 1.0])
        """
        extras = {"placeholder_arrays": {k: v.copy() for k, v in self._placeholder_arrays.items()},
                  "gradients": {k: dict(v) for k, v in self._grad_cache.items()},
                  "name_counts": dict(self.graph.name_counts), "executed": self._executed}
        return (_unpickle, (type(self), serialize.to_bytes(self), extras))

    def __deepcopy__(self, memo: dict) -> "SameDiff":
        # Structural: the same content as a pickle round trip, but sharing the immutable nodes
        # instead of re-inferring every one (7 ms instead of ~290 ms for 1,000 nodes; as fast
        # as copying the arrays for large weights); every array is copied.
        graph = self.graph.copy()
        for info in graph.vars.values():
            if info.value is not None:
                info.value = info.value.copy()
        twin = memo[id(self)] = type(self)(graph)
        twin._losses = list(self._losses)
        twin._training_config = copy.deepcopy(self._training_config, memo)
        old = self._updater_state
        twin._updater_state = state = UpdaterState(old.iteration, old.epoch, old.batch)
        state.arrays = {p: {k: a.copy() for k, a in slots.items()} for p, slots in old.arrays.items()}
        twin._placeholder_arrays = {k: v.copy() for k, v in self._placeholder_arrays.items()}
        twin._grad_cache = {k: dict(v) for k, v in self._grad_cache.items()}
        twin._executed = self._executed
        return twin

    def __repr__(self) -> str:
        return f"SameDiff({len(self.graph.vars)} variables, {len(self.graph.nodes)} ops)"


def _unpickle(cls: type, data: bytes, extras: dict) -> SameDiff:
    """Rebuild a pickled ``SameDiff`` (see ``SameDiff.__reduce__``)."""
    sd = cls._from_saved(serialize.from_bytes(data, "<pickled SameDiff>"), True)
    sd._placeholder_arrays = dict(extras.get("placeholder_arrays", {}))
    sd._grad_cache = dict(extras.get("gradients", {}))
    sd.graph.name_counts.update(extras.get("name_counts", {}))
    sd._executed = bool(extras.get("executed", False))
    return sd


def _variable(sd: SameDiff, name: str) -> "SDVariable":
    """Unpickle an ``SDVariable``: the variable ``name`` of its (unpickled) graph."""
    return sd.get_variable(name)


#: Methods of ND4J's SameDiff (and other libraries) that nd4py spells differently.
_RENAMED = {"batchOutput": "output", "run": "output", "predict": "output",
            "execBackwards": "calculate_gradients",
            "exec_backwards": "calculate_gradients", "train": "fit"}
