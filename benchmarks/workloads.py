"""Workload builders shared by the benchmark scripts (W9; W3 and W7 live in
``bench_training.py`` and ``bench_cnn.py``, W1 is three lines written where it is timed).

**W9**: the training step of a pre-LN transformer block through ``fit``: batch 8, sequence
128, width 256, 4 heads, a GELU MLP of 4x the width, mean squared error against a target,
SGD. Written with today's primitive ops: layer norm by hand from ``mean`` (no fused
``layer_norm`` op), attention from ``matmul``, ``reshape``, ``permute`` and ``softmax``.
``blocks=2`` stacks two identical blocks (same shapes, own parameters): the compiler's kernels
for the second block are those of the first (``samediff/compiler/codegen.py`` keys a kernel by
its expression, not its place in the graph).

>>> import numpy as np
>>> sd = w9_samediff(w9_params(np.random.default_rng(0), d=16), seq=4, heads=2)
>>> x, y = w9_data(np.random.default_rng(1), 2, seq=4, d=16)
>>> h = sd.fit((x, y), epochs=1, batch_size=2, verbose=0)
>>> bool(np.isfinite(h.loss_curve()[-1]))
True
"""
from __future__ import annotations

import numpy as np

W9_BATCH, W9_SEQ, W9_D, W9_HEADS, W9_LR = 8, 128, 256, 4, 0.01
EPS = 1e-5


def w9_params(rng: np.random.Generator, blocks: int = 1, d: int = W9_D) -> dict[str, np.ndarray]:
    """Initial parameters of ``blocks`` pre-LN blocks of width ``d`` (names ``b<k>_...``; the
    projections are ``d x d`` whatever the head count)."""

    def dense(i: int, o: int) -> np.ndarray:
        return (rng.standard_normal((i, o)) * np.sqrt(1.0 / i)).astype(np.float32)

    p: dict[str, np.ndarray] = {}
    for k in range(blocks):
        pre = f"b{k}_"
        for ln in ("ln1", "ln2"):
            p[pre + ln + "_g"] = np.ones(d, np.float32)
            p[pre + ln + "_b"] = np.zeros(d, np.float32)
        for name in ("wq", "wk", "wv", "wo"):
            p[pre + name] = dense(d, d)
        p[pre + "w1"], p[pre + "c1"] = dense(d, 4 * d), np.zeros(4 * d, np.float32)
        p[pre + "w2"], p[pre + "c2"] = dense(4 * d, d), np.zeros(d, np.float32)
    return p


def w9_data(rng: np.random.Generator, n: int, seq: int = W9_SEQ,
            d: int = W9_D) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random (input, target) sequences of shape ``(seq, d)``."""
    return (rng.standard_normal((n, seq, d), dtype=np.float32),
            rng.standard_normal((n, seq, d), dtype=np.float32))


def _layer_norm(x, g, b):
    mu = x.mean(-1, keep_dims=True)
    c = x - mu
    var = (c * c).mean(-1, keep_dims=True)
    return c * (var + EPS).rsqrt() * g + b


def _block(sd, x, pre: str, seq: int, d: int, heads: int):
    """One pre-LN block on ``x`` of shape ``(batch * seq, d)``: the projections and the MLP
    are 2-D products over every token at once, attention is batched over (batch, head)."""
    v = sd.get_variable
    dh = d // heads

    def split(t):  # (B * S, D) -> (B, H, S, dh)
        return t.reshape(-1, seq, heads, dh).permute(0, 2, 1, 3)

    h = _layer_norm(x, v(pre + "ln1_g"), v(pre + "ln1_b"))
    q, k, val = (split(h.mmul(v(pre + w))) for w in ("wq", "wk", "wv"))
    scale = float(1.0 / np.sqrt(dh))  # a Python float: weak, the scores stay float32
    att = (q.matmul(k, transpose_y=True) * scale).softmax(-1)
    ctx = att.matmul(val).permute(0, 2, 1, 3).reshape(-1, d)
    x = x + ctx.mmul(v(pre + "wo"))
    h = _layer_norm(x, v(pre + "ln2_g"), v(pre + "ln2_b"))
    h = (h.mmul(v(pre + "w1")) + v(pre + "c1")).gelu()
    return x + h.mmul(v(pre + "w2")) + v(pre + "c2")


def w9_samediff(params: dict[str, np.ndarray], seq: int = W9_SEQ, heads: int = W9_HEADS,
                lr: float = W9_LR):
    """A ``SameDiff`` of the blocks in ``params`` with a mean-squared-error loss and SGD,
    ready for ``fit((inputs, targets), ...)``."""
    from samediff import SameDiff
    from samediff.training import TrainingConfig
    from samediff.training.updaters import Sgd
    blocks = len({k.split("_")[0] for k in params})
    d = params["b0_wq"].shape[0]
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, seq, d)
    y = sd.placeholder("y", "float", -1, seq, d)
    for name, value in params.items():
        sd.var(name, value.copy())
    h = x.reshape(-1, d)
    for k in range(blocks):
        h = _block(sd, h, f"b{k}_", seq, d, heads)
    diff = h - y.reshape(-1, d)
    (diff * diff).mean().mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=Sgd(lr), feature_mapping=["x"],
                                          label_mapping=["y"]))
    return sd
