"""Models exported from PyTorch with a dynamic batch dim (``tests/data/onnx``, written by
``export_from_torch.py`` in an environment with torch; torch is not needed here): a
ResNet-style CNN, a transformer encoder and an LSTM. Each imports once and runs at two batch
sizes, interpreted and compiled, against ``onnx.reference`` -- the shape arithmetic these
exports carry (``Shape -> Gather -> Concat -> Reshape``, ``ConstantOfShape`` initial states)
runs when the graph runs, so no batch size is baked in."""
from __future__ import annotations

import functools
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx.reference import ReferenceEvaluator  # noqa: E402

from samediff import compiler  # noqa: E402
from samediff.onnx import import_onnx  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "onnx")
#: model -> the input's shape after the batch dim
MODELS = {"torch_cnn": (3, 16, 16), "torch_encoder": (5, 32), "torch_lstm": (7, 8)}


@functools.lru_cache(maxsize=None)
def _reference_run(name: str, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded input and onnx.reference's output, once per model and batch for both
    executors (the reference's convolution is plain Python loops: seconds per run)."""
    x = np.random.default_rng(batch).standard_normal((batch, *MODELS[name])).astype(np.float32)
    path = os.path.join(DATA, f"{name}.onnx")
    return x, ReferenceEvaluator(path).run(None, {"x": x})[0]


@pytest.mark.parametrize("executor", ["interpreter", "compiled"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_exported_model_matches_onnx_reference_at_two_batch_sizes(name, executor):
    path = os.path.join(DATA, f"{name}.onnx")
    sd = import_onnx(path)
    assert tuple(sd.get_variable("x").shape)[0] == -1
    previous = compiler.set_executor(executor)
    try:
        for batch in (1, 4):
            x, want = _reference_run(name, batch)
            got = sd.output({"x": x}, "y")["y"].numpy()
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    finally:
        compiler.set_executor(previous)


def test_an_imported_cnn_fine_tunes_with_fit():
    """``trainable=True``: every float initializer is a variable that ``fit`` updates, and the
    loss goes down."""
    from samediff.training import TrainingConfig
    from samediff.training.updaters import Adam
    sd = import_onnx(os.path.join(DATA, "torch_cnn.onnx"), trainable=True)
    names = sd.trainable_names()
    # two convolutions (the exporter folded the batch norms into them) and the dense layer
    assert len(names) == 6 and "fc.weight" in names
    before = {n: sd.get_variable(n).get_arr().numpy().copy() for n in names}
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 3, 16, 16)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)]
    t = sd.placeholder("t", "float", -1, 10)
    sd.loss.softmax_cross_entropy("loss", t, sd.get_variable("y"))
    sd.set_training_config(TrainingConfig(updater=Adam(1e-2), feature_mapping=["x"],
                                          label_mapping=["t"]))
    curve = sd.fit((x, labels), epochs=8, batch_size=16, verbose=0).loss_curve()
    losses = list(curve.losses) if hasattr(curve, "losses") else list(curve)
    assert losses[-1] < 0.95 * losses[0], losses
    changed = [n for n in names if not np.array_equal(before[n],
                                                      sd.get_variable(n).get_arr().numpy())]
    assert sorted(changed) == sorted(names)
