"""Transformers: a pre-LN transformer block forward (W6) and long-sequence attention against
numpy, PyTorch eager and jax.jit — float32, medians of bursts, each contestant in a process of
its own, in turn (``timing.compare``; ``--in-process``: interleaved in one process), ratios
from the same run.

Rows:

* **block-fwd** (W6): ``x + attn(ln1(x))`` then ``+ mlp(ln2(.))`` — batch 8, seq 128, d 256, 4
  heads, a GELU (tanh) MLP of 4 d, causal attention. nd4py: the block inside ``@nd.compile``
  (``layer_norm``, ``linear``, heads by ``reshape``/``permute``,
  ``scaled_dot_product_attention``, ``gelu``); numpy: the same by hand; PyTorch and JAX: the
  same functions in their eager / ``jax.jit`` forms.
* **attn-2048**: ``scaled_dot_product_attention`` at seq 2,048 (batch 1, 8 heads, d 64,
  causal), eager; ``--memory`` also prints nd4py's peak allocation against one head's
  ``T x T`` scores.
* **attn-2048-train**: the same forward and the gradients of q, k, v for a given output
  gradient: nd4py's ``scaled_dot_product_attention_grad`` (the op its autodiff uses for
  float32), ``torch.autograd.grad`` (SDPA's flash backward), ``jax.vjp`` jitted, numpy whole.

Goals (issue 25): block-fwd <= 0.8x jax.jit; attn-2048 <= 1.0x PyTorch's SDPA with memory
O(T d). Run ``python benchmarks/bench_transformer.py [--json] [--quick] [--busy] [--memory]``.
"""
from __future__ import annotations

import json
import math
import tracemalloc

import numpy as np
from timing import compare, comparison_parser  # benchmarks/timing.py (the script's directory)

import nd4py as nd

B, S, D, HEADS = 8, 128, 256, 4
LONG, LONG_HEADS, LONG_DIM = 2048, 8, 64
BURST = 5
F32 = np.float32
RNG = np.random.default_rng(0)


def block_params() -> dict:
    s = 1.0 / math.sqrt(D)
    p = {k: RNG.uniform(-s, s, shape).astype(F32) for k, shape in (
        ("wq", (D, D)), ("wk", (D, D)), ("wv", (D, D)), ("wo", (D, D)),
        ("w1", (D, 4 * D)), ("w2", (4 * D, D)))}
    for k, n in (("bq", D), ("bk", D), ("bv", D), ("bo", D), ("b1", 4 * D), ("b2", D),
                 ("ln1_b", D), ("ln2_b", D)):
        p[k] = np.zeros(n, F32)
    p["ln1_g"], p["ln2_g"] = np.ones(D, F32), np.ones(D, F32)
    return p


P = block_params()
X = RNG.normal(size=(B, S, D)).astype(F32)
Q_LONG = [RNG.normal(size=(1, LONG_HEADS, LONG, LONG_DIM)).astype(F32) for _ in range(3)]
G_LONG = RNG.normal(size=(1, LONG_HEADS, LONG, LONG_DIM)).astype(F32)  # the output's gradient


def nd_rows() -> dict:
    p = {k: nd.create(v) for k, v in P.items()}

    def heads(t):
        return t.reshape(B, S, HEADS, D // HEADS).permute(0, 2, 1, 3)

    @nd.compile
    def block(x):
        h = nd.nn.layer_norm(x, p["ln1_g"], p["ln1_b"])
        q, k, v = (heads(nd.nn.linear(h, p["w" + n], p["b" + n])) for n in "qkv")
        a = nd.nn.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + nd.nn.linear(a.permute(0, 2, 1, 3).reshape(B, S, D), p["wo"], p["bo"])
        h = nd.nn.layer_norm(x, p["ln2_g"], p["ln2_b"])
        return x + nd.nn.linear(nd.nn.gelu(nd.nn.linear(h, p["w1"], p["b1"])), p["w2"], p["b2"])
    x = nd.create(X)
    q, k, v = (nd.create(a) for a in Q_LONG)
    g = nd.create(G_LONG)

    def attention_train():
        out = nd.nn.scaled_dot_product_attention(q, k, v, is_causal=True)
        return nd.nn.scaled_dot_product_attention_grad(q, k, v, out, g, is_causal=True)
    return {"block-fwd": lambda: block(x),
            "attn-2048": lambda: nd.nn.scaled_dot_product_attention(q, k, v, is_causal=True),
            "attn-2048-train": attention_train}


def _np_probabilities(q, k):
    """The causal softmax of ``q k^T / sqrt(E)``, whole."""
    scores = q @ np.swapaxes(k, -1, -2) / F32(math.sqrt(q.shape[-1]))
    scores = np.where(np.tri(q.shape[-2], dtype=bool), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return p


def _np_attention(q, k, v):
    return _np_probabilities(q, k) @ v


def numpy_rows() -> dict:
    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        var = x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + F32(1e-5)) * g + b

    def gelu(x):
        return F32(0.5) * x * (F32(1) + np.tanh(F32(math.sqrt(2 / math.pi))
                                                * (x + F32(0.044715) * x ** 3)))

    def block():
        x = X
        h = ln(x, P["ln1_g"], P["ln1_b"])
        q, k, v = ((h @ P["w" + n] + P["b" + n]).reshape(B, S, HEADS, -1).transpose(0, 2, 1, 3)
                   for n in "qkv")
        a = _np_attention(q, k, v).transpose(0, 2, 1, 3).reshape(B, S, D)
        x = x + a @ P["wo"] + P["bo"]
        h = ln(x, P["ln2_g"], P["ln2_b"])
        return x + gelu(h @ P["w1"] + P["b1"]) @ P["w2"] + P["b2"]
    def attention_train():
        q, k, v = Q_LONG
        p = _np_probabilities(q, k)
        out = p @ v
        dp = G_LONG @ np.swapaxes(v, -1, -2)
        ds = p * (dp - (G_LONG * out).sum(-1, keepdims=True)) / F32(math.sqrt(q.shape[-1]))
        return ds @ k, np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ G_LONG
    return {"block-fwd": block, "attn-2048": lambda: _np_attention(*Q_LONG),
            "attn-2048-train": attention_train}


def torch_rows() -> dict | None:
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    p = {k: torch.from_numpy(v) for k, v in P.items()}
    x = torch.from_numpy(X)
    q, k, v = (torch.from_numpy(a) for a in Q_LONG)

    def block():
        with torch.no_grad():
            h = F.layer_norm(x, (D,), p["ln1_g"], p["ln1_b"])
            qh, kh, vh = ((h @ p["w" + n] + p["b" + n]).view(B, S, HEADS, -1).transpose(1, 2)
                          for n in "qkv")
            a = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)
            y = x + a.transpose(1, 2).reshape(B, S, D) @ p["wo"] + p["bo"]
            h = F.layer_norm(y, (D,), p["ln2_g"], p["ln2_b"])
            return y + F.gelu(h @ p["w1"] + p["b1"], approximate="tanh") @ p["w2"] + p["b2"]

    def attention():
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    g = torch.from_numpy(G_LONG)

    def attention_train():
        out = F.scaled_dot_product_attention(*leaves, is_causal=True)
        return torch.autograd.grad(out, leaves, g)
    return {"block-fwd": block, "attn-2048": attention, "attn-2048-train": attention_train}


def jax_rows() -> dict | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    p = {k: jnp.asarray(v) for k, v in P.items()}

    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5) * g + b

    def attention(q, k, v):
        s = q @ jnp.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
        s = jnp.where(jnp.tri(q.shape[-2], dtype=bool), s, -jnp.inf)
        return jax.nn.softmax(s, axis=-1) @ v

    @jax.jit
    def block(x):
        h = ln(x, p["ln1_g"], p["ln1_b"])
        q, k, v = ((h @ p["w" + n] + p["b" + n]).reshape(B, S, HEADS, -1).transpose(0, 2, 1, 3)
                   for n in "qkv")
        a = attention(q, k, v).transpose(0, 2, 1, 3).reshape(B, S, D)
        x = x + a @ p["wo"] + p["bo"]
        h = ln(x, p["ln2_g"], p["ln2_b"])
        return x + jax.nn.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    x = jnp.asarray(X)
    q, k, v = (jnp.asarray(a) for a in Q_LONG)
    attn = jax.jit(attention)
    g = jnp.asarray(G_LONG)
    train = jax.jit(lambda q, k, v: jax.vjp(attention, q, k, v)[1](g))
    ready = jax.block_until_ready
    return {"block-fwd": lambda: ready(block(x)), "attn-2048": lambda: ready(attn(q, k, v)),
            "attn-2048-train": lambda: ready(train(q, k, v))}


def attention_memory() -> dict:
    """nd4py's peak numpy allocation during one seq-2,048 attention (tracemalloc), against
    the inputs and one head's ``T x T`` float32 scores."""
    q, k, v = (nd.create(a) for a in Q_LONG)
    nd.nn.scaled_dot_product_attention(q, k, v, is_causal=True)
    tracemalloc.start()
    nd.nn.scaled_dot_product_attention(q, k, v, is_causal=True)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    mib = 2.0 ** 20
    from samediff.kernels import attention as kernel  # (its scratch: Numba's allocator)
    threads = len(kernel.workers.halves(LONG_HEADS, 1 << 40, 0))
    scratch = kernel.scratch_bytes(LONG_DIM, LONG, kernel.block_for(LONG))
    return {"peak_mib": peak / mib,
            "kernel_scratch_mib": threads * scratch / mib,
            "one_head_scores_mib": LONG * LONG * 4 / mib,
            "all_heads_scores_mib": LONG_HEADS * LONG * LONG * 4 / mib,
            "output_mib": Q_LONG[0].nbytes / mib}


def main() -> None:
    parser = comparison_parser(__doc__)
    parser.add_argument("--memory", action="store_true", help="only the attention's memory")
    args = parser.parse_args()
    if args.memory:
        m = attention_memory()
        if args.json:
            print(json.dumps(m, indent=1))
            return
        print(f"attention, seq {LONG}, {LONG_HEADS} heads, d {LONG_DIM}, float32: peak "
              f"{m['peak_mib']:.1f} MiB allocated by numpy + {m['kernel_scratch_mib']:.1f} MiB "
              f"compiled kernel scratch (output {m['output_mib']:.1f} MiB; one head's "
              f"T x T scores {m['one_head_scores_mib']:.1f} MiB, all heads' "
              f"{m['all_heads_scores_mib']:.1f} MiB)")
        return
    compare({"nd4py": nd_rows, "numpy": numpy_rows, "torch": torch_rows, "jax.jit": jax_rows},
            args, 11, BURST)


if __name__ == "__main__":
    main()
