"""Smoke tests: the example scripts run to the end (each checks its own results)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parent.parent


def test_eager_scope_compile():
    subprocess.run([sys.executable, "examples/eager_scope_compile.py", "--quick"], cwd=ROOT,
                   check=True, timeout=120, env={**os.environ, **ONE_CORE})


#: The examples run on one core each: the suite's workers (``pytest -n auto``) already take
#: every core, so a script's helper thread (``ND4PY_WORKERS``) and OpenBLAS's threads would only
#: contend with the other worker (the CNN example: 70 s of CPU in one thread, 100-130 s with
#: them, for the same wall time). Results do not depend on it: every split gives the same bits
#: whoever runs its halves (tests/test_split_stealing.py, test_reproducible_training.py).
ONE_CORE = {"ND4PY_WORKERS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _run(*args: str, **env: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, check=True, timeout=300,
                          capture_output=True, text=True, env={**os.environ, **ONE_CORE, **env})
    return done.stdout


def test_mnist_mlp_reaches_97_percent_on_digits():
    pytest.importorskip("sklearn")
    out = _run("examples/mnist_mlp.py", "--verbose", "0")
    accuracy = float(out.split("test accuracy ")[1].split(";")[0])
    assert accuracy >= 0.97, out


def test_mnist_mlp_on_idx_files(tmp_path):
    from samediff.datasets import write_idx
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 64), ("t10k", 32)):
        labels = rng.integers(0, 10, n).astype(np.uint8)
        images = rng.integers(0, 50, (n, 28, 28)).astype(np.uint8)
        images[np.arange(n), labels * 2, :] = 255  # a learnable stripe per class
        write_idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", images)
        write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte", labels)
    out = _run("examples/mnist_mlp.py", "--data-dir", str(tmp_path), "--epochs", "3",
               "--hidden", "32", "--verbose", "0")
    assert "MNIST: 64 training and 32 test examples of 784 features" in out
    assert "reloaded" in out


def test_custom_layer():
    out = _run("examples/custom_layer.py", "--epochs", "40")
    assert "gradient check PASSED" in out and "identical predictions" in out


@pytest.mark.heavy(seconds=40)
def test_cnn_digits_reaches_98_5_percent_and_the_eager_network_agrees():
    pytest.importorskip("sklearn")
    out = _run("examples/cnn_digits.py", "--verbose", "0")
    accuracy = float(out.split("test accuracy ")[1].split(";")[0])
    assert accuracy >= 0.985, out
    assert "reloaded: " + f"{accuracy:.4f}" in out
    gap = float(out.split("max difference ")[1].split()[0])
    assert gap <= 1e-5, out


@pytest.mark.heavy(seconds=5)
def test_cnn_digits_on_idx_files(tmp_path):
    from samediff.datasets import write_idx
    rng = np.random.default_rng(1)
    for prefix, n in (("train", 64), ("t10k", 32)):
        labels = rng.integers(0, 10, n).astype(np.uint8)
        images = rng.integers(0, 50, (n, 28, 28)).astype(np.uint8)
        images[np.arange(n), labels * 2, :] = 255
        write_idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", images)
        write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte", labels)
    # the IDX data path, run by the interpreter: the compiled CNN is the test above's (compiling
    # it again for 28x28 images cost 15 s of CPU)
    out = _run("examples/cnn_digits.py", "--data-dir", str(tmp_path), "--epochs", "1",
               "--verbose", "0", ND4PY_COMPILE="interpret")
    assert "MNIST: 64 training and 32 test images of 28x28" in out
    assert "reloaded" in out and "max difference" in out


def _assert_trained(out: str, accuracy_at_least: float) -> None:
    """An example's report: test accuracy at least ``accuracy_at_least``, the same after
    saving and reloading, and a training loss that fell."""
    accuracy = float(out.split("test accuracy ")[1].split(";")[0])
    assert accuracy >= accuracy_at_least, out
    assert "reloaded: " + f"{accuracy:.4f}" in out
    first, last = (float(v) for v in out.split(", loss ")[1].split()[0:3:2])
    assert last < first, out


@pytest.mark.heavy(seconds=9)
def test_control_flow_newton_gradient_and_scan_rnn_reach_95_percent():
    """Interpreted (the same numbers: 9 s against 27 s compiling its kernels from a cold
    cache); the loops' compiled forms are tested in test_loop_kernels/test_control_programs."""
    pytest.importorskip("sklearn")
    out = _run("examples/control_flow.py", ND4PY_COMPILE="interpret")
    gap = float(out.split("largest difference ")[1].split()[0])
    assert gap <= 1e-9, out  # through the while loop == the implicit function theorem
    _assert_trained(out, 0.95)


@pytest.mark.heavy(seconds=6)
def test_sequence_digits_lstm_layer_reaches_97_percent():
    """ND4J's lstmLayer (NTS, last hidden state) trained with fit; interpreted, on the numpy
    route (deterministic: in interpret mode the compiled LSTM loops would take over part-way,
    whenever their compile finishes; they are compared with the numpy route in
    test_recurrent_kernels)."""
    pytest.importorskip("sklearn")
    out = _run("examples/sequence_digits.py", ND4PY_COMPILE="interpret", ND4PY_BLAS="numpy")
    _assert_trained(out, 0.97)


@pytest.mark.heavy(seconds=10)
def test_char_transformer_beats_the_unigram_baseline_and_both_forms_agree():
    """A short run (the example's default trains 300 steps: held-out 2.63 nats/char against
    the unigram baseline's 3.37); interpreted. The example itself exits non-zero when the
    eager ``@nd.compile`` form and the SameDiff graph disagree on the held-out loss."""
    out = _run("examples/char_transformer.py", "--steps", "40", "--sample", "20",
               ND4PY_COMPILE="interpret")
    line = out.split("held-out loss ")[1]
    before, after = float(line.split()[0]), float(line.split()[2])
    unigram = float(line.split("unigram baseline ")[1].split(")")[0])
    assert after < unigram < before, out
    assert "sample after the prompt" in out
