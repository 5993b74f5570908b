"""Time to first result and time to full speed, cold kernel cache, per compile mode.

Each row runs in a fresh process with an empty kernel cache (``ND4PY_CACHE_DIR`` and
``NUMBA_CACHE_DIR`` in a new temporary directory), so its first call pays for every compile:

* **W1** ``gelu(x * a + b)`` on 4M float32 through ``@nd.compile``: calls in a loop;
* **W3** the 784-256-10 MLP training step (batch 128, SGD) through ``fit``;
* **W7** the LeNet training step (batch 32, SGD) through ``fit``;
* **W8** the LSTM training step (T 32, batch 32, in 64, hidden 128, last state -> dense 10,
  SGD; ``bench_sequence``'s) through ``fit``, over 8 batches repeated;
* **W9** a pre-LN transformer block's training step (batch 8, seq 128, d 256, 4 heads, GELU
  MLP x4, SGD) through ``fit`` (``workloads.py``), over 8 batches repeated for 12 epochs.

Per mode (``sync``: the first call compiles before it answers; ``background``: it answers from
the interpreter while the kernels compile on a thread, ``samediff/compiler/tiered.py``):
*first* = seconds until the first result (the first iteration of ``fit``, after ``fit``'s own
set-up), *full speed* = seconds until the first call whose time is within 1.5x of the
steady-state median, and the interpreter's own first and steady calls (``interpret`` mode)
for the goal "the first call costs <= 2x the interpreter's run".

In ``background`` mode the kernels layer's own Numba functions (the private BLAS's matmul
halves, the all-finite check, the convolution and pooling drivers) do not block either: numpy's
routes run while they compile on the same thread (``samediff/kernels/compiling.py``).

*library*: ``cold``, an empty cache (a new machine: the kernels layer's own functions -- the
private BLAS's matmul halves, the worker hand-off, the all-finite check, the element functions
-- compile too); ``primed``, Numba's cache already holds those, compiled by an earlier process
that trained another model (W3), as on any machine where nd4py has run before (the plan's own
kernels still compile).

Run: ``python benchmarks/bench_first_call.py [--rows W1,W3,W7,W8,W9] [--modes sync,background]
[--library cold,primed] [--json]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _times_w1(mode: str, calls: int) -> list[float]:
    import numpy as np
    import nd4py as nd
    rng = np.random.default_rng(0)
    x = nd.create(rng.random(1 << 22, dtype=np.float32))
    a, b = nd.create(np.float32(1.5)), nd.create(np.float32(0.25))

    @nd.compile
    def w1(x, a, b):
        return nd.nn.gelu(x * a + b)

    out = []
    with nd.compile_mode(mode):
        for _ in range(calls):
            t0 = time.perf_counter()
            w1(x, a, b).numpy()
            out.append(time.perf_counter() - t0)
            if mode == "background" and w1.last_plan.compiled and len(out) > calls // 2:
                break
            if mode == "background" and not w1.last_plan.compiled:
                time.sleep(0.01)  # a user's other work between calls; the compile goes on
    return out


def _fit_times(sd, data, batch: int, mode: str, iterations: int, epochs: int = 1) -> list[float]:
    import nd4py as nd
    from samediff.training.listeners import LambdaListener
    stamps: list[float] = []
    starts: list[float] = []
    listener = LambdaListener(
        on_epoch_start=lambda t, e: starts.append(time.perf_counter()),
        on_iteration_end=lambda t, i, loss: stamps.append(time.perf_counter()))
    deadline = time.perf_counter() + 300
    with nd.compile_mode(mode):
        sd.fit(data, epochs=epochs, batch_size=batch, shuffle=False, verbose=0,
               listeners=[listener])
        # background: train on (the same batches again) until the compiled plans have swapped
        # in, then an epoch more, so that "full speed" is the compiled plans' speed
        while mode == "background" and time.perf_counter() < deadline:
            compiling = nd.cache_stats()["tiered_compiling"]
            sd.fit(data, epochs=1, batch_size=batch, shuffle=False, verbose=0,
                   listeners=[listener])
            if not compiling:
                break
    times, last = [], starts[0]
    for s in stamps:
        times.append(s - last)
        last = s
    return times


def _times_w3(mode: str, iterations: int) -> list[float]:
    import numpy as np
    sys.path.insert(0, HERE)
    from bench_training import B, C, D, build, init
    rng = np.random.default_rng(0)
    params = init(rng)
    xs = rng.random((iterations * B, D), dtype=np.float32)
    ys = np.eye(C, dtype=np.float32)[rng.integers(0, C, iterations * B)]
    return _fit_times(build(params), (xs, ys), B, mode, iterations)


def _times_w7(mode: str, iterations: int) -> list[float]:
    import numpy as np
    sys.path.insert(0, HERE)
    from bench_cnn import B, lenet_params, lenet_samediff
    rng = np.random.default_rng(1)
    xs = rng.random((iterations * B, 1, 28, 28), dtype=np.float32)
    ys = np.eye(10, dtype=np.float32)[rng.integers(0, 10, iterations * B)]
    return _fit_times(lenet_samediff(lenet_params(rng)), (xs, ys), B, mode, iterations)


def _times_w9(mode: str, iterations: int) -> list[float]:
    import numpy as np
    sys.path.insert(0, HERE)
    from workloads import W9_BATCH, w9_data, w9_params, w9_samediff
    rng = np.random.default_rng(2)
    batches = 8  # the same batches again each epoch: the data stay small (2 x 8 MB)
    return _fit_times(w9_samediff(w9_params(rng)), w9_data(rng, batches * W9_BATCH), W9_BATCH,
                      mode, iterations, epochs=-(-iterations // batches))


def _times_w8(mode: str, iterations: int) -> list[float]:
    import numpy as np
    import nd4py as nd
    from samediff import SameDiff
    from samediff.training import TrainingConfig
    from samediff.training.updaters import Sgd
    sys.path.insert(0, HERE)
    from bench_sequence import B, C, I, LR, P, T
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.FLOAT, -1, T, I)  # batch-major, as fit slices it
    y = sd.placeholder("y", nd.FLOAT, -1, C)
    v = {k: sd.var(k, a.copy()) for k, a in P.items()}
    _, h, _ = sd.rnn.lstm_layer(x, v["W"], v["R"], v["b"], data_format="NTS")
    sd.loss.softmax_cross_entropy("loss", y, h.mmul(v["Wd"]) + v["bd"])
    sd.set_training_config(TrainingConfig(updater=Sgd(LR), feature_mapping=["x"],
                                          label_mapping=["y"]))
    rng = np.random.default_rng(3)
    batches = 8
    xs = rng.normal(size=(batches * B, T, I)).astype(np.float32)
    ys = np.eye(C, dtype=np.float32)[rng.integers(0, C, batches * B)]
    return _fit_times(sd, (xs, ys), B, mode, iterations, epochs=-(-iterations // batches))


ROWS = {"W1": (_times_w1, 400), "W3": (_times_w3, 400), "W7": (_times_w7, 300),
        "W8": (_times_w8, 96), "W9": (_times_w9, 96)}


def child(row: str, mode: str) -> dict:
    fn, n = ROWS[row]
    times = fn(mode, n)
    steady = statistics.median(times[-max(5, len(times) // 5):])
    elapsed, full = 0.0, None
    for t in times:
        elapsed += t
        if full is None and t <= 1.5 * steady:
            full = elapsed
    return {"first_s": times[0], "full_speed_s": full, "steady_ms": steady * 1e3,
            "calls": len(times)}


#: the model whose run fills the library's cache for ``--library primed``
PRIMER = "W3"


def run_child(row: str, mode: str, library: str = "cold") -> dict:
    """One child on an empty kernel cache; ``library="primed"``: Numba's cache already holds
    the kernels layer's functions (and the element functions), compiled by an earlier
    process that trained another model (``PRIMER``), as on any machine where nd4py has run
    before -- the plan's own kernels still compile."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "ND4PY_CACHE_DIR": os.path.join(cache, "plans"),
               "NUMBA_CACHE_DIR": os.path.join(cache, "numba")}
        if library == "primed":
            _run([sys.executable, __file__, "--child", PRIMER, "sync"],
                 {**env, "ND4PY_CACHE_DIR": os.path.join(cache, "primer")}, f"{PRIMER} primer")
        out = _run([sys.executable, __file__, "--child", row, mode], env, f"{row} {mode}")
    return json.loads(out.strip().splitlines()[-1])


def _run(command: list, env: dict, what: str) -> str:
    out = subprocess.run(command, env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{what}: the child failed (exit {out.returncode}):\n"
                           f"{out.stderr[-4000:]}")
    return out.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="W1,W3,W7,W8,W9")
    parser.add_argument("--modes", default="sync,background")
    parser.add_argument("--library", default="cold",
                        help="cold (an empty cache: a new machine) and/or primed (the kernels "
                             f"layer cached by an earlier {PRIMER} run), comma-separated")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    results = {}
    print(f"{'row':4} {'mode':11} {'library':8} {'first result':>13} {'full speed':>11} "
          f"{'steady':>10}  first result / the interpreter's first (and steady) call")
    for row in args.rows.split(","):
        interp = run_child(row, "interpret")
        results[(row, "interpret", "cold")] = interp
        for mode in args.modes.split(","):
            for library in args.library.split(","):
                r = results[(row, mode, library)] = run_child(row, mode, library)
                first = r["first_s"] / interp["first_s"]
                steady = r["first_s"] / (interp["steady_ms"] / 1e3)
                full = f"{r['full_speed_s']:.2f} s" if r["full_speed_s"] is not None else "—"
                print(f"{row:4} {mode:11} {library:8} {r['first_s']:11.3f} s {full:>11} "
                      f"{r['steady_ms']:8.2f} ms  {first:.1f}x "
                      f"({interp['first_s'] * 1e3:.0f} ms), "
                      f"{steady:.1f}x ({interp['steady_ms']:.2f} ms)")
    if args.json:
        print(json.dumps({"/".join(k): v for k, v in results.items()}))


if __name__ == "__main__":
    main()
