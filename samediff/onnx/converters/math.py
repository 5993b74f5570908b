"""ONNX converters, math family: reductions (Reduce*), ArgMax/ArgMin, CumSum/CumProd,
Softmax/LogSoftmax/Hardmax, TopK, Mod, bitwise ops and BitShift, IsInf, Det, and the
activations that are not one table op (Gelu, HardSigmoid, HardSwish, ThresholdedRelu, Celu,
Shrink, Swish, PRelu), and Einsum (composed of permutes, diagonals, sums and batched matmuls).

ONNX results keep their input's dtype where numpy widens (the sum of int32 is int64, the mean
of ints float64): those results are cast back, the way ONNX's own definitions state them.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..table import converter

Value = Any  # SDVariable | np.ndarray


# --- helpers ----------------------------------------------------------------------------------

def _like(node: Any, value: Any, ref: Value) -> np.ndarray:
    """A constant of ``ref``'s dtype (a 0-d array: it broadcasts like a scalar)."""
    return np.asarray(value, node.dtype(ref))


def _keep_dtype(node: Any, out: Value, ref: Value) -> Value:
    """``out`` cast to ``ref``'s dtype when numpy's rules widened it."""
    dtype = node.dtype(ref)
    return out if node.dtype(out) == dtype else node.op("cast", out, dtype=dtype)


def _axis(node: Any, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise node.fail(f"axis {axis} is out of range for an input of rank {rank}")
    return axis % rank if rank else 0


def _dim(node: Any, x: Value, axis: int, why: str) -> int:
    """The static size of ``x``'s dim ``axis`` (an error naming ``why`` if run-time only)."""
    size = node.shape(x)[axis]
    if size < 0:
        raise node.fail(f"{why} needs the size of dim {axis}, only known at run time")
    return size


# --- reductions ---------------------------------------------------------------------------------

def _log_sum(node: Any, x: Value, axes: tuple[int, ...], keep: bool) -> Value:
    return node.op("log", node.op("sum", x, dims=axes, keep_dims=keep))


def _sum_square(node: Any, x: Value, axes: tuple[int, ...], keep: bool) -> Value:
    return node.op("sum", node.op("square", x), dims=axes, keep_dims=keep)


def _table(name: str) -> Callable:
    return lambda node, x, axes, keep: node.op(name, x, dims=axes, keep_dims=keep)


# op type -> how it reduces, and the value of a reduction over an empty set (ONNX's spec:
# the identity of the reduction; max/min the lowest/highest value of the dtype)
_REDUCE: dict[str, Callable] = {
    "ReduceSum": _table("sum"), "ReduceMean": _table("mean"), "ReduceMax": _table("max"),
    "ReduceMin": _table("min"), "ReduceProd": _table("prod"), "ReduceL1": _table("norm1"),
    "ReduceL2": _table("norm2"), "ReduceLogSumExp": _table("log_sum_exp"),
    "ReduceLogSum": _log_sum, "ReduceSumSquare": _sum_square,
}


def _lowest(dtype: np.dtype) -> Any:
    return (-np.inf if dtype.kind == "f" else False if dtype.kind == "b"
            else np.iinfo(dtype).min)


def _highest(dtype: np.dtype) -> Any:
    return (np.inf if dtype.kind == "f" else True if dtype.kind == "b"
            else np.iinfo(dtype).max)


_EMPTY: dict[str, Callable[[np.dtype], Any]] = {
    "ReduceSum": lambda d: 0, "ReduceL1": lambda d: 0, "ReduceL2": lambda d: 0,
    "ReduceSumSquare": lambda d: 0, "ReduceProd": lambda d: 1, "ReduceMean": lambda d: np.nan,
    "ReduceMax": _lowest, "ReduceMin": _highest, "ReduceLogSum": lambda d: -np.inf,
    "ReduceLogSumExp": lambda d: -np.inf,
}

_REDUCE_OPS = tuple(_REDUCE)


def _reduce(node: Any, axes: tuple[int, ...] | None) -> Value:
    """Reduce input 0 over ``axes`` (None: not given) with the node's keepdims and
    noop_with_empty_axes."""
    x = node.input(0)
    shape = node.shape(x)
    rank = len(shape)
    keep = bool(node.attr("keepdims", 1))
    if not axes:
        # noop_with_empty_axes reduces over no axes (numpy's axis=()): the identity for the
        # plain reductions, the elementwise steps alone for composite ones (x**2, log x...)
        axes = () if node.attr("noop_with_empty_axes", 0) else tuple(range(rank))
    axes = tuple(sorted({_axis(node, a, rank) for a in axes}))
    if any(shape[a] == 0 for a in axes):
        # nothing to reduce: ONNX defines the result as the reduction's identity; numpy's
        # max/min raise there, so the (static) result is written out
        out_shape = tuple(1 if i in axes else d for i, d in enumerate(shape)
                          if keep or i not in axes)
        if any(d < 0 for d in out_shape):
            raise node.fail("a reduction over an empty dim with run-time dims elsewhere is "
                            "not supported")
        dtype = node.dtype(x)
        return np.full(out_shape, _EMPTY[node.op_type](dtype), dtype)
    return _keep_dtype(node, _REDUCE[node.op_type](node, x, axes, keep), x)


@converter(_REDUCE_OPS, since=1)
def _reduce_attr_axes(node: Any) -> Value:
    axes = node.attr("axes")
    return _reduce(node, None if axes is None else tuple(int(a) for a in axes))


@converter("ReduceSum", since=13)
@converter(tuple(op for op in _REDUCE_OPS if op != "ReduceSum"), since=18)
def _reduce_input_axes(node: Any) -> Value:
    # axes moved from an attribute to input 1 (ReduceSum at 13, the others at 18)
    return _reduce(node, node.static_ints(1, "axes"))


# --- ArgMax / ArgMin ---------------------------------------------------------------------------

@converter(("ArgMax", "ArgMin"), since=1)
def _arg_extremum(node: Any) -> Value:
    x = node.input(0)
    rank = node.rank(x)
    axis = _axis(node, int(node.attr("axis", 0)), rank)
    keep = bool(node.attr("keepdims", 1))
    name = "argmax" if node.op_type == "ArgMax" else "argmin"
    if not node.attr("select_last_index", 0):
        return node.op(name, x, dims=(axis,), keep_dims=keep)  # first index on ties
    # the last index on ties: the first one of the reversed axis, counted from the end
    n = _dim(node, x, axis, "select_last_index")
    idx = node.op(name, node.op("reverse", x, dims=(axis,)), dims=(axis,), keep_dims=keep)
    return node.op("sub", np.asarray(n - 1, np.int64), idx)


# --- CumSum / CumProd --------------------------------------------------------------------------

@converter("CumSum", since=11)
@converter("CumProd", since=26)
def _cumulative(node: Any) -> Value:
    x = node.input(0)
    (axis,) = node.static_ints(1, "axis")
    axis = _axis(node, axis, node.rank(x))
    out = node.op("cumsum" if node.op_type == "CumSum" else "cumprod", x, axis=axis,
                  exclusive=bool(node.attr("exclusive", 0)),
                  reverse=bool(node.attr("reverse", 0)))
    return _keep_dtype(node, out, x)


# --- Softmax / LogSoftmax / Hardmax ------------------------------------------------------------

def _hardmax(node: Any, x: Value, axis: int) -> Value:
    """1 at the first maximum along ``axis``, 0 elsewhere."""
    n = _dim(node, x, axis, "Hardmax")
    idx = node.op("argmax", x, dims=(axis,))
    return node.op("one_hot", idx, depth=n, axis=axis, dtype=node.dtype(x))


_NORMALIZE: dict[str, Callable] = {
    "Softmax": lambda node, x, axis: node.op("softmax", x, dim=axis),
    "LogSoftmax": lambda node, x, axis: node.op("log_softmax", x, dim=axis),
    "Hardmax": _hardmax,
}


@converter(tuple(_NORMALIZE), since=1)
def _normalize_2d(node: Any) -> Value:
    # before opset 13 the input is coerced to 2-D: [prod(dims before axis), prod(the rest)],
    # and the op acts on each row of that
    x = node.input(0)
    shape = node.shape(x)
    axis = _axis(node, int(node.attr("axis", 1)), len(shape))
    lead, rest = shape[:axis], shape[axis:]
    if sum(d < 0 for d in shape) > 1 or any(d < 0 for d in rest):
        raise node.fail("coercing to 2-D (opset < 13) needs the dims from the axis on "
                        "known, and at most one run-time dim")
    rows = -1 if any(d < 0 for d in lead) else math.prod(lead)
    flat = node.op("reshape", x, shape=(rows, math.prod(rest)))
    return node.op("reshape", _NORMALIZE[node.op_type](node, flat, 1), shape=tuple(shape))


@converter(tuple(_NORMALIZE), since=13)
def _normalize_axis(node: Any) -> Value:
    x = node.input(0)
    axis = _axis(node, int(node.attr("axis", -1)), node.rank(x))
    return _NORMALIZE[node.op_type](node, x, axis)


# --- TopK ---------------------------------------------------------------------------------------

def _top_k(node: Any, k: int) -> tuple[Value, Value]:
    x = node.input(0)
    axis = _axis(node, int(node.attr("axis", -1)), node.rank(x))
    n = node.shape(x)[axis]
    if k < 0 or (n >= 0 and k > n):
        raise node.fail(f"k={k} is out of range for an axis of size {n}")
    # sorted=0 leaves the order unspecified: the sorted order is one such order
    largest = bool(node.attr("largest", 1))
    return (node.op("top_k", x, k=k, axis=axis, largest=largest),
            node.op("top_k_indices", x, k=k, axis=axis, largest=largest))


@converter("TopK", since=1)
def _top_k_attr(node: Any) -> tuple[Value, Value]:
    return _top_k(node, int(node.attr("k")))


@converter("TopK", since=10)
def _top_k_input(node: Any) -> tuple[Value, Value]:
    (k,) = node.static_ints(1, "k")
    return _top_k(node, k)


# --- Mod, bitwise ops, BitShift -----------------------------------------------------------------

@converter("Mod", since=10)
def _mod(node: Any) -> Value:
    # (fmod=0 on floats is only defined from opset 28, as numpy's mod: one entry serves all)
    a, b = node.input(0), node.input(1)
    if not node.attr("fmod", 0):
        return node.op("floor_mod", a, b)  # the sign of the divisor, as Python's %
    # C's fmod: the sign of the dividend. |a| mod |b| is exact (both non-negative), and the
    # dividend's sign is put back (copysign keeps -0.0 for a negative zero remainder)
    r = node.op("floor_mod", node.op("abs", a), node.op("abs", b))
    if node.dtype(a).kind == "f":
        return node.op("copysign", r, a)
    return node.op("where", node.op("lt", a, _like(node, 0, a)), node.op("neg", r), r)


_BITWISE = {"BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor"}


@converter(tuple(_BITWISE), since=18)
def _bitwise(node: Any) -> Value:
    return node.op(_BITWISE[node.op_type], node.input(0), node.input(1))


@converter("BitwiseNot", since=18)
def _bitwise_not(node: Any) -> Value:
    return node.op("bitwise_not", node.input(0))


@converter("BitShift", since=11)
def _bit_shift(node: Any) -> Value:
    direction = node.attr("direction")
    ops = {"LEFT": "left_shift", "RIGHT": "right_shift"}
    if direction not in ops:
        raise node.fail(f"direction must be LEFT or RIGHT, got {direction!r}")
    return node.op(ops[direction], node.input(0), node.input(1))


# --- IsInf, Det ---------------------------------------------------------------------------------

@converter("IsInf", since=10)
def _is_inf(node: Any) -> Value:
    x = node.input(0)
    pos, neg = int(node.attr("detect_positive", 1)), int(node.attr("detect_negative", 1))
    inf = node.op("isinf", x)
    if pos and neg:
        return inf
    if not (pos or neg):
        return node.op("logical_and", inf, np.asarray(False))
    side = node.op("gt" if pos else "lt", x, _like(node, 0, x))
    return node.op("logical_and", inf, side)


@converter("Det", since=11)
def _det(node: Any) -> Value:
    return node.op("det", node.input(0))


# --- activations --------------------------------------------------------------------------------

@converter("Gelu", since=20)
def _gelu(node: Any) -> Value:
    approximate = node.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise node.fail(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return node.op("gelu", node.input(0), approximate=approximate == "tanh")


def _hard_sigmoid(node: Any, x: Value, alpha: float, beta: float) -> Value:
    """max(0, min(1, alpha * x + beta))."""
    lin = node.op("add", node.op("mul", x, _like(node, alpha, x)), _like(node, beta, x))
    return node.op("maximum", node.op("minimum", lin, _like(node, 1, x)), _like(node, 0, x))


@converter("HardSigmoid", since=1)
def _hard_sigmoid_node(node: Any) -> Value:
    return _hard_sigmoid(node, node.input(0), float(node.attr("alpha", 0.2)),
                         float(node.attr("beta", 0.5)))


@converter("HardSwish", since=14)
def _hard_swish(node: Any) -> Value:
    x = node.input(0)
    return node.op("mul", x, _hard_sigmoid(node, x, 1.0 / 6.0, 0.5))


@converter("ThresholdedRelu", since=10)
def _thresholded_relu(node: Any) -> Value:
    x = node.input(0)
    alpha = _like(node, float(node.attr("alpha", 1.0)), x)
    return node.op("where", node.op("gt", x, alpha), x, _like(node, 0, x))


@converter("Celu", since=12)
def _celu(node: Any) -> Value:
    # max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
    x = node.input(0)
    alpha = _like(node, float(node.attr("alpha", 1.0)), x)
    neg = node.op("mul", alpha, node.op("expm1", node.op("div", x, alpha)))
    return node.op("add", node.op("maximum", x, _like(node, 0, x)),
                   node.op("minimum", neg, _like(node, 0, x)))


@converter("Shrink", since=9)
def _shrink(node: Any) -> Value:
    x = node.input(0)
    lambd, bias = float(node.attr("lambd", 0.5)), float(node.attr("bias", 0.0))
    lo = node.op("where", node.op("lt", x, _like(node, -lambd, x)),
                 node.op("add", x, _like(node, bias, x)), _like(node, 0, x))
    return node.op("where", node.op("gt", x, _like(node, lambd, x)),
                   node.op("sub", x, _like(node, bias, x)), lo)


@converter("Swish", since=24)
def _swish(node: Any) -> Value:
    x = node.input(0)
    alpha = float(node.attr("alpha", 1.0))
    if alpha == 1.0:
        return node.op("swish", x)
    return node.op("mul", x, node.op("sigmoid", node.op("mul", x, _like(node, alpha, x))))


@converter("PRelu", since=7)
def _prelu(node: Any) -> Value:
    # slope broadcasts to x (unidirectionally) from opset 7
    x, slope = node.input(0), node.input(1)
    return node.op("where", node.op("lt", x, _like(node, 0, x)), node.op("mul", x, slope), x)


# --- Einsum -------------------------------------------------------------------------------------
# The equation is taken apart at import: each operand's repeated labels become diagonals
# (gathered, exact), labels only one operand has and the output lacks are summed out, then the
# operands are contracted left to right -- a batched matmul when every dim involved is known
# and equal, else a broadcast product summed over the contracted labels -- and the result is
# permuted to the output's label order.

def _einsum_terms(node: Any, xs: list) -> tuple[list[str], str]:
    """The operand and output label strings, each ``...`` replaced by one private label per
    broadcast dim (right-aligned, as numpy), and the implicit output filled in."""
    equation = node.attr("equation").replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(xs):
        raise node.fail(f"equation {equation!r} names {len(terms)} operands, the node has "
                        f"{len(xs)}")
    # private labels for ellipsis dims: characters no equation uses
    widths = [node.rank(x) - (len(t) - 3) for t, x in zip(terms, xs) if "..." in t]
    ell = "".join(chr(0x100 + i) for i in range(max(widths, default=0)))
    out_terms = []
    for t, x in zip(terms, xs):
        if "..." in t:
            t = t.replace("...", ell[len(ell) - (node.rank(x) - (len(t) - 3)):])
        if len(t) != node.rank(x):
            raise node.fail(f"term {t!r} of {equation!r} does not match an input of rank "
                            f"{node.rank(x)}")
        out_terms.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:  # implicit: the broadcast dims, then the labels used once, in alphabetical order
        joined = "".join(terms)
        out = ell + "".join(sorted(c for c in set(joined) if c.isalpha() and joined.count(c) == 1))
    return out_terms, out


def _diagonal(node: Any, x: Value, term: str, label: str) -> tuple[Value, str]:
    """Take the diagonal of the first two dims labelled ``label``: they become one (last) dim."""
    p = term.index(label)
    q = term.index(label, p + 1)
    n = _dim(node, x, p, "an Einsum diagonal")
    rest = [i for i in range(len(term)) if i not in (p, q)]
    x = node.op("permute", x, dims=tuple(rest) + (p, q))
    shape = node.shape(x)
    lead = shape[:-2]
    if sum(d < 0 for d in lead) > 1:
        raise node.fail("an Einsum diagonal with several run-time dims is not supported")
    x = node.op("reshape", x, shape=tuple(lead) + (n * n,))
    x = node.op("gather", x, np.arange(0, n * n, n + 1, dtype=np.int64), axis=len(lead))
    return x, "".join(term[i] for i in rest) + label


def _align(node: Any, x: Value, term: str, order: str) -> Value:
    """``x`` (labels ``term``) permuted to ``order``'s sequence, size-1 dims where it lacks a
    label."""
    present = [c for c in order if c in term]
    perm = tuple(term.index(c) for c in present)
    if perm != tuple(range(len(term))):
        x = node.op("permute", x, dims=perm)
    for i, c in enumerate(order):
        if c not in term:
            x = node.op("expand_dims", x, axis=i)
    return x


def _contract(node: Any, a: Value, ta: str, b: Value, tb: str,
              needed: set[str]) -> tuple[Value, str]:
    common = [c for c in ta if c in tb]
    batch = "".join(c for c in common if c in needed)
    summed = "".join(c for c in common if c not in needed)
    left = "".join(c for c in ta if c not in tb)
    right = "".join(c for c in tb if c not in ta)
    sa = dict(zip(ta, node.shape(a)))
    sb = dict(zip(tb, node.shape(b)))
    dims = list(sa.values()) + list(sb.values())
    if summed and all(d >= 0 for d in dims) and all(sa[c] == sb[c] for c in common):
        # a batched matmul: a -> [B, L, K], b -> [B, K, R]
        def size(labels: str, s: dict[str, int]) -> int:
            return math.prod(s[c] for c in labels)
        a3 = node.op("reshape", _align(node, a, ta, batch + left + summed),
                     shape=(size(batch, sa), size(left, sa), size(summed, sa)))
        b3 = node.op("reshape", _align(node, b, tb, batch + summed + right),
                     shape=(size(batch, sb), size(summed, sb), size(right, sb)))
        out = node.op("matmul", a3, b3)
        shape = tuple(sa[c] for c in batch + left) + tuple(sb[c] for c in right)
        return node.op("reshape", out, shape=shape), batch + left + right
    order = batch + left + right + summed
    out = node.op("mul", _align(node, a, ta, order), _align(node, b, tb, order))
    if summed:
        n = len(batch + left + right)
        out = node.op("sum", out, dims=tuple(range(n, len(order))))
    return out, batch + left + right


@converter("Einsum", since=12)
def _einsum(node: Any) -> Value:
    xs = node.inputs()
    terms, out = _einsum_terms(node, xs)
    dtype = node.dtype(xs[0])
    xs = list(xs)
    for k, (x, t) in enumerate(zip(xs, terms)):
        for c in dict.fromkeys(t):
            while t.count(c) > 1:
                x, t = _diagonal(node, x, t, c)
        xs[k], terms[k] = x, t
    for k, (x, t) in enumerate(zip(xs, terms)):
        others = set(out).union(*(terms[j] for j in range(len(terms)) if j != k))
        private = tuple(i for i, c in enumerate(t) if c not in others)
        if private:  # summed over by this operand alone
            xs[k] = node.op("sum", x, dims=private)
            terms[k] = "".join(c for c in t if c in others)
    acc, ta = xs[0], terms[0]
    for k in range(1, len(xs)):
        needed = set(out).union(*terms[k + 1:])
        acc, ta = _contract(node, acc, ta, xs[k], terms[k], needed)
    if set(ta) != set(out):
        raise node.fail(f"output labels {out!r} are not those of the operands")
    perm = tuple(ta.index(c) for c in out)
    if perm != tuple(range(len(out))):
        acc = node.op("permute", acc, dims=perm)
    if acc is node.input(0):
        acc = node.op("identity", acc)
    if node.dtype(acc) != dtype:  # (sums of small ints widen: ONNX keeps the input type)
        acc = node.op("cast", acc, dtype=dtype)
    return acc
