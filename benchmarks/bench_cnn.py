"""Convolution speed and memory, and W7: a LeNet-style training step through ``fit``.

Compared in the same run (medians of repeated samples, after warm-up):

* **conv2d forward**, 3x3, pad 1, (8, 64, 56, 56) -> 64 channels, float32, NCHW:
  nd4py eager ``nd.cnn.conv2d`` vs the fastest numpy form we know (NHWC, one GEMM per kernel
  tap, written here) and ``torch.nn.functional.conv2d`` / ``jax.lax.conv`` (jit) when
  installed. Goal: <= 1.0x PyTorch eager.
* **peak memory** of that forward (``tracemalloc``, which sees numpy's buffers) above its
  input and output, next to the size of one tap-sized buffer. Goal: <= one such buffer.
* **W7**: batch 32 of 1x28x28, conv 5x5 -> 8, relu, maxpool 2, conv 5x5 -> 16, relu,
  maxpool 2, dense -> 10, softmax cross-entropy, SGD: ``SameDiff.fit`` per iteration vs the
  same step in PyTorch eager and ``jax.jit`` (when installed). Goal: <= 1.0x PyTorch eager.

Each row is measured in a fresh process of its own (``--row``), one after the other in the same
run: a library's threads, allocator settings (``samediff/kernels/process.py`` raises glibc's
mmap/trim thresholds when nd4py is imported, which also sped PyTorch's convolution up by a
third when they shared a process) and warm caches then never flatter or slow another's row;
each gets the environment a user of that library alone would have.

torch and jax are never dependencies: their rows are skipped when they are not installed.
Run: ``python benchmarks/bench_cnn.py [--quick] [--json]``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from timing import fit_iteration_ms, median_ms  # noqa: E402

N, C, HW, O = 8, 64, 56, 64
B, LR = 32, 0.05


def numpy_conv_nhwc(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """3x3, pad 1, stride 1 on NHWC data and [3, 3, C, O] weights: one GEMM per tap into
    the output window it reaches (no im2col buffer)."""
    n, h, wd, c = x.shape
    out = np.zeros((n, h, wd, w.shape[3]), x.dtype)
    for i in range(3):
        for j in range(3):
            oh = slice(max(0, 1 - i), min(h, h + 1 - i))
            ow = slice(max(0, 1 - j), min(wd, wd + 1 - j))
            ih = slice(oh.start + i - 1, oh.stop + i - 1)
            iw = slice(ow.start + j - 1, ow.stop + j - 1)
            out[:, oh, ow] += x[:, ih, iw] @ w[i, j]
    return out


def _conv_inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, C, HW, HW), dtype=np.float32)
    return x, rng.standard_normal((3, 3, C, O), dtype=np.float32) * 0.05


def conv_nd4py(reps: int) -> dict:
    import nd4py as nd
    x, w = _conv_inputs()
    xn, wn = nd.create(x), nd.create(w)
    got = nd.cnn.conv2d(xn, wn, padding=1).numpy()
    want = numpy_conv_nhwc(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), w).transpose(0, 3, 1, 2)
    return {"ms": median_ms(lambda: nd.cnn.conv2d(xn, wn, padding=1), reps),
            "max_abs_err_vs_numpy": float(np.max(np.abs(got - want)))}


def conv_numpy(reps: int) -> dict:
    x, w = _conv_inputs()
    x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    return {"ms": median_ms(lambda: numpy_conv_nhwc(x_nhwc, w), reps)}


def conv_torch(reps: int) -> dict:
    import torch
    import torch.nn.functional as F
    x, w = _conv_inputs()
    xt, wt = torch.from_numpy(x), torch.from_numpy(np.ascontiguousarray(w.transpose(3, 2, 0, 1)))
    with torch.no_grad():
        return {"ms": median_ms(lambda: F.conv2d(xt, wt, padding=1), reps)}


def conv_jax(reps: int) -> dict:
    import jax
    x, w = _conv_inputs()
    xj, wj = jax.numpy.asarray(x), jax.numpy.asarray(w)
    f = jax.jit(lambda a, b: jax.lax.conv_general_dilated(
        a, b, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "HWIO", "NCHW")))
    return {"ms": median_ms(lambda: f(xj, wj).block_until_ready(), reps)}


_PEAK = f"""
import tracemalloc, numpy as np, nd4py as nd
x = nd.create(np.ones(({N}, {C}, {HW}, {HW}), np.float32))
w = nd.create(np.ones((3, 3, {C}, {O}), np.float32))
nd.cnn.conv2d(x[:1, :, :4, :4], w, padding=1)  # loads the compiled kernels (not counted)
tracemalloc.start()
base = tracemalloc.get_traced_memory()[0]
out = nd.cnn.conv2d(x, w, padding=1)
print(tracemalloc.get_traced_memory()[1] - base - out.numpy().nbytes)
"""


def peak_extra_mb() -> float:
    """Peak memory of a first conv2d call above its output, in a fresh process: the scratch
    buffer a thread keeps between calls is allocated inside the measured call (after a tiny
    conv of the same route has loaded the compiled kernels, whose code is not data)."""
    done = subprocess.run([sys.executable, "-c", _PEAK], capture_output=True, text=True,
                          check=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    return int(done.stdout.split()[-1]) / 2 ** 20


# --- W7 --------------------------------------------------------------------------------------

def lenet_params(rng: np.random.Generator) -> dict:
    def he(shape, fan_in):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    return {"w1": he((5, 5, 1, 8), 25), "b1": np.zeros(8, np.float32),
            "w2": he((5, 5, 8, 16), 200), "b2": np.zeros(16, np.float32),
            "w3": he((256, 10), 256), "b3": np.zeros(10, np.float32)}


def lenet_samediff(p: dict):
    import nd4py as nd
    from samediff.training import Sgd, TrainingConfig
    sd = nd.SameDiff.create()
    x = sd.placeHolder("x", nd.FLOAT, -1, 1, 28, 28)
    y = sd.placeHolder("y", nd.FLOAT, -1, 10)
    v = {k: sd.var(k, a.copy()) for k, a in p.items()}
    h = sd.nn.relu(sd.cnn.conv2d(x, v["w1"], v["b1"]))
    h = sd.cnn.maxPooling2d(h, kernel=2, stride=2)
    h = sd.nn.relu(sd.cnn.conv2d(h, v["w2"], v["b2"]))
    h = sd.cnn.maxPooling2d(h, kernel=2, stride=2)
    logits = h.reshape(-1, 256).mmul(v["w3"]) + v["b3"]
    sd.loss.softmaxCrossEntropy("loss", y, logits)
    sd.setTrainingConfig(TrainingConfig(updater=Sgd(LR), feature_mapping=["x"],
                                        label_mapping=["y"]))
    return sd


def _w7_data() -> tuple[dict, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    p = lenet_params(rng)
    n = 20 * B
    xs = rng.random((n, 1, 28, 28), dtype=np.float32)
    return p, xs, np.eye(10, dtype=np.float32)[rng.integers(0, 10, n)]


def w7_nd4py(reps: int) -> dict:
    p, xs, ys = _w7_data()
    return {"ms": fit_iteration_ms(lenet_samediff(p), (xs, ys), B, reps)}


def w7_torch(reps: int) -> dict:
    import torch
    import torch.nn.functional as F
    p, xs, ys = _w7_data()
    xb, yb = xs[:B], ys[:B]
    tp = {k: torch.tensor(a.transpose(3, 2, 0, 1) if a.ndim == 4 else a, requires_grad=True)
          for k, a in p.items()}
    opt = torch.optim.SGD(tp.values(), lr=LR)
    xt, yt = torch.from_numpy(xb), torch.from_numpy(yb)

    def torch_step() -> None:
        h = F.max_pool2d(F.relu(F.conv2d(xt, tp["w1"], tp["b1"])), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, tp["w2"], tp["b2"])), 2)
        logits = h.reshape(-1, 256) @ tp["w3"] + tp["b3"]
        loss = -(yt * F.log_softmax(logits, 1)).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {"ms": median_ms(torch_step, reps * 5)}


def w7_jax(reps: int) -> dict:
    import jax
    import jax.numpy as jnp
    p, xs, ys = _w7_data()
    xb, yb = xs[:B], ys[:B]

    def loss_fn(q, x, y):
        dn = ("NCHW", "HWIO", "NCHW")
        h = jax.lax.conv_general_dilated(x, q["w1"], (1, 1), "VALID", dimension_numbers=dn)
        h = jax.nn.relu(h + q["b1"][:, None, None])
        h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        h = jax.lax.conv_general_dilated(h, q["w2"], (1, 1), "VALID", dimension_numbers=dn)
        h = jax.nn.relu(h + q["b2"][:, None, None])
        h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        logits = h.reshape(-1, 256) @ q["w3"] + q["b3"]
        return -(y * jax.nn.log_softmax(logits)).sum(1).mean()

    @jax.jit
    def jax_step(q, x, y):
        g = jax.grad(loss_fn)(q, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - LR * b, q, g)
    jq = {k: jnp.asarray(a) for k, a in p.items()}
    xj, yj = jnp.asarray(xb), jnp.asarray(yb)
    state = {"q": jq}

    def run() -> None:
        state["q"] = jax_step(state["q"], xj, yj)
        jax.block_until_ready(state["q"])
    return {"ms": median_ms(run, reps * 5)}


#: (table, row) -> the function measuring it, in its own process
ROWS = {"conv": {"nd4py": conv_nd4py, "numpy per-tap NHWC": conv_numpy,
                 "torch eager": conv_torch, "jax.jit": conv_jax},
        "w7": {"nd4py fit": w7_nd4py, "torch eager": w7_torch, "jax.jit": w7_jax}}


def run_row(table: str, row: str, reps: int) -> dict | None:
    """One row in a fresh process; None when its library is not installed."""
    done = subprocess.run([sys.executable, __file__, "--row", table, row, "--reps", str(reps)],
                          capture_output=True, text=True, check=True)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out or None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--row", nargs=2, metavar=("TABLE", "ROW"), help=argparse.SUPPRESS)
    parser.add_argument("--reps", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:  # a child process: measure one row, print it as JSON
        try:
            print(json.dumps(ROWS[args.row[0]][args.row[1]](args.reps)))
        except ImportError:
            print(json.dumps({}))
        return
    results = {}
    for table, reps in (("conv", 5 if args.quick else 15), ("w7", 3 if args.quick else 7)):
        results[table] = {name: r for name in ROWS[table]
                          if (r := run_row(table, name, reps)) is not None}
    conv, w7 = results["conv"], results["w7"]
    extra_mb, tap_mb = peak_extra_mb(), N * HW * HW * O * 4 / 2 ** 20
    base = conv["nd4py"]["ms"]
    print(f"conv2d 3x3 pad 1, ({N}, {C}, {HW}, {HW}) -> {O}, float32 NCHW (median ms, each row "
          f"in its own process)")
    for name, r in conv.items():
        print(f"  {name:20s} {r['ms']:8.2f}   nd4py is {base / r['ms']:.2f}x this")
    print(f"  max |nd4py - numpy| {conv['nd4py']['max_abs_err_vs_numpy']:.1e}; peak memory above "
          f"the output {extra_mb:.1f} MiB (one tap-sized buffer: {tap_mb:.1f} MiB)")
    base = w7["nd4py fit"]["ms"]
    print(f"W7 LeNet train step, batch {B} (median ms per iteration)")
    for name, r in w7.items():
        print(f"  {name:20s} {r['ms']:8.2f}   nd4py is {base / r['ms']:.2f}x this")
    if args.json:
        print(json.dumps({**results, "peak_extra_mb": extra_mb, "tap_buffer_mb": tap_mb},
                         indent=1))


if __name__ == "__main__":
    main()
