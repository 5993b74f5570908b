"""W3: one training step of a 784-256-10 MLP (batch 128, softmax cross-entropy, SGD).

Compared in the same run:

* **numpy**: a hand-written forward / backward / in-place SGD update step (the floor a careful
  numpy user reaches);
* **nd4py step**: the compiled ``TrainStep`` that ``SameDiff.fit`` runs per batch (forward,
  backward and updater in one plan, parameters updated in place);
* **nd4py fit**: ``sd.fit`` per iteration, including batching/shuffling and bookkeeping, next
  to a numpy epoch that shuffles and gathers its batches too, and (when installed) PyTorch
  eager (``nn.Linear``, ``optim.SGD``) and ``jax.jit`` of the whole step, fed the same batches;
* **BLAS floor**: only the three matrix products the step needs (x@w1, a@w2, dz@w2.T,
  a.T@dz, x.T@dh), i.e. what no implementation can avoid.

Goal (issue 23): ``fit`` per iteration <= 1.0x the numpy epoch's, jax.jit's and torch's. Run: ``python benchmarks/bench_training.py
[--json] [--quick]``. Medians of repeated samples.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np


from samediff import SameDiff
from samediff.training import TrainingConfig
from samediff.training.trainer import train_step_for
from samediff.training.updaters import Sgd

B, D, H, C, LR = 128, 784, 256, 10, 0.01
#: batches per timed epoch
N_BATCHES = 40


def median_us(fn, repeats: int, inner: int = 20) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner * 1e6)
    return statistics.median(samples)


def init(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"w1": (rng.standard_normal((D, H)) * np.sqrt(2 / D)).astype(np.float32),
            "b1": np.zeros(H, np.float32),
            "w2": (rng.standard_normal((H, C)) * np.sqrt(2 / H)).astype(np.float32),
            "b2": np.zeros(C, np.float32)}


def numpy_step(p: dict, x: np.ndarray, y: np.ndarray) -> float:
    h = x @ p["w1"]
    h += p["b1"]
    a = np.maximum(h, 0)
    z = a @ p["w2"]
    z += p["b2"]
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    loss = float(np.mean(np.log(s[:, 0]) - np.sum(y * z, axis=1)))
    dz = e / s
    dz -= y
    dz *= 1.0 / len(x)
    da = dz @ p["w2"].T
    da *= h > 0
    p["w2"] -= LR * (a.T @ dz)
    p["b2"] -= LR * dz.sum(axis=0)
    p["w1"] -= LR * (x.T @ da)
    p["b1"] -= LR * da.sum(axis=0)
    return loss


def build(params: dict) -> SameDiff:
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, D)
    y = sd.placeholder("y", "float", -1, C)
    w1, b1 = sd.var("w1", params["w1"].copy()), sd.var("b1", params["b1"].copy())
    w2, b2 = sd.var("w2", params["w2"].copy()), sd.var("b2", params["b2"].copy())
    logits = sd.nn.relu(x.mmul(w1) + b1).mmul(w2) + b2
    (y * sd.nn.log_softmax(logits)).sum(1).mean().neg().mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=Sgd(LR), feature_mapping=["x"],
                                          label_mapping=["y"]))
    return sd


def numpy_epoch(p: dict, xs: np.ndarray, ys: np.ndarray, rng: np.random.Generator) -> None:
    """What a careful numpy user writes for an epoch: shuffle, gather each batch, step."""
    order = rng.permutation(len(xs))
    for s in range(0, len(xs) - B + 1, B):
        idx = order[s:s + B]
        numpy_step(p, xs[idx], ys[idx])


def torch_epoch_fn(params: dict):
    """PyTorch eager (its default threads): the same MLP as ``nn.Linear`` layers, soft-target
    cross-entropy, ``optim.SGD``; None when torch is not installed."""
    try:
        import torch
    except ImportError:
        return None
    l1, l2 = torch.nn.Linear(D, H), torch.nn.Linear(H, C)
    with torch.no_grad():
        l1.weight.copy_(torch.from_numpy(params["w1"].T.copy()))
        l2.weight.copy_(torch.from_numpy(params["w2"].T.copy()))
        l1.bias.zero_(), l2.bias.zero_()
    model = torch.nn.Sequential(l1, torch.nn.ReLU(), l2)
    opt = torch.optim.SGD(model.parameters(), lr=LR)

    def epoch(xs, ys, rng):
        order = rng.permutation(len(xs))
        for s in range(0, len(xs) - B + 1, B):
            idx = order[s:s + B]
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(xs[idx])),
                                                     torch.from_numpy(ys[idx]))
            loss.backward()
            opt.step()
    return epoch


def jax_epoch_fn(params: dict):
    """``jax.jit`` of the whole step (forward, ``jax.grad``, SGD; parameters donated), fed
    numpy batches; None when jax is not installed."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def loss_fn(p, x, y):
        z = jnp.maximum(x @ p["w1"] + p["b1"], 0) @ p["w2"] + p["b2"]
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(z), axis=1))

    @jax.jit
    def step(p, x, y):
        g = jax.grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - LR * b, p, g)
    state = {"p": {k: jnp.asarray(v) for k, v in params.items()}}

    def epoch(xs, ys, rng):
        order = rng.permutation(len(xs))
        p = state["p"]
        for s in range(0, len(xs) - B + 1, B):
            idx = order[s:s + B]
            p = step(p, xs[idx], ys[idx])
        jax.block_until_ready(p)
        state["p"] = p
    return epoch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds = 7 if args.quick else 21
    rng = np.random.default_rng(0)
    params = init(rng)
    x = rng.random((B, D), dtype=np.float32)
    y = np.eye(C, dtype=np.float32)[rng.integers(0, C, B)]

    # same result first: one step each from the same parameters
    sd = build(params)
    step = train_step_for(sd, sd.training_config, ())
    sd.updater_state.ensure({p: sd.read_value(p) for p in step.params}, step.slots,
                            sd.training_config.updater.state_init())
    ref = {k: v.copy() for k, v in params.items()}
    loss_np = numpy_step(ref, x, y)
    loss_nd, _ = step.run({"x": x, "y": y}, sd.updater_state)
    err = max(float(np.max(np.abs(sd.get_variable(k).get_arr().numpy() - ref[k]))) for k in ref)

    # Every contestant runs whole epochs of N_BATCHES shuffled batches (the compiled step and
    # numpy's step: N_BATCHES calls on one batch), one after the other in a rotating order,
    # round after round: drift and a neighbour's load hit them alike, and each ratio is the
    # median of the rounds' paired ratios.
    n_fit = N_BATCHES * B
    xs = rng.random((n_fit, D), dtype=np.float32)
    ys = np.eye(C, dtype=np.float32)[rng.integers(0, C, n_fit)]
    feeds = {"x": x, "y": y}
    p_np, p_np_step = {k: v.copy() for k, v in params.items()}, {k: v.copy() for k, v in params.items()}
    data_rng = np.random.default_rng(1)
    contestants = {
        "numpy epoch": lambda: numpy_epoch(p_np, xs, ys, data_rng),
        "nd4py fit": lambda: sd.fit((xs, ys), epochs=1, batch_size=B, verbose=0),
        "numpy step": lambda: [numpy_step(p_np_step, x, y) for _ in range(N_BATCHES)],
        "nd4py step": lambda: [step.run(feeds, sd.updater_state) for _ in range(N_BATCHES)],
    }
    for name, make in (("torch eager", torch_epoch_fn), ("jax.jit", jax_epoch_fn)):
        epoch = make(params)
        if epoch is not None:
            contestants[name] = lambda epoch=epoch: epoch(xs, ys, data_rng)
    for fn in contestants.values():  # warm-up: compiles, caches, first-call costs
        fn()
    per_round: dict[str, list[float]] = {k: [] for k in contestants}
    names = list(contestants)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            contestants[name]()
            per_round[name].append((time.perf_counter() - t0) / N_BATCHES * 1e6)
    w1, w2 = params["w1"], params["w2"]
    a = np.maximum(x @ w1, 0)
    dz = np.ones((B, C), np.float32)

    def blas() -> None:
        x @ w1, a @ w2, dz @ w2.T, a.T @ dz, x.T @ a
    t_blas = median_us(blas, rounds)

    med = {k: statistics.median(v) for k, v in per_round.items()}

    def paired(a: str, b: str) -> float:
        return statistics.median(u / v for u, v in zip(per_round[a], per_round[b]))
    res = {"iteration_us": med, "blas_floor_us": t_blas, "rounds": rounds,
           "fit_vs_numpy_epoch": paired("nd4py fit", "numpy epoch"),
           "step_vs_numpy_step": paired("nd4py step", "numpy step"),
           "loss_numpy": loss_np, "loss_nd4py": loss_nd, "max_param_diff_after_one_step": err}
    print(f"W3 784-256-10 MLP, batch {B}, softmax CE, SGD — µs per training iteration "
          f"(medians of {rounds} interleaved rounds of {N_BATCHES}; ratio = median of paired "
          f"ratios)")
    print(f"  numpy, shuffled epoch     {med['numpy epoch']:8.1f}")
    print(f"  nd4py fit                 {med['nd4py fit']:8.1f}   "
          f"({res['fit_vs_numpy_epoch']:.2f}x numpy, goal <= 1.0x)")
    for peer in ("torch eager", "jax.jit"):
        if peer in med:
            res[f"fit_vs_{peer}"] = paired("nd4py fit", peer)
            print(f"  {peer:<25} {med[peer]:8.1f}   (nd4py fit {res[f'fit_vs_{peer}']:.2f}x, "
                  f"goal <= 1.0x)")
        else:
            print(f"  {peer:<25}   (not installed: skipped)")
    print(f"  numpy step, one batch     {med['numpy step']:8.1f}")
    print(f"  nd4py compiled step       {med['nd4py step']:8.1f}   "
          f"({res['step_vs_numpy_step']:.2f}x numpy's step)")
    print(f"  BLAS floor (5 matmuls)    {t_blas:8.1f}")
    print(f"  same first step: loss {loss_np:.6f} vs {loss_nd:.6f}, max |param diff| {err:.2e}")
    print("plan:", step._plans and next(iter(step._plans.values())).explain(), sep="\n")
    if args.json:
        print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
