"""``nd.grad`` and ``nd.value_and_grad``: gradients of ordinary Python functions of arrays.

The function is run once on graph handles (``samediff/recorder.py``) standing for the
differentiated arguments, so every op it applies to them is recorded into a fresh graph IR;
autodiff's ``grad`` transform adds the backward pass; the forward and backward nodes are then
*replayed through* ``bind`` on the real arguments. Replaying through ``bind`` is what makes the
result compose:

* called eagerly, the ops run eagerly;
* inside ``nd.compile`` / ``graph_scope`` the arguments are traced arrays, so the replay is
  recorded into the trace — ``nd.compile(nd.grad(f))`` is one compiled plan;
* called on graph variables (an outer ``nd.grad``), the replay records into the outer graph, so
  gradients can be differentiated again.

Arguments may be arrays, Python floats or nested dicts/lists/tuples of them (like JAX's
pytrees); the gradient has the same structure. As in JAX, the function must return a
floating-point scalar (with ``has_aux=True``: ``(scalar, aux)``).

>>> import nd4py as nd
>>> f = lambda x: (x * x).sum()
>>> nd.grad(f)(nd.create([1.0, 2.0, 3.0])).numpy().tolist()
[2.0, 4.0, 6.0]
>>> value, g = nd.value_and_grad(lambda w, x: (w * x).sum(), argnums=(0, 1))(
...     nd.create([1.0, 2.0]), nd.create([3.0, 4.0]))
>>> value.item(), [a.numpy().tolist() for a in g]
(11.0, [[3.0, 4.0], [1.0, 2.0]])
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from .array import CURRENT_TRACE, NDArray, bind, type_of
from .autodiff import grad as grad_transform
from .errors import GradientError
from .ir import Graph, VariableType
from .ops import TensorType, get_op
from .recorder import GraphRecorder, GraphValue
from .surface import KEEP_IN_OPS
from .training_forms import training_graph


def grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0,
         has_aux: bool = False) -> Callable[..., Any]:
    """A function computing the gradient of ``fn`` (a scalar function) with respect to its
    arguments ``argnums`` (like ``jax.grad``); with ``has_aux`` it returns ``(grad, aux)``.

    >>> import nd4py as nd
    >>> nd.grad(lambda x: nd.exp(x).sum())(nd.create([0.0])).numpy().tolist()
    [1.0]
    """
    vg = value_and_grad(fn, argnums, has_aux)

    @functools.wraps(fn)
    def gradient(*args: Any, **kwargs: Any) -> Any:
        value, grads = vg(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads
    return gradient


def value_and_grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Callable[..., Any]:
    """A function returning ``(fn(*args), gradient)`` (like ``jax.value_and_grad``); with
    ``has_aux``, ``fn`` returns ``(value, aux)`` and the result is ``((value, aux), grad)``.
    ``argnums`` is an int (one gradient) or a tuple (a tuple of gradients)."""
    single, nums = parse_argnums(argnums, "value_and_grad")
    name = getattr(fn, "__name__", "function")

    @functools.wraps(fn)
    def value_and_gradient(*args: Any, **kwargs: Any) -> Any:
        for i in nums:
            if not -len(args) <= i < len(args):
                raise GradientError(f"grad of {name}: argnums {argnums!r} asks for argument "
                                    f"{i}, but {len(args)} positional argument(s) were given")
        nums_ = tuple(i % len(args) for i in nums)
        graph = Graph()
        rec = _FeedingRecorder(graph)
        rec.read_hint = _read_hint(name)  # `if x > 0:` on a recorded value: say why, as traces do
        call_args = list(args)
        leaves_of: dict[int, list[tuple[str, Any]]] = {}
        for i in nums_:
            leaves: list[tuple[str, Any]] = []
            call_args[i] = tree_map(args[i], lambda leaf, path, i=i, leaves=leaves: _placeholder(
                rec, leaf, f"arg{i}{path}", leaves, name))
            leaves_of[i] = leaves
        out = fn(*call_args, **kwargs)
        value, aux = _split_output(out, has_aux, name)
        loss = _check_loss(rec, value, name)
        if _in_training_mode():
            # differentiate the training forms themselves (dropout's mask, batch statistics),
            # not the inference ops: the replay below computes the value from the same
            # transformed graph, so value and gradient share one mask. Names read later are
            # kept by the transform; running-statistics updates have nowhere to go in a trace.
            graph, _updates = training_graph(graph)
        # like jax.grad, an argument the output does not depend on has a zero gradient
        upstream = _value_upstream(graph, loss)
        wrt = [n for i in nums_ for n, _ in leaves_of[i] if n in upstream]
        full, names = grad_transform(graph, [loss], wrt) if wrt else (graph, {})
        feeds = {n: leaf for i in nums_ for n, leaf in leaves_of[i]}
        feeds.update(rec.feeds)
        aux_names = [x.name for x in tree_leaves(aux) if rec.owns(x)]
        computed = [loss] if loss is not None else []
        results = _replay(full, feeds, [*computed, *names.values(), *aux_names])
        if loss is None:
            loss, results[None] = None, value  # type: ignore[index]
        grads = []
        for i in nums_:
            it = iter([results[names[n]] if n in names else _zeros_like(leaf)
                       for n, leaf in leaves_of[i]])
            grads.append(tree_map(args[i], lambda leaf, path: next(it)))
        aux_out = tree_map(aux, lambda x, path: results[x.name] if rec.owns(x) else x)
        value_out = (results[loss], aux_out) if has_aux else results[loss]
        return value_out, grads[0] if single else tuple(grads)
    return value_and_gradient


def parse_argnums(argnums: Any, who: str) -> tuple[bool, tuple[int, ...]]:
    """``(single, nums)`` from an ``argnums`` of an int or a non-empty tuple/list of ints (one
    rule for ``grad``, ``value_and_grad`` and the Jacobians)."""
    single = isinstance(argnums, int) and not isinstance(argnums, bool)
    nums = (argnums,) if single else tuple(argnums) if isinstance(argnums, (tuple, list)) else ()
    if not nums or any(not isinstance(i, int) or isinstance(i, bool) for i in nums):
        raise GradientError(f"{who}: argnums must be an int or a non-empty tuple of ints, "
                            f"got {argnums!r}")
    return single, nums


def _in_training_mode() -> bool:
    """Inside ``graph_scope(training=True)`` / ``nd.compile(training=True)`` (the trace says
    so; nested ``nd.grad`` calls see the same trace)."""
    return bool(getattr(CURRENT_TRACE.get(), "training", False))


class _FeedingRecorder(GraphRecorder):
    """Records the function's ops. Values from outside the function's graph — traced arrays
    (inside ``nd.compile``), an outer ``nd.grad``'s graph values, eager arrays — become
    placeholders fed with those very values at replay (not copied as constants), so they stay
    symbolic where they are symbolic."""

    def __init__(self, graph: Graph) -> None:
        super().__init__(graph)
        self.feeds: dict[str, Any] = {}
        self._fed: dict[int, str] = {}

    def _outside(self, x: Any) -> bool:
        return isinstance(x, NDArray) or (isinstance(x, GraphValue) and not self.owns(x))

    def _type(self, op: Any, x: Any) -> TensorType:
        if self._outside(x):
            return TensorType(tuple(x.shape), np.dtype(x.dtype))
        return super()._type(op, x)

    def _input_name(self, op: Any, x: Any, reserved: tuple[str, ...]) -> str:
        if not self._outside(x):
            return super()._input_name(op, x, reserved)
        name = self._fed.get(id(x))
        if name is None:
            name = self.graph.unique("input", self.graph.vars.keys() | set(reserved))
            self.graph.add_var(name, VariableType.PLACEHOLDER, self._type(op, x))
            self._fed[id(x)] = name
            self.feeds[name] = x  # keeps x alive: its id stays unique
        return name


def _value_upstream(graph: Graph, loss: str | None) -> set[str]:
    """The variables the loss's *value* depends on: ``graph.upstream`` without the inputs that
    only give a shape (of type-only ops, ``ones_like(x)``, and the target of shape adjoints,
    ``broadcast_like(g, x)``), so the gradient of a gradient that is constant in x (a linear
    function's: a Hessian's zero block) is zero, as in JAX, not an error."""
    if loss is None:
        return set()
    producers = graph.producers()
    seen, stack = {loss}, [loss]
    while stack:
        node = producers.get(stack.pop())
        if node is not None and not node.op.type_only:
            inputs = node.inputs[:1] if node.op.shape_adjoint else node.inputs
            fresh = [i for i in inputs if i not in seen]
            seen.update(fresh)
            stack.extend(fresh)
    return seen


def _read_hint(name: str) -> str:
    return (f"inside nd.grad of {name}: the function runs once on symbolic arguments to record "
            f"what to differentiate, so their values (and values computed from them) are not "
            f"known while it runs; {KEEP_IN_OPS}, or pass the value as an argument outside "
            f"argnums, which stays a concrete array")


def _zeros_like(leaf: Any) -> Any:
    if isinstance(leaf, (bool, int, float)):
        return 0.0
    return bind(get_op("zeros_like"), [leaf], {})


def _placeholder(rec: GraphRecorder, leaf: Any, name: str, leaves: list, fn_name: str) -> Any:
    ttype = _type_of_arg(leaf, name, fn_name)
    leaves.append((name, leaf))
    return rec.add(VariableType.PLACEHOLDER, ttype, name)


def _type_of_arg(leaf: Any, name: str, fn_name: str) -> TensorType:
    if isinstance(leaf, (NDArray, GraphValue)):  # traced arrays and graph values know theirs
        ttype = TensorType(tuple(leaf.shape), np.dtype(leaf.dtype), False)
    elif isinstance(leaf, (bool, int, float, np.ndarray, np.generic)):
        ttype = type_of(leaf)
    else:
        raise GradientError(f"grad of {fn_name}: cannot differentiate with respect to "
                            f"{type(leaf).__name__} ({name}); differentiated arguments are "
                            f"arrays, floats, or dicts/lists/tuples of them")
    if ttype.dtype.kind != "f":
        raise GradientError(f"grad of {fn_name}: argument {name} is {ttype.dtype}; gradients "
                            f"exist only for floating-point inputs (cast it, or leave it out "
                            f"of argnums)")
    return ttype


def _split_output(out: Any, has_aux: bool, name: str) -> tuple[Any, Any]:
    if not has_aux:
        return out, None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise GradientError(f"grad of {name} with has_aux=True: the function must return a "
                            f"pair (scalar, aux), got {_describe(out)}")
    return out[0], out[1]


def _describe(value: Any) -> str:
    if isinstance(value, GraphValue):
        return f"one array of type {value._var.ttype}"
    return type(value).__name__


def _check_loss(rec: GraphRecorder, value: Any, name: str) -> str | None:
    """The loss's name in the graph, or None for a float scalar that does not depend on the
    differentiated arguments (its gradient is zero, as in JAX)."""
    if not rec.owns(value):
        if isinstance(value, float) or (isinstance(value, (NDArray, GraphValue, np.ndarray))
                                        and tuple(value.shape) == ()
                                        and np.dtype(value.dtype).kind == "f"):
            return None
        raise GradientError(f"grad of {name}: the function must return a floating-point scalar "
                            f"computed from the differentiated arguments, got "
                            f"{_describe(value)}")
    ttype = rec.graph.vars[value.name].ttype
    if ttype.shape != () or ttype.dtype.kind != "f":
        raise GradientError(f"grad of {name}: the function must return a floating-point scalar, "
                            f"got {ttype}; reduce it (e.g. .sum() or .mean()) first")
    return value.name


def _replay(graph: Graph, feeds: dict[str, Any], outputs: list[str]) -> dict[str, Any]:
    """Run the nodes ``outputs`` need through ``bind``: eagerly, into the current trace, or into
    the graph of graph-variable feeds — whatever the feeds are."""
    values: dict[str, Any] = dict(feeds)
    for n, var in graph.vars.items():
        if var.value is not None:  # constants the function captured (weak literals stay weak)
            values[n] = var.value.item() if var.ttype.weak else var.value
    variables = graph.vars
    for node in graph.needed(outputs):
        result = bind(node.op, [values[i] for i in node.inputs], dict(vars(node.attrs)))
        results = result if isinstance(result, tuple) else (result,)
        for name, value in zip(node.outputs, results):
            if variables[name].ttype.weak and type(value) is NDArray:
                # arithmetic on weak literals alone (the exponent of pow's rule) stays a weak
                # Python scalar, as the graph typed it: it must not promote float32 to float64
                value = value.item()
            values[name] = value
    return {n: values[n] for n in outputs}


def tree_map(tree: Any, fn: Callable[[Any, str], Any], path: str = "") -> Any:
    """``tree`` (nested dicts/lists/tuples) with each leaf replaced by ``fn(leaf, path)``."""
    if isinstance(tree, dict):
        return {k: tree_map(v, fn, f"{path}[{k!r}]") for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        mapped = [tree_map(v, fn, f"{path}[{i}]") for i, v in enumerate(tree)]
        return type(tree)(mapped) if type(tree) in (list, tuple) else type(tree)(*mapped)
    return fn(tree, path)


def tree_leaves(tree: Any) -> list:
    """The leaves of ``tree``, in ``tree_map`` order."""
    leaves: list = []
    tree_map(tree, lambda leaf, path: leaves.append(leaf))
    return leaves
