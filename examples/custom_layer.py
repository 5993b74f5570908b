"""A user-defined op with its own gradient, inside a model that is trained, saved and reloaded.

The op is a "bent identity" activation, f(x) = (sqrt(x^2 + 1) - 1) / 2 + x * slope, with its
gradient f'(x) = x / (2 sqrt(x^2 + 1)) + slope written with existing ops. The example checks
the gradient against finite differences, trains a small classifier that uses the op as its
hidden activation, saves the model, reloads it (the op is found because this module
registered it) and checks the predictions match.

    python examples/custom_layer.py
"""
from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

import nd4py as nd
from samediff import SameDiff
from samediff.evaluation import Evaluation
from samediff.gradcheck import check_gradients
from samediff.training import Adam, TrainingConfig


@nd.udf.op(inputs=("x",), properties={"slope": 1.0})
def bent_identity(x, *, slope):
    "(sqrt(x^2 + 1) - 1) / 2 + slope * x, computed with numpy"
    return (np.sqrt(x * x + 1.0) - 1.0) / 2.0 + slope * x


@bent_identity.gradient
def _bent_identity_grad(ins, outs, gs, attrs):
    """d/dx = x / (2 sqrt(x^2 + 1)) + slope, built from ordinary ops on the values (so it is
    traced, compiled and saved like any other gradient)."""
    (x,), (g,) = ins, gs
    return [g * (x / ((x * x + 1.0).sqrt() * 2.0) + attrs.slope)]


def spiral(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved spirals: not linearly separable, so the hidden layer has to work."""
    t = rng.uniform(0.5, 3.5 * np.pi, n)
    cls = rng.integers(0, 2, n)
    r = t / (3.5 * np.pi)
    x = np.stack([r * np.cos(t + np.pi * cls), r * np.sin(t + np.pi * cls)], 1)
    x += rng.normal(0, 0.02, x.shape)
    return x.astype(np.float32), np.eye(2, dtype=np.float32)[cls]


def build(hidden: int) -> SameDiff:
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.FLOAT, -1, 2)
    y = sd.placeholder("y", nd.FLOAT, -1, 2)
    w1, b1 = sd.var("w1", "xavier", nd.FLOAT, 2, hidden), sd.var("b1", nd.FLOAT, hidden)
    w2, b2 = sd.var("w2", "xavier", nd.FLOAT, hidden, hidden), sd.var("b2", nd.FLOAT, hidden)
    w3, b3 = sd.var("w3", "xavier", nd.FLOAT, hidden, 2), sd.var("b3", nd.FLOAT, 2)
    (h1,) = sd.do_udf(bent_identity, x.mmul(w1) + b1, slope=0.5, name="h1")
    (h2,) = sd.do_udf(bent_identity, h1.mmul(w2) + b2, slope=0.5, name="h2")
    logits = h2.mmul(w3) + b3
    sd.nn.softmax("probs", logits)
    sd.loss.softmax_cross_entropy("loss", y, logits)
    sd.set_training_config(TrainingConfig(updater=Adam(1e-2), feature_mapping=["x"],
                                          label_mapping=["y"]))
    return sd


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=150)
    parser.add_argument("--hidden", type=int, default=32)
    args = parser.parse_args(argv)
    nd.random.set_seed(0)
    rng = np.random.default_rng(0)

    # 1. the op eagerly, and its gradient against float64 finite differences
    print("bent_identity([-2, 0, 2], slope=0.5) =", bent_identity(nd.create([-2.0, 0.0, 2.0]),
                                                                  slope=0.5))
    g = SameDiff.create()
    v = g.var("v", rng.normal(size=(3, 4)))
    (out,) = g.do_udf(bent_identity, v, slope=0.3)
    out.square().sum().mark_as_loss()
    report = check_gradients(g, {})
    print("gradient check:", report)

    # 2. a model that uses it, trained with fit
    x_train, y_train = spiral(800, rng)
    x_test, y_test = spiral(400, rng)
    sd = build(args.hidden)
    history = sd.fit((x_train, y_train), epochs=args.epochs, batch_size=64, verbose=0)
    accuracy = sd.evaluate((x_test, y_test), "probs", Evaluation()).accuracy()
    print(f"trained {args.epochs} epochs: loss {history.losses[0]:.3f} -> {history.losses[-1]:.3f}, "
          f"test accuracy {accuracy:.3f}")

    # 3. save, reload (the UDF is registered by this module's import), same predictions
    path = os.path.join(tempfile.mkdtemp(), "custom_layer.sdz")
    sd.save(path)
    again = SameDiff.load(path)
    p1 = sd.output({"x": x_test}, "probs")["probs"].numpy()
    p2 = again.output({"x": x_test}, "probs")["probs"].numpy()
    assert np.array_equal(p1, p2), "reloaded model predicts differently"
    print(f"saved to {path}; reloaded model gives identical predictions")
    return accuracy


if __name__ == "__main__":
    main()
