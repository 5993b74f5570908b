"""The helper thread under load: split kernels with the helper vs on one thread, on a quiet
machine and with another process spinning on one core.

Rows (float32):

* **W7 fit**: the LeNet training step of ``bench_cnn.py`` through ``SameDiff.fit``, per
  iteration (its convolutions, pooling and adjoints split over the helper);
* **matmul**: (512, 1024) x (1024, 512) on the private BLAS, split by rows
  (``samediff.kernels.matmul.matmul2d``);
* **conv2d**: a 3x3 pad-1 forward, (8, 16, 28, 28) -> 16 channels, NCHW (``nd.cnn.conv2d``).

Each sample runs a row with the helper and then without it (or the other way round,
alternating), in one process: ``workers._ENABLED`` is the switch ``ND4PY_WORKERS=1`` sets at
import (every split then runs its two halves in turn, with the same arithmetic). A row's
figure is the median of its samples per mode and the median of the paired ratios
helper / one thread (below 1.0: the helper pays). Goal: <= 1.0 in both states.

"loaded": a busy Python loop (``while True: pass``, which also ends with this process) pinned to the last CPU (``taskset``, or
``os.sched_setaffinity``), started before and killed after the loaded samples. "quiet" means
nothing of ours runs beside: other users of the machine still do -- read the quiet rows with
the machine's load average, printed with them.

Run: ``python benchmarks/bench_split_load.py [--quick] [--json] [--states quiet,loaded]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from bench_cnn import B, _w7_data, lenet_samediff  # noqa: E402


def w7_row() -> Callable[[], float]:
    """One ``fit`` epoch (20 batches) per sample; ms per iteration."""
    p, xs, ys = _w7_data()
    sd = lenet_samediff(p)
    sd.fit((xs, ys), epochs=1, batch_size=B, verbose=0)  # compiles (not timed)
    n_batches = len(xs) // B

    def sample() -> float:
        t0 = time.perf_counter()
        sd.fit((xs, ys), epochs=1, batch_size=B, verbose=0)
        return (time.perf_counter() - t0) * 1e3 / n_batches
    return sample


def _repeat(fn: Callable[[], object], calls: int) -> Callable[[], float]:
    """Mean ms per call over ``calls`` calls, per sample."""
    def sample() -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t0) * 1e3 / calls
    return sample


def matmul_row() -> Callable[[], float]:
    from samediff.kernels.matmul import matmul2d
    from samediff.kernels.routes import force
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 1024), dtype=np.float32)
    b = rng.standard_normal((1024, 512), dtype=np.float32)

    def private() -> np.ndarray | None:  # the split route, whatever this machine measured
        with force("matmul", "private"):
            return matmul2d(a, b)
    if private() is None:
        raise ImportError("no private BLAS: the matmul does not split here")
    return _repeat(private, 10)


def conv_row() -> Callable[[], float]:
    import nd4py as nd
    rng = np.random.default_rng(0)
    x = nd.create(rng.standard_normal((8, 16, 28, 28), dtype=np.float32))
    w = nd.create(rng.standard_normal((3, 3, 16, 16), dtype=np.float32) * 0.1)
    nd.cnn.conv2d(x, w, padding=1)
    return _repeat(lambda: nd.cnn.conv2d(x, w, padding=1), 20)


ROWS = {"W7 fit (ms/iter)": w7_row, "matmul 512x1024x512": matmul_row,
        "conv2d 8x16x28x28 3x3": conv_row}


def paired(sample: Callable[[], float], pairs: int) -> tuple[list, list]:
    """``pairs`` samples with the helper and as many on one thread, alternating which runs
    first (after one untimed sample of each)."""
    from samediff.kernels import workers
    real = workers._ENABLED
    on, off = [], []
    try:
        for mode in (True, False):  # warm both modes up (untimed)
            workers._ENABLED = real and mode
            sample()
        for k in range(pairs):
            for mode in ((True, False) if k % 2 == 0 else (False, True)):
                workers._ENABLED = real and mode
                (on if mode else off).append(sample())
    finally:
        workers._ENABLED = real
    return on, off


def summary(on: list[float], off: list[float]) -> dict:
    """Medians per mode, the median paired ratio helper / one thread and its quartiles."""
    ratios = [a / b for a, b in zip(on, off)]
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return {"helper_ms": statistics.median(on), "serial_ms": statistics.median(off),
            "ratio": statistics.median(ratios), "ratio_q1_q3": [q[0], q[2]],
            "pairs": len(ratios)}


class _Busy:
    """A process spinning on the last CPU for the duration of a ``with`` block."""

    def __enter__(self) -> "_Busy":
        cpu = (os.cpu_count() or 1) - 1
        # busy until killed, or until this process is gone (an interrupted benchmark)
        cmd = [sys.executable, "-c", "import os\np = os.getppid()\nwhile os.getppid() == p:\n"
               "    for _ in range(1 << 20): pass"]
        pin = None
        if hasattr(os, "sched_setaffinity"):
            def pin() -> None:
                os.sched_setaffinity(0, {cpu})
        self.proc = subprocess.Popen(cmd, preexec_fn=pin)
        time.sleep(0.3)  # running before the first sample
        return self

    def __exit__(self, *exc) -> None:
        self.proc.kill()
        self.proc.wait()


def _measure(samplers: dict, into: dict, pairs: int) -> None:
    for name, sample in samplers.items():
        on, off = paired(sample, pairs)
        into[name][0].extend(on)
        into[name][1].extend(off)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--states", default="quiet,loaded")
    parser.add_argument("--rows", default=",".join(ROWS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    pairs = 5 if args.quick else 15
    from samediff.kernels import workers
    samplers = {}
    for name in args.rows.split(","):
        try:
            samplers[name] = ROWS[name]()
        except ImportError as exc:
            print(f"  {name}: skipped ({exc})")
    results: dict = {"spin_us": workers.SPIN_US, "cpus": os.cpu_count(),
                     "helper": workers.enabled()}
    # states alternate too: quiet, loaded, quiet, loaded... (a drifting machine hits both)
    states = args.states.split(",")
    rounds = 1 if args.quick else 3
    per_round = max(1, pairs // rounds)
    raw: dict = {s: {n: ([], []) for n in samplers} for s in states}
    loads: dict = {s: [] for s in states}
    for _ in range(rounds):
        for state in states:
            loads[state].append(os.getloadavg()[0] if hasattr(os, "getloadavg") else -1)
            if state == "loaded":
                with _Busy():
                    _measure(samplers, raw[state], per_round)
            else:
                _measure(samplers, raw[state], per_round)
    for state in states:
        results[state] = {"load_average": loads[state]}
        print(f"{state} (load average at start of each round: "
              f"{', '.join(f'{x:.1f}' for x in loads[state])}; {os.cpu_count()} CPUs)")
        print(f"  {'row':24s} {'helper':>9s} {'1 thread':>9s}  helper/1 thread (q1-q3)")
        for name in samplers:
            r = results[state][name] = summary(*raw[state][name])
            q1, q3 = r["ratio_q1_q3"]
            print(f"  {name:24s} {r['helper_ms']:9.3f} {r['serial_ms']:9.3f}  {r['ratio']:.2f} "
                  f"({q1:.2f}-{q3:.2f}, {r['pairs']} pairs)")
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
