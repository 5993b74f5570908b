"""Op families: broadcasting, dtype promotion and reduction rules, written once.

Dtype rules are not re-derived by hand: an elementwise or reduction op's output dtype is
found by running its own numpy implementation on tiny arrays of the input dtypes (cached per
op, attributes and input dtypes). Eager results and graph inference therefore agree by
construction, and NumPy 2's promotion rules (NEP 50: Python scalars are weak) hold everywhere.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from .registry import REQUIRED, Attr, OpDef, TensorType, define, get_op

Shape = tuple[int, ...]

# --------------------------------------------------------------------------------------------
# Shape helpers (unknown dims are -1)
# --------------------------------------------------------------------------------------------


def broadcast_shapes(*shapes: Shape) -> Shape:
    """NumPy broadcasting that also understands unknown (-1) dims."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        dims = [s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0]
        known = {d for d in dims if d != 1 and d >= 0}
        if len(known) > 1:
            raise ValueError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} "
                             f"cannot be broadcast together")
        if known:
            out.append(known.pop())
        elif any(d < 0 for d in dims):
            out.append(-1)
        else:
            out.append(1)
    return tuple(out)


def normalize_axis(axis: int, rank: int, what: str = "dim") -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def normalize_dims(dims: Sequence[int] | None, rank: int) -> tuple[int, ...]:
    """Canonical sorted non-negative dims; ``None`` means all dims."""
    if dims is None:
        return tuple(range(rank))
    out = tuple(sorted(normalize_axis(d, rank) for d in dims))
    if len(set(out)) != len(out):
        raise ValueError(f"repeated dim in {tuple(dims)}")
    return out


def reduce_shape(shape: Shape, dims: Sequence[int] | None, keep_dims: bool) -> Shape:
    axes = normalize_dims(dims, len(shape))
    if keep_dims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def numel(shape: Shape) -> int:
    """Number of elements, or -1 when a dim is unknown."""
    if any(d < 0 for d in shape):
        return -1
    return int(np.prod(shape, dtype=np.int64))


PAD_MODES = ("constant", "reflect", "symmetric")


def pad_shape(shape: Shape, paddings: Any, mode: str) -> Shape:
    """Shape of ``pad(x, paddings, mode)`` for x of ``shape`` (checks paddings and mode)."""
    if mode not in PAD_MODES:
        raise ValueError(f"mode must be one of {PAD_MODES}, got {mode!r}")
    pairs_ok = isinstance(paddings, tuple) and len(paddings) == len(shape) and all(
        isinstance(p, tuple) and len(p) == 2 and all(type(v) is int and v >= 0 for v in p)
        for p in paddings)
    if not pairs_ok:
        raise ValueError(f"paddings must be {len(shape)} (before, after) pairs of non-negative "
                         f"ints, one per dim, got {paddings}")
    out = []
    for i, (d, (b, e)) in enumerate(zip(shape, paddings)):
        if mode != "constant" and d == 0 and b + e:
            raise ValueError(f"{mode} padding of dim {i} needs a non-empty dim")
        out.append(d + b + e if d >= 0 else -1)
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Dtype probing
# --------------------------------------------------------------------------------------------

_WEAK_SAMPLE = {"c": 1.0 + 1.0j, "f": 1.0, "i": 1, "u": 1, "b": True}


@functools.lru_cache(maxsize=16384)
def probe_dtypes(op: OpDef, attrs: Any, sig: tuple[tuple[np.dtype, bool], ...],
                 overrides: tuple[tuple[str, Any], ...] = ()) -> tuple[np.dtype, ...]:
    """Output dtypes of ``op.impl`` for inputs of the given (dtype, weak) signature."""
    args = [_WEAK_SAMPLE[dt.kind] if weak else np.ones((2,), dt) for dt, weak in sig]
    kwargs = {**vars(attrs), **dict(overrides)}
    with np.errstate(all="ignore"):
        out = op.impl(*args, **kwargs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return tuple(np.asarray(o).dtype for o in outs)


def _signature(types: Sequence[TensorType]) -> tuple[tuple[np.dtype, bool], ...]:
    return tuple((t.dtype, t.weak) for t in types)


# --------------------------------------------------------------------------------------------
# Family factories
# --------------------------------------------------------------------------------------------


def _ufunc_into(ufunc: np.ufunc, out: np.ndarray, *inputs: Any) -> None:
    """An ``OpDef.into`` from a ufunc: numpy's ``out=`` (default casting "same_kind") casts in
    small buffers, and makes a temporary only where an input overlaps ``out`` unsafely."""
    ufunc(*inputs, out=out)


def unary_rule(fn: Callable[..., Any]) -> Callable[..., list]:
    """The gradient rule of a one-input op from ``fn(x, y, g, attrs) -> dx`` (``y`` the output)."""
    return lambda ins, outs, gs, a: [fn(ins[0], outs[0], gs[0], a)]


def input_rule(fn: Callable[..., Any]) -> Callable[..., list]:
    """The gradient rule of a one-input, one-output op from ``fn(x, g, attrs) -> dx`` (for
    rules that do not read the output: shape ops)."""
    return lambda ins, outs, gs, a: [fn(ins[0], gs[0], a)]


def binary_rule(fn: Callable[..., Any]) -> Callable[..., list]:
    """The gradient rule of a two-input op from ``fn(x, y, out, g) -> (dx, dy)``."""
    return lambda ins, outs, gs, a: list(fn(ins[0], ins[1], outs[0], gs[0]))


def elementwise(name: str, inputs: Sequence[str], impl: Callable, **meta: Any) -> OpDef:
    """An elementwise op: output shape is the broadcast of the inputs, dtype from numpy rules.

    ``meta`` are ``OpDef`` fields: ``scalar=`` (its fused-kernel expression) or ``unfused=``
    (why it has none), ``grad=`` (the rule), ``doc=``, ``namespace=``..."""
    op: OpDef

    def infer(types: list[TensorType], attrs: Any) -> list[TensorType]:
        shape = broadcast_shapes(*(t.shape for t in types))
        weak = all(t.weak for t in types)
        return [TensorType(shape, d, weak) for d in probe_dtypes(op, attrs, _signature(types))]

    if isinstance(impl, np.ufunc) and impl.nout == 1 and "into" not in meta:
        meta["into"] = functools.partial(_ufunc_into, impl)  # in-place updates write through
    op = define(name, inputs, infer, impl, elementwise=True, **meta)
    return op


def unary(name: str, impl: Callable, *, grad: Any = None, **meta: Any) -> OpDef:
    """A one-input elementwise op; ``grad=fn(x, y, g, attrs) -> dx`` (``y`` the output) or
    ``NONDIFF``."""
    rule = unary_rule(grad) if callable(grad) else grad
    return elementwise(name, ["x"], impl, grad=rule, **meta)


def binary(name: str, impl: Callable, *, grad: Any = None, **meta: Any) -> OpDef:
    """A two-input elementwise op; ``grad=fn(x, y, out, g) -> (dx, dy)`` or ``NONDIFF``."""
    rule = binary_rule(grad) if callable(grad) else grad
    return elementwise(name, ["x", "y"], impl, grad=rule, **meta)


REDUCE_ATTRS = {"dims": (Attr.DIMS, None), "keep_dims": (Attr.BOOL, False)}


def reduction(name: str, impl: Callable, *, attrs: dict | None = None, grad: Any = None,
              **meta: Any) -> OpDef:
    """A reduction over ``dims`` (None = all) with ``keep_dims``; dtype from numpy rules.
    ``grad=fn(x, y, g, attrs) -> dx`` (``y`` the result, ``g`` of its shape) or ``NONDIFF``."""
    op: OpDef

    def infer(types: list[TensorType], a: Any) -> TensorType:
        (x,) = types
        shape = reduce_shape(x.shape, a.dims, a.keep_dims)
        (dtype,) = probe_dtypes(op, a, _signature(types), (("dims", None), ("keep_dims", False)))
        return TensorType(shape, dtype)

    rule = unary_rule(grad) if callable(grad) else grad
    op = define(name, ["x"], infer, impl, attrs={**REDUCE_ATTRS, **(attrs or {})},
                reduction=True, grad=rule, **meta)
    return op


def probed_infer(name: str, shape_fn, overrides: tuple = ()):
    """Inference from a shape rule ``shape_fn(*shapes, attrs)`` plus the dtype that the op's
    own numpy impl gives (probed on tiny arrays, with ``overrides`` making attrs probe-safe)."""
    def infer(types: list[TensorType], a) -> TensorType:
        shape = shape_fn(*(t.shape for t in types), a)
        sig = tuple((t.dtype, t.weak) for t in types)
        (dtype,) = probe_dtypes(get_op(name), a, sig, overrides)
        return TensorType(shape, dtype)
    return infer


def same_type(types: list[TensorType], attrs: Any) -> TensorType:
    """Inference for ops whose output has the type of their first input."""
    return TensorType(types[0].shape, types[0].dtype)


__all__ = ["REQUIRED", "Attr", "broadcast_shapes", "normalize_axis", "normalize_dims",
           "reduce_shape", "numel", "pad_shape", "PAD_MODES", "probe_dtypes", "elementwise",
           "unary", "binary", "reduction", "probed_infer", "same_type", "unary_rule",
           "input_rule", "binary_rule"]
