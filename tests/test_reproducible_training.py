"""Same seed, same model (issue 21, item 6): a few compiled training steps of a small CNN
give bit-identical weights from a cold kernel cache and a warm one, with the helper thread
(``samediff.kernels.workers``) and without it (``ND4PY_WORKERS=1``). (A loaded machine changes only
which thread runs which half and when: the in-process test covers the helper being busy,
which runs both halves on the caller.)

Each run is a fresh interpreter (``python tests/test_reproducible_training.py OUT.npz``).
The cold one gets an empty ``ND4PY_CACHE_DIR``, so every fused kernel of its plans is
generated and compiled anew; the library's kernels (convolution, pooling, matmul) come from
the suite's own Numba cache -- in CI a throwaway one, compiled cold earlier in this very run --
which keeps the test at ~2 s a run instead of ~12 s for recompiling them (their cached and
freshly compiled machine code is the same; what differs cold is which plans and routes a
process builds, and that is what this compares). The shapes
take both routes whose two halves do not compute what the whole would: the conv's weight
adjoint (im2col, from ``kernels.cnn.SPLIT_MIN_MACS``: it adds the halves' partial sums) and
the first dense layer's matmul (private BLAS, from ``kernels.matmul.SPLIT_MIN_MNK``: each
half is small enough for OpenBLAS's small-matrix kernels, which sum the depth of 1024 in
one run where the whole is summed in blocks). Before the split was decided by size alone,
``ND4PY_WORKERS=1`` gave other weights than the default -- through either route alone.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
BATCH, CHANNELS, SIDE, HIDDEN, CLASSES, STEPS = 32, 64, 8, 40, 10, 3


def _params(rng: np.random.Generator) -> dict[str, np.ndarray]:
    flat = CHANNELS * (SIDE // 2) ** 2
    return {"c/w": rng.normal(0, 0.3, (3, 3, 1, CHANNELS)).astype(np.float32),
            "c/b": np.zeros(CHANNELS, np.float32),
            "d1/w": rng.normal(0, np.sqrt(2 / flat), (flat, HIDDEN)).astype(np.float32),
            "d2/w": rng.normal(0, 0.1, (HIDDEN, CLASSES)).astype(np.float32)}


def train(out: str) -> None:
    """conv3x3 (+bias, relu) -> 2x2 max-pool -> dense-relu-dropout -> dense -> softmax
    cross-entropy; SGD, ``STEPS`` steps, seed 0; the weights go to ``out`` (npz)."""
    import nd4py as nd
    from samediff import SameDiff
    from samediff.training import Sgd, TrainingConfig

    nd.random.set_seed(0)  # dropout draws from it
    rng = np.random.default_rng(0)
    params = _params(rng)
    x = rng.standard_normal((BATCH * STEPS, 1, SIDE, SIDE)).astype(np.float32)
    y = np.eye(CLASSES, dtype=np.float32)[rng.integers(0, CLASSES, BATCH * STEPS)]
    sd = SameDiff.create()
    h = sd.placeholder("x", nd.FLOAT, -1, 1, SIDE, SIDE)
    labels = sd.placeholder("y", nd.FLOAT, -1, CLASSES)
    v = {k: sd.var(k, a) for k, a in params.items()}
    h = sd.nn.relu(sd.cnn.conv2d(h, v["c/w"], v["c/b"], padding="same"), 0)
    h = sd.cnn.max_pooling2d(h, kernel=2, stride=2).reshape(-1, params["d1/w"].shape[0])
    h = sd.nn.dropout(sd.nn.relu(h.mmul(v["d1/w"]), 0), 0.75)
    sd.loss.softmax_cross_entropy("loss", labels, h.mmul(v["d2/w"]))
    sd.set_training_config(TrainingConfig(updater=Sgd(0.1), feature_mapping=["x"],
                                          label_mapping=["y"]))
    sd.fit((x, y), epochs=1, batch_size=BATCH, shuffle=False, verbose=0)
    np.savez(out, **{k: np.asarray(sd.graph.vars[k].value) for k in params})


def _run(tmp_path: Path, name: str, cache: Path, **env: str) -> dict[str, np.ndarray]:
    out = tmp_path / f"{name}.npz"
    full = {k: v for k, v in os.environ.items()  # compiled plans, helper on unless asked
            if k not in ("ND4PY_EXECUTOR", "ND4PY_WORKERS")}
    full.update(ND4PY_CACHE_DIR=str(cache), **env)
    done = subprocess.run([sys.executable, __file__, str(out)], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{name} run failed:\n{done.stdout}\n{done.stderr}"
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def _same(a: dict, b: dict) -> list[str]:
    """Names of the weights whose bytes differ."""
    return [k for k in a if a[k].tobytes() != b[k].tobytes()]


def _with_and_without_helper(monkeypatch, fn) -> tuple[np.ndarray, np.ndarray]:
    from samediff.kernels import workers
    helper = fn()
    with monkeypatch.context() as m:
        m.setattr(workers, "_ENABLED", False)  # as ND4PY_WORKERS=1 or one CPU
        return helper, fn()


def test_split_work_is_the_same_bytes_without_the_helper(monkeypatch):
    """In process, on kernels the suite compiles anyway: the two routes whose halves do not
    add up to the whole bit for bit -- the weight adjoint (partial sums per half) and a
    matmul whose halves OpenBLAS hands to its small-matrix kernels -- are split the same
    with the helper and without it (``workers.halves`` looks at sizes only)."""
    from samediff.kernels import blas
    from samediff.kernels import cnn as K
    from samediff.kernels import matmul as M
    if not blas.available():
        pytest.skip(blas.why_not())
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((4, 8, 12, 12)), rng.standard_normal((4, 32, 12, 12))
    monkeypatch.setattr(K, "SPLIT_MIN_MACS", 0)
    dw = _with_and_without_helper(monkeypatch, lambda: K.conv_weight_grad(
        x, g, (3, 3), (1, 1), (1, 1), (1, 1), True))
    assert dw[0].tobytes() == dw[1].tobytes(), np.abs(dw[0] - dw[1]).max()
    a = rng.standard_normal((33, 513)).astype(np.float32)
    b = rng.standard_normal((513, 65)).astype(np.float32)
    assert 33 * 513 * 65 >= M.SPLIT_MIN_MNK  # big enough to split
    mm = _with_and_without_helper(monkeypatch, lambda: M.matmul2d(a, b))
    assert mm[0].tobytes() == mm[1].tobytes(), np.abs(mm[0] - mm[1]).max()


@pytest.mark.compiled
@pytest.mark.heavy
def test_training_is_bit_identical_cold_warm_and_on_one_thread(tmp_path):
    cache = tmp_path / "cache"
    cold = _run(tmp_path, "cold", cache)
    assert list((cache / "kernels").glob("k_*.py")), "the cold run compiled no fused kernel"
    warm = _run(tmp_path, "warm", cache)
    one_thread = _run(tmp_path, "one_thread", cache, ND4PY_WORKERS="1")
    start = _params(np.random.default_rng(0))
    assert _same(cold, start) == list(start), "training changed no weight: nothing compared"
    assert _same(cold, warm) == [], "cold vs warm kernel cache"
    assert _same(cold, one_thread) == [], "helper thread vs ND4PY_WORKERS=1"


if __name__ == "__main__":
    train(sys.argv[1])
