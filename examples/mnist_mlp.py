"""The seeds' "Hello World": a one-hidden-layer MNIST classifier in nd4py's SameDiff.

Data: MNIST IDX files (``.gz`` or plain) from ``--data-dir`` if you have them; otherwise the
real 8x8 handwritten digits set that ships inside scikit-learn (``pip install -e
".[examples]"``), so it runs offline on a fresh machine. Trains with Adam, reports test
accuracy, saves the model, reloads it and evaluates again.

    python examples/mnist_mlp.py                      # digits, ~97-98 % test accuracy
    python examples/mnist_mlp.py --data-dir ~/mnist   # the real MNIST IDX files
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

import nd4py as nd
from samediff import SameDiff
from samediff.datasets import load_digits, load_mnist
from samediff.evaluation import Evaluation
from samediff.training import Adam, CosineSchedule, TrainingConfig


def build(n_in: int, n_hidden: int, n_classes: int, total_steps: int) -> SameDiff:
    """The graph of seed 001, "Building a Simple Neural Net in SameDiff", trained with Adam on
    a cosine learning-rate schedule with warm-up and a little L2."""
    sd = SameDiff.create()
    inp = sd.placeholder("input", nd.FLOAT, -1, n_in)
    labels = sd.placeholder("labels", nd.FLOAT, -1, n_classes)
    w1 = sd.var("w1", "xavier", nd.FLOAT, n_in, n_hidden)
    b1 = sd.var("b1", nd.FLOAT, n_hidden)
    w2 = sd.var("w2", "xavier", nd.FLOAT, n_hidden, n_classes)
    b2 = sd.var("b2", nd.FLOAT, n_classes)
    hidden = sd.nn.relu("hidden", inp.mmul(w1).add(b1), 0)
    logits = hidden.mmul(w2).add(b2)
    sd.nn.softmax("softmax", logits)
    sd.loss.softmax_cross_entropy("loss", labels, logits)  # marked as the loss
    schedule = CosineSchedule(3e-3, total_steps=total_steps, warmup_steps=total_steps // 20)
    sd.set_training_config(TrainingConfig.builder().updater(Adam(schedule)).l2(1e-4)
                           .data_set_feature_mapping("input")
                           .data_set_label_mapping("labels").build())
    return sd


def one_hot(y: np.ndarray, n: int) -> np.ndarray:
    return np.eye(n, dtype=np.float32)[y]


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="directory with MNIST IDX files (else: digits)")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--limit", type=int, default=None, help="use only this many training examples")
    parser.add_argument("--save", default=None, help="where to save the model (default: a temp dir)")
    parser.add_argument("--verbose", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    nd.random.set_seed(args.seed)

    if args.data_dir:
        x_train, y_train, x_test, y_test = load_mnist(args.data_dir)
        name, epochs = "MNIST", args.epochs or 5
    else:
        x_train, y_train, x_test, y_test = load_digits(test_fraction=0.2, seed=0)
        name, epochs = "digits (scikit-learn)", args.epochs or 60
    if args.limit:
        x_train, y_train = x_train[:args.limit], y_train[:args.limit]
    n_classes = 10
    print(f"{name}: {len(x_train)} training and {len(x_test)} test examples of "
          f"{x_train.shape[1]} features")

    steps = epochs * -(-len(x_train) // args.batch_size)
    sd = build(x_train.shape[1], args.hidden, n_classes, steps)
    train = (x_train, one_hot(y_train, n_classes))
    test = (x_test, one_hot(y_test, n_classes))
    t0 = time.perf_counter()
    history = sd.fit(train, epochs=epochs, batch_size=args.batch_size, validation=test,
                     evaluations={"softmax": Evaluation()}, verbose=args.verbose)
    seconds = time.perf_counter() - t0
    print(f"trained {epochs} epochs in {seconds:.1f} s ({epochs / seconds:.1f} epochs/s; first "
          f"epoch {history.seconds[0]:.2f} s including compilation, later epochs "
          f"{np.median(history.seconds[1:] or history.seconds):.3f} s)")
    print(f"final loss {history.losses[-1]:.4f}, validation loss {history.val_losses[-1]:.4f}")

    evaluation = sd.evaluate(test, "softmax", Evaluation())
    print(evaluation.stats())
    accuracy = evaluation.accuracy()

    path = args.save or os.path.join(tempfile.mkdtemp(), "mnist_mlp.sdz")
    sd.save(path)
    reloaded = SameDiff.load(path)
    again = reloaded.evaluate(test, "softmax", Evaluation()).accuracy()
    print(f"test accuracy {accuracy:.4f}; saved to {path}, reloaded: {again:.4f}")
    if again != accuracy:
        sys.exit("the reloaded model does not reproduce the accuracy")
    return accuracy


if __name__ == "__main__":
    main()
