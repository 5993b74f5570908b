"""An LSTM reads each digits image row by row and classifies it (``sd.rnn.lstmLayer``, ``fit``).

Each 8x8 image of scikit-learn's digits is a sequence of 8 rows of 8 pixels. ND4J's
``lstmLayer`` with an ``LSTMLayerConfig`` (batch-major ``NTS`` input, the last hidden state
returned) runs the sequence; a dense softmax layer reads the last state (through dropout while
training); ``fit`` trains the whole graph with Adam (the LSTM's gradient runs back through time
in one op). The trained graph is saved, reloaded and evaluated again. Test accuracy 97.8-98.9 %
over seeds 0-3 in ~2.5 s of training (the compiled LSTM loops); 96.4-98.6 % over seeds 0-5 on
the numpy route (``ND4PY_BLAS=numpy``): a long run of Adam amplifies rounding differences, so
the two routes end in different minima.

    python examples/sequence_digits.py [--epochs 30] [--seed 0]
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
from samediff.datasets import load_digits
from samediff.evaluation import Evaluation
from samediff.frontends.rnn import LSTMLayerConfig, LSTMLayerWeights
from samediff.training import Adam, TrainingConfig

HIDDEN, CLASSES, ROWS = 64, 10, 8


def build(rng: np.random.Generator) -> SameDiff:
    """pixels [N, 64] -> [N, 8 rows, 8 pixels] -> LSTM (last state) -> dense -> softmax."""
    sd = SameDiff.create()
    pixels = sd.placeholder("input", nd.FLOAT, -1, ROWS * ROWS)
    labels = sd.placeholder("labels", nd.FLOAT, -1, CLASSES)

    def glorot(*shape: int) -> np.ndarray:
        return rng.normal(0, np.sqrt(2.0 / sum(shape)), shape).astype(np.float32)
    bias = np.zeros(4 * HIDDEN, np.float32)
    bias[HIDDEN:2 * HIDDEN] = 1.0  # forget gates start open (gates i, f, c, o)
    weights = LSTMLayerWeights(weights=sd.var("W", glorot(ROWS, 4 * HIDDEN)),
                               rWeights=sd.var("R", glorot(HIDDEN, 4 * HIDDEN)),
                               bias=sd.var("b", bias))
    config = LSTMLayerConfig(lstmdataformat="NTS", directionMode="FWD",
                             retFullSequence=False, retLastH=True)
    (last,) = sd.rnn.lstmLayer("lstm", pixels.reshape(-1, ROWS, ROWS), weights, config)
    last = sd.nn.dropout(last, 0.5)  # (keep probability: ND4J's convention)
    logits = last.mmul(sd.var("out_w", glorot(HIDDEN, CLASSES))) + sd.var(
        "out_b", np.zeros(CLASSES, np.float32))
    sd.nn.softmax("softmax", logits)
    sd.loss.softmax_cross_entropy("loss", labels, logits)
    sd.set_training_config(TrainingConfig(updater=Adam(1e-2), feature_mapping=["input"],
                                          label_mapping=["labels"]))
    return sd


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    nd.random.set_seed(args.seed)
    x_train, y_train, x_test, y_test = load_digits(test_fraction=0.2, seed=0)
    one_hot = np.eye(CLASSES, dtype=np.float32)
    train, test = (x_train, one_hot[y_train]), (x_test, one_hot[y_test])
    sd = build(np.random.default_rng(args.seed))
    t0 = time.perf_counter()
    history = sd.fit(train, epochs=args.epochs, batch_size=32, verbose=0)
    print(f"LSTM over {ROWS} rows: {args.epochs} epochs in {time.perf_counter() - t0:.1f} s, "
          f"loss {history.losses[0]:.3f} -> {history.losses[-1]:.3f}")
    accuracy = sd.evaluate(test, "softmax", Evaluation()).accuracy()
    path = os.path.join(tempfile.mkdtemp(), "lstm_digits.sdz")
    sd.save(path)
    again = SameDiff.load(path).evaluate(test, "softmax", Evaluation()).accuracy()
    print(f"test accuracy {accuracy:.4f}; saved and reloaded: {again:.4f}")
    if again != accuracy:
        sys.exit("the reloaded LSTM does not reproduce the accuracy")
    return accuracy


if __name__ == "__main__":
    main()
