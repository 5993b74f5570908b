"""ONNX recurrent layers: LSTM, GRU and RNN, onto the table ops ``lstm_layer``, ``gru_layer``
and ``rnn_layer`` (``samediff/ops/recurrent.py``).

ONNX stores the weights per direction and gate-major: ``W [dirs, gates * hidden, input]``,
``R [dirs, gates * hidden, hidden]``, ``B [dirs, 2 * gates * hidden]`` (``Wb`` then ``Rb``),
``P [dirs, 3 * hidden]`` (LSTM peepholes ``i, o, f``). The table ops take ``W [input, gates *
hidden]`` and ``R [hidden, gates * hidden]`` (a transpose), ONNX's split bias and peepholes as
they are, and read ONNX's gate orders (``gate_order="onnx"``: LSTM ``i, o, f, c``, GRU ``z, r,
h``). Their ``T2NS`` format is ONNX's time-major ``Y [seq, dirs, batch, hidden]``; ``layout=1``
(batch-major, opset 14) is a transpose on each side.

Every version of the three ops is one converter: what changed between opsets (GRU's
``linear_before_reset`` at 3, ``output_sequence`` dropped at 7, ``layout`` at 14, bfloat16 at
22) is an attribute whose default keeps the earlier meaning.

Not supported (a named import error): ``clip`` (ONNX clips every activation's input, which
the table ops cannot express: their ``cell_clip`` is ND4J's clip of the cell state) and the
LSTM's ``input_forget`` (coupled input and forget gates).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...ops.recurrent_cells import ACTIVATIONS, activation
from ..table import converter

#: ONNX direction -> the table op's direction for the one-op form
_DIRECTIONS = {"forward": "fwd", "reverse": "bwd", "bidirectional": "bidir_extra_dim"}
#: the default activations of each cell (ONNX's f, g, h)
_DEFAULTS = {"lstm": ("Sigmoid", "Tanh", "Tanh"), "gru": ("Sigmoid", "Tanh"), "rnn": ("Tanh",)}
#: activations that read alpha / beta: ONNX's lists are consumed in order, each value by the
#: next activation that takes one (onnxruntime's reading), defaults filling the rest
_TAKES = {"affine": (True, True), "leaky_relu": (True, False),
          "thresholded_relu": (True, False), "scaled_tanh": (True, True),
          "hard_sigmoid": (True, True), "elu": (True, False)}


def _activations(node: Any, kind: str, dirs: int) -> list[tuple]:
    """The activations of each direction as the table op takes them: ``(name, alpha, beta)``
    per activation, one tuple per direction."""
    count = len(_DEFAULTS[kind])
    names = node.attr("activations", None)
    if not names:
        names = list(_DEFAULTS[kind]) * dirs
    names = list(names)
    if len(names) == count and dirs == 2:
        names = names * 2  # (one list for both directions: lenient, as some exporters write)
    if len(names) != count * dirs:
        raise node.fail(f"activations must list {count * dirs} functions ({count} per "
                        f"direction), got {names}")
    alphas = list(node.attr("activation_alpha", None) or [])
    betas = list(node.attr("activation_beta", None) or [])
    out = []
    for name in names:
        try:
            key, alpha, beta = activation(name)
        except ValueError:
            raise node.fail(f"activation {name!r} is not supported; known: "
                            f"{sorted(ACTIVATIONS)}") from None
        takes_alpha, takes_beta = _TAKES.get(key, (False, False))
        if takes_alpha and alphas:
            alpha = float(alphas.pop(0))
        if takes_beta and betas:
            beta = float(betas.pop(0))
        out.append((key, alpha, beta))
    return [tuple(out[d * count:(d + 1) * count]) for d in range(dirs)]


def _direction(node: Any, v: Any, d: int | None) -> Any:
    """Direction ``d`` of a per-direction ONNX value (None: all of them, as they are)."""
    if v is None or d is None:
        return v
    return node.op("squeeze", node.op("slice", v, begin=(d,) + (0,) * (node.rank(v) - 1),
                                      size=(1,) + (-1,) * (node.rank(v) - 1)), axis=(0,))


def _layer(node: Any, kind: str, x: Any, W: Any, R: Any, optional: dict, d: int | None,
           direction: str, acts: tuple, attrs: dict) -> tuple:
    """One table op over time-major ``x``: direction ``d`` of the ONNX weights (None: both,
    as one bidirectional op). Returns ``(Y [T, dirs, B, H], Y_h [dirs, B, H], ...)``."""
    if d is None and direction != "bidir_extra_dim":
        d = 0  # (a one-direction op takes its weights without ONNX's dirs axis)
    # ONNX W [dirs, gates*H, in] and R [dirs, gates*H, H] -> the table's [(dirs,) in, gates*H]
    W, R = _direction(node, W, d), _direction(node, R, d)
    swap = (lambda v: node.op("permute", v, dims=(0, 2, 1) if node.rank(v) == 3 else (1, 0)))
    given, values = [], []
    for name in ("b", "seq_len", "h0", "c0", "peephole"):
        v = optional.get(name)
        if v is not None:
            given.append(name)
            values.append(v if name == "seq_len" else _direction(node, v, d))
    outs = node.op(f"{kind}_layer", x, swap(W), swap(R), *values, given=tuple(given),
                   data_format="T2NS", direction=direction, gate_order="onnx",
                   activations=acts, **attrs)
    y, *states = outs
    if direction != "bidir_extra_dim":  # a one-direction op: states [B, H] -> [1, B, H]
        states = [node.op("expand_dims", s, axis=0) for s in states]
    return (y, *states)


def _convert(node: Any, kind: str, attrs: dict) -> tuple:
    """Y, Y_h (and Y_c) of an ONNX LSTM/GRU/RNN node."""
    if node.attr("clip", None) is not None:
        raise node.fail("the clip attribute (clipping every activation's input) is not "
                        "supported: nd4py's recurrent layers clip only an LSTM's cell state")
    direction = node.attr("direction", "forward")
    if direction not in _DIRECTIONS:
        raise node.fail(f"direction must be forward, reverse or bidirectional, got "
                        f"{direction!r}")
    dirs = 2 if direction == "bidirectional" else 1
    layout = int(node.attr("layout", 0))
    if layout not in (0, 1):
        raise node.fail(f"layout must be 0 or 1, got {layout}")
    x, W, R = node.input(0), node.input(1), node.input(2)
    hidden = node.shape(R)[-1]
    want = node.attr("hidden_size", None)
    if want is not None and hidden >= 0 and int(want) != hidden:
        raise node.fail(f"hidden_size={want} but R has shape {node.shape(R)} (hidden "
                        f"{hidden})")
    if node.shape(W)[0] not in (-1, dirs):
        raise node.fail(f"W has shape {node.shape(W)}: its first dim must be {dirs} (the "
                        f"number of directions)")
    names = ["b", "seq_len", "h0"] + (["c0", "peephole"] if kind == "lstm" else [])
    optional = {name: node.input(3 + k) for k, name in enumerate(names)}
    if layout == 1:  # batch-major: X [B, T, in], initial states [B, dirs, H]
        x = node.op("permute", x, dims=(1, 0, 2))
        for name in ("h0", "c0"):
            if optional.get(name) is not None:
                optional[name] = node.op("permute", optional[name], dims=(1, 0, 2))
    seq = optional["seq_len"]
    if seq is not None and isinstance(seq, np.ndarray) and node.shape(x)[0] >= 0 \
            and seq.size and np.all(seq == node.shape(x)[0]):
        optional["seq_len"] = None  # (every example runs every step: no masking needed)
    acts = _activations(node, kind, dirs)
    if dirs == 1 or acts[0] == acts[1]:
        outs = _layer(node, kind, x, W, R, optional, None, _DIRECTIONS[direction], acts[0],
                      attrs)
    else:  # the directions' activations differ: one op each, stacked as ONNX's dirs axis
        fwd = _layer(node, kind, x, W, R, optional, 0, "fwd", acts[0], attrs)
        bwd = _layer(node, kind, x, W, R, optional, 1, "bwd", acts[1], attrs)
        outs = tuple(node.op("concat", a, b, axis=1 if k == 0 else 0)
                     for k, (a, b) in enumerate(zip(fwd, bwd)))
    y, *states = outs
    if layout == 1:  # Y [T, dirs, B, H] -> [B, T, dirs, H]; states [dirs, B, H] -> [B, dirs, H]
        y = node.op("permute", y, dims=(2, 0, 1, 3))
        states = [node.op("permute", s, dims=(1, 0, 2)) for s in states]
    return (y, *states)


@converter("LSTM", since=1)
def _lstm(node: Any) -> tuple:
    if int(node.attr("input_forget", 0)):
        raise node.fail("input_forget=1 (coupled input and forget gates) is not supported")
    return _convert(node, "lstm", {})


@converter("GRU", since=1)
def _gru(node: Any) -> tuple:
    # (GRU-1 has no linear_before_reset: its default 0 is that version's meaning)
    return _convert(node, "gru", {"linear_before_reset": bool(node.attr("linear_before_reset",
                                                                         0))})


@converter("RNN", since=1)
def _rnn(node: Any) -> tuple:
    return _convert(node, "rnn", {})
