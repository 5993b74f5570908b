"""The recurrent layers ``lstm_layer``, ``gru_layer`` and ``rnn_layer`` as ONNX ``LSTM``,
``GRU`` and ``RNN`` nodes: the table ops were designed on ONNX's semantics (split biases,
sequence lengths with each example's reverse over its own steps, ``linear_before_reset``, the
activation list with alpha/beta), so each maps onto one ONNX node with its weights
rearranged -- ``W [in, gates * H]`` -> ``[dirs, gates * H, in]`` (a transpose), gate blocks
permuted from the layer's ``gate_order`` to ONNX's (LSTM ``i, o, f, c``, GRU ``z, r, h``),
a single bias padded with a zero recurrent bias, LSTM peepholes to ONNX's ``i, o, f`` -- and
its outputs reshaped from ONNX's ``Y [T, dirs, B, H]`` into the layer's ``data_format`` and
``direction`` (``bidir_sum`` sums the directions, ``bidir_concat`` joins their features).

Refused by name: an LSTM's ``cell_clip`` (ND4J clips the cell state; ONNX's ``clip`` bounds
every activation's input, a different function) and ``keep_workspace`` (a training tape).
This is the inverse of ``converters/recurrent.py``.
"""
from __future__ import annotations

import numpy as np

from ..ops.recurrent import GATE_ORDERS
from .exporting import exports

#: the table's activation names -> ONNX's, and whether each reads alpha / beta
_ONNX_ACTS = {"sigmoid": ("Sigmoid", False, False), "tanh": ("Tanh", False, False),
              "relu": ("Relu", False, False), "identity": ("Affine", True, True),
              "affine": ("Affine", True, True), "leaky_relu": ("LeakyRelu", True, False),
              "thresholded_relu": ("ThresholdedRelu", True, False),
              "scaled_tanh": ("ScaledTanh", True, True),
              "hard_sigmoid": ("HardSigmoid", True, True), "elu": ("Elu", True, False),
              "softsign": ("Softsign", False, False), "softplus": ("Softplus", False, False)}
_ONNX_ORDER = {"lstm": "iofc", "gru": "zrn", "rnn": "h"}
_TO_TIME_MAJOR = {"NTS": [1, 0, 2], "NST": [2, 0, 1]}
_FROM_TIME_MAJOR = {"NTS": [1, 0, 2], "NST": [1, 2, 0]}


def _to_onnx_blocks(kind: str, order: str) -> list[int]:
    """Which gate block of a weight in ``order`` goes to each of ONNX's: both orders are
    permutations of the cell's canonical one (``GATE_ORDERS``)."""
    mine = GATE_ORDERS[kind][order][0]
    onnx_canonical = np.argsort(GATE_ORDERS[kind][_ONNX_ORDER[kind]][0])
    return [int(mine[int(c)]) for c in onnx_canonical]


def _permute_blocks(ctx, w: str, blocks: list[int], width: int) -> str:
    """The gate blocks (each ``width`` wide) of ``w``'s last axis in the order ``blocks``."""
    if blocks == sorted(blocks):
        return w
    parts = ctx.emit("Split", [w, ctx.ints([width] * len(blocks))], len(blocks), axis=-1)
    return ctx.emit("Concat", [parts[b] for b in blocks], axis=-1)[0]


def _per_direction(ctx, v: str, bidir: bool) -> str:
    """ONNX's leading directions axis: a one-direction layer's value gains it."""
    return v if bidir else ctx.emit("Unsqueeze", [v, ctx.ints([0])])[0]


def _activation_attrs(ctx, node, acts, dirs: int) -> dict:
    names, alphas, betas = [], [], []
    for name, alpha, beta in acts:
        if name not in _ONNX_ACTS:
            raise ctx.fail(node, f"activation {name!r} has no ONNX form; ONNX's recurrent "
                                 f"layers take {sorted(_ONNX_ACTS)}")
        onnx_name, takes_alpha, takes_beta = _ONNX_ACTS[name]
        if name == "identity":
            alpha, beta = 1.0, 0.0
        names.append(onnx_name)
        if takes_alpha:
            alphas.append(float(alpha))
        if takes_beta:
            betas.append(float(beta))
    out = {"activations": names * dirs}
    if alphas:
        out["activation_alpha"] = alphas * dirs
    if betas:
        out["activation_beta"] = betas * dirs
    return out


@exports("lstm_layer", "gru_layer", "rnn_layer")
def _recurrent(ctx, node) -> None:
    from onnx import numpy_helper
    kind = node.op.name.split("_")[0]
    a = node.attrs
    if getattr(a, "cell_clip", 0.0):
        raise ctx.fail(node, "cell_clip (ND4J's clip of the cell state) has no ONNX form: "
                             "ONNX LSTM's clip bounds every activation's input; export with "
                             "cell_clip=0")
    if getattr(a, "keep_workspace", False):
        raise ctx.fail(node, "keep_workspace (the training tape) has no ONNX form")
    vals = dict(zip(("x", "W", "R", *a.given), node.inputs))
    bidir = a.direction.startswith("bidir")
    dirs = 2 if bidir else 1
    hidden = ctx.shape(vals["R"])[-2]
    if hidden < 0:
        raise ctx.fail(node, "R's shape must be known when the graph is built")
    blocks = _to_onnx_blocks(kind, a.gate_order)
    x = vals["x"]
    fmt = a.data_format
    if fmt in _TO_TIME_MAJOR:
        (x,) = ctx.emit("Transpose", [x], perm=_TO_TIME_MAJOR[fmt])
    swap = [0, 2, 1] if bidir else [1, 0]
    W, R = (_per_direction(ctx, ctx.emit("Transpose", [
        _permute_blocks(ctx, vals[n], blocks, hidden)], perm=swap)[0], bidir) for n in "WR")
    ins = [x, W, R]
    b = vals.get("b")
    if b is not None:
        gh = len(blocks) * hidden
        if ctx.shape(b)[-1] == 2 * gh:
            halves = ctx.emit("Split", [b, ctx.ints([gh, gh])], 2, axis=-1)
        else:  # one bias: ONNX's input bias, a zero recurrent one
            (shape,) = ctx.emit("Shape", [b])
            zero = ctx.emit("ConstantOfShape", [shape], value=numpy_helper.from_array(
                np.zeros(1, ctx.dtype(b))))[0]
            halves = [b, zero]
        halves = [_permute_blocks(ctx, h, blocks, hidden) for h in halves]
        (b,) = ctx.emit("Concat", halves, axis=-1)
        b = _per_direction(ctx, b, bidir)
    ins.append(b or "")
    seq = vals.get("seq_len")
    ins.append(ctx.as_dtype(seq, np.int32) if seq is not None else "")
    for name in ("h0", "c0"):
        if kind == "lstm" or name == "h0":
            v = vals.get(name)
            ins.append(_per_direction(ctx, v, bidir) if v is not None else "")
    if kind == "lstm":
        p = vals.get("peephole")
        if p is not None:  # the layer's order -> canonical (i, f, o) -> ONNX's (i, o, f)
            peep = GATE_ORDERS["lstm"][a.gate_order][1]
            p = _per_direction(ctx, _permute_blocks(ctx, p, [peep[0], peep[2], peep[1]],
                                                    hidden), bidir)
        ins.append(p or "")
    while ins and ins[-1] == "":
        ins.pop()
    extra = _activation_attrs(ctx, node, a.activations, dirs)
    if kind == "gru":
        extra["linear_before_reset"] = int(bool(a.linear_before_reset))
    n_states = 2 if kind == "lstm" else 1
    y, *states = ctx.emit(kind.upper(), ins, 1 + n_states, hidden_size=hidden,
                          direction={"fwd": "forward", "bwd": "reverse"}.get(
                              a.direction, "bidirectional"), **extra)
    for state, out in zip(states, node.outputs[1:1 + n_states]):
        if bidir:
            ctx.emit("Identity", [state], [out])
        else:
            ctx.emit("Squeeze", [state, ctx.ints([0])], [out])
    if fmt == "T2NS":  # ONNX's Y as it is
        ctx.emit("Identity", [y], [node.outputs[0]])
        return
    if a.direction == "bidir_concat":  # [T, 2, B, H] -> [T, B, 2 H]
        (y,) = ctx.emit("Transpose", [y], perm=[0, 2, 1, 3])
        (y,) = ctx.emit("Reshape", [y, ctx.ints([0, 0, -1])])
    elif a.direction == "bidir_sum":
        (y,) = ctx.emit("ReduceSum", [y, ctx.ints([1])], keepdims=0)
    else:
        (y,) = ctx.emit("Squeeze", [y, ctx.ints([1])])
    if fmt in _FROM_TIME_MAJOR:
        ctx.emit("Transpose", [y], [node.outputs[0]], perm=_FROM_TIME_MAJOR[fmt])
    else:
        ctx.emit("Identity", [y], [node.outputs[0]])
