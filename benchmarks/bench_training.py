"""W3: one training step of a 784-256-10 MLP (batch 128, softmax cross-entropy, SGD).

Compared in the same run:

* **numpy**: a hand-written forward / backward / in-place SGD update step (the floor a careful
  numpy user reaches);
* **nd4py step**: the compiled ``TrainStep`` that ``SameDiff.fit`` runs per batch (forward,
  backward and updater in one plan, parameters updated in place);
* **nd4py fit**: ``sd.fit`` per iteration, including batching/shuffling and bookkeeping;
* **BLAS floor**: only the three matrix products the step needs (x@w1, a@w2, dz@w2.T,
  a.T@dz, x.T@dh), i.e. what no implementation can avoid.

Goal: compiled step <= 1.0x the numpy step. Run: ``python benchmarks/bench_training.py
[--json] [--quick]``. Medians of repeated samples.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from timing import fit_iteration_ms  # noqa: E402

from samediff import SameDiff
from samediff.training import TrainingConfig
from samediff.training.trainer import _train_step
from samediff.training.updaters import Sgd

B, D, H, C, LR = 128, 784, 256, 10, 0.01


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    reps = 7 if args.quick else 21
    rng = np.random.default_rng(0)
    params = init(rng)
    x = rng.random((B, D), dtype=np.float32)
    y = np.eye(C, dtype=np.float32)[rng.integers(0, C, B)]

    # same result first: one step each from the same parameters
    sd = build(params)
    step = _train_step(sd, sd.training_config, ())
    sd.updater_state.ensure({p: sd.read_value(p) for p in step.params}, step.slots,
                            sd.training_config.updater.state_init())
    ref = {k: v.copy() for k, v in params.items()}
    loss_np = numpy_step(ref, x, y)
    loss_nd, _ = step.run({"x": x, "y": y}, sd.updater_state)
    err = max(float(np.max(np.abs(sd.get_variable(k).get_arr().numpy() - ref[k]))) for k in ref)

    # nd4py first: numpy's OpenBLAS threads spin on the second core for a long while after
    # its calls, which slowed a step measured after them (nd4py's matmuls and kernels share
    # that core through its own helper thread); the helper polls for at most 1 ms
    feeds = {"x": x, "y": y}
    t_step = median_us(lambda: step.run(feeds, sd.updater_state), reps)
    p_np = {k: v.copy() for k, v in params.items()}
    t_numpy = median_us(lambda: numpy_step(p_np, x, y), reps)
    w1, w2 = params["w1"], params["w2"]
    a = np.maximum(x @ w1, 0)
    dz = np.ones((B, C), np.float32)

    def blas() -> None:
        x @ w1, a @ w2, dz @ w2.T, a.T @ dz, x.T @ a
    t_blas = median_us(blas, reps)

    n_fit = 40 * B
    xs = rng.random((n_fit, D), dtype=np.float32)
    ys = np.eye(C, dtype=np.float32)[rng.integers(0, C, n_fit)]
    t_fit = fit_iteration_ms(sd, (xs, ys), B, max(3, reps // 3)) * 1e3

    res = {"numpy_step_us": t_numpy, "compiled_step_us": t_step, "fit_iteration_us": t_fit,
           "blas_floor_us": t_blas, "ratio_step_vs_numpy": t_step / t_numpy,
           "loss_numpy": loss_np, "loss_nd4py": loss_nd, "max_param_diff_after_one_step": err}
    print(f"W3 784-256-10 MLP, batch {B}, softmax CE, SGD — one training step (median µs)")
    print(f"  numpy hand-written step  {t_numpy:8.1f}")
    print(f"  nd4py compiled step      {t_step:8.1f}   ({t_step / t_numpy:.2f}x numpy, goal <= 1.0x)")
    print(f"  nd4py fit, per iteration {t_fit:8.1f}   (batching, shuffling, bookkeeping included)")
    print(f"  BLAS floor (5 matmuls)   {t_blas:8.1f}")
    print(f"  same first step: loss {loss_np:.6f} vs {loss_nd:.6f}, max |param diff| {err:.2e}")
    print("plan:", step._plans and next(iter(step._plans.values())).explain(), sep="\n")
    if args.json:
        print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
