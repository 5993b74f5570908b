"""ONNX model -> SameDiff graph.

``import_onnx`` loads the model (a path, bytes or an ``onnx.ModelProto``; tensors stored as
external data are read from the model's directory), checks that every node has a converter
for the model's opset (listing every node that has none, before anything is built), then
walks the nodes in order and lets each converter (``table.py``) record table ops into a new
``SameDiff``:

* graph inputs become placeholders (symbolic and unknown dims become ``-1``, so one import
  serves every batch size); initializers become constants, or trainable variables for float
  initializers with ``trainable=True``;
* a node whose inputs are all constants is evaluated at import by the same ops (eagerly), so
  ``Shape -> Gather -> Concat -> Reshape`` on static shapes folds to a constant target;
* graph outputs keep their ONNX names (``sd.output(feeds, "logits")``).

Values are either an ``SDVariable`` (computed at run time) or a numpy array (known now) --
or, for ONNX's non-tensor types, an ``OnnxSequence`` (a ``seq(tensor)`` whose length is known
at import, its elements values of the two kinds) or an ``OnnxOptional`` (holding a value, a
sequence, or nothing). Sequence-typed graph inputs and outputs are one graph variable per
element, named ``<name>.<i>`` (``element_name``); their lengths are set at import.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np

from ..array import NDArray, bind
from ..dtypes import is_storage, storage_compute_type
from ..errors import NdError
from ..ops import get_op
from .dtypes import np_dtype
from .optimize import FUSED_DOMAIN, fold_conv_batch_norm, fuse_attention, fuse_matmul_add
from .values import OnnxOptional, OnnxSequence, describe_value, element_name
from .table import (DEFAULT_DOMAINS, OnnxImportError, OnnxStaticInputError, all_nodes, describe,
                    lookup)

__all__ = ["import_onnx", "import_with_outputs", "NodeContext", "OnnxSequence",
           "OnnxOptional", "element_name"]

Value = Any  # SDVariable | np.ndarray (| OnnxSequence | OnnxOptional where a node allows them)


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:  # pragma: no cover - the extra is installed in the tests
        raise OnnxImportError("ONNX import needs the onnx package: pip install "
                              "'nd4py[onnx]'") from None
    return onnx


def load_model(model: Any) -> tuple[Any, str | None]:
    """The ``ModelProto`` and the directory its external data lives in (None: in memory)."""
    onnx = _onnx()
    from google.protobuf.message import DecodeError
    if isinstance(model, onnx.ModelProto):
        return model, None
    base = None
    try:
        if isinstance(model, (bytes, bytearray, memoryview)):
            proto = onnx.ModelProto()
            proto.ParseFromString(bytes(model))
        else:
            path = os.fspath(model)
            base = os.path.dirname(os.path.abspath(path))
            proto = onnx.load(path, load_external_data=False)
    except (DecodeError, RuntimeError, ValueError, TypeError) as exc:
        raise OnnxImportError(f"malformed or truncated ONNX model ({type(exc).__name__}: "
                              f"{exc}); is it an .onnx file, and complete?") from exc
    if not proto.HasField("graph"):
        raise OnnxImportError("malformed ONNX model: it has no graph (a truncated file, or "
                              "not an ONNX model)")
    return proto, base


def opsets(model: Any) -> dict[str, int]:
    """domain -> opset version ('' for the default domain)."""
    out: dict[str, int] = {}
    for entry in model.opset_import:
        out["" if entry.domain in DEFAULT_DOMAINS else entry.domain] = entry.version
    if "" not in out:
        out[""] = 1 if model.opset_import else 13  # (no opset_import: a bare graph)
    return out


def to_numpy(tensor: Any, base: str | None) -> np.ndarray:
    """An ONNX ``TensorProto`` as a numpy array (external data read from ``base``)."""
    onnx = _onnx()
    from onnx import numpy_helper
    try:
        if onnx.external_data_helper.uses_external_data(tensor):
            if base is None:
                raise OnnxImportError(f"tensor {tensor.name!r} is stored as external data, "
                                      f"but the model was not loaded from a file: pass its "
                                      f"path")
            onnx.external_data_helper.load_external_data_for_tensor(tensor, base)
        value = np.array(numpy_helper.to_array(tensor))
        if tensor.data_type == onnx.TensorProto.STRING:  # (onnx gives objects: str or bytes)
            value = _strings(value)
        return value
    except OnnxImportError:
        raise
    except Exception as exc:  # noqa: BLE001 - protobuf/numpy raise many types
        raise OnnxImportError(f"tensor {tensor.name!r}: cannot read its data ({exc})") from exc


def _strings(value: np.ndarray) -> np.ndarray:
    """A STRING tensor's object array as UTF8 (bytes are read as UTF-8, as ONNX requires)."""
    from ..dtypes import UTF8
    texts = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in value.ravel()]
    return np.array(texts, UTF8).reshape(value.shape)


_UNWRAP = ("SequenceAt or ConcatFromSequence give a sequence's tensors, OptionalGetElement "
           "an optional's")


class NodeContext:
    """What a converter sees of one ONNX node: its inputs as values, its attributes, and
    ``op(...)`` to record (or, on constants, evaluate) a table op."""

    def __init__(self, graph: "GraphImport", node: Any, opset: int) -> None:
        self.graph = graph
        self.node = node
        self.opset = opset
        self._attrs: dict[str, Any] | None = None

    # -- the node --------------------------------------------------------------------------
    @property
    def op_type(self) -> str:
        return self.node.op_type

    @property
    def num_inputs(self) -> int:
        """Inputs given (trailing empty names of omitted optional inputs do not count)."""
        names = list(self.node.input)
        while names and not names[-1]:
            names.pop()
        return len(names)

    @property
    def num_outputs(self) -> int:
        return len(self.node.output)

    def attr(self, name: str, default: Any = None) -> Any:
        """Attribute ``name`` as a Python value (ints, floats, str, lists, arrays for
        tensors, GraphProto for graphs), or ``default``."""
        if self._attrs is None:
            from onnx import helper
            self._attrs = {}
            for a in self.node.attribute:
                value = helper.get_attribute_value(a)
                if isinstance(value, bytes):
                    value = value.decode()
                elif a.type == a.TENSOR:
                    value = to_numpy(value, self.graph.base)
                elif a.type == a.STRINGS:
                    value = [v.decode() for v in value]
                self._attrs[a.name] = value
        return self._attrs.get(name, default)

    def has_attr(self, name: str) -> bool:
        return any(a.name == name for a in self.node.attribute)

    def input(self, i: int) -> Value | None:
        """Input ``i``'s value (a tensor: an ``SDVariable`` or an array), or None when it is
        omitted (absent or an empty name); a sequence or optional there is a named error."""
        value = self.any_input(i)
        if isinstance(value, (OnnxSequence, OnnxOptional)):
            raise self.fail(f"input {i} ({self.node.input[i]!r}) is {describe_value(value)}, "
                            f"where this op needs a tensor ({_UNWRAP})")
        return value

    def any_input(self, i: int) -> Value | None:
        """Input ``i``'s value of any kind -- a tensor, an ``OnnxSequence`` or an
        ``OnnxOptional`` -- or None when it is omitted (for the ops that take sequences)."""
        if i >= len(self.node.input) or not self.node.input[i]:
            return None
        return self.graph.value(self.node.input[i], self)

    def inputs(self) -> list[Value | None]:
        return [self.input(i) for i in range(self.num_inputs)]

    def static(self, i: int, what: str = "") -> np.ndarray | None:
        """Input ``i``'s value when the op needs it at import (a shape, axes, bounds): an
        array; None if the input is omitted. A value only known at run time raises
        ``OnnxStaticInputError`` naming the graph input it comes from, if it is one."""
        value = self.input(i)
        if value is None or isinstance(value, np.ndarray):
            return value
        name = self.node.input[i]
        hint = (f"pass it in static_inputs={{{name!r}: ...}}" if name in self.graph.placeholders
                else "it is computed from run-time values")
        raise OnnxStaticInputError(
            f"ONNX node {describe(self.node, self.opset)}: input {i} ({name!r}"
            f"{', ' + what if what else ''}) must be known at import; {hint}", name)

    def static_ints(self, i: int, what: str = "") -> tuple[int, ...] | None:
        value = self.static(i, what)
        return None if value is None else tuple(int(v) for v in np.asarray(value).reshape(-1))

    def shape(self, value: Value) -> tuple[int, ...]:
        """The static shape of a value (-1 where only run time knows)."""
        if isinstance(value, np.ndarray):
            return value.shape
        return tuple(value.shape)

    def dtype(self, value: Value) -> np.dtype:
        return np.dtype(value.dtype)

    def rank(self, value: Value) -> int:
        return len(self.shape(value))

    def graph_of(self, value: Value) -> Any:
        """The IR graph being built when ``value`` is one of its variables (so a converter can
        follow how a run-time value was computed: shape arithmetic); None for an array or a
        value inside a control-flow body."""
        sd = self.graph.sd
        return sd.graph if getattr(value, "_recorder", None) is sd._recorder else None

    # -- recording -------------------------------------------------------------------------
    def op(self, name: str, *inputs: Value, **attrs: Any) -> Any:
        """Record table op ``name`` on ``inputs`` (arrays become constants), or evaluate it
        now when every input is an array: returns a value, or a tuple for several outputs."""
        op = get_op(name)
        for k, x in enumerate(inputs):
            if isinstance(x, (OnnxSequence, OnnxOptional)):
                raise self.fail(f"operand {k} of table op {name!r} is {describe_value(x)}, "
                                f"where a tensor is needed ({_UNWRAP})")
        if not op.storage and any(is_storage(self.dtype(x)) for x in inputs):
            return self._widened(op, inputs, attrs)
        if all(isinstance(x, np.ndarray) for x in inputs) and not op.random:
            out = bind(op, [NDArray(x) for x in inputs], attrs)
            if isinstance(out, tuple):
                return tuple(np.asarray(o.numpy()) for o in out)
            return np.asarray(out.numpy())
        ins = [self.graph.materialize(x) for x in inputs]
        return self.graph.sd._record(op, ins, attrs, None)

    def _widened(self, op: Any, inputs: Sequence[Value], attrs: dict) -> Any:
        """``op`` on storage-typed values (bfloat16, float8, int4...), as ONNX runtimes compute
        them: each widened exactly to its compute type (float32, int8), the op run there, and
        the results of that type rounded back to the inputs' storage type."""
        stored = next(self.dtype(x) for x in inputs if is_storage(self.dtype(x)))
        wide = storage_compute_type(stored)
        ins = [self.op("cast", x, dtype=storage_compute_type(self.dtype(x)))
               if is_storage(self.dtype(x)) else x for x in inputs]
        out = self.op(op.name, *ins, **attrs)

        def narrow(v: Value) -> Value:
            return self.op("cast", v, dtype=stored) if self.dtype(v) == wide else v
        return tuple(narrow(v) for v in out) if isinstance(out, tuple) else narrow(out)

    def import_body(self, body: Any, inputs: Sequence[Value]) -> list[Value]:
        """Import ONNX graph ``body`` (an ``If`` branch, a ``Loop``/``Scan`` body) in a child
        scope of this node's graph, its inputs bound to ``inputs``; its outputs' values."""
        return import_body(self.graph, body, inputs)

    def fail(self, why: str) -> OnnxImportError:
        """A named error for this node (raise it)."""
        return OnnxImportError(f"ONNX node {describe(self.node, self.opset)}: {why}")


class GraphImport:
    """The state of one import: the SameDiff being built and every ONNX value's binding. A
    control-flow body (``If`` branches, ``Loop``/``Scan`` bodies) is imported in a child
    scope (``parent``): its own names first, then the enclosing graphs' (ONNX's outer-scope
    references; the control-flow ops capture them as extra inputs)."""

    def __init__(self, sd: Any, base: str | None, opsets: dict[str, int],
                 parent: "GraphImport | None" = None) -> None:
        self.sd = sd
        self.base = base
        self.opsets = opsets
        self.parent = parent
        self.values: dict[str, Value] = {}
        self.placeholders: set[str] = set()
        self.onnx_named: set[str] = set()  # graph variables named after an ONNX value
        self._constants: dict[int, Any] = {}  # id(array) -> its graph constant
        self._keep: list[np.ndarray] = []     # (keeps the ids above valid)

    def value(self, name: str, ctx: NodeContext | None = None) -> Value:
        scope: GraphImport | None = self
        while scope is not None:
            if name in scope.values:
                return scope.values[name]
            scope = scope.parent
        where = f"ONNX node {describe(ctx.node, ctx.opset)}" if ctx else "the graph"
        raise OnnxImportError(f"{where} reads {name!r}, which no input, initializer or "
                              f"earlier node defines (a malformed or unsorted graph)")

    def materialize(self, value: Value) -> Any:
        """A graph variable for ``value`` (a constant for an array, made once per array)."""
        if isinstance(value, (OnnxSequence, OnnxOptional)):
            raise OnnxImportError(f"{describe_value(value)} cannot be one graph variable: "
                                  f"only tensors can ({_UNWRAP})")
        if not isinstance(value, np.ndarray):
            return value
        if self.parent is not None:  # (one constant per array, made in the outermost graph)
            return self.parent.materialize(value)
        found = self._constants.get(id(value))
        if found is None:
            found = self._constants[id(value)] = self.sd.constant(None, value)
            self._keep.append(value)
        return found

    def fresh_name(self, name: str) -> str | None:
        """``name`` for a graph variable (':', which the graph uses for the outputs of
        multi-output ops, written '_': PyTorch's ``onnx::Conv_31`` is ``onnx__Conv_31``),
        or None (an automatic name) when it is empty or taken."""
        name = name.replace(":", "_") if name else name
        if not name or self.sd.has_variable(name):
            return None
        return name


def _tensor_shape(t: Any) -> tuple[np.dtype, tuple[int, ...]]:
    """A ``TypeProto.Tensor``'s dtype and dims (-1 where symbolic or unknown)."""
    dtype = np_dtype(t.elem_type)
    dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim)
    return dtype, dims


def check_supported(nodes: Sequence[Any], opsets: Mapping[str, int]) -> None:
    """Raise one ``OnnxImportError`` naming every node without a converter (bodies of
    control-flow nodes included)."""
    missing = []
    for node in all_nodes(nodes):
        domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
        version = opsets.get(domain)
        if version is None:
            missing.append(f"{describe(node, 0)}: the model imports no opset for its domain")
        elif lookup(domain, node.op_type, version) is None:
            missing.append(describe(node, version))
    if missing:
        raise OnnxImportError(f"{len(missing)} ONNX node(s) have no converter in nd4py: "
                              + "; ".join(missing))


def import_onnx(model: Any, *, trainable: bool = False,
                static_inputs: Mapping[str, Any] | None = None,
                sequence_inputs: Mapping[str, Any] | None = None) -> Any:
    """Import an ONNX model (a path, bytes or ``onnx.ModelProto``) as a ``SameDiff``.

    Placeholders are the model's inputs (symbolic dims are ``-1``), graph outputs keep
    their ONNX names, initializers become constants (float ones trainable variables with
    ``trainable=True``, so ``fit`` fine-tunes them). ``static_inputs`` gives values for graph
    inputs that an op needs at import (a ``Reshape`` target fed as an input): they become
    constants -- for a sequence input a list of arrays, for an optional input ``None`` (it is
    empty) or its content.

    Sequences have a length known at import: a ``seq(tensor)`` graph input (or an
    ``optional(seq)`` one that is not empty) needs ``sequence_inputs={name: n}`` (``n``
    elements shaped as the model declares) or ``{name: [shape, ...]}`` (one shape per element,
    ``-1`` for a dim known at run time; needed when the model declares no element shape). Its
    elements are placeholders ``name.0``, ``name.1``... (``element_name``). An ``optional``
    graph input not given in ``static_inputs`` is present: a placeholder of its own name (or
    a sequence as above). A sequence graph output of length n binds variables ``name.0`` ...
    ``name.<n-1>``; an empty optional output binds none (``import_with_outputs`` says which).

    >>> import numpy as np, onnx
    >>> from onnx import helper, TensorProto
    >>> g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])])
    >>> sd = import_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    >>> sd.output({"x": np.array([[-1.0, 2.0]], np.float32)}, "y")["y"].numpy()
    array([[0., 2.]], dtype=float32)
    """
    return import_with_outputs(model, trainable=trainable, static_inputs=static_inputs,
                               sequence_inputs=sequence_inputs)[0]


def import_with_outputs(model: Any, *, trainable: bool = False,
                        static_inputs: Mapping[str, Any] | None = None,
                        sequence_inputs: Mapping[str, Any] | None = None
                        ) -> tuple[Any, dict[str, Any]]:
    """``import_onnx``, and where each graph output is: output name -> its variable's name
    (a tensor), a list of names (a sequence: one per element), or None (an empty optional;
    a present one is described by its content)."""
    from . import converters  # noqa: F401 - fills the table
    proto, base = load_model(model)
    try:
        return _import(proto, base, trainable, dict(static_inputs or {}),
                       dict(sequence_inputs or {}))
    except (OnnxImportError, KeyboardInterrupt, MemoryError):
        raise
    except NdError as exc:  # (an unsupported dtype of an input...): said by nd4py already
        raise OnnxImportError(f"{type(exc).__name__}: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - a malformed model breaks anywhere: name it
        raise OnnxImportError(f"malformed ONNX model: {type(exc).__name__}: {exc}") from exc


def _import(proto: Any, base: str | None, trainable: bool, static: dict[str, Any],
            layouts: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    from .. import SameDiff
    versions = opsets(proto)
    graph = proto.graph
    check_supported(graph.node, versions)
    sd = SameDiff.create()
    state = GraphImport(sd, base, versions)
    initializers = {t.name for t in graph.initializer}
    for t in graph.initializer:
        value = to_numpy(t, base)
        if trainable and value.dtype.kind == "f":
            state.values[t.name] = var = sd.var(state.fresh_name(t.name), value)
            state.onnx_named.add(var.name)
        else:
            state.values[t.name] = value
    for vi in graph.input:
        if vi.name in initializers:  # (IR < 4 lists initializers among the inputs)
            continue
        state.values[vi.name] = _graph_input(state, vi.name, vi.type, static, layouts)
    nodes = list(graph.node)
    outputs = {vo.name for vo in graph.output}
    if not trainable:  # (a trainable import keeps the model's ops and intermediate values)
        nodes = fold_conv_batch_norm(nodes, state.values, outputs, versions[""])
        nodes = fuse_matmul_add(fuse_attention(nodes, outputs, versions.get("", 1)), outputs)
        if any(node.domain == FUSED_DOMAIN for node in nodes):
            versions.setdefault(FUSED_DOMAIN, 1)
    for node in nodes:
        convert_node(state, node)
    bound: set[str] = set()
    where = {vo.name: _bind_output(state, vo.name, state.value(vo.name), bound)
             for vo in graph.output}
    return sd, where


def _graph_input(state: GraphImport, name: str, tp: Any, static: dict[str, Any],
                 layouts: dict[str, Any]) -> Value:
    """The value of graph input ``name`` of ONNX type ``tp``: a placeholder, a constant from
    ``static``, or a sequence/optional of those."""
    kind = tp.WhichOneof("value")
    if kind == "optional_type":
        if name in static and static[name] is None:
            return OnnxOptional(None)
        return OnnxOptional(_graph_input(state, name, tp.optional_type.elem_type, static,
                                         layouts))
    if kind == "sequence_type":
        elem = tp.sequence_type.elem_type
        if elem.WhichOneof("value") != "tensor_type":
            raise OnnxImportError(f"graph input {name!r}: a sequence of "
                                  f"{elem.WhichOneof('value')} is not supported (sequences "
                                  f"of tensors are)")
        dtype, dims = _tensor_shape(elem.tensor_type)
        if name in static:
            return OnnxSequence([np.asarray(v, dtype=dtype) for v in static[name]], dtype)
        spec = layouts.get(name)
        if spec is None:
            raise OnnxImportError(f"graph input {name!r} is a sequence: its length must be "
                                  f"known at import; pass sequence_inputs={{{name!r}: n}} (or "
                                  f"a list of element shapes), or its value in static_inputs")
        if isinstance(spec, (int, np.integer)):
            if not elem.tensor_type.HasField("shape"):
                raise OnnxImportError(f"graph input {name!r}: the model declares no shape for "
                                      f"the sequence's elements; pass their shapes: "
                                      f"sequence_inputs={{{name!r}: [shape, ...]}}")
            shapes = [dims] * int(spec)
        else:
            shapes = [tuple(int(d) for d in s) for s in spec]
        items = []
        for i, shape in enumerate(shapes):
            items.append(state.sd.placeholder(element_name(name, i), dtype, *shape))
            state.placeholders.add(items[-1].name)
            state.onnx_named.add(items[-1].name)
        return OnnxSequence(items, dtype)
    if kind != "tensor_type":
        raise OnnxImportError(f"graph input {name!r}: {kind or 'untyped'} inputs are not "
                              f"supported (tensors, sequences of tensors and optionals are)")
    dtype, dims = _tensor_shape(tp.tensor_type)
    if name in static:
        return np.asarray(static[name], dtype=dtype)
    state.placeholders.add(name)
    state.onnx_named.add(name)
    return state.sd.placeholder(name, dtype, *dims)


def convert_node(state: GraphImport, node: Any) -> None:
    """Run ``node``'s converter and bind its outputs."""
    domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
    version = state.opsets[domain]
    ctx = NodeContext(state, node, version)
    convert = lookup(domain, node.op_type, version)
    try:
        out = convert(ctx)
    except (OnnxImportError, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - name the node whatever went wrong
        raise OnnxImportError(f"ONNX node {describe(node, version)}: {type(exc).__name__}: "
                              f"{exc}") from exc
    outs = out if isinstance(out, (tuple, list)) else (out,)
    wanted = [n for n in node.output if n]
    if len(outs) < len(node.output) and len(outs) < len(wanted):
        raise ctx.fail(f"produced {len(outs)} output(s), the node names {len(node.output)}")
    for name, value in zip(node.output, outs):
        if not name:
            continue  # an optional output nobody reads
        if value is None:
            raise ctx.fail(f"output {name!r} is not produced by this converter")
        state.values[name] = value
        # intermediate variables take their ONNX names (readable summaries), unless the
        # variable already carries one (an input passed through) or the name is taken
        # (values inside a control-flow body keep the body's names)
        if hasattr(value, "rename") and value.name not in state.onnx_named \
                and state.parent is None:
            fresh = state.fresh_name(name)
            if fresh is not None:
                value.rename(fresh)
            state.onnx_named.add(value.name)


def import_body(state: GraphImport, body: Any, inputs: Sequence[Value]) -> list[Value]:
    """Import ONNX graph ``body`` (a control-flow body) in a child scope of ``state``, its
    inputs bound to ``inputs`` in order; its output values, in order."""
    if len(body.input) != len(inputs):
        raise OnnxImportError(f"body graph {body.name!r} declares {len(body.input)} inputs, "
                              f"the node passes {len(inputs)}")
    child = GraphImport(state.sd, state.base, state.opsets, parent=state)
    for t in body.initializer:
        child.values[t.name] = to_numpy(t, state.base)
    for vi, value in zip(body.input, inputs):
        child.values[vi.name] = value
    for node in body.node:
        convert_node(child, node)
    return [child.value(vo.name) for vo in body.output]


def _bind_output(state: GraphImport, name: str, value: Value, bound: set[str]) -> Any:
    """Make graph output ``name`` a variable of that name (a sequence: one per element,
    ``element_name(name, i)``; an empty optional: none); where it is (``import_with_outputs``).
    ``bound`` holds the variables already bound to an output: a value bound twice (an output
    repeated, one tensor twice in a sequence) is copied."""
    if isinstance(value, OnnxOptional):
        return None if value.value is None else _bind_output(state, name, value.value, bound)
    if isinstance(value, OnnxSequence):
        return [_bind_output(state, element_name(name, i), v, bound)
                for i, v in enumerate(value)]
    sd = state.sd
    if isinstance(value, np.ndarray):
        if not sd.has_variable(name):
            sd.constant(name, value)
        bound.add(name)
        return name
    if value.name == name:
        bound.add(name)
        return name
    if sd.has_variable(name) and name not in state.onnx_named and name not in bound:
        # the name is an automatic one ("deconv2d", as nd4py's exporter writes its graph
        # outputs): that variable takes another, the output gets its own
        k = 1
        while sd.has_variable(f"{name}_{k}"):
            k += 1
        sd.get_variable(name).rename(f"{name}_{k}")
    if value.name in state.placeholders or value.name in bound or sd.has_variable(name):
        copy = sd._record(get_op("identity"), [value], {}, state.fresh_name(name))
        if copy.name != name:
            raise OnnxImportError(f"graph output {name!r} cannot keep its name: another "
                                  f"variable has it")
    else:
        value.rename(name)
    bound.add(name)
    return name
