"""Sequence models: LSTM training step and latency against numpy, PyTorch eager and jax.jit —
float32, medians of bursts, each contestant in a process of its own, in turn
(``timing.compare``; ``--in-process``: interleaved in one process), ratios from the same run.

Rows:

* **lstm-train** (W8): one training step of an LSTM classifier — T 32, batch 32, in 64,
  hidden 128, the last hidden state into a dense layer of 10, softmax cross-entropy, SGD.
  nd4py: the compiled ``TrainStep`` that ``fit`` runs per batch (``sd.rnn.lstm_layer``, its
  gradient back through time); numpy: the same step written by hand (per-step GEMMs and gate
  math); PyTorch: ``nn.LSTM`` + ``nn.Linear`` + ``optim.SGD``; JAX: ``jax.jit`` of the step
  with the LSTM as a ``lax.scan``.
* **lstm-fwd-512**: the latency case — a 1-layer LSTM forward over T = 512 at batch 1 (in 64,
  hidden 128), eager ``nd.rnn.lstm_layer`` against numpy's per-step loop, ``nn.LSTM`` under
  ``no_grad`` and ``jax.jit`` of the scan.

Goals (issue 25): lstm-train <= 0.8x PyTorch eager and <= 1.0x jax.jit; lstm-fwd-512 <= 1.0x
PyTorch. Run ``python benchmarks/bench_sequence.py [--json] [--quick] [--busy]``.
"""
from __future__ import annotations


import numpy as np
from timing import compare, comparison_parser  # benchmarks/timing.py (the script's directory)

import nd4py as nd
from samediff import SameDiff
from samediff.training import TrainingConfig
from samediff.training.trainer import train_step_for
from samediff.training.updaters import Sgd

T, B, I, H, C, LR = 32, 32, 64, 128, 10, 0.05
LONG = 512
BURST = 5
RNG = np.random.default_rng(0)
F32 = np.float32


def params() -> dict:
    s = 1.0 / np.sqrt(H)
    return {"W": RNG.uniform(-s, s, (I, 4 * H)).astype(F32),
            "R": RNG.uniform(-s, s, (H, 4 * H)).astype(F32),
            "b": RNG.uniform(-s, s, 4 * H).astype(F32),
            "Wd": RNG.uniform(-s, s, (H, C)).astype(F32), "bd": np.zeros(C, F32)}


P = params()
X = RNG.normal(size=(T, B, I)).astype(F32)
Y = np.eye(C, dtype=F32)[RNG.integers(0, C, B)]
X_LONG = RNG.normal(size=(LONG, 1, I)).astype(F32)


def nd_rows() -> dict:
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.FLOAT, T, B, I)
    y = sd.placeholder("y", nd.FLOAT, B, C)
    v = {k: sd.var(k, a.copy()) for k, a in P.items()}
    _, h, _ = sd.rnn.lstm_layer(x, v["W"], v["R"], v["b"])
    logits = h.mmul(v["Wd"]) + v["bd"]
    sd.loss.softmax_cross_entropy("loss", y, logits)
    sd.set_training_config(TrainingConfig(updater=Sgd(LR), feature_mapping=["x"],
                                          label_mapping=["y"]))
    step = train_step_for(sd, sd.training_config, ())
    sd.updater_state.ensure({p: sd.read_value(p) for p in step.params}, step.slots,
                            sd.training_config.updater.state_init())
    feeds = {"x": X, "y": Y}
    w, r, b = (nd.create(P[k]) for k in ("W", "R", "b"))
    x_long = nd.create(X_LONG)
    return {"lstm-train": lambda: step.run(feeds, sd.updater_state),
            "lstm-fwd-512": lambda: nd.rnn.lstm_layer(x_long, w, r, b)}


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def numpy_lstm(x, W, R, b, keep=False):
    steps, batch, _ = x.shape
    zx = (x.reshape(steps * batch, -1) @ W).reshape(steps, batch, -1) + b
    h, c = np.zeros((batch, H), F32), np.zeros((batch, H), F32)
    tape = []
    for t in range(steps):
        z = zx[t] + h @ R
        i, f, g, o = _sigmoid(z[:, :H]), _sigmoid(z[:, H:2 * H]), np.tanh(z[:, 2 * H:3 * H]), \
            _sigmoid(z[:, 3 * H:])
        c_new = f * c + i * g
        tc = np.tanh(c_new)
        if keep:
            tape.append((h, c, i, f, g, o, tc))
        h, c = o * tc, c_new
    return h, tape


def numpy_rows() -> dict:
    p = {k: a.copy() for k, a in P.items()}

    def train():
        h, tape = numpy_lstm(X, p["W"], p["R"], p["b"], keep=True)
        logits = h @ p["Wd"] + p["bd"]
        e = np.exp(logits - logits.max(1, keepdims=True))
        dlogits = (e / e.sum(1, keepdims=True) - Y) / B
        dh = dlogits @ p["Wd"].T
        gWd, gbd = h.T @ dlogits, dlogits.sum(0)
        dc = np.zeros_like(dh)
        dz_all = np.empty((T, B, 4 * H), F32)
        hs = np.empty((T, B, H), F32)
        for t in range(T - 1, -1, -1):
            h_prev, c_prev, i, f, g, o, tc = tape[t]
            dc = dc + dh * o * (1 - tc * tc)
            dz = np.concatenate([dc * g * i * (1 - i), dc * c_prev * f * (1 - f),
                                 dc * i * (1 - g * g), dh * tc * o * (1 - o)], axis=1)
            dz_all[t], hs[t] = dz, h_prev
            dh, dc = dz @ p["R"].T, dc * f
        flat = dz_all.reshape(T * B, -1)
        grads = {"W": X.reshape(T * B, -1).T @ flat, "R": hs.reshape(T * B, -1).T @ flat,
                 "b": flat.sum(0), "Wd": gWd, "bd": gbd}
        for k, g in grads.items():
            p[k] -= LR * g
    return {"lstm-train": train,
            "lstm-fwd-512": lambda: numpy_lstm(X_LONG, P["W"], P["R"], P["b"])}


def torch_rows() -> dict | None:
    try:
        import torch
    except ImportError:
        return None
    lstm, dense = torch.nn.LSTM(I, H), torch.nn.Linear(H, C)
    with torch.no_grad():  # the same parameters (PyTorch: [4H, in], two biases)
        lstm.weight_ih_l0.copy_(torch.from_numpy(P["W"].T.copy()))
        lstm.weight_hh_l0.copy_(torch.from_numpy(P["R"].T.copy()))
        lstm.bias_ih_l0.copy_(torch.from_numpy(P["b"]))
        lstm.bias_hh_l0.zero_()
        dense.weight.copy_(torch.from_numpy(P["Wd"].T.copy()))
        dense.bias.zero_()
    opt = torch.optim.SGD([*lstm.parameters(), *dense.parameters()], lr=LR)
    x, y = torch.from_numpy(X), torch.from_numpy(Y.argmax(1))
    loss_fn = torch.nn.CrossEntropyLoss()
    x_long = torch.from_numpy(X_LONG)

    def train():
        opt.zero_grad()
        _, (h, _) = lstm(x)
        loss_fn(dense(h[0]), y).backward()
        opt.step()

    def forward():
        with torch.no_grad():
            return lstm(x_long)
    return {"lstm-train": train, "lstm-fwd-512": forward}


def jax_rows() -> dict | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def run(p, x):
        def cell(carry, xt):
            h, c = carry
            z = xt + h @ p["R"]
            i, f, g, o = jnp.split(z, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), None
        zx = x @ p["W"] + p["b"]
        zero = jnp.zeros((x.shape[1], H), x.dtype)
        (h, _), _ = jax.lax.scan(cell, (zero, zero), zx)
        return h

    def loss(p, x, y):
        logits = run(p, x) @ p["Wd"] + p["bd"]
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits), axis=1))

    @jax.jit
    def step(p, x, y):
        g = jax.grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - LR * b, p, g)
    state = {"p": {k: jnp.asarray(a) for k, a in P.items()}}
    x, y, x_long = jnp.asarray(X), jnp.asarray(Y), jnp.asarray(X_LONG)
    forward = jax.jit(run)

    def train():
        state["p"] = jax.block_until_ready(step(state["p"], x, y))
    return {"lstm-train": train,
            "lstm-fwd-512": lambda: jax.block_until_ready(forward(state["p"], x_long))}


def main() -> None:
    parser = comparison_parser(__doc__)
    args = parser.parse_args()
    compare({"nd4py": nd_rows, "numpy": numpy_rows, "torch": torch_rows, "jax.jit": jax_rows},
            args, 11, BURST)


if __name__ == "__main__":
    main()
