"""``nd.jacrev``, ``nd.jacfwd`` and ``nd.hessian``: Jacobians of Python functions, on ``nd.grad``.

The Jacobian of ``f`` with respect to an argument ``x`` has, as in JAX, the shape
``f(x).shape + x.shape``: row ``i`` is the gradient of output element ``i``. Each row is one
``nd.value_and_grad`` of the scalar function ``x -> f(x).reshape(-1)[i]`` (a vector-Jacobian
product with a one-hot cotangent), so everything ``nd.grad`` composes with, these do too:

* called eagerly, the rows are computed eagerly;
* inside ``@nd.compile`` every row is replayed into the trace: the Jacobian is one plan;
* called on graph values (an outer ``nd.grad`` or Jacobian), the rows record into that
  graph, so ``nd.hessian(f) = nd.jacfwd(nd.jacrev(f))`` differentiates a Jacobian again.

nd4py has no forward mode (JVPs) yet, so ``jacfwd`` is computed the same way as ``jacrev``,
by rows of reverse-mode products: the result is the same, the cost is one backward pass per
*output* element (JAX's ``jacfwd`` costs one forward pass per *input* element).

Arguments may be arrays, Python floats or dicts/lists/tuples of them (the Jacobian then has
that structure per output), and ``f`` may return an array or a dict/list/tuple of arrays
(the result has that structure outside, as in JAX).

>>> import nd4py as nd
>>> f = lambda x: nd.math.sin(x) * 2.0
>>> nd.jacrev(f)(nd.create([0.0, 0.0])).numpy().tolist()
[[2.0, 0.0], [0.0, 2.0]]
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from .array import bind
from .errors import GradientError
from .functional import parse_argnums, tree_leaves, tree_map, value_and_grad
from .ops import get_op

_STACK, _RESHAPE, _ZEROS = get_op("stack"), get_op("reshape"), get_op("zeros")


def jacrev(fn: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Callable[..., Any]:
    """A function computing the Jacobian of ``fn`` with respect to the arguments ``argnums``
    by reverse mode (like ``jax.jacrev``): shape ``output.shape + argument.shape``; a tuple
    ``argnums`` gives a tuple of Jacobians.

    >>> import nd4py as nd
    >>> w = nd.create([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> nd.jacrev(lambda x: w @ x)(nd.create([1.0, -1.0])).numpy().tolist()
    [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    """
    return _jacobian(fn, argnums, "jacrev")


def jacfwd(fn: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Callable[..., Any]:
    """The Jacobian of ``fn`` (like ``jax.jacfwd``; same shapes as ``jacrev``). nd4py has no
    forward mode yet: it is computed by rows of reverse-mode products, exactly as ``jacrev``
    (one backward pass per output element), so results are identical.

    >>> import nd4py as nd
    >>> jac = nd.jacfwd(lambda x, y: x * y, argnums=(0, 1))(nd.create([2.0]), nd.create([3.0]))
    >>> [j.numpy().tolist() for j in jac]
    [[[3.0]], [[2.0]]]
    """
    return _jacobian(fn, argnums, "jacfwd")


def hessian(fn: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Callable[..., Any]:
    """The Hessian of a scalar function ``fn`` (like ``jax.hessian``): ``jacfwd(jacrev(fn))``,
    of shape ``x.shape + x.shape``; a tuple ``argnums`` gives a tuple (per argument) of tuples.

    >>> import nd4py as nd
    >>> h = nd.hessian(lambda x: (x * x * x).sum())(nd.create([1.0, 2.0]))
    >>> h.numpy().tolist()
    [[6.0, 0.0], [0.0, 12.0]]
    """
    return jacfwd(jacrev(fn, argnums), argnums)


def _jacobian(fn: Callable[..., Any], argnums: int | Sequence[int], kind: str) -> Callable:
    single, nums = parse_argnums(argnums, kind)
    name = getattr(fn, "__name__", "function")

    @functools.wraps(fn)
    def jacobian(*args: Any, **kwargs: Any) -> Any:
        # Row 0 also returns fn's output (as aux): its structure and shapes say how many rows
        # there are and how to lay them out. A row's gradients come back in argnums' structure.
        (_, out), grads = value_and_grad(_row(fn, 0, name, kind), argnums, True)(*args, **kwargs)
        leaves = tree_leaves(out)
        shapes = [_shape(leaf, name, kind) for leaf in leaves]
        total = sum(int(np.prod(s, dtype=np.int64)) for s in shapes)
        rows = [_flat(grads, single)] if total else []
        for g in range(1, total):
            _, grads = value_and_grad(_row(fn, g, name, kind), argnums, True)(*args, **kwargs)
            rows.append(_flat(grads, single))
        wrt = [args[i] for i in nums]  # in range: value_and_grad checked
        arg_leaves = [leaf for tree in wrt for leaf in tree_leaves(tree)]
        results, offset = [], 0
        for shape in shapes:
            size = int(np.prod(shape, dtype=np.int64))
            per_arg = [_assemble([row[a] for row in rows[offset:offset + size]], shape, leaf)
                       for a, leaf in enumerate(arg_leaves)]
            offset += size
            it = iter(per_arg)
            trees = tuple(tree_map(tree, lambda leaf, path: next(it)) for tree in wrt)
            results.append(trees[0] if single else trees)
        it = iter(results)
        return tree_map(out, lambda leaf, path: next(it))
    return jacobian


def _row(fn: Callable[..., Any], index: int, name: str, kind: str) -> Callable[..., Any]:
    """The scalar function ``args -> element index of fn(args)`` (elements of all output leaves
    counted in order), returning fn's output as aux."""
    @functools.wraps(fn)
    def row(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        k = index
        for leaf in tree_leaves(out):
            shape = _shape(leaf, name, kind)
            size = int(np.prod(shape, dtype=np.int64))
            if k < size:
                if not shape:
                    return leaf, out
                return bind(_RESHAPE, [leaf], {"shape": (-1,)})[k], out
            k -= size
        return 0.0, out  # no elements at all: a constant (zero gradients), only sizes are used
    return row


def _shape(leaf: Any, name: str, kind: str) -> tuple[int, ...]:
    """The shape of one output leaf, which must be a floating-point array (or float)."""
    if isinstance(leaf, float):
        return ()
    shape, dtype = getattr(leaf, "shape", None), getattr(leaf, "dtype", None)
    if shape is None or dtype is None or np.dtype(dtype).kind != "f":
        what = f"{np.dtype(dtype)} array" if dtype is not None else type(leaf).__name__
        raise GradientError(f"{kind} of {name}: the function returned a {what}; Jacobians "
                            f"exist for floating-point array outputs (or dicts/lists/tuples of "
                            f"them): cast it, or return only the float part")
    if any(d < 0 for d in shape):
        raise GradientError(f"{kind} of {name}: an output has shape {tuple(shape)}, with dims "
                            f"unknown until run time; the Jacobian needs its size now (give "
                            f"the placeholder a fixed shape)")
    return tuple(shape)


def _flat(grads: Any, single: bool) -> list:
    """One row's gradients: a flat list over the argnums' leaves."""
    return [g for tree in ((grads,) if single else grads) for g in tree_leaves(tree)]


def _assemble(parts: list, out_shape: tuple[int, ...], arg: Any) -> Any:
    """Stack rows (gradients shaped like ``arg``) into ``out_shape + arg.shape``."""
    arg_shape = tuple(getattr(arg, "shape", ()))
    if not parts:  # an empty output: a Jacobian with no elements
        dtype = np.dtype(getattr(arg, "dtype", np.float64))
        return bind(_ZEROS, [], {"shape": out_shape + arg_shape, "dtype": dtype})
    stacked = bind(_STACK, parts, {"axis": 0})
    return bind(_RESHAPE, [stacked], {"shape": out_shape + arg_shape})
