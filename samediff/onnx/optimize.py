"""Rewrites of an ONNX graph before its nodes are converted, for inference speed.

``fuse_matmul_add``: ``Add(MatMul(X, W), B)`` (either operand order), the product read by the
Add only, becomes one ``MatMulAdd(X, W, B)`` node of ``FUSED_DOMAIN``: with ``W`` 2-D and ``B``
a row of its width, the table's ``linear`` -- the private route adds the bias to each half of
the product on that half's thread, not in a pass of its own over the whole (the same bits).

``fuse_attention``: attention written out, as exporters write a transformer's --
``MatMul(Q, K^T) -> Div|Mul(., c) -> Softmax(last axis) -> MatMul(., V)``, each value read
only by the next node -- becomes one ``ScaledDotProductAttention`` node of this package's
own domain (``FUSED_DOMAIN``, as onnxruntime's fusions make ``com.microsoft`` nodes), at the
last MatMul's place. Its converter (``converters/fused.py``) runs the table's
``scaled_dot_product_attention`` (blocked, fused softmax: never a head's ``L x S`` scores)
when ``c`` is a constant float scalar; else it writes the four ops back as they were.

``fold_conv_batch_norm``: an inference-mode ``BatchNormalization`` whose input is a ``Conv``
with constant weights (initializers), read by nothing else, folds into that convolution:
``bn(conv(x, W) + B) = conv(x, W * s) + (B * s + t)`` per output channel, with
``s = scale / sqrt(var + eps)`` and ``t = bias - mean * s`` computed in float64 once. The
model then runs one convolution (whose epilogue can take a following Relu) instead of a
convolution and a normalization pass over its output. Trainable imports keep both (the
weights are variables then, so the rule's "constant" test fails by itself).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .table import DEFAULT_DOMAINS, all_nodes, bodies

__all__ = ["FUSED_DOMAIN", "fold_conv_batch_norm", "fuse_attention", "fuse_matmul_add"]

#: the domain of the nodes these rewrites make (converted by ``converters/fused.py``)
FUSED_DOMAIN = "ai.nd4py"


def _readers(nodes: Sequence[Any]) -> dict[str, int]:
    """How many node inputs read each value name, control-flow bodies' reads included (a
    body's output may name an outer value: that counts as a read too)."""
    counts: dict[str, int] = {}
    for node in all_nodes(nodes):
        for name in node.input:
            counts[name] = counts.get(name, 0) + 1
        for g in bodies(node):
            for vo in g.output:
                counts[vo.name] = counts.get(vo.name, 0) + 1
    return counts


def _attr(node: Any, name: str, default: Any) -> Any:
    from onnx import helper
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _foldable(bn: Any, conv: Any, values: Mapping[str, Any], readers: Mapping[str, int],
              outputs: set, opset: int) -> bool:
    if conv is None or conv.op_type != "Conv" or conv.domain not in DEFAULT_DOMAINS:
        return False
    if readers.get(conv.output[0], 0) != 1 or conv.output[0] in outputs:
        return False
    if any(bn.output[1:]) or _attr(bn, "training_mode", 0) or not _attr(bn, "spatial", 1):
        return False
    if opset < 6 or len(bn.input) < 5:  # (before opset 6 BatchNormalization had other inputs)
        return False
    consts = list(conv.input[1:]) + list(bn.input[1:5])
    if not all(n and isinstance(values.get(n), np.ndarray) for n in consts):
        return False
    w = values[conv.input[1]]
    return (w.dtype in (np.float32, np.float64) and w.ndim >= 3
            and all(values[n].shape == (w.shape[0],) for n in bn.input[1:5]))


def fold_conv_batch_norm(nodes: Sequence[Any], values: dict[str, Any], outputs: set,
                         opset: int) -> list:
    """``nodes`` with every foldable Conv -> BatchNormalization pair replaced by one Conv whose
    new weights and bias are added to ``values`` (named after the normalization's output)."""
    readers = _readers(nodes)
    producer = {node.output[0]: i for i, node in enumerate(nodes) if node.output}
    out = list(nodes)
    dropped: set[int] = set()
    for i, bn in enumerate(nodes):
        if bn.op_type != "BatchNormalization" or bn.domain not in DEFAULT_DOMAINS:
            continue
        j = producer.get(bn.input[0])
        conv = nodes[j] if j is not None else None
        if not _foldable(bn, conv, values, readers, outputs, opset):
            continue
        w = values[conv.input[1]]
        scale, bias, mean, var = (values[n].astype(np.float64) for n in bn.input[1:5])
        s = scale / np.sqrt(var + float(_attr(bn, "epsilon", 1e-5)))
        b0 = (values[conv.input[2]].astype(np.float64) if len(conv.input) > 2 and conv.input[2]
              else np.zeros(w.shape[0]))
        name = bn.output[0]
        values[f"{name}::folded_weight"] = (w * s.reshape((-1,) + (1,) * (w.ndim - 1))
                                            ).astype(w.dtype)
        values[f"{name}::folded_bias"] = (b0 * s + (bias - mean * s)).astype(w.dtype)
        fused = type(conv)()
        fused.CopyFrom(conv)
        del fused.input[:]
        fused.input.extend([conv.input[0], f"{name}::folded_weight", f"{name}::folded_bias"])
        fused.output[0] = name
        out[j] = fused
        dropped.add(i)
    return [node for i, node in enumerate(out) if i not in dropped]


def _producer_index(nodes: Sequence[Any]) -> dict[str, int]:
    return {out: i for i, node in enumerate(nodes) for out in node.output if out}


def _is(node: Any, op_type: str) -> bool:
    return node.op_type == op_type and node.domain in DEFAULT_DOMAINS


def _made_by(nodes: Sequence[Any], producer: dict[str, int], name: str,
             op_type: str) -> int | None:
    """The index of the ``op_type`` node producing ``name``, or None."""
    i = producer.get(name)
    return i if i is not None and _is(nodes[i], op_type) else None


def fuse_attention(nodes: Sequence[Any], outputs: set, opset: int) -> list:
    """``nodes`` with each written-out attention (module docstring) replaced by one
    ``FUSED_DOMAIN`` ``ScaledDotProductAttention(Q, K^T, V, c)`` node (attribute
    ``scale_op``: ``"Div"`` or ``"Mul"``)."""
    from onnx import helper
    readers, producer = _readers(nodes), _producer_index(nodes)
    out, dropped = list(nodes), set()

    def single(name: str) -> bool:  # read by one node input, and no graph output
        return readers.get(name, 0) == 1 and name not in outputs

    reader_of = {name: i for i, node in enumerate(nodes) for name in node.input if name}
    replaced: set[int] = set()  # (a fused node's inputs are not there to fuse again)
    for i, soft in enumerate(nodes):
        axis = _attr(soft, "axis", None)
        if not _is(soft, "Softmax") or not (axis == -1 or (axis is None and opset >= 13)):
            continue
        d = producer.get(soft.input[0])
        scale = nodes[d] if d is not None else None
        if scale is None or not (_is(scale, "Div") or _is(scale, "Mul")):
            continue
        # the scores: Div's dividend, or whichever of Mul's operands a MatMul made
        first = next((k for k in ((0,) if _is(scale, "Div") else (0, 1))
                      if _made_by(nodes, producer, scale.input[k], "MatMul") is not None), None)
        j = reader_of.get(soft.output[0])
        if first is None or j is None:
            continue
        m = producer[scale.input[first]]
        scores, mm2 = nodes[m], nodes[j]
        if not (_is(mm2, "MatMul") and mm2.input[0] == soft.output[0]
                and all(single(v) for v in (scores.output[0], scale.output[0], soft.output[0]))
                and {m, d, i, j}.isdisjoint(dropped | replaced)):
            continue
        out[j] = helper.make_node(
            "ScaledDotProductAttention",
            [scores.input[0], scores.input[1], mm2.input[1], scale.input[1 - first]],
            [mm2.output[0]], name=mm2.name or mm2.output[0], domain=FUSED_DOMAIN,
            scale_op=scale.op_type)
        dropped.update((m, d, i))
        replaced.add(j)
    return [node for k, node in enumerate(out) if k not in dropped]


def fuse_matmul_add(nodes: Sequence[Any], outputs: set) -> list:
    """``nodes`` with each ``Add`` of a ``MatMul`` read by it alone replaced by one
    ``FUSED_DOMAIN`` ``MatMulAdd(X, W, B)`` node at the Add's place (module docstring)."""
    from onnx import helper
    readers, producer = _readers(nodes), _producer_index(nodes)
    out, dropped = list(nodes), set()
    for i, add in enumerate(nodes):
        if not _is(add, "Add") or len(add.input) != 2:
            continue
        for k in (0, 1):
            m = _made_by(nodes, producer, add.input[k], "MatMul")
            if m is None or m in dropped:
                continue
            if readers.get(add.input[k], 0) != 1 or add.input[k] in outputs:
                continue
            mm = nodes[m]
            out[i] = helper.make_node("MatMulAdd", [mm.input[0], mm.input[1], add.input[1 - k]],
                                      [add.output[0]], name=add.name or add.output[0],
                                      domain=FUSED_DOMAIN)
            dropped.add(m)
            break
    return [node for k, node in enumerate(out) if k not in dropped]
