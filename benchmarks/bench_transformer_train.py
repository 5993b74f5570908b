"""W9: a pre-LN transformer block's training step (forward, backward, SGD) against numpy by hand,
PyTorch eager and jax.jit — float32, medians of bursts, each contestant in a process of its
own, in turn (``timing.compare``; ``--in-process``: interleaved in one process), ratios from
the same run.

The block is ``benchmarks/workloads.py``'s W9 (batch 8, seq 128, d 256, 4 heads, a tanh-GELU
MLP of 4 d, mean squared error against a target, SGD at 0.01). One timed call runs ``STEPS``
steps on ``STEPS`` batches: nd4py as one ``fit`` epoch over them (its per-iteration cost, data
slicing included), numpy with the gradient written out here, PyTorch with ``backward()`` and an
in-place update, JAX with one jitted ``value_and_grad`` + update per step.

Rows: **W9 step** is the workload as ``workloads.py`` writes it for nd4py (layer norm by hand,
attention from ``matmul``/``softmax``; not causal); **W9-nn step** is the same block causal
and written with the ops a user would reach for — ``layer_norm``, ``linear`` and
``scaled_dot_product_attention(is_causal=True)`` (whose float32 gradient is the blocked
``scaled_dot_product_attention_grad``) — as W6's forward (``bench_transformer.py``) is; the
other contestants run the same causal block.

Goals (issue 25): <= 0.8x PyTorch eager, <= 1.0x jax.jit. Run
``python benchmarks/bench_transformer_train.py [--json] [--quick] [--busy]``.
"""
from __future__ import annotations

import math

import numpy as np
from timing import compare, comparison_parser  # benchmarks/timing.py (the script's directory)
from workloads import EPS, W9_BATCH, W9_HEADS, W9_LR, W9_SEQ, w9_data, w9_params, w9_samediff

STEPS = 4
BURST = 3
PARAMS = w9_params(np.random.default_rng(0))
XS, YS = w9_data(np.random.default_rng(1), STEPS * W9_BATCH)
F32 = np.float32
GELU_C = F32(math.sqrt(2.0 / math.pi))


def nd_rows() -> dict:
    rows = {}
    for row, sd in (("W9 step", w9_samediff(PARAMS)), ("W9-nn step", _nn_samediff())):
        rows[row] = (lambda sd: lambda: sd.fit((XS, YS), epochs=1, batch_size=W9_BATCH,
                                               verbose=0))(sd)
    return rows


def _nn_samediff():
    """W9's block, causal, with ``layer_norm``, ``linear`` and the attention op."""
    from samediff import SameDiff
    from samediff.training import TrainingConfig
    from samediff.training.updaters import Sgd
    d = XS.shape[-1]
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, W9_SEQ, d)
    y = sd.placeholder("y", "float", -1, W9_SEQ, d)
    v = {name: sd.var(name, value.copy()) for name, value in PARAMS.items()}

    def heads(t):
        return t.reshape(-1, W9_SEQ, W9_HEADS, d // W9_HEADS).permute(0, 2, 1, 3)
    h = sd.nn.layer_norm(x, v["b0_ln1_g"], v["b0_ln1_b"])
    q, k, val = (heads(sd.nn.linear(h, v["b0_" + w])) for w in ("wq", "wk", "wv"))
    att = sd.nn.scaled_dot_product_attention(q, k, val, is_causal=True)
    x1 = x + sd.nn.linear(att.permute(0, 2, 1, 3).reshape(-1, W9_SEQ, d), v["b0_wo"])
    h = sd.nn.gelu(sd.nn.linear(sd.nn.layer_norm(x1, v["b0_ln2_g"], v["b0_ln2_b"]),
                                v["b0_w1"], v["b0_c1"]))
    diff = x1 + sd.nn.linear(h, v["b0_w2"], v["b0_c2"]) - y
    (diff * diff).mean().mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=Sgd(W9_LR), feature_mapping=["x"],
                                          label_mapping=["y"]))
    return sd


# -- numpy, forward and backward written out --------------------------------------------------

def _ln(x, g, b):
    c = x - x.mean(-1, keepdims=True)
    r = 1.0 / np.sqrt((c * c).mean(-1, keepdims=True) + F32(EPS))
    n = c * r
    return n * g + b, (n, r)


def _ln_back(dy, g, saved):
    n, r = saved
    dn = dy * g
    dx = r * (dn - dn.mean(-1, keepdims=True) - n * (dn * n).mean(-1, keepdims=True))
    return dx, (dy * n).sum(0), dy.sum(0)


def _numpy_step(p: dict, x: np.ndarray, y: np.ndarray, causal: bool = False) -> float:
    d = x.shape[-1]
    dh, scale = d // W9_HEADS, F32(1.0 / math.sqrt(d // W9_HEADS))

    def split(t):
        return t.reshape(-1, W9_SEQ, W9_HEADS, dh).transpose(0, 2, 1, 3)

    def merge(t):
        return t.transpose(0, 2, 1, 3).reshape(-1, d)
    x0 = x.reshape(-1, d)
    h, ln1 = _ln(x0, p["b0_ln1_g"], p["b0_ln1_b"])
    q, k, v = (split(h @ p["b0_" + w]) for w in ("wq", "wk", "wv"))
    s = q @ k.swapaxes(-1, -2) * scale
    if causal:
        s = np.where(np.tri(W9_SEQ, dtype=bool), s, -np.inf)
    att = np.exp(s - s.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    ctx = merge(att @ v)
    x1 = x0 + ctx @ p["b0_wo"]
    h2, ln2 = _ln(x1, p["b0_ln2_g"], p["b0_ln2_b"])
    u = h2 @ p["b0_w1"] + p["b0_c1"]
    t = np.tanh(GELU_C * (u + F32(0.044715) * u ** 3))
    a = F32(0.5) * u * (1 + t)
    diff = x1 + a @ p["b0_w2"] + p["b0_c2"] - y.reshape(-1, d)
    loss = float((diff * diff).mean())
    g: dict = {}
    dout = diff * F32(2.0 / diff.size)
    g["b0_w2"], g["b0_c2"] = a.T @ dout, dout.sum(0)
    du = (dout @ p["b0_w2"].T) * (F32(0.5) * (1 + t) + F32(0.5) * u * (1 - t * t) * GELU_C
                                  * (1 + F32(3 * 0.044715) * u * u))
    g["b0_w1"], g["b0_c1"] = h2.T @ du, du.sum(0)
    dx1, g["b0_ln2_g"], g["b0_ln2_b"] = _ln_back(du @ p["b0_w1"].T, p["b0_ln2_g"], ln2)
    dx1 += dout
    g["b0_wo"] = ctx.T @ dx1
    dctx = split(dx1 @ p["b0_wo"].T)
    datt = dctx @ v.swapaxes(-1, -2)
    dv = att.swapaxes(-1, -2) @ dctx
    ds = att * (datt - (datt * att).sum(-1, keepdims=True)) * scale
    dq, dk = ds @ k, ds.swapaxes(-1, -2) @ q
    dh = 0
    for w, dw in (("wq", dq), ("wk", dk), ("wv", dv)):
        dw = merge(dw)
        g["b0_" + w] = h.T @ dw
        dh = dh + dw @ p["b0_" + w].T
    dx0, g["b0_ln1_g"], g["b0_ln1_b"] = _ln_back(dh, p["b0_ln1_g"], ln1)
    for name, grad in g.items():
        p[name] -= F32(W9_LR) * grad
    return loss


def numpy_rows() -> dict:
    def run(causal: bool):
        p = {k: v.copy() for k, v in PARAMS.items()}

        def steps():
            for i in range(STEPS):
                rows = slice(i * W9_BATCH, (i + 1) * W9_BATCH)
                _numpy_step(p, XS[rows], YS[rows], causal)
        return steps
    return {"W9 step": run(False), "W9-nn step": run(True)}


def torch_rows() -> dict | None:
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    xs, ys = torch.from_numpy(XS), torch.from_numpy(YS)
    d = XS.shape[-1]

    def run(causal: bool):
        p = {k: torch.tensor(v, requires_grad=True) for k, v in PARAMS.items()}

        def ln(x, n):
            return F.layer_norm(x, (d,), p[n + "_g"], p[n + "_b"], eps=EPS)

        def loss(x, y):
            x0 = x.reshape(-1, d)
            h = ln(x0, "b0_ln1")
            q, k, v = ((h @ p["b0_" + w]).view(-1, W9_SEQ, W9_HEADS, d // W9_HEADS)
                       .transpose(1, 2) for w in ("wq", "wk", "wv"))
            ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            x1 = x0 + ctx.transpose(1, 2).reshape(-1, d) @ p["b0_wo"]
            a = F.gelu(ln(x1, "b0_ln2") @ p["b0_w1"] + p["b0_c1"], approximate="tanh")
            diff = x1 + a @ p["b0_w2"] + p["b0_c2"] - y.reshape(-1, d)
            return (diff * diff).mean()

        def steps():
            for i in range(STEPS):
                rows = slice(i * W9_BATCH, (i + 1) * W9_BATCH)
                loss(xs[rows], ys[rows]).backward()
                with torch.no_grad():
                    for w in p.values():
                        w -= W9_LR * w.grad
                        w.grad = None
        return steps
    return {"W9 step": run(False), "W9-nn step": run(True)}


def jax_rows() -> dict | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    d = XS.shape[-1]
    dh = d // W9_HEADS

    def ln(x, g, b):
        c = x - x.mean(-1, keepdims=True)
        return c * jax.lax.rsqrt((c * c).mean(-1, keepdims=True) + EPS) * g + b

    def loss(p, x, y, causal=False):
        x0 = x.reshape(-1, d)
        h = ln(x0, p["b0_ln1_g"], p["b0_ln1_b"])

        def split(t):
            return t.reshape(-1, W9_SEQ, W9_HEADS, dh).transpose(0, 2, 1, 3)
        q, k, v = (split(h @ p["b0_" + w]) for w in ("wq", "wk", "wv"))
        s = q @ k.swapaxes(-1, -2) * (1.0 / math.sqrt(dh))
        if causal:
            s = jnp.where(jnp.tri(W9_SEQ, dtype=bool), s, -jnp.inf)
        att = jax.nn.softmax(s, axis=-1)
        x1 = x0 + (att @ v).transpose(0, 2, 1, 3).reshape(-1, d) @ p["b0_wo"]
        h = ln(x1, p["b0_ln2_g"], p["b0_ln2_b"])
        out = x1 + jax.nn.gelu(h @ p["b0_w1"] + p["b0_c1"]) @ p["b0_w2"] + p["b0_c2"]
        diff = out - y.reshape(-1, d)
        return (diff * diff).mean()

    batches = [(jnp.asarray(XS[i * W9_BATCH:(i + 1) * W9_BATCH]),
                jnp.asarray(YS[i * W9_BATCH:(i + 1) * W9_BATCH])) for i in range(STEPS)]

    def run(causal: bool):
        @jax.jit
        def step(p, x, y):
            value, grads = jax.value_and_grad(loss)(p, x, y, causal)
            return jax.tree_util.tree_map(lambda w, g: w - W9_LR * g, p, grads), value
        state = {"p": {k: jnp.asarray(v) for k, v in PARAMS.items()}}

        def steps():
            p = state["p"]
            for x, y in batches:
                p, value = step(p, x, y)
            state["p"] = jax.block_until_ready(p)
        return steps
    return {"W9 step": run(False), "W9-nn step": run(True)}


def main() -> None:
    parser = comparison_parser(__doc__)
    args = parser.parse_args()
    compare({"nd4py": nd_rows, "numpy": numpy_rows, "torch": torch_rows, "jax.jit": jax_rows},
            args, 11, BURST)


if __name__ == "__main__":
    main()
