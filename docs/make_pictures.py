"""Draw the example pictures under ``docs/images/``: the graph and the training step of a
small MLP (the W3 model of ``benchmarks/bench_training.py`` at 64-32-10: the same picture as
784-256-10, with shorter labels).

Run: ``python docs/make_pictures.py`` (writes ``docs/images/mlp_train_step.svg`` and
``docs/images/mlp_graph.svg``: by Graphviz when installed, else by our own layout; pass
``--dot`` to write the DOT text beside them too).
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from samediff import SameDiff  # noqa: E402
from samediff.training import TrainingConfig  # noqa: E402
from samediff.training.updaters import Sgd  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "images")


def mlp() -> SameDiff:
    """The W3 model (benchmarks/bench_training.py), 64-32-10: relu, log-softmax CE, SGD."""
    rng = np.random.default_rng(0)
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, 64)
    y = sd.placeholder("y", "float", -1, 10)
    w1 = sd.var("w1", (rng.standard_normal((64, 32)) * 0.1).astype(np.float32))
    b1 = sd.var("b1", np.zeros(32, np.float32))
    w2 = sd.var("w2", (rng.standard_normal((32, 10)) * 0.1).astype(np.float32))
    b2 = sd.var("b2", np.zeros(10, np.float32))
    logits = sd.nn.relu(x.mmul(w1) + b1).mmul(w2) + b2
    (y * sd.nn.log_softmax(logits)).sum(1).mean().neg().mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=Sgd(0.01), feature_mapping=["x"],
                                          label_mapping=["y"]))
    return sd


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    sd = mlp()
    rng = np.random.default_rng(1)
    xs = rng.random((128, 64), dtype=np.float32)
    ys = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
    sd.fit((xs, ys), epochs=1, batch_size=128, verbose=0)
    for name, training in (("mlp_graph", False), ("mlp_train_step", True)):
        for ext in ("svg", "dot") if "--dot" in sys.argv else ("svg",):
            path = os.path.join(OUT, f"{name}.{ext}")
            print(f"{path}: {sd.save_picture(path, training=training)}")


if __name__ == "__main__":
    main()
