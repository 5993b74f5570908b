"""Rewrites of an ONNX graph before its nodes are converted, for inference speed.

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

from .table import DEFAULT_DOMAINS, all_nodes

__all__ = ["fold_conv_batch_norm"]


def _readers(nodes: Sequence[Any]) -> dict[str, int]:
    """How many node inputs read each value name (control-flow bodies' reads included)."""
    counts: dict[str, int] = {}
    for node in all_nodes(nodes):
        for name in node.input:
            counts[name] = counts.get(name, 0) + 1
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
