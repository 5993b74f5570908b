"""User-defined ops (ND4J's ``@UserDefinedOp``, seed 001 "User-Defined Functions").

A UDF is registered into the same op table as built-in ops, so it works eagerly
(``nd.<name>(...)``, as a method), in SameDiff graphs (``sd.do_udf(...)`` or
``sd.all_ops.<name>``), under tracing, gradient checking and save/load. Its *properties*
become typed op attributes, so they are part of cache keys and are saved with the graph.
Loading a graph whose UDF is not registered raises ``UnknownOpError`` naming it.

>>> import numpy as np
>>> from samediff import udf, SameDiff
>>> @udf.op(inputs=("x", "y"), properties={"scale": 1.0}, replace=True)
... def scaled_add(x, y, *, scale):
...     "(x + y) * scale"
...     return (x + y) * scale
>>> @scaled_add.gradient
... def _(ins, outs, gs, attrs):
...     g = gs[0] * attrs.scale
...     return [g, g]
>>> scaled_add(np.ones(2), np.ones(2), scale=3.0).numpy().tolist()
[6.0, 6.0]
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping, Sequence

from . import surface
from .array import bind
from .errors import GradientError, OpError
from .frontends.nd4j import split_call
from .ops import REGISTRY, Attr, OpDef, TensorType, define
from .ops.call import op as _op
from .ops.families import broadcast_shapes, probe_dtypes
from .ops.registry import AttrKind
from .ops.validate import check_op

_KIND_OF = {bool: Attr.BOOL, int: Attr.INT, float: Attr.FLOAT, str: Attr.STR}
USER_OPS: dict[str, "UserOp"] = {}


def _property_kinds(properties: Mapping[str, Any]) -> dict[str, tuple[AttrKind, Any]]:
    kinds = {}
    for name, default in properties.items():
        kind = _KIND_OF.get(type(default))
        if kind is None:
            raise OpError(f"UDF property {name!r}: default {default!r} must be a bool, int, float "
                          f"or str (properties are serialized with the graph)")
        kinds[name] = (kind, default)
    return kinds


def _elementwise_infer(op_name: str) -> Callable:
    def infer(types: list[TensorType], attrs: Any) -> list[TensorType]:
        shape = broadcast_shapes(*(t.shape for t in types))
        sig = tuple((t.dtype, t.weak) for t in types)
        return [TensorType(shape, d) for d in probe_dtypes(REGISTRY[op_name], attrs, sig)]
    return infer


def table_rule(rule: Callable[..., list]) -> Callable[..., list]:
    """``rule`` in the table's convention ``rule(ins, outs, gs, attrs)``: a five-parameter rule
    ``rule(F, ins, outs, gs, attrs)`` (the earlier convention, ``F`` an op namespace) is
    adapted by passing ``op`` as ``F`` (``F.mul(a, b)`` is ``op.mul(a, b)``)."""
    try:
        params = [p for p in inspect.signature(rule).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):  # no signature to read: assume the current convention
        return rule
    if len(params) == 5:
        return lambda ins, outs, gs, attrs: rule(_op, ins, outs, gs, attrs)
    return rule


class UserGradient:
    """The gradient rule of a UDF: a slot that ``@my_op.gradient`` fills after registration, so
    the op's definition (a frozen ``OpDef``) never changes once in the table, and graphs
    recorded before the rule was given use it too. Without a rule, differentiating through the
    op is a ``GradientError`` naming it (never a silently dropped path)."""

    def __init__(self, name: str, rule: Callable[..., list] | None) -> None:
        self.name, self.rule = name, rule

    def __call__(self, ins: list, outs: list, gs: list, attrs: Any) -> list:
        if self.rule is None:
            raise GradientError(f"user-defined op {self.name!r} declares no gradient; give it "
                                f"one with @{self.name}.gradient (or gradient= when "
                                f"registering it)")
        return self.rule(ins, outs, gs, attrs)


class UserOp:
    """The callable handle of a registered UDF: call it eagerly, decorate its gradient."""

    def __init__(self, op: OpDef) -> None:
        self.op = op
        self.__name__ = op.name
        self.__doc__ = op.doc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        inputs, attrs, name = split_call(self.op, args, kwargs)
        return bind(self.op, inputs, attrs, name)

    def gradient(self, rule: Callable[..., list]) -> Callable[..., list]:
        """Decorator: the UDF's gradient rule ``rule(ins, outs, gs, attrs) -> [grad per input]``,
        written with existing ops on the values (operators, methods, ``samediff.ops.call.op``).
        A rule written the earlier way, ``rule(F, ins, outs, gs, attrs)``, still works (its
        ``F`` is ``op``)."""
        self.op.grad.rule = table_rule(rule)
        return rule

    def __repr__(self) -> str:
        return f"<user-defined op {self.op.name}>"


def register(name: str, forward: Callable[..., Any], *, inputs: Sequence[str] = ("x",),
             infer: Callable[..., Any] | None = None, gradient: Callable[..., list] | None = None,
             properties: Mapping[str, Any] | None = None, doc: str = "",
             replace: bool = False) -> UserOp:
    """Register a user-defined op.

    ``forward(*arrays, **properties)`` is its numpy implementation; ``infer(types, attrs)``
    returns the output ``TensorType`` (s) — by default the op is treated as elementwise
    (broadcast shape, dtype found by running ``forward`` on tiny arrays); ``gradient`` is
    optional (without it, gradients through the op raise a clear error)."""
    if name in REGISTRY:
        if not replace or name not in USER_OPS:
            raise OpError(f"an op named {name!r} already exists"
                          + ("" if name not in USER_OPS else "; pass replace=True to redefine it"))
        unregister(name)
    kinds = _property_kinds(properties or {})
    op = define(name, list(inputs), infer or _elementwise_infer(name), forward, attrs=kinds,
                namespace="udf", doc=doc or (forward.__doc__ or f"User-defined op {name}.").strip(),
                grad=UserGradient(name, table_rule(gradient) if gradient is not None else None))
    problems = check_op(op)
    if problems:
        del REGISTRY[name]
        raise OpError(f"user-defined op {name!r} is invalid: {'; '.join(problems)}")
    surface.add_op_methods(op)
    handle = USER_OPS[name] = UserOp(op)
    return handle


def op(name: str | None = None, **options: Any) -> Callable[[Callable], UserOp]:
    """Decorator form of ``register``: the function is the forward; its name is the op's."""
    def decorate(forward: Callable[..., Any]) -> UserOp:
        return register(name or forward.__name__, forward, **options)
    return decorate


def unregister(name: str) -> None:
    """Remove a user-defined op (built-in ops cannot be removed)."""
    if name not in USER_OPS:
        raise OpError(f"{name!r} is not a user-defined op")
    del USER_OPS[name]
    del REGISTRY[name]
    surface.remove_op_methods(name)


# --------------------------------------------------------------------------------------------
# Class-style UDFs: seed 001's ``@UserDefinedOp class MyAddUdf(UserDefinedCustomOp)``
# --------------------------------------------------------------------------------------------

class _Described:
    """An input as ``calculateOutputShape`` sees it: shape and dtype, no data (ND4J's
    ``inputArguments.get(0).shapeDescriptor()``)."""

    def __init__(self, ttype: TensorType) -> None:
        self.shape, self.dtype = ttype.shape, ttype.dtype

    def shapeDescriptor(self) -> tuple[int, ...]:
        return self.shape

    def dataType(self) -> Any:
        return self.dtype


class UserDefinedCustomOp:
    """Base class of a class-style UDF (ND4J's ``UserDefinedCustomOp``); register it with
    ``@UserDefinedOp``. The constructor's parameters after ``sameDiff`` name the inputs
    (``MyAddUdf(sd, x, y)``: inputs ``x``, ``y``); a no-argument construction must work, as in
    ND4J (it is how the op is rebuilt for shape inference, execution and gradients).
    Constructor parameters named like a property are properties, not inputs.

    Override ``opName()``; ``exec()`` (read ``self.inputArguments``, NDArrays, and append the
    result to ``self.outputArguments``); optionally ``calculateOutputShape()`` (default: the
    inputs' broadcast shape), ``calculateOutputDataTypes(types)`` (default: the first
    input's), ``doDiff(grad)`` (one gradient per input, written with ops on the values) and
    ``propertiesForFunction()`` / ``setPropertiesForFunction(props)`` (bool/int/float/str
    values, saved with the graph). ``sd.doUdf(MyAddUdf(sd, x, y))`` records it and returns
    its outputs as a tuple. Several outputs: ``getNumOutputs()`` returns their number,
    ``exec()`` appends them in order, ``calculateOutputShape()`` returns one shape per output
    (default: the broadcast shape for each) and ``doDiff(grad)`` receives one gradient per
    output (``None`` for an output the loss does not use). ND4J's third constructor argument
    (``super().__init__(sd, [x], None)``) is accepted when None; ``args()``, ``arg()`` and,
    after ``sd.doUdf(op)``, ``outputVariables()`` are ND4J's ``DifferentialFunction`` helpers.
    """

    def __init__(self, sameDiff: Any = None, inputs: Sequence[Any] | None = None,
                 tArguments: Any = None) -> None:
        # ND4J's constructors take a third argument (t-arguments, or pre-made outputs); its
        # seeds pass ``null``. Here properties carry the t-arguments and outputs come from
        # ``sd.doUdf``, so only ``None`` has a meaning: anything else would be silently lost.
        if tArguments is not None:
            raise OpError(f"{type(self).__name__}: the third constructor argument (ND4J's "
                          f"t-arguments/outputs) must be None, got {tArguments!r}; pass scalar "
                          f"arguments as properties (propertiesForFunction) instead")
        self.sameDiff = sameDiff
        self.inputArguments: list[Any] = list(inputs or [])
        self.outputArguments: list[Any] = []
        self._output_variables: tuple | None = None

    def opName(self) -> str:
        raise OpError(f"{type(self).__name__}: override opName() (the op's unique name)")

    def getNumOutputs(self) -> int:
        return 1

    def calculateOutputDataTypes(self, inputTypes: list) -> list:
        return [inputTypes[0]] * self.getNumOutputs()

    def calculateOutputShape(self) -> list | None:
        return None

    def exec(self) -> None:
        raise OpError(f"{type(self).__name__}: override exec() (the forward pass)")

    def doDiff(self, grad: list) -> list:
        raise OpError(f"{self.opName()}: no gradient; override doDiff(grad)")

    def propertiesForFunction(self) -> dict:
        return {}

    def setPropertiesForFunction(self, props: Mapping[str, Any]) -> None:
        pass

    def args(self) -> list:
        """All input arguments, in order (ND4J ``DifferentialFunction.args()``).

        >>> UserDefinedCustomOp(None, ["x", "y"]).args()
        ['x', 'y']
        """
        return list(self.inputArguments)

    def arg(self) -> Any:
        """The first input argument (ND4J ``DifferentialFunction.arg()``)."""
        if not self.inputArguments:
            raise OpError(f"{type(self).__name__}.arg(): the op has no input arguments")
        return self.inputArguments[0]

    def outputVariables(self) -> list:
        """The output variables ``sd.doUdf(op)`` recorded for this instance (ND4J
        ``DifferentialFunction.outputVariables()``).

        >>> from samediff.errors import OpError
        >>> try:
        ...     UserDefinedCustomOp(None, []).outputVariables()
        ... except OpError as exc:
        ...     print("sd.doUdf(op)" in str(exc))
        True
        """
        if self._output_variables is None:
            raise OpError(f"{type(self).__name__}.outputVariables(): the op has not been added "
                          f"to a graph yet; call sd.doUdf(op) first")
        return list(self._output_variables)

    def larg(self) -> Any:
        return self.inputArguments[0]

    def rarg(self) -> Any:
        return self.inputArguments[1]

    def udf_call(self) -> tuple[OpDef, list, dict]:
        """(op, inputs, properties) for ``sd.doUdf(instance)``."""
        name = self.opName()
        handle = USER_OPS.get(name)
        if handle is None or getattr(handle, "udf_class", None) is not type(self):
            raise OpError(f"{type(self).__name__}: op {name!r} is not registered from this "
                          f"class; decorate the class with @UserDefinedOp")
        return handle.op, list(self.inputArguments), dict(self.propertiesForFunction())

    def udf_recorded(self, outputs: tuple) -> None:
        """Called by ``sd.doUdf(instance)`` with the recorded outputs (``outputVariables()``)."""
        self._output_variables = tuple(outputs)


def UserDefinedOp(cls: type) -> type:  # noqa: N802 - ND4J's annotation name
    """Class decorator (ND4J's ``@UserDefinedOp``): register a ``UserDefinedCustomOp``
    subclass as an op of the table (eager, graphs, tracing, gradients, save/load)."""
    if not (isinstance(cls, type) and issubclass(cls, UserDefinedCustomOp)):
        raise OpError(f"@UserDefinedOp: {cls!r} is not a UserDefinedCustomOp subclass")
    try:
        proto = cls()
    except TypeError as exc:
        raise OpError(f"@UserDefinedOp {cls.__name__}: a no-argument construction is needed "
                      f"(ND4J: 'No-arg constructor required'): {exc}") from None
    name = proto.opName()
    n_outputs = proto.getNumOutputs()
    if not isinstance(n_outputs, int) or n_outputs < 1:
        raise OpError(f"@UserDefinedOp {cls.__name__}: getNumOutputs() must be a positive int, "
                      f"got {n_outputs!r}")
    params = [p for p in inspect.signature(cls.__init__).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][2:]
    if cls.__init__ is UserDefinedCustomOp.__init__:
        params = params[:1]  # the base's ``tArguments`` (ND4J's third argument) is no input
    properties = dict(proto.propertiesForFunction())
    inputs = tuple(p.name for p in params if p.name not in properties) or ("x",)

    def instance(attrs: Any, arguments: list) -> UserDefinedCustomOp:
        inst = cls()
        if properties:
            inst.setPropertiesForFunction({k: getattr(attrs, k) if not isinstance(attrs, Mapping)
                                           else attrs[k] for k in properties})
        inst.inputArguments = list(arguments)
        inst.outputArguments = []
        return inst

    def forward(*arrays: Any, **props: Any) -> Any:
        from .array import CURRENT_TRACE, NDArray, as_numpy
        token = CURRENT_TRACE.set(None)  # exec() runs eagerly, even while a trace replays
        try:
            inst = instance(props, [NDArray(a) for a in arrays])
            inst.exec()
        finally:
            CURRENT_TRACE.reset(token)
        if len(inst.outputArguments) != n_outputs:
            raise OpError(f"{name}: exec() must append {n_outputs} output(s) to outputArguments "
                          f"(getNumOutputs()), got {len(inst.outputArguments)}")
        outs = tuple(as_numpy(o) for o in inst.outputArguments)
        return outs if n_outputs > 1 else outs[0]

    def infer(types: list[TensorType], attrs: Any) -> list[TensorType]:
        inst = instance(attrs, [_Described(t) for t in types])
        shapes = inst.calculateOutputShape()
        if shapes is None:
            shapes = [broadcast_shapes(*(t.shape for t in types))] * n_outputs
        dtypes = inst.calculateOutputDataTypes([t.dtype for t in types])
        for what, got in (("calculateOutputShape()", shapes),
                          ("calculateOutputDataTypes()", dtypes)):
            if len(got) != n_outputs:
                raise OpError(f"{name}: {what} gave {len(got)} entries for {n_outputs} "
                              f"output(s) (getNumOutputs())")
        return [TensorType(tuple(shape), dtype) for shape, dtype in zip(shapes, dtypes)]

    def gradient(ins: list, outs: list, gs: list, attrs: Any) -> list:
        return list(instance(attrs, ins).doDiff(list(gs)))

    has_grad = cls.doDiff is not UserDefinedCustomOp.doDiff
    previous = USER_OPS.get(name)
    replace = previous is not None and getattr(previous, "udf_class_name", None) == cls.__qualname__
    handle = register(name, forward, inputs=inputs, infer=infer, properties=properties,
                      gradient=gradient if has_grad else None, replace=replace,
                      doc=(cls.__doc__ or f"User-defined op {name} ({cls.__name__}).").strip())
    handle.udf_class, handle.udf_class_name = cls, cls.__qualname__
    return cls
