"""A small causal transformer learns the characters of Python's own source code, then writes some.

The text is the source of a few standard-library modules (it ships with Python). The model:
a token embedding (``sd.nn.embedding``) plus a learned position table, ``LAYERS`` pre-norm
blocks — RMSNorm, causal multi-head ``scaled_dot_product_attention``, a GELU MLP, dropout on
both residual branches while training — a final RMSNorm and a linear read-out to the
characters. ``fit`` trains it with Adam on random windows of the text; the held-out loss (nats
per character) is reported next to the unigram baseline (each character's frequency in the
training text, ignoring context). The same model function, written once, also runs eagerly in
``@nd.compile`` with the trained parameters and must give the SameDiff graph's held-out loss.
Then it samples text from a prompt.

    python examples/char_transformer.py [--steps 300] [--seed 0] [--sample 200]
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import math
import sys
import time
from typing import Any, Callable

import numpy as np

import nd4py as nd
from samediff import SameDiff
from samediff.training import Adam, TrainingConfig

CONTEXT, WIDTH, HEADS, LAYERS, BATCH = 64, 64, 4, 2, 32
MODULES = ("textwrap", "string", "shlex", "fnmatch", "glob", "bisect", "heapq", "colorsys")


def load_text() -> str:
    return "\n".join(inspect.getsource(importlib.import_module(m)) for m in MODULES)


def init_params(vocab: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    def normal(*shape: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)
    p = {"tok": normal(vocab, WIDTH), "pos": normal(CONTEXT, WIDTH),
         "norm": np.ones(WIDTH, np.float32), "out": normal(WIDTH, vocab),
         "out_b": np.zeros(vocab, np.float32)}
    for i in range(LAYERS):
        p[f"{i}/norm1"] = np.ones(WIDTH, np.float32)
        p[f"{i}/norm2"] = np.ones(WIDTH, np.float32)
        p[f"{i}/qkv"] = normal(WIDTH, 3 * WIDTH)
        p[f"{i}/proj"] = normal(WIDTH, WIDTH, std=0.02 / math.sqrt(2 * LAYERS))
        p[f"{i}/up"] = normal(WIDTH, 4 * WIDTH)
        p[f"{i}/up_b"] = np.zeros(4 * WIDTH, np.float32)
        p[f"{i}/down"] = normal(4 * WIDTH, WIDTH, std=0.02 / math.sqrt(2 * LAYERS))
    return p


def logits_of(nn: Any, p: dict[str, Any], ids: Any, dropout: Callable[[Any], Any]) -> Any:
    """The model, written once for ``sd.nn`` (SameDiff variables) and ``nd.nn`` (arrays):
    ``ids [batch, CONTEXT]`` -> logits ``[batch, CONTEXT, vocab]``."""
    head = WIDTH // HEADS

    def split_heads(t: Any) -> Any:  # [b, T, WIDTH] -> [b, HEADS, T, head]
        return t.reshape(-1, CONTEXT, HEADS, head).permute(0, 2, 1, 3)
    x = nn.embedding(ids, p["tok"]) + p["pos"]
    for i in range(LAYERS):
        h = nn.rms_norm(x, p[f"{i}/norm1"])
        qkv = nn.linear(h, p[f"{i}/qkv"])
        q, k, v = (split_heads(qkv[:, :, j * WIDTH:(j + 1) * WIDTH]) for j in range(3))
        a = nn.scaled_dot_product_attention(q, k, v, is_causal=True)
        a = a.permute(0, 2, 1, 3).reshape(-1, CONTEXT, WIDTH)
        x = x + dropout(nn.linear(a, p[f"{i}/proj"]))
        h = nn.rms_norm(x, p[f"{i}/norm2"])
        h = nn.gelu(nn.linear(h, p[f"{i}/up"], p[f"{i}/up_b"]))
        x = x + dropout(nn.linear(h, p[f"{i}/down"]))
    return nn.linear(nn.rms_norm(x, p["norm"]), p["out"], p["out_b"])


def build(vocab: int, params: dict[str, np.ndarray]) -> SameDiff:
    sd = SameDiff.create()
    ids = sd.placeholder("ids", nd.LONG, -1, CONTEXT)
    labels = sd.placeholder("labels", nd.FLOAT, -1, CONTEXT, vocab)
    p = {name: sd.var(name, value) for name, value in params.items()}
    logits = logits_of(sd.nn, p, ids, lambda t: sd.nn.dropout(t, 0.9))
    sd.nn.softmax("probabilities", logits)
    sd.loss.softmax_cross_entropy("loss", labels, logits)
    sd.set_training_config(TrainingConfig(updater=Adam(3e-3), feature_mapping=["ids"],
                                          label_mapping=["labels"]))
    return sd


def windows(codes: np.ndarray, count: int, rng: np.random.Generator, vocab: int) -> tuple:
    """``count`` random windows: ids ``[count, CONTEXT]`` and the one-hot next characters."""
    starts = rng.integers(0, len(codes) - CONTEXT - 1, count)
    x = np.stack([codes[s:s + CONTEXT] for s in starts])
    y = np.stack([codes[s + 1:s + CONTEXT + 1] for s in starts])
    return x.astype(np.int64), np.eye(vocab, dtype=np.float32)[y]


def sample(sd: SameDiff, prompt: np.ndarray, count: int, chars: list[str],
           rng: np.random.Generator, temperature: float = 0.8) -> str:
    codes = list(prompt)
    for _ in range(count):
        window = np.array(codes[-CONTEXT:], np.int64)[None]
        probs = sd.output({"ids": window}, "probabilities")["probabilities"].numpy()[0, -1]
        logp = np.log(np.maximum(probs, 1e-12)) / temperature
        p = np.exp(logp - logp.max())
        codes.append(int(rng.choice(len(p), p=p / p.sum())))
    return "".join(chars[c] for c in codes[len(prompt):])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sample", type=int, default=200, help="characters to write")
    args = parser.parse_args(argv)
    nd.random.set_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    text = load_text()
    chars = sorted(set(text))
    vocab = len(chars)
    codes = np.array([chars.index(c) for c in text], np.int64)
    cut = int(len(codes) * 0.9)
    train_codes, held_codes = codes[:cut], codes[cut:]
    counts = np.bincount(train_codes, minlength=vocab) + 1.0  # (add-one: unseen characters)
    unigram = float(-np.mean(np.log(counts / counts.sum())[held_codes]))

    params = init_params(vocab, rng)
    sd = build(vocab, params)
    train = windows(train_codes, args.steps * BATCH, rng, vocab)
    held = windows(held_codes, 256, np.random.default_rng(1), vocab)

    def held_out() -> float:
        return float(sd.output({"ids": held[0], "labels": held[1]}, "loss")["loss"].numpy())
    before = held_out()
    t0 = time.perf_counter()
    sd.fit(train, epochs=1, batch_size=BATCH, verbose=0)
    seconds = time.perf_counter() - t0
    held_loss = held_out()

    trained = {name: nd.create(sd.get_variable(name).get_arr().numpy()) for name in params}

    @nd.compile
    def eager_loss(ids: Any, labels: Any) -> Any:
        return nd.loss.softmax_cross_entropy(labels, logits_of(nd.nn, trained, ids,
                                                               lambda t: t))
    eager = float(eager_loss(nd.create(held[0]), nd.create(held[1])).numpy())
    print(f"text: {len(text)} characters of Python's {', '.join(MODULES)} ({vocab} distinct)")
    print(f"trained {args.steps} steps of {BATCH} windows of {CONTEXT} in {seconds:.1f} s")
    print(f"held-out loss {before:.3f} -> {held_loss:.3f} nats/char (unigram baseline "
          f"{unigram:.3f}); eager @nd.compile form {eager:.3f}")
    if abs(eager - held_loss) > 1e-4:
        sys.exit("the eager form and the SameDiff graph disagree")
    prompt = codes[cut:cut + CONTEXT]
    print("sample after the prompt " + repr("".join(chars[c] for c in prompt[-20:])) + ":")
    print(sample(sd, prompt, args.sample, chars, np.random.default_rng(args.seed)))
    return {"before": before, "held_out": held_loss, "unigram": unigram, "eager": eager}


if __name__ == "__main__":
    main()
