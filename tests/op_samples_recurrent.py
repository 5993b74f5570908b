"""Sample rows for the recurrent layers (``samediff/ops/recurrent.py``), with references
written from the cells' definitions: example by example, step by step, gate by gate.

The gradient ops' references differentiate those forward references by the complex step
(``Im f(x + i h) / h`` with ``h = 1e-30``: exact to rounding, no cancellation), one input
element at a time — independent of the op's back-propagation through time.
"""
from __future__ import annotations

import numpy as np

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import u
except ImportError:  # ... or tests/ became one
    from .op_references import u

_ACTS = {
    "sigmoid": lambda x, a, b: 1.0 / (1.0 + np.exp(-x)),
    "tanh": lambda x, a, b: np.tanh(x),
    "relu": lambda x, a, b: x if x.real > 0 else 0.0 * x,
    "softsign": lambda x, a, b: x / (1.0 + (x if x.real >= 0 else -x)),
    "hard_sigmoid": lambda x, a, b: (0.0 * x if (a * x + b).real <= 0 else
                                     0.0 * x + 1.0 if (a * x + b).real >= 1 else a * x + b),
    "leaky_relu": lambda x, a, b: x if x.real >= 0 else a * x,
    "scaled_tanh": lambda x, a, b: a * np.tanh(b * x),
}


def _act(spec, x):
    name, a, b = spec
    return np.array([_ACTS[name](v, a, b) for v in np.ravel(x)]).reshape(np.shape(x))


def _named(inputs, given):
    return dict(zip(("x", "W", "R", *given), inputs))


_FORMAT_AXES = {"TNS": (0, 1, 2), "T2NS": (0, 1, 2), "NTS": (1, 0, 2), "NST": (2, 0, 1)}


def _layer_ref(cell_step, gates, orders, *inputs, given, data_format, direction, gate_order,
               activations, **extra):
    """Any layer: the cell run example by example over each direction's steps."""
    n = _named(inputs, given)
    x = np.transpose(n["x"], _FORMAT_AXES[data_format])  # [T, B, nIn]
    steps, batch, _ = x.shape
    bidir = direction.startswith("bidir")
    order = orders[gate_order]
    ys, lasts = [], []
    for d in range(2 if bidir else 1):
        pick = (lambda v: None if v is None else (v[d] if bidir else v))
        W, R = pick(n["W"]), pick(n["R"])
        hidden = R.shape[0]
        b = pick(n.get("b"))
        if b is None:
            b = np.zeros(gates * hidden)
        # gate k of the cell's canonical order is block order[k] of the given weights
        blk = (lambda m, k: m[..., order[k] * hidden:(order[k] + 1) * hidden])
        backward = direction == "bwd" or d == 1
        y = np.zeros((steps, batch, hidden), dtype=np.result_type(x, W))
        last = []
        for e in range(batch):
            length = steps if "seq_len" not in n else int(n["seq_len"][e])
            state = [np.zeros(hidden) if pick(n.get(s)) is None else pick(n[s])[e]
                     for s in (("h0", "c0") if gates == 4 else ("h0",))]
            times = range(length - 1, -1, -1) if backward else range(length)
            for t in times:
                state = cell_step(x[t, e], state, W, R, b, blk, hidden, n, pick, activations,
                                  gate_order, **extra)
                y[t, e] = state[0]
            last.append(state)
        ys.append(y)
        lasts.append([np.array([s[k] for s in last]) for k in range(len(last[0]))])
    if not bidir:
        y = ys[0][:, None] if data_format == "T2NS" else ys[0]
        states = lasts[0]
    else:
        y = {"bidir_sum": lambda: ys[0] + ys[1],
             "bidir_concat": lambda: np.concatenate(ys, axis=-1),
             "bidir_extra_dim": lambda: np.stack(ys, axis=1)}[direction]()
        states = [np.stack(pair) for pair in zip(*lasts)]
    if data_format != "T2NS":
        y = np.transpose(y, np.argsort(_FORMAT_AXES[data_format]))
    return (y, *states)


def _lstm_step(xt, state, W, R, b, blk, hidden, n, pick, acts, gate_order, *, cell_clip,
               keep_workspace=False):
    h, c = state
    ga, ca, oa = acts
    pre = xt @ W + h @ R + b[:4 * hidden] + (b[4 * hidden:] if len(b) > 4 * hidden else 0.0)
    zi, zf, zg, zo = (blk(pre, k) for k in range(4))
    p = pick(n.get("peephole"))
    if p is not None:  # ND4J's peepholes: i, f, o; ONNX's: i, o, f
        pi, pf, po = (p[k * hidden:(k + 1) * hidden] for k in
                      ((0, 1, 2) if gate_order == "ifco" else (0, 2, 1)))
        zi, zf = zi + pi * c, zf + pf * c
    i, f, g = _act(ga, zi), _act(ga, zf), _act(ca, zg)
    c_new = f * c + i * g
    if cell_clip > 0:
        c_new = np.array([min(max(v.real, -cell_clip), cell_clip) + 0j * v
                          if abs(v.real) > cell_clip else v for v in c_new])
    if p is not None:
        zo = zo + po * c_new
    return [_act(ga, zo) * _act(oa, c_new), c_new]


def _gru_step(xt, state, W, R, b, blk, hidden, n, pick, acts, gate_order, *,
              linear_before_reset):
    (h,) = state
    ga, ca = acts
    bx = b[:3 * hidden]
    br = b[3 * hidden:] if len(b) > 3 * hidden else np.zeros(3 * hidden)
    r = _act(ga, blk(xt @ W + bx, 0) + blk(h @ R + br, 0))
    z = _act(ga, blk(xt @ W + bx, 1) + blk(h @ R + br, 1))
    if linear_before_reset:  # r * (h Rn + bRn)
        cand = _act(ca, blk(xt @ W + bx, 2) + r * blk(h @ R + br, 2))
    else:  # (r * h) Rn + bRn
        cand = _act(ca, blk(xt @ W + bx, 2) + blk((r * h) @ R + br, 2))
    return [z * h + (1.0 - z) * cand]


def _rnn_step(xt, state, W, R, b, blk, hidden, n, pick, acts, gate_order):
    (h,) = state
    pre = xt @ W + h @ R + b[:hidden] + (b[hidden:] if len(b) > hidden else 0.0)
    return [_act(acts[0], pre)]


_LSTM_ORDERS = {"ifco": (0, 1, 2, 3), "iofc": (0, 2, 3, 1)}
_GRU_ORDERS = {"rzn": (0, 1, 2), "zrn": (1, 0, 2)}


def lstm_ref(*inputs, **attrs):
    return _layer_ref(_lstm_step, 4, _LSTM_ORDERS, *inputs, **attrs)


def gru_ref(*inputs, **attrs):
    return _layer_ref(_gru_step, 3, _GRU_ORDERS, *inputs, **attrs)


def rnn_ref(*inputs, **attrs):
    return _layer_ref(_rnn_step, 1, {"h": (0,)}, *inputs, **attrs)


def _grad_ref(forward):
    """The gradient op's reference: ``d sum(out_k * g_k) / d input`` by the complex step
    (zeros for x with ``input_grad=False``: nothing needs that gradient)."""
    def ref(*inputs, input_grad=True, **attrs):
        count = 3 + len(attrs["given"])
        ins, cts = [np.asarray(v) for v in inputs[:count]], inputs[count:]
        names = ("x", "W", "R", *attrs["given"])
        out = []
        for k, name in enumerate(names):
            if name == "seq_len":
                continue
            grad = np.zeros(ins[k].shape)
            for j in range(ins[k].size if name != "x" or input_grad else 0):
                probe = [v.astype(complex) if m != "seq_len" else v for m, v in zip(names, ins)]
                probe[k].flat[j] += 1e-30j
                outs = forward(*probe, **attrs)
                grad.flat[j] = sum(np.sum(o.imag * g) for o, g in zip(outs, cts)) / 1e-30
            out.append(grad)
        return tuple(out)
    return ref


def recurrent_samples(S):
    T, B, I, H = 3, 2, 2, 2
    lens = np.array([3, 1], np.int64)
    all_lstm = ("b", "seq_len", "h0", "c0", "peephole")
    return {
        "lstm_layer": [
            S([u(T, B, I), u(I, 4 * H), u(H, 4 * H), u(4 * H), lens, u(B, H), u(B, H),
               u(3 * H)], {"given": all_lstm}, lstm_ref),
            S([u(B, T, I), u(2, I, 4 * H), u(2, H, 4 * H), u(2, 8 * H), u(2, 3 * H)],
              {"given": ("b", "peephole"), "data_format": "NTS", "direction": "bidir_concat",
               "gate_order": "onnx"}, lstm_ref),
            S([u(B, I, T), u(I, 4 * H), u(H, 4 * H), np.array([2, 0], np.int64)],
              {"given": ("seq_len",), "data_format": "NST", "direction": "bwd",
               "cell_clip": 0.4, "activations": ("hard_sigmoid", "softsign", "tanh")},
              lstm_ref, smooth=False),
            S([u(T, B, I), u(2, I, 4 * H), u(2, H, 4 * H), lens, u(2, B, H), u(2, B, H)],
              {"given": ("seq_len", "h0", "c0"), "data_format": "T2NS",
               "direction": "bidir_extra_dim"}, lstm_ref),
        ],
        "gru_layer": [
            S([u(T, B, I), u(I, 3 * H), u(H, 3 * H), u(3 * H), u(B, H)],
              {"given": ("b", "h0")}, gru_ref),
            S([u(B, T, I), u(2, I, 3 * H), u(2, H, 3 * H), u(2, 6 * H), lens],
              {"given": ("b", "seq_len"), "data_format": "NTS", "direction": "bidir_sum",
               "linear_before_reset": True}, gru_ref),
            S([u(T, B, I), u(I, 3 * H), u(H, 3 * H), u(6 * H), lens, u(B, H)],
              {"given": ("b", "seq_len", "h0"), "direction": "bwd", "gate_order": "onnx"},
              gru_ref),
        ],
        "rnn_layer": [
            S([u(T, B, I), u(I, H), u(H, H), u(H)], {"given": ("b",)}, rnn_ref),
            S([u(B, I, T), u(2, I, H), u(2, H, H), lens, u(2, B, H)],
              {"given": ("seq_len", "h0"), "data_format": "NST", "direction": "bidir_concat",
               "activations": (("scaled_tanh", 1.5, 0.7),)}, rnn_ref),
        ],
        "lstm_layer_grad": [
            S([u(T, B, I), u(I, 4 * H), u(H, 4 * H), u(4 * H), lens, u(B, H), u(B, H),
               u(3 * H), u(T, B, H), u(B, H), u(B, H)], {"given": all_lstm},
              _grad_ref(lstm_ref)),
            S([u(B, T, I), u(2, I, 4 * H), u(2, H, 4 * H), u(2, 8 * H), u(B, T, 2 * H),
               u(2, B, H), u(2, B, H)],
              {"given": ("b",), "data_format": "NTS", "direction": "bidir_concat",
               "gate_order": "onnx"}, _grad_ref(lstm_ref)),
            S([u(T, B, I), u(I, 4 * H), u(H, 4 * H), u(T, B, H), u(B, H), u(B, H)],
              {"input_grad": False}, _grad_ref(lstm_ref)),
        ],
        "gru_layer_grad": [
            S([u(T, B, I), u(I, 3 * H), u(H, 3 * H), u(3 * H), u(B, H), u(T, B, H), u(B, H)],
              {"given": ("b", "h0")}, _grad_ref(gru_ref)),
            S([u(B, T, I), u(2, I, 3 * H), u(2, H, 3 * H), u(2, 6 * H), lens, u(B, T, H),
               u(2, B, H)], {"given": ("b", "seq_len"), "data_format": "NTS",
                             "direction": "bidir_sum", "linear_before_reset": True},
              _grad_ref(gru_ref)),
        ],
        "rnn_layer_grad": [
            S([u(T, B, I), u(I, H), u(H, H), u(2 * H), lens, u(B, H), u(T, B, H), u(B, H)],
              {"given": ("b", "seq_len", "h0"), "direction": "bwd"}, _grad_ref(rnn_ref)),
        ],
    }
