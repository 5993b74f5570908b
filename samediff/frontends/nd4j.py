"""The ND4J front end: ND4J's names, its namespaces and its argument rules, as tables.

It serves ``nd.<op>``, ``nd.<namespace>.<op>``, the methods of arrays and variables
(``x.leakyRelu()``), ``sd.<namespace>.<op>``, ``sd.<op>`` and user-defined ops. Every op is also
reachable by its own name; ``NAMES`` only lists the other names.

>>> from samediff import SameDiff, create
>>> x = create([-2.0, 3.0])
>>> x.leakyRelu(0.5).numpy().tolist(), x.sum(0).item()
([-1.0, 3.0], 1.0)
>>> sd = SameDiff.create()
>>> sd.nn.leakyRelu("h", sd.constant("c", [-2.0]), 0.5).name
'h'
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from ..arg_kinds import is_array_like
from ..errors import ArgumentConflictError, OpError
from ..ops.registry import OpDef
from .cnn_config import OpConfig
from .cnn_overloads import CNN_OVERLOADS
from .common import Frontend, Namespace
from .nd4j_overloads import ND4J_OVERLOADS, Rewrite, flags_first
from .rnn import RnnForms

#: op name -> its ND4J name(s) where they differ from the op's own name, and the Pythonic
#: spellings this front end also accepts. ND4J's elementwise ``max``/``min`` (``Transforms``)
#: are ``maximum``/``minimum`` here: ``max``/``min`` are the reductions.
NAMES: dict[str, str | tuple[str, ...]] = {
    # math and base
    "floor_mod": "floorMod",
    "floor_div": "floorDiv",
    "squared_difference": "squaredDifference",
    "clip_by_value": "clipByValue",
    "cast": ("castTo", "cast_to"),
    "matmul": "mmul",
    "std": "standardDeviation",
    "norm_max": "normmax",
    "log_sum_exp": "logSumExp",
    "argmax": "argMax",
    "argmin": "argMin",
    "stop_gradient": "stopGradient",  # libnd4j's StopGradient op
    # nn
    "leaky_relu": "leakyRelu",
    "hard_sigmoid": "hardSigmoid",
    "hard_tanh": "hardTanh",
    "log_sigmoid": "logSigmoid",
    "swish": "silu",             # Pythonic (PyTorch's) spelling
    "hard_swish": "hardswish",   # Pythonic (PyTorch's) spelling
    "log_softmax": "logSoftmax",
    "layer_norm": "layerNorm",
    "rms_norm": "rmsNorm",
    "dot_product_attention": "dotProductAttention",
    "multi_head_dot_product_attention": "multiHeadDotProductAttention",
    "batch_norm": "batchNorm",
    "bias_add": "biasAdd",
    "one_hot": "oneHot",
    # cnn
    "max_pooling2d": "maxPooling2d",
    "avg_pooling2d": "avgPooling2d",
    "depthwise_conv2d": "depthWiseConv2d",
    "separable_conv2d": "separableConv2d",
    "max_pooling1d": "maxPooling1d",
    "avg_pooling1d": "avgPooling1d",
    "max_pooling3d": "maxPooling3d",
    "avg_pooling3d": "avgPooling3d",
    "global_max_pooling": "globalMaxPooling",
    "global_avg_pooling": "globalAvgPooling",
    "im2col": "im2Col",
    "col2im": "col2Im",
    "space_to_depth": "spaceToDepth",
    "depth_to_space": "depthToSpace",
    "space_to_batch": "spaceToBatch",
    "batch_to_space": "batchToSpace",
    "local_response_normalization": "localResponseNormalization",
    # linalg
    "tensor_mmul": "tensorMmul",
    # shape
    "expand_dims": "expandDims",
    "strided_slice": "stridedSlice",
    "scatter_add": "scatterAdd",
    "scatter_update": "scatterUpdate",
    "broadcast_to": "broadcast",
    "dynamic_partition": "dynamicPartition",
    # creation and random
    "full": "valueArrayOf",
    "zeros_like": "zerosLike",
    "ones_like": "onesLike",
    "uniform": "rand",
    "normal": "randn",
    "truncated_normal": "truncatedNormal",
}

#: ``sd.<name>`` / ``nd.<name>``: the op groups each namespace shows (``sd`` and ``nd`` also
#: show every op at top level). ``nd`` shows only the eager ones: ``nd.random`` is the module
#: ``nd4py/random.py`` (seeded draws with ND4J's ``rand(2, 3)`` shapes) and creation functions
#: are top level (``nd.zeros``).
NAMESPACES: dict[str, Namespace] = {
    "math": Namespace(("math",)),
    "nn": Namespace(("nn",)),
    "linalg": Namespace(("linalg",)),
    "fft": Namespace(("fft",)),
    "cnn": Namespace(("cnn",)),
    "base": Namespace(("base", "shape")),
    "shape": Namespace(("shape",), eager=False),
    "random": Namespace(("random",), eager=False),
    "creation": Namespace(("creation",), eager=False),
    "control": Namespace(("control",), eager=False),  # ops with sub-graphs (samediff/control)
    "rnn": Namespace(("rnn",), forms=RnnForms),  # recurrent layers; ND4J's lstmLayer...
    "image": Namespace(("image",)),  # ND4J's sd.image(): decode_image
}

#: Ops with ND4J's in-place method ``<op>i`` on arrays and variables (``x.addi(y)``).
INPLACE = ("add", "sub", "mul", "div", "rsub", "rdiv")

# --------------------------------------------------------------------------------------------
# The argument rule
# --------------------------------------------------------------------------------------------

_SEQUENCE_KINDS = ("ints", "dims", "ints?", "nested")


def snake_case(name: str) -> str:
    """``"setLossVariables"`` -> ``"set_loss_variables"`` (ND4J's camelCase method names)."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def camel_case_method(obj: Any, name: str) -> Any:
    """ND4J's spelling of a method ``obj`` has under its snake_case name: ``sd.setLossVariables``
    is ``sd.set_loss_variables``; a getter of a property, ``sd.getLossVariables()``, returns
    ``sd.loss_variables``. Raises ``AttributeError`` when there is none (explicit aliases such
    as ``getArr = get_arr`` are still written out where they are documented)."""
    snake = snake_case(name)
    if snake != name:
        attr = getattr(type(obj), snake, None)
        if callable(attr):
            return getattr(obj, snake)
        if snake.startswith("get_") and isinstance(getattr(type(obj), snake[4:], None), property):
            value = getattr(obj, snake[4:])
            return lambda: value
    raise AttributeError(name)


def split_call(op: OpDef, args: tuple, kwargs: dict,
               leading_name: bool = False) -> tuple[list, dict, str | None]:
    """Split a call's arguments into (inputs, attrs, output name), the ND4J way.

    ``nd.sum(x, 0, 1)``, ``x.sum(0, 1)``, ``sd.math.sum("s", x, 0, 1)`` and ``x.reshape(2, 3)``
    all go through here:

    1. with ``leading_name`` (SameDiff's namespaces) a first string argument is the output's
       name (``sd.nn.relu("hidden", x, 0)``);
    2. required inputs are taken positionally (anything: arrays, variables, Python scalars);
    3. optional inputs (``"name?"``) are taken positionally only when the value is array-like
       or None; None (positional or by keyword) leaves the input out, like omitting it
       (``nd.layer_norm(x, gain, None, -1)``); a required input may not be None;
    4. a variadic op (``"*xs"``) takes a list/tuple as its first argument, or leading
       array-likes;
    5. remaining positional values fill attributes in declaration order — except that if the
       first attribute is a sequence kind (``dims``, ``shape``, ``reps``...) and every
       remaining value is an int, they are packed into it (``x.reshape(2, 3)``, ``x.sum(0, 1)``);
    6. keywords name inputs or attributes; ``name=`` is returned separately (SameDiff and
       traces use it to name the output variable). Other spellings (``KEYWORD_ALIASES``:
       numpy's ``axis``/``keepdims``, ND4J's ``dimensions``/``dataType``, and the camelCase
       of any attribute, ``keepDims``) name the attribute where the op has none of their own
       name (``x.sum(axis=0, keepdims=True)``, ``nd.mean(x, axis=(0, 1))``). One parameter
       given twice — by two spellings, positionally and by keyword, or an output name first
       and as ``name=`` — raises ``ArgumentConflictError`` (a ``TypeError``), as Python does;
    7. a config object among the arguments (any ``OpConfig``: ND4J's ``Conv2DConfig``,
       ``Pooling2DConfig``...) stands for the attributes it holds
       (``sd.cnn.conv2d("c", x, w, b, config)``).

    >>> from samediff.ops import REGISTRY
    >>> split_call(REGISTRY["sum"], ("x", 0, 1), {})
    (['x'], {'dims': (0, 1)}, None)
    >>> split_call(REGISTRY["leaky_relu"], ("h", "x", 0.1), {}, leading_name=True)
    (['x'], {'alpha': 0.1}, 'h')
    """
    if leading_name and args and isinstance(args[0], str):
        if "name" in kwargs:
            raise ArgumentConflictError(
                f"{op.name}() got multiple values for the output name: {args[0]!r} (first "
                f"argument) and name={kwargs['name']!r}; give it once")
        kwargs, args = {**kwargs, "name": args[0]}, args[1:]
    overload = OVERLOADS.get(op.name)
    if overload is None and len(args) > 1 and isinstance(args[1], (bool, np.bool_)) and len(
            op.inputs) == 1:
        overload = flags_first(op.name, tuple(op.attr_kinds))  # x.sum(True, 0): keepDims
    rewrite_attrs, form = {}, ""
    if overload is not None:
        args = overload(args)
        if isinstance(args, Rewrite):
            args, rewrite_attrs, form = args
    if not kwargs and not rewrite_attrs and not op.variadic and op.min_inputs == len(op.inputs):
        n = len(op.inputs)
        if len(args) == n:
            return list(args), {}, None  # fast path: exactly the required inputs, nothing else
        if len(args) > n and op.attr_kinds and all(type(a) is int for a in args[n:]):
            first, (kind, _) = next(iter(op.attr_kinds.items()))
            if kind.name in _SEQUENCE_KINDS:  # fast path: x.sum(0, 1), x.reshape(2, 3)
                return list(args[:n]), {first: tuple(args[n:])}, None
    kwargs, spelled = _keywords(op, kwargs)
    for key, value in rewrite_attrs.items():
        if key in kwargs:
            raise ArgumentConflictError(
                f"{op.name}() got multiple values for argument {key!r}: {value!r} "
                f"positionally (ND4J's {form}) and {spelled[key]}={kwargs[key]!r}; give it once")
        kwargs[key] = value
        spelled[key] = key
    name = kwargs.pop("name", None)
    args = list(args)
    configs = [a for a in args if isinstance(a, OpConfig)]
    if configs:  # ND4J's Conv2DConfig...: attributes
        args, kwargs = _expand_configs(op, args, kwargs)
    inputs: list[Any] = []
    if op.variadic:
        if args and isinstance(args[0], (list, tuple)):
            inputs = list(args.pop(0))
        else:
            while args and is_array_like(args[0]):
                inputs.append(args.pop(0))
        if not inputs:
            raise OpError(f"{op.name}: expected at least one array to {op.name}")
    else:
        omitted = None  # the first optional input left out (None or absent): the list ends
        for spec in op.inputs:
            key, optional = spec.rstrip("?"), spec.endswith("?")
            if key in kwargs:
                if omitted is None and args and (
                        not optional or args[0] is None or is_array_like(args[0])):
                    raise ArgumentConflictError(
                        f"{op.name}() got multiple values for input {key!r}: {_show(args[0])} "
                        f"positionally and {spelled[key]}={_show(kwargs[key])} (inputs: "
                        f"{', '.join(op.inputs)}); give it once")
                value = kwargs.pop(key)
            elif omitted is None and args and (
                    not optional or args[0] is None or is_array_like(args[0])):
                value = args.pop(0)
            elif not optional:
                raise OpError(f"{op.name}: missing input {key!r} (inputs: {', '.join(op.inputs)})")
            else:
                value = None
            if value is None and not optional:
                raise OpError(f"{op.name}: input {key!r} is required and cannot be None (inputs: "
                              f"{', '.join(op.inputs)}; those marked ? may be left out)")
            if value is None:
                omitted = omitted or key
            elif omitted is not None:  # optional inputs are positional: none after a gap
                raise OpError(f"{op.name}: input {key!r} given without {omitted!r} before it")
            else:
                inputs.append(value)
    attrs = _positional_attrs(op, args)
    clash = [k for k in attrs if k in kwargs]
    if clash:
        k = clash[0]
        raise ArgumentConflictError(
            f"{op.name}() got multiple values for argument {k!r}: {_show(attrs[k])} "
            f"positionally and {spelled[k]}={_show(kwargs[k])}; give it once (attributes in "
            f"order: {', '.join(op.attr_kinds)})")
    attrs.update(kwargs)
    for config in configs:  # its kernel size against the weights'...
        config.check_inputs(op, inputs, attrs)
    return inputs, attrs, name


def _expand_configs(op: OpDef, args: list, kwargs: dict) -> tuple[list, dict]:
    """A config object among the arguments (``sd.cnn.conv2d(x, w, b, Conv2DConfig(...))``)
    stands for the attributes it holds (``OpConfig.op_attrs``); explicit keywords may not
    repeat them."""
    rest, attrs, source = [], {}, {}
    for a in args:
        if isinstance(a, OpConfig):
            for key, value in a.op_attrs(op).items():
                if key in attrs and attrs[key] != value:  # two configs: no silent last-wins
                    raise OpError(f"{op.name}: two configs give {key} differently: "
                                  f"{attrs[key]!r} ({source[key]}) and {value!r} "
                                  f"({type(a).__name__}); pass one config")
                attrs[key], source[key] = value, type(a).__name__
        else:
            rest.append(a)
    clash = set(attrs) & set(kwargs)
    if clash:
        raise OpError(f"{op.name}: attribute(s) {sorted(clash)} given both by a config and "
                      f"as keywords")
    return rest, {**kwargs, **attrs}


def _layer_norm_overload(args: tuple) -> tuple:
    """ND4J's ``layerNorm(input, gain, bias, channelsFirst, dimensions...)``: gain and bias
    may be null (None: gain 1, no bias; also before keywords, ``layer_norm(x, None, None,
    dims=1)``, but not a lone ``layer_norm(x, None)``); ``channelsFirst`` only
    says where channels are in NCHW/NHWC data, which the explicit ``dimensions`` already
    fix, so it is dropped."""
    if len(args) >= 3 and args[1] is None:  # ND4J's (input, null, bias, ...): gain 1; a
        args = (args[0], 1.0, *args[2:])    # lone layer_norm(x, None) is still refused
    if len(args) < 4 or not isinstance(args[3], (bool, np.bool_)):
        return args  # nd4py's own order: layer_norm(x, gain, bias?, dims...)
    x, gain, bias, _channels_first, *dims = args
    if any(not isinstance(d, (int, np.integer)) or isinstance(d, bool) for d in dims):
        raise OpError(f"layerNorm: expected layerNorm(input, gain, bias, channelsFirst, "
                      f"dimensions...) with int dimensions, got {tuple(dims)!r}")
    return (x, 1.0 if gain is None else gain, bias, *(dims or [-1]))


def _reshape_overload(args: tuple) -> tuple:
    """ND4J's ``INDArray.reshape(order, shape...)``: a leading ``'c'`` (row-major) or ``'f'``
    (column-major) order char before the sizes, or before one sequence of them, becomes the
    ``order`` attribute (``x.reshape('f', 2, 3)`` is ``reshape(x, (2, 3), 'f')``)."""
    if len(args) < 3 or not (isinstance(args[1], str) and args[1].lower() in ("c", "f")):
        return args  # nd4py's own order: reshape(x, sizes...) / reshape(x, shape, order)
    x, order, *sizes = args
    if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
        sizes = list(sizes[0])
    if any(not isinstance(d, (int, np.integer)) or isinstance(d, bool) for d in sizes):
        raise OpError(f"reshape: expected reshape(order, sizes...) with 'c'/'f' and int sizes, "
                      f"got {(order, *sizes)!r}")
    return (x, tuple(int(d) for d in sizes), order.lower())


#: ND4J overloads that reorder arguments: op name -> positional args (after a leading output
#: name) rewritten to the op's own order, when the call matches the ND4J pattern.
OVERLOADS = {"layer_norm": _layer_norm_overload, "reshape": _reshape_overload,
             **CNN_OVERLOADS, **ND4J_OVERLOADS}


#: Other spellings of a parameter: keyword -> the attributes it may name, the first the op has
#: (used only when the op has no parameter of the keyword's own name). numpy's ``axis``/
#: ``axes``/``keepdims``, ND4J's parameter names ``dimensions``/``dimension``/``dataType``.
#: Besides these, the camelCase of any parameter (``keepDims``, ``biasCorrected``) names it.
KEYWORD_ALIASES: dict[str, tuple[str, ...]] = {
    "axis": ("dims", "dim"), "axes": ("dims",), "dimensions": ("dims", "dim"),
    "dimension": ("dim", "dims"), "keepdims": ("keep_dims",), "dataType": ("dtype",),
    "data_type": ("dtype",),
}
NUMPY_KEYWORDS = {k: KEYWORD_ALIASES[k][0] for k in ("axis", "axes", "keepdims")}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _params(op: OpDef) -> list[str]:
    return [s.lstrip("*").rstrip("?") for s in op.inputs] + list(op.attr_kinds)


def resolve_keyword(op: OpDef, key: str) -> str:
    """The parameter of ``op`` a keyword names: itself, or the parameter it spells
    (``KEYWORD_ALIASES``, camelCase).

    >>> from samediff.ops import REGISTRY
    >>> [resolve_keyword(REGISTRY["variance"], k) for k in ("axis", "keepDims", "biasCorrected")]
    ['dims', 'keep_dims', 'bias_corrected']
    """
    params = _params(op)
    if key in params or key == "name":
        return key
    for target in KEYWORD_ALIASES.get(key, ()):
        if target in params:
            return target
    snake = snake_case(key)
    return snake if snake in params else key


def keyword_spellings(op: OpDef) -> dict[str, tuple[str, ...]]:
    """Each parameter of ``op`` -> every keyword that names it (its own name first). Any two
    of one parameter given together raise ``ArgumentConflictError``.

    >>> from samediff.ops import REGISTRY
    >>> keyword_spellings(REGISTRY["sum"])["dims"]
    ('dims', 'axis', 'axes', 'dimensions', 'dimension')
    """
    params = _params(op)
    out = {p: [p] for p in params}
    for key in list(KEYWORD_ALIASES) + [_camel(p) for p in params]:
        target = resolve_keyword(op, key)
        if target != key and key not in out[target]:
            out[target].append(key)
    return {p: tuple(keys) for p, keys in out.items()}


def _keywords(op: OpDef, kwargs: dict) -> tuple[dict, dict]:
    """Keywords -> (parameter -> value, parameter -> the spelling used); two spellings of
    one parameter are refused, whatever their values (Python's rule for one name)."""
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in kwargs.items():
        target = resolve_keyword(op, key)
        if target in out:
            raise ArgumentConflictError(
                f"{op.name}() got multiple values for argument {target!r}: "
                f"{spelled[target]}={_show(out[target])} and {key}={_show(value)} name the same "
                f"parameter; give it once")
        out[target], spelled[target] = value, key
    return out, spelled


def _show(value: Any) -> str:
    """A value for an error message: arrays by shape and dtype, not their data."""
    shape = getattr(value, "shape", None)
    if shape is not None and not isinstance(value, (int, float, bool)) and tuple(shape):
        return f"<{type(value).__name__} shape {tuple(shape)} {getattr(value, 'dtype', '')}>"
    return repr(value)


def _positional_attrs(op: OpDef, args: list) -> dict:
    if not args:
        return {}
    names = list(op.attr_kinds)
    if names and op.attr_kinds[names[0]][0].name in _SEQUENCE_KINDS and all(
            isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        return {names[0]: tuple(args)}
    if len(args) > len(names):
        raise OpError(f"{op.name}: too many positional arguments {tuple(args)!r}; "
                      f"attributes are {names or 'none'}")
    return dict(zip(names, args))


# --------------------------------------------------------------------------------------------
# The argument rule, memoized (the eager hot path: benchmarks/bench_eager_overhead.py)
# --------------------------------------------------------------------------------------------

#: (op, argument types, the arguments after the inputs[, keywords]) -> (attrs, output name,
#: attribute record) of a call ``split_call`` and ``make_attrs`` accepted.
_BOUND: dict[tuple, tuple[Mapping[str, Any], Any, Any]] = {}
_BOUND_LIMIT = 4096
_NO_ATTRS: Mapping[str, Any] = MappingProxyType({})
#: Values a memoized call may hold besides its inputs: immutable, and equal to another value
#: of the same type only when they mean the same attribute (tuples: element by element).
_CONSTANTS = (int, float, bool, complex, str, type(None))


def bind_arguments(op: OpDef, args: tuple, kwargs: dict) -> tuple[list, Mapping, Any, Any]:
    """``split_call`` (without a leading name) and ``op.make_attrs`` in one step, memoized:
    ``(inputs, attrs, output name, attribute record)``.

    Whether an argument is an input, a flag, a dim or an attribute depends only on the
    argument types and on the values that are not inputs: for an op whose inputs are fixed
    (``op.fixed_inputs``: ``x.sum(1)``, ``nd.add(a, b)``, ``x.reshape(4, 16)``) the inputs are
    the first positional arguments, and the rest binds the same way every time it recurs.
    So the first call takes the full rule (every check, every error message), and a call with
    the same types and the same constants (ints, floats, strings, tuples of them...) reuses its
    result. Calls that bind otherwise (inputs by keyword, a list or a config object among the
    arguments) always take the full rule.

    >>> from samediff.ops import REGISTRY
    >>> inputs, attrs, name, rec = bind_arguments(REGISTRY["sum"], ("x", 0, 1), {})
    >>> inputs, dict(attrs), rec
    (['x'], {'dims': (0, 1)}, {dims=(0, 1), keep_dims=False})
    >>> bind_arguments(REGISTRY["sum"], ("y", 0, 1), {})[3] is rec   # memoized
    True
    """
    n = op.fixed_inputs
    if len(args) == n and not kwargs and op.default_attrs is not None and (
            op.name not in OVERLOADS):
        return list(args), _NO_ATTRS, None, op.default_attrs  # x.exp(), x.add(y): nothing to bind
    key = None
    if n is not None:
        static = args[n:]
        types = tuple(map(type, args))
        if kwargs or tuple in types:  # 1 == 1.0 == True: keys that tell them apart
            static = (_typed(static), *[(k, _typed(v)) for k, v in kwargs.items()])
        key = (op, types, static)
        try:
            hit = _BOUND.get(key)
        except TypeError:  # an unhashable argument (a list, a numpy array): the full rule
            hit = key = None
        if hit is not None:
            return [args[0]] if n == 1 else list(args[:n]), hit[0], hit[1], hit[2]
    inputs, attrs, name = split_call(op, args, kwargs)
    rec = op.make_attrs(attrs) if attrs else op.default_attrs
    if rec is None:
        rec = op.make_attrs({})  # raises: a required attribute is missing
    if key is not None and len(args) >= n and len(inputs) == n and all(
            i is a for i, a in zip(inputs, args)) and _constant(args[n:]) and _constant(
            tuple(kwargs.values())):
        if len(_BOUND) >= _BOUND_LIMIT:
            _BOUND.clear()  # crude bound: the calls of a program are few
        attrs = MappingProxyType(attrs)  # shared by every call that hits: read-only
        _BOUND[key] = (attrs, name, rec)
    return inputs, attrs, name, rec


def _typed(value: Any) -> Any:
    if type(value) is tuple:
        return tuple(_typed(v) for v in value)
    return (type(value), value)


def _constant(values: tuple) -> bool:
    """Only plain constants (recursively, in tuples): a memoized call must not keep a mutable
    or identity-hashed object (a config, an array) that could change between calls."""
    return all(_constant(v) if type(v) is tuple else type(v) in _CONSTANTS
               or isinstance(v, np.dtype) for v in values)


#: The ND4J front end, checked against the op table when this module is imported.
ND4J = Frontend("nd4j", NAMES, NAMESPACES, split_call, INPLACE, frozenset(OVERLOADS),
                bind_arguments)
