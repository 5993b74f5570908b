"""ONNX sequence and optional ops: SequenceConstruct, SequenceEmpty, SequenceAt,
SequenceInsert, SequenceErase, SequenceLength, SplitToSequence, ConcatFromSequence,
SequenceMap, Optional, OptionalHasElement, OptionalGetElement, and Identity on them; plus the
helpers the control-flow converters use for sequence-valued ``If`` outputs and for ``Loop``s
carrying a sequence.

A sequence is an import-time structure (``importer.OnnxSequence``): its length is known when
the graph is built, its elements are ordinary values (graph variables computed at run time,
or constants). So the sequence ops are list manipulations at import -- no table op and no
run-time list type -- and everything computed from the elements stays an ordinary,
differentiable, compilable graph. The price: positions (SequenceAt, Insert, Erase) and a
split's sizes must be known at import (a run-time one is a named error saying so), and a
``Loop`` that grows a sequence is unrolled, its trip count known at import. An optional is
likewise known at import to be empty or not (``importer.OnnxOptional``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import np_dtype
from ..values import OnnxOptional, OnnxSequence, describe_value
from ..table import converter

#: the most iterations a Loop carrying a sequence is unrolled to (each one is a copy of the
#: body in the graph); a loop that would run longer is a named error
MAX_UNROLL = 4096


def _structured(value: Any) -> bool:
    return isinstance(value, (OnnxSequence, OnnxOptional))


def _sequence(node: Any, i: int) -> OnnxSequence:
    """Input ``i``, which must be a sequence."""
    value = node.any_input(i)
    if not isinstance(value, OnnxSequence):
        raise node.fail(f"input {i} must be a sequence, got "
                        f"{'nothing' if value is None else describe_value(value)}")
    return value


def _tensor_dtype(node: Any, seq: OnnxSequence, value: Any) -> None:
    """ONNX sequences are homogeneous: ``value``'s dtype must be the sequence's."""
    if seq.dtype is not None and node.dtype(value) != seq.dtype:
        raise node.fail(f"a {node.dtype(value)} tensor cannot join a sequence of {seq.dtype} "
                        f"(ONNX sequences hold one element type)")


def _position(node: Any, i: int, n: int, default: int, upper: int) -> int:
    """Static position input ``i`` (``default`` when omitted) normalised against length
    ``n``; valid positions are ``-n .. upper``."""
    given = node.static_ints(i, "position")
    if given is None:
        return default
    if len(given) != 1:
        raise node.fail(f"the position must be one integer, got {len(given)} values")
    pos = given[0]
    if not -n <= pos <= upper:
        raise node.fail(f"position {pos} is out of range for a sequence of length {n} "
                        f"(valid: {-n} .. {upper})")
    return pos + n if pos < 0 else pos


@converter("SequenceConstruct", since=11)
def _construct(node):
    items = node.inputs()
    if not items:
        raise node.fail("SequenceConstruct needs at least one input (SequenceEmpty makes an "
                        "empty sequence)")
    seq = OnnxSequence((), node.dtype(items[0]))
    for x in items:
        _tensor_dtype(node, seq, x)
    return OnnxSequence(items, seq.dtype)


@converter("SequenceEmpty", since=11)
def _empty(node):
    from onnx import TensorProto
    return OnnxSequence((), np_dtype(node.attr("dtype", TensorProto.FLOAT)))


@converter("SequenceAt", since=11)
def _at(node):
    seq = _sequence(node, 0)
    n = len(seq)
    return seq[_position(node, 1, n, 0, n - 1)]


@converter("SequenceInsert", since=11)
def _insert(node):
    seq, x = _sequence(node, 0), node.input(1)
    _tensor_dtype(node, seq, x)
    n = len(seq)
    at = _position(node, 2, n, n, n)
    return OnnxSequence((*seq.items[:at], x, *seq.items[at:]), seq.dtype or node.dtype(x))


@converter("SequenceErase", since=11)
def _erase(node):
    seq = _sequence(node, 0)
    n = len(seq)
    if n == 0:
        raise node.fail("cannot erase from an empty sequence")
    at = _position(node, 1, n, n - 1, n - 1)
    return OnnxSequence(seq.items[:at] + seq.items[at + 1:], seq.dtype)


@converter("SequenceLength", since=11)
def _length(node):
    return np.asarray(len(_sequence(node, 0)), np.int64)


@converter("SplitToSequence", since=11)
def _split_to_sequence(node):
    x = node.input(0)
    shape = node.shape(x)
    rank = len(shape)
    axis = int(node.attr("axis", 0))
    if not -rank <= axis < rank:
        raise node.fail(f"axis {axis} is out of range for rank {rank}")
    axis += rank if axis < 0 else 0
    d = shape[axis]
    if d < 0:
        raise node.fail(f"splitting run-time dim {axis} (shape {shape}) into a sequence is not "
                        f"supported: the sequence's length must be known at import")
    split = node.static(1, "split")
    if split is None:
        sizes = [1] * d
    elif split.ndim == 0:  # chunks of that size, the last one smaller
        chunk = int(split)
        if chunk <= 0:
            raise node.fail(f"split size {chunk} must be positive")
        sizes = [min(chunk, d - start) for start in range(0, d, chunk)]
    else:
        sizes = [int(s) for s in split.reshape(-1)]
        if sum(sizes) != d or any(s < 0 for s in sizes):
            raise node.fail(f"split sizes {sizes} must be non-negative and add up to dim "
                            f"{axis}'s size {d}")
    if not sizes:
        return OnnxSequence((), node.dtype(x))
    if len(sizes) == 1:  # (split's one-int form would mean "n parts")
        parts = [node.op("identity", x)]
    else:
        parts = list(node.op("split", x, num_or_sizes=tuple(sizes), axis=axis))
    if split is None and not node.attr("keepdims", 1):  # (size-1 parts: the axis dropped)
        parts = [node.op("squeeze", p, axis=(axis,)) for p in parts]
    return OnnxSequence(parts, node.dtype(x))


@converter("ConcatFromSequence", since=11)
def _concat_from_sequence(node):
    seq = _sequence(node, 0)
    if not len(seq):
        raise node.fail("cannot concatenate an empty sequence (ONNX: an error)")
    if not node.has_attr("axis"):
        raise node.fail("the 'axis' attribute is required")
    axis, new_axis = int(node.attr("axis")), int(node.attr("new_axis", 0))
    rank = node.rank(seq[0]) + (1 if new_axis else 0)
    if not -rank <= axis < rank:
        raise node.fail(f"axis {axis} is out of range for rank {rank}")
    axis += rank if axis < 0 else 0
    return node.op("stack" if new_axis else "concat", *seq, axis=axis)


@converter("SequenceMap", since=17)
def _sequence_map(node):
    """The body imported once per element (the length is known): element i of every sequence
    input, the tensor inputs as they are; output j is the sequence of the bodies' j-th
    outputs."""
    body = node.attr("body")
    first = _sequence(node, 0)
    extra = [node.any_input(i) for i in range(1, node.num_inputs)]
    n = len(first)
    for i, value in enumerate(extra, 1):
        if isinstance(value, OnnxSequence) and len(value) != n:
            raise node.fail(f"input {i} is a sequence of {len(value)}, input 0 of {n}: the "
                            f"sequences of a SequenceMap must have one length")
        if isinstance(value, OnnxOptional):
            raise node.fail(f"input {i} is {describe_value(value)}: SequenceMap takes "
                            f"sequences and tensors")
    outs: list[list[Any]] = [[] for _ in body.output]
    for k in range(n):
        got = node.import_body(body, [first[k], *(v[k] if isinstance(v, OnnxSequence) else v
                                                   for v in extra)])
        for j, value in enumerate(got):
            if _structured(value):
                raise node.fail(f"body output {j} is {describe_value(value)}: SequenceMap's "
                                f"body must give tensors")
            outs[j].append(value)
    types = [vo.type.tensor_type.elem_type for vo in body.output]
    return tuple(OnnxSequence(items, np_dtype(t) if t else None)
                 for items, t in zip(outs, types))


@converter("Optional", since=15)
def _optional(node):
    return OnnxOptional(node.any_input(0))


@converter("OptionalHasElement", since=(15, 18))
def _optional_has_element(node):
    value = node.any_input(0)  # (from opset 18 also a plain tensor or sequence, or nothing)
    if isinstance(value, OnnxOptional):
        value = value.value
    return np.asarray(value is not None)


@converter("OptionalGetElement", since=(15, 18))
def _optional_get_element(node):
    value = node.any_input(0)
    if not isinstance(value, OnnxOptional):
        # a tensor or sequence is its own element (opset 18 says so; before it, a value that
        # reached an optional-typed slot -- a Loop's carried state -- is a present optional)
        return value
    if value.value is None:
        raise node.fail("the optional is empty (ONNX: reading it is an error); test it with "
                        "OptionalHasElement first")
    return value.value


@converter("Identity", since=14)
def _identity(node):
    """Identity from opset 14 (sequences) and 16 (optionals): those are immutable import-time
    values, passed on as they are; a tensor is copied by the ``identity`` op."""
    value = node.any_input(0)
    return value if _structured(value) else node.op("identity", value)


# -- for the control-flow converters ---------------------------------------------------------

def to_tree(value: Any) -> Any:
    """A value as a pytree ``cond`` can carry: a sequence as a list of its elements, an
    optional as ``{}`` (empty) or ``{"value": ...}``; a tensor as it is."""
    if isinstance(value, OnnxSequence):
        return [to_tree(v) for v in value]
    if isinstance(value, OnnxOptional):
        return {} if value.value is None else {"value": to_tree(value.value)}
    return value


def from_tree(template: Any, tree: Any, leaf: Any) -> Any:
    """The inverse of ``to_tree``, shaped like ``template`` (a value of one branch);
    ``leaf(x)`` maps each tensor."""
    if isinstance(template, OnnxSequence):
        return OnnxSequence([from_tree(t, x, leaf) for t, x in zip(template, tree)],
                            template.dtype)
    if isinstance(template, OnnxOptional):
        return OnnxOptional(None if template.value is None
                            else from_tree(template.value, tree["value"], leaf))
    return leaf(tree)


def unrolled_loop(node: Any, body: Any, carried: list[Any]) -> tuple:
    """ONNX ``Loop`` carrying sequences or optionals, unrolled at import: the trip count and
    the initial condition must be known then, and so must the condition the body gives each
    iteration (it decides whether the next copy of the body is imported). Scan outputs are
    stacked from the iterations."""
    trip = node.input(0)
    what = "trip count of a Loop carrying a sequence (it is unrolled at import)"
    count = None if trip is None else int(node.static(0, what).reshape(-1)[0])
    if count is not None and count > MAX_UNROLL:
        raise node.fail(f"a Loop carrying a sequence is unrolled at import; {count} "
                        f"iterations are more than the {MAX_UNROLL} allowed")
    go = (True if node.input(1) is None else
          bool(node.static(1, "condition of a Loop carrying a sequence").reshape(-1)[0]))
    n = len(carried)
    n_scan = len(body.output) - 1 - n
    values, scans, i = list(carried), [], 0
    while go and (count is None or i < count):
        if i == MAX_UNROLL:
            raise node.fail(f"a Loop carrying a sequence is unrolled at import; it did not "
                            f"stop within {MAX_UNROLL} iterations")
        got = node.import_body(body, [np.asarray(i, np.int64), np.asarray(go), *values])
        if not isinstance(got[0], np.ndarray):
            raise node.fail("the body's condition is computed at run time; a Loop carrying a "
                            "sequence is unrolled at import and needs it known then")
        go = bool(got[0].reshape(-1)[0])
        values, i = got[1:1 + n], i + 1
        scans.append(got[1 + n:])
    outs = list(values)
    for j in range(n_scan):
        if not scans:
            raise node.fail("a Loop carrying a sequence that runs no iteration cannot give "
                            "its scan outputs (their shape comes from the body)")
        items = [s[j] for s in scans]
        if any(_structured(v) for v in items):
            raise node.fail(f"scan output {j} must be a tensor")
        outs.append(node.op("stack", *items, axis=0))
    return tuple(outs)
