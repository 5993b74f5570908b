"""The op table: every op is one ``OpDef`` registered here, defined once.

An ``OpDef`` carries everything the rest of the system reads: the name (also the
serialization key), input names, typed static attributes, shape/dtype inference, the numpy
implementation, the gradient rule, and the facts the compiler and the tests need, declared as
flags and plain data rather than kept in name sets elsewhere: ``elementwise``, ``reduction``,
``view``..., the scalar expression of a fusable op (``scalar``), how a fused kernel folds a
reduction (``accumulate``), which row-kernel variant computes a row anchor (``row_kernel``),
and which activation a library op can apply to its own result (``epilogue``, ``activation``).
The eager API, the array/variable methods, the SameDiff namespaces, the serializer, the
compiler and the tests are all generated from ``REGISTRY``; the table declares, the compiler
reads (this package never imports ``samediff.compiler``).

Conventions
-----------
* ``impl(*arrays, **attrs)`` takes numpy arrays (or Python scalars for *weak* scalar operands)
  and returns an array, or a tuple of arrays for multi-output ops.
* ``infer(types, attrs)`` takes ``TensorType`` s and returns one ``TensorType`` or a list.
  Unknown dims are ``-1`` (ND4J's convention for placeholders).
* Inputs are names; ``"*xs"`` marks a variadic list, a trailing ``"?"`` an optional input.
* ``scalar(e, *inputs) -> str`` is Python source for one element of the result, given the
  source of each input element and a compiler-provided emitter ``e``: ``e.c(0.5)`` a constant of
  the kernel's dtype, ``e.a("alpha")`` an attribute's value as such a constant, ``e.f("exp")``
  the elementwise math function for the kernel's dtype (``exp_f32``/``exp_f64``, see
  ``compiler/mathlib.py``). Kernels also see ``math``, ``np``, ``f32`` and ``f64``.
* ``grad(inputs, outputs, grads, attrs) -> [gradient per input]`` is written with ordinary ops
  on the values: operators, methods (``g * x.cos()``) and ``call.op`` for free functions. It is
  part of the op's definition (``grad=``; ``NONDIFF`` where no gradient flows): ``register``
  refuses an op without that decision, and nothing attaches rules afterwards.
* ``training(inputs, attrs) -> (outputs, updates)``, also given with the definition, is the
  op's training-mode form (``fit``, ``graph_scope(training=True)``,
  ``nd.compile(training=True)`` record it in place of the op), written with ordinary ops like a
  gradient rule (``x * op.dropout_mask(x, p=attrs.p)``). ``outputs`` stand for the op's
  outputs; ``updates`` maps an input index to the value that input takes after a training step
  (batch norm's running statistics): ``fit`` writes it into that input when the input is a
  trainable-kind (VARIABLE) variable and does not train it by gradient.
"""
from __future__ import annotations

import contextvars
import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from ..dtypes import is_storage, is_string, to_dtype
from ..errors import NdDTypeError, OpError, OpIndexError


class TensorType(NamedTuple):
    """Static type of a value: shape (``-1`` = unknown dim), dtype, and weakness.

    A *weak* type is a Python scalar operand: like NumPy 2 (NEP 50) and JAX it takes part in
    promotion by kind only, so ``float32_array * 2.0`` stays float32.
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    weak: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        dims = ",".join("?" if d < 0 else str(d) for d in self.shape)
        return f"{self.dtype}[{dims}]" + ("(weak)" if self.weak else "")


# --------------------------------------------------------------------------------------------
# Attribute kinds: each coerces a user value (or its JSON form) to a canonical hashable value.
# --------------------------------------------------------------------------------------------

REQUIRED = object()


@dataclass(frozen=True)
class AttrKind:
    name: str
    coerce: Callable[[Any], Any]

    def __repr__(self) -> str:
        return self.name


def _int(v: Any) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"expected an int, got {v!r}")
    return int(v)


def _float(v: Any) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"expected a number, got {v!r}")
    return float(v)


def _number(v: Any) -> float | complex:
    """A real or complex number (``full``'s fill value); ``{"complex": [re, im]}`` is the JSON
    form of a complex one."""
    if isinstance(v, dict) and set(v) == {"complex"}:
        return complex(*v["complex"])
    if isinstance(v, (complex, np.complexfloating)):
        return complex(v)
    return _float(v)


def _bool(v: Any) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"expected a bool, got {v!r}")
    return bool(v)


def _ints(v: Any) -> tuple[int, ...]:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v),)
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if not isinstance(v, (list, tuple)):
        raise TypeError(f"expected an int or a sequence of ints, got {v!r}")
    return tuple(_int(x) for x in v)


def _dims(v: Any) -> tuple[int, ...] | None:
    return None if v is None else _ints(v)


def _opt(kind: AttrKind) -> AttrKind:
    return AttrKind(f"{kind.name}?", lambda v: None if v is None else kind.coerce(v))


def _nested(v: Any) -> Any:
    """Nested int tuples (pad widths) or a slicing spec: lists become tuples, recursively."""
    if isinstance(v, (list, tuple)):
        return tuple(_nested(x) for x in v)
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if v is None or isinstance(v, str):
        return v
    raise TypeError(f"expected nested ints, got {v!r}")


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {v!r}")
    return v


def _graph(v: Any) -> Any:
    """A graph-valued attribute (a ``cond``/``while``/``scan`` body, an ONNX sub-graph): an IR
    ``Graph``, kept frozen — hashable by structure, so it can be part of a plan key. Its JSON
    form (a saved file) is decoded by the IR and the serializer, which know what a graph is
    (``samediff.ir.decode_attrs``), before the attributes reach ``make_attrs``."""
    if not (hasattr(v, "freeze") and hasattr(v, "to_dict")):
        raise TypeError(f"expected a graph (samediff.ir.Graph), got {type(v).__name__}")
    return v if v.frozen else v.copy().freeze()


class Attr:
    """Namespace of attribute kinds used in op definitions."""

    INT = AttrKind("int", _int)
    FLOAT = AttrKind("float", _float)
    NUMBER = AttrKind("number", _number)  # real or complex
    BOOL = AttrKind("bool", _bool)
    STR = AttrKind("str", _str)
    INTS = AttrKind("ints", _ints)
    DIMS = AttrKind("dims", _dims)  # None = all dims
    DTYPE = AttrKind("dtype", to_dtype)
    NESTED = AttrKind("nested", _nested)
    OPT_INT = _opt(INT)
    OPT_FLOAT = _opt(FLOAT)
    OPT_DTYPE = _opt(DTYPE)
    OPT_INTS = _opt(INTS)
    GRAPH = AttrKind("graph", _graph)


def encode_attr(value: Any) -> Any:
    """JSON-friendly form of a canonical attribute value (decode with the kind's ``coerce``)."""
    if isinstance(value, np.dtype):
        return value.name
    if hasattr(value, "to_dict") and hasattr(value, "freeze"):  # a graph-valued attribute
        return value.to_dict()
    if isinstance(value, tuple):
        return [encode_attr(v) for v in value]
    if isinstance(value, complex):
        return {"complex": [value.real, value.imag]}
    return value


# --------------------------------------------------------------------------------------------
# Compiler facts declared with an op (data; the compiler gives them meaning)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Accumulator:
    """How a fused kernel folds a reduction, as kernel source: ``init`` starts the
    accumulator ``acc``, ``step`` folds the next value ``{v}`` into it, ``finish`` turns it into
    the result (``C`` is the number of reduced elements). Float32 data accumulates in float64
    (``init`` is a Python float). ``empty=False``: numpy raises for an empty reduction (max,
    min), so the kernel leaves that case to the interpreter, which reports it. ``exact``: the
    fold selects rather than rounds (max, min), so kernels equal numpy bit for bit."""

    init: str
    step: str
    finish: str = "acc"
    empty: bool = True
    exact: bool = False


@dataclass(frozen=True)
class RowKernel:
    """A row anchor: the op normalizes its input along one axis, and the compiler can compute
    it (with the elementwise ops around it) row by row in one kernel.

    ``variant`` names the row algorithm of ``compiler/rowwise.py`` (one of ``VARIANTS``):
    ``"normalize"`` (``(x - mean) / sqrt(var + eps) * gain [+ bias]``), ``"softmax"``,
    ``"log_softmax"``. ``axis`` is the attribute holding the axis (an int, or a tuple of dims
    that must be just the last one); ``epsilon`` the attribute holding epsilon, if any."""

    VARIANTS = ("normalize", "softmax", "log_softmax")

    variant: str
    axis: str
    epsilon: str | None = None

    def __post_init__(self) -> None:
        if self.variant not in self.VARIANTS:
            raise ValueError(f"row kernel variant {self.variant!r} is not one of {self.VARIANTS}")


@dataclass(frozen=True)
class Activation:
    """A one-input elementwise op that is the activation ``name`` when its attributes hold the
    values ``when`` (``(attribute, value)`` pairs): relu is ``"relu"`` when ``cutoff == 0``.
    An op declaring an ``epilogue`` attribute that takes ``name`` applies the activation to
    its own result in the same pass, so plans fold ``act(producer(...))`` into the producer."""

    name: str
    when: tuple[tuple[str, Any], ...] = ()

    def matches(self, attrs: Any) -> bool:
        """Is the op, with these attributes, this activation?"""
        return all(getattr(attrs, k) == v for k, v in self.when)


# --------------------------------------------------------------------------------------------
# OpDef
# --------------------------------------------------------------------------------------------

#: The op groups (an op's ``namespace``): semantic families. Which front-end namespace shows
#: which groups (``sd.nn``, ``nd.base``...) is each front end's table (``samediff/frontends``).
GROUPS = ("base", "math", "nn", "linalg", "fft", "random", "shape", "creation", "udf", "cnn",
          "control", "rnn", "image")


@dataclass(frozen=True, eq=False)
class OpDef:
    """One op, defined once. Identity is the object itself (ops are singletons)."""

    name: str
    inputs: tuple[str, ...]
    attr_kinds: Mapping[str, tuple[AttrKind, Any]]
    infer: Callable[..., Any]
    impl: Callable[..., Any]
    namespace: str = "math"          # the op's group (one of GROUPS); names and namespace
                                     # layouts are front-end tables (samediff/frontends)
    doc: str = ""
    method: bool = True              # exposed as a method of arrays/variables (self = 1st input)
    elementwise: bool = False        # result = broadcast of the inputs, element by element
    reduction: bool = False          # reduces input 0 over ``dims`` (None = all), ``keep_dims``
    random: bool = False             # draws from the global generator: never folded or deduped
    multi_output: bool = False       # results are always a tuple (split, unstack), even of one
    value_shaped: bool = False       # output sizes depend on input values (dynamic_partition):
                                     # inferred as -1, known only once the op runs
    type_only: bool = False          # the value depends only on the inputs' types (ones_like)
    view: bool = False               # the eager result may share input 0's buffer (reshape,
                                     # slicing...): in-place updates through it write through
    shape_adjoint: bool = False      # sums/broadcasts/reshapes input 0 to input 1's shape: the
                                     # identity when input 0 already has the result's type
    storage: bool = False            # takes storage types (bfloat16, float8... see dtypes.py):
                                     # cast, identity; every other op refuses them by name
    strings: bool = False            # takes UTF8 (string) inputs: data movement, comparison,
                                     # cast and the string ops; every other op refuses them
    # -- fused code generation (read by samediff.compiler) --
    scalar: Callable[..., str] | None = None  # one element as source: scalar(e, *inputs)
    exact: bool = False              # ``scalar`` does numpy's IEEE operations in numpy's order:
                                     # kernels equal ``impl`` bit for bit (tests compare exactly)
    unfused: str = ""                # why an elementwise op has no scalar expression
    accumulate: Accumulator | None = None  # a reduction the compiler fuses with its input chain
    row_kernel: RowKernel | None = None    # a row anchor (softmax, layer_norm...)
    epilogue: str | None = None      # the attribute naming an activation the op applies to its
                                     # own result in the same pass ("none": none; conv2d's
                                     # ``activation``): plans fold a following activation in
    activation: Activation | None = None  # the op is that activation (relu), foldable into an
                                     # ``epilogue`` producer that takes its name
    route: Callable[..., str] | None = None  # explain(): route(input types, attrs) says which
                                     # kernel route the op takes at those types and why
                                     # (kernels.routes: matmul's numpy or private BLAS), or ""
    warm: Callable[..., tuple] | None = None  # warm(input types, attrs): the kernels layer's
                                     # warm-ups (module, function, key: ``compiling.ready``'s)
                                     # the op will run at those static types, which a plan's
                                     # compile helper runs ahead (compiler/compile_helper.py)
    # -- in-place updates (x.addi(y)) --
    into: Callable[..., Any] | None = None  # into(out, *inputs, **attrs) writes the result into
                                     # ``out`` as np.copyto(out, impl(...), casting="same_kind")
                                     # would, with no full-size temporary; the elementwise
                                     # factory derives it for ufunc impls (ufunc(..., out=out))
    # -- autodiff --
    grad: Any = None                 # rule(inputs, outputs, grads, attrs), or NONDIFF
    stops_gradient: bool = False     # the gradient is zero by definition (stop_gradient), not
                                     # the derivative of ``impl``: finite differences disagree
    workspace: str | None = None     # a BOOL attribute that makes the op also return, as its
                                     # last output, what its gradient rule reuses instead of
                                     # recomputing it (an LSTM's gates and states); autodiff
                                     # turns it on for the nodes it differentiates, and the
                                     # rule then sees that output among ``outputs``
    # -- training mode --
    training: Any = None             # the op's training-mode form (dropout, batch_norm), see
                                     # the module docstring; None: the same in training
    # -- sub-graphs --
    bodies: tuple[str, ...] = ()     # the graph-valued (Attr.GRAPH) attributes this op runs
                                     # (cond's then_body/else_body): the compiler keeps the node
                                     # one library call, summary()/explain() show the bodies,
                                     # the serializer saves them (samediff/control/ holds ops)
    attrs_type: type = field(init=False, repr=False)
    default_attrs: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Records are interned (one object per distinct value tuple), so identity equality and
        # identity hashing are exact and cost nothing in cache keys.
        rec = type(f"{self.name}_attrs", (AttrRecord,), {"_names": tuple(self.attr_kinds)})
        object.__setattr__(self, "_interned", {})
        object.__setattr__(self, "attrs_type", rec)
        required = [n for n, (_, d) in self.attr_kinds.items() if d is REQUIRED]
        default = None if required else self.make_attrs({})
        object.__setattr__(self, "default_attrs", default)

    def body_graphs(self, attrs: Any) -> list[tuple[str, Any]]:
        """``[(attribute name, graph)]`` of a node of this op (empty for ops without bodies)."""
        return [(b, getattr(attrs, b)) for b in self.bodies]

    def describe_bodies(self, attrs: Any) -> str:
        """``" [then_body: 3 nodes, else_body: 2 nodes]"`` for a node carrying sub-graphs, else
        ``""`` — how ``explain()`` and ``summary()`` name a node's bodies."""
        if not self.bodies:
            return ""
        return " [" + ", ".join(f"{b}: {len(g.nodes)} node{'s' if len(g.nodes) != 1 else ''}"
                                for b, g in self.body_graphs(attrs)) + "]"

    def describe_route(self, types: Sequence[Any], attrs: Any) -> str:
        """``" [route numpy: measured ...]"`` for an op that declares ``route`` and takes a
        known route at these input types, else ``""`` — how ``explain()`` names it."""
        text = self.route(types, attrs) if self.route is not None else ""
        return f" [route {text}]" if text else ""

    # -- inputs ---------------------------------------------------------------------------
    @functools.cached_property
    def variadic(self) -> bool:
        return bool(self.inputs) and self.inputs[0].startswith("*")

    @functools.cached_property
    def min_inputs(self) -> int:
        if self.variadic:
            return 1
        return sum(1 for i in self.inputs if not i.endswith("?"))

    @functools.cached_property
    def fixed_inputs(self) -> int | None:
        """The number of inputs when it is fixed (every input required, none variadic), else
        None. A call of such an op takes exactly its first ``fixed_inputs`` positional
        arguments as inputs, which lets the front ends memoize how the rest binds."""
        if self.variadic or self.min_inputs != len(self.inputs):
            return None
        return len(self.inputs)

    @property
    def fusable(self) -> bool:
        """The compiler can fuse this op into elementwise kernels (it has a scalar expression)."""
        return self.scalar is not None

    def check_arity(self, n: int) -> None:
        lo, hi = self.min_inputs, (10**9 if self.variadic else len(self.inputs))
        if not lo <= n <= hi:
            want = f"at least {lo}" if self.variadic else (f"{lo}" if lo == hi else f"{lo} to {hi}")
            raise OpError(f"{self.name}: takes {want} array input(s) {self.inputs}, got {n}")

    # -- attributes -----------------------------------------------------------------------
    def make_attrs(self, values: Mapping[str, Any]) -> Any:
        """Validate and canonicalize attribute values into this op's frozen attribute record.

        The same canonical values always give the same (interned) record object."""
        if len(values) == 1:  # hot path (x.sum(1), x.reshape(2, 3)): ints need no type tags
            (k, v), = values.items()
            if type(v) is int or (type(v) is tuple and all(type(e) is int for e in v)):
                hit = self._interned.get(("int", k, v))  # type: ignore[attr-defined]
                if hit is None:
                    hit = self._interned[("int", k, v)] = self._make_attrs(values)  # type: ignore[attr-defined]
                return hit
        try:  # typed key: True == 1 == 1.0 in Python, but they are different attribute values
            raw_key = ("raw", *sorted((k, _typed(v)) for k, v in values.items()))
            hit = self._interned.get(raw_key)  # type: ignore[attr-defined]
        except TypeError:  # unhashable raw values (lists): canonicalize first
            raw_key, hit = None, None
        if hit is not None:
            return hit
        rec = self._make_attrs(values)
        if raw_key is not None:
            self._interned[raw_key] = rec  # type: ignore[attr-defined]
        return rec

    def _make_attrs(self, values: Mapping[str, Any]) -> Any:
        unknown = set(values) - set(self.attr_kinds)
        if unknown:
            raise OpError(f"{self.name}: unknown attribute(s) {sorted(unknown)}; "
                          f"valid: {sorted(self.attr_kinds) or 'none'}")
        out = {}
        for name, (kind, default) in self.attr_kinds.items():
            if name in values:
                try:
                    out[name] = kind.coerce(values[name])
                except NdDTypeError as exc:
                    raise NdDTypeError(f"{self.name}: attribute {name!r}: {exc}") from None
                except (TypeError, ValueError) as exc:
                    raise OpError(f"{self.name}: attribute {name!r} ({kind}): {exc}") from None
            elif default is REQUIRED:
                raise OpError(f"{self.name}: missing required attribute {name!r} ({kind})")
            else:
                out[name] = default
        key = tuple(_typed(v) for v in out.values())
        rec = self._interned.get(key)  # type: ignore[attr-defined]
        if rec is None:
            if len(self._interned) >= _INTERN_LIMIT:  # type: ignore[attr-defined]
                # Forgetting only costs identity: equal records made later are new objects,
                # which can miss a cache entry but never match a different value.
                self._interned.clear()  # type: ignore[attr-defined]
            rec = self._interned[key] = self.attrs_type(**out)  # type: ignore[attr-defined]
        return rec

    # -- inference ------------------------------------------------------------------------
    def infer_types(self, types: Sequence[TensorType], attrs: Any) -> list[TensorType]:
        """Output types for input types; errors name the op, the shapes and the dtypes.

        Inference is a pure function of (op, attrs, input types), so results are memoized:
        re-tracing the same code costs a dictionary lookup per op."""
        key = (self, attrs, tuple(types))
        hit = _INFER_CACHE.get(key)
        if hit is not None:
            return list(hit)
        out = self._infer_uncached(types, attrs)
        if len(_INFER_CACHE) >= _INFER_CACHE_SIZE:
            _INFER_CACHE.clear()  # crude bound; the working set of a program is small
        _INFER_CACHE[key] = tuple(out)
        return out

    def _infer_uncached(self, types: Sequence[TensorType], attrs: Any) -> list[TensorType]:
        self.check_arity(len(types))
        if not self.storage:
            stored = [t.dtype for t in types if is_storage(t.dtype)]
            if stored:
                raise NdDTypeError(
                    f"{self.name}: {stored[0]} is a storage type: nd4py keeps and converts it "
                    f"but does not compute on it; cast to float32 first (x.castTo('float32')) "
                    f"(inputs: {describe(types)})")
        if not self.strings and any(is_string(t.dtype) for t in types):
            raise NdDTypeError(
                f"{self.name}: utf8 tensors are only taken by the data-movement, comparison, "
                f"cast and string ops ({', '.join(string_ops())}); cast to a number first "
                f"(x.castTo('float32')) (inputs: {describe(types)})")
        try:
            out = self.infer(list(types), attrs)
        except OpError:
            raise
        except NdDTypeError:
            raise
        except IndexError as exc:  # an index out of range: numpy users catch IndexError
            raise OpIndexError(f"{self.name}: {exc} (inputs: {describe(types)}, "
                               f"attrs: {attrs})") from None
        except (ValueError, TypeError) as exc:
            raise OpError(f"{self.name}: {exc} (inputs: {describe(types)}, attrs: {attrs})") from None
        return list(out) if isinstance(out, (list, tuple)) and not isinstance(out, TensorType) else [out]

    def error(self, message: str, types: Sequence[TensorType] = ()) -> OpError:
        suffix = f" (inputs: {describe(types)})" if types else ""
        return OpError(f"{self.name}: {message}{suffix}")

    def __repr__(self) -> str:
        return f"<op {self.name}>"


_INTERN_LIMIT = 4096


def _typed(value: Any) -> Any:
    """A hashable key that tells apart values Python considers equal (1, 1.0, True)."""
    if isinstance(value, tuple):
        return tuple(_typed(v) for v in value)
    return (type(value), value)


_INFER_CACHE: dict[tuple, tuple[TensorType, ...]] = {}
_INFER_CACHE_SIZE = 65536


class AttrRecord:
    """Base of every op's frozen attribute record (``OpDef.attrs_type``): one field per
    attribute, in declaration order, None unless given; immutable; equality and hashing by
    identity (records are interned). What ``dataclasses.make_dataclass(frozen=True,
    eq=False)`` made, without its per-class code generation (a third of the op table's
    import time: ~200 ops).

    >>> rec = type("scale_attrs", (AttrRecord,), {"_names": ("factor", "axis")})
    >>> rec(2.0), rec(axis=1)
    ({factor=2.0, axis=None}, {factor=None, axis=1})
    """

    _names: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = self._names
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}: takes {len(names)} attribute(s) {names}, "
                            f"got {len(args)} positional")
        values = dict.fromkeys(names)
        values.update(zip(names, args))
        for k, v in kwargs.items():
            if k not in values or names.index(k) < len(args):
                raise TypeError(f"{type(self).__name__}: unexpected or repeated attribute {k!r}")
            values[k] = v
        vars(self).update(values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v}" for k, v in vars(self).items())
        return f"{{{items}}}"


def describe(types: Sequence[TensorType]) -> str:
    return ", ".join(str(t) for t in types)


# --------------------------------------------------------------------------------------------
# Gradient rules (STYLE §1, like autograd's defvjp): each op's ``grad`` is given in its own
# definition (``define(..., grad=rule)``, or a family factory's ``grad=``), never attached later.
# ``rule(inputs, outputs, grads, attrs) -> [grad per input]`` gets the values of the graph being
# differentiated and uses ordinary ops on them (operators, methods, ``call.op.where(...)``),
# which record into that graph: the backward pass is an ordinary graph and can be
# differentiated again. ``call.op`` looks ops up by name when the rule runs, so a rule may use
# ops defined in later modules. A rule returns ``None`` for an input that gets no gradient.
# --------------------------------------------------------------------------------------------

#: ``op.grad`` value for ops through which no gradient flows (integer/bool results, random and
#: creation ops). Asking for a gradient that can only flow through such ops is an error.
NONDIFF = "none"

#: the names of the values a gradient may flow into while ``autodiff`` runs the rules (those
#: downstream of the variables being differentiated); None outside a backward pass
_DIFFERENTIATED: contextvars.ContextVar[frozenset | None] = contextvars.ContextVar(
    "differentiated", default=None)


def needs_gradient(name: str) -> bool:
    """In a gradient rule: does the input value ``name`` need its gradient (does it depend on
    a variable being differentiated)? A rule whose one op computes the gradients of several
    inputs at once can then skip the work for the others (an LSTM's input, a placeholder,
    in training). Outside a backward pass: True.

    >>> needs_gradient("x")
    True
    """
    names = _DIFFERENTIATED.get()
    return names is None or name in names


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------

REGISTRY: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    """Add ``op`` to the table. Its gradient decision is part of its definition: a rule or
    ``NONDIFF`` is given with the op (``grad=``), never attached later, so the table is whole
    (and frozen) the moment a module has defined its ops."""
    if op.name in REGISTRY:
        raise ValueError(f"op {op.name!r} is defined twice")
    if op.namespace not in GROUPS:
        raise ValueError(f"op {op.name!r}: unknown group (namespace=) {op.namespace!r}; "
                         f"one of {GROUPS}")
    if op.grad is None:
        raise ValueError(f"op {op.name!r}: no gradient decision; define it with grad=<rule> "
                         f"(rule(inputs, outputs, grads, attrs) -> [grad per input]) or "
                         f"grad=NONDIFF")
    REGISTRY[op.name] = op
    return op


def define(name: str, inputs: Sequence[str], infer: Callable, impl: Callable, *,
           attrs: Mapping[str, tuple[AttrKind, Any]] | None = None, **meta: Any) -> OpDef:
    """Define and register one op. ``attrs`` maps name -> (kind, default or REQUIRED)."""
    return register(OpDef(name=name, inputs=tuple(inputs), attr_kinds=dict(attrs or {}),
                          infer=infer, impl=impl, **meta))


def string_ops() -> list[str]:
    """The ops that take UTF8 inputs (``strings=True``), sorted: what the refusal names."""
    return sorted(n for n, op in REGISTRY.items() if op.strings)


def get_op(name: str) -> OpDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise OpError(f"unknown op {name!r}; it is neither built in nor a registered "
                      f"user-defined op") from None
